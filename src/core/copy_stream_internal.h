/* Large host copies that write around the CPU caches (copy_stream.c). */
#ifndef SW_COPY_STREAM_INTERNAL_H
#define SW_COPY_STREAM_INTERNAL_H

#include <stddef.h>

/* A host span copy of this many bytes or more streams its stores
 * (sw_copy_stream): a destination that large does not stay in the caches
 * anyway. */
#define SW_COPY_STREAM_MIN_BYTES ((size_t)16 << 20)

/* memcpy(dst, src, n) of non-overlapping host buffers whose stores bypass
 * the CPU caches (non-temporal), so that writing a destination line does
 * not first read it from memory. Every store is visible to other threads
 * once it returns (it ends with a store fence). Plain memcpy where the
 * CPU has no such stores. */
void sw_copy_stream(void *dst, const void *src, size_t n);

#endif
