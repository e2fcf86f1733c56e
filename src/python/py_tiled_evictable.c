/* TiledEvictable (contract-carriers TE-1 .. TE-9, TE-12 .. TE-14): a
 * logical grid of equal tiles, each living in exactly one place: the
 * primary tier, the secondary tier, nowhere with an implicit zero value,
 * or nowhere at all (invalid).
 *
 * The Python face of the core's TiledEvictable (strideweave/
 * tiled_evictable.h), which keeps the tile records and decides residency,
 * pending and pinned tiles, all-or-nothing commits and failures. Its
 * refusals carry the contract's messages, so the binding raises them as
 * they come; it checks first only what needs Python objects (argument
 * types, the tiers' answers, a policy's plan) or must come before an
 * argument is looked at. It keeps the Python objects of the tiers and
 * hands the core its tier hooks
 * (py_tiled_core.c): fresh tile storage from the tiers' allocate_like, tile
 * copies through the tier classes' exact-pair movement or TransferRoutes,
 * slot access of tiers written in Python, and the residency policy's plan().
 * Residency requests are issued on the caller (sw_tiled_evictable_
 * promote_start) with the GIL released; the AwaitResidency completes from
 * the core's commit callback. */
#include "sw_tiled.h"
#include "sw_tiled_core.h"
#include "sw_extension.h"
#include "sw_move.h"
#include "sw_fork_guard.h"
#include "sw_tiers.h"

#include <string.h>

#include "strideweave/tiled_evictable.h"

#define CARRIER(o) ((SwCarrierObject *)(o))

static PyObject *str_plan;

static size_t elem_bytes(PyObject *self)
{
    return sw_dtype_slot_bytes(SwDType_ID(TILED(self)->dtype));
}

/* ---- tile records (the core's) ------------------------------------------------ */

/* The state of the tile at `coord`; a zeroed invalid state when the core
 * has none. */
static sw_te_tile_state tile_state(PyObject *self, const int64_t *coord)
{
    SwTiledEvictableObject *te = TILED(self);
    sw_te_tile_state st = {.location = SW_TE_INVALID};
    sw_error err;
    if (!te->te || sw_tiled_evictable_tile_state(te->te, coord, &st, &err) != SW_OK)
        st = (sw_te_tile_state){.location = SW_TE_INVALID};
    return st;
}

/* The core's snapshot; -1 (nothing raised) when released. */
int sw_py_tiled_tile_counts(PyObject *self, int64_t counts[4], int64_t *pending)
{
    SwTiledEvictableObject *te = TILED(self);
    return te->te && sw_tiled_evictable_tile_counts(te->te, counts, pending, NULL) == SW_OK ? 0
                                                                                          : -1;
}

/* ---- residency requests (TE-7, TE-8) -------------------------------------------- */

/* A TileSet from a TileSet or a TileSelection argument. */
static PyObject *tiles_argument(PyObject *tiles)
{
    if (PyObject_TypeCheck(tiles, &SwTileSet_Type))
        return Py_NewRef(tiles);
    if (PyObject_TypeCheck(tiles, &SwTileSelection_Type))
        return sw_py_tile_selection_tile_set(tiles);
    PyErr_Format(PyExc_TypeError, "tiles must be a TileSet or a TileSelection, not %.100s",
                 Py_TYPE(tiles)->tp_name);
    return NULL;
}

/* Checks of TE-7, the core's: released first (an empty request, before
 * the argument is looked at), then the request's tiles. Returns the
 * request's TileSet, bound to the grid (a new reference). */
static PyObject *check_request(PyObject *self, PyObject *tiles, int evict)
{
    sw_error err;
    sw_tiled_evictable *core = TILED(self)->te;
    if (sw_tiled_evictable_check_residency(core, NULL, 0, evict, NULL, &err) != SW_OK)
        return sw_py_raise(&err), NULL;
    PyObject *set = tiles_argument(tiles);
    if (!set)
        return NULL;
    SwTileSetObject *ts = (SwTileSetObject *)set;
    if (sw_py_tile_set_bind(set, &TILED(self)->geo) < 0) {
        Py_CLEAR(set);
    } else if (sw_tiled_evictable_check_residency(core, ts->coords, ts->n, evict, NULL, &err) !=
               SW_OK) {
        sw_py_raise(&err);
        Py_CLEAR(set);
    }
    return set;
}

