/* Core layouts: construction checks, size/cosize (L-6), indexing (L-9),
 * exact injectivity against brute force (L-11), the mode algebra (L-3,
 * L-12..L-15) and allocation failure. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "strideweave/alloc.h"
#include "strideweave/layout.h"
#include "strideweave/testing.h"

/* test_injective_unenumerable asks for a record of ~2^58 bytes and expects
 * the allocation to fail cleanly: a sanitizer must return NULL rather than
 * abort. */
#if defined(__SANITIZE_ADDRESS__)
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1";
}
#endif
#if defined(__SANITIZE_THREAD__)
const char *__tsan_default_options(void);
const char *__tsan_default_options(void)
{
    return "allocator_may_return_null=1";
}
#endif

enum { L = SW_NODE_LEAF, PU = SW_NODE_PUSH, PO = SW_NODE_POP };

static sw_layout *flat(int n, const int64_t *e, const int64_t *s)
{
    uint8_t prof[16];
    memset(prof, L, sizeof prof);
    return sw_layout_new(n, prof, e, s, NULL);
}

static void test_new_and_facts(void)
{
    const uint8_t prof[] = {L, PU, L, L, PO};
    const int64_t e[] = {2, 3, 4}, s[] = {1, 2, 6};
    sw_error err;
    sw_layout *l = sw_layout_new(5, prof, e, s, &err);
    CHECK(l != NULL);
    CHECK_EQ_I64(l->rank, 2);
    CHECK_EQ_I64(l->nleaves, 3);
    CHECK_EQ_I64(l->nprofile, 5);
    CHECK_EQ_I64(l->depth, 2);
    CHECK_EQ_I64(l->size, 24);
    CHECK_EQ_I64(l->cosize, 24);
    CHECK_EQ_I64(l->injective, 1);  /* decided at construction */
    CHECK_EQ_I64(l->extents[2], 4);
    CHECK_EQ_I64(l->strides[1], 2);
    CHECK(sw_layout_is_leaf(l) == 0);
    sw_layout_free(l);

    /* L-6 table */
    const int64_t e2[] = {2, 3}, s2[] = {1, 4}, s3[] = {1, 0};
    l = flat(2, e2, s2);
    CHECK_EQ_I64(l->size, 6);
    CHECK_EQ_I64(l->cosize, 10);
    sw_layout_free(l);
    l = flat(2, e2, s3);
    CHECK_EQ_I64(l->cosize, 2);
    sw_layout_free(l);
    l = sw_layout_new(0, NULL, NULL, NULL, &err);
    CHECK(l != NULL);
    CHECK_EQ_I64(l->rank, 0);
    CHECK_EQ_I64(l->depth, 1);
    CHECK_EQ_I64(l->size, 1);
    CHECK_EQ_I64(l->cosize, 1);
    CHECK(sw_layout_is_leaf(l));
    CHECK_EQ_I64(sw_layout_is_injective(l, &err), 1);
    sw_layout_free(l);

    const uint8_t deep[] = {PU, PU, L, PO, PO};
    l = sw_layout_new(5, deep, e, s, &err);
    CHECK_EQ_I64(l->depth, 3);
    CHECK_EQ_I64(l->rank, 1);
    sw_layout_free(l);
}

