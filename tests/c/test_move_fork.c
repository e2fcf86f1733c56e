/* The fork rule of the move engine (move.h, "Fork"): a move the parent had
 * in flight fails in the child with SW_ESTATE once the child calls
 * sw_move_end_inherited (or waits for it), its on_commit runs there once,
 * both carriers lose their pending marks and are usable, a wait in the
 * child never hangs, drains in the child do not wait for the parent's
 * moves, and the child's own new moves work on a pool of its own. A
 * supplied transfer running on the forking thread itself continues in the
 * child. The parent's moves finish in the parent as if nothing happened.
 *
 * Every child ends itself by SIGALRM should a wait hang. Under
 * ThreadSanitizer a child may not start threads after a multi-threaded
 * fork, so there the child's new moves are not tried. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "helpers.h"
#include "fork_child.h"
#include <strideweave/strideweave.h>
#include <strideweave/binding.h>
#include "strideweave/testing.h"


#define N 64

static _Atomic int commits_ok, commits_failed;

static void count_commit(sw_move_handle *m, sw_status st, sw_tensor *result, void *user)
{
    (void)m, (void)result, (void)user;
    if (st == SW_OK)
        atomic_fetch_add(&commits_ok, 1);
    else
        atomic_fetch_add(&commits_failed, 1);
}

static sw_tensor *filled_source(void)
{
    sw_error err;
    sw_carrier *c = NULL;
    sw_tensor *t = NULL;
    int64_t ext[1] = {N};
    CHECK(sw_cpu_new(N, SW_DT_FLOAT32, 0, &c, &err) == SW_OK);
    CHECK(sw_tensor_new_strided(c, 0, 1, ext, NULL, &t, &err) == SW_OK);
    for (int i = 0; i < N; i++)
        CHECK(sw_tensor_set_f32(t, i, (float)i + 0.5f, &err) == SW_OK);
    sw_carrier_unref(c);
    return t;
}

static sw_carrier *empty_cpu(void)
{
    sw_error err;
    sw_carrier *c = NULL;
    CHECK(sw_cpu_new(N, SW_DT_FLOAT32, 0, &c, &err) == SW_OK);
    return c;
}

static int values_intact(const sw_tensor *t)
{
    sw_error err;
    for (int i = 0; i < N; i++) {
        float v = 0;
        if (sw_tensor_get_f32(t, i, &v, &err) != SW_OK || v != (float)i + 0.5f)
            return 0;
    }
    return 1;
}

/* In the child: the inherited move `m` of `t` into `d` failed the fork's
 * way, its carriers are usable, and (where threads may start) a new move
 * of the same source into the same destination works. */
static void child_checks_inherited(sw_move_handle *m, sw_tensor *t, sw_carrier *d)
{
    sw_error err;
    sw_tensor *r = NULL;
    EXPECT(sw_move_wait(m, &r, &err) == SW_ESTATE && r == NULL, 10);
    EXPECT(strstr(err.msg, "forked") != NULL, 11);
    EXPECT(sw_move_ended_by_fork(m) == 1 && sw_move_done(m) == 1, 12);
    EXPECT(sw_move_error(m) != NULL && sw_move_error(m)->code == SW_ESTATE, 13);
    EXPECT(atomic_load(&commits_failed) == 1 && atomic_load(&commits_ok) == 0, 14);
    EXPECT(carrier_pending(sw_tensor_carrier(t)) == 0 && carrier_pending(d) == 0, 15);
    EXPECT(!carrier_released(sw_tensor_carrier(t)) && !carrier_released(d) && values_intact(t), 16);
    /* Ending again changes nothing; the wait gives the same answer. */
    sw_move_end_inherited();
    EXPECT(sw_move_wait(m, NULL, &err) == SW_ESTATE && atomic_load(&commits_failed) == 1, 17);
    sw_move_drain(); /* nothing of the child's in flight */
    if (CHILD_STARTS_THREADS) {
        EXPECT(sw_move(t, d, &r, &err) == SW_OK, 18);
        EXPECT(carrier_released(sw_tensor_carrier(t)) && values_intact(r), 19);
        sw_tensor_unref(r);
    }
}

/* A move held (sw_move_hold) at the fork: the child ends it with
 * sw_move_end_inherited, as a binding's after-fork hook does. */
