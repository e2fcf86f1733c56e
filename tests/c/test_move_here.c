/* A route run here (move.h, sw_move_transfer_here and
 * sw_move_transfer_span_here): the exact pair's transfer on the calling
 * thread, without a move. Each refusal names its row and changes nothing
 * (no mark, no value, no size, no version); the pair's route decides
 * span or values unless the caller asks; SW_MOVE_HERE_MARK refuses a
 * pending carrier and leaves none pending after, also when the copy
 * fails midway (injected faults); CPU <-> BlockDeviceCarrier goes through
 * the device; many threads copying between their own carriers and
 * racing for a shared one under SW_MOVE_HERE_MARK (TSan build). */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "helpers.h"
#include "loop.h"
#include <strideweave/strideweave.h>
#include <strideweave/binding.h>
#include "strideweave/testing.h"

static sw_carrier *file_of(int64_t n)
{
    sw_carrier *c = NULL;
    sw_error err;
    if (sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &c, &err) != SW_OK ||
        sw_carrier_allocate(c, n, &err) != SW_OK)
        CHECK(0);
    return c;
}

static sw_layout *layout_of(int64_t n, int64_t stride)
{
    uint8_t profile[1] = {SW_NODE_LEAF};
    int64_t ext[1] = {n}, str[1] = {stride};
    return sw_layout_new(1, profile, ext, str, NULL);
}

/* Every other slot (a layout with holes). */
static sw_layout *strided_layout(int64_t n) { return layout_of(n, 2); }

static float slot(sw_carrier *c, int64_t i)
{
    float v = -1;
    sw_carrier_read(c, i, 1, &v, NULL);
    return v;
}

typedef struct snap {
    int released, pending;
    int64_t size;
    uint64_t version;
    float first, last;
} snap;

static snap take(sw_carrier *c)
{
    int64_t n = sw_carrier_size(c);
    return (snap){sw_carrier_is_released(c), sw_carrier_pending_roles(c), n,
                  sw_carrier_version(c), n ? slot(c, 0) : 0, n ? slot(c, n - 1) : 0};
}

static int same(snap a, snap b) { return memcmp(&a, &b, sizeof a) == 0; }

/* `src` -> `dst` over `l` at `offset` is refused with `want` and `row`,
 * both carriers as they were. */
static void expect_refused(sw_carrier *src, int64_t offset, const sw_layout *l, sw_carrier *dst,
                           unsigned flags, sw_status want, int row, int line)
{
    snap s0 = src ? take(src) : (snap){0}, d0 = dst ? take(dst) : (snap){0};
    sw_error err;
    sw_status st = sw_move_transfer_span_here(src, offset, l, dst, flags, &err);
    if (st != want || err.detail != row)
        fprintf(stderr, "line %d: status %d detail %d (%s)\n", line, st, err.detail, err.msg);
    CHECK_EQ_I64(st, want);
    CHECK_EQ_I64(err.detail, row);
    CHECK(!src || same(s0, take(src)));
    CHECK(!dst || same(d0, take(dst)));
}

