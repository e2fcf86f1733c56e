/* Element access through the public C API (contract-core V-3, V-4, V-10):
 * sw_tensor_get/set by logical index and _at by leaf coordinate for every
 * dtype a carrier with slots of its own stores, on CPU, Generic, FileBacked
 * and a foreign ops table; refusals with their status, detail and nothing
 * changed; views of views reading the right slots; sw_tensor_view with a
 * second (adjacent) layout; sw_tensor_read_values order of a permuted and a
 * broadcast view; an Evictable's elements (its primary's, refused in the
 * binding's words while evicted). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include <strideweave/strideweave.h>
#include <strideweave/binding.h>

/* A 2x3 tensor placed transposed (strides 3, 1) on carrier `c` at offset 1. */
static sw_tensor *grid(sw_carrier *c)
{
    sw_error err;
    sw_tensor *t = NULL;
    int64_t ext[2] = {2, 3}, str[2] = {3, 1};
    CHECK(sw_tensor_new_strided(c, 1, 2, ext, str, &t, &err) == SW_OK);
    return t;
}

/* Every element written by index then read by index and by coordinate,
 * for slots of `width` bytes holding values[k] at element k. */
static void roundtrip(sw_carrier *c, const void *values, size_t width)
{
    sw_error err;
    sw_tensor *t = grid(c);
    uint64_t v0 = sw_carrier_version(c);
    for (int64_t k = 0; k < 6; k++)
        CHECK(sw_tensor_set(t, k, (const char *)values + (size_t)k * width, &err) == SW_OK);
    CHECK_EQ_I64(sw_carrier_version(c), v0 + 6);
    for (int64_t k = 0; k < 6; k++) {
        unsigned char got[8] = {0}, at[8] = {0};
        int64_t coord[2] = {k % 2, k / 2}, slot = -1;
        CHECK(sw_tensor_get(t, k, got, &err) == SW_OK);
        CHECK(memcmp(got, (const char *)values + (size_t)k * width, width) == 0);
        CHECK(sw_tensor_get_at(t, coord, at, &err) == SW_OK);
        CHECK(memcmp(at, got, width) == 0);
        /* element (x0, x1) lives in slot 1 + 3*x0 + x1 */
        CHECK(sw_tensor_slot(t, k, &slot, &err) == SW_OK);
        CHECK_EQ_I64(slot, 1 + 3 * coord[0] + coord[1]);
        CHECK(sw_tensor_slot_at(t, coord, &slot, &err) == SW_OK);
        CHECK_EQ_I64(slot, 1 + 3 * coord[0] + coord[1]);
        /* the carrier agrees: the tensor wrote that slot */
        CHECK(sw_carrier_read(c, slot, 1, at, &err) == SW_OK && memcmp(at, got, width) == 0);
    }
    /* _at writes the same slot as the index form */
    int64_t coord[2] = {1, 2};
    CHECK(sw_tensor_set_at(t, coord, values, &err) == SW_OK);
    unsigned char back[8] = {0};
    CHECK(sw_tensor_get(t, 5, back, &err) == SW_OK && memcmp(back, values, width) == 0);
    sw_tensor_unref(t);
}

static void test_every_dtype_and_carrier(void)
{
    sw_error err;
    sw_carrier *c;
    float f[6] = {0.5f, -1.0f, 2.25f, 3.0f, -4.5f, 5.0f};
    int32_t i[6] = {7, -8, 9, 1 << 30, -(1 << 30), 0};
    uint8_t b[6] = {1, 0, 1, 1, 0, 1};
    const void *vals[3] = {f, i, b};
    const size_t width[3] = {4, 4, 1};
    const sw_dtype dts[3] = {SW_DT_FLOAT32, SW_DT_INT32, SW_DT_BOOL};
    for (int d = 0; d < 3; d++) {
        CHECK(sw_cpu_new(7, dts[d], 0, &c, &err) == SW_OK);
        roundtrip(c, vals[d], width[d]);
        sw_carrier_unref(c);
        unsigned char zeros[7 * 4] = {0};
        CHECK(sw_generic_new(zeros, 7, dts[d], 0, &c, &err) == SW_OK);
        roundtrip(c, vals[d], width[d]);
        sw_carrier_unref(c);
        if (dts[d] == SW_DT_BOOL)
            continue; /* FileBacked stores Float32 and Int32 */
        CHECK(sw_file_backed_new(NULL, dts[d], 0, &c, &err) == SW_OK);
        CHECK(sw_carrier_allocate(c, 7, &err) == SW_OK);
        roundtrip(c, vals[d], width[d]);
        CHECK(sw_carrier_release(c, &err) == SW_OK);
        sw_carrier_unref(c);
    }
}

