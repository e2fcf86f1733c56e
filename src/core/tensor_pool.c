/* Fixed-size blocks for tensor handles. Every move publishes a result
 * tensor (a Python binding makes one per Tensor object), and the move has
 * just released its source's storage: from malloc's general bins each small
 * request then splits that freed chunk, several hundred instructions a
 * handle. Blocks of one size taken from chunks of their own (mapped, so
 * malloc's bins never see them), and kept on a free list when given back,
 * cost a spin lock round held for a few instructions. Larger handles
 * (layouts of many leaves) go to sw_malloc. Chunks are never returned: the
 * pool only grows to the most handles alive at once. Builds with AddressSanitizer
 * skip the pool, so that it still sees every use after free. */
#include <pthread.h>
#include "fault_internal.h"
#include <sched.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "alloc_internal.h"
#include "fork_internal.h"
#include "strideweave/alloc.h"
#include "tensor_pool.h"

SW_FORK_LINKED;

#define BLOCK_BYTES ((size_t)256)
#define CHUNK_BLOCKS 1024 /* 256 KiB a chunk */

#if defined(__SANITIZE_ADDRESS__)
#define POOL_ENABLED 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define POOL_ENABLED 0
#endif
#endif
#ifndef POOL_ENABLED
#define POOL_ENABLED 1
#endif

typedef union block {
    union block *next; /* while on the free list */
    max_align_t align;
} block;

static atomic_flag pool_lock = ATOMIC_FLAG_INIT;
static block *free_list;
static char *chunk_next, *chunk_end;

static void lock(void)
{
    while (atomic_flag_test_and_set_explicit(&pool_lock, memory_order_acquire))
        sched_yield();
}
static void unlock(void) { atomic_flag_clear_explicit(&pool_lock, memory_order_release); }

/* A fork while another thread holds the pool's lock would leave it held
 * in the child: hold it across fork() instead. A leaf of fork.c's order
 * (nothing is called under it): taken after every other prepare step and
 * given back before every other child step, since a child step that ends
 * inherited work (a projection) frees tensor handles. */
void sw_tensor_pool_fork_prepare(void) { lock(); }
void sw_tensor_pool_fork_parent(void) { unlock(); }
void sw_tensor_pool_fork_child(void) { unlock(); }

/* Under pool_lock. */
static void *take_locked(void)
{
    if (free_list) {
        block *b = free_list;
        free_list = b->next;
        /* The next take reads this block's link: start loading it now,
         * since freed blocks go cold before they are taken again. */
        if (free_list)
            __builtin_prefetch(free_list, 1);
        return b;
    }
    if (chunk_next == chunk_end) {
        char *chunk = mmap(NULL, BLOCK_BYTES * CHUNK_BLOCKS, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (chunk == MAP_FAILED)
            return NULL;
        chunk_next = chunk;
        chunk_end = chunk + BLOCK_BYTES * CHUNK_BLOCKS;
    }
    void *b = chunk_next;
    chunk_next += BLOCK_BYTES;
    return b;
}

void *sw_tensor_block_take(size_t bytes, int *pooled)
{
    *pooled = POOL_ENABLED && bytes <= BLOCK_BYTES;
    if (!*pooled)
        return sw_malloc(bytes);
    if (SW_FAULT_HIT("alloc")) /* the fault sw_malloc would have met */
        return NULL;
    lock();
    void *b = take_locked();
    unlock();
    if (b)
        sw_alloc_count_live((int64_t)bytes);
    return b;
}

void sw_tensor_block_give(void *b, size_t bytes, int pooled)
{
    if (!pooled) {
        sw_free(b);
        return;
    }
    sw_alloc_count_live(-(int64_t)bytes);
    lock();
    ((block *)b)->next = free_list;
    free_list = b;
    unlock();
}
