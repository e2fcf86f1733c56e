/* Hierarchical layouts: one allocation per layout holding the struct, the
 * leaf extents and strides and the profile; every derived fact is computed
 * when the layout is finished, injectivity on first request. */
#include <stdlib.h>
#include <string.h>

#include "strideweave/alloc.h"
#include "strideweave/layout.h"
#include "layout_internal.h"

/* Lay the struct and its (unset) arrays out in `mem`: the arrays follow
 * the struct in the same block (layout_internal.h). */
static sw_layout *layout_place(void *mem, int32_t nprofile, int32_t nleaves)
{
    sw_layout *l = mem;
    memset(l, 0, sizeof *l);
    l->nleaves = nleaves;
    l->nprofile = nprofile;
    l->injective = -1;
    l->extents = (int64_t *)(l + 1);
    l->strides = l->extents + nleaves;
    l->profile = (uint8_t *)(l->strides + nleaves);
    return l;
}

static sw_layout *layout_alloc(int32_t nprofile, int32_t nleaves, sw_error *err)
{
    const sw_layout shape = {.nleaves = nleaves, .nprofile = nprofile};
    void *mem = sw_malloc(sw_layout_block_bytes(&shape));
    if (!mem) {
        sw_error_set(err, SW_ENOMEM, "out of memory allocating a layout");
        return NULL;
    }
    return layout_place(mem, nprofile, nleaves);
}

static int injective_quick(const sw_layout *l);

/* Validates the filled arrays and computes rank, depth, size and cosize. */
static sw_status layout_finish(sw_layout *l, sw_error *err)
{
    int32_t level = 0, maxlevel = 0, rank = 0, leaf = 0;
    for (int32_t p = 0; p < l->nprofile; p++) {
        switch (l->profile[p]) {
        case SW_NODE_LEAF:
            if (level == 0)
                rank++;
            leaf++;
            break;
        case SW_NODE_PUSH:
            if (level == 0)
                rank++;
            if (p + 1 >= l->nprofile || l->profile[p + 1] == SW_NODE_POP)
                return sw_error_set(err, SW_EINVAL,
                                    "a nested mode must not be empty");
            if (++level > maxlevel)
                maxlevel = level;
            if (1 + level > SW_LAYOUT_MAX_DEPTH)
                return sw_error_set(err, SW_EINVAL,
                                    "layout nesting is deeper than the maximum of %d levels",
                                    SW_LAYOUT_MAX_DEPTH);
            break;
        case SW_NODE_POP:
            if (--level < 0)
                return sw_error_set(err, SW_EINVAL,
                                    "profile has an unmatched Pop");
            break;
        default:
            return sw_error_set(err, SW_EINVAL, "profile marker %d is not a Node",
                                (int)l->profile[p]);
        }
    }
    if (level != 0)
        return sw_error_set(err, SW_EINVAL, "profile has an unmatched Push");
    if (leaf != l->nleaves)
        return sw_error_set(err, SW_EINVAL, "profile leaf count mismatch");
    int64_t size = 1, cosize = 1;
    for (int32_t i = 0; i < l->nleaves; i++) {
        int64_t e = l->extents[i], s = l->strides[i], span;
        if (e < 1)
            return sw_error_set(err, SW_EINVAL,
                                "extent %lld is below 1", (long long)e);
        if (s < 0)
            return sw_error_set(err, SW_EINVAL,
                                "stride %lld is negative", (long long)s);
        if (__builtin_mul_overflow(size, e, &size))
            return sw_error_set(err, SW_EOVERFLOW,
                                "layout size exceeds signed 64 bits");
        if (__builtin_mul_overflow(s, e - 1, &span) ||
            __builtin_add_overflow(cosize, span, &cosize))
            return sw_error_set(err, SW_EOVERFLOW,
                                "layout cosize exceeds signed 64 bits");
    }
    l->rank = rank;
    l->depth = 1 + maxlevel;
    l->size = size;
    l->cosize = cosize;
    l->injective = injective_quick(l);
    return SW_OK;
}

