/* TiledEvictable over every pair of the core's built-in tier classes, with
 * no binding hooks (tiled_evictable.h, check 2; contract-carriers TE-1,
 * TE-6, TE-7, TE-9): CPU, Generic, FileBacked and BlockDeviceCarrier in
 * either role. Evict, promote, write and project round-trip the values; an
 * injected fault part way through a request leaves residency, values and
 * version as they were; a block-device tile is durable before the request
 * commits (B-11: a failing fdatasync fails the request, nothing moved).
 * The block-device pairs run on a loop device over a sparse file and say
 * why they skip where none can be made. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "loop.h"
#include <strideweave/strideweave.h>

enum { CPU, GENERIC, FILEB, BLOCK, NKINDS };
static const char *const KIND[NKINDS] = {"CPU", "Generic", "FileBacked", "BlockDeviceCarrier"};

static const int64_t GRID[2] = {2, 2}, TILE[2] = {2, 3}; /* 4 tiles of 6 slots */
static const int64_t ALL[8] = {0, 0, 1, 0, 0, 1, 1, 1};
#define SLOTS 24

static sw_block_device *dev; /* NULL: no loop device here */

static float value_of(int64_t slot) { return 0.5f + (float)slot; }

#define MAXS SLOTS
#define MAXT 4
#include "te_fixture.h"
#include "strideweave/testing.h"

/* A tier of `kind`: all SLOTS values when `full`, else empty. */
static sw_carrier *tier(int kind, int full)
{
    float vals[SLOTS];
    for (int i = 0; i < SLOTS; i++)
        vals[i] = value_of(i);
    int64_t n = full ? SLOTS : 0;
    sw_carrier *c = NULL;
    sw_error err;
    sw_status st = SW_OK;
    if (kind == CPU) {
        st = sw_cpu_new(n, SW_DT_FLOAT32, 0, &c, &err);
        if (st == SW_OK && n)
            st = sw_carrier_write(c, 0, n, vals, &err);
    } else if (kind == GENERIC) {
        st = sw_generic_new(vals, n, SW_DT_FLOAT32, 0, &c, &err);
    } else if (kind == FILEB) {
        st = sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &c, &err);
        if (st == SW_OK && n)
            st = sw_carrier_allocate(c, n, &err);
        if (st == SW_OK && n)
            st = sw_carrier_write(c, 0, n, vals, &err);
    } else {
        st = sw_block_device_allocate_values(dev, vals, n, 0, &c, &err);
        if (st == SW_OK)
            st = sw_block_device_flush(dev, &err);
    }
    if (st != SW_OK)
        fprintf(stderr, "cannot make a %s tier: %s\n", KIND[kind], err.msg);
    CHECK_EQ_I64(st, SW_OK);
    return c;
}

/* Tiles (1, 0) and (0, 1) projected into a CPU destination: compact
 * (c0, c1), c0 < 2, c1 < 6, holds slot c0 + 2 + 4 * c1 of the grid. */
static int projects(sw_tiled_evictable *te, int64_t changed, float value)
{
    sw_carrier *dest = NULL;
    sw_tensor *out = NULL;
    float got[12];
    sw_error err;
    int64_t ax0[1] = {1}, ax1[2] = {0, 1}, counts[2] = {1, 2};
    const int64_t *axes[2] = {ax0, ax1};
    sw_tile_selection sel = {2, counts, axes};
    int ok = sw_cpu_new(12, SW_DT_FLOAT32, 0, &dest, &err) == SW_OK &&
             sw_tiled_evictable_project(te, NULL, 0, &sel, dest, &out, &err) == SW_OK &&
             sw_carrier_read(dest, 0, 12, got, &err) == SW_OK;
    for (int64_t c1 = 0; ok && c1 < 6; c1++)
        for (int64_t c0 = 0; c0 < 2; c0++) {
            int64_t s = c0 + 2 + 4 * c1;
            ok &= got[c0 + 2 * c1] == (s == changed ? value : value_of(s));
        }
    if (!ok)
        fprintf(stderr, "projection: %s\n", err.msg);
    sw_tensor_unref(out);
    sw_carrier_unref(dest);
    return ok;
}

