/* Views of layouts: the arithmetic behind every tensor view (slice with
 * steps and integer indexing, permute, reshape, broadcast), computed once
 * here for the C tensor API and for the bindings.
 *
 * Each function views `nplanes` layouts of one shape (the same profile and
 * extents; strides may differ) with one argument: a tensor's value plane
 * and, for compound dtypes, its scale plane. A one-plane caller passes a
 * pointer to its one layout. Refusals are checked in one fixed order (the
 * contract's V-5..V-8) before anything is built, and reported through the
 * status, `err` and, when not NULL, `fault`: which rule refused, at which
 * key entry and plane. The message in `err` shows numbers only; a binding
 * that must show the user's own objects (an index object's repr) phrases
 * those refusals itself from `fault`.
 *
 * Ownership: inputs are borrowed for the call; on SW_OK the caller owns the
 * `nplanes` layouts written to `out` (sw_layout_free each); on a refusal
 * nothing is written to `out`. Threads: pure functions of their arguments,
 * thread-safe on layouts no thread frees meanwhile. */
#ifndef STRIDEWEAVE_LAYOUT_VIEW_H
#define STRIDEWEAVE_LAYOUT_VIEW_H

#include "strideweave/export.h"

#include <stdint.h>

#include "strideweave/layout.h"
#include "strideweave/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Which rule refused a view. */
typedef enum sw_view_reason {
    SW_VIEW_OK = 0,
    SW_VIEW_COUNT,           /* key / order length differs from the rank (SW_EINVAL) */
    SW_VIEW_INDEX,           /* integer outside [0, mode size); no wrap-around (SW_EINVAL) */
    SW_VIEW_STEP,            /* slice step below 1 (SW_EINVAL) */
    SW_VIEW_START,           /* explicit slice start >= mode size (SW_EINVAL) */
    SW_VIEW_EMPTY,           /* a leaf slice selecting no index (SW_EINVAL) */
    SW_VIEW_NESTED_PART,     /* a slice on a nested mode that is not all of it (SW_EINVAL) */
    SW_VIEW_STRIDE_OVERFLOW, /* stride times step, or a reshape stride, past int64 (SW_EOVERFLOW) */
    SW_VIEW_NOT_AT_ORIGIN,   /* several planes, a selection not starting at 0 (SW_ENOTSUP) */
    SW_VIEW_ORDER_RANGE,     /* permute entry outside [0, rank) (SW_EINVAL) */
    SW_VIEW_ORDER_REPEAT,    /* permute entry naming a mode twice (SW_EINVAL) */
    SW_VIEW_SIZE,            /* reshape target of another size (SW_EINVAL) */
    SW_VIEW_SPACING,         /* reshape of elements not evenly spaced (SW_EINVAL) */
    SW_VIEW_SHAPE            /* broadcast target the shape does not widen to (SW_EINVAL) */
} sw_view_reason;

typedef struct sw_view_fault {
    sw_view_reason reason;
    int32_t entry;     /* the key / order entry refused (its top-level mode), or -1 */
    int32_t plane;     /* the plane refused, or -1 when the rule is about all */
    int64_t mode_size; /* the refused mode's size (index, start, empty, nested), else 0 */
} sw_view_fault;

/* One entry of a slice key: what top-level mode `m` keeps. */
typedef enum sw_slice_kind {
    SW_SLICE_INDEX = 0, /* one coordinate: the mode is dropped */
    SW_SLICE_RANGE = 1  /* a range: the mode is kept */
} sw_slice_kind;

/* SW_SLICE_INDEX: `index` must be in [0, size of the mode) (no negative
 * wrap-around); for a nested mode it is the mode's own ordinal (first
 * sub-mode fastest). SW_SLICE_RANGE follows Python's slice normalization
 * on the mode's size: `has_start`/`has_stop` 0 mean "from the beginning" /
 * "to the end"; negative bounds count from the end and clamp at 0, a stop
 * past the end clamps to it, but an explicit start at or past the end is
 * refused (it would select nothing silently). `step` must be >= 1. A leaf
 * range keeps len(range(start, stop, step)) >= 1 coordinates; a nested mode
 * accepts only a range that is all of it with step 1. */
typedef struct sw_slice_entry {
    sw_slice_kind kind;
    int64_t index;
    int has_start, has_stop;
    int64_t start, stop, step;
} sw_slice_entry;

/* Slice (contract V-5): key entry m applies to top-level mode m, n must be
 * the rank. Kept modes keep their order. `*growth` (may be NULL) is the
 * scalar index, in plane 0, of the first selected coordinate: the view's
 * offset is the source's plus it. With several planes every selection must
 * start at coordinate 0 (SW_ENOTSUP after that entry's own checks), so
 * their offsets stay. Each entry is checked in full, left to right. */
