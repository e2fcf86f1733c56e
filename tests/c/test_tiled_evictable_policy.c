/* TiledEvictable residency policies and the factories, on the public
 * headers (contract-carriers TE-5, TE-10, TE-13): what a policy is asked
 * (the selected tiles, "projection") and what its plan does around a
 * projection (promote after the gather, retain pinned while it runs, evict
 * once free); a failing plan, refused plan entries and busy or invalid
 * planned tiles change nothing; a failed promotion fails the projection;
 * new_like and allocate_like keep the geometry and the policy. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "strideweave/alloc.h"
#include "strideweave/strideweave.h"

static float value_of(int64_t slot) { return (float)slot * 0.5f + 1.25f; }

#define MAXS 24
#define MAXT 6
#include "te_fixture.h"
#include "strideweave/testing.h"

/* A 3x2 grid of 2x2 tiles (see te_fixture.h). */
static sw_tiled_evictable *make(int file_secondary)
{
    int64_t grid[] = {3, 2}, tile[] = {2, 2};
    return make_grid(2, grid, tile, file_secondary);
}

/* A scripted policy: records what it was asked, adds its sets. */
typedef struct script {
    int calls;
    int64_t required[16];
    int64_t nrequired;
    char purpose[32];
    int64_t promote[4], retain[4], evict[4]; /* rows of 2, count below */
    int npromote, nretain, nevict;
    sw_status fail;        /* returned as is when not SW_OK */
    sw_status add_status;  /* the last sw_te_plan_add outcome */
} script;

static sw_status scripted(const int64_t *required, int64_t n, int32_t rank, const char *purpose,
                          sw_te_plan *plan, void *user, sw_error *err)
{
    script *s = user;
    s->calls++;
    s->nrequired = n;
    memcpy(s->required, required, (size_t)(n * rank) * sizeof *required);
    snprintf(s->purpose, sizeof s->purpose, "%s", purpose);
    if (s->fail != SW_OK)
        return sw_error_set(err, s->fail, "the scripted policy refuses");
    for (int i = 0; i < s->npromote; i++)
        if ((s->add_status = sw_te_plan_add(plan, SW_TE_PLAN_PROMOTE, s->promote + 2 * i, err)))
            return s->add_status;
    for (int i = 0; i < s->nretain; i++)
        if ((s->add_status = sw_te_plan_add(plan, SW_TE_PLAN_RETAIN, s->retain + 2 * i, err)))
            return s->add_status;
    for (int i = 0; i < s->nevict; i++)
        if ((s->add_status = sw_te_plan_add(plan, SW_TE_PLAN_EVICT, s->evict + 2 * i, err)))
            return s->add_status;
    return SW_OK;
}

static const int64_t sel0[] = {2, 0}, sel1[] = {1}, counts[] = {2, 1};
static const int64_t *const axes[] = {sel0, sel1};
static const sw_tile_selection sel = {2, counts, axes};

static int projection_exact(sw_tiled_evictable *te, sw_tensor *t)
{
    const sw_tile_geometry *g = sw_tiled_evictable_geometry(te);
    int64_t shape[SW_TILES_MAX_RANK];
    int64_t n = sw_tiles_compact_shape(g, &sel, shape);
    const float *d = sw_cpu_pointer(sw_tensor_carrier(t));
    for (int64_t c = 0; c < n; c++)
        if (d[c] != value_of(sw_tiles_source_index(g, &sel, shape, c)))
            return 0;
    return 1;
}

/* TE-10: the policy gets the selected tiles in linear order and
 * "projection"; promote tiles end primary, evict tiles secondary. */
