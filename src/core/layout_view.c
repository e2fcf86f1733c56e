/* Views of layouts (contract-core V-5..V-8): slice keys with steps and
 * integer entries, checked permute, reshape by the evenly-spaced rule and
 * broadcast, over one or more planes of one shape. The tensor API and the
 * Python binding both build their views here, so the rules live once. */
#include <string.h>

#include "strideweave/alloc.h"
#include "strideweave/layout_view.h"

/* ---- shared ----------------------------------------------------------- */

/* Scratch entries kept on the stack: views run in loops, and real layouts
 * have few modes; more go to the heap. */
#define SMALL_VIEW 32

/* Record the refusal in `fault` (may be NULL) and `err`; returns `code`. */
#define REFUSE(fault, reason_, entry_, plane_, size_, err, code, ...)                        \
    (fault_set((fault), (reason_), (entry_), (plane_), (size_)),                            \
     sw_error_set((err), (code), __VA_ARGS__))

static void fault_set(sw_view_fault *fault, sw_view_reason reason, int32_t entry,
                      int32_t plane, int64_t mode_size)
{
    if (fault) {
        fault->reason = reason;
        fault->entry = entry;
        fault->plane = plane;
        fault->mode_size = mode_size;
    }
}

static const char *plural_s(long long n) { return n == 1 ? "" : "s"; }

/* The arguments every view takes: planes present and of one shape (T-6
 * makes this so for a tensor), and somewhere to put the results. */
static sw_status view_args(const char *fn, const sw_layout *const *planes, int32_t nplanes,
                           sw_layout **out, sw_view_fault *fault, sw_error *err)
{
    fault_set(fault, SW_VIEW_OK, -1, -1, 0);
    if (!planes || nplanes < 1 || !out)
        return sw_error_set(err, SW_ETYPE, "%s: planes and out must not be NULL", fn);
    for (int32_t i = 0; i < nplanes; i++) {
        if (!planes[i])
            return sw_error_set(err, SW_ETYPE, "%s: layout %d is NULL", fn, (int)i);
        if (!sw_layout_same_shape(planes[0], planes[i]))
            return sw_error_set(err, SW_EINVAL, "%s: layout %d has another shape than layout 0",
                                fn, (int)i);
    }
    return SW_OK;
}

/* One plane's view, or NULL with err (never NULL here) and fault filled. */
typedef sw_layout *(*plane_view)(const sw_layout *plane, int32_t k, const void *arg,
                                 sw_view_fault *fault, sw_error *err);

/* out[k] := view(planes[k]) for every plane, once all checks passed; on a
 * failure the views built so far are freed and out is left NULL. */
static sw_status build_planes(const sw_layout *const *planes, int32_t nplanes, plane_view view,
                              const void *arg, sw_layout **out, sw_view_fault *fault,
                              sw_error *err)
{
    sw_error own; /* the status survives a caller passing no err */
    sw_error *e = err ? err : &own;
    for (int32_t k = 0; k < nplanes; k++) {
        out[k] = view(planes[k], k, arg, fault, e);
        if (!out[k]) {
            for (int32_t i = 0; i < k; i++) {
                sw_layout_free(out[i]);
                out[i] = NULL;
            }
            return e->code;
        }
    }
    return SW_OK;
}

/* ---- slice (V-5) --------------------------------------------------------- */

/* The layout being built: one profile and extents, strides per plane. */
typedef struct {
    int32_t nplanes, np, nl;
    uint8_t *profile;
    int64_t *extents;
    int64_t *strides; /* nplanes rows of (nleaves + 1) */
    int32_t row;
} slice_build;

/* One top-level mode in the source: where it is, how big. */
typedef struct {
    int32_t m, p, q, leaf, nleaves;
    int64_t size;
    int is_leaf;
} mode_at;

/* Python's normalization of a positive-step range on `size` (the explicit
 * start past the end excepted, which the caller refuses first). */
