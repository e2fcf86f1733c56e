/* Moves: relocate a tensor's values into another carrier, keep its layout,
 * release the source.
 *
 * sw_move_async(t, dst) validates in this order, each failure returned
 * directly with nothing changed (no growth, no pending mark, no handle):
 *
 *   1. t is NULL                                     SW_ETYPE
 *   2. t's carrier is released                       SW_ESTATE
 *   3. t's carrier is owned by a composite           SW_ESTATE
 *      (or already pending in another move)          SW_ESTATE
 *   4. dst is NULL                                   SW_ETYPE
 *   5. dst is t's carrier                            SW_EINVAL
 *   6. dst is released                               SW_ESTATE
 *   7. dst is not publicly mutable (incl. pending)   SW_ESTATE
 *   8. dst's dtype is not t's dtype                  SW_ETYPE
 *   9. the route registry refuses the pair           SW_ENOTSUP
 *      (route.h, sw_move_route_resolve):
 *      a TiledEvictable carrier on either side
 *      (tiled_evictable.h: its values stay in its
 *      tiers; a projection copies them out),
 *      a BlockDeviceCarrier on either side and the    SW_ENOTSUP
 *      other side not CPU (block_device.h),
 *      or its device faulted                         SW_ESTATE
 *  10. dst is smaller than the layout's cosize and   SW_EINVAL
 *      cannot allocate
 *      (an empty dst that can allocate grows to the
 *      cosize here; when that fails, the growth's      SW_EIO,
 *      own status, detail SW_MOVE_GROWTH_FAILED)       SW_EOVERFLOW
 *
 * Each refusal also names its row: err->detail is the sw_move_refusal
 * below (0 for any other failure: out of memory, the process exiting, a
 * span that sw_move_span_async refuses first as sw_tensor_new does, on a
 * released carrier or past its end). sw_move_check runs the same rows
 * without moving anything, for a binding that has work of its own to do
 * between validation and submission.
 *
 * Then it resolves the route by the exact pair of ops tables, from the
 * core's own table in the route registry (route.h: CPU <-> FileBacked and
 * CPU <-> BlockDeviceCarrier are bulk routes copying the physical span;
 * every other pair is the elementwise fallback: a strided copy when both
 * carriers expose storage, else slot by slot through the ops; a binding's
 * registered route runs only through a transfer it supplies), grows
 * an empty allocatable destination to exactly the cosize, marks both
 * carriers pending and submits the transfer to the core's pool (started
 * lazily on first use; the same pool and completion thread run
 * TiledEvictable's asynchronous work, tiled_evictable.h: one set of
 * threads per process). A failure during these steps undoes the growth
 * and the marks. From submission on, every failure is the move's terminal
 * failure, reported by sw_move_wait; it too gives the growth back (the
 * destination is empty again, its file of length 0), except in a forked
 * child (see "Fork").
 *
 * Where the transfer runs: on the core's pool, except a transfer between
 * carriers of the built-in storage classes (CPU, Generic, FileBacked)
 * whose physical span is small: up to 64 KiB (32 KiB for a write into a
 * FileBacked, whose system call the pool overlaps with the caller's next
 * moves) it runs on the calling thread and commits there before
 * sw_move_async returns (a pool round trip would cost more than the
 * copy), up to 16 MiB when the caller waits
 * for it at once (sw_move, or caller_waits in the options). The rules are
 * the same either way (pending marks, one commit, hooks, profiling
 * events). A move run on its caller takes a light path: no completions,
 * no reference to the carriers or a tensor on the source beyond the call,
 * its result tensor made at commit (none with no_result), one lock round
 * on the carrier pair to validate and mark and one to commit; its handle
 * is done when sw_move_async returns. When the caller holds its commit
 * guard (guard_held in the options), the span is at most 64 KiB and no
 * profiling subscriber watches, a move between those classes takes one
 * lock round instead: the carriers stay locked from the validation through
 * the copy to the commit, no pending mark is set (no other thread can see
 * them in between), another thread touching either carrier waits for that
 * copy, and on_commit runs after the locks are let go. A span copy of 32
 * MiB or more is cut into parts run side by side on the
 * helper threads of parallel.h: all of them when the caller waits, all
 * but one otherwise (the caller's own thread keeps a CPU), and a thread
 * that comes to wait for such a move with no time limit (sw_move_wait,
 * sw_move_wait_for with timeout_ns < 0, sw_move_wait_helping) runs the
 * parts nobody has started yet meanwhile, giving that CPU back to the
 * copy. A span copy between host memories of 32 KiB to 8 MiB that runs
 * on its caller is cut in two, when the core's copy partner thread
 * is free: the caller copies one half while the partner copies the other
 * (the partner spins for a moment after each half, so that a run of moves
 * finds it awake, then sleeps; a copy of 1 MiB or more wakes it). The
 * caller returns only once both halves are copied. A move between
 * CPU and a BlockDeviceCarrier runs on its caller up to 16 MiB when the
 * caller waits, and a read out of the device up to 64 KiB always (such a
 * caller may block on the device's lock: a binding lets its own lock go
 * first); a larger one, and a write into the device the caller does not
 * wait for, runs on the pool, where writes in flight share one fdatasync.
 *
 * Commit happens once, on the core's completion thread: on success it
 * publishes the result (a tensor on dst at offset 0 with t's layout),
 * releases the source carrier and clears the pending marks; on failure it
 * publishes nothing, clears the marks and leaves the source live and
 * unchanged (the destination stays live, its values unspecified). A move
 * into a BlockDeviceCarrier succeeds only once the written range is
 * durable on the device (block_device.h). Neither carrier's version
 * changes. A dropped handle neither cancels nor blocks
 * the move: the move holds its own references until commit.
 *
 * References after commit: the move drops its references to the source
 * tensor and the destination carrier on the completion thread before it
 * reports completion, so once sw_move_wait or sw_move returns (or
 * sw_move_done reports 1) it holds none of them. The one thing left is
 * the handle's reference to the published result (a tensor on dst, so
 * dst stays referenced through it) for later sw_move_wait calls; it goes
 * with the handle's last reference, on the thread that drops it (sw_move
 * drops its handle before returning). So: wait, drop the handle, the
 * result and your carriers, and the carriers are gone right away (a
 * block device closes without sw_move_drain). After a failed move the
 * handle holds nothing.
 *
 * Ownership: sw_move_async gives the caller one reference to the handle,
 * an sw_move_handle (the AwaitMove of the Python API)
 * (sw_move_unref). sw_move_wait gives one reference to the result tensor,
 * the same tensor on every call from every thread.
 *
 * Threads: every function is thread-safe. sw_move_async does not block on
 * the transfer, except a small one it runs on the caller (see "Where the
 * transfer runs"); sw_move_wait, sw_move_wait_for (up to its bound), sw_move
 * and sw_move_drain block.
 *
 * Process exit: a program may return from main or call exit() with moves
 * (or TiledEvictable asynchronous work) in flight, handles dropped or not.
 * Exit then waits for them, like sw_move_drain: each one finishes and commits (or fails) as it would
 * have, so no transfer is cut short, a move into a BlockDeviceCarrier
 * is durable on the device (it commits only then), nothing crashes, and
 * the session directory of FileBacked carriers is removed after the
 * moves into its files finished. From the moment exit begins,
 * sw_move_async (and a TiledEvictable _async call) fails SW_ESTATE ("the
 * process is exiting"), also in exit handlers that run later. The wait is
 * registered with atexit() when the first move or TiledEvictable request
 * starts. Exit called from an on_commit callback, the
 * profiling hook or a carrier's transfer (the engine's own threads) does
 * not wait, since that move cannot finish first. Not covered: _exit(),
 * quick_exit(), a fatal signal (a move into a BlockDeviceCarrier that was
 * cut short never committed; what it wrote is not part of any carrier),
 * and a move whose transfer never ends (exit then never ends either:
 * open your gates first). After fork() the child waits only for its own
 * moves (see "Fork" below).
 *
 * Fork: the child of fork() has none of the parent's threads, so the
 * moves the parent had in flight (queued, held by sw_move_hold, on the
 * pool, waiting for a supplied transfer's report) cannot finish there.
 * The core's pthread_atfork child handler sets them aside (it runs no
 * hook: inside fork() a binding's runtime is not ready); the child ends
 * them with sw_move_end_inherited, which a binding calls from its own
 * after-fork hook (Python: os.register_at_fork(after_in_child=...)) and a
 * C program right after fork() returns 0. Each then fails with SW_ESTATE
 * ("the move was in flight when the process forked ..."; sw_move_ended_by_fork
 * says 1 for it) and commits on the calling thread as a failed move does:
 * commit guard, on_commit, the COMPLETE event, the pending marks cleared
 * (both carriers are usable in the child), the source live and unchanged,
 * the destination live with its values unspecified (a destination the
 * move grew stays grown: its file may be the parent's too), transfer access
 * the parent's threads held on either carrier dropped, waiters woken.
 * sw_move_wait on an inherited move that was not ended yet ends them
 * first, so a wait in the child never hangs even without that call. The
 * child never touches the parent's pool or completion thread: its own
 * engine starts on its first move, and drains and exit wait only for the
 * child's moves. Left alone: a move whose transfer runs on the forking
 * thread itself (a supplied transfer inside its sw_move_async there, or a
 * transfer holding transfer access to either carrier there, carrier.h):
 * it continues in the child and commits there once it reports. A move
 * whose commit was under way on another thread at the fork keeps what
 * that commit did; its waiters wake with its outcome. The same handlers
 * end the TiledEvictable work the child inherited (tiled_evictable.h,
 * "Fork"): that needs no call, since it runs no hook of a binding.
 * The core registers its fork handlers once, when the library loads; no
 * lock of its own is left held in the child by a thread the child lacks
 * (each is held across fork(), or made fresh in the child). A program's
 * own pthread_atfork handlers, registered after that, run their prepare
 * before the core's and their child handler after it, when the core is
 * usable again. */
