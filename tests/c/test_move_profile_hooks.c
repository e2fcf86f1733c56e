/* Profiling hooks with several subscribers (move.h, "Profiling hooks"):
 * a C host and a binding's profiler both get every move's SUBMIT and
 * COMPLETE with bytes and timestamps; a tag goes only to the subscriber
 * the move names; the limits and refusals of subscribing; a subscriber
 * removed while a move is in flight still gets that move's COMPLETE; and
 * threads subscribing and unsubscribing while others move (TSan build). */
#include <pthread.h>
#include <string.h>

#include "check.h"
#include <strideweave/strideweave.h>

typedef struct seen {
    int submits, completes, tagged, untagged;
    int64_t bytes;
    uint64_t submit_ns, complete_ns;
} seen;

static void record(const sw_move_event *ev, void *user)
{
    seen *s = user;
    if (ev->kind == SW_MOVE_EVENT_SUBMIT) {
        __atomic_fetch_add(&s->submits, 1, __ATOMIC_RELAXED);
    } else {
        __atomic_fetch_add(&s->completes, 1, __ATOMIC_RELAXED);
        __atomic_store_n(&s->complete_ns, ev->complete_ns, __ATOMIC_RELAXED);
    }
    __atomic_fetch_add(ev->tag ? &s->tagged : &s->untagged, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&s->bytes, ev->bytes, __ATOMIC_RELAXED);
    __atomic_store_n(&s->submit_ns, ev->submit_ns, __ATOMIC_RELAXED);
}

/* A second function: the tag's owner is told apart by function. */
static void record_other(const sw_move_event *ev, void *user) { record(ev, user); }

static int move_once(int64_t n, const sw_move_options *o)
{
    sw_carrier *src = NULL, *dst = NULL;
    sw_tensor *t = NULL;
    sw_move_handle *m = NULL;
    int64_t ext[1] = {n};
    sw_error err;
    int ok = sw_cpu_new(n, SW_DT_FLOAT32, 0, &src, &err) == SW_OK &&
             sw_cpu_new(n, SW_DT_FLOAT32, 0, &dst, &err) == SW_OK &&
             sw_tensor_new_strided(src, 0, 1, ext, NULL, &t, &err) == SW_OK &&
             sw_move_async(t, dst, o, &m, &err) == SW_OK &&
             sw_move_wait(m, NULL, &err) == SW_OK;
    sw_move_unref(m);
    sw_tensor_unref(t);
    sw_carrier_unref(src);
    sw_carrier_unref(dst);
    return ok;
}

/* Two subscribers and the set slot each get both events of a small move
 * (run on the caller) and of a large one (on the pool). */
static void test_all_subscribers_get_every_event(void)
{
    seen a = {0}, b = {0}, host = {0};
    sw_error err;
    CHECK_EQ_I64(sw_move_add_profile_hook(record, &a, &err), SW_OK);
    CHECK_EQ_I64(sw_move_add_profile_hook(record, &b, &err), SW_OK);
    sw_move_set_profile_hook(record_other, &host);
    CHECK(move_once(16, NULL));
    CHECK(move_once(1 << 20, NULL));
    seen *all[] = {&a, &b, &host};
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_I64(all[i]->submits, 2);
        CHECK_EQ_I64(all[i]->completes, 2);
        CHECK_EQ_I64(all[i]->bytes, (1 << 20) * 4);
        CHECK(all[i]->submit_ns > 0 && all[i]->complete_ns >= all[i]->submit_ns);
    }
    sw_move_set_profile_hook(NULL, NULL);
    CHECK_EQ_I64(sw_move_remove_profile_hook(record, &a, &err), SW_OK);
    CHECK(move_once(16, NULL));
    CHECK_EQ_I64(a.submits, 2);
    CHECK_EQ_I64(host.submits, 2);
    CHECK_EQ_I64(b.submits, 3);
    CHECK_EQ_I64(sw_move_remove_profile_hook(record, &b, &err), SW_OK);
}

/* A tag goes to the subscriber the move names, NULL to the others; with
 * no owner named, to every one (as with one hook). */
static void test_tag_goes_to_its_owner(void)
{
    seen mine = {0}, other = {0};
    int record_of_mine;
    sw_error err;
    CHECK_EQ_I64(sw_move_add_profile_hook(record, &mine, &err), SW_OK);
    CHECK_EQ_I64(sw_move_add_profile_hook(record_other, &other, &err), SW_OK);
    sw_move_options o = {.profile_tag = &record_of_mine, .profile_tag_hook = record};
    CHECK(move_once(16, &o));
    CHECK_EQ_I64(mine.tagged, 2);
    CHECK_EQ_I64(other.tagged, 0);
    CHECK_EQ_I64(other.untagged, 2);
    o.profile_tag_hook = NULL;
    CHECK(move_once(16, &o));
    CHECK_EQ_I64(mine.tagged, 4);
    CHECK_EQ_I64(other.tagged, 2);
    sw_move_remove_profile_hook(record, &mine, NULL);
    sw_move_remove_profile_hook(record_other, &other, NULL);
}

