/* Views (contract-core V-1, V-2, V-5..V-8): permute, reshape, broadcast_to
 * and the slice view behind Tensor.__getitem__.
 *
 * A view is a fresh representation over the same carriers: the transform
 * applies to L_0 and S_0 (V-2), everything deeper is kept, and the result
 * passes the full T-4..T-7 validation. Nothing is read, written, allocated
 * in a carrier or versioned. With grad mode on and a Float32 source, each
 * view records a node (V-9); broadcast_to's node is its dispatched
 * operation (F-4), the others are recorded by view_record. */
#include "sw_python.h"
#include "sw_messages.h"
#include "strideweave/layout_view.h"

#include <string.h>

/* ---- shared ----------------------------------------------------------- */

static SwTensorObject *require_tensor(PyObject *obj, const char *fn)
{
    if (!SwTensor_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s() requires a Tensor as its first argument, not %.100s",
                     fn, Py_TYPE(obj)->tp_name);
        return NULL;
    }
    return (SwTensorObject *)obj;
}

static int view_record(const char *kind, PyObject *source, PyObject *result, PyObject *param,
                       const sw_view_spec *spec);

/* The core's view of plane 0 (V-2: L_0 and the offset) and, with two
 * planes, of the adjacent layout S_0; everything deeper is kept. */
static sw_status view_core(SwTensorObject *t, const sw_view_spec *spec, sw_tensor **view,
                           sw_layout **s0, sw_view_fault *f, sw_error *err)
{
    const sw_layout *adjacent =
        t->nsub > 1 ? SwLayout_CORE(PyTuple_GET_ITEM(t->adjacent, 0)) : NULL;
    *s0 = NULL;
    return sw_tensor_view(t->subs[0].core, adjacent, spec, view, s0, f, err);
}

/* Whether the core refuses the view `spec` of t (nothing is kept); *f and
 * *err then say why. */
static int view_refused(SwTensorObject *t, const sw_view_spec *spec, sw_view_fault *f,
                        sw_error *err)
{
    sw_tensor *view;
    sw_layout *s0;
    if (view_core(t, spec, &view, &s0, f, err) != SW_OK)
        return 1;
    sw_tensor_unref(view);
    sw_layout_free(s0);
    return 0;
}

/* The view's Tensor around the core's view (both consumed), and its node
 * recorded with the view's argument as the user gave it (`param`) and in
 * the core's form (`spec`). */
static PyObject *finish_view(const char *kind, SwTensorObject *t, sw_tensor *view,
                             sw_layout *new_s0, PyObject *param, const sw_view_spec *spec)
{
    sw_error err;
    PyObject *l0 = NULL, *s0 = NULL, *result = NULL;
    sw_layout *l = sw_layout_copy(sw_tensor_layout(view), &err); /* the Layout object's own */
    if (!l) {
        sw_py_raise(&err);
        goto done;
    }
    if (!(l0 = sw_py_layout_wrap(l)))
        goto done;
    if (new_s0) {
        s0 = sw_py_layout_wrap(new_s0);
        new_s0 = NULL;
        if (!s0)
            goto done;
    }
    result = sw_py_tensor_view_of((PyObject *)t, view, l0, s0);
    view = NULL;
    if (result && param && view_record(kind, (PyObject *)t, result, param, spec) < 0)
        Py_CLEAR(result);
done:
    sw_tensor_unref(view);
    sw_layout_free(new_s0);
    Py_XDECREF(l0);
    Py_XDECREF(s0);
    return result;
}

/* An integer argument as int64, saturating past the ends: the sign
 * survives, so the core's range checks refuse it as too large or too small
 * (and the message shows the object itself). */
static int read_int64(PyObject *obj, int64_t *out)
{
    long long v;
    int overflow;
    if (sw_py_index_ll(obj, &v, &overflow) < 0)
        return -1;
    *out = overflow > 0 ? INT64_MAX : overflow < 0 ? INT64_MIN : (int64_t)v;
    return 0;
}

/* ---- slice view (V-5) --------------------------------------------------- */

static int contains_slice(PyObject *obj)
{
    if (PySlice_Check(obj))
        return 1;
    if (!PyTuple_Check(obj) && !PyList_Check(obj))
        return 0;
    if (Py_EnterRecursiveCall(" while reading a tensor key"))
        return -1;
    int found = 0;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(obj) && found == 0; i++)
        found = contains_slice(PySequence_Fast_GET_ITEM(obj, i));
    Py_LeaveRecursiveCall();
    return found;
}

/* The key as a bare slice's one-entry tuple or the tuple itself, with no
 * slice nested deeper. New reference, or NULL with TypeError. */
