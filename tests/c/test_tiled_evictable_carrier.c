/* TiledEvictable as a carrier (tiled_evictable.h, "As a carrier"): carrier
 * slot reads and writes resolve tile residency, versions advance on both,
 * mutability is the TiledEvictable's, DLPack is refused, a move out of or
 * into it is refused before any change, release releases it,
 * the last reference of an unreleased carrier only drops its reference;
 * over binding tiers the slot ops are refused (no hook under a carrier
 * mutex). */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include <strideweave/strideweave.h>

static float value_of(int64_t slot) { return 1.0f + (float)slot; }

#define MAXS 64
#define MAXT 16
#include "te_fixture.h"

static const int64_t GRID[2] = {2, 2}, TILE[2] = {2, 3}; /* shape 4 x 6, 4 tiles of 6 */

static void test_slot_ops_resolve_residency(void)
{
    sw_tiled_evictable *te = make_grid(2, GRID, TILE, 1);
    sw_error err;
    sw_carrier *c = NULL;
    CHECK_EQ_I64(sw_tiled_evictable_carrier(te, &c, &err), SW_OK);
    CHECK(sw_carrier_class_of(c) == &sw_tiled_evictable_class);
    CHECK(sw_tiled_evictable_of(c) == te);
    CHECK(sw_tiled_evictable_of(NULL) == NULL);
    CHECK_EQ_I64(sw_carrier_size(c), 24);
    CHECK_EQ_I64(sw_carrier_dtype(c), SW_DT_FLOAT32);
    CHECK(sw_carrier_is_mutable(c));
    /* Tiles (0,0) and (1,1) in the FileBacked secondary. */
    int64_t coords[4] = {0, 0, 1, 1};
    CHECK_EQ_I64(sw_tiled_evictable_evict(te, coords, 2, &err), SW_OK);
    float v[24];
    CHECK_EQ_I64(sw_carrier_read(c, 0, 24, v, &err), SW_OK);
    int bad = 0;
    for (int i = 0; i < 24; i++)
        bad += v[i] != value_of(i);
    CHECK_EQ_I64(bad, 0);
    /* A write into an evicted tile promotes it; both versions advance. */
    float w[2] = {-1, -2};
    CHECK_EQ_I64(sw_carrier_write(c, 0, 2, w, &err), SW_OK);
    sw_te_tile_state ts;
    CHECK_EQ_I64(sw_tiled_evictable_tile_state(te, coords, &ts, NULL), SW_OK);
    CHECK(ts.location == SW_TE_PRIMARY && ts.dirty);
    CHECK_EQ_I64(sw_carrier_version(c), 1);
    CHECK_EQ_I64(sw_tiled_evictable_version(te), 1);
    float r[2];
    CHECK_EQ_I64(sw_tiled_evictable_read(te, 0, 2, r, &err), SW_OK);
    CHECK(r[0] == -1 && r[1] == -2);
    /* Range checks are the carrier's. */
    CHECK_EQ_I64(sw_carrier_read(c, 23, 2, r, &err), SW_ERANGE);
    /* No direct storage: no DLPack export. */
    sw_tensor *t = NULL;
    CHECK_EQ_I64(sw_tensor_new_strided(c, 0, 1, (int64_t[]){24}, NULL, &t, &err), SW_OK);
    DLManagedTensorVersioned *dl = NULL;
    CHECK(sw_tensor_to_dlpack(t, &dl, &err) != SW_OK);
    CHECK(dl == NULL);
    sw_tensor_unref(t);
    sw_carrier_unref(c);
    sw_tiled_evictable_unref(te);
}

/* Everything a refused move could have changed, on both sides. */
typedef struct side_state {
    int released, pending_free, mutable_;
    int64_t size;
    uint64_t version, te_version;
    float values[24];
    sw_te_tile_state tiles[4];
} side_state;

static void take_side(sw_tiled_evictable *te, sw_carrier *tec, sw_carrier *cpu, side_state *out)
{
    memset(out, 0, sizeof *out);
    out->released = sw_carrier_is_released(tec) * 2 + sw_carrier_is_released(cpu);
    out->mutable_ = sw_carrier_is_mutable(tec) * 2 + sw_carrier_is_mutable(cpu);
    out->pending_free = 1;
    out->size = sw_carrier_size(tec) * 1000 + sw_carrier_size(cpu);
    out->version = sw_carrier_version(tec) * 1000 + sw_carrier_version(cpu);
    out->te_version = sw_tiled_evictable_version(te);
    CHECK_EQ_I64(sw_tiled_evictable_read(te, 0, 24, out->values, NULL), SW_OK);
    for (int64_t t = 0; t < 4; t++) {
        int64_t c[2] = {t / 2, t % 2};
        CHECK_EQ_I64(sw_tiled_evictable_tile_state(te, c, &out->tiles[t], NULL), SW_OK);
        out->pending_free &= !out->tiles[t].pending && !out->tiles[t].pinned;
    }
}

