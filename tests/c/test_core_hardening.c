/* Adversarial checks of the carriers added this round, on the public
 * headers only: fault injection walked over every call of a site
 * (skip 0, 1, 2, ... until the call succeeds; every failed attempt leaves
 * tiles, values, version, live bytes and session files as they were),
 * release and unref while work is in flight, integer overflow in sizes and
 * ranges, NULL and bad arguments. */
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "helpers.h"
#include "strideweave/alloc.h"
#include "strideweave/filestore.h"
#include "strideweave/strideweave.h"

#define MAXS 256
#define MAXT 64

static float value_of(int64_t slot) { return (float)slot * 0.25f + 3.0f; }

#include "te_fixture.h"
#include "strideweave/testing.h"

/* 4x4 slots in 2x2 tiles of 2x2; a full CPU primary of value_of, an empty
 * secondary (FileBacked when `file`). */
static sw_tiled_evictable *make(int file)
{
    int64_t grid[] = {2, 2}, tile[] = {2, 2};
    return make_grid(2, grid, tile, file);
}

/* The fixture's snapshot, plus the session's file count and live bytes. */
typedef struct hard_snap {
    snap te;
    int files;
    int64_t live;
} hard_snap;

static void take(sw_tiled_evictable *te, hard_snap *s)
{
    memset(s, 0, sizeof *s);
    take_tiles(te, &s->te);
    s->files = session_files();
    s->live = sw_alloc_live_bytes();
}

static int same(const hard_snap *a, const hard_snap *b) { return memcmp(a, b, sizeof *a) == 0; }

static const char *const sites[] = {"alloc", "pread", "pwrite", "open", "truncate", "tile_copy",
                                    "tile_gather", "tile_submit"};

/* ---- the engines recover from a failed start ---------------------------------- */

/* The first asynchronous call of the process starts the pool and the
 * completion thread. When that start fails (out of memory here), the call
 * fails; a later call must try again rather than fail the same way for the
 * life of the process. Runs first: nothing may have started them yet. */
static void test_engines_recover_from_failed_start(void)
{
    if (!sw_fault_enabled())
        return;
    int ok = 0, failed = 0;
    for (long skip = 0; skip < 200 && !ok; skip++) {
        sw_tiled_evictable *te = make(0);
        sw_te_work *w = NULL;
        sw_error err;
        sw_fault_arm("alloc", skip, 1);
        sw_status st = sw_tiled_evictable_evict_async(te, (int64_t[]){1, 0}, 1, &w, &err);
        sw_fault_clear();
        if (st == SW_OK)
            st = sw_te_work_wait(w, NULL, &err);
        sw_te_work_unref(w);
        sw_tiled_evictable_drain();
        if (st == SW_OK)
            ok = 1;
        else
            failed++;
        sw_tiled_evictable_release(te, NULL);
        sw_tiled_evictable_unref(te);
    }
    if (!ok)
        fprintf(stderr, "TiledEvictable: async work never succeeded after a failed start\n");
    CHECK(ok && failed >= 1);
    ok = failed = 0;
    for (long skip = 0; skip < 200 && !ok; skip++) {
        sw_carrier *src = NULL, *dst = NULL;
        sw_cpu_new(4, SW_DT_FLOAT32, 0, &src, NULL);
        sw_cpu_new(4, SW_DT_FLOAT32, 0, &dst, NULL);
        sw_tensor *t = NULL, *r = NULL;
        int64_t ext[] = {4};
        sw_tensor_new_strided(src, 0, 1, ext, NULL, &t, NULL);
        sw_error err;
        sw_fault_arm("alloc", skip, 1);
        sw_status st = sw_move(t, dst, &r, &err);
        sw_fault_clear();
        if (st == SW_OK)
            ok = 1;
        else
            failed++;
        sw_move_drain();
        sw_tensor_unref(r);
        sw_tensor_unref(t);
        sw_carrier_release(src, NULL);
        sw_carrier_release(dst, NULL);
        sw_carrier_unref(src);
        sw_carrier_unref(dst);
    }
    if (!ok)
        fprintf(stderr, "move: never succeeded after a failed start\n");
    CHECK(ok && failed >= 1);
}