/* One request's Python side, from its start to the core's commit callback
 * (or, in a forked child, to the after-fork pass). GIL-protected list. */
typedef struct residency {
    PyObject *self, *handle;
    sw_te_work *work;
    int held;           /* counted in flight for the exit hook */
    uint64_t hold;      /* ... by this engine hold */
    struct residency *prev, *next;
} residency;

static residency *live_head;

static void residency_unlink(residency *q)
{
    if (q->prev)
        q->prev->next = q->next;
    else if (live_head == q)
        live_head = q->next;
    if (q->next)
        q->next->prev = q->prev;
    q->prev = q->next = NULL;
}

static void residency_free(residency *q)
{
    residency_unlink(q);
    if (q->work)
        sw_te_work_unref(q->work);
    Py_XDECREF(q->handle);
    Py_XDECREF(q->self);
    PyMem_Free(q);
}

/* The outcome onto the handle (GIL held); the request is over. */
static void residency_end(residency *q, sw_status st, const sw_error *err)
{
    SwTiledEvictableObject *te = TILED(q->self);
    PyObject *exc = NULL;
    if (st != SW_OK) {
        exc = te->hooks ? sw_py_tiled_core_take_error(te->hooks, q->work) : NULL;
        if (!exc && err->detail == SW_TE_ENDED_BY_FORK)
            exc = sw_py_move_forked_error("tile transfer");
        if (!exc) {
            sw_py_raise(err);
            exc = sw_py_take_exception();
        }
    }
    if (te->hooks && st == SW_OK) {
        PyObject *stale = sw_py_tiled_core_take_error(te->hooks, q->work);
        Py_XDECREF(stale);
    }
    sw_py_await_complete(q->handle, exc ? NULL : Py_None, exc);
    Py_XDECREF(exc);
    int held = q->held;
    uint64_t hold = q->hold;
    residency_free(q);
    if (held)
        sw_py_move_drop_inflight(hold);
}

/* The core's commit callback (any thread, no core lock held). */
static void residency_done(sw_te_work *w, void *user)
{
    residency *q = user;
    sw_py_gil g = sw_py_gil_ensure();
    sw_error err;
    sw_error_clear(&err);
    sw_status st = sw_te_work_wait(w, NULL, &err);
    residency_end(q, st, &err);
    if (PyErr_Occurred())
        PyErr_WriteUnraisable(NULL);
    sw_py_gil_release(g);
}

