/* Move kernels against a brute-force model: every endpoint pair, bulk and
 * elementwise, on flat, gapped, nested, transposed and broadcast layouts
 * with offsets; malformed descriptions, overflow, file errors, injected
 * I/O faults part way through a multi-chunk transfer, staging allocation
 * failures, and no leaks. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "strideweave/alloc.h"
#include "strideweave/parallel.h"
#include "transfer_internal.h" /* the kernels are internal */
#include "strideweave/testing.h"

/* ---- storage for one endpoint -------------------------------------------- */

typedef struct store {
    sw_endpoint_kind kind;
    unsigned char *host;
    int fd;
    size_t bytes;
} store;

static int temp_fd(void)
{
    char path[] = "/tmp/sw-transfer-test-XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0)
        unlink(path); /* the descriptor keeps it alive; nothing left behind */
    return fd;
}

static int write_all(int fd, const unsigned char *buf, size_t n, off_t at)
{
    while (n > 0) {
        ssize_t w = pwrite(fd, buf, n, at);
        if (w <= 0)
            return -1;
        buf += w;
        n -= (size_t)w;
        at += w;
    }
    return 0;
}

static int read_all(int fd, unsigned char *buf, size_t n, off_t at)
{
    while (n > 0) {
        ssize_t r = pread(fd, buf, n, at);
        if (r <= 0)
            return -1;
        buf += r;
        n -= (size_t)r;
        at += r;
    }
    return 0;
}

static void store_init(store *s, sw_endpoint_kind kind, const unsigned char *content,
                       size_t bytes)
{
    s->kind = kind;
    s->bytes = bytes;
    s->host = NULL;
    s->fd = -1;
    if (kind == SW_ENDPOINT_HOST) {
        s->host = malloc(bytes ? bytes : 1);
        memcpy(s->host, content, bytes);
    } else {
        s->fd = temp_fd();
        CHECK(s->fd >= 0);
        CHECK(write_all(s->fd, content, bytes, 0) == 0);
    }
}

/* The first `bytes` bytes of the storage; a file must be at least that long. */
static void store_read(const store *s, unsigned char *out, size_t bytes)
{
    if (s->kind == SW_ENDPOINT_HOST)
        memcpy(out, s->host, bytes);
    else
        CHECK(read_all(s->fd, out, bytes, 0) == 0);
}

static void store_free(store *s)
{
    free(s->host);
    if (s->fd >= 0)
        close(s->fd);
}

static sw_endpoint endpoint(const store *s, int64_t offset)
{
    sw_endpoint e = {s->kind, s->host, s->fd, offset};
    return e;
}

/* Source bytes never equal the destination's fill byte. */
#define FILL 0xEE

static unsigned char src_byte(size_t i)
{
    return (unsigned char)((i * 31 + 1) % 199);
}

/* ---- the brute-force model ---------------------------------------------- */

typedef struct layout_case {
    const char *name;
    int ndim;
    int64_t extents[4];
    int64_t strides[4];
    int64_t cosize;
} layout_case;

static const layout_case layouts[] = {
    {"flat", 1, {10}, {1}, 10},
    {"gapped", 2, {3, 4}, {1, 5}, 18},
    {"nested", 3, {2, 3, 2}, {1, 4, 16}, 26},
    {"transposed", 2, {3, 4}, {4, 1}, 12},
    {"broadcast", 2, {4, 3}, {0, 1}, 3},
    {"broadcast-gapped", 2, {3, 4}, {2, 0}, 5},
    {"scalar", 0, {0}, {0}, 1},
    {"unit-modes", 3, {1, 5, 1}, {7, 2, 9}, 9},
};

/* Mark (with 1) every slot the layout addresses, relative to its offset. */
static void addressed(const layout_case *L, unsigned char *mark)
{
    int64_t count = 1;
    for (int i = 0; i < L->ndim; i++)
        count *= L->extents[i];
    for (int64_t k = 0; k < count; k++) {
        int64_t rem = k, off = 0;
        for (int i = 0; i < L->ndim; i++) {
            off += (rem % L->extents[i]) * L->strides[i];
            rem /= L->extents[i];
        }
        mark[off] = 1;
    }
}

typedef struct case_args {
    const layout_case *L;
    size_t item;
    int64_t soff, doff;
    sw_endpoint_kind skind, dkind;
    int bulk;
} case_args;

static sw_transfer describe(const case_args *a, const store *src, const store *dst)
{
    sw_transfer t = {endpoint(src, a->soff), endpoint(dst, a->doff), a->item, a->bulk,
                     a->L->cosize, a->L->ndim, a->L->extents, a->L->strides, NULL, 0};
    return t;
}

