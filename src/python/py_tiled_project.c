/* TiledEvictable.project (contract-carriers TE-3, TE-10, TE-11): copy a
 * product of tiles out of a full Tensor over the carrier into a dense
 * Tensor, and its gather node.
 *
 * Every check runs first (the policy's plan() last, since it is user
 * code), then the work: pin the tiles the projection and the plan name,
 * gather in C (memcpy runs without the GIL for host tiers, else the tiers'
 * slot access), run the plan's promotions (all or nothing), build the
 * result, drop the pins and evict the plan's evict tiles. The gather reads
 * tiles where they are, so a failure anywhere leaves residency unchanged. */
#include "sw_fork_guard.h"
#include "sw_tiled.h"
#include "sw_move.h"

#include <string.h>

#define CARRIER(o) ((SwCarrierObject *)(o))
#define TENSOR(o) ((SwTensorObject *)(o))

static PyObject *str_plan, *str_projection;

/* ---- TE-3 --------------------------------------------------------------------- */

/* Sizes of the layout's top-level modes into sizes[]; the mode count. */
static int32_t mode_sizes(const sw_layout *L, int64_t *sizes, int32_t max)
{
    int32_t p = 0, leaf = 0, m = 0;
    while (p < L->nprofile && m < max) {
        int32_t nleaves = 0;
        int32_t end = sw_py_mode_end(L->profile, p, &nleaves);
        int64_t s = 1;
        for (int32_t j = 0; j < nleaves; j++)
            s *= L->extents[leaf + j];
        leaf += nleaves;
        sizes[m++] = s;
        p = end;
    }
    return p < L->nprofile ? max + 1 : m;
}

int sw_tiled_check_tensor(PyObject *self, PyObject *tensor)
{
    SwTiledEvictableObject *te = TILED(self);
    if (!SwTensor_Check(tensor)) {
        PyErr_Format(PyExc_TypeError, "tensor must be a Tensor, not %.100s",
                     Py_TYPE(tensor)->tp_name);
        return -1;
    }
    SwTensorObject *t = TENSOR(tensor);
    if (t->nsub != 1 || t->subs[0].carrier != self) {
        PyErr_SetString(PyExc_TypeError, "tensor must be a Tensor over this TiledEvictable");
        return -1;
    }
    if (sw_tiled_refuse_released(self, "project from") < 0)
        return -1;
    const sw_layout *L = SwLayout_CORE(t->subs[0].layout);
    int64_t sizes[SW_TILES_MAX_RANK + 1];
    int32_t m = mode_sizes(L, sizes, SW_TILES_MAX_RANK);
    int same = m == te->geo.rank;
    for (int32_t k = 0; same && k < m; k++)
        same = sizes[k] == te->geo.logical[k];
    if (!same) {
        PyErr_Format(PyExc_ValueError,
                     "the tensor's layout must have %d top-level modes whose sizes are the "
                     "carrier's logical_shape", (int)te->geo.rank);
        return -1;
    }
    sw_error err;
    int ok = sw_tiles_check_footprints(&te->geo, L, t->subs[0].offset, &err);
    return ok == 1 ? 0 : sw_py_raise(&err);
}

/* ---- argument checks -------------------------------------------------------------- */

