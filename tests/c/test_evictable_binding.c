/* Evictable over binding tiers (evictable.h, "Binding tiers"): a tiny
 * stand-in binding keeps the slots of STATE_ONLY carriers in a table and
 * plugs its move, size, discard and factory hooks into the Evictable.
 * Checked: construction needs the hooks and takes the binding's size and
 * dtype; evict/promote run the binding's move with the Evictable pending,
 * owner access on the calling thread and no core lock held (the hook calls
 * state functions of the Evictable and its tiers, which would deadlock on
 * a held mutex); a hook that hands the move on (SW_ENOTSUP) gets the
 * core's move; a failing move changes nothing, discards the fresh tier and
 * a retry works; a replaced target is discarded with owner access, then
 * released and relinquished; slot I/O through a STATE_ONLY primary is the
 * binding's; releasing the Evictable releases the state of its binding
 * tiers and calls no hook. */
#include <pthread.h>
#include <string.h>

#include "check.h"
#include "helpers.h"
#include <strideweave/strideweave.h>

/* ---- the stand-in binding ------------------------------------------------ */

static const sw_carrier_class binding_class = {
    .name = "BindingCarrier",
    .flags = SW_CARRIER_CLASS_STATE_ONLY,
};

typedef struct bslot {
    sw_carrier *h;
    float v[64];
    int64_t n;
} bslot;

typedef struct binding {
    bslot tiers[256];
    pthread_mutex_t mu; /* guards ntiers (threads share one binding) */
    int ntiers;
    sw_carrier *ev; /* the Evictable, once made */
    int moves, core_moves_handed_on, discards, factories, sizes;
    int fail_next_move;
    int threaded;             /* threads share it: the hooks count nothing */
    int hand_on;              /* the move hook returns SW_ENOTSUP */
    int saw_pending, saw_access, saw_write_refused, saw_discard_access;
} binding;

static bslot *slot_of(binding *b, sw_carrier *h)
{
    pthread_mutex_lock(&b->mu);
    int n = b->ntiers;
    pthread_mutex_unlock(&b->mu);
    for (int i = 0; i < n; i++)
        if (b->tiers[i].h == h)
            return &b->tiers[i];
    return NULL;
}

static sw_carrier *binding_new(binding *b, int64_t n, float base)
{
    sw_error err;
    sw_carrier *h = NULL;
    if (sw_carrier_new(&binding_class, NULL, SW_DT_ANY, 0, &h, &err) != SW_OK)
        return NULL;
    pthread_mutex_lock(&b->mu);
    bslot *s = b->ntiers < 256 ? &b->tiers[b->ntiers] : NULL;
    if (s) {
        memset(s, 0, sizeof *s);
        s->n = n;
        for (int64_t i = 0; i < n; i++)
            s->v[i] = base + (float)i;
        s->h = h;
        b->ntiers++; /* published last: slot_of reads up to ntiers */
    }
    pthread_mutex_unlock(&b->mu);
    if (!s)
        sw_carrier_unref(h);
    return s ? h : NULL;
}

static sw_status b_size(sw_carrier *tier, void *user, int64_t *out, sw_error *err)
{
    binding *b = user;
    if (!b->threaded)
        b->sizes++;
    bslot *s = slot_of(b, tier);
    if (!s)
        return sw_error_set(err, SW_ETYPE, "not a binding tier");
    *out = s->n;
    return SW_OK;
}

/* Read/write a tier's slots, whichever side keeps them. */
static float *values_of(binding *b, sw_carrier *c)
{
    bslot *s = slot_of(b, c);
    return s ? s->v : sw_cpu_pointer(c);
}

static sw_status b_move(sw_carrier *from, sw_carrier *to, int64_t n, void *user, sw_error *err)
{
    binding *b = user;
    if (!b->threaded) {
        b->moves++;
        /* No core lock held: these take the Evictable's and the tiers' mutexes. */
        b->saw_pending = sw_carrier_is_pending(b->ev) && !sw_carrier_is_released(from);
        b->saw_access = sw_carrier_has_owner_access(from);
        float one = 1;
        sw_error werr;
        b->saw_write_refused = sw_carrier_write(b->ev, 0, 1, &one, &werr) == SW_ESTATE;
    }
    if (b->hand_on) {
        b->core_moves_handed_on++;
        return SW_ENOTSUP;
    }
    if (b->fail_next_move) {
        b->fail_next_move = 0;
        return sw_error_set(err, SW_EIO, "binding: the copy failed");
    }
    float *src = values_of(b, from), *dst = values_of(b, to);
    if (!src || !dst)
        return sw_error_set(err, SW_ETYPE, "binding: unknown tier");
    memcpy(dst, src, (size_t)n * sizeof(float));
    return sw_carrier_release(from, err); /* a move releases its source */
}

