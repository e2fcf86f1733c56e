#include "blockdev_internal.h"
#include "fault_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef __linux__
#include <linux/fs.h>
#include <sys/ioctl.h>
#endif

#include "executor_internal.h"
#include "fork_internal.h"
#include "strideweave/alloc.h"

SW_FORK_LINKED;

static void list_open(sw_blockdev *d);

/* Zero-writes go through a buffer of at most this size. */
#define ZERO_CHUNK_BYTES ((int64_t)8 << 20)
/* Direct writes: requests of this size, from buffers aligned to this; only
 * transfers of at least DIRECT_MIN_BYTES take the direct path. */
#define DIRECT_CHUNK_BYTES ((size_t)8 << 20)
#define DIRECT_ALIGN ((size_t)4096)
/* Reads and writes alike: also where host blocks start page-aligned
 * (alloc.c). Reads once started at 4 MiB, where one read at a time into
 * touched memory measured faster buffered; but on a loop device filled by
 * durable moves (direct writes, an fdatasync each), 256 buffered 1 MiB
 * reads in flight ran at 0.1-0.3 GB/s, their device requests 15-50 ms
 * each, also from a plain os.preadv loop; the same reads direct took under
 * 1 ms a request, 1-2 GB/s (bench/sweep.py blk->cpu, issue 19). */
#define DIRECT_MIN_BYTES ((size_t)1 << 20)

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
    m->count = m->cap = m->used = 0;
}

void sw_extent_map_destroy(sw_extent_map *m)
{
    sw_free(m->items);
    m->items = NULL;
    m->count = m->cap = m->used = 0;
}

static int reserve_slot(sw_extent_map *m)
{
    if (m->used < m->cap)
        return 1;
    size_t cap = m->cap ? m->cap * 2 : 16;
    sw_extent *items = sw_malloc(cap * sizeof *items);
    if (!items)
        return 0;
    if (m->used)
        memcpy(items, m->items, m->used * sizeof *items);
    sw_free(m->items);
    m->items = items;
    m->cap = cap;
    return 1;
}

/* Drop the freed slots (length 0) once they outnumber the live ones: each
 * slot is moved once per compaction, so a free costs O(1) amortised. */
static void compact_if_sparse(sw_extent_map *m)
{
    size_t freed = m->used - m->count;
    if (freed <= m->count || freed < 16)
        return;
    size_t j = 0;
    for (size_t i = 0; i < m->used; i++)
        if (m->items[i].length)
            m->items[j++] = m->items[i];
    m->used = j;
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
    /* First fit: the gap before live item i starts where the live item
     * before it ends; freed slots inside a gap are part of it. `after` is
     * the slot just past that previous live item. Every start and length
     * is aligned, so every gap start is too. */
    int64_t gap_start = 0;
    size_t i = 0, after = 0;
    for (; i <= m->used; i++) {
        if (i < m->used && m->items[i].length == 0)
            continue;
        int64_t gap_end = i < m->used ? m->items[i].start : m->capacity;
        if (gap_end - gap_start >= len)
            break;
        if (i < m->used) {
            gap_start = m->items[i].start + m->items[i].length;
            after = i + 1;
        }
    }
    if (i > m->used)
        return sw_error_set(err, SW_ENOMEM,
                            "no free range of %lld bytes is left on the block device",
                            (long long)len);
    /* A freed slot between the previous live item and item i takes the
     * extent in place where the order allows: the first one whose start is
     * at or past gap_start (a freed slot keeps its old start, which a live
     * extent made later may cover), else the last one (every start before
     * it is below gap_start, item i's above). Starts stay strictly rising. */
    size_t at = after;
    while (at < i && m->items[at].start < gap_start)
        at++;
    if (at == i && i > after)
        at = i - 1;
    if (at == i) {
        if (!reserve_slot(m))
            return sw_error_set(err, SW_ENOMEM, "cannot grow the extent table");
        memmove(m->items + i + 1, m->items + i, (m->used - i) * sizeof *m->items);
        m->used++;
    }
    m->items[at].start = gap_start;
    m->items[at].length = len;
    m->count++;
    *start = gap_start;
    return SW_OK;
}

