/* A projection over binding tiers reads each kind of tile store its own
 * way (tiled_evictable.h, sw_te_tier_hooks.read_many and core_classes):
 *   - a selection mixing tiles in the binding's stores with tiles in a
 *     bound tier of a core class (Generic memory): only the binding's go to
 *     its read_many hook, the core reads the others itself, and the values
 *     land in request order;
 *   - a Generic destination (the primary's class) is gathered into
 *     straight: no projection-sized buffer is live while the gather runs,
 *     and every value is right;
 *   - a FileBacked destination (issue 17) is written straight into its
 *     file: host tiles, tiles in files (short runs read with their tile,
 *     long runs copied file to file, with and without the kernel's copy),
 *     the binding's stores, implicit tiles (a fresh file's hole kept, a
 *     written file's range zeroed) and a layout other than the identity
 *     all land right, one version step, no projection-sized buffer; a fault
 *     at each write step fails the projection, leaves residency unchanged,
 *     the destination live and unclaimed at its old version, and the same
 *     projection then succeeds. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include <strideweave/strideweave.h>
#include "strideweave/testing.h"

static float value_of(int64_t slot) { return 0.5f + (float)slot; }

/* ---- a stand-in binding: STATE_ONLY stores with slots in a table --------- */

static const sw_carrier_class binding_class = {
    .name = "BindingCarrier",
    .flags = SW_CARRIER_CLASS_STATE_ONLY,
};

typedef struct binding {
    pthread_mutex_t mu;
    int core_stores; /* the store hook makes none: the core's own classes */
    sw_carrier *h[16];
    float *v[16];
    int64_t n[16];
    int nstores;
    int reads, many_calls;
    int64_t many_n;
    sw_carrier *many_store[16];
} binding;

static float *slots_of(binding *b, sw_carrier *h)
{
    float *v = NULL;
    pthread_mutex_lock(&b->mu);
    for (int i = 0; i < b->nstores && !v; i++)
        if (b->h[i] == h)
            v = b->v[i];
    pthread_mutex_unlock(&b->mu);
    return v;
}

/* The primary's stores are the core's (CPU); the secondary's are ours. */
static sw_status b_store(sw_carrier *proto, int secondary, int64_t size, sw_dtype dtype,
                         int zero, void *user, sw_carrier **out, sw_error *err)
{
    (void)proto;
    (void)dtype;
    (void)zero;
    binding *b = user;
    if (!secondary || b->core_stores)
        return SW_ENOTSUP;
    sw_status st = sw_carrier_new(&binding_class, NULL, SW_DT_ANY, 0, out, err);
    if (st != SW_OK)
        return st;
    pthread_mutex_lock(&b->mu);
    b->h[b->nstores] = *out;
    b->v[b->nstores] = calloc((size_t)size + 1, sizeof(float));
    b->n[b->nstores++] = size;
    pthread_mutex_unlock(&b->mu);
    sw_carrier_ref(*out); /* the table's */
    return SW_OK;
}

static sw_status b_read(sw_carrier *store, int64_t at, int64_t count, void *out, void *user,
                        sw_error *err)
{
    binding *b = user;
    float *v = slots_of(b, store);
    if (!v)
        return sw_error_set(err, SW_EINVAL, "not a binding store");
    pthread_mutex_lock(&b->mu);
    b->reads++;
    pthread_mutex_unlock(&b->mu);
    memcpy(out, v + at, (size_t)count * sizeof(float));
    return SW_OK;
}

static sw_status b_write(sw_carrier *store, int64_t at, int64_t count, const void *in,
                         void *user, sw_error *err)
{
    float *v = slots_of(user, store);
    if (!v)
        return sw_error_set(err, SW_EINVAL, "not a binding store");
    memcpy(v + at, in, (size_t)count * sizeof(float));
    return SW_OK;
}

static sw_status b_size(sw_carrier *tier, void *user, int64_t *out, sw_error *err)
{
    binding *b = user;
    for (int i = 0; i < b->nstores; i++)
        if (b->h[i] == tier) {
            *out = b->n[i];
            return SW_OK;
        }
    return sw_error_set(err, SW_EINVAL, "not a binding store");
}

/* Like a real binding: it reads the stores it keeps, and hands the whole
 * batch back (nothing read) when one is not its own. */
