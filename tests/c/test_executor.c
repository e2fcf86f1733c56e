/* The worker pool and one-shot completions: every job runs once and is
 * popped once under concurrent submitters and poppers, the thread bound and
 * lazy start, the pool size from the environment, shutdown semantics, the
 * thread-start and allocation failure paths, and completion waits. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "strideweave/alloc.h"
#include "strideweave/clock.h"
#include "strideweave/executor.h"
#include "strideweave/testing.h"

/* ---- helpers ------------------------------------------------------------ */

/* A gate jobs can block on until the test opens it. */
typedef struct gate {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int open;
    int waiting; /* jobs blocked on it right now */
} gate;

static void gate_init(gate *g)
{
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->cond, NULL);
    g->open = 0;
    g->waiting = 0;
}

static void gate_destroy(gate *g)
{
    pthread_cond_destroy(&g->cond);
    pthread_mutex_destroy(&g->lock);
}

static void gate_pass(gate *g)
{
    pthread_mutex_lock(&g->lock);
    g->waiting++;
    pthread_cond_broadcast(&g->cond);
    while (!g->open)
        pthread_cond_wait(&g->cond, &g->lock);
    g->waiting--;
    pthread_mutex_unlock(&g->lock);
}

static void gate_open(gate *g)
{
    pthread_mutex_lock(&g->lock);
    g->open = 1;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

/* Wait until `n` jobs are blocked on the gate. */
static void gate_await(gate *g, int n)
{
    pthread_mutex_lock(&g->lock);
    while (g->waiting < n)
        pthread_cond_wait(&g->cond, &g->lock);
    pthread_mutex_unlock(&g->lock);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

typedef struct test_job {
    sw_job base; /* first: the executor hands back this pointer */
    int id;
    atomic_int runs;
    atomic_int popped;
    gate *gate;                /* block on it when set */
    atomic_int *order_counter; /* record the start order when set */
    int start_rank;
} test_job;

static void test_job_run(sw_job *j)
{
    test_job *t = (test_job *)j;
    if (t->order_counter)
        t->start_rank = atomic_fetch_add(t->order_counter, 1);
    if (t->gate)
        gate_pass(t->gate);
    atomic_fetch_add(&t->runs, 1);
}

static void test_job_init(test_job *t, int id, gate *g)
{
    memset(t, 0, sizeof *t);
    t->base.run = test_job_run;
    t->id = id;
    atomic_init(&t->runs, 0);
    atomic_init(&t->popped, 0);
    t->gate = g;
}

static sw_executor *make(int nthreads)
{
    sw_executor *ex = NULL;
    sw_error err;
    CHECK_EQ_I64(sw_executor_create(nthreads, &ex, &err), SW_OK);
    return ex;
}

static int default_threads(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 1)
        return 1;
    return cpus < 4 ? (int)cpus : 4;
}

/* ---- pool size ---------------------------------------------------------- */

static int threads_with_env(const char *value, int nthreads)
{
    if (value)
        setenv(SW_EXECUTOR_THREADS_ENV, value, 1);
    else
        unsetenv(SW_EXECUTOR_THREADS_ENV);
    sw_executor *ex = make(nthreads);
    int n = ex ? sw_executor_max_threads(ex) : -1;
    if (ex)
        CHECK_EQ_I64(sw_executor_started_threads(ex), 0);
    sw_executor_destroy(ex);
    unsetenv(SW_EXECUTOR_THREADS_ENV);
    return n;
}

static void test_pool_size(void)
{
    int dflt = default_threads();
    CHECK(dflt >= 1 && dflt <= 4);
    CHECK_EQ_I64(threads_with_env(NULL, 0), dflt);
    CHECK_EQ_I64(threads_with_env(NULL, -3), dflt);
    CHECK_EQ_I64(threads_with_env("3", 0), 3);
    CHECK_EQ_I64(threads_with_env("1", -1), 1);
    CHECK_EQ_I64(threads_with_env("64", 0), 64);
    CHECK_EQ_I64(threads_with_env("+7", 0), 7);
    /* invalid or out of range: the default */
    CHECK_EQ_I64(threads_with_env("0", 0), dflt);
    CHECK_EQ_I64(threads_with_env("65", 0), dflt);
    CHECK_EQ_I64(threads_with_env("-2", 0), dflt);
    CHECK_EQ_I64(threads_with_env("", 0), dflt);
    CHECK_EQ_I64(threads_with_env("abc", 0), dflt);
    CHECK_EQ_I64(threads_with_env("3x", 0), dflt);
    CHECK_EQ_I64(threads_with_env("3 ", 0), dflt);
    CHECK_EQ_I64(threads_with_env("99999999999999999999999", 0), dflt);
    /* an explicit count wins over the environment, clamped to the bound */
    CHECK_EQ_I64(threads_with_env("3", 2), 2);
    CHECK_EQ_I64(threads_with_env(NULL, 1), 1);
    CHECK_EQ_I64(threads_with_env(NULL, SW_EXECUTOR_MAX_THREADS), SW_EXECUTOR_MAX_THREADS);
    CHECK_EQ_I64(threads_with_env(NULL, 1000), SW_EXECUTOR_MAX_THREADS);

    sw_error err;
    CHECK_EQ_I64(sw_executor_create(2, NULL, &err), SW_EINVAL);
}

/* ---- lazy start and the bound ------------------------------------------- */

static void test_lazy_start_and_bound(void)
{
    sw_executor *ex = make(3);
    CHECK_EQ_I64(sw_executor_started_threads(ex), 0);
    CHECK_EQ_I64(sw_executor_outstanding(ex), 0);
    CHECK(sw_executor_next_completed(ex, 0) == NULL);

    gate g;
    gate_init(&g);
    test_job jobs[8];
    for (int i = 0; i < 8; i++)
        test_job_init(&jobs[i], i, &g);
    CHECK_EQ_I64(sw_executor_submit(ex, &jobs[0].base, NULL), SW_OK);
    CHECK_EQ_I64(sw_executor_started_threads(ex), 1);
    /* every started thread is busy: each blocked job brings one more */
    CHECK_EQ_I64(sw_executor_submit(ex, &jobs[1].base, NULL), SW_OK);
    CHECK_EQ_I64(sw_executor_started_threads(ex), 2);
    CHECK_EQ_I64(sw_executor_submit(ex, &jobs[2].base, NULL), SW_OK);
    CHECK_EQ_I64(sw_executor_started_threads(ex), 3);
    gate_await(&g, 3);
    for (int i = 3; i < 8; i++)
        CHECK_EQ_I64(sw_executor_submit(ex, &jobs[i].base, NULL), SW_OK);
    CHECK_EQ_I64(sw_executor_started_threads(ex), 3);
    CHECK_EQ_I64(sw_executor_outstanding(ex), 8);
    CHECK(sw_executor_next_completed(ex, 0) == NULL);

    gate_open(&g);
    for (int i = 0; i < 8; i++) {
        test_job *t = (test_job *)sw_executor_next_completed(ex, 1);
        CHECK(t != NULL);
        if (t)
            atomic_fetch_add(&t->popped, 1);
        CHECK_EQ_I64(sw_executor_outstanding(ex), 7 - i);
    }
    for (int i = 0; i < 8; i++) {
        CHECK_EQ_I64(atomic_load(&jobs[i].runs), 1);
        CHECK_EQ_I64(atomic_load(&jobs[i].popped), 1);
    }
    CHECK(sw_executor_next_completed(ex, 0) == NULL);
    CHECK_EQ_I64(sw_executor_started_threads(ex), 3);
    sw_executor_shutdown(ex);
    sw_executor_destroy(ex);
    gate_destroy(&g);
}

/* One job at a time, each popped before the next: one idle thread always
 * absorbs the next job, so no second thread starts. */
static void test_sequential_uses_one_thread(void)
{
    sw_executor *ex = make(4);
    for (int i = 0; i < 20; i++) {
        test_job t;
        test_job_init(&t, i, NULL);
        CHECK_EQ_I64(sw_executor_submit(ex, &t.base, NULL), SW_OK);
        CHECK(sw_executor_next_completed(ex, 1) == &t.base);
        CHECK_EQ_I64(atomic_load(&t.runs), 1);
    }
    CHECK_EQ_I64(sw_executor_started_threads(ex), 1);
    sw_executor_destroy(ex); /* without shutdown: destroy shuts down first */
}

/* With one thread, jobs start and complete in submission order. */
static void test_fifo(void)
{
    enum { N = 50 };
    sw_executor *ex = make(1);
    gate g;
    gate_init(&g);
    atomic_int order;
    atomic_init(&order, 0);
    test_job jobs[N];
    for (int i = 0; i < N; i++) {
        test_job_init(&jobs[i], i, i == 0 ? &g : NULL);
        jobs[i].order_counter = &order;
        CHECK_EQ_I64(sw_executor_submit(ex, &jobs[i].base, NULL), SW_OK);
    }
    CHECK_EQ_I64(sw_executor_started_threads(ex), 1);
    gate_open(&g);
    for (int i = 0; i < N; i++) {
        sw_job *j = sw_executor_next_completed(ex, 1);
        CHECK(j == &jobs[i].base);
        CHECK_EQ_I64(jobs[i].start_rank, i);
    }
    sw_executor_shutdown(ex);
    sw_executor_destroy(ex);
    gate_destroy(&g);
}

/* ---- many submitters, many poppers -------------------------------------- */

enum { SUBMITTERS = 4, PER_SUBMITTER = 2500, POPPERS = 3 };

typedef struct stress {
    sw_executor *ex;
    test_job *jobs;
    int first;
    atomic_long popped_total;
    atomic_int submit_failures;
    atomic_int double_pops;
} stress;

typedef struct stress_arg {
    stress *s;
    int first;
} stress_arg;

static void *submitter(void *arg)
{
    stress_arg *a = arg;
    for (int i = 0; i < PER_SUBMITTER; i++) {
        test_job *t = &a->s->jobs[a->first + i];
        if (sw_executor_submit(a->s->ex, &t->base, NULL) != SW_OK)
            atomic_fetch_add(&a->s->submit_failures, 1);
    }
    return NULL;
}

/* Pops until shutdown has drained the pool. */
static void *popper(void *arg)
{
    stress *s = arg;
    sw_job *j;
    while ((j = sw_executor_next_completed(s->ex, 1)) != NULL) {
        test_job *t = (test_job *)j;
        if (atomic_fetch_add(&t->popped, 1) != 0)
            atomic_fetch_add(&s->double_pops, 1);
        atomic_fetch_add(&s->popped_total, 1);
    }
    return NULL;
}

static void test_concurrent(void)
{
    enum { N = SUBMITTERS * PER_SUBMITTER };
    stress s;
    memset(&s, 0, sizeof s);
    s.ex = make(4);
    s.jobs = calloc(N, sizeof *s.jobs);
    atomic_init(&s.popped_total, 0);
    atomic_init(&s.submit_failures, 0);
    atomic_init(&s.double_pops, 0);
    for (int i = 0; i < N; i++)
        test_job_init(&s.jobs[i], i, NULL);

    pthread_t subs[SUBMITTERS], pops[POPPERS];
    stress_arg args[SUBMITTERS];
    for (int i = 0; i < POPPERS; i++)
        CHECK(pthread_create(&pops[i], NULL, popper, &s) == 0);
    for (int i = 0; i < SUBMITTERS; i++) {
        args[i].s = &s;
        args[i].first = i * PER_SUBMITTER;
        CHECK(pthread_create(&subs[i], NULL, submitter, &args[i]) == 0);
    }
    for (int i = 0; i < SUBMITTERS; i++)
        pthread_join(subs[i], NULL);
    CHECK(sw_executor_started_threads(s.ex) <= 4);
    sw_executor_shutdown(s.ex);
    for (int i = 0; i < POPPERS; i++)
        pthread_join(pops[i], NULL);

    CHECK_EQ_I64(atomic_load(&s.submit_failures), 0);
    CHECK_EQ_I64(atomic_load(&s.double_pops), 0);
    CHECK_EQ_I64(atomic_load(&s.popped_total), N);
    int bad_runs = 0, bad_pops = 0;
    for (int i = 0; i < N; i++) {
        bad_runs += atomic_load(&s.jobs[i].runs) != 1;
        bad_pops += atomic_load(&s.jobs[i].popped) != 1;
    }
    CHECK_EQ_I64(bad_runs, 0);
    CHECK_EQ_I64(bad_pops, 0);
    CHECK_EQ_I64(sw_executor_outstanding(s.ex), 0);
    CHECK(sw_executor_started_threads(s.ex) >= 1);
    CHECK(sw_executor_started_threads(s.ex) <= 4);
    sw_executor_destroy(s.ex);
    free(s.jobs);
}

/* ---- a job that submits a job ------------------------------------------- */

typedef struct chain_job {
    sw_job base;
    sw_executor *ex;
    int depth;
    sw_status child_status;
    struct chain_job *child;
} chain_job;

static void chain_run(sw_job *j)
{
    chain_job *c = (chain_job *)j;
    if (c->child)
        c->child_status = sw_executor_submit(c->ex, &c->child->base, NULL);
}

static void test_submit_from_job(void)
{
    sw_executor *ex = make(2);
    chain_job a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    a.base.run = b.base.run = chain_run;
    a.ex = b.ex = ex;
    a.child = &b;
    a.child_status = SW_EINVAL;
    CHECK_EQ_I64(sw_executor_submit(ex, &a.base, NULL), SW_OK);
    sw_job *first = sw_executor_next_completed(ex, 1);
    sw_job *second = sw_executor_next_completed(ex, 1);
    CHECK(first != NULL && second != NULL && first != second);
    CHECK_EQ_I64(a.child_status, SW_OK);
    CHECK_EQ_I64(sw_executor_outstanding(ex), 0);
    sw_executor_shutdown(ex);
    sw_executor_destroy(ex);
}

/* ---- shutdown ----------------------------------------------------------- */

typedef struct shutdown_arg {
    sw_executor *ex;
    atomic_int finished;
} shutdown_arg;

static void *shutdown_thread(void *arg)
{
    shutdown_arg *a = arg;
    sw_executor_shutdown(a->ex);
    atomic_store(&a->finished, 1);
    return NULL;
}

/* Shutdown waits for the running job and the queued ones, which still reach
 * the completion queue; new submits are refused from then on. */
static void test_shutdown_delivers_queued(void)
{
    enum { N = 6 };
    sw_executor *ex = make(1);
    gate g;
    gate_init(&g);
    test_job jobs[N];
    for (int i = 0; i < N; i++) {
        test_job_init(&jobs[i], i, i == 0 ? &g : NULL);
        CHECK_EQ_I64(sw_executor_submit(ex, &jobs[i].base, NULL), SW_OK);
    }
    gate_await(&g, 1);
    shutdown_arg a = {ex, 0};
    atomic_init(&a.finished, 0);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, shutdown_thread, &a) == 0);
    /* Once shutdown has begun, submit is refused; before that a probe job
     * would be accepted, so probe with jobs that are counted as extras. */
    test_job extra[64];
    int accepted = 0;
    sw_error err;
    sw_status st = SW_OK;
    while (accepted < 64) {
        test_job_init(&extra[accepted], 100 + accepted, NULL);
        st = sw_executor_submit(ex, &extra[accepted].base, &err);
        if (st != SW_OK)
            break;
        accepted++;
        sleep_ms(1);
    }
    CHECK_EQ_I64(st, SW_ESTATE);
    CHECK(strstr(err.msg, "shut down") != NULL);
    sleep_ms(20);
    CHECK_EQ_I64(atomic_load(&a.finished), 0); /* still joining: job 0 blocks */
    gate_open(&g);
    pthread_join(th, NULL);
    CHECK_EQ_I64(atomic_load(&a.finished), 1);
    CHECK_EQ_I64(sw_executor_outstanding(ex), N + accepted);
    for (int i = 0; i < N; i++)
        CHECK(sw_executor_next_completed(ex, 0) == &jobs[i].base);
    for (int i = 0; i < accepted; i++)
        CHECK(sw_executor_next_completed(ex, 1) == &extra[i].base);
    /* drained: a blocking pop returns at once */
    CHECK(sw_executor_next_completed(ex, 1) == NULL);
    CHECK(sw_executor_next_completed(ex, 0) == NULL);
    CHECK_EQ_I64(sw_executor_outstanding(ex), 0);
    test_job late;
    test_job_init(&late, 999, NULL);
    CHECK_EQ_I64(sw_executor_submit(ex, &late.base, &err), SW_ESTATE);
    CHECK_EQ_I64(err.code, SW_ESTATE);
    CHECK_EQ_I64(atomic_load(&late.runs), 0);
    CHECK_EQ_I64(sw_executor_outstanding(ex), 0);
    sw_executor_shutdown(ex); /* idempotent */
    sw_executor_destroy(ex);
    gate_destroy(&g);
}

