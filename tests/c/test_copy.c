/* Copy kernels against a naive first-mode-fastest loop on random shapes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "strideweave/alloc.h"
#include "strideweave/copy.h"
#include "strideweave/layout.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static int64_t rnd_in(int64_t lo, int64_t hi) /* inclusive */
{
    return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1));
}

/* Smallest and largest element offset the operand reaches. */
static void reach(const int64_t *e, const int64_t *st, int ndim, int64_t *lo, int64_t *hi)
{
    *lo = *hi = 0;
    for (int i = 0; i < ndim; i++) {
        int64_t r = (e[i] - 1) * st[i];
        if (r > 0)
            *hi += r;
        else
            *lo += r;
    }
}

static void naive(char *dst, const int64_t *ds, const char *src, const int64_t *ss,
                  const int64_t *e, int ndim, size_t item)
{
    int64_t count = 1;
    for (int i = 0; i < ndim; i++)
        count *= e[i];
    for (int64_t k = 0; k < count; k++) {
        int64_t rem = k, doff = 0, soff = 0;
        for (int i = 0; i < ndim; i++) {
            int64_t c = rem % e[i];
            rem /= e[i];
            doff += c * ds[i];
            soff += c * ss[i];
        }
        memcpy(dst + doff * (int64_t)item, src + soff * (int64_t)item, item);
    }
}

/* Random operand strides: a permuted contiguous layout, sometimes reversed
 * (negative), sometimes with stride 0 or arbitrary gaps. */
static void random_strides(const int64_t *e, int ndim, int64_t *st, int allow_zero,
                           int allow_negative)
{
    int perm[8];
    for (int i = 0; i < ndim; i++)
        perm[i] = i;
    for (int i = ndim - 1; i > 0; i--) {
        int j = (int)rnd_in(0, i);
        int t = perm[i]; perm[i] = perm[j]; perm[j] = t;
    }
    int style = (int)rnd_in(0, 3);
    int64_t acc = 1;
    for (int k = 0; k < ndim; k++) {
        int i = style == 0 ? k : perm[k]; /* style 0: plain column-major */
        st[i] = acc;
        acc *= e[i] + (style == 3 ? rnd_in(0, 2) : 0);
    }
    for (int i = 0; i < ndim; i++) {
        if (allow_zero && rnd_in(0, 4) == 0)
            st[i] = 0;
        if (allow_negative && rnd_in(0, 5) == 0)
            st[i] = -st[i];
    }
}

static void random_case(int dst_may_alias)
{
    static const size_t items[] = {1, 2, 4, 8, 3, 16};
    int64_t e[8] = {0}, ss[8] = {0}, ds[8] = {0};
    int ndim = (int)rnd_in(0, 6);
    size_t item = items[rnd_in(0, 5)];
    for (int i = 0; i < ndim; i++)
        e[i] = rnd_in(0, 9) == 0 ? 1 : rnd_in(1, 5);
    random_strides(e, ndim, ss, 1, 1);
    random_strides(e, ndim, ds, dst_may_alias, 1);

    int64_t slo, shi, dlo, dhi;
    reach(e, ss, ndim, &slo, &shi);
    reach(e, ds, ndim, &dlo, &dhi);
    size_t sbytes = (size_t)(shi - slo + 1) * item, dbytes = (size_t)(dhi - dlo + 1) * item;
    unsigned char *src = malloc(sbytes), *got = malloc(dbytes), *want = malloc(dbytes);
    for (size_t i = 0; i < sbytes; i++)
        src[i] = (unsigned char)rnd();
    memset(got, 0xAB, dbytes);
    memset(want, 0xAB, dbytes);

    naive((char *)want - dlo * (int64_t)item, ds, (char *)src - slo * (int64_t)item, ss,
          e, ndim, item);
    sw_error err = {0};
    sw_status st = sw_copy_strided(got - dlo * (int64_t)item, ds,
                                   src - slo * (int64_t)item, ss, e, ndim, item, &err);
    CHECK_EQ_I64(st, SW_OK);
    CHECK(memcmp(got, want, dbytes) == 0);
    free(src);
    free(got);
    free(want);
}

