/* Large host copies with non-temporal stores (copy_stream_internal.h).
 *
 * Why: a move copies a large span in chunks of SW_TRANSFER_CHUNK_BYTES
 * (8 MiB), so that progress moves and faults can be injected between
 * them. glibc's memcpy writes around the caches only from its own
 * threshold up (48 MiB on the 2-CPU machines we measure on), judging by
 * the size of one call, so every chunk was copied with ordinary stores:
 * each destination line was first read from memory, then written back,
 * three memory transfers a line where two suffice. A C loop over 256 MiB
 * (source cold, destination touched), 8 MiB at a time: 43.0 ms with
 * memcpy, 24.7 ms with this loop, 26.6 ms for one memcpy of the whole
 * (which streams); into fresh memory 58.5, 51.3 and 56.4 ms. At 16 MiB:
 * 2.60 against 1.66 ms touched, 4.04 against 3.55 fresh. A move nobody
 * waits for at once streams from 16 KiB (copy_stream_internal.h): 256 of
 * 16 KiB in flight (bench/sweep.py) went from 0.95x np.copyto to 1.28x.
 *
 * The loop: 64 bytes a round, loaded unaligned and stored aligned with
 * SSE2's streaming store (every x86-64 CPU has it), the source prefetched
 * 512 bytes ahead without filling the caches. 32-byte AVX stores and
 * glibc's four interleaved pages measured slower here (35.2 and 32.0 ms). */
#include "copy_stream_internal.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <emmintrin.h>

#define LINE ((size_t)64)

void sw_copy_stream(void *dst, const void *src, size_t n)
{
    char *d = dst;
    const char *s = src;
    size_t head = (size_t)(-(uintptr_t)d & (LINE - 1)); /* to d's next line */
    if (head > n)
        head = n;
    memcpy(d, s, head);
    d += head;
    s += head;
    n -= head;
    size_t body = n & ~(LINE - 1);
    for (size_t i = 0; i < body; i += LINE) {
        _mm_prefetch(s + i + 8 * LINE, _MM_HINT_NTA);
        __m128i a = _mm_loadu_si128((const __m128i *)(s + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(s + i + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(s + i + 32));
        __m128i e = _mm_loadu_si128((const __m128i *)(s + i + 48));
        _mm_stream_si128((__m128i *)(d + i), a);
        _mm_stream_si128((__m128i *)(d + i + 16), b);
        _mm_stream_si128((__m128i *)(d + i + 32), c);
        _mm_stream_si128((__m128i *)(d + i + 48), e);
    }
    /* Streaming stores are weakly ordered: fence them before whoever
     * hears that the copy is done reads the destination. */
    _mm_sfence();
    memcpy(d + body, s + body, n - body);
}

#else

void sw_copy_stream(void *dst, const void *src, size_t n)
{
    memcpy(dst, src, n);
}

#endif