/* ---- writes that promote or materialize a tile ------------------------------- */

/* Writing into a secondary tile promotes it first; writing non-zero into an
 * implicit tile materializes it. Under a fault at any call of any site the
 * write fails with nothing changed, then succeeds once the fault is past. */
static void test_te_write_fault_walk(void)
{
    if (!sw_fault_enabled())
        return;
    for (int file = 0; file < 2; file++)
        for (size_t f = 0; f < sizeof sites / sizeof sites[0]; f++)
            for (int implicit = 0; implicit < 2; implicit++) {
                sw_tiled_evictable *te = make(file);
                sw_tiled_evictable *target = te;
                if (implicit)
                    CHECK(sw_tiled_evictable_allocate_like(te, 0, &target, NULL) == SW_OK);
                else
                    CHECK(sw_tiled_evictable_evict(te, (int64_t[]){0, 0, 1, 1}, 2, NULL) ==
                          SW_OK);
                /* slots 0..1 are in tile (0,0); slot 5 too (row 1) */
                const float in[2] = {-7.0f, -8.0f};
                int done = 0;
                for (long skip = 0; skip < 200 && !done; skip++) {
                    hard_snap before, after;
                    take(target, &before);
                    sw_fault_arm(sites[f], skip, 1);
                    sw_error err;
                    sw_status st = sw_tiled_evictable_write(target, 4, 2, in, &err);
                    sw_fault_clear();
                    if (st == SW_OK) {
                        done = 1;
                        break;
                    }
                    take(target, &after);
                    if (!same(&before, &after))
                        fprintf(stderr, "write: %s fault at call %ld (file %d, implicit %d) "
                                        "changed something: %s\n",
                                sites[f], skip, file, implicit, err.msg);
                    CHECK(same(&before, &after));
                }
                CHECK(done);
                float got[2];
                CHECK(sw_tiled_evictable_read(target, 4, 2, got, NULL) == SW_OK);
                CHECK(got[0] == -7.0f && got[1] == -8.0f);
                CHECK_EQ_I64(sw_tiled_evictable_version(target), 1);
                if (target != te) {
                    sw_tiled_evictable_release(target, NULL);
                    sw_tiled_evictable_unref(target);
                }
                sw_tiled_evictable_release(te, NULL);
                sw_tiled_evictable_unref(te);
            }
}

/* ---- construction and the factories --------------------------------------------- */

/* A failed construction claims nothing (the tiers stay usable) and frees
 * what it made; the factories free what they made. */