static void test_invalid(void)
{
    int64_t before = sw_alloc_live_bytes();
    sw_error err;
    const int64_t e[] = {2, 3}, s[] = {1, 1}, zero[] = {0, 1}, neg[] = {1, -1};
    const uint8_t empty_nested[] = {L, PU, PO};
    const uint8_t unbalanced[] = {PU, L, L};
    const uint8_t extra_pop[] = {L, PO, L};
    const uint8_t bad_mark[] = {L, 7};
    CHECK(sw_layout_new(3, empty_nested, e, s, &err) == NULL);
    CHECK(err.code == SW_EINVAL);
    CHECK(sw_layout_new(3, unbalanced, e, s, &err) == NULL);
    CHECK(err.code == SW_EINVAL);
    CHECK(sw_layout_new(3, extra_pop, e, s, &err) == NULL);
    CHECK(err.code == SW_EINVAL);
    CHECK(sw_layout_new(2, bad_mark, e, s, &err) == NULL);
    CHECK(err.code == SW_EINVAL);
    CHECK(flat(2, zero, s) == NULL);
    CHECK(sw_layout_new(-1, NULL, NULL, NULL, &err) == NULL);
    CHECK(err.code == SW_EINVAL);
    CHECK(sw_layout_new(2, (const uint8_t[]){L, L}, e, NULL, &err) == NULL);
    CHECK(err.code == SW_EINVAL);
    /* bad input is an error, never a crash: canonical without extents */
    CHECK(sw_layout_canonical(2, (const uint8_t[]){L, L}, NULL, &err) == NULL);
    CHECK(err.code == SW_EINVAL);
    CHECK(sw_layout_canonical(-1, NULL, NULL, &err) == NULL);
    CHECK(err.code == SW_EINVAL);
    CHECK(sw_layout_new(2, extra_pop, e, neg, &err) == NULL);
    uint8_t prof[2] = {L, L};
    CHECK(sw_layout_new(2, prof, e, neg, &err) == NULL);
    CHECK(err.code == SW_EINVAL);

    /* G-2: size or cosize beyond int64 */
    const int64_t big[] = {INT64_C(1) << 32, INT64_C(1) << 32};
    const int64_t z2[] = {0, 0}, one[] = {1, 1};
    CHECK(sw_layout_new(2, prof, big, z2, &err) == NULL);
    CHECK(err.code == SW_EOVERFLOW);
    const int64_t e1[] = {3, 1}, huge[] = {INT64_MAX / 2 + 1, 0};
    CHECK(sw_layout_new(2, prof, e1, huge, &err) == NULL);
    CHECK(err.code == SW_EOVERFLOW);
    const int64_t exact[] = {INT64_MAX / 2, 0};  /* cosize INT64_MAX: fine */
    sw_layout *l = sw_layout_new(2, prof, e1, exact, &err);
    CHECK(l != NULL && l->cosize == INT64_MAX);
    sw_layout_free(l);
    CHECK(sw_layout_canonical(2, prof, big, &err) == NULL);
    CHECK(err.code == SW_EOVERFLOW);
    l = sw_layout_new(2, prof, one, big, &err);  /* a Stride-like layout */
    CHECK(l != NULL && l->cosize == 1);
    sw_layout_free(l);
    CHECK_EQ_I64(sw_alloc_live_bytes(), before);
}

/* Brute force: every ordinal's index, collisions by pairwise search. */
static int brute_injective(const sw_layout *l)
{
    static int64_t idx[4096];
    for (int64_t k = 0; k < l->size; k++) {
        CHECK(sw_layout_index(l, k, &idx[k], NULL) == SW_OK);
        for (int64_t j = 0; j < k; j++)
            if (idx[j] == idx[k])
                return 0;
    }
    return 1;
}

