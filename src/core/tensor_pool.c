/* Fixed-size blocks for tensor handles. Every move publishes a result
 * tensor (a Python binding makes one per Tensor object), and the move has
 * just released its source's storage: from malloc's general bins each small
 * request then splits that freed chunk, several hundred instructions a
 * handle. Blocks of one size taken from chunks of their own, and kept on a
 * free list when given back, cost a lock round. Larger handles (layouts of
 * many leaves) go to sw_malloc. Chunks are never returned: the pool only
 * grows to the most handles alive at once. Builds with AddressSanitizer
 * skip the pool, so that it still sees every use after free. */
#include <pthread.h>
#include <stdlib.h>

#include "alloc_internal.h"
#include "strideweave/alloc.h"
#include "tensor_pool.h"

#define BLOCK_BYTES ((size_t)256)
#define CHUNK_BLOCKS 64

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

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static block *free_list;
static char *chunk_next, *chunk_end;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

/* A fork while another thread holds the pool's mutex would leave it held
 * in the child: hold it across fork() instead. */
static void fork_prepare(void) { pthread_mutex_lock(&pool_mu); }
static void fork_parent(void) { pthread_mutex_unlock(&pool_mu); }
static void fork_child(void) { pthread_mutex_unlock(&pool_mu); }
static void register_fork(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

/* Under pool_mu. */
static void *take_locked(void)
{
    if (free_list) {
        block *b = free_list;
        free_list = b->next;
        return b;
    }
    if (chunk_next == chunk_end) {
        char *chunk = malloc(BLOCK_BYTES * CHUNK_BLOCKS);
        if (!chunk)
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
    if (sw_fault_hit("alloc")) /* the fault sw_malloc would have met */
        return NULL;
    pthread_once(&fork_once, register_fork);
    pthread_mutex_lock(&pool_mu);
    void *b = take_locked();
    pthread_mutex_unlock(&pool_mu);
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
    pthread_mutex_lock(&pool_mu);
    ((block *)b)->next = free_list;
    free_list = b;
    pthread_mutex_unlock(&pool_mu);
}
