/* What the move engine (move.c) needs of the route registry (route.c) and
 * of carrier classes that bring their own transfer or restrict their
 * routes (never installed). */
#ifndef SW_ROUTE_INTERNAL_H
#define SW_ROUTE_INTERNAL_H

#include <stddef.h>

#include "strideweave/block_device.h"
#include "strideweave/carrier.h"
#include "strideweave/layout.h"
#include "strideweave/route.h"
#include "strideweave/status.h"
#include "strideweave/tiled_evictable.h"

/* The core's own routes: the exact pairs with a bulk or class route (every
 * other pair the core reaches is the elementwise fallback). A fixed table,
 * so the engine reads it on every move without a lock; route.c holds it. */
typedef struct sw_route_builtin {
    const sw_carrier_class *src, *dst;
    sw_route_entry_kind kind;            /* SW_ROUTE_KIND_BULK or _CLASS */
    sw_route_transfer_fn transfer; /* _CLASS: the class's transfer */
} sw_route_builtin;

#define SW_ROUTE_BUILTINS 4
extern const sw_route_builtin sw_route_builtins[SW_ROUTE_BUILTINS];

/* The core's table entry for exactly (s, d), or NULL (elementwise). */
static inline const sw_route_builtin *sw_route_builtin_of(const sw_carrier_class *s,
                                                          const sw_carrier_class *d)
{
    for (size_t i = 0; i < SW_ROUTE_BUILTINS; i++)
        if (sw_route_builtins[i].src == s && sw_route_builtins[i].dst == d)
            return &sw_route_builtins[i];
    return NULL;
}

/* Row 9's class rules (route.h, "Refusals"), without the binding's
 * entries: which pin refuses the exact pair (s, d), if any. Inline and
 * without names, since the engine asks on every move and names the
 * carriers only when refusing. */
typedef enum sw_route_pin {
    SW_ROUTE_PIN_NONE = 0,
    SW_ROUTE_PIN_TILED = 1,       /* a TiledEvictable on either side */
    SW_ROUTE_PIN_BLOCK_DEVICE = 2 /* a BlockDeviceCarrier, the other side not CPU */
} sw_route_pin;

static inline sw_route_pin sw_route_pin_of(const sw_carrier_class *s, const sw_carrier_class *d)
{
    const sw_carrier_class *bd = &sw_block_device_carrier_class, *cpu = &sw_cpu_class;
    if (s == &sw_tiled_evictable_class || d == &sw_tiled_evictable_class)
        return SW_ROUTE_PIN_TILED;
    if ((s == bd || d == bd) && !(s == cpu && d == bd) && !(s == bd && d == cpu))
        return SW_ROUTE_PIN_BLOCK_DEVICE;
    return SW_ROUTE_PIN_NONE;
}

/* The refusal of `pin` (not NONE): SW_ENOTSUP naming the carriers
 * `s_name` and `d_name` (detail 0: the caller names the row). */
sw_status sw_route_refuse_pin(sw_route_pin pin, const char *s_name, const char *d_name,
                              sw_error *err);

/* Block device carriers (block_device_carrier.c). */
sw_status sw_block_device_route_transfer(sw_carrier *src, int64_t src_offset, sw_carrier *dst,
                                         const sw_layout *layout, int64_t *progress,
                                         sw_error *err);
/* 1 while a test holds block device transfers at a pause point: such a
 * move never runs on its caller (the test resumes it from there). */
int sw_block_device_route_may_pause(void);
/* The state part of row 9 (move.h) with both carriers locked: SW_ESTATE
 * when a block device carrier on either side has a faulted device. */
sw_status sw_block_device_check_faulted_locked(sw_carrier *src, sw_carrier *dst, sw_error *err);

/* Values slot by slot through the carriers' ops, for classes whose
 * storage no copy reaches: span (s, offset, l) into d's slots [0, cosize),
 * no lock held (the pending marks, or the caller, protect both). The move
 * engine's elementwise fallback and a route run here (move_here.c). */
sw_status sw_move_copy_slotwise(sw_carrier *s, int64_t offset, const sw_layout *l, sw_carrier *d,
                                sw_error *err);

/* 1 when the move engine can move values from `src` to `dst` carriers of
 * these exact classes by a route of its own (any, the elementwise
 * fallback included): the core's answer of sw_move_route_resolve. */
int sw_move_pair_allowed(const sw_carrier_class *src, const sw_carrier_class *dst);

#endif
