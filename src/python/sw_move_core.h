/* The binding's side of the moves the core's move engine runs
 * (py_move_core.c, over strideweave/move.h): which moves go there, and how
 * py_move.c starts one and learns of its commit. Kept apart from sw_move.h,
 * whose route kinds are the binding's own. */
#ifndef STRIDEWEAVE_SW_MOVE_CORE_H
#define STRIDEWEAVE_SW_MOVE_CORE_H

#include "sw_python.h"
/* not strideweave/move.h: its route names clash with sw_move.h's */
typedef struct sw_move_handle sw_move_handle;

/* Whether the core runs a move from `source` into `destination` on a
 * shipped route, bulk (`bulk` 1) or elementwise (0): both carriers are of
 * a class whose full core handle the core moves itself, and for bulk the
 * core's route for the pair is bulk too; CPU <-> BlockDeviceCarrier on
 * its bulk route (the core's block device transfer, durable before
 * commit). The one place that says which
 * pairs go to the core. */
int sw_py_core_move_pair(PyObject *source, PyObject *destination, int bulk);
/* Whether a move of the pair may be checked by the core's start alone
 * (py_move.c, core_checks_alone): both carriers of the exact host classes
 * the core runs (CPU, Generic, FileBacked: no hook of theirs runs Python,
 * and the core's route rules, row 9, never refuse a pair of them), or CPU
 * <-> BlockDeviceCarrier, whose hooks run no Python either and whose
 * route rules (B-10, B-6) the route choice checks before the start. */
int sw_py_core_move_checked_pair(PyObject *source, PyObject *destination);

/* The core's transfer of a pair on this thread (strideweave/move.h,
 * sw_move_transfer_span_here): the physical span (`bulk` 1) or the
 * layout's values, `mark` 1 to have the core refuse a pending carrier and
 * mark both for the copy. The GIL is released around it when the copy is
 * big or a block device takes part. Both carriers are built-in classes
 * (not written in Python). Raises nothing: the answer says what happened,
 * `err` filled for SW_PY_HERE_FAILED. */
typedef enum sw_py_here {
    SW_PY_HERE_DONE = 0,
    SW_PY_HERE_UNREACHABLE = 1, /* the core cannot reach a side's slots */
    SW_PY_HERE_PENDING = 2,     /* `mark`: a carrier is pending in a move */
    SW_PY_HERE_FAILED = -1
} sw_py_here;
sw_py_here sw_py_transfer_here(PyObject *src, int64_t offset, const sw_layout *layout,
                               PyObject *dst, int bulk, int mark, sw_error *err);

/* Per move, inside the binding's request; filled by py_move.c before the
 * start. `commit` runs once, GIL held, after the core's commit changed the
 * carriers (err: the terminal failure, or NULL on success); `release`
 * right after it, GIL still held, to free the request. */
typedef struct sw_py_core_move {
    void (*commit)(struct sw_py_core_move *cm, const sw_error *err);
    void (*release)(struct sw_py_core_move *cm);
    sw_py_gil gil;          /* the commit's, taken by the core's commit guard */
    int engine_thread;      /* the commit runs on the core's completion thread */
    int entered;            /* the core's commit guard ran (commit_enter): not
                               for a commit on the thread that started the move
                               holding the GIL, where on_commit ends it */
    /* A move whose transfer the binding runs (sw_py_core_move_supply):
     * called once, GIL held, on the thread that started the move; it runs
     * the copy there or hands it to a binding thread, and whoever finishes
     * calls sw_py_core_move_transfer_done. */
    void (*transfer)(struct sw_py_core_move *cm);
    sw_move_handle *move;   /* the core's handle of such a move (one reference) */
    /* Such a move's check at its commit, GIL held, before the core releases
     * the source (strideweave/move.h, commit_check): 0 when the destination
     * can take the result; -1 when not, the binding keeping its exception
     * for `commit`, which then gets the failure. NULL: no check. */
    int (*check)(struct sw_py_core_move *cm);
    int forked;             /* set before `commit`: the move was inherited by a
                               forked child and ended there */
    void *profile_tag;      /* the profiling record (sw_profiling.h), or NULL:
                               handed to the core's profiling hook */
} sw_py_core_move;

/* Start moving a Tensor's plane (its core tensor) into `destination` on
 * the core, GIL held. 0: started, *move holds one reference to the core's
 * handle (for the AwaitMove), and `cm->commit` then `cm->release` run
 * exactly once, on the core's completion thread or on this one (before
 * this returns, for a move the core runs on its caller); -1 with an
 * exception: the core refused, nothing changed, neither runs, *move is
 * NULL; -2 likewise when the refusal is the growth of an empty destination
 * (the core grows it: the binding never does for a class of the core's,
 * strideweave/move.h SW_MOVE_GROWTH_FAILED). `caller_waits`: move() and forward(), which wait at once; the GIL
 * is then released while a larger transfer runs here. The core counts the
 * move's progress in its handle. */
int sw_py_core_move_start(sw_py_core_move *cm, const SwSubtensor *plane, PyObject *destination,
                          int elementwise, int caller_waits, sw_move_handle **move);

/* Start a move whose transfer the binding supplies (a Python _copy, or
 * carriers whose slots only the binding reaches), GIL held: the core
 * validates again, marks both carriers pending, calls `cm->transfer` here
 * and commits once after sw_py_core_move_transfer_done (here, when that is
 * called inside `cm->transfer`; else on its completion thread), asking
 * `cm->check` first when set. A STATE_ONLY
 * source is released by the binding's commit. `dst_slots`: the
 * destination's size; `bytes`: what the copy moves. 0 / -1 / -2 as
 * sw_py_core_move_start. */
int sw_py_core_move_supply(sw_py_core_move *cm, const SwSubtensor *plane,
                           PyObject *destination, int64_t dst_slots, int64_t bytes,
                           sw_move_handle **move);
/* The supplied transfer finished (`failed`: the binding keeps its error);
 * GIL held, on any Python thread, which then commits the move before
 * this returns (inside `cm->transfer`: once it returned); `cm` may be gone
 * once this returns. */
void sw_py_core_move_transfer_done(sw_py_core_move *cm, int failed);
/* In a forked child, GIL held: every move inherited from the parent fails
 * now (the core's fork rule, strideweave/move.h "Fork"), each commit
 * running here with `forked` set. */
void sw_py_core_move_end_inherited(void);
/* Exit gave up on this supplied move: the core's drains stop waiting. */
void sw_py_core_move_abandon(sw_py_core_move *cm);

/* The core's handle for the AwaitMove (py_await.c), which cannot include
 * strideweave/move.h (see above): a wait of at most `timeout_ns` (< 0: no
 * limit) with the GIL released by the caller, 1 once the move committed;
 * the bytes copied so far and in all; references. */
int sw_py_core_move_wait_for(sw_move_handle *move, int64_t timeout_ns);
/* The same for a wait with no limit, in slices: this thread meanwhile runs
 * parts of the move's copy nobody started (a slice may run over by one). */
int sw_py_core_move_wait_helping(sw_move_handle *move, int64_t slice_ns);
void sw_py_core_move_progress(sw_move_handle *move, int64_t *done, int64_t *total);
sw_move_handle *sw_py_core_move_ref(sw_move_handle *move);
void sw_py_core_move_unref(sw_move_handle *move);

/* 1 on the core's completion thread while it commits a binding move. */
int sw_py_core_move_committing(void);

/* _hold_moves for the core's moves. */
void sw_py_core_move_hold(int on);

/* Wait, GIL released, until every move the core runs has committed. */
void sw_py_core_move_drain(void);

#endif
