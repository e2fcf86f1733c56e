/* A TiledEvictable projection written straight into a FileBacked
 * destination's file (contract-carriers TE-10; issue 17), with no
 * projection-sized buffer.
 *
 * The destination is dense and first-axis-fastest, so it is written from
 * byte 0 up, one run of tile[0] slots at a time, each run from one tile.
 * A writer gathers the runs into as few system calls as it can: pieces of
 * host memory (resident tiles, the staging buffer, zeros) become the
 * iovecs of one pwritev (FW_IOV at a time), a run kept in a file
 * becomes one copy_file_range (file to file in the kernel; runs that
 * follow on in both files are merged first), and the range of an implicit
 * tile is skipped when the destination holds no data there yet (a fresh
 * file's hole reads as zeros). A mapping of the file was tried and was
 * 5-10x slower (page faults of a shared file mapping, commit 085758a).
 *
 * A run of a few pages strided through a full file is read on its own
 * into a bounded staging buffer; a tile whose runs are shorter still, or
 * which only the binding can read, is read whole into a tile-sized buffer
 * at its first run and dropped after its last run has been written; a
 * layout other than the identity gathers slot by slot into the staging
 * buffer. So what is held at once is the tiles the current stretch of the
 * destination crosses, never the projection. */
#include "tiled_evictable_internal.h"
#include "fault_internal.h"
#include "tiles_internal.h"

#include <errno.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "strideweave/alloc.h"
#include "strideweave/filestore.h"

/* Pieces per pwritev: the system's vector limit (IOV_MAX on Linux). */
#define FW_IOV 1024
/* The staging buffer: runs read on their own, and the values of a layout
 * other than the identity. */
#define FW_STAGE ((size_t)1 << 20)
/* Tile buffers done with but still named by pending pieces: written out
 * once they reach this much. */
#define FW_SPENT ((size_t)16 << 20)
/* A run kept in a file at least this long (merged) is copied file to
 * file; a shorter one is read with its whole tile, or on its own when its
 * tile is strided through a full file with gaps wider than its runs, which
 * reading through would waste (from FW_PREAD_RUN up: one pread a page or
 * more). Measured on ext4 (8 MiB of runs): copy_file_range wins from 64 KiB
 * runs (2.2 vs 2.4 ms), pread per 4 KiB run beats reading its 28 KiB gaps
 * through (2.2 vs 3.3-6 ms per 4 MiB). */
#define FW_COPY_RUN ((size_t)64 << 10)
#define FW_PREAD_RUN ((size_t)4 << 10)

/* Zeros for the ranges of implicit tiles in a destination with data. */
static const unsigned char zero_block[64 << 10];

typedef struct fw {
    int fd;
    int64_t pos;            /* destination byte the pending pieces start at */
    /* pending: host pieces (niov > 0) or one file-to-file copy (cbytes > 0) */
    struct iovec iov[FW_IOV];
    int niov;
    size_t ibytes;
    int cfd;
    int64_t cfrom, cbytes;
    unsigned char *stage;   /* FW_STAGE bytes, made at first use */
    size_t staged;
    unsigned char **spent;  /* tile buffers to free after the next write */
    int64_t nspent;
    size_t spent_bytes;
} fw;

static void free_spent(fw *w)
{
    for (int64_t i = 0; i < w->nspent; i++)
        sw_free(w->spent[i]);
    w->nspent = 0;
    w->spent_bytes = 0;
}

/* Write what is pending, then start empty at the byte after it. */
static sw_status fw_flush(fw *w, sw_error *err)
{
    sw_status st = SW_OK;
    if (w->niov > 0) {
        st = sw_filestore_pwritev(w->fd, w->iov, w->niov, w->pos, err);
        w->pos += (int64_t)w->ibytes;
    } else if (w->cbytes > 0) {
        st = sw_filestore_copy_range(w->cfd, w->cfrom, w->fd, w->pos, w->cbytes, err);
        w->pos += w->cbytes;
    }
    w->niov = 0;
    w->ibytes = 0;
    w->cbytes = 0;
    w->staged = 0;
    free_spent(w);
    return st;
}

/* `len` bytes of host memory at `p` next; merged into the last piece when
 * they follow it in memory. */
