/* Tile geometry of a TiledEvictable (contract-carriers TE-2, TE-3, TE-4,
 * TE-5, TE-10): a logical shape cut into a grid of equal tiles, the slot
 * arithmetic that maps slots to tiles, the full-Tensor footprint check,
 * tile-set ordering, and the projection gather.
 *
 * Every ordering here is first-axis-fastest: coordinate x of logical index
 * i is i = x0 + L0 * (x1 + L1 * (x2 + ...)), tiles and within-tile
 * positions alike.
 *
 * Ownership: sw_tile_geometry, sw_tile_selection, sw_tile_source and
 * sw_tile_run are plain caller-owned values; the functions borrow every
 * pointer for the call only and keep nothing (a selection's arrays stay the
 * caller's). Only sw_tiles_check_footprints and sw_tiles_sort_coords
 * allocate, and they free before returning.
 * Threads: every function is thread-safe and runs without the GIL (no
 * shared state); concurrent calls must not write the same output. */
#ifndef STRIDEWEAVE_TILES_H
#define STRIDEWEAVE_TILES_H

#include "strideweave/export.h"

#include <stddef.h>
#include <stdint.h>

#include "strideweave/layout.h"
#include "strideweave/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most grid axes a TiledEvictable may have (our decision: a fixed
 * bound keeps per-call coordinate buffers on the stack). */
#define SW_TILES_MAX_RANK 32

typedef struct sw_tile_geometry {
    int32_t rank;
    int64_t grid[SW_TILES_MAX_RANK];
    int64_t tile[SW_TILES_MAX_RANK];
    int64_t logical[SW_TILES_MAX_RANK];  /* grid[k] * tile[k] */
    int64_t ntiles;                      /* prod(grid) */
    int64_t tile_size;                   /* prod(tile) */
    int64_t size;                        /* prod(logical) */
} sw_tile_geometry;

/* Fill `g`: sw_tiles_geometry_init_shapes with one rank for both. */
SW_API sw_status sw_tiles_geometry_init(sw_tile_geometry *g, int32_t rank, const int64_t *grid,
                                        const int64_t *tile, sw_error *err);

/* TE-1 for one shape of a tiled carrier, `what` naming it in the message
 * ("grid_shape", "tile_shape"): 1 to SW_TILES_MAX_RANK entries ("grid_shape
 * needs 1 to 32 entries, not 0"), then each entry in order positive
 * ("grid_shape entries must be positive"); SW_EINVAL, in the Python API's
 * words. Only the first `checked` entries are looked at (clamped to n): a
 * binding that found entry `checked` too large for int64 says so itself
 * once the entries before it passed. */
SW_API sw_status sw_tiles_check_extents(const char *what, int32_t n, const int64_t *extents,
                                        int32_t checked, sw_error *err);

/* Fill `g` from a grid shape and a tile shape of their own ranks, in this
 * order: the grid shape, then the tile shape, as sw_tiles_check_extents
 * checks them; the ranks equal ("grid_shape has 2 axes but tile_shape has
 * 3"), SW_EINVAL; products overflowing int64, SW_EOVERFLOW. */
SW_API sw_status sw_tiles_geometry_init_shapes(sw_tile_geometry *g, int32_t grid_rank,
                                               const int64_t *grid, int32_t tile_rank,
                                               const int64_t *tile, sw_error *err);

/* Linear index of a tile coordinate (first axis fastest over the grid). */
SW_API int64_t sw_tiles_tile_index(const sw_tile_geometry *g, const int64_t *coord);
/* The coordinate of tile `t`. */
SW_API void sw_tiles_tile_coord(const sw_tile_geometry *g, int64_t t, int64_t *coord);
/* TE-2: the tile owning slot `slot` and the slot's within-tile position. */
SW_API void sw_tiles_locate(const sw_tile_geometry *g, int64_t slot, int64_t *tile, int64_t *within);
/* The slot at within-tile position `within` of tile `t` (inverse of
 * sw_tiles_locate). */
SW_API int64_t sw_tiles_slot(const sw_tile_geometry *g, int64_t t, int64_t within);
/* Whether every slot of tile `t` in logical slot order at `base` (slot 0,
 * `eb` bytes per slot) is zero bytes: the rule that makes a tile of a
 * new_like's values implicit. Reads only; thread-safe. */
SW_API int sw_tiles_is_zero_tile(const sw_tile_geometry *g, const void *base, size_t eb,
                                 int64_t t);

