/* TiledEvictable (contract-carriers TE-1 .. TE-9, TE-12 .. TE-14): a
 * logical grid of equal tiles, each living in exactly one place: the
 * primary tier, the secondary tier, nowhere with an implicit zero value,
 * or nowhere at all (invalid).
 *
 * The carrier claims both tiers as allocation prototypes. A tier that was
 * full at construction keeps holding its tiles in place (`full` records,
 * indexed by the carrier's own slot); every tile that moves afterwards gets
 * a private tile-sized carrier from the target prototype's allocate_like,
 * indexed by within-tile position. Residency requests stage every copy in
 * fresh storage first and commit all records together with no Python code
 * in between, so a failure anywhere leaves every tile as it was (TE-7).
 * A tile in private storage is one span (tile_size):(1), so its copy runs
 * the tier classes' exact-pair movement (py_tile_transfer.c), which keeps
 * the source until the commit. A tile still held in place by a tier that
 * was full at construction is not one span of that tier (its footprint is
 * tile[0]-long runs strided over the logical shape, TE-2), and a move's
 * transfer covers a layout's whole cosize span, which would take in other
 * tiles' slots: those copies stay C loops over the tile's runs (memcpy for
 * host tiers, one pwritev or a pread per run between a host tier and
 * FileBacked, else the tiers' slot access). A BlockDeviceCarrier paired with anything but CPU
 * also keeps the slot loop (see sw_tiled_transfer_applies). Definition-
 * backed tiers copy through their TransferRoutes (py_tile_route.c); a
 * provider's incomplete completion keeps the request open until the waiter
 * threads see it finish (TE-8). Tiles taking part in a request are
 * `pending`, tiles a projection reads are `pinned`; both refuse writes and
 * new requests until the work is terminal. */
#include "sw_tiled.h"
#include "sw_extension.h"
#include "sw_move.h"
#include "sw_fork_guard.h"

#include <string.h>

#include "strideweave/filestore.h"

#define CARRIER(o) ((SwCarrierObject *)(o))

static PyObject *str_allocate_like, *str_new_like, *str_plan;

static const char *cname(PyObject *o)
{
    return _PyType_Name(Py_TYPE(o));
}

int sw_tiled_refuse_released(PyObject *self, const char *what)
{
    if (!sw_py_state_released(self))
        return 0;
    PyErr_Format(PyExc_RuntimeError, "cannot %s a released TiledEvictable", what);
    return -1;
}

const unsigned char *sw_tiled_host_base(PyObject *carrier)
{
    PyTypeObject *t = Py_TYPE(carrier);
    if ((t != &SwCPU_Type && t != &SwGeneric_Type) || sw_py_state_released(carrier))
        return NULL;
    return ((SwHostCarrierObject *)carrier)->data;
}

static size_t elem_bytes(PyObject *self)
{
    return sw_dtype_slot_bytes(SwDType_ID(TILED(self)->dtype));
}

/* ---- tile storage --------------------------------------------------------- */

/* Owner access to a claimed prototype around writes to its slots. */
static int begin_store(PyObject *self, PyObject *store)
{
    SwTiledEvictableObject *te = TILED(self);
    if (store == te->primary && te->primary_token)
        return sw_py_carrier_begin_owner(store, te->primary_token);
    if (store == te->secondary && te->secondary_token)
        return sw_py_carrier_begin_owner(store, te->secondary_token);
    return 0;
}

static void end_store(PyObject *self, PyObject *store)
{
    SwTiledEvictableObject *te = TILED(self);
    if (store == te->primary && te->primary_token)
        sw_py_carrier_end_owner(store, te->primary_token);
    else if (store == te->secondary && te->secondary_token)
        sw_py_carrier_end_owner(store, te->secondary_token);
}

static int64_t store_index(PyObject *self, int64_t t, int64_t w)
{
    sw_tile_rec *r = &TILED(self)->tiles[t];
    return r->full ? sw_tiles_slot(&TILED(self)->geo, t, w) : w;
}

PyObject *sw_tiled_new_tile_store(PyObject *self, PyObject *proto, int zero)
{
    SwTiledEvictableObject *te = TILED(self);
    PyObject *fn = PyObject_GetAttr(proto, str_allocate_like);
    PyObject *args = fn ? Py_BuildValue("(L)", (long long)te->geo.tile_size) : NULL;
    PyObject *kw = args ? Py_BuildValue("{s:O,s:O,s:O}", "mutable", Py_True, "dtype", te->dtype,
                                        "empty", zero ? Py_False : Py_True)
                        : NULL;
    PyObject *store = kw ? PyObject_Call(fn, args, kw) : NULL;
    Py_XDECREF(kw);
    Py_XDECREF(args);
    Py_XDECREF(fn);
    int64_t size = 0;
    if (store && (!SwCarrier_Check(store) || sw_py_carrier_size(store, &size) < 0 ||
                  size < te->geo.tile_size)) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_RuntimeError,
                         "%s.allocate_like did not return a carrier of %lld slots",
                         cname(proto), (long long)te->geo.tile_size);
        Py_CLEAR(store);
    }
    return store;
}

void sw_tiled_drop_store(PyObject *self, PyObject *store)
{
    if (store && !sw_py_state_released(store) && sw_py_carrier_release(store) < 0)
        PyErr_WriteUnraisable(self);
    Py_XDECREF(store);
}

/* Host to host: runs of tile[0] slots are contiguous on both sides. */
static void copy_host(PyObject *self, int64_t t, const unsigned char *src, unsigned char *dst)
{
    SwTiledEvictableObject *te = TILED(self);
    size_t eb = elem_bytes(self);
    int64_t run = te->geo.tile[0];
    for (int64_t w = 0; w < te->geo.tile_size; w += run)
        memcpy(dst + (size_t)w * eb, src + (size_t)store_index(self, t, w) * eb, (size_t)run * eb);
}

static int copy_tile(PyObject *self, int64_t t, PyObject *dst, PyObject **completion);

/* The live FileBacked descriptor of `c` when it stores `dtype`, else -1. */
static int file_fd(PyObject *c, sw_dtype dtype)
{
    if (Py_TYPE(c) != &SwFileBacked_Type || sw_py_state_released(c))
        return -1;
    SwFileBackedObject *f = (SwFileBackedObject *)c;
    return f->dtype == dtype ? f->fd : -1;
}

/* A tile held in place by a full host tier going to a FileBacked tile, or
 * held by a full FileBacked tier going to a host tile: its runs move as a
 * handful of system calls (one pwritev gathering every run, or one pread
 * per run) instead of one per slot. Slots are raw dtype values on both
 * sides, so the bytes move unchanged, as between host tiers. 1 when done,
 * 0 when the pair is not one of these, -1 with an exception. */
static int copy_runs_file(PyObject *self, int64_t t, PyObject *src, PyObject *dst)
{
    SwTiledEvictableObject *te = TILED(self);
    sw_dtype dtype = SwDType_ID(te->dtype);
    const unsigned char *sb = sw_tiled_host_base(src);
    unsigned char *db = (unsigned char *)sw_tiled_host_base(dst);
    int wfd = sb ? file_fd(dst, dtype) : -1;
    int rfd = db ? file_fd(src, dtype) : -1;
    if (wfd < 0 && rfd < 0)
        return 0;
    if (((SwHostCarrierObject *)(sb ? src : dst))->dtype != dtype)
        return 0;
    size_t eb = elem_bytes(self);
    int64_t most = te->geo.tile_size / te->geo.tile[0];
    sw_tile_run *runs = PyMem_Malloc((size_t)most * sizeof *runs);
    struct iovec *iov = runs && wfd >= 0 ? PyMem_Malloc((size_t)most * sizeof *iov) : NULL;
    if (!runs || (wfd >= 0 && !iov)) {
        PyMem_Free(runs);
        PyErr_NoMemory();
        return -1;
    }
    int64_t n = sw_tiles_runs(&te->geo, t, runs);
    sw_error err;
    sw_status st = SW_OK;
    if (wfd >= 0) {
        for (int64_t i = 0; i < n; i++)
            iov[i] = (struct iovec){.iov_base = (void *)(sb + (size_t)runs[i].slot * eb),
                                    .iov_len = (size_t)runs[i].count * eb};
        st = sw_filestore_pwritev(wfd, iov, n, 0, &err);
    } else {
        for (int64_t i = 0; i < n && st == SW_OK; i++)
            st = sw_filestore_pread(rfd, db + (size_t)runs[i].within * eb,
                                    (size_t)runs[i].count * eb,
                                    runs[i].slot * (int64_t)eb, &err);
    }
    PyMem_Free(iov);
    PyMem_Free(runs);
    return st == SW_OK ? 1 : sw_py_raise(&err);
}

