/* The binding API of libstrideweave: for language bindings (the CPython
 * extension in src/python, or one for Rust, Julia, ...) that keep slots,
 * run transfers or check placements in their own language. A C program
 * does not need it: strideweave.h (which does not include this header) is
 * the whole C API, and everything here bypasses a check that the public
 * calls make for their caller.
 *
 * Rules for a binding, before each call below:
 *   - sw_carrier_mark_pending / _unmark_pending: it has checked, in the
 *     same critical section of its own, that the carrier is live, not
 *     pending already and not owned elsewhere (sw_carrier_get_state gives
 *     all of that in one lock), and it holds its own reference to the
 *     carrier until it unmarks it; every mark is unmarked exactly once
 *     (commit or failure), or the carrier refuses writes and release for
 *     good.
 *   - sw_carrier_begin_transfer / _end_transfer: only on the thread that
 *     runs the transfer of a move that marked the carrier pending, paired
 *     on that thread; writes under it step no version.
 *   - sw_carrier_release_moved: only a move's commit, for its source,
 *     after unmarking it.
 *   - sw_carrier_drop_inherited_access: only in a forked child, before
 *     the child touches the carrier.
 *   - sw_carrier_pair_begin / _end_transfer / _end / _keep_marks: the
 *     pair struct stays where it is (the core links it) and is ended
 *     (_end or _keep_marks) once, on the thread that began it; the marks
 *     _keep_marks hands over are the binding's to unmark with
 *     sw_carrier_unmark_pending, and to clear in a forked child. A binding that copies between carriers of its own
 *     takes its marks and transfer access through these, never through
 *     a check of its own followed by sw_carrier_mark_pending.
 *   - sw_tensor_new_unchecked: the binding has run the placement checks
 *     itself (or the carrier is STATE_ONLY and the binding knows its
 *     size); the core then checks slots at access time only.
 * Ownership is as in strideweave.h: arguments are borrowed, a new handle
 * gives the caller one reference.
 * Threads: every call is thread-safe; transfer access (and the
 * owner_access and in_transfer answers of sw_carrier_get_state) belong to
 * the calling thread. */
#ifndef STRIDEWEAVE_BINDING_H
#define STRIDEWEAVE_BINDING_H

#include "strideweave/export.h"

#include <stdint.h>

#include "strideweave/carrier.h"
#include "strideweave/engine.h" /* work a binding runs on threads of its own */
#include "strideweave/layout.h"
#include "strideweave/status.h"
#include "strideweave/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Carrier state a binding's own move engine drives ------------------
 * sw_move (move.h) marks, transfers, commits and clears by itself; a
 * language binding whose moves run code of its own (a Python transfer,
 * say) drives the same state through these calls, after its own checks. */

/* Pending roles (the bits sw_carrier_pending_roles answers). */
enum {
    SW_CARRIER_PENDING_SOURCE = 1,
    SW_CARRIER_PENDING_DESTINATION = 2
};
SW_API int sw_carrier_pending_roles(sw_carrier *c);
/* All of a carrier's state at one instant, in one call (one lock): what a
 * binding checks before each slot access. owner_access and in_transfer
 * are the calling thread's. */
typedef struct sw_carrier_state {
    uint64_t version;
    int released;
    int pending;      /* SW_CARRIER_PENDING_* bits */
    int owned;
    int owner_access; /* this thread holds owner access */
    int in_transfer;  /* this thread holds transfer access */
    uint64_t claims;  /* successful claims so far (never goes down): with
                         `owned`, tells whether the claim changed */
} sw_carrier_state;
SW_API void sw_carrier_get_state(sw_carrier *c, sw_carrier_state *out);
/* Add / remove roles; the caller has checked that the carrier may take
 * part (live, not pending already, not owned elsewhere). Never fails. */
SW_API void sw_carrier_mark_pending(sw_carrier *c, int roles);
SW_API void sw_carrier_unmark_pending(sw_carrier *c, int roles);
/* Transfer access: the calling thread runs the transfer of a pending move
 * (re-entrant, bound to the thread). With it the thread may read a pending
 * destination and write it (a destination only, not a source), and its
 * writes advance no version: a move is not an in-place mutation. */
