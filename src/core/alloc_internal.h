/* Allocator internals shared with the core's own block pools (never
 * installed). */
#ifndef SW_ALLOC_INTERNAL_H
#define SW_ALLOC_INTERNAL_H

#include <stdint.h>

/* A pool handed out (delta > 0) or took back (delta < 0) `delta` bytes of
 * its own blocks: counted in sw_alloc_live_bytes like sw_malloc's, so a
 * leaked pooled block shows there too. */
void sw_alloc_count_live(int64_t delta);

#endif
