/* The carrier of a TiledEvictable whose tiers are a binding's
 * (tiled_evictable.h, "Binding tiers" and "As a carrier"): the core's
 * layout reads and writes (sw_carrier_read_layout_as / _write_layout_as)
 * and slot copies (sw_carrier_copy_layout) reach its slots through the tier
 * hooks, with no core lock held, as they reach an Evictable's binding
 * primary. Checked: values of tiles in place in the tier that was full at
 * construction (primary or secondary) and of tiles moved to the other
 * tier; writes promote secondary tiles, write in-place tiles through the
 * tier's write hook and step both versions once per slot; a failing hook
 * propagates its error with nothing changed; many threads reading while
 * another evicts and promotes (run under TSan too). */
#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include <strideweave/strideweave.h>

#define N 16 /* slots: a grid of 4 tiles of 4 */
#define MAXSTORES 2048

static const int64_t GRID[1] = {4}, TILE[1] = {4};

static float value_of(int64_t slot) { return 10.0f + (float)slot; }

/* ---- a stand-in binding: STATE_ONLY carriers whose slots it keeps ------- */

static const sw_carrier_class bound_class = {
    .name = "BoundTier",
    .flags = SW_CARRIER_CLASS_STATE_ONLY,
};

typedef struct bstore {
    sw_carrier *h;
    float *v; /* NULL once discarded */
    int64_t n;
} bstore;

typedef struct binding {
    pthread_mutex_t mu; /* guards everything below */
    bstore stores[MAXSTORES];
    int nstores;
    int fail_read, fail_write; /* the next read / write hook fails */
    int reads, writes;
} binding;

static bstore *store_of_locked(binding *b, sw_carrier *h)
{
    for (int i = 0; i < b->nstores; i++)
        if (b->stores[i].h == h)
            return &b->stores[i];
    return NULL;
}

static sw_carrier *bound_new(binding *b, int64_t n, int filled)
{
    sw_carrier *h = NULL;
    if (sw_carrier_new(&bound_class, NULL, SW_DT_ANY, 0, &h, NULL) != SW_OK)
        return NULL;
    float *v = calloc((size_t)n + 1, sizeof *v);
    for (int64_t i = 0; filled && i < n; i++)
        v[i] = value_of(i);
    pthread_mutex_lock(&b->mu);
    int room = b->nstores < MAXSTORES;
    if (room)
        b->stores[b->nstores++] = (bstore){h, v, n};
    pthread_mutex_unlock(&b->mu);
    if (!room) {
        free(v);
        sw_carrier_unref(h);
        return NULL;
    }
    return h;
}

static sw_status b_store(sw_carrier *proto, int secondary, int64_t size, sw_dtype dtype, int zero,
                         void *user, sw_carrier **out, sw_error *err)
{
    (void)proto, (void)secondary, (void)zero; /* stores start zeroed */
    if (dtype != SW_DT_FLOAT32)
        return sw_error_set(err, SW_ETYPE, "binding: float32 only");
    sw_carrier *h = bound_new(user, size, 0);
    *out = h ? sw_carrier_ref(h) : NULL; /* the table keeps its own */
    return h ? SW_OK : sw_error_set(err, SW_ENOMEM, "binding: table full");
}

/* Both directions (in NULL: a read into out). */
static sw_status b_io(binding *b, sw_carrier *store, int64_t at, int64_t n, void *out,
                      const void *in, sw_error *err)
{
    pthread_mutex_lock(&b->mu);
    int *fail = in ? &b->fail_write : &b->fail_read;
    int failed = *fail;
    *fail = 0;
    (*(in ? &b->writes : &b->reads))++;
    bstore *s = store_of_locked(b, store);
    sw_status st = SW_OK;
    if (failed)
        st = sw_error_set(err, SW_EIO, "binding: the tier's %s failed", in ? "write" : "read");
    else if (!s || !s->v || at < 0 || at + n > s->n)
        st = sw_error_set(err, SW_ERANGE, "binding: no such slots");
    else if (in)
        memcpy(s->v + at, in, (size_t)n * sizeof(float));
    else
        memcpy(out, s->v + at, (size_t)n * sizeof(float));
    pthread_mutex_unlock(&b->mu);
    return st;
}

