/* Bulk reads of a tensor's values: the span of slots its layout reaches is
 * read once (host memory in place, anything else through one ops->read of
 * the span) and gathered into logical order. One lock of the carrier for
 * the whole read, so no state change lands between two elements.
 *
 * The `_as` forms read and write a layout's values as a dtype the caller
 * names, for every carrier with slots: those the core holds (the read
 * above; a write of the span in one sw_carrier_write), and those of a
 * SLOTS_UNLOCKED class, whose binding's batch callbacks run with no lock
 * held (carrier.h gives the order and the race). */
#include <string.h>

#include "carrier_internal.h"
#include "strideweave/alloc.h"
#include "strideweave/copy.h"
#include "strideweave/tensor_walk.h"
#include "tensor_internal.h"

/* Gather `l` at slot `first` of `base` into out. */
static sw_status gather(const sw_layout *l, const char *base, int64_t first, size_t bytes,
                        void *out, sw_error *err)
{
    int64_t ext[SW_COPY_MAX_DIMS], str[SW_COPY_MAX_DIMS];
    int n = sw_copy_layout_modes(l, ext, str);
    if (n < 0)
        return sw_error_set(err, SW_EINVAL, "tensor: more than %d modes of extent > 1",
                            SW_COPY_MAX_DIMS);
    return sw_copy_gather(out, base + (size_t)first * bytes, str, ext, n, bytes, err);
}

/* The span [offset, offset + cosize) read into a buffer, then gathered:
 * FileBacked (one pread), an Evictable (its primary), a block device. */
static sw_status read_span_locked(sw_carrier *c, int64_t offset, const sw_layout *l,
                                  size_t bytes, void *out, sw_error *err)
{
    char *buf = sw_malloc((size_t)l->cosize * bytes);
    if (!buf)
        return sw_error_set(err, SW_ENOMEM, "%s: out of memory reading %lld slots",
                            sw_carrier_name(c), (long long)l->cosize);
    sw_status st = c->ops->read(c->impl, offset, l->cosize, buf, err);
    if (st == SW_OK)
        st = gather(l, buf, 0, bytes, out, err);
    sw_free(buf);
    return st;
}

static sw_status read_values_locked(sw_carrier *c, int64_t offset, const sw_layout *l,
                                    void *out, sw_error *err)
{
    sw_status st = sw_carrier_check_readable_locked(c, err);
    if (st != SW_OK)
        return st;
    if (SW_CARRIER_STATE_ONLY(c))
        return sw_carrier_refuse_state_only(c, "read a tensor's values", err);
    int64_t size = c->ops->size(c->impl), end;
    /* Strides are >= 0, so the slots reached are offset .. offset + cosize - 1;
     * a layout is checked against the size when a tensor is made, but a
     * binding's triple may not have been. */
    if (offset < 0 || __builtin_add_overflow(offset, l->cosize, &end) || end > size)
        return sw_error_set(err, SW_ERANGE,
                            "the tensor reaches slots %lld..%lld of a %s carrier of size %lld",
                            (long long)offset, (long long)(offset + l->cosize - 1),
                            sw_carrier_name(c), (long long)size);
    size_t bytes = sw_dtype_slot_bytes(c->dtype);
    sw_carrier_storage where = {0};
    if (c->ops->storage && c->ops->storage(c->impl, &where, NULL) == SW_OK &&
        where.kind == SW_ENDPOINT_HOST && where.host)
        return gather(l, where.host, offset, bytes, out, err);
    return read_span_locked(c, offset, l, bytes, out, err);
}

sw_status sw_carrier_read_layout(sw_carrier *c, int64_t offset, const sw_layout *layout,
                                 void *out, sw_error *err)
{
    if (!c || !layout || (!out && layout->size > 0))
        return sw_error_set(err, SW_ETYPE,
                            "sw_carrier_read_layout: carrier, layout and out must not be NULL");
    if (layout->size == 0)
        return SW_OK;
    if (SW_CARRIER_SLOTS_UNLOCKED(c) && sw_dtype_slot_bytes(c->dtype) > 0)
        return sw_carrier_read_layout_as(c, offset, layout, c->dtype, out, err);
    pthread_mutex_lock(&c->lock);
    sw_status st = read_values_locked(c, offset, layout, out, err);
    pthread_mutex_unlock(&c->lock);
    return st;
}

/* ---- any dtype the caller names (tensor.h: sw_carrier_*_layout_as) ----- */

static sw_status check_as_args(sw_carrier *c, int64_t offset, const sw_layout *layout,
                               const void *buf, const char *fn, sw_error *err)
{
    if (!c || !layout || (!buf && layout->size > 0))
        return sw_error_set(err, SW_ETYPE, "%s: carrier, layout and buffer must not be NULL",
                            fn);
    if (offset < 0)
        return sw_error_set(err, SW_ERANGE, "%s: offset %lld is negative", fn,
                            (long long)offset);
    return SW_OK;
}

/* A carrier with slots of its own holds values of its dtype only. */
static sw_status check_as_dtype(sw_carrier *c, sw_dtype as, sw_error *err)
{
    if (as == c->dtype)
        return SW_OK;
    const sw_dtype_info *want = sw_dtype_info_of(as);
    return sw_error_set(err, SW_ETYPE, "%s: its slots hold %s values, not %s",
                        sw_carrier_name(c), sw_dtype_info_of(c->dtype)->name,
                        want ? want->name : "an unknown dtype");
}

