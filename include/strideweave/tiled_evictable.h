/* TiledEvictable: a logical grid of equal tiles over two carriers, each
 * tile living in exactly one place: the primary tier, the secondary tier,
 * nowhere with an implicit value of 0, or nowhere at all (invalid).
 *
 * Tiers. Each of primary and secondary is a CPU, Generic, FileBacked or
 * BlockDeviceCarrier carrier (any pair), both of the same dtype; the core
 * serves every such pair itself, with no binding hooks. A CPU primary with
 * a CPU or FileBacked secondary is the fast pair (the copies below); in
 * any other pair the tiers outside it (Generic memory, a FileBacked
 * primary, a BlockDeviceCarrier) and the tile stores made like them are
 * read and written slot range by slot range through a host bounce buffer,
 * and a write into a block-device tier or tile is flushed
 * (sw_block_device_flush) before the request commits, so an evicted tile
 * is durable once its request succeeds (a failing flush fails the request
 * and faults the device). Such a TiledEvictable's carrier
 * (sw_tiled_evictable_carrier) reads and writes slots as any other;
 * new_like and allocate_like of it fail SW_ENOTSUP. Each tier is either empty (size 0)
 * or holds the whole logical size. Construction claims both (carrier.h
 * ownership): from then on nothing else may write or release them (reading
 * a tier's slots directly while the TiledEvictable writes them is a data
 * race: read through sw_tiled_evictable_read). A tier
 * that is full holds its tiles in place (at their own slots, see tiles.h);
 * every tile that moves afterwards gets private tile-sized storage of the
 * target tier's class (a fresh CPU carrier, a FileBacked file, zeroed
 * Generic memory, an extent of the tier's block device),
 * indexed by within-tile position. Tiles start all primary when the
 * primary is full, else all secondary when the secondary is full, else all
 * invalid.
 *
 * Residency changes (promote, evict) copy into fresh storage first and
 * commit every listed tile together under the carrier's lock, so a failure
 * anywhere (allocation, file I/O, an injected fault) leaves every tile,
 * value and the version as they were; the fresh copies are dropped. Tile
 * copies move whole runs: memcpy between host tiers, one pwritev of every
 * run of a tile into a FileBacked tile, one pread out of a private one, and
 * one preadv per tile kept in place in a full FileBacked secondary (the
 * file's bytes between the tile's runs are read through; a gap wider than
 * 64 KiB starts another preadv instead).
 *
 * Busy tiles. While a residency request copies a tile, that tile is
 * *pending*; while a projection reads a tile, it is *pinned*. A pending or
 * pinned tile refuses writes and new requests (SW_ESTATE, message names
 * "pending" or "pinned"); a pending tile also refuses projections. Reads
 * are always allowed. release refuses while any request or projection is
 * in progress.
 *
 * Version: +1 per successful sw_tiled_evictable_write; promote, evict,
 * project and release never change it.
 *
 * Ownership: sw_tiled_evictable_new gives the caller one reference
 * (sw_tiled_evictable_unref). The carrier holds a reference to both tiers;
 * sw_tiled_evictable_primary/secondary return them borrowed. Dropping the
 * last reference of a carrier that was not released only relinquishes the
 * tiers (they become usable again) and frees the private tile storage;
 * sw_tiled_evictable_release frees everything.
 *
 * Asynchronous forms, fork and exit: see sw_tiled_evictable_promote_async.
 *
 * Threads: every function is thread-safe. Each carrier has one mutex
 * guarding its tile records; tile copies and projection gathers run
 * without it, so many threads may promote, evict, write and project
 * different tiles at once, and a request for a tile another thread is
 * working on fails at once (SW_ESTATE) instead of waiting. Calls that
 * block: promote, evict and project (they copy, and do file I/O with a
 * FileBacked secondary), reads and writes of FileBacked and
 * BlockDeviceCarrier tiles (a block-device write also flushes), a write
 * that has to promote its tile first, release (it unlinks files).
 *
 * Status codes follow status.h; every failing call changes nothing (one
 * exception: a write that loses a race after promoting its tiles, see
 * sw_tiled_evictable_write). */
#ifndef STRIDEWEAVE_TILED_EVICTABLE_H
#define STRIDEWEAVE_TILED_EVICTABLE_H

#include "strideweave/export.h"

#include <stdint.h>

#include "strideweave/carrier.h"
#include "strideweave/layout.h"
#include "strideweave/status.h"
#include "strideweave/tensor.h"
#include "strideweave/tiles.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sw_tiled_evictable sw_tiled_evictable;

/* Where a tile lives. */
typedef enum sw_te_location {
    SW_TE_PRIMARY = 0,
    SW_TE_SECONDARY = 1,
    SW_TE_IMPLICIT = 2, /* no storage; every slot reads 0 */
    SW_TE_INVALID = 3   /* no storage, no values */
} sw_te_location;

typedef struct sw_te_tile_state {
    sw_te_location location;
    int valid;   /* not invalid */
    int dirty;   /* a primary tile written since it became primary */
    int pending; /* a residency request is copying it */
    int pinned;  /* a projection is reading it */
    int in_place; /* still held by the tier that was full at construction (never
                     moved, never materialized): its copies read that tier's
                     slots where they are, not a tile-sized store of its own */
} sw_te_tile_state;

