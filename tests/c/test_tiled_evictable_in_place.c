/* Which tiles are still held in place by the tier that was full at
 * construction (sw_te_tile_state.in_place), and the route hook the core
 * asks, from that state and under the lock that marks a request, before a
 * tile copies between tile-sized stores of the tiers (X-14 up front for a
 * binding). Checked: in_place after construction, eviction, promotion,
 * writes, materialization and a policy's moves inside projections (the
 * moves a binding never saw); the hook is asked exactly when a copy
 * leaves a tile-sized store, once per request, on the issuing thread (a
 * pool thread for the _async forms) with no core lock held and the tiles
 * pending; its refusal fails the request, a write's promotion and a
 * projection's policy promotion with nothing changed and no store made;
 * a _start call's handle reports how many tiles it copies (0 refused). */
#include <pthread.h>
#include <stdlib.h>

#include "check.h"
#include <strideweave/strideweave.h>

#define TILES 4
#define TILE 2
#define N (TILES * TILE)

typedef struct hooks_seen {
    pthread_mutex_t mu;
    sw_tiled_evictable *te;   /* once made */
    int routes, stores;       /* hook calls */
    int refuse;               /* the route hook refuses */
    int lock_free, pending;   /* in every route call: no core lock held, tile 0 pending */
    int expect_pending_tile;  /* the tile the route call looks at */
    sw_carrier *from, *to;    /* the last route call's prototypes */
    pthread_t thread;         /* the last route call's thread */
} hooks_seen;

static sw_status route_hook(sw_carrier *from, sw_carrier *to, void *user, sw_error *err)
{
    hooks_seen *h = user;
    /* tile_state takes the TiledEvictable's lock: a held lock deadlocks. */
    sw_te_tile_state st;
    int64_t c[1] = {h->expect_pending_tile};
    int ok = sw_tiled_evictable_tile_state(h->te, c, &st, NULL) == SW_OK;
    pthread_mutex_lock(&h->mu);
    h->routes++;
    h->lock_free += ok;
    h->pending += ok && st.pending;
    h->from = from;
    h->to = to;
    h->thread = pthread_self();
    int refuse = h->refuse;
    pthread_mutex_unlock(&h->mu);
    if (refuse)
        return sw_error_set(err, SW_ENOTSUP, "no way between these tiers");
    return SW_OK;
}

/* Counts fresh stores; the core makes them itself (core_classes). */
static sw_status store_hook(sw_carrier *prototype, int secondary, int64_t size, sw_dtype dtype,
                            int zero, void *user, sw_carrier **out, sw_error *err)
{
    (void)prototype, (void)secondary, (void)size, (void)dtype, (void)zero, (void)out, (void)err;
    hooks_seen *h = user;
    pthread_mutex_lock(&h->mu);
    h->stores++;
    pthread_mutex_unlock(&h->mu);
    return SW_ENOTSUP;
}

static int routes(hooks_seen *h)
{
    pthread_mutex_lock(&h->mu);
    int n = h->routes;
    pthread_mutex_unlock(&h->mu);
    return n;
}

static sw_te_tile_state state(sw_tiled_evictable *te, int64_t t)
{
    sw_te_tile_state st;
    memset(&st, 0xff, sizeof st);
    CHECK(sw_tiled_evictable_tile_state(te, &t, &st, NULL) == SW_OK);
    return st;
}

/* in_place of every tile, as a bit mask (tile t: bit t). */
static int in_place_mask(sw_tiled_evictable *te)
{
    int m = 0;
    for (int64_t t = 0; t < TILES; t++)
        m |= (state(te, t).in_place ? 1 : 0) << t;
    return m;
}

