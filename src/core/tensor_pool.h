/* Blocks for tensor handles (never installed): see tensor_pool.c. */
#ifndef SW_TENSOR_POOL_H
#define SW_TENSOR_POOL_H

#include <stddef.h>

/* A block of at least `bytes` bytes, aligned for int64_t, or NULL (out of
 * memory, or the "alloc" fault). *pooled says which way it came, for
 * sw_tensor_block_give. */
void *sw_tensor_block_take(size_t bytes, int *pooled);
void sw_tensor_block_give(void *block, size_t bytes, int pooled);

#endif
