/* Carrier classes made at run time (carrier.h, "Classes made at run
 * time") and the route registry that keys on them (route.h): a class is a
 * refcounted copy of its template; its carriers and its routes hold it, so
 * a carrier outlives its class's owner; forgetting a class drops its
 * routes; many threads resolve routes from carriers while the owner lets
 * its class go; the registry's version moves with each change. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "check.h"
#include "counted_payload.h"
#include <strideweave/strideweave.h>

static const sw_carrier_class *make_class(const char *name)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%s", name);
    sw_carrier_class tmpl = {.name = buf, .flags = SW_CARRIER_CLASS_STATE_ONLY};
    const sw_carrier_class *cls = NULL;
    sw_error err;
    CHECK(sw_carrier_class_new(&tmpl, &cls, &err) == SW_OK);
    memset(buf, 'x', sizeof buf - 1); /* the class keeps a copy of the name */
    return cls;
}

static sw_carrier *make_carrier(const sw_carrier_class *cls)
{
    sw_carrier *c = NULL;
    sw_error err;
    CHECK(sw_carrier_new(cls, NULL, SW_DT_ANY, 0, &c, &err) == SW_OK);
    return c;
}


static sw_status register_to_cpu(const sw_carrier_class *cls, payload *p)
{
    sw_route_entry e = {.kind = SW_ROUTE_KIND_BINDING, .payload = p, .payload_ops = &counted};
    sw_error err;
    return sw_route_register(cls, &sw_cpu_class, &e, &err);
}

static void test_class_new_copies_its_template(void)
{
    const sw_carrier_class *cls = make_class("Py");
    CHECK(strcmp(cls->name, "Py") == 0);
    CHECK(cls->flags == (SW_CARRIER_CLASS_STATE_ONLY | SW_CARRIER_CLASS_REFCOUNTED));
    CHECK(sw_carrier_class_ref(cls) == cls);
    sw_carrier_class_unref(cls);
    sw_carrier_class_unref(cls);
    /* A static table is not counted: ref and unref leave it be. */
    CHECK(sw_carrier_class_ref(&sw_cpu_class) == &sw_cpu_class);
    sw_carrier_class_unref(&sw_cpu_class);
    sw_carrier_class_unref(NULL);
    sw_error err;
    CHECK(sw_carrier_class_new(NULL, &cls, &err) == SW_ETYPE);
}

/* A carrier keeps its class after the class's owner let it go. */
static void test_carrier_outlives_its_class_owner(void)
{
    const sw_carrier_class *cls = make_class("Outliving");
    sw_carrier *c = make_carrier(cls);
    sw_carrier_class_unref(cls); /* the owner is done (a Python class collected) */
    CHECK(sw_carrier_class_of(c) == cls);
    CHECK(strcmp(sw_carrier_name(c), "Outliving") == 0);
    CHECK(sw_carrier_is_state_only(c));
    sw_error err;
    CHECK(sw_carrier_increment_version(c, &err) == SW_OK);
    CHECK(sw_carrier_version(c) == 1);
    CHECK(sw_carrier_release(c, &err) == SW_OK);
    sw_carrier_unref(c); /* the last reference: the class goes with it (ASan) */
}

/* the route of two carriers is their classes' route; forgetting the
 * class drops it, and the registry held the class meanwhile. */
static void test_routes_forgotten_when_the_class_goes(void)
{
    const sw_carrier_class *cls = make_class("Routed");
    sw_carrier *c = make_carrier(cls), *cpu = NULL;
    sw_error err;
    CHECK(sw_cpu_new(4, SW_DT_FLOAT32, 0, &cpu, &err) == SW_OK);
    payload p = {0};
    CHECK(register_to_cpu(cls, &p) == SW_OK);
    sw_carrier_unref(c); /* the route alone holds the class now */
    sw_carrier_class_unref(cls);
    c = make_carrier(cls);
    sw_route_entry e;
    CHECK(sw_move_route_resolve_carriers(c, cpu, &e, &err) == SW_OK);
    CHECK(e.kind == SW_ROUTE_KIND_BINDING && e.payload == &p);
    CHECK(atomic_load(&p.refs) == 2);
    sw_route_entry_release(&e);
    CHECK(sw_move_route_resolve_carriers(cpu, c, &e, &err) == SW_ENOTSUP);
    CHECK_EQ_I64(err.detail, SW_MOVE_ROUTE_REFUSED);
    CHECK(sw_move_route_resolve_carriers(NULL, c, &e, &err) == SW_ETYPE);

    CHECK(sw_route_forget_class(cls) == 1);
    CHECK(atomic_load(&p.refs) == 0);
    CHECK(sw_move_route_resolve_carriers(c, cpu, &e, &err) == SW_ENOTSUP);
    CHECK(strstr(err.msg, "registered no route") != NULL);
    CHECK(strstr(err.msg, "Routed") != NULL);
    sw_carrier_unref(c); /* the last holder of the class */
    sw_carrier_unref(cpu);
}

