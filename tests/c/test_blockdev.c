/* Block devices (B-2, B-3, B-5, B-7): the extent allocator (first fit,
 * alignment, coalescing, exhaustion) and the positional I/O loop (short
 * transfers, EINTR, zero-byte completions, errors) through fault injection
 * on a regular file, plus the refusals of sw_blockdev_open. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "strideweave/alloc.h"
#include "strideweave/executor.h"
#include "blockdev_internal.h" /* the device layer is internal */
#include "strideweave/testing.h"

static void test_round_up(void)
{
    int64_t v;
    CHECK(sw_extent_round_up(0, 512, &v) && v == 0);
    CHECK(sw_extent_round_up(1, 512, &v) && v == 512);
    CHECK(sw_extent_round_up(512, 512, &v) && v == 512);
    CHECK(sw_extent_round_up(513, 4096, &v) && v == 4096);
    CHECK(!sw_extent_round_up(INT64_MAX - 10, 4096, &v));
    CHECK(!sw_extent_round_up(-1, 512, &v));
}

/* B-3: lowest fitting offset, aligned start and length. */
static void test_first_fit_alignment(void)
{
    sw_extent_map m;
    sw_extent_map_init(&m, 16 * 4096, 4096);
    int64_t s, l;
    sw_error err;
    CHECK_EQ_I64(sw_extent_map_alloc(&m, 4, &s, &l, &err), SW_OK);
    CHECK_EQ_I64(s, 0);
    CHECK_EQ_I64(l, 4096);
    CHECK_EQ_I64(sw_extent_map_alloc(&m, 4097, &s, &l, &err), SW_OK);
    CHECK_EQ_I64(s, 4096);
    CHECK_EQ_I64(l, 8192);
    CHECK_EQ_I64(sw_extent_map_alloc(&m, 4096, &s, &l, &err), SW_OK);
    CHECK_EQ_I64(s, 3 * 4096);
    /* size 0 reserves nothing */
    CHECK_EQ_I64(sw_extent_map_alloc(&m, 0, &s, &l, &err), SW_OK);
    CHECK_EQ_I64(l, 0);
    CHECK_EQ_I64((long long)m.count, 3);
    /* a hole at the front is reused first, a larger request skips it */
    CHECK_EQ_I64(sw_extent_map_free(&m, 0, &err), SW_OK);
    CHECK_EQ_I64(sw_extent_map_alloc(&m, 8192, &s, &l, &err), SW_OK);
    CHECK_EQ_I64(s, 4 * 4096);
    CHECK_EQ_I64(sw_extent_map_alloc(&m, 100, &s, &l, &err), SW_OK);
    CHECK_EQ_I64(s, 0);
    for (size_t i = 0; i + 1 < m.count; i++) {
        CHECK(m.items[i].start + m.items[i].length <= m.items[i + 1].start);
        CHECK(m.items[i].start % 4096 == 0 && m.items[i].length % 4096 == 0);
    }
    CHECK_EQ_I64(sw_extent_map_free(&m, 12345, &err), SW_EINVAL);
    sw_extent_map_destroy(&m);
}

/* A map of n 512-byte units, all taken one by one: starts in s. */
static void fill_units(sw_extent_map *m, int n, int64_t *s)
{
    int64_t l;
    sw_error err;
    sw_extent_map_init(m, n * 512, 512);
    for (int i = 0; i < n; i++)
        CHECK_EQ_I64(sw_extent_map_alloc(m, 512, &s[i], &l, &err), SW_OK);
}

/* Freeing finds each extent by its start among many, in any order; a
 * start inside an extent, past the last or before the first is refused. */
static void test_free_among_many(void)
{
    enum { N = 37 };
    sw_extent_map m;
    int64_t s[N];
    sw_error err;
    fill_units(&m, N, s);
    CHECK_EQ_I64(sw_extent_map_free(&m, 256, &err), SW_EINVAL);
    CHECK_EQ_I64(sw_extent_map_free(&m, N * 512, &err), SW_EINVAL);
    CHECK_EQ_I64(sw_extent_map_free(&m, -512, &err), SW_EINVAL);
    /* every 7th index mod N visits all of them in a scrambled order */
    for (int k = 0; k < N; k++) {
        int i = (k * 7 + 3) % N;
        CHECK_EQ_I64(sw_extent_map_free(&m, s[i], &err), SW_OK);
        CHECK_EQ_I64(sw_extent_map_free(&m, s[i], &err), SW_EINVAL); /* only once */
        CHECK_EQ_I64((long long)m.count, N - 1 - k);
        for (size_t j = 0; j + 1 < m.count; j++)
            CHECK(m.items[j].start < m.items[j + 1].start);
    }
    sw_extent_map_destroy(&m);
}

