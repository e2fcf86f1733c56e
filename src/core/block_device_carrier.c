/* BlockDevice handles and their carriers (block_device.h) over the block
 * I/O primitives of blockdev.c. Lock order: a carrier's mutex, then its
 * device's (d->dev->lock); the move engine's transfer takes only the
 * device's. The device's mutex guards `closed`, `carriers`, the extent
 * map and every carrier's extent fields. */
#include <string.h>

#include "carrier_internal.h"
#include "checks_internal.h"
#include "route_internal.h"
#include "strideweave/alloc.h"
#include "blockdev_internal.h"
#include "strideweave/block_device.h"
#include "tensor_internal.h"

#define SLOT_BYTES 4

struct sw_block_device {
    _Atomic long refs;
    sw_blockdev *dev; /* owned */
    char *path;       /* sw_malloc'd copy */
    int closed;       /* under dev->lock */
    int closing;      /* close when the last carrier goes, under dev->lock */
    long carriers;    /* carrier handles alive, under dev->lock */
};

typedef struct bdc_impl {
    sw_block_device *device; /* one reference, kept after release */
    sw_carrier *self;        /* back pointer, no reference */
    int64_t offset_bytes;    /* extent start; 0 when none */
    int64_t extent_bytes;    /* 0 for size 0 and after release */
    int64_t nslots;
} bdc_impl;

/* ---- the device ----------------------------------------------------------- */

sw_status sw_block_device_open(const char *path, sw_block_device **out, sw_error *err)
{
    if (!out)
        return sw_error_set(err, SW_EINVAL, "BlockDevice: out must not be NULL");
    if (!path)
        return sw_error_set(err, SW_EINVAL, "BlockDevice: path must not be NULL");
    size_t n = strlen(path) + 1;
    sw_block_device *d = sw_calloc(1, sizeof *d);
    char *copy = d ? sw_malloc(n) : NULL;
    if (!copy) {
        sw_free(d);
        return sw_error_set(err, SW_ENOMEM, "BlockDevice: out of memory opening %s", path);
    }
    memcpy(copy, path, n);
    sw_status st = sw_blockdev_open(path, &d->dev, err);
    if (st != SW_OK) {
        sw_free(copy);
        sw_free(d);
        return st;
    }
    atomic_init(&d->refs, 1);
    d->path = copy;
    *out = d;
    return SW_OK;
}

sw_block_device *sw_block_device_ref(sw_block_device *d)
{
    if (d)
        atomic_fetch_add(&d->refs, 1);
    return d;
}

void sw_block_device_unref(sw_block_device *d)
{
    if (!d || atomic_fetch_sub(&d->refs, 1) != 1)
        return;
    /* Last reference: no carrier is left (each holds one). Dropped without
     * close: the buffered writes still reach the device, unreported. */
    if (!d->closed && !sw_blockdev_is_faulted(d->dev)) {
        sw_error err;
        pthread_mutex_lock(&d->dev->lock);
        (void)sw_blockdev_flush_locked(d->dev, &err);
        pthread_mutex_unlock(&d->dev->lock);
    }
    sw_blockdev_free(d->dev);
    sw_free(d->path);
    sw_free(d);
}

int sw_block_device_is_closed(sw_block_device *d)
{
    pthread_mutex_lock(&d->dev->lock);
    int v = d->closed;
    pthread_mutex_unlock(&d->dev->lock);
    return v;
}

int sw_block_device_is_closing(sw_block_device *d)
{
    pthread_mutex_lock(&d->dev->lock);
    int v = d->closing && !d->closed;
    pthread_mutex_unlock(&d->dev->lock);
    return v;
}

int sw_block_device_is_faulted(sw_block_device *d) { return sw_blockdev_is_faulted(d->dev); }
const char *sw_block_device_path(sw_block_device *d) { return d->path; }
int64_t sw_block_device_capacity_bytes(sw_block_device *d) { return d->dev->capacity_bytes; }
int64_t sw_block_device_logical_block_size(sw_block_device *d)
{
    return d->dev->logical_block_size;
}
int64_t sw_block_device_physical_block_size(sw_block_device *d)
{
    return d->dev->physical_block_size;
}
int64_t sw_block_device_allocation_alignment(sw_block_device *d) { return d->dev->alignment; }

