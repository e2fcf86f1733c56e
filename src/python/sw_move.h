/* Private interface between the movement files of the extension:
 * py_await.c (completion handles), py_move_operation.c (MoveOperation, the
 * built-in operations, the legacy registry) and py_move.c (move_async, the
 * executor glue, the one terminal commit). */
#ifndef STRIDEWEAVE_SW_MOVE_H
#define STRIDEWEAVE_SW_MOVE_H

#include "sw_carrier.h"
#include "strideweave/copy.h"
#include "strideweave/executor.h"
#include "strideweave/status.h"

/* ---- handles (py_await.c) ----------------------------------------------- */

extern PyTypeObject SwAwaitResult_Type;
extern PyTypeObject SwAwaitMove_Type;

typedef struct sw_move_handle sw_move_handle;

/* A handle's outcome is recorded once, GIL held (`done`); what a wait()
 * blocks on until then depends on the work. A move (AwaitMove) is the
 * core's: the handle holds the core's sw_move_handle while the move runs,
 * blocks on it and reads its progress; the core wakes its waiters only
 * after the binding's commit recorded the outcome. Other work (a
 * TiledEvictable request or projection) is completed by the binding: a
 * completion of its own, made when a wait() must block, and its own byte
 * counter. */
typedef struct SwAwaitObject {
    PyObject_HEAD
    sw_move_handle *move;      /* a running move's core handle (one reference),
                                  dropped once the outcome is recorded */
    sw_completion *completion; /* other work: NULL until a wait() blocks */
    PyObject *result; /* written once, before waiters wake */
    PyObject *error;  /* an exception instance, same rule */
    PyObject *weakreflist;
    PyObject *callbacks;    /* list of add_done_callback functions, or NULL */
    int64_t progress_done;  /* without a core handle: bytes copied so far (atomic,
                               any thread); a move's final count once done */
    int64_t progress_total; /* ... bytes the work copies in all */
    int done;               /* the outcome is recorded (GIL held) */
} SwAwaitObject;

/* A fresh, incomplete handle of `type` (AwaitMove, or a later subtype). */
PyObject *sw_py_await_new(PyTypeObject *type);
/* An AwaitMove's move runs on the core as `move`: the handle takes over
 * that reference (GIL held). A move that is done already (it committed on
 * its caller) is not kept. */
void sw_py_await_bind_move(PyObject *handle, sw_move_handle *move);
/* Record the terminal outcome, GIL held: `error` (an exception instance)
 * when not NULL, else `result`. Both borrowed. Runs once per handle. */
void sw_py_await_complete(PyObject *handle, PyObject *result, PyObject *error);
/* handle.wait(): the GIL is released while blocking. New reference. */
PyObject *sw_py_await_wait(PyObject *handle);
/* Progress (handle.progress) of work without a core handle: the total,
 * set before the work starts; a success ends the done count there. */
void sw_py_await_set_total(PyObject *handle, int64_t total);
/* In a forked child, before completing an inherited handle: its lock may
 * have been held by a parent thread at fork(). */
void sw_py_await_reset_after_fork(PyObject *handle);
int sw_py_await_init(PyObject *module);

/* ---- operations and routes (py_move_operation.c) ------------------------ */

extern PyTypeObject SwMoveOperation_Type;
extern PyTypeObject SwElementwise_Type;

/* A move operation is an Operation (O-11): same saved-input, token and node
 * state, inherited allocation, GC and deallocation. */
typedef struct SwMoveOperationObject {
    SwOperationObject base;
    /* Set when the move records a node: the reverse route captured at
     * initiation and the result's carrier, whose class holds the private
     * copy of a cotangent on its way back (the carrier, not the result:
     * the result refers to this node). */
    PyObject *reverse;
    PyObject *output;
} SwMoveOperationObject;

#define MOVEOP(o) ((SwMoveOperationObject *)(o))

/* X-14 resolution for the exact classes (src, dst), observing both: the
 * legacy registry for two undefined classes, else the definitions' route
 * (sw_py_route_defined, sw_extension.h) or their fallback. */
typedef struct sw_py_route {
    PyObject *op_type;  /* governing MoveOperation class, borrowed */
    PyObject *route;    /* the TransferRoute, borrowed, or NULL */
    int may_fall_back;  /* both ends defined and both permit the fallback */
} sw_py_route;
/* 0 with *out filled, or -1 with NotImplementedError naming both classes
 * (or another error). */