static sw_status b_read_many(sw_carrier *const *store, const int64_t *at, const int64_t *count,
                             sw_carrier *dest, const int64_t *dest_at, int64_t n, void *user,
                             sw_error *err)
{
    (void)err;
    binding *b = user;
    b->many_calls++;
    b->many_n = n;
    for (int64_t i = 0; i < n && i < 16; i++)
        b->many_store[i] = store[i];
    for (int64_t i = 0; i < n; i++)
        if (!slots_of(b, store[i]))
            return SW_ENOTSUP;
    float *d = sw_cpu_pointer(dest);
    for (int64_t i = 0; i < n; i++)
        memcpy(d + dest_at[i], slots_of(b, store[i]) + at[i], (size_t)count[i] * sizeof(float));
    return SW_OK;
}

static void binding_free(binding *b)
{
    for (int i = 0; i < b->nstores; i++) {
        free(b->v[i]);
        sw_carrier_unref(b->h[i]);
    }
    pthread_mutex_destroy(&b->mu);
}

/* ---- a mixed batch ------------------------------------------------------- */

/* A CPU primary, a full Generic secondary holding value_of(slot) (a bound
 * tier of a core class: the core reaches its memory itself); tiles 1 and 3
 * promoted and evicted again, into the binding's stores. Projecting tiles
 * 3, 0, 1, 2 reads 1 and 3 through read_many, and 0 and 2 in the core. */
static void test_mixed_batch_goes_each_its_own_way(void)
{
    enum { GRID = 4, TILE = 8, N = GRID * TILE };
    binding b;
    memset(&b, 0, sizeof b);
    pthread_mutex_init(&b.mu, NULL);
    float vals[N];
    for (int i = 0; i < N; i++)
        vals[i] = value_of(i);
    sw_error err;
    sw_carrier *p = NULL, *s = NULL;
    CHECK_EQ_I64(sw_cpu_new(0, SW_DT_FLOAT32, 0, &p, &err), SW_OK);
    CHECK_EQ_I64(sw_generic_new(vals, N, SW_DT_FLOAT32, 0, &s, &err), SW_OK);
    sw_te_tier_hooks h = {.store = b_store, .read = b_read, .write = b_write, .size = b_size,
                          .read_many = b_read_many, .user = &b, .dtype = SW_DT_FLOAT32,
                          .core_classes = 1};
    const int64_t grid[1] = {GRID}, tile[1] = {TILE};
    sw_tiled_evictable *te = NULL;
    CHECK_EQ_I64(sw_tiled_evictable_new_bound(p, s, 1, grid, tile, &h, &te, &err), SW_OK);
    if (!te)
        return;
    int64_t moved[2] = {1, 3};
    CHECK_EQ_I64(sw_tiled_evictable_promote(te, moved, 2, &err), SW_OK);
    CHECK_EQ_I64(sw_tiled_evictable_evict(te, moved, 2, &err), SW_OK);
    CHECK_EQ_I64(b.nstores, 2);
    int64_t picks[4] = {3, 0, 1, 2}, counts[1] = {4};
    const int64_t *axes[1] = {picks};
    sw_tile_selection sel = {1, counts, axes};
    sw_tensor *out = NULL;
    int reads = b.reads;
    CHECK_EQ_I64(sw_tiled_evictable_project(te, NULL, 0, &sel, NULL, &out, &err), SW_OK);
    CHECK_EQ_I64(b.many_calls, 1);
    CHECK_EQ_I64(b.many_n, 2); /* the binding's two, never the Generic tier */
    CHECK(b.many_n == 2 && slots_of(&b, b.many_store[0]) && slots_of(&b, b.many_store[1]));
    CHECK_EQ_I64(b.reads - reads, 0); /* nothing tile by tile */
    int exact = out != NULL;
    for (int64_t k = 0; out && k < 4; k++)
        for (int64_t w = 0; w < TILE; w++) {
            float got = 0;
            exact &= sw_tensor_get_f32(out, k * TILE + w, &got, NULL) == SW_OK &&
                     got == value_of(picks[k] * TILE + w);
        }
    CHECK(exact);
    sw_tensor_unref(out);
    CHECK_EQ_I64(sw_tiled_evictable_release(te, &err), SW_OK);
    sw_tiled_evictable_unref(te);
    sw_carrier_unref(p);
    sw_carrier_unref(s);
    binding_free(&b);
}

