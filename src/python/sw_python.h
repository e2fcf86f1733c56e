/* Internal interface between the files of the strideweave._C extension.
 * One file per Python-visible concept; each exposes an init function that
 * readies its types and adds its names to the module, plus the small C API
 * below that other files use instead of Python-level calls on hot paths. */
#ifndef STRIDEWEAVE_SW_PYTHON_H
#define STRIDEWEAVE_SW_PYTHON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "strideweave/alloc.h"
#include "strideweave/binding.h" /* the carrier state a binding drives */
#include "strideweave/carrier.h"
#include "strideweave/dtype.h"
#include "strideweave/layout.h"
#include "strideweave/status.h"
#include "strideweave/tensor.h"

#include "sw_thread_state.h" /* the GIL for threads Python did not start */

/* ---- module / errors (module.c, py_errors.c) ---------------------------- */

/* Raise the Python exception for a core status (one mapping, here) and
 * return -1. SW_EIO raises OSError with err->sys_errno. An err whose
 * detail is SW_CARRIER_CALLBACK_RAISED (a Python hook the core called
 * back raised, and its exception is still set) raises nothing new: the
 * original exception stands. */
int sw_py_raise(const sw_error *err);
/* The pending Python exception as a core error (its status by class, the
 * reverse of sw_py_raise's table; its text as the message). `keep`: the
 * exception stays set and err->detail becomes SW_CARRIER_CALLBACK_RAISED,
 * for a caller on this thread that holds the GIL to re-raise it as it is;
 * otherwise it is cleared. Returns the status. GIL held. */
sw_status sw_py_error_to_core(sw_error *err, int keep);
/* Raise `exc` again (an instance from sw_py_take_exception; stolen). */
void sw_py_restore_exception(PyObject *exc);
/* The pending exception as one instance carrying its traceback (new
 * reference; NULL when none is pending): what a handle records as its
 * terminal failure. */
PyObject *sw_py_take_exception(void);
/* Replace the pending exception by `type` with the message
 * "<fmt % args>: <old message>", so the user sees what was being done.
 * Returns -1. */
int sw_py_reraise_prefixed(PyObject *type, const char *fmt, ...);
/* Import strideweave._types and return attribute `name` (new reference). */
PyObject *sw_py_types_attr(const char *name);
/* G-2 integer check: operator.index-able and not bool. 1/0. */
int sw_py_is_integer(PyObject *obj);
/* operator.index(obj) read as long long, overflow reported in *overflow
 * (-1/0/+1) rather than raised: the one conversion every integer argument
 * reader shares. 0, or -1 with an exception set. */
int sw_py_index_ll(PyObject *obj, long long *v, int *overflow);
/* Add the methods `defs` (NULL-terminated; static: the type keeps pointing
 * at them) to a type already made ready. A concept that builds on a type's
 * file gives that type its methods this way at module init, so the type's
 * file never calls up into it. 0, or -1 with an exception set. */
int sw_py_type_add_methods(PyTypeObject *type, PyMethodDef *defs);

int sw_py_layout_init(PyObject *module);
int sw_py_dtype_init(PyObject *module);
int sw_py_carrier_init(PyObject *module);
int sw_py_carrier_slots_init(PyObject *module); /* py_carrier_slots.c */
int sw_py_generic_init(PyObject *module);
int sw_py_cpu_init(PyObject *module);
int sw_py_file_backed_init(PyObject *module);
int sw_py_metal_init(PyObject *module);
int sw_py_tensor_init(PyObject *module);
int sw_py_view_init(PyObject *module);
int sw_py_friendly_init(PyObject *module);
int sw_py_dlpack_init(PyObject *module);
int sw_py_grad_mode_init(PyObject *module);
int sw_py_operation_init(PyObject *module);
int sw_py_await_init(PyObject *module);
int sw_py_move_operation_init(PyObject *module);
int sw_py_move_init(PyObject *module);
int sw_py_extension_init(PyObject *module);
int sw_py_definitions_init(PyObject *module); /* py_definitions.c */
int sw_py_evictable_init(PyObject *module);
int sw_py_tiled_evictable_init(PyObject *module);
int sw_py_profiling_init(PyObject *module);
/* Runs last: signatures for callables whose defaults are objects. */
int sw_py_signature_init(PyObject *module);
int sw_py_minimal_ops_init(PyObject *module);
int sw_py_repr_init(PyObject *module);
int sw_py_profiling_report_init(PyObject *module);
int sw_py_tiled_project_init(PyObject *module);
int sw_py_block_device_init(PyObject *module);
int sw_py_build_info_init(PyObject *module);