static void normalize_range(const sw_slice_entry *e, int64_t size, int64_t *start,
                            int64_t *stop)
{
    *start = e->has_start ? e->start : 0;
    *stop = e->has_stop ? e->stop : size;
    if (*start < 0 && (*start += size) < 0)
        *start = 0;
    if (*stop < 0 && (*stop += size) < 0)
        *stop = 0;
    else if (*stop > size)
        *stop = size;
}

/* Integer entry: the scalar index of ordinal `i` of the mode in plane 0
 * (first sub-mode fastest); bounded by the cosize, so it cannot overflow. */
static int64_t index_in_mode(const sw_layout *l, const mode_at *md, int64_t i)
{
    int64_t at = 0;
    for (int32_t j = 0; j < md->nleaves; j++) {
        int64_t x = l->extents[md->leaf + j];
        at += (i % x) * l->strides[md->leaf + j];
        i /= x;
    }
    return at;
}

/* Keep the whole mode (nested, or a leaf range). */
static void keep_mode(slice_build *b, const sw_layout *const *planes, const mode_at *md)
{
    memcpy(b->profile + b->np, planes[0]->profile + md->p, (size_t)(md->q - md->p));
    b->np += md->q - md->p;
    for (int32_t j = 0; j < md->nleaves; j++) {
        b->extents[b->nl] = planes[0]->extents[md->leaf + j];
        for (int32_t k = 0; k < b->nplanes; k++)
            b->strides[k * b->row + b->nl] = planes[k]->strides[md->leaf + j];
        b->nl++;
    }
}

/* A leaf range of `count` coordinates stepping by `step`: strides times
 * step per plane; one coordinate never takes the step, so any stride does
 * (overflow then is no refusal). */
static sw_status step_leaf(slice_build *b, const sw_layout *const *planes, int32_t nplanes,
                           const mode_at *md, int64_t count, int64_t step,
                           sw_view_fault *fault, sw_error *err)
{
    for (int32_t k = 0; k < nplanes; k++) {
        int64_t s = planes[k]->strides[md->leaf], r;
        if (__builtin_mul_overflow(s, step, &r)) {
            if (count == 1)
                r = s;
            else
                return REFUSE(fault, SW_VIEW_STRIDE_OVERFLOW, md->m, k, md->size, err,
                              SW_EOVERFLOW,
                              "slice for mode %d: stride times step exceeds 64 bits",
                              (int)md->m);
        }
        b->strides[k * b->row + b->nl] = r;
    }
    b->profile[b->np++] = SW_NODE_LEAF;
    b->extents[b->nl++] = count;
    return SW_OK;
}

/* A range entry on mode `md`: its checks, and the mode kept in `b`.
 * *first is the first selected coordinate. */
static sw_status slice_range(const sw_slice_entry *e, slice_build *b,
                             const sw_layout *const *planes, int32_t nplanes, const mode_at *md,
                             int64_t *first, sw_view_fault *fault, sw_error *err)
{
    int m = (int)md->m;
    if (e->step < 1)
        return REFUSE(fault, SW_VIEW_STEP, md->m, -1, md->size, err, SW_EINVAL,
                      "slice for mode %d: step must be positive, not %lld", m,
                      (long long)e->step);
    if (e->has_start && e->start >= md->size)
        return REFUSE(fault, SW_VIEW_START, md->m, -1, md->size, err, SW_EINVAL,
                      "slice start %lld is out of range for mode %d of size %lld",
                      (long long)e->start, m, (long long)md->size);
    int64_t start, stop;
    normalize_range(e, md->size, &start, &stop);
    *first = start;
    if (!md->is_leaf) {
        if (start != 0 || stop != md->size || e->step != 1)
            return REFUSE(fault, SW_VIEW_NESTED_PART, md->m, -1, md->size, err, SW_EINVAL,
                          "mode %d is nested, so a slice must take all of it (':' or "
                          "'0:%lld'), not %lld:%lld:%lld; index its sub-modes with a nested "
                          "key instead",
                          m, (long long)md->size, (long long)start, (long long)stop,
                          (long long)e->step);
        keep_mode(b, planes, md);
        return SW_OK;
    }
    if (stop <= start)
        return REFUSE(fault, SW_VIEW_EMPTY, md->m, -1, md->size, err, SW_EINVAL,
                      "slice %lld:%lld:%lld for mode %d of size %lld selects no index: it "
                      "must select at least one index",
                      (long long)start, (long long)stop, (long long)e->step, m,
                      (long long)md->size);
    int64_t count = (stop - start - 1) / e->step + 1; /* len(range(start, stop, step)) */
    return step_leaf(b, planes, nplanes, md, count, e->step, fault, err);
}

