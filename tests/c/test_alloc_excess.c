/* What the small cache keeps over its budgets (alloc.c, alloc_excess.c,
 * issue 19): blocks of 64 KiB up to 1 MiB freed while a move releases its
 * source are kept past the budgets, up to 8 MiB over, and serve the next
 * allocations of their size like any cached block; a background thread,
 * woken once 4 MiB are over, frees the oldest down to 2 MiB over. Smaller
 * and larger blocks, and frees outside a move's release, keep to the
 * budgets. sw_alloc_trim frees it all, fork() leaves the child a cache
 * that works, and it holds under threads (run under TSan too). ASan builds
 * keep nothing, so use after free is still seen at the free. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "fork_child.h"
#include "helpers.h"
#include "strideweave/alloc.h"
#include <strideweave/strideweave.h>
#include "alloc_internal.h"
#include "core_thread_internal.h"

#if defined(__SANITIZE_ADDRESS__)
#define CACHED 0
#else
#define CACHED 1
#endif

#define KIB ((size_t)1 << 10)
#define MIB ((int64_t)1 << 20)
enum { MOST = 300 };

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* n blocks of `size` allocated, then freed in a row, as a move's release
 * frees (`in_move`) or not, their addresses left in `freed` (NULL: not
 * kept); answers the cache's excess bytes. */
static int64_t freed_in_a_row_at(int n, size_t size, int in_move, void **freed)
{
    void *blocks[MOST];
    if (n > MOST) {
        CHECK(n <= MOST);
        return -1;
    }
    for (int i = 0; i < n; i++)
        CHECK((blocks[i] = sw_malloc(size)) != NULL);
    sw_core_thread_state.defer_frees = in_move;
    for (int i = 0; i < n; i++)
        sw_free(blocks[i]);
    sw_core_thread_state.defer_frees = 0;
    if (freed)
        memcpy(freed, blocks, (size_t)n * sizeof blocks[0]);
    return sw_alloc_small_excess_bytes();
}

static int64_t freed_in_a_row(int n, size_t size, int in_move)
{
    return freed_in_a_row_at(n, size, in_move, NULL);
}

/* 24 moved sources of 64 KiB (1.5 MiB): every one is kept, about half a
 * MiB of them over the 1 MiB budget, uncounted as live, until sw_alloc_trim
 * frees them. */
static void test_kept_until_trim(void)
{
    sw_alloc_trim();
    int64_t live = sw_alloc_live_bytes();
    int64_t excess = freed_in_a_row(24, 64 * KIB, 1);
    CHECK_EQ_I64(sw_alloc_cached_small_blocks(), CACHED ? 24 : 0);
    CHECK(CACHED ? excess > MIB / 2 && excess < MIB : excess == 0);
    CHECK_EQ_I64(sw_alloc_live_bytes(), live);
    sw_alloc_trim();
    CHECK_EQ_I64(sw_alloc_cached_small_blocks(), 0);
    CHECK_EQ_I64(sw_alloc_small_excess_bytes(), 0);
    CHECK_EQ_I64(sw_alloc_live_bytes(), live);
}

/* A block kept over the budget serves the next allocation of its exact
 * size, the last freed first, already mapped: carriers made after a run
 * of moves reuse their sources' memory. Another size does not take it. */
static void test_kept_block_serves_its_size(void)
{
    enum { FREED = 24 };
    sw_alloc_trim();
    void *blocks[FREED];
    int64_t excess = freed_in_a_row_at(FREED, 64 * KIB, 1, blocks);
    void *other = sw_malloc(96 * KIB);
    CHECK_EQ_I64(sw_alloc_small_excess_bytes(), excess);
    unsigned char *p = sw_calloc(1, 64 * KIB); /* zeroed all the same */
    CHECK(p != NULL);
    if (CACHED) {
        CHECK(p == blocks[FREED - 1]);
        CHECK_EQ_I64(sw_alloc_cached_small_blocks(), FREED - 1);
        CHECK(sw_alloc_small_excess_bytes() < excess);
    }
    int zero = 1;
    for (size_t i = 0; p && i < 64 * KIB; i++)
        zero &= p[i] == 0;
    CHECK(zero);
    sw_free(p);
    sw_free(other);
    sw_alloc_trim();
    CHECK_EQ_I64(sw_alloc_cached_small_blocks(), 0);
}

