/* TiledEvictable asynchronous residency and projection, on the public
 * headers (contract-carriers TE-7, TE-8, TE-10, TE-14): the async forms
 * refuse exactly what the blocking forms refuse, directly and with nothing
 * changed; the tiles are marked when the call returns; the work commits
 * all or nothing on the pool; dropped handles still commit; faults in the
 * middle leave everything as it was; many threads submit, wait and drop
 * at once; a process may exit with work in flight; a forked child ends
 * the work it inherited (the marks clear, its handles fail "forked"). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "helpers.h"
#include "strideweave/alloc.h"
#include "strideweave/filestore.h"
#include "strideweave/strideweave.h"

#define MAXS (128 * 128)
#define MAXT 64

static float value_of(int64_t slot) { return (float)slot * 0.5f + 1.25f; }

#include "te_fixture.h"
#include "strideweave/testing.h"

static int same(const snap *a, const snap *b) { return memcmp(a, b, sizeof *a) == 0; }

static int64_t count_of(sw_tiled_evictable *te, sw_te_filter f)
{
    int64_t n = -1;
    sw_tiled_evictable_tiles(te, f, NULL, 0, &n, NULL);
    return n;
}

/* A projection's values against value_of through the identity layout. */
static int projection_exact(sw_tiled_evictable *te, const sw_tile_selection *sel, sw_tensor *t)
{
    const sw_tile_geometry *g = sw_tiled_evictable_geometry(te);
    int64_t shape[SW_TILES_MAX_RANK];
    int64_t n = sw_tiles_compact_shape(g, sel, shape);
    const float *d = sw_cpu_pointer(sw_tensor_carrier(t));
    for (int64_t c = 0; c < n; c++)
        if (d[c] != value_of(sw_tiles_source_index(g, sel, shape, c)))
            return 0;
    return 1;
}

/* ---- TE-7 / TE-8: async residency ------------------------------------------------ */

static void test_te7_async_residency_commits_all(void)
{
    int64_t grid[] = {3, 2}, tile[] = {2, 3};
    int64_t three[] = {0, 0, 2, 0, 1, 1};
    for (int file = 0; file < 2; file++) {
        sw_tiled_evictable *te = make_grid(2, grid, tile, file);
        sw_te_work *w = NULL;
        sw_error err;
        CHECK(sw_tiled_evictable_evict_async(te, three, 3, &w, &err) == SW_OK && w);
        CHECK(sw_te_work_wait(w, NULL, &err) == SW_OK);
        CHECK(sw_te_work_done(w));
        CHECK(sw_te_work_wait(w, NULL, &err) == SW_OK); /* again: the same outcome */
        sw_tensor *none = (sw_tensor *)1;
        CHECK(sw_te_work_wait(w, &none, &err) == SW_OK && none == NULL);
        sw_te_work_unref(w);
        CHECK(loc_of(te, (int64_t[]){0, 0}) == SW_TE_SECONDARY);
        CHECK(loc_of(te, (int64_t[]){2, 0}) == SW_TE_SECONDARY);
        CHECK(loc_of(te, (int64_t[]){1, 1}) == SW_TE_SECONDARY);
        CHECK_EQ_I64(count_of(te, SW_TE_TILES_PRIMARY), 3);
        CHECK(all_values_exact(te));
        CHECK_EQ_I64(sw_tiled_evictable_version(te), 0);
        CHECK(sw_tiled_evictable_promote_async(te, three, 3, &w, &err) == SW_OK);
        CHECK(sw_te_work_wait(w, NULL, &err) == SW_OK);
        sw_te_work_unref(w);
        CHECK_EQ_I64(count_of(te, SW_TE_TILES_PRIMARY), 6);
        CHECK_EQ_I64(count_of(te, SW_TE_TILES_DIRTY), 0);
        CHECK(all_values_exact(te));
        /* an empty request is a request too */
        CHECK(sw_tiled_evictable_evict_async(te, NULL, 0, &w, &err) == SW_OK);
        CHECK(sw_te_work_wait(w, NULL, &err) == SW_OK);
        sw_te_work_unref(w);
        CHECK(sw_tiled_evictable_release(te, NULL) == SW_OK);
        sw_tiled_evictable_unref(te);
    }
}

