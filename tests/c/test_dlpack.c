/* DLPack packing: one block holding struct + shape + strides, the fields a
 * consumer reads, the deleter's single free and single release callback,
 * request validation, and the "alloc" fault. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "strideweave/alloc.h"
#include "strideweave/dlpack.h"
#include "strideweave/status.h"
#include "strideweave/testing.h"

static int releases;
static void *released_ctx;

static void *released_pin;

static void count_release(void *ctx, void *pin)
{
    releases++;
    released_ctx = ctx;
    released_pin = pin;
}

static float storage[64];

static sw_dlpack_request sample(const int64_t *extents, const int64_t *strides,
                                int32_t ndim)
{
    sw_dlpack_request r;
    memset(&r, 0, sizeof r);
    r.ndim = ndim;
    r.extents = extents;
    r.strides = strides;
    r.data = storage;
    r.offset = 3;
    r.device_type = kDLCPU;
    r.device_id = 0;
    r.code = kDLFloat;
    r.bits = 32;
    r.lanes = 1;
    r.manager_ctx = &releases;
    r.release = count_release;
    return r;
}

/* Shape and strides live inside the one block, right after the header. */
static int inside_block(const void *block, const void *p, size_t bytes)
{
    const char *b = block, *q = p;
    return q >= b && q + bytes <= b + sw_alloc_size(block);
}

static void test_legacy_fields_and_layout(void)
{
    int64_t ext[3] = {2, 3, 4}, str[3] = {1, 0, 6};
    int64_t before = sw_alloc_live_bytes();
    sw_dlpack_request r = sample(ext, str, 3);
    r.pin = storage + 1; /* opaque: handed back to the release callback */
    DLManagedTensor *m = NULL;
    sw_error err;
    CHECK(sw_dlpack_pack(&r, &m, &err) == SW_OK);
    CHECK(m != NULL);
    if (!m)
        return;
    /* exactly one live block, of the documented size */
    CHECK_EQ_I64(sw_alloc_live_bytes() - before, sw_dlpack_block_bytes(0, 3));
    CHECK_EQ_I64(sw_alloc_size(m), sw_dlpack_block_bytes(0, 3));
    CHECK(inside_block(m, m->dl_tensor.shape, 3 * sizeof(int64_t)));
    CHECK(inside_block(m, m->dl_tensor.strides, 3 * sizeof(int64_t)));
    CHECK(m->dl_tensor.strides == m->dl_tensor.shape + 3);
    CHECK((char *)m->dl_tensor.shape >= (char *)m + sizeof(DLManagedTensor));
    CHECK(m->dl_tensor.data == storage);
    CHECK_EQ_I64(m->dl_tensor.byte_offset, 12);
    CHECK_EQ_I64(m->dl_tensor.ndim, 3);
    CHECK_EQ_I64(m->dl_tensor.device.device_type, kDLCPU);
    CHECK_EQ_I64(m->dl_tensor.device.device_id, 0);
    CHECK_EQ_I64(m->dl_tensor.dtype.code, kDLFloat);
    CHECK_EQ_I64(m->dl_tensor.dtype.bits, 32);
    CHECK_EQ_I64(m->dl_tensor.dtype.lanes, 1);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_I64(m->dl_tensor.shape[i], ext[i]);
        CHECK_EQ_I64(m->dl_tensor.strides[i], str[i]); /* stride 0 kept */
    }
    CHECK(m->manager_ctx == &releases);
    CHECK(m->deleter != NULL);
    /* the request's arrays were copied, not borrowed */
    ext[0] = 99;
    CHECK_EQ_I64(m->dl_tensor.shape[0], 2);

    releases = 0;
    released_ctx = NULL;
    m->deleter(m);
    CHECK_EQ_I64(releases, 1);
    CHECK(released_ctx == &releases);
    CHECK(released_pin == storage + 1);
    CHECK_EQ_I64(sw_alloc_live_bytes(), before);
}

static void test_versioned_fields_and_flags(void)
{
    int64_t ext[2] = {5, 7}, str[2] = {7, 1};
    int64_t before = sw_alloc_live_bytes();
    for (int ro = 0; ro < 2; ro++) {
        sw_dlpack_request r = sample(ext, str, 2);
        r.flags = ro ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
        r.code = kDLInt;
        r.device_type = kDLCUDA; /* any device passes through verbatim */
        r.device_id = 3;
        DLManagedTensorVersioned *m = NULL;
        CHECK(sw_dlpack_pack_versioned(&r, &m, NULL) == SW_OK);
        if (!m)
            continue;
        CHECK_EQ_I64(sw_alloc_live_bytes() - before, sw_dlpack_block_bytes(1, 2));
        CHECK(inside_block(m, m->dl_tensor.shape, 4 * sizeof(int64_t)));
        CHECK_EQ_I64(m->version.major, 1);
        CHECK_EQ_I64(m->version.minor, 0);
        CHECK_EQ_I64(m->flags, ro ? 1 : 0);
        CHECK_EQ_I64(m->dl_tensor.dtype.code, kDLInt);
        CHECK_EQ_I64(m->dl_tensor.device.device_type, kDLCUDA);
        CHECK_EQ_I64(m->dl_tensor.device.device_id, 3);
        CHECK_EQ_I64(m->dl_tensor.shape[1], 7);
        CHECK_EQ_I64(m->dl_tensor.strides[0], 7);
        CHECK_EQ_I64(m->dl_tensor.byte_offset, 12);
        releases = 0;
        m->deleter(m);
        CHECK_EQ_I64(releases, 1);
        CHECK_EQ_I64(sw_alloc_live_bytes(), before);
    }
}

