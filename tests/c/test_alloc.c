/* Counted aligned allocations, fault injection, the clock, error records. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "strideweave/alloc.h"
#include "strideweave/clock.h"
#include "strideweave/status.h"
#include "strideweave/testing.h"
#include "alloc_internal.h"

static void test_counts_and_alignment(void)
{
    int64_t before = sw_alloc_live_bytes();
    unsigned char *a = sw_malloc(100);
    unsigned char *b = sw_calloc(10, 7);
    CHECK(a != NULL && b != NULL);
    CHECK(((uintptr_t)a % SW_ALIGNMENT) == 0);
    CHECK(((uintptr_t)b % SW_ALIGNMENT) == 0);
    CHECK_EQ_I64(sw_alloc_live_bytes() - before, 170);
    CHECK_EQ_I64(sw_alloc_size(a), 100);
    int zero = 1;
    for (int i = 0; i < 70; i++)
        zero &= b[i] == 0;
    CHECK(zero);
    memset(a, 0xAB, 100); /* writable across the whole block (ASan checks) */
    sw_free(a);
    sw_free(b);
    sw_free(NULL);
    CHECK_EQ_I64(sw_alloc_live_bytes(), before);
}

static void test_zero_and_overflow(void)
{
    int64_t before = sw_alloc_live_bytes();
    void *z = sw_malloc(0);
    CHECK(z != NULL);
    sw_free(z);
    CHECK(sw_calloc(SIZE_MAX / 2, 4) == NULL);
    CHECK(sw_malloc(SIZE_MAX - 8) == NULL);
    CHECK_EQ_I64(sw_alloc_live_bytes(), before);
}

static void test_large_calloc_is_zero(void)
{
    size_t n = 8u << 20;
    unsigned char *p = sw_calloc(n, 1);
    CHECK(p != NULL);
    CHECK(p[0] == 0 && p[n / 2] == 0 && p[n - 1] == 0);
    sw_free(p);
}

static void test_fault_injection(void)
{
    if (!sw_fault_enabled()) {
        CHECK(sw_fault_arm("alloc", 0, 1) == SW_ENOTSUP);
        CHECK(sw_fault_hit("alloc") == 0);
        return;
    }
    CHECK(sw_fault_arm("alloc", 1, 2) == SW_OK);
    void *first = sw_malloc(8); /* skipped */
    void *second = sw_malloc(8);
    void *third = sw_calloc(1, 8);
    void *fourth = sw_malloc(8); /* count exhausted */
    CHECK(first != NULL);
    CHECK(second == NULL);
    CHECK(third == NULL);
    CHECK(fourth != NULL);
    sw_free(first);
    sw_free(fourth);
    CHECK(sw_fault_arm("pwrite", 0, -1) == SW_OK);
    CHECK(sw_fault_hit("pwrite") && sw_fault_hit("pwrite") && !sw_fault_hit("pread"));
    sw_fault_clear();
    CHECK(!sw_fault_hit("pwrite"));
    CHECK(sw_fault_arm(NULL, 0, 1) == SW_EINVAL);
    CHECK(sw_fault_arm("alloc", -1, 1) == SW_EINVAL);
}

/* Large freed blocks are reused; a reused calloc block is zero again and
 * none of it counts as live. */
static void test_large_block_reuse(void)
{
    const size_t n = (size_t)4 << 20;
    int64_t before = sw_alloc_live_bytes();
    unsigned char *a = sw_malloc(n);
    CHECK(a != NULL);
    memset(a, 0xAB, n);
    sw_free(a);
    CHECK_EQ_I64(sw_alloc_live_bytes(), before);
    unsigned char *b = sw_calloc(1, n - 100); /* about the same size */
    CHECK(b != NULL);
    int zero = 1;
    for (size_t i = 0; i < n - 100; i++)
        zero &= b[i] == 0;
    CHECK(zero);
    CHECK_EQ_I64((uintptr_t)b % SW_ALIGNMENT, 0);
    CHECK_EQ_I64(sw_alloc_live_bytes() - before, (int64_t)(n - 100));
    unsigned char *c = sw_malloc(n * 4); /* much larger: a fresh block */
    CHECK(c != NULL && c != b);
    c[n * 4 - 1] = 1;
    sw_free(b);
    sw_free(c);
    sw_alloc_trim();
    sw_alloc_trim(); /* idempotent */
    CHECK_EQ_I64(sw_alloc_live_bytes(), before);
}

