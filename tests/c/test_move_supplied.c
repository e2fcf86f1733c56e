/* Moves whose transfer a binding supplies (move.h, "transfers a binding
 * supplies"): the core validates, marks pending, commits once and drains;
 * the binding's callback copies, on the caller or on a thread of its own,
 * and reports with sw_move_transfer_done. Carriers may be STATE_ONLY (the
 * binding tells the core the destination's size). Covers: a report inside
 * the callback commits on the caller; a report from another thread commits
 * on the completion thread; a failing transfer leaves the source live;
 * many threads with dropped handles; hold; abandon with a bounded drain;
 * exit with such moves in flight waits for them. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "helpers.h"
#include <strideweave/strideweave.h>
#include <strideweave/binding.h>

static const sw_carrier_class binding_class = {
    .name = "BindingCarrier", .flags = SW_CARRIER_CLASS_STATE_ONLY,
};

static sw_carrier *state_only(void)
{
    sw_error err;
    sw_carrier *c = NULL;
    if (sw_carrier_new(&binding_class, NULL, SW_DT_INT32, 0, &c, &err) != SW_OK)
        return NULL;
    return c;
}

/* A gate a worker waits at before it reports. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open;
} gate;

static void gate_init(gate *g)
{
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->open = 0;
}

static void gate_open(gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static void gate_pass(gate *g)
{
    pthread_mutex_lock(&g->mu);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

typedef struct ctx {
    sw_carrier *src, *dst;
    gate *gate;          /* NULL: report inside the callback */
    int here;            /* report with sw_move_transfer_done_here */
    sw_status report;    /* what the transfer reports */
    _Atomic int calls;   /* transfer calls */
    _Atomic int commits;
    pthread_t caller, transferer, committer;
    sw_status committed;
    int src_released_at_commit, pending_at_commit;
    int32_t *from, *to;  /* CPU slots for a copying transfer, or NULL */
    int64_t n;
} ctx;

static void on_commit(sw_move_handle *m, sw_status st, sw_tensor *result, void *user)
{
    (void)m;
    (void)result;
    ctx *c = user;
    c->committer = pthread_self();
    c->committed = st;
    c->pending_at_commit = sw_carrier_is_pending(c->src) || sw_carrier_is_pending(c->dst);
    /* The core releases a source of its own; a STATE_ONLY one is the
     * binding's to release, here. */
    if (sw_carrier_is_state_only(c->src)) {
        sw_error err;
        if (sw_carrier_is_released(c->src))
            c->report = SW_EINVAL; /* the core must not have released it */
        if (st == SW_OK && sw_carrier_release_moved(c->src, &err) != SW_OK)
            c->report = err.code;
    }
    c->src_released_at_commit = sw_carrier_is_released(c->src);
    atomic_fetch_add(&c->commits, 1);
}

typedef struct job {
    sw_move_handle *m;
    ctx *c;
} job;

static void do_copy(ctx *c)
{
    if (c->from && c->to)
        memcpy(c->to, c->from, (size_t)c->n * sizeof(int32_t));
}

static void report(sw_move_handle *m, ctx *c)
{
    sw_error e;
    void (*done)(sw_move_handle *, sw_status, const sw_error *) =
        c->here ? sw_move_transfer_done_here : sw_move_transfer_done;
    if (c->report == SW_OK) {
        done(m, SW_OK, NULL);
    } else {
        sw_error_set(&e, c->report, "binding: the copy failed on purpose");
        done(m, c->report, &e);
    }
}

static void *worker_main(void *arg)
{
    job *j = arg;
    j->c->transferer = pthread_self();
    if (j->c->gate)
        gate_pass(j->c->gate);
    do_copy(j->c);
    report(j->m, j->c);
    free(j);
    return NULL;
}

