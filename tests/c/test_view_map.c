/* The source map of a view through the public C API (contract-core V-9):
 * per view element, the ordinal of the source element it reads, for each
 * view kind, on leaf and nested modes; broadcast repeating ordinals; the
 * source's strides not mattering; the view's own refusals; the size query
 * and SW_ERANGE; overflow; and layouts with more leaves than the stack
 * digits hold. */
#include <string.h>

#include "check.h"
#include <strideweave/strideweave.h>

enum { L_ = SW_NODE_LEAF, P_ = SW_NODE_PUSH, Q_ = SW_NODE_POP };

static const uint8_t leaves[32] = {L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_,
                                   L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_,
                                   L_, L_, L_, L_, L_, L_, L_, L_, L_, L_};

static sw_layout *flat(int32_t n, const int64_t *ext, const int64_t *str)
{
    sw_error err;
    sw_layout *l = sw_layout_new(n, leaves, ext, str, &err);
    CHECK(l != NULL);
    return l;
}

/* Shape [10, [2, 3]] with strides unrelated to its ordinals. */
static sw_layout *nested(void)
{
    static const uint8_t prof[5] = {L_, P_, L_, L_, Q_};
    int64_t ext[3] = {10, 2, 3}, str[3] = {7, 100, 1};
    sw_error err;
    sw_layout *l = sw_layout_new(5, prof, ext, str, &err);
    CHECK(l != NULL);
    return l;
}

static sw_slice_entry idx(int64_t i) { return (sw_slice_entry){.kind = SW_SLICE_INDEX, .index = i}; }
static sw_slice_entry all(void) { return (sw_slice_entry){.kind = SW_SLICE_RANGE, .step = 1}; }
static sw_slice_entry range(int64_t start, int64_t stop, int64_t step)
{
    return (sw_slice_entry){.kind = SW_SLICE_RANGE, .has_start = 1, .start = start,
                            .has_stop = 1, .stop = stop, .step = step};
}

/* The map of `spec` over `src` equals want[0..n). */
static void expect_map(const sw_layout *src, const sw_view_spec *spec, const int64_t *want,
                       int64_t n)
{
    int64_t got[256], count = -1;
    sw_view_fault f;
    sw_error err;
    CHECK(n <= 256);
    sw_status st = sw_layout_view_source_ordinals(src, spec, got, 256, &count, &f, &err);
    CHECK_EQ_I64(st, SW_OK);
    CHECK_EQ_I64(f.reason, SW_VIEW_OK);
    CHECK_EQ_I64(count, n);
    for (int64_t k = 0; k < n && k < count; k++)
        CHECK_EQ_I64(got[k], want[k]);
}

/* V-5 with steps and an integer entry; the source's strides (here not
 * first-mode-fastest) do not change the ordinals. */
static void test_slice(void)
{
    int64_t ext[2] = {4, 3}, str[2] = {3, 1};
    sw_layout *src = flat(2, ext, str);
    sw_slice_entry key[2] = {range(1, 4, 2), all()};
    int64_t want[6] = {1, 3, 5, 7, 9, 11};
    expect_map(src, &(sw_view_spec){.kind = SW_VIEW_KIND_SLICE, .n = 2, .key = key}, want, 6);
    sw_slice_entry row[2] = {idx(2), all()};
    int64_t want_row[3] = {2, 6, 10};
    expect_map(src, &(sw_view_spec){.kind = SW_VIEW_KIND_SLICE, .n = 2, .key = row}, want_row,
               3);
    sw_layout_free(src);
}

static void test_permute(void)
{
    int64_t ext[2] = {2, 3}, str[2] = {1, 2};
    sw_layout *src = flat(2, ext, str);
    int64_t order[2] = {1, 0}, want[6] = {0, 2, 4, 1, 3, 5};
    expect_map(src, &(sw_view_spec){.kind = SW_VIEW_KIND_PERMUTE, .n = 2, .order = order},
               want, 6);
    sw_layout_free(src);
}

/* A reshape keeps ordinals, even of a source whose own strides the reshape
 * view would refuse (the map is over the shape only). */
