/* The Tensor object below the features (contract-core T-1..T-14): its
 * struct's allocation and lifetime, construction with the T-4..T-7 checks,
 * and the accessors the feature files use to make Tensors. A Tensor is one
 * immutable representation: a logical dtype, ordered subtensors (storage
 * dtype, carrier, offset, placement layout) and the adjacent layouts between
 * planes. Every path that produces a Tensor goes through tensor_build(),
 * which runs the T-4..T-7 checks, or through sw_py_tensor_new1() for the
 * one-subtensor T-1 form.
 *
 * May depend on: the carrier base, layouts, dtypes and messages; never on
 * the feature files (repr, views, DLPack, arrays, autograd) or on the
 * Tensor type file (py_tensor.c) that assembles the type from them. */
#include "sw_python.h"
#include "sw_messages.h"
#include "sw_spare_objects.h"

#include <string.h>

/* ---- small helpers ------------------------------------------------------ */

static const char *dtype_name(PyObject *dtype)
{
    const sw_dtype_info *info = sw_dtype_info_of(SwDType_ID(dtype));
    return info ? info->name : "?";
}

/* Name of a type without its module, like CPython's _PyType_Name. */
/* G-2 conversion of an integer object. *sign is -1 when below INT64_MIN,
 * +1 when above INT64_MAX (the value then is meaningless), else 0.
 * The caller has already checked sw_py_is_integer(obj). */
int sw_py_integer_value(PyObject *obj, int64_t *out, int *sign)
{
    long long v;
    int overflow;
    if (sw_py_index_ll(obj, &v, &overflow) < 0)
        return -1;
    *sign = overflow;
    *out = overflow ? 0 : (int64_t)v;
    return 0;
}

/* ---- allocation and GC -------------------------------------------------- */

/* Tensor objects are recycled (sw_spare_objects.h), as AwaitMoves are. A
 * round of 256 moves in flight made 256 results and set off a collection
 * of the young generation in most rounds (bench/sweep.py blk->cpu 4 KiB in
 * flight: 0.76-0.82x with it, 0.91-1.00x with collections held off). A
 * recycled Tensor is zeroed and tracked as tp_alloc leaves a new one. */
SW_PY_SPARES(spare_tensors, 512);

static SwTensorObject *tensor_object_new(void)
{
    PyObject *o = sw_py_spare_take(&spare_tensors, &SwTensor_Type);
    if (!o)
        return (SwTensorObject *)SwTensor_Type.tp_alloc(&SwTensor_Type, 0);
    memset((char *)o + sizeof(PyObject), 0, sizeof(SwTensorObject) - sizeof(PyObject));
    PyObject_GC_Track(o);
    return (SwTensorObject *)o;
}

static SwTensorObject *tensor_alloc(PyObject *dtype, Py_ssize_t nsub)
{
    SwTensorObject *t = tensor_object_new();
    if (!t)
        return NULL;
    t->nsub = nsub;
    t->dtype = Py_NewRef(dtype);
    t->autograd_ctx = Py_NewRef(Py_None);
    t->grad = Py_NewRef(Py_None);
    t->retains_grad = 0;
    return t;
}

/* Plane i's core tensor, on the placement the caller checked (T-1 or
 * T-5), with its own copy of `copy_of` (a layout equal to `layout`'s); its
 * Python objects stay with the plane. 0, or -1 with an exception (out of
 * memory). */
static int plane_bind_copying(SwSubtensor *sub, PyObject *carrier, int64_t offset,
                              PyObject *layout, const sw_layout *copy_of)
{
    sw_error err;
    if (sw_tensor_new_unchecked(SW_STATE_C(carrier)->core, offset, copy_of, &sub->core, &err) !=
        SW_OK)
        return sw_py_raise(&err);
    sub->carrier = Py_NewRef(carrier);
    sub->layout = Py_NewRef(layout);
    return 0;
}

static int plane_bind(SwSubtensor *sub, PyObject *carrier, int64_t offset, PyObject *layout)
{
    return plane_bind_copying(sub, carrier, offset, layout, SwLayout_CORE(layout));
}

/* The cyclic GC: a Tensor refers to its dtypes, carriers, layouts, adjacent
 * layouts, autograd context and gradient. A reference cycle through a
 * Tensor needs one of them to lead back to it; dtypes and layouts never do,
 * nor do carriers of the built-in CPU, Generic and FileBacked classes (they
 * hold no Python object but a FileBacked's path). So a Tensor on such a
 * carrier with no autograd context and no gradient cannot be part of a
 * cycle: it is left out of the collector's lists (as CPython leaves a dict
 * of atomic values out), so that collections do not traverse every moved
 * result, and joins them the moment an autograd context or a gradient is
 * set (sw_py_tensor_track at every such assignment). */
