/* Carriers: a flat run of typed slots behind an opaque, refcounted handle.
 *
 * A carrier is what a Tensor's values live on: host memory (CPU, Generic),
 * a file (FileBacked), or anything a caller plugs in through an ops table
 * (sw_carrier_new). The core owns every piece of state the contract gives a
 * carrier, the same for built-in and foreign carriers:
 *
 *   - dtype, fixed at creation;
 *   - released flag (sw_carrier_release frees the storage; the handle stays
 *     usable for introspection until its last reference goes);
 *   - version: +1 per successful slot write through sw_carrier_write, never
 *     changed by a move, growth, reads, release or ownership changes;
 *   - intrinsic mutability (fixed at creation) and public mutability:
 *     intrinsic AND (not owned OR this thread holds owner access) AND not
 *     taking part in a pending move;
 *   - the ownership claim protocol a composite (Evictable, TiledEvictable)
 *     uses to take a carrier over: claim -> token, thread-bound re-entrant
 *     owner access, relinquish;
 *   - the pending-transfer guard: from submission to commit, a carrier in a
 *     move refuses writes, release, and another move (SW_ESTATE, message
 *     names "pending"); the source stays readable, the destination does not.
 *
 * Ownership of handles: every function that hands out a carrier through an
 * out-parameter gives the caller one reference; drop it with
 * sw_carrier_unref. The storage stays until sw_carrier_release or the last
 * reference, whichever comes first.
 *
 * Threads: every function here is thread-safe; each carrier has one mutex
 * that serializes its state changes and slot I/O. Calls that may block:
 * slot reads/writes and growth of a FileBacked carrier (file I/O), release
 * of a FileBacked carrier (unlink). None of them waits for a move.
 *
 * Status codes follow status.h: SW_ESTATE for released/owned/pending/
 * immutable carriers, SW_ERANGE for slots out of range, SW_EINVAL for bad
 * values, SW_ETYPE for a NULL handle or a dtype mismatch. A failing call
 * changes nothing. */
#ifndef STRIDEWEAVE_CARRIER_H
#define STRIDEWEAVE_CARRIER_H

#include "strideweave/export.h"

#include <stddef.h>
#include <stdint.h>

#include "strideweave/dtype.h"
#include "strideweave/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sw_carrier sw_carrier;

/* Creation flags. */
enum {
    SW_CARRIER_IMMUTABLE = 1 << 0, /* intrinsic mutability false */
    SW_CARRIER_EMPTY = 1 << 1      /* CPU only: skip zero-filling */
};

/* A storage endpoint: where slot 0 of a run of slots lives, host memory
 * or a file descriptor (the core's transfer kernels copy between two). */
typedef enum sw_endpoint_kind {
    SW_ENDPOINT_HOST = 1, /* `host` points at slot 0 */
    SW_ENDPOINT_FILE = 2  /* `fd` holds slot 0 at byte 0 */
} sw_endpoint_kind;

typedef struct sw_endpoint {
    sw_endpoint_kind kind;
    void *host;
    int fd;
    int64_t offset; /* slot of coordinate 0 (the tensor's offset) */
} sw_endpoint;

/* Where a carrier's slots can be reached without its ops, for the bulk
 * move routes and DLPack export. */
typedef struct sw_carrier_storage {
    sw_endpoint_kind kind; /* SW_ENDPOINT_HOST or SW_ENDPOINT_FILE */
    void *host;            /* HOST: slot 0 */
    int fd;                /* FILE: slot 0 at byte 0 */
} sw_carrier_storage;

/* A carrier class: the ops table every carrier of one kind shares. `impl`
 * is the pointer given to sw_carrier_new. The core calls these (all but
 * read_slots and write_slots, which it calls with no lock held)
 *   - from sw_carrier_* entry points with the carrier's mutex held (so they
 *     must not call sw_carrier_* on the same carrier), and
 *   - from a pool thread during a move's transfer, with no lock held; the
 *     pending guard then guarantees that nothing else writes or releases
 *     the carrier meanwhile.
 * Every callback may fail with a status and a filled `err`; a failing
 * callback must leave the storage as it was (read/write may leave the
 * written slots unspecified). Route matching for moves compares ops table
 * pointers: a table is a carrier class. Read/write buffers hold slots of
 * sw_dtype_slot_bytes(dtype) bytes each. */
