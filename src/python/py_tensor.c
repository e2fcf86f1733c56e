/* The Tensor type (contract-core T-1..T-14, V-3, V-4, V-10).
 *
 * A Tensor is one immutable representation: a logical dtype, ordered
 * subtensors (storage dtype, carrier, offset, placement layout) and the
 * adjacent layouts between planes. Every path that produces a Tensor goes
 * through tensor_build(), which runs the T-4..T-7 checks, or through
 * sw_py_tensor_new1() for the one-subtensor T-1 form. */
#include "sw_python.h"
#include "sw_messages.h"

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
static int integer_value(PyObject *obj, int64_t *out, int *sign)
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

static SwTensorObject *tensor_alloc(PyObject *dtype, Py_ssize_t nsub)
{
    SwTensorObject *t = (SwTensorObject *)SwTensor_Type.tp_alloc(&SwTensor_Type, 0);
    if (!t)
        return NULL;
    t->subs = PyMem_Calloc((size_t)nsub, sizeof(SwSubtensor));
    if (!t->subs) {
        Py_DECREF(t);
        PyErr_NoMemory();
        return NULL;
    }
    t->nsub = nsub;
    t->dtype = Py_NewRef(dtype);
    t->autograd_ctx = Py_NewRef(Py_None);
    t->grad = Py_NewRef(Py_None);
    t->retains_grad = 0;
    return t;
}

static int tensor_traverse(SwTensorObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->dtype);
    if (self->subs) {
        for (Py_ssize_t i = 0; i < self->nsub; i++) {
            Py_VISIT(self->subs[i].storage_dtype);
            Py_VISIT(self->subs[i].carrier);
            Py_VISIT(self->subs[i].layout);
        }
    }
    Py_VISIT(self->adjacent);
    Py_VISIT(self->autograd_ctx);
    Py_VISIT(self->grad);
    return 0;
}

static int tensor_clear(SwTensorObject *self)
{
    Py_CLEAR(self->dtype);
    if (self->subs) {
        for (Py_ssize_t i = 0; i < self->nsub; i++) {
            Py_CLEAR(self->subs[i].storage_dtype);
            Py_CLEAR(self->subs[i].carrier);
            Py_CLEAR(self->subs[i].layout);
        }
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
    PyMem_Free(self->subs);
    self->subs = NULL;
    PyTypeObject *tp = Py_TYPE(self);
    tp->tp_free((PyObject *)self);
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
                         (long long)size, sw_msg_s(size));
        else
            PyErr_Format(PyExc_ValueError,
                         "%soffset + layout.cosize exceeds the carrier size (%lld slot%s)",
                         prefix, (long long)size, sw_msg_s(size));
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
        if (integer_value(offset_obj, &offset, &sign) < 0)
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
    t->subs[0].carrier = Py_NewRef(carrier);
    t->subs[0].offset = offset;
    t->subs[0].layout = Py_NewRef(layout);
    t->adjacent = PyTuple_New(0);
    if (!t->adjacent) {
        Py_DECREF(t);
        return NULL;
    }
    return (PyObject *)t;
error:
    Py_DECREF(dtype);
    return NULL;
}

