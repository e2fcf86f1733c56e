/* Placeholder: filled in by the view work. */
#include "sw_python.h"

int sw_py_view_init(PyObject *module)
{
    (void)module;
    return 0;
}