static void test_te10_policy_plan_applied(void)
{
    for (int file = 0; file < 2; file++) {
        for (int async = 0; async < 2; async++) {
            sw_tiled_evictable *te = make(file);
            int64_t ev[] = {0, 0, 1, 0, 1, 1}; /* (1,1) is selected: evicted once unpinned */
            CHECK(sw_tiled_evictable_evict(te, ev, 2, NULL) == SW_OK);
            script s = {.promote = {0, 0}, .npromote = 1, .retain = {2, 0}, .nretain = 1,
                        .evict = {1, 1, 0, 1}, .nevict = 2};
            CHECK(sw_tiled_evictable_set_policy(te, &(sw_te_policy){scripted, &s}, NULL) ==
                  SW_OK);
            sw_tensor *out = NULL;
            sw_error err;
            if (async) {
                sw_te_work *w;
                CHECK(sw_tiled_evictable_project_async(te, NULL, 0, &sel, NULL, &w, &err) ==
                      SW_OK);
                CHECK(sw_te_work_wait(w, &out, &err) == SW_OK);
                sw_te_work_unref(w);
            } else {
                CHECK(sw_tiled_evictable_project(te, NULL, 0, &sel, NULL, &out, &err) == SW_OK);
            }
            CHECK_EQ_I64(s.calls, 1);
            CHECK(!strcmp(s.purpose, "projection"));
            CHECK_EQ_I64(s.nrequired, 2); /* (0,1) then (2,1): linear order */
            CHECK(s.required[0] == 0 && s.required[1] == 1 && s.required[2] == 2 &&
                  s.required[3] == 1);
            CHECK(out && projection_exact(te, out));
            sw_tensor_unref(out);
            CHECK(loc_at(te, 0, 0) == SW_TE_PRIMARY);   /* promoted */
            CHECK(loc_at(te, 1, 0) == SW_TE_SECONDARY); /* untouched */
            CHECK(loc_at(te, 1, 1) == SW_TE_SECONDARY); /* evicted */
            CHECK(loc_at(te, 0, 1) == SW_TE_SECONDARY); /* evicted */
            CHECK(loc_at(te, 2, 0) == SW_TE_PRIMARY);   /* retained */
            CHECK(all_values_exact(te));
            CHECK_EQ_I64(sw_tiled_evictable_version(te), 0);
            sw_tiled_evictable_release(te, NULL);
            sw_tiled_evictable_unref(te);
        }
    }
}

/* Retain and promote tiles are pinned while the projection runs. */
static void test_te10_policy_retain_pins(void)
{
    if (!sw_fault_enabled())
        return;
    sw_tiled_evictable *te = make(1);
    script s = {.retain = {0, 0}, .nretain = 1, .promote = {1, 0}, .npromote = 1};
    CHECK(sw_tiled_evictable_evict(te, (int64_t[]){1, 0}, 1, NULL) == SW_OK);
    sw_tiled_evictable_set_policy(te, &(sw_te_policy){scripted, &s}, NULL);
    sw_fault_arm("tile_gather_pause", 0, 1);
    sw_te_work *w;
    CHECK(sw_tiled_evictable_project_async(te, NULL, 0, &sel, NULL, &w, NULL) == SW_OK);
    sw_fault_wait_paused();
    sw_te_tile_state st;
    sw_tiled_evictable_tile_state(te, (int64_t[]){0, 0}, &st, NULL);
    CHECK(st.pinned);
    sw_tiled_evictable_tile_state(te, (int64_t[]){1, 0}, &st, NULL);
    CHECK(st.pinned && st.location == SW_TE_SECONDARY);
    sw_error err;
    CHECK(sw_tiled_evictable_evict(te, (int64_t[]){0, 0}, 1, &err) == SW_ESTATE);
    CHECK(strstr(err.msg, "pinned") != NULL);
    float x = 3;
    CHECK(sw_tiled_evictable_write(te, 0, 1, &x, &err) == SW_ESTATE);
    sw_fault_resume();
    CHECK(sw_te_work_wait(w, NULL, NULL) == SW_OK);
    sw_te_work_unref(w);
    sw_fault_clear();
    sw_tiled_evictable_tile_state(te, (int64_t[]){1, 0}, &st, NULL);
    CHECK(!st.pinned && !st.pending && st.location == SW_TE_PRIMARY);
    sw_tiled_evictable_tile_state(te, (int64_t[]){0, 0}, &st, NULL);
    CHECK(!st.pinned);
    CHECK(all_values_exact(te));
    sw_tiled_evictable_release(te, NULL);
    sw_tiled_evictable_unref(te);
}

/* Refusals from the plan change nothing: the policy's own error, plan
 * entries refused by sw_te_plan_add, busy or invalid planned tiles, a
 * failed promotion. */
