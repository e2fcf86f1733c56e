/* TiledEvictable's state, shared by tiled_evictable.c (handle, residency,
 * slot access) and tiled_evictable_project.c only (never installed): the
 * public API is strideweave/tiled_evictable.h. */
#ifndef SW_TILED_EVICTABLE_INTERNAL_H
#define SW_TILED_EVICTABLE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "strideweave/tiled_evictable.h"

/* Where a tile's slots are: a carrier (NULL for a plain host buffer) and
 * its host address or file descriptor, fetched once (stable while the
 * carrier is live, and the carrier cannot be released while we use it:
 * private stores are reachable only through the tile records, prototypes
 * are claimed). */
typedef struct te_store {
    sw_carrier *c;
    unsigned char *host; /* HOST endpoint slot 0, else NULL */
    int fd;              /* FILE endpoint, else -1 */
    /* A bound store (neither of those) of a core class whose slots the
     * core reaches itself, not through the binding's read and write hooks:
     * CPU or Generic memory of the TiledEvictable's dtype at own_host, else
     * (FileBacked, BlockDeviceCarrier) the class's own slot ops. */
    uint8_t own;
    unsigned char *own_host;
} te_store;

typedef struct te_tile {
    te_store store;  /* private store, or the full prototype holding it in place */
    uint8_t loc;     /* sw_te_location */
    uint8_t full;    /* store is a full prototype: indexed by the tile's own slots */
    uint8_t dirty;
    int32_t pending; /* residency requests copying it (0 or 1) */
    int32_t pins;    /* projections reading it */
} te_tile;

struct sw_tiled_evictable {
    _Atomic long refs;
    pthread_mutex_t lock; /* guards everything below that is not fixed */
    /* fixed at construction */
    sw_tile_geometry geo;
    sw_dtype dtype;
    size_t eb;          /* bytes per slot */
    int captured_mutable;
    te_store primary, secondary; /* the prototypes (one reference each) */
    int hooked;                  /* made by sw_tiled_evictable_new_bound, or core_only */
    int core_only;               /* bound tiers of core classes, no binding: hooks all NULL */
    sw_te_tier_hooks hooks;      /* binding tiers (all NULL unless hooked) */
    int role_bound[2];           /* primary, secondary: a class the core does not keep in
                                    that role, reached through the hooks */
    /* guarded by lock */
    uint64_t ptoken, stoken;     /* claims, 0 once relinquished */
    te_tile *tiles;              /* geo.ntiles; NULL after release */
    int released;
    long busy;                   /* requests and projections in progress */
    uint64_t version;
    sw_te_policy policy;
    long readers;                /* reads reaching bound stores without the lock */
    struct te_grave *grave;      /* old stores to drop once readers is 0 */
    /* guarded by the tracking registry's lock (tiled_evictable_async.c) */
    int fork_locked;             /* `lock` taken by the fork prepare handler */
};

/* Slot `w` of tile `t` in its record's storage. */
static inline int64_t te_store_index(const sw_tiled_evictable *te, const te_tile *r, int64_t t,
                                     int64_t w)
{
    return r->full ? sw_tiles_slot(&te->geo, t, w) : w;
}

/* A store only the binding reaches (neither host memory nor a file). */
static inline int te_store_bound(const te_store *s)
{
    return s->c && !s->host && s->fd < 0;
}

/* `count` slots from slot `at` of a bound store the core reaches itself
 * (`own`) into host memory: a memcpy from its memory, else its class's
 * read. No lock held. */
sw_status sw_te_read_run(sw_tiled_evictable *te, const te_store *s, int64_t at, int64_t count,
                         void *out, sw_error *err);

/* The memory of a binding's destination of a core class holding the
 * TiledEvictable's dtype in host memory (Generic): the projection gathers
 * straight into it. NULL for any other destination (written through
 * sw_te_write_destination). */
unsigned char *sw_te_destination_memory(sw_tiled_evictable *te, sw_carrier *dest);

/* The descriptor of a binding's FileBacked destination the core writes
 * itself (te_store's `own`): the projection writes its file straight
 * (sw_te_gather_file). -1 for any other destination. */
int sw_te_destination_file(sw_tiled_evictable *te, sw_carrier *dest);

/* The projection's gather written straight into the destination file `fd`
 * (dense, first-axis-fastest, from byte 0), no projection-sized buffer:
 * host tile memory by pwritev, runs of tiles in files by copy_file_range,
 * implicit tiles as zeros (left to the file where its range holds no data
 * yet), a tile the kernel cannot copy from (a binding's store, short runs
 * of a file) read into a tile-sized buffer first, and a layout other than
 * the identity through a bounded staging buffer. No lock held, the tiles
 * pinned; the caller holds the destination's owner access. A failure
 * may leave part of the file written. Tiles as tiled_evictable_project.c's
 * gather takes them. */
sw_status sw_te_gather_file(sw_tiled_evictable *te, const sw_layout *L, int64_t offset,
                            const sw_tile_selection *sel, const te_store *notes,
                            const uint8_t *full, const uint8_t *implicit, int fd, sw_error *err);

/* A projection's values into `dest`, a destination of the binding's (not
 * CPU), its owner access held by the caller, no lock held: the core writes
 * a destination of its own classes itself (te_store's `own`), else the
 * write hook does. */
sw_status sw_te_write_destination(sw_tiled_evictable *te, sw_carrier *dest, int64_t count,
                                  const void *in, sw_error *err);

struct te_request;

/* A committed request's old stores, kept while reads may reach them. */
typedef struct te_grave {
    struct te_grave *next;
    te_store *stores;
    int64_t n;
} te_grave;

/* One tile copy a binding's copy hook took (sw_te_copy_done reports it). */
struct sw_te_copy {
    struct te_request *q;
};

