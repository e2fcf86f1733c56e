/* Private interface between the carrier files of the extension: the base
 * (py_carrier.c), below it the construction helpers (py_carrier_args.c) and
 * above it the host body (py_host.c) and the classes (py_generic.c,
 * py_cpu.c, py_file_backed.c, ...), which register with the base.
 *
 * The framework-owned paths in py_carrier.c (C-4/C-5 checks, release,
 * mutability) use `sw_py_carrier_ops` for exact built-in carriers instead of
 * calling their Python-visible hooks; user subclasses go through dynamic
 * attribute lookup. */
#ifndef STRIDEWEAVE_SW_CARRIER_H
#define STRIDEWEAVE_SW_CARRIER_H

#include "sw_python.h"

#include "strideweave/block_device.h"
#include "strideweave/tiled_evictable.h"

typedef struct sw_py_carrier_ops {
    const char *name;                       /* class name for messages */
    sw_dtype (*dtype)(PyObject *self);
    int64_t (*size)(PyObject *self);        /* 0 after release */
    /* Slot access of a class whose slots the core may not hold: its core
     * carrier is STATE_ONLY, or answers SW_ENOTSUP (an Evictable over a
     * Python tier, a TiledEvictable: its tiers are the binding's). Live carrier, index in range. NULL where the core
     * holds the slots (CPU, Generic, FileBacked, BlockDeviceCarrier): their
     * slots are read and written by sw_carrier_read / sw_carrier_write. */
    PyObject *(*load)(PyObject *self, int64_t index);
    /* Write one slot already normalized (C-9) by sw_py_store_slot into
     * `slot`. Nothing changes on failure. No version. */
    int (*store)(PyObject *self, int64_t index, const void *slot);
    int (*supports)(sw_dtype dtype);        /* C-6 table */
    /* The binding's part of a release (C-15), after the core released:
     * drop the object's views of the storage (a composite: its tiers'
     * binding storage). Not at deallocation: the core carrier's last
     * reference frees storage never released. */
    void (*drop)(PyObject *self);
    /* Optional. A message when the live carrier cannot reach its slots
     * now, else NULL: for the repr. Reads and writes are refused with the
     * same words by the core (carrier.h: the class's `unavailable`). */
    const char *(*unavailable)(PyObject *self);
    /* Optional. C-6 for carriers whose answer depends on the instance
     * (composites: the tiers' intersection); 1/0/-1. */
    int (*supports_self)(PyObject *self, sw_dtype dtype);
    /* 1 when releasing the core carrier may block (a block device waits
     * for the moves on its extent), so it is released without the GIL
     * (BlockDeviceCarrier). */
    int core_io;
    /* 1 when an empty instance grows through the class's own `_allocate`,
     * which an instance cannot hide (FileBacked): moves into one skip the
     * attribute lookup. */
    int grows;
    /* The core class of the class's carriers when it makes its own core
     * carrier (own_core below: CPU, Generic, FileBacked, Evictable, TiledEvictable,
     * BlockDeviceCarrier); NULL when its carriers are STATE_ONLY in the
     * core and get the class of sw_py_state_only_class. */
    const sw_carrier_class *core_class;
    /* Optional. The exception the class's hooks kept for this thread when
     * a core call they served failed (a TiledEvictable's tier hooks run
     * without the caller's GIL and keep a tier's exception), taken; NULL
     * when none. */
    PyObject *(*kept_error)(PyObject *self);
} sw_py_carrier_ops;

/* Whether a slot access on `core` may wait for work whose finishing may
 * need the GIL, so it is made without it: a block device waits for a move
 * on its range; a TiledEvictable's write may wait for a tile copy a
 * provider finishes (its tier hooks take the GIL back). No other built-in
 * waits (carrier.h): one slot of host memory, a file or an Evictable's
 * tier is reached with the GIL held. */
static inline int sw_py_core_io_waits(sw_carrier *core)
{
    const sw_carrier_class *k = sw_carrier_class_of(core);
    return k == &sw_block_device_carrier_class || k == &sw_tiled_evictable_class;
}

/* Run `call` (a core call) without the GIL when `go` (a call that may
 * wait must not hold it). */
#define SW_CORE_CALL(go, call)                                                                   \
    do {                                                                                         \
        if (go) {                                                                                \
            Py_BEGIN_ALLOW_THREADS call;                                                         \
            Py_END_ALLOW_THREADS                                                                 \
        } else {                                                                                 \
            call;                                                                                \
        }                                                                                        \
    } while (0)

extern const sw_py_carrier_ops sw_py_generic_ops;
extern const sw_py_carrier_ops sw_py_cpu_ops;
extern PyTypeObject SwTiledEvictable_Type;

/* The core class of `type`'s carriers, borrowed (it lives while `type`
 * does), or NULL with an exception: a built-in's own class, else the one
 * sw_py_state_only_class makes. A carrier's core class is its class's
 * route key in the core's registry (route.h). */
