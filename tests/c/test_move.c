/* Moves through the public C API: the seed's validation order with
 * "nothing changed" after every refusal, growth and its undo, the pending
 * guard, one commit (hooks once, the same result for every wait), dropped
 * handles, and faults injected part way through a transfer. */
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "helpers.h"
#include "gated.h"
#include <strideweave/strideweave.h>
#include "strideweave/testing.h"

/* ---- helpers ---------------------------------------------------------------- */

static sw_carrier *cpu_filled(int64_t n, sw_dtype dt, int flags)
{
    sw_error err;
    sw_carrier *c = NULL;
    if (sw_cpu_new(n, dt, flags & ~SW_CARRIER_IMMUTABLE, &c, &err) != SW_OK)
        return NULL;
    for (int64_t i = 0; i < n; i++) {
        if (dt == SW_DT_FLOAT32) {
            float v = (float)i + 0.25f;
            sw_carrier_write(c, i, 1, &v, &err);
        } else {
            int32_t v = (int32_t)i * 3;
            sw_carrier_write(c, i, 1, &v, &err);
        }
    }
    if (flags & SW_CARRIER_IMMUTABLE) { /* same values, immutable */
        void *buf = sw_malloc((size_t)n * 4);
        sw_carrier_read(c, 0, n, buf, &err);
        sw_carrier_unref(c);
        sw_generic_new(buf, n, dt, SW_CARRIER_IMMUTABLE, &c, &err);
        sw_free(buf);
    }
    return c;
}

/* What a refusal must leave alone. */
typedef struct snap {
    int released, pending, is_mutable;
    int64_t size;
    uint64_t version;
    float first;
} snap;

static snap take(sw_carrier *c)
{
    snap s = {sw_carrier_is_released(c), sw_carrier_is_pending(c), sw_carrier_is_mutable(c),
              sw_carrier_size(c), sw_carrier_version(c), 0};
    sw_error err;
    if (s.size > 0 && !s.pending)
        sw_carrier_read(c, 0, 1, &s.first, &err);
    return s;
}

static int same(snap a, snap b)
{
    return a.released == b.released && a.pending == b.pending &&
           a.is_mutable == b.is_mutable && a.size == b.size && a.version == b.version &&
           a.first == b.first;
}

/* ---- hooks ---------------------------------------------------------------- */

static pthread_mutex_t hook_mu = PTHREAD_MUTEX_INITIALIZER;
static int commits, commit_failures, submits, completes, out_of_order;
static sw_tensor *committed_result;

static void on_commit(sw_move_handle *m, sw_status st, sw_tensor *result, void *user)
{
    (void)m;
    (void)user;
    pthread_mutex_lock(&hook_mu);
    commits++;
    if (st != SW_OK)
        commit_failures++;
    committed_result = result;
    pthread_mutex_unlock(&hook_mu);
}

static void on_profile(const sw_move_event *ev, void *user)
{
    (void)user;
    pthread_mutex_lock(&hook_mu);
    if (ev->kind == SW_MOVE_EVENT_SUBMIT)
        submits++;
    else {
        if (completes >= submits || ev->complete_ns < ev->submit_ns)
            out_of_order++;
        completes++;
    }
    pthread_mutex_unlock(&hook_mu);
}

static void reset_hooks(void)
{
    pthread_mutex_lock(&hook_mu);
    commits = commit_failures = submits = completes = out_of_order = 0;
    committed_result = NULL;
    pthread_mutex_unlock(&hook_mu);
}

/* ---- validation order ------------------------------------------------------- */

static void expect_refused(sw_tensor *t, sw_carrier *dst, sw_status want, const char *fragment,
                           int line)
{
    sw_error err = {0};
    sw_move_handle *m = NULL;
    sw_carrier *src = t ? sw_tensor_carrier(t) : NULL;
    snap s0 = src ? take(src) : (snap){0};
    snap d0 = dst ? take(dst) : (snap){0};
    int before = submits;
    sw_status st = sw_move_async(t, dst, NULL, &m, &err);
    if (st != want || (fragment && !strstr(err.msg, fragment)))
        fprintf(stderr, "line %d: got %d (%s), want %d with \"%s\"\n", line, (int)st, err.msg,
                (int)want, fragment ? fragment : "");
    CHECK(st == want);
    CHECK(!fragment || strstr(err.msg, fragment));
    CHECK(m == NULL);
    CHECK(submits == before); /* no profiling record either */
    if (src)
        CHECK(same(take(src), s0));
    if (dst)
        CHECK(same(take(dst), d0));
}

