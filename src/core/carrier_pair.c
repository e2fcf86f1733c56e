/* A binding's copy between two carriers, protected by the core
 * (binding.h, sw_carrier_pair_begin): the refusal, the pending marks and
 * the transfer access in one step under both carriers' locks, and their end
 * in a forked child. Before it a binding checked and marked in two steps
 * that only its own lock (CPython's GIL) kept together, and kept a fork
 * list of its own. */
#include "carrier_internal.h"

#include <string.h>

#include "fork_internal.h"
#include "strideweave/binding.h"

/* The core's part of the caller's struct: its place on the list of pairs
 * a forked child ends, and the thread that began it. */
typedef struct pair_core {
    sw_carrier_pair *prev, *next;
    pthread_t thread;
    intptr_t state; /* PAIR_* bits */
} pair_core;
_Static_assert(sizeof(pair_core) <= sizeof(((sw_carrier_pair *)0)->core_),
               "the core's part fits the public struct");

#define CORE(p) ((pair_core *)(void *)(p)->core_)
enum {
    PAIR_LINKED = 1, /* on `pairs`: begun, not ended */
    PAIR_ACCESS = 2  /* holds transfer access to both */
};

/* Every pair between begin and end. pair_lock is taken before the
 * carriers' locks, so that a fork (whose prepare takes it) never sees a
 * carrier marked by a pair that is not on the list yet. */
static pthread_mutex_t pair_lock = PTHREAD_MUTEX_INITIALIZER;
static sw_carrier_pair *pairs;

static void link_pair(sw_carrier_pair *p)
{
    CORE(p)->prev = NULL;
    CORE(p)->next = pairs;
    if (pairs)
        CORE(pairs)->prev = p;
    pairs = p;
    CORE(p)->state |= PAIR_LINKED;
}

static void unlink_pair(sw_carrier_pair *p)
{
    pair_core *c = CORE(p);
    if (c->prev)
        CORE(c->prev)->next = c->next;
    else
        pairs = c->next;
    if (c->next)
        CORE(c->next)->prev = c->prev;
    c->prev = c->next = NULL;
    c->state = 0;
}

int sw_carrier_refusal_locked(sw_carrier *c, int pending_too)
{
    if (c->released)
        return SW_CARRIER_REFUSED_RELEASED;
    if (pending_too && (c->pending_src || c->pending_dst))
        return SW_CARRIER_REFUSED_PENDING;
    return 0;
}

static sw_status refuse(sw_carrier_pair *p, int role, int why, sw_error *err)
{
    sw_carrier *c = role == SW_CARRIER_PENDING_SOURCE ? p->src : p->dst;
    p->refused = role;
    sw_error_set(err, SW_ESTATE, "transfer: the %s %s carrier %s",
                 role == SW_CARRIER_PENDING_SOURCE ? "source" : "destination",
                 sw_carrier_name(c),
                 why == SW_CARRIER_REFUSED_RELEASED ? "is released" : "is pending in a move");
    if (err)
        err->detail = why;
    return SW_ESTATE;
}

/* Both locked, pair_lock held: the marks (and the access), on the list. */
void sw_carrier_pair_mark_locked(sw_carrier_pair *p, int roles, int access)
{
    if (roles & SW_CARRIER_PENDING_SOURCE)
        p->src->pending_src = 1;
    if (roles & SW_CARRIER_PENDING_DESTINATION)
        p->dst->pending_dst = 1;
    p->marked = roles;
    pthread_t me = pthread_self();
    if (access) {
        p->src->transfer_thread = me;
        p->src->transfer_depth++;
        p->dst->transfer_thread = me;
        p->dst->transfer_depth++;
    }
    CORE(p)->thread = me;
    link_pair(p);
    CORE(p)->state |= access ? PAIR_ACCESS : 0;
    sw_carrier_ref(p->src);
    sw_carrier_ref(p->dst);
}

/* Both locked: the checks, then the marks and the access. */
static sw_status begin_locked(sw_carrier_pair *p, unsigned flags, sw_error *err)
{
    int mark_src = !(flags & SW_CARRIER_PAIR_SHARED_SOURCE);
    int mark_dst = !(flags & SW_CARRIER_PAIR_SHARED_DESTINATION);
    int why = mark_src ? sw_carrier_refusal_locked(p->src, 1) : 0;
    if (why)
        return refuse(p, SW_CARRIER_PENDING_SOURCE, why, err);
    why = mark_dst ? sw_carrier_refusal_locked(p->dst, 1) : 0;
    if (why)
        return refuse(p, SW_CARRIER_PENDING_DESTINATION, why, err);
    sw_carrier_pair_mark_locked(p,
                                (mark_src ? SW_CARRIER_PENDING_SOURCE : 0) |
                                    (mark_dst ? SW_CARRIER_PENDING_DESTINATION : 0),
                                1);
    return SW_OK;
}