/* Every refusal of the blocking form, returned directly, no handle,
 * nothing changed. */
static void test_te7_async_refusals_change_nothing(void)
{
    int64_t grid[] = {2, 2}, tile[] = {2, 2};
    sw_tiled_evictable *te = make_grid(2, grid, tile, 1);
    CHECK(sw_tiled_evictable_evict(te, (int64_t[]){1, 1}, 1, NULL) == SW_OK);
    snap before, after;
    take_tiles(te, &before);
    sw_error err;
    sw_te_work *w = NULL;
    CHECK(sw_tiled_evictable_promote_async(NULL, (int64_t[]){0, 0}, 1, &w, &err) == SW_ETYPE);
    CHECK(sw_tiled_evictable_evict_async(te, NULL, 1, &w, &err) == SW_EINVAL);
    CHECK(sw_tiled_evictable_evict_async(te, (int64_t[]){0, 0}, -1, &w, &err) == SW_EINVAL);
    CHECK(sw_tiled_evictable_evict_async(te, (int64_t[]){0, 2}, 1, &w, &err) == SW_EINVAL);
    CHECK(strstr(err.msg, "outside") != NULL);
    CHECK(sw_tiled_evictable_promote_async(te, (int64_t[]){1, 1, 1, 1}, 2, &w, &err) ==
          SW_EINVAL);
    CHECK(strstr(err.msg, "twice") != NULL);
    CHECK(sw_tiled_evictable_evict_async(te, (int64_t[]){0, 0}, 1, NULL, &err) == SW_EINVAL);
    int64_t a0[] = {0}, a1[] = {3}, counts[] = {1, 1};
    const int64_t *axes[] = {a0, a1};
    sw_tile_selection bad = {2, counts, axes};
    CHECK(sw_tiled_evictable_project_async(te, NULL, 0, &bad, NULL, &w, &err) == SW_EINVAL);
    CHECK(sw_tiled_evictable_project_async(te, NULL, 0, NULL, NULL, &w, &err) == SW_ETYPE);
    sw_carrier *small;
    sw_cpu_new(3, SW_DT_FLOAT32, 0, &small, NULL);
    a1[0] = 0;
    CHECK(sw_tiled_evictable_project_async(te, NULL, 0, &bad, small, &w, &err) == SW_EINVAL);
    CHECK(!sw_carrier_is_owned(small));
    CHECK(w == NULL);
    take_tiles(te, &after);
    CHECK(same(&before, &after));
    /* an invalid tile cannot be promoted; a released carrier refuses all */
    sw_tiled_evictable *like;
    CHECK(sw_tiled_evictable_allocate_like(te, 1, &like, NULL) == SW_OK);
    CHECK(sw_tiled_evictable_promote_async(like, (int64_t[]){0, 0}, 1, &w, &err) == SW_ESTATE);
    CHECK(strstr(err.msg, "invalid") != NULL && w == NULL);
    sw_tiled_evictable_release(like, NULL);
    sw_tiled_evictable_unref(like);
    CHECK(sw_tiled_evictable_release(te, NULL) == SW_OK);
    CHECK(sw_tiled_evictable_evict_async(te, (int64_t[]){0, 0}, 1, &w, &err) == SW_ESTATE);
    CHECK(sw_tiled_evictable_project_async(te, NULL, 0, &bad, NULL, &w, &err) == SW_ESTATE);
    CHECK(w == NULL);
    sw_carrier_release(small, NULL);
    sw_carrier_unref(small);
    sw_tiled_evictable_unref(te);
}

/* The tiles are pending from the moment the call returns until commit:
 * the pool is stopped mid-copy while the caller observes. */