/* Each case breaks its own row and every later one it can, so a refusal
 * by the right row proves the order. */
static void test_validation_order(void)
{
    sw_error err;
    sw_move_set_profile_hook(on_profile, NULL);
    reset_hooks();
    sw_carrier *src = cpu_filled(4, SW_DT_FLOAT32, 0);
    sw_tensor *t = flat_tensor(src, 4);
    sw_carrier *small_int = cpu_filled(1, SW_DT_INT32, SW_CARRIER_IMMUTABLE);
    uint64_t token;

    /* 1: no tensor */
    expect_refused(NULL, small_int, SW_ETYPE, "tensor", __LINE__);
    /* 2: source released (before destination checks) */
    sw_carrier *rel = cpu_filled(4, SW_DT_FLOAT32, 0);
    sw_tensor *trel = flat_tensor(rel, 4);
    sw_carrier_release(rel, &err);
    expect_refused(trel, NULL, SW_ESTATE, "released", __LINE__);
    expect_refused(trel, rel, SW_ESTATE, "released", __LINE__);
    /* 3: source owned by another carrier */
    CHECK(sw_carrier_claim(src, &token, &err) == SW_OK);
    expect_refused(t, NULL, SW_ESTATE, "owned", __LINE__);
    expect_refused(t, small_int, SW_ESTATE, "owned", __LINE__);
    CHECK(sw_carrier_relinquish(src, token, &err) == SW_OK);
    /* 4: no destination */
    expect_refused(t, NULL, SW_ETYPE, "destination", __LINE__);
    /* 5: destination is the tensor's own carrier */
    expect_refused(t, src, SW_EINVAL, "own carrier", __LINE__);
    /* 6: destination released (and immutable, wrong dtype, too small) */
    sw_carrier *drel = cpu_filled(1, SW_DT_INT32, SW_CARRIER_IMMUTABLE);
    sw_carrier_release(drel, &err);
    expect_refused(t, drel, SW_ESTATE, "released", __LINE__);
    /* 7: destination immutable (and wrong dtype, too small) */
    expect_refused(t, small_int, SW_ESTATE, "not mutable", __LINE__);
    /* 7: destination owned, without owner access */
    sw_carrier *downed = cpu_filled(1, SW_DT_INT32, 0);
    CHECK(sw_carrier_claim(downed, &token, &err) == SW_OK);
    expect_refused(t, downed, SW_ESTATE, "owned", __LINE__);
    CHECK(sw_carrier_relinquish(downed, token, &err) == SW_OK);
    /* 8: dtype (and too small) */
    expect_refused(t, downed, SW_ETYPE, "Int32", __LINE__);
    /* 10: too small and cannot allocate */
    sw_carrier *small = cpu_filled(3, SW_DT_FLOAT32, 0);
    expect_refused(t, small, SW_EINVAL, "cannot allocate", __LINE__);
    /* 10: a FileBacked that is not empty cannot grow */
    sw_carrier *two = cpu_filled(2, SW_DT_FLOAT32, 0), *fb;
    sw_tensor *ttwo = flat_tensor(two, 2), *r;
    CHECK(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &fb, &err) == SW_OK);
    CHECK(sw_move(ttwo, fb, &r, &err) == SW_OK);
    CHECK_EQ_I64(sw_carrier_size(fb), 2);
    expect_refused(t, fb, SW_EINVAL, "cannot allocate", __LINE__);
    CHECK(submits == 1 && completes == 1 && out_of_order == 0);

    sw_tensor_unref(r);
    sw_tensor_unref(ttwo);
    sw_tensor_unref(trel);
    sw_tensor_unref(t);
    sw_carrier *all[] = {src, small_int, rel, drel, downed, small, two, fb};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        sw_carrier_unref(all[i]);
    sw_move_set_profile_hook(NULL, NULL);
}

/* ---- success paths ------------------------------------------------------------ */