/* ---- a carrier from another language: an ops table of its own ---------- */

typedef struct {
    int32_t slots[7];
    int reads, writes;
} foreign;

static int64_t foreign_size(void *impl) { (void)impl; return 7; }
static sw_status foreign_read(void *impl, int64_t slot, int64_t count, void *out, sw_error *err)
{
    (void)err;
    foreign *f = impl;
    f->reads++;
    memcpy(out, f->slots + slot, (size_t)count * 4);
    return SW_OK;
}
static sw_status foreign_write(void *impl, int64_t slot, int64_t count, const void *in,
                               sw_error *err)
{
    (void)err;
    foreign *f = impl;
    f->writes++;
    memcpy(f->slots + slot, in, (size_t)count * 4);
    return SW_OK;
}
static void foreign_release(void *impl) { (void)impl; }
static void foreign_destroy(void *impl) { free(impl); }

static const sw_carrier_class foreign_class = {
    .name = "Foreign", .size = foreign_size, .read = foreign_read, .write = foreign_write,
    .release = foreign_release, .destroy = foreign_destroy};

static const sw_carrier_class state_only_class = {.name = "Bound",
                                                  .flags = SW_CARRIER_CLASS_STATE_ONLY};

static void test_foreign_and_state_only_carriers(void)
{
    sw_error err;
    sw_carrier *c;
    foreign *f = calloc(1, sizeof *f);
    CHECK(sw_carrier_new(&foreign_class, f, SW_DT_INT32, 0, &c, &err) == SW_OK);
    int32_t v[6] = {10, 11, 12, 13, 14, 15};
    roundtrip(c, v, 4);
    CHECK(f->writes == 7 && f->reads > 0); /* every access went through its ops */
    sw_carrier_unref(c);

    /* STATE_ONLY: the slots are the binding's. The core tells which slot
     * (sw_tensor_slot) and refuses to reach it itself. */
    sw_tensor *t = NULL;
    CHECK(sw_carrier_new(&state_only_class, NULL, SW_DT_FLOAT64, 0, &c, &err) == SW_OK);
    int64_t ext[2] = {2, 3}, str[2] = {3, 1}, slot = -1, coord[2] = {1, 1};
    uint8_t profile[2] = {SW_NODE_LEAF, SW_NODE_LEAF};
    sw_layout *l = sw_layout_new(2, profile, ext, str, &err);
    CHECK(sw_tensor_new_unchecked(c, 2, l, &t, &err) == SW_OK);
    CHECK(sw_tensor_slot_at(t, coord, &slot, &err) == SW_OK);
    CHECK_EQ_I64(slot, 2 + 3 + 1);
    double d = 1.0;
    CHECK(sw_tensor_get(t, 0, &d, &err) == SW_ENOTSUP);
    CHECK(err.detail == SW_ELEMENT_CARRIER);
    CHECK(sw_tensor_set(t, 0, &d, &err) == SW_ENOTSUP);
    CHECK_EQ_I64(sw_carrier_version(c), 0);
    sw_layout_free(l);
    sw_tensor_unref(t);
    sw_carrier_unref(c);
}

/* ---- refusals: status, detail, nothing changed ---------------------------- */

