/* Placeholder: filled in by the file_backed work. */
#include "sw_python.h"

int sw_py_file_backed_init(PyObject *module)
{
    (void)module;
    return 0;
}
