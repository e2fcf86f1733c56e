/* Tensor handles and DLPack export (element access: tensor_element.c;
 * views: tensor_view.c). A handle never changes after construction;
 * everything mutable lives in its carrier. */
#include <stdatomic.h>
#include <string.h>

#include "carrier_internal.h"
#include "dlpack_internal.h"
#include "strideweave/alloc.h"
#include "strideweave/copy.h"
#include "layout_internal.h"
#include "tensor_internal.h"
#include "tensor_pool.h"

/* A handle of `extra` bytes past the struct (an inline layout's block),
 * one reference, on a block of its own; `layout` set by the caller. */
static sw_tensor *tensor_alloc(sw_carrier *c, int64_t offset, size_t extra, sw_error *err)
{
    int pooled;
    sw_tensor *t = sw_tensor_block_take(sizeof *t + extra, &pooled);
    if (!t) {
        sw_error_set(err, SW_ENOMEM, "tensor: out of memory");
        return NULL;
    }
    atomic_init(&t->refs, 1);
    t->carrier = sw_carrier_ref(c);
    t->offset = offset;
    t->layout_inline = extra > 0;
    t->pooled = (uint8_t)pooled;
    t->unchecked = 0;
    return t;
}

sw_tensor *sw_tensor_wrap(sw_carrier *c, int64_t offset, sw_layout *layout, sw_error *err)
{
    sw_tensor *t = tensor_alloc(c, offset, 0, err);
    if (t)
        t->layout = layout;
    return t;
}

/* One allocation holding the tensor and its copy of `layout` (sizeof
 * sw_tensor is a multiple of 8, so the layout's int64 arrays stay aligned). */
static sw_tensor *wrap_copy(sw_carrier *c, int64_t offset, const sw_layout *layout,
                            sw_error *err)
{
    sw_tensor *t = tensor_alloc(c, offset, sw_layout_block_bytes(layout), err);
    if (t)
        t->layout = sw_layout_copy_into(t + 1, layout);
    return t;
}

/* sw_tensor_new's checks of the placement, in its order and words. */
static sw_status check_placement(sw_carrier *c, int64_t offset, const sw_layout *layout,
                                 sw_error *err)
{
    int64_t end;
    if (offset < 0)
        return sw_error_set(err, SW_EINVAL, "tensor: offset must be >= 0, not %lld",
                            (long long)offset);
    if (sw_carrier_is_state_only(c))
        return sw_carrier_refuse_state_only(c, "make a tensor on it", err);
    if (sw_carrier_is_released(c))
        return sw_error_set(err, SW_ESTATE, "tensor: the %s carrier is released",
                            sw_carrier_name(c));
    if (__builtin_add_overflow(offset, layout->cosize, &end) || end > sw_carrier_size(c))
        return sw_error_set(err, SW_ERANGE,
                            "tensor: offset %lld + cosize %lld exceeds the carrier's %lld slots",
                            (long long)offset, (long long)layout->cosize,
                            (long long)sw_carrier_size(c));
    return SW_OK;
}

static sw_status make_checked(sw_carrier *c, int64_t offset, const sw_layout *layout,
                              sw_tensor **out, sw_error *err)
{
    sw_status st = check_placement(c, offset, layout, err);
    if (st == SW_OK && !(*out = wrap_copy(c, offset, layout, err)))
        st = SW_ENOMEM;
    return st;
}

sw_status sw_tensor_new(sw_carrier *carrier, int64_t offset, const sw_layout *layout,
                        sw_tensor **out, sw_error *err)
{
    if (!carrier || !layout || !out)
        return sw_error_set(err, SW_ETYPE, "tensor: carrier, layout and out must not be NULL");
    return make_checked(carrier, offset, layout, out, err);
}

sw_status sw_tensor_new_unchecked(sw_carrier *carrier, int64_t offset, const sw_layout *layout,
                                  sw_tensor **out, sw_error *err)
{
    if (!carrier || !layout || !out)
        return sw_error_set(err, SW_ETYPE,
                            "sw_tensor_new_unchecked: carrier, layout and out must not be NULL");
    if (offset < 0)
        return sw_error_set(err, SW_EINVAL, "tensor: offset must be >= 0, not %lld",
                            (long long)offset);
    if (!(*out = wrap_copy(carrier, offset, layout, err)))
        return SW_ENOMEM;
    (*out)->unchecked = 1;
    return SW_OK;
}

