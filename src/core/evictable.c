/* Evictable (evictable.h): a state machine over two claimed tiers. The
 * Evictable's own mutex (self->lock) guards `evicted`, the tier pointers
 * and the tokens; a transition marks the Evictable pending like a move's
 * source (so writes, release, claims, moves and other transitions are
 * refused while it runs, reads still work), moves the values with an
 * ordinary move, and installs the result under the mutex. Lock order: the
 * Evictable's mutex, then a tier's. Slot I/O goes straight to the tier's
 * ops under the tier's mutex: the Evictable owns the tiers, so it needs no
 * thread-bound owner access for that; owner access is taken only around
 * sw_move_async and release, which check it. */
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include "carrier_internal.h"
#include "checks_internal.h"
#include "fork_internal.h"
#include "route_internal.h"
#include "strideweave/alloc.h"
#include "strideweave/block_device.h"
#include "strideweave/evictable.h"
#include "strideweave/move.h"
#include "strideweave/tensor.h"

SW_FORK_LINKED;

typedef struct ev_impl ev_impl;
struct ev_impl {
    ev_impl *reg_prev, *reg_next;    /* every live Evictable, under reg_lock */
    int fork_locked;                 /* the fork prepare step holds self->lock */
    sw_carrier *self;                /* back pointer, no reference */
    sw_carrier *primary, *secondary; /* one reference each */
    uint64_t primary_token;          /* 0 once relinquished */
    uint64_t secondary_token;
    int64_t nslots;
    int evicted;
    int released_live;               /* the tiers the Evictable's release released */
    sw_evictable_options options;
};

static void register_evictable(ev_impl *e);
static void unregister_evictable(ev_impl *e);

static ev_impl *impl_of(sw_carrier *c)
{
    return c && c->ops == &sw_evictable_class ? c->impl : NULL;
}

/* carrier_internal.h: an Evictable's STATE_ONLY primary and its token. */
sw_carrier *sw_evictable_binding_primary(sw_carrier *c, uint64_t *token)
{
    ev_impl *e = impl_of(c);
    if (!e)
        return NULL;
    pthread_mutex_lock(&c->lock);
    sw_carrier *p = e->primary && SW_CARRIER_STATE_ONLY(e->primary) ? sw_carrier_ref(e->primary)
                                                                    : NULL;
    *token = e->primary_token;
    pthread_mutex_unlock(&c->lock);
    return p;
}

static const char evicted_words[] =
    "this Evictable is evicted: call promote() before reading or writing its slots";

static sw_status refuse_evicted(sw_error *err)
{
    return sw_error_set(err, SW_ESTATE, "%s", evicted_words);
}

/* ---- carrier ops ------------------------------------------------------------ */

static int64_t ev_size(void *impl)
{
    return ((ev_impl *)impl)->nslots;
}

/* Slot I/O on the primary, under its mutex. A primary released meanwhile
 * means an evict's move has just committed: the values are gone from it. */
static sw_status primary_io(ev_impl *e, int writing, int64_t slot, int64_t count, void *buf,
                            sw_error *err)
{
    if (e->evicted)
        return refuse_evicted(err);
    sw_carrier *p = e->primary;
    if (SW_CARRIER_STATE_ONLY(p))
        return sw_carrier_refuse_state_only(p, "be read or written through its Evictable", err);
    pthread_mutex_lock(&p->lock);
    sw_status st;
    if (p->released)
        st = refuse_evicted(err);
    else if (slot + count > p->ops->size(p->impl))
        st = sw_error_set(err, SW_ERANGE, "Evictable: the primary %s carrier has only %lld slots",
                          sw_carrier_name(p), (long long)p->ops->size(p->impl));
    else if (!writing)
        st = p->ops->read(p->impl, slot, count, buf, err);
    else if ((st = p->ops->write(p->impl, slot, count, buf, err)) == SW_OK &&
             !e->self->pending_dst)
        p->version++; /* a slot write to the Evictable writes its primary; a
                       * move into the Evictable changes no version */
    pthread_mutex_unlock(&p->lock);
    return st;
}

/* Slot access refuses an evicted Evictable before its other rules
 * (carrier.h: `unavailable`); `evicted` is guarded by the carrier's
 * mutex, which the core holds here. */
