/* Moves that grow an empty FileBacked destination (C-12) through the public
 * C API: a failure at any step after the growth (submission, the transfer,
 * the commit) gives the growth back, so the destination's size, file
 * length, contents and version are as before (G-3); a failed growth is a
 * refusal of the move itself (SW_MOVE_GROWTH_FAILED); a small copy from
 * host memory grows the file by its write alone, a large one, a values
 * copy and a supplied transfer resize it first. */
#include <sys/stat.h>

#include "check.h"
#include "helpers.h"
#include <strideweave/strideweave.h>
#include "strideweave/testing.h"

static int submits, completes, failed_completes;

static void on_profile(const sw_move_event *ev, void *user)
{
    (void)user;
    if (ev->kind == SW_MOVE_EVENT_SUBMIT)
        submits++;
    else if (completes++, ev->status != SW_OK)
        failed_completes++;
}

/* A move's parts: a CPU source of n values, a flat tensor on it and an
 * empty FileBacked destination. */
typedef struct growth {
    sw_carrier *src, *fb;
    sw_tensor *t;
} growth;

static growth growth_new(int64_t n)
{
    sw_error err;
    growth g = {.src = cpu_values(n, 0.5f)};
    g.t = flat_tensor(g.src, n);
    CHECK(g.src && g.t);
    CHECK(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &g.fb, &err) == SW_OK);
    return g;
}

static void growth_free(growth *g)
{
    sw_tensor_unref(g->t);
    sw_carrier_unref(g->fb);
    sw_carrier_unref(g->src);
}

static long long file_bytes(sw_carrier *fb)
{
    struct stat st;
    return stat(sw_file_backed_path(fb), &st) == 0 ? (long long)st.st_size : -1;
}

/* The destination is as it was before the failed move, and still takes a
 * move afterwards. */
static void check_as_before(sw_carrier *fb, uint64_t version, sw_tensor *t, int64_t n)
{
    sw_error err;
    CHECK_EQ_I64(sw_carrier_size(fb), 0);
    CHECK_EQ_I64(file_bytes(fb), 0);
    CHECK_EQ_I64(sw_carrier_version(fb), version);
    CHECK(!sw_carrier_is_pending(fb) && !sw_carrier_is_released(fb));
    CHECK(!sw_carrier_is_released(t ? sw_tensor_carrier(t) : fb));
    sw_tensor *r = NULL;
    CHECK(sw_move(t, fb, &r, &err) == SW_OK);
    CHECK_EQ_I64(sw_carrier_size(fb), n);
    CHECK_EQ_I64(file_bytes(fb), n * 4);
    float last = 0;
    CHECK(sw_carrier_read(fb, n - 1, 1, &last, &err) == SW_OK && last == (float)(n - 1) + 0.5f);
    sw_tensor_unref(r);
}

/* A fault in the transfer, on the caller (small: the light path) and on
 * the pool (large), for a growth by write (<= 1 MiB) and by resize. */
static void test_transfer_failure_undoes_growth(void)
{
    static const int64_t sizes[] = {16, 64 << 10, 512 << 10};
    static const char *const faults[] = {"move_transfer", "pwrite"};
    for (int i = 0; i < 3; i++) {
        for (int f = 0; f < 2; f++) {
            sw_error err;
            int64_t n = sizes[i];
            growth g = growth_new(n);
            sw_carrier *fb = g.fb;
            sw_tensor *t = g.t;
            uint64_t version = sw_carrier_version(fb);
            sw_tensor *r = NULL;
            CHECK(sw_fault_arm(faults[f], 0, -1) == SW_OK);
            CHECK(sw_move(t, fb, &r, &err) != SW_OK && r == NULL);
            sw_fault_clear();
            check_as_before(fb, version, t, n);
            growth_free(&g);
        }
    }
}

/* A failure at commit, after the transfer wrote the file: the light path's
 * result tensor cannot be made (its layout copy, the second allocation of
 * the move after the handle). */
