/* Freeing a moved source's memory off the mover's path.
 *
 * A move releases its source (C-23), so a run of moves from host memory
 * frees one block per move. glibc's free() of a block that ends next to
 * the top of its heap merges them and, once the free top passes its trim
 * threshold, hands the whole run back to the kernel in one brk() call: the
 * move that frees the last block pays for unmapping all of them (0.5 us a
 * page here, 0.4-0.8 ms for 64 blocks of 64 KiB: bench/sweep.py cpu->file
 * single 64 KiB 0.67-0.79x; 1.00x with the trim off, issue 19). Blocks the
 * reuse caches do not keep (alloc.c) are therefore queued here by the
 * thread that commits a move, and one background thread frees them, as
 * filestore.c's reaper closes released files.
 *
 * The queue is a cache too: a queued block serves an allocation of its
 * exact size (sw_alloc_later_take, the newest first), as the reuse caches
 * do. Memory a move just released is mapped, and the next carriers of
 * that size take it instead of faulting fresh pages in (sources moved to
 * files, then as many fresh CPU carriers made: 14.5 page faults a 64 KiB
 * carrier while they could not). The thread is woken once LATER_WAKE
 * bytes wait (or LATER_MAX blocks), since waking it costs a system call,
 * and frees the oldest down to LATER_KEEP, so that the newest stay for
 * reuse. Less than LATER_WAKE waits otherwise, with no timer (a version
 * that freed what was left a second later did so in the middle of
 * whatever ran then, and small CPU -> CPU moves measured 0.1x slower after
 * a run of file moves). The queue is emptied by sw_alloc_trim and before
 * fork() (the child then holds no block that nobody would free). When the
 * thread cannot start, or the queue is full, the caller frees the block
 * itself. Only blocks of LATER_MIN bytes or more come here: smaller ones are
 * mostly kept by the small cache, and cost little to free. Larger blocks
 * (CACHE_MIN and up, alloc.c) are not queued either: freed late, a large
 * block was still being unmapped while the next large move faulted its
 * fresh pages in (filestore.c says the same of large files). */
#include "alloc_internal.h"
#include "core_thread_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define LATER_MAX 256
#define LATER_WAKE ((size_t)4 << 20)
#define LATER_KEEP ((size_t)2 << 20)

static pthread_mutex_t later_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t later_work = PTHREAD_COND_INITIALIZER; /* the thread: a batch is due */
static pthread_cond_t later_idle = PTHREAD_COND_INITIALIZER; /* waiters: batch freed */
static void *later_base[LATER_MAX];   /* the oldest first */
static size_t later_total[LATER_MAX]; /* each block's malloc size */
static int later_count;      /* queued, not yet taken */
static size_t later_bytes;   /* of the queued blocks */
static int later_due;        /* the oldest are to be freed now */
static int later_sleeping;   /* the thread waits on later_work */
static int later_busy;       /* the thread is freeing a batch it took */
static int later_taken;      /* blocks in that batch */
static int later_started;    /* the thread runs in this process */

/* later_mu held: take the oldest blocks into `batch` until at most
 * LATER_KEEP bytes stay queued (the newest, for reuse); answers how many. */
static int take_oldest(void **batch)
{
    int n = 0;
    while (n < later_count && later_bytes > LATER_KEEP) {
        batch[n] = later_base[n];
        later_bytes -= later_total[n];
        n++;
    }
    later_count -= n;
    memmove(later_base, later_base + n, (size_t)later_count * sizeof later_base[0]);
    memmove(later_total, later_total + n, (size_t)later_count * sizeof later_total[0]);
    return n;
}

static void *later_main(void *arg)
{
    (void)arg;
    void *batch[LATER_MAX];
    pthread_mutex_lock(&later_mu);
    for (;;) {
        while (!later_due) {
            later_sleeping = 1;
            pthread_cond_wait(&later_work, &later_mu);
            later_sleeping = 0;
        }
        int n = take_oldest(batch);
        later_due = 0;
        later_busy = 1;
        later_taken = n;
        pthread_mutex_unlock(&later_mu);
        for (int i = 0; i < n; i++)
            free(batch[i]);
        pthread_mutex_lock(&later_mu);
        later_busy = 0;
        later_taken = 0;
        pthread_cond_broadcast(&later_idle);
    }
    return NULL;
}

/* later_mu held: 1 when the thread runs (started now if needed). */
static int later_running(void)
{
    if (!later_started)
        later_started = sw_thread_start_detached(later_main, NULL) == 0;
    return later_started;
}

int sw_alloc_free_later(void *base, size_t total)
{
    if (total < SW_ALLOC_LATER_MIN)
        return 0;
    pthread_mutex_lock(&later_mu);
    int queued = later_count < LATER_MAX && later_running();
    if (queued) {
        later_base[later_count] = base;
        later_total[later_count++] = total;
        later_bytes += total;
        if (later_bytes >= LATER_WAKE || later_count == LATER_MAX)
            later_due = 1;
        if (later_due && later_sleeping)
            pthread_cond_signal(&later_work);
    }
    pthread_mutex_unlock(&later_mu);
    return queued;
}

void *sw_alloc_later_take(size_t total)
{
    if (total < SW_ALLOC_LATER_MIN)
        return NULL;
    void *base = NULL;
    pthread_mutex_lock(&later_mu);
    for (int i = later_count; i-- > 0;) {
        if (later_total[i] != total)
            continue;
        base = later_base[i];
        later_count--;
        memmove(&later_base[i], &later_base[i + 1], (size_t)(later_count - i) * sizeof base);
        memmove(&later_total[i], &later_total[i + 1],
                (size_t)(later_count - i) * sizeof later_total[0]);
        later_bytes -= total;
        break;
    }
    pthread_mutex_unlock(&later_mu);
    return base;
}

/* later_mu held: free what is queued here, and wait for a batch the thread
 * is freeing. */
static void later_drain_locked(void)
{
    while (later_count > 0)
        free(later_base[--later_count]);
    later_bytes = 0;
    later_due = 0;
    while (later_busy)
        pthread_cond_wait(&later_idle, &later_mu);
}

void sw_alloc_later_drain(void)
{
    pthread_mutex_lock(&later_mu);
    later_drain_locked();
    pthread_mutex_unlock(&later_mu);
}

int64_t sw_alloc_later_queued_blocks(void)
{
    pthread_mutex_lock(&later_mu);
    int64_t n = later_count + later_taken;
    pthread_mutex_unlock(&later_mu);
    return n;
}

void sw_alloc_later_fork_prepare(void)
{
    pthread_mutex_lock(&later_mu);
    later_drain_locked();
}

void sw_alloc_later_fork_parent(void)
{
    pthread_mutex_unlock(&later_mu);
}

void sw_alloc_later_fork_child(void)
{
    /* The thread is not in the child, and the queue is empty. Its waits
     * may have left the condition variables counting a waiter the child
     * lacks: fresh ones, so the child's own thread is woken. */
    later_started = 0;
    later_busy = 0;
    later_taken = 0;
    later_sleeping = 0;
    pthread_cond_init(&later_work, NULL);
    pthread_cond_init(&later_idle, NULL);
    pthread_mutex_unlock(&later_mu);
}
