/* Holds (engine.h): a binding's own work counted by the core's one engine.
 * A hold keeps every drain and the exit drain waiting until released;
 * sw_engine_drain_held waits for holds alone, bounded by a time and a stop
 * callback; sw_engine_abandon_held gives up on the holds taken so far
 * (their releases then change nothing); a forked child counts none of the
 * parent's holds; exit refuses new holds once it began.
 *
 * Scenarios that need a process of their own (exit, fork) run in children
 * forked before this process has any thread; each child ends itself by
 * SIGALRM should a wait hang, and reports the first expectation that
 * failed as its exit code. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "helpers.h"
#include <strideweave/strideweave.h>
#include <strideweave/engine.h>

#define EXPECT(cond, code)      \
    do {                        \
        if (!(cond))            \
            _exit(code);        \
    } while (0)

static int64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* ---- exit ------------------------------------------------------------------- */

static _Atomic int exit_began, released;
static pid_t main_tid;
static uint64_t exit_token;

static void exit_begins(void) { atomic_store(&exit_began, 1); }

/* Registered before the first hold, so it runs after the engine's exit
 * drain: the hold was released by then, and new holds are refused. */
static void after_engine_drain(void)
{
    if (!atomic_load(&released))
        _exit(20);
    uint64_t h = 0;
    sw_error err;
    if (sw_engine_hold(&h, &err) != SW_ESTATE || !strstr(err.msg, "exiting"))
        _exit(21);
    if (sw_engine_held() != 0 || sw_move_drain_for(0) != 1)
        _exit(22);
    _exit(0);
}

/* Releases the hold only once exit began and the main thread sleeps in
 * exit's drain: an exit that does not wait for it never gets that far. */
static void *releaser(void *arg)
{
    (void)arg;
    while (!atomic_load(&exit_began) || thread_state(main_tid) != 'S')
        sched_yield();
    atomic_store(&released, 1);
    sw_engine_release(exit_token);
    return NULL;
}

static void exit_child(void)
{
    alarm(20);
    atexit(after_engine_drain); /* before the first hold registers the drain */
    main_tid = (pid_t)syscall(SYS_gettid);
    EXPECT(sw_engine_hold(&exit_token, NULL) == SW_OK, 30);
    atexit(exit_begins);
    pthread_t th;
    EXPECT(pthread_create(&th, NULL, releaser, NULL) == 0, 31);
    pthread_detach(th);
    exit(0);
}

/* ---- fork ------------------------------------------------------------------- */

/* The parent's holds count nothing in the child and their releases there
 * change nothing; the child's own holds count as usual. */
static void fork_child(void)
{
    alarm(20);
    uint64_t a = 0, b = 0;
    EXPECT(sw_engine_hold(&a, NULL) == SW_OK, 40);
    EXPECT(sw_engine_hold(&b, NULL) == SW_OK, 41);
    pid_t pid = fork();
    if (pid == 0) {
        EXPECT(sw_engine_held() == 0, 42);
        EXPECT(sw_move_drain_for(0) == 1, 43);
        EXPECT(sw_engine_drain_held(0, NULL, NULL) == 1, 44);
        uint64_t c = 0;
        EXPECT(sw_engine_hold(&c, NULL) == SW_OK, 45);
        sw_engine_release(a); /* the parent's: no effect */
        EXPECT(sw_engine_held() == 1 && sw_move_drain_for(0) == 0, 46);
        sw_engine_release(c);
        EXPECT(sw_engine_held() == 0 && sw_move_drain_for(0) == 1, 47);
        _exit(0);
    }
    int status = 0;
    EXPECT(pid > 0 && waitpid(pid, &status, 0) == pid, 48);
    EXPECT(WIFEXITED(status), 49);
    if (WEXITSTATUS(status) != 0)
        _exit(WEXITSTATUS(status));
    /* The parent still counts its own. */
    EXPECT(sw_engine_held() == 2 && sw_move_drain_for(0) == 0, 50);
    sw_engine_release(a);
    sw_engine_release(b);
    EXPECT(sw_engine_held() == 0 && sw_move_drain_for(0) == 1, 51);
    _exit(0);
}

