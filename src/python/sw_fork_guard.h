/* Inherited asynchronous work that files above the movement code own (the
 * residency requests of TiledEvictables): each registers how to end it at
 * module init; in a forked child the fork hook (py_move.c,
 * _after_fork_in_child) calls sw_py_fork_end_inherited_work, which runs them in
 * registration order. All calls with the GIL held. (A tile copy another
 * thread was running synchronously is the core's to end, inside fork():
 * strideweave/binding.h, sw_carrier_pair_begin; an Evictable's transitions
 * and the TiledEvictable's own marks and pins too: strideweave/evictable.h
 * and tiled_evictable.h, "Fork".) */
#ifndef SW_FORK_GUARD_H
#define SW_FORK_GUARD_H

#include <Python.h>

/* -1 with SystemError when full. */
int sw_py_fork_register_inherited_end(void (*end)(void));
void sw_py_fork_end_inherited_work(void);

#endif
