/* A binding's copy between two carriers (binding.h, sw_carrier_pair_begin,
 * issue 17): the refusal of a released or pending carrier with its detail,
 * leaving both carriers as they were; begin marks both and gives transfer
 * access, end takes both away whatever happened between (refused writes,
 * a failed copy); end_transfer leaves the marks; 2-4 threads racing to
 * begin on one carrier: exactly one wins (TSan build); in a forked child
 * the pair of a thread it lacks is ended, the forking thread's own stays. */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "fork_child.h"
#include <strideweave/strideweave.h>
#include <strideweave/binding.h>
#include "strideweave/testing.h"

static sw_carrier *cpu(int64_t n)
{
    sw_carrier *c = NULL;
    CHECK(sw_cpu_new(n, SW_DT_FLOAT32, 0, &c, NULL) == SW_OK);
    return c;
}

/* Neither marked nor in transfer here, version as given. */
static void check_untouched(sw_carrier *c, uint64_t version)
{
    sw_carrier_state s;
    sw_carrier_get_state(c, &s);
    CHECK_EQ_I64(s.pending, 0);
    CHECK_EQ_I64(s.in_transfer, 0);
    CHECK_EQ_I64(s.version, version);
}

static void test_refusals(void)
{
    sw_carrier *a = cpu(4), *b = cpu(4);
    sw_carrier_pair p;
    sw_error err;
    /* a pending source: refused, the destination untouched */
    sw_carrier_mark_pending(a, SW_CARRIER_PENDING_DESTINATION);
    CHECK(sw_carrier_pair_begin(a, b, 0, &p, &err) == SW_ESTATE);
    CHECK_EQ_I64(err.detail, SW_CARRIER_REFUSED_PENDING);
    CHECK_EQ_I64(p.refused, SW_CARRIER_PENDING_SOURCE);
    CHECK_MSG(err, "transfer: the source CPU carrier is pending in a move");
    CHECK_EQ_I64(sw_carrier_pending_roles(a), SW_CARRIER_PENDING_DESTINATION);
    CHECK(!sw_carrier_in_transfer(a));
    check_untouched(b, 0);
    sw_carrier_pair_end(&p); /* a refused pair ends as nothing */
    CHECK_EQ_I64(sw_carrier_pending_roles(a), SW_CARRIER_PENDING_DESTINATION);
    /* a pending destination: refused, the source not marked */
    CHECK(sw_carrier_pair_begin(b, a, 0, &p, &err) == SW_ESTATE);
    CHECK_EQ_I64(err.detail, SW_CARRIER_REFUSED_PENDING);
    CHECK_EQ_I64(p.refused, SW_CARRIER_PENDING_DESTINATION);
    check_untouched(b, 0);
    /* a shared carrier is not checked */
    CHECK(sw_carrier_pair_begin(b, a, SW_CARRIER_PAIR_SHARED_DESTINATION, &p, &err) == SW_OK);
    CHECK_EQ_I64(p.marked, SW_CARRIER_PENDING_SOURCE);
    sw_carrier_pair_end(&p);
    CHECK_EQ_I64(sw_carrier_pending_roles(a), SW_CARRIER_PENDING_DESTINATION);
    check_untouched(b, 0);
    sw_carrier_unmark_pending(a, SW_CARRIER_PENDING_DESTINATION);
    /* released */
    CHECK(sw_carrier_release(b, &err) == SW_OK);
    CHECK(sw_carrier_pair_begin(a, b, 0, &p, &err) == SW_ESTATE);
    CHECK_EQ_I64(err.detail, SW_CARRIER_REFUSED_RELEASED);
    CHECK_EQ_I64(p.refused, SW_CARRIER_PENDING_DESTINATION);
    CHECK_MSG(err, "transfer: the destination CPU carrier is released");
    check_untouched(a, 0);
    CHECK(sw_carrier_pair_begin(b, a, 0, &p, &err) == SW_ESTATE);
    CHECK_EQ_I64(err.detail, SW_CARRIER_REFUSED_RELEASED);
    CHECK_EQ_I64(p.refused, SW_CARRIER_PENDING_SOURCE);
    check_untouched(a, 0);
    /* NULL and one carrier */
    CHECK(sw_carrier_pair_begin(NULL, a, 0, &p, &err) == SW_ETYPE);
    CHECK(sw_carrier_pair_begin(a, NULL, 0, &p, &err) == SW_ETYPE);
    CHECK(sw_carrier_pair_begin(a, a, 0, NULL, &err) == SW_ETYPE);
    CHECK(sw_carrier_pair_begin(a, a, 0, &p, &err) == SW_EINVAL);
    check_untouched(a, 0);
    sw_carrier_unref(a);
    sw_carrier_unref(b);
}

