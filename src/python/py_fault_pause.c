/* Test aids for pause points (fault-injection builds): a test arms a pause
 * point with _fault_inject(name), waits until a thread stopped there with
 * _fault_wait_paused(), and lets it go on with _fault_resume(). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "strideweave/alloc.h"
#include "strideweave/testing.h" /* the fault-injection test hooks */

int sw_py_fault_pause_init(PyObject *module);

static int refuse_without_faults(void)
{
    if (sw_fault_enabled())
        return 0;
    PyErr_SetString(PyExc_RuntimeError, "fault injection is not compiled in "
                                        "(build with -Dfault_injection=true)");
    return -1;
}

static PyObject *fault_wait_paused(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    if (refuse_without_faults() < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    sw_fault_wait_paused();
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *fault_resume(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    if (refuse_without_faults() < 0)
        return NULL;
    sw_fault_resume();
    Py_RETURN_NONE;
}

static PyMethodDef fault_pause_methods[] = {
    {"_fault_wait_paused", fault_wait_paused, METH_NOARGS,
     "_fault_wait_paused()\n--\n\n"
     "Wait until a thread has stopped at an armed pause point (armed with\n"
     "_fault_inject(name)). Test aid; fault-injection builds only."},
    {"_fault_resume", fault_resume, METH_NOARGS,
     "_fault_resume()\n--\n\n"
     "Let every thread stopped at a pause point go on. Test aid;\n"
     "fault-injection builds only."},
    {NULL, NULL, 0, NULL},
};

int sw_py_fault_pause_init(PyObject *module)
{
    return PyModule_AddFunctions(module, fault_pause_methods);
}
