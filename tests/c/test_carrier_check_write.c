/* The slot checks a binding asks before work of its own (issue 17):
 * sw_carrier_check_write_slot / _check_read_slot decide exactly what
 * sw_carrier_write / _read would refuse, in their order (released,
 * unavailable, pending, owned, immutable, range: C-5 checks 1, 3 and 4 as
 * the Python API has always said them), name the rule in err->detail,
 * change nothing, and stay right while other threads release the carrier
 * or mark it pending. Public headers only (binding.h for the pending
 * marks a binding's move engine sets). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include <strideweave/strideweave.h>
#include <strideweave/binding.h>

enum { N = 4 };

/* ---- a foreign class that can be out of reach (like an evicted tier) --- */

typedef struct far_impl {
    float slots[N];
    int away; /* guarded by the carrier's mutex: the core reads it there */
} far_impl;

static const char away_words[] = "this Far carrier is away: bring it back first";

static int64_t far_size(void *impl) { (void)impl; return N; }
static sw_status far_read(void *impl, int64_t slot, int64_t n, void *out, sw_error *err)
{
    (void)err;
    memcpy(out, ((far_impl *)impl)->slots + slot, (size_t)n * sizeof(float));
    return SW_OK;
}
static sw_status far_write(void *impl, int64_t slot, int64_t n, const void *in, sw_error *err)
{
    (void)err;
    memcpy(((far_impl *)impl)->slots + slot, in, (size_t)n * sizeof(float));
    return SW_OK;
}
static void far_release(void *impl) { (void)impl; }
static const char *far_unavailable(void *impl)
{
    return ((far_impl *)impl)->away ? away_words : NULL;
}

static const sw_carrier_class far_class = {
    .name = "Far", .size = far_size, .read = far_read, .write = far_write,
    .release = far_release, .unavailable = far_unavailable,
};

static sw_carrier *far_new(far_impl *impl, int flags)
{
    sw_carrier *c = NULL;
    sw_error err;
    CHECK_EQ_I64(sw_carrier_new(&far_class, impl, SW_DT_FLOAT32, flags, &c, &err), SW_OK);
    return c;
}

static sw_carrier *cpu(int64_t n, int flags)
{
    sw_carrier *c = NULL;
    sw_error err;
    CHECK_EQ_I64(sw_cpu_new(n, SW_DT_FLOAT32, flags, &c, &err), SW_OK);
    return c;
}

/* ---- "nothing changed" --------------------------------------------------- */

typedef struct snapshot {
    sw_carrier_state state;
    int64_t size;
    int is_mutable;
    float slots[N];
} snapshot;

static void snap(sw_carrier *c, snapshot *s)
{
    memset(s, 0, sizeof *s);
    sw_carrier_get_state(c, &s->state);
    s->size = sw_carrier_size(c);
    s->is_mutable = sw_carrier_is_mutable(c);
    const float *p = sw_cpu_pointer(c);
    if (p)
        memcpy(s->slots, p, sizeof s->slots);
}

static int same(const snapshot *a, const snapshot *b)
{
    return memcmp(&a->state, &b->state, sizeof a->state) == 0 && a->size == b->size &&
           a->is_mutable == b->is_mutable && memcmp(a->slots, b->slots, sizeof a->slots) == 0;
}

/* The check of `slot` refuses with `code` and rule `why` (0: allows it),
 * the write itself refuses the same way with the same words, and neither
 * changes anything (a check that allows changes nothing either). */
static void expect_write(sw_carrier *c, int64_t slot, sw_status code, int why, int64_t size)
{
    snapshot before, after;
    sw_error check, write;
    int64_t seen = -7;
    snap(c, &before);
    CHECK_EQ_I64(sw_carrier_check_write_slot(c, slot, &seen, &check), code);
    snap(c, &after);
    CHECK(same(&before, &after));
    CHECK_EQ_I64(seen, size);
    if (code == SW_OK)
        return;
    CHECK_EQ_I64(check.detail, why);
    float v = 99.0f;
    CHECK_EQ_I64(sw_carrier_write(c, slot, 1, &v, &write), code);
    CHECK_EQ_I64(write.detail, why);
    CHECK_MSG(write, check.msg);
    snap(c, &after);
    CHECK(same(&before, &after));
}