/* The version moves with every change of the binding routes, never with a
 * lookup. */
static void test_registry_version_counts_changes(void)
{
    const sw_carrier_class *cls = make_class("Versioned");
    payload p = {0};
    uint64_t v0 = sw_route_registry_version();
    sw_route_entry e;
    sw_error err;
    CHECK(sw_move_route_resolve(cls, &sw_cpu_class, &e, &err) == SW_ENOTSUP);
    CHECK(sw_route_forget_class(cls) == 0);
    CHECK(sw_route_registry_version() == v0);
    CHECK(register_to_cpu(cls, &p) == SW_OK);
    uint64_t v1 = sw_route_registry_version();
    CHECK(v1 > v0);
    CHECK(register_to_cpu(cls, &p) == SW_EINVAL); /* refused: no change */
    CHECK(sw_route_registry_version() == v1);
    CHECK(sw_route_unregister(cls, &sw_cpu_class, NULL, &err) == SW_OK);
    uint64_t v2 = sw_route_registry_version();
    CHECK(v2 > v1);
    CHECK(register_to_cpu(cls, &p) == SW_OK);
    CHECK(sw_route_forget_class(cls) == 1);
    CHECK(sw_route_registry_version() > v2 + 1);
    CHECK(atomic_load(&p.refs) == 0);
    sw_carrier_class_unref(cls);
}

/* Two classes a binding let fall back resolve to the elementwise fallback,
 * or to their route with the fallback allowed; one alone does not; the
 * fallback goes with the class's other routes. */
static void test_fallback_needs_both_classes(void)
{
    const sw_carrier_class *a = make_class("FallA"), *b = make_class("FallB");
    sw_route_entry e;
    sw_error err;
    CHECK(sw_route_allow_fallback(a, &err) == SW_OK);
    uint64_t v = sw_route_registry_version();
    CHECK(sw_route_allow_fallback(a, &err) == SW_OK); /* again: nothing changes */
    CHECK(sw_route_registry_version() == v);
    CHECK(sw_move_route_resolve(a, b, &e, &err) == SW_ENOTSUP);
    CHECK(sw_move_route_resolve(a, a, &e, &err) == SW_OK);
    CHECK(e.kind == SW_ROUTE_KIND_ELEMENTWISE && e.flags == SW_ROUTE_MAY_FALL_BACK);
    CHECK(sw_route_allow_fallback(b, &err) == SW_OK);
    CHECK(sw_route_registry_version() > v);
    CHECK(sw_move_route_resolve(b, a, &e, &err) == SW_OK);
    CHECK(e.kind == SW_ROUTE_KIND_ELEMENTWISE && e.flags == SW_ROUTE_MAY_FALL_BACK);
    CHECK(e.payload == NULL && e.transfer == NULL);
    payload p = {0};
    sw_route_entry r = {.kind = SW_ROUTE_KIND_BINDING, .payload = &p, .payload_ops = &counted};
    CHECK(sw_route_register(a, b, &r, &err) == SW_OK);
    CHECK(sw_move_route_resolve(a, b, &e, &err) == SW_OK);
    CHECK(e.kind == SW_ROUTE_KIND_BINDING && e.flags == SW_ROUTE_MAY_FALL_BACK);
    CHECK(e.payload == &p);
    sw_route_entry_release(&e);
    /* Not the core's classes, and not a pair with one of them. */
    CHECK(sw_route_allow_fallback(&sw_cpu_class, &err) == SW_EINVAL);
    CHECK(sw_move_route_resolve(a, &sw_cpu_class, &e, &err) == SW_ENOTSUP);
    CHECK(sw_route_allow_fallback(NULL, &err) == SW_ETYPE);
    CHECK(sw_route_forget_class(a) == 2); /* its route and its fallback */
    CHECK(atomic_load(&p.refs) == 0);
    CHECK(sw_move_route_resolve(b, a, &e, &err) == SW_ENOTSUP);
    CHECK(sw_move_route_resolve(b, b, &e, &err) == SW_OK);
    CHECK(sw_route_forget_class(b) == 1);
    sw_carrier_class_unref(a);
    sw_carrier_class_unref(b);
}

