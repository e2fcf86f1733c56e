/* Placeholder: filled in by the dlpack work. */
#include "sw_python.h"

int sw_py_dlpack_init(PyObject *module)
{
    (void)module;
    return 0;
}
