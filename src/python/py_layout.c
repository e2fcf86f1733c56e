/* Placeholder: filled in by the layout work. */
#include "sw_python.h"

int sw_py_layout_init(PyObject *module)
{
    (void)module;
    return 0;
}