static sw_layout *flat_layout(int32_t ndim, const int64_t *extents, const int64_t *strides,
                              sw_error *err)
{
    if (ndim < 0 || ndim > SW_COPY_MAX_DIMS || (ndim > 0 && !extents)) {
        sw_error_set(err, SW_EINVAL, "tensor: ndim must be in [0, %d] with extents",
                     SW_COPY_MAX_DIMS);
        return NULL;
    }
    uint8_t profile[SW_COPY_MAX_DIMS];
    memset(profile, SW_NODE_LEAF, sizeof profile);
    return strides ? sw_layout_new(ndim, profile, extents, strides, err)
                   : sw_layout_canonical(ndim, profile, extents, err);
}

sw_status sw_tensor_new_strided(sw_carrier *carrier, int64_t offset, int32_t ndim,
                                const int64_t *extents, const int64_t *strides,
                                sw_tensor **out, sw_error *err)
{
    if (!carrier || !out)
        return sw_error_set(err, SW_ETYPE, "tensor: carrier and out must not be NULL");
    sw_layout *l = flat_layout(ndim, extents, strides, err);
    if (!l)
        return err ? err->code : SW_EINVAL;
    sw_status st = make_checked(carrier, offset, l, out, err);
    sw_layout_free(l);
    return st;
}

sw_tensor *sw_tensor_ref(sw_tensor *t)
{
    if (t)
        atomic_fetch_add(&t->refs, 1);
    return t;
}

void sw_tensor_unref(sw_tensor *t)
{
    if (!t || atomic_fetch_sub(&t->refs, 1) != 1)
        return;
    sw_carrier_unref(t->carrier);
    size_t bytes = sizeof *t;
    if (t->layout_inline)
        bytes += sw_layout_block_bytes(t->layout);
    else
        sw_layout_free(t->layout);
    sw_tensor_block_give(t, bytes, t->pooled);
}

sw_carrier *sw_tensor_carrier(const sw_tensor *t) { return t->carrier; }
const sw_layout *sw_tensor_layout(const sw_tensor *t) { return t->layout; }
int64_t sw_tensor_offset(const sw_tensor *t) { return t->offset; }
sw_dtype sw_tensor_dtype(const sw_tensor *t) { return t->carrier->dtype; }
int64_t sw_tensor_size(const sw_tensor *t) { return t->layout->size; }

/* ---- DLPack --------------------------------------------------------------- */

/* The C API keeps an exported carrier's storage until its last export ends
 * (sw_carrier_export_begin/end), so it passes no allocator pin. */
static void dlpack_done(void *ctx, void *pin)
{
    (void)pin;
    sw_tensor *t = ctx;
    sw_carrier_export_end(t->carrier);
    sw_tensor_unref(t);
}

/* How one export is made: the owner's lifetime choices plus whether a
 * pending destination is refused and the storage pinned. */
typedef struct export_plan {
    const sw_dlpack_owner *owner;
    int refuse_pending;
    int pin;
} export_plan;

static sw_status export_checks_locked(sw_carrier *c, int64_t offset, const sw_layout *l,
                                      const export_plan *plan, sw_error *err)
{
    if (c->released)
        return sw_error_set(err, SW_ESTATE, "%s: cannot export a released carrier",
                            sw_carrier_name(c));
    if (plan->refuse_pending && c->pending_dst)
        return sw_error_set(err, SW_ESTATE,
                            "%s: cannot export the destination of a pending move; wait for it",
                            sw_carrier_name(c));
    /* After the state: a released carrier is refused whatever its dtype. */
    if (c->dtype != SW_DT_FLOAT32 && c->dtype != SW_DT_INT32)
        return sw_error_set(err, SW_ENOTSUP, "DLPack export supports Float32 and Int32, not %s",
                            sw_dtype_info_of(c->dtype)->name);
    int64_t end;
    if (offset < 0 || __builtin_add_overflow(offset, l->cosize, &end) ||
        end > c->ops->size(c->impl))
        return sw_error_set(err, SW_ERANGE,
                            "%s: the export reaches past the carrier's %lld slots",
                            sw_carrier_name(c), (long long)c->ops->size(c->impl));
    return SW_OK;
}

static int export_read_only_locked(sw_carrier *c, const sw_dlpack_owner *owner)
{
    if (!owner->versioned)
        return 0; /* legacy DLPack has no flags word */
    return owner->read_only >= 0 ? owner->read_only != 0 : !sw_carrier_mutable_locked(c);
}

/* Everything of an export under the carrier's mutex: checks, the storage
 * pointer and device, the packing, and the lifetime hold (pin or export
 * count) taken only once the managed tensor exists. */