#ifndef STRIDEWEAVE_MOVE_H
#define STRIDEWEAVE_MOVE_H

#include "strideweave/export.h"

#include <stdint.h>

#include "strideweave/carrier.h"
#include "strideweave/dtype.h"
#include "strideweave/status.h"
#include "strideweave/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sw_move_handle sw_move_handle;

typedef enum sw_move_route {
    SW_ROUTE_BULK = 1,        /* physical span through host/file endpoints */
    SW_ROUTE_ELEMENTWISE = 2, /* logical values (strided copy or slot by slot) */
    SW_ROUTE_SUPPLIED = 3     /* the caller's transfer (sw_move_options.transfer) */
} sw_move_route;

/* ---- transfers a binding supplies ------------------------------------------
 *
 * A binding whose route the core cannot run itself (a copy written in the
 * binding's language, a transfer provider, carriers whose slots only the
 * binding reaches: STATE_ONLY classes, carrier.h) still runs the move on
 * this engine: it sets `transfer` in the options and the core does
 * everything else as for its own routes (validation, pending marks, the
 * profiling events, one commit on the completion thread with the commit
 * guard and on_commit, dropped handles, sw_move_drain, exit, fork).
 *
 * Who calls what, on which thread:
 *   1. sw_move_async (or sw_move_span_async) validates, marks both
 *      carriers pending, reports SUBMIT, then calls `transfer(move, user)`
 *      once, on the thread that called it, before it returns, with no core
 *      lock held (sw_move_hold does not hold such moves: their threads are
 *      the binding's). A binding calling it with its own lock held (the
 *      GIL) gets `transfer` with that lock held.
 *   2. `transfer` does the copy there, or hands it to a thread of its own
 *      choosing and returns. Whoever finishes calls
 *      sw_move_transfer_done(move, status, err) exactly once, from any
 *      thread, with no core lock held; it does not block, and it may be
 *      called inside `transfer`.
 *   3. The commit: when done was reported inside `transfer`, on the thread
 *      that called sw_move_async, before it returns (the commit guard may
 *      then take a lock that thread holds already: make it re-entrant, as
 *      PyGILState_Ensure is); when reported with sw_move_transfer_done_here,
 *      on the reporting thread; otherwise on the core's completion thread.
 *      A destination whose size only the binding knows (STATE_ONLY), or
 *      that the binding's code may have shrunk, is the binding's to check
 *      there, in `commit_check`, before the source is released: the core's
 *      own check at commit skips a STATE_ONLY destination's size.
 *      on_commit runs after the carriers' marks are cleared and, on success,
 *      the source released (a STATE_ONLY source excepted: its slots are the
 *      binding's, so on_commit releases it with sw_carrier_release_moved
 *      (binding.h), or keeps it live when that release fails); on failure
 *      the source is live and unchanged.
 * The move holds references to both carriers and to the handle until its
 * commit: dropping every handle neither cancels nor blocks it. The core
 * never touches the slots of either carrier for such a move.
 *
 * Sizes: with a supplied transfer either carrier may be STATE_ONLY. The
 * core then learns sizes from the binding: `dst_slots` is a STATE_ONLY
 * destination's slot count (the binding grows an empty one itself, before
 * the call; an empty destination of the core's own classes, FileBacked,
 * the core grows and gives back as for its own routes); the dtype
 * comparison (row 8) is the binding's for a STATE_ONLY
 * carrier, and the move's bytes are `bytes` (0 when not set). Without a
 * supplied transfer a STATE_ONLY carrier is refused as before.
 *
 * Exit and drains: such a move counts in flight like any other, so
 * sw_move_drain and exit wait for its report. A binding whose transfer may
 * never report (user code) bounds that wait with sw_move_drain_for and
 * then sw_move_abandon: drains stop waiting for it; should it report
 * later, it still commits once. */
