/* The host-memory carriers: CPU (exports through DLPack, bulk routes) and
 * Generic (typed slots reached only through the ops). Both keep one
 * sw_malloc'd block of at least one byte, so the address is never NULL
 * while live. */
#include <stddef.h>
#include <string.h>

#include "carrier_internal.h"
#include "checks_internal.h"
#include "strideweave/alloc.h"
#include "strideweave/dlpack.h"

/* Inside its carrier (sw_carrier_new_inline); a move reads data and
 * size, which lie in the carrier's second cache line, width only slot I/O. */
typedef struct host_impl {
    unsigned char *data; /* NULL once released */
    int64_t size;        /* slots */
    size_t width;        /* bytes per slot */
} host_impl;
_Static_assert(sizeof(host_impl) <= SW_CARRIER_INLINE_IMPL, "a host impl fits in its carrier");
_Static_assert(offsetof(host_impl, size) + sizeof(int64_t) <= 16,
               "a host impl's data and size lie in its first 16 bytes");

static int64_t host_size(void *impl)
{
    host_impl *h = impl;
    return h->data ? h->size : 0;
}

static sw_status host_read(void *impl, int64_t slot, int64_t count, void *out, sw_error *err)
{
    host_impl *h = impl;
    (void)err;
    memcpy(out, h->data + (size_t)slot * h->width, (size_t)count * h->width);
    return SW_OK;
}

static sw_status host_write(void *impl, int64_t slot, int64_t count, const void *in,
                            sw_error *err)
{
    host_impl *h = impl;
    if (h->width == 1) {
        /* Bool slots hold exactly 0 or 1. */
        const unsigned char *b = in;
        for (int64_t i = 0; i < count; i++)
            if (b[i] > 1)
                return sw_error_set(err, SW_EINVAL, "Bool slots take 0 or 1, not %u",
                                    (unsigned)b[i]);
    }
    memcpy(h->data + (size_t)slot * h->width, in, (size_t)count * h->width);
    return SW_OK;
}

static sw_status host_storage(void *impl, sw_carrier_storage *out, sw_error *err)
{
    host_impl *h = impl;
    (void)err;
    out->kind = SW_ENDPOINT_HOST;
    out->host = h->data;
    out->fd = -1;
    return SW_OK;
}

static sw_status cpu_dlpack_device(void *impl, int32_t *device_type, int32_t *device_id,
                                   sw_error *err)
{
    (void)impl;
    (void)err;
    *device_type = kDLCPU;
    *device_id = 0;
    return SW_OK;
}

static void host_release(void *impl)
{
    host_impl *h = impl;
    sw_free(h->data);
    h->data = NULL;
}

const sw_carrier_class sw_cpu_class = {
    .name = "CPU",
    .size = host_size,
    .read = host_read,
    .write = host_write,
    .storage = host_storage,
    .dlpack_device = cpu_dlpack_device,
    .release = host_release, /* no destroy: the impl lies inside the carrier */
    .flags = SW_CARRIER_CLASS_RUNS_NO_USER_CODE,
};

const sw_carrier_class sw_generic_class = {
    .name = "Generic",
    .size = host_size,
    .read = host_read,
    .write = host_write,
    .release = host_release, /* no destroy: the impl lies inside the carrier */
    .flags = SW_CARRIER_CLASS_RUNS_NO_USER_CODE,
};

static sw_status host_dtype_ok(const char *name, sw_dtype dtype, sw_error *err)
{
    if (dtype == SW_DT_FLOAT32 || dtype == SW_DT_INT32 || dtype == SW_DT_BOOL)
        return SW_OK;
    return sw_error_set(err, SW_EINVAL,
                        "%s does not support storage dtype %s; use Float32, Int32 or Bool",
                        name, sw_dtype_name_or_unknown(dtype));
}

static sw_status make_host(const sw_carrier_class *ops, int64_t size, sw_dtype dtype,
                           int flags, const void *values, sw_carrier **out, sw_error *err)
{
    sw_status st = sw_check_out_and_size(ops->name, out, size, err);
    if (st == SW_OK)
        st = host_dtype_ok(ops->name, dtype, err);
    if (st != SW_OK)
        return st;
    size_t width = sw_dtype_slot_bytes(dtype);
    size_t bytes;
    if (__builtin_mul_overflow((uint64_t)size, width, &bytes) || bytes > (size_t)INT64_MAX)
        return sw_error_set(err, SW_EOVERFLOW, "%s: %lld slots do not fit in memory",
                            ops->name, (long long)size);
    if (values && width == 1)
        for (int64_t i = 0; i < size; i++)
            if (((const unsigned char *)values)[i] > 1)
                return sw_error_set(err, SW_EINVAL, "%s: Bool slots take 0 or 1", ops->name);
    /* The impl inside the carrier: one allocation, and its data pointer
     * and size in the carrier's second line, which every move reads. */
    sw_carrier *c;
    st = sw_carrier_new_inline(ops, sizeof(host_impl), dtype, flags, &c, err);
    if (st != SW_OK)
        return st;
    host_impl *h = c->impl;
    h->size = size;
    h->width = width;
    h->data = (flags & SW_CARRIER_EMPTY) || values ? sw_malloc(bytes ? bytes : 1)
                                                   : sw_calloc(1, bytes ? bytes : 1);
    if (!h->data) {
        sw_carrier_unref(c);
        return sw_error_set(err, SW_ENOMEM, "%s: cannot allocate %zu bytes", ops->name, bytes);
    }
    if (values && bytes)
        memcpy(h->data, values, bytes);
    *out = c;
    return SW_OK;
}

sw_status sw_cpu_new(int64_t size, sw_dtype dtype, int flags, sw_carrier **out,
                     sw_error *err)
{
    return make_host(&sw_cpu_class, size, dtype, flags, NULL, out, err);
}

sw_status sw_generic_new(const void *values, int64_t count, sw_dtype dtype, int flags,
                         sw_carrier **out, sw_error *err)
{
    if (!values && count > 0)
        return sw_error_set(err, SW_EINVAL, "Generic: values must not be NULL");
    return make_host(&sw_generic_class, count, dtype, flags & ~SW_CARRIER_EMPTY,
                     values ? values : "", out, err);
}

sw_status sw_generic_new_zeroed(int64_t count, sw_dtype dtype, sw_carrier **out, sw_error *err)
{
    return make_host(&sw_generic_class, count, dtype, 0, NULL, out, err);
}

void *sw_cpu_pointer(sw_carrier *c)
{
    if (!c || c->ops != &sw_cpu_class)
        return NULL;
    pthread_mutex_lock(&c->lock);
    void *p = c->released ? NULL : ((host_impl *)c->impl)->data;
    pthread_mutex_unlock(&c->lock);
    return p;
}

void *sw_generic_pointer(sw_carrier *c)
{
    if (!c || c->ops != &sw_generic_class)
        return NULL;
    pthread_mutex_lock(&c->lock);
    void *p = c->released ? NULL : ((host_impl *)c->impl)->data;
    pthread_mutex_unlock(&c->lock);
    return p;
}
