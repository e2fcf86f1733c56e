/* The start of an asynchronous engine, shared by the move engine (move.c)
 * and TiledEvictable's asynchronous work (tiled_evictable_async.c): a pool
 * of workers plus one detached thread that commits finished work. */
#ifndef STRIDEWEAVE_ENGINE_INTERNAL_H
#define STRIDEWEAVE_ENGINE_INTERNAL_H

#include <stddef.h>

#include "strideweave/executor.h"
#include "strideweave/status.h"

/* Make the pool (*pool) and start `completion` on a detached thread. On
 * failure nothing is left running, *pool is NULL, and *status / msg (of
 * msg_size bytes) say why; `what` names the thread in that message. The
 * caller serializes calls. */
void sw_engine_start(sw_executor **pool, void *(*completion)(void *), const char *what,
                     sw_status *status, char *msg, size_t msg_size);

#endif
