/* move_async and move: one path from validation to one terminal commit
 * (architecture.md, "Movement").
 *
 *   validate (rows 1-8: the core's sw_move_check, through py_move_check.c)
 *   -> resolve the route (row 9) -> row 10 -> allocate the destination ->
 *   mark both carriers pending -> submit -> commit once.
 *
 * A move of built-in host carriers on a shipped route, with no autograd
 * node and no profiling record, runs nothing between those checks and the
 * core's start: the core's own validation at the start is its only check
 * (initiate_core_checked), and a refusal there is raised in the words of
 * the checks above.
 * Only a destination written in Python is allocated here (its _allocate);
 * the core grows an empty FileBacked itself as it marks the carriers
 * pending, and gives the growth back when the move fails.
 * Everything before the pending marks, that growth included, raises
 * straight out of move_async and leaves both carriers as they were. From
 * submission on, a failure is the handle's terminal failure.
 *
 * Where the work runs: every move runs on the core's move engine
 * (strideweave/move.h, through py_move_core.c). A shipped route between
 * CPU, Generic and FileBacked carriers, or between CPU and a
 * BlockDeviceCarrier (sw_py_core_move_pair says which), is the core's own
 * transfer: it validates again, marks both carriers pending, runs the
 * transfer on its pool or, for a small one, on the caller, and commits
 * once; this file's commit (result Tensor, autograd node, profiling
 * record, AwaitMove) then runs holding the GIL, which the core's commit
 * guard takes before the carriers change. Routes that must call Python (a
 * user _copy / _copy_async, a TransferRoute's provider, the elementwise
 * fallback over carriers written in Python) run as moves whose transfer
 * this file supplies (sw_py_core_move_supply): the core marks both
 * carriers pending, counts the move in flight and commits once; the copy
 * runs on the submitting thread, or for move_async on a binding-owned
 * worker thread (the waiter threads of py_provider_wait.c), which reports
 * to the core and commits there.
 * A dropped handle changes nothing: the request holds its own
 * references until the commit. At interpreter exit an atexit hook refuses
 * new moves and waits for those in flight: the core's C transfers always
 * (sw_move_drain), Python copies and moves waiting for a provider's
 * completion (each an engine hold, strideweave/engine.h, while it runs)
 * up to STRIDEWEAVE_EXIT_TIMEOUT seconds or until Ctrl-C. In a
 * child made by os.fork() the moves it inherited fail at once: the core's
 * fork rule ends them (strideweave/move.h, "Fork") from this file's
 * after-fork hook, and their commits here raise RuntimeError. */
#include "sw_extension.h"
#include "sw_messages.h"
#include "sw_move.h"
#include "sw_move_core.h"
#include "sw_move_check.h"
#include "sw_fork_guard.h"
#include "sw_profiling.h"
#include "strideweave/clock.h"
#include "strideweave/engine.h"
#include "strideweave/filestore.h"
#include "strideweave/testing.h" /* the fault-injection test hooks */

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SW_EXIT_TIMEOUT_ENV "STRIDEWEAVE_EXIT_TIMEOUT"
#define SW_EXIT_TIMEOUT_DEFAULT 30.0

#define CARRIER(o) ((SwCarrierObject *)(o))
#define TENSOR(o) ((SwTensorObject *)(o))

typedef struct move_request {
    PyObject *handle;           /* the AwaitMove */
    PyObject *source;           /* source carrier */
    PyObject *destination;
    PyObject *output;           /* result Tensor, published at commit */
    int64_t cosize;
    sw_py_move_trace *trace;       /* profiling record, or NULL */
    PyObject *node;             /* the move's autograd node, or NULL */
    PyObject *prepared;         /* a definition route's PreparedTransfer, or NULL */
    sw_py_provider_wait wait;      /* its incomplete ProviderCompletion, if any */
    struct move_request *live_prev, *live_next; /* the live list (GIL) */
    int on_core;                /* the core's move engine runs it */
    sw_py_core_move core;       /* its link to the core's commit */
    PyObject *copy_op;          /* a Python _copy off the caller: its operation */
    PyObject *copy_tensor;      /* and source Tensor, until the worker takes them */
    int on_worker;              /* its Python _copy is queued or running on a worker */
    int supplied;               /* the core runs it, this file supplies the copy */
    int copy_async;             /* ... on a worker thread (move_async) */
    PyObject *copy_error;       /* the supplied copy's failure, for the commit */
    uint64_t hold;              /* its engine hold while Python work runs for it */
} move_request;

/* Exit state, changed only with the GIL held. Python work that may never
 * return (a Python copy on a worker, a wait for a provider's
 * ProviderCompletion) is an engine hold (strideweave/engine.h) while it
 * runs: the exit hook waits for the holds only up to
 * STRIDEWEAVE_EXIT_TIMEOUT seconds, and for the rest of the core's work
 * always. */
static int closing;                       /* set at interpreter exit */
/* Every move between its pending marks and its commit, in any state
 * (queued, on the pool, waiting for a provider, in a Python _copy), so
 * the exit hook can name the ones it abandons. Changed only with the GIL
 * held. */
static move_request *live_head;
static PyObject *str_copy, *str_copy_async;

/* ---- requests and the one terminal commit ---------------------------------- */

/* Requests are recycled (GIL held: every request is made and freed with
 * it): a move then needs no allocator call for its request. At most
 * SPARE_REQUESTS wait here; more go back to the allocator. */
#define SPARE_REQUESTS 64
static move_request *spare_requests[SPARE_REQUESTS];
static int spare_count;

static move_request *request_get(void)
{
    if (spare_count == 0)
        return sw_calloc(1, sizeof(move_request));
    if (sw_fault_hit("alloc")) /* the same injected failures as sw_calloc */
        return NULL;
    move_request *r = spare_requests[--spare_count];
    memset(r, 0, sizeof *r);
    return r;
}

static void request_put(move_request *r)
{
    if (spare_count < SPARE_REQUESTS)
        spare_requests[spare_count++] = r;
    else
        sw_free(r);
}

static void request_free(move_request *r)
{
    Py_XDECREF(r->handle);
    Py_XDECREF(r->source);
    Py_XDECREF(r->destination);
    Py_XDECREF(r->output);
    Py_XDECREF(r->node);
    Py_XDECREF(r->prepared);
    Py_XDECREF(r->wait.completion);
    Py_XDECREF(r->wait.error);
    Py_XDECREF(r->copy_op);
    Py_XDECREF(r->copy_tensor);
    Py_XDECREF(r->copy_error);
    request_put(r);
}

static void track(move_request *r)
{
    r->live_prev = NULL;
    r->live_next = live_head;
    if (live_head)
        live_head->live_prev = r;
    live_head = r;
}

static void untrack(move_request *r)
{
    if (r->live_prev)
        r->live_prev->live_next = r->live_next;
    else if (live_head == r)
        live_head = r->live_next;
    if (r->live_next)
        r->live_next->live_prev = r->live_prev;
    r->live_prev = r->live_next = NULL;
}

/* The destination must still be the live carrier the output is bound to,
 * with room for the whole span (a Python _copy or provider ran user code
 * on it). NULL when it is, else the exception. */
static PyObject *validate_result(move_request *r)
{
    int64_t size = 0;
    if (sw_py_state_released(r->destination)) {
        PyErr_Format(PyExc_RuntimeError, "the destination %s carrier was released during "
                     "the move", sw_py_cname(r->destination));
        return sw_py_take_exception();
    }
    if (sw_py_carrier_size(r->destination, &size) < 0)
        return sw_py_take_exception();
    if (size < r->cosize) {
        PyErr_Format(PyExc_RuntimeError,
                     "the destination %s carrier shrank to %lld slot%s during the move "
                     "(needs %lld)", sw_py_cname(r->destination), (long long)size, sw_py_msg_s(size),
                     (long long)r->cosize);
        return sw_py_take_exception();
    }
    return NULL;
}