static int cycle_free_carrier(PyObject *carrier)
{
    PyTypeObject *t = Py_TYPE(carrier);
    return t == &SwCPU_Type || t == &SwGeneric_Type || t == &SwFileBacked_Type;
}

void sw_py_tensor_track(PyObject *tensor)
{
    if (!PyObject_GC_IsTracked(tensor))
        PyObject_GC_Track(tensor);
}

static int tensor_traverse(SwTensorObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->dtype);
    for (Py_ssize_t i = 0; i < self->nsub; i++) {
        Py_VISIT(self->subs[i].storage_dtype);
        Py_VISIT(self->subs[i].carrier);
        Py_VISIT(self->subs[i].layout);
    }
    Py_VISIT(self->adjacent);
    Py_VISIT(self->autograd_ctx);
    Py_VISIT(self->grad);
    return 0;
}

static int tensor_clear(SwTensorObject *self)
{
    Py_CLEAR(self->dtype);
    for (Py_ssize_t i = 0; i < self->nsub; i++) {
        /* First: the carrier object's own release of its handle stays the last. */
        sw_tensor_unref(self->subs[i].core);
        self->subs[i].core = NULL;
        Py_CLEAR(self->subs[i].storage_dtype);
        Py_CLEAR(self->subs[i].carrier);
        Py_CLEAR(self->subs[i].layout);
    }
    Py_CLEAR(self->adjacent);
    Py_CLEAR(self->autograd_ctx);
    Py_CLEAR(self->grad);
    return 0;
}

static void tensor_dealloc(SwTensorObject *self)
{
    PyObject_GC_UnTrack(self);
    if (self->weakreflist)
        PyObject_ClearWeakRefs((PyObject *)self);
    tensor_clear(self);
    /* Tensor has no subclasses: every one freed here is of this type. */
    if (!sw_py_spare_keep(&spare_tensors, (PyObject *)self))
        SwTensor_Type.tp_free((PyObject *)self);
}

/* ---- construction (T-1, T-4..T-7) --------------------------------------- */

/* The storage dtype a carrier reports, checked to be a DType. New ref. */
static PyObject *carrier_dtype_checked(PyObject *carrier, const char *prefix)
{
    PyObject *d = sw_py_carrier_dtype(carrier);
    if (d && !SwDType_Check(d)) {
        PyErr_Format(PyExc_ValueError, "%scarrier.dtype() returned %.100s, not a DType",
                     prefix, Py_TYPE(d)->tp_name);
        Py_CLEAR(d);
    }
    return d;
}

/* Steps shared by T-1 (6, 7) and T-5 (f, g): the placement fits the
 * carrier. offset_sign != 0 means an offset beyond int64 (too big). */
static int check_fits(PyObject *carrier, int64_t offset, int offset_sign,
                      PyObject *layout, const char *prefix)
{
    int64_t size;
    if (sw_py_carrier_size(carrier, &size) < 0)
        return -1;
    if (size < 0) {
        PyErr_Format(PyExc_ValueError, "%scarrier size must be >= 0, got %lld",
                     prefix, (long long)size);
        return -1;
    }
    int64_t cosize = SwLayout_CORE(layout)->cosize, end;
    if (offset_sign != 0 || __builtin_add_overflow(offset, cosize, &end) || end > size) {
        if (offset_sign == 0 && offset <= INT64_MAX - cosize)
            PyErr_Format(PyExc_ValueError,
                         "%soffset + layout.cosize (%lld + %lld) exceeds the carrier size "
                         "(%lld slot%s)", prefix, (long long)offset, (long long)cosize,
                         (long long)size, sw_py_msg_s(size));
        else
            PyErr_Format(PyExc_ValueError,
                         "%soffset + layout.cosize exceeds the carrier size (%lld slot%s)",
                         prefix, (long long)size, sw_py_msg_s(size));
        return -1;
    }
    return 0;
}

