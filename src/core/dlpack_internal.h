/* Packing for the core's own exports (tensor.c). */
#ifndef SW_DLPACK_INTERNAL_H
#define SW_DLPACK_INTERNAL_H

#include "strideweave/dlpack.h"

/* sw_dlpack_pack (versioned: sw_dlpack_pack_versioned) for a request the
 * caller built from a checked carrier and layout: ndim and every extent
 * >= 0, the offset >= 0 and its byte offset within uint64, data non-NULL
 * unless the layout is empty, 32-bit single-lane elements, no flags on a
 * legacy request. Only SW_ENOMEM can fail it. */
sw_status sw_dlpack_pack_checked(const sw_dlpack_request *req, int versioned, void **out,
                                 sw_error *err);

#endif
