/* A move's transfer guard (move.h, transfer_enter / transfer_leave): each
 * is called once, in that order, on the caller's thread, around a transfer
 * the core runs there, with both carriers marked and no carrier lock held;
 * never for a transfer the pool runs; only when both are set; still paired
 * when the transfer fails, and then nothing has changed. The Python binding
 * lets the GIL go there around a block device's I/O and keeps it for the
 * move's checks and commit (issue 19): a small read out of a device, run on
 * its caller, still sees what an earlier durable move wrote, and a failed
 * one leaves both carriers as they were. */
#include <pthread.h>

#include "check.h"
#include "helpers.h"
#include "loop.h"
#include <strideweave/strideweave.h>
#include <strideweave/binding.h>
#include "strideweave/testing.h"

#define MIB (1024LL * 1024)

typedef struct guard_log {
    sw_carrier *src, *dst;
    pthread_t caller;
    int enters, leaves, commits;
    int out_of_order;    /* leave without enter, commit inside the guard */
    int unmarked;        /* a carrier not marked pending at enter */
    int other_thread;    /* a guard call off the caller's thread */
} guard_log;

static void seen_from_guard(guard_log *g)
{
    if (!pthread_equal(pthread_self(), g->caller))
        g->other_thread++;
}

static void on_enter(void *user)
{
    guard_log *g = user;
    if (g->enters != g->leaves)
        g->out_of_order++;
    g->enters++;
    seen_from_guard(g);
    if (!(sw_carrier_pending_roles(g->src) & SW_CARRIER_PENDING_SOURCE) ||
        !(sw_carrier_pending_roles(g->dst) & SW_CARRIER_PENDING_DESTINATION))
        g->unmarked++;
}

static void on_leave(void *user)
{
    guard_log *g = user;
    g->leaves++;
    if (g->leaves != g->enters)
        g->out_of_order++;
    seen_from_guard(g);
}

static void on_commit_enter(void *user)
{
    guard_log *g = user;
    g->commits++;
    if (g->enters != g->leaves)
        g->out_of_order++;
}

static void nothing(void *user) { (void)user; }

/* Slots 0, n/2 and n-1 of `c` are start + i. */
static int holds(sw_carrier *c, int64_t n, float start)
{
    sw_error err;
    int64_t at[3] = {0, n / 2, n - 1};
    for (int i = 0; i < 3; i++) {
        float v = -1;
        if (sw_carrier_read(c, at[i], 1, &v, &err) != SW_OK || v != start + (float)at[i])
            return 0;
    }
    return 1;
}

/* One move of src's n slots into dst with the guard (and a commit guard
 * that checks it ran outside the transfer guard); the wait's status. */
static sw_status guarded_move(sw_carrier *src, sw_carrier *dst, int64_t n, int caller_waits,
                              guard_log *g)
{
    sw_error err;
    g->src = src;
    g->dst = dst;
    g->caller = pthread_self();
    sw_move_options o = {
        .user = g,
        .commit_enter = on_commit_enter,
        .commit_leave = nothing,
        .caller_waits = caller_waits,
        .transfer_enter = on_enter,
        .transfer_leave = on_leave,
    };
    sw_tensor *t = flat_tensor(src, n);
    CHECK(t != NULL);
    sw_move_handle *m = NULL;
    sw_status st = sw_move_async(t, dst, &o, &m, &err);
    sw_tensor_unref(t);
    if (st != SW_OK)
        return st;
    sw_tensor *out = NULL;
    st = sw_move_wait(m, &out, &err);
    sw_tensor_unref(out);
    sw_move_unref(m);
    return st;
}

static void check_clean(const guard_log *g)
{
    CHECK(g->out_of_order == 0 && g->unmarked == 0 && g->other_thread == 0);
}

/* A move run on its caller (the light path), waited at once or not. */
static void test_guard_around_a_transfer_on_the_caller(void)
{
    for (int waits = 0; waits <= 1; waits++) {
        int64_t n = 1024;
        sw_carrier *src = cpu_values(n, 1.0f), *dst = NULL;
        sw_error err;
        CHECK(sw_cpu_new(n, SW_DT_FLOAT32, SW_CARRIER_EMPTY, &dst, &err) == SW_OK);
        guard_log g = {0};
        CHECK_EQ_I64(guarded_move(src, dst, n, waits, &g), SW_OK);
        CHECK(g.enters == 1 && g.leaves == 1 && g.commits == 1);
        check_clean(&g);
        CHECK(sw_carrier_is_released(src) && holds(dst, n, 1.0f));
        sw_carrier_unref(src);
        sw_carrier_unref(dst);
    }
}

/* A transfer the pool runs (a large span, not waited at once): no guard. */
static void test_no_guard_for_a_pool_transfer(void)
{
    int64_t n = 4 * MIB / 4;
    sw_carrier *src = cpu_values(n, 2.0f), *dst = NULL;
    sw_error err;
    CHECK(sw_cpu_new(n, SW_DT_FLOAT32, SW_CARRIER_EMPTY, &dst, &err) == SW_OK);
    guard_log g = {0};
    CHECK_EQ_I64(guarded_move(src, dst, n, 0, &g), SW_OK);
    CHECK(g.enters == 0 && g.leaves == 0 && g.commits == 1);
    CHECK(holds(dst, n, 2.0f));
    sw_carrier_unref(src);
    sw_carrier_unref(dst);
}

/* Only one of the two set: neither runs (a lone enter would never be
 * undone). */
