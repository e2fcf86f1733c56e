/* Tensors: a carrier, an offset and a layout (the logical dtype is the
 * carrier's), behind an opaque, refcounted, immutable handle.
 *
 * Logical index k (0 <= k < layout size, first mode fastest) lives in slot
 * offset + layout(k). Views (slice, permute, reshape, broadcast) are new
 * tensors on the same carrier; they copy no values.
 *
 * Ownership: a tensor holds one reference to its carrier and its own copy
 * of the layout; every function that returns a tensor through an
 * out-parameter gives the caller one reference (sw_tensor_unref). Handles
 * are immutable, so every function here is thread-safe; element access
 * goes through the carrier and its checks (carrier.h). Only element access
 * on a FileBacked carrier blocks (file I/O). */
#ifndef STRIDEWEAVE_TENSOR_H
#define STRIDEWEAVE_TENSOR_H

#include "strideweave/export.h"

#include <stdint.h>

#include "strideweave/carrier.h"
#include "strideweave/dlpack.h"
#include "strideweave/layout.h"
#include "strideweave/layout_view.h"
#include "strideweave/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sw_tensor sw_tensor;

/* `layout` is copied. SW_ETYPE for a NULL carrier or layout; SW_EINVAL for
 * a negative offset; SW_ESTATE for a released carrier; SW_ERANGE when
 * offset + cosize exceeds the carrier's size. */
SW_API sw_status sw_tensor_new(sw_carrier *carrier, int64_t offset, const sw_layout *layout,
                               sw_tensor **out, sw_error *err);
/* Flat layout of `ndim` leaf modes (first mode fastest); `strides` NULL
 * means contiguous (1, e0, e0*e1, ...). */
SW_API sw_status sw_tensor_new_strided(sw_carrier *carrier, int64_t offset, int32_t ndim,
                                       const int64_t *extents, const int64_t *strides,
                                       sw_tensor **out, sw_error *err);

SW_API sw_tensor *sw_tensor_ref(sw_tensor *t);
SW_API void sw_tensor_unref(sw_tensor *t);

/* Borrowed: valid while the caller holds its reference to `t`. */
SW_API sw_carrier *sw_tensor_carrier(const sw_tensor *t);
SW_API const sw_layout *sw_tensor_layout(const sw_tensor *t);
SW_API int64_t sw_tensor_offset(const sw_tensor *t);
SW_API sw_dtype sw_tensor_dtype(const sw_tensor *t);
SW_API int64_t sw_tensor_size(const sw_tensor *t); /* logical elements */

/* ---- elements ---------------------------------------------------------
 * Element `index` (logical, first mode fastest; 0 <= index < size) or the
 * element at leaf coordinate `coord` (one entry per leaf mode of the
 * layout, coord[j] in [0, extent j): no wrap-around) is carrier slot
 * offset + layout(index). get/set move one slot of
 * sw_dtype_slot_bytes(dtype) bytes (Bool: one byte, 0 or 1) through
 * sw_carrier_read / sw_carrier_write, so they work for every dtype and
 * every carrier class with slots of its own (the built-ins and a foreign
 * ops table alike) and apply the
 * carrier's checks in its order: released, unavailable (the class's
 * `unavailable`: an evicted Evictable), (set) not publicly mutable, (get)
 * pending as a move's destination without transfer access on this
 * thread, slot range, then the class's own I/O. A STATE_ONLY carrier's
 * slots are its binding's: SW_ENOTSUP (sw_tensor_slot tells the binding
 * which slot). A set advances the carrier's version by 1 (not under
 * transfer access). On a refusal nothing changes and err->detail names
 * the rule (sw_element_refusal). Thread-safe; blocks on a file or device. */
typedef enum sw_element_refusal {
    SW_ELEMENT_OK = 0,
    SW_ELEMENT_INDEX,   /* index outside [0, size) (SW_ERANGE) */
    SW_ELEMENT_COORD,   /* a coordinate outside its leaf's extent (SW_ERANGE;
                           the message names the leaf) */
    SW_ELEMENT_DTYPE,   /* a typed call on a tensor of another dtype (SW_ETYPE) */
    SW_ELEMENT_CARRIER  /* the carrier refused; the status is its own */
} sw_element_refusal;

