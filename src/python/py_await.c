/* AwaitResult and AwaitMove: read-only completion handles.
 *
 * A handle is created incomplete by the framework and completed exactly
 * once, with the GIL held, by whichever thread reaches the terminal
 * boundary (the submitting thread for synchronous routes, the completion
 * thread for pool jobs, a waiter thread for provider completions). What a
 * blocking wait() sleeps on: for a move, the core's move handle
 * (strideweave/move.h, sw_move_wait_for), which the core signals only
 * after the binding's commit recorded the outcome here; for other work
 * (TiledEvictable requests and projections, completed by the binding),
 * a completion made when a wait must block, signalled once the outcome is
 * recorded. Either way a waiter that wakes and retakes the GIL sees the
 * outcome. wait() blocks with the GIL released, stays interruptible by
 * signals, and may give up after a timeout (TimeoutError; the handle stays
 * valid). Done callbacks are kept in a list under the GIL: the completing
 * thread takes the list once the outcome is recorded and calls each once;
 * one added later runs at once. Progress is the core's byte count for a
 * running move, else a counter here. */
#include "sw_move.h"
#include "sw_move_core.h"
#include "sw_spare_objects.h"
#include "strideweave/clock.h"

#include <math.h>

#define AWAIT(o) ((SwAwaitObject *)(o))

/* How long one blocking step of wait() lasts before signals are checked. */
#define WAIT_SLICE_NS 50000000LL
/* Timeouts beyond this many seconds (about 31 years) wait forever. */
#define WAIT_FOREVER_S 1e9

/* AwaitMoves are recycled (sw_spare_objects.h): moves started in rounds
 * (256 in flight, waited, dropped, the next 256) then make no allocation
 * for their handles. */
SW_PY_SPARES(spare_handles, 256);

static SwAwaitObject *handle_alloc(PyTypeObject *type)
{
    PyObject *o = type == &SwAwaitMove_Type ? sw_py_spare_take(&spare_handles, type) : NULL;
    return o ? AWAIT(o) : PyObject_GC_New(SwAwaitObject, type);
}

/* The memory of an untracked, cleared handle: kept for the next move's. */
static void handle_free(PyObject *self)
{
    if (Py_TYPE(self) != &SwAwaitMove_Type || !sw_py_spare_keep(&spare_handles, self))
        PyObject_GC_Del(self);
}

PyObject *sw_py_await_new(PyTypeObject *type)
{
    SwAwaitObject *self = handle_alloc(type);
    if (!self)
        return NULL;
    self->move = NULL;
    /* Most handles are done before anyone waits (a small move commits on
     * its caller): a blocking wait of other work makes its completion then. */
    self->completion = NULL;
    self->result = NULL;
    self->error = NULL;
    self->weakreflist = NULL;
    self->callbacks = NULL;
    self->progress_done = 0;
    self->progress_total = 0;
    self->done = 0;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

void sw_py_await_set_total(PyObject *handle, int64_t total)
{
    AWAIT(handle)->progress_total = total;
}

/* fn(handle); what it raises is reported, never propagated. */
static void call_done_callback(PyObject *fn, PyObject *handle)
{
    PyObject *r = PyObject_CallOneArg(fn, handle);
    if (r)
        Py_DECREF(r);
    else
        PyErr_WriteUnraisable(fn);
}

/* After the signal, GIL held: every registered callback once, in order.
 * The list is detached first, so a callback that adds another to this
 * (now done) handle has it called at once instead. */
static void run_done_callbacks(PyObject *handle)
{
    PyObject *list = AWAIT(handle)->callbacks;
    if (!list)
        return;
    AWAIT(handle)->callbacks = NULL;
    Py_INCREF(handle);
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++)
        call_done_callback(PyList_GET_ITEM(list, i), handle);
    PyErr_Restore(type, value, tb);
    Py_DECREF(list);
    Py_DECREF(handle);
}

/* The progress once done: a move's final count comes from the core
 * (which ends a success at the total), and the core handle goes. */