static void test_move_cpu_file_cpu(void)
{
    sw_error err;
    sw_carrier *src = cpu_filled(12, SW_DT_FLOAT32, 0), *fb, *back;
    uint64_t v_src = sw_carrier_version(src);
    int64_t ext[2] = {3, 4};
    sw_tensor *t, *on_file, *home;
    CHECK(sw_tensor_new_strided(src, 0, 2, ext, NULL, &t, &err) == SW_OK);
    CHECK(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &fb, &err) == SW_OK);
    sw_move_handle *m;
    CHECK(sw_move_async(t, fb, NULL, &m, &err) == SW_OK);
    CHECK(sw_move_route_of(m) == SW_ROUTE_BULK);
    CHECK_EQ_I64(sw_move_bytes(m), 48);
    CHECK(sw_move_wait(m, &on_file, &err) == SW_OK);
    CHECK(sw_move_done(m));
    sw_move_unref(m);
    /* the result: on the destination at offset 0, same layout */
    CHECK(sw_tensor_carrier(on_file) == fb);
    CHECK_EQ_I64(sw_tensor_offset(on_file), 0);
    CHECK(sw_layout_equal(sw_tensor_layout(on_file), sw_tensor_layout(t)));
    CHECK_EQ_I64(sw_carrier_size(fb), 12); /* grown to exactly the cosize */
    CHECK(sw_carrier_is_released(src));
    CHECK(!sw_carrier_is_pending(src) && !sw_carrier_is_pending(fb));
    CHECK_EQ_I64(sw_carrier_version(src), v_src); /* a move is not a mutation */
    CHECK_EQ_I64(sw_carrier_version(fb), 0);
    float v;
    CHECK(sw_tensor_get_f32(on_file, 11, &v, &err) == SW_OK && v == 11.25f);
    /* and back */
    CHECK(sw_cpu_new(12, SW_DT_FLOAT32, SW_CARRIER_EMPTY, &back, &err) == SW_OK);
    CHECK(sw_move(on_file, back, &home, &err) == SW_OK);
    CHECK(sw_carrier_is_released(fb));
    CHECK(access(sw_file_backed_path(fb), F_OK) != 0); /* the file went with it */
    for (int64_t i = 0; i < 12; i++) {
        CHECK(sw_tensor_get_f32(home, i, &v, &err) == SW_OK);
        CHECK(v == (float)i + 0.25f);
    }
    CHECK_EQ_I64(sw_carrier_version(back), 0);
    sw_tensor_unref(home);
    sw_tensor_unref(on_file);
    sw_tensor_unref(t);
    sw_carrier_unref(back);
    sw_carrier_unref(fb);
    sw_carrier_unref(src);
}

/* Seed: a stride-zero broadcast view of two elements over six coordinates
 * needs only two destination slots and keeps its layout. */
static void test_move_broadcast_view_needs_cosize_only(void)
{
    sw_error err;
    sw_carrier *src = cpu_filled(2, SW_DT_FLOAT32, 0), *fb;
    int64_t ext[2] = {2, 1}, wide[2] = {2, 3};
    sw_tensor *t, *b, *r;
    CHECK(sw_tensor_new_strided(src, 0, 2, ext, NULL, &t, &err) == SW_OK);
    CHECK(sw_tensor_broadcast(t, wide, &b, &err) == SW_OK);
    CHECK_EQ_I64(sw_tensor_size(b), 6);
    CHECK(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &fb, &err) == SW_OK);
    CHECK(sw_move(b, fb, &r, &err) == SW_OK);
    CHECK_EQ_I64(sw_carrier_size(fb), 2);
    CHECK(sw_layout_equal(sw_tensor_layout(r), sw_tensor_layout(b)));
    float v;
    CHECK(sw_tensor_get_f32(r, 5, &v, &err) == SW_OK && v == 1.25f);
    sw_tensor_unref(r);
    sw_tensor_unref(b);
    sw_tensor_unref(t);
    sw_carrier_unref(fb);
    sw_carrier_unref(src);
}

/* Every pair without a bulk route copies logical values: CPU -> CPU
 * through the strided kernel, Generic -> CPU through the ops. */