static sw_status refuse_faulted(sw_block_device *d, const char *action, sw_error *err)
{
    return sw_error_set(err, SW_ESTATE,
                        "cannot %s: the block device %s is faulted by an earlier I/O error, "
                        "so its data can no longer be trusted",
                        action, d->path);
}

sw_status sw_block_device_flush(sw_block_device *d, sw_error *err)
{
    if (!d)
        return sw_error_set(err, SW_ETYPE, "BlockDevice: device must not be NULL");
    pthread_mutex_lock(&d->dev->lock);
    sw_status st = SW_OK;
    if (d->closed)
        ;
    else if (sw_blockdev_is_faulted(d->dev))
        st = refuse_faulted(d, "flush the block device", err);
    else
        st = sw_blockdev_flush_locked(d->dev, err);
    pthread_mutex_unlock(&d->dev->lock);
    return st;
}

/* Flush and close with dev->lock held and no carrier left. A failing
 * flush faults the device and keeps it open unless `even_on_error` (the
 * next close then skips the flush and closes). */
static sw_status close_locked(sw_block_device *d, int even_on_error, sw_error *err)
{
    sw_status st = SW_OK;
    if (!sw_blockdev_is_faulted(d->dev))
        st = sw_blockdev_flush_locked(d->dev, err);
    if (st == SW_OK || even_on_error) {
        sw_blockdev_close(d->dev);
        d->closed = 1;
        d->closing = 0;
    }
    return st;
}

sw_status sw_block_device_close(sw_block_device *d, sw_error *err)
{
    if (!d)
        return sw_error_set(err, SW_ETYPE, "BlockDevice: device must not be NULL");
    pthread_mutex_lock(&d->dev->lock);
    sw_status st = SW_OK;
    if (d->closed)
        ;
    else if (d->carriers > 0)
        st = sw_error_set(err, SW_ESTATE,
                          "cannot close the block device %s: %ld BlockDeviceCarrier handle(s) "
                          "from it are still alive (drop every reference to them first)",
                          d->path, d->carriers);
    else
        st = close_locked(d, 0, err);
    pthread_mutex_unlock(&d->dev->lock);
    return st;
}

sw_status sw_block_device_close_when_unused(sw_block_device *d, int even_on_error,
                                            sw_error *err)
{
    if (!d)
        return sw_error_set(err, SW_ETYPE, "BlockDevice: device must not be NULL");
    pthread_mutex_lock(&d->dev->lock);
    sw_status st = SW_OK;
    if (d->closed)
        ;
    else if (d->carriers > 0)
        d->closing = 1;
    else
        st = close_locked(d, even_on_error, err);
    pthread_mutex_unlock(&d->dev->lock);
    return st;
}

struct sw_blockdev *sw_block_device_primitive(sw_block_device *d)
{
    return d ? d->dev : NULL;
}

/* ---- carrier ops ------------------------------------------------------------ */

static int64_t bdc_size(void *impl)
{
    return ((bdc_impl *)impl)->nslots;
}

/* In the words a binding uses for its own check of a faulted device
 * (sw_block_device_carrier_unavailable), so that a refusal the core finds
 * first reads the same; sw_block_device_path names the device. */
static const char faulted_words[] = "the block device of this BlockDeviceCarrier is faulted by "
                                    "an earlier I/O error, so its data can no longer be trusted";

static sw_status bdc_unavailable(sw_error *err)
{
    return sw_error_set(err, SW_ESTATE, "%s", faulted_words);
}

/* Slot access refuses a carrier on a faulted device before its other
 * rules (carrier.h: `unavailable`); the flag is atomic. */
static const char *bdc_faulted_words(void *impl)
{
    return sw_blockdev_is_faulted(((bdc_impl *)impl)->device->dev) ? faulted_words : NULL;
}