static const char *ev_unavailable(void *impl)
{
    return ((ev_impl *)impl)->evicted ? evicted_words : NULL;
}

static sw_status ev_read(void *impl, int64_t slot, int64_t count, void *out, sw_error *err)
{
    return primary_io(impl, 0, slot, count, out, err);
}

static sw_status ev_write(void *impl, int64_t slot, int64_t count, const void *in,
                          sw_error *err)
{
    return primary_io(impl, 1, slot, count, (void *)in, err);
}

/* Release a claimed tier through owner access, then give the claim back. */
static void release_claimed(sw_carrier *tier, uint64_t *token)
{
    if (!*token)
        return;
    if (sw_carrier_begin_owner_access(tier, *token, NULL) == SW_OK) {
        (void)sw_carrier_release(tier, NULL);
        (void)sw_carrier_end_owner_access(tier, *token, NULL);
    }
    (void)sw_carrier_relinquish(tier, *token, NULL);
    *token = 0;
}

static void relinquish(sw_carrier *tier, uint64_t *token)
{
    if (*token)
        (void)sw_carrier_relinquish(tier, *token, NULL);
    *token = 0;
}

/* The tiers no move or release has released (sw_evictable_live_tiers). */
static int live_tiers(ev_impl *e)
{
    return (sw_carrier_is_released(e->primary) ? 0 : SW_EVICTABLE_PRIMARY_LIVE) |
           (sw_carrier_is_released(e->secondary) ? 0 : SW_EVICTABLE_SECONDARY_LIVE);
}

/* sw_carrier_release (the released flag is set) releases both tiers; the
 * last reference to an unreleased Evictable only relinquishes them. */
static void ev_release(void *impl)
{
    ev_impl *e = impl;
    if (e->self->released) {
        e->released_live = live_tiers(e); /* sw_evictable_live_tiers from now on */
        release_claimed(e->primary, &e->primary_token);
        release_claimed(e->secondary, &e->secondary_token);
    } else {
        relinquish(e->primary, &e->primary_token);
        relinquish(e->secondary, &e->secondary_token);
    }
}

static void ev_destroy(void *impl)
{
    ev_impl *e = impl;
    unregister_evictable(e);
    relinquish(e->primary, &e->primary_token);
    relinquish(e->secondary, &e->secondary_token);
    sw_carrier_unref(e->primary);
    sw_carrier_unref(e->secondary);
    sw_free(e);
}

const sw_carrier_class sw_evictable_class = {
    .name = "Evictable",
    .size = ev_size,
    .read = ev_read,
    .write = ev_write,
    .release = ev_release,
    .destroy = ev_destroy,
    .flags = SW_CARRIER_CLASS_RELEASE_REMOVES_FILES,
    .unavailable = ev_unavailable,
};

/* ---- construction ----------------------------------------------------------- */

/* Slots of a tier: a STATE_ONLY one asks the binding's size hook (no lock
 * held), any other its class. */
static sw_status tier_size(sw_carrier *t, const sw_evictable_options *o, int64_t *out,
                           sw_error *err)
{
    if (!SW_CARRIER_STATE_ONLY(t)) {
        *out = sw_carrier_size(t);
        return SW_OK;
    }
    if (!o || !o->size)
        return sw_error_set(err, SW_ENOTSUP,
                            "Evictable: the %s carrier keeps its slots in a binding, which "
                            "gave no size hook",
                            sw_carrier_name(t));
    return o->size(t, o->user, out, err);
}