sw_status sw_extent_map_free(sw_extent_map *m, int64_t start, sw_error *err)
{
    /* The slots are sorted by start, freed ones too: a binary search finds
     * it (a device with many carriers frees one per moved-out carrier). */
    size_t lo = 0, hi = m->used;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->items[mid].start < start)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == m->used || m->items[lo].start != start || m->items[lo].length == 0)
        return sw_error_set(err, SW_EINVAL, "no extent starts at byte %lld",
                            (long long)start);
    m->items[lo].length = 0;
    m->count--;
    while (m->used && m->items[m->used - 1].length == 0)
        m->used--;
    compact_if_sparse(m);
    return SW_OK;
}

/* ---- positional I/O ----------------------------------------------------------- */

/* One system call, through the fault-injection switches that let tests
 * reach EINTR, short and zero-byte completions on demand. */
static ssize_t io_once(int writing, int fd, void *p, size_t n, int64_t offset)
{
    if (SW_FAULT_HIT("blockdev_eintr")) {
        errno = EINTR;
        return -1;
    }
    if (SW_FAULT_HIT("blockdev_zero"))
        return 0;
    if (n > 1 && SW_FAULT_HIT("blockdev_short"))
        n /= 2;
    return writing ? pwrite(fd, p, n, (off_t)offset) : pread(fd, p, n, (off_t)offset);
}