static PyObject *key_tuple(PyObject *key)
{
    PyObject *tuple;
    if (PySlice_Check(key))
        return PyTuple_Pack(1, key);
    if (!PyTuple_Check(key)) {
        PyErr_Format(PyExc_TypeError,
                     "a slice key must be a slice or a tuple of integers and slices, not %.100s",
                     Py_TYPE(key)->tp_name);
        return NULL;
    }
    tuple = Py_NewRef(key);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tuple); i++) {
        PyObject *e = PyTuple_GET_ITEM(tuple, i);
        int c = PyTuple_Check(e) || PyList_Check(e) ? contains_slice(e) : 0;
        if (c > 0)
            PyErr_SetString(PyExc_TypeError,
                            "slices may appear only as top-level entries of a tuple key");
        if (c != 0) {
            Py_DECREF(tuple);
            return NULL;
        }
    }
    return tuple;
}

/* A slice entry's step, start and stop read into *e (Python's defaults
 * left to the core). *step_read tells whether e->step holds the step when
 * a later part cannot be read. */
static int read_range(PyObject *entry, int m, sw_slice_entry *e, int *step_read)
{
    PySliceObject *s = (PySliceObject *)entry;
    *e = (sw_slice_entry){.kind = SW_SLICE_RANGE, .step = 1};
    *step_read = 0;
    if (s->step != Py_None) {
        if (!sw_py_is_integer(s->step)) {
            PyErr_Format(PyExc_TypeError, "slice for mode %d: step must be an integer, not %.100s",
                         m, Py_TYPE(s->step)->tp_name);
            return -1;
        }
        if (read_int64(s->step, &e->step) < 0)
            return -1;
    }
    *step_read = 1;
    /* G-2: bool is never an integer, though Python's slices take True as 1. */
    PyObject *bounds[2] = {s->start, s->stop};
    for (int b = 0; b < 2; b++) {
        if (bounds[b] != Py_None && !sw_py_is_integer(bounds[b])) {
            PyErr_Format(PyExc_TypeError,
                         "slice for mode %d: %s must be an integer or None, not %.100s", m,
                         b == 0 ? "start" : "stop", Py_TYPE(bounds[b])->tp_name);
            return -1;
        }
    }
    e->has_start = s->start != Py_None;
    e->has_stop = s->stop != Py_None;
    if ((e->has_start && read_int64(s->start, &e->start) < 0) ||
        (e->has_stop && read_int64(s->stop, &e->stop) < 0))
        return -1;
    return 0;
}

/* Entry m of the key into key[m]. On failure, *checkable is how many
 * entries the core can still check (m, or m + 1 when entry m's step, the
 * first thing the core checks of it, was read). */
static int read_entry(PyObject *entry, int m, sw_slice_entry *key, int32_t *checkable)
{
    int step_read = 0;
    *checkable = m;
    if (sw_py_is_integer(entry)) {
        key[m] = (sw_slice_entry){.kind = SW_SLICE_INDEX};
        return read_int64(entry, &key[m].index);
    }
    if (PySlice_Check(entry)) {
        int rc = read_range(entry, m, &key[m], &step_read);
        if (rc < 0 && step_read)
            *checkable = m + 1;
        return rc;
    }
    PyErr_Format(PyExc_TypeError, "slice key for mode %d must be an integer or a slice, not %.100s",
                 m, Py_TYPE(entry)->tp_name);
    return -1;
}

/* The core's refusal of `key` as today's exception: messages that show the
 * user's own objects are phrased here, the others are the core's. */
static void raise_slice_refusal(SwTensorObject *t, PyObject *tuple, const sw_slice_entry *key,
                                const sw_view_fault *f, const sw_error *err)
{
    int m = f->entry;
    PyObject *e = m >= 0 ? PyTuple_GET_ITEM(tuple, m) : NULL;
    long long size = (long long)f->mode_size;
    switch (f->reason) {
    case SW_VIEW_INDEX:
        if (key[m].index < 0)
            PyErr_Format(PyExc_ValueError,
                         "index %R is out of range for mode %d of size %lld: indices run "
                         "from 0 to %lld and do not wrap around", e, m, size, size - 1);
        else
            PyErr_Format(PyExc_ValueError, "index %R is out of range for mode %d of size %lld",
                         e, m, size);
        return;
    case SW_VIEW_STEP:
        PyErr_Format(PyExc_ValueError, "slice for mode %d: step must be positive, not %R", m,
                     ((PySliceObject *)e)->step);
        return;
    case SW_VIEW_START:
        PyErr_Format(PyExc_ValueError, "slice start %R is out of range for mode %d of size %lld",
                     ((PySliceObject *)e)->start, m, size);
        return;
    case SW_VIEW_NOT_AT_ORIGIN:
        PyErr_Format(PyExc_NotImplementedError,
                     "slice key for mode %d: a tensor with %zd planes (%s) can only be "
                     "sliced by selections that start at coordinate 0", m, t->nsub,
                     sw_dtype_info_of(SwDType_ID(t->dtype))->name);
        return;
    default:
        sw_py_raise(err);
    }
}