typedef struct sw_carrier_class {
    const char *name; /* the class name used in messages, e.g. "CPU" */
    /* Physical slots now; only called while live. */
    int64_t (*size)(void *impl);
    /* Copy `count` slots from `slot` into `out` / from `in`. Range checked
     * by the core. */
    sw_status (*read)(void *impl, int64_t slot, int64_t count, void *out, sw_error *err);
    sw_status (*write)(void *impl, int64_t slot, int64_t count, const void *in,
                       sw_error *err);
    /* Optional: grow an empty carrier to `slots` (allocatable-empty), and
     * shrink it back to 0 to undo a growth a failed move made. */
    sw_status (*allocate)(void *impl, int64_t slots, sw_error *err);
    sw_status (*unallocate)(void *impl, sw_error *err);
    /* Optional: direct access for bulk routes and DLPack. */
    sw_status (*storage)(void *impl, sw_carrier_storage *out, sw_error *err);
    /* Optional: DLPack device of `storage`'s host pointer; NULL means the
     * carrier refuses DLPack export. */
    sw_status (*dlpack_device)(void *impl, int32_t *device_type, int32_t *device_id,
                               sw_error *err);
    /* Free the storage; called once, at release or at the last reference. */
    void (*release)(void *impl);
    /* Free `impl` itself; called once when the last reference goes. */
    void (*destroy)(void *impl);
    /* SW_CARRIER_CLASS_* bits; 0 for an ordinary class. */
    unsigned flags;
    /* SLOTS_UNLOCKED classes only (see the flag below; NULL otherwise):
     * the values of `n` slots, slots[i] for i in [0, n), in that order,
     * into / from `buf` as values of `as` (sw_dtype_slot_bytes(as) bytes
     * each; 8, a binary64, for SW_DT_FLOAT64). The core calls them with
     * no lock held. read_slots is required of a SLOTS_UNLOCKED class;
     * write_slots may be NULL: the core then refuses batch writes
     * (sw_carrier_write_layout_as, and so sw_tensor_copy/_fill into it)
     * with SW_ENOTSUP before calling anything, and the binding writes the
     * slots its own way. */
    sw_status (*read_slots)(void *impl, const int64_t *slots, int64_t n, sw_dtype as,
                            void *buf, sw_error *err);
    sw_status (*write_slots)(void *impl, const int64_t *slots, int64_t n, sw_dtype as,
                             const void *buf, sw_error *err);
    /* Optional, SLOTS_UNLOCKED classes only: drop `n` handles its
     * read_slots gave as SW_AS_HANDLE values (below). Called with no lock
     * held; must not fail. NULL: the class's slots are never copied as
     * handles (sw_carrier_copy_layout refuses SW_AS_HANDLE from it). */
    void (*drop_handles)(void *impl, void *const *handles, int64_t n);
    /* Optional (never called for a STATE_ONLY class): why the live
     * carrier cannot reach its slots right now (an evicted Evictable, a
     * BlockDeviceCarrier on a faulted device), in words for its user, or
     * NULL when it can. Static storage; called with the carrier's mutex
     * held; must not fail, block or call sw_carrier_*. Slot reads and
     * writes are refused with those words right after the released check
     * (SW_CARRIER_REFUSED_UNAVAILABLE below). */
    const char *(*unavailable)(void *impl);
} sw_carrier_class;

/* A value kind for the batch callbacks and sw_carrier_copy_layout, not a
 * dtype: one pointer-sized handle per slot, an object of the binding that
 * keeps the slots (a Python object, say: a carrier of dtype Any holds
 * values no slot width describes). read_slots gives one owned handle per
 * slot; write_slots borrows them (it takes references of its own if it
 * keeps them); the core hands each back to the reading class's
 * drop_handles once written. The core never looks inside a handle. */
#define SW_AS_HANDLE ((sw_dtype)64)