static void test_te10_policy_refusals_change_nothing(void)
{
    sw_tiled_evictable *te = make(1);
    CHECK(sw_tiled_evictable_evict(te, (int64_t[]){0, 0}, 1, NULL) == SW_OK);
    sw_carrier *d;
    sw_cpu_new(8, SW_DT_FLOAT32, 0, &d, NULL);
    sw_error err;
    sw_tensor *out = NULL;
    script s = {.fail = SW_EINVAL};
    sw_tiled_evictable_set_policy(te, &(sw_te_policy){scripted, &s}, NULL);
    CHECK(sw_tiled_evictable_project(te, NULL, 0, &sel, d, &out, &err) == SW_EINVAL);
    CHECK(strstr(err.msg, "scripted") != NULL);
    CHECK(!sw_carrier_is_owned(d) && out == NULL);
    sw_te_work *w = NULL;
    CHECK(sw_tiled_evictable_project_async(te, NULL, 0, &sel, d, &w, &err) == SW_EINVAL);
    CHECK(w == NULL && !sw_carrier_is_owned(d));
    /* plan entries: outside the grid, twice in two sets */
    s = (script){.promote = {3, 0}, .npromote = 1};
    CHECK(sw_tiled_evictable_project(te, NULL, 0, &sel, d, &out, &err) == SW_EINVAL);
    CHECK(s.add_status == SW_EINVAL && strstr(err.msg, "outside") != NULL);
    s = (script){.promote = {0, 0}, .npromote = 1, .evict = {0, 0}, .nevict = 1};
    CHECK(sw_tiled_evictable_project(te, NULL, 0, &sel, d, &out, &err) == SW_EINVAL);
    CHECK(s.add_status == SW_EINVAL && strstr(err.msg, "already") != NULL);
    CHECK(sw_te_plan_add(NULL, SW_TE_PLAN_EVICT, (int64_t[]){0, 0}, &err) == SW_ETYPE);
    /* the factories keep the policy */
    sw_tiled_evictable *empty;
    CHECK(sw_tiled_evictable_allocate_like(te, 1, &empty, NULL) == SW_OK);
    sw_te_policy got;
    sw_tiled_evictable_policy_of(empty, &got);
    CHECK(got.plan == scripted && got.user == &s); /* the factory kept the policy */
    sw_tiled_evictable_release(empty, NULL);
    sw_tiled_evictable_unref(empty);
    /* a failed promotion fails the projection; residency stays */
    if (sw_fault_enabled()) {
        s = (script){.promote = {0, 0}, .npromote = 1};
        sw_fault_arm("tile_copy", 0, 1);
        CHECK(sw_tiled_evictable_project(te, NULL, 0, &sel, d, &out, &err) == SW_EIO);
        sw_fault_clear();
        CHECK(loc_at(te, 0, 0) == SW_TE_SECONDARY && !sw_carrier_is_owned(d));
        sw_te_tile_state st;
        sw_tiled_evictable_tile_state(te, (int64_t[]){0, 0}, &st, NULL);
        CHECK(!st.pending && !st.pinned);
    }
    /* a planned tile pending in another request */
    if (sw_fault_enabled()) {
        s = (script){.retain = {0, 0}, .nretain = 1};
        sw_fault_arm("tile_copy_pause", 0, 1);
        CHECK(sw_tiled_evictable_promote_async(te, (int64_t[]){0, 0}, 1, &w, NULL) == SW_OK);
        sw_fault_wait_paused();
        CHECK(sw_tiled_evictable_project(te, NULL, 0, &sel, d, &out, &err) == SW_ESTATE);
        CHECK(strstr(err.msg, "pending") != NULL && !sw_carrier_is_owned(d));
        sw_fault_resume();
        CHECK(sw_te_work_wait(w, NULL, NULL) == SW_OK);
        sw_te_work_unref(w);
        sw_fault_clear();
    }
    CHECK(all_values_exact(te));
    CHECK_EQ_I64(sw_tiled_evictable_version(te), 0);
    /* removing the policy */
    CHECK(sw_tiled_evictable_set_policy(te, NULL, NULL) == SW_OK);
    int before = s.calls;
    CHECK(sw_tiled_evictable_project(te, NULL, 0, &sel, d, &out, &err) == SW_OK);
    CHECK_EQ_I64(s.calls, before);
    sw_tensor_unref(out);
    sw_tiled_evictable_release(te, NULL);
    CHECK(sw_tiled_evictable_set_policy(te, &(sw_te_policy){scripted, &s}, &err) == SW_ESTATE);
    sw_tiled_evictable_unref(te);
    sw_carrier_release(d, NULL);
    sw_carrier_unref(d);
}

