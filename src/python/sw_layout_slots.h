/* The slots a plane's layout reaches, in logical order, as the core walks
 * them (strideweave/tensor_walk.h): what the binding's per-slot loops over
 * carriers whose slots are its own (a class written in Python) and over
 * fresh host memory it fills itself iterate, instead of walking layouts. */
#ifndef SW_LAYOUT_SLOTS_H
#define SW_LAYOUT_SLOTS_H

#include "sw_python.h"

#include <stdint.h>

#include "strideweave/tensor_walk.h"

/* slots[k] = offset + layout(k) for every ordinal k (the core's walk,
 * strideweave/tensor_walk.h): a PyMem array, or NULL with MemoryError set. */
static inline int64_t *sw_py_layout_slots(const sw_layout *L, int64_t offset)
{
    int64_t *slots = PyMem_Malloc(sizeof(int64_t) * (size_t)(L->size ? L->size : 1));
    sw_error err;
    if (!slots) {
        PyErr_NoMemory();
        return NULL;
    }
    if (sw_layout_slots(L, offset, slots, &err) != SW_OK) {
        PyMem_Free(slots);
        sw_py_raise(&err);
        return NULL;
    }
    return slots;
}

/* A flat run of `count` slots (one mode: extent count, stride 1) in *L,
 * its extent and stride kept in the caller's `ext` and `str`: what one
 * slot or one span of a carrier is read or written through. */
static inline void sw_py_run_layout(sw_layout *L, int64_t *ext, int64_t *str, int64_t count)
{
    static const uint8_t leaf[1] = {SW_NODE_LEAF};
    *ext = count;
    *str = 1;
    *L = (sw_layout){.rank = 1, .nleaves = 1, .nprofile = 1, .depth = 1, .size = count,
                     .cosize = count, .injective = 1, .extents = ext, .strides = str,
                     .profile = (uint8_t *)leaf};
}

#endif