/* Entry m could not be read: an earlier entry's refusal comes first (V-5
 * checks entries left to right), and so does entry m's step refusal when
 * its step was read (checkable == m + 1); else the reading error stands.
 * The core sees the unread rest as whole-mode slices, which it never
 * refuses. */
static void refuse_unread_entry(SwTensorObject *t, PyObject *tuple, sw_slice_entry *key,
                                int32_t m, int32_t checkable)
{
    int32_t rank = SW_SUB_LAYOUT(&t->subs[0])->rank;
    sw_view_spec spec = {.kind = SW_VIEW_KIND_SLICE, .n = rank, .key = key};
    sw_view_fault f;
    sw_error err;
    if (checkable == 0)
        return;
    if (checkable > m) /* entry m: only its step was read */
        key[m].has_start = key[m].has_stop = 0;
    for (int32_t k = checkable; k < rank; k++)
        key[k] = (sw_slice_entry){.kind = SW_SLICE_RANGE, .step = 1};
    if (!view_refused(t, &spec, &f, &err) || (f.entry >= m && f.reason != SW_VIEW_STEP))
        return; /* the reading error stands */
    PyErr_Clear();
    raise_slice_refusal(t, tuple, key, &f, &err);
}

enum { SMALL_KEY = 8 };

PyObject *sw_py_tensor_slice(PyObject *obj, PyObject *key)
{
    SwTensorObject *t = (SwTensorObject *)obj;
    int32_t rank = SW_SUB_LAYOUT(&t->subs[0])->rank;
    sw_tensor *view;
    sw_layout *s0;
    sw_slice_entry small[SMALL_KEY], *entries = NULL; /* usual keys: no allocation */
    PyObject *result = NULL;
    sw_view_fault f;
    sw_error err;

    PyObject *tuple = key_tuple(key);
    if (!tuple)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(tuple);
    /* 1. one entry per top-level mode, before any entry is read */
    if (n != rank) {
        PyErr_Format(PyExc_ValueError,
                     "slice key has %zd entr%s but the tensor has %d top-level mode%s (rank "
                     "%d); give one integer or slice per mode, e.g. t[0, :]",
                     n, n == 1 ? "y" : "ies", (int)rank, sw_py_msg_s(rank), (int)rank);
        goto done;
    }
    entries = n <= SMALL_KEY ? small : PyMem_Calloc((size_t)n, sizeof *entries);
    if (!entries) {
        PyErr_NoMemory();
        goto done;
    }
    /* 2. the entries read (user code, __index__, runs here), then checked
     * and applied by the core */
    for (int32_t m = 0; m < rank; m++) {
        int32_t checkable;
        if (read_entry(PyTuple_GET_ITEM(tuple, m), m, entries, &checkable) < 0) {
            refuse_unread_entry(t, tuple, entries, m, checkable);
            goto done;
        }
    }
    /* a multi-plane view keeps its offsets: every selection starts at 0 */
    sw_view_spec spec = {.kind = SW_VIEW_KIND_SLICE, .n = rank, .key = entries};
    if (view_core(t, &spec, &view, &s0, &f, &err) != SW_OK) {
        raise_slice_refusal(t, tuple, entries, &f, &err);
        goto done;
    }
    result = finish_view("slice", t, view, s0, tuple, &spec);
done:
    if (entries != small)
        PyMem_Free(entries);
    Py_DECREF(tuple);
    return result;
}

/* ---- permute (V-6) -------------------------------------------------------- */

/* The order as a tuple of ints: the node's parameter. */
static PyObject *order_tuple(const int64_t *order, Py_ssize_t n)
{
    PyObject *param = PyTuple_New(n);
    for (Py_ssize_t j = 0; param && j < n; j++) {
        PyObject *v = PyLong_FromLongLong(order[j]);
        if (!v)
            Py_CLEAR(param);
        else
            PyTuple_SET_ITEM(param, j, v);
    }
    return param;
}

static void raise_permute_refusal(PyObject *const *items, const int64_t *order, int rank,
                                  const sw_view_fault *f, const sw_error *err)
{
    if (f->reason == SW_VIEW_ORDER_RANGE)
        PyErr_Format(PyExc_ValueError, "permute order entry %R is outside [0, %d)",
                     items[f->entry], rank);
    else if (f->reason == SW_VIEW_ORDER_REPEAT)
        PyErr_Format(PyExc_ValueError, "permute order repeats mode %lld",
                     (long long)order[f->entry]);
    else
        sw_py_raise(err);
}

