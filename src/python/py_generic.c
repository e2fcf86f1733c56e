/* Placeholder: filled in by the generic work. */
#include "sw_python.h"

int sw_py_generic_init(PyObject *module)
{
    (void)module;
    return 0;
}