/* Each refusal of the table, in its order, with nothing changed. */
static void test_refusals_change_nothing(void)
{
    sw_carrier *src = cpu_values(4, 1), *dst = cpu_values(4, 0), *small = cpu_values(2, 0);
    sw_carrier *gone = cpu_values(4, 0), *ints = NULL, *bools = NULL;
    sw_cpu_new(4, SW_DT_INT32, 0, &ints, NULL);
    sw_cpu_new(4, SW_DT_BOOL, 0, &bools, NULL);
    sw_carrier_release(gone, NULL);
    sw_layout *l4 = flat_layout(4);
    expect_refused(NULL, 0, l4, dst, 0, SW_ETYPE, SW_MOVE_NO_SOURCE, __LINE__);
    expect_refused(src, 0, l4, NULL, 0, SW_ETYPE, SW_MOVE_NO_DESTINATION, __LINE__);
    expect_refused(src, 0, NULL, dst, 0, SW_ETYPE, 0, __LINE__);
    expect_refused(src, 0, l4, src, 0, SW_EINVAL, SW_MOVE_SAME_CARRIER, __LINE__);
    expect_refused(gone, 0, l4, dst, 0, SW_ESTATE, SW_MOVE_SOURCE_RELEASED, __LINE__);
    expect_refused(src, 0, l4, gone, 0, SW_ESTATE, SW_MOVE_DESTINATION_RELEASED, __LINE__);
    sw_carrier_mark_pending(src, SW_CARRIER_PENDING_SOURCE);
    expect_refused(src, 0, l4, dst, SW_MOVE_HERE_MARK, SW_ESTATE, SW_MOVE_SOURCE_PENDING,
                   __LINE__);
    sw_carrier_unmark_pending(src, SW_CARRIER_PENDING_SOURCE);
    sw_carrier_mark_pending(dst, SW_CARRIER_PENDING_DESTINATION);
    expect_refused(src, 0, l4, dst, SW_MOVE_HERE_MARK, SW_ESTATE, SW_MOVE_DESTINATION_PENDING,
                   __LINE__);
    sw_carrier_unmark_pending(dst, SW_CARRIER_PENDING_DESTINATION);
    /* Float32 -> Int32: same width, the binding's to allow; Bool: not. */
    expect_refused(src, 0, l4, bools, 0, SW_ETYPE, SW_MOVE_DTYPE_MISMATCH, __LINE__);
    expect_refused(src, 1, l4, dst, 0, SW_EINVAL, 0, __LINE__); /* past the source's end */
    expect_refused(src, -1, l4, dst, 0, SW_EINVAL, 0, __LINE__);
    expect_refused(src, 0, l4, small, 0, SW_EINVAL, SW_MOVE_TOO_SMALL, __LINE__);
    CHECK_EQ_I64(sw_move_transfer_span_here(src, 0, l4, ints, 0, NULL), SW_OK);
    sw_layout_free(l4);
    sw_carrier_unref(src), sw_carrier_unref(dst), sw_carrier_unref(small);
    sw_carrier_unref(gone), sw_carrier_unref(ints), sw_carrier_unref(bools);
}

/* Row 9 and STATE_ONLY carriers: refused as sw_move_async refuses them. */
static const sw_carrier_class binding_class = {
    .name = "BindingCarrier", .flags = SW_CARRIER_CLASS_STATE_ONLY,
};

static void test_route_refusals(void)
{
    sw_carrier *src = cpu_values(4, 1), *bound = NULL;
    sw_carrier_new(&binding_class, NULL, SW_DT_FLOAT32, 0, &bound, NULL);
    sw_layout *l4 = flat_layout(4);
    expect_refused(src, 0, l4, bound, 0, SW_ENOTSUP, SW_MOVE_DESTINATION_STATE_ONLY, __LINE__);
    expect_refused(bound, 0, l4, src, 0, SW_ENOTSUP, SW_MOVE_SOURCE_STATE_ONLY, __LINE__);
    sw_layout_free(l4);
    sw_carrier_unref(src), sw_carrier_unref(bound);
}

/* The pair's route: CPU -> FileBacked is bulk (the holes go too), CPU ->
 * CPU the values only; the caller's flags choose instead. */