static sw_status io_loop(int writing, int fd, char *p, size_t bytes, int64_t offset,
                         sw_error *err)
{
    const char *what = writing ? "pwrite" : "pread";
    if (SW_FAULT_HIT(what))
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
    /* The same node again for direct I/O; the first one stays for slot
     * I/O and small transfers. Refused (some kernels, file systems) →
     * buffered. */
    d->dfd = open(path, O_RDWR | O_CLOEXEC | O_NOCTTY | O_DIRECT);
    if (d->dfd >= 0) {
        struct stat a, b;
        if (fstat(fd, &a) != 0 || fstat(d->dfd, &b) != 0 || !S_ISBLK(b.st_mode) ||
            a.st_rdev != b.st_rdev) {
            close(d->dfd);
            d->dfd = -1;
        }
    }
    d->capacity_bytes = (int64_t)capacity;
    d->logical_block_size = logical;
    d->physical_block_size = (int64_t)physical;
    d->alignment = (int64_t)physical > logical ? (int64_t)physical : logical;
    atomic_init(&d->faulted, 0);
    atomic_init(&d->transferring, 0);
    atomic_init(&d->direct_refused, 0);
    atomic_init(&d->flushes, 0);
    pthread_mutex_init(&d->lock, NULL);
    pthread_cond_init(&d->idle, NULL);
    pthread_mutex_init(&d->flush_lock, NULL);
    pthread_cond_init(&d->flush_cv, NULL);
    d->busy = NULL;
    d->flush_tickets = d->flush_covered = 0;
    d->flushing = 0;
    d->flush_errno = 0;
    list_open(d);
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

/* ---- fork safety ------------------------------------------------------- */

/* Every open device, so that a forked child can reach their locks. */
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static sw_blockdev *open_head;

void sw_blockdev_fork_prepare(void)
{
    pthread_mutex_lock(&open_lock);
}

void sw_blockdev_fork_parent(void)
{
    pthread_mutex_unlock(&open_lock);
}

/* The child has only the forking thread. A device lock some other thread
 * held (a pool thread mid-transfer, or one mid-fdatasync) would never be
 * unlocked here: make the locks fresh, forget the transfers and the
 * fdatasync in flight (their threads are gone), and note a transfer that
 * was cut off. The forking thread never holds a device lock across
 * fork(). */
void sw_blockdev_fork_child(void)
{
    for (sw_blockdev *d = open_head; d; d = d->open_next) {
        pthread_mutex_init(&d->lock, NULL);
        pthread_cond_init(&d->idle, NULL);
        pthread_mutex_init(&d->flush_lock, NULL);
        pthread_cond_init(&d->flush_cv, NULL);
        d->busy = NULL;
        d->flushing = 0;
        atomic_store(&d->transferring, 0); /* those transfers did not survive */
    }
    pthread_mutex_unlock(&open_lock); /* this thread took it before the fork */
}

static void list_open(sw_blockdev *d)
{
    pthread_mutex_lock(&open_lock);
    SW_FAULT_PAUSE("blockdev_open_pause"); /* tests: fork with the lock held */
    d->open_prev = NULL;
    d->open_next = open_head;
    if (open_head)
        open_head->open_prev = d;
    open_head = d;
    pthread_mutex_unlock(&open_lock);
}

static void unlist_open(sw_blockdev *d)
{
    pthread_mutex_lock(&open_lock);
    if (d->open_prev)
        d->open_prev->open_next = d->open_next;
    else if (open_head == d)
        open_head = d->open_next;
    if (d->open_next)
        d->open_next->open_prev = d->open_prev;
    d->open_prev = d->open_next = NULL;
    pthread_mutex_unlock(&open_lock);
}

void sw_blockdev_close(sw_blockdev *d)
{
    if (d->fd >= 0)
        close(d->fd);
    d->fd = -1;
    if (d->dfd >= 0)
        close(d->dfd);
    d->dfd = -1;
}

void sw_blockdev_free(sw_blockdev *d)
{
    if (!d)
        return;
    sw_blockdev_close(d);
    unlist_open(d);
    sw_extent_map_destroy(&d->extents);
    pthread_cond_destroy(&d->flush_cv);
    pthread_mutex_destroy(&d->flush_lock);
    pthread_cond_destroy(&d->idle);
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

/* Ranges conflict when they share a page, not only a byte: the kernel
 * caches a block device by page, and a direct write into a page that a
 * buffered transfer of a neighbouring extent holds dirty cannot drop it
 * from the cache — it then records a write-back error (EIO) on the device
 * that the next fdatasync of every writer reports. */
static int64_t page_bytes(void)
{
    /* Asked once: a transfer checks its range on every move. */
    static _Atomic int64_t cached;
    int64_t page = atomic_load_explicit(&cached, memory_order_relaxed);
    if (page == 0) {
        long got = sysconf(_SC_PAGESIZE);
        page = got > 0 ? (int64_t)got : 4096;
        atomic_store_explicit(&cached, page, memory_order_relaxed);
    }
    return page;
}

static int64_t page_down(int64_t x)
{
    return x - x % page_bytes();
}

static int64_t page_up(int64_t x)
{
    int64_t rest = x % page_bytes();
    if (rest == 0)
        return x;
    return x > INT64_MAX - (page_bytes() - rest) ? INT64_MAX : x + (page_bytes() - rest);
}

int sw_blockdev_busy_locked(sw_blockdev *d, int64_t start, int64_t length)
{
    if (!d->busy) /* the common case: nothing else in flight */
        return 0;
    int64_t end;
    if (length <= 0 || __builtin_add_overflow(start, length, &end))
        end = INT64_MAX;
    start = page_down(start);
    end = page_up(end);
    for (const sw_blockdev_io *io = d->busy; io; io = io->next)
        if (page_down(io->start) < end && start < page_up(io->end))
            return 1;
    return 0;
}

void sw_blockdev_wait_locked(sw_blockdev *d)
{
    pthread_cond_wait(&d->idle, &d->lock);
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

/* One fdatasync of the device (EINTR retried): 0, or the errno. */
static int fdatasync_once(sw_blockdev *d)
{
    SW_FAULT_PAUSE("blockdev_fdatasync_pause"); /* tests: hold a flush in progress */
    atomic_fetch_add(&d->flushes, 1);
    if (SW_FAULT_HIT("blockdev_fdatasync"))
        return EIO;
    int rc, e;
    do {
        rc = fdatasync(d->fd);
        e = rc ? errno : 0;
    } while (rc != 0 && e == EINTR);
    return e;
}

/* B-11: everything written through either descriptor before the call
 * reaches the device, or the device faults with the write-back error's
 * errno. Callers that come while a fdatasync runs wait for it and share
 * the next one (it may have started before their writes ended, so it
 * cannot vouch for them): under load one fdatasync serves many writers.
 * A failed fdatasync faults the device and fails every caller it was to
 * cover and every later one: a later fdatasync may succeed although the
 * pages that failed write-back are lost. Another transfer's read or write
 * error faults the device too, but cannot lose these writes: their
 * fdatasync still runs. */
static sw_status flush_covering(sw_blockdev *d, sw_error *err)
{
    int e = 0;
    sw_executor_blocking_begin(); /* another writer may run meanwhile, and share */
    pthread_mutex_lock(&d->flush_lock);
    uint64_t ticket = ++d->flush_tickets;
    while (d->flush_covered < ticket) {
        if (d->flush_errno) { /* a failed fdatasync: nothing after it is sure */
            e = d->flush_errno;
            break;
        }
        if (d->flushing) {
            pthread_cond_wait(&d->flush_cv, &d->flush_lock);
            continue;
        }
        d->flushing = 1;
        uint64_t covers = d->flush_tickets;
        pthread_mutex_unlock(&d->flush_lock);
        int failed = fdatasync_once(d);
        pthread_mutex_lock(&d->flush_lock);
        d->flushing = 0;
        if (failed) {
            d->flush_errno = failed;
            sw_blockdev_set_faulted(d);
        } else if (d->flush_covered < covers) {
            d->flush_covered = covers;
        }
        pthread_cond_broadcast(&d->flush_cv);
    }
    pthread_mutex_unlock(&d->flush_lock);
    sw_executor_blocking_end();
    if (!e)
        return SW_OK;
    sw_blockdev_set_faulted(d);
    return sw_error_set_errno(err, SW_EIO, e,
                              "the data written to the block device did not reach it "
                              "(fdatasync failed: %s); the device is now faulted",
                              strerror(e));
}

sw_status sw_blockdev_flush_locked(sw_blockdev *d, sw_error *err)
{
    if (d->fd < 0)
        return SW_OK;
    return flush_covering(d, err);
}

/* ---- direct writes (B-11 at device speed) --------------------------------- */

/* Two aligned staging buffers between this thread, which copies chunk k+1
 * out of host memory, and a writer thread, which writes chunk k to the
 * device: the copy hides behind the device's own time. */
typedef struct direct_pipe {
    pthread_mutex_t m;
    pthread_cond_t cv;
    int fd;
    char *buf[2];
    size_t len[2];
    int64_t pos[2];
    int full[2];
    int done;     /* no more chunks will come */
    int failed;   /* the writer stopped on an error (in st/err) */
    sw_status st;
    sw_error err;
} direct_pipe;

static void *direct_writer(void *arg)
{
    direct_pipe *p = arg;
    for (int k = 0;; k ^= 1) {
        pthread_mutex_lock(&p->m);
        while (!p->full[k] && !p->done)
            pthread_cond_wait(&p->cv, &p->m);
        int have = p->full[k];
        pthread_mutex_unlock(&p->m);
        if (!have)
            return NULL;
        sw_error err;
        sw_status st = io_loop(1, p->fd, p->buf[k], p->len[k], p->pos[k], &err);
        pthread_mutex_lock(&p->m);
        p->full[k] = 0;
        if (st != SW_OK) {
            p->failed = 1;
            p->st = st;
            p->err = err;
        }
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->m);
        if (st != SW_OK)
            return NULL;
    }
}

static sw_status direct_staged(direct_pipe *p, const char *src, size_t len, int64_t pos,
                               sw_error *err)
{
    pthread_t writer;
    if (pthread_create(&writer, NULL, direct_writer, p) != 0)
        return sw_error_set(err, SW_ENOMEM, "cannot start the block device's writer thread");
    int k = 0;
    for (size_t done = 0; done < len; done += DIRECT_CHUNK_BYTES, k ^= 1) {
        size_t n = len - done < DIRECT_CHUNK_BYTES ? len - done : DIRECT_CHUNK_BYTES;
        pthread_mutex_lock(&p->m);
        while (p->full[k] && !p->failed)
            pthread_cond_wait(&p->cv, &p->m);
        int failed = p->failed;
        pthread_mutex_unlock(&p->m);
        if (failed)
            break;
        memcpy(p->buf[k], src + done, n);
        pthread_mutex_lock(&p->m);
        p->len[k] = n;
        p->pos[k] = pos + (int64_t)done;
        p->full[k] = 1;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->m);
    }
    pthread_mutex_lock(&p->m);
    p->done = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->m);
    pthread_join(writer, NULL);
    if (p->failed) {
        *err = p->err;
        return p->st;
    }
    return SW_OK;
}