/* T-1 with `offset_obj` (Python path) or an already-converted `offset`. */
static PyObject *tensor_new1(PyObject *carrier, PyObject *offset_obj, int64_t offset,
                             PyObject *layout)
{
    int sign = 0;
    if (!SwCarrier_Check(carrier)) {
        PyErr_Format(PyExc_TypeError, "carrier must be a strideweave.Carrier, not %.100s",
                     Py_TYPE(carrier)->tp_name);
        return NULL;
    }
    if (offset_obj) {
        if (!sw_py_is_integer(offset_obj)) {
            PyErr_Format(PyExc_TypeError, "offset must be an integer, not %.100s",
                         Py_TYPE(offset_obj)->tp_name);
            return NULL;
        }
        if (sw_py_integer_value(offset_obj, &offset, &sign) < 0)
            return NULL;
    }
    if (!SwLayout_Check(layout)) {
        PyErr_Format(PyExc_TypeError,
                     "layout must be a Layout, e.g. Layout(Shape(4), Stride(1)), not %.100s",
                     _PyType_Name(Py_TYPE(layout)));
        return NULL;
    }
    PyObject *dtype = carrier_dtype_checked(carrier, "");
    if (!dtype)
        return NULL;
    const sw_dtype_info *info = sw_dtype_info_of(SwDType_ID(dtype));
    if (!info || info->nplanes != 1) {
        PyErr_Format(PyExc_ValueError,
                     "a carrier of dtype %s cannot hold a Tensor's values directly (it is a "
                     "category or a compound dtype); use a carrier of a concrete dtype such as "
                     "Float32", dtype_name(dtype));
        goto error;
    }
    if (sign < 0 || (sign == 0 && offset < 0)) {
        if (offset_obj)
            PyErr_Format(PyExc_ValueError, "offset must be >= 0, got %R", offset_obj);
        else
            PyErr_Format(PyExc_ValueError, "offset must be >= 0, got %lld", (long long)offset);
        goto error;
    }
    if (check_fits(carrier, offset, sign, layout, "") < 0)
        goto error;

    SwTensorObject *t = tensor_alloc(dtype, 1);
    if (!t)
        goto error;
    t->subs[0].storage_dtype = dtype; /* reference moves in */
    t->adjacent = PyTuple_New(0);
    if (!t->adjacent || plane_bind(&t->subs[0], carrier, offset, layout) < 0) {
        Py_DECREF(t);
        return NULL;
    }
    if (cycle_free_carrier(carrier)) /* no autograd context nor gradient yet */
        PyObject_GC_UnTrack(t);
    return (PyObject *)t;
error:
    Py_DECREF(dtype);
    return NULL;
}

PyObject *sw_py_tensor_new1(PyObject *carrier, int64_t offset, PyObject *layout)
{
    return tensor_new1(carrier, NULL, offset, layout);
}

PyObject *sw_py_tensor_moved(PyObject *like, PyObject *carrier)
{
    SwSubtensor *from = &((SwTensorObject *)like)->subs[0];
    SwTensorObject *t = tensor_alloc(((SwTensorObject *)like)->dtype, 1);
    if (!t)
        return NULL;
    t->subs[0].storage_dtype = Py_NewRef(from->storage_dtype);
    t->adjacent = Py_NewRef(((SwTensorObject *)like)->adjacent); /* the empty tuple */
    /* The core tensor copies the layout from the source's core tensor, an
     * equal copy the move has just read, not from the Layout object's own
     * block, one more cold cache line per move (issue 19 cachegrind). */
    if (plane_bind_copying(&t->subs[0], carrier, 0, from->layout, sw_tensor_layout(from->core)) <
        0) {
        Py_DECREF(t);
        return NULL;
    }
    if (cycle_free_carrier(carrier))
        PyObject_GC_UnTrack(t);
    return (PyObject *)t;
}

/* A view of `source` (V-2): plane 0 is the core's view `plane0` (owned
 * from here on, also on failure) placed by `layout0`, the adjacent layout
 * is `adjacent0` with several planes, and every other piece is the
 * source's. The representation checks ran on the source and a view keeps
 * them (same carriers and dtypes, shapes changed alike); what can differ
 * since is the carrier's size (a release, a key's hook), so each plane is
 * checked to fit once more, with the constructor's words. */
