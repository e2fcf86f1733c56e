/* TiledEvictable in the core (contract-carriers TE-1, TE-2, TE-6, TE-7,
 * TE-9, TE-12, TE-14): the handle, its tile records, residency requests
 * and slot access. Projection lives in tiled_evictable_project.c.
 *
 * Every request follows one pattern: under the lock, check everything and
 * mark the tiles it covers (pending or pinned); without the lock, copy into
 * fresh storage; under the lock again, commit all records at once (or drop
 * the fresh copies) and clear the marks. Marked tiles refuse writes and
 * other requests, so the copies never race with a change of the storage
 * they read, and the lock is never held across bulk I/O of a request. */
#include "tiled_evictable_internal.h"
#include "fault_internal.h"

#include <stdlib.h>
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/uio.h>

#include "carrier_internal.h"
#include "strideweave/alloc.h"
#include "strideweave/filestore.h"
#include "strideweave/block_device.h"

/* ---- storage ---------------------------------------------------------------- */

static void drop_graves(sw_tiled_evictable *te, te_grave *g);

/* The built-in classes the core serves in either role without hooks: the
 * ones tier_supported keeps addressed, and Generic memory, a FileBacked
 * primary and a BlockDeviceCarrier, reached as bound stores of its own
 * classes (te_store's `own`). */
static int core_class(const sw_carrier_class *k)
{
    return k == &sw_cpu_class || k == &sw_generic_class || k == &sw_file_backed_class ||
           k == &sw_block_device_carrier_class;
}

static void describe(sw_carrier *c, te_store *s)
{
    s->c = c;
    s->host = NULL;
    s->fd = -1;
    s->own = 0;
    s->own_host = NULL;
    pthread_mutex_lock(&c->lock);
    sw_carrier_storage st;
    if (!c->released && c->ops->storage && c->ops->storage(c->impl, &st, NULL) == SW_OK) {
        if (st.kind == SW_ENDPOINT_HOST)
            s->host = st.host;
        else if (st.kind == SW_ENDPOINT_FILE)
            s->fd = st.fd;
    }
    pthread_mutex_unlock(&c->lock);
}

/* A store of a role-bound tier: the core forgets its address, so copies
 * go the bound way (copy_bounce) and slot access through the binding's
 * hooks, unless the binding left the core's own classes to the core
 * (core_classes; te_store's `own`): host memory of the dtype, a file, a
 * block device. */
static void unaddress(const sw_tiled_evictable *te, te_store *s)
{
    const sw_carrier_class *k = sw_carrier_class_of(s->c);
    if (!te->hooks.core_classes) {
        /* every access through the hooks */
    } else if (k == &sw_cpu_class || k == &sw_generic_class) {
        s->own_host = k == &sw_cpu_class ? s->host : sw_generic_pointer(s->c);
        s->own = s->own_host && sw_carrier_dtype(s->c) == te->dtype;
    } else if (k == &sw_file_backed_class || k == &sw_block_device_carrier_class) {
        s->own = 1;
    }
    s->host = NULL;
    s->fd = -1;
}

/* A fresh tile-sized Generic or BlockDeviceCarrier store like `proto`.
 * A zero-filled block-device tile is flushed before it can be committed
 * (B-11: a block-device transfer is durable before commit). */
static sw_status builtin_store(sw_tiled_evictable *te, sw_carrier *proto, int zero,
                               sw_carrier **out, sw_error *err)
{
    sw_block_device *d = sw_block_device_of(proto);
    if (!d)
        return sw_generic_new_zeroed(te->geo.tile_size, te->dtype, out, err);
    sw_status st = sw_block_device_allocate(d, te->geo.tile_size, te->dtype,
                                            zero ? 0 : SW_CARRIER_EMPTY, out, err);
    if (st == SW_OK && zero && (st = sw_block_device_flush(d, err)) != SW_OK) {
        sw_carrier_release(*out, NULL);
        sw_carrier_unref(*out);
        *out = NULL;
    }
    return st;
}

/* Fresh tile-sized storage like the tier `proto` (the binding's store
 * hook first, when set; else CPU or FileBacked), zero-filled when `zero`
 * (a FileBacked tile always reads zeros when fresh). No lock held. */
static sw_status fresh_store(sw_tiled_evictable *te, const te_store *proto, int secondary,
                             int zero, te_store *out, sw_error *err)
{
    sw_carrier *c = NULL;
    sw_status st = SW_ENOTSUP;
    const sw_carrier_class *cls = sw_carrier_class_of(proto->c);
    if (te->hooks.store) {
        st = te->hooks.store(proto->c, secondary, te->geo.tile_size, te->dtype, zero,
                             te->hooks.user, &c, err);
        if (st == SW_OK && !c)
            st = sw_error_set(err, SW_ESTATE, "TiledEvictable: the binding made no tile store");
        if (st == SW_OK) {
            describe(c, out);
            if (te->role_bound[secondary ? 1 : 0])
                unaddress(te, out);
            return SW_OK;
        }
        if (st != SW_ENOTSUP)
            return st;
        sw_error_clear(err);
    }
    if (te_store_bound(proto) && !(te->hooks.core_classes && core_class(cls))) {
        return sw_error_set(err, SW_ENOTSUP, "TiledEvictable: no tile storage like a %s tier",
                            sw_carrier_name(proto->c));
    } else if (cls == &sw_generic_class || cls == &sw_block_device_carrier_class) {
        st = builtin_store(te, proto->c, zero, &c, err);
    } else if (cls == &sw_cpu_class) {
        st = sw_cpu_new(te->geo.tile_size, te->dtype, zero ? 0 : SW_CARRIER_EMPTY, &c, err);
    } else {
        st = sw_file_backed_new(NULL, te->dtype, 0, &c, err);
        if (st == SW_OK) {
            pthread_mutex_lock(&c->lock);
            st = c->ops->allocate(c->impl, te->geo.tile_size, err);
            pthread_mutex_unlock(&c->lock);
            if (st != SW_OK) {
                sw_carrier_release(c, NULL);
                sw_carrier_unref(c);
            }
        }
    }
    if (st != SW_OK)
        return st;
    describe(c, out);
    if (te->role_bound[secondary ? 1 : 0])
        unaddress(te, out);
    return SW_OK;
}

static void drop_store(sw_tiled_evictable *te, te_store *s)
{
    if (s->c && te->hooks.discard && te_store_bound(s))
        te->hooks.discard(s->c, te->hooks.user); /* no lock held: callers drop unlocked */
    if (s->c) {
        sw_carrier_release(s->c, NULL);
        sw_carrier_unref(s->c);
    }
    s->c = NULL;
    s->host = NULL;
    s->fd = -1;
}

/* A bound store neither the core nor a hook reaches (e.g. Generic memory
 * of another dtype): refused rather than reached wrongly. */
static sw_status no_access(const te_store *s, sw_error *err)
{
    return sw_error_set(err, SW_ENOTSUP, "TiledEvictable: no access to the slots of a %s tile "
                        "store", sw_carrier_name(s->c));
}

/* `count` slots from slot `at` of a bound store: the core's own access
 * for a store of a core class (te_store's `own`), else the read hook. */
static sw_status bound_read(sw_tiled_evictable *te, const te_store *s, int64_t at,
                            int64_t count, void *out, sw_error *err)
{
    if (!s->own && !te->hooks.read)
        return no_access(s, err);
    if (!s->own)
        return te->hooks.read(s->c, at, count, out, te->hooks.user, err);
    if (s->own_host) {
        memcpy(out, s->own_host + (size_t)at * te->eb, (size_t)count * te->eb);
        return SW_OK;
    }
    return sw_carrier_read(s->c, at, count, out, err);
}

/* The same for writes: a tier given at construction is written with the
 * TiledEvictable's owner access; a block device's write is durable on
 * return. */
static sw_status bound_write(sw_tiled_evictable *te, const te_store *s, int64_t at,
                             int64_t count, const void *in, sw_error *err)
{
    if (!s->own && !te->hooks.write)
        return no_access(s, err);
    if (!s->own)
        return te->hooks.write(s->c, at, count, in, te->hooks.user, err);
    if (s->own_host) {
        memcpy(s->own_host + (size_t)at * te->eb, in, (size_t)count * te->eb);
        return SW_OK;
    }
    pthread_mutex_lock(&te->lock);
    uint64_t token = s->c == te->primary.c ? te->ptoken : s->c == te->secondary.c ? te->stoken : 0;
    pthread_mutex_unlock(&te->lock);
    sw_status st = token ? sw_carrier_begin_owner_access(s->c, token, err) : SW_OK;
    if (st == SW_OK)
        st = sw_carrier_write(s->c, at, count, in, err);
    if (token)
        sw_carrier_end_owner_access(s->c, token, NULL);
    sw_block_device *d = sw_block_device_of(s->c);
    if (st == SW_OK && d)
        st = sw_block_device_flush(d, err);
    return st;
}

sw_status sw_te_read_run(sw_tiled_evictable *te, const te_store *s, int64_t at, int64_t count,
                         void *out, sw_error *err)
{
    return bound_read(te, s, at, count, out, err);
}

unsigned char *sw_te_destination_memory(sw_tiled_evictable *te, sw_carrier *dest)
{
    te_store s;
    describe(dest, &s);
    unaddress(te, &s);
    return s.own ? s.own_host : NULL;
}

int sw_te_destination_file(sw_tiled_evictable *te, sw_carrier *dest)
{
    if (sw_carrier_class_of(dest) != &sw_file_backed_class)
        return -1;
    te_store s;
    describe(dest, &s);
    int fd = s.fd;
    unaddress(te, &s);
    return s.own ? fd : -1;
}