static void test_elementwise_fallback(void)
{
    sw_error err;
    sw_carrier *src = cpu_filled(12, SW_DT_INT32, 0), *dst;
    int64_t ext[2] = {3, 4};
    sw_tensor *t, *s, *r;
    CHECK(sw_tensor_new_strided(src, 0, 2, ext, NULL, &t, &err) == SW_OK);
    CHECK(sw_tensor_slice(t, 1, 1, 3, &s, &err) == SW_OK); /* offset 3, cosize 6 */
    CHECK(sw_cpu_new(6, SW_DT_INT32, 0, &dst, &err) == SW_OK);
    sw_move_handle *m;
    CHECK(sw_move_async(s, dst, NULL, &m, &err) == SW_OK);
    CHECK(sw_move_route_of(m) == SW_ROUTE_ELEMENTWISE);
    CHECK(sw_move_wait(m, &r, &err) == SW_OK);
    sw_move_unref(m);
    int32_t v;
    for (int64_t k = 0; k < 6; k++) {
        CHECK(sw_tensor_get_i32(r, k, &v, &err) == SW_OK);
        CHECK(v == (int32_t)(3 + k) * 3);
    }
    sw_tensor_unref(r);
    sw_tensor_unref(s);
    sw_tensor_unref(t);
    sw_carrier_unref(dst);
    sw_carrier_unref(src);

    float gv[3] = {1, 2, 3};
    sw_carrier *g;
    CHECK(sw_generic_new(gv, 3, SW_DT_FLOAT32, 0, &g, &err) == SW_OK);
    t = flat_tensor(g, 3);
    CHECK(sw_cpu_new(3, SW_DT_FLOAT32, 0, &dst, &err) == SW_OK);
    CHECK(sw_move(t, dst, &r, &err) == SW_OK);
    CHECK(((float *)sw_cpu_pointer(dst))[2] == 3.0f);
    CHECK(sw_carrier_is_released(g));
    sw_tensor_unref(r);
    sw_tensor_unref(t);
    sw_carrier_unref(dst);
    sw_carrier_unref(g);
}

/* ---- pending guard, commit once ------------------------------------------------ */

static void test_pending_guard_and_commit_once(void)
{
    sw_error err;
    gated g;
    gated_init(&g, 4);
    sw_carrier *src = cpu_filled(4, SW_DT_FLOAT32, 0), *dst, *other;
    sw_tensor *t = flat_tensor(src, 4), *r1, *r2;
    CHECK(sw_carrier_new(&gated_ops, &g, SW_DT_FLOAT32, 0, &dst, &err) == SW_OK);
    CHECK(sw_cpu_new(4, SW_DT_FLOAT32, 0, &other, &err) == SW_OK);
    reset_hooks();
    sw_move_set_profile_hook(on_profile, NULL);
    sw_move_options opts = {.on_commit = on_commit};
    sw_move_handle *m;
    uint64_t v_src = sw_carrier_version(src);
    CHECK(sw_move_async(t, dst, &opts, &m, &err) == SW_OK);
    gated_wait_entered(&g); /* the transfer runs and holds at the gate */

    CHECK(!sw_move_done(m));
    CHECK(sw_carrier_is_pending(src) && sw_carrier_is_pending(dst));
    CHECK(!sw_carrier_is_mutable(src) && !sw_carrier_is_mutable(dst));
    CHECK(!sw_carrier_is_owned(src));
    float v = 5;
    CHECK(sw_carrier_read(src, 1, 1, &v, &err) == SW_OK && v == 1.25f); /* source readable */
    CHECK(sw_carrier_write(src, 1, 1, &v, &err) == SW_ESTATE);
    CHECK(strstr(err.msg, "pending") != NULL);
    CHECK(sw_carrier_release(src, &err) == SW_ESTATE);
    CHECK(strstr(err.msg, "pending") != NULL);
    CHECK(sw_carrier_increment_version(src, &err) == SW_ESTATE);
    CHECK(sw_carrier_read(dst, 0, 1, &v, &err) == SW_ESTATE); /* destination is not */
    CHECK(sw_carrier_write(dst, 0, 1, &v, &err) == SW_ESTATE);
    CHECK(sw_carrier_release(dst, &err) == SW_ESTATE);
    uint64_t token;
    CHECK(sw_carrier_claim(src, &token, &err) == SW_ESTATE);
    sw_move_handle *m2 = NULL;
    CHECK(sw_move_async(t, other, NULL, &m2, &err) == SW_ESTATE); /* another move of it */
    CHECK(strstr(err.msg, "pending") != NULL);
    sw_tensor *to = flat_tensor(other, 4);
    CHECK(sw_move_async(to, dst, NULL, &m2, &err) == SW_ESTATE); /* into the destination */
    CHECK(strstr(err.msg, "pending") != NULL);
    CHECK(m2 == NULL);
    DLManagedTensorVersioned *dl;
    CHECK(sw_tensor_to_dlpack(t, &dl, &err) == SW_OK); /* reads of the source stay allowed */
    CHECK(dl->flags & DLPACK_FLAG_BITMASK_READ_ONLY);
    CHECK(!sw_carrier_is_released(src) && sw_carrier_version(src) == v_src);
    CHECK(commits == 0);

    gated_open(&g);
    CHECK(sw_move_wait(m, &r1, &err) == SW_OK);
    CHECK(sw_move_wait(m, &r2, &err) == SW_OK);
    CHECK(r1 == r2); /* the same result on every wait */
    CHECK(commits == 1 && commit_failures == 0 && committed_result == r1);
    CHECK(submits == 1 && completes == 1 && out_of_order == 0);
    CHECK(sw_carrier_is_released(src) && !sw_carrier_is_pending(src));
    CHECK(!sw_carrier_is_pending(dst) && sw_carrier_is_mutable(dst));
    CHECK(g.slots[3] == 3.25f);
    CHECK(sw_tensor_get_f32(r1, 2, &v, &err) == SW_OK && v == 2.25f);
    CHECK_EQ_I64(sw_carrier_version(dst), 0);
    /* the export taken during the move still reads the old storage */
    CHECK(((float *)dl->dl_tensor.data)[3] == 3.25f);
    dl->deleter(dl);

    sw_move_set_profile_hook(NULL, NULL);
    sw_move_unref(m);
    sw_tensor_unref(r1);
    sw_tensor_unref(r2);
    sw_tensor_unref(to);
    sw_tensor_unref(t);
    sw_carrier_unref(other);
    sw_carrier_unref(src);
    sw_carrier_unref(dst);
    CHECK(g.destroyed == 1);
}

