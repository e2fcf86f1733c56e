/* Inherited binding work a forked child ends (sw_fork_guard.h). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "sw_fork_guard.h"

#define MAX_INHERITED_ENDS 4
static void (*inherited_ends[MAX_INHERITED_ENDS])(void);

int sw_py_fork_register_inherited_end(void (*end)(void))
{
    for (int i = 0; i < MAX_INHERITED_ENDS; i++) {
        if (!inherited_ends[i]) {
            inherited_ends[i] = end;
            return 0;
        }
    }
    PyErr_SetString(PyExc_SystemError, "too many kinds of inherited work to end after fork");
    return -1;
}

void sw_py_fork_end_inherited_work(void)
{
    for (int i = 0; i < MAX_INHERITED_ENDS && inherited_ends[i]; i++)
        inherited_ends[i]();
}