static void test_held_move_ends_in_child(void)
{
    sw_tensor *t = filled_source();
    sw_carrier *d = empty_cpu();
    sw_move_options o = {.on_commit = count_commit};
    sw_move_handle *m = NULL;
    sw_error err;
    atomic_store(&commits_ok, 0);
    atomic_store(&commits_failed, 0);
    sw_move_hold(1);
    CHECK(sw_move_async(t, d, &o, &m, &err) == SW_OK);
    CHECK(carrier_pending(sw_tensor_carrier(t)) == SW_CARRIER_PENDING_SOURCE);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(10);
        sw_move_end_inherited();
        EXPECT(atomic_load(&commits_failed) == 1, 20); /* ended by the call */
        child_checks_inherited(m, t, d);
        _exit(0);
    }
    reap(pid, "held move");
    /* The parent's move is untouched: it runs once released. */
    CHECK(atomic_load(&commits_failed) == 0 && !sw_move_done(m));
    sw_move_hold(0);
    sw_tensor *r = NULL;
    CHECK(sw_move_wait(m, &r, &err) == SW_OK && r && values_intact(r));
    CHECK(sw_move_ended_by_fork(m) == 0 && carrier_released(sw_tensor_carrier(t)));
    sw_tensor_unref(r);
    sw_move_unref(m);
    sw_tensor_unref(t);
    sw_carrier_unref(d);
}

/* A move whose transfer is running on a pool thread at the fork (stopped
 * at its pause point): the child just waits, which ends it. */
static void test_pool_move_wait_in_child_does_not_hang(void)
{
    if (!sw_fault_enabled())
        return;
    sw_tensor *t = filled_source();
    sw_carrier *d = empty_cpu();
    sw_move_options o = {.on_commit = count_commit};
    sw_move_handle *m = NULL;
    sw_error err;
    atomic_store(&commits_ok, 0);
    atomic_store(&commits_failed, 0);
    sw_fault_arm("move_transfer_pause", 0, 1);
    CHECK(sw_move_async(t, d, &o, &m, &err) == SW_OK);
    sw_fault_wait_paused();
    pid_t pid = fork();
    if (pid == 0) {
        alarm(10);
        EXPECT(sw_move_drain_for(0) == 1, 21); /* the parent's move is not the child's */
        child_checks_inherited(m, t, d);
        _exit(0);
    }
    reap(pid, "pool move");
    sw_fault_resume();
    sw_fault_clear();
    sw_tensor *r = NULL;
    CHECK(sw_move_wait(m, &r, &err) == SW_OK && r && values_intact(r));
    CHECK(atomic_load(&commits_ok) == 1 && atomic_load(&commits_failed) == 0);
    sw_tensor_unref(r);
    sw_move_unref(m);
    sw_tensor_unref(t);
    sw_carrier_unref(d);
}

/* ---- supplied transfers ------------------------------------------------------ */

static const sw_carrier_class binding_class = {
    .name = "BindingCarrier", .flags = SW_CARRIER_CLASS_STATE_ONLY,
};

static sw_carrier *state_only(void)
{
    sw_error err;
    sw_carrier *c = NULL;
    CHECK(sw_carrier_new(&binding_class, NULL, SW_DT_INT32, 0, &c, &err) == SW_OK);
    return c;
}

/* A binding transfer that never reports in the parent until told. */
static sw_move_handle *parked;

static void park_transfer(sw_move_handle *m, void *user)
{
    (void)user;
    parked = m;
}

/* A supplied transfer whose report was still to come (its thread is the
 * parent's): ended in the child, and a late report there changes nothing. */
static void test_supplied_move_ends_in_child(void)
{
    sw_carrier *s = state_only(), *d = state_only();
    sw_layout *l = flat_layout(4);
    sw_move_options o = {.on_commit = count_commit, .transfer = park_transfer, .dst_slots = 4};
    sw_move_handle *m = NULL;
    sw_error err;
    atomic_store(&commits_ok, 0);
    atomic_store(&commits_failed, 0);
    CHECK(sw_move_span_async(s, 0, l, d, &o, &m, &err) == SW_OK && parked == m);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(10);
        sw_move_end_inherited();
        EXPECT(sw_move_wait(m, NULL, &err) == SW_ESTATE && sw_move_ended_by_fork(m), 30);
        EXPECT(atomic_load(&commits_failed) == 1, 31);
        EXPECT(carrier_pending(s) == 0 && carrier_pending(d) == 0 && !carrier_released(s), 32);
        sw_move_transfer_done(m, SW_OK, NULL); /* too late: ignored */
        EXPECT(atomic_load(&commits_ok) == 0 && atomic_load(&commits_failed) == 1, 33);
        _exit(0);
    }
    reap(pid, "supplied move");
    CHECK(!sw_move_done(m));
    sw_move_transfer_done(parked, SW_OK, NULL);
    CHECK(sw_move_wait(m, NULL, &err) == SW_OK && atomic_load(&commits_ok) == 1);
    sw_move_unref(m);
    sw_layout_free(l);
    sw_carrier_unref(s);
    sw_carrier_unref(d);
}

/* fork() from inside a supplied transfer: in the child the transfer goes
 * on on the forking thread, so the move is left alone and commits there
 * once it reports. */
