/* Views through the public C API (contract-core V-5..V-8): slice keys with
 * steps, negative bounds and integer entries on leaf and nested modes,
 * permute, reshape by the evenly-spaced rule, broadcast; every refusal with
 * its status and fault (rule, entry, plane), nothing written on refusal,
 * left-to-right order, two planes at once, stride overflow, and tensors
 * viewed from several threads. */
#include <pthread.h>
#include <string.h>

#include "check.h"
#include <strideweave/strideweave.h>

enum { L_ = SW_NODE_LEAF, P_ = SW_NODE_PUSH, Q_ = SW_NODE_POP };

/* Target profiles: two leaves, and one nested mode of two leaves. */
static const uint8_t prof2[2] = {L_, L_}, nest[4] = {P_, L_, L_, Q_};

static sw_layout *flat(int32_t n, const int64_t *ext, const int64_t *str)
{
    static const uint8_t leaves[8] = {L_, L_, L_, L_, L_, L_, L_, L_};
    sw_error err;
    sw_layout *l = sw_layout_new(n, leaves, ext, str, &err);
    CHECK(l != NULL);
    return l;
}

/* Shape [10, [2, 3]], strides [1, [10, 20]] (contract V-5's nested example). */
static sw_layout *nested(void)
{
    static const uint8_t prof_closed[5] = {L_, P_, L_, L_, Q_};
    int64_t ext[3] = {10, 2, 3}, str[3] = {1, 10, 20};
    sw_error err;
    sw_layout *l = sw_layout_new(5, prof_closed, ext, str, &err);
    CHECK(l != NULL);
    return l;
}

/* A two-entry key the views refuse, and how. */
typedef struct {
    sw_slice_entry key[2];
    sw_status st;
    sw_view_reason why;
    int32_t entry;
} refused_key;

static sw_slice_entry idx(int64_t i) { return (sw_slice_entry){.kind = SW_SLICE_INDEX, .index = i}; }
static sw_slice_entry all(void) { return (sw_slice_entry){.kind = SW_SLICE_RANGE, .step = 1}; }
static sw_slice_entry range(int64_t start, int64_t stop, int64_t step)
{
    return (sw_slice_entry){.kind = SW_SLICE_RANGE, .has_start = 1, .start = start,
                            .has_stop = 1, .stop = stop, .step = step};
}
static sw_slice_entry from(int64_t start)
{
    return (sw_slice_entry){.kind = SW_SLICE_RANGE, .has_start = 1, .start = start, .step = 1};
}

static int is_flat(const sw_layout *l, int32_t n, const int64_t *ext, const int64_t *str)
{
    if (l->nleaves != n || l->rank != n)
        return 0;
    for (int32_t i = 0; i < n; i++)
        if (l->extents[i] != ext[i] || l->strides[i] != str[i])
            return 0;
    return 1;
}

/* Slice one layout; the view's layout (caller frees) or NULL, with the fault. */
static sw_layout *slice1(const sw_layout *l, const sw_slice_entry *key, int32_t n,
                         int64_t *growth, sw_status *st, sw_view_fault *f)
{
    sw_error err;
    sw_layout *out[1] = {NULL};
    *st = sw_layout_view_slice(&l, 1, key, n, out, growth, f, &err);
    return out[0];
}