static void test_clock_and_errors(void)
{
    uint64_t t0 = sw_clock_ns(), t1 = sw_clock_ns();
    CHECK(t1 >= t0);
    sw_error err;
    CHECK(sw_error_set(&err, SW_EINVAL, "bad %d", 7) == SW_EINVAL);
    CHECK(err.code == SW_EINVAL && strcmp(err.msg, "bad 7") == 0);
    CHECK(sw_error_set_errno(&err, SW_EIO, 5, "io") == SW_EIO && err.sys_errno == 5);
    CHECK(sw_error_set(NULL, SW_ENOMEM, "x") == SW_ENOMEM);
    sw_error_clear(&err);
    CHECK(err.code == SW_OK && err.msg[0] == '\0');
}

/* C-15a: a pinned block freed by its owner is quarantined: still counted,
 * its range never handed out again, its whole pages zeroed (returned), and
 * freed by the last unpin. */
static void test_pinned_block_is_quarantined(void)
{
    int64_t before = sw_alloc_live_bytes();
    int64_t q0 = sw_alloc_quarantined_blocks();
    size_t n = (size_t)3 << 20; /* several pages, and past the reuse cache's minimum */
    unsigned char *p = sw_malloc(n);
    CHECK(p != NULL);
    memset(p, 0x5A, n);
    sw_alloc_pin(p);
    sw_alloc_pin(p);
    sw_free(p);
    CHECK_EQ_I64(sw_alloc_quarantined_blocks() - q0, 1);
    CHECK_EQ_I64(sw_alloc_live_bytes() - before, (int64_t)n);
    CHECK(p[n / 2] == 0); /* the interior pages went back: fresh zero pages */
    p[n / 2] = 7;         /* a stale write lands in the reserved range only */
    /* Nothing allocated now may overlap the quarantined range. */
    unsigned char *others[8];
    for (int i = 0; i < 8; i++) {
        others[i] = sw_malloc(n);
        CHECK(others[i] != NULL);
        CHECK(others[i] + n <= p || others[i] >= p + n);
    }
    for (int i = 0; i < 8; i++)
        sw_free(others[i]);
    sw_alloc_unpin(p);
    CHECK_EQ_I64(sw_alloc_quarantined_blocks() - q0, 1); /* one pin left */
    sw_alloc_unpin(p);
    CHECK_EQ_I64(sw_alloc_quarantined_blocks() - q0, 0);
    CHECK_EQ_I64(sw_alloc_live_bytes(), before);
    /* A small block simply waits; unpinned before the free, nothing waits. */
    unsigned char *s = sw_malloc(40);
    sw_alloc_pin(s);
    sw_free(s);
    CHECK_EQ_I64(sw_alloc_live_bytes() - before, 40);
    sw_alloc_unpin(s);
    CHECK_EQ_I64(sw_alloc_live_bytes(), before);
    s = sw_malloc(40);
    sw_alloc_pin(s);
    sw_alloc_unpin(s);
    sw_free(s);
    sw_alloc_pin(NULL);
    sw_alloc_unpin(NULL);
    CHECK_EQ_I64(sw_alloc_live_bytes(), before);
    CHECK_EQ_I64(sw_alloc_quarantined_bytes(), 0);
    sw_alloc_trim();
}

static pthread_mutex_t pin_lock = PTHREAD_MUTEX_INITIALIZER;

static void *unpin_thread(void *p)
{
    pthread_mutex_lock(&pin_lock);
    sw_alloc_unpin(p);
    pthread_mutex_unlock(&pin_lock);
    return NULL;
}

/* The last unpin comes from another thread, before or after the owner's
 * free, serialized by the caller's lock as alloc.h asks: every block is
 * freed exactly once (ASan would see a double free), the counts end at 0. */
static void test_unpin_on_another_thread(void)
{
    int64_t before = sw_alloc_live_bytes();
    for (int i = 0; i < 2000; i++) {
        size_t n = i % 2 ? 64 : (size_t)64 << 10;
        void *p = sw_malloc(n);
        CHECK(p != NULL);
        sw_alloc_pin(p);
        pthread_t th;
        CHECK(pthread_create(&th, NULL, unpin_thread, p) == 0);
        pthread_mutex_lock(&pin_lock);
        sw_free(p);
        pthread_mutex_unlock(&pin_lock);
        CHECK(pthread_join(th, NULL) == 0);
    }
    CHECK_EQ_I64(sw_alloc_live_bytes(), before);
    CHECK_EQ_I64(sw_alloc_quarantined_blocks(), 0);
}

int main(void)
{
    test_counts_and_alignment();
    test_zero_and_overflow();
    test_large_calloc_is_zero();
    test_fault_injection();
    test_large_block_reuse();
    test_clock_and_errors();
    test_pinned_block_is_quarantined();
    test_unpin_on_another_thread();
    return check_report("alloc");
}