static sw_tiled_evictable *make(hooks_seen *h, int primary_full)
{
    sw_carrier *p = NULL, *s = NULL;
    sw_cpu_new(primary_full ? N : 0, SW_DT_FLOAT32, 0, &p, NULL);
    sw_cpu_new(primary_full ? 0 : N, SW_DT_FLOAT32, 0, &s, NULL);
    float v[N];
    for (int i = 0; i < N; i++)
        v[i] = 1.0f + (float)i;
    CHECK(sw_carrier_write(primary_full ? p : s, 0, N, v, NULL) == SW_OK);
    sw_te_tier_hooks hooks = {.store = store_hook, .route = route_hook, .user = h,
                              .core_classes = 1};
    sw_tiled_evictable *te = NULL;
    const int64_t grid[1] = {TILES}, tile[1] = {TILE};
    CHECK(sw_tiled_evictable_new_bound(p, s, 1, grid, tile, &hooks, &te, NULL) == SW_OK);
    sw_carrier_unref(p);
    sw_carrier_unref(s);
    h->te = te;
    return te;
}

static void hooks_init(hooks_seen *h)
{
    memset(h, 0, sizeof *h);
    pthread_mutex_init(&h->mu, NULL);
}

static float value_at(sw_tiled_evictable *te, int64_t slot)
{
    float v = -1.0f;
    CHECK(sw_tiled_evictable_read(te, slot, 1, &v, NULL) == SW_OK);
    return v;
}

/* A full primary: tiles in place until they move; the hook is asked only
 * for copies out of tile-sized stores. */
static void test_residency(void)
{
    hooks_seen h;
    hooks_init(&h);
    sw_tiled_evictable *te = make(&h, 1);
    CHECK_EQ_I64(in_place_mask(te), 0xf);
    CHECK_EQ_I64(state(te, 0).location, SW_TE_PRIMARY);

    int64_t t0[1] = {0}, t01[2] = {0, 1};
    CHECK(sw_tiled_evictable_evict(te, t0, 1, NULL) == SW_OK); /* out of the full tier */
    CHECK_EQ_I64(routes(&h), 0);
    CHECK_EQ_I64(in_place_mask(te), 0xe);
    CHECK_EQ_I64(state(te, 0).location, SW_TE_SECONDARY);

    h.expect_pending_tile = 0;
    CHECK(sw_tiled_evictable_promote(te, t0, 1, NULL) == SW_OK); /* tile-sized -> fresh */
    CHECK_EQ_I64(routes(&h), 1);
    CHECK(h.from == sw_tiled_evictable_secondary(te) && h.to == sw_tiled_evictable_primary(te));
    CHECK_EQ_I64(h.lock_free, 1);
    CHECK_EQ_I64(h.pending, 1);
    CHECK_EQ_I64(in_place_mask(te), 0xe);
    CHECK_EQ_I64(state(te, 0).location, SW_TE_PRIMARY);

    /* A write into a primary tile keeps it where it is. */
    float nine = 9.0f;
    CHECK(sw_tiled_evictable_write(te, 2, 1, &nine, NULL) == SW_OK);
    CHECK_EQ_I64(in_place_mask(te), 0xe);

    /* Refused: tile 0 leaves a tile-sized store (tile 1 is in place); once
     * for the request, nothing changed, no store made. */
    h.refuse = 1;
    int stores = h.stores;
    uint64_t version = sw_tiled_evictable_version(te);
    sw_error err;
    CHECK_EQ_I64(sw_tiled_evictable_evict(te, t01, 2, &err), SW_ENOTSUP);
    CHECK_MSG(err, "no way between these tiers");
    CHECK_EQ_I64(routes(&h), 2);
    CHECK(h.from == sw_tiled_evictable_primary(te) && h.to == sw_tiled_evictable_secondary(te));
    CHECK_EQ_I64(h.stores, stores);
    CHECK_EQ_I64(state(te, 0).location, SW_TE_PRIMARY);
    CHECK_EQ_I64(state(te, 1).location, SW_TE_PRIMARY);
    CHECK_EQ_I64(state(te, 0).pending, 0);
    CHECK_EQ_I64(in_place_mask(te), 0xe);
    CHECK_EQ_I64(sw_tiled_evictable_version(te), version);

    /* Only in-place tiles: not asked, even while it would refuse. */
    int64_t t3[1] = {3};
    CHECK(sw_tiled_evictable_evict(te, t3, 1, NULL) == SW_OK);
    CHECK_EQ_I64(routes(&h), 2);
    CHECK_EQ_I64(in_place_mask(te), 0x6);

    /* _start: the handle fails, reporting no copy; accepted: its count. */
    sw_te_work *w = NULL;
    CHECK(sw_tiled_evictable_evict_start(te, t01, 2, &w, NULL) == SW_OK);
    CHECK_EQ_I64(sw_te_work_copies(w), 0);
    CHECK_EQ_I64(sw_te_work_wait(w, NULL, &err), SW_ENOTSUP);
    sw_te_work_unref(w);
    CHECK_EQ_I64(state(te, 0).location, SW_TE_PRIMARY);
    h.refuse = 0;
    CHECK(sw_tiled_evictable_evict_start(te, t01, 2, &w, NULL) == SW_OK);
    CHECK_EQ_I64(sw_te_work_copies(w), 2);
    CHECK(sw_te_work_wait(w, NULL, NULL) == SW_OK);
    sw_te_work_unref(w);
    CHECK_EQ_I64(in_place_mask(te), 0x4);
    CHECK_EQ_I64(sw_te_work_copies(NULL), 0);

    /* A write's promotion out of a tile-sized store asks too. */
    h.refuse = 1;
    int before = routes(&h);
    version = sw_tiled_evictable_version(te);
    CHECK_EQ_I64(sw_tiled_evictable_write(te, 0, 1, &nine, &err), SW_ENOTSUP);
    CHECK_EQ_I64(routes(&h), before + 1);
    CHECK_EQ_I64(state(te, 0).location, SW_TE_SECONDARY);
    CHECK_EQ_I64(sw_tiled_evictable_version(te), version);
    CHECK(value_at(te, 0) == 1.0f);
    h.refuse = 0;
    CHECK(sw_tiled_evictable_write(te, 0, 1, &nine, NULL) == SW_OK);
    CHECK(value_at(te, 0) == 9.0f);
    CHECK_EQ_I64(state(te, 0).location, SW_TE_PRIMARY);

    /* The _async form asks on the pool thread. */
    before = routes(&h);
    CHECK(sw_tiled_evictable_evict_async(te, t0, 1, &w, NULL) == SW_OK);
    CHECK(sw_te_work_wait(w, NULL, NULL) == SW_OK);
    sw_te_work_unref(w);
    CHECK_EQ_I64(routes(&h), before + 1);
    pthread_mutex_lock(&h.mu);
    CHECK(!pthread_equal(h.thread, pthread_self()));
    pthread_mutex_unlock(&h.mu);
    CHECK(sw_tiled_evictable_release(te, NULL) == SW_OK);
    sw_tiled_evictable_unref(te);
}