/* Class flags.
 *
 * SW_CARRIER_CLASS_STATE_ONLY: the core holds the carrier's state (version,
 * released flag, mutability, claims and owner access, pending marks,
 * transfer access) but not its slots: a language binding keeps the slots
 * and answers size and dtype through hooks of its own (a Python carrier
 * class, say). Such a class may leave every callback NULL; the core calls
 * none of them except `release` and `destroy` when set (both optional),
 * and read_slots / write_slots of a SLOTS_UNLOCKED class (below).
 * Its dtype may be SW_DT_ANY or any other dtype, slot width or not: it is
 * only reported back. What the core refuses for it, before any change:
 *   - sw_carrier_read, _write, _allocate, _unallocate: SW_ENOTSUP, the
 *     message says the binding reaches the slots;
 *   - sw_tensor_new*, and so sw_move and DLPack export: SW_ENOTSUP;
 *   - moves and composites (sw_move_pair_allowed is 0 for it, so
 *     sw_evictable_new refuses it; sw_tiled_evictable_new takes CPU and
 *     FileBacked tiers only).
 * sw_carrier_size answers 0 (the size is the binding's). Every state call
 * works as for any carrier: version, release, claims, pending marks,
 * transfer access, sw_carrier_increment_version.
 *
 * Deadlock rule. The core calls a class's callbacks with the carrier's
 * mutex held (all but the batch slot callbacks of SLOTS_UNLOCKED below). A binding whose hooks need a lock of its own (Python's GIL)
 * must therefore not put them in an ops table the core calls: it gives
 * its carriers a STATE_ONLY class, so that no core path ever calls into
 * the binding while holding a carrier mutex, and a thread holding the GIL
 * may call any sw_carrier_* function on such a carrier while another
 * thread does the same without either waiting on the other's lock.
 * (`release` and `destroy` of a STATE_ONLY class run with the mutex held
 * too: they must not take such a lock.)
 *
 * SW_CARRIER_CLASS_RELEASE_REMOVES_FILES: the class's `release` may remove
 * FileBacked files (its own, or those of carriers it holds, as Evictable
 * and TiledEvictable do). A move that releases a source of such a class
 * leaves the closing of a large removed file to the background
 * (sw_filestore_defer_large_closes), so the move's caller does not pay
 * for freeing its storage; the name is gone all the same. A class without
 * the flag releases as it would anywhere else. */
/* SW_CARRIER_CLASS_RUNS_NO_USER_CODE: every callback of the class is the
 * core's own (CPU, Generic, FileBacked, BlockDeviceCarrier): reading its
 * dtype, size and state, growing it and copying into it run no code of a
 * caller or binding. A binding may skip re-checking such a carrier after
 * the core checked it, since nothing of its own ran in between. Never set
 * it on a class whose callbacks (or whose binding's hooks) run code of
 * their own.
 *
 * SW_CARRIER_CLASS_REFCOUNTED: set by the core on a class made by
 * sw_carrier_class_new (see below), never by a caller (a static table
 * must leave it clear; sw_carrier_class_new clears it from its template).
 *
 * SW_CARRIER_CLASS_SLOTS_UNLOCKED, with STATE_ONLY: the binding keeps the
 * slots but lets the core reach them in batches through `read_slots` and
 * `write_slots`, which the core calls holding NO lock (so they may take
 * the GIL and run Python, and may call any sw_carrier_* function on the
 * carrier, which its hooks' own checks do). This is how one core path
 * (sw_carrier_read_layout_as, sw_carrier_write_layout_as in tensor.h)
 * serves a binding's carriers too. The core's order for each call:
 *   1. under the carrier's mutex, the checks of sw_carrier_read / _write
 *      (released, pending, owned, immutable: SW_ESTATE, nothing called);
 *   2. the mutex dropped, the slot walk computed, the callback called;
 *   3. a write that succeeded: the mutex taken again and the version
 *      stepped by 1 (not under this thread's transfer access, and not once
 *      the carrier was released meanwhile), whatever `n` was; none at all
 *      for a class with WRITES_STEP_VERSION (below).
 * Race: between 1 and 2 another thread may release the carrier, mark it
 * pending or claim it; the core does not look again. The callback owns
 * the slots and must re-check what it needs before touching them (the
 * Python binding's hooks check the state before every slot, as they do
 * for a slot read from Python). Everything else a STATE_ONLY class is
 * refused stays refused (sw_carrier_read/_write, tensors, moves).
 *
 * SW_CARRIER_CLASS_WRITES_STEP_VERSION, with SLOTS_UNLOCKED: `write_slots`
 * steps the version itself, as its binding's writes do, and the core adds
 * no step of its own (step 3 is skipped). Why a flag and not the core's
 * step, nor one core step per slot: a binding that writes each slot
 * through its own checked write (Python's C-5: every successful write
 * steps the version by one, unless it is the move's own transfer, and a
 * user's set_value that stepped the version itself is not stepped again)
 * already counts exactly what its users see, slot by slot, whoever asked
 * for the write. A step by the core on top would count a batch twice; a
 * core step per slot would miss the binding's exceptions. So the write
 * of n slots through the core leaves the version where n writes from the
 * binding's own language would, and a callback failing at slot k leaves
 * the slots before k written and their steps made, as those writes would
 * (the core undoes nothing: the values are the binding's).
 *
 * A callback failing with an error of its binding's own that the binding
 * keeps on the calling thread (a Python exception) sets err->detail to
 * SW_CARRIER_CALLBACK_RAISED: the core hands such an err back untouched,
 * and the binding re-raises its original error instead of translating
 * the status. */
