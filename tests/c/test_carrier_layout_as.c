/* sw_carrier_read_layout_as / _write_layout_as (tensor.h) on carriers whose
 * slots the core holds, beyond their own dtype: Float32 slots read as
 * binary64s (widened) and written from them (rounded to nearest), in one
 * read / one write of the span; kinds the core does not carry refused
 * before anything is touched (sw_carrier_holds_as says which); and an
 * Evictable whose primary is a binding's SLOTS_UNLOCKED carrier reached
 * through that primary's batch callbacks, under the Evictable's claim,
 * with the Evictable's version stepped once per step of the primary's. */
#include <string.h>

#include "check.h"
#include <strideweave/strideweave.h>

static sw_layout *flat(int64_t extent, int64_t stride)
{
    sw_error err;
    const uint8_t prof[1] = {SW_NODE_LEAF};
    sw_layout *L = sw_layout_new(1, prof, &extent, &stride, &err);
    CHECK(L != NULL);
    return L;
}

static void test_float32_widened_and_rounded(sw_carrier *c)
{
    sw_error err;
    float f[6] = {0.5f, 1.25f, -3.0f, 1e-8f, 16777217.0f, 7.0f};
    CHECK(sw_carrier_write(c, 0, 6, f, &err) == SW_OK);
    uint64_t v0 = sw_carrier_version(c);
    sw_layout *L = flat(3, 2); /* slots 1, 3, 5 */
    double d[3] = {0};
    CHECK(sw_carrier_holds_as(c, SW_DT_FLOAT64) && sw_carrier_holds_as(c, SW_DT_FLOAT32));
    CHECK(sw_carrier_read_layout_as(c, 0, L, SW_DT_FLOAT64, d, &err) == SW_OK);
    CHECK(d[0] == (double)f[0] && d[1] == (double)f[2] && d[2] == (double)f[4]);
    CHECK(sw_carrier_read_layout_as(c, 1, L, SW_DT_FLOAT64, d, &err) == SW_OK);
    CHECK(d[0] == 1.25 && d[1] == (double)1e-8f && d[2] == 7.0);
    /* written back from binary64s: rounded to nearest, one version step,
     * the slots between untouched */
    const double in[3] = {1.0 / 3.0, 0.1, 16777219.0};
    CHECK(sw_carrier_write_layout_as(c, 0, L, SW_DT_FLOAT64, in, &err) == SW_OK);
    float back[6];
    CHECK(sw_carrier_read(c, 0, 6, back, &err) == SW_OK);
    CHECK(back[0] == (float)(1.0 / 3.0) && back[2] == 0.1f && back[4] == 16777220.0f);
    CHECK(back[1] == 1.25f && back[3] == 1e-8f && back[5] == 7.0f);
    CHECK_EQ_I64(sw_carrier_version(c) - v0, 1);
    /* the round trip of a value a Float32 holds is exact */
    CHECK(sw_carrier_read_layout_as(c, 0, L, SW_DT_FLOAT64, d, &err) == SW_OK);
    CHECK(d[0] == (double)(float)(1.0 / 3.0) && d[1] == (double)0.1f && d[2] == 16777220.0);
    sw_layout_free(L);
}

static void test_cpu_and_file_backed(void)
{
    sw_error err;
    sw_carrier *cpu = NULL, *file = NULL;
    CHECK(sw_cpu_new(6, SW_DT_FLOAT32, 0, &cpu, &err) == SW_OK);
    test_float32_widened_and_rounded(cpu);
    CHECK(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &file, &err) == SW_OK);
    CHECK(sw_carrier_allocate(file, 6, &err) == SW_OK);
    test_float32_widened_and_rounded(file);
    (void)sw_carrier_release(file, NULL);
    sw_carrier_unref(file);
    sw_carrier_unref(cpu);
}

/* Refused with nothing read, written or stepped: a kind the carrier does
 * not hold (Int32 slots are not carried as binary64, Float32 ones not as
 * Int32), then a released carrier. */
