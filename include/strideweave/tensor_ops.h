/* Element-wise operations over tensors (tensor.h): copy, fill, the
 * coordinate-wise sum and product, and the sum over some top-level modes.
 *
 * Values are read the way sw_tensor_read_values reads them (one instant's
 * values, under the carrier's mutex) and written through the carrier's
 * slot writes, so every carrier whose slots the core holds takes part
 * (CPU, Generic, FileBacked, BlockDeviceCarrier, an Evictable), and so
 * does a SLOTS_UNLOCKED carrier (carrier.h) whose dtype has a slot width,
 * through its binding's batch callbacks (no lock held; see
 * sw_carrier_read_layout_as); any other STATE_ONLY carrier answers
 * SW_ENOTSUP (its binding reaches the slots).
 *
 * Arithmetic. Float32 and Int32 operands only (else SW_ETYPE). Int32 with
 * Int32 is Int32, computed exactly in 64 bits; the first result out of
 * range, in logical order, is SW_EOVERFLOW ("Int32 result N is out of
 * range"). Anything else is Float32: an Int32 operand is rounded to
 * binary32 first, and each result is rounded once (binary32 arithmetic).
 * reduce_sum adds in logical order (first mode fastest).
 *
 * Ownership: arguments are borrowed for the call; a result tensor handed
 * out through `out` is the caller's (one reference, sw_tensor_unref).
 * Threads: thread-safe; calls on FileBacked carriers block on file I/O.
 * A failing call changes no carrier. */
#ifndef STRIDEWEAVE_TENSOR_OPS_H
#define STRIDEWEAVE_TENSOR_OPS_H

#include "strideweave/export.h"

#include <stdint.h>

#include "strideweave/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sw_binary_op {
    SW_BINARY_ADD = 0,
    SW_BINARY_MUL = 1
} sw_binary_op;

/* The dtype of a op b: Int32 for two Int32 operands, else Float32. */
SW_API sw_dtype sw_binary_result_dtype(sw_dtype a, sw_dtype b);

/* The values of a op b in logical order into `out` (size slots of the
 * result dtype, caller's memory). Checks in this order: NULL arguments
 * (SW_ETYPE); shapes differ (SW_EINVAL: same profile and extents needed,
 * strides free, so broadcast views take part); dtypes (SW_ETYPE); then
 * the reads' statuses; then SW_EOVERFLOW. `out` unspecified on failure. */
SW_API sw_status sw_tensor_binary_values(sw_binary_op op, const sw_tensor *a,
                                         const sw_tensor *b, void *out, sw_error *err);

/* a + b and a * b in fresh storage: a new carrier of a's class (CPU or
 * Generic, else SW_ENOTSUP), mutable, version 0, laid out compactly
 * (the canonical layout of a's shape). The checks of
 * sw_tensor_binary_values first. */
SW_API sw_status sw_tensor_add(const sw_tensor *a, const sw_tensor *b, sw_tensor **out,
                               sw_error *err);
SW_API sw_status sw_tensor_mul(const sw_tensor *a, const sw_tensor *b, sw_tensor **out,
                               sw_error *err);

/* Sum `t` over the top-level modes `kept` does not name; result mode j is
 * t's mode kept[j] (distinct, in [0, rank): SW_EINVAL), nkept 0 sums
 * everything into one value. `accumulator`: SW_DT_FLOAT32 (binary32 sums)
 * or SW_DT_FLOAT64 (double sums rounded once at the end) for a Float32
 * tensor, SW_DT_INT32 for an Int32 one (exact, SW_EOVERFLOW out of range);
 * any other pairing is SW_ETYPE. The result's values, in its logical order
 * (the product of the kept modes' sizes, 1 when nkept is 0), go to `out`,
 * in t's dtype. */
SW_API sw_status sw_tensor_reduce_sum_values(const sw_tensor *t, const int32_t *kept,
                                             int32_t nkept, sw_dtype accumulator, void *out,
                                             sw_error *err);
/* The same into a fresh tensor like sw_tensor_add's: shape the kept modes
 * (one leaf of extent 1 when nkept is 0), canonical layout. */
SW_API sw_status sw_tensor_reduce_sum(const sw_tensor *t, const int32_t *kept, int32_t nkept,
                                      sw_dtype accumulator, sw_tensor **out, sw_error *err);

/* dst's elements become src's, coordinate by coordinate: same shape
 * (SW_EINVAL), same dtype (SW_ETYPE). src is read first (so the two may
 * share slots), then the span of dst's slots is written in one write of
 * its carrier: one version step, and the checks of sw_carrier_write
 * (released, not mutable, pending: SW_ESTATE). Slots of the span dst does
 * not reach keep their values (read before the write: a concurrent writer
 * of those slots may be undone). */
SW_API sw_status sw_tensor_copy(const sw_tensor *dst, const sw_tensor *src, sw_error *err);

/* Every element of `t` becomes *value (one slot of t's dtype), written as
 * sw_tensor_copy writes. */
SW_API sw_status sw_tensor_fill(const sw_tensor *t, const void *value, sw_error *err);

#ifdef __cplusplus
}
#endif

#endif
