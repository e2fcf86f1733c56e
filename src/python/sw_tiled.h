/* Private interface of the TiledEvictable files (contract-carriers
 * TE-1 .. TE-14): py_tile_sets.c (TileSet, TileSelection, ResidencyPlan),
 * py_tiled_evictable.c (the carrier, residency, slot access, release,
 * factories) and py_tiled_project.c (project and its gradient). */
#ifndef STRIDEWEAVE_SW_TILED_H
#define STRIDEWEAVE_SW_TILED_H

#include "sw_carrier.h"
#include "strideweave/tile_set.h"
#include "strideweave/tiles.h"

/* ---- value types (py_tile_sets.c) ---------------------------------------- */

/* Each holds a core value (strideweave/tile_set.h); a TileSet also keeps
 * its rank, size and rows at hand (read-only, the core set's). */
typedef struct SwTileSetObject {
    PyObject_HEAD
    int32_t rank;          /* -1 for the empty, rank-agnostic TileSet() */
    int64_t n;
    const int64_t *coords; /* n rows of rank entries, reversed-tuple order */
    sw_tile_set *set;
} SwTileSetObject;

typedef struct SwTileSelectionObject {
    PyObject_HEAD
    sw_tile_sel *sel;
    PyObject *per_axis;  /* tuple of tuples, caller order */
} SwTileSelectionObject;

typedef struct SwResidencyPlanObject {
    PyObject_HEAD
    PyObject *promote, *retain, *evict; /* TileSets */
    sw_residency_plan *plan;            /* of their core sets */
} SwResidencyPlanObject;

extern PyTypeObject SwTileSet_Type;
extern PyTypeObject SwTileSelection_Type;
extern PyTypeObject SwResidencyPlan_Type;
extern PyTypeObject SwTiledEvictable_Type;
extern PyTypeObject SwAwaitResidency_Type;
extern PyTypeObject SwAwaitProjection_Type;

/* A TileSet of the given rows (copied, sorted); rank -1 only with n == 0. */
PyObject *sw_py_tile_set_new(int32_t rank, int64_t n, const int64_t *coords);
/* The selection's Cartesian product as a TileSet (new reference). */
PyObject *sw_py_tile_selection_tile_set(PyObject *selection);
/* View a selection as the core struct (points into the object). */
void sw_py_tile_selection_view(PyObject *selection, sw_tile_selection *out);
/* TE-4/TE-5 binding to a grid: ValueError for a rank mismatch or a tile
 * outside it (an empty rank-agnostic TileSet binds to any grid). */
int sw_py_tile_set_bind(PyObject *tile_set, const sw_tile_geometry *g);
/* A ResidencyPlan's tiles into a policy's plan, all or none (ValueError
 * for a set that does not fit the grid); 0 / -1. */
int sw_py_residency_plan_apply(PyObject *plan, sw_te_plan *out);
int sw_py_tile_sets_init(PyObject *module);

/* ---- the carrier (py_tiled_evictable.c) ---------------------------------- */

enum { SW_TILE_PRIMARY, SW_TILE_SECONDARY, SW_TILE_IMPLICIT, SW_TILE_INVALID };

struct sw_tiled_evictable;
struct sw_py_tiled_core;

/* The Python face of a core TiledEvictable (strideweave/tiled_evictable.h),
 * which keeps the tile records, residency, pins and commits; the binding's
 * tiers plug in through its hooks (py_tiled_core.c). */
typedef struct SwTiledEvictableObject {
    SwCarrierObject base;               /* base.core: the core's TiledEvictable carrier */
    PyObject *primary, *secondary;      /* the tiers given at construction */
    PyObject *dtype;
    PyObject *policy;                   /* None or an object with plan() */
    sw_tile_geometry geo;
    struct sw_tiled_evictable *te;      /* the core's */
    struct sw_py_tiled_core *hooks;        /* the hooks' context */
    int tiers_dropped;                  /* the binding's part of the tiers' release ran */
} SwTiledEvictableObject;

#define TILED(o) ((SwTiledEvictableObject *)(o))

