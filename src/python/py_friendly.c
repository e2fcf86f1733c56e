/* Friendly CPU creation and access (contract-core F-1..F-5, V-10):
 * tensor, zeros, ones, full, arange, scaled_int32, item, to_list.
 *
 * Factories validate everything they can before allocating, then build one
 * exact-CPU carrier and fill its slots in C (sw_py_store_slot straight into
 * the carrier's memory), so a failure leaves nothing reachable. */
#include "sw_python.h"
#include "sw_messages.h"
#include "sw_layout_slots.h"

#include <string.h>

static const sw_dtype cpu_dtypes[] = {SW_DT_FLOAT32, SW_DT_INT32, SW_DT_BOOL};

/* ---- argument parsing ----------------------------------------------------- */

/* Vectorcall parsing for `fn(first?, *rest?, *, kw...)`. `first` names the
 * one positional-or-keyword parameter (NULL: none); `max_pos` < 0 allows any
 * number of positionals. Keyword values land in kwvals (borrowed, NULL when
 * absent), in the order of `kwlist` (NULL-terminated). */
static int parse_args(const char *fn, const char *first, Py_ssize_t max_pos,
                      Py_ssize_t nargs, PyObject *const *args, PyObject *kwnames,
                      const char *const *kwlist, PyObject **kwvals, PyObject **first_val)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (const char *const *k = kwlist; *k; k++)
        kwvals[k - kwlist] = NULL;
    if (first_val)
        *first_val = nargs > 0 ? args[0] : NULL;
    if (max_pos >= 0 && nargs > max_pos) {
        PyErr_Format(PyExc_TypeError, "%s() takes %zd positional argument%s but %zd %s given",
                     fn, max_pos, max_pos == 1 ? "" : "s", nargs, nargs == 1 ? "was" : "were");
        return -1;
    }
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        PyObject *value = args[nargs + i];
        int matched = 0;
        if (first && first_val && PyUnicode_CompareWithASCIIString(name, first) == 0) {
            if (*first_val) {
                PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'",
                             fn, first);
                return -1;
            }
            *first_val = value;
            continue;
        }
        for (const char *const *k = kwlist; *k; k++) {
            if (PyUnicode_CompareWithASCIIString(name, *k) == 0) {
                kwvals[k - kwlist] = value;
                matched = 1;
                break;
            }
        }
        if (!matched) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", fn,
                         name);
            return -1;
        }
    }
    if (first && first_val && !*first_val) {
        PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'", fn, first);
        return -1;
    }
    return 0;
}

/* F-1: `dtype` keyword (NULL means the Float32 default). */
static int friendly_dtype(PyObject *dtype, sw_dtype *out)
{
    if (!dtype) {
        *out = SW_DT_FLOAT32;
        return 0;
    }
    if (sw_py_check_storage_dtype(dtype, "CPU", cpu_dtypes, 3) < 0)
        return -1;
    *out = SwDType_ID(dtype);
    return 0;
}

static int positive_extent(PyObject *obj, int64_t *out)
{
    if (!sw_py_is_integer(obj)) {
        PyErr_SetString(PyExc_ValueError, "extents must be positive integers");
        return -1;
    }
    long long v;
    int overflow;
    if (sw_py_index_ll(obj, &v, &overflow) < 0)
        return -1;
    if (overflow > 0) {
        PyErr_Format(PyExc_OverflowError, "extent %R exceeds signed 64 bits", obj);
        return -1;
    }
    if (overflow < 0 || v < 1) {
        PyErr_SetString(PyExc_ValueError, "extents must be positive integers");
        return -1;
    }
    *out = (int64_t)v;
    return 0;
}

/* column_major(*extents) as a Layout object (L-15 over a flat shape). */
static PyObject *column_major_layout(const int64_t *extents, Py_ssize_t n)
{
    sw_error err;
    uint8_t *profile = PyMem_Malloc((size_t)n + 1);
    if (!profile)
        return PyErr_NoMemory();
    memset(profile, SW_NODE_LEAF, (size_t)n);
    sw_layout *L = sw_layout_canonical((int32_t)n, profile, extents, &err);
    PyMem_Free(profile);
    if (!L) {
        sw_py_raise(&err);
        return NULL;
    }
    return sw_py_layout_wrap(L);
}

