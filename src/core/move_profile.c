/* Profiling subscribers of the move engine (move.h, "Profiling hooks"): a
 * small list, changed under one lock and published as an immutable,
 * refcounted snapshot, so a C host and a binding's profiler can both
 * watch, and a move reads its subscribers without any lock. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "move_profile_internal.h"

#include "strideweave/alloc.h"

typedef struct hook {
    sw_move_profile_fn fn;
    void *user;
} hook;

struct sw_move_hooks {
    _Atomic long refs;
    int n;
    hook e[SW_MOVE_PROFILE_HOOKS_MAX + 1]; /* + sw_move_set_profile_hook's */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static sw_move_hooks *current; /* under `lock`; NULL when empty */
static _Atomic int any;        /* current != NULL: read without the lock first */
static hook set_slot;          /* sw_move_set_profile_hook's subscriber */

sw_move_hooks *sw_move_hooks_take(void)
{
    if (!atomic_load_explicit(&any, memory_order_relaxed))
        return NULL;
    pthread_mutex_lock(&lock);
    sw_move_hooks *h = current;
    if (h)
        atomic_fetch_add(&h->refs, 1);
    pthread_mutex_unlock(&lock);
    return h;
}

void sw_move_hooks_drop(sw_move_hooks *h)
{
    if (h && atomic_fetch_sub(&h->refs, 1) == 1)
        sw_free(h);
}

void sw_move_hooks_emit(const sw_move_hooks *h, sw_move_event *ev, sw_move_profile_fn tag_hook,
                        void *tag)
{
    for (int i = 0; i < h->n; i++) {
        ev->tag = !tag_hook || h->e[i].fn == tag_hook ? tag : NULL;
        h->e[i].fn(ev, h->e[i].user);
    }
}

void sw_move_hooks_after_fork_child(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    lock = fresh;
}

static int find(const sw_move_hooks *h, sw_move_profile_fn fn, void *user)
{
    for (int i = 0; h && i < h->n; i++)
        if (h->e[i].fn == fn && h->e[i].user == user)
            return i;
    return -1;
}

/* Publish the current list without entry `drop` (-1: none) and with `add`
 * (fn NULL: none), `lock` held. The old snapshot goes when the last move
 * that took it lets go. */
static sw_status publish_locked(int drop, hook add, sw_error *err)
{
    int n = (current ? current->n : 0) - (drop >= 0) + (add.fn != NULL);
    sw_move_hooks *h = NULL;
    if (n > 0) {
        h = sw_calloc(1, sizeof *h);
        if (!h)
            return sw_error_set(err, SW_ENOMEM, "profiling: out of memory");
        atomic_init(&h->refs, 1);
        for (int i = 0; current && i < current->n; i++)
            if (i != drop)
                h->e[h->n++] = current->e[i];
        if (add.fn)
            h->e[h->n++] = add;
    }
    sw_move_hooks *old = current;
    current = h;
    atomic_store(&any, h != NULL);
    sw_move_hooks_drop(old);
    return SW_OK;
}

sw_status sw_move_add_profile_hook(sw_move_profile_fn fn, void *user, sw_error *err)
{
    if (!fn)
        return sw_error_set(err, SW_ETYPE, "profiling: the hook is NULL");
    pthread_mutex_lock(&lock);
    sw_status st;
    if (find(current, fn, user) >= 0)
        st = sw_error_set(err, SW_EEXIST, "profiling: this hook and user are subscribed already");
    else if (current && current->n == SW_MOVE_PROFILE_HOOKS_MAX)
        st = sw_error_set(err, SW_ERANGE, "profiling: %d hooks are subscribed already",
                          SW_MOVE_PROFILE_HOOKS_MAX);
    else
        st = publish_locked(-1, (hook){fn, user}, err);
    pthread_mutex_unlock(&lock);
    return st;
}

sw_status sw_move_remove_profile_hook(sw_move_profile_fn fn, void *user, sw_error *err)
{
    pthread_mutex_lock(&lock);
    int at = find(current, fn, user);
    sw_status st = at < 0 ? sw_error_set(err, SW_EINVAL, "profiling: this hook is not subscribed")
                          : publish_locked(at, (hook){NULL, NULL}, err);
    pthread_mutex_unlock(&lock);
    return st;
}

/* The subscriber it set last goes (whichever call subscribed it), then
 * (fn, user) comes unless subscribed already. Always room for it: the
 * list holds one more than sw_move_add_profile_hook lets in. */
void sw_move_set_profile_hook(sw_move_profile_fn fn, void *user)
{
    pthread_mutex_lock(&lock);
    int at = set_slot.fn ? find(current, set_slot.fn, set_slot.user) : -1;
    int same = at >= 0 && fn == set_slot.fn && user == set_slot.user;
    hook add = {NULL, NULL};
    if (fn && !same && find(current, fn, user) < 0)
        add = (hook){fn, user};
    if (!same && (at >= 0 || add.fn) && publish_locked(at, add, NULL) != SW_OK) {
        pthread_mutex_unlock(&lock); /* out of memory: left as it was */
        return;
    }
    set_slot = fn ? (hook){fn, user} : (hook){NULL, NULL};
    pthread_mutex_unlock(&lock);
}