/* With d->lock held: wait until no move transfer touches a page of the
 * byte range (B-9); the lock is released while waiting. The extent cannot
 * change meanwhile: the caller holds the carrier's mutex, which release
 * takes too. */
static void wait_range_locked(sw_blockdev *d, int64_t start, int64_t length)
{
    while (length > 0 && !sw_blockdev_is_faulted(d) && sw_blockdev_busy_locked(d, start, length))
        sw_blockdev_wait_locked(d);
}

static sw_status bdc_read(void *impl, int64_t slot, int64_t count, void *out, sw_error *err)
{
    bdc_impl *b = impl;
    sw_blockdev *d = b->device->dev;
    int64_t at = b->offset_bytes + slot * SLOT_BYTES, bytes = count * SLOT_BYTES;
    pthread_mutex_lock(&d->lock);
    wait_range_locked(d, at, bytes);
    sw_status st = sw_blockdev_is_faulted(d)
                       ? bdc_unavailable(err)
                       : sw_blockdev_read_locked(d, out, (size_t)bytes, at, err);
    pthread_mutex_unlock(&d->lock);
    return st;
}

/* Called only by sw_carrier_write (with the carrier's mutex held): block
 * carriers move only by their own bulk routes, never slot by slot. A write
 * that fails once its I/O started still counts on the version (the write
 * began; the core adds the +1 of a successful one). */
static sw_status bdc_write(void *impl, int64_t slot, int64_t count, const void *in,
                           sw_error *err)
{
    bdc_impl *b = impl;
    sw_blockdev *d = b->device->dev;
    int64_t at = b->offset_bytes + slot * SLOT_BYTES, bytes = count * SLOT_BYTES;
    pthread_mutex_lock(&d->lock);
    wait_range_locked(d, at, bytes);
    sw_status st;
    if (sw_blockdev_is_faulted(d)) {
        st = bdc_unavailable(err);
    } else {
        st = sw_blockdev_write_locked(d, in, (size_t)bytes, at, err);
        /* A move's own transfer writes count on no version (carrier.h). */
        sw_carrier *c = b->self;
        if (st != SW_OK &&
            !(c->transfer_depth > 0 && pthread_equal(c->transfer_thread, pthread_self())))
            c->version++;
    }
    pthread_mutex_unlock(&d->lock);
    return st;
}

/* Retire the extent once, after any transfer running on its pages (B-7). */
static void bdc_release(void *impl)
{
    bdc_impl *b = impl;
    sw_blockdev *d = b->device->dev;
    pthread_mutex_lock(&d->lock);
    while (b->extent_bytes > 0 && sw_blockdev_busy_locked(d, b->offset_bytes, b->extent_bytes))
        sw_blockdev_wait_locked(d);
    if (b->extent_bytes > 0)
        sw_blockdev_free_locked(d, b->offset_bytes);
    b->offset_bytes = b->extent_bytes = b->nslots = 0;
    pthread_mutex_unlock(&d->lock);
}

static void bdc_destroy(void *impl)
{
    bdc_impl *b = impl;
    sw_block_device *dev = b->device;
    pthread_mutex_lock(&dev->dev->lock);
    /* The last carrier of a closing device closes it; nobody is there to
     * hear about a failing flush, which leaves the device faulted. */
    if (--dev->carriers == 0 && dev->closing && !dev->closed) {
        sw_error ignored;
        (void)close_locked(dev, 1, &ignored);
    }
    pthread_mutex_unlock(&dev->dev->lock);
    sw_block_device_unref(dev);
    sw_free(b);
}

const sw_carrier_class sw_block_device_carrier_class = {
    .name = "BlockDeviceCarrier",
    .size = bdc_size,
    .read = bdc_read,
    .write = bdc_write,
    .release = bdc_release,
    .destroy = bdc_destroy,
    .flags = SW_CARRIER_CLASS_RUNS_NO_USER_CODE,
    .unavailable = bdc_faulted_words,
};

/* ---- allocation ----------------------------------------------------------- */