/* Entry j's __index__ raised: an earlier entry's refusal comes first
 * (V-6 checks entries left to right). The core sees the unread rest as 0,
 * which can only be refused at or after entry j. */
static void refuse_unread_order(SwTensorObject *t, PyObject *const *items, int64_t *order,
                                int32_t j)
{
    int32_t rank = SW_SUB_LAYOUT(&t->subs[0])->rank;
    sw_view_spec spec = {.kind = SW_VIEW_KIND_PERMUTE, .n = rank, .order = order};
    sw_view_fault f;
    sw_error err;
    for (int32_t k = j; k < rank; k++)
        order[k] = 0;
    if (!view_refused(t, &spec, &f, &err) || f.entry >= j)
        return; /* the reading error stands */
    PyErr_Clear();
    raise_permute_refusal(items, order, (int)rank, &f, &err);
}

static PyObject *view_permute(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames)
{
    PyObject *const *items;
    Py_ssize_t n;
    int64_t *order = NULL;
    sw_tensor *view;
    sw_layout *s0;
    sw_view_fault f;
    sw_error err;
    PyObject *result = NULL, *seq = NULL;
    (void)mod;

    if (kwnames && PyTuple_GET_SIZE(kwnames) > 0) {
        PyErr_SetString(PyExc_TypeError, "permute() takes no keyword arguments");
        return NULL;
    }
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "permute() missing required argument 'tensor'");
        return NULL;
    }
    SwTensorObject *t = require_tensor(args[0], "permute");
    if (!t)
        return NULL;
    int32_t rank = SW_SUB_LAYOUT(&t->subs[0])->rank;

    items = args + 1;
    n = nargs - 1;
    if (n == 1 && (PyList_Check(args[1]) || PyTuple_Check(args[1]))) {
        seq = PySequence_Tuple(args[1]); /* a snapshot __index__ cannot mutate */
        if (!seq)
            return NULL;
        items = &PyTuple_GET_ITEM(seq, 0);
        n = PyTuple_GET_SIZE(seq);
    } else if (n == 1 && !sw_py_is_integer(args[1])) {
        PyErr_Format(PyExc_TypeError,
                     "permute order must be integers or one list/tuple of integers, not %.100s",
                     Py_TYPE(args[1])->tp_name);
        return NULL;
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        if (!sw_py_is_integer(items[j])) {
            PyErr_Format(PyExc_TypeError, "permute order entry %zd must be an integer, not %.100s",
                         j, Py_TYPE(items[j])->tp_name);
            goto done;
        }
    }
    if (n != rank) { /* before any entry's __index__ runs */
        PyErr_Format(PyExc_ValueError,
                     "permute order has %zd entr%s but the tensor has rank %d; name every "
                     "top-level mode once, e.g. permute(t, 1, 0)", n, n == 1 ? "y" : "ies",
                     (int)rank);
        goto done;
    }
    order = PyMem_Malloc(sizeof(int64_t) * (size_t)(n + 1));
    if (!order) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        Py_ssize_t v = PyNumber_AsSsize_t(items[j], NULL); /* clamps huge values */
        if (v == -1 && PyErr_Occurred()) {
            refuse_unread_order(t, items, order, (int32_t)j);
            goto done;
        }
        order[j] = v;
    }
    sw_view_spec spec = {.kind = SW_VIEW_KIND_PERMUTE, .n = (int32_t)n, .order = order};
    if (view_core(t, &spec, &view, &s0, &f, &err) != SW_OK) {
        raise_permute_refusal(items, order, (int)rank, &f, &err);
        goto done;
    }
    PyObject *param = order_tuple(order, n);
    if (!param) {
        sw_tensor_unref(view);
        sw_layout_free(s0);
        goto done;
    }
    result = finish_view("permute", t, view, s0, param, &spec);
    Py_DECREF(param);
done:
    PyMem_Free(order);
    Py_XDECREF(seq);
    return result;
}

/* ---- reshape (V-7) -------------------------------------------------------- */

/* The (tensor, Shape) arguments of reshape and broadcast_to, parsed and
 * checked in one order for both: the Tensor, and the Shape (borrowed) in
 * *shape. NULL with an exception set. */
