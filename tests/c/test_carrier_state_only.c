/* STATE_ONLY carrier classes (carrier.h): the core holds the state of a
 * carrier whose slots, size and dtype only a language binding knows, and
 * never calls into that binding; the deadlock rule for binding hooks that
 * need a lock of their own (Python's GIL). */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "check.h"
#include <strideweave/strideweave.h>
#include <strideweave/binding.h>

/* A stand-in for the GIL: every slot callback of the class takes it, as a
 * Python trampoline would. The core must call none of them. */
static pthread_mutex_t gil = PTHREAD_MUTEX_INITIALIZER;
static atomic_int slot_calls;
static int releases, destroys;

static int64_t so_size(void *impl)
{
    (void)impl;
    pthread_mutex_lock(&gil);
    atomic_fetch_add(&slot_calls, 1);
    pthread_mutex_unlock(&gil);
    return 4;
}
static sw_status so_io(void *impl, int64_t slot, int64_t n, void *buf, sw_error *err)
{
    (void)impl, (void)slot, (void)n, (void)buf, (void)err;
    pthread_mutex_lock(&gil);
    atomic_fetch_add(&slot_calls, 1);
    pthread_mutex_unlock(&gil);
    return SW_OK;
}
static sw_status so_write(void *impl, int64_t slot, int64_t n, const void *in, sw_error *err)
{
    return so_io(impl, slot, n, (void *)in, err);
}
static sw_status so_allocate(void *impl, int64_t slots, sw_error *err)
{
    return so_io(impl, slots, 0, NULL, err);
}
static sw_status so_unallocate(void *impl, sw_error *err) { return so_io(impl, 0, 0, NULL, err); }
static void so_release(void *impl) { (void)impl, releases++; }
static void so_destroy(void *impl) { (void)impl, destroys++; }

static const sw_carrier_class bare_class = {
    .name = "PythonCarrier", .flags = SW_CARRIER_CLASS_STATE_ONLY,
};
static const sw_carrier_class hooked_class = {
    .name = "Hooked", .size = so_size, .read = so_io, .write = so_write,
    .allocate = so_allocate, .unallocate = so_unallocate, .release = so_release,
    .destroy = so_destroy, .flags = SW_CARRIER_CLASS_STATE_ONLY,
};

static void test_state_only_creation(void)
{
    sw_error err;
    sw_carrier *c = NULL;
    /* No callbacks and a dtype with no slot width: only a STATE_ONLY class. */
    CHECK(sw_carrier_new(&bare_class, NULL, SW_DT_ANY, 0, &c, &err) == SW_OK);
    CHECK(sw_carrier_is_state_only(c));
    CHECK(sw_carrier_dtype(c) == SW_DT_ANY);
    CHECK(strcmp(sw_carrier_name(c), "PythonCarrier") == 0);
    CHECK_EQ_I64(sw_carrier_size(c), 0);
    CHECK(sw_carrier_is_mutable(c));
    sw_carrier_unref(c); /* no release callback: nothing to call */

    sw_carrier_class plain = bare_class;
    plain.flags = 0;
    CHECK(sw_carrier_new(&plain, NULL, SW_DT_INT32, 0, &c, &err) == SW_EINVAL);
    CHECK(sw_carrier_new(&bare_class, NULL, SW_DT_COUNT, 0, &c, &err) == SW_EINVAL);

    sw_carrier *cpu;
    CHECK(sw_cpu_new(2, SW_DT_INT32, 0, &cpu, &err) == SW_OK);
    CHECK(!sw_carrier_is_state_only(cpu));
    sw_carrier_unref(cpu);
}