static PyObject *residency_async(PyObject *self, PyObject *tiles, int evict)
{
    SwTiledEvictableObject *te = TILED(self);
    /* The handle first: allocating it may run a collection (finalizers,
     * user code), which must not fall between the checks and the marks. */
    PyObject *handle = sw_py_await_new(&SwAwaitResidency_Type);
    PyObject *set = handle ? check_request(self, tiles, evict) : NULL;
    /* the request's tiles: the bound set's rows (borrowed until the start) */
    int64_t n = set ? ((SwTileSetObject *)set)->n : 0;
    const int64_t *coords = set ? ((SwTileSetObject *)set)->coords : NULL;
    residency *q = set ? PyMem_Calloc(1, sizeof *q) : NULL;
    if (!q) {
        if (set)
            PyErr_NoMemory();
        Py_XDECREF(set);
        Py_XDECREF(handle);
        return NULL;
    }
    q->self = Py_NewRef(self);
    q->handle = Py_NewRef(handle);
    /* Work that outlives this call keeps exit waiting until it committed. */
    q->held = sw_py_move_hold_inflight(&q->hold) == 0;
    if (!q->held)
        PyErr_Clear();
    PyObject *stale = sw_py_tiled_core_take_error(te->hooks, NULL);
    Py_XDECREF(stale);
    sw_error err;
    sw_status st;
    sw_te_work *w = NULL;
    sw_tiled_evictable *core = te->te;
    SW_TILED_NOGIL(st = evict ? sw_tiled_evictable_evict_start(core, coords, n, &w, &err)
                              : sw_tiled_evictable_promote_start(core, coords, n, &w, &err));
    Py_DECREF(set);
    if (st != SW_OK) {
        int held = q->held;
        uint64_t hold = q->hold;
        q->held = 0;
        residency_free(q);
        sw_py_tiled_core_raise(te->hooks, NULL, &err);
        if (held)
            sw_py_move_drop_inflight(hold);
        if (st != SW_ENOMEM) {
            Py_DECREF(handle);
            return NULL;
        }
        /* Out of memory after the checks passed: the handle's failure, as
         * every other failure of the work is (nothing changed). */
        PyObject *exc = sw_py_take_exception();
        sw_py_await_complete(handle, NULL, exc);
        Py_XDECREF(exc);
        return handle;
    }
    /* The core decided which tiles copy, with its marks; none when the
     * route check (X-14) refused the request, which is then the handle's
     * failure with nothing changed. */
    sw_py_await_set_total(handle, sw_te_work_copies(w) * te->geo.tile_size *
                                      (int64_t)elem_bytes(self));
    q->work = w;
    q->next = live_head;
    if (live_head)
        live_head->prev = q;
    live_head = q;
    if (!q->held) {
        /* Exit began: wait here rather than leave work behind. */
        SW_TILED_NOGIL(sw_te_work_wait(w, NULL, NULL));
    }
    if (sw_te_work_on_done(w, residency_done, q, &err) != SW_OK) {
        residency_end(q, st, &err); /* cannot happen: one callback per handle */
    }
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

/* ---- slot access (TE-9) ------------------------------------------------------------ */

static PyObject *te_load(PyObject *self, int64_t index)
{
    SwTiledEvictableObject *te = TILED(self);
    unsigned char slot[16] = {0};
    sw_error err;
    PyObject *stale = sw_py_tiled_core_take_error(te->hooks, NULL);
    Py_XDECREF(stale);
    /* Reads copy nothing: the hooks they may run take the GIL back here. */
    if (sw_tiled_evictable_read(te->te, index, 1, slot, &err) == SW_OK)
        return sw_py_load_slot(SwDType_ID(te->dtype), slot);
    return sw_py_tiled_core_raise(te->hooks, NULL, &err), NULL;
}

/* TE-9: the core decides, under its own lock and again right before it
 * writes: its refusals (busy, invalid), a 0 into an implicit tile
 * changing nothing, and the promotion of the tile first (whose route
 * check, X-14, is its route hook). */
static int te_store(PyObject *self, int64_t index, const void *slot)
{
    SwTiledEvictableObject *te = TILED(self);
    PyObject *stale = sw_py_tiled_core_take_error(te->hooks, NULL);
    Py_XDECREF(stale);
    sw_error err;
    sw_status s;
    /* Without the GIL: a promotion's copy may wait for a provider's
     * completion, which the waiter threads report (the hooks take the GIL
     * back for what they run). */
    sw_tiled_evictable *core = te->te;
    SW_TILED_NOGIL(s = sw_tiled_evictable_write(core, index, 1, slot, &err));
    if (s != SW_OK)
        return sw_py_tiled_core_raise(te->hooks, NULL, &err);
    return 0;
}

/* ---- carrier ops ---------------------------------------------------------------------- */

/* The exception a tier hook kept for this thread's failed core call (the
 * core reads and writes the slots through the hooks, which run without
 * the caller's GIL). */
static PyObject *te_kept_error(PyObject *self)
{
    SwTiledEvictableObject *te = TILED(self);
    return te->hooks ? sw_py_tiled_core_take_error(te->hooks, NULL) : NULL;
}

static sw_dtype te_dtype(PyObject *self)
{
    return SwDType_ID(TILED(self)->dtype);
}

/* The core's carrier answers: the logical size, 0 once released. */
static int64_t te_size(PyObject *self)
{
    return sw_carrier_size(CARRIER(self)->core);
}

static int te_supports(sw_dtype dtype)
{
    (void)dtype;
    return 0; /* unused: supports_self answers */
}

static int te_supports_self(PyObject *self, sw_dtype dtype)
{
    return sw_py_tiers_support_dtype(TILED(self)->primary, TILED(self)->secondary, dtype);
}

/* TE-14: the core frees every tile's storage (the hooks release the stores
 * the binding made) and releases both tiers; then the binding's part of
 * each tier's release (a subclass's hook, definition-backed storage). */
static void te_drop(PyObject *self)
{
    SwTiledEvictableObject *te = TILED(self);
    if (!te->te)
        return;
    sw_error err;
    sw_status st;
    sw_tiled_evictable *core = te->te;
    SW_TILED_NOGIL(st = sw_tiled_evictable_release(core, &err));
    if (st != SW_OK) {
        sw_py_tiled_core_raise(te->hooks, NULL, &err);
        PyErr_WriteUnraisable(self);
        return;
    }
    if (te->tiers_dropped)
        return;
    te->tiers_dropped = 1;
    if (sw_py_carrier_drop_storage(te->primary) < 0)
        PyErr_WriteUnraisable(self);
    if (sw_py_carrier_drop_storage(te->secondary) < 0)
        PyErr_WriteUnraisable(self);
}

static const sw_py_carrier_ops sw_py_tiled_evictable_ops = {
    .name = "TiledEvictable",
    .dtype = te_dtype,
    .size = te_size,
    .load = te_load,
    .store = te_store,
    .supports = te_supports,
    .drop = te_drop,
    .supports_self = te_supports_self,
    .core_class = &sw_tiled_evictable_class,
    .kept_error = te_kept_error,
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

/* Check (6) for one shape argument: the entries' types here (before any
 * value is read), their count and values the core's; an entry too large
 * for int64 is said here, after the core checked those before it. */
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
    int32_t n32 = n > INT32_MAX ? INT32_MAX : (int32_t)n, big = n32;
    for (int32_t k = 0; rc == 0 && k < n32 && k < SW_TILES_MAX_RANK; k++) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(t, k), &overflow);
        if (overflow > 0 && big == n32)
            big = k;
        out[k] = overflow < 0 ? -1 : v;
    }
    sw_error err;
    if (rc == 0 && sw_tiles_check_extents(what, n32, out, big, &err) != SW_OK)
        rc = sw_py_raise(&err);
    if (rc == 0 && big < n32) {
        PyErr_Format(PyExc_OverflowError, "%s entry is too large", what);
        rc = -1;
    }
    *rank = n32;
    Py_DECREF(t);
    return rc;
}