/* An injected tile-copy fault on the third copy of a request over all
 * four tiles: the request fails; tile states, values and version as they
 * were. */
static void fault_changes_nothing(sw_tiled_evictable *te, int evict)
{
    sw_error err;
    snap before, after;
    take_tiles(te, &before);
    sw_fault_arm("tile_copy", 2, 1);
    sw_status st = evict ? sw_tiled_evictable_evict(te, ALL, 4, &err)
                         : sw_tiled_evictable_promote(te, ALL, 4, &err);
    sw_fault_arm("tile_copy", 0, 0);
    CHECK_EQ_I64(st, SW_EIO);
    take_tiles(te, &after);
    CHECK(memcmp(&before, &after, sizeof before) == 0);
    CHECK_EQ_I64(after.read_status, SW_OK);
}

/* Primary full, secondary empty: evict all into fresh stores like the
 * secondary, promote all into fresh stores like the primary, write one
 * slot, evict half, project; a faulted evict and promote on the way. */
static void round_trip_from_primary(int pk, int sk)
{
    sw_carrier *p = tier(pk, 1), *s = tier(sk, 0);
    sw_tiled_evictable *te = NULL;
    sw_error err;
    CHECK_EQ_I64(sw_tiled_evictable_new(p, s, 2, GRID, TILE, &te, &err), SW_OK);
    if (!te) {
        fprintf(stderr, "%s over %s: %s\n", KIND[pk], KIND[sk], err.msg);
    } else {
        CHECK(values_are(te, -1, 0));
        fault_changes_nothing(te, 1);
        CHECK_EQ_I64(sw_tiled_evictable_evict(te, ALL, 4, &err), SW_OK);
        CHECK_EQ_I64(tiles_at(te, SW_TE_SECONDARY), 4);
        CHECK(values_are(te, -1, 0));
        fault_changes_nothing(te, 0);
        CHECK_EQ_I64(sw_tiled_evictable_promote(te, ALL, 4, &err), SW_OK);
        CHECK_EQ_I64(tiles_at(te, SW_TE_PRIMARY), 4);
        CHECK(values_are(te, -1, 0));
        float nine = 9;
        CHECK_EQ_I64(sw_tiled_evictable_write(te, 7, 1, &nine, &err), SW_OK);
        CHECK(values_are(te, 7, 9));
        CHECK_EQ_I64(sw_tiled_evictable_evict(te, ALL, 2, &err), SW_OK);
        CHECK_EQ_I64(tiles_at(te, SW_TE_SECONDARY), 2);
        CHECK(values_are(te, 7, 9));
        CHECK(projects(te, 7, 9));
        /* Its carrier reads and writes slots as any other (no binding). */
        sw_carrier *c = NULL;
        float got[2] = {0}, two[2] = {7, 8};
        CHECK_EQ_I64(sw_tiled_evictable_carrier(te, &c, &err), SW_OK);
        CHECK_EQ_I64(sw_carrier_write(c, 6, 2, two, &err), SW_OK);
        CHECK_EQ_I64(sw_carrier_read(c, 6, 2, got, &err), SW_OK);
        CHECK(got[0] == 7 && got[1] == 8);
        sw_carrier_unref(c);
        CHECK_EQ_I64(sw_tiled_evictable_release(te, &err), SW_OK);
        sw_tiled_evictable_unref(te);
    }
    sw_carrier_unref(p);
    sw_carrier_unref(s);
}

/* Primary empty, secondary full: the tiles start in place in the
 * secondary; promote all, project, evict all back, project. */
