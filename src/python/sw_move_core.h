/* The binding's side of the moves the core's move engine runs
 * (py_move_core.c, over strideweave/move.h): which moves go there, and how
 * py_move.c starts one and learns of its commit. Kept apart from sw_move.h,
 * whose route kinds are the binding's own. */
#ifndef STRIDEWEAVE_SW_MOVE_CORE_H
#define STRIDEWEAVE_SW_MOVE_CORE_H

#include "sw_python.h"

/* Whether the core runs a move from `source` into `destination` on a
 * shipped route, bulk (`bulk` 1) or elementwise (0): both carriers are of
 * a class whose full core handle the core moves itself, and for bulk the
 * core's route for the pair is bulk too. The one place that says which
 * pairs go to the core. */
int sw_py_core_move_pair(PyObject *source, PyObject *destination, int bulk);

/* Per move, inside the binding's request; filled by py_move.c before the
 * start. `commit` runs once, GIL held, after the core's commit changed the
 * carriers (err: the terminal failure, or NULL on success); `release`
 * right after it, GIL still held, to free the request. */
typedef struct sw_py_core_move {
    void (*commit)(struct sw_py_core_move *cm, const sw_error *err);
    void (*release)(struct sw_py_core_move *cm);
    PyGILState_STATE gil;   /* the commit's, taken by the core's commit guard */
    int engine_thread;      /* the commit runs on the core's completion thread */
} sw_py_core_move;

/* Start moving (source carrier, offset, layout) into `destination` on the
 * core, GIL held. 0: started, and `cm->commit` then `cm->release` run
 * exactly once, on the core's completion thread or on this one (before
 * this returns, for a move the core runs on its caller); -1 with an
 * exception: the core refused, nothing changed, neither runs.
 * `caller_waits`: move() and forward(), which wait at once; the GIL is then
 * released while a larger transfer runs here. `progress`: the AwaitMove's
 * byte counter. */
int sw_py_core_move_start(sw_py_core_move *cm, PyObject *source, int64_t offset,
                          const sw_layout *layout, PyObject *destination, int elementwise,
                          int caller_waits, int64_t *progress);

/* 1 on the core's completion thread while it commits a binding move. */
int sw_py_core_move_committing(void);

/* _hold_moves for the core's moves. */
void sw_py_core_move_hold(int on);

/* Wait, GIL released, until every move the core runs has committed. */
void sw_py_core_move_drain(void);

#endif
