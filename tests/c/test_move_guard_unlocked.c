/* White-box: a move's transfer guard (move.h, transfer_enter /
 * transfer_leave) runs with no carrier lock held, so a binding may block
 * there (the Python binding lets the GIL go around a block device's I/O)
 * without a lock order against the carriers' mutexes. The carriers' lock
 * is not in the public headers; test_move_transfer_guard.c checks the rest
 * of the guard through them. */
#include <pthread.h>

#include "carrier_internal.h" /* sw_carrier's lock */
#include "check.h"
#include "loop.h"
#include <strideweave/strideweave.h>
#include "strideweave/testing.h"

#define MIB (1024LL * 1024)

typedef struct lock_log {
    sw_carrier *src, *dst;
    int calls;  /* enter and leave calls seen */
    int locked; /* of them, with a carrier lock held */
} lock_log;

/* Whether no thread holds the carrier's lock (trylock fails for its own
 * holder too). */
static int lock_free(sw_carrier *c)
{
    if (pthread_mutex_trylock(&c->lock) != 0)
        return 0;
    pthread_mutex_unlock(&c->lock);
    return 1;
}

static void seen(void *user)
{
    lock_log *g = user;
    g->calls++;
    if (!lock_free(g->src) || !lock_free(g->dst))
        g->locked++;
}

/* One move of src's n slots into dst run on the caller, with the guard;
 * the wait's status. */
static sw_status guarded_move(sw_carrier *src, sw_carrier *dst, int64_t n, lock_log *g)
{
    sw_error err;
    *g = (lock_log){.src = src, .dst = dst};
    sw_move_options o = {.user = g, .caller_waits = 1, .transfer_enter = seen,
                         .transfer_leave = seen};
    sw_tensor *t = NULL, *out = NULL;
    CHECK(sw_tensor_new_strided(src, 0, 1, (int64_t[]){n}, NULL, &t, &err) == SW_OK);
    sw_move_handle *m = NULL;
    sw_status st = sw_move_async(t, dst, &o, &m, &err);
    sw_tensor_unref(t);
    if (st != SW_OK)
        return st;
    st = sw_move_wait(m, &out, &err);
    sw_tensor_unref(out);
    sw_move_unref(m);
    return st;
}

static sw_carrier *cpu(int64_t n, int flags)
{
    sw_error err;
    sw_carrier *c = NULL;
    CHECK(sw_cpu_new(n, SW_DT_FLOAT32, flags, &c, &err) == SW_OK);
    return c;
}

/* Host to host, then a failing one (the guard still paired, unlocked). */
static void test_host_transfer_unlocked(void)
{
    for (int fail = 0; fail <= sw_fault_enabled(); fail++) {
        int64_t n = 1024;
        sw_carrier *src = cpu(n, 0), *dst = cpu(n, 0);
        lock_log g;
        if (fail)
            CHECK(sw_fault_arm("move_transfer", 0, 1) == SW_OK);
        CHECK_EQ_I64(guarded_move(src, dst, n, &g), fail ? SW_EIO : SW_OK);
        sw_fault_clear();
        CHECK_EQ_I64(g.calls, 2);
        CHECK_EQ_I64(g.locked, 0);
        sw_carrier_unref(src);
        sw_carrier_unref(dst);
    }
}

/* Into a block device and back out of it: the binding's blocking I/O. */
static void test_block_transfer_unlocked(const char *path)
{
    sw_error err;
    sw_block_device *d = NULL;
    if (sw_block_device_open(path, &d, &err) != SW_OK) {
        fprintf(stderr, "cannot open %s: %s\n", path, err.msg);
        CHECK(0);
        return;
    }
    int64_t n = 4096 / 4;
    sw_carrier *src = cpu(n, 0), *blk = NULL, *back = cpu(n, 0);
    CHECK(sw_block_device_allocate(d, n, SW_DT_FLOAT32, 0, &blk, &err) == SW_OK);
    lock_log in, out;
    CHECK_EQ_I64(guarded_move(src, blk, n, &in), SW_OK);
    CHECK_EQ_I64(guarded_move(blk, back, n, &out), SW_OK);
    CHECK(in.calls == 2 && out.calls == 2);
    CHECK(in.locked == 0 && out.locked == 0);
    sw_carrier_unref(src);
    sw_carrier_unref(blk);
    sw_carrier_unref(back);
    CHECK(sw_block_device_close(d, &err) == SW_OK);
    sw_block_device_unref(d);
}

int main(void)
{
    test_host_transfer_unlocked();
    loop_dev loop;
    const char *why = loop_unavailable();
    if (!why && loop_attach(&loop, 64 * MIB, 0, &why) == 0) {
        test_block_transfer_unlocked(loop.path);
        loop_detach(&loop);
    } else {
        printf("skip the loop device test: %s\n", why);
    }
    return check_report("move_guard_unlocked");
}