/* The carrier slot of element `index` / of leaf coordinate `coord`; no
 * carrier state is looked at. SW_ETYPE for a NULL tensor (or coord). */
SW_API sw_status sw_tensor_slot(const sw_tensor *t, int64_t index, int64_t *slot,
                                sw_error *err);
SW_API sw_status sw_tensor_slot_at(const sw_tensor *t, const int64_t *coord, int64_t *slot,
                                   sw_error *err);
SW_API sw_status sw_tensor_get(const sw_tensor *t, int64_t index, void *out, sw_error *err);
SW_API sw_status sw_tensor_set(const sw_tensor *t, int64_t index, const void *in,
                               sw_error *err);
SW_API sw_status sw_tensor_get_at(const sw_tensor *t, const int64_t *coord, void *out,
                                  sw_error *err);
SW_API sw_status sw_tensor_set_at(const sw_tensor *t, const int64_t *coord, const void *in,
                                  sw_error *err);
/* Typed forms of get/set: SW_ETYPE (SW_ELEMENT_DTYPE) when the dtype is
 * not the one the function names, then as above. */
SW_API sw_status sw_tensor_get_f32(const sw_tensor *t, int64_t index, float *out, sw_error *err);
SW_API sw_status sw_tensor_set_f32(const sw_tensor *t, int64_t index, float value, sw_error *err);
SW_API sw_status sw_tensor_get_i32(const sw_tensor *t, int64_t index, int32_t *out,
                                   sw_error *err);
SW_API sw_status sw_tensor_set_i32(const sw_tensor *t, int64_t index, int32_t value,
                                   sw_error *err);

/* Every value of the tensor, in logical order (first mode fastest), as
 * slots of sw_dtype_slot_bytes(dtype) bytes into `out` (size slots; Bool:
 * one byte each). The slots the layout reaches are read in one go under
 * the carrier's mutex (host memory in place, a file with one read, an
 * Evictable from its primary), so the values are one instant's. Checks in
 * this order, each failing with `out` unspecified and nothing changed:
 * released or pending as a move's destination without transfer access on
 * this thread (SW_ESTATE); a STATE_ONLY carrier (SW_ENOTSUP: its binding
 * reaches the slots; so does an Evictable whose primary is one), but for
 * a SLOTS_UNLOCKED one whose dtype has a slot width, which is read as
 * sw_carrier_read_layout_as reads it (its batch callback, no lock held,
 * so the values are the callback's, not one instant's); the slots
 * reached beyond the carrier's size (SW_ERANGE); then the carrier's own
 * read (an evicted Evictable: SW_ESTATE; file errors: SW_EIO). Thread-safe;
 * blocks on file and device I/O. `out` is the caller's. */
SW_API sw_status sw_tensor_read_values(const sw_tensor *t, void *out, sw_error *err);
/* The same read of (carrier, offset, layout) without a tensor handle, for a
 * binding that keeps that triple itself. A layout of size 0 reads nothing
 * and checks nothing; an offset below 0 is SW_ERANGE. Borrows every
 * argument for the call. */
SW_API sw_status sw_carrier_read_layout(sw_carrier *c, int64_t offset, const sw_layout *layout,
                                        void *out, sw_error *err);

