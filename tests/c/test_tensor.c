/* Tensors through the public C API: construction checks, element access,
 * views sharing the carrier, and DLPack export (seed: export shape/strides
 * are the leaf modes, the read-only flag follows public mutability, release
 * while an export is outstanding is allowed). */
#include <string.h>

#include "check.h"
#include <strideweave/strideweave.h>

static void test_construction(void)
{
    sw_error err;
    sw_carrier *c;
    sw_tensor *t = NULL;
    CHECK(sw_cpu_new(6, SW_DT_FLOAT32, 0, &c, &err) == SW_OK);
    int64_t ext[2] = {2, 3};
    CHECK(sw_tensor_new_strided(NULL, 0, 2, ext, NULL, &t, &err) == SW_ETYPE);
    CHECK(sw_tensor_new_strided(c, -1, 2, ext, NULL, &t, &err) == SW_EINVAL);
    CHECK(sw_tensor_new_strided(c, 1, 2, ext, NULL, &t, &err) == SW_ERANGE);
    int64_t zero_ext[1] = {0};
    CHECK(sw_tensor_new_strided(c, 0, 1, zero_ext, NULL, &t, &err) == SW_EINVAL);
    CHECK(t == NULL);
    CHECK(sw_tensor_new_strided(c, 0, 2, ext, NULL, &t, &err) == SW_OK);
    CHECK_EQ_I64(sw_tensor_size(t), 6);
    CHECK_EQ_I64(sw_tensor_layout(t)->cosize, 6);
    CHECK(sw_tensor_carrier(t) == c);
    CHECK(sw_tensor_dtype(t) == SW_DT_FLOAT32);
    sw_tensor *t2;
    CHECK(sw_tensor_new(c, 0, sw_tensor_layout(t), &t2, &err) == SW_OK);
    CHECK(sw_layout_equal(sw_tensor_layout(t2), sw_tensor_layout(t)));
    sw_tensor_unref(t2);
    /* The tensor keeps the carrier handle alive. */
    sw_carrier_unref(c);
    CHECK_EQ_I64(sw_carrier_size(sw_tensor_carrier(t)), 6);
    CHECK(sw_carrier_release(sw_tensor_carrier(t), &err) == SW_OK);
    CHECK(sw_tensor_new_strided(sw_tensor_carrier(t), 0, 2, ext, NULL, &t2, &err) == SW_ESTATE);
    sw_tensor_unref(t);
}

static void test_elements(void)
{
    sw_error err;
    sw_carrier *c, *ci;
    sw_tensor *t, *ti;
    int64_t ext[2] = {2, 3}, str[2] = {3, 1}; /* transposed placement */
    CHECK(sw_cpu_new(6, SW_DT_FLOAT32, 0, &c, &err) == SW_OK);
    CHECK(sw_tensor_new_strided(c, 0, 2, ext, str, &t, &err) == SW_OK);
    for (int64_t k = 0; k < 6; k++)
        CHECK(sw_tensor_set_f32(t, k, (float)k, &err) == SW_OK);
    CHECK_EQ_I64(sw_carrier_version(c), 6);
    /* index k = x0 + 2*x1 lives in slot 3*x0 + x1 */
    float *raw = sw_cpu_pointer(c);
    CHECK(raw[3] == 1.0f && raw[1] == 2.0f && raw[5] == 5.0f);
    float v;
    CHECK(sw_tensor_get_f32(t, 4, &v, &err) == SW_OK && v == 4.0f);
    CHECK(sw_tensor_get_f32(t, 6, &v, &err) == SW_ERANGE);
    CHECK(sw_tensor_get_f32(t, -1, &v, &err) == SW_ERANGE);
    int32_t i;
    CHECK(sw_tensor_get_i32(t, 0, &i, &err) == SW_ETYPE);
    CHECK(sw_tensor_set_i32(t, 0, 1, &err) == SW_ETYPE);
    CHECK_EQ_I64(sw_carrier_version(c), 6);

    CHECK(sw_cpu_new(3, SW_DT_INT32, SW_CARRIER_IMMUTABLE, &ci, &err) == SW_OK);
    int64_t e3[1] = {3};
    CHECK(sw_tensor_new_strided(ci, 0, 1, e3, NULL, &ti, &err) == SW_OK);
    CHECK(sw_tensor_set_i32(ti, 0, 1, &err) == SW_ESTATE);
    CHECK(sw_tensor_get_i32(ti, 2, &i, &err) == SW_OK && i == 0);
    sw_tensor_unref(ti);
    sw_carrier_unref(ci);
    sw_tensor_unref(t);
    sw_carrier_unref(c);
}