/* F-1 extents checks, then the column-major layout. */
static PyObject *extents_layout(PyObject *const *args, Py_ssize_t n)
{
    if (n == 0) {
        PyErr_SetString(PyExc_ValueError, "at least one extent is required");
        return NULL;
    }
    if (n > INT32_MAX / 2) {
        PyErr_SetString(PyExc_ValueError, "too many extents");
        return NULL;
    }
    int64_t *extents = PyMem_Malloc(sizeof(int64_t) * (size_t)n);
    if (!extents)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) {
        if (positive_extent(args[i], &extents[i]) < 0) {
            PyMem_Free(extents);
            return NULL;
        }
    }
    PyObject *layout = column_major_layout(extents, n);
    PyMem_Free(extents);
    return layout;
}

/* ---- filling --------------------------------------------------------------- */

static void *slot_at(PyObject *cpu, size_t bytes, int64_t index)
{
    return (char *)((SwHostCarrierObject *)cpu)->data + (size_t)index * bytes;
}

/* Fresh CPU carrier of layout->cosize slots, every slot holding `pattern`. */
static PyObject *cpu_filled(sw_dtype dt, int64_t nslots, const void *pattern)
{
    PyObject *cpu = sw_py_cpu_new(dt, nslots, 1, pattern == NULL);
    if (!cpu || !pattern)
        return cpu;
    /* Typed loops the compiler vectorizes; a per-slot memcpy of a runtime
     * width was ~25x slower than numpy.ones. */
    void *data = ((SwHostCarrierObject *)cpu)->data;
    size_t bytes = sw_dtype_slot_bytes(dt);
    if (bytes == 1) {
        memset(data, *(const uint8_t *)pattern, (size_t)nslots);
    } else if (bytes == 4) {
        uint32_t v, *p = data;
        memcpy(&v, pattern, 4);
        for (int64_t i = 0; i < nslots; i++)
            p[i] = v;
    } else {
        for (int64_t i = 0; i < nslots; i++)
            memcpy(slot_at(cpu, bytes, i), pattern, bytes);
    }
    return cpu;
}

/* T-13 placement: items[k] (a private tuple, ordinal order) goes to slot
 * L.index(k) of a fresh zeroed carrier of L.cosize slots; on a shared slot
 * the later value wins. Converts each value by C-9; the first failure
 * drops the carrier. */
static PyObject *cpu_placed(sw_dtype dt, const sw_layout *L, PyObject *items)
{
    size_t bytes = sw_dtype_slot_bytes(dt);
    int64_t *slots = sw_py_layout_slots(L, 0); /* the core's walk */
    if (!slots)
        return NULL;
    PyObject *cpu = sw_py_cpu_new(dt, L->cosize, 1, 1);
    for (int64_t k = 0; cpu && k < L->size; k++) {
        PyObject *v = PyTuple_GET_ITEM(items, (Py_ssize_t)k);
        Py_INCREF(v);
        int rc = sw_py_store_slot(dt, v, slot_at(cpu, bytes, slots[k]));
        Py_DECREF(v);
        if (rc < 0)
            Py_CLEAR(cpu);
    }
    PyMem_Free(slots);
    return cpu;
}

/* ---- tensor (F-2) ------------------------------------------------------------ */

static const char MSG_NONEMPTY[] = "values must be a non-empty list or tuple";
static const char MSG_EMPTY_LEVEL[] = "values must not contain empty levels";
static const char MSG_RECT[] = "values must be rectangular across every level";

typedef struct {
    int64_t *extents;
    int64_t *strides; /* column-major strides = ordinal weights */
    Py_ssize_t ndim;
    PyObject *flat;   /* ordinal-ordered leaf values */
} nested_values;

static int is_seq(PyObject *o)
{
    return PyList_Check(o) || PyTuple_Check(o);
}

