/* Tile geometry, the footprint check and the projection gather of a
 * TiledEvictable (see tiles.h). Pure arithmetic over int64 plus one bitmap;
 * no Python. */
#include "strideweave/tiles.h"
#include "tiles_internal.h"
#include "strideweave/tensor_walk.h"

#include <string.h>

#include "strideweave/alloc.h"

sw_status sw_tiles_check_extents(const char *what, int32_t n, const int64_t *extents,
                                 int32_t checked, sw_error *err)
{
    if (n < 1 || n > SW_TILES_MAX_RANK)
        return sw_error_set(err, SW_EINVAL, "%s needs 1 to %d entries, not %d", what,
                            SW_TILES_MAX_RANK, (int)n);
    for (int32_t k = 0; k < n && k < checked; k++)
        if (extents[k] < 1)
            return sw_error_set(err, SW_EINVAL, "%s entries must be positive", what);
    return SW_OK;
}

sw_status sw_tiles_geometry_init_shapes(sw_tile_geometry *g, int32_t grid_rank,
                                        const int64_t *grid, int32_t tile_rank,
                                        const int64_t *tile, sw_error *err)
{
    sw_status st;
    if ((st = sw_tiles_check_extents("grid_shape", grid_rank, grid, grid_rank, err)) != SW_OK ||
        (st = sw_tiles_check_extents("tile_shape", tile_rank, tile, tile_rank, err)) != SW_OK)
        return st;
    if (grid_rank != tile_rank)
        return sw_error_set(err, SW_EINVAL, "grid_shape has %d axes but tile_shape has %d",
                            (int)grid_rank, (int)tile_rank);
    memset(g, 0, sizeof *g);
    g->rank = grid_rank;
    g->ntiles = g->tile_size = g->size = 1;
    for (int32_t k = 0; k < grid_rank; k++) {
        g->grid[k] = grid[k];
        g->tile[k] = tile[k];
        if (__builtin_mul_overflow(grid[k], tile[k], &g->logical[k]) ||
            __builtin_mul_overflow(g->ntiles, grid[k], &g->ntiles) ||
            __builtin_mul_overflow(g->tile_size, tile[k], &g->tile_size) ||
            __builtin_mul_overflow(g->size, g->logical[k], &g->size))
            return sw_error_set(err, SW_EOVERFLOW, "the tiled logical size overflows int64");
    }
    return SW_OK;
}

sw_status sw_tiles_geometry_init(sw_tile_geometry *g, int32_t rank, const int64_t *grid,
                                 const int64_t *tile, sw_error *err)
{
    return sw_tiles_geometry_init_shapes(g, rank, grid, rank, tile, err);
}

int64_t sw_tiles_tile_index(const sw_tile_geometry *g, const int64_t *coord)
{
    int64_t t = 0;
    for (int32_t k = g->rank - 1; k >= 0; k--)
        t = t * g->grid[k] + coord[k];
    return t;
}

void sw_tiles_tile_coord(const sw_tile_geometry *g, int64_t t, int64_t *coord)
{
    for (int32_t k = 0; k < g->rank; k++) {
        coord[k] = t % g->grid[k];
        t /= g->grid[k];
    }
}

void sw_tiles_locate(const sw_tile_geometry *g, int64_t slot, int64_t *tile, int64_t *within)
{
    int64_t t = 0, w = 0, tmul = 1, wmul = 1;
    for (int32_t k = 0; k < g->rank; k++) {
        int64_t x = slot % g->logical[k];
        slot /= g->logical[k];
        t += (x / g->tile[k]) * tmul;
        w += (x % g->tile[k]) * wmul;
        tmul *= g->grid[k];
        wmul *= g->tile[k];
    }
    *tile = t;
    *within = w;
}

int64_t sw_tiles_slot(const sw_tile_geometry *g, int64_t t, int64_t within)
{
    int64_t slot = 0, mul = 1;
    for (int32_t k = 0; k < g->rank; k++) {
        int64_t x = (t % g->grid[k]) * g->tile[k] + within % g->tile[k];
        t /= g->grid[k];
        within /= g->tile[k];
        slot += x * mul;
        mul *= g->logical[k];
    }
    return slot;
}

int sw_tiles_is_zero_tile(const sw_tile_geometry *g, const void *base, size_t eb, int64_t t)
{
    const unsigned char *b = base;
    for (int64_t w = 0; w < g->tile_size; w++) {
        const unsigned char *v = b + (size_t)sw_tiles_slot(g, t, w) * eb;
        for (size_t k = 0; k < eb; k++)
            if (v[k])
                return 0;
    }
    return 1;
}

int64_t sw_tiles_layout_slot(const sw_layout *layout, int64_t offset, int64_t i)
{
    int64_t s = offset;
    for (int32_t l = 0; l < layout->nleaves; l++) {
        s += (i % layout->extents[l]) * layout->strides[l];
        i /= layout->extents[l];
    }
    return s;
}

