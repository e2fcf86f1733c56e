/* Move kernels between host memory and file descriptors (see transfer_internal.h).
 *
 * Everything reduces to two shapes: a span copy (bulk transfers, and
 * elementwise ones whose layout covers its span exactly once) moving bytes
 * straight between the endpoints, and a strided copy that goes through a
 * staging buffer when a file is involved. File I/O is cut into chunks of
 * SW_TRANSFER_CHUNK_BYTES so that fault injection can stop a transfer part
 * way, the way a full disk would. */
#include "transfer_internal.h"

#include <fcntl.h>
#include <string.h>

#include "strideweave/alloc.h"
#include "strideweave/copy.h"
#include "strideweave/filestore.h"
#include "copy_partner_internal.h"
#include "copy_stream_internal.h"
#include "executor_internal.h"
#include "parallel_internal.h"

/* Byte positions of the span in each endpoint, proven to fit in int64. */
typedef struct span_bytes {
    int64_t src_pos;
    int64_t dst_pos;
    size_t len;
} span_bytes;

/* ---- validation --------------------------------------------------------- */

static sw_status check_endpoint(const sw_endpoint *e, const char *side, sw_error *err)
{
    if (e->kind != SW_ENDPOINT_HOST && e->kind != SW_ENDPOINT_FILE)
        return sw_error_set(err, SW_EINVAL, "transfer: unknown %s endpoint kind %d", side,
                            (int)e->kind);
    if (e->offset < 0)
        return sw_error_set(err, SW_EINVAL, "transfer: negative %s offset %lld", side,
                            (long long)e->offset);
    return SW_OK;
}

/* Only once there is something to copy: an empty transfer may name no
 * storage at all. */
static sw_status check_storage(const sw_endpoint *e, const char *side, sw_error *err)
{
    if (e->kind == SW_ENDPOINT_HOST && !e->host)
        return sw_error_set(err, SW_EINVAL, "transfer: NULL %s host pointer", side);
    if (e->kind == SW_ENDPOINT_FILE && e->fd < 0)
        return sw_error_set(err, SW_EINVAL, "transfer: bad %s file descriptor %d", side,
                            e->fd);
    return SW_OK;
}

static sw_status check_header(const sw_transfer *t, sw_error *err)
{
    if (!t)
        return sw_error_set(err, SW_EINVAL, "transfer: NULL description");
    sw_status st = check_endpoint(&t->src, "source", err);
    if (st == SW_OK)
        st = check_endpoint(&t->dst, "destination", err);
    if (st != SW_OK)
        return st;
    if (t->itemsize == 0)
        return sw_error_set(err, SW_EINVAL, "transfer: itemsize must be positive");
    if (t->ndim < 0 || t->ndim > SW_COPY_MAX_DIMS)
        return sw_error_set(err, SW_EINVAL, "transfer: ndim must be in [0, %d], got %d",
                            SW_COPY_MAX_DIMS, t->ndim);
    if (t->cosize < 0)
        return sw_error_set(err, SW_EINVAL, "transfer: negative cosize %lld",
                            (long long)t->cosize);
    return SW_OK;
}

/* Every slot the layout addresses must lie in [0, cosize): the kernels
 * trust the layout to stay inside the span they were given. */
static sw_status check_layout(const sw_transfer *t, sw_error *err)
{
    if (t->ndim > 0 && (!t->extents || !t->strides))
        return sw_error_set(err, SW_EINVAL, "transfer: NULL extents or strides");
    int64_t last = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (t->extents[i] < 1 || t->strides[i] < 0)
            return sw_error_set(err, SW_EINVAL,
                                "transfer: mode %d needs extent >= 1 and stride >= 0, "
                                "got %lld:%lld", i, (long long)t->extents[i],
                                (long long)t->strides[i]);
        int64_t reach;
        if (__builtin_mul_overflow(t->extents[i] - 1, t->strides[i], &reach) ||
            __builtin_add_overflow(last, reach, &last))
            return sw_error_set(err, SW_EOVERFLOW, "transfer: layout offset overflows int64");
    }
    if (last >= t->cosize)
        return sw_error_set(err, SW_EINVAL,
                            "transfer: layout reaches slot %lld, beyond cosize %lld",
                            (long long)last, (long long)t->cosize);
    return SW_OK;
}

/* Byte position of slot `offset` in an endpoint, checking that the span's
 * end fits as well. */
