#include "strideweave/blockdev.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef __linux__
#include <linux/fs.h>
#include <sys/ioctl.h>
#endif

#include "strideweave/alloc.h"

/* Zero-writes go through a buffer of at most this size. */
#define ZERO_CHUNK_BYTES ((int64_t)8 << 20)

/* ---- extent allocator ------------------------------------------------------ */

int sw_extent_round_up(int64_t bytes, int64_t alignment, int64_t *out)
{
    int64_t padded;
    if (bytes < 0 || alignment <= 0 ||
        __builtin_add_overflow(bytes, alignment - 1, &padded))
        return 0;
    *out = padded - padded % alignment;
    return 1;
}

void sw_extent_map_init(sw_extent_map *m, int64_t capacity, int64_t alignment)
{
    m->capacity = capacity;
    m->alignment = alignment;
    m->items = NULL;
    m->count = m->cap = 0;
}

void sw_extent_map_destroy(sw_extent_map *m)
{
    sw_free(m->items);
    m->items = NULL;
    m->count = m->cap = 0;
}

static int reserve_slot(sw_extent_map *m)
{
    if (m->count < m->cap)
        return 1;
    size_t cap = m->cap ? m->cap * 2 : 16;
    sw_extent *items = sw_malloc(cap * sizeof *items);
    if (!items)
        return 0;
    if (m->count)
        memcpy(items, m->items, m->count * sizeof *items);
    sw_free(m->items);
    m->items = items;
    m->cap = cap;
    return 1;
}

sw_status sw_extent_map_alloc(sw_extent_map *m, int64_t bytes, int64_t *start,
                              int64_t *length, sw_error *err)
{
    int64_t len;
    if (!sw_extent_round_up(bytes, m->alignment, &len))
        return sw_error_set(err, SW_EOVERFLOW,
                            "%lld bytes rounded up to the device alignment overflow",
                            (long long)bytes);
    *start = 0;
    *length = len;
    if (len == 0)
        return SW_OK;
    /* First fit: the gap before item i starts where item i-1 ends. Every
     * start and length is aligned, so every gap start is too. */
    int64_t gap_start = 0;
    size_t i = 0;
    for (; i <= m->count; i++) {
        int64_t gap_end = i < m->count ? m->items[i].start : m->capacity;
        if (gap_end - gap_start >= len)
            break;
        if (i < m->count)
            gap_start = m->items[i].start + m->items[i].length;
    }
    if (i > m->count)
        return sw_error_set(err, SW_ENOMEM,
                            "no free range of %lld bytes is left on the block device",
                            (long long)len);
    if (!reserve_slot(m))
        return sw_error_set(err, SW_ENOMEM, "cannot grow the extent table");
    memmove(m->items + i + 1, m->items + i, (m->count - i) * sizeof *m->items);
    m->items[i].start = gap_start;
    m->items[i].length = len;
    m->count++;
    *start = gap_start;
    return SW_OK;
}

sw_status sw_extent_map_free(sw_extent_map *m, int64_t start, sw_error *err)
{
    for (size_t i = 0; i < m->count; i++) {
        if (m->items[i].start != start)
            continue;
        memmove(m->items + i, m->items + i + 1, (m->count - i - 1) * sizeof *m->items);
        m->count--;
        return SW_OK;
    }
    return sw_error_set(err, SW_EINVAL, "no extent starts at byte %lld", (long long)start);
}

/* ---- positional I/O ----------------------------------------------------------- */

/* One system call, through the fault-injection switches that let tests
 * reach EINTR, short and zero-byte completions on demand. */
static ssize_t io_once(int writing, int fd, void *p, size_t n, int64_t offset)
{
    if (sw_fault_hit("blockdev_eintr")) {
        errno = EINTR;
        return -1;
    }
    if (sw_fault_hit("blockdev_zero"))
        return 0;
    if (n > 1 && sw_fault_hit("blockdev_short"))
        n /= 2;
    return writing ? pwrite(fd, p, n, (off_t)offset) : pread(fd, p, n, (off_t)offset);
}

