/* Tile sets, tile selections and residency plans (contract-carriers TE-4,
 * TE-5): the immutable values a TiledEvictable's residency and projection
 * calls name tiles with.
 *
 *   sw_tile_set           a set of tile coordinates of one rank, kept in
 *                         canonical order (sorted by the last entry first,
 *                         i.e. by reversed tuple; for a grid that is the
 *                         linear tile order, first axis fastest);
 *   sw_tile_sel           a selection: per grid axis, a list of tile
 *                         coordinates in the caller's order, naming their
 *                         Cartesian product (first axis fastest);
 *   sw_residency_plan     three disjoint tile sets a residency policy
 *                         returns: promote, retain, evict.
 *
 * Ownership: every constructor gives the caller one reference (`*out`);
 * _ref adds one, _unref drops one and frees the value with the last
 * (NULL is ignored). Accessors return borrowed pointers that live as long
 * as the value does.
 *
 * Memory: values come from the C heap (malloc), not from sw_malloc, so
 * sw_alloc_live_bytes does not count them (a binding keeps them as long as
 * its own objects); the fault site "tile_set" fails their allocation
 * (SW_ENOMEM, nothing made).
 *
 * Threads: the values never change after construction, so any number of
 * threads may read one value at once (every function here is thread-safe;
 * references are counted atomically).
 *
 * Refusals return the status with `err` filled and `*out` untouched; no
 * value is made and nothing else changes. */
#ifndef STRIDEWEAVE_TILE_SET_H
#define STRIDEWEAVE_TILE_SET_H

#include "strideweave/export.h"

#include <stdint.h>

#include "strideweave/status.h"
#include "strideweave/tiled_evictable.h"
#include "strideweave/tiles.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- tile sets ----------------------------------------------------------- */

typedef struct sw_tile_set sw_tile_set;

/* A set of the `n` tiles `coords` (rows of `rank` entries, row i at
 * coords[i * rank]; copied), sorted into canonical order. With `grid`
 * non-NULL the set must also fit that grid (sw_tile_set_check_grid).
 * Checks, in order:
 *   `out` NULL, or `coords` NULL with n > 0                    SW_ETYPE
 *   n < 0; n > 0 with rank < 1                                 SW_EINVAL
 *   n * rank coordinates overflow                              SW_EOVERFLOW
 *   a coordinate negative, or INT64_MAX (no grid has that
 *   many tiles on an axis: it stands for "too large"),
 *   row by row                                                 SW_EINVAL
 *   the same tile listed twice                                 SW_EINVAL
 *   `grid` given and the set does not fit it                   SW_EINVAL
 * The empty set (n == 0) is one value whatever rank it is given: its rank
 * is `rank` when that is >= 1, else -1 ("any"), and it equals every other
 * empty set. */
SW_API sw_status sw_tile_set_new(int32_t rank, int64_t n, const int64_t *coords,
                                 const sw_tile_geometry *grid, sw_tile_set **out,
                                 sw_error *err);
SW_API sw_tile_set *sw_tile_set_ref(sw_tile_set *s);
SW_API void sw_tile_set_unref(sw_tile_set *s);

/* Axes per coordinate; -1 for an empty set made without a rank. */
SW_API int32_t sw_tile_set_rank(const sw_tile_set *s);
/* Number of tiles. */
SW_API int64_t sw_tile_set_size(const sw_tile_set *s);
/* Iteration: all rows in canonical order, row i at [i * rank] (a valid,
 * unreadable pointer for the empty set); sw_tile_set_at gives row i, or
 * NULL when i is out of range. */
SW_API const int64_t *sw_tile_set_coords(const sw_tile_set *s);
SW_API const int64_t *sw_tile_set_at(const sw_tile_set *s, int64_t i);
/* Whether the tile `coord` (`rank` entries) is in the set: 0 for another
 * rank or a NULL argument. O(rank * log n). */
SW_API int sw_tile_set_contains(const sw_tile_set *s, int32_t rank, const int64_t *coord);
/* Equal sets hold the same tiles (every empty set equals every other);
 * equal sets have equal hashes. NULL equals only NULL. */
SW_API int sw_tile_set_equal(const sw_tile_set *a, const sw_tile_set *b);
SW_API uint64_t sw_tile_set_hash(const sw_tile_set *s);

/* TE-4/TE-5 binding to a grid: the set's rank is the grid's and every
 * coordinate lies inside it. SW_ETYPE for NULL; SW_EINVAL naming the
 * mismatch otherwise. The empty set fits every grid. */
SW_API sw_status sw_tile_set_check_grid(const sw_tile_set *s, const sw_tile_geometry *grid,
                                        sw_error *err);

/* Set algebra: a new set (canonical order) of the tiles in a or b / in
 * both / in a and not in b. SW_ETYPE for NULL arguments; SW_EINVAL when
 * both sets are non-empty and their ranks differ. The result's rank is a
 * non-empty operand's (a's first), else a's, else b's. */
SW_API sw_status sw_tile_set_union(const sw_tile_set *a, const sw_tile_set *b,
                                   sw_tile_set **out, sw_error *err);
SW_API sw_status sw_tile_set_intersection(const sw_tile_set *a, const sw_tile_set *b,
                                          sw_tile_set **out, sw_error *err);
SW_API sw_status sw_tile_set_difference(const sw_tile_set *a, const sw_tile_set *b,
                                        sw_tile_set **out, sw_error *err);
/* Whether a and b share a tile (0 for NULL or different ranks). */
SW_API int sw_tile_set_overlaps(const sw_tile_set *a, const sw_tile_set *b);