const sw_carrier_class *sw_py_carrier_core_class(PyTypeObject *type);
/* The STATE_ONLY core class of `type` (py_carrier_class.c), made on first
 * use and kept while `type` lives; when `type` is collected its routes
 * are forgotten and the class goes with its last carrier. Borrowed; NULL
 * with an exception. GIL held. */
const sw_carrier_class *sw_py_state_only_class(PyTypeObject *type);
/* The `impl` of a STATE_ONLY core carrier (py_carrier_class.c): its
 * Python object, borrowed, NULL once the object is gone. */
typedef struct sw_py_slot_box {
    PyObject *obj;
} sw_py_slot_box;
/* A box naming `obj` (raw memory; the core carrier frees it), or NULL. */
sw_py_slot_box *sw_py_slot_box_new(PyObject *obj);
/* The object is going: the box names nothing from now on. NULL ignored. */
void sw_py_slot_box_forget(sw_py_slot_box *box);
/* The batch slot callbacks (read_slots, write_slots of `hooks`) the
 * classes made from now on get, with SLOTS_UNLOCKED (py_carrier_slots.c
 * registers them at module init, before any class is made). */
void sw_py_carrier_class_set_slot_hooks(const sw_carrier_class *hooks);

/* A weakref to `cls` whose callback deletes `key` from the dict `table`
 * (a class's entry goes with the class). New reference, or NULL. */
PyObject *sw_py_weakref_forgetting(PyTypeObject *cls, PyObject *table, PyObject *key);

/* ops for an object whose type is exactly a built-in carrier, else NULL. */
const sw_py_carrier_ops *sw_py_carrier_builtin_ops(PyObject *obj);
/* sw_py_carrier_ops.kept_error of the carrier's class: taken, or NULL. */
PyObject *sw_py_carrier_kept_error(PyObject *carrier);
/* The same for a class: the ops of exactly `type`, else NULL. */
const sw_py_carrier_ops *sw_py_carrier_type_ops(PyTypeObject *type);

/* ---- filled from above at module init -----------------------------------
 * The base never names the files above it: each built-in carrier class
 * registers itself from its own init (before its PyType_Ready), with
 * `own_core` when it makes its own core carrier (sw_py_carrier_alloc then
 * makes none); -1 with SystemError when the table is full.
 * Carrier.dispatch_op is py_minimal_ops.c's, added to the type at module
 * init; the repr of every carrier is py_repr.c's, put into Carrier's
 * tp_repr before Carrier is made ready. Class definitions are read from
 * the table below Carrier (py_definitions.c, sw_extension.h). */
int sw_py_carrier_register_builtin(PyTypeObject *type, const sw_py_carrier_ops *ops, int own_core);

/* Owner access (C-13) for composites written in C; end does nothing for a
 * wrong token. */
int sw_py_carrier_begin_owner(PyObject *carrier, int64_t token);
void sw_py_carrier_end_owner(PyObject *carrier, int64_t token);
/* Composite tier checks: distinct, neither released, neither owned (else
 * ValueError / RuntimeError naming the role). 0 / -1. */
int sw_py_check_tier_pair(PyObject *p, PyObject *s);
/* The release a move's commit does to its source (see py_carrier.c). */
int sw_py_carrier_release_moved(PyObject *carrier);
/* The same after a move the core ran and committed itself: the core has
 * released the source under its lock and the GIL has been held since, so
 * only the object's views are left to drop (no state read). */
void sw_py_carrier_drop_core_released(PyObject *carrier);
/* The binding's part of a release (built-in views, definition-backed
 * storage, a subclass's release hook), whatever the core state says. */
int sw_py_carrier_drop_storage(PyObject *carrier);

/* A fresh instance of `type` (a Carrier subtype) with framework state set
 * (C-1). */
PyObject *sw_py_carrier_alloc(PyTypeObject *type, int intrinsic_mutable);

/* Methods every built-in carrier lists in its method table; they read the
 * exact built-in's ops. */
PyObject *sw_py_carrier_meth_size(PyObject *self, PyObject *unused);
PyObject *sw_py_carrier_meth_dtype(PyObject *self, PyObject *unused);
PyObject *sw_py_carrier_meth_get_value(PyObject *self, PyObject *index);
PyObject *sw_py_carrier_meth_set_value(PyObject *self, PyObject *const *args,
                                       Py_ssize_t nargs);
PyObject *sw_py_carrier_meth_intrinsic_mutable(PyObject *self, PyObject *unused);
PyObject *sw_py_carrier_meth_supports_own(PyObject *self, PyObject *dtype);

/* C-18: the TypeError for subclassing the closed carrier `name`. Returns
 * NULL with the exception set. */
PyObject *sw_py_carrier_reject_subclass(const char *name);
/* Defines `fn`, the __init_subclass__ classmethod of the closed built-in
 * carrier `name` (C-18): one body for CPU, Generic and FileBacked. */
#define SW_CARRIER_CLOSED_INIT_SUBCLASS(fn, name)                             \
    static PyObject *fn(PyObject *cls, PyObject *args, PyObject *kwds)        \
    {                                                                         \
        (void)cls;                                                            \
        (void)args;                                                           \
        (void)kwds;                                                           \
        return sw_py_carrier_reject_subclass(name);                           \
    }
