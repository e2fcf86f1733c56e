/* SLOTS_UNLOCKED carrier classes (carrier.h): a binding keeps the slots and
 * the core reaches them in batches (sw_carrier_read_layout_as,
 * sw_carrier_write_layout_as, tensor.h) through callbacks it calls with NO
 * lock held: checks under the mutex, mutex dropped, callback, then one
 * version step for a write. The fake class below calls the core on its
 * own carrier from inside its callbacks (as the Python binding's hooks
 * do): were any carrier lock held there, the call would deadlock. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "check.h"
#include <strideweave/strideweave.h>
#include <strideweave/binding.h>

/* A stand-in for the GIL, taken by every callback as the Python
 * trampoline takes it. */
static pthread_mutex_t gil = PTHREAD_MUTEX_INITIALIZER;

typedef struct fake {
    sw_carrier *self;  /* the carrier this impl belongs to (borrowed) */
    int32_t slots[8];
    int calls;
    int64_t seen[8];   /* the last batch's slot numbers */
    int64_t nseen;
    sw_dtype as;
    int release_inside; /* the callback releases its carrier first */
    int raise;          /* the callback fails as a binding's own error */
} fake;

/* What every callback does first: look at its carrier through the core
 * (would deadlock under the carrier's mutex) and refuse a released one,
 * as the binding's per-slot checks do. */
static sw_status enter(fake *f, const int64_t *slots, int64_t n, sw_dtype as, sw_error *err)
{
    pthread_mutex_lock(&gil);
    f->calls++;
    f->as = as;
    f->nseen = n < 8 ? n : 8;
    memcpy(f->seen, slots, (size_t)f->nseen * sizeof *slots);
    if (f->release_inside)
        CHECK(sw_carrier_release(f->self, err) == SW_OK);
    sw_carrier_state s;
    sw_carrier_get_state(f->self, &s);
    sw_status st = SW_OK;
    if (s.released)
        st = sw_error_set(err, SW_ESTATE, "fake: released under the callback");
    else if (f->raise) {
        st = sw_error_set(err, SW_EINVAL, "fake: the hook raised");
        err->detail = SW_CARRIER_CALLBACK_RAISED;
    }
    return st;
}

static sw_status fake_read(void *impl, const int64_t *slots, int64_t n, sw_dtype as,
                           void *buf, sw_error *err)
{
    fake *f = impl;
    sw_status st = enter(f, slots, n, as, err);
    for (int64_t k = 0; st == SW_OK && k < n; k++)
        ((int32_t *)buf)[k] = f->slots[slots[k]];
    pthread_mutex_unlock(&gil);
    return st;
}

static sw_status fake_write(void *impl, const int64_t *slots, int64_t n, sw_dtype as,
                            const void *buf, sw_error *err)
{
    fake *f = impl;
    sw_status st = enter(f, slots, n, as, err);
    for (int64_t k = 0; st == SW_OK && f->release_inside == 0 && k < n; k++)
        f->slots[slots[k]] = ((const int32_t *)buf)[k];
    pthread_mutex_unlock(&gil);
    /* a write that raced a release: the slots are the binding's to keep */
    return f->release_inside ? SW_OK : st;
}

static const sw_carrier_class unlocked_class = {
    .name = "Unlocked",
    .flags = SW_CARRIER_CLASS_STATE_ONLY | SW_CARRIER_CLASS_SLOTS_UNLOCKED,
    .read_slots = fake_read,
    .write_slots = fake_write,
};

#define ROUNDS 5000
#define ROUNDS_STEPPING 2000
static sw_carrier *shared;
static atomic_int a_writes, a_failures; /* no CHECK off the main thread */

/* Slot i holds step * i. */
static sw_carrier *fake_typed(fake *f, int flags, sw_dtype dtype, int32_t step)
{
    memset(f, 0, sizeof *f);
    for (int i = 0; i < 8; i++)
        f->slots[i] = step * i;
    sw_error err;
    sw_carrier *c = NULL;
    CHECK(sw_carrier_new(&unlocked_class, f, dtype, flags, &c, &err) == SW_OK);
    f->self = c;
    return c;
}