/* ---- tile selections ----------------------------------------------------- */

typedef struct sw_tile_sel sw_tile_sel;

/* A selection of `rank` axes: axis k takes the counts[k] tile coordinates
 * coords[k][0 .. counts[k]) (copied), in that order. Checks, in order:
 *   `out` NULL, `counts` or `coords` NULL, an axis NULL         SW_ETYPE
 *   rank outside [1, SW_TILES_MAX_RANK]                         SW_EINVAL
 *   then axis by axis: an empty axis; a coordinate negative or
 *   INT64_MAX (as for tile sets), in order; a coordinate listed
 *   twice on the axis                                           SW_EINVAL */
SW_API sw_status sw_tile_sel_new(int32_t rank, const int64_t *counts,
                                 const int64_t *const *coords, sw_tile_sel **out,
                                 sw_error *err);
SW_API sw_tile_sel *sw_tile_sel_ref(sw_tile_sel *s);
SW_API void sw_tile_sel_unref(sw_tile_sel *s);

SW_API int32_t sw_tile_sel_rank(const sw_tile_sel *s);
/* How many coordinates axis k takes, and which (NULL / 0 for k out of
 * range). */
SW_API int64_t sw_tile_sel_count(const sw_tile_sel *s, int32_t k);
SW_API const int64_t *sw_tile_sel_axis(const sw_tile_sel *s, int32_t k);
/* The selection as the view sw_tiled_evictable_project and
 * sw_tiled_evictable_project_async take (points into `s`). */
SW_API void sw_tile_sel_view(const sw_tile_sel *s, sw_tile_selection *out);
/* How many tiles the product names; -1 when that exceeds 2^40. */
SW_API int64_t sw_tile_sel_size(const sw_tile_sel *s);
/* Tile i of the product (first axis fastest) into coord[0 .. rank);
 * SW_ERANGE for i outside [0, size). */
SW_API sw_status sw_tile_sel_tile(const sw_tile_sel *s, int64_t i, int64_t *coord,
                                  sw_error *err);
/* The product as a tile set. SW_EOVERFLOW when it names more than 2^40
 * tiles; SW_ETYPE for NULL. */
SW_API sw_status sw_tile_sel_tile_set(const sw_tile_sel *s, sw_tile_set **out, sw_error *err);
/* Same axes with the same coordinates in the same order; equal selections
 * hash equal. */
SW_API int sw_tile_sel_equal(const sw_tile_sel *a, const sw_tile_sel *b);
SW_API uint64_t sw_tile_sel_hash(const sw_tile_sel *s);

/* ---- residency plans ----------------------------------------------------- */

typedef struct sw_residency_plan sw_residency_plan;

/* A plan of three sets (NULL: the empty set), referenced, not copied.
 * SW_ETYPE for `out` NULL; SW_EINVAL when a tile is in two of them. */
SW_API sw_status sw_residency_plan_new(sw_tile_set *promote, sw_tile_set *retain,
                                       sw_tile_set *evict, sw_residency_plan **out,
                                       sw_error *err);
SW_API sw_residency_plan *sw_residency_plan_ref(sw_residency_plan *p);
SW_API void sw_residency_plan_unref(sw_residency_plan *p);
/* The plan's set `which` (borrowed; never NULL for a valid `which`). */
SW_API sw_tile_set *sw_residency_plan_tiles(const sw_residency_plan *p, sw_te_plan_set which);
/* Equal plans have equal sets. */
SW_API int sw_residency_plan_equal(const sw_residency_plan *a, const sw_residency_plan *b);

/* ---- a TiledEvictable's calls in these terms ----------------------------- */

/* A policy's answer: add every tile of `plan` to `out` (sw_te_plan_add),
 * all or none. Checks every set against the carrier's grid first
 * (sw_tile_set_check_grid), then adds promote, retain, evict; on any
 * refusal the tiles added by this call are taken out again. */
SW_API sw_status sw_te_plan_add_residency(sw_te_plan *out, const sw_residency_plan *plan,
                                          sw_error *err);

/* sw_tiled_evictable_promote / _evict / _promote_async / _evict_async /
 * _promote_start / _evict_start of a tile set: the same checks in the same order, the set checked against
 * the grid where the coordinates are (a set of another rank, or a tile
 * outside the grid: SW_EINVAL); SW_ETYPE for a NULL set. */
SW_API sw_status sw_tiled_evictable_promote_tiles(sw_tiled_evictable *te,
                                                  const sw_tile_set *tiles, sw_error *err);
SW_API sw_status sw_tiled_evictable_evict_tiles(sw_tiled_evictable *te,
                                                const sw_tile_set *tiles, sw_error *err);
SW_API sw_status sw_tiled_evictable_promote_tiles_async(sw_tiled_evictable *te,
                                                        const sw_tile_set *tiles,
                                                        sw_te_work **out, sw_error *err);
SW_API sw_status sw_tiled_evictable_evict_tiles_async(sw_tiled_evictable *te,
                                                      const sw_tile_set *tiles,
                                                      sw_te_work **out, sw_error *err);
SW_API sw_status sw_tiled_evictable_promote_tiles_start(sw_tiled_evictable *te,
                                                        const sw_tile_set *tiles,
                                                        sw_te_work **out, sw_error *err);
SW_API sw_status sw_tiled_evictable_evict_tiles_start(sw_tiled_evictable *te,
                                                      const sw_tile_set *tiles,
                                                      sw_te_work **out, sw_error *err);

#ifdef __cplusplus
}
#endif

#endif
