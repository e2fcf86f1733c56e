/* A move's validation for move(), move_async() and MoveOperation.forward()
 * (py_move_check.c): the core checks the rows of its table
 * (strideweave/move.h, sw_move_check) and names the row that refused; this
 * binding runs only what the core cannot (argument types, the Python hooks
 * of carriers written in Python, which run before the core looks) and
 * raises the exception each row maps to.
 *
 * Order in a move (py_move.c, initiate):
 *   sw_py_move_check_begin   rows 1-8 (row 10 too, kept for later)
 *   (the route: row 9, the binding's)
 *   sw_py_move_check_size    row 10
 *   (autograd capture, a TransferRoute's prepare: user code)
 *   sw_py_move_recheck_if_python_ran   the carriers' states again before
 *                            the destination grows (when Python may have run)
 *   sw_py_move_recheck       and after a growth that ran Python
 * GIL held throughout; the struct lives on the caller's stack. Not
 * strideweave/move.h here: its route names clash with sw_move.h's. */
#ifndef STRIDEWEAVE_SW_MOVE_CHECK_H
#define STRIDEWEAVE_SW_MOVE_CHECK_H

#include "sw_python.h"

typedef struct sw_py_move_check {
    PyObject *tensor, *source, *destination; /* borrowed from the caller */
    struct sw_carrier *src_core, *dst_core; /* theirs in the core (dst: NULL for a non-Carrier) */
    int dst_in_python;   /* the destination is written in Python (STATE_ONLY) */
    int64_t cosize;
    unsigned flags;      /* the core's SW_MOVE_CHECK_* bits: answers given so far */
    sw_dtype dtype;      /* the Tensor's dtype */
    sw_dtype dst_dtype;  /* the answers of a destination written in Python */
    int dst_immutable;
    int64_t dst_slots;
    int dst_grows;
    int too_small;       /* row 10 refused before the route was chosen */
    int grows;           /* the destination grows to the cosize */
    uint64_t collections; /* garbage collections counted when the checks began */
} sw_py_move_check;

/* Rows 1-8 for moving `tensor` into `destination`: 0, or -1 with the
 * row's exception (TypeError, ValueError or RuntimeError, in the words
 * the Python API always used). */
int sw_py_move_check_begin(sw_py_move_check *mc, PyObject *tensor, PyObject *destination);
/* Row 10, once the route is chosen: 1 when the destination must grow
 * (empty and allocatable), 0 when it is big enough, -1 with ValueError
 * when it is too small (or the exception of a size hook). */
int sw_py_move_check_size(sw_py_move_check *mc);
/* After user code ran: the rows again with the answers given before (a
 * destination's size not asked again: it may have grown). 0, or -1 with
 * RuntimeError naming the carrier that was released, claimed or moved. */
int sw_py_move_recheck(sw_py_move_check *mc);
/* sw_py_move_recheck unless no Python code can have run since the checks
 * began: `user_code` 0 (the caller ran none: a shipped route, no
 * operation object, no autograd node, no TransferRoute), both carriers of
 * shipped classes, and no garbage collection (finalizers) meanwhile. Saves
 * a move of built-ins the lock round of a recheck; the errors are those of
 * sw_py_move_recheck, which only changed carriers raise. */
int sw_py_move_recheck_if_python_ran(sw_py_move_check *mc, int user_code);
/* Whether growing the destination runs user code (a Python _allocate),
 * so that the carriers need sw_py_move_recheck after it. */
int sw_py_move_growth_runs_python(const sw_py_move_check *mc);

#endif