enum {
    SW_CARRIER_CLASS_STATE_ONLY = 1u << 0,
    SW_CARRIER_CLASS_RELEASE_REMOVES_FILES = 1u << 1,
    SW_CARRIER_CLASS_RUNS_NO_USER_CODE = 1u << 2,
    SW_CARRIER_CLASS_SLOTS_UNLOCKED = 1u << 3,
    SW_CARRIER_CLASS_WRITES_STEP_VERSION = 1u << 4,
    SW_CARRIER_CLASS_REFCOUNTED = 1u << 30
};
/* err->detail of a callback failure its binding keeps (see above). */
enum { SW_CARRIER_CALLBACK_RAISED = 0x5742 };
/* ---- Classes made at run time -----------------------------------------
 * A static `sw_carrier_class` table lives as long as the program. A
 * binding that makes classes as its language does (one per Python Carrier
 * subclass, say; classes there can be collected) makes them here instead:
 * a refcounted copy of a template, so that a carrier that outlives the
 * binding's class object (a move in flight holds it) still has its class.
 *
 * Ownership: sw_carrier_class_new gives the caller one reference. Every
 * carrier of the class holds one (sw_carrier_new takes it, the carrier's
 * last unref drops it), and so does every route the registry holds naming
 * it (route.h). The class is freed with its last reference. A class's
 * routes therefore keep it alive: an owner done with its class calls
 * sw_route_forget_class (its routes go) and then sw_carrier_class_unref;
 * carriers of the class still alive keep it (name, flags) until they go.
 *
 * ref and unref of a static table (the built-ins, or any table not made
 * by sw_carrier_class_new) do nothing. Both are thread-safe and lock-free;
 * the last unref frees only the copy (it calls no callback). */

/* A refcounted copy of `tmpl` (its name copied too; callbacks and flags as
 * they are, SW_CARRIER_CLASS_REFCOUNTED added). SW_ETYPE for a NULL
 * template or `out`, SW_ENOMEM. */
SW_API sw_status sw_carrier_class_new(const sw_carrier_class *tmpl,
                                      const sw_carrier_class **out, sw_error *err);
/* One more reference; returns its argument. NULL is ignored. */
SW_API const sw_carrier_class *sw_carrier_class_ref(const sw_carrier_class *cls);
/* Drop one; the last frees the class. NULL is ignored. */
SW_API void sw_carrier_class_unref(const sw_carrier_class *cls);

/* 1 when `c`'s class is STATE_ONLY. */
SW_API int sw_carrier_is_state_only(sw_carrier *c);
/* 1 when `c`'s class is SLOTS_UNLOCKED (its binding's slots reachable
 * through sw_carrier_read_layout_as / _write_layout_as). */
SW_API int sw_carrier_slots_unlocked(sw_carrier *c);

/* A carrier from another language: the core takes over the handle state,
 * `ops` supplies the storage. A static `ops` must outlive the carrier; one
 * from sw_carrier_class_new is referenced by the carrier (the caller may
 * drop its own reference at once). `impl` is owned by the carrier from
 * success on (ops->destroy frees it); on failure the caller keeps it.
 * SW_EINVAL for a table without size/read/write/release or a dtype with no
 * slot width (categories, compound dtypes), unless the class is STATE_ONLY
 * (see above: any callback may be NULL, any dtype below SW_DT_COUNT);
 * SW_EINVAL too for a SLOTS_UNLOCKED class that is not STATE_ONLY or lacks
 * read_slots, and for WRITES_STEP_VERSION without SLOTS_UNLOCKED and
 * write_slots. */