typedef void (*sw_move_transfer_fn)(sw_move_handle *move, void *user);

/* Runs once per move on the completion thread (or on the caller for a
 * move run there, see above), after the commit changed the carriers and
 * before any waiter wakes; no core lock is held (the commit guard of the
 * options, if any, is). `status`
 * is the terminal outcome; `result` is the published tensor (borrowed;
 * take a reference to keep it) or NULL on failure. This is where a binding
 * attaches what only it knows (autograd node, profiling records). It must
 * not wait for a move (commits run one at a time on that thread). */
typedef void (*sw_move_commit_fn)(sw_move_handle *move, sw_status status, sw_tensor *result,
                                  void *user);

/* Runs around the whole commit of one move, on the thread that commits
 * (the completion thread, or the caller for a move run on its caller),
 * before any core lock is taken and after all are let go: enter first,
 * then the carriers change, on_commit and the COMPLETE profiling event,
 * then leave. A binding whose own readers of the source rely on its own
 * lock (a Python binding: the GIL) takes that lock here, so the source's
 * storage is never freed under such a reader. Both get `user`. Neither
 * runs for a commit on the caller of a move started with guard_held (the
 * caller holds that lock already): on_commit then does what leave would. */
typedef void (*sw_move_commit_guard_fn)(void *user);

