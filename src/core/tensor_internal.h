/* Tensor handle internals shared with move.c (never installed). */
#ifndef SW_TENSOR_INTERNAL_H
#define SW_TENSOR_INTERNAL_H

#include "strideweave/binding.h"
#include "strideweave/tensor.h"

struct sw_tensor {
    _Atomic long refs;
    sw_carrier *carrier; /* one reference */
    int64_t offset;
    sw_layout *layout;   /* owned: a block of its own, or the tensor's own
                            block (layout_inline) */
    uint8_t layout_inline;
    uint8_t pooled;      /* its block came from tensor_pool.c */
    uint8_t unchecked;   /* made by sw_tensor_new_unchecked: its span was
                            never checked against the carrier, so a move
                            checks it as a span's (sw_move_span_async) */
};

/* Wrap without checks; takes a new carrier reference and owns `layout`
 * from success on. NULL on SW_ENOMEM. */
sw_tensor *sw_tensor_wrap(sw_carrier *c, int64_t offset, sw_layout *layout, sw_error *err);

#endif
