/* sw_carrier_copy_layout (tensor.h): slot k read from the source, then
 * written to the destination, before slot k + 1 is read; SLOTS_UNLOCKED
 * sides through their callbacks with no lock held, core-held sides through
 * their own checked slot I/O; handles (SW_AS_HANDLE) owned by the reading
 * class and handed back to it; a failure at slot k leaves 0 .. k-1 written.
 * The fake class's callbacks call the core on both carriers (would deadlock
 * under a held carrier lock) and log each call, so the order is checked. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "check.h"
#include <strideweave/strideweave.h>

static pthread_mutex_t gil = PTHREAD_MUTEX_INITIALIZER; /* the binding's lock */

/* A binding object: the handles of the SW_AS_HANDLE tests. */
typedef struct obj {
    atomic_int refs;
    int32_t value;
} obj;

typedef struct fake {
    sw_carrier *self, *other; /* borrowed; `other` is looked at in every callback */
    int32_t slots[8];
    obj *objs[8];             /* slot values when the test copies handles */
    int fail_at;              /* the call (1-based) that fails, 0: none */
    int calls;
    char id;
} fake;

static atomic_int wide_batches; /* callbacks given n != 1 (no CHECK off the main thread) */
static char log_buf[64]; /* "r1w0..." : id, r/w, slot */
static int log_len;

static void log_call(fake *f, char rw, int64_t slot)
{
    if (log_len + 3 < (int)sizeof log_buf) {
        log_buf[log_len++] = f->id;
        log_buf[log_len++] = rw;
        log_buf[log_len++] = (char)('0' + slot);
    }
}

/* Looks at both carriers through the core (a held lock would deadlock), then
 * fails on its fail_at'th call as a binding's own error. */
static sw_status enter(fake *f, char rw, int64_t slot, sw_error *err)
{
    pthread_mutex_lock(&gil);
    (void)sw_carrier_version(f->self);
    if (f->other)
        (void)sw_carrier_is_pending(f->other);
    log_call(f, rw, slot);
    if (++f->calls != f->fail_at)
        return SW_OK;
    sw_error_set(err, SW_EINVAL, "fake: the hook raised");
    err->detail = SW_CARRIER_CALLBACK_RAISED;
    return SW_EINVAL;
}

static sw_status fake_read(void *impl, const int64_t *slots, int64_t n, sw_dtype as, void *buf,
                           sw_error *err)
{
    fake *f = impl;
    if (n != 1) /* one slot at a time */
        atomic_fetch_add(&wide_batches, 1);
    sw_status st = enter(f, 'r', slots[0], err);
    if (st == SW_OK && as == SW_AS_HANDLE) {
        obj *o = f->objs[slots[0]];
        atomic_fetch_add(&o->refs, 1); /* the caller's reference */
        memcpy(buf, &o, sizeof o);
    } else if (st == SW_OK)
        memcpy(buf, &f->slots[slots[0]], sizeof(int32_t));
    pthread_mutex_unlock(&gil);
    return st;
}

static sw_status fake_write(void *impl, const int64_t *slots, int64_t n, sw_dtype as,
                            const void *buf, sw_error *err)
{
    fake *f = impl;
    if (n != 1)
        atomic_fetch_add(&wide_batches, 1);
    sw_status st = enter(f, 'w', slots[0], err);
    if (st == SW_OK && as == SW_AS_HANDLE) {
        obj *o;
        memcpy(&o, buf, sizeof o);
        atomic_fetch_add(&o->refs, 1); /* kept: a reference of its own */
        if (f->objs[slots[0]])
            atomic_fetch_sub(&f->objs[slots[0]]->refs, 1);
        f->objs[slots[0]] = o;
    } else if (st == SW_OK)
        memcpy(&f->slots[slots[0]], buf, sizeof(int32_t));
    pthread_mutex_unlock(&gil);
    return st;
}

static atomic_int drops;

static void fake_drop(void *impl, void *const *handles, int64_t n)
{
    (void)impl;
    pthread_mutex_lock(&gil); /* as the binding takes its lock to drop */
    for (int64_t k = 0; k < n; k++)
        atomic_fetch_sub(&((obj *)handles[k])->refs, 1);
    atomic_fetch_add(&drops, (int)n);
    pthread_mutex_unlock(&gil);
}

static const sw_carrier_class fake_class = {
    .name = "Fake",
    .flags = SW_CARRIER_CLASS_STATE_ONLY | SW_CARRIER_CLASS_SLOTS_UNLOCKED,
    .read_slots = fake_read,
    .write_slots = fake_write,
    .drop_handles = fake_drop,
};