sw_status sw_te_write_destination(sw_tiled_evictable *te, sw_carrier *dest, int64_t count,
                                  const void *in, sw_error *err)
{
    te_store s;
    describe(dest, &s);
    unaddress(te, &s);
    return bound_write(te, &s, 0, count, in, err);
}

static sw_status store_read(sw_tiled_evictable *te, const te_store *s, int64_t at, size_t eb,
                            int64_t count, void *out, sw_error *err)
{
    if (te_store_bound(s))
        return bound_read(te, s, at, count, out, err);
    if (s->host) {
        memcpy(out, s->host + (size_t)at * eb, (size_t)count * eb);
        return SW_OK;
    }
    return sw_filestore_pread(s->fd, out, (size_t)count * eb, at * (int64_t)eb, err);
}

/* Gaps up to this many bytes between a tile's runs in a file are read
 * through (into a scratch piece) rather than split into another call. */
#define TE_READ_THROUGH_GAP (64 * 1024)
/* ... but while the runs are in the page cache, only gaps up to this: a
 * gap read through costs its bytes' copy, a split one more call. Measured
 * (first promote of 4 tiles of 4 KiB runs from a cached file, process CPU
 * time) reading through won at 4 and 8 KiB gaps (1.3 vs 2.8, 1.5 vs 2.3
 * ms), broke even at 12 KiB and lost from 16 KiB (3.0 vs 2.1 ms); 4 KiB
 * runs 28 KiB apart (bench/tiers.py (e)) read through took 8x their bytes
 * and twice the CPU time of one call per run (9.5-11 vs 4.1-5.8 ms). From
 * a file not cached, one call per run was 4-5x slower than reading through
 * (each small read waits for the device): those runs are read through. */
#define TE_CACHED_SPLIT_GAP (8 * 1024)

/* The gap in bytes after run i, 0 after the last. */
static size_t run_gap(const sw_tile_run *runs, int64_t n, int64_t i, size_t eb)
{
    return i + 1 < n ? (size_t)(runs[i + 1].slot - runs[i].slot - runs[i].count) * eb : 0;
}

/* Reads runs from the page cache only (RWF_NOWAIT), one call per group of
 * runs at most TE_CACHED_SPLIT_GAP apart, until a group is not all cached
 * (or the call is not supported): the runs read, or -1 with `err` set on
 * an injected fault (each call is one "pread", as the plain reads). */
static int64_t read_cached_runs(int fd, const sw_tile_run *runs, int64_t n, size_t eb,
                                unsigned char *dst, struct iovec *iov, unsigned char *scratch,
                                sw_error *err)
{
#ifdef RWF_NOWAIT
    int64_t first = 0, k = 0;
    size_t want = 0;
    for (int64_t i = 0; i < n; i++) {
        iov[k++] = (struct iovec){.iov_base = dst + (size_t)runs[i].within * eb,
                                  .iov_len = (size_t)runs[i].count * eb};
        want += (size_t)runs[i].count * eb;
        size_t gap = run_gap(runs, n, i, eb);
        if (i + 1 < n && gap <= TE_CACHED_SPLIT_GAP && k + 2 <= IOV_MAX) {
            if (gap)
                iov[k++] = (struct iovec){.iov_base = scratch, .iov_len = gap};
            want += gap;
            continue;
        }
        if (SW_FAULT_HIT("pread")) {
            sw_error_set_errno(err, SW_EIO, EIO, "reading the FileBacked file failed: "
                               "injected fault");
            return -1;
        }
        ssize_t r;
        do
            r = preadv2(fd, iov, (int)k, (off_t)(runs[first].slot * (int64_t)eb), RWF_NOWAIT);
        while (r < 0 && errno == EINTR);
        /* Not cached (or an error the plain read reports); tests make a
         * cached group read as not cached. */
        if (r < 0 || (size_t)r != want || SW_FAULT_HIT("tile_read_uncached"))
            return first;
        first = i + 1;
        k = 0;
        want = 0;
    }
    return n;
#else
    (void)fd, (void)runs, (void)n, (void)eb, (void)dst, (void)iov, (void)scratch, (void)err;
    return 0;
#endif
}

/* The runs of a tile kept in place in a full file (slots increasing) into
 * the tile-sized host buffer `dst` (within-tile order): runs the page
 * cache holds one call per group (read_cached_runs), the rest one preadv
 * per gap of at most TE_READ_THROUGH_GAP, the file's bytes between runs
 * landing in a scratch piece. */
static sw_status read_runs(int fd, const sw_tile_run *runs, int64_t n, size_t eb,
                           unsigned char *dst, sw_error *err)
{
    if (n == 1)
        return sw_filestore_pread(fd, dst + (size_t)runs[0].within * eb,
                                  (size_t)runs[0].count * eb, runs[0].slot * (int64_t)eb, err);
    size_t widest = 0, widest_any = 0;
    for (int64_t i = 0; i + 1 < n; i++) {
        size_t gap = run_gap(runs, n, i, eb);
        if (gap <= TE_READ_THROUGH_GAP && gap > widest)
            widest = gap;
        if (gap > widest_any)
            widest_any = gap;
    }
    struct iovec *iov = sw_malloc((size_t)(2 * n) * sizeof *iov);
    unsigned char *scratch = widest ? sw_malloc(widest) : NULL;
    if (!iov || (widest && !scratch)) {
        sw_free(iov);
        sw_free(scratch);
        return sw_error_set(err, SW_ENOMEM, "TiledEvictable: out of memory reading a tile");
    }
    sw_status st = SW_OK;
    /* Only where some gap is worth a call of its own. */
    int64_t first = widest_any > TE_CACHED_SPLIT_GAP
                        ? read_cached_runs(fd, runs, n, eb, dst, iov, scratch, err)
                        : 0; /* the run the current call starts at */
    if (first < 0)
        st = err ? err->code : SW_EIO;
    int64_t k = 0;
    for (int64_t i = first; i < n && st == SW_OK; i++) {
        iov[k++] = (struct iovec){.iov_base = dst + (size_t)runs[i].within * eb,
                                  .iov_len = (size_t)runs[i].count * eb};
        size_t gap = run_gap(runs, n, i, eb);
        if (i + 1 < n && gap <= TE_READ_THROUGH_GAP) {
            if (gap)
                iov[k++] = (struct iovec){.iov_base = scratch, .iov_len = gap};
            continue;
        }
        st = sw_filestore_preadv(fd, iov, k, runs[first].slot * (int64_t)eb, err);
        first = i + 1;
        k = 0;
    }
    sw_free(iov);
    sw_free(scratch);
    return st;
}

/* A copy that involves a bound store: the tile's runs into a host buffer
 * (within-tile order), then the buffer into the tile-sized `dst`. */
static sw_status copy_bounce(sw_tiled_evictable *te, const te_store *src, const sw_tile_run *runs,
                             int64_t n, const te_store *dst, sw_error *err)
{
    size_t eb = te->eb, bytes = (size_t)te->geo.tile_size * eb;
    unsigned char *buf = dst->host ? dst->host : sw_malloc(bytes ? bytes : 1);
    if (!buf)
        return sw_error_set(err, SW_ENOMEM, "TiledEvictable: out of memory copying a tile");
    sw_status st = SW_OK;
    if (src->fd >= 0)
        st = read_runs(src->fd, runs, n, eb, buf, err);
    for (int64_t i = 0; src->fd < 0 && st == SW_OK && i < n; i++)
        st = store_read(te, src, runs[i].slot, eb, runs[i].count, buf + (size_t)runs[i].within * eb,
                        err);
    if (st == SW_OK && dst->fd >= 0)
        st = sw_filestore_pwrite(dst->fd, buf, bytes, 0, err);
    else if (st == SW_OK && te_store_bound(dst))
        st = bound_write(te, dst, 0, te->geo.tile_size, buf, err);
    if (buf != dst->host)
        sw_free(buf);
    return st;
}

sw_status sw_te_copy_tile(sw_tiled_evictable *te, int64_t t, const te_store *src, int full,
                          const te_store *dst, sw_error *err)
{
    if (SW_FAULT_HIT("tile_copy"))
        return sw_error_set_errno(err, SW_EIO, EIO, "TiledEvictable: injected fault: tile copy "
                                  "failed");
    SW_FAULT_PAUSE("tile_copy_pause"); /* tests: stop while the tile is pending */
    if (!src)
        return SW_OK; /* implicit: the fresh storage is already zeros */
    const sw_tile_geometry *g = &te->geo;
    size_t eb = te->eb;
    sw_tile_run one = {.slot = 0, .within = 0, .count = g->tile_size}, *runs = &one;
    int64_t n = 1;
    if (full) {
        runs = sw_malloc((size_t)(g->tile_size / g->tile[0]) * sizeof *runs);
        if (!runs)
            return sw_error_set(err, SW_ENOMEM, "TiledEvictable: out of memory copying a tile");
        n = sw_tiles_runs(g, t, runs);
    }
    sw_status st = SW_OK;
    if (te_store_bound(src) || te_store_bound(dst)) {
        st = copy_bounce(te, src, runs, n, dst, err);
    } else if (src->host && dst->host) {
        for (int64_t i = 0; i < n; i++)
            memcpy(dst->host + (size_t)runs[i].within * eb, src->host + (size_t)runs[i].slot * eb,
                   (size_t)runs[i].count * eb);
    } else if (src->host && dst->fd >= 0) {
        /* Every run lands back to back from the file's start (within-tile
         * order): one gathered write. */
        struct iovec *iov = n == 1 ? NULL : sw_malloc((size_t)n * sizeof *iov);
        struct iovec single;
        if (n > 1 && !iov) {
            st = sw_error_set(err, SW_ENOMEM, "TiledEvictable: out of memory copying a tile");
        } else {
            struct iovec *v = n == 1 ? &single : iov;
            for (int64_t i = 0; i < n; i++)
                v[i] = (struct iovec){.iov_base = src->host + (size_t)runs[i].slot * eb,
                                      .iov_len = (size_t)runs[i].count * eb};
            st = sw_filestore_pwritev(dst->fd, v, n, 0, err);
        }
        sw_free(iov);
    } else if (src->fd >= 0 && dst->host) {
        st = read_runs(src->fd, runs, n, eb, dst->host, err);
    } else {
        st = sw_error_set(err, SW_ENOTSUP, "TiledEvictable: no copy between these tile stores");
    }
    if (runs != &one)
        sw_free(runs);
    return st;
}