/* ---- a Generic destination ------------------------------------------------ */

static void test_generic_destination_is_gathered_into_straight(void)
{
    if (!sw_fault_enabled())
        return;
    enum { GRID = 4, TILE = 1 << 16, N = GRID * TILE }; /* 1 MiB of Float32 */
    float *vals = malloc((size_t)N * sizeof *vals);
    for (int64_t i = 0; i < N; i++)
        vals[i] = value_of(i);
    binding b;
    memset(&b, 0, sizeof b);
    pthread_mutex_init(&b.mu, NULL);
    sw_error err;
    sw_carrier *p = NULL, *s = NULL, *d = NULL;
    CHECK_EQ_I64(sw_generic_new(vals, N, SW_DT_FLOAT32, 0, &p, &err), SW_OK);
    CHECK_EQ_I64(sw_cpu_new(0, SW_DT_FLOAT32, 0, &s, &err), SW_OK);
    CHECK_EQ_I64(sw_generic_new(vals, N, SW_DT_FLOAT32, 0, &d, &err), SW_OK);
    memset(sw_generic_pointer(d), 0, (size_t)N * sizeof(float));
    sw_te_tier_hooks h = {.store = b_store, .read = b_read, .write = b_write, .size = b_size,
                          .user = &b, .dtype = SW_DT_FLOAT32, .core_classes = 1};
    const int64_t grid[1] = {GRID}, tile[1] = {TILE};
    sw_tiled_evictable *te = NULL;
    CHECK_EQ_I64(sw_tiled_evictable_new_bound(p, s, 1, grid, tile, &h, &te, &err), SW_OK);
    int64_t picks[4] = {2, 0, 3, 1}, counts[1] = {4};
    const int64_t *axes[1] = {picks};
    sw_tile_selection sel = {1, counts, axes};
    sw_te_work *w = NULL;
    int64_t before = sw_alloc_live_bytes();
    sw_fault_arm("tile_gather_pause", 0, 1);
    CHECK_EQ_I64(sw_tiled_evictable_project_async(te, NULL, 0, &sel, d, &w, &err), SW_OK);
    sw_fault_wait_paused();
    /* Stopped at the gather: what the projection holds is bookkeeping, not a
     * second copy of its values (1 MiB). */
    int64_t held = sw_alloc_live_bytes() - before;
    CHECK(held < (int64_t)N * (int64_t)sizeof(float) / 4);
    sw_fault_resume();
    sw_fault_clear();
    CHECK_EQ_I64(sw_te_work_wait(w, NULL, &err), SW_OK);
    sw_te_work_unref(w);
    const float *got = sw_generic_pointer(d);
    int exact = 1;
    for (int64_t k = 0; k < 4; k++)
        for (int64_t i = 0; i < TILE; i++)
            exact &= got[k * TILE + i] == value_of(picks[k] * TILE + i);
    CHECK(exact);
    CHECK_EQ_I64(sw_tiled_evictable_release(te, &err), SW_OK);
    sw_tiled_evictable_unref(te);
    sw_carrier_unref(p);
    sw_carrier_unref(s);
    sw_carrier_unref(d);
    binding_free(&b);
    free(vals);
}

/* ---- a FileBacked destination -------------------------------------------- */

/* The secondary tier of a scene. */
enum { CPU_TIER, FILE_TIER, BINDING_TIER };

/* A TiledEvictable over binding hooks (the core's classes left to the
 * core) and what its slots hold: vals[slot], 0 in implicit tiles. */
typedef struct scene {
    binding b;
    sw_tiled_evictable *te;
    sw_carrier *p, *s;
    const sw_tile_geometry *g;
    float *vals;
} scene;

/* primary: CPU or FileBacked, full of value_of(slot); secondary: a
 * FileBacked or CPU tier of the core's (core_stores) or a full Generic one
 * whose evicted tiles go to the binding's stores; `implicit` tiles start
 * implicit; then the `nev` tiles `evict` (linear) go to the secondary. */
