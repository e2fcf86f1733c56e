/* The D-3 dtype graph facts. */
#include <string.h>

#include "check.h"
#include "strideweave/strideweave.h" /* the umbrella header compiles on its own */

int main(void)
{
    CHECK(strcmp(sw_dtype_info_of(SW_DT_FLOAT32)->name, "Float32") == 0);
    CHECK(sw_dtype_info_of(SW_DT_FLOAT32)->supertype == SW_DT_FLOATING);
    CHECK(sw_dtype_info_of(SW_DT_ANY)->supertype == -1);
    CHECK(sw_dtype_info_of(SW_DT_COUNT) == NULL);
    CHECK_EQ_I64(sw_dtype_info_of(SW_DT_E2M1)->bits, 4);
    CHECK_EQ_I64(sw_dtype_info_of(SW_DT_INTEGER)->nplanes, 0);
    CHECK_EQ_I64(sw_dtype_info_of(SW_DT_SCALED_INT32)->nplanes, 2);
    CHECK(sw_dtype_info_of(SW_DT_SCALED_INT32)->planes[1] == SW_DT_FLOAT32);
    CHECK_EQ_I64(sw_dtype_slot_bytes(SW_DT_FLOAT32), 4);
    CHECK_EQ_I64(sw_dtype_slot_bytes(SW_DT_INT32), 4);
    CHECK_EQ_I64(sw_dtype_slot_bytes(SW_DT_BOOL), 1);
    CHECK_EQ_I64(sw_dtype_slot_bytes(SW_DT_FLOAT64), 0);
    CHECK(sw_dtype_is_subtype(SW_DT_FLOAT32, SW_DT_ANY));
    CHECK(sw_dtype_is_subtype(SW_DT_INT32, SW_DT_INTEGER));
    CHECK(!sw_dtype_is_subtype(SW_DT_INT32, SW_DT_FLOATING));
    CHECK(sw_dtype_is_subtype(SW_DT_BOOL, SW_DT_BOOL));
    return check_report("dtype");
}