/* The binding's transfer: inline, or handed to a worker thread of its own. */
static void transfer(sw_move_handle *m, void *user)
{
    ctx *c = user;
    atomic_fetch_add(&c->calls, 1);
    /* Called on the submitting thread, marks set, no core lock held. */
    if (!sw_carrier_is_pending(c->src) || !sw_carrier_is_pending(c->dst))
        c->report = SW_EINVAL;
    if (!c->gate) {
        c->transferer = pthread_self();
        do_copy(c);
        report(m, c);
        sw_move_transfer_done(m, SW_EIO, NULL); /* a second report changes nothing */
        return;
    }
    job *j = malloc(sizeof *j);
    j->m = m;
    j->c = c;
    pthread_t t;
    pthread_create(&t, NULL, worker_main, j);
    pthread_detach(t);
}

static sw_move_options options_for(ctx *c, int64_t dst_slots)
{
    sw_move_options o = {.on_commit = on_commit, .user = c, .transfer = transfer,
                         .dst_slots = dst_slots, .bytes = 4 * 16};
    return o;
}

/* A CPU -> CPU move whose supplied transfer copies and reports inside the
 * callback: the commit runs on the caller before sw_move_async returns. */
static void test_report_inside_commits_on_caller(void)
{
    sw_error err;
    ctx c = {.report = SW_OK, .n = 16};
    CHECK(sw_cpu_new(16, SW_DT_INT32, 0, &c.src, &err) == SW_OK);
    CHECK(sw_cpu_new(16, SW_DT_INT32, 0, &c.dst, &err) == SW_OK);
    c.from = sw_cpu_pointer(c.src);
    c.to = sw_cpu_pointer(c.dst);
    for (int i = 0; i < 16; i++)
        c.from[i] = 100 + i;
    sw_layout *l = flat_layout(16);
    sw_move_options o = options_for(&c, 0);
    sw_move_handle *m = NULL;
    c.caller = pthread_self();
    CHECK(sw_move_span_async(c.src, 0, l, c.dst, &o, &m, &err) == SW_OK);
    CHECK(atomic_load(&c.commits) == 1);
    CHECK(sw_move_done(m));
    CHECK(pthread_equal(c.committer, c.caller));
    CHECK(c.committed == SW_OK && c.src_released_at_commit && !c.pending_at_commit);
    CHECK(sw_move_route_of(m) == SW_ROUTE_SUPPLIED);
    CHECK_EQ_I64(sw_move_bytes(m), 64);
    sw_tensor *r = NULL;
    CHECK(sw_move_wait(m, &r, &err) == SW_OK);
    CHECK(r && sw_tensor_carrier(r) == c.dst && c.to[7] == 107);
    sw_tensor_unref(r);
    sw_move_unref(m);
    sw_layout_free(l);
    sw_carrier_unref(c.src);
    sw_carrier_unref(c.dst);
}

/* STATE_ONLY carriers, a report from the binding's own thread: the core
 * keeps both pending until then and commits on its completion thread. */
static void test_state_only_report_from_another_thread(void)
{
    sw_error err;
    gate g;
    gate_init(&g);
    ctx c = {.report = SW_OK, .gate = &g, .src = state_only(), .dst = state_only()};
    sw_layout *l = flat_layout(16);
    sw_move_options o = options_for(&c, 16);
    sw_move_handle *m = NULL;
    c.caller = pthread_self();
    CHECK(sw_move_span_async(c.src, 0, l, c.dst, &o, &m, &err) == SW_OK);
    CHECK(atomic_load(&c.calls) == 1);
    CHECK(!sw_move_done(m));
    CHECK(sw_carrier_is_pending(c.src) && sw_carrier_is_pending(c.dst));
    CHECK(!sw_carrier_is_released(c.src));
    /* Another move of the pending source is refused meanwhile. */
    sw_carrier *other = state_only();
    sw_move_handle *m2 = NULL;
    CHECK(sw_move_span_async(c.src, 0, l, other, &o, &m2, &err) == SW_ESTATE);
    gate_open(&g);
    sw_tensor *r = NULL;
    CHECK(sw_move_wait(m, &r, &err) == SW_OK);
    CHECK(r != NULL);
    CHECK(atomic_load(&c.commits) == 1);
    CHECK(!pthread_equal(c.committer, c.caller));
    CHECK(!pthread_equal(c.committer, c.transferer));
    CHECK(c.src_released_at_commit && !c.pending_at_commit);
    CHECK(sw_carrier_is_released(c.src) && !sw_carrier_is_pending(c.dst));
    sw_tensor_unref(r);
    sw_move_unref(m);
    sw_layout_free(l);
    sw_carrier_unref(other);
    sw_carrier_unref(c.src);
    sw_carrier_unref(c.dst);
}