static void test_injective_decided_early(void)
{
    const int64_t e[] = {4, 2}, s_overlap[] = {1, 1}, s_zero[] = {0, 1},
                  s_ok[] = {2, 1}, s_hole[] = {3, 1};
    const int64_t e43[] = {4, 3}, s23[] = {2, 3};
    sw_layout *l = flat(2, e43, s23);
    CHECK_EQ_I64(l->injective, -1);  /* only enumeration can tell */
    CHECK_EQ_I64(sw_layout_is_injective(l, NULL), 0);
    CHECK_EQ_I64(l->injective, 0);
    sw_layout_free(l);
    l = flat(2, e, s_overlap);  /* size 8 > cosize 5 */
    CHECK_EQ_I64(l->injective, 0);
    sw_layout_free(l);
    l = flat(2, e, s_zero);
    CHECK_EQ_I64(l->injective, 0);
    sw_layout_free(l);
    l = flat(2, e, s_ok);  /* strides {1 (extent 2), 2 (extent 4)} */
    CHECK_EQ_I64(l->injective, 1);
    sw_layout_free(l);
    l = flat(2, e, s_hole);  /* 1 < span? stride 1 span 2, stride 3 >= 2 */
    CHECK_EQ_I64(l->injective, 1);
    sw_layout_free(l);
    /* more than 16 leaves: left to the first request */
    int64_t e17[17], s17[17];
    uint8_t prof[17];
    for (int i = 0; i < 17; i++) {
        e17[i] = 2;
        s17[i] = INT64_C(1) << i;
        prof[i] = L;
    }
    l = sw_layout_new(17, prof, e17, s17, NULL);
    CHECK_EQ_I64(l->injective, -1);
    CHECK_EQ_I64(sw_layout_is_injective(l, NULL), 1);
    sw_layout_free(l);
    s17[16] = 3;  /* overlaps: 3 = 1 + 2 */
    l = sw_layout_new(17, prof, e17, s17, NULL);
    CHECK_EQ_I64(sw_layout_is_injective(l, NULL), 0);
    sw_layout_free(l);
}

static void test_injective_table(void)
{
    static const struct { int64_t e[2], s[2]; int inj; } rows[] = {
        {{2, 3}, {1, 4}, 1}, {{4, 2}, {0, 1}, 0}, {{4, 2}, {1, 1}, 0},
        {{3, 3}, {2, 3}, 1}, {{4, 3}, {2, 3}, 0}, {{1, 4}, {0, 1}, 1},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        sw_layout *l = flat(2, rows[i].e, rows[i].s);
        sw_error err;
        CHECK_EQ_I64(sw_layout_is_injective(l, &err), rows[i].inj);
        CHECK_EQ_I64(l->injective, rows[i].inj); /* cached */
        CHECK_EQ_I64(sw_layout_is_injective(l, &err), rows[i].inj);
        CHECK_EQ_I64(brute_injective(l), rows[i].inj);
        sw_layout_free(l);
    }
    /* The sorted-index path (cosize far above size). */
    const int64_t e3[] = {3, 3, 2}, s3[] = {2, 3, 10000}, s4[] = {2, 2, 10000};
    sw_layout *l = flat(3, e3, s3);
    CHECK_EQ_I64(sw_layout_is_injective(l, NULL), 1);
    sw_layout_free(l);
    l = flat(3, e3, s4);
    CHECK_EQ_I64(sw_layout_is_injective(l, NULL), 0);
    sw_layout_free(l);
}

/* L-11 when enumeration is impossible: three leaves of 2^20 (size 2^60,
 * size * 8 wraps in 64 bits), strides 2^39 + {1, 3, 5} (cosize ~1.5 * 2^60):
 * no two leaves collide, the strides interleave, 2^42 differences and a
 * record of 2^57 bytes. The answer is an ENOMEM error, never a guess and
 * never a short buffer overrun. */
static void test_injective_unenumerable(void)
{
    int64_t before = sw_alloc_live_bytes();
    const int64_t big = INT64_C(1) << 20, s39 = INT64_C(1) << 39;
    const int64_t e[] = {big, big, big}, s[] = {s39 + 1, s39 + 3, s39 + 5};
    sw_layout *l = flat(3, e, s);
    CHECK(l != NULL);
    if (!l)
        return;
    CHECK_EQ_I64(l->size, INT64_C(1) << 60);
    CHECK_EQ_I64(l->injective, -1);
    sw_error err;
    err.code = SW_OK;
    CHECK_EQ_I64(sw_layout_is_injective(l, &err), -1);
    CHECK(err.code == SW_ENOMEM);
    CHECK_EQ_I64(l->injective, -1);  /* not cached: a later request retries */
    sw_layout_free(l);
    CHECK_EQ_I64(sw_alloc_live_bytes(), before);
}

/* L-11 first requests from several threads (the binding enumerates without
 * the GIL): every thread gets the exact answer and the cache is written
 * without a data race (run under -fsanitize=thread to see one). */
typedef struct { sw_layout *l; int answer; } inj_job;

