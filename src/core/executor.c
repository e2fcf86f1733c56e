/* The worker pool and one-shot completions (see executor.h).
 *
 * libuv's shape: one mutex guards both queues and every counter; workers
 * sleep on `work_ready`, poppers and late shutdown callers on `done_ready`.
 * The mutex is never held while a job runs, so a job may submit another job
 * or block for as long as it likes without stalling the pool. */
#include "strideweave/executor.h"
#include "fault_internal.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "executor_internal.h"
#include "strideweave/alloc.h"

typedef struct job_queue {
    sw_job *head;
    sw_job *tail;
} job_queue;

struct sw_executor {
    pthread_mutex_t lock;
    pthread_cond_t work_ready; /* workers: a job was queued, or shutdown began */
    pthread_cond_t done_ready; /* poppers: a job finished, the pool drained, or joined */
    job_queue pending;         /* submitted, not yet started (FIFO) */
    job_queue done;            /* finished, not yet popped (FIFO) */
    long queued;               /* jobs in `pending` */
    long outstanding;          /* submitted and not yet popped */
    int running;               /* jobs inside their `run` right now */
    int blocked;               /* of those, inside sw_executor_blocking_begin/end */
    int started;               /* threads[0, started) are live or joinable */
    int max_threads;           /* fixed at creation, read without the lock */
    int stopping;              /* shutdown began: submits are refused */
    int joining;               /* one shutdown caller owns the joins */
    int joined;                /* every worker has been joined */
    pthread_t threads[SW_EXECUTOR_MAX_THREADS];
};

static void queue_push(job_queue *q, sw_job *job)
{
    job->next = NULL;
    if (q->tail)
        q->tail->next = job;
    else
        q->head = job;
    q->tail = job;
}

static sw_job *queue_pop(job_queue *q)
{
    sw_job *job = q->head;
    if (job) {
        q->head = job->next;
        if (!q->head)
            q->tail = NULL;
        job->next = NULL;
    }
    return job;
}

/* With the lock held: nothing left that could still reach the completion
 * queue, so a blocked popper must not wait for more. */
static int drained(const sw_executor *ex)
{
    return ex->stopping && ex->queued == 0 && ex->running == 0;
}

/* ---- workers ------------------------------------------------------------ */

/* The pool this thread works for; NULL off the pool. */
static __thread sw_executor *worker_pool;

/* With the lock held: whether one more job may start now. At most
 * max_threads jobs run unblocked; a blocked one leaves its place to a
 * queued one. Once shutdown began, every queued job runs. */
static int may_start_job(const sw_executor *ex)
{
    return ex->pending.head && (ex->running - ex->blocked < ex->max_threads || ex->stopping);
}

/* With the lock held: wait for the next job; NULL once shutdown began and
 * the queue is empty, which tells the worker to exit. */
static sw_job *take_job(sw_executor *ex)
{
    while (!may_start_job(ex) && !ex->stopping)
        pthread_cond_wait(&ex->work_ready, &ex->lock);
    sw_job *job = queue_pop(&ex->pending);
    if (job) {
        ex->queued--;
        ex->running++;
    }
    return job;
}

/* With the lock held. The last job of a shutdown wakes every popper, since
 * all but the one that pops it must now return NULL. */
static void finish_job(sw_executor *ex, sw_job *job)
{
    ex->running--; /* this thread takes the next job itself, if one may start */
    queue_push(&ex->done, job);
    if (drained(ex))
        pthread_cond_broadcast(&ex->done_ready);
    else
        pthread_cond_signal(&ex->done_ready);
}

static void *worker_main(void *arg)
{
    sw_executor *ex = arg;
    worker_pool = ex;
    pthread_mutex_lock(&ex->lock);
    sw_job *job;
    while ((job = take_job(ex)) != NULL) {
        pthread_mutex_unlock(&ex->lock);
        job->run(job);
        pthread_mutex_lock(&ex->lock);
        finish_job(ex, job);
    }
    pthread_mutex_unlock(&ex->lock);
    return NULL;
}