static int span_position(int64_t offset, int64_t cosize, size_t itemsize, int64_t *pos)
{
    int64_t end;
    return !__builtin_add_overflow(offset, cosize, &end) &&
           !__builtin_mul_overflow(end, (int64_t)itemsize, &end) &&
           !__builtin_mul_overflow(offset, (int64_t)itemsize, pos);
}

static sw_status plan_span(const sw_transfer *t, span_bytes *sb, sw_error *err)
{
    /* The builtins check the exact product against the result type. */
    if (t->itemsize > (size_t)INT64_MAX ||
        __builtin_mul_overflow(t->cosize, t->itemsize, &sb->len) ||
        !span_position(t->src.offset, t->cosize, t->itemsize, &sb->src_pos) ||
        !span_position(t->dst.offset, t->cosize, t->itemsize, &sb->dst_pos))
        return sw_error_set(err, SW_EOVERFLOW, "transfer: byte offset overflows int64");
    return SW_OK;
}

static sw_status validate(const sw_transfer *t, span_bytes *sb, sw_error *err)
{
    sw_status st = check_storage(&t->src, "source", err);
    if (st == SW_OK)
        st = check_storage(&t->dst, "destination", err);
    if (st == SW_OK)
        st = check_layout(t, err);
    if (st == SW_OK)
        st = plan_span(t, sb, err);
    return st;
}

/* Whether the layout addresses every slot of [0, cosize) exactly once, in
 * some order: then the logical values are the whole span, and an
 * elementwise transfer is a span copy that needs no staging. Sorting the
 * modes by stride, each stride must be the product of the extents below. */
static int covers_span(const sw_transfer *t)
{
    int64_t e[SW_COPY_MAX_DIMS], s[SW_COPY_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (t->extents[i] == 1)
            continue;
        int k = n++;
        for (; k > 0 && s[k - 1] > t->strides[i]; k--) {
            e[k] = e[k - 1];
            s[k] = s[k - 1];
        }
        e[k] = t->extents[i];
        s[k] = t->strides[i];
    }
    int64_t expect = 1;
    for (int k = 0; k < n; k++)
        if (s[k] != expect || __builtin_mul_overflow(expect, e[k], &expect))
            return 0;
    return expect == t->cosize;
}

/* ---- file chunks -------------------------------------------------------- */

static size_t chunk_of(size_t remaining)
{
    return remaining < SW_TRANSFER_CHUNK_BYTES ? remaining : SW_TRANSFER_CHUNK_BYTES;
}

/* Reserve the file blocks about to be written, as NumPy's tofile does:
 * ext4 then writes a large span markedly faster. Advice only: a file
 * system without fallocate, or a full disk, is reported by the writes. */
static void reserve(int fd, int64_t pos, size_t len)
{
#ifdef FALLOC_FL_KEEP_SIZE
    if (len >= SW_TRANSFER_CHUNK_BYTES)
        (void)fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)pos, (off_t)len);
#else
    (void)fd;
    (void)pos;
    (void)len;
#endif
}

/* Count `bytes` more as copied, for whoever watches the transfer. */
static void report(int64_t *progress, size_t bytes)
{
    if (progress)
        __atomic_fetch_add(progress, (int64_t)bytes, __ATOMIC_RELAXED);
}

static sw_status write_chunks(int fd, const char *src, size_t len, int64_t pos,
                              int64_t *progress, sw_error *err)
{
    reserve(fd, pos, len);
    for (size_t done = 0; done < len;) {
        size_t n = chunk_of(len - done);
        sw_status st = sw_filestore_pwrite(fd, src + done, n, pos + (int64_t)done, err);
        if (st != SW_OK)
            return st;
        done += n;
        report(progress, n);
    }
    return SW_OK;
}

static sw_status read_chunks(int fd, char *dst, size_t len, int64_t pos, int64_t *progress,
                             sw_error *err)
{
    for (size_t done = 0; done < len;) {
        size_t n = chunk_of(len - done);
        sw_status st = sw_filestore_pread(fd, dst + done, n, pos + (int64_t)done, err);
        if (st != SW_OK)
            return st;
        done += n;
        report(progress, n);
    }
    return SW_OK;
}

/* Whether a host span of `len` bytes, copied by one thread, goes through
 * the copy partner (copy_partner_internal.h): its sizes, and not on the
 * pool, which already keeps every CPU busy. */
static int partner_may_share(size_t len)
{
    return len >= SW_COPY_PARTNER_MIN_BYTES && len <= SW_COPY_PARTNER_MAX_BYTES &&
           !sw_executor_on_worker();
}