/* Only a move's release goes over: the same frees outside one keep to the
 * 1 MiB budget (the rest go back to malloc at once). */
static void test_only_in_a_move(void)
{
    sw_alloc_trim();
    CHECK_EQ_I64(freed_in_a_row(24, 64 * KIB, 0), 0);
    CHECK(sw_alloc_cached_small_blocks() <= 16);
    sw_alloc_trim();
}

/* Blocks under 64 KiB, and of 1 MiB or more, never go over; blocks from
 * 128 KiB on have a budget of their own (15 MiB). */
static void test_sizes_kept_to_budget(void)
{
    sw_alloc_trim();
    CHECK_EQ_I64(freed_in_a_row(300, 4 * KIB, 1), 0); /* past the stack's depth */
    sw_alloc_trim();
    CHECK_EQ_I64(freed_in_a_row(24, 60 * KIB, 1), 0);
    sw_alloc_trim();
    CHECK_EQ_I64(freed_in_a_row(80, 1024 * KIB, 1), 0); /* the large cache's */
    CHECK_EQ_I64(sw_alloc_cached_small_blocks(), 0);
    sw_alloc_trim();
    CHECK_EQ_I64(freed_in_a_row(20, 768 * KIB, 0), 0);
    CHECK_EQ_I64(sw_alloc_cached_small_blocks(), CACHED ? 19 : 0); /* 19 x 768 KiB + headers */
    sw_alloc_trim();
}

/* Past 4 MiB over, the thread is woken and frees the oldest, down to
 * 2 MiB over: once it is done, between that (less one block) and 4 MiB
 * stay over (how much depends on when it took its last batch). The oldest
 * block is gone from the cache: taking every kept block does not give it
 * back. (Blocks freed while 8 MiB were over, before the thread caught up,
 * went back to malloc at once.) */
static void test_thread_frees_past_4_mib(void)
{
    enum { FREED = 200 };
    sw_alloc_trim();
    void *blocks[FREED];
    int64_t excess = freed_in_a_row_at(FREED, 64 * KIB, 1, blocks);
    for (int waited = 0; excess >= 4 * MIB && waited < 10000; waited += 10) {
        sleep_ms(10);
        excess = sw_alloc_small_excess_bytes();
    }
    CHECK(CACHED ? excess > 2 * MIB - 65 * (int64_t)KIB && excess < 4 * MIB : excess == 0);
    int64_t kept = sw_alloc_cached_small_blocks();
    void *taken[FREED];
    for (int64_t i = 0; i < kept && i < FREED; i++) {
        taken[i] = sw_malloc(64 * KIB);
        CHECK(taken[i] != blocks[0]);
    }
    CHECK_EQ_I64(sw_alloc_cached_small_blocks(), 0);
    for (int64_t i = 0; i < kept && i < FREED; i++)
        sw_free(taken[i]);
    sw_alloc_trim();
    CHECK_EQ_I64(sw_alloc_small_excess_bytes(), 0);
    CHECK_EQ_I64(sw_alloc_cached_small_blocks(), 0);
}

/* A move from host memory releases its source into the cache: 24 moves of
 * 64 KiB, past the budget. The values arrive all the same. */
static void test_moved_sources(void)
{
    enum { MOVES = 24, N = 16384 }; /* 64 KiB of Float32 each */
    sw_alloc_trim();
    sw_error err;
    sw_carrier *dst[MOVES];
    sw_tensor *src[MOVES];
    for (int i = 0; i < MOVES; i++) {
        sw_carrier *c = cpu_values(N, (float)i);
        CHECK(c != NULL);
        src[i] = c ? flat_tensor(c, N) : NULL;
        sw_carrier_unref(c); /* the tensor holds it */
        CHECK_EQ_I64(sw_cpu_new(N, SW_DT_FLOAT32, SW_CARRIER_EMPTY, &dst[i], &err), SW_OK);
    }
    for (int i = 0; i < MOVES; i++) {
        sw_tensor *r = NULL;
        CHECK_EQ_I64(sw_move(src[i], dst[i], &r, &err), SW_OK);
        const float *p = sw_cpu_pointer(dst[i]);
        CHECK(p && p[0] == (float)i && p[N - 1] == (float)i + (float)(N - 1));
        sw_tensor_unref(r);
        sw_tensor_unref(src[i]);
    }
    CHECK_EQ_I64(sw_alloc_cached_small_blocks(), CACHED ? MOVES : 0);
    int64_t excess = sw_alloc_small_excess_bytes();
    CHECK(CACHED ? excess > MIB / 2 : excess == 0);
    for (int i = 0; i < MOVES; i++)
        sw_carrier_unref(dst[i]);
    sw_alloc_trim();
    CHECK_EQ_I64(sw_alloc_small_excess_bytes(), 0);
}

