/* Bulk reads of a tensor's values: the span of slots its layout reaches is
 * read once (host memory in place, anything else through one ops->read of
 * the span) and gathered into logical order. One lock of the carrier for
 * the whole read, so no state change lands between two elements. */
#include <string.h>

#include "carrier_internal.h"
#include "strideweave/alloc.h"
#include "strideweave/copy.h"
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
    pthread_mutex_lock(&c->lock);
    sw_status st = read_values_locked(c, offset, layout, out, err);
    pthread_mutex_unlock(&c->lock);
    return st;
}

sw_status sw_tensor_read_values(const sw_tensor *t, void *out, sw_error *err)
{
    if (!t)
        return sw_error_set(err, SW_ETYPE, "sw_tensor_read_values: tensor must not be NULL");
    return sw_carrier_read_layout(t->carrier, t->offset, t->layout, out, err);
}
