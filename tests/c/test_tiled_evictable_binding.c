/* TiledEvictable over binding tiers (tiled_evictable.h, "Binding tiers"):
 * a stand-in binding keeps the slots of STATE_ONLY carriers in a table and
 * plugs store, copy, read, write, size and discard hooks in. Checked:
 * construction needs the hooks; slot reads and writes, promote, evict and
 * projections reach bound stores only through the hooks, which run with no
 * core lock held (each hook calls state functions of the TiledEvictable and
 * of the store, which would deadlock on a held mutex) and see their tiles
 * pending; a copy the binding reports later, from another thread, commits
 * then (blocking and asynchronous forms); every failure (store, copy
 * refused, copy reported failed, a write hook failing half way) leaves
 * residency, values and version as they were and discards the fresh
 * stores; many threads promoting, evicting, reading, writing and
 * projecting one carrier whose replaced stores are freed on discard (a
 * read reaching a discarded store is counted, and ASan sees a use after
 * free). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "loop.h"
#include <strideweave/strideweave.h>
#include "strideweave/testing.h"

static float value_of(int64_t slot) { return 1.0f + (float)slot; }

/* ---- the stand-in binding ------------------------------------------------ */

static const sw_carrier_class binding_class = {
    .name = "BindingCarrier",
    .flags = SW_CARRIER_CLASS_STATE_ONLY,
};

#define MAXSTORES 8192

typedef struct bstore {
    sw_carrier *h;
    float *v; /* NULL once discarded */
    int64_t n;
} bstore;

typedef struct binding {
    pthread_mutex_t mu; /* guards the table, the queue and the counters */
    pthread_cond_t cv;
    bstore stores[MAXSTORES];
    int nstores;
    sw_tiled_evictable *te; /* once made */
    /* copy: 0 hands on to the core, 1 copies and reports inside the hook,
     * 2 queues the job for a completer thread */
    int copy_mode;
    sw_te_copy *queue[256];
    sw_carrier *qfrom[256], *qto[256];
    int qfull[256];
    int64_t qtile[256];
    int nqueued;
    int fail_store, refuse_copy, fail_copy_report, fail_write_at; /* fail_write_at: 1-based */
    int checks;                       /* hooks that checked the locks */
    int saw_unpending, bad_reads;     /* a hook's tile not pending; a read of a discarded store */
    int stores_made, discards, copies, reads, writes;
    int threaded; /* threads share it: hooks skip the lock probes */
    int gate_reads, in_read, go; /* a read hook waits for `go` */
    sw_te_work *seen_work;       /* sw_te_work_current() in the last store/copy hook */
    int hooks_seen;              /* store/copy hooks that recorded it */
    /* read_many: plugged in when use_many; many_mode 0 reads, 1 answers
     * SW_ENOTSUP, 2 fails; the last call's entries are kept */
    int use_many, many_mode, many_calls;
    int64_t many_n, many_at[16], many_count[16], many_dest_at[16];
    sw_carrier *many_store[16];
} binding;

static void note_work(binding *b)
{
    pthread_mutex_lock(&b->mu);
    b->seen_work = sw_te_work_current();
    b->hooks_seen++;
    pthread_mutex_unlock(&b->mu);
}

static void binding_init(binding *b)
{
    memset(b, 0, sizeof *b);
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
}

static bstore *store_of(binding *b, sw_carrier *h)
{
    bstore *s = NULL;
    pthread_mutex_lock(&b->mu);
    for (int i = 0; i < b->nstores && !s; i++)
        if (b->stores[i].h == h)
            s = &b->stores[i];
    pthread_mutex_unlock(&b->mu);
    return s;
}

/* The slots of a binding store (NULL when discarded or unknown). */
static float *values_of(binding *b, sw_carrier *h, int64_t *n)
{
    bstore *s = store_of(b, h);
    pthread_mutex_lock(&b->mu);
    float *v = s ? s->v : NULL;
    if (n)
        *n = s ? s->n : 0;
    pthread_mutex_unlock(&b->mu);
    return v;
}

static sw_carrier *binding_new(binding *b, int64_t n, int filled)
{
    sw_carrier *h = NULL;
    if (sw_carrier_new(&binding_class, NULL, SW_DT_ANY, 0, &h, NULL) != SW_OK)
        return NULL;
    float *v = calloc((size_t)n + 1, sizeof *v);
    for (int64_t i = 0; filled && i < n; i++)
        v[i] = value_of(i);
    pthread_mutex_lock(&b->mu);
    bstore *s = b->nstores < MAXSTORES ? &b->stores[b->nstores++] : NULL;
    if (s)
        *s = (bstore){h, v, n};
    pthread_mutex_unlock(&b->mu);
    if (!s) {
        free(v);
        sw_carrier_unref(h);
        return NULL;
    }
    return h;
}

static void binding_free(binding *b)
{
    for (int i = 0; i < b->nstores; i++) {
        free(b->stores[i].v);
        sw_carrier_unref(b->stores[i].h);
    }
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
}

/* No core lock is held: these take the TiledEvictable's mutex and the
 * store's (a held one would deadlock here). Then: is tile `t` pending? */
static void probe(binding *b, sw_carrier *store, int64_t t)
{
    if (b->threaded || !b->te)
        return;
    (void)sw_carrier_is_released(store);
    const sw_tile_geometry *g = sw_tiled_evictable_geometry(b->te);
    int64_t c[SW_TILES_MAX_RANK];
    sw_tiles_tile_coord(g, t >= 0 ? t : 0, c);
    sw_te_tile_state st;
    CHECK(sw_tiled_evictable_tile_state(b->te, c, &st, NULL) == SW_OK);
    pthread_mutex_lock(&b->mu);
    b->checks++;
    if (t >= 0 && !st.pending)
        b->saw_unpending++;
    pthread_mutex_unlock(&b->mu);
}

static void count(binding *b, int *what)
{
    pthread_mutex_lock(&b->mu);
    (*what)++;
    pthread_mutex_unlock(&b->mu);
}

static sw_status b_store(sw_carrier *proto, int secondary, int64_t size, sw_dtype dtype, int zero,
                         void *user, sw_carrier **out, sw_error *err)
{
    binding *b = user;
    (void)secondary;
    (void)zero; /* the table's stores start zeroed */
    if (dtype != SW_DT_FLOAT32)
        return sw_error_set(err, SW_ETYPE, "binding: float32 only");
    note_work(b);
    if (!store_of(b, proto) && sw_carrier_class_of(proto) != &sw_block_device_carrier_class)
        return SW_ENOTSUP; /* a CPU tier: the core's */
    probe(b, proto, -1);
    if (b->fail_store)
        return sw_error_set(err, SW_ENOMEM, "binding: no room for a tile");
    count(b, &b->stores_made);
    *out = sw_carrier_ref(binding_new(b, size, 0)); /* the table keeps its own */
    return *out ? SW_OK : sw_error_set(err, SW_ENOMEM, "binding: table full");
}

static sw_status b_read(sw_carrier *store, int64_t at, int64_t n, void *out, void *user,
                        sw_error *err)
{
    binding *b = user;
    probe(b, store, -1);
    count(b, &b->reads);
    pthread_mutex_lock(&b->mu);
    if (b->gate_reads) {
        b->in_read = 1;
        pthread_cond_broadcast(&b->cv);
        while (!b->go)
            pthread_cond_wait(&b->cv, &b->mu);
    }
    pthread_mutex_unlock(&b->mu);
    int64_t size;
    float *v = values_of(b, store, &size);
    if (!v) {
        count(b, &b->bad_reads);
        return sw_error_set(err, SW_ESTATE, "binding: read of a discarded store");
    }
    if (at < 0 || at + n > size)
        return sw_error_set(err, SW_ERANGE, "binding: read out of range");
    memcpy(out, v + at, (size_t)n * sizeof *v);
    return SW_OK;
}

static sw_status b_write(sw_carrier *store, int64_t at, int64_t n, const void *in, void *user,
                         sw_error *err)
{
    binding *b = user;
    probe(b, store, -1);
    pthread_mutex_lock(&b->mu);
    int nth = ++b->writes;
    int fail = b->fail_write_at && nth == b->fail_write_at;
    pthread_mutex_unlock(&b->mu);
    if (fail)
        return sw_error_set(err, SW_EIO, "binding: the device refused the write");
    int64_t size;
    float *v = values_of(b, store, &size);
    if (!v || at < 0 || at + n > size)
        return sw_error_set(err, SW_ERANGE, "binding: write out of range");
    memcpy(v + at, in, (size_t)n * sizeof *v);
    return SW_OK;
}

static sw_status b_size(sw_carrier *tier, void *user, int64_t *out, sw_error *err)
{
    binding *b = user;
    bstore *s = store_of(b, tier);
    if (!s)
        return sw_error_set(err, SW_ETYPE, "binding: not a binding tier");
    pthread_mutex_lock(&b->mu);
    *out = s->n;
    pthread_mutex_unlock(&b->mu);
    return SW_OK;
}

static void b_discard(sw_carrier *store, void *user)
{
    binding *b = user;
    bstore *s = store_of(b, store);
    pthread_mutex_lock(&b->mu);
    b->discards++;
    float *v = s ? s->v : NULL;
    if (s)
        s->v = NULL;
    pthread_mutex_unlock(&b->mu);
    free(v);
    (void)sw_carrier_release(store, NULL);
}

/* Tile `t` of `from` (full: at its own slots) into the tile-sized `to`. */
static sw_status do_copy(binding *b, sw_carrier *from, int full, sw_carrier *to, int64_t t,
                         sw_error *err)
{
    const sw_tile_geometry *g = sw_tiled_evictable_geometry(b->te);
    float *src = store_of(b, from) ? values_of(b, from, NULL) : sw_cpu_pointer(from);
    float *dst = store_of(b, to) ? values_of(b, to, NULL) : sw_cpu_pointer(to);
    if (!src || !dst)
        return sw_error_set(err, SW_ESTATE, "binding: copy of a discarded store");
    sw_tile_run runs[64];
    int64_t n = 1;
    runs[0] = (sw_tile_run){0, 0, g->tile_size};
    if (full)
        n = sw_tiles_runs(g, t, runs);
    for (int64_t i = 0; i < n; i++)
        memcpy(dst + runs[i].within, src + runs[i].slot, (size_t)runs[i].count * sizeof *dst);
    return SW_OK;
}

