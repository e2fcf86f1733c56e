/* Monotonic clock used by profiling and benchmarks.
 *
 * Ownership: nothing to own; no state, no allocation.
 * Threads: sw_clock_ns is thread-safe (CLOCK_MONOTONIC) and needs no GIL. */
#ifndef STRIDEWEAVE_CLOCK_H
#define STRIDEWEAVE_CLOCK_H

#include "strideweave/export.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Nanoseconds from an arbitrary origin; never goes backwards. */
SW_API uint64_t sw_clock_ns(void);

#ifdef __cplusplus
}
#endif

#endif