static void test_v5_leaf_slices(void)
{
    int64_t ext[2] = {5, 10}, str[2] = {1, 5};
    sw_layout *l = flat(2, ext, str);
    sw_status st;
    sw_view_fault f;
    int64_t g = -1;
    /* contract V-5: (2, 1:9) adds 7, gives [8]:[5]; (2, 1:9:2) gives [4]:[10] */
    sw_slice_entry k1[2] = {idx(2), range(1, 9, 1)};
    sw_layout *v = slice1(l, k1, 2, &g, &st, &f);
    CHECK(st == SW_OK && f.reason == SW_VIEW_OK);
    CHECK_EQ_I64(g, 7);
    CHECK(v && is_flat(v, 1, (int64_t[]){8}, (int64_t[]){5}));
    sw_layout_free(v);
    sw_slice_entry k2[2] = {idx(2), range(1, 9, 2)};
    v = slice1(l, k2, 2, &g, &st, &f);
    CHECK(st == SW_OK && g == 7 && is_flat(v, 1, (int64_t[]){4}, (int64_t[]){10}));
    sw_layout_free(v);
    /* Python's normalization: len(range(1, 10, 2)) = 5, negative bounds wrap
     * and clamp, a stop past the end clamps */
    sw_slice_entry k3[2] = {range(-2, 100, 1), range(1, 10, 2)};
    v = slice1(l, k3, 2, &g, &st, &f);
    CHECK(st == SW_OK && g == 3 + 5 && is_flat(v, 2, (int64_t[]){2, 5}, (int64_t[]){1, 10}));
    sw_layout_free(v);
    sw_slice_entry k4[2] = {range(-100, -1, 3), all()};
    v = slice1(l, k4, 2, &g, &st, &f);
    CHECK(st == SW_OK && g == 0 && is_flat(v, 2, (int64_t[]){2, 10}, (int64_t[]){3, 5}));
    sw_layout_free(v);
    /* the last index of every mode: every mode dropped, rank 0 */
    sw_slice_entry k5[2] = {idx(4), idx(9)};
    v = slice1(l, k5, 2, &g, &st, &f);
    CHECK(st == SW_OK && g == 4 + 45 && v && v->rank == 0 && v->size == 1);
    sw_layout_free(v);
    sw_layout_free(l);
}

static void test_v5_nested_modes(void)
{
    sw_layout *l = nested();
    sw_status st;
    sw_view_fault f;
    int64_t g;
    /* (:, 4): ordinal 4 of [2, 3] is (0, 2), so 0*10 + 2*20 */
    sw_slice_entry k1[2] = {all(), idx(4)};
    sw_layout *v = slice1(l, k1, 2, &g, &st, &f);
    CHECK(st == SW_OK && g == 40 && is_flat(v, 1, (int64_t[]){10}, (int64_t[]){1}));
    sw_layout_free(v);
    /* a whole nested mode stays one nested mode, ':' or '0:6' */
    sw_slice_entry k2[2] = {idx(3), range(0, 6, 1)};
    v = slice1(l, k2, 2, &g, &st, &f);
    CHECK(st == SW_OK && g == 3 && v && v->rank == 1 && v->nleaves == 2 && v->depth == 2);
    CHECK(v && v->strides[0] == 10 && v->strides[1] == 20);
    sw_layout_free(v);
    /* refusals: part of it, a step, an index past its size */
    sw_slice_entry bad[3][2] = {{all(), range(0, 3, 1)}, {all(), from(1)}, {all(), idx(6)}};
    sw_view_reason why[3] = {SW_VIEW_NESTED_PART, SW_VIEW_NESTED_PART, SW_VIEW_INDEX};
    for (int i = 0; i < 3; i++) {
        v = slice1(l, bad[i], 2, &g, &st, &f);
        CHECK(st == SW_EINVAL && v == NULL && f.reason == why[i] && f.entry == 1);
        CHECK_EQ_I64(f.mode_size, 6);
    }
    sw_slice_entry stepped[2] = {all(), {.kind = SW_SLICE_RANGE, .step = 2}};
    v = slice1(l, stepped, 2, &g, &st, &f);
    CHECK(st == SW_EINVAL && f.reason == SW_VIEW_NESTED_PART);
    sw_layout_free(l);
}

