/* The route registry (route.h): the core's fixed table of pairs, row 9's
 * class rules, and the routes bindings register, keyed by the exact pair
 * of class tables. */
#include "strideweave/route.h"
#include "fault_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "strideweave/alloc.h"
#include "strideweave/move.h"

#include "fork_internal.h"
#include "route_internal.h"

SW_FORK_LINKED;

/* ---- the core's own routes ------------------------------------------------ */

const sw_route_builtin sw_route_builtins[SW_ROUTE_BUILTINS] = {
    {&sw_cpu_class, &sw_file_backed_class, SW_ROUTE_KIND_BULK, NULL},
    {&sw_file_backed_class, &sw_cpu_class, SW_ROUTE_KIND_BULK, NULL},
    {&sw_cpu_class, &sw_block_device_carrier_class, SW_ROUTE_KIND_CLASS,
     sw_block_device_route_transfer},
    {&sw_block_device_carrier_class, &sw_cpu_class, SW_ROUTE_KIND_CLASS,
     sw_block_device_route_transfer},
};

static const char *class_name(const sw_carrier_class *c)
{
    return c->name ? c->name : "Carrier";
}

sw_status sw_route_refuse_pin(sw_route_pin pin, const char *s_name, const char *d_name,
                              sw_error *err)
{
    if (pin == SW_ROUTE_PIN_TILED)
        return sw_error_set(err, SW_ENOTSUP,
                            "move: cannot move from %s to %s: a TiledEvictable's values stay in "
                            "its tiers, so no move goes into or out of it; project its tiles "
                            "into another carrier instead",
                            s_name, d_name);
    return sw_error_set(err, SW_ENOTSUP,
                        "move: cannot move from %s to %s: a BlockDeviceCarrier moves only to "
                        "and from a CPU carrier",
                        s_name, d_name);
}

static sw_status refused(sw_error *err, sw_status st)
{
    if (err)
        err->detail = SW_MOVE_ROUTE_REFUSED;
    return st;
}

/* The core's answer for (s, d), no binding entry consulted. */
static sw_status resolve_core(const sw_carrier_class *s, const sw_carrier_class *d,
                              sw_route_entry *out, sw_error *err)
{
    const char *sn = class_name(s), *dn = class_name(d);
    if ((s->flags | d->flags) & SW_CARRIER_CLASS_STATE_ONLY)
        return refused(err, sw_error_set(err, SW_ENOTSUP,
                                         "move: no route from %s to %s: the binding keeps "
                                         "that carrier's values, and it registered no route "
                                         "for this pair",
                                         sn, dn));
    sw_route_pin pin = sw_route_pin_of(s, d);
    if (pin != SW_ROUTE_PIN_NONE)
        return refused(err, sw_route_refuse_pin(pin, sn, dn, err));
    const sw_route_builtin *b = sw_route_builtin_of(s, d);
    *out = (sw_route_entry){
        .kind = b ? b->kind : SW_ROUTE_KIND_ELEMENTWISE,
        .flags = SW_ROUTE_BUILTIN,
        .transfer = b ? b->transfer : NULL,
    };
    return SW_OK;
}

int sw_move_pair_allowed(const sw_carrier_class *s, const sw_carrier_class *d)
{
    sw_route_entry e;
    return resolve_core(s, d, &e, NULL) == SW_OK;
}

/* ---- the binding's routes --------------------------------------------------- */

/* A chained hash of the registered pairs. One mutex: a lookup or a list
 * change holds it for a few instructions (and a payload's ref); no unref
 * ever runs under it, since a binding's unref may run arbitrary code. */
#define BUCKETS 64

typedef struct node {
    const sw_carrier_class *src, *dst;
    sw_route_entry entry;
    struct node *next;
} node;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static node *buckets[BUCKETS];
/* How many entries are registered: resolution skips the lock while 0
 * (a C program that registers nothing never takes it). */
static atomic_long registered;
/* +1 per change of the entries (sw_route_registry_version), made under
 * the lock and after the change, so a reader that sees a version sees at
 * least the entries of that version. */
static _Atomic uint64_t version;

uint64_t sw_route_registry_version(void)
{
    return atomic_load_explicit(&version, memory_order_acquire);
}

static void changed_locked(void)
{
    atomic_fetch_add_explicit(&version, 1, memory_order_release);
}

