/* Waiting for transfer providers' completions (architecture.md, "Where the
 * work runs").
 *
 * A provider's submit() may return a ProviderCompletion whose Python wait()
 * blocks until its own background work is done. Nobody the caller can see
 * may block on it, and the C I/O pool never calls Python, so a small pool
 * of waiter threads, each with its own thread state, takes incomplete
 * completions in order, calls wait() (which normally releases the GIL while
 * it blocks), checks the outcome, and hands the request back through its
 * `finish` callback; the movement code then lets its completion thread
 * commit. A waiter is busy for as long as its provider's wait() blocks, so
 * one slow provider must not hold up a finished one: a new thread starts
 * whenever every thread is busy (up to MAX_WAITERS), and threads beyond
 * KEEP_WAITERS leave once there is nothing to wait for. All stop at exit
 * once no move is in flight. The queue lock is never held while taking the
 * GIL. The same threads also run a move_async's Python _copy / _copy_async
 * (an entry with `run` set), so that move_async returns before it does.
 * */
#include "sw_extension.h"

#include <pthread.h>

#define KEEP_WAITERS 4
#define MAX_WAITERS 64

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_ready = PTHREAD_COND_INITIALIZER;
static pthread_cond_t waiter_left = PTHREAD_COND_INITIALIZER;
static sw_py_provider_wait *head, *tail;
static long queued;   /* entries in the queue */
static int nthreads;  /* started and not yet left */
static int nbusy;     /* inside a wait() */
static int stopping;
static PyObject *str_done, *str_wait, *str_await;

/* ---- the ProviderCompletion shape (X-10) ----------------------------------- */

static int has_attr(PyObject *obj, PyObject *name)
{
    PyObject *v;
    int rc = _PyObject_LookupAttr(obj, name, &v);
    Py_XDECREF(v);
    return rc;
}