/* A dropped handle neither cancels nor blocks: the move commits on its own
 * and frees everything it held once done. */
static void test_dropped_handle(void)
{
    sw_error err;
    gated g;
    gated_init(&g, 4);
    int64_t live = sw_alloc_live_bytes();
    sw_carrier *src = cpu_filled(4, SW_DT_FLOAT32, 0), *dst;
    sw_tensor *t = flat_tensor(src, 4);
    CHECK(sw_carrier_new(&gated_ops, &g, SW_DT_FLOAT32, 0, &dst, &err) == SW_OK);
    reset_hooks();
    sw_move_options opts = {.on_commit = on_commit};
    sw_move_handle *m;
    CHECK(sw_move_async(t, dst, &opts, &m, &err) == SW_OK);
    sw_move_unref(m);  /* drop the handle ... */
    sw_tensor_unref(t); /* ... and everything else */
    sw_carrier_unref(src);
    sw_carrier_unref(dst);
    CHECK(g.destroyed == 0); /* the move still holds the destination */
    gated_open(&g);
    sw_move_drain();
    CHECK(commits == 1 && commit_failures == 0);
    CHECK(g.slots[2] == 2.25f);
    CHECK(g.destroyed == 1);
    CHECK_EQ_I64(sw_alloc_live_bytes(), live);
}

/* One light (small, run on its caller) CPU -> CPU move whose handle is kept
 * in *out, its destination dropped: the handle alone holds it. */
static void light_move_held(sw_move_handle **out)
{
    sw_error err;
    sw_carrier *src = cpu_filled(4, SW_DT_FLOAT32, 0), *dst = NULL;
    sw_tensor *t = flat_tensor(src, 4);
    CHECK(sw_cpu_new(4, SW_DT_FLOAT32, SW_CARRIER_EMPTY, &dst, &err) == SW_OK);
    CHECK(sw_move_async(t, dst, NULL, out, &err) == SW_OK);
    CHECK(sw_move_done(*out)); /* committed before it returned */
    sw_tensor_unref(t);
    sw_carrier_unref(src);
    sw_carrier_unref(dst);
}

/* Handles of light moves are recycled, and those waiting for reuse are not
 * live bytes: moves whose handles were held at once, the first time in a
 * process, leave sw_alloc_live_bytes as they found it once let go (a
 * Python leak check run alone counted them as leaked). */
