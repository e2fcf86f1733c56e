/* One engine for moves and TiledEvictable's asynchronous work (move.h,
 * tiled_evictable.h): both run on one pool and one completion thread (a
 * process starts one set of threads, whichever kind of work comes first);
 * a drain waits for both kinds; exit waits for both kinds in flight (and
 * refuses new TiledEvictable work once it began); a
 * forked child ends both kinds it inherited (SW_ESTATE "forked", marks
 * cleared, waits that never hang) and starts its own engine for new work.
 *
 * Scenarios that need a process of their own (a known thread count, exit)
 * run in children forked before this process has any thread; each child
 * ends itself by SIGALRM should a wait hang, and reports the first
 * expectation that failed as its exit code. */
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "helpers.h"
#include "gated.h"
#include <strideweave/strideweave.h>
#include <strideweave/binding.h>

static float value_of(int64_t slot) { return 0.25f + (float)slot; }

#define MAXS 1024
#define MAXT 64
#include "te_fixture.h"
#include "strideweave/testing.h"

#define EXPECT(cond, code)      \
    do {                        \
        if (!(cond))            \
            _exit(code);        \
    } while (0)

#ifdef __SANITIZE_THREAD__
#define CHILD_STARTS_THREADS 0 /* TSan: no threads after a multi-threaded fork */
#else
#define CHILD_STARTS_THREADS 1
#endif

static const int64_t GRID[2] = {2, 2}, TILE[2] = {2, 2}; /* 4 tiles of 4 slots */