/* Checks (6): the shapes, then the core's geometry (equal ranks, the sizes). */
static int check_geometry(PyObject *grid, PyObject *tile, sw_tile_geometry *g)
{
    int32_t gr, tr;
    int64_t ge[SW_TILES_MAX_RANK], tl[SW_TILES_MAX_RANK];
    if (parse_shape(grid, "grid_shape", &gr, ge) < 0 ||
        parse_shape(tile, "tile_shape", &tr, tl) < 0)
        return -1;
    sw_error err;
    return sw_tiles_geometry_init_shapes(g, gr, ge, tr, tl, &err) == SW_OK ? 0
                                                                            : sw_py_raise(&err);
}

/* Check (7) for one tier: its size is 0 or the logical size; it can hold
 * the dtype. */
static int check_tier_fit(PyObject *tier, const char *role, PyObject *dtype,
                          const sw_tile_geometry *g)
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
                     role, sw_py_cname(tier), sw_dtype_info_of(SwDType_ID(dtype))->name);
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

/* The core TiledEvictable over the checked tiers, with the hooks and the
 * policy; `implicit` (NULL, or one flag per tile) as new_placed takes it. */
static int build_core(PyObject *self, const unsigned char *implicit)
{
    SwTiledEvictableObject *te = TILED(self);
    te->hooks = sw_py_tiled_core_new(te->primary, te->secondary, te->dtype, te->policy,
                                     te->geo.tile_size);
    if (!te->hooks)
        return -1;
    sw_te_tier_hooks hooks;
    sw_te_policy policy;
    sw_py_tiled_core_hooks(te->hooks, &hooks);
    sw_py_tiled_core_policy(te->hooks, &policy);
    sw_error err;
    sw_status st = sw_tiled_evictable_new_placed(CARRIER(te->primary)->core,
                                                 CARRIER(te->secondary)->core, te->geo.rank,
                                                 te->geo.grid, te->geo.tile,
                                                 &hooks, implicit, &te->te, &err);
    if (st == SW_OK && policy.plan)
        st = sw_tiled_evictable_set_policy(te->te, &policy, &err);
    if (st != SW_OK)
        return sw_py_tiled_core_raise(te->hooks, NULL, &err);
    te->hooks->te = te->te;
    /* The object's core carrier is the core's own TiledEvictable carrier,
     * so the core's state is the only one (released, version, claims). */
    if (sw_tiled_evictable_carrier(te->te, &CARRIER(self)->core, &err) != SW_OK)
        return sw_py_raise(&err);
    return 0;
}

