/* Tensor.__array__ (NumPy's array protocol, NumPy 2 form with `copy`).
 *
 * A Tensor NumPy can take over DLPack (one subtensor, Float32/Int32, a
 * carrier that exports) becomes exactly what numpy.from_dlpack(t) gives:
 * the carrier's memory, leaf-mode shape and strides, read-only when the
 * export says so. Every other readable Tensor is copied: a fresh
 * Fortran-ordered array of the leaf-mode shape (ordinal k is the k-th
 * element in first-mode-fastest order) filled by the bulk reader in one C
 * pass. Like DLPack export this reads values only: no version moves and
 * no autograd node is recorded. NumPy is imported here, on first use,
 * never by the rest of the extension. */
#include "sw_python.h"

#include <string.h>

static PyObject *np_module;      /* numpy */
static PyObject *np_from_dlpack; /* numpy.from_dlpack */
static PyObject *np_asarray;     /* numpy.asarray */
static PyObject *np_empty;       /* numpy.empty */

static int numpy_ready(void)
{
    if (np_module)
        return 0;
    PyObject *np = PyImport_ImportModule("numpy");
    if (!np)
        return -1;
    np_from_dlpack = PyObject_GetAttrString(np, "from_dlpack");
    np_asarray = np_from_dlpack ? PyObject_GetAttrString(np, "asarray") : NULL;
    np_empty = np_asarray ? PyObject_GetAttrString(np, "empty") : NULL;
    if (!np_empty) {
        Py_CLEAR(np_from_dlpack);
        Py_CLEAR(np_asarray);
        Py_DECREF(np);
        return -1;
    }
    np_module = np;
    return 0;
}

/* NumPy's name for the host slot of a storage dtype. */
static const char *numpy_name(sw_dtype dt)
{
    switch (dt) {
    case SW_DT_FLOAT32: return "float32";
    case SW_DT_INT32: return "int32";
    case SW_DT_BOOL: return "bool";
    default: return NULL;
    }
}

/* __array__(dtype=None, copy=None): positional or keyword, as NumPy calls
 * it. Borrowed references; Py_None when absent. */
static int parse_array_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                            PyObject **dtype, PyObject **copy)
{
    *dtype = *copy = Py_None;
    if (nargs > 2) {
        PyErr_Format(PyExc_TypeError,
                     "__array__() takes at most 2 arguments (dtype, copy), %zd given", nargs);
        return -1;
    }
    if (nargs > 0)
        *dtype = args[0];
    if (nargs > 1)
        *copy = args[1];
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *kw = PyTuple_GET_ITEM(kwnames, i);
        PyObject **slot = PyUnicode_CompareWithASCIIString(kw, "dtype") == 0 ? dtype
                          : PyUnicode_CompareWithASCIIString(kw, "copy") == 0 ? copy
                                                                               : NULL;
        if (!slot) {
            PyErr_Format(PyExc_TypeError,
                         "__array__() got an unexpected keyword argument '%U'", kw);
            return -1;
        }
        if ((slot == dtype && nargs > 0) || (slot == copy && nargs > 1)) {
            PyErr_Format(PyExc_TypeError,
                         "__array__() got multiple values for argument '%U'", kw);
            return -1;
        }
        *slot = args[nargs + i];
    }
    return 0;
}

/* copy as NumPy's protocol reads it: None, or a truth value. -1 for None. */
static int copy_mode(PyObject *copy)
{
    if (copy == Py_None)
        return -1;
    int truth = PyObject_IsTrue(copy);
    return truth < 0 ? -2 : truth;
}

/* Whether NumPy can take this Tensor over DLPack without a copy: the exact
 * CPU carrier always can for Float32/Int32; a carrier class of the user's
 * may opt in through dlpack_info, which is then tried. Shipped carriers
 * other than CPU refuse DLPack, so they are copied without asking. */
static int maybe_exportable(SwTensorObject *t)
{
    sw_dtype dt = SwDType_ID(t->dtype);
    if (dt != SW_DT_FLOAT32 && dt != SW_DT_INT32)
        return 0;
    PyObject *c = t->subs[0].carrier;
    if (Py_IS_TYPE(c, &SwCPU_Type))
        return 1;
    return !(Py_IS_TYPE(c, &SwGeneric_Type) || Py_IS_TYPE(c, &SwFileBacked_Type) ||
             Py_IS_TYPE(c, &SwEvictable_Type) || Py_IS_TYPE(c, &SwMetal_Type));
}

/* 1 when the carrier reports the CPU as its DLPack device, 0 when it
 * declines DLPack (BufferError) or lives elsewhere (NumPy would refuse
 * it), -1 on any other error. */