/* ---- construction ----------------------------------------------------------- */

static int tier_supported(sw_carrier *c, int secondary)
{
    const sw_carrier_class *k = sw_carrier_class_of(c);
    return k == &sw_cpu_class || (secondary && k == &sw_file_backed_class);
}

static int core_tier(sw_carrier *c)
{
    return !sw_carrier_is_state_only(c) && core_class(sw_carrier_class_of(c));
}

static sw_status check_tier_idle(sw_carrier *c, const char *role, sw_error *err)
{
    if (sw_carrier_is_pending(c))
        return sw_error_set(err, SW_ESTATE,
                            "TiledEvictable: the %s carrier takes part in a pending move; wait "
                            "for the move first",
                            role);
    return SW_OK;
}

static sw_status check_tier_fit(sw_carrier *c, const char *role, const sw_tile_geometry *g,
                                const sw_te_tier_hooks *hooks, int *full, sw_error *err)
{
    int64_t size = sw_carrier_size(c);
    if (hooks && sw_carrier_is_state_only(c)) {
        sw_status st = hooks->size(c, hooks->user, &size, err);
        if (st != SW_OK)
            return st;
    }
    if (size != 0 && size != g->size)
        return sw_error_set(err, SW_EINVAL,
                            "TiledEvictable: the %s carrier has %lld slots; it must be empty (0) "
                            "or hold the whole logical size (%lld)",
                            role, (long long)size, (long long)g->size);
    *full = size == g->size;
    return SW_OK;
}

/* A tier only a binding reaches: neither host memory nor a file. */
static int tier_bound(sw_carrier *c)
{
    te_store s;
    describe(c, &s);
    return te_store_bound(&s);
}

/* Check 2 with binding tiers: a bound tier (a STATE_ONLY class, a
 * BlockDeviceCarrier: no direct storage) needs the slot hooks, a
 * STATE_ONLY one the size hook too; any other keeps the core's classes. */
static sw_status check_hooked_tier(sw_carrier *c, const char *role, const sw_te_tier_hooks *h,
                                   sw_error *err)
{
    if (sw_carrier_is_state_only(c) && !h->size)
        return sw_error_set(err, SW_EINVAL, "TiledEvictable: the %s tier keeps its slots in "
                            "the binding, which must give a size hook", role);
    if (!tier_bound(c) && tier_supported(c, role[0] == 's'))
        return SW_OK; /* the core reaches it, as without hooks */
    /* Bound, or a class the core does not keep in this role (Generic memory,
     * a FileBacked primary): the binding reaches it. */
    if (!h->store || !h->read || !h->write)
        return sw_error_set(err, SW_EINVAL, "TiledEvictable: the %s tier (%s) is reached only "
                            "through the binding, which must give store, read and write hooks",
                            role, sw_carrier_name(c));
    return SW_OK;
}

static sw_status make(sw_carrier *primary, sw_carrier *secondary, int32_t rank,
                      const int64_t *grid, const int64_t *tile, const sw_te_tier_hooks *hooks,
                      const unsigned char *implicit, sw_tiled_evictable **out, sw_error *err)
{
    if (!out)
        return sw_error_set(err, SW_EINVAL, "TiledEvictable: out must not be NULL");
    if (!primary || !secondary)
        return sw_error_set(err, SW_ETYPE, "TiledEvictable: the %s carrier must not be NULL",
                            primary ? "secondary" : "primary");
    if (hooks) {
        sw_status hs;
        if ((hs = check_hooked_tier(primary, "primary", hooks, err)) != SW_OK ||
            (hs = check_hooked_tier(secondary, "secondary", hooks, err)) != SW_OK)
            return hs;
    } else if (!core_tier(primary) || !core_tier(secondary))
        return sw_error_set(err, SW_ENOTSUP,
                            "TiledEvictable: each tier must be a CPU, Generic, FileBacked or "
                            "BlockDeviceCarrier carrier, not %s and %s",
                            sw_carrier_name(primary), sw_carrier_name(secondary));
    sw_status st;
    if ((st = sw_carrier_check_tier_pair(primary, secondary, err)) != SW_OK ||
        (st = check_tier_idle(primary, "primary", err)) != SW_OK ||
        (st = check_tier_idle(secondary, "secondary", err)) != SW_OK)
        return st;
    int state_only = sw_carrier_is_state_only(primary) || sw_carrier_is_state_only(secondary);
    if (!(hooks && state_only) && sw_carrier_dtype(primary) != sw_carrier_dtype(secondary))
        return sw_error_set(err, SW_ETYPE, "TiledEvictable: the tiers hold different dtypes (%s "
                            "and %s)",
                            sw_dtype_info_of(sw_carrier_dtype(primary))->name,
                            sw_dtype_info_of(sw_carrier_dtype(secondary))->name);
    if (!grid || !tile)
        return sw_error_set(err, SW_EINVAL, "TiledEvictable: grid and tile must not be NULL");
    sw_tile_geometry g;
    if ((st = sw_tiles_geometry_init(&g, rank, grid, tile, err)) != SW_OK)
        return st;
    int pfull = 0, sfull = 0;
    if ((st = check_tier_fit(primary, "primary", &g, hooks, &pfull, err)) != SW_OK ||
        (st = check_tier_fit(secondary, "secondary", &g, hooks, &sfull, err)) != SW_OK)
        return st;

    sw_tiled_evictable *te = sw_calloc(1, sizeof *te);
    te_tile *tiles = sw_calloc((size_t)g.ntiles, sizeof *tiles);
    if (!te || !tiles) {
        sw_free(te);
        sw_free(tiles);
        return sw_error_set(err, SW_ENOMEM, "TiledEvictable: out of memory for %lld tiles",
                            (long long)g.ntiles);
    }
    if (pthread_mutex_init(&te->lock, NULL) != 0) {
        sw_free(te);
        sw_free(tiles);
        return sw_error_set(err, SW_ENOMEM, "TiledEvictable: cannot create its mutex");
    }
    te->geo = g;
    te->dtype = hooks && state_only ? hooks->dtype : sw_carrier_dtype(primary);
    if (hooks) {
        te->hooked = 1;
        te->hooks = *hooks;
    } else if (!tier_supported(primary, 0) || !tier_supported(secondary, 1)) {
        /* Bound tiers of the core's own classes: the bound-store machinery
         * (reads without the lock, kept stores) with no binding hook. */
        te->hooked = 1;
        te->core_only = 1;
        te->hooks.core_classes = 1;
    }
    te->eb = sw_dtype_slot_bytes(te->dtype);
    te->captured_mutable = sw_carrier_is_mutable(primary);
    if ((st = sw_carrier_claim(primary, &te->ptoken, err)) != SW_OK ||
        (st = sw_carrier_claim(secondary, &te->stoken, err)) != SW_OK) {
        if (te->ptoken)
            sw_carrier_relinquish(primary, te->ptoken, NULL);
        pthread_mutex_destroy(&te->lock);
        sw_free(tiles);
        sw_free(te);
        return st;
    }
    describe(sw_carrier_ref(primary), &te->primary);
    describe(sw_carrier_ref(secondary), &te->secondary);
    if (te->hooked) {
        te->role_bound[0] = !tier_supported(primary, 0);
        te->role_bound[1] = !tier_supported(secondary, 1);
        if (te->role_bound[0])
            unaddress(te, &te->primary);
        if (te->role_bound[1])
            unaddress(te, &te->secondary);
    }
    atomic_init(&te->refs, 1);
    const te_store *store = pfull ? &te->primary : sfull ? &te->secondary : NULL;
    int loc = pfull ? SW_TE_PRIMARY : sfull ? SW_TE_SECONDARY : SW_TE_INVALID;
    for (int64_t t = 0; t < g.ntiles; t++) {
        int zero = implicit && implicit[t];
        tiles[t].loc = (uint8_t)(zero ? SW_TE_IMPLICIT : loc);
        tiles[t].full = store != NULL && !zero;
        if (tiles[t].full)
            tiles[t].store = *store;
        else
            tiles[t].store.fd = -1;
    }
    te->tiles = tiles;
    *out = te;
    return SW_OK;
}

sw_status sw_tiled_evictable_new(sw_carrier *primary, sw_carrier *secondary, int32_t rank,
                                 const int64_t *grid, const int64_t *tile,
                                 sw_tiled_evictable **out, sw_error *err)
{
    return make(primary, secondary, rank, grid, tile, NULL, NULL, out, err);
}

sw_status sw_tiled_evictable_new_bound(sw_carrier *primary, sw_carrier *secondary, int32_t rank,
                                       const int64_t *grid, const int64_t *tile,
                                       const sw_te_tier_hooks *hooks, sw_tiled_evictable **out,
                                       sw_error *err)
{
    if (!hooks)
        return sw_error_set(err, SW_EINVAL, "TiledEvictable: binding tiers need their hooks");
    return make(primary, secondary, rank, grid, tile, hooks, NULL, out, err);
}