/* B-7: freed neighbours form one range a larger request can use. */
static void test_coalescing(void)
{
    sw_extent_map m;
    sw_extent_map_init(&m, 4 * 512, 512);
    int64_t s[4], l;
    sw_error err;
    for (int i = 0; i < 4; i++)
        CHECK_EQ_I64(sw_extent_map_alloc(&m, 512, &s[i], &l, &err), SW_OK);
    CHECK_EQ_I64(sw_extent_map_alloc(&m, 512, &s[0], &l, &err), SW_ENOMEM);
    CHECK_EQ_I64(sw_extent_map_free(&m, 512, &err), SW_OK);
    CHECK_EQ_I64(sw_extent_map_free(&m, 1024, &err), SW_OK);
    int64_t big;
    CHECK_EQ_I64(sw_extent_map_alloc(&m, 1024, &big, &l, &err), SW_OK);
    CHECK_EQ_I64(big, 512);
    CHECK_EQ_I64(sw_extent_map_free(&m, 0, &err), SW_OK);
    CHECK_EQ_I64(sw_extent_map_free(&m, 512, &err), SW_OK);
    CHECK_EQ_I64(sw_extent_map_free(&m, 1536, &err), SW_OK);
    CHECK_EQ_I64(sw_extent_map_alloc(&m, 4 * 512, &big, &l, &err), SW_OK);
    CHECK_EQ_I64(big, 0);
    sw_extent_map_destroy(&m);
}

/* B-3, B-7: a freed extent's slot stays in the table (length 0) until
 * freed slots outnumber live ones, so freeing in allocation order (one
 * moved-out carrier after another) moves no other slot; first fit, the
 * order and one free per extent hold throughout (against a unit map). */
static void test_freed_slots(void)
{
    enum { N = 64 };
    sw_extent_map m;
    int64_t s[N], l;
    sw_error err;
    fill_units(&m, N, s);
    for (int i = 0; i < N / 2; i++) {
        CHECK_EQ_I64(sw_extent_map_free(&m, s[i], &err), SW_OK);
        CHECK_EQ_I64(sw_extent_map_free(&m, s[i], &err), SW_EINVAL);
    }
    CHECK_EQ_I64((long long)m.count, N / 2);
    CHECK_EQ_I64((long long)m.used, N); /* kept in place, not shifted */
    CHECK_EQ_I64(m.items[N / 2].start, s[N / 2]);
    /* A new extent takes the lowest freed range, in a freed slot. */
    int64_t again;
    CHECK_EQ_I64(sw_extent_map_alloc(&m, 1024, &again, &l, &err), SW_OK);
    CHECK_EQ_I64(again, 0);
    CHECK_EQ_I64((long long)m.used, N);
    CHECK_EQ_I64(sw_extent_map_free(&m, again, &err), SW_OK);
    /* One more freed than live: compacted to the live ones. */
    CHECK_EQ_I64(sw_extent_map_free(&m, s[N / 2], &err), SW_OK);
    CHECK_EQ_I64((long long)m.used, m.count);
    for (int i = N / 2 + 1; i < N; i++)
        CHECK_EQ_I64(sw_extent_map_free(&m, s[i], &err), SW_OK);
    CHECK_EQ_I64((long long)m.count, 0);
    CHECK_EQ_I64((long long)m.used, 0);
    sw_extent_map_destroy(&m);
}

/* B-3, B-7: random allocations and frees against a map of 512-byte units:
 * every allocation lands where first fit over the units says, and the
 * slots stay sorted by start, freed ones among them. */
