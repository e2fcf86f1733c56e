/* sw_parallel_run: every part runs exactly once, callers on several threads
 * at once all finish (each works through its own parts when the helpers
 * are busy), and a forked child gets working helpers of its own. */
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#include "strideweave/parallel.h"

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

int main(void)
{
#ifdef __SANITIZE_THREAD__
    /* ThreadSanitizer cannot start threads after a multi-threaded fork:
     * here the child is forked before this process has helpers; the plain
     * and ASan builds fork it with the helpers running. */
    test_forked_child();
#endif
    test_every_part_once_from_many_callers();
#ifndef __SANITIZE_THREAD__
    test_forked_child();
#endif
    return check_report("parallel");
}
