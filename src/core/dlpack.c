/* Packing a DLPack managed tensor in one allocation.
 *
 * The block is the managed struct, the release callback, then the shape and
 * stride arrays the DLTensor points into; the deleter frees the block first
 * (needs nothing but the allocator) and then hands `manager_ctx` to the
 * callback, so a caller that must take a lock or the GIL to drop its
 * reference does that with the memory already returned. */
#include "strideweave/dlpack.h"

#include "dlpack_internal.h"
#include "strideweave/alloc.h"

/* The ABI a consumer reads: sizes and offsets of the standard's LP64 layout. */
_Static_assert(sizeof(DLPackVersion) == 8, "DLPackVersion is two 32-bit words");
_Static_assert(sizeof(DLDevice) == 8, "DLDevice is two 32-bit words");
_Static_assert(offsetof(DLDataType, bits) == 1 && offsetof(DLDataType, lanes) == 2,
               "DLDataType fields");
_Static_assert(sizeof(DLDataType) == 4, "DLDataType is 4 bytes");
_Static_assert(offsetof(DLTensor, device) == 8, "DLTensor.device");
_Static_assert(offsetof(DLTensor, ndim) == 16, "DLTensor.ndim");
_Static_assert(offsetof(DLTensor, dtype) == 20, "DLTensor.dtype");
_Static_assert(offsetof(DLTensor, shape) == 24, "DLTensor.shape");
_Static_assert(offsetof(DLTensor, strides) == 32, "DLTensor.strides");
_Static_assert(offsetof(DLTensor, byte_offset) == 40, "DLTensor.byte_offset");
_Static_assert(sizeof(DLTensor) == 48, "DLTensor size");
_Static_assert(offsetof(DLManagedTensor, manager_ctx) == 48, "legacy manager_ctx");
_Static_assert(offsetof(DLManagedTensor, deleter) == 56, "legacy deleter");
_Static_assert(sizeof(DLManagedTensor) == 64, "legacy size");
_Static_assert(offsetof(DLManagedTensorVersioned, version) == 0, "versioned version");
_Static_assert(offsetof(DLManagedTensorVersioned, manager_ctx) == 8, "versioned ctx");
_Static_assert(offsetof(DLManagedTensorVersioned, deleter) == 16, "versioned deleter");
_Static_assert(offsetof(DLManagedTensorVersioned, flags) == 24, "versioned flags");
_Static_assert(offsetof(DLManagedTensorVersioned, dl_tensor) == 32, "versioned tensor");
_Static_assert(sizeof(DLManagedTensorVersioned) == 80, "versioned size");
_Static_assert(DLPACK_FLAG_BITMASK_READ_ONLY == 1, "read-only is flags bit 0");

typedef struct legacy_block {
    DLManagedTensor m;
    sw_dlpack_release_fn release;
    void *pin;
    int64_t modes[]; /* shape[ndim] then strides[ndim] */
} legacy_block;

typedef struct versioned_block {
    DLManagedTensorVersioned m;
    sw_dlpack_release_fn release;
    void *pin;
    int64_t modes[];
} versioned_block;

/* Both deleters: the block goes first, then the exporter's release (which
 * may drop the last reference to what the block pointed into). */
static void free_then_release(void *block, sw_dlpack_release_fn release, void *ctx, void *pin)
{
    sw_free(block);
    if (release)
        release(ctx, pin);
}

static void legacy_deleter(DLManagedTensor *self)
{
    legacy_block *b = (legacy_block *)self;
    if (b)
        free_then_release(b, b->release, self->manager_ctx, b->pin);
}

static void versioned_deleter(DLManagedTensorVersioned *self)
{
    versioned_block *b = (versioned_block *)self;
    if (b)
        free_then_release(b, b->release, self->manager_ctx, b->pin);
}

/* Internal so the hot path inlines it (-fPIC keeps exported calls out of line). */
static inline size_t block_bytes(int versioned, int32_t ndim)
{
    size_t head = versioned ? sizeof(versioned_block) : sizeof(legacy_block);
    return head + 2 * (size_t)(ndim > 0 ? ndim : 0) * sizeof(int64_t);
}

size_t sw_dlpack_block_bytes(int versioned, int32_t ndim)
{
    return block_bytes(versioned, ndim);
}

/* Everything that can be wrong with a request, checked before allocating.
 * Inlined: it is most of the work of an export. */