/* Whether tile t's footprint is the contiguous run [*base, *base +
 * tile_size): every axis before the last one with a tile extent above 1
 * spans the whole logical extent (TE-2). Always so for one axis. */
static int tile_is_span(const sw_tile_geometry *g, int64_t t, int64_t *base)
{
    int32_t last = -1;
    for (int32_t k = 0; k < g->rank; k++)
        if (g->tile[k] > 1)
            last = k;
    for (int32_t k = 0; k < last; k++)
        if (g->tile[k] != g->logical[k])
            return 0;
    *base = sw_tiles_slot(g, t, 0);
    return 1;
}

int sw_tiled_span_base(PyObject *self, int64_t t, int64_t *base)
{
    return tile_is_span(&TILED(self)->geo, t, base);
}

/* One side is a carrier class written in Python; neither is definition-backed. */
static int python_pair(PyObject *src, PyObject *dst)
{
    int heap = (Py_TYPE(src)->tp_flags & Py_TPFLAGS_HEAPTYPE) ||
               (Py_TYPE(dst)->tp_flags & Py_TPFLAGS_HEAPTYPE);
    return heap && !SW_DEFINED(src) && !SW_DEFINED(dst);
}

/* B-11: a copy into block storage counts only once it is durable. The
 * exact-pair transfer is (inside the block device's transfer); slot copies
 * and zero-written fresh tiles are flushed here, before the commit. */
int sw_tiled_copy_tile(PyObject *self, int64_t t, PyObject *dst, PyObject **completion)
{
    int rc = copy_tile(self, t, dst, completion);
    if (rc == 0 && !*completion)
        rc = sw_py_block_device_make_durable(dst);
    return rc;
}

static int copy_tile(PyObject *self, int64_t t, PyObject *dst, PyObject **completion)
{
    SwTiledEvictableObject *te = TILED(self);
    *completion = NULL;
    PyObject *src = te->tiles[t].store;
    if (sw_fault_hit("tile_copy")) {
        PyErr_SetString(PyExc_OSError, "injected fault: tile copy failed");
        return -1;
    }
    if (!src)
        return 0; /* implicit zero: the fresh storage is already zeroed */
    if (!te->tiles[t].full && sw_tiled_transfer_applies(src, dst))
        return sw_tiled_transfer_tile(src, dst, te->geo.tile_size, completion);
    const unsigned char *sb = sw_tiled_host_base(src);
    unsigned char *db = (unsigned char *)sw_tiled_host_base(dst);
    if (sb && db) {
        copy_host(self, t, sb, db);
        return 0;
    }
    int runs = copy_runs_file(self, t, src, dst);
    if (runs != 0)
        return runs < 0 ? -1 : 0;
    /* A tier written in Python (TensorStoreCarrier: whole-chunk I/O) copies
     * an in-place tile whose footprint is one span through the pair's
     * movement rather than slot by slot. */
    int64_t base;
    if (te->tiles[t].full && tile_is_span(&te->geo, t, &base) && python_pair(src, dst) &&
        sw_tiled_transfer_applies(src, dst)) {
        int rc = sw_tiled_transfer_span(src, base, dst, te->geo.tile_size, completion);
        if (rc <= 0)
            return rc;
    }
    /* Reads of a claimed prototype need no owner access (C-13), so no
     * thread-bound access is held across the tiers' hooks. */
    Py_INCREF(src);
    int rc = 0;
    for (int64_t w = 0; rc == 0 && w < te->geo.tile_size; w++) {
        PyObject *v = sw_py_carrier_getitem(src, store_index(self, t, w));
        rc = v ? sw_py_carrier_setitem(dst, w, v) : -1;
        Py_XDECREF(v);
    }
    Py_DECREF(src);
    return rc;
}

/* Swap in the new record; the old private storage is returned to the
 * caller to release once every record is committed. */
static PyObject *swap_tile(PyObject *self, int64_t t, PyObject *store, int loc)
{
    sw_tile_rec *r = &TILED(self)->tiles[t];
    PyObject *old = r->full ? NULL : r->store;
    if (r->full)
        Py_XDECREF(r->store);
    r->store = store;
    r->full = 0;
    r->loc = (uint8_t)loc;
    r->dirty = 0;
    return old;
}

void sw_tiled_commit_tile(PyObject *self, int64_t t, PyObject *store, int loc)
{
    sw_tiled_drop_store(self, swap_tile(self, t, store, loc));
}

/* ---- residency requests (TE-7, TE-8) -------------------------------------------- */

/* A TileSet from a TileSet or a TileSelection argument. */
static PyObject *tiles_argument(PyObject *tiles)
{
    if (PyObject_TypeCheck(tiles, &SwTileSet_Type))
        return Py_NewRef(tiles);
    if (PyObject_TypeCheck(tiles, &SwTileSelection_Type))
        return sw_tile_selection_tile_set(tiles);
    PyErr_Format(PyExc_TypeError, "tiles must be a TileSet or a TileSelection, not %.100s",
                 Py_TYPE(tiles)->tp_name);
    return NULL;
}

/* Linear tile indices of a bound TileSet (PyMem; *n entries). */
static int64_t *tile_indices(PyObject *self, PyObject *tile_set, int64_t *n)
{
    SwTileSetObject *s = (SwTileSetObject *)tile_set;
    int64_t *idx = PyMem_Malloc((size_t)(s->n + 1) * sizeof(int64_t));
    if (!idx) {
        PyErr_NoMemory();
        return NULL;
    }
    for (int64_t i = 0; i < s->n; i++)
        idx[i] = sw_tiles_tile_index(&TILED(self)->geo, s->coords + i * s->rank);
    *n = s->n;
    return idx;
}

static int refuse_busy_tile(PyObject *self, int64_t t, const char *what)
{
    sw_tile_rec *r = &TILED(self)->tiles[t];
    if (!r->pending && !r->pins)
        return 0;
    int64_t c[SW_TILES_MAX_RANK];
    sw_tiles_tile_coord(&TILED(self)->geo, t, c);
    PyErr_Format(PyExc_RuntimeError,
                 "cannot %s tile %lld (first coordinate) while it is %s; wait() for that "
                 "work first", what, (long long)c[0],
                 r->pending ? "pending in a residency request" : "pinned by a projection");
    return -1;
}

/* One residency request in flight (TE-7, TE-8): the tiles it covers, the
 * fresh storage staged for each, and the provider completions it still
 * waits for. The set commits, or is dropped, once, when the last copy is
 * terminal: on the calling thread when every copy was synchronous, else on
 * the waiter thread that saw the last completion (GIL held there). */
typedef struct residency residency;

typedef struct tile_wait {
    sw_provider_wait w;   /* first: what the waiter threads see */
    residency *req;
    PyObject *src;        /* the copy's source, pending until terminal */
} tile_wait;

struct residency {
    PyObject *self;
    PyObject *handle;     /* the AwaitResidency, or NULL for a synchronous caller */
    int evict;
    int64_t n, *idx;
    PyObject **staged;    /* fresh storage per tile, or NULL */
    tile_wait *waits;     /* per tile; w.completion set when a provider still works */
    int64_t outstanding;  /* completions not yet terminal (GIL-protected) */
    PyObject *error;      /* the first failure */
    residency *live_prev, *live_next; /* deferred to the waiter threads */
    int deferred;
    sw_fork_guard guard;  /* a synchronous request, until it finishes */
    int guarded;
};

/* Requests handed to the waiter threads and not yet finished, so that a
 * forked child can end the ones it inherited (GIL-protected). */
static residency *deferred_head;

static void defer_track(residency *q)
{
    q->deferred = 1;
    q->live_prev = NULL;
    q->live_next = deferred_head;
    if (deferred_head)
        deferred_head->live_prev = q;
    deferred_head = q;
}

static void defer_untrack(residency *q)
{
    if (!q->deferred)
        return;
    if (q->live_prev)
        q->live_prev->live_next = q->live_next;
    else if (deferred_head == q)
        deferred_head = q->live_next;
    if (q->live_next)
        q->live_next->live_prev = q->live_prev;
    q->deferred = 0;
}

static void residency_free(residency *q)
{
    for (int64_t i = 0; i < q->n; i++) {
        Py_XDECREF(q->waits[i].w.completion);
        Py_XDECREF(q->waits[i].w.error);
        Py_XDECREF(q->waits[i].src);
    }
    Py_XDECREF(q->error);
    Py_XDECREF(q->handle);
    Py_DECREF(q->self);
    PyMem_RawFree(q->waits);
    PyMem_RawFree(q->staged);
    PyMem_RawFree(q->idx);
    PyMem_RawFree(q);
}