static void test_te7_async_pending_until_commit(void)
{
    if (!sw_fault_enabled())
        return;
    int64_t grid[] = {2, 2}, tile[] = {2, 2};
    sw_tiled_evictable *te = make_grid(2, grid, tile, 1);
    sw_fault_arm("tile_copy_pause", 0, 1);
    sw_te_work *w = NULL;
    sw_error err;
    CHECK(sw_tiled_evictable_evict_async(te, (int64_t[]){0, 1, 1, 1}, 2, &w, &err) == SW_OK);
    sw_te_tile_state s;
    sw_tiled_evictable_tile_state(te, (int64_t[]){1, 1}, &s, NULL);
    CHECK(s.pending && s.location == SW_TE_PRIMARY); /* marked before return */
    sw_fault_wait_paused();
    CHECK(!sw_te_work_done(w));
    float x = 7;
    int64_t slot = sw_tiles_slot(sw_tiled_evictable_geometry(te), 3, 0);
    CHECK(sw_tiled_evictable_write(te, slot, 1, &x, &err) == SW_ESTATE);
    CHECK(strstr(err.msg, "pending") != NULL);
    sw_te_work *w2 = NULL;
    CHECK(sw_tiled_evictable_promote_async(te, (int64_t[]){0, 1}, 1, &w2, &err) == SW_ESTATE);
    CHECK(w2 == NULL);
    int64_t a0[] = {0}, a1[] = {1}, counts[] = {1, 1};
    const int64_t *axes[] = {a0, a1};
    CHECK(sw_tiled_evictable_project_async(te, NULL, 0, &(sw_tile_selection){2, counts, axes},
                                           NULL, &w2, &err) == SW_ESTATE);
    CHECK(sw_tiled_evictable_release(te, &err) == SW_ESTATE);
    CHECK(strstr(err.msg, "wait") != NULL);
    /* other tiles are free, reads are allowed */
    CHECK(sw_tiled_evictable_evict(te, (int64_t[]){0, 0}, 1, NULL) == SW_OK);
    float got;
    CHECK(sw_tiled_evictable_read(te, slot, 1, &got, NULL) == SW_OK && got == value_of(slot));
    sw_fault_resume();
    CHECK(sw_te_work_wait(w, NULL, &err) == SW_OK);
    sw_te_work_unref(w);
    sw_tiled_evictable_tile_state(te, (int64_t[]){1, 1}, &s, NULL);
    CHECK(!s.pending && s.location == SW_TE_SECONDARY);
    CHECK(all_values_exact(te));
    CHECK(sw_tiled_evictable_release(te, NULL) == SW_OK);
    sw_tiled_evictable_unref(te);
    sw_fault_clear();
}

/* A dropped handle neither cancels nor blocks: the work commits, and the
 * carrier stays alive until it has (the caller dropped its reference
 * too). */
static void test_te8_dropped_handles_commit(void)
{
    int64_t grid[] = {4, 2}, tile[] = {2, 2};
    int64_t all[] = {0, 0, 1, 0, 2, 0, 3, 0, 0, 1, 1, 1, 2, 1, 3, 1};
    for (int file = 0; file < 2; file++) {
        sw_tiled_evictable *te = make_grid(2, grid, tile, file);
        sw_tiled_evictable *keep = sw_tiled_evictable_ref(te);
        sw_te_work *w;
        CHECK(sw_tiled_evictable_evict_async(te, all, 4, &w, NULL) == SW_OK);
        sw_te_work_unref(w);
        CHECK(sw_tiled_evictable_evict_async(te, all + 8, 4, &w, NULL) == SW_OK);
        sw_te_work_unref(w);
        int64_t a0[] = {0, 3}, a1[] = {1}, counts[] = {2, 1};
        const int64_t *axes[] = {a0, a1};
        sw_carrier *d;
        sw_cpu_new(8, SW_DT_FLOAT32, 0, &d, NULL);
        sw_tiled_evictable_drain();
        CHECK_EQ_I64(count_of(te, SW_TE_TILES_SECONDARY), 8);
        if (sw_fault_enabled())
            sw_fault_arm("tile_gather_pause", 0, 1);
        CHECK(sw_tiled_evictable_project_async(te, NULL, 0,
                                               &(sw_tile_selection){2, counts, axes}, d, &w,
                                               NULL) == SW_OK);
        sw_te_work_unref(w);
        sw_tiled_evictable_unref(te); /* the work keeps it alive */
        if (sw_fault_enabled()) {
            sw_fault_wait_paused();
            CHECK(sw_carrier_is_owned(d)); /* claimed until the projection committed */
            sw_fault_resume();
            sw_fault_clear();
        }
        sw_tiled_evictable_drain();
        CHECK(!sw_carrier_is_owned(d) && !sw_carrier_is_released(d));
        sw_tensor *view;
        sw_tensor_new_strided(d, 0, 2, (int64_t[]){4, 2}, NULL, &view, NULL);
        CHECK(projection_exact(keep, &(sw_tile_selection){2, counts, axes}, view));
        sw_tensor_unref(view);
        CHECK(all_values_exact(keep));
        CHECK(sw_tiled_evictable_release(keep, NULL) == SW_OK);
        sw_tiled_evictable_unref(keep);
        sw_carrier_release(d, NULL);
        sw_carrier_unref(d);
    }
}

