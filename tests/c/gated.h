/* A foreign carrier (ops table, no direct storage) whose slot writes block
 * until the test opens its gate: a move into it stays pending for exactly
 * as long as the test wants, without sleeping. */
#ifndef SW_TEST_GATED_H
#define SW_TEST_GATED_H

#include <pthread.h>
#include <string.h>

#include <strideweave/strideweave.h>

typedef struct gated {
    float slots[64];
    int64_t size;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open;     /* writes may proceed */
    int entered;  /* a write is waiting at the gate */
    int destroyed;
} gated;

static int64_t gated_size(void *impl) { return ((gated *)impl)->size; }
static sw_status gated_read(void *impl, int64_t slot, int64_t n, void *out, sw_error *err)
{
    (void)err;
    memcpy(out, ((gated *)impl)->slots + slot, (size_t)n * sizeof(float));
    return SW_OK;
}
static sw_status gated_write(void *impl, int64_t slot, int64_t n, const void *in, sw_error *err)
{
    gated *g = impl;
    (void)err;
    pthread_mutex_lock(&g->mu);
    g->entered = 1;
    pthread_cond_broadcast(&g->cv);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    memcpy(g->slots + slot, in, (size_t)n * sizeof(float));
    return SW_OK;
}
static void gated_release(void *impl) { (void)impl; }
static void gated_destroy(void *impl) { ((gated *)impl)->destroyed = 1; }
static const sw_carrier_class gated_ops = {
    .name = "Gated", .size = gated_size, .read = gated_read, .write = gated_write,
    .release = gated_release, .destroy = gated_destroy,
};

static void gated_init(gated *g, int64_t size)
{
    memset(g->slots, 0, sizeof g->slots);
    g->size = size;
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->open = g->entered = g->destroyed = 0;
}
static void gated_wait_entered(gated *g)
{
    pthread_mutex_lock(&g->mu);
    while (!g->entered)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}
static void gated_open(gated *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

#endif