static int check_destination(PyObject *self, PyObject *d, int64_t n)
{
    SwTiledEvictableObject *te = TILED(self);
    if (!SwCarrier_Check(d) || PyObject_TypeCheck(d, &SwDependentCarrier_Type) ||
        Py_TYPE(d) != Py_TYPE(te->primary)) {
        PyErr_Format(PyExc_TypeError, "destination must be a %s carrier (the primary's class), "
                     "not %.100s", _PyType_Name(Py_TYPE(te->primary)), Py_TYPE(d)->tp_name);
        return -1;
    }
    if (sw_py_state_released(d) || sw_py_state_owned(d)) {
        PyErr_Format(PyExc_RuntimeError, "the destination carrier is %s",
                     sw_py_state_released(d) ? "released" : "owned by a composite carrier");
        return -1;
    }
    int m = sw_py_carrier_is_mutable(d);
    if (m <= 0) {
        if (m == 0)
            PyErr_SetString(PyExc_RuntimeError, "the destination carrier is not mutable");
        return -1;
    }
    PyObject *dt = sw_py_carrier_dtype(d);
    if (!dt)
        return -1;
    Py_DECREF(dt);
    if (dt != te->dtype) {
        PyErr_Format(PyExc_TypeError, "the destination holds %s, not %s",
                     sw_dtype_info_of(SwDType_ID(dt))->name,
                     sw_dtype_info_of(SwDType_ID(te->dtype))->name);
        return -1;
    }
    int64_t size;
    if (sw_py_carrier_size(d, &size) < 0)
        return -1;
    if (size >= n)
        return 0;
    int grow = sw_py_carrier_is_allocatable_empty(d);
    if (grow == 0)
        PyErr_Format(PyExc_ValueError, "the destination has %lld slots; the projection needs "
                     "%lld", (long long)size, (long long)n);
    return grow > 0 ? 0 : -1;
}

/* The policy's plan for the selection, checked; None without a policy. */
static PyObject *policy_plan(PyObject *self, PyObject *selection)
{
    SwTiledEvictableObject *te = TILED(self);
    if (te->policy == Py_None)
        return Py_NewRef(Py_None);
    PyObject *required = sw_tile_selection_tile_set(selection);
    PyObject *plan = required ? PyObject_CallMethodObjArgs(te->policy, str_plan, required,
                                                           str_projection, NULL)
                              : NULL;
    Py_XDECREF(required);
    if (plan && !PyObject_TypeCheck(plan, &SwResidencyPlan_Type)) {
        PyErr_Format(PyExc_TypeError, "the residency policy's plan() returned %.100s, not a "
                     "ResidencyPlan", Py_TYPE(plan)->tp_name);
        Py_CLEAR(plan);
    }
    SwResidencyPlanObject *p = (SwResidencyPlanObject *)plan;
    if (plan && (sw_tile_set_bind(p->promote, &te->geo) < 0 ||
                 sw_tile_set_bind(p->retain, &te->geo) < 0 ||
                 sw_tile_set_bind(p->evict, &te->geo) < 0))
        Py_CLEAR(plan);
    return plan;
}

/* ---- the work ------------------------------------------------------------------------ */

typedef struct projection {
    PyObject *self, *tensor, *selection, *plan, *dest;
    int default_dest;
    int64_t dest_token;
    sw_tile_selection sel;
    int64_t shape[SW_TILES_MAX_RANK];
    int64_t n;
    int64_t *pinned;  /* linear tile indices, npinned (with repeats) */
    int64_t npinned;
    sw_fork_guard guard; /* while the tiles are pinned */
} projection;

static int add_pins(projection *pj, PyObject *tile_set)
{
    SwTileSetObject *s = (SwTileSetObject *)tile_set;
    for (int64_t i = 0; i < s->n; i++)
        pj->pinned[pj->npinned++] =
            sw_tiles_tile_index(&TILED(pj->self)->geo, s->coords + i * s->rank);
    return 0;
}

/* Busy and invalid tiles refuse the projection before anything happens. */
static int check_tiles(projection *pj, int64_t nsel)
{
    SwTiledEvictableObject *te = TILED(pj->self);
    for (int64_t i = 0; i < pj->npinned; i++) {
        sw_tile_rec *r = &te->tiles[pj->pinned[i]];
        int selected_or_promoted = i < nsel || (pj->plan != Py_None &&
                                                i < nsel + ((SwTileSetObject *)((
                                                    SwResidencyPlanObject *)pj->plan)->promote)->n);
        if (r->pending) {
            PyErr_SetString(PyExc_RuntimeError, "a tile this projection needs is pending in a "
                                                "residency request; wait() for it first");
            return -1;
        }
        if (selected_or_promoted && r->loc == SW_TILE_INVALID) {
            PyErr_SetString(PyExc_RuntimeError,
                            "a tile this projection needs is invalid (it holds no values)");
            return -1;
        }
    }
    return 0;
}

static int pin(projection *pj, int delta)
{
    SwTiledEvictableObject *te = TILED(pj->self);
    for (int64_t i = 0; i < pj->npinned; i++)
        te->tiles[pj->pinned[i]].pins += delta;
    te->busy += delta;
    return 0;
}

