/* A projection over binding tiers reads each kind of tile store its own
 * way (tiled_evictable.h, sw_te_tier_hooks.read_many and core_classes):
 *   - a selection mixing tiles in the binding's stores with tiles in a
 *     bound tier of a core class (Generic memory): only the binding's go to
 *     its read_many hook, the core reads the others itself, and the values
 *     land in request order;
 *   - a Generic destination (the primary's class) is gathered into
 *     straight: no projection-sized buffer is live while the gather runs,
 *     and every value is right. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include <strideweave/strideweave.h>

static float value_of(int64_t slot) { return 0.5f + (float)slot; }

/* ---- a stand-in binding: STATE_ONLY stores with slots in a table --------- */

static const sw_carrier_class binding_class = {
    .name = "BindingCarrier",
    .flags = SW_CARRIER_CLASS_STATE_ONLY,
};

typedef struct binding {
    pthread_mutex_t mu;
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
    if (!secondary)
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

int main(void)
{
    test_mixed_batch_goes_each_its_own_way();
    test_generic_destination_is_gathered_into_straight();
    sw_tiled_evictable_drain();
    return check_report("tiled_evictable_project_stores");
}
