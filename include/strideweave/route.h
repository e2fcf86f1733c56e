/* Routes: what runs when values move from a carrier of one class into a
 * carrier of another (row 9 of the move table, move.h).
 *
 * A route is found by the exact pair of carrier classes (the
 * sw_carrier_class tables, compared by address: a class never matches
 * another class's entry, however alike). The answer is an sw_route_entry
 * that says what runs:
 *
 *   SW_ROUTE_KIND_BULK         the core copies the physical span through
 *                              both carriers' storage (CPU <-> FileBacked)
 *   SW_ROUTE_KIND_CLASS        a class's own transfer, entry.transfer
 *                              (CPU <-> BlockDeviceCarrier)
 *   SW_ROUTE_KIND_ELEMENTWISE  the core's elementwise fallback (a strided
 *                              copy, or slot by slot through the ops): every
 *                              other pair of classes whose slots the core
 *                              reaches
 *   SW_ROUTE_KIND_BINDING      a route a binding registered: an opaque
 *                              payload only the binding runs, through a
 *                              transfer it supplies (move.h, "transfers a
 *                              binding supplies"); the core never reads it
 *
 * The core's own pairs (the first three kinds) are a fixed table the core
 * holds from the start: no set-up call, never changed, read without a lock
 * (the move engine takes its route from it on every move). A binding adds
 * its routes with sw_route_register; resolution asks the binding's
 * entries first, then the core's table and rules, so a binding may put its
 * own route on a pair the core also serves (the core's route comes back
 * when the binding's is removed). sw_move_async itself always runs the
 * core's route of the pair unless the caller supplies a transfer.
 *
 * Refusals (row 9): a pair naming a TiledEvictable (its values stay in its
 * tiers), a BlockDeviceCarrier with anything but CPU on the other side,
 * and a pair naming a STATE_ONLY class (carrier.h: the core does not hold
 * its slots) that no binding registered are refused SW_ENOTSUP with
 * err->detail = SW_MOVE_ROUTE_REFUSED (move.h). Nothing changes on a
 * refusal.
 *
 * Payloads: a binding route's payload is the binding's object (a Python
 * MoveOperation class, a TransferRoute). The registry keeps one reference
 * while the entry is registered, and every resolve hands the caller one
 * more: payload_ops->ref is called for it with the registry's lock held
 * (so the entry cannot go in between: ref must not call into this
 * header), payload_ops->unref without any core lock, on the thread whose
 * call dropped it (sw_route_unregister, sw_route_forget_class,
 * sw_route_entry_release). A binding whose ref/unref need its own lock (the
 * GIL) calls these functions holding it.
 *
 * Classes: a route holds a reference to each of its two classes
 * (sw_carrier_class_ref; nothing for a static table), dropped when the
 * route goes. A binding whose classes are made at run time (one per
 * Python class, carrier.h, "Classes made at run time") calls
 * sw_route_forget_class when its class object dies, which drops every
 * route naming it, then drops its own reference; carriers of the class
 * still alive keep it for themselves. The route of two carriers is the
 * route of their classes: sw_move_route_resolve_carriers.
 *
 * Version: sw_route_registry_version counts the changes of the binding
 * routes (register, unregister, a forget that dropped any). A binding that
 * remembers answers (a dispatch cache) keeps them while the version is
 * the one it read before asking.
 *
 * Threads: every function here is thread-safe; none blocks beyond the
 * registry's short lock (held for a lookup or one list change, never
 * around a payload's unref). fork() is safe: the lock is taken around it. */
#ifndef STRIDEWEAVE_ROUTE_H
#define STRIDEWEAVE_ROUTE_H

#include "strideweave/export.h"

#include <stdint.h>