/* sw_move_transfer_done_here from the binding's thread: that thread
 * commits, before the report returns. */
static void test_report_here_commits_on_reporter(void)
{
    sw_error err;
    gate g;
    gate_init(&g);
    ctx c = {.report = SW_OK, .gate = &g, .here = 1, .src = state_only(), .dst = state_only()};
    sw_layout *l = flat_layout(16);
    sw_move_options o = options_for(&c, 16);
    sw_move_handle *m = NULL;
    c.caller = pthread_self();
    CHECK(sw_move_span_async(c.src, 0, l, c.dst, &o, &m, &err) == SW_OK);
    CHECK(sw_carrier_is_pending(c.src));
    gate_open(&g);
    CHECK(sw_move_wait(m, NULL, &err) == SW_OK);
    CHECK(atomic_load(&c.commits) == 1);
    CHECK(pthread_equal(c.committer, c.transferer));
    CHECK(c.src_released_at_commit && !c.pending_at_commit);
    sw_move_unref(m);
    sw_layout_free(l);
    sw_carrier_unref(c.src);
    sw_carrier_unref(c.dst);
}

/* A transfer that fails (inline or from its thread): the move's terminal
 * error is the binding's, the source stays live, both marks go. */
static void test_failing_transfer(void)
{
    for (int threaded = 0; threaded < 2; threaded++) {
        sw_error err;
        gate g;
        gate_init(&g);
        gate_open(&g);
        ctx c = {.report = SW_EIO, .gate = threaded ? &g : NULL, .src = state_only(),
                 .dst = state_only()};
        sw_layout *l = flat_layout(8);
        sw_move_options o = options_for(&c, 8);
        sw_move_handle *m = NULL;
        CHECK(sw_move_span_async(c.src, 0, l, c.dst, &o, &m, &err) == SW_OK);
        CHECK(sw_move_wait(m, NULL, &err) == SW_EIO);
        CHECK(strstr(err.msg, "failed on purpose") != NULL);
        CHECK(sw_move_error(m) != NULL);
        CHECK(c.committed == SW_EIO && atomic_load(&c.commits) == 1);
        CHECK(!sw_carrier_is_released(c.src));
        CHECK(!sw_carrier_is_pending(c.src) && !sw_carrier_is_pending(c.dst));
        /* The source moves again afterwards. */
        ctx c2 = {.report = SW_OK, .src = c.src, .dst = state_only()};
        sw_move_options o2 = options_for(&c2, 8);
        sw_move_handle *m2 = NULL;
        CHECK(sw_move_span_async(c.src, 0, l, c2.dst, &o2, &m2, &err) == SW_OK);
        CHECK(sw_move_wait(m2, NULL, &err) == SW_OK && sw_carrier_is_released(c.src));
        sw_move_unref(m2);
        sw_carrier_unref(c2.dst);
        sw_move_unref(m);
        sw_layout_free(l);
        sw_carrier_unref(c.src);
        sw_carrier_unref(c.dst);
    }
}

/* Refusals, before any change: a STATE_ONLY carrier without a supplied
 * transfer, a destination smaller than the layout by the binding's count. */
