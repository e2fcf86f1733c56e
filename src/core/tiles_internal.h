/* Tile walks shared by the projection gathers (tiles.c's into memory,
 * tiled_evictable_project_file.c's into a file); never installed. */
#ifndef SW_TILES_INTERNAL_H
#define SW_TILES_INTERNAL_H

#include "strideweave/tiles.h"

/* The dense first-axis-fastest projection of `sel` walked in runs of
 * tile[0] slots, each from one tile: `c` is the compact coordinate of a
 * run's first slot (axis 0 a multiple of tile[0]; start at all zeros).
 * run_source gives the run's tile (linear), the logical index of its first
 * slot `s` and that slot's within-tile position; run_next steps `c` to the
 * next run (`shape`: the compact shape). Pure arithmetic. */
void sw_tiles_run_source(const sw_tile_geometry *g, const sw_tile_selection *sel,
                         const int64_t *c, int64_t *tile, int64_t *s, int64_t *within);
void sw_tiles_run_next(const sw_tile_geometry *g, const int64_t *shape, int64_t *c);

#endif
