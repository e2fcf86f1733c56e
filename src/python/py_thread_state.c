/* The GIL for threads Python did not start (sw_thread_state.h). */
#include "sw_thread_state.h"

#include <pthread.h>

/* Held while a thread state is made; fork() takes it first. */
static pthread_mutex_t making = PTHREAD_MUTEX_INITIALIZER;

static void making_lock(void)
{
    pthread_mutex_lock(&making);
}

static void making_unlock(void)
{
    pthread_mutex_unlock(&making);
}

/* The thread state running now, NULL when none is (no GIL held here). */
static inline PyThreadState *running_thread_state(void)
{
#if PY_VERSION_HEX >= 0x030D0000
    return PyThreadState_GetUnchecked();
#else
    return _PyThreadState_UncheckedGet();
#endif
}

sw_py_gil sw_py_gil_ensure(void)
{
    sw_py_gil gil = {PyGILState_UNLOCKED, NULL, 0};
    PyThreadState *mine = PyGILState_GetThisThreadState();
    if (mine && mine == running_thread_state()) {
        /* This thread runs Python code now, so it holds the GIL: the usual
         * case for a deleter (a consumer dropping its array) and cheaper
         * than an Ensure/Release pair, which would only count a level. */
        gil.held = 1;
        return gil;
    }
    if (mine) {
        gil.state = PyGILState_Ensure();
        return gil;
    }
    /* What PyGILState_Ensure would do, with the making (under CPython's
     * thread-list lock, no GIL) inside ours. The new state is this
     * thread's for PyGILState_* calls made while it is held. */
    making_lock();
    gil.made = PyThreadState_New(PyInterpreterState_Main());
    making_unlock();
    if (!gil.made)
        Py_FatalError("strideweave: cannot make a Python thread state for a new thread");
    PyEval_RestoreThread(gil.made);
    return gil;
}

void sw_py_gil_release(sw_py_gil gil)
{
    if (gil.held)
        return;
    if (!gil.made) {
        PyGILState_Release(gil.state);
        return;
    }
    /* Dropped with the GIL held, as PyGILState_Release drops the state it
     * made: a fork() (which holds the GIL) cannot come in between. */
    PyThreadState_Clear(gil.made);
    PyThreadState_DeleteCurrent();
}

int sw_py_thread_state_init(PyObject *module)
{
    (void)module;
    /* The child is the forking thread, which holds `making`: unlocking
     * gives the child a free lock. */
    if (pthread_atfork(making_lock, making_unlock, making_unlock) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "cannot install the thread-state fork handler");
        return -1;
    }
    return 0;
}
