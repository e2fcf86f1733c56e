/* Host copies of a medium size on two CPUs at once (copy_partner_internal.h).
 *
 * Why: a copy between host buffers that the CPU caches no longer hold runs
 * at the rate one CPU keeps cache misses in flight, not at the memory's:
 * 16 KiB in 3.6 us, 64 KiB in 12.5 us on the 2-CPU machines we measure
 * (a C loop over 256 such buffers, cold). A second thread copying the
 * second half of the span meanwhile finished the pair in 2.9 and 10.8 us,
 * 256 KiB in 38 us instead of 53. Handing it the half through a condition
 * variable would cost a wake-up of several microseconds, as much as the
 * copy: the partner instead spins for PARTNER_SPIN_NS after its last copy,
 * and a caller splits a medium copy only while it spins, else copies alone
 * (and wakes it when such copies come close together, so that the next
 * ones find it spinning). A large copy wakes it for its own second half.
 *
 * One word says who may do what, so the partner never waits on a caller
 * and a caller never waits on a partner that has not started its half:
 *
 *   IDLE    the partner spins and takes no job; a caller claims it
 *   CLAIMED a caller writes the job (or takes back one not started)
 *   POSTED  the job is ready; the partner takes it, or the caller takes
 *           it back when its own half is done first
 *   TAKEN   the partner copies; only it moves the word on, to DONE
 *   DONE    the caller's wait is over; it sets IDLE
 *   ASLEEP  the partner sleeps on `wake` (set from IDLE only); a caller
 *           wakes it by moving the word on, to IDLE or to CLAIMED
 *   NONE    no partner yet (and in a forked child); OFF: none ever (one
 *           CPU, or the thread could not start); STARTING: being made.
 */
#include "copy_partner_internal.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "copy_stream_internal.h"
#include "core_thread_internal.h"
#include "fault_internal.h"
#include "fork_internal.h"
#include "strideweave/clock.h"

SW_FORK_LINKED;

enum { NONE, OFF, STARTING, IDLE, CLAIMED, POSTED, TAKEN, DONE, ASLEEP };

/* How long the partner spins for a job after its last one (or after a
 * wake-up) before it sleeps: several medium copies apart (bench/sweep.py's
 * moves of 16-256 KiB came 2-10 us after one another). */
#define PARTNER_SPIN_NS ((uint64_t)50000)
/* A medium copy that finds the partner asleep is made alone, and wakes it
 * when the previous such copy ended at most this long before it started:
 * a run of copies, whose next ones then find it spinning, not a lone one
 * (its wake-up costs the caller a system call and the partner takes tens
 * of microseconds to be running). */
#define PARTNER_WAKE_WINDOW_NS PARTNER_SPIN_NS
/* A copy this large wakes the partner for its own second half: the caller's
 * first half outlasts the wake-up (4 MiB moves came 50-500 us apart, past
 * any sensible spin). */
#define PARTNER_WAKE_BYTES ((size_t)1 << 20)
/* A caller whose half is done waits for the partner's by spinning: its
 * half is as long. After this many rounds (the partner was descheduled)
 * it yields the CPU between looks. */
#define CALLER_SPINS 20000

static struct {
    _Alignas(64) _Atomic int state;
    /* The job: written by the claiming caller before POSTED, read by the
     * partner after it took it. */
    char *dst;
    const char *src;
    size_t len;
    int stream;
    /* When the last medium copy made alone while the partner slept ended. */
    _Alignas(64) _Atomic uint64_t last_solo_end_ns;
    _Atomic long halves; /* copied by the partner (sw_copy_partner_halves) */
} partner = {.state = NONE};

static pthread_mutex_t wake_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;

static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static int state_cas(int from, int to)
{
    return atomic_compare_exchange_strong_explicit(&partner.state, &from, to,
                                                   memory_order_acq_rel,
                                                   memory_order_relaxed);
}

/* The partner, ASLEEP: until a caller moved the word on. */
static void sleep_until_woken(void)
{
    pthread_mutex_lock(&wake_lock);
    while (atomic_load_explicit(&partner.state, memory_order_acquire) == ASLEEP)
        pthread_cond_wait(&wake, &wake_lock);
    pthread_mutex_unlock(&wake_lock);
}

/* A caller moved the word on from ASLEEP. */
static void wake_partner(void)
{
    pthread_mutex_lock(&wake_lock);
    pthread_cond_signal(&wake);
    pthread_mutex_unlock(&wake_lock);
}

