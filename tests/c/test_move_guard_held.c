/* A move started by a caller that holds its commit guard already
 * (sw_move_options.guard_held, move.h): a commit on that caller during
 * the call runs neither commit_enter nor commit_leave, a commit on another
 * thread runs both; a small move between host carriers checks, copies and
 * commits in one lock round, so no other thread ever sees its carriers
 * pending; it still commits exactly once against other threads' moves and
 * releases, refuses as a move without the option does with nothing
 * changed, undoes its growth on a failed copy, reports to profiling
 * subscribers, and a child forked by a thread that takes the guard first
 * finds every carrier usable. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "fork_child.h"
#include <strideweave/strideweave.h>
#include <strideweave/binding.h>
#include "strideweave/testing.h"

#define SMALL 1024              /* int32 slots: 4 KiB, one lock round */
#define WAITED ((1 << 20) / 4)  /* 1 MiB: on the caller only when waited */

/* ---- a guard: a lock of the "binding", counted ----------------------------- */

typedef struct guard {
    pthread_mutex_t mu;
    _Atomic int enters, leaves, commits, commits_ok;
    pthread_t committer;
    _Atomic int bad; /* on_commit found a core lock held or the guard not held,
                        or the guard was taken by a thread holding it */
    int again;       /* enter found the lock held by its own thread */
    sw_carrier *src, *dst;
} guard;

static _Thread_local guard *holding; /* the guard this thread holds */

/* A core that ran the guard on a caller holding it would take the lock
 * twice: an error-checking mutex says so (counted as bad) instead of
 * hanging the test. */
static void enter(void *user)
{
    guard *g = user;
    atomic_fetch_add(&g->enters, 1);
    if (pthread_mutex_lock(&g->mu) == EDEADLK) {
        atomic_fetch_add(&g->bad, 1);
        g->again = 1;
        return;
    }
    holding = g;
}

static void leave(void *user)
{
    guard *g = user;
    atomic_fetch_add(&g->leaves, 1);
    if (g->again) {
        g->again = 0;
        return;
    }
    holding = NULL;
    pthread_mutex_unlock(&g->mu);
}

static void on_commit(sw_move_handle *m, sw_status st, sw_tensor *result, void *user)
{
    (void)m, (void)result;
    guard *g = user;
    g->committer = pthread_self();
    if (holding != g)
        atomic_fetch_add(&g->bad, 1);
    /* No core lock is held: these take both carriers' locks (a lock still
     * held would hang the test). */
    if (g->src && g->dst && (sw_carrier_is_pending(g->src) || sw_carrier_is_pending(g->dst)))
        atomic_fetch_add(&g->bad, 1);
    atomic_fetch_add(&g->commits, 1);
    if (st == SW_OK)
        atomic_fetch_add(&g->commits_ok, 1);
}

static void guard_init(guard *g, sw_carrier *src, sw_carrier *dst)
{
    memset(g, 0, sizeof *g);
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
    pthread_mutex_init(&g->mu, &a);
    pthread_mutexattr_destroy(&a);
    g->src = src;
    g->dst = dst;
}

/* The caller takes the guard around the call, as a Python thread holds
 * the GIL around sw_move_async. */
static sw_status guarded_move(guard *g, sw_tensor *t, sw_carrier *dst, int guard_held,
                              int caller_waits, sw_move_handle **m, sw_error *err)
{
    sw_move_options o = {.on_commit = on_commit, .user = g, .commit_enter = enter,
                         .commit_leave = leave, .caller_waits = caller_waits,
                         .guard_held = guard_held};
    if (guard_held) {
        pthread_mutex_lock(&g->mu);
        holding = g;
    }
    sw_status st = sw_move_async(t, dst, &o, m, err);
    if (guard_held) {
        holding = NULL;
        pthread_mutex_unlock(&g->mu);
    }
    return st;
}

/* ---- carriers --------------------------------------------------------------- */