static PyObject *te_make(PyTypeObject *type, PyObject *p, PyObject *s, PyObject *grid,
                         PyObject *tile, PyObject *policy, const unsigned char *implicit)
{
    PyObject *dtype = NULL;
    sw_tile_geometry g;
    if (check_tiers(p, s) < 0 || sw_py_tiers_dtype(p, s, &dtype) < 0)
        return NULL;
    if (check_geometry(grid, tile, &g) < 0 ||
        check_tier_fit(p, "primary", dtype, &g) < 0 ||
        check_tier_fit(s, "secondary", dtype, &g) < 0 || check_policy(policy) < 0) {
        Py_DECREF(dtype);
        return NULL;
    }
    int mutable_ = sw_py_carrier_is_mutable(p);
    /* The checks ran user hooks: the core checks the tiers' states again
     * (released, owned, pending) before it claims them. */
    if (mutable_ < 0) {
        Py_DECREF(dtype);
        return NULL;
    }
    PyObject *self = sw_py_carrier_alloc(type, mutable_);
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
    if (build_core(self, implicit) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return self;
}

static PyObject *te_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"primary", "secondary", "grid_shape", "tile_shape",
                             "residency_policy", NULL};
    PyObject *p, *s, *grid, *tile, *policy = Py_None;
    if (sw_py_carrier_check_exact(type, &SwTiledEvictable_Type) < 0 ||
        !PyArg_ParseTupleAndKeywords(args, kwds, "OOOO|$O:TiledEvictable", kwlist, &p, &s,
                                     &grid, &tile, &policy))
        return NULL;
    return te_make(type, p, s, grid, tile, policy, NULL);
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

/* Which tiles a TileSet property keeps; its getset closure is one of these. */
enum tile_filter { KEEP_PRIMARY, KEEP_SECONDARY, KEEP_VALID, KEEP_DIRTY };

