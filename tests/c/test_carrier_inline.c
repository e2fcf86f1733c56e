/* Carriers whose impl lies inside the carrier (sw_carrier_new_inline, the
 * CPU and Generic classes): one allocation, the impl's hot bytes in the
 * carrier's second cache line, freed with the carrier and nowhere else;
 * an export keeps the storage past release and the last handle; a failed
 * storage allocation frees the carrier it made; storage an export pins
 * waits in quarantine after release. (issue 19) */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "alloc_internal.h" /* sw_alloc_quarantined_blocks */
#include "carrier_internal.h"
#include "check.h"
#include "strideweave/testing.h"
#include <strideweave/strideweave.h>

static int inside(const sw_carrier *c, const void *p, size_t bytes)
{
    const char *lo = (const char *)c, *q = p;
    return q >= lo && q + bytes <= lo + sizeof *c;
}

/* The impl is the carrier's inline area, its first 16 bytes in line 2. */
static void test_cpu_impl_inside_carrier(void)
{
    int64_t live0 = sw_alloc_live_bytes();
    sw_carrier *cpu = NULL, *gen = NULL;
    sw_error err;
    float vals[3] = {1, 2, 3};
    CHECK(sw_cpu_new(4, SW_DT_FLOAT32, 0, &cpu, &err) == SW_OK);
    CHECK(sw_generic_new(vals, 3, SW_DT_FLOAT32, 0, &gen, &err) == SW_OK);
    CHECK(cpu->impl == (void *)cpu->inline_impl.bytes && inside(cpu, cpu->impl, 24));
    CHECK(gen->impl == (void *)gen->inline_impl.bytes && inside(gen, gen->impl, 24));
    CHECK(((uintptr_t)cpu->impl - (uintptr_t)cpu) + 16 <= 128);
    /* carrier + storage: two blocks, no third for the impl */
    CHECK(sw_alloc_live_bytes() - live0 ==
          2 * (int64_t)sizeof(sw_carrier) + 16 + 12);
    float got[3];
    CHECK(sw_carrier_read(gen, 0, 3, got, &err) == SW_OK && got[2] == 3.0f);
    sw_carrier_unref(cpu);
    sw_carrier_unref(gen);
    CHECK(sw_alloc_live_bytes() == live0);
}

/* Release frees the storage; the handle (with its impl) lives until the
 * last reference, and reports the released state through the impl. */
static void test_release_then_unref(void)
{
    int64_t live0 = sw_alloc_live_bytes();
    sw_carrier *c = NULL;
    sw_error err;
    CHECK(sw_cpu_new(1024, SW_DT_INT32, 0, &c, &err) == SW_OK);
    sw_carrier_ref(c);
    CHECK(sw_carrier_release(c, &err) == SW_OK);
    CHECK(sw_alloc_live_bytes() - live0 == (int64_t)sizeof(sw_carrier));
    CHECK(sw_carrier_size(c) == 0 && sw_cpu_pointer(c) == NULL);
    sw_carrier_unref(c);
    CHECK(sw_alloc_live_bytes() - live0 == (int64_t)sizeof(sw_carrier));
    sw_carrier_unref(c);
    CHECK(sw_alloc_live_bytes() == live0);
}

/* A DLPack export pins the storage through release and the last handle
 * reference; its deleter frees storage and carrier together. */
static void test_export_pins_inline_carrier(void)
{
    int64_t live0 = sw_alloc_live_bytes();
    sw_carrier *c = NULL;
    sw_error err;
    CHECK(sw_cpu_new(8, SW_DT_FLOAT32, 0, &c, &err) == SW_OK);
    float *p = sw_cpu_pointer(c);
    for (int i = 0; i < 8; i++)
        p[i] = (float)i;
    sw_tensor *t = NULL;
    CHECK(sw_tensor_new_strided(c, 0, 1, (int64_t[]){8}, NULL, &t, &err) == SW_OK);
    DLManagedTensorVersioned *m = NULL;
    CHECK(sw_tensor_to_dlpack(t, &m, &err) == SW_OK);
    sw_tensor_unref(t);
    CHECK(sw_carrier_release(c, &err) == SW_OK);
    sw_carrier_unref(c);
    const float *d = m->dl_tensor.data;
    CHECK(d == p && d[7] == 7.0f); /* still there: the export pins it */
    CHECK(sw_alloc_live_bytes() > live0);
    m->deleter(m);
    CHECK(sw_alloc_live_bytes() == live0);
}

/* An export that pins the storage (sw_tensor_to_dlpack_owned) instead of
 * keeping the carrier: a release meanwhile quarantines the block, not
 * keeps it live, until the owner's release unpins it. */
static void unpin(void *ctx, void *pin)
{
    (void)ctx;
    sw_alloc_unpin(pin);
}

static void test_released_export_is_quarantined(void)
{
    sw_carrier *c = NULL;
    sw_error err;
    CHECK(sw_cpu_new(4096, SW_DT_FLOAT32, 0, &c, &err) == SW_OK);
    sw_tensor *t = NULL;
    CHECK(sw_tensor_new_strided(c, 0, 1, (int64_t[]){4096}, NULL, &t, &err) == SW_OK);
    sw_dlpack_owner owner = {.versioned = 1, .read_only = -1, .release = unpin};
    DLManagedTensorVersioned *m = NULL;
    CHECK(sw_tensor_to_dlpack_owned(t, &owner, (void **)&m, &err) == SW_OK);
    sw_tensor_unref(t);
    int64_t quarantined = sw_alloc_quarantined_blocks();
    CHECK(sw_carrier_release(c, &err) == SW_OK);
    CHECK_EQ_I64(sw_alloc_quarantined_blocks(), quarantined + 1);
    sw_carrier_unref(c);
    m->deleter(m);
    CHECK_EQ_I64(sw_alloc_quarantined_blocks(), quarantined);
}

/* The storage allocation failing frees the carrier made before it. */
static void test_storage_failure_frees_carrier(void)
{
    if (!sw_fault_enabled())
        return;
    int64_t live0 = sw_alloc_live_bytes();
    sw_carrier *c = NULL;
    sw_error err;
    CHECK(sw_fault_arm("alloc", 1, 1) == SW_OK); /* the carrier, then its storage */
    CHECK(sw_cpu_new(16, SW_DT_FLOAT32, 0, &c, &err) == SW_ENOMEM);
    sw_fault_clear();
    CHECK(strstr(err.msg, "CPU: cannot allocate") != NULL);
    CHECK(sw_alloc_live_bytes() == live0);
    CHECK(sw_fault_arm("alloc", 0, 1) == SW_OK); /* the carrier itself */
    CHECK(sw_cpu_new(16, SW_DT_FLOAT32, 0, &c, &err) == SW_ENOMEM);
    sw_fault_clear();
    CHECK(strstr(err.msg, "CPU: out of memory") != NULL);
    CHECK(sw_alloc_live_bytes() == live0);
}

/* An impl larger than the inline area is refused before any allocation. */
static void test_inline_too_large(void)
{
    sw_carrier *c = NULL;
    sw_error err;
    CHECK(sw_carrier_new_inline(&sw_cpu_class, SW_CARRIER_INLINE_IMPL + 1, SW_DT_FLOAT32, 0, &c,
                                &err) == SW_EINVAL);
    CHECK(c == NULL);
}

int main(void)
{
    test_cpu_impl_inside_carrier();
    test_release_then_unref();
    test_export_pins_inline_carrier();
    test_released_export_is_quarantined();
    test_storage_failure_frees_carrier();
    test_inline_too_large();
    return check_report("carrier_inline");
}