typedef struct pop_arg {
    sw_executor *ex;
    sw_job *got;
    atomic_int returned;
} pop_arg;

static void *blocking_pop(void *arg)
{
    pop_arg *p = arg;
    p->got = sw_executor_next_completed(p->ex, 1);
    atomic_store(&p->returned, 1);
    return NULL;
}

/* Poppers blocked on an idle pool (or one never started) wake up with
 * NULL when shutdown begins. */
static void test_shutdown_wakes_poppers(int submit_first)
{
    enum { P = 3 };
    sw_executor *ex = make(2);
    if (submit_first) {
        test_job t;
        test_job_init(&t, 0, NULL);
        CHECK_EQ_I64(sw_executor_submit(ex, &t.base, NULL), SW_OK);
        CHECK(sw_executor_next_completed(ex, 1) == &t.base);
    }
    pop_arg args[P];
    pthread_t th[P];
    for (int i = 0; i < P; i++) {
        args[i].ex = ex;
        args[i].got = (sw_job *)&args[i];
        atomic_init(&args[i].returned, 0);
        CHECK(pthread_create(&th[i], NULL, blocking_pop, &args[i]) == 0);
    }
    sleep_ms(30);
    for (int i = 0; i < P; i++)
        CHECK_EQ_I64(atomic_load(&args[i].returned), 0);
    sw_executor_shutdown(ex);
    for (int i = 0; i < P; i++) {
        pthread_join(th[i], NULL);
        CHECK(args[i].got == NULL);
    }
    CHECK_EQ_I64(sw_executor_started_threads(ex), submit_first ? 1 : 0);
    sw_executor_destroy(ex);
}