static sw_layout *layout_build(sw_layout *l, sw_error *err)
{
    if (layout_finish(l, err) != SW_OK) {
        sw_free(l);
        return NULL;
    }
    return l;
}

sw_layout *sw_layout_new(int32_t nprofile, const uint8_t *profile,
                         const int64_t *extents, const int64_t *strides,
                         sw_error *err)
{
    if (nprofile < 0 || (nprofile > 0 && !profile))
        return sw_error_set(err, SW_EINVAL, "bad profile"), NULL;
    int32_t nleaves = 0;
    for (int32_t p = 0; p < nprofile; p++)
        nleaves += profile[p] == SW_NODE_LEAF;
    if (nleaves > 0 && (!extents || !strides))
        return sw_error_set(err, SW_EINVAL, "missing extents or strides"), NULL;
    sw_layout *l = layout_alloc(nprofile, nleaves, err);
    if (!l)
        return NULL;
    if (nleaves) {
        memcpy(l->extents, extents, (size_t)nleaves * sizeof(int64_t));
        memcpy(l->strides, strides, (size_t)nleaves * sizeof(int64_t));
    }
    if (nprofile)
        memcpy(l->profile, profile, (size_t)nprofile);
    return layout_build(l, err);
}

sw_layout *sw_layout_canonical(int32_t nprofile, const uint8_t *profile,
                               const int64_t *extents, sw_error *err)
{
    if (nprofile < 0 || (nprofile > 0 && !profile))
        return sw_error_set(err, SW_EINVAL, "bad profile"), NULL;
    int32_t nleaves = 0;
    for (int32_t p = 0; p < nprofile; p++)
        nleaves += profile[p] == SW_NODE_LEAF;
    if (nleaves > 0 && !extents)
        return sw_error_set(err, SW_EINVAL, "missing extents"), NULL;
    sw_layout *l = layout_alloc(nprofile, nleaves, err);
    if (!l)
        return NULL;
    if (nprofile)
        memcpy(l->profile, profile, (size_t)nprofile);
    int64_t stride = 1;
    for (int32_t i = 0; i < nleaves; i++) {
        int64_t e = extents[i];
        l->extents[i] = e;
        l->strides[i] = stride;
        /* Only a stride that a later leaf needs may overflow; the size
         * check in layout_finish covers the rest. */
        if (i + 1 < nleaves && e >= 1 &&
            __builtin_mul_overflow(stride, e, &stride)) {
            sw_error_set(err, SW_EOVERFLOW, "layout size exceeds signed 64 bits");
            sw_free(l);
            return NULL;
        }
    }
    return layout_build(l, err);
}

void sw_layout_free(sw_layout *layout)
{
    sw_free(layout);
}

sw_layout *sw_layout_copy_into(void *mem, const sw_layout *layout)
{
    sw_layout *l = layout_place(mem, layout->nprofile, layout->nleaves);
    int32_t n = layout->nleaves;
    size_t arrays = 2 * (size_t)n * sizeof(int64_t) + (size_t)layout->nprofile;
    if (layout->extents == (int64_t *)(layout + 1) && layout->strides == layout->extents + n &&
        layout->profile == (uint8_t *)(layout->strides + n)) {
        memcpy(l->extents, layout->extents, arrays); /* one block: the arrays at once */
    } else { /* a caller's own struct over separate arrays */
        memcpy(l->extents, layout->extents, (size_t)n * sizeof(int64_t));
        memcpy(l->strides, layout->strides, (size_t)n * sizeof(int64_t));
        memcpy(l->profile, layout->profile, (size_t)layout->nprofile);
    }
    l->rank = layout->rank;
    l->depth = layout->depth;
    l->size = layout->size;
    l->cosize = layout->cosize;
    l->injective = __atomic_load_n(&layout->injective, __ATOMIC_RELAXED);
    return l;
}

