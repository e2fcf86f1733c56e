/* libFuzzer target: packing a DLPack managed tensor from arbitrary
 * requests (ndim, extents, strides, offset, dtype), both ABI versions, and
 * running its deleter. */
#include <stdint.h>
#include <string.h>

#include "strideweave/dlpack.h"

static int released;

static void on_release(void *ctx, void *pin)
{
    (void)ctx;
    (void)pin;
    released++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8)
        return 0;
    int32_t ndim = data[0] % 40;
    sw_dlpack_request req;
    memset(&req, 0, sizeof req);
    req.ndim = ndim;
    req.code = data[1] % 4;
    req.bits = data[2];
    req.lanes = (uint16_t)(data[3] | 1);
    req.flags = data[4] & 1;
    req.device_type = data[5] % 3;
    data += 8, size -= 8;
    int64_t extents[40] = {0}, strides[40] = {0};
    for (int32_t i = 0; i < ndim && size >= 16; i++) {
        memcpy(&extents[i], data, 8);
        memcpy(&strides[i], data + 8, 8);
        extents[i] = (extents[i] & 1) ? extents[i] >> 1 : (extents[i] >> 1) % 5;
        data += 16, size -= 16;
    }
    if (size >= 8)
        memcpy(&req.offset, data, 8);
    static float storage[4];
    req.data = storage;
    req.extents = extents;
    req.strides = strides;
    req.release = on_release;
    sw_error err;
    DLManagedTensorVersioned *v = NULL;
    if (sw_dlpack_pack_versioned(&req, &v, &err) == SW_OK)
        v->deleter(v);
    req.flags = 0;
    DLManagedTensor *m = NULL;
    if (sw_dlpack_pack(&req, &m, &err) == SW_OK)
        m->deleter(m);
    return 0;
}
