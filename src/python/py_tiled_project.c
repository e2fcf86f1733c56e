/* TiledEvictable.project (contract-carriers TE-3, TE-10, TE-11): copy a
 * product of tiles out of a full Tensor over the carrier into a dense
 * Tensor, and its gather node.
 *
 * The binding checks the arguments' Python types and asks the core's
 * checks of the carrier, the tensor and the selection
 * (sw_tiled_evictable_project_check) before it reads the next argument;
 * it checks a given destination itself (below: each check needs a Python
 * answer), makes the destination (the primary's allocate_like when none
 * is given) and the gather node, and hands the rest to the core's projection
 * (sw_tiled_evictable_project_start, the GIL released): it asks the
 * residency policy's plan() (a hook, py_tiled_core.c), refuses pending and
 * invalid tiles, pins the selected tiles and the plan's, gathers into the
 * destination on this thread (host memory directly, a destination written
 * in Python through the write hook) and issues the plan's promotions here.
 * A promotion copy a provider finishes later (a ProviderCompletion) does
 * not hold up project() (TE-8, TE-10): the core commits the promotion (all
 * or nothing), drops the pins and starts the eviction of the plan's evict
 * tiles (work of its own, never waited for here) when it reports, and its
 * commit callback completes the AwaitProjection with the
 * result Tensor and its node. The gather reads tiles where they are, so a
 * failure anywhere leaves residency unchanged. */
#include "sw_tiled.h"
#include "sw_tiled_core.h"
#include "sw_move.h"
#include "sw_fork_guard.h"

#include <string.h>

#include "strideweave/tiled_evictable.h"

#define CARRIER(o) ((SwCarrierObject *)(o))
#define TENSOR(o) ((SwTensorObject *)(o))

/* ---- TE-3 --------------------------------------------------------------------- */

/* A full Tensor over this carrier: the Python types here, then the core's
 * checks of the carrier and the tensor (released first, then the layout),
 * asked before the selection is looked at, as TE-3's order has it. */
static int sw_py_tiled_check_tensor(PyObject *self, PyObject *tensor)
{
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
    sw_error err;
    return sw_tiled_evictable_project_check(TILED(self)->te, SW_SUB_LAYOUT(&t->subs[0]),
                                            SW_SUB_OFFSET(&t->subs[0]), NULL, NULL, NULL,
                                            &err) == SW_OK
               ? 0
               : sw_py_raise(&err);
}

/* ---- argument checks -------------------------------------------------------------- */

/* A given destination, before anything is made or grown. The binding's
 * checks, not the core's (whose refusals read the same when a finalizer
 * changed the destination in between): each needs a Python answer the
 * core has not got (the class is the primary's Python class; a carrier
 * written in Python answers `_is_mutable`, `dtype()` and `size()` itself),
 * and a destination short of slots passes when it can grow (its allocate
 * hook), which project() does before the core sees it. */
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

/* Raise the error of a projection the core did not start: what a hook
 * raised (the policy's plan() first of all), else the core's error (a
 * pending or invalid tile, selected or named by the plan, is the core's
 * check after plan(), TE-10's order). *refused: a refusal (a check, the
 * policy's plan), which project() raises itself; else the handle's error. */
