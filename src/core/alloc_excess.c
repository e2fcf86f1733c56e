/* The thread that frees what the small cache keeps over its budgets.
 *
 * A move releases its source (C-23), and a moved source's block of 64 KiB
 * up to 1 MiB is kept by the small cache past its budgets rather than
 * freed by the move (alloc.c says why). Once the excess passes the wake
 * mark, this thread takes the oldest of those blocks out of the cache and
 * frees them, as filestore.c's reaper closes released files. One detached
 * thread, started at the first wake, sleeps between batches.
 *
 * sw_alloc_trim empties the cache, then waits for a batch the thread holds,
 * so that no block is left unfreed once it returns. fork() waits for that
 * batch too: the thread is not in the child, and blocks it held would be
 * freed by nobody there. */
#include "alloc_internal.h"
#include "core_thread_internal.h"

#include <pthread.h>
#include <stdlib.h>

#define BATCH 256

static pthread_mutex_t excess_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t excess_work = PTHREAD_COND_INITIALIZER; /* the thread: trim now */
static pthread_cond_t excess_idle = PTHREAD_COND_INITIALIZER; /* waiters: batch freed */
static int excess_due;      /* the cache passed its wake mark */
static int excess_sleeping; /* the thread waits on excess_work */
static int excess_busy;     /* the thread is taking or freeing a batch */
static int excess_started;  /* the thread runs in this process */

static void *excess_main(void *arg)
{
    (void)arg;
    void *batch[BATCH];
    pthread_mutex_lock(&excess_mu);
    for (;;) {
        while (!excess_due) {
            excess_sleeping = 1;
            pthread_cond_wait(&excess_work, &excess_mu);
            excess_sleeping = 0;
        }
        excess_due = 0;
        excess_busy = 1; /* before the take: trim and fork wait for it */
        pthread_mutex_unlock(&excess_mu);
        int n;
        while ((n = sw_alloc_take_excess(batch, BATCH)) > 0)
            for (int i = 0; i < n; i++)
                free(batch[i]);
        pthread_mutex_lock(&excess_mu);
        excess_busy = 0;
        pthread_cond_broadcast(&excess_idle);
    }
    return NULL;
}

void sw_alloc_excess_wake(void)
{
    pthread_mutex_lock(&excess_mu);
    if (!excess_started)
        excess_started = sw_thread_start_detached(excess_main, NULL) == 0;
    excess_due = 1;
    if (excess_sleeping)
        pthread_cond_signal(&excess_work);
    pthread_mutex_unlock(&excess_mu);
}

/* excess_mu held. */
static void wait_idle_locked(void)
{
    while (excess_busy)
        pthread_cond_wait(&excess_idle, &excess_mu);
}

void sw_alloc_excess_wait_idle(void)
{
    pthread_mutex_lock(&excess_mu);
    wait_idle_locked();
    pthread_mutex_unlock(&excess_mu);
}

void sw_alloc_excess_fork_prepare(void)
{
    pthread_mutex_lock(&excess_mu);
    wait_idle_locked(); /* and, with the lock held, no new batch starts */
}

void sw_alloc_excess_fork_parent(void)
{
    pthread_mutex_unlock(&excess_mu);
}

void sw_alloc_excess_fork_child(void)
{
    /* The thread is not in the child; the cache, with its excess, is the
     * child's own, and its first wake starts a thread of its own. The
     * thread's waits may have left the condition variables counting a
     * waiter the child lacks: fresh ones. */
    excess_started = 0;
    excess_busy = 0;
    excess_due = 0;
    excess_sleeping = 0;
    pthread_cond_init(&excess_work, NULL);
    pthread_cond_init(&excess_idle, NULL);
    pthread_mutex_unlock(&excess_mu);
}