static void test_views(void)
{
    sw_error err;
    sw_carrier *c;
    sw_tensor *t, *s, *p, *r, *b, *col;
    int64_t ext[2] = {4, 3};
    CHECK(sw_cpu_new(12, SW_DT_INT32, 0, &c, &err) == SW_OK);
    CHECK(sw_tensor_new_strided(c, 0, 2, ext, NULL, &t, &err) == SW_OK);
    for (int64_t k = 0; k < 12; k++)
        sw_tensor_set_i32(t, k, (int32_t)k, &err);
    int32_t v;
    /* slice mode 0 to [1, 3): elements (1..2, y) */
    CHECK(sw_tensor_slice(t, 0, 1, 3, &s, &err) == SW_OK);
    CHECK_EQ_I64(sw_tensor_size(s), 6);
    CHECK_EQ_I64(sw_tensor_offset(s), 1);
    CHECK(sw_tensor_get_i32(s, 0, &v, &err) == SW_OK && v == 1);
    CHECK(sw_tensor_get_i32(s, 3, &v, &err) == SW_OK && v == 6); /* (1, 1) -> 1 + 4 + 1 */
    CHECK(sw_tensor_slice(t, 0, 2, 2, &col, &err) == SW_EINVAL);
    CHECK(sw_tensor_slice(t, 0, 0, 5, &col, &err) == SW_EINVAL);
    CHECK(sw_tensor_slice(t, 2, 0, 1, &col, &err) == SW_ERANGE);
    /* a write through the view lands in the shared carrier */
    CHECK(sw_tensor_set_i32(s, 0, 100, &err) == SW_OK);
    CHECK(sw_tensor_get_i32(t, 1, &v, &err) == SW_OK && v == 100);
    /* permute: (y, x) */
    int32_t order[2] = {1, 0};
    CHECK(sw_tensor_permute(t, order, 2, &p, &err) == SW_OK);
    CHECK(sw_tensor_get_i32(p, 1, &v, &err) == SW_OK && v == 4); /* (y=1, x=0) */
    /* reshape of a contiguous tensor, refused for a permuted one */
    int64_t e2[2] = {6, 2};
    CHECK(sw_tensor_reshape(t, 2, e2, &r, &err) == SW_OK);
    CHECK(sw_tensor_get_i32(r, 7, &v, &err) == SW_OK && v == 7);
    CHECK(sw_tensor_reshape(p, 2, e2, &col, &err) == SW_EINVAL);
    int64_t e5[1] = {5};
    CHECK(sw_tensor_reshape(t, 1, e5, &col, &err) == SW_EINVAL);
    /* broadcast: a (1, 3) slice widened to (4, 3) with stride 0 */
    sw_tensor *row;
    CHECK(sw_tensor_slice(t, 0, 2, 3, &row, &err) == SW_OK);
    int64_t wide[2] = {4, 3};
    CHECK(sw_tensor_broadcast(row, wide, &b, &err) == SW_OK);
    CHECK_EQ_I64(sw_tensor_layout(b)->strides[0], 0);
    CHECK_EQ_I64(sw_tensor_size(b), 12);
    CHECK(sw_tensor_get_i32(b, 3, &v, &err) == SW_OK && v == 2);
    CHECK(sw_tensor_get_i32(b, 11, &v, &err) == SW_OK && v == 10);
    sw_tensor_unref(b);
    sw_tensor_unref(row);
    sw_tensor_unref(r);
    sw_tensor_unref(p);
    sw_tensor_unref(s);
    sw_tensor_unref(t);
    sw_carrier_unref(c);
}