static void test_refusals(void)
{
    sw_error err;
    sw_carrier *c;
    float v = 0.0f;
    CHECK(sw_cpu_new(7, SW_DT_FLOAT32, 0, &c, &err) == SW_OK);
    sw_tensor *t = grid(c);
    int64_t bad[4][2] = {{-1, 0}, {2, 0}, {0, -1}, {0, 3}}, slot = 99;
    for (int k = 0; k < 4; k++) {
        CHECK(sw_tensor_get_at(t, bad[k], &v, &err) == SW_ERANGE);
        CHECK(err.detail == SW_ELEMENT_COORD);
        CHECK(strstr(err.msg, k < 2 ? "leaf 0" : "leaf 1") != NULL);
        CHECK(sw_tensor_set_at(t, bad[k], &v, &err) == SW_ERANGE);
        CHECK(sw_tensor_slot_at(t, bad[k], &slot, &err) == SW_ERANGE);
    }
    CHECK_EQ_I64(slot, 99);
    const int64_t bad_index[3] = {-1, 6, INT64_MAX};
    for (int k = 0; k < 3; k++) {
        CHECK(sw_tensor_get(t, bad_index[k], &v, &err) == SW_ERANGE);
        CHECK(err.detail == SW_ELEMENT_INDEX);
        CHECK(sw_tensor_set(t, bad_index[k], &v, &err) == SW_ERANGE);
        CHECK(sw_tensor_slot(t, bad_index[k], &slot, &err) == SW_ERANGE);
    }
    CHECK(sw_tensor_get(NULL, 0, &v, &err) == SW_ETYPE);
    CHECK(sw_tensor_get_at(t, NULL, &v, &err) == SW_ETYPE);
    int32_t i = 0;
    CHECK(sw_tensor_get_i32(t, 0, &i, &err) == SW_ETYPE && err.detail == SW_ELEMENT_DTYPE);
    CHECK_EQ_I64(sw_carrier_version(c), 0);

    /* The carrier's own refusals, in its words, marked as the carrier's. */
    sw_carrier *ci;
    CHECK(sw_cpu_new(7, SW_DT_FLOAT32, SW_CARRIER_IMMUTABLE, &ci, &err) == SW_OK);
    sw_tensor *ti = grid(ci);
    CHECK(sw_tensor_set(ti, 0, &v, &err) == SW_ESTATE && err.detail == SW_ELEMENT_CARRIER);
    CHECK(sw_tensor_get(ti, 0, &v, &err) == SW_OK);
    sw_carrier_mark_pending(c, SW_CARRIER_PENDING_DESTINATION);
    CHECK(sw_tensor_get(t, 0, &v, &err) == SW_ESTATE && strstr(err.msg, "pending"));
    CHECK(err.detail == SW_ELEMENT_CARRIER);
    sw_carrier_begin_transfer(c); /* a move's transfer reads and writes it */
    CHECK(sw_tensor_set(t, 0, &v, &err) == SW_OK && sw_tensor_get(t, 0, &v, &err) == SW_OK);
    sw_carrier_end_transfer(c);
    sw_carrier_unmark_pending(c, SW_CARRIER_PENDING_DESTINATION);
    CHECK_EQ_I64(sw_carrier_version(c), 0); /* a transfer is not a mutation */
    CHECK(sw_carrier_release(c, &err) == SW_OK);
    CHECK(sw_tensor_get(t, 0, &v, &err) == SW_ESTATE && err.detail == SW_ELEMENT_CARRIER);
    CHECK(sw_tensor_set(t, 0, &v, &err) == SW_ESTATE);
    CHECK(sw_tensor_slot(t, 0, &slot, &err) == SW_OK); /* placement only */
    sw_tensor_unref(ti);
    sw_carrier_unref(ci);
    sw_tensor_unref(t);
    sw_carrier_unref(c);
}

/* ---- an Evictable's elements ------------------------------------------- */

/* Through an Evictable, element access reaches the primary: a set steps
 * the Evictable's version and the primary's once each; evicted, get and
 * set refuse with SW_ESTATE in the words a binding shows for its own
 * check (so a refusal the core finds first reads the same), nothing
 * changed; promoted again, the values are back. A binding's element path
 * relies on these (issue 17). */
static void test_evictable_elements(void)
{
    sw_error err;
    sw_carrier *p, *s, *e;
    float v = 0.0f;
    CHECK(sw_cpu_new(7, SW_DT_FLOAT32, 0, &p, &err) == SW_OK);
    CHECK(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &s, &err) == SW_OK);
    CHECK(sw_evictable_new(p, s, NULL, &e, &err) == SW_OK);
    sw_tensor *t = grid(e);
    const float vals[6] = {1.5f, -2.0f, 3.25f, 4.0f, -5.5f, 6.0f};
    roundtrip(e, vals, 4);
    CHECK_EQ_I64(sw_carrier_version(e), 7); /* roundtrip: 6 sets and one _at */
    CHECK_EQ_I64(sw_carrier_version(p), 7);
    CHECK(sw_tensor_get(t, 4, &v, &err) == SW_OK && v == vals[4]);

    CHECK(sw_evictable_evict(e, &err) == SW_OK);
    const char *words =
        "this Evictable is evicted: call promote() before reading or writing its slots";
    CHECK(sw_tensor_get(t, 4, &v, &err) == SW_ESTATE && err.detail == SW_ELEMENT_CARRIER);
    CHECK(strcmp(err.msg, words) == 0);
    CHECK(sw_tensor_set(t, 4, &v, &err) == SW_ESTATE && err.detail == SW_ELEMENT_CARRIER);
    CHECK(strcmp(err.msg, words) == 0);
    float all[6];
    CHECK(sw_tensor_read_values(t, all, &err) == SW_ESTATE && strcmp(err.msg, words) == 0);
    CHECK_EQ_I64(sw_carrier_version(e), 7);

    CHECK(sw_evictable_promote(e, &err) == SW_OK);
    CHECK(sw_tensor_read_values(t, all, &err) == SW_OK);
    CHECK(memcmp(all, vals, 5 * sizeof *all) == 0 && all[5] == vals[0]); /* roundtrip's _at */
    CHECK(sw_carrier_release(e, &err) == SW_OK);
    CHECK(sw_tensor_get(t, 0, &v, &err) == SW_ESTATE && err.detail == SW_ELEMENT_CARRIER);
    CHECK(sw_tensor_set(t, 0, &v, &err) == SW_ESTATE);
    sw_tensor_unref(t);
    sw_carrier_unref(e);
    sw_carrier_unref(s);
    sw_carrier_unref(p);
}