static void round_trip_from_secondary(int pk, int sk)
{
    sw_carrier *p = tier(pk, 0), *s = tier(sk, 1);
    sw_tiled_evictable *te = NULL;
    sw_error err;
    CHECK_EQ_I64(sw_tiled_evictable_new(p, s, 2, GRID, TILE, &te, &err), SW_OK);
    if (te) {
        CHECK_EQ_I64(tiles_at(te, SW_TE_SECONDARY), 4);
        CHECK(projects(te, -1, 0));
        CHECK_EQ_I64(sw_tiled_evictable_promote(te, ALL, 4, &err), SW_OK);
        CHECK_EQ_I64(tiles_at(te, SW_TE_PRIMARY), 4);
        CHECK(values_are(te, -1, 0));
        CHECK_EQ_I64(sw_tiled_evictable_evict(te, ALL, 4, &err), SW_OK);
        CHECK(values_are(te, -1, 0));
        CHECK(projects(te, -1, 0));
        CHECK_EQ_I64(sw_tiled_evictable_release(te, &err), SW_OK);
        sw_tiled_evictable_unref(te);
    }
    sw_carrier_unref(p);
    sw_carrier_unref(s);
}

static void test_te_core_pairs_round_trip(void)
{
    for (int pk = 0; pk < NKINDS; pk++)
        for (int sk = 0; sk < NKINDS; sk++) {
            if ((pk == BLOCK || sk == BLOCK) && !dev)
                continue;
            round_trip_from_primary(pk, sk);
            round_trip_from_secondary(pk, sk);
        }
}

/* B-11 on the core path: a tile evicted into a block device is flushed
 * before the request commits; a failing fdatasync (which faults the
 * device) fails the request and the tiles stay primary, values intact. */
static void test_te_block_tile_durable_before_commit(const char *path)
{
    sw_error err;
    sw_block_device *d = NULL;
    CHECK_EQ_I64(sw_block_device_open(path, &d, &err), SW_OK);
    if (!d)
        return;
    sw_block_device *kept = dev;
    dev = d;
    sw_carrier *p = tier(CPU, 1), *s = tier(BLOCK, 0);
    sw_tiled_evictable *te = NULL;
    CHECK_EQ_I64(sw_tiled_evictable_new(p, s, 2, GRID, TILE, &te, &err), SW_OK);
    if (te) {
        uint64_t version = sw_tiled_evictable_version(te);
        sw_fault_arm("blockdev_fdatasync", 0, 1);
        CHECK_EQ_I64(sw_tiled_evictable_evict(te, ALL, 1, &err), SW_EIO);
        sw_fault_arm("blockdev_fdatasync", 0, 0);
        CHECK_EQ_I64(tiles_at(te, SW_TE_PRIMARY), 4);
        CHECK_EQ_I64(sw_tiled_evictable_version(te), version);
        CHECK(values_are(te, -1, 0));
        CHECK(sw_block_device_is_faulted(d));
        CHECK_EQ_I64(sw_tiled_evictable_release(te, &err), SW_OK);
        sw_tiled_evictable_unref(te);
    }
    sw_carrier_unref(p);
    sw_carrier_unref(s);
    (void)sw_block_device_close_when_unused(d, 1, NULL);
    sw_block_device_unref(d);
    dev = kept;
}

/* sw_tier_allocate_like makes a fresh zeroed BlockDeviceCarrier on the
 * prototype's device (before: SW_ENOTSUP, "pass a tier factory"). */
static void test_tier_allocate_like_block_device(void)
{
    sw_error err;
    sw_carrier *proto = tier(BLOCK, 1), *fresh = NULL;
    CHECK_EQ_I64(sw_tier_allocate_like(proto, 5, SW_DT_FLOAT32, &fresh, &err), SW_OK);
    if (fresh) {
        float got[5] = {1, 1, 1, 1, 1};
        CHECK(sw_block_device_of(fresh) == dev);
        CHECK_EQ_I64(sw_carrier_size(fresh), 5);
        CHECK_EQ_I64(sw_carrier_read(fresh, 0, 5, got, &err), SW_OK);
        CHECK(got[0] == 0 && got[4] == 0);
        CHECK(sw_carrier_is_mutable(fresh));
        sw_carrier_unref(fresh);
    }
    /* Float32 only, as sw_block_device_allocate. */
    CHECK_EQ_I64(sw_tier_allocate_like(proto, 5, SW_DT_INT32, &fresh, &err), SW_EINVAL);
    sw_carrier_unref(proto);
}