/* The built-ins whose callbacks are all the core's say so; classes that
 * hold other carriers or a binding's values do not. */
static void test_runs_no_user_code_flag(void)
{
    CHECK(sw_cpu_class.flags & SW_CARRIER_CLASS_RUNS_NO_USER_CODE);
    CHECK(sw_generic_class.flags & SW_CARRIER_CLASS_RUNS_NO_USER_CODE);
    CHECK(sw_file_backed_class.flags & SW_CARRIER_CLASS_RUNS_NO_USER_CODE);
    CHECK(sw_block_device_carrier_class.flags & SW_CARRIER_CLASS_RUNS_NO_USER_CODE);
    CHECK(!(sw_evictable_class.flags & SW_CARRIER_CLASS_RUNS_NO_USER_CODE));
    CHECK(!(sw_tiled_evictable_class.flags & SW_CARRIER_CLASS_RUNS_NO_USER_CODE));
}

/* Many threads resolve routes from carriers of a class while its owner
 * registers a route, forgets the class and lets it go: every answer is
 * the route or the refusal, and the class is freed by whichever thread
 * drops the last carrier (TSan, ASan). */
enum { THREADS = 4, ROUNDS = 40, RESOLVES = 200 };

typedef struct worker {
    sw_carrier *carrier, *cpu;
    payload *p;
    atomic_int *bad;
} worker;

static void *resolve_loop(void *arg)
{
    worker *w = arg;
    for (int i = 0; i < RESOLVES; i++) {
        sw_route_entry e;
        sw_error err;
        sw_status st = sw_move_route_resolve_carriers(w->carrier, w->cpu, &e, &err);
        if (st == SW_OK && e.kind == SW_ROUTE_KIND_BINDING && e.payload == w->p)
            sw_route_entry_release(&e);
        else if (st != SW_ENOTSUP || err.detail != SW_MOVE_ROUTE_REFUSED)
            atomic_fetch_add(w->bad, 1);
        if (strcmp(sw_carrier_name(w->carrier), "Threaded") != 0)
            atomic_fetch_add(w->bad, 1);
    }
    sw_carrier_unref(w->carrier); /* one of these may free the class */
    return NULL;
}

static void test_threads_resolve_while_the_class_goes(void)
{
    sw_carrier *cpu = NULL;
    sw_error err;
    CHECK(sw_cpu_new(1, SW_DT_FLOAT32, 0, &cpu, &err) == SW_OK);
    atomic_int bad = 0;
    for (int r = 0; r < ROUNDS; r++) {
        const sw_carrier_class *cls = make_class("Threaded");
        payload p = {0};
        pthread_t t[THREADS];
        worker w[THREADS];
        for (int i = 0; i < THREADS; i++) {
            w[i] = (worker){make_carrier(cls), cpu, &p, &bad};
            pthread_create(&t[i], NULL, resolve_loop, &w[i]);
        }
        CHECK(register_to_cpu(cls, &p) == SW_OK);
        CHECK(sw_route_allow_fallback(cls, &err) == SW_OK);
        CHECK(sw_route_forget_class(cls) == 2);
        sw_carrier_class_unref(cls);
        for (int i = 0; i < THREADS; i++)
            pthread_join(t[i], NULL);
        CHECK(atomic_load(&p.refs) == 0);
    }
    CHECK(atomic_load(&bad) == 0);
    sw_carrier_unref(cpu);
}

int main(void)
{
    test_class_new_copies_its_template();
    test_carrier_outlives_its_class_owner();
    test_routes_forgotten_when_the_class_goes();
    test_registry_version_counts_changes();
    test_runs_no_user_code_flag();
    test_fallback_needs_both_classes();
    test_threads_resolve_while_the_class_goes();
    return check_report("carrier_class");
}