static sw_status io_loop(int writing, int fd, char *p, size_t bytes, int64_t offset,
                         sw_error *err)
{
    const char *what = writing ? "pwrite" : "pread";
    if (sw_fault_hit(what))
        return sw_error_set_errno(err, SW_EIO, EIO, "%s on the block device failed: "
                                  "injected fault", what);
    while (bytes > 0) {
        ssize_t r = io_once(writing, fd, p, bytes, offset);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            return sw_error_set_errno(err, SW_EIO, e, "%s on the block device failed: %s",
                                      what, strerror(e));
        }
        if (r == 0)
            return sw_error_set(err, SW_ESTATE,
                                "%s on the block device transferred nothing at byte %lld "
                                "(past the end of the device?)", what, (long long)offset);
        p += r;
        bytes -= (size_t)r;
        offset += r;
    }
    return SW_OK;
}

sw_status sw_blockdev_pread(int fd, void *buf, size_t bytes, int64_t offset, sw_error *err)
{
    return io_loop(0, fd, buf, bytes, offset, err);
}

sw_status sw_blockdev_pwrite(int fd, const void *buf, size_t bytes, int64_t offset,
                             sw_error *err)
{
    return io_loop(1, fd, (char *)buf, bytes, offset, err);
}

/* ---- devices ------------------------------------------------------------------ */

#ifdef __linux__
/* The three ioctls; SW_EIO with errno when the kernel refuses one. */
static sw_status read_geometry(int fd, uint64_t *capacity, int *logical,
                               unsigned int *physical, sw_error *err)
{
    if (ioctl(fd, BLKGETSIZE64, capacity) != 0 || ioctl(fd, BLKSSZGET, logical) != 0 ||
        ioctl(fd, BLKPBSZGET, physical) != 0) {
        int e = errno;
        return sw_error_set_errno(err, SW_EIO, e, "cannot read the block device's geometry: %s",
                                  strerror(e));
    }
    return SW_OK;
}

static sw_status check_geometry(uint64_t capacity, int logical, unsigned int physical,
                                sw_error *err)
{
    if (capacity > (uint64_t)INT64_MAX)
        return sw_error_set(err, SW_EOVERFLOW,
                            "the block device's capacity (%llu bytes) is too large",
                            (unsigned long long)capacity);
    if (capacity == 0 || logical <= 0 || physical == 0)
        return sw_error_set(err, SW_EINVAL,
                            "the block device reports a zero size (capacity %llu, logical "
                            "block %d, physical block %u)", (unsigned long long)capacity,
                            logical, physical);
    if (capacity % (uint64_t)logical || physical % (unsigned int)logical)
        return sw_error_set(err, SW_EINVAL,
                            "the block device's capacity (%llu) and physical block size "
                            "(%u) must be multiples of its logical block size (%d)",
                            (unsigned long long)capacity, physical, logical);
    return SW_OK;
}

/* What open_node refuses: an errno for OSError, else SW_EINVAL. */
static sw_status refuse_node(const char *path, const struct stat *sb, sw_error *err)
{
    if (S_ISDIR(sb->st_mode))
        return sw_error_set(err, SW_EINVAL, "%s is a directory, not a block device", path);
    /* B-2 checks that the node opens read-write before its type: ask
     * without opening it, since opening some nodes (a FIFO, a tty, some
     * character devices) has effects of its own. */
    if (faccessat(AT_FDCWD, path, R_OK | W_OK, AT_EACCESS) != 0) {
        int e = errno;
        return sw_error_set_errno(err, SW_EIO, e, "cannot open %s read-write: %s", path,
                                  strerror(e));
    }
    return sw_error_set(err, SW_EINVAL, "%s is not a block device (%s)", path,
                        S_ISCHR(sb->st_mode)    ? "a character device"
                        : S_ISREG(sb->st_mode)  ? "a regular file"
                        : S_ISFIFO(sb->st_mode) ? "a FIFO"
                                                : "not block-special");
}