sw_status sw_tiled_evictable_new_placed(sw_carrier *primary, sw_carrier *secondary, int32_t rank,
                                        const int64_t *grid, const int64_t *tile,
                                        const sw_te_tier_hooks *hooks,
                                        const unsigned char *implicit, sw_tiled_evictable **out,
                                        sw_error *err)
{
    return make(primary, secondary, rank, grid, tile, hooks, implicit, out, err);
}

sw_status sw_tiled_evictable_tier_token(sw_tiled_evictable *te, int secondary, uint64_t *token,
                                        sw_error *err)
{
    if (!te || !token)
        return sw_error_set(err, SW_ETYPE, "TiledEvictable: arguments must not be NULL");
    pthread_mutex_lock(&te->lock);
    *token = secondary ? te->stoken : te->ptoken;
    pthread_mutex_unlock(&te->lock);
    return SW_OK;
}

/* ---- references and introspection ---------------------------------------------- */

sw_tiled_evictable *sw_tiled_evictable_ref(sw_tiled_evictable *te)
{
    if (te)
        atomic_fetch_add(&te->refs, 1);
    return te;
}

void sw_tiled_evictable_unref(sw_tiled_evictable *te)
{
    if (!te || atomic_fetch_sub(&te->refs, 1) != 1)
        return;
    /* Last reference: nothing else can reach it, so no request runs. Not
     * released: only relinquish the tiers (TE-14); private tile storage is
     * reachable from nowhere else and goes. */
    if (te->tiles) {
        for (int64_t t = 0; t < te->geo.ntiles; t++)
            if (!te->tiles[t].full)
                drop_store(te, &te->tiles[t].store);
        sw_free(te->tiles);
    }
    drop_graves(te, te->grave);
    if (te->ptoken)
        sw_carrier_relinquish(te->primary.c, te->ptoken, NULL);
    if (te->stoken)
        sw_carrier_relinquish(te->secondary.c, te->stoken, NULL);
    sw_carrier_unref(te->primary.c);
    sw_carrier_unref(te->secondary.c);
    pthread_mutex_destroy(&te->lock);
    sw_free(te);
}

const sw_tile_geometry *sw_tiled_evictable_geometry(sw_tiled_evictable *te) { return &te->geo; }
sw_dtype sw_tiled_evictable_dtype(sw_tiled_evictable *te) { return te->dtype; }
sw_carrier *sw_tiled_evictable_primary(sw_tiled_evictable *te) { return te->primary.c; }
sw_carrier *sw_tiled_evictable_secondary(sw_tiled_evictable *te) { return te->secondary.c; }

#define LOCKED_GETTER(type, name, expr)          \
    type name(sw_tiled_evictable *te)            \
    {                                            \
        pthread_mutex_lock(&te->lock);           \
        type v = (expr);                         \
        pthread_mutex_unlock(&te->lock);         \
        return v;                                \
    }

LOCKED_GETTER(int64_t, sw_tiled_evictable_size, te->released ? 0 : te->geo.size)
LOCKED_GETTER(uint64_t, sw_tiled_evictable_version, te->version)
LOCKED_GETTER(int, sw_tiled_evictable_is_released, te->released)
LOCKED_GETTER(int, sw_tiled_evictable_is_mutable, !te->released && te->captured_mutable)

static sw_status refuse_released_locked(sw_tiled_evictable *te, const char *what, sw_error *err)
{
    if (!te->released)
        return SW_OK;
    return sw_error_set(err, SW_ESTATE, "cannot %s a released TiledEvictable", what);
}

/* The linear index of a coordinate row, or -1 (err filled) outside the grid. */
static int64_t coord_index(const sw_tile_geometry *g, const int64_t *coord, sw_error *err)
{
    for (int32_t k = 0; k < g->rank; k++)
        if (coord[k] < 0 || coord[k] >= g->grid[k]) {
            sw_error_set(err, SW_EINVAL,
                         "TiledEvictable: tile coordinate %lld is outside axis %d of the tile "
                         "grid (size %lld)",
                         (long long)coord[k], (int)k, (long long)g->grid[k]);
            return -1;
        }
    return sw_tiles_tile_index(g, coord);
}

static void tile_state_locked(const sw_tiled_evictable *te, int64_t t, sw_te_tile_state *out)
{
    const te_tile *r = &te->tiles[t];
    out->location = (sw_te_location)r->loc;
    out->valid = r->loc != SW_TE_INVALID;
    out->dirty = r->loc == SW_TE_PRIMARY && r->dirty;
    out->pending = r->pending > 0;
    out->pinned = r->pins > 0;
    out->in_place = r->full;
}

sw_status sw_tiled_evictable_tile_state(sw_tiled_evictable *te, const int64_t *coord,
                                        sw_te_tile_state *out, sw_error *err)
{
    if (!te || !coord || !out)
        return sw_error_set(err, SW_ETYPE, "TiledEvictable: arguments must not be NULL");
    int64_t t = coord_index(&te->geo, coord, err);
    if (t < 0)
        return SW_EINVAL;
    pthread_mutex_lock(&te->lock);
    sw_status st = refuse_released_locked(te, "inspect the tiles of", err);
    if (st == SW_OK)
        tile_state_locked(te, t, out);
    pthread_mutex_unlock(&te->lock);
    return st;
}

static int keeps(const te_tile *r, sw_te_filter f)
{
    switch (f) {
    case SW_TE_TILES_PRIMARY: return r->loc == SW_TE_PRIMARY;
    case SW_TE_TILES_SECONDARY: return r->loc == SW_TE_SECONDARY;
    case SW_TE_TILES_IMPLICIT: return r->loc == SW_TE_IMPLICIT;
    case SW_TE_TILES_INVALID: return r->loc == SW_TE_INVALID;
    case SW_TE_TILES_VALID: return r->loc != SW_TE_INVALID;
    case SW_TE_TILES_DIRTY: return r->loc == SW_TE_PRIMARY && r->dirty;
    }
    return 0;
}

sw_status sw_tiled_evictable_tiles(sw_tiled_evictable *te, sw_te_filter which, int64_t *coords,
                                   int64_t capacity, int64_t *count, sw_error *err)
{
    if (!te || !count || (capacity > 0 && !coords))
        return sw_error_set(err, SW_ETYPE, "TiledEvictable: arguments must not be NULL");
    if ((int)which < SW_TE_TILES_PRIMARY || which > SW_TE_TILES_DIRTY)
        return sw_error_set(err, SW_EINVAL, "TiledEvictable: unknown tile filter %d", (int)which);
    pthread_mutex_lock(&te->lock);
    sw_status st = refuse_released_locked(te, "inspect the tiles of", err);
    int64_t n = 0;
    for (int64_t t = 0; st == SW_OK && t < te->geo.ntiles; t++)
        if (keeps(&te->tiles[t], which)) {
            if (n < capacity)
                sw_tiles_tile_coord(&te->geo, t, coords + n * te->geo.rank);
            n++;
        }
    pthread_mutex_unlock(&te->lock);
    if (st == SW_OK)
        *count = n;
    return st;
}

sw_status sw_tiled_evictable_tile_counts(sw_tiled_evictable *te, int64_t counts[4],
                                         int64_t *pending, sw_error *err)
{
    if (!te || !counts)
        return sw_error_set(err, SW_ETYPE, "TiledEvictable: arguments must not be NULL");
    int64_t n[4] = {0, 0, 0, 0}, moving = 0;
    pthread_mutex_lock(&te->lock);
    sw_status st = refuse_released_locked(te, "inspect the tiles of", err);
    for (int64_t t = 0; st == SW_OK && t < te->geo.ntiles; t++) {
        n[te->tiles[t].loc & 3]++;
        moving += te->tiles[t].pending != 0;
    }
    pthread_mutex_unlock(&te->lock);
    if (st != SW_OK)
        return st;
    memcpy(counts, n, sizeof n);
    if (pending)
        *pending = moving;
    return SW_OK;
}

/* ---- residency requests (TE-7) ------------------------------------------------- */

static sw_status refuse_busy_locked(sw_tiled_evictable *te, int64_t t, const char *what,
                                    sw_error *err)
{
    const te_tile *r = &te->tiles[t];
    if (!r->pending && !r->pins)
        return SW_OK;
    int64_t c[SW_TILES_MAX_RANK];
    sw_tiles_tile_coord(&te->geo, t, c);
    return sw_error_set(err, SW_ESTATE,
                        "cannot %s tile %lld (first coordinate) while it is %s; wait() for that "
                        "work first",
                        what, (long long)c[0],
                        r->pending ? "pending in a residency request" : "pinned by a projection");
}

static int needs_copy(const te_tile *r, int evict)
{
    return evict ? r->loc == SW_TE_PRIMARY
                 : (r->loc == SW_TE_SECONDARY || r->loc == SW_TE_IMPLICIT);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Linear indices of `n` coordinate rows, checked: in the grid, no repeats.
 * sw_malloc'd (NULL with err filled). */
static int64_t *checked_indices(sw_tiled_evictable *te, const int64_t *coords, int64_t n,
                                sw_status *st, sw_error *err)
{
    int64_t *idx = sw_malloc((size_t)(2 * n + 1) * sizeof *idx);
    if (!idx) {
        *st = sw_error_set(err, SW_ENOMEM, "TiledEvictable: out of memory for %lld tiles",
                           (long long)n);
        return NULL;
    }
    int64_t *sorted = idx + n;
    for (int64_t i = 0; i < n; i++) {
        idx[i] = sorted[i] = coord_index(&te->geo, coords + i * te->geo.rank, err);
        if (idx[i] < 0) {
            *st = SW_EINVAL;
            sw_free(idx);
            return NULL;
        }
    }
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_i64);
    for (int64_t i = 1; i < n; i++)
        if (sorted[i] == sorted[i - 1]) {
            int64_t c[SW_TILES_MAX_RANK];
            sw_tiles_tile_coord(&te->geo, sorted[i], c);
            *st = sw_error_set(err, SW_EINVAL,
                               "TiledEvictable: a tile (first coordinate %lld) is listed twice",
                               (long long)c[0]);
            sw_free(idx);
            return NULL;
        }
    return idx;
}