static void test_state_only_slot_ops_refused(void)
{
    sw_error err;
    sw_carrier *c;
    atomic_store(&slot_calls, 0);
    releases = destroys = 0;
    CHECK(sw_carrier_new(&hooked_class, NULL, SW_DT_INT32, 0, &c, &err) == SW_OK);
    int32_t v = 1;
    CHECK(sw_carrier_read(c, 0, 1, &v, &err) == SW_ENOTSUP);
    CHECK(strstr(err.msg, "binding") != NULL);
    CHECK(sw_carrier_write(c, 0, 1, &v, &err) == SW_ENOTSUP);
    CHECK(sw_carrier_allocate(c, 8, &err) == SW_ENOTSUP);
    CHECK(sw_carrier_unallocate(c, &err) == SW_ENOTSUP);
    CHECK_EQ_I64(sw_carrier_size(c), 0);
    CHECK_EQ_I64(sw_carrier_version(c), 0); /* refusals changed nothing */

    /* No tensor, so no move or DLPack export from it; no move into it. */
    int64_t ext = 2;
    sw_tensor *t = NULL;
    CHECK(sw_tensor_new_strided(c, 0, 1, &ext, NULL, &t, &err) == SW_ENOTSUP);
    CHECK(t == NULL);
    sw_carrier *cpu, *file;
    CHECK(sw_cpu_new(2, SW_DT_INT32, 0, &cpu, &err) == SW_OK);
    CHECK(sw_tensor_new_strided(cpu, 0, 1, &ext, NULL, &t, &err) == SW_OK);
    sw_tensor *moved = NULL;
    CHECK(sw_move(t, c, &moved, &err) == SW_ENOTSUP);
    CHECK(moved == NULL && !sw_carrier_is_released(cpu) && !sw_carrier_is_pending(c));
    sw_tensor_unref(t);
    /* Nor a composite tier. */
    CHECK(sw_file_backed_new(NULL, SW_DT_INT32, 0, &file, &err) == SW_OK);
    sw_carrier *ev = NULL;
    CHECK(sw_evictable_new(cpu, c, NULL, &ev, &err) != SW_OK);
    CHECK(sw_evictable_new(c, file, NULL, &ev, &err) != SW_OK);
    CHECK(ev == NULL && !sw_carrier_is_owned(c) && !sw_carrier_is_owned(cpu));
    sw_carrier_unref(cpu);
    sw_carrier_unref(file);

    /* The state works as for any carrier. */
    CHECK(sw_carrier_increment_version(c, &err) == SW_OK);
    CHECK_EQ_I64(sw_carrier_version(c), 1);
    sw_carrier_mark_pending(c, SW_CARRIER_PENDING_DESTINATION);
    CHECK(sw_carrier_increment_version(c, &err) == SW_ESTATE);
    CHECK(sw_carrier_release(c, &err) == SW_ESTATE);
    sw_carrier_unmark_pending(c, SW_CARRIER_PENDING_DESTINATION);
    CHECK(sw_carrier_release(c, &err) == SW_OK);
    CHECK(sw_carrier_is_released(c));
    CHECK_EQ_I64(releases, 1);
    CHECK(sw_carrier_release(c, &err) == SW_OK); /* idempotent */
    sw_carrier_unref(c);
    CHECK_EQ_I64(releases, 1);
    CHECK_EQ_I64(destroys, 1);
    CHECK_EQ_I64(atomic_load(&slot_calls), 0); /* the core called no slot hook */
}

/* The claim counter: a relinquish and a fresh claim leave `owned` as it
 * was, but not `claims`. */
static void test_claim_counter(void)
{
    sw_error err;
    sw_carrier *c;
    CHECK(sw_cpu_new(1, SW_DT_FLOAT32, 0, &c, &err) == SW_OK);
    sw_carrier_state s0, s1, s2;
    sw_carrier_get_state(c, &s0);
    CHECK_EQ_I64(s0.claims, 0);
    uint64_t tok;
    CHECK(sw_carrier_claim(c, &tok, &err) == SW_OK);
    sw_carrier_get_state(c, &s1);
    CHECK(s1.owned && s1.claims == 1);
    CHECK(sw_carrier_claim(c, &tok, &err) == SW_ESTATE); /* refused: no count */
    CHECK(sw_carrier_relinquish(c, tok, &err) == SW_OK);
    CHECK(sw_carrier_claim(c, &tok, &err) == SW_OK);
    sw_carrier_get_state(c, &s2);
    CHECK(s2.owned == s1.owned && s2.claims == 2);
    CHECK(sw_carrier_relinquish(c, tok, &err) == SW_OK);
    sw_carrier_unref(c);
}

/* The deadlock rule: thread A holds the "GIL" and calls into the core on a
 * carrier while thread B makes core calls on the same carrier (taking its
 * mutex). Were a slot hook called under the carrier mutex, B would hold
 * the mutex waiting for the GIL and A the GIL waiting for the mutex. */
#define ROUNDS 20000
static sw_carrier *shared;
static atomic_int b_ready;

static void *core_caller(void *unused)
{
    (void)unused;
    sw_error err;
    int32_t v = 0;
    atomic_store(&b_ready, 1);
    for (int i = 0; i < ROUNDS; i++) {
        (void)sw_carrier_read(shared, 0, 1, &v, &err);
        (void)sw_carrier_write(shared, 0, 1, &v, &err);
        (void)sw_carrier_size(shared);
        (void)sw_carrier_allocate(shared, 4, &err);
    }
    return NULL;
}

static void test_gil_holder_and_core_caller_do_not_deadlock(void)
{
    sw_error err;
    atomic_store(&slot_calls, 0);
    CHECK(sw_carrier_new(&hooked_class, NULL, SW_DT_FLOAT32, 0, &shared, &err) == SW_OK);
    pthread_t b;
    pthread_create(&b, NULL, core_caller, NULL);
    while (!atomic_load(&b_ready))
        ;
    pthread_mutex_lock(&gil);
    for (int i = 0; i < ROUNDS; i++) {
        sw_carrier_state s;
        sw_carrier_get_state(shared, &s);
        CHECK(sw_carrier_increment_version(shared, &err) == SW_OK);
    }
    pthread_mutex_unlock(&gil);
    pthread_join(b, NULL);
    CHECK_EQ_I64(sw_carrier_version(shared), ROUNDS);
    CHECK_EQ_I64(atomic_load(&slot_calls), 0);
    sw_carrier_unref(shared);
}

int main(void)
{
    int64_t live = sw_alloc_live_bytes();
    test_state_only_creation();
    test_state_only_slot_ops_refused();
    test_claim_counter();
    test_gil_holder_and_core_caller_do_not_deadlock();
    CHECK(sw_alloc_live_bytes() - live < 4096);
    return check_report("carrier_state_only");
}