static void b_discard(sw_carrier *tier, void *user)
{
    binding *b = user;
    if (!b->threaded) {
        b->discards++;
        b->saw_discard_access =
            sw_carrier_is_owned(tier) ? sw_carrier_has_owner_access(tier) : 1;
    }
    (void)sw_carrier_release(tier, NULL);
}

static sw_status b_factory(sw_carrier *proto, int64_t size, sw_dtype dtype, void *user,
                           sw_carrier **out, sw_error *err)
{
    binding *b = user;
    (void)dtype;
    if (!slot_of(b, proto))
        return SW_ENOTSUP;
    if (!b->threaded)
        b->factories++;
    *out = sw_carrier_ref(binding_new(b, size, 0)); /* the table keeps its own */
    return *out ? SW_OK : sw_error_set(err, SW_ENOMEM, "binding: no tier");
}

/* The table's references. */
static void binding_free(binding *b)
{
    for (int i = 0; i < b->ntiers; i++)
        sw_carrier_unref(b->tiers[i].h);
}

static sw_evictable_options hooks(binding *b)
{
    sw_evictable_options o = {.factory = b_factory, .user = b, .move = b_move, .size = b_size,
                              .discard = b_discard, .dtype = SW_DT_FLOAT32};
    return o;
}

static int floats_are(const float *v, int64_t n, float base)
{
    for (int64_t i = 0; i < n; i++)
        if (v[i] != base + (float)i)
            return 0;
    return 1;
}

/* ---- tests ------------------------------------------------------------------- */