static int exports_to_cpu(PyObject *self)
{
    PyObject *dev = sw_py_tensor_dlpack_device(self, NULL);
    if (!dev) {
        if (!PyErr_ExceptionMatches(PyExc_BufferError))
            return -1;
        PyErr_Clear();
        return 0;
    }
    PyObject *cpu = Py_BuildValue("(ii)", 1, 0);
    int eq = cpu ? PyObject_RichCompareBool(dev, cpu, Py_EQ) : -1;
    Py_XDECREF(cpu);
    Py_DECREF(dev);
    return eq;
}

/* numpy.from_dlpack(t), or NULL with no exception set when the carrier
 * declined the export (BufferError) or is not on the CPU: the caller then
 * copies. */
static PyObject *try_dlpack(PyObject *self, int must)
{
    if (!must) {
        int cpu = exports_to_cpu(self);
        if (cpu <= 0)
            return NULL;
    }
    PyObject *arr = PyObject_CallOneArg(np_from_dlpack, self);
    if (arr || must || !PyErr_ExceptionMatches(PyExc_BufferError))
        return arr;
    PyErr_Clear();
    return NULL;
}

/* A fresh Fortran-ordered array of the leaf-mode shape holding the values. */
static PyObject *copy_values(PyObject *self)
{
    SwTensorObject *t = (SwTensorObject *)self;
    const sw_layout *L = SW_SUB_LAYOUT(&t->subs[0]);
    const char *name = numpy_name(SwDType_ID(t->dtype));
    if (!name) {
        PyErr_Format(PyExc_NotImplementedError,
                     "a %s tensor has no NumPy equivalent", sw_dtype_info_of(SwDType_ID(t->dtype))->name);
        return NULL;
    }
    PyObject *shape = PyTuple_New(L->nleaves);
    if (!shape)
        return NULL;
    for (int32_t j = 0; j < L->nleaves; j++) {
        PyObject *e = PyLong_FromLongLong(L->extents[j]);
        if (!e) {
            Py_DECREF(shape);
            return NULL;
        }
        PyTuple_SET_ITEM(shape, j, e);
    }
    PyObject *arr = PyObject_CallFunction(np_empty, "Oss", shape, name, "F");
    Py_DECREF(shape);
    if (!arr)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(arr, &view, PyBUF_WRITABLE | PyBUF_F_CONTIGUOUS) < 0) {
        Py_DECREF(arr);
        return NULL;
    }
    int rc = sw_py_tensor_gather(self, view.buf);
    PyBuffer_Release(&view);
    if (rc < 0)
        Py_CLEAR(arr);
    return arr;
}

PyObject *sw_py_tensor_array(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames)
{
    SwTensorObject *t = (SwTensorObject *)self;
    PyObject *dtype, *copy_obj, *arr = NULL;
    if (parse_array_args(args, nargs, kwnames, &dtype, &copy_obj) < 0)
        return NULL;
    if (t->nsub != 1) {
        PyErr_Format(PyExc_NotImplementedError,
                     "a %s tensor cannot be converted to a NumPy array: its elements "
                     "cannot be read one by one",
                     sw_dtype_info_of(SwDType_ID(t->dtype))->name);
        return NULL;
    }
    /* User code first (copy.__bool__, importing NumPy); only then is any
     * carrier state read. */
    int copy = copy_mode(copy_obj);
    if (copy == -2 || numpy_ready() < 0)
        return NULL;
    PyObject *carrier = Py_NewRef(t->subs[0].carrier);
    if (sw_py_carrier_check_readable(carrier) < 0)
        goto done;
    if (maybe_exportable(t)) {
        arr = try_dlpack(self, Py_IS_TYPE(carrier, &SwCPU_Type));
        if (!arr && PyErr_Occurred())
            goto done;
    }
    if (!arr) {
        if (copy == 0) {
            PyErr_Format(PyExc_ValueError,
                         "a tensor on a %s carrier cannot be viewed as a NumPy array "
                         "without copying its values; call numpy.asarray(t) or "
                         "numpy.array(t) instead of passing copy=False",
                         _PyType_Name(Py_TYPE(carrier)));
            goto done;
        }
        arr = copy_values(self);
        if (!arr)
            goto done;
        copy = -1; /* already fresh: only a dtype change may copy again */
    }
    if (dtype != Py_None || copy != -1) {
        PyObject *kw = Py_BuildValue("{sOsO}", "dtype", dtype, "copy",
                                     copy == -1 ? Py_None : copy ? Py_True : Py_False);
        PyObject *a1 = kw ? PyTuple_Pack(1, arr) : NULL;
        PyObject *converted = a1 ? PyObject_Call(np_asarray, a1, kw) : NULL;
        Py_XDECREF(kw);
        Py_XDECREF(a1);
        Py_SETREF(arr, converted);
    }
done:
    Py_DECREF(carrier);
    return arr;
}
