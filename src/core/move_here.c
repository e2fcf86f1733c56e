/* A route run on the caller's thread (move.h, "A route run here"): the
 * transfer of a pair of carriers without a move around it. A binding's
 * operation objects (MoveOperation._copy) and its tier copies call this
 * instead of describing transfers themselves, so the pair's route, the
 * checks and the pending marks are the core's in one place. */
#include "carrier_internal.h"
#include "fault_internal.h"
#include "route_internal.h"
#include "tensor_internal.h"

#include "strideweave/alloc.h"
#include "strideweave/copy.h"
#include "strideweave/move.h"
#include "transfer_internal.h"

/* What the checks found, for the copy that follows without a lock. */
typedef struct here_plan {
    sw_route_transfer_fn transfer; /* a class's own (block device), or NULL */
    int storage;                   /* both carriers expose host memory or a file */
    sw_endpoint s, d;              /* with `storage` */
    int span;                      /* copy the physical span (bulk) */
} here_plan;

static sw_status refuse(sw_error *err, sw_status code, sw_move_refusal row, const char *what,
                        sw_carrier *c)
{
    sw_error_set(err, code, "transfer: the %s %s carrier %s", what, sw_carrier_name(c),
                 row == SW_MOVE_SOURCE_RELEASED || row == SW_MOVE_DESTINATION_RELEASED
                     ? "is released"
                     : "is pending in a move");
    if (err)
        err->detail = row;
    return code;
}

static sw_status with_row(sw_status st, sw_move_refusal row, sw_error *err)
{
    if (st != SW_OK && err)
        err->detail = row;
    return st;
}

/* The carriers' state rows, both locked: released, pending (when the call
 * marks), dtype, row 9. */
static sw_status check_state_locked(sw_carrier *s, sw_carrier *d, unsigned flags, sw_error *err)
{
    int mark = (flags & SW_MOVE_HERE_MARK) != 0;
    int why = sw_carrier_refusal_locked(s, mark);
    if (why)
        return refuse(err, SW_ESTATE,
                      why == SW_CARRIER_REFUSED_RELEASED ? SW_MOVE_SOURCE_RELEASED
                                                         : SW_MOVE_SOURCE_PENDING,
                      "source", s);
    why = sw_carrier_refusal_locked(d, mark);
    if (why)
        return refuse(err, SW_ESTATE,
                      why == SW_CARRIER_REFUSED_RELEASED ? SW_MOVE_DESTINATION_RELEASED
                                                         : SW_MOVE_DESTINATION_PENDING,
                      "destination", d);
    /* Slots of another width: the copy would cut or overrun them. (A
     * move's dtype row runs before its transfer; a copy of the same width
     * between dtypes a binding relates is the binding's to allow.) */
    if (sw_dtype_slot_bytes(s->dtype) != sw_dtype_slot_bytes(d->dtype))
        return with_row(sw_error_set(err, SW_ETYPE,
                                     "transfer: the destination holds %s, the source %s",
                                     sw_dtype_info_of(d->dtype)->name,
                                     sw_dtype_info_of(s->dtype)->name),
                        SW_MOVE_DTYPE_MISMATCH, err);
    sw_route_pin pin = sw_route_pin_of(s->ops, d->ops);
    sw_status st = pin != SW_ROUTE_PIN_NONE
                       ? sw_route_refuse_pin(pin, sw_carrier_name(s), sw_carrier_name(d), err)
                       : sw_block_device_check_faulted_locked(s, d, err);
    if (st != SW_OK)
        return with_row(st, SW_MOVE_ROUTE_REFUSED, err);
    if (SW_CARRIER_STATE_ONLY(s) || SW_CARRIER_STATE_ONLY(d))
        return with_row(sw_carrier_refuse_state_only(SW_CARRIER_STATE_ONLY(s) ? s : d,
                                                     "a transfer here", err),
                        SW_CARRIER_STATE_ONLY(s) ? SW_MOVE_SOURCE_STATE_ONLY
                                                 : SW_MOVE_DESTINATION_STATE_ONLY,
                        err);
    return SW_OK;
}

/* The span's bounds in both carriers (state checked, both locked). */
static sw_status check_span_locked(sw_carrier *s, int64_t offset, const sw_layout *l,
                                   sw_carrier *d, sw_error *err)
{
    int64_t end;
    if (offset < 0 || __builtin_add_overflow(offset, l->cosize, &end) ||
        end > s->ops->size(s->impl))
        return sw_error_set(err, SW_EINVAL,
                            "transfer: the span [%lld, %lld + %lld) is past the end of the "
                            "%s source",
                            (long long)offset, (long long)offset, (long long)l->cosize,
                            sw_carrier_name(s));
    if (d->ops->size(d->impl) < l->cosize)
        return with_row(sw_error_set(err, SW_EINVAL,
                                     "transfer: the %s destination holds %lld slots, not the "
                                     "%lld the span needs",
                                     sw_carrier_name(d), (long long)d->ops->size(d->impl),
                                     (long long)l->cosize),
                        SW_MOVE_TOO_SMALL, err);
    return SW_OK;
}

/* The pair's route and the copy it takes. The endpoints are read before
 * the pair is locked (each takes its carrier's lock); a carrier released
 * meanwhile is refused by the checks that follow, and the storage they
 * name stays while the caller's protection (or SW_MOVE_HERE_MARK) holds. */
static void find_route(sw_carrier *s, sw_carrier *d, here_plan *p)
{
    const sw_route_builtin *b = sw_route_builtin_of(s->ops, d->ops);
    p->transfer = b && b->kind == SW_ROUTE_KIND_CLASS ? b->transfer : NULL;
    p->storage = !p->transfer && sw_carrier_endpoint(s, &p->s) && sw_carrier_endpoint(d, &p->d);
    p->span = b != NULL;
}