static void test_recycled_handles_are_not_live(void)
{
    enum { HELD = 5 };
    sw_move_handle *m[HELD];
    light_move_held(&m[0]); /* the one handle every light move reuses */
    sw_move_unref(m[0]);
    for (int round = 0; round < 3; round++) {
        int64_t live = sw_alloc_live_bytes();
        for (int i = 0; i < HELD; i++)
            light_move_held(&m[i]);
        CHECK(sw_alloc_live_bytes() > live); /* held: live */
        for (int i = 0; i < HELD; i++)
            sw_move_unref(m[i]);
        CHECK_EQ_I64(sw_alloc_live_bytes(), live);
    }
}

/* ---- failures ----------------------------------------------------------------- */

/* A carrier class of the test's own with storage (not STATE_ONLY): eight
 * float32 slots that lose their storage (size 0) once a write reaches the
 * last one, as a device taken away while a move copies into it. */
typedef struct losing {
    float slots[8];
    int64_t size;
} losing;

static int64_t lose_size(void *impl) { return ((losing *)impl)->size; }
static sw_status lose_read(void *impl, int64_t slot, int64_t n, void *out, sw_error *err)
{
    (void)err;
    memcpy(out, ((losing *)impl)->slots + slot, (size_t)n * sizeof(float));
    return SW_OK;
}
static sw_status lose_write(void *impl, int64_t slot, int64_t n, const void *in, sw_error *err)
{
    (void)err;
    losing *l = impl;
    memcpy(l->slots + slot, in, (size_t)n * sizeof(float));
    if (slot + n == 8)
        l->size = 0;
    return SW_OK;
}
static void lose_release(void *impl) { (void)impl; }
static const sw_carrier_class losing_ops = {
    .name = "Losing", .size = lose_size, .read = lose_read, .write = lose_write,
    .release = lose_release,
};

/* The commit checks the destination again (move.h, one commit): one whose
 * storage went while the transfer ran fails the move, and the source is
 * not released (no data lost), not pending, its values and version as
 * they were; on_commit sees the failure once. */
static void test_destination_lost_during_transfer_keeps_the_source(void)
{
    sw_error err;
    losing impl = {{0}, 8};
    sw_carrier *src = cpu_filled(8, SW_DT_FLOAT32, 0), *d = NULL;
    CHECK(sw_carrier_new(&losing_ops, &impl, SW_DT_FLOAT32, 0, &d, &err) == SW_OK);
    sw_tensor *t = flat_tensor(src, 8), *r = NULL;
    uint64_t v_src = sw_carrier_version(src);
    reset_hooks();
    sw_move_options opts = {.on_commit = on_commit};
    sw_move_handle *m = NULL;
    CHECK(sw_move_async(t, d, &opts, &m, &err) == SW_OK);
    CHECK(sw_move_wait(m, &r, &err) == SW_ESTATE && r == NULL);
    CHECK_MSG(err, "move: the Losing destination lost its storage before commit");
    CHECK(commits == 1 && commit_failures == 1 && committed_result == NULL);
    sw_move_unref(m);
    CHECK(!sw_carrier_is_released(src) && !sw_carrier_is_pending(src));
    CHECK(!sw_carrier_is_pending(d));
    CHECK_EQ_I64(sw_carrier_version(src), v_src);
    float v = 0;
    CHECK(sw_carrier_read(src, 7, 1, &v, &err) == SW_OK && v == 7.25f);
    sw_tensor_unref(t);
    sw_carrier_unref(src);
    sw_carrier_unref(d);
}

