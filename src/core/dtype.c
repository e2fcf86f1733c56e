#include "strideweave/dtype.h"

static const sw_dtype_info infos[SW_DT_COUNT] = {
    [SW_DT_ANY] = {"Any", SW_DK_CATEGORY, -1, 0, 1, {SW_DT_ANY}},
    [SW_DT_FLOATING] = {"Floating", SW_DK_CATEGORY, SW_DT_ANY, 0, 1, {SW_DT_FLOATING}},
    [SW_DT_INTEGER] = {"Integer", SW_DK_CATEGORY, SW_DT_ANY, 0, 0, {0}},
    [SW_DT_BOOL] = {"Bool", SW_DK_SIMPLE, SW_DT_ANY, 8, 1, {SW_DT_BOOL}},
    [SW_DT_INT32] = {"Int32", SW_DK_SIMPLE, SW_DT_INTEGER, 32, 1, {SW_DT_INT32}},
    [SW_DT_INT8] = {"Int8", SW_DK_SIMPLE, SW_DT_INTEGER, 8, 1, {SW_DT_INT8}},
    [SW_DT_FLOAT32] = {"Float32", SW_DK_SIMPLE, SW_DT_FLOATING, 32, 1, {SW_DT_FLOAT32}},
    [SW_DT_FLOAT64] = {"Float64", SW_DK_SIMPLE, SW_DT_FLOATING, 64, 1, {SW_DT_FLOAT64}},
    [SW_DT_E8M0] = {"E8M0", SW_DK_SIMPLE, SW_DT_FLOATING, 8, 1, {SW_DT_E8M0}},
    [SW_DT_E5M2] = {"E5M2", SW_DK_SIMPLE, SW_DT_FLOATING, 8, 1, {SW_DT_E5M2}},
    [SW_DT_E4M3] = {"E4M3", SW_DK_SIMPLE, SW_DT_FLOATING, 8, 1, {SW_DT_E4M3}},
    [SW_DT_E3M2] = {"E3M2", SW_DK_SIMPLE, SW_DT_FLOATING, 6, 1, {SW_DT_E3M2}},
    [SW_DT_E2M3] = {"E2M3", SW_DK_SIMPLE, SW_DT_FLOATING, 6, 1, {SW_DT_E2M3}},
    [SW_DT_E2M1] = {"E2M1", SW_DK_SIMPLE, SW_DT_FLOATING, 4, 1, {SW_DT_E2M1}},
    [SW_DT_SCALED_INT32] = {"ScaledInt32", SW_DK_COMPOUND, SW_DT_ANY, 0, 2,
                            {SW_DT_INT32, SW_DT_FLOAT32}},
};

const sw_dtype_info *sw_dtype_info_of(sw_dtype d)
{
    return (unsigned)d < SW_DT_COUNT ? &infos[d] : NULL;
}

size_t sw_dtype_slot_bytes(sw_dtype d)
{
    switch (d) {
    case SW_DT_FLOAT32:
    case SW_DT_INT32:
        return 4;
    case SW_DT_BOOL:
        return 1;
    default:
        return 0;
    }
}

int sw_dtype_is_subtype(sw_dtype d, sw_dtype ancestor)
{
    for (int cur = (int)d; cur >= 0; cur = infos[cur].supertype)
        if (cur == (int)ancestor)
            return 1;
    return 0;
}