/* The values of (c, offset, layout) in logical order as values of `as`
 * (read), or `in` written over them (write), on any carrier with slots:
 *   - a carrier whose slots the core holds: `as` must be its dtype, or
 *     SW_DT_FLOAT64 for Float32 slots (widened after the read, rounded to
 *     nearest before the write, as sw_carrier_copy_layout carries them);
 *     any other is SW_ETYPE before anything is checked or touched
 *     (sw_carrier_holds_as says which); the read is
 *     sw_carrier_read_layout's; the write is sw_tensor_copy's (the span of
 *     slots the layout reaches written in one sw_carrier_write, read first
 *     unless the layout covers all of it: one version step, its checks and
 *     statuses); an Evictable whose primary is a SLOTS_UNLOCKED carrier,
 *     after its own checks (released, pending, range, evicted), reads and
 *     writes the primary's slots as below under the owner access of its
 *     claim (a write hands the primary the rounded Float32 values), and a
 *     write steps the Evictable's version once for each step the
 *     primary's made; a TiledEvictable's carrier whose tiers are a
 *     binding's (tiled_evictable.h), after its checks for the span the
 *     layout reaches (released, pending, range), reads and writes only the
 *     slots the layout names through sw_tiled_evictable_read / _write with
 *     no core lock held (its tier hooks run then): reads by runs of
 *     consecutive slots, writes one slot at a time in logical order, each
 *     stepping the carrier's version and the TiledEvictable's once (a
 *     failing slot stops the write, the slots before it written);
 *   - a SLOTS_UNLOCKED carrier (carrier.h): the state checks of
 *     sw_carrier_read / _write under its mutex, then, the mutex dropped,
 *     one call of its class's read_slots / write_slots with the layout's
 *     slots (offset + layout(k), k in logical order) and `as` as given
 *     (the binding converts), then (a write that succeeded) one version
 *     step, or none for a WRITES_STEP_VERSION class, whose callback
 *     steps it per slot as its binding's writes do; the race between the
 *     checks and the call is the class's, as carrier.h says. The
 *     callback's failure comes back as it reported it (err->detail
 *     SW_CARRIER_CALLBACK_RAISED: its binding keeps the error);
 *   - any other STATE_ONLY carrier: SW_ENOTSUP, nothing called.
 * A layout of size 0 reads and writes nothing and checks nothing; NULL
 * arguments are SW_ETYPE, an offset below 0 SW_ERANGE. Thread-safe; no
 * lock is held while an SLOTS_UNLOCKED class's callback runs. */
SW_API sw_status sw_carrier_read_layout_as(sw_carrier *c, int64_t offset,
                                           const sw_layout *layout, sw_dtype as, void *out,
                                           sw_error *err);
SW_API sw_status sw_carrier_write_layout_as(sw_carrier *c, int64_t offset,
                                            const sw_layout *layout, sw_dtype as,
                                            const void *in, sw_error *err);
/* Whether sw_carrier_read_layout_as / _write_layout_as take `as` for c:
 * any for a STATE_ONLY carrier (its binding converts), else c's dtype or
 * SW_DT_FLOAT64 over Float32 slots. 0 for NULL. Thread-safe. */
SW_API int sw_carrier_holds_as(sw_carrier *c, sw_dtype as);

/* ---- Slot-by-slot copies between carriers -------------------------------
 * Where a copy goes when neither side's slots can be reached in bulk (a
 * binding's carriers, an Evictable): one slot at a time in logical order,
 * slot k of (src, src_offset + layout(k)) read and then written to
 * (dst, dst_offset + layout(k)) before slot k + 1 is read, so a layout that
 * reaches a slot twice sees its own earlier writes (an accumulation into
 * src == dst, say) and hooks run read 0, write 0, read 1, ... as a loop of
 * single reads and writes would.
 *
 * Each read and write is one slot's sw_carrier_read / sw_carrier_write for
 * a carrier the core holds the slots of (its checks, its lock, its
 * version step), or for a SLOTS_UNLOCKED carrier its state checks under
 * its mutex and then its read_slots / write_slots with n = 1 and the mutex
 * dropped (carrier.h's order, version rules and race, per slot); for a
 * TiledEvictable's carrier whose tiers are a binding's, its checks under
 * its mutex and then sw_tiled_evictable_read / _write of the slot with the
 * mutex dropped (a write steps both versions). No lock is held while a
 * callback or tier hook runs, so it may use either carrier.
 *
 * `as`: the value kind carried from the read to the write: a dtype with a
 * slot width or SW_DT_FLOAT64 (a binary64), or SW_AS_HANDLE (carrier.h; both
 * carriers SLOTS_UNLOCKED, src's class with drop_handles); SW_DT_ANY lets
 * the core choose: handles between two STATE_ONLY carriers, else the dtype
 * of the side whose slots the core holds (dst's when both). A Float32 slot
 * the core holds is also read and written as SW_DT_FLOAT64 (widened after
 * its read, rounded to nearest before its write). `map`, when not
 * NULL, is called on each value between its read and its write with the
 * ordinal k and `user` (a value computed from the old one: src == dst with
 * an add is an in-place accumulation); it runs with no lock held and must
 * not fail.
 *
 * Refused before any slot is touched (`stop->slot` -1): NULL carrier or
 * layout (SW_ETYPE), an offset below 0 (SW_ERANGE), an `as` a carrier
 * whose slots the core holds does not hold (its dtype; SW_ETYPE), an `as`
 * that is no value kind (SW_EINVAL), a STATE_ONLY side the core cannot
 * reach (not SLOTS_UNLOCKED, or a dst without write_slots), and handles
 * from a class without drop_handles (SW_ENOTSUP). A layout of size 0
 * copies nothing and checks nothing.
 *
 * A failure at slot k (a refusal of either carrier's checks, its I/O, its
 * callback: err->detail SW_CARRIER_CALLBACK_RAISED as carrier.h says)
 * leaves slots 0 .. k-1 written to dst and their version steps made; the
 * core undoes nothing. `stop` (may be NULL) says where: `done` = k, `in_write`
 * 0 when src's read failed, 1 when dst's write did, `slot` that carrier's
 * slot number. Thread-safe. Ownership: every argument is borrowed for the
 * call; a handle read lives only within it (it goes back to src's
 * drop_handles right after its write, failed or not). */
