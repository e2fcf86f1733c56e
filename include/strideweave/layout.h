/* Hierarchical (CuTe-style) layouts: leaf extents and strides plus the
 * nesting profile, with the derived facts cached at construction.
 *
 * A layout is immutable once built. Ordinals are first-mode-fastest
 * (contract-core G-4).
 *
 * Ownership: every function returning sw_layout * hands the caller a new
 * layout it owns and frees with sw_layout_free (NULL is accepted); inputs
 * are borrowed for the call only. An sw_layout is single-owner, not
 * refcounted: holders that outlive the caller (a tensor, for one) keep
 * their own sw_layout_copy, so no _ref/_unref pair exists.
 * Threads: every function is thread-safe on layouts no thread frees or
 * writes meanwhile; the one lazily cached field, `injective`, is read and
 * written atomically by sw_layout_is_injective, so concurrent queries of one
 * layout are safe (two threads may compute the same answer). Free a layout
 * only when no other thread uses it. */
#ifndef STRIDEWEAVE_LAYOUT_H
#define STRIDEWEAVE_LAYOUT_H

#include "strideweave/export.h"

#include <stdint.h>

#include "strideweave/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Profile markers, same values as the Python Node enum (L-7). */
enum { SW_NODE_LEAF = 1, SW_NODE_PUSH = 2, SW_NODE_POP = 3 };

typedef struct sw_layout {
    int32_t rank;      /* top-level modes */
    int32_t nleaves;
    int32_t nprofile;  /* profile entries (L-7) */
    int32_t depth;     /* 1 when flat or empty, +1 per nesting level (L-3) */
    int64_t size;      /* product of extents, 1 for rank 0 */
    int64_t cosize;    /* 1 + sum(stride * (extent - 1)) */
    int injective;     /* 1/0; -1 while undecided (construction decides when
                        * no enumeration is needed, else sw_layout_is_injective) */
    int64_t *extents;  /* nleaves, depth-first */
    int64_t *strides;  /* nleaves, depth-first */
    uint8_t *profile;  /* nprofile markers */
} sw_layout;

/* The deepest nesting a layout may have: depth 1 is flat, each nested mode
 * adds one. Every construction path refuses more (SW_EINVAL), so walks over
 * the nesting (recursive or not) stay shallow. */
#define SW_LAYOUT_MAX_DEPTH 64

/* Builds a layout from a well-formed profile (balanced Push/Pop, no empty
 * nested mode) and nleaves = count of SW_NODE_LEAF entries extents/strides.
 * Extents must be >= 1, strides >= 0 (SW_EINVAL); size/cosize overflowing
 * int64 is SW_EOVERFLOW. One allocation holds the struct and its arrays. */
SW_API sw_layout *sw_layout_new(int32_t nprofile, const uint8_t *profile,
                                const int64_t *extents, const int64_t *strides,
                                sw_error *err);
/* Same profile and extents, strides assigned depth-first (L-15). */
SW_API sw_layout *sw_layout_canonical(int32_t nprofile, const uint8_t *profile,
                                      const int64_t *extents, sw_error *err);
SW_API void sw_layout_free(sw_layout *layout);
SW_API sw_layout *sw_layout_copy(const sw_layout *layout, sw_error *err);

/* Exact injectivity (L-11), computed once and cached in the struct.
 * Returns 1 or 0, or -1 with err filled (SW_ENOMEM) when the answer needs an
 * enumeration past its fixed bounds (a 256 MiB record, 2^30 steps). */
SW_API int sw_layout_is_injective(sw_layout *layout, sw_error *err);

/* Scalar index of ordinal `k` in [0, size) (L-9 integer form). */
SW_API sw_status sw_layout_index(const sw_layout *layout, int64_t k, int64_t *out,
                                 sw_error *err);

/* Top-level mode `i` as its own layout whose top-level modes are its
 * children (a leaf mode stays one leaf). Index must be in [0, rank). */
SW_API sw_layout *sw_layout_mode(const sw_layout *layout, int32_t i, sw_error *err);
/* Top-level modes [start, stop) kept whole. */
SW_API sw_layout *sw_layout_slice(const sw_layout *layout, int32_t start, int32_t stop,
                                  sw_error *err);
/* Result mode j is source mode modes[j]; entries in [0, rank) (SW_ERANGE),
 * repeats and any count allowed. */
SW_API sw_layout *sw_layout_select(const sw_layout *layout, const int32_t *modes,
                                   int32_t n, sw_error *err);
/* Result mode j is source mode order[j] (L-14); order is a permutation. */
SW_API sw_layout *sw_layout_permute(const sw_layout *layout, const int32_t *order,
                                    int32_t n, sw_error *err);
/* Top-level modes of a then of b (L-13). */
SW_API sw_layout *sw_layout_concat(const sw_layout *a, const sw_layout *b,
                                   sw_error *err);
/* b whole as one nested top-level mode after a's modes (unless b is a leaf). */
SW_API sw_layout *sw_layout_append(const sw_layout *a, const sw_layout *b,
                                   sw_error *err);
/* L-12: target profile must match; widened extent-1 leaves get stride 0. */
SW_API sw_layout *sw_layout_broadcast(const sw_layout *layout, int32_t nprofile,
                                      const uint8_t *profile,
                                      const int64_t *extents, sw_error *err);
/* Position just past the mode (a leaf, or a Push..Pop group) that starts
 * at position p of a well-formed profile; the leaves it holds go to
 * *nleaves when not NULL. Walking top-level modes: p = 0, then p = end. */
SW_API int32_t sw_layout_mode_end(const uint8_t *profile, int32_t p, int32_t *nleaves);
/* 1 for rank 0 or a single leaf mode (L-5 is_leaf). */
SW_API int sw_layout_is_leaf(const sw_layout *layout);
/* 1 when the two layouts have the same profile, extents and strides. */
SW_API int sw_layout_equal(const sw_layout *a, const sw_layout *b);
/* 1 when the two layouts have the same profile and extents (strides may
 * differ): the same shape tree. */
SW_API int sw_layout_same_shape(const sw_layout *a, const sw_layout *b);

#ifdef __cplusplus
}
#endif

#endif
