/* Waiting on a move with a bound (sw_move_wait_for) and reading its
 * progress (sw_move_progress), as a binding's wait(timeout) and progress
 * do: a timeout changes nothing and the handle stays valid, many threads
 * wait in slices on one handle, a handle dropped by its caller while
 * others wait still commits, and the handle's own byte counter ends at the
 * move's bytes. A large move on the pool is copied by its waiter too
 * (sw_move_wait, sw_move_wait_helping) and ends whole, while a bounded wait
 * keeps its bound. Run under ThreadSanitizer in CI. */
#include <pthread.h>
#include <stdatomic.h>

#include "check.h"
#include "gated.h"
#include <strideweave/strideweave.h>

#define THREADS 8
#define SLICE_NS 1000000LL /* 1 ms */

static sw_tensor *floats(int64_t n, sw_carrier **c)
{
    sw_error err;
    sw_tensor *t = NULL;
    int64_t ext[1] = {n};
    CHECK(sw_cpu_new(n, SW_DT_FLOAT32, 0, c, &err) == SW_OK);
    CHECK(sw_tensor_new_strided(*c, 0, 1, ext, NULL, &t, &err) == SW_OK);
    for (int64_t i = 0; i < n; i++)
        CHECK(sw_tensor_set_f32(t, i, (float)i + 0.5f, &err) == SW_OK);
    return t;
}

/* A bounded wait on a move that cannot finish yet (held) times out, and
 * the move is untouched: still pending, nothing copied, the handle usable;
 * once let go, the same handle waits to the end and counts every byte. */
static void test_timeout_leaves_the_move_running(void)
{
    sw_error err;
    sw_carrier *cpu, *fb;
    sw_tensor *t = floats(100, &cpu), *r = NULL;
    CHECK(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &fb, &err) == SW_OK);
    sw_move_hold(1);
    sw_move_handle *m = NULL;
    CHECK(sw_move_async(t, fb, NULL, &m, &err) == SW_OK);
    CHECK(sw_move_wait_for(m, 0) == 0);
    CHECK(sw_move_wait_for(m, 20 * SLICE_NS) == 0);
    CHECK(!sw_move_done(m));
    CHECK(sw_carrier_is_pending(cpu) && sw_carrier_is_pending(fb));
    int64_t done = -1, total = -1;
    sw_move_progress(m, &done, &total);
    CHECK_EQ_I64(done, 0);
    CHECK_EQ_I64(total, 400);
    sw_move_hold(0);
    CHECK(sw_move_wait_for(m, -1) == 1);
    CHECK(sw_move_done(m));
    sw_move_progress(m, &done, &total);
    CHECK_EQ_I64(done, 400);
    CHECK_EQ_I64(total, 400);
    CHECK(sw_move_wait(m, &r, &err) == SW_OK && r);
    float v = 0;
    CHECK(sw_tensor_get_f32(r, 99, &v, &err) == SW_OK && v == 99.5f);
    CHECK(sw_carrier_is_released(cpu));
    sw_move_unref(m);
    sw_tensor_unref(r);
    sw_tensor_unref(t);
    sw_carrier_unref(fb);
    sw_carrier_unref(cpu);
}

/* A small move that ran on its caller is done when sw_move_async returns:
 * a zero wait answers 1 and the progress is whole. NULL pointers are
 * allowed. */
static void test_done_at_once(void)
{
    sw_error err;
    sw_carrier *cpu, *dst;
    sw_tensor *t = floats(16, &cpu);
    CHECK(sw_cpu_new(16, SW_DT_FLOAT32, SW_CARRIER_EMPTY, &dst, &err) == SW_OK);
    sw_move_handle *m = NULL;
    CHECK(sw_move_async(t, dst, NULL, &m, &err) == SW_OK);
    CHECK(sw_move_wait_for(m, 0) == 1);
    int64_t done = -1, total = -1;
    sw_move_progress(m, &done, &total);
    CHECK_EQ_I64(done, 64);
    CHECK_EQ_I64(total, 64);
    sw_move_progress(m, NULL, NULL);
    sw_move_unref(m);
    sw_tensor_unref(t);
    sw_carrier_unref(dst);
    sw_carrier_unref(cpu);
}

/* A caller's own counter (options.progress) is the one counted and read,
 * and ends at the move's bytes. */
static void test_caller_counter(void)
{
    sw_error err;
    sw_carrier *cpu, *fb;
    sw_tensor *t = floats(1000, &cpu);
    CHECK(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &fb, &err) == SW_OK);
    int64_t counter = 0;
    sw_move_options o = {.progress = &counter};
    sw_move_handle *m = NULL;
    CHECK(sw_move_async(t, fb, &o, &m, &err) == SW_OK);
    CHECK(sw_move_wait(m, NULL, &err) == SW_OK);
    int64_t done = -1;
    sw_move_progress(m, &done, NULL);
    CHECK_EQ_I64(counter, 4000);
    CHECK_EQ_I64(done, 4000);
    sw_move_unref(m);
    sw_tensor_unref(t);
    sw_carrier_unref(fb);
    sw_carrier_unref(cpu);
}

typedef struct slicer {
    sw_move_handle *m; /* one reference of its own */
    atomic_int *timeouts;
    sw_status st;
    int done_after; /* sw_move_done once the wait said 1 */
    sw_tensor *result;
} slicer;

/* Waits in short slices (as a binding checks its signals between them),
 * then takes the outcome; drops its reference. */
static void *wait_in_slices(void *arg)
{
    slicer *s = arg;
    sw_error err;
    while (!sw_move_wait_for(s->m, SLICE_NS))
        atomic_fetch_add(s->timeouts, 1);
    s->done_after = sw_move_done(s->m);
    s->st = sw_move_wait(s->m, &s->result, &err);
    sw_move_unref(s->m);
    return NULL;
}