/* fork() with blocks over the budget: the child's cache is its own, and a
 * run of moved sources there wakes a thread of its own. */
static void test_fork(void)
{
    sw_alloc_trim();
    int64_t excess = freed_in_a_row(24, 64 * KIB, 1);
    CHECK(CACHED ? excess > 0 : excess == 0);
    pid_t pid = fork();
    if (pid == 0) {
        EXPECT(sw_alloc_small_excess_bytes() == excess, 1);
        if (CHILD_STARTS_THREADS) {
            int64_t e = freed_in_a_row(200, 64 * KIB, 1);
            for (int waited = 0; e >= 4 * MIB && waited < 10000; waited += 10) {
                sleep_ms(10);
                e = sw_alloc_small_excess_bytes();
            }
            EXPECT(e < 4 * MIB, 2);
        }
        sw_alloc_trim();
        EXPECT(sw_alloc_small_excess_bytes() == 0, 3);
        _exit(0);
    }
    reap(pid, "fork with blocks over the budget");
    CHECK_EQ_I64(sw_alloc_small_excess_bytes(), excess);
    sw_alloc_trim();
}

/* Threads freeing in a move's release while another trims: every block is
 * freed once (each thread checks its tag before the free), and nothing
 * stays live or kept. */
enum { THREADS = 4, ROUNDS = 400, HELD = 8 };

static void *mover_main(void *arg)
{
    unsigned char tag = (unsigned char)(uintptr_t)arg;
    unsigned char *held[HELD] = {0};
    size_t bytes[HELD] = {0};
    int bad = 0;
    for (int r = 0; r < ROUNDS; r++) {
        int k = r % HELD;
        if (held[k]) {
            for (size_t i = 0; i < bytes[k]; i += 4096)
                bad |= held[k][i] != tag;
            sw_core_thread_state.defer_frees = 1;
            sw_free(held[k]);
            sw_core_thread_state.defer_frees = 0;
        }
        bytes[k] = (size_t)(64 + 32 * ((r + tag) % 5)) * KIB;
        held[k] = sw_malloc(bytes[k]);
        if (!held[k])
            return (void *)1;
        memset(held[k], tag, bytes[k]);
    }
    sw_core_thread_state.defer_frees = 1;
    for (int k = 0; k < HELD; k++)
        sw_free(held[k]);
    sw_core_thread_state.defer_frees = 0;
    return (void *)(uintptr_t)bad;
}

static void test_threads(void)
{
    sw_alloc_trim();
    int64_t live = sw_alloc_live_bytes();
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, mover_main, (void *)(uintptr_t)(i + 1)) == 0);
    for (int i = 0; i < 50; i++)
        sw_alloc_trim();
    for (int i = 0; i < THREADS; i++) {
        void *bad = NULL;
        pthread_join(t[i], &bad);
        CHECK(bad == NULL);
    }
    CHECK_EQ_I64(sw_alloc_live_bytes(), live);
    sw_alloc_trim();
    CHECK_EQ_I64(sw_alloc_small_excess_bytes(), 0);
    CHECK_EQ_I64(sw_alloc_cached_small_blocks(), 0);
}

int main(void)
{
    test_kept_until_trim();
    test_kept_block_serves_its_size();
    test_only_in_a_move();
    test_sizes_kept_to_budget();
    test_thread_frees_past_4_mib();
    test_moved_sources();
    test_fork();
    test_threads();
    return check_report("alloc_excess");
}
