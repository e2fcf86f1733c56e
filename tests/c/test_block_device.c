/* BlockDevice and BlockDeviceCarrier through the public C API (contract
 * B-2 .. B-11): opening refusals, extents (alignment, lowest fit, release
 * and reuse), slot I/O and versions, the exact-pair moves CPU <-> device
 * (bulk, durable on the device when they commit), every other pair
 * refused with nothing changed, close/flush rules, faults, a device that
 * cannot store what is moved into it (a loop device over a small tmpfs),
 * and moves from several threads. The device tests run on a real loop
 * device and print why they skip where none can be made. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "helpers.h"
#include "loop.h"
#include <strideweave/strideweave.h>
#include <strideweave/binding.h>
#include "strideweave/testing.h"

#define MIB (1LL << 20)

static int slots_equal(sw_carrier *c, int64_t n, float base)
{
    sw_error err;
    float *buf = sw_malloc((size_t)n * sizeof(float));
    int ok = buf && sw_carrier_read(c, 0, n, buf, &err) == SW_OK;
    for (int64_t i = 0; ok && i < n; i++)
        ok = buf[i] == base + (float)i;
    sw_free(buf);
    return ok;
}

/* ---- without a device ------------------------------------------------------ */

/* B-2: only a block-special node opens; nothing is left open. */
static void test_b2_open_refusals(void)
{
    sw_error err;
    sw_block_device *d = NULL;
    char dir[] = "/tmp/sw-bd-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char file[64];
    snprintf(file, sizeof file, "%s/plain", dir);
    FILE *f = fopen(file, "w");
    CHECK(f != NULL);
    if (f)
        fclose(f);
    CHECK_EQ_I64(sw_block_device_open(file, &d, &err), SW_EINVAL);
    CHECK(strstr(err.msg, "not a block device") != NULL);
    CHECK_EQ_I64(sw_block_device_open(dir, &d, &err), SW_EINVAL);
    CHECK_EQ_I64(sw_block_device_open("/dev/null", &d, &err), SW_EINVAL);
    CHECK(strstr(err.msg, "character device") != NULL);
    char missing[80];
    snprintf(missing, sizeof missing, "%s/missing", dir);
    CHECK_EQ_I64(sw_block_device_open(missing, &d, &err), SW_EIO);
    CHECK_EQ_I64(err.sys_errno, ENOENT);
    CHECK_EQ_I64(sw_block_device_open(NULL, &d, &err), SW_EINVAL);
    CHECK(d == NULL);
    unlink(file);
    rmdir(dir);
    /* Classes that are not block carriers answer "none". */
    sw_carrier *cpu = cpu_values(4, 0);
    CHECK(sw_block_device_of(cpu) == NULL);
    CHECK_EQ_I64(sw_block_device_carrier_offset_bytes(cpu), 0);
    sw_carrier_unref(cpu);
}

/* ---- on a loop device ------------------------------------------------------ */

static loop_dev loop;

static sw_block_device *open_loop(void)
{
    sw_error err;
    sw_block_device *d = NULL;
    if (sw_block_device_open(loop.path, &d, &err) != SW_OK) {
        fprintf(stderr, "cannot open %s: %s\n", loop.path, err.msg);
        CHECK(0);
    }
    return d;
}

