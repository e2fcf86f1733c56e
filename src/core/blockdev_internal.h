/* Block devices as slot storage (contract-carriers B-1..B-11).
 *
 * An sw_blockdev is one open Linux block-special node: its geometry (from
 * the BLKGETSIZE64 / BLKSSZGET / BLKPBSZGET ioctls), an extent allocator
 * over its capacity, one mutex that serializes allocation, release and
 * the start and end of transfers on it (transfers on disjoint extents then
 * run side by side), and a fault flag. Once an I/O error or a zero-byte
 * completion happens the device is *faulted* for good: nothing may trust
 * what is on it any more, so callers refuse further access.
 *
 * The allocator is a sorted array of live extents; free space is the gaps
 * between them, so freeing an extent coalesces with its free neighbours
 * by construction. Allocation is first fit at the lowest offset.
 *
 * This is the device layer under BlockDeviceCarrier: a C program wanting
 * block-device tensors uses block_device.h (refcounted handles, carriers,
 * moves), which owns its sw_blockdev and takes the locks below itself.
 * Internal (never installed, hidden in the shared library): the struct
 * holds pthread locks its callers must take by hand, so only the core
 * (blockdev.c, block_device_carrier.c, carrier.c) and the C tests of the layer
 * (tests/c/test_blockdev.c, test_block_device.c) include it.
 *
 * Ownership: sw_blockdev_open hands out a device the caller owns; close
 * then free it once no transfer or carrier uses it (sw_blockdev_free does
 * not wait). An sw_extent_map is a plain value its user initializes and
 * destroys. Nothing here keeps a pointer to a caller's buffer past the call.
 *
 * Threads: sw_blockdev_transfer, the positional I/O helpers and the fault
 * flag's inline helpers are thread-safe. The *_locked calls need d->lock
 * held by the caller; sw_blockdev_open/close/free and the extent map calls
 * are not thread-safe on the same object (one owner calls them). */
#ifndef STRIDEWEAVE_BLOCKDEV_INTERNAL_H
#define STRIDEWEAVE_BLOCKDEV_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "strideweave/status.h"
#include "strideweave/block_device.h"
#include "transfer_internal.h"

typedef struct sw_extent {
    int64_t start;
    int64_t length;
} sw_extent;

/* Extents in [0, capacity), sorted by start, never overlapping. A freed
 * one stays in `items` with length 0 until the table is compacted (a device
 * frees one extent per moved-out carrier: closing the array's hole at
 * every free cost a move time proportional to the number of carriers). */
typedef struct sw_extent_map {
    int64_t capacity;
    int64_t alignment; /* > 0; starts and lengths are multiples of it */
    sw_extent *items;  /* sw_malloc'd */
    size_t count, cap; /* live extents; slots of items */
    size_t used;       /* slots in use: the live extents and the freed ones */
} sw_extent_map;

void sw_extent_map_init(sw_extent_map *m, int64_t capacity, int64_t alignment);
void sw_extent_map_destroy(sw_extent_map *m);
/* Reserve `bytes` rounded up to the alignment at the lowest offset where
 * it fits. bytes == 0 reserves nothing and gives *start = 0.
 * SW_EOVERFLOW when rounding overflows, SW_ENOMEM when no gap fits (or the
 * table cannot grow). */
sw_status sw_extent_map_alloc(sw_extent_map *m, int64_t bytes, int64_t *start,
                                     int64_t *length, sw_error *err);
/* Retire the extent that starts at `start`; SW_EINVAL if none does. */
sw_status sw_extent_map_free(sw_extent_map *m, int64_t start, sw_error *err);
/* Round `bytes` up to a multiple of `alignment`; 0 on overflow. */
int sw_extent_round_up(int64_t bytes, int64_t alignment, int64_t *out);

/* Positional I/O of exactly `bytes`: EINTR is retried, short transfers are
 * continued. An OS error → SW_EIO (errno kept); a call that transfers zero
 * bytes → SW_ESTATE. Fault injection: "pread" / "pwrite" fail with EIO on
 * entry; per system call, "blockdev_eintr" simulates EINTR,
 * "blockdev_short" halves the request, "blockdev_zero" returns 0. */
sw_status sw_blockdev_pread(int fd, void *buf, size_t bytes, int64_t offset,
                                   sw_error *err);
sw_status sw_blockdev_pwrite(int fd, const void *buf, size_t bytes, int64_t offset,
                                    sw_error *err);

/* One transfer in flight on a device: its byte range there. */
typedef struct sw_blockdev_io {
    int64_t start, end;
    struct sw_blockdev_io *next;
} sw_blockdev_io;