SW_API sw_status sw_carrier_new(const sw_carrier_class *ops, void *impl, sw_dtype dtype, int flags,
                                sw_carrier **out, sw_error *err);

/* Built-in carriers. */
/* CPU: `size` slots of host memory (Float32, Int32, Bool), zeroed unless
 * SW_CARRIER_EMPTY; exports through DLPack. SW_EINVAL for a negative size
 * or an unsupported dtype. */
SW_API sw_status sw_cpu_new(int64_t size, sw_dtype dtype, int flags, sw_carrier **out,
                            sw_error *err);
/* Address of slot 0 (NULL after release). Writes through it bypass the
 * version. */
SW_API void *sw_cpu_pointer(sw_carrier *c);
/* Generic: typed slots copied from `values` (`count` slots of the dtype's
 * slot width; Bool slots are one byte, 0 or 1). Fixed size, no DLPack, no
 * bulk route. */
SW_API sw_status sw_generic_new(const void *values, int64_t count, sw_dtype dtype, int flags,
                                sw_carrier **out, sw_error *err);
/* Address of a Generic carrier's slot 0 (NULL after release or for a
 * carrier of another class), for a binding that keeps its slots in the core
 * carrier. Not an export: Generic still refuses DLPack. Writes through it
 * bypass the version. */
SW_API void *sw_generic_pointer(sw_carrier *c);
/* FileBacked: a file in the per-process session directory (filestore.h),
 * named `filename` (NULL: generated), Float32 or Int32, size 0 and
 * allocatable-empty. SW_EINVAL for a bad name or dtype, SW_EEXIST when the
 * file exists (left untouched), SW_EIO when it cannot be created. */
SW_API sw_status sw_file_backed_new(const char *filename, sw_dtype dtype, int flags,
                                    sw_carrier **out, sw_error *err);
/* The file's absolute path, valid while the handle lives (also after
 * release); NULL for a carrier that is not FileBacked. */
SW_API const char *sw_file_backed_path(sw_carrier *c);

/* The file's open descriptor, for a binding that reads and writes the
 * slots itself (slot i at byte i * slot width); -1 after release or for a
 * carrier that is not FileBacked. It stays owned by the carrier: do not
 * close it. */
SW_API int sw_file_backed_fd(sw_carrier *c);
/* Grow an empty FileBacked to `slots` for a caller that writes all of
 * [0, slots) next: the size is recorded and that write sets the file's
 * length (a resize first would cost a small write a system call of about
 * its own cost); a caller whose write fails undoes the growth with
 * sw_carrier_unallocate. Until that write, reading the new slots fails
 * (SW_EIO, end of file), and a length the file system cannot hold is
 * only refused by the write. A carrier that is not empty grows as
 * sw_carrier_allocate does. Otherwise the checks and errors of
 * sw_carrier_allocate; SW_ETYPE for a carrier that is not FileBacked.
 * Thread-safe. */
SW_API sw_status sw_file_backed_allocate_for_write(sw_carrier *c, int64_t slots,
                                                   sw_error *err);

/* The ops tables of the built-ins, for comparing classes. */
SW_API extern const sw_carrier_class sw_cpu_class;
SW_API extern const sw_carrier_class sw_generic_class;
SW_API extern const sw_carrier_class sw_file_backed_class;

/* References. ref returns its argument; unref of the last reference
 * releases the storage if still live and frees the handle. NULL is
 * ignored. */
SW_API sw_carrier *sw_carrier_ref(sw_carrier *c);
SW_API void sw_carrier_unref(sw_carrier *c);

/* Introspection (`c` must not be NULL); never fails. After release size
 * is 0. */
SW_API const sw_carrier_class *sw_carrier_class_of(sw_carrier *c);
SW_API const char *sw_carrier_name(sw_carrier *c);
SW_API sw_dtype sw_carrier_dtype(sw_carrier *c);
SW_API int64_t sw_carrier_size(sw_carrier *c);
SW_API uint64_t sw_carrier_version(sw_carrier *c);
SW_API int sw_carrier_is_released(sw_carrier *c);
SW_API int sw_carrier_is_mutable(sw_carrier *c); /* public mutability, see top */
SW_API int sw_carrier_is_owned(sw_carrier *c);
SW_API int sw_carrier_is_pending(sw_carrier *c); /* taking part in a move */