static sw_status b_copy(sw_te_copy *job, sw_carrier *from, int from_full, sw_carrier *to,
                        int64_t tile, void *user, sw_error *err)
{
    binding *b = user;
    note_work(b);
    probe(b, to, tile);
    if (b->copy_mode == 0)
        return SW_ENOTSUP;
    if (b->refuse_copy)
        return sw_error_set(err, SW_EIO, "binding: no route for this copy");
    count(b, &b->copies);
    if (b->copy_mode == 1) {
        sw_error e;
        sw_status st = b->fail_copy_report ? sw_error_set(&e, SW_EIO, "binding: copy failed")
                                           : do_copy(b, from, from_full, to, tile, &e);
        sw_te_copy_done(job, st, &e);
        return SW_OK;
    }
    pthread_mutex_lock(&b->mu);
    int k = b->nqueued++;
    b->queue[k] = job;
    b->qfrom[k] = from;
    b->qto[k] = to;
    b->qfull[k] = from_full;
    b->qtile[k] = tile;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return SW_OK;
}

/* The completer: waits for `n` queued jobs, copies and reports them. */
typedef struct completer {
    binding *b;
    int n;
    pthread_t th;
} completer;

static void *complete_jobs(void *arg)
{
    completer *c = arg;
    binding *b = c->b;
    for (int done = 0; done < c->n; done++) {
        pthread_mutex_lock(&b->mu);
        while (b->nqueued == 0)
            pthread_cond_wait(&b->cv, &b->mu);
        int k = --b->nqueued;
        sw_te_copy *job = b->queue[k];
        sw_carrier *from = b->qfrom[k], *to = b->qto[k];
        int full = b->qfull[k];
        int64_t t = b->qtile[k];
        pthread_mutex_unlock(&b->mu);
        sw_error e;
        sw_status st = b->fail_copy_report ? sw_error_set(&e, SW_EIO, "binding: copy failed")
                                           : do_copy(b, from, full, to, t, &e);
        sw_te_copy_done(job, st, &e);
    }
    return NULL;
}

static void wait_queued(binding *b, int n)
{
    pthread_mutex_lock(&b->mu);
    while (b->nqueued < n)
        pthread_cond_wait(&b->cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
}

/* The batch read: every entry checked, then served from the table. */
static sw_status b_read_many(sw_carrier *const *store, const int64_t *at, const int64_t *cnt,
                             sw_carrier *dest, const int64_t *dest_at, int64_t n, void *user,
                             sw_error *err)
{
    binding *b = user;
    probe(b, store[0], -1);
    (void)sw_carrier_is_released(dest); /* the destination's lock is free too */
    count(b, &b->many_calls);
    b->many_n = n;
    for (int64_t i = 0; i < n && i < 16; i++) {
        b->many_store[i] = store[i];
        b->many_at[i] = at[i];
        b->many_count[i] = cnt[i];
        b->many_dest_at[i] = dest_at[i];
    }
    if (b->many_mode == 1)
        return SW_ENOTSUP;
    if (b->many_mode == 2)
        return sw_error_set(err, SW_EIO, "binding: the batch read failed");
    float *d = sw_cpu_pointer(dest);
    for (int64_t i = 0; i < n; i++) {
        int64_t size;
        float *v = values_of(b, store[i], &size);
        if (!v || at[i] < 0 || at[i] + cnt[i] > size || dest_at[i] < 0 ||
            dest_at[i] + cnt[i] > sw_carrier_size(dest))
            return sw_error_set(err, SW_ERANGE, "binding: batch read out of range");
        memcpy(d + dest_at[i], v + at[i], (size_t)cnt[i] * sizeof *v);
    }
    return SW_OK;
}

static sw_te_tier_hooks hooks_of(binding *b)
{
    return (sw_te_tier_hooks){.store = b_store, .copy = b_copy, .read = b_read,
                              .write = b_write, .size = b_size, .discard = b_discard,
                              .user = b, .dtype = SW_DT_FLOAT32,
                              .read_many = b->use_many ? b_read_many : NULL};
}

/* A full binding primary holding value_of(slot) over an empty secondary
 * (a binding tier, or CPU when `cpu_secondary`). */
static sw_tiled_evictable *make_bound(binding *b, int32_t rank, const int64_t *grid,
                                      const int64_t *tile, int cpu_secondary)
{
    sw_tile_geometry g;
    if (sw_tiles_geometry_init(&g, rank, grid, tile, NULL) != SW_OK)
        return NULL;
    sw_carrier *p = binding_new(b, g.size, 1), *s = NULL;
    if (cpu_secondary)
        sw_cpu_new(0, SW_DT_FLOAT32, 0, &s, NULL);
    else
        s = binding_new(b, 0, 0);
    sw_te_tier_hooks h = hooks_of(b);
    sw_error err;
    sw_tiled_evictable *te = NULL;
    CHECK(sw_tiled_evictable_new_bound(p, s, rank, grid, tile, &h, &te, &err) == SW_OK);
    if (cpu_secondary)
        sw_carrier_unref(s);
    b->te = te;
    return te;
}

#define MAXS 64
#define MAXT 16

typedef struct snap {
    sw_te_tile_state st[MAXT];
    float values[MAXS];
    sw_status read_status;
    uint64_t version;
} snap;

static void take(sw_tiled_evictable *te, snap *s)
{
    memset(s, 0, sizeof *s);
    const sw_tile_geometry *g = sw_tiled_evictable_geometry(te);
    for (int64_t t = 0; t < g->ntiles && t < MAXT; t++) {
        int64_t c[SW_TILES_MAX_RANK];
        sw_tiles_tile_coord(g, t, c);
        sw_tiled_evictable_tile_state(te, c, &s->st[t], NULL);
    }
    s->read_status = sw_tiled_evictable_read(te, 0, g->size, s->values, NULL);
    s->version = sw_tiled_evictable_version(te);
}

static int same(const snap *a, const snap *b) { return memcmp(a, b, sizeof *a) == 0; }

static int values_intact(sw_tiled_evictable *te)
{
    float v[MAXS];
    int64_t n = sw_tiled_evictable_size(te);
    if (sw_tiled_evictable_read(te, 0, n, v, NULL) != SW_OK)
        return 0;
    for (int64_t i = 0; i < n; i++)
        if (v[i] != value_of(i))
            return 0;
    return 1;
}

static const int64_t GRID[2] = {2, 2}, TILE[2] = {2, 3}; /* shape 4 x 6, tiles of 6 */
static const int64_t ALL[8] = {0, 0, 1, 0, 0, 1, 1, 1};

/* ---- tests ------------------------------------------------------------------- */

static void test_construction_needs_the_hooks(void)
{
    binding b;
    binding_init(&b);
    sw_error err;
    sw_carrier *p = binding_new(&b, 24, 1), *s = NULL;
    sw_cpu_new(0, SW_DT_FLOAT32, 0, &s, NULL);
    sw_tiled_evictable *te = NULL;
    /* Without hooks: the plain constructor refuses a binding tier. */
    CHECK_EQ_I64(sw_tiled_evictable_new(p, s, 2, GRID, TILE, &te, &err), SW_ENOTSUP);
    CHECK_EQ_I64(sw_tiled_evictable_new_bound(p, s, 2, GRID, TILE, NULL, &te, &err), SW_EINVAL);
    /* A bound tier needs store, read and write; a STATE_ONLY one size. */
    sw_te_tier_hooks h = hooks_of(&b);
    h.read = NULL;
    CHECK_EQ_I64(sw_tiled_evictable_new_bound(p, s, 2, GRID, TILE, &h, &te, &err), SW_EINVAL);
    CHECK(strstr(err.msg, "primary") != NULL);
    h = hooks_of(&b);
    h.size = NULL;
    CHECK_EQ_I64(sw_tiled_evictable_new_bound(p, s, 2, GRID, TILE, &h, &te, &err), SW_EINVAL);
    CHECK(!sw_carrier_is_owned(p) && !sw_carrier_is_owned(s));
    /* A tier of a class the core does not keep in its role (a FileBacked
     * primary) is the binding's to reach: it needs the hooks too. */
    sw_carrier *fp = NULL;
    sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &fp, NULL);
    h = hooks_of(&b);
    h.write = NULL;
    CHECK_EQ_I64(sw_tiled_evictable_new_bound(fp, p, 2, GRID, TILE, &h, &te, &err), SW_EINVAL);
    CHECK(strstr(err.msg, "FileBacked") != NULL && strstr(err.msg, "primary") != NULL);
    CHECK(!sw_carrier_is_owned(fp) && !sw_carrier_is_owned(p));
    sw_carrier_release(fp, NULL);
    sw_carrier_unref(fp);
    /* The binding's size must fit (neither 0 nor the logical size). */
    sw_carrier *odd = binding_new(&b, 7, 0);
    h = hooks_of(&b);
    CHECK_EQ_I64(sw_tiled_evictable_new_bound(odd, s, 2, GRID, TILE, &h, &te, &err), SW_EINVAL);
    /* With the hooks: the binding's dtype, tiles primary, values through read. */
    CHECK_EQ_I64(sw_tiled_evictable_new_bound(p, s, 2, GRID, TILE, &h, &te, &err), SW_OK);
    b.te = te;
    CHECK(sw_carrier_is_owned(p) && sw_carrier_is_owned(s));
    CHECK_EQ_I64(sw_tiled_evictable_dtype(te), SW_DT_FLOAT32);
    CHECK_EQ_I64(sw_tiled_evictable_size(te), 24);
    CHECK(values_intact(te));
    CHECK(b.reads > 0);
    CHECK(b.checks > 0); /* the read hook ran with no core lock held */
    /* The factories leave binding tiers to the binding. */
    sw_tiled_evictable *like = NULL;
    CHECK_EQ_I64(sw_tiled_evictable_allocate_like(te, 0, &like, &err), SW_ENOTSUP);
    CHECK_EQ_I64(sw_tiled_evictable_release(te, &err), SW_OK);
    CHECK(sw_carrier_is_released(p));
    sw_tiled_evictable_unref(te);
    CHECK(!sw_carrier_is_owned(p));
    sw_carrier_unref(s);
    binding_free(&b);
}

/* Promote, evict, write, read and project through the hooks, each hook
 * with no core lock held and its tiles pending; both copy paths (the
 * binding's, and the core's through read/write). */