static int run_case(const case_args *a)
{
    const layout_case *L = a->L;
    size_t item = a->item;
    size_t src_bytes = (size_t)(a->soff + L->cosize + 3) * item;
    size_t dst_bytes = (size_t)(a->doff + L->cosize + 3) * item;
    unsigned char *sinit = malloc(src_bytes), *dinit = malloc(dst_bytes);
    unsigned char *got = malloc(dst_bytes), *sback = malloc(src_bytes);
    unsigned char mark[64] = {0};
    for (size_t i = 0; i < src_bytes; i++)
        sinit[i] = src_byte(i);
    memset(dinit, FILL, dst_bytes);
    addressed(L, mark);

    store src, dst;
    store_init(&src, a->skind, sinit, src_bytes);
    store_init(&dst, a->dkind, dinit, dst_bytes);
    sw_transfer t = describe(a, &src, &dst);
    sw_error err;
    int failures = sw_checks_failed;
    CHECK_EQ_I64(sw_transfer_run(&t, &err), SW_OK);
    store_read(&dst, got, dst_bytes);
    store_read(&src, sback, src_bytes);
    CHECK(memcmp(sback, sinit, src_bytes) == 0); /* the source is untouched */

    size_t span_lo = (size_t)a->doff * item, span_hi = span_lo + (size_t)L->cosize * item;
    int bad = 0;
    for (size_t b = 0; b < dst_bytes; b++) {
        if (b < span_lo || b >= span_hi) {
            bad += got[b] != FILL; /* nothing outside the span is written */
            continue;
        }
        size_t slot = (b - span_lo) / item;
        unsigned char from_src = sinit[(size_t)a->soff * item + (b - span_lo)];
        if (a->bulk || mark[slot])
            bad += got[b] != from_src;
        else if (a->dkind == SW_ENDPOINT_HOST)
            bad += got[b] != FILL; /* host holes stay untouched */
        /* file holes are unspecified */
    }
    CHECK_EQ_I64(bad, 0);
    if (sw_checks_failed != failures)
        fprintf(stderr, "  in case %s item=%zu soff=%lld doff=%lld %d->%d bulk=%d\n",
                L->name, item, (long long)a->soff, (long long)a->doff, a->skind, a->dkind,
                a->bulk);
    store_free(&src);
    store_free(&dst);
    free(sinit);
    free(dinit);
    free(got);
    free(sback);
    return 1;
}

static void test_model(void)
{
    static const int64_t offsets[][2] = {{0, 0}, {5, 3}, {2, 7}};
    static const size_t items[] = {1, 4, 3};
    static const sw_endpoint_kind kinds[] = {SW_ENDPOINT_HOST, SW_ENDPOINT_FILE};
    int cases = 0;
    for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++)
        for (int o = 0; o < 3; o++)
            for (int it = 0; it < 3; it++)
                for (int sk = 0; sk < 2; sk++)
                    for (int dk = 0; dk < 2; dk++)
                        for (int bulk = 0; bulk < 2; bulk++) {
                            case_args a = {&layouts[l], items[it], offsets[o][0],
                                           offsets[o][1], kinds[sk], kinds[dk], bulk};
                            cases += run_case(&a);
                        }
    CHECK_EQ_I64(cases, 8 * 3 * 3 * 2 * 2 * 2);
}

/* A file destination may start empty: the transfer extends it. */
static void test_empty_destination_file(void)
{
    int64_t ext[1] = {4}, str[1] = {1};
    unsigned char src[4] = {1, 2, 3, 4}, got[6];
    int fd = temp_fd();
    sw_transfer t = {{SW_ENDPOINT_HOST, src, -1, 0}, {SW_ENDPOINT_FILE, NULL, fd, 2}, 1, 1, 4,
                     1, ext, str, NULL, 0};
    CHECK_EQ_I64(sw_transfer_run(&t, NULL), SW_OK);
    CHECK_EQ_I64(lseek(fd, 0, SEEK_END), 6);
    CHECK(read_all(fd, got, 6, 0) == 0);
    CHECK(got[0] == 0 && got[1] == 0 && memcmp(got + 2, src, 4) == 0);
    close(fd);
}

/* ---- malformed descriptions ---------------------------------------------- */

static sw_transfer valid_host_to_host(unsigned char *a, unsigned char *b,
                                      const int64_t *ext, const int64_t *str)
{
    sw_transfer t = {{SW_ENDPOINT_HOST, a, -1, 0}, {SW_ENDPOINT_HOST, b, -1, 0}, 1, 0, 4, 1,
                     ext, str, NULL, 0};
    return t;
}

static void expect_status(const sw_transfer *t, sw_status want, const char *needle)
{
    sw_error err;
    sw_error_clear(&err);
    CHECK_EQ_I64(sw_transfer_run(t, &err), want);
    CHECK_EQ_I64(err.code, want);
    if (needle && !strstr(err.msg, needle)) {
        fprintf(stderr, "  message \"%s\" lacks \"%s\"\n", err.msg, needle);
        CHECK(0);
    }
}