static sw_status b_read(sw_carrier *store, int64_t at, int64_t n, void *out, void *user,
                        sw_error *err)
{
    return b_io(user, store, at, n, out, NULL, err);
}

static sw_status b_write(sw_carrier *store, int64_t at, int64_t n, const void *in, void *user,
                         sw_error *err)
{
    return b_io(user, store, at, n, NULL, in, err);
}

static sw_status b_size(sw_carrier *tier, void *user, int64_t *out, sw_error *err)
{
    binding *b = user;
    pthread_mutex_lock(&b->mu);
    bstore *s = store_of_locked(b, tier);
    *out = s ? s->n : 0;
    pthread_mutex_unlock(&b->mu);
    return s ? SW_OK : sw_error_set(err, SW_ETYPE, "binding: not a binding tier");
}

static void b_discard(sw_carrier *store, void *user)
{
    binding *b = user;
    pthread_mutex_lock(&b->mu);
    bstore *s = store_of_locked(b, store);
    float *v = s ? s->v : NULL;
    if (s)
        s->v = NULL;
    pthread_mutex_unlock(&b->mu);
    free(v);
}

static void binding_free(binding *b)
{
    for (int i = 0; i < b->nstores; i++) {
        free(b->stores[i].v);
        sw_carrier_unref(b->stores[i].h);
    }
    pthread_mutex_destroy(&b->mu);
}

/* A TiledEvictable over two bound tiers, the primary full of value_of
 * (primary_full) or else the secondary, and its carrier. */
static sw_tiled_evictable *make(binding *b, int primary_full, sw_carrier **carrier)
{
    memset(b, 0, sizeof *b);
    pthread_mutex_init(&b->mu, NULL);
    sw_carrier *p = bound_new(b, primary_full ? N : 0, 1);
    sw_carrier *s = bound_new(b, primary_full ? 0 : N, 1);
    sw_te_tier_hooks hooks = {.store = b_store, .read = b_read, .write = b_write,
                              .size = b_size, .discard = b_discard, .user = b,
                              .dtype = SW_DT_FLOAT32};
    sw_tiled_evictable *te = NULL;
    sw_error err;
    CHECK(sw_tiled_evictable_new_bound(p, s, 1, GRID, TILE, &hooks, &te, &err) == SW_OK);
    CHECK(te && sw_tiled_evictable_carrier(te, carrier, &err) == SW_OK);
    return te;
}

/* make() with the primary full and tile `evicted` moved to the secondary. */
static sw_tiled_evictable *make_evicted(binding *b, int64_t evicted, sw_carrier **carrier)
{
    sw_tiled_evictable *te = make(b, 1, carrier);
    CHECK(sw_tiled_evictable_evict(te, &evicted, 1, NULL) == SW_OK);
    return te;
}

static void destroy(binding *b, sw_tiled_evictable *te, sw_carrier *c)
{
    CHECK(sw_tiled_evictable_release(te, NULL) == SW_OK);
    sw_carrier_unref(c);
    sw_tiled_evictable_unref(te);
    binding_free(b);
}

static sw_layout *flat(int64_t extent, int64_t stride)
{
    const uint8_t prof[1] = {SW_NODE_LEAF};
    sw_layout *L = sw_layout_new(1, prof, &extent, &stride, NULL);
    CHECK(L != NULL);
    return L;
}

/* The carrier's N slots read through the core read value_of, except slot
 * `changed` (-1: none), which reads `value`. */
static int reads_back(sw_carrier *c, int64_t changed, float value)
{
    sw_layout *L = flat(N, 1);
    float got[N];
    int ok = sw_carrier_read_layout_as(c, 0, L, SW_DT_FLOAT32, got, NULL) == SW_OK;
    for (int64_t i = 0; ok && i < N; i++)
        ok = got[i] == (i == changed ? value : value_of(i));
    sw_layout_free(L);
    return ok;
}