/* A full secondary; implicit tiles (allocate_like's) are never in place. */
static void test_secondary_and_implicit(void)
{
    hooks_seen h;
    hooks_init(&h);
    sw_tiled_evictable *te = make(&h, 0);
    CHECK_EQ_I64(in_place_mask(te), 0xf);
    CHECK_EQ_I64(state(te, 1).location, SW_TE_SECONDARY);
    float two = 2.0f;
    CHECK(sw_tiled_evictable_write(te, 2, 1, &two, NULL) == SW_OK); /* promotes tile 1 */
    CHECK_EQ_I64(routes(&h), 0);
    CHECK_EQ_I64(in_place_mask(te), 0xd);
    CHECK(sw_tiled_evictable_release(te, NULL) == SW_OK);
    sw_tiled_evictable_unref(te);

    sw_carrier *p = NULL, *s = NULL;
    sw_cpu_new(0, SW_DT_FLOAT32, 0, &p, NULL);
    sw_cpu_new(0, SW_DT_FLOAT32, 0, &s, NULL);
    const int64_t grid[1] = {TILES}, tile[1] = {TILE};
    CHECK(sw_tiled_evictable_new(p, s, 1, grid, tile, &te, NULL) == SW_OK);
    sw_tiled_evictable *like = NULL;
    CHECK(sw_tiled_evictable_allocate_like(te, 0, &like, NULL) == SW_OK);
    CHECK_EQ_I64(state(like, 0).location, SW_TE_IMPLICIT);
    CHECK_EQ_I64(in_place_mask(like), 0);
    CHECK_EQ_I64(in_place_mask(te), 0); /* all invalid */
    sw_tiled_evictable_release(like, NULL);
    sw_tiled_evictable_unref(like);
    sw_tiled_evictable_release(te, NULL);
    sw_tiled_evictable_unref(te);
    sw_carrier_unref(p);
    sw_carrier_unref(s);
}