PyObject *sw_py_tensor_new1(PyObject *carrier, int64_t offset, PyObject *layout)
{
    return tensor_new1(carrier, NULL, offset, layout);
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
                     nsub, nsub - 1, sw_msg_s(nsub - 1), nadj);
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
            if (integer_value(offset_objs[i], &offsets[i], &sign) < 0)
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
        t->subs[i].carrier = Py_NewRef(carriers[i]);
        t->subs[i].offset = offsets[i];
        t->subs[i].layout = Py_NewRef(layouts[i]);
    }
    t->adjacent = PyTuple_New(nadj);
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
    if (nargs > n) {
        PyErr_Format(PyExc_TypeError, "%s() takes %zd positional argument%s but %zd %s given",
                     fn, n, sw_msg_s(n), nargs, nargs == 1 ? "was" : "were");
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
static PyObject *tensor_from_representation(PyObject *unused, PyObject *args, PyObject *kwargs)
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

/* ---- properties and queries (T-3, T-9, T-10, T-12) ---------------------- */

static PyObject *tensor_get_carrier(SwTensorObject *self, void *unused)
{
    (void)unused;
    return Py_NewRef(self->subs[0].carrier);
}

static PyObject *tensor_get_offset(SwTensorObject *self, void *unused)
{
    (void)unused;
    return PyLong_FromLongLong(self->subs[0].offset);
}

static PyObject *tensor_get_layout(SwTensorObject *self, void *unused)
{
    (void)unused;
    return Py_NewRef(self->subs[0].layout);
}

static PyObject *tensor_get_version(SwTensorObject *self, void *unused)
{
    (void)unused;
    return PyLong_FromLongLong(sw_py_state_version(self->subs[0].carrier));
}

static PyObject *tensor_get_subtensors(SwTensorObject *self, void *unused)
{
    (void)unused;
    PyObject *out = PyTuple_New(self->nsub);
    if (!out)
        return NULL;
    for (Py_ssize_t i = 0; i < self->nsub; i++) {
        SwSubtensor *s = &self->subs[i];
        PyObject *e = Py_BuildValue("(OOLO)", s->storage_dtype, s->carrier,
                                    (long long)s->offset, s->layout);
        if (!e) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, i, e);
    }
    return out;
}

static PyObject *tensor_get_adjacent(SwTensorObject *self, void *unused)
{
    (void)unused;
    return Py_NewRef(self->adjacent);
}

static PyObject *tensor_dtype(SwTensorObject *self, PyObject *unused)
{
    (void)unused;
    return Py_NewRef(self->dtype);
}

static PyObject *tensor_size(SwTensorObject *self, PyObject *unused)
{
    (void)unused;
    return PyLong_FromLongLong(SwLayout_CORE(self->subs[0].layout)->size);
}

static PyObject *tensor_carrier_type(SwTensorObject *self, PyObject *unused)
{
    (void)unused;
    return Py_NewRef((PyObject *)Py_TYPE(self->subs[0].carrier));
}

static PyObject *tensor_version_token(SwTensorObject *self, PyObject *unused)
{
    (void)unused;
    PyObject *out = PyList_New(0);
    if (!out)
        return NULL;
    for (Py_ssize_t i = 0; i < self->nsub; i++) {
        PyObject *c = self->subs[i].carrier;
        int seen = 0;
        for (Py_ssize_t j = 0; j < i; j++)
            seen |= self->subs[j].carrier == c;
        if (seen)
            continue;
        PyObject *e = Py_BuildValue("(NL)", PyLong_FromVoidPtr(c),
                                    (long long)sw_py_state_version(c));
        if (!e || PyList_Append(out, e) < 0) {
            Py_XDECREF(e);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(e);
    }
    PyObject *tuple = PyList_AsTuple(out);
    Py_DECREF(out);
    return tuple;
}

static PyObject *tensor_is_mutable(SwTensorObject *self, PyObject *unused)
{
    (void)unused;
    if (self->nsub != 1)
        Py_RETURN_FALSE;
    int r = sw_py_carrier_is_mutable(self->subs[0].carrier);
    if (r < 0)
        return NULL;
    return PyBool_FromLong(r);
}

static PyObject *tensor_is_differentiable(SwTensorObject *self, PyObject *unused)
{
    (void)unused;
    return PyBool_FromLong(self->dtype == sw_py_dtype(SW_DT_FLOAT32));
}

/* ---- element access (V-3, V-4) ------------------------------------------ */

/* Key shape: 0 no slice anywhere; 1 a slice as the key or a top-level entry
 * of a tuple key; 2 a slice only deeper (or inside a list). */
static int key_slice_kind(PyObject *key, int top);

static int seq_has_slice(PyObject *seq)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++)
        if (key_slice_kind(items[i], 0))
            return 1;
    return 0;
}

