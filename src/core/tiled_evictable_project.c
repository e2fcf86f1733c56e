/* TiledEvictable projection (contract-carriers TE-3, TE-4, TE-10): copy a
 * product of tiles out of a full tensor over the carrier into a dense
 * tensor on a CPU carrier.
 *
 * Every check runs first; then, under the lock, the selected tiles are
 * pinned (writes and residency requests refuse them) and their storage is
 * noted; without the lock, tiles kept in a FileBacked tier are read into
 * host buffers by whole runs (or straight into place), tiles in a
 * binding's store that land as one run go to its read_many hook together,
 * those in files of the core's own classes in a bound tier are read into
 * place by the core, and the gather (tiles.h) copies host runs (also the
 * memory of a bound Generic tier) into the destination, or into a
 * Generic destination's memory; a FileBacked destination the core writes
 * itself is written straight into its file instead
 * (tiled_evictable_project_file.c); under the lock again the pins drop. The gather
 * reads tiles where they are, so residency never changes. A policy's
 * promotion runs after the gather, its copies issued by the gathering
 * thread (sw_te_project_issue) and awaited (sw_te_project_await) there or,
 * for project_start, on the pool once a binding's copy is still to report. */
#include "tiled_evictable_internal.h"
#include "fault_internal.h"

#include <errno.h>
#include <string.h>
#include <sys/uio.h>

#include "strideweave/alloc.h"
#include "strideweave/filestore.h"

/* Check 3 in the Python API's words (a binding raises them as they come). */
static sw_status check_layout(sw_tiled_evictable *te, const sw_layout *L, int64_t offset,
                              sw_error *err)
{
    const sw_tile_geometry *g = &te->geo;
    if (!sw_tiles_matches_shape(g, L))
        return sw_error_set(err, SW_EINVAL,
                            "the tensor's layout must have %d top-level modes whose sizes are "
                            "the carrier's logical_shape",
                            (int)g->rank);
    if (offset < 0)
        return sw_error_set(err, SW_EINVAL, "the tensor's offset must be >= 0, not %lld",
                            (long long)offset);
    int ok = sw_tiles_check_footprints(g, L, offset, err);
    return ok == 1 ? SW_OK : ok == 0 ? SW_EINVAL : (err ? err->code : SW_ENOMEM);
}

static sw_status check_selection(const sw_tile_geometry *g, const sw_tile_selection *sel,
                                 sw_error *err)
{
    if (sel->rank == g->rank && (!sel->counts || !sel->coords))
        return sw_error_set(err, SW_ETYPE, "TiledEvictable: the selection's arrays must not be "
                            "NULL");
    sw_status st = sw_tiles_bind_selection(g, sel, err);
    if (st != SW_OK)
        return st;
    for (int32_t k = 0; k < g->rank; k++) {
        if (sel->counts[k] < 1 || !sel->coords[k])
            return sw_error_set(err, SW_EINVAL,
                                "TiledEvictable: axis %d of the selection names no tile",
                                (int)k);
        for (int64_t i = 0; i < sel->counts[k]; i++)
            for (int64_t j = 0; j < i; j++)
                if (sel->coords[k][i] == sel->coords[k][j])
                    return sw_error_set(err, SW_EINVAL,
                                        "TiledEvictable: tile coordinate %lld appears twice on "
                                        "axis %d of the selection",
                                        (long long)sel->coords[k][i], (int)k);
    }
    return SW_OK;
}

static sw_status check_destination(sw_tiled_evictable *te, sw_carrier *d, int64_t n,
                                   sw_error *err)
{
    /* With binding hooks, a destination of another class is the binding's
     * (its class is the binding's to check): the values go through the
     * write hook. */
    int bound = te->hooked && te->hooks.write && sw_carrier_class_of(d) != &sw_cpu_class;
    if (!bound && sw_carrier_class_of(d) != &sw_cpu_class)
        return sw_error_set(err, SW_ETYPE,
                            "TiledEvictable: the destination must be a CPU carrier (the "
                            "primary's class), not %s",
                            sw_carrier_name(d));
    if (sw_carrier_is_released(d))
        return sw_error_set(err, SW_ESTATE, "the destination carrier is released");
    if (sw_carrier_is_owned(d))
        return sw_error_set(err, SW_ESTATE, "the destination carrier is owned by a composite "
                            "carrier");
    if (sw_carrier_is_pending(d))
        return sw_error_set(err, SW_ESTATE, "TiledEvictable: the destination carrier takes part "
                            "in a pending move; wait for the move first");
    if (!sw_carrier_is_mutable(d))
        return sw_error_set(err, SW_ESTATE, "TiledEvictable: the destination carrier is not "
                            "mutable");
    int state_only = sw_carrier_is_state_only(d);
    if (!(bound && state_only) && sw_carrier_dtype(d) != te->dtype)
        return sw_error_set(err, SW_ETYPE, "the destination holds %s, not %s",
                            sw_dtype_info_of(sw_carrier_dtype(d))->name,
                            sw_dtype_info_of(te->dtype)->name);
    int64_t size = sw_carrier_size(d);
    if (bound && state_only) {
        if (!te->hooks.size)
            return sw_error_set(err, SW_EINVAL, "TiledEvictable: the destination keeps its slots "
                                "in the binding, which gave no size hook");
        sw_status st = te->hooks.size(d, te->hooks.user, &size, err);
        if (st != SW_OK)
            return st;
    }
    if (size < n)
        return sw_error_set(err, SW_EINVAL, "the destination has %lld slots; the projection "
                            "needs %lld",
                            (long long)size, (long long)n);
    return SW_OK;
}