static sw_status check_tiers(sw_carrier *p, sw_carrier *s, const sw_evictable_options *o,
                             int64_t *n, sw_error *err)
{
    if (!p)
        return sw_error_set(err, SW_ETYPE, "Evictable: primary must be a carrier, not NULL");
    if (!s)
        return sw_error_set(err, SW_ETYPE, "Evictable: secondary must be a carrier, not NULL");
    if (p->ops == &sw_block_device_carrier_class || s->ops == &sw_block_device_carrier_class)
        return sw_error_set(err, SW_ETYPE, "a BlockDeviceCarrier cannot be an Evictable tier");
    sw_status pair = sw_carrier_check_tier_pair(p, s, err);
    if (pair != SW_OK)
        return pair;
    sw_carrier *tiers[2] = {p, s};
    /* Check 10's usual refusal, before the tier hooks below run */
    for (int i = 0; i < 2; i++)
        if (sw_carrier_is_pending(tiers[i]))
            return sw_error_set(err, SW_ESTATE,
                                "cannot claim a %s carrier that is pending in a move",
                                sw_carrier_name(tiers[i]));
    int binding = SW_CARRIER_STATE_ONLY(p) || SW_CARRIER_STATE_ONLY(s);
    if (binding && (!o || !o->move || !o->size))
        return sw_error_set(err, SW_ENOTSUP,
                            "Evictable: the %s carrier keeps its slots in a binding, which "
                            "gave no tier move and size hooks",
                            sw_carrier_name(SW_CARRIER_STATE_ONLY(p) ? p : s));
    if (!binding && p->dtype != s->dtype)
        return sw_error_set(err, SW_ETYPE, "Evictable: the tiers hold different dtypes (%s and %s)",
                            sw_dtype_info_of(p->dtype)->name, sw_dtype_info_of(s->dtype)->name);
    if (!sw_carrier_is_mutable(s))
        return sw_error_set(err, SW_ESTATE, "the secondary %s carrier is not mutable",
                            sw_carrier_name(s));
    sw_status st = tier_size(p, o, n, err);
    if (st != SW_OK)
        return st;
    if (*n == 0)
        return sw_error_set(err, SW_EINVAL, "the primary carrier is empty (size 0)");
    if (o && o->move)
        return SW_OK; /* check 9 is the binding's */
    if (!sw_move_pair_allowed(p->ops, s->ops) || !sw_move_pair_allowed(s->ops, p->ops))
        return sw_error_set(err, SW_ENOTSUP,
                            "Evictable: an Evictable needs moves both ways between its tiers, "
                            "and %s and %s cannot move into each other",
                            sw_carrier_name(p), sw_carrier_name(s));
    return SW_OK;
}

sw_status sw_evictable_new(sw_carrier *primary, sw_carrier *secondary,
                           const sw_evictable_options *options, sw_carrier **out, sw_error *err)
{
    if (!out)
        return sw_error_set(err, SW_EINVAL, "Evictable: out must not be NULL");
    int64_t n = 0;
    sw_status st = check_tiers(primary, secondary, options, &n, err);
    if (st != SW_OK)
        return st;
    int was_mutable = sw_carrier_is_mutable(primary);
    ev_impl *e = sw_calloc(1, sizeof *e);
    if (!e)
        return sw_error_set(err, SW_ENOMEM, "Evictable: out of memory");
    if (options)
        e->options = *options;
    e->nslots = n;
    /* Check 10: primary, then secondary; no claim survives a failure. */
    if ((st = sw_carrier_claim(primary, &e->primary_token, err)) != SW_OK) {
        sw_free(e);
        return st;
    }
    if ((st = sw_carrier_claim(secondary, &e->secondary_token, err)) != SW_OK) {
        sw_carrier_relinquish(primary, e->primary_token, NULL);
        sw_free(e);
        return st;
    }
    sw_dtype dtype = SW_CARRIER_STATE_ONLY(primary) ? options->dtype : primary->dtype;
    st = sw_carrier_new(&sw_evictable_class, e, dtype,
                        was_mutable ? 0 : SW_CARRIER_IMMUTABLE, out, err);
    if (st != SW_OK) {
        sw_carrier_relinquish(primary, e->primary_token, NULL);
        sw_carrier_relinquish(secondary, e->secondary_token, NULL);
        sw_free(e);
        return st;
    }
    e->self = *out;
    e->primary = sw_carrier_ref(primary);
    e->secondary = sw_carrier_ref(secondary);
    register_evictable(e);
    return SW_OK;
}

/* ---- fresh tiers ---------------------------------------------------------- */