/* ---- TE-10: async projection ------------------------------------------------------- */

static void test_te10_async_projection(void)
{
    int64_t grid[] = {3, 3}, tile[] = {2, 2};
    sw_tiled_evictable *te = make_grid(2, grid, tile, 1);
    CHECK(sw_tiled_evictable_evict(te, (int64_t[]){2, 0, 0, 2, 1, 1}, 3, NULL) == SW_OK);
    int64_t a0[] = {2, 0}, a1[] = {1, 0, 2}, counts[] = {2, 3};
    const int64_t *axes[] = {a0, a1};
    sw_tile_selection sel = {2, counts, axes};
    sw_te_work *w;
    sw_error err;
    CHECK(sw_tiled_evictable_project_async(te, NULL, 0, &sel, NULL, &w, &err) == SW_OK);
    /* the caller's selection arrays may change at once: the work copied them */
    a0[0] = 1;
    a1[2] = 1;
    sw_tensor *r1 = NULL, *r2 = NULL;
    CHECK(sw_te_work_wait(w, &r1, &err) == SW_OK && r1);
    CHECK(sw_te_work_wait(w, &r2, &err) == SW_OK && r1 == r2);
    a0[0] = 2;
    a1[2] = 2;
    CHECK(projection_exact(te, &sel, r1));
    CHECK_EQ_I64(sw_tensor_size(r1), 24);
    sw_tensor_unref(r1);
    sw_tensor_unref(r2);
    sw_te_work_unref(w);
    sw_te_tile_state s;
    sw_tiled_evictable_tile_state(te, (int64_t[]){2, 1}, &s, NULL);
    CHECK(!s.pinned);
    CHECK_EQ_I64(count_of(te, SW_TE_TILES_SECONDARY), 3); /* residency unchanged */
    CHECK(sw_tiled_evictable_release(te, NULL) == SW_OK);
    sw_tiled_evictable_unref(te);
}

/* ---- faults in the middle ------------------------------------------------------------ */

/* kind 0 promote, 1 evict, 2 project; the outcome through the handle. */
static sw_status async_op(sw_tiled_evictable *te, int kind, const int64_t *coords, int64_t n,
                          sw_carrier *dest, sw_tensor **out, sw_error *err)
{
    int64_t a0[] = {0, 1}, a1[] = {1, 0}, counts[] = {2, 2};
    const int64_t *axes[] = {a0, a1};
    sw_tile_selection sel = {2, counts, axes};
    sw_te_work *w = NULL;
    sw_status st = kind == 0   ? sw_tiled_evictable_promote_async(te, coords, n, &w, err)
                   : kind == 1 ? sw_tiled_evictable_evict_async(te, coords, n, &w, err)
                               : sw_tiled_evictable_project_async(te, NULL, 0, &sel, dest, &w,
                                                                  err);
    if (st != SW_OK)
        return st;
    st = sw_te_work_wait(w, out, err);
    sw_te_work_unref(w);
    return st;
}