/* Whether the selection names tile t. */
static int selects(const sw_tile_geometry *g, const sw_tile_selection *sel, int64_t t)
{
    for (int32_t k = 0; k < g->rank; k++) {
        int64_t c = t % g->grid[k];
        t /= g->grid[k];
        int found = 0;
        for (int64_t j = 0; !found && j < sel->counts[k]; j++)
            found = sel->coords[k][j] == c;
        if (!found)
            return 0;
    }
    return 1;
}

/* Pin (delta +1) or unpin (-1) the selected tiles, under the lock. */
static void pin_locked(sw_tiled_evictable *te, const sw_tile_selection *sel, int delta)
{
    for (int64_t t = 0; t < te->geo.ntiles; t++)
        if (selects(&te->geo, sel, t))
            te->tiles[t].pins += delta;
    te->busy += delta;
}

/* Under the lock: refuse pending and invalid selected tiles, then pin them
 * and note where each one's values are (`src`, one per grid tile, files
 * in `file`). */
static sw_status pin_and_note_locked(sw_tiled_evictable *te, const sw_tile_selection *sel,
                                     te_store *notes, uint8_t *full, uint8_t *implicit,
                                     sw_error *err)
{
    if (te->released)
        return sw_error_set(err, SW_ESTATE, "cannot project from a released "
                            "TiledEvictable");
    for (int64_t t = 0; t < te->geo.ntiles; t++) {
        if (!selects(&te->geo, sel, t))
            continue;
        const te_tile *r = &te->tiles[t];
        if (r->pending)
            return sw_error_set(err, SW_ESTATE, "a tile this projection needs is pending in a "
                                "residency request; wait() for it first");
        if (r->loc == SW_TE_INVALID)
            return sw_error_set(err, SW_ESTATE, "a tile this projection needs is invalid (it "
                                "holds no values)");
    }
    for (int64_t t = 0; t < te->geo.ntiles; t++) {
        if (!selects(&te->geo, sel, t))
            continue;
        const te_tile *r = &te->tiles[t];
        notes[t] = r->store;
        full[t] = r->full;
        implicit[t] = r->loc == SW_TE_IMPLICIT;
    }
    pin_locked(te, sel, +1);
    return SW_OK;
}

/* Under the identity layout a tile in private FileBacked storage (one
 * contiguous span of the file, in within-tile order) lands in the dense
 * destination as tile[0]-long runs at fixed places: one preadv reads the
 * file straight into them, no staging buffer. */
static sw_status read_in_place(sw_tiled_evictable *te, int64_t t, const sw_tile_selection *sel,
                               const int64_t *shape, int fd, unsigned char *dst, sw_error *err)
{
    if (SW_FAULT_HIT("tile_copy"))
        return sw_error_set_errno(err, SW_EIO, EIO, "TiledEvictable: injected fault: tile copy "
                                  "failed");
    const sw_tile_geometry *g = &te->geo;
    int64_t tc[SW_TILES_MAX_RANK], base = 0, mul = 1, dstride[SW_TILES_MAX_RANK];
    sw_tiles_tile_coord(g, t, tc);
    for (int32_t k = 0; k < g->rank; k++) {
        int64_t j = 0;
        while (sel->coords[k][j] != tc[k])
            j++; /* selected, and once per axis (checked) */
        dstride[k] = mul;
        base += j * g->tile[k] * mul;
        mul *= shape[k];
    }
    int64_t runs = g->tile_size / g->tile[0];
    struct iovec *iov = sw_malloc((size_t)runs * sizeof *iov);
    if (!iov)
        return sw_error_set(err, SW_ENOMEM, "TiledEvictable: out of memory projecting");
    int64_t w[SW_TILES_MAX_RANK] = {0}; /* within-tile coordinate, w[0] == 0 */
    for (int64_t r = 0; r < runs; r++) {
        int64_t at = base;
        for (int32_t k = 1; k < g->rank; k++)
            at += w[k] * dstride[k];
        iov[r] = (struct iovec){.iov_base = dst + (size_t)at * te->eb,
                                .iov_len = (size_t)g->tile[0] * te->eb};
        for (int32_t k = 1; k < g->rank && ++w[k] == g->tile[k]; k++)
            w[k] = 0;
    }
    sw_status st = sw_filestore_preadv(fd, iov, runs, 0, err);
    sw_free(iov);
    return st;
}