/* A projection another thread was running when the process forked (the
 * child, GIL held): its tiles stay pinned no longer, and the destination
 * it claimed is let go. Its handle never reached a caller. */
static void projection_forked(sw_fork_guard *g)
{
    projection *pj = (projection *)((char *)g - offsetof(projection, guard));
    pin(pj, -1);
    sw_fork_guard_drop_access(pj->dest, g->thread);
    if (pj->dest_token) {
        sw_py_carrier_relinquish(pj->dest, pj->dest_token);
        pj->dest_token = 0;
    }
    if (PyErr_Occurred())
        PyErr_Clear();
}

/* Whether the selection names tile t. */
static int pj_selects(projection *pj, int64_t t)
{
    const sw_tile_geometry *g = &TILED(pj->self)->geo;
    for (int32_t k = 0; k < g->rank; k++) {
        int64_t c = t % g->grid[k], found = 0;
        t /= g->grid[k];
        for (int64_t j = 0; !found && j < pj->sel.counts[k]; j++)
            found = pj->sel.coords[k][j] == c;
        if (!found)
            return 0;
    }
    return 1;
}

/* Host gather: every selected tile in host memory (or implicit), a host
 * destination. 1 done, 0 not applicable, -1 error. */
static int gather_host(projection *pj, unsigned char *dst, PyObject *const *staged)
{
    SwTiledEvictableObject *te = TILED(pj->self);
    size_t eb = sw_dtype_slot_bytes(SwDType_ID(te->dtype));
    sw_tile_source *src = PyMem_Calloc((size_t)te->geo.ntiles, sizeof *src);
    unsigned char *zeros = NULL;
    if (!src) {
        PyErr_NoMemory();
        return -1;
    }
    int ok = 1;
    for (int64_t t = 0; ok && t < te->geo.ntiles; t++) {
        sw_tile_rec *r = &te->tiles[t];
        if (!pj_selects(pj, t))
            continue; /* the gather reads selected tiles only */
        if (r->loc == SW_TILE_IMPLICIT) {
            if (!zeros && !(zeros = PyMem_Calloc((size_t)te->geo.tile_size, eb))) {
                PyMem_Free(src);
                PyErr_NoMemory();
                return -1;
            }
            src[t] = (sw_tile_source){zeros, 0};
        } else if (staged && staged[t] == Py_None) {
            src[t] = (sw_tile_source){NULL, 0}; /* already read into place */
        } else if (staged && staged[t]) {
            src[t] = (sw_tile_source){sw_tiled_host_base(staged[t]), 0};
        } else if (r->store) {
            src[t] = (sw_tile_source){sw_tiled_host_base(r->store), r->full};
            ok = src[t].base != NULL || r->loc == SW_TILE_INVALID;
        }
    }
    if (ok) {
        SwTensorObject *t = TENSOR(pj->tensor);
        const sw_layout *L = SwLayout_CORE(t->subs[0].layout);
        sw_error err;
        sw_status st;
        /* Pins keep the selected tiles' storage in place and release() is
         * refused while busy, so the copy needs no GIL. */
        Py_BEGIN_ALLOW_THREADS
        st = sw_tiles_gather(&te->geo, L, t->subs[0].offset, &pj->sel, src, eb, dst, &err);
        Py_END_ALLOW_THREADS
        if (st != SW_OK)
            ok = sw_py_raise(&err);
    } else {
        ok = 0;
    }
    PyMem_Free(zeros);
    PyMem_Free(src);
    return ok;
}

