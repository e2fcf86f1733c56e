/* Freeing a moved source's memory in the background (alloc_later.c, issue
 * 19): blocks of 64 KiB up to 1 MiB that the reuse caches refuse, freed
 * while a move releases its source, wait for a background thread, which
 * is woken once 4 MiB of them are queued and frees the oldest down to
 * 2 MiB; meanwhile a queued block serves an allocation of its size. Smaller and
 * larger blocks, and frees outside a move's release, are freed at once.
 * The queue empties at sw_alloc_trim and before fork(), and holds under
 * threads (run under TSan too). ASan builds free everything at once, so
 * use after free is still seen at the free. */
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
#define LATER 0
#else
#define LATER 1
#endif

#define KIB ((size_t)1 << 10)
enum { MOST = 300 };

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* n blocks of `size` allocated, then freed in a row, as a move's release
 * frees (`in_move`) or not; answers how many of them wait in the queue. */
static int64_t freed_in_a_row(int n, size_t size, int in_move)
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
    return sw_alloc_later_queued_blocks();
}

/* Less than 4 MiB past what the small cache keeps: those blocks wait,
 * uncounted as live, until sw_alloc_trim frees them. */
static void test_queued_until_trim(void)
{
    sw_alloc_trim();
    int64_t live = sw_alloc_live_bytes();
    int64_t queued = freed_in_a_row(24, 64 * KIB, 1);
    int64_t cached = sw_alloc_cached_small_blocks();
    CHECK_EQ_I64(queued, LATER ? 24 - cached : 0);
    if (LATER)
        CHECK(queued >= 8); /* the cache keeps at most 1 MiB of them */
    CHECK_EQ_I64(sw_alloc_live_bytes(), live);
    sw_alloc_trim();
    CHECK_EQ_I64(sw_alloc_later_queued_blocks(), 0);
    CHECK_EQ_I64(sw_alloc_live_bytes(), live);
}

/* Until the thread frees it, a queued block serves the next allocation of
 * its exact size (the last queued first), already mapped: carriers made
 * after a run of moves reuse their sources' memory. Another size does not
 * take it. */
static void test_queued_block_serves_its_size(void)
{
    enum { FREED = 24 };
    sw_alloc_trim();
    void *blocks[FREED];
    for (int i = 0; i < FREED; i++)
        CHECK((blocks[i] = sw_malloc(64 * KIB)) != NULL);
    sw_core_thread_state.defer_frees = 1;
    for (int i = 0; i < FREED; i++)
        sw_free(blocks[i]);
    sw_core_thread_state.defer_frees = 0;
    int64_t queued = sw_alloc_later_queued_blocks();
    int64_t cached = sw_alloc_cached_small_blocks();
    CHECK_EQ_I64(queued, LATER ? FREED - cached : 0);
    void *other = sw_malloc(96 * KIB);
    CHECK_EQ_I64(sw_alloc_later_queued_blocks(), queued);
    void *from_cache[FREED];
    for (int i = 0; i < cached; i++)
        from_cache[i] = sw_malloc(64 * KIB);
    CHECK_EQ_I64(sw_alloc_cached_small_blocks(), 0);
    CHECK_EQ_I64(sw_alloc_later_queued_blocks(), queued);
    unsigned char *p = sw_calloc(1, 64 * KIB); /* zeroed all the same */
    CHECK(p != NULL);
    if (LATER) {
        CHECK_EQ_I64(sw_alloc_later_queued_blocks(), queued - 1);
        CHECK(p == blocks[FREED - 1]);
    }
    int zero = 1;
    for (size_t i = 0; p && i < 64 * KIB; i++)
        zero &= p[i] == 0;
    CHECK(zero);
    sw_free(p);
    sw_free(other);
    for (int i = 0; i < cached; i++)
        sw_free(from_cache[i]);
    sw_alloc_trim();
    CHECK_EQ_I64(sw_alloc_later_queued_blocks(), 0);
}

/* Only a move's release queues: the same frees outside one free at once. */
static void test_only_in_a_move(void)
{
    sw_alloc_trim();
    CHECK_EQ_I64(freed_in_a_row(24, 64 * KIB, 0), 0);
    sw_alloc_trim();
}

/* Blocks under 64 KiB, and of 1 MiB or more, never wait here. */
static void test_sizes_not_queued(void)
{
    sw_alloc_trim();
    CHECK_EQ_I64(freed_in_a_row(300, 4 * KIB, 1), 0); /* past the small cache's depth */
    sw_alloc_trim();
    CHECK_EQ_I64(freed_in_a_row(24, 60 * KIB, 1), 0);
    sw_alloc_trim();
    CHECK_EQ_I64(freed_in_a_row(80, 1024 * KIB, 1), 0); /* past the large cache's 64 */
    sw_alloc_trim();
}

/* Past 4 MiB the thread is woken and frees the oldest, down to 2 MiB (31
 * blocks of 64 KiB and their headers): once it is done, between that and
 * 4 MiB wait (how many depends on when it took its last batch). */
static void test_thread_frees_past_4_mib(void)
{
    sw_alloc_trim();
    int64_t queued = freed_in_a_row(200, 64 * KIB, 1);
    for (int waited = 0; queued >= 64 && waited < 10000; waited += 10) {
        sleep_ms(10);
        queued = sw_alloc_later_queued_blocks();
    }
    CHECK(LATER ? queued >= 31 && queued < 64 : queued == 0);
    sw_alloc_trim();
    CHECK_EQ_I64(sw_alloc_later_queued_blocks(), 0);
}

/* A move from host memory releases its source into the queue: 24 moves of
 * 64 KiB, past what the small cache keeps. The values arrive all the same. */
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
    int64_t queued = sw_alloc_later_queued_blocks();
    CHECK_EQ_I64(queued, LATER ? MOVES - sw_alloc_cached_small_blocks() : 0);
    if (LATER)
        CHECK(queued >= 8);
    for (int i = 0; i < MOVES; i++)
        sw_carrier_unref(dst[i]);
    sw_alloc_trim();
    CHECK_EQ_I64(sw_alloc_later_queued_blocks(), 0);
}

/* fork() empties the queue first: the child holds no block nobody would
 * free, and its own queue works (with a thread of its own). */
static void test_fork(void)
{
    sw_alloc_trim();
    int64_t queued = freed_in_a_row(24, 64 * KIB, 1);
    CHECK(LATER ? queued >= 8 : queued == 0);
    pid_t pid = fork();
    if (pid == 0) {
        EXPECT(sw_alloc_later_queued_blocks() == 0, 1);
        if (CHILD_STARTS_THREADS) {
            EXPECT(freed_in_a_row(200, 64 * KIB, 1) < 200, 2);
            sw_alloc_trim();
            EXPECT(sw_alloc_later_queued_blocks() == 0, 3);
        }
        _exit(0);
    }
    reap(pid, "fork with blocks queued");
    CHECK_EQ_I64(sw_alloc_later_queued_blocks(), 0);
    sw_alloc_trim();
}

/* Threads freeing in a move's release while another trims: every block is
 * freed once (each thread checks its tag before the free), and nothing
 * stays live or queued. */
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
    CHECK_EQ_I64(sw_alloc_later_queued_blocks(), 0);
}

int main(void)
{
    test_queued_until_trim();
    test_queued_block_serves_its_size();
    test_only_in_a_move();
    test_sizes_not_queued();
    test_thread_frees_past_4_mib();
    test_moved_sources();
    test_fork();
    test_threads();
    return check_report("alloc_later");
}
