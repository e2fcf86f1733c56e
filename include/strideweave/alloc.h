/* Counted, aligned host allocations.
 *
 * Every byte the core hands out goes through sw_malloc/sw_calloc so that
 * sw_alloc_live_bytes() can prove the absence of leaks: tracemalloc cannot
 * see C allocations. Pointers are aligned to SW_ALIGNMENT bytes (blocks of
 * 1 MiB or more to a 4096-byte page).
 *
 * Ownership: a block from sw_malloc/sw_calloc belongs to the caller until
 * sw_free; a pin (sw_alloc_pin) is a count the pinner drops once.
 *
 * Threads: every call is thread-safe. (The fault-injection switchboard the
 * tests use, which can make allocations fail: strideweave/testing.h.) */
#ifndef STRIDEWEAVE_ALLOC_H
#define STRIDEWEAVE_ALLOC_H

#include "strideweave/export.h"

#include <stddef.h>
#include <stdint.h>

#include "strideweave/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SW_ALIGNMENT 64

/* NULL on failure (or when the "alloc" fault fires). sw_malloc(0) returns a
 * valid unique pointer. */
SW_API void *sw_malloc(size_t bytes);
/* Zero-filled; large blocks come from calloc's mmap path, so untouched pages
 * cost nothing. Overflow of count*size returns NULL. */
SW_API void *sw_calloc(size_t count, size_t size);
SW_API void sw_free(void *p);
/* Freed blocks of 1 MiB or more are kept (up to 64 blocks, 64 MiB; when it
 * is full, the oldest blocks of other sizes make room) and reused by later
 * allocations of about the same size, so repeated tensor computations do
 * not fault fresh pages in each time; freed blocks from
 * 4 KiB are kept too (up to 16 MiB, 256 blocks of each of 8 sizes) for
 * later allocations of exactly their size. A pinned block is kept only
 * after its last unpin. This returns them all to the system. Cached
 * blocks are not live bytes. */
SW_API void sw_alloc_trim(void);
/* Bytes requested for a live block from sw_malloc/sw_calloc. */
SW_API size_t sw_alloc_size(const void *p);
/* Sum of the requested sizes of all live blocks. A quarantined block (see
 * sw_alloc_pin) stays live until its last pin is dropped. */
SW_API int64_t sw_alloc_live_bytes(void);

/* Export pins. While something outside the owner can still reach a block's
 * memory (a DLPack consumer's array), the block is pinned; sw_free of a
 * pinned block quarantines it instead of freeing it: the whole pages inside
 * the block are handed back to the kernel and replaced by private zero
 * pages (madvise MADV_DONTNEED), and the block's address range stays
 * reserved, so nothing else is ever placed there. Blocks smaller than a
 * page simply wait. The last sw_alloc_unpin of a quarantined block frees it.
 * Stale reads through the pinned range then see zeros or old values, stale
 * writes land only in the quarantined block.
 *
 * sw_alloc_pin needs a live (not yet freed) block. Pins, unpins and the
 * sw_free of a pinned block must be serialized by the caller (the extension
 * does all three holding the GIL), which keeps an export free of atomic
 * instructions. NULL is ignored by both. */
SW_API void sw_alloc_pin(void *p);
SW_API void sw_alloc_unpin(void *p);

#ifdef __cplusplus
}
#endif

#endif