/* Where tile t starts in the dense destination of `shape` (identity
 * layout) when its values land there as one run: 1, else 0. The block of a
 * tile is one run when every axis below its last non-unit axis is taken
 * whole (one tile selected there). */
static int lands_as_one_run(const sw_tile_geometry *g, const sw_tile_selection *sel,
                            const int64_t *shape, int64_t t, int64_t *start)
{
    int32_t last = 0;
    for (int32_t k = 0; k < g->rank; k++)
        if (g->tile[k] > 1)
            last = k;
    int64_t tc[SW_TILES_MAX_RANK], at = 0, mul = 1;
    sw_tiles_tile_coord(g, t, tc);
    for (int32_t k = 0; k < g->rank; k++) {
        if (k < last && sel->counts[k] != 1)
            return 0;
        int64_t j = 0;
        while (sel->coords[k][j] != tc[k])
            j++; /* selected, and once per axis (checked) */
        at += j * g->tile[k] * mul;
        mul *= shape[k];
    }
    *start = at;
    return 1;
}

/* Where the values of tile t kept in `s` start in it when they are one run
 * in within-tile order: 1, else 0 (-1: out of memory). */
static int one_span(const sw_tile_geometry *g, int64_t t, int full, int64_t *from)
{
    if (!full) {
        *from = 0;
        return 1;
    }
    sw_tile_run *runs = sw_malloc((size_t)(g->tile_size / g->tile[0]) * sizeof *runs);
    if (!runs)
        return -1;
    int64_t n = sw_tiles_runs(g, t, runs);
    int ok = n == 1 && runs[0].within == 0 && runs[0].count == g->tile_size;
    *from = runs[0].slot;
    sw_free(runs);
    return ok;
}

/* Tile t read straight into its run of the destination (identity layout):
 * 1 with where its values start in its store (*from) and in `dst` (*to)
 * when they are one run in both, 0 when not, -1 out of memory. */
static int lands_whole(const sw_tile_geometry *g, const sw_tile_selection *sel,
                       const int64_t *shape, int64_t t, int full, int64_t *from, int64_t *to)
{
    if (!lands_as_one_run(g, sel, shape, t, to))
        return 0;
    return one_span(g, t, full, from);
}

static sw_status injected_tile_fault(sw_error *err)
{
    return sw_error_set_errno(err, SW_EIO, EIO, "TiledEvictable: injected fault: tile copy "
                              "failed");
}

/* The tiles read straight into place, each kind of store its own way:
 * those in the binding's stores go to its read_many hook together (tile
 * order, when the destination is the core's CPU carrier `dest`), those in
 * files of the core's own classes in a bound tier (FileBacked,
 * BlockDeviceCarrier) are read here, one call each. The binding's batch is
 * sorted out and answered first, so a refusal (SW_ENOTSUP: nothing read;
 * those tiles go the usual way) or a failure is the whole batch's before
 * the core writes any of the destination. Host memory of the core's
 * classes needs no read: the gather copies from it. `done[t]` marks the
 * tiles read. No lock held, the tiles pinned. */
