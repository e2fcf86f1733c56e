/* Binding tiers with core_classes (tiled_evictable.h, sw_te_tier_hooks):
 * a tier of a core class the core does not keep in its role (Generic
 * memory as the primary or secondary, a FileBacked primary) and the stores
 * made like it are read and written by the core itself, never through the
 * binding's read and write hooks; the values, residency and writes are
 * those of a TiledEvictable reached through the hooks. Without
 * core_classes every access still goes through the hooks. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include <strideweave/strideweave.h>

static const int64_t GRID[2] = {2, 2}, TILE[2] = {2, 3}; /* 4 tiles of 6 slots */
static const int64_t ALL[8] = {0, 0, 1, 0, 0, 1, 1, 1};

static float value_of(int64_t slot) { return 0.5f + (float)slot; }

#define MAXS 24
#define MAXT 4
#include "te_fixture.h"

typedef struct counts {
    int stores, reads, writes;
    sw_tiled_evictable *te; /* for the claim on its tiers, once made */
} counts;

/* Tile stores like the prototype: Generic memory or a FileBacked file. */
static sw_status c_store(sw_carrier *proto, int secondary, int64_t size, sw_dtype dtype, int zero,
                         void *user, sw_carrier **out, sw_error *err)
{
    (void)zero;
    (void)secondary;
    const sw_carrier_class *k = sw_carrier_class_of(proto);
    if (k == &sw_cpu_class)
        return SW_ENOTSUP; /* the core's */
    ((counts *)user)->stores++;
    if (k == &sw_generic_class) {
        float *zeros = calloc((size_t)size + 1, sizeof *zeros);
        sw_status st = sw_generic_new(zeros, size, dtype, 0, out, err);
        free(zeros);
        return st;
    }
    sw_status st = sw_file_backed_new(NULL, dtype, 0, out, err);
    if (st == SW_OK && (st = sw_carrier_allocate(*out, size, err)) != SW_OK) {
        sw_carrier_release(*out, NULL);
        sw_carrier_unref(*out);
    }
    return st;
}

static sw_status c_read(sw_carrier *store, int64_t at, int64_t n, void *out, void *user,
                        sw_error *err)
{
    ((counts *)user)->reads++;
    return sw_carrier_read(store, at, n, out, err);
}

static sw_status c_write(sw_carrier *store, int64_t at, int64_t n, const void *in, void *user,
                         sw_error *err)
{
    counts *c = user;
    c->writes++;
    /* A tier given to the constructor is claimed: write with the claim. */
    uint64_t token = 0;
    if (c->te && sw_carrier_is_owned(store) &&
        sw_tiled_evictable_tier_token(c->te, 0, &token, err) != SW_OK)
        return err->code;
    if (token && sw_carrier_begin_owner_access(store, token, err) != SW_OK)
        return err->code;
    sw_status st = sw_carrier_write(store, at, n, in, err);
    if (token)
        sw_carrier_end_owner_access(store, token, NULL);
    return st;
}

/* Read all, evict all, read, promote all (fresh stores like the primary),
 * write one slot, read: the values throughout; the hooks' reads and
 * writes counted into `c`. */
static void exercise(sw_carrier *p, sw_carrier *s, int core_classes, counts *c)
{
    sw_error err;
    sw_te_tier_hooks h = {.store = c_store, .read = c_read, .write = c_write, .user = c,
                          .dtype = SW_DT_FLOAT32, .core_classes = core_classes};
    sw_tiled_evictable *te = NULL;
    CHECK_EQ_I64(sw_tiled_evictable_new_bound(p, s, 2, GRID, TILE, &h, &te, &err), SW_OK);
    if (!te)
        return;
    CHECK(values_are(te, -1, 0));
    CHECK_EQ_I64(sw_tiled_evictable_evict(te, ALL, 4, &err), SW_OK);
    CHECK_EQ_I64(tiles_at(te, SW_TE_SECONDARY), 4);
    CHECK(values_are(te, -1, 0));
    CHECK_EQ_I64(sw_tiled_evictable_promote(te, ALL, 4, &err), SW_OK);
    CHECK_EQ_I64(tiles_at(te, SW_TE_PRIMARY), 4);
    CHECK(values_are(te, -1, 0));
    float nine = 9;
    CHECK_EQ_I64(sw_tiled_evictable_write(te, 7, 1, &nine, &err), SW_OK);
    CHECK(values_are(te, 7, 9));
    CHECK_EQ_I64(sw_tiled_evictable_evict(te, ALL, 2, &err), SW_OK);
    CHECK(values_are(te, 7, 9));
    /* A projection of tiles (1, 0) and (0, 1) into a Generic destination. */
    float zeros[12] = {0}, got[12];
    sw_carrier *dest = NULL;
    CHECK_EQ_I64(sw_generic_new(zeros, 12, SW_DT_FLOAT32, 0, &dest, &err), SW_OK);
    int64_t ax0[1] = {1}, ax1[2] = {0, 1}, counts_[2] = {1, 2};
    const int64_t *axes[2] = {ax0, ax1};
    sw_tile_selection sel = {2, counts_, axes};
    sw_tensor *out = NULL;
    CHECK_EQ_I64(sw_tiled_evictable_project(te, NULL, 0, &sel, dest, &out, &err), SW_OK);
    CHECK(out == NULL);
    CHECK_EQ_I64(sw_carrier_read(dest, 0, 12, got, &err), SW_OK);
    /* Compact (c0, c1), c0 < 2, c1 < 6: slot c0 + 2 + 4 * c1 of the grid. */
    int exact = 1;
    for (int64_t c1 = 0; c1 < 6; c1++)
        for (int64_t c0 = 0; c0 < 2; c0++) {
            int64_t s = c0 + 2 + 4 * c1;
            exact &= got[c0 + 2 * c1] == (s == 7 ? 9.0f : value_of(s));
        }
    CHECK(exact);
    sw_carrier_unref(dest);
    CHECK_EQ_I64(sw_tiled_evictable_release(te, &err), SW_OK);
    sw_tiled_evictable_unref(te);
}