static void test_v5_refusals(void)
{
    int64_t ext[2] = {5, 10}, str[2] = {1, 5};
    sw_layout *l = flat(2, ext, str);
    sw_status st;
    sw_view_fault f;
    sw_error err;
    int64_t g = 123;
    refused_key cases[] = {
        {{idx(-1), all()}, SW_EINVAL, SW_VIEW_INDEX, 0},
        {{idx(5), all()}, SW_EINVAL, SW_VIEW_INDEX, 0},
        {{idx(INT64_MIN), all()}, SW_EINVAL, SW_VIEW_INDEX, 0},
        {{range(0, 4, 0), all()}, SW_EINVAL, SW_VIEW_STEP, 0},
        {{range(4, 0, -1), all()}, SW_EINVAL, SW_VIEW_STEP, 0},
        {{from(5), all()}, SW_EINVAL, SW_VIEW_START, 0},
        {{from(INT64_MAX), all()}, SW_EINVAL, SW_VIEW_START, 0},
        {{range(3, 3, 1), all()}, SW_EINVAL, SW_VIEW_EMPTY, 0},
        {{range(4, 2, 1), all()}, SW_EINVAL, SW_VIEW_EMPTY, 0},
        {{all(), range(-1, -3, 1)}, SW_EINVAL, SW_VIEW_EMPTY, 1},
        /* left to right: entry 0's refusal before entry 1's */
        {{idx(7), range(0, 4, 0)}, SW_EINVAL, SW_VIEW_INDEX, 0},
        {{range(0, 4, 0), idx(70)}, SW_EINVAL, SW_VIEW_STEP, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sw_layout *v = slice1(l, cases[i].key, 2, &g, &st, &f);
        CHECK(st == cases[i].st && v == NULL);
        CHECK(f.reason == cases[i].why && f.entry == cases[i].entry && f.plane == -1);
        CHECK_EQ_I64(g, 123); /* nothing written on refusal */
    }
    /* count, unknown kinds, missing arguments, planes of two shapes */
    sw_slice_entry key[3] = {all(), all(), all()};
    sw_layout *out[2] = {NULL, NULL};
    const sw_layout *planes[2] = {l, l};
    CHECK(sw_layout_view_slice(planes, 1, key, 3, out, &g, &f, &err) == SW_EINVAL);
    CHECK(f.reason == SW_VIEW_COUNT && out[0] == NULL);
    CHECK(sw_layout_view_slice(planes, 1, key, 1, out, &g, &f, &err) == SW_EINVAL);
    key[1].kind = (sw_slice_kind)7;
    CHECK(sw_layout_view_slice(planes, 1, key, 2, out, &g, &f, &err) == SW_ETYPE);
    CHECK(sw_layout_view_slice(planes, 1, NULL, 2, out, &g, &f, &err) == SW_ETYPE);
    CHECK(sw_layout_view_slice(planes, 0, key, 2, out, &g, &f, &err) == SW_ETYPE);
    CHECK(sw_layout_view_slice(NULL, 1, key, 2, out, &g, &f, &err) == SW_ETYPE);
    sw_layout *other = flat(2, (int64_t[]){5, 9}, str);
    planes[1] = other;
    key[1] = all();
    CHECK(sw_layout_view_slice(planes, 2, key, 2, out, &g, &f, &err) == SW_EINVAL);
    CHECK(out[0] == NULL && out[1] == NULL);
    sw_layout_free(other);
    sw_layout_free(l);
}

/* A value plane and a scale plane of one shape: one key slices both, and
 * every selection must start at 0 (after the entry's own checks). */
static void test_v5_two_planes(void)
{
    int64_t ext[2] = {2, 2};
    sw_layout *lv = flat(2, ext, (int64_t[]){1, 2}), *ls = flat(2, ext, (int64_t[]){0, 0});
    const sw_layout *planes[2] = {lv, ls};
    sw_layout *out[2] = {NULL, NULL};
    sw_view_fault f;
    sw_error err;
    int64_t g = -1;
    sw_slice_entry k1[2] = {range(0, 1, 1), all()};
    CHECK(sw_layout_view_slice(planes, 2, k1, 2, out, &g, &f, &err) == SW_OK && g == 0);
    CHECK(is_flat(out[0], 2, (int64_t[]){1, 2}, (int64_t[]){1, 2}));
    CHECK(is_flat(out[1], 2, (int64_t[]){1, 2}, (int64_t[]){0, 0}));
    sw_layout_free(out[0]);
    sw_layout_free(out[1]);
    sw_slice_entry k2[2] = {{.kind = SW_SLICE_RANGE, .step = 2}, idx(0)};
    CHECK(sw_layout_view_slice(planes, 2, k2, 2, out, &g, &f, &err) == SW_OK);
    CHECK(is_flat(out[0], 1, (int64_t[]){1}, (int64_t[]){2}));
    CHECK(is_flat(out[1], 1, (int64_t[]){1}, (int64_t[]){0}));
    sw_layout_free(out[0]);
    sw_layout_free(out[1]);
    out[0] = out[1] = NULL;
    refused_key cases[] = {
        {{range(1, 2, 1), all()}, SW_ENOTSUP, SW_VIEW_NOT_AT_ORIGIN, 0},
        {{idx(1), all()}, SW_ENOTSUP, SW_VIEW_NOT_AT_ORIGIN, 0},
        {{all(), from(1)}, SW_ENOTSUP, SW_VIEW_NOT_AT_ORIGIN, 1},
        /* the entry's own checks first, and entry 0 before entry 1 */
        {{range(0, 1, 1), idx(5)}, SW_EINVAL, SW_VIEW_INDEX, 1},
        {{from(2), idx(0)}, SW_EINVAL, SW_VIEW_START, 0},
        {{range(1, 2, 1), idx(5)}, SW_ENOTSUP, SW_VIEW_NOT_AT_ORIGIN, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK(sw_layout_view_slice(planes, 2, cases[i].key, 2, out, &g, &f, &err) ==
              cases[i].st);
        CHECK(f.reason == cases[i].why && f.entry == cases[i].entry);
        CHECK(out[0] == NULL && out[1] == NULL);
    }
    sw_layout_free(lv);
    sw_layout_free(ls);
}

/* A step past int64 times the stride: one selected index never takes the
 * step, so the stride stays; more than one cannot fit in a valid layout. */
static void test_v5_stride_times_step_overflow(void)
{
    int64_t big = (int64_t)1 << 61;
    sw_layout *l = flat(1, (int64_t[]){3}, (int64_t[]){big});
    sw_status st;
    sw_view_fault f;
    int64_t g;
    sw_slice_entry k[1] = {range(1, 3, INT64_MAX)};
    sw_layout *v = slice1(l, k, 1, &g, &st, &f);
    CHECK(st == SW_OK && g == big && is_flat(v, 1, (int64_t[]){1}, (int64_t[]){big}));
    sw_layout_free(v);
    sw_layout_free(l);
}

static void test_v6_permute(void)
{
    sw_layout *l = nested(), *s = nested();
    const sw_layout *planes[2] = {l, s};
    sw_layout *out[2] = {NULL, NULL};
    sw_view_fault f;
    sw_error err;
    int64_t order[2] = {1, 0};
    CHECK(sw_layout_view_permute(planes, 2, order, 2, out, &f, &err) == SW_OK);
    for (int k = 0; k < 2; k++) {
        CHECK(out[k] && out[k]->rank == 2 && out[k]->strides[0] == 10 &&
              out[k]->strides[2] == 1 && out[k]->profile[0] == SW_NODE_PUSH);
        sw_layout_free(out[k]);
        out[k] = NULL;
    }
    struct {
        int64_t order[3];
        int32_t n;
        sw_view_reason why;
        int32_t entry;
    } cases[] = {
        {{0, 1, 0}, 3, SW_VIEW_COUNT, -1},
        {{0}, 1, SW_VIEW_COUNT, -1},
        {{0, 2}, 2, SW_VIEW_ORDER_RANGE, 1},
        {{-1, 0}, 2, SW_VIEW_ORDER_RANGE, 0},
        {{INT64_MAX, 0}, 2, SW_VIEW_ORDER_RANGE, 0},
        {{1, 1}, 2, SW_VIEW_ORDER_REPEAT, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK(sw_layout_view_permute(planes, 2, cases[i].order, cases[i].n, out, &f, &err) ==
              SW_EINVAL);
        CHECK(f.reason == cases[i].why && f.entry == cases[i].entry);
        CHECK(out[0] == NULL && out[1] == NULL);
    }
    sw_layout_free(l);
    sw_layout_free(s);
}

static void test_v7_reshape(void)
{
    sw_view_fault f;
    sw_error err;
    sw_layout *out[2] = {NULL, NULL};
    /* every other slot of 12 (base b = 2), extent-1 leaves ignored */
    sw_layout *l = flat(3, (int64_t[]){2, 1, 3}, (int64_t[]){2, 99, 4});
    const sw_layout *planes[2] = {l, NULL};
    CHECK(sw_layout_view_reshape(planes, 1, 2, prof2, (int64_t[]){3, 2}, out, &f, &err) ==
          SW_OK);
    CHECK(is_flat(out[0], 2, (int64_t[]){3, 2}, (int64_t[]){2, 6}));
    sw_layout_free(out[0]);
    CHECK(sw_layout_view_reshape(planes, 1, 4, nest, (int64_t[]){3, 2}, out, &f, &err) ==
          SW_OK);
    CHECK(out[0]->rank == 1 && out[0]->strides[1] == 6);
    sw_layout_free(out[0]);
    out[0] = NULL;
    CHECK(sw_layout_view_reshape(planes, 1, 2, prof2, (int64_t[]){5, 1}, out, &f, &err) ==
          SW_EINVAL);
    CHECK(f.reason == SW_VIEW_SIZE && out[0] == NULL);
    /* a bad target: an extent below 1, an unbalanced profile */
    CHECK(sw_layout_view_reshape(planes, 1, 2, prof2, (int64_t[]){6, 0}, out, &f, &err) ==
          SW_EINVAL);
    CHECK(sw_layout_view_reshape(planes, 1, 3, nest, (int64_t[]){3, 2}, out, &f, &err) ==
          SW_EINVAL);
    CHECK(out[0] == NULL);
    /* a transposed plane 1 is refused as plane 1, plane 0 built nothing */
    sw_layout *t = flat(3, (int64_t[]){2, 1, 3}, (int64_t[]){3, 0, 1});
    planes[1] = t;
    CHECK(sw_layout_view_reshape(planes, 2, 1, prof2, (int64_t[]){6}, out, &f, &err) ==
          SW_EINVAL);
    CHECK(f.reason == SW_VIEW_SPACING && f.plane == 1 && out[0] == NULL && out[1] == NULL);
    planes[0] = t;
    CHECK(sw_layout_view_reshape(planes, 1, 1, prof2, (int64_t[]){6}, out, &f, &err) ==
          SW_EINVAL);
    CHECK(f.reason == SW_VIEW_SPACING && f.plane == 0);
    /* base b with 3 * b in range but 4 * b not: a trailing extent-1 leaf
     * gets stride 4 * b, which overflows */
    int64_t b = (int64_t)2500000000000000000;
    sw_layout *wide = flat(1, (int64_t[]){4}, (int64_t[]){b});
    planes[0] = wide;
    CHECK(sw_layout_view_reshape(planes, 1, 2, prof2, (int64_t[]){4, 1}, out, &f, &err) ==
          SW_EOVERFLOW);
    CHECK(f.reason == SW_VIEW_STRIDE_OVERFLOW && f.plane == 0 && out[0] == NULL);
    sw_layout_free(wide);
    sw_layout_free(t);
    sw_layout_free(l);
}

static void test_v8_broadcast(void)
{
    sw_view_fault f;
    sw_error err;
    sw_layout *out[2] = {NULL, NULL};
    sw_layout *l = flat(2, (int64_t[]){1, 3}, (int64_t[]){0, 1});
    sw_layout *s = flat(2, (int64_t[]){1, 3}, (int64_t[]){0, 0});
    const sw_layout *planes[2] = {l, s};
    CHECK(sw_layout_view_broadcast(planes, 2, 2, prof2, (int64_t[]){4, 3}, out, &f, &err) ==
          SW_OK);
    CHECK(is_flat(out[0], 2, (int64_t[]){4, 3}, (int64_t[]){0, 1}));
    CHECK(is_flat(out[1], 2, (int64_t[]){4, 3}, (int64_t[]){0, 0}));
    sw_layout_free(out[0]);
    sw_layout_free(out[1]);
    out[0] = out[1] = NULL;
    CHECK(sw_layout_view_broadcast(planes, 2, 2, prof2, (int64_t[]){4, 2}, out, &f, &err) ==
          SW_EINVAL);
    CHECK(f.reason == SW_VIEW_SHAPE && f.plane == 0 && out[0] == NULL);
    CHECK(sw_layout_view_broadcast(planes, 2, 4, nest, (int64_t[]){4, 3}, out, &f, &err) ==
          SW_EINVAL);
    CHECK(f.reason == SW_VIEW_SHAPE && out[0] == NULL && out[1] == NULL);
    sw_layout_free(l);
    sw_layout_free(s);
}

/* The tensor API over the same rules: values read through the views. */
static void test_tensor_views(void)
{
    sw_error err;
    sw_carrier *c;
    sw_tensor *t, *v, *r;
    int32_t x;
    CHECK(sw_cpu_new(50, SW_DT_INT32, 0, &c, &err) == SW_OK);
    CHECK(sw_tensor_new_strided(c, 0, 2, (int64_t[]){5, 10}, NULL, &t, &err) == SW_OK);
    for (int64_t k = 0; k < 50; k++)
        CHECK(sw_tensor_set_i32(t, k, (int32_t)k, &err) == SW_OK);
    /* t[1:5:2, -3:] reads (1, 7), (3, 7), (1, 8), ... */
    sw_slice_entry key[2] = {range(1, 5, 2), from(-3)};
    CHECK(sw_tensor_slice_key(t, key, 2, &v, &err) == SW_OK);
    CHECK_EQ_I64(sw_tensor_size(v), 6);
    CHECK(sw_tensor_get_i32(v, 0, &x, &err) == SW_OK && x == 1 + 35);
    CHECK(sw_tensor_get_i32(v, 5, &x, &err) == SW_OK && x == 3 + 45);
    /* a stepped view reshapes (evenly spaced by 2), then reads in order */
    sw_tensor *col;
    sw_slice_entry every_other[2] = {range(0, 5, 2), idx(1)};
    CHECK(sw_tensor_slice_key(t, every_other, 2, &col, &err) == SW_OK);
    CHECK(sw_tensor_reshape(col, 2, (int64_t[]){1, 3}, &r, &err) == SW_OK);
    CHECK(sw_tensor_get_i32(r, 2, &x, &err) == SW_OK && x == 4 + 5);
    sw_tensor_unref(r);
    CHECK(sw_tensor_reshape_shape(t, 4, nest, (int64_t[]){25, 2}, &r, &err) == SW_OK);
    CHECK(sw_tensor_get_i32(r, 49, &x, &err) == SW_OK && x == 49);
    sw_tensor_unref(r);
    sw_slice_entry bad[2] = {idx(5), all()};
    r = NULL;
    CHECK(sw_tensor_slice_key(t, bad, 2, &r, &err) == SW_EINVAL && r == NULL);
    CHECK(sw_tensor_slice_key(NULL, bad, 2, &r, &err) == SW_ETYPE);
    CHECK(sw_tensor_reshape(v, 1, (int64_t[]){6}, &r, &err) == SW_EINVAL && r == NULL);
    sw_tensor_unref(col);
    sw_tensor_unref(v);
    sw_tensor_unref(t);
    sw_carrier_unref(c);
}

/* Views are pure functions of immutable handles: many threads slicing,
 * permuting and reshaping one tensor (TSan runs this). */
static sw_tensor *shared_tensor;

static void *view_worker(void *arg)
{
    (void)arg;
    sw_error err;
    for (int i = 0; i < 200; i++) {
        sw_tensor *v = NULL, *p = NULL, *r = NULL;
        sw_slice_entry key[2] = {range(i % 4, 5, 1 + i % 3), all()};
        int32_t order[2] = {1, 0};
        if (sw_tensor_slice_key(shared_tensor, key, 2, &v, &err) != SW_OK ||
            sw_tensor_permute(v, order, 2, &p, &err) != SW_OK ||
            sw_tensor_reshape(shared_tensor, 1, (int64_t[]){50}, &r, &err) != SW_OK)
            return (void *)1;
        sw_tensor_unref(r);
        sw_tensor_unref(p);
        sw_tensor_unref(v);
    }
    return NULL;
}

static void test_views_from_threads(void)
{
    sw_error err;
    sw_carrier *c;
    CHECK(sw_cpu_new(50, SW_DT_FLOAT32, 0, &c, &err) == SW_OK);
    CHECK(sw_tensor_new_strided(c, 0, 2, (int64_t[]){5, 10}, NULL, &shared_tensor, &err) ==
          SW_OK);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        CHECK(pthread_create(&th[i], NULL, view_worker, NULL) == 0);
    for (int i = 0; i < 4; i++) {
        void *rc;
        pthread_join(th[i], &rc);
        CHECK(rc == NULL);
    }
    sw_tensor_unref(shared_tensor);
    sw_carrier_unref(c);
}

int main(void)
{
    test_v5_leaf_slices();
    test_v5_nested_modes();
    test_v5_refusals();
    test_v5_two_planes();
    test_v5_stride_times_step_overflow();
    test_v6_permute();
    test_v7_reshape();
    test_v8_broadcast();
    test_tensor_views();
    test_views_from_threads();
    return check_report("tensor_views");
}