static sw_status read_batch(sw_tiled_evictable *te, const sw_tile_selection *sel,
                            const int64_t *shape, const te_store *notes, const uint8_t *full,
                            const uint8_t *implicit, sw_carrier *dest, unsigned char *dst,
                            uint8_t *done, sw_error *err)
{
    const sw_tile_geometry *g = &te->geo;
    int many = dest && te->hooks.read_many;
    sw_carrier **stores = many ? sw_malloc((size_t)g->ntiles * sizeof *stores) : NULL;
    int64_t *at = many ? sw_malloc((size_t)g->ntiles * 3 * sizeof *at) : NULL;
    sw_status st = !many || (stores && at) ? SW_OK
                                           : sw_error_set(err, SW_ENOMEM, "TiledEvictable: out "
                                                          "of memory projecting");
    int64_t n = 0, *count = at ? at + g->ntiles : NULL, *dest_at = at ? at + 2 * g->ntiles : NULL;
    for (int64_t t = 0; many && st == SW_OK && t < g->ntiles; t++) {
        int64_t from, to;
        if (!selects(g, sel, t) || implicit[t] || !te_store_bound(&notes[t]) || notes[t].own)
            continue;
        int ok = lands_whole(g, sel, shape, t, full[t], &from, &to);
        if (ok < 0)
            st = sw_error_set(err, SW_ENOMEM, "TiledEvictable: out of memory projecting");
        if (ok <= 0)
            continue;
        stores[n] = notes[t].c;
        at[n] = from;
        count[n] = g->tile_size;
        dest_at[n] = to;
        done[t] = 1;
        n++;
    }
    for (int64_t i = 0; st == SW_OK && i < n; i++)
        if (SW_FAULT_HIT("tile_copy"))
            st = injected_tile_fault(err);
    if (st == SW_OK && n > 0) {
        st = te->hooks.read_many(stores, at, count, dest, dest_at, n, te->hooks.user, err);
        if (st == SW_ENOTSUP) { /* nothing read: the binding's tiles the usual way */
            memset(done, 0, (size_t)g->ntiles);
            sw_error_clear(err);
            st = SW_OK;
        }
    }
    sw_free(stores);
    sw_free(at);
    for (int64_t t = 0; st == SW_OK && t < g->ntiles; t++) {
        int64_t from, to;
        if (!selects(g, sel, t) || implicit[t] || !notes[t].own || notes[t].own_host)
            continue;
        int ok = lands_whole(g, sel, shape, t, full[t], &from, &to);
        if (ok < 0)
            st = sw_error_set(err, SW_ENOMEM, "TiledEvictable: out of memory projecting");
        else if (ok && SW_FAULT_HIT("tile_copy"))
            st = injected_tile_fault(err);
        else if (ok)
            st = sw_te_read_run(te, &notes[t], from, g->tile_size, dst + (size_t)to * te->eb,
                                err);
        done[t] = ok > 0;
    }
    return st;
}

/* The gather, no lock held, the selected tiles pinned. `dest` (NULL when
 * the destination is the binding's) is the CPU carrier behind `dst`. */
static sw_status gather(sw_tiled_evictable *te, const sw_layout *L, int64_t offset,
                        const sw_tile_selection *sel, const te_store *notes, const uint8_t *full,
                        const uint8_t *implicit, sw_carrier *dest, unsigned char *dst,
                        sw_error *err)
{
    if (SW_FAULT_HIT("tile_gather"))
        return sw_error_set_errno(err, SW_EIO, EIO, "TiledEvictable: injected fault: projection "
                                  "gather failed");
    SW_FAULT_PAUSE("tile_gather_pause"); /* tests: stop while the tiles are pinned */
    const sw_tile_geometry *g = &te->geo;
    size_t tile_bytes = (size_t)g->tile_size * te->eb;
    sw_tile_source *src = sw_calloc((size_t)g->ntiles, sizeof *src);
    unsigned char **bufs = sw_calloc((size_t)g->ntiles, sizeof *bufs);
    unsigned char *zeros = NULL;
    sw_status st = src && bufs ? SW_OK
                               : sw_error_set(err, SW_ENOMEM, "TiledEvictable: out of memory "
                                              "projecting");
    int identity = sw_tiles_is_identity(g, L, offset);
    int64_t shape[SW_TILES_MAX_RANK];
    sw_tiles_compact_shape(g, sel, shape);
    uint8_t *batched = NULL;
    if (st == SW_OK && identity && te->hooked) {
        batched = sw_calloc((size_t)g->ntiles, 1);
        st = batched ? read_batch(te, sel, shape, notes, full, implicit, dest, dst, batched, err)
                     : sw_error_set(err, SW_ENOMEM, "TiledEvictable: out of memory projecting");
    }
    for (int64_t t = 0; st == SW_OK && t < g->ntiles; t++) {
        if (!selects(g, sel, t))
            continue;
        if (batched && batched[t]) {
            src[t] = (sw_tile_source){NULL, 0}; /* read into place: the gather skips it */
        } else if (implicit[t]) {
            if (!zeros && !(zeros = sw_calloc(1, tile_bytes)))
                st = sw_error_set(err, SW_ENOMEM, "TiledEvictable: out of memory projecting");
            src[t] = (sw_tile_source){zeros, 0};
        } else if (notes[t].host || (notes[t].own && notes[t].own_host)) {
            /* host memory, also that of a bound store of the core's own
             * classes: copied from where it is */
            src[t] = (sw_tile_source){notes[t].host ? notes[t].host : notes[t].own_host,
                                      full[t]};
        } else if (identity && !full[t] && notes[t].fd >= 0) {
            st = read_in_place(te, t, sel, shape, notes[t].fd, dst, err);
            src[t] = (sw_tile_source){NULL, 0}; /* in place: the gather skips it */
        } else {
            /* A FileBacked tile: its runs into a host buffer first. */
            bufs[t] = sw_malloc(tile_bytes ? tile_bytes : 1);
            te_store b = {NULL, bufs[t], -1, 0, NULL};
            st = bufs[t] ? sw_te_copy_tile(te, t, &notes[t], full[t], &b, err)
                         : sw_error_set(err, SW_ENOMEM, "TiledEvictable: out of memory "
                                        "projecting");
            src[t] = (sw_tile_source){bufs[t], 0};
        }
    }
    if (st == SW_OK)
        st = sw_tiles_gather(g, L, offset, sel, src, te->eb, dst, err);
    for (int64_t t = 0; bufs && t < g->ntiles; t++)
        sw_free(bufs[t]);
    sw_free(batched);
    sw_free(bufs);
    sw_free(zeros);
    sw_free(src);
    return st;
}

