/* What the TiledEvictable C tests share: a grid whose full CPU primary holds
 * value_of(slot) over an empty secondary, and a snapshot of what a refused
 * or failed request must leave unchanged (tile states, every value, the
 * version). The including file defines MAXS and MAXT (the most slots and
 * tiles it snapshots) and `static float value_of(int64_t slot)` first. */
#ifndef SW_TEST_TE_FIXTURE_H
#define SW_TEST_TE_FIXTURE_H

#include <stdint.h>
#include <string.h>

#include "check.h"
#include "strideweave/strideweave.h"

/* A full primary holding value_of(slot), an empty secondary (CPU, or
 * FileBacked when `file_secondary`); NULL for a bad geometry. */
static inline sw_tiled_evictable *make_grid(int32_t rank, const int64_t *grid, const int64_t *tile,
                                            int file_secondary)
{
    sw_tile_geometry g;
    if (sw_tiles_geometry_init(&g, rank, grid, tile, NULL) != SW_OK)
        return NULL;
    sw_carrier *p = NULL, *s = NULL;
    sw_tiled_evictable *te = NULL;
    sw_cpu_new(g.size, SW_DT_FLOAT32, 0, &p, NULL);
    float *v = sw_cpu_pointer(p);
    for (int64_t i = 0; i < g.size; i++)
        v[i] = value_of(i);
    if (file_secondary)
        sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &s, NULL);
    else
        sw_cpu_new(0, SW_DT_FLOAT32, 0, &s, NULL);
    CHECK(sw_tiled_evictable_new(p, s, rank, grid, tile, &te, NULL) == SW_OK);
    sw_carrier_unref(p);
    sw_carrier_unref(s);
    return te;
}

typedef struct snap {
    sw_te_tile_state st[MAXT];
    float values[MAXS];
    sw_status read_status;
    uint64_t version;
} snap;

static inline void take_tiles(sw_tiled_evictable *te, snap *s)
{
    memset(s, 0, sizeof *s);
    const sw_tile_geometry *g = sw_tiled_evictable_geometry(te);
    for (int64_t t = 0; t < g->ntiles && t < MAXT; t++) {
        int64_t c[SW_TILES_MAX_RANK];
        sw_tiles_tile_coord(g, t, c);
        sw_tiled_evictable_tile_state(te, c, &s->st[t], NULL);
    }
    s->read_status = sw_tiled_evictable_read(te, 0, g->size, s->values, NULL);
    s->version = sw_tiled_evictable_version(te);
}

/* Every slot reads value_of(slot), except slot `changed` (-1: none),
 * which reads `value`. */
static inline int values_are(sw_tiled_evictable *te, int64_t changed, float value)
{
    float got[MAXS];
    int64_t n = sw_tiled_evictable_size(te);
    if (n > MAXS || sw_tiled_evictable_read(te, 0, n, got, NULL) != SW_OK)
        return 0;
    for (int64_t i = 0; i < n; i++)
        if (got[i] != (i == changed ? value : value_of(i)))
            return 0;
    return 1;
}

/* Every slot reads value_of(slot). */
static inline int all_values_exact(sw_tiled_evictable *te) { return values_are(te, -1, 0.0f); }

/* Where the tile at `coord` lives; (sw_te_location)-1 when that cannot be
 * read. */
static inline sw_te_location loc_of(sw_tiled_evictable *te, const int64_t *coord)
{
    sw_te_tile_state s;
    if (sw_tiled_evictable_tile_state(te, coord, &s, NULL) != SW_OK)
        return (sw_te_location)-1;
    return s.location;
}

/* The same for the tile (c0, c1) of a two-dimensional grid. */
static inline sw_te_location loc_at(sw_tiled_evictable *te, int64_t c0, int64_t c1)
{
    return loc_of(te, (int64_t[]){c0, c1});
}

/* How many tiles live at `loc`. */
static inline int64_t tiles_at(sw_tiled_evictable *te, sw_te_location loc)
{
    const sw_tile_geometry *g = sw_tiled_evictable_geometry(te);
    int64_t n = 0;
    for (int64_t t = 0; t < g->ntiles; t++) {
        int64_t c[SW_TILES_MAX_RANK];
        sw_te_tile_state s;
        sw_tiles_tile_coord(g, t, c);
        if (sw_tiled_evictable_tile_state(te, c, &s, NULL) == SW_OK && s.location == loc)
            n++;
    }
    return n;
}

#endif
