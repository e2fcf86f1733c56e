/* Tensor handle internals shared with move.c (never installed). */
#ifndef SW_TENSOR_INTERNAL_H
#define SW_TENSOR_INTERNAL_H

#include "strideweave/tensor.h"

struct sw_tensor {
    _Atomic long refs;
    sw_carrier *carrier; /* one reference */
    int64_t offset;
    sw_layout *layout;   /* owned */
};

/* Wrap without checks; takes a new carrier reference and owns `layout`
 * from success on. NULL on SW_ENOMEM. */
sw_tensor *sw_tensor_wrap(sw_carrier *c, int64_t offset, sw_layout *layout, sw_error *err);

#endif