static void test_freed_slots_keep_first_fit(void)
{
    enum { UNITS = 256 };
    sw_extent_map m;
    int64_t l;
    sw_error err;
    sw_extent_map_init(&m, UNITS * 512, 512);
    char unit[UNITS] = {0};
    int64_t live[UNITS], live_units[UNITS];
    int nlive = 0;
    unsigned seed = 12345;
    for (int step = 0; step < 4000; step++) {
        seed = seed * 1103515245u + 12345u;
        unsigned r = seed >> 16;
        if (nlive && (r & 1)) {
            int k = (int)((r >> 1) % (unsigned)nlive);
            int64_t at = live[k];
            CHECK_EQ_I64(sw_extent_map_free(&m, at, &err), SW_OK);
            for (int64_t v = 0; v < live_units[k]; v++)
                unit[at / 512 + v] = 0;
            live_units[k] = live_units[nlive - 1];
            live[k] = live[--nlive];
            continue;
        }
        int64_t want = (int64_t)(1 + (r >> 1) % 4);
        int64_t expect = -1;
        for (int64_t u = 0; u + want <= UNITS && expect < 0; u++) {
            int64_t v = 0;
            while (v < want && !unit[u + v])
                v++;
            if (v == want)
                expect = u;
        }
        int64_t got;
        sw_status st = sw_extent_map_alloc(&m, want * 512, &got, &l, &err);
        if (expect < 0) {
            CHECK_EQ_I64(st, SW_ENOMEM);
            continue;
        }
        CHECK_EQ_I64(st, SW_OK);
        CHECK_EQ_I64(got, expect * 512);
        for (int64_t v = 0; v < want; v++)
            unit[expect + v] = 1;
        live_units[nlive] = want;
        live[nlive++] = got;
        for (size_t j = 0; j + 1 < m.used; j++)
            CHECK(m.items[j].start < m.items[j + 1].start);
    }
    sw_extent_map_destroy(&m);
}

/* B-3: none fits → ENOMEM, and byte overflow → EOVERFLOW; nothing kept. */
static void test_exhaustion(void)
{
    sw_extent_map m;
    sw_extent_map_init(&m, 8192, 4096);
    int64_t s, l;
    sw_error err;
    CHECK_EQ_I64(sw_extent_map_alloc(&m, 8193, &s, &l, &err), SW_ENOMEM);
    CHECK_EQ_I64((long long)m.count, 0);
    CHECK_EQ_I64(sw_extent_map_alloc(&m, INT64_MAX, &s, &l, &err), SW_EOVERFLOW);
    CHECK_EQ_I64(sw_extent_map_alloc(&m, 8192, &s, &l, &err), SW_OK);
    CHECK_EQ_I64(sw_extent_map_alloc(&m, 1, &s, &l, &err), SW_ENOMEM);
    CHECK_EQ_I64((long long)m.count, 1);
    /* many small extents grow the table */
    sw_extent_map_destroy(&m);
    sw_extent_map_init(&m, 1000 * 512, 512);
    for (int i = 0; i < 1000; i++) {
        CHECK_EQ_I64(sw_extent_map_alloc(&m, 512, &s, &l, &err), SW_OK);
        CHECK_EQ_I64(s, (int64_t)i * 512);
    }
    CHECK_EQ_I64(sw_extent_map_alloc(&m, 512, &s, &l, &err), SW_ENOMEM);
    sw_extent_map_destroy(&m);
}