static void test_half_a_guard_runs_nothing(void)
{
    int64_t n = 256;
    sw_carrier *src = cpu_values(n, 3.0f), *dst = NULL;
    sw_error err;
    CHECK(sw_cpu_new(n, SW_DT_FLOAT32, SW_CARRIER_EMPTY, &dst, &err) == SW_OK);
    guard_log g = {.src = src, .dst = dst, .caller = pthread_self()};
    sw_move_options o = {.user = &g, .transfer_enter = on_enter, .caller_waits = 1};
    sw_tensor *t = flat_tensor(src, n), *out = NULL;
    sw_move_handle *m = NULL;
    CHECK(sw_move_async(t, dst, &o, &m, &err) == SW_OK);
    CHECK(m && sw_move_wait(m, &out, &err) == SW_OK);
    CHECK(g.enters == 0 && holds(dst, n, 3.0f));
    sw_tensor_unref(out);
    sw_tensor_unref(t);
    sw_move_unref(m);
    sw_carrier_unref(src);
    sw_carrier_unref(dst);
}

/* A transfer that fails inside the guard: the guard is still paired, and
 * the source is live and unchanged, the destination untouched and no
 * carrier left marked (it moves again). */
static void test_guard_paired_when_the_transfer_fails(void)
{
    int64_t n = 1024;
    sw_carrier *src = cpu_values(n, 4.0f), *dst = NULL;
    sw_error err;
    CHECK(sw_cpu_new(n, SW_DT_FLOAT32, 0, &dst, &err) == SW_OK);
    uint64_t sv = sw_carrier_version(src), dv = sw_carrier_version(dst);
    guard_log g = {0};
    CHECK(sw_fault_arm("move_transfer", 0, 1) == SW_OK);
    CHECK_EQ_I64(guarded_move(src, dst, n, 1, &g), SW_EIO);
    sw_fault_clear();
    CHECK(g.enters == 1 && g.leaves == 1 && g.commits == 1);
    check_clean(&g);
    CHECK(!sw_carrier_is_released(src) && holds(src, n, 4.0f));
    CHECK(sw_carrier_version(src) == sv && sw_carrier_version(dst) == dv);
    float z = -1;
    CHECK(sw_carrier_read(dst, n - 1, 1, &z, &err) == SW_OK && z == 0.0f);
    guard_log again = {0};
    CHECK_EQ_I64(guarded_move(src, dst, n, 1, &again), SW_OK);
    CHECK(holds(dst, n, 4.0f));
    sw_carrier_unref(src);
    sw_carrier_unref(dst);
}

/* ---- on a loop device: the path the Python binding takes ------------------ */

static loop_dev loop;

/* A small read out of a device, run on its caller inside the guard, sees
 * what the durable move before it wrote (read from the device, not from
 * memory the write left behind), and one whose read fails changes
 * nothing: the block carrier stays live with its version, the CPU
 * destination untouched. */
static void test_block_read_inside_the_guard(void)
{
    sw_error err;
    sw_block_device *d = NULL;
    if (sw_block_device_open(loop.path, &d, &err) != SW_OK) {
        fprintf(stderr, "cannot open %s: %s\n", loop.path, err.msg);
        CHECK(0);
        return;
    }
    for (int fail = 0; fail <= sw_fault_enabled(); fail++) {
        int64_t n = 4096 / 4;
        sw_carrier *blk = NULL, *cpu = cpu_values(n, 10.0f + (float)fail), *back = NULL;
        CHECK(sw_block_device_allocate(d, n, SW_DT_FLOAT32, 0, &blk, &err) ==
              SW_OK);
        guard_log in = {0};
        CHECK_EQ_I64(guarded_move(cpu, blk, n, 1, &in), SW_OK); /* durable (B-11) */
        CHECK(in.enters == 1 && in.leaves == 1);
        check_clean(&in);
        float raw[4] = {0};
        CHECK(loop_backing_floats(&loop, sw_block_device_carrier_offset_bytes(blk), raw, 4) == 0);
        CHECK(raw[3] == 13.0f + (float)fail);
        uint64_t version = sw_carrier_version(blk);
        CHECK(sw_cpu_new(n, SW_DT_FLOAT32, 0, &back, &err) == SW_OK);
        guard_log out = {0};
        if (fail)
            CHECK(sw_fault_arm("pread", 0, 1) == SW_OK);
        sw_status st = guarded_move(blk, back, n, 0, &out);
        sw_fault_clear();
        CHECK(out.enters == 1 && out.leaves == 1 && out.commits == 1);
        check_clean(&out);
        if (!fail) {
            CHECK_EQ_I64(st, SW_OK);
            CHECK(sw_carrier_is_released(blk) && holds(back, n, 10.0f));
        } else {
            CHECK_EQ_I64(st, SW_EIO);
            CHECK(!sw_carrier_is_released(blk) && sw_carrier_version(blk) == version);
            float z = -1;
            CHECK(sw_carrier_read(back, 0, 1, &z, &err) == SW_OK && z == 0.0f);
            CHECK(sw_carrier_version(back) == 0);
        }
        sw_carrier_unref(cpu);
        sw_carrier_unref(back);
        sw_carrier_unref(blk);
    }
    CHECK(sw_block_device_close(d, &err) == SW_OK || sw_block_device_is_faulted(d));
    sw_block_device_unref(d);
}

int main(void)
{
    test_guard_around_a_transfer_on_the_caller();
    test_no_guard_for_a_pool_transfer();
    test_half_a_guard_runs_nothing();
    if (sw_fault_enabled())
        test_guard_paired_when_the_transfer_fails();
    const char *why = loop_unavailable();
    if (!why && loop_attach(&loop, 64 * MIB, 0, &why) == 0) {
        test_block_read_inside_the_guard();
        loop_detach(&loop);
    } else {
        printf("skip the loop device test: %s\n", why);
    }
    sw_move_drain();
    return check_report("move_transfer_guard");
}