static void settle_progress(SwAwaitObject *self, int ok)
{
    if (self->move) {
        sw_py_core_move_progress(self->move, &self->progress_done, &self->progress_total);
        sw_move_handle *move = self->move;
        self->move = NULL;
        sw_py_core_move_unref(move); /* the move's commit holds its own */
    }
    if (ok)
        __atomic_store_n(&self->progress_done, self->progress_total, __ATOMIC_RELAXED);
}

void sw_py_await_bind_move(PyObject *handle, sw_move_handle *move)
{
    SwAwaitObject *self = AWAIT(handle);
    if (!self->done) {
        self->move = move;
        return;
    }
    /* A move that committed on its caller has nothing left to wait for:
     * its handle goes back to the core at once (which recycles it for the
     * next small move). A success ended its progress at the total already;
     * a failure keeps what the core had copied. */
    if (self->error)
        sw_py_core_move_progress(move, &self->progress_done, &self->progress_total);
    sw_py_core_move_unref(move);
}

void sw_py_await_complete(PyObject *handle, PyObject *result, PyObject *error)
{
    SwAwaitObject *self = AWAIT(handle);
    if (self->done)
        return;
    if (error)
        self->error = Py_NewRef(error);
    else
        self->result = Py_NewRef(result ? result : Py_None);
    settle_progress(self, !error);
    self->done = 1;
    if (self->completion) /* a wait() is blocked on it, GIL released */
        sw_completion_signal(self->completion);
    run_done_callbacks(handle);
}

void sw_py_await_reset_after_fork(PyObject *handle)
{
    if (AWAIT(handle)->completion)
        sw_completion_reset_after_fork(AWAIT(handle)->completion);
}

/* The recorded outcome: a new reference to the result, or NULL with the
 * failure raised. */
static PyObject *outcome(SwAwaitObject *self)
{
    if (self->error) {
        PyErr_SetObject((PyObject *)Py_TYPE(self->error), self->error);
        return NULL;
    }
    return Py_NewRef(self->result);
}

/* One blocking step of at most `slice_ns`, GIL released: on the running
 * move's core handle (a reference of its own: the outcome may be recorded,
 * and the handle's reference dropped, meanwhile), else on this handle's
 * completion. 1 when the work finished. `unlimited`: the wait has no
 * timeout, so this thread may run parts of a large copy meanwhile (which
 * can outlast the slice), as the CPU it waits with is otherwise idle. */
static int wait_slice(SwAwaitObject *self, long long slice_ns, int unlimited)
{
    int done;
    sw_move_handle *move = sw_py_core_move_ref(self->move);
    Py_BEGIN_ALLOW_THREADS
    done = !move      ? sw_completion_wait_for(self->completion, slice_ns)
           : unlimited ? sw_py_core_move_wait_helping(move, slice_ns)
                       : sw_py_core_move_wait_for(move, slice_ns);
    Py_END_ALLOW_THREADS
    sw_py_core_move_unref(move);
    return done;
}

/* Block until done, or until `timeout_ns` (>= 0; < 0: no limit) passed:
 * then TimeoutError. NULL with an exception, else the outcome. */
static PyObject *wait_for(PyObject *handle, long long timeout_ns, PyObject *timeout)
{
    SwAwaitObject *self = AWAIT(handle);
    if (self->done)
        return outcome(self);
    if (sw_py_core_move_committing()) {
        PyErr_SetString(PyExc_RuntimeError,
                        "cannot wait() for an unfinished move from code that runs while "
                        "strideweave finishes moves (a finalizer, __del__ or done "
                        "callback); wait elsewhere");
        return NULL;
    }
    /* Made with the GIL held, as the completing thread reads it: that
     * thread signals it after recording the outcome. */
    if (!self->move && !self->completion && !(self->completion = sw_completion_new()))
        return PyErr_NoMemory();
    uint64_t start = timeout_ns >= 0 ? sw_clock_ns() : 0;
    while (!self->done) {
        long long slice = WAIT_SLICE_NS;
        if (timeout_ns >= 0) {
            long long spent = (long long)(sw_clock_ns() - start);
            if (spent >= timeout_ns) {
                PyErr_Format(PyExc_TimeoutError,
                             "the %s did not finish within %R seconds; it is still running: "
                             "call wait() again, or check done", _PyType_Name(Py_TYPE(handle)),
                             timeout);
                return NULL;
            }
            if (timeout_ns - spent < slice)
                slice = timeout_ns - spent;
        }
        if (!wait_slice(self, slice, timeout_ns < 0) && PyErr_CheckSignals() < 0)
            return NULL;
    }
    return outcome(self);
}

