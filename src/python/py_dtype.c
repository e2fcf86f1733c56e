/* Placeholder: filled in by the dtype work. */
#include "sw_python.h"

int sw_py_dtype_init(PyObject *module)
{
    (void)module;
    return 0;
}
