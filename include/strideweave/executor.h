/* A bounded worker pool with a completion queue, and one-shot completions.
 *
 * The shape is libuv's uv_queue_work: a job's `run` callback executes on a
 * pool thread and must be pure C (no Python, no GIL, nothing shared without
 * its own lock); when it returns, the job is pushed onto the executor's
 * completion queue, and whoever owns publication (the core's completion
 * thread, for moves and TiledEvictable work alike) pops it with
 * sw_executor_next_completed and commits it.
 *
 * Threads start lazily on the first submit, up to the bound given at
 * creation; the core's own jobs that wait on a device (a block device's
 * fdatasync) let a few more threads start meanwhile, so that queued jobs
 * keep going, while no more than the bound's number of jobs run without
 * waiting. Jobs start in submission order. The executor never frees a
 * job: ownership goes back to the caller of sw_executor_next_completed.
 *
 * Ownership: sw_executor is single-owner, not refcounted: whoever creates it
 * destroys it, once, after sw_executor_shutdown, when no thread can reach it
 * any more (the core keeps one process-wide pool for moves and never shares
 * the handle outside itself), so it has no _ref/_unref. sw_completion is
 * single-owner too: it is embedded in one handle (a move, an awaitable) that
 * frees it in its own teardown, after which no waiter or signaller may
 * remain; sharing across threads goes through that handle's own refcount.
 * Threads: submit, post_completed, next_completed, outstanding,
 * started_threads and shutdown are thread-safe; create and destroy are not.
 * Every sw_completion call but new/free and reset_after_fork is thread-safe. */
#ifndef STRIDEWEAVE_EXECUTOR_H
#define STRIDEWEAVE_EXECUTOR_H

#include "strideweave/export.h"

#include "strideweave/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Upper bound on pool threads. */
#define SW_EXECUTOR_MAX_THREADS 64
/* Environment variable naming the pool size when create gets nthreads <= 0. */
#define SW_EXECUTOR_THREADS_ENV "STRIDEWEAVE_NUM_THREADS"

typedef struct sw_job sw_job;
typedef void (*sw_job_fn)(sw_job *job);

/* Embed as the first member of a larger request struct. */
struct sw_job {
    sw_job_fn run;  /* set by the submitter; runs once on a pool thread */
    sw_job *next;   /* queue link, owned by the executor while queued */
};

typedef struct sw_executor sw_executor;

/* nthreads > 0: that many threads at most (clamped to
 * SW_EXECUTOR_MAX_THREADS). nthreads <= 0: SW_EXECUTOR_THREADS_ENV when it
 * holds an integer in [1, SW_EXECUTOR_MAX_THREADS], else min(4, online
 * CPUs), at least 1. No thread starts here. SW_ENOMEM on allocation
 * failure. */
SW_API sw_status sw_executor_create(int nthreads, sw_executor **out, sw_error *err);
/* The thread bound chosen at creation. */
SW_API int sw_executor_max_threads(const sw_executor *ex);
/* Threads started so far (0 until the first submit). */
SW_API int sw_executor_started_threads(sw_executor *ex);

/* Queue `job` (job->run must be set). Starts a thread when every started
 * thread is busy and the bound allows. SW_ESTATE after shutdown began;
 * SW_EIO (errno kept) when no thread runs at all and none can be started:
 * then the job is not queued. A failure to start an extra thread while
 * another is running is not an error. */
SW_API sw_status sw_executor_submit(sw_executor *ex, sw_job *job, sw_error *err);

/* Pop the oldest finished job. block != 0: wait until one finishes, or
 * return NULL once shutdown has begun and no finished job remains and no
 * queued or running job is left. block == 0: NULL when none is ready. */
SW_API sw_job *sw_executor_next_completed(sw_executor *ex, int block);

/* Put a job whose work finished outside the pool (a device or provider
 * completion another thread observed) straight onto the completion queue,
 * so the one popper commits it like any other job; `run` is not called.
 * SW_ESTATE after shutdown began (the poppers may already have left). */
SW_API sw_status sw_executor_post_completed(sw_executor *ex, sw_job *job, sw_error *err);

/* Jobs submitted and not yet popped from the completion queue. */
SW_API long sw_executor_outstanding(sw_executor *ex);

/* Refuse new submits, let queued and running jobs finish (they still reach
 * the completion queue), join every pool thread, and wake blocked
 * sw_executor_next_completed callers. Idempotent. */
SW_API void sw_executor_shutdown(sw_executor *ex);
/* Free the executor. Call after shutdown once no thread uses it. */
SW_API void sw_executor_destroy(sw_executor *ex);

/* ---- one-shot completion ------------------------------------------------ */

/* A flag that goes from "not done" to "done" once, with blocking waits:
 * the terminal state of an asynchronous handle. Thread-safe. */
typedef struct sw_completion sw_completion;

/* NULL on allocation failure (counted by sw_alloc_live_bytes). */
SW_API sw_completion *sw_completion_new(void);
SW_API void sw_completion_free(sw_completion *c);
/* Mark done and wake every waiter. Returns 1 for the call that completed
 * it, 0 for any later call. */
SW_API int sw_completion_signal(sw_completion *c);
SW_API int sw_completion_is_done(sw_completion *c);
/* Block until done. */
SW_API void sw_completion_wait(sw_completion *c);
/* Block until done or `timeout_ns` passed: 1 done, 0 timed out. */
SW_API int sw_completion_wait_for(sw_completion *c, long long timeout_ns);
/* In a forked child only: make the lock and condition usable again (a
 * parent thread may have held the lock at fork()); keeps the done flag. */
SW_API void sw_completion_reset_after_fork(sw_completion *c);

#ifdef __cplusplus
}
#endif

#endif
