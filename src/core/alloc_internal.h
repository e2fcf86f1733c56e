/* Allocator internals shared with the core's own block pools and the C
 * tests of the allocator (never installed, hidden in the shared library). */
#ifndef SW_ALLOC_INTERNAL_H
#define SW_ALLOC_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* A pool handed out (delta > 0) or took back (delta < 0) `delta` bytes of
 * its own blocks: counted in sw_alloc_live_bytes like sw_malloc's, so a
 * leaked pooled block shows there too. */
void sw_alloc_count_live(int64_t delta);

/* Blocks freed while pinned and still waiting for their last unpin, and the
 * sum of their requested sizes (for the C tests). */
int64_t sw_alloc_quarantined_blocks(void);
int64_t sw_alloc_quarantined_bytes(void);

/* Freed blocks of 4 KiB up to 1 MiB waiting in the reuse cache for an
 * allocation of their exact size (for the C tests; 0 under ASan, which
 * skips the cache). */
int64_t sw_alloc_cached_small_blocks(void);

/* Freed blocks of 1 MiB and more waiting in the reuse cache (for the C
 * tests; 0 under ASan). */
int64_t sw_alloc_cached_large_blocks(void);

/* ---- freeing a moved source's block in the background (alloc_later.c) ----- */

#define SW_ALLOC_LATER_MIN ((size_t)64 << 10) /* smaller blocks: freed at once */

/* Queue free(base) of a malloc block of `total` bytes for the background
 * thread; 0 when it was not queued (too small, queue full, no thread), and
 * then the caller frees it. */
int sw_alloc_free_later(void *base, size_t total);

/* A queued block of exactly `total` malloc bytes, the last queued first,
 * taken off the queue; NULL when none. */
void *sw_alloc_later_take(size_t total);

/* Free every queued block now, and wait for those the thread is freeing
 * (sw_alloc_trim). */
void sw_alloc_later_drain(void);

/* Blocks queued or being freed (for the C tests). */
int64_t sw_alloc_later_queued_blocks(void);

/* fork(): the queue emptied and its lock held across (sw_alloc_fork_*). */
void sw_alloc_later_fork_prepare(void);
void sw_alloc_later_fork_parent(void);
void sw_alloc_later_fork_child(void);

#endif