/* One run of aligned memory written from or read into in place, request
 * by request. */
typedef struct direct_run {
    int writing;
    int fd;
    char *buf;
    size_t len;
    int64_t pos;
    int64_t *progress; /* reads count what they brought in; NULL: none */
    sw_status st;
    sw_error err;
} direct_run;

static void *direct_run_main(void *arg)
{
    direct_run *r = arg;
    r->st = SW_OK;
    for (size_t done = 0; done < r->len && r->st == SW_OK;) {
        size_t n = r->len - done < DIRECT_CHUNK_BYTES ? r->len - done : DIRECT_CHUNK_BYTES;
        r->st = io_loop(r->writing, r->fd, r->buf + done, n, r->pos + (int64_t)done, &r->err);
        done += n;
        if (r->st == SW_OK && r->progress)
            __atomic_fetch_add(r->progress, (int64_t)n, __ATOMIC_RELAXED);
    }
    return NULL;
}

/* Aligned memory in place, as two halves moved at once (a helper thread
 * takes the first) when each half is at least a request, so the device
 * always has a second request queued and one half's page faults on fresh
 * memory overlap the other half's transfer. */
static sw_status direct_in_place(sw_blockdev *d, int writing, char *buf, size_t len,
                                 int64_t pos, int64_t *progress, sw_error *err)
{
    size_t half = len / 2;
    half -= half % DIRECT_ALIGN; /* a multiple of any logical block size */
    if (half < DIRECT_CHUNK_BYTES)
        half = 0; /* no helper for it: two halves in turn would be two requests */
    direct_run a = {writing, d->dfd, buf, half, pos, progress, SW_OK, {0}};
    direct_run b = {writing, d->dfd, buf + half, len - half, pos + (int64_t)half, progress,
                    SW_OK, {0}};
    pthread_t helper;
    int threaded = half >= DIRECT_CHUNK_BYTES &&
                   pthread_create(&helper, NULL, direct_run_main, &a) == 0;
    if (!threaded)
        direct_run_main(&a);
    direct_run_main(&b);
    if (threaded)
        pthread_join(helper, NULL);
    direct_run *failed = a.st != SW_OK ? &a : b.st != SW_OK ? &b : NULL;
    if (!failed)
        return SW_OK;
    *err = failed->err;
    return failed->st;
}