static void test_begin_end(void)
{
    sw_carrier *a = cpu(4), *b = cpu(4);
    sw_carrier_pair p;
    sw_error err;
    float v = 1.0f;
    CHECK(sw_carrier_pair_begin(a, b, 0, &p, &err) == SW_OK);
    CHECK_EQ_I64(sw_carrier_pending_roles(a), SW_CARRIER_PENDING_SOURCE);
    CHECK_EQ_I64(sw_carrier_pending_roles(b), SW_CARRIER_PENDING_DESTINATION);
    CHECK(sw_carrier_in_transfer(a) && sw_carrier_in_transfer(b));
    /* between: a source write and a release are refused (faults the copy
     * meets), a destination write goes through without a version step */
    CHECK(sw_carrier_write(a, 0, 1, &v, &err) == SW_ESTATE);
    CHECK(sw_carrier_release(b, &err) == SW_ESTATE);
    CHECK(sw_carrier_write(b, 0, 1, &v, &err) == SW_OK);
    CHECK(sw_carrier_write(b, 9, 1, &v, &err) == SW_ERANGE);
    /* a second pair on either is refused while this one runs */
    sw_carrier *c = cpu(4);
    sw_carrier_pair q;
    CHECK(sw_carrier_pair_begin(c, b, 0, &q, &err) == SW_ESTATE);
    CHECK(sw_carrier_pair_begin(a, c, 0, &q, &err) == SW_ESTATE);
    check_untouched(c, 0);
    sw_carrier_pair_end(&p);
    check_untouched(a, 0);
    check_untouched(b, 0);
    sw_carrier_pair_end(&p); /* once more: nothing */
    CHECK(sw_carrier_write(a, 0, 1, &v, &err) == SW_OK);
    /* end_transfer: the access goes, the marks stay until end */
    CHECK(sw_carrier_pair_begin(c, b, 0, &p, &err) == SW_OK);
    sw_carrier_pair_end_transfer(&p);
    CHECK(!sw_carrier_in_transfer(c) && !sw_carrier_in_transfer(b));
    CHECK_EQ_I64(sw_carrier_pending_roles(c), SW_CARRIER_PENDING_SOURCE);
    CHECK_EQ_I64(sw_carrier_pending_roles(b), SW_CARRIER_PENDING_DESTINATION);
    sw_carrier_pair_end_transfer(&p); /* once more: nothing */
    sw_carrier_pair_end(&p);
    check_untouched(c, 0);
    check_untouched(b, 0); /* its write under transfer access stepped none */
    /* keep_marks: the pair ends, the marks are the caller's */
    CHECK(sw_carrier_pair_begin(c, b, 0, &p, &err) == SW_OK);
    sw_carrier_pair_keep_marks(&p);
    CHECK(!sw_carrier_in_transfer(c) && !sw_carrier_in_transfer(b));
    CHECK_EQ_I64(sw_carrier_pending_roles(c), SW_CARRIER_PENDING_SOURCE);
    CHECK_EQ_I64(sw_carrier_pending_roles(b), SW_CARRIER_PENDING_DESTINATION);
    sw_carrier_pair_end(&p); /* ended already: nothing */
    CHECK_EQ_I64(sw_carrier_pending_roles(c), SW_CARRIER_PENDING_SOURCE);
    sw_carrier_unmark_pending(c, SW_CARRIER_PENDING_SOURCE);
    sw_carrier_unmark_pending(b, SW_CARRIER_PENDING_DESTINATION);
    /* a thread's own transfer access (a move it runs) outlives a pair */
    sw_carrier_begin_transfer(c);
    CHECK(sw_carrier_pair_begin(c, b, 0, &p, &err) == SW_OK);
    sw_carrier_pair_end(&p);
    CHECK(sw_carrier_in_transfer(c));
    sw_carrier_end_transfer(c);
    CHECK(!sw_carrier_in_transfer(c));
    /* the pair keeps its carriers alive until it ends */
    CHECK(sw_carrier_pair_begin(a, c, 0, &p, &err) == SW_OK);
    sw_carrier_unref(a);
    sw_carrier_unref(c);
    CHECK_EQ_I64(sw_carrier_pending_roles(a), SW_CARRIER_PENDING_SOURCE);
    sw_carrier_pair_end(&p); /* frees both */
    sw_carrier_unref(b);
}