static void test_fault_mid_transfer(void)
{
    sw_error err;
    /* 20 MiB: three chunks of at most 8 MiB each; the second pwrite fails. */
    const int64_t n = 5 << 20;
    sw_carrier *src = cpu_filled(n, SW_DT_FLOAT32, 0), *fb, *fb2;
    sw_tensor *t = flat_tensor(src, n), *r = NULL;
    uint64_t v_src = sw_carrier_version(src);
    CHECK(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &fb, &err) == SW_OK);
    reset_hooks();
    sw_move_options opts = {.on_commit = on_commit};
    sw_move_handle *m;
    CHECK(sw_fault_arm("pwrite", 1, 1) == SW_OK);
    CHECK(sw_move_async(t, fb, &opts, &m, &err) == SW_OK);
    CHECK(sw_move_wait(m, &r, &err) == SW_EIO);
    CHECK(sw_move_wait(m, &r, &err) == SW_EIO); /* the same terminal outcome */
    sw_fault_clear();
    CHECK(r == NULL);
    CHECK(commits == 1 && commit_failures == 1 && committed_result == NULL);
    sw_move_unref(m);
    /* source live and unchanged; destination live, not pending, unpublished */
    CHECK(!sw_carrier_is_released(src) && !sw_carrier_is_pending(src));
    CHECK(sw_carrier_is_mutable(src));
    CHECK_EQ_I64(sw_carrier_version(src), v_src);
    float v;
    CHECK(sw_carrier_read(src, n - 1, 1, &v, &err) == SW_OK && v == (float)(n - 1) + 0.25f);
    CHECK(!sw_carrier_is_released(fb) && !sw_carrier_is_pending(fb));
    CHECK(sw_carrier_is_mutable(fb));
    /* the same source moves fine afterwards */
    CHECK(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &fb2, &err) == SW_OK);
    CHECK(sw_move(t, fb2, &r, &err) == SW_OK);
    CHECK(sw_tensor_get_f32(r, n - 1, &v, &err) == SW_OK && v == (float)(n - 1) + 0.25f);

    /* and a failing read on the way back */
    sw_carrier *back, *back2;
    sw_tensor *r2;
    CHECK(sw_cpu_new(n, SW_DT_FLOAT32, SW_CARRIER_EMPTY, &back, &err) == SW_OK);
    CHECK(sw_fault_arm("pread", 1, 1) == SW_OK);
    CHECK(sw_move(r, back, &r2, &err) == SW_EIO);
    sw_fault_clear();
    CHECK(!sw_carrier_is_released(fb2) && !sw_carrier_is_pending(back));
    CHECK(sw_tensor_get_f32(r, 7, &v, &err) == SW_OK && v == 7.25f);
    CHECK(sw_cpu_new(n, SW_DT_FLOAT32, SW_CARRIER_EMPTY, &back2, &err) == SW_OK);
    CHECK(sw_move(r, back2, &r2, &err) == SW_OK);
    CHECK(sw_tensor_get_f32(r2, n - 2, &v, &err) == SW_OK && v == (float)(n - 2) + 0.25f);

    /* an injected failure of the elementwise kernel: the same rules */
    sw_carrier *c4 = cpu_filled(4, SW_DT_FLOAT32, 0), *d4;
    sw_tensor *t4 = flat_tensor(c4, 4), *r4;
    CHECK(sw_cpu_new(4, SW_DT_FLOAT32, 0, &d4, &err) == SW_OK);
    CHECK(sw_fault_arm("move_transfer", 0, 1) == SW_OK);
    CHECK(sw_move(t4, d4, &r4, &err) == SW_EIO);
    sw_fault_clear();
    CHECK(!sw_carrier_is_released(c4) && !sw_carrier_is_pending(d4));

    sw_tensor_unref(t4);
    sw_carrier_unref(c4);
    sw_carrier_unref(d4);
    sw_tensor_unref(r2);
    sw_tensor_unref(r);
    sw_tensor_unref(t);
    sw_carrier_unref(back);
    sw_carrier_unref(back2);
    sw_carrier_unref(fb);
    sw_carrier_unref(fb2);
    sw_carrier_unref(src);
}

/* Failures after validation and before submission undo the growth and the
 * pending marks and leave no handle and no profiling record. */
static void test_failure_before_submit_undoes_growth(void)
{
    sw_error err;
    sw_carrier *src = cpu_filled(8, SW_DT_FLOAT32, 0), *fb;
    sw_tensor *t = flat_tensor(src, 8);
    CHECK(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &fb, &err) == SW_OK);
    reset_hooks();
    sw_move_set_profile_hook(on_profile, NULL);
    sw_move_handle *m = NULL;
    CHECK(sw_fault_arm("move_submit", 0, 1) == SW_OK);
    CHECK(sw_move_async(t, fb, NULL, &m, &err) == SW_EIO);
    sw_fault_clear();
    CHECK(m == NULL && submits == 0);
    CHECK_EQ_I64(sw_carrier_size(fb), 0); /* growth undone */
    CHECK(!sw_carrier_is_pending(fb) && !sw_carrier_is_pending(src));
    CHECK(!sw_carrier_is_released(src));
    CHECK(sw_fault_arm("alloc", 0, 1) == SW_OK);
    CHECK(sw_move_async(t, fb, NULL, &m, &err) == SW_ENOMEM);
    sw_fault_clear();
    CHECK(m == NULL && submits == 0);
    CHECK_EQ_I64(sw_carrier_size(fb), 0);
    CHECK(!sw_carrier_is_pending(fb) && !sw_carrier_is_released(src));
    sw_tensor *r;
    CHECK(sw_move(t, fb, &r, &err) == SW_OK);
    CHECK(submits == 1 && completes == 1);
    sw_move_set_profile_hook(NULL, NULL);
    sw_tensor_unref(r);
    sw_tensor_unref(t);
    sw_carrier_unref(fb);
    sw_carrier_unref(src);
}