/* Slot i holds step * i. */
static sw_carrier *fake_new(fake *f, char id, sw_dtype dtype, int32_t step)
{
    memset(f, 0, sizeof *f);
    f->id = id;
    for (int i = 0; i < 8; i++)
        f->slots[i] = step * i;
    sw_error err;
    sw_carrier *c = NULL;
    CHECK(sw_carrier_new(&fake_class, f, dtype, 0, &c, &err) == SW_OK);
    f->self = c;
    return c;
}

static sw_layout *flat(int64_t extent, int64_t stride)
{
    sw_error err;
    const uint8_t prof[1] = {SW_NODE_LEAF};
    sw_layout *L = sw_layout_new(1, prof, &extent, &stride, &err);
    CHECK(L != NULL);
    return L;
}

static void reset_log(void)
{
    log_len = 0;
    memset(log_buf, 0, sizeof log_buf);
}

static void test_slot_by_slot_in_logical_order(void)
{
    fake a, b;
    sw_carrier *src = fake_new(&a, 'a', SW_DT_INT32, 10), *dst = fake_new(&b, 'b', SW_DT_INT32, 0);
    a.other = dst;
    b.other = src;
    sw_layout *L = flat(3, 2); /* slots 0, 2, 4 */
    sw_copy_stop stop;
    sw_error err;
    reset_log();
    uint64_t v0 = sw_carrier_version(dst);
    CHECK(sw_carrier_copy_layout(src, 1, dst, 0, L, SW_DT_INT32, NULL, NULL, &stop, &err) ==
          SW_OK);
    CHECK(strcmp(log_buf, "ar1bw0ar3bw2ar5bw4") == 0);
    CHECK_EQ_I64(b.slots[0], 10);
    CHECK_EQ_I64(b.slots[2], 30);
    CHECK_EQ_I64(b.slots[4], 50);
    CHECK_EQ_I64(b.slots[1], 0);
    CHECK_EQ_I64(stop.done, 3);
    CHECK_EQ_I64(stop.slot, -1);
    /* a class without WRITES_STEP_VERSION: the core steps each slot's write */
    CHECK_EQ_I64(sw_carrier_version(dst) - v0, 3);
    CHECK_EQ_I64(sw_carrier_version(src), 0);
    sw_layout_free(L);
    sw_carrier_unref(src);
    sw_carrier_unref(dst);
}

/* A failure at slot k: 0 .. k-1 written and stepped, nothing after. */
static void test_failure_at_slot_k_leaves_the_slots_before(void)
{
    fake a, b;
    sw_carrier *src = fake_new(&a, 'a', SW_DT_INT32, 10), *dst = fake_new(&b, 'b', SW_DT_INT32, 0);
    sw_layout *L = flat(4, 1);
    sw_copy_stop stop;
    sw_error err;
    b.fail_at = 3; /* the write of slot 2 */
    CHECK(sw_carrier_copy_layout(src, 0, dst, 0, L, SW_DT_INT32, NULL, NULL, &stop, &err) ==
          SW_EINVAL);
    CHECK_EQ_I64(err.detail, SW_CARRIER_CALLBACK_RAISED); /* handed back untouched */
    CHECK_MSG(err, "fake: the hook raised");
    CHECK_EQ_I64(stop.done, 2);
    CHECK_EQ_I64(stop.in_write, 1);
    CHECK_EQ_I64(stop.slot, 2);
    CHECK(b.slots[0] == 0 && b.slots[1] == 10 && b.slots[2] == 0 && b.slots[3] == 0);
    CHECK_EQ_I64(sw_carrier_version(dst), 2);
    CHECK_EQ_I64(a.calls, 3); /* slot 3 never read */
    /* the source's read of slot 1 fails: slot 0 written only */
    fake c, d;
    sw_carrier *s2 = fake_new(&c, 'c', SW_DT_INT32, 7), *d2 = fake_new(&d, 'd', SW_DT_INT32, 0);
    c.fail_at = 2;
    CHECK(sw_carrier_copy_layout(s2, 0, d2, 4, L, SW_DT_INT32, NULL, NULL, &stop, &err) ==
          SW_EINVAL);
    CHECK(stop.done == 1 && stop.in_write == 0 && stop.slot == 1);
    CHECK(d.slots[4] == 0 && d.slots[5] == 0 && d.calls == 1);
    sw_layout_free(L);
    sw_carrier_unref(src);
    sw_carrier_unref(dst);
    sw_carrier_unref(s2);
    sw_carrier_unref(d2);
}