static sw_te_location where(sw_tiled_evictable *te, int64_t tile)
{
    sw_te_tile_state st = {0};
    CHECK(sw_tiled_evictable_tile_state(te, &tile, &st, NULL) == SW_OK);
    return st.location;
}

/* ---- tests ----------------------------------------------------------------- */

/* Reads: tiles in place in the full tier, tiles moved to the other, as
 * Float32 and widened to binary64, a strided layout naming only some slots. */
static void test_reads_in_either_tier(int primary_full)
{
    binding b;
    sw_carrier *c = NULL;
    sw_tiled_evictable *te = make(&b, primary_full, &c);
    sw_error err;
    CHECK(reads_back(c, -1, 0));
    int64_t moved[2] = {1, 3};
    CHECK(primary_full ? sw_tiled_evictable_evict(te, moved, 2, &err) == SW_OK
                       : sw_tiled_evictable_promote(te, moved, 2, &err) == SW_OK);
    CHECK(where(te, 1) == (primary_full ? SW_TE_SECONDARY : SW_TE_PRIMARY));
    CHECK(where(te, 0) == (primary_full ? SW_TE_PRIMARY : SW_TE_SECONDARY));
    int64_t kept = 0;
    sw_te_tile_state st = {0};
    CHECK(sw_tiled_evictable_tile_state(te, &kept, &st, NULL) == SW_OK && st.in_place);
    CHECK(reads_back(c, -1, 0));
    sw_layout *L = flat(4, 3); /* slots 2, 5, 8, 11: tiles 0, 1, 2, 2 */
    double d[4] = {0};
    CHECK_EQ_I64(sw_carrier_read_layout_as(c, 1, L, SW_DT_FLOAT64, d, &err), SW_OK);
    CHECK(d[0] == value_of(1) && d[1] == value_of(4) && d[2] == value_of(7) &&
          d[3] == value_of(10));
    sw_layout_free(L);
    destroy(&b, te, c);
}

/* Writes: a tile in place in the full primary is written through the
 * tier's own write hook (its slot changes where it is); a secondary tile
 * is promoted first; both versions step once per slot written. */
static void test_writes(void)
{
    binding b;
    sw_carrier *c = NULL;
    sw_tiled_evictable *te = make_evicted(&b, 2, &c);
    sw_error err;
    uint64_t cv = sw_carrier_version(c), tv = sw_tiled_evictable_version(te);
    sw_layout *L = flat(2, 7); /* slots 1 (tile 0, in place) and 8 (tile 2, secondary) */
    const float in[2] = {-1.0f, -2.0f};
    CHECK_EQ_I64(sw_carrier_write_layout_as(c, 1, L, SW_DT_FLOAT32, in, &err), SW_OK);
    CHECK(where(te, 2) == SW_TE_PRIMARY);
    float got[N];
    CHECK(sw_tiled_evictable_read(te, 0, N, got, &err) == SW_OK);
    for (int64_t i = 0; i < N; i++)
        CHECK(got[i] == (i == 1 ? -1.0f : i == 8 ? -2.0f : value_of(i)));
    pthread_mutex_lock(&b.mu);
    CHECK(b.stores[0].v[1] == -1.0f); /* the primary tier itself: in place */
    pthread_mutex_unlock(&b.mu);
    CHECK_EQ_I64(sw_carrier_version(c) - cv, 2);
    CHECK_EQ_I64(sw_tiled_evictable_version(te) - tv, 2);
    /* binary64s rounded to nearest on the way in */
    const double wide[2] = {0.1, 1.0 / 3.0};
    CHECK_EQ_I64(sw_carrier_write_layout_as(c, 1, L, SW_DT_FLOAT64, wide, &err), SW_OK);
    CHECK(sw_tiled_evictable_read(te, 1, 1, &got[0], &err) == SW_OK && got[0] == 0.1f);
    CHECK(sw_tiled_evictable_read(te, 8, 1, &got[0], &err) == SW_OK &&
          got[0] == (float)(1.0 / 3.0));
    sw_layout_free(L);
    destroy(&b, te, c);
}

