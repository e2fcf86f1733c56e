/* Umbrella header of libstrideweave, the pure-C core: include this one to get
 * the whole C API.
 *
 * Ownership, in general: a function that returns a new handle gives the
 * caller one reference (refcounted handles: _ref/_unref) or sole ownership
 * (single-owner values: _free/_destroy); pointer arguments are borrowed for
 * the call unless the function's comment says it keeps them.
 * Threads: each header says which of its calls are thread-safe; no core
 * function needs or takes the Python GIL.
 * Not included here: binding.h and engine.h, installed beside this header
 * for language bindings (carrier state a binding's own copies drive, work a
 * binding runs on threads of its own); a C program does not need them. */
#ifndef STRIDEWEAVE_STRIDEWEAVE_H
#define STRIDEWEAVE_STRIDEWEAVE_H

#include "strideweave/export.h"
#include "strideweave/status.h"
#include "strideweave/alloc.h"
#include "strideweave/clock.h"
#include "strideweave/dtype.h"
#include "strideweave/layout.h"
#include "strideweave/layout_view.h"
#include "strideweave/copy.h"
#include "strideweave/filestore.h"
#include "strideweave/dlpack.h"
#include "strideweave/carrier.h"
#include "strideweave/tensor.h"
#include "strideweave/tensor_walk.h"
#include "strideweave/tensor_ops.h"
#include "strideweave/move.h"
#include "strideweave/route.h"
#include "strideweave/block_device.h"
#include "strideweave/evictable.h"
#include "strideweave/tiled_evictable.h"
#include "strideweave/tile_set.h"

#endif