static sw_tensor *on_carrier(sw_carrier *c, int64_t n)
{
    sw_error err;
    sw_tensor *t = NULL;
    int64_t ext[1] = {n};
    if (sw_tensor_new_strided(c, 0, 1, ext, NULL, &t, &err) != SW_OK)
        return NULL;
    return t;
}

static void fill(sw_tensor *t, int64_t n, int32_t base)
{
    sw_error err;
    for (int64_t i = 0; i < n; i++)
        sw_tensor_set_i32(t, i, base + (int32_t)i, &err);
}

static sw_tensor *filled_cpu(int64_t n, int32_t base)
{
    sw_error err;
    sw_carrier *c;
    if (sw_cpu_new(n, SW_DT_INT32, SW_CARRIER_EMPTY, &c, &err) != SW_OK)
        return NULL;
    sw_tensor *t = on_carrier(c, n);
    sw_carrier_unref(c); /* the tensor holds it */
    if (t)
        fill(t, n, base);
    return t;
}

static sw_tensor *filled_file(int64_t n, int32_t base)
{
    sw_error err;
    sw_carrier *c;
    if (sw_file_backed_new(NULL, SW_DT_INT32, 0, &c, &err) != SW_OK ||
        sw_carrier_allocate(c, n, &err) != SW_OK)
        return NULL;
    sw_tensor *t = on_carrier(c, n);
    sw_carrier_unref(c);
    if (t)
        fill(t, n, base);
    return t;
}

static sw_carrier *empty_file(void)
{
    sw_error err;
    sw_carrier *c = NULL;
    sw_file_backed_new(NULL, SW_DT_INT32, 0, &c, &err);
    return c;
}

static sw_carrier *empty_cpu(int64_t n)
{
    sw_error err;
    sw_carrier *c = NULL;
    sw_cpu_new(n, SW_DT_INT32, 0, &c, &err);
    return c;
}

static int holds(sw_carrier *c, int64_t n, int32_t base)
{
    sw_tensor *t = on_carrier(c, n);
    int ok = t != NULL;
    sw_error err;
    for (int64_t i = 0; ok && i < n; i += 1 + n / 64) {
        int32_t v;
        ok = sw_tensor_get_i32(t, i, &v, &err) == SW_OK && v == base + (int32_t)i;
    }
    sw_tensor_unref(t);
    return ok;
}

/* The end of one case: its handle, source tensor, destination and guard. */
static void let_go(sw_move_handle *m, sw_tensor *t, sw_carrier *d, guard *g)
{
    sw_move_unref(m);
    sw_tensor_unref(t);
    sw_carrier_unref(d);
    pthread_mutex_destroy(&g->mu);
}

/* ---- the guard on the caller and elsewhere --------------------------------- */

/* A small move of each host pair with guard_held commits on its caller
 * before sw_move_async returns, without enter or leave; the same move
 * without the option runs both (the option is what changes it). */
static void test_commit_on_caller_skips_the_guard(void)
{
    for (int pairing = 0; pairing < 3; pairing++) { /* cpu->cpu, cpu->file, file->cpu */
        for (int held = 0; held < 2; held++) {
            sw_tensor *t = pairing == 2 ? filled_file(SMALL, 7) : filled_cpu(SMALL, 7);
            sw_carrier *s = sw_tensor_carrier(t);
            sw_carrier *d = pairing == 1 ? empty_file() : empty_cpu(SMALL);
            guard g;
            guard_init(&g, s, d);
            sw_move_handle *m = NULL;
            sw_error err;
            sw_tensor *r = NULL;
            CHECK(guarded_move(&g, t, d, held, 0, &m, &err) == SW_OK);
            CHECK(m && sw_move_done(m));
            CHECK_EQ_I64(g.commits, 1);
            CHECK(pthread_equal(g.committer, pthread_self()));
            CHECK_EQ_I64(g.enters, held ? 0 : 1);
            CHECK_EQ_I64(g.leaves, held ? 0 : 1);
            CHECK_EQ_I64(g.bad, 0);
            CHECK(sw_move_wait(m, &r, &err) == SW_OK && r);
            CHECK(sw_carrier_is_released(s) && !sw_carrier_is_pending(s));
            CHECK(!sw_carrier_is_pending(d) && sw_carrier_size(d) == SMALL);
            CHECK(holds(d, SMALL, 7));
            sw_tensor_unref(r);
            let_go(m, t, d, &g);
        }
    }
}

