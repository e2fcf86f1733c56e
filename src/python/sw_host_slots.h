/* Reaching a plane's slots from the binding: the slots a layout reaches,
 * walked by the core (sw_layout_slots.h), for the checked per-slot access of
 * carriers whose slots are the binding's (a class written in Python), and
 * the host memory of exact CPU/Generic carriers that the core's walks
 * (tensor_walk.h, tensor_ops.h) read and write in place. */
#ifndef SW_HOST_SLOTS_H
#define SW_HOST_SLOTS_H

#include "sw_carrier.h"
#include "sw_layout_slots.h"

#include <stdint.h>

/* Float32 host memory of an exact CPU/Generic carrier from which slots
 * [lo, lo + n) may be read directly (what the checked slot read would
 * return), or NULL: use sw_py_carrier_getitem. */
static inline float *sw_py_host_f32_readable(PyObject *carrier, int64_t lo, int64_t n)
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

/* As sw_py_host_f32_readable, for writing: also mutable now, nothing pending.
 * A direct write advances no version; the caller advances it once. */
static inline float *sw_py_host_f32_writable(PyObject *carrier, int64_t lo, int64_t n)
{
    float *data = sw_py_host_f32_readable(carrier, lo, n);
    SwCarrierObject *c = (SwCarrierObject *)carrier;
    if (!data || sw_py_state_pending(carrier) || !c->intrinsic_mutable ||
        sw_py_carrier_owned_elsewhere(carrier))
        return NULL;
    return data;
}

#endif