/* With the lock held. Workers block every signal they can, so that
 * asynchronous signals (SIGINT for Python's KeyboardInterrupt) go to an
 * application thread instead of a pool thread that cannot handle them.
 * Returns 0 or the pthread_create error. */
static int start_thread(sw_executor *ex)
{
    if (SW_FAULT_HIT("thread"))
        return EAGAIN;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&ex->threads[ex->started], NULL, worker_main, ex);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == 0)
        ex->started++;
    return rc;
}

/* ---- pool size ---------------------------------------------------------- */

/* The environment's pool size, or 0 when unset or not an integer in
 * [1, SW_EXECUTOR_MAX_THREADS]. */
static int env_threads(void)
{
    const char *s = getenv(SW_EXECUTOR_THREADS_ENV);
    if (!s || !*s)
        return 0;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < 1 || v > SW_EXECUTOR_MAX_THREADS)
        return 0;
    return (int)v;
}

static int choose_threads(int nthreads)
{
    if (nthreads > 0)
        return nthreads < SW_EXECUTOR_MAX_THREADS ? nthreads : SW_EXECUTOR_MAX_THREADS;
    int n = env_threads();
    if (n > 0)
        return n;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 1)
        return 1;
    return cpus < 4 ? (int)cpus : 4;
}

/* ---- executor ----------------------------------------------------------- */

sw_status sw_executor_create(int nthreads, sw_executor **out, sw_error *err)
{
    if (!out)
        return sw_error_set(err, SW_EINVAL, "executor: NULL output pointer");
    *out = NULL;
    sw_executor *ex = sw_calloc(1, sizeof *ex);
    if (!ex)
        return sw_error_set(err, SW_ENOMEM, "executor: out of memory");
    if (pthread_mutex_init(&ex->lock, NULL) != 0) {
        sw_free(ex);
        return sw_error_set(err, SW_ENOMEM, "executor: cannot create its mutex");
    }
    if (pthread_cond_init(&ex->work_ready, NULL) != 0) {
        pthread_mutex_destroy(&ex->lock);
        sw_free(ex);
        return sw_error_set(err, SW_ENOMEM, "executor: cannot create a condition");
    }
    if (pthread_cond_init(&ex->done_ready, NULL) != 0) {
        pthread_cond_destroy(&ex->work_ready);
        pthread_mutex_destroy(&ex->lock);
        sw_free(ex);
        return sw_error_set(err, SW_ENOMEM, "executor: cannot create a condition");
    }
    ex->max_threads = choose_threads(nthreads);
    *out = ex;
    return SW_OK;
}

int sw_executor_max_threads(const sw_executor *ex)
{
    return ex->max_threads;
}

int sw_executor_started_threads(sw_executor *ex)
{
    pthread_mutex_lock(&ex->lock);
    int n = ex->started;
    pthread_mutex_unlock(&ex->lock);
    return n;
}

/* With the lock held: the most threads the pool may have now, its bound
 * plus one for each blocked job (up to SW_EXECUTOR_BLOCKED_EXTRA). */
static int thread_bound(const sw_executor *ex)
{
    int extra = ex->blocked < SW_EXECUTOR_BLOCKED_EXTRA ? ex->blocked : SW_EXECUTOR_BLOCKED_EXTRA;
    int bound = ex->max_threads + extra;
    return bound < SW_EXECUTOR_MAX_THREADS ? bound : SW_EXECUTOR_MAX_THREADS;
}

/* With the lock held, before queueing `more` jobs (0: none, a job just
 * blocked): start a thread when the threads not inside a job cannot absorb
 * every queued job plus those. Returns 0, or the error of a start that left
 * the pool with no thread. */
static int ensure_worker(sw_executor *ex, long more)
{
    long free_threads = ex->started - ex->running;
    if (ex->queued + more <= free_threads || ex->started >= thread_bound(ex))
        return 0;
    int rc = start_thread(ex);
    /* Another thread will get to the job eventually: that is enough. */
    return ex->started > 0 ? 0 : rc;
}