/* ---- threads race for one source ------------------------------------------ */

#define RACERS 4
typedef struct racer {
    sw_carrier *shared, *own;
    pthread_barrier_t *go, *counted;
    sw_status st;
    int detail;
} racer;

static void *race(void *arg)
{
    racer *r = arg;
    sw_carrier_pair p;
    sw_error err = {0};
    pthread_barrier_wait(r->go);
    r->st = sw_carrier_pair_begin(r->shared, r->own, 0, &p, &err);
    r->detail = err.detail;
    pthread_barrier_wait(r->counted); /* every begin is in before any end */
    sw_carrier_pair_end(&p);
    return NULL;
}

static void test_race(int n)
{
    pthread_barrier_t go, counted;
    pthread_barrier_init(&go, NULL, (unsigned)n);
    pthread_barrier_init(&counted, NULL, (unsigned)n);
    sw_carrier *shared = cpu(4);
    racer r[RACERS];
    pthread_t t[RACERS];
    for (int i = 0; i < n; i++) {
        r[i] = (racer){.shared = shared, .own = cpu(4), .go = &go, .counted = &counted};
        CHECK(pthread_create(&t[i], NULL, race, &r[i]) == 0);
    }
    int won = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(t[i], NULL);
        won += r[i].st == SW_OK;
        CHECK(r[i].st == SW_OK || (r[i].st == SW_ESTATE &&
                                   r[i].detail == SW_CARRIER_REFUSED_PENDING));
        check_untouched(r[i].own, 0);
        sw_carrier_unref(r[i].own);
    }
    CHECK_EQ_I64(won, 1);
    check_untouched(shared, 0);
    sw_carrier_unref(shared);
    pthread_barrier_destroy(&go);
    pthread_barrier_destroy(&counted);
}

/* ---- fork ------------------------------------------------------------------ */

typedef struct holder {
    sw_carrier *src, *dst;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int begun, done;
    sw_status st;
} holder;

/* Begins a pair and holds it until told (the copy a thread is running
 * while another thread forks). */
static void *hold(void *arg)
{
    holder *h = arg;
    sw_carrier_pair p;
    h->st = sw_carrier_pair_begin(h->src, h->dst, 0, &p, NULL);
    pthread_mutex_lock(&h->lock);
    h->begun = 1;
    pthread_cond_broadcast(&h->cond);
    while (!h->done)
        pthread_cond_wait(&h->cond, &h->lock);
    pthread_mutex_unlock(&h->lock);
    sw_carrier_pair_end(&p);
    return NULL;
}

