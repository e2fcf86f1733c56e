/* Walks over the slots a layout reaches: where logical element k of
 * (offset, layout) lives (slot offset + layout(k), first mode fastest),
 * for callers that reach those slots themselves (host memory they hold, or
 * a binding's carrier whose slots are its own).
 *
 * These functions touch only the memory and arrays they are given: no
 * carrier, no lock, no callback. The caller owns every buffer; nothing is
 * kept after a call. Thread-safe (no shared state); concurrent calls must
 * not write the same memory. */
#ifndef STRIDEWEAVE_TENSOR_WALK_H
#define STRIDEWEAVE_TENSOR_WALK_H

#include "strideweave/export.h"

#include <stddef.h>
#include <stdint.h>

#include "strideweave/layout.h"
#include "strideweave/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when ordinal k sits at slot k for every k (leaves of extent 1 aside,
 * each stride is the product of the earlier extents): values in logical
 * order are then the memory itself. */
SW_API int sw_layout_is_flat(const sw_layout *layout);

/* sizes[i] = the size of top-level mode i (the product of its leaves'
 * extents) for i < min(rank, max); returns the rank. */
SW_API int32_t sw_layout_mode_sizes(const sw_layout *layout, int64_t *sizes, int32_t max);

/* Where a sum over some top-level modes puts each element: out[k] = the
 * ordinal, in the result, that ordinal k of `layout` adds into, when the
 * result's mode j is the layout's mode kept[j] (nkept 0: everything into
 * ordinal 0). SW_EINVAL for a kept mode outside [0, rank); SW_ETYPE for
 * NULL arrays; SW_ENOMEM. */
SW_API sw_status sw_layout_reduce_ordinals(const sw_layout *layout, const int32_t *kept,
                                           int32_t nkept, int64_t *out, sw_error *err);

/* out[k] = offset + layout(k) for every ordinal k in [0, size), in one
 * incremental walk (no division per element). SW_ETYPE for a NULL layout,
 * or a NULL out when the size is not 0. */
SW_API sw_status sw_layout_slots(const sw_layout *layout, int64_t offset, int64_t *out,
                                 sw_error *err);

/* Values in logical order (`in`, size elements of `itemsize` bytes) placed
 * at their slots of `base` (slot 0 of a host buffer holding at least
 * offset + cosize slots): base[offset + layout(k)] = in[k]. Several
 * ordinals on one slot: the last, in logical order, wins. SW_ETYPE for a
 * NULL argument; SW_EINVAL for itemsize 0 or a negative offset. */
SW_API sw_status sw_layout_scatter(void *base, int64_t offset, const sw_layout *layout,
                                   const void *in, size_t itemsize, sw_error *err);

/* Float32 accumulation in place: base[offset + layout(k)] += in[k], in
 * logical order (binary32 sums, one rounding each). The same errors as
 * sw_layout_scatter. */
SW_API sw_status sw_layout_add_f32(float *base, int64_t offset, const sw_layout *layout,
                                   const float *in, sw_error *err);

/* What a tensor of `layout` whose elements share slots receives when each
 * element's value goes to its slot: out[k] = the sum (binary32, in logical
 * order) of in[j] over every j on the slot of k. `in` and `out` hold size
 * floats and may not overlap. SW_ETYPE for a NULL argument; SW_ENOMEM. */
SW_API sw_status sw_layout_fold_f32(const sw_layout *layout, const float *in, float *out,
                                    sw_error *err);

#ifdef __cplusplus
}
#endif

#endif
