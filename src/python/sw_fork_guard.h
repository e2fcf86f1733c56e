/* Synchronous binding work that marks carriers (pending, owner access) on
 * the calling thread and clears the marks when it returns: a tile copy the
 * binding starts for a TiledEvictable. When another thread forks
 * meanwhile, the child has no thread to return from that work; the fork
 * hook (_after_fork_in_child) calls each guard's `end` there, so the
 * child's carriers are not marked forever. (An Evictable's transitions and
 * the TiledEvictable's own marks and pins are ended by the core inside
 * fork(): strideweave/evictable.h and tiled_evictable.h, "Fork".)
 * All calls with the GIL held. */
#ifndef SW_FORK_GUARD_H
#define SW_FORK_GUARD_H

#include <Python.h>

typedef struct sw_fork_guard sw_fork_guard;
struct sw_fork_guard {
    /* In a forked child, GIL held: undo the marks the work set. The guard
     * is already unlinked; the work's thread does not exist here. */
    void (*end)(sw_fork_guard *g);
    unsigned long thread;
    sw_fork_guard *prev, *next;
};

/* Track `g` (usually on the caller's stack) until sw_fork_guard_leave. */
void sw_fork_guard_enter(sw_fork_guard *g, void (*end)(sw_fork_guard *g));
void sw_fork_guard_leave(sw_fork_guard *g);
/* In a forked child: end every guard of a thread other than this one. */
void sw_fork_guards_end_inherited(void);

/* Inherited asynchronous work that files above the movement code own (the
 * residency requests of TiledEvictables): each registers how to end it at
 * module init; in a forked child the fork hook calls sw_fork_end_inherited_work,
 * which runs them in registration order. -1 with SystemError when full. */
int sw_fork_register_inherited_end(void (*end)(void));
void sw_fork_end_inherited_work(void);
/* Drop the owner and transfer access `thread` held on `carrier` (NULL:
 * nothing). */
void sw_fork_guard_drop_access(PyObject *carrier, unsigned long thread);

#endif