/* Publish or fail, exactly once, GIL held. `error` (borrowed) is the
 * move's failure if any; NULL only from a commit of the core that found
 * the destination whole (its own check, and for a supplied move this
 * file's check_destination, before it released the source). `checked`:
 * the core ran the move itself and released the source's core carrier.
 * The core's commit has changed the carriers already (pending marks
 * cleared, on success the source's core storage released); this attaches
 * the rest. */
static void finish(move_request *r, PyObject *error, int checked)
{
    PyObject *err = Py_XNewRef(error);
    untrack(r);
    /* The source goes only after the values are safely in the destination;
     * on failure it stays live with its values and version. */
    if (!err && r->node)
        sw_py_move_node_attach(r->node, r->output);
    if (!err && checked)
        sw_py_carrier_drop_core_released(r->source);
    else if (!err && sw_py_carrier_release_moved(r->source) < 0)
        err = sw_py_take_exception();
    if (err && r->node) {
        sw_py_operation_clear_saved(r->node);
        if (TENSOR(r->output)->autograd_ctx == r->node)
            Py_SETREF(TENSOR(r->output)->autograd_ctx, Py_NewRef(Py_None));
    }
    sw_py_profile_move_completed(r->trace, err == NULL);
    sw_py_await_complete(r->handle, err ? NULL : r->output, err);
    Py_XDECREF(err);
}

/* finish with `error` (a failure: every move that succeeds commits through
 * the core), then free the request. */
static void commit(move_request *r, PyObject *error)
{
    finish(r, error, 0);
    request_free(r);
}

/* ---- the exit hook ----------------------------------------------------------- */

/* Python work in flight outside the core's own (a move's Python copy on a
 * worker or its provider wait; TiledEvictable's residency requests until
 * the core's commit callback completed their handle, and its tile copies
 * waiting for a provider's completion) holds the engine, so the exit hook
 * waits for it before it stops the waiter threads (TE-8). */
int sw_py_move_hold_inflight(uint64_t *token)
{
    sw_error err;
    if (closing) {
        PyErr_SetString(PyExc_RuntimeError,
                        "the interpreter is shutting down; no new transfers can start");
        return -1;
    }
    if (sw_engine_hold(token, &err) != SW_OK) {
        sw_py_raise(&err);
        return -1;
    }
    return 0;
}

void sw_py_move_drop_inflight(uint64_t token)
{
    sw_engine_release(token);
}

/* STRIDEWEAVE_EXIT_TIMEOUT: seconds (a non-negative number, "inf" for
 * no bound); unset or unusable: the default. */
static double exit_timeout_seconds(void)
{
    const char *s = getenv(SW_EXIT_TIMEOUT_ENV);
    if (!s || !*s)
        return SW_EXIT_TIMEOUT_DEFAULT;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !(v >= 0)) /* !(v >= 0): NaN too */
        return SW_EXIT_TIMEOUT_DEFAULT;
    return v;
}

/* The exit drain's look for Ctrl-C, on the waiting thread (its state
 * saved in *user): 1 stops the wait. */
static int exit_interrupted(void *user)
{
    PyThreadState **ts = user;
    PyEval_RestoreThread(*ts);
    int stop = PyErr_CheckSignals() < 0;
    if (stop)
        PyErr_Clear(); /* Ctrl-C: stop waiting for providers (pool moves still finish) */
    *ts = PyEval_SaveThread();
    return stop;
}

/* One line on stderr naming what the exit did not wait for. */
static void report_abandoned(double timeout, int interrupted, int64_t held)
{
    long moves = 0;
    PyObject *names = PyList_New(0);
    for (move_request *r = live_head; names && r; r = r->live_next) {
        if (!r->wait.completion && !r->on_worker)
            continue;
        moves++;
        PyObject *n = PyUnicode_FromFormat("%s -> %s", sw_py_cname(r->source), sw_py_cname(r->destination));
        if (!n || PyList_Append(names, n) < 0)
            Py_CLEAR(names);
        Py_XDECREF(n);
    }
    long tiers = (long)held - moves;
    if (names && tiers > 0) {
        PyObject *n = PyUnicode_FromFormat("%ld TiledEvictable tile transfer%s", tiers,
                                           tiers == 1 ? "" : "s");
        if (!n || PyList_Append(names, n) < 0)
            Py_CLEAR(names);
        Py_XDECREF(n);
    }
    PyObject *sep = names ? PyUnicode_FromString(", ") : NULL;
    PyObject *joined = sep ? PyUnicode_Join(sep, names) : NULL;
    const char *text = joined ? PyUnicode_AsUTF8(joined) : NULL;
    if (!text) {
        PyErr_Clear();
        text = "(could not list them)";
    }
    char why[96];
    if (interrupted)
        snprintf(why, sizeof why, "interrupted by Ctrl-C");
    else
        snprintf(why, sizeof why, "gave up after %g s, " SW_EXIT_TIMEOUT_ENV, timeout);
    fprintf(stderr,
            "strideweave: exiting without the moves whose transfer provider has not "
            "finished (%s); their destinations stay unpublished: %s\n", why, text);
    fflush(stderr);
    Py_XDECREF(joined);
    Py_XDECREF(sep);
    Py_XDECREF(names);
}

/* The storage of every FileBacked file released so far is freed on return
 * (their last close runs on a background thread). */
static void reclaim_released_files(void)
{
    Py_BEGIN_ALLOW_THREADS
    sw_filestore_reclaim_wait();
    Py_END_ALLOW_THREADS
}

static PyObject *shutdown_moves(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    closing = 1;
    sw_py_core_move_hold(0);
    double timeout = exit_timeout_seconds();
    /* First the Python copies and provider waits (bounded); the core
     * commits meanwhile (the GIL is let go while waiting). */
    PyThreadState *ts = PyEval_SaveThread();
    int drained = sw_engine_drain_held(timeout < 9e9 ? (int64_t)(timeout * 1e9) : -1,
                                       exit_interrupted, &ts);
    PyEval_RestoreThread(ts);
    int gave_up = drained != 1;
    if (gave_up) {
        report_abandoned(timeout, drained < 0, sw_engine_held());
        /* The core stops waiting for the Python work given up on. */
        for (move_request *r = live_head; r; r = r->live_next)
            if (r->supplied && (r->wait.completion || r->on_worker))
                sw_py_core_move_abandon(&r->core);
        sw_engine_abandon_held();
    }
    /* The moves the core runs: C work that finishes, always waited for
     * (their commits take the GIL, released meanwhile). */
    sw_py_core_move_drain();
    Py_BEGIN_ALLOW_THREADS
    /* Waiter threads stuck in a provider's wait() are left behind. */
    sw_py_provider_wait_shutdown(!gave_up);
    Py_END_ALLOW_THREADS
    reclaim_released_files();
    Py_RETURN_NONE;
}

static PyObject *hold_moves(PyObject *mod, PyObject *flag)
{
    (void)mod;
    int on = PyObject_IsTrue(flag);
    if (on < 0)
        return NULL;
    if (on) {
        sw_py_core_move_hold(1);
    } else {
        /* Held moves may run on this thread's commit: the GIL goes. */
        Py_BEGIN_ALLOW_THREADS
        sw_py_core_move_hold(0);
        Py_END_ALLOW_THREADS
    }
    Py_RETURN_NONE;
}