int sw_tiles_is_identity(const sw_tile_geometry *g, const sw_layout *layout, int64_t offset)
{
    if (offset != 0 || layout->size != g->size)
        return 0;
    int64_t expect = 1;
    for (int32_t l = 0; l < layout->nleaves; l++) {
        if (layout->extents[l] > 1 && layout->strides[l] != expect)
            return 0;
        expect *= layout->extents[l];
    }
    return 1;
}

/* Odometer over the layout's leaves in ordinal order: the slot of the next
 * logical index without a division per leaf. */
typedef struct leaf_walk {
    const sw_layout *layout;
    int64_t *digits;
    int64_t slot;
} leaf_walk;

static void leaf_walk_next(leaf_walk *w)
{
    const sw_layout *L = w->layout;
    for (int32_t l = 0; l < L->nleaves; l++) {
        if (++w->digits[l] < L->extents[l]) {
            w->slot += L->strides[l];
            return;
        }
        w->digits[l] = 0;
        w->slot -= L->strides[l] * (L->extents[l] - 1);
    }
}

int sw_tiles_matches_shape(const sw_tile_geometry *g, const sw_layout *layout)
{
    int64_t sizes[SW_TILES_MAX_RANK];
    if (sw_layout_mode_sizes(layout, sizes, SW_TILES_MAX_RANK) != g->rank)
        return 0;
    for (int32_t k = 0; k < g->rank; k++)
        if (sizes[k] != g->logical[k])
            return 0;
    return 1;
}

int sw_tiles_check_footprints(const sw_tile_geometry *g, const sw_layout *layout,
                              int64_t offset, sw_error *err)
{
    if (sw_tiles_is_identity(g, layout, offset))
        return 1;
    uint8_t *seen = sw_calloc((size_t)(g->size / 8 + 1), 1);
    int64_t *digits = seen ? sw_calloc((size_t)layout->nleaves + 1, sizeof(int64_t)) : NULL;
    if (!digits) {
        sw_free(seen);
        sw_error_set(err, SW_ENOMEM, "out of memory checking tile footprints");
        return -1;
    }
    leaf_walk w = {.layout = layout, .digits = digits, .slot = offset};
    int ok = 1;
    for (int64_t i = 0; i < g->size && ok; i++, leaf_walk_next(&w)) {
        int64_t s = w.slot, ts, ti, ws, wi;
        if (s < 0 || s >= g->size || (seen[s >> 3] >> (s & 7)) & 1) {
            ok = 0;
            break;
        }
        seen[s >> 3] |= (uint8_t)(1u << (s & 7));
        sw_tiles_locate(g, s, &ts, &ws);
        sw_tiles_locate(g, i, &ti, &wi);
        ok = ts == ti;
    }
    sw_free(digits);
    sw_free(seen);
    if (!ok)
        sw_error_set(err, SW_EINVAL,
                     "the tensor's layout does not keep the tile footprints: every tile's "
                     "logical indices must map to that tile's own slots, each once");
    return ok;
}

sw_status sw_tiles_bind_selection(const sw_tile_geometry *g, const sw_tile_selection *sel,
                                  sw_error *err)
{
    if (sel->rank != g->rank)
        return sw_error_set(err, SW_EINVAL,
                            "the selection has %d axes but the tile grid has %d",
                            (int)sel->rank, (int)g->rank);
    for (int32_t k = 0; k < g->rank; k++)
        for (int64_t j = 0; j < sel->counts[k]; j++)
            if (sel->coords[k][j] < 0 || sel->coords[k][j] >= g->grid[k])
                return sw_error_set(err, SW_EINVAL,
                                    "tile coordinate %lld is outside axis %d of the tile "
                                    "grid (size %lld)",
                                    (long long)sel->coords[k][j], (int)k,
                                    (long long)g->grid[k]);
    return SW_OK;
}

int64_t sw_tiles_compact_shape(const sw_tile_geometry *g, const sw_tile_selection *sel,
                               int64_t *shape)
{
    int64_t n = 1;
    for (int32_t k = 0; k < g->rank; k++)
        if (__builtin_mul_overflow(sel->counts[k], g->tile[k], &shape[k]) ||
            __builtin_mul_overflow(n, shape[k], &n))
            return -1;
    return n;
}

int64_t sw_tiles_source_index(const sw_tile_geometry *g, const sw_tile_selection *sel,
                              const int64_t *compact_shape, int64_t c)
{
    int64_t s = 0, mul = 1;
    for (int32_t k = 0; k < g->rank; k++) {
        int64_t ck = c % compact_shape[k];
        c /= compact_shape[k];
        int64_t sk = sel->coords[k][ck / g->tile[k]] * g->tile[k] + ck % g->tile[k];
        s += sk * mul;
        mul *= g->logical[k];
    }
    return s;
}

/* Reversed-tuple order: the last entry decides first. */
static int coord_cmp(int32_t rank, const int64_t *a, const int64_t *b)
{
    for (int32_t k = rank - 1; k >= 0; k--)
        if (a[k] != b[k])
            return a[k] < b[k] ? -1 : 1;
    return 0;
}