/* ---- views -------------------------------------------------------------- */

/* A 4x3 Int32 tensor, column-major, slot k holding k. */
static sw_tensor *counting(sw_carrier **c)
{
    sw_error err;
    sw_tensor *t = NULL;
    int64_t ext[2] = {4, 3};
    CHECK(sw_cpu_new(12, SW_DT_INT32, 0, c, &err) == SW_OK);
    int32_t *raw = sw_cpu_pointer(*c);
    for (int k = 0; k < 12; k++)
        raw[k] = k;
    CHECK(sw_tensor_new_strided(*c, 0, 2, ext, NULL, &t, &err) == SW_OK);
    return t;
}

static void test_view_of_a_view(void)
{
    sw_error err;
    sw_carrier *c;
    sw_tensor *t = counting(&c), *s = NULL, *p = NULL;
    /* t[1:4:2, 1:] is rows {1, 3} x cols {1, 2}: slots 5, 7, 9, 11 */
    sw_slice_entry key[2] = {
        {.kind = SW_SLICE_RANGE, .has_start = 1, .start = 1, .step = 2},
        {.kind = SW_SLICE_RANGE, .has_start = 1, .start = 1, .step = 1}};
    sw_view_spec spec = {.kind = SW_VIEW_KIND_SLICE, .n = 2, .key = key};
    CHECK(sw_tensor_view(t, NULL, &spec, &s, NULL, NULL, &err) == SW_OK);
    CHECK_EQ_I64(sw_tensor_offset(s), 5);
    int64_t order[2] = {1, 0};
    sw_view_spec perm = {.kind = SW_VIEW_KIND_PERMUTE, .n = 2, .order = order};
    CHECK(sw_tensor_view(s, NULL, &perm, &p, NULL, NULL, &err) == SW_OK);
    CHECK(sw_tensor_carrier(p) == c);
    /* s(i, j) is slot 5 + 2i + 4j; p(x, y) = s(y, x), so p(1, 0) = s(0, 1) = slot 9 */
    int64_t coord[2] = {1, 0};
    int32_t v = -1;
    CHECK(sw_tensor_get_at(p, coord, &v, &err) == SW_OK);
    CHECK_EQ_I64(v, 9);
    int32_t all[4], want[4] = {5, 9, 7, 11};
    CHECK(sw_tensor_read_values(p, all, &err) == SW_OK);
    for (int k = 0; k < 4; k++)
        CHECK_EQ_I64(all[k], want[k]);
    /* a write through the view of a view lands in the source's slot */
    int32_t w = 100;
    CHECK(sw_tensor_set(p, 3, &w, &err) == SW_OK);
    CHECK_EQ_I64(((int32_t *)sw_cpu_pointer(c))[11], 100);
    sw_tensor_unref(p);
    sw_tensor_unref(s);
    sw_tensor_unref(t);
    sw_carrier_unref(c);
}

