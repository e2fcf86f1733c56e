/* Evictable under contention (E-4, E-5 and the pending guard): threads
 * evict and promote the same hierarchies while others read, write and
 * inspect them. Every call either succeeds or is refused with SW_ESTATE
 * (pending / evicted), a successful read sees exactly the values written,
 * versions only grow, and at the end the hierarchy is consistent. Run
 * under ThreadSanitizer by .ci/run: any report fails it. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "check.h"
#include <strideweave/strideweave.h>

#define SLOTS 64
#define ROUNDS 150

typedef struct shared {
    sw_carrier *e;
    _Atomic int failures;
    _Atomic int transitions;
    _Atomic int reads_ok;
    _Atomic int writes_ok;
    _Atomic int transitioners_left; /* readers and writers run until 0 */
    pthread_barrier_t start;
} shared;

static void fail(shared *s, const char *what, const sw_error *err)
{
    fprintf(stderr, "%s: %s\n", what, err ? err->msg : "");
    atomic_fetch_add(&s->failures, 1);
}

static int refused(sw_status st, const sw_error *err)
{
    return st == SW_ESTATE && (strstr(err->msg, "pending") || strstr(err->msg, "promote"));
}

static void *transitioner(void *arg)
{
    shared *s = arg;
    sw_error err;
    pthread_barrier_wait(&s->start);
    for (int i = 0; i < ROUNDS; i++) {
        sw_status st = (i & 1) ? sw_evictable_promote(s->e, &err)
                               : sw_evictable_evict(s->e, &err);
        if (st == SW_OK)
            atomic_fetch_add(&s->transitions, 1);
        else if (!refused(st, &err))
            fail(s, "transition", &err);
    }
    atomic_fetch_sub(&s->transitioners_left, 1);
    return NULL;
}

static void *reader(void *arg)
{
    shared *s = arg;
    sw_error err;
    float buf[SLOTS];
    pthread_barrier_wait(&s->start);
    for (int i = 0; i < ROUNDS || atomic_load(&s->transitioners_left) > 0; i++) {
        sw_status st = sw_carrier_read(s->e, 0, SLOTS, buf, &err);
        if (st == SW_OK) {
            for (int k = 0; k < SLOTS; k++)
                if (buf[k] != (float)k) {
                    fail(s, "read a value never written", NULL);
                    break;
                }
            atomic_fetch_add(&s->reads_ok, 1);
        } else if (!refused(st, &err)) {
            fail(s, "read", &err);
        }
        sw_carrier *p = sw_evictable_primary(s->e), *q = sw_evictable_secondary(s->e);
        if (!p || !q || p == q)
            fail(s, "tiers", NULL);
        (void)sw_carrier_size(p);
        (void)sw_evictable_is_evicted(s->e);
        sw_carrier_unref(p);
        sw_carrier_unref(q);
    }
    return NULL;
}

static void *writer(void *arg)
{
    shared *s = arg;
    sw_error err;
    uint64_t last = 0;
    pthread_barrier_wait(&s->start);
    for (int i = 0; i < ROUNDS || atomic_load(&s->transitioners_left) > 0; i++) {
        int k = i % SLOTS;
        float v = (float)k; /* rewrite the same values: readers can check them */
        sw_status st = sw_carrier_write(s->e, k, 1, &v, &err);
        if (st == SW_OK)
            atomic_fetch_add(&s->writes_ok, 1);
        else if (!refused(st, &err))
            fail(s, "write", &err);
        uint64_t now = sw_carrier_version(s->e);
        if (now < last)
            fail(s, "the version went back", NULL);
        last = now;
    }
    return NULL;
}

static void run(sw_carrier *primary, sw_carrier *secondary, const char *name)
{
    sw_error err;
    shared s = {0};
    CHECK_EQ_I64(sw_evictable_new(primary, secondary, NULL, &s.e, &err), SW_OK);
    if (!s.e)
        return;
    enum { T = 2, R = 2, W = 1 };
    atomic_store(&s.transitioners_left, T);
    pthread_barrier_init(&s.start, NULL, T + R + W);
    pthread_t th[T + R + W];
    int n = 0;
    for (int i = 0; i < T; i++)
        pthread_create(&th[n++], NULL, transitioner, &s);
    for (int i = 0; i < R; i++)
        pthread_create(&th[n++], NULL, reader, &s);
    for (int i = 0; i < W; i++)
        pthread_create(&th[n++], NULL, writer, &s);
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&s.start);
    printf("%s: %d transitions, %d reads, %d writes succeeded\n", name,
           atomic_load(&s.transitions), atomic_load(&s.reads_ok), atomic_load(&s.writes_ok));
    CHECK_EQ_I64(atomic_load(&s.failures), 0);
    CHECK(atomic_load(&s.transitions) > 0);
    CHECK(!sw_carrier_is_pending(s.e));
    /* The version counts exactly the successful writes. */
    CHECK_EQ_I64(sw_carrier_version(s.e), atomic_load(&s.writes_ok));
    if (sw_evictable_is_evicted(s.e))
        CHECK_EQ_I64(sw_evictable_promote(s.e, &err), SW_OK);
    float buf[SLOTS];
    CHECK_EQ_I64(sw_carrier_read(s.e, 0, SLOTS, buf, &err), SW_OK);
    for (int k = 0; k < SLOTS; k++)
        CHECK(buf[k] == (float)k);
    sw_carrier *p = sw_evictable_primary(s.e), *q = sw_evictable_secondary(s.e);
    CHECK(sw_carrier_is_owned(p) && sw_carrier_is_owned(q));
    CHECK_EQ_I64(sw_carrier_release(s.e, &err), SW_OK);
    CHECK(sw_carrier_is_released(p) && sw_carrier_is_released(q));
    CHECK(!sw_carrier_is_owned(p) && !sw_carrier_is_owned(q));
    sw_carrier_unref(p);
    sw_carrier_unref(q);
    sw_carrier_unref(s.e);
}

static sw_carrier *cpu_counting(void)
{
    sw_error err;
    sw_carrier *c = NULL;
    sw_cpu_new(SLOTS, SW_DT_FLOAT32, 0, &c, &err);
    float *p = sw_cpu_pointer(c);
    for (int k = 0; k < SLOTS; k++)
        p[k] = (float)k;
    return c;
}

int main(void)
{
    sw_error err;
    sw_carrier *cpu = cpu_counting(), *file = NULL;
    sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &file, &err);
    run(cpu, file, "CPU + FileBacked");
    sw_carrier_unref(file);
    sw_carrier_unref(cpu);

    sw_carrier *a = cpu_counting(), *b = NULL;
    sw_cpu_new(SLOTS * 2, SW_DT_FLOAT32, 0, &b, &err);
    run(a, b, "CPU + CPU");
    sw_carrier_unref(b);
    sw_carrier_unref(a);
    sw_move_drain();
    return check_report("evictable_threads");
}