static sw_carrier *fake_new(fake *f, int flags)
{
    return fake_typed(f, flags, SW_DT_ANY, 10);
}

/* Three elements at slots 1, 3, 5 (offset 1, stride 2). */
static sw_layout *strided3(void)
{
    sw_error err;
    const uint8_t prof[1] = {SW_NODE_LEAF};
    const int64_t ext = 3, str = 2;
    sw_layout *L = sw_layout_new(1, prof, &ext, &str, &err);
    CHECK(L != NULL);
    return L;
}

static void test_class_needs_state_only_and_read_slots(void)
{
    sw_error err;
    sw_carrier *c = NULL;
    sw_carrier_class k = unlocked_class;
    k.flags = SW_CARRIER_CLASS_SLOTS_UNLOCKED;
    CHECK(sw_carrier_new(&k, NULL, SW_DT_ANY, 0, &c, &err) == SW_EINVAL);
    k = unlocked_class;
    k.read_slots = NULL;
    CHECK(sw_carrier_new(&k, NULL, SW_DT_ANY, 0, &c, &err) == SW_EINVAL);
    CHECK(c == NULL);
    fake f;
    c = fake_new(&f, 0);
    CHECK(sw_carrier_slots_unlocked(c) && sw_carrier_is_state_only(c));
    /* the locked slot calls stay refused: the binding keeps the slots */
    int32_t v;
    CHECK(sw_carrier_read(c, 0, 1, &v, &err) == SW_ENOTSUP);
    CHECK(sw_carrier_write(c, 0, 1, &v, &err) == SW_ENOTSUP);
    CHECK_EQ_I64(f.calls, 0);
    sw_carrier_unref(c);
}

/* A class that leaves write_slots NULL is read in batches and written
 * only through its binding: a batch write is refused before any call. */
static void test_class_without_write_slots_refuses_batch_writes(void)
{
    sw_carrier_class k = unlocked_class;
    k.write_slots = NULL;
    fake f;
    memset(&f, 0, sizeof f);
    for (int i = 0; i < 8; i++)
        f.slots[i] = 10 * i;
    sw_error err;
    sw_carrier *c = NULL;
    CHECK(sw_carrier_new(&k, &f, SW_DT_ANY, 0, &c, &err) == SW_OK);
    f.self = c;
    sw_layout *L = strided3();
    int32_t out[3] = {0}, in[3] = {7, 8, 9};
    CHECK(sw_carrier_read_layout_as(c, 1, L, SW_DT_INT32, out, &err) == SW_OK);
    CHECK(out[0] == 10 && out[1] == 30 && out[2] == 50);
    CHECK_EQ_I64(f.calls, 1);
    CHECK(sw_carrier_write_layout_as(c, 1, L, SW_DT_INT32, in, &err) == SW_ENOTSUP);
    CHECK_EQ_I64(f.calls, 1); /* nothing called */
    CHECK(f.slots[1] == 10 && f.slots[3] == 30 && f.slots[5] == 50);
    CHECK_EQ_I64(sw_carrier_version(c), 0);
    sw_layout_free(L);
    sw_carrier_unref(c);
}

static void test_read_calls_back_with_the_walk_and_no_lock(void)
{
    fake f;
    sw_carrier *c = fake_new(&f, 0);
    sw_layout *L = strided3();
    sw_error err;
    int32_t out[3] = {0};
    CHECK(sw_carrier_read_layout_as(c, 1, L, SW_DT_INT32, out, &err) == SW_OK);
    CHECK_EQ_I64(f.calls, 1); /* one batch */
    CHECK_EQ_I64(f.nseen, 3);
    CHECK(f.seen[0] == 1 && f.seen[1] == 3 && f.seen[2] == 5);
    CHECK(f.as == SW_DT_INT32);
    CHECK(out[0] == 10 && out[1] == 30 && out[2] == 50);
    CHECK_EQ_I64(sw_carrier_version(c), 0); /* reads step nothing */
    sw_layout_free(L);
    sw_carrier_unref(c);
}