typedef struct sw_blockdev {
    int fd;                 /* -1 once closed */
    int64_t capacity_bytes;
    int64_t logical_block_size;
    int64_t physical_block_size;
    int64_t alignment;      /* max(logical, physical) */
    _Atomic int faulted;
    /* Guards `extents`, `fd`, `busy` and the device's state. A transfer
     * holds it only to check the state and to list (later unlist) its byte
     * range: its reads and writes run without it, side by side with
     * transfers on other extents; transfers and slot I/O on overlapping
     * ranges wait for each other (`idle`), and release waits for the
     * transfers on its extent. */
    pthread_mutex_t lock;
    pthread_cond_t idle;    /* a transfer ended (with `lock`) */
    sw_blockdev_io *busy;   /* transfers in flight */
    sw_extent_map extents;
    int dfd;                /* the node opened O_DIRECT for large reads and
                               writes; -1 when the kernel refuses (or closed) */
    _Atomic int direct_refused; /* the kernel refused a direct request (EINVAL) */
    /* Group flushes (B-11): a writer takes a ticket once its write is done
     * and commits once a fdatasync that started after that covered it;
     * one fdatasync serves every writer waiting at its start. A writer on
     * the pool frees its place there while it waits (executor_internal.h),
     * so that more writers can come and share the next fdatasync. */
    pthread_mutex_t flush_lock;
    pthread_cond_t flush_cv;
    uint64_t flush_tickets;  /* tickets handed out */
    uint64_t flush_covered;  /* tickets a successful fdatasync covered */
    int flushing;            /* a fdatasync runs now */
    int flush_errno;         /* the errno of the fdatasync that failed */
    _Atomic uint64_t flushes; /* fdatasyncs run (the C tests count them) */
    /* Fork safety: every open device is listed, so that a forked child
     * can make each lock usable again (a thread of the parent may have
     * held it at fork()); `transferring` counts the transfers in flight. */
    _Atomic int transferring;
    struct sw_blockdev *open_prev, *open_next;
} sw_blockdev;

/* Open `path` read-write and read its geometry. The node is stat'ed
 * first and only a block-special one is opened (O_NOCTTY, O_CLOEXEC). SW_EIO (errno kept) when
 * it cannot be opened; SW_EINVAL when it is not a block device or its
 * geometry is inconsistent; SW_EOVERFLOW when a size does not fit int64;
 * SW_ENOTSUP off Linux. Nothing is written; failures close what they
 * opened. */
sw_status sw_blockdev_open(const char *path, sw_blockdev **out, sw_error *err);
/* Close the descriptor (idempotent); the struct stays until free. */
void sw_blockdev_close(sw_blockdev *d);
void sw_blockdev_free(sw_blockdev *d);

/* Callers hold d->lock around the calls below. */
/* Reserve an extent for `bytes` and, when `zero`, write zeros over it (a
 * failed zero-write frees it again and faults the device). */
sw_status sw_blockdev_alloc_locked(sw_blockdev *d, int64_t bytes, int zero,
                                   int64_t *start, int64_t *length, sw_error *err);
void sw_blockdev_free_locked(sw_blockdev *d, int64_t start);
/* Whether a transfer in flight touches a page of [start, start + length)
 * (a page shared with a running transfer counts: see blockdev.c); callers
 * that must not touch such a range wait with sw_blockdev_wait_locked
 * (which releases d->lock while it waits for a transfer to end). */
int sw_blockdev_busy_locked(sw_blockdev *d, int64_t start, int64_t length);
void sw_blockdev_wait_locked(sw_blockdev *d);
/* Slot I/O that faults the device when it fails. */
sw_status sw_blockdev_read_locked(sw_blockdev *d, void *buf, size_t bytes,
                                         int64_t offset, sw_error *err);
sw_status sw_blockdev_write_locked(sw_blockdev *d, const void *buf, size_t bytes,
                                          int64_t offset, sw_error *err);

/* fdatasync the device (EINTR retried): buffered slot writes become
 * durable. Shares a fdatasync that starts after the call with transfers
 * committing at the same time. A failure faults the device and gives SW_EIO with the errno.
 * Fault injection: "blockdev_fdatasync" fails it with EIO. A closed
 * device has nothing to flush. */
sw_status sw_blockdev_flush_locked(sw_blockdev *d, sw_error *err);

/* A move's transfer with one endpoint on `d` (its descriptor in a FILE
 * endpoint): refuses a faulted or closed device (SW_ESTATE), and faults
 * the device when the transfer fails. d->lock is held only around the
 * state check and the listing of the transfer's byte range: transfers on
 * disjoint extents run side by side; one on a range another transfer is
 * using waits for it. A transfer into the device (destination endpoint on
 * d->fd) returns SW_OK only once a fdatasync that started after its last
 * write succeeded (B-11); concurrent writers share one. Large bulk reads
 * and writes between host memory and a block-aligned device offset go
 * through `dfd` (direct I/O: writes from unaligned memory staged through
 * aligned buffers, copying the next chunk while the previous one is
 * written); unaligned tails and everything else are buffered I/O on `fd`.
 * No Python, no GIL: pool threads call it. */
sw_status sw_blockdev_transfer(sw_blockdev *d, const sw_transfer *t, sw_error *err);
/* 1 when a test armed a pause point inside sw_blockdev_transfer: such a
 * transfer must run on a pool thread, never on the thread that is to
 * resume it. Always 0 without fault injection. */
int sw_blockdev_transfer_may_pause(void);

/* The device under a BlockDeviceCarrier handle (borrowed, valid while the
 * caller holds the handle), to run a move's transfer with
 * sw_blockdev_transfer, and the transfer endpoint of a block device
 * carrier: the device's descriptor, `offset` = the extent start in slots;
 * 0 (and `*out` untouched) for a carrier of another class
 * (sw_carrier_endpoint answers for every class). */
sw_blockdev *sw_block_device_primitive(sw_block_device *d);
int sw_block_device_carrier_endpoint(sw_carrier *c, sw_endpoint *out);

static inline int sw_blockdev_is_faulted(sw_blockdev *d)
{
    return atomic_load(&d->faulted);
}
static inline void sw_blockdev_set_faulted(sw_blockdev *d)
{
    atomic_store(&d->faulted, 1);
}

#endif