static pid_t forked_inside;
static _Atomic int ended_inside;

static void forking_transfer(sw_move_handle *m, void *user)
{
    (void)user;
    forked_inside = fork();
    if (forked_inside == 0) {
        alarm(10);
        sw_move_end_inherited();
        atomic_store(&ended_inside, sw_move_done(m) || sw_move_ended_by_fork(m));
    }
    sw_move_transfer_done(m, SW_OK, NULL); /* in both processes */
}

static void test_transfer_on_forking_thread_continues_in_child(void)
{
    sw_carrier *s = state_only(), *d = state_only();
    sw_layout *l = flat_layout(4);
    sw_move_options o = {.on_commit = count_commit, .transfer = forking_transfer,
                         .dst_slots = 4};
    sw_move_handle *m = NULL;
    sw_error err;
    atomic_store(&commits_ok, 0);
    atomic_store(&commits_failed, 0);
    sw_status st = sw_move_span_async(s, 0, l, d, &o, &m, &err);
    if (forked_inside == 0) {
        EXPECT(st == SW_OK && !atomic_load(&ended_inside), 40);
        EXPECT(sw_move_wait(m, NULL, &err) == SW_OK && !sw_move_ended_by_fork(m), 41);
        EXPECT(atomic_load(&commits_ok) == 1 && atomic_load(&commits_failed) == 0, 42);
        EXPECT(carrier_pending(s) == 0 && carrier_pending(d) == 0, 43);
        _exit(0);
    }
    reap(forked_inside, "transfer on the forking thread");
    CHECK(st == SW_OK && sw_move_wait(m, NULL, &err) == SW_OK);
    CHECK(atomic_load(&commits_ok) == 1);
    sw_move_unref(m);
    sw_layout_free(l);
    sw_carrier_unref(s);
    sw_carrier_unref(d);
}

/* Without a fork, ending inherited moves ends nothing. */
static void test_end_inherited_without_fork_is_a_no_op(void)
{
    sw_tensor *t = filled_source();
    sw_carrier *d = empty_cpu();
    sw_move_handle *m = NULL;
    sw_error err;
    sw_move_hold(1);
    CHECK(sw_move_async(t, d, NULL, &m, &err) == SW_OK);
    sw_move_end_inherited();
    CHECK(!sw_move_done(m) && carrier_pending(d) == SW_CARRIER_PENDING_DESTINATION);
    sw_move_hold(0);
    CHECK(sw_move_wait(m, NULL, &err) == SW_OK && !sw_move_ended_by_fork(m));
    sw_move_unref(m);
    sw_tensor_unref(t);
    sw_carrier_unref(d);
}

/* A small move runs on its caller (the light path) and holds no completion
 * anyone could wait on; a child forked by another thread while it runs
 * still ends it: sw_move_end_inherited clears both marks and runs its
 * on_commit once with the fork's failure. The move is held between its
 * marks and its transfer by the profiling hook's SUBMIT event, which runs
 * on the moving thread. */
static pthread_mutex_t light_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t light_cond = PTHREAD_COND_INITIALIZER;
static int light_submitted, light_forked;
static _Atomic int light_fork_ended;

static void hold_at_submit(const sw_move_event *e, void *user)
{
    (void)user;
    if (e->kind != SW_MOVE_EVENT_SUBMIT)
        return;
    pthread_mutex_lock(&light_lock);
    light_submitted++;
    pthread_cond_broadcast(&light_cond);
    while (!light_forked)
        pthread_cond_wait(&light_cond, &light_lock);
    pthread_mutex_unlock(&light_lock);
}

static void note_fork_commit(sw_move_handle *m, sw_status st, sw_tensor *result, void *user)
{
    (void)result, (void)user;
    count_commit(m, st, result, user);
    if (st == SW_ESTATE && sw_move_ended_by_fork(m))
        atomic_fetch_add(&light_fork_ended, 1);
}

typedef struct light_args {
    sw_tensor *t;
    sw_carrier *d;
    sw_status st;
    int ran_here; /* done when sw_move_async returned: the light path */
} light_args;

static void *light_mover(void *arg)
{
    light_args *a = arg;
    sw_error err;
    sw_move_options o = {.on_commit = note_fork_commit};
    sw_move_handle *m = NULL;
    a->st = sw_move_async(a->t, a->d, &o, &m, &err);
    if (a->st == SW_OK) {
        a->ran_here = sw_move_done(m);
        a->st = sw_move_wait(m, NULL, &err);
        sw_move_unref(m);
    }
    return NULL;
}

