/* Large host copies that write around the CPU caches (copy_stream.c). */
#ifndef SW_COPY_STREAM_INTERNAL_H
#define SW_COPY_STREAM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A host span copy of this many bytes or more streams its stores
 * (sw_copy_stream): a destination that large does not stay in the caches
 * anyway. */
#define SW_COPY_STREAM_MIN_BYTES ((size_t)16 << 20)

/* ... and from this many on when nobody waits for it at once (a move in
 * flight, sw_transfer's unwaited): its destination is read later, if at
 * all, by when a run of such moves has pushed it out of the caches. A C
 * loop over 256 cold 16 KiB buffers: 3.33 us a copy with memcpy, 2.82
 * streamed, and reading each destination afterwards took as long either
 * way (1.58 and 1.61 us); at 4 KiB (1 MiB in all, which the caches still
 * held) streaming saved 0.16 us a copy and cost 0.23 us a read. A single
 * move (its caller waits) keeps its destination in the caches for the
 * code that reads it next. */
#define SW_COPY_STREAM_UNWAITED_MIN_BYTES ((size_t)16 << 10)

/* Whether streaming pays on this machine at all: its last-level cache is
 * at most SW_COPY_STREAM_MAX_CACHE_BYTES (copy_stream.c says why). Found
 * once; the size rules above apply only where it does. */
#define SW_COPY_STREAM_MAX_CACHE_BYTES ((int64_t)32 << 20)
int sw_copy_stream_pays(void);
/* Tests: take streaming to pay (1) or not (0) whatever the machine, or
 * find it again (-1). */
void sw_copy_stream_set_pays(int pays);

/* memcpy(dst, src, n) of non-overlapping host buffers whose stores bypass
 * the CPU caches (non-temporal), so that writing a destination line does
 * not first read it from memory. Every store is visible to other threads
 * once it returns (it ends with a store fence). Plain memcpy where the
 * CPU has no such stores. */
void sw_copy_stream(void *dst, const void *src, size_t n);

/* sw_copy_stream when `stream`, else memcpy. */
static inline void sw_copy_stream_if(void *dst, const void *src, size_t n, int stream)
{
    if (stream)
        sw_copy_stream(dst, src, n);
    else
        memcpy(dst, src, n);
}

#endif