/* V-5 step 2, entry by entry, left to right, building into `b`.
 * *growth: plane 0's scalar index of the first selection. */
static sw_status slice_walk(const sw_layout *const *planes, int32_t nplanes,
                            const sw_slice_entry *key, int32_t n, slice_build *b,
                            int64_t *growth, sw_view_fault *fault, sw_error *err)
{
    const sw_layout *l = planes[0];
    mode_at md = {0};
    *growth = 0;
    for (md.m = 0; md.m < n; md.m++, md.p = md.q, md.leaf += md.nleaves) {
        const sw_slice_entry *e = &key[md.m];
        md.q = sw_layout_mode_end(l->profile, md.p, &md.nleaves);
        md.is_leaf = l->profile[md.p] == SW_NODE_LEAF;
        md.size = 1;
        for (int32_t j = 0; j < md.nleaves; j++)
            md.size *= l->extents[md.leaf + j]; /* bounded by l->size */
        int64_t first = 0;
        if (e->kind == SW_SLICE_INDEX) {
            if (e->index < 0 || e->index >= md.size)
                return REFUSE(fault, SW_VIEW_INDEX, md.m, -1, md.size, err, SW_EINVAL,
                              "index %lld is out of range for mode %d of size %lld%s",
                              (long long)e->index, (int)md.m, (long long)md.size,
                              e->index < 0 ? ": indices do not wrap around" : "");
            first = e->index;
            *growth += index_in_mode(l, &md, first);
        } else if (e->kind == SW_SLICE_RANGE) {
            sw_status st = slice_range(e, b, planes, nplanes, &md, &first, fault, err);
            if (st != SW_OK)
                return st;
            if (md.is_leaf)
                *growth += first * l->strides[md.leaf]; /* < cosize */
        } else {
            return sw_error_set(err, SW_ETYPE, "slice key entry %d has an unknown kind %d",
                                (int)md.m, (int)e->kind);
        }
        /* Several planes: the last check of this entry (V-5 step 2). */
        if (nplanes > 1 && first != 0)
            return REFUSE(fault, SW_VIEW_NOT_AT_ORIGIN, md.m, -1, md.size, err, SW_ENOTSUP,
                          "slice key for mode %d: a tensor with %d planes can only be sliced "
                          "by selections that start at coordinate 0",
                          (int)md.m, (int)nplanes);
    }
    return SW_OK;
}

/* Plane k of a built slice. */
static sw_layout *sliced_plane(const sw_layout *plane, int32_t k, const void *arg,
                               sw_view_fault *fault, sw_error *err)
{
    const slice_build *b = arg;
    (void)plane, (void)fault;
    return sw_layout_new(b->np, b->profile, b->extents, b->strides + (size_t)k * b->row, err);
}