/* Runs once per move at its commit, only when its transfer succeeded: on
 * the thread that commits, right after commit_enter (so under the lock a
 * binding takes there), before any core lock is taken and before either
 * carrier changes. A binding answers here what only it knows about the
 * destination, which the core's own check at commit cannot see: a
 * STATE_ONLY one's size (its slots are the binding's), or whether user
 * code shrank it during the transfer. SW_OK lets the commit go on; any
 * other status (with `err` filled, else a generic message) fails the move
 * as a failed transfer does: nothing is published, the source stays live
 * and unchanged (not released, its version as before), both pending marks
 * are cleared, a growth the move made is undone, the COMPLETE profiling
 * event and on_commit carry the failure, and sw_move_wait returns it. It
 * must not wait for a move nor start one on either carrier. */
typedef sw_status (*sw_move_commit_check_fn)(sw_move_handle *move, void *user, sw_error *err);

/* A profiling subscriber (see "Profiling hooks" below). */
struct sw_move_event;
typedef void (*sw_move_profile_fn)(const struct sw_move_event *event, void *user);

typedef struct sw_move_options {
    sw_move_commit_fn on_commit; /* may be NULL */
    void *user;
    sw_move_commit_guard_fn commit_enter; /* may be NULL (then leave is not called) */
    sw_move_commit_guard_fn commit_leave; /* may be NULL */
    int64_t *progress;   /* NULL (the handle counts: sw_move_progress), or a byte
                            counter the transfer adds to atomically,
                            set to sw_move_bytes at a successful commit */
    int caller_waits;    /* 1: the caller waits for the move at once (as sw_move
                            does): see "Where the transfer runs" above */
    int elementwise;     /* 1: copy the logical values only, even between a pair
                            with a bulk route (sw_move_route_for); not for a
                            BlockDeviceCarrier, which keeps its own route */
    sw_move_transfer_fn transfer; /* NULL: the core's route; else the caller's
                                     (see "transfers a binding supplies") */
    int64_t dst_slots;   /* with `transfer` and a STATE_ONLY destination: its
                            slot count as the binding knows it */
    int64_t bytes;       /* with `transfer`: the bytes it copies (sw_move_bytes) */
    int no_result;       /* 1: make no result tensor (a binding that publishes its
                            own): on_commit gets NULL and sw_move_wait gives NULL
                            on success */
    void *profile_tag;   /* handed back untouched in this move's profiling
                            events (sw_move_event.tag): a binding's per-move
                            record; the core never reads it */
    sw_move_profile_fn profile_tag_hook; /* the subscriber the tag is for
                            (the others get NULL); NULL: every one */
    int guard_held;      /* 1: the calling thread holds, for the whole call,
                            the lock commit_enter takes (a Python binding:
                            the GIL; a callback of the caller's may let it
                            go meanwhile if it holds it again when it
                            returns), and no other thread calls fork() while
                            it is held (CPython's os.fork holds the GIL).
                            Then a commit the core runs on this thread
                            before the call returns calls neither
                            commit_enter nor commit_leave, and a small move
                            run here checks, copies and commits in one lock
                            round (see "Where the transfer runs"). A commit
                            on another thread still calls both. */
    sw_move_commit_check_fn commit_check; /* may be NULL; gets `user` */
    /* Run just before and just after a transfer the core runs on the
     * thread that called sw_move_async (a move run on its caller: "Where
     * the transfer runs"), with no core lock held, never for one run on
     * the pool; both get `user`, both or neither set. A binding that must
     * not hold its own lock while a transfer may wait (a Python binding's
     * GIL around a block device's I/O) lets it go in the first and takes
     * it back in the second, and keeps it across the rest of the move:
     * its validation and commit take no lock that waits for I/O. */
    sw_move_commit_guard_fn transfer_enter;
    sw_move_commit_guard_fn transfer_leave;
} sw_move_options;

