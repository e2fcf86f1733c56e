/* Work a binding runs outside the core, counted by the core's one engine.
 * Binding API, like binding.h (which includes this header): installed, but
 * not included by strideweave.h, since a C program's own threads need no
 * core drain to wait for them.
 *
 * A binding that does work on its own threads which the core's drains and
 * process exit should wait for (a copy written in the binding's language,
 * a wait for a transfer provider's completion) takes a hold for each
 * piece, and releases it when that piece let go of everything:
 *
 *   uint64_t h;
 *   if (sw_engine_hold(&h, &err) != SW_OK) ... refuse the work ...
 *   ... hand the work to a thread; when it is done: sw_engine_release(h);
 *
 * A held piece counts in flight like a move: sw_move_drain,
 * sw_move_drain_for, sw_tiled_evictable_drain and the exit drain (move.h,
 * "Process exit") wait for it. Such work may run code that never returns
 * (user code): sw_engine_drain_held waits for held work only, at most a
 * given time and as long as a `stop` callback says go on, and
 * sw_engine_abandon_held then lets every drain stop waiting for the holds
 * taken so far (their later releases change nothing).
 *
 * Fork: a forked child has none of the parent's threads; the holds the
 * parent had count nothing there, and their releases in the child change
 * nothing. Every function is thread-safe and takes no lock a binding
 * holds; none may be called from inside fork() handlers. */
#ifndef STRIDEWEAVE_ENGINE_H
#define STRIDEWEAVE_ENGINE_H

#include "strideweave/export.h"

#include <stdint.h>

#include "strideweave/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Count one piece of work in flight; `*token` is for its release. Fails
 * SW_ESTATE ("the process is exiting") once exit began, counting nothing.
 * The first hold registers the exit drain (atexit), as the first move
 * does. */
SW_API sw_status sw_engine_hold(uint64_t *token, sw_error *err);
/* The piece of `token` is done: drains may return. Exactly once per hold;
 * no effect after sw_engine_abandon_held gave it up, or in a forked child
 * for a parent's hold. */
SW_API void sw_engine_release(uint64_t token);
/* Holds counted now (not released, not abandoned). */
SW_API int64_t sw_engine_held(void);
/* Block until no hold is counted, for at most `timeout_ns` (< 0: no
 * bound). When `stop` is not NULL, it is called on the waiting thread
 * about every 50 ms with `user` (no core lock held) and the wait ends when
 * it returns non-zero. Returns 1 once no hold is counted, 0 when the time
 * ran out, -1 when `stop` ended the wait. Moves and TiledEvictable work
 * are not waited for here (sw_move_drain waits for everything). */
SW_API int sw_engine_drain_held(int64_t timeout_ns, int (*stop)(void *user), void *user);
/* Give up on every hold counted now: drains stop waiting for them and
 * their releases change nothing. Returns how many were given up. */
SW_API int64_t sw_engine_abandon_held(void);

#ifdef __cplusplus
}
#endif

#endif
