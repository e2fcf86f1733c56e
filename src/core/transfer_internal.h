/* What the move engine (move.c) asks of the transfer kernels beyond
 * strideweave/transfer.h. */
#ifndef STRIDEWEAVE_TRANSFER_INTERNAL_H
#define STRIDEWEAVE_TRANSFER_INTERNAL_H

#include "strideweave/transfer.h"

/* sw_transfer_run of a transfer that copies its span whole and in order
 * (a bulk transfer, or one whose layout is a single stride-1 run over
 * cosize > 0 slots), on one thread, without its checks: the caller proved
 * the endpoints, the layout and the byte positions valid (a move checks
 * its span against both carriers under their locks). The checks and the
 * dispatch of sw_transfer_run cost a 4 KiB move about 250 instructions
 * (bench/move_overhead.py). Progress and fault points as sw_transfer_run. */
sw_status sw_transfer_run_whole_span(const sw_transfer *t, sw_error *err);

#endif