static SwTensorObject *tensor_and_shape(const char *fn, const char *const names[2],
                                        PyObject *const *args, Py_ssize_t nargs,
                                        PyObject *kwnames, PyObject **shape)
{
    PyObject *a[2];
    if (sw_py_parse_required(fn, names, 2, args, nargs, kwnames, a) < 0)
        return NULL;
    SwTensorObject *t = require_tensor(a[0], fn);
    if (!t)
        return NULL;
    if (!SwShape_Check(a[1])) {
        PyErr_Format(PyExc_TypeError, "%s expects a Shape, e.g. Shape(4, 6), not %.100s", fn,
                     _PyType_Name(Py_TYPE(a[1])));
        return NULL;
    }
    *shape = a[1];
    return t;
}

static PyObject *view_reshape(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames)
{
    static const char *const names[] = {"tensor", "shape"};
    PyObject *shape;
    sw_tensor *view;
    sw_layout *s0;
    sw_view_fault f;
    sw_error err;
    (void)mod;
    SwTensorObject *t = tensor_and_shape("reshape", names, args, nargs, kwnames, &shape);
    if (!t)
        return NULL;
    const sw_layout *T = SwLayout_CORE(shape);
    sw_view_spec spec = {.kind = SW_VIEW_KIND_RESHAPE, .n = T->nprofile, .profile = T->profile,
                         .extents = T->extents};
    if (view_core(t, &spec, &view, &s0, &f, &err) == SW_OK)
        return finish_view("reshape", t, view, s0, shape, NULL);
    if (f.reason == SW_VIEW_SPACING && f.plane == 0)
        PyErr_Format(PyExc_ValueError,
                     "reshape needs the tensor's elements evenly spaced in first-mode-fastest "
                     "order, and layout %R does not place them so (a permuted view, for "
                     "example); copy the values into a new tensor first, e.g. "
                     "friendly.tensor(t.tolist(), layout=...)", t->subs[0].layout);
    else if (f.reason == SW_VIEW_SPACING)
        PyErr_SetString(PyExc_ValueError,
                        "reshape needs the scale plane's elements evenly spaced in "
                        "first-mode-fastest order, and this tensor's scale layout does not "
                        "place them so");
    else
        sw_py_raise(&err);
    return NULL;
}

/* ---- broadcast_to (V-8) --------------------------------------------------- */

/* The broadcast view itself, recording nothing: its node is the dispatched
 * operation, which Operation.forward attaches. */
static PyObject *broadcast_view(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"tensor", "target"};
    PyObject *target;
    sw_tensor *view;
    sw_layout *s0;
    sw_error err;
    SwTensorObject *t = tensor_and_shape("broadcast_to", names, args, nargs, kwnames, &target);
    if (!t)
        return NULL;
    const sw_layout *T = SwLayout_CORE(target);
    sw_view_spec spec = {.kind = SW_VIEW_KIND_BROADCAST, .n = T->nprofile,
                         .profile = T->profile, .extents = T->extents};
    if (view_core(t, &spec, &view, &s0, NULL, &err) != SW_OK)
        return sw_py_raise(&err), NULL;
    return finish_view("broadcast_to", t, view, s0, NULL, NULL);
}

/* F-0 / F-4: check the arguments, then run the carrier's dispatched
 * operation, whose forward records the node (and the profiling event). */
static PyObject *view_broadcast_to(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                                   PyObject *kwnames)
{
    static const char *const names[] = {"tensor", "target"};
    PyObject *target;
    (void)mod;
    SwTensorObject *t = tensor_and_shape("broadcast_to", names, args, nargs, kwnames, &target);
    if (!t)
        return NULL;
    PyObject *op = PyObject_CallMethod(t->subs[0].carrier, "dispatch_op", "s", "broadcast_to");
    if (!op)
        return NULL;
    PyObject *fwd = PyObject_GetAttrString(op, "forward");
    Py_DECREF(op);
    if (!fwd)
        return NULL;
    PyObject *argv[2] = {(PyObject *)t, target};
    PyObject *r = PyObject_Vectorcall(fwd, argv, 2, NULL);
    Py_DECREF(fwd);
    return r;
}

/* ---- view nodes (V-9, F-4) ------------------------------------------------ */

/* One Operation type per view kind; all share this struct. `param` is the
 * view's argument as the user gave it (slice key tuple, order tuple, Shape)
 * and `view_layout` the result's layout. A slice or permute also keeps its
 * argument as the core read it (`args`: n slice entries or n order
 * entries), so backward asks the core which source element each view
 * element reads without running the user's __index__ again; a reshape or
 * broadcast reads its target from the Shape. */
typedef struct {
    SwOperationObject base;
    PyObject *param;
    PyObject *view_layout;
    void *args;
    int32_t nargs;
} SwViewOperationObject;

enum { VIEW_SLICE, VIEW_PERMUTE, VIEW_RESHAPE, VIEW_BROADCAST, VIEW_KINDS };