/* A waited move past the one-round bound still runs on its caller (two
 * lock rounds) without the guard; a move_async that big commits on the
 * completion thread, which runs the guard. */
static void test_guard_runs_where_the_caller_is_not(void)
{
    for (int waits = 0; waits < 2; waits++) {
        sw_tensor *t = filled_cpu(WAITED, 3);
        sw_carrier *s = sw_tensor_carrier(t), *d = empty_file();
        guard g;
        guard_init(&g, s, d);
        sw_move_handle *m = NULL;
        sw_error err;
        CHECK(guarded_move(&g, t, d, 1, waits, &m, &err) == SW_OK);
        CHECK(sw_move_wait(m, NULL, &err) == SW_OK);
        CHECK_EQ_I64(g.commits_ok, 1);
        CHECK_EQ_I64(g.enters, waits ? 0 : 1);
        CHECK_EQ_I64(g.leaves, waits ? 0 : 1);
        CHECK(pthread_equal(g.committer, pthread_self()) == waits);
        CHECK_EQ_I64(g.bad, 0);
        CHECK(sw_carrier_is_released(s) && holds(d, WAITED, 3));
        let_go(m, t, d, &g);
    }
}

/* ---- one lock round: nobody sees the carriers pending ------------------------ */

#define PROBED 400

static sw_carrier *probe_src[PROBED], *probe_dst[PROBED];
static _Atomic int probe_at, probe_stop, probe_seen_pending;
static _Atomic long probe_looks;

static void *prober(void *arg)
{
    (void)arg;
    while (!atomic_load(&probe_stop)) {
        int i = atomic_load(&probe_at);
        if (sw_carrier_is_pending(probe_src[i]) || sw_carrier_is_pending(probe_dst[i]))
            atomic_fetch_add(&probe_seen_pending, 1);
        atomic_fetch_add(&probe_looks, 1);
    }
    return NULL;
}

static void test_one_round_never_shows_marks(void)
{
    sw_tensor *t[PROBED];
    for (int i = 0; i < PROBED; i++) {
        t[i] = filled_cpu(SMALL, i);
        probe_src[i] = sw_tensor_carrier(t[i]);
        probe_dst[i] = i % 2 ? empty_file() : empty_cpu(SMALL);
    }
    pthread_t th;
    CHECK(pthread_create(&th, NULL, prober, NULL) == 0);
    int ok = 0;
    for (int i = 0; i < PROBED; i++) {
        atomic_store(&probe_at, i);
        /* Let the prober look at this pair before and while it moves. */
        long seen = atomic_load(&probe_looks);
        while (atomic_load(&probe_looks) < seen + 2)
            sched_yield();
        guard g;
        guard_init(&g, NULL, NULL);
        sw_move_handle *m = NULL;
        sw_error err;
        ok += guarded_move(&g, t[i], probe_dst[i], 1, 0, &m, &err) == SW_OK &&
              g.commits_ok == 1 && g.enters == 0;
        sw_move_unref(m);
        pthread_mutex_destroy(&g.mu);
    }
    atomic_store(&probe_stop, 1);
    CHECK(pthread_join(th, NULL) == 0);
    CHECK_EQ_I64(ok, PROBED);
    CHECK_EQ_I64(probe_seen_pending, 0);
    for (int i = 0; i < PROBED; i++) {
        CHECK(sw_carrier_is_released(probe_src[i]) && holds(probe_dst[i], SMALL, i));
        sw_tensor_unref(t[i]);
        sw_carrier_unref(probe_dst[i]);
    }
}