static void scene_make(scene *sc, int32_t rank, const int64_t *grid, const int64_t *tile,
                       int file_primary, int secondary, const unsigned char *implicit,
                       const int64_t *evict, int64_t nev)
{
    memset(sc, 0, sizeof *sc);
    pthread_mutex_init(&sc->b.mu, NULL);
    sc->b.core_stores = secondary != BINDING_TIER;
    int64_t n = 1;
    for (int32_t k = 0; k < rank; k++)
        n *= grid[k] * tile[k];
    sc->vals = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        sc->vals[i] = value_of(i);
    sw_error err;
    if (file_primary) {
        CHECK_EQ_I64(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &sc->p, &err), SW_OK);
        CHECK_EQ_I64(sw_carrier_allocate(sc->p, n, &err), SW_OK);
        CHECK_EQ_I64(sw_carrier_write(sc->p, 0, n, sc->vals, &err), SW_OK);
    } else {
        CHECK_EQ_I64(sw_cpu_new(n, SW_DT_FLOAT32, 0, &sc->p, &err), SW_OK);
        memcpy(sw_cpu_pointer(sc->p), sc->vals, (size_t)n * sizeof(float));
    }
    if (secondary == FILE_TIER)
        CHECK_EQ_I64(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &sc->s, &err), SW_OK);
    else if (secondary == CPU_TIER)
        CHECK_EQ_I64(sw_cpu_new(0, SW_DT_FLOAT32, 0, &sc->s, &err), SW_OK);
    else
        CHECK_EQ_I64(sw_generic_new(sc->vals, n, SW_DT_FLOAT32, 0, &sc->s, &err), SW_OK);
    sw_te_tier_hooks h = {.store = b_store, .read = b_read, .write = b_write, .size = b_size,
                          .user = &sc->b, .dtype = SW_DT_FLOAT32, .core_classes = 1};
    CHECK_EQ_I64(sw_tiled_evictable_new_placed(sc->p, sc->s, rank, grid, tile, &h, implicit,
                                               &sc->te, &err), SW_OK);
    sc->g = sw_tiled_evictable_geometry(sc->te);
    for (int64_t slot = 0; slot < n; slot++) {
        int64_t t, w;
        sw_tiles_locate(sc->g, slot, &t, &w);
        if (implicit && implicit[t])
            sc->vals[slot] = 0;
    }
    int64_t coords[8 * SW_TILES_MAX_RANK];
    for (int64_t i = 0; i < nev; i++)
        sw_tiles_tile_coord(sc->g, evict[i], coords + i * rank);
    if (secondary == BINDING_TIER) /* a full Generic secondary: its tiles come up first */
        CHECK_EQ_I64(sw_tiled_evictable_promote(sc->te, coords, nev, &err), SW_OK);
    CHECK_EQ_I64(sw_tiled_evictable_evict(sc->te, coords, nev, &err), SW_OK);
}

static void scene_free(scene *sc)
{
    sw_error err;
    CHECK_EQ_I64(sw_tiled_evictable_release(sc->te, &err), SW_OK);
    sw_tiled_evictable_unref(sc->te);
    sw_carrier_unref(sc->p);
    sw_carrier_unref(sc->s);
    binding_free(&sc->b);
    free(sc->vals);
}

/* A 2-axis selection: per_axis[k] has counts[k] coordinates. */
typedef struct selection2 {
    int64_t counts[2];
    const int64_t *axes[2];
    sw_tile_selection sel;
} selection2;

static const sw_tile_selection *select2(selection2 *s, const int64_t *a0, int64_t n0,
                                        const int64_t *a1, int64_t n1)
{
    s->counts[0] = n0;
    s->counts[1] = n1;
    s->axes[0] = a0;
    s->axes[1] = a1;
    s->sel = (sw_tile_selection){2, s->counts, s->axes};
    return &s->sel;
}

/* Every tile's state, to compare before and after a projection. */
static void states_of(scene *sc, sw_te_tile_state *out)
{
    for (int64_t t = 0; t < sc->g->ntiles; t++) {
        int64_t c[SW_TILES_MAX_RANK];
        sw_tiles_tile_coord(sc->g, t, c);
        memset(&out[t], 0, sizeof out[t]);
        CHECK_EQ_I64(sw_tiled_evictable_tile_state(sc->te, c, &out[t], NULL), SW_OK);
    }
}