PyObject *sw_py_tensor_view_of(PyObject *source, struct sw_tensor *plane0, PyObject *layout0,
                               PyObject *adjacent0)
{
    SwTensorObject *src = (SwTensorObject *)source, *t = NULL;
    char prefix[48];
    for (Py_ssize_t i = 0; i < src->nsub; i++) {
        PyObject *layout = i == 0 ? layout0 : src->subs[i].layout;
        int64_t offset = i == 0 ? sw_tensor_offset(plane0) : SW_SUB_OFFSET(&src->subs[i]);
        snprintf(prefix, sizeof prefix, "subtensor %zd: ", i);
        if (check_fits(src->subs[i].carrier, offset, 0, layout, prefix) < 0)
            goto error;
    }
    t = tensor_alloc(src->dtype, src->nsub);
    if (!t)
        goto error;
    for (Py_ssize_t i = 0; i < src->nsub; i++) {
        SwSubtensor *to = &t->subs[i], *from = &src->subs[i];
        to->storage_dtype = Py_NewRef(from->storage_dtype);
        to->carrier = Py_NewRef(from->carrier);
        to->layout = Py_NewRef(i == 0 ? layout0 : from->layout);
        to->core = i == 0 ? plane0 : sw_tensor_ref(from->core);
    }
    t->adjacent = src->nsub > 1 ? PyTuple_Pack(1, adjacent0) : Py_NewRef(src->adjacent);
    if (!t->adjacent) {
        Py_DECREF(t);
        return NULL;
    }
    return (PyObject *)t;
error:
    sw_tensor_unref(plane0);
    return NULL;
}

/* T-4 steps 4..6 plus the build. Offsets come either as Python objects
 * (offset_objs, from _from_representation) or as C values. */
static PyObject *tensor_build(PyObject *dtype, Py_ssize_t nsub, PyObject *const *carriers,
                              PyObject *const *offset_objs, const int64_t *offset_vals,
                              PyObject *const *layouts, Py_ssize_t nadj,
                              PyObject *const *adjacent)
{
    const sw_dtype_info *info = sw_dtype_info_of(SwDType_ID(dtype));
    PyObject *sdtypes[2] = {NULL, NULL};
    int64_t offsets[2] = {0, 0};
    char prefix[48];

    if (!info || info->nplanes == 0) {
        PyErr_Format(PyExc_ValueError, "dtype %s has no storage schema", dtype_name(dtype));
        return NULL;
    }
    if (nsub != info->nplanes) {
        PyErr_Format(PyExc_ValueError,
                     "dtype %s needs %d subtensors (its storage schema), got %zd",
                     info->name, info->nplanes, nsub);
        return NULL;
    }
    if (nadj != nsub - 1) {
        PyErr_Format(PyExc_ValueError,
                     "%zd subtensors need %zd adjacent layout%s, got %zd",
                     nsub, nsub - 1, sw_py_msg_s(nsub - 1), nadj);
        return NULL;
    }

    /* T-5 for each level, ascending. */
    for (Py_ssize_t i = 0; i < nsub; i++) {
        PyObject *carrier = carriers[i], *layout = layouts[i];
        PyObject *want = sw_py_dtype(info->planes[i]);
        int sign = 0;
        snprintf(prefix, sizeof prefix, "subtensor %zd: ", i);
        if (!SwCarrier_Check(carrier)) {
            PyErr_Format(PyExc_TypeError, "%scarrier must be a strideweave.Carrier, not %.100s",
                         prefix, Py_TYPE(carrier)->tp_name);
            goto error;
        }
        sdtypes[i] = carrier_dtype_checked(carrier, prefix);
        if (!sdtypes[i])
            goto error;
        if (sdtypes[i] != want) {
            PyErr_Format(PyExc_ValueError,
                         "%scarrier dtype %s is not the storage dtype %s the schema of %s requires",
                         prefix, dtype_name(sdtypes[i]), dtype_name(want), info->name);
            goto error;
        }
        if (offset_objs) {
            if (!sw_py_is_integer(offset_objs[i])) {
                PyErr_Format(PyExc_TypeError, "%soffset must be an integer, not %.100s",
                             prefix, Py_TYPE(offset_objs[i])->tp_name);
                goto error;
            }
            if (sw_py_integer_value(offset_objs[i], &offsets[i], &sign) < 0)
                goto error;
        } else {
            offsets[i] = offset_vals[i];
        }
        if (sign < 0 || (sign == 0 && offsets[i] < 0)) {
            PyErr_Format(PyExc_ValueError, "%soffset must be >= 0", prefix);
            goto error;
        }
        if (!SwLayout_Check(layout)) {
            PyErr_Format(PyExc_TypeError, "%slayout must be a Layout, not %.100s",
                         prefix, Py_TYPE(layout)->tp_name);
            goto error;
        }
        if (check_fits(carrier, offsets[i], sign, layout, prefix) < 0)
            goto error;
        if (i > 0 && Py_TYPE(carrier) != Py_TYPE(carriers[0])) {
            PyErr_Format(PyExc_TypeError,
                         "%scarrier class %.100s differs from subtensor 0's %.100s",
                         prefix, Py_TYPE(carrier)->tp_name, Py_TYPE(carriers[0])->tp_name);
            goto error;
        }
    }

    /* T-6 for each adjacent layout, ascending. */
    for (Py_ssize_t i = 0; i < nadj; i++) {
        PyObject *s = adjacent[i];
        if (!SwLayout_Check(s)) {
            PyErr_Format(PyExc_TypeError, "adjacent layout %zd must be a Layout, not %.100s",
                         i, Py_TYPE(s)->tp_name);
            goto error;
        }
        if (!sw_layout_same_shape(SwLayout_CORE(s), SwLayout_CORE(layouts[i]))) {
            PyErr_Format(PyExc_ValueError,
                         "adjacent layout %zd: shape must equal subtensor %zd's layout shape",
                         i, i);
            goto error;
        }
        if (SwLayout_CORE(s)->cosize > SwLayout_CORE(layouts[i + 1])->size) {
            PyErr_Format(PyExc_ValueError,
                         "adjacent layout %zd: cosize %lld exceeds subtensor %zd's size %lld",
                         i, (long long)SwLayout_CORE(s)->cosize, i + 1,
                         (long long)SwLayout_CORE(layouts[i + 1])->size);
            goto error;
        }
    }

    /* T-7 dtype rules. */
    if (SwDType_ID(dtype) == SW_DT_SCALED_INT32 && SwLayout_CORE(layouts[1])->size != 1) {
        PyErr_Format(PyExc_ValueError,
                     "ScaledInt32: subtensor 1 (the scale) must have placement size 1, got %lld",
                     (long long)SwLayout_CORE(layouts[1])->size);
        goto error;
    }

    SwTensorObject *t = tensor_alloc(dtype, nsub);
    if (!t)
        goto error;
    for (Py_ssize_t i = 0; i < nsub; i++) {
        t->subs[i].storage_dtype = sdtypes[i]; /* reference moves in */
        sdtypes[i] = NULL;
    }
    t->adjacent = PyTuple_New(nadj);
    for (Py_ssize_t i = 0; i < nsub && t->adjacent; i++) {
        if (plane_bind(&t->subs[i], carriers[i], offsets[i], layouts[i]) < 0)
            Py_CLEAR(t->adjacent);
    }
    if (!t->adjacent) {
        Py_DECREF(t);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nadj; i++)
        PyTuple_SET_ITEM(t->adjacent, i, Py_NewRef(adjacent[i]));
    return (PyObject *)t;
error:
    Py_XDECREF(sdtypes[0]);
    Py_XDECREF(sdtypes[1]);
    return NULL;
}