static int key_slice_kind(PyObject *key, int top)
{
    if (PySlice_Check(key))
        return 1;
    if (!PyTuple_Check(key) && !PyList_Check(key))
        return 0;
    int found = 0;
    if (Py_EnterRecursiveCall(" while reading a tensor key"))
        return 0; /* the error surfaces in the key validation below */
    if (top && PyTuple_Check(key)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(key) && found != 2; i++) {
            PyObject *e = PyTuple_GET_ITEM(key, i);
            if (PySlice_Check(e))
                found = 1;
            else if ((PyTuple_Check(e) || PyList_Check(e)) && seq_has_slice(e))
                found = 2;
        }
    } else if (seq_has_slice(key)) {
        found = 2;
    }
    Py_LeaveRecursiveCall();
    return found;
}

/* V-3 step 2: an integer, or (nested) lists/tuples of integers. */
static int key_check_types(PyObject *key)
{
    if (sw_py_is_integer(key))
        return 0;
    if (PyTuple_Check(key) || PyList_Check(key)) {
        if (Py_EnterRecursiveCall(" while reading a tensor key"))
            return -1;
        int rc = 0;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(key);
        /* Only type checks run here: no Python code can resize the list. */
        for (Py_ssize_t i = 0; i < n && rc == 0; i++)
            rc = key_check_types(PySequence_Fast_GET_ITEM(key, i));
        Py_LeaveRecursiveCall();
        return rc;
    }
    PyErr_Format(PyExc_TypeError,
                 "a tensor index must be an integer or a (nested) list/tuple of integers, "
                 "e.g. t[5] or t[1, [2, 0]] (slices make views: t[0, :]), not %.100s",
                 _PyType_Name(Py_TYPE(key)));
    return -1;
}

/* V-3 step 3: an integer component against the size of the mode it
 * addresses. Its __index__ runs first; the message then names the mode as
 * the user's key reached it. */
static int key_component(PyObject *obj, int64_t size, const sw_mode_path *path, int64_t *out)
{
    int sign;
    if (integer_value(obj, out, &sign) < 0)
        return -1;
    if (sign == 0 && *out >= 0 && *out < size)
        return 0;
    char where[1024];
    sw_msg_mode_name(path, "tensor", (long long)size, where, sizeof where);
    if (sign < 0 || (sign == 0 && *out < 0))
        PyErr_Format(PyExc_ValueError,
                     "index %S is out of range for %s: indices run from 0 to %lld and do not "
                     "wrap around", obj, where, (long long)size - 1);
    else
        PyErr_Format(PyExc_ValueError, "index %S is out of range for %s", obj, where);
    return -1;
}

/* Index of integer `key` over leaves [leaf, leaf + n): first-mode-fastest. */
static int index_integer(const sw_layout *L, int32_t leaf, int32_t n, PyObject *key,
                         const sw_mode_path *path, int64_t *acc)
{
    int64_t k, size = 1;
    for (int32_t j = 0; j < n; j++)
        size *= L->extents[leaf + j]; /* bounded by the layout's size */
    if (key_component(key, size, path, &k) < 0)
        return -1;
    for (int32_t j = 0; j < n; j++) {
        int64_t e = L->extents[leaf + j];
        *acc += (k % e) * L->strides[leaf + j];
        k /= e;
    }
    return 0;
}

/* L-9/L-10 for one level whose children span profile [pos, end) and whose
 * first leaf is `leaf`; `path` names that level for messages. */