int sw_tiles_sort_coords(int32_t rank, int64_t n, int64_t *coords, sw_error *err)
{
    if (n < 2 || rank == 0)
        return n >= 2; /* rank 0 rows are all equal */
    size_t row = (size_t)rank * sizeof(int64_t);
    int64_t *tmp = sw_malloc((size_t)n * row);
    if (!tmp) {
        sw_error_set(err, SW_ENOMEM, "out of memory sorting tile coordinates");
        return -1;
    }
    /* Bottom-up merge sort: stable, no comparator context needed. */
    int64_t *src = coords, *dst = tmp;
    for (int64_t width = 1; width < n; width *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * width) {
            int64_t mid = lo + width < n ? lo + width : n;
            int64_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t i = lo, j = mid, o = lo;
            while (i < mid || j < hi) {
                int take_left = j >= hi ||
                                (i < mid && coord_cmp(rank, src + i * rank, src + j * rank) <= 0);
                memcpy(dst + o * rank, src + (take_left ? i : j) * rank, row);
                take_left ? i++ : j++;
                o++;
            }
        }
        int64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != coords)
        memcpy(coords, src, (size_t)n * row);
    sw_free(tmp);
    for (int64_t i = 1; i < n; i++)
        if (coord_cmp(rank, coords + (i - 1) * rank, coords + i * rank) == 0)
            return 1;
    return 0;
}

void sw_tiles_run_source(const sw_tile_geometry *g, const sw_tile_selection *sel,
                         const int64_t *c, int64_t *tile, int64_t *s, int64_t *within)
{
    int64_t tc[SW_TILES_MAX_RANK], at = 0, mul = 1, w = 0, wmul = 1;
    for (int32_t k = 0; k < g->rank; k++) {
        tc[k] = sel->coords[k][c[k] / g->tile[k]];
        int64_t x = c[k] % g->tile[k];
        at += (tc[k] * g->tile[k] + x) * mul;
        w += x * wmul;
        mul *= g->logical[k];
        wmul *= g->tile[k];
    }
    *tile = sw_tiles_tile_index(g, tc);
    *s = at;
    *within = w;
}

void sw_tiles_run_next(const sw_tile_geometry *g, const int64_t *shape, int64_t *c)
{
    c[0] += g->tile[0];
    for (int32_t k = 0; k < g->rank - 1 && c[k] >= shape[k]; k++) {
        c[k] = 0;
        c[k + 1]++;
    }
}

/* One run of tile[0] slots along axis 0 of the identity layout: contiguous
 * in the source tile storage and in the destination. */
static void gather_identity(const sw_tile_geometry *g, const sw_tile_selection *sel,
                            const sw_tile_source *tiles, size_t elem, const int64_t *shape,
                            int64_t n, unsigned char *dst)
{
    int64_t run = g->tile[0];
    int64_t c[SW_TILES_MAX_RANK] = {0}; /* compact coordinate, axis 0 at run starts */
    for (int64_t at = 0; at < n; at += run) {
        int64_t t, s, within;
        sw_tiles_run_source(g, sel, c, &t, &s, &within);
        const sw_tile_source *src = &tiles[t];
        int64_t from = src->full ? s : within;
        if (src->base) /* NULL: the caller already put this tile in place */
            memcpy(dst + (size_t)at * elem, src->base + (size_t)from * elem, (size_t)run * elem);
        sw_tiles_run_next(g, shape, c);
    }
}

sw_status sw_tiles_gather(const sw_tile_geometry *g, const sw_layout *layout, int64_t offset,
                          const sw_tile_selection *sel, const sw_tile_source *tiles,
                          size_t elem, unsigned char *dst, sw_error *err)
{
    int64_t shape[SW_TILES_MAX_RANK];
    int64_t n = sw_tiles_compact_shape(g, sel, shape);
    if (n < 0)
        return sw_error_set(err, SW_EOVERFLOW, "the projection size overflows int64");
    if (sw_tiles_is_identity(g, layout, offset)) {
        gather_identity(g, sel, tiles, elem, shape, n, dst);
        return SW_OK;
    }
    for (int64_t c = 0; c < n; c++) {
        int64_t s = sw_tiles_source_index(g, sel, shape, c);
        int64_t slot = sw_tiles_layout_slot(layout, offset, s), t, w;
        sw_tiles_locate(g, slot, &t, &w);
        const sw_tile_source *src = &tiles[t];
        memcpy(dst + (size_t)c * elem, src->base + (size_t)(src->full ? slot : w) * elem, elem);
    }
    return SW_OK;
}

int64_t sw_tiles_runs(const sw_tile_geometry *g, int64_t t, sw_tile_run *runs)
{
    int64_t run = g->tile[0], n = 0;
    for (int64_t w = 0; w < g->tile_size; w += run) {
        int64_t slot = sw_tiles_slot(g, t, w);
        if (n > 0 && runs[n - 1].slot + runs[n - 1].count == slot) {
            runs[n - 1].count += run;
            continue;
        }
        runs[n++] = (sw_tile_run){.slot = slot, .within = w, .count = run};
    }
    return n;
}
