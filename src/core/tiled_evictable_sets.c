/* A TiledEvictable's residency calls and policy plans in terms of tile
 * sets (tile_set.h): the set is checked against the grid, then the
 * coordinate forms of tiled_evictable.h do the work. */
#include "strideweave/tile_set.h"

#include "strideweave/alloc.h"
#include "tiled_evictable_internal.h"

sw_status sw_te_plan_add_residency(sw_te_plan *out, const sw_residency_plan *plan, sw_error *err)
{
    if (!out || !plan)
        return sw_error_set(err, SW_ETYPE, "residency plan: arguments must not be NULL");
    for (int w = SW_TE_PLAN_PROMOTE; w <= SW_TE_PLAN_EVICT; w++) {
        sw_status st = sw_tile_set_check_grid(sw_residency_plan_tiles(plan, (sw_te_plan_set)w),
                                              out->geo, err);
        if (st != SW_OK)
            return st;
    }
    int64_t before[3] = {out->n[0], out->n[1], out->n[2]};
    sw_status st = SW_OK;
    for (int w = SW_TE_PLAN_PROMOTE; st == SW_OK && w <= SW_TE_PLAN_EVICT; w++) {
        const sw_tile_set *s = sw_residency_plan_tiles(plan, (sw_te_plan_set)w);
        for (int64_t i = 0; st == SW_OK && i < sw_tile_set_size(s); i++)
            st = sw_te_plan_add(out, (sw_te_plan_set)w, sw_tile_set_at(s, i), err);
    }
    if (st != SW_OK) /* take this call's tiles out again: the plan is as it was */
        for (int w = 0; w < 3; w++)
            while (out->n[w] > before[w])
                out->in[out->idx[w][--out->n[w]]] = 0;
    return st;
}

/* The set's rows when it fits the carrier's grid; a released carrier or
 * a NULL one is left to the coordinate form to refuse (its check order). */
static sw_status tiles_of(sw_tiled_evictable *te, const sw_tile_set *tiles, sw_error *err)
{
    if (!te || sw_tiled_evictable_is_released(te))
        return SW_OK;
    if (!tiles)
        return sw_error_set(err, SW_ETYPE, "TiledEvictable: the tile set must not be NULL");
    return sw_tile_set_check_grid(tiles, sw_tiled_evictable_geometry(te), err);
}

sw_status sw_tiled_evictable_promote_tiles(sw_tiled_evictable *te, const sw_tile_set *tiles,
                                           sw_error *err)
{
    sw_status st = tiles_of(te, tiles, err);
    return st != SW_OK ? st
                       : sw_tiled_evictable_promote(te, sw_tile_set_coords(tiles),
                                                    sw_tile_set_size(tiles), err);
}

sw_status sw_tiled_evictable_evict_tiles(sw_tiled_evictable *te, const sw_tile_set *tiles,
                                         sw_error *err)
{
    sw_status st = tiles_of(te, tiles, err);
    return st != SW_OK ? st
                       : sw_tiled_evictable_evict(te, sw_tile_set_coords(tiles),
                                                  sw_tile_set_size(tiles), err);
}

sw_status sw_tiled_evictable_promote_tiles_async(sw_tiled_evictable *te,
                                                 const sw_tile_set *tiles, sw_te_work **out,
                                                 sw_error *err)
{
    sw_status st = tiles_of(te, tiles, err);
    return st != SW_OK ? st
                       : sw_tiled_evictable_promote_async(te, sw_tile_set_coords(tiles),
                                                          sw_tile_set_size(tiles), out, err);
}

sw_status sw_tiled_evictable_evict_tiles_async(sw_tiled_evictable *te, const sw_tile_set *tiles,
                                               sw_te_work **out, sw_error *err)
{
    sw_status st = tiles_of(te, tiles, err);
    return st != SW_OK ? st
                       : sw_tiled_evictable_evict_async(te, sw_tile_set_coords(tiles),
                                                        sw_tile_set_size(tiles), out, err);
}

sw_status sw_tiled_evictable_promote_tiles_start(sw_tiled_evictable *te,
                                                 const sw_tile_set *tiles, sw_te_work **out,
                                                 sw_error *err)
{
    sw_status st = tiles_of(te, tiles, err);
    return st != SW_OK ? st
                       : sw_tiled_evictable_promote_start(te, sw_tile_set_coords(tiles),
                                                          sw_tile_set_size(tiles), out, err);
}

sw_status sw_tiled_evictable_evict_tiles_start(sw_tiled_evictable *te, const sw_tile_set *tiles,
                                               sw_te_work **out, sw_error *err)
{
    sw_status st = tiles_of(te, tiles, err);
    return st != SW_OK ? st
                       : sw_tiled_evictable_evict_start(te, sw_tile_set_coords(tiles),
                                                        sw_tile_set_size(tiles), out, err);
}