/* `len` bytes (a multiple of the logical block size) from host memory to
 * the block-aligned device offset `pos` through d->dfd. Source memory that
 * is already aligned is written in place, other memory is staged. */
static sw_status direct_write(sw_blockdev *d, const char *src, size_t len, int64_t pos,
                              sw_error *err)
{
    if (((uintptr_t)src & (DIRECT_ALIGN - 1)) == 0)
        return direct_in_place(d, 1, (char *)src, len, pos, NULL, err);
    direct_pipe p;
    memset(&p, 0, sizeof p);
    p.fd = d->dfd;
    size_t stage = len < DIRECT_CHUNK_BYTES ? len : DIRECT_CHUNK_BYTES;
    /* posix_memalign, not sw_malloc: direct I/O needs page alignment. */
    if (posix_memalign((void **)&p.buf[0], DIRECT_ALIGN, stage) != 0)
        p.buf[0] = NULL;
    if (p.buf[0] && posix_memalign((void **)&p.buf[1], DIRECT_ALIGN, stage) != 0)
        p.buf[1] = NULL;
    sw_status st;
    if (!p.buf[0] || !p.buf[1]) {
        st = sw_error_set(err, SW_ENOMEM, "out of memory for direct I/O staging buffers");
    } else {
        pthread_mutex_init(&p.m, NULL);
        pthread_cond_init(&p.cv, NULL);
        st = direct_staged(&p, src, len, pos, err);
        pthread_cond_destroy(&p.cv);
        pthread_mutex_destroy(&p.m);
    }
    free(p.buf[0]);
    free(p.buf[1]);
    return st;
}