static int temp_file(char *path)
{
    strcpy(path, "/tmp/sw-blockdev-test-XXXXXX");
    int fd = mkstemp(path);
    if (fd >= 0 && ftruncate(fd, 1 << 16) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* A device set up by hand over a regular file (fdatasync works on one
 * too), for the transfer layer's tests: `fd` from temp_file, or -1 when
 * it could not be made (the test then stops). */
static int fake_device(sw_blockdev *d, char *path)
{
    int fd = temp_file(path);
    CHECK(fd >= 0);
    memset(d, 0, sizeof *d);
    d->fd = fd;
    d->dfd = -1;
    atomic_init(&d->faulted, 0);
    pthread_mutex_init(&d->lock, NULL);
    pthread_cond_init(&d->idle, NULL);
    pthread_mutex_init(&d->flush_lock, NULL);
    pthread_cond_init(&d->flush_cv, NULL);
    return fd;
}

static void fake_device_close(sw_blockdev *d, const char *path)
{
    pthread_cond_destroy(&d->flush_cv);
    pthread_mutex_destroy(&d->flush_lock);
    pthread_cond_destroy(&d->idle);
    pthread_mutex_destroy(&d->lock);
    close(d->fd);
    unlink(path);
}

/* B-5: short transfers and EINTR are continued; zero bytes and errors are
 * reported with their own codes. */
static void test_io_loop(void)
{
    char path[64];
    int fd = temp_file(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    unsigned char out[4096], in[4096];
    for (int i = 0; i < 4096; i++)
        out[i] = (unsigned char)(i * 7 + 1);
    sw_error err;
    CHECK_EQ_I64(sw_blockdev_pwrite(fd, out, sizeof out, 512, &err), SW_OK);
    CHECK_EQ_I64(sw_blockdev_pread(fd, in, sizeof in, 512, &err), SW_OK);
    CHECK(memcmp(in, out, sizeof in) == 0);
    if (sw_fault_enabled()) {
        memset(in, 0, sizeof in);
        CHECK_EQ_I64(sw_fault_arm("blockdev_short", 0, 5), SW_OK);
        CHECK_EQ_I64(sw_fault_arm("blockdev_eintr", 1, 3), SW_OK);
        CHECK_EQ_I64(sw_blockdev_pread(fd, in, sizeof in, 512, &err), SW_OK);
        CHECK(memcmp(in, out, sizeof in) == 0);
        CHECK(!sw_fault_hit("blockdev_eintr")); /* all three were used */
        sw_fault_clear();

        CHECK_EQ_I64(sw_fault_arm("blockdev_short", 0, 3), SW_OK);
        CHECK_EQ_I64(sw_fault_arm("blockdev_eintr", 0, 2), SW_OK);
        for (int i = 0; i < 4096; i++)
            out[i] = (unsigned char)(255 - i);
        CHECK_EQ_I64(sw_blockdev_pwrite(fd, out, sizeof out, 0, &err), SW_OK);
        sw_fault_clear();
        CHECK_EQ_I64(sw_blockdev_pread(fd, in, sizeof in, 0, &err), SW_OK);
        CHECK(memcmp(in, out, sizeof in) == 0);

        CHECK_EQ_I64(sw_fault_arm("blockdev_zero", 1, 1), SW_OK);
        CHECK_EQ_I64(sw_fault_arm("blockdev_short", 0, 1), SW_OK);
        CHECK_EQ_I64(sw_blockdev_pwrite(fd, out, sizeof out, 0, &err), SW_ESTATE);
        sw_fault_clear();

        CHECK_EQ_I64(sw_fault_arm("pread", 0, 1), SW_OK);
        CHECK_EQ_I64(sw_blockdev_pread(fd, in, sizeof in, 0, &err), SW_EIO);
        CHECK_EQ_I64(err.sys_errno, EIO);
        sw_fault_clear();
    }
    /* reading past the end completes with zero bytes */
    CHECK_EQ_I64(sw_blockdev_pread(fd, in, sizeof in, 1 << 16, &err), SW_ESTATE);
    /* a bad descriptor is an OS error */
    CHECK_EQ_I64(sw_blockdev_pwrite(-1, out, 4, 0, &err), SW_EIO);
    CHECK_EQ_I64(err.sys_errno, EBADF);
    close(fd);
    unlink(path);
}

/* B-2: refusals of open, and nothing left open. */
static void test_open_refusals(void)
{
    sw_blockdev *d = NULL;
    sw_error err;
    char path[64];
    int fd = temp_file(path);
    CHECK(fd >= 0);
    if (fd >= 0) {
        close(fd);
        CHECK_EQ_I64(sw_blockdev_open(path, &d, &err), SW_EINVAL);
        unlink(path);
    }
    CHECK_EQ_I64(sw_blockdev_open("/dev/null", &d, &err), SW_EINVAL);
    CHECK_EQ_I64(sw_blockdev_open("/tmp", &d, &err), SW_EINVAL);
    CHECK_EQ_I64(sw_blockdev_open("/nonexistent/sw-blockdev", &d, &err), SW_EIO);
    CHECK_EQ_I64(err.sys_errno, ENOENT);
    CHECK(d == NULL);
}

/* B-11: a transfer into the device is flushed before it reports success; a
 * failing flush faults the device and keeps the errno. */
static void test_transfer_flushes(void)
{
    char path[64];
    sw_blockdev d;
    int fd = fake_device(&d, path);
    if (fd < 0)
        return;
    float src[4] = {1.0f, 2.0f, 3.0f, 4.0f}, back[4] = {0};
    sw_transfer t;
    memset(&t, 0, sizeof t);
    t.src.kind = SW_ENDPOINT_HOST;
    t.src.host = src;
    t.dst.kind = SW_ENDPOINT_FILE;
    t.dst.fd = fd;
    t.dst.offset = 128;
    t.itemsize = 4;
    t.bulk = 1;
    t.cosize = 4;
    sw_error err;
    CHECK_EQ_I64(sw_blockdev_transfer(&d, &t, &err), SW_OK);
    CHECK_EQ_I64(sw_blockdev_pread(fd, back, sizeof back, 512, &err), SW_OK);
    CHECK(memcmp(back, src, sizeof back) == 0);
    CHECK(!sw_blockdev_is_faulted(&d));
    CHECK_EQ_I64(sw_blockdev_flush_locked(&d, &err), SW_OK);
    if (sw_fault_enabled()) {
        CHECK_EQ_I64(sw_fault_arm("blockdev_fdatasync", 0, 1), SW_OK);
        CHECK_EQ_I64(sw_blockdev_transfer(&d, &t, &err), SW_EIO);
        CHECK_EQ_I64(err.sys_errno, EIO);
        CHECK(sw_blockdev_is_faulted(&d));
        sw_fault_clear();
        atomic_store(&d.faulted, 0);
        /* a read from the device needs no flush */
        CHECK_EQ_I64(sw_fault_arm("blockdev_fdatasync", 0, 1), SW_OK);
        sw_transfer r = t;
        r.src = t.dst;
        r.dst.kind = SW_ENDPOINT_HOST;
        r.dst.host = back;
        r.dst.offset = 0;
        r.dst.fd = -1;
        CHECK_EQ_I64(sw_blockdev_transfer(&d, &r, &err), SW_OK);
        CHECK(sw_fault_hit("blockdev_fdatasync")); /* still armed: unused */
        sw_fault_clear();
    }
    fake_device_close(&d, path);
}

/* B-11 under load: writers on the pool share fdatasyncs. A pool of one
 * thread, the first write's fdatasync held at a pause point: the seven
 * writes queued behind it run meanwhile (the waiting writer leaves its
 * place in the pool, executor_internal.h) and take their tickets, and one
 * more fdatasync covers all seven: 2 in all, not 8. */
typedef struct write_job {
    sw_job job; /* first */
    sw_blockdev *d;
    sw_transfer t;
    float value;
    sw_status st;
} write_job;

static void write_job_run(sw_job *job)
{
    write_job *w = (write_job *)job;
    sw_error err;
    w->st = sw_blockdev_transfer(w->d, &w->t, &err);
}

static uint64_t tickets(sw_blockdev *d)
{
    pthread_mutex_lock(&d->flush_lock);
    uint64_t n = d->flush_tickets;
    pthread_mutex_unlock(&d->flush_lock);
    return n;
}

enum { WRITERS = 8 };

static void test_writers_share_flushes(void)
{
    if (!sw_fault_enabled()) {
        printf("test_writers_share_flushes skipped: it needs the fault-injection build\n");
        return;
    }
    char path[64];
    sw_blockdev d;
    int fd = fake_device(&d, path);
    if (fd < 0)
        return;
    sw_executor *ex = NULL;
    sw_error err;
    CHECK_EQ_I64(sw_executor_create(1, &ex, &err), SW_OK);
    CHECK_EQ_I64(sw_fault_arm("blockdev_fdatasync_pause", 0, 1), SW_OK);
    write_job jobs[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        jobs[i] = (write_job){.job.run = write_job_run, .d = &d, .value = (float)i + 0.5f};
        jobs[i].t.src.kind = SW_ENDPOINT_HOST;
        jobs[i].t.src.host = &jobs[i].value;
        jobs[i].t.dst.kind = SW_ENDPOINT_FILE;
        jobs[i].t.dst.fd = fd;
        jobs[i].t.dst.offset = 1024 * i; /* distinct ranges: none waits for another */
        jobs[i].t.itemsize = 4;
        jobs[i].t.bulk = 1;
        jobs[i].t.cosize = 1;
        CHECK_EQ_I64(sw_executor_submit(ex, &jobs[i].job, &err), SW_OK);
        if (i == 0)
            CHECK_EQ_I64(sw_fault_wait_paused(), SW_OK); /* the first flush, held */
    }
    for (int i = 0; i < 1000 && tickets(&d) < WRITERS; i++)
        usleep(10 * 1000);
    CHECK_EQ_I64(tickets(&d), WRITERS); /* all waiting for the held flush */
    sw_fault_resume();
    for (int i = 0; i < WRITERS; i++)
        CHECK(sw_executor_next_completed(ex, 1) != NULL);
    sw_executor_destroy(ex);
    sw_fault_clear();
    CHECK_EQ_I64(atomic_load(&d.flushes), 2);
    for (int i = 0; i < WRITERS; i++) {
        float back = 0;
        CHECK_EQ_I64(jobs[i].st, SW_OK);
        CHECK_EQ_I64(sw_blockdev_pread(fd, &back, 4, 4096 * i, &err), SW_OK);
        CHECK(back == jobs[i].value);
    }
    fake_device_close(&d, path);
}

int main(void)
{
    int64_t live = sw_alloc_live_bytes();
    test_round_up();
    test_first_fit_alignment();
    test_coalescing();
    test_free_among_many();
    test_freed_slots();
    test_freed_slots_keep_first_fit();
    test_exhaustion();
    test_io_loop();
    test_open_refusals();
    test_transfer_flushes();
    test_writers_share_flushes();
    CHECK_EQ_I64(sw_alloc_live_bytes(), live);
    return check_report("blockdev");
}