PyObject *sw_py_tensor_from_parts(PyObject *logical_dtype, Py_ssize_t nsub,
                                  PyObject *const *carriers, const int64_t *offsets,
                                  PyObject *const *layouts, PyObject *const *adjacent)
{
    if (nsub < 1 || nsub > 2) {
        PyErr_Format(PyExc_ValueError, "a Tensor has 1 or 2 subtensors, got %zd", nsub);
        return NULL;
    }
    return tensor_build(logical_dtype, nsub, carriers, NULL, offsets, layouts, nsub - 1,
                        adjacent);
}

static PyObject *tensor_tp_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"carrier", "offset", "layout", NULL};
    PyObject *carrier, *offset, *layout;
    (void)type;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO:Tensor", kwlist, &carrier, &offset,
                                     &layout))
        return NULL;
    return tensor_new1(carrier, offset, 0, layout);
}

int sw_py_parse_required(const char *fn, const char *const *names, Py_ssize_t n,
                          PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                          PyObject **out)
{
    if (nargs == n && !kwnames) { /* the common call: all positional */
        for (Py_ssize_t i = 0; i < n; i++)
            out[i] = args[i];
        return 0;
    }
    if (nargs > n) {
        PyErr_Format(PyExc_TypeError, "%s() takes %zd positional argument%s but %zd %s given",
                     fn, n, sw_py_msg_s(n), nargs, nargs == 1 ? "was" : "were");
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        out[i] = i < nargs ? args[i] : NULL;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        Py_ssize_t i = 0;
        while (i < n && PyUnicode_CompareWithASCIIString(name, names[i]) != 0)
            i++;
        if (i == n) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", fn,
                         name);
            return -1;
        }
        if (out[i]) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", fn,
                         names[i]);
            return -1;
        }
        out[i] = args[nargs + k];
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!out[i]) {
            PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s' (pos %zd)", fn,
                         names[i], i + 1);
            return -1;
        }
    }
    return 0;
}