/* Which tiles sw_tiled_evictable_tiles lists. */
typedef enum sw_te_filter {
    SW_TE_TILES_PRIMARY = 0,
    SW_TE_TILES_SECONDARY = 1,
    SW_TE_TILES_IMPLICIT = 2,
    SW_TE_TILES_INVALID = 3,
    SW_TE_TILES_VALID = 4,
    SW_TE_TILES_DIRTY = 5
} sw_te_filter;

/* A TiledEvictable over `primary` and `secondary` with `rank` axes,
 * grid[k] tiles of tile[k] slots along axis k. Checks, in order, each
 * failure changing nothing:
 *   1. a tier is NULL                                      SW_ETYPE
 *   2. a tier not CPU, Generic, FileBacked or
 *      BlockDeviceCarrier                                  SW_ENOTSUP
 *   3. the same carrier twice                              SW_EINVAL
 *   4. primary, then secondary released                    SW_ESTATE
 *   5. primary, then secondary owned by another composite,
 *      then primary, then secondary pending in a move      SW_ESTATE
 *      (3 to 5: sw_carrier_check_tier_pair, and pending)
 *   6. the tiers' dtypes differ                            SW_ETYPE
 *   7. grid/tile NULL, rank outside [1, SW_TILES_MAX_RANK],
 *      an entry < 1                                        SW_EINVAL
 *      (a product overflowing int64: SW_EOVERFLOW; the words
 *      of sw_tiles_geometry_init)
 *   8. primary, then secondary size neither 0 nor the
 *      logical size                                        SW_EINVAL
 * Then mutability is captured from the primary, both tiers are claimed
 * (undone if the second claim fails) and the tiles are placed (see top). */
SW_API sw_status sw_tiled_evictable_new(sw_carrier *primary, sw_carrier *secondary, int32_t rank,
                                        const int64_t *grid, const int64_t *tile,
                                        sw_tiled_evictable **out, sw_error *err);

SW_API sw_tiled_evictable *sw_tiled_evictable_ref(sw_tiled_evictable *te);
SW_API void sw_tiled_evictable_unref(sw_tiled_evictable *te);

/* Introspection (`te` must not be NULL); never fails. The geometry is
 * fixed at construction (borrowed, valid while the handle lives); size is
 * the logical size, 0 after release; is_mutable is the primary's public
 * mutability captured at construction (false after release). */
SW_API const sw_tile_geometry *sw_tiled_evictable_geometry(sw_tiled_evictable *te);
SW_API sw_dtype sw_tiled_evictable_dtype(sw_tiled_evictable *te);
SW_API int64_t sw_tiled_evictable_size(sw_tiled_evictable *te);
SW_API uint64_t sw_tiled_evictable_version(sw_tiled_evictable *te);
SW_API int sw_tiled_evictable_is_released(sw_tiled_evictable *te);
SW_API int sw_tiled_evictable_is_mutable(sw_tiled_evictable *te);
/* The tier prototypes given at construction (borrowed). */
SW_API sw_carrier *sw_tiled_evictable_primary(sw_tiled_evictable *te);
SW_API sw_carrier *sw_tiled_evictable_secondary(sw_tiled_evictable *te);

/* Residency queries. tile_state: `coord` has one entry per axis;
 * SW_EINVAL outside the grid, SW_ESTATE when released. tiles: the
 * coordinates of the tiles `which` keeps, rows of `rank` entries in linear
 * tile order (first axis fastest), into `coords` (room for `capacity`
 * rows; may be NULL when 0); *count gets how many there are, which may be
 * more than `capacity` (then only `capacity` rows are written). SW_EINVAL
 * for an unknown filter, SW_ESTATE when released. */
SW_API sw_status sw_tiled_evictable_tile_state(sw_tiled_evictable *te, const int64_t *coord,
                                               sw_te_tile_state *out, sw_error *err);
SW_API sw_status sw_tiled_evictable_tiles(sw_tiled_evictable *te, sw_te_filter which,
                                          int64_t *coords, int64_t capacity, int64_t *count,
                                          sw_error *err);

/* How many tiles are where, in one snapshot: counts[location] (indexed by
 * sw_te_location) and, when `pending` is not NULL, how many a residency
 * request is copying. SW_ETYPE for NULL, SW_ESTATE when released
 * ("cannot inspect the tiles of a released TiledEvictable"). Thread-safe. */
SW_API sw_status sw_tiled_evictable_tile_counts(sw_tiled_evictable *te, int64_t counts[4],
                                                int64_t *pending, sw_error *err);

/* Bring the `n` tiles `coords` (rows of `rank` entries) into the primary
 * tier / move the primary ones among them to the secondary tier, all or
 * none; tiles already there are skipped. Checks, in order: `te` NULL
 * (SW_ETYPE); released (SW_ESTATE); `coords` NULL with n > 0, n < 0, a
 * coordinate outside the grid or a tile listed twice (SW_EINVAL); a listed
 * tile pending or pinned (SW_ESTATE); promote: a listed tile invalid
 * (SW_ESTATE). Promotion copies secondary tiles into fresh CPU tiles and
 * materializes implicit ones as zeros; eviction copies primary tiles into
 * fresh storage of the secondary's class. Moved tiles are clean; their old
 * private storage is released. Blocks until done. */
SW_API sw_status sw_tiled_evictable_promote(sw_tiled_evictable *te, const int64_t *coords,
                                            int64_t n, sw_error *err);
