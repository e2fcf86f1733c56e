/* The move engine's service to bindings and its fast paths: the commit
 * guard and on_commit run with no core lock held, from many threads at
 * once (a binding's own lock, like Python's GIL, held around the commit);
 * small moves run on their caller, larger ones on the pool; a held move
 * does not start until released; the byte counter reaches the move's
 * bytes; layouts with many extent-1 modes copy through storage. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include <strideweave/strideweave.h>
#include "strideweave/testing.h"

#define THREADS 8
#define ROUNDS 20

static _Atomic int failures;
static _Atomic int commits;

/* The "binding lock": taken by commit_enter, let go by commit_leave, and
 * held by a reader thread while it reads source storage directly. */
static pthread_mutex_t binding_lock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local int holds_binding_lock;

typedef struct ctx {
    sw_carrier *src, *dst;
    pthread_t committer;
    int enters, leaves;
} ctx;

static void enter(void *user)
{
    ctx *c = user;
    pthread_mutex_lock(&binding_lock);
    holds_binding_lock = 1;
    c->enters++;
}

static void leave(void *user)
{
    ctx *c = user;
    c->leaves++;
    holds_binding_lock = 0;
    pthread_mutex_unlock(&binding_lock);
}

static void on_commit(sw_move_handle *m, sw_status st, sw_tensor *result, void *user)
{
    (void)m;
    ctx *c = user;
    c->committer = pthread_self();
    /* The guard is held; no core lock is: these take the carriers' locks
     * (a lock held here would deadlock the test). The carriers changed. */
    if (!holds_binding_lock || c->enters != 1 || c->leaves != 0)
        failures++;
    if (st == SW_OK && (!sw_carrier_is_released(c->src) || sw_carrier_is_pending(c->src) ||
                        sw_carrier_is_pending(c->dst) || !result))
        failures++;
    commits++;
}

static sw_tensor *filled(int64_t n, int32_t base, sw_carrier **cpu)
{
    sw_error err;
    sw_tensor *t = NULL;
    int64_t ext[1] = {n};
    if (sw_cpu_new(n, SW_DT_INT32, SW_CARRIER_EMPTY, cpu, &err) != SW_OK ||
        sw_tensor_new_strided(*cpu, 0, 1, ext, NULL, &t, &err) != SW_OK)
        return NULL;
    int32_t *p = sw_cpu_pointer(*cpu);
    for (int64_t i = 0; i < n; i++)
        p[i] = base + (int32_t)i;
    return t;
}

static int holds(sw_tensor *r, int64_t n, int32_t base)
{
    sw_error err;
    for (int64_t i = 0; i < n; i += 1 + n / 64) {
        int32_t v;
        if (sw_tensor_get_i32(r, i, &v, &err) != SW_OK || v != base + (int32_t)i)
            return 0;
    }
    return 1;
}

/* Moves between CPU and FileBacked from many threads, sizes on both sides
 * of the caller-side bound, each with the guard and on_commit. */
static void *guarded_round_trips(void *arg)
{
    int id = (int)(intptr_t)arg;
    sw_error err;
    for (int r = 0; r < ROUNDS; r++) {
        int64_t n = (r % 3 == 0) ? (int64_t)(1 << 16) + id : 100 + 37 * id + r;
        int32_t base = id * 1000000 + r * 1000;
        sw_carrier *cpu, *fb;
        sw_tensor *t = filled(n, base, &cpu), *on_file = NULL;
        ctx c = {0};
        int ok = t && sw_file_backed_new(NULL, SW_DT_INT32, 0, &fb, &err) == SW_OK;
        c.src = cpu;
        c.dst = fb;
        sw_move_options o = {.on_commit = on_commit, .user = &c, .commit_enter = enter,
                             .commit_leave = leave, .caller_waits = r % 2};
        sw_move_handle *m = NULL;
        ok = ok && sw_move_async(t, fb, &o, &m, &err) == SW_OK;
        ok = ok && sw_move_wait(m, &on_file, &err) == SW_OK;
        ok = ok && c.enters == 1 && c.leaves == 1 && holds(on_file, n, base);
        if (!ok) {
            fprintf(stderr, "thread %d round %d: %s\n", id, r, err.msg);
            failures++;
        }
        sw_move_unref(m);
        sw_tensor_unref(on_file);
        sw_tensor_unref(t);
        sw_carrier_unref(fb);
        sw_carrier_unref(cpu);
        if (!ok)
            return NULL;
    }
    return NULL;
}