static void test_read_values_of_permuted_and_broadcast_views(void)
{
    sw_error err;
    sw_carrier *c;
    sw_tensor *t = counting(&c), *p = NULL, *col = NULL, *b = NULL;
    int64_t order[2] = {1, 0};
    sw_view_spec perm = {.kind = SW_VIEW_KIND_PERMUTE, .n = 2, .order = order};
    CHECK(sw_tensor_view(t, NULL, &perm, &p, NULL, NULL, &err) == SW_OK);
    int32_t got[12];
    CHECK(sw_tensor_read_values(p, got, &err) == SW_OK);
    /* p is 3x4, first mode fastest: p(x, y) = t(y, x) = slot y + 4x */
    for (int k = 0; k < 12; k++)
        CHECK_EQ_I64(got[k], (k / 3) + 4 * (k % 3));

    /* column 2 of t as a 4x1 tensor, broadcast to 4x3 (stride 0) */
    sw_slice_entry key[2] = {{.kind = SW_SLICE_RANGE, .step = 1},
                             {.kind = SW_SLICE_RANGE, .has_start = 1, .start = 2, .step = 1}};
    sw_view_spec slice = {.kind = SW_VIEW_KIND_SLICE, .n = 2, .key = key};
    CHECK(sw_tensor_view(t, NULL, &slice, &col, NULL, NULL, &err) == SW_OK);
    uint8_t profile[2] = {SW_NODE_LEAF, SW_NODE_LEAF};
    int64_t target[2] = {4, 3};
    sw_view_spec wide = {.kind = SW_VIEW_KIND_BROADCAST, .n = 2, .profile = profile,
                         .extents = target};
    CHECK(sw_tensor_view(col, NULL, &wide, &b, NULL, NULL, &err) == SW_OK);
    CHECK_EQ_I64(sw_tensor_size(b), 12);
    CHECK(sw_tensor_read_values(b, got, &err) == SW_OK);
    for (int k = 0; k < 12; k++)
        CHECK_EQ_I64(got[k], 8 + k % 4);
    int32_t v = -1;
    CHECK(sw_tensor_get(b, 11, &v, &err) == SW_OK);
    CHECK_EQ_I64(v, 11);
    sw_tensor_unref(b);
    sw_tensor_unref(col);
    sw_tensor_unref(p);
    sw_tensor_unref(t);
    sw_carrier_unref(c);
}

/* The adjacent layout (a second plane) is viewed alike; refusals report
 * their rule and write nothing. */
static void test_view_with_adjacent_layout_and_refusals(void)
{
    sw_error err;
    sw_carrier *c;
    sw_tensor *t = counting(&c), *v = NULL;
    uint8_t profile[2] = {SW_NODE_LEAF, SW_NODE_LEAF};
    int64_t ext[2] = {4, 3}, zero[2] = {0, 0};
    sw_layout *adj = sw_layout_new(2, profile, ext, zero, &err), *vadj = NULL;
    int64_t order[2] = {1, 0};
    sw_view_spec perm = {.kind = SW_VIEW_KIND_PERMUTE, .n = 2, .order = order};
    CHECK(sw_tensor_view(t, adj, &perm, &v, &vadj, NULL, &err) == SW_OK);
    CHECK(vadj != NULL && vadj->extents[0] == 3 && vadj->extents[1] == 4);
    sw_layout_free(vadj);
    sw_tensor_unref(v);

    /* several planes: a selection must start at coordinate 0 */
    sw_slice_entry key[2] = {{.kind = SW_SLICE_INDEX, .index = 1},
                             {.kind = SW_SLICE_RANGE, .step = 1}};
    sw_view_spec slice = {.kind = SW_VIEW_KIND_SLICE, .n = 2, .key = key};
    sw_view_fault f;
    v = NULL;
    vadj = NULL;
    CHECK(sw_tensor_view(t, adj, &slice, &v, &vadj, &f, &err) == SW_ENOTSUP);
    CHECK(f.reason == SW_VIEW_NOT_AT_ORIGIN && f.entry == 0 && v == NULL && vadj == NULL);
    key[0].index = 4; /* one past the end, no wrap-around */
    CHECK(sw_tensor_view(t, NULL, &slice, &v, NULL, &f, &err) == SW_EINVAL);
    CHECK(f.reason == SW_VIEW_INDEX && f.mode_size == 4 && v == NULL);
    order[1] = 1; /* repeats mode 1 */
    CHECK(sw_tensor_view(t, NULL, &perm, &v, NULL, &f, &err) == SW_EINVAL);
    CHECK(f.reason == SW_VIEW_ORDER_REPEAT && f.entry == 1);
    CHECK(sw_tensor_view(t, NULL, NULL, &v, NULL, NULL, &err) == SW_ETYPE);
    CHECK(sw_tensor_view(t, adj, &perm, &v, NULL, NULL, &err) == SW_ETYPE);
    sw_layout_free(adj);
    sw_tensor_unref(t);
    sw_carrier_unref(c);
}

int main(void)
{
    test_every_dtype_and_carrier();
    test_foreign_and_state_only_carriers();
    test_refusals();
    test_evictable_elements();
    test_view_of_a_view();
    test_read_values_of_permuted_and_broadcast_views();
    test_view_with_adjacent_layout_and_refusals();
    return check_report("tensor_elements");
}