SW_API sw_status sw_tiled_evictable_evict(sw_tiled_evictable *te, const int64_t *coords,
                                          int64_t n, sw_error *err);

/* Whether sw_tiled_evictable_promote (evict 0) or _evict (evict 1) of
 * these tiles, or their _start and _async forms, would be refused now:
 * the same checks in the same order, with nothing marked or changed. For
 * a binding that checks something of its own between the refusals and
 * the request (the Python binding's route check) and words the refusal
 * itself: `why` (may be NULL) is the tile that refused it and that tile's
 * state then (`tile` -1: the carrier itself, or no refusal). The request
 * checks again when it starts, since the state may change meanwhile.
 * Thread-safe; does not block. */
typedef struct sw_te_refusal {
    int64_t tile; /* linear tile index (first axis fastest), or -1 */
    sw_te_tile_state state;
} sw_te_refusal;
SW_API sw_status sw_tiled_evictable_check_residency(sw_tiled_evictable *te,
                                                    const int64_t *coords, int64_t n, int evict,
                                                    sw_te_refusal *why, sw_error *err);

/* Slot access over the logical slots (tiles.h: slot i decodes first axis
 * fastest over the logical shape). read: SW_ETYPE for NULL arguments,
 * SW_ESTATE when released, SW_ERANGE for slots out of range, SW_ESTATE
 * when a slot's tile is invalid; implicit tiles read 0. write: the same
 * checks plus SW_ESTATE for a carrier that is not mutable and for a
 * pending or pinned tile, and SW_EINVAL for a Bool slot other than 0 or 1.
 * Writing into a secondary tile promotes it first, into an implicit tile
 * materializes it as a primary tile unless every value written there is 0;
 * written primary tiles become dirty; the version advances by 1. The
 * promotion commits before the values are written: when another thread
 * evicts, pins or marks one of the written tiles in between, the write
 * fails SW_ESTATE ("try again") with values and version unchanged, but the
 * tiles it promoted stay primary (clean). */
SW_API sw_status sw_tiled_evictable_read(sw_tiled_evictable *te, int64_t slot, int64_t count,
                                         void *out, sw_error *err);
SW_API sw_status sw_tiled_evictable_write(sw_tiled_evictable *te, int64_t slot, int64_t count,
                                          const void *in, sw_error *err);

/* Copy the tiles `selection` picks (per axis, tile coordinates in the
 * caller's order, a Cartesian product) out of the full tensor `layout` at
 * `offset` over this carrier into a dense Tensor: shape
 * counts[k] * tile[k], first axis fastest, offset 0, on `destination` (a
 * CPU carrier of at least that many slots) or, when `destination` is NULL,
 * on a new CPU carrier. Compact index c holds the source value at logical
 * index s with s[k] = coords[k][c[k] / tile[k]] * tile[k] + c[k] % tile[k],
 * read through the layout (tiles.h). `layout` NULL means the identity
 * (slot == logical index, offset 0). Checks, in order:
 *   1. `te` or `selection` NULL                                SW_ETYPE
 *   2. released                                                SW_ESTATE
 *   3. the layout's top-level modes are not the logical shape,
 *      a negative offset, or the layout does not keep the tile
 *      footprints (every tile's indices on that tile's slots)  SW_EINVAL
 *   4. the selection's rank, an empty axis, a coordinate
 *      outside the grid or twice on one axis                   SW_EINVAL
 *      the projection's slot count overflows int64             SW_EOVERFLOW
 *   5. destination not CPU                                     SW_ETYPE
 *      released, owned, pending or not mutable                 SW_ESTATE
 *      another dtype                                           SW_ETYPE
 *      fewer slots than the projection needs                   SW_EINVAL
 *   6. a selected tile pending or invalid                      SW_ESTATE
 * Then the selected tiles are pinned and the destination claimed while the
 * values are gathered. On failure a new destination is released and a
 * given one is left live (its values unspecified). The source's residency,
 * values and version never change; the destination's version does not
 * either. `*out` gets one reference. Blocks until done.
 * With binding hooks (sw_tiled_evictable_new_bound) check 5 also takes a
 * destination of another class with a write hook given: the binding's (its
 * class is the binding's to check; a STATE_ONLY one's size comes from the
 * size hook, its dtype is not compared). The values are gathered into host
 * memory and handed to the write hook (or, with core_classes, to a
 * destination of the core's own classes directly) in one call (slots [0, n), on the
 * gathering thread, no core lock held, this thread holding the claimed
 * destination's owner access); a failing hook fails the projection. With
 * core_classes a FileBacked destination is not gathered into host memory
 * first: the core writes its file straight from the tiles (pwritev of host
 * tiles, copy_file_range from tiles in files, implicit tiles as zeros), so
 * a failure part way may leave some of its values written. `*out`
 * then gets NULL: the binding makes its own tensor over it. */
SW_API sw_status sw_tiled_evictable_project(sw_tiled_evictable *te, const sw_layout *layout,
                                            int64_t offset, const sw_tile_selection *selection,
                                            sw_carrier *destination, sw_tensor **out,
                                            sw_error *err);