static void *inj_thread(void *arg)
{
    inj_job *job = arg;
    job->answer = sw_layout_is_injective(job->l, NULL);
    return NULL;
}

static void test_injective_concurrent(void)
{
    /* head {3, 3}:{2, 3} (or {4, 3}, which collides), then 14 doubling
     * leaves: undecided until enumerated, 147k / 196k coordinates. */
    for (int collide = 0; collide < 2; collide++) {
        int64_t e[16], s[16];
        uint8_t prof[16];
        e[0] = collide ? 4 : 3;
        e[1] = 3;
        s[0] = 2;
        s[1] = 3;
        int64_t span = 1 + 2 * (e[0] - 1) + 3 * (e[1] - 1);
        for (int i = 2; i < 16; i++) {
            e[i] = 2;
            s[i] = span << (i - 2);
        }
        memset(prof, L, sizeof prof);
        sw_layout *l = sw_layout_new(16, prof, e, s, NULL);
        CHECK(l != NULL && l->injective == -1);
        if (!l)
            return;
        inj_job jobs[4];
        pthread_t tids[4];
        for (int t = 0; t < 4; t++) {
            jobs[t].l = l;
            jobs[t].answer = -2;
            CHECK(pthread_create(&tids[t], NULL, inj_thread, &jobs[t]) == 0);
        }
        for (int k = 0; k < 200; k++) {  /* copies read the cache meanwhile */
            sw_layout *cp = sw_layout_copy(l, NULL);
            CHECK(cp != NULL && cp->injective >= -1 && cp->injective <= 1);
            sw_layout_free(cp);
        }
        for (int t = 0; t < 4; t++) {
            pthread_join(tids[t], NULL);
            CHECK_EQ_I64(jobs[t].answer, !collide);
        }
        CHECK_EQ_I64(sw_layout_is_injective(l, NULL), !collide);
        sw_layout_free(l);
    }
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static uint32_t rnd(uint32_t n)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng_state >> 33) % n;
}

static void test_injective_random(void)
{
    int mismatches = 0;
    for (int trial = 0; trial < 3000; trial++) {
        int n = 1 + (int)rnd(4);
        int64_t e[4], s[4];
        int64_t size = 1;
        for (int i = 0; i < n; i++) {
            e[i] = 1 + rnd(5);
            s[i] = rnd(3) == 0 ? (int64_t)rnd(3) : (int64_t)rnd(40);
            size *= e[i];
        }
        if (size > 4096)
            continue;
        sw_layout *l = flat(n, e, s);
        if (sw_layout_is_injective(l, NULL) != brute_injective(l))
            mismatches++;
        /* indexing agrees with the explicit mixed radix */
        int64_t k = size - 1, expect = 0, got = -1;
        for (int i = 0; i < n; i++) {
            expect += (k % e[i]) * s[i];
            k /= e[i];
        }
        CHECK(sw_layout_index(l, size - 1, &got, NULL) == SW_OK);
        CHECK_EQ_I64(got, expect);
        sw_layout_free(l);
    }
    CHECK_EQ_I64(mismatches, 0);
}

/* L-11 without a record sized by cosize: the two-leaf case {2^60 + 1, 2} :
 * {2, 3} (cosize 2^61 + 4) is settled by the pairwise test (the smallest
 * collision would need 2 steps of the extent-2 leaf); {2^60 + 1, 4} : {2, 3}
 * collides (3 * 2 == 2 * 3). Mixed-radix leaves above an interleaved pair
 * (stride 2^62) do not grow the work. */
