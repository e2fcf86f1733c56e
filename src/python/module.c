/* strideweave._C: module definition, init order, and the test aids
 * (_live_bytes, fault injection) the architecture asks for. */
#include "sw_python.h"
#include "strideweave/testing.h" /* the fault-injection test hooks */

#ifdef Py_GIL_DISABLED
#error "strideweave does not support free-threaded CPython builds"
#endif

static PyObject *live_bytes(PyObject *mod, PyObject *unused)
{
    (void)mod; (void)unused;
    return PyLong_FromLongLong(sw_alloc_live_bytes());
}

static PyObject *fault_injection_enabled(PyObject *mod, PyObject *unused)
{
    (void)mod; (void)unused;
    return PyBool_FromLong(sw_fault_enabled());
}

static PyObject *fault_inject(PyObject *mod, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"name", "skip", "count", NULL};
    const char *name;
    long skip = 0, count = 1;
    (void)mod;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s|ll:_fault_inject", kwlist,
                                     &name, &skip, &count))
        return NULL;
    if (!sw_fault_enabled()) {
        PyErr_SetString(PyExc_RuntimeError,
                        "fault injection is not compiled in "
                        "(build with -Dfault_injection=true)");
        return NULL;
    }
    if (sw_fault_arm(name, skip, count) != SW_OK) {
        PyErr_Format(PyExc_ValueError, "cannot arm fault '%s'", name);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *fault_clear(PyObject *mod, PyObject *unused)
{
    (void)mod; (void)unused;
    sw_fault_clear();
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"_live_bytes", live_bytes, METH_NOARGS,
     "_live_bytes()\n--\n\nBytes the core currently holds in live allocations, counting\n"
     "released storage that an exported array can still reach until that\n"
     "array is gone."},
    {"_fault_injection_enabled", fault_injection_enabled, METH_NOARGS,
     "_fault_injection_enabled()\n--\n\nWhether this build can inject faults."},
    {"_fault_inject", (PyCFunction)(void (*)(void))fault_inject,
     METH_VARARGS | METH_KEYWORDS,
     "_fault_inject(name, skip=0, count=1)\n--\n\n"
     "Make core operation `name` succeed `skip` times, then fail `count` times "
     "(negative: until cleared)."},
    {"_fault_clear", fault_clear, METH_NOARGS,
     "_fault_clear()\n--\n\nDisarm every injected fault."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "strideweave._C",
    .m_doc = "strideweave's C extension: every public type and function lives here.",
    .m_size = -1,
    .m_methods = module_methods,
};

typedef int (*init_fn)(PyObject *);
int sw_py_fault_pause_init(PyObject *module); /* py_fault_pause.c */

/* Order matters: later concepts use earlier ones' types. Repr comes before
 * the carriers: it fills Carrier's tp_repr before any carrier type is made
 * ready, so every carrier class inherits it. */
static const init_fn inits[] = {
    sw_py_thread_state_init,
    sw_py_layout_init,  sw_py_dtype_init, sw_py_repr_init, sw_py_definitions_init,
    sw_py_carrier_slots_init, sw_py_carrier_init,
    sw_py_generic_init, sw_py_cpu_init,   sw_py_file_backed_init,
    sw_py_metal_init,   sw_py_evictable_init, sw_py_block_device_init,
    sw_py_tensor_init,  sw_py_view_init,  sw_py_friendly_init,
    sw_py_dlpack_init,  sw_py_grad_mode_init, sw_py_operation_init, sw_py_minimal_ops_init,
    sw_py_await_init, sw_py_extension_init, sw_py_move_operation_init,
    sw_py_move_init,    sw_py_profiling_init,
    sw_py_tiled_evictable_init,
    sw_py_profiling_report_init,
    sw_py_tiled_project_init,
    sw_py_build_info_init,
    sw_py_fault_pause_init,
    sw_py_signature_init, /* last: it reads every other public name */
};

PyMODINIT_FUNC PyInit__C(void)
{
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    /* meson.build's project version, the one version the package declares. */
    if (PyModule_AddStringConstant(m, "__version__", SW_VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    for (size_t i = 0; i < sizeof inits / sizeof inits[0]; i++) {
        if (inits[i](m) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    }
    return m;
}