/* ---- layouts (py_layout.c) ---------------------------------------------- */

extern PyTypeObject SwShape_Type;
extern PyTypeObject SwStride_Type;
extern PyTypeObject SwLayout_Type;

/* Shape, Stride and Layout all wrap an sw_layout: a Shape holds its extents
 * (strides all 0), a Stride holds its strides in `strides` (extents all 1). */
typedef struct SwLayoutObject {
    PyObject_HEAD
    sw_layout *layout;  /* owned */
    Py_hash_t hash;     /* -1 until computed */
    vectorcallfunc vectorcall; /* layout(key) without an argument tuple */
} SwLayoutObject;

#define SwShape_Check(o) PyObject_TypeCheck((o), &SwShape_Type)
#define SwStride_Check(o) PyObject_TypeCheck((o), &SwStride_Type)
#define SwLayout_Check(o) PyObject_TypeCheck((o), &SwLayout_Type)
#define SwLayout_CORE(o) (((SwLayoutObject *)(o))->layout)

/* New Layout object taking ownership of `layout` (freed on
 * failure too). */
PyObject *sw_py_layout_wrap(sw_layout *layout);
/* The flat Layout (n):(1) of a whole carrier (n >= 1). */
PyObject *sw_py_flat_layout(int64_t n);
/* `vals` (a layout's extents or strides) as nested tuples in the shape of
 * its profile, as Shape.top_level / Stride.top_level give them:
 * Shape(2, [3, 4]) -> (2, (3, 4)). New reference, or NULL with an error. */
PyObject *sw_py_layout_nested(const sw_layout *l, const int64_t *vals);

/* ---- dtypes (py_dtype.c) ------------------------------------------------ */

extern PyTypeObject SwDType_Type;         /* DType */
extern PyTypeObject SwDTypeCategory_Type; /* DTypeCategory(DType) */
extern PyTypeObject SwSimpleDType_Type;   /* SimpleDType(DType) */
extern PyTypeObject SwCompoundDType_Type; /* CompoundDType(DType) */

typedef struct SwDTypeObject {
    PyObject_HEAD
    sw_dtype id;
} SwDTypeObject;

#define SwDType_Check(o) PyObject_TypeCheck((o), &SwDType_Type)
#define SwDType_ID(o) (((SwDTypeObject *)(o))->id)
/* Borrowed reference to the process-wide singleton for `id`. */
PyObject *sw_py_dtype(sw_dtype id);

/* C-7: TypeError for a non-DType; ValueError for a descriptor not among
 * `accepted` (compound: homogeneous storage cannot hold several planes;
 * category: names the accepted concrete dtypes). `carrier_name` only names
 * the carrier in messages. 0 on success, -1 with an exception set. */
int sw_py_check_storage_dtype(PyObject *dtype, const char *carrier_name,
                              const sw_dtype *accepted, int naccepted);
/* C-9 normalization of `value` into one host slot of `dtype` (Float32,
 * Int32 or Bool; 4, 4 and 1 bytes, native order). TypeError/OverflowError
 * per C-9; nothing is written on failure. 0 / -1. */
int sw_py_store_slot(sw_dtype dtype, PyObject *value, void *slot);
/* Python value of one host slot: float (binary32 value), int or bool. */
PyObject *sw_py_load_slot(sw_dtype dtype, const void *slot);

/* ---- carriers (py_carrier.c and one file per built-in) ------------------ */

