/* Threads allocating and freeing blocks of three sizes (1, 2 and 3 units)
 * through the allocator's reuse caches: each thread writes its own tag into
 * every block it holds and checks it is still there before the free, so a
 * block handed to two owners at once shows. Shared by the cache tests (run
 * under TSan too). */
#ifndef SW_TEST_ALLOC_CHURN_H
#define SW_TEST_ALLOC_CHURN_H

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "strideweave/alloc.h"

enum { CHURN_THREADS = 4, CHURN_HELD = 6, CHURN_STRIDE = 512 };

typedef struct churn_args {
    unsigned char tag;
    size_t unit;
    int rounds;
} churn_args;

static void *churn_main(void *arg)
{
    const churn_args *a = arg;
    unsigned char *held[CHURN_HELD] = {0};
    size_t bytes[CHURN_HELD] = {0};
    int bad = 0;
    for (int r = 0; r < a->rounds; r++) {
        int k = r % CHURN_HELD;
        if (held[k]) {
            for (size_t i = 0; i < bytes[k]; i += CHURN_STRIDE)
                bad |= held[k][i] != a->tag;
            sw_free(held[k]);
        }
        bytes[k] = (size_t)(1 + (r + a->tag) % 3) * a->unit;
        held[k] = sw_malloc(bytes[k]);
        if (!held[k])
            return (void *)1;
        memset(held[k], a->tag, bytes[k]);
    }
    for (int k = 0; k < CHURN_HELD; k++)
        sw_free(held[k]);
    return (void *)(uintptr_t)bad;
}

/* CHURN_THREADS threads churning blocks of 1-3 `unit`s for `rounds` each:
 * none sees another's writes, and no byte stays live afterwards. */
static void churn_threads(size_t unit, int rounds)
{
    int64_t live = sw_alloc_live_bytes();
    pthread_t th[CHURN_THREADS];
    churn_args args[CHURN_THREADS];
    for (int i = 0; i < CHURN_THREADS; i++) {
        args[i] = (churn_args){(unsigned char)(i + 1), unit, rounds};
        CHECK(pthread_create(&th[i], NULL, churn_main, &args[i]) == 0);
    }
    for (int i = 0; i < CHURN_THREADS; i++) {
        void *bad = NULL;
        CHECK(pthread_join(th[i], &bad) == 0);
        CHECK(bad == NULL);
    }
    CHECK_EQ_I64(sw_alloc_live_bytes(), live);
}

#endif