/* A FileBacked destination of n slots: fresh (a hole) or written with 7s. */
static sw_carrier *file_destination(int64_t n, int written)
{
    sw_error err;
    sw_carrier *d = NULL;
    CHECK_EQ_I64(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &d, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_allocate(d, n, &err), SW_OK);
    if (written) {
        float *sevens = malloc((size_t)n * sizeof *sevens);
        for (int64_t i = 0; i < n; i++)
            sevens[i] = 7.0f;
        CHECK_EQ_I64(sw_carrier_write(d, 0, n, sevens, &err), SW_OK);
        free(sevens);
    }
    return d;
}

/* Project `sel` of the scene (layout L, NULL: the identity) into `d`, the
 * fault `fault` (NULL: none) armed once at `skip` and then hit: when it
 * `fails` the projection, residency is unchanged and the destination live,
 * unclaimed and at its old version; else every value is the TE-10
 * formula's and the version stepped once. Either way nothing stays pinned
 * (the states compare equal) and the TiledEvictable's version stays. */
static void project_into(scene *sc, const sw_layout *L, const sw_tile_selection *sel,
                         sw_carrier *d, const char *fault, long skip, int fails)
{
    const sw_tile_geometry *g = sc->g;
    int64_t shape[SW_TILES_MAX_RANK];
    int64_t n = sw_tiles_compact_shape(g, sel, shape);
    sw_te_tile_state before[64], after[64];
    states_of(sc, before);
    uint64_t version = sw_carrier_version(d), te_version = sw_tiled_evictable_version(sc->te);
    sw_error err;
    sw_te_work *w = NULL;
    if (fault)
        sw_fault_arm(fault, skip, 1);
    sw_status st = sw_tiled_evictable_project_async(sc->te, L, 0, sel, d, &w, &err);
    if (st == SW_OK)
        st = sw_te_work_wait(w, NULL, &err);
    sw_te_work_unref(w);
    int hit = fault && !sw_fault_armed(fault);
    sw_fault_clear();
    CHECK(!sw_carrier_is_owned(d) && !sw_carrier_is_released(d));
    states_of(sc, after);
    CHECK(memcmp(before, after, (size_t)g->ntiles * sizeof before[0]) == 0);
    CHECK_EQ_I64(sw_tiled_evictable_version(sc->te), te_version);
    if (fault && !hit)
        fprintf(stderr, "fault %s at %ld not hit\n", fault, skip);
    CHECK(!fault || hit);
    if (fails) {
        CHECK_EQ_I64(st, SW_EIO);
        CHECK_EQ_I64(sw_carrier_version(d), version);
        return;
    }
    CHECK_EQ_I64(st, SW_OK);
    CHECK_EQ_I64(sw_carrier_version(d), version + 1);
    float *got = malloc((size_t)n * sizeof *got);
    CHECK_EQ_I64(sw_carrier_read(d, 0, n, got, &err), SW_OK);
    int64_t wrong = 0;
    for (int64_t c = 0; c < n; c++) {
        int64_t s = sw_tiles_source_index(g, sel, shape, c);
        int64_t slot = L ? sw_tiles_layout_slot(L, 0, s) : s;
        wrong += got[c] != sc->vals[slot];
    }
    CHECK_EQ_I64(wrong, 0);
    free(got);
}

/* Every way a tile can be held, into a fresh and a written destination,
 * by the identity and a within-tile transposed layout. Grid 3x2 of 3x3
 * tiles: a CPU primary (host tiles), tiles 1 and 2 evicted to FileBacked
 * (short runs: read with their tile), tile 5 implicit. */