/* The slots (offset + layout(k)) a batch callback gets, or NULL (err set). */
static int64_t *walk_of(sw_carrier *c, int64_t offset, const sw_layout *layout, sw_error *err)
{
    int64_t *slots = sw_malloc((size_t)layout->size * sizeof *slots);
    if (!slots) {
        sw_error_set(err, SW_ENOMEM, "%s: out of memory for %lld slot numbers",
                     sw_carrier_name(c), (long long)layout->size);
        return NULL;
    }
    if (sw_layout_slots(layout, offset, slots, err) != SW_OK) {
        sw_free(slots);
        return NULL;
    }
    return slots;
}

/* Steps 2 (and 3) of carrier.h's SLOTS_UNLOCKED order: the callback with
 * no lock held, then one version step for a write that succeeded, unless
 * the class's callback steps it itself (WRITES_STEP_VERSION). The checks
 * (step 1) were made by the caller, which dropped the mutex. */
static sw_status unlocked_batch(sw_carrier *c, int64_t offset, const sw_layout *layout,
                                sw_dtype as, void *out, const void *in, sw_error *err)
{
    int64_t *slots = walk_of(c, offset, layout, err);
    if (!slots)
        return err ? err->code : SW_ENOMEM;
    sw_status st = in ? c->ops->write_slots(c->impl, slots, layout->size, as, in, err)
                      : c->ops->read_slots(c->impl, slots, layout->size, as, out, err);
    sw_free(slots);
    if (st == SW_OK && in && !(c->ops->flags & SW_CARRIER_CLASS_WRITES_STEP_VERSION)) {
        pthread_mutex_lock(&c->lock);
        if (!c->released && !sw_carrier_in_transfer_locked(c))
            c->version++;
        pthread_mutex_unlock(&c->lock);
    }
    return st;
}

/* `in` (values in logical order) over the span of slots the layout
 * reaches, in one carrier write; the span is read first unless the
 * layout covers all of it. */
static sw_status write_span(sw_carrier *c, int64_t offset, const sw_layout *layout,
                            const void *in, sw_error *err)
{
    size_t bytes = sw_dtype_slot_bytes(c->dtype);
    int dense = layout->cosize == layout->size && sw_layout_is_flat(layout);
    char *span = dense ? NULL : sw_malloc((size_t)layout->cosize * bytes);
    if (!dense && !span)
        return sw_error_set(err, SW_ENOMEM, "%s: out of memory writing %lld slots",
                            sw_carrier_name(c), (long long)layout->cosize);
    sw_status st = SW_OK;
    if (!dense) {
        st = sw_carrier_read(c, offset, layout->cosize, span, err);
        if (st == SW_OK)
            st = sw_layout_scatter(span, 0, layout, in, bytes, err);
    }
    if (st == SW_OK)
        st = sw_carrier_write(c, offset, layout->cosize, dense ? in : span, err);
    sw_free(span);
    return st;
}

/* Both directions (in NULL: a read into out), in tensor.h's order. */
static sw_status layout_as(sw_carrier *c, int64_t offset, const sw_layout *layout, sw_dtype as,
                           void *out, const void *in, sw_error *err)
{
    sw_status st = check_as_args(c, offset, layout, in ? in : out,
                                 in ? "sw_carrier_write_layout_as" : "sw_carrier_read_layout_as",
                                 err);
    if (st != SW_OK || layout->size == 0)
        return st;
    if (!SW_CARRIER_STATE_ONLY(c)) {
        if ((st = check_as_dtype(c, as, err)) != SW_OK)
            return st;
        return in ? write_span(c, offset, layout, in, err)
                  : sw_carrier_read_layout(c, offset, layout, out, err);
    }
    pthread_mutex_lock(&c->lock);
    st = in ? sw_carrier_check_writable_locked(c, "write to", err)
            : sw_carrier_check_readable_locked(c, err);
    pthread_mutex_unlock(&c->lock);
    /* A class without write_slots writes its slots through its binding only. */
    if (st == SW_OK && (!SW_CARRIER_SLOTS_UNLOCKED(c) || (in && !c->ops->write_slots)))
        st = sw_carrier_refuse_state_only(c, in ? "write a tensor's values"
                                                : "read a tensor's values", err);
    return st == SW_OK ? unlocked_batch(c, offset, layout, as, out, in, err) : st;
}

sw_status sw_carrier_read_layout_as(sw_carrier *c, int64_t offset, const sw_layout *layout,
                                    sw_dtype as, void *out, sw_error *err)
{
    return layout_as(c, offset, layout, as, out, NULL, err);
}

sw_status sw_carrier_write_layout_as(sw_carrier *c, int64_t offset, const sw_layout *layout,
                                     sw_dtype as, const void *in, sw_error *err)
{
    return layout_as(c, offset, layout, as, NULL, in, err);
}

sw_status sw_tensor_read_values(const sw_tensor *t, void *out, sw_error *err)
{
    if (!t)
        return sw_error_set(err, SW_ETYPE, "sw_tensor_read_values: tensor must not be NULL");
    return sw_carrier_read_layout(t->carrier, t->offset, t->layout, out, err);
}