/* Through the tiers' and the destination's slot access. */
static int gather_slots(projection *pj)
{
    SwTiledEvictableObject *te = TILED(pj->self);
    SwTensorObject *t = TENSOR(pj->tensor);
    const sw_layout *L = SwLayout_CORE(t->subs[0].layout);
    const sw_carrier_ops *ops = &sw_tiled_evictable_ops;
    int rc = 0;
    if (pj->dest_token && sw_py_carrier_begin_owner(pj->dest, pj->dest_token) < 0)
        return -1;
    for (int64_t c = 0; rc == 0 && c < pj->n; c++) {
        int64_t s = sw_tiles_source_index(&te->geo, &pj->sel, pj->shape, c);
        PyObject *v = ops->load(pj->self, sw_tiles_layout_slot(L, t->subs[0].offset, s));
        rc = v ? sw_py_carrier_setitem(pj->dest, c, v) : -1;
        Py_XDECREF(v);
    }
    if (pj->dest_token)
        sw_py_carrier_end_owner(pj->dest, pj->dest_token);
    return rc;
}

/* Where tile t lands in the projection's dense destination when it lands
 * as one run in its own within-tile order: the identity layout, the tile
 * selected once on every axis, and every axis before the last one with a
 * tile extent above 1 selected once (so the destination's strides there
 * are the tile's). Its first destination slot in *start; 1 / 0. */
static int direct_start(projection *pj, int64_t t, int64_t *start)
{
    const sw_tile_geometry *g = &TILED(pj->self)->geo;
    SwTensorObject *tensor = TENSOR(pj->tensor);
    if (!sw_tiles_is_identity(g, SwLayout_CORE(tensor->subs[0].layout), tensor->subs[0].offset))
        return 0;
    int32_t last = -1;
    for (int32_t k = 0; k < g->rank; k++)
        if (g->tile[k] > 1)
            last = k;
    int64_t at = 0, mul = 1;
    for (int32_t k = 0; k < g->rank; k++) {
        int64_t c = t % g->grid[k], block = -1;
        t /= g->grid[k];
        if (k < last && pj->sel.counts[k] != 1)
            return 0;
        for (int64_t j = 0; j < pj->sel.counts[k]; j++) {
            if (pj->sel.coords[k][j] != c)
                continue;
            if (block >= 0)
                return 0; /* selected twice: two places to fill */
            block = j;
        }
        if (block < 0)
            return 0;
        at += block * g->tile[k] * mul;
        mul *= pj->shape[k];
    }
    *start = at;
    return 1;
}

/* Selected tiles kept by an engine-backed tier (an operation with
 * `_copy_async`, such as TensorStoreCarrier's) are first copied whole into
 * private host tiles, all at once, so the engine reads whole chunks
 * concurrently instead of serving slot reads; the host gather then reads
 * those copies. Residency does not change: the copies are dropped after.
 * 1 when staged (`staged[t]` holds the copies), 0 when no tile needs it,
 * -1 on error. */
static int stage_engine_tiles(projection *pj, PyObject **staged, int direct)
{
    SwTiledEvictableObject *te = TILED(pj->self);
    int any = 0, rc = 0;
    int64_t ntiles = te->geo.ntiles;
    PyObject **waits = PyMem_Calloc((size_t)ntiles, sizeof *waits);
    if (!waits) {
        PyErr_NoMemory();
        return -1;
    }
    for (int64_t t = 0; rc == 0 && t < ntiles; t++) {
        sw_tile_rec *r = &te->tiles[t];
        if (!r->store || sw_tiled_host_base(r->store) || !pj_selects(pj, t) ||
            !sw_tiled_engine_pair(r->store, te->primary))
            continue;
        /* A freshly made destination that the tile fills as one run takes
         * the engine's read straight into its place (no private tile, no
         * gather copy). */
        int64_t at, from = 0;
        if (direct && direct_start(pj, t, &at) && (!r->full || sw_tiled_span_base(pj->self, t, &from))) {
            if (sw_fault_hit("tile_copy")) {
                PyErr_SetString(PyExc_OSError, "injected fault: tile copy failed");
                rc = -1;
                break;
            }
            rc = sw_tiled_transfer_span_into(r->store, from, pj->dest, at, te->geo.tile_size, 1,
                                             &waits[t]);
            if (rc <= 0) {
                staged[t] = Py_None; /* in place: the gather skips it */
                any = 1;
                continue;
            }
            rc = 0; /* no engine hook after all: stage it */
        }
        PyObject *fresh = sw_tiled_new_tile_store(pj->self, te->primary, 0);
        if (!fresh || !sw_tiled_host_base(fresh)) {
            if (fresh)
                sw_tiled_drop_store(pj->self, fresh);
            rc = fresh ? 0 : -1;
            break;
        }
        staged[t] = fresh;
        any = 1;
        rc = sw_tiled_copy_tile(pj->self, t, fresh, &waits[t]);
    }
    PyObject *first = rc < 0 ? sw_py_take_exception() : NULL;
    for (int64_t t = 0; t < ntiles; t++) {
        if (!waits[t])
            continue;
        if (sw_tiled_route_wait(waits[t]) < 0 && !first)
            first = sw_py_take_exception();
        else if (PyErr_Occurred())
            PyErr_Clear();
        sw_tiled_route_unmark(te->tiles[t].store,
                              staged[t] == Py_None ? pj->dest : staged[t]);
        Py_DECREF(waits[t]);
    }
    PyMem_Free(waits);
    if (first) {
        sw_py_restore_exception(first);
        return -1;
    }
    return any;
}