static void test_file_destination_small_tiles(void)
{
    const int64_t grid[2] = {3, 2}, tile[2] = {3, 3};
    const unsigned char implicit[6] = {0, 0, 0, 0, 0, 1};
    const int64_t evict[2] = {1, 2};
    scene sc;
    scene_make(&sc, 2, grid, tile, 0, FILE_TIER, implicit, evict, 2);
    const int64_t a0[3] = {2, 0, 1}, a1[2] = {1, 0};
    selection2 s2;
    const sw_tile_selection *sel = select2(&s2, a0, 3, a1, 2);
    /* slot = a1 + 9 a0 + 3 b0 + 27 b1: each tile transposed in place */
    const uint8_t profile[8] = {SW_NODE_PUSH, SW_NODE_LEAF, SW_NODE_LEAF, SW_NODE_POP,
                                SW_NODE_PUSH, SW_NODE_LEAF, SW_NODE_LEAF, SW_NODE_POP};
    const int64_t ext[4] = {3, 3, 3, 2}, str[4] = {9, 3, 1, 27};
    sw_error err;
    sw_layout *T = sw_layout_new(8, profile, ext, str, &err);
    CHECK(T != NULL);
    for (int written = 0; written < 2; written++)
        for (int strided = 0; strided < 2; strided++) {
            sw_carrier *d = file_destination(54, written);
            project_into(&sc, strided ? T : NULL, sel, d, NULL, 0, 0);
            sw_carrier_release(d, NULL);
            sw_carrier_unref(d);
        }
    if (sw_fault_enabled()) {
        /* a tile read failing after the first one, the write failing (both
         * layouts): nothing pinned, the next projection right */
        sw_carrier *d = file_destination(54, 1);
        project_into(&sc, NULL, sel, d, "tile_copy", 1, 1);
        project_into(&sc, NULL, sel, d, "pwrite", 0, 1);
        project_into(&sc, T, sel, d, "pwrite", 0, 1);
        project_into(&sc, NULL, sel, d, NULL, 0, 0);
        sw_carrier_release(d, NULL);
        sw_carrier_unref(d);
    }
    sw_layout_free(T);
    scene_free(&sc);
}

/* Tiles in the binding's stores are read through its read hook, tile by
 * tile, and land right. */
static void test_file_destination_binding_stores(void)
{
    const int64_t grid[1] = {4}, tile[1] = {8};
    const int64_t evict[2] = {1, 3};
    scene sc;
    scene_make(&sc, 1, grid, tile, 0, BINDING_TIER, NULL, evict, 2);
    CHECK_EQ_I64(sc.b.nstores, 2);
    int64_t picks[4] = {3, 0, 1, 2}, counts[1] = {4};
    const int64_t *axes[1] = {picks};
    sw_tile_selection sel = {1, counts, axes};
    int reads = sc.b.reads;
    sw_carrier *d = file_destination(32, 1);
    project_into(&sc, NULL, &sel, d, NULL, 0, 0);
    CHECK(sc.b.reads > reads);
    sw_carrier_release(d, NULL);
    sw_carrier_unref(d);
    scene_free(&sc);
}

/* Runs of 64 KiB (tile[0] = 16384 Float32): a FileBacked primary full at
 * construction (runs in place in its file), tile 1 evicted to a FileBacked
 * secondary (a file of its own), tile 3 implicit. Kept-in-file runs are
 * copied file to file (also where the kernel refuses: the bounded pread and
 * pwrite), the written destination's implicit range zeroed; a fault at
 * the first or a later copy, or at the zeros' write after copies ran,
 * fails the projection and changes nothing but the destination's values. */
static void test_file_destination_long_runs(void)
{
    if (!sw_fault_enabled())
        return;
    const int64_t grid[2] = {2, 2}, tile[2] = {16384, 2};
    const unsigned char implicit[4] = {0, 0, 0, 1};
    const int64_t evict[1] = {1};
    scene sc;
    scene_make(&sc, 2, grid, tile, 1, FILE_TIER, implicit, evict, 1);
    const int64_t a0[2] = {1, 0}, a1[2] = {1, 0}, n = 4 * 16384 * 2;
    selection2 s2;
    const sw_tile_selection *sel = select2(&s2, a0, 2, a1, 2);
    for (int written = 0; written < 2; written++) {
        sw_carrier *d = file_destination(n, written);
        project_into(&sc, NULL, sel, d, NULL, 0, 0);
        sw_carrier_release(d, NULL);
        sw_carrier_unref(d);
    }
    sw_carrier *d = file_destination(n, 1);
    project_into(&sc, NULL, sel, d, "copy_range_unsupported", 0, 0);
    project_into(&sc, NULL, sel, d, "copy_range_unsupported", 3, 0);
    project_into(&sc, NULL, sel, d, "copy_range", 0, 1);
    project_into(&sc, NULL, sel, d, "copy_range", 2, 1);
    project_into(&sc, NULL, sel, d, "pwrite", 1, 1);
    /* stopped at the gather: no projection-sized buffer is live */
    sw_error err;
    sw_te_work *w = NULL;
    int64_t before = sw_alloc_live_bytes();
    sw_fault_arm("tile_gather_pause", 0, 1);
    CHECK_EQ_I64(sw_tiled_evictable_project_async(sc.te, NULL, 0, sel, d, &w, &err), SW_OK);
    sw_fault_wait_paused();
    int64_t held = sw_alloc_live_bytes() - before;
    CHECK(held < n * (int64_t)sizeof(float) / 4);
    sw_fault_resume();
    sw_fault_clear();
    CHECK_EQ_I64(sw_te_work_wait(w, NULL, &err), SW_OK);
    sw_te_work_unref(w);
    project_into(&sc, NULL, sel, d, NULL, 0, 0);
    sw_carrier_release(d, NULL);
    sw_carrier_unref(d);
    scene_free(&sc);
}

