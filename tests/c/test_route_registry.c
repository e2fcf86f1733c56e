/* The route registry (route.h): the core's pairs resolve as the move table
 * says (row 9), a refused pair changes nothing, a binding's routes are
 * found by the exact pair only, their payloads are counted, a forgotten
 * class takes its routes with it, and resolution stays consistent while
 * other threads register and unregister. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "check.h"
#include "counted_payload.h"
#include <strideweave/strideweave.h>

/* Two classes a binding keeps (their slots are not the core's), and a
 * third with the very same fields: a lookalike never matches. */
static const sw_carrier_class class_a = {.name = "A", .flags = SW_CARRIER_CLASS_STATE_ONLY};
static const sw_carrier_class class_b = {.name = "B", .flags = SW_CARRIER_CLASS_STATE_ONLY};
static const sw_carrier_class class_a_alike = {.name = "A",
                                               .flags = SW_CARRIER_CLASS_STATE_ONLY};


static sw_route_entry binding_route(payload *p, unsigned flags)
{
    return (sw_route_entry){.kind = SW_ROUTE_KIND_BINDING, .flags = flags, .payload = p,
                            .payload_ops = &counted};
}

static const sw_route_entry untouched = {.kind = (sw_route_entry_kind)77, .flags = 77u,
                                         .payload = (void *)&untouched};

static void check_core(const sw_carrier_class *s, const sw_carrier_class *d, sw_route_entry_kind kind)
{
    sw_route_entry e;
    sw_error err;
    CHECK(sw_move_route_resolve(s, d, &e, &err) == SW_OK);
    CHECK(e.kind == kind);
    CHECK(e.flags == SW_ROUTE_BUILTIN);
    CHECK((e.transfer != NULL) == (kind == SW_ROUTE_KIND_CLASS));
    CHECK(e.payload == NULL && e.payload_ops == NULL);
}

static void check_refused(const sw_carrier_class *s, const sw_carrier_class *d,
                          const char *says)
{
    sw_route_entry e = untouched;
    sw_error err;
    CHECK(sw_move_route_resolve(s, d, &e, &err) == SW_ENOTSUP);
    CHECK_EQ_I64(err.detail, SW_MOVE_ROUTE_REFUSED);
    CHECK(strstr(err.msg, says) != NULL);
    CHECK(memcmp(&e, &untouched, sizeof e) == 0); /* nothing written */
}

/* X-14, row 9: the core's exact pairs as the move table says. */
static void test_x14_row9_builtin_pairs(void)
{
    const sw_carrier_class *cpu = &sw_cpu_class, *fb = &sw_file_backed_class,
                           *gen = &sw_generic_class, *bdc = &sw_block_device_carrier_class,
                           *te = &sw_tiled_evictable_class, *ev = &sw_evictable_class;
    check_core(cpu, fb, SW_ROUTE_KIND_BULK);
    check_core(fb, cpu, SW_ROUTE_KIND_BULK);
    check_core(cpu, bdc, SW_ROUTE_KIND_CLASS);
    check_core(bdc, cpu, SW_ROUTE_KIND_CLASS);
    check_core(cpu, cpu, SW_ROUTE_KIND_ELEMENTWISE);
    check_core(gen, fb, SW_ROUTE_KIND_ELEMENTWISE); /* bulk is CPU's pair only */
    check_core(fb, fb, SW_ROUTE_KIND_ELEMENTWISE);
    check_core(ev, cpu, SW_ROUTE_KIND_ELEMENTWISE);
    check_refused(te, cpu, "TiledEvictable");
    check_refused(cpu, te, "TiledEvictable");
    check_refused(te, te, "TiledEvictable");
    check_refused(bdc, fb, "only to and from a CPU");
    check_refused(gen, bdc, "only to and from a CPU");
    check_refused(bdc, bdc, "only to and from a CPU");
    check_refused(&class_a, cpu, "registered no route");
    check_refused(cpu, &class_b, "registered no route");

    sw_route_entry e = untouched;
    sw_error err;
    CHECK(sw_move_route_resolve(NULL, cpu, &e, &err) == SW_ETYPE);
    CHECK_EQ_I64(err.detail, 0);
    CHECK(sw_move_route_resolve(cpu, cpu, NULL, &err) == SW_ETYPE);
    CHECK(memcmp(&e, &untouched, sizeof e) == 0);
    sw_route_entry_release(NULL);
}