static void run_cycle(int copy_mode, int cpu_secondary)
{
    binding b;
    binding_init(&b);
    b.copy_mode = copy_mode;
    sw_tiled_evictable *te = make_bound(&b, 2, GRID, TILE, cpu_secondary);
    sw_error err;
    CHECK_EQ_I64(sw_tiled_evictable_evict(te, ALL, 4, &err), SW_OK);
    snap s;
    take(te, &s);
    for (int t = 0; t < 4; t++)
        CHECK(s.st[t].location == SW_TE_SECONDARY && !s.st[t].pending);
    CHECK(values_intact(te));
    CHECK_EQ_I64(sw_tiled_evictable_promote(te, ALL, 2, &err), SW_OK);
    take(te, &s);
    CHECK(s.st[0].location == SW_TE_PRIMARY && s.st[1].location == SW_TE_PRIMARY);
    CHECK(s.st[2].location == SW_TE_SECONDARY && s.st[3].location == SW_TE_SECONDARY);
    CHECK(values_intact(te));
    CHECK_EQ_I64(b.saw_unpending, 0);
    CHECK_EQ_I64(b.copies, copy_mode ? 6 : 0);
    if (!cpu_secondary)
        CHECK_EQ_I64(b.stores_made, 6);
    /* The old bound stores of the promoted tiles were discarded (never the
     * tiers themselves; CPU stores are the core's). */
    CHECK_EQ_I64(b.discards, cpu_secondary ? 0 : 2);
    CHECK_EQ_I64(sw_tiled_evictable_evict(te, ALL, 1, &err), SW_OK);
    /* A write across tiles 0 (secondary: promoted first) and 1 (primary);
     * the binding's write hook sees its tiles pending. */
    float w[8] = {-1, -2, -3, -4, -5, -6, -7, -8};
    CHECK_EQ_I64(sw_tiled_evictable_write(te, 0, 8, w, &err), SW_OK);
    float r[8];
    CHECK_EQ_I64(sw_tiled_evictable_read(te, 0, 8, r, &err), SW_OK);
    CHECK(memcmp(r, w, sizeof w) == 0);
    CHECK_EQ_I64(sw_tiled_evictable_version(te), 1);
    int64_t c1[2] = {1, 0};
    sw_te_tile_state ts;
    sw_tiled_evictable_tile_state(te, c1, &ts, NULL);
    CHECK(ts.location == SW_TE_PRIMARY && ts.dirty);
    /* A projection gathers bound tiles through the read hook. */
    int64_t ax0[2] = {1, 0}, ax1[1] = {1}, counts[2] = {2, 1};
    const int64_t *axes[2] = {ax0, ax1};
    sw_tile_selection sel = {2, counts, axes};
    sw_tensor *out = NULL;
    CHECK_EQ_I64(sw_tiled_evictable_project(te, NULL, 0, &sel, NULL, &out, &err), SW_OK);
    if (out) {
        const float *d = sw_cpu_pointer(sw_tensor_carrier(out));
        /* compact (i, j), shape 4 x 3: logical (ax0[i/2]*2 + i%2, 3 + j) */
        int bad = 0;
        float all[24];
        sw_tiled_evictable_read(te, 0, 24, all, NULL);
        for (int j = 0; j < 3; j++)
            for (int i = 0; i < 4; i++)
                bad += d[i + 4 * j] != all[(ax0[i / 2] * 2 + i % 2) + 4 * (3 + j)];
        CHECK_EQ_I64(bad, 0);
        sw_tensor_unref(out);
    }
    CHECK_EQ_I64(b.saw_unpending, 0);
    CHECK_EQ_I64(b.bad_reads, 0);
    CHECK(b.checks > 0);
    CHECK_EQ_I64(sw_tiled_evictable_release(te, &err), SW_OK);
    sw_tiled_evictable_unref(te);
    binding_free(&b);
}

static void test_hooks_run_without_core_lock(void)
{
    run_cycle(1, 0); /* the binding copies */
    run_cycle(0, 0); /* the core copies through read and write */
    run_cycle(1, 1); /* a CPU secondary: the binding still copies */
    run_cycle(0, 1);
}

typedef struct evictor {
    sw_tiled_evictable *te;
    const int64_t *coords;
    int64_t n;
    sw_status st;
    sw_error err;
} evictor;

static void *evict_thread(void *arg)
{
    evictor *e = arg;
    e->st = sw_tiled_evictable_evict(e->te, e->coords, e->n, &e->err);
    return NULL;
}

/* The binding takes the copies and reports them later from another thread:
 * the request waits for them, the tiles stay pending meanwhile, then it
 * commits. Blocking and asynchronous forms; a late failure too. */
static void test_copy_finishes_later_from_another_thread(void)
{
    binding b;
    binding_init(&b);
    b.copy_mode = 2;
    sw_tiled_evictable *te = make_bound(&b, 2, GRID, TILE, 0);
    b.threaded = 1; /* the main thread probes itself below */
    evictor e = {te, ALL, 2, SW_EINVAL, {0}};
    pthread_t th;
    pthread_create(&th, NULL, evict_thread, &e);
    wait_queued(&b, 2);
    sw_te_tile_state ts;
    int64_t c0[2] = {0, 0};
    CHECK_EQ_I64(sw_tiled_evictable_tile_state(te, c0, &ts, NULL), SW_OK);
    CHECK(ts.pending && ts.location == SW_TE_PRIMARY);
    float one = 5;
    sw_error err;
    CHECK_EQ_I64(sw_tiled_evictable_write(te, 0, 1, &one, &err), SW_ESTATE); /* pending */
    CHECK(values_intact(te)); /* reads still work */
    completer c = {&b, 2, 0};
    pthread_create(&c.th, NULL, complete_jobs, &c);
    pthread_join(c.th, NULL);
    pthread_join(th, NULL);
    CHECK_EQ_I64(e.st, SW_OK);
    CHECK_EQ_I64(sw_tiled_evictable_tile_state(te, c0, &ts, NULL), SW_OK);
    CHECK(!ts.pending && ts.location == SW_TE_SECONDARY);
    CHECK(values_intact(te));

    /* Asynchronous: the handle is not done until the binding reports. */
    sw_te_work *w = NULL;
    CHECK_EQ_I64(sw_tiled_evictable_promote_async(te, ALL, 2, &w, &err), SW_OK);
    wait_queued(&b, 2);
    CHECK(!sw_te_work_done(w));
    c = (completer){&b, 2, 0};
    pthread_create(&c.th, NULL, complete_jobs, &c);
    CHECK_EQ_I64(sw_te_work_wait(w, NULL, &err), SW_OK);
    pthread_join(c.th, NULL);
    sw_te_work_unref(w);
    CHECK_EQ_I64(sw_tiled_evictable_tile_state(te, c0, &ts, NULL), SW_OK);
    CHECK(ts.location == SW_TE_PRIMARY && !ts.pending);
    CHECK(values_intact(te));

    /* A failure reported later: nothing changed, the fresh stores discarded. */
    snap before, after;
    take(te, &before);
    b.fail_copy_report = 1;
    int discards = b.discards;
    e = (evictor){te, ALL, 4, SW_OK, {0}};
    pthread_create(&th, NULL, evict_thread, &e);
    wait_queued(&b, 4);
    c = (completer){&b, 4, 0};
    pthread_create(&c.th, NULL, complete_jobs, &c);
    pthread_join(c.th, NULL);
    pthread_join(th, NULL);
    CHECK_EQ_I64(e.st, SW_EIO);
    CHECK(strstr(e.err.msg, "copy failed") != NULL);
    take(te, &after);
    CHECK(same(&before, &after));
    CHECK_EQ_I64(b.discards - discards, 4);
    b.fail_copy_report = 0;
    CHECK_EQ_I64(sw_tiled_evictable_release(te, &err), SW_OK);
    sw_tiled_evictable_unref(te);
    binding_free(&b);
}

/* Every failure leaves residency, values and version as they were. */
static void test_failures_change_nothing(void)
{
    binding b;
    binding_init(&b);
    b.copy_mode = 1;
    sw_tiled_evictable *te = make_bound(&b, 2, GRID, TILE, 0);
    sw_error err;
    snap before, after;
    CHECK_EQ_I64(sw_tiled_evictable_evict(te, ALL + 4, 2, &err), SW_OK); /* tiles 2, 3 */
    take(te, &before);

    b.fail_store = 1; /* no fresh store */
    CHECK_EQ_I64(sw_tiled_evictable_evict(te, ALL, 2, &err), SW_ENOMEM);
    take(te, &after);
    CHECK(same(&before, &after));
    b.fail_store = 0;

    int discards = b.discards;
    b.refuse_copy = 1; /* the copy hook refuses: the fresh store goes */
    CHECK_EQ_I64(sw_tiled_evictable_evict(te, ALL, 2, &err), SW_EIO);
    CHECK(strstr(err.msg, "no route") != NULL);
    take(te, &after);
    CHECK(same(&before, &after));
    CHECK_EQ_I64(b.discards - discards, 1);
    b.refuse_copy = 0;

    b.fail_copy_report = 1; /* the copy reports failure inside the hook */
    CHECK_EQ_I64(sw_tiled_evictable_promote(te, ALL + 4, 2, &err), SW_EIO);
    take(te, &after);
    CHECK(same(&before, &after));
    b.fail_copy_report = 0;

    /* A write over tiles 0 and 1 (both bound, primary) whose second run
     * fails: the first run is written back, the version stays. Each run
     * reads its old values, then writes: the second write is hook call 2. */
    float w[8] = {-1, -2, -3, -4, -5, -6, -7, -8};
    b.writes = 0;
    b.fail_write_at = 2;
    CHECK_EQ_I64(sw_tiled_evictable_write(te, 0, 8, w, &err), SW_EIO);
    take(te, &after);
    CHECK(same(&before, &after));
    b.fail_write_at = 0;
    /* The caller simply tries again. */
    CHECK_EQ_I64(sw_tiled_evictable_evict(te, ALL, 2, &err), SW_OK);
    CHECK_EQ_I64(sw_tiled_evictable_write(te, 0, 8, w, &err), SW_OK);
    CHECK_EQ_I64(sw_tiled_evictable_version(te), 1);
    CHECK_EQ_I64(b.bad_reads, 0);
    CHECK_EQ_I64(sw_tiled_evictable_release(te, &err), SW_OK);
    sw_tiled_evictable_unref(te);
    binding_free(&b);
}

typedef struct reader {
    sw_tiled_evictable *te;
    float v[4];
    sw_status st;
} reader;

static void *read_thread(void *arg)
{
    reader *r = arg;
    r->st = sw_tiled_evictable_read(r->te, 0, 2, r->v, NULL);
    return NULL;
}

/* A read reaching a bound store while another thread moves that tile: the
 * replaced store is discarded only once the read is over (the binding
 * frees a discarded store's slots), and release waits for the read. */