/* Checks 1 to 4 of sw_tiled_evictable_project alone, in that order, for a
 * binding that must refuse before work of its own (reading its next
 * argument, making the destination): nothing changes, no hook or policy is
 * called, no lock is kept. `layout` NULL skips check 3; `selection` NULL
 * stops after check 3 (a binding asks again once it has read the
 * selection). On SW_OK with a selection, *n (when not NULL) gets the
 * projection's slot count and shape[rank] (when not NULL) its dense shape.
 * The words are the Python API's: "cannot project from a released
 * TiledEvictable" (SW_ESTATE); "the tensor's layout must have R top-level
 * modes whose sizes are the carrier's logical_shape", a tile footprint
 * refusal (SW_EINVAL); the selection's rank or a coordinate outside the
 * grid (SW_EINVAL); "the projection is too large" (SW_EOVERFLOW). Checks
 * 3 to 5 of the projection itself report in the same words. Thread-safe. */
SW_API sw_status sw_tiled_evictable_project_check(sw_tiled_evictable *te,
                                                  const sw_layout *layout, int64_t offset,
                                                  const sw_tile_selection *selection,
                                                  int64_t *n, int64_t *shape, sw_error *err);

/* A new TiledEvictable of the same geometry and policy over a new empty CPU primary
 * and a new empty secondary of the secondary's class, every tile an
 * implicit 0, or invalid when `empty`. SW_ETYPE for NULL, SW_ESTATE when
 * released; the allocation's own errors otherwise. */
SW_API sw_status sw_tiled_evictable_allocate_like(sw_tiled_evictable *te, int empty,
                                                  sw_tiled_evictable **out, sw_error *err);

/* Residency policies. A policy is consulted by every projection (sync or
 * async), after the projection's own checks and before anything changes:
 * plan(required, n, rank, "projection", plan, user, err) gets the tiles the
 * selection names (`n` rows of `rank` coordinates, linear tile order) and
 * fills `plan` with sw_te_plan_add: tiles to *promote* (brought into the
 * primary tier after the gather, as part of the projection), to *retain*
 * (held like the selected tiles while it runs) and to *evict* (moved to
 * the secondary tier once the projection's tiles are free again). A
 * status other than SW_OK from plan fails the projection with that error,
 * nothing changed. Then the projection also refuses promote and retain
 * tiles that are pending, and promote tiles that are invalid (SW_ESTATE),
 * pins the selected, promote and retain tiles, gathers, promotes; a
 * failed promotion fails the projection (residency unchanged). After the
 * pins drop, the evict tiles that are not pending or pinned are evicted;
 * an eviction that fails leaves them where they were and the projection
 * still succeeds. In the asynchronous forms that eviction is work of its
 * own, started before the handle completes and never waited for by it:
 * copies that finish at once have landed when the handle completes, a
 * binding's copy that reports later (or one that would run on the
 * completion thread) goes on in the background, all or none, and drains
 * and exit wait for it. plan runs on the calling thread without any lock of the
 * carrier held; it must not wait for work on the same carrier.
 *
 * sw_te_plan_add refuses, leaving the plan unchanged: NULL arguments
 * (SW_ETYPE); an unknown set, a coordinate outside the grid, a tile already
 * in any of the three sets (SW_EINVAL). */
typedef enum sw_te_plan_set {
    SW_TE_PLAN_PROMOTE = 0,
    SW_TE_PLAN_RETAIN = 1,
    SW_TE_PLAN_EVICT = 2
} sw_te_plan_set;

typedef struct sw_te_plan sw_te_plan;

SW_API sw_status sw_te_plan_add(sw_te_plan *plan, sw_te_plan_set which, const int64_t *coord,
                                sw_error *err);

typedef sw_status (*sw_te_plan_fn)(const int64_t *required, int64_t n, int32_t rank,
                                   const char *purpose, sw_te_plan *plan, void *user,
                                   sw_error *err);

typedef struct sw_te_policy {
    sw_te_plan_fn plan; /* NULL: no policy */
    void *user;         /* passed to plan; owned by the caller */
} sw_te_policy;

/* Set (or, with NULL or a NULL plan, remove) the policy; a projection uses
 * the policy set when it started. The factories below copy it.
 * SW_ETYPE for a NULL carrier, SW_ESTATE when released. policy_of fills
 * `out` with the current policy ({NULL, NULL} when none). */
SW_API sw_status sw_tiled_evictable_set_policy(sw_tiled_evictable *te,
                                               const sw_te_policy *policy, sw_error *err);
SW_API void sw_tiled_evictable_policy_of(sw_tiled_evictable *te, sw_te_policy *out);

/* A TiledEvictable of the same geometry and policy holding `values`
 * (`count` slots of the carrier's dtype, logical slot order) in a new full
 * CPU primary (mutable unless `immutable`) over a new empty secondary of
 * the secondary's class. Tiles whose every slot is zero bytes become
 * implicit; the others are primary and clean. SW_ETYPE for NULL,
 * SW_ESTATE when released, SW_EINVAL when `count` is not the logical size
 * or a Bool slot is not 0 or 1; the allocation's own errors otherwise. */
SW_API sw_status sw_tiled_evictable_new_like(sw_tiled_evictable *te, const void *values,
                                             int64_t count, int immutable,
                                             sw_tiled_evictable **out, sw_error *err);