extern PyTypeObject SwCarrier_Type;
extern PyTypeObject SwDependentCarrier_Type; /* open marker of composites */
extern PyTypeObject SwGeneric_Type;
extern PyTypeObject SwCPU_Type;
extern PyTypeObject SwFileBacked_Type;
extern PyTypeObject SwMetal_Type;  /* never instantiated on our hosts */
extern PyTypeObject SwEvictable_Type;
extern PyTypeObject SwBlockDeviceCarrier_Type;

/* Framework state every carrier has from allocation (C-1): its version,
 * released flag, pending marks, claim and owner access and transfer access
 * live in the core carrier handle `core` (carrier.h), the one source of
 * truth. A built-in (CPU, Generic, FileBacked, BlockDeviceCarrier) holds
 * its own core carrier, and an Evictable the core's own Evictable
 * (sw_evictable_new); every other carrier (Python subclasses,
 * definition-backed carriers, TiledEvictable) a STATE_ONLY handle made at
 * allocation, whose slots stay the binding's. Read and change that
 * state through the sw_py_state_* accessors below. */
typedef struct SwCarrierObject {
    PyObject_HEAD
    PyObject *weakreflist;
    struct sw_carrier *core; /* owned; set from allocation on (C-14, C-15, C-13) */
    int intrinsic_mutable;   /* built-ins: the `mutable` argument */
    /* Definition-backed carriers (extension API): the exact class's
     * CarrierDefinition from allocation, and the storage DType once
     * Carrier.__init__ has finished. NULL otherwise. */
    PyObject *definition;
    PyObject *storage_dtype;
    /* A STATE_ONLY core carrier's impl (sw_carrier.h: sw_py_slot_box),
     * emptied at dealloc; NULL for a carrier with a core of its own. */
    struct sw_py_slot_box *slot_box;
} SwCarrierObject;

/* `pending` bits (architecture.md, "Pending guard"): while non-zero,
 * mutation, release and claims fail RuntimeError mentioning `pending` and
 * is_mutable() is False; a pending destination also refuses reads. */
#define SW_PENDING_SOURCE SW_CARRIER_PENDING_SOURCE
#define SW_PENDING_DESTINATION SW_CARRIER_PENDING_DESTINATION

/* The state accessors: the core handle's state. `o` is a carrier object. */
#define SW_STATE_C(o) ((SwCarrierObject *)(o))
/* A carrier's (or any object's) class name, for messages. */
static inline const char *sw_py_cname(PyObject *o)
{
    return _PyType_Name(Py_TYPE(o));
}

/* The interpreter is finalizing or gone: code that runs late (a capsule
 * deleter, a hook on a core thread) must then not touch Python objects. */
static inline int sw_py_interpreter_gone(void)
{
    if (!Py_IsInitialized())
        return 1;
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsFinalizing();
#else
    return _Py_IsFinalizing();
#endif
}

static inline int sw_py_state_released(PyObject *o)
{
    return sw_carrier_is_released(SW_STATE_C(o)->core);
}
static inline int sw_py_state_pending(PyObject *o)
{
    return sw_carrier_pending_roles(SW_STATE_C(o)->core);
}
static inline void sw_py_state_unmark_pending(PyObject *o, int roles)
{
    sw_carrier_unmark_pending(SW_STATE_C(o)->core, roles);
}
static inline int64_t sw_py_state_version(PyObject *o)
{
    return (int64_t)sw_carrier_version(SW_STATE_C(o)->core);
}
/* +1 after a write the caller checked (not under transfer access). */
static inline void sw_py_state_bump_version(PyObject *o)
{
    (void)sw_carrier_increment_version(SW_STATE_C(o)->core, NULL);
}
static inline int sw_py_state_owned(PyObject *o)
{
    return sw_carrier_is_owned(SW_STATE_C(o)->core);
}