/* Poppers blocked while the last jobs run: each job reaches exactly one
 * of them and the rest return NULL once the pool is drained. */
static void test_shutdown_splits_last_jobs(void)
{
    enum { P = 4, J = 2 };
    sw_executor *ex = make(2);
    gate g;
    gate_init(&g);
    test_job jobs[J];
    for (int i = 0; i < J; i++) {
        test_job_init(&jobs[i], i, &g);
        CHECK_EQ_I64(sw_executor_submit(ex, &jobs[i].base, NULL), SW_OK);
    }
    gate_await(&g, J);
    pop_arg args[P];
    pthread_t th[P];
    for (int i = 0; i < P; i++) {
        args[i].ex = ex;
        args[i].got = NULL;
        atomic_init(&args[i].returned, 0);
        CHECK(pthread_create(&th[i], NULL, blocking_pop, &args[i]) == 0);
    }
    shutdown_arg a = {ex, 0};
    atomic_init(&a.finished, 0);
    pthread_t sh;
    CHECK(pthread_create(&sh, NULL, shutdown_thread, &a) == 0);
    sleep_ms(20);
    gate_open(&g);
    pthread_join(sh, NULL);
    int got = 0;
    for (int i = 0; i < P; i++) {
        pthread_join(th[i], NULL);
        if (args[i].got) {
            got++;
            atomic_fetch_add(&((test_job *)args[i].got)->popped, 1);
        }
    }
    CHECK_EQ_I64(got, J);
    for (int i = 0; i < J; i++)
        CHECK_EQ_I64(atomic_load(&jobs[i].popped), 1);
    CHECK_EQ_I64(sw_executor_outstanding(ex), 0);
    sw_executor_destroy(ex);
    gate_destroy(&g);
}