static residency *residency_new(PyObject *self, const int64_t *idx, int64_t n, int evict,
                                PyObject *handle)
{
    residency *q = PyMem_RawCalloc(1, sizeof *q);
    if (q) {
        q->idx = PyMem_RawMalloc((size_t)(n + 1) * sizeof(int64_t));
        q->staged = PyMem_RawCalloc((size_t)n + 1, sizeof(PyObject *));
        q->waits = PyMem_RawCalloc((size_t)n + 1, sizeof(tile_wait));
    }
    if (!q || !q->idx || !q->staged || !q->waits) {
        if (q) {
            PyMem_RawFree(q->idx);
            PyMem_RawFree(q->staged);
            PyMem_RawFree(q->waits);
            PyMem_RawFree(q);
        }
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(q->idx, idx, (size_t)n * sizeof(int64_t));
    q->n = n;
    q->evict = evict;
    q->self = Py_NewRef(self);
    q->handle = Py_XNewRef(handle);
    return q;
}

static void residency_fail(residency *q, PyObject *exc)
{
    if (!q->error)
        q->error = exc;
    else
        Py_XDECREF(exc);
}

static int tile_needs_copy(residency *q, const sw_tile_rec *r)
{
    return q->evict ? r->loc == SW_TILE_PRIMARY
                    : (r->loc == SW_TILE_SECONDARY || r->loc == SW_TILE_IMPLICIT);
}

/* X-14 up front for definition-backed tiers: a pair with neither a route
 * nor the fallback both providers allow fails the request before any
 * storage is allocated or any provider is called. The pair is (the tile's
 * storage class, the target prototype's class), which the fresh storage
 * shares; the copy resolves again on the real pair. */
static int residency_check_routes(residency *q)
{
    SwTiledEvictableObject *te = TILED(q->self);
    PyObject *target = q->evict ? te->secondary : te->primary;
    for (int64_t i = 0; i < q->n; i++) {
        sw_tile_rec *r = &te->tiles[q->idx[i]];
        if (!tile_needs_copy(q, r) || !r->store || r->full ||
            !(SW_DEFINED(r->store) || SW_DEFINED(target)))
            continue;
        sw_route route;
        if (sw_py_route_resolve(Py_TYPE(r->store), Py_TYPE(target), &route) < 0)
            return -1;
    }
    return 0;
}

/* The bytes of one tile, for the handle's progress. */
static int64_t tile_bytes(residency *q)
{
    SwTiledEvictableObject *te = TILED(q->self);
    return te->geo.tile_size * (int64_t)sw_dtype_slot_bytes(SwDType_ID(te->dtype));
}

/* Mark every listed tile pending, then stage the copies of the ones
 * needing work; stops at the first failure (kept in q->error). Progress
 * counts whole tiles as their copies finish. */
static void residency_stage(residency *q)
{
    SwTiledEvictableObject *te = TILED(q->self);
    int64_t copies = 0;
    for (int64_t i = 0; i < q->n; i++) {
        te->tiles[q->idx[i]].pending++;
        copies += tile_needs_copy(q, &te->tiles[q->idx[i]]);
    }
    if (q->handle)
        sw_py_await_set_total(q->handle, copies * tile_bytes(q));
    te->busy++;
    if (residency_check_routes(q) < 0)
        residency_fail(q, sw_py_take_exception());
    for (int64_t i = 0; !q->error && i < q->n; i++) {
        sw_tile_rec *r = &te->tiles[q->idx[i]];
        if (!tile_needs_copy(q, r))
            continue;
        PyObject *src = r->store, *completion = NULL;
        q->staged[i] = sw_tiled_new_tile_store(q->self, q->evict ? te->secondary : te->primary,
                                               r->loc == SW_TILE_IMPLICIT);
        if (!q->staged[i] || sw_tiled_copy_tile(q->self, q->idx[i], q->staged[i],
                                                &completion) < 0) {
            residency_fail(q, sw_py_take_exception());
        } else if (completion) {
            q->waits[i].w.completion = completion;
            q->waits[i].src = Py_NewRef(src);
            q->waits[i].req = q;
            q->outstanding++;
        } else if (q->handle) {
            sw_py_await_add_done(q->handle, tile_bytes(q));
        }
    }
}

/* The one terminal step: drop the pending marks of provider copies, check
 * their fresh storage, then commit the whole set or release every fresh
 * copy. Completes the handle; frees q. Returns 0 / -1 (with the failure
 * raised) for a synchronous caller. */
static int residency_finish(residency *q)
{
    SwTiledEvictableObject *te = TILED(q->self);
    defer_untrack(q);
    if (q->guarded) {
        sw_fork_guard_leave(&q->guard);
        q->guarded = 0;
    }
    for (int64_t i = 0; i < q->n; i++) {
        if (!q->waits[i].src)
            continue;
        sw_tiled_route_unmark(q->waits[i].src, q->staged[i]);
        if (!q->error && sw_tiled_check_fresh(q->staged[i], te->geo.tile_size) < 0)
            residency_fail(q, sw_py_take_exception());
    }
    /* tiles may have been released by re-entrant code only through
     * release(), which busy refuses; the records are still ours. */
    for (int64_t i = 0; i < q->n; i++)
        te->tiles[q->idx[i]].pending--;
    te->busy--;
    if (!q->error)
        for (int64_t i = 0; i < q->n; i++)
            if (q->staged[i])
                q->staged[i] = swap_tile(q->self, q->idx[i], q->staged[i],
                                         q->evict ? SW_TILE_SECONDARY : SW_TILE_PRIMARY);
    for (int64_t i = 0; i < q->n; i++) {
        sw_tiled_drop_store(q->self, q->staged[i]);
        q->staged[i] = NULL;
    }
    int rc = q->error ? -1 : 0;
    if (q->handle)
        sw_py_await_complete(q->handle, q->error ? NULL : Py_None, q->error);
    else if (q->error)
        sw_py_restore_exception(Py_NewRef(q->error));
    residency_free(q);
    return rc;
}

/* Wait for one completion on this thread. */
static void wait_here(residency *q, int64_t i)
{
    if (sw_tiled_route_wait(q->waits[i].w.completion) < 0)
        residency_fail(q, sw_py_take_exception());
    q->outstanding--;
}

/* On a waiter thread, GIL held, once a provider's wait() returned (TE-8):
 * the last one commits the set. */
static void tile_finished(sw_provider_wait *w)
{
    residency *q = ((tile_wait *)w)->req;
    if (w->error)
        residency_fail(q, Py_NewRef(w->error));
    else if (q->handle)
        sw_py_await_add_done(q->handle, tile_bytes(q));
    if (--q->outstanding > 0)
        return;
    residency_finish(q);
    if (PyErr_Occurred())
        PyErr_WriteUnraisable(NULL);
    sw_py_move_drop_inflight();
}

/* Hand every completion to the waiter threads; the exit hook counts the
 * request in flight. When no thread can take them, wait here. */
static void residency_defer(residency *q)
{
    if (sw_py_move_hold_inflight() < 0) {
        residency_fail(q, sw_py_take_exception());
        for (int64_t i = 0; i < q->n; i++)
            if (q->waits[i].w.completion)
                wait_here(q, i);
        residency_finish(q);
        PyErr_Clear();
        return;
    }
    defer_track(q);
    /* A waiter may finish (and free q) before this loop ends: count the
     * entries first, and touch only those not yet handed over. */
    int64_t n = q->n, left = q->outstanding;
    tile_wait *waits = q->waits;
    for (int64_t i = 0; i < n && left > 0; i++) {
        if (!waits[i].w.completion)
            continue;
        left--;
        waits[i].w.finish = tile_finished;
        if (sw_py_provider_wait_submit(&waits[i].w) == 0)
            continue;
        residency_fail(q, sw_py_take_exception());
        if (sw_tiled_route_wait(waits[i].w.completion) < 0)
            PyErr_Clear();
        tile_finished(&waits[i].w);
    }
}

/* A synchronous request another thread was running when the process
 * forked (the child, GIL held): a tile copy it had started never returns
 * here, so its marks and access are dropped; then the request fails like
 * an inherited one: fresh copies dropped, tiles where they were and no
 * longer pending. */
static void residency_forked(sw_fork_guard *g)
{
    residency *q = (residency *)((char *)g - offsetof(residency, guard));
    SwTiledEvictableObject *te = TILED(q->self);
    q->guarded = 0;
    for (int64_t i = 0; i < q->n; i++) {
        sw_tile_rec *r = &te->tiles[q->idx[i]];
        if (q->waits[i].src || !q->staged[i])
            continue; /* provider copies: residency_finish unmarks them */
        if (r->store && !r->full)
            sw_py_state_unmark_pending(r->store, SW_PENDING_SOURCE);
        sw_py_state_unmark_pending(q->staged[i], SW_PENDING_DESTINATION);
        sw_fork_guard_drop_access(r->store, g->thread);
        sw_fork_guard_drop_access(q->staged[i], g->thread);
    }
    residency_fail(q, sw_py_move_forked_error("tile transfer"));
    residency_finish(q);
    PyErr_Clear(); /* the failure went nowhere: no caller survives here */
}

/* Stage and commit the moves of tiles idx[0..n) (the ones needing work),
 * all or nothing, on this thread: provider completions are waited for
 * here. Marks every listed tile pending meanwhile. */
static int run_residency(PyObject *self, const int64_t *idx, int64_t n, int evict)
{
    residency *q = residency_new(self, idx, n, evict, NULL);
    if (!q)
        return -1;
    q->guarded = 1;
    sw_fork_guard_enter(&q->guard, residency_forked);
    residency_stage(q);
    for (int64_t i = 0; i < q->n; i++)
        if (q->waits[i].w.completion)
            wait_here(q, i);
    return residency_finish(q);
}

/* Checks of TE-7, then the request. Returns the linear indices. */
static int64_t *check_request(PyObject *self, PyObject *tiles, int evict, int64_t *n)
{
    if (sw_tiled_refuse_released(self, evict ? "evict tiles of" : "promote tiles of") < 0)
        return NULL;
    PyObject *set = tiles_argument(tiles);
    if (!set)
        return NULL;
    int64_t *idx = NULL;
    if (sw_tile_set_bind(set, &TILED(self)->geo) == 0)
        idx = tile_indices(self, set, n);
    Py_DECREF(set);
    for (int64_t i = 0; idx && i < *n; i++) {
        sw_tile_rec *r = &TILED(self)->tiles[idx[i]];
        if (refuse_busy_tile(self, idx[i], evict ? "evict" : "promote") < 0 ||
            (!evict && r->loc == SW_TILE_INVALID &&
             (PyErr_SetString(PyExc_RuntimeError,
                              "cannot promote an invalid tile: it holds no values"),
              1))) {
            PyMem_Free(idx);
            idx = NULL;
        }
    }
    return idx;
}

static PyObject *residency_async(PyObject *self, PyObject *tiles, int evict)
{
    int64_t n = 0;
    /* The handle first: allocating it may run a collection (finalizers,
     * user code), which must not fall between the checks and the marks. */
    PyObject *handle = sw_py_await_new(&SwAwaitResidency_Type);
    int64_t *idx = handle ? check_request(self, tiles, evict, &n) : NULL;
    if (!idx) {
        Py_XDECREF(handle);
        return NULL;
    }
    /* Synchronous copies finish before the handle is returned (TE-8
     * allows it); provider completions leave it incomplete until the last
     * one commits the set. The failure is the handle's, not the call's. */
    residency *q = residency_new(self, idx, n, evict, handle);
    if (!q) {
        PyObject *exc = sw_py_take_exception();
        sw_py_await_complete(handle, NULL, exc);
        Py_XDECREF(exc);
    } else {
        /* Staging runs tier hooks and providers, which may let another
         * thread fork: guard it like a synchronous request. */
        q->guarded = 1;
        sw_fork_guard_enter(&q->guard, residency_forked);
        residency_stage(q);
        sw_fork_guard_leave(&q->guard);
        q->guarded = 0;
        if (q->outstanding)
            residency_defer(q);
        else
            residency_finish(q);
    }
    PyMem_Free(idx);
    return handle;
}

static PyObject *te_promote_async(PyObject *self, PyObject *tiles)
{
    return residency_async(self, tiles, 0);
}

static PyObject *te_evict_async(PyObject *self, PyObject *tiles)
{
    return residency_async(self, tiles, 1);
}

static PyObject *blocking(PyObject *handle)
{
    PyObject *r = handle ? sw_py_await_wait(handle) : NULL;
    Py_XDECREF(handle);
    return r;
}

static PyObject *te_promote(PyObject *self, PyObject *tiles)
{
    return blocking(residency_async(self, tiles, 0));
}

static PyObject *te_evict(PyObject *self, PyObject *tiles)
{
    return blocking(residency_async(self, tiles, 1));
}

int sw_tiled_promote_indices(PyObject *self, const int64_t *idx, int64_t n)
{
    return run_residency(self, idx, n, 0);
}

int sw_tiled_evict_set(PyObject *self, PyObject *tile_set)
{
    int64_t n = 0, m = 0;
    int64_t *idx = tile_indices(self, tile_set, &n);
    if (!idx)
        return -1;
    for (int64_t i = 0; i < n; i++) {
        sw_tile_rec *r = &TILED(self)->tiles[idx[i]];
        if (!r->pending && !r->pins)
            idx[m++] = idx[i];
    }
    int rc = run_residency(self, idx, m, 1);
    PyMem_Free(idx);
    return rc;
}

/* ---- slot access (TE-9) ------------------------------------------------------------ */

static int refuse_invalid(PyObject *self, int64_t t)
{
    if (TILED(self)->tiles[t].loc != SW_TILE_INVALID)
        return 0;
    int64_t c[SW_TILES_MAX_RANK];
    sw_tiles_tile_coord(&TILED(self)->geo, t, c);
    PyErr_Format(PyExc_RuntimeError,
                 "the tile holding this slot (first coordinate %lld) is invalid: it holds no "
                 "values until the slots are written through a factory", (long long)c[0]);
    return -1;
}

static PyObject *zero_value(PyObject *self)
{
    unsigned char zero[8] = {0};
    return sw_py_load_slot(SwDType_ID(TILED(self)->dtype), zero);
}

static PyObject *te_load(PyObject *self, int64_t index)
{
    int64_t t, w;
    sw_tiles_locate(&TILED(self)->geo, index, &t, &w);
    sw_tile_rec *r = &TILED(self)->tiles[t];
    if (refuse_invalid(self, t) < 0)
        return NULL;
    if (r->loc == SW_TILE_IMPLICIT)
        return zero_value(self);
    PyObject *store = Py_NewRef(r->store);
    int64_t at = store_index(self, t, w);
    PyObject *v = sw_py_carrier_getitem(store, at); /* reads need no owner access */
    Py_DECREF(store);
    return v;
}

/* Write into tile t's primary storage. */
static int write_primary(PyObject *self, int64_t t, int64_t w, PyObject *v)
{
    sw_tile_rec *r = &TILED(self)->tiles[t];
    PyObject *store = Py_NewRef(r->store);
    int rc = begin_store(self, store);
    if (rc == 0) {
        rc = sw_py_carrier_setitem(store, store_index(self, t, w), v);
        end_store(self, store);
    }
    Py_DECREF(store);
    if (rc == 0)
        TILED(self)->tiles[t].dirty = 1;
    return rc;
}

static int te_store(PyObject *self, int64_t index, const void *slot)
{
    SwTiledEvictableObject *te = TILED(self);
    int64_t t, w;
    sw_tiles_locate(&te->geo, index, &t, &w);
    sw_tile_rec *r = &te->tiles[t];
    if (refuse_busy_tile(self, t, "write to") < 0 || refuse_invalid(self, t) < 0)
        return -1;
    size_t eb = elem_bytes(self);
    static const unsigned char zero[8] = {0};
    if (r->loc == SW_TILE_IMPLICIT && memcmp(slot, zero, eb) == 0)
        return 0; /* the constant already reads this value */
    PyObject *v = sw_py_load_slot(SwDType_ID(te->dtype), slot);
    if (!v)
        return -1;
    int rc = 0;
    if (r->loc != SW_TILE_PRIMARY)
        rc = run_residency(self, &t, 1, 0); /* promote or materialize this tile */
    /* Promotion ran tier hooks (user code): re-check the tile. */
    if (rc == 0)
        rc = refuse_busy_tile(self, t, "write to");
    if (rc == 0 && te->tiles[t].loc != SW_TILE_PRIMARY) {
        PyErr_SetString(PyExc_RuntimeError, "the tile changed while it was being promoted");
        rc = -1;
    }
    if (rc == 0)
        rc = write_primary(self, t, w, v);
    Py_DECREF(v);
    return rc;
}

/* ---- carrier ops ---------------------------------------------------------------------- */

static sw_dtype te_dtype(PyObject *self)
{
    return SwDType_ID(TILED(self)->dtype);
}

static int64_t te_size(PyObject *self)
{
    return sw_py_state_released(self) ? 0 : TILED(self)->geo.size;
}

static int te_supports(sw_dtype dtype)
{
    (void)dtype;
    return 0; /* unused: supports_self answers */
}

static int te_supports_self(PyObject *self, sw_dtype dtype)
{
    PyObject *d = sw_py_dtype(dtype);
    int a = sw_py_carrier_supports_dtype(TILED(self)->primary, d);
    return a <= 0 ? a : sw_py_carrier_supports_dtype(TILED(self)->secondary, d);
}

/* TE-14: every private tile carrier, then both prototypes. */
static void te_drop(PyObject *self)
{
    SwTiledEvictableObject *te = TILED(self);
    for (int64_t t = 0; te->tiles && t < te->geo.ntiles; t++) {
        sw_tile_rec *r = &te->tiles[t];
        PyObject *old = r->store;
        int full = r->full;
        r->store = NULL;
        r->full = 0;
        r->loc = SW_TILE_INVALID;
        if (full)
            Py_XDECREF(old);
        else
            sw_tiled_drop_store(self, old);
    }
    if (sw_py_carrier_release_claimed(te->primary, &te->primary_token) < 0)
        PyErr_WriteUnraisable(self);
    if (sw_py_carrier_release_claimed(te->secondary, &te->secondary_token) < 0)
        PyErr_WriteUnraisable(self);
}

const sw_carrier_ops sw_tiled_evictable_ops = {
    .name = "TiledEvictable",
    .dtype = te_dtype,
    .size = te_size,
    .load = te_load,
    .store = te_store,
    .supports = te_supports,
    .drop = te_drop,
    .supports_self = te_supports_self,
};

/* ---- construction (TE-1) ---------------------------------------------------------------- */

static int check_tier_kind(PyObject *tier, const char *role)
{
    if (!SwCarrier_Check(tier) || PyObject_TypeCheck(tier, &SwDependentCarrier_Type)) {
        PyErr_Format(PyExc_TypeError,
                     "%s must be a Carrier that is not itself composed of carriers "
                     "(Evictable, TiledEvictable), not %.100s", role, Py_TYPE(tier)->tp_name);
        return -1;
    }
    return 0;
}

/* Checks (1) to (4). */
static int check_tiers(PyObject *p, PyObject *s)
{
    if (check_tier_kind(p, "primary") < 0 || check_tier_kind(s, "secondary") < 0)
        return -1;
    return sw_py_check_tier_pair(p, s);
}

/* Check (6) for one shape argument. */
static int parse_shape(PyObject *obj, const char *what, int32_t *rank, int64_t *out)
{
    PyObject *it = PyObject_GetIter(obj);
    if (!it) {
        PyErr_Format(PyExc_TypeError, "%s must be an iterable of ints, not %.100s", what,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    Py_DECREF(it);
    PyObject *t = PySequence_Tuple(obj);
    if (!t)
        return -1;
    Py_ssize_t n = PyTuple_GET_SIZE(t);
    int rc = 0;
    for (Py_ssize_t k = 0; rc == 0 && k < n; k++)
        if (!PyLong_CheckExact(PyTuple_GET_ITEM(t, k))) {
            PyErr_Format(PyExc_TypeError, "%s entries must be exactly int, not %.100s", what,
                         Py_TYPE(PyTuple_GET_ITEM(t, k))->tp_name);
            rc = -1;
        }
    if (rc == 0 && (n == 0 || n > SW_TILES_MAX_RANK)) {
        PyErr_Format(PyExc_ValueError, "%s needs 1 to %d entries, not %zd", what,
                     SW_TILES_MAX_RANK, n);
        rc = -1;
    }
    for (Py_ssize_t k = 0; rc == 0 && k < n; k++) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(t, k), &overflow);
        if (overflow > 0) {
            PyErr_Format(PyExc_OverflowError, "%s entry is too large", what);
            rc = -1;
        } else if (overflow < 0 || v <= 0) {
            PyErr_Format(PyExc_ValueError, "%s entries must be positive", what);
            rc = -1;
        }
        out[k] = v;
    }
    *rank = (int32_t)n;
    Py_DECREF(t);
    return rc;
}

static int check_geometry(PyObject *grid, PyObject *tile, sw_tile_geometry *g)
{
    int32_t gr, tr;
    int64_t ge[SW_TILES_MAX_RANK], tl[SW_TILES_MAX_RANK];
    if (parse_shape(grid, "grid_shape", &gr, ge) < 0 ||
        parse_shape(tile, "tile_shape", &tr, tl) < 0)
        return -1;
    if (gr != tr) {
        PyErr_Format(PyExc_ValueError, "grid_shape has %d axes but tile_shape has %d", (int)gr,
                     (int)tr);
        return -1;
    }
    sw_error err;
    return sw_tiles_geometry_init(g, gr, ge, tl, &err) == SW_OK ? 0 : sw_py_raise(&err);
}

/* Check (7) for one tier: its size is 0 or the logical size; it can hold
 * the dtype. *full says which. */
static int check_tier_fit(PyObject *tier, const char *role, PyObject *dtype,
                          const sw_tile_geometry *g, int *full)
{
    int64_t size;
    if (sw_py_carrier_size(tier, &size) < 0)
        return -1;
    if (size != 0 && size != g->size) {
        PyErr_Format(PyExc_ValueError,
                     "the %s carrier has %lld slots; it must be empty (0) or hold the whole "
                     "logical size (%lld)", role, (long long)size, (long long)g->size);
        return -1;
    }
    int ok = sw_py_carrier_supports_dtype(tier, dtype);
    if (ok == 0)
        PyErr_Format(PyExc_TypeError, "the %s %s carrier does not support storage dtype %s",
                     role, cname(tier), sw_dtype_info_of(SwDType_ID(dtype))->name);
    *full = size == g->size;
    return ok > 0 ? 0 : -1;
}

static int check_policy(PyObject *policy)
{
    if (policy == Py_None)
        return 0;
    PyObject *plan = PyObject_GetAttr(policy, str_plan);
    int ok = plan && PyCallable_Check(plan);
    Py_XDECREF(plan);
    if (!ok) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError,
                     "residency_policy must be None or have a callable plan(required, "
                     "purpose); %.100s has none", Py_TYPE(policy)->tp_name);
        return -1;
    }
    return 0;
}