static int exhaust_faults(sw_tiled_evictable *te, const char *fault, int kind,
                          const int64_t *coords, int64_t n)
{
    int failed = 0;
    for (long skip = 0; skip < 200; skip++) {
        snap before, after;
        sw_tiled_evictable_drain(); /* the last attempt let go of everything */
        take_tiles(te, &before);
        int files = session_files();
        int64_t live = sw_alloc_live_bytes();
        sw_fault_arm(fault, skip, 1);
        sw_tensor *out = NULL;
        sw_error err;
        sw_status st = async_op(te, kind, coords, n, NULL, &out, &err);
        sw_fault_clear();
        if (st == SW_OK) {
            sw_tensor_unref(out);
            return failed;
        }
        failed++;
        sw_tiled_evictable_drain();
        take_tiles(te, &after);
        CHECK(same(&before, &after));
        CHECK_EQ_I64(session_files(), files);
        CHECK_EQ_I64(sw_alloc_live_bytes(), live);
        CHECK(out == NULL);
    }
    CHECK(!"the operation never succeeded");
    return failed;
}

static void test_te7_async_faults_change_nothing(void)
{
    if (!sw_fault_enabled())
        return;
    int64_t grid[] = {2, 2}, tile[] = {2, 2};
    int64_t three[] = {0, 0, 1, 0, 1, 1}, all[] = {0, 0, 1, 0, 0, 1, 1, 1};
    /* start the pool before counting live allocations */
    sw_tiled_evictable *warm = make_grid(2, grid, tile, 0);
    CHECK(async_op(warm, 1, three, 1, NULL, NULL, NULL) == SW_OK);
    sw_tiled_evictable_release(warm, NULL);
    sw_tiled_evictable_unref(warm);
    const char *faults[] = {"tile_copy", "tile_submit", "alloc", "pwrite", "pread", "open"};
    for (int file = 0; file < 2; file++) {
        for (size_t f = 0; f < sizeof faults / sizeof faults[0]; f++) {
            sw_tiled_evictable *te = make_grid(2, grid, tile, file);
            int failed = exhaust_faults(te, faults[f], 1, three, 3);
            if (!strcmp(faults[f], "tile_copy"))
                CHECK_EQ_I64(failed, 3);
            if (!strcmp(faults[f], "tile_submit") || !strcmp(faults[f], "alloc"))
                CHECK(failed >= 1);
            CHECK(all_values_exact(te));
            CHECK_EQ_I64(count_of(te, SW_TE_TILES_SECONDARY), 3);
            failed = exhaust_faults(te, faults[f], 0, all, 4);
            if (!strcmp(faults[f], "tile_copy"))
                CHECK_EQ_I64(failed, 3);
            CHECK(all_values_exact(te));
            CHECK(sw_tiled_evictable_evict(te, all, 4, NULL) == SW_OK);
            failed = exhaust_faults(te, faults[f], 2, NULL, 0);
            if (!strcmp(faults[f], "tile_submit") || (file && !strcmp(faults[f], "pread")))
                CHECK(failed >= 1);
            CHECK(all_values_exact(te));
            CHECK(sw_tiled_evictable_release(te, NULL) == SW_OK);
            sw_tiled_evictable_unref(te);
        }
    }
    /* a failed projection into a given destination: live, unclaimed */
    sw_tiled_evictable *te = make_grid(2, grid, tile, 1);
    sw_carrier *d;
    sw_cpu_new(16, SW_DT_FLOAT32, 0, &d, NULL);
    sw_fault_arm("tile_gather", 0, 1);
    sw_tensor *out = NULL;
    sw_error err;
    CHECK(async_op(te, 2, NULL, 0, d, &out, &err) == SW_EIO);
    CHECK(strstr(err.msg, "injected") != NULL);
    sw_fault_clear();
    CHECK(out == NULL && !sw_carrier_is_owned(d) && !sw_carrier_is_released(d));
    CHECK(async_op(te, 2, NULL, 0, d, &out, &err) == SW_OK && out);
    sw_tensor_unref(out);
    sw_carrier_release(d, NULL);
    sw_carrier_unref(d);
    sw_tiled_evictable_release(te, NULL);
    sw_tiled_evictable_unref(te);
}

/* ---- many threads ----------------------------------------------------------------- */

#define OWNERS 4
#define ITERS 40
static const int64_t tgrid[] = {OWNERS, 4}, ttile[] = {2, 3};
static _Atomic long failures, refusals;
static sw_te_work *_Atomic shared_handle;

typedef struct worker {
    sw_tiled_evictable *te;
    int k;
    unsigned rng;
} worker;

