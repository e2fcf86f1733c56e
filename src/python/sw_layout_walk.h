/* Incremental walk over a layout's slots in logical-ordinal order (first
 * leaf fastest), replacing a per-ordinal sw_layout_index (a division walk
 * over every leaf). Shared by the autograd engine, the minimal operations
 * and the view nodes.
 *
 *     sw_walk w;
 *     if (sw_walk_init(&w, L, offset) < 0) return -1;   // PyErr set
 *     for (int64_t k = 0; k < L->size; k++) { use(w.idx); sw_walk_next(&w); }
 *     sw_walk_done(&w);
 *
 * w.idx is offset + sw_layout_index(L, k) for the current ordinal k. */
#ifndef SW_LAYOUT_WALK_H
#define SW_LAYOUT_WALK_H

#include "sw_carrier.h"

#include <stdint.h>

#define SW_WALK_INLINE 16

typedef struct {
    const sw_layout *L;
    int64_t idx;
    int64_t *digit;
    int64_t inline_digit[SW_WALK_INLINE];
} sw_walk;

/* 0, or -1 with MemoryError set. */
static inline int sw_walk_init(sw_walk *w, const sw_layout *L, int64_t start)
{
    w->L = L;
    w->idx = start;
    w->digit = w->inline_digit;
    if (L->nleaves > SW_WALK_INLINE) {
        w->digit = PyMem_Calloc((size_t)L->nleaves, sizeof(int64_t));
        if (!w->digit) {
            PyErr_NoMemory();
            return -1;
        }
    } else {
        for (int32_t j = 0; j < L->nleaves; j++)
            w->digit[j] = 0;
    }
    return 0;
}

/* Advance by one ordinal (past the last one, idx returns to start). */
static inline void sw_walk_next(sw_walk *w)
{
    const sw_layout *L = w->L;
    for (int32_t j = 0; j < L->nleaves; j++) {
        if (++w->digit[j] < L->extents[j]) {
            w->idx += L->strides[j];
            return;
        }
        w->idx -= L->strides[j] * (L->extents[j] - 1);
        w->digit[j] = 0;
    }
}

static inline void sw_walk_done(sw_walk *w)
{
    if (w->digit != w->inline_digit)
        PyMem_Free(w->digit);
    w->digit = w->inline_digit;
}

/* 1 when ordinal k sits at slot k for every k (a compact column-major
 * layout: leaves of extent 1 ignored, each other stride the product of the
 * earlier extents), so a walk is a plain array loop. */
static inline int sw_layout_is_flat(const sw_layout *L)
{
    int64_t expect = 1;
    for (int32_t j = 0; j < L->nleaves; j++) {
        if (L->extents[j] == 1)
            continue;
        if (L->strides[j] != expect)
            return 0;
        expect *= L->extents[j];
    }
    return 1;
}

/* Float32 host memory of an exact CPU/Generic carrier from which slots
 * [lo, lo + n) may be read directly (what the checked slot read would
 * return), or NULL: use sw_py_carrier_getitem. */
static inline float *sw_host_f32_readable(PyObject *carrier, int64_t lo, int64_t n)
{
    if (!Py_IS_TYPE(carrier, &SwCPU_Type) && !Py_IS_TYPE(carrier, &SwGeneric_Type))
        return NULL;
    SwHostCarrierObject *h = (SwHostCarrierObject *)carrier;
    if (h->dtype != SW_DT_FLOAT32 || !h->data || lo < 0 || n < 0 || lo + n > h->nslots)
        return NULL;
    sw_carrier_state s;
    sw_carrier_get_state(h->base.core, &s);
    if (s.released || (s.pending & SW_PENDING_DESTINATION))
        return NULL;
    return (float *)h->data;
}

/* As sw_host_f32_readable, for writing: also mutable now, nothing pending.
 * A direct write advances no version; the caller advances it once. */
static inline float *sw_host_f32_writable(PyObject *carrier, int64_t lo, int64_t n)
{
    float *data = sw_host_f32_readable(carrier, lo, n);
    SwCarrierObject *c = (SwCarrierObject *)carrier;
    if (!data || sw_py_state_pending(carrier) || !c->intrinsic_mutable ||
        sw_py_carrier_owned_elsewhere(carrier))
        return NULL;
    return data;
}

#endif