static int check_dtypes(PyObject *p, PyObject *s, PyObject **dtype)
{
    PyObject *pd = sw_py_carrier_dtype(p);
    PyObject *sd = pd ? sw_py_carrier_dtype(s) : NULL;
    int rc = -1;
    if (sd && pd != sd)
        PyErr_Format(PyExc_TypeError, "the tiers hold different dtypes (%s and %s)",
                     sw_dtype_info_of(SwDType_ID(pd))->name,
                     sw_dtype_info_of(SwDType_ID(sd))->name);
    else if (sd) {
        *dtype = Py_NewRef(pd);
        rc = 0;
    }
    Py_XDECREF(pd);
    Py_XDECREF(sd);
    return rc;
}

static int seed_tiles(SwTiledEvictableObject *te, int pfull, int sfull)
{
    te->tiles = PyMem_Calloc((size_t)te->geo.ntiles, sizeof(sw_tile_rec));
    if (!te->tiles) {
        PyErr_NoMemory();
        return -1;
    }
    PyObject *store = pfull ? te->primary : sfull ? te->secondary : NULL;
    int loc = pfull ? SW_TILE_PRIMARY : sfull ? SW_TILE_SECONDARY : SW_TILE_INVALID;
    for (int64_t t = 0; t < te->geo.ntiles; t++) {
        te->tiles[t].loc = (uint8_t)loc;
        te->tiles[t].store = Py_XNewRef(store);
        te->tiles[t].full = store != NULL;
    }
    return 0;
}