static int index_level(const sw_layout *L, int32_t pos, int32_t end, int32_t leaf,
                       PyObject *key, sw_mode_path *path, int64_t *acc)
{
    if (!PyTuple_Check(key) && !PyList_Check(key)) {
        int32_t n = 0;
        for (int32_t p = pos; p < end; p++)
            n += L->profile[p] == SW_NODE_LEAF;
        return index_integer(L, leaf, n, key, path, acc);
    }
    Py_ssize_t nchild = 0;
    for (int32_t p = pos, nl; p < end; p = sw_py_mode_end(L->profile, p, &nl))
        nchild++;
    if (PySequence_Fast_GET_SIZE(key) != nchild) {
        char label[1024];
        sw_msg_mode_label(path, "tensor", label, sizeof label);
        Py_ssize_t got = PySequence_Fast_GET_SIZE(key);
        PyErr_Format(PyExc_ValueError,
                     "index %R has %zd component%s but %s has %zd %smode%s; give one "
                     "index per %smode, or one integer for the whole %s",
                     key, got, sw_msg_s(got), label, nchild, path->depth ? "sub-" : "",
                     sw_msg_s(nchild), path->depth ? "sub-" : "",
                     path->depth ? "mode" : "tensor");
        return -1;
    }
    /* A component's __index__ may run Python code: walk an immutable copy. */
    PyObject *items = PySequence_Tuple(key);
    if (!items)
        return -1;
    int rc = 0;
    if (Py_EnterRecursiveCall(" while indexing a tensor")) {
        Py_DECREF(items);
        return -1;
    }
    Py_ssize_t c = 0;
    path->depth++;
    for (int32_t p = pos, nl; p < end && rc == 0; c++) {
        PyObject *comp = PyTuple_GET_ITEM(items, c);
        int32_t q = sw_py_mode_end(L->profile, p, &nl);
        path->at[path->depth - 1] = (int32_t)c;
        if (L->profile[p] == SW_NODE_LEAF) {
            if (PyTuple_Check(comp) || PyList_Check(comp)) {
                char label[1024];
                sw_msg_mode_label(path, "tensor", label, sizeof label);
                PyErr_Format(PyExc_ValueError,
                             "%s has no sub-modes, so its index must be an integer, not %R",
                             label, comp);
                rc = -1;
            } else {
                rc = index_integer(L, leaf, 1, comp, path, acc);
            }
        } else {
            rc = index_level(L, p + 1, q - 1, leaf, comp, path, acc);
        }
        leaf += nl;
        p = q;
    }
    path->depth--;
    Py_LeaveRecursiveCall();
    Py_DECREF(items);
    return rc;
}

/* V-3/V-4 checks 2 and 3: the scalar index of `key` in layout L. */
static int tensor_key_index(const sw_layout *L, PyObject *key, int64_t *out)
{
    if (key_check_types(key) < 0)
        return -1;
    *out = 0;
    sw_mode_path path = {.depth = 0};
    return index_level(L, 0, L->nprofile, 0, key, &path, out);
}

static int require_one_subtensor(SwTensorObject *t, const char *operation)
{
    if (t->nsub == 1)
        return 0;
    return sw_msg_raise_planes(t->dtype, t->nsub, operation, SW_MSG_ONE_PLANE);
}

static PyObject *tensor_subscript(SwTensorObject *self, PyObject *key)
{
    if (key_slice_kind(key, 1))
        return sw_py_tensor_slice((PyObject *)self, key);
    if (PyErr_Occurred())
        return NULL;
    if (require_one_subtensor(self, "read element by element") < 0)
        return NULL;
    int64_t j;
    if (tensor_key_index(SwLayout_CORE(self->subs[0].layout), key, &j) < 0)
        return NULL;
    return sw_py_carrier_getitem(self->subs[0].carrier, self->subs[0].offset + j);
}

static int tensor_ass_subscript(SwTensorObject *self, PyObject *key, PyObject *value)
{
    if (!value) {
        PyErr_SetString(PyExc_TypeError, "Tensor elements cannot be deleted");
        return -1;
    }
    if (require_one_subtensor(self, "written element by element") < 0)
        return -1;
    if (key_slice_kind(key, 1)) {
        PyErr_SetString(PyExc_TypeError,
                        "element write takes an integer or (nested) list/tuple key, not a slice");
        return -1;
    }
    if (PyErr_Occurred())
        return -1;
    int64_t j;
    if (tensor_key_index(SwLayout_CORE(self->subs[0].layout), key, &j) < 0)
        return -1;
    return sw_py_carrier_setitem(self->subs[0].carrier, self->subs[0].offset + j, value);
}

/* ---- item / tolist (V-10) ----------------------------------------------- */

