/* sw_parallel_run: every part runs exactly once, callers on several threads
 * at once all finish (each works through its own parts when the helpers
 * are busy), and a forked child gets working helpers of its own. White
 * box: parts of a batch run for an owner (parallel_internal.h) go to that
 * owner's waiter and to no more helpers than allowed. */
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "parallel_internal.h"

#define PARTS 13
#define CALLS 300
#define CALLERS 4

typedef struct counts {
    _Atomic int ran[PARTS];
} counts;

static void bump(void *ctx, int part)
{
    counts *c = ctx;
    atomic_fetch_add(&c->ran[part], 1);
}

static void *caller(void *arg)
{
    int *bad = arg;
    for (int k = 0; k < CALLS; k++) {
        counts c = {0};
        sw_parallel_run(PARTS, bump, &c);
        for (int i = 0; i < PARTS; i++)
            *bad += atomic_load(&c.ran[i]) != 1;
    }
    return NULL;
}

static void test_every_part_once_from_many_callers(void)
{
    CHECK(sw_parallel_width() >= 1);
    pthread_t t[CALLERS];
    int bad[CALLERS] = {0};
    for (int i = 0; i < CALLERS; i++)
        CHECK(pthread_create(&t[i], NULL, caller, &bad[i]) == 0);
    for (int i = 0; i < CALLERS; i++) {
        pthread_join(t[i], NULL);
        CHECK_EQ_I64(bad[i], 0);
    }
    counts c = {0};
    sw_parallel_run(0, bump, &c);
    sw_parallel_run(1, bump, &c);
    CHECK_EQ_I64(atomic_load(&c.ran[0]), 1);
}

static void test_forked_child(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        int bad = 0;
        caller(&bad);
        _exit(bad ? 1 : 0);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* ---- parts open to a waiter ------------------------------------------------ */

#define OPEN_PARTS 8

typedef struct open_batch {
    pthread_t runner, waiter;
    _Atomic int waiter_known; /* `waiter` is set */
    _Atomic int ran[OPEN_PARTS];
    _Atomic int by_runner, by_waiter, by_other;
    _Atomic int waiter_ran; /* the waiter finished a part */
    _Atomic int runner_done;
    int runner_saw_waiter; /* part 0 saw the waiter run a part before it ended */
} open_batch;

static void sleep_us(long us)
{
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static void open_part(void *ctx, int part)
{
    open_batch *b = ctx;
    atomic_fetch_add(&b->ran[part], 1);
    pthread_t self = pthread_self();
    int waiter = atomic_load(&b->waiter_known) && pthread_equal(self, b->waiter);
    if (pthread_equal(self, b->runner))
        atomic_fetch_add(&b->by_runner, 1);
    else if (waiter)
        atomic_fetch_add(&b->by_waiter, 1);
    else
        atomic_fetch_add(&b->by_other, 1);
    if (waiter)
        atomic_store(&b->waiter_ran, 1);
    /* The runner's first part holds it until the waiter ran one (10 s at
     * most): parts are left for the waiter however the threads are timed. */
    if (part == 0 && pthread_equal(self, b->runner)) {
        for (int i = 0; i < 10000 && !atomic_load(&b->waiter_ran); i++)
            sleep_us(1000);
        b->runner_saw_waiter = atomic_load(&b->waiter_ran);
    }
}

static int owner_token, other_token;

static void *waiter_main(void *arg)
{
    open_batch *b = arg;
    b->waiter = pthread_self();
    atomic_store(&b->waiter_known, 1);
    while (!atomic_load(&b->runner_done))
        if (!sw_parallel_help(&owner_token))
            sleep_us(100);
    return NULL;
}

static void *runner_main(void *arg)
{
    open_batch *b = arg;
    b->runner = pthread_self(); /* before any part: the batch's lock orders it */
    /* Helpers may take none of these parts: only the runner and the waiter. */
    sw_parallel_run_open(&owner_token, 0, OPEN_PARTS, open_part, b);
    atomic_store(&b->runner_done, 1);
    return NULL;
}

static void test_open_parts_go_to_the_waiter_and_no_helper(void)
{
    if (sw_parallel_width() < 2) {
        printf("parallel: skipping the waiter test: one CPU, no helper threads\n");
        return;
    }
    CHECK_EQ_I64(sw_parallel_help(NULL), 0);
    CHECK_EQ_I64(sw_parallel_help(&owner_token), 0); /* nothing running */
    open_batch b = {0};
    pthread_t runner, waiter;
    CHECK(pthread_create(&waiter, NULL, waiter_main, &b) == 0);
    CHECK(pthread_create(&runner, NULL, runner_main, &b) == 0);
    pthread_join(runner, NULL);
    pthread_join(waiter, NULL);
    for (int i = 0; i < OPEN_PARTS; i++)
        CHECK_EQ_I64(atomic_load(&b.ran[i]), 1);
    CHECK(b.runner_saw_waiter);
    CHECK(atomic_load(&b.by_waiter) >= 1);
    CHECK_EQ_I64(atomic_load(&b.by_other), 0);
    CHECK_EQ_I64(atomic_load(&b.by_runner) + atomic_load(&b.by_waiter), OPEN_PARTS);
    CHECK_EQ_I64(sw_parallel_help(&other_token), 0);
}

int main(void)
{
#ifdef __SANITIZE_THREAD__
    /* ThreadSanitizer cannot start threads after a multi-threaded fork:
     * here the child is forked before this process has helpers; the plain
     * and ASan builds fork it with the helpers running. */
    test_forked_child();
#endif
    test_every_part_once_from_many_callers();
    test_open_parts_go_to_the_waiter_and_no_helper();
#ifndef __SANITIZE_THREAD__
    test_forked_child();
#endif
    return check_report("parallel");
}
