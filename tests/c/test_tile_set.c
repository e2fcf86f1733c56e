/* Tile sets, selections and residency plans on the public headers
 * (contract-carriers TE-4, TE-5): refusals make nothing and allocate
 * nothing; canonical order (reversed tuple); set algebra; hash and
 * equality agree; grid binding; a TiledEvictable's residency calls and
 * policy plans in terms of sets; many threads reading one set (TSan). */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "strideweave/strideweave.h"

static float value_of(int64_t slot) { return (float)slot * 0.5f + 1.25f; }

#define MAXS 24
#define MAXT 6
#include "te_fixture.h"
#include "strideweave/testing.h"

static sw_tile_set *set_of(int32_t rank, int64_t n, const int64_t *coords)
{
    sw_tile_set *s = NULL;
    CHECK(sw_tile_set_new(rank, n, coords, NULL, &s, NULL) == SW_OK);
    return s;
}

static int rows_are(const sw_tile_set *s, int64_t n, const int64_t *want)
{
    int32_t r = sw_tile_set_rank(s);
    return sw_tile_set_size(s) == n &&
           (n == 0 || memcmp(sw_tile_set_coords(s), want, (size_t)(n * r) * sizeof *want) == 0);
}

/* Each refusal: its status, a message, *out untouched, no bytes kept. */
static void test_te5_set_refusals_change_nothing(void)
{
    sw_tile_set *const sentinel = (sw_tile_set *)(uintptr_t)0x1234;
    struct {
        int32_t rank;
        int64_t n;
        int64_t coords[4];
        int null_coords;
        sw_status want;
        const char *msg;
    } cases[] = {
        {2, 1, {0}, 1, SW_ETYPE, "NULL"},
        {2, -1, {0}, 0, SW_EINVAL, "negative count"},
        {0, 1, {0}, 0, SW_EINVAL, "at least one axis"},
        {2, 2, {0, 1, -1, 0}, 0, SW_EINVAL, "non-negative"},
        {1, 2, {INT64_MAX, 0}, 0, SW_EINVAL, "too large"},
        {2, 2, {1, 1, 1, 1}, 0, SW_EINVAL, "same tile twice"},
        {1, 4, {3, 0, 2, 0}, 0, SW_EINVAL, "same tile twice"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t live = sw_alloc_live_bytes();
        sw_tile_set *out = sentinel;
        sw_error err = {0};
        CHECK(sw_tile_set_new(cases[i].rank, cases[i].n,
                              cases[i].null_coords ? NULL : cases[i].coords, NULL, &out,
                              &err) == cases[i].want);
        CHECK(err.code == cases[i].want && strstr(err.msg, cases[i].msg));
        CHECK(out == sentinel);
        CHECK_EQ_I64(sw_alloc_live_bytes(), live);
    }
    sw_error err;
    CHECK(sw_tile_set_new(1, 0, NULL, NULL, NULL, &err) == SW_ETYPE);
    /* an order of checks: a negative entry is named before a duplicate */
    int64_t both[] = {1, 1, -1};
    sw_tile_set *out = sentinel;
    CHECK(sw_tile_set_new(1, 3, both, NULL, &out, &err) == SW_EINVAL);
    CHECK(strstr(err.msg, "non-negative") && out == sentinel);
}

/* TE-5: sorted by the last entry first; the empty set is one value. */
static void test_te5_canonical_order_and_empty(void)
{
    int64_t in[] = {1, 1, 0, 1, 2, 0}, want[] = {2, 0, 0, 1, 1, 1};
    sw_tile_set *s = set_of(2, 3, in);
    CHECK(sw_tile_set_rank(s) == 2 && rows_are(s, 3, want));
    CHECK(in[0] == 1 && in[1] == 1); /* the caller's rows are copied, not sorted */
    CHECK(sw_tile_set_at(s, 1)[0] == 0 && sw_tile_set_at(s, 1)[1] == 1);
    CHECK(sw_tile_set_at(s, 3) == NULL && sw_tile_set_at(s, -1) == NULL);
    CHECK(sw_tile_set_contains(s, 2, (int64_t[]){0, 1}));
    CHECK(sw_tile_set_contains(s, 2, (int64_t[]){2, 0}));
    CHECK(!sw_tile_set_contains(s, 2, (int64_t[]){3, 3}));
    CHECK(!sw_tile_set_contains(s, 1, (int64_t[]){0}));
    CHECK(!sw_tile_set_contains(s, 2, NULL));

    sw_tile_set *e = set_of(-1, 0, NULL), *e3 = set_of(3, 0, NULL);
    CHECK(sw_tile_set_rank(e) == -1 && sw_tile_set_rank(e3) == 3);
    CHECK(sw_tile_set_size(e) == 0 && sw_tile_set_coords(e) != NULL);
    CHECK(sw_tile_set_equal(e, e3) && sw_tile_set_hash(e) == sw_tile_set_hash(e3));
    CHECK(!sw_tile_set_equal(e, s));
    CHECK(!sw_tile_set_contains(e, 2, (int64_t[]){0, 1}));
    sw_tile_set_unref(e);
    sw_tile_set_unref(e3);
    sw_tile_set_unref(s);
}

/* Equal sets (any input order) compare and hash equal; others differ. */
static void test_te5_hash_equality_consistent(void)
{
    int64_t a[] = {1, 1, 0, 1, 2, 0}, b[] = {0, 1, 2, 0, 1, 1}, c[] = {1, 1, 0, 1, 2, 1};
    int64_t d[] = {1, 1, 0, 1};
    sw_tile_set *x = set_of(2, 3, a), *y = set_of(2, 3, b), *z = set_of(2, 3, c);
    sw_tile_set *w = set_of(2, 2, d), *r3 = set_of(3, 2, (int64_t[]){1, 1, 0, 1, 2, 0});
    CHECK(sw_tile_set_equal(x, y) && sw_tile_set_equal(y, x));
    CHECK(sw_tile_set_hash(x) == sw_tile_set_hash(y));
    CHECK(!sw_tile_set_equal(x, z) && sw_tile_set_hash(x) != sw_tile_set_hash(z));
    CHECK(!sw_tile_set_equal(x, w) && sw_tile_set_hash(x) != sw_tile_set_hash(w));
    CHECK(!sw_tile_set_equal(w, r3)); /* same entries, another rank */
    CHECK(sw_tile_set_equal(NULL, NULL) && !sw_tile_set_equal(x, NULL));
    CHECK(sw_tile_set_ref(x) == x);
    sw_tile_set_unref(x);
    sw_tile_set_unref(x);
    sw_tile_set_unref(y);
    sw_tile_set_unref(z);
    sw_tile_set_unref(w);
    sw_tile_set_unref(r3);
    sw_tile_set_unref(NULL);
}

static void test_te5_set_algebra(void)
{
    int64_t a_rows[] = {0, 0, 1, 0, 1, 1}, b_rows[] = {1, 1, 2, 1, 0, 0, 3, 3};
    sw_tile_set *a = set_of(2, 3, a_rows), *b = set_of(2, 4, b_rows), *u, *i, *d, *d2;
    CHECK(sw_tile_set_union(a, b, &u, NULL) == SW_OK);
    CHECK(sw_tile_set_intersection(a, b, &i, NULL) == SW_OK);
    CHECK(sw_tile_set_difference(a, b, &d, NULL) == SW_OK);
    CHECK(sw_tile_set_difference(b, a, &d2, NULL) == SW_OK);
    CHECK(rows_are(u, 5, (int64_t[]){0, 0, 1, 0, 1, 1, 2, 1, 3, 3}));
    CHECK(rows_are(i, 2, (int64_t[]){0, 0, 1, 1}));
    CHECK(rows_are(d, 1, (int64_t[]){1, 0}));
    CHECK(rows_are(d2, 2, (int64_t[]){2, 1, 3, 3}));
    /* the results are sets like any other: equal to one built directly */
    sw_tile_set *direct = set_of(2, 2, (int64_t[]){3, 3, 2, 1});
    CHECK(sw_tile_set_equal(d2, direct) && sw_tile_set_hash(d2) == sw_tile_set_hash(direct));
    CHECK(sw_tile_set_overlaps(a, b) && !sw_tile_set_overlaps(d, d2));

    /* the empty set of any rank combines with any set */
    sw_tile_set *e = set_of(-1, 0, NULL), *e5 = set_of(5, 0, NULL), *r;
    CHECK(sw_tile_set_union(e5, a, &r, NULL) == SW_OK);
    CHECK(sw_tile_set_equal(r, a) && sw_tile_set_rank(r) == 2);
    sw_tile_set_unref(r);
    CHECK(sw_tile_set_intersection(a, e, &r, NULL) == SW_OK);
    CHECK(sw_tile_set_size(r) == 0 && sw_tile_set_rank(r) == 2);
    sw_tile_set_unref(r);
    CHECK(sw_tile_set_difference(a, a, &r, NULL) == SW_OK);
    CHECK(sw_tile_set_size(r) == 0 && sw_tile_set_equal(r, e));
    sw_tile_set_unref(r);

    /* refusals: another rank, NULL; *out untouched */
    sw_tile_set *r1 = set_of(1, 1, (int64_t[]){0}), *keep = (sw_tile_set *)(uintptr_t)0x99;
    sw_error err;
    int64_t live = sw_alloc_live_bytes();
    r = keep;
    CHECK(sw_tile_set_union(a, r1, &r, &err) == SW_EINVAL && r == keep);
    CHECK(strstr(err.msg, "2 and 1 axes"));
    CHECK(sw_tile_set_intersection(NULL, a, &r, &err) == SW_ETYPE && r == keep);
    CHECK(sw_tile_set_difference(a, b, NULL, &err) == SW_ETYPE);
    CHECK_EQ_I64(sw_alloc_live_bytes(), live);
    CHECK(!sw_tile_set_overlaps(a, r1));

    sw_tile_set *all[] = {a, b, u, i, d, d2, direct, e, e5, r1};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        sw_tile_set_unref(all[k]);
}

/* TE-4/TE-5 binding: rank and extent against a grid, at construction or
 * after. */
static void test_te4_grid_binding(void)
{
    sw_tile_geometry g;
    sw_tiles_geometry_init(&g, 2, (int64_t[]){3, 2}, (int64_t[]){2, 2}, NULL);
    sw_tile_set *ok = NULL, *out = NULL;
    sw_error err;
    CHECK(sw_tile_set_new(2, 2, (int64_t[]){2, 1, 0, 0}, &g, &ok, &err) == SW_OK);
    CHECK(sw_tile_set_check_grid(ok, &g, &err) == SW_OK);
    int64_t live = sw_alloc_live_bytes();
    CHECK(sw_tile_set_new(2, 1, (int64_t[]){0, 2}, &g, &out, &err) == SW_EINVAL && !out);
    CHECK(strstr(err.msg, "outside axis 1 of the tile grid (size 2)"));
    CHECK(sw_tile_set_new(1, 1, (int64_t[]){0}, &g, &out, &err) == SW_EINVAL && !out);
    CHECK(strstr(err.msg, "the tiles have 1 axes but the tile grid has 2"));
    CHECK_EQ_I64(sw_alloc_live_bytes(), live);
    sw_tile_set *e = set_of(-1, 0, NULL);
    CHECK(sw_tile_set_check_grid(e, &g, &err) == SW_OK);
    CHECK(sw_tile_set_check_grid(NULL, &g, &err) == SW_ETYPE);
    sw_tile_set_unref(e);
    sw_tile_set_unref(ok);
}

/* TE-4: a selection, its product (first axis fastest), its set. */
static void test_te4_selection(void)
{
    const int64_t ax0[] = {7, 2}, ax1[] = {4, 9}, counts[] = {2, 2};
    const int64_t *const axes[] = {ax0, ax1};
    sw_tile_sel *s = NULL, *same = NULL, *other = NULL;
    CHECK(sw_tile_sel_new(2, counts, axes, &s, NULL) == SW_OK);
    CHECK(sw_tile_sel_rank(s) == 2 && sw_tile_sel_count(s, 1) == 2 && sw_tile_sel_size(s) == 4);
    CHECK(sw_tile_sel_axis(s, 0)[0] == 7 && sw_tile_sel_axis(s, 2) == NULL);
    int64_t want[] = {7, 4, 2, 4, 7, 9, 2, 9}, c[2];
    for (int64_t i = 0; i < 4; i++) {
        CHECK(sw_tile_sel_tile(s, i, c, NULL) == SW_OK);
        CHECK(c[0] == want[2 * i] && c[1] == want[2 * i + 1]);
    }
    sw_error err;
    CHECK(sw_tile_sel_tile(s, 4, c, &err) == SW_ERANGE);
    sw_tile_set *ts = NULL;
    CHECK(sw_tile_sel_tile_set(s, &ts, NULL) == SW_OK);
    CHECK(rows_are(ts, 4, (int64_t[]){2, 4, 7, 4, 2, 9, 7, 9}));
    sw_tile_selection view;
    sw_tile_sel_view(s, &view);
    CHECK(view.rank == 2 && view.counts[0] == 2 && view.coords[1][1] == 9);

    CHECK(sw_tile_sel_new(2, counts, (const int64_t *const[]){ax0, ax1}, &same, NULL) == SW_OK);
    CHECK(sw_tile_sel_new(2, counts, (const int64_t *const[]){(int64_t[]){2, 7}, ax1}, &other,
                          NULL) == SW_OK);
    CHECK(sw_tile_sel_equal(s, same) && sw_tile_sel_hash(s) == sw_tile_sel_hash(same));
    CHECK(!sw_tile_sel_equal(s, other)); /* the order on an axis matters */
    sw_tile_set *ts2 = NULL;
    CHECK(sw_tile_sel_tile_set(other, &ts2, NULL) == SW_OK && sw_tile_set_equal(ts, ts2));
    sw_tile_set_unref(ts2);

    /* refusals, in order; nothing made, nothing kept */
    sw_tile_sel *const sentinel = (sw_tile_sel *)(uintptr_t)0x77, *out = sentinel;
    int64_t live = sw_alloc_live_bytes();
    CHECK(sw_tile_sel_new(0, counts, axes, &out, &err) == SW_EINVAL);
    CHECK(strstr(err.msg, "1 to 32 axes, not 0"));
    CHECK(sw_tile_sel_new(33, counts, axes, &out, &err) == SW_EINVAL);
    CHECK(sw_tile_sel_new(2, (int64_t[]){2, 0}, axes, &out, &err) == SW_EINVAL);
    CHECK(strstr(err.msg, "axis 1 of the selection is empty"));
    CHECK(sw_tile_sel_new(2, counts, (const int64_t *const[]){(int64_t[]){1, 1}, (int64_t[]){-1, 0}},
                          &out, &err) == SW_EINVAL);
    CHECK(strstr(err.msg, "axis 0 of the selection lists tile 1 twice")); /* axis 0 first */
    CHECK(sw_tile_sel_new(2, counts, (const int64_t *const[]){ax0, (int64_t[]){3, -1}}, &out,
                          &err) == SW_EINVAL);
    CHECK(strstr(err.msg, "non-negative"));
    CHECK(sw_tile_sel_new(1, (int64_t[]){2}, (const int64_t *const[]){(int64_t[]){INT64_MAX, 1}},
                          &out, &err) == SW_EINVAL);
    CHECK(strstr(err.msg, "too large"));
    CHECK(sw_tile_sel_new(2, counts, (const int64_t *const[]){ax0, NULL}, &out, &err) ==
          SW_ETYPE);
    CHECK(sw_tile_sel_new(2, NULL, axes, &out, &err) == SW_ETYPE);
    CHECK(out == sentinel);
    CHECK_EQ_I64(sw_alloc_live_bytes(), live);

    /* a product too big to list */
    int64_t many[1024];
    for (int i = 0; i < 1024; i++)
        many[i] = i;
    const int64_t *const big_axes[] = {many, many, many, many, many};
    sw_tile_sel *big = NULL;
    CHECK(sw_tile_sel_new(5, (int64_t[]){1024, 1024, 1024, 1024, 1024}, big_axes, &big, NULL) ==
          SW_OK);
    CHECK(sw_tile_sel_size(big) == -1);
    ts2 = NULL;
    CHECK(sw_tile_sel_tile_set(big, &ts2, &err) == SW_EOVERFLOW && !ts2);
    CHECK(strstr(err.msg, "too many tiles"));
    sw_tile_sel_unref(big);

    sw_tile_set_unref(ts);
    sw_tile_sel_unref(s);
    sw_tile_sel_unref(same);
    sw_tile_sel_unref(other);
}

static void test_te5_residency_plan(void)
{
    sw_tile_set *a = set_of(1, 1, (int64_t[]){0}), *b = set_of(1, 1, (int64_t[]){1});
    sw_tile_set *a2 = set_of(1, 2, (int64_t[]){2, 0});
    sw_residency_plan *p = NULL, *q = NULL, *empty = NULL, *empty2 = NULL;
    CHECK(sw_residency_plan_new(a, NULL, b, &p, NULL) == SW_OK);
    CHECK(sw_residency_plan_tiles(p, SW_TE_PLAN_PROMOTE) == a);
    CHECK(sw_tile_set_size(sw_residency_plan_tiles(p, SW_TE_PLAN_RETAIN)) == 0);
    CHECK(sw_residency_plan_tiles(p, (sw_te_plan_set)3) == NULL);
    CHECK(sw_residency_plan_new(a, set_of(-1, 0, NULL), b, &q, NULL) == SW_OK);
    sw_tile_set_unref(sw_residency_plan_tiles(q, SW_TE_PLAN_RETAIN)); /* the plan holds its own */
    CHECK(sw_residency_plan_equal(p, q));
    CHECK(sw_residency_plan_new(NULL, NULL, NULL, &empty, NULL) == SW_OK);
    CHECK(sw_residency_plan_new(NULL, NULL, NULL, &empty2, NULL) == SW_OK);
    CHECK(sw_residency_plan_equal(empty, empty2) && !sw_residency_plan_equal(p, empty));
    sw_residency_plan *const sentinel = (sw_residency_plan *)(uintptr_t)0x55, *out = sentinel;
    sw_error err;
    int64_t live = sw_alloc_live_bytes();
    CHECK(sw_residency_plan_new(b, NULL, a2, &out, &err) == SW_OK);
    sw_residency_plan_unref(out);
    out = sentinel;
    CHECK(sw_residency_plan_new(a, a2, NULL, &out, &err) == SW_EINVAL && out == sentinel);
    CHECK(strstr(err.msg, "both promote and retain"));
    CHECK(sw_residency_plan_new(NULL, a2, a, &out, &err) == SW_EINVAL && out == sentinel);
    CHECK(strstr(err.msg, "both retain and evict"));
    CHECK(sw_residency_plan_new(NULL, NULL, NULL, NULL, &err) == SW_ETYPE);
    CHECK_EQ_I64(sw_alloc_live_bytes(), live);
    sw_residency_plan *r = sw_residency_plan_ref(p);
    sw_residency_plan_unref(r);
    sw_tile_set_unref(a); /* p and q still hold it */
    CHECK(sw_tile_set_size(sw_residency_plan_tiles(p, SW_TE_PLAN_PROMOTE)) == 1);
    sw_residency_plan_unref(p);
    sw_residency_plan_unref(q);
    sw_residency_plan_unref(empty);
    sw_residency_plan_unref(empty2);
    sw_tile_set_unref(b);
    sw_tile_set_unref(a2);
}

/* Out of memory (fault site "tile_set") at each constructor: SW_ENOMEM,
 * *out untouched; a plan failing on its second empty set gives back the
 * first (ASan's leak check). */
static void test_out_of_memory_makes_nothing(void)
{
    if (!sw_fault_enabled())
        return;
    int64_t rows[] = {0, 1};
    sw_tile_set *a = set_of(1, 2, rows), *keep = (sw_tile_set *)(uintptr_t)0x31, *out = keep;
    sw_error err;
    CHECK(sw_fault_arm("tile_set", 0, 1) == SW_OK);
    CHECK(sw_tile_set_new(1, 2, rows, NULL, &out, &err) == SW_ENOMEM && out == keep);
    CHECK(sw_fault_arm("tile_set", 0, 1) == SW_OK);
    CHECK(sw_tile_set_union(a, a, &out, &err) == SW_ENOMEM && out == keep);
    const int64_t *const axes[] = {rows};
    sw_tile_sel *sel = NULL, *skeep = (sw_tile_sel *)(uintptr_t)0x32, *sout = skeep;
    CHECK(sw_fault_arm("tile_set", 0, 1) == SW_OK);
    CHECK(sw_tile_sel_new(1, (int64_t[]){2}, axes, &sout, &err) == SW_ENOMEM && sout == skeep);
    CHECK(sw_tile_sel_new(1, (int64_t[]){2}, axes, &sel, &err) == SW_OK);
    CHECK(sw_fault_arm("tile_set", 0, 1) == SW_OK);
    CHECK(sw_tile_sel_tile_set(sel, &out, &err) == SW_ENOMEM && out == keep);
    sw_residency_plan *pkeep = (sw_residency_plan *)(uintptr_t)0x33, *pout = pkeep;
    for (long skip = 0; skip < 4; skip++) { /* the plan, its first and second empty set */
        CHECK(sw_fault_arm("tile_set", skip, 1) == SW_OK);
        CHECK(sw_residency_plan_new(a, NULL, NULL, &pout, &err) == (skip < 3 ? SW_ENOMEM : SW_OK));
        if (skip < 3)
            CHECK(pout == pkeep);
    }
    sw_fault_clear();
    CHECK(pout != pkeep && sw_tile_set_equal(sw_residency_plan_tiles(pout, SW_TE_PLAN_PROMOTE), a));
    sw_residency_plan_unref(pout);
    sw_tile_sel_unref(sel);
    sw_tile_set_unref(a);
}

/* ---- a TiledEvictable in terms of sets ---------------------------------- */

static int same_snap(const snap *a, const snap *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

/* TE-7 in sets: evict and promote a set; a set of another rank, a tile
 * outside the grid and a NULL set are refused with nothing changed. */
static void test_te7_residency_of_sets(void)
{
    int64_t grid[] = {3, 2}, tile[] = {2, 2};
    for (int async = 0; async < 3; async++) { /* blocking, _async, _start */
        sw_tiled_evictable *te = make_grid(2, grid, tile, async == 1);
        sw_tile_set *two = set_of(2, 2, (int64_t[]){1, 1, 2, 0});
        sw_te_work *w = NULL;
        if (async) {
            CHECK((async == 1 ? sw_tiled_evictable_evict_tiles_async(te, two, &w, NULL)
                              : sw_tiled_evictable_evict_tiles_start(te, two, &w, NULL)) == SW_OK);
            CHECK(sw_te_work_wait(w, NULL, NULL) == SW_OK);
            sw_te_work_unref(w);
        } else {
            CHECK(sw_tiled_evictable_evict_tiles(te, two, NULL) == SW_OK);
        }
        CHECK(loc_at(te, 1, 1) == SW_TE_SECONDARY && loc_at(te, 2, 0) == SW_TE_SECONDARY);
        CHECK(loc_at(te, 0, 0) == SW_TE_PRIMARY);

        snap before, after;
        take_tiles(te, &before);
        sw_tile_set *r1 = set_of(1, 1, (int64_t[]){0}), *outside = set_of(2, 1, (int64_t[]){3, 0});
        sw_error err;
        w = NULL;
        CHECK(sw_tiled_evictable_promote_tiles(te, r1, &err) == SW_EINVAL);
        CHECK(strstr(err.msg, "1 axes but the tile grid has 2"));
        CHECK(sw_tiled_evictable_promote_tiles_async(te, outside, &w, &err) == SW_EINVAL && !w);
        CHECK(strstr(err.msg, "outside axis 0"));
        CHECK(sw_tiled_evictable_evict_tiles(te, NULL, &err) == SW_ETYPE);
        CHECK(sw_tiled_evictable_evict_tiles_async(NULL, two, &w, &err) == SW_ETYPE && !w);
        CHECK(sw_tiled_evictable_evict_tiles_start(te, r1, &w, &err) == SW_EINVAL && !w);
        CHECK(sw_tiled_evictable_promote_tiles_start(te, NULL, &w, &err) == SW_ETYPE && !w);
        take_tiles(te, &after);
        CHECK(same_snap(&before, &after));

        if (async) {
            CHECK((async == 1 ? sw_tiled_evictable_promote_tiles_async(te, two, &w, NULL)
                              : sw_tiled_evictable_promote_tiles_start(te, two, &w, NULL)) ==
                  SW_OK);
            CHECK(sw_te_work_wait(w, NULL, NULL) == SW_OK);
            sw_te_work_unref(w);
        } else {
            CHECK(sw_tiled_evictable_promote_tiles(te, two, NULL) == SW_OK);
        }
        CHECK(loc_at(te, 1, 1) == SW_TE_PRIMARY && loc_at(te, 2, 0) == SW_TE_PRIMARY);
        take_tiles(te, &after);
        CHECK(!memcmp(before.values, after.values, sizeof before.values));

        /* released: the release is what is reported, as for coordinates */
        CHECK(sw_tiled_evictable_release(te, NULL) == SW_OK);
        CHECK(sw_tiled_evictable_promote_tiles(te, outside, &err) == SW_ESTATE);
        CHECK(sw_tiled_evictable_evict_tiles(te, NULL, &err) == SW_ESTATE);
        sw_tile_set_unref(r1);
        sw_tile_set_unref(outside);
        sw_tile_set_unref(two);
        sw_tiled_evictable_unref(te);
    }
}

typedef struct plan_script {
    sw_residency_plan *plan;
    sw_status add_status;
    char msg[256];
    int64_t extra[2]; /* added to evict after the residency plan, if extra[0] >= 0 */
    sw_status extra_status;
} plan_script;

static sw_status plan_of_sets(const int64_t *required, int64_t n, int32_t rank,
                              const char *purpose, sw_te_plan *plan, void *user, sw_error *err)
{
    (void)required, (void)n, (void)rank, (void)purpose;
    plan_script *s = user;
    s->add_status = sw_te_plan_add_residency(plan, s->plan, err);
    if (s->add_status != SW_OK)
        snprintf(s->msg, sizeof s->msg, "%s", err->msg);
    if (s->extra[0] >= 0)
        s->extra_status = sw_te_plan_add(plan, SW_TE_PLAN_EVICT, s->extra, NULL);
    return s->add_status == SW_OK || s->extra[0] >= 0 ? SW_OK : s->add_status;
}

/* A policy answering with a residency plan: applied around the projection;
 * a plan that does not fit the grid, or clashes with tiles already in the
 * plan, adds nothing (its own tiles are taken out again). */
static void test_te10_policy_plan_of_sets(void)
{
    int64_t grid[] = {3, 2}, tile[] = {2, 2};
    sw_tiled_evictable *te = make_grid(2, grid, tile, 0);
    sw_tile_set *ev = set_of(2, 1, (int64_t[]){0, 0});
    CHECK(sw_tiled_evictable_evict_tiles(te, ev, NULL) == SW_OK);
    sw_tile_set *promote = ev, *evict = set_of(2, 2, (int64_t[]){1, 0, 2, 1});
    plan_script s = {.extra = {-1, -1}};
    CHECK(sw_residency_plan_new(promote, NULL, evict, &s.plan, NULL) == SW_OK);
    CHECK(sw_tiled_evictable_set_policy(te, &(sw_te_policy){plan_of_sets, &s}, NULL) == SW_OK);

    const int64_t a0[] = {2}, a1[] = {1};
    sw_tile_sel *sel = NULL;
    CHECK(sw_tile_sel_new(2, (int64_t[]){1, 1}, (const int64_t *const[]){a0, a1}, &sel, NULL) ==
          SW_OK);
    sw_tile_selection view;
    sw_tile_sel_view(sel, &view);
    sw_tensor *out = NULL;
    CHECK(sw_tiled_evictable_project(te, NULL, 0, &view, NULL, &out, NULL) == SW_OK);
    CHECK(s.add_status == SW_OK);
    CHECK(out && ((const float *)sw_cpu_pointer(sw_tensor_carrier(out)))[0] ==
                     value_of(sw_tiles_slot(sw_tiled_evictable_geometry(te), 5, 0)));
    sw_tensor_unref(out);
    CHECK(loc_at(te, 0, 0) == SW_TE_PRIMARY);   /* promoted */
    CHECK(loc_at(te, 1, 0) == SW_TE_SECONDARY); /* evicted */
    CHECK(loc_at(te, 2, 1) == SW_TE_SECONDARY); /* selected, evicted once unpinned */

    /* a plan of another rank: the projection fails, nothing changed */
    sw_residency_plan_unref(s.plan);
    sw_tile_set *r1 = set_of(1, 1, (int64_t[]){0});
    CHECK(sw_residency_plan_new(NULL, r1, NULL, &s.plan, NULL) == SW_OK);
    snap before, after;
    take_tiles(te, &before);
    sw_error err;
    out = NULL;
    CHECK(sw_tiled_evictable_project(te, NULL, 0, &view, NULL, &out, &err) == SW_EINVAL && !out);
    CHECK(strstr(s.msg, "1 axes but the tile grid has 2"));
    take_tiles(te, &after);
    CHECK(same_snap(&before, &after));

    sw_residency_plan_unref(s.plan);
    sw_tile_set_unref(r1);
    sw_tile_set_unref(evict);
    sw_tiled_evictable_unref(te);
    sw_tile_set_unref(ev);
    sw_tile_sel_unref(sel);
}

/* All or none: when a set of the residency plan clashes with a tile the
 * plan already holds, the tiles this call added before the clash are
 * taken out again (so the policy can still put them elsewhere). */
static sw_status plan_clash(const int64_t *required, int64_t n, int32_t rank,
                            const char *purpose, sw_te_plan *plan, void *user, sw_error *err)
{
    (void)required, (void)n, (void)rank, (void)purpose, (void)err;
    plan_script *s = user;
    /* (2,0) is in the plan first; the residency plan promotes (0,1), then
     * retains (2,0): refused, and (0,1) must be out of the plan again */
    s->extra_status = sw_te_plan_add(plan, SW_TE_PLAN_RETAIN, (int64_t[]){2, 0}, NULL);
    s->add_status = sw_te_plan_add_residency(plan, s->plan, NULL);
    /* (0,1) free again: evicting it must be accepted */
    return sw_te_plan_add(plan, SW_TE_PLAN_EVICT, (int64_t[]){0, 1}, NULL);
}

static void test_te10_plan_of_sets_all_or_none(void)
{
    int64_t grid[] = {3, 2}, tile[] = {2, 2};
    sw_tiled_evictable *te = make_grid(2, grid, tile, 0);
    sw_tile_set *ev = set_of(2, 1, (int64_t[]){0, 1}), *ret = set_of(2, 1, (int64_t[]){2, 0});
    CHECK(sw_tiled_evictable_evict_tiles(te, ev, NULL) == SW_OK);
    plan_script s = {0};
    CHECK(sw_residency_plan_new(ev, ret, NULL, &s.plan, NULL) == SW_OK);
    CHECK(sw_tiled_evictable_set_policy(te, &(sw_te_policy){plan_clash, &s}, NULL) == SW_OK);
    CHECK(sw_tiled_evictable_promote_tiles(te, ev, NULL) == SW_OK); /* (0,1) primary again */
    const int64_t a0[] = {1}, a1[] = {0};
    sw_tile_sel *sel = NULL;
    CHECK(sw_tile_sel_new(2, (int64_t[]){1, 1}, (const int64_t *const[]){a0, a1}, &sel, NULL) ==
          SW_OK);
    sw_tile_selection view;
    sw_tile_sel_view(sel, &view);
    sw_tensor *out = NULL;
    CHECK(sw_tiled_evictable_project(te, NULL, 0, &view, NULL, &out, NULL) == SW_OK);
    CHECK(s.extra_status == SW_OK && s.add_status == SW_EINVAL);
    CHECK(loc_at(te, 0, 1) == SW_TE_SECONDARY); /* the policy's own evict went through */
    sw_tensor_unref(out);
    sw_residency_plan_unref(s.plan);
    sw_tile_sel_unref(sel);
    sw_tile_set_unref(ev);
    sw_tile_set_unref(ret);
    sw_tiled_evictable_unref(te);
}

/* ---- many threads reading one set (TSan) ------------------------------------- */

#define READERS 8
#define ROUNDS 200

typedef struct reader {
    sw_tile_set *shared;
    sw_tile_set *twin; /* equal, built separately */
    int bad;
} reader;

static void *read_set(void *arg)
{
    reader *r = arg;
    for (int round = 0; round < ROUNDS; round++) {
        sw_tile_set *s = sw_tile_set_ref(r->shared);
        int64_t n = sw_tile_set_size(s);
        for (int64_t i = 0; i < n; i++)
            if (!sw_tile_set_contains(s, 3, sw_tile_set_at(s, i)))
                r->bad++;
        if (!sw_tile_set_equal(s, r->twin) || sw_tile_set_hash(s) != sw_tile_set_hash(r->twin))
            r->bad++;
        sw_tile_set *u = NULL, *d = NULL;
        if (sw_tile_set_union(s, r->twin, &u, NULL) != SW_OK || !sw_tile_set_equal(u, s) ||
            sw_tile_set_difference(s, u, &d, NULL) != SW_OK || sw_tile_set_size(d) != 0)
            r->bad++;
        sw_tile_set_unref(u);
        sw_tile_set_unref(d);
        sw_tile_set_unref(s);
    }
    sw_tile_set_unref(r->shared); /* each reader drops the reference it was given */
    return NULL;
}

static void test_te5_many_threads_read_one_set(void)
{
    int64_t rows[3 * 64];
    for (int i = 0; i < 64; i++) {
        rows[3 * i] = (i * 37) % 64;
        rows[3 * i + 1] = i % 3;
        rows[3 * i + 2] = i / 32;
    }
    sw_tile_set *shared = set_of(3, 64, rows), *twin = set_of(3, 64, rows);
    pthread_t th[READERS];
    reader rd[READERS];
    for (int i = 0; i < READERS; i++) {
        rd[i] = (reader){sw_tile_set_ref(shared), twin, 0};
        pthread_create(&th[i], NULL, read_set, &rd[i]);
    }
    sw_tile_set_unref(shared); /* the last reference goes on a reader thread */
    for (int i = 0; i < READERS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < READERS; i++)
        CHECK_EQ_I64(rd[i].bad, 0);
    sw_tile_set_unref(twin);
}

int main(void)
{
    int64_t live = sw_alloc_live_bytes();
    test_te5_set_refusals_change_nothing();
    test_te5_canonical_order_and_empty();
    test_te5_hash_equality_consistent();
    test_te5_set_algebra();
    test_te4_grid_binding();
    test_te4_selection();
    test_te5_residency_plan();
    test_out_of_memory_makes_nothing();
    CHECK_EQ_I64(sw_alloc_live_bytes(), live); /* no counted block kept (ASan proves the rest) */
    test_te7_residency_of_sets();
    test_te10_policy_plan_of_sets();
    test_te10_plan_of_sets_all_or_none();
    test_te5_many_threads_read_one_set();
    return check_report("tile_set");
}