/* B-2 properties, B-3 extents, B-7 release and reuse, B-8 close. */
static void test_b3_allocate_extents(void)
{
    sw_error err;
    sw_block_device *d = open_loop();
    if (!d)
        return;
    int64_t align = sw_block_device_allocation_alignment(d);
    CHECK_EQ_I64(sw_block_device_capacity_bytes(d), 64 * MIB);
    CHECK(align >= 512 && align % sw_block_device_logical_block_size(d) == 0);
    CHECK(strcmp(sw_block_device_path(d), loop.path) == 0);
    CHECK(!sw_block_device_is_closed(d) && !sw_block_device_is_faulted(d));

    sw_carrier *a = NULL, *b = NULL, *z = NULL, *c = NULL;
    CHECK_EQ_I64(sw_block_device_allocate(d, 10, SW_DT_FLOAT32, 0, &a, &err), SW_OK);
    CHECK_EQ_I64(sw_block_device_allocate(d, align / 4 + 1, SW_DT_FLOAT32, 0, &b, &err), SW_OK);
    CHECK_EQ_I64(sw_block_device_allocate(d, 0, SW_DT_FLOAT32, 0, &z, &err), SW_OK);
    CHECK(sw_carrier_class_of(a) == &sw_block_device_carrier_class);
    CHECK(strcmp(sw_carrier_name(a), "BlockDeviceCarrier") == 0);
    CHECK(sw_block_device_of(a) == d);
    CHECK_EQ_I64(sw_carrier_size(a), 10);
    CHECK_EQ_I64(sw_block_device_carrier_offset_bytes(a), 0);
    CHECK_EQ_I64(sw_block_device_carrier_extent_bytes(a), align);
    CHECK_EQ_I64(sw_block_device_carrier_offset_bytes(b), align);
    CHECK_EQ_I64(sw_block_device_carrier_extent_bytes(b), 2 * align);
    CHECK_EQ_I64(sw_block_device_carrier_extent_bytes(z), 0);
    CHECK(slots_equal(a, 0, 0));
    float zero[10] = {1};
    CHECK_EQ_I64(sw_carrier_read(a, 0, 10, zero, &err), SW_OK);
    CHECK(zero[0] == 0.0f && zero[9] == 0.0f); /* zero-written */

    /* Argument refusals, in order, with nothing reserved. */
    CHECK_EQ_I64(sw_block_device_allocate(NULL, 1, SW_DT_FLOAT32, 0, &c, &err), SW_ETYPE);
    CHECK_EQ_I64(sw_block_device_allocate(d, -1, SW_DT_FLOAT32, 0, &c, &err), SW_EINVAL);
    CHECK_EQ_I64(sw_block_device_allocate(d, INT64_MAX / 2, SW_DT_FLOAT32, 0, &c, &err),
                 SW_EOVERFLOW);
    CHECK_EQ_I64(sw_block_device_allocate(d, 4, SW_DT_INT32, 0, &c, &err), SW_EINVAL);
    CHECK(strstr(err.msg, "does not support storage dtype Int32") != NULL);
    CHECK_EQ_I64(sw_block_device_allocate(d, 64 * MIB, SW_DT_FLOAT32, SW_CARRIER_EMPTY, &c, &err),
                 SW_ENOMEM);
    CHECK(c == NULL);

    /* Release retires the extent; the lowest gap is reused. */
    CHECK_EQ_I64(sw_carrier_release(a, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_size(a), 0);
    CHECK_EQ_I64(sw_block_device_carrier_extent_bytes(a), 0);
    CHECK(sw_block_device_of(a) == d); /* kept after release */
    CHECK_EQ_I64(sw_block_device_allocate(d, 1, SW_DT_FLOAT32, SW_CARRIER_EMPTY, &c, &err), SW_OK);
    CHECK_EQ_I64(sw_block_device_carrier_offset_bytes(c), 0);

    /* B-8: close refuses while any carrier handle exists, released or not. */
    CHECK_EQ_I64(sw_block_device_close(d, &err), SW_ESTATE);
    CHECK(strstr(err.msg, "still alive") != NULL);
    CHECK(!sw_block_device_is_closed(d));
    sw_carrier_unref(a);
    sw_carrier_unref(b);
    sw_carrier_unref(z);
    CHECK_EQ_I64(sw_block_device_close(d, &err), SW_ESTATE);
    sw_carrier_unref(c);
    CHECK_EQ_I64(sw_block_device_close(d, &err), SW_OK);
    CHECK(sw_block_device_is_closed(d));
    CHECK_EQ_I64(sw_block_device_close(d, &err), SW_OK); /* idempotent */
    CHECK_EQ_I64(sw_block_device_flush(d, &err), SW_OK);
    CHECK_EQ_I64(sw_block_device_allocate(d, 1, SW_DT_FLOAT32, 0, &c, &err), SW_ESTATE);
    CHECK(strstr(err.msg, "closed") != NULL);
    sw_block_device_unref(d);
}

/* B-4, B-5, B-10, B-11: slot I/O, versions, refusals; slot writes reach the
 * device at flush. */
static void test_b5_slots_and_flush(void)
{
    sw_error err;
    sw_block_device *d = open_loop();
    if (!d)
        return;
    sw_carrier *c = NULL, *ro = NULL;
    CHECK_EQ_I64(sw_block_device_allocate(d, 8, SW_DT_FLOAT32, 0, &c, &err), SW_OK);
    int64_t off = sw_block_device_carrier_offset_bytes(c);
    float v[3] = {1.5f, -2.0f, 3.25f}, back[3] = {0};
    CHECK_EQ_I64(sw_carrier_write(c, 2, 3, v, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_version(c), 1);
    CHECK_EQ_I64(sw_carrier_read(c, 2, 3, back, &err), SW_OK);
    CHECK(memcmp(v, back, sizeof v) == 0);
    CHECK_EQ_I64(sw_carrier_read(c, 7, 2, back, &err), SW_ERANGE);
    CHECK_EQ_I64(sw_block_device_flush(d, &err), SW_OK);
    float raw[3] = {0};
    CHECK(loop_backing_floats(&loop, off + 8, raw, 3) == 0);
    CHECK(memcmp(v, raw, sizeof v) == 0);

    CHECK_EQ_I64(sw_block_device_allocate(d, 4, SW_DT_FLOAT32, SW_CARRIER_IMMUTABLE, &ro, &err),
                 SW_OK);
    CHECK(!sw_carrier_is_mutable(ro));
    CHECK_EQ_I64(sw_carrier_write(ro, 0, 1, v, &err), SW_ESTATE);
    CHECK_EQ_I64(sw_carrier_version(ro), 0);

    /* B-10: no DLPack. */
    sw_tensor *t = flat_at(c, 0, 8);
    DLManagedTensorVersioned *dl = NULL;
    CHECK_EQ_I64(sw_tensor_to_dlpack(t, &dl, &err), SW_ENOTSUP);
    sw_tensor_unref(t);
    sw_carrier_unref(ro);
    sw_carrier_unref(c);
    CHECK_EQ_I64(sw_block_device_close(d, &err), SW_OK);
    sw_block_device_unref(d);
}

/* B-10, B-11: CPU -> device -> CPU as bulk moves; the source is released,
 * the values are on the device itself once the move into it commits. */
static void test_b11_move_roundtrip_durable(void)
{
    sw_error err;
    sw_block_device *d = open_loop();
    if (!d)
        return;
    const int64_t n = 3000, pad = 5;
    sw_carrier *src = cpu_values(n + pad, 100.0f), *dev = NULL, *home = NULL;
    /* Something at offset 0 first, so the extent under test starts past it. */
    CHECK_EQ_I64(sw_block_device_allocate(d, 1, SW_DT_FLOAT32, 0, &dev, &err), SW_OK);
    sw_carrier *keep = dev;
    CHECK_EQ_I64(sw_block_device_allocate(d, n, SW_DT_FLOAT32, SW_CARRIER_EMPTY, &dev, &err),
                 SW_OK);
    int64_t off = sw_block_device_carrier_offset_bytes(dev);
    CHECK(off > 0);
    sw_tensor *t = flat_at(src, pad, n), *on_dev = NULL, *back = NULL;
    sw_move_handle *m = NULL;
    CHECK_EQ_I64(sw_move_async(t, dev, NULL, &m, &err), SW_OK);
    if (m) {
        CHECK_EQ_I64(sw_move_route_of(m), SW_ROUTE_BULK);
        CHECK_EQ_I64(sw_move_bytes(m), n * 4);
        CHECK_EQ_I64(sw_move_wait(m, &on_dev, &err), SW_OK);
        sw_move_unref(m);
    }
    CHECK(sw_carrier_is_released(src));
    CHECK_EQ_I64(sw_carrier_version(dev), 0);
    CHECK(slots_equal(dev, n, 100.0f + (float)pad));
    /* Durable: the backing file (what the device holds) has the values
     * without any flush of ours. */
    float *raw = sw_malloc((size_t)n * 4);
    CHECK(raw && loop_backing_floats(&loop, off, raw, (int)n) == 0);
    int same = 1;
    for (int64_t i = 0; raw && i < n; i++)
        same &= raw[i] == 100.0f + (float)(pad + i);
    CHECK(same);
    sw_free(raw);

    /* And back into host memory. */
    CHECK_EQ_I64(sw_cpu_new(n, SW_DT_FLOAT32, SW_CARRIER_EMPTY, &home, &err), SW_OK);
    CHECK_EQ_I64(sw_move(on_dev, home, &back, &err), SW_OK);
    CHECK(sw_carrier_is_released(dev));
    CHECK_EQ_I64(sw_block_device_carrier_extent_bytes(dev), 0);
    CHECK(slots_equal(home, n, 100.0f + (float)pad));
    sw_tensor_unref(back);
    sw_tensor_unref(on_dev);
    sw_tensor_unref(t);
    sw_carrier_unref(home);
    sw_carrier_unref(dev);
    sw_carrier_unref(keep);
    sw_carrier_unref(src);
    CHECK_EQ_I64(sw_block_device_close(d, &err), SW_OK);
    sw_block_device_unref(d);
}

typedef struct snap {
    int released, pending;
    int64_t size;
    uint64_t version;
} snap;

static snap take(sw_carrier *c)
{
    snap s = {sw_carrier_is_released(c), sw_carrier_is_pending(c), sw_carrier_size(c),
              sw_carrier_version(c)};
    return s;
}

static int same_snap(snap a, snap b)
{
    return a.released == b.released && a.pending == b.pending && a.size == b.size &&
           a.version == b.version;
}

/* B-10: only CPU pairs move; every other pair fails SW_ENOTSUP before any
 * effect, after the dtype check; B-4: a device carrier never grows. */
static void test_b10_other_pairs_refused(void)
{
    sw_error err;
    sw_block_device *d = open_loop();
    if (!d)
        return;
    sw_carrier *dev = NULL, *dev2 = NULL, *file = NULL, *gen = NULL, *small = NULL, *ints = NULL;
    CHECK_EQ_I64(sw_block_device_allocate(d, 16, SW_DT_FLOAT32, 0, &dev, &err), SW_OK);
    CHECK_EQ_I64(sw_block_device_allocate(d, 16, SW_DT_FLOAT32, 0, &dev2, &err), SW_OK);
    CHECK_EQ_I64(sw_block_device_allocate(d, 4, SW_DT_FLOAT32, 0, &small, &err), SW_OK);
    CHECK_EQ_I64(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &file, &err), SW_OK);
    float vals[16] = {0};
    CHECK_EQ_I64(sw_generic_new(vals, 16, SW_DT_FLOAT32, 0, &gen, &err), SW_OK);
    CHECK_EQ_I64(sw_cpu_new(16, SW_DT_INT32, 0, &ints, &err), SW_OK);
    sw_tensor *from_dev = flat_at(dev, 0, 16), *from_gen = flat_at(gen, 0, 16);
    sw_tensor *from_ints = flat_at(ints, 0, 16);
    sw_carrier *cpu = cpu_values(16, 1);
    sw_tensor *from_cpu = flat_at(cpu, 0, 16);
    snap s_dev = take(dev), s_file = take(file), s_gen = take(gen), s_cpu = take(cpu);
    sw_tensor *r = NULL;

    CHECK_EQ_I64(sw_move(from_dev, file, &r, &err), SW_ENOTSUP);
    CHECK(strstr(err.msg, "BlockDeviceCarrier") && strstr(err.msg, "CPU"));
    CHECK_EQ_I64(sw_move(from_dev, dev2, &r, &err), SW_ENOTSUP);
    CHECK_EQ_I64(sw_move(from_gen, dev, &r, &err), SW_ENOTSUP);
    CHECK_EQ_I64(sw_move(from_ints, dev, &r, &err), SW_ETYPE); /* row 8 first */
    CHECK_EQ_I64(sw_move(from_cpu, small, &r, &err), SW_EINVAL); /* never grows */
    CHECK(strstr(err.msg, "cannot allocate") != NULL);
    CHECK(r == NULL);
    CHECK(same_snap(s_dev, take(dev)) && same_snap(s_file, take(file)));
    CHECK(same_snap(s_gen, take(gen)) && same_snap(s_cpu, take(cpu)));
    CHECK_EQ_I64(sw_carrier_size(file), 0);
    CHECK(slots_equal(cpu, 16, 1));

    /* Never an Evictable tier. */
    sw_carrier *e = NULL;
    CHECK_EQ_I64(sw_evictable_new(cpu, dev, NULL, &e, &err), SW_ETYPE);
    CHECK(strstr(err.msg, "BlockDeviceCarrier cannot be an Evictable tier") != NULL);
    CHECK_EQ_I64(sw_evictable_new(dev, cpu, NULL, &e, &err), SW_ETYPE);
    CHECK(!sw_carrier_is_owned(cpu) && !sw_carrier_is_owned(dev));

    sw_tensor_unref(from_cpu);
    sw_tensor_unref(from_ints);
    sw_tensor_unref(from_gen);
    sw_tensor_unref(from_dev);
    sw_carrier_unref(cpu);
    sw_carrier_unref(ints);
    sw_carrier_unref(gen);
    sw_carrier_unref(file);
    sw_carrier_unref(small);
    sw_carrier_unref(dev2);
    sw_carrier_unref(dev);
    sw_block_device_unref(d); /* the last reference closes it */
}

/* B-5, B-6, B-11 with injected faults: a failed durability step or write
 * faults the device; the source of a failed move stays live and unchanged. */
static void test_b6_faults(void)
{
    sw_error err;
    if (!sw_fault_enabled()) {
        printf("skip test_b6_faults: needs a build with -Dfault_injection=true\n");
        return;
    }
    /* A transfer failure before the device is touched: nothing faults. */
    sw_block_device *d = open_loop();
    if (!d)
        return;
    sw_carrier *dev = NULL, *src = cpu_values(64, 7);
    CHECK_EQ_I64(sw_block_device_allocate(d, 64, SW_DT_FLOAT32, 0, &dev, &err), SW_OK);
    sw_tensor *t = flat_at(src, 0, 64), *r = NULL;
    CHECK_EQ_I64(sw_block_device_carrier_check_movable(dev, &err), SW_OK);
    CHECK(sw_block_device_carrier_unavailable(dev) == NULL);
    sw_fault_arm("move_transfer", 0, 1);
    CHECK_EQ_I64(sw_move(t, dev, &r, &err), SW_EIO);
    sw_fault_clear();
    CHECK(!sw_carrier_is_released(src) && !sw_carrier_is_pending(src));
    CHECK(!sw_block_device_is_faulted(d));

    /* fdatasync fails: the move fails with the errno, the device faults. */
    sw_fault_arm("blockdev_fdatasync", 0, 1);
    CHECK_EQ_I64(sw_move(t, dev, &r, &err), SW_EIO);
    sw_fault_clear();
    CHECK_EQ_I64(err.sys_errno, EIO);
    CHECK(strstr(err.msg, "fdatasync") != NULL);
    CHECK(!sw_carrier_is_released(src) && !sw_carrier_is_pending(src));
    CHECK_EQ_I64(sw_carrier_version(src), 0);
    CHECK(slots_equal(src, 64, 7));
    CHECK(sw_block_device_is_faulted(d));
    /* B-6: a faulted device refuses access, moves, allocation and flush. */
    float v = 0;
    sw_carrier *more = NULL;
    CHECK_EQ_I64(sw_carrier_read(dev, 0, 1, &v, &err), SW_ESTATE);
    CHECK(strstr(err.msg, "faulted") != NULL);
    /* the words a binding shows for its own check of the carrier */
    CHECK(strcmp(err.msg, "the block device of this BlockDeviceCarrier is faulted by an earlier "
                          "I/O error, so its data can no longer be trusted") == 0);
    CHECK_EQ_I64(sw_carrier_write(dev, 0, 1, &v, &err), SW_ESTATE);
    CHECK_EQ_I64(sw_carrier_version(dev), 0); /* a preflight refusal never counts */
    CHECK_EQ_I64(sw_move(t, dev, &r, &err), SW_ESTATE);
    /* the move's refusal and the check a binding asks before choosing a
     * route, both in the words the Python API raises */
    char words[512];
    snprintf(words, sizeof words, "cannot move a BlockDeviceCarrier: the block device %s is "
             "faulted by an earlier I/O error, so its data can no longer be trusted",
             sw_block_device_path(d));
    CHECK_MSG(err, words);
    CHECK_EQ_I64(sw_block_device_carrier_check_movable(dev, &err), SW_ESTATE);
    CHECK_MSG(err, words);
    CHECK_EQ_I64(sw_block_device_carrier_check_movable(src, &err), SW_OK); /* another class */
    CHECK_EQ_I64(sw_block_device_carrier_check_movable(NULL, &err), SW_OK);
    CHECK(sw_block_device_carrier_unavailable(dev) != NULL &&
          strcmp(sw_block_device_carrier_unavailable(dev),
                 "the block device of this BlockDeviceCarrier is faulted by an earlier I/O "
                 "error, so its data can no longer be trusted") == 0);
    CHECK(sw_block_device_carrier_unavailable(src) == NULL);
    CHECK(!sw_carrier_is_pending(src) && !sw_carrier_is_released(src));
    CHECK_EQ_I64(sw_carrier_version(dev), 0);
    CHECK_EQ_I64(sw_block_device_allocate(d, 1, SW_DT_FLOAT32, 0, &more, &err), SW_ESTATE);
    CHECK_EQ_I64(sw_block_device_flush(d, &err), SW_ESTATE);
    /* release and close still work */
    CHECK_EQ_I64(sw_carrier_release(dev, &err), SW_OK);
    sw_carrier_unref(dev);
    CHECK_EQ_I64(sw_block_device_close(d, &err), SW_OK);
    sw_block_device_unref(d);

    /* B-5: a slot write whose I/O fails faults the device and still counts. */
    d = open_loop();
    if (!d)
        goto out;
    CHECK_EQ_I64(sw_block_device_allocate(d, 4, SW_DT_FLOAT32, 0, &dev, &err), SW_OK);
    sw_fault_arm("pwrite", 0, 1);
    CHECK_EQ_I64(sw_carrier_write(dev, 0, 1, &v, &err), SW_EIO);
    sw_fault_clear();
    CHECK_EQ_I64(sw_carrier_version(dev), 1);
    CHECK(sw_block_device_is_faulted(d));
    sw_carrier_unref(dev);
    /* A failing flush at close faults and keeps it open; closing again
     * closes it. */
    sw_block_device_unref(d);
    d = open_loop();
    if (!d)
        goto out;
    sw_fault_arm("blockdev_fdatasync", 0, 1);
    CHECK_EQ_I64(sw_block_device_close(d, &err), SW_EIO);
    sw_fault_clear();
    CHECK(!sw_block_device_is_closed(d) && sw_block_device_is_faulted(d));
    CHECK_EQ_I64(sw_block_device_close(d, &err), SW_OK);
    CHECK(sw_block_device_is_closed(d));
    sw_block_device_unref(d);
out:
    sw_tensor_unref(t);
    sw_carrier_unref(src);
}

/* B-11 for real: a loop device whose backing file lives on a tmpfs much
 * smaller than the device. A move of more than the tmpfs holds fails at
 * write-back with an I/O error: the source stays live and unchanged, the
 * device is faulted. */
static void test_b11_device_cannot_store_it(void)
{
    loop_dev tiny;
    const char *why = NULL;
    if (loop_attach(&tiny, 32 * MIB, 2 * MIB, &why) != 0) {
        printf("skip test_b11_device_cannot_store_it: %s\n", why);
        return;
    }
    sw_error err;
    sw_block_device *d = NULL;
    CHECK_EQ_I64(sw_block_device_open(tiny.path, &d, &err), SW_OK);
    if (!d) {
        loop_detach(&tiny);
        return;
    }
    const int64_t n = 8 * MIB / 4;
    sw_carrier *dev = NULL, *src = cpu_values(n, 0.5f);
    CHECK_EQ_I64(sw_block_device_allocate(d, n, SW_DT_FLOAT32, SW_CARRIER_EMPTY, &dev, &err),
                 SW_OK);
    sw_tensor *t = flat_at(src, 0, n), *r = NULL;
    sw_status st = sw_move(t, dev, &r, &err);
    CHECK_EQ_I64(st, SW_EIO);
    CHECK(err.sys_errno == EIO || err.sys_errno == ENOSPC);
    CHECK(r == NULL);
    CHECK(!sw_carrier_is_released(src) && !sw_carrier_is_pending(src));
    CHECK_EQ_I64(sw_carrier_version(src), 0);
    CHECK(slots_equal(src, n, 0.5f));
    CHECK(sw_block_device_is_faulted(d));
    sw_tensor_unref(t);
    sw_carrier_unref(src);
    sw_carrier_unref(dev);
    (void)sw_block_device_close(d, &err);
    sw_block_device_unref(d);
    loop_detach(&tiny);
}

/* B-9: moves in and out from several threads on one device; extents never
 * overlap, every value lands where it belongs. */
typedef struct worker {
    sw_block_device *d;
    int id;
    int ok;
} worker;

static void *mover(void *arg)
{
    worker *w = arg;
    sw_error err;
    w->ok = 1;
    for (int round = 0; round < 6; round++) {
        int64_t n = 1000 + 37 * w->id + round;
        float base = (float)(w->id * 10000 + round * 100);
        sw_carrier *src = cpu_values(n, base), *dev = NULL, *home = NULL;
        sw_tensor *t = flat_at(src, 0, n), *on = NULL, *back = NULL;
        int ok = sw_block_device_allocate(w->d, n, SW_DT_FLOAT32, SW_CARRIER_EMPTY, &dev,
                                          &err) == SW_OK &&
                 sw_move(t, dev, &on, &err) == SW_OK &&
                 sw_cpu_new(n, SW_DT_FLOAT32, SW_CARRIER_EMPTY, &home, &err) == SW_OK &&
                 sw_move(on, home, &back, &err) == SW_OK && slots_equal(home, n, base);
        if (!ok) {
            fprintf(stderr, "worker %d round %d: %s\n", w->id, round, err.msg);
            w->ok = 0;
        }
        sw_tensor_unref(back);
        sw_tensor_unref(on);
        sw_tensor_unref(t);
        sw_carrier_unref(home);
        sw_carrier_unref(dev);
        sw_carrier_unref(src);
    }
    return NULL;
}

static void test_b9_threads(void)
{
    sw_block_device *d = open_loop();
    if (!d)
        return;
    enum { N = 4 };
    pthread_t th[N];
    worker w[N];
    for (int i = 0; i < N; i++) {
        w[i] = (worker){d, i, 0};
        pthread_create(&th[i], NULL, mover, &w[i]);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        CHECK(w[i].ok);
    }
    sw_error err;
    CHECK_EQ_I64(sw_block_device_close(d, &err), SW_OK);
    sw_block_device_unref(d);
}

/* The device's own page cache for [off, off + bytes): emptied (after a
 * flush), or how many of its pages it holds (-1: cannot tell). */
static int drop_device_cache(int64_t off, int64_t bytes)
{
    int fd = open(loop.path, O_RDONLY | O_CLOEXEC);
    int ok = fd >= 0 && fsync(fd) == 0 &&
             posix_fadvise(fd, off, bytes, POSIX_FADV_DONTNEED) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

static int device_pages_cached(int64_t off, int64_t bytes)
{
    long page = sysconf(_SC_PAGESIZE);
    int64_t start = off - off % page;
    size_t len = (size_t)(off + bytes - start);
    int fd = open(loop.path, O_RDONLY | O_CLOEXEC);
    void *p = fd >= 0 ? mmap(NULL, len, PROT_READ, MAP_SHARED, fd, start) : MAP_FAILED;
    if (fd >= 0)
        close(fd);
    if (p == MAP_FAILED)
        return -1;
    size_t pages = (len + (size_t)page - 1) / (size_t)page;
    unsigned char *vec = malloc(pages);
    int held = vec && mincore(p, len, vec) == 0 ? 0 : -1;
    for (size_t i = 0; held >= 0 && i < pages; i++)
        held += vec[i] & 1;
    free(vec);
    munmap(p, len);
    return held;
}

/* B-9: reads of the size from which host blocks are page-aligned (1 MiB),
 * many in flight at once, all land where they belong, and they go to the
 * device directly: none of their range is left in the device's page cache,
 * where buffered reads (and their read-ahead) would leave it. */
static void test_b9_threshold_reads_in_flight(void)
{
    sw_error err;
    sw_block_device *d = open_loop();
    if (!d)
        return;
    enum { N = 24 };
    const int64_t n = MIB / 4; /* Float32 slots: 1 MiB a carrier */
    sw_carrier *dev[N] = {0}, *home[N] = {0};
    sw_tensor *on[N] = {0}, *back[N] = {0};
    sw_move_handle *m[N] = {0};
    for (int i = 0; i < N; i++) {
        sw_carrier *src = cpu_values(n, (float)(i * 1000));
        sw_tensor *t = flat_at(src, 0, n);
        CHECK_EQ_I64(sw_block_device_allocate(d, n, SW_DT_FLOAT32, SW_CARRIER_EMPTY, &dev[i],
                                              &err), SW_OK);
        CHECK_EQ_I64(sw_move(t, dev[i], &on[i], &err), SW_OK);
        CHECK(drop_device_cache(sw_block_device_carrier_offset_bytes(dev[i]), n * 4));
        sw_tensor_unref(t);
        sw_carrier_unref(src);
    }
    int64_t off[N];
    for (int i = 0; i < N; i++) {
        off[i] = sw_block_device_carrier_offset_bytes(dev[i]);
        CHECK_EQ_I64(sw_cpu_new(n, SW_DT_FLOAT32, SW_CARRIER_EMPTY, &home[i], &err), SW_OK);
        CHECK_EQ_I64(sw_move_async(on[i], home[i], NULL, &m[i], &err), SW_OK);
    }
    for (int i = 0; i < N; i++) {
        if (m[i]) {
            CHECK_EQ_I64(sw_move_wait(m[i], &back[i], &err), SW_OK);
            sw_move_unref(m[i]);
        }
        CHECK(sw_carrier_is_released(dev[i]));
        CHECK(slots_equal(home[i], n, (float)(i * 1000)));
        CHECK_EQ_I64(device_pages_cached(off[i], n * 4), 0);
        sw_tensor_unref(back[i]);
        sw_tensor_unref(on[i]);
        sw_carrier_unref(home[i]);
        sw_carrier_unref(dev[i]);
    }
    CHECK_EQ_I64(sw_block_device_close(d, &err), SW_OK);
    sw_block_device_unref(d);
}

/* A waited move holds no carrier any more: move into the device, wait,
 * drop the handle, the result and the carriers, and the device closes at
 * once (no sw_move_drain), every time, with moves from several threads. */
typedef struct closer {
    sw_block_device *d;
    pthread_barrier_t *go;
    int ok;
} closer;

static int move_in_and_let_go(sw_block_device *d, int64_t n, float base)
{
    sw_error err;
    sw_carrier *src = cpu_values(n, base), *dev = NULL;
    sw_tensor *t = flat_at(src, 0, n), *on = NULL;
    sw_move_handle *m = NULL;
    int ok = sw_block_device_allocate(d, n, SW_DT_FLOAT32, SW_CARRIER_EMPTY, &dev, &err) ==
                 SW_OK &&
             sw_move_async(t, dev, NULL, &m, &err) == SW_OK &&
             sw_move_wait(m, &on, &err) == SW_OK && sw_move_done(m) &&
             slots_equal(dev, n, base) && sw_carrier_release(dev, &err) == SW_OK;
    sw_move_unref(m);
    sw_tensor_unref(on);
    sw_tensor_unref(t);
    sw_carrier_unref(dev);
    sw_carrier_unref(src);
    return ok;
}

static void *close_mover(void *arg)
{
    closer *c = arg;
    pthread_barrier_wait(c->go);
    c->ok = move_in_and_let_go(c->d, 512, 7.0f);
    return NULL;
}

static void test_b8_close_right_after_waited_move(void)
{
    sw_error err;
    int closed = 0;
    for (int round = 0; round < 40; round++) {
        sw_block_device *d = open_loop();
        if (!d)
            return;
        CHECK(move_in_and_let_go(d, 256 + round, (float)round));
        if (sw_block_device_close(d, &err) == SW_OK)
            closed++;
        else
            fprintf(stderr, "round %d: close failed: %s\n", round, err.msg);
        sw_block_device_unref(d);
    }
    CHECK_EQ_I64(closed, 40);

    enum { N = 4 };
    closed = 0;
    for (int round = 0; round < 20; round++) {
        sw_block_device *d = open_loop();
        if (!d)
            return;
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, N);
        pthread_t th[N];
        closer c[N];
        for (int i = 0; i < N; i++) {
            c[i] = (closer){d, &go, 0};
            pthread_create(&th[i], NULL, close_mover, &c[i]);
        }
        for (int i = 0; i < N; i++) {
            pthread_join(th[i], NULL);
            CHECK(c[i].ok);
        }
        pthread_barrier_destroy(&go);
        if (sw_block_device_close(d, &err) == SW_OK)
            closed++;
        else
            fprintf(stderr, "threads round %d: close failed: %s\n", round, err.msg);
        sw_block_device_unref(d);
    }
    CHECK_EQ_I64(closed, 20);
}

/* Exit with moves in flight (move.h): a child starts a move into the
 * device (held at the transfer until its own exit handler lets it go, so
 * it is surely in flight when exit begins) and one into a FileBacked
 * carrier, drops every handle and calls exit(). Exit waits for both: the
 * child exits 0, the device holds every value (durable: read from the
 * backing file), the session directory is gone, and a move started by an
 * exit handler that runs after the wait began is refused. */
static void resume_at_exit(void) { sw_fault_resume(); }

static void note_commit(sw_move_handle *m, sw_status st, sw_tensor *result, void *user)
{
    (void)m;
    (void)result;
    char c = st == SW_OK ? 'C' : 'F';
    if (write(*(int *)user, &c, 1) != 1)
        _exit(4);
}

static void refused_at_exit(void)
{
    sw_error err;
    sw_carrier *a = cpu_values(4, 0.0f), *b = NULL;
    sw_tensor *t = flat_at(a, 0, 4), *r = NULL;
    int refused = sw_cpu_new(4, SW_DT_FLOAT32, SW_CARRIER_EMPTY, &b, &err) == SW_OK &&
                  sw_move(t, b, &r, &err) == SW_ESTATE && strstr(err.msg, "exiting");
    sw_tensor_unref(r);
    sw_tensor_unref(t);
    sw_carrier_unref(b);
    sw_carrier_unref(a);
    if (!refused)
        _exit(5);
}

static void exit_child(int fd, int64_t n)
{
    sw_error err;
    sw_block_device *d = NULL;
    sw_carrier *src = cpu_values(n, 1.0f), *dev = NULL, *fsrc = cpu_values(n, 2.0f), *fb = NULL;
    sw_tensor *t = flat_at(src, 0, n), *ft = flat_at(fsrc, 0, n);
    sw_move_handle *m = NULL, *fm = NULL;
    const char *dir = NULL;
    static int commit_fd;
    commit_fd = fd;
    sw_move_options opts = {.on_commit = note_commit, .user = &commit_fd};
    atexit(refused_at_exit); /* before the first move: runs after the wait */
    if (sw_block_device_open(loop.path, &d, &err) != SW_OK ||
        sw_block_device_allocate(d, n, SW_DT_FLOAT32, SW_CARRIER_EMPTY, &dev, &err) != SW_OK ||
        sw_fault_arm("move_transfer_pause", 0, 1) != SW_OK ||
        sw_move_async(t, dev, &opts, &m, &err) != SW_OK)
        _exit(3);
    sw_fault_wait_paused();
    if (sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &fb, &err) != SW_OK ||
        sw_move_async(ft, fb, NULL, &fm, &err) != SW_OK ||
        sw_filestore_session_dir(&dir, &err) != SW_OK)
        _exit(3);
    int64_t off = sw_block_device_carrier_offset_bytes(dev);
    char msg[4096] = {0};
    memcpy(msg, &off, sizeof off);
    snprintf(msg + sizeof off, sizeof msg - sizeof off, "%s", dir);
    if (write(fd, msg, sizeof msg) != (ssize_t)sizeof msg)
        _exit(3);
    atexit(resume_at_exit); /* after the first move: runs before the wait */
    sw_move_unref(m);
    sw_move_unref(fm);
    sw_tensor_unref(t);
    sw_tensor_unref(ft);
    sw_carrier_unref(dev);
    sw_carrier_unref(fb);
    sw_carrier_unref(src);
    sw_carrier_unref(fsrc);
    sw_block_device_unref(d);
    exit(0); /* what returning from main does */
}

