/* The reuse cache of freed 4 KiB - 1 MiB blocks (alloc.c, issue 19): a freed
 * block comes back only to an allocation of its exact size, never while it
 * is pinned (exported through DLPack), is bounded, goes back to the system
 * at sw_alloc_trim, and holds under threads (run under TSan too). */
#include <stdint.h>
#include <string.h>

#include "alloc_churn.h"
#include "check.h"
#include "strideweave/alloc.h"
#include "alloc_internal.h"

#if defined(__SANITIZE_ADDRESS__)
#define CACHED 0 /* ASan builds skip the cache so it sees every use after free */
#else
#define CACHED 1
#endif

static void test_exact_size_reuse(void)
{
    sw_alloc_trim();
    int64_t live = sw_alloc_live_bytes();
    unsigned char *a = sw_malloc(16 << 10);
    CHECK(a != NULL);
    memset(a, 0xAB, 16 << 10);
    sw_free(a);
    CHECK_EQ_I64(sw_alloc_live_bytes(), live); /* cached blocks are not live */
    CHECK_EQ_I64(sw_alloc_cached_small_blocks(), CACHED);
    unsigned char *other = sw_malloc(12 << 10); /* another size: not that block */
    CHECK(other != NULL);
    CHECK_EQ_I64(sw_alloc_cached_small_blocks(), CACHED);
    unsigned char *b = sw_malloc(16 << 10);
    CHECK(b != NULL && b != other);
    if (CACHED)
        CHECK(b == a);
    CHECK_EQ_I64(sw_alloc_cached_small_blocks(), 0);
    CHECK_EQ_I64(sw_alloc_size(b), 16 << 10);
    CHECK_EQ_I64(sw_alloc_live_bytes() - live, (16 << 10) + (12 << 10));
    unsigned char *z = sw_calloc(1, 16 << 10); /* zeroed, from the cache or not */
    sw_free(b);
    unsigned char *zc = sw_calloc(1, 16 << 10);
    int zero = 1;
    for (int i = 0; i < 16 << 10; i++)
        zero &= z[i] == 0 && zc[i] == 0;
    CHECK(zero);
    sw_free(z);
    sw_free(zc);
    sw_free(other);
    sw_alloc_trim();
    CHECK_EQ_I64(sw_alloc_cached_small_blocks(), 0);
    CHECK_EQ_I64(sw_alloc_live_bytes(), live);
}

/* C-15a: memory still exported is never handed out again. A pinned block
 * freed by its owner waits in quarantine, not in the cache; only its last
 * unpin makes it reusable. */
static void test_pinned_block_not_reused(void)
{
    sw_alloc_trim();
    unsigned char *p = sw_malloc(64 << 10);
    CHECK(p != NULL);
    sw_alloc_pin(p);
    sw_free(p);
    CHECK_EQ_I64(sw_alloc_cached_small_blocks(), 0);
    unsigned char *q = sw_malloc(64 << 10);
    CHECK(q != NULL && q != p);
    sw_free(q);
    unsigned char *r = sw_malloc(64 << 10); /* q's block, if cached */
    CHECK(r != p);
    sw_alloc_unpin(p); /* the last pin: now free, and cacheable */
    CHECK_EQ_I64(sw_alloc_cached_small_blocks(), CACHED);
    unsigned char *s = sw_malloc(64 << 10);
    if (CACHED)
        CHECK(s == p);
    sw_free(r);
    sw_free(s);
    sw_alloc_trim();
}

/* n blocks of `size` allocated, then all freed (the cache sees n frees in
 * a row); returns how many blocks the cache then holds. */
enum { MOST_IN_A_ROW = 300 };
static int64_t freed_in_a_row(int n, size_t size)
{
    void *blocks[MOST_IN_A_ROW];
    if (n > MOST_IN_A_ROW) {
        CHECK(n <= MOST_IN_A_ROW);
        return -1;
    }
    for (int i = 0; i < n; i++)
        CHECK((blocks[i] = sw_malloc(size)) != NULL);
    for (int i = 0; i < n; i++)
        sw_free(blocks[i]);
    return sw_alloc_cached_small_blocks();
}

/* Bounded: past the depth of one size the rest go back to malloc, and a
 * block too small or too large for it never waits here. */
static void test_bounded(void)
{
    sw_alloc_trim();
    int64_t kept = freed_in_a_row(300, 4 << 10);
    CHECK(CACHED ? kept > 200 && kept <= 256 : kept == 0); /* depth 256, 1 MiB of them */
    sw_alloc_trim();
    sw_free(sw_malloc(1000));
    sw_free(sw_malloc((size_t)2 << 20));
    CHECK_EQ_I64(sw_alloc_cached_small_blocks(), 0);
    /* more sizes than stacks: the ninth size is not kept */
    void *sized[9];
    for (int i = 0; i < 9; i++)
        sized[i] = sw_malloc((size_t)(8 + i) << 10);
    for (int i = 0; i < 9; i++)
        sw_free(sized[i]);
    CHECK_EQ_I64(sw_alloc_cached_small_blocks(), (CACHED ? 8 : 0));
    sw_alloc_trim();
}

/* The cache keeps at most 1 MiB of blocks under 128 KiB, about what the
 * CPU caches still hold of memory freed a moment ago: 64 freed blocks of
 * 64 KiB (4 MiB) leave at most 16 here and the rest go back to malloc,
 * whose next allocations reuse the memory freed last. (With 16 MiB kept, a sweep round's destinations
 * were cold blocks a round old: bench/sweep.py cpu->cpu single 16-64 KiB,
 * issue 19.) */
static void test_byte_budget(void)
{
    sw_alloc_trim();
    int64_t kept = freed_in_a_row(64, 64 << 10);
    CHECK(CACHED ? kept >= 8 && kept * (64 << 10) <= (1 << 20) : kept == 0);
    sw_alloc_trim();
    CHECK_EQ_I64(sw_alloc_cached_small_blocks(), 0);
}

/* Threads allocating and freeing 4-12 KiB blocks: no block is ever handed
 * to two owners at once. */
static void test_threads(void)
{
    churn_threads((size_t)4 << 10, 3000);
    sw_alloc_trim();
    CHECK_EQ_I64(sw_alloc_cached_small_blocks(), 0);
}

int main(void)
{
    test_exact_size_reuse();
    test_pinned_block_not_reused();
    test_bounded();
    test_byte_budget();
    test_threads();
    return check_report("alloc_small_cache");
}