static void test_fork(void)
{
    holder h = {.src = cpu(4), .dst = cpu(4)};
    pthread_mutex_init(&h.lock, NULL);
    pthread_cond_init(&h.cond, NULL);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, hold, &h) == 0);
    pthread_mutex_lock(&h.lock);
    while (!h.begun)
        pthread_cond_wait(&h.cond, &h.lock);
    pthread_mutex_unlock(&h.lock);
    CHECK(h.st == SW_OK);
    /* this thread's own pair, running when it forks */
    sw_carrier *a = cpu(4), *b = cpu(4);
    sw_carrier_pair mine;
    CHECK(sw_carrier_pair_begin(a, b, 0, &mine, NULL) == SW_OK);
    pid_t pid = fork();
    if (pid == 0) {
        /* the other thread's pair ended: both carriers usable */
        EXPECT(sw_carrier_pending_roles(h.src) == 0, 2);
        EXPECT(sw_carrier_pending_roles(h.dst) == 0, 3);
        EXPECT(!sw_carrier_in_transfer(h.dst), 4);
        float v = 2.0f;
        EXPECT(sw_carrier_write(h.dst, 0, 1, &v, NULL) == SW_OK, 5);
        sw_carrier_pair again;
        EXPECT(sw_carrier_pair_begin(h.src, h.dst, 0, &again, NULL) == SW_OK, 6);
        sw_carrier_pair_end(&again);
        EXPECT(sw_carrier_release(h.src, NULL) == SW_OK, 7);
        /* this thread's own goes on, and ends as usual */
        EXPECT(sw_carrier_pending_roles(a) == SW_CARRIER_PENDING_SOURCE, 8);
        EXPECT(sw_carrier_in_transfer(b), 9);
        sw_carrier_pair_end(&mine);
        EXPECT(sw_carrier_pending_roles(b) == 0 && !sw_carrier_in_transfer(b), 10);
        _exit(0);
    }
    reap(pid, "fork with a pair on another thread");
    /* the parent's pairs are untouched by the child */
    CHECK_EQ_I64(sw_carrier_pending_roles(h.src), SW_CARRIER_PENDING_SOURCE);
    CHECK_EQ_I64(sw_carrier_pending_roles(a), SW_CARRIER_PENDING_SOURCE);
    sw_carrier_pair_end(&mine);
    pthread_mutex_lock(&h.lock);
    h.done = 1;
    pthread_cond_broadcast(&h.cond);
    pthread_mutex_unlock(&h.lock);
    pthread_join(t, NULL);
    check_untouched(h.src, 0);
    check_untouched(h.dst, 0);
    sw_carrier_unref(h.src);
    sw_carrier_unref(h.dst);
    sw_carrier_unref(a);
    sw_carrier_unref(b);
    pthread_mutex_destroy(&h.lock);
    pthread_cond_destroy(&h.cond);
}

/* A copy with SW_MOVE_HERE_MARK another thread is running when this one
 * forks (stopped at a pause point inside it): its marks are a pair's, the
 * child finds both carriers unmarked. */
typedef struct copier {
    sw_carrier *src, *dst;
    sw_status st;
} copier;

static void *copy_here(void *arg)
{
    copier *k = arg;
    uint8_t profile[1] = {SW_NODE_LEAF};
    int64_t ext[1] = {4}, str[1] = {1};
    sw_layout *l = sw_layout_new(1, profile, ext, str, NULL);
    k->st = sw_move_transfer_span_here(k->src, 0, l, k->dst, SW_MOVE_HERE_MARK, NULL);
    sw_layout_free(l);
    return NULL;
}

static void test_fork_move_here(void)
{
    if (!sw_fault_enabled())
        return; /* the pause point needs fault injection */
    copier k = {.src = cpu(4), .dst = cpu(4)};
    CHECK(sw_fault_arm("move_here_transfer_pause", 0, 1) == SW_OK);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, copy_here, &k) == 0);
    sw_fault_wait_paused();
    CHECK_EQ_I64(sw_carrier_pending_roles(k.src), SW_CARRIER_PENDING_SOURCE);
    pid_t pid = fork();
    if (pid == 0) {
        EXPECT(sw_carrier_pending_roles(k.src) == 0, 2);
        EXPECT(sw_carrier_pending_roles(k.dst) == 0, 3);
        EXPECT(sw_carrier_release(k.dst, NULL) == SW_OK, 4);
        _exit(0);
    }
    reap(pid, "fork during a marked copy here");
    sw_fault_resume();
    pthread_join(t, NULL);
    CHECK(k.st == SW_OK);
    check_untouched(k.src, 0);
    check_untouched(k.dst, 0);
    sw_fault_clear();
    sw_carrier_unref(k.src);
    sw_carrier_unref(k.dst);
}

int main(void)
{
    test_refusals();
    test_begin_end();
    for (int n = 2; n <= RACERS; n++)
        for (int round = 0; round < 50; round++)
            test_race(n);
    test_fork();
    test_fork_move_here();
    return check_report("carrier_pair");
}