static void test_malformed(void)
{
    unsigned char a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[8] = {0};
    int64_t ext[1] = {4}, str[1] = {1};
    sw_transfer t;

    CHECK_EQ_I64(sw_transfer_run(NULL, NULL), SW_EINVAL);
    expect_status(NULL, SW_EINVAL, "NULL description");

    t = valid_host_to_host(a, b, ext, str);
    expect_status(&t, SW_OK, NULL);
    CHECK(memcmp(a, b, 4) == 0);

    t = valid_host_to_host(a, b, ext, str);
    t.src.kind = (sw_endpoint_kind)0;
    expect_status(&t, SW_EINVAL, "source endpoint kind");
    t = valid_host_to_host(a, b, ext, str);
    t.dst.kind = (sw_endpoint_kind)3;
    expect_status(&t, SW_EINVAL, "destination endpoint kind");
    t = valid_host_to_host(a, b, ext, str);
    t.src.offset = -1;
    expect_status(&t, SW_EINVAL, "negative source offset");
    t = valid_host_to_host(a, b, ext, str);
    t.dst.offset = -5;
    expect_status(&t, SW_EINVAL, "negative destination offset");
    t = valid_host_to_host(a, b, ext, str);
    t.itemsize = 0;
    expect_status(&t, SW_EINVAL, "itemsize");
    t = valid_host_to_host(a, b, ext, str);
    t.ndim = -1;
    expect_status(&t, SW_EINVAL, "ndim");
    t = valid_host_to_host(a, b, ext, str);
    t.ndim = 65;
    expect_status(&t, SW_EINVAL, "ndim");
    t = valid_host_to_host(a, b, ext, str);
    t.cosize = -1;
    expect_status(&t, SW_EINVAL, "cosize");
    t = valid_host_to_host(a, b, ext, str);
    t.src.host = NULL;
    expect_status(&t, SW_EINVAL, "NULL source host");
    t = valid_host_to_host(a, b, ext, str);
    t.dst.host = NULL;
    t.bulk = 1;
    expect_status(&t, SW_EINVAL, "NULL destination host");
    t = valid_host_to_host(a, b, ext, str);
    t.src.kind = SW_ENDPOINT_FILE;
    t.src.fd = -1;
    expect_status(&t, SW_EINVAL, "source file descriptor");
    t = valid_host_to_host(a, b, ext, str);
    t.dst.kind = SW_ENDPOINT_FILE;
    t.dst.fd = -3;
    expect_status(&t, SW_EINVAL, "destination file descriptor");
    t = valid_host_to_host(a, b, ext, str);
    t.extents = NULL;
    expect_status(&t, SW_EINVAL, "NULL extents");
    t = valid_host_to_host(a, b, ext, str);
    t.strides = NULL;
    t.bulk = 1;
    expect_status(&t, SW_EINVAL, "NULL extents");

    int64_t zero_ext[1] = {0}, neg_str[1] = {-1};
    t = valid_host_to_host(a, b, zero_ext, str);
    expect_status(&t, SW_EINVAL, "extent >= 1");
    t = valid_host_to_host(a, b, ext, neg_str);
    expect_status(&t, SW_EINVAL, "stride >= 0");
    /* the layout must stay inside the span, in either mode */
    for (int bulk = 0; bulk < 2; bulk++) {
        t = valid_host_to_host(a, b, ext, str);
        t.cosize = 3;
        t.bulk = bulk;
        expect_status(&t, SW_EINVAL, "beyond cosize");
    }
    int64_t two[1] = {2};
    t = valid_host_to_host(a, b, ext, two);
    expect_status(&t, SW_EINVAL, "beyond cosize");

    /* cosize 0 copies nothing and needs no storage at all */
    memset(b, 0, sizeof b);
    for (int bulk = 0; bulk < 2; bulk++) {
        sw_transfer e = {{SW_ENDPOINT_HOST, NULL, -1, 0}, {SW_ENDPOINT_FILE, NULL, -1, 9}, 4,
                         bulk, 0, 1, zero_ext, str, NULL, 0};
        expect_status(&e, SW_OK, NULL);
        e = valid_host_to_host(a, b, ext, str);
        e.cosize = 0;
        e.bulk = bulk;
        expect_status(&e, SW_OK, NULL);
    }
    int untouched = 1;
    for (int i = 0; i < 8; i++)
        untouched &= b[i] == 0;
    CHECK(untouched);
    /* ... but the header fields are still checked */
    sw_transfer e = {{SW_ENDPOINT_HOST, NULL, -1, 0}, {SW_ENDPOINT_HOST, NULL, -1, 0}, 0, 1, 0,
                     0, NULL, NULL, NULL, 0};
    expect_status(&e, SW_EINVAL, "itemsize");
}

