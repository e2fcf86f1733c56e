/* Moves the core's move engine runs for the binding (strideweave/move.h):
 * move(), move_async() and MoveOperation.forward() between CPU, Generic
 * and FileBacked carriers, and between CPU and BlockDeviceCarrier, on a
 * shipped route. A block device move may run on the caller and wait for
 * the device there: the GIL is let go around that transfer. The core validates again,
 * marks both carriers pending, runs the transfer (on its pool, or on the
 * caller for a small one) and commits once; what only the binding knows
 * (the result Tensor, the autograd node, the profiling record, the
 * AwaitMove and its callbacks, Python exceptions) attaches at that commit.
 *
 * The GIL: the core's commit guard takes it before the core's commit
 * changes the carriers and lets it go after the binding's commit, so a
 * Python reader of the source (allowed while it is pending) never sees its
 * storage freed under it, and no core lock is held while waiting for it.
 * A core thread (the completion thread) makes its Python thread state at
 * its first commit and keeps it: each later commit only takes the GIL
 * (making and deleting a thread state per commit cost a system call, an
 * allocation and about 1,500 instructions per move). A move the core runs
 * on its caller commits there: the GIL is held already (the start tells
 * the core so, guard_held: no guard runs, and a small move takes one lock
 * round on its carriers), or taken back after a larger transfer ran
 * without it. */
#include "sw_move_core.h"
#include "sw_carrier.h"
#include "sw_profiling.h"
#include "strideweave/block_device.h"
#include "strideweave/move.h"
#include "strideweave/tensor.h"

#define CARRIER(o) ((SwCarrierObject *)(o))

/* A span up to this is copied on the caller with the GIL held (the core
 * runs it there; releasing the GIL would cost more than the copy); a
 * waited one past it, and a route run here past it, without the GIL. */
#define GIL_HELD_BYTES ((int64_t)64 << 10)

static _Thread_local int committing;
/* This core thread's own Python thread state, kept from its first commit
 * on; NULL on threads Python made (and on a core thread before). */
static _Thread_local PyThreadState *core_tstate;

static int core_class(PyObject *carrier)
{
    PyTypeObject *t = Py_TYPE(carrier);
    return t == &SwCPU_Type || t == &SwGeneric_Type || t == &SwFileBacked_Type;
}

/* CPU <-> BlockDeviceCarrier: the core's block device routes (bulk only).
 * A carrier of an exact host class has that class's core: no core call for
 * the common pairs (two per move). */
static int on_device(PyObject *carrier)
{
    if (core_class(carrier))
        return 0;
    sw_carrier *c = CARRIER(carrier)->core;
    return c && sw_carrier_class_of(c) == &sw_block_device_carrier_class;
}

static int block_pair(PyObject *source, PyObject *destination)
{
    return (Py_TYPE(source) == &SwCPU_Type && on_device(destination)) ||
           (on_device(source) && Py_TYPE(destination) == &SwCPU_Type);
}

int sw_py_core_move_checked_pair(PyObject *source, PyObject *destination)
{
    if (core_class(source) && core_class(destination))
        return 1;
    /* Asked before the move's checks: the destination may be any object
     * (a CPU one needs no look at its core). */
    return (Py_TYPE(destination) == &SwCPU_Type || SwCarrier_Check(destination)) &&
           block_pair(source, destination);
}

int sw_py_core_move_pair(PyObject *source, PyObject *destination, int bulk)
{
    if (block_pair(source, destination))
        return bulk;
    if (!core_class(source) || !core_class(destination))
        return 0;
    return !bulk || sw_move_route_for(CARRIER(source)->core, CARRIER(destination)->core) ==
                        SW_ROUTE_BULK;
}

sw_py_here sw_py_transfer_here(PyObject *src, int64_t offset, const sw_layout *layout,
                               PyObject *dst, int bulk, int mark, sw_error *err)
{
    sw_carrier *s = CARRIER(src)->core, *d = CARRIER(dst)->core;
    unsigned flags = (bulk ? SW_MOVE_HERE_SPAN : SW_MOVE_HERE_VALUES) |
                     (mark ? SW_MOVE_HERE_MARK : 0);
    int64_t bytes = layout->cosize * (int64_t)sw_dtype_slot_bytes(sw_carrier_dtype(s));
    sw_status st;
    /* A block device's lock may be held by a pool thread: never wait for
     * it with the GIL. */
    if (bytes <= GIL_HELD_BYTES && !on_device(src) && !on_device(dst)) {
        st = sw_move_transfer_span_here(s, offset, layout, d, flags, err);
    } else {
        Py_BEGIN_ALLOW_THREADS
        st = sw_move_transfer_span_here(s, offset, layout, d, flags, err);
        Py_END_ALLOW_THREADS
    }
    if (st == SW_OK)
        return SW_PY_HERE_DONE;
    if (st == SW_ENOTSUP)
        return SW_PY_HERE_UNREACHABLE;
    return err->detail == SW_MOVE_SOURCE_PENDING || err->detail == SW_MOVE_DESTINATION_PENDING
               ? SW_PY_HERE_PENDING
               : SW_PY_HERE_FAILED;
}