sw_status sw_tier_allocate_like(sw_carrier *prototype, int64_t size, sw_dtype dtype,
                                sw_carrier **out, sw_error *err)
{
    if (!prototype)
        return sw_error_set(err, SW_ETYPE, "allocate_like: prototype must be a carrier, not NULL");
    sw_status checked = sw_check_out_and_size("allocate_like", out, size, err);
    if (checked != SW_OK)
        return checked;
    const sw_carrier_class *k = prototype->ops;
    if (k == &sw_cpu_class)
        return sw_cpu_new(size, dtype, SW_CARRIER_EMPTY, out, err);
    if (k == &sw_file_backed_class)
        return sw_file_backed_new(NULL, dtype, 0, out, err);
    if (k == &sw_generic_class)
        return sw_generic_new_zeroed(size, dtype, out, err);
    if (k == &sw_block_device_carrier_class)
        return sw_block_device_allocate(sw_block_device_of(prototype), size, dtype, 0, out, err);
    if (k == &sw_evictable_class) {
        ev_impl *e = prototype->impl;
        pthread_mutex_lock(&prototype->lock);
        sw_carrier *pp = sw_carrier_ref(e->primary), *sp = sw_carrier_ref(e->secondary);
        sw_evictable_options o = e->options;
        pthread_mutex_unlock(&prototype->lock);
        sw_carrier *p = NULL, *s = NULL;
        sw_status st = sw_tier_allocate_like(pp, size, dtype, &p, err);
        if (st == SW_OK)
            st = sw_tier_allocate_like(sp, 0, dtype, &s, err);
        if (st == SW_OK)
            st = sw_evictable_new(p, s, &o, out, err);
        if (st != SW_OK) {
            if (p)
                sw_carrier_release(p, NULL);
            if (s)
                sw_carrier_release(s, NULL);
        }
        sw_carrier_unref(p);
        sw_carrier_unref(s);
        sw_carrier_unref(pp);
        sw_carrier_unref(sp);
        return st;
    }
    return sw_error_set(err, SW_ENOTSUP,
                        "cannot make a fresh %s carrier like this one: pass a tier factory in "
                        "sw_evictable_options",
                        sw_carrier_name(prototype));
}

static sw_status make_fresh(ev_impl *e, sw_carrier *prototype, sw_carrier **out, sw_error *err)
{
    sw_status st = SW_ENOTSUP;
    *out = NULL;
    if (e->options.factory)
        st = e->options.factory(prototype, e->nslots, e->self->dtype, e->options.user, out, err);
    if (st == SW_ENOTSUP)
        st = sw_tier_allocate_like(prototype, e->nslots, e->self->dtype, out, err);
    if (st == SW_OK && !*out)
        st = sw_error_set(err, SW_ETYPE, "Evictable: the tier factory gave no carrier");
    return st;
}

/* ---- fork (evictable.h, "Fork") -------------------------------------------- */

/* Every transition from before it marks the Evictable pending until after
 * it cleared the mark, so that a forked child can end those another
 * thread of the parent was running (the child has none of those threads).
 * fork() takes reg_lock and the mutex of every live Evictable: the child
 * sees whole records (`marked`, `dst` and the tier fields change under
 * that mutex), and no mutex is left held by a thread the child lacks (a
 * reader, a release, a transition between its steps). The child handler
 * then ends each record of another thread inside fork() itself (it calls
 * no hook). */