static void run_child(void (*fn)(void), const char *what)
{
    pid_t pid = fork();
    if (pid == 0)
        fn();
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fprintf(stderr, "%s: child status %d (exit code %d)\n", what, status,
                WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* ---- in this process ---------------------------------------------------------- */

/* A hold keeps every drain waiting; its release lets them return. */
static void test_hold_counts_in_every_drain(void)
{
    uint64_t h = 0;
    CHECK(sw_engine_hold(&h, NULL) == SW_OK);
    CHECK_EQ_I64(sw_engine_held(), 1);
    CHECK_EQ_I64(sw_move_drain_for(2000000), 0);
    CHECK_EQ_I64(sw_engine_drain_held(2000000, NULL, NULL), 0);
    sw_engine_release(h);
    CHECK_EQ_I64(sw_engine_held(), 0);
    CHECK_EQ_I64(sw_move_drain_for(0), 1);
    CHECK_EQ_I64(sw_engine_drain_held(0, NULL, NULL), 1);
    sw_tiled_evictable_drain();
}

static _Atomic int thread_released;

static void *release_later(void *arg)
{
    /* Released only once the main thread waits (or is about to). */
    while (!atomic_load(&thread_released))
        sched_yield();
    sw_engine_release(*(uint64_t *)arg);
    return NULL;
}

/* A release on another thread wakes both kinds of drain. */
static void test_release_wakes_waiting_drains(void)
{
    for (int kind = 0; kind < 2; kind++) {
        uint64_t h = 0;
        CHECK(sw_engine_hold(&h, NULL) == SW_OK);
        pthread_t th;
        CHECK(pthread_create(&th, NULL, release_later, &h) == 0);
        atomic_store(&thread_released, 1);
        if (kind == 0)
            CHECK_EQ_I64(sw_engine_drain_held(-1, NULL, NULL), 1);
        else
            sw_move_drain();
        CHECK_EQ_I64(sw_engine_held(), 0);
        pthread_join(th, NULL);
        atomic_store(&thread_released, 0);
    }
}

static int stop_calls;
static int stop_on_third(void *user)
{
    (void)user;
    return ++stop_calls >= 3;
}
static int never_stop(void *user)
{
    (void)user;
    stop_calls++;
    return 0;
}

/* sw_engine_drain_held ends when `stop` says so (-1), or when the time ran
 * out (0), asking `stop` along the way; the hold stays counted. */
static void test_drain_held_stops_and_times_out(void)
{
    uint64_t h = 0;
    CHECK(sw_engine_hold(&h, NULL) == SW_OK);
    stop_calls = 0;
    CHECK_EQ_I64(sw_engine_drain_held(-1, stop_on_third, NULL), -1);
    CHECK_EQ_I64(stop_calls, 3);
    stop_calls = 0;
    int64_t t0 = mono_ns();
    CHECK_EQ_I64(sw_engine_drain_held(200000000LL, never_stop, NULL), 0);
    CHECK(mono_ns() - t0 >= 200000000LL);
    CHECK(stop_calls >= 2);
    CHECK_EQ_I64(sw_engine_held(), 1);
    sw_engine_release(h);
    CHECK_EQ_I64(sw_engine_drain_held(-1, never_stop, NULL), 1);
}

/* Abandoning gives up on the holds counted now: drains return, the late
 * releases change nothing (the count never goes below the live holds). */
static void test_abandon_gives_up_on_the_holds_so_far(void)
{
    uint64_t a = 0, b = 0, c = 0;
    CHECK(sw_engine_hold(&a, NULL) == SW_OK);
    CHECK(sw_engine_hold(&b, NULL) == SW_OK);
    CHECK_EQ_I64(sw_engine_abandon_held(), 2);
    CHECK_EQ_I64(sw_engine_held(), 0);
    CHECK_EQ_I64(sw_move_drain_for(0), 1);
    CHECK_EQ_I64(sw_engine_drain_held(0, NULL, NULL), 1);
    CHECK(sw_engine_hold(&c, NULL) == SW_OK);
    sw_engine_release(a);
    sw_engine_release(b);
    CHECK_EQ_I64(sw_engine_held(), 1);
    CHECK_EQ_I64(sw_move_drain_for(0), 0);
    sw_engine_release(c);
    CHECK_EQ_I64(sw_engine_held(), 0);
    CHECK_EQ_I64(sw_move_drain_for(0), 1);
    CHECK_EQ_I64(sw_engine_abandon_held(), 0);
}

int main(void)
{
    /* First, while this process has no thread: children of a known shape. */
    run_child(exit_child, "exit waits for a hold, then refuses new ones");
    run_child(fork_child, "a forked child counts none of the parent's holds");
    test_hold_counts_in_every_drain();
    test_release_wakes_waiting_drains();
    test_drain_held_stops_and_times_out();
    test_abandon_gives_up_on_the_holds_so_far();
    return check_report("engine_hold");
}