static void gather_scatter_case(void)
{
    int64_t e[8], ss[8], contig[8];
    int ndim = (int)rnd_in(0, 5);
    size_t item = 4;
    for (int i = 0; i < ndim; i++)
        e[i] = rnd_in(1, 5);
    random_strides(e, ndim, ss, 0, 0); /* injective, so scatter round-trips */
    int64_t lo, hi, n = 1;
    reach(e, ss, ndim, &lo, &hi);
    for (int i = 0; i < ndim; i++)
        n *= e[i];
    CHECK_EQ_I64(sw_copy_contiguous_strides(e, ndim, contig, NULL), SW_OK);
    size_t sbytes = (size_t)(hi + 1) * item;
    unsigned char *src = malloc(sbytes), *packed = malloc((size_t)n * item),
                  *want = malloc((size_t)n * item), *back = malloc(sbytes);
    for (size_t i = 0; i < sbytes; i++)
        src[i] = (unsigned char)rnd();
    naive((char *)want, contig, (char *)src, ss, e, ndim, item);
    CHECK_EQ_I64(sw_copy_gather(packed, src, ss, e, ndim, item, NULL), SW_OK);
    CHECK(memcmp(packed, want, (size_t)n * item) == 0);
    memcpy(back, src, sbytes);
    memset(src, 0, sbytes);
    CHECK_EQ_I64(sw_copy_scatter(src, ss, packed, e, ndim, item, NULL), SW_OK);
    /* Every reached element is restored (gaps stay zero). */
    unsigned char *again = malloc((size_t)n * item);
    CHECK_EQ_I64(sw_copy_gather(again, src, ss, e, ndim, item, NULL), SW_OK);
    CHECK(memcmp(again, want, (size_t)n * item) == 0);
    free(again);
    free(src);
    free(packed);
    free(want);
    free(back);
}

static void test_coalesce(void)
{
    /* 2x3x4 column-major on both sides merges into one mode of 24. */
    int64_t e[] = {2, 3, 4}, s[] = {1, 2, 6}, d[] = {1, 2, 6};
    CHECK_EQ_I64(sw_copy_coalesce(3, e, s, d), 1);
    CHECK_EQ_I64(e[0], 24);
    /* Extent-1 modes vanish, whatever their strides. */
    int64_t e2[] = {1, 5, 1, 2}, s2[] = {99, 1, 7, 5}, d2[] = {3, 2, 0, 10};
    CHECK_EQ_I64(sw_copy_coalesce(4, e2, s2, d2), 1);
    CHECK_EQ_I64(e2[0], 10);
    CHECK_EQ_I64(s2[0], 1);
    CHECK_EQ_I64(d2[0], 2);
    /* Contiguous in the source only: no merge. */
    int64_t e3[] = {2, 3}, s3[] = {1, 2}, d3[] = {3, 1};
    CHECK_EQ_I64(sw_copy_coalesce(2, e3, s3, d3), 2);
    /* Broadcast source (stride 0) merges with stride 0. */
    int64_t e4[] = {4, 5}, s4[] = {0, 0}, d4[] = {1, 4};
    CHECK_EQ_I64(sw_copy_coalesce(2, e4, s4, d4), 1);
    CHECK_EQ_I64(e4[0], 20);
    int64_t e5[] = {1, 1}, s5[] = {1, 1}, d5[] = {1, 1};
    CHECK_EQ_I64(sw_copy_coalesce(2, e5, s5, d5), 0);
}

static void test_errors(void)
{
    sw_error err = {0};
    char a[64] = {0}, b[64] = {0};
    int64_t e[] = {2, 2}, s[] = {1, 2};
    CHECK_EQ_I64(sw_copy_strided(a, s, b, s, e, -1, 1, &err), SW_EINVAL);
    CHECK_EQ_I64(sw_copy_strided(a, s, b, s, e, SW_COPY_MAX_DIMS + 1, 1, &err), SW_EINVAL);
    CHECK_EQ_I64(sw_copy_strided(a, s, b, s, e, 2, 0, &err), SW_EINVAL);
    CHECK(strstr(err.msg, "itemsize") != NULL);
    int64_t neg[] = {2, -1};
    CHECK_EQ_I64(sw_copy_strided(a, s, b, s, neg, 2, 1, &err), SW_EINVAL);
    CHECK_EQ_I64(sw_copy_strided(NULL, s, b, s, e, 2, 1, &err), SW_EINVAL);
    CHECK_EQ_I64(sw_copy_strided(a, s, NULL, s, e, 2, 1, &err), SW_EINVAL);
    CHECK_EQ_I64(sw_copy_strided(a, NULL, b, s, e, 2, 1, &err), SW_EINVAL);
    /* Element count overflow. */
    int64_t big[] = {INT64_C(1) << 32, INT64_C(1) << 32}, bs[] = {1, INT64_C(1) << 32};
    CHECK_EQ_I64(sw_copy_strided(a, bs, b, bs, big, 2, 1, &err), SW_EOVERFLOW);
    /* Byte offset overflow: (2**61 - 1) * 4 * 4. */
    int64_t e1[] = {INT64_C(1) << 61}, s1[] = {4}, one[] = {1};
    CHECK_EQ_I64(sw_copy_strided(a, one, b, s1, e1, 1, 4, &err), SW_EOVERFLOW);
    CHECK(strstr(err.msg, "overflow") != NULL);
    /* Sum of per-mode reaches overflows although each fits. */
    int64_t e2[] = {2, 2}, s2[] = {INT64_MAX / 2 + 1, INT64_MAX / 2 + 1};
    CHECK_EQ_I64(sw_copy_strided(a, s, b, s2, e2, 2, 1, &err), SW_EOVERFLOW);
    /* Nothing to copy: NULL pointers are fine. */
    int64_t zero[] = {3, 0};
    CHECK_EQ_I64(sw_copy_strided(NULL, s, NULL, s, zero, 2, 4, &err), SW_OK);
    CHECK_EQ_I64(sw_copy_gather(NULL, NULL, s, zero, 2, 4, &err), SW_OK);
    CHECK_EQ_I64(sw_copy_scatter(NULL, s, NULL, zero, 2, 4, &err), SW_OK);
    CHECK_EQ_I64(sw_copy_gather(a, b, s, neg, 2, 1, &err), SW_EINVAL);
    int64_t c[2];
    CHECK_EQ_I64(sw_copy_contiguous_strides(big, 2, c, &err), SW_EOVERFLOW);
    CHECK_EQ_I64(sw_copy_span(NULL, b, 1, &err), SW_EINVAL);
    CHECK_EQ_I64(sw_copy_span(NULL, NULL, 0, &err), SW_OK);
    /* A NULL err is allowed. */
    CHECK_EQ_I64(sw_copy_strided(a, s, b, s, neg, 2, 1, NULL), SW_EINVAL);
}