static void test_span_or_values(void)
{
    sw_layout *holes = strided_layout(3); /* slots 0, 2, 4: cosize 5 */
    sw_carrier *src = cpu_values(5, 10);
    sw_carrier *file = file_of(5), *mem = cpu_values(5, 0);
    sw_error err;
    CHECK_EQ_I64(sw_move_transfer_span_here(src, 0, holes, file, 0, &err), SW_OK);
    CHECK(slot(file, 1) == 11 && slot(file, 3) == 13 && slot(file, 4) == 14);
    CHECK_EQ_I64(sw_move_transfer_span_here(src, 0, holes, mem, 0, &err), SW_OK);
    CHECK(slot(mem, 0) == 10 && slot(mem, 1) == 1 && slot(mem, 2) == 12 && slot(mem, 3) == 3);
    CHECK_EQ_I64(sw_move_transfer_span_here(src, 0, holes, mem, SW_MOVE_HERE_SPAN, &err),
                 SW_OK);
    CHECK(slot(mem, 1) == 11 && slot(mem, 3) == 13);
    sw_carrier *file2 = file_of(5);
    CHECK_EQ_I64(sw_move_transfer_span_here(src, 0, holes, file2, SW_MOVE_HERE_VALUES, &err),
                 SW_OK);
    CHECK(slot(file2, 0) == 10 && slot(file2, 2) == 12 && slot(file2, 1) == 0);
    /* The tensor form reads the tensor's carrier, offset and layout. */
    sw_tensor *t = NULL;
    int64_t ext[1] = {2};
    CHECK_EQ_I64(sw_tensor_new_strided(src, 3, 1, ext, NULL, &t, &err), SW_OK);
    CHECK_EQ_I64(sw_move_transfer_here(t, mem, 0, &err), SW_OK);
    CHECK(slot(mem, 0) == 13 && slot(mem, 1) == 14);
    CHECK_EQ_I64(sw_move_transfer_here(NULL, mem, 0, &err), SW_ETYPE);
    CHECK_EQ_I64(err.detail, SW_MOVE_NO_SOURCE);
    /* Nothing moved for good: no release, no pending mark, no version step. */
    CHECK(!sw_carrier_is_released(src) && !sw_carrier_is_pending(src));
    CHECK(!sw_carrier_is_pending(mem) && sw_carrier_version(mem) == 0);
    sw_tensor_unref(t);
    sw_layout_free(holes);
    sw_carrier_unref(src), sw_carrier_unref(file), sw_carrier_unref(file2);
    sw_carrier_unref(mem);
}

/* Faults mid-transfer: the failure comes back, the marks are gone, the
 * source is unchanged and both carriers are usable again. */
static void test_faults_mid_transfer(void)
{
    if (!sw_fault_enabled()) {
        fprintf(stderr, "faults: no fault injection in this build\n");
        return;
    }
    sw_layout *l4 = flat_layout(4);
    sw_carrier *src = cpu_values(4, 1), *file = file_of(4);
    const char *points[] = {"move_here_transfer", "pwrite"};
    for (size_t i = 0; i < sizeof points / sizeof points[0]; i++) {
        sw_error err;
        CHECK_EQ_I64(sw_fault_arm(points[i], 0, 1), SW_OK);
        sw_status st = sw_move_transfer_span_here(src, 0, l4, file, SW_MOVE_HERE_MARK, &err);
        sw_fault_clear();
        CHECK(st != SW_OK);
        CHECK(!sw_carrier_is_pending(src) && !sw_carrier_is_pending(file));
        CHECK(slot(src, 0) == 1 && slot(src, 3) == 4 && !sw_carrier_is_released(src));
        CHECK_EQ_I64(sw_move_transfer_span_here(src, 0, l4, file, SW_MOVE_HERE_MARK, &err),
                     SW_OK);
        CHECK(slot(file, 0) == 1 && slot(file, 3) == 4);
        float zero[4] = {0};
        sw_carrier_write(file, 0, 4, zero, NULL);
    }
    sw_layout_free(l4);
    sw_carrier_unref(src), sw_carrier_unref(file);
}

/* ---- a BlockDevice pair ------------------------------------------------------ */

static loop_dev loop;