/* One piece of a host copy: through the copy partner when `share`, its
 * stores streamed when `stream`. */
static void copy_host_piece(char *dst, const char *src, size_t n, int share, int stream)
{
    if (share)
        sw_copy_host(dst, src, n, stream);
    else
        sw_copy_stream_if(dst, src, n, stream);
}

/* Host memory to host memory, chunk by chunk only so that progress moves.
 * `share`: the copy partner may take half of each chunk (partner_may_share
 * said so of the whole span); `stream`: the stores bypass the caches
 * (stream_span said so of the whole span), whoever copies. */
static sw_status copy_host_span(char *dst, const char *src, size_t len, int64_t *progress,
                                int share, int stream, sw_error *err)
{
    if (!share && !stream && !progress)
        return sw_copy_span(dst, src, len, err);
    for (size_t done = 0; done < len;) {
        size_t n = progress ? chunk_of(len - done) : len - done;
        copy_host_piece(dst + done, src + done, n, share, stream); /* validate() refused NULL */
        done += n;
        report(progress, n);
    }
    return SW_OK;
}

static sw_status no_staging(size_t bytes, sw_error *err)
{
    return sw_error_set(err, SW_ENOMEM, "transfer: cannot allocate a %zu-byte staging buffer",
                        bytes);
}

/* File to file through one chunk-sized buffer: memory stays bounded however
 * large the span is. */
static sw_status copy_file_span(int src_fd, int64_t src_pos, int dst_fd, int64_t dst_pos,
                                size_t len, int64_t *progress, sw_error *err)
{
    char *buf = sw_malloc(chunk_of(len));
    if (!buf)
        return no_staging(chunk_of(len), err);
    sw_status st = SW_OK;
    reserve(dst_fd, dst_pos, len);
    for (size_t done = 0; done < len && st == SW_OK;) {
        size_t n = chunk_of(len - done);
        st = sw_filestore_pread(src_fd, buf, n, src_pos + (int64_t)done, err);
        if (st == SW_OK)
            st = sw_filestore_pwrite(dst_fd, buf, n, dst_pos + (int64_t)done, err);
        if (st == SW_OK)
            report(progress, n);
        done += n;
    }
    sw_free(buf);
    return st;
}

/* ---- the two shapes ----------------------------------------------------- */

static char *host_at(const sw_endpoint *e, int64_t pos)
{
    return (char *)e->host + pos;
}

/* Whether a host span copy of the whole transfer `t` (or of a part of it
 * run beside others) streams its stores: by the whole span's size, as its
 * parts are cut from it, whether anyone waits for it at once, and whether
 * streaming pays on this machine at all. */
static int stream_span(const sw_transfer *t)
{
    size_t bytes = (size_t)t->cosize * t->itemsize;
    return (bytes >= SW_COPY_STREAM_MIN_BYTES ||
            (t->unwaited && bytes >= SW_COPY_STREAM_UNWAITED_MIN_BYTES)) &&
           sw_copy_stream_pays();
}

/* The span [offset, offset + cosize) of slots, straight between endpoints:
 * host memory is written to or read from a file in place. `share`: a host
 * copy may use the copy partner (the span is not one of several parts
 * that threads copy side by side). */
static sw_status move_span(const sw_transfer *t, const span_bytes *sb, int share, sw_error *err)
{
    const sw_endpoint *s = &t->src, *d = &t->dst;
    int64_t *p = t->progress;
    if (s->kind == SW_ENDPOINT_HOST && d->kind == SW_ENDPOINT_HOST)
        return copy_host_span(host_at(d, sb->dst_pos), host_at(s, sb->src_pos), sb->len, p,
                              share && partner_may_share(sb->len), stream_span(t), err);
    if (s->kind == SW_ENDPOINT_HOST)
        return write_chunks(d->fd, host_at(s, sb->src_pos), sb->len, sb->dst_pos, p, err);
    if (d->kind == SW_ENDPOINT_HOST)
        return read_chunks(s->fd, host_at(d, sb->dst_pos), sb->len, sb->src_pos, p, err);
    return copy_file_span(s->fd, sb->src_pos, d->fd, sb->dst_pos, sb->len, p, err);
}

static sw_status strided(char *dst, const char *src, const sw_transfer *t, sw_error *err)
{
    return sw_copy_strided(dst, t->strides, src, t->strides, t->extents, t->ndim,
                           t->itemsize, err);
}