static void test_overflow(void)
{
    unsigned char a[8] = {0}, b[8] = {0};
    int64_t ext[1] = {4}, str[1] = {1};
    sw_transfer t = valid_host_to_host(a, b, ext, str);
    t.src.offset = INT64_MAX / 2;
    t.itemsize = 4;
    expect_status(&t, SW_EOVERFLOW, "overflows");
    t = valid_host_to_host(a, b, ext, str);
    t.dst.offset = INT64_MAX - 2; /* offset + cosize overflows */
    expect_status(&t, SW_EOVERFLOW, "overflows");
    t = valid_host_to_host(a, b, ext, str);
    t.cosize = INT64_MAX / 2;
    t.itemsize = 4;
    expect_status(&t, SW_EOVERFLOW, "overflows");
    t = valid_host_to_host(a, b, ext, str);
    t.itemsize = SIZE_MAX;
    expect_status(&t, SW_EOVERFLOW, "overflows");
    int64_t big_ext[2] = {3, 3}, big_str[2] = {INT64_MAX / 2, 1};
    t = valid_host_to_host(a, b, big_ext, big_str);
    t.ndim = 2;
    expect_status(&t, SW_EOVERFLOW, "layout offset overflows");
    int64_t sum_str[2] = {INT64_MAX / 2 - 1, INT64_MAX / 2 - 1}, sum_ext[2] = {2, 3};
    t = valid_host_to_host(a, b, sum_ext, sum_str);
    t.ndim = 2;
    t.cosize = INT64_MAX;
    expect_status(&t, SW_EOVERFLOW, "layout offset overflows");
    CHECK(b[0] == 0);
}

static int all_equal(const unsigned char *p, size_t n, unsigned char v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return 0;
    return 1;
}

/* ---- file errors ----------------------------------------------------------- */

static void test_file_errors(void)
{
    unsigned char buf[16];
    memset(buf, FILL, sizeof buf);
    int64_t ext[1] = {16}, str[1] = {1};
    int fd = temp_fd();
    unsigned char four[4] = {1, 2, 3, 4};
    CHECK(write_all(fd, four, 4, 0) == 0);
    sw_error err;
    for (int bulk = 0; bulk < 2; bulk++) {
        /* reading past the end of the file is an error, not zeros */
        sw_transfer t = {{SW_ENDPOINT_FILE, NULL, fd, 0}, {SW_ENDPOINT_HOST, buf, -1, 0}, 1,
                         bulk, 16, 1, ext, str, NULL, 0};
        CHECK_EQ_I64(sw_transfer_run(&t, &err), SW_EIO);
        CHECK_EQ_I64(err.sys_errno, EIO);
        /* a descriptor that is not open reports the OS error */
        int closed = temp_fd();
        close(closed);
        t.src.fd = closed;
        CHECK_EQ_I64(sw_transfer_run(&t, &err), SW_EIO);
        CHECK_EQ_I64(err.sys_errno, EBADF);
        sw_transfer w = {{SW_ENDPOINT_HOST, buf, -1, 0}, {SW_ENDPOINT_FILE, NULL, closed, 0}, 1,
                         bulk, 16, 1, ext, str, NULL, 0};
        CHECK_EQ_I64(sw_transfer_run(&w, &err), SW_EIO);
        CHECK_EQ_I64(err.sys_errno, EBADF);
        sw_transfer ff = {{SW_ENDPOINT_FILE, NULL, fd, 0}, {SW_ENDPOINT_FILE, NULL, closed, 0}, 1,
                          bulk, 4, 1, ext, str, NULL, 0};
        ext[0] = 4;
        CHECK_EQ_I64(sw_transfer_run(&ff, &err), SW_EIO);
        CHECK_EQ_I64(err.sys_errno, EBADF);
        ext[0] = 16;
    }
    /* a direct read fills the host as far as the file went */
    CHECK(memcmp(buf, four, 4) == 0);
    CHECK(all_equal(buf + 4, 12, FILL));
    close(fd);
}

/* ---- multi-chunk transfers and injected faults ----------------------------- */

/* Slots of 4 bytes: two full chunks and a partial third. */
#define BIG_SLOTS ((int64_t)(SW_TRANSFER_CHUNK_BYTES / 4 * 2 + 1001))
#define BIG_BYTES ((size_t)BIG_SLOTS * 4)
#define CHUNK SW_TRANSFER_CHUNK_BYTES

typedef struct big {
    unsigned char *src; /* BIG_BYTES of pattern */
    unsigned char *got;
    int64_t ext[1], str[1], ext_gapped[1], str_gapped[1];
} big;

static int fresh_file(const unsigned char *content, size_t n)
{
    int fd = temp_fd();
    CHECK(write_all(fd, content, n, 0) == 0);
    return fd;
}

static sw_transfer big_transfer(big *b, sw_endpoint s, sw_endpoint d, int bulk, int gapped)
{
    sw_transfer t = {s, d, 4, bulk, BIG_SLOTS, 1, gapped ? b->ext_gapped : b->ext,
                     gapped ? b->str_gapped : b->str, NULL, 0};
    return t;
}