static void test_commit_failure_undoes_growth(void)
{
    sw_error err;
    int64_t n = 16;
    growth g = growth_new(n);
    sw_carrier *fb = g.fb;
    sw_tensor *t = g.t;
    uint64_t version = sw_carrier_version(fb);
    submits = completes = failed_completes = 0;
    sw_move_set_profile_hook(on_profile, NULL);
    sw_tensor *r = NULL;
    CHECK(sw_fault_arm("alloc", 1, 1) == SW_OK);
    CHECK(sw_move(t, fb, &r, &err) == SW_ENOMEM && r == NULL);
    sw_fault_clear();
    sw_move_set_profile_hook(NULL, NULL);
    /* It failed at commit: submitted, then completed with the failure. */
    CHECK(submits == 1 && completes == 1 && failed_completes == 1);
    check_as_before(fb, version, t, n);
    growth_free(&g);
}

/* Held at the start of its transfer (the pause point puts the move on the
 * pool), the grown destination's file has the length its growth gave it:
 * 0 for a small copy from host memory (no resize: the write sets it), the
 * whole span for a large one. */
static long long file_bytes_before_transfer(int64_t n, const sw_move_options *o)
{
    sw_error err;
    growth g = growth_new(n);
    sw_carrier *fb = g.fb;
    sw_tensor *t = g.t;
    sw_move_handle *m = NULL;
    CHECK(sw_fault_arm("move_transfer_pause", 0, 1) == SW_OK);
    CHECK(sw_move_async(t, fb, o, &m, &err) == SW_OK);
    sw_fault_wait_paused();
    CHECK_EQ_I64(sw_carrier_size(fb), n);
    long long bytes = file_bytes(fb);
    sw_fault_resume();
    sw_tensor *r = NULL;
    CHECK(sw_move_wait(m, &r, &err) == SW_OK);
    sw_fault_clear();
    CHECK_EQ_I64(file_bytes(fb), n * 4);
    float last = 0;
    CHECK(sw_carrier_read(fb, n - 1, 1, &last, &err) == SW_OK && last == (float)(n - 1) + 0.5f);
    sw_tensor_unref(r);
    sw_move_unref(m);
    growth_free(&g);
    return bytes;
}

static void test_small_growth_by_write(void)
{
    CHECK_EQ_I64(file_bytes_before_transfer(16, NULL), 0);
    CHECK_EQ_I64(file_bytes_before_transfer(256 << 10, NULL), 0); /* exactly 1 MiB */
    CHECK_EQ_I64(file_bytes_before_transfer((256 << 10) + 1, NULL),
                 ((256 << 10) + 1) * 4);
}

/* Growing the empty destination fails (the resize's fault site, which a
 * growth by write shares): sw_move_async refuses the move itself, with
 * the growth's own status and SW_MOVE_GROWTH_FAILED in err->detail, so
 * that a binding refuses the request as it refuses a row: no handle, no
 * profiling event, nothing changed. On the caller (small), on the pool
 * (64 Ki slots: a growth by write), and by resize (512 Ki slots). */
static void test_growth_failure_is_refused(void)
{
    static const int64_t sizes[] = {16, 64 << 10, 512 << 10};
    for (int i = 0; i < 3; i++) {
        sw_error err;
        int64_t n = sizes[i];
        growth g = growth_new(n);
        sw_carrier *fb = g.fb;
        sw_tensor *t = g.t;
        submits = completes = failed_completes = 0;
        sw_move_set_profile_hook(on_profile, NULL);
        sw_move_handle *m = NULL;
        CHECK(sw_fault_arm("truncate", 0, -1) == SW_OK);
        CHECK(sw_move_async(t, fb, NULL, &m, &err) == SW_EIO && m == NULL);
        sw_fault_clear();
        sw_move_set_profile_hook(NULL, NULL);
        CHECK(err.detail == SW_MOVE_GROWTH_FAILED);
        CHECK(submits == 0 && completes == 0);
        check_as_before(fb, 0, t, n);
        growth_free(&g);
    }
}

/* A submission that fails after the growth (the injected submission
 * failure, on the caller and on the pool) gives it back too. */