/* TE-13 new_like: same geometry and policy, zero tiles implicit, the rest
 * primary and clean; refusals. */
static void test_te13_new_like(void)
{
    for (int file = 0; file < 2; file++) {
        sw_tiled_evictable *te = make(file), *made = NULL;
        script s = {0};
        sw_tiled_evictable_set_policy(te, &(sw_te_policy){scripted, &s}, NULL);
        float v[24] = {0};
        const sw_tile_geometry *g = sw_tiled_evictable_geometry(te);
        /* tile (1,0) and (2,1) hold values; the others stay zero */
        v[sw_tiles_slot(g, 1, 3)] = 2.5f;
        v[sw_tiles_slot(g, sw_tiles_tile_index(g, (int64_t[]){2, 1}), 0)] = -1.0f;
        sw_error err;
        CHECK(sw_tiled_evictable_new_like(te, v, 23, 0, &made, &err) == SW_EINVAL);
        CHECK(sw_tiled_evictable_new_like(te, NULL, 24, 0, &made, &err) == SW_ETYPE);
        CHECK(made == NULL);
        CHECK(sw_tiled_evictable_new_like(te, v, 24, 0, &made, &err) == SW_OK && made);
        CHECK(loc_at(made, 1, 0) == SW_TE_PRIMARY && loc_at(made, 2, 1) == SW_TE_PRIMARY);
        CHECK(loc_at(made, 0, 0) == SW_TE_IMPLICIT && loc_at(made, 0, 1) == SW_TE_IMPLICIT);
        int64_t dirty = -1;
        sw_tiled_evictable_tiles(made, SW_TE_TILES_DIRTY, NULL, 0, &dirty, NULL);
        CHECK_EQ_I64(dirty, 0);
        float got[24];
        CHECK(sw_tiled_evictable_read(made, 0, 24, got, NULL) == SW_OK);
        CHECK(memcmp(got, v, sizeof v) == 0);
        CHECK(sw_tiled_evictable_is_mutable(made));
        sw_te_policy pol;
        sw_tiled_evictable_policy_of(made, &pol);
        CHECK(pol.plan == scripted && pol.user == &s);
        CHECK(sw_carrier_class_of(sw_tiled_evictable_secondary(made)) ==
              sw_carrier_class_of(sw_tiled_evictable_secondary(te)));
        CHECK_EQ_I64(sw_carrier_size(sw_tiled_evictable_secondary(made)), 0);
        /* a projection of the new carrier asks the same policy */
        sw_tensor *out = NULL;
        CHECK(sw_tiled_evictable_project(made, NULL, 0, &sel, NULL, &out, NULL) == SW_OK);
        CHECK_EQ_I64(s.calls, 1);
        sw_tensor_unref(out);
        sw_tiled_evictable_release(made, NULL);
        sw_tiled_evictable_unref(made);
        CHECK(sw_tiled_evictable_new_like(te, v, 24, 1, &made, &err) == SW_OK);
        CHECK(!sw_tiled_evictable_is_mutable(made));
        CHECK(sw_tiled_evictable_write(made, 0, 1, v, &err) == SW_ESTATE);
        sw_tiled_evictable_release(made, NULL);
        sw_tiled_evictable_unref(made);
        sw_tiled_evictable_release(te, NULL);
        CHECK(sw_tiled_evictable_new_like(te, v, 24, 0, &made, &err) == SW_ESTATE);
        sw_tiled_evictable_unref(te);
    }
}

int main(void)
{
    test_te10_policy_plan_applied();
    test_te10_policy_retain_pins();
    test_te10_policy_refusals_change_nothing();
    test_te13_new_like();
    return check_report("tiled_evictable_policy");
}
