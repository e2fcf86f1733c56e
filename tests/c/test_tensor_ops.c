/* Element-wise operations and layout walks through the public C API
 * (tensor_ops.h, tensor_walk.h; issue 17: what the binding's minimal
 * operations, autograd and slot-by-slot moves ask the core for). Each op
 * runs on contiguous, permuted, broadcast-source and offset tensors over
 * CPU and Generic carriers (FileBacked too where the op writes through the
 * carrier), and each refusal leaves every carrier as it was. */
#include <pthread.h>
#include <string.h>

#include "check.h"
#include <strideweave/strideweave.h>

enum { CPU, GENERIC, FILEB };

/* A Float32 carrier of `kind` holding vals[0..n). */
static sw_carrier *f32_carrier(int kind, const float *vals, int64_t n)
{
    sw_error err;
    sw_carrier *c = NULL;
    if (kind == GENERIC) {
        CHECK(sw_generic_new(vals, n, SW_DT_FLOAT32, 0, &c, &err) == SW_OK);
        return c;
    }
    if (kind == CPU) {
        CHECK(sw_cpu_new(n, SW_DT_FLOAT32, 0, &c, &err) == SW_OK);
    } else {
        CHECK(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &c, &err) == SW_OK);
        CHECK(sw_carrier_allocate(c, n, &err) == SW_OK);
    }
    CHECK(sw_carrier_write(c, 0, n, vals, &err) == SW_OK);
    return c;
}

static sw_tensor *strided(sw_carrier *c, int64_t off, int32_t nd, const int64_t *ext,
                          const int64_t *str)
{
    sw_error err;
    sw_tensor *t = NULL;
    CHECK(sw_tensor_new_strided(c, off, nd, ext, str, &t, &err) == SW_OK);
    return t;
}

static void drop(sw_tensor *t)
{
    sw_carrier *c = sw_carrier_ref(sw_tensor_carrier(t));
    sw_tensor_unref(t);
    sw_carrier_release(c, NULL);
    sw_carrier_unref(c);
}

/* ---- walks ---------------------------------------------------------------- */

