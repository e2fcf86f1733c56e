/* Placeholder: filled in by the cpu work. */
#include "sw_python.h"

int sw_py_cpu_init(PyObject *module)
{
    (void)module;
    return 0;
}