/* Asynchronous residency and projection. Each _async call checks exactly
 * what its blocking form checks, in the same order, and marks the tiles
 * (pending, or pinned) before it returns: a refusal returns directly with
 * nothing changed and no handle. The copies (or the gather) then run on
 * the core's pool, the move engine's (move.h: one pool and one completion
 * thread per process for moves and this work alike, started lazily by
 * whichever comes first); its completion thread commits every tile of the
 * request together, or nothing on failure (an injected fault, an I/O error), then
 * clears the marks and wakes the waiters. A dropped handle neither cancels
 * nor blocks the work: it holds its own references (to the carrier and to
 * a projection's destination) until it committed. The blocking forms run
 * on the calling thread; their outcome is the same.
 *
 * sw_te_work_wait blocks until the work committed and returns its status
 * (the error of a failure, the same to every waiter); for a projection
 * `result` (may be NULL) gets one reference to the published tensor, the
 * same tensor on every call. sw_te_work_done is 1 once wait would not
 * block. The handle starts with one reference (sw_te_work_unref).
 *
 * Fork: a child process has none of the parent's threads. The core's
 * fork handlers (move.h, "Fork") end the work it inherited (asynchronous,
 * or blocking calls other threads were making) inside fork() itself, as
 * no binding hook runs for it (no call is needed, unlike the moves a
 * child inherits): the marks clear, residency and values stay as they
 * were at the fork, and waiting on an inherited handle fails SW_ESTATE
 * (the message says "forked"; err->detail SW_TE_ENDED_BY_FORK) at once. Storage the parent was filling for
 * that work is left to the parent (never released by the child). New work
 * in the child starts the child's own engine; its drains and its exit
 * wait only for its own work.
 *
 * Exit: like moves (move.h, "Process exit"): exit waits for the work in
 * flight, which commits (or fails) as it would have; from the moment exit
 * begins, the _async calls fail SW_ESTATE ("the process is exiting"). Not
 * covered: _exit(), a fatal signal, and work whose binding tile copy
 * (sw_te_tier_hooks.copy) never reports (exit then never ends: a binding
 * lets such copies finish, or fail them, before its runtime goes).
 * sw_tiled_evictable_drain is sw_move_drain: it blocks until every piece
 * of asynchronous work and every move submitted so far has committed and
 * dropped its references.
 *
 * Threads: every function here is thread-safe; only wait and drain block. */
typedef struct sw_te_work sw_te_work;

/* err->detail of work a forked child inherited and ended (see "Fork"
 * above), so that a binding tells it from other failures without reading
 * the message. Clear of carrier.h's and move.h's details. */
enum { SW_TE_ENDED_BY_FORK = 0x5401 };

SW_API sw_status sw_tiled_evictable_promote_async(sw_tiled_evictable *te, const int64_t *coords,
                                                  int64_t n, sw_te_work **out, sw_error *err);
SW_API sw_status sw_tiled_evictable_evict_async(sw_tiled_evictable *te, const int64_t *coords,
                                                int64_t n, sw_te_work **out, sw_error *err);
SW_API sw_status sw_tiled_evictable_project_async(sw_tiled_evictable *te,
                                                  const sw_layout *layout, int64_t offset,
                                                  const sw_tile_selection *selection,
                                                  sw_carrier *destination, sw_te_work **out,
                                                  sw_error *err);
SW_API sw_status sw_te_work_wait(sw_te_work *w, sw_tensor **result, sw_error *err);
SW_API int sw_te_work_done(sw_te_work *w);
/* How many tiles a residency request's work copies (tiles already where
 * they were asked to go copy nothing), decided with its marks; after a
 * _start call returned, 0 when the route hook refused it. 0 for a
 * projection and for NULL. Fixed once the call that made `w` returned. */
SW_API int64_t sw_te_work_copies(sw_te_work *w);
SW_API sw_te_work *sw_te_work_ref(sw_te_work *w);
SW_API void sw_te_work_unref(sw_te_work *w);
SW_API void sw_tiled_evictable_drain(void);

/* Notification and context for a binding's handles. sw_te_work_on_done
 * runs fn(w, user) exactly once when the work has committed: on the thread
 * that commits it, after its waiters were woken and before drain counts it
 * finished, or at once on the calling thread when it already has. fn runs
 * with no core lock held (it may take a binding's interpreter lock, call
 * sw_te_work_wait, which does not block then, and drop references; the
 * handle stays alive while fn runs). One callback per handle: SW_ESTATE
 * for a second, SW_ETYPE for NULL. Fork: a child never runs a callback
 * registered in the parent for work that had not committed (no binding
 * code runs inside fork()): the binding finds such handles done there
 * (sw_te_work_done, wait fails "forked") and ends its own objects for them;
 * a handle that had no callback yet gets one run at once.
 *
 * sw_te_work_current: while a pool thread stages or gathers a piece of
 * asynchronous work, a _start call (below) issues its copies (and a
 * projection's gather) on its caller, that work (borrowed); a policy's
 * evictions after a projection are work of their own, whose hooks see it;
 * NULL elsewhere, e.g. inside a blocking call's hooks. A binding uses it to keep
 * what a hook raised for the handle that reports the failure. */
typedef void (*sw_te_work_fn)(sw_te_work *w, void *user);
SW_API sw_status sw_te_work_on_done(sw_te_work *w, sw_te_work_fn fn, void *user, sw_error *err);
SW_API sw_te_work *sw_te_work_current(void);
/* A binding kept something for `w` (see sw_te_tier_hooks.work_end): the
 * core then calls work_end for it. Any thread, no lock needed. */
