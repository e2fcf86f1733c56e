/* Evictable: a carrier whose values live in one of two tiers it owns, a
 * primary (fast, e.g. CPU) and a secondary (large, e.g. FileBacked).
 *
 *   sw_evictable_new(cpu, file, NULL, &e, &err);   promoted: values in cpu
 *   sw_evictable_evict(e, &err);                   values now in a file
 *   sw_evictable_promote(e, &err);                 back in host memory
 *
 * Tiers the core serves with no hooks or factory: any pair of CPU,
 * Generic and FileBacked carriers, any number of transitions. A BlockDeviceCarrier is never an Evictable tier (check 2,
 * as in Python); TiledEvictable takes it in either role
 * (tiled_evictable.h). Tiers a binding keeps need the Binding tiers hooks.
 *
 * sw_evictable_new returns an sw_carrier of the class sw_evictable_class;
 * every carrier.h call works on it. It claims both tiers (ownership claims,
 * carrier.h), so the caller's references to them can still read them but
 * no longer write, release, claim or move them. Promoted, slot reads and
 * writes go to the primary (the Evictable's version +1 per write, the
 * primary's too); evicted, they fail SW_ESTATE naming promote.
 *
 * Transitions (evict, promote) move the values over the flat layout
 * (size):(1) with an ordinary move (move.h) between the exact tier
 * classes, into the target tier when it is live and at least `size` slots
 * big, else into a fresh carrier made like it (sw_tier_allocate_like, or
 * the factory of sw_evictable_options), which then replaces it (the old one
 * is released and relinquished). The move releases the tier it read.
 * Checks, each failing with nothing changed: owned by a composite without
 * owner access on this thread, released, taking part in a pending move or
 * another transition: SW_ESTATE; already there: nothing to do (SW_OK).
 * Any later failure (no fresh tier, a refused move, an I/O error or fault
 * during the transfer) returns its status and leaves residency, tiers,
 * values, ownership and every version as they were; a fresh carrier made
 * for it is released. The caller may simply try again. Transitions never
 * change the Evictable's version.
 *
 * Release (sw_carrier_release) of an Evictable no composite owns releases
 * both tiers (through its owner access) and then relinquishes them. When
 * the last reference to an unreleased Evictable goes, the tiers are only
 * relinquished (a caller's own references to them become usable again).
 * An Evictable never exports through DLPack. As a move source it is read
 * slot by slot (an evicted one fails the move with SW_ESTATE).
 *
 * Ownership of handles: sw_evictable_new takes its own references to the
 * tiers (the caller keeps theirs) and gives the caller one reference to
 * the Evictable. sw_evictable_primary/secondary give a new reference.
 *
 * Threads: every function is thread-safe. Transitions block (they wait for
 * their move); one runs at a time per Evictable: a second one started
 * meanwhile fails SW_ESTATE (pending) instead of waiting. During a
 * transition slot writes fail SW_ESTATE (pending) and slot reads still
 * work (an evict whose move has committed reads as evicted). Lock order:
 * an Evictable's mutex before its tiers'.
 *
 * Fork: a child of fork() has none of the parent's threads. A transition
 * another thread was running at the fork ends in the child inside fork()
 * itself (no call is needed; no hook runs): the Evictable is no longer
 * pending, and the owner access that thread held on the tiers goes. Its
 * values stay where they were before the transition (residency, tiers and
 * values as before), unless the transition's move had already committed
 * at the fork (the tier it read was released): then the child sees the
 * transition done, as the parent will. A fresh tier the transition was
 * filling is forgotten in the child, never released (its storage is the
 * parent's). The move inside it is a move the child inherited (move.h,
 * "Fork"): a C program calls sw_move_end_inherited right after fork()
 * returns 0 so that its tiers lose their marks too. Later transitions,
 * reads and writes in the child work as usual. A transition running on
 * the forking thread itself (fork() called from one of its hooks) goes
 * on in the child. fork() waits for other threads to leave every
 * Evictable's mutex (a read, a write, a release in progress), so the
 * child finds none held; one whose holder does not leave within about a
 * second (it waits on a lock another fork handler took) is made fresh in
 * the child, with its tiers' mutexes. */