/* ---- exactly once against other threads' moves and a release ----------------- */

#define RACERS 4
#define RACE_ROUNDS 150

static pthread_barrier_t race_start, race_end;
static sw_tensor *race_t;
static sw_carrier *race_dst[RACERS];
static sw_status race_st[RACERS + 1];
static guard race_guard[RACERS];
static int race_detail_ok[RACERS + 1];

/* Racer i < RACERS moves the shared source into its own empty FileBacked
 * (even ones with guard_held: one round; odd ones without: two rounds,
 * pending marks); racer RACERS releases the source. */
static void *racer(void *arg)
{
    int i = (int)(intptr_t)arg;
    for (int r = 0; r < RACE_ROUNDS; r++) {
        pthread_barrier_wait(&race_start);
        sw_error err;
        memset(&err, 0, sizeof err);
        if (i == RACERS) {
            race_st[i] = sw_carrier_release(sw_tensor_carrier(race_t), &err);
            race_detail_ok[i] = race_st[i] == SW_OK || err.detail == SW_CARRIER_REFUSED_PENDING;
        } else {
            sw_move_handle *m = NULL;
            race_st[i] = guarded_move(&race_guard[i], race_t, race_dst[i], i % 2 == 0, 0, &m,
                                      &err);
            if (race_st[i] == SW_OK)
                race_st[i] = sw_move_wait(m, NULL, &err);
            race_detail_ok[i] = race_st[i] == SW_OK ||
                                (race_st[i] == SW_ESTATE &&
                                 (err.detail == SW_MOVE_SOURCE_RELEASED ||
                                  err.detail == SW_MOVE_SOURCE_PENDING));
            sw_move_unref(m);
        }
        pthread_barrier_wait(&race_end);
        pthread_barrier_wait(&race_start); /* the checker looked */
    }
    return NULL;
}

static void test_exactly_once_against_moves_and_release(void)
{
    pthread_t th[RACERS + 1];
    pthread_barrier_init(&race_start, NULL, RACERS + 2);
    pthread_barrier_init(&race_end, NULL, RACERS + 2);
    for (int i = 0; i <= RACERS; i++)
        CHECK(pthread_create(&th[i], NULL, racer, (void *)(intptr_t)i) == 0);
    int winners_total = 0, released_by_release = 0;
    for (int r = 0; r < RACE_ROUNDS; r++) {
        race_t = filled_cpu(SMALL, r);
        for (int i = 0; i < RACERS; i++) {
            race_dst[i] = empty_file();
            guard_init(&race_guard[i], NULL, NULL);
        }
        pthread_barrier_wait(&race_start);
        pthread_barrier_wait(&race_end);
        int winners = 0, commits = 0, guard_bad = 0;
        for (int i = 0; i < RACERS; i++) {
            CHECK(race_detail_ok[i]);
            commits += race_guard[i].commits;
            guard_bad += race_guard[i].bad;
            if (race_st[i] == SW_OK) {
                winners++;
                CHECK(holds(race_dst[i], SMALL, r));
            } else {
                CHECK_EQ_I64(sw_carrier_size(race_dst[i]), 0); /* never grown, or undone */
            }
            CHECK(!sw_carrier_is_pending(race_dst[i]));
        }
        CHECK(race_detail_ok[RACERS]);
        /* The release wins only when it came first: then no move did. */
        int release_first = race_st[RACERS] == SW_OK && winners == 0;
        released_by_release += release_first;
        CHECK_EQ_I64(winners + release_first, 1);
        CHECK_EQ_I64(commits, winners);
        CHECK_EQ_I64(guard_bad, 0);
        sw_carrier *s = sw_tensor_carrier(race_t);
        CHECK(sw_carrier_is_released(s) && !sw_carrier_is_pending(s));
        winners_total += winners;
        sw_tensor_unref(race_t);
        for (int i = 0; i < RACERS; i++) {
            sw_carrier_unref(race_dst[i]);
            pthread_mutex_destroy(&race_guard[i].mu);
        }
        pthread_barrier_wait(&race_start);
    }
    for (int i = 0; i <= RACERS; i++)
        CHECK(pthread_join(th[i], NULL) == 0);
    pthread_barrier_destroy(&race_start);
    pthread_barrier_destroy(&race_end);
    CHECK_EQ_I64(winners_total + released_by_release, RACE_ROUNDS);
}

