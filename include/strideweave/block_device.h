/* Block devices as carrier storage: an sw_block_device is one open Linux
 * block-special node (a disk, a partition, a loop device); each carrier it
 * allocates holds Float32 slots in one aligned extent of it.
 *
 *   sw_block_device *dev;
 *   sw_block_device_open("/dev/loop0", &dev, &err);
 *   sw_block_device_allocate(dev, n, SW_DT_FLOAT32, 0, &c, &err);
 *   sw_move(cpu_tensor, c, &on_disk, &err);   durable when it returns
 *
 * Carriers: sw_block_device_allocate gives an sw_carrier of the class
 * sw_block_device_carrier_class (every carrier.h call works on it). Slot
 * i lives at byte offset_bytes + 4*i of the device, native order. Its size
 * is fixed (never allocatable-empty, so a move into it needs a carrier
 * that is already big enough). It moves only to and from CPU carriers
 * (exact-pair bulk routes of the move engine); a move with any other
 * carrier class fails SW_ENOTSUP before anything changes. It never
 * exports through DLPack.
 *
 * Durability: a move into a device carrier commits (and releases its
 * source) only once the written range is durable on the device
 * (fdatasync, or direct I/O for large aligned writes); if that fails the
 * move fails SW_EIO (errno kept), the source stays live and unchanged and
 * the device is faulted. Slot writes (sw_carrier_write) are buffered until
 * sw_block_device_flush or sw_block_device_close.
 *
 * Faults: an I/O error or a zero-byte completion on the device faults it
 * for good (sw_block_device_is_faulted): its carriers then refuse reads,
 * writes and moves, and the device refuses allocation and flush
 * (SW_ESTATE); release, introspection and close still work. A failed slot
 * write still advances the carrier's version (the write started).
 *
 * Ownership: sw_block_device_open gives the caller one reference
 * (sw_block_device_unref). Every carrier holds a reference to its device,
 * so the device stays open while any carrier handle from it exists; when
 * the last reference goes (the caller's and every carrier's), buffered
 * writes are flushed (errors then go unreported: call flush or close to
 * hear about them) and the node is closed.
 *
 * Threads: every function here is thread-safe. One mutex per device
 * serializes allocation, release, slot I/O, flush and the start and end of
 * move transfers on it (a carrier's own mutex is taken before the
 * device's, never after); transfers themselves run without it, side by
 * side on disjoint byte ranges. Slot reads/writes and release wait (the
 * carrier's mutex held) for a transfer that touches a page of their byte
 * range to end. Calls that block: open (ioctls), allocate (zero-writes),
 * flush and close (fdatasync), slot reads/writes, release, and dropping
 * the last carrier of a closing device (its flush). None of them calls
 * back into a binding, so a binding may make them with its own lock (a
 * GIL) released. */
#ifndef STRIDEWEAVE_BLOCK_DEVICE_H
#define STRIDEWEAVE_BLOCK_DEVICE_H

#include "strideweave/export.h"

#include <stdint.h>

#include "strideweave/carrier.h"
#include "strideweave/dtype.h"
#include "strideweave/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sw_block_device sw_block_device;

/* Open `path` read-write. SW_EINVAL for NULL, a node that is not
 * block-special (a regular file, a directory, a character device, a FIFO)
 * or inconsistent sizes; SW_EIO (errno kept) when it cannot be opened
 * read-write; SW_EOVERFLOW for a capacity beyond int64; SW_ENOTSUP off
 * Linux. Nothing is written; a failure leaves nothing open. */
SW_API sw_status sw_block_device_open(const char *path, sw_block_device **out, sw_error *err);

SW_API sw_block_device *sw_block_device_ref(sw_block_device *d);
/* NULL is ignored; see the top of this file for the last reference. */
SW_API void sw_block_device_unref(sw_block_device *d);

/* A carrier of `size` Float32 slots in one extent: its start and length
 * are multiples of the allocation alignment, its length is 4*size rounded
 * up, at the lowest offset where it fits; size 0 reserves nothing. Unless
 * `flags` has SW_CARRIER_EMPTY the extent is zero-written first (a failed
 * zero-write frees it and faults the device). SW_CARRIER_IMMUTABLE gives
 * an immutable carrier. Checks in order: NULL device or out (SW_ETYPE /
 * SW_EINVAL), negative size (SW_EINVAL), byte size overflow
 * (SW_EOVERFLOW), dtype other than SW_DT_FLOAT32 (SW_EINVAL), closed or
 * faulted device (SW_ESTATE), no free range left (SW_ENOMEM). The caller
 * gets one reference to the carrier. */