static sw_layout *identity_layout(const sw_tile_geometry *g, sw_error *err)
{
    uint8_t profile[SW_TILES_MAX_RANK];
    for (int32_t k = 0; k < g->rank; k++)
        profile[k] = SW_NODE_LEAF;
    return sw_layout_canonical(g->rank, profile, g->logical, err);
}

struct te_projection {
    sw_layout *layout; /* owned: a copy of the caller's, or the identity */
    int64_t offset;
    int64_t counts[SW_TILES_MAX_RANK];
    const int64_t *axes[SW_TILES_MAX_RANK];
    int64_t *coords;   /* every axis' coordinates, back to back */
    sw_tile_selection sel;
    int given;         /* the destination is the caller's */
    int bound;         /* ... and the binding's: gathered into its memory (Generic) or a bounce
                          buffer, then its write hook */
    sw_carrier *dest;  /* one reference */
    uint64_t token;    /* the claim on a given destination */
    te_store *notes;
    uint8_t *flags;    /* full[ntiles], then implicit[ntiles] */
    int64_t shape[SW_TILES_MAX_RANK];
    int64_t n;
    sw_status status;  /* the gather's outcome */
    sw_error err;
    sw_te_plan plan;   /* the policy's, when there is one (plan.in non-NULL) */
    te_track promote;  /* the plan's promotion while it runs (not registered) */
    sw_tensor *result; /* over dest, made before anything commits (not when bound) */
};

static void projection_free(te_projection *pj)
{
    if (!pj)
        return;
    sw_tensor_unref(pj->result);
    sw_layout_free(pj->layout);
    sw_free(pj->coords);
    sw_te_plan_clear(&pj->plan);
    sw_carrier_unref(pj->dest);
    sw_free(pj->notes);
    sw_free(pj->flags);
    sw_free(pj);
}

/* Copies of the checked layout and selection, so that asynchronous work
 * never reads the caller's arrays. */
static sw_status projection_new(const sw_tile_geometry *g, const sw_layout *layout,
                                int64_t offset, const sw_tile_selection *sel,
                                te_projection **out, sw_error *err)
{
    te_projection *pj = sw_calloc(1, sizeof *pj);
    int64_t total = 0;
    for (int32_t k = 0; k < g->rank; k++)
        total += sel->counts[k];
    if (pj) {
        pj->coords = sw_malloc((size_t)total * sizeof *pj->coords);
        pj->notes = sw_calloc((size_t)g->ntiles, sizeof *pj->notes);
        pj->flags = sw_calloc((size_t)g->ntiles, 2);
    }
    if (!pj || !pj->coords || !pj->notes || !pj->flags) {
        projection_free(pj);
        return sw_error_set(err, SW_ENOMEM, "TiledEvictable: out of memory projecting");
    }
    pj->layout = layout ? sw_layout_copy(layout, err) : identity_layout(g, err);
    if (!pj->layout) {
        projection_free(pj);
        return err ? err->code : SW_ENOMEM;
    }
    pj->offset = layout ? offset : 0;
    int64_t at = 0;
    for (int32_t k = 0; k < g->rank; k++) {
        pj->counts[k] = sel->counts[k];
        memcpy(pj->coords + at, sel->coords[k], (size_t)sel->counts[k] * sizeof *pj->coords);
        pj->axes[k] = pj->coords + at;
        at += sel->counts[k];
    }
    pj->sel = (sw_tile_selection){g->rank, pj->counts, pj->axes};
    pj->n = sw_tiles_compact_shape(g, &pj->sel, pj->shape);
    *out = pj;
    return SW_OK;
}

/* Ask the policy (if any) for its plan: the required tiles are the
 * selected ones in linear order. No lock held (user code). */
