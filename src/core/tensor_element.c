/* Element access: a tensor element is one slot of its carrier, slot
 * offset + layout(index), read and written through the carrier's checked
 * slot I/O (sw_carrier_read / sw_carrier_write: the carrier's lock, state
 * checks and version), so every carrier class with slots of its own takes
 * the same path. Refusals carry an sw_element_refusal in err->detail. */
#include "carrier_internal.h"
#include "tensor_internal.h"

/* err->detail := why, on a status already set. */
static sw_status mark(sw_status st, sw_element_refusal why, sw_error *err)
{
    if (st != SW_OK && err)
        err->detail = (int)why;
    return st;
}

static sw_status check_tensor(const sw_tensor *t, const char *fn, sw_error *err)
{
    if (!t)
        return sw_error_set(err, SW_ETYPE, "%s: tensor must not be NULL", fn);
    return SW_OK;
}

static sw_status index_slot(const sw_tensor *t, const char *fn, int64_t index, int64_t *slot,
                            sw_error *err)
{
    const sw_layout *l = t->layout;
    if (index < 0 || index >= l->size)
        return mark(sw_error_set(err, SW_ERANGE, "%s: index %lld is out of range for size %lld",
                                 fn, (long long)index, (long long)l->size),
                    SW_ELEMENT_INDEX, err);
    int64_t at = 0;
    for (int32_t j = 0; j < l->nleaves; j++) {
        at += (index % l->extents[j]) * l->strides[j];
        index /= l->extents[j];
    }
    *slot = t->offset + at;
    return SW_OK;
}

/* Leaf coordinates to a slot: each checked against its leaf's extent. */
static sw_status coord_slot(const sw_tensor *t, const char *fn, const int64_t *coord,
                            int64_t *slot, sw_error *err)
{
    const sw_layout *l = t->layout;
    if (!coord && l->nleaves > 0)
        return sw_error_set(err, SW_ETYPE, "%s: coord must not be NULL", fn);
    int64_t at = 0;
    for (int32_t j = 0; j < l->nleaves; j++) {
        if (coord[j] < 0 || coord[j] >= l->extents[j])
            return mark(sw_error_set(err, SW_ERANGE,
                                     "%s: coordinate %lld of leaf %d is out of range for its "
                                     "extent %lld (no wrap-around)",
                                     fn, (long long)coord[j], (int)j, (long long)l->extents[j]),
                        SW_ELEMENT_COORD, err);
        at += coord[j] * l->strides[j];
    }
    *slot = t->offset + at;
    return SW_OK;
}

/* The carrier's refusal, marked as the carrier's. */
static sw_status carrier_io(sw_status st, sw_error *err)
{
    return mark(st, SW_ELEMENT_CARRIER, err);
}

sw_status sw_tensor_slot(const sw_tensor *t, int64_t index, int64_t *slot, sw_error *err)
{
    sw_status st = check_tensor(t, "sw_tensor_slot", err);
    return st != SW_OK ? st : index_slot(t, "sw_tensor_slot", index, slot, err);
}

sw_status sw_tensor_slot_at(const sw_tensor *t, const int64_t *coord, int64_t *slot,
                            sw_error *err)
{
    sw_status st = check_tensor(t, "sw_tensor_slot_at", err);
    return st != SW_OK ? st : coord_slot(t, "sw_tensor_slot_at", coord, slot, err);
}

sw_status sw_tensor_get(const sw_tensor *t, int64_t index, void *out, sw_error *err)
{
    int64_t slot = 0;
    sw_status st = check_tensor(t, "sw_tensor_get", err);
    if (st == SW_OK)
        st = index_slot(t, "sw_tensor_get", index, &slot, err);
    return st != SW_OK ? st : carrier_io(sw_carrier_read(t->carrier, slot, 1, out, err), err);
}

sw_status sw_tensor_set(const sw_tensor *t, int64_t index, const void *in, sw_error *err)
{
    int64_t slot = 0;
    sw_status st = check_tensor(t, "sw_tensor_set", err);
    if (st == SW_OK)
        st = index_slot(t, "sw_tensor_set", index, &slot, err);
    return st != SW_OK ? st : carrier_io(sw_carrier_write(t->carrier, slot, 1, in, err), err);
}

sw_status sw_tensor_get_at(const sw_tensor *t, const int64_t *coord, void *out, sw_error *err)
{
    int64_t slot = 0;
    sw_status st = sw_tensor_slot_at(t, coord, &slot, err);
    return st != SW_OK ? st : carrier_io(sw_carrier_read(t->carrier, slot, 1, out, err), err);
}

sw_status sw_tensor_set_at(const sw_tensor *t, const int64_t *coord, const void *in,
                           sw_error *err)
{
    int64_t slot = 0;
    sw_status st = sw_tensor_slot_at(t, coord, &slot, err);
    return st != SW_OK ? st : carrier_io(sw_carrier_write(t->carrier, slot, 1, in, err), err);
}

/* The typed forms: the dtype the name promises, then the general access. */
static sw_status check_dtype(const sw_tensor *t, sw_dtype want, const char *fn, sw_error *err)
{
    sw_status st = check_tensor(t, fn, err);
    if (st != SW_OK || t->carrier->dtype == want)
        return st;
    return mark(sw_error_set(err, SW_ETYPE, "%s: the tensor's dtype is %s, not %s", fn,
                             sw_dtype_info_of(t->carrier->dtype)->name,
                             sw_dtype_info_of(want)->name),
                SW_ELEMENT_DTYPE, err);
}

#define ELEMENT_ACCESS(suffix, ctype, dt)                                                   \
    sw_status sw_tensor_get_##suffix(const sw_tensor *t, int64_t index, ctype *out,        \
                                     sw_error *err)                                        \
    {                                                                                      \
        sw_status st = check_dtype(t, dt, "sw_tensor_get_" #suffix, err);                  \
        return st != SW_OK ? st : sw_tensor_get(t, index, out, err);                       \
    }                                                                                      \
    sw_status sw_tensor_set_##suffix(const sw_tensor *t, int64_t index, ctype value,       \
                                     sw_error *err)                                        \
    {                                                                                      \
        sw_status st = check_dtype(t, dt, "sw_tensor_set_" #suffix, err);                  \
        return st != SW_OK ? st : sw_tensor_set(t, index, &value, err);                    \
    }

ELEMENT_ACCESS(f32, float, SW_DT_FLOAT32)
ELEMENT_ACCESS(i32, int32_t, SW_DT_INT32)