/* A node holds a reference to both of its classes (a run-time class lives
 * while a route names it, carrier.h); dropped with the node, lock not held. */
static void node_free(node *n)
{
    sw_route_entry_release(&n->entry);
    sw_carrier_class_unref(n->src);
    sw_carrier_class_unref(n->dst);
    free(n);
}

static size_t bucket_of(const sw_carrier_class *s, const sw_carrier_class *d)
{
    uintptr_t h = (uintptr_t)s * 31u ^ (uintptr_t)d;
    h ^= h >> 17;
    h *= 0x9e3779b97f4a7c15u;
    return (size_t)(h >> 32) % BUCKETS;
}

/* fork(): no other thread may be inside the lock when the child starts. */
void sw_route_fork_prepare(void) { pthread_mutex_lock(&lock); }
void sw_route_fork_parent(void) { pthread_mutex_unlock(&lock); }
void sw_route_fork_child(void) { pthread_mutex_unlock(&lock); }

static void lock_registry(void) { pthread_mutex_lock(&lock); }

static void payload_ref(const sw_route_entry *e)
{
    if (e->payload && e->payload_ops && e->payload_ops->ref)
        e->payload_ops->ref(e->payload);
}

void sw_route_entry_release(sw_route_entry *e)
{
    if (!e)
        return;
    if (e->payload && e->payload_ops && e->payload_ops->unref)
        e->payload_ops->unref(e->payload);
    e->payload = NULL;
    e->payload_ops = NULL;
}

/* The link that points at (s, d)'s node (the node is *link), lock held. */
static node **find_locked(const sw_carrier_class *s, const sw_carrier_class *d)
{
    node **link = &buckets[bucket_of(s, d)];
    while (*link && ((*link)->src != s || (*link)->dst != d))
        link = &(*link)->next;
    return link;
}

sw_status sw_route_register(const sw_carrier_class *s, const sw_carrier_class *d,
                            const sw_route_entry *entry, sw_error *err)
{
    if (!s || !d || !entry)
        return sw_error_set(err, SW_ETYPE,
                            "route: register needs two carrier classes and an entry, not NULL");
    if (entry->kind != SW_ROUTE_KIND_BINDING)
        return sw_error_set(err, SW_EINVAL,
                            "route: only a binding route (SW_ROUTE_KIND_BINDING) can be "
                            "registered; the core's own routes are fixed");
    sw_route_pin pin = sw_route_pin_of(s, d);
    if (pin != SW_ROUTE_PIN_NONE)
        return refused(err, sw_route_refuse_pin(pin, class_name(s), class_name(d), err));
    node *n = malloc(sizeof *n);
    if (!n)
        return sw_error_set(err, SW_ENOMEM, "route: out of memory");
    *n = (node){.src = s, .dst = d, .entry = *entry};
    n->entry.flags &= ~(unsigned)SW_ROUTE_BUILTIN;
    n->entry.transfer = NULL;
    if (!n->entry.payload)
        n->entry.payload_ops = NULL;
    lock_registry();
    SW_FAULT_PAUSE("route_register_pause"); /* tests: fork with the lock held */
    node **link = find_locked(s, d);
    if (*link) {
        pthread_mutex_unlock(&lock);
        free(n);
        return sw_error_set(err, SW_EINVAL,
                            "route: a route from %s to %s is registered already; unregister "
                            "it first",
                            class_name(s), class_name(d));
    }
    payload_ref(&n->entry); /* the registry's own reference */
    sw_carrier_class_ref(s);
    sw_carrier_class_ref(d);
    *link = n;
    atomic_fetch_add(&registered, 1);
    changed_locked();
    pthread_mutex_unlock(&lock);
    return SW_OK;
}

sw_status sw_route_unregister(const sw_carrier_class *s, const sw_carrier_class *d,
                              sw_route_entry *removed, sw_error *err)
{
    if (!s || !d)
        return sw_error_set(err, SW_ETYPE, "route: unregister needs two carrier classes, not NULL");
    lock_registry();
    node **link = find_locked(s, d), *n = *link;
    if (n) {
        *link = n->next;
        atomic_fetch_sub(&registered, 1);
        changed_locked();
    }
    pthread_mutex_unlock(&lock);
    if (!n)
        return sw_error_set(err, SW_EINVAL, "route: no route is registered from %s to %s",
                            class_name(s), class_name(d));
    if (removed) {
        *removed = n->entry; /* the payload reference passes to the caller */
        n->entry.payload = NULL;
    }
    node_free(n);
    return SW_OK;
}