static PyTypeObject view_op_types[VIEW_KINDS];
static const char *const view_kind_names[VIEW_KINDS] = {"slice", "permute", "reshape",
                                                        "broadcast_to"};

static int view_kind(PyObject *op)
{
    for (int i = 0; i < VIEW_KINDS; i++)
        if (Py_TYPE(op) == &view_op_types[i])
            return i;
    return -1;
}

static int view_op_traverse(PyObject *self, visitproc visit, void *arg)
{
    SwViewOperationObject *v = (SwViewOperationObject *)self;
    Py_VISIT(v->param);
    Py_VISIT(v->view_layout);
    return sw_py_operation_traverse(self, visit, arg);
}

static int view_op_clear(PyObject *self)
{
    SwViewOperationObject *v = (SwViewOperationObject *)self;
    Py_CLEAR(v->param);
    Py_CLEAR(v->view_layout);
    return sw_py_operation_clear(self);
}

static void view_op_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    if (((SwOperationObject *)self)->weakreflist)
        PyObject_ClearWeakRefs(self);
    view_op_clear(self);
    PyMem_Free(((SwViewOperationObject *)self)->args);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *new_view_op(int kind)
{
    PyTypeObject *type = &view_op_types[kind];
    PyObject *op = type->tp_new(type, NULL, NULL); /* Operation's: makes ctx */
    return op;
}

/* The core-form argument of a slice or permute, copied for the node. */
static int keep_view_args(SwViewOperationObject *v, const sw_view_spec *spec)
{
    if (!spec || (spec->kind != SW_VIEW_KIND_SLICE && spec->kind != SW_VIEW_KIND_PERMUTE))
        return 0;
    size_t entry = spec->kind == SW_VIEW_KIND_SLICE ? sizeof(sw_slice_entry) : sizeof(int64_t);
    const void *from = spec->kind == SW_VIEW_KIND_SLICE ? (const void *)spec->key
                                                        : (const void *)spec->order;
    v->args = PyMem_Malloc(entry * ((size_t)spec->n + 1));
    if (!v->args) {
        PyErr_NoMemory();
        return -1;
    }
    if (spec->n > 0)
        memcpy(v->args, from, entry * (size_t)spec->n);
    v->nargs = spec->n;
    return 0;
}

/* V-9: called once after each view is built with its kind, source, result
 * and argument (both forms); records the view's node when grad mode is on
 * and the source is differentiable. 0, or -1 with an exception set (the
 * view then fails). */
static int view_record(const char *kind, PyObject *source, PyObject *result, PyObject *param,
                       const sw_view_spec *spec)
{
    if (!sw_py_grad_enabled() || ((SwTensorObject *)source)->dtype != sw_py_dtype(SW_DT_FLOAT32))
        return 0;
    int k = 0;
    while (k < VIEW_KINDS && strcmp(view_kind_names[k], kind) != 0)
        k++;
    if (k == VIEW_KINDS) {
        PyErr_Format(PyExc_SystemError, "unknown view kind %s", kind);
        return -1;
    }
    PyObject *op = new_view_op(k);
    if (!op)
        return -1;
    SwViewOperationObject *v = (SwViewOperationObject *)op;
    v->param = Py_NewRef(param);
    v->view_layout = Py_NewRef(((SwTensorObject *)result)->subs[0].layout);
    int rc = keep_view_args(v, spec);
    if (rc == 0)
        rc = sw_py_operation_store(op, &source, 1);
    if (rc == 0)
        rc = sw_py_operation_attach(op, result);
    Py_DECREF(op);
    return rc;
}

PyObject *sw_py_view_broadcast_operation(void)
{
    return new_view_op(VIEW_BROADCAST);
}

/* The node's view in the core's form; reshape and broadcast name the
 * Shape's profile and extents, which the node keeps alive in `param`. */
static sw_view_spec node_view_spec(SwViewOperationObject *v, int kind)
{
    static const sw_view_kind kinds[VIEW_KINDS] = {SW_VIEW_KIND_SLICE, SW_VIEW_KIND_PERMUTE,
                                                   SW_VIEW_KIND_RESHAPE,
                                                   SW_VIEW_KIND_BROADCAST};
    sw_view_spec spec = {.kind = kinds[kind], .n = v->nargs};
    if (kind == VIEW_SLICE) {
        spec.key = v->args;
    } else if (kind == VIEW_PERMUTE) {
        spec.order = v->args;
    } else {
        const sw_layout *T = SwLayout_CORE(v->param);
        spec.n = T->nprofile;
        spec.profile = T->profile;
        spec.extents = T->extents;
    }
    return spec;
}

/* Per view element, the source ordinal it reads (nview entries), from the
 * core's map of the view over the source's shape. PyMem-owned. */
