/* The fork rule of Evictable (evictable.h, "Fork"): a transition another
 * thread of the parent was running at fork() ends in the child inside
 * fork() itself: the Evictable is usable there (not pending, no owner
 * access of the missing thread on its tiers), its values and residency
 * are those before the transition, a fresh tier the transition made is
 * left alone, and later transitions in the child work. The parent's
 * transition completes normally.
 *
 * The transition is held at a known point by a binding move hook that
 * waits at a gate (then hands the move to the core's engine): no sleeps.
 * Every child ends itself by SIGALRM should something hang. Under
 * ThreadSanitizer a child may not start threads after a multi-threaded
 * fork, so there the child's own transitions run without the engine's
 * threads only where a hook moves the values.
 *
 * A binding keeps objects of its own for the tiers and frees the binding
 * storage of the live ones at release: in the child it follows the core,
 * whose tiers are the fresh carrier the binding's factory made when fork()
 * finished the transition, and whose live tiers (sw_evictable_live_tiers)
 * are the one holding the values, also after the child's release. */
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


#define N 64

/* The gate: the first hook call that finds it armed waits until opened. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int armed, entered, open;
} gate;

static gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};

static void gate_arm(void)
{
    pthread_mutex_lock(&g.mu);
    g.armed = 1;
    g.entered = g.open = 0;
    pthread_mutex_unlock(&g.mu);
}

/* The hook copies the values itself when told to (no engine thread
 * needed), else hands the move to the core's engine. */
static int hook_copies;
/* The hook copies (and releases the tier it read) before the gate: the
 * transition's move has completed when the fork comes. */
static int late_gate;

static sw_status copy_values(sw_carrier *from, sw_carrier *to, int64_t size, sw_error *err)
{
    float buf[N];
    sw_status st = sw_carrier_read(from, 0, size, buf, err);
    if (st == SW_OK)
        st = sw_carrier_write(to, 0, size, buf, err);
    if (st == SW_OK)
        st = sw_carrier_release(from, err);
    return st;
}

static void gate_pass(void)
{
    pthread_mutex_lock(&g.mu);
    if (g.armed) {
        g.armed = 0;
        g.entered = 1;
        pthread_cond_broadcast(&g.cv);
        while (!g.open)
            pthread_cond_wait(&g.cv, &g.mu);
    }
    pthread_mutex_unlock(&g.mu);
}

static sw_status gated_move(sw_carrier *from, sw_carrier *to, int64_t size, void *user,
                            sw_error *err)
{
    (void)user;
    sw_status st = SW_OK;
    int copied = 0;
    if (hook_copies && late_gate) {
        st = copy_values(from, to, size, err);
        copied = 1;
    }
    gate_pass();
    if (!hook_copies)
        return SW_ENOTSUP;
    return copied ? st : copy_values(from, to, size, err);
}

/* The binding's factory: the core's allocate_like, remembering the fresh
 * carrier (no reference) as a binding keeps its object. */
static sw_carrier *made;

static sw_status remembering_factory(sw_carrier *prototype, int64_t size, sw_dtype dtype,
                                     void *user, sw_carrier **out, sw_error *err)
{
    (void)user;
    sw_status st = sw_tier_allocate_like(prototype, size, dtype, out, err);
    made = st == SW_OK ? *out : NULL;
    return st;
}

enum { P_LIVE = SW_EVICTABLE_PRIMARY_LIVE, S_LIVE = SW_EVICTABLE_SECONDARY_LIVE };

/* The tier holding the values once a transition is done. */
static int values_tier(int evicted) { return evicted ? S_LIVE : P_LIVE; }

static void gate_wait_entered(void)
{
    pthread_mutex_lock(&g.mu);
    while (!g.entered)
        pthread_cond_wait(&g.cv, &g.mu);
    pthread_mutex_unlock(&g.mu);
}

static void gate_open(void)
{
    pthread_mutex_lock(&g.mu);
    g.open = 1;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
}

static sw_carrier *cpu(int64_t n, int fill)
{
    sw_error err;
    sw_carrier *c = NULL;
    CHECK(sw_cpu_new(n, SW_DT_FLOAT32, 0, &c, &err) == SW_OK);
    if (fill) {
        float v[N];
        for (int i = 0; i < N; i++)
            v[i] = (float)i + 0.5f;
        CHECK(sw_carrier_write(c, 0, N, v, &err) == SW_OK);
    }
    return c;
}