#ifndef STRIDEWEAVE_EVICTABLE_H
#define STRIDEWEAVE_EVICTABLE_H

#include "strideweave/export.h"

#include <stdint.h>

#include "strideweave/carrier.h"
#include "strideweave/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Makes a fresh, mutable, publicly unowned carrier like `prototype` (which
 * may be released) with room for `size` slots of `dtype` (an allocatable-
 * empty carrier of size 0 also does: the move grows it). Returning
 * SW_ENOTSUP hands the request to sw_tier_allocate_like. Called by the
 * thread running the transition, with no lock of the Evictable held. */
typedef sw_status (*sw_tier_factory)(sw_carrier *prototype, int64_t size, sw_dtype dtype,
                                     void *user, sw_carrier **out, sw_error *err);

/* Binding tiers. A language binding whose carriers keep their slots in the
 * binding (STATE_ONLY classes, carrier.h) or whose moves run routes the core
 * does not know plugs them in through three hooks of sw_evictable_options:
 *
 *   move     moves the values of `from` (slots [0, size)) into `to`, as a
 *            move does: on success every slot of `to` is written and `from`
 *            is released; on failure nothing changed (the core then gives
 *            up the fresh `to`, if it made one). Returning SW_ENOTSUP hands
 *            the move to the core's engine (refused SW_ENOTSUP for a
 *            STATE_ONLY tier). Called for every transition's tier move.
 *   size     the slots of a STATE_ONLY tier (its size is the binding's);
 *            needed when either tier is STATE_ONLY.
 *   discard  gives up a tier the core no longer keeps after a transition:
 *            the fresh carrier of a failed one, the replaced target of a
 *            successful one. The core then releases it (a no-op once the
 *            hook released it) and relinquishes it.
 *
 * GIL rule: the core calls every hook (and the factory) on the thread
 * running the transition with no core lock held: the Evictable is marked
 * pending meanwhile (writes, release, claims, moves and other transitions
 * of it are refused) and `move` and `discard` run with owner access to the
 * claimed tiers on that thread, so a binding may take its interpreter lock
 * inside them and use its ordinary carrier calls. A binding that holds
 * such a lock when it calls sw_evictable_evict/_promote should release it
 * for the call (the core's own move blocks). The Evictable's release
 * (sw_carrier_release) runs with its mutex held and calls no hook: it
 * releases the state of a STATE_ONLY tier only, and the binding frees that
 * tier's storage after sw_carrier_release returns (for the tiers
 * sw_evictable_live_tiers names).
 *
 * With `move` set, check 9 of sw_evictable_new is the binding's (the hook
 * moves what the core cannot); with a STATE_ONLY tier, the dtypes are the
 * binding's to compare (check 6) and the Evictable takes `dtype` when the
 * primary is STATE_ONLY. */
typedef sw_status (*sw_tier_move)(sw_carrier *from, sw_carrier *to, int64_t size, void *user,
                                  sw_error *err);
typedef sw_status (*sw_tier_size)(sw_carrier *tier, void *user, int64_t *out, sw_error *err);
typedef void (*sw_tier_discard)(sw_carrier *tier, void *user);

typedef struct sw_evictable_options {
    sw_tier_factory factory; /* NULL: sw_tier_allocate_like only */
    void *user;              /* passed to every hook */
    sw_tier_move move;       /* NULL: the core's move engine */
    sw_tier_size size;       /* NULL: STATE_ONLY tiers refused (check 9) */
    sw_tier_discard discard; /* NULL: the core releases the tier */
    sw_dtype dtype;          /* the dtype when the primary is STATE_ONLY */
} sw_evictable_options;

