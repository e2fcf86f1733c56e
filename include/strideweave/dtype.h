/* The built-in dtype graph (contract-core D-3) as plain C facts.
 *
 * Ownership: sw_dtype_info_of returns a pointer into a static, read-only
 * table that lives as long as the library; never free or write it.
 * Threads: every function is thread-safe (constant data only). */
#ifndef STRIDEWEAVE_DTYPE_H
#define STRIDEWEAVE_DTYPE_H

#include "strideweave/export.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Declaration order is the D-3 order that DType.registered() reports. */
typedef enum sw_dtype {
    SW_DT_ANY = 0,
    SW_DT_FLOATING,
    SW_DT_INTEGER,
    SW_DT_BOOL,
    SW_DT_INT32,
    SW_DT_INT8,
    SW_DT_FLOAT32,
    SW_DT_FLOAT64,
    SW_DT_E8M0,
    SW_DT_E5M2,
    SW_DT_E4M3,
    SW_DT_E3M2,
    SW_DT_E2M3,
    SW_DT_E2M1,
    SW_DT_SCALED_INT32,
    SW_DT_COUNT
} sw_dtype;

typedef enum sw_dtype_kind {
    SW_DK_CATEGORY,
    SW_DK_SIMPLE,
    SW_DK_COMPOUND
} sw_dtype_kind;

typedef struct sw_dtype_info {
    const char *name;
    sw_dtype_kind kind;
    int supertype;   /* an sw_dtype, or -1 for the root */
    int bits;        /* simple dtypes only, else 0 */
    int nplanes;     /* storage schema length: 0 for Integer */
    sw_dtype planes[2];
} sw_dtype_info;

SW_API const sw_dtype_info *sw_dtype_info_of(sw_dtype d);
/* Bytes one slot takes in host storage: 4 for Float32/Int32, 1 for Bool,
 * 0 for dtypes no shipped host carrier stores. */
SW_API size_t sw_dtype_slot_bytes(sw_dtype d);
/* Whether `d` is `ancestor` or one of its enclosing categories. */
SW_API int sw_dtype_is_subtype(sw_dtype d, sw_dtype ancestor);

#ifdef __cplusplus
}
#endif

#endif