/* A residency request's refusals under te->lock, in order: released, then
 * for each tile busy (unless skip_busy) and, for a promote, invalid. `why`
 * (may be NULL) is told which tile refused it (-1: the carrier). */
static sw_status request_refusal_locked(sw_tiled_evictable *te, const int64_t *idx, int64_t n,
                                        int evict, const char *what, int skip_busy,
                                        sw_te_refusal *why, sw_error *err)
{
    sw_status st = refuse_released_locked(te, what, err);
    int64_t i = 0;
    for (; st == SW_OK && i < n; i++) {
        if (!skip_busy &&
            (st = refuse_busy_locked(te, idx[i], evict ? "evict" : "promote", err)) != SW_OK)
            break;
        if (!evict && te->tiles[idx[i]].loc == SW_TE_INVALID) {
            st = sw_error_set(err, SW_ESTATE,
                              "cannot promote an invalid tile: it holds no values");
            break;
        }
    }
    if (why && st != SW_OK) {
        memset(why, 0, sizeof *why);
        why->tile = te->released ? -1 : idx[i];
        if (why->tile >= 0)
            tile_state_locked(te, why->tile, &why->state);
    }
    return st;
}

/* A request's first step, under the lock: refuse it (nothing changed) or
 * mark its tiles pending and note what each moving tile copies. `idx`
 * (checked indices, n of them) is copied. `track` (may be NULL) is told
 * under the same lock that the marks are set (fork handling). */
sw_status sw_te_request_begin(sw_tiled_evictable *te, const int64_t *idx, int64_t n, int evict,
                              const char *what, int skip_busy, te_track *track,
                              te_request **out, sw_error *err)
{
    te_request *q = sw_calloc(1, sizeof *q);
    size_t m = (size_t)n + 1;
    if (q) {
        q->idx = sw_malloc(m * sizeof *q->idx);
        q->staged = sw_calloc(m, sizeof *q->staged);
        q->src = sw_calloc(m, sizeof *q->src);
        q->src_full = sw_calloc(m, 1);
        q->zero = sw_calloc(m, 1);
    }
    if (!q || !q->idx || !q->staged || !q->src || !q->src_full || !q->zero) {
        if (q)
            sw_free(q->idx), sw_free(q->staged), sw_free(q->src), sw_free(q->src_full),
                sw_free(q->zero), sw_free(q);
        return sw_error_set(err, SW_ENOMEM, "TiledEvictable: out of memory for %lld tiles",
                            (long long)n);
    }
    if (pthread_mutex_init(&q->mu, NULL) != 0) {
        sw_free(q->idx), sw_free(q->staged), sw_free(q->src), sw_free(q->src_full),
            sw_free(q->zero), sw_free(q);
        return sw_error_set(err, SW_ENOMEM, "TiledEvictable: cannot create a request's mutex");
    }
    if (pthread_cond_init(&q->cv, NULL) != 0) {
        pthread_mutex_destroy(&q->mu);
        sw_free(q->idx), sw_free(q->staged), sw_free(q->src), sw_free(q->src_full),
            sw_free(q->zero), sw_free(q);
        return sw_error_set(err, SW_ENOMEM, "TiledEvictable: out of memory for %lld tiles",
                            (long long)n);
    }
    q->n = n;
    q->evict = evict;
    q->job.q = q;
    if (te->hooked && !(q->grave = sw_calloc(1, sizeof *q->grave))) {
        sw_te_request_free(q);
        return sw_error_set(err, SW_ENOMEM, "TiledEvictable: out of memory for a request");
    }
    if (n > 0)
        memcpy(q->idx, idx, (size_t)n * sizeof *idx);
    for (int64_t i = 0; i < n; i++)
        q->staged[i].fd = q->src[i].fd = -1;
    pthread_mutex_lock(&te->lock);
    sw_status st = request_refusal_locked(te, idx, n, evict, what, skip_busy, NULL, err);
    if (st == SW_OK) {
        for (int64_t i = 0; i < n; i++) {
            te_tile *r = &te->tiles[idx[i]];
            r->pending++;
            if (!needs_copy(r, evict))
                continue;
            q->copies++;
            q->zero[i] = r->loc == SW_TE_IMPLICIT;
            q->src[i] = r->store;
            q->src_full[i] = r->full;
        }
        te->busy++;
        if (track) {
            track->marked = 1;
            track->request = q;
        }
    }
    pthread_mutex_unlock(&te->lock);
    if (st != SW_OK) {
        sw_te_request_free(q);
        return st;
    }
    *out = q;
    return SW_OK;
}

/* The copies, no lock held (the tiles are pending): fresh storage per
 * moving tile, then its copy (issue), then every copy a hook took reports
 * (await). The outcome goes to q->status / q->err. */
void sw_te_request_stage(sw_tiled_evictable *te, te_request *q)
{
    sw_te_request_issue(te, q);
    sw_te_request_await(q);
}

int sw_te_request_outstanding(te_request *q)
{
    pthread_mutex_lock(&q->mu);
    int left = q->outstanding > 0;
    pthread_mutex_unlock(&q->mu);
    return left;
}

void sw_te_request_await(te_request *q)
{
    pthread_mutex_lock(&q->mu);
    while (q->outstanding > 0)
        pthread_cond_wait(&q->cv, &q->mu);
    if (q->status == SW_OK && q->async_status != SW_OK) {
        q->status = q->async_status;
        q->err = q->async_err;
    }
    pthread_mutex_unlock(&q->mu);
}

/* Whether a tile of `q` is copied between tile-sized stores of the tiers
 * (not held in place by a full tier, not implicit): what the route hook
 * is asked about. q's notes were taken under the lock that marked it. */
static int copies_between_stores(const te_request *q)
{
    for (int64_t i = 0; i < q->n; i++)
        if (q->src[i].c && !q->src_full[i] && !q->zero[i])
            return 1;
    return 0;
}

/* The binding's route hook before any fresh store (no lock held, the
 * tiles pending); a refusal leaves nothing to copy. */
static sw_status ask_route(sw_tiled_evictable *te, te_request *q)
{
    if (!te->hooks.route || q->copies == 0 || !copies_between_stores(q))
        return SW_OK;
    const te_store *from = q->evict ? &te->primary : &te->secondary;
    const te_store *to = q->evict ? &te->secondary : &te->primary;
    sw_status st = te->hooks.route(from->c, to->c, te->hooks.user, &q->err);
    if (st != SW_OK)
        q->copies = 0;
    return st;
}

void sw_te_request_issue(sw_tiled_evictable *te, te_request *q)
{
    sw_error_clear(&q->err);
    sw_status st = ask_route(te, q);
    const te_store *target = q->evict ? &te->secondary : &te->primary;
    for (int64_t i = 0; st == SW_OK && q->copies > 0 && i < q->n; i++) {
        if (!q->src[i].c && !q->zero[i])
            continue; /* not moving */
        te_store fresh;
        st = fresh_store(te, target, q->evict, q->zero[i], &fresh, &q->err);
        if (st != SW_OK)
            break;
        q->staged[i] = fresh;
        if (!q->zero[i] && te->hooks.copy) {
            /* The binding's copy first; it may report later, from anywhere. */
            pthread_mutex_lock(&q->mu);
            q->outstanding++;
            pthread_mutex_unlock(&q->mu);
            sw_error herr;
            sw_error_clear(&herr);
            sw_status hs = te->hooks.copy(&q->job, q->src[i].c, q->src_full[i], fresh.c,
                                          q->idx[i], te->hooks.user, &herr);
            if (hs == SW_OK)
                continue;
            pthread_mutex_lock(&q->mu);
            q->outstanding--;
            pthread_mutex_unlock(&q->mu);
            if (hs != SW_ENOTSUP) {
                st = hs;
                q->err = herr;
                break;
            }
        }
        st = sw_te_copy_tile(te, q->idx[i], q->zero[i] ? NULL : &q->src[i], q->src_full[i],
                             &q->staged[i], &q->err);
    }
    q->status = st; /* sw_te_request_await adds what the hooks report */
}

void sw_te_copy_done(sw_te_copy *job, sw_status status, const sw_error *err)
{
    if (!job)
        return;
    te_request *q = job->q;
    pthread_mutex_lock(&q->mu);
    if (status != SW_OK && q->async_status == SW_OK) {
        q->async_status = status;
        if (err && err->code != SW_OK)
            q->async_err = *err;
        else
            sw_error_set(&q->async_err, status, "TiledEvictable: the binding's tile copy failed");
    }
    q->outstanding--;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu); /* the waiter may free q from here on */
}

/* Commit every record at once (q->status SW_OK) or drop the fresh copies,
 * clear the marks, free `q`. `forked`: in a forked child ending work a
 * parent thread was doing; the staging storage it may have been building
 * is left alone (forgotten, never released: it may be half made). */
/* Under te->lock, the last reader gone: hand the buried stores to the
 * caller, who drops them without the lock. */
static te_grave *unbury_locked(sw_tiled_evictable *te)
{
    te_grave *g = NULL;
    if (!te->readers) {
        g = te->grave;
        te->grave = NULL;
    }
    return g;
}