/* ---- refusals, faults, profiling ------------------------------------------------ */

typedef struct refusal_case {
    const char *what;
    int source_released, dst_released, dst_pending, src_pending, dst_small, dst_dtype;
} refusal_case;

/* One refused move, with and without guard_held: the same status, detail
 * and words; no commit, no guard, nothing changed. */
static void refuse_both_ways(const refusal_case *c)
{
    sw_status want_st = SW_OK;
    int want_detail = -1;
    char want_msg[sizeof(((sw_error *)0)->msg)] = "";
    for (int held = 0; held < 2; held++) {
        sw_error err;
        sw_tensor *t = filled_cpu(SMALL, 1);
        sw_carrier *s = sw_tensor_carrier(t), *d = NULL, *other = empty_cpu(SMALL);
        if (c->dst_small)
            d = empty_cpu(SMALL / 2);
        else if (c->dst_dtype)
            sw_cpu_new(SMALL, SW_DT_FLOAT32, 0, &d, &err);
        else
            d = empty_file();
        sw_carrier_pair pair;
        if (c->dst_pending)
            CHECK(sw_carrier_pair_begin(other, d, 0, &pair, &err) == SW_OK);
        if (c->src_pending)
            CHECK(sw_carrier_pair_begin(s, other, 0, &pair, &err) == SW_OK);
        if (c->source_released)
            CHECK(sw_carrier_release(s, &err) == SW_OK);
        if (c->dst_released)
            CHECK(sw_carrier_release(d, &err) == SW_OK);
        int64_t dst_size = sw_carrier_size(d);
        guard g;
        guard_init(&g, NULL, NULL);
        sw_move_handle *m = NULL;
        memset(&err, 0, sizeof err);
        sw_status st = guarded_move(&g, t, d, held, 0, &m, &err);
        CHECK(st != SW_OK && m == NULL);
        if (held) {
            CHECK_EQ_I64(st, want_st);
            CHECK_EQ_I64(err.detail, want_detail);
            CHECK_MSG(err, want_msg);
        } else {
            want_st = st;
            want_detail = err.detail;
            strcpy(want_msg, err.msg);
        }
        CHECK_EQ_I64(g.commits + g.enters + g.leaves, 0);
        CHECK(sw_carrier_is_released(s) == c->source_released);
        CHECK_EQ_I64(sw_carrier_size(d), dst_size);
        if (c->dst_pending || c->src_pending)
            sw_carrier_pair_end(&pair);
        CHECK(!sw_carrier_is_pending(s) && !sw_carrier_is_pending(d));
        if (!c->source_released)
            CHECK(holds(s, SMALL, 1));
        if (!held && want_detail <= 0)
            fprintf(stderr, "%s: refused without a row (%s)\n", c->what, err.msg);
        sw_tensor_unref(t);
        sw_carrier_unref(d);
        sw_carrier_unref(other);
        pthread_mutex_destroy(&g.mu);
    }
}