static void test_subscribing_refusals(void)
{
    seen s[SW_MOVE_PROFILE_HOOKS_MAX + 1], host = {0};
    memset(s, 0, sizeof s);
    sw_error err;
    CHECK_EQ_I64(sw_move_add_profile_hook(NULL, &s[0], &err), SW_ETYPE);
    CHECK_EQ_I64(sw_move_remove_profile_hook(record, &s[0], &err), SW_EINVAL);
    for (int i = 0; i < SW_MOVE_PROFILE_HOOKS_MAX; i++)
        CHECK_EQ_I64(sw_move_add_profile_hook(record, &s[i], &err), SW_OK);
    CHECK_EQ_I64(sw_move_add_profile_hook(record, &s[0], &err), SW_EEXIST);
    CHECK_EQ_I64(sw_move_add_profile_hook(record, &s[SW_MOVE_PROFILE_HOOKS_MAX], &err),
                 SW_ERANGE);
    sw_move_set_profile_hook(record, &host); /* always room */
    CHECK(move_once(16, NULL));
    CHECK_EQ_I64(host.submits, 1);
    CHECK_EQ_I64(s[SW_MOVE_PROFILE_HOOKS_MAX - 1].submits, 1);
    CHECK_EQ_I64(s[SW_MOVE_PROFILE_HOOKS_MAX].submits, 0);
    sw_move_set_profile_hook(NULL, NULL);
    for (int i = 0; i < SW_MOVE_PROFILE_HOOKS_MAX; i++)
        CHECK_EQ_I64(sw_move_remove_profile_hook(record, &s[i], &err), SW_OK);
    CHECK(move_once(16, NULL));
    CHECK_EQ_I64(host.submits, 1);
}

/* A move observes the subscribers of its submission: one removed while
 * the move is held still gets its COMPLETE, one added meanwhile none. */
static void test_removed_while_in_flight(void)
{
    seen gone = {0}, late = {0};
    sw_error err;
    sw_carrier *src = NULL, *dst = NULL;
    sw_tensor *t = NULL;
    sw_move_handle *m = NULL;
    int64_t ext[1] = {16};
    sw_cpu_new(16, SW_DT_FLOAT32, 0, &src, &err);
    sw_cpu_new(16, SW_DT_FLOAT32, 0, &dst, &err);
    sw_tensor_new_strided(src, 0, 1, ext, NULL, &t, &err);
    CHECK_EQ_I64(sw_move_add_profile_hook(record, &gone, &err), SW_OK);
    sw_move_hold(1);
    CHECK_EQ_I64(sw_move_async(t, dst, NULL, &m, &err), SW_OK);
    CHECK_EQ_I64(sw_move_remove_profile_hook(record, &gone, &err), SW_OK);
    CHECK_EQ_I64(sw_move_add_profile_hook(record, &late, &err), SW_OK);
    sw_move_hold(0);
    CHECK_EQ_I64(sw_move_wait(m, NULL, &err), SW_OK);
    CHECK_EQ_I64(gone.submits, 1);
    CHECK_EQ_I64(gone.completes, 1);
    CHECK_EQ_I64(late.submits + late.completes, 0);
    sw_move_remove_profile_hook(record, &late, NULL);
    sw_move_unref(m);
    sw_tensor_unref(t);
    sw_carrier_unref(src);
    sw_carrier_unref(dst);
}

/* Threads subscribing and unsubscribing while others move: a subscriber
 * there all along gets exactly two events per move. */
#define MOVERS 3
#define CHURNERS 2
#define ROUNDS 150

static seen steady;
static int move_failures;
/* Static, not on the churners' stacks: a move submitted while a churner
 * was subscribed still reports its COMPLETE to that churner's record after
 * the churner unsubscribed, and maybe after its thread ended. */
static seen churned[CHURNERS];

static void *mover(void *arg)
{
    (void)arg;
    for (int r = 0; r < ROUNDS; r++)
        if (!move_once(r % 2 ? 16 : 1 << 16, NULL))
            __atomic_fetch_add(&move_failures, 1, __ATOMIC_RELAXED);
    return NULL;
}

static void *churner(void *arg)
{
    seen *mine = arg;
    for (int r = 0; r < ROUNDS; r++) {
        if (sw_move_add_profile_hook(record, mine, NULL) != SW_OK ||
            sw_move_remove_profile_hook(record, mine, NULL) != SW_OK)
            __atomic_fetch_add(&move_failures, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

static void test_threads(void)
{
    sw_error err;
    CHECK_EQ_I64(sw_move_add_profile_hook(record_other, &steady, &err), SW_OK);
    pthread_t th[MOVERS + CHURNERS];
    for (int i = 0; i < MOVERS + CHURNERS; i++)
        pthread_create(&th[i], NULL, i < MOVERS ? mover : churner,
                       i < MOVERS ? NULL : &churned[i - MOVERS]);
    for (int i = 0; i < MOVERS + CHURNERS; i++)
        pthread_join(th[i], NULL);
    sw_move_drain();
    CHECK_EQ_I64(move_failures, 0);
    CHECK_EQ_I64(steady.submits, MOVERS * ROUNDS);
    CHECK_EQ_I64(steady.completes, MOVERS * ROUNDS);
    sw_move_remove_profile_hook(record_other, &steady, NULL);
}

int main(void)
{
    test_all_subscribers_get_every_event();
    test_tag_goes_to_its_owner();
    test_subscribing_refusals();
    test_removed_while_in_flight();
    test_threads();
    return check_report("move_profile_hooks");
}