static void test_walks(void)
{
    sw_error err;
    const uint8_t prof[2] = {SW_NODE_LEAF, SW_NODE_LEAF};
    const int64_t ext[2] = {2, 3}, perm[2] = {3, 1}, bc[2] = {0, 1}, flat[2] = {1, 2};
    sw_layout *P = sw_layout_new(2, prof, ext, perm, &err);
    sw_layout *B = sw_layout_new(2, prof, ext, bc, &err);
    sw_layout *F = sw_layout_new(2, prof, ext, flat, &err);
    CHECK(sw_layout_is_flat(F) && !sw_layout_is_flat(P) && !sw_layout_is_flat(B));
    int64_t slots[6];
    CHECK(sw_layout_slots(P, 5, slots, &err) == SW_OK);
    const int64_t want[6] = {5, 8, 6, 9, 7, 10};
    for (int k = 0; k < 6; k++)
        CHECK_EQ_I64(slots[k], want[k]);
    CHECK(sw_layout_slots(NULL, 0, slots, &err) == SW_ETYPE);
    /* scatter: logical order onto the slots, offset applied */
    float mem[9] = {0}, in[6] = {0, 1, 2, 3, 4, 5};
    CHECK(sw_layout_scatter(mem, 2, P, in, sizeof(float), &err) == SW_OK);
    CHECK(mem[2] == 0 && mem[5] == 1 && mem[3] == 2 && mem[4] == 4 && mem[7] == 5);
    CHECK(sw_layout_scatter(mem, -1, P, in, sizeof(float), &err) == SW_EINVAL);
    CHECK(sw_layout_scatter(mem, 0, P, in, 0, &err) == SW_EINVAL);
    /* add in place through a permuted layout */
    CHECK(sw_layout_add_f32(mem, 2, P, in, &err) == SW_OK);
    CHECK(mem[5] == 2 && mem[7] == 10);
    float ones[9];
    for (int i = 0; i < 9; i++)
        ones[i] = 1;
    CHECK(sw_layout_add_f32(ones, 1, F, in, &err) == SW_OK);
    CHECK(ones[0] == 1 && ones[1] == 1 && ones[6] == 6 && ones[7] == 1);
    /* fold: broadcast mode 0 shares slots, each element gets its slot's sum */
    float out[6];
    CHECK(sw_layout_fold_f32(B, in, out, &err) == SW_OK);
    CHECK(out[0] == 1 && out[1] == 1 && out[2] == 5 && out[3] == 5 && out[4] == 9 &&
          out[5] == 9);
    CHECK(sw_layout_fold_f32(B, NULL, out, &err) == SW_ETYPE);
    /* mode sizes of a nested layout: (2, (3, 4)) has modes of 2 and 12 */
    const uint8_t nest[5] = {SW_NODE_LEAF, SW_NODE_PUSH, SW_NODE_LEAF, SW_NODE_LEAF,
                             SW_NODE_POP};
    const int64_t next[3] = {2, 3, 4};
    sw_layout *N = sw_layout_canonical(5, nest, next, &err);
    int64_t sizes[2] = {0, 0};
    CHECK_EQ_I64(sw_layout_mode_sizes(N, sizes, 2), 2);
    CHECK_EQ_I64(sizes[0], 2);
    CHECK_EQ_I64(sizes[1], 12);
    CHECK_EQ_I64(sw_layout_mode_sizes(N, sizes, 1), 2); /* fills one, answers the rank */
    /* reduce ordinals: (2, 12) keeping mode 1 puts k at k / 2; none: all at 0 */
    int64_t ord[24];
    const int32_t keep1[1] = {1}, keep_bad[1] = {2};
    CHECK(sw_layout_reduce_ordinals(N, keep1, 1, ord, &err) == SW_OK);
    CHECK(ord[0] == 0 && ord[1] == 0 && ord[2] == 1 && ord[23] == 11);
    CHECK(sw_layout_reduce_ordinals(N, NULL, 0, ord, &err) == SW_OK);
    CHECK(ord[0] == 0 && ord[23] == 0);
    CHECK(sw_layout_reduce_ordinals(N, keep_bad, 1, ord, &err) == SW_EINVAL);
    /* the tiled shape check reads the same sizes (TE-3) */
    sw_tile_geometry g;
    const int64_t grid[2] = {1, 3}, tile[2] = {2, 4};
    CHECK(sw_tiles_geometry_init(&g, 2, grid, tile, &err) == SW_OK);
    CHECK(sw_tiles_matches_shape(&g, N));
    CHECK(!sw_tiles_matches_shape(&g, P)); /* modes of 2 and 3 */
    sw_layout_free(N);
    sw_layout_free(P);
    sw_layout_free(B);
    sw_layout_free(F);
}

/* ---- binary ops ----------------------------------------------------------- */

