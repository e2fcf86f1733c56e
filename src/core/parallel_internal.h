/* What the move engine needs of parallel.c beyond parallel.h: parts that a
 * thread waiting for the work may run itself. */
#ifndef SW_PARALLEL_INTERNAL_H
#define SW_PARALLEL_INTERNAL_H

#include "strideweave/parallel.h"

/* sw_parallel_run, with at most `helpers_at_once` helper threads on its
 * parts at a time (0: none; the calling thread runs parts as always), and
 * its parts open to sw_parallel_help(owner) as well: a move running on the
 * pool keeps a CPU for its caller's other work, and takes that CPU back
 * when the caller comes to wait for it. `owner` is only compared, never
 * read. */
void sw_parallel_run_open(const void *owner, int helpers_at_once, int n,
                          void (*fn)(void *ctx, int part), void *ctx);

/* Run one part that nobody has started yet of a batch that
 * sw_parallel_run_open is running for `owner`, on the calling thread: 1
 * when one ran, 0 when none was waiting (none started yet, or all taken). */
int sw_parallel_help(const void *owner);

#endif