static void test_refusals(void)
{
    sw_error err;
    ctx c = {.report = SW_OK, .src = state_only(), .dst = state_only()};
    sw_layout *l = flat_layout(8);
    sw_move_handle *m = NULL;
    sw_move_options plain = {0};
    CHECK(sw_move_span_async(c.src, 0, l, c.dst, &plain, &m, &err) == SW_ENOTSUP);
    CHECK(sw_move_span_async(c.src, 0, l, c.dst, NULL, &m, &err) == SW_ENOTSUP);
    sw_carrier *cpu;
    CHECK(sw_cpu_new(8, SW_DT_INT32, 0, &cpu, &err) == SW_OK);
    CHECK(sw_move_span_async(cpu, 0, l, c.dst, NULL, &m, &err) == SW_ENOTSUP);
    sw_move_options small = options_for(&c, 4);
    CHECK(sw_move_span_async(c.src, 0, l, c.dst, &small, &m, &err) == SW_EINVAL);
    CHECK(sw_move_span_async(c.src, -1, l, c.dst, &small, &m, &err) == SW_EINVAL);
    CHECK(sw_move_span_async(c.src, 0, l, c.src, &small, &m, &err) == SW_EINVAL);
    CHECK(atomic_load(&c.calls) == 0);
    CHECK(!sw_carrier_is_pending(c.src) && !sw_carrier_is_pending(c.dst));
    /* A move of the core's own route ignores sw_move_transfer_done. */
    sw_carrier *cpu2;
    CHECK(sw_cpu_new(8, SW_DT_INT32, 0, &cpu2, &err) == SW_OK);
    CHECK(sw_move_span_async(cpu, 0, l, cpu2, NULL, &m, &err) == SW_OK);
    sw_move_transfer_done(m, SW_EIO, NULL);
    CHECK(sw_move_wait(m, NULL, &err) == SW_OK);
    sw_move_unref(m);
    sw_carrier_unref(cpu2);
    sw_carrier_unref(cpu);
    sw_layout_free(l);
    sw_carrier_unref(c.src);
    sw_carrier_unref(c.dst);
}

/* Many threads start supplied moves and drop their handles at once; the
 * binding's threads report; the drain waits for every commit. */
#define THREADS 8
#define ROUNDS 20
static ctx many[THREADS][ROUNDS];
static gate many_gate;

static void *starter_main(void *arg)
{
    int t = (int)(intptr_t)arg;
    sw_layout *l = flat_layout(32);
    for (int i = 0; i < ROUNDS; i++) {
        ctx *c = &many[t][i];
        c->report = (i % 5 == 4) ? SW_EIO : SW_OK;
        c->gate = (i % 3 == 0) ? NULL : &many_gate;
        c->here = i % 2;
        c->src = state_only();
        c->dst = state_only();
        sw_move_options o = options_for(c, 32);
        sw_move_handle *m = NULL;
        sw_error err;
        if (sw_move_span_async(c->src, 0, l, c->dst, &o, &m, &err) == SW_OK)
            sw_move_unref(m); /* dropped at once */
        else
            c->committed = -1;
    }
    sw_layout_free(l);
    return NULL;
}

static void test_many_threads_dropped_handles(void)
{
    gate_init(&many_gate);
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, starter_main, (void *)(intptr_t)t);
    gate_open(&many_gate);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    sw_move_drain();
    int wrong = 0;
    for (int t = 0; t < THREADS; t++)
        for (int i = 0; i < ROUNDS; i++) {
            ctx *c = &many[t][i];
            int ok = c->report == SW_OK;
            if (atomic_load(&c->commits) != 1 || c->committed != c->report ||
                sw_carrier_is_released(c->src) != ok || sw_carrier_is_pending(c->src) ||
                sw_carrier_is_pending(c->dst))
                wrong++;
            sw_carrier_unref(c->src);
            sw_carrier_unref(c->dst);
        }
    CHECK_EQ_I64(wrong, 0);
}

/* sw_move_hold holds the core's transfers, not a supplied one (its
 * threads are the binding's): a move that waits at once still finishes. */
static void test_hold(void)
{
    sw_error err;
    ctx c = {.report = SW_OK, .src = state_only(), .dst = state_only()};
    sw_layout *l = flat_layout(4);
    sw_move_options o = options_for(&c, 4);
    sw_move_handle *m = NULL;
    sw_move_hold(1);
    CHECK(sw_move_span_async(c.src, 0, l, c.dst, &o, &m, &err) == SW_OK);
    CHECK(atomic_load(&c.calls) == 1);
    CHECK(sw_move_wait(m, NULL, &err) == SW_OK && sw_carrier_is_released(c.src));
    sw_move_hold(0);
    sw_move_unref(m);
    sw_layout_free(l);
    sw_carrier_unref(c.src);
    sw_carrier_unref(c.dst);
}