/* tp_new backstop: -1 with TypeError unless `type` is exactly `closed`. */
int sw_py_carrier_check_exact(PyTypeObject *type, PyTypeObject *closed);

/* Argument helpers shared by the carrier classes (py_carrier_args.c). */
/* G-2 integer >= 0 named `what`: TypeError / ValueError / OverflowError. */
int sw_py_carrier_parse_size(PyObject *obj, const char *what, int64_t *out);
/* Resolve a dtype argument (NULL → `dflt`; None is a non-DType, so callers
 * where None means "keep", like new_like, pass NULL) against `accepted`
 * (C-7). */
int sw_py_carrier_parse_dtype(PyObject *obj, sw_dtype dflt, const char *carrier,
                              const sw_dtype *accepted, int naccepted,
                              sw_dtype *out);
/* bool(obj) for mutable/empty flags: 1/0/-1. */
int sw_py_carrier_truth(PyObject *obj, int dflt);
/* The `mutable` (default true) then `empty` (default false) flags of an
 * allocation call, each tested once in that order: 0, or -1 with the
 * exception set. */
int sw_py_carrier_parse_flags(PyObject *mutable_obj, PyObject *empty_obj, int *mutable_, int *empty);

/* Normalize every entry of `seq` (a private tuple, None → zero when
 * `none_is_zero`) into `buf` of slots of `dtype`. Values are always taken
 * as a tuple (PySequence_Tuple), never a list: conversion hooks run in the
 * loop and could otherwise empty the container under it. */
int sw_py_carrier_fill_slots(sw_dtype dtype, PyObject *seq, int none_is_zero,
                             void *buf);
/* iter(values); TypeError naming `what` if not iterable. Callers check the
 * other arguments before draining it (PySequence_List), so a failing call
 * leaves the caller's iterator unconsumed. */
PyObject *sw_py_carrier_iter(PyObject *values, const char *what);
/* tp_init of the built-ins: construction is done in tp_new. */
int sw_py_carrier_builtin_init(PyObject *self, PyObject *args, PyObject *kwds);

/* ---- host body shared by Generic and CPU (py_host.c) ------------------- */

extern const sw_dtype sw_py_host_accepted[];
#define SW_HOST_NACCEPTED 3
/* Fresh carrier of exactly `type` with owned storage (zeroed when `zero`). */
PyObject *sw_py_host_new(PyTypeObject *type, sw_dtype dtype, int64_t nslots,
                         int mutable_, int zero);
/* Fresh host carrier of `type` holding the entries of `values` (a tuple). */
PyObject *sw_py_host_from_values(PyTypeObject *type, sw_dtype dtype, PyObject *values,
                            int mutable_, int none_is_zero);
PyObject *sw_py_host_new_like(PyObject *self, PyObject *args, PyObject *kwds);
PyObject *sw_py_host_allocate_like(PyObject *self, PyObject *args, PyObject *kwds);

#define SW_HOST_METHODS                                                              \
    {"size", sw_py_carrier_meth_size, METH_NOARGS,                                \
     "size($self, /)\n--\n\nNumber of slots this carrier holds; 0 after release()."},                          \
    {"dtype", sw_py_carrier_meth_dtype, METH_NOARGS, "dtype($self, /)\n--\n\nThe DType its slots store."}, \
    {"get_value", sw_py_carrier_meth_get_value, METH_O,                           \
     "get_value($self, index, /)\n--\n\nRead slot `index`. Raises IndexError when out of range."},                             \
    {"set_value", (PyCFunction)(void (*)(void))sw_py_carrier_meth_set_value,      \
     METH_FASTCALL, "set_value($self, index, value, /)\n--\n\nWrite `value` into slot `index`. Raises IndexError when out of range,\nRuntimeError when the carrier is not mutable."},      \
    {"_is_mutable", sw_py_carrier_meth_intrinsic_mutable, METH_NOARGS,            \
     "_is_mutable($self, /)\n--\n\nWhether the storage itself accepts writes."},                               \
    {"_supports_storage_dtype", sw_py_carrier_meth_supports_own, METH_O,          \
     "_supports_storage_dtype($self, dtype, /)\n--\n\nWhether this carrier class can store `dtype`."},                                   \
    {"new_like", (PyCFunction)(void (*)(void))sw_py_host_new_like,                   \
     METH_VARARGS | METH_KEYWORDS,                                                \
     "new_like($self, values, *, mutable=True, dtype=None)\n--\n\n"                     \
     "A new carrier of the same class holding values; None entries are 0."},     \
    {"allocate_like", (PyCFunction)(void (*)(void))sw_py_host_allocate_like,         \
     METH_VARARGS | METH_KEYWORDS,                                                \
     "allocate_like($self, size, *, mutable=True, dtype=None, empty=False)\n--\n\n"     \
     "A new carrier of the same class with size slots, zeroed unless empty."}

#endif
