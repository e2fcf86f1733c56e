/* Holds: a binding's own work counted by the core's one engine
 * (strideweave/engine.h). Each hold counts once in the engine's in-flight
 * count (so every drain and the exit drain wait for it) and once here (so
 * sw_engine_drain_held can wait for holds alone). A token is the epoch it
 * was taken in: giving up on the holds, or a fork, starts a new epoch, and
 * a release from an older one changes nothing. */
#include "engine_internal.h"
#include "strideweave/engine.h"

#include <pthread.h>
#include <time.h>

/* How often sw_engine_drain_held asks its `stop` callback. */
#define STOP_POLL_NS 50000000LL

/* Lock order: hold_lock, then the engine's own (sw_engine_count). */
static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cond = PTHREAD_COND_INITIALIZER;
static int64_t held;
static uint64_t epoch = 1;

sw_status sw_engine_hold(uint64_t *token, sw_error *err)
{
    sw_engine_install_hooks();
    pthread_mutex_lock(&hold_lock);
    /* Counted, then exit looked for: an exit that began meanwhile either
     * sees the count (and waits) or is seen here (a refusal). */
    sw_engine_count(1);
    if (sw_engine_exiting()) {
        sw_engine_count(-1);
        pthread_mutex_unlock(&hold_lock);
        return sw_error_set(err, SW_ESTATE, "the process is exiting; no new work can start");
    }
    held++;
    *token = epoch;
    pthread_mutex_unlock(&hold_lock);
    return SW_OK;
}

void sw_engine_release(uint64_t token)
{
    pthread_mutex_lock(&hold_lock);
    if (token == epoch && held > 0) {
        if (--held == 0)
            pthread_cond_broadcast(&hold_cond);
        sw_engine_count(-1);
    }
    pthread_mutex_unlock(&hold_lock);
}

int64_t sw_engine_held(void)
{
    pthread_mutex_lock(&hold_lock);
    int64_t n = held;
    pthread_mutex_unlock(&hold_lock);
    return n;
}

int64_t sw_engine_abandon_held(void)
{
    pthread_mutex_lock(&hold_lock);
    int64_t n = held;
    held = 0;
    epoch++;
    sw_engine_count(-(long)n);
    pthread_cond_broadcast(&hold_cond);
    pthread_mutex_unlock(&hold_lock);
    return n;
}

static int64_t now_ns(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

int sw_engine_drain_held(int64_t timeout_ns, int (*stop)(void *user), void *user)
{
    int64_t deadline = timeout_ns < 0 ? -1 : now_ns(CLOCK_MONOTONIC) + timeout_ns;
    pthread_mutex_lock(&hold_lock);
    for (;;) {
        if (held == 0) {
            pthread_mutex_unlock(&hold_lock);
            return 1;
        }
        int64_t slice = stop ? STOP_POLL_NS : -1;
        if (deadline >= 0) {
            int64_t left = deadline - now_ns(CLOCK_MONOTONIC);
            if (left <= 0) {
                pthread_mutex_unlock(&hold_lock);
                return 0;
            }
            if (slice < 0 || left < slice)
                slice = left;
        }
        if (slice < 0) {
            pthread_cond_wait(&hold_cond, &hold_lock);
        } else {
            /* hold_cond uses the default (real-time) clock. */
            int64_t until = now_ns(CLOCK_REALTIME) + slice;
            struct timespec ts = {(time_t)(until / 1000000000LL), (long)(until % 1000000000LL)};
            pthread_cond_timedwait(&hold_cond, &hold_lock, &ts);
        }
        if (stop && held > 0) {
            pthread_mutex_unlock(&hold_lock);
            int stopped = stop(user);
            pthread_mutex_lock(&hold_lock);
            if (stopped && held > 0) {
                pthread_mutex_unlock(&hold_lock);
                return -1;
            }
        }
    }
}

void sw_engine_held_after_fork(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t fresh_cond = PTHREAD_COND_INITIALIZER;
    hold_lock = fresh; /* another thread may have held it at fork() */
    hold_cond = fresh_cond;
    held = 0; /* the engine's own count starts at 0 there too */
    epoch++;
}
