/* Tile sets, selections and residency plans (tile_set.h; contract-carriers
 * TE-4, TE-5): immutable refcounted values. */
#include "strideweave/tile_set.h"
#include "fault_internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "strideweave/alloc.h"

/* The values live on the C heap, not sw_malloc's counted blocks: a
 * binding keeps them alive as long as its own objects, which
 * sw_alloc_live_bytes does not count either. Fault site "tile_set". */
static void *value_alloc(size_t bytes)
{
    return SW_FAULT_HIT("tile_set") ? NULL : malloc(bytes);
}

struct sw_tile_set {
    atomic_long refs;
    int32_t rank;     /* -1: empty, made without a rank */
    int64_t n;
    uint64_t hash;    /* computed once, at construction */
    int64_t coords[]; /* n rows of rank entries, canonical order */
};

struct sw_tile_sel {
    atomic_long refs;
    int32_t rank;
    uint64_t hash;
    int64_t counts[SW_TILES_MAX_RANK];
    const int64_t *axes[SW_TILES_MAX_RANK]; /* into values */
    int64_t values[];
};

struct sw_residency_plan {
    atomic_long refs;
    sw_tile_set *sets[3]; /* promote, retain, evict */
};

/* The most tiles a selection's product may name (the binding's bound). */
#define SEL_MAX_TILES (1LL << 40)

static int coord_cmp(int32_t rank, const int64_t *a, const int64_t *b)
{
    for (int32_t k = rank - 1; k >= 0; k--)
        if (a[k] != b[k])
            return a[k] < b[k] ? -1 : 1;
    return 0;
}

/* A negative or INT64_MAX coordinate refused with its message. */
static sw_status check_coord(int64_t v, sw_error *err)
{
    if (v < 0)
        return sw_error_set(err, SW_EINVAL, "tile coordinates must be non-negative");
    if (v == INT64_MAX)
        return sw_error_set(err, SW_EINVAL, "a tile coordinate is too large");
    return SW_OK;
}

/* ---- tile sets ------------------------------------------------------------------ */

static uint64_t set_hash(const sw_tile_set *s)
{
    uint64_t h = 0x345678ULL + (uint64_t)s->n;
    int64_t count = s->n ? s->n * s->rank : 0;
    for (int64_t i = 0; i < count; i++)
        h = (h ^ (uint64_t)s->coords[i]) * 1000003ULL;
    return h;
}

/* An uninitialised set of n rows (n * rank checked by the caller). */
static sw_tile_set *set_alloc(int32_t rank, int64_t n, sw_error *err)
{
    size_t count = (size_t)n * (size_t)(rank > 0 ? rank : 0);
    sw_tile_set *s = value_alloc(sizeof *s + count * sizeof(int64_t));
    if (!s) {
        sw_error_set(err, SW_ENOMEM, "out of memory for a tile set");
        return NULL;
    }
    atomic_init(&s->refs, 1);
    s->rank = n ? rank : (rank > 0 ? rank : -1);
    s->n = n;
    s->hash = 0;
    return s;
}

static sw_tile_set *set_finish(sw_tile_set *s)
{
    s->hash = set_hash(s);
    return s;
}

sw_status sw_tile_set_new(int32_t rank, int64_t n, const int64_t *coords,
                          const sw_tile_geometry *grid, sw_tile_set **out, sw_error *err)
{
    if (!out || (!coords && n > 0))
        return sw_error_set(err, SW_ETYPE, "tile set: arguments must not be NULL");
    if (n < 0)
        return sw_error_set(err, SW_EINVAL, "tile set: a negative count (%lld)", (long long)n);
    if (n > 0 && rank < 1)
        return sw_error_set(err, SW_EINVAL, "a tile coordinate needs at least one axis");
    int64_t count = 0;
    if (n > 0 && (__builtin_mul_overflow(n, (int64_t)rank, &count) ||
                  count > (int64_t)(SIZE_MAX / 2 / sizeof(int64_t))))
        return sw_error_set(err, SW_EOVERFLOW, "tile set: too many coordinates");
    for (int64_t i = 0; i < count; i++)
        if (check_coord(coords[i], err) != SW_OK)
            return SW_EINVAL;
    sw_tile_set *s = set_alloc(rank, n, err);
    if (!s)
        return SW_ENOMEM;
    if (count)
        memcpy(s->coords, coords, (size_t)count * sizeof(int64_t));
    int dup = n ? sw_tiles_sort_coords(rank, n, s->coords, err) : 0;
    sw_status st = dup < 0 ? SW_ENOMEM
                 : dup     ? sw_error_set(err, SW_EINVAL,
                                          "a TileSet cannot hold the same tile twice")
                 : grid    ? sw_tile_set_check_grid(s, grid, err)
                           : SW_OK;
    if (st != SW_OK) {
        free(s);
        return st;
    }
    *out = set_finish(s);
    return SW_OK;
}