static void test_submission_failure_undoes_growth(void)
{
    static const int64_t sizes[] = {16, 512 << 10};
    for (int i = 0; i < 2; i++) {
        sw_error err;
        int64_t n = sizes[i];
        growth g = growth_new(n);
        sw_carrier *fb = g.fb;
        sw_tensor *t = g.t;
        sw_move_handle *m = NULL;
        CHECK(sw_fault_arm("move_submit", 0, 1) == SW_OK);
        CHECK(sw_move_async(t, fb, NULL, &m, &err) == SW_EIO && m == NULL);
        sw_fault_clear();
        CHECK(err.detail == 0);
        check_as_before(fb, 0, t, n);
        growth_free(&g);
    }
}

/* A transfer the binding supplies (a copy written in Python) into an empty
 * FileBacked: the core grows it by resize (the supplied copy may write
 * only the values), before calling the transfer, and gives the growth back
 * when the transfer fails. What the transfer saw of its destination: */
typedef struct supplied_seen {
    sw_status status; /* what the transfer reports */
    int64_t size;
    long long bytes;
    sw_carrier *dst;
    int calls;
} supplied_seen;

static void supplied_copy(sw_move_handle *m, void *user)
{
    supplied_seen *seen = user;
    seen->calls++;
    seen->size = sw_carrier_size(seen->dst);
    seen->bytes = file_bytes(seen->dst);
    sw_move_transfer_done(m, seen->status, NULL);
}

static sw_status supplied_move(sw_tensor *t, sw_carrier *fb, supplied_seen *seen,
                               sw_error *err)
{
    sw_move_options o = {.transfer = supplied_copy, .user = seen, .bytes = 64};
    seen->dst = fb;
    sw_move_handle *m = NULL;
    sw_status st = sw_move_async(t, fb, &o, &m, err);
    if (st != SW_OK)
        return st;
    st = sw_move_wait(m, NULL, err);
    sw_move_unref(m);
    return st;
}

static void test_supplied_transfer_growth(void)
{
    sw_error err;
    int64_t n = 16;
    growth g = growth_new(n);
    sw_carrier *fb = g.fb;
    sw_tensor *t = g.t;
    /* Its growth fails: refused, the transfer never called. */
    supplied_seen seen = {.status = SW_OK};
    CHECK(sw_fault_arm("truncate", 0, -1) == SW_OK);
    CHECK(supplied_move(t, fb, &seen, &err) == SW_EIO);
    sw_fault_clear();
    CHECK(err.detail == SW_MOVE_GROWTH_FAILED && seen.calls == 0);
    CHECK_EQ_I64(sw_carrier_size(fb), 0);
    CHECK_EQ_I64(file_bytes(fb), 0);
    /* Its transfer fails: the growth it saw goes back. */
    seen.status = SW_EIO;
    CHECK(supplied_move(t, fb, &seen, &err) == SW_EIO);
    CHECK(seen.calls == 1 && seen.size == n && seen.bytes == n * 4);
    CHECK(!sw_carrier_is_released(g.src) && !sw_carrier_is_pending(fb));
    CHECK_EQ_I64(sw_carrier_size(fb), 0);
    CHECK_EQ_I64(file_bytes(fb), 0);
    /* It succeeds: the destination keeps the span's length. */
    seen.status = SW_OK;
    CHECK(supplied_move(t, fb, &seen, &err) == SW_OK);
    CHECK(seen.calls == 2 && seen.size == n && seen.bytes == n * 4);
    CHECK_EQ_I64(sw_carrier_size(fb), n);
    CHECK_EQ_I64(file_bytes(fb), n * 4);
    CHECK(sw_carrier_is_released(g.src));
    growth_free(&g);
}

/* A move that copies only the values (options.elementwise) does not write
 * the whole span, so its small growth is a resize too. */
static void test_elementwise_growth_resizes(void)
{
    sw_move_options o = {.elementwise = 1};
    CHECK_EQ_I64(file_bytes_before_transfer(16, &o), 16 * 4);
}

int main(void)
{
    if (!sw_fault_enabled()) {
        fprintf(stderr, "move_growth needs a fault-injection build\n");
        return 77;
    }
    test_transfer_failure_undoes_growth();
    test_commit_failure_undoes_growth();
    test_small_growth_by_write();
    test_growth_failure_is_refused();
    test_submission_failure_undoes_growth();
    test_supplied_transfer_growth();
    test_elementwise_growth_resizes();
    return check_report("move_growth");
}