static int gather(projection *pj)
{
    if (sw_fault_hit("tile_gather")) {
        PyErr_SetString(PyExc_OSError, "injected fault: projection gather failed");
        return -1;
    }
    unsigned char *dst = (unsigned char *)sw_tiled_host_base(pj->dest);
    SwTiledEvictableObject *te = TILED(pj->self);
    PyObject **staged = dst ? PyMem_Calloc((size_t)te->geo.ntiles, sizeof *staged) : NULL;
    if (dst && !staged) {
        PyErr_NoMemory();
        return -1;
    }
    int st = staged ? stage_engine_tiles(pj, staged, pj->default_dest) : 0;
    int done = st < 0 ? -1 : dst ? gather_host(pj, dst, staged) : 0;
    for (int64_t t = 0; staged && t < te->geo.ntiles; t++)
        if (staged[t] && staged[t] != Py_None)
            sw_tiled_drop_store(pj->self, staged[t]);
    PyMem_Free(staged);
    return done < 0 ? -1 : done ? 0 : gather_slots(pj);
}

static PyObject *compact_tensor(projection *pj)
{
    int32_t rank = TILED(pj->self)->geo.rank;
    uint8_t profile[SW_TILES_MAX_RANK];
    for (int32_t k = 0; k < rank; k++)
        profile[k] = SW_NODE_LEAF;
    sw_error err;
    sw_layout *core = sw_layout_canonical(rank, profile, pj->shape, &err);
    if (!core) {
        sw_py_raise(&err);
        return NULL;
    }
    PyObject *layout = sw_py_layout_wrap(core);
    PyObject *r = layout ? sw_py_tensor_new1(pj->dest, 0, layout) : NULL;
    Py_XDECREF(layout);
    return r;
}

static int record_node(projection *pj, PyObject *result);