static sw_status fw_memory(fw *w, const void *p, size_t len, sw_error *err)
{
    sw_status st = SW_OK;
    if (w->cbytes > 0 && (st = fw_flush(w, err)) != SW_OK)
        return st;
    struct iovec *last = w->niov > 0 ? &w->iov[w->niov - 1] : NULL;
    if (last && (const unsigned char *)last->iov_base + last->iov_len == p) {
        last->iov_len += len;
    } else {
        if (w->niov == FW_IOV && (st = fw_flush(w, err)) != SW_OK)
            return st;
        w->iov[w->niov++] = (struct iovec){.iov_base = (void *)p, .iov_len = len};
    }
    w->ibytes += len;
    return SW_OK;
}

/* `len` bytes of file `fd` from byte `from` next; merged into a pending
 * copy they follow on from. */
static sw_status fw_file(fw *w, int fd, int64_t from, int64_t len, sw_error *err)
{
    if (w->cbytes > 0 && w->cfd == fd && w->cfrom + w->cbytes == from) {
        w->cbytes += len;
        return SW_OK;
    }
    sw_status st = w->niov > 0 || w->cbytes > 0 ? fw_flush(w, err) : SW_OK;
    w->cfd = fd;
    w->cfrom = from;
    w->cbytes = len;
    return st;
}

/* `len` zero bytes next: left to the file when it has no data there. */
static sw_status fw_zeros(fw *w, size_t len, int hole, sw_error *err)
{
    if (hole) {
        sw_status st = fw_flush(w, err);
        w->pos += (int64_t)len;
        return st;
    }
    sw_status st = SW_OK;
    for (size_t done = 0; st == SW_OK && done < len; done += sizeof zero_block) {
        size_t n = len - done < sizeof zero_block ? len - done : sizeof zero_block;
        st = fw_memory(w, zero_block, n, err);
    }
    return st;
}

/* Room for `len` (<= FW_STAGE) bytes next in the staging buffer, written
 * out with the pieces around it. Whatever would make fw_memory write first
 * (a pending copy, a full vector) is written before the room is taken, as
 * a write empties the staging buffer. NULL with err set on failure. */
static unsigned char *fw_stage(fw *w, size_t len, sw_error *err)
{
    if (!w->stage && !(w->stage = sw_malloc(FW_STAGE))) {
        sw_error_set(err, SW_ENOMEM, "TiledEvictable: out of memory projecting");
        return NULL;
    }
    if ((w->cbytes > 0 || w->niov == FW_IOV || w->staged + len > FW_STAGE) &&
        fw_flush(w, err) != SW_OK)
        return NULL;
    unsigned char *p = w->stage + w->staged;
    w->staged += len;
    return fw_memory(w, p, len, err) == SW_OK ? p : NULL;
}

/* Whether the file has no data in its first `bytes` (a fresh file's hole:
 * it reads as zeros). A file system without holes says it has. */
static int no_data(int fd, int64_t bytes)
{
    off_t at = lseek(fd, 0, SEEK_DATA);
    return at < 0 ? errno == ENXIO : at >= bytes;
}

/* ---- the sources --------------------------------------------------------- */

/* How a tile's runs come out of a file the core reaches. */
enum { FW_WHOLE_TILE, FW_COPY, FW_PREAD };

typedef struct fw_tiles {
    sw_tiled_evictable *te;
    const te_store *notes;
    const uint8_t *full, *implicit;
    uint8_t how[2];         /* how a tile in a file is read: [compact, full] */
    unsigned char **buf;    /* a tile read whole (compact), while its runs are written */
} fw_tiles;

/* How many slots of one tile the destination's walk takes back to back:
 * tile[0], times tile[k] while every axis below k selects a single tile;
 * for a store indexed by slot (`full`) only while those axes are whole
 * (the run also follows on in the store). */
static int64_t merged_run(const sw_tile_geometry *g, const sw_tile_selection *sel, int full)
{
    int64_t m = g->tile[0];
    for (int32_t k = 1; k < g->rank; k++) {
        if (sel->counts[k - 1] != 1 || (full && g->grid[k - 1] != 1))
            break;
        m *= g->tile[k];
    }
    return m;
}

/* How the runs of a tile in a file (`full`: the tier's full file, else a
 * file of its own in within-tile order) are best read: FW_COPY, FW_PREAD or
 * FW_WHOLE_TILE (FW_COPY_RUN). */
static int file_reads(const sw_tile_geometry *g, const sw_tile_selection *sel, int full,
                      size_t eb)
{
    size_t run = (size_t)merged_run(g, sel, full) * eb;
    size_t gap = (size_t)(g->logical[0] - g->tile[0]) * eb; /* between runs in a full file */
    if (run >= FW_COPY_RUN)
        return FW_COPY;
    return full && run >= FW_PREAD_RUN && gap > run ? FW_PREAD : FW_WHOLE_TILE;
}