/* primary_tiles, secondary_tiles, valid_tiles, dirty_tiles (TE-6). */
static PyObject *te_tiles_where(PyObject *self, void *closure)
{
    static const sw_te_filter filters[] = {SW_TE_TILES_PRIMARY, SW_TE_TILES_SECONDARY,
                                           SW_TE_TILES_VALID, SW_TE_TILES_DIRTY};
    enum tile_filter f = (enum tile_filter)(intptr_t)closure;
    SwTiledEvictableObject *te = TILED(self);
    int32_t rank = te->geo.rank;
    int64_t *rows = PyMem_Malloc((size_t)(te->geo.ntiles * rank + 1) * sizeof(int64_t)), n = 0;
    if (!rows)
        return PyErr_NoMemory();
    sw_error err;
    if (sw_tiled_evictable_tiles(te->te, filters[f], rows, te->geo.ntiles, &n, &err) != SW_OK) {
        PyMem_Free(rows);
        return sw_py_raise(&err), NULL;
    }
    /* linear order first-axis-fastest is the reversed-tuple order */
    PyObject *r = sw_py_tile_set_new(rank, n, rows);
    PyMem_Free(rows);
    return r;
}

static PyObject *te_tile_state(PyObject *self, PyObject *coord)
{
    static const char *names[] = {"primary", "secondary", "implicit", "invalid"};
    SwTiledEvictableObject *te = TILED(self);
    /* Released first, before the coordinate is looked at: the core's
     * answer for tile 0, which every grid has. */
    int64_t origin[SW_TILES_MAX_RANK] = {0};
    sw_te_tile_state r;
    sw_error err;
    if (sw_tiled_evictable_tile_state(te->te, origin, &r, &err) != SW_OK)
        return sw_py_raise(&err), NULL;
    PyObject *row = PyTuple_Pack(1, coord);
    PyObject *set = row ? PyObject_CallOneArg((PyObject *)&SwTileSet_Type, row) : NULL;
    Py_XDECREF(row);
    if (!set || sw_py_tile_set_bind(set, &te->geo) < 0) {
        Py_XDECREF(set);
        return NULL;
    }
    r = tile_state(self, ((SwTileSetObject *)set)->coords);
    Py_DECREF(set);
    int dirty = r.location == SW_TE_PRIMARY && r.dirty;
    PyObject *cls = sw_py_types_attr("TileState");
    PyObject *st = cls ? PyObject_CallFunction(cls, "sOO", names[r.location & 3],
                                               r.valid ? Py_True : Py_False,
                                               dirty ? Py_True : Py_False)
                       : NULL;
    Py_XDECREF(cls);
    return st;
}

/* ---- release, factories (TE-13, TE-14) ----------------------------------------------- */

static PyObject *te_release(PyObject *self, PyObject *unused)
{
    (void)unused;
    SwTiledEvictableObject *te = TILED(self);
    if (te->te && !sw_py_state_released(self)) {
        sw_error err;
        sw_status st;
        sw_tiled_evictable *core = te->te;
        PyObject *stale = sw_py_tiled_core_take_error(te->hooks, NULL);
        Py_XDECREF(stale);
        SW_TILED_NOGIL(st = sw_tiled_evictable_release(core, &err));
        if (st != SW_OK)
            return sw_py_tiled_core_raise(te->hooks, NULL, &err), NULL;
    }
    return sw_py_carrier_release(self) < 0 ? NULL : Py_NewRef(Py_None);
}

/* Whether every slot of tile t of the full carrier `p` reads as zero:
 * host memory by the core's rule (zero bytes), any other carrier through
 * its values' truth. */
static int tile_is_zero(PyObject *self, PyObject *p, int64_t t)
{
    const sw_tile_geometry *g = &TILED(self)->geo;
    const unsigned char *base = sw_py_tiled_host_base(p);
    if (base)
        return sw_tiles_is_zero_tile(g, base, elem_bytes(self), t);
    for (int64_t w = 0; w < g->tile_size; w++) {
        PyObject *v = sw_py_carrier_getitem(p, sw_tiles_slot(g, t, w));
        int nz = v ? PyObject_IsTrue(v) : -1;
        Py_XDECREF(v);
        if (nz != 0)
            return nz < 0 ? -1 : 0;
    }
    return 1;
}

/* TE-13: a fresh hierarchy of this geometry and policy over the primary `p`
 * (stolen; NULL passes an error through) and an empty secondary from this
 * one's prototype; `zeros` makes all-zero tiles of a full `p` implicit,
 * `all_implicit` makes every tile implicit. Both tiers are released when
 * it cannot be built. */