static void generic_primary(int core_classes, counts *c)
{
    float vals[24];
    for (int i = 0; i < 24; i++)
        vals[i] = value_of(i);
    sw_carrier *p = NULL, *s = NULL;
    sw_error err;
    CHECK_EQ_I64(sw_generic_new(vals, 24, SW_DT_FLOAT32, 0, &p, &err), SW_OK);
    CHECK_EQ_I64(sw_cpu_new(0, SW_DT_FLOAT32, 0, &s, &err), SW_OK);
    exercise(p, s, core_classes, c);
    sw_carrier_unref(p);
    sw_carrier_unref(s);
}

/* A full FileBacked primary (claimed: written with the claim) and an empty
 * Generic secondary. */
static void file_primary(int core_classes, counts *c)
{
    float vals[24];
    for (int i = 0; i < 24; i++)
        vals[i] = value_of(i);
    sw_carrier *p = NULL, *s = NULL;
    sw_error err;
    CHECK_EQ_I64(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &p, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_allocate(p, 24, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_write(p, 0, 24, vals, &err), SW_OK);
    CHECK_EQ_I64(sw_generic_new(vals, 0, SW_DT_FLOAT32, 0, &s, &err), SW_OK);
    exercise(p, s, core_classes, c);
    sw_carrier_unref(p);
    sw_carrier_unref(s);
}

/* A write into a full FileBacked primary held in place goes to its file
 * with the TiledEvictable's claim as owner access. */
static void write_in_place(int core_classes, counts *c)
{
    float vals[24], got = 0;
    for (int i = 0; i < 24; i++)
        vals[i] = value_of(i);
    sw_carrier *p = NULL, *s = NULL;
    sw_error err;
    CHECK_EQ_I64(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &p, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_allocate(p, 24, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_write(p, 0, 24, vals, &err), SW_OK);
    CHECK_EQ_I64(sw_cpu_new(0, SW_DT_FLOAT32, 0, &s, &err), SW_OK);
    sw_te_tier_hooks h = {.store = c_store, .read = c_read, .write = c_write, .user = c,
                          .dtype = SW_DT_FLOAT32, .core_classes = core_classes};
    sw_tiled_evictable *te = NULL;
    CHECK_EQ_I64(sw_tiled_evictable_new_bound(p, s, 2, GRID, TILE, &h, &te, &err), SW_OK);
    if (te) {
        c->te = te;
        float nine = 9;
        CHECK_EQ_I64(sw_tiled_evictable_write(te, 3, 1, &nine, &err), SW_OK);
        CHECK(values_are(te, 3, 9));
        /* The file holds it. */
        CHECK_EQ_I64(sw_carrier_read(p, 3, 1, &got, &err), SW_OK);
        CHECK(got == 9.0f);
        CHECK_EQ_I64(sw_tiled_evictable_release(te, &err), SW_OK);
        sw_tiled_evictable_unref(te);
    }
    sw_carrier_unref(p);
    sw_carrier_unref(s);
}

int main(void)
{
    void (*cases[])(int, counts *) = {generic_primary, file_primary, write_in_place};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        counts with = {0}, without = {0};
        cases[k](1, &with);
        CHECK_EQ_I64(with.reads, 0);
        CHECK_EQ_I64(with.writes, 0);
        cases[k](0, &without);
        CHECK(without.reads > 0 && without.writes > 0); /* the hooks as before */
    }
    return check_report("tiled_evictable_core_classes");
}