static sw_status ask_policy(sw_tiled_evictable *te, te_projection *pj, sw_error *err)
{
    sw_te_policy policy;
    sw_tiled_evictable_policy_of(te, &policy);
    if (!policy.plan)
        return SW_OK;
    const sw_tile_geometry *g = &te->geo;
    int64_t n = 1;
    for (int32_t k = 0; k < g->rank; k++)
        n *= pj->counts[k];
    int64_t *rows = sw_malloc((size_t)(n * g->rank + 1) * sizeof *rows);
    pj->plan.geo = g;
    pj->plan.in = sw_calloc((size_t)g->ntiles, 1);
    if (!rows || !pj->plan.in) {
        sw_free(rows);
        return sw_error_set(err, SW_ENOMEM, "TiledEvictable: out of memory for the residency "
                            "plan");
    }
    int64_t m = 0;
    for (int64_t t = 0; t < g->ntiles; t++)
        if (selects(g, &pj->sel, t))
            sw_tiles_tile_coord(g, t, rows + (m++) * g->rank);
    sw_error_clear(err);
    sw_status st = policy.plan(rows, m, g->rank, "projection", &pj->plan, policy.user, err);
    sw_free(rows);
    if (st != SW_OK && err && err->code == SW_OK)
        sw_error_set(err, st, "TiledEvictable: the residency policy's plan failed");
    return st;
}

/* The plan's promote and retain tiles, pinned besides the selection. */
static void pin_extra_locked(sw_tiled_evictable *te, te_projection *pj, int delta)
{
    for (int k = SW_TE_PLAN_PROMOTE; k <= SW_TE_PLAN_RETAIN; k++)
        for (int64_t i = 0; i < pj->plan.n[k]; i++)
            te->tiles[pj->plan.idx[k][i]].pins += delta;
}

static sw_status check_extra_locked(sw_tiled_evictable *te, te_projection *pj, sw_error *err)
{
    for (int k = SW_TE_PLAN_PROMOTE; k <= SW_TE_PLAN_RETAIN; k++)
        for (int64_t i = 0; i < pj->plan.n[k]; i++) {
            const te_tile *r = &te->tiles[pj->plan.idx[k][i]];
            if (r->pending)
                return sw_error_set(err, SW_ESTATE, "a tile this projection needs is pending in "
                                    "a residency request; wait() for it first");
            if (k == SW_TE_PLAN_PROMOTE && r->loc == SW_TE_INVALID)
                return sw_error_set(err, SW_ESTATE, "a tile this projection needs is invalid "
                                    "(it holds no values)");
        }
    return SW_OK;
}

/* Checks 1 to 4 (tiled_evictable.h), nothing else: no lock kept, no hook
 * called, nothing changed. The words are the Python API's, so a binding
 * that asks before its own work raises them as they come. */
sw_status sw_tiled_evictable_project_check(sw_tiled_evictable *te, const sw_layout *layout,
                                           int64_t offset, const sw_tile_selection *selection,
                                           int64_t *n, int64_t *shape, sw_error *err)
{
    if (!te)
        return sw_error_set(err, SW_ETYPE, "TiledEvictable: the carrier must not be NULL");
    if (sw_tiled_evictable_is_released(te))
        return sw_error_set(err, SW_ESTATE, "cannot project from a released TiledEvictable");
    sw_status st = layout ? check_layout(te, layout, offset, err) : SW_OK;
    if (st != SW_OK || !selection)
        return st;
    if ((st = check_selection(&te->geo, selection, err)) != SW_OK)
        return st;
    int64_t own[SW_TILES_MAX_RANK];
    int64_t count = sw_tiles_compact_shape(&te->geo, selection, shape ? shape : own);
    if (count < 0)
        return sw_error_set(err, SW_EOVERFLOW, "the projection is too large");
    if (n)
        *n = count;
    return SW_OK;
}