sw_tile_set *sw_tile_set_ref(sw_tile_set *s)
{
    if (s)
        atomic_fetch_add(&s->refs, 1);
    return s;
}

void sw_tile_set_unref(sw_tile_set *s)
{
    if (s && atomic_fetch_sub(&s->refs, 1) == 1)
        free(s);
}

int32_t sw_tile_set_rank(const sw_tile_set *s)
{
    return s ? s->rank : -1;
}

int64_t sw_tile_set_size(const sw_tile_set *s)
{
    return s ? s->n : 0;
}

const int64_t *sw_tile_set_coords(const sw_tile_set *s)
{
    return s ? s->coords : NULL;
}

const int64_t *sw_tile_set_at(const sw_tile_set *s, int64_t i)
{
    return s && i >= 0 && i < s->n ? s->coords + i * s->rank : NULL;
}

int sw_tile_set_contains(const sw_tile_set *s, int32_t rank, const int64_t *coord)
{
    if (!s || !coord || !s->n || rank != s->rank)
        return 0;
    int64_t lo = 0, hi = s->n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = coord_cmp(rank, s->coords + mid * rank, coord);
        if (c == 0)
            return 1;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

int sw_tile_set_equal(const sw_tile_set *a, const sw_tile_set *b)
{
    if (!a || !b)
        return a == b;
    if (a->n != b->n)
        return 0;
    if (a->n == 0)
        return 1; /* the empty set is one value whatever rank it was given */
    return a->rank == b->rank &&
           memcmp(a->coords, b->coords, (size_t)(a->n * a->rank) * sizeof(int64_t)) == 0;
}

uint64_t sw_tile_set_hash(const sw_tile_set *s)
{
    return s ? s->hash : 0;
}

sw_status sw_tile_set_check_grid(const sw_tile_set *s, const sw_tile_geometry *g, sw_error *err)
{
    if (!s || !g)
        return sw_error_set(err, SW_ETYPE, "tile set: arguments must not be NULL");
    if (s->n == 0)
        return SW_OK;
    if (s->rank != g->rank)
        return sw_error_set(err, SW_EINVAL, "the tiles have %d axes but the tile grid has %d",
                            (int)s->rank, (int)g->rank);
    for (int64_t i = 0; i < s->n; i++)
        for (int32_t k = 0; k < g->rank; k++)
            if (s->coords[i * s->rank + k] >= g->grid[k])
                return sw_error_set(err, SW_EINVAL,
                                    "tile coordinate %lld is outside axis %d of the tile grid "
                                    "(size %lld)", (long long)s->coords[i * s->rank + k], (int)k,
                                    (long long)g->grid[k]);
    return SW_OK;
}

enum set_op { OP_UNION, OP_INTERSECTION, OP_DIFFERENCE };

/* One sorted merge of a and b into a new set. */
static sw_status set_merge(const sw_tile_set *a, const sw_tile_set *b, enum set_op op,
                           sw_tile_set **out, sw_error *err)
{
    if (!a || !b || !out)
        return sw_error_set(err, SW_ETYPE, "tile set: arguments must not be NULL");
    if (a->n && b->n && a->rank != b->rank)
        return sw_error_set(err, SW_EINVAL, "the tile sets have %d and %d axes",
                            (int)a->rank, (int)b->rank);
    int32_t rank = a->n ? a->rank : b->n ? b->rank : a->rank > 0 ? a->rank : b->rank;
    int64_t cap = op == OP_UNION ? a->n + b->n : a->n;
    sw_tile_set *s = set_alloc(rank, cap, err);
    if (!s)
        return SW_ENOMEM;
    size_t row = (size_t)(rank > 0 ? rank : 0) * sizeof(int64_t);
    int64_t i = 0, j = 0, n = 0;
    while (i < a->n || j < b->n) {
        const int64_t *x = i < a->n ? a->coords + i * rank : NULL;
        const int64_t *y = j < b->n ? b->coords + j * rank : NULL;
        int c = !x ? 1 : !y ? -1 : coord_cmp(rank, x, y);
        const int64_t *take = NULL;
        if (c < 0) {
            take = op != OP_INTERSECTION ? x : NULL;
            i++;
        } else if (c > 0) {
            take = op == OP_UNION ? y : NULL;
            j++;
        } else {
            take = op != OP_DIFFERENCE ? x : NULL;
            i++;
            j++;
        }
        if (take)
            memcpy(s->coords + n++ * rank, take, row);
        if (op != OP_UNION && i == a->n)
            break;
    }
    s->n = n;
    if (!n)
        s->rank = rank > 0 ? rank : -1;
    *out = set_finish(s);
    return SW_OK;
}

sw_status sw_tile_set_union(const sw_tile_set *a, const sw_tile_set *b, sw_tile_set **out,
                            sw_error *err)
{
    return set_merge(a, b, OP_UNION, out, err);
}

sw_status sw_tile_set_intersection(const sw_tile_set *a, const sw_tile_set *b,
                                   sw_tile_set **out, sw_error *err)
{
    return set_merge(a, b, OP_INTERSECTION, out, err);
}

sw_status sw_tile_set_difference(const sw_tile_set *a, const sw_tile_set *b, sw_tile_set **out,
                                 sw_error *err)
{
    return set_merge(a, b, OP_DIFFERENCE, out, err);
}

int sw_tile_set_overlaps(const sw_tile_set *a, const sw_tile_set *b)
{
    if (!a || !b || !a->n || !b->n || a->rank != b->rank)
        return 0;
    int64_t i = 0, j = 0;
    while (i < a->n && j < b->n) {
        int c = coord_cmp(a->rank, a->coords + i * a->rank, b->coords + j * b->rank);
        if (c == 0)
            return 1;
        c < 0 ? i++ : j++;
    }
    return 0;
}

/* ---- tile selections -------------------------------------------------------------- */

sw_status sw_tile_sel_new(int32_t rank, const int64_t *counts, const int64_t *const *coords,
                          sw_tile_sel **out, sw_error *err)
{
    if (!out || !counts || !coords)
        return sw_error_set(err, SW_ETYPE, "tile selection: arguments must not be NULL");
    if (rank < 1 || rank > SW_TILES_MAX_RANK)
        return sw_error_set(err, SW_EINVAL, "a TileSelection needs 1 to %d axes, not %d",
                            SW_TILES_MAX_RANK, (int)rank);
    int64_t total = 0;
    for (int32_t k = 0; k < rank; k++) {
        if (counts[k] > 0 && !coords[k])
            return sw_error_set(err, SW_ETYPE, "tile selection: arguments must not be NULL");
        if (counts[k] <= 0)
            return sw_error_set(err, SW_EINVAL, "axis %d of the selection is empty", (int)k);
        for (int64_t i = 0; i < counts[k]; i++)
            if (check_coord(coords[k][i], err) != SW_OK)
                return SW_EINVAL;
        for (int64_t i = 0; i < counts[k]; i++)
            for (int64_t j = 0; j < i; j++)
                if (coords[k][i] == coords[k][j])
                    return sw_error_set(err, SW_EINVAL,
                                        "axis %d of the selection lists tile %lld twice", (int)k,
                                        (long long)coords[k][i]);
        if (__builtin_add_overflow(total, counts[k], &total) ||
            total > (int64_t)(SIZE_MAX / 2 / sizeof(int64_t)))
            return sw_error_set(err, SW_EOVERFLOW, "tile selection: too many coordinates");
    }
    sw_tile_sel *s = value_alloc(sizeof *s + (size_t)total * sizeof(int64_t));
    if (!s)
        return sw_error_set(err, SW_ENOMEM, "out of memory for a tile selection");
    atomic_init(&s->refs, 1);
    s->rank = rank;
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (uint64_t)rank;
    int64_t *v = s->values;
    for (int32_t k = 0; k < rank; k++) {
        s->counts[k] = counts[k];
        s->axes[k] = v;
        memcpy(v, coords[k], (size_t)counts[k] * sizeof(int64_t));
        h = (h ^ (uint64_t)counts[k]) * 1000003ULL;
        for (int64_t i = 0; i < counts[k]; i++)
            h = (h ^ (uint64_t)v[i]) * 1000003ULL;
        v += counts[k];
    }
    s->hash = h;
    *out = s;
    return SW_OK;
}

sw_tile_sel *sw_tile_sel_ref(sw_tile_sel *s)
{
    if (s)
        atomic_fetch_add(&s->refs, 1);
    return s;
}

void sw_tile_sel_unref(sw_tile_sel *s)
{
    if (s && atomic_fetch_sub(&s->refs, 1) == 1)
        free(s);
}

int32_t sw_tile_sel_rank(const sw_tile_sel *s)
{
    return s ? s->rank : 0;
}

int64_t sw_tile_sel_count(const sw_tile_sel *s, int32_t k)
{
    return s && k >= 0 && k < s->rank ? s->counts[k] : 0;
}

const int64_t *sw_tile_sel_axis(const sw_tile_sel *s, int32_t k)
{
    return s && k >= 0 && k < s->rank ? s->axes[k] : NULL;
}

void sw_tile_sel_view(const sw_tile_sel *s, sw_tile_selection *out)
{
    out->rank = s->rank;
    out->counts = s->counts;
    out->coords = s->axes;
}

int64_t sw_tile_sel_size(const sw_tile_sel *s)
{
    int64_t n = 1;
    for (int32_t k = 0; s && k < s->rank; k++)
        if (__builtin_mul_overflow(n, s->counts[k], &n) || n > SEL_MAX_TILES)
            return -1;
    return s ? n : -1;
}

static void sel_tile(const sw_tile_sel *s, int64_t i, int64_t *coord)
{
    for (int32_t k = 0; k < s->rank; k++) {
        coord[k] = s->axes[k][i % s->counts[k]];
        i /= s->counts[k];
    }
}

sw_status sw_tile_sel_tile(const sw_tile_sel *s, int64_t i, int64_t *coord, sw_error *err)
{
    if (!s || !coord)
        return sw_error_set(err, SW_ETYPE, "tile selection: arguments must not be NULL");
    int64_t n = sw_tile_sel_size(s);
    if (i < 0 || (n >= 0 && i >= n))
        return sw_error_set(err, SW_ERANGE, "tile %lld of a selection of %lld tiles",
                            (long long)i, (long long)n);
    sel_tile(s, i, coord);
    return SW_OK;
}

sw_status sw_tile_sel_tile_set(const sw_tile_sel *s, sw_tile_set **out, sw_error *err)
{
    if (!s || !out)
        return sw_error_set(err, SW_ETYPE, "tile selection: arguments must not be NULL");
    int64_t n = sw_tile_sel_size(s);
    if (n < 0)
        return sw_error_set(err, SW_EOVERFLOW, "the selection names too many tiles");
    sw_tile_set *set = set_alloc(s->rank, n, err);
    if (!set)
        return SW_ENOMEM;
    for (int64_t i = 0; i < n; i++)
        sel_tile(s, i, set->coords + i * s->rank);
    /* distinct per axis, so the product has no duplicates */
    if (sw_tiles_sort_coords(s->rank, n, set->coords, err) < 0) {
        free(set);
        return SW_ENOMEM;
    }
    *out = set_finish(set);
    return SW_OK;
}

int sw_tile_sel_equal(const sw_tile_sel *a, const sw_tile_sel *b)
{
    if (!a || !b)
        return a == b;
    if (a->rank != b->rank)
        return 0;
    for (int32_t k = 0; k < a->rank; k++)
        if (a->counts[k] != b->counts[k] ||
            memcmp(a->axes[k], b->axes[k], (size_t)a->counts[k] * sizeof(int64_t)) != 0)
            return 0;
    return 1;
}

uint64_t sw_tile_sel_hash(const sw_tile_sel *s)
{
    return s ? s->hash : 0;
}

/* ---- residency plans ----------------------------------------------------------- */

static const char *const plan_names[3] = {"promote", "retain", "evict"};

sw_status sw_residency_plan_new(sw_tile_set *promote, sw_tile_set *retain, sw_tile_set *evict,
                                sw_residency_plan **out, sw_error *err)
{
    if (!out)
        return sw_error_set(err, SW_ETYPE, "residency plan: arguments must not be NULL");
    sw_tile_set *given[3] = {promote, retain, evict};
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 3; j++)
            if (sw_tile_set_overlaps(given[i], given[j]))
                return sw_error_set(err, SW_EINVAL,
                                    "a tile cannot be in both %s and %s of one ResidencyPlan",
                                    plan_names[i], plan_names[j]);
    sw_residency_plan *p = value_alloc(sizeof *p);
    if (!p)
        return sw_error_set(err, SW_ENOMEM, "out of memory for a residency plan");
    for (int i = 0; i < 3; i++) {
        p->sets[i] = given[i] ? sw_tile_set_ref(given[i]) : NULL;
        if (!p->sets[i] && sw_tile_set_new(-1, 0, NULL, NULL, &p->sets[i], err) != SW_OK) {
            while (i--)
                sw_tile_set_unref(p->sets[i]);
            free(p);
            return SW_ENOMEM;
        }
    }
    atomic_init(&p->refs, 1);
    *out = p;
    return SW_OK;
}

sw_residency_plan *sw_residency_plan_ref(sw_residency_plan *p)
{
    if (p)
        atomic_fetch_add(&p->refs, 1);
    return p;
}

void sw_residency_plan_unref(sw_residency_plan *p)
{
    if (!p || atomic_fetch_sub(&p->refs, 1) != 1)
        return;
    for (int i = 0; i < 3; i++)
        sw_tile_set_unref(p->sets[i]);
    free(p);
}

sw_tile_set *sw_residency_plan_tiles(const sw_residency_plan *p, sw_te_plan_set which)
{
    return p && (int)which >= 0 && (int)which < 3 ? p->sets[which] : NULL;
}

int sw_residency_plan_equal(const sw_residency_plan *a, const sw_residency_plan *b)
{
    if (!a || !b)
        return a == b;
    for (int i = 0; i < 3; i++)
        if (!sw_tile_set_equal(a->sets[i], b->sets[i]))
            return 0;
    return 1;
}
