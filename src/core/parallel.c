/* Helper threads for sw_parallel_run (see parallel.h). One lock guards the
 * queue of batches and every batch's counters: a helper (or a waiter of
 * parallel_internal.h) touches a batch only under it, and the caller
 * returns only once every claimed part has reported, so nobody holds a
 * batch that went away. */
#include "parallel_internal.h"

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include "fork_internal.h"
#include "strideweave/alloc.h"

SW_FORK_LINKED;

typedef struct batch {
    int n;          /* parts */
    int claimed;    /* parts handed out */
    int done;       /* parts finished */
    void (*fn)(void *ctx, int part);
    void *ctx;
    const void *owner; /* whose waiters may run parts (sw_parallel_help), or NULL */
    int helper_cap;    /* helper threads allowed on its parts at once */
    int helpers_on;    /* helper threads running its parts now */
    struct batch *next;
} batch;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work = PTHREAD_COND_INITIALIZER;     /* a batch was queued */
static pthread_cond_t finished = PTHREAD_COND_INITIALIZER; /* a part finished */
static batch *head, *tail;
static int helpers = -1; /* -1 until first use; then how many run */

/* Under the lock: take b out of the queue (its last part was claimed). */
static void unlink_batch(batch *b)
{
    batch **pp = &head, *prev = NULL;
    while (*pp != b) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    *pp = b->next;
    if (tail == b)
        tail = prev;
}

/* Under the lock: claim b's next part (every queued batch has one). */
static int claim_part(batch *b)
{
    int part = b->claimed++;
    if (b->claimed == b->n)
        unlink_batch(b);
    return part;
}

/* Under the lock: the next part a helper may run, from the oldest batch
 * that has room for one more helper, or -1. */
static int claim(batch **out)
{
    for (batch *b = head; b; b = b->next)
        if (b->helpers_on < b->helper_cap) {
            b->helpers_on++;
            *out = b;
            return claim_part(b);
        }
    return -1;
}

static void finish(batch *b)
{
    if (++b->done == b->n)
        pthread_cond_broadcast(&finished);
}

static void *helper_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    for (;;) {
        batch *b;
        int part = claim(&b);
        if (part < 0) {
            pthread_cond_wait(&work, &lock);
            continue;
        }
        pthread_mutex_unlock(&lock);
        b->fn(b->ctx, part);
        pthread_mutex_lock(&lock);
        b->helpers_on--;
        finish(b);
    }
    return NULL;
}

/* fork.c: the child has none of the helpers. */
void sw_parallel_fork_child(void)
{
    pthread_mutex_init(&lock, NULL);
    pthread_cond_init(&work, NULL);
    pthread_cond_init(&finished, NULL);
    head = tail = NULL;
    helpers = -1;
}

/* Under the lock: start the helpers once (fewer than wanted if the system
 * refuses threads; none on one CPU). */
static void start_helpers(void)
{
    if (helpers >= 0)
        return;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int want = cpus > 1 ? (int)cpus - 1 : 0;
    if (want > SW_PARALLEL_MAX_HELPERS)
        want = SW_PARALLEL_MAX_HELPERS;
    helpers = 0;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (int i = 0; i < want; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, helper_main, NULL) != 0)
            break;
        pthread_detach(t);
        helpers++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

int sw_parallel_width(void)
{
    pthread_mutex_lock(&lock);
    start_helpers();
    int w = helpers + 1;
    pthread_mutex_unlock(&lock);
    return w;
}

static void run_batch(const void *owner, int helper_cap, int n, void (*fn)(void *ctx, int part),
                      void *ctx)
{
    if (n <= 0)
        return;
    pthread_mutex_lock(&lock);
    start_helpers();
    if (n == 1 || helpers == 0) {
        pthread_mutex_unlock(&lock);
        for (int i = 0; i < n; i++)
            fn(ctx, i);
        return;
    }
    batch b = {.n = n, .fn = fn, .ctx = ctx, .owner = owner, .helper_cap = helper_cap};
    if (tail)
        tail->next = &b;
    else
        head = &b;
    tail = &b;
    if (helper_cap > 0)
        pthread_cond_broadcast(&work);
    /* The caller works through its own parts (and only those: another
     * batch's part may be long). */
    while (b.claimed < b.n) {
        int part = claim_part(&b);
        pthread_mutex_unlock(&lock);
        fn(ctx, part);
        pthread_mutex_lock(&lock);
        finish(&b);
    }
    while (b.done < b.n)
        pthread_cond_wait(&finished, &lock);
    pthread_mutex_unlock(&lock);
}

void sw_parallel_run(int n, void (*fn)(void *ctx, int part), void *ctx)
{
    run_batch(NULL, INT_MAX, n, fn, ctx);
}

void sw_parallel_run_open(const void *owner, int helpers_at_once, int n,
                          void (*fn)(void *ctx, int part), void *ctx)
{
    run_batch(owner, helpers_at_once > 0 ? helpers_at_once : 0, n, fn, ctx);
}

int sw_parallel_help(const void *owner)
{
    if (!owner)
        return 0;
    pthread_mutex_lock(&lock);
    batch *b = head;
    while (b && b->owner != owner)
        b = b->next;
    if (!b) {
        pthread_mutex_unlock(&lock);
        return 0;
    }
    int part = claim_part(b);
    pthread_mutex_unlock(&lock);
    b->fn(b->ctx, part);
    pthread_mutex_lock(&lock);
    finish(b);
    pthread_mutex_unlock(&lock);
    return 1;
}