#include "strideweave/carrier.h"
#include "strideweave/layout.h"
#include "strideweave/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A class's own transfer (SW_ROUTE_KIND_CLASS), run by the move engine on
 * a pool thread (or on the move's caller, move.h) with no carrier lock
 * held (the pending marks protect both carriers): copy the source span
 * (`layout`'s cosize slots from slot `src_offset` of `src`) into slots
 * [0, cosize) of `dst`, adding the bytes copied to `progress` (may be
 * NULL) atomically. */
typedef sw_status (*sw_route_transfer_fn)(sw_carrier *src, int64_t src_offset, sw_carrier *dst,
                                          const sw_layout *layout, int64_t *progress,
                                          sw_error *err);

typedef enum sw_route_entry_kind {
    SW_ROUTE_KIND_BULK = 1,
    SW_ROUTE_KIND_CLASS = 2,
    SW_ROUTE_KIND_ELEMENTWISE = 3,
    SW_ROUTE_KIND_BINDING = 4
} sw_route_entry_kind;

/* sw_route_entry.flags */
enum {
    /* The pair may fall back to the elementwise copy: set on a binding
     * route registered with it, and on every answer for two classes that
     * sw_route_allow_fallback let fall back (see there). */
    SW_ROUTE_MAY_FALL_BACK = 1u << 0,
    /* Set by the core on an answer from its own table and rules. */
    SW_ROUTE_BUILTIN = 1u << 1
};

/* How the registry holds a binding route's payload; either may be NULL
 * (a payload that lives as long as the process). The table itself must
 * outlive every entry naming it. */
typedef struct sw_route_payload_ops {
    void (*ref)(void *payload);
    void (*unref)(void *payload);
} sw_route_payload_ops;

typedef struct sw_route_entry {
    sw_route_entry_kind kind;
    unsigned flags;                          /* SW_ROUTE_* above */
    sw_route_transfer_fn transfer;           /* SW_ROUTE_KIND_CLASS, else NULL */
    void *payload;                           /* SW_ROUTE_KIND_BINDING, else NULL */
    const sw_route_payload_ops *payload_ops; /* with `payload`, or NULL */
} sw_route_entry;

/* Register a binding route (entry->kind SW_ROUTE_KIND_BINDING; its
 * payload may be NULL) for exactly (src, dst). SW_ETYPE for a NULL class
 * or entry; SW_EINVAL for another kind (the core's own routes are its
 * fixed table) or a pair that has a binding route already (the existing
 * one stays); SW_ENOTSUP with err->detail = SW_MOVE_ROUTE_REFUSED for a
 * pair the core refuses whoever runs it (a TiledEvictable, a
 * BlockDeviceCarrier with anything but CPU). On success the registry
 * holds its own reference to the payload (payload_ops->ref once); the
 * caller keeps its own. Nothing changes on a failure. */
SW_API sw_status sw_route_register(const sw_carrier_class *src, const sw_carrier_class *dst,
                                   const sw_route_entry *entry, sw_error *err);

/* Remove the binding route of exactly (src, dst). SW_OK, with the removed
 * entry in *removed (the registry's payload reference passes to the
 * caller: sw_route_entry_release) or, with `removed` NULL, the payload
 * unref'd; SW_EINVAL when the pair has no binding route (the core's own
 * routes cannot be removed), nothing changed. */
SW_API sw_status sw_route_unregister(const sw_carrier_class *src, const sw_carrier_class *dst,
                                     sw_route_entry *removed, sw_error *err);

/* Drop every binding route naming `cls` on either side (its owner is
 * done with it), and its sw_route_allow_fallback; their payloads and their
 * references to their classes are unref'd. Returns how many went (the
 * fallback counts as one). */
SW_API int sw_route_forget_class(const sw_carrier_class *cls);

/* Let every pair of classes that both went through this fall back to the
 * elementwise copy (a Python class whose CarrierDefinition's
 * StorageProvider allows it, say): from now on, resolving such a pair
 * answers its binding route with SW_ROUTE_MAY_FALL_BACK added, or, with no
 * route registered for it, SW_ROUTE_KIND_ELEMENTWISE with flags
 * SW_ROUTE_MAY_FALL_BACK (not SW_ROUTE_BUILTIN: for STATE_ONLY classes the
 * binding runs that copy, as it holds their slots). Only a STATE_ONLY class
 * (SW_EINVAL otherwise: the core's classes follow its own table); a class
 * allowed already is left as it is (SW_OK). The registry holds a reference
 * to the class until sw_route_forget_class; the version moves. */
SW_API sw_status sw_route_allow_fallback(const sw_carrier_class *cls, sw_error *err);

/* The route of a move from a carrier of class `src` into one of class
 * `dst`: the binding route registered for exactly that pair, else the
 * elementwise fallback of two classes let fall back
 * (sw_route_allow_fallback), else the core's (flags SW_ROUTE_BUILTIN),
 * else the refusal of row 9 (see the top
 * of this file), err->detail = SW_MOVE_ROUTE_REFUSED. A NULL class or
 * `out` is SW_ETYPE (detail 0). On success `out` holds one reference to
 * its payload, if any: give it back with sw_route_entry_release. Row 9
 * about a carrier's state (a faulted block device) is the move's, not a
 * class pair's: sw_move_check and sw_move_async check it. */
SW_API sw_status sw_move_route_resolve(const sw_carrier_class *src, const sw_carrier_class *dst,
                                       sw_route_entry *out, sw_error *err);

/* sw_move_route_resolve for the classes of two carriers (each carrier's
 * reference to its class keeps it for the call). SW_ETYPE for a NULL
 * carrier; otherwise as sw_move_route_resolve. */
SW_API sw_status sw_move_route_resolve_carriers(sw_carrier *src, sw_carrier *dst,
                                                sw_route_entry *out, sw_error *err);

/* The registry's version: +1 with every change of its binding routes;
 * the core's own table never changes. Lock-free (an atomic read). */
SW_API uint64_t sw_route_registry_version(void);

/* Give back the payload reference an entry from sw_move_route_resolve or
 * sw_route_unregister holds, and clear it. NULL, or an entry without a
 * payload: nothing. */
SW_API void sw_route_entry_release(sw_route_entry *entry);

#ifdef __cplusplus
}
#endif

#endif
