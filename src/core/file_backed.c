/* FileBacked: raw native-order slots in a file of the session directory
 * (filestore.h). A new carrier has size 0 and grows once, to exactly what
 * a move needs (allocatable-empty); a failed move's growth is undone by
 * truncating back to 0. */
#include <errno.h>
#include "fault_internal.h"
#include <string.h>
#include <unistd.h>

#include "carrier_internal.h"
#include "checks_internal.h"
#include "filestore_internal.h"
#include "strideweave/alloc.h"
#include "strideweave/filestore.h"

typedef struct file_impl {
    int fd;         /* -1 once released */
    char *path;     /* sw_malloc'd, kept after release */
    long creator;   /* sw_filestore_creator_pid() at creation */
    int64_t size;   /* slots */
    size_t width;
} file_impl;

static int64_t file_size(void *impl)
{
    file_impl *f = impl;
    return f->fd >= 0 ? f->size : 0;
}

static sw_status file_read(void *impl, int64_t slot, int64_t count, void *out, sw_error *err)
{
    file_impl *f = impl;
    return sw_filestore_pread(f->fd, out, (size_t)count * f->width, slot * (int64_t)f->width,
                              err);
}

static sw_status file_write(void *impl, int64_t slot, int64_t count, const void *in,
                            sw_error *err)
{
    file_impl *f = impl;
    return sw_filestore_pwrite(f->fd, in, (size_t)count * f->width,
                               slot * (int64_t)f->width, err);
}

/* The file length of `slots` slots, in the Python API's words when no file
 * can be that long. */
static sw_status file_length(const file_impl *f, int64_t slots, int64_t *bytes, sw_error *err)
{
    if (__builtin_mul_overflow(slots, (int64_t)f->width, bytes))
        return sw_error_set(err, SW_EOVERFLOW, "%lld slots exceed the file size limit",
                            (long long)slots);
    return SW_OK;
}

static sw_status file_allocate(void *impl, int64_t slots, sw_error *err)
{
    file_impl *f = impl;
    int64_t bytes;
    sw_status st = file_length(f, slots, &bytes, err);
    if (st != SW_OK)
        return st;
    st = sw_filestore_resize(f->fd, bytes, err);
    if (st == SW_OK)
        f->size = slots;
    return st;
}

static sw_status file_unallocate(void *impl, sw_error *err)
{
    file_impl *f = impl;
    sw_status st = sw_filestore_resize(f->fd, 0, err);
    if (st == SW_OK)
        f->size = 0;
    return st;
}

static sw_status file_storage(void *impl, sw_carrier_storage *out, sw_error *err)
{
    file_impl *f = impl;
    (void)err;
    out->kind = SW_ENDPOINT_FILE;
    out->host = NULL;
    out->fd = f->fd;
    return SW_OK;
}

static void file_release(void *impl)
{
    file_impl *f = impl;
    if (f->fd >= 0) {
        /* The path stays ours, for sw_file_backed_path after release. */
        sw_filestore_remove_named(f->fd, f->path, f->creator, f->size * (int64_t)f->width);
        f->fd = -1;
        f->size = 0;
    }
}

static void file_destroy(void *impl)
{
    file_impl *f = impl;
    sw_free(f->path);
    sw_free(f);
}

const sw_carrier_class sw_file_backed_class = {
    .name = "FileBacked",
    .size = file_size,
    .read = file_read,
    .write = file_write,
    .allocate = file_allocate,
    .unallocate = file_unallocate,
    .storage = file_storage,
    .release = file_release,
    .destroy = file_destroy,
    .flags = SW_CARRIER_CLASS_RELEASE_REMOVES_FILES | SW_CARRIER_CLASS_RUNS_NO_USER_CODE,
};

sw_status sw_file_backed_new(const char *filename, sw_dtype dtype, int flags,
                             sw_carrier **out, sw_error *err)
{
    if (!out)
        return sw_error_set(err, SW_EINVAL, "FileBacked: out must not be NULL");
    if (dtype != SW_DT_FLOAT32 && dtype != SW_DT_INT32)
        return sw_error_set(err, SW_EINVAL,
                            "FileBacked does not support storage dtype %s; use Float32 or "
                            "Int32",
                            sw_dtype_name_or_unknown(dtype));
    sw_status st;
    if (filename && (st = sw_filestore_check_name(filename, strlen(filename), err)) != SW_OK)
        return st;
    file_impl *f = sw_calloc(1, sizeof *f);
    if (!f)
        return sw_error_set(err, SW_ENOMEM, "FileBacked: out of memory");
    f->width = sw_dtype_slot_bytes(dtype);
    st = filename ? sw_filestore_create(filename, &f->fd, &f->path, err)
                  : sw_filestore_create_unique(&f->fd, &f->path, err);
    if (st != SW_OK) {
        sw_free(f);
        return st;
    }
    f->creator = sw_filestore_creator_pid();
    st = sw_carrier_new(&sw_file_backed_class, f, dtype, flags & ~SW_CARRIER_EMPTY, out, err);
    if (st != SW_OK) {
        sw_filestore_remove(f->fd, f->path, f->creator);
        sw_free(f);
    }
    return st;
}

const char *sw_file_backed_path(sw_carrier *c)
{
    if (!c || c->ops != &sw_file_backed_class)
        return NULL;
    pthread_mutex_lock(&c->lock);
    const char *p = ((file_impl *)c->impl)->path;
    pthread_mutex_unlock(&c->lock);
    return p;
}

int sw_file_backed_fd(sw_carrier *c)
{
    if (!c || c->ops != &sw_file_backed_class)
        return -1;
    pthread_mutex_lock(&c->lock);
    int fd = c->released ? -1 : ((file_impl *)c->impl)->fd;
    pthread_mutex_unlock(&c->lock);
    return fd;
}

/* The growth of an empty FileBacked whose whole new span the caller writes
 * from offset 0 at once: that write sets the file's length itself, so only
 * the size is recorded here (carrier.h). Locked. */
sw_status sw_file_backed_grow_for_write_locked(sw_carrier *c, int64_t slots, sw_error *err)
{
    file_impl *f = c->impl;
    int64_t bytes;
    sw_status st = file_length(f, slots, &bytes, err);
    if (st != SW_OK)
        return st;
    /* The resize's fault site stands for this growth too. */
    if (SW_FAULT_HIT("truncate"))
        return sw_error_set_errno(err, SW_EIO, EIO,
                                  "resizing the FileBacked file failed: injected fault");
    f->size = slots;
    return SW_OK;
}

sw_status sw_file_backed_allocate_for_write(sw_carrier *c, int64_t slots, sw_error *err)
{
    if (!c || c->ops != &sw_file_backed_class)
        return sw_error_set(err, SW_ETYPE, "the carrier must be a FileBacked carrier");
    file_impl *f = c->impl;
    pthread_mutex_lock(&c->lock);
    sw_status st = sw_carrier_check_growable_locked(c, "grow", 1, err);
    if (st != SW_OK || slots <= f->size || f->size != 0) {
        pthread_mutex_unlock(&c->lock);
        return st != SW_OK ? st : sw_carrier_allocate(c, slots, err);
    }
    st = sw_file_backed_grow_for_write_locked(c, slots, err);
    pthread_mutex_unlock(&c->lock);
    return st;
}