/* Two concurrent shutdowns: both return only once the workers are joined. */
static void test_concurrent_shutdown(void)
{
    sw_executor *ex = make(1);
    gate g;
    gate_init(&g);
    test_job t;
    test_job_init(&t, 0, &g);
    CHECK_EQ_I64(sw_executor_submit(ex, &t.base, NULL), SW_OK);
    gate_await(&g, 1);
    shutdown_arg a = {ex, 0}, b = {ex, 0};
    atomic_init(&a.finished, 0);
    atomic_init(&b.finished, 0);
    pthread_t ta, tb;
    CHECK(pthread_create(&ta, NULL, shutdown_thread, &a) == 0);
    CHECK(pthread_create(&tb, NULL, shutdown_thread, &b) == 0);
    sleep_ms(20);
    CHECK_EQ_I64(atomic_load(&a.finished) + atomic_load(&b.finished), 0);
    gate_open(&g);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK_EQ_I64(atomic_load(&t.runs), 1);
    CHECK(sw_executor_next_completed(ex, 1) == &t.base);
    CHECK(sw_executor_next_completed(ex, 1) == NULL);
    sw_executor_destroy(ex);
    gate_destroy(&g);
}

static void test_bad_submit(void)
{
    sw_executor *ex = make(1);
    sw_error err;
    test_job t;
    test_job_init(&t, 0, NULL);
    t.base.run = NULL;
    CHECK_EQ_I64(sw_executor_submit(ex, &t.base, &err), SW_EINVAL);
    CHECK_EQ_I64(sw_executor_submit(ex, NULL, &err), SW_EINVAL);
    CHECK_EQ_I64(sw_executor_submit(NULL, &t.base, &err), SW_EINVAL);
    CHECK_EQ_I64(sw_executor_started_threads(ex), 0);
    CHECK_EQ_I64(sw_executor_outstanding(ex), 0);
    sw_executor_shutdown(ex);
    sw_executor_destroy(ex);
    sw_executor_destroy(NULL);
}