/* Register, resolve, unregister; exact pair only; payload references. */
static void test_register_resolve_unregister(void)
{
    payload p = {0}, q = {0};
    sw_route_entry r = binding_route(&p, SW_ROUTE_MAY_FALL_BACK | SW_ROUTE_BUILTIN), e;
    sw_error err;
    CHECK(sw_route_register(&class_a, &class_b, &r, &err) == SW_OK);
    CHECK_EQ_I64(atomic_load(&p.refs), 1); /* the registry's own */

    CHECK(sw_move_route_resolve(&class_a, &class_b, &e, &err) == SW_OK);
    CHECK(e.kind == SW_ROUTE_KIND_BINDING && e.payload == &p && e.payload_ops == &counted);
    CHECK(e.flags == SW_ROUTE_MAY_FALL_BACK); /* BUILTIN is the core's to set */
    CHECK(e.transfer == NULL);
    CHECK_EQ_I64(atomic_load(&p.refs), 2);
    sw_route_entry_release(&e);
    CHECK_EQ_I64(atomic_load(&p.refs), 1);
    CHECK(e.payload == NULL);

    /* Exact pair: neither the reverse nor a lookalike class matches. */
    check_refused(&class_b, &class_a, "registered no route");
    check_refused(&class_a_alike, &class_b, "registered no route");
    check_refused(&class_a, &class_a, "registered no route");

    /* A second route on the pair is refused; the first stays. */
    sw_route_entry r2 = binding_route(&q, 0);
    CHECK(sw_route_register(&class_a, &class_b, &r2, &err) == SW_EINVAL);
    CHECK(strstr(err.msg, "registered already") != NULL);
    CHECK_EQ_I64(atomic_load(&q.refs), 0);
    CHECK(sw_move_route_resolve(&class_a, &class_b, &e, &err) == SW_OK && e.payload == &p);
    sw_route_entry_release(&e);

    /* Unregister hands the registry's reference over when asked. */
    sw_route_entry removed;
    CHECK(sw_route_unregister(&class_a, &class_b, &removed, &err) == SW_OK);
    CHECK(removed.payload == &p);
    CHECK_EQ_I64(atomic_load(&p.refs), 1);
    sw_route_entry_release(&removed);
    CHECK_EQ_I64(atomic_load(&p.refs), 0);
    check_refused(&class_a, &class_b, "registered no route");
    CHECK(sw_route_unregister(&class_a, &class_b, NULL, &err) == SW_EINVAL);
    CHECK(strstr(err.msg, "no route is registered from A to B") != NULL);

    /* A payload-free route, unregistered without taking it. */
    sw_route_entry bare = {.kind = SW_ROUTE_KIND_BINDING};
    CHECK(sw_route_register(&class_b, &class_a, &bare, &err) == SW_OK);
    CHECK(sw_move_route_resolve(&class_b, &class_a, &e, &err) == SW_OK &&
          e.kind == SW_ROUTE_KIND_BINDING && e.payload == NULL);
    CHECK(sw_route_unregister(&class_b, &class_a, NULL, &err) == SW_OK);
}

/* What cannot be registered, each refused with nothing changed. */
static void test_register_refusals(void)
{
    payload p = {0};
    sw_route_entry r = binding_route(&p, 0);
    sw_error err;
    CHECK(sw_route_register(&sw_tiled_evictable_class, &class_a, &r, &err) == SW_ENOTSUP);
    CHECK_EQ_I64(err.detail, SW_MOVE_ROUTE_REFUSED);
    CHECK(sw_route_register(&class_a, &sw_block_device_carrier_class, &r, &err) == SW_ENOTSUP);
    CHECK_EQ_I64(err.detail, SW_MOVE_ROUTE_REFUSED);
    sw_route_entry core = {.kind = SW_ROUTE_KIND_ELEMENTWISE};
    CHECK(sw_route_register(&class_a, &class_b, &core, &err) == SW_EINVAL);
    CHECK(sw_route_register(NULL, &class_b, &r, &err) == SW_ETYPE);
    CHECK(sw_route_register(&class_a, &class_b, NULL, &err) == SW_ETYPE);
    CHECK_EQ_I64(atomic_load(&p.refs), 0);
    check_refused(&class_a, &class_b, "registered no route");
    check_refused(&sw_tiled_evictable_class, &class_a, "TiledEvictable");
}

/* A binding route over a core pair wins resolution; the core's comes back
 * when it goes, and the engine keeps running its own route meanwhile. */
