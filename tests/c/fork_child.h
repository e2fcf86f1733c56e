/* What the fork tests share: a child reports through its exit code (0 all
 * well, else which expectation failed) and the parent reaps it; under
 * ThreadSanitizer a child may not start threads after a multi-threaded
 * fork, so there the tests leave out what would start one. */
#ifndef SW_TEST_FORK_CHILD_H
#define SW_TEST_FORK_CHILD_H

#include <stdio.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#ifdef __SANITIZE_THREAD__
#define CHILD_STARTS_THREADS 0
#else
#define CHILD_STARTS_THREADS 1
#endif

/* In the child: exit with `code` unless `cond`. */
#define EXPECT(cond, code)      \
    do {                        \
        if (!(cond))            \
            _exit(code);        \
    } while (0)

/* Wait for the child `pid`; it must have exited with 0 (`what` names the
 * case in the message otherwise). */
static inline void reap(pid_t pid, const char *what)
{
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0))
        fprintf(stderr, "%s: the child %s %d\n", what,
                WIFSIGNALED(status) ? "died of signal" : "exited with",
                WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

#endif