/* Each refusal is made under the lock, before any call, changing nothing. */
static void test_refusals_come_before_the_callback(void)
{
    fake f;
    sw_carrier *c = fake_new(&f, 0);
    sw_layout *L = strided3();
    sw_error err;
    int32_t buf[3] = {7, 8, 9};
    CHECK(sw_carrier_read_layout_as(NULL, 0, L, SW_DT_INT32, buf, &err) == SW_ETYPE);
    CHECK(sw_carrier_read_layout_as(c, -1, L, SW_DT_INT32, buf, &err) == SW_ERANGE);
    sw_carrier_mark_pending(c, SW_CARRIER_PENDING_DESTINATION);
    CHECK(sw_carrier_read_layout_as(c, 0, L, SW_DT_INT32, buf, &err) == SW_ESTATE);
    CHECK(strstr(err.msg, "pending") != NULL);
    CHECK(sw_carrier_write_layout_as(c, 0, L, SW_DT_INT32, buf, &err) == SW_ESTATE);
    sw_carrier_unmark_pending(c, SW_CARRIER_PENDING_DESTINATION);
    uint64_t tok;
    CHECK(sw_carrier_claim(c, &tok, &err) == SW_OK);
    CHECK(sw_carrier_write_layout_as(c, 0, L, SW_DT_INT32, buf, &err) == SW_ESTATE);
    CHECK(sw_carrier_relinquish(c, tok, &err) == SW_OK);
    CHECK(sw_carrier_release(c, &err) == SW_OK);
    CHECK(sw_carrier_read_layout_as(c, 0, L, SW_DT_INT32, buf, &err) == SW_ESTATE);
    CHECK(sw_carrier_write_layout_as(c, 0, L, SW_DT_INT32, buf, &err) == SW_ESTATE);
    CHECK_EQ_I64(f.calls, 0);
    CHECK_EQ_I64(sw_carrier_version(c), 0);
    sw_carrier_unref(c);

    c = fake_new(&f, SW_CARRIER_IMMUTABLE);
    CHECK(sw_carrier_write_layout_as(c, 0, L, SW_DT_INT32, buf, &err) == SW_ESTATE);
    CHECK(sw_carrier_read_layout_as(c, 0, L, SW_DT_INT32, buf, &err) == SW_OK);
    CHECK_EQ_I64(f.calls, 1);
    sw_carrier_unref(c);

    /* A STATE_ONLY class without the flag is still refused. */
    sw_carrier_class bare = {.name = "Bare", .flags = SW_CARRIER_CLASS_STATE_ONLY};
    CHECK(sw_carrier_new(&bare, NULL, SW_DT_ANY, 0, &c, &err) == SW_OK);
    CHECK(sw_carrier_read_layout_as(c, 0, L, SW_DT_INT32, buf, &err) == SW_ENOTSUP);
    CHECK(sw_carrier_write_layout_as(c, 0, L, SW_DT_INT32, buf, &err) == SW_ENOTSUP);
    sw_carrier_unref(c);
    sw_layout_free(L);
}

static void test_write_steps_the_version_once(void)
{
    fake f;
    sw_carrier *c = fake_new(&f, 0);
    sw_layout *L = strided3();
    sw_error err;
    const int32_t in[3] = {-1, -3, -5};
    CHECK(sw_carrier_write_layout_as(c, 1, L, SW_DT_INT32, in, &err) == SW_OK);
    CHECK(f.slots[1] == -1 && f.slots[3] == -3 && f.slots[5] == -5 && f.slots[2] == 20);
    CHECK_EQ_I64(sw_carrier_version(c), 1); /* one batch, one step */
    /* a move's transfer writes its destination without a step */
    sw_carrier_mark_pending(c, SW_CARRIER_PENDING_DESTINATION);
    sw_carrier_begin_transfer(c);
    CHECK(sw_carrier_write_layout_as(c, 1, L, SW_DT_INT32, in, &err) == SW_OK);
    sw_carrier_end_transfer(c);
    sw_carrier_unmark_pending(c, SW_CARRIER_PENDING_DESTINATION);
    CHECK_EQ_I64(sw_carrier_version(c), 1);
    /* a failed write steps nothing */
    f.raise = 1;
    CHECK(sw_carrier_write_layout_as(c, 1, L, SW_DT_INT32, in, &err) == SW_EINVAL);
    CHECK_EQ_I64(sw_carrier_version(c), 1);
    sw_layout_free(L);
    sw_carrier_unref(c);
}