sw_layout *sw_layout_copy(const sw_layout *layout, sw_error *err)
{
    sw_layout *l = layout_alloc(layout->nprofile, layout->nleaves, err);
    return l ? sw_layout_copy_into(l, layout) : NULL;
}

/* ---- injectivity (L-11) ------------------------------------------------- */

typedef struct { int64_t extent, stride; } leaf_pair;

/* Odometer over the leaves (all extent > 1): calls visit(index) for every
 * coordinate; stops early when visit answers non-zero. */
static int enumerate_indices(const leaf_pair *leaves, int32_t n, int64_t *coord,
                             int (*visit)(void *, int64_t), void *ctx)
{
    int64_t idx = 0;
    memset(coord, 0, (size_t)n * sizeof *coord);
    for (;;) {
        if (visit(ctx, idx))
            return 1;
        int32_t i = 0;
        while (i < n) {
            if (++coord[i] < leaves[i].extent) {
                idx += leaves[i].stride;
                break;
            }
            idx -= leaves[i].stride * (leaves[i].extent - 1);
            coord[i] = 0;
            i++;
        }
        if (i == n)
            return 0;
    }
}

static int visit_bitmap(void *ctx, int64_t idx)
{
    uint8_t *bits = ctx;
    uint8_t mask = (uint8_t)(1u << (idx & 7));
    if (bits[idx >> 3] & mask)
        return 1;
    bits[idx >> 3] |= mask;
    return 0;
}

typedef struct { int64_t *out; int64_t n; } collect_ctx;