static sw_status export_locked(sw_carrier *c, int64_t offset, const sw_layout *l,
                               const export_plan *plan, void **out, sw_error *err)
{
    sw_carrier_storage where = {0};
    int32_t dev_type = 0, dev_id = 0;
    sw_status st = export_checks_locked(c, offset, l, plan, err);
    if (st == SW_OK)
        st = c->ops->storage(c->impl, &where, err);
    if (st == SW_OK && (where.kind != SW_ENDPOINT_HOST || !where.host))
        st = sw_error_set(err, SW_ENOTSUP, "%s: storage is not addressable memory",
                          sw_carrier_name(c));
    if (st == SW_OK)
        st = c->ops->dlpack_device(c->impl, &dev_type, &dev_id, err);
    if (st != SW_OK)
        return st;
    const sw_dlpack_owner *owner = plan->owner;
    sw_dlpack_request req = {
        .ndim = l->nleaves,
        .extents = l->extents,
        .strides = l->strides,
        .data = where.host,
        .offset = offset,
        .device_type = dev_type,
        .device_id = dev_id,
        .code = c->dtype == SW_DT_FLOAT32 ? kDLFloat : kDLInt,
        .bits = 32,
        .lanes = 1,
        .flags = export_read_only_locked(c, owner) ? DLPACK_FLAG_BITMASK_READ_ONLY : 0,
        .manager_ctx = owner->manager_ctx,
        .release = owner->release,
        .pin = plan->pin ? where.host : NULL,
    };
    st = sw_dlpack_pack_checked(&req, owner->versioned, out, err);
    if (st != SW_OK)
        return st;
    if (plan->pin)
        sw_alloc_pin(where.host);
    else
        sw_carrier_export_begin_locked(c);
    return SW_OK;
}

static sw_status export_carrier(sw_carrier *c, int64_t offset, const sw_layout *l,
                                const export_plan *plan, void **out, sw_error *err)
{
    if (!c->ops->dlpack_device || !c->ops->storage)
        return sw_error_set(err, SW_ENOTSUP, "DLPack is not supported by %s carriers",
                            sw_carrier_name(c));
    pthread_mutex_lock(&c->lock);
    sw_status st = export_locked(c, offset, l, plan, out, err);
    pthread_mutex_unlock(&c->lock);
    return st;
}

sw_status sw_tensor_to_dlpack(sw_tensor *t, DLManagedTensorVersioned **out, sw_error *err)
{
    if (!t || !out)
        return sw_error_set(err, SW_ETYPE, "sw_tensor_to_dlpack: tensor and out must not be NULL");
    const sw_dlpack_owner owner = {
        .versioned = 1, .read_only = -1, .manager_ctx = t, .release = dlpack_done};
    const export_plan plan = {.owner = &owner, .refuse_pending = 1, .pin = 0};
    sw_status st = export_carrier(t->carrier, t->offset, t->layout, &plan, (void **)out, err);
    if (st == SW_OK)
        sw_tensor_ref(t); /* dropped by dlpack_done */
    return st;
}

/* Only a CPU carrier's storage is one allocator block that can be pinned. */
static sw_status export_owned(sw_carrier *c, int64_t offset, const sw_layout *layout,
                              const sw_dlpack_owner *owner, const char *fn, void **out,
                              sw_error *err)
{
    if (c->ops != &sw_cpu_class)
        return sw_error_set(err, SW_ENOTSUP, "%s exports CPU carriers, not %s; use "
                            "sw_tensor_to_dlpack", fn, sw_carrier_name(c));
    const export_plan plan = {.owner = owner, .refuse_pending = 0, .pin = 1};
    return export_carrier(c, offset, layout, &plan, out, err);
}

sw_status sw_carrier_to_dlpack(sw_carrier *c, int64_t offset, const sw_layout *layout,
                               const sw_dlpack_owner *owner, void **out, sw_error *err)
{
    if (!c || !layout || !owner || !out)
        return sw_error_set(err, SW_ETYPE,
                            "sw_carrier_to_dlpack: carrier, layout, owner and out must not be "
                            "NULL");
    return export_owned(c, offset, layout, owner, "sw_carrier_to_dlpack", out, err);
}

sw_status sw_tensor_to_dlpack_owned(const sw_tensor *t, const sw_dlpack_owner *owner,
                                    void **out, sw_error *err)
{
    if (!t || !owner || !out)
        return sw_error_set(err, SW_ETYPE,
                            "sw_tensor_to_dlpack_owned: tensor, owner and out must not be NULL");
    return export_owned(t->carrier, t->offset, t->layout, owner, "sw_tensor_to_dlpack_owned",
                        out, err);
}
