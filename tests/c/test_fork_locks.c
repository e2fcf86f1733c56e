/* The core's one fork rule (src/core/fork.c): fork() while another thread
 * is stopped inside a part's lock waits until that thread lets go, and the
 * child can then use every part -- moves, an Evictable's evict and
 * promote, the file store, a block device, the route registry, the
 * allocator's block cache -- and exit. Each lock is held by a thread
 * stopped at a pause point inside it; a helper resumes it a little after
 * the fork began. A part whose lock the fork does not take leaves it held
 * in the child, whose use of that part then hangs: every child ends itself
 * by SIGALRM, and the parent reports which part it was.
 *
 * Under ThreadSanitizer a child may not start threads after a
 * multi-threaded fork, so there the child leaves out what starts one (the
 * move engine's pool, the file store's reaper). */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "fork_child.h"
#include "loop.h"
#include <strideweave/strideweave.h>
#include "strideweave/testing.h"

#define N 64

static loop_dev loop;
static int have_loop;

static const sw_carrier_class class_a = {.name = "A", .flags = SW_CARRIER_CLASS_STATE_ONLY};
static const sw_carrier_class class_b = {.name = "B", .flags = SW_CARRIER_CLASS_STATE_ONLY};

/* ---- the child: every part once ------------------------------------------ */

static sw_carrier *cpu_filled(float base)
{
    sw_error err;
    sw_carrier *c = NULL;
    if (sw_cpu_new(N, SW_DT_FLOAT32, 0, &c, &err) != SW_OK)
        return NULL;
    float v[N];
    for (int i = 0; i < N; i++)
        v[i] = base + (float)i;
    if (sw_carrier_write(c, 0, N, v, &err) != SW_OK) {
        sw_carrier_unref(c);
        return NULL;
    }
    return c;
}

static int holds(sw_carrier *c, float base)
{
    sw_error err;
    float v[N];
    if (sw_carrier_read(c, 0, N, v, &err) != SW_OK)
        return 0;
    for (int i = 0; i < N; i++)
        if (v[i] != base + (float)i)
            return 0;
    return 1;
}

/* 0, or the number of the first part that failed. */
static int use_routes(void)
{
    sw_error err;
    sw_route_entry bare = {.kind = SW_ROUTE_KIND_BINDING}, e;
    if (sw_route_register(&class_b, &class_a, &bare, &err) != SW_OK)
        return 1;
    if (sw_move_route_resolve(&class_b, &class_a, &e, &err) != SW_OK ||
        e.kind != SW_ROUTE_KIND_BINDING)
        return 2;
    sw_route_entry_release(&e);
    return sw_route_unregister(&class_b, &class_a, NULL, &err) == SW_OK ? 0 : 3;
}

static int use_file_store(void)
{
    sw_error err;
    sw_carrier *f = NULL;
    float v[N] = {0};
    if (sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &f, &err) != SW_OK)
        return 4;
    int rc = sw_carrier_allocate(f, N, &err) == SW_OK && sw_carrier_write(f, 0, N, v, &err) == SW_OK
                 ? 0
                 : 5;
    if (!CHILD_STARTS_THREADS)
        return rc; /* closing the file starts the reaper: left to _exit */
    if (sw_carrier_release(f, &err) != SW_OK)
        rc = rc ? rc : 6;
    sw_carrier_unref(f);
    return rc;
}