static void test_b11_exit_with_moves_in_flight(void)
{
    const int64_t n = 4 << 20; /* 16 MiB */
    int fds[2];
    CHECK(pipe(fds) == 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        exit_child(fds[1], n);
    }
    close(fds[1]);
    char msg[4096 + 2];
    ssize_t got = 0, r; /* the paths, then the commit's mark, then EOF at exit */
    while (got < (ssize_t)sizeof msg && (r = read(fds[0], msg + got, sizeof msg - got)) > 0)
        got += r;
    close(fds[0]);
    CHECK_EQ_I64(got, 4096 + 1);
    CHECK(got == 4096 + 1 && msg[4096] == 'C'); /* the move committed before the end */
    got = got >= 4096 ? 4096 : got;
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK_EQ_I64(WEXITSTATUS(status), 0);
    if (got != 4096)
        return;
    int64_t off;
    memcpy(&off, msg, sizeof off);
    const char *dir = msg + sizeof off;
    struct stat st;
    CHECK(dir[0] == '/' && stat(dir, &st) != 0 && errno == ENOENT); /* no leftover */
    float *raw = sw_malloc((size_t)n * 4);
    CHECK(raw && loop_backing_floats(&loop, off, raw, (int)n) == 0);
    int64_t same = 0;
    for (int64_t i = 0; raw && i < n; i++)
        same += raw[i] == 1.0f + (float)i;
    CHECK_EQ_I64(same, n); /* all of it, durable on the device */
    sw_free(raw);
}

