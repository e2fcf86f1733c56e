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
    /* guarded by lock */
    uint64_t ptoken, stoken;     /* claims, 0 once relinquished */
    te_tile *tiles;              /* geo.ntiles; NULL after release */
    int released;
    long busy;                   /* requests and projections in progress */
    uint64_t version;
};

/* Slot `w` of tile `t` in its record's storage. */
static inline int64_t te_store_index(const sw_tiled_evictable *te, const te_tile *r, int64_t t,
                                     int64_t w)
{
    return r->full ? sw_tiles_slot(&te->geo, t, w) : w;
}

/* Copy tile t from `src` (full: indexed by the tile's own slots) into the
 * tile-sized, within-tile indexed `dst`, by whole runs. No lock held; the
 * caller keeps the tile pending or pinned. */
sw_status sw_te_copy_tile(sw_tiled_evictable *te, int64_t t, const te_store *src, int full,
                          const te_store *dst, sw_error *err);

#endif