sw_status sw_layout_view_slice(const sw_layout *const *planes, int32_t nplanes,
                               const sw_slice_entry *key, int32_t n, sw_layout **out,
                               int64_t *growth, sw_view_fault *fault, sw_error *err)
{
    sw_status st = view_args("sw_layout_view_slice", planes, nplanes, out, fault, err);
    if (st != SW_OK)
        return st;
    const sw_layout *l = planes[0];
    if (n != l->rank)
        return REFUSE(fault, SW_VIEW_COUNT, -1, -1, 0, err, SW_EINVAL,
                      "slice key has %d entr%s but the layout has %d top-level mode%s", (int)n,
                      n == 1 ? "y" : "ies", (int)l->rank, plural_s(l->rank));
    if (n > 0 && !key)
        return sw_error_set(err, SW_ETYPE, "sw_layout_view_slice: key must not be NULL");
    slice_build b = {.nplanes = nplanes, .row = l->nleaves + 1};
    size_t np = (size_t)l->nprofile + 1, row = (size_t)b.row;
    /* one block: extents, then the strides rows, then the profile; on the
     * stack for the usual few modes (views are called in loops) */
    int64_t small[SMALL_VIEW], *block = small;
    size_t bytes = sizeof(int64_t) * row * (1 + (size_t)nplanes) + np;
    if (bytes > sizeof small && !(block = sw_malloc(bytes)))
        return sw_error_set(err, SW_ENOMEM, "sw_layout_view_slice: out of memory");
    b.extents = block;
    b.strides = block + row;
    b.profile = (uint8_t *)(block + row * (1 + (size_t)nplanes));
    int64_t g = 0;
    st = slice_walk(planes, nplanes, key, n, &b, &g, fault, err);
    if (st == SW_OK)
        st = build_planes(planes, nplanes, sliced_plane, &b, out, fault, err);
    if (block != small)
        sw_free(block);
    if (st == SW_OK && growth)
        *growth = g;
    return st;
}

/* ---- permute (V-6) --------------------------------------------------------- */

typedef struct {
    const int32_t *modes;
    int32_t n;
} permute_arg;

static sw_layout *permuted_plane(const sw_layout *plane, int32_t k, const void *arg,
                                 sw_view_fault *fault, sw_error *err)
{
    const permute_arg *a = arg;
    (void)k, (void)fault;
    return sw_layout_select(plane, a->modes, a->n, err);
}

/* Entries checked left to right into modes[]. */
static sw_status check_order(const int64_t *order, int32_t n, int32_t *modes,
                             sw_view_fault *fault, sw_error *err)
{
    uint8_t small[SMALL_VIEW] = {0}, *seen = small;
    if (n > SMALL_VIEW && !(seen = sw_calloc((size_t)n, 1)))
        return sw_error_set(err, SW_ENOMEM, "sw_layout_view_permute: out of memory");
    sw_status st = SW_OK;
    for (int32_t j = 0; j < n && st == SW_OK; j++) {
        if (order[j] < 0 || order[j] >= n)
            st = REFUSE(fault, SW_VIEW_ORDER_RANGE, j, -1, 0, err, SW_EINVAL,
                        "permute order entry %lld is outside [0, %d)", (long long)order[j],
                        (int)n);
        else if (seen[order[j]]++)
            st = REFUSE(fault, SW_VIEW_ORDER_REPEAT, j, -1, 0, err, SW_EINVAL,
                        "permute order repeats mode %lld", (long long)order[j]);
        else
            modes[j] = (int32_t)order[j];
    }
    if (seen != small)
        sw_free(seen);
    return st;
}

sw_status sw_layout_view_permute(const sw_layout *const *planes, int32_t nplanes,
                                 const int64_t *order, int32_t n, sw_layout **out,
                                 sw_view_fault *fault, sw_error *err)
{
    sw_status st = view_args("sw_layout_view_permute", planes, nplanes, out, fault, err);
    if (st != SW_OK)
        return st;
    int32_t rank = planes[0]->rank;
    if (n != rank)
        return REFUSE(fault, SW_VIEW_COUNT, -1, -1, 0, err, SW_EINVAL,
                      "permute order has %d entr%s but the layout has rank %d", (int)n,
                      n == 1 ? "y" : "ies", (int)rank);
    if (n > 0 && !order)
        return sw_error_set(err, SW_ETYPE, "sw_layout_view_permute: order must not be NULL");
    int32_t small[SMALL_VIEW], *modes = small;
    if (n > SMALL_VIEW && !(modes = sw_malloc(sizeof(int32_t) * (size_t)n)))
        return sw_error_set(err, SW_ENOMEM, "sw_layout_view_permute: out of memory");
    st = check_order(order, n, modes, fault, err);
    if (st == SW_OK)
        st = build_planes(planes, nplanes, permuted_plane, &(permute_arg){modes, n}, out, fault,
                          err);
    if (modes != small)
        sw_free(modes);
    return st;
}

/* ---- reshape (V-7) --------------------------------------------------------- */