static void test_big_round_trip(big *b)
{
    /* without faults every pair moves the whole span */
    unsigned char *host = malloc(BIG_BYTES);
    for (int bulk = 0; bulk < 2; bulk++) {
        int f1 = fresh_file(b->got, BIG_BYTES), f2 = fresh_file(b->got, BIG_BYTES);
        sw_endpoint hs = {SW_ENDPOINT_HOST, b->src, -1, 0};
        sw_endpoint fd1 = {SW_ENDPOINT_FILE, NULL, f1, 0}, fd2 = {SW_ENDPOINT_FILE, NULL, f2, 0};
        sw_endpoint hd = {SW_ENDPOINT_HOST, host, -1, 0};
        sw_transfer t = big_transfer(b, hs, fd1, bulk, 0);
        CHECK_EQ_I64(sw_transfer_run(&t, NULL), SW_OK);
        t = big_transfer(b, fd1, fd2, bulk, 0);
        CHECK_EQ_I64(sw_transfer_run(&t, NULL), SW_OK);
        memset(host, 0, BIG_BYTES);
        t = big_transfer(b, fd2, hd, bulk, 0);
        CHECK_EQ_I64(sw_transfer_run(&t, NULL), SW_OK);
        CHECK(memcmp(host, b->src, BIG_BYTES) == 0);
        close(f1);
        close(f2);
    }
    free(host);
}

/* host -> file, bulk and elementwise (gapped: staged), pwrite failing after
 * one chunk and at once. */
static void test_pwrite_faults(big *b)
{
    sw_error err;
    for (int gapped = 0; gapped < 2; gapped++) {
        for (long skip = 0; skip < 2; skip++) {
            int fd = fresh_file(b->got, BIG_BYTES); /* zeros */
            sw_endpoint s = {SW_ENDPOINT_HOST, b->src, -1, 0};
            sw_endpoint d = {SW_ENDPOINT_FILE, NULL, fd, 0};
            sw_transfer t = big_transfer(b, s, d, !gapped, gapped);
            CHECK_EQ_I64(sw_fault_arm("pwrite", skip, 1), SW_OK);
            CHECK_EQ_I64(sw_transfer_run(&t, &err), SW_EIO);
            CHECK_EQ_I64(err.sys_errno, EIO);
            sw_fault_clear();
            unsigned char *f = malloc(BIG_BYTES);
            CHECK(read_all(fd, f, BIG_BYTES, 0) == 0);
            size_t written = (size_t)skip * CHUNK;
            if (gapped) {
                /* the staged image holds values at even slots, zeros between */
                int ok = 1;
                for (size_t i = 0; i < written && ok; i++)
                    ok = f[i] == ((i / 4) % 2 == 0 ? b->src[i] : 0);
                CHECK(ok);
            } else {
                CHECK(memcmp(f, b->src, written) == 0);
            }
            CHECK(all_equal(f + written, BIG_BYTES - written, 0));
            free(f);
            close(fd);
        }
    }
}

/* file -> host: a failed bulk read fills the chunks before it; a failed
 * staged read leaves the host untouched. */
static void test_pread_faults(big *b)
{
    sw_error err;
    unsigned char *host = malloc(BIG_BYTES);
    int fd = fresh_file(b->src, BIG_BYTES);
    for (int gapped = 0; gapped < 2; gapped++) {
        for (long skip = 0; skip < 2; skip++) {
            memset(host, FILL, BIG_BYTES);
            sw_endpoint s = {SW_ENDPOINT_FILE, NULL, fd, 0};
            sw_endpoint d = {SW_ENDPOINT_HOST, host, -1, 0};
            sw_transfer t = big_transfer(b, s, d, !gapped, gapped);
            CHECK_EQ_I64(sw_fault_arm("pread", skip, 1), SW_OK);
            CHECK_EQ_I64(sw_transfer_run(&t, &err), SW_EIO);
            CHECK_EQ_I64(err.sys_errno, EIO);
            sw_fault_clear();
            size_t filled = gapped ? 0 : (size_t)skip * CHUNK;
            CHECK(memcmp(host, b->src, filled) == 0);
            CHECK(all_equal(host + filled, BIG_BYTES - filled, FILL));
        }
    }
    free(host);
    close(fd);
}

/* file -> file: either side failing after one chunk stops the copy there. */
static void test_file_to_file_faults(big *b)
{
    static const char *ops[] = {"pread", "pwrite"};
    sw_error err;
    int sfd = fresh_file(b->src, BIG_BYTES);
    unsigned char *f = malloc(BIG_BYTES), *s = malloc(BIG_BYTES);
    for (int op = 0; op < 2; op++) {
        for (int bulk = 0; bulk < 2; bulk++) {
            for (long skip = 0; skip < 2; skip++) {
                int dfd = fresh_file(b->got, BIG_BYTES);
                sw_endpoint se = {SW_ENDPOINT_FILE, NULL, sfd, 0};
                sw_endpoint de = {SW_ENDPOINT_FILE, NULL, dfd, 0};
                sw_transfer t = big_transfer(b, se, de, bulk, !bulk);
                CHECK_EQ_I64(sw_fault_arm(ops[op], skip, 1), SW_OK);
                CHECK_EQ_I64(sw_transfer_run(&t, &err), SW_EIO);
                CHECK_EQ_I64(err.sys_errno, EIO);
                sw_fault_clear();
                CHECK(read_all(dfd, f, BIG_BYTES, 0) == 0);
                size_t written = (size_t)skip * CHUNK;
                CHECK(memcmp(f, b->src, written) == 0);
                CHECK(all_equal(f + written, BIG_BYTES - written, 0));
                close(dfd);
            }
        }
    }
    CHECK(read_all(sfd, s, BIG_BYTES, 0) == 0);
    CHECK(memcmp(s, b->src, BIG_BYTES) == 0);
    free(f);
    free(s);
    close(sfd);
}