/* Threads of this process now. */
static int thread_count(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static sw_tensor *cpu_tensor(int64_t n)
{
    sw_carrier *c = NULL;
    sw_tensor *t = NULL;
    CHECK(sw_cpu_new(n, SW_DT_FLOAT32, 0, &c, NULL) == SW_OK);
    CHECK(sw_tensor_new_strided(c, 0, 1, (int64_t[]){n}, NULL, &t, NULL) == SW_OK);
    for (int64_t i = 0; i < n; i++)
        sw_tensor_set_f32(t, i, (float)i + 0.5f, NULL);
    sw_carrier_unref(c);
    return t;
}

/* A move on the pool: into a carrier of a foreign class (slot by slot,
 * never on the caller), held at its gate until the test opens it. */
static sw_carrier *gated_carrier(gated *g, int open)
{
    gated_init(g, 16);
    g->open = open;
    sw_carrier *c = NULL;
    CHECK(sw_carrier_new(&gated_ops, g, SW_DT_FLOAT32, 0, &c, NULL) == SW_OK);
    return c;
}

static int tiles_in(sw_tiled_evictable *te, sw_te_filter f)
{
    int64_t n = -1;
    sw_tiled_evictable_tiles(te, f, NULL, 0, &n, NULL);
    return (int)n;
}

static int te_busy(sw_tiled_evictable *te)
{
    int busy = 0;
    for (int64_t t = 0; t < 4; t++) {
        int64_t c[2] = {t / 2, t % 2};
        sw_te_tile_state s;
        sw_tiled_evictable_tile_state(te, c, &s, NULL);
        busy += s.pending + s.pinned;
    }
    return busy;
}

static const int64_t ALL[8] = {0, 0, 0, 1, 1, 0, 1, 1};

/* ---- one set of threads ---------------------------------------------------- */

/* In a fresh process with a pool of one thread: the first kind of work
 * starts the engine (one worker, one completion thread); the other kind
 * starts no thread. `te_first` picks the order. */
static void one_set_of_threads_child(int te_first)
{
    alarm(20);
    setenv("STRIDEWEAVE_NUM_THREADS", "1", 1);
    int base = thread_count(); /* 1, or more with a sanitizer's own threads */
    EXPECT(base >= 1, 2);
    sw_tiled_evictable *te = make_grid(2, GRID, TILE, 0);
    gated g;
    sw_carrier *dst = gated_carrier(&g, 1);
    sw_tensor *t = cpu_tensor(16);
    int after_first = -1;
    for (int step = 0; step < 2; step++) {
        if ((step == 0) == (te_first != 0)) {
            sw_te_work *w = NULL;
            EXPECT(sw_tiled_evictable_evict_async(te, ALL, 4, &w, NULL) == SW_OK, 3);
            EXPECT(sw_te_work_wait(w, NULL, NULL) == SW_OK, 4);
            sw_te_work_unref(w);
            EXPECT(sw_tiled_evictable_promote_async(te, ALL, 4, &w, NULL) == SW_OK, 5);
            EXPECT(sw_te_work_wait(w, NULL, NULL) == SW_OK, 6);
            sw_te_work_unref(w);
        } else {
            sw_move_handle *m = NULL;
            EXPECT(sw_move_async(t, dst, NULL, &m, NULL) == SW_OK, 7);
            EXPECT(sw_move_wait(m, NULL, NULL) == SW_OK, 8);
            sw_move_unref(m);
        }
        if (step == 0)
            after_first = thread_count();
    }
    int after_both = thread_count();
    /* One worker and one completion thread, started by the first kind
     * (ThreadSanitizer starts a thread of its own with the first one). */
#ifdef __SANITIZE_THREAD__
    EXPECT(after_first >= base + 2 && after_first <= base + 3, 9);
#else
    EXPECT(after_first == base + 2, 9);
#endif
    /* The second kind started none of its own. */
    EXPECT(after_both == after_first, 10);
    EXPECT(tiles_in(te, SW_TE_TILES_PRIMARY) == 4 && all_values_exact(te), 11);
    sw_tensor_unref(t);
    sw_carrier_unref(dst);
    sw_tiled_evictable_unref(te);
    _exit(0);
}

/* ---- exit ---------------------------------------------------------------------- */

static sw_tiled_evictable *exit_te;
static sw_te_work *exit_work;
static sw_move_handle *exit_move;
static gated exit_gate;
static _Atomic int exit_began;
static pid_t main_tid;

/* Registered before the engine's exit drain, so it runs after it. */
static void after_engine_drain(void)
{
    /* Exit waited for the TiledEvictable's work: committed, marks clear. */
    EXPECT(sw_te_work_done(exit_work), 20);
    EXPECT(sw_te_work_wait(exit_work, NULL, NULL) == SW_OK, 21);
    EXPECT(tiles_in(exit_te, SW_TE_TILES_SECONDARY) == 4 && te_busy(exit_te) == 0, 22);
    EXPECT(all_values_exact(exit_te), 23);
    if (exit_move) {
        EXPECT(sw_move_done(exit_move), 24);
        EXPECT(sw_move_wait(exit_move, NULL, NULL) == SW_OK, 25);
        EXPECT(exit_gate.slots[3] == 3.5f, 26);
    }
    /* New work is refused once exit began, before any change. */
    sw_te_work *late = NULL;
    sw_error err;
    EXPECT(sw_tiled_evictable_promote_async(exit_te, ALL, 1, &late, &err) == SW_ESTATE, 27);
    EXPECT(late == NULL && strstr(err.msg, "exiting") != NULL, 28);
    EXPECT(te_busy(exit_te) == 0 && tiles_in(exit_te, SW_TE_TILES_SECONDARY) == 4, 29);
    _exit(0);
}

/* Registered after the engine's exit drain, so it runs before it. */
static void exit_begins(void) { atomic_store(&exit_began, 1); }

/* Lets the work go on only once exit began and the main thread sleeps in
 * exit's drain: an exit that does not wait for it never gets that far. */
static void *releaser(void *arg)
{
    (void)arg;
    while (!atomic_load(&exit_began) || thread_state(main_tid) != 'S')
        sched_yield();
    gated_open(&exit_gate);
    sw_fault_resume();
    return NULL;
}

/* Exit with a TiledEvictable evict in flight (stopped at its copy), and a
 * move too when `with_move`: exit waits for both, then they committed. */
static void exit_child(int with_move)
{
    alarm(20);
    atexit(after_engine_drain); /* before the engine registers its drain */
    main_tid = (pid_t)syscall(SYS_gettid);
    exit_te = make_grid(2, GRID, TILE, 0);
    sw_fault_arm("tile_copy_pause", 0, 1);
    EXPECT(sw_tiled_evictable_evict_async(exit_te, ALL, 4, &exit_work, NULL) == SW_OK, 30);
    sw_fault_wait_paused();
    if (with_move) {
        sw_carrier *dst = gated_carrier(&exit_gate, 0);
        sw_tensor *t = cpu_tensor(16);
        EXPECT(sw_move_async(t, dst, NULL, &exit_move, NULL) == SW_OK, 31);
        gated_wait_entered(&exit_gate);
        sw_tensor_unref(t);
        sw_carrier_unref(dst);
    } else {
        gated_init(&exit_gate, 16);
    }
    atexit(exit_begins);
    pthread_t th;
    EXPECT(pthread_create(&th, NULL, releaser, NULL) == 0, 32);
    pthread_detach(th);
    EXPECT(!sw_te_work_done(exit_work), 33);
    exit(0);
}

/* ---- drain ------------------------------------------------------------------ */

/* sw_move_drain (and so exit) waits for a TiledEvictable promote and a move
 * in flight together, whichever finishes first; sw_tiled_evictable_drain
 * is the same drain. */
static void test_drain_waits_for_both_kinds(void)
{
    if (!sw_fault_enabled())
        return;
    for (int te_last = 0; te_last < 2; te_last++) {
        sw_tiled_evictable *te = make_grid(2, GRID, TILE, 1);
        CHECK(sw_tiled_evictable_evict(te, ALL, 4, NULL) == SW_OK);
        gated g;
        sw_carrier *dst = gated_carrier(&g, 0);
        sw_tensor *t = cpu_tensor(16);
        sw_move_handle *m = NULL;
        sw_te_work *w = NULL;
        sw_fault_arm("tile_copy_pause", 0, 1);
        CHECK(sw_tiled_evictable_promote_async(te, ALL, 4, &w, NULL) == SW_OK);
        sw_fault_wait_paused();
        CHECK(sw_move_async(t, dst, NULL, &m, NULL) == SW_OK);
        gated_wait_entered(&g);
        CHECK_EQ_I64(sw_move_drain_for(2000000), 0); /* both in flight */
        if (te_last) {
            gated_open(&g);
            CHECK(sw_move_wait(m, NULL, NULL) == SW_OK);
            /* The move let go; the promote is still in flight. */
            CHECK_EQ_I64(sw_move_drain_for(2000000), 0);
            CHECK(!sw_te_work_done(w));
            sw_fault_resume();
        } else {
            sw_fault_resume();
            CHECK(sw_te_work_wait(w, NULL, NULL) == SW_OK);
            /* The promote committed; the move is still in flight. */
            CHECK_EQ_I64(sw_move_drain_for(2000000), 0);
            CHECK(!sw_move_done(m));
            gated_open(&g);
        }
        sw_tiled_evictable_drain();
        CHECK(sw_move_done(m) && sw_te_work_done(w));
        CHECK_EQ_I64(sw_move_drain_for(0), 1);
        CHECK_EQ_I64(tiles_in(te, SW_TE_TILES_PRIMARY), 4);
        CHECK(all_values_exact(te) && te_busy(te) == 0);
        CHECK(g.slots[15] == 15.5f);
        sw_te_work_unref(w);
        sw_move_unref(m);
        sw_tensor_unref(t);
        sw_carrier_unref(dst);
        sw_tiled_evictable_unref(te);
    }
}

/* ---- fork ------------------------------------------------------------------- */

#ifndef __SANITIZE_THREAD__ /* TSan cannot follow a multi-threaded fork */
/* fork() with a move (at its gate on the pool) and a TiledEvictable evict
 * (stopped at its copy on the pool) in flight: the child ends both (each
 * fails SW_ESTATE "forked"; the tiles and the move's carriers are free
 * again, residency and values as at the fork); its drains and its exit do
 * not wait for the parent's work; its new work runs on an engine of its
 * own. The parent's work commits once let go. */
static void test_fork_with_both_kinds_in_flight(void)
{
    if (!sw_fault_enabled())
        return;
    sw_tiled_evictable *te = make_grid(2, GRID, TILE, 0);
    gated g, g2;
    sw_carrier *dst = gated_carrier(&g, 0);
    sw_tensor *t = cpu_tensor(16);
    sw_carrier *src = sw_tensor_carrier(t);
    sw_move_handle *m = NULL;
    sw_te_work *w = NULL;
    sw_fault_arm("tile_copy_pause", 0, 1);
    CHECK(sw_tiled_evictable_evict_async(te, ALL, 4, &w, NULL) == SW_OK);
    sw_fault_wait_paused();
    CHECK(sw_move_async(t, dst, NULL, &m, NULL) == SW_OK);
    gated_wait_entered(&g);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(20);
        sw_error err;
        /* Ended in the fork itself: the tiles are free, values as they were. */
        EXPECT(sw_te_work_done(w), 40);
        EXPECT(sw_te_work_wait(w, NULL, &err) == SW_ESTATE && strstr(err.msg, "forked"), 41);
        EXPECT(te_busy(te) == 0 && tiles_in(te, SW_TE_TILES_PRIMARY) == 4, 42);
        EXPECT(all_values_exact(te), 43);
        /* The move, once the child ends what it inherited. */
        sw_move_end_inherited();
        EXPECT(sw_move_done(m) && sw_move_ended_by_fork(m), 44);
        EXPECT(sw_move_wait(m, NULL, &err) == SW_ESTATE && strstr(err.msg, "forked"), 45);
        sw_carrier_state s;
        sw_carrier_get_state(src, &s);
        EXPECT(!s.pending && !s.released, 46);
        sw_carrier_get_state(dst, &s);
        EXPECT(!s.pending, 47);
        /* Nothing of the parent's is counted here. */
        EXPECT(sw_move_drain_for(0) == 1, 48);
        sw_tiled_evictable_drain();
        if (CHILD_STARTS_THREADS) {
            sw_te_work *w2 = NULL;
            EXPECT(sw_tiled_evictable_promote_async(te, ALL, 2, &w2, NULL) == SW_OK, 49);
            EXPECT(sw_te_work_wait(w2, NULL, NULL) == SW_OK, 50);
            sw_te_work_unref(w2);
            sw_carrier *d2 = gated_carrier(&g2, 1); /* a move on the child's pool */
            sw_move_handle *m2 = NULL;
            EXPECT(sw_move_async(t, d2, NULL, &m2, NULL) == SW_OK, 51);
            EXPECT(sw_move_wait(m2, NULL, NULL) == SW_OK, 52);
            sw_move_unref(m2);
            sw_carrier_unref(d2);
        }
#ifdef __SANITIZE_ADDRESS__
        /* The staging storage the parent was filling is forgotten here on
         * purpose (tiled_evictable.h, "Fork"): LeakSanitizer would say so. */
        _exit(sw_move_drain_for(0) == 1 ? 0 : 53);
#else
        exit(0); /* the exit drain waits for none of the parent's work */
#endif
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fprintf(stderr, "fork child: status %d\n", status);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* The parent's work goes on. */
    sw_fault_resume();
    gated_open(&g);
    CHECK(sw_te_work_wait(w, NULL, NULL) == SW_OK);
    CHECK(sw_move_wait(m, NULL, NULL) == SW_OK);
    CHECK_EQ_I64(tiles_in(te, SW_TE_TILES_SECONDARY), 4);
    CHECK(all_values_exact(te));
    CHECK(g.slots[15] == 15.5f);
    sw_te_work_unref(w);
    sw_move_unref(m);
    sw_tensor_unref(t);
    sw_carrier_unref(dst);
    sw_tiled_evictable_unref(te);
}
#endif

static void run_child(void (*fn)(int), int arg, const char *what)
{
    pid_t pid = fork();
    if (pid == 0)
        fn(arg);
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fprintf(stderr, "%s (%d): child status %d (exit code %d)\n", what, arg, status,
                WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(void)
{
    /* Two pool threads at least, whatever the CPUs: a move runs beside
     * TiledEvictable work held on the pool. */
    setenv("STRIDEWEAVE_NUM_THREADS", "4", 1);
    /* First, while this process has no thread: children of a known shape. */
    run_child(one_set_of_threads_child, 0, "one set of threads, move first");
    run_child(one_set_of_threads_child, 1, "one set of threads, TiledEvictable first");
    if (sw_fault_enabled()) {
        run_child(exit_child, 0, "exit with TiledEvictable work in flight");
        run_child(exit_child, 1, "exit with a move and TiledEvictable work in flight");
    }
    test_drain_waits_for_both_kinds();
#ifndef __SANITIZE_THREAD__
    test_fork_with_both_kinds_in_flight();
#endif
    return check_report("one_engine");
}
