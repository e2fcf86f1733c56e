/* The carrier handle's state, shared by carrier.c, tensor.c and move.c
 * only (never installed): the public API is carrier.h. */
#ifndef SW_CARRIER_INTERNAL_H
#define SW_CARRIER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "strideweave/binding.h"
#include "strideweave/carrier.h"

/* In the order a move reads it: a small move (about a microsecond) reads
 * both carriers' first two cache lines (sw_calloc starts the struct on
 * one) and nothing past them unless a carrier is in a transfer or being
 * claimed. Declared in another order, the source's export count lay in a
 * third line, read at its release: one more cold line per move (cachegrind
 * of bench/sweep.py's 4 and 16 KiB cells). The flags are bytes so that the
 * inline impl's first 16 bytes (a host carrier's data pointer and size,
 * read by every move) share the second line: a separately allocated impl
 * was one more cold line per carrier. carrier.c checks the order. */
#define SW_CARRIER_INLINE_IMPL 32 /* bytes of impl sw_carrier_new_inline holds */
struct sw_carrier {
    pthread_mutex_t lock; /* guards the fields after refs but dtype, and slot I/O */
    const sw_carrier_class *ops;
    void *impl;           /* &inline_impl for sw_carrier_new_inline */
    _Atomic long refs;
    uint64_t version;
    uint64_t owner_token; /* 0 when not owned */
    pthread_t access_thread;
    sw_dtype dtype;
    int access_depth;     /* owner access held by access_thread */
    int transfer_depth;   /* transfer access held by transfer_thread */
    int exports;          /* outstanding DLPack exports */
    uint8_t released;
    uint8_t storage_freed; /* ops->release ran */
    uint8_t intrinsic_mutable;
    uint8_t pending_src;  /* a move reads it (0/1) */
    uint8_t pending_dst;  /* a move writes it (0/1) */
    union {
        max_align_t align;
        unsigned char bytes[SW_CARRIER_INLINE_IMPL];
    } inline_impl;        /* the impl of sw_carrier_new_inline, else unused */
    /* Read only while a depth above is not 0, or by a claim. */
    pthread_t transfer_thread;
    uint64_t claims;      /* successful claims so far */
};

/* sw_carrier_new with the impl inside the carrier (one allocation, the
 * impl's first 16 bytes in the carrier's second cache line): `impl_bytes`
 * (at most SW_CARRIER_INLINE_IMPL) zeroed bytes at c->impl, which live and
 * die with the carrier, so the class's destroy must not free them. */
sw_status sw_carrier_new_inline(const sw_carrier_class *ops, size_t impl_bytes, sw_dtype dtype,
                                int flags, sw_carrier **out, sw_error *err);

/* The class is STATE_ONLY (carrier.h): no slot callbacks to call. */
#define SW_CARRIER_STATE_ONLY(c) (((c)->ops->flags & SW_CARRIER_CLASS_STATE_ONLY) != 0)
/* The class lets the core reach its binding's slots in batches, outside
 * the lock (carrier.h: SW_CARRIER_CLASS_SLOTS_UNLOCKED). */
#define SW_CARRIER_SLOTS_UNLOCKED(c) (((c)->ops->flags & SW_CARRIER_CLASS_SLOTS_UNLOCKED) != 0)
/* SW_ENOTSUP for a STATE_ONLY carrier asked `what` (needs its slots). */
sw_status sw_carrier_refuse_state_only(sw_carrier *c, const char *what, sw_error *err);
/* When `c` is an Evictable over a STATE_ONLY primary (whose slot I/O is
 * SW_ENOTSUP: its binding reaches the slots), that primary (one reference)
 * and the claim token the Evictable holds it by; else NULL. evictable.c. */
sw_carrier *sw_evictable_binding_primary(sw_carrier *c, uint64_t *token);
/* When `c` is a TiledEvictable's carrier whose tiers are the binding's
 * (its slot ops are SW_ENOTSUP: the tier hooks must run with no core lock
 * held), that TiledEvictable (borrowed); else NULL.
 * tiled_evictable_carrier.c. */
struct sw_tiled_evictable *sw_tiled_evictable_bound_of(sw_carrier *c);
/* carrier.h's checks of a read (writing 0) or write of [slot, slot +
 * count) under c->lock, as sw_carrier_read/_write run them before the
 * class's op: for a caller reaching the slots without that op. */
sw_status sw_carrier_check_slots(sw_carrier *c, int writing, int64_t slot, int64_t count,
                                 sw_error *err);