/* The tier checks a composite carrier (Evictable E-1, TiledEvictable TE-1)
 * starts with, in their order: two distinct carriers (SW_EINVAL), neither
 * released, then neither owned by another composite (SW_ESTATE). The words
 * are the Python API's and name the role and the class: "the secondary
 * FileBacked carrier is released". SW_ETYPE for NULL. Nothing changes; a
 * snapshot (thread-safe): sw_evictable_new and sw_tiled_evictable_new check
 * again when they claim the tiers. For a binding that must refuse before it
 * asks the tiers anything (their dtype, their size). */
SW_API sw_status sw_carrier_check_tier_pair(sw_carrier *primary, sw_carrier *secondary,
                                            sw_error *err);

/* Why a slot access, a version step, a growth or a release was refused:
 * err->detail of a refusal by the calls below, so that a binding says it in its own words without looking
 * at the state again (that look could see a later state than the one
 * refused). The values stay clear of other headers' details (move.h rows,
 * tensor.h element refusals), since a carrier's error can travel through
 * their calls. */
typedef enum sw_carrier_refusal {
    SW_CARRIER_REFUSED_RELEASED = 0x5701,    /* SW_ESTATE */
    SW_CARRIER_REFUSED_UNAVAILABLE = 0x5702, /* SW_ESTATE; err->msg is the class's
                                                `unavailable` words as they are */
    SW_CARRIER_REFUSED_PENDING = 0x5703,     /* SW_ESTATE: taking part in a move
                                                (a read: as its destination) */
    SW_CARRIER_REFUSED_OWNED = 0x5704,       /* SW_ESTATE: owned, no owner access here */
    SW_CARRIER_REFUSED_IMMUTABLE = 0x5705,   /* SW_ESTATE: intrinsically immutable */
    SW_CARRIER_REFUSED_RANGE = 0x5706,       /* SW_ERANGE: slot outside [0, size) */
    SW_CARRIER_REFUSED_SHRINK = 0x5707,      /* SW_EINVAL: growth to fewer slots than
                                                the carrier has */
    SW_CARRIER_REFUSED_TOKEN = 0x5708,       /* SW_ESTATE: not the owner's token */
    SW_CARRIER_REFUSED_ACCESS_ELSEWHERE = 0x5709, /* SW_ESTATE: another thread holds
                                                     owner access */
    SW_CARRIER_REFUSED_NO_ACCESS = 0x570a    /* SW_ESTATE: this thread holds no owner
                                                access (an end without a begin) */
} sw_carrier_refusal;

/* Slot access, checks in this order: released, unavailable (the class's
 * `unavailable`), then for a write pending, owned without owner access
 * here, immutable, and for a read pending as a move's destination without
 * transfer access here; then range. err->detail names the rule
 * (sw_carrier_refusal); the class's own I/O may still fail after them
 * (detail 0). A write adds 1 to the version. `count` slots of
 * sw_dtype_slot_bytes(dtype) bytes each (Bool: one byte, 0 or 1). */
SW_API sw_status sw_carrier_read(sw_carrier *c, int64_t slot, int64_t count, void *out,
                                 sw_error *err);
SW_API sw_status sw_carrier_write(sw_carrier *c, int64_t slot, int64_t count, const void *in,
                                  sw_error *err);
/* Whether a write / read of slot `slot` would be let through now, without
 * making it: the checks of sw_carrier_write / sw_carrier_read above, in
 * their order, under one lock. SW_OK, or the refusal those calls would
 * give (same status, err->detail the sw_carrier_refusal). `size_seen`
 * (may be NULL) gets the size the range check compared against: 0 once
 * released, -1 for a STATE_ONLY carrier, whose size is its binding's, so
 * that its range (and an intrinsic mutability the binding keeps) is left
 * to the binding. Nothing changes; a snapshot: the state may change
 * before a later write, which checks again. For a binding that must
 * refuse before work of its own (converting a value, say) in the order
 * the write itself refuses. Thread-safe; never blocks on I/O. SW_ETYPE
 * for NULL. */