/* Host values into a zeroed span image, then the image to the file: the
 * holes of the file span become zeros, which the header allows. */
static sw_status values_to_file(const sw_transfer *t, const span_bytes *sb, sw_error *err)
{
    char *buf = sw_calloc(1, sb->len);
    if (!buf)
        return no_staging(sb->len, err);
    sw_status st = strided(buf, host_at(&t->src, sb->src_pos), t, err);
    if (st == SW_OK)
        st = write_chunks(t->dst.fd, buf, sb->len, sb->dst_pos, NULL, err);
    sw_free(buf);
    return st;
}

/* The whole file span first, then the values: a failed read leaves the
 * host destination untouched. */
static sw_status values_from_file(const sw_transfer *t, const span_bytes *sb, sw_error *err)
{
    char *buf = sw_malloc(sb->len);
    if (!buf)
        return no_staging(sb->len, err);
    sw_status st = read_chunks(t->src.fd, buf, sb->len, sb->src_pos, NULL, err);
    if (st == SW_OK)
        st = strided(host_at(&t->dst, sb->dst_pos), buf, t, err);
    sw_free(buf);
    return st;
}

/* Logical values only. File to file copies the span: the values are part
 * of it, and the destination's holes are unspecified anyway. Progress
 * jumps to the values' bytes at the end. */
static sw_status move_values(const sw_transfer *t, const span_bytes *sb, sw_error *err)
{
    const sw_endpoint *s = &t->src, *d = &t->dst;
    sw_status st;
    if (s->kind == SW_ENDPOINT_HOST && d->kind == SW_ENDPOINT_HOST)
        st = strided(host_at(d, sb->dst_pos), host_at(s, sb->src_pos), t, err);
    else if (s->kind == SW_ENDPOINT_HOST)
        st = values_to_file(t, sb, err);
    else if (d->kind == SW_ENDPOINT_HOST)
        st = values_from_file(t, sb, err);
    else {
        sw_transfer span = *t;
        span.progress = NULL;
        st = move_span(&span, sb, 1, err);
    }
    if (st == SW_OK)
        report(t->progress, (size_t)sw_transfer_bytes(t));
    return st;
}

static int64_t element_count(const sw_transfer *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        if (t->extents[i] < 1 || __builtin_mul_overflow(n, t->extents[i], &n))
            return -1;
    return n;
}

int64_t sw_transfer_bytes(const sw_transfer *t)
{
    if (!t || t->itemsize == 0 || t->itemsize > (size_t)INT64_MAX || t->cosize <= 0 ||
        t->ndim < 0 || t->ndim > SW_COPY_MAX_DIMS || (t->ndim > 0 && !t->extents) ||
        (t->ndim > 0 && !t->strides))
        return 0;
    int64_t n = t->bulk || covers_span(t) ? t->cosize : element_count(t), bytes;
    if (n < 0 || __builtin_mul_overflow(n, (int64_t)t->itemsize, &bytes))
        return 0;
    return bytes;
}

/* The checks both entry points make first: SW_OK with *work set when there
 * is something to copy (its byte span in *sb), SW_OK with *work clear for
 * an empty transfer, else the failure. */
static sw_status prepare(const sw_transfer *t, span_bytes *sb, int *work, sw_error *err)
{
    *work = 0;
    sw_status st = check_header(t, err);
    if (st != SW_OK || t->cosize == 0)
        return st;
    st = validate(t, sb, err);
    *work = st == SW_OK;
    return st;
}

sw_status sw_transfer_run_whole_span(const sw_transfer *t, sw_error *err)
{
    span_bytes sb = {.src_pos = t->src.offset * (int64_t)t->itemsize,
                     .dst_pos = t->dst.offset * (int64_t)t->itemsize,
                     .len = (size_t)t->cosize * t->itemsize};
    if (t->src.kind == SW_ENDPOINT_HOST && t->dst.kind == SW_ENDPOINT_HOST &&
        sb.len <= SW_TRANSFER_CHUNK_BYTES) { /* one chunk: copy_host_span's loop, unrolled */
        char *dst = host_at(&t->dst, sb.dst_pos);
        const char *src = host_at(&t->src, sb.src_pos);
        copy_host_piece(dst, src, sb.len, partner_may_share(sb.len), stream_span(t));
        report(t->progress, sb.len);
        return SW_OK;
    }
    return move_span(t, &sb, 1, err);
}