static void test_basics(void)
{
    /* ndim 0 copies exactly one element. */
    uint32_t x = 0xDEADBEEF, y = 0;
    CHECK_EQ_I64(sw_copy_strided(&y, NULL, &x, NULL, NULL, 0, 4, NULL), SW_OK);
    CHECK(y == 0xDEADBEEF);
    /* Span copy. */
    char src[100], dst[100];
    for (int i = 0; i < 100; i++)
        src[i] = (char)i;
    CHECK_EQ_I64(sw_copy_span(dst, src, 100, NULL), SW_OK);
    CHECK(memcmp(dst, src, 100) == 0);
    /* Transpose 3x2 row-major -> column-major, Float32-sized. */
    float m[6] = {0, 1, 2, 3, 4, 5}, t[6] = {0};
    int64_t e[] = {2, 3}, ss[] = {1, 2}, ds[] = {3, 1};
    CHECK_EQ_I64(sw_copy_strided(t, ds, m, ss, e, 2, 4, NULL), SW_OK);
    float want[6] = {0, 2, 4, 1, 3, 5};
    CHECK(memcmp(t, want, sizeof t) == 0);
    /* Broadcast: one source value to every slot. */
    int32_t v = 7, out[12] = {0};
    int64_t be[] = {3, 4}, bs[] = {0, 0}, bd[] = {1, 3};
    CHECK_EQ_I64(sw_copy_strided(out, bd, &v, bs, be, 2, 4, NULL), SW_OK);
    int all7 = 1;
    for (int i = 0; i < 12; i++)
        all7 &= out[i] == 7;
    CHECK(all7);
}

/* The modes a copy walks: extent-1 leaves dropped, so 80 leaves with two
 * of extent > 1 fit; 64 of extent 2 (a layout the kernels cannot walk
 * in SW_COPY_MAX_DIMS modes) would not, but no valid layout has them. */
static void test_layout_modes(void)
{
    enum { N = 80 };
    int64_t ext[N], str[N];
    uint8_t profile[N];
    for (int i = 0; i < N; i++)
        ext[i] = 1, str[i] = 0, profile[i] = SW_NODE_LEAF;
    ext[3] = 2, str[3] = 5;
    ext[70] = 3, str[70] = 1;
    sw_layout *l = sw_layout_new(N, profile, ext, str, NULL);
    CHECK(l != NULL);
    int64_t e[SW_COPY_MAX_DIMS], s[SW_COPY_MAX_DIMS];
    CHECK(sw_copy_layout_modes(l, e, s) == 2);
    CHECK(e[0] == 2 && s[0] == 5 && e[1] == 3 && s[1] == 1);
    sw_layout_free(l);
}

int main(void)
{
    test_basics();
    test_coalesce();
    test_layout_modes();
    test_errors();
    for (int i = 0; i < 3000; i++)
        random_case(0);
    for (int i = 0; i < 3000; i++)
        random_case(1);
    for (int i = 0; i < 1000; i++)
        gather_scatter_case();
    return check_report("copy");
}