/* The parallel run gives the same bytes as the plain one for every span
 * pair (bulk at offsets, and a layout covering its span), and reports a
 * part's file error. */
static void test_parallel_spans(big *b)
{
    sw_error err;
    unsigned char *host = malloc(BIG_BYTES + 64);
    unsigned char *back = malloc(BIG_BYTES);
    int64_t dense_ext[2] = {1001, BIG_SLOTS / 1001}, dense_str[2] = {1, 1001};
    int64_t slots = dense_ext[0] * dense_ext[1];
    for (int kind = 0; kind < 3; kind++) {
        for (int bulk = 0; bulk < 2; bulk++) {
            memset(host, FILL, BIG_BYTES + 64);
            int fd = fresh_file(host, BIG_BYTES + 64); /* b->got is only BIG_BYTES */
            sw_endpoint hs = {SW_ENDPOINT_HOST, b->src, -1, 0};
            sw_endpoint hd = {SW_ENDPOINT_HOST, host, -1, 3};
            sw_endpoint fdst = {SW_ENDPOINT_FILE, NULL, fd, 3};
            sw_endpoint fsrc = {SW_ENDPOINT_FILE, NULL, fd, 0};
            if (kind == 2)
                CHECK(write_all(fd, b->src, BIG_BYTES, 0) == 0);
            sw_transfer t = {kind == 2 ? fsrc : hs, kind == 1 ? fdst : hd, 4, bulk,
                             bulk ? BIG_SLOTS : slots, bulk ? 1 : 2,
                             bulk ? b->ext : dense_ext, bulk ? b->str : dense_str, NULL, 0};
            size_t bytes = (size_t)t.cosize * 4;
            memset(host, FILL, BIG_BYTES + 64);
            CHECK_EQ_I64(sw_transfer_run_parallel(&t, 0, NULL, &err), SW_OK);
            if (kind == 1)
                CHECK(read_all(fd, back, bytes, 12) == 0);
            else
                memcpy(back, host + 12, bytes);
            CHECK(memcmp(back, b->src, bytes) == 0);
            if (kind != 1)
                CHECK(all_equal(host, 12, FILL) && all_equal(host + 12 + bytes, 4, FILL));
            if (sw_fault_enabled() && kind != 0) {
                CHECK_EQ_I64(sw_fault_arm(kind == 1 ? "pwrite" : "pread", 1, 1), SW_OK);
                CHECK_EQ_I64(sw_transfer_run_parallel(&t, 0, NULL, &err), SW_EIO);
                CHECK(strstr(err.msg, "injected") != NULL);
                sw_fault_clear();
            }
            close(fd);
        }
    }
    free(host);
    free(back);
}

/* A span many times the part size, with a ragged last part: split into
 * more parts than threads (whichever thread is free takes the next), every
 * byte lands once, nothing beyond the span is touched; capped at one thread
 * it is the same. */
static void test_parallel_many_parts(void)
{
    const int64_t slots = ((int64_t)100 << 20) / 4 + 777;
    size_t bytes = (size_t)slots * 4;
    uint32_t *src = malloc(bytes);
    unsigned char *dst = malloc(bytes + 8);
    for (int64_t i = 0; i < slots; i++)
        src[i] = (uint32_t)(i * 2654435761u);
    int64_t ext[1] = {slots}, str[1] = {1};
    for (int cap = 0; cap < 2; cap++) {
        sw_error err;
        memset(dst, FILL, bytes + 8);
        sw_endpoint hs = {SW_ENDPOINT_HOST, src, -1, 0};
        sw_endpoint hd = {SW_ENDPOINT_HOST, dst, -1, 1};
        sw_transfer t = {hs, hd, 4, 1, slots, 1, ext, str, NULL, 0};
        CHECK_EQ_I64(sw_transfer_run_parallel(&t, cap, NULL, &err), SW_OK);
        CHECK(memcmp(dst + 4, src, bytes) == 0);
        CHECK(all_equal(dst, 4, FILL) && all_equal(dst + 4 + bytes, 4, FILL));
    }
    free(src);
    free(dst);
}

/* Progress: every pair and shape ends at sw_transfer_bytes; a span copy
 * counts whole chunks, so a write failing after one chunk leaves one. */