static void test_dlpack(void)
{
    sw_error err;
    sw_carrier *c;
    sw_tensor *t, *s;
    int64_t ext[2] = {4, 3};
    CHECK(sw_cpu_new(12, SW_DT_FLOAT32, 0, &c, &err) == SW_OK);
    CHECK(sw_tensor_new_strided(c, 0, 2, ext, NULL, &t, &err) == SW_OK);
    CHECK(sw_tensor_slice(t, 0, 1, 3, &s, &err) == SW_OK);
    sw_tensor_set_f32(t, 5, 2.5f, &err);
    uint64_t version = sw_carrier_version(c);
    DLManagedTensorVersioned *dl;
    CHECK(sw_tensor_to_dlpack(s, &dl, &err) == SW_OK);
    CHECK(dl->version.major == 1 && dl->version.minor == 0);
    CHECK(dl->flags == 0); /* mutable: writable */
    CHECK(dl->dl_tensor.ndim == 2);
    CHECK(dl->dl_tensor.shape[0] == 2 && dl->dl_tensor.shape[1] == 3);
    CHECK(dl->dl_tensor.strides[0] == 1 && dl->dl_tensor.strides[1] == 4);
    CHECK(dl->dl_tensor.byte_offset == 4);
    CHECK(dl->dl_tensor.device.device_type == kDLCPU);
    CHECK(dl->dl_tensor.dtype.code == kDLFloat && dl->dl_tensor.dtype.bits == 32);
    const float *base = (const float *)((char *)dl->dl_tensor.data + dl->dl_tensor.byte_offset);
    CHECK(base[0 * 1 + 1 * 4] == 2.5f); /* (0, 1) of the slice is element 5 */
    CHECK_EQ_I64(sw_carrier_version(c), version);
    /* Release while exported: allowed; the memory stays until the deleter. */
    int64_t live_exported = sw_alloc_live_bytes();
    CHECK(sw_carrier_release(c, &err) == SW_OK);
    CHECK(sw_carrier_is_released(c));
    CHECK_EQ_I64(sw_alloc_live_bytes(), live_exported);
    CHECK(base[4] == 2.5f);
    sw_tensor_unref(s);
    sw_tensor_unref(t);
    sw_carrier_unref(c);
    dl->deleter(dl); /* frees the export, the storage, and the handles */
    CHECK(sw_alloc_live_bytes() < live_exported - 48);

    /* Read-only flag for an immutable carrier; refusals. */
    sw_carrier *imm, *g, *b;
    CHECK(sw_cpu_new(2, SW_DT_INT32, SW_CARRIER_IMMUTABLE, &imm, &err) == SW_OK);
    int64_t e2[1] = {2};
    CHECK(sw_tensor_new_strided(imm, 0, 1, e2, NULL, &t, &err) == SW_OK);
    CHECK(sw_tensor_to_dlpack(t, &dl, &err) == SW_OK);
    CHECK(dl->flags & DLPACK_FLAG_BITMASK_READ_ONLY);
    CHECK(dl->dl_tensor.dtype.code == kDLInt);
    dl->deleter(dl);
    sw_carrier_release(imm, &err);
    CHECK(sw_tensor_to_dlpack(t, &dl, &err) == SW_ESTATE);
    sw_tensor_unref(t);
    sw_carrier_unref(imm);
    float gv[2] = {1, 2};
    CHECK(sw_generic_new(gv, 2, SW_DT_FLOAT32, 0, &g, &err) == SW_OK);
    CHECK(sw_tensor_new_strided(g, 0, 1, e2, NULL, &t, &err) == SW_OK);
    CHECK(sw_tensor_to_dlpack(t, &dl, &err) == SW_ENOTSUP);
    CHECK(strstr(err.msg, "DLPack is not supported") != NULL);
    sw_tensor_unref(t);
    sw_carrier_unref(g);
    CHECK(sw_cpu_new(2, SW_DT_BOOL, 0, &b, &err) == SW_OK);
    CHECK(sw_tensor_new_strided(b, 0, 1, e2, NULL, &t, &err) == SW_OK);
    CHECK(sw_tensor_to_dlpack(t, &dl, &err) == SW_ENOTSUP);
    CHECK(strstr(err.msg, "Float32 and Int32") != NULL);
    sw_tensor_unref(t);
    sw_carrier_unref(b);
}

int main(void)
{
    int64_t live = sw_alloc_live_bytes();
    test_construction();
    test_elements();
    test_views();
    test_dlpack();
    CHECK_EQ_I64(sw_alloc_live_bytes(), live);
    return check_report("tensor");
}