static void test_te_factories_fault_walk(void)
{
    if (!sw_fault_enabled())
        return;
    int64_t grid[] = {2, 2}, tile[] = {2, 2};
    for (int file = 0; file < 2; file++) {
        int done = 0;
        for (long skip = 0; skip < 200 && !done; skip++) {
            sw_carrier *p = NULL, *s = NULL;
            sw_cpu_new(16, SW_DT_FLOAT32, 0, &p, NULL);
            if (file)
                sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &s, NULL);
            else
                sw_cpu_new(0, SW_DT_FLOAT32, 0, &s, NULL);
            int64_t live = sw_alloc_live_bytes();
            sw_tiled_evictable *te = NULL;
            sw_fault_arm("alloc", skip, 1);
            sw_status st = sw_tiled_evictable_new(p, s, 2, grid, tile, &te, NULL);
            sw_fault_clear();
            if (st == SW_OK) {
                done = 1;
                sw_tiled_evictable_release(te, NULL);
                sw_tiled_evictable_unref(te);
            } else {
                CHECK(te == NULL);
                CHECK_EQ_I64(sw_alloc_live_bytes(), live);
                CHECK(!sw_carrier_is_owned(p) && !sw_carrier_is_owned(s));
                CHECK(sw_carrier_write(p, 0, 1, (float[]){1.0f}, NULL) == SW_OK);
                CHECK(sw_carrier_release(p, NULL) == SW_OK);
                CHECK(sw_carrier_release(s, NULL) == SW_OK);
            }
            sw_carrier_unref(p);
            sw_carrier_unref(s);
        }
        CHECK(done);
    }
    float values[16];
    for (int i = 0; i < 16; i++)
        values[i] = i < 4 ? 0.0f : value_of(i);
    const char *fsites[] = {"alloc", "open", "truncate"};
    for (int file = 0; file < 2; file++)
        for (size_t f = 0; f < sizeof fsites / sizeof fsites[0]; f++)
            for (int which = 0; which < 2; which++) {
                sw_tiled_evictable *te = make(file);
                int done = 0;
                for (long skip = 0; skip < 200 && !done; skip++) {
                    int64_t live = sw_alloc_live_bytes();
                    int files = session_files();
                    sw_tiled_evictable *like = NULL;
                    sw_fault_arm(fsites[f], skip, 1);
                    sw_status st = which ? sw_tiled_evictable_new_like(te, values, 16, 0, &like,
                                                                       NULL)
                                         : sw_tiled_evictable_allocate_like(te, 0, &like, NULL);
                    sw_fault_clear();
                    if (st == SW_OK) {
                        done = 1;
                        sw_tiled_evictable_release(like, NULL);
                        sw_tiled_evictable_unref(like);
                    } else {
                        CHECK(like == NULL);
                        CHECK_EQ_I64(sw_alloc_live_bytes(), live);
                        CHECK_EQ_I64(session_files(), files);
                    }
                }
                CHECK(done);
                sw_tiled_evictable_release(te, NULL);
                sw_tiled_evictable_unref(te);
            }
}

/* ---- a projection whose policy promotes and evicts ------------------------------ */

static sw_status promote_and_evict(const int64_t *required, int64_t n, int32_t rank,
                                   const char *purpose, sw_te_plan *plan, void *user,
                                   sw_error *err)
{
    (void)required, (void)n, (void)rank, (void)purpose, (void)user;
    sw_status st = sw_te_plan_add(plan, SW_TE_PLAN_PROMOTE, (int64_t[]){1, 0}, err);
    if (st == SW_OK)
        st = sw_te_plan_add(plan, SW_TE_PLAN_EVICT, (int64_t[]){1, 1}, err);
    return st;
}

static void test_te_policy_projection_fault_walk(void)
{
    if (!sw_fault_enabled())
        return;
    for (int async = 0; async < 2; async++)
    for (int file = 0; file < 2; file++)
        for (size_t f = 0; f < sizeof sites / sizeof sites[0]; f++) {
            sw_tiled_evictable *te = make(file);
            CHECK(sw_tiled_evictable_evict(te, (int64_t[]){1, 0, 0, 1}, 2, NULL) == SW_OK);
            sw_te_policy pol = {promote_and_evict, NULL};
            CHECK(sw_tiled_evictable_set_policy(te, &pol, NULL) == SW_OK);
            int64_t a0[] = {0}, a1[] = {0, 1}, counts[] = {1, 2};
            const int64_t *axes[] = {a0, a1};
            sw_tile_selection sel = {2, counts, axes};
            int done = 0;
            for (long skip = 0; skip < 200 && !done; skip++) {
                hard_snap before, after;
                take(te, &before);
                sw_fault_arm(sites[f], skip, 1);
                sw_tensor *out = NULL;
                sw_error err;
                sw_status st;
                if (async) {
                    sw_te_work *w = NULL;
                    st = sw_tiled_evictable_project_async(te, NULL, 0, &sel, NULL, &w, &err);
                    if (st == SW_OK)
                        st = sw_te_work_wait(w, &out, &err);
                    sw_te_work_unref(w);
                    sw_tiled_evictable_drain();
                } else {
                    st = sw_tiled_evictable_project(te, NULL, 0, &sel, NULL, &out, &err);
                }
                sw_fault_clear();
                if (st == SW_OK) {
                    done = 1;
                    sw_tensor_unref(out);
                    break;
                }
                CHECK(out == NULL);
                if (skip == 199)
                    fprintf(stderr, "project: %s (file %d, async %d) still fails: %s\n",
                            sites[f], file, async, err.msg);
                take(te, &after);
                if (!same(&before, &after))
                    fprintf(stderr, "project: %s fault at call %ld (file %d, async %d) "
                                    "changed something: %s\n",
                            sites[f], skip, file, async, err.msg);
                CHECK(same(&before, &after));
            }
            CHECK(done);
            sw_tiled_evictable_release(te, NULL);
            sw_tiled_evictable_unref(te);
        }
}