static int64_t *view_source_map(SwViewOperationObject *v, int kind, PyObject *source,
                                int64_t *nview)
{
    sw_error err;
    const sw_layout *L = SW_SUB_LAYOUT(&((SwTensorObject *)source)->subs[0]);
    sw_view_spec spec = node_view_spec(v, kind);
    int64_t n = SwLayout_CORE(v->view_layout)->size;
    int64_t *map = PyMem_Malloc(sizeof(int64_t) * ((size_t)n + 1));
    if (!map)
        return (int64_t *)PyErr_NoMemory();
    if (sw_layout_view_source_ordinals(L, &spec, map, n, nview, NULL, &err) != SW_OK) {
        PyMem_Free(map);
        return sw_py_raise(&err), NULL;
    }
    return map;
}

/* Cotangent checks for a view node: an injective view needs its exact
 * layout, a non-injective one its shape in an injective layout. */
static int check_view_cotangent(PyObject *self, PyObject *g)
{
    SwViewOperationObject *v = (SwViewOperationObject *)self;
    sw_error err;
    if (!SwTensor_Check(g)) {
        PyErr_Format(PyExc_TypeError, "%s.backward: gradient must be a Tensor, not %.100s",
                     _PyType_Name(Py_TYPE(self)), Py_TYPE(g)->tp_name);
        return -1;
    }
    SwTensorObject *gt = (SwTensorObject *)g;
    if (gt->nsub != 1) {
        PyErr_Format(PyExc_NotImplementedError,
                     "%s.backward: the gradient must be a tensor on one carrier, not one "
                     "with %zd planes", _PyType_Name(Py_TYPE(self)), gt->nsub);
        return -1;
    }
    if (sw_py_state_released(gt->subs[0].carrier)) {
        PyErr_Format(PyExc_RuntimeError, "%s.backward: the gradient's carrier is released",
                     _PyType_Name(Py_TYPE(self)));
        return -1;
    }
    sw_layout *VL = SwLayout_CORE(v->view_layout), *GL = SwLayout_CORE(gt->subs[0].layout);
    int vinj = sw_layout_is_injective(VL, &err);
    int ginj = vinj < 0 ? -1 : sw_layout_is_injective(GL, &err);
    if (ginj < 0)
        return sw_py_raise(&err);
    int ok = vinj ? sw_layout_equal(VL, GL)
                  : ginj && sw_layout_same_shape(VL, GL);
    if (!ok) {
        PyErr_Format(PyExc_ValueError,
                     "%s.backward: gradient layout %R does not fit the view layout %R (an "
                     "injective view needs the same layout, a broadcast one its shape in an "
                     "injective layout)",
                     _PyType_Name(Py_TYPE(self)), gt->subs[0].layout, v->view_layout);
        return -1;
    }
    return 0;
}

static PyObject *view_op_backward(PyObject *self, PyObject *g)
{
    SwViewOperationObject *v = (SwViewOperationObject *)self;
    SwOperationObject *o = &v->base;
    int kind = view_kind(self);
    if (kind < 0 || !o->saved || PyTuple_GET_SIZE(o->saved) != 1 || !v->param ||
        !v->view_layout || (kind <= VIEW_PERMUTE && !v->args)) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s.backward: this view recorded no source, or a backward pass "
                     "released it (pass retain_graph=True to keep it)",
                     _PyType_Name(Py_TYPE(self)));
        return NULL;
    }
    if (check_view_cotangent(self, g) < 0)
        return NULL;
    PyObject *source = Py_NewRef(PyTuple_GET_ITEM(o->saved, 0));
    PyObject *grad = NULL, *result = NULL;
    int64_t nview = 0, nsrc = SW_SUB_LAYOUT(&((SwTensorObject *)source)->subs[0])->size;
    float *gv = NULL, *acc = NULL;
    int64_t *map = view_source_map(v, kind, source, &nview);
    if (!map)
        goto done;
    gv = PyMem_Malloc(sizeof(float) * ((size_t)nview + 1));
    acc = PyMem_Calloc((size_t)nsrc + 1, sizeof(float));
    if (!gv || !acc) {
        PyErr_NoMemory();
        goto done;
    }
    if (sw_py_read_float_values(g, gv) < 0)
        goto done;
    for (int64_t k = 0; k < nview; k++)
        acc[map[k]] += gv[k];
    grad = sw_py_grad_buffer(source, acc);
    if (grad)
        result = PyTuple_Pack(1, grad);
done:
    PyMem_Free(map);
    PyMem_Free(gv);
    PyMem_Free(acc);
    Py_XDECREF(grad);
    Py_DECREF(source);
    return result;
}