/* Host-memory carriers (Generic, CPU) share this body. */
typedef struct SwHostCarrierObject {
    SwCarrierObject base;
    sw_dtype dtype;
    int64_t nslots;
    void *data;              /* the core carrier's slot 0; NULL after release */
    int owns_data;           /* always 1 while data is set */
} SwHostCarrierObject;

/* The storage is a core FileBacked carrier (carrier.h); dtype and fd
 * mirror it. Its size is read from the core every time: the core's move
 * engine grows it and gives the growth back. */
typedef struct SwFileBackedObject {
    SwCarrierObject base;
    sw_dtype dtype;
    int fd;                  /* the core carrier's descriptor; -1 after release */
    PyObject *path;          /* pathlib.Path, kept after release */
} SwFileBackedObject;

#define SwCarrier_Check(o) PyObject_TypeCheck((o), &SwCarrier_Type)

/* Calls through the hooks for user classes, C fast paths for exact
 * built-ins. Each returns NULL / -1 with a Python exception set on failure. */
PyObject *sw_py_carrier_dtype(PyObject *carrier);                 /* new ref */
int sw_py_carrier_size(PyObject *carrier, int64_t *out);
PyObject *sw_py_carrier_getitem(PyObject *carrier, int64_t index); /* C-4 */
int sw_py_carrier_setitem(PyObject *carrier, int64_t index, PyObject *value); /* C-5 */
int sw_py_carrier_is_mutable(PyObject *carrier);                   /* 1/0/-1 */
/* The carrier's own mutability, before claims and moves: a Python
 * subclass's _is_mutable hook runs here. 1/0/-1. */
int sw_py_carrier_intrinsic_mutable(PyObject *carrier);
/* C-6 supports_storage_dtype (TypeError for a non-DType): 1/0/-1. */
int sw_py_carrier_supports_dtype(PyObject *carrier, PyObject *dtype);
/* C-15 release(), framework-owned (never a Python override): 0 / -1. */
int sw_py_carrier_release(PyObject *carrier);
/* C-12: size() == 0 and a callable `_allocate` exists. 1/0/-1. */
int sw_py_carrier_is_allocatable_empty(PyObject *carrier);
/* C-12 growth: call `_allocate(nslots)`; a non-None result → TypeError. */
int sw_py_carrier_allocate(PyObject *carrier, int64_t nslots);
/* Whether the calling thread holds transfer access to `carrier`. */
int sw_py_carrier_in_transfer(PyObject *carrier);
/* Grant / withdraw transfer access on the calling thread (re-entrant). */
void sw_py_carrier_begin_transfer(PyObject *carrier);
void sw_py_carrier_end_transfer(PyObject *carrier);
/* Whether the carrier is owned and the calling thread lacks owner access
 * (C-13): such a carrier cannot take part in a move. */
int sw_py_carrier_owned_elsewhere(PyObject *carrier);
/* A fresh, owned exact-CPU carrier of `nslots` slots (F-1 factories and
 * gradients). zero: fill with the dtype's zero. */
PyObject *sw_py_cpu_new(sw_dtype dtype, int64_t nslots, int mutable_, int zero);

/* ---- tensors (py_tensor_object.c, py_tensor.c, py_view.c, py_friendly.c) */

extern PyTypeObject SwTensor_Type;

/* One plane: the core tensor holds its (carrier, offset, layout) and is what
 * value reads, DLPack export and moves are handed; the Python objects of
 * the same carrier and layout are kept beside it for the Python API (the
 * Layout a user passed stays `t.layout`, identity included). A plane of a
 * carrier written in Python holds a core tensor too, made without the
 * core's placement checks (sw_tensor_new_unchecked: the binding ran them
 * through the carrier's hooks); the core answers SW_ENOTSUP for its slots. */
typedef struct SwSubtensor {
    PyObject *storage_dtype; /* a DType */
    PyObject *carrier;
    PyObject *layout;        /* a Layout object, equal to sw_tensor_layout(core) */
    struct sw_tensor *core;  /* owned */
} SwSubtensor;

/* No shipped dtype has more planes (sw_dtype_info.planes). */
#define SW_PY_MAX_PLANES 2