static void test_block_device_pair(void)
{
    sw_error err;
    sw_block_device *d = NULL;
    if (sw_block_device_open(loop.path, &d, &err) != SW_OK) {
        CHECK(0);
        return;
    }
    sw_carrier *on_dev = NULL, *src = cpu_values(8, 5), *back = cpu_values(8, 0);
    sw_carrier *file = file_of(8);
    CHECK_EQ_I64(sw_block_device_allocate(d, 8, SW_DT_FLOAT32, 0, &on_dev, &err), SW_OK);
    sw_layout *l8 = flat_layout(8);
    CHECK_EQ_I64(sw_move_transfer_span_here(src, 0, l8, on_dev, SW_MOVE_HERE_MARK, &err), SW_OK);
    CHECK(slot(on_dev, 0) == 5 && slot(on_dev, 7) == 12);
    CHECK_EQ_I64(sw_move_transfer_span_here(on_dev, 0, l8, back, 0, &err), SW_OK);
    CHECK(slot(back, 0) == 5 && slot(back, 7) == 12);
    /* Row 9: a block device only to and from CPU. */
    expect_refused(on_dev, 0, l8, file, 0, SW_ENOTSUP, SW_MOVE_ROUTE_REFUSED, __LINE__);
    /* A failed write into the device faults it; a faulted device refuses. */
    if (sw_fault_enabled()) {
        CHECK_EQ_I64(sw_fault_arm("blockdev_fdatasync", 0, 1), SW_OK);
        CHECK(sw_move_transfer_span_here(src, 0, l8, on_dev, SW_MOVE_HERE_MARK, &err) != SW_OK);
        sw_fault_clear();
        CHECK(!sw_carrier_is_pending(on_dev) && !sw_carrier_is_pending(src));
        CHECK(sw_block_device_is_faulted(d));
        expect_refused(src, 0, l8, on_dev, 0, SW_ESTATE, SW_MOVE_ROUTE_REFUSED, __LINE__);
    }
    sw_layout_free(l8);
    sw_carrier_unref(on_dev), sw_carrier_unref(src), sw_carrier_unref(back);
    sw_carrier_unref(file);
    sw_block_device_unref(d);
}

/* ---- threads ------------------------------------------------------------------ */

#define THREADS 4
#define ROUNDS 200

static sw_carrier *shared_dst;
static sw_layout *shared_layout;
static int busy_refusals, copies, failures; /* CHECK is not thread-safe: count */

static void *copier(void *arg)
{
    long k = (long)arg;
    sw_carrier *mine = cpu_values(64, (float)(k * 1000)), *out = cpu_values(64, 0);
    for (int r = 0; r < ROUNDS; r++) {
        sw_error err;
        if (sw_move_transfer_span_here(mine, 0, shared_layout, out, SW_MOVE_HERE_MARK, &err) !=
            SW_OK)
            __atomic_fetch_add(&failures, 1, __ATOMIC_RELAXED);
        sw_status st = sw_move_transfer_span_here(mine, 0, shared_layout, shared_dst,
                                                  SW_MOVE_HERE_MARK, &err);
        if (st == SW_OK)
            __atomic_fetch_add(&copies, 1, __ATOMIC_RELAXED);
        else if (st == SW_ESTATE && err.detail == SW_MOVE_DESTINATION_PENDING)
            __atomic_fetch_add(&busy_refusals, 1, __ATOMIC_RELAXED);
        else
            __atomic_fetch_add(&failures, 1, __ATOMIC_RELAXED);
    }
    if (slot(out, 63) != (float)(k * 1000 + 63))
        __atomic_fetch_add(&failures, 1, __ATOMIC_RELAXED);
    sw_carrier_unref(mine), sw_carrier_unref(out);
    return NULL;
}

/* Many threads; the shared destination is copied into by one at a time
 * (the others are refused, never overlap), and is left unmarked. */
static void test_threads(void)
{
    shared_dst = cpu_values(64, 0);
    shared_layout = flat_layout(64);
    pthread_t th[THREADS];
    for (long k = 0; k < THREADS; k++)
        pthread_create(&th[k], NULL, copier, (void *)k);
    for (int k = 0; k < THREADS; k++)
        pthread_join(th[k], NULL);
    CHECK_EQ_I64(failures, 0);
    CHECK_EQ_I64(copies + busy_refusals, THREADS * ROUNDS);
    CHECK(copies > 0 && !sw_carrier_is_pending(shared_dst));
    float first = slot(shared_dst, 0);
    CHECK(slot(shared_dst, 63) == first + 63); /* one copy's values, whole */
    sw_layout_free(shared_layout);
    sw_carrier_unref(shared_dst);
}

int main(void)
{
    test_refusals_change_nothing();
    test_route_refusals();
    test_span_or_values();
    test_faults_mid_transfer();
    test_threads();
    const char *why = loop_unavailable();
    if (!why && loop_attach(&loop, 16LL << 20, 0, &why) == 0) {
        test_block_device_pair();
        loop_detach(&loop);
    } else {
        fprintf(stderr, "block device pair skipped: %s\n", why);
    }
    return check_report("move_here");
}
