/* The GIL for threads Python did not start (the core's pool and completion
 * threads, the provider waiters, a consumer's thread dropping a DLPack
 * export), with the Python thread state such a thread needs made where a
 * fork() cannot cut it in half.
 *
 * CPython 3.11 makes a thread state under its runtime's thread-list lock
 * without the GIL (PyGILState_Ensure on a thread without one does), and a
 * child of fork() takes that lock again before remaking it: a fork() at
 * that moment left the child stuck inside os.fork() for good (1 run in
 * 451 of a fork test whose provider waiters were starting at the fork).
 * A thread that keeps the state it was given (the core's completion
 * thread) never releases the hold, it only saves it (PyEval_SaveThread).
 * Here a thread state is made under a lock of ours that fork() takes
 * first (pthread_atfork), so no thread is inside that lock at the fork.
 * Nothing else is taken under it and its holder never waits for the GIL,
 * so the fork cannot wait on a thread that waits for the forking one.
 *
 * May depend on: Python only. */
#ifndef SW_THREAD_STATE_H
#define SW_THREAD_STATE_H

#include <Python.h>

typedef struct sw_py_gil {
    PyGILState_STATE state; /* when the thread had a thread state */
    PyThreadState *made;    /* else the one made for this hold */
    int held;               /* the thread held the GIL already: nothing to undo */
} sw_py_gil;

/* PyGILState_Ensure, any thread; a thread without a Python thread state
 * gets one made as above (and dropped again by sw_py_gil_release). */
sw_py_gil sw_py_gil_ensure(void);
/* The matching release; the GIL held since sw_py_gil_ensure. */
void sw_py_gil_release(sw_py_gil gil);
/* Installs the fork handler; once, at module init. -1 with an exception. */
int sw_py_thread_state_init(PyObject *module);

#endif
