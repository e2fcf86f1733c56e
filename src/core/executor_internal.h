/* The pool's managed blocking (executor.c), for the core's own jobs that
 * wait on a device for a while (blockdev.c's flushes). Never installed. */
#ifndef SW_EXECUTOR_INTERNAL_H
#define SW_EXECUTOR_INTERNAL_H

/* Threads a pool may start beyond its bound while jobs are blocked. */
#define SW_EXECUTOR_BLOCKED_EXTRA 16

/* A job on a pool thread is about to block (an fdatasync, or the wait for
 * one another thread runs): until sw_executor_blocking_end, it does not
 * count against the pool's bound, so another job may run meanwhile, on a
 * thread started for it if none is free (up to SW_EXECUTOR_BLOCKED_EXTRA
 * more than the bound; they stay for later jobs, and at most the bound's
 * number of jobs run unblocked at once). Why: durable writes in flight wait
 * for fdatasync, and writers waiting together share one (blockdev.c); with
 * as many threads as CPUs, two writers could not meet. Off the pool's
 * threads both calls do nothing. Calls pair up and do not nest. */
void sw_executor_blocking_begin(void);
void sw_executor_blocking_end(void);

/* 1 on a pool thread (any executor's), else 0: such a thread leaves the
 * copy partner to its callers (copy_partner_internal.h), since the pool
 * already keeps every CPU busy when it runs. */
int sw_executor_on_worker(void);

#endif
