/* strideweave._C._build_info(): how this extension was built, so benchmarks
 * can refuse a debug or fault-injection build (their figures would mean
 * nothing) and tests can tell which build they run against. The values come
 * from defines meson.build passes to this file only. */
#include "sw_python.h"

#ifndef SW_BUILDTYPE
#define SW_BUILDTYPE "unknown"
#endif

static PyObject *build_info(PyObject *mod, PyObject *unused)
{
    (void)mod; (void)unused;
#ifdef SW_FAULT_INJECTION
    PyObject *fault = Py_True;
#else
    PyObject *fault = Py_False;
#endif
#ifdef NDEBUG
    PyObject *asserts = Py_False;
#else
    PyObject *asserts = Py_True;
#endif
    return Py_BuildValue("{s:s,s:O,s:O}", "buildtype", SW_BUILDTYPE,
                         "fault_injection", fault, "assertions", asserts);
}

static PyMethodDef build_info_methods[] = {
    {"_build_info", build_info, METH_NOARGS,
     "_build_info()\n--\n\n"
     "How this extension was built: a new dict with 'buildtype' (meson's build "
     "type, e.g. 'release' or 'debug'), 'fault_injection' (True when failures "
     "can be injected for tests) and 'assertions' (True when C assertions are "
     "compiled in)."},
    {NULL, NULL, 0, NULL},
};

int sw_py_build_info_init(PyObject *module)
{
    return PyModule_AddFunctions(module, build_info_methods);
}
