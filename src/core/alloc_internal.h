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

/* Bytes the small cache keeps over its budgets (moved sources' blocks; for
 * the C tests; 0 under ASan). */
int64_t sw_alloc_small_excess_bytes(void);

/* ---- the small cache's excess, freed in the background (alloc_excess.c) --- */

/* A moved source's block of this size and up may be kept over the small
 * cache's budgets (alloc.c); smaller ones are freed at once. */
#define SW_ALLOC_EXCESS_MIN ((size_t)64 << 10)

/* Up to `max` of the oldest small blocks kept over the budgets, taken out
 * of the cache until at most its keep mark is over (alloc.c); how many.
 * The caller frees them. */
int sw_alloc_take_excess(void **batch, int max);

/* The cache passed its wake mark: the thread takes and frees the excess
 * (started now if needed; when it cannot start, the excess stays until
 * sw_alloc_trim). */
void sw_alloc_excess_wake(void);

/* Wait until a batch the thread took is freed (sw_alloc_trim). */
void sw_alloc_excess_wait_idle(void);

/* fork(): no batch in the thread's hands, and its lock held across
 * (sw_alloc_fork_*; taken before the cache's lock). */
void sw_alloc_excess_fork_prepare(void);
void sw_alloc_excess_fork_parent(void);
void sw_alloc_excess_fork_child(void);

#endif