/* A transfer that does not report: a bounded drain times out; abandoned,
 * drains stop waiting for it; a late report still commits it once. */
static void test_abandon(void)
{
    sw_error err;
    gate g;
    gate_init(&g);
    ctx c = {.report = SW_OK, .gate = &g, .src = state_only(), .dst = state_only()};
    sw_layout *l = flat_layout(4);
    sw_move_options o = options_for(&c, 4);
    sw_move_handle *m = NULL;
    CHECK(sw_move_span_async(c.src, 0, l, c.dst, &o, &m, &err) == SW_OK);
    CHECK(sw_move_drain_for(10 * 1000 * 1000) == 0);
    sw_move_abandon(m);
    sw_move_abandon(m);
    CHECK(sw_move_drain_for(-1) == 1);
    CHECK(sw_move_drain_for(0) == 1);
    CHECK(!sw_move_done(m) && sw_carrier_is_pending(c.src));
    gate_open(&g);
    CHECK(sw_move_wait(m, NULL, &err) == SW_OK);
    CHECK(atomic_load(&c.commits) == 1 && sw_carrier_is_released(c.src));
    sw_move_drain();
    sw_move_unref(m);
    sw_layout_free(l);
    sw_carrier_unref(c.src);
    sw_carrier_unref(c.dst);
}

/* exit() with supplied moves in flight, handles dropped, their reports to
 * come from the binding's threads: exit waits for their commits. */
static int exit_pipe[2];

static void exit_commit(sw_move_handle *m, sw_status st, sw_tensor *result, void *user)
{
    (void)m, (void)result, (void)user;
    char b = st == SW_OK ? 'c' : 'f';
    if (write(exit_pipe[1], &b, 1) != 1)
        _exit(5);
}

static void *slow_report(void *arg)
{
    /* A slow copy: the process is exiting by the time it reports. */
    struct timespec ts = {0, 30 * 1000 * 1000};
    nanosleep(&ts, NULL);
    sw_move_transfer_done(arg, SW_OK, NULL);
    return NULL;
}

static void slow_transfer(sw_move_handle *m, void *user)
{
    (void)user;
    pthread_t t;
    pthread_create(&t, NULL, slow_report, m);
    pthread_detach(t);
}

static void test_exit_with_supplied_moves_in_flight(void)
{
    CHECK(pipe(exit_pipe) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(exit_pipe[0]);
        sw_layout *l = flat_layout(4);
        for (int i = 0; i < 3; i++) {
            sw_carrier *s = state_only(), *d = state_only();
            sw_move_options o = {.on_commit = exit_commit, .transfer = slow_transfer,
                                 .dst_slots = 4};
            sw_move_handle *m = NULL;
            sw_error err;
            if (sw_move_span_async(s, 0, l, d, &o, &m, &err) != SW_OK)
                _exit(3);
            sw_move_unref(m);
            sw_carrier_unref(s);
            sw_carrier_unref(d);
        }
        exit(0);
    }
    close(exit_pipe[1]);
    char buf[8];
    int got = 0;
    ssize_t n;
    while ((n = read(exit_pipe[0], buf, sizeof buf)) > 0)
        for (ssize_t i = 0; i < n; i++)
            got += buf[i] == 'c';
    close(exit_pipe[0]);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_EQ_I64(got, 3);
}

int main(void)
{
    test_exit_with_supplied_moves_in_flight(); /* first: fork before this process has threads */
    test_report_inside_commits_on_caller();
    test_state_only_report_from_another_thread();
    test_report_here_commits_on_reporter();
    test_failing_transfer();
    test_refusals();
    test_hold();
    test_abandon();
    test_many_threads_dropped_handles();
    return check_report("move_supplied");
}
