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
 *   9. a BlockDeviceCarrier on either side and the    SW_ENOTSUP
 *      other side not CPU (block_device.h),
 *      or its device faulted                         SW_ESTATE
 *  10. dst is smaller than the layout's cosize and   SW_EINVAL
 *      cannot allocate
 *
 * Then it resolves the route by the exact pair of ops tables (CPU <->
 * FileBacked and CPU <-> BlockDeviceCarrier are bulk routes copying the
 * physical span; every other pair is the elementwise fallback: a strided copy when
 * both carriers expose storage, else slot by slot through the ops), grows
 * an empty allocatable destination to exactly the cosize, marks both
 * carriers pending and submits the transfer to the core's pool (started
 * lazily on first use). A failure during these steps undoes the growth
 * and the marks. From submission on, every failure is the move's terminal
 * failure, reported by sw_move_wait.
 *
 * Where the transfer runs: on the core's pool, except a transfer between
 * carriers of the built-in storage classes (CPU, Generic, FileBacked)
 * whose physical span is small: up to 64 KiB it runs on the calling
 * thread and commits there before sw_move_async returns (a pool round
 * trip would cost more than the copy), up to 16 MiB when the caller waits
 * for it at once (sw_move, or caller_waits in the options). The rules are
 * the same either way (pending marks, one commit, hooks, profiling
 * events). A large span copy is cut into parts run side by side on the
 * helper threads of parallel.h: all of them when the caller waits, all
 * but one otherwise (the caller's own thread keeps a CPU).
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
 * transfer runs"); sw_move_wait and sw_move and sw_move_drain block.
 *
 * Process exit: a program may return from main or call exit() with moves
 * in flight (handles dropped or not). Exit then waits for them, like
 * sw_move_drain: each one finishes and commits (or fails) as it would
 * have, so no transfer is cut short, a move into a BlockDeviceCarrier
 * is durable on the device (it commits only then), nothing crashes, and
 * the session directory of FileBacked carriers is removed after the
 * moves into its files finished. From the moment exit begins,
 * sw_move_async fails SW_ESTATE ("the process is exiting"), also in exit
 * handlers that run later. The wait is registered with atexit() when the
 * first move starts. Exit called from an on_commit callback, the
 * profiling hook or a carrier's transfer (the engine's own threads) does
 * not wait, since that move cannot finish first. Not covered: _exit(),
 * quick_exit(), a fatal signal (a move into a BlockDeviceCarrier that was
 * cut short never committed; what it wrote is not part of any carrier),
 * and a move whose transfer never ends (exit then never ends either:
 * open your gates first). After fork() the child waits only for its own
 * moves. */
#ifndef STRIDEWEAVE_MOVE_H
#define STRIDEWEAVE_MOVE_H

#include "strideweave/export.h"

#include <stdint.h>

#include "strideweave/carrier.h"
#include "strideweave/status.h"
#include "strideweave/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sw_move_handle sw_move_handle;

typedef enum sw_move_route {
    SW_ROUTE_BULK = 1,        /* physical span through host/file endpoints */
    SW_ROUTE_ELEMENTWISE = 2  /* logical values (strided copy or slot by slot) */
} sw_move_route;

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
 * storage is never freed under such a reader. Both get `user`. */
typedef void (*sw_move_commit_guard_fn)(void *user);

typedef struct sw_move_options {
    sw_move_commit_fn on_commit; /* may be NULL */
    void *user;
    sw_move_commit_guard_fn commit_enter; /* may be NULL (then leave is not called) */
    sw_move_commit_guard_fn commit_leave; /* may be NULL */
    int64_t *progress;   /* NULL, or a byte counter the transfer adds to atomically
                            (transfer.h), sw_move_bytes in all on success */
    int caller_waits;    /* 1: the caller waits for the move at once (as sw_move
                            does): see "Where the transfer runs" above */
    int elementwise;     /* 1: copy the logical values only, even between a pair
                            with a bulk route (sw_move_route_for) */
} sw_move_options;

/* See the top of this file. `options` may be NULL. */
SW_API sw_status sw_move_async(sw_tensor *t, sw_carrier *dst, const sw_move_options *options,
                               sw_move_handle **out, sw_error *err);
/* Block until the move committed; then the result (new reference) or the
 * terminal error. `result` may be NULL. */
SW_API sw_status sw_move_wait(sw_move_handle *m, sw_tensor **result, sw_error *err);
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

/* sw_move_async (with caller_waits) then sw_move_wait. */
SW_API sw_status sw_move(sw_tensor *t, sw_carrier *dst, sw_tensor **result, sw_error *err);

/* Block until every move submitted so far has committed and dropped the
 * references it held. Exit does this on its own (see the top of this
 * file); call it where you need the moves done earlier. */
SW_API void sw_move_drain(void);

/* Process-wide profiling hook: SW_MOVE_EVENT_SUBMIT on the initiating
 * thread once the move is submitted, SW_MOVE_EVENT_COMPLETE on the
 * completion thread at commit (before waiters wake). One hook at a time;
 * setting NULL removes it. The hook must not call sw_move_set_profile_hook
 * or wait for a move. Thread-safe: a move observes the hook set when it was
 * submitted. */
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
} sw_move_event;

typedef void (*sw_move_profile_fn)(const sw_move_event *event, void *user);
SW_API void sw_move_set_profile_hook(sw_move_profile_fn fn, void *user);

#ifdef __cplusplus
}
#endif

#endif