/* Reserve the extent and fill it: zeros, `values`, or nothing. A failed
 * write frees the extent again (and has faulted the device). */
static sw_status fill_locked(sw_blockdev *dev, int64_t bytes, int zero, const float *values,
                             int64_t *start, int64_t *length, sw_error *err)
{
    sw_status st = sw_blockdev_alloc_locked(dev, bytes, zero && !values, start, length, err);
    if (st == SW_OK && values && bytes > 0) {
        st = sw_blockdev_write_locked(dev, values, (size_t)bytes, *start, err);
        if (st != SW_OK)
            sw_blockdev_free_locked(dev, *start);
    }
    return st;
}

static sw_status allocate(sw_block_device *d, int64_t size, sw_dtype dtype, int flags,
                          const float *values, sw_carrier **out, sw_error *err)
{
    if (!d)
        return sw_error_set(err, SW_ETYPE, "BlockDevice: device must not be NULL");
    sw_status checked = sw_check_out_and_size("BlockDevice", out, size, err);
    if (checked != SW_OK)
        return checked;
    int64_t bytes, rounded;
    if (__builtin_mul_overflow(size, (int64_t)SLOT_BYTES, &bytes) ||
        !sw_extent_round_up(bytes, d->dev->alignment, &rounded))
        return sw_error_set(err, SW_EOVERFLOW,
                            "BlockDevice: %lld slots do not fit in a block device's byte range",
                            (long long)size);
    if (dtype != SW_DT_FLOAT32)
        return sw_error_set(err, SW_EINVAL,
                            "BlockDeviceCarrier does not support storage dtype %s; use Float32",
                            sw_dtype_name_or_unknown(dtype));
    bdc_impl *b = sw_calloc(1, sizeof *b);
    if (!b)
        return sw_error_set(err, SW_ENOMEM, "BlockDevice: out of memory");
    sw_blockdev *dev = d->dev;
    sw_status st;
    int64_t start = 0, length = 0;
    pthread_mutex_lock(&dev->lock);
    if (d->closed)
        st = sw_error_set(err, SW_ESTATE, "cannot allocate on the block device %s: it is closed",
                          d->path);
    else if (d->closing)
        st = sw_error_set(err, SW_ESTATE,
                          "cannot allocate on the block device %s: it is closing (it closes "
                          "when its last BlockDeviceCarrier goes)",
                          d->path);
    else if (sw_blockdev_is_faulted(dev))
        st = refuse_faulted(d, "allocate on the block device", err);
    else
        st = fill_locked(dev, bytes, !(flags & SW_CARRIER_EMPTY), values, &start, &length, err);
    if (st == SW_OK) {
        b->device = sw_block_device_ref(d);
        b->offset_bytes = start;
        b->extent_bytes = length;
        b->nslots = size;
        st = sw_carrier_new(&sw_block_device_carrier_class, b, SW_DT_FLOAT32,
                            flags & SW_CARRIER_IMMUTABLE, out, err);
        if (st == SW_OK) {
            b->self = *out;
            d->carriers++;
        } else {
            if (length > 0)
                sw_blockdev_free_locked(dev, start);
            atomic_fetch_sub(&d->refs, 1); /* the caller still holds one */
        }
    }
    pthread_mutex_unlock(&dev->lock);
    if (st != SW_OK)
        sw_free(b);
    return st;
}

sw_status sw_block_device_allocate(sw_block_device *d, int64_t size, sw_dtype dtype, int flags,
                                   sw_carrier **out, sw_error *err)
{
    return allocate(d, size, dtype, flags & (SW_CARRIER_IMMUTABLE | SW_CARRIER_EMPTY), NULL, out,
                    err);
}

sw_status sw_block_device_allocate_values(sw_block_device *d, const float *values,
                                          int64_t count, int flags, sw_carrier **out,
                                          sw_error *err)
{
    if (d && count > 0 && !values)
        return sw_error_set(err, SW_EINVAL, "BlockDevice: values must not be NULL");
    return allocate(d, count, SW_DT_FLOAT32, flags & SW_CARRIER_IMMUTABLE, values, out, err);
}