static void test_binding_route_over_core_pair(void)
{
    payload p = {0};
    sw_route_entry r = binding_route(&p, 0), e;
    sw_error err;
    CHECK(sw_route_register(&sw_cpu_class, &sw_cpu_class, &r, &err) == SW_OK);
    CHECK(sw_move_route_resolve(&sw_cpu_class, &sw_cpu_class, &e, &err) == SW_OK);
    CHECK(e.kind == SW_ROUTE_KIND_BINDING && e.payload == &p);
    sw_route_entry_release(&e);

    float v[4] = {1, 2, 3, 4}, got = 0;
    sw_carrier *src = NULL, *dst = NULL;
    sw_tensor *t = NULL, *out = NULL;
    int64_t ext[1] = {4};
    CHECK(sw_cpu_new(4, SW_DT_FLOAT32, 0, &src, &err) == SW_OK);
    CHECK(sw_cpu_new(4, SW_DT_FLOAT32, 0, &dst, &err) == SW_OK);
    CHECK(sw_carrier_write(src, 0, 4, v, &err) == SW_OK);
    CHECK(sw_tensor_new_strided(src, 0, 1, ext, NULL, &t, &err) == SW_OK);
    sw_status moved = sw_move(t, dst, &out, &err);
    CHECK(moved == SW_OK);
    if (moved != SW_OK)
        fprintf(stderr, "move: %s\n", err.msg);
    CHECK(out && sw_tensor_get_f32(out, 3, &got, &err) == SW_OK && got == 4.0f);
    sw_tensor_unref(out);
    sw_tensor_unref(t);
    sw_carrier_unref(src);
    sw_carrier_unref(dst);

    CHECK(sw_route_unregister(&sw_cpu_class, &sw_cpu_class, NULL, &err) == SW_OK);
    CHECK_EQ_I64(atomic_load(&p.refs), 0);
    check_core(&sw_cpu_class, &sw_cpu_class, SW_ROUTE_KIND_ELEMENTWISE);
}

/* A class about to be freed takes every route naming it along. */
static void test_forget_class(void)
{
    payload p = {0};
    sw_route_entry r = binding_route(&p, 0), e;
    sw_error err;
    CHECK(sw_route_register(&class_a, &class_b, &r, &err) == SW_OK);
    CHECK(sw_route_register(&class_b, &class_a, &r, &err) == SW_OK);
    CHECK(sw_route_register(&class_a, &sw_cpu_class, &r, &err) == SW_OK);
    CHECK(sw_route_register(&sw_cpu_class, &class_b, &r, &err) == SW_OK);
    CHECK_EQ_I64(atomic_load(&p.refs), 4);
    CHECK_EQ_I64(sw_route_forget_class(&class_a), 3);
    CHECK_EQ_I64(atomic_load(&p.refs), 1);
    check_refused(&class_a, &class_b, "registered no route");
    check_refused(&class_b, &class_a, "registered no route");
    CHECK(sw_move_route_resolve(&sw_cpu_class, &class_b, &e, &err) == SW_OK && e.payload == &p);
    sw_route_entry_release(&e);
    CHECK_EQ_I64(sw_route_forget_class(&class_a), 0);
    CHECK_EQ_I64(sw_route_forget_class(&class_b), 1);
    CHECK_EQ_I64(atomic_load(&p.refs), 0);
}

/* Many threads resolve while one registers, unregisters and forgets: every
 * answer is one of the two states, and no reference is lost (TSan). */
#define READERS 4
#define ROUNDS 2000

static payload shared_payload;
static atomic_int writer_done;
static atomic_int wrong_answers;

static void *reader(void *arg)
{
    (void)arg;
    long seen = 0;
    while (!atomic_load(&writer_done) || seen < ROUNDS) {
        sw_route_entry e;
        sw_error err;
        sw_status st = sw_move_route_resolve(&class_a, &class_b, &e, &err);
        if (st == SW_OK) {
            if (e.kind != SW_ROUTE_KIND_BINDING || e.payload != &shared_payload)
                atomic_fetch_add(&wrong_answers, 1);
            sw_route_entry_release(&e);
        } else if (st != SW_ENOTSUP || err.detail != SW_MOVE_ROUTE_REFUSED) {
            atomic_fetch_add(&wrong_answers, 1);
        }
        st = sw_move_route_resolve(&sw_cpu_class, &sw_file_backed_class, &e, &err);
        if (st != SW_OK || e.kind != SW_ROUTE_KIND_BULK)
            atomic_fetch_add(&wrong_answers, 1);
        seen++;
    }
    return NULL;
}

static void test_threads_resolve_while_registering(void)
{
    pthread_t th[READERS];
    for (int i = 0; i < READERS; i++)
        pthread_create(&th[i], NULL, reader, NULL);
    sw_route_entry r = binding_route(&shared_payload, 0);
    int failures = 0;
    for (int k = 0; k < ROUNDS; k++) {
        sw_error err;
        if (sw_route_register(&class_a, &class_b, &r, &err) != SW_OK)
            failures++;
        if (k % 2 == 0) {
            if (sw_route_unregister(&class_a, &class_b, NULL, &err) != SW_OK)
                failures++;
        } else if (sw_route_forget_class(&class_b) != 1) {
            failures++;
        }
    }
    atomic_store(&writer_done, 1);
    for (int i = 0; i < READERS; i++)
        pthread_join(th[i], NULL);
    CHECK_EQ_I64(failures, 0);
    CHECK_EQ_I64(atomic_load(&wrong_answers), 0);
    CHECK_EQ_I64(atomic_load(&shared_payload.refs), 0);
}

int main(void)
{
    test_x14_row9_builtin_pairs();
    test_register_resolve_unregister();
    test_register_refusals();
    test_binding_route_over_core_pair();
    test_forget_class();
    test_threads_resolve_while_registering();
    return check_report("route_registry");
}