static int use_moves_and_evictable(void)
{
    if (!CHILD_STARTS_THREADS)
        return 0;
    sw_error err;
    sw_carrier *src = cpu_filled(1.0f), *dst = NULL, *file = NULL, *e = NULL;
    sw_tensor *t = NULL, *r = NULL;
    int64_t ext[1] = {N};
    int rc = 0;
    if (!src || sw_cpu_new(N, SW_DT_FLOAT32, 0, &dst, &err) != SW_OK ||
        sw_tensor_new_strided(src, 0, 1, ext, NULL, &t, &err) != SW_OK)
        return 7;
    if (sw_move(t, dst, &r, &err) != SW_OK || !holds(dst, 1.0f))
        rc = 8;
    sw_tensor_unref(r);
    sw_tensor_unref(t);
    sw_carrier_unref(src);
    sw_carrier *prim = cpu_filled(2.0f);
    if (!rc && (!prim || sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &file, &err) != SW_OK ||
                sw_evictable_new(prim, file, NULL, &e, &err) != SW_OK))
        rc = 9;
    if (!rc && (sw_evictable_evict(e, &err) != SW_OK || !sw_evictable_is_evicted(e) ||
                sw_evictable_promote(e, &err) != SW_OK || !holds(e, 2.0f)))
        rc = 10;
    if (e) {
        sw_carrier_release(e, NULL);
        sw_carrier_unref(e);
    }
    sw_carrier_unref(file);
    sw_carrier_unref(prim);
    sw_carrier_unref(dst);
    return rc;
}

static int use_block_device(void)
{
    if (!have_loop)
        return 0;
    sw_error err;
    sw_block_device *d = NULL;
    sw_carrier *c = NULL;
    float v[N] = {0};
    if (sw_block_device_open(loop.path, &d, &err) != SW_OK)
        return 11;
    int rc = sw_block_device_allocate(d, N, SW_DT_FLOAT32, 0, &c, &err) == SW_OK &&
                     sw_carrier_write(c, 0, N, v, &err) == SW_OK
                 ? 0
                 : 12;
    if (c) {
        sw_carrier_release(c, NULL);
        sw_carrier_unref(c);
    }
    if (sw_block_device_close(d, &err) != SW_OK)
        rc = rc ? rc : 13;
    sw_block_device_unref(d);
    return rc;
}

static int use_allocator(void)
{
    void *big = sw_malloc((size_t)4 << 20); /* the block cache's size class */
    if (!big)
        return 14;
    sw_free(big);
    sw_alloc_trim();
    return 0;
}

static int use_every_part(void)
{
    int rc;
    if ((rc = use_routes()) || (rc = use_file_store()) || (rc = use_moves_and_evictable()) ||
        (rc = use_block_device()) || (rc = use_allocator()))
        return rc;
    return 0;
}

/* ---- the holders: each stops inside one part's lock ----------------------- */

static void *hold_route_lock(void *arg)
{
    (void)arg;
    sw_error err;
    sw_route_entry bare = {.kind = SW_ROUTE_KIND_BINDING};
    CHECK(sw_route_register(&class_a, &class_b, &bare, &err) == SW_OK);
    CHECK(sw_route_unregister(&class_a, &class_b, NULL, &err) == SW_OK);
    return NULL;
}

static void *hold_session_lock(void *arg)
{
    (void)arg;
    sw_error err;
    sw_carrier *f = NULL;
    CHECK(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &f, &err) == SW_OK);
    CHECK(sw_carrier_allocate(f, N, &err) == SW_OK);
    sw_carrier_release(f, NULL);
    sw_carrier_unref(f);
    return NULL;
}

/* A small file's descriptor goes to the reaper's queue on release. */
static void *hold_reaper_lock(void *arg)
{
    (void)arg;
    sw_carrier *f = arg;
    sw_error err;
    CHECK(sw_carrier_release(f, &err) == SW_OK);
    return NULL;
}

static void *hold_open_list_lock(void *arg)
{
    (void)arg;
    sw_error err;
    sw_block_device *d = NULL;
    CHECK(sw_block_device_open(loop.path, &d, &err) == SW_OK);
    if (d) {
        CHECK(sw_block_device_close(d, &err) == SW_OK);
        sw_block_device_unref(d);
    }
    return NULL;
}

static void *hold_allocator_lock(void *arg)
{
    (void)arg;
    sw_alloc_trim();
    return NULL;
}

/* The holder and the resumer run detached, so that a child, which has
 * neither, does not count them as threads nobody joined (ThreadSanitizer
 * reports those at exit); the parent waits for `done`. */