/* Checks in order, each failing with nothing changed:
 *   1. primary, then secondary NULL                       SW_ETYPE
 *   2. either is a BlockDeviceCarrier                     SW_ETYPE
 *   3. primary and secondary are the same carrier         SW_EINVAL
 *   4. primary, then secondary released                   SW_ESTATE
 *   5. primary, then secondary owned by a composite       SW_ESTATE
 *      (then primary, then secondary taking part in a
 *      pending move, check 10's usual refusal)
 *   6. their dtypes differ                                SW_ETYPE
 *   7. the secondary is not publicly mutable              SW_ESTATE
 *   8. the primary has size 0                             SW_EINVAL
 *   9. the move engine cannot move between the classes   SW_ENOTSUP
 *      (unless options->move is set; see Binding tiers)
 *  10. claiming primary, then secondary fails (e.g. one   SW_ESTATE
 *      takes part in a pending move); no claim is kept
 * The Evictable has the primary's size and dtype, and is intrinsically
 * mutable when the primary was publicly mutable. `options` may be NULL
 * (it is copied). */
SW_API sw_status sw_evictable_new(sw_carrier *primary, sw_carrier *secondary,
                                  const sw_evictable_options *options, sw_carrier **out,
                                  sw_error *err);

/* Move the values to the secondary tier / back to the primary tier; see
 * the top of this file. SW_ETYPE for NULL or a carrier that is not an
 * Evictable. */
SW_API sw_status sw_evictable_evict(sw_carrier *e, sw_error *err);
SW_API sw_status sw_evictable_promote(sw_carrier *e, sw_error *err);

/* 1 while the values live in the secondary tier (0 for NULL or another
 * class). */
SW_API int sw_evictable_is_evicted(sw_carrier *e);

/* The current tier carriers (a new reference; NULL for another class). */
SW_API sw_carrier *sw_evictable_primary(sw_carrier *e);
SW_API sw_carrier *sw_evictable_secondary(sw_carrier *e);

/* For a binding that reaches a tier's slots itself: the current primary
 * (primary = 1) or secondary tier (a new reference) and the Evictable's
 * claim token on it, to pass to sw_carrier_begin_owner_access/_end on the
 * calling thread. The token goes stale when a transition replaces the
 * tier (owner access then fails SW_ESTATE). SW_ETYPE for another class. */
SW_API sw_status sw_evictable_tier(sw_carrier *e, int primary, sw_carrier **tier,
                                   uint64_t *token, sw_error *err);

/* Tiers whose storage is live, as bits: SW_EVICTABLE_PRIMARY_LIVE,
 * SW_EVICTABLE_SECONDARY_LIVE. Both until the first transition, then the
 * one holding the values (a transition's move released the other),
 * including in a forked child where fork() finished another thread's
 * transition ("Fork"). After the Evictable's release: the tiers that
 * release released, so that a binding whose tiers keep storage of their
 * own (Binding tiers) frees it for those, once, after sw_carrier_release
 * returns. 0 for NULL or another class. */
enum { SW_EVICTABLE_PRIMARY_LIVE = 1, SW_EVICTABLE_SECONDARY_LIVE = 2 };
SW_API int sw_evictable_live_tiers(sw_carrier *e);

/* A fresh carrier like `prototype` (released or not) for `size` slots of
 * `dtype`, as Evictable transitions make their fresh tiers: CPU -> a CPU
 * carrier of `size` (not zeroed), Generic -> a zeroed Generic of `size`,
 * FileBacked -> a new generated file of size 0 (allocatable-empty),
 * BlockDeviceCarrier -> a zero-written extent of `size` Float32 slots on
 * the prototype's device (sw_block_device_allocate's checks: a closed or
 * faulted device fails SW_ESTATE; the zeros are durable once
 * sw_block_device_flush returns), Evictable -> a promoted Evictable over fresh tiers like the prototype's
 * (its primary of `size`, its secondary of 0 slots). SW_ENOTSUP for other
 * classes; then the errors of the constructor it calls. Mutable, unowned;
 * the caller gets one reference. */
SW_API sw_status sw_tier_allocate_like(sw_carrier *prototype, int64_t size, sw_dtype dtype,
                                       sw_carrier **out, sw_error *err);

/* The ops table of Evictable carriers, for comparing classes. */
SW_API extern const sw_carrier_class sw_evictable_class;

#ifdef __cplusplus
}
#endif

#endif