static void *partner_main(void *arg)
{
    (void)arg;
    atomic_store_explicit(&partner.state, IDLE, memory_order_release);
    for (;;) {
        uint64_t until = sw_clock_ns() + PARTNER_SPIN_NS;
        for (unsigned spins = 1;; spins++) {
            int s = atomic_load_explicit(&partner.state, memory_order_acquire);
            if (s == POSTED && state_cas(POSTED, TAKEN)) {
                sw_copy_stream_if(partner.dst, partner.src, partner.len, partner.stream);
                atomic_fetch_add_explicit(&partner.halves, 1, memory_order_relaxed);
                atomic_store_explicit(&partner.state, DONE, memory_order_release);
                until = sw_clock_ns() + PARTNER_SPIN_NS;
                continue;
            }
            if (s == IDLE && spins % 64 == 0 && sw_clock_ns() > until && state_cas(IDLE, ASLEEP))
                break;
            relax();
        }
        sleep_until_woken();
    }
    return NULL;
}

/* The first copy that could use a partner starts it (none on one CPU, nor
 * where the thread cannot start: copies then stay whole). */
static void start_partner(void)
{
    if (!state_cas(NONE, STARTING))
        return;
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2 || SW_FAULT_HIT("copy_partner")) {
        atomic_store_explicit(&partner.state, OFF, memory_order_release);
        return;
    }
    if (sw_thread_start_detached(partner_main, NULL) != 0)
        atomic_store_explicit(&partner.state, OFF, memory_order_release);
    /* else it sets IDLE */
}

/* The whole copy on the caller, the partner being in state `s`. */
static void copy_alone(char *dst, const char *src, size_t n, int stream, int s)
{
    if (s != ASLEEP) {
        sw_copy_stream_if(dst, src, n, stream);
        if (s == NONE)
            start_partner();
        return;
    }
    uint64_t start = sw_clock_ns();
    sw_copy_stream_if(dst, src, n, stream);
    uint64_t last = atomic_exchange_explicit(&partner.last_solo_end_ns, sw_clock_ns(),
                                             memory_order_relaxed);
    if (start - last <= PARTNER_WAKE_WINDOW_NS && state_cas(ASLEEP, IDLE))
        wake_partner();
}

/* The caller's half is done and the partner took its own: wait for it. */
static void wait_partner(void)
{
    for (unsigned spins = 0;
         atomic_load_explicit(&partner.state, memory_order_acquire) != DONE; spins++) {
        if (spins < CALLER_SPINS)
            relax();
        else
            sched_yield();
    }
}

/* The caller holds the word (CLAIMED): it copies the first half, the
 * partner the rest, split on a cache line so that no line is written by
 * both. `woken`: the partner sleeps until the job is posted. */
static void copy_halves(char *dst, const char *src, size_t n, int stream, int woken)
{
    size_t mine = (n / 2) & ~(size_t)63;
    partner.dst = dst + mine;
    partner.src = src + mine;
    partner.len = n - mine;
    partner.stream = stream;
    atomic_store_explicit(&partner.state, POSTED, memory_order_release);
    if (woken)
        wake_partner();
    sw_copy_stream_if(dst, src, mine, stream);
    if (state_cas(POSTED, CLAIMED)) /* not started: the rest here too */
        sw_copy_stream_if(dst + mine, src + mine, n - mine, stream);
    else
        wait_partner();
    atomic_store_explicit(&partner.state, IDLE, memory_order_release);
}

void sw_copy_host(void *dst, const void *src, size_t n, int stream)
{
    if (n < SW_COPY_PARTNER_MIN_BYTES) {
        sw_copy_stream_if(dst, src, n, stream);
        return;
    }
    int s = atomic_load_explicit(&partner.state, memory_order_relaxed);
    if (s == IDLE && state_cas(IDLE, CLAIMED))
        copy_halves(dst, src, n, stream, 0);
    else if (s == ASLEEP && n >= PARTNER_WAKE_BYTES && state_cas(ASLEEP, CLAIMED))
        copy_halves(dst, src, n, stream, 1);
    else
        copy_alone(dst, src, n, stream, s);
}

long sw_copy_partner_halves(void)
{
    return atomic_load_explicit(&partner.halves, memory_order_relaxed);
}

/* fork.c: the child has no partner thread; its first copy starts one. A
 * parent's thread that was splitting a copy is not in the child either. */
void sw_copy_partner_fork_child(void)
{
    pthread_mutex_t fresh_lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t fresh_cond = PTHREAD_COND_INITIALIZER;
    wake_lock = fresh_lock;
    wake = fresh_cond;
    atomic_store_explicit(&partner.last_solo_end_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&partner.state, NONE, memory_order_relaxed);
}