/* The race carrier.h documents: a release between the core's check and the
 * call (here made by the callback itself, which can only do so because no
 * lock is held). The callback sees it; a write that still reports success
 * steps no version of the released carrier. */
static void test_release_between_check_and_call(void)
{
    fake f;
    sw_carrier *c = fake_new(&f, 0);
    sw_layout *L = strided3();
    sw_error err;
    int32_t buf[3] = {0};
    f.release_inside = 1;
    CHECK(sw_carrier_read_layout_as(c, 0, L, SW_DT_INT32, buf, &err) == SW_ESTATE);
    CHECK(sw_carrier_is_released(c));
    sw_carrier_unref(c);

    c = fake_new(&f, 0);
    f.release_inside = 1;
    CHECK(sw_carrier_write_layout_as(c, 0, L, SW_DT_INT32, buf, &err) == SW_OK);
    CHECK(sw_carrier_is_released(c));
    CHECK_EQ_I64(sw_carrier_version(c), 0);
    sw_carrier_unref(c);
    sw_layout_free(L);
}

/* A binding's own error comes back untouched: status, message and detail. */
static void test_callback_error_is_handed_back_as_is(void)
{
    fake f;
    sw_carrier *c = fake_new(&f, 0);
    sw_layout *L = strided3();
    sw_error err;
    double buf[3];
    f.raise = 1;
    CHECK(sw_carrier_read_layout_as(c, 0, L, SW_DT_FLOAT64, buf, &err) == SW_EINVAL);
    CHECK(err.detail == SW_CARRIER_CALLBACK_RAISED);
    CHECK(strcmp(err.msg, "fake: the hook raised") == 0);
    CHECK(f.as == SW_DT_FLOAT64); /* the caller's dtype, passed through */
    sw_layout_free(L);
    sw_carrier_unref(c);
}

/* ---- WRITES_STEP_VERSION: the callback steps the version per slot ----- */

/* The Python binding's write: each slot through a checked write of its own
 * that steps the version (C-5), here sw_carrier_increment_version on the
 * callback's own carrier, which would deadlock were the carrier's mutex
 * held. Fails at slot `fail_at` (-1: never) as a binding's own error. */
typedef struct stepping {
    fake f;
    int64_t fail_at;
} stepping;

static sw_status stepping_write(void *impl, const int64_t *slots, int64_t n, sw_dtype as,
                                const void *buf, sw_error *err)
{
    stepping *s = impl;
    sw_status st = enter(&s->f, slots, n, as, err);
    for (int64_t k = 0; st == SW_OK && k < n; k++) {
        if (k == s->fail_at) {
            st = sw_error_set(err, SW_EINVAL, "fake: slot %lld raised", (long long)k);
            err->detail = SW_CARRIER_CALLBACK_RAISED;
            break;
        }
        s->f.slots[slots[k]] = ((const int32_t *)buf)[k];
        st = sw_carrier_increment_version(s->f.self, err);
    }
    pthread_mutex_unlock(&gil);
    return st;
}

static const sw_carrier_class stepping_class = {
    .name = "Stepping",
    .flags = SW_CARRIER_CLASS_STATE_ONLY | SW_CARRIER_CLASS_SLOTS_UNLOCKED |
             SW_CARRIER_CLASS_WRITES_STEP_VERSION,
    .read_slots = fake_read,
    .write_slots = stepping_write,
};

static sw_carrier *stepping_new(stepping *s)
{
    memset(s, 0, sizeof *s);
    s->fail_at = -1;
    for (int i = 0; i < 8; i++)
        s->f.slots[i] = 10 * i;
    sw_error err;
    CHECK(sw_carrier_new(&stepping_class, s, SW_DT_INT32, 0, &s->f.self, &err) == SW_OK);
    return s->f.self;
}

