/* The core decides a release, a version step and a growth the way it
 * decides a slot access (issue 17): each refusal names its rule in
 * err->detail (sw_carrier_refusal), comes in the order the Python API has
 * always refused in (C-15 release: pending, then owned without owner
 * access, released or not; version: released, pending, owned, immutable;
 * C-12 growth: released, pending even under transfer access, owned, then
 * shrinking), changes nothing, and the check-only calls a binding asks
 * before work of its own (sw_carrier_check_release, _check_allocate) give
 * exactly the answer of the call they stand for. Public headers only
 * (binding.h for the pending marks and transfer access a binding's move
 * engine sets). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include <strideweave/strideweave.h>
#include <strideweave/binding.h>

enum { N = 4 };

static sw_carrier *cpu(int flags)
{
    sw_carrier *c = NULL;
    sw_error err;
    CHECK_EQ_I64(sw_cpu_new(N, SW_DT_FLOAT32, flags, &c, &err), SW_OK);
    return c;
}

/* A FileBacked of N slots (growth is its class's). */
static sw_carrier *file(int flags)
{
    sw_carrier *c = NULL;
    sw_error err;
    CHECK_EQ_I64(sw_file_backed_new(NULL, SW_DT_FLOAT32, flags, &c, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_allocate(c, N, &err), SW_OK);
    return c;
}

/* ---- "nothing changed" --------------------------------------------------- */

typedef struct snapshot {
    sw_carrier_state state;
    int64_t size;
} snapshot;

static snapshot snap(sw_carrier *c)
{
    snapshot s;
    memset(&s, 0, sizeof s);
    sw_carrier_get_state(c, &s.state);
    s.size = sw_carrier_size(c);
    return s;
}

static int same(snapshot a, snapshot b)
{
    return memcmp(&a.state, &b.state, sizeof a.state) == 0 && a.size == b.size;
}

/* The release check answers `code` / rule `why` (0: allowed) and sees
 * `released`; a refused release answers the same with the same words; a
 * refusal, and the check, change nothing. */
static void expect_release(sw_carrier *c, sw_status code, int why, int released)
{
    snapshot before = snap(c);
    sw_error check, rel;
    int seen = -7;
    CHECK_EQ_I64(sw_carrier_check_release(c, &seen, &check), code);
    CHECK_EQ_I64(seen, released);
    CHECK(same(before, snap(c)));
    if (code == SW_OK)
        return;
    CHECK_EQ_I64(check.detail, why);
    CHECK_EQ_I64(sw_carrier_release(c, &rel), code);
    CHECK_EQ_I64(rel.detail, why);
    CHECK_MSG(rel, check.msg);
    CHECK(same(before, snap(c)));
}

/* A version step refused with rule `why` changes nothing. */
static void expect_version_refused(sw_carrier *c, int why)
{
    snapshot before = snap(c);
    sw_error err;
    CHECK_EQ_I64(sw_carrier_increment_version(c, &err), SW_ESTATE);
    CHECK_EQ_I64(err.detail, why);
    CHECK(same(before, snap(c)));
}

/* The growth check answers `code` / rule `why` and saw size `size`; a
 * refused growth answers the same with the same words; neither changes
 * anything. */
static void expect_allocate(sw_carrier *c, int64_t slots, sw_status code, int why,
                            int64_t size)
{
    snapshot before = snap(c);
    sw_error check, grow;
    int64_t seen = -7;
    CHECK_EQ_I64(sw_carrier_check_allocate(c, slots, &seen, &check), code);
    CHECK_EQ_I64(seen, size);
    CHECK(same(before, snap(c)));
    if (code == SW_OK)
        return;
    CHECK_EQ_I64(check.detail, why);
    CHECK_EQ_I64(sw_carrier_allocate(c, slots, &grow), code);
    CHECK_EQ_I64(grow.detail, why);
    CHECK_MSG(grow, check.msg);
    CHECK(same(before, snap(c)));
}

/* ---- release (C-15) ------------------------------------------------------ */

static void test_c15_each_release_refusal(void)
{
    sw_error err;
    uint64_t token = 0;
    sw_carrier *c = cpu(0);
    expect_release(c, SW_OK, 0, 0);
    sw_carrier_mark_pending(c, SW_CARRIER_PENDING_SOURCE);
    expect_release(c, SW_ESTATE, SW_CARRIER_REFUSED_PENDING, 0);
    sw_carrier_unmark_pending(c, SW_CARRIER_PENDING_SOURCE);
    /* a destination's own transfer may write it, never release it */
    sw_carrier_mark_pending(c, SW_CARRIER_PENDING_DESTINATION);
    sw_carrier_begin_transfer(c);
    expect_release(c, SW_ESTATE, SW_CARRIER_REFUSED_PENDING, 0);
    sw_carrier_end_transfer(c);
    sw_carrier_unmark_pending(c, SW_CARRIER_PENDING_DESTINATION);

    CHECK_EQ_I64(sw_carrier_claim(c, &token, &err), SW_OK);
    expect_release(c, SW_ESTATE, SW_CARRIER_REFUSED_OWNED, 0);
    /* pending before owned */
    sw_carrier_mark_pending(c, SW_CARRIER_PENDING_SOURCE);
    expect_release(c, SW_ESTATE, SW_CARRIER_REFUSED_PENDING, 0);
    sw_carrier_unmark_pending(c, SW_CARRIER_PENDING_SOURCE);
    /* a move's commit checked ownership when the move started */
    sw_carrier_mark_pending(c, SW_CARRIER_PENDING_SOURCE);
    CHECK_EQ_I64(sw_carrier_release_moved(c, &err), SW_ESTATE);
    CHECK_EQ_I64(err.detail, SW_CARRIER_REFUSED_PENDING);
    sw_carrier_unmark_pending(c, SW_CARRIER_PENDING_SOURCE);

    CHECK_EQ_I64(sw_carrier_begin_owner_access(c, token, &err), SW_OK);
    expect_release(c, SW_OK, 0, 0);
    CHECK_EQ_I64(sw_carrier_release(c, &err), SW_OK);
    CHECK(sw_carrier_is_released(c));
    expect_release(c, SW_OK, 0, 1); /* again: nothing to do */
    CHECK_EQ_I64(sw_carrier_release(c, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_end_owner_access(c, token, &err), SW_OK);
    /* A released tier still owned: its owner's rule stands (the Python
     * API has always refused it; the old core let it through). */
    expect_release(c, SW_ESTATE, SW_CARRIER_REFUSED_OWNED, 1);
    CHECK_EQ_I64(sw_carrier_release_moved(c, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_relinquish(c, token, &err), SW_OK);
    expect_release(c, SW_OK, 0, 1);
    CHECK_EQ_I64(sw_carrier_release(c, &err), SW_OK);
    sw_carrier_unref(c);

    CHECK_EQ_I64(sw_carrier_check_release(NULL, NULL, &err), SW_ETYPE);
}

/* A STATE_ONLY carrier's storage is its binding's: the binding asks, frees
 * it, then the core marks it released. */
static void test_c15_state_only_release_is_asked_first(void)
{
    static const sw_carrier_class bare = {.name = "Py", .flags = SW_CARRIER_CLASS_STATE_ONLY};
    sw_error err;
    uint64_t token = 0;
    sw_carrier *c = NULL;
    CHECK_EQ_I64(sw_carrier_new(&bare, NULL, SW_DT_ANY, 0, &c, &err), SW_OK);
    expect_release(c, SW_OK, 0, 0);
    CHECK_EQ_I64(sw_carrier_claim(c, &token, &err), SW_OK);
    expect_release(c, SW_ESTATE, SW_CARRIER_REFUSED_OWNED, 0);
    CHECK_EQ_I64(sw_carrier_check_release(c, NULL, &err), SW_ESTATE); /* NULL: not asked */
    CHECK_EQ_I64(sw_carrier_relinquish(c, token, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_release(c, &err), SW_OK);
    expect_release(c, SW_OK, 0, 1);
    sw_carrier_unref(c);
}

/* ---- version ------------------------------------------------------------- */

static void test_version_step_names_its_refusal(void)
{
    sw_error err;
    uint64_t token = 0;
    sw_carrier *c = cpu(0);
    uint64_t v = sw_carrier_version(c);
    CHECK_EQ_I64(sw_carrier_increment_version(c, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_version(c), v + 1);
    sw_carrier_mark_pending(c, SW_CARRIER_PENDING_SOURCE);
    expect_version_refused(c, SW_CARRIER_REFUSED_PENDING);
    sw_carrier_unmark_pending(c, SW_CARRIER_PENDING_SOURCE);
    /* a move's own transfer of its destination: allowed, no step */
    sw_carrier_mark_pending(c, SW_CARRIER_PENDING_DESTINATION);
    expect_version_refused(c, SW_CARRIER_REFUSED_PENDING);
    sw_carrier_begin_transfer(c);
    CHECK_EQ_I64(sw_carrier_increment_version(c, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_version(c), v + 1);
    sw_carrier_end_transfer(c);
    sw_carrier_unmark_pending(c, SW_CARRIER_PENDING_DESTINATION);
    CHECK_EQ_I64(sw_carrier_claim(c, &token, &err), SW_OK);
    expect_version_refused(c, SW_CARRIER_REFUSED_OWNED);
    sw_carrier_mark_pending(c, SW_CARRIER_PENDING_SOURCE); /* pending before owned */
    expect_version_refused(c, SW_CARRIER_REFUSED_PENDING);
    sw_carrier_unmark_pending(c, SW_CARRIER_PENDING_SOURCE);
    CHECK_EQ_I64(sw_carrier_begin_owner_access(c, token, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_release(c, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_end_owner_access(c, token, &err), SW_OK);
    expect_version_refused(c, SW_CARRIER_REFUSED_RELEASED); /* released before owned */
    sw_carrier_unref(c);

    sw_carrier *ro = cpu(SW_CARRIER_IMMUTABLE);
    expect_version_refused(ro, SW_CARRIER_REFUSED_IMMUTABLE);
    sw_carrier_unref(ro);
}

/* ---- growth (C-12) ------------------------------------------------------- */

static void test_c12_each_growth_refusal(void)
{
    sw_error err;
    uint64_t token = 0;
    sw_carrier *c = file(0);
    expect_allocate(c, N, SW_OK, 0, N);
    expect_allocate(c, N + 4, SW_OK, 0, N);
    expect_allocate(c, N - 1, SW_EINVAL, SW_CARRIER_REFUSED_SHRINK, N);
    expect_allocate(c, -1, SW_EINVAL, SW_CARRIER_REFUSED_SHRINK, N);

    /* pending refuses even the move's own transfer: growth remaps the
     * file and changes the size the move checked */
    sw_carrier_mark_pending(c, SW_CARRIER_PENDING_DESTINATION);
    sw_carrier_begin_transfer(c);
    expect_allocate(c, N + 4, SW_ESTATE, SW_CARRIER_REFUSED_PENDING, 0);
    sw_carrier_end_transfer(c);
    sw_carrier_unmark_pending(c, SW_CARRIER_PENDING_DESTINATION);

    CHECK_EQ_I64(sw_carrier_claim(c, &token, &err), SW_OK);
    expect_allocate(c, N - 1, SW_ESTATE, SW_CARRIER_REFUSED_OWNED, 0); /* owned before shrink */
    sw_carrier_mark_pending(c, SW_CARRIER_PENDING_SOURCE); /* pending before owned */
    expect_allocate(c, N + 4, SW_ESTATE, SW_CARRIER_REFUSED_PENDING, 0);
    sw_carrier_unmark_pending(c, SW_CARRIER_PENDING_SOURCE);
    CHECK_EQ_I64(sw_carrier_begin_owner_access(c, token, &err), SW_OK);
    expect_allocate(c, N + 4, SW_OK, 0, N);
    CHECK_EQ_I64(sw_carrier_allocate(c, N + 4, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_size(c), N + 4);
    expect_allocate(c, N + 4, SW_OK, 0, N + 4);
    CHECK_EQ_I64(sw_carrier_release(c, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_end_owner_access(c, token, &err), SW_OK);
    /* released before owned */
    expect_allocate(c, N + 8, SW_ESTATE, SW_CARRIER_REFUSED_RELEASED, 0);
    sw_carrier_unref(c);

    /* a class without growth: refused with the core's words, no rule */
    sw_carrier *fixed = cpu(0);
    expect_allocate(fixed, N + 1, SW_EINVAL, 0, 0);
    sw_carrier_unref(fixed);

    CHECK_EQ_I64(sw_carrier_check_allocate(NULL, 1, NULL, &err), SW_ETYPE);
}

/* ---- threads ---------------------------------------------------------------
 * A binding asks, then acts; another thread releases meanwhile. Each
 * answer is one instant's: allowed, or RELEASED; a growth that was let
 * through grew the file, and the release waits for none of them. */
enum { ROUNDS = 2000 };

typedef struct grower {
    sw_carrier *c;
    atomic_int started;
    atomic_int bad;
} grower;

static void *grow_until_released(void *arg)
{
    grower *g = arg;
    sw_error err;
    atomic_store(&g->started, 1);
    for (int64_t i = 1; i <= ROUNDS; i++) {
        int64_t seen = -7;
        sw_status st = sw_carrier_check_allocate(g->c, N + i, &seen, &err);
        if (st == SW_OK)
            st = sw_carrier_allocate(g->c, N + i, &err);
        if (st != SW_OK && err.detail != SW_CARRIER_REFUSED_RELEASED)
            atomic_store(&g->bad, 1);
        if (st != SW_OK)
            break;
    }
    return NULL;
}

static void test_c12_growth_while_another_thread_releases(void)
{
    grower g = {.c = file(0)};
    pthread_t t;
    sw_error err;
    CHECK_EQ_I64(pthread_create(&t, NULL, grow_until_released, &g), 0);
    while (!atomic_load(&g.started))
        sched_yield();
    CHECK_EQ_I64(sw_carrier_release(g.c, &err), SW_OK);
    pthread_join(t, NULL);
    CHECK_EQ_I64(atomic_load(&g.bad), 0);
    int released = 0;
    CHECK_EQ_I64(sw_carrier_check_release(g.c, &released, &err), SW_OK);
    CHECK_EQ_I64(released, 1);
    sw_carrier_unref(g.c);
}

int main(void)
{
    test_c15_each_release_refusal();
    test_c15_state_only_release_is_asked_first();
    test_version_step_names_its_refusal();
    test_c12_each_growth_refusal();
    test_c12_growth_while_another_thread_releases();
    return check_report("carrier_check_release");
}