/* ---- release and unref while work is in flight --------------------------------- */

static void test_te_release_and_drop_while_in_flight(void)
{
    if (!sw_fault_enabled())
        return;
    for (int project = 0; project < 2; project++)
        for (int file = 0; file < 2; file++) {
            sw_tiled_evictable *te = make(file);
            sw_te_work *w = NULL;
            sw_carrier *d = NULL;
            sw_cpu_new(4, SW_DT_FLOAT32, 0, &d, NULL);
            int64_t a0[] = {1}, a1[] = {0}, counts[] = {1, 1};
            const int64_t *axes[] = {a0, a1};
            sw_tile_selection sel = {2, counts, axes};
            if (project) {
                sw_fault_arm("tile_gather_pause", 0, 1);
                CHECK(sw_tiled_evictable_project_async(te, NULL, 0, &sel, d, &w, NULL) ==
                      SW_OK);
            } else {
                sw_fault_arm("tile_copy_pause", 0, 1);
                CHECK(sw_tiled_evictable_evict_async(te, (int64_t[]){1, 0}, 1, &w, NULL) ==
                      SW_OK);
            }
            sw_fault_wait_paused();
            sw_error err;
            CHECK(sw_tiled_evictable_release(te, &err) == SW_ESTATE);
            CHECK(!sw_tiled_evictable_is_released(te));
            if (project) {
                CHECK(sw_carrier_release(d, &err) != SW_OK); /* claimed by the projection */
                CHECK(!sw_carrier_is_released(d));
            }
            /* every handle the caller had goes while the work is stopped */
            sw_tiled_evictable_unref(te);
            sw_carrier_unref(d);
            CHECK(!sw_te_work_done(w));
            sw_te_work_unref(w);
            sw_fault_resume();
            sw_fault_clear();
            sw_tiled_evictable_drain(); /* the work let go of everything (LeakSanitizer) */
        }
}

/* ---- fork while the completion thread commits ---------------------------------- */

#ifndef __SANITIZE_THREAD__ /* TSan cannot follow a multi-threaded fork */
/* fork() while the completion thread is between committing a piece of
 * work and waking its waiters: the child has no completion thread, so
 * waiting on the inherited handle must still return (the committed
 * outcome, or the "forked" refusal), never block for good. */
static void test_te_fork_during_commit(void)
{
    if (!sw_fault_enabled())
        return;
    sw_tiled_evictable *te = make(0);
    sw_te_work *w = NULL;
    sw_fault_arm("tile_commit_pause", 0, 1);
    CHECK(sw_tiled_evictable_evict_async(te, (int64_t[]){1, 0}, 1, &w, NULL) == SW_OK);
    sw_fault_wait_paused();
    pid_t pid = fork();
    if (pid == 0) {
        alarm(10); /* a wait that never returns ends the child by SIGALRM */
        sw_status st = sw_te_work_wait(w, NULL, NULL);
        _exit(st == SW_OK || st == SW_ESTATE ? 0 : 2);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0))
        fprintf(stderr, "fork during commit: the child's wait %s\n",
                WIFSIGNALED(status) ? "never returned" : "failed");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    sw_fault_resume();
    sw_fault_clear();
    CHECK(sw_te_work_wait(w, NULL, NULL) == SW_OK);
    sw_te_work_unref(w);
    sw_tiled_evictable_release(te, NULL);
    sw_tiled_evictable_unref(te);
}
#endif