static void drop_graves(sw_tiled_evictable *te, te_grave *g)
{
    while (g) {
        te_grave *next = g->next;
        for (int64_t i = 0; g->stores && i < g->n; i++)
            drop_store(te, &g->stores[i]);
        sw_free(g->stores);
        sw_free(g);
        g = next;
    }
}

void sw_te_request_finish(sw_tiled_evictable *te, te_request *q, te_track *track, int forked)
{
    int ok = q->status == SW_OK && !forked;
    pthread_mutex_lock(&te->lock);
    for (int64_t i = 0; i < q->n; i++) {
        te_tile *r = &te->tiles[q->idx[i]];
        r->pending--;
        if (!ok || !q->staged[i].c)
            continue;
        te_store old = r->full ? (te_store){NULL, NULL, -1, 0, NULL} : r->store;
        r->store = q->staged[i];
        r->full = 0;
        r->loc = (uint8_t)(q->evict ? SW_TE_SECONDARY : SW_TE_PRIMARY);
        r->dirty = 0;
        q->staged[i] = old; /* released below, without the lock */
    }
    if (ok && te->readers && q->grave) {
        /* A read may still reach the old bound stores: they go with the
         * last reader. */
        q->grave->stores = q->staged;
        q->grave->n = q->n;
        q->grave->next = te->grave;
        te->grave = q->grave;
        q->grave = NULL;
        q->staged = NULL;
    }
    te->busy--;
    if (track) {
        track->marked = 0;
        track->request = NULL;
    }
    pthread_mutex_unlock(&te->lock);
    for (int64_t i = 0; !forked && q->staged && i < q->n; i++)
        drop_store(te, &q->staged[i]);
    /* A forked child leaves the request itself to the parent: a parent
     * thread that was waiting on its condition variable for a binding's
     * copies would make pthread_cond_destroy block here for ever, and a
     * binding may still hold its copy job. */
    if (!forked)
        sw_te_request_free(q);
}

void sw_te_request_free(te_request *q)
{
    if (!q)
        return;
    sw_free(q->idx);
    sw_free(q->staged);
    sw_free(q->src);
    sw_free(q->src_full);
    sw_free(q->zero);
    sw_free(q->grave);
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    sw_free(q);
}

/* One blocking request on the calling thread (tracked for fork). */
static sw_status run_request(sw_tiled_evictable *te, const int64_t *idx, int64_t n, int evict,
                             const char *what, sw_error *err)
{
    te_track track;
    sw_te_track_enter(&track, te);
    te_request *q = NULL;
    sw_status st = sw_te_request_begin(te, idx, n, evict, what, 0, &track, &q, err);
    if (st == SW_OK) {
        sw_te_request_stage(te, q);
        st = q->status;
        if (st != SW_OK && err)
            *err = q->err;
        sw_te_request_finish(te, q, &track, 0);
    }
    sw_te_track_leave(&track);
    return st;
}

sw_status sw_te_residency_indices(sw_tiled_evictable *te, const int64_t *coords, int64_t n,
                                  int evict, int64_t **idx, sw_error *err)
{
    const char *what = evict ? "evict tiles of" : "promote tiles of";
    if (!te)
        return sw_error_set(err, SW_ETYPE, "TiledEvictable must not be NULL");
    if (sw_tiled_evictable_is_released(te))
        return sw_error_set(err, SW_ESTATE, "cannot %s a released TiledEvictable", what);
    if (n < 0 || (n > 0 && !coords))
        return sw_error_set(err, SW_EINVAL, "TiledEvictable: %lld tiles and %s coordinates",
                            (long long)n, coords ? "some" : "no");
    sw_status st = SW_OK;
    *idx = checked_indices(te, coords, n, &st, err);
    return *idx ? SW_OK : st;
}

sw_status sw_tiled_evictable_check_residency(sw_tiled_evictable *te, const int64_t *coords,
                                             int64_t n, int evict, sw_te_refusal *why,
                                             sw_error *err)
{
    if (why)
        why->tile = -1;
    int64_t *idx = NULL;
    sw_status st = sw_te_residency_indices(te, coords, n, evict, &idx, err);
    if (st != SW_OK)
        return st;
    pthread_mutex_lock(&te->lock);
    st = request_refusal_locked(te, idx, n, evict, evict ? "evict tiles of" : "promote tiles of",
                                0, why, err);
    pthread_mutex_unlock(&te->lock);
    sw_free(idx);
    return st;
}

static sw_status residency(sw_tiled_evictable *te, const int64_t *coords, int64_t n, int evict,
                           sw_error *err)
{
    int64_t *idx = NULL;
    sw_status st = sw_te_residency_indices(te, coords, n, evict, &idx, err);
    if (st != SW_OK)
        return st;
    st = run_request(te, idx, n, evict, evict ? "evict tiles of" : "promote tiles of", err);
    sw_free(idx);
    return st;
}

int64_t sw_te_free_tiles(sw_tiled_evictable *te, const int64_t *idx, int64_t n, int64_t *out)
{
    int64_t m = 0;
    pthread_mutex_lock(&te->lock);
    for (int64_t i = 0; !te->released && i < n; i++)
        if (!te->tiles[idx[i]].pending && !te->tiles[idx[i]].pins)
            out[m++] = idx[i];
    pthread_mutex_unlock(&te->lock);
    return m;
}

sw_status sw_te_evict_free_tiles(sw_tiled_evictable *te, const int64_t *idx, int64_t n,
                                 sw_error *err)
{
    int64_t *free_idx = sw_malloc((size_t)(n + 1) * sizeof *free_idx);
    if (!free_idx)
        return sw_error_set(err, SW_ENOMEM, "TiledEvictable: out of memory for %lld tiles",
                            (long long)n);
    int64_t m = sw_te_free_tiles(te, idx, n, free_idx);
    sw_status st = m > 0 ? run_request(te, free_idx, m, 1, "evict tiles of", err) : SW_OK;
    sw_free(free_idx);
    return st;
}

sw_status sw_tiled_evictable_promote(sw_tiled_evictable *te, const int64_t *coords, int64_t n,
                                     sw_error *err)
{
    return residency(te, coords, n, 0, err);
}

sw_status sw_tiled_evictable_evict(sw_tiled_evictable *te, const int64_t *coords, int64_t n,
                                   sw_error *err)
{
    return residency(te, coords, n, 1, err);
}

/* ---- slot access (TE-9) --------------------------------------------------------- */

static sw_status check_slots(sw_tiled_evictable *te, int64_t slot, int64_t count, sw_error *err)
{
    int64_t end;
    if (slot < 0 || count < 0 || __builtin_add_overflow(slot, count, &end) || end > te->geo.size)
        return sw_error_set(err, SW_ERANGE,
                            "TiledEvictable: slots [%lld, %lld + %lld) are out of range for size "
                            "%lld",
                            (long long)slot, (long long)slot, (long long)count,
                            (long long)te->geo.size);
    return SW_OK;
}

static sw_status refuse_invalid_locked(sw_tiled_evictable *te, int64_t t, sw_error *err)
{
    if (te->tiles[t].loc != SW_TE_INVALID)
        return SW_OK;
    int64_t c[SW_TILES_MAX_RANK];
    sw_tiles_tile_coord(&te->geo, t, c);
    return sw_error_set(err, SW_ESTATE,
                        "the tile holding this slot (first coordinate %lld) is invalid: it "
                        "holds no values until the slots are written through a factory",
                        (long long)c[0]);
}

/* A run of slots in a bound store, read or written without the lock. */
typedef struct te_segment {
    te_store store;
    int64_t at, count, i; /* store index, slots, position in the caller's buffer */
} te_segment;

static sw_status read_hooked(sw_tiled_evictable *te, int64_t slot, int64_t count,
                             unsigned char *o, sw_error *err);

/* Where slot `slot` lies (its tile `t`, its index `w` there) and how many
 * slots from it, at most `left`, run contiguous along axis 0 inside that
 * tile's storage (read or written at once). */
static int64_t locate_run(const sw_tiled_evictable *te, int64_t slot, int64_t left, int64_t *t,
                          int64_t *w)
{
    sw_tiles_locate(&te->geo, slot, t, w);
    int64_t run = te->geo.tile[0] - *w % te->geo.tile[0];
    return run < left ? run : left;
}

/* A read's refusals, in order, under te->lock: released, slots out of
 * range, a tile whose storage is invalid. */
static sw_status check_read_locked(sw_tiled_evictable *te, int64_t slot, int64_t count,
                                   sw_error *err)
{
    sw_status st = refuse_released_locked(te, "read", err);
    if (st == SW_OK)
        st = check_slots(te, slot, count, err);
    for (int64_t i = 0; st == SW_OK && i < count; i++) {
        int64_t t, w;
        sw_tiles_locate(&te->geo, slot + i, &t, &w);
        st = refuse_invalid_locked(te, t, err);
    }
    return st;
}

sw_status sw_tiled_evictable_read(sw_tiled_evictable *te, int64_t slot, int64_t count, void *out,
                                  sw_error *err)
{
    if (!te || (!out && count > 0))
        return sw_error_set(err, SW_ETYPE, "TiledEvictable: arguments must not be NULL");
    if (te->hooked)
        return read_hooked(te, slot, count, out, err);
    pthread_mutex_lock(&te->lock);
    sw_status st = check_read_locked(te, slot, count, err);
    unsigned char *o = out;
    for (int64_t i = 0; st == SW_OK && i < count; i++) {
        int64_t t, w;
        int64_t run = locate_run(te, slot + i, count - i, &t, &w);
        const te_tile *r = &te->tiles[t];
        if (r->loc == SW_TE_IMPLICIT)
            memset(o + (size_t)i * te->eb, 0, (size_t)run * te->eb);
        else
            st = store_read(te, &r->store, te_store_index(te, r, t, w), te->eb, run,
                            o + (size_t)i * te->eb, err);
        i += run - 1;
    }
    pthread_mutex_unlock(&te->lock);
    return st;
}

