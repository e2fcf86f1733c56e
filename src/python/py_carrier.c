/* Placeholder: filled in by the carrier work. */
#include "sw_python.h"

int sw_py_carrier_init(PyObject *module)
{
    (void)module;
    return 0;
}