static void commit_enter(void *user)
{
    sw_py_core_move *cm = user;
    cm->entered = 1;
    if (core_tstate) { /* a core thread that committed before */
        cm->engine_thread = 1;
        PyEval_RestoreThread(core_tstate);
    } else {
        /* A thread without a Python thread state is the core's own: it
         * keeps the one made here (the state is never released, so it
         * stays this thread's). */
        cm->engine_thread = PyGILState_GetThisThreadState() == NULL;
        cm->gil = sw_py_gil_ensure();
        if (cm->engine_thread)
            core_tstate = PyThreadState_Get();
    }
    if (cm->engine_thread)
        committing = 1;
}

/* The binding's end of a commit, GIL held: the request goes; `cm` with
 * it. */
static void commit_done(sw_py_core_move *cm)
{
    sw_move_handle *move = cm->move;
    cm->release(cm);
    sw_move_unref(move); /* the commit still holds its own */
    if (PyErr_Occurred())
        PyErr_WriteUnraisable(NULL);
}

static void on_commit(sw_move_handle *m, sw_status status, sw_tensor *result, void *user)
{
    (void)result;
    sw_py_core_move *cm = user;
    cm->forked = sw_move_ended_by_fork(m);
    cm->commit(cm, status == SW_OK ? NULL : sw_move_error(m));
    /* A commit on the thread that started the move, which told the core it
     * holds the GIL (guard_held): no commit_leave follows. */
    if (!cm->entered)
        commit_done(cm);
}

static void commit_leave(void *user)
{
    sw_py_core_move *cm = user;
    sw_py_gil gil = cm->gil;
    int engine_thread = cm->engine_thread;
    commit_done(cm);
    if (engine_thread) {
        committing = 0;
        (void)gil;
        PyEval_SaveThread(); /* the thread state stays this thread's */
        return;
    }
    sw_py_gil_release(gil);
}

int sw_py_core_move_committing(void)
{
    return committing;
}

/* The thread state of a caller whose block device transfer runs without
 * the GIL (transfer_unlock to transfer_relock, on that caller). */
static _Thread_local PyThreadState *transfer_tstate;

static void transfer_unlock(void *user)
{
    (void)user;
    transfer_tstate = PyEval_SaveThread();
}

static void transfer_relock(void *user)
{
    (void)user;
    PyEval_RestoreThread(transfer_tstate);
    transfer_tstate = NULL;
}

/* 0, or the core's refusal raised: -2 when growing the empty destination
 * failed (the caller refuses the request itself with it), else -1. */
static int refusal(sw_status st, const sw_error *err)
{
    if (st == SW_OK)
        return 0;
    sw_py_raise(err);
    return err->detail == SW_MOVE_GROWTH_FAILED ? -2 : -1;
}