void sw_carrier_pair_lock(void)
{
    pthread_mutex_lock(&pair_lock);
}

void sw_carrier_pair_unlock(void)
{
    pthread_mutex_unlock(&pair_lock);
}

sw_status sw_carrier_pair_begin(sw_carrier *src, sw_carrier *dst, unsigned flags,
                                sw_carrier_pair *pair, sw_error *err)
{
    if (!pair || !src || !dst) {
        if (pair)
            *pair = (sw_carrier_pair){0};
        return sw_error_set(err, SW_ETYPE, "transfer: %s is NULL",
                            !pair ? "the pair" : !src ? "the source" : "the destination");
    }
    *pair = (sw_carrier_pair){.src = src, .dst = dst};
    if (src == dst)
        return sw_error_set(err, SW_EINVAL,
                            "transfer: the source and destination are one carrier");
    pthread_mutex_lock(&pair_lock);
    sw_carrier_lock_pair(src, dst);
    sw_status st = begin_locked(pair, flags, err);
    sw_carrier_unlock_pair(src, dst);
    pthread_mutex_unlock(&pair_lock);
    return st;
}

/* Both locked: this thread's access goes. */
static void drop_access_locked(sw_carrier_pair *p)
{
    if (!(CORE(p)->state & PAIR_ACCESS))
        return;
    if (sw_carrier_in_transfer_locked(p->src))
        p->src->transfer_depth--;
    if (sw_carrier_in_transfer_locked(p->dst))
        p->dst->transfer_depth--;
    CORE(p)->state &= ~(intptr_t)PAIR_ACCESS;
}

/* Both locked: the access goes, the marks too with `unmark`, and the pair
 * leaves the list. */
static void end_locked(sw_carrier_pair *p, int unmark)
{
    drop_access_locked(p);
    if (unmark) {
        if (p->marked & SW_CARRIER_PENDING_SOURCE)
            p->src->pending_src = 0;
        if (p->marked & SW_CARRIER_PENDING_DESTINATION)
            p->dst->pending_dst = 0;
    }
    p->marked = 0;
    unlink_pair(p);
}

static void end(sw_carrier_pair *p, int unmark)
{
    if (!p || !(CORE(p)->state & PAIR_LINKED))
        return; /* refused, or ended already */
    sw_carrier *s = p->src, *d = p->dst;
    pthread_mutex_lock(&pair_lock);
    sw_carrier_lock_pair(s, d);
    end_locked(p, unmark);
    sw_carrier_unlock_pair(s, d);
    pthread_mutex_unlock(&pair_lock);
    sw_carrier_unref(s);
    sw_carrier_unref(d);
}

void sw_carrier_pair_end(sw_carrier_pair *pair)
{
    end(pair, 1);
}

void sw_carrier_pair_keep_marks(sw_carrier_pair *pair)
{
    end(pair, 0);
}

void sw_carrier_pair_end_transfer(sw_carrier_pair *pair)
{
    if (!pair || !(CORE(pair)->state & PAIR_ACCESS))
        return;
    sw_carrier_lock_pair(pair->src, pair->dst);
    drop_access_locked(pair);
    sw_carrier_unlock_pair(pair->src, pair->dst);
}

/* ---- fork ------------------------------------------------------------------ */

void sw_carrier_pair_fork_prepare(void)
{
    pthread_mutex_lock(&pair_lock);
}

void sw_carrier_pair_fork_parent(void)
{
    pthread_mutex_unlock(&pair_lock);
}

static void drop_other_threads(sw_carrier *c, pthread_t me)
{
    if (c->transfer_depth > 0 && !pthread_equal(c->transfer_thread, me))
        c->transfer_depth = 0;
}

/* Only the forking thread exists: the pairs of the others end here (their
 * references stay, as the threads' own do). Their carriers' locks are made
 * fresh first: the copying thread may have held one (a slot write). */
void sw_carrier_pair_fork_child(void)
{
    /* pair_lock was taken by this very thread in prepare: unlock it (a
     * re-initialised lock still counts as held for ThreadSanitizer, which
     * then sees every later lock taken "under" it). */
    pthread_t me = pthread_self();
    sw_carrier_pair *p = pairs;
    while (p) {
        sw_carrier_pair *next = CORE(p)->next;
        if (!pthread_equal(CORE(p)->thread, me)) {
            pthread_mutex_init(&p->src->lock, NULL);
            pthread_mutex_init(&p->dst->lock, NULL);
            drop_other_threads(p->src, me);
            drop_other_threads(p->dst, me);
            end_locked(p, 1);
        }
        p = next;
    }
    pthread_mutex_unlock(&pair_lock);
}