static PyObject *make_like(PyObject *self, PyObject *p, PyObject *dtype, int zeros,
                           int all_implicit)
{
    SwTiledEvictableObject *te = TILED(self);
    if (!p)
        return NULL;
    PyObject *zero = PyLong_FromLong(0), *s = NULL, *made = NULL;
    s = zero ? sw_py_tier_factory(te->secondary, "allocate_like", zero, Py_True, dtype, Py_True)
             : NULL;
    Py_XDECREF(zero);
    unsigned char *implicit = s && (zeros || all_implicit)
                                  ? PyMem_Calloc((size_t)te->geo.ntiles + 1, 1)
                                  : NULL;
    int ok = s && (implicit || !(zeros || all_implicit));
    if (s && !ok)
        PyErr_NoMemory();
    for (int64_t t = 0; ok && implicit && t < te->geo.ntiles; t++) {
        int z = all_implicit ? 1 : tile_is_zero(self, p, t);
        if (z < 0)
            ok = 0;
        implicit[t] = (unsigned char)(z > 0);
    }
    if (ok) {
        PyObject *grid = te_grid_shape(self, NULL), *tile = te_tile_shape(self, NULL);
        made = grid && tile ? te_make(&SwTiledEvictable_Type, p, s, grid, tile, te->policy,
                                      implicit)
                            : NULL;
        Py_XDECREF(grid);
        Py_XDECREF(tile);
    }
    PyMem_Free(implicit);
    if (!made) {
        PyObject *exc = sw_py_take_exception();
        if (sw_py_carrier_release(p) < 0)
            PyErr_Clear();
        if (s && sw_py_carrier_release(s) < 0)
            PyErr_Clear();
        sw_py_restore_exception(exc);
    }
    Py_DECREF(p);
    Py_XDECREF(s);
    return made;
}

static PyObject *te_new_like(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"values", "mutable", "dtype", NULL};
    PyObject *values, *mutable_ = Py_True, *dtype = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$OO:new_like", kwlist, &values, &mutable_,
                                     &dtype))
        return NULL;
    PyObject *vals = sw_py_carrier_iter(values, "values");
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
    PyObject *p = sw_py_tier_factory(TILED(self)->primary, "new_like", tup, mutable_, dtype, NULL);
    Py_DECREF(tup);
    return make_like(self, p, dtype, 1, 0);
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
    int e = sw_py_carrier_truth(empty, 0);
    if (e < 0)
        return NULL;
    PyObject *zero = PyLong_FromLong(0);
    PyObject *p = zero ? sw_py_tier_factory(TILED(self)->primary, "allocate_like", zero, mutable_,
                                      dtype, Py_True)
                       : NULL;
    Py_XDECREF(zero);
    return make_like(self, p, dtype, 0, !e);
}

/* ---- lifetime ------------------------------------------------------------------------------ */

static int te_traverse(PyObject *self, visitproc visit, void *arg)
{
    SwTiledEvictableObject *te = TILED(self);
    Py_VISIT(te->primary);
    Py_VISIT(te->secondary);
    Py_VISIT(te->policy);
    return 0;
}

/* TE-14: collection only relinquishes the tiers and drops the private tile
 * storage: the core does both at its last reference, which the object's
 * core carrier holds (it holds the TiledEvictable). The hooks' context goes
 * after it: storage the core drops then still reaches it. */
static void te_drop_core(PyObject *self)
{
    SwTiledEvictableObject *te = TILED(self);
    if (te->hooks)
        te->hooks->te = NULL;
    if (te->te) {
        sw_tiled_evictable *core = te->te;
        te->te = NULL;
        sw_tiled_evictable_unref(core);
    }
    sw_carrier_unref(CARRIER(self)->core); /* the core's TiledEvictable carrier */
    CARRIER(self)->core = NULL;
    sw_py_tiled_core_free(te->hooks);
    te->hooks = NULL;
}