/* ---- validation ------------------------------------------------------------
 *
 * Which row of the table at the top of this file refused a move, in the
 * table's order: sw_move_async, sw_move_span_async and sw_move_check put
 * it in err->detail (status.h) and sw_move_check in *refusal too. A binding
 * maps it to its own error (an exception type and message) in one table
 * and never re-checks the rows itself. */
typedef enum sw_move_refusal {
    SW_MOVE_ACCEPTED = 0,
    SW_MOVE_NO_SOURCE = 1,             /* row 1: no tensor (or source carrier) */
    SW_MOVE_SOURCE_RELEASED = 2,       /* row 2 */
    SW_MOVE_SOURCE_OWNED = 3,          /* row 3: owned, no owner access here */
    SW_MOVE_SOURCE_PENDING = 4,        /* row 3: in another move */
    SW_MOVE_SOURCE_STATE_ONLY = 5,     /* a STATE_ONLY source, no supplied transfer */
    SW_MOVE_NO_DESTINATION = 6,        /* row 4 */
    SW_MOVE_SAME_CARRIER = 7,          /* row 5 */
    SW_MOVE_DESTINATION_STATE_ONLY = 8, /* a STATE_ONLY dst, no supplied transfer */
    SW_MOVE_DESTINATION_RELEASED = 9,  /* row 6 */
    SW_MOVE_DESTINATION_PENDING = 10,  /* row 7: in a move (even one whose
                                          transfer this thread runs) */
    SW_MOVE_DESTINATION_OWNED = 11,    /* row 7: owned, no owner access here */
    SW_MOVE_DESTINATION_IMMUTABLE = 12, /* row 7: intrinsically immutable */
    SW_MOVE_DTYPE_MISMATCH = 13,       /* row 8 */
    SW_MOVE_ROUTE_REFUSED = 14,        /* row 9: TiledEvictable or block device pins */
    SW_MOVE_TOO_SMALL = 15,            /* row 10 */
    SW_MOVE_GROWTH_FAILED = 16         /* after row 10: growing the empty
                                          destination failed (its file system's
                                          error, an impossible file size);
                                          nothing changed, as for a row */
} sw_move_refusal;

/* What sw_move_check is asked, and what a binding knows that the core
 * does not. The core holds only the state of a STATE_ONLY carrier
 * (carrier.h); a binding answers its dtype, mutability and size from its
 * own hooks first (running whatever user code that takes) and hands the
 * answers here, so the rows then run with no call out of the core. A row
 * about a STATE_ONLY carrier whose answer is not given is skipped. */
enum {
    SW_MOVE_CHECK_SUPPLIED = 1u << 0,   /* the caller supplies the transfer
                                           (options.transfer): STATE_ONLY
                                           carriers are allowed */
    SW_MOVE_CHECK_OWN_ROUTE = 1u << 1,  /* skip row 9: the caller chooses and
                                           pins routes itself */
    SW_MOVE_CHECK_DTYPE = 1u << 2,      /* `dtype` is the values' dtype
                                           (else the source carrier's) */
    SW_MOVE_CHECK_DST_DTYPE = 1u << 3,  /* `dst_dtype` is set */
    SW_MOVE_CHECK_DST_MUTABILITY = 1u << 4, /* `dst_immutable` is set */
    SW_MOVE_CHECK_DST_SIZE = 1u << 5    /* `dst_slots` and `dst_grows` are set */
};