static void test_refusals_change_nothing(void)
{
    static const refusal_case cases[] = {
        {.what = "source released", .source_released = 1},
        {.what = "source pending", .src_pending = 1},
        {.what = "destination released", .dst_released = 1},
        {.what = "destination pending", .dst_pending = 1},
        {.what = "destination too small", .dst_small = 1},
        {.what = "dtype", .dst_dtype = 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        refuse_both_ways(&cases[i]);
}

/* An injected submission failure is a refusal (nothing changed, no
 * commit); an injected transfer failure is the move's terminal failure,
 * committed once on the caller: the source live with its values, the
 * destination's growth given back. */
static void test_faults_in_one_round(void)
{
    if (!sw_fault_enabled())
        return;
    for (int which = 0; which < 2; which++) {
        sw_tensor *t = filled_cpu(SMALL, 5);
        sw_carrier *s = sw_tensor_carrier(t), *d = empty_file();
        guard g;
        guard_init(&g, s, d);
        sw_move_handle *m = NULL;
        sw_error err;
        CHECK(sw_fault_arm(which ? "move_transfer" : "move_submit", 0, 1) == SW_OK);
        sw_status st = guarded_move(&g, t, d, 1, 0, &m, &err);
        sw_fault_clear();
        if (which == 0) {
            CHECK(st == SW_EIO && m == NULL);
            CHECK_EQ_I64(g.commits, 0);
        } else {
            CHECK(st == SW_OK && m && sw_move_done(m));
            CHECK(sw_move_wait(m, NULL, &err) == SW_EIO);
            CHECK_EQ_I64(g.commits, 1);
            CHECK_EQ_I64(g.commits_ok, 0);
        }
        CHECK_EQ_I64(g.enters + g.leaves + g.bad, 0);
        CHECK(!sw_carrier_is_released(s) && !sw_carrier_is_pending(s) && holds(s, SMALL, 5));
        CHECK(!sw_carrier_is_pending(d) && sw_carrier_size(d) == 0);
        let_go(m, t, d, &g);
    }
}

static _Atomic int events_submit, events_complete;

static void count_event(const sw_move_event *ev, void *user)
{
    (void)user;
    atomic_fetch_add(ev->kind == SW_MOVE_EVENT_SUBMIT ? &events_submit : &events_complete, 1);
}

/* A subscriber gets both events of a guarded move (which then takes two
 * lock rounds: hooks run with no core lock held); still no guard runs. */
static void test_profiling_subscriber_sees_guarded_moves(void)
{
    sw_error err;
    CHECK(sw_move_add_profile_hook(count_event, NULL, &err) == SW_OK);
    sw_tensor *t = filled_cpu(SMALL, 9);
    sw_carrier *s = sw_tensor_carrier(t), *d = empty_file();
    guard g;
    guard_init(&g, s, d);
    sw_move_handle *m = NULL;
    CHECK(guarded_move(&g, t, d, 1, 0, &m, &err) == SW_OK && sw_move_done(m));
    CHECK(sw_move_remove_profile_hook(count_event, NULL, &err) == SW_OK);
    CHECK_EQ_I64(events_submit, 1);
    CHECK_EQ_I64(events_complete, 1);
    CHECK_EQ_I64(g.commits_ok, 1);
    CHECK_EQ_I64(g.enters + g.leaves + g.bad, 0);
    CHECK(sw_carrier_is_released(s) && holds(d, SMALL, 9));
    let_go(m, t, d, &g);
}

/* ---- fork: the guard keeps it out -------------------------------------------- */

#define FORK_PAIRS 600
#define FORK_MOVERS 3

static pthread_mutex_t gil = PTHREAD_MUTEX_INITIALIZER; /* every mover's guard */
static sw_tensor *fork_t[FORK_PAIRS];
static sw_carrier *fork_src[FORK_PAIRS], *fork_dst[FORK_PAIRS];
static _Atomic int fork_next, fork_moved, forked;

static void gil_enter(void *user)
{
    (void)user;
    pthread_mutex_lock(&gil);
}

static void gil_leave(void *user)
{
    (void)user;
    pthread_mutex_unlock(&gil);
}

static void *fork_mover(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&gil);
        /* The second half waits for the fork: the child has pairs of both
         * kinds. */
        if (atomic_load(&fork_next) >= FORK_PAIRS / 2 && !atomic_load(&forked)) {
            pthread_mutex_unlock(&gil);
            sched_yield();
            continue;
        }
        int i = atomic_fetch_add(&fork_next, 1);
        if (i >= FORK_PAIRS) {
            pthread_mutex_unlock(&gil);
            return NULL;
        }
        sw_move_options o = {.commit_enter = gil_enter, .commit_leave = gil_leave,
                             .guard_held = 1};
        sw_move_handle *m = NULL;
        sw_error err;
        if (sw_move_async(fork_t[i], fork_dst[i], &o, &m, &err) == SW_OK && sw_move_done(m))
            atomic_fetch_add(&fork_moved, 1);
        pthread_mutex_unlock(&gil);
        sw_move_unref(m);
    }
}