/* Walk one level at depth d; `base` is the ordinal of its first element. */
static int nested_collect(nested_values *nv, PyObject *obj, Py_ssize_t d, int64_t base)
{
    if (d == nv->ndim) {
        if (is_seq(obj)) {
            PyErr_SetString(PyExc_ValueError,
                            PySequence_Fast_GET_SIZE(obj) == 0 ? MSG_EMPTY_LEVEL : MSG_RECT);
            return -1;
        }
        Py_INCREF(obj);
        PyList_SET_ITEM(nv->flat, (Py_ssize_t)base, obj);
        return 0;
    }
    if (!is_seq(obj)) {
        PyErr_SetString(PyExc_ValueError, MSG_RECT);
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
    if (n == 0 || n != nv->extents[d]) {
        PyErr_SetString(PyExc_ValueError, n == 0 ? MSG_EMPTY_LEVEL : MSG_RECT);
        return -1;
    }
    if (Py_EnterRecursiveCall(" while reading tensor values"))
        return -1;
    int rc = 0;
    for (Py_ssize_t i = 0; i < n && rc == 0; i++)
        rc = nested_collect(nv, PySequence_Fast_GET_ITEM(obj, i), d + 1,
                            base + (int64_t)i * nv->strides[d]);
    Py_LeaveRecursiveCall();
    return rc;
}

/* F-2 (3) without a layout: extents from the first elements, then the
 * rectangular walk. Fills *layout_out and returns the flat list. */
static PyObject *nested_read(PyObject *values, PyObject **layout_out)
{
    nested_values nv = {NULL, NULL, 0, NULL};
    Py_ssize_t cap = 8;
    PyObject *layout = NULL;
    if (!is_seq(values) || PySequence_Fast_GET_SIZE(values) == 0) {
        PyErr_SetString(PyExc_ValueError, MSG_NONEMPTY);
        return NULL;
    }
    nv.extents = PyMem_Malloc(sizeof(int64_t) * (size_t)cap);
    if (!nv.extents)
        return PyErr_NoMemory();
    for (PyObject *v = values; is_seq(v); v = PySequence_Fast_GET_ITEM(v, 0)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(v);
        if (n == 0) {
            PyErr_SetString(PyExc_ValueError, MSG_EMPTY_LEVEL);
            goto error;
        }
        if (nv.ndim >= Py_GetRecursionLimit()) {
            PyErr_SetString(PyExc_RecursionError,
                            "maximum recursion depth exceeded while reading tensor values");
            goto error;
        }
        if (nv.ndim == cap) {
            cap *= 2;
            int64_t *grown = PyMem_Realloc(nv.extents, sizeof(int64_t) * (size_t)cap);
            if (!grown) {
                PyErr_NoMemory();
                goto error;
            }
            nv.extents = grown;
        }
        nv.extents[nv.ndim++] = n;
    }
    layout = column_major_layout(nv.extents, nv.ndim);
    if (!layout)
        goto error;
    const sw_layout *L = SwLayout_CORE(layout);
    nv.strides = L->strides;
    nv.flat = PyList_New((Py_ssize_t)L->size);
    if (!nv.flat)
        goto error;
    if (nested_collect(&nv, values, 0, 0) < 0)
        goto error;
    PyMem_Free(nv.extents);
    *layout_out = layout;
    return nv.flat;
error:
    PyMem_Free(nv.extents);
    Py_XDECREF(nv.flat);
    Py_XDECREF(layout);
    return NULL;
}

/* F-2 after argument parsing; `dtype_obj` NULL means Float32. */
static PyObject *make_tensor(PyObject *values, PyObject *layout, PyObject *dtype_obj,
                             sw_dtype *dt_out)
{
    PyObject *flat = NULL, *cpu = NULL, *result = NULL;
    sw_dtype dt;
    if (layout == Py_None)
        layout = NULL;
    if (layout && !SwLayout_Check(layout)) {
        PyErr_Format(PyExc_TypeError,
                     "layout must be a Layout, e.g. Layout(Shape(4), Stride(1)), not %.100s",
                     _PyType_Name(Py_TYPE(layout)));
        return NULL;
    }
    if (friendly_dtype(dtype_obj, &dt) < 0)
        return NULL;
    if (layout) {
        Py_INCREF(layout);
        flat = PySequence_Tuple(values);
        if (!flat)
            goto done;
        if (PyTuple_GET_SIZE(flat) != SwLayout_CORE(layout)->size) {
            PyErr_Format(PyExc_ValueError,
                         "got %zd value%s for a layout of size %lld; give exactly one value "
                         "per element", PyTuple_GET_SIZE(flat),
                         PyTuple_GET_SIZE(flat) == 1 ? "" : "s",
                         (long long)SwLayout_CORE(layout)->size);
            goto done;
        }
    } else {
        /* F-2 extended: an array (buffer, DLPack, __array__) is copied
         * with its logical indexing. */
        result = sw_py_friendly_from_buffer(values, dt, dtype_obj != NULL);
        if (result || PyErr_Occurred()) {
            if (result && dt_out)
                *dt_out = dt;
            return result;
        }
        flat = nested_read(values, &layout);
        if (!flat)
            goto done;
        /* A private tuple: conversion hooks cannot empty it under cpu_placed. */
        Py_SETREF(flat, PyList_AsTuple(flat));
        if (!flat)
            goto done;
    }
    cpu = cpu_placed(dt, SwLayout_CORE(layout), flat);
    if (!cpu)
        goto done;
    result = sw_py_tensor_new1(cpu, 0, layout);
    if (dt_out)
        *dt_out = dt;
done:
    Py_XDECREF(flat);
    Py_XDECREF(cpu);
    Py_XDECREF(layout);
    return result;
}

static PyObject *friendly_tensor(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames)
{
    static const char *const kwlist[] = {"layout", "dtype", NULL};
    PyObject *kw[2], *values;
    (void)mod;
    if (parse_args("tensor", "values", 1, nargs, args, kwnames, kwlist, kw, &values) < 0)
        return NULL;
    return make_tensor(values, kw[0], kw[1], NULL);
}

/* ---- zeros, ones, full (F-3) ------------------------------------------------- */

static PyObject *filled(const char *fn, PyObject *const *args, Py_ssize_t nargs,
                        PyObject *kwnames, int which /* 0 zeros, 1 ones, 2 full */)
{
    static const char *const kw_dtype[] = {"dtype", NULL};
    static const char *const kw_full[] = {"value", "dtype", NULL};
    PyObject *kw[2] = {NULL, NULL};
    PyObject *layout = NULL, *cpu = NULL, *result = NULL;
    union { float f; int32_t i; uint8_t b; } slot;
    sw_dtype dt;

    if (parse_args(fn, NULL, -1, nargs, args, kwnames, which == 2 ? kw_full : kw_dtype, kw,
                   NULL) < 0)
        return NULL;
    PyObject *value = which == 2 ? kw[0] : NULL, *dtype = which == 2 ? kw[1] : kw[0];
    if (which == 2 && !value) {
        PyErr_SetString(PyExc_TypeError, "full() missing required keyword-only argument 'value'");
        return NULL;
    }
    layout = extents_layout(args, nargs);
    if (!layout)
        return NULL;
    if (friendly_dtype(dtype, &dt) < 0)
        goto done;
    if (which == 1)
        value = dt == SW_DT_BOOL ? Py_NewRef(Py_True) : (dt == SW_DT_INT32 ? PyLong_FromLong(1)
                                                                : PyFloat_FromDouble(1.0));
    else if (value)
        Py_INCREF(value);
    if (which != 0) {
        if (!value)
            goto done;
        int rc = sw_py_store_slot(dt, value, &slot);
        Py_DECREF(value);
        if (rc < 0)
            goto done;
    }
    cpu = cpu_filled(dt, SwLayout_CORE(layout)->cosize, which == 0 ? NULL : &slot);
    if (!cpu)
        goto done;
    result = sw_py_tensor_new1(cpu, 0, layout);
done:
    Py_XDECREF(cpu);
    Py_XDECREF(layout);
    return result;
}

static PyObject *friendly_zeros(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames)
{
    (void)mod;
    return filled("zeros", args, nargs, kwnames, 0);
}

static PyObject *friendly_ones(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames)
{
    (void)mod;
    return filled("ones", args, nargs, kwnames, 1);
}

static PyObject *friendly_full(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames)
{
    (void)mod;
    return filled("full", args, nargs, kwnames, 2);
}

/* ---- arange (F-4) ------------------------------------------------------------ */

static PyObject *friendly_arange(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames)
{
    static const char *const kwlist[] = {"dtype", NULL};
    PyObject *kw[1], *count, *layout = NULL, *cpu = NULL, *result = NULL;
    int64_t n;
    sw_dtype dt;
    (void)mod;
    if (parse_args("arange", "count", 1, nargs, args, kwnames, kwlist, kw, &count) < 0)
        return NULL;
    if (positive_extent(count, &n) < 0)
        return NULL;
    if (kw[0]) {
        if (!SwDType_Check(kw[0])) {
            PyErr_Format(PyExc_TypeError, "dtype must be a DType, not %.100s",
                         Py_TYPE(kw[0])->tp_name);
            return NULL;
        }
        dt = SwDType_ID(kw[0]);
        if (dt != SW_DT_FLOAT32 && dt != SW_DT_INT32) {
            PyErr_Format(PyExc_ValueError, "arange supports dtype Float32 and Int32, not %s",
                         sw_dtype_info_of(dt)->name);
            return NULL;
        }
    } else {
        dt = SW_DT_FLOAT32;
    }
    if (dt == SW_DT_INT32 && n - 1 > INT32_MAX) {
        PyErr_Format(PyExc_OverflowError, "arange(%lld) exceeds the Int32 range",
                     (long long)n);
        return NULL;
    }
    layout = column_major_layout(&n, 1);
    if (!layout)
        return NULL;
    cpu = sw_py_cpu_new(dt, n, 1, 0);
    if (!cpu)
        goto done;
    void *data = ((SwHostCarrierObject *)cpu)->data;
    if (dt == SW_DT_INT32) {
        for (int64_t k = 0; k < n; k++)
            ((int32_t *)data)[k] = (int32_t)k;
    } else {
        for (int64_t k = 0; k < n; k++)
            ((float *)data)[k] = (float)k; /* nearest binary32, ties to even */
    }
    result = sw_py_tensor_new1(cpu, 0, layout);
done:
    Py_XDECREF(cpu);
    Py_XDECREF(layout);
    return result;
}

/* ---- scaled_int32 (F-5) ------------------------------------------------------ */

static PyObject *friendly_scaled_int32(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                                       PyObject *kwnames)
{
    static const char *const kwlist[] = {"scale", "layout", NULL};
    PyObject *kw[2], *values;
    PyObject *plane0 = NULL, *cpu1 = NULL, *l1 = NULL, *s0 = NULL, *result = NULL;
    float scale;
    sw_error err;
    (void)mod;
    if (parse_args("scaled_int32", "values", 1, nargs, args, kwnames, kwlist, kw, &values) < 0)
        return NULL;
    plane0 = make_tensor(values, kw[1], sw_py_dtype(SW_DT_INT32), NULL);
    if (!plane0)
        return NULL;
    if (kw[0]) {
        if (sw_py_store_slot(SW_DT_FLOAT32, kw[0], &scale) < 0)
            goto done;
    } else {
        scale = 1.0f;
    }
    SwSubtensor *p0 = &((SwTensorObject *)plane0)->subs[0];
    const sw_layout *L0 = SW_SUB_LAYOUT(p0);

    static const uint8_t leaf_profile[1] = {SW_NODE_LEAF};
    static const int64_t one[1] = {1};
    sw_layout *core = sw_layout_new(1, leaf_profile, one, one, &err);
    if (!core) {
        sw_py_raise(&err);
        goto done;
    }
    l1 = sw_py_layout_wrap(core);
    if (!l1)
        goto done;
    int64_t *zeros = PyMem_Calloc((size_t)L0->nleaves + 1, sizeof(int64_t));
    if (!zeros) {
        PyErr_NoMemory();
        goto done;
    }
    core = sw_layout_new(L0->nprofile, L0->profile, L0->extents, zeros, &err);
    PyMem_Free(zeros);
    if (!core) {
        sw_py_raise(&err);
        goto done;
    }
    s0 = sw_py_layout_wrap(core);
    if (!s0)
        goto done;
    cpu1 = sw_py_cpu_new(SW_DT_FLOAT32, 1, 1, 0);
    if (!cpu1)
        goto done;
    memcpy(((SwHostCarrierObject *)cpu1)->data, &scale, sizeof scale);

    PyObject *carriers[2] = {p0->carrier, cpu1};
    PyObject *layouts[2] = {p0->layout, l1};
    int64_t offsets[2] = {0, 0};
    result = sw_py_tensor_from_parts(sw_py_dtype(SW_DT_SCALED_INT32), 2, carriers, offsets,
                                     layouts, &s0);
done:
    Py_XDECREF(plane0);
    Py_XDECREF(cpu1);
    Py_XDECREF(l1);
    Py_XDECREF(s0);
    return result;
}

/* ---- item, to_list (V-10) ------------------------------------------------------ */

static PyObject *friendly_item(PyObject *mod, PyObject *t)
{
    (void)mod;
    return sw_py_tensor_item(t);
}

static PyObject *friendly_to_list(PyObject *mod, PyObject *t)
{
    (void)mod;
    return sw_py_tensor_tolist(t);
}

static PyMethodDef friendly_functions[] = {
    {"tensor", (PyCFunction)(void (*)(void))friendly_tensor, METH_FASTCALL | METH_KEYWORDS,
     "tensor(values, *, layout=None, dtype=DType.Float32)\n--\n\n"
     "A new CPU Tensor holding `values`.\n\n"
     "Without layout, values is a non-empty nested list/tuple; its nesting\n"
     "gives the extents and values[i][j] lands at coordinate (i, j) of\n"
     "column_major(*extents). It may also be an array (NumPy, PyTorch, JAX,\n"
     "array.array: anything exporting DLPack, the buffer protocol or\n"
     "__array__), copied so that t[i, j] == a[i, j]; without dtype a float\n"
     "array becomes Float32, a bool array Bool and an integer array Int32\n"
     "(OverflowError when a value does not fit: pass dtype=DType.Float32).\n"
     "With layout, values is any iterable of layout.size values, placed in\n"
     "order. dtype is Float32, Int32 or Bool (Float32 for lists).\n"
     "Raises TypeError for a layout that is not a Layout or a dtype that is\n"
     "not a DType; ValueError for ragged or empty values, a wrong count, or\n"
     "an unsupported dtype.\n\n"
     "    tensor([[1.0, 2.0], [3.0, 4.0]])[1, 0] == 3.0"},
    {"zeros", (PyCFunction)(void (*)(void))friendly_zeros, METH_FASTCALL | METH_KEYWORDS,
     "zeros(*extents, dtype=DType.Float32)\n--\n\n"
     "A new CPU Tensor of zeros laid out by column_major(*extents).\n"
     "Raises ValueError when no extent is given or one is not an int >= 1,\n"
     "TypeError or ValueError for a bad dtype. zeros(2, 3).size() == 6."},
    {"ones", (PyCFunction)(void (*)(void))friendly_ones, METH_FASTCALL | METH_KEYWORDS,
     "ones(*extents, dtype=DType.Float32)\n--\n\n"
     "A new CPU Tensor of ones (True for Bool) laid out by\n"
     "column_major(*extents). Raises as zeros does."},
    {"full", (PyCFunction)(void (*)(void))friendly_full, METH_FASTCALL | METH_KEYWORDS,
     "full(*extents, value, dtype=DType.Float32)\n--\n\n"
     "A new CPU Tensor holding `value` (a required keyword) at every\n"
     "coordinate, laid out by column_major(*extents). Raises as zeros does,\n"
     "and TypeError or OverflowError when value does not fit the dtype.\n"
     "full(2, 2, value=7, dtype=DType.Int32)"},
    {"arange", (PyCFunction)(void (*)(void))friendly_arange, METH_FASTCALL | METH_KEYWORDS,
     "arange(count, *, dtype=DType.Float32)\n--\n\n"
     "A new CPU Tensor holding 0, 1, ..., count - 1 (Float32 or Int32).\n"
     "Raises ValueError when count is not an int >= 1 or dtype is Bool.\n"
     "arange(4).tolist() == [0.0, 1.0, 2.0, 3.0]"},
    {"scaled_int32", (PyCFunction)(void (*)(void))friendly_scaled_int32,
     METH_FASTCALL | METH_KEYWORDS,
     "scaled_int32(values, *, scale=1.0, layout=None)\n--\n\n"
     "A new ScaledInt32 Tensor: `values` as Int32 (same forms and errors as\n"
     "tensor) and one Float32 `scale` shared by every element."},
    {"item", friendly_item, METH_O,
     "item(tensor, /)\n--\n\n"
     "The value of a one-element Tensor. Raises ValueError when it has more\n"
     "elements and TypeError when tensor is not a Tensor."},
    {"to_list", friendly_to_list, METH_O,
     "to_list(tensor, /)\n--\n\n"
     "All values of a Tensor as a flat list, first mode fastest:\n"
     "to_list(tensor([[1, 2], [3, 4]], dtype=DType.Int32)) == [1, 3, 2, 4]."},
    {NULL, NULL, 0, NULL},
};

int sw_py_friendly_init(PyObject *module)
{
    return PyModule_AddFunctions(module, friendly_functions);
}