static void test_reshape(void)
{
    int64_t ext[2] = {2, 3}, str[2] = {3, 1};
    sw_layout *src = flat(2, ext, str);
    static const uint8_t nest[4] = {L_, P_, L_, Q_};
    int64_t to[2] = {3, 2}, want[6] = {0, 1, 2, 3, 4, 5};
    expect_map(src,
               &(sw_view_spec){.kind = SW_VIEW_KIND_RESHAPE, .n = 4, .profile = nest,
                               .extents = to},
               want, 6);
    sw_layout_free(src);
}

/* V-8: every widened position reads the one source element again. */
static void test_broadcast_repeats(void)
{
    int64_t ext[2] = {1, 3}, str[2] = {1, 1};
    sw_layout *src = flat(2, ext, str);
    int64_t to[2] = {4, 3}, want[12] = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2};
    expect_map(src,
               &(sw_view_spec){.kind = SW_VIEW_KIND_BROADCAST, .n = 2, .profile = leaves,
                               .extents = to},
               want, 12);
    sw_layout_free(src);
}

/* Nested modes: a stepped slice keeping the nested mode whole, an integer
 * entry naming the nested mode's own ordinal, and a permute moving it. */
static void test_nested(void)
{
    sw_layout *src = nested();
    sw_slice_entry key[2] = {range(1, 10, 4), all()};
    int64_t want[18];
    for (int64_t b = 0, k = 0; b < 3; b++)
        for (int64_t a = 0; a < 2; a++)
            for (int64_t i = 0; i < 3; i++)
                want[k++] = (1 + 4 * i) + 10 * (a + 2 * b);
    expect_map(src, &(sw_view_spec){.kind = SW_VIEW_KIND_SLICE, .n = 2, .key = key}, want, 18);

    sw_slice_entry pick[2] = {all(), idx(4)};
    int64_t want_pick[10];
    for (int64_t i = 0; i < 10; i++)
        want_pick[i] = i + 40;
    expect_map(src, &(sw_view_spec){.kind = SW_VIEW_KIND_SLICE, .n = 2, .key = pick}, want_pick,
               10);

    int64_t order[2] = {1, 0}, want_perm[60];
    for (int64_t i = 0, k = 0; i < 10; i++)
        for (int64_t j = 0; j < 6; j++)
            want_perm[k++] = i + 10 * j;
    expect_map(src, &(sw_view_spec){.kind = SW_VIEW_KIND_PERMUTE, .n = 2, .order = order},
               want_perm, 60);
    sw_layout_free(src);
}

/* The view's refusals, with its status and fault; nothing written. */
static void test_refusals(void)
{
    int64_t ext[2] = {2, 3}, str[2] = {1, 2}, out[8], count = -7;
    sw_layout *src = flat(2, ext, str);
    sw_view_fault f;
    sw_error err;
    for (int i = 0; i < 8; i++)
        out[i] = -1;

    int64_t repeat[2] = {0, 0};
    sw_view_spec perm = {.kind = SW_VIEW_KIND_PERMUTE, .n = 2, .order = repeat};
    CHECK_EQ_I64(sw_layout_view_source_ordinals(src, &perm, out, 8, &count, &f, &err), SW_EINVAL);
    CHECK_EQ_I64(f.reason, SW_VIEW_ORDER_REPEAT);
    CHECK_EQ_I64(f.entry, 1);

    int64_t five[1] = {5};
    sw_view_spec shape = {.kind = SW_VIEW_KIND_RESHAPE, .n = 1, .profile = leaves, .extents = five};
    CHECK_EQ_I64(sw_layout_view_source_ordinals(src, &shape, out, 8, &count, &f, &err), SW_EINVAL);
    CHECK_EQ_I64(f.reason, SW_VIEW_SIZE);

    sw_slice_entry bad[2] = {idx(2), all()};
    sw_view_spec sl = {.kind = SW_VIEW_KIND_SLICE, .n = 2, .key = bad};
    CHECK_EQ_I64(sw_layout_view_source_ordinals(src, &sl, out, 8, &count, &f, &err), SW_EINVAL);
    CHECK_EQ_I64(f.reason, SW_VIEW_INDEX);
    CHECK_EQ_I64(f.entry, 0);

    sw_view_spec odd = {.kind = (sw_view_kind)42};
    CHECK_EQ_I64(sw_layout_view_source_ordinals(src, &odd, out, 8, &count, &f, &err), SW_ETYPE);
    CHECK_EQ_I64(sw_layout_view_source_ordinals(NULL, &perm, out, 8, &count, NULL, NULL),
                 SW_ETYPE);
    CHECK_EQ_I64(sw_layout_view_source_ordinals(src, NULL, out, 8, &count, NULL, NULL), SW_ETYPE);
    CHECK_EQ_I64(sw_layout_view_source_ordinals(src, &perm, out, 8, NULL, NULL, NULL), SW_ETYPE);

    CHECK_EQ_I64(count, -7);
    for (int i = 0; i < 8; i++)
        CHECK_EQ_I64(out[i], -1);
    sw_layout_free(src);
}

