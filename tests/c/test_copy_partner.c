/* sw_copy_host (copy_partner.c): every copy is exact whatever its size and
 * alignment, on one thread or many at once; the partner thread does take
 * halves when copies come in a run (and a large copy after a pause); a
 * process whose partner cannot start still copies; a forked child gets a
 * partner of its own. White box: copy_partner_internal.h. */
#include "check.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "copy_partner_internal.h"
#include "strideweave/testing.h"

#define GUARD 64

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Copy n bytes from src + so to dst + dso with sw_copy_host (stores
 * streamed or not); 1 when dst holds exactly the source bytes and the
 * guard bytes around it are untouched. `seed` varies the pattern between
 * copies. */
static int copy_checked(size_t n, size_t so, size_t dso, unsigned seed, int stream)
{
    unsigned char *src = malloc(n + so + 1), *dst = malloc(n + dso + 2 * GUARD);
    if (!src || !dst) {
        free(src);
        free(dst);
        return 0;
    }
    for (size_t i = 0; i < n + so + 1; i++)
        src[i] = (unsigned char)(i * 131u + seed * 7u + (i >> 12));
    memset(dst, 0xA5, n + dso + 2 * GUARD);
    sw_copy_host(dst + GUARD + dso, src + so, n, stream);
    int ok = memcmp(dst + GUARD + dso, src + so, n) == 0;
    for (size_t i = 0; i < GUARD + dso; i++)
        ok &= dst[i] == 0xA5;
    for (size_t i = GUARD + dso + n; i < n + dso + 2 * GUARD; i++)
        ok &= dst[i] == 0xA5;
    free(src);
    free(dst);
    return ok;
}

static void test_every_size_and_alignment(void)
{
    const size_t min = SW_COPY_PARTNER_MIN_BYTES;
    const size_t sizes[] = {0, 1, 63, 64, 4095, min - 1, min, min + 1, min + 63, 2 * min + 17,
                            (size_t)1 << 20, ((size_t)1 << 20) + 7, (size_t)3 << 20};
    const size_t offsets[][2] = {{0, 0}, {1, 0}, {0, 3}, {17, 45}, {63, 1}};
    for (int round = 0; round < 6; round++) /* the partner asleep, waking, spinning */
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
            for (size_t j = 0; j < sizeof offsets / sizeof offsets[0]; j++)
                CHECK(copy_checked(sizes[i], offsets[j][0], offsets[j][1], (unsigned)(i + j),
                                   round % 2));
}

/* Copies of n bytes back to back (a run, as a program's moves come) until
 * the partner has taken a half or `seconds` passed: 1 when every copy was
 * exact and (`want_shared`) one was shared. */
static int run_of_copies(size_t n, double seconds, int want_shared, int stream)
{
    unsigned char *src = malloc(n), *dst = malloc(n);
    if (!src || !dst) {
        free(src);
        free(dst);
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        src[i] = (unsigned char)(i * 131u + (i >> 12));
    long before = sw_copy_partner_halves();
    double give_up = now_s() + seconds;
    int ok = 1;
    do {
        for (int k = 0; k < 64; k++) {
            memset(dst, k, 64); /* each copy has something to overwrite */
            sw_copy_host(dst, src, n, stream);
        }
        ok &= memcmp(dst, src, n) == 0;
    } while (sw_copy_partner_halves() == before && now_s() < give_up);
    if (want_shared)
        ok &= sw_copy_partner_halves() > before;
    free(src);
    free(dst);
    return ok;
}

/* A run of medium copies wakes the partner, which then takes halves. */
static void test_partner_takes_halves_in_a_run(void)
{
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
        printf("  skipped test_partner_takes_halves_in_a_run: one CPU, so no partner\n");
        return;
    }
    CHECK(run_of_copies((size_t)256 << 10, 20, 1, 0));
    CHECK(run_of_copies((size_t)256 << 10, 20, 1, 1)); /* halves streamed */
}

/* After a pause long enough for the partner to sleep, a copy of 1 MiB or
 * more wakes it for its own second half. */
static void test_large_copy_after_a_pause(void)
{
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
        return;
    size_t n = (size_t)8 << 20;
    int took = 0;
    for (int k = 0; k < 50 && !took; k++) {
        sleep_ms(20); /* > the partner's spin: it sleeps */
        long before = sw_copy_partner_halves();
        CHECK(copy_checked(n, 0, 0, (unsigned)k, k % 2));
        took = sw_copy_partner_halves() > before;
    }
    CHECK(took);
}

#define THREADS 4
#define COPIES 300

static void *copier(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    int *bad = malloc(sizeof *bad);
    *bad = 0;
    for (int k = 0; k < COPIES; k++) {
        seed = seed * 1103515245u + 12345u;
        size_t n = SW_COPY_PARTNER_MIN_BYTES + (seed >> 8) % ((size_t)512 << 10);
        *bad += !copy_checked(n, (seed >> 3) % 64, (seed >> 5) % 64, seed, (int)(seed >> 11) & 1);
    }
    return bad;
}

/* Callers on several threads at once: one holds the partner at a time, the
 * others copy alone; every copy is exact. */
static void test_many_threads_at_once(void)
{
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, copier, (void *)(uintptr_t)(i + 1)) == 0);
    for (int i = 0; i < THREADS; i++) {
        void *bad = NULL;
        pthread_join(t[i], &bad);
        CHECK(bad && *(int *)bad == 0);
        free(bad);
    }
}

#ifndef __SANITIZE_THREAD__ /* not run under ThreadSanitizer, see main */
/* A child forked while other threads share copies with the partner gets a
 * partner of its own (the parent's thread is not in it) and copies exactly. */
static void test_forked_child(void)
{
    pthread_t t;
    CHECK(pthread_create(&t, NULL, copier, (void *)(uintptr_t)99) == 0);
    sleep_ms(2);
    pid_t pid = fork();
    if (pid == 0)
        _exit(run_of_copies((size_t)256 << 10, 20, sysconf(_SC_NPROCESSORS_ONLN) >= 2, 0) ? 0 : 1);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    void *bad = NULL;
    pthread_join(t, &bad);
    CHECK(bad && *(int *)bad == 0);
    free(bad);
}
#endif

/* A partner that cannot start (checked in a fresh child, whose first copy
 * starts its partner): copies stay whole and exact, none is shared. */
static void test_partner_that_cannot_start(void)
{
    if (!sw_fault_enabled()) {
        printf("  skipped test_partner_that_cannot_start: built without fault injection\n");
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        int ok = sw_fault_arm("copy_partner", 0, 1) == SW_OK;
        long before = sw_copy_partner_halves();
        for (unsigned k = 0; k < 200; k++)
            ok &= copy_checked((size_t)256 << 10, k % 3, k % 2, k, 0);
        ok &= sw_copy_partner_halves() == before;
        sw_fault_clear();
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(void)
{
    test_partner_that_cannot_start(); /* first: the children it forks start fresh anyway */
    test_every_size_and_alignment();
    test_partner_takes_halves_in_a_run();
    test_large_copy_after_a_pause();
    test_many_threads_at_once();
#ifndef __SANITIZE_THREAD__
    /* ThreadSanitizer cannot start threads after a multi-threaded fork;
     * the plain and ASan builds run this one. */
    test_forked_child();
#endif
    return check_report("copy_partner");
}