SW_API sw_status sw_layout_view_slice(const sw_layout *const *planes, int32_t nplanes,
                                      const sw_slice_entry *key, int32_t n, sw_layout **out,
                                      int64_t *growth, sw_view_fault *fault, sw_error *err);
/* Permute (V-6, L-14): result mode j is source mode order[j]. n must be the
 * rank, then each entry in [0, rank) and none repeated, left to right. */
SW_API sw_status sw_layout_view_permute(const sw_layout *const *planes, int32_t nplanes,
                                        const int64_t *order, int32_t n, sw_layout **out,
                                        sw_view_fault *fault, sw_error *err);

/* Reshape (V-7) to the shape (nprofile, profile, extents) of the same size:
 * each plane's elements must sit evenly spaced in first-mode-fastest order
 * (ordinal k at k * b, extent-1 leaves ignored); the result is the target's
 * canonical strides times b. Checks: size, then spacing of each plane, then
 * stride overflow of each plane. */
SW_API sw_status sw_layout_view_reshape(const sw_layout *const *planes, int32_t nplanes,
                                        int32_t nprofile, const uint8_t *profile,
                                        const int64_t *extents, sw_layout **out,
                                        sw_view_fault *fault, sw_error *err);

/* Broadcast (V-8, L-12) to the shape (nprofile, profile, extents): the
 * profile must match and extent-1 leaves widen with stride 0. */
SW_API sw_status sw_layout_view_broadcast(const sw_layout *const *planes, int32_t nplanes,
                                          int32_t nprofile, const uint8_t *profile,
                                          const int64_t *extents, sw_layout **out,
                                          sw_view_fault *fault, sw_error *err);

/* ---- which source element each view element reads ------------------------ */

/* A view named by its kind and arguments, as the four functions above take
 * them: the form a caller keeps to map a view back onto its source later
 * (an autograd node does). The pointers are borrowed. */
typedef enum sw_view_kind {
    SW_VIEW_KIND_SLICE = 0, /* key[0..n) */
    SW_VIEW_KIND_PERMUTE,   /* order[0..n) */
    SW_VIEW_KIND_RESHAPE,   /* target shape: profile[0..n), extents */
    SW_VIEW_KIND_BROADCAST  /* target shape: profile[0..n), extents */
} sw_view_kind;

typedef struct sw_view_spec {
    sw_view_kind kind;
    int32_t n;
    const sw_slice_entry *key;
    const int64_t *order;
    const uint8_t *profile;
    const int64_t *extents;
} sw_view_spec;

/* The view `spec` of `nplanes` layouts in one call: the function above
 * that its kind names, with its checks, refusals and ownership (`*growth`,
 * which may be NULL, is set for a slice and 0 for the others). SW_ETYPE
 * for a NULL spec or an unknown kind. */
SW_API sw_status sw_layout_view(const sw_layout *const *planes, int32_t nplanes,
                                const sw_view_spec *spec, sw_layout **out, int64_t *growth,
                                sw_view_fault *fault, sw_error *err);

/* The view `spec` of a tensor with the shape of `source`, as a map: on
 * SW_OK, ordinals[k] is the ordinal (first-mode-fastest) of the source
 * element that view element k reads, for every k in [0, *count). Only the
 * source's shape counts, not its strides: the map is taken over the
 * canonical layout of that shape, so a broadcast view repeats ordinals, and
 * a source that itself repeats slots (stride 0) still gets one ordinal per
 * position. Refusals are the view's own (same status, `err`, `fault`), so
 * a reshape refuses only a size mismatch here; SW_ETYPE for a NULL source,
 * spec or count, or an unknown kind. `*count` is set to the view's size
 * whenever the view itself is valid; when it exceeds `capacity` nothing is
 * written to `ordinals` and the call returns SW_ERANGE, so a caller may ask
 * for the size first with capacity 0 (ordinals may then be NULL).
 *
 * Ownership: all inputs are borrowed; `ordinals` is caller-owned storage
 * of `capacity` entries. Threads: a pure function of its arguments,
 * thread-safe as the views above are. */
SW_API sw_status sw_layout_view_source_ordinals(const sw_layout *source,
                                                const sw_view_spec *spec, int64_t *ordinals,
                                                int64_t capacity, int64_t *count,
                                                sw_view_fault *fault, sw_error *err);

#ifdef __cplusplus
}
#endif

#endif