static PyObject *te_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"primary", "secondary", "grid_shape", "tile_shape",
                             "residency_policy", NULL};
    PyObject *p, *s, *grid, *tile, *policy = Py_None, *dtype = NULL;
    sw_tile_geometry g;
    int pfull = 0, sfull = 0;
    if (sw_carrier_check_exact(type, &SwTiledEvictable_Type) < 0 ||
        !PyArg_ParseTupleAndKeywords(args, kwds, "OOOO|$O:TiledEvictable", kwlist, &p, &s,
                                     &grid, &tile, &policy) ||
        check_tiers(p, s) < 0 || check_dtypes(p, s, &dtype) < 0)
        return NULL;
    if (check_geometry(grid, tile, &g) < 0 ||
        check_tier_fit(p, "primary", dtype, &g, &pfull) < 0 ||
        check_tier_fit(s, "secondary", dtype, &g, &sfull) < 0 || check_policy(policy) < 0) {
        Py_DECREF(dtype);
        return NULL;
    }
    int mutable_ = sw_py_carrier_is_mutable(p);
    /* The checks ran user hooks: repeat the state checks with no Python
     * code between them and the claims. */
    if (mutable_ < 0 || check_tiers(p, s) < 0) {
        Py_DECREF(dtype);
        return NULL;
    }
    PyObject *self = sw_carrier_alloc(type, mutable_);
    if (!self) {
        Py_DECREF(dtype);
        return NULL;
    }
    SwTiledEvictableObject *te = TILED(self);
    te->primary = Py_NewRef(p);
    te->secondary = Py_NewRef(s);
    te->dtype = dtype;
    te->policy = Py_NewRef(policy);
    te->geo = g;
    te->primary_token = sw_py_carrier_claim(p);
    te->secondary_token = te->primary_token > 0 ? sw_py_carrier_claim(s) : 0;
    if (te->primary_token <= 0 || te->secondary_token <= 0 || seed_tiles(te, pfull, sfull) < 0) {
        te->primary_token = te->primary_token > 0 ? te->primary_token : 0;
        te->secondary_token = te->secondary_token > 0 ? te->secondary_token : 0;
        Py_DECREF(self); /* clear relinquishes what was claimed */
        return NULL;
    }
    return self;
}