/* The reshape base b of `l`: ordinals 0, 1, 2, ... sit at 0, b, 2b, ...
 * (extent-1 leaves ignored). 0 when they do not. */
static int reshape_base(const sw_layout *l, int64_t *base)
{
    int first = 1, overflowed = 0;
    int64_t expect = 0;
    *base = 1;
    for (int32_t j = 0; j < l->nleaves; j++) {
        int64_t e = l->extents[j], s = l->strides[j];
        if (e == 1)
            continue;
        if (first) {
            *base = s;
            first = 0;
        } else if (overflowed || s != expect) {
            return 0;
        }
        overflowed = __builtin_mul_overflow(s, e, &expect);
    }
    return 1;
}

/* A reshape target: the caller's shape, read without building a layout
 * (the views' layouts are built, and the shape validated, once, per plane). */
typedef struct {
    int32_t nprofile, nleaves;
    const uint8_t *profile;
    const int64_t *extents;
    int64_t size;
    const int64_t *bases;
} reshape_arg;

/* Leaves and size of the target; extents >= 1, the size within int64. */
static sw_status read_target(reshape_arg *a, sw_error *err)
{
    if (a->nprofile < 0 || (a->nprofile > 0 && !a->profile))
        return sw_error_set(err, SW_EINVAL, "reshape: bad target profile");
    a->nleaves = 0;
    for (int32_t p = 0; p < a->nprofile; p++)
        a->nleaves += a->profile[p] == SW_NODE_LEAF;
    if (a->nleaves > 0 && !a->extents)
        return sw_error_set(err, SW_EINVAL, "reshape: missing target extents");
    a->size = 1;
    for (int32_t j = 0; j < a->nleaves; j++) {
        if (a->extents[j] < 1)
            return sw_error_set(err, SW_EINVAL, "reshape: target extents must be >= 1, not %lld",
                                (long long)a->extents[j]);
        if (__builtin_mul_overflow(a->size, a->extents[j], &a->size))
            return sw_error_set(err, SW_EOVERFLOW, "reshape: target size exceeds 64 bits");
    }
    return SW_OK;
}

/* The target's canonical strides times plane k's base, or NULL (err
 * filled). */
static sw_layout *reshaped_plane(const sw_layout *plane, int32_t k, const void *arg,
                                 sw_view_fault *fault, sw_error *err)
{
    const reshape_arg *a = arg;
    (void)plane;
    int64_t small[SMALL_VIEW], *strides = small;
    if (a->nleaves > SMALL_VIEW &&
        !(strides = sw_malloc(sizeof(int64_t) * (size_t)a->nleaves))) {
        sw_error_set(err, SW_ENOMEM, "reshape: out of memory");
        return NULL;
    }
    int64_t acc = 1;
    sw_layout *out = NULL;
    for (int32_t j = 0; j < a->nleaves; j++) {
        if (__builtin_mul_overflow(acc, a->bases[k], &strides[j])) {
            REFUSE(fault, SW_VIEW_STRIDE_OVERFLOW, -1, k, 0, err, SW_EOVERFLOW,
                   "reshape strides exceed 64 bits");
            goto done;
        }
        acc *= a->extents[j]; /* bounded by the size */
    }
    out = sw_layout_new(a->nprofile, a->profile, a->extents, strides, err);
done:
    if (strides != small)
        sw_free(strides);
    return out;
}

/* Size, then each plane's spacing into bases[]. */
static sw_status check_reshape(const sw_layout *const *planes, int32_t nplanes,
                               const reshape_arg *target, int64_t *bases, sw_view_fault *fault,
                               sw_error *err)
{
    int64_t size = planes[0]->size;
    if (target->size != size)
        return REFUSE(fault, SW_VIEW_SIZE, -1, -1, 0, err, SW_EINVAL,
                      "reshape to a shape of size %lld is impossible: the tensor has %lld "
                      "element%s",
                      (long long)target->size, (long long)size, plural_s(size));
    for (int32_t k = 0; k < nplanes; k++)
        if (!reshape_base(planes[k], &bases[k]))
            return REFUSE(fault, SW_VIEW_SPACING, -1, k, 0, err, SW_EINVAL,
                          "reshape needs the elements of layout %d evenly spaced in "
                          "first-mode-fastest order, and it does not place them so (a "
                          "permuted view, for example); copy the values first",
                          (int)k);
    return SW_OK;
}