/* Tensor(carrier, offset, layout) through vectorcall: the hot path. */
static PyObject *tensor_vectorcall(PyObject *type, PyObject *const *args, size_t nargsf,
                                   PyObject *kwnames)
{
    static const char *const names[] = {"carrier", "offset", "layout"};
    PyObject *a[3];
    (void)type;
    if (sw_py_parse_required("Tensor", names, 3, args, PyVectorcall_NARGS(nargsf), kwnames, a) < 0)
        return NULL;
    return tensor_new1(a[0], a[1], 0, a[2]);
}

/* Tensor._from_representation(logical_dtype, subtensors, adjacent_layouts=()) */
PyObject *sw_py_tensor_from_representation(PyObject *unused, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"logical_dtype", "subtensors", "adjacent_layouts", NULL};
    PyObject *dtype, *subs_arg, *adj_arg = NULL;
    PyObject *subs = NULL, *adj = NULL, *result = NULL;
    PyObject *carriers[2], *offsets[2], *layouts[2];
    (void)unused;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|O:_from_representation", kwlist,
                                     &dtype, &subs_arg, &adj_arg))
        return NULL;
    /* T-4 step 1 */
    if (!SwDType_Check(dtype)) {
        PyErr_Format(PyExc_TypeError, "logical_dtype must be a DType, not %.100s",
                     Py_TYPE(dtype)->tp_name);
        return NULL;
    }
    subs = PySequence_List(subs_arg);
    if (!subs)
        goto done;
    adj = adj_arg ? PySequence_List(adj_arg) : PyList_New(0);
    if (!adj)
        goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(subs); i++) {
        PyObject *e = PyList_GET_ITEM(subs, i);
        if (!PyTuple_Check(e) || PyTuple_GET_SIZE(e) != 3) {
            PyErr_Format(PyExc_TypeError,
                         "subtensor %zd must be a (carrier, offset, layout) 3-tuple", i);
            goto done;
        }
    }
    /* Steps 2 and 3 (schema and counts) */
    const sw_dtype_info *info = sw_dtype_info_of(SwDType_ID(dtype));
    if (!info || info->nplanes == 0) {
        PyErr_Format(PyExc_ValueError, "dtype %s has no storage schema", dtype_name(dtype));
        goto done;
    }
    Py_ssize_t nsub = PyList_GET_SIZE(subs), nadj = PyList_GET_SIZE(adj);
    if (nsub != info->nplanes) {
        PyErr_Format(PyExc_ValueError,
                     "dtype %s needs %d subtensors (its storage schema), got %zd",
                     info->name, info->nplanes, nsub);
        goto done;
    }
    for (Py_ssize_t i = 0; i < nsub; i++) {
        PyObject *e = PyList_GET_ITEM(subs, i);
        carriers[i] = PyTuple_GET_ITEM(e, 0);
        offsets[i] = PyTuple_GET_ITEM(e, 1);
        layouts[i] = PyTuple_GET_ITEM(e, 2);
    }
    result = tensor_build(dtype, nsub, carriers, offsets, NULL, layouts, nadj,
                          PySequence_Fast_ITEMS(adj));
done:
    Py_XDECREF(subs);
    Py_XDECREF(adj);
    return result;
}

/* The type object; the Tensor type file (py_tensor.c) fills in its methods,
 * attributes, indexing and repr before readying it. */
PyTypeObject SwTensor_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "strideweave.Tensor",
    .tp_basicsize = sizeof(SwTensorObject),
    .tp_dealloc = (destructor)tensor_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Tensor(carrier, offset, layout)\n--\n\n"
              "Values of one dtype placed in a carrier by a Layout.\n\n"
              "Element at coordinate c lives in slot offset + layout(c) of carrier;\n"
              "t[c] reads it and t[c] = v writes it.\n"
              "Raises TypeError when carrier is not a Carrier, offset not an int or\n"
              "layout not a Layout; ValueError for a negative offset, a carrier\n"
              "dtype with several planes, or a layout that reaches past the end.\n\n"
              "    Tensor(CPU(6), 0, column_major(2, 3))",
    .tp_traverse = (traverseproc)tensor_traverse,
    .tp_clear = (inquiry)tensor_clear,
    .tp_weaklistoffset = offsetof(SwTensorObject, weakreflist),
    .tp_new = tensor_tp_new,
    .tp_vectorcall = tensor_vectorcall,
};
