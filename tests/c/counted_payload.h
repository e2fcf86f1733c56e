/* A route payload that counts the references the registry takes and gives
 * (route.h, "Payloads"), for the registry's tests. */
#ifndef SW_TEST_COUNTED_PAYLOAD_H
#define SW_TEST_COUNTED_PAYLOAD_H

#include <stdatomic.h>

#include <strideweave/route.h>

typedef struct payload {
    atomic_int refs;
} payload;

static void payload_ref(void *p) { atomic_fetch_add(&((payload *)p)->refs, 1); }
static void payload_unref(void *p) { atomic_fetch_sub(&((payload *)p)->refs, 1); }
static const sw_route_payload_ops counted = {payload_ref, payload_unref};

#endif