static int is_host(const te_store *s)
{
    return s->host || (s->own && s->own_host);
}

static const unsigned char *host_of(const te_store *s)
{
    return s->host ? s->host : s->own_host;
}

/* The file holding a store's slots at slot * eb: a FileBacked tier's, also
 * a bound one the core reaches itself (te_store's `own`, e.g. a FileBacked
 * primary); -1 for any other store. The store is pinned and its carrier
 * live, so the descriptor stays open while the projection uses it. */
static int file_of(const fw_tiles *ts, const te_store *s)
{
    if (s->fd >= 0)
        return s->fd;
    if (!s->own || s->own_host || sw_carrier_class_of(s->c) != &sw_file_backed_class ||
        sw_carrier_dtype(s->c) != ts->te->dtype)
        return -1;
    return sw_file_backed_fd(s->c);
}

/* Tile t read whole into a tile-sized buffer (within-tile order), once. */
static const unsigned char *tile_buffer(fw_tiles *ts, int64_t t, sw_error *err)
{
    if (ts->buf[t])
        return ts->buf[t];
    size_t bytes = (size_t)ts->te->geo.tile_size * ts->te->eb;
    unsigned char *b = sw_malloc(bytes ? bytes : 1);
    if (!b) {
        sw_error_set(err, SW_ENOMEM, "TiledEvictable: out of memory projecting");
        return NULL;
    }
    /* A file the core reaches is read as a file: by whole runs, not slot
     * range by slot range through the carrier. */
    te_store from = ts->notes[t], into = {NULL, b, -1, 0, NULL};
    int fd = file_of(ts, &from);
    if (fd >= 0 && from.fd < 0)
        from = (te_store){from.c, NULL, fd, 0, NULL};
    if (sw_te_copy_tile(ts->te, t, &from, ts->full[t], &into, err) != SW_OK) {
        sw_free(b);
        return NULL;
    }
    return ts->buf[t] = b;
}

/* After tile t's last run: its buffer goes once the pieces naming it are
 * written. */
static sw_status retire(fw *w, fw_tiles *ts, int64_t t, sw_error *err)
{
    if (!ts->buf[t])
        return SW_OK;
    w->spent[w->nspent++] = ts->buf[t];
    ts->buf[t] = NULL;
    w->spent_bytes += (size_t)ts->te->geo.tile_size * ts->te->eb;
    return w->spent_bytes >= FW_SPENT ? fw_flush(w, err) : SW_OK;
}

/* One run of the identity layout: `count` slots of tile t from logical
 * index s (within-tile position `within`). */
static sw_status identity_run(fw *w, fw_tiles *ts, int64_t t, int64_t s, int64_t within,
                              int64_t count, int hole, sw_error *err)
{
    const te_store *n = &ts->notes[t];
    size_t eb = ts->te->eb, len = (size_t)count * eb;
    int64_t from = ts->full[t] ? s : within;
    if (ts->implicit[t])
        return fw_zeros(w, len, hole, err);
    if (is_host(n))
        return fw_memory(w, host_of(n) + (size_t)from * eb, len, err);
    int how = ts->how[ts->full[t] ? 1 : 0];
    int fd = how != FW_WHOLE_TILE ? file_of(ts, n) : -1;
    if (fd >= 0 && how == FW_COPY)
        return fw_file(w, fd, from * (int64_t)eb, (int64_t)len, err);
    if (fd >= 0) {
        unsigned char *into = fw_stage(w, len, err);
        return into ? sw_filestore_pread(fd, into, len, from * (int64_t)eb, err) : err->code;
    }
    const unsigned char *b = tile_buffer(ts, t, err);
    return b ? fw_memory(w, b + (size_t)within * eb, len, err) : err->code;
}

/* Where logical index s's value is (any layout): its slot's tile, read
 * whole when it is not in host memory. NULL for zeros (implicit). */