/* A job finished elsewhere (a provider completion) reaches the one popper
 * without running on the pool, in order with pool jobs; refused once
 * shutdown began. */
static void test_post_completed(void)
{
    sw_executor *ex = make(1);
    sw_error err;
    test_job posted, pooled, late;
    test_job_init(&posted, 1, NULL);
    test_job_init(&pooled, 2, NULL);
    test_job_init(&late, 3, NULL);
    CHECK_EQ_I64(sw_executor_post_completed(ex, &posted.base, &err), SW_OK);
    CHECK_EQ_I64(sw_executor_started_threads(ex), 0);
    CHECK_EQ_I64(sw_executor_outstanding(ex), 1);
    CHECK(sw_executor_next_completed(ex, 1) == &posted.base);
    CHECK_EQ_I64(atomic_load(&posted.runs), 0);
    CHECK_EQ_I64(sw_executor_submit(ex, &pooled.base, &err), SW_OK);
    CHECK(sw_executor_next_completed(ex, 1) == &pooled.base);
    CHECK_EQ_I64(sw_executor_post_completed(NULL, &late.base, &err), SW_EINVAL);
    CHECK_EQ_I64(sw_executor_post_completed(ex, NULL, &err), SW_EINVAL);
    sw_executor_shutdown(ex);
    CHECK_EQ_I64(sw_executor_post_completed(ex, &late.base, &err), SW_ESTATE);
    CHECK(sw_executor_next_completed(ex, 1) == NULL);
    CHECK_EQ_I64(sw_executor_outstanding(ex), 0);
    sw_executor_destroy(ex);
}

