/* TiledEvictable.project (contract-carriers TE-3, TE-10, TE-11): copy a
 * product of tiles out of a full Tensor over the carrier into a dense
 * Tensor, and its gather node.
 *
 * The binding checks the arguments with its own messages, makes the
 * destination (the primary's allocate_like when none is given) and hands
 * the rest to the core's projection (sw_tiled_evictable_project, the GIL
 * released): it pins the selected tiles and the tiles the residency
 * policy's plan() names (a hook, py_tiled_core.c), gathers into the
 * destination (host memory directly, a destination written in Python
 * through the write hook), runs the plan's promotions (all or nothing),
 * drops the pins and evicts the plan's evict tiles. The gather reads tiles
 * where they are, so a failure anywhere leaves residency unchanged. The
 * binding then builds the result Tensor and its autograd node. */
#include "sw_tiled.h"
#include "sw_tiled_core.h"
#include "sw_move.h"

#include <string.h>

#include "strideweave/tiled_evictable.h"

#define CARRIER(o) ((SwCarrierObject *)(o))
#define TENSOR(o) ((SwTensorObject *)(o))

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

/* ---- the work ------------------------------------------------------------------------ */

/* Busy and invalid selected tiles refuse the projection before anything
 * happens (the core checks again, and checks the plan's tiles). */
static int check_selected(PyObject *self, PyObject *selection)
{
    SwTiledEvictableObject *te = TILED(self);
    SwTileSetObject *req = (SwTileSetObject *)sw_tile_selection_tile_set(selection);
    if (!req)
        return -1;
    int rc = 0;
    for (int64_t i = 0; rc == 0 && i < req->n; i++) {
        sw_te_tile_state st;
        sw_error err;
        if (sw_tiled_evictable_tile_state(te->te, req->coords + i * req->rank, &st, &err) !=
            SW_OK)
            rc = sw_py_raise(&err);
        else if (st.pending) {
            PyErr_SetString(PyExc_RuntimeError, "a tile this projection needs is pending in a "
                                                "residency request; wait() for it first");
            rc = -1;
        } else if (st.location == SW_TE_INVALID) {
            PyErr_SetString(PyExc_RuntimeError,
                            "a tile this projection needs is invalid (it holds no values)");
            rc = -1;
        }
    }
    Py_DECREF(req);
    return rc;
}

/* The core's refusal of the plan's tiles, in the words of the selection's.
 * *refused: a refusal before any work (a check, the policy's plan), which
 * project() raises itself; else the work failed (the handle's error). */
static int raise_project_error(SwTiledEvictableObject *te, const sw_error *err, int *refused)
{
    PyObject *kept = sw_tiled_core_take_error(te->hooks, NULL);
    *refused = te->hooks->plan_failed ||
               (!kept && (err->code == SW_ETYPE || err->code == SW_EINVAL ||
                          err->code == SW_ESTATE || err->code == SW_EOVERFLOW));
    if (kept) {
        sw_py_restore_exception(kept);
        return -1;
    }
    if (err->code == SW_ESTATE && strstr(err->msg, "residency policy wants")) {
        PyObject *stale = sw_tiled_core_take_error(te->hooks, NULL);
        Py_XDECREF(stale);
        PyErr_SetString(PyExc_RuntimeError,
                        strstr(err->msg, "pending")
                            ? "a tile this projection needs is pending in a residency request; "
                              "wait() for it first"
                            : "a tile this projection needs is invalid (it holds no values)");
        return -1;
    }
    return sw_tiled_core_raise(te->hooks, NULL, err);
}

/* A fresh destination of n slots from the primary's allocate_like. */
static PyObject *default_destination(SwTiledEvictableObject *te, int64_t n)
{
    PyObject *fn = PyObject_GetAttrString(te->primary, "allocate_like");
    PyObject *args = fn ? Py_BuildValue("(L)", (long long)n) : NULL;
    PyObject *kw = args ? Py_BuildValue("{s:O,s:O,s:O}", "mutable", Py_True, "dtype", te->dtype,
                                        "empty", Py_True)
                        : NULL;
    PyObject *dest = kw ? PyObject_Call(fn, args, kw) : NULL;
    Py_XDECREF(kw);
    Py_XDECREF(args);
    Py_XDECREF(fn);
    if (dest && !SwCarrier_Check(dest)) {
        PyErr_SetString(PyExc_TypeError, "the primary's allocate_like returned no Carrier");
        Py_CLEAR(dest);
    }
    return dest;
}

static PyObject *compact_tensor(PyObject *dest, int32_t rank, const int64_t *shape)
{
    uint8_t profile[SW_TILES_MAX_RANK];
    for (int32_t k = 0; k < rank; k++)
        profile[k] = SW_NODE_LEAF;
    sw_error err;
    sw_layout *core = sw_layout_canonical(rank, profile, shape, &err);
    if (!core) {
        sw_py_raise(&err);
        return NULL;
    }
    PyObject *layout = sw_py_layout_wrap(core);
    PyObject *r = layout ? sw_py_tensor_new1(dest, 0, layout) : NULL;
    Py_XDECREF(layout);
    return r;
}

static int record_node(PyObject *tensor, PyObject *selection, PyObject *result);

/* The work after the checks: the destination, the core's projection, the
 * result Tensor and its node. */