int sw_py_route_resolve(PyTypeObject *src, PyTypeObject *dst, sw_py_route *out);
/* The route record for a captured TransferRoute. */
void sw_py_route_of(PyObject *transfer_route, sw_py_route *out);

/* How the framework may run an operation class without calling Python:
 * a built-in class whose _copy is the C one. */
typedef enum sw_py_route_kind {
    SW_ROUTE_PYTHON = 0,     /* call op._copy on the submitting thread */
    SW_ROUTE_ELEMENTWISE = 1,
    SW_ROUTE_BULK = 2
} sw_py_route_kind;
sw_py_route_kind sw_py_move_route_kind(PyTypeObject *op_type);

/* Rows 9 of the validation table for `op_type` on these carriers: pinned
 * classes (TypeError), then an operation that does not implement _copy
 * (NotImplementedError). 0 / -1. */
int sw_py_move_check_operation(PyTypeObject *op_type, PyObject *source,
                               PyObject *destination);

/* Autograd across a move: the reverse route for a differentiable move
 * (NotImplementedError naming the reverse pair when none is permitted;
 * new reference to the operation class), remembering it on the node, and
 * attaching the node to the published result. */
int sw_py_move_capture_reverse(PyObject *source, PyObject *destination, PyObject **reverse);
void sw_py_move_node_prepare(PyObject *op, PyObject *reverse);
void sw_py_move_node_attach(PyObject *op, PyObject *output);

int sw_py_move_operation_init(PyObject *module);

/* ---- block devices (py_block_device.c, B-10) ------------------------------ */

extern PyTypeObject SwCpuToBlockDevice_Type;
extern PyTypeObject SwBlockDeviceToCpu_Type;
/* NotImplementedError unless `op_type` is the block operation of this exact
 * pair (when either carrier is a BlockDeviceCarrier); RuntimeError for a
 * faulted device. `direction` says which operation `op_type` is (the
 * caller knows the operation types): 1 CpuToBlockDeviceMoveOperation, -1
 * BlockDeviceToCpuMoveOperation, 0 any other. 0 / -1. */
int sw_py_block_device_check_route(PyTypeObject *op_type, int direction, PyObject *src,
                                   PyObject *dst);

/* ---- the move path (py_move.c) ------------------------------------------ */

/* move_async's one path. `op` NULL: resolve the route by the exact
 * classes; a MoveOperation: the route is type(op) and `op` performs it
 * (MoveOperation.forward, a legacy reverse move); a TransferRoute: that
 * captured route (a reverse move through a definition).
 * Returns an AwaitMove (new reference), or NULL with the exception of a
 * failure before submission. */
PyObject *sw_py_move_initiate(PyObject *tensor, PyObject *destination, PyObject *op);
/* The same move waited for at once (move(), MoveOperation.forward, an
 * Evictable's tier move): a C transfer runs on the calling thread and
 * commits there. Returns the moved Tensor (new reference) or NULL with the
 * move's exception. */
PyObject *sw_py_move_now(PyObject *tensor, PyObject *destination, PyObject *op);
int sw_py_move_init(PyObject *module);
/* MoveOperation.forward and .backward run moves, so they are py_move.c's:
 * it adds them to the type at module init (sw_py_move_init, after
 * sw_py_move_operation_init), and the operations file never calls up into
 * the move path. */
/* Count a transfer in flight outside move() (a TiledEvictable residency
 * request, a tile copy waiting for a provider's completion) as an engine
 * hold (strideweave/engine.h) so that drains and the exit hook wait for it;
 * RuntimeError at exit. Every successful hold is paired with one drop of
 * its token. */
int sw_py_move_hold_inflight(uint64_t *token);
void sw_py_move_drop_inflight(uint64_t token);
/* The RuntimeError an inherited incomplete transfer ends with in a forked
 * child (new reference). */
PyObject *sw_py_move_forked_error(const char *what);

/* A route's prepare(request) for a move or a tile copy (see py_move.c):
 * 1 prepared, 0 Unsupported with the fallback permitted, -1 error. */
int sw_py_route_prepare(PyObject *tensor, PyObject *dst, PyObject *route, int may_fall_back,
                        const char *action, PyObject **prepared);

#endif