/* ---- injected failures -------------------------------------------------- */

static void test_faults(void)
{
    if (!sw_fault_enabled())
        return;
    sw_error err;
    sw_executor *ex = NULL;
    CHECK_EQ_I64(sw_fault_arm("alloc", 0, 1), SW_OK);
    CHECK_EQ_I64(sw_executor_create(2, &ex, &err), SW_ENOMEM);
    CHECK(ex == NULL);
    CHECK_EQ_I64(sw_fault_arm("alloc", 0, 1), SW_OK);
    CHECK(sw_completion_new() == NULL);
    sw_fault_clear();

    /* no thread at all can start: the job is refused, not queued */
    ex = make(2);
    test_job t;
    test_job_init(&t, 0, NULL);
    CHECK_EQ_I64(sw_fault_arm("thread", 0, -1), SW_OK);
    CHECK_EQ_I64(sw_executor_submit(ex, &t.base, &err), SW_EIO);
    CHECK_EQ_I64(err.sys_errno, EAGAIN);
    CHECK_EQ_I64(sw_executor_started_threads(ex), 0);
    CHECK_EQ_I64(sw_executor_outstanding(ex), 0);
    CHECK(sw_executor_next_completed(ex, 0) == NULL);
    sw_fault_clear();
    CHECK_EQ_I64(sw_executor_submit(ex, &t.base, &err), SW_OK);
    CHECK(sw_executor_next_completed(ex, 1) == &t.base);
    CHECK_EQ_I64(atomic_load(&t.runs), 1);
    sw_executor_destroy(ex);

    /* an extra thread that cannot start is not an error: the one running
     * thread works through the queue */
    ex = make(4);
    gate g;
    gate_init(&g);
    test_job jobs[5];
    CHECK_EQ_I64(sw_fault_arm("thread", 1, -1), SW_OK);
    for (int i = 0; i < 5; i++) {
        test_job_init(&jobs[i], i, i == 0 ? &g : NULL);
        CHECK_EQ_I64(sw_executor_submit(ex, &jobs[i].base, &err), SW_OK);
    }
    sw_fault_clear();
    CHECK_EQ_I64(sw_executor_started_threads(ex), 1);
    gate_open(&g);
    for (int i = 0; i < 5; i++)
        CHECK(sw_executor_next_completed(ex, 1) == &jobs[i].base);
    sw_executor_destroy(ex);
    gate_destroy(&g);
}