/* Capacity 0 asks for the size; too little room is SW_ERANGE, untouched. */
static void test_size_query(void)
{
    int64_t ext[2] = {2, 3}, str[2] = {1, 2}, out[4] = {-1, -1, -1, -1}, count = 0;
    sw_layout *src = flat(2, ext, str);
    int64_t order[2] = {1, 0};
    sw_view_spec perm = {.kind = SW_VIEW_KIND_PERMUTE, .n = 2, .order = order};
    sw_error err;
    CHECK_EQ_I64(sw_layout_view_source_ordinals(src, &perm, NULL, 0, &count, NULL, &err),
                 SW_ERANGE);
    CHECK_EQ_I64(count, 6);
    count = 0;
    CHECK_EQ_I64(sw_layout_view_source_ordinals(src, &perm, out, 4, &count, NULL, &err),
                 SW_ERANGE);
    CHECK_EQ_I64(count, 6);
    for (int i = 0; i < 4; i++)
        CHECK_EQ_I64(out[i], -1);
    sw_layout_free(src);
}

/* A broadcast past int64 elements is the view's SW_EOVERFLOW; one of 2^40
 * elements is answered with its size, never walked. */
static void test_overflow(void)
{
    int64_t one[2] = {1, 1}, str[2] = {1, 1}, count = 0, out[1];
    sw_layout *src = flat(2, one, str);
    sw_error err;
    int64_t huge[2] = {INT64_C(1) << 40, INT64_C(1) << 40};
    sw_view_spec wide = {.kind = SW_VIEW_KIND_BROADCAST, .n = 2, .profile = leaves,
                         .extents = huge};
    CHECK_EQ_I64(sw_layout_view_source_ordinals(src, &wide, out, 1, &count, NULL, &err),
                 SW_EOVERFLOW);
    CHECK_EQ_I64(count, 0);
    int64_t big[2] = {INT64_C(1) << 40, 1};
    wide.extents = big;
    CHECK_EQ_I64(sw_layout_view_source_ordinals(src, &wide, out, 1, &count, NULL, &err),
                 SW_ERANGE);
    CHECK_EQ_I64(count, INT64_C(1) << 40);
    sw_layout_free(src);
}

/* 20 leaves (past the walk's stack digits): a reversing permute of
 * extents 2,3,1,...,1,2 against coordinates worked out by hand. */
static void test_many_leaves(void)
{
    enum { N = 20 };
    int64_t ext[N], str[N], order[N];
    for (int i = 0; i < N; i++) {
        ext[i] = 1;
        str[i] = 1;
        order[i] = N - 1 - i;
    }
    ext[0] = 2, ext[1] = 3, ext[N - 1] = 2;
    sw_layout *src = flat(N, ext, str);
    int64_t want[12];
    /* view modes: (c, 1..., b, a) with extents (2, 1.., 3, 2) */
    for (int64_t a = 0, k = 0; a < 2; a++)
        for (int64_t b = 0; b < 3; b++)
            for (int64_t c = 0; c < 2; c++)
                want[k++] = a + 2 * b + 6 * c;
    expect_map(src, &(sw_view_spec){.kind = SW_VIEW_KIND_PERMUTE, .n = N, .order = order},
               want, 12);
    sw_layout_free(src);
}

int main(void)
{
    test_slice();
    test_permute();
    test_reshape();
    test_broadcast_repeats();
    test_nested();
    test_refusals();
    test_size_query();
    test_overflow();
    test_many_leaves();
    return check_report("view_map");
}