static void test_refusals_before_any_change(void)
{
    sw_error err;
    sw_carrier *i32 = NULL, *f32 = NULL;
    CHECK(sw_cpu_new(4, SW_DT_INT32, 0, &i32, &err) == SW_OK);
    CHECK(sw_cpu_new(4, SW_DT_FLOAT32, 0, &f32, &err) == SW_OK);
    sw_layout *L = flat(4, 1);
    double d[4] = {9, 9, 9, 9};
    CHECK(!sw_carrier_holds_as(i32, SW_DT_FLOAT64) && !sw_carrier_holds_as(f32, SW_DT_INT32));
    CHECK(!sw_carrier_holds_as(NULL, SW_DT_FLOAT64));
    CHECK(sw_carrier_read_layout_as(i32, 0, L, SW_DT_FLOAT64, d, &err) == SW_ETYPE);
    CHECK(d[0] == 9 && d[3] == 9);
    CHECK(sw_carrier_write_layout_as(i32, 0, L, SW_DT_FLOAT64, d, &err) == SW_ETYPE);
    int32_t i[4] = {5, 5, 5, 5};
    CHECK(sw_carrier_write_layout_as(f32, 0, L, SW_DT_INT32, i, &err) == SW_ETYPE);
    CHECK(sw_carrier_version(i32) == 0 && sw_carrier_version(f32) == 0);
    const int32_t *im = sw_cpu_pointer(i32);
    CHECK(im[0] == 0 && im[3] == 0);
    CHECK(sw_carrier_release(f32, &err) == SW_OK);
    CHECK(sw_carrier_read_layout_as(f32, 0, L, SW_DT_FLOAT64, d, &err) == SW_ESTATE);
    CHECK(sw_carrier_write_layout_as(f32, 0, L, SW_DT_FLOAT64, d, &err) == SW_ESTATE);
    CHECK(d[0] == 9 && sw_carrier_version(f32) == 0);
    sw_layout_free(L);
    sw_carrier_unref(i32);
    sw_carrier_unref(f32);
}

/* ---- an Evictable over a binding's tier ----------------------------------- */

/* The binding's tier: Float32 values it keeps; its callbacks log every
 * batch (n, the kind asked) and step the version per slot written, as the
 * Python binding's checked writes do (WRITES_STEP_VERSION). */
typedef struct tier {
    sw_carrier *self;
    float v[8];
    int batches, slots_read, slots_written;
    sw_dtype last_as;
    int owner_access_seen;
} tier;

static sw_status tier_read(void *impl, const int64_t *slots, int64_t n, sw_dtype as, void *buf,
                           sw_error *err)
{
    (void)err;
    tier *t = impl;
    t->batches++;
    t->last_as = as;
    t->owner_access_seen = sw_carrier_has_owner_access(t->self);
    for (int64_t k = 0; k < n; k++, t->slots_read++) {
        if (as == SW_DT_FLOAT64)
            memcpy((char *)buf + 8 * k, &(double){t->v[slots[k]]}, 8);
        else
            memcpy((char *)buf + 4 * k, &t->v[slots[k]], 4);
    }
    return SW_OK;
}

static sw_status tier_write(void *impl, const int64_t *slots, int64_t n, sw_dtype as,
                            const void *buf, sw_error *err)
{
    tier *t = impl;
    t->batches++;
    t->last_as = as;
    t->owner_access_seen = sw_carrier_has_owner_access(t->self);
    for (int64_t k = 0; k < n; k++, t->slots_written++) {
        if (as != SW_DT_FLOAT32) /* the Evictable hands on its own dtype */
            return sw_error_set(err, SW_ETYPE, "tier: not Float32");
        memcpy(&t->v[slots[k]], (const char *)buf + 4 * k, 4);
        sw_status st = sw_carrier_increment_version(t->self, err);
        if (st != SW_OK)
            return st;
    }
    return SW_OK;
}

static const sw_carrier_class tier_class = {
    .name = "Tier",
    .flags = SW_CARRIER_CLASS_STATE_ONLY | SW_CARRIER_CLASS_SLOTS_UNLOCKED |
             SW_CARRIER_CLASS_WRITES_STEP_VERSION,
    .read_slots = tier_read,
    .write_slots = tier_write,
};