static void test_construction_needs_the_hooks(void)
{
    binding b = {.mu = PTHREAD_MUTEX_INITIALIZER};
    sw_error err;
    sw_carrier *p = cpu_values(4, 1), *s = binding_new(&b, 4, 0), *e = NULL;
    /* No hooks: refused, nothing claimed. */
    CHECK_EQ_I64(sw_evictable_new(p, s, NULL, &e, &err), SW_ENOTSUP);
    CHECK(strstr(err.msg, "BindingCarrier") != NULL);
    sw_evictable_options only_size = {.size = b_size, .user = &b};
    CHECK_EQ_I64(sw_evictable_new(p, s, &only_size, &e, &err), SW_ENOTSUP);
    CHECK(!sw_carrier_is_owned(p) && !sw_carrier_is_owned(s));
    /* A binding primary of size 0 is empty (check 8, from the size hook). */
    sw_carrier *z = binding_new(&b, 0, 0);
    sw_evictable_options o = hooks(&b);
    CHECK_EQ_I64(sw_evictable_new(z, p, &o, &e, &err), SW_EINVAL);
    CHECK(!sw_carrier_is_owned(z) && !sw_carrier_is_owned(p));
    /* With the hooks: the binding's size and dtype. */
    sw_carrier *bp = binding_new(&b, 6, 0);
    CHECK_EQ_I64(sw_evictable_new(bp, s, &o, &e, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_size(e), 6);
    CHECK_EQ_I64(sw_carrier_dtype(e), SW_DT_FLOAT32);
    CHECK(sw_carrier_is_owned(bp) && sw_carrier_is_owned(s));
    /* Its slots are the binding's: the core refuses to reach them. */
    float x;
    CHECK_EQ_I64(sw_carrier_read(e, 0, 1, &x, &err), SW_ENOTSUP);
    sw_carrier_unref(e); /* the last reference only relinquishes */
    CHECK(!sw_carrier_is_owned(bp) && !sw_carrier_is_released(bp));
    sw_carrier_unref(p);
    binding_free(&b);
}

static void test_transitions_run_the_binding_move(void)
{
    binding b = {.mu = PTHREAD_MUTEX_INITIALIZER};
    sw_error err;
    sw_carrier *p = cpu_values(8, 5), *s = binding_new(&b, 8, 0), *e = NULL;
    sw_evictable_options o = hooks(&b);
    CHECK_EQ_I64(sw_evictable_new(p, s, &o, &e, &err), SW_OK);
    b.ev = e;
    uint64_t v = sw_carrier_version(e);
    CHECK_EQ_I64(sw_evictable_evict(e, &err), SW_OK);
    CHECK_EQ_I64(b.moves, 1);
    CHECK(b.saw_pending && b.saw_access && b.saw_write_refused);
    CHECK(sw_evictable_is_evicted(e));
    CHECK(sw_carrier_is_released(p));
    CHECK(floats_are(slot_of(&b, s)->v, 8, 5));
    CHECK_EQ_I64(b.factories, 0); /* big enough: reused */
    /* The tier and the claim token a binding needs for owner access. */
    sw_carrier *t = NULL;
    uint64_t tok = 0;
    CHECK_EQ_I64(sw_evictable_tier(e, 0, &t, &tok, &err), SW_OK);
    CHECK(t == s && tok != 0);
    CHECK_EQ_I64(sw_carrier_begin_owner_access(t, tok, &err), SW_OK);
    CHECK(sw_carrier_has_owner_access(t));
    CHECK_EQ_I64(sw_carrier_end_owner_access(t, tok, &err), SW_OK);
    sw_carrier_unref(t);
    CHECK_EQ_I64(sw_evictable_tier(p, 0, &t, &tok, &err), SW_ETYPE);
    /* Promote: the released CPU primary is replaced by a fresh CPU carrier
     * (the factory hands CPU prototypes on); the old one is discarded. */
    CHECK_EQ_I64(sw_evictable_promote(e, &err), SW_OK);
    CHECK_EQ_I64(b.moves, 2);
    CHECK(!sw_evictable_is_evicted(e));
    CHECK(sw_carrier_is_released(s));
    sw_carrier *np = sw_evictable_primary(e);
    CHECK(np != p && sw_carrier_class_of(np) == &sw_cpu_class);
    CHECK(floats_are(sw_cpu_pointer(np), 8, 5));
    CHECK_EQ_I64(b.discards, 1);
    CHECK(b.saw_discard_access);
    CHECK(!sw_carrier_is_owned(p)); /* relinquished */
    CHECK_EQ_I64(sw_carrier_version(e), v); /* transitions keep the version */
    sw_carrier_unref(np);
    /* Evict again: the released binding secondary is replaced through the
     * binding's factory, the old one discarded. */
    CHECK_EQ_I64(sw_evictable_evict(e, &err), SW_OK);
    CHECK_EQ_I64(b.factories, 1);
    CHECK_EQ_I64(b.discards, 2);
    sw_carrier *ns = sw_evictable_secondary(e);
    CHECK(ns != s && slot_of(&b, ns) && floats_are(slot_of(&b, ns)->v, 8, 5));
    CHECK(sw_carrier_is_owned(ns) && !sw_carrier_is_owned(s));
    /* Release: both tiers' state released, no hook called. */
    int discards = b.discards, moves = b.moves;
    CHECK_EQ_I64(sw_carrier_release(e, &err), SW_OK);
    CHECK(sw_carrier_is_released(ns));
    CHECK_EQ_I64(b.discards, discards);
    CHECK_EQ_I64(b.moves, moves);
    sw_carrier_unref(ns);
    sw_carrier_unref(e);
    sw_carrier_unref(p);
    binding_free(&b);
}

static void test_failing_binding_move_changes_nothing(void)
{
    binding b = {.mu = PTHREAD_MUTEX_INITIALIZER};
    sw_error err;
    /* A secondary too small: every evict makes a fresh one. */
    sw_carrier *p = cpu_values(6, 2), *s = binding_new(&b, 2, 0), *e = NULL;
    sw_evictable_options o = hooks(&b);
    CHECK_EQ_I64(sw_evictable_new(p, s, &o, &e, &err), SW_OK);
    b.ev = e;
    uint64_t v = sw_carrier_version(e), pv = sw_carrier_version(p);
    b.fail_next_move = 1;
    CHECK_EQ_I64(sw_evictable_evict(e, &err), SW_EIO);
    CHECK(strstr(err.msg, "the copy failed") != NULL);
    CHECK(!sw_evictable_is_evicted(e) && !sw_carrier_is_pending(e));
    sw_carrier *cur = sw_evictable_secondary(e);
    CHECK(cur == s);
    sw_carrier_unref(cur);
    CHECK(!sw_carrier_is_released(p) && !sw_carrier_is_released(s));
    CHECK_EQ_I64(sw_carrier_version(e), v);
    CHECK_EQ_I64(sw_carrier_version(p), pv);
    CHECK_EQ_I64(b.factories, 1);
    CHECK_EQ_I64(b.discards, 1); /* the fresh tier went */
    CHECK(sw_carrier_is_released(b.tiers[1].h) && !sw_carrier_is_owned(b.tiers[1].h));
    CHECK(floats_are(sw_cpu_pointer(p), 6, 2));
    /* The retry works. */
    CHECK_EQ_I64(sw_evictable_evict(e, &err), SW_OK);
    CHECK(sw_evictable_is_evicted(e) && sw_carrier_is_released(s));
    sw_carrier *ns = sw_evictable_secondary(e);
    CHECK(slot_of(&b, ns) && floats_are(slot_of(&b, ns)->v, 6, 2));
    sw_carrier_unref(ns);
    sw_carrier_release(e, &err);
    sw_carrier_unref(e);
    sw_carrier_unref(p);
    binding_free(&b);
}

static void test_hook_hands_builtin_pairs_to_the_core(void)
{
    binding b = {.mu = PTHREAD_MUTEX_INITIALIZER};
    sw_error err;
    sw_carrier *p = cpu_values(16, 7), *s = NULL, *e = NULL;
    CHECK_EQ_I64(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &s, &err), SW_OK);
    sw_evictable_options o = hooks(&b);
    b.hand_on = 1;
    CHECK_EQ_I64(sw_evictable_new(p, s, &o, &e, &err), SW_OK);
    b.ev = e;
    CHECK_EQ_I64(sw_evictable_evict(e, &err), SW_OK);
    CHECK_EQ_I64(sw_evictable_promote(e, &err), SW_OK);
    CHECK_EQ_I64(b.core_moves_handed_on, 2);
    float buf[16];
    CHECK_EQ_I64(sw_carrier_read(e, 0, 16, buf, &err), SW_OK);
    CHECK(floats_are(buf, 16, 7));
    CHECK_EQ_I64(b.sizes, 0); /* no STATE_ONLY tier: never asked */
    sw_carrier_release(e, &err);
    sw_carrier_unref(e);
    sw_carrier_unref(p);
    sw_carrier_unref(s);
}