static const unsigned char *value_at(fw_tiles *ts, const sw_layout *L, int64_t offset,
                                     int64_t s, sw_error *err, int *failed)
{
    const sw_tile_geometry *g = &ts->te->geo;
    int64_t slot = sw_tiles_layout_slot(L, offset, s), t, w;
    sw_tiles_locate(g, slot, &t, &w);
    if (ts->implicit[t])
        return NULL;
    size_t eb = ts->te->eb;
    if (is_host(&ts->notes[t]))
        return host_of(&ts->notes[t]) + (size_t)(ts->full[t] ? slot : w) * eb;
    const unsigned char *b = tile_buffer(ts, t, err);
    *failed = !b;
    return b ? b + (size_t)w * eb : NULL;
}

/* One run of another layout: `count` values from logical index s, copied
 * slot by slot into the staging buffer. */
static sw_status strided_run(fw *w, fw_tiles *ts, const sw_layout *L, int64_t offset,
                             int64_t s, int64_t count, sw_error *err)
{
    size_t eb = ts->te->eb;
    int64_t per = (int64_t)(FW_STAGE / eb);
    for (int64_t done = 0; done < count; done += per) {
        int64_t k = count - done < per ? count - done : per;
        unsigned char *into = fw_stage(w, (size_t)k * eb, err);
        if (!into)
            return err->code;
        for (int64_t i = 0; i < k; i++) {
            int failed = 0;
            const unsigned char *v = value_at(ts, L, offset, s + done + i, err, &failed);
            if (failed)
                return err->code;
            if (v)
                memcpy(into + (size_t)i * eb, v, eb);
            else
                memset(into + (size_t)i * eb, 0, eb);
        }
    }
    return SW_OK;
}

/* ---- the walk ------------------------------------------------------------ */

/* The destination's runs in order: each tile[0] slots of one tile. */
static sw_status walk(fw *w, fw_tiles *ts, const sw_layout *L, int64_t offset,
                      const sw_tile_selection *sel, int identity, int hole, sw_error *err)
{
    const sw_tile_geometry *g = &ts->te->geo;
    int64_t shape[SW_TILES_MAX_RANK];
    int64_t n = sw_tiles_compact_shape(g, sel, shape), run = g->tile[0];
    int64_t c[SW_TILES_MAX_RANK] = {0};
    sw_status st = SW_OK;
    for (int64_t at = 0; st == SW_OK && at < n; at += run) {
        int64_t t, s, within;
        sw_tiles_run_source(g, sel, c, &t, &s, &within);
        st = identity ? identity_run(w, ts, t, s, within, run, hole, err)
                      : strided_run(w, ts, L, offset, s, run, err);
        if (st == SW_OK && within + run == g->tile_size)
            st = retire(w, ts, t, err);
        sw_tiles_run_next(g, shape, c);
    }
    return st == SW_OK ? fw_flush(w, err) : st;
}

sw_status sw_te_gather_file(sw_tiled_evictable *te, const sw_layout *L, int64_t offset,
                            const sw_tile_selection *sel, const te_store *notes,
                            const uint8_t *full, const uint8_t *implicit, int fd, sw_error *err)
{
    if (SW_FAULT_HIT("tile_gather"))
        return sw_error_set_errno(err, SW_EIO, EIO, "TiledEvictable: injected fault: projection "
                                  "gather failed");
    SW_FAULT_PAUSE("tile_gather_pause"); /* tests: stop while the tiles are pinned */
    const sw_tile_geometry *g = &te->geo;
    fw *w = sw_calloc(1, sizeof *w);
    fw_tiles ts = {.te = te, .notes = notes, .full = full, .implicit = implicit};
    ts.buf = sw_calloc((size_t)g->ntiles, sizeof *ts.buf);
    if (w)
        w->spent = sw_calloc((size_t)g->ntiles, sizeof *w->spent);
    sw_status st = SW_OK;
    if (!w || !ts.buf || !w->spent) {
        st = sw_error_set(err, SW_ENOMEM, "TiledEvictable: out of memory projecting");
    } else {
        w->fd = fd;
        for (int f = 0; f < 2; f++)
            ts.how[f] = file_reads(g, sel, f, te->eb);
        int64_t shape[SW_TILES_MAX_RANK];
        int64_t bytes = sw_tiles_compact_shape(g, sel, shape) * (int64_t)te->eb;
        st = walk(w, &ts, L, offset, sel, sw_tiles_is_identity(g, L, offset),
                  no_data(fd, bytes), err);
    }
    for (int64_t t = 0; ts.buf && t < g->ntiles; t++)
        sw_free(ts.buf[t]);
    sw_free(ts.buf);
    if (w) {
        free_spent(w);
        sw_free(w->spent);
        sw_free(w->stage);
    }
    sw_free(w);
    return st;
}
