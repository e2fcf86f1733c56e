/* The reuse cache of freed blocks of 1 MiB and more (alloc.c, issue 19): it
 * holds a run of 1 MiB blocks (a move releases its source, and each one
 * sent to free() paid a heap trim), stays within its budget, follows the
 * sizes in use when it is full, and holds under threads (run under TSan
 * too). */
#include <stdint.h>

#include "alloc_churn.h"
#include "check.h"
#include "strideweave/alloc.h"
#include "alloc_internal.h"

#if defined(__SANITIZE_ADDRESS__)
#define CACHED 0 /* ASan builds skip the cache so it sees every use after free */
#else
#define CACHED 1
#endif

#define MIB ((size_t)1 << 20)
enum { MOST = 80 };

static void alloc_n(void **blocks, int n, size_t size)
{
    for (int i = 0; i < n; i++)
        CHECK((blocks[i] = sw_malloc(size)) != NULL);
}

static void free_n(void **blocks, int n)
{
    for (int i = 0; i < n; i++)
        sw_free(blocks[i]);
}

/* A run of 64 freed 1 MiB blocks (64 MiB of sources, as 64 moves of 1 MiB
 * release them) is nearly all kept, within the 64 MiB budget, and the next
 * 64 allocations of that size take them all. */
static void test_run_of_one_mib_blocks(void)
{
    sw_alloc_trim();
    void *blocks[64];
    alloc_n(blocks, 64, MIB);
    free_n(blocks, 64);
    int64_t kept = sw_alloc_cached_large_blocks();
    CHECK(CACHED ? kept >= 60 && kept <= 64 : kept == 0);
    void *again[64];
    alloc_n(again, 64, MIB); /* taken from the cache: none left there */
    CHECK_EQ_I64(sw_alloc_cached_large_blocks(), 0);
    free_n(again, 64);
    sw_alloc_trim();
    CHECK_EQ_I64(sw_alloc_cached_large_blocks(), 0);
}

/* Full of 8 MiB blocks, the cache makes room for 1 MiB ones by dropping
 * the oldest 8 MiB blocks, and only as many as it needs: it then holds all
 * 16 freed blocks of the size now in use, and some 8 MiB ones still. (The
 * addresses cannot tell: malloc hands a block it was given back out too.)
 * A block is not kept when only blocks of its own size stand in its way,
 * and then nothing is dropped. */
static void test_follows_sizes_in_use(void)
{
    sw_alloc_trim();
    void *big[8], *small[16];
    alloc_n(big, 8, 8 * MIB);
    free_n(big, 8);
    int64_t bigs = sw_alloc_cached_large_blocks();
    CHECK(CACHED ? bigs == 7 : bigs == 0); /* the eighth passes the budget */
    alloc_n(small, 16, MIB);
    free_n(small, 16);
    int64_t after = sw_alloc_cached_large_blocks();
    CHECK(CACHED ? after > 16 && after < bigs + 16 : after == 0);

    /* 7 blocks of 8 MiB and one of 1 MiB: another 8 MiB block would need
     * room that only dropping 8 MiB blocks could make, so it is not kept,
     * and the 1 MiB block is not dropped for nothing. */
    sw_alloc_trim();
    alloc_n(big, 8, 8 * MIB);
    alloc_n(small, 1, MIB);
    free_n(big, 7);
    free_n(small, 1);
    CHECK_EQ_I64(sw_alloc_cached_large_blocks(), CACHED ? 8 : 0);
    sw_free(big[7]);
    CHECK_EQ_I64(sw_alloc_cached_large_blocks(), CACHED ? 8 : 0);

    sw_alloc_trim();
    void *run[MOST];
    alloc_n(run, MOST, MIB);
    free_n(run, MOST - 1);
    int64_t full = sw_alloc_cached_large_blocks();
    CHECK(CACHED ? full >= 60 && full < MOST - 1 : full == 0);
    sw_free(run[MOST - 1]);
    CHECK_EQ_I64(sw_alloc_cached_large_blocks(), full);
    sw_alloc_trim();
}

/* Threads allocating and freeing 1-3 MiB blocks (evictions among them): no
 * block is ever handed to two owners at once. */
static void test_threads(void)
{
    churn_threads(MIB, 400);
    sw_alloc_trim();
    CHECK_EQ_I64(sw_alloc_cached_large_blocks(), 0);
}

int main(void)
{
    test_run_of_one_mib_blocks();
    test_follows_sizes_in_use();
    test_threads();
    return check_report("alloc_large_cache");
}