/* Copy the n-slot private tile carrier `src` into the fresh `dst` through
 * the exact pair's movement (legacy operation, or the definition route),
 * without releasing `src` (py_tile_transfer.c). 0 / -1. On 0, *completion
 * may hold a provider's ProviderCompletion still to wait for: both carriers
 * stay pending until sw_py_tiled_route_unmark. */
int sw_py_tiled_transfer_tile(PyObject *src, PyObject *dst, int64_t n, PyObject **completion);
/* The same for a tile held in place by a full tier `src` whose footprint is
 * the one span [offset, offset + n) of it (py_tile_transfer.c): the legacy
 * movement of the pair with a Tensor at `offset`. `src` is shared by every
 * tile, so only `dst` is marked pending (the carrier owns `src`). Only
 * for an operation with `_copy_async`: 1 when the pair has none (use the
 * slot copy), else 0 / -1 as above. */
int sw_py_tiled_transfer_span(PyObject *src, int64_t offset, PyObject *dst, int64_t n,
                              PyObject **completion);
/* The same into slots [dst_offset, dst_offset + n) of `dst`; `private_dst`
 * says the caller holds `dst` privately and copies many spans into it at
 * once, so `dst` is neither checked for nor marked pending. */
int sw_py_tiled_transfer_span_into(PyObject *src, int64_t offset, PyObject *dst,
                                   int64_t dst_offset, int64_t n, int private_dst,
                                   PyObject **completion);
/* Whether copies from the Python carrier `src` into `dst` run through an
 * operation driving an engine's own I/O (`_copy_async`). Never raises. */
int sw_py_tiled_engine_pair(PyObject *src, PyObject *dst);
/* Whether that movement exists for the pair (else the slot copy). */
int sw_py_tiled_transfer_applies(PyObject *src, PyObject *dst);
int sw_py_tile_transfer_init(PyObject *module);

/* ---- definition routes (py_tile_route.c) --------------------------------- */

struct sw_py_route;
/* The tile copy through route->route: 0 done, or with an
 * incomplete ProviderCompletion in *completion, or with route->route
 * cleared when prepare answered Unsupported and the fallback is allowed
 * (the caller then runs route->op_type); -1 on error. */
int sw_py_tiled_route_tile(PyObject *src, PyObject *dst, int64_t n, struct sw_py_route *route,
                           PyObject **completion);
/* Drop the pending marks of a copy whose completion is terminal. */
void sw_py_tiled_route_unmark(PyObject *src, PyObject *dst);
/* Wait for `completion` on this thread (synchronous callers). 0 / -1. */
int sw_py_tiled_route_wait(PyObject *completion);
/* RuntimeError unless the fresh `dst` is live with at least n slots (what a
 * move's commit checks of its destination; every tile copy checks it). */
int sw_py_tiled_check_fresh(PyObject *dst, int64_t n);
int sw_py_tile_route_init(void);
/* The host base pointer of a carrier's slots (exact CPU/Generic), or NULL. */
const unsigned char *sw_py_tiled_host_base(PyObject *carrier);
/* How many tiles are in each place (counts[SW_TILE_PRIMARY ..
 * SW_TILE_INVALID]) and how many take part in a residency request
 * (*pending, may be NULL), for repr and the carrier's status text. 0, or -1
 * (no exception) once released. Never runs Python code. */
int sw_py_tiled_tile_counts(PyObject *self, int64_t counts[4], int64_t *pending);
/* Run a core call that may run tier hooks (which take the GIL) without
 * the GIL. */
#define SW_TILED_NOGIL(stmt)                                                                     \
    do {                                                                                         \
        Py_BEGIN_ALLOW_THREADS stmt;                                                             \
        Py_END_ALLOW_THREADS                                                                     \
    } while (0)

/* TiledEvictable.project comes from py_tiled_project.c, which adds it to
 * the type at module init (sw_py_tiled_project_init, after
 * sw_py_tiled_evictable_init). */
int sw_py_tiled_evictable_init(PyObject *module);

#endif