typedef struct SwTensorObject {
    PyObject_HEAD
    PyObject *weakreflist;
    PyObject *dtype;         /* logical DType */
    Py_ssize_t nsub;
    SwSubtensor subs[SW_PY_MAX_PLANES]; /* nsub used: no allocation of their own */
    PyObject *adjacent;      /* tuple of Layouts, nsub - 1 entries */
    PyObject *autograd_ctx;  /* autograd hook points (contract) */
    PyObject *grad;
    int retains_grad;
} SwTensorObject;

/* A plane's offset and layout, read from its core tensor. */
#define SW_SUB_OFFSET(s) sw_tensor_offset((s)->core)
#define SW_SUB_LAYOUT(s) sw_tensor_layout((s)->core)

#define SwTensor_Check(o) PyObject_TypeCheck((o), &SwTensor_Type)

/* Build a validated one-subtensor Tensor (T-1 checks). New reference. */
PyObject *sw_py_tensor_new1(PyObject *carrier, int64_t offset, PyObject *layout);
/* A move's result: a Tensor of `like`'s dtype and Layout on `carrier` at
 * offset 0, for an exact built-in carrier the move checked already (same
 * storage dtype, at least the layout's cosize slots): the T-1 checks do
 * not run again. New reference. */
PyObject *sw_py_tensor_moved(PyObject *like, PyObject *carrier);
/* A view of `source` on the core's view `plane0` (consumed) placed by the
 * Layout `layout0`, with `adjacent0` as its adjacent layout when the source
 * has two planes (borrowed). Only the placement is checked again (the
 * carrier may have shrunk or been released). New reference. */
PyObject *sw_py_tensor_view_of(PyObject *source, struct sw_tensor *plane0, PyObject *layout0,
                               PyObject *adjacent0);
/* Put a Tensor on the cyclic GC's lists (a Tensor on a built-in carrier
 * starts off them): call it wherever its autograd context or gradient is
 * set to something other than None. */
void sw_py_tensor_track(PyObject *tensor);
/* Build a Tensor from a representation, validated by T-4..T-7: nsub
 * (carrier, offset, layout) planes and nsub - 1 adjacent Layouts. Borrows
 * every argument. New reference. */
PyObject *sw_py_tensor_from_parts(PyObject *logical_dtype, Py_ssize_t nsub,
                                  PyObject *const *carriers, const int64_t *offsets,
                                  PyObject *const *layouts, PyObject *const *adjacent);
/* G-2 conversion of an integer object (sw_py_is_integer already checked):
 * *sign is -1 below INT64_MIN, +1 above INT64_MAX (*out is then 0), else 0. */
int sw_py_integer_value(PyObject *obj, int64_t *out, int *sign);
/* Tensor._from_representation(logical_dtype, subtensors, adjacent_layouts=()):
 * the checked build from Python values (py_tensor_object.c). */
PyObject *sw_py_tensor_from_representation(PyObject *unused, PyObject *args, PyObject *kwargs);
/* V-10: friendly.item / Tensor.item and friendly.to_list / Tensor.tolist
 * (TypeError for a non-Tensor). */
PyObject *sw_py_tensor_item(PyObject *tensor);
PyObject *sw_py_tensor_tolist(PyObject *tensor);
/* Vectorcall parsing of `n` required positional-or-keyword parameters
 * `names` into out[] (borrowed references). 0, or -1 with TypeError. */
int sw_py_parse_required(const char *fn, const char *const *names, Py_ssize_t n,
                         PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                         PyObject **out);
/* V-5 slice view for Tensor.__getitem__ (py_view.c). */
PyObject *sw_py_tensor_slice(PyObject *tensor, PyObject *key);

/* ---- grad mode and Operation (py_grad_mode.c, py_operation.c) ---------- */

/* the calling thread's recording state (1 enabled, 0 disabled). */
int sw_py_grad_enabled(void);
void sw_py_set_grad_enabled(int enabled);

extern PyTypeObject SwOperation_Type;