static void *worker_main(void *arg)
{
    worker *wk = arg;
    sw_tiled_evictable *te = wk->te;
    int64_t k = wk->k;
    int64_t own[6] = {k, 1, k, 2, k, 3}, row[] = {k}, cols[] = {1, 2, 3}, counts[] = {1, 3};
    const int64_t *axes[] = {row, cols};
    sw_tile_selection sel = {2, counts, axes};
    sw_error err;
    for (int it = 0; it < ITERS; it++) {
        wk->rng = wk->rng * 1103515245u + 12345u;
        unsigned r = wk->rng >> 8;
        sw_te_work *w = NULL;
        /* own tiles: must always succeed */
        sw_status st = (r & 1) ? sw_tiled_evictable_evict_async(te, own, 3, &w, &err)
                               : sw_tiled_evictable_promote_async(te, own, 3, &w, &err);
        if (st == SW_OK && (r & 2)) {
            sw_te_work_unref(w); /* dropped: the next request may find it pending */
            w = NULL;
        } else if (st == SW_OK) {
            st = sw_te_work_wait(w, NULL, &err);
            sw_te_work_unref(w);
        }
        if (st != SW_OK && !(st == SW_ESTATE && strstr(err.msg, "pending")))
            atomic_fetch_add(&failures, 1);
        /* projections of own tiles wait for any dropped request to commit */
        sw_tensor *out = NULL;
        for (int tries = 0; tries < 1000000; tries++) {
            st = sw_tiled_evictable_project_async(te, NULL, 0, &sel, NULL, &w, &err);
            if (st == SW_OK)
                break;
            if (!(st == SW_ESTATE && strstr(err.msg, "pending")))
                break;
            sched_yield();
        }
        if (st == SW_OK) {
            st = sw_te_work_wait(w, &out, &err);
            if (st == SW_OK && !projection_exact(te, &sel, out))
                atomic_fetch_add(&failures, 1);
            sw_tensor_unref(out);
            /* share the handle: other threads wait on it too */
            sw_te_work *old = atomic_exchange(&shared_handle, w);
            if (old) {
                if (sw_te_work_wait(old, NULL, &err) != SW_OK)
                    atomic_fetch_add(&failures, 1);
                sw_te_work_unref(old);
            }
        }
        if (st != SW_OK) {
            fprintf(stderr, "  own project: %s\n", err.msg);
            atomic_fetch_add(&failures, 1);
        }
        /* the shared column: refusals are fine */
        int64_t shared[2] = {(int64_t)(r % OWNERS), 0};
        st = (r & 4) ? sw_tiled_evictable_evict_async(te, shared, 1, &w, &err)
                     : sw_tiled_evictable_promote_async(te, shared, 1, &w, &err);
        if (st == SW_OK) {
            if (r & 8)
                st = sw_te_work_wait(w, NULL, &err);
            sw_te_work_unref(w);
        }
        if (st == SW_ESTATE && strstr(err.msg, "pending"))
            atomic_fetch_add(&refusals, 1);
        else if (st != SW_OK)
            atomic_fetch_add(&failures, 1);
    }
    return NULL;
}

static void test_te8_many_threads(void)
{
    for (int file = 0; file < 2; file++) {
        sw_tiled_evictable *te = make_grid(2, tgrid, ttile, file);
        worker wk[OWNERS];
        pthread_t th[OWNERS];
        for (int k = 0; k < OWNERS; k++) {
            wk[k] = (worker){te, k, 17u * (unsigned)k + 3u + (unsigned)file};
            pthread_create(&th[k], NULL, worker_main, &wk[k]);
        }
        for (int k = 0; k < OWNERS; k++)
            pthread_join(th[k], NULL);
        sw_te_work *last = atomic_exchange(&shared_handle, NULL);
        sw_te_work_unref(last);
        sw_tiled_evictable_drain();
        CHECK_EQ_I64(atomic_load(&failures), 0);
        CHECK(all_values_exact(te));
        int64_t busy = 0;
        const sw_tile_geometry *g = sw_tiled_evictable_geometry(te);
        for (int64_t t = 0; t < g->ntiles; t++) {
            int64_t c[2];
            sw_te_tile_state s;
            sw_tiles_tile_coord(g, t, c);
            sw_tiled_evictable_tile_state(te, c, &s, NULL);
            busy += s.pending + s.pinned;
        }
        CHECK_EQ_I64(busy, 0);
        CHECK(sw_tiled_evictable_release(te, NULL) == SW_OK);
        sw_tiled_evictable_unref(te);
    }
}