/* Threads over a pair served without hooks (reads of its bound stores run
 * without the lock, replaced stores kept until they end): one thread moves
 * tiles (0, 0) and (1, 0) back and forth, another writes tiles (0, 1) and
 * (1, 1) and reads every slot, through the TiledEvictable and its carrier.
 * Every read sees the values; nothing races (run under TSan). */
typedef struct storm {
    sw_tiled_evictable *te;
    int mover;
    int bad;
} storm;

static void *storm_work(void *arg)
{
    storm *w = arg;
    sw_error err;
    sw_carrier *c = NULL;
    if (sw_tiled_evictable_carrier(w->te, &c, &err) != SW_OK)
        w->bad++;
    for (int round = 0; round < 200 && c; round++) {
        if (w->mover) {
            w->bad += sw_tiled_evictable_evict(w->te, ALL, 2, &err) != SW_OK;
            w->bad += sw_tiled_evictable_promote(w->te, ALL, 2, &err) != SW_OK;
            continue;
        }
        float v = value_of(13), got[SLOTS];
        w->bad += sw_tiled_evictable_write(w->te, 13, 1, &v, &err) != SW_OK;
        w->bad += !values_are(w->te, -1, 0);
        w->bad += sw_carrier_read(c, 0, SLOTS, got, &err) != SW_OK;
        for (int i = 0; i < SLOTS; i++)
            w->bad += got[i] != value_of(i);
    }
    sw_carrier_unref(c);
    return NULL;
}

static void test_te_core_pair_threads(int pk, int sk)
{
    sw_carrier *p = tier(pk, 1), *s = tier(sk, 0);
    sw_tiled_evictable *te = NULL;
    sw_error err;
    CHECK_EQ_I64(sw_tiled_evictable_new(p, s, 2, GRID, TILE, &te, &err), SW_OK);
    if (te) {
        storm w[2] = {{te, 1, 0}, {te, 0, 0}};
        pthread_t th[2];
        for (int i = 0; i < 2; i++)
            pthread_create(&th[i], NULL, storm_work, &w[i]);
        for (int i = 0; i < 2; i++)
            pthread_join(th[i], NULL);
        CHECK_EQ_I64(w[0].bad, 0);
        CHECK_EQ_I64(w[1].bad, 0);
        CHECK(values_are(te, -1, 0));
        CHECK_EQ_I64(sw_tiled_evictable_release(te, &err), SW_OK);
        sw_tiled_evictable_unref(te);
    }
    sw_carrier_unref(p);
    sw_carrier_unref(s);
}

int main(void)
{
    if (!sw_fault_enabled()) {
        printf("skip: needs a build with -Dfault_injection=true\n");
        return 77;
    }
    const char *why = loop_unavailable();
    loop_dev loop, loop2;
    int have = !why && loop_attach(&loop, 32ll << 20, 0, &why) == 0;
    int have2 = have && loop_attach(&loop2, 32ll << 20, 0, &why) == 0;
    sw_error err;
    if (have && sw_block_device_open(loop.path, &dev, &err) != SW_OK) {
        fprintf(stderr, "cannot open %s: %s\n", loop.path, err.msg);
        CHECK(0);
    }
    if (!dev)
        printf("skip the BlockDeviceCarrier pairs: %s\n", why ? why : "no device");
    test_te_core_pairs_round_trip();
    test_te_core_pair_threads(GENERIC, FILEB);
    if (dev)
        test_te_core_pair_threads(FILEB, BLOCK);
    if (dev)
        test_tier_allocate_like_block_device();
    if (have2)
        test_te_block_tile_durable_before_commit(loop2.path);
    if (dev) {
        CHECK_EQ_I64(sw_block_device_close(dev, &err), SW_OK);
        sw_block_device_unref(dev);
    }
    if (have2)
        loop_detach(&loop2);
    if (have)
        loop_detach(&loop);
    sw_move_drain();
    return check_report("tiled_evictable_core_pairs");
}