/* ---- introspection (TE-6, TE-12) ------------------------------------------------------ */

static PyObject *shape_tuple(const int64_t *v, int32_t n)
{
    PyObject *t = PyTuple_New(n);
    for (int32_t k = 0; t && k < n; k++) {
        PyObject *x = PyLong_FromLongLong(v[k]);
        if (!x) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, k, x);
    }
    return t;
}

static PyObject *te_grid_shape(PyObject *self, void *c)
{
    (void)c;
    return shape_tuple(TILED(self)->geo.grid, TILED(self)->geo.rank);
}

static PyObject *te_tile_shape(PyObject *self, void *c)
{
    (void)c;
    return shape_tuple(TILED(self)->geo.tile, TILED(self)->geo.rank);
}

static PyObject *te_logical_shape(PyObject *self, void *c)
{
    (void)c;
    return shape_tuple(TILED(self)->geo.logical, TILED(self)->geo.rank);
}

static PyObject *te_primary(PyObject *self, void *c)
{
    (void)c;
    return Py_NewRef(TILED(self)->primary);
}

static PyObject *te_secondary(PyObject *self, void *c)
{
    (void)c;
    return Py_NewRef(TILED(self)->secondary);
}

static PyObject *te_policy(PyObject *self, void *c)
{
    (void)c;
    return Py_NewRef(TILED(self)->policy);
}

/* Tiles whose record passes `keep` as a TileSet. */
/* Which tiles a TileSet property keeps; its getset closure is one of these. */
enum tile_filter { KEEP_PRIMARY, KEEP_SECONDARY, KEEP_VALID, KEEP_DIRTY };

static int keeps(const sw_tile_rec *r, enum tile_filter f)
{
    switch (f) {
    case KEEP_PRIMARY: return r->loc == SW_TILE_PRIMARY;
    case KEEP_SECONDARY: return r->loc == SW_TILE_SECONDARY;
    case KEEP_VALID: return r->loc != SW_TILE_INVALID;
    case KEEP_DIRTY: return r->loc == SW_TILE_PRIMARY && r->dirty;
    }
    return 0;
}

/* primary_tiles, secondary_tiles, valid_tiles, dirty_tiles (TE-6). */
static PyObject *te_tiles_where(PyObject *self, void *closure)
{
    enum tile_filter f = (enum tile_filter)(intptr_t)closure;
    SwTiledEvictableObject *te = TILED(self);
    if (sw_tiled_refuse_released(self, "inspect the tiles of") < 0)
        return NULL;
    int32_t rank = te->geo.rank;
    int64_t *rows = PyMem_Malloc((size_t)(te->geo.ntiles * rank) * sizeof(int64_t)), n = 0;
    if (!rows)
        return PyErr_NoMemory();
    for (int64_t t = 0; t < te->geo.ntiles; t++)
        if (keeps(&te->tiles[t], f))
            sw_tiles_tile_coord(&te->geo, t, rows + rank * n++);
    /* linear order first-axis-fastest is the reversed-tuple order */
    PyObject *r = sw_tile_set_new(rank, n, rows);
    PyMem_Free(rows);
    return r;
}

static PyObject *te_tile_state(PyObject *self, PyObject *coord)
{
    static const char *names[] = {"primary", "secondary", "implicit", "invalid"};
    SwTiledEvictableObject *te = TILED(self);
    if (sw_tiled_refuse_released(self, "inspect the tiles of") < 0)
        return NULL;
    PyObject *row = PyTuple_Pack(1, coord);
    PyObject *set = row ? PyObject_CallOneArg((PyObject *)&SwTileSet_Type, row) : NULL;
    Py_XDECREF(row);
    if (!set || sw_tile_set_bind(set, &te->geo) < 0) {
        Py_XDECREF(set);
        return NULL;
    }
    int64_t t = sw_tiles_tile_index(&te->geo, ((SwTileSetObject *)set)->coords);
    Py_DECREF(set);
    sw_tile_rec *r = &te->tiles[t];
    PyObject *cls = sw_py_types_attr("TileState");
    PyObject *st = cls ? PyObject_CallFunction(cls, "sOO", names[r->loc],
                                               keeps(r, KEEP_VALID) ? Py_True : Py_False,
                                               keeps(r, KEEP_DIRTY) ? Py_True : Py_False)
                       : NULL;
    Py_XDECREF(cls);
    return st;
}

int sw_tiled_tile_counts(PyObject *self, int64_t counts[4], int64_t *pending)
{
    SwTiledEvictableObject *te = TILED(self);
    if (!te->tiles)
        return -1;
    int64_t moving = 0;
    counts[0] = counts[1] = counts[2] = counts[3] = 0;
    for (int64_t t = 0; t < te->geo.ntiles; t++) {
        counts[te->tiles[t].loc < 4 ? te->tiles[t].loc : SW_TILE_INVALID]++;
        moving += te->tiles[t].pending > 0;
    }
    if (pending)
        *pending = moving;
    return 0;
}

/* ---- release, factories (TE-13, TE-14) ----------------------------------------------- */

static PyObject *te_release(PyObject *self, PyObject *unused)
{
    (void)unused;
    if (TILED(self)->busy && !sw_py_state_released(self)) {
        PyErr_SetString(PyExc_RuntimeError,
                        "cannot release a TiledEvictable while projection or residency work on "
                        "it is pending; wait() for it first");
        return NULL;
    }
    return sw_py_carrier_release(self) < 0 ? NULL : Py_NewRef(Py_None);
}

static PyObject *call_factory(PyObject *tier, PyObject *name, PyObject *first,
                              PyObject *mutable_, PyObject *dtype, PyObject *empty)
{
    PyObject *fn = PyObject_GetAttr(tier, name);
    PyObject *args = fn ? PyTuple_Pack(1, first) : NULL;
    PyObject *kw = args ? Py_BuildValue("{s:O,s:O}", "mutable", mutable_, "dtype", dtype) : NULL;
    if (kw && empty && PyDict_SetItemString(kw, "empty", empty) < 0)
        Py_CLEAR(kw);
    PyObject *r = kw ? PyObject_Call(fn, args, kw) : NULL;
    Py_XDECREF(kw);
    Py_XDECREF(args);
    Py_XDECREF(fn);
    return r;
}

/* A TiledEvictable of this geometry and policy over p and s (stolen);
 * both are released when it cannot be built. */
static PyObject *wrap_fresh(PyObject *self, PyObject *p, PyObject *s)
{
    SwTiledEvictableObject *te = TILED(self);
    PyObject *made = NULL;
    if (p && s) {
        PyObject *grid = te_grid_shape(self, NULL), *tile = te_tile_shape(self, NULL);
        PyObject *args = grid && tile ? PyTuple_Pack(4, p, s, grid, tile) : NULL;
        PyObject *kw = args ? Py_BuildValue("{s:O}", "residency_policy", te->policy) : NULL;
        made = kw ? PyObject_Call((PyObject *)&SwTiledEvictable_Type, args, kw) : NULL;
        Py_XDECREF(kw);
        Py_XDECREF(args);
        Py_XDECREF(grid);
        Py_XDECREF(tile);
    }
    if (!made) {
        PyObject *exc = sw_py_take_exception();
        if (p && sw_py_carrier_release(p) < 0)
            PyErr_Clear();
        if (s && sw_py_carrier_release(s) < 0)
            PyErr_Clear();
        sw_py_restore_exception(exc);
    }
    Py_XDECREF(p);
    Py_XDECREF(s);
    return made;
}