/* The work after the checks; the outcome goes to the handle. */
static PyObject *run_projection(projection *pj)
{
    SwTiledEvictableObject *te = TILED(pj->self);
    PyObject *result = NULL;
    int rc = 0;
    if (pj->default_dest) {
        PyObject *fn = PyObject_GetAttrString(te->primary, "allocate_like");
        PyObject *args = fn ? Py_BuildValue("(L)", (long long)pj->n) : NULL;
        PyObject *kw = args ? Py_BuildValue("{s:O,s:O,s:O}", "mutable", Py_True, "dtype",
                                            te->dtype, "empty", Py_True)
                            : NULL;
        pj->dest = kw ? PyObject_Call(fn, args, kw) : NULL;
        Py_XDECREF(kw);
        Py_XDECREF(args);
        Py_XDECREF(fn);
        if (pj->dest && !SwCarrier_Check(pj->dest)) {
            PyErr_SetString(PyExc_TypeError, "the primary's allocate_like returned no Carrier");
            Py_CLEAR(pj->dest);
        }
        rc = pj->dest ? 0 : -1;
    } else {
        pj->dest_token = sw_py_carrier_claim(pj->dest);
        rc = pj->dest_token > 0 ? 0 : -1;
        int64_t size = 0;
        if (rc == 0 && sw_py_carrier_size(pj->dest, &size) == 0 && size < pj->n) {
            rc = sw_py_carrier_begin_owner(pj->dest, pj->dest_token);
            if (rc == 0) {
                rc = sw_py_carrier_allocate(pj->dest, pj->n);
                sw_py_carrier_end_owner(pj->dest, pj->dest_token);
            }
        } else if (PyErr_Occurred())
            rc = -1;
        if (pj->dest_token <= 0)
            pj->dest_token = 0;
    }
    if (rc == 0)
        rc = gather(pj);
    if (rc == 0 && pj->plan != Py_None) {
        SwTileSetObject *pr = (SwTileSetObject *)((SwResidencyPlanObject *)pj->plan)->promote;
        int64_t *idx = PyMem_Malloc((size_t)(pr->n + 1) * sizeof(int64_t));
        for (int64_t i = 0; idx && i < pr->n; i++)
            idx[i] = sw_tiles_tile_index(&te->geo, pr->coords + i * pr->rank);
        rc = idx ? sw_tiled_promote_indices(pj->self, idx, pr->n) : (PyErr_NoMemory(), -1);
        PyMem_Free(idx);
    }
    if (pj->dest_token) {
        sw_py_carrier_relinquish(pj->dest, pj->dest_token);
        pj->dest_token = 0;
    }
    if (rc == 0)
        result = compact_tensor(pj);
    if (result && record_node(pj, result) < 0)
        Py_CLEAR(result);
    if (!result && pj->default_dest && pj->dest) {
        PyObject *exc = sw_py_take_exception();
        if (sw_py_carrier_release(pj->dest) < 0)
            PyErr_Clear();
        sw_py_restore_exception(exc);
    }
    return result;
}

/* project(tensor, selection, destination=None) from vectorcall arguments. */
static int parse_project(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                         PyObject **a)
{
    static const char *const names[] = {"tensor", "selection", "destination"};
    a[0] = a[1] = NULL;
    a[2] = Py_None;
    if (nargs > 3) {
        PyErr_Format(PyExc_TypeError, "project() takes at most 3 arguments (%zd given)", nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++)
        a[i] = args[i];
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t j = 0; j < nkw; j++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, j);
        int k = 0;
        while (k < 3 && PyUnicode_CompareWithASCIIString(key, names[k]) != 0)
            k++;
        if (k == 3 || k < nargs) {
            PyErr_Format(PyExc_TypeError, k == 3 ? "project() got an unexpected keyword "
                                                   "argument %R"
                                                 : "project() got multiple values for %R",
                         key);
            return -1;
        }
        a[k] = args[nargs + j];
    }
    for (int k = 0; k < 2; k++)
        if (!a[k]) {
            PyErr_Format(PyExc_TypeError, "project() missing required argument '%s'", names[k]);
            return -1;
        }
    return 0;
}

