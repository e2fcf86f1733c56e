/* Generic: a closed, fixed-size host carrier filled from an iterable
 * (C-19). Shares the host body with CPU (py_host.c). */
#include "sw_carrier.h"

static PyObject *generic_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"values", "mutable", "dtype", NULL};
    PyObject *values, *mutable_obj = NULL, *dtype_obj = NULL;
    if (sw_py_carrier_check_exact(type, &SwGeneric_Type) < 0)
        return NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$OO:Generic", kwlist, &values,
                                     &mutable_obj, &dtype_obj))
        return NULL;
    PyObject *it = sw_py_carrier_iter(values, "values");
    if (!it)
        return NULL;
    PyObject *list = NULL, *result = NULL;
    sw_dtype dtype;
    int mutable_;
    if (sw_py_carrier_parse_dtype(dtype_obj, SW_DT_FLOAT32, "Generic", sw_py_host_accepted,
                                  SW_HOST_NACCEPTED, &dtype) < 0 ||
        (mutable_ = sw_py_carrier_truth(mutable_obj, 1)) < 0 ||
        !(list = PySequence_Tuple(it)))
        goto done;
    result = sw_py_host_from_values(&SwGeneric_Type, dtype, list, mutable_, 0);
done:
    Py_XDECREF(list);
    Py_DECREF(it);
    return result;
}

SW_CARRIER_CLOSED_INIT_SUBCLASS(generic_init_subclass, "Generic")

static PyMethodDef generic_methods[] = {
    SW_HOST_METHODS,
    {"__init_subclass__", (PyCFunction)(void (*)(void))generic_init_subclass,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "__init_subclass__($type, /, *args, **kwargs)\n--\n\n"
     "Generic cannot be subclassed: defining a subclass raises TypeError."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject SwGeneric_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "strideweave.Generic",
    .tp_basicsize = sizeof(SwHostCarrierObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Generic(values, *, mutable=True, dtype=DType.Float32)\n--\n\n"
              "Host storage holding a copy of `values` (any iterable); its size\n"
              "is fixed. dtype is Float32, Int32 or Bool. Raises TypeError when\n"
              "values is not iterable or a value does not fit the dtype (None\n"
              "included), TypeError or ValueError for a bad dtype.\n\n"
              "    Generic([1.0, 2.0, 3.0])",
    .tp_methods = generic_methods,
    .tp_base = &SwCarrier_Type,
    .tp_init = sw_py_carrier_builtin_init,
    .tp_new = generic_new,
};

int sw_py_generic_init(PyObject *module)
{
    if (sw_py_carrier_register_builtin(&SwGeneric_Type, &sw_py_generic_ops, 1) < 0 ||
        PyType_Ready(&SwGeneric_Type) < 0)
        return -1;
    return PyModule_AddObjectRef(module, "Generic", (PyObject *)&SwGeneric_Type);
}