/* Slot copies out of, into and onto the carrier (sw_carrier_copy_layout). */
static void add_one(void *user, int64_t k, void *value)
{
    (void)user, (void)k;
    float f;
    memcpy(&f, value, sizeof f);
    f += 1.0f;
    memcpy(value, &f, sizeof f);
}

static void test_copies(void)
{
    binding b;
    sw_carrier *c = NULL, *cpu = NULL;
    sw_tiled_evictable *te = make_evicted(&b, 1, &c);
    sw_error err;
    sw_copy_stop stop;
    CHECK(sw_cpu_new(N, SW_DT_FLOAT32, 0, &cpu, &err) == SW_OK);
    sw_layout *L = flat(N, 1);
    CHECK_EQ_I64(sw_carrier_copy_layout(c, 0, cpu, 0, L, SW_DT_FLOAT32, NULL, NULL, &stop, &err),
                 SW_OK);
    const float *v = sw_cpu_pointer(cpu);
    for (int64_t i = 0; i < N; i++)
        CHECK(v[i] == value_of(i));
    uint64_t cv = sw_carrier_version(c);
    CHECK_EQ_I64(sw_carrier_copy_layout(c, 0, c, 0, L, SW_DT_FLOAT32, add_one, NULL, &stop, &err),
                 SW_OK);
    CHECK_EQ_I64(sw_carrier_version(c) - cv, N);
    CHECK(where(te, 1) == SW_TE_PRIMARY); /* written: promoted */
    CHECK_EQ_I64(sw_carrier_copy_layout(cpu, 0, c, 0, L, SW_DT_FLOAT32, NULL, NULL, &stop, &err),
                 SW_OK);
    CHECK(reads_back(c, -1, 0));
    sw_layout_free(L);
    (void)sw_carrier_release(cpu, NULL);
    sw_carrier_unref(cpu);
    destroy(&b, te, c);
}

/* A failing tier hook: its error comes back as it is, and nothing changed
 * (values, residency, both versions). */
static void test_hook_failure(void)
{
    binding b;
    sw_carrier *c = NULL;
    sw_tiled_evictable *te = make_evicted(&b, 3, &c);
    sw_error err;
    uint64_t cv = sw_carrier_version(c), tv = sw_tiled_evictable_version(te);
    sw_layout *L = flat(N, 1);
    float in[N], out[N];
    for (int64_t i = 0; i < N; i++)
        in[i] = out[i] = -5.0f;
    b.fail_write = 1;
    CHECK_EQ_I64(sw_carrier_write_layout_as(c, 0, L, SW_DT_FLOAT32, in, &err), SW_EIO);
    CHECK(strcmp(err.msg, "binding: the tier's write failed") == 0);
    b.fail_read = 1;
    CHECK_EQ_I64(sw_carrier_read_layout_as(c, 0, L, SW_DT_FLOAT32, out, &err), SW_EIO);
    CHECK(strcmp(err.msg, "binding: the tier's read failed") == 0);
    sw_copy_stop stop;
    b.fail_read = 1;
    CHECK_EQ_I64(sw_carrier_copy_layout(c, 0, c, 0, L, SW_DT_FLOAT32, NULL, NULL, &stop, &err),
                 SW_EIO);
    CHECK(stop.in_write == 0 && stop.slot == 0);
    CHECK(where(te, 3) == SW_TE_SECONDARY);
    CHECK_EQ_I64(sw_carrier_version(c) - cv, 0);
    CHECK_EQ_I64(sw_tiled_evictable_version(te) - tv, 0);
    CHECK(reads_back(c, -1, 0));
    sw_layout_free(L);
    destroy(&b, te, c);
}

/* The binding releases the TiledEvictable before its carrier. In between
 * a read or write through the carrier is refused as released (SW_ESTATE,
 * the carrier's released words), not as slots out of range of a carrier
 * whose size now reads 0: for a layout read and write and a copy. */