PyObject *sw_tiled_project(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames)
{
    PyObject *a[3];
    if (parse_project(args, nargs, kwnames, a) < 0)
        return NULL;
    PyObject *tensor = a[0], *selection = a[1], *destination = a[2];
    SwTiledEvictableObject *te = TILED(self);
    projection pj = {.self = self, .tensor = tensor, .selection = selection};
    if (sw_tiled_check_tensor(self, tensor) < 0)
        return NULL;
    if (!PyObject_TypeCheck(selection, &SwTileSelection_Type)) {
        PyErr_Format(PyExc_TypeError, "selection must be a TileSelection, not %.100s",
                     Py_TYPE(selection)->tp_name);
        return NULL;
    }
    sw_tile_selection_view(selection, &pj.sel);
    sw_error err;
    if (sw_tiles_bind_selection(&te->geo, &pj.sel, &err) != SW_OK)
        return sw_py_raise(&err), NULL;
    pj.n = sw_tiles_compact_shape(&te->geo, &pj.sel, pj.shape);
    if (pj.n < 0) {
        PyErr_SetString(PyExc_OverflowError, "the projection is too large");
        return NULL;
    }
    if (destination != Py_None && check_destination(self, destination, pj.n) < 0)
        return NULL;
    pj.plan = policy_plan(self, selection);
    if (!pj.plan)
        return NULL;
    /* plan() was user code: re-check what it could have changed. */
    PyObject *required = sw_tile_selection_tile_set(selection);
    int64_t nsel = required ? ((SwTileSetObject *)required)->n : 0;
    SwResidencyPlanObject *plan = pj.plan != Py_None ? (SwResidencyPlanObject *)pj.plan : NULL;
    int64_t cap = nsel + (plan ? ((SwTileSetObject *)plan->promote)->n +
                                     ((SwTileSetObject *)plan->retain)->n
                               : 0);
    pj.pinned = required ? PyMem_Malloc((size_t)(cap + 1) * sizeof(int64_t)) : NULL;
    PyObject *handle = NULL;
    if (!pj.pinned) {
        if (required)
            PyErr_NoMemory();
        goto done;
    }
    add_pins(&pj, required);
    if (plan) {
        add_pins(&pj, plan->promote);
        add_pins(&pj, plan->retain);
    }
    /* The handle before the re-checks: allocating it may run finalizers. */
    handle = sw_py_await_new(&SwAwaitProjection_Type);
    if (!handle)
        goto done;
    if (sw_tiled_check_tensor(self, tensor) < 0 ||
        (destination != Py_None && check_destination(self, destination, pj.n) < 0) ||
        check_tiles(&pj, nsel) < 0) {
        Py_CLEAR(handle);
        goto done;
    }
    pj.default_dest = destination == Py_None;
    pj.dest = destination == Py_None ? NULL : Py_NewRef(destination);
    Py_INCREF(tensor);
    Py_INCREF(self);
    pin(&pj, 1);
    sw_fork_guard_enter(&pj.guard, projection_forked);
    PyObject *result = run_projection(&pj);
    PyObject *exc = result ? NULL : sw_py_take_exception();
    sw_fork_guard_leave(&pj.guard);
    pin(&pj, -1);
    if (result && plan && sw_tiled_evict_set(self, plan->evict) < 0)
        PyErr_WriteUnraisable(self); /* the projection itself succeeded */
    /* Progress: the projected values, in one step. */
    sw_py_await_set_total(handle, pj.n * (int64_t)sw_dtype_slot_bytes(SwDType_ID(te->dtype)));
    sw_py_await_complete(handle, result, exc);
    Py_XDECREF(result);
    Py_XDECREF(exc);
    Py_XDECREF(pj.dest);
    Py_DECREF(tensor);
    Py_DECREF(self);
done:
    PyMem_Free(pj.pinned);
    Py_XDECREF(required);
    Py_DECREF(pj.plan);
    return handle;
}

/* ---- the gather node (TE-11) ---------------------------------------------------------- */

typedef struct {
    SwOperationObject base;
    PyObject *selection;
} SwTileGatherObject;

static PyTypeObject SwTileGather_Type;

static int record_node(projection *pj, PyObject *result)
{
    if (!sw_py_grad_enabled() || TENSOR(pj->tensor)->dtype != sw_py_dtype(SW_DT_FLOAT32) ||
        TENSOR(result)->dtype != sw_py_dtype(SW_DT_FLOAT32))
        return 0;
    /* The source needs grad when it is a leaf the user follows or carries
     * a node; a detached non-leaf never reaches here with a node. */
    PyObject *op = SwTileGather_Type.tp_new(&SwTileGather_Type, NULL, NULL);
    if (!op)
        return -1;
    ((SwTileGatherObject *)op)->selection = Py_NewRef(pj->selection);
    int rc = sw_py_operation_store(op, &pj->tensor, 1);
    if (rc == 0)
        rc = sw_py_operation_attach(op, result);
    Py_DECREF(op);
    return rc;
}