/* Whether every slot of tile t (in the full primary) reads as zero. */
static int tile_is_zero(PyObject *made, int64_t t)
{
    SwTiledEvictableObject *te = TILED(made);
    PyObject *store = te->tiles[t].store;
    const unsigned char *base = sw_tiled_host_base(store);
    size_t eb = elem_bytes(made);
    static const unsigned char zero[8] = {0};
    for (int64_t w = 0; w < te->geo.tile_size; w++) {
        int64_t at = store_index(made, t, w);
        if (base) {
            if (memcmp(base + (size_t)at * eb, zero, eb) != 0)
                return 0;
            continue;
        }
        PyObject *v = sw_py_carrier_getitem(store, at);
        int nz = v ? PyObject_IsTrue(v) : -1;
        Py_XDECREF(v);
        if (nz != 0)
            return nz < 0 ? -1 : 0;
    }
    return 1;
}

/* TE-13: a fresh hierarchy over the primary `p` (stolen; NULL passes an
 * error through) and an empty secondary from this one's prototype; `p` is
 * released when the secondary cannot be made. */
static PyObject *with_empty_secondary(PyObject *self, PyObject *p, PyObject *dtype)
{
    if (!p)
        return NULL;
    PyObject *zero = PyLong_FromLong(0);
    PyObject *s = zero ? call_factory(TILED(self)->secondary, str_allocate_like, zero, Py_True,
                                      dtype, Py_True)
                       : NULL;
    Py_XDECREF(zero);
    if (!s) {
        PyObject *exc = sw_py_take_exception();
        if (sw_py_carrier_release(p) < 0)
            PyErr_Clear();
        sw_py_restore_exception(exc);
        Py_DECREF(p);
        return NULL;
    }
    return wrap_fresh(self, p, s);
}

static PyObject *te_new_like(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"values", "mutable", "dtype", NULL};
    PyObject *values, *mutable_ = Py_True, *dtype = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$OO:new_like", kwlist, &values, &mutable_,
                                     &dtype))
        return NULL;
    PyObject *vals = sw_carrier_iter(values, "values");
    PyObject *tup = vals ? PySequence_Tuple(vals) : NULL;
    Py_XDECREF(vals);
    if (!tup)
        return NULL;
    if (PyTuple_GET_SIZE(tup) != TILED(self)->geo.size) {
        PyErr_Format(PyExc_ValueError, "new_like needs exactly %lld values (the logical size), "
                     "not %zd", (long long)TILED(self)->geo.size, PyTuple_GET_SIZE(tup));
        Py_DECREF(tup);
        return NULL;
    }
    PyObject *p = call_factory(TILED(self)->primary, str_new_like, tup, mutable_, dtype, NULL);
    Py_DECREF(tup);
    PyObject *made = with_empty_secondary(self, p, dtype);
    for (int64_t t = 0; made && t < TILED(made)->geo.ntiles; t++) {
        int z = tile_is_zero(made, t);
        if (z < 0)
            Py_CLEAR(made);
        else if (z)
            sw_tiled_commit_tile(made, t, NULL, SW_TILE_IMPLICIT);
    }
    return made;
}

static PyObject *te_allocate_like(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"size", "mutable", "dtype", "empty", NULL};
    PyObject *size, *mutable_ = Py_True, *dtype = Py_None, *empty = Py_False;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$OOO:allocate_like", kwlist, &size,
                                     &mutable_, &dtype, &empty))
        return NULL;
    if (!PyLong_CheckExact(size)) {
        PyErr_Format(PyExc_TypeError, "size must be exactly int, not %.100s",
                     Py_TYPE(size)->tp_name);
        return NULL;
    }
    int overflow = 0;
    long long n = PyLong_AsLongLongAndOverflow(size, &overflow);
    if (overflow || n != TILED(self)->geo.size) {
        PyErr_Format(PyExc_ValueError, "allocate_like needs size %lld (the logical size), not %R",
                     (long long)TILED(self)->geo.size, size);
        return NULL;
    }
    int e = sw_carrier_truth(empty, 0);
    if (e < 0)
        return NULL;
    PyObject *zero = PyLong_FromLong(0);
    PyObject *p = zero ? call_factory(TILED(self)->primary, str_allocate_like, zero, mutable_,
                                      dtype, Py_True)
                       : NULL;
    Py_XDECREF(zero);
    PyObject *made = with_empty_secondary(self, p, dtype);
    for (int64_t t = 0; made && !e && t < TILED(made)->geo.ntiles; t++)
        TILED(made)->tiles[t].loc = SW_TILE_IMPLICIT;
    return made;
}

/* ---- lifetime ------------------------------------------------------------------------------ */

static int te_traverse(PyObject *self, visitproc visit, void *arg)
{
    SwTiledEvictableObject *te = TILED(self);
    Py_VISIT(te->primary);
    Py_VISIT(te->secondary);
    Py_VISIT(te->policy);
    for (int64_t t = 0; te->tiles && t < te->geo.ntiles; t++)
        Py_VISIT(te->tiles[t].store);
    return 0;
}

/* TE-14: collection only relinquishes the tiers; private tile carriers
 * are dropped with their last reference. */
static int te_clear(PyObject *self)
{
    SwTiledEvictableObject *te = TILED(self);
    if (te->primary)
        sw_py_carrier_relinquish(te->primary, te->primary_token);
    if (te->secondary)
        sw_py_carrier_relinquish(te->secondary, te->secondary_token);
    te->primary_token = te->secondary_token = 0;
    for (int64_t t = 0; te->tiles && t < te->geo.ntiles; t++)
        Py_CLEAR(te->tiles[t].store);
    Py_CLEAR(te->primary);
    Py_CLEAR(te->secondary);
    Py_CLEAR(te->policy);
    return 0;
}

static void te_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    te_clear(self);
    PyMem_Free(TILED(self)->tiles);
    TILED(self)->tiles = NULL;
    Py_CLEAR(TILED(self)->dtype);
    if (CARRIER(self)->weakreflist)
        PyObject_ClearWeakRefs(self);
    sw_carrier_unref(CARRIER(self)->core); /* its state handle */
    CARRIER(self)->core = NULL;
    Py_TYPE(self)->tp_free(self);
}

SW_CARRIER_CLOSED_INIT_SUBCLASS(te_init_subclass, "TiledEvictable")

/* A TiledEvictable never moves, so its way to DLPack is a projection. */
static PyObject *te_dlpack_info(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    PyErr_SetString(PyExc_BufferError,
                    "DLPack is not supported by TiledEvictable carriers: project the tiles you "
                    "need into a CPU carrier to export it");
    return NULL;
}

/* TiledEvictable.project: the projection (py_tiled_project.c, above this
 * file) registers itself at module init. */
static PyObject *(*project_fn)(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames);

void sw_tiled_set_project(PyObject *(*project)(PyObject *self, PyObject *const *args,
                                               Py_ssize_t nargs, PyObject *kwnames))
{
    project_fn = project;
}

static PyObject *te_project(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames)
{
    if (!project_fn) {
        PyErr_SetString(PyExc_NotImplementedError, "TiledEvictable.project is not available");
        return NULL;
    }
    return project_fn(self, args, nargs, kwnames);
}