/* Many threads: each runs evict/promote cycles over its own Evictable
 * with a binding secondary, and all of them race transitions on one shared
 * Evictable; a transition either works or is refused as pending (SW_ESTATE),
 * and the values survive every cycle. */
typedef struct racer {
    binding *b;
    sw_carrier *shared;
    int own_ok, shared_ok, shared_refused, other;
} racer;

static void *race_main(void *arg)
{
    racer *r = arg;
    sw_error err;
    sw_carrier *p = cpu_values(32, 9), *e = NULL;
    sw_carrier *s = binding_new(r->b, 32, 0);
    sw_evictable_options o = hooks(r->b);
    if (!p || !s || sw_evictable_new(p, s, &o, &e, &err) != SW_OK) {
        r->other++;
        sw_carrier_unref(p);
        return NULL;
    }
    for (int i = 0; i < 20; i++) {
        sw_status a = sw_evictable_evict(e, &err), c = sw_evictable_promote(e, &err);
        r->own_ok += a == SW_OK && c == SW_OK;
        for (int k = 0; k < 2; k++) {
            sw_status st = k ? sw_evictable_promote(r->shared, &err)
                             : sw_evictable_evict(r->shared, &err);
            if (st == SW_OK)
                r->shared_ok++;
            else if (st == SW_ESTATE && strstr(err.msg, "pending"))
                r->shared_refused++;
            else
                r->other++;
        }
    }
    float buf[32];
    if (sw_carrier_read(e, 0, 32, buf, &err) != SW_OK || !floats_are(buf, 32, 9))
        r->other++;
    sw_carrier_release(e, &err);
    sw_carrier_unref(e);
    sw_carrier_unref(p);
    return NULL;
}

static void test_many_threads_over_binding_tiers(void)
{
    binding b = {.mu = PTHREAD_MUTEX_INITIALIZER};
    sw_error err;
    sw_carrier *p = cpu_values(16, 4), *s = binding_new(&b, 16, 0), *e = NULL;
    sw_evictable_options o = hooks(&b);
    CHECK_EQ_I64(sw_evictable_new(p, s, &o, &e, &err), SW_OK);
    b.threaded = 1; /* the hooks' counters stay off: threads share b */
    enum { N = 6 };
    racer rs[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        rs[i] = (racer){.b = &b, .shared = e};
        pthread_create(&th[i], NULL, race_main, &rs[i]);
    }
    int own = 0, shared = 0, other = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        own += rs[i].own_ok;
        shared += rs[i].shared_ok + rs[i].shared_refused;
        other += rs[i].other;
    }
    CHECK_EQ_I64(own, N * 20);
    CHECK_EQ_I64(shared, N * 40);
    CHECK_EQ_I64(other, 0);
    CHECK(!sw_carrier_is_pending(e));
    CHECK_EQ_I64(sw_evictable_promote(e, &err), SW_OK);
    float buf[16];
    CHECK_EQ_I64(sw_carrier_read(e, 0, 16, buf, &err), SW_OK);
    CHECK(floats_are(buf, 16, 4));
    sw_carrier_release(e, &err);
    sw_carrier_unref(e);
    sw_carrier_unref(p);
    binding_free(&b);
}

int main(void)
{
    test_construction_needs_the_hooks();
    test_transitions_run_the_binding_move();
    test_failing_binding_move_changes_nothing();
    test_hook_hands_builtin_pairs_to_the_core();
    test_many_threads_over_binding_tiers();
    return check_report("evictable_binding");
}