PyObject *sw_py_tensor_item(PyObject *obj)
{
    if (!SwTensor_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "item requires a Tensor, not %.100s",
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    SwTensorObject *t = (SwTensorObject *)obj;
    if (require_one_subtensor(t, "read with item()") < 0)
        return NULL;
    if (SwLayout_CORE(t->subs[0].layout)->size != 1) {
        long long n = (long long)SwLayout_CORE(t->subs[0].layout)->size;
        PyErr_Format(PyExc_ValueError,
                     "item requires a tensor with exactly one element, and this one has %lld; "
                     "use tolist() for several", n);
        return NULL;
    }
    /* Ordinal 0 is the all-zero coordinate: scalar index 0. */
    return sw_py_carrier_getitem(t->subs[0].carrier, t->subs[0].offset);
}

PyObject *sw_py_tensor_tolist(PyObject *obj)
{
    if (!SwTensor_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "to_list requires a Tensor, not %.100s",
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    SwTensorObject *t = (SwTensorObject *)obj;
    if (require_one_subtensor(t, "converted with tolist() or to_list()") < 0)
        return NULL;
    const sw_layout *L = SwLayout_CORE(t->subs[0].layout);
    PyObject *carrier = t->subs[0].carrier;
    int64_t *digit = NULL;
    PyObject *out = PyList_New((Py_ssize_t)L->size);
    if (!out)
        return NULL;
    digit = PyMem_Calloc((size_t)L->nleaves + 1, sizeof(int64_t));
    if (!digit) {
        PyErr_NoMemory();
        goto error;
    }
    /* Odometer over the leaves, first leaf fastest: ordinal order. */
    int64_t idx = t->subs[0].offset;
    for (int64_t k = 0; k < L->size; k++) {
        PyObject *v = sw_py_carrier_getitem(carrier, idx);
        if (!v)
            goto error;
        PyList_SET_ITEM(out, (Py_ssize_t)k, v);
        for (int32_t j = 0; j < L->nleaves; j++) {
            if (++digit[j] < L->extents[j]) {
                idx += L->strides[j];
                break;
            }
            idx -= L->strides[j] * (L->extents[j] - 1);
            digit[j] = 0;
        }
    }
    PyMem_Free(digit);
    return out;
error:
    PyMem_Free(digit);
    Py_DECREF(out);
    return NULL;
}

static PyObject *tensor_item(PyObject *self, PyObject *unused)
{
    (void)unused;
    return sw_py_tensor_item(self);
}

static PyObject *tensor_tolist(PyObject *self, PyObject *unused)
{
    (void)unused;
    return sw_py_tensor_tolist(self);
}

/* ---- autograd attributes (A-2..A-4) --------------------------------------- */

static int require_differentiable(SwTensorObject *self, const char *what)
{
    if (self->dtype == sw_py_dtype(SW_DT_FLOAT32))
        return 0;
    PyErr_Format(PyExc_RuntimeError,
                 "%s: this Tensor is non-differentiable (dtype %R); only Float32 "
                 "Tensors take part in autograd", what, self->dtype);
    return -1;
}

static PyObject *tensor_get_autograd_ctx(SwTensorObject *self, void *closure)
{
    (void)closure;
    return Py_NewRef(self->autograd_ctx);
}

static int tensor_set_autograd_ctx(SwTensorObject *self, PyObject *value, void *closure)
{
    (void)closure;
    if (!value) {
        PyErr_SetString(PyExc_AttributeError,
                        "autograd_ctx cannot be deleted; assign None instead");
        return -1;
    }
    if (value != Py_None) {
        if (require_differentiable(self, "cannot set autograd_ctx") < 0)
            return -1;
        if (!SwOperation_Check(value)) {
            PyErr_Format(PyExc_TypeError,
                         "autograd_ctx must be an Operation or None, not %.100s",
                         Py_TYPE(value)->tp_name);
            return -1;
        }
    }
    Py_SETREF(self->autograd_ctx, Py_NewRef(value));
    return 0;
}

static PyObject *tensor_get_grad(SwTensorObject *self, void *closure)
{
    (void)closure;
    if (require_differentiable(self, "no grad") < 0)
        return NULL;
    return Py_NewRef(self->grad);
}

static int tensor_set_grad(SwTensorObject *self, PyObject *value, void *closure)
{
    (void)closure;
    if (!value) {
        PyErr_SetString(PyExc_AttributeError, "grad cannot be deleted; assign None instead");
        return -1;
    }
    if (value != Py_None) {
        if (require_differentiable(self, "cannot set grad") < 0)
            return -1;
        if (!SwTensor_Check(value)) {
            PyErr_Format(PyExc_TypeError, "grad must be a Tensor or None, not %.100s",
                         Py_TYPE(value)->tp_name);
            return -1;
        }
    }
    Py_SETREF(self->grad, Py_NewRef(value));
    return 0;
}

/* ---- type ---------------------------------------------------------------- */

static PyGetSetDef tensor_getset[] = {
    {"autograd_ctx", (getter)tensor_get_autograd_ctx, (setter)tensor_set_autograd_ctx,
     "The Operation that produced this Tensor, or None for a leaf. Only a\n"
     "differentiable (Float32) Tensor can hold an Operation.", NULL},
    {"grad", (getter)tensor_get_grad, (setter)tensor_set_grad,
     "The accumulated gradient (a Tensor) or None. RuntimeError on a\n"
     "non-differentiable Tensor.", NULL},
    {"carrier", (getter)tensor_get_carrier, NULL, "The carrier that holds the values (the first plane's).", NULL},
    {"offset", (getter)tensor_get_offset, NULL, "The slot where the layout starts in the carrier.", NULL},
    {"layout", (getter)tensor_get_layout, NULL, "The Layout that places the values in the carrier.",
     NULL},
    {"version", (getter)tensor_get_version, NULL, "The carrier's write counter: grows every time its values change.", NULL},
    {"_subtensors", (getter)tensor_get_subtensors, NULL,
     "One (storage_dtype, carrier, offset, layout) tuple per plane.", NULL},
    {"_adjacent_layouts", (getter)tensor_get_adjacent, NULL,
     "The layouts that map a coordinate of each plane to the next plane.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef tensor_methods[] = {
    {"_from_representation", (PyCFunction)(void (*)(void))tensor_from_representation,
     METH_VARARGS | METH_KEYWORDS | METH_STATIC,
     "_from_representation(logical_dtype, subtensors, adjacent_layouts=())\n--\n\n"
     "A checked Tensor of `logical_dtype` built from (carrier, offset, layout)\n"
     "triples in plane order. Raises TypeError or ValueError when a piece does\n"
     "not fit the dtype's planes."},
    {"dtype", (PyCFunction)tensor_dtype, METH_NOARGS,
     "dtype($self, /)\n--\n\nThe DType of the Tensor's values."},
    {"size", (PyCFunction)tensor_size, METH_NOARGS,
     "size($self, /)\n--\n\nNumber of elements: the size of the layout's shape."},
    {"carrier_type", (PyCFunction)tensor_carrier_type, METH_NOARGS,
     "carrier_type($self, /)\n--\n\nThe class of the Tensor's carrier, type(t.carrier)."},
    {"_version_token", (PyCFunction)tensor_version_token, METH_NOARGS,
     "_version_token($self, /)\n--\n\nOne (id(carrier), version) pair per distinct carrier."},
    {"is_mutable", (PyCFunction)tensor_is_mutable, METH_NOARGS,
     "is_mutable($self, /)\n--\n\nWhether values can be written: one plane on a mutable carrier."},
    {"is_differentiable", (PyCFunction)tensor_is_differentiable, METH_NOARGS,
     "is_differentiable($self, /)\n--\n\nWhether gradients can flow through it: true for Float32 only."},
    {"item", tensor_item, METH_NOARGS,
     "item($self, /)\n--\n\nThe value of a one-element Tensor. Raises ValueError for more elements."},
    {"tolist", tensor_tolist, METH_NOARGS,
     "tolist($self, /)\n--\n\nAll values as a flat list, first mode fastest (column-major order)."},
    {"backward", (PyCFunction)(void (*)(void))sw_py_tensor_backward,
     METH_FASTCALL | METH_KEYWORDS,
     "backward($self, /, gradient=None, retain_graph=False)\n--\n\n"
     "Compute gradients of this Tensor with respect to the leaves of its\n"
     "graph and add them into their .grad (and the .grad of Tensors that\n"
     "retain theirs). gradient is the cotangent: a Tensor with this Tensor's\n"
     "layout (or, for a broadcast layout, its shape in an injective layout);\n"
     "it may be omitted only for a one-element Tensor, which then uses 1.0.\n"
     "Unless retain_graph is True, the traversed graph is released and\n"
     "cannot be traversed again. Raises RuntimeError for a non-differentiable\n"
     "Tensor, a released graph or a saved input modified in place, TypeError\n"
     "or ValueError for a bad gradient. When it raises, no .grad changes."},
    {"retain_grad", (PyCFunction)(void (*)(void))sw_py_tensor_retain_grad,
     METH_FASTCALL | METH_KEYWORDS,
     "retain_grad($self, /, retain=True)\n--\n\n"
     "Make later backward passes that reach this non-leaf Tensor accumulate\n"
     "its gradient into .grad (retain=False stops it). No effect on leaves.\n"
     "Raises RuntimeError for a non-differentiable Tensor and TypeError when\n"
     "retain is not a bool."},
    {"__dlpack__", (PyCFunction)(void (*)(void))sw_py_tensor_dlpack,
     METH_FASTCALL | METH_KEYWORDS,
     "__dlpack__($self, /, stream=None, *, max_version=None, dl_device=None, copy=None)\n"
     "--\n\n"
     "Export the values as a DLPack capsule that aliases the carrier's memory\n"
     "(no copy), for numpy.from_dlpack, torch.from_dlpack and the like.\n"
     "max_version=(1, 0) or higher gives a versioned capsule, otherwise a\n"
     "legacy one. Only Float32 and Int32 on a carrier that supports export\n"
     "(CPU) can be exported. Raises BufferError for copy=True, another device\n"
     "or an unsupported carrier or dtype; TypeError or ValueError for a\n"
     "malformed max_version or dl_device.\n\n"
     "    numpy.from_dlpack(friendly.arange(4))"},
    {"__array__", (PyCFunction)(void (*)(void))sw_py_tensor_array,
     METH_FASTCALL | METH_KEYWORDS,
     "__array__($self, /, dtype=None, copy=None)\n--\n\n"
     "The values as a NumPy array shaped like the layout's leaf modes:\n"
     "the carrier's own memory when NumPy can take it over DLPack (as\n"
     "numpy.from_dlpack does, read-only when the carrier cannot be written),\n"
     "otherwise a fresh copy. copy=True always copies; copy=False raises\n"
     "ValueError when a copy would be needed. dtype converts the result."},
    {"__dlpack_device__", sw_py_tensor_dlpack_device, METH_NOARGS,
     "__dlpack_device__($self, /)\n--\n\n"
     "The (device_type, device_id) pair of the carrier's memory, (1, 0) for\n"
     "CPU. Raises BufferError when the carrier does not support export."},
    {NULL, NULL, 0, NULL},
};

static PyMappingMethods tensor_as_mapping = {
    .mp_length = NULL, /* T-14: no len() */
    .mp_subscript = (binaryfunc)tensor_subscript,
    .mp_ass_subscript = (objobjargproc)tensor_ass_subscript,
};

PyTypeObject SwTensor_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "strideweave.Tensor",
    .tp_basicsize = sizeof(SwTensorObject),
    .tp_dealloc = (destructor)tensor_dealloc,
    .tp_repr = sw_py_tensor_repr,
    .tp_str = sw_py_tensor_str,
    .tp_as_mapping = &tensor_as_mapping,
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
    .tp_methods = tensor_methods,
    .tp_getset = tensor_getset,
    .tp_new = tensor_tp_new,
    .tp_vectorcall = tensor_vectorcall,
};

int sw_py_tensor_init(PyObject *module)
{
    if (PyType_Ready(&SwTensor_Type) < 0)
        return -1;
    Py_INCREF(&SwTensor_Type);
    if (PyModule_AddObject(module, "Tensor", (PyObject *)&SwTensor_Type) < 0) {
        Py_DECREF(&SwTensor_Type);
        return -1;
    }
    return 0;
}