/* TE-3: whether `layout` has the geometry's logical shape: rank top-level
 * modes whose sizes are the logical extents (nesting inside a mode free). */
SW_API int sw_tiles_matches_shape(const sw_tile_geometry *g, const sw_layout *layout);

/* TE-3: whether a layout of this geometry's logical shape, placed at
 * `offset`, maps every tile's logical indices onto exactly that tile's
 * footprint (distinct slots). The caller has checked the layout's mode
 * count and mode sizes. 1 yes, 0 no (err says which tile), -1 with err
 * filled (SW_ENOMEM). */
SW_API int sw_tiles_check_footprints(const sw_tile_geometry *g, const sw_layout *layout,
                                     int64_t offset, sw_error *err);

/* Whether `layout` at `offset` is the identity of the logical shape:
 * slot == logical index for every index (the fast paths use it). */
SW_API int sw_tiles_is_identity(const sw_tile_geometry *g, const sw_layout *layout, int64_t offset);

/* A selection bound to a geometry: per axis k, counts[k] tile
 * coordinates coords[k][0..counts[k]). */
typedef struct sw_tile_selection {
    int32_t rank;
    const int64_t *counts;
    const int64_t *const *coords;
} sw_tile_selection;

/* TE-4 binding: rank equal to the grid's and every coordinate in range.
 * SW_EINVAL otherwise. */
SW_API sw_status sw_tiles_bind_selection(const sw_tile_geometry *g, const sw_tile_selection *sel,
                                         sw_error *err);
/* Compact shape of a bound selection: counts[k] * tile[k]; returns the
 * product (the projection's slot count n), or -1 on overflow. */
SW_API int64_t sw_tiles_compact_shape(const sw_tile_geometry *g, const sw_tile_selection *sel,
                                      int64_t *shape);
/* TE-10 mapping: the source logical index of compact index `c`. */
SW_API int64_t sw_tiles_source_index(const sw_tile_geometry *g, const sw_tile_selection *sel,
                                     const int64_t *compact_shape, int64_t c);

/* TE-5 ordering: sort `n` coordinates of `rank` entries each (row i at
 * coords[i*rank]) by reversed tuple, in place. Returns 1 when two rows are
 * equal after sorting (a duplicate), 0 otherwise, -1 on SW_ENOMEM. */
SW_API int sw_tiles_sort_coords(int32_t rank, int64_t n, int64_t *coords, sw_error *err);

/* Where the gather reads one tile: `base` points at slot 0 of its storage;
 * `full` says the storage is indexed by the TiledEvictable's own slot
 * (a full-size prototype) rather than by within-tile position. */
typedef struct sw_tile_source {
    const unsigned char *base;
    int full;
} sw_tile_source;

/* TE-10 gather of host memory: compact index c of the dense
 * first-axis-fastest destination `dst` receives the source value at
 * mapped logical index s, read at slot offset + layout(s) from the tile
 * owning that slot (`tiles[t]`, one per grid tile; only selected tiles are
 * read). Slot width `elem` bytes. The caller has checked footprints and
 * binding. Under the identity layout a tile whose `base` is NULL is one the
 * caller has already put in place: its runs are skipped. Runs without
 * Python; safe without the GIL. */
SW_API sw_status sw_tiles_gather(const sw_tile_geometry *g, const sw_layout *layout, int64_t offset,
                                 const sw_tile_selection *sel, const sw_tile_source *tiles,
                                 size_t elem, unsigned char *dst, sw_error *err);

/* The slot of logical index `i` under `layout` at `offset`. */
SW_API int64_t sw_tiles_layout_slot(const sw_layout *layout, int64_t offset, int64_t i);

/* One contiguous piece of a tile held in place by a full-size tier:
 * `count` slots from that tier's slot `slot`, which are within-tile
 * positions `within` .. within + count - 1 of the tile. */
typedef struct sw_tile_run {
    int64_t slot, within, count;
} sw_tile_run;

/* The pieces of tile `t` in the full-size footprint (TE-2: tile[0]-long
 * runs strided over the logical shape), in within-tile order, runs that
 * touch merged. `runs` has room for tile_size / tile[0] entries; returns
 * how many were written. Pure arithmetic; safe without the GIL. */
SW_API int64_t sw_tiles_runs(const sw_tile_geometry *g, int64_t t, sw_tile_run *runs);

#ifdef __cplusplus
}
#endif

#endif