static PyObject *gather_backward(PyObject *self, PyObject *g)
{
    SwTileGatherObject *node = (SwTileGatherObject *)self;
    SwOperationObject *o = &node->base;
    if (!o->saved || PyTuple_GET_SIZE(o->saved) != 1 || !node->selection) {
        PyErr_SetString(PyExc_RuntimeError,
                        "TileGatherOperation.backward: this node recorded no source, or a "
                        "backward pass released it (pass retain_graph=True to keep it)");
        return NULL;
    }
    if (!SwTensor_Check(g) || TENSOR(g)->nsub != 1) {
        PyErr_Format(PyExc_TypeError, "TileGatherOperation.backward: gradient must be a "
                     "one-plane Tensor, not %.100s", Py_TYPE(g)->tp_name);
        return NULL;
    }
    PyObject *source = PyTuple_GET_ITEM(o->saved, 0);
    SwTensorObject *st = TENSOR(source);
    PyObject *carrier = st->subs[0].carrier;
    sw_tile_geometry *geo = &TILED(carrier)->geo;
    sw_tile_selection sel;
    sw_tile_selection_view(node->selection, &sel);
    int64_t shape[SW_TILES_MAX_RANK];
    int64_t n = sw_tiles_compact_shape(geo, &sel, shape);
    if (SwLayout_CORE(TENSOR(g)->subs[0].layout)->size != n) {
        PyErr_Format(PyExc_ValueError, "TileGatherOperation.backward: gradient has %lld values, "
                     "the projection %lld",
                     (long long)SwLayout_CORE(TENSOR(g)->subs[0].layout)->size, (long long)n);
        return NULL;
    }
    float *gv = PyMem_Malloc(sizeof(float) * ((size_t)n + 1));
    if (!gv)
        return PyErr_NoMemory();
    PyObject *fresh = NULL, *grad = NULL, *result = NULL;
    if (sw_py_read_float_values(g, gv) < 0)
        goto done;
    /* A fresh carrier of the same configuration, every tile implicit 0;
     * writing a value materializes only the tile it lands in. */
    fresh = PyObject_CallMethod(carrier, "allocate_like", "L", (long long)geo->size);
    if (!fresh)
        goto done;
    const sw_layout *L = SwLayout_CORE(st->subs[0].layout);
    for (int64_t c = 0; c < n; c++) {
        if (gv[c] == 0.0f)
            continue;
        int64_t s = sw_tiles_source_index(geo, &sel, shape, c);
        PyObject *v = PyFloat_FromDouble(gv[c]);
        int rc = v ? sw_py_carrier_setitem(fresh, sw_tiles_layout_slot(L, st->subs[0].offset, s),
                                           v)
                   : -1;
        Py_XDECREF(v);
        if (rc < 0)
            goto done;
    }
    grad = sw_py_tensor_new1(fresh, st->subs[0].offset, st->subs[0].layout);
    if (grad)
        result = PyTuple_Pack(1, grad);
done:
    PyMem_Free(gv);
    Py_XDECREF(fresh);
    Py_XDECREF(grad);
    return result;
}

static int gather_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(((SwTileGatherObject *)self)->selection);
    return sw_py_operation_traverse(self, visit, arg);
}

static int gather_clear(PyObject *self)
{
    Py_CLEAR(((SwTileGatherObject *)self)->selection);
    return sw_py_operation_clear(self);
}

static void gather_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    if (((SwOperationObject *)self)->weakreflist)
        PyObject_ClearWeakRefs(self);
    gather_clear(self);
    Py_TYPE(self)->tp_free(self);
}

static PyMethodDef gather_methods[] = {
    {"backward", gather_backward, METH_O,
     "backward($self, gradient, /)\n--\n\n"
     "The source's gradient: a Tensor with the source's offset and layout over a\n"
     "new TiledEvictable whose tiles are implicit zeros except those the projected\n"
     "values came from, which hold the gradient's values."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject SwTileGather_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "strideweave.TileGatherOperation",
    .tp_basicsize = sizeof(SwTileGatherObject),
    .tp_dealloc = gather_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The autograd node of TiledEvictable.project.",
    .tp_traverse = gather_traverse,
    .tp_clear = gather_clear,
    .tp_methods = gather_methods,
};

int sw_tiled_project_init(PyObject *module)
{
    (void)module;
    str_plan = PyUnicode_InternFromString("plan");
    str_projection = PyUnicode_InternFromString("projection");
    SwTileGather_Type.tp_base = &SwOperation_Type;
    if (!str_plan || !str_projection || PyType_Ready(&SwTileGather_Type) < 0)
        return -1;
    sw_tiled_set_project(sw_tiled_project);
    return 0;
}
