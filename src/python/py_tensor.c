/* Placeholder: filled in by the tensor work. */
#include "sw_python.h"

int sw_py_tensor_init(PyObject *module)
{
    (void)module;
    return 0;
}
