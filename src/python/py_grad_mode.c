/* Grad mode (contract A-5): whether operations record autograd nodes.
 *
 * The state is per thread, held in a C11 thread-local so that a thread
 * started inside no_grad() begins with recording enabled, and nothing
 * another thread does can change what this one sees. The variable stores
 * "disabled" so that its zero initial value means enabled. */
#include "sw_python.h"

static _Thread_local int grad_disabled;

int sw_py_grad_enabled(void)
{
    return !grad_disabled;
}

void sw_py_set_grad_enabled(int enabled)
{
    grad_disabled = !enabled;
}

static PyObject *is_grad_enabled(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    return PyBool_FromLong(sw_py_grad_enabled());
}

static PyObject *set_grad_enabled(PyObject *mod, PyObject *enabled)
{
    (void)mod;
    if (!PyBool_Check(enabled)) {
        PyErr_Format(PyExc_TypeError, "set_grad_enabled: enabled must be a bool, not %.100s",
                     Py_TYPE(enabled)->tp_name);
        return NULL;
    }
    sw_py_set_grad_enabled(enabled == Py_True);
    Py_RETURN_NONE;
}

/* no_grad(): each __enter__ pushes the state it found, each __exit__ pops
 * and restores it, so one object may be entered again while in use. */
typedef struct {
    PyObject_HEAD
    unsigned char *saved;   /* entry states, PyMem-allocated */
    Py_ssize_t depth, capacity;
} SwNoGradObject;

static void no_grad_dealloc(PyObject *self)
{
    PyMem_Free(((SwNoGradObject *)self)->saved);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *no_grad_enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    SwNoGradObject *g = (SwNoGradObject *)self;
    if (g->depth == g->capacity) {
        Py_ssize_t cap = g->capacity ? g->capacity * 2 : 4;
        unsigned char *p = PyMem_Realloc(g->saved, (size_t)cap);
        if (!p)
            return PyErr_NoMemory();
        g->saved = p;
        g->capacity = cap;
    }
    g->saved[g->depth++] = (unsigned char)sw_py_grad_enabled();
    sw_py_set_grad_enabled(0);
    Py_RETURN_NONE;
}

static PyObject *no_grad_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)args;
    (void)nargs;
    SwNoGradObject *g = (SwNoGradObject *)self;
    if (g->depth > 0)
        sw_py_set_grad_enabled(g->saved[--g->depth]);
    Py_RETURN_FALSE;
}

static PyMethodDef no_grad_methods[] = {
    {"__enter__", no_grad_enter, METH_NOARGS,
     "__enter__($self, /)\n--\n\nRemember the current grad mode and disable recording."},
    {"__exit__", (PyCFunction)(void (*)(void))no_grad_exit, METH_FASTCALL,
     "__exit__($self, exc_type, exc_value, traceback, /)\n--\n\n"
     "Restore the grad mode found on entry. Never suppresses an exception."},
    {NULL, NULL, 0, NULL},
};

static PyObject *no_grad_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    if (PyTuple_GET_SIZE(args) || (kwds && PyDict_GET_SIZE(kwds))) {
        PyErr_SetString(PyExc_TypeError, "no_grad() takes no arguments");
        return NULL;
    }
    return type->tp_alloc(type, 0);
}

static PyTypeObject SwNoGrad_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "strideweave.no_grad",
    .tp_basicsize = sizeof(SwNoGradObject),
    .tp_dealloc = no_grad_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "no_grad()\n--\n\n"
              "A context manager that turns off autograd recording on the calling\n"
              "thread for the duration of a with block, and restores the previous\n"
              "setting when the block ends, also when it raises. Other threads are\n"
              "not affected.\n\n"
              "    with no_grad():\n"
              "        y = op.forward(x)   # y records no operation",
    .tp_methods = no_grad_methods,
    .tp_new = no_grad_new,
};

static PyMethodDef grad_mode_functions[] = {
    {"is_grad_enabled", is_grad_enabled, METH_NOARGS,
     "is_grad_enabled()\n--\n\n"
     "Whether operations run on this thread record autograd nodes. True until\n"
     "the thread changes it."},
    {"set_grad_enabled", set_grad_enabled, METH_O,
     "set_grad_enabled(enabled, /)\n--\n\n"
     "Turn autograd recording on or off for the calling thread. enabled must\n"
     "be a bool (TypeError otherwise)."},
    {NULL, NULL, 0, NULL},
};

int sw_py_grad_mode_init(PyObject *module)
{
    if (PyType_Ready(&SwNoGrad_Type) < 0 ||
        PyModule_AddObjectRef(module, "no_grad", (PyObject *)&SwNoGrad_Type) < 0)
        return -1;
    return PyModule_AddFunctions(module, grad_mode_functions);
}