/* A residency request in flight (tiled_evictable.c). */
typedef struct te_request {
    int64_t n;
    int evict;
    int64_t *idx;       /* the tiles, checked */
    te_store *staged;   /* fresh copies, then the old private stores to drop */
    te_store *src;      /* where each moving tile's values are */
    uint8_t *src_full;
    uint8_t *zero;      /* implicit: the fresh storage is the value */
    int64_t copies;     /* tiles it copies (0 once the route hook refused it) */
    sw_status status;   /* the staging outcome */
    sw_error err;
    /* copies a binding's hook took, reported by sw_te_copy_done */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int64_t outstanding;
    sw_status async_status; /* the first failure reported */
    sw_error async_err;
    struct sw_te_copy job;  /* every hook gets this one (the request) */
    te_grave *grave;        /* made beforehand when hooked (commit cannot fail) */
} te_request;

/* A projection in flight (tiled_evictable_project.c). */
typedef struct te_projection te_projection;

struct sw_te_work;

/* Work that has marked tiles (pending or pinned) is tracked from before
 * its marks are set until after they are cleared, so that a forked child,
 * which has none of the parent's threads, can end it: clear the marks,
 * fail an async handle (tiled_evictable_async.c). `marked`, `request` and
 * `projection` change only under te->lock. */
typedef struct te_track {
    struct te_track *prev, *next;
    sw_tiled_evictable *te;
    int marked;
    te_request *request;
    te_projection *projection;
    struct sw_te_work *work; /* the async handle, or NULL for a blocking call */
} te_track;

void sw_te_track_enter(te_track *t, sw_tiled_evictable *te);
void sw_te_track_leave(te_track *t);

/* skip_busy: a projection promoting tiles it pinned itself. */
sw_status sw_te_request_begin(sw_tiled_evictable *te, const int64_t *idx, int64_t n, int evict,
                              const char *what, int skip_busy, te_track *track,
                              te_request **out, sw_error *err);
void sw_te_request_stage(sw_tiled_evictable *te, te_request *q);
/* The two halves of stage: issue the fresh stores and copies (the hooks
 * run on this thread), then wait until every copy a hook took reported and
 * fold its failure in. outstanding: whether a hook's copy has not reported. */
void sw_te_request_issue(sw_tiled_evictable *te, te_request *q);
void sw_te_request_await(te_request *q);
int sw_te_request_outstanding(te_request *q);
void sw_te_request_finish(sw_tiled_evictable *te, te_request *q, te_track *track, int forked);
void sw_te_request_free(te_request *q);
/* residency()'s argument checks and checked indices (sw_malloc'd). */
sw_status sw_te_residency_indices(sw_tiled_evictable *te, const int64_t *coords, int64_t n,
                                  int evict, int64_t **idx, sw_error *err);

/* Evict those of the tiles idx[0..n) that are neither pending nor pinned
 * (a policy's evict set); blocking. */
sw_status sw_te_evict_free_tiles(sw_tiled_evictable *te, const int64_t *idx, int64_t n,
                                 sw_error *err);

/* A residency plan being filled by a policy: per set, linear tile indices. */
struct sw_te_plan {
    const sw_tile_geometry *geo;
    uint8_t *in;        /* per tile: 0, or 1 + the set holding it */
    int64_t *idx[3];
    int64_t n[3], cap[3];
};
void sw_te_plan_clear(sw_te_plan *plan);

/* Projection: checks, destination, pins (nothing changed on failure);
 * the gather (no lock; outcome in the projection); unpin, relinquish and
 * build the result (on success *out gets it), free. */
sw_status sw_te_project_begin(sw_tiled_evictable *te, const sw_layout *layout, int64_t offset,
                              const sw_tile_selection *selection, sw_carrier *destination,
                              te_track *track, te_projection **out, sw_error *err);
void sw_te_project_gather(sw_tiled_evictable *te, te_projection *pj);
/* The two halves of the gather: the values and the issue of the policy's
 * promotion (its copies; the hooks run on this thread), then the wait for
 * every copy a hook took and the promotion's commit (or, with `fail` other
 * than SW_OK, its drop: the projection fails with `fail` / `why`).
 * outstanding: whether a hook's copy of the promotion has not reported. */
void sw_te_project_issue(sw_tiled_evictable *te, te_projection *pj);
int sw_te_project_outstanding(te_projection *pj);
void sw_te_project_await(sw_tiled_evictable *te, te_projection *pj, sw_status fail,
                         const sw_error *why);
/* Mark a projection failed before its gather ran (it was never submitted). */
void sw_te_project_fail(te_projection *pj, sw_status st);
sw_status sw_te_project_finish(sw_tiled_evictable *te, te_projection *pj, te_track *track,
                               int forked, sw_tensor **out, sw_error *err);
/* Take the policy's evict tiles out of a projection that has not failed
 * (its finish then evicts nothing; the caller starts the eviction itself
 * once the projection finished, and frees *idx): their count, 0 (and *idx
 * NULL) when none. */
int64_t sw_te_project_take_evictions(te_projection *pj, int64_t **idx);
/* Of the n tiles idx, those neither pinned nor pending now (a released
 * carrier: none), into out (n entries); their count. */
int64_t sw_te_free_tiles(sw_tiled_evictable *te, const int64_t *idx, int64_t n, int64_t *out);

/* Copy tile t from `src` (full: indexed by the tile's own slots) into the
 * tile-sized, within-tile indexed `dst`, by whole runs. No lock held; the
 * caller keeps the tile pending or pinned. */
sw_status sw_te_copy_tile(sw_tiled_evictable *te, int64_t t, const te_store *src, int full,
                          const te_store *dst, sw_error *err);

#endif