static PyObject *run_projection(PyObject *self, PyObject *tensor, PyObject *selection,
                                const sw_tile_selection *sel, PyObject *destination, int64_t n,
                                const int64_t *shape, int *refused)
{
    SwTiledEvictableObject *te = TILED(self);
    int made = destination == Py_None;
    PyObject *dest = made ? default_destination(te, n) : Py_NewRef(destination);
    if (!dest)
        return NULL;
    int64_t size = 0;
    int rc = sw_py_carrier_size(dest, &size);
    if (rc == 0 && size < n)
        rc = sw_py_carrier_allocate(dest, n);
    /* reached through the hooks (a made CPU one: the tiles' batch reads) */
    int known = rc == 0 && (Py_TYPE(dest) != &SwCPU_Type || made);
    if (known && sw_tiled_core_add_store(te->hooks, dest) < 0) {
        known = 0;
        rc = -1;
    }
    PyObject *result = NULL;
    if (rc == 0) {
        SwTensorObject *t = TENSOR(tensor);
        const sw_layout *L = SwLayout_CORE(t->subs[0].layout);
        int64_t offset = t->subs[0].offset;
        sw_tiled_evictable *core = te->te;
        sw_carrier *d = CARRIER(dest)->core;
        sw_tensor *out = NULL;
        sw_error err;
        sw_status st;
        PyObject *stale = sw_tiled_core_take_error(te->hooks, NULL);
        Py_XDECREF(stale);
        te->hooks->plan_failed = 0;
        SW_TILED_NOGIL(st = sw_tiled_evictable_project(core, L, offset, sel, d, &out, &err));
        if (out)
            sw_tensor_unref(out);
        if (st != SW_OK)
            rc = raise_project_error(te, &err, refused);
        te->hooks->plan_failed = 0;
    }
    if (known)
        sw_tiled_core_forget_store(te->hooks, dest);
    if (rc == 0)
        result = compact_tensor(dest, te->geo.rank, shape);
    if (result && record_node(tensor, selection, result) < 0)
        Py_CLEAR(result);
    if (!result && made) {
        PyObject *exc = sw_py_take_exception();
        if (!sw_py_state_released(dest) && sw_py_carrier_release(dest) < 0)
            PyErr_Clear();
        sw_py_restore_exception(exc);
    }
    Py_DECREF(dest);
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
    if (sw_tiled_check_tensor(self, tensor) < 0)
        return NULL;
    if (!PyObject_TypeCheck(selection, &SwTileSelection_Type)) {
        PyErr_Format(PyExc_TypeError, "selection must be a TileSelection, not %.100s",
                     Py_TYPE(selection)->tp_name);
        return NULL;
    }
    sw_tile_selection sel;
    sw_tile_selection_view(selection, &sel);
    sw_error err;
    if (sw_tiles_bind_selection(&te->geo, &sel, &err) != SW_OK)
        return sw_py_raise(&err), NULL;
    int64_t shape[SW_TILES_MAX_RANK];
    int64_t n = sw_tiles_compact_shape(&te->geo, &sel, shape);
    if (n < 0) {
        PyErr_SetString(PyExc_OverflowError, "the projection is too large");
        return NULL;
    }
    if (destination != Py_None && check_destination(self, destination, n) < 0)
        return NULL;
    /* The handle before the re-checks: allocating it may run finalizers. */
    PyObject *handle = sw_py_await_new(&SwAwaitProjection_Type);
    if (!handle)
        return NULL;
    if (sw_tiled_check_tensor(self, tensor) < 0 ||
        (destination != Py_None && check_destination(self, destination, n) < 0) ||
        check_selected(self, selection) < 0) {
        Py_DECREF(handle);
        return NULL;
    }
    Py_INCREF(tensor);
    Py_INCREF(self);
    int refused = 0;
    PyObject *result = run_projection(self, tensor, selection, &sel, destination, n, shape,
                                      &refused);
    if (!result && refused) {
        Py_DECREF(handle);
        Py_DECREF(tensor);
        Py_DECREF(self);
        return NULL;
    }
    PyObject *exc = result ? NULL : sw_py_take_exception();
    /* Progress: the projected values, in one step. */
    sw_py_await_set_total(handle, n * (int64_t)sw_dtype_slot_bytes(SwDType_ID(te->dtype)));
    sw_py_await_complete(handle, result, exc);
    Py_XDECREF(result);
    Py_XDECREF(exc);
    Py_DECREF(tensor);
    Py_DECREF(self);
    return handle;
}

/* ---- the gather node (TE-11) ---------------------------------------------------------- */

typedef struct {
    SwOperationObject base;
    PyObject *selection;
} SwTileGatherObject;

static PyTypeObject SwTileGather_Type;

static int record_node(PyObject *tensor, PyObject *selection, PyObject *result)
{
    if (!sw_py_grad_enabled() || TENSOR(tensor)->dtype != sw_py_dtype(SW_DT_FLOAT32) ||
        TENSOR(result)->dtype != sw_py_dtype(SW_DT_FLOAT32))
        return 0;
    /* The source needs grad when it is a leaf the user follows or carries
     * a node; a detached non-leaf never reaches here with a node. */
    PyObject *op = SwTileGather_Type.tp_new(&SwTileGather_Type, NULL, NULL);
    if (!op)
        return -1;
    ((SwTileGatherObject *)op)->selection = Py_NewRef(selection);
    int rc = sw_py_operation_store(op, &tensor, 1);
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
    SwTileGather_Type.tp_base = &SwOperation_Type;
    if (PyType_Ready(&SwTileGather_Type) < 0)
        return -1;
    sw_tiled_set_project(sw_tiled_project);
    return 0;
}
