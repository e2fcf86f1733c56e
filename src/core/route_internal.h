/* What the move engine (move.c) needs from carrier classes that bring their
 * own transfer or restrict their routes (never installed). */
#ifndef SW_ROUTE_INTERNAL_H
#define SW_ROUTE_INTERNAL_H

#include "strideweave/carrier.h"
#include "strideweave/layout.h"
#include "strideweave/status.h"

/* A route's own transfer, run on a pool thread (or on the move's caller,
 * see sw_move_runs_block_route_here) with no carrier lock held (the pending
 * guard protects both carriers): copy the source tensor's physical span
 * (`layout`'s cosize slots from slot `src_offset` of `src`) into slots
 * [0, cosize) of `dst`, adding the bytes copied to `progress` (may be
 * NULL) atomically. */
typedef sw_status (*sw_route_transfer_fn)(sw_carrier *src, int64_t src_offset, sw_carrier *dst,
                                          const sw_layout *layout, int64_t *progress,
                                          sw_error *err);

/* Block device carriers (block_device_carrier.c). */
sw_status sw_block_device_route_transfer(sw_carrier *src, int64_t src_offset, sw_carrier *dst,
                                         const sw_layout *layout, int64_t *progress,
                                         sw_error *err);
/* 1 while a test holds block device transfers at a pause point: such a
 * move never runs on its caller (the test resumes it from there). */
int sw_block_device_route_may_pause(void);
/* 1 when a move between these exact classes may run at all (block device
 * carriers move only to and from CPU). */
int sw_block_device_pair_allowed(const sw_carrier_class *src, const sw_carrier_class *dst);
/* Row 9 of the move validation (move.h) with both carriers locked:
 * SW_ENOTSUP for a pair that is not allowed, SW_ESTATE for a faulted or
 * closed device. */
sw_status sw_block_device_check_move_locked(sw_carrier *src, sw_carrier *dst, sw_error *err);

/* 1 when the move engine can move values from `src` to `dst` carriers of
 * these exact classes (any route, the elementwise fallback included). */
int sw_move_pair_allowed(const sw_carrier_class *src, const sw_carrier_class *dst);

#endif