/* ---- a write whose tiles change while it promotes -------------------------------- */

typedef struct write_arg {
    sw_tiled_evictable *te;
    sw_status st;
    char msg[512];
} write_arg;

static void *write_across(void *p)
{
    write_arg *a = p;
    /* slots 0..3 (first axis fastest) lie in tiles (0,0) and (1,0) */
    const float in[4] = {-1.0f, -2.0f, -3.0f, -4.0f};
    sw_error err;
    a->st = sw_tiled_evictable_write(a->te, 0, 4, in, &err);
    if (a->st != SW_OK)
        snprintf(a->msg, sizeof a->msg, "%s", err.msg);
    return NULL;
}

/* A write into a secondary tile promotes it first, without the carrier's
 * lock; another thread evicts another tile of the same write meanwhile.
 * The write then fails ("try again"); values and version are unchanged,
 * and the tile it promoted is primary and clean (the header says so). */
static void test_te_write_racing_an_eviction(void)
{
    if (!sw_fault_enabled())
        return;
    for (int file = 0; file < 2; file++) {
        sw_tiled_evictable *te = make(file);
        CHECK(sw_tiled_evictable_evict(te, (int64_t[]){0, 0}, 1, NULL) == SW_OK);
        hard_snap before;
        take(te, &before);
        sw_fault_arm("tile_copy_pause", 0, 1);
        write_arg a = {.te = te};
        pthread_t t;
        CHECK(pthread_create(&t, NULL, write_across, &a) == 0);
        sw_fault_wait_paused(); /* the write is promoting tile (0,0) */
        CHECK(sw_tiled_evictable_evict(te, (int64_t[]){1, 0}, 1, NULL) == SW_OK);
        sw_fault_resume();
        pthread_join(t, NULL);
        sw_fault_clear();
        CHECK(a.st == SW_ESTATE);
        CHECK(strstr(a.msg, "try again") != NULL);
        float got[16];
        CHECK(sw_tiled_evictable_read(te, 0, 16, got, NULL) == SW_OK);
        CHECK(memcmp(got, before.te.values, sizeof got) == 0);
        CHECK_EQ_I64(sw_tiled_evictable_version(te), before.te.version);
        sw_te_tile_state st;
        CHECK(sw_tiled_evictable_tile_state(te, (int64_t[]){0, 0}, &st, NULL) == SW_OK);
        CHECK(st.location == SW_TE_PRIMARY && !st.dirty && !st.pending);
        /* trying again succeeds */
        write_across(&a);
        CHECK(a.st == SW_OK);
        CHECK_EQ_I64(sw_tiled_evictable_version(te), before.te.version + 1);
        sw_tiled_evictable_release(te, NULL);
        sw_tiled_evictable_unref(te);
    }
}

/* ---- sizes, ranges and bad arguments --------------------------------------------- */