/* stat first and open only a block-special node: O_NONBLOCK and O_NOCTTY
 * so that a node swapped in between cannot block or become the
 * controlling terminal, then the opened node is checked to be the one
 * stat saw and O_NONBLOCK is cleared. */
static sw_status open_node(const char *path, int *fd, sw_error *err)
{
    struct stat before, sb;
    *fd = -1;
    if (stat(path, &before) != 0) {
        int e = errno;
        return sw_error_set_errno(err, SW_EIO, e, "cannot open %s read-write: %s", path,
                                  strerror(e));
    }
    if (!S_ISBLK(before.st_mode))
        return refuse_node(path, &before, err);
    *fd = open(path, O_RDWR | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (*fd < 0) {
        int e = errno;
        return sw_error_set_errno(err, SW_EIO, e, "cannot open %s read-write: %s", path,
                                  strerror(e));
    }
    sw_status st = SW_OK;
    int flags;
    if (fstat(*fd, &sb) != 0) {
        int e = errno;
        st = sw_error_set_errno(err, SW_EIO, e, "cannot stat %s: %s", path, strerror(e));
    } else if (!S_ISBLK(sb.st_mode) || sb.st_rdev != before.st_rdev) {
        st = sw_error_set(err, SW_EINVAL, "%s is not a block device (it changed while "
                          "being opened)", path);
    } else if ((flags = fcntl(*fd, F_GETFL)) < 0 ||
               fcntl(*fd, F_SETFL, flags & ~O_NONBLOCK) < 0) {
        int e = errno;
        st = sw_error_set_errno(err, SW_EIO, e, "cannot set up %s: %s", path, strerror(e));
    }
    if (st != SW_OK) {
        close(*fd);
        *fd = -1;
    }
    return st;
}

sw_status sw_blockdev_open(const char *path, sw_blockdev **out, sw_error *err)
{
    int fd;
    sw_status st = open_node(path, &fd, err);
    if (st != SW_OK)
        return st;
    uint64_t capacity = 0;
    int logical = 0;
    unsigned int physical = 0;
    st = read_geometry(fd, &capacity, &logical, &physical, err);
    if (st == SW_OK)
        st = check_geometry(capacity, logical, physical, err);
    sw_blockdev *d = st == SW_OK ? sw_calloc(1, sizeof *d) : NULL;
    if (st == SW_OK && !d)
        st = sw_error_set(err, SW_ENOMEM, "out of memory opening %s", path);
    if (st != SW_OK) {
        close(fd);
        return st;
    }
    d->fd = fd;
    d->capacity_bytes = (int64_t)capacity;
    d->logical_block_size = logical;
    d->physical_block_size = (int64_t)physical;
    d->alignment = (int64_t)physical > logical ? (int64_t)physical : logical;
    atomic_init(&d->faulted, 0);
    pthread_mutex_init(&d->lock, NULL);
    sw_extent_map_init(&d->extents, d->capacity_bytes, d->alignment);
    *out = d;
    return SW_OK;
}
#else
sw_status sw_blockdev_open(const char *path, sw_blockdev **out, sw_error *err)
{
    (void)path;
    (void)out;
    return sw_error_set(err, SW_ENOTSUP, "block devices are supported on Linux only");
}
#endif

void sw_blockdev_close(sw_blockdev *d)
{
    if (d->fd >= 0)
        close(d->fd);
    d->fd = -1;
}

void sw_blockdev_free(sw_blockdev *d)
{
    if (!d)
        return;
    sw_blockdev_close(d);
    sw_extent_map_destroy(&d->extents);
    pthread_mutex_destroy(&d->lock);
    sw_free(d);
}

static sw_status zero_range(sw_blockdev *d, int64_t start, int64_t length, sw_error *err)
{
    int64_t chunk = length < ZERO_CHUNK_BYTES ? length : ZERO_CHUNK_BYTES;
    void *zeros = sw_calloc(1, (size_t)chunk);
    if (!zeros)
        return sw_error_set(err, SW_ENOMEM, "out of memory for the zero-write buffer");
    sw_status st = SW_OK;
    for (int64_t done = 0; done < length && st == SW_OK; done += chunk) {
        int64_t n = length - done < chunk ? length - done : chunk;
        st = sw_blockdev_write_locked(d, zeros, (size_t)n, start + done, err);
    }
    sw_free(zeros);
    return st;
}

sw_status sw_blockdev_alloc_locked(sw_blockdev *d, int64_t bytes, int zero, int64_t *start,
                                   int64_t *length, sw_error *err)
{
    sw_status st = sw_extent_map_alloc(&d->extents, bytes, start, length, err);
    if (st != SW_OK || !zero || *length == 0)
        return st;
    st = zero_range(d, *start, *length, err);
    if (st != SW_OK)
        sw_extent_map_free(&d->extents, *start, NULL);
    return st;
}

void sw_blockdev_free_locked(sw_blockdev *d, int64_t start)
{
    sw_extent_map_free(&d->extents, start, NULL);
}

sw_status sw_blockdev_read_locked(sw_blockdev *d, void *buf, size_t bytes, int64_t offset,
                                  sw_error *err)
{
    sw_status st = sw_blockdev_pread(d->fd, buf, bytes, offset, err);
    if (st != SW_OK)
        sw_blockdev_set_faulted(d);
    return st;
}

sw_status sw_blockdev_write_locked(sw_blockdev *d, const void *buf, size_t bytes,
                                   int64_t offset, sw_error *err)
{
    sw_status st = sw_blockdev_pwrite(d->fd, buf, bytes, offset, err);
    if (st != SW_OK)
        sw_blockdev_set_faulted(d);
    return st;
}

/* B-11: everything written through the descriptor so far reaches the
 * device, or the device faults with the write-back error's errno. */
sw_status sw_blockdev_flush_locked(sw_blockdev *d, sw_error *err)
{
    if (d->fd < 0)
        return SW_OK;
    int rc, e = 0;
    if (sw_fault_hit("blockdev_fdatasync")) {
        rc = -1;
        e = EIO;
    } else {
        do {
            rc = fdatasync(d->fd);
            e = rc ? errno : 0;
        } while (rc != 0 && e == EINTR);
    }
    if (rc == 0)
        return SW_OK;
    sw_blockdev_set_faulted(d);
    return sw_error_set_errno(err, SW_EIO, e,
                              "the data written to the block device did not reach it "
                              "(fdatasync failed: %s); the device is now faulted",
                              strerror(e));
}

sw_status sw_blockdev_transfer(sw_blockdev *d, const sw_transfer *t, sw_error *err)
{
    pthread_mutex_lock(&d->lock);
    sw_status st;
    if (sw_blockdev_is_faulted(d) || d->fd < 0) {
        st = sw_error_set(err, SW_ESTATE, "the block device is faulted by an earlier I/O "
                          "error or closed; its data can no longer be moved");
    } else {
        st = sw_transfer_run(t, err);
        /* B-11: a transfer into the device commits only once it is durable. */
        if (st == SW_OK && t->dst.kind == SW_ENDPOINT_FILE && t->dst.fd == d->fd)
            st = sw_blockdev_flush_locked(d, err);
        /* Only the device's own failures poison it, not a staging buffer
         * that could not be allocated. */
        if (st == SW_EIO || st == SW_ESTATE)
            sw_blockdev_set_faulted(d);
    }
    pthread_mutex_unlock(&d->lock);
    return st;
}
