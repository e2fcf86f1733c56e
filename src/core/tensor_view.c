/* Views: new tensors on the same carrier whose layout layout_view.h
 * computes (contract-core V-5..V-8). A view copies no value and is not
 * checked against the carrier again: it reaches a subset of the slots its
 * source reached. */
#include <string.h>

#include "strideweave/alloc.h"
#include "strideweave/copy.h"
#include "tensor_internal.h"

/* A view shares the carrier; it is not re-checked against the carrier's
 * size (it addresses a subset of what its parent addressed). */
static sw_status view_out(const sw_tensor *t, int64_t offset, sw_layout *l, sw_tensor **out,
                          sw_error *err)
{
    if (!l)
        return err ? err->code : SW_ENOMEM;
    *out = sw_tensor_wrap(t->carrier, offset, l, err);
    if (!*out) {
        sw_layout_free(l);
        return SW_ENOMEM;
    }
    (*out)->unchecked = t->unchecked; /* a subset of an unchecked span */
    return SW_OK;
}

/* Leaf index of the first leaf of top-level mode `mode`, and whether that
 * mode is a single leaf. */
static int32_t mode_first_leaf(const sw_layout *l, int32_t mode, int *is_leaf)
{
    int32_t p = 0, leaf = 0, nleaves;
    for (int32_t m = 0; m < mode; m++) {
        p = sw_layout_mode_end(l->profile, p, &nleaves);
        leaf += nleaves;
    }
    *is_leaf = l->profile[p] == SW_NODE_LEAF;
    return leaf;
}

sw_status sw_tensor_view(const sw_tensor *t, const sw_layout *adjacent,
                         const sw_view_spec *spec, sw_tensor **out, sw_layout **out_adjacent,
                         sw_view_fault *fault, sw_error *err)
{
    if (!t || !out || (adjacent && !out_adjacent))
        return sw_error_set(err, SW_ETYPE, "sw_tensor_view: tensor and out must not be NULL");
    const sw_layout *planes[2] = {t->layout, adjacent};
    sw_layout *l[2] = {NULL, NULL};
    int64_t growth = 0;
    sw_status st = sw_layout_view(planes, adjacent ? 2 : 1, spec, l, &growth, fault, err);
    if (st != SW_OK)
        return st;
    st = view_out(t, t->offset + growth, l[0], out, err); /* growth < cosize */
    if (st != SW_OK)
        sw_layout_free(l[1]);
    else if (adjacent)
        *out_adjacent = l[1];
    return st;
}

sw_status sw_tensor_slice_key(const sw_tensor *t, const sw_slice_entry *key, int32_t n,
                              sw_tensor **out, sw_error *err)
{
    sw_view_spec spec = {.kind = SW_VIEW_KIND_SLICE, .n = n, .key = key};
    return sw_tensor_view(t, NULL, &spec, out, NULL, NULL, err);
}

sw_status sw_tensor_slice(const sw_tensor *t, int32_t mode, int64_t start, int64_t stop,
                          sw_tensor **out, sw_error *err)
{
    if (!t || !out)
        return sw_error_set(err, SW_ETYPE, "sw_tensor_slice: tensor and out must not be NULL");
    const sw_layout *l = t->layout;
    if (mode < 0 || mode >= l->rank)
        return sw_error_set(err, SW_ERANGE, "sw_tensor_slice: mode %d is out of range for rank %d",
                            (int)mode, (int)l->rank);
    int is_leaf;
    int32_t leaf = mode_first_leaf(l, mode, &is_leaf);
    if (!is_leaf)
        return sw_error_set(err, SW_ENOTSUP,
                            "sw_tensor_slice: mode %d is nested; slice one of its leaves "
                            "after taking it apart",
                            (int)mode);
    /* No wrap-around here, unlike a key's range: bounds are coordinates. */
    if (start < 0 || stop > l->extents[leaf] || start >= stop)
        return sw_error_set(err, SW_EINVAL,
                            "sw_tensor_slice: [%lld, %lld) is not a non-empty range inside "
                            "extent %lld",
                            (long long)start, (long long)stop, (long long)l->extents[leaf]);
    sw_slice_entry *key = sw_calloc((size_t)l->rank, sizeof *key);
    if (!key)
        return sw_error_set(err, SW_ENOMEM, "sw_tensor_slice: out of memory");
    for (int32_t m = 0; m < l->rank; m++) {
        key[m].kind = SW_SLICE_RANGE;
        key[m].step = 1;
    }
    key[mode] = (sw_slice_entry){.kind = SW_SLICE_RANGE, .has_start = 1, .start = start,
                                 .has_stop = 1, .stop = stop, .step = 1};
    sw_status st = sw_tensor_slice_key(t, key, l->rank, out, err);
    sw_free(key);
    return st;
}

sw_status sw_tensor_permute(const sw_tensor *t, const int32_t *order, int32_t n,
                            sw_tensor **out, sw_error *err)
{
    if (!t || !out)
        return sw_error_set(err, SW_ETYPE, "sw_tensor_permute: tensor and out must not be NULL");
    return view_out(t, t->offset, sw_layout_permute(t->layout, order, n, err), out, err);
}

sw_status sw_tensor_reshape_shape(const sw_tensor *t, int32_t nprofile, const uint8_t *profile,
                                  const int64_t *extents, sw_tensor **out, sw_error *err)
{
    sw_view_spec spec = {.kind = SW_VIEW_KIND_RESHAPE, .n = nprofile, .profile = profile,
                         .extents = extents};
    return sw_tensor_view(t, NULL, &spec, out, NULL, NULL, err);
}

sw_status sw_tensor_reshape(const sw_tensor *t, int32_t ndim, const int64_t *extents,
                            sw_tensor **out, sw_error *err)
{
    if (ndim < 0 || ndim > SW_COPY_MAX_DIMS || (ndim > 0 && !extents))
        return sw_error_set(err, SW_EINVAL, "sw_tensor_reshape: ndim must be in [0, %d] with "
                            "extents", SW_COPY_MAX_DIMS);
    uint8_t profile[SW_COPY_MAX_DIMS];
    memset(profile, SW_NODE_LEAF, sizeof profile);
    return sw_tensor_reshape_shape(t, ndim, profile, extents, out, err);
}

sw_status sw_tensor_broadcast(const sw_tensor *t, const int64_t *extents, sw_tensor **out,
                              sw_error *err)
{
    if (!t || !out || (!extents && t->layout->nleaves > 0))
        return sw_error_set(err, SW_ETYPE,
                            "sw_tensor_broadcast: tensor, extents and out must not be NULL");
    return view_out(t, t->offset,
                    sw_layout_broadcast(t->layout, t->layout->nprofile, t->layout->profile,
                                        extents, err),
                    out, err);
}