/* The refusal sw_carrier_read (writing 0) or sw_carrier_write gives a
 * released carrier, for a carrier whose slots are gone before its own
 * release flag is set (a TiledEvictable the binding released first). */
sw_status sw_carrier_refuse_released(sw_carrier *c, int writing, sw_error *err);

/* With c->lock held. */
/* The read refusals of sw_carrier_read: released, pending destination
 * without transfer access on this thread (SW_ESTATE). */
sw_status sw_carrier_check_readable_locked(sw_carrier *c, sw_error *err);
int sw_carrier_mutable_locked(sw_carrier *c);
/* The write refusals of sw_carrier_write (released, pending, owned
 * elsewhere, immutable: SW_ESTATE), `what` naming the action. */
sw_status sw_carrier_check_writable_locked(sw_carrier *c, const char *what, sw_error *err);
/* Why `c` may not take part in a copy now: SW_CARRIER_REFUSED_RELEASED,
 * with `pending_too` SW_CARRIER_REFUSED_PENDING, or 0. Locked.
 * carrier_pair.c. */
int sw_carrier_refusal_locked(sw_carrier *c, int pending_too);
/* A pair (binding.h) begun by a core caller that runs checks of its own
 * (move_here.c): sw_carrier_pair_lock, then both carriers' locks, the
 * checks, then sw_carrier_pair_mark_locked with p->src and p->dst set (the
 * roles to mark; `access`: take transfer access too); ended with
 * sw_carrier_pair_end like any pair, and in a forked child like any. */
void sw_carrier_pair_lock(void);
void sw_carrier_pair_unlock(void);
void sw_carrier_pair_mark_locked(sw_carrier_pair *p, int roles, int access);
/* This thread holds transfer access (its writes step no version). */
int sw_carrier_in_transfer_locked(sw_carrier *c);
int sw_carrier_owned_blocks_locked(sw_carrier *c); /* owned, no access here */
/* Free the storage now, or once the last export is gone. */
void sw_carrier_release_locked(sw_carrier *c);
/* The checks of sw_carrier_allocate (owner 1) / _unallocate (owner 0):
 * released, pending, owned elsewhere, no growable storage. */
/* file_backed.c: grow an empty FileBacked (locked) to `slots` without
 * resizing its file, for a caller that writes the whole new span from
 * offset 0 next (sw_file_backed_allocate_for_write's growth). */
sw_status sw_file_backed_grow_for_write_locked(sw_carrier *c, int64_t slots, sw_error *err);
sw_status sw_carrier_check_growable_locked(sw_carrier *c, const char *what, int owner,
                                          sw_error *err);

/* Lock two distinct carriers in address order (deadlock-free). */
/* A mutable Generic carrier of `count` zeroed slots (a fresh tier or tile
 * store like a Generic one); sw_generic_new's checks. */
sw_status sw_generic_new_zeroed(int64_t count, sw_dtype dtype, sw_carrier **out, sw_error *err);

void sw_carrier_lock_pair(sw_carrier *a, sw_carrier *b);
void sw_carrier_unlock_pair(sw_carrier *a, sw_carrier *b);

/* DLPack export bookkeeping (tensor.c). */
void sw_carrier_export_begin_locked(sw_carrier *c);
void sw_carrier_export_end(sw_carrier *c);

/* Where the core's own copy (move_here.c: an elementwise or bulk transfer)
 * reaches `c`'s slots: 1 with *out set for CPU and Generic
 * memory (HOST, slot 0), a FileBacked file (FILE, slot 0 at byte 0) and a
 * BlockDeviceCarrier's extent (FILE: the device's descriptor, out->offset
 * its first slot); for another class with a storage callback, what that
 * callback says while the carrier is live. 0 for every other carrier
 * (STATE_ONLY classes: the binding reaches their slots). out->offset is 0
 * but for a BlockDeviceCarrier. A released built-in answers 1 with a NULL
 * host or an fd of -1, which the core's own transfers refuse. Generic answers here
 * though its class has no storage callback: that callback is what the
 * core's own move routes and DLPack export look for, and a Generic carrier
 * is moved slot by slot and never exported by them (as designed), while its
 * memory is still host memory for such a copy. The answer is good only
 * while the carrier is pending (or otherwise kept from release): the
 * pointer or descriptor dies with the storage. Thread-safe. Internal: no
 * binding copies through it (its copies go through the core's moves). */
int sw_carrier_endpoint(sw_carrier *c, sw_endpoint *out);

#endif