sw_status sw_transfer_run(const sw_transfer *t, sw_error *err)
{
    span_bytes sb;
    int work;
    sw_status st = prepare(t, &sb, &work, err);
    if (!work)
        return st;
    if (t->bulk || covers_span(t))
        return move_span(t, &sb, 1, err);
    return move_values(t, &sb, err);
}

/* ---- one span on several threads ------------------------------------------ */

/* Below this a span is copied by one thread: the handoff would cost more
 * than the second thread saves. Parts are whole huge pages of the span.
 * 32 MiB, above move.c's HERE_WAITED_BYTES (16 MiB): a move its caller
 * waits for is copied on the caller up to that size, and a caller sharing
 * such a copy with a pool helper ran one 16 MiB CPU -> CPU move into
 * fresh memory at 0.7-2.0 GB/s against np.copyto's 4-4.9 (bench/sweep.py,
 * 2 CPUs, every run), while the caller alone ran it at 5.2-6.6 GB/s. A
 * span above 16 MiB goes to the pool and splits from 32 MiB. */
#define PARALLEL_MIN_BYTES ((size_t)SW_TRANSFER_PARALLEL_MIN_BYTES)
#define PART_ALIGN ((size_t)2 << 20)
#define MAX_WIDTH (SW_PARALLEL_MAX_HELPERS + 1)
/* Parts of at most this size when every thread may take part: whichever
 * thread is free claims the next, so a thread preempted on a busy machine
 * holds up one part, not a whole share of the span. */
#define PART_MAX_BYTES ((size_t)32 << 20)
#define MAX_PARTS (4 * MAX_WIDTH)

typedef struct span_parts {
    const sw_transfer *t;
    span_bytes whole;
    size_t part_len;
    sw_status st[MAX_PARTS];
    sw_error err[MAX_PARTS];
} span_parts;

static void run_part(void *ctx, int i)
{
    span_parts *p = ctx;
    size_t off = (size_t)i * p->part_len;
    size_t left = p->whole.len - off;
    span_bytes sb = {.src_pos = p->whole.src_pos + (int64_t)off,
                     .dst_pos = p->whole.dst_pos + (int64_t)off,
                     .len = left < p->part_len ? left : p->part_len};
    p->st[i] = move_span(p->t, &sb, 0, &p->err[i]); /* threads copy parts side by side */
}

sw_status sw_transfer_run_parallel(const sw_transfer *t, int max_threads, const void *owner,
                                   sw_error *err)
{
    span_bytes sb;
    int work;
    sw_status st = prepare(t, &sb, &work, err);
    if (!work)
        return st;
    if (!t->bulk && !covers_span(t))
        return move_values(t, &sb, err);
    /* Writes into one file are not split: a file system runs buffered
     * writes to one file one at a time (the inode's lock, held for the
     * whole write on ext4, xfs and tmpfs alike), so a second thread only
     * waited for the first and added its wake-up (strace of a 16 MiB
     * CPU -> FileBacked move: one part's fallocate blocked until the other
     * part's pwrite returned). Reads share the file and still split. */
    int full = sb.len >= PARALLEL_MIN_BYTES && t->dst.kind != SW_ENDPOINT_FILE
                   ? sw_parallel_width()
                   : 1;
    int width = max_threads > 0 && full > max_threads ? max_threads : full;
    if (width > MAX_WIDTH)
        width = MAX_WIDTH;
    /* Held back from the helpers, parts still go to the owner's waiter. */
    int open = owner && width < full;
    if (width < 2 && !open)
        return move_span(t, &sb, 1, err);
    int parts = width;
    if (width == full || open) {
        size_t want = (sb.len + PART_MAX_BYTES - 1) / PART_MAX_BYTES;
        if (want > (size_t)parts)
            parts = want < MAX_PARTS ? (int)want : MAX_PARTS;
    }
    span_parts p = {.t = t, .whole = sb};
    size_t per = (sb.len + (size_t)parts - 1) / (size_t)parts;
    p.part_len = (per + PART_ALIGN - 1) & ~(PART_ALIGN - 1);
    int n = (int)((sb.len + p.part_len - 1) / p.part_len);
    if (open)
        sw_parallel_run_open(owner, width - 1, n, run_part, &p);
    else
        sw_parallel_run(n, run_part, &p);
    for (int i = 0; i < n; i++)
        if (p.st[i] != SW_OK) {
            *err = p.err[i];
            return p.st[i];
        }
    return SW_OK;
}