static void test_writes_step_version_needs_unlocked_write_slots(void)
{
    sw_error err;
    sw_carrier *c = NULL;
    sw_carrier_class k = stepping_class;
    k.write_slots = NULL;
    CHECK(sw_carrier_new(&k, NULL, SW_DT_ANY, 0, &c, &err) == SW_EINVAL);
    k = stepping_class;
    k.flags &= ~(unsigned)SW_CARRIER_CLASS_SLOTS_UNLOCKED;
    CHECK(sw_carrier_new(&k, NULL, SW_DT_ANY, 0, &c, &err) == SW_EINVAL);
    CHECK(c == NULL);
}

/* n slots written, n steps: the callback's, none of the core's on top. */
static void test_self_stepping_write_steps_once_per_slot(void)
{
    stepping s;
    sw_carrier *c = stepping_new(&s);
    sw_layout *L = strided3();
    sw_error err;
    const int32_t in[3] = {-1, -3, -5};
    CHECK(sw_carrier_write_layout_as(c, 1, L, SW_DT_INT32, in, &err) == SW_OK);
    CHECK(s.f.slots[1] == -1 && s.f.slots[3] == -3 && s.f.slots[5] == -5);
    CHECK_EQ_I64(sw_carrier_version(c), 3);
    /* the move's own transfer: the callback's steps are skipped, the core adds none */
    sw_carrier_mark_pending(c, SW_CARRIER_PENDING_DESTINATION);
    sw_carrier_begin_transfer(c);
    CHECK(sw_carrier_write_layout_as(c, 1, L, SW_DT_INT32, in, &err) == SW_OK);
    sw_carrier_end_transfer(c);
    sw_carrier_unmark_pending(c, SW_CARRIER_PENDING_DESTINATION);
    CHECK_EQ_I64(sw_carrier_version(c), 3);
    /* a refusal of the core's checks: nothing called, nothing stepped */
    int calls = s.f.calls;
    sw_carrier_mark_pending(c, SW_CARRIER_PENDING_SOURCE);
    CHECK(sw_carrier_write_layout_as(c, 1, L, SW_DT_INT32, in, &err) == SW_ESTATE);
    sw_carrier_unmark_pending(c, SW_CARRIER_PENDING_SOURCE);
    CHECK_EQ_I64(s.f.calls, calls);
    CHECK_EQ_I64(sw_carrier_version(c), 3);
    sw_layout_free(L);
    sw_carrier_unref(c);
}

/* A callback failing at slot k leaves slots 0..k-1 written with their steps
 * made (the core undoes nothing) and the rest as they were; the error comes
 * back as the callback set it. */
static void test_self_stepping_write_failing_midway(void)
{
    stepping s;
    sw_carrier *c = stepping_new(&s);
    sw_layout *L = strided3();
    sw_error err;
    const int32_t in[3] = {-1, -3, -5};
    s.fail_at = 2;
    CHECK(sw_carrier_write_layout_as(c, 1, L, SW_DT_INT32, in, &err) == SW_EINVAL);
    CHECK(err.detail == SW_CARRIER_CALLBACK_RAISED);
    CHECK(strcmp(err.msg, "fake: slot 2 raised") == 0);
    CHECK(s.f.slots[1] == -1 && s.f.slots[3] == -3 && s.f.slots[5] == 50);
    CHECK_EQ_I64(sw_carrier_version(c), 2);
    s.fail_at = 0;
    CHECK(sw_carrier_write_layout_as(c, 1, L, SW_DT_INT32, in, &err) == SW_EINVAL);
    CHECK_EQ_I64(sw_carrier_version(c), 2);
    sw_layout_free(L);
    sw_carrier_unref(c);
}

/* Two threads batch-writing one self-stepping carrier while a third steps
 * it under the "GIL": every step lands once, nobody waits on a lock held
 * across a callback (TSan: no race on the version). */
static sw_carrier *stepping_shared;

