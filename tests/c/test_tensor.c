/* Tensors through the public C API: construction checks, element access,
 * views sharing the carrier, and DLPack export (seed: export shape/strides
 * are the leaf modes, the read-only flag follows public mutability, release
 * while an export is outstanding is allowed). */
#include <string.h>

#include "check.h"
#include <strideweave/strideweave.h>
#include <strideweave/binding.h>

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

/* sw_carrier_to_dlpack: the caller's manager_ctx and release, the storage
 * pinned rather than kept, legacy or versioned, its own read-only answer;
 * a pending destination exports (read-only); refusals in their order. */
static void *owner_ctx_seen, *owner_pin_seen;
static void owner_release(void *ctx, void *pin)
{
    owner_ctx_seen = ctx;
    owner_pin_seen = pin;
    sw_alloc_unpin(pin);
}

static void test_carrier_to_dlpack(void)
{
    sw_error err;
    sw_carrier *c, *b, *f;
    int ctx;
    CHECK(sw_cpu_new(4096, SW_DT_FLOAT32, 0, &c, &err) == SW_OK);
    int64_t ext[1] = {2}, str[1] = {3};
    sw_layout *l = sw_layout_new(1, (const uint8_t[]){SW_NODE_LEAF}, ext, str, &err);
    sw_dlpack_owner owner = {.versioned = 0, .read_only = -1, .manager_ctx = &ctx,
                             .release = owner_release};
    DLManagedTensor *legacy;
    CHECK(sw_carrier_to_dlpack(c, 1, l, &owner, (void **)&legacy, &err) == SW_OK);
    CHECK(legacy->manager_ctx == &ctx && legacy->dl_tensor.byte_offset == 4);
    CHECK(legacy->dl_tensor.strides[0] == 3 && legacy->dl_tensor.data == sw_cpu_pointer(c));
    /* Released while exported (the block is quarantined, not kept live:
     * test_carrier_inline.c); the deleter unpins it. */
    CHECK(sw_carrier_release(c, &err) == SW_OK);
    void *data = legacy->dl_tensor.data;
    legacy->deleter(legacy);
    CHECK(owner_ctx_seen == &ctx && owner_pin_seen == data);
    CHECK(sw_carrier_to_dlpack(c, 1, l, &owner, (void **)&legacy, &err) == SW_ESTATE);
    sw_carrier_unref(c);

    CHECK(sw_cpu_new(8, SW_DT_INT32, 0, &c, &err) == SW_OK);
    DLManagedTensorVersioned *v;
    owner.versioned = 1;
    owner.read_only = 1; /* the caller's answer wins over a mutable carrier */
    CHECK(sw_carrier_to_dlpack(c, 0, l, &owner, (void **)&v, &err) == SW_OK);
    CHECK((v->flags & DLPACK_FLAG_BITMASK_READ_ONLY) && v->dl_tensor.dtype.code == kDLInt);
    v->deleter(v);
    owner.read_only = -1;
    sw_carrier_mark_pending(c, SW_CARRIER_PENDING_DESTINATION);
    CHECK(sw_carrier_to_dlpack(c, 0, l, &owner, (void **)&v, &err) == SW_OK);
    CHECK(v->flags & DLPACK_FLAG_BITMASK_READ_ONLY); /* pending: not mutable */
    v->deleter(v);
    sw_carrier_unmark_pending(c, SW_CARRIER_PENDING_DESTINATION);
    CHECK(sw_carrier_to_dlpack(c, 5, l, &owner, (void **)&v, &err) == SW_ERANGE);
    CHECK(sw_carrier_to_dlpack(c, 0, l, NULL, (void **)&v, &err) == SW_ETYPE);
    sw_carrier_unref(c);
    /* A released Bool carrier is refused as released, before its dtype. */
    CHECK(sw_cpu_new(8, SW_DT_BOOL, 0, &b, &err) == SW_OK);
    CHECK(sw_carrier_to_dlpack(b, 0, l, &owner, (void **)&v, &err) == SW_ENOTSUP);
    CHECK(strstr(err.msg, "Float32 and Int32") != NULL);
    CHECK(sw_carrier_release(b, &err) == SW_OK);
    CHECK(sw_carrier_to_dlpack(b, 0, l, &owner, (void **)&v, &err) == SW_ESTATE);
    sw_carrier_unref(b);
    CHECK(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &f, &err) == SW_OK);
    CHECK(sw_carrier_to_dlpack(f, 0, l, &owner, (void **)&v, &err) == SW_ENOTSUP);
    CHECK(sw_carrier_release(f, &err) == SW_OK);
    sw_carrier_unref(f);
    sw_layout_free(l);
}