/* Handles: one owned reference per read, borrowed by the write, handed
 * back to the reading class after each slot, also when the write fails. */
static void test_handles_go_back_to_the_reading_class(void)
{
    fake a, b;
    sw_carrier *src = fake_new(&a, 'a', SW_DT_ANY, 0), *dst = fake_new(&b, 'b', SW_DT_ANY, 0);
    obj objs[4];
    for (int i = 0; i < 4; i++) {
        atomic_init(&objs[i].refs, 1); /* the source's slot holds it */
        objs[i].value = i;
        a.objs[i] = &objs[i];
    }
    sw_layout *L = flat(3, 1);
    sw_copy_stop stop;
    sw_error err;
    atomic_store(&drops, 0);
    /* SW_DT_ANY between two STATE_ONLY carriers: handles */
    CHECK(sw_carrier_copy_layout(src, 1, dst, 0, L, SW_DT_ANY, NULL, NULL, &stop, &err) ==
          SW_OK);
    CHECK(b.objs[0] == &objs[1] && b.objs[1] == &objs[2] && b.objs[2] == &objs[3]);
    CHECK_EQ_I64(atomic_load(&drops), 3);
    CHECK_EQ_I64(atomic_load(&objs[0].refs), 1);
    for (int i = 1; i < 4; i++)
        CHECK_EQ_I64(atomic_load(&objs[i].refs), 2); /* source and destination */
    /* a failed write drops its handle too */
    b.fail_at = b.calls + 1;
    atomic_store(&drops, 0);
    CHECK(sw_carrier_copy_layout(src, 0, dst, 4, L, SW_AS_HANDLE, NULL, NULL, &stop, &err) ==
          SW_EINVAL);
    CHECK_EQ_I64(atomic_load(&drops), 1);
    CHECK_EQ_I64(atomic_load(&objs[0].refs), 1);
    CHECK(b.objs[4] == NULL);
    /* handles from a class that cannot drop them: refused before any call */
    sw_carrier_class nodrop = fake_class;
    nodrop.drop_handles = NULL;
    fake c;
    memset(&c, 0, sizeof c);
    sw_carrier *s2 = NULL;
    CHECK(sw_carrier_new(&nodrop, &c, SW_DT_ANY, 0, &s2, &err) == SW_OK);
    int before = b.calls;
    CHECK(sw_carrier_copy_layout(s2, 0, dst, 0, L, SW_AS_HANDLE, NULL, NULL, &stop, &err) ==
          SW_ENOTSUP);
    CHECK(c.calls == 0 && b.calls == before && stop.slot == -1);
    sw_carrier_unref(s2);
    for (int i = 0; i < 8; i++)
        if (b.objs[i])
            atomic_fetch_sub(&b.objs[i]->refs, 1);
    sw_layout_free(L);
    sw_carrier_unref(src);
    sw_carrier_unref(dst);
}

/* A carrier the core holds: its own checked slot I/O, its dtype the kind. */
static void test_core_held_sides(void)
{
    fake a;
    sw_carrier *py = fake_new(&a, 'a', SW_DT_INT32, 3);
    sw_carrier *cpu = NULL;
    sw_error err;
    CHECK(sw_cpu_new(8, SW_DT_INT32, 0, &cpu, &err) == SW_OK);
    sw_layout *L = flat(4, 2);
    sw_copy_stop stop;
    CHECK(sw_carrier_copy_layout(py, 0, cpu, 0, L, SW_DT_ANY, NULL, NULL, &stop, &err) == SW_OK);
    const int32_t *mem = sw_cpu_pointer(cpu);
    CHECK(mem[0] == 0 && mem[2] == 6 && mem[4] == 12 && mem[6] == 18 && mem[1] == 0);
    CHECK_EQ_I64(sw_carrier_version(cpu), 4); /* one sw_carrier_write per slot */
    reset_log();
    CHECK(sw_carrier_copy_layout(cpu, 0, py, 1, L, SW_DT_ANY, NULL, NULL, &stop, &err) == SW_OK);
    CHECK(a.slots[1] == 0 && a.slots[3] == 6 && a.slots[5] == 12 && a.slots[7] == 18);
    CHECK(strcmp(log_buf, "aw1aw3aw5aw7") == 0);
    /* refused before any slot: a kind the core-held side does not hold */
    int calls = a.calls;
    CHECK(sw_carrier_copy_layout(py, 0, cpu, 0, L, SW_DT_FLOAT32, NULL, NULL, &stop, &err) ==
          SW_ETYPE);
    CHECK(a.calls == calls && stop.slot == -1 && sw_carrier_version(cpu) == 4);
    /* past the end of the CPU carrier: its own range check at slot 3 */
    CHECK(sw_carrier_copy_layout(py, 0, cpu, 2, L, SW_DT_INT32, NULL, NULL, &stop, &err) ==
          SW_ERANGE);
    CHECK(stop.done == 3 && stop.in_write == 1 && stop.slot == 8);
    CHECK(mem[2] == 0 && mem[4] == 6 && mem[6] == 12); /* 0 .. k-1 written */
    sw_layout_free(L);
    sw_carrier_unref(cpu);
    sw_carrier_unref(py);
}