sw_status sw_layout_view_reshape(const sw_layout *const *planes, int32_t nplanes,
                                 int32_t nprofile, const uint8_t *profile,
                                 const int64_t *extents, sw_layout **out,
                                 sw_view_fault *fault, sw_error *err)
{
    sw_status st = view_args("sw_layout_view_reshape", planes, nplanes, out, fault, err);
    reshape_arg target = {.nprofile = nprofile, .profile = profile, .extents = extents};
    if (st == SW_OK)
        st = read_target(&target, err);
    if (st != SW_OK)
        return st;
    int64_t small[2], *bases = small;
    if (nplanes > 2 && !(bases = sw_malloc(sizeof(int64_t) * (size_t)nplanes)))
        return sw_error_set(err, SW_ENOMEM, "reshape: out of memory");
    target.bases = bases;
    st = check_reshape(planes, nplanes, &target, bases, fault, err);
    if (st == SW_OK)
        st = build_planes(planes, nplanes, reshaped_plane, &target, out, fault, err);
    if (bases != small)
        sw_free(bases);
    return st;
}

/* ---- broadcast (V-8) ------------------------------------------------------- */

typedef struct {
    int32_t nprofile;
    const uint8_t *profile;
    const int64_t *extents;
} broadcast_arg;

static sw_layout *broadcast_plane(const sw_layout *plane, int32_t k, const void *arg,
                                  sw_view_fault *fault, sw_error *err)
{
    const broadcast_arg *a = arg;
    sw_layout *out = sw_layout_broadcast(plane, a->nprofile, a->profile, a->extents, err);
    if (!out && err->code == SW_EINVAL)
        fault_set(fault, SW_VIEW_SHAPE, -1, k, 0);
    return out;
}

sw_status sw_layout_view_broadcast(const sw_layout *const *planes, int32_t nplanes,
                                   int32_t nprofile, const uint8_t *profile,
                                   const int64_t *extents, sw_layout **out,
                                   sw_view_fault *fault, sw_error *err)
{
    sw_status st = view_args("sw_layout_view_broadcast", planes, nplanes, out, fault, err);
    if (st != SW_OK)
        return st;
    return build_planes(planes, nplanes, broadcast_plane,
                        &(broadcast_arg){nprofile, profile, extents}, out, fault, err);
}

/* ---- one entry for every kind ------------------------------------------------ */

sw_status sw_layout_view(const sw_layout *const *planes, int32_t nplanes,
                         const sw_view_spec *spec, sw_layout **out, int64_t *growth,
                         sw_view_fault *fault, sw_error *err)
{
    if (growth)
        *growth = 0;
    if (!spec) {
        fault_set(fault, SW_VIEW_OK, -1, -1, 0);
        return sw_error_set(err, SW_ETYPE, "sw_layout_view: spec must not be NULL");
    }
    switch (spec->kind) {
    case SW_VIEW_KIND_SLICE:
        return sw_layout_view_slice(planes, nplanes, spec->key, spec->n, out, growth, fault,
                                    err);
    case SW_VIEW_KIND_PERMUTE:
        return sw_layout_view_permute(planes, nplanes, spec->order, spec->n, out, fault, err);
    case SW_VIEW_KIND_RESHAPE:
        return sw_layout_view_reshape(planes, nplanes, spec->n, spec->profile, spec->extents,
                                      out, fault, err);
    case SW_VIEW_KIND_BROADCAST:
        return sw_layout_view_broadcast(planes, nplanes, spec->n, spec->profile,
                                        spec->extents, out, fault, err);
    }
    fault_set(fault, SW_VIEW_OK, -1, -1, 0);
    return sw_error_set(err, SW_ETYPE, "sw_layout_view: unknown view kind %d", (int)spec->kind);
}