/* sw_tensor_read_values: logical order over any strides (transposed,
 * broadcast, offset), one read of the span for a file and an Evictable. */
static void test_read_values(void)
{
    sw_error err;
    sw_carrier *c;
    sw_tensor *t, *b;
    CHECK(sw_cpu_new(8, SW_DT_FLOAT32, 0, &c, &err) == SW_OK);
    float *raw = sw_cpu_pointer(c);
    for (int k = 0; k < 8; k++)
        raw[k] = (float)k;
    int64_t ext[2] = {2, 3}, str[2] = {3, 1};
    CHECK(sw_tensor_new_strided(c, 1, 2, ext, str, &t, &err) == SW_OK);
    float got[6] = {0};
    CHECK(sw_tensor_read_values(t, got, &err) == SW_OK);
    /* index x0 + 2*x1 lives in slot 1 + 3*x0 + x1 */
    const float want[6] = {1, 4, 2, 5, 3, 6};
    CHECK(memcmp(got, want, sizeof want) == 0);
    int64_t wide[2] = {2, 3}, one[2] = {1, 3};
    sw_tensor *row;
    CHECK(sw_tensor_new_strided(c, 5, 2, one, NULL, &row, &err) == SW_OK);
    CHECK(sw_tensor_broadcast(row, wide, &b, &err) == SW_OK);
    CHECK(sw_tensor_read_values(b, got, &err) == SW_OK);
    const float bwant[6] = {5, 5, 6, 6, 7, 7};
    CHECK(memcmp(got, bwant, sizeof bwant) == 0);
    sw_tensor_unref(row);
    sw_tensor_unref(b);
    /* A triple past the carrier's size reads nothing. */
    CHECK(sw_carrier_read_layout(c, 3, sw_tensor_layout(t), got, &err) == SW_ERANGE);
    CHECK(sw_carrier_read_layout(c, -1, sw_tensor_layout(t), got, &err) == SW_ERANGE);
    CHECK(sw_tensor_read_values(NULL, got, &err) == SW_ETYPE);
    /* A pending destination refuses, unless this thread runs the transfer. */
    sw_carrier_mark_pending(c, SW_CARRIER_PENDING_DESTINATION);
    CHECK(sw_tensor_read_values(t, got, &err) == SW_ESTATE && strstr(err.msg, "pending"));
    sw_carrier_begin_transfer(c);
    CHECK(sw_tensor_read_values(t, got, &err) == SW_OK);
    sw_carrier_end_transfer(c);
    sw_carrier_unmark_pending(c, SW_CARRIER_PENDING_DESTINATION);
    CHECK(sw_carrier_release(c, &err) == SW_OK);
    CHECK(sw_tensor_read_values(t, got, &err) == SW_ESTATE);
    sw_tensor_unref(t);
    sw_carrier_unref(c);
}

/* Bool slots are one byte; a layout with many extent-1 leaves still reads
 * (they are dropped before the copy kernel's mode limit applies). */