/* The values through the Evictable (promoted) or its secondary (evicted). */
static int values_intact(sw_carrier *e)
{
    sw_error err;
    float v[N];
    sw_carrier *s = sw_evictable_secondary(e);
    sw_status st = sw_evictable_is_evicted(e) ? sw_carrier_read(s, 0, N, v, &err)
                                              : sw_carrier_read(e, 0, N, v, &err);
    sw_carrier_unref(s);
    if (st != SW_OK)
        return 0;
    for (int i = 0; i < N; i++)
        if (v[i] != (float)i + 0.5f)
            return 0;
    return 1;
}

typedef struct {
    sw_carrier *e;
    int evict;
    sw_status st;
} job;

static void *run_transition(void *arg)
{
    job *j = arg;
    sw_error err;
    j->st = j->evict ? sw_evictable_evict(j->e, &err) : sw_evictable_promote(j->e, &err);
    return NULL;
}

/* Another thread is stopped inside a transition (in its move hook) while
 * the main thread forks. `secondary_size` 0 makes the evict fill a fresh
 * secondary; `evict` 0 promotes an evicted Evictable. */
static void fork_mid_transition(int evict, int64_t secondary_size, int copies, int late,
                                const char *what)
{
    sw_error err;
    sw_carrier *p = cpu(N, 1), *s = cpu(secondary_size ? secondary_size : 1, 0); /* 1: too small, a fresh tier */
    sw_evictable_options o = {.move = gated_move, .factory = remembering_factory};
    sw_carrier *e = NULL;
    hook_copies = copies;
    late_gate = late;
    made = NULL;
    CHECK(sw_evictable_new(p, s, &o, &e, &err) == SW_OK);
    CHECK(sw_evictable_live_tiers(e) == (P_LIVE | S_LIVE));
    if (!evict) {
        CHECK(sw_evictable_evict(e, &err) == SW_OK); /* gate not armed */
        CHECK(sw_evictable_is_evicted(e) == 1);
        CHECK(sw_evictable_live_tiers(e) == S_LIVE);
    }
    sw_carrier *before_p = sw_evictable_primary(e), *before_s = sw_evictable_secondary(e);
    gate_arm();
    job j = {.e = e, .evict = evict, .st = SW_EINVAL};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, run_transition, &j) == 0);
    gate_wait_entered();
    CHECK(carrier_pending(e) == 1);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(20);
        sw_move_end_inherited();
        EXPECT(carrier_pending(e) == 0, 10);
        EXPECT(!carrier_released(e), 11);
        /* Late: the move had completed, so the child sees the transition
         * done (a fresh secondary installed); else nothing moved. */
        EXPECT(sw_evictable_is_evicted(e) == (late ? evict : !evict), 12);
        sw_carrier *cp = sw_evictable_primary(e), *cs = sw_evictable_secondary(e);
        /* The target tier is fresh for an evict into a too small secondary
         * and for every promote (the evict released the primary). */
        int replaced = late && (evict ? !secondary_size : 1);
        EXPECT((evict ? cp == before_p : cs == before_s), 13);
        EXPECT((evict ? cs != before_s : cp != before_p) == replaced, 21);
        /* The replacing tier is the binding factory's carrier. */
        EXPECT(!replaced || (evict ? cs : cp) == made, 22);
        /* Live: the tier holding the values once the move is done, else
         * as before the transition (both before the first one). */
        int live_before = evict ? P_LIVE | S_LIVE : S_LIVE;
        EXPECT(sw_evictable_live_tiers(e) == (late ? values_tier(evict) : live_before), 23);
        EXPECT(carrier_pending(cp) == 0 && carrier_pending(cs) == 0, 14);
        EXPECT(values_intact(e), 15);
        sw_carrier_unref(cp);
        sw_carrier_unref(cs);
        /* Writes work again when promoted. */
        if (!sw_evictable_is_evicted(e)) {
            float v = 0.5f;
            EXPECT(sw_carrier_write(e, 0, 1, &v, &err) == SW_OK, 16);
        }
        if (CHILD_STARTS_THREADS || copies) {
            /* Later transitions in the child work (the gate is not armed):
             * there and back again. */
            int at = sw_evictable_is_evicted(e);
            EXPECT((at ? sw_evictable_promote(e, &err) : sw_evictable_evict(e, &err)) == SW_OK,
                   17);
            EXPECT(sw_evictable_is_evicted(e) == !at && values_intact(e), 18);
            EXPECT((at ? sw_evictable_evict(e, &err) : sw_evictable_promote(e, &err)) == SW_OK,
                   19);
            EXPECT(sw_evictable_is_evicted(e) == at && values_intact(e), 20);
            EXPECT(sw_evictable_live_tiers(e) == values_tier(at), 24);
        }
        /* The release in the child: the live tiers are those it released. */
        int live = sw_evictable_live_tiers(e);
        EXPECT(sw_carrier_release(e, &err) == SW_OK, 25);
        EXPECT(sw_evictable_live_tiers(e) == live, 26);
        cp = sw_evictable_primary(e);
        cs = sw_evictable_secondary(e);
        EXPECT(carrier_released(cp) && carrier_released(cs), 27);
        sw_carrier_unref(cp);
        sw_carrier_unref(cs);
        _exit(0);
    }
    CHECK(pid > 0);
    gate_open();
    CHECK(pthread_join(th, NULL) == 0);
    reap(pid, what);
    /* The parent's transition completed normally. */
    CHECK(j.st == SW_OK);
    CHECK(sw_evictable_is_evicted(e) == evict);
    CHECK(carrier_pending(e) == 0);
    CHECK(values_intact(e));
    CHECK(sw_evictable_live_tiers(e) == values_tier(evict));
    sw_carrier_unref(before_p);
    sw_carrier_unref(before_s);
    CHECK(sw_carrier_release(e, NULL) == SW_OK);
    CHECK(sw_evictable_live_tiers(e) == values_tier(evict));
    sw_carrier_unref(e);
    sw_carrier_unref(p);
    sw_carrier_unref(s);
}