static void test_read_keeps_a_replaced_store_until_it_is_over(void)
{
    binding b;
    binding_init(&b);
    b.copy_mode = 1;
    sw_tiled_evictable *te = make_bound(&b, 2, GRID, TILE, 0);
    sw_error err;
    CHECK_EQ_I64(sw_tiled_evictable_evict(te, ALL, 1, &err), SW_OK);
    b.gate_reads = 1;
    reader r = {te, {0}, SW_EINVAL};
    pthread_t th;
    pthread_create(&th, NULL, read_thread, &r);
    pthread_mutex_lock(&b.mu);
    while (!b.in_read)
        pthread_cond_wait(&b.cv, &b.mu);
    b.gate_reads = 0; /* only that read waits */
    pthread_mutex_unlock(&b.mu);
    int discards = b.discards;
    CHECK_EQ_I64(sw_tiled_evictable_promote(te, ALL, 1, &err), SW_OK);
    CHECK_EQ_I64(b.discards, discards); /* the read still reaches it */
    CHECK_EQ_I64(sw_tiled_evictable_release(te, &err), SW_ESTATE);
    pthread_mutex_lock(&b.mu);
    b.go = 1;
    pthread_cond_broadcast(&b.cv);
    pthread_mutex_unlock(&b.mu);
    pthread_join(th, NULL);
    CHECK_EQ_I64(r.st, SW_OK);
    CHECK(r.v[0] == value_of(0) && r.v[1] == value_of(1));
    CHECK_EQ_I64(b.bad_reads, 0);
    CHECK_EQ_I64(b.discards, discards + 1); /* gone with the last reader */
    CHECK(values_intact(te));
    CHECK_EQ_I64(sw_tiled_evictable_release(te, &err), SW_OK);
    sw_tiled_evictable_unref(te);
    binding_free(&b);
}

/* ---- many threads ------------------------------------------------------------ */

#define THREADS 6
#define ROUNDS 60

typedef struct worker {
    sw_tiled_evictable *te;
    int id;
    int bad; /* wrong values, or a refusal other than "busy" */
} worker;

static const int64_t TGRID[2] = {4, 4}, TTILE[2] = {2, 2}; /* shape 8 x 8, 16 tiles of 4 */

static void *work(void *arg)
{
    worker *k = arg;
    unsigned seed = (unsigned)k->id * 7919u + 1;
    for (int r = 0; r < ROUNDS; r++) {
        seed = seed * 1103515245u + 12345u;
        int64_t c[2] = {(seed >> 8) % 4, (seed >> 12) % 4};
        sw_error err;
        sw_status st = SW_OK;
        switch ((seed >> 16) % 4) {
        case 0: st = sw_tiled_evictable_evict(k->te, c, 1, &err); break;
        case 1: st = sw_tiled_evictable_promote(k->te, c, 1, &err); break;
        case 2: {
            float v[64];
            st = sw_tiled_evictable_read(k->te, 0, 64, v, &err);
            for (int i = 0; st == SW_OK && i < 64; i++)
                k->bad += v[i] != value_of(i);
            break;
        }
        default: {
            int64_t a0[1] = {c[0]}, a1[1] = {c[1]}, counts[2] = {1, 1};
            const int64_t *axes[2] = {a0, a1};
            sw_tile_selection sel = {2, counts, axes};
            sw_tensor *out = NULL;
            st = sw_tiled_evictable_project(k->te, NULL, 0, &sel, NULL, &out, &err);
            if (st == SW_OK) {
                const float *d = sw_cpu_pointer(sw_tensor_carrier(out));
                for (int j = 0; j < 2; j++)
                    for (int i = 0; i < 2; i++)
                        k->bad += d[i + 2 * j] != value_of((c[0] * 2 + i) + 8 * (c[1] * 2 + j));
                sw_tensor_unref(out);
            }
        }
        }
        /* Racing requests are refused as busy (pending or pinned). */
        k->bad += st != SW_OK && st != SW_ESTATE;
    }
    return NULL;
}

static void run_threads(int copy_mode)
{
    binding b;
    binding_init(&b);
    b.copy_mode = copy_mode;
    b.threaded = 1;
    sw_tiled_evictable *te = make_bound(&b, 2, TGRID, TTILE, 0);
    worker w[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){te, i, 0};
        pthread_create(&th[i], NULL, work, &w[i]);
    }
    int bad = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        bad += w[i].bad;
    }
    CHECK_EQ_I64(bad, 0);
    CHECK_EQ_I64(b.bad_reads, 0);
    CHECK(values_intact(te));
    sw_error err;
    CHECK_EQ_I64(sw_tiled_evictable_release(te, &err), SW_OK);
    sw_tiled_evictable_unref(te);
    /* Every store the binding made was discarded (the tiers are released). */
    CHECK_EQ_I64(b.discards, b.stores_made);
    binding_free(&b);
}

static void test_many_threads(void)
{
    run_threads(1);
    run_threads(0);
}

/* A BlockDeviceCarrier tier is a bound tier: the hooks serve it. */
static void test_block_device_tier_is_the_bindings(void)
{
    (void)loop_backing_floats; /* loop.h's; unused here */
    const char *why = loop_unavailable();
    loop_dev loop;
    if (why || loop_attach(&loop, 8 << 20, 0, &why) != 0) {
        printf("skip: block device tier (%s)\n", why);
        return;
    }
    sw_error err;
    sw_block_device *dev = NULL;
    sw_carrier *s = NULL;
    CHECK_EQ_I64(sw_block_device_open(loop.path, &dev, &err), SW_OK);
    CHECK_EQ_I64(sw_block_device_allocate(dev, 24, SW_DT_FLOAT32, 0, &s, &err), SW_OK);
    binding b;
    binding_init(&b);
    b.copy_mode = 1;
    sw_carrier *p = binding_new(&b, 24, 1);
    sw_te_tier_hooks h = hooks_of(&b);
    sw_tiled_evictable *te = NULL;
    CHECK_EQ_I64(sw_tiled_evictable_new(p, s, 2, GRID, TILE, &te, &err), SW_ENOTSUP);
    CHECK_EQ_I64(sw_tiled_evictable_new_bound(p, s, 2, GRID, TILE, &h, &te, &err), SW_OK);
    b.te = te;
    if (te) {
        /* Tiles start primary; evicting one asks the binding for a store like
         * the device tier. */
        CHECK_EQ_I64(sw_tiled_evictable_evict(te, ALL, 1, &err), SW_OK);
        CHECK_EQ_I64(b.stores_made, 1);
        CHECK(values_intact(te));
        CHECK_EQ_I64(sw_tiled_evictable_release(te, &err), SW_OK);
        CHECK(sw_carrier_is_released(s));
        sw_tiled_evictable_unref(te);
    }
    sw_carrier_unref(s);
    sw_block_device_close(dev, NULL);
    sw_block_device_unref(dev);
    binding_free(&b);
    loop_detach(&loop);
}

/* A binding's factories: tiles start implicit where it says, whatever the
 * tiers' fullness would give; nothing else changes (checks, version). */
static void test_placed_construction(void)
{
    sw_error err;
    /* Core tiers: a full CPU primary with values, tiles 1 and 3 implicit. */
    sw_carrier *p = NULL, *s = NULL;
    CHECK_EQ_I64(sw_cpu_new(24, SW_DT_FLOAT32, 0, &p, &err), SW_OK);
    float *pv = sw_cpu_pointer(p);
    for (int64_t i = 0; i < 24; i++)
        pv[i] = value_of(i);
    CHECK_EQ_I64(sw_cpu_new(0, SW_DT_FLOAT32, 0, &s, &err), SW_OK);
    unsigned char zero[4] = {0, 1, 0, 1};
    sw_tiled_evictable *te = NULL;
    CHECK_EQ_I64(sw_tiled_evictable_new_placed(NULL, s, 2, GRID, TILE, NULL, zero, &te, &err),
                 SW_ETYPE);
    CHECK(te == NULL && !sw_carrier_is_owned(s));
    CHECK_EQ_I64(sw_tiled_evictable_new_placed(p, s, 2, GRID, TILE, NULL, zero, &te, &err),
                 SW_OK);
    if (te) {
        const sw_tile_geometry *g = sw_tiled_evictable_geometry(te);
        float v[24];
        CHECK_EQ_I64(sw_tiled_evictable_read(te, 0, 24, v, &err), SW_OK);
        for (int64_t i = 0; i < 24; i++) {
            int64_t t, w;
            sw_tiles_locate(g, i, &t, &w);
            CHECK(v[i] == (zero[t] ? 0.0f : value_of(i)));
        }
        for (int64_t t = 0; t < 4; t++) {
            int64_t c[2];
            sw_te_tile_state st;
            sw_tiles_tile_coord(g, t, c);
            CHECK_EQ_I64(sw_tiled_evictable_tile_state(te, c, &st, &err), SW_OK);
            CHECK_EQ_I64(st.location, zero[t] ? SW_TE_IMPLICIT : SW_TE_PRIMARY);
        }
        CHECK_EQ_I64((int64_t)sw_tiled_evictable_version(te), 0);
        /* An implicit tile promotes to zeros in fresh storage; the full
         * primary's slots of that tile are not its values any more. */
        int64_t one[2] = {1, 0};
        CHECK_EQ_I64(sw_tiled_evictable_promote(te, one, 1, &err), SW_OK);
        CHECK_EQ_I64(sw_tiled_evictable_read(te, 0, 24, v, &err), SW_OK);
        for (int64_t i = 0; i < 24; i++) {
            int64_t t, w;
            sw_tiles_locate(g, i, &t, &w);
            CHECK(v[i] == (zero[t] ? 0.0f : value_of(i)));
        }
        CHECK_EQ_I64(sw_tiled_evictable_release(te, &err), SW_OK);
        sw_tiled_evictable_unref(te);
    }
    sw_carrier_unref(p);
    sw_carrier_unref(s);

    /* Binding tiers, both empty: every tile implicit (allocate_like), read
     * without a hook; a promotion asks the binding for zeroed storage. */
    binding b;
    binding_init(&b);
    sw_carrier *bp = binding_new(&b, 0, 0), *bs = binding_new(&b, 0, 0);
    sw_te_tier_hooks h = hooks_of(&b);
    unsigned char all[4] = {1, 1, 1, 1};
    te = NULL;
    CHECK_EQ_I64(sw_tiled_evictable_new_placed(bp, bs, 2, GRID, TILE, &h, all, &te, &err), SW_OK);
    b.te = te;
    if (te) {
        float v[24];
        for (int64_t i = 0; i < 24; i++)
            v[i] = 7;
        CHECK_EQ_I64(sw_tiled_evictable_read(te, 0, 24, v, &err), SW_OK);
        for (int64_t i = 0; i < 24; i++)
            CHECK(v[i] == 0.0f);
        CHECK_EQ_I64(b.reads, 0);
        CHECK_EQ_I64(sw_tiled_evictable_promote(te, ALL, 4, &err), SW_OK);
        CHECK_EQ_I64(b.stores_made, 4);
        CHECK_EQ_I64(sw_tiled_evictable_read(te, 0, 24, v, &err), SW_OK);
        for (int64_t i = 0; i < 24; i++)
            CHECK(v[i] == 0.0f);
        CHECK_EQ_I64(sw_tiled_evictable_release(te, &err), SW_OK);
        sw_tiled_evictable_unref(te);
    }
    /* Without a placement: where the tiers put them (invalid here). */
    sw_carrier *cp = binding_new(&b, 0, 0), *cs = binding_new(&b, 0, 0);
    te = NULL;
    CHECK_EQ_I64(sw_tiled_evictable_new_placed(cp, cs, 2, GRID, TILE, &h, NULL, &te, &err), SW_OK);
    if (te) {
        int64_t n = 0;
        CHECK_EQ_I64(sw_tiled_evictable_tiles(te, SW_TE_TILES_INVALID, NULL, 0, &n, &err), SW_OK);
        CHECK_EQ_I64(n, 4);
        CHECK_EQ_I64(sw_tiled_evictable_release(te, &err), SW_OK);
        sw_tiled_evictable_unref(te);
    }
    binding_free(&b);
}