/* ---- completions -------------------------------------------------------- */

typedef struct completion_arg {
    sw_completion *c;
    atomic_int *firsts;
    atomic_int *woken;
    long long timeout_ns; /* < 0: wait forever */
    int result;
} completion_arg;

static void *signaller(void *arg)
{
    completion_arg *a = arg;
    atomic_fetch_add(a->firsts, sw_completion_signal(a->c));
    return NULL;
}

static void *waiter(void *arg)
{
    completion_arg *a = arg;
    if (a->timeout_ns < 0) {
        sw_completion_wait(a->c);
        a->result = 1;
    } else {
        a->result = sw_completion_wait_for(a->c, a->timeout_ns);
    }
    atomic_fetch_add(a->woken, 1);
    return NULL;
}

static void test_completion_basics(void)
{
    sw_completion *c = sw_completion_new();
    CHECK(c != NULL);
    CHECK_EQ_I64(sw_completion_is_done(c), 0);
    CHECK_EQ_I64(sw_completion_wait_for(c, 0), 0);
    CHECK_EQ_I64(sw_completion_wait_for(c, -5), 0);
    uint64_t t0 = sw_clock_ns();
    CHECK_EQ_I64(sw_completion_wait_for(c, 30000000LL), 0); /* 30 ms */
    CHECK(sw_clock_ns() - t0 >= 30000000ULL);
    CHECK_EQ_I64(sw_completion_signal(c), 1);
    CHECK_EQ_I64(sw_completion_signal(c), 0);
    CHECK_EQ_I64(sw_completion_is_done(c), 1);
    sw_completion_wait(c);
    CHECK_EQ_I64(sw_completion_wait_for(c, 0), 1);
    CHECK_EQ_I64(sw_completion_wait_for(c, -1), 1);
    CHECK_EQ_I64(sw_completion_wait_for(c, 1000000000LL), 1);
    /* an absurd timeout must not overflow the deadline */
    CHECK_EQ_I64(sw_completion_wait_for(c, 0x7fffffffffffffffLL), 1);
    sw_completion_free(c);
    sw_completion_free(NULL);
}

