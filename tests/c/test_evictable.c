/* Evictable through the public C API (contract E-1 .. E-10): construction
 * refusals with nothing claimed, the state machine (evict, promote, reuse
 * of a big enough tier, fresh tiers, no-ops), access and versions, release
 * and the last reference, ownership by a composite, the pending guard
 * while a transition runs (a gated tier holds it open, no sleeps), tiers
 * without a factory, and faults injected at every step of a transition
 * leaving everything as it was. */
#include <string.h>

#include "check.h"
#include "helpers.h"
#include "gated.h"
#include <strideweave/strideweave.h>
#include "strideweave/testing.h"

static sw_carrier *file_empty(void)
{
    sw_error err;
    sw_carrier *f = NULL;
    sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &f, &err);
    return f;
}

static int values_are(sw_carrier *c, int64_t n, float base)
{
    sw_error err;
    float buf[256];
    if (n > 256 || sw_carrier_read(c, 0, n, buf, &err) != SW_OK)
        return 0;
    for (int64_t i = 0; i < n; i++)
        if (buf[i] != base + (float)i)
            return 0;
    return 1;
}

/* Everything a failed call must leave alone. */
typedef struct ev_snap {
    int evicted, released, pending, is_mutable;
    int64_t size;
    uint64_t version, pversion, sversion;
    sw_carrier *primary, *secondary; /* identities only */
    int p_released, s_released, p_owned, s_owned;
    int64_t p_size, s_size;
} ev_snap;

static ev_snap take(sw_carrier *e)
{
    sw_carrier *p = sw_evictable_primary(e), *s = sw_evictable_secondary(e);
    ev_snap v = {
        sw_evictable_is_evicted(e), sw_carrier_is_released(e), sw_carrier_is_pending(e),
        sw_carrier_is_mutable(e), sw_carrier_size(e), sw_carrier_version(e),
        sw_carrier_version(p), sw_carrier_version(s), p, s,
        sw_carrier_is_released(p), sw_carrier_is_released(s), sw_carrier_is_owned(p),
        sw_carrier_is_owned(s), sw_carrier_size(p), sw_carrier_size(s),
    };
    sw_carrier_unref(p);
    sw_carrier_unref(s);
    return v;
}