SW_API void sw_te_work_note_kept(sw_te_work *w);

/* Residency for a binding whose tile copies run on its caller (user code)
 * and may finish later (a copy hook that reports afterwards). As the
 * _async forms, with the same checks (a refusal returns directly, nothing
 * changed, no handle), except that the fresh stores and the copies are
 * issued on the calling thread before the call returns: the hooks run
 * there (sw_te_work_current names the work inside them). When every copy
 * has reported by then, the request commits there too and the handle is
 * done on return; else the pool waits for the reports and the completion
 * thread commits. A failure after the checks (a store or copy failing or
 * reporting failure) is the handle's: the call returns SW_OK and wait
 * reports it, nothing changed. Only when the pool cannot take the wait
 * does the call itself fail, after the outstanding copies reported (it
 * waits for them), nothing changed, no handle. */
SW_API sw_status sw_tiled_evictable_promote_start(sw_tiled_evictable *te, const int64_t *coords,
                                                  int64_t n, sw_te_work **out, sw_error *err);
SW_API sw_status sw_tiled_evictable_evict_start(sw_tiled_evictable *te, const int64_t *coords,
                                                int64_t n, sw_te_work **out, sw_error *err);

/* A projection for a binding whose policy's promotions copy through its
 * hooks (which may report later): sw_tiled_evictable_project_async's checks
 * in the same order (the policy's plan included; a refusal returns
 * directly, nothing changed, no handle), then on the calling thread the
 * gather into the destination (the read, read_many and write hooks run
 * here) and the issue of the plan's promotion (fresh stores and copies, as
 * promote_start). When no copy is still to report, the promotion commits
 * (or drops), the pins drop, the plan's evict tiles are evicted and the
 * projection commits on the calling thread: the handle is done on return.
 * Else the call returns at once with the tiles still pinned and the
 * destination claimed; the pool waits for the reports, commits the
 * promotion (all or none), and the completion thread finishes the
 * projection (pins, the result) and starts the evictions (above). A failure after the checks
 * (the gather, a store or copy failing or reporting failure) is the
 * handle's: residency unchanged, a destination the core made released, a
 * given one live and claimed no more. Only when the pool cannot take the
 * wait does the call itself fail, after the outstanding copies reported,
 * nothing changed, no handle; its error is then the first failure (a
 * copy's, else the pool's), and what the binding kept for the work is
 * handed to this thread (sw_te_tier_hooks.work_end). */
SW_API sw_status sw_tiled_evictable_project_start(sw_tiled_evictable *te,
                                                  const sw_layout *layout, int64_t offset,
                                                  const sw_tile_selection *selection,
                                                  sw_carrier *destination, sw_te_work **out,
                                                  sw_error *err);

/* Binding tiers. A language binding whose tiers keep their slots in the
 * binding (STATE_ONLY classes, carrier.h), or whose tile copies run routes
 * the core does not know (and may finish later, on another thread), plugs
 * them in through sw_tiled_evictable_new_bound and these hooks. A tile
 * store the core cannot address (neither host memory nor a file: a
 * *bound* store) is reached only through them:
 *
 *   store    fresh tile-sized storage (`size` slots of `dtype`) like the
 *            tier `prototype` (secondary: 1 for the secondary tier), all
 *            zeros when `zero`: a mutable, unowned carrier; the caller gets
 *            one reference. Returning SW_ENOTSUP hands the request to the
 *            core: CPU and FileBacked tiers, and with core_classes every
 *            class the core serves (Generic, BlockDeviceCarrier: a zeroed
 *            extent is flushed first). Required for a bound tier.
 *   copy     copies tile `tile` from `from` (full: a whole tier holding the
 *            tile at its own slots, sw_tiles_runs; else within-tile order)
 *            into the tile-sized `to`. Returning SW_OK takes the job: the
 *            binding then reports sw_te_copy_done(job, status, err) exactly
 *            once, from any thread, inside the hook or later. Any other
 *            status refuses it (no report follows); SW_ENOTSUP hands the
 *            copy to the core, which reaches bound stores through read and
 *            write. NULL: always the core.
 *   read     `count` slots from slot `at` of a bound store (`at` in the
 *   write    store's own indexing, one contiguous run) into / out of host
 *            memory. Required for a bound tier.
 *   size     the slots of a STATE_ONLY tier (its size is the binding's);
 *            required when a tier is STATE_ONLY.
 *   read_many  optional (NULL: never called): one projection's batch of
 *            tile reads from bound stores, issued together. Entry i asks
 *            for count[i] slots from slot at[i] of store[i] (the store's
 *            own indexing, one contiguous run) into slots [dest_at[i],
 *            dest_at[i] + count[i]) of `dest`, the projection's CPU
 *            destination (host memory at sw_cpu_pointer(dest)); the runs
 *            never overlap. The core calls it once per projection, before
 *            its own gather, for every selected tile kept in a bound store
 *            whose values land as one run of the destination (identity
 *            layout, dense destination), except the stores of the core's
 *            own classes under core_classes, which the core reads itself
 *            (after the hook answered); other tiles go through read as
 *            usual. The arrays are the core's and live for the call only;
 *            the stores and `dest` are borrowed (the tiles are pinned and
 *            `dest` is the projection's for the whole call), and no core
 *            lock is held. The hook may start every read at once but
 *            returns only when all of them are over: SW_OK when every run
 *            holds its values; any other status fails the projection
 *            (residency unchanged, a destination the core made is
 *            dropped); SW_ENOTSUP before reading anything hands every
 *            entry back to the core, which then reads them through read.
 *   discard  gives up a bound store the core no longer keeps (a fresh copy
 *            of a failed request, the old storage of a moved tile, every
 *            tile's storage at release or at the last unref; never a tier
 *            given to the constructor). The core then releases it (a no-op
 *            once the hook released it) and drops its reference. NULL: the
 *            core only releases it.
 *   core_classes  1: the bound stores of the core's own classes (a tier
 *            of a class the core does not keep in that role, and the
 *            stores made like it: CPU or Generic memory of the
 *            TiledEvictable's dtype, FileBacked, BlockDeviceCarrier), and
 *            a projection's destination of those classes, are read and
 *            written by the core itself, never through read and write:
 *            memory directly, the others with sw_carrier_read and
 *            sw_carrier_write (a tier given to the constructor with the
 *            TiledEvictable's claim as owner access, a BlockDeviceCarrier
 *            flushed before the write returns). Copies still offer `copy`
 *            first. 0: every bound store through read and write.
 *
 * GIL rule: the core calls every hook on the thread that makes the call
 * (or, for the asynchronous forms, on a pool thread) with no core lock
 * held, neither the TiledEvictable's nor any carrier's, so a binding may
 * take its interpreter lock inside a hook and use its ordinary carrier
 * calls; a binding holding such a lock when it calls a blocking function
 * here should release it for the call (requests wait for their copies).
 * While a hook runs, the tiles it serves are marked: copies and writes keep
 * their tiles pending (reads of them still work, other requests and writes
 * are refused), reads of bound stores keep the TiledEvictable busy
 * (release is refused), and storage a request replaced while a read was
 * reaching it is discarded only once that read is over. sw_te_copy_done
 * takes no lock a hook could hold and never blocks; the request that
 * issued the copy commits on the thread waiting for it.
 *
 * Failures change nothing: a store or copy that fails (or reports failure)
 * fails the request with that error, every tile where it was, the fresh
 * stores discarded; a failing write hook fails the write after the core
 * wrote back the values it read from the bound stores the write had
 * already reached (the version does not advance). */