/* ---- closing, allocation with values, waits (what the Python binding
 * needs from the core) ------------------------------------------------------ */

/* B-8: the end of a scope closes at once without carriers, else marks the
 * device closing: allocation refused, carriers still work, close refused,
 * and the last carrier handle to go flushes and closes it. */
static void test_b8_close_when_unused(void)
{
    sw_error err;
    sw_block_device *d = open_loop();
    if (!d)
        return;
    CHECK_EQ_I64(sw_block_device_close_when_unused(d, 0, &err), SW_OK);
    CHECK(sw_block_device_is_closed(d) && !sw_block_device_is_closing(d));
    CHECK_EQ_I64(sw_block_device_close_when_unused(d, 0, &err), SW_OK); /* again: nothing */
    sw_block_device_unref(d);

    d = open_loop();
    if (!d)
        return;
    sw_carrier *a = NULL, *b = NULL, *more = NULL;
    CHECK_EQ_I64(sw_block_device_allocate(d, 4, SW_DT_FLOAT32, 0, &a, &err), SW_OK);
    CHECK_EQ_I64(sw_block_device_allocate(d, 2, SW_DT_FLOAT32, 0, &b, &err), SW_OK);
    CHECK_EQ_I64(sw_block_device_close_when_unused(d, 0, &err), SW_OK);
    CHECK(!sw_block_device_is_closed(d) && sw_block_device_is_closing(d));
    CHECK_EQ_I64(sw_block_device_allocate(d, 1, SW_DT_FLOAT32, 0, &more, &err), SW_ESTATE);
    CHECK(strstr(err.msg, "closing") != NULL && more == NULL);
    float v = 6.0f, back = 0;
    CHECK_EQ_I64(sw_block_device_allocate_values(d, &v, 1, 0, &more, &err), SW_ESTATE);
    CHECK(strstr(err.msg, "closing") != NULL);
    CHECK_EQ_I64(sw_carrier_write(a, 1, 1, &v, &err), SW_OK); /* carriers still work */
    CHECK_EQ_I64(sw_carrier_read(a, 1, 1, &back, &err), SW_OK);
    CHECK(back == 6.0f);
    CHECK_EQ_I64(sw_block_device_close(d, &err), SW_ESTATE);
    CHECK(strstr(err.msg, "still alive") != NULL);
    CHECK_EQ_I64(sw_carrier_release(a, &err), SW_OK);
    sw_carrier_unref(a); /* a released handle still counts until it goes */
    CHECK(!sw_block_device_is_closed(d) && sw_block_device_is_closing(d));
    sw_carrier_unref(b); /* the last one: flushed and closed */
    CHECK(sw_block_device_is_closed(d) && !sw_block_device_is_closing(d));
    CHECK(!sw_block_device_is_faulted(d));
    CHECK_EQ_I64(sw_block_device_allocate(d, 1, SW_DT_FLOAT32, 0, &more, &err), SW_ESTATE);
    CHECK(strstr(err.msg, "closed") != NULL);
    CHECK_EQ_I64(sw_block_device_close(d, &err), SW_OK);
    CHECK_EQ_I64(sw_block_device_close_when_unused(NULL, 0, &err), SW_ETYPE);
    sw_block_device_unref(d);

    if (!sw_fault_enabled()) {
        printf("skip the failing flushes of test_b8_close_when_unused: needs fault injection\n");
        return;
    }
    /* A failing flush: kept open (as close) unless even_on_error. */
    d = open_loop();
    if (!d)
        return;
    sw_fault_arm("blockdev_fdatasync", 0, 1);
    CHECK_EQ_I64(sw_block_device_close_when_unused(d, 0, &err), SW_EIO);
    sw_fault_clear();
    CHECK(!sw_block_device_is_closed(d) && sw_block_device_is_faulted(d));
    sw_block_device_unref(d);
    d = open_loop();
    if (!d)
        return;
    sw_fault_arm("blockdev_fdatasync", 0, 1);
    CHECK_EQ_I64(sw_block_device_close_when_unused(d, 1, &err), SW_EIO);
    sw_fault_clear();
    CHECK(sw_block_device_is_closed(d) && sw_block_device_is_faulted(d));
    sw_block_device_unref(d);
    /* The last carrier of a closing device: a failing flush faults the
     * device, unreported, and still closes it. */
    d = open_loop();
    if (!d)
        return;
    CHECK_EQ_I64(sw_block_device_allocate(d, 4, SW_DT_FLOAT32, 0, &a, &err), SW_OK);
    CHECK_EQ_I64(sw_block_device_close_when_unused(d, 0, &err), SW_OK);
    sw_fault_arm("blockdev_fdatasync", 0, 1);
    sw_carrier_unref(a);
    sw_fault_clear();
    CHECK(sw_block_device_is_closed(d) && sw_block_device_is_faulted(d));
    sw_block_device_unref(d);
}

