/* CPU: a closed carrier over contiguous host memory it always allocates
 * and owns (C-20, C-21). Its host-memory body, shared with Generic, is in
 * py_host.c. */
#include "sw_carrier.h"

#include <string.h>

#include "strideweave/carrier.h"

#define HOST(o) ((SwHostCarrierObject *)(o))

/* ---- CPU ---------------------------------------------------------------- */

PyObject *sw_py_cpu_new(sw_dtype dtype, int64_t nslots, int mutable_, int zero)
{
    if (!sw_py_cpu_ops.supports(dtype)) {
        PyErr_Format(PyExc_ValueError, "CPU does not support storage dtype %s",
                     sw_dtype_info_of(dtype)->name);
        return NULL;
    }
    if (nslots < 0) {
        PyErr_SetString(PyExc_ValueError, "size must be >= 0");
        return NULL;
    }
    return sw_py_host_new(&SwCPU_Type, dtype, nslots, mutable_, zero);
}

static PyObject *cpu_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"size", "mutable", "dtype", "empty", NULL};
    PyObject *size_obj, *mutable_obj = NULL, *dtype_obj = NULL, *empty_obj = NULL;
    if (sw_py_carrier_check_exact(type, &SwCPU_Type) < 0)
        return NULL;
    /* There is no `pointer=` argument (C-20): a CPU carrier never adopts
     * memory it did not allocate, so passing one is an unexpected-argument
     * TypeError from the parser. */
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$OOO:CPU", kwlist, &size_obj,
                                     &mutable_obj, &dtype_obj, &empty_obj))
        return NULL;
    int64_t size;
    sw_dtype dtype;
    if (sw_py_carrier_parse_size(size_obj, "size", &size) < 0 ||
        sw_py_carrier_parse_dtype(dtype_obj, SW_DT_FLOAT32, "CPU", sw_py_host_accepted,
                                  SW_HOST_NACCEPTED, &dtype) < 0)
        return NULL;
    int mutable_, empty;
    if (sw_py_carrier_parse_flags(mutable_obj, empty_obj, &mutable_, &empty) < 0)
        return NULL;
    return sw_py_host_new(&SwCPU_Type, dtype, size, mutable_, !empty);
}

static PyObject *cpu_pointer(PyObject *self, PyObject *unused)
{
    (void)unused;
    return PyLong_FromSize_t((size_t)(uintptr_t)HOST(self)->data);
}

static PyObject *cpu_dlpack_info(PyObject *self, PyObject *unused)
{
    (void)unused;
    PyObject *ptr = cpu_pointer(self, NULL);
    if (!ptr)
        return NULL;
    PyObject *d = Py_BuildValue("{s:N,s:i,s:i}", "pointer", ptr, "device_type", 1,
                                "device_id", 0);
    return d;
}

SW_CARRIER_CLOSED_INIT_SUBCLASS(cpu_init_subclass, "CPU")

static PyMethodDef cpu_methods[] = {
    SW_HOST_METHODS,
    {"pointer", cpu_pointer, METH_NOARGS,
     "pointer($self, /)\n--\n\n"
     "The memory address of slot 0 as an int; 0 after release(). Writes\n"
     "through it bypass the version counter."},
    {"dlpack_info", cpu_dlpack_info, METH_NOARGS,
     "dlpack_info($self, /)\n--\n\n"
     "Where the storage lives, for DLPack export:\n"
     "{'pointer': self.pointer(), 'device_type': 1, 'device_id': 0}."},
    {"__init_subclass__", (PyCFunction)(void (*)(void))cpu_init_subclass,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "__init_subclass__($type, /, *args, **kwargs)\n--\n\n"
     "CPU cannot be subclassed: defining a subclass raises TypeError."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject SwCPU_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "strideweave.CPU",
    .tp_basicsize = sizeof(SwHostCarrierObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "CPU(size, *, mutable=True, dtype=DType.Float32, empty=False)\n--\n\n"
              "Contiguous host memory of size slots of dtype (Float32, Int32 or "
              "Bool), allocated and owned by the carrier; zeroed unless empty is "
              "true. A bad size raises TypeError (not an integer) or ValueError "
              "(negative); a bad dtype raises TypeError (not a DType) or "
              "ValueError (unsupported). Tensors on a CPU carrier can be exported "
              "with DLPack.\n\n"
              "    CPU(4, dtype=DType.Int32)",
    .tp_methods = cpu_methods,
    .tp_base = &SwCarrier_Type,
    .tp_init = sw_py_carrier_builtin_init,
    .tp_new = cpu_new,
};

int sw_py_cpu_init(PyObject *module)
{
    if (sw_py_carrier_register_builtin(&SwCPU_Type, &sw_py_cpu_ops, 1) < 0 ||
        PyType_Ready(&SwCPU_Type) < 0)
        return -1;
    return PyModule_AddObjectRef(module, "CPU", (PyObject *)&SwCPU_Type);
}