static void test_read_values_bool_and_many_leaves(void)
{
    sw_error err;
    sw_carrier *g;
    const uint8_t bits[4] = {1, 0, 0, 1};
    CHECK(sw_generic_new(bits, 4, SW_DT_BOOL, 0, &g, &err) == SW_OK);
    enum { N = 80 };
    int64_t ext[N], str[N];
    for (int i = 0; i < N; i++) {
        ext[i] = 1;
        str[i] = 0;
    }
    ext[N - 1] = 2, str[N - 1] = 3; /* slots 0 and 3 */
    uint8_t profile[N];
    memset(profile, SW_NODE_LEAF, sizeof profile);
    sw_layout *l = sw_layout_new(N, profile, ext, str, &err);
    CHECK(l != NULL);
    uint8_t got[2] = {7, 7};
    CHECK(sw_carrier_read_layout(g, 0, l, got, &err) == SW_OK);
    CHECK(got[0] == 1 && got[1] == 1);
    /* A STATE_ONLY carrier's slots are its binding's: refused, nothing read. */
    static const sw_carrier_class binding_class = {
        .name = "PythonCarrier", .flags = SW_CARRIER_CLASS_STATE_ONLY};
    sw_carrier *so;
    CHECK(sw_carrier_new(&binding_class, NULL, SW_DT_BOOL, 0, &so, &err) == SW_OK);
    got[0] = 7;
    CHECK(sw_carrier_read_layout(so, 0, l, got, &err) == SW_ENOTSUP && got[0] == 7);
    sw_carrier_unref(so);
    sw_layout_free(l);
    sw_carrier_unref(g);
}

/* FileBacked and Evictable have no host storage: the span is read through
 * the carrier's own read; an evicted Evictable refuses. */
static void test_read_values_file_and_evictable(void)
{
    sw_error err;
    sw_carrier *f, *p, *s, *e;
    sw_tensor *t;
    CHECK(sw_file_backed_new(NULL, SW_DT_INT32, 0, &f, &err) == SW_OK);
    CHECK(sw_carrier_allocate(f, 6, &err) == SW_OK);
    const int32_t vals[6] = {10, 11, 12, 13, 14, 15};
    CHECK(sw_carrier_write(f, 0, 6, vals, &err) == SW_OK);
    int64_t ext[1] = {3}, str[1] = {2};
    CHECK(sw_tensor_new_strided(f, 1, 1, ext, str, &t, &err) == SW_OK);
    int32_t got[3] = {0};
    CHECK(sw_tensor_read_values(t, got, &err) == SW_OK);
    CHECK(got[0] == 11 && got[1] == 13 && got[2] == 15);
    sw_tensor_unref(t);
    CHECK(sw_cpu_new(4, SW_DT_INT32, 0, &p, &err) == SW_OK);
    CHECK(sw_carrier_write(p, 0, 4, vals, &err) == SW_OK);
    CHECK(sw_file_backed_new(NULL, SW_DT_INT32, 0, &s, &err) == SW_OK);
    CHECK(sw_evictable_new(p, s, NULL, &e, &err) == SW_OK);
    int64_t two[1] = {2};
    CHECK(sw_tensor_new_strided(e, 2, 1, two, NULL, &t, &err) == SW_OK);
    CHECK(sw_tensor_read_values(t, got, &err) == SW_OK);
    CHECK(got[0] == 12 && got[1] == 13);
    CHECK(sw_evictable_evict(e, &err) == SW_OK);
    CHECK(sw_tensor_read_values(t, got, &err) == SW_ESTATE && strstr(err.msg, "promote"));
    sw_tensor_unref(t);
    CHECK(sw_carrier_release(e, &err) == SW_OK);
    CHECK(sw_carrier_release(f, &err) == SW_OK);
    sw_carrier_unref(e);
    sw_carrier_unref(p);
    sw_carrier_unref(s);
    sw_carrier_unref(f);
}

int main(void)
{
    /* First: its evict starts the move pool, whose allocations stay (the
     * leak check of the sanitizer build covers them). */
    test_read_values_file_and_evictable();
    int64_t live = sw_alloc_live_bytes();
    test_construction();
    test_elements();
    test_views();
    test_dlpack();
    test_carrier_to_dlpack();
    test_read_values();
    test_read_values_bool_and_many_leaves();
    CHECK_EQ_I64(sw_alloc_live_bytes(), live);
    return check_report("tensor");
}