static void test_released_before_its_carrier(void)
{
    binding b;
    sw_carrier *c = NULL;
    sw_tiled_evictable *te = make_evicted(&b, 1, &c);
    sw_error err;
    sw_layout *L = flat(N, 1);
    CHECK(sw_tiled_evictable_release(te, &err) == SW_OK);
    float v[N] = {0};
    CHECK_EQ_I64(sw_carrier_read_layout_as(c, 0, L, SW_DT_FLOAT32, v, &err), SW_ESTATE);
    CHECK_EQ_I64(err.detail, SW_CARRIER_REFUSED_RELEASED);
    CHECK(strstr(err.msg, "released") != NULL);
    CHECK_EQ_I64(sw_carrier_write_layout_as(c, 0, L, SW_DT_FLOAT32, v, &err), SW_ESTATE);
    CHECK_EQ_I64(err.detail, SW_CARRIER_REFUSED_RELEASED);
    CHECK(strstr(err.msg, "released") != NULL);
    sw_copy_stop stop;
    CHECK_EQ_I64(sw_carrier_copy_layout(c, 0, c, 0, L, SW_DT_FLOAT32, NULL, NULL, &stop, &err),
                 SW_ESTATE);
    CHECK_EQ_I64(err.detail, SW_CARRIER_REFUSED_RELEASED);
    sw_layout_free(L);
    destroy(&b, te, c);
}

/* Many readers of the whole carrier while one thread evicts and promotes
 * its tiles: every read sees every value (the stores a move replaced are
 * discarded only once the reads reaching them are over). */
typedef struct shared {
    sw_carrier *c;
    sw_tiled_evictable *te;
    const sw_layout *L; /* made before the readers start: CHECK is not thread-safe */
    atomic_int stop;
    atomic_int bad, reads;
} shared;

static void *reader(void *arg)
{
    shared *s = arg;
    while (!atomic_load(&s->stop) || atomic_load(&s->reads) < 8) {
        float got[N];
        sw_error err;
        int ok = sw_carrier_read_layout_as(s->c, 0, s->L, SW_DT_FLOAT32, got, &err) == SW_OK;
        for (int64_t i = 0; ok && i < N; i++)
            ok = got[i] == value_of(i);
        if (!ok)
            atomic_fetch_add(&s->bad, 1);
        atomic_fetch_add(&s->reads, 1);
    }
    return NULL;
}

static void test_threads(void)
{
    binding b;
    shared s = {0};
    s.te = make(&b, 1, &s.c);
    sw_layout *L = flat(N, 1);
    s.L = L;
    pthread_t r[4];
    for (int i = 0; i < 4; i++)
        CHECK(pthread_create(&r[i], NULL, reader, &s) == 0);
    int failed = 0;
    for (int round = 0; round < 400; round++) {
        int64_t tiles[2] = {round % 4, (round + 1) % 4};
        /* reads mark no tile: no request is refused while they run */
        failed += sw_tiled_evictable_evict(s.te, tiles, 2, NULL) != SW_OK;
        failed += sw_tiled_evictable_promote(s.te, tiles, 2, NULL) != SW_OK;
    }
    atomic_store(&s.stop, 1);
    for (int i = 0; i < 4; i++)
        pthread_join(r[i], NULL);
    printf("  %d reads during 400 eviction and promotion rounds\n", atomic_load(&s.reads));
    CHECK_EQ_I64(failed, 0);
    CHECK_EQ_I64(atomic_load(&s.bad), 0);
    CHECK(atomic_load(&s.reads) >= 8);
    sw_layout_free(L);
    destroy(&b, s.te, s.c);
}

int main(void)
{
    test_reads_in_either_tier(1);
    test_reads_in_either_tier(0);
    test_writes();
    test_copies();
    test_hook_failure();
    test_released_before_its_carrier();
    test_threads();
    return check_report("tiled_evictable_bound_slots");
}