int sw_route_forget_class(const sw_carrier_class *cls)
{
    node *gone = NULL;
    int count = 0;
    lock_registry();
    for (size_t b = 0; b < BUCKETS; b++)
        for (node **link = &buckets[b]; *link;) {
            node *n = *link;
            if (n->src != cls && n->dst != cls) {
                link = &n->next;
                continue;
            }
            *link = n->next;
            n->next = gone;
            gone = n;
            count++;
        }
    atomic_fetch_sub(&registered, count);
    if (count)
        changed_locked();
    pthread_mutex_unlock(&lock);
    while (gone) {
        node *n = gone;
        gone = n->next;
        node_free(n);
    }
    return count;
}

/* ---- classes a binding lets fall back --------------------------------------- */

/* A class that may fall back is a node (cls, NULL) in the same table: it
 * holds its class, goes with sw_route_forget_class, and moves the version. */
sw_status sw_route_allow_fallback(const sw_carrier_class *cls, sw_error *err)
{
    if (!cls)
        return sw_error_set(err, SW_ETYPE, "route: allow_fallback needs a carrier class, not NULL");
    if (!(cls->flags & SW_CARRIER_CLASS_STATE_ONLY))
        return sw_error_set(err, SW_EINVAL,
                            "route: only a class whose values a binding keeps (STATE_ONLY) can "
                            "be let fall back; the core's own classes follow its table");
    node *n = malloc(sizeof *n);
    if (!n)
        return sw_error_set(err, SW_ENOMEM, "route: out of memory");
    *n = (node){.src = sw_carrier_class_ref(cls), .entry = {.flags = SW_ROUTE_MAY_FALL_BACK}};
    lock_registry();
    node **link = find_locked(cls, NULL);
    int fresh = *link == NULL;
    if (fresh) {
        *link = n;
        atomic_fetch_add(&registered, 1);
        changed_locked();
    }
    pthread_mutex_unlock(&lock);
    if (!fresh)
        node_free(n); /* allowed already: nothing changes */
    return SW_OK;
}

/* The binding route of (s, d) into *out with one payload reference, with
 * SW_ROUTE_MAY_FALL_BACK added when both classes may fall back: 1; 2 with
 * the elementwise fallback when there is no route but both may fall back;
 * 0 when there is neither. */
static int lookup_registered(const sw_carrier_class *s, const sw_carrier_class *d,
                             sw_route_entry *out)
{
    if (atomic_load(&registered) == 0)
        return 0;
    lock_registry();
    node *n = *find_locked(s, d);
    int fall_back = *find_locked(s, NULL) && *find_locked(d, NULL);
    if (n) {
        *out = n->entry;
        payload_ref(out);
    }
    pthread_mutex_unlock(&lock);
    if (n && fall_back)
        out->flags |= SW_ROUTE_MAY_FALL_BACK;
    else if (!n && fall_back)
        *out = (sw_route_entry){.kind = SW_ROUTE_KIND_ELEMENTWISE,
                                .flags = SW_ROUTE_MAY_FALL_BACK};
    return n ? 1 : fall_back ? 2 : 0;
}

sw_status sw_move_route_resolve(const sw_carrier_class *s, const sw_carrier_class *d,
                                sw_route_entry *out, sw_error *err)
{
    if (!s || !d || !out)
        return sw_error_set(err, SW_ETYPE,
                            "route: resolve needs two carrier classes and an entry, not NULL");
    if (lookup_registered(s, d, out))
        return SW_OK;
    return resolve_core(s, d, out, err);
}

sw_status sw_move_route_resolve_carriers(sw_carrier *src, sw_carrier *dst, sw_route_entry *out,
                                         sw_error *err)
{
    if (!src || !dst)
        return sw_error_set(err, SW_ETYPE, "route: resolve needs two carriers, not NULL");
    /* Each carrier holds a reference to its class: both stay for the call. */
    return sw_move_route_resolve(sw_carrier_class_of(src), sw_carrier_class_of(dst), out, err);
}