/* Reads of a TiledEvictable with binding tiers: host, file and implicit
 * runs under the lock as usual; runs in bound stores afterwards, without
 * it, the carrier busy and its replaced stores kept until the last such
 * read is over. */
static sw_status read_hooked(sw_tiled_evictable *te, int64_t slot, int64_t count,
                             unsigned char *o, sw_error *err)
{
    te_segment *seg = count > 0 ? sw_malloc((size_t)count * sizeof *seg) : NULL;
    if (count > 0 && !seg)
        return sw_error_set(err, SW_ENOMEM, "TiledEvictable: out of memory reading slots");
    int64_t nseg = 0;
    pthread_mutex_lock(&te->lock);
    sw_status st = check_read_locked(te, slot, count, err);
    for (int64_t i = 0; st == SW_OK && i < count; i++) {
        int64_t t, w;
        int64_t run = locate_run(te, slot + i, count - i, &t, &w);
        const te_tile *r = &te->tiles[t];
        if (r->loc == SW_TE_IMPLICIT)
            memset(o + (size_t)i * te->eb, 0, (size_t)run * te->eb);
        else if (te_store_bound(&r->store))
            seg[nseg++] = (te_segment){r->store, te_store_index(te, r, t, w), run, i};
        else
            st = store_read(te, &r->store, te_store_index(te, r, t, w), te->eb, run,
                            o + (size_t)i * te->eb, err);
        i += run - 1;
    }
    if (st == SW_OK && nseg > 0) {
        te->readers++;
        te->busy++;
    } else {
        nseg = 0;
    }
    pthread_mutex_unlock(&te->lock);
    for (int64_t k = 0; k < nseg && st == SW_OK; k++)
        st = bound_read(te, &seg[k].store, seg[k].at, seg[k].count,
                        o + (size_t)seg[k].i * te->eb, err);
    te_grave *g = NULL;
    if (nseg > 0) {
        pthread_mutex_lock(&te->lock);
        te->readers--;
        te->busy--;
        g = unbury_locked(te);
        pthread_mutex_unlock(&te->lock);
    }
    drop_graves(te, g);
    sw_free(seg);
    return st;
}

static int is_zero(const unsigned char *v, size_t eb)
{
    for (size_t b = 0; b < eb; b++)
        if (v[b])
            return 0;
    return 1;
}

/* Under the lock: the write's refusals (released, mutability, range, busy
 * and invalid tiles); the tiles that must be promoted first go to
 * need[0..*m) (distinct, `mark` is a per-tile scratch array). */
static sw_status write_plan_locked(sw_tiled_evictable *te, int64_t slot, int64_t count,
                                   const unsigned char *in, uint8_t *mark, int64_t *need,
                                   int64_t *m, sw_error *err)
{
    sw_status st = refuse_released_locked(te, "write to", err);
    if (st == SW_OK && !te->captured_mutable)
        st = sw_error_set(err, SW_ESTATE, "TiledEvictable: cannot write to an immutable carrier");
    *m = 0;
    for (int64_t i = 0; st == SW_OK && i < count; i++) {
        int64_t t, w;
        sw_tiles_locate(&te->geo, slot + i, &t, &w);
        const te_tile *r = &te->tiles[t];
        if ((st = refuse_busy_locked(te, t, "write to", err)) != SW_OK ||
            (st = refuse_invalid_locked(te, t, err)) != SW_OK)
            break;
        int promote = r->loc == SW_TE_SECONDARY ||
                      (r->loc == SW_TE_IMPLICIT && !is_zero(in + (size_t)i * te->eb, te->eb));
        if (promote && !mark[t]) {
            mark[t] = 1;
            need[(*m)++] = t;
        }
    }
    return st;
}

/* The write itself for a TiledEvictable with binding tiers: under the
 * lock, the checks again and every written tile marked pending; without
 * it, the runs in bound stores (each one's old values read first, written
 * back when a later run fails); under the lock, the host runs, the dirty
 * marks and the version. */
static sw_status write_hooked(sw_tiled_evictable *te, int64_t slot, int64_t count,
                              const unsigned char *v, uint8_t *mark, int64_t *need,
                              sw_error *err)
{
    size_t eb = te->eb;
    te_segment *seg = sw_malloc((size_t)(count + 1) * sizeof *seg);
    unsigned char *undo = sw_malloc((size_t)count * eb + 1);
    if (!seg || !undo) {
        sw_free(seg);
        sw_free(undo);
        return sw_error_set(err, SW_ENOMEM, "TiledEvictable: out of memory writing slots");
    }
    int64_t nseg = 0, nmarked = 0, again = 0;
    pthread_mutex_lock(&te->lock);
    sw_status st = write_plan_locked(te, slot, count, v, mark, need, &again, err);
    if (st == SW_OK && again > 0)
        st = sw_error_set(err, SW_ESTATE, "TiledEvictable: a tile changed while it was being "
                          "promoted for this write; try again");
    for (int64_t i = 0; st == SW_OK && i < count; i++) {
        int64_t t, w;
        int64_t run = locate_run(te, slot + i, count - i, &t, &w);
        te_tile *r = &te->tiles[t];
        if (r->loc != SW_TE_IMPLICIT) {
            if (!mark[t]) {
                mark[t] = 1;
                need[nmarked++] = t;
                r->pending++;
            }
            if (te_store_bound(&r->store))
                seg[nseg++] = (te_segment){r->store, te_store_index(te, r, t, w), run, i};
        }
        i += run - 1;
    }
    if (st == SW_OK)
        te->busy++;
    pthread_mutex_unlock(&te->lock);
    if (st != SW_OK) {
        sw_free(seg);
        sw_free(undo);
        return st;
    }
    int64_t saved = 0; /* runs whose old values are in `undo` (maybe written) */
    for (int64_t k = 0; k < nseg && st == SW_OK; k++) {
        st = bound_read(te, &seg[k].store, seg[k].at, seg[k].count,
                        undo + (size_t)seg[k].i * eb, err);
        if (st == SW_OK) {
            saved = k + 1;
            st = bound_write(te, &seg[k].store, seg[k].at, seg[k].count,
                             v + (size_t)seg[k].i * eb, err);
        }
    }
    for (int64_t j = saved - 1; st != SW_OK && j >= 0; j--) {
        sw_error ignored; /* best effort: put back what the runs held */
        bound_write(te, &seg[j].store, seg[j].at, seg[j].count, undo + (size_t)seg[j].i * eb,
                    &ignored);
    }
    pthread_mutex_lock(&te->lock);
    for (int64_t m = 0; m < nmarked; m++) {
        te_tile *r = &te->tiles[need[m]];
        r->pending--;
        if (st == SW_OK)
            r->dirty = 1;
    }
    for (int64_t i = 0; st == SW_OK && i < count; i++) {
        int64_t t, w;
        sw_tiles_locate(&te->geo, slot + i, &t, &w);
        te_tile *r = &te->tiles[t];
        if (r->loc != SW_TE_IMPLICIT && r->store.host)
            memcpy(r->store.host + (size_t)te_store_index(te, r, t, w) * eb, v + (size_t)i * eb,
                   eb);
    }
    if (st == SW_OK)
        te->version++;
    te->busy--;
    pthread_mutex_unlock(&te->lock);
    sw_free(seg);
    sw_free(undo);
    return st;
}

sw_status sw_tiled_evictable_write(sw_tiled_evictable *te, int64_t slot, int64_t count,
                                   const void *in, sw_error *err)
{
    if (!te || (!in && count > 0))
        return sw_error_set(err, SW_ETYPE, "TiledEvictable: arguments must not be NULL");
    const unsigned char *v = in;
    if (sw_tiled_evictable_is_released(te))
        return sw_error_set(err, SW_ESTATE, "cannot write to a released TiledEvictable");
    sw_status st = check_slots(te, slot, count, err);
    if (st != SW_OK)
        return st;
    if (te->eb == 1)
        for (int64_t i = 0; i < count; i++)
            if (v[i] > 1)
                return sw_error_set(err, SW_EINVAL, "TiledEvictable: Bool slots take 0 or 1, "
                                    "not %u", (unsigned)v[i]);
    uint8_t *mark = sw_calloc((size_t)te->geo.ntiles, 1);
    int64_t *need = sw_malloc((size_t)(te->geo.ntiles + 1) * sizeof *need);
    if (!mark || !need) {
        sw_free(mark);
        sw_free(need);
        return sw_error_set(err, SW_ENOMEM, "TiledEvictable: out of memory writing slots");
    }
    int64_t m = 0;
    pthread_mutex_lock(&te->lock);
    st = write_plan_locked(te, slot, count, v, mark, need, &m, err);
    pthread_mutex_unlock(&te->lock);
    if (st == SW_OK && m > 0) {
        /* Promote (or materialize) those tiles first, all or none. */
        st = run_request(te, need, m, 0, "write to", err);
        memset(mark, 0, (size_t)te->geo.ntiles);
    }
    if (st == SW_OK && te->hooked) {
        st = write_hooked(te, slot, count, v, mark, need, err);
    } else if (st == SW_OK) {
        pthread_mutex_lock(&te->lock);
        int64_t again = 0;
        st = write_plan_locked(te, slot, count, v, mark, need, &again, err);
        if (st == SW_OK && again > 0)
            st = sw_error_set(err, SW_ESTATE, "TiledEvictable: a tile changed while it was "
                              "being promoted for this write; try again");
        for (int64_t i = 0; st == SW_OK && i < count; i++) {
            int64_t t, w;
            sw_tiles_locate(&te->geo, slot + i, &t, &w);
            te_tile *r = &te->tiles[t];
            if (r->loc == SW_TE_IMPLICIT)
                continue; /* writing 0 where the constant already reads 0 */
            /* Primary tiles live in host memory (the primary is CPU). */
            memcpy(r->store.host + (size_t)te_store_index(te, r, t, w) * te->eb,
                   v + (size_t)i * te->eb, te->eb);
            r->dirty = 1;
        }
        if (st == SW_OK)
            te->version++;
        pthread_mutex_unlock(&te->lock);
    }
    sw_free(mark);
    sw_free(need);
    return st;
}