/* B-7 new_like: a carrier written with given values, version 0, buffered
 * until flush; the checks of allocate; a failed write frees the extent. */
static void test_b3_allocate_values(void)
{
    sw_error err;
    sw_block_device *d = open_loop();
    if (!d)
        return;
    float vals[3] = {1.5f, -2.0f, 3.25f}, back[3] = {0};
    sw_carrier *c = NULL, *e = NULL, *imm = NULL;
    CHECK_EQ_I64(sw_block_device_allocate_values(d, vals, 3, 0, &c, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_size(c), 3);
    CHECK_EQ_I64(sw_carrier_version(c), 0);
    CHECK_EQ_I64(sw_carrier_read(c, 0, 3, back, &err), SW_OK);
    CHECK(back[0] == 1.5f && back[1] == -2.0f && back[2] == 3.25f);
    CHECK_EQ_I64(sw_block_device_flush(d, &err), SW_OK);
    CHECK_EQ_I64(sw_block_device_allocate_values(d, NULL, 0, 0, &e, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_size(e), 0);
    CHECK_EQ_I64(sw_block_device_carrier_extent_bytes(e), 0);
    CHECK_EQ_I64(sw_block_device_allocate_values(d, vals, 1, SW_CARRIER_IMMUTABLE, &imm, &err),
                 SW_OK);
    CHECK(!sw_carrier_is_mutable(imm));
    CHECK_EQ_I64(sw_carrier_write(imm, 0, 1, vals, &err), SW_ESTATE);
    sw_carrier *bad = NULL;
    CHECK_EQ_I64(sw_block_device_allocate_values(d, NULL, 2, 0, &bad, &err), SW_EINVAL);
    CHECK_EQ_I64(sw_block_device_allocate_values(d, vals, -1, 0, &bad, &err), SW_EINVAL);
    CHECK_EQ_I64(sw_block_device_allocate_values(NULL, vals, 1, 0, &bad, &err), SW_ETYPE);
    CHECK(bad == NULL);
    /* Extents as allocate gives them: c first, imm right after it. */
    CHECK_EQ_I64(sw_block_device_carrier_offset_bytes(c), 0);
    CHECK_EQ_I64(sw_block_device_carrier_offset_bytes(imm), sw_block_device_allocation_alignment(d));
    sw_carrier_unref(imm);
    if (sw_fault_enabled()) {
        sw_fault_arm("pwrite", 0, 1);
        CHECK_EQ_I64(sw_block_device_allocate_values(d, vals, 3, 0, &bad, &err), SW_EIO);
        sw_fault_clear();
        CHECK(bad == NULL && sw_block_device_is_faulted(d));
        CHECK_EQ_I64(sw_block_device_allocate_values(d, vals, 3, 0, &bad, &err), SW_ESTATE);
        CHECK(strstr(err.msg, "faulted") != NULL);
    }
    sw_carrier_unref(c);
    sw_carrier_unref(e);
    CHECK_EQ_I64(sw_block_device_close(d, &err), SW_OK);
    sw_block_device_unref(d);
}

/* A move's own transfer writes (transfer access) never count on the
 * version, also when the write fails. */
static void test_b5_failed_write_in_transfer_counts_nothing(void)
{
    sw_error err;
    if (!sw_fault_enabled()) {
        printf("skip test_b5_failed_write_in_transfer_counts_nothing: needs fault injection\n");
        return;
    }
    sw_block_device *d = open_loop();
    if (!d)
        return;
    sw_carrier *c = NULL;
    float v = 1.0f;
    CHECK_EQ_I64(sw_block_device_allocate(d, 2, SW_DT_FLOAT32, 0, &c, &err), SW_OK);
    sw_carrier_begin_transfer(c);
    sw_fault_arm("pwrite", 0, 1);
    CHECK_EQ_I64(sw_carrier_write(c, 0, 1, &v, &err), SW_EIO);
    sw_fault_clear();
    sw_carrier_end_transfer(c);
    CHECK_EQ_I64(sw_carrier_version(c), 0);
    CHECK(sw_block_device_is_faulted(d));
    sw_carrier_unref(c);
    sw_block_device_unref(d);
}

typedef struct waiter {
    sw_carrier *c;
    int release; /* 0: read slot 0, 1: release */
    float value;
    sw_status st;
    atomic_int done;
} waiter;

static void *waiter_run(void *arg)
{
    waiter *w = arg;
    sw_error err;
    w->st = w->release ? sw_carrier_release(w->c, &err) : sw_carrier_read(w->c, 0, 1, &w->value, &err);
    atomic_store(&w->done, 1);
    return NULL;
}

/* Whether `w` is still blocked after ~200 ms (a thread that does not wait
 * finishes in microseconds). */
static int still_blocked(waiter *w)
{
    for (int i = 0; i < 20; i++) {
        if (atomic_load(&w->done))
            return 0;
        usleep(10000);
    }
    return !atomic_load(&w->done);
}

/* B-9 / B-7: a slot read of a carrier waits for a move transfer on its
 * range, and a release waits for a transfer on a page of its extent. */
static void test_b9_slot_io_and_release_wait_for_transfers(void)
{
    sw_error err;
    if (!sw_fault_enabled()) {
        printf("skip test_b9_slot_io_and_release_wait_for_transfers: needs fault injection\n");
        return;
    }
    sw_block_device *d = open_loop();
    if (!d)
        return;
    int64_t n = 64;
    sw_carrier *x = NULL, *y = NULL, *src = cpu_values(n, 3.0f), *out = NULL;
    CHECK_EQ_I64(sw_block_device_allocate(d, n, SW_DT_FLOAT32, 0, &x, &err), SW_OK);
    CHECK_EQ_I64(sw_block_device_allocate(d, 1, SW_DT_FLOAT32, 0, &y, &err), SW_OK);
    sw_tensor *t = flat_at(src, 0, n), *r = NULL;
    CHECK_EQ_I64(sw_move(t, x, &r, &err), SW_OK);
    sw_tensor_unref(r);
    r = NULL;
    CHECK_EQ_I64(sw_cpu_new(n, SW_DT_FLOAT32, SW_CARRIER_EMPTY, &out, &err), SW_OK);
    sw_tensor *tx = flat_at(x, 0, n);
    sw_move_handle *m = NULL;
    CHECK_EQ_I64(sw_fault_arm("blockdev_io_pause", 0, 1), SW_OK);
    CHECK_EQ_I64(sw_move_async(tx, out, NULL, &m, &err), SW_OK); /* x -> CPU, held */
    sw_fault_wait_paused();
    waiter rd = {.c = x, .release = 0}, rel = {.c = y, .release = 1};
    atomic_init(&rd.done, 0);
    atomic_init(&rel.done, 0);
    pthread_t t1, t2;
    /* y's extent shares a page with x's when the alignment is below the
     * page size; only then does its release wait. */
    int shares = sw_block_device_carrier_offset_bytes(y) / 4096 ==
                 sw_block_device_carrier_offset_bytes(x) / 4096;
    CHECK(pthread_create(&t1, NULL, waiter_run, &rd) == 0);
    if (shares)
        CHECK(pthread_create(&t2, NULL, waiter_run, &rel) == 0);
    CHECK(still_blocked(&rd));
    if (shares)
        CHECK(still_blocked(&rel));
    sw_fault_resume();
    pthread_join(t1, NULL);
    if (shares)
        pthread_join(t2, NULL);
    CHECK_EQ_I64(rd.st, SW_OK);
    CHECK(rd.value == 3.0f);
    if (shares)
        CHECK_EQ_I64(rel.st, SW_OK);
    CHECK_EQ_I64(sw_move_wait(m, &r, &err), SW_OK);
    CHECK(slots_equal(out, n, 3.0f));
    sw_move_unref(m);
    sw_tensor_unref(r);
    sw_tensor_unref(tx);
    sw_tensor_unref(t);
    sw_carrier_unref(out);
    sw_carrier_unref(src);
    sw_carrier_unref(x);
    sw_carrier_unref(y);
    CHECK_EQ_I64(sw_block_device_close(d, &err), SW_OK);
    sw_block_device_unref(d);
}

/* Where a move between CPU and a device runs (move.h, "Where the transfer
 * runs"): a small read out of the device and a waited move up to 16 MiB on
 * the caller, committed before sw_move_async returns; a write the caller
 * does not wait for, and a large read, on the pool (commit on another
 * thread). Each counts its bytes on the progress counter. */
typedef struct where_ran {
    pthread_t thread;
    int committed;
} where_ran;

static void note_thread(sw_move_handle *m, sw_status st, sw_tensor *result, void *user)
{
    (void)m;
    (void)result;
    where_ran *w = user;
    w->thread = pthread_self();
    w->committed = st == SW_OK ? 1 : -1;
}

/* One move of `n` slots from `t` into `dst`; 1 when it committed on this
 * thread before sw_move_async returned, 0 when it committed on another
 * thread (which may already be done when sw_move_async returns: a fast pool
 * is allowed to win the race), -1 on failure. */
static int move_ran_here(sw_tensor *t, sw_carrier *dst, int64_t n, int waits)
{
    sw_error err;
    where_ran w = {0};
    int64_t progress = 0;
    sw_move_options o = {.on_commit = note_thread, .user = &w, .progress = &progress,
                         .caller_waits = waits};
    sw_move_handle *m = NULL;
    if (sw_move_async(t, dst, &o, &m, &err) != SW_OK)
        return -1;
    int done_at_return = sw_move_done(m);
    sw_tensor *r = NULL;
    sw_status st = sw_move_wait(m, &r, &err);
    sw_tensor_unref(r);
    sw_move_unref(m);
    if (st != SW_OK || w.committed != 1 || progress != n * 4)
        return -1;
    int here = pthread_equal(w.thread, pthread_self());
    if (!here)
        return 0;
    return done_at_return ? 1 : -1;
}

static void test_block_routes_where_they_run(void)
{
    sw_error err;
    sw_block_device *d = open_loop();
    if (!d)
        return;
    int64_t sizes[] = {16, 16 << 10, 1 << 18};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        int64_t n = sizes[i];
        int small = n * 4 <= (64 << 10);
        for (int waits = 0; waits < 2; waits++) {
            sw_carrier *src = cpu_values(n, (float)n), *x = NULL, *out = NULL;
            CHECK_EQ_I64(sw_block_device_allocate(d, n, SW_DT_FLOAT32, 0, &x, &err), SW_OK);
            CHECK_EQ_I64(sw_cpu_new(n, SW_DT_FLOAT32, SW_CARRIER_EMPTY, &out, &err), SW_OK);
            sw_tensor *t = flat_at(src, 0, n), *tx = flat_at(x, 0, n);
            /* Into the device: on the caller only when it waits. */
            CHECK_EQ_I64(move_ran_here(t, x, n, waits), (waits ? 1 : 0));
            /* Out of it: on the caller when it waits or when small. */
            CHECK_EQ_I64(move_ran_here(tx, out, n, waits), (waits || small ? 1 : 0));
            CHECK(slots_equal(out, n, (float)n));
            sw_tensor_unref(t);
            sw_tensor_unref(tx);
            sw_carrier_unref(src);
            sw_carrier_unref(x);
            sw_carrier_unref(out);
        }
    }
    CHECK_EQ_I64(sw_block_device_close(d, &err), SW_OK);
    sw_block_device_unref(d);
}

int main(void)
{
    test_b2_open_refusals();
    const char *why = loop_unavailable();
    if (!why && loop_attach(&loop, 64 * MIB, 0, &why) == 0) {
        test_b11_exit_with_moves_in_flight(); /* first: fork before there are threads */
        test_b3_allocate_extents();
        test_b5_slots_and_flush();
        test_b11_move_roundtrip_durable();
        test_b10_other_pairs_refused();
        test_b6_faults();
        test_b9_threads();
        test_b9_threshold_reads_in_flight();
        test_b8_close_right_after_waited_move();
        test_b8_close_when_unused();
        test_b3_allocate_values();
        test_b5_failed_write_in_transfer_counts_nothing();
        test_b9_slot_io_and_release_wait_for_transfers();
        test_block_routes_where_they_run();
        loop_detach(&loop);
        test_b11_device_cannot_store_it();
    } else {
        printf("skip the loop device tests: %s\n", why);
    }
    sw_move_drain();
    return check_report("block_device");
}