SW_API void sw_carrier_begin_transfer(sw_carrier *c);
SW_API void sw_carrier_end_transfer(sw_carrier *c);
SW_API int sw_carrier_in_transfer(sw_carrier *c);
/* The release a move's commit makes of its source, on whichever thread
 * commits: ownership was checked when the move started, so only the
 * pending guard applies (SW_ESTATE while pending). Idempotent. */
SW_API sw_status sw_carrier_release_moved(sw_carrier *c, sw_error *err);
/* In a forked child: drop the owner access and transfer access that
 * threads other than the calling one held (they did not survive the
 * fork). Claims themselves stay. */
SW_API void sw_carrier_drop_inherited_access(sw_carrier *c);

/* A copy a binding runs between two carriers of its own (a tile copy
 * through a Python operation), protected by the core in one step:
 * sw_carrier_pair_begin takes both carriers' locks, refuses a released or
 * pending carrier (the source checked first, each before anything
 * changes; SW_ESTATE, err->detail the sw_carrier_refusal: RELEASED or
 * PENDING, pair->refused the role refused), and otherwise marks the source
 * pending as a source and the destination as a destination and gives the
 * calling thread transfer access to both. A SHARED_* flag leaves that
 * carrier neither checked nor marked (its caller keeps it from other moves
 * another way: a full tier every in-place tile reads, a destination held
 * privately); transfer access it still gets. NULL arguments (SW_ETYPE)
 * and one carrier on both sides (SW_EINVAL) are refused, detail 0.
 * sw_carrier_pair_end ends it whatever the copy's outcome: the marks go and
 * so does the transfer access (if still held). sw_carrier_pair_end_transfer
 * ends only the access (the copy's own work is over; what follows may run
 * a binding's code that must not write under it), the pair stays begun.
 * sw_carrier_pair_keep_marks ends the pair but hands its marks to the
 * caller (a copy that completes later, which unmarks with
 * sw_carrier_unmark_pending and clears them in a forked child itself).
 * Ending an ended or refused pair does nothing. The pair holds a reference
 * to each carrier from begin to its end.
 * Fork: a pair begun on a thread other than the forking one is ended in
 * the child inside fork() (marks and that thread's transfer access gone;
 * the carriers' locks made fresh, since that thread may have held one
 * while copying); a pair of the forking thread stays, its copy goes on in
 * the child.
 * Threads: thread-safe; of two pairs racing for one carrier exactly one
 * begins. The struct is the caller's (stack or heap), untouched between
 * begin and end but for the read-only fields. */
enum {
    SW_CARRIER_PAIR_SHARED_SOURCE = 1u << 0,
    SW_CARRIER_PAIR_SHARED_DESTINATION = 1u << 1
};
typedef struct sw_carrier_pair {
    sw_carrier *src, *dst; /* read-only: as begun */
    int marked;            /* read-only: SW_CARRIER_PENDING_* roles marked */
    int refused;           /* read-only: after a refusal, the role refused */
    void *core_[4];        /* the core's */
} sw_carrier_pair;
SW_API sw_status sw_carrier_pair_begin(sw_carrier *src, sw_carrier *dst, unsigned flags,
                                       sw_carrier_pair *pair, sw_error *err);
SW_API void sw_carrier_pair_end(sw_carrier_pair *pair);
SW_API void sw_carrier_pair_end_transfer(sw_carrier_pair *pair);
SW_API void sw_carrier_pair_keep_marks(sw_carrier_pair *pair);

/* A tensor on a placement its caller checked itself: a language binding
 * that runs the placement checks in its own order and words, or whose
 * carrier is STATE_ONLY (carrier.h: its size is the binding's, so the core
 * cannot check the span). Only NULL arguments (SW_ETYPE) and a negative
 * offset (SW_EINVAL) are refused; a released carrier, a STATE_ONLY one or a
 * span past the carrier's size is accepted. Such a tensor stays safe: every
 * element access, value read and export checks the slots it reaches under
 * the carrier's mutex, and sw_move_async checks its span as
 * sw_move_span_async does; on a STATE_ONLY carrier those calls answer
 * SW_ENOTSUP (its binding reaches the slots). Views of it are unchecked
 * too. One allocation; `layout` is copied. */
SW_API sw_status sw_tensor_new_unchecked(sw_carrier *carrier, int64_t offset,
                                         const sw_layout *layout, sw_tensor **out,
                                         sw_error *err);

#ifdef __cplusplus
}
#endif

#endif
