/* Which source element each element of a view reads (the map behind a
 * view's gradient, contract-core V-9): the view applied to the canonical
 * layout of the source's shape, whose slot k holds ordinal k, so walking
 * the viewed layout reads the ordinals off directly. */
#include "strideweave/alloc.h"
#include "strideweave/layout_view.h"

/* Digits kept on the stack for the usual few leaves; more go to the heap. */
#define SMALL_DIGITS 16

/* ordinals[k] := slot of view ordinal k, walking the leaves first-fastest
 * as an odometer (one add per step instead of a division per leaf). The
 * slots lie in [0, size of the source), so no sum can overflow. */
static sw_status walk_slots(const sw_layout *view, int64_t start, int64_t *ordinals,
                            sw_error *err)
{
    int64_t small[SMALL_DIGITS] = {0}, *digit = small;
    if (view->nleaves > SMALL_DIGITS &&
        !(digit = sw_calloc((size_t)view->nleaves, sizeof(int64_t))))
        return sw_error_set(err, SW_ENOMEM, "sw_layout_view_source_ordinals: out of memory");
    int64_t slot = start;
    for (int64_t k = 0; k < view->size; k++) {
        ordinals[k] = slot;
        for (int32_t j = 0; j < view->nleaves; j++) {
            if (++digit[j] < view->extents[j]) {
                slot += view->strides[j];
                break;
            }
            slot -= view->strides[j] * (view->extents[j] - 1);
            digit[j] = 0;
        }
    }
    if (digit != small)
        sw_free(digit);
    return SW_OK;
}

sw_status sw_layout_view_source_ordinals(const sw_layout *source, const sw_view_spec *spec,
                                         int64_t *ordinals, int64_t capacity, int64_t *count,
                                         sw_view_fault *fault, sw_error *err)
{
    sw_error local; /* the status of a failed step, when the caller keeps no err */
    if (!err)
        err = &local;
    if (fault)
        *fault = (sw_view_fault){SW_VIEW_OK, -1, -1, 0};
    if (!source || !spec || !count)
        return sw_error_set(err, SW_ETYPE,
                            "sw_layout_view_source_ordinals: source, spec and count must not "
                            "be NULL");
    sw_layout *canon = sw_layout_canonical(source->nprofile, source->profile, source->extents,
                                           err);
    if (!canon)
        return err->code;
    const sw_layout *planes[1] = {canon};
    sw_layout *view = NULL;
    int64_t start = 0;
    sw_status st = sw_layout_view(planes, 1, spec, &view, &start, fault, err);
    sw_layout_free(canon);
    if (st != SW_OK)
        return st;
    *count = view->size;
    if (view->size > capacity || (view->size > 0 && !ordinals))
        st = sw_error_set(err, SW_ERANGE,
                          "sw_layout_view_source_ordinals: the view has %lld elements and "
                          "room was given for %lld",
                          (long long)view->size, (long long)(ordinals ? capacity : 0));
    else
        st = walk_slots(view, start, ordinals, err);
    sw_layout_free(view);
    return st;
}