/* ---- introspection of carriers -------------------------------------------- */

static bdc_impl *bdc_of(sw_carrier *c)
{
    return c && c->ops == &sw_block_device_carrier_class ? c->impl : NULL;
}

sw_block_device *sw_block_device_of(sw_carrier *c)
{
    bdc_impl *b = bdc_of(c);
    return b ? b->device : NULL;
}

static int64_t extent_field(sw_carrier *c, int length)
{
    bdc_impl *b = bdc_of(c);
    if (!b)
        return 0;
    pthread_mutex_lock(&b->device->dev->lock);
    int64_t v = length ? b->extent_bytes : b->offset_bytes;
    pthread_mutex_unlock(&b->device->dev->lock);
    return v;
}

int64_t sw_block_device_carrier_offset_bytes(sw_carrier *c) { return extent_field(c, 0); }

int sw_block_device_carrier_endpoint(sw_carrier *c, sw_endpoint *out)
{
    bdc_impl *b = bdc_of(c);
    if (!b)
        return 0;
    out->kind = SW_ENDPOINT_FILE;
    out->host = NULL;
    out->fd = b->device->dev->fd;
    out->offset = extent_field(c, 0) / SLOT_BYTES; /* aligned, so exact */
    return 1;
}
int64_t sw_block_device_carrier_extent_bytes(sw_carrier *c) { return extent_field(c, 1); }

/* ---- the move engine's hooks ------------------------------------------------ */

/* B-6 for a move, in the words the Python API raises for it. */
static sw_status refuse_faulted_move(bdc_impl *b, sw_error *err)
{
    if (b && sw_blockdev_is_faulted(b->device->dev))
        return refuse_faulted(b->device, "move a BlockDeviceCarrier", err);
    return SW_OK;
}

sw_status sw_block_device_check_faulted_locked(sw_carrier *src, sw_carrier *dst, sw_error *err)
{
    return refuse_faulted_move(bdc_of(src) ? bdc_of(src) : bdc_of(dst), err);
}

const char *sw_block_device_carrier_unavailable(sw_carrier *c)
{
    bdc_impl *b = bdc_of(c);
    return b && sw_blockdev_is_faulted(b->device->dev) ? faulted_words : NULL;
}

sw_status sw_block_device_carrier_check_movable(sw_carrier *c, sw_error *err)
{
    return refuse_faulted_move(bdc_of(c), err);
}

/* CPU -> device or device -> CPU: the physical span through the device's
 * descriptor; sw_blockdev_transfer makes a write into the device durable
 * before it returns, and faults the device when the transfer fails. */
sw_status sw_block_device_route_transfer(sw_carrier *src, int64_t src_offset, sw_carrier *dst,
                                         const sw_layout *layout, int64_t *progress,
                                         sw_error *err)
{
    bdc_impl *sb = bdc_of(src), *db = bdc_of(dst);
    bdc_impl *b = sb ? sb : db;
    sw_carrier *host = sb ? dst : src;
    sw_carrier_storage hs;
    sw_status st = host->ops->storage(host->impl, &hs, err);
    if (st != SW_OK)
        return st;
    sw_endpoint on_device = {.kind = SW_ENDPOINT_FILE, .host = NULL, .fd = b->device->dev->fd,
                             .offset = b->offset_bytes / SLOT_BYTES};
    sw_endpoint in_memory = {.kind = SW_ENDPOINT_HOST, .host = hs.host, .fd = -1, .offset = 0};
    sw_transfer t = {
        .src = sb ? on_device : in_memory,
        .dst = sb ? in_memory : on_device,
        .itemsize = SLOT_BYTES,
        .bulk = 1,
        .cosize = layout->cosize,
        .ndim = 0, /* a span copy needs no modes (and any depth works) */
        .progress = progress,
    };
    t.src.offset += src_offset;
    return sw_blockdev_transfer(b->device->dev, &t, err);
}

int sw_block_device_route_may_pause(void) { return sw_blockdev_transfer_may_pause(); }