/* A policy that promotes, then evicts tile 0 inside projections. */
typedef struct script {
    int which; /* SW_TE_PLAN_PROMOTE or _EVICT, -1: nothing */
} script;

static sw_status scripted(const int64_t *required, int64_t n, int32_t rank, const char *purpose,
                          sw_te_plan *plan, void *user, sw_error *err)
{
    (void)required, (void)n, (void)rank, (void)purpose;
    script *s = user;
    const int64_t c[1] = {0};
    return s->which < 0 ? SW_OK : sw_te_plan_add(plan, (sw_te_plan_set)s->which, c, err);
}

static sw_status project_tile(sw_tiled_evictable *te, int64_t t, sw_error *err)
{
    const int64_t *coords[1] = {&t};
    const int64_t counts[1] = {1};
    sw_tile_selection sel = {.rank = 1, .coords = coords, .counts = counts};
    sw_tensor *out = NULL;
    sw_status st = sw_tiled_evictable_project(te, NULL, 0, &sel, NULL, &out, err);
    if (out)
        sw_tensor_unref(out);
    return st;
}

/* The moves a binding never sees: a policy's, inside projections. After
 * them the tile is no longer in place and its next copy asks the hook. */
static void test_policy_moves(void)
{
    hooks_seen h;
    hooks_init(&h);
    sw_tiled_evictable *te = make(&h, 0);
    script s = {SW_TE_PLAN_PROMOTE};
    CHECK(sw_tiled_evictable_set_policy(te, &(sw_te_policy){scripted, &s}, NULL) == SW_OK);
    CHECK(project_tile(te, 1, NULL) == SW_OK); /* promotes tile 0 out of the full tier */
    CHECK_EQ_I64(routes(&h), 0);
    CHECK_EQ_I64(state(te, 0).location, SW_TE_PRIMARY);
    CHECK_EQ_I64(in_place_mask(te), 0xe);
    s.which = SW_TE_PLAN_EVICT;
    CHECK(project_tile(te, 1, NULL) == SW_OK); /* evicts tile 0 into a tile-sized store */
    CHECK_EQ_I64(routes(&h), 1);
    CHECK_EQ_I64(state(te, 0).location, SW_TE_SECONDARY);
    CHECK_EQ_I64(in_place_mask(te), 0xe);

    /* Back in the secondary, but not in place: promoting it asks. */
    s.which = -1;
    h.refuse = 1;
    int stores = h.stores;
    int64_t t0[1] = {0};
    CHECK_EQ_I64(sw_tiled_evictable_promote(te, t0, 1, NULL), SW_ENOTSUP);
    CHECK_EQ_I64(routes(&h), 2);
    CHECK_EQ_I64(h.stores, stores);
    CHECK_EQ_I64(state(te, 0).location, SW_TE_SECONDARY);

    /* A projection's policy promotion is refused the same way: the
     * projection fails, nothing changed. */
    s.which = SW_TE_PLAN_PROMOTE;
    sw_error err;
    CHECK_EQ_I64(project_tile(te, 1, &err), SW_ENOTSUP);
    CHECK_EQ_I64(routes(&h), 3);
    CHECK_EQ_I64(h.stores, stores);
    CHECK_EQ_I64(state(te, 0).location, SW_TE_SECONDARY);
    CHECK_EQ_I64(state(te, 0).pinned, 0);
    h.refuse = 0;
    CHECK(project_tile(te, 1, NULL) == SW_OK);
    CHECK_EQ_I64(state(te, 0).location, SW_TE_PRIMARY);
    CHECK(value_at(te, 0) == 1.0f && value_at(te, 1) == 2.0f);
    CHECK(sw_tiled_evictable_release(te, NULL) == SW_OK);
    sw_tiled_evictable_unref(te);
}

int main(void)
{
    test_residency();
    test_secondary_and_implicit();
    test_policy_moves();
    return check_report("tiled_evictable_in_place");
}
