/* Checks that several constructors in the core start with, shared so that
 * each refusal reads the same everywhere. */
#ifndef SW_CHECKS_INTERNAL_H
#define SW_CHECKS_INTERNAL_H

#include <stdint.h>

#include "strideweave/dtype.h"
#include "strideweave/status.h"

/* The dtype's name for a message, "(unknown)" for a value outside the
 * enum. */
static inline const char *sw_dtype_name_or_unknown(sw_dtype dtype)
{
    const sw_dtype_info *info =
        ((int)dtype >= 0 && dtype < SW_DT_COUNT) ? sw_dtype_info_of(dtype) : NULL;
    return info ? info->name : "(unknown)";
}

/* `who`: out must not be NULL (SW_EINVAL), then size must be >= 0
 * (SW_EINVAL). */
static inline sw_status sw_check_out_and_size(const char *who, const void *out, int64_t size,
                                              sw_error *err)
{
    if (!out)
        return sw_error_set(err, SW_EINVAL, "%s: out must not be NULL", who);
    if (size < 0)
        return sw_error_set(err, SW_EINVAL, "%s: size must be >= 0, not %lld", who,
                            (long long)size);
    return SW_OK;
}

#endif
