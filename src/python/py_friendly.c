/* Placeholder: filled in by the friendly work. */
#include "sw_python.h"

int sw_py_friendly_init(PyObject *module)
{
    (void)module;
    return 0;
}