/* State every Operation has from allocation (O-1). MoveOperation and the
 * shipped moves start with this struct. */
typedef struct SwOperationObject {
    PyObject_HEAD
    PyObject *weakreflist;
    PyObject *ctx;                    /* dict, owned (O-3) */
    PyObject *saved;                  /* tuple of Tensors or NULL (O-6) */
    PyObject *versions;               /* aligned tuple of tokens or NULL (O-7) */
    PyObject *operation_name;         /* O-9, NULL when constructed directly */
    PyObject *dispatch_carrier_class; /* O-9, NULL when constructed directly */
    int released;                     /* a backward pass released it */
} SwOperationObject;

/* GC slots of Operation, for C subtypes that declare Py_TPFLAGS_HAVE_GC
 * themselves (a subtype with the flag does not inherit them). */
int sw_py_operation_traverse(PyObject *self, visitproc visit, void *arg);
int sw_py_operation_clear(PyObject *self);

#define SwOperation_Check(o) PyObject_TypeCheck((o), &SwOperation_Type)

/* O-5: save the Tensors among items[0..n) (order kept) and snapshot their
 * version tokens now. 0, or -1 with an exception set (state unchanged). */
int sw_py_operation_store(PyObject *op, PyObject *const *items, Py_ssize_t n);
/* Drop the saved inputs and their tokens. */
void sw_py_operation_clear_saved(PyObject *op);
/* result.autograd_ctx = op, for a differentiable result (caller checks). */
int sw_py_operation_attach(PyObject *op, PyObject *result);
/* Registered at module init by the file that defines `type` (an Operation
 * subtype that keeps every plane, like broadcast_to): forward then accepts
 * multi-subtensor Tensors for exactly that type. 0, or -1 with SystemError. */
int sw_py_operation_keeps_planes(PyTypeObject *type);

/* ---- autograd (py_autograd.c) ----------------------------------------------- */

/* Called from sw_py_view_init: interned names the engine uses. */
int sw_py_autograd_init(PyObject *module);
/* Tensor.backward and Tensor.retain_grad, listed in Tensor's method table. */
PyObject *sw_py_tensor_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames);
PyObject *sw_py_tensor_retain_grad(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                   PyObject *kwnames);
/* A-10 gradient layout of a one-subtensor Tensor: its layout when
 * injective, else the canonical layout of its shape. New reference. */
PyObject *sw_py_grad_layout(PyObject *tensor);
/* The Tensor's values in logical order as floats (size() entries). 0 / -1. */
int sw_py_read_float_values(PyObject *tensor, float *out);
/* A detached Tensor holding vals (logical order) in target's gradient
 * layout, offset 0, storage from target.carrier.new_like. New reference. */
PyObject *sw_py_grad_buffer(PyObject *target, const float *vals);
/* The same with the storage from like.new_like and the given layout. */
PyObject *sw_py_grad_buffer_on(PyObject *like, PyObject *layout, const float *vals);
/* A fresh broadcast_to view operation: _forward(tensor, target) returns
 * the broadcast_to view of tensor; backward sums back to the source. */
PyObject *sw_py_view_broadcast_operation(void);

/* ---- minimal operations (py_minimal_ops.c) ------------------------------ */

/* ---- DLPack (py_dlpack.c), listed in Tensor's method table -------------- */

PyObject *sw_py_tensor_dlpack(PyObject *self, PyObject *const *args,
                              Py_ssize_t nargs, PyObject *kwnames);
PyObject *sw_py_tensor_dlpack_device(PyObject *self, PyObject *unused);

/* ---- NumPy conversion and printing (py_values_read.c, py_array.c,
 * py_repr.c, py_friendly_buffer.c) ---------------------------------------- */

/* Raw host slots (storage dtype width, native order) of a one-subtensor
 * Tensor in ordinal order into out (size() slots); read errors as a read
 * would raise them. 0 / -1. */