typedef void (*sw_slot_map_fn)(void *user, int64_t k, void *value);
typedef struct sw_copy_stop {
    int64_t done;  /* slots written to dst before the failure */
    int in_write;  /* 1: dst's write failed; 0: src's read (or a refusal up front) */
    int64_t slot;  /* the failing carrier's slot, or -1: refused before any slot */
} sw_copy_stop;
SW_API sw_status sw_carrier_copy_layout(sw_carrier *src, int64_t src_offset, sw_carrier *dst,
                                        int64_t dst_offset, const sw_layout *layout,
                                        sw_dtype as, sw_slot_map_fn map, void *user,
                                        sw_copy_stop *stop, sw_error *err);

/* Views: new tensors on the same carrier, the layout computed by
 * layout_view.h (its refusal statuses; the message in err).
 * slice_key: entry m says what top-level mode m keeps (an index drops it,
 * a range with a step keeps it, Python's slice normalization; see
 * sw_slice_entry), n must be the rank; the offset grows by the scalar index
 * of the first selected coordinate.
 * slice: the simple form, [start, stop) of leaf mode `mode` (no wrap-around;
 * SW_ERANGE for a bad mode, SW_ENOTSUP for a nested one, SW_EINVAL for a
 * range outside the extent or empty), every other mode whole.
 * permute: result mode j is source mode order[j] (a permutation).
 * reshape_shape: to the shape (nprofile, profile, extents) of the same size;
 * the elements must sit evenly spaced in first-mode-fastest order (ordinal
 * k at k * b: contiguous tensors and steps of them qualify, a permuted
 * view does not), and the result has the target's canonical strides times
 * b. reshape: the same to a flat shape of `ndim` leaves.
 * broadcast: widens extent-1 leaves to `extents` with stride 0 (same
 * profile). */
/* Every view in one call: `spec` (layout_view.h) applied to the tensor's
 * layout and, when `adjacent` is not NULL, to that layout of the same
 * shape too (a binding's second plane, say a scale placement), with the
 * refusals of sw_layout_view in `fault` (may be NULL) and `err`. On SW_OK
 * *out is the view (the offset grown as a slice moves it) and, with
 * `adjacent`, *out_adjacent the viewed adjacent layout, the caller's to
 * sw_layout_free; on a refusal nothing is written. The view is not checked
 * against the carrier again (released or not): it reaches a subset of the
 * slots `t` reached, and inherits whether `t` was checked. */
SW_API sw_status sw_tensor_view(const sw_tensor *t, const sw_layout *adjacent,
                                const sw_view_spec *spec, sw_tensor **out,
                                sw_layout **out_adjacent, sw_view_fault *fault,
                                sw_error *err);