sw_status sw_te_project_begin(sw_tiled_evictable *te, const sw_layout *layout, int64_t offset,
                              const sw_tile_selection *selection, sw_carrier *destination,
                              te_track *track, te_projection **out, sw_error *err)
{
    if (!te || !selection || !out)
        return sw_error_set(err, SW_ETYPE, "TiledEvictable: the carrier, the selection and out "
                            "must not be NULL");
    const sw_tile_geometry *g = &te->geo;
    int64_t n = 0;
    sw_status st = sw_tiled_evictable_project_check(te, layout, offset, selection, &n, NULL, err);
    if (st == SW_OK && destination)
        st = check_destination(te, destination, n, err);
    te_projection *pj = NULL;
    if (st == SW_OK)
        st = projection_new(g, layout, offset, selection, &pj, err);
    if (st != SW_OK)
        return st;
    if ((st = ask_policy(te, pj, err)) != SW_OK) {
        projection_free(pj);
        return st;
    }
    if (destination) {
        pj->given = 1;
        pj->bound = te->hooked && sw_carrier_class_of(destination) != &sw_cpu_class;
        pj->dest = sw_carrier_ref(destination);
        st = sw_carrier_claim(pj->dest, &pj->token, err);
    } else {
        st = sw_cpu_new(n, te->dtype, SW_CARRIER_EMPTY, &pj->dest, err);
    }
    /* The result is made now: once the plan's promotion commits nothing
     * may fail. A binding's destination: the binding's tensor. */
    if (st == SW_OK && !pj->bound)
        st = sw_tensor_new_strided(pj->dest, 0, g->rank, pj->shape, NULL, &pj->result, err);
    if (st == SW_OK) {
        pthread_mutex_lock(&te->lock);
        st = te->released ? SW_OK : check_extra_locked(te, pj, err);
        if (st == SW_OK)
            st = pin_and_note_locked(te, &pj->sel, pj->notes, pj->flags, pj->flags + g->ntiles,
                                     err);
        if (st == SW_OK)
            pin_extra_locked(te, pj, +1);
        if (st == SW_OK && track) {
            track->marked = 1;
            track->projection = pj;
        }
        pthread_mutex_unlock(&te->lock);
    }
    if (st != SW_OK) {
        if (pj->token)
            sw_carrier_relinquish(pj->dest, pj->token, NULL);
        if (pj->dest && !pj->given)
            sw_carrier_release(pj->dest, NULL);
        projection_free(pj);
        return st;
    }
    *out = pj;
    return SW_OK;
}

/* The projection written straight into `fd`, the file of a binding's
 * FileBacked destination the core writes itself, with the claimed
 * destination's owner access on this thread (no core lock held), as the
 * one write of a bounce buffer had it; one version step on success. A
 * failure part way leaves some of the file written: a given destination's
 * values are then unspecified (sw_tiled_evictable_project), its version
 * unchanged. */
static void gather_into_file(sw_tiled_evictable *te, te_projection *pj, int fd)
{
    pj->status = sw_carrier_begin_owner_access(pj->dest, pj->token, &pj->err);
    if (pj->status != SW_OK)
        return;
    pj->status = sw_te_gather_file(te, pj->layout, pj->offset, &pj->sel, pj->notes, pj->flags,
                                   pj->flags + te->geo.ntiles, fd, &pj->err);
    if (pj->status == SW_OK)
        pj->status = sw_carrier_increment_version(pj->dest, &pj->err);
    sw_carrier_end_owner_access(pj->dest, pj->token, NULL);
}

/* The gather into host memory: `into` (a CPU destination's, or a Generic
 * one's the core reaches), else a bounce buffer handed to the write hook
 * with the claimed destination's owner access on this thread (no core lock
 * held). */
static void gather_into_memory(sw_tiled_evictable *te, te_projection *pj, unsigned char *into)
{
    unsigned char *bounce = NULL;
    if (!into && !(bounce = sw_malloc((size_t)pj->n * te->eb + 1))) {
        pj->status = sw_error_set(&pj->err, SW_ENOMEM, "TiledEvictable: out of memory for the "
                                  "projection");
        return;
    }
    pj->status = gather(te, pj->layout, pj->offset, &pj->sel, pj->notes, pj->flags,
                        pj->flags + te->geo.ntiles, pj->bound ? NULL : pj->dest,
                        bounce ? bounce : into, &pj->err);
    if (bounce && pj->status == SW_OK) {
        pj->status = sw_carrier_begin_owner_access(pj->dest, pj->token, &pj->err);
        if (pj->status == SW_OK) {
            pj->status = sw_te_write_destination(te, pj->dest, pj->n, bounce, &pj->err);
            sw_carrier_end_owner_access(pj->dest, pj->token, NULL);
        }
    }
    sw_free(bounce);
}

void sw_te_project_issue(sw_tiled_evictable *te, te_projection *pj)
{
    sw_error_clear(&pj->err);
    /* A binding's destination whose memory the core reaches (Generic) is
     * gathered into like a CPU one, a FileBacked one the core writes itself
     * straight into its file; any other goes through a bounce buffer and
     * the write hook. */
    unsigned char *into = pj->bound ? sw_te_destination_memory(te, pj->dest)
                                    : sw_cpu_pointer(pj->dest);
    int fd = pj->bound && !into ? sw_te_destination_file(te, pj->dest) : -1;
    if (fd >= 0)
        gather_into_file(te, pj, fd);
    else
        gather_into_memory(te, pj, into);
    int64_t n = pj->plan.n[SW_TE_PLAN_PROMOTE];
    if (pj->status != SW_OK || n == 0)
        return;
    /* The policy's promotion, all or none, on tiles this projection pinned
     * (nobody else can request them meanwhile): its copies are issued here;
     * sw_te_project_await waits for them and commits or drops it. */
    te_request *q = NULL;
    pj->status = sw_te_request_begin(te, pj->plan.idx[SW_TE_PLAN_PROMOTE], n, 0,
                                     "promote tiles of", 1, &pj->promote, &q, &pj->err);
    if (pj->status == SW_OK)
        sw_te_request_issue(te, q);
}