PyObject *sw_py_await_wait(PyObject *handle)
{
    return wait_for(handle, -1, Py_None);
}

/* timeout: None (no limit), or a real number of seconds >= 0. */
static int parse_timeout(PyObject *timeout, long long *ns)
{
    *ns = -1;
    if (timeout == Py_None)
        return 0;
    PyNumberMethods *nb = Py_TYPE(timeout)->tp_as_number;
    if (PyBool_Check(timeout) || !nb || (!nb->nb_float && !nb->nb_index) ||
        PyComplex_Check(timeout)) {
        PyErr_Format(PyExc_TypeError,
                     "timeout must be None or a number of seconds, not %.100s",
                     Py_TYPE(timeout)->tp_name);
        return -1;
    }
    double s = PyFloat_AsDouble(timeout);
    if (s == -1.0 && PyErr_Occurred()) {
        if (!PyLong_Check(timeout) || !PyErr_ExceptionMatches(PyExc_OverflowError))
            return -1;
        PyErr_Clear(); /* an int too large for a float */
        s = _PyLong_Sign(timeout) < 0 ? -INFINITY : INFINITY;
    }
    if (isnan(s) || s < 0) {
        PyErr_Format(PyExc_ValueError,
                     "timeout must be None or a number of seconds >= 0, not %R", timeout);
        return -1;
    }
    if (s < WAIT_FOREVER_S)
        *ns = (long long)(s * 1e9);
    return 0;
}

/* wait() called in a way the fast paths do not take: the argument rules
 * and messages of PyArg_ParseTupleAndKeywords. */
static PyObject *wait_parsed(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames)
{
    static char *kwlist[] = {"timeout", NULL};
    PyObject *tuple = PyTuple_New(nargs), *kwds = NULL, *timeout = Py_None, *r = NULL;
    if (!tuple)
        return NULL;
    for (Py_ssize_t i = 0; i < nargs; i++)
        PyTuple_SET_ITEM(tuple, i, Py_NewRef(args[i]));
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nkw && !(kwds = PyDict_New()))
        goto done;
    for (Py_ssize_t i = 0; i < nkw; i++)
        if (PyDict_SetItem(kwds, PyTuple_GET_ITEM(kwnames, i), args[nargs + i]) < 0)
            goto done;
    long long ns;
    if (PyArg_ParseTupleAndKeywords(tuple, kwds, "|O:wait", kwlist, &timeout) &&
        parse_timeout(timeout, &ns) == 0)
        r = wait_for(self, ns, timeout);
done:
    Py_XDECREF(kwds);
    Py_DECREF(tuple);
    return r;
}

/* wait(timeout=None). Most calls are `wait()` on a handle already done (a
 * small move commits before move_async returns): that answers with no
 * parsing at all; `wait(t)` and `wait(timeout=t)` parse nothing else. */
static PyObject *await_wait(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames)
{
    PyObject *timeout = Py_None;
    if (!kwnames) {
        if (nargs == 0 && AWAIT(self)->done)
            return outcome(AWAIT(self));
        if (nargs > 1)
            return wait_parsed(self, args, nargs, kwnames);
        if (nargs == 1)
            timeout = args[0];
    } else if (nargs == 0 && PyTuple_GET_SIZE(kwnames) == 1 &&
               PyUnicode_Check(PyTuple_GET_ITEM(kwnames, 0)) &&
               PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "timeout") == 0) {
        timeout = args[0];
    } else {
        return wait_parsed(self, args, nargs, kwnames);
    }
    long long ns;
    if (parse_timeout(timeout, &ns) < 0)
        return NULL;
    return wait_for(self, ns, timeout);
}