/* The core refuses a move out of or into a TiledEvictable carrier (its
 * values stay in its tiers), before any change, with SW_ENOTSUP and a
 * message naming both classes in the move's direction; every entry point
 * (sw_move, sw_move_async, sw_move_span_async, a supplied transfer, an
 * empty destination that would grow). */
static void never_called(sw_move_handle *m, void *user)
{
    (void)user;
    CHECK(0 && "a refused move's transfer ran");
    sw_move_transfer_done(m, SW_OK, NULL);
}

static void test_moves_of_a_tiled_evictable_refused_both_ways(void)
{
    sw_error err;
    sw_tiled_evictable *te = make_grid(2, GRID, TILE, 1);
    int64_t c11[2] = {1, 1};
    CHECK_EQ_I64(sw_tiled_evictable_evict(te, c11, 1, &err), SW_OK); /* tiles in both tiers */
    sw_carrier *c = NULL, *cpu = NULL, *empty = NULL;
    CHECK_EQ_I64(sw_tiled_evictable_carrier(te, &c, &err), SW_OK);
    sw_cpu_new(24, SW_DT_FLOAT32, 0, &cpu, NULL);
    sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &empty, NULL); /* empty, grows */
    float *cv = sw_cpu_pointer(cpu);
    for (int i = 0; i < 24; i++)
        cv[i] = -1.0f - (float)i;
    sw_tensor *from_te = NULL, *from_cpu = NULL;
    CHECK_EQ_I64(sw_tensor_new_strided(c, 0, 1, (int64_t[]){24}, NULL, &from_te, &err), SW_OK);
    CHECK_EQ_I64(sw_tensor_new_strided(cpu, 0, 1, (int64_t[]){24}, NULL, &from_cpu, &err),
                 SW_OK);
    const sw_layout *l = sw_tensor_layout(from_cpu);
    side_state before, after;
    take_side(te, c, cpu, &before);
    sw_move_options supplied = {.transfer = never_called, .dst_slots = 24};
    for (int dir = 0; dir < 2; dir++) {
        sw_carrier *src = dir ? cpu : c, *dst = dir ? c : cpu;
        sw_tensor *t = dir ? from_cpu : from_te;
        const char *want = dir ? "from CPU to TiledEvictable" : "from TiledEvictable to CPU";
        for (int way = 0; way < 5; way++) {
            sw_move_handle *m = NULL;
            sw_tensor *res = NULL;
            sw_status st;
            memset(&err, 0, sizeof err);
            if (way == 0)
                st = sw_move(t, dst, &res, &err);
            else if (way == 1)
                st = sw_move_async(t, dst, NULL, &m, &err);
            else if (way == 2)
                st = sw_move_span_async(src, 0, l, dst, NULL, &m, &err);
            else if (way == 3)
                st = sw_move_async(t, dst, &supplied, &m, &err);
            else if (!dir) /* into an empty FileBacked that would grow */
                st = sw_move_async(t, empty, NULL, &m, &err);
            else
                continue;
            CHECK_EQ_I64(st, SW_ENOTSUP);
            CHECK(m == NULL && res == NULL);
            if (way == 4)
                want = "from TiledEvictable to FileBacked";
            if (!strstr(err.msg, want))
                fprintf(stderr, "refusal %d/%d: %s\n", dir, way, err.msg);
            CHECK(strstr(err.msg, want) != NULL);
            CHECK(strstr(err.msg, "project") != NULL); /* what to do instead */
            take_side(te, c, cpu, &after);
            CHECK(memcmp(&before, &after, sizeof before) == 0);
            CHECK_EQ_I64(sw_carrier_size(empty), 0); /* never grown */
        }
    }
    CHECK(before.pending_free && before.released == 0);
    /* Nothing pending: both still move and write as before. */
    float one = 7;
    CHECK_EQ_I64(sw_carrier_write(c, 0, 1, &one, &err), SW_OK);
    sw_tensor *moved = NULL;
    CHECK_EQ_I64(sw_move(from_cpu, empty, &moved, &err), SW_OK);
    sw_tensor_unref(moved);
    sw_tensor_unref(from_te);
    sw_tensor_unref(from_cpu);
    sw_carrier_unref(c);
    sw_carrier_unref(cpu);
    sw_carrier_unref(empty);
    sw_tiled_evictable_unref(te);
}