static inline __attribute__((always_inline)) sw_status check_request(const sw_dlpack_request *req, int versioned,
                               uint64_t *byte_offset, sw_error *err)
{
    if (!req)
        return sw_error_set(err, SW_EINVAL, "DLPack request is NULL");
    if (req->ndim < 0)
        return sw_error_set(err, SW_EINVAL, "ndim must be >= 0, not %d",
                            (int)req->ndim);
    if (req->ndim > 0 && (!req->extents || !req->strides))
        return sw_error_set(err, SW_EINVAL,
                            "extents and strides are required when ndim > 0");
    if (req->lanes < 1)
        return sw_error_set(err, SW_EINVAL, "lanes must be >= 1");
    if (req->bits == 0 || req->bits % 8 != 0)
        return sw_error_set(err, SW_EINVAL,
                            "bits must be a positive multiple of 8, not %u",
                            (unsigned)req->bits);
    if (req->offset < 0)
        return sw_error_set(err, SW_EINVAL, "offset must be >= 0, not %lld",
                            (long long)req->offset);
    if (!versioned && req->flags != 0)
        return sw_error_set(err, SW_EINVAL,
                            "a legacy DLManagedTensor has no flags word");
    int empty = 0;
    for (int32_t i = 0; i < req->ndim; i++) {
        if (req->extents[i] < 0)
            return sw_error_set(err, SW_EINVAL,
                                "extent %d must be >= 0, not %lld", (int)i,
                                (long long)req->extents[i]);
        empty |= req->extents[i] == 0;
    }
    if (!req->data && !empty)
        return sw_error_set(err, SW_EINVAL,
                            "DLPack data pointer must be non-null for a "
                            "tensor with elements");
    uint64_t item = (uint64_t)(req->bits / 8) * req->lanes;
    if (__builtin_mul_overflow((uint64_t)req->offset, item, byte_offset))
        return sw_error_set(err, SW_EOVERFLOW,
                            "byte offset of element %lld overflows uint64",
                            (long long)req->offset);
    return SW_OK;
}

static void fill_tensor(DLTensor *t, const sw_dlpack_request *req,
                        int64_t *modes, uint64_t byte_offset)
{
    int32_t n = req->ndim;
    /* a handful of modes: a plain loop beats two memcpy calls */
    for (int32_t i = 0; i < n; i++) {
        modes[i] = req->extents[i];
        modes[n + i] = req->strides[i];
    }
    t->data = req->data;
    t->device.device_type = (DLDeviceType)req->device_type;
    t->device.device_id = req->device_id;
    t->ndim = req->ndim;
    t->dtype.code = req->code;
    t->dtype.bits = req->bits;
    t->dtype.lanes = req->lanes;
    t->shape = modes;
    t->strides = modes + n;
    t->byte_offset = byte_offset;
}

/* The two packings once the request is known to be well formed. */
static sw_status pack_legacy(const sw_dlpack_request *req, uint64_t byte_offset,
                             DLManagedTensor **out, sw_error *err)
{
    legacy_block *b = sw_malloc(block_bytes(0, req->ndim));
    if (!b)
        return sw_error_set(err, SW_ENOMEM,
                            "cannot allocate a DLPack managed tensor");
    fill_tensor(&b->m.dl_tensor, req, b->modes, byte_offset);
    b->m.manager_ctx = req->manager_ctx;
    b->m.deleter = legacy_deleter;
    b->release = req->release;
    b->pin = req->pin;
    *out = &b->m;
    return SW_OK;
}

static sw_status pack_versioned(const sw_dlpack_request *req, uint64_t byte_offset,
                                DLManagedTensorVersioned **out, sw_error *err)
{
    versioned_block *b = sw_malloc(block_bytes(1, req->ndim));
    if (!b)
        return sw_error_set(err, SW_ENOMEM,
                            "cannot allocate a DLPack managed tensor");
    b->m.version.major = 1;
    b->m.version.minor = 0;
    b->m.manager_ctx = req->manager_ctx;
    b->m.deleter = versioned_deleter;
    b->m.flags = req->flags;
    fill_tensor(&b->m.dl_tensor, req, b->modes, byte_offset);
    b->release = req->release;
    b->pin = req->pin;
    *out = &b->m;
    return SW_OK;
}

sw_status sw_dlpack_pack(const sw_dlpack_request *req, DLManagedTensor **out,
                         sw_error *err)
{
    uint64_t byte_offset = 0;
    sw_status st = check_request(req, 0, &byte_offset, err);
    return st == SW_OK ? pack_legacy(req, byte_offset, out, err) : st;
}

sw_status sw_dlpack_pack_versioned(const sw_dlpack_request *req,
                                   DLManagedTensorVersioned **out,
                                   sw_error *err)
{
    uint64_t byte_offset = 0;
    sw_status st = check_request(req, 1, &byte_offset, err);
    return st == SW_OK ? pack_versioned(req, byte_offset, out, err) : st;
}

/* dlpack_internal.h: a carrier's export builds its request from a layout
 * and a carrier it has checked under the carrier's lock (tensor.c), so
 * check_request would only repeat those checks: about a tenth of an
 * export's instructions (bench/dlpack_export.py). */
sw_status sw_dlpack_pack_checked(const sw_dlpack_request *req, int versioned, void **out,
                                 sw_error *err)
{
    uint64_t byte_offset = (uint64_t)req->offset * (uint64_t)(req->bits / 8) * req->lanes;
    return versioned ? pack_versioned(req, byte_offset, (DLManagedTensorVersioned **)out, err)
                     : pack_legacy(req, byte_offset, (DLManagedTensor **)out, err);
}