static void test_injective_huge_cosize(void)
{
    int64_t before = sw_alloc_live_bytes();
    const int64_t e[] = {(INT64_C(1) << 60) + 1, 2}, s[] = {2, 3};
    const int64_t e4[] = {(INT64_C(1) << 60) + 1, 4};
    const int64_t e3[] = {3, 3, 2}, s3[] = {2, 3, INT64_C(1) << 62};
    sw_layout *l = flat(2, e, s);
    CHECK_EQ_I64(sw_layout_is_injective(l, NULL), 1);
    sw_layout_free(l);
    l = flat(2, e4, s);
    CHECK_EQ_I64(sw_layout_is_injective(l, NULL), 0);
    sw_layout_free(l);
    l = flat(3, e3, s3);
    CHECK_EQ_I64(l->injective, -1);
    CHECK_EQ_I64(sw_layout_is_injective(l, NULL), 1);
    sw_layout_free(l);
    /* Three interleaved leaves, no colliding pair, 2^61 + 4 coordinates:
     * the difference search finds 4 + 6 == 10 in 9 steps. {4, 6, 9} over
     * {2^40, 2, 2} is injective (9 is odd, 4a + 6b is even). */
    const int64_t eh[] = {2, (INT64_C(1) << 59) + 1, 2}, sh[] = {6, 4, 10};
    const int64_t ei[] = {INT64_C(1) << 40, 2, 2}, si[] = {4, 6, 9};
    l = flat(3, eh, sh);
    CHECK_EQ_I64(sw_layout_is_injective(l, NULL), 0);
    sw_layout_free(l);
    l = flat(3, ei, si);
    CHECK_EQ_I64(sw_layout_is_injective(l, NULL), 1);
    sw_layout_free(l);
    /* The fuzzer's slow inputs (tests/fuzz/seeds_layout): ~65M coordinates
     * once enumerated (63 s under the sanitizers), 45 differences now. */
    const int64_t ef[] = {3, 5, 4326911}, sf[] = {5, 9, 15};
    l = flat(3, ef, sf);
    CHECK_EQ_I64(sw_layout_is_injective(l, NULL), 1);
    sw_layout_free(l);
    CHECK_EQ_I64(sw_alloc_live_bytes(), before);
}

/* L-11 against brute force where strides interleave on purpose (three to
 * six leaves sharing a factor, some mixed-radix leaves on top, sometimes one
 * long leaf): the paths past the quick decision (pairwise, gcd scaling, the
 * difference search, bitmap, sorted list). */
static void test_injective_random_interleaved(void)
{
    int mismatches = 0, checked = 0;
    for (int trial = 0; trial < 4000; trial++) {
        int n = 3 + (int)rnd(4);
        int64_t e[6], s[6], size = 1, factor = 1 + (int64_t)rnd(4);
        for (int i = 0; i < n; i++) {
            e[i] = 2 + rnd(3);
            s[i] = factor * (1 + (int64_t)rnd(12));
            if (rnd(5) == 0)
                s[i] = factor * 1000 * (1 + (int64_t)rnd(3)); /* far apart */
            if (i == 0 && rnd(3) == 0)
                e[i] = 2 + rnd(200); /* one long leaf: the difference search */
            size *= e[i];
        }
        if (size > 4096)
            continue;
        sw_layout *l = flat(n, e, s);
        checked++;
        if (sw_layout_is_injective(l, NULL) != brute_injective(l))
            mismatches++;
        sw_layout_free(l);
    }
    CHECK(checked > 1000);
    CHECK_EQ_I64(mismatches, 0);
}

static void test_index(void)
{
    const uint8_t prof[] = {L, PU, L, L, PO};
    const int64_t e[] = {2, 3, 4}, s[] = {1, 10, 100};
    sw_layout *l = sw_layout_new(5, prof, e, s, NULL);
    int64_t out = -1;
    sw_error err;
    CHECK(sw_layout_index(l, 23, &out, &err) == SW_OK);
    CHECK_EQ_I64(out, 321);
    CHECK(sw_layout_index(l, 24, &out, &err) == SW_EINVAL);
    CHECK(sw_layout_index(l, -1, &out, &err) == SW_EINVAL);
    sw_layout_free(l);
}

