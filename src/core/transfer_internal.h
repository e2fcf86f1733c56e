/* Move kernels: copy a tensor's slots between two storage endpoints, each
 * host memory or a file descriptor, without Python and without the GIL.
 *
 * A move keeps the source Layout: the destination tensor has the same
 * extents and strides at offset 0. A *bulk* transfer copies the whole
 * physical span (`cosize` slots starting at the source offset, holes
 * included) into destination slots [dst.offset, dst.offset + cosize). An
 * *elementwise* transfer copies the logical values only: for every
 * coordinate c, dst[dst.offset + sum c_i*strides[i]] =
 * src[src.offset + sum c_i*strides[i]]; destination slots the layout does
 * not address are unspecified (a file destination may have them
 * overwritten with zeros, since files are written span-wise through a
 * staging buffer).
 *
 * File endpoints are read and written through sw_filestore_pread/pwrite in
 * chunks of at most SW_TRANSFER_CHUNK_BYTES each, so fault injection
 * ("pread", "pwrite") can fail a transfer part way through; a failure
 * returns SW_EIO with errno kept and leaves the source untouched.
 *
 * Internal (never installed): the move engine, the block device layer and
 * the C tests of the kernels (tests/c/test_transfer.c, test_blockdev.c,
 * test_block_device.c) use these; a C program moves tensors with move.h,
 * and the endpoint types are public in carrier.h (sw_carrier_storage).
 * Hidden in the shared library (no SW_API). */
#ifndef STRIDEWEAVE_TRANSFER_INTERNAL_H
#define STRIDEWEAVE_TRANSFER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "strideweave/carrier.h"
#include "strideweave/status.h"

#define SW_TRANSFER_CHUNK_BYTES ((size_t)8 << 20)

typedef struct sw_transfer {
    sw_endpoint src;
    sw_endpoint dst;
    size_t itemsize;          /* bytes per slot, > 0 */
    int bulk;                 /* 1: physical span; 0: logical values */
    int64_t cosize;           /* physical span in slots (>= 0) */
    int ndim;                 /* leaf modes, [0, SW_COPY_MAX_DIMS] */
    const int64_t *extents;   /* ndim leaf extents (>= 1) */
    const int64_t *strides;   /* ndim leaf strides (>= 0), shared by both */
    int64_t *progress;        /* NULL, or a byte counter the run adds to */
    int unwaited;             /* 1: nobody waits for it at once (host copies stream sooner,
                                 copy_stream_internal.h) */
} sw_transfer;

/* Progress: when t->progress is not NULL, the run adds the bytes it has
 * copied to *t->progress with atomic adds (other threads may read it
 * meanwhile), in all sw_transfer_bytes(t) on success: span copies chunk by
 * chunk (SW_TRANSFER_CHUNK_BYTES, host memory included), strided copies in
 * one step when they finish. */
/* The bytes a transfer copies: cosize * itemsize for a bulk transfer or a
 * layout that covers its span exactly, else the number of elements times
 * itemsize. 0 for a malformed description or one that overflows. */
int64_t sw_transfer_bytes(const sw_transfer *t);

/* Run one transfer. SW_EINVAL for a malformed description (unknown kind,
 * NULL host pointer with something to copy, negative offset, itemsize 0,
 * bad ndim); SW_EOVERFLOW when a byte offset does not fit in int64;
 * SW_ENOMEM when a staging buffer cannot be allocated; SW_EIO for a file
 * error. cosize 0 copies nothing and succeeds. */
sw_status sw_transfer_run(const sw_transfer *t, sw_error *err);

/* sw_transfer_run, with a large span copy (bulk, or a layout covering its
 * span) cut into huge-page-aligned parts run side by side on the helper
 * threads of parallel.h, so a fresh destination is faulted and filled by
 * several threads, `max_threads` at most counting the caller (<= 0: as
 * many as there are helpers). The first failing part's error is returned;
 * other parts may have written their pieces of the destination. A file
 * destination is written by the caller alone, chunk after chunk, as by
 * sw_transfer_run (its file system would run the parts' writes one at a
 * time anyway). With `owner`, a span held to fewer threads than there are
 * is still cut into parts, and a thread waiting for the work may run the
 * parts nobody started (sw_parallel_help(owner), parallel_internal.h). */
#define SW_TRANSFER_PARALLEL_MIN_BYTES ((int64_t)32 << 20) /* smaller spans: one thread */
sw_status sw_transfer_run_parallel(const sw_transfer *t, int max_threads, const void *owner,
                                   sw_error *err);

/* ---- What the move engine (move.c) asks beyond the above ---------------- */

/* sw_transfer_run of a transfer that copies its span whole and in order
 * (a bulk transfer, or one whose layout is a single stride-1 run over
 * cosize > 0 slots), on one thread, without its checks: the caller proved
 * the endpoints, the layout and the byte positions valid (a move checks
 * its span against both carriers under their locks). The checks and the
 * dispatch of sw_transfer_run cost a 4 KiB move about 250 instructions
 * (bench/move_overhead.py). Progress and fault points as sw_transfer_run. */
sw_status sw_transfer_run_whole_span(const sw_transfer *t, sw_error *err);

#endif