typedef struct helper {
    void *(*fn)(void *);
    void *arg;
    _Atomic int done;
} helper;

static void *helper_main(void *p)
{
    helper *h = p;
    h->fn(h->arg);
    atomic_store(&h->done, 1);
    return NULL;
}

static void helper_start(helper *h)
{
    pthread_attr_t attr;
    pthread_t t;
    CHECK(pthread_attr_init(&attr) == 0);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    CHECK(pthread_create(&t, &attr, helper_main, h) == 0);
    pthread_attr_destroy(&attr);
}

static void helper_wait(helper *h)
{
    struct timespec ms = {0, 1000 * 1000};
    while (!atomic_load(&h->done))
        nanosleep(&ms, NULL);
}

/* Lets the stopped thread go on a little after the fork began: a fork that
 * waits for the lock finishes after this; one that does not, before. */
static void *resume_soon(void *arg)
{
    (void)arg;
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
    sw_fault_resume();
    return NULL;
}

static void fork_while_stopped_in(const char *point, void *(*holder)(void *), void *arg,
                                  const char *what)
{
    CHECK(sw_fault_arm(point, 0, 1) == SW_OK);
    helper held = {.fn = holder, .arg = arg}, resumer = {.fn = resume_soon};
    helper_start(&held);
    sw_fault_wait_paused();
    helper_start(&resumer);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(20); /* a lock left held: the child hangs, SIGALRM ends it */
        _exit(use_every_part());
    }
    helper_wait(&resumer);
    helper_wait(&held);
    sw_fault_clear();
    reap(pid, what);
}

static void test_fork_inside_the_route_registry(void)
{
    fork_while_stopped_in("route_register_pause", hold_route_lock, NULL,
                          "fork inside the route registry");
}

static void test_fork_inside_the_file_session(void)
{
    fork_while_stopped_in("file_session_pause", hold_session_lock, NULL,
                          "fork inside the file session");
}

static void test_fork_inside_the_file_reaper(void)
{
    sw_error err;
    sw_carrier *f = NULL;
    CHECK(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &f, &err) == SW_OK);
    CHECK(sw_carrier_allocate(f, N, &err) == SW_OK);
    fork_while_stopped_in("file_reap_queue_pause", hold_reaper_lock, f,
                          "fork inside the file reaper");
    sw_carrier_unref(f);
}

static void test_fork_inside_the_block_device_list(void)
{
    if (!have_loop)
        return;
    fork_while_stopped_in("blockdev_open_pause", hold_open_list_lock, NULL,
                          "fork inside the block device list");
}

/* The block cache had no fork handler before the coordinator: this one
 * hung in the child's first large allocation. */
static void test_fork_inside_the_allocator_cache(void)
{
    fork_while_stopped_in("alloc_trim_pause", hold_allocator_lock, NULL,
                          "fork inside the allocator cache");
}

/* Nothing held: the child uses every part from a process that used them. */
static void test_fork_after_every_part_was_used(void)
{
    CHECK(use_every_part() == 0);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(20);
        _exit(use_every_part());
    }
    reap(pid, "fork after every part was used");
}

int main(void)
{
    if (!sw_fault_enabled()) {
        printf("fork_locks: needs fault injection (pause points); nothing to run\n");
        return 0;
    }
    const char *why = loop_unavailable();
    have_loop = !why && loop_attach(&loop, 8 << 20, 0, &why) == 0;
    if (!have_loop)
        printf("fork_locks: no block device here (%s): its part is left out\n", why);
    test_fork_after_every_part_was_used();
    test_fork_inside_the_route_registry();
    test_fork_inside_the_file_session();
    test_fork_inside_the_file_reaper();
    test_fork_inside_the_block_device_list();
    test_fork_inside_the_allocator_cache();
    if (have_loop)
        loop_detach(&loop);
    return check_report("fork_locks");
}