int sw_executor_on_worker(void) { return worker_pool != NULL; }

void sw_executor_blocking_begin(void)
{
    sw_executor *ex = worker_pool;
    if (!ex)
        return;
    pthread_mutex_lock(&ex->lock);
    ex->blocked++;
    /* One more job may run unblocked now: on an idle thread, or on one
     * started for it (best effort: the job still runs later without). */
    if (!ex->stopping)
        (void)ensure_worker(ex, 0);
    if (ex->pending.head)
        pthread_cond_signal(&ex->work_ready);
    pthread_mutex_unlock(&ex->lock);
}

void sw_executor_blocking_end(void)
{
    sw_executor *ex = worker_pool;
    if (!ex)
        return;
    pthread_mutex_lock(&ex->lock);
    ex->blocked--;
    pthread_mutex_unlock(&ex->lock);
}

sw_status sw_executor_submit(sw_executor *ex, sw_job *job, sw_error *err)
{
    if (!ex || !job || !job->run)
        return sw_error_set(err, SW_EINVAL, "executor: NULL executor, job or run callback");
    pthread_mutex_lock(&ex->lock);
    if (ex->stopping) {
        pthread_mutex_unlock(&ex->lock);
        return sw_error_set(err, SW_ESTATE, "executor: shut down, no new jobs");
    }
    int rc = ensure_worker(ex, 1);
    if (rc != 0) {
        pthread_mutex_unlock(&ex->lock);
        return sw_error_set_errno(err, SW_EIO, rc, "executor: cannot start a thread: %s",
                                  strerror(rc));
    }
    queue_push(&ex->pending, job);
    ex->queued++;
    ex->outstanding++;
    pthread_mutex_unlock(&ex->lock);
    /* After the unlock: the woken worker finds the lock free (it would
     * otherwise wake only to wait for the submitter to let go of it). The
     * executor outlives every submitter (sw_executor_free is after them). */
    pthread_cond_signal(&ex->work_ready);
    return SW_OK;
}

sw_status sw_executor_post_completed(sw_executor *ex, sw_job *job, sw_error *err)
{
    if (!ex || !job)
        return sw_error_set(err, SW_EINVAL, "executor: NULL executor or job");
    pthread_mutex_lock(&ex->lock);
    if (ex->stopping) {
        pthread_mutex_unlock(&ex->lock);
        return sw_error_set(err, SW_ESTATE, "executor: shut down, no new completions");
    }
    queue_push(&ex->done, job);
    ex->outstanding++;
    pthread_cond_signal(&ex->done_ready);
    pthread_mutex_unlock(&ex->lock);
    return SW_OK;
}

sw_job *sw_executor_next_completed(sw_executor *ex, int block)
{
    pthread_mutex_lock(&ex->lock);
    while (block && !ex->done.head && !drained(ex))
        pthread_cond_wait(&ex->done_ready, &ex->lock);
    sw_job *job = queue_pop(&ex->done);
    if (job)
        ex->outstanding--;
    pthread_mutex_unlock(&ex->lock);
    return job;
}

long sw_executor_outstanding(sw_executor *ex)
{
    pthread_mutex_lock(&ex->lock);
    long n = ex->outstanding;
    pthread_mutex_unlock(&ex->lock);
    return n;
}

/* Without the lock: `started` cannot change once `stopping` is set, and
 * workers need the lock to finish their jobs. */
static void join_workers(sw_executor *ex, int count)
{
    for (int i = 0; i < count; i++)
        pthread_join(ex->threads[i], NULL);
}

void sw_executor_shutdown(sw_executor *ex)
{
    pthread_mutex_lock(&ex->lock);
    ex->stopping = 1;
    pthread_cond_broadcast(&ex->work_ready);
    pthread_cond_broadcast(&ex->done_ready);
    if (ex->joining) {
        /* Idempotent: a concurrent call returns only once the joins are done. */
        while (!ex->joined)
            pthread_cond_wait(&ex->done_ready, &ex->lock);
        pthread_mutex_unlock(&ex->lock);
        return;
    }
    ex->joining = 1;
    int count = ex->started;
    pthread_mutex_unlock(&ex->lock);
    join_workers(ex, count);
    pthread_mutex_lock(&ex->lock);
    ex->joined = 1;
    pthread_cond_broadcast(&ex->done_ready);
    pthread_mutex_unlock(&ex->lock);
}