/* e-fork: evict held in the hook, the engine moves after it (the target
 * tier is big enough: no fresh tier). */
static void test_fork_mid_evict_core_move(void) { fork_mid_transition(1, N, 0, 0, "mid-evict"); }
/* e-fork: evict into a fresh secondary (the old one is too small). */
static void test_fork_mid_evict_fresh_tier(void)
{
    fork_mid_transition(1, 0, 0, 0, "mid-evict fresh");
}
/* e-fork: promote held in the hook. */
static void test_fork_mid_promote_core_move(void)
{
    fork_mid_transition(0, N, 0, 0, "mid-promote");
}
/* e-fork: the hook moves the values itself (no engine thread). */
static void test_fork_mid_evict_hook_move(void)
{
    fork_mid_transition(1, N, 1, 0, "hook evict");
}
static void test_fork_mid_promote_hook_move(void)
{
    fork_mid_transition(0, N, 1, 0, "hook promote");
}
/* e-fork: the move had completed at the fork (the tier it read released),
 * the transition had not installed it yet: the child sees it done. */
static void test_fork_after_evict_move_completed(void)
{
    fork_mid_transition(1, N, 1, 1, "late evict");
}
static void test_fork_after_evict_move_into_fresh_tier_completed(void)
{
    fork_mid_transition(1, 0, 1, 1, "late evict fresh");
}
static void test_fork_after_promote_move_completed(void)
{
    fork_mid_transition(0, N, 1, 1, "late promote");
}

/* ---- a mutex held at fork by a thread in no transition ------------------ */

/* A carrier whose reads stop at the gate when it is armed: a reader of an
 * Evictable over it holds the Evictable's mutex (and the tier's) there. */
typedef struct gated_slots {
    float v[N];
} gated_slots;

static int64_t gated_size(void *impl)
{
    (void)impl;
    return N;
}

static sw_status gated_read(void *impl, int64_t slot, int64_t count, void *out, sw_error *err)
{
    (void)err;
    gate_pass();
    memcpy(out, ((gated_slots *)impl)->v + slot, (size_t)count * sizeof(float));
    return SW_OK;
}