typedef struct sw_te_copy sw_te_copy;

typedef struct sw_te_tier_hooks {
    sw_status (*store)(sw_carrier *prototype, int secondary, int64_t size, sw_dtype dtype,
                       int zero, void *user, sw_carrier **out, sw_error *err);
    sw_status (*copy)(sw_te_copy *job, sw_carrier *from, int from_full, sw_carrier *to,
                      int64_t tile, void *user, sw_error *err);
    sw_status (*read)(sw_carrier *store, int64_t at, int64_t count, void *out, void *user,
                      sw_error *err);
    sw_status (*write)(sw_carrier *store, int64_t at, int64_t count, const void *in, void *user,
                       sw_error *err);
    sw_status (*size)(sw_carrier *tier, void *user, int64_t *out, sw_error *err);
    void (*discard)(sw_carrier *store, void *user);
    void *user;     /* passed to every hook; owned by the caller */
    sw_dtype dtype; /* the dtype when a tier is STATE_ONLY */
    sw_status (*read_many)(sw_carrier *const *store, const int64_t *at, const int64_t *count,
                           sw_carrier *dest, const int64_t *dest_at, int64_t n, void *user,
                           sw_error *err);
    int core_classes; /* 1: the core reaches the slots of its own classes itself (below) */
    /* Optional (NULL: none). What the binding kept for a piece of work (a
     * hook's failure, noted with sw_te_work_note_kept while that work was
     * sw_te_work_current) is its to collect: the core calls work_end(w, 1,
     * user) on the thread of a _start call whose submission failed after
     * its copies were issued (that call's error: the binding hands what it
     * kept for w to this thread), and work_end(w, 0, user) when a noted
     * work item goes (its last reference: drop what is still kept). No core
     * lock held; any thread. */
    void (*work_end)(sw_te_work *w, int to_caller, void *user);
    /* Optional (NULL: none). Whether tiles may be copied from storage like
     * the tier `from` into storage like the tier `to` (the prototypes) by
     * the copy hook, e.g. a binding's movement rules between the two
     * classes: called once per residency request (a promotion, an
     * eviction, a write's promotion, a projection's policy moves) whose
     * tiles, decided under the lock that marked them pending, include one
     * copied between tile-sized stores of the tiers (neither held in place
     * nor implicit), before any fresh store is made. A refusal fails the
     * request with it, nothing changed, no store made. On the thread that
     * issues the copies (sw_te_work_current names asynchronous work), no
     * core lock held, the tiles pending. */
    sw_status (*route)(sw_carrier *from, sw_carrier *to, void *user, sw_error *err);
} sw_te_tier_hooks;

/* Report the outcome of a copy the copy hook took (exactly once; `err`
 * may be NULL). Callable from any thread with no core lock held; does not
 * block. */
SW_API void sw_te_copy_done(sw_te_copy *job, sw_status status, const sw_error *err);