static void test_algebra(void)
{
    const uint8_t prof[] = {L, PU, L, L, PO, L};
    const int64_t e[] = {2, 3, 4, 5}, s[] = {1, 2, 6, 24};
    sw_error err;
    sw_layout *l = sw_layout_new(6, prof, e, s, &err);
    CHECK_EQ_I64(l->rank, 3);

    sw_layout *m = sw_layout_mode(l, 1, &err);  /* nested: children top-level */
    CHECK(m && m->rank == 2 && m->nprofile == 2 && m->extents[1] == 4 &&
          m->strides[1] == 6 && m->depth == 1);
    sw_layout_free(m);
    m = sw_layout_mode(l, 2, &err);  /* a leaf stays one leaf */
    CHECK(m && m->rank == 1 && m->extents[0] == 5 && sw_layout_is_leaf(m));
    sw_layout_free(m);
    CHECK(sw_layout_mode(l, 3, &err) == NULL && err.code == SW_ERANGE);
    CHECK(sw_layout_mode(l, -1, &err) == NULL && err.code == SW_ERANGE);

    m = sw_layout_slice(l, 1, 3, &err);
    CHECK(m && m->rank == 2 && m->nprofile == 5 && m->size == 60);
    sw_layout_free(m);
    m = sw_layout_slice(l, 2, 1, &err);
    CHECK(m && m->rank == 0 && m->size == 1);
    sw_layout_free(m);

    const int32_t sel[] = {2, 2, 0};
    m = sw_layout_select(l, sel, 3, &err);
    CHECK(m && m->rank == 3 && m->extents[0] == 5 && m->extents[2] == 2);
    sw_layout_free(m);

    /* L-14 */
    const int32_t order[] = {1, 0, 2}, bad_rep[] = {1, 1, 2}, bad_rng[] = {0, 1, 3};
    sw_layout *p = sw_layout_permute(l, order, 3, &err);
    const uint8_t pprof[] = {PU, L, L, PO, L, L};
    CHECK(p && memcmp(p->profile, pprof, 6) == 0 && p->strides[0] == 2 &&
          p->strides[2] == 1 && p->strides[3] == 24);
    sw_layout *back = sw_layout_permute(p, order, 3, &err);
    CHECK(back && sw_layout_equal(back, l));
    sw_layout_free(back);
    sw_layout_free(p);
    CHECK(sw_layout_permute(l, bad_rep, 3, &err) == NULL && err.code == SW_EINVAL);
    CHECK(sw_layout_permute(l, bad_rng, 3, &err) == NULL && err.code == SW_EINVAL);
    CHECK(sw_layout_permute(l, order, 2, &err) == NULL && err.code == SW_EINVAL);

    /* L-13 */
    const int64_t ea[] = {1, 2}, eb[] = {3, 4}, z[] = {0, 0};
    sw_layout *a = flat(2, ea, z), *b = flat(2, eb, z);
    sw_layout *c = sw_layout_concat(a, b, &err);
    CHECK(c && c->rank == 4 && c->nprofile == 4 && c->extents[3] == 4);
    sw_layout_free(c);
    c = sw_layout_append(a, b, &err);
    const uint8_t aprof[] = {L, L, PU, L, L, PO};
    CHECK(c && c->rank == 3 && c->nprofile == 6 &&
          memcmp(c->profile, aprof, 6) == 0 && c->depth == 2);
    sw_layout_free(c);
    sw_layout *leaf = flat(1, eb, z);
    c = sw_layout_append(a, leaf, &err);
    CHECK(c && c->rank == 3 && c->nprofile == 3);
    sw_layout_free(c);
    sw_layout_free(leaf);
    sw_layout_free(a);
    sw_layout_free(b);

    /* L-15 */
    sw_layout *k = sw_layout_canonical(6, prof, e, &err);
    CHECK(k && k->strides[0] == 1 && k->strides[1] == 2 && k->strides[2] == 6 &&
          k->strides[3] == 24 && k->cosize == k->size);
    CHECK_EQ_I64(sw_layout_is_injective(k, &err), 1);
    for (int64_t i = 0; i < k->size; i++) {
        int64_t out;
        sw_layout_index(k, i, &out, NULL);
        if (out != i) {
            CHECK(out == i);
            break;
        }
    }
    CHECK(sw_layout_equal(k, l));
    CHECK(sw_layout_same_shape(k, l) && sw_layout_same_shape(k, k));
    sw_layout *cp = sw_layout_copy(k, &err);
    CHECK(cp && sw_layout_equal(cp, k) && cp->injective == 1 && cp->depth == 2);
    sw_layout_free(cp);
    sw_layout_free(k);
    sw_layout_free(l);
}