int sw_py_tensor_gather(PyObject *tensor, void *out);
/* One raw slot of the same Tensor's carrier, by slot index. 0 / -1. */
int sw_py_tensor_read_slot(PyObject *tensor, int64_t slot, void *out);
/* Element reads of a one-subtensor Tensor (V-3, V-10) through its core
 * tensor: element `index` (logical, first mode fastest) and every element
 * in ordinal order as a list, each value as the carrier's checked read
 * gives it. New reference, or NULL with the read's error. */
PyObject *sw_py_tensor_element(PyObject *tensor, int64_t index);
PyObject *sw_py_tensor_values(PyObject *tensor);
/* The read refusals of a slot read (released, unavailable, pending
 * destination), without reading. 0 / -1. */
int sw_py_carrier_check_readable(PyObject *carrier);
/* The values of (carrier, offset, L) in logical order as values of `as`
 * (its slot width; Float64: binary64, each float(value)) into `out`
 * (py_carrier_slots.c): the core's read (sw_carrier_read_layout_as: its
 * state checks, then for a carrier whose slots the binding keeps, or an
 * Evictable over one, the checked read of each slot, hooks and all; a
 * Float32 carrier the core holds read as Float64 in one read), its
 * refusals in the binding's words; only a kind the core does not carry
 * (sw_carrier_holds_as: an Int32 carrier as Float64, say) by the checked
 * read of each slot directly. A hook's exception is raised as it was.
 * 0 / -1. */
int sw_py_carrier_read_layout(PyObject *carrier, int64_t offset, const sw_layout *L,
                              sw_dtype as, void *out);
/* Raise the core's refusal of a slot read or write (`writing`) of `slot`.
 * Where the carrier's state explains it (released, pending, owned, not
 * mutable, out of range), in the words of the binding's own check, which
 * name the Python class and the way out; anything else as the core said:
 * a class's own refusals (an evicted Evictable, a faulted block device:
 * the core's words are the binding's) and I/O errors. Returns -1. */
int sw_py_carrier_raise_core(PyObject *carrier, const sw_error *err, int writing, int64_t slot);
/* The same for a failure a core slot copy stopped at (sw_copy_stop):
 * `slot` of `carrier`, its read or its write. -1. */
int sw_py_carrier_raise_slot(PyObject *carrier, const sw_error *err, int writing, int64_t slot);
/* The values of (src, src_offset, L) copied onto (dst, dst_offset, L) by
 * the core, slot by slot in logical order (sw_carrier_copy_layout: read k,
 * `map`, write k), as values of `as` (SW_DT_ANY: the core's choice, the
 * objects themselves between two Python carriers). A failure at slot k leaves
 * 0..k-1 written; it is raised as the checked read or write of that slot
 * would raise it, a hook's exception as it was. 0 / -1. */
int sw_py_carrier_copy_layout(PyObject *src, int64_t src_offset, PyObject *dst,
                              int64_t dst_offset, const sw_layout *L, sw_dtype as,
                              sw_slot_map_fn map, void *user);
/* The same read of the `count` slots from slot `at` into `out` (in NULL),
 * or the write of `in` over them the same way (the core's
 * sw_carrier_write_layout_as; for a kind it does not carry, the checked
 * write of each slot in order, each stepping the version as C-5 says; a
 * failure leaves the slots before it written). 0 / -1. */
int sw_py_carrier_run_as(PyObject *carrier, int64_t at, int64_t count, sw_dtype as, void *out,
                         const void *in);
PyObject *sw_py_tensor_array(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames);
PyObject *sw_py_tensor_str(PyObject *self);
/* T-14 repr: values when the carrier can serve them now, else the reason. */
PyObject *sw_py_tensor_repr(PyObject *self);
/* friendly.tensor(values) for an array (buffer protocol, DLPack or
 * __array__): NULL with no exception set when `values` is none of these or
 * holds no numbers (F-2 then applies). Without dtype_given the array's kind
 * picks the dtype. */
PyObject *sw_py_friendly_from_buffer(PyObject *values, sw_dtype dt, int dtype_given);

#endif
