/* The core's one set of fork handlers, and the order its parts run in.
 *
 * pthread_atfork runs prepare handlers in the reverse order of their
 * registration and parent/child handlers in that order; registered lazily
 * by each part of the core at its first use, their order was whatever
 * order the process first used the parts in. A child once hung that way:
 * the tensor pool's lock was still held in the child when the engine's
 * child handler freed tensor handles. So the core registers once, here,
 * and runs its parts from one table in one written order:
 *
 *   prepare, top to bottom: every part takes its locks, in the global lock
 *     order: a lock that is held while another is taken comes first
 *     (TiledEvictable and Evictable locks are held while carriers, files,
 *     routes and tensor handles are worked on), leaf locks (nothing is
 *     taken under them: the route registry, the allocator, the tensor pool)
 *     last. Taking them in that order cannot wait on a thread that waits
 *     for one this thread already holds.
 *   parent, bottom to top: each gives back what its prepare took, leaves
 *     first (the reverse of taking them).
 *   child, bottom to top: the leaves are made usable first, so that the
 *     higher parts' child work, which ends the work the child inherited
 *     from threads it does not have (an Evictable's transition, the moves,
 *     TiledEvictable's promotes and projections), may free tensor handles,
 *     allocate, resolve routes and reach files and devices.
 *
 * The move engine sits between TiledEvictable and Evictable: it takes
 * nothing before the fork (its locks are made fresh in the child), and its
 * child step gives the child a fresh engine and sets the parent's moves
 * aside before TiledEvictable's child step ends the inherited tile work on
 * that engine. TiledEvictable comes before Evictable because Evictable's
 * prepare gives up after about a second on a lock it cannot take, while
 * TiledEvictable's waits: taking the waiting kind first means a holder of
 * both kinds is never stuck behind the forking thread.
 *
 * No step calls into a binding (a binding's runtime is not ready inside
 * fork(): CPython, for one, still has its other threads' state until
 * os.fork() returns); what must run binding code waits until after fork
 * (sw_move_end_inherited, a binding's own after-fork hook).
 *
 * The handlers are registered when the library loads (a constructor),
 * rather than at the first use of any part: the order then never depends on
 * what the process did first, no call pays for a once-check, and a
 * program's or binding's own pthread_atfork handlers, registered later, run
 * their prepare before the core's and their child after it (so a child
 * handler of theirs finds the core usable). A part the process never used
 * has nothing to hold or end: its steps cost an uncontended lock or two. */
#include <pthread.h>
#include <stddef.h>

#include "fork_internal.h"
#include "strideweave/testing.h"

const char sw_fork_coordinator = 0;

/* With the static core library a program links only the parts it uses:
 * the steps of a part it left out are NULL and skipped. */
#pragma weak sw_te_fork_prepare
#pragma weak sw_te_fork_parent
#pragma weak sw_te_fork_child
#pragma weak sw_move_fork_child
#pragma weak sw_evictable_fork_prepare
#pragma weak sw_evictable_fork_parent
#pragma weak sw_evictable_fork_child
#pragma weak sw_carrier_pair_fork_prepare
#pragma weak sw_carrier_pair_fork_parent
#pragma weak sw_carrier_pair_fork_child
#pragma weak sw_blockdev_fork_prepare
#pragma weak sw_blockdev_fork_parent
#pragma weak sw_blockdev_fork_child
#pragma weak sw_filestore_fork_prepare
#pragma weak sw_filestore_fork_parent
#pragma weak sw_filestore_fork_child
#pragma weak sw_filestore_reap_fork_prepare
#pragma weak sw_filestore_reap_fork_parent
#pragma weak sw_filestore_reap_fork_child
#pragma weak sw_parallel_fork_child
#pragma weak sw_copy_partner_fork_child
#pragma weak sw_route_fork_prepare
#pragma weak sw_route_fork_parent
#pragma weak sw_route_fork_child
#pragma weak sw_alloc_fork_prepare
#pragma weak sw_alloc_fork_parent
#pragma weak sw_alloc_fork_child
#pragma weak sw_fault_pause_fork_child
#pragma weak sw_tensor_pool_fork_prepare
#pragma weak sw_tensor_pool_fork_parent
#pragma weak sw_tensor_pool_fork_child

typedef struct fork_step {
    void (*prepare)(void);
    void (*parent)(void);
    void (*child)(void);
} fork_step;

/* In the global lock order (see above): outer parts first, leaves last. */
static const fork_step steps[] = {
    /* TiledEvictable's tracked work: its tracking lock, then each tracked
     * TiledEvictable's lock (held while its tiles' carriers are worked
     * on); the child ends the work of threads it lacks on the fresh
     * engine, freeing tensor handles. */
    {sw_te_fork_prepare, sw_te_fork_parent, sw_te_fork_child},
    /* The move engine: the child's engine, holds and inherited moves. */
    {NULL, NULL, sw_move_fork_child},
    /* Evictable: its registry, then every live Evictable's lock (held
     * across a transition's steps on its tiers, files and devices). */
    {sw_evictable_fork_prepare, sw_evictable_fork_parent, sw_evictable_fork_child},
    /* A binding's copies between two carriers: the pair list (taken
     * before carriers' locks); the child ends other threads' pairs. */
    {sw_carrier_pair_fork_prepare, sw_carrier_pair_fork_parent, sw_carrier_pair_fork_child},
    /* Block devices: the open list; the child makes device locks fresh. */
    {sw_blockdev_fork_prepare, sw_blockdev_fork_parent, sw_blockdev_fork_child},
    /* The file store's session directory, then its reaper (emptied). */
    {sw_filestore_fork_prepare, sw_filestore_fork_parent, sw_filestore_fork_child},
    {sw_filestore_reap_fork_prepare, sw_filestore_reap_fork_parent,
     sw_filestore_reap_fork_child},
    /* The parallel helpers: the child starts its own. */
    {NULL, NULL, sw_parallel_fork_child},
    /* The copy partner: the child starts its own. */
    {NULL, NULL, sw_copy_partner_fork_child},
    /* Leaves: nothing is taken under these locks. */
    {sw_route_fork_prepare, sw_route_fork_parent, sw_route_fork_child},
    {sw_alloc_fork_prepare, sw_alloc_fork_parent, sw_alloc_fork_child},
    {NULL, NULL, sw_fault_pause_fork_child},
    {sw_tensor_pool_fork_prepare, sw_tensor_pool_fork_parent, sw_tensor_pool_fork_child},
};

#define NSTEPS (sizeof steps / sizeof steps[0])

static void prepare(void)
{
    for (size_t i = 0; i < NSTEPS; i++)
        if (steps[i].prepare)
            steps[i].prepare();
}

static void parent(void)
{
    for (size_t i = NSTEPS; i-- > 0;)
        if (steps[i].parent)
            steps[i].parent();
}

static void child(void)
{
    for (size_t i = NSTEPS; i-- > 0;)
        if (steps[i].child)
            steps[i].child();
}

__attribute__((constructor)) static void install(void)
{
    pthread_atfork(prepare, parent, child);
}