SW_API sw_status sw_tensor_slice_key(const sw_tensor *t, const sw_slice_entry *key, int32_t n,
                                     sw_tensor **out, sw_error *err);
SW_API sw_status sw_tensor_slice(const sw_tensor *t, int32_t mode, int64_t start, int64_t stop,
                                 sw_tensor **out, sw_error *err);
SW_API sw_status sw_tensor_permute(const sw_tensor *t, const int32_t *order, int32_t n,
                                   sw_tensor **out, sw_error *err);
SW_API sw_status sw_tensor_reshape_shape(const sw_tensor *t, int32_t nprofile,
                                         const uint8_t *profile, const int64_t *extents,
                                         sw_tensor **out, sw_error *err);
SW_API sw_status sw_tensor_reshape(const sw_tensor *t, int32_t ndim, const int64_t *extents,
                                   sw_tensor **out, sw_error *err);
SW_API sw_status sw_tensor_broadcast(const sw_tensor *t, const int64_t *extents,
                                     sw_tensor **out, sw_error *err);

/* DLPack export (versioned, DLPack 1.0): shape and strides are the leaf
 * modes, the read-only flag is set when the carrier is not publicly
 * mutable. Only carriers whose ops have dlpack_device (CPU) export, else
 * SW_ENOTSUP; then SW_ESTATE when released or pending as a destination,
 * and SW_ENOTSUP for a dtype other than Float32 and Int32. The managed
 * tensor holds a reference to `t` until its deleter runs (any thread). Releasing the carrier while an export is
 * outstanding is allowed: the memory is then kept until the last deleter
 * runs, so the consumer never reads memory handed to someone else. */
SW_API sw_status sw_tensor_to_dlpack(sw_tensor *t, DLManagedTensorVersioned **out, sw_error *err);

/* An export whose lifetime its caller owns, for a language binding that
 * keeps the (carrier, offset, layout) triple itself and an object of its
 * own alive for the consumer (Python: the Tensor). */
typedef struct sw_dlpack_owner {
    int versioned;      /* 1: DLManagedTensorVersioned (DLPack 1.0); 0: legacy
                           DLManagedTensor, which has no read-only flag */
    int read_only;      /* versioned: -1 the carrier's public mutability
                           decides, as for sw_tensor_to_dlpack; 0 / 1 the
                           caller's own answer */
    void *manager_ctx;  /* stored in the managed tensor */
    sw_dlpack_release_fn release; /* run once by its deleter (dlpack.h) */
} sw_dlpack_owner;

/* Exports a CPU carrier's slots offset + layout(k) (other classes:
 * SW_ENOTSUP) into a DLManagedTensorVersioned or DLManagedTensor (*out,
 * by owner->versioned). Checks in this order: released (SW_ESTATE), dtype
 * not Float32 or Int32 (SW_ENOTSUP), slots past the carrier's size
 * (SW_ERANGE); a pending move's destination is not refused (it exports
 * read-only, not being publicly mutable). Lifetime: instead of the carrier
 * keeping its storage, the storage block is pinned (alloc.h) and handed to
 * owner->release as `pin`, which must sw_alloc_unpin it; a release of the
 * carrier meanwhile quarantines the block until then. As alloc.h asks, the
 * caller serializes this call, that unpin and the carrier's release (the
 * Python binding holds the GIL for all three). Thread-safe otherwise;
 * `out` receives a managed tensor the consumer owns. */
SW_API sw_status sw_carrier_to_dlpack(sw_carrier *c, int64_t offset, const sw_layout *layout,
                                      const sw_dlpack_owner *owner, void **out, sw_error *err);
/* sw_carrier_to_dlpack of the tensor's (carrier, offset, layout), for a
 * binding whose objects hold tensor handles: the same checks, packing and
 * lifetime (the storage block pinned, handed to owner->release). */
SW_API sw_status sw_tensor_to_dlpack_owned(const sw_tensor *t, const sw_dlpack_owner *owner,
                                           void **out, sw_error *err);

#ifdef __cplusplus
}
#endif

#endif