static void test_release_and_last_reference(void)
{
    sw_error err;
    sw_tiled_evictable *te = make_grid(2, GRID, TILE, 0);
    sw_carrier *p = sw_tiled_evictable_primary(te);
    sw_carrier_ref(p);
    sw_carrier *c = NULL;
    CHECK_EQ_I64(sw_tiled_evictable_carrier(te, &c, &err), SW_OK);
    /* The last reference of an unreleased carrier only drops its reference. */
    sw_carrier_unref(c);
    CHECK(!sw_tiled_evictable_is_released(te));
    CHECK(!sw_carrier_is_released(p) && sw_carrier_is_owned(p));
    CHECK_EQ_I64(sw_tiled_evictable_carrier(te, &c, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_release(c, &err), SW_OK);
    CHECK(sw_tiled_evictable_is_released(te));
    CHECK(sw_carrier_is_released(p) && !sw_carrier_is_owned(p));
    CHECK_EQ_I64(sw_carrier_size(c), 0);
    sw_carrier *again = NULL;
    CHECK_EQ_I64(sw_tiled_evictable_carrier(te, &again, &err), SW_ESTATE);
    CHECK_EQ_I64(sw_tiled_evictable_carrier(NULL, &again, &err), SW_ETYPE);
    sw_carrier_unref(c);
    sw_carrier_unref(p);
    sw_tiled_evictable_unref(te);

    /* Immutable primary: the carrier is immutable, writes refused. */
    sw_carrier *ip = NULL, *is = NULL;
    sw_cpu_new(24, SW_DT_FLOAT32, SW_CARRIER_IMMUTABLE, &ip, NULL);
    sw_cpu_new(0, SW_DT_FLOAT32, 0, &is, NULL);
    CHECK_EQ_I64(sw_tiled_evictable_new(ip, is, 2, GRID, TILE, &te, &err), SW_OK);
    CHECK_EQ_I64(sw_tiled_evictable_carrier(te, &c, &err), SW_OK);
    CHECK(!sw_carrier_is_mutable(c));
    float one = 1;
    CHECK_EQ_I64(sw_carrier_write(c, 0, 1, &one, &err), SW_ESTATE);
    CHECK_EQ_I64(sw_tiled_evictable_version(te), 0);
    sw_carrier_unref(c);
    sw_tiled_evictable_unref(te);
    sw_carrier_unref(ip);
    sw_carrier_unref(is);
}

/* Over binding tiers the slot ops are refused: the hooks never run under
 * the carrier's mutex. */
static const sw_carrier_class binding_class = {
    .name = "BindingCarrier",
    .flags = SW_CARRIER_CLASS_STATE_ONLY,
};
static int hook_calls;
static sw_status h_store(sw_carrier *p, int s, int64_t n, sw_dtype d, int z, void *u,
                         sw_carrier **o, sw_error *e)
{
    (void)p, (void)s, (void)n, (void)d, (void)z, (void)u, (void)o;
    hook_calls++;
    return sw_error_set(e, SW_ENOMEM, "no");
}
static sw_status h_read(sw_carrier *c, int64_t a, int64_t n, void *o, void *u, sw_error *e)
{
    (void)c, (void)a, (void)u;
    hook_calls++;
    memset(o, 0, (size_t)n * sizeof(float));
    (void)e;
    return SW_OK;
}
static sw_status h_write(sw_carrier *c, int64_t a, int64_t n, const void *i, void *u,
                         sw_error *e)
{
    (void)c, (void)a, (void)n, (void)i, (void)u, (void)e;
    hook_calls++;
    return SW_OK;
}
static sw_status h_size(sw_carrier *c, void *u, int64_t *o, sw_error *e)
{
    (void)c, (void)u, (void)e;
    *o = 24;
    return SW_OK;
}

static void test_binding_tiers_refuse_slot_ops(void)
{
    sw_error err;
    sw_carrier *p = NULL, *s = NULL, *c = NULL;
    sw_carrier_new(&binding_class, NULL, SW_DT_ANY, 0, &p, NULL);
    sw_cpu_new(0, SW_DT_FLOAT32, 0, &s, NULL);
    sw_te_tier_hooks h = {.store = h_store, .read = h_read, .write = h_write, .size = h_size,
                          .dtype = SW_DT_FLOAT32};
    sw_tiled_evictable *te = NULL;
    CHECK_EQ_I64(sw_tiled_evictable_new_bound(p, s, 2, GRID, TILE, &h, &te, &err), SW_OK);
    CHECK_EQ_I64(sw_tiled_evictable_carrier(te, &c, &err), SW_OK);
    float v[2];
    hook_calls = 0;
    CHECK_EQ_I64(sw_carrier_read(c, 0, 2, v, &err), SW_ENOTSUP);
    CHECK(strstr(err.msg, "sw_tiled_evictable_read") != NULL);
    CHECK_EQ_I64(sw_carrier_write(c, 0, 2, v, &err), SW_ENOTSUP);
    CHECK_EQ_I64(hook_calls, 0);
    CHECK_EQ_I64(sw_tiled_evictable_read(te, 0, 2, v, &err), SW_OK); /* the binding's way */
    CHECK_EQ_I64(hook_calls, 1);
    /* Releasing the carrier leaves the TiledEvictable to the binding. */
    CHECK_EQ_I64(sw_carrier_release(c, &err), SW_OK);
    CHECK(!sw_tiled_evictable_is_released(te));
    CHECK_EQ_I64(sw_tiled_evictable_release(te, &err), SW_OK);
    sw_carrier_unref(c);
    sw_tiled_evictable_unref(te);
    sw_carrier_unref(p);
    sw_carrier_unref(s);
}

int main(void)
{
    test_slot_ops_resolve_residency();
    test_release_and_last_reference();
    test_moves_of_a_tiled_evictable_refused_both_ways();
    test_binding_tiers_refuse_slot_ops();
    return check_report("tiled_evictable_carrier");
}
