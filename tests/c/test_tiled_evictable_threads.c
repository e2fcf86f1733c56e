/* TiledEvictable from many threads at once (run under TSan in .ci/run):
 * owner threads write, evict, project and promote their own tiles (every
 * call must succeed: nobody else touches them), while every thread also
 * promotes, evicts and projects the same shared tiles (a call may find a
 * tile busy: SW_ESTATE naming "pending" or "pinned", with nothing changed).
 * Every projection and the final contents are exact. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "strideweave/alloc.h"
#include "strideweave/strideweave.h"

#define OWNERS 4   /* grid rows; owner k has tiles (k, 1..3) */
#define STORMERS 2 /* threads touching only the shared column (x, 0) */
#define ITERS 60

static const int64_t grid[] = {OWNERS, 4}, tile[] = {2, 3};
static sw_tile_geometry geo;
static float expected[8 * 12]; /* by slot; entry i written only by its tile's owner */
static _Atomic long writes, refusals, failures;

static float shared_value(int64_t slot) { return (float)slot + 0.5f; }

static void note_failure(const char *what, const sw_error *err)
{
    fprintf(stderr, "  %s: %s\n", what, err->msg);
    atomic_fetch_add(&failures, 1);
}

/* A projection of `sel` must equal the expected slots it maps to. */
static int project_exact(sw_tiled_evictable *te, const sw_tile_selection *sel, sw_error *err)
{
    sw_tensor *out = NULL;
    sw_status st = sw_tiled_evictable_project(te, NULL, 0, sel, NULL, &out, err);
    if (st != SW_OK)
        return st;
    int64_t shape[SW_TILES_MAX_RANK];
    int64_t n = sw_tiles_compact_shape(&geo, sel, shape);
    const float *d = sw_cpu_pointer(sw_tensor_carrier(out));
    int bad = 0;
    for (int64_t c = 0; c < n; c++)
        bad += d[c] != expected[sw_tiles_source_index(&geo, sel, shape, c)];
    sw_tensor_unref(out);
    if (bad)
        atomic_fetch_add(&failures, 1);
    return SW_OK;
}

/* One op on the shared column; busy refusals are fine. */
static void shared_op(sw_tiled_evictable *te, unsigned *rng)
{
    *rng = *rng * 1103515245u + 12345u;
    unsigned r = *rng >> 8;
    int64_t rows[OWNERS], n = 0;
    for (int64_t k = 0; k < OWNERS; k++)
        if ((r >> k) & 1)
            rows[n++] = k;
    if (n == 0)
        rows[n++] = (int64_t)(r % OWNERS);
    int64_t coords[2 * OWNERS], col0[] = {0};
    for (int64_t i = 0; i < n; i++) {
        coords[2 * i] = rows[i];
        coords[2 * i + 1] = 0;
    }
    int64_t counts[] = {n, 1};
    const int64_t *axes[] = {rows, col0};
    sw_tile_selection sel = {2, counts, axes};
    sw_error err;
    sw_status st;
    switch ((r >> 4) % 4) {
    case 0: st = sw_tiled_evictable_promote(te, coords, n, &err); break;
    case 1: st = sw_tiled_evictable_evict(te, coords, n, &err); break;
    case 2: st = project_exact(te, &sel, &err); break;
    default: {
        float v[3];
        int64_t slot = sw_tiles_slot(&geo, rows[0], 0);
        st = sw_tiled_evictable_read(te, slot, 2, v, &err);
        if (st == SW_OK && (v[0] != shared_value(slot) || v[1] != shared_value(slot + 1)))
            atomic_fetch_add(&failures, 1);
    }
    }
    if (st == SW_ESTATE && (strstr(err.msg, "pending") || strstr(err.msg, "pinned")))
        atomic_fetch_add(&refusals, 1);
    else if (st != SW_OK)
        note_failure("shared op", &err);
}

