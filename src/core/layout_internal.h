/* Layout internals shared with tensor.c (never installed). */
#ifndef SW_LAYOUT_INTERNAL_H
#define SW_LAYOUT_INTERNAL_H

#include <stddef.h>

#include "strideweave/layout.h"

/* Bytes a copy of `l` takes in one block (the struct and its arrays:
 * int64 arrays first, so they stay aligned whatever nprofile is). */
static inline size_t sw_layout_block_bytes(const sw_layout *l)
{
    return sizeof(sw_layout) + 2 * (size_t)l->nleaves * sizeof(int64_t) + (size_t)l->nprofile;
}
/* Copy `l` into `mem` (sw_layout_block_bytes(l) bytes, aligned for
 * int64_t): one block holding both a layout and its owner (a tensor). */
sw_layout *sw_layout_copy_into(void *mem, const sw_layout *l);

#endif