static void *stepping_writer(void *layout)
{
    sw_error err;
    const int32_t in[3] = {1, 2, 3};
    for (int i = 0; i < ROUNDS_STEPPING; i++)
        if (sw_carrier_write_layout_as(stepping_shared, 0, layout, SW_DT_INT32, in, &err) !=
            SW_OK)
            atomic_fetch_add(&a_failures, 1);
    return NULL;
}

static void test_self_stepping_writers_in_threads(void)
{
    stepping s;
    stepping_shared = stepping_new(&s);
    atomic_store(&a_failures, 0);
    sw_layout *L = strided3(); /* made here: CHECK is for the main thread only */
    pthread_t a, b;
    pthread_create(&a, NULL, stepping_writer, L);
    pthread_create(&b, NULL, stepping_writer, L);
    sw_error err;
    for (int i = 0; i < ROUNDS_STEPPING; i++) {
        pthread_mutex_lock(&gil);
        CHECK(sw_carrier_increment_version(stepping_shared, &err) == SW_OK);
        pthread_mutex_unlock(&gil);
    }
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    CHECK_EQ_I64(atomic_load(&a_failures), 0);
    CHECK_EQ_I64(sw_carrier_version(stepping_shared), (2 * 3 + 1) * ROUNDS_STEPPING);
    CHECK_EQ_I64(s.f.calls, 2 * ROUNDS_STEPPING);
    sw_layout_free(L);
    sw_carrier_unref(stepping_shared);
}

/* A carrier whose slots the core holds: `as` must be its dtype. */
static void test_core_held_carriers(void)
{
    sw_error err;
    sw_carrier *c;
    CHECK(sw_cpu_new(8, SW_DT_INT32, 0, &c, &err) == SW_OK);
    int32_t *mem = sw_cpu_pointer(c);
    for (int i = 0; i < 8; i++)
        mem[i] = i;
    sw_layout *L = strided3();
    int32_t out[3];
    CHECK(sw_carrier_read_layout_as(c, 1, L, SW_DT_INT32, out, &err) == SW_OK);
    CHECK(out[0] == 1 && out[1] == 3 && out[2] == 5);
    CHECK(sw_carrier_read_layout_as(c, 1, L, SW_DT_FLOAT32, out, &err) == SW_ETYPE);
    const int32_t in[3] = {9, 9, 9};
    CHECK(sw_carrier_write_layout_as(c, 1, L, SW_DT_FLOAT32, in, &err) == SW_ETYPE);
    CHECK(sw_carrier_write_layout_as(c, 1, L, SW_DT_INT32, in, &err) == SW_OK);
    CHECK(mem[1] == 9 && mem[2] == 2 && mem[3] == 9 && mem[5] == 9 && mem[6] == 6);
    CHECK_EQ_I64(sw_carrier_version(c), 1);
    sw_layout_free(L);
    sw_carrier_unref(c);
}

/* The core's elementwise operations serve such a carrier too, when its
 * dtype has a slot width: reads and writes go through the batches. */