/* Threads move under one shared guard (the GIL's pattern); a thread that
 * takes it before fork() leaves the child every carrier unlocked and
 * unmarked: each pair moved whole or not at all, and a move there works. */
static void test_fork_under_the_guard(void)
{
    for (int i = 0; i < FORK_PAIRS; i++) {
        fork_t[i] = filled_cpu(SMALL, i);
        fork_src[i] = sw_tensor_carrier(fork_t[i]);
        fork_dst[i] = i % 2 ? empty_file() : empty_cpu(SMALL);
    }
    pthread_t th[FORK_MOVERS];
    for (int i = 0; i < FORK_MOVERS; i++)
        CHECK(pthread_create(&th[i], NULL, fork_mover, NULL) == 0);
    while (atomic_load(&fork_next) < FORK_PAIRS / 3)
        sched_yield();
    pthread_mutex_lock(&gil);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(30); /* a carrier lock left held would hang here */
        int moved = 0, fresh = -1;
        for (int i = 0; i < FORK_PAIRS; i++) {
            sw_carrier *s = fork_src[i], *d = fork_dst[i];
            EXPECT(!sw_carrier_is_pending(s) && !sw_carrier_is_pending(d), 50);
            if (sw_carrier_is_released(s)) {
                EXPECT(holds(d, SMALL, i), 51);
                moved++;
            } else {
                EXPECT(holds(s, SMALL, i), 52);
                fresh = i;
            }
        }
        EXPECT(moved == atomic_load(&fork_moved), 53);
        EXPECT(fresh >= 0, 54);
        sw_move_end_inherited(); /* nothing was in flight */
        sw_move_options o = {.guard_held = 1};
        sw_move_handle *m = NULL;
        sw_error err;
        EXPECT(sw_move_async(fork_t[fresh], fork_dst[fresh], &o, &m, &err) == SW_OK &&
                   sw_move_wait(m, NULL, &err) == SW_OK,
               55);
        EXPECT(sw_carrier_is_released(fork_src[fresh]) && holds(fork_dst[fresh], SMALL, fresh),
               56);
        _exit(0);
    }
    atomic_store(&forked, 1);
    pthread_mutex_unlock(&gil);
    reap(pid, "fork under the guard");
    for (int i = 0; i < FORK_MOVERS; i++)
        CHECK(pthread_join(th[i], NULL) == 0);
    CHECK_EQ_I64(fork_moved, FORK_PAIRS);
    for (int i = 0; i < FORK_PAIRS; i++) {
        CHECK(sw_carrier_is_released(fork_src[i]) && holds(fork_dst[i], SMALL, i));
        sw_tensor_unref(fork_t[i]);
        sw_carrier_unref(fork_dst[i]);
    }
}

int main(void)
{
    test_commit_on_caller_skips_the_guard();
    test_guard_runs_where_the_caller_is_not();
    test_one_round_never_shows_marks();
    test_exactly_once_against_moves_and_release();
    test_refusals_change_nothing();
    test_faults_in_one_round();
    test_profiling_subscriber_sees_guarded_moves();
    test_fork_under_the_guard();
    sw_move_drain();
    return check_report("move_guard_held");
}