static void test_progress(big *b)
{
    unsigned char *host = malloc(BIG_BYTES);
    for (int bulk = 0; bulk < 2; bulk++) {
        for (int gapped = 0; gapped < 2; gapped++) {
            int f1 = fresh_file(b->got, BIG_BYTES), f2 = fresh_file(b->got, BIG_BYTES);
            sw_endpoint hs = {SW_ENDPOINT_HOST, b->src, -1, 0};
            sw_endpoint hd = {SW_ENDPOINT_HOST, host, -1, 0};
            sw_endpoint fd1 = {SW_ENDPOINT_FILE, NULL, f1, 0};
            sw_endpoint fd2 = {SW_ENDPOINT_FILE, NULL, f2, 0};
            sw_endpoint pairs[4][2] = {{hs, hd}, {hs, fd1}, {fd1, fd2}, {fd2, hd}};
            int64_t expect = bulk || !gapped ? (int64_t)BIG_BYTES : b->ext_gapped[0] * 4;
            for (int k = 0; k < 4; k++) {
                int64_t done = 0;
                sw_transfer t = big_transfer(b, pairs[k][0], pairs[k][1], bulk, gapped);
                t.progress = &done;
                CHECK_EQ_I64(sw_transfer_bytes(&t), expect);
                CHECK_EQ_I64(sw_transfer_run(&t, NULL), SW_OK);
                CHECK_EQ_I64(done, expect);
            }
            close(f1);
            close(f2);
        }
    }
    if (sw_fault_enabled()) {
        int fd = fresh_file(b->got, BIG_BYTES);
        sw_endpoint s = {SW_ENDPOINT_HOST, b->src, -1, 0};
        sw_endpoint d = {SW_ENDPOINT_FILE, NULL, fd, 0};
        int64_t done = 0;
        sw_transfer t = big_transfer(b, s, d, 1, 0);
        t.progress = &done;
        CHECK_EQ_I64(sw_fault_arm("pwrite", 1, 1), SW_OK);
        CHECK_EQ_I64(sw_transfer_run(&t, NULL), SW_EIO);
        sw_fault_clear();
        CHECK_EQ_I64(done, (int64_t)CHUNK);
        close(fd);
    }
    CHECK_EQ_I64(sw_transfer_bytes(NULL), 0);
    free(host);
}

/* A file destination is written by its caller alone, chunk after chunk,
 * however many helpers there are: the second write failing leaves exactly
 * the first chunk written and nothing past it (parts written side by side
 * would have written at a later part's start, or the first part's second
 * chunk, whichever write the fault hit). */
static void test_parallel_file_destination_in_order(big *b)
{
    unsigned char *fill = malloc(BIG_BYTES), *back = malloc(BIG_BYTES);
    memset(fill, FILL, BIG_BYTES);
    int fd = fresh_file(fill, BIG_BYTES);
    sw_endpoint s = {SW_ENDPOINT_HOST, b->src, -1, 0};
    sw_endpoint d = {SW_ENDPOINT_FILE, NULL, fd, 0};
    sw_transfer t = big_transfer(b, s, d, 1, 0);
    int64_t done = 0;
    t.progress = &done;
    sw_error err;
    CHECK_EQ_I64(sw_fault_arm("pwrite", 1, 1), SW_OK);
    CHECK_EQ_I64(sw_transfer_run_parallel(&t, 0, NULL, &err), SW_EIO);
    sw_fault_clear();
    CHECK_EQ_I64(done, (int64_t)CHUNK);
    CHECK(read_all(fd, back, BIG_BYTES, 0) == 0);
    CHECK(memcmp(back, b->src, CHUNK) == 0);
    CHECK(all_equal(back + CHUNK, BIG_BYTES - CHUNK, FILL));
    close(fd);
    free(fill);
    free(back);
}

/* A file source is still read in parts side by side (only a file
 * destination is written by one thread): with the first read failing,
 * another part still lands whole, at the span's head or at its tail. Read
 * by one thread, the failed first chunk would have stopped it before any
 * byte landed. The span is 40 MiB: spans split from 32 MiB (transfer.c,
 * PARALLEL_MIN_BYTES). Needs two threads: on one CPU there are no parts. */
static void test_parallel_file_source_split(void)
{
    if (sw_parallel_width() < 2)
        return;
    const int64_t slots = ((int64_t)40 << 20) / 4 + 1001;
    const size_t bytes = (size_t)slots * 4;
    const size_t probe = (size_t)1 << 20; /* well inside either part */
    unsigned char *src = malloc(bytes), *host = malloc(bytes);
    for (size_t i = 0; i < bytes; i++)
        src[i] = src_byte(i);
    memset(host, FILL, bytes);
    int fd = fresh_file(src, bytes);
    int64_t ext[1] = {slots}, str[1] = {1};
    sw_endpoint s = {SW_ENDPOINT_FILE, NULL, fd, 0};
    sw_endpoint d = {SW_ENDPOINT_HOST, host, -1, 0};
    sw_transfer t = {s, d, 4, 1, slots, 1, ext, str, NULL, 0};
    sw_error err;
    CHECK_EQ_I64(sw_fault_arm("pread", 0, 1), SW_OK);
    CHECK_EQ_I64(sw_transfer_run_parallel(&t, 0, NULL, &err), SW_EIO);
    sw_fault_clear();
    int head = memcmp(host, src, probe) == 0;
    int tail = memcmp(host + bytes - probe, src + bytes - probe, probe) == 0;
    CHECK(head || tail);
    CHECK(!(head && tail)); /* one part failed, at its first chunk */
    close(fd);
    free(src);
    free(host);
}