/* a (2x3, one of four placements) + b contiguous, on `kind`. */
static void binary_case(int kind, int placement)
{
    sw_error err;
    const float av[10] = {0.5f, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    const float bv[6] = {10, 20, 30, 40, 50, 60};
    const int64_t ext[2] = {2, 3};
    sw_carrier *ca = f32_carrier(kind, av, 10), *cb = f32_carrier(kind, bv, 6);
    sw_tensor *a, *b = strided(cb, 0, 2, ext, NULL);
    float want_a[6];
    if (placement == 0) { /* contiguous */
        a = strided(ca, 0, 2, ext, NULL);
        for (int k = 0; k < 6; k++)
            want_a[k] = av[k];
    } else if (placement == 1) { /* permuted: element (i, j) at 3i + j */
        const int64_t str[2] = {3, 1};
        a = strided(ca, 0, 2, ext, str);
        for (int k = 0; k < 6; k++)
            want_a[k] = av[3 * (k % 2) + k / 2];
    } else if (placement == 2) { /* broadcast along mode 0 */
        const int64_t str[2] = {0, 1};
        a = strided(ca, 0, 2, ext, str);
        for (int k = 0; k < 6; k++)
            want_a[k] = av[k / 2];
    } else { /* offset 4 */
        a = strided(ca, 4, 2, ext, NULL);
        for (int k = 0; k < 6; k++)
            want_a[k] = av[4 + k];
    }
    float got[6];
    uint64_t va = sw_carrier_version(ca);
    CHECK(sw_tensor_binary_values(SW_BINARY_ADD, a, b, got, &err) == SW_OK);
    for (int k = 0; k < 6; k++)
        CHECK(got[k] == want_a[k] + bv[k]);
    CHECK(sw_tensor_binary_values(SW_BINARY_MUL, a, b, got, &err) == SW_OK);
    for (int k = 0; k < 6; k++)
        CHECK(got[k] == want_a[k] * bv[k]);
    CHECK(sw_carrier_version(ca) == va);
    sw_tensor *r = NULL;
    if (kind == FILEB) {
        CHECK(sw_tensor_add(a, b, &r, &err) == SW_ENOTSUP && r == NULL);
    } else {
        CHECK(sw_tensor_mul(a, b, &r, &err) == SW_OK);
        CHECK(sw_carrier_class_of(sw_tensor_carrier(r)) == sw_carrier_class_of(ca));
        CHECK_EQ_I64(sw_carrier_version(sw_tensor_carrier(r)), 0);
        CHECK(sw_carrier_is_mutable(sw_tensor_carrier(r)));
        CHECK(sw_layout_is_flat(sw_tensor_layout(r)));
        float rv[6];
        CHECK(sw_tensor_read_values(r, rv, &err) == SW_OK);
        for (int k = 0; k < 6; k++)
            CHECK(rv[k] == want_a[k] * bv[k]);
        drop(r);
    }
    drop(a);
    drop(b);
    sw_carrier_unref(ca);
    sw_carrier_unref(cb);
}

static void test_binary(void)
{
    for (int kind = CPU; kind <= FILEB; kind++)
        for (int p = 0; p < 4; p++)
            binary_case(kind, p);
}

/* Int32 exactly, mixed to binary32 (rounded once), and the refusals. */
static void test_binary_dtypes(void)
{
    sw_error err;
    sw_carrier *ci, *cf, *big;
    const int32_t iv[3] = {16777217, -5, 7};
    const float fv[3] = {1, 0.5f, 3};
    CHECK(sw_generic_new(iv, 3, SW_DT_INT32, 0, &ci, &err) == SW_OK);
    CHECK(sw_generic_new(fv, 3, SW_DT_FLOAT32, 0, &cf, &err) == SW_OK);
    const int64_t three[1] = {3}, two[1] = {2};
    sw_tensor *ti = strided(ci, 0, 1, three, NULL), *tf = strided(cf, 0, 1, three, NULL);
    int32_t isum[3];
    CHECK(sw_binary_result_dtype(SW_DT_INT32, SW_DT_INT32) == SW_DT_INT32);
    CHECK(sw_binary_result_dtype(SW_DT_INT32, SW_DT_FLOAT32) == SW_DT_FLOAT32);
    CHECK(sw_tensor_binary_values(SW_BINARY_ADD, ti, ti, isum, &err) == SW_OK);
    CHECK(isum[0] == 33554434 && isum[1] == -10 && isum[2] == 14);
    float fsum[3];
    CHECK(sw_tensor_binary_values(SW_BINARY_ADD, ti, tf, fsum, &err) == SW_OK);
    /* 16777217 rounds to 16777216 first; + 1 is 16777217, rounded to 16777216 */
    CHECK(fsum[0] == 16777216.0f && fsum[1] == -4.5f && fsum[2] == 10.0f);
    const int32_t hv[2] = {2147483647, 65536};
    CHECK(sw_generic_new(hv, 2, SW_DT_INT32, 0, &big, &err) == SW_OK);
    sw_tensor *tb = strided(big, 0, 1, two, NULL);
    CHECK(sw_tensor_binary_values(SW_BINARY_MUL, tb, tb, isum, &err) == SW_EOVERFLOW);
    CHECK(strstr(err.msg, "Int32 result 4611686014132420609 is out of range") != NULL);
    /* shape mismatch, then dtype mismatch: nothing changed */
    sw_tensor *r = NULL;
    CHECK(sw_tensor_binary_values(SW_BINARY_ADD, ti, tb, isum, &err) == SW_EINVAL);
    CHECK(sw_tensor_add(ti, tb, &r, &err) == SW_EINVAL && r == NULL);
    sw_carrier *cb;
    const uint8_t bools[3] = {1, 0, 1};
    CHECK(sw_generic_new(bools, 3, SW_DT_BOOL, 0, &cb, &err) == SW_OK);
    sw_tensor *tbool = strided(cb, 0, 1, three, NULL);
    CHECK(sw_tensor_add(ti, tbool, &r, &err) == SW_ETYPE && r == NULL);
    CHECK(sw_tensor_binary_values(SW_BINARY_ADD, NULL, ti, isum, &err) == SW_ETYPE);
    CHECK_EQ_I64(sw_carrier_version(ci), 0);
    CHECK_EQ_I64(sw_carrier_version(cb), 0);
    /* a released operand: the read's refusal */
    CHECK(sw_carrier_release(cf, &err) == SW_OK);
    CHECK(sw_tensor_add(ti, tf, &r, &err) == SW_ESTATE && r == NULL);
    drop(ti);
    drop(tf);
    drop(tb);
    drop(tbool);
    sw_carrier_unref(ci);
    sw_carrier_unref(cf);
    sw_carrier_unref(big);
    sw_carrier_unref(cb);
}

/* ---- reduce_sum ------------------------------------------------------------ */

static void test_reduce(void)
{
    sw_error err;
    const float v[6] = {1, 2, 3, 4, 5, 6};
    const int64_t ext[2] = {2, 3}, perm[2] = {3, 1};
    for (int kind = CPU; kind <= FILEB; kind++) {
        sw_carrier *c = f32_carrier(kind, v, 6);
        sw_tensor *t = strided(c, 0, 2, ext, NULL), *p = strided(c, 0, 2, ext, perm);
        float out[3];
        const int32_t keep1[1] = {1}, keep0[1] = {0}, both[2] = {1, 0};
        CHECK(sw_tensor_reduce_sum_values(t, keep1, 1, SW_DT_FLOAT32, out, &err) == SW_OK);
        CHECK(out[0] == 3 && out[1] == 7 && out[2] == 11);
        CHECK(sw_tensor_reduce_sum_values(p, keep0, 1, SW_DT_FLOAT64, out, &err) == SW_OK);
        CHECK(out[0] == 6 && out[1] == 15); /* rows of the transposed view */
        CHECK(sw_tensor_reduce_sum_values(t, NULL, 0, SW_DT_FLOAT32, out, &err) == SW_OK);
        CHECK(out[0] == 21);
        float tr[6];
        CHECK(sw_tensor_reduce_sum_values(t, both, 2, SW_DT_FLOAT32, tr, &err) == SW_OK);
        CHECK(tr[0] == 1 && tr[1] == 3 && tr[2] == 5 && tr[3] == 2);
        const int32_t twice[2] = {1, 1}, bad[1] = {2};
        CHECK(sw_tensor_reduce_sum_values(t, twice, 2, SW_DT_FLOAT32, out, &err) == SW_EINVAL);
        CHECK(sw_tensor_reduce_sum_values(t, bad, 1, SW_DT_FLOAT32, out, &err) == SW_EINVAL);
        CHECK(sw_tensor_reduce_sum_values(t, keep1, 1, SW_DT_INT32, out, &err) == SW_ETYPE);
        sw_tensor *r = NULL;
        if (kind == FILEB) {
            CHECK(sw_tensor_reduce_sum(t, keep1, 1, SW_DT_FLOAT32, &r, &err) == SW_ENOTSUP);
        } else {
            CHECK(sw_tensor_reduce_sum(p, keep1, 1, SW_DT_FLOAT32, &r, &err) == SW_OK);
            CHECK_EQ_I64(sw_tensor_size(r), 3);
            CHECK(sw_tensor_read_values(r, out, &err) == SW_OK);
            CHECK(out[0] == 5 && out[1] == 7 && out[2] == 9);
            drop(r);
            CHECK(sw_tensor_reduce_sum(t, NULL, 0, SW_DT_FLOAT64, &r, &err) == SW_OK);
            CHECK_EQ_I64(sw_tensor_size(r), 1);
            drop(r);
        }
        sw_tensor_unref(p);
        drop(t);
        sw_carrier_unref(c);
    }
    /* binary32 accumulation in logical order: 1e8 + 1 + 1 stays 1e8 */
    const float w[3] = {1e8f, 1, 1};
    sw_carrier *c = f32_carrier(CPU, w, 3);
    const int64_t three[1] = {3};
    sw_tensor *t = strided(c, 0, 1, three, NULL);
    float s;
    CHECK(sw_tensor_reduce_sum_values(t, NULL, 0, SW_DT_FLOAT32, &s, &err) == SW_OK);
    CHECK(s == 1e8f);
    CHECK(sw_tensor_reduce_sum_values(t, NULL, 0, SW_DT_FLOAT64, &s, &err) == SW_OK);
    CHECK(s == 100000002.0f);
    drop(t);
    sw_carrier_unref(c);
    /* Int32: exact, out of range refused */
    const int32_t iv[2] = {2147483647, 1};
    sw_carrier *ci;
    CHECK(sw_generic_new(iv, 2, SW_DT_INT32, 0, &ci, &err) == SW_OK);
    const int64_t two[1] = {2};
    t = strided(ci, 0, 1, two, NULL);
    int32_t is;
    CHECK(sw_tensor_reduce_sum_values(t, NULL, 0, SW_DT_INT32, &is, &err) == SW_EOVERFLOW);
    CHECK(strstr(err.msg, "Int32 result 2147483648 is out of range") != NULL);
    CHECK(sw_tensor_reduce_sum_values(t, NULL, 0, SW_DT_FLOAT32, &is, &err) == SW_ETYPE);
    drop(t);
    sw_carrier_unref(ci);
}

/* ---- copy and fill ------------------------------------------------------------ */

static void copy_case(int kind, int placement)
{
    sw_error err;
    const float sv[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    const float zero[9] = {0};
    const int64_t ext[2] = {2, 3};
    sw_carrier *cs = f32_carrier(CPU, sv, 8), *cd = f32_carrier(kind, zero, 9);
    sw_tensor *src, *dst;
    if (placement == 0) {
        src = strided(cs, 0, 2, ext, NULL);
    } else if (placement == 1) {
        const int64_t str[2] = {3, 1};
        src = strided(cs, 0, 2, ext, str);
    } else if (placement == 2) {
        const int64_t str[2] = {0, 1};
        src = strided(cs, 0, 2, ext, str);
    } else {
        src = strided(cs, 2, 2, ext, NULL);
    }
    /* the destination: permuted at offset 3 of 9 slots (slots 0..2 kept) */
    const int64_t dstr[2] = {3, 1};
    dst = strided(cd, 3, 2, ext, dstr);
    float want[6], got[6];
    CHECK(sw_tensor_read_values(src, want, &err) == SW_OK);
    uint64_t v0 = sw_carrier_version(cd);
    CHECK(sw_tensor_copy(dst, src, &err) == SW_OK);
    CHECK(sw_carrier_version(cd) == v0 + 1);
    CHECK(sw_tensor_read_values(dst, got, &err) == SW_OK);
    for (int k = 0; k < 6; k++)
        CHECK(got[k] == want[k]);
    float all[9];
    CHECK(sw_carrier_read(cd, 0, 9, all, &err) == SW_OK);
    CHECK(all[0] == 0 && all[1] == 0 && all[2] == 0 && all[3] == want[0]);
    /* fill, then the refusals leave it as it was */
    const float seven = 7;
    CHECK(sw_tensor_fill(dst, &seven, &err) == SW_OK);
    CHECK(sw_carrier_read(cd, 0, 9, all, &err) == SW_OK);
    CHECK(all[2] == 0 && all[3] == 7 && all[8] == 7);
    uint64_t v1 = sw_carrier_version(cd);
    const int64_t other[2] = {3, 2};
    sw_tensor *wrong = strided(cs, 0, 2, other, NULL);
    CHECK(sw_tensor_copy(dst, wrong, &err) == SW_EINVAL);
    sw_carrier *ci;
    const int32_t iv[6] = {0};
    CHECK(sw_generic_new(iv, 6, SW_DT_INT32, 0, &ci, &err) == SW_OK);
    sw_tensor *ti = strided(ci, 0, 2, ext, NULL);
    CHECK(sw_tensor_copy(dst, ti, &err) == SW_ETYPE);
    CHECK(sw_tensor_copy(NULL, src, &err) == SW_ETYPE);
    CHECK(sw_tensor_fill(dst, NULL, &err) == SW_ETYPE);
    CHECK(sw_carrier_version(cd) == v1);
    CHECK(sw_carrier_read(cd, 0, 9, all, &err) == SW_OK);
    CHECK(all[2] == 0 && all[3] == 7 && all[8] == 7);
    drop(ti);
    sw_carrier_unref(ci);
    sw_tensor_unref(wrong);
    drop(src);
    drop(dst);
    sw_carrier_unref(cs);
    sw_carrier_unref(cd);
}

static void test_copy_fill(void)
{
    for (int kind = CPU; kind <= FILEB; kind++)
        for (int p = 0; p < 4; p++)
            copy_case(kind, p);
    /* an immutable destination and one in the same carrier as the source */
    sw_error err;
    const float v[4] = {1, 2, 3, 4};
    sw_carrier *im, *c;
    CHECK(sw_generic_new(v, 4, SW_DT_FLOAT32, SW_CARRIER_IMMUTABLE, &im, &err) == SW_OK);
    const int64_t two[1] = {2}, back[1] = {1};
    sw_tensor *t = strided(im, 0, 1, two, NULL);
    const float one = 1;
    CHECK(sw_tensor_fill(t, &one, &err) == SW_ESTATE);
    float got[4];
    CHECK(sw_carrier_read(im, 0, 4, got, &err) == SW_OK && got[0] == 1 && got[1] == 2);
    CHECK_EQ_I64(sw_carrier_version(im), 0);
    drop(t);
    sw_carrier_unref(im);
    c = f32_carrier(GENERIC, v, 4);
    sw_tensor *lo = strided(c, 0, 1, two, NULL), *hi = strided(c, 1, 1, two, back);
    CHECK(sw_tensor_copy(hi, lo, &err) == SW_OK); /* src read before the write */
    CHECK(sw_carrier_read(c, 0, 4, got, &err) == SW_OK);
    CHECK(got[0] == 1 && got[1] == 1 && got[2] == 2 && got[3] == 4);
    sw_tensor_unref(hi);
    drop(lo);
    sw_carrier_unref(c);
}

/* ---- threads ------------------------------------------------------------------ */

/* Ops reading two carriers in place take both mutexes in one order, so
 * a + b and b + a on two threads while others fill and copy the same
 * carriers neither deadlock nor race (ThreadSanitizer build), and each
 * result is one instant's values: every element of a fill is the same. */
typedef struct {
    sw_tensor *a, *b;
    int role, bad;
} racer;

static void *race(void *arg)
{
    racer *r = arg;
    sw_error err;
    float out[64];
    for (int i = 0; i < 300; i++) {
        float v = (float)i;
        if (r->role == 0 || r->role == 1) {
            sw_tensor *x = r->role ? r->b : r->a, *y = r->role ? r->a : r->b;
            if (sw_tensor_binary_values(SW_BINARY_ADD, x, y, out, &err) != SW_OK)
                r->bad++;
            for (int k = 1; k < 64; k++)
                r->bad += out[k] != out[0];
        } else if (r->role == 2) {
            r->bad += sw_tensor_fill(r->a, &v, &err) != SW_OK;
            r->bad += sw_tensor_fill(r->b, &v, &err) != SW_OK;
        } else {
            r->bad += sw_tensor_copy(r->b, r->a, &err) != SW_OK;
        }
    }
    return NULL;
}

static void test_threads(void)
{
    sw_error err;
    sw_carrier *ca, *cb;
    CHECK(sw_cpu_new(64, SW_DT_FLOAT32, 0, &ca, &err) == SW_OK);
    CHECK(sw_cpu_new(64, SW_DT_FLOAT32, 0, &cb, &err) == SW_OK);
    const int64_t n[1] = {64};
    sw_tensor *a = strided(ca, 0, 1, n, NULL), *b = strided(cb, 0, 1, n, NULL);
    pthread_t th[4];
    racer r[4];
    for (int i = 0; i < 4; i++) {
        r[i] = (racer){a, b, i, 0};
        pthread_create(&th[i], NULL, race, &r[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ_I64(r[i].bad, 0);
    }
    drop(a);
    drop(b);
    sw_carrier_unref(ca);
    sw_carrier_unref(cb);
}

int main(void)
{
    int64_t live = sw_alloc_live_bytes();
    test_walks();
    test_binary();
    test_binary_dtypes();
    test_reduce();
    test_copy_fill();
    test_threads();
    CHECK_EQ_I64(sw_alloc_live_bytes(), live);
    return check_report("tensor_ops");
}