static int raise_project_error(SwTiledEvictableObject *te, const sw_error *err, int *refused)
{
    PyObject *kept = sw_py_tiled_core_take_error(te->hooks, NULL);
    *refused = te->hooks->plan_failed ||
               (!kept && (err->code == SW_ETYPE || err->code == SW_EINVAL ||
                          err->code == SW_ESTATE || err->code == SW_EOVERFLOW));
    if (kept) {
        sw_py_restore_exception(kept);
        return -1;
    }
    return sw_py_raise(err);
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

static PyObject *gather_node(PyObject *tensor, PyObject *selection, int *none);

/* One projection's Python side, from project() to the core's commit
 * callback (or, in a forked child, to the after-fork pass). GIL-protected
 * list. */
typedef struct projection {
    PyObject *self, *handle, *dest;
    PyObject *node; /* the gather node to attach, or NULL */
    int made;       /* the destination is the primary's allocate_like's */
    int held;       /* counted in flight for the exit hook */
    uint64_t hold;  /* ... under this token */
    int32_t rank;
    int64_t shape[SW_TILES_MAX_RANK];
    sw_te_work *work;
    struct projection *prev, *next;
} projection;

static projection *live_head;

static void projection_unlink(projection *p)
{
    if (p->prev)
        p->prev->next = p->next;
    else if (live_head == p)
        live_head = p->next;
    if (p->next)
        p->next->prev = p->prev;
    p->prev = p->next = NULL;
}

static void projection_free(projection *p)
{
    projection_unlink(p);
    if (p->work)
        sw_te_work_unref(p->work);
    Py_XDECREF(p->node);
    Py_XDECREF(p->dest);
    Py_XDECREF(p->handle);
    Py_XDECREF(p->self);
    int held = p->held;
    uint64_t hold = p->hold;
    PyMem_Free(p);
    if (held)
        sw_py_move_drop_inflight(hold);
}

/* A destination made for a projection that failed goes (its exception kept). */
static void drop_made(PyObject *dest)
{
    PyObject *exc = sw_py_take_exception();
    if (!sw_py_state_released(dest) && sw_py_carrier_release(dest) < 0)
        PyErr_Clear();
    sw_py_restore_exception(exc);
}

/* The outcome onto the handle (GIL held): the result Tensor over the
 * destination and its node, or the error; the projection is over. */
static void projection_end(projection *p, sw_status st, const sw_error *err)
{
    SwTiledEvictableObject *te = TILED(p->self);
    PyObject *result = NULL, *exc = NULL;
    if (st == SW_OK) {
        PyObject *stale = te->hooks ? sw_py_tiled_core_take_error(te->hooks, p->work) : NULL;
        Py_XDECREF(stale);
        result = compact_tensor(p->dest, p->rank, p->shape);
        if (result && p->node && sw_py_operation_attach(p->node, result) < 0)
            Py_CLEAR(result);
        if (!result)
            exc = sw_py_take_exception();
    } else {
        exc = te->hooks ? sw_py_tiled_core_take_error(te->hooks, p->work) : NULL;
        if (!exc && err->detail == SW_TE_ENDED_BY_FORK)
            exc = sw_py_move_forked_error("projection");
        if (!exc) {
            sw_py_raise(err);
            exc = sw_py_take_exception();
        }
    }
    if (!result && p->made)
        drop_made(p->dest);
    sw_py_await_complete(p->handle, result, exc);
    Py_XDECREF(result);
    Py_XDECREF(exc);
    projection_free(p);
}

/* A projection that never started (an exception set): a made destination
 * goes, nothing else changed. -1. */
static int projection_abandon(projection *p)
{
    if (p->made)
        drop_made(p->dest);
    projection_free(p);
    return -1;
}

/* The core's commit callback (any thread, no core lock held). */
static void projection_done(sw_te_work *w, void *user)
{
    projection *p = user;
    sw_py_gil g = sw_py_gil_ensure();
    sw_error err;
    sw_error_clear(&err);
    sw_status st = sw_te_work_wait(w, NULL, &err);
    projection_end(p, st, &err);
    if (PyErr_Occurred())
        PyErr_WriteUnraisable(NULL);
    sw_py_gil_release(g);
}

/* The work after the checks: the destination and the gather node, then the
 * core's projection, started on this thread with the GIL released (the
 * gather and the policy's promotion are issued here; a promotion copy a
 * provider finishes later leaves the handle open, and the core's commit
 * callback completes it). -1 with an exception: *refused when project()
 * raises it itself, else it is the handle's. */
static int start_projection(PyObject *self, PyObject *tensor, PyObject *selection,
                            const sw_tile_selection *sel, PyObject *destination, int64_t n,
                            const int64_t *shape, PyObject *handle, int *refused)
{
    SwTiledEvictableObject *te = TILED(self);
    int made = destination == Py_None;
    PyObject *dest = made ? default_destination(te, n) : Py_NewRef(destination);
    if (!dest)
        return -1;
    int64_t size = 0;
    int rc = sw_py_carrier_size(dest, &size);
    if (rc == 0 && size < n)
        rc = sw_py_carrier_allocate(dest, n);
    int none = 0;
    PyObject *node = rc == 0 ? gather_node(tensor, selection, &none) : NULL;
    projection *p = node || none ? PyMem_Calloc(1, sizeof *p) : NULL;
    if (!p) {
        if (node || none)
            PyErr_NoMemory();
        Py_XDECREF(node);
        if (made)
            drop_made(dest);
        Py_DECREF(dest);
        return -1;
    }
    p->self = Py_NewRef(self);
    p->handle = Py_NewRef(handle);
    p->dest = dest;
    p->node = node;
    p->made = made;
    p->rank = te->geo.rank;
    memcpy(p->shape, shape, (size_t)p->rank * sizeof *shape);
    /* reached through the hooks (a made CPU one: the tiles' batch reads) */
    int known = Py_TYPE(dest) != &SwCPU_Type || made;
    if (known && sw_py_tiled_core_add_store(te->hooks, dest) < 0)
        return projection_abandon(p);
    /* Work that outlives this call keeps exit waiting until it committed. */
    p->held = sw_py_move_hold_inflight(&p->hold) == 0;
    if (!p->held)
        PyErr_Clear();
    SwTensorObject *t = TENSOR(tensor);
    const sw_layout *L = SW_SUB_LAYOUT(&t->subs[0]);
    int64_t offset = SW_SUB_OFFSET(&t->subs[0]);
    sw_tiled_evictable *core = te->te;
    sw_carrier *d = CARRIER(dest)->core;
    sw_te_work *w = NULL;
    sw_error err;
    sw_status st;
    PyObject *stale = sw_py_tiled_core_take_error(te->hooks, NULL);
    Py_XDECREF(stale);
    te->hooks->plan_failed = 0;
    SW_TILED_NOGIL(st = sw_tiled_evictable_project_start(core, L, offset, sel, d, &w, &err));
    /* The gather is over: no hook reaches the destination any more. */
    if (known)
        sw_py_tiled_core_forget_store(te->hooks, dest);
    if (st != SW_OK) {
        raise_project_error(te, &err, refused);
        te->hooks->plan_failed = 0;
        return projection_abandon(p);
    }
    te->hooks->plan_failed = 0;
    p->work = w;
    p->next = live_head;
    if (live_head)
        live_head->prev = p;
    live_head = p;
    if (!p->held) {
        /* Exit began: wait here rather than leave work behind. */
        SW_TILED_NOGIL(sw_te_work_wait(w, NULL, NULL));
    }
    if (sw_te_work_on_done(w, projection_done, p, &err) != SW_OK)
        projection_end(p, SW_ESTATE, &err); /* cannot happen: one callback per handle */
    return 0;
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

static PyObject *sw_py_tiled_project(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                     PyObject *kwnames)
{
    PyObject *a[3];
    if (parse_project(args, nargs, kwnames, a) < 0)
        return NULL;
    PyObject *tensor = a[0], *selection = a[1], *destination = a[2];
    SwTiledEvictableObject *te = TILED(self);
    if (sw_py_tiled_check_tensor(self, tensor) < 0)
        return NULL;
    if (!PyObject_TypeCheck(selection, &SwTileSelection_Type)) {
        PyErr_Format(PyExc_TypeError, "selection must be a TileSelection, not %.100s",
                     Py_TYPE(selection)->tp_name);
        return NULL;
    }
    sw_tile_selection sel;
    sw_py_tile_selection_view(selection, &sel);
    sw_error err;
    int64_t n, shape[SW_TILES_MAX_RANK];
    /* the tensor was checked just above, with no Python code since */
    if (sw_tiled_evictable_project_check(te->te, NULL, 0, &sel, &n, shape, &err) != SW_OK)
        return sw_py_raise(&err), NULL;
    if (destination != Py_None && check_destination(self, destination, n) < 0)
        return NULL;
    /* The handle before the re-checks: allocating it may run finalizers. */
    PyObject *handle = sw_py_await_new(&SwAwaitProjection_Type);
    if (!handle)
        return NULL;
    if (sw_py_tiled_check_tensor(self, tensor) < 0 ||
        (destination != Py_None && check_destination(self, destination, n) < 0)) {
        Py_DECREF(handle);
        return NULL;
    }
    Py_INCREF(tensor);
    Py_INCREF(self);
    /* Progress: the projected values, in one step. */
    sw_py_await_set_total(handle, n * (int64_t)sw_dtype_slot_bytes(SwDType_ID(te->dtype)));
    int refused = 0;
    if (start_projection(self, tensor, selection, &sel, destination, n, shape, handle,
                         &refused) < 0) {
        if (refused) {
            Py_CLEAR(handle);
        } else {
            PyObject *exc = sw_py_take_exception();
            sw_py_await_complete(handle, NULL, exc);
            Py_XDECREF(exc);
        }
    }
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

/* The gather node of a projection of `tensor` (its operands saved now, the
 * version with them), attached to the result when the projection commits;
 * NULL with *none set when no node is recorded, NULL alone on error. */
static PyObject *gather_node(PyObject *tensor, PyObject *selection, int *none)
{
    *none = 0;
    if (!sw_py_grad_enabled() || TENSOR(tensor)->dtype != sw_py_dtype(SW_DT_FLOAT32)) {
        *none = 1;
        return NULL;
    }
    /* The source needs grad when it is a leaf the user follows or carries
     * a node; a detached non-leaf never reaches here with a node. */
    PyObject *op = SwTileGather_Type.tp_new(&SwTileGather_Type, NULL, NULL);
    if (!op)
        return NULL;
    ((SwTileGatherObject *)op)->selection = Py_NewRef(selection);
    if (sw_py_operation_store(op, &tensor, 1) < 0)
        Py_CLEAR(op);
    return op;
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
    sw_py_tile_selection_view(node->selection, &sel);
    int64_t shape[SW_TILES_MAX_RANK];
    int64_t n = sw_tiles_compact_shape(geo, &sel, shape);
    if (SW_SUB_LAYOUT(&TENSOR(g)->subs[0])->size != n) {
        PyErr_Format(PyExc_ValueError, "TileGatherOperation.backward: gradient has %lld values, "
                     "the projection %lld",
                     (long long)SW_SUB_LAYOUT(&TENSOR(g)->subs[0])->size, (long long)n);
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
    const sw_layout *L = SW_SUB_LAYOUT(&st->subs[0]);
    for (int64_t c = 0; c < n; c++) {
        if (gv[c] == 0.0f)
            continue;
        int64_t s = sw_tiles_source_index(geo, &sel, shape, c);
        PyObject *v = PyFloat_FromDouble(gv[c]);
        int rc = v ? sw_py_carrier_setitem(fresh, sw_tiles_layout_slot(L, SW_SUB_OFFSET(&st->subs[0]), s),
                                           v)
                   : -1;
        Py_XDECREF(v);
        if (rc < 0)
            goto done;
    }
    grad = sw_py_tensor_new1(fresh, SW_SUB_OFFSET(&st->subs[0]), st->subs[0].layout);
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

/* In a forked child (GIL held): the core ended the projections the child
 * inherited inside fork() (pins dropped, residency as it was), but the
 * callbacks that complete their handles never run here. Each handle ends
 * now: with its outcome when the work had committed, else with the
 * RuntimeError of inherited work. The in-flight counts were reset. */
static void end_inherited(void)
{
    while (live_head) {
        projection *p = live_head;
        p->held = 0;
        sw_py_await_reset_after_fork(p->handle);
        sw_error err;
        sw_error_clear(&err);
        sw_status st = sw_te_work_done(p->work)
                           ? sw_te_work_wait(p->work, NULL, &err)
                           : sw_py_tiled_core_forked_error(&err);
        projection_end(p, st, &err); /* unlinks p */
        if (PyErr_Occurred())
            PyErr_WriteUnraisable(NULL);
    }
}

/* TiledEvictable.project: this file owns the projection, so it gives the
 * type (made ready by py_tiled_evictable.c, below this file) its method. */
static PyMethodDef te_project_methods[] = {
    {"project", (PyCFunction)(void (*)(void))sw_py_tiled_project, METH_FASTCALL | METH_KEYWORDS,
     "project($self, tensor, selection, destination=None)\n--\n\n"
     "Start copying the tiles `selection` picks out of `tensor` (a full Tensor\n"
     "over this carrier) into a dense Tensor on `destination` (a carrier of the\n"
     "primary's class; a new one when None). Returns an AwaitProjection whose\n"
     "wait() gives that Tensor; copies the residency policy's promotion leaves to a\n"
     "storage provider finish in the background (the handle is done after them).\n"
     "The source never changes. Raises TypeError for a\n"
     "wrong argument type, ValueError for a tensor that does not cover the tiles\n"
     "or a selection outside the grid, RuntimeError for released or busy tiles."},
    {NULL, NULL, 0, NULL},
};

int sw_py_tiled_project_init(PyObject *module)
{
    (void)module;
    SwTileGather_Type.tp_base = &SwOperation_Type;
    if (PyType_Ready(&SwTileGather_Type) < 0 || sw_py_fork_register_inherited_end(end_inherited) < 0)
        return -1;
    return sw_py_type_add_methods(&SwTiledEvictable_Type, te_project_methods);
}