void sw_executor_destroy(sw_executor *ex)
{
    if (!ex)
        return;
    /* A caller that forgot shutdown must not leave threads on freed memory. */
    sw_executor_shutdown(ex);
    pthread_cond_destroy(&ex->done_ready);
    pthread_cond_destroy(&ex->work_ready);
    pthread_mutex_destroy(&ex->lock);
    sw_free(ex);
}

/* ---- one-shot completion ------------------------------------------------ */

struct sw_completion {
    pthread_mutex_t lock;
    pthread_cond_t cond; /* on CLOCK_MONOTONIC: a timeout survives clock changes */
    int done;
};

static int init_monotonic_cond(pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    if (pthread_condattr_init(&attr) != 0)
        return -1;
    int rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (rc == 0)
        rc = pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
    return rc == 0 ? 0 : -1;
}

sw_completion *sw_completion_new(void)
{
    sw_completion *c = sw_calloc(1, sizeof *c);
    if (!c)
        return NULL;
    if (pthread_mutex_init(&c->lock, NULL) != 0) {
        sw_free(c);
        return NULL;
    }
    if (init_monotonic_cond(&c->cond) != 0) {
        pthread_mutex_destroy(&c->lock);
        sw_free(c);
        return NULL;
    }
    return c;
}

void sw_completion_free(sw_completion *c)
{
    if (!c)
        return;
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->lock);
    sw_free(c);
}

int sw_completion_signal(sw_completion *c)
{
    pthread_mutex_lock(&c->lock);
    int first = !c->done;
    c->done = 1;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    return first;
}

int sw_completion_is_done(sw_completion *c)
{
    pthread_mutex_lock(&c->lock);
    int done = c->done;
    pthread_mutex_unlock(&c->lock);
    return done;
}

void sw_completion_wait(sw_completion *c)
{
    pthread_mutex_lock(&c->lock);
    while (!c->done)
        pthread_cond_wait(&c->cond, &c->lock);
    pthread_mutex_unlock(&c->lock);
}

/* About 34 years: long enough to mean "forever", small enough that adding
 * it to the monotonic clock (time since boot) cannot overflow time_t. */
#define MAX_WAIT_SEC (1LL << 30)

/* Now plus `ns` on the monotonic clock; a non-positive `ns` is now. */
static struct timespec deadline_after(long long ns)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (ns <= 0)
        return t;
    long long sec = ns / 1000000000LL;
    long nsec = t.tv_nsec + (long)(ns % 1000000000LL);
    if (sec >= MAX_WAIT_SEC)
        sec = MAX_WAIT_SEC;
    if (nsec >= 1000000000L) {
        nsec -= 1000000000L;
        sec++;
    }
    t.tv_sec += (time_t)sec;
    t.tv_nsec = nsec;
    return t;
}

int sw_completion_wait_for(sw_completion *c, long long timeout_ns)
{
    struct timespec deadline = deadline_after(timeout_ns);
    pthread_mutex_lock(&c->lock);
    int rc = 0;
    /* 0 is a wakeup (maybe spurious): look again; anything else is
     * ETIMEDOUT, or an error that waiting longer would not cure. */
    while (!c->done && rc == 0)
        rc = pthread_cond_timedwait(&c->cond, &c->lock, &deadline);
    int done = c->done;
    pthread_mutex_unlock(&c->lock);
    return done;
}

void sw_completion_reset_after_fork(sw_completion *c)
{
    /* The child has one thread: nobody else can be inside these. */
    pthread_mutex_init(&c->lock, NULL);
    init_monotonic_cond(&c->cond);
}