SW_API sw_status sw_carrier_check_write_slot(sw_carrier *c, int64_t slot, int64_t *size_seen,
                                             sw_error *err);
SW_API sw_status sw_carrier_check_read_slot(sw_carrier *c, int64_t slot, int64_t *size_seen,
                                            sw_error *err);
/* +1 on the version (a write that bypassed sw_carrier_write); refused like
 * a write (released, pending, owned, immutable; err->detail the
 * sw_carrier_refusal), and no step under transfer access. */
SW_API sw_status sw_carrier_increment_version(sw_carrier *c, sw_error *err);

/* Growth of a carrier whose class can allocate (FileBacked): to `slots`
 * slots, the new ones reading 0; the same size again does nothing. Growth
 * changes no version and ignores intrinsic mutability (an empty carrier is
 * filled by a move), but is refused like a release, checks in this order:
 * SW_ESTATE when released, taking part in a pending move (even under
 * transfer access), or owned without owner access on this thread
 * (err->detail RELEASED, PENDING, OWNED); SW_EINVAL when the class cannot
 * allocate (detail 0) or `slots` is below the size (SHRINK); SW_EOVERFLOW
 * for a size past the file limit; SW_EIO from the file system. The size is
 * unchanged on failure. */
SW_API sw_status sw_carrier_allocate(sw_carrier *c, int64_t slots, sw_error *err);
/* Whether sw_carrier_allocate(c, slots) would be let through now, without
 * growing: its checks in its order, under one lock, and the same refusal
 * (status, err->detail). `size_seen` (may be NULL) gets the size the
 * shrink check compared against (0 once released or refused before it),
 * so that a binding words a SHRINK refusal, or skips a growth to the same
 * size, without a second look. Nothing changes; a snapshot: the growth
 * checks again. SW_ETYPE for NULL. */
SW_API sw_status sw_carrier_check_allocate(sw_carrier *c, int64_t slots, int64_t *size_seen,
                                           sw_error *err);
/* Back to 0 slots: undoes the growth of a move that failed, on whichever
 * thread finishes the move: ownership was checked when the move started,
 * so only released, pending and a class without growth are refused. */
SW_API sw_status sw_carrier_unallocate(sw_carrier *c, sw_error *err);

/* Free the storage. Checks in this order: SW_ESTATE while taking part in
 * a pending move (err->detail PENDING), then while owned without owner
 * access on this thread (OWNED), released or not; a carrier released
 * before is then left as it is (SW_OK: idempotent). */
SW_API sw_status sw_carrier_release(sw_carrier *c, sw_error *err);
/* Whether sw_carrier_release(c) would be let through now, without
 * releasing: its checks in its order and the same refusal. `released_seen`
 * (may be NULL) gets 1 when the carrier was released already (the release
 * would do nothing). For a binding that frees a STATE_ONLY carrier's
 * storage itself before sw_carrier_release marks it released (which
 * checks again). Nothing changes; SW_ETYPE for NULL. */
SW_API sw_status sw_carrier_check_release(sw_carrier *c, int *released_seen, sw_error *err);

/* Ownership claims. claim: SW_ESTATE when released, owned (with or
 * without owner access) or pending, in that order, err->detail the
 * sw_carrier_refusal (RELEASED, OWNED, PENDING); gives a non-zero token. The token-taking calls fail SW_ESTATE for a
 * wrong token (err->detail TOKEN); begin/end are re-entrant and bound to
 * the calling thread, checked after the token: begin while another thread
 * holds access, end on a thread that holds none → SW_ESTATE (detail
 * ACCESS_ELSEWHERE, NO_ACCESS). */
SW_API sw_status sw_carrier_claim(sw_carrier *c, uint64_t *token, sw_error *err);
SW_API sw_status sw_carrier_relinquish(sw_carrier *c, uint64_t token, sw_error *err);
SW_API sw_status sw_carrier_begin_owner_access(sw_carrier *c, uint64_t token, sw_error *err);
SW_API sw_status sw_carrier_end_owner_access(sw_carrier *c, uint64_t token, sw_error *err);
SW_API int sw_carrier_has_owner_access(sw_carrier *c);

/* The state a language binding's own move engine drives (pending marks,
 * transfer access, a one-lock state snapshot) is set through binding.h,
 * not here: those calls skip the checks the calls above make. */

#ifdef __cplusplus
}
#endif

#endif
