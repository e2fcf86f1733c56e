/* Copy kernels: a byte span, and a strided copy of `ndim` modes.
 *
 * Modes are first-mode-fastest (contract-core G-4): mode 0 is innermost.
 * Strides are in elements of `itemsize` bytes and may be 0 (broadcast) or
 * negative; `src`/`dst` point at the element of coordinate 0. Source and
 * destination must not overlap. A destination mode with stride 0 is written
 * several times; the last write, in first-mode-fastest order, wins.
 * None of these functions allocate or call back into Python, so callers may
 * run them without the GIL.
 *
 * Ownership: the caller owns every buffer and array passed in; nothing is
 * kept after a call returns.
 * Threads: every function is thread-safe (no shared state); concurrent calls
 * must not write the same destination bytes. */
#ifndef STRIDEWEAVE_COPY_H
#define STRIDEWEAVE_COPY_H

#include "strideweave/export.h"

#include <stddef.h>
#include <stdint.h>

#include "strideweave/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* More modes than this is SW_EINVAL (hierarchical layouts flatten to leaves;
 * 64 leaves of extent >= 2 already exceed int64). */
#define SW_COPY_MAX_DIMS 64

/* memcpy of `nbytes` bytes; SW_EINVAL for a NULL pointer with nbytes > 0. */
SW_API sw_status sw_copy_span(void *dst, const void *src, size_t nbytes, sw_error *err);

/* dst[sum c_i * dst_strides[i]] = src[sum c_i * src_strides[i]] for every
 * coordinate c, 0 <= c_i < extents[i]. Adjacent modes that are contiguous in
 * both operands are merged and extent-1 modes dropped before copying;
 * contiguous innermost runs use memcpy. SW_EINVAL: ndim outside
 * [0, SW_COPY_MAX_DIMS], a negative extent, itemsize 0, a NULL array or
 * pointer when something is to be copied. SW_EOVERFLOW: an element count or
 * a byte offset that does not fit in int64. An extent 0 copies nothing;
 * ndim 0 copies one element. */
SW_API sw_status sw_copy_strided(void *dst, const int64_t *dst_strides,
                                 const void *src, const int64_t *src_strides,
                                 const int64_t *extents, int ndim, size_t itemsize,
                                 sw_error *err);

/* Gather a strided source into a contiguous, first-mode-fastest
 * destination (strides 1, e0, e0*e1, ...), and the scatter back. */
SW_API sw_status sw_copy_gather(void *dst, const void *src, const int64_t *src_strides,
                                const int64_t *extents, int ndim, size_t itemsize,
                                sw_error *err);
SW_API sw_status sw_copy_scatter(void *dst, const int64_t *dst_strides, const void *src,
                                 const int64_t *extents, int ndim, size_t itemsize,
                                 sw_error *err);

/* In place: drop extent-1 modes and merge mode i+1 into mode i when
 * stride[i+1] == stride[i] * extent[i] in both operands. Returns the new
 * number of modes; the visiting order of coordinates is unchanged. Expects
 * validated input (no extent 0 or below). */
SW_API int sw_copy_coalesce(int ndim, int64_t *extents, int64_t *src_strides,
                            int64_t *dst_strides);

/* The leaf modes of `layout` a copy walks, into extents/strides (room for
 * SW_COPY_MAX_DIMS each): extent-1 leaves are dropped, since they address
 * nothing new, which keeps any valid layout within the mode limit however
 * many leaves it was built with. Returns the count, or -1 when more than
 * SW_COPY_MAX_DIMS remain. */
struct sw_layout;
SW_API int sw_copy_layout_modes(const struct sw_layout *layout, int64_t *extents,
                                int64_t *strides);

/* Contiguous first-mode-fastest strides for `extents` (out[0] = 1). */
SW_API sw_status sw_copy_contiguous_strides(const int64_t *extents, int ndim,
                                            int64_t *out, sw_error *err);

#ifdef __cplusplus
}
#endif

#endif