static PyObject *await_add_done_callback(PyObject *self, PyObject *fn)
{
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError,
                     "add_done_callback() takes a callable, called with the handle; "
                     "got %.100s", Py_TYPE(fn)->tp_name);
        return NULL;
    }
    if (AWAIT(self)->done) {
        call_done_callback(fn, self);
        Py_RETURN_NONE;
    }
    if (!AWAIT(self)->callbacks && !(AWAIT(self)->callbacks = PyList_New(0)))
        return NULL;
    if (PyList_Append(AWAIT(self)->callbacks, fn) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *await_get_progress(PyObject *self, void *closure)
{
    (void)closure;
    int64_t done, total;
    if (AWAIT(self)->move) {
        sw_py_core_move_progress(AWAIT(self)->move, &done, &total);
    } else {
        total = AWAIT(self)->progress_total;
        done = __atomic_load_n(&AWAIT(self)->progress_done, __ATOMIC_RELAXED);
    }
    return Py_BuildValue("(LL)", (long long)(done < total ? done : total), (long long)total);
}

static PyObject *await_get_done(PyObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(AWAIT(self)->done);
}

static PyObject *await_repr(PyObject *self)
{
    const char *state = "pending";
    if (AWAIT(self)->done)
        state = AWAIT(self)->error ? "failed" : "done";
    return PyUnicode_FromFormat("<%s %s>", _PyType_Name(Py_TYPE(self)), state);
}

static int await_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(AWAIT(self)->result);
    Py_VISIT(AWAIT(self)->error);
    Py_VISIT(AWAIT(self)->callbacks);
    return 0;
}

/* Clearing drops the outcome but keeps the completion and the core
 * handle: a cycle through a handle is only collected once nothing can
 * wait on it any more. */
static int await_clear(PyObject *self)
{
    Py_CLEAR(AWAIT(self)->result);
    Py_CLEAR(AWAIT(self)->error);
    Py_CLEAR(AWAIT(self)->callbacks);
    return 0;
}

static void await_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    if (AWAIT(self)->weakreflist)
        PyObject_ClearWeakRefs(self);
    await_clear(self);
    if (AWAIT(self)->completion)
        sw_completion_free(AWAIT(self)->completion);
    sw_py_core_move_unref(AWAIT(self)->move);
    handle_free(self);
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
    {"wait", (PyCFunction)(void (*)(void))await_wait, METH_FASTCALL | METH_KEYWORDS,
     "wait($self, /, timeout=None)\n--\n\n"
     "Block until the operation has finished, then return its result, or\n"
     "raise the exception it failed with. Every call returns the same\n"
     "object or raises the same exception; any number of threads may wait.\n\n"
     "timeout: None waits as long as it takes; a number of seconds (>= 0)\n"
     "raises TimeoutError if the operation has not finished by then. The\n"
     "operation keeps running and the handle stays valid: wait() again later,\n"
     "as with concurrent.futures.Future.result(timeout).\n\n"
     "A large move (32 MiB and up) runs in the background on all CPUs but\n"
     "one, leaving one to the caller; wait() with no timeout lends that CPU\n"
     "back, copying parts of the move on the waiting thread."},
    {"add_done_callback", await_add_done_callback, METH_O,
     "add_done_callback($self, fn, /)\n--\n\n"
     "Call fn(handle) once when the operation finishes, successfully or not:\n"
     "from the thread that finishes it, or at once on this thread when it has\n"
     "already finished. An exception raised by fn is reported through\n"
     "sys.unraisablehook and otherwise ignored. Keep fn short and do not wait\n"
     "for other moves in it. To resume asyncio code, hand the result to the\n"
     "loop: handle.add_done_callback(lambda h: loop.call_soon_threadsafe(...))."},
    {"__class_getitem__", Py_GenericAlias, METH_O | METH_CLASS,
     "__class_getitem__($type, item, /)\n--\n\n"
     "Subscript the class for type hints, as in AwaitMove[Tensor]."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef await_getset[] = {
    {"done", await_get_done, NULL,
     "True once the operation has finished, successfully or not; wait() "
     "then returns without blocking.", NULL},
    {"progress", await_get_progress, NULL,
     "(bytes_done, bytes_total): how much of the data the operation copies\n"
     "has been copied so far. Grows as the transfer goes (chunk by chunk for\n"
     "large copies; some routes jump from 0 to the total) and ends at\n"
     "(total, total) when it succeeds.", NULL},
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
