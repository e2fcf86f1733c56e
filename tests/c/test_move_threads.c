/* Moves from many threads at once (run under ThreadSanitizer in CI):
 * round trips CPU -> FileBacked -> CPU in parallel, many waiters on one
 * handle, threads racing to move the same source (exactly one wins), and a
 * process that exits with moves in flight. */
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "gated.h"
#include <strideweave/strideweave.h>

#define THREADS 8
#define ROUNDS 25

static _Atomic int failures;

static void *round_trips(void *arg)
{
    int id = (int)(intptr_t)arg;
    sw_error err;
    for (int r = 0; r < ROUNDS; r++) {
        int64_t n = 64 + 17 * id + r;
        sw_carrier *cpu, *fb, *back;
        sw_tensor *t, *on_file, *home;
        sw_move_handle *m;
        int ok = sw_cpu_new(n, SW_DT_INT32, 0, &cpu, &err) == SW_OK;
        int64_t ext[1] = {n};
        ok = ok && sw_tensor_new_strided(cpu, 0, 1, ext, NULL, &t, &err) == SW_OK;
        for (int64_t i = 0; ok && i < n; i++)
            ok = sw_tensor_set_i32(t, i, (int32_t)(id * 100000 + r * 1000 + i), &err) == SW_OK;
        ok = ok && sw_file_backed_new(NULL, SW_DT_INT32, 0, &fb, &err) == SW_OK;
        ok = ok && sw_move_async(t, fb, NULL, &m, &err) == SW_OK;
        ok = ok && sw_move_wait(m, &on_file, &err) == SW_OK;
        sw_move_unref(m);
        ok = ok && sw_cpu_new(n, SW_DT_INT32, SW_CARRIER_EMPTY, &back, &err) == SW_OK;
        ok = ok && sw_move(on_file, back, &home, &err) == SW_OK;
        for (int64_t i = 0; ok && i < n; i++) {
            int32_t v;
            ok = sw_tensor_get_i32(home, i, &v, &err) == SW_OK &&
                 v == (int32_t)(id * 100000 + r * 1000 + i);
        }
        ok = ok && sw_carrier_is_released(cpu) && sw_carrier_is_released(fb);
        if (!ok) {
            fprintf(stderr, "thread %d round %d: %s\n", id, r, err.msg);
            failures++;
            return NULL;
        }
        sw_tensor_unref(home);
        sw_tensor_unref(on_file);
        sw_tensor_unref(t);
        sw_carrier_unref(back);
        sw_carrier_unref(fb);
        sw_carrier_unref(cpu);
    }
    return NULL;
}

static void test_parallel_round_trips(void)
{
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, round_trips, (void *)(intptr_t)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    CHECK(failures == 0);
}

typedef struct waiter {
    sw_move_handle *m;
    sw_tensor *result;
    sw_status st;
} waiter;

static void *wait_one(void *arg)
{
    waiter *w = arg;
    sw_error err;
    w->st = sw_move_wait(w->m, &w->result, &err);
    return NULL;
}

static void test_many_waiters_one_result(void)
{
    sw_error err;
    gated g;
    gated_init(&g, 16);
    sw_carrier *src, *dst;
    sw_tensor *t;
    int64_t ext[1] = {16};
    CHECK(sw_cpu_new(16, SW_DT_FLOAT32, 0, &src, &err) == SW_OK);
    CHECK(sw_tensor_new_strided(src, 0, 1, ext, NULL, &t, &err) == SW_OK);
    CHECK(sw_carrier_new(&gated_ops, &g, SW_DT_FLOAT32, 0, &dst, &err) == SW_OK);
    sw_move_handle *m;
    CHECK(sw_move_async(t, dst, NULL, &m, &err) == SW_OK);
    waiter w[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (waiter){m, NULL, SW_EIO};
        pthread_create(&th[i], NULL, wait_one, &w[i]);
    }
    gated_wait_entered(&g);
    CHECK(!sw_move_done(m));
    gated_open(&g);
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        CHECK(w[i].st == SW_OK);
        CHECK(w[i].result == w[0].result);
        sw_tensor_unref(w[i].result);
    }
    sw_move_unref(m);
    sw_tensor_unref(t);
    sw_carrier_unref(src);
    sw_carrier_unref(dst);
}

typedef struct racer {
    sw_tensor *t;
    sw_carrier *dst;
    pthread_barrier_t *go;
    sw_status st;
    sw_move_handle *m;
} racer;