static int visit_collect(void *ctx, int64_t idx)
{
    collect_ctx *c = ctx;
    c->out[c->n++] = idx;
    return 0;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int cmp_pair_stride(const void *a, const void *b)
{
    const leaf_pair *x = a, *y = b;
    return (x->stride > y->stride) - (x->stride < y->stride);
}

static void sort_by_stride(leaf_pair *leaves, int32_t n)
{
    if (n > 16) {
        qsort(leaves, (size_t)n, sizeof *leaves, cmp_pair_stride);
        return;
    }
    for (int32_t i = 1; i < n; i++) {
        leaf_pair x = leaves[i];
        int32_t j = i;
        for (; j > 0 && leaves[j - 1].stride > x.stride; j--)
            leaves[j] = leaves[j - 1];
        leaves[j] = x;
    }
}

/* The decisions L-11 allows without enumerating: 1 or 0, or -1 when only
 * enumeration can tell. `leaves` (nleaves entries) receives the extent > 1
 * leaves sorted by stride, *n their count. */
static int injective_decide(const sw_layout *l, leaf_pair *leaves, int32_t *n_out)
{
    int32_t n = 0;
    for (int32_t i = 0; i < l->nleaves; i++) {
        if (l->extents[i] == 1)
            continue;  /* a single coordinate never collides */
        if (l->strides[i] == 0)
            return 0;
        leaves[n].extent = l->extents[i];
        leaves[n].stride = l->strides[i];
        n++;
    }
    *n_out = n;
    if (l->size > l->cosize)
        return 0;
    sort_by_stride(leaves, n);
    /* Each stride at least the span of the smaller ones: a mixed-radix
     * number system with gaps, so distinct coordinates give distinct
     * indices. Spans stay below cosize, so no overflow. */
    int64_t span = 1;
    for (int32_t i = 0; i < n; i++) {
        if (leaves[i].stride < span)
            return -1;
        span += leaves[i].stride * (leaves[i].extent - 1);
    }
    return 1;
}

/* At construction: decide small layouts without allocating. */
static int injective_quick(const sw_layout *l)
{
    leaf_pair buf[16];
    int32_t n;
    if (l->nleaves > 16)
        return -1;
    return injective_decide(l, buf, &n);
}

/* Bounds of the enumerations an exact answer may need. The record of
 * visited indices (a bitmap or a sorted list, whichever is smaller) never
 * passes RECORD_MAX bytes; the search over coordinate differences needs no
 * memory and never passes WORK_MAX steps. Beyond both the answer is an
 * ENOMEM error, never a guess: memory is bounded whatever the layout's size
 * or cosize. The fuzz build lowers both so that every path, both sides of
 * each bound, is reached many times a second. */
#ifndef SW_INJECTIVE_RECORD_MAX_BYTES
#define SW_INJECTIVE_RECORD_MAX_BYTES (INT64_C(1) << 28)
#endif
#ifndef SW_INJECTIVE_WORK_MAX
#define SW_INJECTIVE_WORK_MAX (INT64_C(1) << 30)
#endif
#define RECORD_MAX ((int64_t)(SW_INJECTIVE_RECORD_MAX_BYTES))
#define WORK_MAX ((int64_t)(SW_INJECTIVE_WORK_MAX))

static int64_t gcd_i64(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Leaves sorted by stride; a leaf whose stride reaches the span of all the
 * smaller ones sits above them like a mixed-radix digit: it neither creates
 * nor removes a collision. Only the leaves up to the last one that does not
 * (its count is returned) need any further look. */
static int32_t interleaved_prefix(const leaf_pair *leaves, int32_t n)
{
    int64_t span = 1;
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        if (leaves[i].stride < span)
            m = i + 1;
        span += leaves[i].stride * (leaves[i].extent - 1);
    }
    return m;
}

/* Two leaves collide exactly when a*s_i == b*s_j for some 0 < a < e_j,
 * 0 < b < e_i; the smallest such pair is (s_j/g, s_i/g). Any colliding pair
 * makes the layout non-injective; with only two leaves it is the whole
 * answer. Returns 1 when some pair collides. */
static int some_pair_collides(const leaf_pair *leaves, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
        for (int32_t j = i + 1; j < n; j++) {
            int64_t g = gcd_i64(leaves[i].stride, leaves[j].stride);
            if (leaves[j].stride / g < leaves[i].extent &&
                leaves[i].stride / g < leaves[j].extent)
                return 1;
        }
    return 0;
}

/* Two coordinates collide exactly when their difference d (|d_i| < e_i,
 * not all 0) has sum(d_i * s_i) == 0. With leaf `big` solved for: some
 * difference of the other leaves sums to a multiple q * s_big with
 * |q| < e_big. Walks those differences (an odometer over [-(e-1), e-1]
 * per leaf, the sum kept incrementally; |sum| < cosize, so no overflow) in
 * no memory beyond `d`. Returns 1 on a collision. */
static int differences_collide(const leaf_pair *leaves, int32_t n, int32_t big, int64_t *d)
{
    int64_t sum = 0, sb = leaves[big].stride, eb = leaves[big].extent;
    for (int32_t i = 0; i < n; i++) {
        d[i] = i == big ? 0 : 1 - leaves[i].extent;
        sum += d[i] * leaves[i].stride;
    }
    for (;;) {
        /* The all-zero difference is the one coordinate against itself. */
        int64_t q = sum / sb;
        if (sum % sb == 0 && q < eb && -q < eb) {
            int zero = 1;
            for (int32_t i = 0; i < n && zero; i++)
                zero = d[i] == 0;
            if (!zero)
                return 1;
        }
        int32_t i = 0;
        for (; i < n; i++) {
            if (i == big)
                continue;
            if (d[i] < leaves[i].extent - 1) {
                d[i]++;
                sum += leaves[i].stride;
                break;
            }
            sum -= leaves[i].stride * d[i]; /* twice: 2 * s * d may overflow */
            sum -= leaves[i].stride * d[i];
            d[i] = -d[i];
        }
        if (i == n)
            return 0;
    }
}

/* Steps of differences_collide without `big`: prod(2e - 1) over the other
 * leaves, saturating at INT64_MAX. */
static int64_t difference_steps(const leaf_pair *leaves, int32_t n, int32_t big)
{
    int64_t steps = 1;
    for (int32_t i = 0; i < n; i++)
        if (i != big && __builtin_mul_overflow(steps, 2 * leaves[i].extent - 1, &steps))
            return INT64_MAX;
    return steps;
}

/* Enumerates the n leaves (strides already divided by their gcd, so the
 * bitmap is as small as it can be) with whichever record is smaller; the
 * caller checked it fits RECORD_MAX. */
static int enumerate_with_record(const leaf_pair *leaves, int32_t n, int64_t bitmap_bytes,
                                 int64_t list_bytes, sw_error *err)
{
    int64_t *coord = sw_malloc((size_t)n * sizeof(int64_t));
    void *record = bitmap_bytes <= list_bytes ? sw_calloc((size_t)bitmap_bytes, 1)
                                              : sw_malloc((size_t)list_bytes);
    int result = -1;
    if (!coord || !record) {
        sw_error_set(err, SW_ENOMEM, "out of memory checking injectivity");
    } else if (bitmap_bytes <= list_bytes) {
        result = !enumerate_indices(leaves, n, coord, visit_bitmap, record);
    } else {
        collect_ctx c = {record, 0};
        enumerate_indices(leaves, n, coord, visit_collect, &c);
        qsort(c.out, (size_t)c.n, sizeof(int64_t), cmp_i64);
        result = 1;
        for (int64_t k = 1; k < c.n; k++)
            if (c.out[k] == c.out[k - 1]) {
                result = 0;
                break;
            }
    }
    sw_free(record);
    sw_free(coord);
    return result;
}

/* The cheaper exact enumeration within its bound: over coordinate
 * differences (no memory) when that takes fewer steps than there are
 * coordinates or when no record fits, else over the coordinates with a
 * record (at most 2^31 steps for a bitmap within the default cap). */
static int enumerate_exactly(leaf_pair *leaves, int32_t n, int64_t size, int64_t cosize,
                             sw_error *err)
{
    int32_t big = 0;
    for (int32_t i = 1; i < n; i++)
        if (leaves[i].extent > leaves[big].extent)
            big = i;
    int64_t steps = difference_steps(leaves, n, big);
    int64_t bitmap_bytes = cosize / 8 + 1, list_bytes;
    if (__builtin_mul_overflow(size, (int64_t)sizeof(int64_t), &list_bytes))
        list_bytes = INT64_MAX;
    int64_t need = bitmap_bytes < list_bytes ? bitmap_bytes : list_bytes;
    if (steps <= WORK_MAX && (steps <= size || need > RECORD_MAX)) {
        int64_t *d = sw_malloc((size_t)n * sizeof(int64_t));
        if (!d) {
            sw_error_set(err, SW_ENOMEM, "out of memory checking injectivity");
            return -1;
        }
        int result = !differences_collide(leaves, n, big, d);
        sw_free(d);
        return result;
    }
    if (need > RECORD_MAX) {
        sw_error_set(err, SW_ENOMEM,
                     "deciding whether this layout maps distinct coordinates to "
                     "distinct indices needs %lld MiB, above the limit of %lld MiB; "
                     "its strides interleave over %lld coordinates",
                     (long long)((need + (1 << 20) - 1) >> 20),
                     (long long)((RECORD_MAX + (1 << 20) - 1) >> 20), (long long)size);
        return -1;
    }
    return enumerate_with_record(leaves, n, bitmap_bytes, list_bytes, err);
}

/* L-11 exactly, in memory that does not grow with cosize: the quick
 * decisions, then only the interleaved leaves (the mixed-radix ones above
 * them cannot change the answer), a pairwise test that settles every
 * collision between two leaves (and the whole question for two), and the
 * cheaper of two bounded enumerations of the remaining leaves. */
static int injective_compute(const sw_layout *l, sw_error *err)
{
    leaf_pair *leaves = sw_malloc((size_t)l->nleaves * 2 * sizeof(int64_t) + 1);
    int result;
    int32_t n = 0;
    if (!leaves) {
        sw_error_set(err, SW_ENOMEM, "out of memory checking injectivity");
        return -1;
    }
    result = injective_decide(l, leaves, &n);
    if (result >= 0)
        goto done;
    n = interleaved_prefix(leaves, n);
    if (some_pair_collides(leaves, n)) {
        result = 0;
        goto done;
    }
    if (n <= 2) {
        result = 1;
        goto done;
    }
    /* Scaling every stride by 1/g maps collisions to collisions. The
     * prefix's size divides the layout's, its cosize is below the layout's:
     * neither overflows. */
    int64_t g = 0, size = 1, cosize = 1;
    for (int32_t i = 0; i < n; i++)
        g = gcd_i64(leaves[i].stride, g);
    for (int32_t i = 0; i < n; i++) {
        leaves[i].stride /= g;
        size *= leaves[i].extent;
        cosize += leaves[i].stride * (leaves[i].extent - 1);
    }
    result = enumerate_exactly(leaves, n, size, cosize, err);
done:
    sw_free(leaves);
    return result;
}

/* Threads may ask at once (the binding enumerates without the GIL): the
 * cache is read and written atomically; racing computations agree. */
int sw_layout_is_injective(sw_layout *layout, sw_error *err)
{
    int r = __atomic_load_n(&layout->injective, __ATOMIC_RELAXED);
    if (r < 0) {
        r = injective_compute(layout, err);
        if (r >= 0)
            __atomic_store_n(&layout->injective, r, __ATOMIC_RELAXED);
    }
    return r;
}

/* ---- indexing ----------------------------------------------------------- */

sw_status sw_layout_index(const sw_layout *layout, int64_t k, int64_t *out,
                          sw_error *err)
{
    if (k < 0 || k >= layout->size)
        return sw_error_set(err, SW_EINVAL,
                            "ordinal %lld is outside [0, %lld)", (long long)k,
                            (long long)layout->size);
    int64_t idx = 0;
    for (int32_t i = 0; i < layout->nleaves; i++) {
        int64_t e = layout->extents[i];
        idx += (k % e) * layout->strides[i];
        k /= e;
    }
    *out = idx;
    return SW_OK;
}

/* ---- building from pieces ----------------------------------------------- */

typedef struct {
    const uint8_t *profile;
    int32_t nprofile;
    const int64_t *extents, *strides;
    int32_t nleaves;
} piece;

static const uint8_t PUSH_MARK = SW_NODE_PUSH, POP_MARK = SW_NODE_POP;

static sw_layout *assemble(const piece *pieces, int32_t npieces, sw_error *err)
{
    int64_t np = 0, nl = 0;
    for (int32_t i = 0; i < npieces; i++) {
        np += pieces[i].nprofile;
        nl += pieces[i].nleaves;
    }
    if (np > INT32_MAX)
        return sw_error_set(err, SW_EOVERFLOW, "layout has too many modes"), NULL;
    sw_layout *l = layout_alloc((int32_t)np, (int32_t)nl, err);
    if (!l)
        return NULL;
    int32_t p = 0, leaf = 0;
    for (int32_t i = 0; i < npieces; i++) {
        const piece *pc = &pieces[i];
        if (pc->nprofile)
            memcpy(l->profile + p, pc->profile, (size_t)pc->nprofile);
        if (pc->nleaves) {
            memcpy(l->extents + leaf, pc->extents, (size_t)pc->nleaves * 8);
            memcpy(l->strides + leaf, pc->strides, (size_t)pc->nleaves * 8);
        }
        p += pc->nprofile;
        leaf += pc->nleaves;
    }
    return layout_build(l, err);
}

static piece whole(const sw_layout *l)
{
    piece pc = {l->profile, l->nprofile, l->extents, l->strides, l->nleaves};
    return pc;
}

int32_t sw_layout_mode_end(const uint8_t *profile, int32_t p, int32_t *nleaves)
{
    int32_t level = 0, leaves = 0;
    do {
        uint8_t m = profile[p++];
        if (m == SW_NODE_LEAF)
            leaves++;
        else if (m == SW_NODE_PUSH)
            level++;
        else
            level--;
    } while (level > 0);
    if (nleaves)
        *nleaves = leaves;
    return p;
}

/* The piece for the top-level mode starting at profile[*p] / leaf *leaf;
 * advances both past it. One scan step shared by top_mode and top_modes. */
static piece next_mode(const sw_layout *l, int32_t *p, int32_t *leaf)
{
    int32_t start = *p, start_leaf = *leaf, nleaves;
    *p = sw_layout_mode_end(l->profile, start, &nleaves);
    *leaf += nleaves;
    piece pc = {l->profile + start, *p - start, l->extents + start_leaf,
                l->strides + start_leaf, *leaf - start_leaf};
    return pc;
}

/* The piece covering top-level mode i (found by one scan). */
static piece top_mode(const sw_layout *l, int32_t i)
{
    int32_t p = 0, leaf = 0;
    for (int32_t mode = 0;; mode++) {
        piece pc = next_mode(l, &p, &leaf);
        if (mode == i)
            return pc;
    }
}

/* Pieces for every top-level mode, in order. `out` holds rank entries. */
static void top_modes(const sw_layout *l, piece *out)
{
    int32_t p = 0, leaf = 0;
    for (int32_t mode = 0; mode < l->rank; mode++)
        out[mode] = next_mode(l, &p, &leaf);
}

sw_layout *sw_layout_mode(const sw_layout *layout, int32_t i, sw_error *err)
{
    if (i < 0 || i >= layout->rank)
        return sw_error_set(err, SW_ERANGE, "mode %d is out of range for a layout of rank %d",
                            (int)i, (int)layout->rank), NULL;
    piece pc = top_mode(layout, i);
    if (pc.profile[0] == SW_NODE_PUSH) {  /* its children become top-level */
        pc.profile++;
        pc.nprofile -= 2;
    }
    return assemble(&pc, 1, err);
}

sw_layout *sw_layout_select(const sw_layout *layout, const int32_t *modes,
                            int32_t n, sw_error *err)
{
    piece *all = sw_malloc(((size_t)layout->rank + (size_t)n) * sizeof(piece));
    if (!all)
        return sw_error_set(err, SW_ENOMEM, "out of memory"), NULL;
    piece *chosen = all + layout->rank;
    sw_layout *out = NULL;
    top_modes(layout, all);
    for (int32_t j = 0; j < n; j++) {
        if (modes[j] < 0 || modes[j] >= layout->rank) {
            sw_error_set(err, SW_ERANGE, "mode %d is out of range for a layout of rank %d",
                         (int)modes[j], (int)layout->rank);
            goto done;
        }
        chosen[j] = all[modes[j]];
    }
    out = assemble(chosen, n, err);
done:
    sw_free(all);
    return out;
}

sw_layout *sw_layout_slice(const sw_layout *layout, int32_t start, int32_t stop,
                           sw_error *err)
{
    if (start < 0)
        start = 0;
    if (stop > layout->rank)
        stop = layout->rank;
    if (stop <= start)
        return assemble(NULL, 0, err);
    piece *all = sw_malloc((size_t)layout->rank * sizeof(piece));
    if (!all)
        return sw_error_set(err, SW_ENOMEM, "out of memory"), NULL;
    top_modes(layout, all);
    sw_layout *out = assemble(all + start, stop - start, err);
    sw_free(all);
    return out;
}

sw_layout *sw_layout_permute(const sw_layout *layout, const int32_t *order,
                             int32_t n, sw_error *err)
{
    if (n != layout->rank)
        return sw_error_set(err, SW_EINVAL,
                            "permutation has %d entries for rank %d", (int)n,
                            (int)layout->rank), NULL;
    uint8_t *seen = sw_calloc((size_t)n + 1, 1);
    if (!seen)
        return sw_error_set(err, SW_ENOMEM, "out of memory"), NULL;
    for (int32_t j = 0; j < n; j++) {
        if (order[j] < 0 || order[j] >= n) {
            sw_error_set(err, SW_EINVAL,
                         "permutation entry %d is outside [0, %d)", (int)order[j],
                         (int)n);
            sw_free(seen);
            return NULL;
        }
        if (seen[order[j]]++) {
            sw_error_set(err, SW_EINVAL, "permutation repeats entry %d",
                         (int)order[j]);
            sw_free(seen);
            return NULL;
        }
    }
    sw_free(seen);
    return sw_layout_select(layout, order, n, err);
}

sw_layout *sw_layout_concat(const sw_layout *a, const sw_layout *b,
                            sw_error *err)
{
    piece pcs[2] = {whole(a), whole(b)};
    return assemble(pcs, 2, err);
}

int sw_layout_is_leaf(const sw_layout *layout)
{
    return layout->nprofile == 0 ||
           (layout->nprofile == 1 && layout->profile[0] == SW_NODE_LEAF);
}

sw_layout *sw_layout_append(const sw_layout *a, const sw_layout *b,
                            sw_error *err)
{
    if (sw_layout_is_leaf(b))
        return sw_layout_concat(a, b, err);
    piece push = {&PUSH_MARK, 1, NULL, NULL, 0};
    piece pop = {&POP_MARK, 1, NULL, NULL, 0};
    piece pcs[4] = {whole(a), push, whole(b), pop};
    return assemble(pcs, 4, err);
}

sw_layout *sw_layout_broadcast(const sw_layout *layout, int32_t nprofile,
                               const uint8_t *profile,
                               const int64_t *extents, sw_error *err)
{
    if (nprofile != layout->nprofile ||
        (nprofile && memcmp(profile, layout->profile, (size_t)nprofile) != 0))
        return sw_error_set(err, SW_EINVAL,
                            "broadcast target must have the layout's profile "
                            "(same nesting and leaf positions)"), NULL;
    sw_layout *l = layout_alloc(nprofile, layout->nleaves, err);
    if (!l)
        return NULL;
    if (nprofile)
        memcpy(l->profile, profile, (size_t)nprofile);
    for (int32_t i = 0; i < layout->nleaves; i++) {
        int64_t e = layout->extents[i], t = extents[i];
        l->extents[i] = t;
        if (e == t) {
            l->strides[i] = layout->strides[i];
        } else if (e == 1) {
            l->strides[i] = 0;
        } else {
            sw_error_set(err, SW_EINVAL,
                         "cannot broadcast leaf %d of extent %lld to extent %lld "
                         "(only extent 1 widens)",
                         (int)i, (long long)e, (long long)t);
            sw_free(l);
            return NULL;
        }
    }
    return layout_build(l, err);
}

int sw_layout_same_shape(const sw_layout *a, const sw_layout *b)
{
    if (a == b)
        return 1;
    return a->nprofile == b->nprofile && a->nleaves == b->nleaves &&
           memcmp(a->profile, b->profile, (size_t)a->nprofile) == 0 &&
           memcmp(a->extents, b->extents, (size_t)a->nleaves * sizeof(int64_t)) == 0;
}

int sw_layout_equal(const sw_layout *a, const sw_layout *b)
{
    return sw_layout_same_shape(a, b) &&
           memcmp(a->strides, b->strides, (size_t)a->nleaves * sizeof(int64_t)) == 0;
}