typedef struct sw_move_check_args {
    int64_t cosize;     /* the moved layout's cosize (row 10) */
    unsigned flags;     /* SW_MOVE_CHECK_* */
    sw_dtype dtype;     /* the values' dtype (SW_MOVE_CHECK_DTYPE) */
    sw_dtype dst_dtype; /* a STATE_ONLY destination's dtype */
    int dst_immutable;  /* 1: a STATE_ONLY destination is intrinsically immutable */
    int64_t dst_slots;  /* a STATE_ONLY destination's slot count */
    int dst_grows;      /* 1: that destination can allocate while empty */
} sw_move_check_args;

/* Rows 2-10 of the table for a move of a span with `args->cosize` slots
 * from `src` into `dst` (`dst` may be NULL or `src`: rows 4 and 5), in the
 * table's order, in one lock round on the pair; nothing changes. SW_OK
 * with *refusal = SW_MOVE_ACCEPTED and *grows = 1 when the move would grow
 * an empty destination (else 0); otherwise the row's status with `err`
 * filled and its row in *refusal and err->detail. A NULL `src` is row 1.
 * `grows` may be NULL. The answer is a snapshot: another thread may
 * change either carrier right after, so sw_move_async checks again when
 * it marks them pending. Thread-safe; does not block (beyond the
 * carriers' mutexes). */
SW_API sw_status sw_move_check(sw_carrier *src, sw_carrier *dst, const sw_move_check_args *args,
                               sw_move_refusal *refusal, int *grows, sw_error *err);

/* See the top of this file. `options` may be NULL. */
SW_API sw_status sw_move_async(sw_tensor *t, sw_carrier *dst, const sw_move_options *options,
                               sw_move_handle **out, sw_error *err);
/* sw_move_async for the span (`src`, `offset`, `layout`) without a tensor
 * handle, for a STATE_ONLY source (on which no tensor can be made). The
 * same validation, with `src` in the tensor's place; `layout` is copied. A
 * STATE_ONLY carrier on either side needs `options->transfer`, else
 * SW_ENOTSUP before any change. A result on a STATE_ONLY destination is a
 * handle only: the binding reaches its slots. */
SW_API sw_status sw_move_span_async(sw_carrier *src, int64_t offset, const sw_layout *layout,
                                    sw_carrier *dst, const sw_move_options *options,
                                    sw_move_handle **out, sw_error *err);
/* A supplied transfer finished (see "transfers a binding supplies"):
 * SW_OK, or its failure (`err` copied; NULL: a generic message for
 * `status`). Exactly once per such move, from any thread; no effect on a
 * move without a supplied transfer or on a second call. */
SW_API void sw_move_transfer_done(sw_move_handle *move, sw_status status, const sw_error *err);
/* The same, and the commit runs on the calling thread before this returns
 * (commit guard, on_commit and the COMPLETE event there) instead of on the
 * completion thread: for a binding thread that holds the binding's lock
 * already (a Python worker holding the GIL), which saves a hand-off of
 * that lock per move. No core lock may be held; not from a commit hook. */
SW_API void sw_move_transfer_done_here(sw_move_handle *move, sw_status status,
                                       const sw_error *err);
/* Drains and exit stop waiting for this move (its supplied transfer may
 * never report); it still commits once if it reports later. Idempotent;
 * no effect once it committed. */
SW_API void sw_move_abandon(sw_move_handle *move);

/* Block until the move committed; then the result (new reference) or the
 * terminal error. `result` may be NULL. */
SW_API sw_status sw_move_wait(sw_move_handle *m, sw_tensor **result, sw_error *err);
/* Block until the move committed (1) or until `timeout_ns` passed (0;
 * < 0: no limit). A timeout changes nothing: the move keeps running and
 * the handle stays valid, so a caller may wait again, or in slices to
 * look for its own interruptions between them (a binding checking its
 * signals). On 1, sw_move_wait returns the outcome without blocking. Any
 * number of threads may wait on one handle. In a forked child it ends
 * the inherited moves first, as sw_move_wait does. */
SW_API int sw_move_wait_for(sw_move_handle *m, int64_t timeout_ns);
/* sw_move_wait_for for a caller with no time limit that waits in slices
 * (a binding checking its signals between them): meanwhile the calling
 * thread runs parts of the move's copy that nobody has started (see
 * "Where the transfer runs"), so a slice may end later than slice_ns, by
 * at most one part (32 MiB of copying). Returns as sw_move_wait_for. */
