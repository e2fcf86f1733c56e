/* Walks over the slots a layout reaches (tensor_walk.h): an incremental
 * walk in logical order, first leaf fastest, that adds a stride per step
 * instead of dividing the ordinal by every extent. */
#include "strideweave/tensor_walk.h"

#include <string.h>

#include "strideweave/alloc.h"
#include "strideweave/copy.h"

#define WALK_INLINE 16

typedef struct {
    const sw_layout *L;
    int64_t idx;
    int64_t *digit;
    int64_t inline_digit[WALK_INLINE];
} walk;

static sw_status walk_init(walk *w, const sw_layout *L, int64_t start, sw_error *err)
{
    w->L = L;
    w->idx = start;
    w->digit = w->inline_digit;
    if (L->nleaves > WALK_INLINE) {
        w->digit = sw_calloc((size_t)L->nleaves, sizeof(int64_t));
        if (!w->digit)
            return sw_error_set(err, SW_ENOMEM, "layout walk: out of memory");
    } else {
        memset(w->digit, 0, sizeof w->inline_digit);
    }
    return SW_OK;
}

/* One ordinal on (past the last one, idx is the start again). */
static inline void walk_next(walk *w)
{
    const sw_layout *L = w->L;
    for (int32_t j = 0; j < L->nleaves; j++) {
        if (++w->digit[j] < L->extents[j]) {
            w->idx += L->strides[j];
            return;
        }
        w->idx -= L->strides[j] * (L->extents[j] - 1);
        w->digit[j] = 0;
    }
}

static void walk_done(walk *w)
{
    if (w->digit != w->inline_digit)
        sw_free(w->digit);
    w->digit = w->inline_digit;
}

int sw_layout_is_flat(const sw_layout *L)
{
    int64_t expect = 1;
    for (int32_t j = 0; j < L->nleaves; j++) {
        if (L->extents[j] == 1)
            continue;
        if (L->strides[j] != expect)
            return 0;
        expect *= L->extents[j];
    }
    return 1;
}

int32_t sw_layout_mode_sizes(const sw_layout *L, int64_t *sizes, int32_t max)
{
    int32_t p = 0, leaf = 0;
    for (int32_t i = 0; i < L->rank && i < max; i++) {
        int32_t nl;
        int32_t end = sw_layout_mode_end(L->profile, p, &nl);
        sizes[i] = 1;
        for (int32_t j = 0; j < nl; j++)
            sizes[i] *= L->extents[leaf + j];
        leaf += nl;
        p = end;
    }
    return L->rank;
}

sw_status sw_layout_reduce_ordinals(const sw_layout *L, const int32_t *kept, int32_t nkept,
                                    int64_t *out, sw_error *err)
{
    if (!L || (!kept && nkept > 0) || (!out && L->size > 0))
        return sw_error_set(err, SW_ETYPE, "sw_layout_reduce_ordinals: NULL argument");
    int64_t *size = sw_calloc(2 * (size_t)L->rank + 1, sizeof(int64_t));
    if (!size)
        return sw_error_set(err, SW_ENOMEM, "sw_layout_reduce_ordinals: out of memory");
    int64_t *mult = size + L->rank;
    sw_layout_mode_sizes(L, size, L->rank);
    int64_t m = 1;
    for (int32_t j = 0; j < nkept; j++) {
        if (kept[j] < 0 || kept[j] >= L->rank) {
            sw_free(size);
            return sw_error_set(err, SW_EINVAL, "sw_layout_reduce_ordinals: mode %d is not in "
                                "[0, %d)", (int)kept[j], (int)L->rank);
        }
        mult[kept[j]] = m;
        m *= size[kept[j]];
    }
    for (int64_t k = 0; k < L->size; k++) {
        int64_t rest = k, r = 0;
        for (int32_t i = 0; i < L->rank; i++) {
            r += (rest % size[i]) * mult[i];
            rest /= size[i];
        }
        out[k] = r;
    }
    sw_free(size);
    return SW_OK;
}

sw_status sw_layout_slots(const sw_layout *L, int64_t offset, int64_t *out, sw_error *err)
{
    if (!L || (!out && L->size > 0))
        return sw_error_set(err, SW_ETYPE, "sw_layout_slots: layout and out must not be NULL");
    walk w;
    sw_status st = walk_init(&w, L, offset, err);
    for (int64_t k = 0; st == SW_OK && k < L->size; k++, walk_next(&w))
        out[k] = w.idx;
    walk_done(&w);
    return st;
}

static sw_status check_place(const void *base, int64_t offset, const sw_layout *L,
                             const void *in, const char *fn, sw_error *err)
{
    if (!L || ((!base || !in) && L->size > 0))
        return sw_error_set(err, SW_ETYPE, "%s: base, layout and in must not be NULL", fn);
    if (offset < 0)
        return sw_error_set(err, SW_EINVAL, "%s: offset must be >= 0, not %lld", fn,
                            (long long)offset);
    return SW_OK;
}

sw_status sw_layout_scatter(void *base, int64_t offset, const sw_layout *L, const void *in,
                            size_t itemsize, sw_error *err)
{
    sw_status st = check_place(base, offset, L, in, "sw_layout_scatter", err);
    if (st != SW_OK || L->size == 0)
        return st;
    if (itemsize == 0)
        return sw_error_set(err, SW_EINVAL, "sw_layout_scatter: itemsize must not be 0");
    int64_t ext[SW_COPY_MAX_DIMS], str[SW_COPY_MAX_DIMS];
    int n = sw_copy_layout_modes(L, ext, str); /* a valid layout always fits */
    if (n < 0)
        return sw_error_set(err, SW_EINVAL, "sw_layout_scatter: more than %d modes of extent > 1",
                            SW_COPY_MAX_DIMS);
    return sw_copy_scatter((char *)base + (size_t)offset * itemsize, str, in, ext, n, itemsize,
                           err);
}

sw_status sw_layout_add_f32(float *base, int64_t offset, const sw_layout *L, const float *in,
                            sw_error *err)
{
    sw_status st = check_place(base, offset, L, in, "sw_layout_add_f32", err);
    if (st != SW_OK || L->size == 0)
        return st;
    if (sw_layout_is_flat(L)) {
        float *d = base + offset;
        for (int64_t k = 0; k < L->size; k++)
            d[k] += in[k];
        return SW_OK;
    }
    walk w;
    if ((st = walk_init(&w, L, offset, err)) != SW_OK)
        return st;
    for (int64_t k = 0; k < L->size; k++, walk_next(&w))
        base[w.idx] += in[k];
    walk_done(&w);
    return SW_OK;
}

sw_status sw_layout_fold_f32(const sw_layout *L, const float *in, float *out, sw_error *err)
{
    if (!L || ((!in || !out) && L->size > 0))
        return sw_error_set(err, SW_ETYPE, "sw_layout_fold_f32: layout, in and out must not be "
                            "NULL");
    float *slots = sw_calloc((size_t)L->cosize + 1, sizeof(float));
    if (!slots)
        return sw_error_set(err, SW_ENOMEM, "sw_layout_fold_f32: out of memory");
    walk w;
    sw_status st = walk_init(&w, L, 0, err);
    if (st == SW_OK) {
        for (int64_t k = 0; k < L->size; k++, walk_next(&w))
            slots[w.idx] += in[k];
        for (int64_t k = 0; k < L->size; k++, walk_next(&w))
            out[k] = slots[w.idx];
    }
    walk_done(&w);
    sw_free(slots);
    return st;
}