int sw_py_core_move_start(sw_py_core_move *cm, const SwSubtensor *plane, PyObject *destination,
                          int elementwise, int caller_waits, sw_move_handle **move)
{
    sw_error err;
    /* No core result: the binding publishes its own Tensor at commit, and a
     * small move takes the core's light path. */
    sw_move_options o = {
        .on_commit = on_commit,
        .user = cm,
        .commit_enter = commit_enter,
        .commit_leave = commit_leave,
        .caller_waits = caller_waits,
        .elementwise = elementwise,
        .no_result = 1,
        .profile_tag = cm->profile_tag,
        .profile_tag_hook = sw_py_profile_core_event,
    };
    sw_move_handle *m = NULL;
    sw_status st;
    sw_carrier *dst = CARRIER(destination)->core;
    sw_tensor *t = plane->core;
    int64_t span = sw_tensor_layout(t)->cosize *
                   (int64_t)sw_dtype_slot_bytes(sw_tensor_dtype(t));
    /* A block device move the core runs here can wait for the device's
     * lock, a transfer on its range or the device itself: the GIL is let
     * go around that transfer only (transfer_unlock), as os.preadv lets it
     * go around its read; its checks and commit keep it, as a host pair's
     * do (two fewer GIL round trips a small read, issue 19). */
    int device = block_pair(plane->carrier, destination);
    if (device) {
        o.transfer_enter = transfer_unlock;
        o.transfer_leave = transfer_relock;
    }
    if (caller_waits && span > GIL_HELD_BYTES && !device) {
        Py_BEGIN_ALLOW_THREADS
        st = sw_move_async(t, dst, &o, &m, &err);
        Py_END_ALLOW_THREADS
    } else {
        /* The GIL stays held through the call (a commit here, and Python
         * code it runs, takes it back before returning), and os.fork()
         * needs it. */
        o.guard_held = 1;
        st = sw_move_async(t, dst, &o, &m, &err);
    }
    /* The commit reaches the binding through `cm`; the handle is the
     * AwaitMove's, to wait on and read progress from. */
    *move = m;
    return refusal(st, &err);
}

void sw_py_core_move_hold(int on)
{
    sw_move_hold(on);
}

void sw_py_core_move_drain(void)
{
    Py_BEGIN_ALLOW_THREADS
    sw_move_drain();
    Py_END_ALLOW_THREADS
}

/* The core's commit asks, GIL held (commit_enter), before the source is
 * released; the binding's own exception goes to its `commit`, the core
 * only learns that the move failed. */
static sw_status commit_check(sw_move_handle *m, void *user, sw_error *err)
{
    (void)m;
    sw_py_core_move *cm = user;
    if (cm->check(cm) == 0)
        return SW_OK;
    return sw_error_set(err, SW_ESTATE, "move: the destination cannot take the result");
}

/* The core calls this on the thread that started the move, GIL held. */
static void supplied_transfer(sw_move_handle *m, void *user)
{
    sw_py_core_move *cm = user;
    cm->move = sw_move_ref(m);
    cm->transfer(cm);
}

int sw_py_core_move_supply(sw_py_core_move *cm, const SwSubtensor *plane,
                           PyObject *destination, int64_t dst_slots, int64_t bytes,
                           sw_move_handle **move)
{
    sw_error err;
    cm->move = NULL;
    sw_move_options o = {
        .on_commit = on_commit,
        .user = cm,
        .commit_enter = commit_enter,
        .commit_leave = commit_leave,
        .transfer = supplied_transfer,
        .commit_check = cm->check ? commit_check : NULL,
        .dst_slots = dst_slots,
        .bytes = bytes,
        .profile_tag = cm->profile_tag,
        .profile_tag_hook = sw_py_profile_core_event,
        /* A commit here (a transfer that finished inside `transfer`) finds
         * the GIL held. */
        .guard_held = 1,
    };
    sw_move_handle *m = NULL;
    /* GIL held throughout: the transfer may run Python here. */
    sw_status st = sw_move_async(plane->core, CARRIER(destination)->core, &o, &m, &err);
    *move = m;
    return refusal(st, &err);
}

void sw_py_core_move_transfer_done(sw_py_core_move *cm, int failed)
{
    /* Every report comes from a Python thread holding the GIL: it commits
     * right there (a hand-off to the core's completion thread would pass
     * the GIL back and forth once per move). */
    sw_move_transfer_done_here(cm->move, failed ? SW_EIO : SW_OK, NULL);
}

void sw_py_core_move_end_inherited(void)
{
    sw_move_end_inherited();
}

void sw_py_core_move_abandon(sw_py_core_move *cm)
{
    sw_move_abandon(cm->move);
}

int sw_py_core_move_wait_for(sw_move_handle *move, int64_t timeout_ns)
{
    return sw_move_wait_for(move, timeout_ns);
}

int sw_py_core_move_wait_helping(sw_move_handle *move, int64_t slice_ns)
{
    return sw_move_wait_helping(move, slice_ns);
}

void sw_py_core_move_progress(sw_move_handle *move, int64_t *done, int64_t *total)
{
    sw_move_progress(move, done, total);
}

sw_move_handle *sw_py_core_move_ref(sw_move_handle *move)
{
    return sw_move_ref(move);
}

void sw_py_core_move_unref(sw_move_handle *move)
{
    sw_move_unref(move);
}