/* A bulk transfer between host memory and the device, big enough and
 * block-aligned on the device, that direct I/O may take: its host memory,
 * byte count and device offset, else 0. */
static int direct_range(sw_blockdev *d, const sw_transfer *t, int writing, char **host,
                        size_t *len, int64_t *pos)
{
    const sw_endpoint *h = writing ? &t->src : &t->dst;
    const sw_endpoint *f = writing ? &t->dst : &t->src;
    int64_t bytes, hpos, fpos;
    if (d->dfd < 0 || atomic_load(&d->direct_refused) || !t->bulk ||
        h->kind != SW_ENDPOINT_HOST || !h->host || f->kind != SW_ENDPOINT_FILE ||
        f->fd != d->fd || t->cosize <= 0 ||
        __builtin_mul_overflow(t->cosize, (int64_t)t->itemsize, &bytes) ||
        __builtin_mul_overflow(h->offset, (int64_t)t->itemsize, &hpos) ||
        __builtin_mul_overflow(f->offset, (int64_t)t->itemsize, &fpos) ||
        h->offset < 0 || f->offset < 0 ||
        (size_t)bytes < DIRECT_MIN_BYTES ||
        fpos % d->logical_block_size != 0)
        return 0;
    *host = (char *)h->host + hpos;
    *len = (size_t)bytes;
    *pos = fpos;
    return 1;
}

/* Direct reads straight into aligned host memory: the device's data is
 * copied once, into its destination, instead of into the page cache and
 * again out of it. */
static sw_status direct_read(sw_blockdev *d, const sw_transfer *t, char *dst, size_t len,
                             int64_t pos, sw_error *err)
{
    return direct_in_place(d, 0, dst, len, pos, t->progress, err);
}

/* The transfer itself: direct I/O where it applies (its unaligned tail
 * buffered), else the plain kernel. A device whose direct requests the
 * kernel refuses as misaligned (EINVAL) stops using them and the whole
 * range is moved again buffered. Reads take direct I/O only into
 * page-aligned memory (other memory would need a staging copy, which the
 * page cache already is). */