static void test_refusals_before_any_slot(void)
{
    fake a, b;
    sw_carrier *src = fake_new(&a, 'a', SW_DT_INT32, 1), *dst = fake_new(&b, 'b', SW_DT_INT32, 0);
    sw_layout *L = flat(2, 1);
    sw_copy_stop stop;
    sw_error err;
    CHECK(sw_carrier_copy_layout(NULL, 0, dst, 0, L, SW_DT_ANY, NULL, NULL, &stop, &err) ==
          SW_ETYPE);
    CHECK(sw_carrier_copy_layout(src, 0, dst, 0, NULL, SW_DT_ANY, NULL, NULL, &stop, &err) ==
          SW_ETYPE);
    CHECK(sw_carrier_copy_layout(src, -1, dst, 0, L, SW_DT_ANY, NULL, NULL, &stop, &err) ==
          SW_ERANGE);
    CHECK(sw_carrier_copy_layout(src, 0, dst, 0, L, SW_DT_FLOATING, NULL, NULL, &stop, &err) ==
          SW_EINVAL);
    /* a STATE_ONLY class the core cannot reach, either side */
    sw_carrier_class plain = {.name = "Plain", .flags = SW_CARRIER_CLASS_STATE_ONLY};
    sw_carrier *opaque = NULL;
    CHECK(sw_carrier_new(&plain, NULL, SW_DT_INT32, 0, &opaque, &err) == SW_OK);
    CHECK(sw_carrier_copy_layout(src, 0, opaque, 0, L, SW_DT_INT32, NULL, NULL, &stop, &err) ==
          SW_ENOTSUP);
    CHECK(sw_carrier_copy_layout(opaque, 0, dst, 0, L, SW_DT_INT32, NULL, NULL, &stop, &err) ==
          SW_ENOTSUP);
    CHECK(a.calls == 0 && b.calls == 0 && stop.slot == -1);
    /* a released destination: its checks refuse its first write, after the
     * first read (as a loop of single reads and writes would), nothing
     * written */
    CHECK(sw_carrier_release(dst, &err) == SW_OK);
    CHECK(sw_carrier_copy_layout(src, 0, dst, 0, L, SW_DT_INT32, NULL, NULL, &stop, &err) ==
          SW_ESTATE);
    CHECK(a.calls == 1 && b.calls == 0 && stop.done == 0 && stop.in_write == 1);
    sw_layout_free(L);
    sw_carrier_unref(opaque);
    sw_carrier_unref(src);
    sw_carrier_unref(dst);
}

/* src == dst with a map: an in-place accumulation; a layout that reaches a
 * slot three times adds three times (each read sees the previous write). */
static void add_one(void *user, int64_t k, void *value)
{
    int32_t v;
    memcpy(&v, value, sizeof v);
    v += 1 + (int32_t)k * (user != NULL);
    memcpy(value, &v, sizeof v);
}

static void test_map_accumulates_in_place(void)
{
    fake a;
    sw_carrier *c = fake_new(&a, 'a', SW_DT_INT32, 100);
    sw_layout *L = flat(3, 0); /* slot 2, three times */
    sw_error err;
    CHECK(sw_carrier_copy_layout(c, 2, c, 2, L, SW_DT_INT32, add_one, NULL, NULL, &err) == SW_OK);
    CHECK_EQ_I64(a.slots[2], 203);
    CHECK_EQ_I64(sw_carrier_version(c), 3);
    CHECK(sw_cpu_new(4, SW_DT_INT32, 0, &c, &err) == SW_OK);
    sw_layout *F = flat(4, 1);
    int marker;
    CHECK(sw_carrier_copy_layout(c, 0, c, 0, F, SW_DT_ANY, add_one, &marker, NULL, &err) ==
          SW_OK);
    const int32_t *mem = sw_cpu_pointer(c);
    CHECK(mem[0] == 1 && mem[1] == 2 && mem[2] == 3 && mem[3] == 4);
    sw_layout_free(F);
    sw_layout_free(L);
    sw_carrier_unref(c);
    sw_carrier_unref(a.self);
}

