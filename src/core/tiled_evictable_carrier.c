/* TiledEvictable as a carrier (tiled_evictable.h, "As a carrier"): an
 * sw_carrier of class sw_tiled_evictable_class whose slot ops resolve each
 * slot's tile residency through sw_tiled_evictable_read/_write. */
#include "tiled_evictable_internal.h"

#include "carrier_internal.h"
#include "strideweave/alloc.h"

typedef struct tec_impl {
    sw_tiled_evictable *te; /* one reference */
    sw_carrier *self;       /* borrowed: the carrier owns this impl */
} tec_impl;

static int64_t tec_size(void *impl)
{
    return sw_tiled_evictable_size(((tec_impl *)impl)->te);
}

/* Binding tiers run hooks that must not run under a carrier mutex (the ops
 * run with it held): their slots go through sw_tiled_evictable_read/_write
 * with the mutex dropped (tensor_values.c, sw_tiled_evictable_bound_of). */
static sw_status refuse_bound(sw_tiled_evictable *te, sw_error *err)
{
    if (!te->hooked || te->core_only)
        return SW_OK;
    return sw_error_set(err, SW_ENOTSUP,
                        "TiledEvictable: its tiers are reached through the binding: read and "
                        "write its slots with sw_tiled_evictable_read/_write");
}

static sw_status tec_read(void *impl, int64_t slot, int64_t count, void *out, sw_error *err)
{
    sw_tiled_evictable *te = ((tec_impl *)impl)->te;
    sw_status st = refuse_bound(te, err);
    return st != SW_OK ? st : sw_tiled_evictable_read(te, slot, count, out, err);
}

static sw_status tec_write(void *impl, int64_t slot, int64_t count, const void *in,
                           sw_error *err)
{
    sw_tiled_evictable *te = ((tec_impl *)impl)->te;
    sw_status st = refuse_bound(te, err);
    return st != SW_OK ? st : sw_tiled_evictable_write(te, slot, count, in, err);
}

/* sw_carrier_release (the released flag is set) releases the
 * TiledEvictable when it has no binding tiers; the last reference to an
 * unreleased carrier leaves it to sw_tiled_evictable_unref (tiers only
 * relinquished). */
static void tec_release(void *impl)
{
    tec_impl *c = impl;
    if (c->self->released && (!c->te->hooked || c->te->core_only))
        (void)sw_tiled_evictable_release(c->te, NULL);
}

static void tec_destroy(void *impl)
{
    tec_impl *c = impl;
    sw_tiled_evictable_unref(c->te);
    sw_free(c);
}

const sw_carrier_class sw_tiled_evictable_class = {
    .name = "TiledEvictable",
    .size = tec_size,
    .read = tec_read,
    .write = tec_write,
    .release = tec_release,
    .destroy = tec_destroy,
    .flags = SW_CARRIER_CLASS_RELEASE_REMOVES_FILES,
};

sw_status sw_tiled_evictable_carrier(sw_tiled_evictable *te, sw_carrier **out, sw_error *err)
{
    if (!te || !out)
        return sw_error_set(err, SW_ETYPE, "TiledEvictable: arguments must not be NULL");
    if (sw_tiled_evictable_is_released(te))
        return sw_error_set(err, SW_ESTATE, "TiledEvictable: a released TiledEvictable makes no "
                            "carrier");
    tec_impl *c = sw_calloc(1, sizeof *c);
    if (!c)
        return sw_error_set(err, SW_ENOMEM, "TiledEvictable: out of memory for its carrier");
    c->te = sw_tiled_evictable_ref(te);
    sw_carrier *h = NULL;
    sw_status st = sw_carrier_new(&sw_tiled_evictable_class, c, te->dtype,
                                  te->captured_mutable ? 0 : SW_CARRIER_IMMUTABLE, &h, err);
    if (st != SW_OK) {
        sw_tiled_evictable_unref(te);
        sw_free(c);
        return st;
    }
    c->self = h;
    *out = h;
    return SW_OK;
}

sw_tiled_evictable *sw_tiled_evictable_bound_of(sw_carrier *c)
{
    sw_tiled_evictable *te = sw_tiled_evictable_of(c);
    return te && te->hooked && !te->core_only ? te : NULL;
}

sw_tiled_evictable *sw_tiled_evictable_of(sw_carrier *c)
{
    if (!c || sw_carrier_class_of(c) != &sw_tiled_evictable_class)
        return NULL;
    return ((tec_impl *)c->impl)->te;
}