static void test_rank_zero_and_no_release(void)
{
    int64_t before = sw_alloc_live_bytes();
    sw_dlpack_request r = sample(NULL, NULL, 0);
    r.release = NULL;
    r.offset = 0;
    DLManagedTensorVersioned *m = NULL;
    CHECK(sw_dlpack_pack_versioned(&r, &m, NULL) == SW_OK);
    if (m) {
        CHECK_EQ_I64(m->dl_tensor.ndim, 0);
        CHECK(m->dl_tensor.shape != NULL);
        CHECK_EQ_I64(m->dl_tensor.byte_offset, 0);
        m->deleter(m); /* NULL release callback: just frees */
    }
    CHECK_EQ_I64(sw_alloc_live_bytes(), before);
}

static void test_rejects_bad_requests(void)
{
    int64_t ext[2] = {2, 2}, str[2] = {1, 2}, neg[2] = {2, -1};
    int64_t before = sw_alloc_live_bytes();
    sw_error err;
    DLManagedTensor *m = NULL;
    DLManagedTensorVersioned *v = NULL;
    releases = 0;

    sw_dlpack_request r = sample(ext, str, 2);
    r.ndim = -1;
    CHECK(sw_dlpack_pack(&r, &m, &err) == SW_EINVAL);
    CHECK(strstr(err.msg, "ndim") != NULL);

    r = sample(NULL, str, 2);
    CHECK(sw_dlpack_pack(&r, &m, &err) == SW_EINVAL);

    r = sample(neg, str, 2);
    CHECK(sw_dlpack_pack(&r, &m, &err) == SW_EINVAL);
    CHECK(strstr(err.msg, "extent 1") != NULL);

    r = sample(ext, str, 2);
    r.offset = -1;
    CHECK(sw_dlpack_pack_versioned(&r, &v, &err) == SW_EINVAL);

    r = sample(ext, str, 2);
    r.bits = 12;
    CHECK(sw_dlpack_pack(&r, &m, &err) == SW_EINVAL);
    r.bits = 32;
    r.lanes = 0;
    CHECK(sw_dlpack_pack(&r, &m, &err) == SW_EINVAL);

    r = sample(ext, str, 2);
    r.flags = DLPACK_FLAG_BITMASK_READ_ONLY; /* legacy has no flags word */
    CHECK(sw_dlpack_pack(&r, &m, &err) == SW_EINVAL);
    CHECK(strstr(err.msg, "flags") != NULL);

    r = sample(ext, str, 2);
    r.data = NULL;
    CHECK(sw_dlpack_pack(&r, &m, &err) == SW_EINVAL);
    CHECK(strstr(err.msg, "non-null") != NULL);
    int64_t zero_ext[2] = {2, 0}; /* no elements: a null pointer is fine */
    r.extents = zero_ext;
    CHECK(sw_dlpack_pack(&r, &m, &err) == SW_OK);
    if (m)
        m->deleter(m);
    CHECK_EQ_I64(releases, 1);
    releases = 0;

    r = sample(ext, str, 2);
    r.offset = INT64_MAX;
    r.bits = 64;
    r.lanes = 4; /* 32 bytes per element: past uint64 */
    CHECK(sw_dlpack_pack_versioned(&r, &v, &err) == SW_EOVERFLOW);

    CHECK(sw_dlpack_pack(NULL, &m, NULL) == SW_EINVAL);
    CHECK(m == NULL || releases == 0);
    CHECK_EQ_I64(releases, 0); /* failures never call release */
    CHECK_EQ_I64(sw_alloc_live_bytes(), before);
}

static void test_alloc_fault(void)
{
    int64_t ext[1] = {8}, str[1] = {1};
    int64_t before = sw_alloc_live_bytes();
    if (!sw_fault_enabled()) {
        CHECK(sw_fault_arm("alloc", 0, 1) == SW_ENOTSUP);
        return;
    }
    releases = 0;
    sw_error err;
    sw_dlpack_request r = sample(ext, str, 1);
    DLManagedTensor *m = NULL;
    DLManagedTensorVersioned *v = NULL;
    CHECK(sw_fault_arm("alloc", 0, 2) == SW_OK);
    CHECK(sw_dlpack_pack(&r, &m, &err) == SW_ENOMEM);
    CHECK(m == NULL);
    CHECK(sw_dlpack_pack_versioned(&r, &v, &err) == SW_ENOMEM);
    CHECK(v == NULL);
    CHECK(strstr(err.msg, "allocate") != NULL);
    sw_fault_clear();
    CHECK_EQ_I64(releases, 0);
    CHECK_EQ_I64(sw_alloc_live_bytes(), before);
    /* and it works again once the fault is cleared */
    CHECK(sw_dlpack_pack_versioned(&r, &v, &err) == SW_OK);
    if (v)
        v->deleter(v);
    CHECK_EQ_I64(releases, 1);
    CHECK_EQ_I64(sw_alloc_live_bytes(), before);
}

static void test_many_cycles_flat(void)
{
    int64_t ext[6] = {2, 2, 2, 2, 2, 2}, str[6] = {1, 2, 4, 8, 16, 32};
    int64_t before = sw_alloc_live_bytes();
    releases = 0;
    for (int i = 0; i < 10000; i++) {
        sw_dlpack_request r = sample(ext, str, 6);
        DLManagedTensorVersioned *v = NULL;
        if (sw_dlpack_pack_versioned(&r, &v, NULL) != SW_OK)
            break;
        v->deleter(v);
    }
    CHECK_EQ_I64(releases, 10000);
    CHECK_EQ_I64(sw_alloc_live_bytes(), before);
}

int main(void)
{
    test_legacy_fields_and_layout();
    test_versioned_fields_and_flags();
    test_rank_zero_and_no_release();
    test_rejects_bad_requests();
    test_alloc_fault();
    test_many_cycles_flat();
    return check_report("dlpack");
}