/* broadcast_to's dispatched form: Operation.forward records the node. */
static PyObject *view_op_forward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    SwViewOperationObject *v = (SwViewOperationObject *)self;
    if (view_kind(self) != VIEW_BROADCAST) {
        PyErr_Format(PyExc_TypeError, "%s is recorded by its view and cannot run forward",
                     _PyType_Name(Py_TYPE(self)));
        return NULL;
    }
    PyObject *r = broadcast_view(args, nargs, NULL);
    if (!r)
        return NULL;
    Py_XSETREF(v->param, Py_NewRef(args[1]));
    Py_XSETREF(v->view_layout, Py_NewRef(((SwTensorObject *)r)->subs[0].layout));
    return r;
}

static PyMethodDef view_op_methods[] = {
    {"_forward", (PyCFunction)(void (*)(void))view_op_forward, METH_FASTCALL,
     "_forward($self, tensor, target, /)\n--\n\n"
     "For the broadcast_to operation: the broadcast_to view of tensor to the\n"
     "Shape target. The other view kinds raise TypeError."},
    {"backward", view_op_backward, METH_O,
     "backward($self, gradient, /)\n--\n\n"
     "The source's gradient, as a one-element tuple: gradient placed back\n"
     "through the view (summed where several view positions read one source\n"
     "position), in fresh storage of the source carrier's class. Raises\n"
     "TypeError for a non-Tensor, RuntimeError for a released carrier or\n"
     "graph, and ValueError for a gradient that does not fit the view."},
    {NULL, NULL, 0, NULL},
};

#define VIEW_OP_TYPE(name)                                                           \
    {                                                                                \
        PyVarObject_HEAD_INIT(NULL, 0)                                               \
        .tp_name = "strideweave." name,                                              \
        .tp_basicsize = sizeof(SwViewOperationObject),                               \
        .tp_dealloc = view_op_dealloc,                                               \
        .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,                          \
        .tp_doc = "The autograd node a view records; backward maps the view's\n"     \
                  "gradient back onto its source.",                                  \
        .tp_traverse = view_op_traverse,                                             \
        .tp_clear = view_op_clear,                                                   \
        .tp_methods = view_op_methods,                                               \
    }

static PyTypeObject view_op_types[VIEW_KINDS] = {
    VIEW_OP_TYPE("SliceViewOperation"),
    VIEW_OP_TYPE("PermuteViewOperation"),
    VIEW_OP_TYPE("ReshapeViewOperation"),
    VIEW_OP_TYPE("BroadcastToOperation"),
};

static int view_nodes_init(PyObject *module)
{
    (void)module;
    for (int i = 0; i < VIEW_KINDS; i++) {
        view_op_types[i].tp_base = &SwOperation_Type;
        if (PyType_Ready(&view_op_types[i]) < 0)
            return -1;
    }
    /* broadcast_to keeps every plane: forward accepts compound dtypes. */
    return sw_py_operation_keeps_planes(&view_op_types[VIEW_BROADCAST]);
}


static PyMethodDef view_functions[] = {
    {"permute", (PyCFunction)(void (*)(void))view_permute, METH_FASTCALL | METH_KEYWORDS,
     "permute(tensor, *order)\n--\n\n"
     "A view of `tensor` (same carrier, no copy) with its top-level modes\n"
     "reordered: mode j of the result is mode order[j]. order is ints or one\n"
     "list/tuple naming every mode once. Raises TypeError when tensor is not\n"
     "a Tensor and ValueError for a bad order. permute(t, 1, 0) transposes."},
    {"reshape", (PyCFunction)(void (*)(void))view_reshape, METH_FASTCALL | METH_KEYWORDS,
     "reshape(tensor, shape)\n--\n\n"
     "A view of `tensor` (same carrier, no copy) with Shape `shape`, whose\n"
     "elements follow the tensor's in column-major order. Raises TypeError\n"
     "when shape is not a Shape and ValueError when its size differs or the\n"
     "layout cannot be reshaped without a copy."},
    {"broadcast_to", (PyCFunction)(void (*)(void))view_broadcast_to,
     METH_FASTCALL | METH_KEYWORDS,
     "broadcast_to(tensor, target)\n--\n\n"
     "A view of `tensor` (same carrier, no copy) with Shape `target`: leaves\n"
     "of extent 1 widen to the target's extent with stride 0, repeating the\n"
     "values. Raises TypeError when target is not a Shape and ValueError\n"
     "when the shapes do not match."},
    {NULL, NULL, 0, NULL},
};

int sw_py_view_init(PyObject *module)
{
    if (sw_py_autograd_init(module) < 0 || view_nodes_init(module) < 0)
        return -1;
    return PyModule_AddFunctions(module, view_functions);
}