typedef struct worker {
    sw_tiled_evictable *te;
    int owner; /* -1: stormer */
    unsigned rng;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    sw_tiled_evictable *te = w->te;
    int64_t k = w->owner;
    int64_t own[6] = {k, 1, k, 2, k, 3}, row[] = {k}, cols[] = {1, 2, 3}, counts[] = {1, 3};
    const int64_t *axes[] = {row, cols};
    sw_tile_selection sel = {2, counts, axes};
    sw_error err;
    for (int it = 0; it < ITERS; it++) {
        shared_op(te, &w->rng);
        if (k < 0) {
            shared_op(te, &w->rng);
            continue;
        }
        /* write every own slot, one axis-0 run at a time; on odd rounds
         * the tiles are in the secondary tier, so each write promotes */
        for (int64_t j = 0; j < 3; j++) {
            int64_t t = sw_tiles_tile_index(&geo, own + 2 * j);
            for (int64_t wi = 0; wi < geo.tile_size; wi += tile[0]) {
                int64_t slot = sw_tiles_slot(&geo, t, wi);
                float v[2] = {(float)(k * 1000 + it * 10 + wi), (float)(k * 1000 + it * 10 + wi + 1)};
                if (sw_tiled_evictable_write(te, slot, 2, v, &err) != SW_OK) {
                    note_failure("own write", &err);
                    continue;
                }
                atomic_fetch_add(&writes, 1);
                expected[slot] = v[0];
                expected[slot + 1] = v[1];
            }
        }
        if (sw_tiled_evictable_evict(te, own, 3, &err) != SW_OK)
            note_failure("own evict", &err);
        if (project_exact(te, &sel, &err) != SW_OK)
            note_failure("own project", &err);
        if (it % 2 == 0 && sw_tiled_evictable_promote(te, own, 3, &err) != SW_OK)
            note_failure("own promote", &err);
    }
    return NULL;
}

static void run(int file_secondary)
{
    sw_tiles_geometry_init(&geo, 2, grid, tile, NULL);
    sw_carrier *p, *s;
    sw_cpu_new(geo.size, SW_DT_FLOAT32, 0, &p, NULL);
    float *pv = sw_cpu_pointer(p);
    for (int64_t i = 0; i < geo.size; i++)
        pv[i] = expected[i] = shared_value(i);
    if (file_secondary)
        sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &s, NULL);
    else
        sw_cpu_new(0, SW_DT_FLOAT32, 0, &s, NULL);
    sw_tiled_evictable *te = NULL;
    CHECK(sw_tiled_evictable_new(p, s, 2, grid, tile, &te, NULL) == SW_OK);
    atomic_store(&writes, 0);
    atomic_store(&refusals, 0);
    atomic_store(&failures, 0);
    pthread_t th[OWNERS + STORMERS];
    worker w[OWNERS + STORMERS];
    for (int i = 0; i < OWNERS + STORMERS; i++) {
        w[i] = (worker){te, i < OWNERS ? i : -1, 17u * (unsigned)i + 3u};
        pthread_create(&th[i], NULL, work, &w[i]);
    }
    for (int i = 0; i < OWNERS + STORMERS; i++)
        pthread_join(th[i], NULL);
    CHECK_EQ_I64(atomic_load(&failures), 0);
    CHECK_EQ_I64(sw_tiled_evictable_version(te), atomic_load(&writes));
    printf("  %s secondary: %ld writes, %ld busy refusals\n", file_secondary ? "FileBacked" : "CPU",
           atomic_load(&writes), atomic_load(&refusals));
    float got[8 * 12];
    CHECK(sw_tiled_evictable_read(te, 0, geo.size, got, NULL) == SW_OK);
    int bad = 0;
    for (int64_t i = 0; i < geo.size; i++)
        bad += got[i] != expected[i];
    CHECK_EQ_I64(bad, 0);
    for (int64_t t = 0; t < geo.ntiles; t++) {
        int64_t c[2];
        sw_te_tile_state st;
        sw_tiles_tile_coord(&geo, t, c);
        sw_tiled_evictable_tile_state(te, c, &st, NULL);
        CHECK(!st.pending && !st.pinned && st.valid);
    }
    CHECK(sw_tiled_evictable_release(te, NULL) == SW_OK);
    sw_tiled_evictable_unref(te);
    sw_carrier_unref(p);
    sw_carrier_unref(s);
}

int main(void)
{
    run(0);
    run(1);
    return check_report("tiled_evictable_threads");
}