/* Many threads wait in slices on one move that stays in flight until the
 * test opens its gate; the caller drops its handle meanwhile. Every waiter
 * times out at least once, then all get the one result; the move commits
 * (the source is released). */
static void test_many_slicing_waiters_and_a_dropped_handle(void)
{
    sw_error err;
    gated g;
    gated_init(&g, 16);
    sw_carrier *src, *dst;
    sw_tensor *t = floats(16, &src);
    CHECK(sw_carrier_new(&gated_ops, &g, SW_DT_FLOAT32, 0, &dst, &err) == SW_OK);
    sw_move_handle *m = NULL;
    CHECK(sw_move_async(t, dst, NULL, &m, &err) == SW_OK);
    atomic_int timeouts[THREADS];
    slicer s[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        atomic_init(&timeouts[i], 0);
        s[i] = (slicer){sw_move_ref(m), &timeouts[i], SW_EIO, 0, NULL};
        pthread_create(&th[i], NULL, wait_in_slices, &s[i]);
    }
    gated_wait_entered(&g);
    /* Each waiter has timed out at least once before the gate opens. */
    for (int i = 0; i < THREADS; i++)
        while (atomic_load(&timeouts[i]) == 0)
            sw_move_wait_for(m, SLICE_NS);
    CHECK(!sw_move_done(m));
    /* Slot by slot counts nothing as it goes: the commit makes it whole. */
    int64_t done = -1, total = -1;
    sw_move_progress(m, &done, &total);
    CHECK_EQ_I64(done, 0);
    CHECK_EQ_I64(total, 64);
    sw_move_handle *probe = sw_move_ref(m); /* read after the commit */
    sw_move_unref(m); /* dropped before completion */
    gated_open(&g);
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        CHECK(s[i].st == SW_OK && s[i].done_after);
        CHECK(s[i].result == s[0].result);
        CHECK(atomic_load(&timeouts[i]) >= 1);
    }
    sw_move_progress(probe, &done, &total);
    CHECK_EQ_I64(done, 64);
    CHECK_EQ_I64(total, 64);
    sw_move_unref(probe);
    for (int i = 0; i < THREADS; i++)
        sw_tensor_unref(s[i].result);
    CHECK(sw_carrier_is_released(src));
    CHECK(g.slots[15] == 15.5f);
    sw_tensor_unref(t);
    sw_carrier_unref(src);
    sw_carrier_unref(dst);
}

/* 40 MiB of Float32 on a CPU carrier, slot i holding i + 0.25. */
#define LARGE_SLOTS ((int64_t)10 << 20)

static sw_tensor *large_floats(sw_carrier **c)
{
    sw_error err;
    sw_tensor *t = NULL;
    int64_t ext[1] = {LARGE_SLOTS};
    CHECK(sw_cpu_new(LARGE_SLOTS, SW_DT_FLOAT32, SW_CARRIER_EMPTY, c, &err) == SW_OK);
    float *p = sw_cpu_pointer(*c);
    for (int64_t i = 0; i < LARGE_SLOTS; i++)
        p[i] = (float)i + 0.25f;
    CHECK(sw_tensor_new_strided(*c, 0, 1, ext, NULL, &t, &err) == SW_OK);
    return t;
}

static int64_t wrong_slots(sw_tensor *r)
{
    const float *p = sw_cpu_pointer(sw_tensor_carrier(r));
    int64_t wrong = 0;
    for (int64_t i = 0; i < LARGE_SLOTS; i++)
        wrong += p[i] != (float)i + 0.25f;
    return wrong;
}

/* A move large enough to be cut into parts (32 MiB and up), waited for by
 * each kind of unlimited wait: every slot arrives, once. Held first, so
 * that the waiter is there before the pool thread cuts the parts; a
 * bounded wait on it still returns at its bound. */
static void test_waiters_copy_parts_of_a_large_move(void)
{
    for (int how = 0; how < 2; how++) {
        sw_error err;
        sw_carrier *src, *dst;
        sw_tensor *t = large_floats(&src), *r = NULL;
        CHECK(sw_cpu_new(LARGE_SLOTS, SW_DT_FLOAT32, SW_CARRIER_EMPTY, &dst, &err) == SW_OK);
        sw_move_hold(1);
        sw_move_handle *m = NULL;
        CHECK(sw_move_async(t, dst, NULL, &m, &err) == SW_OK);
        CHECK(sw_move_wait_helping(m, SLICE_NS) == 0); /* nothing to help with yet */
        CHECK(sw_move_wait_for(m, SLICE_NS) == 0);
        sw_move_hold(0);
        if (how == 0) {
            CHECK(sw_move_wait(m, &r, &err) == SW_OK);
        } else {
            while (!sw_move_wait_helping(m, SLICE_NS))
                ;
            CHECK(sw_move_wait(m, &r, &err) == SW_OK);
        }
        CHECK(r && sw_tensor_carrier(r) == dst);
        CHECK_EQ_I64(wrong_slots(r), 0);
        CHECK(sw_carrier_is_released(src));
        int64_t done = -1, total = -1;
        sw_move_progress(m, &done, &total);
        CHECK_EQ_I64(done, LARGE_SLOTS * 4);
        sw_move_unref(m);
        sw_tensor_unref(r);
        sw_tensor_unref(t);
        sw_carrier_unref(src);
        sw_carrier_unref(dst);
    }
}

int main(void)
{
    test_timeout_leaves_the_move_running();
    test_done_at_once();
    test_caller_counter();
    test_many_slicing_waiters_and_a_dropped_handle();
    test_waiters_copy_parts_of_a_large_move();
    return check_report("move_wait");
}