static void test_light_move_of_another_thread_ends_in_child(void)
{
    atomic_store(&commits_ok, 0);
    atomic_store(&commits_failed, 0);
    light_args a = {.t = filled_source(), .d = empty_cpu(), .st = SW_EINVAL};
    sw_move_set_profile_hook(hold_at_submit, NULL);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, light_mover, &a) == 0);
    pthread_mutex_lock(&light_lock);
    while (!light_submitted)
        pthread_cond_wait(&light_cond, &light_lock);
    pthread_mutex_unlock(&light_lock);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(30);
        EXPECT(carrier_pending(sw_tensor_carrier(a.t)) != 0 && carrier_pending(a.d) != 0, 20);
        sw_move_end_inherited();
        EXPECT(atomic_load(&light_fork_ended) == 1 && atomic_load(&commits_failed) == 1, 21);
        EXPECT(atomic_load(&commits_ok) == 0, 22);
        EXPECT(carrier_pending(sw_tensor_carrier(a.t)) == 0 && carrier_pending(a.d) == 0, 23);
        EXPECT(!carrier_released(sw_tensor_carrier(a.t)) && values_intact(a.t), 24);
        sw_move_end_inherited(); /* ending again changes nothing */
        EXPECT(atomic_load(&commits_failed) == 1, 25);
        _exit(0);
    }
    pthread_mutex_lock(&light_lock);
    light_forked = 1;
    pthread_cond_broadcast(&light_cond);
    pthread_mutex_unlock(&light_lock);
    reap(pid, "light move of another thread");
    CHECK(pthread_join(th, NULL) == 0);
    sw_move_set_profile_hook(NULL, NULL);
    /* In the parent the move finished as if nothing happened. */
    CHECK(a.ran_here == 1);
    CHECK(a.st == SW_OK && atomic_load(&commits_ok) == 1 && atomic_load(&commits_failed) == 0);
    CHECK(carrier_released(sw_tensor_carrier(a.t)) && carrier_pending(a.d) == 0);
    sw_tensor_unref(a.t);
    sw_carrier_unref(a.d);
}

/* Many light moves of other threads at once, more than the engine keeps
 * in its fixed set of slots (the rest go on its list): a child forked
 * while all of them run ends every one, each on_commit once. */
#define MANY_LIGHT 72

static void test_many_light_moves_of_other_threads_end_in_child(void)
{
    atomic_store(&commits_ok, 0);
    atomic_store(&commits_failed, 0);
    atomic_store(&light_fork_ended, 0);
    light_submitted = 0;
    light_forked = 0;
    static light_args a[MANY_LIGHT];
    static pthread_t th[MANY_LIGHT];
    sw_move_set_profile_hook(hold_at_submit, NULL);
    for (int i = 0; i < MANY_LIGHT; i++) {
        a[i] = (light_args){.t = filled_source(), .d = empty_cpu(), .st = SW_EINVAL};
        CHECK(pthread_create(&th[i], NULL, light_mover, &a[i]) == 0);
    }
    pthread_mutex_lock(&light_lock);
    while (light_submitted < MANY_LIGHT)
        pthread_cond_wait(&light_cond, &light_lock);
    pthread_mutex_unlock(&light_lock);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(30);
        sw_move_end_inherited();
        EXPECT(atomic_load(&light_fork_ended) == MANY_LIGHT, 40);
        EXPECT(atomic_load(&commits_failed) == MANY_LIGHT && atomic_load(&commits_ok) == 0, 41);
        for (int i = 0; i < MANY_LIGHT; i++)
            EXPECT(carrier_pending(sw_tensor_carrier(a[i].t)) == 0 &&
                       carrier_pending(a[i].d) == 0,
                   42);
        _exit(0);
    }
    pthread_mutex_lock(&light_lock);
    light_forked = 1;
    pthread_cond_broadcast(&light_cond);
    pthread_mutex_unlock(&light_lock);
    reap(pid, "many light moves of other threads");
    for (int i = 0; i < MANY_LIGHT; i++)
        CHECK(pthread_join(th[i], NULL) == 0);
    sw_move_set_profile_hook(NULL, NULL);
    CHECK(atomic_load(&commits_ok) == MANY_LIGHT && atomic_load(&commits_failed) == 0);
    for (int i = 0; i < MANY_LIGHT; i++) {
        CHECK(a[i].ran_here == 1 && a[i].st == SW_OK);
        sw_tensor_unref(a[i].t);
        sw_carrier_unref(a[i].d);
    }
}

int main(void)
{
    test_end_inherited_without_fork_is_a_no_op();
    test_held_move_ends_in_child();
    test_pool_move_wait_in_child_does_not_hang();
    test_supplied_move_ends_in_child();
    test_transfer_on_forking_thread_continues_in_child();
    test_light_move_of_another_thread_ends_in_child();
    test_many_light_moves_of_other_threads_end_in_child();
    return check_report("move_fork");
}