/* A forked child has none of the parent's threads: start afresh. Moves in
 * flight in the parent never complete in the child.
 * Its own pthread_atfork, not a step of the core's (src/core/fork.c): its
 * order against the core's steps does not matter. It touches only the
 * waiter queue of this file's provider waits, which no core step reads
 * or locks (no core step calls into the binding inside fork()), and it
 * takes no lock before the fork (the queue's lock is made fresh here, as
 * the core makes its engine's). Registered at module init, after the
 * core's constructor registered the core's, it runs after them in the
 * child anyway. */
static void reset_after_fork(void)
{
    /* live_head stays: the core's fork rule ends those moves and their
     * commits untrack them; the parent's engine holds count nothing here. */
    sw_py_provider_wait_after_fork();
}

PyObject *sw_py_move_forked_error(const char *what)
{
    PyErr_Format(PyExc_RuntimeError,
                 "the %s was in flight when the process forked, and its work cannot "
                 "finish in the child process; here the source is unchanged and the "
                 "destination's values are unspecified: start it again if the child "
                 "needs it", what);
    return sw_py_take_exception();
}

/* os.register_at_fork(after_in_child=...), GIL held, after reset_after_fork:
 * the threads that would finish the moves the child inherited do not
 * exist here, so the core ends each now (strideweave/move.h, "Fork"); its
 * commit here raises the RuntimeError of sw_py_move_forked_error. A move
 * whose Python _copy or submit() runs on the forking thread itself
 * continues on it. Then the binding's other inherited work (a tile copy
 * another thread ran has been ended by the core inside fork()). */