static sw_status gated_write(void *impl, int64_t slot, int64_t count, const void *in,
                             sw_error *err)
{
    (void)err;
    memcpy(((gated_slots *)impl)->v + slot, in, (size_t)count * sizeof(float));
    return SW_OK;
}

static void gated_release(void *impl) { (void)impl; }
static void gated_destroy(void *impl) { free(impl); }

static const sw_carrier_class gated_class = {
    .name = "Gated",
    .size = gated_size,
    .read = gated_read,
    .write = gated_write,
    .release = gated_release,
    .destroy = gated_destroy,
};

static void *read_through(void *arg)
{
    job *j = arg;
    float v[N];
    sw_error err;
    j->st = sw_carrier_read(j->e, 0, N, v, &err);
    return NULL;
}

/* Set by the test's own fork handler, which runs before the Evictable's
 * (registered earlier): the reader goes on while fork() waits for it. */
static int open_gate_at_fork;

static void test_prepare(void)
{
    if (open_gate_at_fork)
        gate_open();
}

/* A reader holds the Evictable's mutex at fork(): stopped at the gate for
 * the whole fork (`leaves` 0), or let go by a fork handler so that it
 * leaves while fork() waits (`leaves` 1). The child reads, writes and
 * evicts the Evictable without deadlocking on a mutex of the missing
 * thread. */
static void fork_while_reading(int leaves, const char *what)
{
    sw_error err;
    gated_slots *slots = calloc(1, sizeof *slots);
    CHECK(slots != NULL);
    for (int i = 0; i < N; i++)
        slots->v[i] = (float)i + 0.5f;
    sw_carrier *p = NULL, *s = cpu(N, 0), *e = NULL;
    CHECK(sw_carrier_new(&gated_class, slots, SW_DT_FLOAT32, 0, &p, &err) == SW_OK);
    sw_evictable_options o = {.move = gated_move};
    hook_copies = 1;
    late_gate = 0;
    CHECK(sw_evictable_new(p, s, &o, &e, &err) == SW_OK);
    gate_arm();
    job j = {.e = e, .st = SW_EINVAL};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, read_through, &j) == 0);
    gate_wait_entered(); /* the reader holds e's mutex and p's */
    open_gate_at_fork = leaves;
    pid_t pid = fork();
    if (pid == 0) {
        alarm(20);
        EXPECT(sw_evictable_is_evicted(e) == 0, 30);
        EXPECT(values_intact(e), 31);
        float v = 0.5f;
        EXPECT(sw_carrier_write(e, 0, 1, &v, &err) == SW_OK, 32);
        EXPECT(sw_evictable_evict(e, &err) == SW_OK, 33);
        EXPECT(sw_evictable_is_evicted(e) == 1 && values_intact(e), 34);
        _exit(0);
    }
    CHECK(pid > 0);
    open_gate_at_fork = 0;
    gate_open();
    CHECK(pthread_join(th, NULL) == 0);
    reap(pid, what);
    CHECK(j.st == SW_OK);
    CHECK(values_intact(e));
    sw_carrier_release(e, NULL);
    sw_carrier_unref(e);
    sw_carrier_unref(p);
    sw_carrier_unref(s);
}

static void test_fork_while_a_reader_is_stopped_inside_the_evictable(void)
{
    fork_while_reading(0, "stopped reader");
}

static void test_fork_while_a_reader_leaves_the_evictable(void)
{
    fork_while_reading(1, "leaving reader");
}

int main(void)
{
    test_fork_mid_evict_core_move();
    test_fork_mid_evict_fresh_tier();
    test_fork_mid_promote_core_move();
    test_fork_mid_evict_hook_move();
    test_fork_mid_promote_hook_move();
    test_fork_after_evict_move_completed();
    test_fork_after_evict_move_into_fresh_tier_completed();
    test_fork_after_promote_move_completed();
    /* Registered after the Evictable's fork handlers (the tests above made
     * Evictables), so its prepare runs first. */
    CHECK(pthread_atfork(test_prepare, NULL, NULL) == 0);
    test_fork_while_a_reader_is_stopped_inside_the_evictable();
    test_fork_while_a_reader_leaves_the_evictable();
    return check_report("evictable_fork");
}