static void test_commit_guard_from_many_threads(void)
{
    pthread_t th[THREADS];
    commits = 0;
    for (int i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, guarded_round_trips, (void *)(intptr_t)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    CHECK_EQ_I64(failures, 0);
    CHECK_EQ_I64(commits, THREADS * ROUNDS);
}

/* Where a move runs: a small one commits on its caller before
 * sw_move_async returns (up to 64 KiB between host memories, 32 KiB into a
 * FileBacked), a waited one up to 16 MiB too, a larger unwaited one on the
 * completion thread. */
static void test_where_moves_run(void)
{
    sw_error err;
    struct {
        int64_t n;
        int waits, here, to_file;
    } cases[] = {
        {1000, 0, 1, 1},        /* 4 KB */
        {8 << 10, 0, 1, 1},     /* 32 KiB: the bound into a file */
        {(8 << 10) + 1, 0, 0, 1},
        {16 << 10, 0, 1, 0},    /* 64 KiB: the bound between host memories */
        {(16 << 10) + 1, 0, 0, 0},
        {16 << 10, 1, 1, 1},    /* 64 KiB into a file, waited */
        {1 << 20, 1, 1, 1},     /* 4 MiB, waited */
        {1 << 20, 0, 0, 1},
        {(4 << 20) + 1, 1, 0, 1}, /* past 16 MiB, waited */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        sw_carrier *cpu, *fb;
        sw_tensor *t = filled(cases[k].n, 7, &cpu), *r = NULL;
        CHECK(t && (cases[k].to_file
                        ? sw_file_backed_new(NULL, SW_DT_INT32, 0, &fb, &err)
                        : sw_cpu_new(cases[k].n, SW_DT_INT32, SW_CARRIER_EMPTY, &fb, &err)) ==
                       SW_OK);
        ctx c = {.src = cpu, .dst = fb};
        sw_move_options o = {.on_commit = on_commit, .user = &c, .commit_enter = enter,
                             .commit_leave = leave, .caller_waits = cases[k].waits};
        sw_move_handle *m = NULL;
        CHECK(sw_move_async(t, fb, &o, &m, &err) == SW_OK);
        if (cases[k].here)
            CHECK(sw_move_done(m)); /* committed before it returned */
        CHECK(sw_move_wait(m, &r, &err) == SW_OK && holds(r, cases[k].n, 7));
        int on_caller = pthread_equal(c.committer, pthread_self());
        if (on_caller != cases[k].here)
            fprintf(stderr, "case %zu: committed on the caller: %d\n", k, on_caller);
        CHECK(on_caller == cases[k].here);
        CHECK(c.enters == 1 && c.leaves == 1);
        sw_move_unref(m);
        sw_tensor_unref(r);
        sw_tensor_unref(t);
        sw_carrier_unref(fb);
        sw_carrier_unref(cpu);
    }
    /* sw_move waits: a 4 MiB move commits on the caller. */
    sw_carrier *cpu, *back;
    sw_tensor *t = filled(1 << 20, 3, &cpu), *r = NULL;
    CHECK(sw_cpu_new(1 << 20, SW_DT_INT32, SW_CARRIER_EMPTY, &back, &err) == SW_OK);
    CHECK(sw_move(t, back, &r, &err) == SW_OK && holds(r, 1 << 20, 3));
    sw_tensor_unref(r);
    sw_tensor_unref(t);
    sw_carrier_unref(back);
    sw_carrier_unref(cpu);
}

/* A held move is pending and unfinished, even a small one, until holding
 * stops; then it commits as usual. */
static void test_hold(void)
{
    sw_error err;
    sw_carrier *cpu, *fb;
    sw_tensor *t = filled(10, 5, &cpu), *r = NULL;
    CHECK(sw_file_backed_new(NULL, SW_DT_INT32, 0, &fb, &err) == SW_OK);
    sw_move_hold(1);
    sw_move_handle *m = NULL;
    CHECK(sw_move_async(t, fb, NULL, &m, &err) == SW_OK);
    CHECK(!sw_move_done(m));
    CHECK(sw_carrier_is_pending(cpu) && sw_carrier_is_pending(fb));
    CHECK(!sw_carrier_is_released(cpu));
    sw_move_hold(0);
    CHECK(sw_move_wait(m, &r, &err) == SW_OK && holds(r, 10, 5));
    CHECK(sw_carrier_is_released(cpu) && !sw_carrier_is_pending(fb));
    sw_move_unref(m);
    sw_tensor_unref(r);
    sw_tensor_unref(t);
    sw_carrier_unref(fb);
    sw_carrier_unref(cpu);
}

/* The byte counter ends at the move's bytes (a 20 MiB span copied in
 * parallel parts), and the pair's route is what sw_move_route_for says. */
static void test_progress_and_route(void)
{
    sw_error err;
    const int64_t n = 5 << 20;
    sw_carrier *cpu, *back, *gen;
    sw_tensor *t = filled(n, 1, &cpu), *r = NULL;
    CHECK(sw_cpu_new(n, SW_DT_INT32, SW_CARRIER_EMPTY, &back, &err) == SW_OK);
    int32_t one = 1;
    CHECK(sw_generic_new(&one, 1, SW_DT_INT32, 0, &gen, &err) == SW_OK);
    CHECK(sw_move_route_for(cpu, back) == SW_ROUTE_ELEMENTWISE);
    CHECK(sw_move_route_for(cpu, gen) == SW_ROUTE_ELEMENTWISE);
    int64_t progress = 0;
    sw_move_options o = {.progress = &progress};
    sw_move_handle *m = NULL;
    CHECK(sw_move_async(t, back, &o, &m, &err) == SW_OK);
    CHECK(sw_move_wait(m, &r, &err) == SW_OK && holds(r, n, 1));
    CHECK_EQ_I64(progress, sw_move_bytes(m));
    CHECK_EQ_I64(progress, n * 4);
    sw_move_unref(m);
    sw_carrier *fb;
    CHECK(sw_file_backed_new(NULL, SW_DT_INT32, 0, &fb, &err) == SW_OK);
    CHECK(sw_move_route_for(back, fb) == SW_ROUTE_BULK);
    CHECK(sw_move_route_for(fb, back) == SW_ROUTE_BULK);
    sw_tensor_unref(r);
    sw_tensor_unref(t);
    sw_carrier_unref(fb);
    sw_carrier_unref(gen);
    sw_carrier_unref(back);
    sw_carrier_unref(cpu);
}

/* More leaf modes than the copy kernel takes, all but two of extent 1:
 * still a storage copy with the right values. */
static void test_many_unit_modes(void)
{
    sw_error err;
    enum { N = SW_COPY_MAX_DIMS + 4 };
    int64_t ext[N], str[N];
    for (int i = 0; i < N; i++) {
        ext[i] = 1;
        str[i] = 0;
    }
    ext[0] = 6;
    str[0] = 2;
    ext[N - 1] = 3;
    str[N - 1] = 12;
    uint8_t profile[N];
    for (int i = 0; i < N; i++)
        profile[i] = SW_NODE_LEAF;
    sw_layout *l = sw_layout_new(N, profile, ext, str, &err);
    CHECK(l != NULL);
    sw_carrier *cpu, *fb;
    sw_tensor *t = filled(36, 0, &cpu), *src = NULL, *r = NULL;
    CHECK(l && sw_tensor_new(cpu, 0, l, &src, &err) == SW_OK);
    CHECK(sw_file_backed_new(NULL, SW_DT_INT32, 0, &fb, &err) == SW_OK);
    CHECK(sw_move(src, fb, &r, &err) == SW_OK);
    int32_t v = -1;
    CHECK(sw_tensor_get_i32(r, 0, &v, &err) == SW_OK && v == 0);
    CHECK(sw_tensor_get_i32(r, 7, &v, &err) == SW_OK && v == 2 + 12); /* (1, ..., 1) */
    sw_layout_free(l);
    sw_tensor_unref(r);
    sw_tensor_unref(src);
    sw_tensor_unref(t);
    sw_carrier_unref(fb);
    sw_carrier_unref(cpu);
}

/* ---- the light path: a small move run on its caller ------------------------ */

static _Atomic int events[8];
static _Atomic int nevents;
static sw_move_handle *_Atomic event_move;

static void record_event(const sw_move_event *ev, void *user)
{
    (void)user;
    int k = atomic_fetch_add(&nevents, 1);
    if (k < 8)
        events[k] = ev->kind;
    event_move = ev->move;
}

/* A span moved without a tensor and without a result (what a binding that
 * publishes its own result asks for): committed before it returns, the
 * source released, the values there, SUBMIT then COMPLETE reported for
 * that handle, and the span's own checks before anything changes. */
static void test_light_span_without_result(void)
{
    sw_error err;
    sw_carrier *cpu, *back;
    sw_tensor *t = filled(1000, 11, &cpu), *r = NULL;
    CHECK(t && sw_cpu_new(1000, SW_DT_INT32, SW_CARRIER_EMPTY, &back, &err) == SW_OK);
    sw_move_options o = {.no_result = 1};
    sw_move_handle *m = NULL;
    /* Refused with nothing changed: a negative offset, a span past the
     * carrier's end. */
    CHECK(sw_move_span_async(cpu, -1, sw_tensor_layout(t), back, &o, &m, &err) == SW_EINVAL);
    CHECK(sw_move_span_async(cpu, 1, sw_tensor_layout(t), back, &o, &m, &err) == SW_ERANGE);
    CHECK(m == NULL && !sw_carrier_is_pending(cpu) && !sw_carrier_is_pending(back));
    atomic_store(&nevents, 0);
    sw_move_set_profile_hook(record_event, NULL);
    CHECK(sw_move_span_async(cpu, 0, sw_tensor_layout(t), back, &o, &m, &err) == SW_OK);
    sw_move_set_profile_hook(NULL, NULL);
    CHECK(m && sw_move_done(m));
    CHECK_EQ_I64(atomic_load(&nevents), 2);
    CHECK(events[0] == SW_MOVE_EVENT_SUBMIT && events[1] == SW_MOVE_EVENT_COMPLETE);
    CHECK(event_move == m);
    CHECK_EQ_I64(sw_move_bytes(m), 4000);
    CHECK(sw_move_wait(m, &r, &err) == SW_OK && r == NULL);
    CHECK(sw_carrier_is_released(cpu) && !sw_carrier_is_pending(back));
    CHECK(((int32_t *)sw_cpu_pointer(back))[999] == 11 + 999);
    /* A released source: refused with the tensor's words. */
    CHECK(sw_move_span_async(cpu, 0, sw_tensor_layout(t), back, &o, &m, &err) == SW_ESTATE);
    sw_move_unref(m);
    sw_tensor_unref(t);
    sw_carrier_unref(back);
    sw_carrier_unref(cpu);
}

static int reuse_commits;

static void count_commit(sw_move_handle *m, sw_status st, sw_tensor *result, void *user)
{
    (void)m;
    (void)st;
    (void)result;
    (void)user;
    reuse_commits++;
}

/* A light move's handle is recycled with only part of it cleared: the
 * next move to take it sees nothing of a failed one before it (status,
 * message, byte counter, commit callback, profiling hook and tag), and a
 * failure after it reads its own message whole. */
static void test_light_handle_reuse_after_failure(void)
{
    sw_error err;
    sw_carrier *a, *b, *c, *d;
    sw_tensor *ta = filled(1000, 1, &a), *tc = filled(10, 5, &c), *r = NULL;
    CHECK(ta && tc && sw_cpu_new(1000, SW_DT_INT32, SW_CARRIER_EMPTY, &b, &err) == SW_OK &&
          sw_cpu_new(10, SW_DT_INT32, SW_CARRIER_EMPTY, &d, &err) == SW_OK);
    int64_t counter = 0;
    int tag;
    sw_move_options failing = {.no_result = 1, .on_commit = count_commit,
                               .progress = &counter, .profile_tag = &tag};
    sw_move_handle *m1 = NULL, *m2 = NULL;
    atomic_store(&nevents, 0);
    sw_move_set_profile_hook(record_event, NULL);
    CHECK(sw_fault_arm("move_transfer", 0, 1) == SW_OK);
    CHECK(sw_move_span_async(a, 0, sw_tensor_layout(ta), b, &failing, &m1, &err) == SW_OK);
    sw_fault_clear();
    sw_move_set_profile_hook(NULL, NULL);
    CHECK(m1 && sw_move_error(m1) && sw_move_error(m1)->code == SW_EIO);
    CHECK(reuse_commits == 1 && atomic_load(&nevents) == 2);
    sw_move_unref(m1);
    /* The same handle again, for a move that asks for none of that. */
    sw_move_options plain = {.no_result = 1};
    CHECK(sw_move_span_async(c, 0, sw_tensor_layout(tc), d, &plain, &m2, &err) == SW_OK);
    CHECK(m2 == m1); /* recycled, not allocated */
    CHECK(sw_move_done(m2) && sw_move_error(m2) == NULL);
    CHECK(sw_move_wait(m2, &r, &err) == SW_OK && r == NULL);
    int64_t done = -1, total = -1;
    sw_move_progress(m2, &done, &total);
    CHECK_EQ_I64(done, 40);
    CHECK_EQ_I64(total, 40);
    CHECK_EQ_I64(counter, 0); /* the failed move's counter is not this one's */
    CHECK(reuse_commits == 1 && atomic_load(&nevents) == 2);
    CHECK(sw_carrier_is_released(c) && ((int32_t *)sw_cpu_pointer(d))[9] == 5 + 9);
    sw_move_unref(m2);
    /* A later failure's message is its own, whole. */
    sw_move_options fail_plain = {.no_result = 1};
    CHECK(sw_fault_arm("move_transfer", 0, 1) == SW_OK);
    CHECK(sw_move_span_async(a, 0, sw_tensor_layout(ta), b, &fail_plain, &m1, &err) == SW_OK);
    sw_fault_clear();
    CHECK(m1 && sw_move_error(m1) &&
          strcmp(sw_move_error(m1)->msg, "move: injected transfer failure") == 0);
    sw_move_unref(m1);
    sw_tensor_unref(ta);
    sw_tensor_unref(tc);
    sw_carrier_unref(a);
    sw_carrier_unref(b);
    sw_carrier_unref(c);
    sw_carrier_unref(d);
}

static _Atomic int drained_during;

static void *drain_briefly(void *arg)
{
    (void)arg;
    drained_during = sw_move_drain_for(20 * 1000 * 1000);
    return NULL;
}

/* From inside the commit guard another thread's drain sees it in flight. */
static void drain_from_guard(void *user)
{
    (void)user;
    pthread_t th;
    pthread_create(&th, NULL, drain_briefly, NULL);
    pthread_join(th, NULL);
}

/* A move run on its caller counts in flight until its commit ends: a drain
 * on another thread meanwhile waits for it (and runs out of time here),
 * one after it returns finds nothing left. */
static void test_light_move_counts_in_flight(void)
{
    sw_error err;
    sw_carrier *cpu, *back;
    sw_tensor *t = filled(64, 2, &cpu), *r = NULL;
    CHECK(t && sw_cpu_new(64, SW_DT_INT32, SW_CARRIER_EMPTY, &back, &err) == SW_OK);
    sw_move_options o = {.commit_enter = drain_from_guard};
    drained_during = -1;
    sw_move_handle *m = NULL;
    CHECK(sw_move_async(t, back, &o, &m, &err) == SW_OK && sw_move_done(m));
    CHECK_EQ_I64(drained_during, 0);
    CHECK(sw_move_drain_for(0) == 1);
    CHECK(sw_move_wait(m, &r, &err) == SW_OK && holds(r, 64, 2));
    sw_move_unref(m);
    sw_tensor_unref(r);
    sw_tensor_unref(t);
    sw_carrier_unref(back);
    sw_carrier_unref(cpu);
}

/* The profiling tag: each move's events carry the profile_tag its options
 * gave, on the light path and the pool alike, and COMPLETE reaches the hook
 * on the committing thread before on_commit runs there (so a binding's
 * commit finds what its hook recorded). Without a hook, no event. */
typedef struct tag_seen {
    _Atomic int submits, completes;
    _Atomic int completes_at_commit; /* COMPLETE events seen when on_commit ran */
    pthread_t committer, completer;
} tag_seen;

static void tag_event(const sw_move_event *ev, void *user)
{
    (void)user;
    tag_seen *seen = ev->tag;
    if (!seen)
        return; /* another test's move, or one without a tag */
    if (ev->kind == SW_MOVE_EVENT_SUBMIT) {
        atomic_fetch_add(&seen->submits, 1);
    } else {
        seen->completer = pthread_self();
        atomic_fetch_add(&seen->completes, 1);
    }
}

static void tag_commit(sw_move_handle *m, sw_status status, sw_tensor *result, void *user)
{
    (void)m;
    (void)status;
    (void)result;
    tag_seen *seen = user;
    seen->committer = pthread_self();
    atomic_store(&seen->completes_at_commit, atomic_load(&seen->completes));
}

static void test_profile_tag(void)
{
    sw_error err;
    int64_t sizes[] = {1000, 1 << 20}; /* the light path; the pool */
    for (int hooked = 0; hooked < 2; hooked++) {
        for (size_t k = 0; k < 2; k++) {
            sw_carrier *cpu, *back;
            sw_tensor *t = filled(sizes[k], 5, &cpu), *r = NULL;
            CHECK(t && sw_cpu_new(sizes[k], SW_DT_INT32, SW_CARRIER_EMPTY, &back, &err) == SW_OK);
            tag_seen seen = {0};
            sw_move_options o = {.on_commit = tag_commit, .user = &seen,
                                 .profile_tag = &seen};
            if (hooked)
                sw_move_set_profile_hook(tag_event, NULL);
            sw_move_handle *m = NULL;
            CHECK(sw_move_async(t, back, &o, &m, &err) == SW_OK);
            sw_move_set_profile_hook(NULL, NULL);
            CHECK(sw_move_wait(m, &r, &err) == SW_OK && holds(r, sizes[k], 5));
            CHECK_EQ_I64(atomic_load(&seen.submits), hooked);
            CHECK_EQ_I64(atomic_load(&seen.completes), hooked);
            CHECK_EQ_I64(atomic_load(&seen.completes_at_commit), hooked);
            if (hooked)
                CHECK(pthread_equal(seen.completer, seen.committer));
            sw_move_unref(m);
            sw_tensor_unref(r);
            sw_tensor_unref(t);
            sw_carrier_unref(back);
            sw_carrier_unref(cpu);
        }
    }
}

int main(void)
{
    test_commit_guard_from_many_threads();
    test_where_moves_run();
    test_hold();
    test_progress_and_route();
    test_many_unit_modes();
    test_light_span_without_result();
    test_light_handle_reuse_after_failure();
    test_light_move_counts_in_flight();
    test_profile_tag();
    return check_report("move_engine");
}