static PyObject *after_fork_in_child(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    sw_py_core_move_end_inherited();
    sw_py_fork_end_inherited_work();
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

/* ---- submission ------------------------------------------------------------- */

/* A Python copy (or a provider's completion) ended with `e` (borrowed,
 * NULL: success): the core learns it through its supplied transfer and
 * commits. `r` may be gone after. */
static void copy_done(move_request *r, PyObject *e)
{
    Py_XSETREF(r->copy_error, Py_XNewRef(e));
    sw_py_core_move_transfer_done(&r->core, e != NULL);
}

/* Run the route's _copy on this thread, with transfer access to both
 * carriers; NULL on success, else the exception (new reference). */
static PyObject *run_python_copy(move_request *r, PyObject *op, PyObject *tensor)
{
    PyObject *count = PyLong_FromLongLong(r->cosize);
    if (!count)
        return sw_py_take_exception();
    sw_py_carrier_begin_transfer(r->source);
    sw_py_carrier_begin_transfer(r->destination);
    PyObject *res = PyObject_CallMethodObjArgs(op, str_copy, tensor, r->destination,
                                               r->output, count, NULL);
    sw_py_carrier_end_transfer(r->destination);
    sw_py_carrier_end_transfer(r->source);
    Py_DECREF(count);
    if (!res)
        return sw_py_take_exception();
    int is_none = res == Py_None;
    Py_DECREF(res);
    if (is_none)
        return NULL;
    PyErr_Format(PyExc_TypeError, "%s._copy must return None", _PyType_Name(Py_TYPE(op)));
    return sw_py_take_exception();
}

static void await_or_commit(move_request *r, PyObject *res);
static void run_python_copy_here(move_request *r, PyObject *op, PyObject *tensor);

/* An operation whose engine does its own I/O on its own threads (an
 * integration such as strideweave.tensorstore) defines
 * `_copy_async(tensor, destination, output, element_count)` next to
 * `_copy`: it starts the transfer and returns a ProviderCompletion (or
 * None when it finished at once), so move_async returns while the engine
 * works and a waiter thread commits, as for a TransferRoute's submit()
 * . Both carriers stay pending until that commit. 0 when the
 * request was handed on (committed or awaited), 1 when the operation has
 * no such hook. */
static int run_python_copy_async(move_request *r, PyObject *op, PyObject *tensor)
{
    PyObject *fn;
    if (_PyObject_LookupAttr((PyObject *)Py_TYPE(op), str_copy_async, &fn) < 0) {
        PyObject *e = sw_py_take_exception();
        copy_done(r, e);
        Py_XDECREF(e);
        return 0;
    }
    if (!fn)
        return 1;
    Py_DECREF(fn);
    /* From a worker thread a ProviderCompletion goes to the waiter queue
     * as a new entry: the worker's own use of r->wait is over. */
    r->wait.run = NULL;
    PyObject *count = PyLong_FromLongLong(r->cosize);
    PyObject *res = NULL;
    if (count) {
        sw_py_carrier_begin_transfer(r->source);
        sw_py_carrier_begin_transfer(r->destination);
        res = PyObject_CallMethodObjArgs(op, str_copy_async, tensor, r->destination,
                                         r->output, count, NULL);
        sw_py_carrier_end_transfer(r->destination);
        sw_py_carrier_end_transfer(r->source);
        Py_DECREF(count);
    }
    await_or_commit(r, res);
    return 0;
}

/* A Python _copy / _copy_async on this thread, with transfer access to
 * both carriers held by it, then the commit (or the wait for the
 * ProviderCompletion _copy_async returned). */
static void run_python_copy_here(move_request *r, PyObject *op, PyObject *tensor)
{
    if (run_python_copy_async(r, op, tensor) == 0)
        return;
    PyObject *e = run_python_copy(r, op, tensor);
    copy_done(r, e);
    Py_XDECREF(e);
}

/* On a worker (waiter) thread, GIL held: the queued Python copy of a
 * move_async. It counted as provider work in flight (Python that may not
 * return: the exit drain waits for it up to the exit timeout); that count
 * drops only after the request was handed on, so the drain never sees a
 * gap. `r` is not touched once handed on. */
static void python_copy_run(sw_py_provider_wait *w)
{
    move_request *r = (move_request *)((char *)w - offsetof(move_request, wait));
    PyObject *op = r->copy_op, *tensor = r->copy_tensor;
    uint64_t hold = r->hold;
    r->copy_op = r->copy_tensor = NULL;
    run_python_copy_here(r, op, tensor);
    Py_DECREF(op);
    Py_DECREF(tensor);
    sw_py_move_drop_inflight(hold);
}

/* move_async with a Python _copy / _copy_async: queue it for a worker
 * thread so the caller returns at once; the carriers stay pending until
 * its one commit. 0 when queued, 1 when it must run here (no worker could
 * start: behaviour as before). */
static int python_copy_on_worker(move_request *r, PyObject *op, PyObject *tensor)
{
    r->copy_op = Py_NewRef(op);
    r->copy_tensor = Py_NewRef(tensor);
    r->wait.run = python_copy_run;
    r->on_worker = 1;
    if (sw_py_move_hold_inflight(&r->hold) == 0) {
        if (sw_py_provider_wait_submit(&r->wait) == 0)
            return 0;
        sw_py_move_drop_inflight(r->hold);
    }
    PyErr_Clear();
    r->wait.run = NULL;
    r->on_worker = 0;
    Py_CLEAR(r->copy_op);
    Py_CLEAR(r->copy_tensor);
    return 1;
}

/* ---- moves the core's engine runs ----------------------------------------- */

#define CORE_REQUEST(cm) ((move_request *)((char *)(cm) - offsetof(move_request, core)))

/* The core committed (GIL held): attach the binding's outcome. */
static void core_committed(sw_py_core_move *cm, const sw_error *err)
{
    move_request *r = CORE_REQUEST(cm);
    PyObject *e = NULL;
    if (cm->forked) { /* inherited by a forked child and ended there */
        sw_py_await_reset_after_fork(r->handle);
        e = sw_py_move_forked_error("move");
    } else { /* a supplied copy's failure, or check_destination's refusal */
        e = Py_XNewRef(r->copy_error);
    }
    if (!e && err) { /* else the core's own failure, in its words */
        sw_py_raise(err);
        e = sw_py_take_exception();
    }
    /* A move the core ran itself committed only after finding the
     * destination live and large enough under its lock, a supplied one
     * after check_destination too, and this thread has held the GIL since
     * (taken by commit_enter, or held through the start that committed
     * here): no Python code could release or shrink it since. */
    finish(r, e, !r->supplied && !cm->forked);
    Py_XDECREF(e);
}

static void core_release(sw_py_core_move *cm)
{
    request_free(CORE_REQUEST(cm));
}

/* A refusal by the core, nothing changed: -1 with the exception when the
 * destination could not grow (the core grows an empty FileBacked; the
 * request itself is refused then, r untouched), else the handle's
 * terminal failure. */
static int core_refused(move_request *r, int rc)
{
    if (rc == -2)
        return -1;
    PyObject *e = sw_py_take_exception();
    commit(r, e);
    Py_XDECREF(e);
    return 0;
}

/* Hand the move to the core's engine (sw_move_async): it grows an empty
 * destination, marks both carriers pending, runs the transfer and commits
 * once. A refusal by the core (it validates again; out of memory or
 * threads) is the handle's terminal failure, with nothing changed; its
 * growth's failure the request's (core_refused). */
/* Start the request's move on the core's engine, its AwaitMove bound to
 * the core's handle; the start's status (sw_py_core_move_start). */
static int start_on_core(move_request *r, SwSubtensor *s, int elementwise, int sync)
{
    PyObject *handle = r->handle; /* r may be gone once the core started */
    sw_move_handle *move;
    r->core.commit = core_committed;
    r->core.release = core_release;
    int rc = sw_py_core_move_start(&r->core, s, r->destination, elementwise, sync, &move);
    if (rc == 0)
        sw_py_await_bind_move(handle, move);
    return rc;
}

static int submit_core(move_request *r, PyObject *tensor, sw_py_route_kind kind, int sync)
{
    int rc = start_on_core(r, &TENSOR(tensor)->subs[0], kind == SW_ROUTE_ELEMENTWISE, sync);
    return rc == 0 ? 0 : core_refused(r, rc);
}

static int64_t move_bytes(PyObject *tensor, PyObject *op_type);
static void submit_prepared(move_request *r);

/* The core asks for the copy of a move it runs for a Python _copy (GIL
 * held, on the thread that started it): a move_async hands it to a worker
 * thread, anything else runs it here (the core then commits here too). */
static void supplied_transfer(sw_py_core_move *cm)
{
    move_request *r = CORE_REQUEST(cm);
    PyObject *op = r->copy_op, *tensor = r->copy_tensor;
    r->copy_op = r->copy_tensor = NULL;
    if (r->prepared) { /* a TransferRoute: its submit() here */
        Py_XDECREF(op);
        Py_DECREF(tensor);
        submit_prepared(r);
        return;
    }
    if (!(r->copy_async && python_copy_on_worker(r, op, tensor) == 0))
        run_python_copy_here(r, op, tensor);
    Py_DECREF(op);
    Py_DECREF(tensor);
}

/* The core's commit of a supplied move asks this (GIL held, before it
 * releases the source, strideweave/move.h commit_check): a destination that
 * fails validate_result fails the move with its exception, the source
 * staying live and unchanged. */
static int check_destination(sw_py_core_move *cm)
{
    move_request *r = CORE_REQUEST(cm);
    PyObject *e = validate_result(r);
    if (!e)
        return 0;
    Py_XSETREF(r->copy_error, e);
    return -1;
}

/* A move whose copy is Python's (an operation's _copy / _copy_async, the
 * elementwise fallback over carriers written in Python) on the core's
 * engine: it grows an empty FileBacked destination, marks, counts and
 * commits; this file supplies the copy. A refusal by the core as for
 * submit_core. */
static int submit_supplied(move_request *r, PyObject *op, PyObject *op_type, PyObject *tensor,
                            int sync, int off_caller)
{
    SwSubtensor *s = &TENSOR(tensor)->subs[0];
    int64_t slots = 0;
    r->core.commit = core_committed;
    r->core.release = core_release;
    r->core.transfer = supplied_transfer;
    r->core.check = check_destination;
    r->copy_op = Py_XNewRef(op); /* NULL for a TransferRoute */
    r->copy_tensor = Py_NewRef(tensor);
    r->copy_async = !sync && off_caller;
    PyObject *handle = r->handle; /* r may be gone once the core started */
    sw_move_handle *move;
    int rc = -1;
    if (sw_py_carrier_size(r->destination, &slots) == 0 &&
        (rc = sw_py_core_move_supply(&r->core, s, r->destination, slots,
                                     move_bytes(tensor, op_type), &move)) == 0) {
        sw_py_await_bind_move(handle, move);
        return 0;
    }
    return core_refused(r, rc);
}

/* A shipped route's _copy (made only now that it must run) on the core as
 * a supplied move. From here on every failure is the handle's. `sync`: the
 * caller waits for the result at once (move(), MoveOperation.forward).
 * `off_caller`: a Python _copy may run on a worker thread (the public
 * move_async; the binding's own moves that wait at once under owner access
 * do not). */
static int submit(move_request *r, PyObject *op, PyObject *op_type, PyObject *tensor, int sync,
                  int off_caller)
{
    PyObject *own_op = op ? Py_NewRef(op) : PyObject_CallNoArgs(op_type);
    if (!own_op)
        return core_refused(r, -1);
    int rc = submit_supplied(r, own_op, op_type, tensor, sync, off_caller);
    Py_DECREF(own_op);
    return rc;
}

/* ---- definition routes: prepare, submit, provider completions ------------- */

typedef struct carrier_state {
    int64_t version, owner_token;
    int released, pending;
} carrier_state;

static void snapshot(PyObject *carrier, carrier_state *s)
{
    /* The core shows no token: whether the carrier is owned and how many
     * claims it has seen tell a new claim from the old one. */
    sw_carrier_state cs;
    sw_carrier_get_state(CARRIER(carrier)->core, &cs);
    s->version = (int64_t)cs.version;
    s->owner_token = cs.owned ? (int64_t)cs.claims : 0;
    s->released = cs.released;
    s->pending = cs.pending;
}

static int same_state(PyObject *carrier, const carrier_state *s)
{
    carrier_state now;
    snapshot(carrier, &now);
    return now.version == s->version && now.owner_token == s->owner_token &&
           now.released == s->released && now.pending == s->pending;
}

/* the route's prepare(request), with graph construction off, for a
 * move (action "move") or a tile copy (action "copy a tile"). 1 with the
 * PreparedTransfer in *prepared; 0 when the answer was Unsupported and
 * `may_fall_back` lets the caller switch to the elementwise fallback; -1
 * with NotImplementedError (Unsupported, no fallback), TypeError (neither
 * answer) or RuntimeError (prepare changed either carrier). */
int sw_py_route_prepare(PyObject *tensor, PyObject *dst, PyObject *route, int may_fall_back,
                        const char *action, PyObject **prepared)
{
    PyObject *src = TENSOR(tensor)->subs[0].carrier;
    PyObject *id = SW_RECORD_FIELD(route, SW_ROUTE_ID);
    PyObject *provider = SW_RECORD_FIELD(route, SW_ROUTE_PROVIDER);
    carrier_state before_src, before_dst;
    snapshot(src, &before_src);
    snapshot(dst, &before_dst);
    PyObject *request = sw_py_transfer_request_new(tensor, dst);
    if (!request)
        return -1;
    int was = sw_py_grad_enabled();
    sw_py_set_grad_enabled(0);
    PyObject *res = PyObject_CallOneArg(SW_RECORD_FIELD(provider, 0), request);
    sw_py_set_grad_enabled(was);
    Py_DECREF(request);
    if (!res)
        return -1;
    if (!same_state(src, &before_src) || !same_state(dst, &before_dst)) {
        PyErr_Format(PyExc_RuntimeError,
                     "the prepare() of route %R changed a carrier; prepare must only "
                     "inspect the request (submit() does the transfer)", id);
    } else if (Py_TYPE(res) == &SwPreparedTransfer_Type) {
        *prepared = res;
        return 1;
    } else if (Py_TYPE(res) == &SwUnsupported_Type && may_fall_back) {
        Py_DECREF(res);
        return 0;
    } else if (Py_TYPE(res) == &SwUnsupported_Type) {
        PyErr_Format(PyExc_NotImplementedError,
                     "cannot %s from %s to %s: route %R does not support this request "
                     "(%S), and the two carriers do not both allow the element-by-element "
                     "fallback", action, sw_py_cname(src), sw_py_cname(dst), id, SW_RECORD_FIELD(res, 0));
    } else {
        PyErr_Format(PyExc_TypeError,
                     "the prepare() of route %R must return a PreparedTransfer or "
                     "Unsupported, not %.100s", id, Py_TYPE(res)->tp_name);
    }
    Py_DECREF(res);
    return -1;
}

/* A move's prepare: Unsupported switches `route` to the elementwise
 * fallback where X-14 permits it. */
static int prepare_route(PyObject *tensor, PyObject *dst, sw_py_route *route, PyObject **prepared)
{
    int rc = sw_py_route_prepare(tensor, dst, route->route, route->may_fall_back, "move",
                                 prepared);
    if (rc == 0) {
        route->route = NULL;
        Py_SETREF(route->op_type, Py_NewRef((PyObject *)&SwElementwise_Type)); /* owned */
    }
    return rc < 0 ? -1 : 0;
}

/* On a waiter thread, GIL held, once the provider's wait() returned: the
 * core commits, on this thread. */
static void provider_finished(sw_py_provider_wait *w)
{
    move_request *r = (move_request *)((char *)w - offsetof(move_request, wait));
    uint64_t hold = r->hold;
    copy_done(r, r->wait.error);
    sw_py_move_drop_inflight(hold);
}

/* submit() once, with transfer access to both carriers. None:
 * the destination is ready, commit now. A ProviderCompletion: the waiter
 * threads watch it and the handle stays incomplete. */
static void submit_prepared(move_request *r)
{
    sw_py_carrier_begin_transfer(r->source);
    sw_py_carrier_begin_transfer(r->destination);
    PyObject *res = PyObject_CallNoArgs(SW_RECORD_FIELD(r->prepared, 0));
    sw_py_carrier_end_transfer(r->destination);
    sw_py_carrier_end_transfer(r->source);
    await_or_commit(r, res);
}

/* `res` (owned, NULL with an exception set) is what submit() or
 * _copy_async returned: None commits now, a ProviderCompletion goes to the
 * waiter threads, anything else is the terminal failure. */
static void await_or_commit(move_request *r, PyObject *res)
{
    if (res && res != Py_None && sw_py_check_provider_completion(res) == 0) {
        r->wait.completion = res;
        r->wait.finish = provider_finished;
        if (sw_py_move_hold_inflight(&r->hold) == 0) {
            if (sw_py_provider_wait_submit(&r->wait) == 0)
                return;
            sw_py_move_drop_inflight(r->hold);
        }
        res = NULL; /* owned by the request now */
    }
    PyObject *e = PyErr_Occurred() ? sw_py_take_exception() : NULL;
    Py_XDECREF(res);
    copy_done(r, e);
    Py_XDECREF(e);
}

static move_request *request_new(PyObject *source, PyObject *destination, int64_t cosize)
{
    move_request *r = request_get();
    if (!r) {
        PyErr_NoMemory();
        return NULL;
    }
    r->cosize = cosize;
    r->source = Py_NewRef(source);
    r->destination = Py_NewRef(destination);
    r->handle = sw_py_await_new(&SwAwaitMove_Type);
    if (!r->handle) {
        request_free(r);
        return NULL;
    }
    return r;
}

/* The bytes a move copies, for its progress: the values for the
 * elementwise route, the whole span for every other. A route the core
 * runs recounts them from its transfer (submit). */
static int64_t move_bytes(PyObject *tensor, PyObject *op_type)
{
    SwSubtensor *s = &TENSOR(tensor)->subs[0];
    const sw_layout *L = SW_SUB_LAYOUT(s);
    int64_t n = PyType_IsSubtype((PyTypeObject *)op_type, &SwElementwise_Type) ? L->size
                                                                               : L->cosize;
    int64_t item = (int64_t)sw_dtype_slot_bytes(SwDType_ID(TENSOR(tensor)->dtype)), bytes;
    return __builtin_mul_overflow(n, item, &bytes) ? INT64_MAX : bytes;
}

/* The result Tensor on the destination. A destination whose core class
 * runs no user code (carrier.h: CPU, Generic, FileBacked,
 * BlockDeviceCarrier) was checked by the move (its dtype, its size after
 * growth, its state) and nothing ran since, so the T-1 checks do not run
 * again; a carrier written in Python answers them through its hooks as
 * before. */
static PyObject *result_tensor(PyObject *tensor, PyObject *destination)
{
    sw_carrier *core = CARRIER(destination)->core;
    if (core && (sw_carrier_class_of(core)->flags & SW_CARRIER_CLASS_RUNS_NO_USER_CODE))
        return sw_py_tensor_moved(tensor, destination);
    return sw_py_tensor_new1(destination, 0, TENSOR(tensor)->subs[0].layout);
}

/* The output Tensor, bound to the destination. An empty destination of a
 * class the core grows (FileBacked) grows in the core's move engine, under
 * the lock that marks it pending, and goes back to empty there when the
 * move fails (strideweave/move.h): the binding never grows it. A carrier
 * written in Python grows here, through its _allocate, before the core
 * takes the move (the core cannot call it): that runs user code, so the
 * size it reached and the carriers are checked again after it. */
static int allocate_and_bind(move_request *r, sw_py_move_check *mc, int grow, PyObject *tensor)
{
    grow = grow && sw_py_move_growth_runs_python(mc);
    if (grow && sw_py_carrier_allocate(r->destination, r->cosize) < 0)
        return -1;
    int64_t size;
    if (grow && sw_py_carrier_size(r->destination, &size) == 0 && size < r->cosize)
        PyErr_Format(PyExc_ValueError,
                     "the destination %s carrier grew to %lld slot%s, not the %lld asked for",
                     sw_py_cname(r->destination), (long long)size, sw_py_msg_s(size),
                     (long long)r->cosize);
    if (!PyErr_Occurred())
        r->output = result_tensor(tensor, r->destination);
    if (r->output && (!grow || sw_py_move_recheck(mc) == 0))
        return 0;
    Py_CLEAR(r->output);
    return -1;
}

/* The route of this move: forced by the caller (an operation instance, or a
 * captured TransferRoute) or resolved by the exact classes. Row 9
 * for operation routes; a forced TransferRoute must match the pair. */
static int choose_route_borrowed(PyObject *source, PyObject *destination, PyObject *forced,
                                 sw_py_route *route)
{
    if (forced && Py_TYPE(forced) == &SwTransferRoute_Type) {
        sw_py_route_of(forced, route);
        if (SW_RECORD_FIELD(forced, SW_ROUTE_SOURCE_CLASS) == (PyObject *)Py_TYPE(source) &&
            SW_RECORD_FIELD(forced, SW_ROUTE_DESTINATION_CLASS) ==
                (PyObject *)Py_TYPE(destination))
            return 1;
        PyErr_Format(PyExc_TypeError, "route %R moves from %s to %s, not from %s to %s",
                     SW_RECORD_FIELD(forced, SW_ROUTE_ID),
                     _PyType_Name((PyTypeObject *)SW_RECORD_FIELD(forced, SW_ROUTE_SOURCE_CLASS)),
                     _PyType_Name((PyTypeObject *)SW_RECORD_FIELD(forced,
                                                                  SW_ROUTE_DESTINATION_CLASS)),
                     sw_py_cname(source), sw_py_cname(destination));
        return -1;
    }
    if (forced && Py_TYPE(forced) == &SwTransferRouteMove_Type) {
        PyErr_SetString(PyExc_NotImplementedError,
                        "TransferRouteMoveOperation cannot move on its own: move() runs "
                        "TransferRoutes through their providers");
        return -1;
    }
    if (forced) {
        route->op_type = (PyObject *)Py_TYPE(forced);
        route->route = NULL;
        route->may_fall_back = 0;
    } else if (sw_py_route_resolve(Py_TYPE(source), Py_TYPE(destination), route) < 0) {
        return -1;
    }
    return 1;
}

/* The route with a strong reference to route->op_type (the caller drops
 * it): a registry entry is the only owner of a user's operation class, and
 * the metaclass attribute lookups of row 9, the destination's size hook and
 * everything after may unregister it and collect it. */
static int choose_route(PyObject *source, PyObject *destination, PyObject *forced,
                        sw_py_route *route)
{
    int rc = choose_route_borrowed(source, destination, forced, route);
    if (rc <= 0)
        return rc;
    Py_INCREF(route->op_type);
    if (!route->route &&
        sw_py_move_check_operation((PyTypeObject *)route->op_type, source, destination) < 0) {
        Py_CLEAR(route->op_type);
        return -1;
    }
    return 0;
}

/* Whether the core's validation at submission may be a move's only check:
 * one Tensor plane of its carrier's dtype, built-in host carriers (their
 * hooks run no Python, the core's route rules never refuse them, and an
 * empty one grows in the core) or CPU <-> BlockDeviceCarrier (whose route
 * rules choose_route checks first, issue 19), no forced route, no autograd
 * node (its capture can refuse) and no profiling record (a refused move
 * must leave none). */
static int core_checks_alone(PyObject *tensor, PyObject *destination, PyObject *forced)
{
    if (forced || !SwTensor_Check(tensor) || TENSOR(tensor)->nsub != 1)
        return 0;
    SwSubtensor *s = &TENSOR(tensor)->subs[0];
    return sw_py_core_move_checked_pair(s->carrier, destination) &&
           SwDType_ID(TENSOR(tensor)->dtype) == sw_carrier_dtype(CARRIER(s->carrier)->core) &&
           !(sw_py_grad_enabled() && TENSOR(tensor)->dtype == sw_py_dtype(SW_DT_FLOAT32)) &&
           !sw_py_profile_records_move(s->carrier, destination);
}

/* The exception of the row the core refused a move by (it changed
 * nothing): the checks of a move that the core did not leave alone, in
 * their words (sw_move_check.h). 0 when they pass (the core failed for
 * another reason). */
static int raise_refused_row(PyObject *tensor, PyObject *destination)
{
    sw_py_move_check mc;
    if (sw_py_move_check_begin(&mc, tensor, destination) < 0)
        return -1;
    return sw_py_move_check_size(&mc) < 0 ? -1 : 0;
}

/* A move whose only check is the core's (core_checks_alone), on a shipped
 * route the core runs (issue 19): nothing here runs Python or can refuse
 * before the core's start, whose validation, growth and pending marks
 * take one lock round on the pair, in the order of the move table; the
 * checks of initiate would take another. A refusal there changed nothing:
 * the request goes, and the exception is the one the checks raise for that
 * row (a growth that failed: its own, as core_refused); a failure the
 * checks do not find (memory, threads) is the handle's, as in submit_core.
 * 0: the route is not such a route (nothing done); 1: *handle is the
 * AwaitMove, or NULL with the exception. */
static int initiate_core_checked(PyObject *tensor, PyObject *destination, int sync,
                                 PyObject **handle)
{
    SwSubtensor *s = &TENSOR(tensor)->subs[0];
    PyObject *source = s->carrier;
    sw_py_route route;
    if (choose_route(source, destination, NULL, &route) < 0) {
        PyErr_Clear(); /* initiate raises it again, after the checks it follows */
        return 0;
    }
    sw_py_route_kind kind = sw_py_move_route_kind((PyTypeObject *)route.op_type);
    if (route.route || kind == SW_ROUTE_PYTHON ||
        !sw_py_core_move_pair(source, destination, kind == SW_ROUTE_BULK)) {
        Py_DECREF(route.op_type);
        return 0;
    }
    *handle = NULL;
    move_request *r = request_new(source, destination, SW_SUB_LAYOUT(s)->cosize);
    if (r)
        r->output = result_tensor(tensor, destination);
    if (!r || !r->output) {
        if (r)
            request_free(r);
        Py_DECREF(route.op_type);
        return 1;
    }
    sw_py_await_set_total(r->handle, move_bytes(tensor, route.op_type));
    Py_DECREF(route.op_type);
    PyObject *h = Py_NewRef(r->handle); /* r may be gone once the core started */
    r->on_core = 1;
    track(r);
    int rc = start_on_core(r, s, kind == SW_ROUTE_ELEMENTWISE, sync);
    if (rc == 0) {
        *handle = h;
        return 1;
    }
    PyObject *e = rc == -2 ? NULL : sw_py_take_exception();
    if (!e || raise_refused_row(tensor, destination) < 0) {
        Py_XDECREF(e);
        untrack(r);
        request_free(r);
        Py_DECREF(h);
        return 1;
    }
    commit(r, e);
    Py_XDECREF(e);
    *handle = h;
    return 1;
}

static PyObject *initiate(PyObject *tensor, PyObject *destination, PyObject *forced, int sync,
                          int off_caller)
{
    if (closing) {
        PyErr_SetString(PyExc_RuntimeError,
                        "the interpreter is shutting down; no new moves can start");
        return NULL;
    }
    PyObject *checked = NULL;
    if (core_checks_alone(tensor, destination, forced) &&
        initiate_core_checked(tensor, destination, sync, &checked))
        return checked;
    sw_py_move_check mc;
    if (sw_py_move_check_begin(&mc, tensor, destination) < 0)
        return NULL;
    SwSubtensor *s = &TENSOR(tensor)->subs[0];
    PyObject *source = s->carrier;
    int64_t cosize = SW_SUB_LAYOUT(s)->cosize;
    sw_py_route route;
    if (choose_route(source, destination, forced, &route) < 0)
        return NULL;
    int grow = sw_py_move_check_size(&mc);
    if (grow < 0) {
        Py_DECREF(route.op_type);
        return NULL;
    }
    /* A differentiable move records a node: its route back must exist
     * before anything is prepared, allocated or submitted. */
    int record = sw_py_grad_enabled() &&
                 TENSOR(tensor)->dtype == sw_py_dtype(SW_DT_FLOAT32);
    PyObject *reverse = NULL, *prepared = NULL;
    if (record && sw_py_move_capture_reverse(source, destination, &reverse) < 0) {
        Py_DECREF(route.op_type);
        return NULL;
    }
    Py_INCREF(tensor); /* user code below must not free what we read */
    if (route.route && prepare_route(tensor, destination, &route, &prepared) < 0) {
        Py_XDECREF(reverse);
        Py_DECREF(tensor);
        Py_DECREF(route.op_type);
        return NULL;
    }
    PyObject *route_id = route.route ? SW_RECORD_FIELD(route.route, SW_ROUTE_ID) : NULL;
    PyObject *op = forced && Py_TYPE(forced) != &SwTransferRoute_Type ? forced : NULL;
    /* A shipped route that records no node needs no operation object unless
     * its _copy runs (submit makes it then). */
    int op_later = !op && !record && !route.route &&
                   sw_py_move_route_kind((PyTypeObject *)route.op_type) != SW_ROUTE_PYTHON;
    PyObject *own_op = op ? Py_NewRef(op) : op_later ? NULL : PyObject_CallNoArgs(route.op_type);
    move_request *r = NULL;
    PyObject *handle = NULL;
    if ((!own_op && !op_later) || (record && sw_py_operation_store(own_op, &tensor, 1) < 0))
        goto done;
    if (record)
        sw_py_move_node_prepare(own_op, reverse);
    if (sw_py_move_recheck_if_python_ran(&mc, !op_later) < 0 ||
        !(r = request_new(source, destination, cosize)))
        goto done;
    if (allocate_and_bind(r, &mc, grow, tensor) < 0) {
        request_free(r);
        goto done;
    }
    if (record)
        r->node = Py_NewRef(own_op);
    int64_t bytes = move_bytes(tensor, route.op_type);
    /* The core counts a move it took; this total stands for one it refused. */
    sw_py_await_set_total(r->handle, bytes);
    r->prepared = prepared;
    prepared = NULL;
    handle = Py_NewRef(r->handle);
    sw_py_move_trace *trace =
        sw_py_profile_move_begin(source, destination, route.op_type, route_id, bytes);
    r->trace = trace;
    r->core.profile_tag = trace;
    sw_py_route_kind kind = sw_py_move_route_kind((PyTypeObject *)route.op_type);
    /* Every route the core cannot run itself (a Python-level copy, a
     * TransferRoute's provider) runs on the core too, as a supplied move:
     * the core marks, counts and commits while this file supplies the
     * copy. */
    r->on_core = 1;
    r->supplied = r->prepared || kind == SW_ROUTE_PYTHON ||
                  !sw_py_core_move_pair(source, destination, kind == SW_ROUTE_BULK);
    track(r);
    /* Each may commit, and free r, before it returns. */
    int rc;
    if (r->prepared)
        rc = submit_supplied(r, NULL, route.op_type, tensor, sync, off_caller);
    else if (!r->supplied)
        rc = submit_core(r, tensor, kind, sync);
    else
        rc = submit(r, own_op, route.op_type, tensor, sync, off_caller);
    if (rc < 0) { /* the destination could not grow: nothing started */
        untrack(r);
        sw_py_profile_move_discard(trace);
        Py_CLEAR(handle);
        request_free(r);
        goto done;
    }
    sw_py_profile_move_submitted(trace);
done:
    if (!handle && record && own_op)
        sw_py_operation_clear_saved(own_op);
    Py_XDECREF(prepared);
    Py_XDECREF(reverse);
    Py_DECREF(tensor);
    Py_XDECREF(own_op);
    Py_DECREF(route.op_type);
    return handle;
}

PyObject *sw_py_move_initiate(PyObject *tensor, PyObject *destination, PyObject *forced)
{
    return initiate(tensor, destination, forced, 0, 0);
}

PyObject *sw_py_move_now(PyObject *tensor, PyObject *destination, PyObject *forced)
{
    PyObject *handle = initiate(tensor, destination, forced, 1, 0);
    if (!handle)
        return NULL;
    PyObject *result = sw_py_await_wait(handle);
    Py_DECREF(handle);
    return result;
}

/* ---- the public functions ---------------------------------------------------- */

static const char *const move_names[] = {"tensor", "destination"};

static PyObject *move_async(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames)
{
    (void)mod;
    PyObject *a[2];
    if (sw_py_parse_required("move_async", move_names, 2, args, nargs, kwnames, a) < 0)
        return NULL;
    return initiate(a[0], a[1], NULL, 0, 1);
}

static PyObject *move(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                      PyObject *kwnames)
{
    (void)mod;
    PyObject *a[2];
    if (sw_py_parse_required("move", move_names, 2, args, nargs, kwnames, a) < 0)
        return NULL;
    return sw_py_move_now(a[0], a[1], NULL);
}

/* ---- MoveOperation.forward and .backward ------------------------------------------ */

/* Both run a move with a given operation: forward the one asked for,
 * backward the reverse of a recorded move (autograd across a move). This
 * file adds them to MoveOperation (py_move_operation.c, below it). */

/* The cotangent a move node accepts: a live Tensor of the source's shape
 * with an injective layout (its layout need not equal the source's). */
static int check_cotangent(PyObject *g, PyObject *source)
{
    if (!SwTensor_Check(g) || ((SwTensorObject *)g)->nsub != 1) {
        PyErr_Format(PyExc_TypeError, "the gradient of a move must be a Tensor, not %.100s",
                     Py_TYPE(g)->tp_name);
        return -1;
    }
    SwSubtensor *gs = &((SwTensorObject *)g)->subs[0];
    if (sw_py_state_released(gs->carrier)) {
        PyErr_SetString(PyExc_RuntimeError, "the gradient's carrier is released");
        return -1;
    }
    sw_layout *gl = SwLayout_CORE(gs->layout);
    if (!sw_layout_same_shape(gl, SW_SUB_LAYOUT(&((SwTensorObject *)source)->subs[0]))) {
        PyErr_SetString(PyExc_ValueError,
                        "the gradient of a move must have the moved Tensor's shape");
        return -1;
    }
    sw_error err;
    int inj = sw_layout_is_injective(gl, &err);
    if (inj < 0)
        return sw_py_raise(&err);
    if (!inj) {
        PyErr_SetString(PyExc_ValueError,
                        "an injective gradient Layout is required to move a gradient back");
        return -1;
    }
    return 0;
}

/* The private copy of the cotangent that travels back: its values in the
 * source's gradient layout, on a new carrier of the result's class. */
static PyObject *private_copy(PyObject *g, PyObject *source, PyObject *out_carrier)
{
    int64_t n = SW_SUB_LAYOUT(&((SwTensorObject *)g)->subs[0])->size;
    float *vals = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (!vals)
        return PyErr_NoMemory();
    PyObject *layout = NULL, *copy = NULL;
    if (sw_py_read_float_values(g, vals) == 0 && (layout = sw_py_grad_layout(source)))
        copy = sw_py_grad_buffer_on(out_carrier, layout, vals);
    Py_XDECREF(layout);
    PyMem_Free(vals);
    return copy;
}

/* carrier.allocate_like(nslots, empty=True): fresh storage of the same
 * class, which the reverse move fills completely. */
static PyObject *allocate_empty_like(PyObject *carrier, int64_t nslots)
{
    PyObject *fn = PyObject_GetAttrString(carrier, "allocate_like");
    PyObject *args = fn ? Py_BuildValue("(L)", (long long)nslots) : NULL;
    PyObject *kwargs = args ? Py_BuildValue("{s:O}", "empty", Py_True) : NULL;
    PyObject *r = kwargs ? PyObject_Call(fn, args, kwargs) : NULL;
    Py_XDECREF(kwargs);
    Py_XDECREF(args);
    Py_XDECREF(fn);
    return r;
}

/* backward(gradient): move the cotangent back through the captured route
 * into fresh storage of the source carrier's exact class, and wait. */
static PyObject *move_backward(PyObject *self, PyObject *g)
{
    SwMoveOperationObject *op = MOVEOP(self);
    PyObject *saved = op->base.saved;
    if (!saved || PyTuple_GET_SIZE(saved) != 1 || !op->reverse || !op->output) {
        PyErr_SetString(PyExc_RuntimeError,
                        "this move recorded no gradient path, or its graph was released "
                        "(use retain_graph=True to run backward twice)");
        return NULL;
    }
    PyObject *source = PyTuple_GET_ITEM(saved, 0);
    if (check_cotangent(g, source) < 0)
        return NULL;
    SwSubtensor *ss = &((SwTensorObject *)source)->subs[0];
    PyObject *ptensor = private_copy(g, source, op->output);
    PyObject *dest = NULL;
    if (ptensor) {
        PyObject *playout = ((SwTensorObject *)ptensor)->subs[0].layout;
        dest = allocate_empty_like(ss->carrier, SwLayout_CORE(playout)->cosize);
    }
    /* The captured reverse: a TransferRoute drives the move itself, an
     * operation class is instantiated. */
    int is_route = Py_TYPE(op->reverse) == &SwTransferRoute_Type;
    PyObject *rev_op = !dest ? NULL
                       : is_route ? Py_NewRef(op->reverse)
                                  : PyObject_CallNoArgs(op->reverse);
    PyObject *result = NULL;
    if (rev_op) {
        int was = sw_py_grad_enabled();
        sw_py_set_grad_enabled(0); /* the reverse move records no node */
        PyObject *handle = sw_py_move_initiate(ptensor, dest, rev_op);
        sw_py_set_grad_enabled(was);
        PyObject *moved = handle ? sw_py_await_wait(handle) : NULL;
        Py_XDECREF(handle);
        result = moved ? PyTuple_Pack(1, moved) : NULL;
        Py_XDECREF(moved);
    }
    Py_XDECREF(rev_op);
    Py_XDECREF(dest);
    Py_XDECREF(ptensor);
    return result;
}

static PyObject *operation_forward(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                   PyObject *kwnames)
{
    static const char *const names[] = {"tensor", "destination"};
    PyObject *a[2];
    if (sw_py_parse_required("forward", names, 2, args, nargs, kwnames, a) < 0)
        return NULL;
    return sw_py_move_now(a[0], a[1], self);
}

static PyMethodDef operation_methods[] = {
    {"backward", move_backward, METH_O,
     "backward($self, gradient, /)\n--\n\n"
     "Gradient of a recorded move: moves `gradient` (a Tensor of the moved\n"
     "Tensor's shape with an injective layout) back to the source's carrier\n"
     "class and returns it as a one-element tuple. Called by Tensor.backward."},
    {"forward", (PyCFunction)(void (*)(void))operation_forward,
     METH_FASTCALL | METH_KEYWORDS,
     "forward($self, tensor, destination)\n--\n\n"
     "Move `tensor` into `destination` with this operation, whatever the\n"
     "registry would choose, and return the moved Tensor (blocking).\n"
     "Every check of move() applies; the source carrier is released."},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef move_functions[] = {
    {"move_async", (PyCFunction)(void (*)(void))move_async, METH_FASTCALL | METH_KEYWORDS,
     "move_async(tensor, destination)\n--\n\n"
     "Start moving `tensor`'s values into the carrier `destination` and return\n"
     "an AwaitMove at once; its wait() gives the moved Tensor: on\n"
     "`destination`, offset 0, the same Layout. The source carrier is released\n"
     "when the move succeeds and stays untouched when it fails. An empty\n"
     "destination that can grow (FileBacked) is sized to the layout's cosize.\n"
     "Until the move finishes neither carrier can be written, released or\n"
     "moved again, and the destination cannot be read.\n\n"
     "Raises TypeError, ValueError or RuntimeError straight away for a request\n"
     "that cannot work (wrong types, same carrier, released, immutable or too\n"
     "small destination, different dtypes); failures while copying are raised\n"
     "by wait().\n\n"
     "    handle = move_async(t, FileBacked())\n"
     "    on_file = handle.wait()"},
    {"move", (PyCFunction)(void (*)(void))move, METH_FASTCALL | METH_KEYWORDS,
     "move(tensor, destination)\n--\n\n"
     "Move `tensor` into `destination` and return the moved Tensor; the same as\n"
     "move_async(tensor, destination).wait()."},
    {"_hold_moves", hold_moves, METH_O,
     "_hold_moves(flag, /)\n--\n\n"
     "Test aid: while true, moves for the worker pool are queued but not\n"
     "started; false starts them in order."},
    {"_shutdown_moves", shutdown_moves, METH_NOARGS,
     "_shutdown_moves()\n--\n\n"
     "Wait for every move in flight and stop the worker threads; runs at exit.\n"
     "Moves waiting for a transfer provider are waited for at most\n"
     "STRIDEWEAVE_EXIT_TIMEOUT seconds (default 30), and Ctrl-C stops that wait;\n"
     "the moves left unfinished are named on stderr."},
    {"_after_fork_in_child", after_fork_in_child, METH_NOARGS,
     "_after_fork_in_child()\n--\n\n"
     "Runs in a child process after os.fork(): every move or tier transfer the\n"
     "child inherited unfinished fails with RuntimeError and its carriers are\n"
     "usable again."},
    {NULL, NULL, 0, NULL},
};

static int register_exit_hook(PyObject *module)
{
    PyObject *atexit = PyImport_ImportModule("atexit");
    PyObject *hook = atexit ? PyObject_GetAttrString(module, "_shutdown_moves") : NULL;
    PyObject *r = hook ? PyObject_CallMethod(atexit, "register", "O", hook) : NULL;
    Py_XDECREF(r);
    Py_XDECREF(hook);
    Py_XDECREF(atexit);
    return r ? 0 : -1;
}

/* os.register_at_fork(after_in_child=_after_fork_in_child). */
static int register_fork_hook(PyObject *module)
{
    PyObject *os = PyImport_ImportModule("os");
    PyObject *reg = os ? PyObject_GetAttrString(os, "register_at_fork") : NULL;
    PyObject *hook = reg ? PyObject_GetAttrString(module, "_after_fork_in_child") : NULL;
    PyObject *args = hook ? PyTuple_New(0) : NULL;
    PyObject *kw = args ? Py_BuildValue("{sO}", "after_in_child", hook) : NULL;
    PyObject *r = kw ? PyObject_Call(reg, args, kw) : NULL;
    Py_XDECREF(r);
    Py_XDECREF(kw);
    Py_XDECREF(args);
    Py_XDECREF(hook);
    Py_XDECREF(reg);
    Py_XDECREF(os);
    return r ? 0 : -1;
}

int sw_py_move_init(PyObject *module)
{
    str_copy = PyUnicode_InternFromString("_copy");
    str_copy_async = PyUnicode_InternFromString("_copy_async");
    if (!str_copy || !str_copy_async || PyModule_AddFunctions(module, move_functions) < 0 ||
        sw_py_type_add_methods(&SwMoveOperation_Type, operation_methods) < 0 ||
        register_exit_hook(module) < 0 || register_fork_hook(module) < 0)
        return -1;
    if (pthread_atfork(NULL, NULL, reset_after_fork) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "cannot install the fork handler");
        return -1;
    }
    return 0;
}
