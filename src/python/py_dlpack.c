/* Placeholder: filled in by the dlpack work. */
#include "sw_python.h"

PyObject *sw_py_tensor_dlpack(PyObject *self, PyObject *const *args,
                              Py_ssize_t nargs, PyObject *kwnames)
{
    (void)self; (void)args; (void)nargs; (void)kwnames;
    PyErr_SetString(PyExc_NotImplementedError, "DLPack export is not built yet");
    return NULL;
}

PyObject *sw_py_tensor_dlpack_device(PyObject *self, PyObject *unused)
{
    (void)self; (void)unused;
    PyErr_SetString(PyExc_NotImplementedError, "DLPack export is not built yet");
    return NULL;
}

int sw_py_dlpack_init(PyObject *module)
{
    (void)module;
    return 0;
}