static void test_tensor_ops_go_through_the_batches(void)
{
    fake f;
    sw_error err;
    sw_carrier *c = fake_typed(&f, 0, SW_DT_INT32, 1);
    sw_layout *L = strided3();
    sw_tensor *t = NULL;
    CHECK(sw_tensor_new_unchecked(c, 1, L, &t, &err) == SW_OK);
    int32_t sum[3] = {0}, total = 0;
    CHECK(sw_tensor_binary_values(SW_BINARY_ADD, t, t, sum, &err) == SW_OK);
    CHECK(sum[0] == 2 && sum[1] == 6 && sum[2] == 10);
    CHECK(sw_tensor_reduce_sum_values(t, NULL, 0, SW_DT_INT32, &total, &err) == SW_OK);
    CHECK_EQ_I64(total, 9);
    CHECK_EQ_I64(f.calls, 3); /* one batch per operand read */
    const int32_t seven = 7;
    CHECK(sw_tensor_fill(t, &seven, &err) == SW_OK);
    CHECK(f.slots[1] == 7 && f.slots[3] == 7 && f.slots[5] == 7 && f.slots[2] == 2);
    CHECK_EQ_I64(sw_carrier_version(c), 1);
    CHECK(f.as == SW_DT_INT32 && f.nseen == 3 && f.seen[2] == 5);
    /* a carrier of another class copies into it, one batch, one step */
    sw_carrier *cpu;
    sw_tensor *src;
    CHECK(sw_cpu_new(3, SW_DT_INT32, 0, &cpu, &err) == SW_OK);
    int64_t three = 3;
    CHECK(sw_tensor_new_strided(cpu, 0, 1, &three, NULL, &src, &err) == SW_OK);
    ((int32_t *)sw_cpu_pointer(cpu))[2] = 42;
    CHECK(sw_tensor_copy(t, src, &err) == SW_OK);
    CHECK(f.slots[1] == 0 && f.slots[3] == 0 && f.slots[5] == 42);
    CHECK_EQ_I64(sw_carrier_version(c), 2);
    /* still no fresh result of its class: the binding makes its storage */
    sw_tensor *r = NULL;
    CHECK(sw_tensor_add(t, t, &r, &err) == SW_ENOTSUP && r == NULL);
    sw_tensor_unref(src);
    sw_carrier_unref(cpu);
    sw_tensor_unref(t);
    sw_layout_free(L);
    sw_carrier_unref(c);
}

/* The deadlock rule with threads: A reads and writes through the core,
 * whose callbacks take the "GIL"; B holds the "GIL" while it makes core
 * calls on the same carrier (taking its mutex). Were a callback called
 * under the carrier mutex, A would hold the mutex waiting for the GIL and
 * B the GIL waiting for the mutex. */

static void *batch_caller(void *layout)
{
    sw_error err;
    const sw_layout *L = layout;
    int32_t buf[3] = {1, 2, 3};
    for (int i = 0; i < ROUNDS; i++) {
        if (sw_carrier_read_layout_as(shared, 0, L, SW_DT_INT32, buf, &err) != SW_OK)
            atomic_fetch_add(&a_failures, 1);
        if (sw_carrier_write_layout_as(shared, 0, L, SW_DT_INT32, buf, &err) == SW_OK)
            atomic_fetch_add(&a_writes, 1);
    }
    return NULL;
}

static void test_gil_holder_and_batch_caller_do_not_deadlock(void)
{
    fake f;
    shared = fake_new(&f, 0);
    atomic_store(&a_writes, 0);
    sw_layout *L = strided3(); /* made here: CHECK is for the main thread only */
    pthread_t a;
    pthread_create(&a, NULL, batch_caller, L);
    sw_error err;
    for (int i = 0; i < ROUNDS; i++) {
        pthread_mutex_lock(&gil);
        sw_carrier_state s;
        sw_carrier_get_state(shared, &s);
        CHECK(sw_carrier_increment_version(shared, &err) == SW_OK);
        pthread_mutex_unlock(&gil);
    }
    pthread_join(a, NULL);
    CHECK_EQ_I64(atomic_load(&a_writes), ROUNDS);
    CHECK_EQ_I64(atomic_load(&a_failures), 0);
    CHECK_EQ_I64(sw_carrier_version(shared), 2 * ROUNDS);
    CHECK_EQ_I64(f.calls, 2 * ROUNDS);
    sw_layout_free(L);
    sw_carrier_unref(shared);
}

int main(void)
{
    test_class_needs_state_only_and_read_slots();
    test_class_without_write_slots_refuses_batch_writes();
    test_read_calls_back_with_the_walk_and_no_lock();
    test_refusals_come_before_the_callback();
    test_write_steps_the_version_once();
    test_release_between_check_and_call();
    test_callback_error_is_handed_back_as_is();
    test_writes_step_version_needs_unlocked_write_slots();
    test_self_stepping_write_steps_once_per_slot();
    test_self_stepping_write_failing_midway();
    test_self_stepping_writers_in_threads();
    test_core_held_carriers();
    test_tensor_ops_go_through_the_batches();
    test_gil_holder_and_batch_caller_do_not_deadlock();
    return check_report("carrier_slots_unlocked");
}
