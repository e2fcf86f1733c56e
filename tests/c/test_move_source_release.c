/* The release of a move's source (contract C-23, filestore.h): a class
 * flagged SW_CARRIER_CLASS_RELEASE_REMOVES_FILES (FileBacked, and Evictable
 * whose tier is a file) has a removed file of 1 MiB or more closed in the
 * background, so the move's caller does not free its storage; a class
 * without the flag releases as anywhere else, its large file closed on
 * the caller. The background close is held at its pause point, so a
 * deferred close is seen still pending and a close on the caller is not.
 * Needs fault injection (the pause point); without it, it checks nothing. */
#include <string.h>

#include "check.h"
#include "helpers.h"
#include <strideweave/strideweave.h>
#include "strideweave/testing.h"

#define N (1 << 18) /* 1 MiB of Float32: a large file (filestore.h) */

/* A FileBacked holding cpu_values(N, 0.0f). */
static sw_carrier *file_values(void)
{
    sw_error err;
    sw_carrier *f = NULL, *cpu = cpu_values(N, 0.0f);
    sw_tensor *t = NULL, *r = NULL;
    int64_t ext[1] = {N};
    sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &f, &err);
    if (f && cpu && sw_tensor_new_strided(cpu, 0, 1, ext, NULL, &t, &err) == SW_OK)
        CHECK_EQ_I64(sw_move(t, f, &r, &err), SW_OK);
    sw_tensor_unref(r);
    sw_tensor_unref(t);
    sw_carrier_unref(cpu);
    return f;
}

/* A class of this test's own, without the flag: it keeps its slots in a
 * FileBacked it holds and releases that one at its own release. */
static int64_t held_size(void *impl)
{
    return sw_carrier_size(impl);
}

static sw_status held_read(void *impl, int64_t slot, int64_t count, void *out, sw_error *err)
{
    return sw_carrier_read(impl, slot, count, out, err);
}

static sw_status held_write(void *impl, int64_t slot, int64_t count, const void *in,
                            sw_error *err)
{
    return sw_carrier_write(impl, slot, count, in, err);
}

static void held_release(void *impl)
{
    (void)sw_carrier_release(impl, NULL);
}

static void held_destroy(void *impl)
{
    sw_carrier_unref(impl);
}

static const sw_carrier_class holder_class = {
    .name = "FileHolder",
    .size = held_size,
    .read = held_read,
    .write = held_write,
    .release = held_release,
    .destroy = held_destroy,
};

/* Move all N slots of `src` into a fresh CPU carrier with the background
 * close held; answer how many removed files were left open to it. */
static int closes_left_to_background(sw_carrier *src)
{
    sw_error err;
    sw_carrier *dst = NULL;
    sw_tensor *t = NULL, *r = NULL;
    int64_t ext[1] = {N};
    CHECK_EQ_I64(sw_cpu_new(N, SW_DT_FLOAT32, SW_CARRIER_EMPTY, &dst, &err), SW_OK);
    CHECK_EQ_I64(sw_tensor_new_strided(src, 0, 1, ext, NULL, &t, &err), SW_OK);
    sw_filestore_reclaim_wait();
    CHECK_EQ_I64(sw_fault_arm("file_reclaim_pause", 0, 1), SW_OK);
    if (sw_move(t, dst, &r, &err) != SW_OK)
        fprintf(stderr, "move: %s\n", err.msg);
    CHECK(sw_carrier_is_released(src));
    CHECK_EQ_I64(((float *)sw_cpu_pointer(dst))[N - 1], (float)(N - 1));
    int left = sw_filestore_reclaim_pending();
    if (left)
        sw_fault_wait_paused(); /* the background close stopped before closing it */
    sw_fault_clear();
    sw_fault_resume();
    sw_filestore_reclaim_wait();
    CHECK_EQ_I64(sw_filestore_reclaim_pending(), 0);
    sw_tensor_unref(r);
    sw_tensor_unref(t);
    sw_carrier_unref(dst);
    return left;
}

static void test_c23_moved_file_backed_source_is_closed_in_the_background(void)
{
    sw_carrier *f = file_values();
    CHECK(f != NULL);
    if (f)
        CHECK_EQ_I64(closes_left_to_background(f), 1);
    sw_carrier_unref(f);
}

static void test_c23_moved_evictable_source_with_a_file_tier_is_closed_in_the_background(void)
{
    sw_error err;
    /* Promoted, its file tier still holding 1 MiB: the move's release of
     * the Evictable removes that file. */
    sw_carrier *cpu = cpu_values(N, 0.0f), *f = file_values(), *e = NULL;
    CHECK_EQ_I64(sw_evictable_new(cpu, f, NULL, &e, &err), SW_OK);
    if (e)
        CHECK_EQ_I64(closes_left_to_background(e), 1);
    CHECK(sw_carrier_is_released(f));
    sw_carrier_unref(e);
    sw_carrier_unref(f);
    sw_carrier_unref(cpu);
}

static void test_c23_a_class_without_the_flag_closes_on_the_caller(void)
{
    sw_error err;
    sw_carrier *f = file_values(), *h = NULL;
    CHECK_EQ_I64(sw_carrier_new(&holder_class, f, SW_DT_FLOAT32, 0, &h, &err), SW_OK);
    if (h)
        CHECK_EQ_I64(closes_left_to_background(h), 0);
    else
        sw_carrier_unref(f);
    sw_carrier_unref(h);
}

int main(void)
{
    if (!sw_fault_enabled()) {
        printf("move_source_release: needs fault injection, skipped\n");
        return 77;
    }
    test_c23_moved_file_backed_source_is_closed_in_the_background();
    test_c23_moved_evictable_source_with_a_file_tier_is_closed_in_the_background();
    test_c23_a_class_without_the_flag_closes_on_the_caller();
    sw_move_drain();
    return check_report("move_source_release");
}
