/* Metal: the closed carrier for Apple's MPS device (contract M-1..M-6).
 *
 * Our hosts never have MPS (M-4), and this build carries no MPS path, so
 * construction checks its arguments exactly as M-2 orders them and then
 * always fails: no instance ever exists. The class facts still hold
 * everywhere: closed (C-18), definition-free, importable, the C-6 answer,
 * the base DLPack refusal (M-5, inherited) and the legacy registry entries
 * (M-6, which py_move.c keys on SwMetal_Type). */
#include "sw_carrier.h"

/* C-6 / M-2: the descriptors a Metal carrier could hold. */
static const sw_dtype metal_accepted[] = {SW_DT_FLOAT32, SW_DT_INT32, SW_DT_BOOL};
#define METAL_NACCEPTED 3

static const char metal_unavailable[] =
    "Metal carriers need Apple's Metal Performance Shaders (MPS) device, which "
    "this host does not have: they are available only on macOS on Apple silicon "
    "with a PyTorch build that has MPS available. To get one, run on an Apple "
    "silicon Mac with PyTorch installed (pip install torch) and check that "
    "torch.backends.mps.is_available() is True; here, use CPU instead.";

static PyObject *metal_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"size", "mutable", "dtype", "empty", NULL};
    PyObject *size_obj, *mutable_obj = NULL, *dtype_obj = NULL, *empty_obj = NULL;
    if (sw_py_carrier_check_exact(type, &SwMetal_Type) < 0)
        return NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$OOO:Metal", kwlist, &size_obj,
                                     &mutable_obj, &dtype_obj, &empty_obj))
        return NULL;
    int64_t size;
    sw_dtype dtype;
    if (sw_py_carrier_parse_size(size_obj, "size", &size) < 0 ||
        sw_py_carrier_parse_dtype(dtype_obj, SW_DT_FLOAT32, "Metal", metal_accepted,
                                  METAL_NACCEPTED, &dtype) < 0)
        return NULL;
    if (sw_py_carrier_truth(mutable_obj, 1) < 0 || sw_py_carrier_truth(empty_obj, 0) < 0)
        return NULL;
    /* Availability comes last (M-2), after every argument check; nothing
     * was allocated, so there is no partial object to undo. */
    PyErr_SetString(PyExc_RuntimeError, metal_unavailable);
    return NULL;
}

/* A classmethod, so the answer is reachable from the class itself: there
 * is never an instance to ask. The framework's supports_storage_dtype
 * reaches it through the ordinary hook lookup. */
static PyObject *metal_supports(PyObject *cls, PyObject *dtype)
{
    (void)cls;
    if (!SwDType_Check(dtype)) {
        PyErr_Format(PyExc_TypeError, "dtype must be a DType, not %.100s",
                     Py_TYPE(dtype)->tp_name);
        return NULL;
    }
    sw_dtype id = SwDType_ID(dtype);
    for (int i = 0; i < METAL_NACCEPTED; i++) {
        if (metal_accepted[i] == id)
            Py_RETURN_TRUE;
    }
    Py_RETURN_FALSE;
}

SW_CARRIER_CLOSED_INIT_SUBCLASS(metal_init_subclass, "Metal")

static PyMethodDef metal_methods[] = {
    {"_supports_storage_dtype", metal_supports, METH_O | METH_CLASS,
     "_supports_storage_dtype($type, dtype, /)\n--\n\n"
     "Whether Metal storage can hold dtype: Float32, Int32 and Bool. Raises "
     "TypeError if dtype is not a DType."},
    {"__init_subclass__", (PyCFunction)(void (*)(void))metal_init_subclass,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "__init_subclass__($type, /, *args, **kwargs)\n--\n\n"
     "Metal cannot be subclassed: defining a subclass raises TypeError."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject SwMetal_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "strideweave.Metal",
    .tp_basicsize = sizeof(SwCarrierObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Metal(size, *, mutable=True, dtype=DType.Float32, empty=False)\n--\n\n"
              "Storage on Apple's Metal Performance Shaders (MPS) device.\n\n"
              "size slots of dtype (Float32, Int32 or Bool), zeroed unless empty "
              "is true. The MPS device exists only on macOS on Apple silicon with "
              "a PyTorch build that has MPS available; this build cannot reach "
              "it, so after checking its arguments construction always raises "
              "RuntimeError. A bad size raises TypeError (not an integer) or "
              "ValueError (negative); a bad dtype raises TypeError (not a DType) "
              "or ValueError (unsupported). Metal cannot be subclassed and does "
              "not support DLPack.",
    .tp_methods = metal_methods,
    .tp_base = &SwCarrier_Type,
    .tp_init = sw_py_carrier_builtin_init,
    .tp_new = metal_new,
};

int sw_py_metal_init(PyObject *module)
{
    if (PyType_Ready(&SwMetal_Type) < 0)
        return -1;
    return PyModule_AddObjectRef(module, "Metal", (PyObject *)&SwMetal_Type);
}