static void test_broadcast(void)
{
    const uint8_t prof[] = {L, PU, L, L, PO};
    const int64_t e[] = {2, 1, 3}, s[] = {1, 2, 2}, t[] = {2, 4, 3}, bad[] = {3, 4, 3};
    sw_error err;
    sw_layout *l = sw_layout_new(5, prof, e, s, &err);
    sw_layout *b = sw_layout_broadcast(l, 5, prof, t, &err);
    CHECK(b && b->extents[1] == 4 && b->strides[1] == 0 && b->strides[2] == 2 &&
          b->strides[0] == 1);
    sw_layout_free(b);
    CHECK(sw_layout_broadcast(l, 5, prof, bad, &err) == NULL && err.code == SW_EINVAL);
    const uint8_t other[] = {L, L, L};
    CHECK(sw_layout_broadcast(l, 3, other, t, &err) == NULL && err.code == SW_EINVAL);
    sw_layout_free(l);
}

static void test_alloc_failure(void)
{
    if (!sw_fault_enabled())
        return;
    int64_t before = sw_alloc_live_bytes();
    const int64_t e[] = {4, 3}, s[] = {2, 3};
    sw_error err;
    sw_fault_arm("alloc", 0, 1);
    CHECK(flat(2, e, s) == NULL);
    sw_fault_clear();
    sw_layout *l = flat(2, e, s);
    sw_fault_arm("alloc", 0, 1);  /* the enumeration scratch */
    CHECK_EQ_I64(sw_layout_is_injective(l, &err), -1);
    CHECK(err.code == SW_ENOMEM);
    sw_fault_clear();
    sw_layout_free(l);
    CHECK_EQ_I64(sw_alloc_live_bytes(), before);
}

/* Same shape tree: strides may differ, profile and extents may not. */
static void test_same_shape(void)
{
    sw_error err;
    const uint8_t nested[] = {SW_NODE_LEAF, SW_NODE_PUSH, SW_NODE_LEAF, SW_NODE_LEAF,
                              SW_NODE_POP};
    const uint8_t flat[] = {SW_NODE_LEAF, SW_NODE_LEAF, SW_NODE_LEAF};
    const int64_t e[] = {2, 3, 4}, e2[] = {2, 4, 3};
    const int64_t s1[] = {1, 2, 6}, s2[] = {12, 4, 1};
    sw_layout *a = sw_layout_new(5, nested, e, s1, &err);
    sw_layout *b = sw_layout_new(5, nested, e, s2, &err);
    sw_layout *c = sw_layout_new(3, flat, e, s1, &err);
    sw_layout *d = sw_layout_new(5, nested, e2, s1, &err);
    CHECK(a && b && c && d);
    CHECK(sw_layout_same_shape(a, b) && !sw_layout_equal(a, b));
    CHECK(!sw_layout_same_shape(a, c)); /* same leaves, other nesting */
    CHECK(!sw_layout_same_shape(a, d)); /* other extents */
    sw_layout_free(a);
    sw_layout_free(b);
    sw_layout_free(c);
    sw_layout_free(d);
}

int main(void)
{
    int64_t before = sw_alloc_live_bytes();
    test_new_and_facts();
    test_invalid();
    test_injective_decided_early();
    test_injective_table();
    test_injective_random();
    test_injective_unenumerable();
    test_injective_huge_cosize();
    test_injective_random_interleaved();
    test_injective_concurrent();
    test_index();
    test_algebra();
    test_broadcast();
    test_alloc_failure();
    test_same_shape();
    CHECK_EQ_I64(sw_alloc_live_bytes(), before);
    return check_report("layout");
}
