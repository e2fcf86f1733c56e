/* The pool's managed blocking (executor_internal.h, issue 19): a job that
 * blocks frees its place for a queued job, on a thread started for it; no
 * more than the pool's bound of jobs run unblocked at once; the extra
 * threads are capped. */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "check.h"
#include "executor_internal.h"
#include "strideweave/executor.h"

/* A flag a job waits on, at most `seconds` (a missing feature fails the
 * check instead of hanging the test). */
typedef struct flag {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int set;
} flag;

static void flag_init(flag *f)
{
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->cond, NULL);
    f->set = 0;
}

static void flag_set(flag *f)
{
    pthread_mutex_lock(&f->lock);
    f->set = 1;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->lock);
}

static int flag_wait(flag *f, int seconds)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += seconds;
    pthread_mutex_lock(&f->lock);
    while (!f->set && pthread_cond_timedwait(&f->cond, &f->lock, &until) == 0)
        ;
    int set = f->set;
    pthread_mutex_unlock(&f->lock);
    return set;
}

typedef struct task {
    sw_job job; /* first */
    flag *wait_on; /* NULL: a plain job */
    flag *set_after;
    int blocks; /* waits inside sw_executor_blocking_begin/end */
    int saw_flag;
} task;

static _Atomic int active_unblocked, most_unblocked, blocked_now;

static void note_unblocked(int delta)
{
    int now = atomic_fetch_add(&active_unblocked, delta) + delta;
    int most = atomic_load(&most_unblocked);
    while (now > most && !atomic_compare_exchange_weak(&most_unblocked, &most, now))
        ;
}

static void task_run(sw_job *job)
{
    task *t = (task *)job;
    note_unblocked(1);
    if (t->blocks) {
        note_unblocked(-1);
        sw_executor_blocking_begin();
        atomic_fetch_add(&blocked_now, 1);
    }
    if (t->wait_on)
        t->saw_flag = flag_wait(t->wait_on, 10);
    else
        nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
    if (t->blocks) {
        atomic_fetch_sub(&blocked_now, 1);
        sw_executor_blocking_end();
        note_unblocked(1);
    }
    if (t->set_after)
        flag_set(t->set_after);
    note_unblocked(-1);
}

static void run_all(sw_executor *ex, task *tasks, int n)
{
    sw_error err;
    for (int i = 0; i < n; i++) {
        tasks[i].job.run = task_run;
        CHECK_EQ_I64(sw_executor_submit(ex, &tasks[i].job, &err), SW_OK);
    }
}

static void pop_all(sw_executor *ex, int n)
{
    for (int i = 0; i < n; i++)
        CHECK(sw_executor_next_completed(ex, 1) != NULL);
}

/* A pool of one thread: the first job blocks until the second has run. It
 * runs on a thread started for it (without managed blocking the two would
 * wait for each other until the first gives up). */
static void test_blocked_job_frees_its_place(void)
{
    sw_executor *ex = NULL;
    sw_error err;
    CHECK_EQ_I64(sw_executor_create(1, &ex, &err), SW_OK);
    flag second_ran;
    flag_init(&second_ran);
    task tasks[2] = {{.wait_on = &second_ran, .blocks = 1}, {.set_after = &second_ran}};
    run_all(ex, tasks, 2);
    pop_all(ex, 2);
    CHECK(tasks[0].saw_flag);
    CHECK_EQ_I64(sw_executor_started_threads(ex), 2);
    sw_executor_destroy(ex);
}

/* While one job is blocked, the jobs queued behind it run one at a time on
 * a pool of one thread, although idle threads are there (started for
 * earlier blocked jobs): the bound holds for the jobs that are not blocked. */
static void test_bound_holds_for_running_jobs(void)
{
    sw_executor *ex = NULL;
    sw_error err;
    CHECK_EQ_I64(sw_executor_create(1, &ex, &err), SW_OK);
    flag first, second;
    flag_init(&first);
    flag_init(&second);
    task earlier[3] = {{.wait_on = &first, .blocks = 1}, {.wait_on = &first, .blocks = 1},
                       {.set_after = &first}};
    run_all(ex, earlier, 3); /* two blocked: two threads more */
    pop_all(ex, 3);
    CHECK_EQ_I64(sw_executor_started_threads(ex), 3);
    atomic_store(&most_unblocked, 0);
    task tasks[5] = {{.wait_on = &second, .blocks = 1}};
    run_all(ex, tasks, 5);
    pop_all(ex, 4); /* the four plain ones finish while the first waits */
    CHECK_EQ_I64(atomic_load(&most_unblocked), 1);
    flag_set(&second);
    pop_all(ex, 1);
    CHECK(tasks[0].saw_flag);
    sw_executor_destroy(ex);
}

/* 20 jobs that all block until released, on a pool of one thread: the pool
 * grows by at most SW_EXECUTOR_BLOCKED_EXTRA threads, and every job still
 * runs once the first ones end. */
enum { MANY = 20 };

static void test_extra_threads_are_capped(void)
{
    sw_executor *ex = NULL;
    sw_error err;
    CHECK_EQ_I64(sw_executor_create(1, &ex, &err), SW_OK);
    flag release;
    flag_init(&release);
    atomic_store(&blocked_now, 0);
    task tasks[MANY];
    for (int i = 0; i < MANY; i++)
        tasks[i] = (task){.wait_on = &release, .blocks = 1};
    run_all(ex, tasks, MANY);
    const int most = 1 + SW_EXECUTOR_BLOCKED_EXTRA;
    for (int i = 0; i < 1000 && atomic_load(&blocked_now) < most; i++)
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL); /* none beyond */
    CHECK_EQ_I64(atomic_load(&blocked_now), most);
    CHECK_EQ_I64(sw_executor_started_threads(ex), most);
    flag_set(&release);
    pop_all(ex, MANY);
    for (int i = 0; i < MANY; i++)
        CHECK(tasks[i].saw_flag);
    sw_executor_destroy(ex);
}

int main(void)
{
    test_blocked_job_frees_its_place();
    test_bound_holds_for_running_jobs();
    test_extra_threads_are_capped();
    return check_report("executor_blocking");
}