static PyMethodDef te_methods[] = {
    {"dlpack_info", te_dlpack_info, METH_NOARGS,
     "dlpack_info($self, /)\n--\n\nAlways raises BufferError: project tiles into a CPU carrier "
     "to export them."},
    {"size", sw_carrier_meth_size, METH_NOARGS,
     "size($self, /)\n--\n\nNumber of slots (the product of logical_shape); 0 after release."},
    {"dtype", sw_carrier_meth_dtype, METH_NOARGS, "dtype($self, /)\n--\n\nStorage DType."},
    {"get_value", sw_carrier_meth_get_value, METH_O,
     "get_value($self, index, /)\n--\n\n"
     "Read one slot: its stored value, 0 for an implicit tile. Raises IndexError\n"
     "for an index out of range, RuntimeError for an invalid tile."},
    {"set_value", (PyCFunction)(void (*)(void))sw_carrier_meth_set_value, METH_FASTCALL,
     "set_value($self, index, value, /)\n--\n\n"
     "Write one slot. A secondary tile is promoted first, an implicit tile becomes a\n"
     "primary tile (unless the value is 0). Raises IndexError for an index out of\n"
     "range, TypeError for a value the dtype cannot hold, RuntimeError for an\n"
     "invalid, pending or pinned tile."},
    {"_is_mutable", sw_carrier_meth_intrinsic_mutable, METH_NOARGS,
     "_is_mutable($self, /)\n--\n\nWhether the primary was mutable when this was built."},
    {"tile_state", te_tile_state, METH_O,
     "tile_state($self, coord, /)\n--\n\n"
     "Where tile `coord` (a tuple of ints, one per grid axis) lives now: a\n"
     "TileState with location (\"primary\", \"secondary\", \"implicit\" or\n"
     "\"invalid\"), valid and dirty. Raises TypeError for a coordinate that is\n"
     "not an iterable of ints, ValueError for one outside the grid, RuntimeError\n"
     "for a released carrier."},
    {"promote_async", te_promote_async, METH_O,
     "promote_async($self, tiles, /)\n--\n\n"
     "Start bringing `tiles` (a TileSet or TileSelection) into the primary tier;\n"
     "returns an AwaitResidency. All tiles move or none do. Raises TypeError\n"
     "when `tiles` is neither, ValueError for tiles outside the grid,\n"
     "RuntimeError for a released carrier, a tile with unfinished work, or an\n"
     "invalid tile."},
    {"evict_async", te_evict_async, METH_O,
     "evict_async($self, tiles, /)\n--\n\n"
     "Start moving the primary tiles among `tiles` (a TileSet or TileSelection)\n"
     "to the secondary tier; returns an AwaitResidency. All tiles move or none\n"
     "do. Raises TypeError when `tiles` is neither, ValueError for tiles outside\n"
     "the grid, RuntimeError for a released carrier or a tile with unfinished\n"
     "work."},
    {"promote", te_promote, METH_O,
     "promote($self, tiles, /)\n--\n\n"
     "Bring `tiles` into the primary tier and wait: promote_async(tiles).wait()."},
    {"evict", te_evict, METH_O, "evict($self, tiles, /)\n--\n\n"
     "Move `tiles` to the secondary tier and wait: evict_async(tiles).wait()."},
    {"project", (PyCFunction)(void (*)(void))te_project, METH_FASTCALL | METH_KEYWORDS,
     "project($self, tensor, selection, destination=None)\n--\n\n"
     "Start copying the tiles `selection` picks out of `tensor` (a full Tensor\n"
     "over this carrier) into a dense Tensor on `destination` (a carrier of the\n"
     "primary's class; a new one when None). Returns an AwaitProjection whose\n"
     "wait() gives that Tensor. The source never changes. Raises TypeError for a\n"
     "wrong argument type, ValueError for a tensor that does not cover the tiles\n"
     "or a selection outside the grid, RuntimeError for released or busy tiles."},
    {"release", te_release, METH_NOARGS,
     "release($self, /)\n--\n\n"
     "Free every tile and both tiers. Raises RuntimeError while projection or\n"
     "residency work is unfinished. Doing it twice does nothing."},
    {"new_like", (PyCFunction)(void (*)(void))te_new_like, METH_VARARGS | METH_KEYWORDS,
     "new_like($self, values, *, mutable=True, dtype=None)\n--\n\n"
     "A TiledEvictable of the same grid, tiles and policy holding `values` (exactly\n"
     "size() of them) in a new primary; all-zero tiles become implicit."},
    {"allocate_like", (PyCFunction)(void (*)(void))te_allocate_like,
     METH_VARARGS | METH_KEYWORDS,
     "allocate_like($self, size, *, mutable=True, dtype=None, empty=False)\n--\n\n"
     "A TiledEvictable of the same grid, tiles and policy; every tile is an\n"
     "implicit zero, or invalid when empty."},
    {"__init_subclass__", (PyCFunction)(void (*)(void))te_init_subclass,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "__init_subclass__($type, /, *args, **kwargs)\n--\n\n"
     "TiledEvictable cannot be subclassed: defining a subclass raises TypeError."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef te_getset[] = {
    {"grid_shape", te_grid_shape, NULL, "Tiles per axis.", NULL},
    {"tile_shape", te_tile_shape, NULL, "Slots per axis of one tile.", NULL},
    {"logical_shape", te_logical_shape, NULL, "grid_shape times tile_shape, per axis.", NULL},
    {"primary", te_primary, NULL, "The primary tier's prototype carrier.", NULL},
    {"secondary", te_secondary, NULL, "The secondary tier's prototype carrier.", NULL},
    {"residency_policy", te_policy, NULL, "The residency policy, or None.", NULL},
    {"primary_tiles", te_tiles_where, NULL, "Tiles in the primary tier (a TileSet).",
     (void *)(intptr_t)KEEP_PRIMARY},
    {"secondary_tiles", te_tiles_where, NULL, "Tiles in the secondary tier.",
     (void *)(intptr_t)KEEP_SECONDARY},
    {"valid_tiles", te_tiles_where, NULL, "Tiles that hold values (not invalid).",
     (void *)(intptr_t)KEEP_VALID},
    {"dirty_tiles", te_tiles_where, NULL, "Primary tiles written since promotion.",
     (void *)(intptr_t)KEEP_DIRTY},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject SwTiledEvictable_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "strideweave.TiledEvictable",
    .tp_basicsize = sizeof(SwTiledEvictableObject),
    .tp_dealloc = te_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "TiledEvictable(primary, secondary, grid_shape, tile_shape, *, "
              "residency_policy=None)\n--\n\n"
              "A grid of equal tiles over logical_shape = grid_shape * tile_shape, each\n"
              "tile living in the primary carrier, the secondary carrier, nowhere with\n"
              "an implicit 0, or nowhere (invalid). Both tiers must be empty or hold\n"
              "the whole logical size; a full primary makes every tile primary, else a\n"
              "full secondary every tile secondary, else all are invalid. It takes\n"
              "ownership of both tiers. Move tiles with promote/evict; copy some out\n"
              "with project. Values never move with move(): that raises\n"
              "NotImplementedError.\n\n"
              "Raises TypeError for a tier that is not a carrier (or is an Evictable or\n"
              "TiledEvictable), tiers of different dtypes or a dtype a tier cannot\n"
              "store, shapes that are not iterables of ints, or a residency_policy\n"
              "without a callable plan;\n"
              "ValueError for the same carrier twice, an empty or non-positive shape,\n"
              "shapes of different lengths, or a tier that is neither empty nor the\n"
              "whole logical size; RuntimeError for a released or owned tier.\n\n"
              "    te = TiledEvictable(CPU(16), CPU(0), (2, 2), (2, 2))",
    .tp_traverse = te_traverse,
    .tp_clear = te_clear,
    .tp_methods = te_methods,
    .tp_getset = te_getset,
    .tp_base = &SwDependentCarrier_Type,
    .tp_init = sw_carrier_builtin_init,
    .tp_new = te_new,
};

PyTypeObject SwAwaitResidency_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "strideweave.AwaitResidency",
    .tp_basicsize = sizeof(SwAwaitObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The result of promote_async/evict_async: wait() returns None once every\n"
              "tile has moved, or raises why none did. Made by those methods; calling\n"
              "AwaitResidency raises TypeError.",
    .tp_base = &SwAwaitResult_Type,
};

PyTypeObject SwAwaitProjection_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "strideweave.AwaitProjection",
    .tp_basicsize = sizeof(SwAwaitObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The result of TiledEvictable.project: wait() returns the projected\n"
              "Tensor (the same object every time), or raises why it failed. Made by\n"
              "project; calling AwaitProjection raises TypeError.",
    .tp_base = &SwAwaitResult_Type,
};

static void fail_inherited(void);

int sw_py_tiled_evictable_init(PyObject *module)
{
    str_allocate_like = PyUnicode_InternFromString("allocate_like");
    str_new_like = PyUnicode_InternFromString("new_like");
    str_plan = PyUnicode_InternFromString("plan");
    if (!str_allocate_like || !str_new_like || !str_plan ||
        sw_carrier_register_builtin(&SwTiledEvictable_Type, &sw_tiled_evictable_ops, 0) < 0 ||
        sw_fork_register_inherited_end(fail_inherited) < 0 ||
        sw_tile_sets_init(module) < 0 ||
        sw_tile_transfer_init(module) < 0)
        return -1;
    PyTypeObject *types[] = {&SwTiledEvictable_Type, &SwAwaitResidency_Type,
                             &SwAwaitProjection_Type};
    for (size_t i = 0; i < 3; i++)
        if (PyType_Ready(types[i]) < 0 ||
            PyModule_AddObjectRef(module, _PyType_Name(types[i]), (PyObject *)types[i]) < 0)
            return -1;
    return sw_py_register_shipped_definition(&SwTiledEvictable_Type);
}

/* In a forked child (GIL held): the waiter threads that would finish the
 * residency requests it inherited do not exist here. Each fails with
 * RuntimeError: its fresh copies are dropped, its tiles stay where they
 * were and are no longer pending. The in-flight counts were reset. */
static void fail_inherited(void)
{
    while (deferred_head) {
        residency *q = deferred_head;
        if (q->handle)
            sw_py_await_reset_after_fork(q->handle);
        residency_fail(q, sw_py_move_forked_error("tile transfer"));
        residency_finish(q); /* untracks q */
        if (PyErr_Occurred())
            PyErr_WriteUnraisable(NULL);
    }
}