/* `done` must be exactly a bool. */
static int read_done(PyObject *obj, int *done)
{
    PyObject *v;
    int rc = _PyObject_LookupAttr(obj, str_done, &v);
    if (rc <= 0) {
        if (rc == 0)
            PyErr_Format(PyExc_TypeError,
                         "a ProviderCompletion needs a `done` property and a wait() method; "
                         "%.100s has no `done`", Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (!PyBool_Check(v)) {
        PyErr_Format(PyExc_TypeError, "ProviderCompletion.done must be a bool, not %.100s",
                     Py_TYPE(v)->tp_name);
        Py_DECREF(v);
        return -1;
    }
    *done = v == Py_True;
    Py_DECREF(v);
    return 0;
}

int sw_py_check_provider_completion(PyObject *obj)
{
    int done;
    if (read_done(obj, &done) < 0)
        return -1;
    PyObject *wait;
    int rc = _PyObject_LookupAttr(obj, str_wait, &wait);
    if (rc < 0)
        return -1;
    int callable = rc > 0 && PyCallable_Check(wait);
    Py_XDECREF(wait);
    if (!callable) {
        PyErr_Format(PyExc_TypeError,
                     "a ProviderCompletion needs a callable wait(); %.100s has none",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    rc = has_attr(obj, str_await);
    if (rc != 0) {
        if (rc > 0)
            PyErr_Format(PyExc_TypeError,
                         "a ProviderCompletion must not be awaitable (%.100s has __await__): "
                         "strideweave waits for it with wait()", Py_TYPE(obj)->tp_name);
        return -1;
    }
    return 0;
}

/* ---- one wait ----------------------------------------------------------------- */

/* wait(), then the result must be None and `done` True. */
static void run_wait(sw_py_provider_wait *w)
{
    PyObject *r = PyObject_CallMethodNoArgs(w->completion, str_wait);
    int done = 0;
    if (r && r != Py_None)
        PyErr_Format(PyExc_TypeError, "ProviderCompletion.wait() must return None, not %.100s",
                     Py_TYPE(r)->tp_name);
    else if (r && read_done(w->completion, &done) == 0 && !done)
        PyErr_SetString(PyExc_TypeError,
                        "ProviderCompletion.done is still False after wait() returned");
    Py_XDECREF(r);
    if (PyErr_Occurred())
        w->error = sw_py_take_exception();
    w->finish(w);
    if (PyErr_Occurred())
        PyErr_WriteUnraisable(NULL);
}

/* The next completion to wait for; NULL tells the thread to leave (exit,
 * or a surplus thread with nothing to do, already uncounted). */
static sw_py_provider_wait *next_wait(int *uncounted)
{
    pthread_mutex_lock(&mu);
    while (!head && !stopping) {
        if (nthreads > KEEP_WAITERS) {
            nthreads--;
            *uncounted = 1;
            pthread_mutex_unlock(&mu);
            return NULL;
        }
        pthread_cond_wait(&work_ready, &mu);
    }
    sw_py_provider_wait *w = head;
    if (w) {
        head = w->next;
        if (!head)
            tail = NULL;
        queued--;
        nbusy++;
    }
    pthread_mutex_unlock(&mu);
    return w;
}

static void waiter_main(void *arg)
{
    (void)arg;
    sw_py_gil g = sw_py_gil_ensure();
    PyThreadState *ts = PyEval_SaveThread();
    sw_py_provider_wait *w;
    int uncounted = 0;
    while ((w = next_wait(&uncounted)) != NULL) {
        PyEval_RestoreThread(ts);
        if (w->run) {
            w->run(w);
            if (PyErr_Occurred())
                PyErr_WriteUnraisable(NULL);
        } else {
            run_wait(w);
        }
        ts = PyEval_SaveThread();
        pthread_mutex_lock(&mu);
        nbusy--;
        pthread_mutex_unlock(&mu);
    }
    PyEval_RestoreThread(ts);
    sw_py_gil_release(g);
    if (uncounted)
        return;
    pthread_mutex_lock(&mu);
    nthreads--;
    pthread_cond_broadcast(&waiter_left);
    pthread_mutex_unlock(&mu);
}

/* ---- the queue ---------------------------------------------------------------- */

int sw_py_provider_wait_submit(sw_py_provider_wait *w)
{
    w->next = NULL;
    w->error = NULL;
    /* Queue it and decide on a new thread in one step: an idle thread that
     * sees the queue non-empty stays. */
    pthread_mutex_lock(&mu);
    if (tail)
        tail->next = w;
    else
        head = w;
    tail = w;
    queued++;
    int need = queued > nthreads - nbusy && nthreads < MAX_WAITERS;
    if (need)
        nthreads++; /* counted now, so two submits do not both start one */
    pthread_cond_signal(&work_ready);
    pthread_mutex_unlock(&mu);
    if (!need || PyThread_start_new_thread(waiter_main, NULL) != PYTHREAD_INVALID_THREAD_ID)
        return 0;
    pthread_mutex_lock(&mu);
    int none = --nthreads == 0;
    if (none) { /* nobody will ever take it: take it back */
        sw_py_provider_wait **pp = &head;
        while (*pp && *pp != w)
            pp = &(*pp)->next;
        if (*pp) {
            *pp = w->next;
            if (tail == w) {
                tail = NULL;
                for (sw_py_provider_wait *q = head; q; q = q->next)
                    tail = q;
            }
            queued--;
        }
    }
    pthread_mutex_unlock(&mu);
    if (!none)
        return 0;
    PyErr_SetString(PyExc_RuntimeError,
                    "cannot start a thread to wait for the transfer provider");
    return -1;
}

void sw_py_provider_wait_shutdown(int join)
{
    pthread_mutex_lock(&mu);
    stopping = 1;
    pthread_cond_broadcast(&work_ready);
    while (join && nthreads > 0)
        pthread_cond_wait(&waiter_left, &mu);
    pthread_mutex_unlock(&mu);
}

/* A forked child has none of the parent's threads. */
void sw_py_provider_wait_after_fork(void)
{
    pthread_mutex_init(&mu, NULL);
    pthread_cond_init(&work_ready, NULL);
    pthread_cond_init(&waiter_left, NULL);
    head = tail = NULL;
    queued = 0;
    nthreads = nbusy = 0;
    stopping = 0;
}

int sw_py_provider_wait_init(void)
{
    str_done = PyUnicode_InternFromString("done");
    str_wait = PyUnicode_InternFromString("wait");
    str_await = PyUnicode_InternFromString("__await__");
    return str_done && str_wait && str_await ? 0 : -1;
}