static void test_overflow_and_bad_arguments(void)
{
    sw_error err;
    sw_carrier *p = NULL, *s = NULL;
    sw_cpu_new(16, SW_DT_FLOAT32, 0, &p, NULL);
    sw_cpu_new(0, SW_DT_FLOAT32, 0, &s, NULL);
    sw_tiled_evictable *te = NULL;
    int64_t big[] = {INT64_MAX / 2, 4}, one[] = {1, 1};
    CHECK(sw_tiled_evictable_new(p, s, 2, big, one, &te, &err) == SW_EOVERFLOW);
    CHECK(sw_tiled_evictable_new(p, s, 2, one, big, &te, &err) == SW_EOVERFLOW);
    CHECK(sw_tiled_evictable_new(p, s, 2, (int64_t[]){2, 2}, (int64_t[]){2, 2}, NULL, &err) !=
          SW_OK);
    CHECK(te == NULL);
    CHECK(!sw_carrier_is_owned(p) && !sw_carrier_is_owned(s));
    sw_carrier_release(p, NULL);
    sw_carrier_release(s, NULL);
    sw_carrier_unref(p);
    sw_carrier_unref(s);

    te = make(1);
    float buf[4];
    CHECK(sw_tiled_evictable_read(te, INT64_MAX, 2, buf, &err) == SW_ERANGE);
    CHECK(sw_tiled_evictable_read(te, 2, INT64_MAX, buf, &err) == SW_ERANGE);
    CHECK(sw_tiled_evictable_read(te, -1, 1, buf, &err) == SW_ERANGE);
    CHECK(sw_tiled_evictable_write(te, INT64_MAX - 1, 4, buf, &err) == SW_ERANGE);
    CHECK(sw_tiled_evictable_read(te, 0, 1, NULL, &err) == SW_ETYPE);
    int64_t n = -1;
    CHECK(sw_tiled_evictable_tiles(te, (sw_te_filter)99, NULL, 0, &n, &err) == SW_EINVAL);
    CHECK(sw_tiled_evictable_tiles(te, SW_TE_TILES_VALID, NULL, -5, &n, &err) == SW_OK &&
          n == 4);
    CHECK(sw_tiled_evictable_tile_state(te, (int64_t[]){INT64_MIN, 0}, &(sw_te_tile_state){0},
                                        &err) == SW_EINVAL);
    /* more tiles than the grid has: some tile is listed twice */
    int64_t rows[10] = {0, 0, 1, 0, 0, 1, 1, 1, 0, 0};
    CHECK(sw_tiled_evictable_evict(te, rows, 5, &err) == SW_EINVAL);
    CHECK_EQ_I64(sw_tiled_evictable_version(te), 0);
    sw_te_work *w = NULL;
    CHECK(sw_tiled_evictable_evict_async(te, rows, 5, &w, &err) == SW_EINVAL && w == NULL);
    CHECK(sw_te_work_wait(NULL, NULL, &err) == SW_ETYPE);
    CHECK(sw_te_work_done(NULL) == 0);
    sw_te_work_unref(NULL);
    CHECK(sw_te_plan_add(NULL, SW_TE_PLAN_PROMOTE, (int64_t[]){0, 0}, &err) == SW_ETYPE);
    CHECK(sw_tiled_evictable_set_policy(NULL, NULL, &err) == SW_ETYPE);
    /* the projection's rank must be the carrier's */
    int64_t a0[] = {0}, counts[] = {1};
    const int64_t *axes[] = {a0};
    sw_tile_selection sel = {1, counts, axes};
    sw_tensor *out = NULL;
    CHECK(sw_tiled_evictable_project(te, NULL, 0, &sel, NULL, &out, &err) == SW_EINVAL);
    sw_tile_selection neg = {-1, counts, axes};
    CHECK(sw_tiled_evictable_project(te, NULL, 0, &neg, NULL, &out, &err) == SW_EINVAL);
    CHECK(out == NULL);
    sw_tiled_evictable_release(te, NULL);
    CHECK(sw_tiled_evictable_release(te, &err) == SW_OK); /* idempotent */
    CHECK_EQ_I64(sw_tiled_evictable_size(te), 0);
    CHECK(sw_tiled_evictable_read(te, 0, 1, buf, &err) == SW_ESTATE);
    sw_tiled_evictable_unref(te);
}

int main(void)
{
    test_engines_recover_from_failed_start(); /* first: before the engines start */
    test_te_write_fault_walk();
    test_te_factories_fault_walk();
    test_te_policy_projection_fault_walk();
    test_te_release_and_drop_while_in_flight();
    test_overflow_and_bad_arguments();
    test_te_write_racing_an_eviction();
#ifndef __SANITIZE_THREAD__
    test_te_fork_during_commit();
#endif
    sw_tiled_evictable_drain();
    return check_report("core_hardening");
}