static sw_status run_transfer(sw_blockdev *d, const sw_transfer *t, int writing,
                              sw_error *err)
{
    char *host;
    size_t len;
    int64_t pos;
    if (!direct_range(d, t, writing, &host, &len, &pos) ||
        (!writing && ((uintptr_t)host & (DIRECT_ALIGN - 1)) != 0))
        return sw_transfer_run(t, err);
    size_t head = len - len % (size_t)d->logical_block_size;
    sw_status st = writing ? direct_write(d, host, head, pos, err)
                           : direct_read(d, t, host, head, pos, err);
    if (st == SW_EIO && err->sys_errno == EINVAL) {
        atomic_store(&d->direct_refused, 1);
        return sw_transfer_run(t, err);
    }
    /* Direct reads count as they go; direct writes and the tail here. */
    if (st == SW_OK && writing && t->progress)
        __atomic_fetch_add(t->progress, (int64_t)head, __ATOMIC_RELAXED);
    if (st == SW_OK && head < len) {
        st = writing ? sw_blockdev_pwrite(d->fd, host + head, len - head,
                                          pos + (int64_t)head, err)
                     : sw_blockdev_pread(d->fd, host + head, len - head,
                                         pos + (int64_t)head, err);
        if (st == SW_OK && t->progress)
            __atomic_fetch_add(t->progress, (int64_t)(len - head), __ATOMIC_RELAXED);
    }
    return st;
}

/* The byte range a transfer touches on `d` (the whole device when it
 * cannot be computed: it then waits for every other transfer). */
static void device_range(const sw_blockdev *d, const sw_transfer *t, sw_blockdev_io *io)
{
    const sw_endpoint *f = t->dst.kind == SW_ENDPOINT_FILE && t->dst.fd == d->fd ? &t->dst
                                                                                   : &t->src;
    int64_t start, bytes, end;
    if (__builtin_mul_overflow(f->offset, (int64_t)t->itemsize, &start) ||
        __builtin_mul_overflow(t->cosize, (int64_t)t->itemsize, &bytes) ||
        __builtin_add_overflow(start, bytes, &end) || start < 0 || bytes < 0) {
        start = 0;
        end = INT64_MAX;
    }
    io->start = start;
    io->end = end;
    io->next = NULL;
}

static void unlist_io(sw_blockdev *d, sw_blockdev_io *io)
{
    for (sw_blockdev_io **pp = &d->busy; *pp; pp = &(*pp)->next)
        if (*pp == io) {
            *pp = io->next;
            break;
        }
}

int sw_blockdev_transfer_may_pause(void)
{
    return SW_FAULT_ARMED("blockdev_transfer_pause") || SW_FAULT_ARMED("blockdev_io_pause");
}

sw_status sw_blockdev_transfer(sw_blockdev *d, const sw_transfer *t, sw_error *err)
{
    int writing = t->dst.kind == SW_ENDPOINT_FILE && t->dst.fd == d->fd;
    sw_blockdev_io io;
    device_range(d, t, &io);
    pthread_mutex_lock(&d->lock);
    /* B-9: a transfer on a range another one is using waits for it; the
     * state is checked once it may go. */
    while (!sw_blockdev_is_faulted(d) && d->fd >= 0 &&
           sw_blockdev_busy_locked(d, io.start, io.end - io.start))
        sw_blockdev_wait_locked(d);
    if (sw_blockdev_is_faulted(d) || d->fd < 0) {
        pthread_mutex_unlock(&d->lock);
        return sw_error_set(err, SW_ESTATE, "the block device is faulted by an earlier I/O "
                            "error or closed; its data can no longer be moved");
    }
    io.next = d->busy;
    d->busy = &io;
    atomic_fetch_add(&d->transferring, 1);
    SW_FAULT_PAUSE("blockdev_transfer_pause"); /* tests: stop with the lock held */
    pthread_mutex_unlock(&d->lock);
    SW_FAULT_PAUSE("blockdev_io_pause"); /* tests: stop in flight, without the lock */

    sw_status st = run_transfer(d, t, writing, err);
    /* B-11: a transfer into the device commits only once it is durable. */
    if (st == SW_OK && writing)
        st = flush_covering(d, err);
    /* Only the device's own failures poison it, not a staging buffer
     * that could not be allocated. */
    if (st == SW_EIO || st == SW_ESTATE)
        sw_blockdev_set_faulted(d);

    pthread_mutex_lock(&d->lock);
    unlist_io(d, &io);
    atomic_fetch_sub(&d->transferring, 1);
    pthread_cond_broadcast(&d->idle);
    pthread_mutex_unlock(&d->lock);
    return st;
}