static sw_status tier_size(sw_carrier *c, void *user, int64_t *out, sw_error *err)
{
    (void)user;
    (void)err;
    *out = sw_carrier_class_of(c) == &tier_class ? 8 : sw_carrier_size(c);
    return SW_OK;
}

static sw_status tier_move(sw_carrier *from, sw_carrier *to, int64_t n, void *user,
                           sw_error *err)
{
    (void)from, (void)to, (void)n, (void)user, (void)err;
    return SW_OK; /* not exercised: the Evictable stays promoted */
}

static void test_evictable_over_a_callback_tier(void)
{
    sw_error err;
    tier t = {.v = {0, 1.5f, 2, 3.25f, 4, 5, 6, 7}};
    sw_carrier *p = NULL, *s = NULL, *e = NULL;
    CHECK(sw_carrier_new(&tier_class, &t, SW_DT_FLOAT32, 0, &p, &err) == SW_OK);
    t.self = p;
    CHECK(sw_cpu_new(8, SW_DT_FLOAT32, 0, &s, &err) == SW_OK);
    sw_evictable_options o = {.move = tier_move, .size = tier_size, .dtype = SW_DT_FLOAT32};
    CHECK(sw_evictable_new(p, s, &o, &e, &err) == SW_OK);
    sw_layout *L = flat(3, 2); /* slots 1, 3, 5 of the window at `offset` */
    double d[3] = {0};
    /* a read as binary64: one batch, the kind as asked, under owner access */
    CHECK(sw_carrier_read_layout_as(e, 0, L, SW_DT_FLOAT64, d, &err) == SW_OK);
    CHECK(d[0] == 0 && d[1] == 2 && d[2] == 4);
    CHECK(t.batches == 1 && t.slots_read == 3 && t.last_as == SW_DT_FLOAT64);
    CHECK(t.owner_access_seen);
    float f[3] = {0};
    CHECK(sw_carrier_read_layout_as(e, 1, L, SW_DT_FLOAT32, f, &err) == SW_OK);
    CHECK(f[0] == 1.5f && f[1] == 3.25f && f[2] == 5);
    /* a write from binary64s: the rounded Float32 values in one batch; the
     * Evictable's version steps once per slot, as the tier's did */
    uint64_t ev0 = sw_carrier_version(e), p0 = sw_carrier_version(p);
    const double in[3] = {1.0 / 3.0, 0.1, -2.5};
    t.batches = 0;
    CHECK(sw_carrier_write_layout_as(e, 1, L, SW_DT_FLOAT64, in, &err) == SW_OK);
    CHECK(t.batches == 1 && t.slots_written == 3 && t.last_as == SW_DT_FLOAT32);
    CHECK(t.v[1] == (float)(1.0 / 3.0) && t.v[3] == 0.1f && t.v[5] == -2.5f && t.v[2] == 2);
    CHECK_EQ_I64(sw_carrier_version(p) - p0, 3);
    CHECK_EQ_I64(sw_carrier_version(e) - ev0, 3);
    CHECK(!sw_carrier_has_owner_access(p)); /* given back */
    /* refused by the Evictable's own checks before the tier is called */
    sw_layout *far = flat(3, 4); /* reaches slot 8 of 8 */
    t.batches = 0;
    CHECK(sw_carrier_read_layout_as(e, 0, far, SW_DT_FLOAT64, d, &err) == SW_ERANGE);
    CHECK(sw_carrier_write_layout_as(e, 0, far, SW_DT_FLOAT64, in, &err) == SW_ERANGE);
    CHECK(t.batches == 0 && sw_carrier_version(e) - ev0 == 3);
    CHECK(sw_carrier_release(e, &err) == SW_OK);
    CHECK(sw_carrier_read_layout_as(e, 0, L, SW_DT_FLOAT64, d, &err) == SW_ESTATE);
    CHECK(t.batches == 0);
    sw_layout_free(far);
    sw_layout_free(L);
    sw_carrier_unref(e);
    sw_carrier_unref(s);
    sw_carrier_unref(p);
}

int main(void)
{
    test_cpu_and_file_backed();
    test_refusals_before_any_change();
    test_evictable_over_a_callback_tier();
    return check_report("carrier_layout_as");
}