/* The hooks' context holds its own references to the tiers, so the core
 * state stays until dealloc (te_drop_core). */
static int te_clear(PyObject *self)
{
    SwTiledEvictableObject *te = TILED(self);
    Py_CLEAR(te->primary);
    Py_CLEAR(te->secondary);
    Py_CLEAR(te->policy);
    return 0;
}

static void te_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    te_drop_core(self);
    te_clear(self);
    Py_CLEAR(TILED(self)->dtype);
    if (CARRIER(self)->weakreflist)
        PyObject_ClearWeakRefs(self);
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

static PyMethodDef te_methods[] = {
    {"dlpack_info", te_dlpack_info, METH_NOARGS,
     "dlpack_info($self, /)\n--\n\nAlways raises BufferError: project tiles into a CPU carrier "
     "to export them."},
    {"size", sw_py_carrier_meth_size, METH_NOARGS,
     "size($self, /)\n--\n\nNumber of slots (the product of logical_shape); 0 after release."},
    {"dtype", sw_py_carrier_meth_dtype, METH_NOARGS, "dtype($self, /)\n--\n\nStorage DType."},
    {"get_value", sw_py_carrier_meth_get_value, METH_O,
     "get_value($self, index, /)\n--\n\n"
     "Read one slot: its stored value, 0 for an implicit tile. Raises IndexError\n"
     "for an index out of range, RuntimeError for an invalid tile."},
    {"set_value", (PyCFunction)(void (*)(void))sw_py_carrier_meth_set_value, METH_FASTCALL,
     "set_value($self, index, value, /)\n--\n\n"
     "Write one slot. A secondary tile is promoted first, an implicit tile becomes a\n"
     "primary tile (unless the value is 0). Raises IndexError for an index out of\n"
     "range, TypeError for a value the dtype cannot hold, RuntimeError for an\n"
     "invalid, pending or pinned tile."},
    {"_is_mutable", sw_py_carrier_meth_intrinsic_mutable, METH_NOARGS,
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
    .tp_init = sw_py_carrier_builtin_init,
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
    str_plan = PyUnicode_InternFromString("plan");
    if (!str_plan ||
        sw_py_carrier_register_builtin(&SwTiledEvictable_Type, &sw_py_tiled_evictable_ops, 1) < 0 ||
        sw_py_fork_register_inherited_end(fail_inherited) < 0 ||
        sw_py_tile_sets_init(module) < 0 ||
        sw_py_tile_transfer_init(module) < 0)
        return -1;
    PyTypeObject *types[] = {&SwTiledEvictable_Type, &SwAwaitResidency_Type,
                             &SwAwaitProjection_Type};
    for (size_t i = 0; i < 3; i++)
        if (PyType_Ready(types[i]) < 0 ||
            PyModule_AddObjectRef(module, _PyType_Name(types[i]), (PyObject *)types[i]) < 0)
            return -1;
    return sw_py_register_shipped_definition(&SwTiledEvictable_Type);
}

/* In a forked child (GIL held): the core ended the residency work the
 * child inherited inside fork() (tiles where they were, no longer pending),
 * but the callbacks that complete the Python handles never run here. Each
 * handle ends now: with its outcome when the work had committed, else with
 * the RuntimeError of an inherited transfer. The in-flight counts were
 * reset. */
static void fail_inherited(void)
{
    sw_py_tiled_core_after_fork();
    while (live_head) {
        residency *q = live_head;
        q->held = 0;
        sw_py_await_reset_after_fork(q->handle);
        sw_error err;
        sw_error_clear(&err);
        sw_status st = sw_te_work_done(q->work)
                           ? sw_te_work_wait(q->work, NULL, &err)
                           : sw_py_tiled_core_forked_error(&err);
        residency_end(q, st, &err); /* unlinks q */
        if (PyErr_Occurred())
            PyErr_WriteUnraisable(NULL);
    }
}