SW_API sw_status sw_block_device_allocate(sw_block_device *d, int64_t size, sw_dtype dtype,
                                          int flags, sw_carrier **out, sw_error *err);

/* Make every slot write so far durable on the device. SW_EIO (errno kept)
 * when write-back fails (the device is then faulted); SW_ESTATE when it is
 * already faulted. A closed device has nothing to flush (SW_OK). */
SW_API sw_status sw_block_device_flush(sw_block_device *d, sw_error *err);

/* The same carrier, its slots written with `values` (`count` Float32
 * slots, native order) instead of zeros: the write is buffered like a
 * slot write (sw_block_device_flush makes it durable) and counts on no
 * version (the carrier starts at version 0). The checks of
 * sw_block_device_allocate; `values` may be NULL only when count is 0. A
 * failed write frees the extent and faults the device. SW_CARRIER_EMPTY
 * is ignored. */
SW_API sw_status sw_block_device_allocate_values(sw_block_device *d, const float *values,
                                                 int64_t count, int flags, sw_carrier **out,
                                                 sw_error *err);

/* Flush and close the node; again: nothing happens. SW_ESTATE while any
 * carrier handle from the device exists (released or not: drop them
 * first, including the handles of finished moves into or out of the
 * device, which hold their result until dropped: move.h); SW_EIO when the
 * flush fails, which faults the device and leaves
 * it open (closing it again then closes it). After close, allocate fails
 * SW_ESTATE. The handle stays valid until its last reference. */
SW_API sw_status sw_block_device_close(sw_block_device *d, sw_error *err);

/* Close at once when no carrier handle from the device exists (as
 * sw_block_device_close, except that with `even_on_error` a failing flush
 * still closes the node: the SW_EIO is reported, the device is faulted
 * and closed). Otherwise mark it *closing* and return SW_OK: allocate then
 * fails SW_ESTATE (the message says "closing"), its carriers keep working,
 * and the node is flushed and closed when the last carrier handle goes (a
 * failing flush there goes unreported, faults the device and still
 * closes). Closed already: nothing happens. This is the end of a scope
 * that must not fail because carriers outlive it (a `with` block). */
SW_API sw_status sw_block_device_close_when_unused(sw_block_device *d, int even_on_error,
                                                   sw_error *err);

/* Introspection; `d` must not be NULL. Never fails, never blocks on I/O. */
SW_API int sw_block_device_is_closed(sw_block_device *d);
/* 1 while marked closing by sw_block_device_close_when_unused (0 once closed). */
SW_API int sw_block_device_is_closing(sw_block_device *d);
SW_API int sw_block_device_is_faulted(sw_block_device *d);
SW_API const char *sw_block_device_path(sw_block_device *d); /* as given to open */
SW_API int64_t sw_block_device_capacity_bytes(sw_block_device *d);
SW_API int64_t sw_block_device_logical_block_size(sw_block_device *d);
SW_API int64_t sw_block_device_physical_block_size(sw_block_device *d);
/* max(logical, physical): extents start and end on it. */
SW_API int64_t sw_block_device_allocation_alignment(sw_block_device *d);

/* The device a carrier lives on (borrowed: valid while the caller holds
 * the carrier), also after release; NULL for a carrier of another class. */
SW_API sw_block_device *sw_block_device_of(sw_carrier *c);
/* B-6 for slot access: the words of the refusal (SW_ESTATE) a read or
 * write of `c` meets now because its device is faulted, or NULL (also for
 * NULL or another class). Static storage; thread-safe; nothing changes. A
 * binding that refuses before converting a value raises them as they are. */
SW_API const char *sw_block_device_carrier_unavailable(sw_carrier *c);
/* B-6 before a move of `c` (a move's row 9 checks the same): SW_ESTATE
 * when its device is faulted, "cannot move a BlockDeviceCarrier: the block
 * device PATH is faulted by an earlier I/O error, so its data can no longer
 * be trusted" (the Python API's words); SW_OK otherwise, also for NULL or a
 * carrier of another class. Nothing changes; thread-safe. For a binding
 * that refuses before work of its own (choosing a route). */
SW_API sw_status sw_block_device_carrier_check_movable(sw_carrier *c, sw_error *err);
/* The carrier's extent: its first byte on the device and its length in
 * bytes; both 0 for size 0, after release and for another class. */
SW_API int64_t sw_block_device_carrier_offset_bytes(sw_carrier *c);
SW_API int64_t sw_block_device_carrier_extent_bytes(sw_carrier *c);

/* The ops table of block device carriers, for comparing classes. */
SW_API extern const sw_carrier_class sw_block_device_carrier_class;

#ifdef __cplusplus
}
#endif

#endif