/* A Float32 slot the core holds, carried as a binary64: widened, mapped,
 * rounded back (autograd's accumulation into a FileBacked .grad, say). */
static void add_third(void *user, int64_t k, void *value)
{
    (void)user;
    (void)k;
    double d;
    memcpy(&d, value, sizeof d);
    d += 1.0 / 3.0;
    memcpy(value, &d, sizeof d);
}

static void test_float32_slots_as_binary64(void)
{
    sw_carrier *c = NULL;
    sw_error err;
    CHECK(sw_cpu_new(2, SW_DT_FLOAT32, 0, &c, &err) == SW_OK);
    sw_layout *L = flat(2, 1);
    CHECK(sw_carrier_copy_layout(c, 0, c, 0, L, SW_DT_FLOAT64, add_third, NULL, NULL, &err) ==
          SW_OK);
    const float *mem = sw_cpu_pointer(c);
    CHECK(mem[0] == (float)(1.0 / 3.0) && mem[1] == (float)(1.0 / 3.0));
    CHECK_EQ_I64(sw_carrier_version(c), 2);
    sw_carrier *i32 = NULL; /* Int32 slots are not carried as binary64 */
    CHECK(sw_cpu_new(2, SW_DT_INT32, 0, &i32, &err) == SW_OK);
    CHECK(sw_carrier_copy_layout(i32, 0, i32, 0, L, SW_DT_FLOAT64, add_third, NULL, NULL, &err) ==
          SW_ETYPE);
    CHECK_EQ_I64(sw_carrier_version(i32), 0);
    sw_layout_free(L);
    sw_carrier_unref(c);
    sw_carrier_unref(i32);
}

/* Threads: copies between shared carriers while another thread reads and
 * steps them; callbacks take the binding's lock, the core holds none of
 * its own across them (TSan: no race, no lock-order inversion). */
#define ROUNDS 1500
static sw_carrier *shared_src, *shared_dst;
static atomic_int failures;

static void *copier(void *arg)
{
    sw_layout *L = arg;
    sw_error err;
    for (int i = 0; i < ROUNDS; i++)
        if (sw_carrier_copy_layout(shared_src, 0, shared_dst, 0, L, SW_DT_ANY, NULL, NULL, NULL,
                                   &err) != SW_OK)
            atomic_fetch_add(&failures, 1);
    return NULL;
}

static void *stepper(void *arg)
{
    (void)arg;
    sw_error err;
    for (int i = 0; i < ROUNDS; i++) {
        pthread_mutex_lock(&gil); /* a binding thread holds its lock, then calls the core */
        if (sw_carrier_increment_version(shared_src, &err) != SW_OK)
            atomic_fetch_add(&failures, 1);
        pthread_mutex_unlock(&gil);
    }
    return NULL;
}

static void test_threads(void)
{
    fake a, b;
    shared_src = fake_new(&a, 'a', SW_DT_ANY, 0);
    shared_dst = fake_new(&b, 'b', SW_DT_ANY, 0);
    obj objs[8];
    for (int i = 0; i < 8; i++) {
        atomic_init(&objs[i].refs, 1);
        a.objs[i] = &objs[i];
    }
    a.other = shared_dst;
    b.other = shared_src;
    sw_layout *L = flat(4, 2);
    pthread_t t[3];
    pthread_create(&t[0], NULL, copier, L);
    pthread_create(&t[1], NULL, copier, L);
    pthread_create(&t[2], NULL, stepper, NULL);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    CHECK_EQ_I64(atomic_load(&failures), 0);
    CHECK_EQ_I64(sw_carrier_version(shared_dst), 2 * ROUNDS * 4);
    for (int i = 0; i < 8; i += 2)
        CHECK(b.objs[i] == &objs[i]);
    CHECK_EQ_I64(atomic_load(&objs[0].refs), 2); /* no handle leaked or lost */
    CHECK_EQ_I64(atomic_load(&objs[1].refs), 1);
    sw_layout_free(L);
    sw_carrier_unref(shared_src);
    sw_carrier_unref(shared_dst);
}

int main(void)
{
    test_slot_by_slot_in_logical_order();
    test_failure_at_slot_k_leaves_the_slots_before();
    test_handles_go_back_to_the_reading_class();
    test_core_held_sides();
    test_refusals_before_any_slot();
    test_map_accumulates_in_place();
    test_float32_slots_as_binary64();
    test_threads();
    CHECK_EQ_I64(atomic_load(&wide_batches), 0);
    return check_report("carrier_copy_layout");
}