int sw_te_project_outstanding(te_projection *pj)
{
    return pj->promote.request && sw_te_request_outstanding(pj->promote.request);
}

void sw_te_project_await(sw_tiled_evictable *te, te_projection *pj, sw_status fail,
                         const sw_error *why)
{
    te_request *q = pj->promote.request;
    if (q) {
        sw_te_request_await(q);
        if (fail != SW_OK && q->status == SW_OK) {
            q->status = fail; /* dropped, never committed */
            if (why)
                q->err = *why;
            else
                sw_error_clear(&q->err);
        }
        pj->status = q->status;
        if (q->status != SW_OK)
            pj->err = q->err;
        sw_te_request_finish(te, q, &pj->promote, 0);
    } else if (fail != SW_OK && pj->status == SW_OK) {
        pj->status = fail;
        if (why)
            pj->err = *why;
        else
            sw_error_clear(&pj->err);
    }
}

void sw_te_project_gather(sw_tiled_evictable *te, te_projection *pj)
{
    sw_te_project_issue(te, pj);
    sw_te_project_await(te, pj, SW_OK, NULL);
}

void sw_te_project_fail(te_projection *pj, sw_status st)
{
    pj->status = st;
    sw_error_clear(&pj->err);
}

int64_t sw_te_project_take_evictions(te_projection *pj, int64_t **idx)
{
    int64_t n = pj->status == SW_OK ? pj->plan.n[SW_TE_PLAN_EVICT] : 0;
    *idx = n > 0 ? pj->plan.idx[SW_TE_PLAN_EVICT] : NULL;
    if (n > 0) {
        pj->plan.idx[SW_TE_PLAN_EVICT] = NULL;
        pj->plan.n[SW_TE_PLAN_EVICT] = 0;
    }
    return n;
}

sw_status sw_te_project_finish(sw_tiled_evictable *te, te_projection *pj, te_track *track,
                               int forked, sw_tensor **out, sw_error *err)
{
    if (forked && pj->promote.marked && pj->promote.request)
        sw_te_request_finish(te, pj->promote.request, &pj->promote, 1);
    pthread_mutex_lock(&te->lock);
    pin_locked(te, &pj->sel, -1);
    pin_extra_locked(te, pj, -1);
    if (track) {
        track->marked = 0;
        track->projection = NULL;
    }
    pthread_mutex_unlock(&te->lock);
    sw_status st = pj->status;
    if (st == SW_OK && !forked && pj->plan.n[SW_TE_PLAN_EVICT] > 0)
        (void)sw_te_evict_free_tiles(te, pj->plan.idx[SW_TE_PLAN_EVICT],
                                     pj->plan.n[SW_TE_PLAN_EVICT], NULL);
    if (st != SW_OK && err)
        *err = pj->err;
    if (forked) {
        st = sw_error_set(err, SW_ESTATE, "TiledEvictable: the process forked while this "
                          "projection ran in the parent; it did not complete here");
        if (err)
            err->detail = SW_TE_ENDED_BY_FORK;
    }
    if (pj->token)
        sw_carrier_relinquish(pj->dest, pj->token, NULL);
    if (st == SW_OK && out) { /* a binding's destination: the binding's tensor (NULL) */
        *out = pj->result;
        pj->result = NULL;
    }
    if (st != SW_OK && !pj->given)
        sw_carrier_release(pj->dest, NULL);
    projection_free(pj);
    return st;
}

sw_status sw_tiled_evictable_project(sw_tiled_evictable *te, const sw_layout *layout,
                                     int64_t offset, const sw_tile_selection *selection,
                                     sw_carrier *destination, sw_tensor **out, sw_error *err)
{
    if (!te || !selection || !out)
        return sw_error_set(err, SW_ETYPE, "TiledEvictable: the carrier, the selection and out "
                            "must not be NULL");
    te_track track;
    sw_te_track_enter(&track, te);
    te_projection *pj = NULL;
    sw_status st = sw_te_project_begin(te, layout, offset, selection, destination, &track, &pj,
                                       err);
    if (st == SW_OK) {
        sw_te_project_gather(te, pj);
        st = sw_te_project_finish(te, pj, &track, 0, out, err);
    }
    sw_te_track_leave(&track);
    return st;
}
