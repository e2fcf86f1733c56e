/* AwaitResult and AwaitMove: read-only completion handles.
 *
 * A handle is created incomplete by the framework and completed exactly
 * once, with the GIL held, by whichever thread reaches the terminal
 * boundary (the submitting thread for synchronous routes, the completion
 * thread for pool jobs). The outcome is written before the core completion
 * is signalled, so a waiter that wakes and retakes the GIL sees it. wait()
 * blocks with the GIL released and stays interruptible by signals. */
#include "sw_move.h"

#define AWAIT(o) ((SwAwaitObject *)(o))

/* How long one blocking step of wait() lasts before signals are checked. */
#define WAIT_SLICE_NS 50000000LL

PyObject *sw_py_await_new(PyTypeObject *type)
{
    SwAwaitObject *self = PyObject_GC_New(SwAwaitObject, type);
    if (!self)
        return NULL;
    self->result = NULL;
    self->error = NULL;
    self->weakreflist = NULL;
    self->completion = sw_completion_new();
    if (!self->completion) {
        PyObject_GC_Del(self);
        return PyErr_NoMemory();
    }
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

void sw_py_await_complete(PyObject *handle, PyObject *result, PyObject *error)
{
    SwAwaitObject *self = AWAIT(handle);
    if (sw_completion_is_done(self->completion))
        return;
    if (error)
        self->error = Py_NewRef(error);
    else
        self->result = Py_NewRef(result ? result : Py_None);
    sw_completion_signal(self->completion);
}

void sw_py_await_reset_after_fork(PyObject *handle)
{
    sw_completion_reset_after_fork(AWAIT(handle)->completion);
}

PyObject *sw_py_await_wait(PyObject *handle)
{
    SwAwaitObject *self = AWAIT(handle);
    if (!sw_completion_is_done(self->completion) && sw_py_move_on_completion_thread()) {
        PyErr_SetString(PyExc_RuntimeError,
                        "cannot wait() for an unfinished move from code that runs while "
                        "strideweave finishes moves (a finalizer or __del__); wait "
                        "elsewhere");
        return NULL;
    }
    while (!sw_completion_is_done(self->completion)) {
        int done;
        Py_BEGIN_ALLOW_THREADS
        done = sw_completion_wait_for(self->completion, WAIT_SLICE_NS);
        Py_END_ALLOW_THREADS
        if (!done && PyErr_CheckSignals() < 0)
            return NULL;
    }
    if (self->error) {
        PyErr_SetObject((PyObject *)Py_TYPE(self->error), self->error);
        return NULL;
    }
    return Py_NewRef(self->result);
}

static PyObject *await_wait(PyObject *self, PyObject *unused)
{
    (void)unused;
    return sw_py_await_wait(self);
}

static PyObject *await_get_done(PyObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(sw_completion_is_done(AWAIT(self)->completion));
}

static PyObject *await_repr(PyObject *self)
{
    const char *state = "pending";
    if (sw_completion_is_done(AWAIT(self)->completion))
        state = AWAIT(self)->error ? "failed" : "done";
    return PyUnicode_FromFormat("<%s %s>", _PyType_Name(Py_TYPE(self)), state);
}

static int await_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(AWAIT(self)->result);
    Py_VISIT(AWAIT(self)->error);
    return 0;
}

/* Clearing drops the outcome but keeps the completion: a cycle through a
 * handle is only collected once nothing can wait on it any more. */
static int await_clear(PyObject *self)
{
    Py_CLEAR(AWAIT(self)->result);
    Py_CLEAR(AWAIT(self)->error);
    return 0;
}

static void await_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    if (AWAIT(self)->weakreflist)
        PyObject_ClearWeakRefs(self);
    await_clear(self);
    sw_completion_free(AWAIT(self)->completion);
    PyObject_GC_Del(self);
}

static PyObject *await_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    (void)args;
    (void)kwds;
    PyErr_Format(PyExc_TypeError,
                 "%s handles are created by strideweave (for example by "
                 "move_async), not constructed directly", _PyType_Name(type));
    return NULL;
}

static PyMethodDef await_methods[] = {
    {"wait", await_wait, METH_NOARGS,
     "wait($self, /)\n--\n\n"
     "Block until the operation has finished, then return its result, or\n"
     "raise the exception it failed with. Every call returns the same\n"
     "object or raises the same exception; any number of threads may wait."},
    {"__class_getitem__", Py_GenericAlias, METH_O | METH_CLASS,
     "__class_getitem__($type, item, /)\n--\n\n"
     "Subscript the class for type hints, as in AwaitMove[Tensor]."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef await_getset[] = {
    {"done", await_get_done, NULL,
     "True once the operation has finished, successfully or not; wait() "
     "then returns without blocking.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject SwAwaitResult_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "strideweave.AwaitResult",
    .tp_basicsize = sizeof(SwAwaitObject),
    .tp_dealloc = await_dealloc,
    .tp_repr = await_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE,
    .tp_doc = "The result of an asynchronous strideweave operation.\n\n"
              "Check `done` without blocking, or call `wait()` to block until the\n"
              "result is ready. Handles are not awaitable coroutines and cannot be\n"
              "constructed directly.",
    .tp_traverse = await_traverse,
    .tp_clear = await_clear,
    .tp_weaklistoffset = offsetof(SwAwaitObject, weakreflist),
    .tp_methods = await_methods,
    .tp_getset = await_getset,
    .tp_new = await_new,
};

PyTypeObject SwAwaitMove_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "strideweave.AwaitMove",
    .tp_basicsize = sizeof(SwAwaitObject),
    .tp_dealloc = await_dealloc,
    .tp_repr = await_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The result of move_async: wait() returns the moved Tensor.\n\n"
              "Dropping the handle does not cancel the move; it still completes\n"
              "and releases the source.",
    .tp_traverse = await_traverse,
    .tp_clear = await_clear,
    .tp_weaklistoffset = offsetof(SwAwaitObject, weakreflist),
    .tp_base = &SwAwaitResult_Type,
    .tp_new = await_new,
};

int sw_py_await_init(PyObject *module)
{
    if (PyType_Ready(&SwAwaitResult_Type) < 0 || PyType_Ready(&SwAwaitMove_Type) < 0)
        return -1;
    if (PyModule_AddObjectRef(module, "AwaitResult", (PyObject *)&SwAwaitResult_Type) < 0 ||
        PyModule_AddObjectRef(module, "AwaitMove", (PyObject *)&SwAwaitMove_Type) < 0)
        return -1;
    return 0;
}