/* `sel` of the scene projected into a written destination of n slots
 * (project_into); with `fault`, then again with it failing the projection
 * at `skip`, and again without. */
static void project_written(scene *sc, const sw_tile_selection *sel, int64_t n,
                            const char *fault, long skip)
{
    sw_carrier *d = file_destination(n, 1);
    project_into(sc, NULL, sel, d, NULL, 0, 0);
    if (fault && sw_fault_enabled()) {
        project_into(sc, NULL, sel, d, fault, skip, 1);
        project_into(sc, NULL, sel, d, NULL, 0, 0);
    }
    sw_carrier_release(d, NULL);
    sw_carrier_unref(d);
}

/* Runs of 4 KiB strided through a FileBacked primary full at
 * construction with 12 KiB between them: each read on its own (pread),
 * beside a tile evicted to CPU memory; a read failing part way fails the
 * projection and changes nothing but the destination's values. */
static void test_file_destination_strided_file_runs(void)
{
    const int64_t grid[2] = {4, 2}, tile[2] = {1024, 2};
    const int64_t evict[1] = {3};
    scene sc;
    scene_make(&sc, 2, grid, tile, 1, CPU_TIER, NULL, evict, 1);
    const int64_t a0[2] = {3, 0}, a1[2] = {1, 0};
    selection2 s2;
    project_written(&sc, select2(&s2, a0, 2, a1, 2), 2 * 1024 * 2 * 2, "pread", 2);
    scene_free(&sc);
}

/* The writer's staging buffer beside other pieces: runs read on their own
 * (pread into the staging buffer) right after a copy file to file, and
 * after host pieces that fill a whole vector (1024 pieces) just before a
 * staged one. Every value lands where it belongs. */
static void test_file_destination_staged_runs_after_other_pieces(void)
{
    /* tile (1, 0) evicted to a file of its own: its 16 runs follow on in
     * both files, one copy; then tile (1, 1)'s 4 KiB runs strided through
     * the primary's file, 8 KiB apart: one pread each */
    const int64_t grid[2] = {3, 2}, tile[2] = {1024, 16};
    const int64_t evict[1] = {1};
    scene sc;
    scene_make(&sc, 2, grid, tile, 1, FILE_TIER, NULL, evict, 1);
    const int64_t a0[1] = {1}, a1[2] = {0, 1};
    selection2 s2;
    project_written(&sc, select2(&s2, a0, 1, a1, 2), 1024 * 32, NULL, 0);
    scene_free(&sc);
    /* tiles (0..3, 0) in CPU memory, (4, 0) in the primary's file: per
     * column four host pieces and one staged run, so the vector fills
     * (1020 + 4) right before a staged run; then the row of tiles (0..4, 1)
     * all in the primary's file: staged runs back to back, which must not
     * reach the one staged when the vector was written */
    const int64_t grid5[2] = {5, 2}, tile5[2] = {1024, 210};
    const int64_t evict4[4] = {0, 1, 2, 3};
    scene_make(&sc, 2, grid5, tile5, 1, CPU_TIER, NULL, evict4, 4);
    const int64_t b0[5] = {0, 1, 2, 3, 4}, b1[2] = {0, 1};
    project_written(&sc, select2(&s2, b0, 5, b1, 2), 5 * 1024 * 420, NULL, 0);
    scene_free(&sc);
}

int main(void)
{
    test_mixed_batch_goes_each_its_own_way();
    test_generic_destination_is_gathered_into_straight();
    test_file_destination_small_tiles();
    test_file_destination_binding_stores();
    test_file_destination_long_runs();
    test_file_destination_strided_file_runs();
    test_file_destination_staged_runs_after_other_pieces();
    sw_tiled_evictable_drain();
    return check_report("tiled_evictable_project_stores");
}