/* ---- exit and fork -------------------------------------------------------------------- */

/* A process may exit with work in flight (handles dropped): it exits
 * cleanly; with sw_tiled_evictable_drain first, the work committed. */
static void test_exit_with_work_in_flight(void)
{
    for (int drain = 0; drain < 2; drain++) {
        pid_t pid = fork();
        if (pid == 0) {
            int64_t grid[] = {8, 8}, tile[] = {16, 16};
            sw_tiled_evictable *te = make_grid(2, grid, tile, 1);
            for (int64_t r = 0; r < 8; r++) {
                int64_t row[16];
                for (int64_t c = 0; c < 8; c++) {
                    row[2 * c] = r;
                    row[2 * c + 1] = c;
                }
                sw_te_work *w;
                if (sw_tiled_evictable_evict_async(te, row, 8, &w, NULL) != SW_OK)
                    _exit(3);
                sw_te_work_unref(w);
            }
            if (drain) {
                sw_tiled_evictable_drain();
                int64_t n = -1;
                sw_tiled_evictable_tiles(te, SW_TE_TILES_SECONDARY, NULL, 0, &n, NULL);
                if (n != 64 || !all_values_exact(te))
                    _exit(4); /* everything committed */
            }
            sw_tiled_evictable_unref(te);
            exit(0);
        }
        int status = 0;
        CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
}

#ifndef __SANITIZE_THREAD__ /* TSan cannot follow a multi-threaded fork */
/* fork() while a request copies, then while a projection gathers (each
 * stopped at a pause point on the pool): the child ends it (marks cleared,
 * nothing committed, the handle fails "forked", the destination free) and
 * keeps working; in the parent the work commits once resumed. */
static void test_fork_ends_inherited_work(void)
{
    if (!sw_fault_enabled())
        return;
    for (int project = 0; project < 2; project++) {
        int64_t grid[] = {2, 2}, tile[] = {2, 2};
        sw_tiled_evictable *te = make_grid(2, grid, tile, 1);
        int64_t a0[] = {1}, a1[] = {0}, counts[] = {1, 1};
        const int64_t *axes[] = {a0, a1};
        sw_tile_selection sel = {2, counts, axes};
        sw_carrier *d;
        sw_cpu_new(4, SW_DT_FLOAT32, 0, &d, NULL);
        sw_te_work *w = NULL;
        if (project) {
            sw_fault_arm("tile_gather_pause", 0, 1);
            CHECK(sw_tiled_evictable_project_async(te, NULL, 0, &sel, d, &w, NULL) == SW_OK);
        } else {
            sw_fault_arm("tile_copy_pause", 0, 1);
            CHECK(sw_tiled_evictable_evict_async(te, (int64_t[]){0, 1, 1, 1}, 2, &w, NULL) ==
                  SW_OK);
        }
        sw_fault_wait_paused();
        snap at_fork;
        take_tiles(te, &at_fork);
        pid_t pid = fork();
        if (pid == 0) {
            int bad = 0;
            sw_error err;
            bad |= sw_te_work_wait(w, NULL, &err) != SW_ESTATE || !strstr(err.msg, "forked");
            bad |= err.detail != SW_TE_ENDED_BY_FORK;
            bad |= !sw_te_work_done(w);
            sw_te_tile_state s;
            for (int64_t t = 0; t < 4; t++) {
                int64_t c[2] = {t % 2, t / 2};
                sw_tiled_evictable_tile_state(te, c, &s, NULL);
                bad |= s.pending || s.pinned || s.location != SW_TE_PRIMARY;
            }
            bad |= !all_values_exact(te);
            bad |= sw_carrier_is_owned(d) || sw_carrier_is_released(d);
            sw_te_work_unref(w);
            /* the child goes on: a blocking eviction and projection there */
            sw_tensor *out = NULL;
            bad |= sw_tiled_evictable_evict(te, (int64_t[]){0, 1}, 1, NULL) != SW_OK;
            bad |= loc_of(te, (int64_t[]){0, 1}) != SW_TE_SECONDARY || !all_values_exact(te);
            bad |= sw_tiled_evictable_project(te, NULL, 0, &sel, d, &out, NULL) != SW_OK ||
                   !projection_exact(te, &sel, out);
            sw_tensor_unref(out);
            bad |= sw_tiled_evictable_release(te, NULL) != SW_OK;
            _exit(bad ? 5 : 0);
        }
        int status = 0;
        CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        /* the parent: nothing changed until resumed, then it commits */
        snap now;
        take_tiles(te, &now);
        CHECK(same(&at_fork, &now));
        sw_fault_resume();
        sw_tensor *out = NULL;
        CHECK(sw_te_work_wait(w, &out, NULL) == SW_OK);
        if (project)
            CHECK(out && projection_exact(te, &sel, out));
        else
            CHECK(loc_of(te, (int64_t[]){1, 1}) == SW_TE_SECONDARY);
        sw_tensor_unref(out);
        sw_te_work_unref(w);
        CHECK(all_values_exact(te));
        CHECK(!sw_carrier_is_owned(d));
        CHECK(sw_tiled_evictable_release(te, NULL) == SW_OK);
        sw_tiled_evictable_unref(te);
        sw_carrier_release(d, NULL);
        sw_carrier_unref(d);
        sw_fault_clear();
    }
}

/* fork() while another thread is inside a blocking promote (stopped
 * mid-copy): the child's tile is not left pending forever. */
typedef struct blocking_job {
    sw_tiled_evictable *te;
    sw_status st;
} blocking_job;

static void *blocking_promote(void *arg)
{
    blocking_job *j = arg;
    j->st = sw_tiled_evictable_promote(j->te, (int64_t[]){1, 0}, 1, NULL);
    return NULL;
}

static void test_fork_ends_inherited_blocking_call(void)
{
    if (!sw_fault_enabled())
        return;
    int64_t grid[] = {2, 2}, tile[] = {2, 2};
    sw_tiled_evictable *te = make_grid(2, grid, tile, 1);
    CHECK(sw_tiled_evictable_evict(te, (int64_t[]){1, 0}, 1, NULL) == SW_OK);
    sw_fault_arm("tile_copy_pause", 0, 1);
    blocking_job j = {te, SW_EIO};
    pthread_t th;
    pthread_create(&th, NULL, blocking_promote, &j);
    sw_fault_wait_paused();
    pid_t pid = fork();
    if (pid == 0) {
        sw_te_tile_state s;
        sw_tiled_evictable_tile_state(te, (int64_t[]){1, 0}, &s, NULL);
        int bad = s.pending || s.location != SW_TE_SECONDARY || !all_values_exact(te);
        bad |= sw_tiled_evictable_promote(te, (int64_t[]){1, 0}, 1, NULL) != SW_OK;
        bad |= loc_of(te, (int64_t[]){1, 0}) != SW_TE_PRIMARY;
        bad |= sw_tiled_evictable_release(te, NULL) != SW_OK;
        _exit(bad ? 5 : 0);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    sw_fault_resume();
    pthread_join(th, NULL);
    CHECK(j.st == SW_OK);
    CHECK(loc_of(te, (int64_t[]){1, 0}) == SW_TE_PRIMARY);
    CHECK(all_values_exact(te));
    sw_tiled_evictable_release(te, NULL);
    sw_tiled_evictable_unref(te);
    sw_fault_clear();
}
#endif

int main(void)
{
    test_exit_with_work_in_flight(); /* first: fork before this process has threads */
    test_te7_async_residency_commits_all();
    test_te7_async_refusals_change_nothing();
    test_te7_async_pending_until_commit();
    test_te8_dropped_handles_commit();
    test_te10_async_projection();
    test_te7_async_faults_change_nothing();
    test_te8_many_threads();
#ifndef __SANITIZE_THREAD__
    test_fork_ends_inherited_work();
    test_fork_ends_inherited_blocking_call();
#endif
    return check_report("tiled_evictable_async");
}