typedef struct notified {
    pthread_mutex_t mu;
    int calls;
    pthread_t thread;
    sw_status status;
    int done_inside;
} notified;

static void on_done(sw_te_work *w, void *user)
{
    notified *n = user;
    sw_error e;
    sw_status st = sw_te_work_wait(w, NULL, &e); /* does not block here */
    pthread_mutex_lock(&n->mu);
    n->calls++;
    n->thread = pthread_self();
    n->status = st;
    n->done_inside = sw_te_work_done(w);
    pthread_mutex_unlock(&n->mu);
}

static int calls_of(notified *n)
{
    pthread_mutex_lock(&n->mu);
    int c = n->calls;
    pthread_mutex_unlock(&n->mu);
    return c;
}

/* A binding learns when a handle commits (once, not on its own thread
 * when the work finishes later) and which handle a pool thread's hooks
 * serve. */
static void test_work_notifies_and_names_itself(void)
{
    binding b;
    binding_init(&b);
    b.copy_mode = 2;
    sw_tiled_evictable *te = make_bound(&b, 2, GRID, TILE, 0);
    b.threaded = 1;
    sw_error err;
    notified n = {.mu = PTHREAD_MUTEX_INITIALIZER};
    sw_te_work *w = NULL;
    CHECK_EQ_I64(sw_tiled_evictable_evict_async(te, ALL, 2, &w, &err), SW_OK);
    wait_queued(&b, 2);
    CHECK(b.hooks_seen > 0 && b.seen_work == w); /* the pool thread's hooks */
    CHECK_EQ_I64(sw_te_work_on_done(w, on_done, &n, &err), SW_OK);
    CHECK_EQ_I64(sw_te_work_on_done(w, on_done, &n, &err), SW_ESTATE); /* one per handle */
    CHECK_EQ_I64(sw_te_work_on_done(NULL, on_done, &n, &err), SW_ETYPE);
    CHECK_EQ_I64(calls_of(&n), 0); /* not before the binding reports */
    completer c = {&b, 2, 0};
    pthread_create(&c.th, NULL, complete_jobs, &c);
    pthread_join(c.th, NULL);
    sw_tiled_evictable_drain(); /* a drain covers the callback */
    CHECK_EQ_I64(calls_of(&n), 1);
    CHECK(!pthread_equal(n.thread, pthread_self()));
    CHECK_EQ_I64(n.status, SW_OK);
    CHECK(n.done_inside);
    CHECK_EQ_I64(sw_te_work_wait(w, NULL, &err), SW_OK);
    /* Registered on committed work: runs at once, on the caller. */
    notified late = {.mu = PTHREAD_MUTEX_INITIALIZER};
    sw_te_work *w2 = NULL;
    CHECK_EQ_I64(sw_tiled_evictable_promote_async(te, ALL, 2, &w2, &err), SW_OK);
    wait_queued(&b, 2);
    c = (completer){&b, 2, 0};
    pthread_create(&c.th, NULL, complete_jobs, &c);
    pthread_join(c.th, NULL);
    CHECK_EQ_I64(sw_te_work_wait(w2, NULL, &err), SW_OK);
    CHECK_EQ_I64(sw_te_work_on_done(w2, on_done, &late, &err), SW_OK);
    CHECK_EQ_I64(calls_of(&late), 1);
    CHECK(pthread_equal(late.thread, pthread_self()));
    sw_tiled_evictable_drain();
    CHECK_EQ_I64(calls_of(&n), 1); /* still once */
    /* A blocking call's hooks run on its caller: no work there. */
    b.copy_mode = 1;
    CHECK_EQ_I64(sw_tiled_evictable_evict(te, ALL, 2, &err), SW_OK);
    CHECK(b.seen_work == NULL);
    CHECK(sw_te_work_current() == NULL);
    sw_te_work_unref(w);
    sw_te_work_unref(w2);
    CHECK(values_intact(te));
    CHECK_EQ_I64(sw_tiled_evictable_release(te, &err), SW_OK);
    sw_tiled_evictable_unref(te);
    binding_free(&b);
}

/* _start: the copies are issued on the caller (hooks there, naming the
 * work); a request whose copies all reported is done on return; a copy
 * reported later keeps the handle open and the tiles pending; a failure is
 * the handle's with nothing changed; a refusal is the call's. */
static void test_start_issues_on_the_caller(void)
{
    binding b;
    binding_init(&b);
    b.copy_mode = 1; /* reports inside the hook */
    sw_tiled_evictable *te = make_bound(&b, 2, GRID, TILE, 0);
    sw_error err;
    int64_t c0[2] = {0, 0};
    sw_te_tile_state ts;
    sw_te_work *w = NULL;
    int copies = b.copies;
    CHECK_EQ_I64(sw_tiled_evictable_evict_start(te, ALL, 2, &w, &err), SW_OK);
    CHECK(w != NULL && sw_te_work_done(w));
    CHECK_EQ_I64(b.copies - copies, 2); /* on this thread, before return */
    CHECK(b.seen_work == w);
    CHECK(sw_te_work_current() == NULL);
    CHECK_EQ_I64(sw_te_work_wait(w, NULL, &err), SW_OK);
    notified n = {.mu = PTHREAD_MUTEX_INITIALIZER};
    CHECK_EQ_I64(sw_te_work_on_done(w, on_done, &n, &err), SW_OK);
    CHECK(calls_of(&n) == 1 && pthread_equal(n.thread, pthread_self()));
    sw_te_work_unref(w);
    CHECK_EQ_I64(sw_tiled_evictable_tile_state(te, c0, &ts, NULL), SW_OK);
    CHECK(ts.location == SW_TE_SECONDARY && !ts.pending);
    CHECK(values_intact(te));

    /* A refusal (a tile listed twice) is the call's: no handle. */
    w = NULL;
    int64_t twice[4] = {0, 0, 0, 0};
    CHECK_EQ_I64(sw_tiled_evictable_promote_start(te, twice, 2, &w, &err), SW_EINVAL);
    CHECK(w == NULL);

    /* Reported later: open handle, pending tiles, commit on report. */
    b.copy_mode = 2;
    b.threaded = 1;
    w = NULL;
    CHECK_EQ_I64(sw_tiled_evictable_promote_start(te, ALL, 2, &w, &err), SW_OK);
    CHECK(w != NULL);
    CHECK_EQ_I64(b.nqueued, 2); /* issued before the call returned */
    CHECK(!sw_te_work_done(w));
    CHECK_EQ_I64(sw_tiled_evictable_tile_state(te, c0, &ts, NULL), SW_OK);
    CHECK(ts.pending && ts.location == SW_TE_SECONDARY);
    float one = 5;
    CHECK_EQ_I64(sw_tiled_evictable_write(te, 0, 1, &one, &err), SW_ESTATE);
    CHECK_EQ_I64(sw_tiled_evictable_release(te, &err), SW_ESTATE);
    notified later = {.mu = PTHREAD_MUTEX_INITIALIZER};
    CHECK_EQ_I64(sw_te_work_on_done(w, on_done, &later, &err), SW_OK);
    completer c = {&b, 2, 0};
    pthread_create(&c.th, NULL, complete_jobs, &c);
    CHECK_EQ_I64(sw_te_work_wait(w, NULL, &err), SW_OK);
    pthread_join(c.th, NULL);
    sw_tiled_evictable_drain();
    CHECK_EQ_I64(calls_of(&later), 1);
    CHECK(!pthread_equal(later.thread, pthread_self()));
    sw_te_work_unref(w);
    CHECK_EQ_I64(sw_tiled_evictable_tile_state(te, c0, &ts, NULL), SW_OK);
    CHECK(ts.location == SW_TE_PRIMARY && !ts.pending);
    CHECK(values_intact(te));

    /* Failures are the handle's; nothing changed, fresh stores discarded. */
    snap before, after;
    take(te, &before);
    b.copy_mode = 1;
    b.fail_store = 1;
    w = NULL;
    CHECK_EQ_I64(sw_tiled_evictable_evict_start(te, ALL, 2, &w, &err), SW_OK);
    CHECK(w != NULL && sw_te_work_done(w));
    CHECK_EQ_I64(sw_te_work_wait(w, NULL, &err), SW_ENOMEM);
    CHECK(strstr(err.msg, "no room") != NULL);
    sw_te_work_unref(w);
    take(te, &after);
    CHECK(same(&before, &after));
    b.fail_store = 0;
    b.copy_mode = 2;
    b.fail_copy_report = 1;
    int discards = b.discards;
    w = NULL;
    CHECK_EQ_I64(sw_tiled_evictable_evict_start(te, ALL, 2, &w, &err), SW_OK);
    c = (completer){&b, 2, 0};
    pthread_create(&c.th, NULL, complete_jobs, &c);
    CHECK_EQ_I64(sw_te_work_wait(w, NULL, &err), SW_EIO);
    pthread_join(c.th, NULL);
    sw_te_work_unref(w);
    sw_tiled_evictable_drain();
    take(te, &after);
    CHECK(same(&before, &after));
    CHECK_EQ_I64(b.discards - discards, 2);
    b.fail_copy_report = 0;

    /* The pool refuses the wait: the call fails after the reports, nothing
     * changed, no handle. */
    if (sw_fault_enabled()) {
        CHECK_EQ_I64(sw_fault_arm("tile_submit", 0, 1), SW_OK);
        c = (completer){&b, 2, 0};
        pthread_create(&c.th, NULL, complete_jobs, &c);
        w = NULL;
        CHECK_EQ_I64(sw_tiled_evictable_evict_start(te, ALL, 2, &w, &err), SW_EIO);
        pthread_join(c.th, NULL);
        sw_fault_clear();
        CHECK(w == NULL);
        take(te, &after);
        CHECK(same(&before, &after));
    }
    CHECK_EQ_I64(sw_tiled_evictable_release(te, &err), SW_OK);
    sw_tiled_evictable_unref(te);
    binding_free(&b);
}

