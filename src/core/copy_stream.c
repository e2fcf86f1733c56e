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
 * Only where the last-level cache is small (sw_copy_stream_pays): the
 * figures above are from a VM whose sysfs shows an 8 MiB L3. On one that
 * shows 480 MiB, streaming lost at every size: the same 256 MiB loop,
 * source cold, 42.6 ms streamed against 39.8 with memcpy, source in the
 * cache 44.1 against 26.6, into fresh memory 102 against 76; and
 * bench/sweep.py cpu->cpu went from 2.05x np.copyto to 1.62x (single
 * 256 MiB), 0.99x to 0.69x (single 16 MiB) and 0.91x to 0.46x (256 of
 * 16 KiB in flight) with streaming on. The cache's size stands for what
 * these figures cannot be had from at run time; a machine whose cache
 * holds 32 MiB or less is taken to be like the first.
 *
 * The loop: 64 bytes a round, loaded unaligned and stored aligned with
 * SSE2's streaming store (every x86-64 CPU has it), the source prefetched
 * 512 bytes ahead without filling the caches. 32-byte AVX stores and
 * glibc's four interleaved pages measured slower here (35.2 and 32.0 ms). */
#include "copy_stream_internal.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* ---- whether streaming pays here ---------------------------------------- */

/* The number (with its K/M/G suffix applied) in sysfs's file `name` of
 * CPU 0's cache index `i`, or 0 when there is none. */
static int64_t cache_value(int i, const char *name)
{
    char path[96];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/%s", i, name);
    FILE *f = fopen(path, "r");
    int64_t v = 0;
    char unit = 0;
    if (!f)
        return 0;
    if (fscanf(f, "%" SCNd64 "%c", &v, &unit) < 1)
        v = 0;
    fclose(f);
    return unit == 'K' ? v << 10 : unit == 'M' ? v << 20 : unit == 'G' ? v << 30 : v;
}

/* The last-level cache's size as sysfs shows it (what lscpu prints): the
 * largest index of the highest level; else as the C library finds it;
 * else 0 (unknown). */
static int64_t last_level_cache_bytes(void)
{
    int64_t best = 0, best_level = 0;
    for (int i = 0; i < 16; i++) {
        int64_t level = cache_value(i, "level"), size = cache_value(i, "size");
        if (size > 0 && (level > best_level || (level == best_level && size > best))) {
            best = size;
            best_level = level;
        }
    }
#ifdef _SC_LEVEL3_CACHE_SIZE
    if (best == 0) {
        long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
        best = l3 > 0 ? l3 : 0;
    }
#endif
    return best;
}

/* -1 until found; threads that find it at once find the same answer. */
static _Atomic int pays = -1;

int sw_copy_stream_pays(void)
{
    int v = atomic_load_explicit(&pays, memory_order_relaxed);
    if (v < 0) {
        /* an unknown cache is taken to be small, as where this was measured first */
        v = last_level_cache_bytes() <= SW_COPY_STREAM_MAX_CACHE_BYTES;
        atomic_store_explicit(&pays, v, memory_order_relaxed);
    }
    return v;
}

void sw_copy_stream_set_pays(int v)
{
    atomic_store_explicit(&pays, v < 0 ? -1 : v != 0, memory_order_relaxed);
}

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
