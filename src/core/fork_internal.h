/* Each part of the core's fork handling, as the one fork coordinator
 * (fork.c) calls it (never installed). Every function runs inside fork():
 * a prepare step on the forking thread before the fork, a parent step
 * after it in the parent, a child step in the child, where the forking
 * thread is the only thread. fork.c's comment says in which order, and
 * why. No step calls into a binding. */
#ifndef SW_FORK_INTERNAL_H
#define SW_FORK_INTERNAL_H

/* TiledEvictable's tracked work (tiled_evictable_async.c): prepare takes
 * the tracking lock and every tracked TiledEvictable's lock; the child
 * ends the work of the threads it lacks, through the fresh engine. */
void sw_te_fork_prepare(void);
void sw_te_fork_parent(void);
void sw_te_fork_child(void);
/* The move engine (move.c): nothing taken before the fork; the child gets
 * a fresh engine and sets the parent's moves aside (move.h, "Fork"). */
void sw_move_fork_child(void);
/* Evictable (evictable.c): its registry and every live Evictable's lock. */
void sw_evictable_fork_prepare(void);
void sw_evictable_fork_parent(void);
void sw_evictable_fork_child(void);
/* A binding's copies between two carriers (carrier_pair.c): prepare takes
 * the pair list's lock (taken before carriers' locks); the child ends the
 * pairs of threads it lacks. */
void sw_carrier_pair_fork_prepare(void);
void sw_carrier_pair_fork_parent(void);
void sw_carrier_pair_fork_child(void);
/* Block devices (blockdev.c): the list of open devices; the child makes
 * every device's lock fresh. */
void sw_blockdev_fork_prepare(void);
void sw_blockdev_fork_parent(void);
void sw_blockdev_fork_child(void);
/* The file store (filestore.c): the session directory's lock, and the
 * reaper's queue (emptied before the fork). */
void sw_filestore_fork_prepare(void);
void sw_filestore_fork_parent(void);
void sw_filestore_fork_child(void);
void sw_filestore_reap_fork_prepare(void);
void sw_filestore_reap_fork_parent(void);
void sw_filestore_reap_fork_child(void);
/* The parallel helpers (parallel.c): the child starts its own. */
void sw_parallel_fork_child(void);
/* The copy partner (copy_partner.c): the child starts its own. */
void sw_copy_partner_fork_child(void);
/* The route registry (route.c). */
void sw_route_fork_prepare(void);
void sw_route_fork_parent(void);
void sw_route_fork_child(void);
/* The allocator (alloc.c): its cache of large blocks, and the fault table
 * of fault-injection builds. */
void sw_alloc_fork_prepare(void);
void sw_alloc_fork_parent(void);
void sw_alloc_fork_child(void);
/* Pause points (fault_pause.c): the child has none of the paused threads. */
void sw_fault_pause_fork_child(void);
/* The tensor handle pool (tensor_pool.c). */
void sw_tensor_pool_fork_prepare(void);
void sw_tensor_pool_fork_parent(void);
void sw_tensor_pool_fork_child(void);

/* Every file above names this object, so that a program linking the static
 * core library with any of them links fork.c, whose constructor installs
 * the handlers (an archive member nothing names is left out). */
extern const char sw_fork_coordinator;
#define SW_FORK_LINKED \
    __attribute__((used)) static const char *const sw_fork_linked_ = &sw_fork_coordinator

#endif
