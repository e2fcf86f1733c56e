/* Parts of one piece of work run side by side on a few helper threads.
 *
 * sw_parallel_run(n, fn, ctx) calls fn(ctx, i) once for every i in
 * [0, n) and returns when all have returned. The calling thread runs parts
 * itself too, so the call finishes even when every helper is busy with
 * another caller's parts (no caller ever waits for a part nobody runs).
 * Helpers are plain C threads started on first use (at most
 * SW_PARALLEL_MAX_HELPERS, fewer on small machines, all signals blocked),
 * idle on a condition variable, and are forgotten in a forked child (it
 * starts its own). `fn` must be pure C, safe without the GIL.
 *
 * Ownership: `fn` and `ctx` are borrowed for the call; nothing of them is
 * kept once it returns. The helper threads are the library's own (never
 * joined, nothing for a caller to free).
 * Threads: both calls are thread-safe. Any number of threads may call
 * sw_parallel_run at once (their parts share the helpers); `fn` runs on
 * several threads at once, the caller's among them, one call per part, so
 * it must be safe alongside itself for different parts. */
#ifndef STRIDEWEAVE_PARALLEL_H
#define STRIDEWEAVE_PARALLEL_H

#include "strideweave/export.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SW_PARALLEL_MAX_HELPERS 7

/* How many parts are worth making: helpers that can start, plus the
 * caller (at least 1). */
SW_API int sw_parallel_width(void);

/* Run fn(ctx, 0) .. fn(ctx, n - 1), some on helper threads. n <= 1, or no
 * helper at all: everything on the caller. */
SW_API void sw_parallel_run(int n, void (*fn)(void *ctx, int part), void *ctx);

#ifdef __cplusplus
}
#endif

#endif