static void expect_read(sw_carrier *c, int64_t slot, sw_status code, int why)
{
    snapshot before, after;
    sw_error check, read;
    snap(c, &before);
    CHECK_EQ_I64(sw_carrier_check_read_slot(c, slot, NULL, &check), code);
    if (code != SW_OK) {
        CHECK_EQ_I64(check.detail, why);
        float v;
        CHECK_EQ_I64(sw_carrier_read(c, slot, 1, &v, &read), code);
        CHECK_EQ_I64(read.detail, why);
        CHECK_MSG(read, check.msg);
    }
    snap(c, &after);
    CHECK(same(&before, &after));
}

/* ---- each refusal --------------------------------------------------------- */

static void test_c5_each_write_refusal(void)
{
    sw_error err;
    sw_carrier *c = cpu(N, 0);
    expect_write(c, 0, SW_OK, 0, N);
    expect_write(c, N - 1, SW_OK, 0, N);
    expect_write(c, N, SW_ERANGE, SW_CARRIER_REFUSED_RANGE, N);
    expect_write(c, -1, SW_ERANGE, SW_CARRIER_REFUSED_RANGE, N);
    expect_write(c, INT64_MAX, SW_ERANGE, SW_CARRIER_REFUSED_RANGE, N);
    expect_write(c, INT64_MIN, SW_ERANGE, SW_CARRIER_REFUSED_RANGE, N);

    sw_carrier_mark_pending(c, SW_CARRIER_PENDING_SOURCE);
    expect_write(c, 0, SW_ESTATE, SW_CARRIER_REFUSED_PENDING, N);
    sw_carrier_unmark_pending(c, SW_CARRIER_PENDING_SOURCE);
    /* a move's own transfer writes its destination */
    sw_carrier_mark_pending(c, SW_CARRIER_PENDING_DESTINATION);
    expect_write(c, 0, SW_ESTATE, SW_CARRIER_REFUSED_PENDING, N);
    sw_carrier_begin_transfer(c);
    expect_write(c, 0, SW_OK, 0, N);
    sw_carrier_end_transfer(c);
    sw_carrier_unmark_pending(c, SW_CARRIER_PENDING_DESTINATION);

    uint64_t token = 0;
    CHECK_EQ_I64(sw_carrier_claim(c, &token, &err), SW_OK);
    expect_write(c, 0, SW_ESTATE, SW_CARRIER_REFUSED_OWNED, N);
    CHECK_EQ_I64(sw_carrier_begin_owner_access(c, token, &err), SW_OK);
    expect_write(c, 0, SW_OK, 0, N);
    CHECK_EQ_I64(sw_carrier_end_owner_access(c, token, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_relinquish(c, token, &err), SW_OK);

    CHECK_EQ_I64(sw_carrier_release(c, &err), SW_OK);
    expect_write(c, 0, SW_ESTATE, SW_CARRIER_REFUSED_RELEASED, 0);
    sw_carrier_unref(c);

    sw_carrier *ro = cpu(N, SW_CARRIER_IMMUTABLE);
    expect_write(ro, 0, SW_ESTATE, SW_CARRIER_REFUSED_IMMUTABLE, N);
    sw_carrier_unref(ro);

    far_impl impl = {.away = 1};
    sw_carrier *far = far_new(&impl, 0);
    expect_write(far, 0, SW_ESTATE, SW_CARRIER_REFUSED_UNAVAILABLE, N);
    CHECK_EQ_I64(sw_carrier_check_write_slot(far, 0, NULL, &err), SW_ESTATE);
    CHECK_MSG(err, away_words); /* the class's words as they are */
    impl.away = 0;
    expect_write(far, 0, SW_OK, 0, N);
    sw_carrier_unref(far);

    CHECK_EQ_I64(sw_carrier_check_write_slot(NULL, 0, NULL, &err), SW_ETYPE);
    CHECK_EQ_I64(sw_carrier_check_read_slot(NULL, 0, NULL, &err), SW_ETYPE);
}

static void test_c5_each_read_refusal(void)
{
    sw_error err;
    sw_carrier *c = cpu(N, SW_CARRIER_IMMUTABLE); /* immutability never refuses a read */
    expect_read(c, 0, SW_OK, 0);
    expect_read(c, N, SW_ERANGE, SW_CARRIER_REFUSED_RANGE);
    sw_carrier_mark_pending(c, SW_CARRIER_PENDING_SOURCE); /* a source stays readable */
    expect_read(c, 0, SW_OK, 0);
    sw_carrier_unmark_pending(c, SW_CARRIER_PENDING_SOURCE);
    sw_carrier_mark_pending(c, SW_CARRIER_PENDING_DESTINATION);
    expect_read(c, 0, SW_ESTATE, SW_CARRIER_REFUSED_PENDING);
    expect_read(c, N, SW_ESTATE, SW_CARRIER_REFUSED_PENDING); /* before range */
    sw_carrier_begin_transfer(c);
    expect_read(c, 0, SW_OK, 0);
    sw_carrier_end_transfer(c);
    sw_carrier_unmark_pending(c, SW_CARRIER_PENDING_DESTINATION);
    uint64_t token = 0; /* owned: reads stay allowed */
    CHECK_EQ_I64(sw_carrier_claim(c, &token, &err), SW_OK);
    expect_read(c, 0, SW_OK, 0);
    CHECK_EQ_I64(sw_carrier_relinquish(c, token, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_release(c, &err), SW_OK);
    expect_read(c, N, SW_ESTATE, SW_CARRIER_REFUSED_RELEASED);
    sw_carrier_unref(c);

    far_impl impl = {.away = 1};
    sw_carrier *far = far_new(&impl, 0);
    expect_read(far, N, SW_ESTATE, SW_CARRIER_REFUSED_UNAVAILABLE);
    sw_carrier_unref(far);
}

/* An evicted Evictable is out of reach before any other rule but release. */
static void test_c5_evicted_evictable_is_unavailable(void)
{
    sw_error err;
    sw_carrier *p = cpu(N, 0), *s = NULL, *e = NULL;
    CHECK_EQ_I64(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &s, &err), SW_OK);
    CHECK_EQ_I64(sw_evictable_new(p, s, NULL, &e, &err), SW_OK);
    expect_write(e, N, SW_ERANGE, SW_CARRIER_REFUSED_RANGE, N);
    CHECK_EQ_I64(sw_evictable_evict(e, &err), SW_OK);
    expect_write(e, 0, SW_ESTATE, SW_CARRIER_REFUSED_UNAVAILABLE, N);
    expect_write(e, N, SW_ESTATE, SW_CARRIER_REFUSED_UNAVAILABLE, N); /* before range */
    CHECK_EQ_I64(sw_carrier_check_write_slot(e, 0, NULL, &err), SW_ESTATE);
    CHECK_MSG(err, "this Evictable is evicted: call promote() before reading or writing its "
                   "slots");
    expect_read(e, N, SW_ESTATE, SW_CARRIER_REFUSED_UNAVAILABLE);
    sw_carrier_mark_pending(e, SW_CARRIER_PENDING_DESTINATION); /* before pending */
    expect_write(e, 0, SW_ESTATE, SW_CARRIER_REFUSED_UNAVAILABLE, N);
    expect_read(e, 0, SW_ESTATE, SW_CARRIER_REFUSED_UNAVAILABLE);
    sw_carrier_unmark_pending(e, SW_CARRIER_PENDING_DESTINATION);
    CHECK_EQ_I64(sw_evictable_promote(e, &err), SW_OK);
    expect_write(e, 0, SW_OK, 0, N);
    CHECK_EQ_I64(sw_carrier_release(e, &err), SW_OK);
    expect_write(e, 0, SW_ESTATE, SW_CARRIER_REFUSED_RELEASED, 0);
    sw_carrier_unref(e);
    sw_carrier_unref(s);
    sw_carrier_unref(p);
}

/* ---- the order -------------------------------------------------------------
 * Each step breaks every rule from one on, and the first of them refuses:
 * released, unavailable, pending, owned, immutable, range. */
static void test_c5_refusal_order(void)
{
    sw_error err;
    far_impl impl = {.away = 1};
    sw_carrier *c = far_new(&impl, SW_CARRIER_IMMUTABLE);
    uint64_t token = 0;
    CHECK_EQ_I64(sw_carrier_claim(c, &token, &err), SW_OK);
    sw_carrier_mark_pending(c, SW_CARRIER_PENDING_SOURCE);
    expect_write(c, N, SW_ESTATE, SW_CARRIER_REFUSED_UNAVAILABLE, N);
    impl.away = 0;
    expect_write(c, N, SW_ESTATE, SW_CARRIER_REFUSED_PENDING, N);
    sw_carrier_unmark_pending(c, SW_CARRIER_PENDING_SOURCE);
    expect_write(c, N, SW_ESTATE, SW_CARRIER_REFUSED_OWNED, N);
    CHECK_EQ_I64(sw_carrier_relinquish(c, token, &err), SW_OK);
    expect_write(c, N, SW_ESTATE, SW_CARRIER_REFUSED_IMMUTABLE, N);
    sw_carrier_unref(c);

    /* released first of all: owned (released through owner access),
     * immutable, out of reach, out of range */
    far_impl gone = {.away = 1};
    c = far_new(&gone, SW_CARRIER_IMMUTABLE);
    CHECK_EQ_I64(sw_carrier_claim(c, &token, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_begin_owner_access(c, token, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_release(c, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_end_owner_access(c, token, &err), SW_OK);
    expect_write(c, N, SW_ESTATE, SW_CARRIER_REFUSED_RELEASED, 0);
    expect_read(c, N, SW_ESTATE, SW_CARRIER_REFUSED_RELEASED);
    sw_carrier_unref(c);
}

/* A STATE_ONLY carrier's size (and so its range) is its binding's: the
 * check says the state rules only, and that it saw no size. */
static void test_c5_state_only_leaves_range_to_binding(void)
{
    static const sw_carrier_class bare = {.name = "Py", .flags = SW_CARRIER_CLASS_STATE_ONLY};
    sw_error err;
    sw_carrier *c = NULL;
    CHECK_EQ_I64(sw_carrier_new(&bare, NULL, SW_DT_ANY, 0, &c, &err), SW_OK);
    expect_write(c, 1000, SW_OK, 0, -1);
    CHECK_EQ_I64(sw_carrier_check_read_slot(c, -5, NULL, &err), SW_OK);
    sw_carrier_mark_pending(c, SW_CARRIER_PENDING_DESTINATION);
    CHECK_EQ_I64(sw_carrier_check_write_slot(c, 0, NULL, &err), SW_ESTATE);
    CHECK_EQ_I64(err.detail, SW_CARRIER_REFUSED_PENDING);
    CHECK_EQ_I64(sw_carrier_check_read_slot(c, 0, NULL, &err), SW_ESTATE);
    CHECK_EQ_I64(err.detail, SW_CARRIER_REFUSED_PENDING);
    sw_carrier_unmark_pending(c, SW_CARRIER_PENDING_DESTINATION);
    CHECK_EQ_I64(sw_carrier_release(c, &err), SW_OK);
    int64_t seen = -7;
    CHECK_EQ_I64(sw_carrier_check_write_slot(c, 0, &seen, &err), SW_ESTATE);
    CHECK_EQ_I64(err.detail, SW_CARRIER_REFUSED_RELEASED);
    CHECK_EQ_I64(seen, 0);
    sw_carrier_unref(c);
}

/* A claim's refusals name their rule too, in its order: released, owned
 * (even through owner access), pending. */
static void test_c13_claim_names_its_refusal(void)
{
    sw_error err;
    uint64_t token = 0, again = 0;
    sw_carrier *c = cpu(N, 0);
    sw_carrier_mark_pending(c, SW_CARRIER_PENDING_SOURCE);
    CHECK_EQ_I64(sw_carrier_claim(c, &again, &err), SW_ESTATE);
    CHECK_EQ_I64(err.detail, SW_CARRIER_REFUSED_PENDING);
    sw_carrier_unmark_pending(c, SW_CARRIER_PENDING_SOURCE);
    CHECK_EQ_I64(sw_carrier_claim(c, &token, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_begin_owner_access(c, token, &err), SW_OK);
    sw_carrier_mark_pending(c, SW_CARRIER_PENDING_SOURCE);
    CHECK_EQ_I64(sw_carrier_claim(c, &again, &err), SW_ESTATE);
    CHECK_EQ_I64(err.detail, SW_CARRIER_REFUSED_OWNED);
    sw_carrier_unmark_pending(c, SW_CARRIER_PENDING_SOURCE);
    CHECK_EQ_I64(sw_carrier_release(c, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_claim(c, &again, &err), SW_ESTATE);
    CHECK_EQ_I64(err.detail, SW_CARRIER_REFUSED_RELEASED);
    CHECK_EQ_I64(again, 0);
    CHECK_EQ_I64(sw_carrier_end_owner_access(c, token, &err), SW_OK);
    sw_carrier_unref(c);
}

/* ---- threads ---------------------------------------------------------------
 * Writers check and write while another thread releases (or marks the
 * carrier pending and clears it): every answer is one instant's, so a
 * writer sees allowed or the rule of that instant, never an index out of
 * range of a carrier that was released under it (size 0), and the
 * version counts exactly the writes that were let through. */
enum { WRITERS = 3, ROUNDS = 4000, SLOTS = 64 };

typedef struct race {
    sw_carrier *c;
    atomic_int started;
    atomic_int stop;
    atomic_long written;
    atomic_int bad;
    int other; /* the refusal the other thread causes */
} race;

static void *writer(void *arg)
{
    race *r = arg;
    int refused = 0;
    atomic_fetch_add(&r->started, 1);
    for (int i = 0; i < ROUNDS; i++) {
        sw_error err;
        float v = (float)i;
        int64_t slot = i % SLOTS;
        sw_status st = i % 2 ? sw_carrier_check_write_slot(r->c, slot, NULL, &err)
                             : sw_carrier_write(r->c, slot, 1, &v, &err);
        if (st == SW_OK && !(i % 2))
            atomic_fetch_add(&r->written, 1);
        if (st != SW_OK && (st != SW_ESTATE || err.detail != r->other))
            atomic_fetch_add(&r->bad, 1);
        /* a release is for good: once seen, every later answer says it */
        if (r->other == SW_CARRIER_REFUSED_RELEASED) {
            if (refused && st == SW_OK)
                atomic_fetch_add(&r->bad, 1);
            refused |= st != SW_OK;
        }
    }
    return NULL;
}

static void wait_started(race *r)
{
    while (atomic_load(&r->started) < WRITERS)
        sched_yield();
}

static void *releaser(void *arg)
{
    race *r = arg;
    wait_started(r);
    sw_error err;
    if (sw_carrier_release(r->c, &err) != SW_OK)
        atomic_fetch_add(&r->bad, 1);
    return NULL;
}

static void *marker(void *arg)
{
    race *r = arg;
    wait_started(r);
    for (int i = 0; i < ROUNDS / 4; i++) {
        sw_carrier_mark_pending(r->c, SW_CARRIER_PENDING_SOURCE);
        sw_carrier_unmark_pending(r->c, SW_CARRIER_PENDING_SOURCE);
    }
    return NULL;
}

static void run_race(void *(*other)(void *), int refusal)
{
    race r = {.c = cpu(SLOTS, 0), .other = refusal};
    pthread_t t[WRITERS + 1];
    for (int i = 0; i < WRITERS; i++)
        pthread_create(&t[i], NULL, writer, &r);
    pthread_create(&t[WRITERS], NULL, other, &r);
    for (int i = 0; i <= WRITERS; i++)
        pthread_join(t[i], NULL);
    CHECK_EQ_I64(atomic_load(&r.bad), 0);
    CHECK_EQ_I64(sw_carrier_version(r.c), atomic_load(&r.written));
    CHECK(!sw_carrier_is_pending(r.c));
    sw_carrier_unref(r.c);
}

static void test_c5_checks_while_another_thread_releases(void)
{
    run_race(releaser, SW_CARRIER_REFUSED_RELEASED);
}

static void test_c5_checks_while_another_thread_marks_pending(void)
{
    run_race(marker, SW_CARRIER_REFUSED_PENDING);
}

int main(void)
{
    test_c5_each_write_refusal();
    test_c5_each_read_refusal();
    test_c5_evicted_evictable_is_unavailable();
    test_c5_refusal_order();
    test_c5_state_only_leaves_range_to_binding();
    test_c13_claim_names_its_refusal();
    test_c5_checks_while_another_thread_releases();
    test_c5_checks_while_another_thread_marks_pending();
    return check_report("carrier_check_write");
}