typedef struct ev_track ev_track;
struct ev_track {
    ev_track *prev, *next;
    sw_carrier *self;  /* the Evictable, no reference */
    pthread_t thread;  /* the thread running the transition */
    int evict;
    int marked;        /* this transition set pending_src (under self->lock) */
    sw_carrier *dst;   /* the move's destination once known (under self->lock) */
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static ev_track reg_head = {.prev = &reg_head, .next = &reg_head};
static ev_impl live_head = {.reg_prev = &live_head, .reg_next = &live_head};

static void register_evictable(ev_impl *e)
{
    pthread_mutex_lock(&reg_lock);
    e->reg_next = live_head.reg_next;
    e->reg_prev = &live_head;
    live_head.reg_next->reg_prev = e;
    live_head.reg_next = e;
    pthread_mutex_unlock(&reg_lock);
}

static void unregister_evictable(ev_impl *e)
{
    /* Its links are read under the lock too: a neighbour unregistering at
     * the same time rewrites them (a data race under TSan otherwise). */
    pthread_mutex_lock(&reg_lock);
    if (e->reg_next) { /* else never registered: its construction failed */
        e->reg_prev->reg_next = e->reg_next;
        e->reg_next->reg_prev = e->reg_prev;
        e->reg_next = e->reg_prev = NULL;
    }
    pthread_mutex_unlock(&reg_lock);
}

/* The fork prepare step's patience: the first rounds only yield (a
 * holder between two steps of a read or a transition lets go within
 * microseconds), the later ones sleep half a millisecond, about a second
 * in all; after that it takes what is free (see sw_evictable_fork_prepare). */
enum { FORK_YIELD_ROUNDS = 100, FORK_WHOLE_ROUNDS = 2000 };

/* Let go of the live Evictables' mutexes taken before `stop` (in list
 * order), so that their holders-to-be are not kept waiting on a fork
 * that has to try again. */
static void unlock_live_before(ev_impl *stop)
{
    for (ev_impl *u = live_head.reg_next; u != stop; u = u->reg_next) {
        pthread_mutex_unlock(&u->self->lock);
        u->fork_locked = 0;
    }
}

/* With reg_lock held: take every live Evictable's mutex, or none (1 when
 * all were taken). Never waits on one: the locks are taken in list order
 * while other threads take them in nesting order (an Evictable before its
 * tiers, which may be Evictables), and a thread that holds one may be
 * waiting for reg_lock (its last reference going); waiting here could
 * deadlock with either. */
static int try_lock_every_live(void)
{
    for (ev_impl *e = live_head.reg_next; e != &live_head; e = e->reg_next) {
        e->fork_locked = pthread_mutex_trylock(&e->self->lock) == 0;
        if (!e->fork_locked) {
            unlock_live_before(e);
            return 0;
        }
    }
    return 1;
}

/* With reg_lock held: take the mutexes that are free and leave the rest
 * (fork_locked tells which); the child makes those fresh (unlock_live). */
static void lock_free_live(void)
{
    for (ev_impl *e = live_head.reg_next; e != &live_head; e = e->reg_next)
        e->fork_locked = pthread_mutex_trylock(&e->self->lock) == 0;
}

/* Between two rounds, with no lock held, so that the holders can finish. */
static void wait_before_round(int round)
{
    if (round < FORK_YIELD_ROUNDS)
        sched_yield();
    else
        nanosleep(&(struct timespec){.tv_nsec = 500000}, NULL);
}

/* Take reg_lock and every live Evictable's mutex, so that the child finds
 * no mutex held by a thread it lacks and every record whole. A mutex
 * still held after about a second (its holder waits on something another
 * fork handler took first, or on the forking thread) is left: the child
 * makes it and its tiers' mutexes fresh, which is all the child can do
 * for a thread it lacks, and a fork that never returned would be worse. */
void sw_evictable_fork_prepare(void)
{
    for (int round = 0; round < FORK_WHOLE_ROUNDS; round++) {
        pthread_mutex_lock(&reg_lock);
        if (try_lock_every_live())
            return;
        pthread_mutex_unlock(&reg_lock);
        wait_before_round(round);
    }
    pthread_mutex_lock(&reg_lock);
    lock_free_live();
}

/* A mutex the prepare step could not take is held by a thread the child
 * lacks, which will never let it go: the child makes it fresh, and its
 * tiers' too (its holder may be inside one of them). */
static void make_fresh_in_child(ev_impl *e)
{
    pthread_mutex_init(&e->self->lock, NULL);
    pthread_mutex_init(&e->primary->lock, NULL);
    pthread_mutex_init(&e->secondary->lock, NULL);
}

/* The parent unlocks what prepare took; the child (whose only thread is
 * the one that forked) too, and makes any other mutex fresh. */
static void unlock_live(int child)
{
    for (ev_impl *e = live_head.reg_next; e != &live_head; e = e->reg_next) {
        if (e->fork_locked)
            pthread_mutex_unlock(&e->self->lock);
        else if (child)
            make_fresh_in_child(e);
        e->fork_locked = 0;
    }
}

void sw_evictable_fork_parent(void)
{
    unlock_live(0);
    pthread_mutex_unlock(&reg_lock);
}

/* A tier a thread the child lacks may have held locked or accessed: its
 * mutex is made fresh (the forking thread holds no tier mutex across
 * fork()) and that thread's access goes. */
static void tier_after_fork(sw_carrier *c)
{
    if (!c)
        return;
    pthread_mutex_init(&c->lock, NULL);
    sw_carrier_drop_inherited_access(c);
}

/* One transition of a thread the child lacks. Its move (the core's
 * engine) is an inherited move (move.h, "Fork"); a binding's move hook
 * is simply gone. When that move had committed (it released the tier it
 * read), the values are in its destination: the child installs them as
 * the transition would have. Otherwise nothing changes but the mark. A
 * fresh destination is forgotten, never released (it may be half made,
 * and a FileBacked file belongs to the parent's session); so is a tier
 * the install replaces. */
static void end_inherited(ev_track *t)
{
    sw_carrier *self = t->self;
    ev_impl *e = self->impl;
    sw_carrier *from = t->evict ? e->primary : e->secondary;
    sw_carrier **to = t->evict ? &e->secondary : &e->primary;
    uint64_t *to_token = t->evict ? &e->secondary_token : &e->primary_token;
    tier_after_fork(e->primary);
    tier_after_fork(e->secondary);
    if (t->dst != *to)
        tier_after_fork(t->dst);
    if (!t->marked)
        return;
    if (t->dst && from->released && !from->pending_src && !t->dst->pending_dst) {
        if (t->dst != *to) {
            uint64_t token = 0;
            if (sw_carrier_claim(t->dst, &token, NULL) == SW_OK) {
                *to = t->dst; /* the reference the transition held */
                *to_token = token;
                t->dst = NULL;
            }
        }
        if (*to == t->dst || !t->dst)
            e->evicted = t->evict;
    }
    self->pending_src = 0;
}

/* The child ends every transition another thread of the parent was
 * running: that thread is not in the child, so nothing else would. The
 * forking thread's own transition goes on (fork() was called from one of
 * its hooks). */
static void end_transitions_of_other_threads(void)
{
    pthread_t me = pthread_self();
    for (ev_track *t = reg_head.next, *next; t != &reg_head; t = next) {
        next = t->next;
        if (pthread_equal(t->thread, me))
            continue;
        t->prev->next = t->next;
        t->next->prev = t->prev;
        t->next = t->prev = t;
        end_inherited(t);
    }
}

void sw_evictable_fork_child(void)
{
    unlock_live(1);
    end_transitions_of_other_threads();
    /* The forking thread took reg_lock in prepare (every path there ends
     * holding it) and is the child's only thread: it unlocks, as the
     * parent does. Re-initializing by assignment instead left ThreadSanitizer
     * seeing it held in the child (a false lock-order report). */
    pthread_mutex_unlock(&reg_lock);
}

static void track_enter(ev_track *t, sw_carrier *self, int evict)
{
    *t = (ev_track){.self = self, .thread = pthread_self(), .evict = evict};
    pthread_mutex_lock(&reg_lock);
    t->next = reg_head.next;
    t->prev = &reg_head;
    reg_head.next->prev = t;
    reg_head.next = t;
    pthread_mutex_unlock(&reg_lock);
}

static void track_leave(ev_track *t)
{
    pthread_mutex_lock(&reg_lock);
    t->prev->next = t->next;
    t->next->prev = t->prev;
    t->next = t->prev = t;
    pthread_mutex_unlock(&reg_lock);
}

static void track_dst(sw_carrier *self, ev_track *t, sw_carrier *dst)
{
    pthread_mutex_lock(&self->lock);
    t->dst = dst;
    pthread_mutex_unlock(&self->lock);
}

/* ---- transitions ------------------------------------------------------------ */

/* The tier move: the binding's hook first (SW_ENOTSUP hands it on), then
 * the core's move, with owner access to the claimed tiers on this thread
 * while it is submitted; the core's move is waited for after, at once, so
 * it is made as one its caller waits for (a small one copies here, with no
 * pool round trip, and its stores are not streamed past the caches). */
static sw_status move_tier(ev_impl *e, sw_carrier *from, uint64_t from_token, sw_carrier *dst,
                           uint64_t dst_token, sw_error *err)
{
    sw_status st = sw_carrier_begin_owner_access(from, from_token, err);
    if (st != SW_OK)
        return st;
    if (dst_token && (st = sw_carrier_begin_owner_access(dst, dst_token, err)) != SW_OK) {
        sw_carrier_end_owner_access(from, from_token, NULL);
        return st;
    }
    st = SW_ENOTSUP;
    if (e->options.move)
        st = e->options.move(from, dst, e->nslots, e->options.user, err);
    sw_move_handle *m = NULL;
    int hooked = st != SW_ENOTSUP;
    if (!hooked) {
        int64_t ext[1] = {e->nslots};
        sw_tensor *t = NULL;
        if (SW_CARRIER_STATE_ONLY(from) || SW_CARRIER_STATE_ONLY(dst))
            st = sw_carrier_refuse_state_only(SW_CARRIER_STATE_ONLY(from) ? from : dst,
                                              "be moved by the core's engine", err);
        else if ((st = sw_tensor_new_strided(from, 0, 1, ext, NULL, &t, err)) == SW_OK)
            st = sw_move_async(t, dst, &(sw_move_options){.caller_waits = 1}, &m, err);
        sw_tensor_unref(t);
    }
    if (dst_token)
        sw_carrier_end_owner_access(dst, dst_token, NULL);
    sw_carrier_end_owner_access(from, from_token, NULL);
    if (hooked || st != SW_OK)
        return st;
    sw_tensor *moved = NULL;
    st = sw_move_wait(m, &moved, err);
    sw_move_unref(m);
    if (st == SW_OK && sw_tensor_carrier(moved) != dst)
        st = sw_error_set(err, SW_ESTATE, "Evictable: the tier move did not land on its "
                          "destination");
    sw_tensor_unref(moved);
    return st;
}

/* Give up a tier after a transition: the binding's discard hook (with
 * owner access when it is claimed), then the core's release (a no-op once
 * the hook released it), then the claim. */
static void give_up(ev_impl *e, sw_carrier *tier, uint64_t *token)
{
    if (e->options.discard) {
        int access = *token && sw_carrier_begin_owner_access(tier, *token, NULL) == SW_OK;
        e->options.discard(tier, e->options.user);
        if (access)
            (void)sw_carrier_end_owner_access(tier, *token, NULL);
    }
    if (*token)
        release_claimed(tier, token);
    else
        (void)sw_carrier_release(tier, NULL);
}

static sw_status transition_tracked(sw_carrier *self, ev_impl *e, int evict, ev_track *track,
                                    sw_error *err);

static sw_status transition(sw_carrier *self, int evict, sw_error *err)
{
    ev_impl *e = impl_of(self);
    const char *what = evict ? "evict" : "promote";
    if (!e)
        return sw_error_set(err, SW_ETYPE, "%s: the carrier is not an Evictable (%s)", what,
                            self ? sw_carrier_name(self) : "NULL");
    ev_track track;
    track_enter(&track, self, evict);
    sw_status st = transition_tracked(self, e, evict, &track, err);
    track_leave(&track);
    return st;
}

static sw_status transition_tracked(sw_carrier *self, ev_impl *e, int evict, ev_track *track,
                                    sw_error *err)
{
    const char *what = evict ? "evict" : "promote";
    sw_status st = SW_OK;
    pthread_mutex_lock(&self->lock);
    if (sw_carrier_owned_blocks_locked(self))
        st = sw_error_set(err, SW_ESTATE,
                          "cannot %s an Evictable owned by a composite carrier without owner "
                          "access",
                          what);
    else if (self->released)
        st = sw_error_set(err, SW_ESTATE, "cannot %s a released Evictable", what);
    else if (self->pending_src || self->pending_dst)
        st = sw_error_set(err, SW_ESTATE,
                          "cannot %s an Evictable that is pending in a move", what);
    else if (e->evicted == evict) {
        pthread_mutex_unlock(&self->lock);
        return SW_OK;
    } else {
        self->pending_src = 1; /* this transition runs: see the top of the file */
        track->marked = 1;
    }
    pthread_mutex_unlock(&self->lock);
    if (st != SW_OK)
        return st;

    /* Only this transition changes the tier fields until it clears the
     * mark, so they can be read here without the mutex. */
    sw_carrier *from = evict ? e->primary : e->secondary;
    sw_carrier *to = evict ? e->secondary : e->primary;
    uint64_t from_token = evict ? e->primary_token : e->secondary_token;
    uint64_t to_token = evict ? e->secondary_token : e->primary_token;

    int64_t to_size = 0;
    int fresh = sw_carrier_is_released(to);
    if (!fresh && (st = tier_size(to, &e->options, &to_size, err)) == SW_OK)
        fresh = to_size < e->nslots;
    sw_carrier *dst = NULL;
    if (st != SW_OK)
        ;
    else if (fresh)
        st = make_fresh(e, to, &dst, err);
    else
        dst = sw_carrier_ref(to);
    if (st == SW_OK) {
        track_dst(self, track, dst);
        st = move_tier(e, from, from_token, dst, fresh ? 0 : to_token, err);
    }
    uint64_t token = 0;
    if (st == SW_OK && fresh && sw_carrier_claim(dst, &token, NULL) != SW_OK)
        token = 0; /* cannot happen for a carrier nobody else holds */
    if (st != SW_OK) {
        if (fresh && dst)
            give_up(e, dst, &token);
        sw_carrier_unref(dst);
        pthread_mutex_lock(&self->lock);
        self->pending_src = 0;
        track->marked = 0;
        track->dst = NULL;
        pthread_mutex_unlock(&self->lock);
        return st;
    }
    /* The move released `from`. A replaced target goes for good. */
    if (fresh)
        give_up(e, to, &to_token);
    pthread_mutex_lock(&self->lock);
    if (fresh) {
        if (evict) {
            e->secondary = dst;
            e->secondary_token = token;
        } else {
            e->primary = dst;
            e->primary_token = token;
        }
    }
    e->evicted = evict;
    self->pending_src = 0;
    track->marked = 0;
    track->dst = NULL;
    pthread_mutex_unlock(&self->lock);
    if (fresh)
        sw_carrier_unref(to); /* the reference the Evictable held */
    else
        sw_carrier_unref(dst);
    return SW_OK;
}

sw_status sw_evictable_evict(sw_carrier *e, sw_error *err) { return transition(e, 1, err); }
sw_status sw_evictable_promote(sw_carrier *e, sw_error *err) { return transition(e, 0, err); }

int sw_evictable_is_evicted(sw_carrier *c)
{
    ev_impl *e = impl_of(c);
    if (!e)
        return 0;
    pthread_mutex_lock(&c->lock);
    int v = e->evicted;
    pthread_mutex_unlock(&c->lock);
    return v;
}

/* The Evictable's mutex keeps a transition from installing its result
 * between the two tiers' answers. */
int sw_evictable_live_tiers(sw_carrier *c)
{
    ev_impl *e = impl_of(c);
    if (!e)
        return 0;
    pthread_mutex_lock(&c->lock);
    int live = c->released ? e->released_live : live_tiers(e);
    pthread_mutex_unlock(&c->lock);
    return live;
}

static sw_carrier *tier(sw_carrier *c, int primary)
{
    ev_impl *e = impl_of(c);
    if (!e)
        return NULL;
    pthread_mutex_lock(&c->lock);
    sw_carrier *t = sw_carrier_ref(primary ? e->primary : e->secondary);
    pthread_mutex_unlock(&c->lock);
    return t;
}

sw_carrier *sw_evictable_primary(sw_carrier *c) { return tier(c, 1); }
sw_carrier *sw_evictable_secondary(sw_carrier *c) { return tier(c, 0); }

sw_status sw_evictable_tier(sw_carrier *c, int primary, sw_carrier **tier, uint64_t *token,
                            sw_error *err)
{
    ev_impl *e = impl_of(c);
    if (!e)
        return sw_error_set(err, SW_ETYPE, "the carrier is not an Evictable (%s)",
                            c ? sw_carrier_name(c) : "NULL");
    if (!tier || !token)
        return sw_error_set(err, SW_EINVAL, "Evictable: tier and token must not be NULL");
    pthread_mutex_lock(&c->lock);
    *tier = sw_carrier_ref(primary ? e->primary : e->secondary);
    *token = primary ? e->primary_token : e->secondary_token;
    pthread_mutex_unlock(&c->lock);
    return SW_OK;
}