/* Issue 19: a small span copied whole (one stride-1 run, a single slot, or
 * a bulk route) skips the transfer kernels' checks; spans of every shape
 * still copy exactly the values their layout addresses, from the source's
 * offset, and report every byte as progress. CPU and FileBacked sources
 * into CPU and FileBacked destinations. */
static void test_small_spans_copy_their_values(void)
{
    sw_error err;
    enum { N = 40, OFF = 3 };
    struct { int32_t ndim; int64_t ext[2], str[2]; } shapes[] = {
        {1, {5, 0}, {1, 0}},   /* one run: the whole-span path */
        {1, {1, 0}, {1, 0}},   /* a single slot */
        {2, {3, 1}, {1, 50}},  /* one run beside an extent-1 mode */
        {2, {2, 3}, {1, 2}},   /* contiguous in two modes: the checked path */
        {1, {4, 0}, {3, 0}},   /* strided */
    };
    for (int from_file = 0; from_file < 2; from_file++)
        for (int to_file = 0; to_file < 2; to_file++)
            for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
                sw_carrier *src = cpu_filled(N, SW_DT_FLOAT32, 0), *dst = NULL;
                if (from_file) {
                    sw_carrier *fb;
                    sw_tensor *all = flat_tensor(src, N), *on_file;
                    CHECK(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &fb, &err) == SW_OK);
                    CHECK(sw_move(all, fb, &on_file, &err) == SW_OK);
                    sw_tensor_unref(on_file);
                    sw_tensor_unref(all);
                    sw_carrier_unref(src);
                    src = fb;
                }
                if (to_file)
                    CHECK(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &dst, &err) == SW_OK);
                else
                    CHECK(sw_cpu_new(N, SW_DT_FLOAT32, SW_CARRIER_EMPTY, &dst, &err) == SW_OK);
                sw_tensor *t, *r;
                CHECK(sw_tensor_new_strided(src, OFF, shapes[k].ndim, shapes[k].ext,
                                            shapes[k].str, &t, &err) == SW_OK);
                sw_move_handle *m;
                CHECK(sw_move_async(t, dst, NULL, &m, &err) == SW_OK);
                CHECK(sw_move_wait(m, &r, &err) == SW_OK);
                int64_t done = -1, total = -2;
                sw_move_progress(m, &done, &total);
                CHECK_EQ_I64(done, sw_move_bytes(m));
                CHECK_EQ_I64(total, sw_move_bytes(m));
                const sw_layout *l = sw_tensor_layout(t);
                for (int64_t i = 0; i < sw_tensor_size(t); i++) {
                    int64_t idx;
                    float v = -1.0f;
                    CHECK(sw_layout_index(l, i, &idx, &err) == SW_OK);
                    CHECK(sw_tensor_get_f32(r, i, &v, &err) == SW_OK);
                    CHECK(v == (float)(OFF + idx) + 0.25f);
                }
                CHECK(sw_carrier_is_released(src));
                sw_move_unref(m);
                sw_tensor_unref(r);
                sw_tensor_unref(t);
                sw_carrier_unref(dst);
                sw_carrier_unref(src);
            }
}

int main(void)
{
    test_validation_order();
    test_move_cpu_file_cpu();
    test_move_broadcast_view_needs_cosize_only();
    test_elementwise_fallback();
    test_pending_guard_and_commit_once();
    test_dropped_handle();
    test_recycled_handles_are_not_live();
    test_fault_mid_transfer();
    test_destination_lost_during_transfer_keeps_the_source();
    test_failure_before_submit_undoes_growth();
    test_small_spans_copy_their_values();
    return check_report("move");
}