/* With hooks, a tier of a class the core does not keep in its role (Generic
 * memory as the primary, a FileBacked primary) is reached only through the
 * hooks, like a STATE_ONLY tier: reads, writes, copies and the stores made
 * like it; a store hook handing such a request back fails it. */
static sw_status g_store(sw_carrier *proto, int secondary, int64_t size, sw_dtype dtype, int zero,
                         void *user, sw_carrier **out, sw_error *err)
{
    binding *b = user;
    (void)zero;
    (void)secondary;
    const sw_carrier_class *k = sw_carrier_class_of(proto);
    if (k == &sw_cpu_class)
        return SW_ENOTSUP; /* the core's */
    count(b, &b->stores_made);
    if (b->fail_store)
        return SW_ENOTSUP; /* hand it back to the core */
    if (k == &sw_generic_class) {
        float *zeros = calloc((size_t)size + 1, sizeof *zeros);
        sw_status st = sw_generic_new(zeros, size, dtype, 0, out, err);
        free(zeros);
        return st;
    }
    sw_status st = sw_file_backed_new(NULL, dtype, 0, out, err);
    if (st == SW_OK && (st = sw_carrier_allocate(*out, size, err)) != SW_OK) {
        sw_carrier_release(*out, NULL);
        sw_carrier_unref(*out);
    }
    return st;
}

static sw_status g_read(sw_carrier *store, int64_t at, int64_t n, void *out, void *user,
                        sw_error *err)
{
    count(user, &((binding *)user)->reads);
    return sw_carrier_read(store, at, n, out, err);
}

static sw_status g_write(sw_carrier *store, int64_t at, int64_t n, const void *in, void *user,
                         sw_error *err)
{
    count(user, &((binding *)user)->writes);
    return sw_carrier_write(store, at, n, in, err);
}