/* sw_tiled_evictable_new with binding tiers: the same checks, except that
 * check 2 also takes a bound tier as primary or secondary, which needs
 * store, read and write (SW_EINVAL otherwise). Bound: one the core cannot
 * address (e.g. a STATE_ONLY class), or one of a class the core does not
 * keep addressed in that role (Generic memory, a FileBacked primary, a
 * BlockDeviceCarrier), which the core then reaches only through the hooks
 * too, as it does every store the store hook makes like it, unless the
 * hooks set core_classes (below). Handing a store request back (SW_ENOTSUP)
 * fails it, except that with core_classes the core then makes a store of
 * its own classes itself, as without hooks (the Python binding hands back
 * every BlockDeviceCarrier store); a STATE_ONLY tier also needs size
 * (SW_EINVAL), and with a STATE_ONLY tier the
 * dtypes are the binding's (check 6 compares only core dtypes; the
 * TiledEvictable takes hooks->dtype). The hooks are copied. new_like and
 * allocate_like of a
 * TiledEvictable with a bound tier fail SW_ENOTSUP (the binding makes its
 * own). */
SW_API sw_status sw_tiled_evictable_new_bound(sw_carrier *primary, sw_carrier *secondary,
                                              int32_t rank, const int64_t *grid,
                                              const int64_t *tile, const sw_te_tier_hooks *hooks,
                                              sw_tiled_evictable **out, sw_error *err);

/* Construction with a starting placement, for a binding's factories
 * (new_like, allocate_like over tiers the core cannot make: the core's own
 * fail SW_ENOTSUP there). sw_tiled_evictable_new (hooks NULL) or _new_bound
 * with the same checks, in the same order, then `implicit` (NULL, or one
 * entry per tile in linear tile order, first axis fastest): a tile with a
 * nonzero entry starts implicit (every slot reads 0; a full tier's slots
 * of that tile are no longer its values) instead of where the tiers'
 * fullness puts it. The version starts at 0. */
SW_API sw_status sw_tiled_evictable_new_placed(sw_carrier *primary, sw_carrier *secondary,
                                               int32_t rank, const int64_t *grid,
                                               const int64_t *tile,
                                               const sw_te_tier_hooks *hooks,
                                               const unsigned char *implicit,
                                               sw_tiled_evictable **out, sw_error *err);

/* For a binding whose write hook reaches a tier given at construction
 * (a full tier holds its tiles in place, and the TiledEvictable claimed it):
 * the TiledEvictable's claim token on the primary (secondary = 0) or the
 * secondary, to pass to sw_carrier_begin_owner_access/_end around the
 * binding's own write (as sw_evictable_tier does for an Evictable). 0 once
 * released. SW_ETYPE for NULL arguments. */
SW_API sw_status sw_tiled_evictable_tier_token(sw_tiled_evictable *te, int secondary,
                                               uint64_t *token, sw_error *err);

/* As a carrier. sw_tiled_evictable_carrier gives an sw_carrier (class
 * sw_tiled_evictable_class, one reference to the caller; it holds its own
 * reference to `te`) whose every carrier.h call works: size is the logical
 * size (0 once `te` is released), the dtype and intrinsic mutability are
 * the TiledEvictable's, and slot reads and writes resolve each slot's tile
 * residency through sw_tiled_evictable_read/_write (a write into a
 * secondary tile promotes it first; both the carrier's version and the
 * TiledEvictable's advance). It has no direct storage: DLPack export is
 * refused. For a TiledEvictable with binding tiers (made by
 * sw_tiled_evictable_new_bound or _new_placed with hooks; not the pairs
 * sw_tiled_evictable_new serves itself), the hooks must run with no core
 * lock held, so the carrier's slot reads and writes (sw_carrier_read,
 * _write: class ops run with the carrier's mutex held) fail SW_ENOTSUP
 * after their checks; the core's layout reads and writes
 * (sw_carrier_read_layout_as, _write_layout_as) and slot copies
 * (sw_carrier_copy_layout) reach the slots through
 * sw_tiled_evictable_read/_write with the mutex dropped, as tensor.h says,
 * as does a caller of those two functions. Moves: the core
 * refuses a move out of or into it (row 9 of move.h's validation:
 * SW_ENOTSUP, before any change; its values stay in its tiers, and a
 * projection copies tiles out); sw_evictable_new refuses it as a tier
 * unless a binding's move hook moves the tiers.
 * sw_carrier_release of the carrier releases the TiledEvictable
 * (sw_tiled_evictable_release, which refuses while work is in progress:
 * call it first where that matters) unless it has binding tiers (the
 * binding releases it first: storage discards run hooks); the last
 * reference to an unreleased carrier only drops its reference to `te`.
 * SW_ETYPE for NULL, SW_ESTATE when `te` is released.
 * sw_tiled_evictable_of: the TiledEvictable of such a carrier (borrowed;
 * NULL for NULL or another class). */
SW_API sw_status sw_tiled_evictable_carrier(sw_tiled_evictable *te, sw_carrier **out,
                                            sw_error *err);
SW_API sw_tiled_evictable *sw_tiled_evictable_of(sw_carrier *c);
SW_API extern const sw_carrier_class sw_tiled_evictable_class;

/* Free every tile's storage and both tiers (released, then no longer
 * claimed). SW_ESTATE while a request or projection is in progress;
 * idempotent. Afterwards size is 0 and everything but introspection fails
 * SW_ESTATE. */
SW_API sw_status sw_tiled_evictable_release(sw_tiled_evictable *te, sw_error *err);

#ifdef __cplusplus
}
#endif

#endif