SW_API int sw_move_wait_helping(sw_move_handle *m, int64_t slice_ns);
/* How much of the move's data its transfer has copied so far: *done of
 * *total bytes (sw_move_bytes). It grows as the transfer goes (chunk by
 * chunk for large copies; some routes jump from 0 to the total) and is
 * the total once the move succeeded. Counted in options->progress when
 * the caller gave one, else in the handle. Either pointer may be NULL;
 * thread-safe, never blocks. */
SW_API void sw_move_progress(sw_move_handle *m, int64_t *done, int64_t *total);
/* The terminal error of a failed move, from its on_commit on (where
 * sw_move_wait would block) and after sw_move_wait reported it; NULL for a
 * move that succeeded or has not committed yet. Owned by the handle. */
SW_API const sw_error *sw_move_error(sw_move_handle *m);
/* 1 once the move committed (wait would not block). */
SW_API int sw_move_done(sw_move_handle *m);
SW_API sw_move_route sw_move_route_of(sw_move_handle *m);
/* Bytes the transfer copies (physical span for bulk, logical values for
 * the fallback). */
SW_API int64_t sw_move_bytes(sw_move_handle *m);
SW_API sw_move_handle *sw_move_ref(sw_move_handle *m);
SW_API void sw_move_unref(sw_move_handle *m);

/* The route sw_move_async takes for a move from `src`'s class to `dst`'s
 * (the exact pair of ops tables). Thread-safe. */
SW_API sw_move_route sw_move_route_for(const sw_carrier *src, const sw_carrier *dst);

/* Test aid: while `on`, moves are validated, marked pending and counted in
 * flight as usual, but none starts its transfer (not even one that would
 * run on its caller); 0 hands the held ones to the pool in the order they
 * came. sw_move_drain waits for held moves too (turn holding off first);
 * exit's drain turns it off itself. Thread-safe. */
SW_API void sw_move_hold(int on);

/* In a forked child: end every move inherited from the parent (see "Fork"
 * at the top of this file) on the calling thread, which must hold no
 * core lock (a binding's own lock it may hold: the commit guard must be
 * re-entrant). No effect in a process that did not fork or when done
 * already. */
SW_API void sw_move_end_inherited(void);
/* 1 when the move failed because it was inherited by a forked child and
 * ended there (sw_move_end_inherited); 0 otherwise. */
SW_API int sw_move_ended_by_fork(sw_move_handle *m);

/* sw_move_async (with caller_waits) then sw_move_wait. */
SW_API sw_status sw_move(sw_tensor *t, sw_carrier *dst, sw_tensor **result, sw_error *err);

/* Block until every move submitted so far has committed and dropped the
 * references it held, and every piece of TiledEvictable asynchronous work
 * too (one engine: sw_tiled_evictable_drain is this same drain), and every
 * hold a binding took for work of its own (engine.h). Exit does
 * this on its own (see the top of this file); call it where you need the
 * work done earlier. */
SW_API void sw_move_drain(void);
/* sw_move_drain for at most `timeout_ns` (< 0: no bound): 1 when no move
 * (and no TiledEvictable work) is left in flight, 0 when the time ran
 * out. */
SW_API int sw_move_drain_for(int64_t timeout_ns);

/* A route run here: the transfer of a move without the move. For a
 * binding whose own operation objects copy values (the Python API's
 * MoveOperation._copy) and for copies between tiers the caller already
 * protects, this copies the span (`src`, `offset`, `layout`) into slots
 * [0, cosize) of `dst` on the calling thread: no handle, no growth, no
 * commit, no source release, no profiling event, nothing on the pool.
 *
 * The route is the exact pair's (route.h, the core's own table: a binding
 * route registered on the pair is not run here): CPU <-> BlockDeviceCarrier
 * through the device (durable before a write returns; a failure faults the
 * device), otherwise a copy through both carriers' storage (CPU, Generic,
 * FileBacked: the physical span for a bulk pair, the logical values for
 * the others), else slot by slot through the carriers' ops. The caller
 * may ask for one copy instead of the pair's where both carriers expose
 * storage (a block device's own transfer ignores these):
 *   SW_MOVE_HERE_SPAN    the physical span (cosize slots, holes included)
 *   SW_MOVE_HERE_VALUES  only the layout's values
 * and with SW_MOVE_HERE_MARK it protects the pair itself: either carrier
 * pending in a move is refused, and both are marked pending (source,
 * destination) for the copy and unmarked after, whatever its outcome.
 * Without it the caller holds both carriers still (a move it runs the
 * transfer of has them pending already).
 *
 * Refusals, each before anything changes, err->detail naming the row of
 * sw_move_refusal: a NULL carrier or layout (SW_ETYPE), the same carrier
 * on both sides (SW_EINVAL), a released carrier (SW_ESTATE), with
 * SW_MOVE_HERE_MARK a pending one (SW_ESTATE), dtypes whose slots differ in
 * width (SW_ETYPE),
 * row 9's pins and a faulted device (as sw_move_async), a STATE_ONLY
 * carrier (SW_ENOTSUP: the binding reaches its slots), SW_MOVE_HERE_SPAN
 * or _VALUES without storage on both sides (SW_ENOTSUP, row 9), a span
 * past the source's end (SW_EINVAL, detail 0), a destination smaller than
 * the cosize (SW_EINVAL, row 10), a layout with more modes than a copy
 * takes (SW_EINVAL, detail 0). A failure of the copy itself (I/O, an
 * injected fault) comes back as is; the destination's values are then
 * unspecified, the source unchanged.
 *
 * Threads: thread-safe as any copy between carriers the caller protects;
 * it takes each carrier's lock only to check and mark, never during the
 * copy, and never calls a binding back but through a carrier's own slot
 * ops (a trampoline takes its own lock), so a binding may let its own
 * lock go around it. It blocks for the copy (and on a block device's lock
 * while another thread writes to that device). */