static void test_role_bound_tiers_go_through_the_hooks(void)
{
    binding b;
    binding_init(&b);
    sw_error err;
    float vals[24];
    for (int i = 0; i < 24; i++)
        vals[i] = value_of(i);
    sw_carrier *p = NULL, *s = NULL;
    CHECK_EQ_I64(sw_generic_new(vals, 24, SW_DT_FLOAT32, 0, &p, &err), SW_OK);
    CHECK_EQ_I64(sw_cpu_new(0, SW_DT_FLOAT32, 0, &s, &err), SW_OK);
    sw_tiled_evictable *te = NULL;
    sw_te_tier_hooks h = {.store = g_store, .read = g_read, .write = g_write, .user = &b,
                          .dtype = SW_DT_FLOAT32};
    CHECK_EQ_I64(sw_tiled_evictable_new_bound(p, s, 2, GRID, TILE, &h, &te, &err), SW_OK);
    if (te) {
        b.te = te;
        CHECK(values_intact(te));
        CHECK(b.reads > 0); /* Generic memory read through the hook */
        int reads = b.reads;
        CHECK_EQ_I64(sw_tiled_evictable_evict(te, ALL, 4, &err), SW_OK); /* into CPU tiles */
        CHECK(b.reads > reads);
        CHECK(values_intact(te));
        CHECK_EQ_I64(sw_tiled_evictable_promote(te, ALL, 2, &err), SW_OK); /* fresh Generic */
        CHECK_EQ_I64(b.stores_made, 2);
        int writes = b.writes;
        float nine = 9;
        CHECK_EQ_I64(sw_tiled_evictable_write(te, 0, 1, &nine, &err), SW_OK);
        CHECK(b.writes > writes);
        float got = 0;
        CHECK_EQ_I64(sw_tiled_evictable_read(te, 0, 1, &got, &err), SW_OK);
        CHECK(got == 9.0f);
        /* The store hook handing back a Generic store: the request fails,
         * nothing changed. */
        snap before, after;
        take(te, &before);
        b.fail_store = 1;
        int64_t second[2] = {1, 0};
        CHECK_EQ_I64(sw_tiled_evictable_evict(te, second, 1, &err), SW_OK); /* CPU: core's */
        take(te, &before);
        CHECK_EQ_I64(sw_tiled_evictable_promote(te, second, 1, &err), SW_ENOTSUP);
        take(te, &after);
        CHECK(same(&before, &after));
        b.fail_store = 0;
        CHECK_EQ_I64(sw_tiled_evictable_release(te, &err), SW_OK);
        sw_tiled_evictable_unref(te);
    }
    sw_carrier_unref(p);
    sw_carrier_unref(s);

    /* A FileBacked primary, full: its slots through the hooks, eviction
     * into a CPU secondary, promotion back into fresh FileBacked storage
     * made by the core (hook hands it back). */
    sw_carrier *fp = NULL, *cs = NULL;
    CHECK_EQ_I64(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &fp, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_allocate(fp, 24, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_write(fp, 0, 24, vals, &err), SW_OK);
    CHECK_EQ_I64(sw_cpu_new(0, SW_DT_FLOAT32, 0, &cs, &err), SW_OK);
    te = NULL;
    b.reads = 0;
    CHECK_EQ_I64(sw_tiled_evictable_new_bound(fp, cs, 2, GRID, TILE, &h, &te, &err), SW_OK);
    if (te) {
        b.te = te;
        CHECK(values_intact(te));
        CHECK(b.reads > 0);
        CHECK_EQ_I64(sw_tiled_evictable_evict(te, ALL, 4, &err), SW_OK);
        CHECK(values_intact(te));
        int made = b.stores_made;
        CHECK_EQ_I64(sw_tiled_evictable_promote(te, ALL, 4, &err), SW_OK);
        CHECK_EQ_I64(b.stores_made - made, 4); /* FileBacked tiles, the binding's */
        CHECK(values_intact(te));
        float nine = 9, got = 0;
        CHECK_EQ_I64(sw_tiled_evictable_write(te, 5, 1, &nine, &err), SW_OK);
        CHECK_EQ_I64(sw_tiled_evictable_read(te, 5, 1, &got, &err), SW_OK);
        CHECK(got == 9.0f);
        CHECK_EQ_I64(sw_tiled_evictable_release(te, &err), SW_OK);
        sw_tiled_evictable_unref(te);
    }
    sw_carrier_unref(fp);
    sw_carrier_unref(cs);
    binding_free(&b);
}

/* With hooks, a projection into a destination of the binding's (a class
 * other than CPU) gathers into host memory and hands the values to the
 * write hook, holding the claimed destination's owner access; its size is
 * the binding's; the tensor is the binding's to make. Without hooks such a
 * destination is refused. */
static void test_projection_into_a_binding_destination(void)
{
    binding b;
    binding_init(&b);
    sw_tiled_evictable *te = make_bound(&b, 2, GRID, TILE, 1);
    sw_error err;
    int64_t ax0[2] = {1, 0}, ax1[1] = {1}, counts[2] = {2, 1};
    const int64_t *axes[2] = {ax0, ax1};
    sw_tile_selection sel = {2, counts, axes};
    sw_carrier *small = binding_new(&b, 11, 0), *dest = binding_new(&b, 12, 0);
    sw_tensor *out = (sw_tensor *)&b; /* must come back NULL */
    CHECK_EQ_I64(sw_tiled_evictable_project(te, NULL, 0, &sel, small, &out, &err), SW_EINVAL);
    CHECK(strstr(err.msg, "11 slots") != NULL);
    int writes = b.writes;
    CHECK_EQ_I64(sw_tiled_evictable_project(te, NULL, 0, &sel, dest, &out, &err), SW_OK);
    CHECK(out == NULL);
    CHECK_EQ_I64(b.writes - writes, 1);
    CHECK(!sw_carrier_is_owned(dest)); /* the claim ended */
    float *d = values_of(&b, dest, NULL);
    int bad = 0;
    for (int j = 0; j < 3; j++)
        for (int i = 0; i < 4; i++)
            bad += d[i + 4 * j] != value_of((ax0[i / 2] * 2 + i % 2) + 4 * (3 + j));
    CHECK_EQ_I64(bad, 0);
    /* Asynchronous: the same, the result NULL (the hooks run on a pool
     * thread: no lock probes there). */
    b.threaded = 1;
    memset(d, 0, 12 * sizeof *d);
    sw_te_work *w = NULL;
    CHECK_EQ_I64(sw_tiled_evictable_project_async(te, NULL, 0, &sel, dest, &w, &err), SW_OK);
    out = (sw_tensor *)&b;
    CHECK_EQ_I64(sw_te_work_wait(w, &out, &err), SW_OK);
    CHECK(out == NULL);
    sw_te_work_unref(w);
    bad = 0;
    for (int j = 0; j < 3; j++)
        for (int i = 0; i < 4; i++)
            bad += d[i + 4 * j] != value_of((ax0[i / 2] * 2 + i % 2) + 4 * (3 + j));
    CHECK_EQ_I64(bad, 0);
    /* A failing write hook fails the projection; residency unchanged. */
    snap before, after;
    take(te, &before);
    b.fail_write_at = b.writes + 1;
    CHECK_EQ_I64(sw_tiled_evictable_project(te, NULL, 0, &sel, dest, &out, &err), SW_EIO);
    b.fail_write_at = 0;
    take(te, &after);
    CHECK(same(&before, &after));
    CHECK(!sw_carrier_is_owned(dest));
    CHECK_EQ_I64(sw_tiled_evictable_release(te, &err), SW_OK);
    sw_tiled_evictable_unref(te);

    /* No hooks: a CPU destination only. */
    sw_carrier *p = NULL, *s = NULL;
    sw_cpu_new(24, SW_DT_FLOAT32, 0, &p, NULL);
    sw_cpu_new(0, SW_DT_FLOAT32, 0, &s, NULL);
    te = NULL;
    CHECK_EQ_I64(sw_tiled_evictable_new(p, s, 2, GRID, TILE, &te, &err), SW_OK);
    if (te) {
        CHECK_EQ_I64(sw_tiled_evictable_project(te, NULL, 0, &sel, dest, &out, &err), SW_ETYPE);
        CHECK_EQ_I64(sw_tiled_evictable_release(te, &err), SW_OK);
        sw_tiled_evictable_unref(te);
    }
    sw_carrier_unref(p);
    sw_carrier_unref(s);
    binding_free(&b);
}

/* A binding's write reaching a claimed tier: the token opens owner access
 * on it (and only for this thread); 0 after release. */
static void test_tier_token_opens_owner_access(void)
{
    binding b;
    binding_init(&b);
    sw_tiled_evictable *te = make_bound(&b, 2, GRID, TILE, 1);
    sw_carrier *p = sw_tiled_evictable_primary(te), *s = sw_tiled_evictable_secondary(te);
    sw_error err;
    uint64_t pt = 0, st = 0;
    CHECK_EQ_I64(sw_tiled_evictable_tier_token(te, 0, &pt, &err), SW_OK);
    CHECK_EQ_I64(sw_tiled_evictable_tier_token(te, 1, &st, &err), SW_OK);
    CHECK(pt != 0 && st != 0);
    CHECK_EQ_I64(sw_tiled_evictable_tier_token(NULL, 0, &pt, &err), SW_ETYPE);
    CHECK_EQ_I64(sw_carrier_begin_owner_access(p, st, &err), SW_ESTATE); /* not its token */
    CHECK_EQ_I64(sw_carrier_begin_owner_access(p, pt, &err), SW_OK);
    CHECK(sw_carrier_has_owner_access(p));
    CHECK_EQ_I64(sw_carrier_end_owner_access(p, pt, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_begin_owner_access(s, st, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_end_owner_access(s, st, &err), SW_OK);
    CHECK_EQ_I64(sw_tiled_evictable_release(te, &err), SW_OK);
    CHECK_EQ_I64(sw_tiled_evictable_tier_token(te, 0, &pt, &err), SW_OK);
    CHECK_EQ_I64((int64_t)pt, 0);
    sw_tiled_evictable_unref(te);
    binding_free(&b);
}

/* Fork with a _start request waiting for the binding's reports and a
 * callback registered: the child finds the handle done ("forked"), the
 * tiles no longer pending, and never runs the parent's callback; the
 * parent's request commits when the reports come, its callback once. */
static void test_callback_never_runs_in_a_forked_child(void)
{
    binding b;
    binding_init(&b);
    b.copy_mode = 2;
    sw_tiled_evictable *te = make_bound(&b, 2, GRID, TILE, 0);
    b.threaded = 1;
    sw_error err;
    notified n = {.mu = PTHREAD_MUTEX_INITIALIZER};
    sw_te_work *w = NULL;
    CHECK_EQ_I64(sw_tiled_evictable_evict_start(te, ALL, 2, &w, &err), SW_OK);
    CHECK_EQ_I64(b.nqueued, 2);
    CHECK_EQ_I64(sw_te_work_on_done(w, on_done, &n, &err), SW_OK);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        sw_error e;
        int bad = 0;
        bad += !sw_te_work_done(w);
        bad += sw_te_work_wait(w, NULL, &e) != SW_ESTATE;
        bad += strstr(e.msg, "forked") == NULL;
        bad += calls_of(&n) != 0;
        sw_te_tile_state ts;
        int64_t c0[2] = {0, 0};
        bad += sw_tiled_evictable_tile_state(te, c0, &ts, NULL) != SW_OK;
        bad += ts.pending || ts.location != SW_TE_PRIMARY;
        _exit(bad);
    }
    int status = -1;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    completer c = {&b, 2, 0};
    pthread_create(&c.th, NULL, complete_jobs, &c);
    CHECK_EQ_I64(sw_te_work_wait(w, NULL, &err), SW_OK);
    pthread_join(c.th, NULL);
    sw_tiled_evictable_drain();
    CHECK_EQ_I64(calls_of(&n), 1);
    sw_te_work_unref(w);
    CHECK(values_intact(te));
    CHECK_EQ_I64(sw_tiled_evictable_release(te, &err), SW_OK);
    sw_tiled_evictable_unref(te);
    binding_free(&b);
}

/* 1 when every slot of the projection `out` of `sel` (rank 1 or 2) is the
 * carrier's value at its logical place; drops `out`. */
static int tensor_right(sw_tiled_evictable *te, const sw_tile_selection *sel, sw_tensor *out)
{
    const sw_tile_geometry *g = sw_tiled_evictable_geometry(te);
    const float *d = sw_cpu_pointer(sw_tensor_carrier(out));
    int64_t rows = sel->counts[0] * g->tile[0];
    int64_t cols = sel->rank == 2 ? sel->counts[1] * g->tile[1] : 1;
    int bad = 0;
    for (int64_t j = 0; j < cols; j++)
        for (int64_t i = 0; i < rows; i++) {
            int64_t li = sel->coords[0][i / g->tile[0]] * g->tile[0] + i % g->tile[0];
            int64_t lj = sel->rank == 2 ? sel->coords[1][j / g->tile[1]] * g->tile[1] +
                                              j % g->tile[1]
                                        : 0;
            bad += d[i + rows * j] != value_of(li + g->logical[0] * lj);
        }
    sw_tensor_unref(out);
    return bad == 0;
}

/* Project `sel` (rank 1 or 2); 1 when every slot of the result is the
 * carrier's value at its logical place. */
static int projected_right(sw_tiled_evictable *te, const sw_tile_selection *sel, sw_status want,
                           sw_error *err)
{
    sw_tensor *out = NULL;
    sw_status st = sw_tiled_evictable_project(te, NULL, 0, sel, NULL, &out, err);
    if (st != want)
        return 0;
    if (st != SW_OK)
        return out == NULL;
    return tensor_right(te, sel, out);
}

/* With a read_many hook, a projection hands every selected tile kept in a
 * bound store whose values are one run there and land as one run in the
 * destination to that hook in one call (tile order, straight into place),
 * never to read; SW_ENOTSUP hands them back to read; a failure fails the
 * projection and changes nothing. */
static void test_projection_reads_bound_tiles_together(void)
{
    binding b;
    binding_init(&b);
    b.use_many = 1;
    const int64_t grid1[1] = {4}, tile1[1] = {4}; /* 16 slots, every tile one span */
    sw_tiled_evictable *te = make_bound(&b, 1, grid1, tile1, 0);
    sw_error err;
    sw_carrier *primary = b.stores[0].h; /* make_bound made it first */
    int64_t picks[2] = {3, 1}, counts1[1] = {2};
    const int64_t *axes1[1] = {picks};
    sw_tile_selection sel = {1, counts1, axes1};
    /* In place in the full binding primary: spans 12.. and 4.., in tile order. */
    int reads = b.reads;
    CHECK(projected_right(te, &sel, SW_OK, &err));
    CHECK_EQ_I64(b.many_calls, 1);
    CHECK_EQ_I64(b.many_n, 2);
    CHECK(b.many_store[0] == primary && b.many_store[1] == primary);
    CHECK(b.many_at[0] == 4 && b.many_dest_at[0] == 4 && b.many_count[0] == 4);
    CHECK(b.many_at[1] == 12 && b.many_dest_at[1] == 0 && b.many_count[1] == 4);
    CHECK_EQ_I64(b.reads - reads, 0);
    /* Private bound stores after an eviction: from their slot 0. */
    int64_t ev[2] = {1, 3};
    CHECK_EQ_I64(sw_tiled_evictable_evict(te, ev, 2, &err), SW_OK);
    reads = b.reads;
    CHECK(projected_right(te, &sel, SW_OK, &err));
    CHECK_EQ_I64(b.many_calls, 2);
    CHECK_EQ_I64(b.many_n, 2);
    CHECK(b.many_store[0] != primary && b.many_store[1] != primary);
    CHECK(b.many_at[0] == 0 && b.many_at[1] == 0);
    CHECK(b.many_dest_at[0] == 4 && b.many_dest_at[1] == 0);
    CHECK_EQ_I64(b.reads - reads, 0);
    CHECK_EQ_I64(b.saw_unpending, 0);
    CHECK(b.checks > 0);
    /* SW_ENOTSUP: the core reads them through read, one per tile. */
    b.many_mode = 1;
    reads = b.reads;
    CHECK(projected_right(te, &sel, SW_OK, &err));
    CHECK_EQ_I64(b.many_calls, 3);
    CHECK_EQ_I64(b.reads - reads, 2);
    /* A failing batch fails the projection; residency and values stay. */
    b.many_mode = 2;
    snap before, after;
    take(te, &before);
    CHECK(projected_right(te, &sel, SW_EIO, &err));
    CHECK(strstr(err.msg, "batch read failed") != NULL);
    take(te, &after);
    CHECK(same(&before, &after));
    CHECK(values_intact(te));
    b.many_mode = 0;
    CHECK_EQ_I64(sw_tiled_evictable_release(te, &err), SW_OK);
    sw_tiled_evictable_unref(te);
    binding_free(&b);

    /* Rank 2 (4 x 6, tiles 2 x 3): a tile lands as one run only when axis 0
     * is taken whole; in the full primary its runs are not one span. */
    binding_init(&b);
    b.use_many = 1;
    te = make_bound(&b, 2, GRID, TILE, 0);
    int64_t one[1] = {1}, two[2] = {1, 0}, c12[2] = {1, 2}, c21[2] = {2, 1};
    const int64_t *a12[2] = {one, two}, *a21[2] = {two, one};
    sw_tile_selection across = {2, c12, a12}, down = {2, c21, a21};
    CHECK(projected_right(te, &across, SW_OK, &err)); /* strided in the primary */
    CHECK_EQ_I64(b.many_calls, 0);
    CHECK_EQ_I64(sw_tiled_evictable_evict(te, ALL, 4, &err), SW_OK);
    CHECK(projected_right(te, &down, SW_OK, &err)); /* interleaved in the destination */
    CHECK_EQ_I64(b.many_calls, 0);
    CHECK(projected_right(te, &across, SW_OK, &err));
    CHECK_EQ_I64(b.many_calls, 1);
    CHECK_EQ_I64(b.many_n, 2); /* tiles (1,0) then (1,1): places 6 and 0 */
    CHECK(b.many_dest_at[0] == 6 && b.many_dest_at[1] == 0);
    CHECK(b.many_count[0] == 6 && b.many_count[1] == 6);
    CHECK(values_intact(te));
    CHECK_EQ_I64(sw_tiled_evictable_release(te, &err), SW_OK);
    sw_tiled_evictable_unref(te);
    binding_free(&b);
}

/* A policy promoting every tile a projection requires; `user` (an int)
 * nonzero makes it fail. */
static sw_status promote_required(const int64_t *required, int64_t n, int32_t rank,
                                  const char *purpose, sw_te_plan *plan, void *user,
                                  sw_error *err)
{
    (void)purpose;
    if (*(int *)user)
        return sw_error_set(err, SW_EINVAL, "policy: no plan today");
    for (int64_t i = 0; i < n; i++) {
        sw_status st = sw_te_plan_add(plan, SW_TE_PLAN_PROMOTE, required + i * rank, err);
        if (st != SW_OK)
            return st;
    }
    return SW_OK;
}

static sw_te_tile_state state_at(sw_tiled_evictable *te, int64_t i, int64_t j)
{
    int64_t c[2] = {i, j};
    sw_te_tile_state ts;
    memset(&ts, 0, sizeof ts);
    sw_tiled_evictable_tile_state(te, c, &ts, NULL);
    return ts;
}

/* project_start (TE-8, TE-10): the gather and the policy's promotion are
 * issued on the caller; with every copy reported there the projection is
 * done on return; a copy reported later keeps the handle open (tiles pinned
 * and pending, the destination claimed) and the completion thread commits
 * it; a failed report is the handle's with nothing changed; a refusal (the
 * policy) and a refused submission are the call's. */
static void test_project_start_returns_before_the_promotion_reports(void)
{
    binding b;
    binding_init(&b);
    b.copy_mode = 1; /* reports inside the hook */
    sw_tiled_evictable *te = make_bound(&b, 2, GRID, TILE, 0);
    sw_error err;
    int fail = 0;
    sw_te_policy pol = {promote_required, &fail};
    CHECK_EQ_I64(sw_tiled_evictable_set_policy(te, &pol, &err), SW_OK);
    CHECK_EQ_I64(sw_tiled_evictable_evict(te, ALL, 4, &err), SW_OK);
    int64_t row0[1] = {0}, cols[2] = {0, 1}, counts[2] = {1, 2};
    const int64_t *axes[2] = {row0, cols};
    sw_tile_selection sel = {2, counts, axes}; /* tiles (0,0), (0,1): 2 x 6 values */

    /* Copies reported inside the hooks: done on return, on this thread. */
    sw_te_work *w = NULL;
    int copies = b.copies;
    CHECK_EQ_I64(sw_tiled_evictable_project_start(te, NULL, 0, &sel, NULL, &w, &err), SW_OK);
    CHECK(w != NULL && sw_te_work_done(w));
    CHECK_EQ_I64(b.copies - copies, 2);
    CHECK(b.seen_work == w);
    CHECK(sw_te_work_current() == NULL);
    sw_tensor *out = NULL;
    CHECK_EQ_I64(sw_te_work_wait(w, &out, &err), SW_OK);
    CHECK(out && tensor_right(te, &sel, out));
    sw_te_work_unref(w);
    CHECK(state_at(te, 0, 1).location == SW_TE_PRIMARY);
    CHECK(!state_at(te, 0, 1).pinned && !state_at(te, 0, 1).pending);
    CHECK_EQ_I64(sw_tiled_evictable_evict(te, ALL, 4, &err), SW_OK);

    /* Reported later: the call returns at once, the work stays open. */
    sw_carrier *d = NULL;
    CHECK_EQ_I64(sw_cpu_new(12, SW_DT_FLOAT32, 0, &d, &err), SW_OK);
    b.copy_mode = 2;
    b.threaded = 1;
    w = NULL;
    CHECK_EQ_I64(sw_tiled_evictable_project_start(te, NULL, 0, &sel, d, &w, &err), SW_OK);
    CHECK(w != NULL && !sw_te_work_done(w));
    CHECK_EQ_I64(b.nqueued, 2); /* issued before the call returned */
    sw_te_tile_state ts = state_at(te, 0, 0);
    CHECK(ts.pinned && ts.pending && ts.location == SW_TE_SECONDARY);
    CHECK(sw_carrier_is_owned(d));
    float one = 5;
    CHECK_EQ_I64(sw_tiled_evictable_write(te, 0, 1, &one, &err), SW_ESTATE);
    CHECK_EQ_I64(sw_tiled_evictable_release(te, &err), SW_ESTATE);
    notified later = {.mu = PTHREAD_MUTEX_INITIALIZER};
    CHECK_EQ_I64(sw_te_work_on_done(w, on_done, &later, &err), SW_OK);
    CHECK_EQ_I64(calls_of(&later), 0);
    completer c = {&b, 2, 0};
    pthread_create(&c.th, NULL, complete_jobs, &c);
    out = NULL;
    CHECK_EQ_I64(sw_te_work_wait(w, &out, &err), SW_OK);
    pthread_join(c.th, NULL);
    sw_tiled_evictable_drain();
    CHECK_EQ_I64(calls_of(&later), 1);
    CHECK(!pthread_equal(later.thread, pthread_self()));
    CHECK(out && sw_tensor_carrier(out) == d);
    CHECK(out && tensor_right(te, &sel, out));
    sw_te_work_unref(w);
    ts = state_at(te, 0, 0);
    CHECK(ts.location == SW_TE_PRIMARY && !ts.pinned && !ts.pending);
    CHECK(!sw_carrier_is_owned(d));
    CHECK(values_intact(te));

    /* A copy that reports failure: the handle's error, residency as it was,
     * the destination free again. */
    b.copy_mode = 1;
    CHECK_EQ_I64(sw_tiled_evictable_evict(te, ALL, 4, &err), SW_OK);
    snap before, after;
    take(te, &before);
    b.copy_mode = 2;
    b.fail_copy_report = 1;
    int discards = b.discards;
    w = NULL;
    CHECK_EQ_I64(sw_tiled_evictable_project_start(te, NULL, 0, &sel, d, &w, &err), SW_OK);
    CHECK(w != NULL && !sw_te_work_done(w));
    c = (completer){&b, 2, 0};
    pthread_create(&c.th, NULL, complete_jobs, &c);
    out = NULL;
    CHECK_EQ_I64(sw_te_work_wait(w, &out, &err), SW_EIO);
    CHECK(out == NULL && strstr(err.msg, "copy failed") != NULL);
    pthread_join(c.th, NULL);
    sw_te_work_unref(w);
    sw_tiled_evictable_drain();
    take(te, &after);
    CHECK(same(&before, &after));
    CHECK_EQ_I64(b.discards - discards, 2);
    CHECK(!sw_carrier_is_owned(d));
    b.fail_copy_report = 0;

    /* The policy refuses: the call's error, no handle, nothing changed. */
    fail = 1;
    w = NULL;
    CHECK_EQ_I64(sw_tiled_evictable_project_start(te, NULL, 0, &sel, d, &w, &err), SW_EINVAL);
    CHECK(w == NULL && strstr(err.msg, "no plan today") != NULL);
    fail = 0;
    take(te, &after);
    CHECK(same(&before, &after));
    CHECK(!sw_carrier_is_owned(d));

    /* The pool refuses the wait: the call fails after the reports, nothing
     * changed, no handle. */
    if (sw_fault_enabled()) {
        CHECK_EQ_I64(sw_fault_arm("tile_submit", 0, 1), SW_OK);
        c = (completer){&b, 2, 0};
        pthread_create(&c.th, NULL, complete_jobs, &c);
        w = NULL;
        CHECK_EQ_I64(sw_tiled_evictable_project_start(te, NULL, 0, &sel, d, &w, &err), SW_EIO);
        pthread_join(c.th, NULL);
        sw_fault_clear();
        CHECK(w == NULL);
        take(te, &after);
        CHECK(same(&before, &after));
        CHECK(!sw_carrier_is_owned(d));
    }
    /* NULL arguments. */
    CHECK_EQ_I64(sw_tiled_evictable_project_start(NULL, NULL, 0, &sel, NULL, &w, &err),
                 SW_ETYPE);
    CHECK_EQ_I64(sw_tiled_evictable_project_start(te, NULL, 0, &sel, NULL, NULL, &err),
                 SW_ETYPE);
    CHECK_EQ_I64(sw_tiled_evictable_release(te, &err), SW_OK);
    sw_tiled_evictable_unref(te);
    sw_carrier_unref(d);
    binding_free(&b);
}

/* A policy evicting tile (1, 0) after every projection. */
static sw_status evict_tile_10(const int64_t *required, int64_t n, int32_t rank,
                               const char *purpose, sw_te_plan *plan, void *user, sw_error *err)
{
    (void)required, (void)n, (void)rank, (void)purpose, (void)user;
    int64_t c[2] = {1, 0};
    return sw_te_plan_add(plan, SW_TE_PLAN_EVICT, c, err);
}

/* TE-10: the policy's evictions after a projection are work of their own:
 * a copy the binding reports later holds up neither project_start nor the
 * handle (nor the completion thread); drains wait for it; once reported
 * the tile is evicted, all or nothing, values intact. */
static void test_plan_eviction_does_not_wait_for_its_copies(void)
{
    binding b;
    binding_init(&b);
    b.copy_mode = 2; /* queued: reported by a completer thread */
    b.threaded = 1;
    sw_tiled_evictable *te = make_bound(&b, 2, GRID, TILE, 0);
    sw_error err;
    sw_te_policy pol = {evict_tile_10, NULL};
    CHECK_EQ_I64(sw_tiled_evictable_set_policy(te, &pol, &err), SW_OK);
    int64_t row0[1] = {0}, col0[1] = {0}, counts[2] = {1, 1};
    const int64_t *axes[2] = {row0, col0};
    sw_tile_selection sel = {2, counts, axes}; /* tile (0, 0), primary: no copy */
    sw_te_work *w = NULL;
    CHECK_EQ_I64(sw_tiled_evictable_project_start(te, NULL, 0, &sel, NULL, &w, &err), SW_OK);
    CHECK(w != NULL && sw_te_work_done(w));
    sw_tensor *out = NULL;
    CHECK_EQ_I64(sw_te_work_wait(w, &out, &err), SW_OK);
    CHECK(out && tensor_right(te, &sel, out));
    sw_te_work_unref(w);
    wait_queued(&b, 1); /* the eviction's copy, issued, not reported */
    sw_te_tile_state ts = state_at(te, 1, 0);
    CHECK(ts.pending && ts.location == SW_TE_PRIMARY);
    CHECK(!state_at(te, 0, 0).pinned); /* the projection is over */
    completer c = {&b, 1, 0};
    pthread_create(&c.th, NULL, complete_jobs, &c);
    sw_tiled_evictable_drain(); /* covers the eviction */
    pthread_join(c.th, NULL);
    ts = state_at(te, 1, 0);
    CHECK(ts.location == SW_TE_SECONDARY && !ts.pending && !ts.pinned);
    CHECK(state_at(te, 0, 0).location == SW_TE_PRIMARY);
    CHECK(values_intact(te));
    CHECK_EQ_I64(sw_tiled_evictable_release(te, &err), SW_OK);
    sw_tiled_evictable_unref(te);
    binding_free(&b);
}

int main(void)
{
    test_construction_needs_the_hooks();
    test_hooks_run_without_core_lock();
    test_copy_finishes_later_from_another_thread();
    test_failures_change_nothing();
    test_read_keeps_a_replaced_store_until_it_is_over();
    test_many_threads();
    test_block_device_tier_is_the_bindings();
    test_placed_construction();
    test_work_notifies_and_names_itself();
    test_start_issues_on_the_caller();
    test_role_bound_tiers_go_through_the_hooks();
    test_projection_into_a_binding_destination();
    test_projection_reads_bound_tiles_together();
    test_tier_token_opens_owner_access();
    test_callback_never_runs_in_a_forked_child();
    test_project_start_returns_before_the_promotion_reports();
    test_plan_eviction_does_not_wait_for_its_copies();
    return check_report("tiled_evictable_binding");
}