static void *race(void *arg)
{
    racer *r = arg;
    sw_error err;
    pthread_barrier_wait(r->go);
    r->st = sw_move_async(r->t, r->dst, NULL, &r->m, &err);
    return NULL;
}

/* Validation and the pending mark are one step: of several threads moving
 * one source at the same moment, exactly one move is accepted. */
static void test_racing_moves_of_one_source(void)
{
    sw_error err;
    for (int round = 0; round < 20; round++) {
        sw_carrier *src;
        sw_tensor *t;
        int64_t ext[1] = {32};
        CHECK(sw_cpu_new(32, SW_DT_FLOAT32, 0, &src, &err) == SW_OK);
        CHECK(sw_tensor_new_strided(src, 0, 1, ext, NULL, &t, &err) == SW_OK);
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, 4);
        racer r[4];
        pthread_t th[4];
        for (int i = 0; i < 4; i++) {
            r[i] = (racer){t, NULL, &go, SW_OK, NULL};
            CHECK(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &r[i].dst, &err) == SW_OK);
            pthread_create(&th[i], NULL, race, &r[i]);
        }
        int accepted = 0;
        for (int i = 0; i < 4; i++) {
            pthread_join(th[i], NULL);
            if (r[i].st == SW_OK) {
                accepted++;
                CHECK(sw_move_wait(r[i].m, NULL, &err) == SW_OK);
                sw_move_unref(r[i].m);
            } else {
                CHECK(r[i].st == SW_ESTATE); /* pending, or already released */
                CHECK_EQ_I64(sw_carrier_size(r[i].dst), 0);
            }
        }
        CHECK(accepted == 1);
        CHECK(sw_carrier_is_released(src));
        for (int i = 0; i < 4; i++)
            sw_carrier_unref(r[i].dst);
        pthread_barrier_destroy(&go);
        sw_tensor_unref(t);
        sw_carrier_unref(src);
    }
}

/* A process may return from main with moves in flight (handles dropped):
 * exit waits for them and it exits cleanly, with or without an earlier
 * sw_move_drain (test_block_device checks what exit leaves behind). */
static void test_exit_with_moves_in_flight(void)
{
    for (int drain = 0; drain < 2; drain++) {
        pid_t pid = fork();
        if (pid == 0) {
            sw_error err;
            for (int i = 0; i < 16; i++) {
                sw_carrier *cpu, *fb;
                sw_tensor *t;
                sw_move_handle *m;
                int64_t ext[1] = {1 << 16};
                if (sw_cpu_new(1 << 16, SW_DT_FLOAT32, 0, &cpu, &err) != SW_OK ||
                    sw_tensor_new_strided(cpu, 0, 1, ext, NULL, &t, &err) != SW_OK ||
                    sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &fb, &err) != SW_OK ||
                    sw_move_async(t, fb, NULL, &m, &err) != SW_OK)
                    _exit(3);
                sw_move_unref(m);
                sw_tensor_unref(t);
                sw_carrier_unref(fb);
                sw_carrier_unref(cpu);
            }
            if (drain)
                sw_move_drain();
            exit(0);
        }
        int status = 0;
        CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
}

#ifndef __SANITIZE_THREAD__ /* not run under ThreadSanitizer, see main */
/* After fork() the child starts its own pool: a move there completes even
 * though the parent's pool threads did not come along. */
static void test_move_in_forked_child(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        sw_error err;
        sw_carrier *cpu, *fb;
        sw_tensor *t, *r;
        int64_t ext[1] = {100};
        float v = 0;
        if (sw_cpu_new(100, SW_DT_FLOAT32, 0, &cpu, &err) != SW_OK ||
            sw_tensor_new_strided(cpu, 0, 1, ext, NULL, &t, &err) != SW_OK ||
            sw_tensor_set_f32(t, 99, 4.5f, &err) != SW_OK ||
            sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &fb, &err) != SW_OK ||
            sw_move(t, fb, &r, &err) != SW_OK || sw_tensor_get_f32(r, 99, &v, &err) != SW_OK)
            _exit(3);
        _exit(v == 4.5f ? 0 : 4);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
#endif

int main(void)
{
    test_exit_with_moves_in_flight(); /* first: fork before this process has threads */
    test_parallel_round_trips();
    test_many_waiters_one_result();
    test_racing_moves_of_one_source();
#ifndef __SANITIZE_THREAD__
    /* ThreadSanitizer cannot start threads after a multi-threaded fork;
     * the plain and ASan builds run this one. */
    test_move_in_forked_child(); /* last: the pool is running by now */
#endif
    return check_report("move_threads");
}