enum {
    SW_MOVE_HERE_MARK = 1u << 0,
    SW_MOVE_HERE_SPAN = 1u << 1,
    SW_MOVE_HERE_VALUES = 1u << 2
};
SW_API sw_status sw_move_transfer_here(const sw_tensor *t, sw_carrier *dst, unsigned flags,
                                       sw_error *err);
/* The same for a span without a tensor handle. */
SW_API sw_status sw_move_transfer_span_here(sw_carrier *src, int64_t offset,
                                            const sw_layout *layout, sw_carrier *dst,
                                            unsigned flags, sw_error *err);

/* Profiling hooks: subscribers of every move's events, process-wide.
 * SW_MOVE_EVENT_SUBMIT on the initiating thread once the move is
 * submitted, SW_MOVE_EVENT_COMPLETE on the thread that commits it (the
 * completion thread, or the caller for a move that ran there), inside
 * commit_enter/commit_leave, just before on_commit and before waiters
 * wake; each subscriber in the order it subscribed. A move observes the
 * subscribers of the moment it was submitted, for both its events (one
 * removed meanwhile still gets its COMPLETE, so `user` must stay valid
 * until the moves submitted while it was subscribed are done:
 * sw_move_drain() waits for them). Several may watch at once
 * (a C host and a binding's profiler): at most
 * SW_MOVE_PROFILE_HOOKS_MAX through sw_move_add_profile_hook (SW_ERANGE
 * past it; SW_EEXIST for a (fn, user) pair subscribed already, SW_ETYPE
 * for a NULL fn), removed with sw_move_remove_profile_hook (SW_EINVAL when
 * not subscribed). sw_move_set_profile_hook keeps one subscriber of its
 * own beside them: each call unsubscribes the one it set before (however
 * it was subscribed) and subscribes (fn, user), NULL only removing; it
 * always finds room. The tag: each event carries the move's
 * sw_move_options.profile_tag, so a binding finds its per-move record;
 * when the move named its owner (profile_tag_hook), only a subscriber
 * with that function gets the tag, the others NULL. A hook must not
 * subscribe or unsubscribe, nor wait for a move. Thread-safe: subscribing
 * takes one short lock; a move with no subscriber pays one atomic load. */
#define SW_MOVE_PROFILE_HOOKS_MAX 8

typedef enum sw_move_event_kind {
    SW_MOVE_EVENT_SUBMIT = 1,
    SW_MOVE_EVENT_COMPLETE = 2
} sw_move_event_kind;

typedef struct sw_move_event {
    sw_move_event_kind kind;
    sw_move_handle *move;
    sw_move_route route;
    int64_t bytes;
    uint64_t submit_ns;   /* sw_clock_ns() at submission */
    uint64_t complete_ns; /* at commit; 0 for SUBMIT */
    sw_status status;     /* terminal outcome; SW_OK for SUBMIT */
    void *tag;            /* the move's sw_move_options.profile_tag, or NULL */
} sw_move_event;

SW_API sw_status sw_move_add_profile_hook(sw_move_profile_fn fn, void *user, sw_error *err);
SW_API sw_status sw_move_remove_profile_hook(sw_move_profile_fn fn, void *user, sw_error *err);
SW_API void sw_move_set_profile_hook(sw_move_profile_fn fn, void *user);

#ifdef __cplusplus
}
#endif

#endif
