/* Host copies with streaming stores (copy_stream_internal.h) and the
 * transfers that use them: every byte copied at any alignment of either
 * side and any length, nothing written outside the destination, and large
 * host span transfers, whole or in parallel parts, with their values and
 * progress. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "copy_stream_internal.h"
#include "parallel_internal.h"
#include "transfer_internal.h"

#define GUARD 80

static unsigned char pattern(size_t i, unsigned seed)
{
    return (unsigned char)(i * 131u + seed * 17u + (i >> 8));
}

/* One copy of n bytes from src + so to dst + dof, with GUARD bytes either
 * side of the destination that must stay as they were. */
static void one_copy(size_t n, size_t so, size_t dof, unsigned seed)
{
    unsigned char *src = malloc(n + so + 1), *dst = malloc(n + dof + 2 * GUARD);
    CHECK(src && dst);
    for (size_t i = 0; i < n + so + 1; i++)
        src[i] = pattern(i, seed);
    memset(dst, 0xA5, n + dof + 2 * GUARD);
    sw_copy_stream(dst + GUARD + dof, src + so, n);
    CHECK(memcmp(dst + GUARD + dof, src + so, n) == 0);
    size_t bad = 0;
    for (size_t i = 0; i < GUARD + dof; i++)
        bad += dst[i] != 0xA5;
    for (size_t i = GUARD + dof + n; i < n + dof + 2 * GUARD; i++)
        bad += dst[i] != 0xA5;
    CHECK_EQ_I64((int64_t)bad, 0);
    free(src);
    free(dst);
}

static void test_every_alignment_and_tail(void)
{
    static const size_t sizes[] = {0, 1, 15, 16, 63, 64, 65, 127, 128, 129, 511, 4095, 4096, 65537};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        for (size_t so = 0; so < 64; so += 7)
            for (size_t dof = 0; dof < 64; dof += 5)
                one_copy(sizes[k], so, dof, (unsigned)(k + so + dof));
}

static void test_random_lengths(void)
{
    srand(7);
    for (int i = 0; i < 300; i++)
        one_copy((size_t)rand() % (1 << 18), (size_t)rand() % 64, (size_t)rand() % 64,
                 (unsigned)i);
}

/* A host span of `bytes` (+ 3 odd slots) moved by a transfer, whole or in
 * parallel parts, waited for at once or not (`unwaited`: smaller spans
 * stream): values, and progress adding up to the span. */
static void span_transfer(size_t bytes, int parallel, int unwaited)
{
    size_t n = bytes / 4 + 3;
    uint32_t *src = malloc(n * 4), *dst = malloc((n + 1) * 4);
    CHECK(src && dst);
    for (size_t i = 0; i < n; i++)
        src[i] = (uint32_t)(i * 2654435761u);
    memset(dst, 0, (n + 1) * 4);
    int64_t progress = 0;
    sw_transfer t = {.src = {SW_ENDPOINT_HOST, src, -1, 0},
                     .dst = {SW_ENDPOINT_HOST, dst, -1, 1}, /* one slot in: unaligned */
                     .itemsize = 4,
                     .bulk = 1,
                     .cosize = (int64_t)n,
                     .progress = &progress,
                     .unwaited = unwaited};
    sw_error err;
    sw_status st = parallel ? sw_transfer_run_parallel(&t, 0, NULL, &err) : sw_transfer_run(&t, &err);
    CHECK(st == SW_OK);
    CHECK(dst[0] == 0);
    CHECK(memcmp(dst + 1, src, n * 4) == 0);
    CHECK_EQ_I64(progress, (int64_t)(n * 4));
    free(src);
    free(dst);
}

static void large_span_transfers(void)
{
    span_transfer(SW_COPY_STREAM_MIN_BYTES - 64, 0, 0); /* below: plain copies */
    span_transfer(SW_COPY_STREAM_MIN_BYTES, 0, 0);
    span_transfer((size_t)40 << 20, 0, 0);
    span_transfer((size_t)40 << 20, 1, 0); /* parts on the helpers */
    span_transfer(SW_COPY_STREAM_UNWAITED_MIN_BYTES - 64, 0, 1);
    span_transfer(SW_COPY_STREAM_UNWAITED_MIN_BYTES, 0, 1);
    span_transfer((size_t)1 << 20, 0, 1); /* the partner's sizes */
    span_transfer((size_t)40 << 20, 1, 1);
}

/* The spans as a machine where streaming pays copies them, and as one
 * where it does not (copy_stream.c), whichever this one is. */
static void test_large_span_transfers(void)
{
    for (int pays = 1; pays >= 0; pays--) {
        sw_copy_stream_set_pays(pays);
        CHECK(sw_copy_stream_pays() == pays);
        large_span_transfers();
    }
    sw_copy_stream_set_pays(-1);
    int found = sw_copy_stream_pays();
    CHECK(found == 0 || found == 1);
    CHECK(sw_copy_stream_pays() == found); /* found once, then kept */
}

int main(void)
{
    test_every_alignment_and_tail();
    test_random_lengths();
    test_large_span_transfers();
    return check_report("copy_stream");
}