static void test_completion_threads(void)
{
    enum { SIG = 8, WAIT = 6 };
    sw_completion *c = sw_completion_new();
    atomic_int firsts, woken;
    atomic_init(&firsts, 0);
    atomic_init(&woken, 0);
    completion_arg wa[WAIT], sa[SIG];
    pthread_t wt[WAIT], st[SIG];
    for (int i = 0; i < WAIT; i++) {
        /* forever, a long timeout, and a huge one: all must wake */
        long long timeouts[3] = {-1, 10000000000LL, 0x7fffffffffffffffLL};
        wa[i] = (completion_arg){c, &firsts, &woken, timeouts[i % 3], -1};
        CHECK(pthread_create(&wt[i], NULL, waiter, &wa[i]) == 0);
    }
    sleep_ms(30);
    CHECK_EQ_I64(atomic_load(&woken), 0);
    for (int i = 0; i < SIG; i++) {
        sa[i] = (completion_arg){c, &firsts, &woken, 0, 0};
        CHECK(pthread_create(&st[i], NULL, signaller, &sa[i]) == 0);
    }
    for (int i = 0; i < SIG; i++)
        pthread_join(st[i], NULL);
    for (int i = 0; i < WAIT; i++) {
        pthread_join(wt[i], NULL);
        CHECK_EQ_I64(wa[i].result, 1);
    }
    CHECK_EQ_I64(atomic_load(&firsts), 1);
    CHECK_EQ_I64(atomic_load(&woken), WAIT);
    sw_completion_free(c);

    /* several short timeouts elapse together without a signal */
    c = sw_completion_new();
    for (int i = 0; i < WAIT; i++) {
        wa[i] = (completion_arg){c, &firsts, &woken, 20000000LL, -1};
        CHECK(pthread_create(&wt[i], NULL, waiter, &wa[i]) == 0);
    }
    for (int i = 0; i < WAIT; i++) {
        pthread_join(wt[i], NULL);
        CHECK_EQ_I64(wa[i].result, 0);
    }
    CHECK_EQ_I64(sw_completion_is_done(c), 0);
    sw_completion_free(c);
}

/* A job signals its completion; the submitter waits on it. */
typedef struct signalling_job {
    sw_job base;
    sw_completion *done;
    int value;
} signalling_job;

static void signalling_run(sw_job *j)
{
    signalling_job *s = (signalling_job *)j;
    s->value = 42;
    sw_completion_signal(s->done);
}

static void test_job_with_completion(void)
{
    sw_executor *ex = make(2);
    signalling_job s = {{signalling_run, NULL}, sw_completion_new(), 0};
    CHECK_EQ_I64(sw_executor_submit(ex, &s.base, NULL), SW_OK);
    CHECK_EQ_I64(sw_completion_wait_for(s.done, 10000000000LL), 1);
    CHECK_EQ_I64(s.value, 42);
    CHECK(sw_executor_next_completed(ex, 1) == &s.base);
    sw_completion_free(s.done);
    sw_executor_shutdown(ex);
    sw_executor_destroy(ex);
}

int main(void)
{
    int64_t live = sw_alloc_live_bytes();
    test_pool_size();
    test_lazy_start_and_bound();
    test_sequential_uses_one_thread();
    test_fifo();
    test_concurrent();
    test_submit_from_job();
    test_shutdown_delivers_queued();
    test_shutdown_wakes_poppers(0);
    test_shutdown_wakes_poppers(1);
    test_shutdown_splits_last_jobs();
    test_concurrent_shutdown();
    test_bad_submit();
    test_post_completed();
    test_faults();
    test_completion_basics();
    test_completion_threads();
    test_job_with_completion();
    CHECK_EQ_I64(sw_alloc_live_bytes(), live);
    return check_report("executor");
}