/* ---- policies ------------------------------------------------------------------- */

sw_status sw_tiled_evictable_set_policy(sw_tiled_evictable *te, const sw_te_policy *policy,
                                        sw_error *err)
{
    if (!te)
        return sw_error_set(err, SW_ETYPE, "TiledEvictable must not be NULL");
    pthread_mutex_lock(&te->lock);
    sw_status st = refuse_released_locked(te, "set the residency policy of", err);
    if (st == SW_OK)
        te->policy = policy && policy->plan ? *policy : (sw_te_policy){NULL, NULL};
    pthread_mutex_unlock(&te->lock);
    return st;
}

void sw_tiled_evictable_policy_of(sw_tiled_evictable *te, sw_te_policy *out)
{
    pthread_mutex_lock(&te->lock);
    *out = te->policy;
    pthread_mutex_unlock(&te->lock);
}

sw_status sw_te_plan_add(sw_te_plan *plan, sw_te_plan_set which, const int64_t *coord,
                         sw_error *err)
{
    static const char *names[] = {"promote", "retain", "evict"};
    if (!plan || !coord)
        return sw_error_set(err, SW_ETYPE, "residency plan: arguments must not be NULL");
    if ((int)which < SW_TE_PLAN_PROMOTE || which > SW_TE_PLAN_EVICT)
        return sw_error_set(err, SW_EINVAL, "residency plan: unknown tile set %d", (int)which);
    int64_t t = coord_index(plan->geo, coord, err);
    if (t < 0)
        return SW_EINVAL;
    if (plan->in[t])
        return sw_error_set(err, SW_EINVAL,
                            "residency plan: a tile (first coordinate %lld) is already in the "
                            "%s set; each tile may appear once in one set",
                            (long long)coord[0], names[plan->in[t] - 1]);
    if (plan->n[which] == plan->cap[which]) {
        int64_t cap = plan->cap[which] ? 2 * plan->cap[which] : 8;
        int64_t *grown = sw_malloc((size_t)cap * sizeof *grown);
        if (!grown)
            return sw_error_set(err, SW_ENOMEM, "residency plan: out of memory");
        if (plan->n[which])
            memcpy(grown, plan->idx[which], (size_t)plan->n[which] * sizeof *grown);
        sw_free(plan->idx[which]);
        plan->idx[which] = grown;
        plan->cap[which] = cap;
    }
    plan->idx[which][plan->n[which]++] = t;
    plan->in[t] = (uint8_t)(which + 1);
    return SW_OK;
}

void sw_te_plan_clear(sw_te_plan *plan)
{
    sw_free(plan->in);
    for (int k = 0; k < 3; k++)
        sw_free(plan->idx[k]);
    memset(plan, 0, sizeof *plan);
}

/* ---- factories (TE-13) ---------------------------------------------------------- */

/* A TiledEvictable like `te` (its grid, tiles and policy) over the fresh
 * primary `p`, whose reference it takes, and a fresh empty secondary of
 * te's secondary class. On failure both fresh carriers are released. */
static sw_status build_like(sw_tiled_evictable *te, sw_carrier *p, sw_tiled_evictable **made,
                            sw_error *err)
{
    sw_carrier *s = NULL;
    if (te_store_bound(&te->primary) || te_store_bound(&te->secondary)) {
        sw_carrier_release(p, NULL);
        sw_carrier_unref(p);
        return sw_error_set(err, SW_ENOTSUP, "TiledEvictable: a carrier like one over tiers the "
                            "binding keeps is the binding's to make");
    }
    sw_status st = sw_carrier_class_of(te->secondary.c) == &sw_cpu_class
                       ? sw_cpu_new(0, te->dtype, 0, &s, err)
                       : sw_file_backed_new(NULL, te->dtype, 0, &s, err);
    if (st == SW_OK)
        st = sw_tiled_evictable_new(p, s, te->geo.rank, te->geo.grid, te->geo.tile, made, err);
    if (st == SW_OK) {
        sw_tiled_evictable_policy_of(te, &(*made)->policy);
    } else {
        sw_carrier_release(p, NULL);
        if (s)
            sw_carrier_release(s, NULL);
    }
    sw_carrier_unref(p);
    sw_carrier_unref(s);
    return st;
}

sw_status sw_tiled_evictable_new_like(sw_tiled_evictable *te, const void *values, int64_t count,
                                      int immutable, sw_tiled_evictable **out, sw_error *err)
{
    if (!te || !out || (!values && count > 0))
        return sw_error_set(err, SW_ETYPE, "TiledEvictable: arguments must not be NULL");
    if (sw_tiled_evictable_is_released(te))
        return sw_error_set(err, SW_ESTATE, "TiledEvictable: cannot make a new carrier like a "
                            "released one");
    if (count != te->geo.size)
        return sw_error_set(err, SW_EINVAL, "TiledEvictable: new_like needs exactly %lld values "
                            "(the logical size), not %lld",
                            (long long)te->geo.size, (long long)count);
    const unsigned char *v = values;
    if (te->eb == 1 && te->dtype == SW_DT_BOOL)
        for (int64_t i = 0; i < count; i++)
            if (v[i] > 1)
                return sw_error_set(err, SW_EINVAL, "TiledEvictable: Bool slots take 0 or 1, "
                                    "not %u", (unsigned)v[i]);
    sw_carrier *p = NULL;
    sw_status st = sw_cpu_new(te->geo.size, te->dtype,
                              SW_CARRIER_EMPTY | (immutable ? SW_CARRIER_IMMUTABLE : 0), &p, err);
    sw_tiled_evictable *made = NULL;
    if (st == SW_OK) {
        memcpy(sw_cpu_pointer(p), v, (size_t)count * te->eb);
        st = build_like(te, p, &made, err);
    }
    if (st != SW_OK)
        return st;
    /* Nothing else can reach it yet. */
    for (int64_t t = 0; t < made->geo.ntiles; t++)
        if (sw_tiles_is_zero_tile(&made->geo, made->primary.host, made->eb, t))
            made->tiles[t].loc = SW_TE_IMPLICIT;
    *out = made;
    return SW_OK;
}

sw_status sw_tiled_evictable_allocate_like(sw_tiled_evictable *te, int empty,
                                           sw_tiled_evictable **out, sw_error *err)
{
    if (!te || !out)
        return sw_error_set(err, SW_ETYPE, "TiledEvictable: arguments must not be NULL");
    if (sw_tiled_evictable_is_released(te))
        return sw_error_set(err, SW_ESTATE, "TiledEvictable: cannot allocate like a released "
                            "carrier");
    sw_carrier *p = NULL;
    sw_status st = sw_cpu_new(0, te->dtype, 0, &p, err);
    sw_tiled_evictable *made = NULL;
    if (st == SW_OK)
        st = build_like(te, p, &made, err);
    if (st != SW_OK)
        return st;
    /* Nothing else can reach it yet. */
    for (int64_t t = 0; !empty && t < made->geo.ntiles; t++)
        made->tiles[t].loc = SW_TE_IMPLICIT;
    *out = made;
    return SW_OK;
}

/* ---- release (TE-14) ------------------------------------------------------------ */

static void release_claimed(sw_carrier *c, uint64_t *token)
{
    if (!*token)
        return;
    if (sw_carrier_begin_owner_access(c, *token, NULL) == SW_OK) {
        sw_carrier_release(c, NULL);
        sw_carrier_end_owner_access(c, *token, NULL);
    }
    sw_carrier_relinquish(c, *token, NULL);
    *token = 0;
}

sw_status sw_tiled_evictable_release(sw_tiled_evictable *te, sw_error *err)
{
    if (!te)
        return sw_error_set(err, SW_ETYPE, "TiledEvictable must not be NULL");
    te_tile *tiles = NULL;
    uint64_t ptoken = 0, stoken = 0;
    pthread_mutex_lock(&te->lock);
    sw_status st = SW_OK;
    if (te->released) {
        ;
    } else if (te->busy) {
        st = sw_error_set(err, SW_ESTATE,
                          "cannot release a TiledEvictable while projection or residency work "
                          "on it is pending; wait() for it first");
    } else {
        te->released = 1;
        tiles = te->tiles;
        te->tiles = NULL;
        ptoken = te->ptoken;
        stoken = te->stoken;
        te->ptoken = te->stoken = 0;
    }
    pthread_mutex_unlock(&te->lock);
    /* Released: nothing reaches the tiles any more. The storage goes
     * without the lock (file removal takes the file store's lock). */
    for (int64_t t = 0; tiles && t < te->geo.ntiles; t++)
        if (!tiles[t].full)
            drop_store(te, &tiles[t].store);
    sw_free(tiles);
    release_claimed(te->primary.c, &ptoken);
    release_claimed(te->secondary.c, &stoken);
    return st;
}
