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
#include "fault_internal.h"

#include "carrier_internal.h"
#include "strideweave/alloc.h"
#include "strideweave/copy.h"
#include "strideweave/tensor_walk.h"
#include "strideweave/tiled_evictable.h"
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

/* Step 3 of carrier.h's SLOTS_UNLOCKED order, after a write succeeded. */
static void step_after_write(sw_carrier *c)
{
    if (c->ops->flags & SW_CARRIER_CLASS_WRITES_STEP_VERSION)
        return;
    pthread_mutex_lock(&c->lock);
    if (!c->released && !sw_carrier_in_transfer_locked(c))
        c->version++;
    pthread_mutex_unlock(&c->lock);
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
    if (st == SW_OK && in)
        step_after_write(c);
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

/* A Float32 slot the core holds, read or written as a binary64. */
static int widens(const sw_carrier *c, sw_dtype as)
{
    return as == SW_DT_FLOAT64 && c->dtype == SW_DT_FLOAT32;
}

int sw_carrier_holds_as(sw_carrier *c, sw_dtype as)
{
    return c && (SW_CARRIER_STATE_ONLY(c) || as == c->dtype || widens(c, as));
}

static sw_status layout_as(sw_carrier *c, int64_t offset, const sw_layout *layout, sw_dtype as,
                           void *out, const void *in, sw_error *err);

/* An Evictable whose primary's slots its binding keeps (its own read or
 * write checked it and answered SW_ENOTSUP): the primary's batch, under
 * the owner access the Evictable's claim gives. A write steps the
 * Evictable's version once per step of the primary's, so the Evictable
 * counts what a write of each slot through it would (its binding's
 * write of one slot steps both). */
static sw_status layout_through_primary(sw_carrier *c, int64_t offset, const sw_layout *layout,
                                        sw_dtype as, void *out, const void *in,
                                        sw_status refused, sw_error *err)
{
    uint64_t token = 0;
    sw_carrier *p = sw_evictable_binding_primary(c, &token);
    if (!p)
        return refused;
    uint64_t before = sw_carrier_version(p);
    sw_status st = sw_carrier_begin_owner_access(p, token, err);
    if (st == SW_OK) {
        st = layout_as(p, offset, layout, as, out, in, err);
        (void)sw_carrier_end_owner_access(p, token, NULL);
    }
    for (uint64_t k = before; in && k < sw_carrier_version(p); k++)
        step_after_write(c);
    sw_carrier_unref(p);
    return st;
}

/* Slots [slot, slot + count) of a TiledEvictable carrier whose tiers are
 * the binding's (sw_tiled_evictable_bound_of), its carrier's checks passed:
 * the TiledEvictable's own read or write, with no core lock held (its tier
 * hooks need none held). A write steps the carrier's version as a write to
 * it does; the TiledEvictable steps its own. */
static sw_status tile_slots(sw_carrier *c, sw_tiled_evictable *te, int64_t slot, int64_t count,
                            void *out, const void *in, sw_error *err)
{
    sw_status st = in ? sw_tiled_evictable_write(te, slot, count, in, err)
                      : sw_tiled_evictable_read(te, slot, count, out, err);
    if (st == SW_OK && in)
        step_after_write(c);
    return st;
}

/* A failure reaching slots of such a TiledEvictable, in the carrier's
 * words when the TiledEvictable is released: the binding releases it
 * before its carrier, and in between the carrier's size reads 0, so the
 * checks would say "out of range" where the truth is "released". */
static sw_status tiled_failure(sw_carrier *c, sw_tiled_evictable *te, int writing, sw_status st,
                               sw_error *err)
{
    if (st != SW_OK && sw_tiled_evictable_is_released(te))
        return sw_carrier_refuse_released(c, writing, err);
    return st;
}

/* The layout's slots of such a TiledEvictable (values of its dtype): the
 * carrier's checks once for the span the layout reaches (under its lock,
 * let go before the tier hooks run: safe because a TiledEvictable's carrier
 * is never a move's pending party (moves from or into it are refused), a
 * claim racing the write orders after it as any racing claim would, and
 * sw_tiled_evictable_read/_write re-check a release under the
 * TiledEvictable's own lock), then only the
 * slots the layout names (a span's other slots would promote or refuse
 * tiles it does not reach), in logical order: reads by runs of consecutive
 * slots, writes slot by slot, each its own write as through the carrier
 * (a 0 into an implicit tile stays implicit, a tile is promoted when its
 * first slot is written, a failure stops with the earlier slots written). */
static sw_status layout_through_tiers(sw_carrier *c, sw_tiled_evictable *te, int64_t offset,
                                      const sw_layout *layout, void *out, const void *in,
                                      sw_error *err)
{
    sw_status st = sw_carrier_check_slots(c, in != NULL, offset, layout->cosize, err);
    int64_t *slots = st == SW_OK ? walk_of(c, offset, layout, err) : NULL;
    if (!slots)
        return st != SW_OK ? tiled_failure(c, te, in != NULL, st, err)
                           : (err ? err->code : SW_ENOMEM);
    size_t bytes = sw_dtype_slot_bytes(c->dtype);
    for (int64_t k = 0, run = 1; st == SW_OK && k < layout->size; k += run) {
        run = 1;
        while (!in && k + run < layout->size && slots[k + run] == slots[k] + run)
            run++;
        st = tile_slots(c, te, slots[k], run, in ? NULL : (char *)out + (size_t)k * bytes,
                        in ? (const char *)in + (size_t)k * bytes : NULL, err);
    }
    sw_free(slots);
    return tiled_failure(c, te, in != NULL, st, err);
}

/* The slots of a carrier the core holds, as its dtype or (widens) as
 * binary64s: a Float32 slot widened after the read, rounded to nearest
 * before the write, as sw_carrier_copy_layout carries it. An Evictable
 * over a binding's primary writes the rounded values to it (what a write
 * of each slot through the Evictable hands on) and reads its values as
 * `as` (what a read through it gives). */
static sw_status held_as(sw_carrier *c, int64_t offset, const sw_layout *layout, sw_dtype as,
                         void *out, const void *in, sw_error *err)
{
    int wide = widens(c, as);
    float *f = wide ? sw_malloc((size_t)layout->size * sizeof *f) : NULL;
    if (wide && !f)
        return sw_error_set(err, SW_ENOMEM, "%s: out of memory for %lld values",
                            sw_carrier_name(c), (long long)layout->size);
    for (int64_t k = 0; wide && in && k < layout->size; k++) {
        double d;
        memcpy(&d, (const char *)in + (size_t)k * sizeof d, sizeof d);
        f[k] = (float)d;
    }
    const void *w = wide ? f : in;
    void *r = wide ? (void *)f : out;
    sw_tiled_evictable *te = sw_tiled_evictable_bound_of(c);
    sw_status st = te   ? layout_through_tiers(c, te, offset, layout, in ? NULL : r,
                                               in ? w : NULL, err)
                   : in ? write_span(c, offset, layout, w, err)
                        : sw_carrier_read_layout(c, offset, layout, r, err);
    if (st == SW_ENOTSUP)
        st = layout_through_primary(c, offset, layout, in ? c->dtype : as, out, in ? w : NULL,
                                    st, err);
    else if (st == SW_OK && wide && !in)
        for (int64_t k = 0; k < layout->size; k++)
            memcpy((char *)out + (size_t)k * sizeof(double), &(double){f[k]}, sizeof(double));
    sw_free(f);
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
    if (!SW_CARRIER_STATE_ONLY(c))
        return sw_carrier_holds_as(c, as) ? held_as(c, offset, layout, as, out, in, err)
                                          : check_as_dtype(c, as, err);
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

/* ---- slot by slot between two carriers (tensor.h: sw_carrier_copy_layout) */

/* Bytes of one value of `as`, 0 for no value kind. */
static size_t value_bytes(sw_dtype as)
{
    if (as == SW_AS_HANDLE)
        return sizeof(void *);
    return as == SW_DT_FLOAT64 ? sizeof(double) : sw_dtype_slot_bytes(as);
}

/* What the copy refuses before touching a slot, for one side: slots only
 * its binding reaches (a STATE_ONLY class without the callbacks), an `as`
 * it does not hold. */
static sw_status check_copy_side(sw_carrier *c, sw_dtype as, int writing, sw_error *err)
{
    int state_only = SW_CARRIER_STATE_ONLY(c);
    if (state_only && (!SW_CARRIER_SLOTS_UNLOCKED(c) || (writing && !c->ops->write_slots)))
        return sw_carrier_refuse_state_only(c, writing ? "write a tensor's values"
                                                       : "read a tensor's values", err);
    if (!state_only)
        return widens(c, as) ? SW_OK : check_as_dtype(c, as, err);
    if (!writing && as == SW_AS_HANDLE && !c->ops->drop_handles)
        return sw_error_set(err, SW_ENOTSUP, "%s: its slots cannot be copied as handles",
                            sw_carrier_name(c));
    return SW_OK;
}

static sw_status check_copy(sw_carrier *src, int64_t src_offset, sw_carrier *dst,
                            int64_t dst_offset, const sw_layout *layout, sw_dtype as,
                            sw_error *err)
{
    if (!src || !dst || !layout)
        return sw_error_set(err, SW_ETYPE,
                            "sw_carrier_copy_layout: carriers and layout must not be NULL");
    if (src_offset < 0 || dst_offset < 0)
        return sw_error_set(err, SW_ERANGE, "sw_carrier_copy_layout: offset %lld is negative",
                            (long long)(src_offset < 0 ? src_offset : dst_offset));
    if (value_bytes(as) == 0)
        return sw_error_set(err, SW_EINVAL, "sw_carrier_copy_layout: %d is no value kind",
                            (int)as);
    sw_status st = check_copy_side(src, as, 0, err);
    return st == SW_OK ? check_copy_side(dst, as, 1, err) : st;
}

static sw_status one_slot(sw_carrier *c, int64_t slot, sw_dtype as, void *out, const void *in,
                          sw_error *err);

/* An Evictable whose primary's slots its binding keeps: the Evictable's
 * own read/write checked it (released, pending, range, evicted) and
 * answered SW_ENOTSUP; the slot is the primary's, reached through its
 * callbacks under the owner access the Evictable's claim gives, and a
 * write steps the Evictable's version too, as a write to it does. */
static sw_status through_primary(sw_carrier *c, int64_t slot, sw_dtype as, void *out,
                                 const void *in, sw_error *err)
{
    uint64_t token = 0;
    sw_carrier *p = sw_evictable_binding_primary(c, &token);
    sw_status st = p ? sw_carrier_begin_owner_access(p, token, err) : SW_ENOTSUP;
    if (st == SW_OK) {
        st = one_slot(p, slot, as, out, in, err);
        (void)sw_carrier_end_owner_access(p, token, NULL);
        if (st == SW_OK && in)
            step_after_write(c);
    }
    sw_carrier_unref(p);
    return st;
}

/* One slot of a carrier the core holds, as its dtype (in NULL: a read):
 * its checked read or write; for a TiledEvictable over the binding's tiers
 * the same checks, then the TiledEvictable's own (tile_slots). */
static sw_status held_slot(sw_carrier *c, int64_t slot, void *out, const void *in,
                           sw_error *err)
{
    sw_tiled_evictable *te = sw_tiled_evictable_bound_of(c);
    if (!te)
        return in ? sw_carrier_write(c, slot, 1, in, err) : sw_carrier_read(c, slot, 1, out, err);
    sw_status st = sw_carrier_check_slots(c, in != NULL, slot, 1, err);
    if (st == SW_OK)
        st = tile_slots(c, te, slot, 1, out, in, err);
    return tiled_failure(c, te, in != NULL, st, err);
}

/* One slot of `c`: its own checked read/write where the core holds the
 * slots, else its checks under the mutex and its callback without it. */
static sw_status one_slot(sw_carrier *c, int64_t slot, sw_dtype as, void *out, const void *in,
                          sw_error *err)
{
    if (!SW_CARRIER_STATE_ONLY(c)) {
        /* a binary64 of a Float32 slot: widened after the read, rounded
         * before the write */
        float f;
        double d;
        int wide = widens(c, as);
        if (wide && in) {
            memcpy(&d, in, sizeof d);
            f = (float)d;
        }
        sw_status st = in ? held_slot(c, slot, NULL, wide ? &f : in, err)
                          : held_slot(c, slot, wide ? &f : out, NULL, err);
        if (st == SW_OK && wide && !in)
            memcpy(out, &(double){f}, sizeof(double));
        return st == SW_ENOTSUP ? through_primary(c, slot, as, out, in, err) : st;
    }
    pthread_mutex_lock(&c->lock);
    sw_status st = in ? sw_carrier_check_writable_locked(c, "write to", err)
                      : sw_carrier_check_readable_locked(c, err);
    pthread_mutex_unlock(&c->lock);
    if (st != SW_OK)
        return st;
    st = in ? c->ops->write_slots(c->impl, &slot, 1, as, in, err)
            : c->ops->read_slots(c->impl, &slot, 1, as, out, err);
    if (st == SW_OK && in)
        step_after_write(c);
    return st;
}

/* Read slot k, map it, write it; a handle read goes back to its class. */
static sw_status copy_one(sw_carrier *src, int64_t s, sw_carrier *dst, int64_t d, int64_t k,
                          sw_dtype as, sw_slot_map_fn map, void *user, sw_copy_stop *stop,
                          sw_error *err)
{
    _Alignas(8) unsigned char value[8];
    stop->in_write = 0;
    stop->slot = s;
    if (SW_FAULT_HIT("copy_slot"))
        return sw_error_set(err, SW_EIO, "fault injected: slot %lld not copied", (long long)k);
    sw_status st = one_slot(src, s, as, value, NULL, err);
    if (st != SW_OK)
        return st;
    if (map)
        map(user, k, value);
    stop->in_write = 1;
    stop->slot = d;
    st = one_slot(dst, d, as, NULL, value, err);
    if (as == SW_AS_HANDLE)
        src->ops->drop_handles(src->impl, (void *const *)value, 1);
    return st;
}

/* SW_DT_ANY's value kind: handles between two carriers whose binding keeps
 * the slots, else the dtype of the side the core holds the slots of. */
static sw_dtype copy_kind(sw_carrier *src, sw_carrier *dst, sw_dtype as)
{
    if (as != SW_DT_ANY || !src || !dst)
        return as;
    if (!SW_CARRIER_STATE_ONLY(dst))
        return dst->dtype;
    return SW_CARRIER_STATE_ONLY(src) ? SW_AS_HANDLE : src->dtype;
}

sw_status sw_carrier_copy_layout(sw_carrier *src, int64_t src_offset, sw_carrier *dst,
                                 int64_t dst_offset, const sw_layout *layout, sw_dtype as,
                                 sw_slot_map_fn map, void *user, sw_copy_stop *stop,
                                 sw_error *err)
{
    as = copy_kind(src, dst, as);
    sw_copy_stop local;
    if (!stop)
        stop = &local;
    *stop = (sw_copy_stop){.done = 0, .in_write = 0, .slot = -1};
    sw_status st = check_copy(src, src_offset, dst, dst_offset, layout, as, err);
    if (st != SW_OK || layout->size == 0)
        return st;
    int64_t *walk = walk_of(src, 0, layout, err);
    if (!walk)
        return err ? err->code : SW_ENOMEM;
    for (int64_t k = 0; k < layout->size && st == SW_OK; k++) {
        st = copy_one(src, src_offset + walk[k], dst, dst_offset + walk[k], k, as, map, user,
                      stop, err);
        stop->done = st == SW_OK ? k + 1 : k;
    }
    if (st == SW_OK)
        stop->slot = -1;
    sw_free(walk);
    return st;
}
