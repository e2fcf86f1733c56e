/* The core's one asynchronous engine: one pool of workers, one completion
 * thread that commits finished work, one count of work in flight (what
 * sw_move_drain and the exit drain wait for), one fork step (fork.c).
 * The move engine (move.c) owns it; TiledEvictable's asynchronous work
 * (tiled_evictable_async.c) runs on it as engine jobs. */
#ifndef STRIDEWEAVE_ENGINE_INTERNAL_H
#define STRIDEWEAVE_ENGINE_INTERNAL_H

#include "strideweave/executor.h"
#include "strideweave/status.h"

/* Work other than a move on the engine. */
typedef struct sw_engine_job sw_engine_job;
struct sw_engine_job {
    sw_job job;                       /* first; sw_engine_submit sets job.run */
    void (*run)(sw_engine_job *j);    /* once, on a pool thread, no core lock */
    void (*commit)(sw_engine_job *j); /* then once, on the completion thread */
    unsigned long generation;         /* set by sw_engine_submit */
};

/* Start the engine now (lazily, once), so that a caller can refuse before
 * it changes anything: SW_ESTATE once process exit began, the start's own
 * failure otherwise. `who` begins the messages. */
sw_status sw_engine_ready(const char *who, sw_error *err);
/* Count `j` in flight and queue it (`run` and `commit` set). On failure
 * (as sw_engine_ready, or the pool's refusal) nothing is counted or
 * queued. */
sw_status sw_engine_submit(sw_engine_job *j, const char *who, sw_error *err);
/* Once the commit of a job submitted in `generation` let go of everything:
 * uncount it (a drain may return). Read the generation before the job can
 * be freed. No effect for a parent's job in a forked child. */
void sw_engine_uncount(unsigned long generation);
/* Add `delta` to the in-flight count every drain waits for (a binding's
 * holds, engine_hold.c); the count reaching 0 wakes the drains. */
void sw_engine_count(long delta);
/* 1 once process exit began (new work is refused). */
int sw_engine_exiting(void);
/* engine_hold.c's part of the fork child handler: the parent's holds
 * count nothing in the child. */
void sw_engine_held_after_fork(void);
/* The exit drain (atexit), registered once. */
void sw_engine_install_hooks(void);

#endif