/* The caller's choice of copy (both locked). */
static sw_status plan_locked(sw_carrier *s, sw_carrier *d, unsigned flags, here_plan *p,
                             sw_error *err)
{
    p->span = flags & SW_MOVE_HERE_SPAN     ? 1
              : flags & SW_MOVE_HERE_VALUES ? 0
                                            : p->span;
    if (!p->transfer && !p->storage && (flags & (SW_MOVE_HERE_SPAN | SW_MOVE_HERE_VALUES)))
        return with_row(sw_error_set(err, SW_ENOTSUP,
                                     "transfer: a copy through storage needs host memory or a "
                                     "file on both sides, not %s to %s",
                                     sw_carrier_name(s), sw_carrier_name(d)),
                        SW_MOVE_ROUTE_REFUSED, err);
    return SW_OK;
}

/* With SW_MOVE_HERE_MARK the marks are a carrier pair's (binding.h), so
 * that a child forked during the copy ends them as it ends a binding's. */
static sw_status check_and_mark(sw_carrier *s, int64_t offset, const sw_layout *l, sw_carrier *d,
                                unsigned flags, here_plan *p, sw_carrier_pair *pair,
                                sw_error *err)
{
    int mark = (flags & SW_MOVE_HERE_MARK) != 0;
    find_route(s, d, p);
    if (mark)
        sw_carrier_pair_lock();
    sw_carrier_lock_pair(s, d);
    sw_status st = check_state_locked(s, d, flags, err);
    if (st == SW_OK)
        st = check_span_locked(s, offset, l, d, err);
    if (st == SW_OK)
        st = plan_locked(s, d, flags, p, err);
    if (st == SW_OK && mark) {
        *pair = (sw_carrier_pair){.src = s, .dst = d};
        sw_carrier_pair_mark_locked(pair,
                                    SW_CARRIER_PENDING_SOURCE | SW_CARRIER_PENDING_DESTINATION,
                                    0);
    }
    sw_carrier_unlock_pair(s, d);
    if (mark)
        sw_carrier_pair_unlock();
    return st;
}

sw_status sw_move_copy_slotwise(sw_carrier *s, int64_t offset, const sw_layout *l, sw_carrier *d,
                               sw_error *err)
{
    unsigned char slot[16];
    for (int64_t k = 0; k < l->size; k++) {
        int64_t idx;
        sw_status st = sw_layout_index(l, k, &idx, err);
        if (st == SW_OK)
            st = s->ops->read(s->impl, offset + idx, 1, slot, err);
        if (st == SW_OK)
            st = d->ops->write(d->impl, idx, 1, slot, err);
        if (st != SW_OK)
            return st;
    }
    return SW_OK;
}

static sw_status copy_storage(const here_plan *p, int64_t offset, const sw_layout *l,
                              sw_dtype dtype, sw_error *err)
{
    int64_t extents[SW_COPY_MAX_DIMS], strides[SW_COPY_MAX_DIMS];
    int n = sw_copy_layout_modes(l, extents, strides);
    if (n < 0)
        return sw_error_set(err, SW_EINVAL, "layout has too many modes to move");
    sw_transfer t = {
        .src = p->s, .dst = p->d, .itemsize = sw_dtype_slot_bytes(dtype), .bulk = p->span,
        .cosize = l->cosize, .ndim = n, .extents = extents, .strides = strides,
    };
    t.src.offset += offset;
    return sw_transfer_run(&t, err);
}

static sw_status run_plan(const here_plan *p, sw_carrier *s, int64_t offset, const sw_layout *l,
                          sw_carrier *d, sw_error *err)
{
    SW_FAULT_PAUSE("move_here_transfer_pause"); /* tests: fork during the copy */
    if (SW_FAULT_HIT("move_here_transfer")) /* tests: a copy failing midway */
        return sw_error_set(err, SW_EIO, "transfer: injected transfer failure");
    if (p->transfer)
        return p->transfer(s, offset, d, l, NULL, err);
    if (p->storage)
        return copy_storage(p, offset, l, s->dtype, err);
    return sw_move_copy_slotwise(s, offset, l, d, err);
}

sw_status sw_move_transfer_span_here(sw_carrier *src, int64_t offset, const sw_layout *layout,
                                     sw_carrier *dst, unsigned flags, sw_error *err)
{
    if (!src || !dst || !layout)
        return with_row(sw_error_set(err, SW_ETYPE, "transfer: %s is NULL",
                                     !src ? "the source" : !dst ? "the destination"
                                                                : "the layout"),
                        !src ? SW_MOVE_NO_SOURCE : !dst ? SW_MOVE_NO_DESTINATION : 0, err);
    if (src == dst)
        return with_row(sw_error_set(err, SW_EINVAL,
                                     "transfer: the source and destination are one carrier"),
                        SW_MOVE_SAME_CARRIER, err);
    here_plan p;
    sw_carrier_pair pair = {0};
    sw_status st = check_and_mark(src, offset, layout, dst, flags, &p, &pair, err);
    if (st != SW_OK)
        return st;
    st = run_plan(&p, src, offset, layout, dst, err);
    sw_carrier_pair_end(&pair); /* nothing without SW_MOVE_HERE_MARK */
    return st;
}

sw_status sw_move_transfer_here(const sw_tensor *t, sw_carrier *dst, unsigned flags,
                                sw_error *err)
{
    if (!t)
        return with_row(sw_error_set(err, SW_ETYPE, "transfer: the tensor is NULL"),
                        SW_MOVE_NO_SOURCE, err);
    return sw_move_transfer_span_here(t->carrier, t->offset, t->layout, dst, flags, err);
}