static int same(ev_snap a, ev_snap b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

/* ---- E-1 ---------------------------------------------------------------------- */

static void test_e1_construction_refusals(void)
{
    sw_error err;
    sw_carrier *e = NULL, *cpu = cpu_values(8, 0), *file = file_empty(), *other = cpu_values(8, 0);
    sw_carrier *ints = NULL, *empty = NULL, *frozen = NULL, *released = cpu_values(4, 0);
    sw_cpu_new(8, SW_DT_INT32, 0, &ints, &err);
    sw_cpu_new(0, SW_DT_FLOAT32, 0, &empty, &err);
    float z[8] = {0};
    sw_generic_new(z, 8, SW_DT_FLOAT32, SW_CARRIER_IMMUTABLE, &frozen, &err);
    sw_carrier_release(released, &err);

    CHECK_EQ_I64(sw_evictable_new(NULL, file, NULL, &e, &err), SW_ETYPE);
    CHECK(strstr(err.msg, "primary") != NULL);
    CHECK_EQ_I64(sw_evictable_new(cpu, NULL, NULL, &e, &err), SW_ETYPE);
    CHECK(strstr(err.msg, "secondary") != NULL);
    /* checks 3 to 8 and 10 in the words the Python API raises */
    CHECK_EQ_I64(sw_evictable_new(cpu, cpu, NULL, &e, &err), SW_EINVAL);
    CHECK_MSG(err, "primary and secondary must be different carriers");
    CHECK_EQ_I64(sw_evictable_new(released, file, NULL, &e, &err), SW_ESTATE);
    CHECK_MSG(err, "the primary CPU carrier is released");
    CHECK_EQ_I64(sw_evictable_new(cpu, released, NULL, &e, &err), SW_ESTATE);
    CHECK_MSG(err, "the secondary CPU carrier is released");
    uint64_t tok = 0;
    CHECK_EQ_I64(sw_carrier_claim(other, &tok, &err), SW_OK);
    CHECK_EQ_I64(sw_evictable_new(other, file, NULL, &e, &err), SW_ESTATE);
    CHECK_MSG(err, "the primary CPU carrier is already owned by another composite");
    CHECK_EQ_I64(sw_evictable_new(cpu, other, NULL, &e, &err), SW_ESTATE);
    CHECK_EQ_I64(sw_carrier_relinquish(other, tok, &err), SW_OK);
    CHECK_EQ_I64(sw_evictable_new(cpu, ints, NULL, &e, &err), SW_ETYPE);
    CHECK(strstr(err.msg, "dtypes") != NULL);
    CHECK_EQ_I64(sw_evictable_new(cpu, frozen, NULL, &e, &err), SW_ESTATE);
    CHECK_MSG(err, "the secondary Generic carrier is not mutable");
    CHECK_EQ_I64(sw_evictable_new(empty, file, NULL, &e, &err), SW_EINVAL);
    CHECK_MSG(err, "the primary carrier is empty (size 0)");
    CHECK_EQ_I64(sw_evictable_new(cpu, file, NULL, NULL, &err), SW_EINVAL);
    CHECK(e == NULL);

    /* Check 10: a primary taking part in a move cannot be claimed; the
     * secondary is not left claimed. */
    gated g;
    gated_init(&g, 8);
    sw_carrier *gc = NULL;
    sw_carrier_new(&gated_ops, &g, SW_DT_FLOAT32, 0, &gc, &err);
    int64_t ext[1] = {8};
    sw_tensor *t = NULL;
    sw_tensor_new_strided(other, 0, 1, ext, NULL, &t, &err);
    sw_move_handle *m = NULL;
    CHECK_EQ_I64(sw_move_async(t, gc, NULL, &m, &err), SW_OK);
    gated_wait_entered(&g);
    CHECK_EQ_I64(sw_evictable_new(other, file, NULL, &e, &err), SW_ESTATE);
    CHECK_MSG(err, "cannot claim a CPU carrier that is pending in a move");
    CHECK(!sw_carrier_is_owned(file) && !sw_carrier_is_owned(other));
    gated_open(&g);
    CHECK_EQ_I64(sw_move_wait(m, NULL, &err), SW_OK);
    sw_move_unref(m);
    sw_tensor_unref(t);

    /* Nothing was claimed by any refusal. */
    CHECK(!sw_carrier_is_owned(cpu) && !sw_carrier_is_owned(file));
    CHECK(sw_carrier_is_mutable(cpu) && sw_carrier_is_mutable(file));
    sw_carrier_unref(gc);
    sw_carrier_unref(released);
    sw_carrier_unref(frozen);
    sw_carrier_unref(empty);
    sw_carrier_unref(ints);
    sw_carrier_unref(other);
    sw_carrier_unref(file);
    sw_carrier_unref(cpu);
}

/* ---- E-2 .. E-8 --------------------------------------------------------------- */

static void test_e4_state_machine(void)
{
    sw_error err;
    sw_carrier *cpu = cpu_values(16, 10), *file = file_empty(), *e = NULL;
    CHECK_EQ_I64(sw_evictable_new(cpu, file, NULL, &e, &err), SW_OK);
    if (!e)
        return;
    /* E-2 */
    CHECK(sw_carrier_class_of(e) == &sw_evictable_class);
    CHECK(strcmp(sw_carrier_name(e), "Evictable") == 0);
    CHECK_EQ_I64(sw_carrier_size(e), 16);
    CHECK_EQ_I64(sw_carrier_dtype(e), SW_DT_FLOAT32);
    CHECK(!sw_evictable_is_evicted(e) && sw_carrier_is_mutable(e));
    sw_carrier *p = sw_evictable_primary(e), *s = sw_evictable_secondary(e);
    CHECK(p == cpu && s == file);
    sw_carrier_unref(p);
    sw_carrier_unref(s);
    /* E-3: the aliases are owned: readable, not writable or releasable. */
    CHECK(sw_carrier_is_owned(cpu) && sw_carrier_is_owned(file));
    float v = 0, w = 99.0f;
    CHECK_EQ_I64(sw_carrier_read(cpu, 3, 1, &v, &err), SW_OK);
    CHECK(v == 13.0f);
    CHECK_EQ_I64(sw_carrier_write(cpu, 3, 1, &w, &err), SW_ESTATE);
    CHECK_EQ_I64(sw_carrier_release(cpu, &err), SW_ESTATE);
    /* Promoted: reads and writes go to the primary; +1 per write on both. */
    CHECK(values_are(e, 16, 10));
    CHECK_EQ_I64(sw_carrier_write(e, 0, 1, &w, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_version(e), 1);
    CHECK_EQ_I64(sw_carrier_version(cpu), 1);
    w = 10.0f;
    CHECK_EQ_I64(sw_carrier_write(e, 0, 1, &w, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_version(e), 2);

    /* E-4 evict: the empty FileBacked secondary is replaced by a fresh one
     * (released and relinquished); the move released the primary. */
    CHECK_EQ_I64(sw_evictable_evict(e, &err), SW_OK);
    CHECK(sw_evictable_is_evicted(e));
    s = sw_evictable_secondary(e);
    CHECK(s != file && sw_carrier_class_of(s) == &sw_file_backed_class);
    CHECK_EQ_I64(sw_carrier_size(s), 16);
    CHECK(sw_carrier_is_owned(s) && !sw_carrier_is_released(s));
    CHECK(values_are(s, 16, 10)); /* an owned tier stays readable */
    sw_carrier_unref(s);
    CHECK(sw_carrier_is_released(file) && !sw_carrier_is_owned(file));
    CHECK(sw_carrier_is_released(cpu) && sw_carrier_is_owned(cpu));
    CHECK_EQ_I64(sw_carrier_version(e), 2); /* E-6 */
    /* E-3 evicted: access fails naming promote; metadata stays. */
    CHECK_EQ_I64(sw_carrier_read(e, 0, 1, &v, &err), SW_ESTATE);
    CHECK(strstr(err.msg, "promote") != NULL);
    CHECK_EQ_I64(sw_carrier_write(e, 0, 1, &w, &err), SW_ESTATE);
    CHECK(strstr(err.msg, "promote") != NULL);
    CHECK_EQ_I64(sw_carrier_version(e), 2);
    CHECK_EQ_I64(sw_carrier_size(e), 16);
    /* Already evicted: nothing happens. */
    ev_snap before = take(e);
    CHECK_EQ_I64(sw_evictable_evict(e, &err), SW_OK);
    CHECK(same(before, take(e)));

    /* promote: the released primary is replaced by a fresh CPU carrier. */
    CHECK_EQ_I64(sw_evictable_promote(e, &err), SW_OK);
    CHECK(!sw_evictable_is_evicted(e));
    p = sw_evictable_primary(e);
    CHECK(p != cpu && sw_carrier_class_of(p) == &sw_cpu_class);
    CHECK(sw_carrier_is_owned(p));
    sw_carrier_unref(p);
    CHECK(!sw_carrier_is_owned(cpu)); /* the replaced one is relinquished */
    s = sw_evictable_secondary(e);
    CHECK(sw_carrier_is_released(s)); /* the move released it */
    sw_carrier_unref(s);
    CHECK(values_are(e, 16, 10));
    CHECK_EQ_I64(sw_carrier_version(e), 2);
    CHECK(sw_carrier_is_mutable(e));
    CHECK_EQ_I64(sw_evictable_promote(e, &err), SW_OK); /* no-op */

    /* E-7: no DLPack in either state. */
    int64_t ext[1] = {16};
    sw_tensor *t = NULL;
    DLManagedTensorVersioned *dl = NULL;
    sw_tensor_new_strided(e, 0, 1, ext, NULL, &t, &err);
    CHECK_EQ_I64(sw_tensor_to_dlpack(t, &dl, &err), SW_ENOTSUP);
    sw_tensor_unref(t);

    /* E-8: release releases both tiers and relinquishes them. */
    p = sw_evictable_primary(e);
    s = sw_evictable_secondary(e);
    CHECK_EQ_I64(sw_carrier_release(e, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_release(e, &err), SW_OK);
    CHECK(sw_carrier_is_released(p) && sw_carrier_is_released(s));
    CHECK(!sw_carrier_is_owned(p) && !sw_carrier_is_owned(s));
    CHECK_EQ_I64(sw_carrier_size(e), 0);
    /* E-4's refusals in the words the Python API raises */
    CHECK_EQ_I64(sw_evictable_evict(e, &err), SW_ESTATE);
    CHECK_MSG(err, "cannot evict a released Evictable");
    CHECK_EQ_I64(sw_evictable_promote(e, &err), SW_ESTATE);
    CHECK_MSG(err, "cannot promote a released Evictable");
    CHECK_EQ_I64(sw_carrier_read(e, 0, 1, &v, &err), SW_ESTATE);
    sw_carrier_unref(p);
    sw_carrier_unref(s);
    sw_carrier_unref(e);
    sw_carrier_unref(file);
    sw_carrier_unref(cpu);
    CHECK_EQ_I64(sw_evictable_evict(NULL, &err), SW_ETYPE);
    sw_carrier *plain = cpu_values(2, 0);
    CHECK_EQ_I64(sw_evictable_promote(plain, &err), SW_ETYPE);
    CHECK(strstr(err.msg, "not an Evictable") != NULL);
    CHECK(sw_evictable_primary(plain) == NULL && !sw_evictable_is_evicted(plain));
    sw_carrier_unref(plain);
}

/* E-4: a live secondary at least as big is reused, not replaced; a second
 * eviction after a promote (which released it) gets a fresh one. */
static void test_e4_reuses_big_enough_tier(void)
{
    sw_error err;
    sw_carrier *cpu = cpu_values(8, 1), *big = cpu_values(12, 500), *e = NULL;
    CHECK_EQ_I64(sw_evictable_new(cpu, big, NULL, &e, &err), SW_OK);
    if (!e)
        return;
    CHECK_EQ_I64(sw_evictable_evict(e, &err), SW_OK);
    sw_carrier *s = sw_evictable_secondary(e);
    CHECK(s == big);
    sw_carrier_unref(s);
    float head[8];
    CHECK_EQ_I64(sw_carrier_read(big, 0, 8, head, &err), SW_OK);
    CHECK(head[0] == 1.0f && head[7] == 8.0f);
    float tail = 0;
    CHECK_EQ_I64(sw_carrier_read(big, 11, 1, &tail, &err), SW_OK);
    CHECK(tail == 511.0f); /* beyond the Evictable's size: untouched */
    CHECK_EQ_I64(sw_evictable_promote(e, &err), SW_OK);
    CHECK(sw_carrier_is_released(big) && sw_carrier_is_owned(big));
    CHECK_EQ_I64(sw_evictable_evict(e, &err), SW_OK);
    s = sw_evictable_secondary(e);
    CHECK(s != big && sw_carrier_class_of(s) == &sw_cpu_class);
    CHECK_EQ_I64(sw_carrier_size(s), 8);
    sw_carrier_unref(s);
    CHECK(!sw_carrier_is_owned(big));
    CHECK_EQ_I64(sw_evictable_promote(e, &err), SW_OK);
    CHECK(values_are(e, 8, 1));
    /* The last reference of an unreleased Evictable only relinquishes. */
    sw_carrier *p = sw_evictable_primary(e);
    sw_carrier_unref(e);
    CHECK(!sw_carrier_is_owned(p) && !sw_carrier_is_released(p));
    float w = 4.0f;
    CHECK_EQ_I64(sw_carrier_write(p, 0, 1, &w, &err), SW_OK);
    sw_carrier_unref(p);
    sw_carrier_unref(big);
    sw_carrier_unref(cpu);
}

/* E-8 for a binding (evictable.h, sw_evictable_live_tiers): the tiers
 * whose storage is live are both until the first transition, then the one
 * holding the values; after the release, those the release released. */
static int live_after_release(int transitions)
{
    sw_error err;
    sw_carrier *cpu = cpu_values(8, 1), *file = file_empty(), *e = NULL;
    CHECK_EQ_I64(sw_evictable_new(cpu, file, NULL, &e, &err), SW_OK);
    for (int i = 0; e && i < transitions; i++)
        CHECK_EQ_I64(i % 2 ? sw_evictable_promote(e, &err) : sw_evictable_evict(e, &err), SW_OK);
    int before = sw_evictable_live_tiers(e);
    CHECK_EQ_I64(sw_carrier_release(e, &err), SW_OK);
    sw_carrier *p = sw_evictable_primary(e), *s = sw_evictable_secondary(e);
    CHECK(sw_carrier_is_released(p) && sw_carrier_is_released(s));
    CHECK_EQ_I64(sw_evictable_live_tiers(e), before);
    CHECK_EQ_I64(sw_carrier_release(e, &err), SW_OK); /* again: the same answer */
    CHECK_EQ_I64(sw_evictable_live_tiers(e), before);
    sw_carrier_unref(p);
    sw_carrier_unref(s);
    sw_carrier_unref(e);
    sw_carrier_unref(file);
    sw_carrier_unref(cpu);
    return before;
}

static void test_e8_live_tiers(void)
{
    enum { P = SW_EVICTABLE_PRIMARY_LIVE, S = SW_EVICTABLE_SECONDARY_LIVE };
    sw_error err;
    sw_carrier *cpu = cpu_values(8, 1), *file = file_empty(), *e = NULL;
    CHECK_EQ_I64(sw_evictable_live_tiers(NULL), 0);
    CHECK_EQ_I64(sw_evictable_live_tiers(cpu), 0);
    CHECK_EQ_I64(sw_evictable_new(cpu, file, NULL, &e, &err), SW_OK);
    if (!e)
        return;
    CHECK_EQ_I64(sw_evictable_live_tiers(e), P | S);
    CHECK_EQ_I64(sw_evictable_evict(e, &err), SW_OK);
    CHECK_EQ_I64(sw_evictable_live_tiers(e), S);
    CHECK_EQ_I64(sw_evictable_evict(e, &err), SW_OK); /* nothing to do */
    CHECK_EQ_I64(sw_evictable_live_tiers(e), S);
    CHECK_EQ_I64(sw_evictable_promote(e, &err), SW_OK); /* into a fresh primary */
    CHECK_EQ_I64(sw_evictable_live_tiers(e), P);
    sw_carrier_unref(e);
    sw_carrier_unref(file);
    sw_carrier_unref(cpu);
    CHECK_EQ_I64(live_after_release(0), P | S);
    CHECK_EQ_I64(live_after_release(1), S);
    CHECK_EQ_I64(live_after_release(2), P);
}

/* C-13 for the hierarchy: owned by a composite, transitions need the
 * owner's access on this thread. */
static void test_e4_owned_hierarchy(void)
{
    sw_error err;
    sw_carrier *cpu = cpu_values(4, 0), *file = file_empty(), *e = NULL;
    CHECK_EQ_I64(sw_evictable_new(cpu, file, NULL, &e, &err), SW_OK);
    if (!e)
        return;
    uint64_t tok = 0;
    CHECK_EQ_I64(sw_carrier_claim(e, &tok, &err), SW_OK);
    ev_snap before = take(e);
    CHECK_EQ_I64(sw_evictable_evict(e, &err), SW_ESTATE);
    CHECK(strstr(err.msg, "owned") != NULL);
    CHECK_EQ_I64(sw_carrier_release(e, &err), SW_ESTATE);
    CHECK(same(before, take(e)));
    CHECK_EQ_I64(sw_carrier_begin_owner_access(e, tok, &err), SW_OK);
    CHECK_EQ_I64(sw_evictable_evict(e, &err), SW_OK);
    CHECK_EQ_I64(sw_evictable_promote(e, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_end_owner_access(e, tok, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_relinquish(e, tok, &err), SW_OK);
    CHECK(values_are(e, 4, 0));
    /* An Evictable moves like any carrier (slot by slot); the move
     * releases it, and so its tiers. */
    sw_carrier *dst = NULL, *p = sw_evictable_primary(e);
    sw_cpu_new(4, SW_DT_FLOAT32, 0, &dst, &err);
    int64_t ext[1] = {4};
    sw_tensor *t = NULL, *r = NULL;
    sw_tensor_new_strided(e, 0, 1, ext, NULL, &t, &err);
    CHECK_EQ_I64(sw_move(t, dst, &r, &err), SW_OK);
    CHECK(values_are(dst, 4, 0));
    CHECK(sw_carrier_is_released(e) && sw_carrier_is_released(p) && !sw_carrier_is_owned(p));
    sw_tensor_unref(r);
    sw_tensor_unref(t);
    sw_carrier_unref(p);
    sw_carrier_unref(dst);
    sw_carrier_unref(e);
    sw_carrier_unref(file);
    sw_carrier_unref(cpu);
}

/* E-10: an Evictable can be a tier of another (moves slot by slot both
 * ways); a released inner one is replaced by a fresh Evictable over fresh
 * tiers like its own (sw_tier_allocate_like). */
static void test_e10_nested_evictable_tier(void)
{
    sw_error err;
    sw_carrier *cpu = cpu_values(8, 20), *file = file_empty(), *inner = NULL, *outer = NULL;
    sw_carrier *spare = NULL;
    CHECK_EQ_I64(sw_evictable_new(cpu, file, NULL, &inner, &err), SW_OK);
    sw_cpu_new(8, SW_DT_FLOAT32, SW_CARRIER_EMPTY, &spare, &err);
    CHECK_EQ_I64(sw_evictable_new(inner, spare, NULL, &outer, &err), SW_OK);
    if (!outer)
        return;
    CHECK_EQ_I64(sw_evictable_evict(inner, &err), SW_ESTATE); /* owned by outer */
    CHECK_MSG(err, "cannot evict an Evictable owned by a composite carrier without owner access");
    CHECK_EQ_I64(sw_evictable_evict(outer, &err), SW_OK);
    CHECK(values_are(spare, 8, 20));
    CHECK(sw_carrier_is_released(inner) && sw_carrier_is_released(cpu));
    CHECK(!sw_carrier_is_owned(cpu) && !sw_carrier_is_owned(file));
    CHECK_EQ_I64(sw_evictable_promote(outer, &err), SW_OK);
    sw_carrier *p = sw_evictable_primary(outer);
    CHECK(p != inner && sw_carrier_class_of(p) == &sw_evictable_class);
    CHECK(!sw_evictable_is_evicted(p) && sw_carrier_is_owned(p));
    CHECK_EQ_I64(sw_carrier_version(p), 0); /* filled by a move: no version change */
    sw_carrier *pp = sw_evictable_primary(p);
    CHECK(pp && sw_carrier_class_of(pp) == &sw_cpu_class && values_are(pp, 8, 20));
    CHECK_EQ_I64(sw_carrier_version(pp), 0);
    sw_carrier_unref(pp);
    sw_carrier_unref(p);
    CHECK(values_are(outer, 8, 20));
    float w = 5.0f;
    CHECK_EQ_I64(sw_carrier_write(outer, 1, 1, &w, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_release(outer, &err), SW_OK);
    sw_carrier_unref(outer);
    sw_carrier_unref(spare);
    sw_carrier_unref(inner);
    sw_carrier_unref(file);
    sw_carrier_unref(cpu);
}

/* ---- a transition held open -------------------------------------------------- */

typedef struct evictor {
    sw_carrier *e;
    sw_status st;
    sw_error err;
} evictor;

static void *evict_main(void *arg)
{
    evictor *x = arg;
    x->st = sw_evictable_evict(x->e, &x->err);
    return NULL;
}

static sw_status gated_factory(sw_carrier *proto, int64_t size, sw_dtype dtype, void *user,
                               sw_carrier **out, sw_error *err)
{
    (void)dtype;
    if (sw_carrier_class_of(proto) != &gated_ops)
        return SW_ENOTSUP;
    gated *g = user;
    gated_init(g, size);
    g->open = 1;
    return sw_carrier_new(&gated_ops, g, SW_DT_FLOAT32, 0, out, err);
}

/* While a transition runs the Evictable is pending: reads work, writes,
 * release, claims and other transitions are refused with nothing changed.
 * A tier class without a factory cannot be replaced: the transition fails
 * SW_ENOTSUP with nothing changed, and works once a factory is given. */
static void test_e4_pending_while_transition_runs(void)
{
    sw_error err;
    gated g;
    gated_init(&g, 8);
    sw_carrier *cpu = cpu_values(8, 3), *gc = NULL, *e = NULL;
    sw_carrier_new(&gated_ops, &g, SW_DT_FLOAT32, 0, &gc, &err);
    CHECK_EQ_I64(sw_evictable_new(cpu, gc, NULL, &e, &err), SW_OK);
    if (!e)
        return;
    evictor x = {e, SW_OK, {0}};
    pthread_t th;
    pthread_create(&th, NULL, evict_main, &x);
    gated_wait_entered(&g); /* the move is writing the secondary now */
    CHECK(sw_carrier_is_pending(e) && !sw_carrier_is_mutable(e));
    CHECK(!sw_evictable_is_evicted(e));
    CHECK(values_are(e, 8, 3));
    float w = 1.0f;
    uint64_t tok;
    uint64_t version = sw_carrier_version(e);
    CHECK_EQ_I64(sw_carrier_write(e, 0, 1, &w, &err), SW_ESTATE);
    CHECK(strstr(err.msg, "pending") != NULL);
    CHECK_EQ_I64(sw_evictable_evict(e, &err), SW_ESTATE);
    CHECK_MSG(err, "cannot evict an Evictable that is pending in a move");
    CHECK_EQ_I64(sw_evictable_promote(e, &err), SW_ESTATE);
    CHECK_MSG(err, "cannot promote an Evictable that is pending in a move");
    CHECK_EQ_I64(sw_carrier_release(e, &err), SW_ESTATE);
    CHECK_EQ_I64(sw_carrier_claim(e, &tok, &err), SW_ESTATE);
    CHECK_EQ_I64(sw_carrier_version(e), version);
    gated_open(&g);
    pthread_join(th, NULL);
    CHECK_EQ_I64(x.st, SW_OK);
    CHECK(sw_evictable_is_evicted(e) && !sw_carrier_is_pending(e));
    CHECK(g.slots[0] == 3.0f && g.slots[7] == 10.0f);

    /* promote releases the gated tier; evicting again needs a fresh one. */
    CHECK_EQ_I64(sw_evictable_promote(e, &err), SW_OK);
    ev_snap before = take(e);
    CHECK_EQ_I64(sw_evictable_evict(e, &err), SW_ENOTSUP);
    CHECK(strstr(err.msg, "Gated") && strstr(err.msg, "factory"));
    CHECK(same(before, take(e)));
    CHECK(values_are(e, 8, 3));

    /* With a factory for the class it works. */
    gated g2;
    sw_evictable_options opt = {.factory = gated_factory, .user = &g2};
    sw_carrier *p = sw_evictable_primary(e), *e2 = NULL;
    sw_carrier_release(e, &err);
    sw_carrier_unref(p);
    gated g3;
    gated_init(&g3, 0);
    sw_carrier *gc3 = NULL, *cpu2 = cpu_values(8, 40);
    sw_carrier_new(&gated_ops, &g3, SW_DT_FLOAT32, 0, &gc3, &err);
    CHECK_EQ_I64(sw_evictable_new(cpu2, gc3, &opt, &e2, &err), SW_OK);
    CHECK_EQ_I64(sw_evictable_evict(e2, &err), SW_OK);
    sw_carrier *s2 = sw_evictable_secondary(e2);
    CHECK(s2 != gc3 && s2 != NULL && sw_carrier_class_of(s2) == &gated_ops);
    CHECK(g2.slots[0] == 40.0f && g2.slots[7] == 47.0f);
    CHECK_EQ_I64(sw_evictable_promote(e2, &err), SW_OK);
    CHECK(values_are(e2, 8, 40));
    sw_carrier_unref(s2);
    sw_carrier_unref(e2);
    sw_carrier_unref(gc3);
    sw_carrier_unref(cpu2);
    sw_carrier_unref(e);
    sw_carrier_unref(gc);
    sw_carrier_unref(cpu);
}

/* ---- E-5: faults ----------------------------------------------------------- */

/* Fail the n-th allocation (and each named fault) inside a transition:
 * either it fails with everything as it was, or it succeeds in full. */
static void fault_walk(const char *fault, int evict, int reuse, int *failures, int *successes)
{
    sw_error err;
    sw_carrier *cpu = cpu_values(32, 2), *e = NULL;
    /* reuse: a big enough CPU secondary the evict moves into in place */
    sw_carrier *file = reuse ? cpu_values(40, 0) : file_empty();
    if (sw_evictable_new(cpu, file, NULL, &e, &err) != SW_OK)
        return;
    if (!evict)
        CHECK_EQ_I64(sw_evictable_evict(e, &err), SW_OK);
    for (long skip = 0; skip < 40; skip++) {
        ev_snap before = take(e);
        sw_fault_arm(fault, skip, 1);
        sw_status st = evict ? sw_evictable_evict(e, &err) : sw_evictable_promote(e, &err);
        sw_fault_clear();
        sw_move_drain();
        if (st != SW_OK) {
            ++*failures;
            if (!same(before, take(e))) {
                fprintf(stderr, "%s skip %ld (%s): state changed by a failed transition\n",
                        fault, skip, evict ? "evict" : "promote");
                CHECK(0);
            }
            CHECK(!sw_carrier_is_pending(e));
            continue;
        }
        ++*successes;
        CHECK_EQ_I64(sw_evictable_is_evicted(e), evict);
        CHECK_EQ_I64(sw_carrier_version(e), before.version);
        /* Back to where the walk starts. */
        st = evict ? sw_evictable_promote(e, &err) : sw_evictable_evict(e, &err);
        CHECK_EQ_I64(st, SW_OK);
    }
    if (sw_evictable_is_evicted(e))
        CHECK_EQ_I64(sw_evictable_promote(e, &err), SW_OK);
    CHECK(values_are(e, 32, 2));
    sw_carrier_unref(e);
    sw_carrier_unref(file);
    sw_carrier_unref(cpu);
}

static void test_e5_faults_change_nothing(void)
{
    if (!sw_fault_enabled()) {
        printf("skip test_e5_faults_change_nothing: needs -Dfault_injection=true\n");
        return;
    }
    const char *faults[] = {"alloc", "move_transfer", "move_submit", "pwrite", "pread",
                            "truncate", "open"};
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) {
        for (int evict = 0; evict < 2; evict++) {
            int failures = 0, successes = 0;
            fault_walk(faults[i], evict, 0, &failures, &successes);
            /* Every fault that a transition reaches fails it at least once
             * (pread only when promoting from the file, pwrite/truncate/open
             * only when evicting into it). */
            int reached = !strcmp(faults[i], "alloc") || !strcmp(faults[i], "move_transfer") ||
                          !strcmp(faults[i], "move_submit") ||
                          (evict ? strcmp(faults[i], "pread") != 0
                                 : !strcmp(faults[i], "pread"));
            if (reached && failures == 0) {
                fprintf(stderr, "fault %s never failed a%s\n", faults[i],
                        evict ? "n evict" : " promote");
                CHECK(0);
            }
            CHECK(successes > 0);
        }
    }
    /* In place into a live secondary (no fresh tier): allocation and
     * transfer faults, evicting and promoting. */
    const char *in_place[] = {"alloc", "move_transfer", "move_submit"};
    for (size_t i = 0; i < sizeof in_place / sizeof in_place[0]; i++)
        for (int evict = 0; evict < 2; evict++) {
            int failures = 0, successes = 0;
            fault_walk(in_place[i], evict, 1, &failures, &successes);
            CHECK(failures > 0 && successes > 0);
        }
}

int main(void)
{
    test_e1_construction_refusals();
    test_e4_state_machine();
    test_e4_reuses_big_enough_tier();
    test_e8_live_tiers();
    test_e4_owned_hierarchy();
    test_e10_nested_evictable_tier();
    test_e4_pending_while_transition_runs();
    test_e5_faults_change_nothing();
    sw_move_drain();
    return check_report("evictable");
}