static void test_big(void)
{
    big b;
    b.src = malloc(BIG_BYTES);
    b.got = calloc(1, BIG_BYTES);
    for (size_t i = 0; i < BIG_BYTES; i++)
        b.src[i] = src_byte(i);
    b.ext[0] = BIG_SLOTS;
    b.str[0] = 1;
    b.ext_gapped[0] = (BIG_SLOTS + 1) / 2; /* even slots only: BIG_SLOTS is odd */
    b.str_gapped[0] = 2;
    test_big_round_trip(&b);
    test_progress(&b);
    test_parallel_spans(&b);
    test_parallel_many_parts();
    if (sw_fault_enabled()) {
        test_parallel_file_destination_in_order(&b);
        test_parallel_file_source_split();
        test_pwrite_faults(&b);
        test_pread_faults(&b);
        test_file_to_file_faults(&b);
    }
    free(b.src);
    free(b.got);
}

/* ---- staging allocations ----------------------------------------------------- */

static void test_staging(void)
{
    if (!sw_fault_enabled())
        return;
    unsigned char src[32], host[32];
    for (int i = 0; i < 32; i++)
        src[i] = (unsigned char)(i + 1);
    int64_t gext[1] = {8}, gstr[1] = {2}, dext[2] = {4, 4}, dstr[2] = {4, 1};
    int fa = fresh_file(src, 32), fb = fresh_file(src, 32);
    sw_endpoint H = {SW_ENDPOINT_HOST, src, -1, 0}, HD = {SW_ENDPOINT_HOST, host, -1, 0};
    sw_endpoint FA = {SW_ENDPOINT_FILE, NULL, fa, 0}, FB = {SW_ENDPOINT_FILE, NULL, fb, 0};
    sw_error err;

    /* staged transfers fail cleanly when their buffer cannot be had */
    const sw_endpoint *staged[][2] = {{&H, &FB}, {&FA, &HD}, {&FA, &FB}};
    for (int i = 0; i < 3; i++) {
        for (int bulk = 0; bulk < 2; bulk++) {
            if (bulk && staged[i][0]->kind != staged[i][1]->kind)
                continue; /* bulk host<->file is never staged */
            memset(host, FILL, sizeof host);
            sw_transfer t = {*staged[i][0], *staged[i][1], 1, bulk, 15, 1, gext, gstr, NULL, 0};
            CHECK_EQ_I64(sw_fault_arm("alloc", 0, 1), SW_OK);
            CHECK_EQ_I64(sw_transfer_run(&t, &err), SW_ENOMEM);
            CHECK(strstr(err.msg, "staging") != NULL);
            sw_fault_clear();
            CHECK(all_equal(host, sizeof host, FILL));
        }
    }

    /* everything else allocates nothing: it works with every allocation failing */
    const sw_endpoint *direct[][2] = {{&H, &HD}, {&H, &FB}, {&FA, &HD}};
    for (int i = 0; i < 3; i++) {
        for (int bulk = 0; bulk < 2; bulk++) {
            /* elementwise with a file side skips staging only when dense */
            int dense = !bulk && direct[i][0]->kind != direct[i][1]->kind;
            sw_transfer t = {*direct[i][0], *direct[i][1], 1, bulk, dense ? 16 : 15,
                             dense ? 2 : 1, dense ? dext : gext, dense ? dstr : gstr, NULL, 0};
            CHECK_EQ_I64(sw_fault_arm("alloc", 0, -1), SW_OK);
            CHECK_EQ_I64(sw_transfer_run(&t, &err), SW_OK);
            sw_fault_clear();
        }
    }
    /* a dense (transposed) layout moved elementwise into a file: no staging */
    sw_transfer t = {H, FB, 2, 0, 16, 2, dext, dstr, NULL, 0};
    CHECK_EQ_I64(sw_fault_arm("alloc", 0, -1), SW_OK);
    CHECK_EQ_I64(sw_transfer_run(&t, &err), SW_OK);
    sw_fault_clear();
    unsigned char back[32];
    CHECK(read_all(fb, back, 32, 0) == 0);
    CHECK(memcmp(back, src, 32) == 0);
    close(fa);
    close(fb);
}

int main(void)
{
    int64_t live = sw_alloc_live_bytes();
    test_model();
    test_empty_destination_file();
    test_malformed();
    test_overflow();
    test_file_errors();
    test_big();
    test_staging();
    CHECK_EQ_I64(sw_alloc_live_bytes(), live);
    return check_report("transfer");
}
