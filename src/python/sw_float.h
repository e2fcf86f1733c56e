/* Rounding a double to binary32 (Float32 slots): nearest, ties to even,
 * overflow to +-inf, never the undefined out-of-range double->float
 * conversion. Shared by value normalization and buffer copies. */
#ifndef SW_FLOAT_H
#define SW_FLOAT_H

#include <float.h>
#include <math.h>

static inline float sw_py_round_to_float(double x)
{
    if (fabs(x) <= FLT_MAX) /* the common case: one conversion */
        return (float)x;
    /* 2**128 - 2**103: halfway between FLT_MAX and 2**128; a tie rounds to
     * the even neighbour 2**128, i.e. infinity. */
    const double overflow_at = 0x1.ffffffp127;
    if (isnan(x))
        return (float)x;
    if (fabs(x) >= overflow_at)
        return x > 0 ? INFINITY : -INFINITY;
    return x > 0 ? FLT_MAX : -FLT_MAX;
}

#endif
