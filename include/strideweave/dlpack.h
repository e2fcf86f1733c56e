/* DLPack 1.0 ABI, declared by strideweave itself, and the core routine that
 * packs one managed tensor (legacy or versioned) in a single allocation.
 *
 * The struct declarations are ABI-identical to the DLPack 1.0 standard
 * (dmlc/dlpack, include/dlpack/dlpack.h). They share the standard header's
 * include guard, so including either header first makes the other a no-op
 * and a translation unit never sees two definitions. The static asserts in
 * src/core/dlpack.c pin the sizes and offsets a consumer relies on.
 *
 * Ownership: a packed managed tensor is one allocation the consumer owns;
 * its deleter frees it and then calls the request's own release (which
 * gives back whatever keeps the data alive). A C program exporting a
 * tensor calls sw_tensor_to_dlpack (tensor.h), which fills the request.
 *
 * Threads: the pack calls are thread-safe (they touch only the request and
 * the new block); a deleter may run on any thread, once. */
#ifndef STRIDEWEAVE_DLPACK_H
#define STRIDEWEAVE_DLPACK_H

#include "strideweave/export.h"

#include <stddef.h>
#include <stdint.h>

#include "strideweave/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_

#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 0

typedef struct {
    uint32_t major;
    uint32_t minor;
} DLPackVersion;

/* Device type codes (the subset of the standard's values worth naming; any
 * other integer a carrier reports is passed through verbatim). */
typedef enum {
    kDLCPU = 1,
    kDLCUDA = 2,
    kDLCUDAHost = 3,
    kDLOpenCL = 4,
    kDLVulkan = 7,
    kDLMetal = 8,
    kDLVPI = 9,
    kDLROCM = 10,
    kDLROCMHost = 11,
    kDLExtDev = 12,
    kDLCUDAManaged = 13,
    kDLOneAPI = 14,
    kDLWebGPU = 15,
    kDLHexagon = 16,
    kDLMAIA = 17
} DLDeviceType;

typedef struct {
    DLDeviceType device_type;
    int32_t device_id;
} DLDevice;

typedef enum {
    kDLInt = 0U,
    kDLUInt = 1U,
    kDLFloat = 2U,
    kDLOpaqueHandle = 3U,
    kDLBfloat = 4U,
    kDLComplex = 5U,
    kDLBool = 6U
} DLDataTypeCode;

typedef struct {
    uint8_t code;   /* a DLDataTypeCode */
    uint8_t bits;
    uint16_t lanes;
} DLDataType;

typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;    /* ndim extents */
    int64_t *strides;  /* ndim strides in elements, or NULL for row-major */
    uint64_t byte_offset;
} DLTensor;

/* Legacy (unversioned) managed tensor: capsule name "dltensor". */
typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)

/* Versioned managed tensor: capsule name "dltensor_versioned". */
typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

#endif /* DLPACK_DLPACK_H_ */

/* ---- strideweave's packing API ------------------------------------------ */

/* Called exactly once by the managed tensor's deleter, after the block is
 * freed, with the request's `manager_ctx` and `pin`. It may run on any
 * thread; a caller that pinned `pin` for the export drops that pin here,
 * under the lock it pins and frees that storage with (see alloc.h). */
typedef void (*sw_dlpack_release_fn)(void *manager_ctx, void *pin);

/* Everything one export needs. Modes are copied, so the arrays need only
 * live for the call. */
typedef struct sw_dlpack_request {
    int32_t ndim;             /* leaf modes, >= 0 */
    const int64_t *extents;   /* ndim extents, each >= 0 */
    const int64_t *strides;   /* ndim strides in elements, kept verbatim */
    void *data;               /* storage the offset is relative to */
    int64_t offset;           /* in elements, >= 0; scaled to byte_offset */
    int32_t device_type;
    int32_t device_id;
    uint8_t code;             /* DLDataTypeCode */
    uint8_t bits;             /* a whole number of bytes per lane */
    uint16_t lanes;           /* >= 1 */
    uint64_t flags;           /* versioned only; must be 0 for legacy */
    void *manager_ctx;        /* opaque, stored in the managed tensor */
    sw_dlpack_release_fn release; /* may be NULL */
    void *pin;                /* opaque, handed to `release`: the storage block
                                 the caller pinned for this export, or NULL */
} sw_dlpack_request;

/* One sw_malloc'd block holds the managed struct, then the shape, then the
 * strides. The installed deleter frees that block and then calls
 * `release(manager_ctx, pin)`. Failure (SW_EINVAL for a malformed request,
 * SW_EOVERFLOW for a byte offset past uint64, SW_ENOMEM) allocates nothing
 * and never calls `release`; *out is set only on success. */
SW_API sw_status sw_dlpack_pack(const sw_dlpack_request *req, DLManagedTensor **out,
                                sw_error *err);
/* Same, versioned: version exactly 1.0 and `req->flags` as the flags word. */
SW_API sw_status sw_dlpack_pack_versioned(const sw_dlpack_request *req,
                                          DLManagedTensorVersioned **out,
                                          sw_error *err);

/* Bytes the single block of an export of `ndim` modes takes (for tests). */
SW_API size_t sw_dlpack_block_bytes(int versioned, int32_t ndim);

#ifdef __cplusplus
}
#endif

#endif
