/* The open Carrier base type (contract-carriers C-1 .. C-18).
 *
 * Framework state (version, released flag, ownership, pending guard,
 * transfer access) lives in a core carrier handle (carrier.h) that every
 * carrier has from allocation, so Python subclasses work with or without
 * super().__init__(): a built-in (CPU, Generic, FileBacked,
 * BlockDeviceCarrier) holds its own core carrier, every other carrier a
 * STATE_ONLY one whose slots, size and dtype stay the binding's (its hooks). The core holds the
 * state and decides the slot, claim, release and version-step checks
 * (carrier.h: err->detail names the rule); the binding says them in the
 * Python API's words, and checks
 * only what a Python hook answers (size, `_is_mutable`). Framework-owned methods never consult Python overrides;
 * hooks (size, dtype, get_value, ...) are looked up dynamically on user
 * classes, while exact built-in carriers take C fast paths through their
 * sw_py_carrier_ops.
 *
 * May depend on: the construction helpers (py_carrier_args.c), the
 * definition-backed storage (py_defined_carrier.c) and the files outside
 * the carriers below them (dtype, errors, layout) and the definition table
 * (py_definitions.c). Everything above (the built-in classes, repr,
 * dispatch_op) registers here or fills Carrier at module init instead of
 * being named. */
#include "sw_carrier.h"
#include "sw_extension.h"

#include <string.h>

static PyObject *str_size, *str_dtype, *str_get_value, *str_set_value,
    *str_is_mutable_hook, *str_supports_hook, *str_release_hook, *str_format,
    *str_allocate_hook;
static PyObject *closed_message; /* CLOSED_CARRIER_MESSAGE */

#define CARRIER(o) ((SwCarrierObject *)(o))

/* ---- what the files above supply at module init ----------------------- */

/* The built-in carriers written in C (CPU, Generic, FileBacked, Evictable,
 * ...): each registers its class and fast paths from its own init, so this
 * base never names its subclasses. */
#define MAX_BUILTINS 8
static struct {
    PyTypeObject *type;
    const sw_py_carrier_ops *ops;
    int own_core;
} builtins[MAX_BUILTINS];
static int nbuiltins;

/* Two parts of Carrier are defined above it: Carrier.dispatch_op is
 * py_minimal_ops.c's, which adds it to the type at module init, and the
 * repr of every carrier is py_repr.c's, which puts it into Carrier's
 * tp_repr before the type is made ready. */

int sw_py_carrier_register_builtin(PyTypeObject *type, const sw_py_carrier_ops *ops, int own_core)
{
    if (nbuiltins == MAX_BUILTINS) {
        PyErr_SetString(PyExc_SystemError, "too many built-in carrier classes");
        return -1;
    }
    builtins[nbuiltins].type = type;
    builtins[nbuiltins].ops = ops;
    builtins[nbuiltins].own_core = own_core;
    nbuiltins++;
    return 0;
}

const sw_py_carrier_ops *sw_py_carrier_type_ops(PyTypeObject *type)
{
    for (int i = 0; i < nbuiltins; i++)
        if (builtins[i].type == type)
            return builtins[i].ops;
    return NULL;
}

const sw_py_carrier_ops *sw_py_carrier_builtin_ops(PyObject *obj)
{
    return sw_py_carrier_type_ops(Py_TYPE(obj));
}

static int makes_own_core(PyTypeObject *type)
{
    for (int i = 0; i < nbuiltins; i++)
        if (builtins[i].type == type)
            return builtins[i].own_core;
    return 0;
}

const sw_carrier_class *sw_py_carrier_core_class(PyTypeObject *type)
{
    const sw_py_carrier_ops *ops = sw_py_carrier_type_ops(type);
    if (ops && ops->core_class && makes_own_core(type))
        return ops->core_class;
    return sw_py_state_only_class(type);
}

static const char *type_name(PyObject *self)
{
    return _PyType_Name(Py_TYPE(self));
}

/* ---- construction (C-1) ------------------------------------------------- */

PyObject *sw_py_carrier_alloc(PyTypeObject *type, int intrinsic_mutable)
{
    PyObject *self = type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    SwCarrierObject *c = CARRIER(self);
    c->weakreflist = NULL;
    c->core = NULL;
    c->intrinsic_mutable = intrinsic_mutable;
    c->definition = NULL;
    c->storage_dtype = NULL;
    c->slot_box = NULL;
    /* CPU, Generic, FileBacked, Evictable, TiledEvictable and BlockDeviceCarrier make
     * their own core carrier next. Every other carrier's core carrier is
     * of its class's STATE_ONLY core class (py_carrier_class.c): the core
     * holds its state only and never calls into Python (carrier.h, the
     * deadlock rule). Its intrinsic mutability stays the binding's (a hook
     * for Python subclasses), so the handle is made mutable and the
     * binding checks intrinsic mutability itself. */
    if (!makes_own_core(type)) {
        const sw_carrier_class *cls = sw_py_state_only_class(type);
        sw_error err;
        if (!cls) {
            Py_DECREF(self);
            return NULL;
        }
        sw_py_slot_box *box = sw_py_slot_box_new(self);
        if (!box || sw_carrier_new(cls, box, SW_DT_ANY, 0, &c->core, &err) != SW_OK) {
            PyMem_RawFree(box); /* the core owns it from success on */
            Py_DECREF(self);
            return PyErr_NoMemory();
        }
        c->slot_box = box;
    }
    return self;
}

static PyObject *carrier_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    (void)args;
    (void)kwds;
    /* Making an instance freezes the class's definition status, so
     * the definition found here stays the class's for good. */
    if (sw_py_observe_class(type) < 0)
        return NULL;
    PyObject *self = sw_py_carrier_alloc(type, 1);
    if (self)
        CARRIER(self)->definition = Py_XNewRef(sw_py_definition_of(type));
    return self;
}

static int carrier_init(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"slots", "dtype", "mutable", NULL};
    PyObject *slots = Py_None, *dtype = Py_None, *mutable_ = Py_True;
    if (SW_DEFINED(self))
        return sw_py_defined_init(self, args, kwds);
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O$OO:Carrier", kwlist,
                                     &slots, &dtype, &mutable_))
        return -1;
    if (slots != Py_None || dtype != Py_None || mutable_ != Py_True) {
        PyErr_Format(PyExc_TypeError,
                     "definition-free Carrier construction takes no slots, "
                     "dtype or mutable arguments (%s has no CarrierDefinition; attach one "
                     "with register_carrier_definition(cls, definition) to give it storage)",
                     type_name(self));
        return -1;
    }
    return 0;
}

static void carrier_dealloc(PyObject *self)
{
    if (CARRIER(self)->weakreflist)
        PyObject_ClearWeakRefs(self);
    Py_CLEAR(CARRIER(self)->definition);
    Py_CLEAR(CARRIER(self)->storage_dtype);
    /* The core carrier may outlive the object: its slot callbacks find
     * no object from here on. */
    sw_py_slot_box_forget(CARRIER(self)->slot_box);
    CARRIER(self)->slot_box = NULL;
    /* The handle (and with it the state) goes last; when it is the last
     * reference, the core frees storage never released (a built-in's). */
    sw_carrier_unref(CARRIER(self)->core);
    CARRIER(self)->core = NULL;
    Py_TYPE(self)->tp_free(self);
}

/* ---- state predicates --------------------------------------------------- */

/* Each predicate reads the carrier's core handle. */
static int has_owner_access(SwCarrierObject *c)
{
    return sw_carrier_has_owner_access(c->core);
}

static int has_transfer_access(SwCarrierObject *c)
{
    return sw_carrier_in_transfer(c->core);
}

int sw_py_carrier_in_transfer(PyObject *carrier)
{
    return has_transfer_access(CARRIER(carrier));
}

void sw_py_carrier_begin_transfer(PyObject *carrier)
{
    sw_carrier_begin_transfer(CARRIER(carrier)->core);
}

void sw_py_carrier_end_transfer(PyObject *carrier)
{
    sw_carrier_end_transfer(CARRIER(carrier)->core);
}

/* The whole state at once: one lock. */
static void state_of(PyObject *self, sw_carrier_state *s)
{
    sw_carrier_get_state(CARRIER(self)->core, s);
}

static int is_owned(SwCarrierObject *c)
{
    return sw_carrier_is_owned(c->core);
}

int sw_py_carrier_owned_elsewhere(PyObject *carrier)
{
    sw_carrier_state s;
    state_of(carrier, &s);
    return s.owned && !s.owner_access;
}

/* The Python API's words for each refusal of a carrier action (`what`
 * names it); each raises and returns -1. The rules are the core's
 * (carrier.h); the refuse_* helpers below and the slot checks say them. */
static int say_pending(PyObject *self, const char *what)
{
    PyErr_Format(PyExc_RuntimeError,
                 "cannot %s a %s carrier that is pending in a move; wait() for the "
                 "move to finish first", what, type_name(self));
    return -1;
}

static int say_owned(PyObject *self, const char *what)
{
    PyErr_Format(PyExc_RuntimeError,
                 "cannot %s a %s carrier owned by a composite carrier "
                 "without owner access (it is a tier of an Evictable, for example); go "
                 "through the composite carrier instead", what, type_name(self));
    return -1;
}

static int say_released(PyObject *self, const char *what)
{
    PyErr_Format(PyExc_RuntimeError, "cannot %s a released %s carrier", what, type_name(self));
    return -1;
}

static int say_not_mutable(PyObject *self)
{
    PyErr_Format(PyExc_RuntimeError, "%s carrier is not mutable", type_name(self));
    return -1;
}

static int say_pending_read(PyObject *self)
{
    PyErr_Format(PyExc_RuntimeError,
                 "cannot read a %s carrier that is a pending move destination; wait() "
                 "for the move to finish first", type_name(self));
    return -1;
}

static int intrinsic_mutable(PyObject *self)
{
    if (sw_py_carrier_builtin_ops(self) || SW_DEFINED(self))
        return CARRIER(self)->intrinsic_mutable != 0;
    PyObject *r = PyObject_CallMethodNoArgs(self, str_is_mutable_hook);
    if (!r)
        return -1;
    int t = PyObject_IsTrue(r);
    Py_DECREF(r);
    return t;
}

int sw_py_carrier_intrinsic_mutable(PyObject *carrier)
{
    return intrinsic_mutable(carrier);
}

/* C-13: intrinsic AND (not owned OR owner access) AND not pending. */
int sw_py_carrier_is_mutable(PyObject *carrier)
{
    sw_carrier_state s;
    state_of(carrier, &s);
    if (s.pending && !(s.pending == SW_PENDING_DESTINATION && s.in_transfer))
        return 0;
    if (s.owned && !s.owner_access)
        return 0;
    return intrinsic_mutable(carrier);
}

/* ---- hooks through the C API ------------------------------------------- */

PyObject *sw_py_carrier_dtype(PyObject *carrier)
{
    const sw_py_carrier_ops *ops = sw_py_carrier_builtin_ops(carrier);
    if (ops) {
        PyObject *d = sw_py_dtype(ops->dtype(carrier));
        Py_XINCREF(d);
        return d;
    }
    if (SW_DEFINED(carrier))
        return sw_py_defined_ready(carrier) < 0 ? NULL
                                             : Py_NewRef(CARRIER(carrier)->storage_dtype);
    PyObject *d = PyObject_CallMethodNoArgs(carrier, str_dtype);
    if (d && !SwDType_Check(d)) {
        PyErr_Format(PyExc_TypeError, "%s.dtype() must return a DType, not %.100s",
                     type_name(carrier), Py_TYPE(d)->tp_name);
        Py_CLEAR(d);
    }
    return d;
}

int sw_py_carrier_size(PyObject *carrier, int64_t *out)
{
    const sw_py_carrier_ops *ops = sw_py_carrier_builtin_ops(carrier);
    if (ops) {
        *out = ops->size(carrier);
        return 0;
    }
    if (SW_DEFINED(carrier))
        return sw_py_defined_size(carrier, out);
    PyObject *r = PyObject_CallMethodNoArgs(carrier, str_size);
    if (!r)
        return -1;
    if (!sw_py_is_integer(r)) {
        PyErr_Format(PyExc_TypeError, "%s.size() must return an int, not %.100s",
                     type_name(carrier), Py_TYPE(r)->tp_name);
        Py_DECREF(r);
        return -1;
    }
    long long v;
    int overflow;
    int rc = sw_py_index_ll(r, &v, &overflow);
    Py_DECREF(r);
    if (rc < 0)
        return -1;
    if (overflow > 0) {
        PyErr_Format(PyExc_OverflowError, "%s.size() exceeds 64 bits",
                     type_name(carrier));
        return -1;
    }
    if (overflow < 0 || v < 0) {
        PyErr_Format(PyExc_ValueError, "%s.size() must be >= 0",
                     type_name(carrier));
        return -1;
    }
    *out = (int64_t)v;
    return 0;
}

/* ---- slot access (C-4, C-5) -------------------------------------------- */

/* The caller's index as an int64; one past int64 it is clamped (still out
 * of range) and *shown keeps the exact integer for the error message (new
 * reference, else NULL), so __index__ runs only once. */
static int parse_index(PyObject *index, int64_t *out, PyObject **shown)
{
    *shown = NULL;
    if (!sw_py_is_integer(index)) {
        PyErr_Format(PyExc_TypeError, "carrier indices must be integers, not %.100s",
                     Py_TYPE(index)->tp_name);
        return -1;
    }
    PyObject *exact = PyNumber_Index(index);
    if (!exact)
        return -1;
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(exact, &overflow);
    if (v == -1 && PyErr_Occurred()) {
        Py_DECREF(exact);
        return -1;
    }
    if (overflow) {
        *out = overflow > 0 ? INT64_MAX : INT64_MIN;
        *shown = exact;
        return 0;
    }
    Py_DECREF(exact);
    *out = (int64_t)v;
    return 0;
}

/* IndexError for slot `index` of a carrier of `size` slots; `shown`: the
 * caller's exact index when it does not fit int64 (else NULL). -1. */
static int say_out_of_range(PyObject *self, int64_t index, PyObject *shown, int64_t size)
{
    if (shown)
        PyErr_Format(PyExc_IndexError,
                     "carrier index %S is out of range for a %s carrier of size %lld", shown,
                     type_name(self), (long long)size);
    else
        PyErr_Format(PyExc_IndexError,
                     "carrier index %lld is out of range for a %s carrier of size %lld",
                     (long long)index, type_name(self), (long long)size);
    return -1;
}

/* The range check of a carrier whose size is the binding's (a STATE_ONLY
 * core handle: a Python class answers size() with a hook the core never
 * calls). The hook may run Python code that releases the carrier, which
 * then has size 0: report it as released, as it is, not as an index out
 * of range. */
static int check_range_live(PyObject *self, int64_t index, PyObject *shown, const char *what)
{
    int64_t size;
    if (sw_py_carrier_size(self, &size) < 0)
        return -1;
    if (index >= 0 && index < size)
        return 0;
    return sw_py_state_released(self) ? say_released(self, what)
                                      : say_out_of_range(self, index, shown, size);
}

static int is_slot_refusal(int detail)
{
    return detail >= SW_CARRIER_REFUSED_RELEASED && detail <= SW_CARRIER_REFUSED_RANGE;
}

/* A slot refusal the core decided (carrier.h: err->detail, an
 * sw_carrier_refusal) in the Python API's type and words; `size`: the size
 * its range check saw. -1 raised; 0 when err is no slot refusal. */
static int say_slot_refusal(PyObject *self, const sw_error *err, int writing, int64_t index,
                            PyObject *shown, int64_t size)
{
    const char *what = writing ? "write to" : "read";
    switch (err->detail) {
    case SW_CARRIER_REFUSED_RELEASED:
        return say_released(self, what);
    case SW_CARRIER_REFUSED_UNAVAILABLE: /* the class's own words */
        PyErr_SetString(PyExc_RuntimeError, err->msg);
        return -1;
    case SW_CARRIER_REFUSED_PENDING:
        return writing ? say_pending(self, what) : say_pending_read(self);
    case SW_CARRIER_REFUSED_OWNED:
        return say_owned(self, what);
    case SW_CARRIER_REFUSED_IMMUTABLE:
        return say_not_mutable(self);
    case SW_CARRIER_REFUSED_RANGE:
        return say_out_of_range(self, index, shown, size);
    default:
        return 0;
    }
}

/* C-5 checks 1, 3 and 4 of a slot write, decided by the core in one
 * snapshot (sw_carrier_check_write_slot: released, unavailable, pending,
 * owned, immutable, range) and said here. Two checks stay the binding's,
 * after the core's state rules and in the order C-5 has them:
 *   - intrinsic mutability: a Python class answers it with its
 *     `_is_mutable` hook, and a built-in keeps the answer it was made with
 *     (an Evictable over a Python tier took the tier's hook's answer,
 *     which the tier's STATE_ONLY core handle does not know). The core
 *     never calls Python (carrier.h, the deadlock rule), so it cannot ask;
 *     it is a field read for a built-in, a hook call only for a Python
 *     class;
 *   - the range of a STATE_ONLY carrier, whose size() is a Python hook
 *     too (size_seen -1).
 * Runs no Python code for a built-in carrier. */
static int say_write_check(PyObject *self, sw_status st, const sw_error *err, int64_t size,
                           int64_t index, PyObject *shown)
{
    if (st != SW_OK && err->detail != SW_CARRIER_REFUSED_RANGE)
        return say_slot_refusal(self, err, 1, index, shown, size) < 0 ? -1 : sw_py_raise(err);
    int m = intrinsic_mutable(self);
    if (m <= 0)
        return m < 0 ? -1 : say_not_mutable(self);
    if (st != SW_OK)
        return say_out_of_range(self, index, shown, size);
    return size >= 0 ? 0 : check_range_live(self, index, shown, "write to");
}

static int refuse_write_at(PyObject *self, int64_t index, PyObject *shown)
{
    sw_error err;
    int64_t size;
    sw_status st = sw_carrier_check_write_slot(CARRIER(self)->core, index, &size, &err);
    return say_write_check(self, st, &err, size, index, shown);
}

/* A read's C-5 checks 1, 3 and 4: the core's (sw_carrier_check_read_slot:
 * released, unavailable, pending destination, range) said here, and the
 * range of a STATE_ONLY carrier (a size() hook) checked here after them.
 * `range` 0: the carrier's state only, whatever the index. */
static int say_read_check(PyObject *self, sw_status st, const sw_error *err, int64_t size,
                          int64_t index, PyObject *shown, int range)
{
    if (st != SW_OK && (range || err->detail != SW_CARRIER_REFUSED_RANGE))
        return say_slot_refusal(self, err, 0, index, shown, size) < 0 ? -1 : sw_py_raise(err);
    return !range || size >= 0 ? 0 : check_range_live(self, index, shown, "read");
}

static int refuse_read(PyObject *self, int64_t index, PyObject *shown, int range)
{
    sw_error err;
    int64_t size;
    sw_status st = sw_carrier_check_read_slot(CARRIER(self)->core, index, &size, &err);
    return say_read_check(self, st, &err, size, index, shown, range);
}

int sw_py_carrier_check_readable(PyObject *self)
{
    return refuse_read(self, 0, NULL, 0);
}

static int refuse_read_at(PyObject *self, int64_t index, PyObject *shown)
{
    return refuse_read(self, index, shown, 1);
}

/* ---- slots the core holds ---------------------------------------------- */

PyObject *sw_py_carrier_kept_error(PyObject *carrier)
{
    const sw_py_carrier_ops *ops = sw_py_carrier_builtin_ops(carrier);
    return ops && ops->kept_error ? ops->kept_error(carrier) : NULL;
}

/* A core slot call's failure at `slot` in the binding's words: a refusal
 * the core named (err->detail) is said as it is, with no second look at
 * the state. A range refusal (whose size the error does not carry), or a
 * failure with no rule named, is worded from one fresh core check of the
 * same slot (a read's for its state only: a whole-tensor read refuses a
 * span, not one slot); a failure of the class's own I/O keeps its own
 * words, also when it left the carrier out of reach (a faulted device).
 * Anything else is raised as the core said it. -1. */
int sw_py_carrier_raise_core(PyObject *carrier, const sw_error *err, int writing, int64_t slot)
{
    if (is_slot_refusal(err->detail) && err->detail != SW_CARRIER_REFUSED_RANGE)
        return say_slot_refusal(carrier, err, writing, slot, NULL, 0);
    if (err->code != SW_ESTATE && err->code != SW_ERANGE)
        return sw_py_raise(err);
    sw_carrier *core = CARRIER(carrier)->core;
    sw_error now;
    int64_t size;
    sw_status st = writing ? sw_carrier_check_write_slot(core, slot, &size, &now)
                           : sw_carrier_check_read_slot(core, slot, &size, &now);
    if (st != SW_OK && now.detail == SW_CARRIER_REFUSED_UNAVAILABLE && !err->detail)
        return sw_py_raise(err);
    int refused = writing ? say_write_check(carrier, st, &now, size, slot, NULL)
                          : say_read_check(carrier, st, &now, size, slot, NULL, 0);
    return refused < 0 ? -1 : sw_py_raise(err);
}

/* A core copy's failure at one slot (tensor.h: sw_copy_stop) in the
 * binding's words, as a checked read or write of that slot would say it;
 * a hook's own exception stands, also one the class's hooks kept. -1. */
int sw_py_carrier_raise_slot(PyObject *self, const sw_error *err, int writing, int64_t index)
{
    PyObject *kept = sw_py_carrier_kept_error(self);
    if (kept) {
        sw_py_restore_exception(kept);
        return -1;
    }
    int refused = err->code == SW_ESTATE || err->code == SW_ERANGE || err->code == SW_ENOTSUP;
    if (err->detail == SW_CARRIER_CALLBACK_RAISED || (!writing && !refused))
        return sw_py_raise(err);
    if (writing)
        return sw_py_carrier_raise_core(self, err, 1, index);
    return refuse_read_at(self, index, NULL) < 0 ? -1 : sw_py_raise(err);
}

/* One slot through the core where it holds the slots (its lock, its state
 * checks, the write's version); a refusal is said after in the binding's
 * words (a read's from one fresh check of the slot, not an I/O error: that
 * may fault a block device). 1 done; 0 when the slots are the binding's
 * after all (SW_ENOTSUP: an Evictable over a Python tier) with the class's
 * own slot I/O (`own_io`); -1 raised. */
static int core_slot_io(PyObject *self, int writing, int64_t index, PyObject *shown, void *slot,
                        int own_io)
{
    sw_carrier *core = CARRIER(self)->core;
    sw_error err;
    sw_status st;
    SW_CORE_CALL(sw_py_core_io_waits(core),
                 st = writing ? sw_carrier_write(core, index, 1, slot, &err)
                              : sw_carrier_read(core, index, 1, slot, &err));
    int refused = st == SW_ESTATE || st == SW_ERANGE || st == SW_ENOTSUP;
    if (st == SW_OK || (!writing && refused && refuse_read_at(self, index, shown) < 0))
        return st == SW_OK ? 1 : -1;
    if (st == SW_ENOTSUP && own_io)
        return 0;
    return writing ? sw_py_carrier_raise_core(self, &err, 1, index) : sw_py_raise(&err);
}

/* A checked slot read: by the core where it holds the slots, else checked first. */
static PyObject *load_value(PyObject *self, int64_t index, PyObject *shown)
{
    const sw_py_carrier_ops *ops = sw_py_carrier_builtin_ops(self);
    if (ops && !sw_carrier_is_state_only(CARRIER(self)->core)) {
        unsigned char slot[8];
        int rc = core_slot_io(self, 0, index, shown, slot, ops->load != NULL);
        if (rc != 0)
            return rc > 0 ? sw_py_load_slot(ops->dtype(self), slot) : NULL;
    } else if (refuse_read_at(self, index, shown) < 0)
        return NULL;
    if (ops)
        return ops->load(self, index);
    if (SW_DEFINED(self))
        return sw_py_defined_load(self, index);
    PyObject *i = PyLong_FromLongLong(index);
    if (!i)
        return NULL;
    PyObject *r = PyObject_CallMethodOneArg(self, str_get_value, i);
    Py_DECREF(i);
    return r;
}

static int store_value(PyObject *self, int64_t index, PyObject *value)
{
    SwCarrierObject *c = CARRIER(self);
    const sw_py_carrier_ops *ops = sw_py_carrier_builtin_ops(self);
    if (ops) {
        /* C-5 check 5 first, into a local slot: normalization can run Python
         * code (__index__, __float__, an ABC check) that releases, claims,
         * marks pending or makes the carrier read-only. */
        unsigned char slot[8];
        if (sw_py_store_slot(ops->dtype(self), value, slot) < 0)
            return -1;
        /* Where the core holds the slots, one core write: it checks the
         * state the normalization left under its lock, writes and steps
         * the version. Otherwise checks 1, 3 and 4 again here, with no
         * Python code between them and the class's own store. */
        if (!sw_carrier_is_state_only(c->core)) {
            int rc = core_slot_io(self, 1, index, NULL, slot, ops->store != NULL);
            if (rc != 0)
                return rc > 0 ? 0 : -1;
        }
        if (refuse_write_at(self, index, NULL) < 0 || ops->store(self, index, slot) < 0)
            return -1;
        if (!has_transfer_access(c)) /* a move is not an in-place mutation */
            sw_py_state_bump_version(self);
        return 0;
    }
    if (SW_DEFINED(self)) {
        /* The same order for a provider's storage: normalize, re-check,
         * write; a failed write changes no version. */
        PyObject *v = sw_py_defined_normalize(self, value);
        int rc = v && refuse_write_at(self, index, NULL) == 0 ? sw_py_defined_store(self, index, v)
                                                              : -1;
        Py_XDECREF(v);
        if (rc == 0 && !has_transfer_access(c))
            sw_py_state_bump_version(self);
        return rc;
    }
    int64_t before = sw_py_state_version(self);
    PyObject *i = PyLong_FromLongLong(index);
    if (!i)
        return -1;
    PyObject *r = PyObject_CallMethodObjArgs(self, str_set_value, i, value, NULL);
    Py_DECREF(i);
    if (!r)
        return -1;
    Py_DECREF(r);
    if (sw_py_state_version(self) == before && !has_transfer_access(c))
        sw_py_state_bump_version(self);
    return 0;
}

PyObject *sw_py_carrier_getitem(PyObject *carrier, int64_t index)
{
    return load_value(carrier, index, NULL);
}

int sw_py_carrier_setitem(PyObject *carrier, int64_t index, PyObject *value)
{
    if (refuse_write_at(carrier, index, NULL) < 0)
        return -1;
    return store_value(carrier, index, value);
}

/* Check 1 first where parse_index may run __index__ (not an exact int),
 * which may release the carrier: load_value checks again after it. */
static PyObject *sw_py_carrier_get_checked(PyObject *self, PyObject *index)
{
    int64_t i;
    PyObject *shown = NULL;
    if ((!PyLong_CheckExact(index) && sw_py_carrier_check_readable(self) < 0) ||
        parse_index(index, &i, &shown) < 0)
        return NULL;
    PyObject *v = load_value(self, i, shown);
    Py_XDECREF(shown);
    return v;
}

/* Released and unavailable (the core's first two write rules) are refused
 * before a bad index; an index that is not an exact int runs __index__,
 * which may change the state, so the whole check comes after it. An exact
 * int cannot fail to parse: the whole check after it is the same answer. */
static int refuse_write_before_index(PyObject *self)
{
    sw_error err;
    if (sw_carrier_check_write_slot(CARRIER(self)->core, 0, NULL, &err) == SW_OK ||
        (err.detail != SW_CARRIER_REFUSED_RELEASED && err.detail != SW_CARRIER_REFUSED_UNAVAILABLE))
        return 0;
    return say_slot_refusal(self, &err, 1, 0, NULL, 0);
}

/* C-5 on a Python index object (set_value of built-ins, __setitem__ of
 * every carrier). */
static int sw_py_carrier_set_checked(PyObject *self, PyObject *index, PyObject *value)
{
    int64_t i;
    PyObject *shown = NULL;
    if ((!PyLong_CheckExact(index) && refuse_write_before_index(self) < 0) ||
        parse_index(index, &i, &shown) < 0)
        return -1;
    int bad = refuse_write_at(self, i, shown) < 0;
    Py_XDECREF(shown);
    return bad ? -1 : store_value(self, i, value);
}

static int carrier_ass_subscript(PyObject *self, PyObject *index, PyObject *value)
{
    if (!value) {
        PyErr_SetString(PyExc_TypeError, "carrier slots cannot be deleted");
        return -1;
    }
    return sw_py_carrier_set_checked(self, index, value);
}

/* ---- methods shared by the built-ins ------------------------------------ */

PyObject *sw_py_carrier_meth_size(PyObject *self, PyObject *unused)
{
    (void)unused;
    return PyLong_FromLongLong(sw_py_carrier_builtin_ops(self)->size(self));
}

PyObject *sw_py_carrier_meth_dtype(PyObject *self, PyObject *unused)
{
    (void)unused;
    return sw_py_carrier_dtype(self);
}

PyObject *sw_py_carrier_meth_get_value(PyObject *self, PyObject *index)
{
    return sw_py_carrier_get_checked(self, index);
}

PyObject *sw_py_carrier_meth_set_value(PyObject *self, PyObject *const *args,
                                       Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError,
                     "set_value() takes exactly 2 arguments (index, value), %zd given",
                     nargs);
        return NULL;
    }
    if (sw_py_carrier_set_checked(self, args[0], args[1]) < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyObject *sw_py_carrier_meth_intrinsic_mutable(PyObject *self, PyObject *unused)
{
    (void)unused;
    return PyBool_FromLong(CARRIER(self)->intrinsic_mutable);
}

PyObject *sw_py_carrier_meth_supports_own(PyObject *self, PyObject *dtype)
{
    if (!SwDType_Check(dtype)) {
        PyErr_Format(PyExc_TypeError, "dtype must be a DType, not %.100s",
                     Py_TYPE(dtype)->tp_name);
        return NULL;
    }
    return PyBool_FromLong(sw_py_carrier_builtin_ops(self)->supports(SwDType_ID(dtype)));
}

/* ---- closed carriers (C-18) --------------------------------------------- */

PyObject *sw_py_carrier_reject_subclass(const char *name)
{
    PyObject *msg = NULL, *kwargs = NULL, *fmt = NULL, *empty = NULL;
    kwargs = Py_BuildValue("{s:s}", "name", name);
    fmt = kwargs ? PyObject_GetAttr(closed_message, str_format) : NULL;
    empty = fmt ? PyTuple_New(0) : NULL;
    msg = empty ? PyObject_Call(fmt, empty, kwargs) : NULL;
    if (msg)
        PyErr_SetObject(PyExc_TypeError, msg);
    Py_XDECREF(msg);
    Py_XDECREF(empty);
    Py_XDECREF(fmt);
    Py_XDECREF(kwargs);
    return NULL;
}

int sw_py_carrier_check_exact(PyTypeObject *type, PyTypeObject *closed)
{
    if (type == closed)
        return 0;
    sw_py_carrier_reject_subclass(_PyType_Name(closed));
    return -1;
}

static PyObject *reject_carrier_subclass(PyObject *mod, PyObject *name)
{
    (void)mod;
    PyObject *s = PyObject_Str(name);
    if (!s)
        return NULL;
    const char *cs = PyUnicode_AsUTF8(s);
    if (cs)
        sw_py_carrier_reject_subclass(cs);
    Py_DECREF(s);
    return NULL;
}

/* ---- Carrier methods ---------------------------------------------------- */

static PyObject *missing_hook(PyObject *self, const char *hook)
{
    PyErr_Format(PyExc_NotImplementedError,
                 "%s must implement the carrier hook %s", type_name(self), hook);
    return NULL;
}

static PyObject *carrier_supports_storage_dtype(PyObject *self, PyObject *dtype);

/* The base hooks serve a definition-backed carrier through its provider
 * a definition-free class must implement them. */
static PyObject *carrier_size(PyObject *self, PyObject *unused)
{
    (void)unused;
    int64_t n;
    if (!SW_DEFINED(self))
        return missing_hook(self, "size()");
    return sw_py_carrier_size(self, &n) < 0 ? NULL : PyLong_FromLongLong(n);
}

static PyObject *carrier_dtype(PyObject *self, PyObject *unused)
{
    (void)unused;
    if (!SW_DEFINED(self))
        return missing_hook(self, "dtype()");
    return sw_py_carrier_dtype(self);
}

static PyObject *carrier_get_value(PyObject *self, PyObject *index)
{
    if (!SW_DEFINED(self))
        return missing_hook(self, "get_value(index)");
    return sw_py_carrier_get_checked(self, index);
}

static PyObject *carrier_set_value(PyObject *self, PyObject *const *args,
                                   Py_ssize_t nargs)
{
    if (SW_DEFINED(self))
        return sw_py_carrier_meth_set_value(self, args, nargs);
    PyErr_Format(PyExc_RuntimeError, "%s does not support writing slots (no set_value hook)",
                 type_name(self));
    return NULL;
}

static PyObject *carrier_new_like(PyObject *self, PyObject *args, PyObject *kwds)
{
    if (SW_DEFINED(self))
        return sw_py_defined_new_like(self, args, kwds);
    return missing_hook(self, "new_like(values, *, mutable=True, dtype=None)");
}

static PyObject *carrier_allocate_like(PyObject *self, PyObject *args, PyObject *kwds)
{
    if (SW_DEFINED(self))
        return sw_py_defined_allocate_like(self, args, kwds);
    return missing_hook(self,
                        "allocate_like(size, *, mutable=True, dtype=None, empty=False)");
}

static PyObject *carrier_intrinsic_default(PyObject *self, PyObject *unused)
{
    (void)unused;
    return PyBool_FromLong(SW_DEFINED(self) && CARRIER(self)->intrinsic_mutable);
}

static PyObject *carrier_supports_default(PyObject *self, PyObject *dtype)
{
    if (SW_DEFINED(self))
        return carrier_supports_storage_dtype(self, dtype);
    PyObject *own = PyObject_CallMethodNoArgs(self, str_dtype);
    if (!own)
        return NULL;
    int same = own == dtype;
    Py_DECREF(own);
    return PyBool_FromLong(same);
}

static PyObject *carrier_release_default(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    Py_RETURN_NONE;
}

static PyObject *carrier_dlpack_info(PyObject *self, PyObject *unused)
{
    (void)unused;
    PyErr_Format(PyExc_BufferError,
                 "DLPack is not supported by %s carriers: move the tensor to a CPU carrier to "
                 "export it", type_name(self));
    return NULL;
}

static PyObject *carrier_scatter(PyObject *self, PyObject *args, PyObject *kwds)
{
    (void)args;
    (void)kwds;
    PyErr_Format(PyExc_NotImplementedError,
                 "storage scatter is not supported by %s carriers", type_name(self));
    return NULL;
}

static PyObject *carrier_is_mutable(PyObject *self, PyObject *unused)
{
    (void)unused;
    int m = sw_py_carrier_is_mutable(self);
    return m < 0 ? NULL : PyBool_FromLong(m);
}

static PyObject *carrier_is_owned(PyObject *self, PyObject *unused)
{
    (void)unused;
    return PyBool_FromLong(is_owned(CARRIER(self)));
}

static PyObject *carrier_is_released(PyObject *self, PyObject *unused)
{
    (void)unused;
    return PyBool_FromLong(sw_py_state_released(self));
}

int sw_py_carrier_supports_dtype(PyObject *carrier, PyObject *dtype)
{
    if (!SwDType_Check(dtype)) {
        PyErr_Format(PyExc_TypeError, "dtype must be a DType, not %.100s",
                     Py_TYPE(dtype)->tp_name);
        return -1;
    }
    const sw_py_carrier_ops *ops = sw_py_carrier_builtin_ops(carrier);
    if (ops && ops->supports_self)
        return ops->supports_self(carrier, SwDType_ID(dtype));
    if (ops)
        return ops->supports(SwDType_ID(dtype)) != 0;
    if (SW_DEFINED(carrier))
        return sw_py_defined_supports(carrier, dtype);
    PyObject *r = PyObject_CallMethodOneArg(carrier, str_supports_hook, dtype);
    if (!r)
        return -1;
    int t = PyObject_IsTrue(r);
    Py_DECREF(r);
    return t;
}

static PyObject *carrier_supports_storage_dtype(PyObject *self, PyObject *dtype)
{
    int t = sw_py_carrier_supports_dtype(self, dtype);
    return t < 0 ? NULL : PyBool_FromLong(t);
}

/* A version step's refusal the core decided (sw_carrier_increment_version:
 * err->detail) in the Python API's words. An intrinsically immutable
 * carrier is not refused here: its step is skipped, as it always was. 0
 * when nothing is raised. */
static int say_version_refusal(PyObject *self, const sw_error *err)
{
    const char *what = "advance the version of";
    switch (err->detail) {
    case SW_CARRIER_REFUSED_RELEASED:
        return say_released(self, what);
    case SW_CARRIER_REFUSED_PENDING:
        return say_pending(self, what);
    case SW_CARRIER_REFUSED_OWNED:
        return say_owned(self, what);
    case SW_CARRIER_REFUSED_IMMUTABLE:
        return 0;
    default:
        return sw_py_raise(err);
    }
}

/* The core checks and steps under one lock (no step under transfer
 * access: a move is not an in-place mutation). */
static PyObject *carrier_increment_version(PyObject *self, PyObject *unused)
{
    (void)unused;
    sw_error err;
    if (sw_carrier_increment_version(CARRIER(self)->core, &err) != SW_OK &&
        say_version_refusal(self, &err) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* A release's refusal the core decided (sw_carrier_release /
 * sw_carrier_check_release / sw_carrier_release_moved: err->detail) in the
 * Python API's words. -1. */
static int say_release_refusal(PyObject *self, const sw_error *err)
{
    switch (err->detail) {
    case SW_CARRIER_REFUSED_PENDING:
        return say_pending(self, "release");
    case SW_CARRIER_REFUSED_OWNED:
        return say_owned(self, "release");
    default:
        return sw_py_raise(err);
    }
}

/* The core's release: checked (sw_carrier_release) for a user's release,
 * the pending guard only (sw_carrier_release_moved) for a move's commit,
 * whose move checked ownership when it started (binding.h). */
static sw_status core_release(sw_carrier *core, int moved, sw_error *err)
{
    return moved ? sw_carrier_release_moved(core, err) : sw_carrier_release(core, err);
}

/* The release of a carrier that holds its own storage: the core decides,
 * marks it released and frees the storage; without the GIL for a class
 * whose release may wait on I/O (a block device). */
static int release_core(PyObject *carrier, int moved)
{
    SwCarrierObject *c = CARRIER(carrier);
    const sw_py_carrier_ops *ops = sw_py_carrier_builtin_ops(carrier);
    sw_carrier *core = c->core;
    sw_error err;
    sw_status st;
    if (ops->core_io) {
        Py_BEGIN_ALLOW_THREADS
        st = core_release(core, moved, &err);
        Py_END_ALLOW_THREADS
    } else {
        st = core_release(core, moved, &err);
    }
    if (st != SW_OK)
        return say_release_refusal(carrier, &err);
    ops->drop(carrier); /* the object's views of the storage */
    return 0;
}

/* A STATE_ONLY carrier's storage is the binding's: the core decides
 * whether it may go (sw_carrier_check_release, or the pending guard for a
 * move's commit), the binding frees it, then the core marks the carrier
 * released. */
static int release_state_only(PyObject *carrier, int moved)
{
    sw_carrier *core = CARRIER(carrier)->core;
    sw_error err;
    int released;
    if (moved) /* its caller saw it no longer pending */
        released = sw_carrier_is_released(core);
    else if (sw_carrier_check_release(core, &released, &err) != SW_OK)
        return say_release_refusal(carrier, &err);
    if (released)
        return 0;
    if (sw_py_carrier_drop_storage(carrier) < 0)
        return -1; /* a provider that refuses keeps the carrier live */
    /* The provider's code may have changed the state: the core checks again. */
    return core_release(core, moved, &err) == SW_OK ? 0 : say_release_refusal(carrier, &err);
}

static int release_storage(PyObject *carrier, int moved)
{
    return sw_carrier_is_state_only(CARRIER(carrier)->core) ? release_state_only(carrier, moved)
                                                             : release_core(carrier, moved);
}

/* C-15: idempotent; owned without owner access or pending → RuntimeError,
 * released or not (the core's order: pending, then owned). */
int sw_py_carrier_release(PyObject *carrier)
{
    return release_storage(carrier, 0);
}

/* A move's commit releases its source on whichever thread commits: the
 * initiating thread had the access a release needs (ownership was checked
 * when the move started), so only the pending guard applies here. */
int sw_py_carrier_release_moved(PyObject *carrier)
{
    sw_carrier_state st;
    sw_carrier_get_state(CARRIER(carrier)->core, &st);
    if (st.pending)
        return say_pending(carrier, "release");
    /* A move the core ran released the core carrier at its commit: only
     * the object's views of the storage are left to drop (one state read,
     * and no GIL round trip around a release that has nothing to do). */
    if (st.released && !sw_carrier_is_state_only(CARRIER(carrier)->core)) {
        sw_py_carrier_drop_core_released(carrier);
        return 0;
    }
    return release_storage(carrier, 1);
}

void sw_py_carrier_drop_core_released(PyObject *carrier)
{
    sw_py_carrier_builtin_ops(carrier)->drop(carrier);
}

static PyObject *carrier_release(PyObject *self, PyObject *unused)
{
    (void)unused;
    if (sw_py_carrier_release(self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

int sw_py_carrier_is_allocatable_empty(PyObject *carrier)
{
    int64_t size;
    if (sw_py_carrier_size(carrier, &size) < 0)
        return -1;
    if (size != 0)
        return 0;
    if (SW_DEFINED(carrier))
        return 1;
    /* A shipped class that grows (FileBacked): no attribute lookup on
     * every move into one. */
    const sw_py_carrier_ops *ops = sw_py_carrier_builtin_ops(carrier);
    if (ops && ops->grows)
        return 1;
    PyObject *hook = PyObject_GetAttr(carrier, str_allocate_hook);
    if (!hook) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -1;
        PyErr_Clear();
    }
    int ok = hook && PyCallable_Check(hook);
    Py_XDECREF(hook);
    return ok;
}

int sw_py_carrier_allocate(PyObject *carrier, int64_t nslots)
{
    if (SW_DEFINED(carrier))
        return sw_py_defined_allocate(carrier, nslots);
    PyObject *n = PyLong_FromLongLong(nslots);
    if (!n)
        return -1;
    PyObject *r = PyObject_CallMethodOneArg(carrier, str_allocate_hook, n);
    Py_DECREF(n);
    if (!r)
        return -1;
    if (r != Py_None) {
        PyErr_Format(PyExc_TypeError, "%s._allocate() must return None, not %.100s",
                     type_name(carrier), Py_TYPE(r)->tp_name);
        Py_DECREF(r);
        return -1;
    }
    Py_DECREF(r);
    return 0;
}

/* ---- ownership (C-13) ---------------------------------------------------- */

/* The token argument as int64: TypeError for a non-integer; RuntimeError
 * when the carrier is not owned or for a token that cannot be one. The
 * core checks the token itself. */
static int parse_token(PyObject *self, PyObject *arg, int64_t *token)
{
    if (!PyLong_CheckExact(arg) && !sw_py_is_integer(arg)) {
        PyErr_Format(PyExc_TypeError, "ownership token must be an int, not %.100s",
                     Py_TYPE(arg)->tp_name);
        return -1;
    }
    long long v;
    int overflow;
    if (sw_py_index_ll(arg, &v, &overflow) < 0)
        return -1;
    SwCarrierObject *c = CARRIER(self);
    if (!is_owned(c)) {
        PyErr_Format(PyExc_RuntimeError, "%s carrier is not owned", type_name(self));
        return -1;
    }
    if (overflow || v <= 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "wrong ownership token for this %s carrier", type_name(self));
        return -1;
    }
    *token = v;
    return 0;
}

static PyObject *wrong_token(PyObject *self)
{
    PyErr_Format(PyExc_RuntimeError, "wrong ownership token for this %s carrier",
                 type_name(self));
    return NULL;
}

/* Claim through the core, which decides (released, already owned, pending,
 * in that order: carrier.h); its refusal in the Python API's words. The
 * token in *token. */
static int claim(PyObject *self, int64_t *token)
{
    uint64_t t;
    sw_error err;
    if (sw_carrier_claim(CARRIER(self)->core, &t, &err) == SW_OK) {
        *token = (int64_t)t;
        return 0;
    }
    switch (err.detail) {
    case SW_CARRIER_REFUSED_RELEASED:
        return say_released(self, "claim");
    case SW_CARRIER_REFUSED_OWNED:
        PyErr_Format(PyExc_RuntimeError, "%s carrier is already owned", type_name(self));
        return -1;
    case SW_CARRIER_REFUSED_PENDING:
        PyErr_Format(PyExc_RuntimeError, "cannot claim a %s carrier that is pending in a move",
                     type_name(self));
        return -1;
    default:
        return sw_py_raise(&err);
    }
}

static PyObject *carrier_claim_ownership(PyObject *self, PyObject *unused)
{
    (void)unused;
    int64_t token;
    if (claim(self, &token) < 0)
        return NULL;
    return PyLong_FromLongLong(token);
}

static PyObject *carrier_relinquish_ownership(PyObject *self, PyObject *token)
{
    int64_t t;
    if (parse_token(self, token, &t) < 0)
        return NULL;
    if (sw_carrier_relinquish(CARRIER(self)->core, (uint64_t)t, NULL) != SW_OK)
        return wrong_token(self);
    Py_RETURN_NONE;
}

static PyObject *other_thread_holds(PyObject *self)
{
    PyErr_Format(PyExc_RuntimeError,
                 "owner access to this %s carrier is held by another thread",
                 type_name(self));
    return NULL;
}

static PyObject *carrier_begin_owner_access(PyObject *self, PyObject *token)
{
    int64_t t;
    if (parse_token(self, token, &t) < 0)
        return NULL;
    sw_error err;
    if (sw_carrier_begin_owner_access(CARRIER(self)->core, (uint64_t)t, &err) == SW_OK)
        Py_RETURN_NONE;
    /* The core checks the token first, then the thread. */
    return err.detail == SW_CARRIER_REFUSED_ACCESS_ELSEWHERE ? other_thread_holds(self)
                                                             : wrong_token(self);
}

static PyObject *no_access_here(PyObject *self)
{
    PyErr_Format(PyExc_RuntimeError,
                 "this thread holds no owner access to this %s carrier", type_name(self));
    return NULL;
}

static PyObject *carrier_end_owner_access(PyObject *self, PyObject *token)
{
    int64_t t;
    if (parse_token(self, token, &t) < 0)
        return NULL;
    sw_error err;
    if (sw_carrier_end_owner_access(CARRIER(self)->core, (uint64_t)t, &err) == SW_OK)
        Py_RETURN_NONE;
    return err.detail == SW_CARRIER_REFUSED_NO_ACCESS ? no_access_here(self)
                                                      : wrong_token(self);
}

static PyObject *carrier_has_owner_access(PyObject *self, PyObject *unused)
{
    (void)unused;
    return PyBool_FromLong(has_owner_access(CARRIER(self)));
}

/* Owner access for composites written in C (Evictable, TiledEvictable):
 * the same rules as the methods above, without Python objects for the
 * token. */
int sw_py_carrier_begin_owner(PyObject *carrier, int64_t token)
{
    PyObject *t = PyLong_FromLongLong(token);
    PyObject *r = t ? carrier_begin_owner_access(carrier, t) : NULL;
    Py_XDECREF(t);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

void sw_py_carrier_end_owner(PyObject *carrier, int64_t token)
{
    if (token > 0)
        (void)sw_carrier_end_owner_access(CARRIER(carrier)->core, (uint64_t)token, NULL);
}

/* The tier checks Evictable (E-1) and TiledEvictable (TE-1) share: the
 * core's, asked before the tiers' hooks run (their dtype, their size). */
int sw_py_check_tier_pair(PyObject *p, PyObject *s)
{
    sw_error err;
    return sw_carrier_check_tier_pair(CARRIER(p)->core, CARRIER(s)->core, &err) == SW_OK
               ? 0
               : sw_py_raise(&err);
}

static PyObject *carrier_get_version(PyObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromLongLong(sw_py_state_version(self));
}

static PyMethodDef carrier_methods[] = {
    /* hooks (C-2): overridable */
    {"size", carrier_size, METH_NOARGS, "size($self, /)\n--\n\n"
     "Number of slots (an int >= 0). A Python subclass must implement it;\n"
     "the base raises NotImplementedError."},
    {"dtype", carrier_dtype, METH_NOARGS, "dtype($self, /)\n--\n\n"
     "The DType the slots store. A Python subclass must implement it; the\n"
     "base raises NotImplementedError."},
    {"get_value", carrier_get_value, METH_O,
     "get_value($self, index, /)\n--\n\n"
     "Return the value of slot `index`. A Python subclass must implement it;\n"
     "carrier[index] checks the index and then calls it."},
    {"set_value", (PyCFunction)(void (*)(void))carrier_set_value, METH_FASTCALL,
     "set_value($self, index, value, /)\n--\n\n"
     "Write `value` into slot `index`. Optional in a Python subclass; the\n"
     "base raises RuntimeError. carrier[index] = value checks and calls it."},
    {"new_like", (PyCFunction)(void (*)(void))carrier_new_like,
     METH_VARARGS | METH_KEYWORDS,
     "new_like($self, values, *, mutable=True, dtype=None)\n--\n\n"
     "A new carrier of the same class holding `values` (dtype None keeps\n"
     "this carrier's). Works on a released carrier. A Python subclass should\n"
     "implement it; moving gradients back relies on it."},
    {"allocate_like", (PyCFunction)(void (*)(void))carrier_allocate_like,
     METH_VARARGS | METH_KEYWORDS,
     "allocate_like($self, size, *, mutable=True, dtype=None, empty=False)\n--\n\n"
     "A new carrier of the same class with `size` slots, zeroed unless\n"
     "empty=True (dtype None keeps this carrier's). Works on a released\n"
     "carrier. A Python subclass should implement it."},
    {"_is_mutable", carrier_intrinsic_default, METH_NOARGS,
     "_is_mutable($self, /)\n--\n\n"
     "Whether the storage itself accepts writes; the base answers False."},
    {"_supports_storage_dtype", carrier_supports_default, METH_O,
     "_supports_storage_dtype($self, dtype, /)\n--\n\n"
     "Whether this class can store `dtype`; the base answers dtype is self.dtype()."},
    {"_release", carrier_release_default, METH_NOARGS,
     "_release($self, /)\n--\n\n"
     "Drop the storage; called once by release(). The base does nothing."},
    {"dlpack_info", carrier_dlpack_info, METH_NOARGS,
     "dlpack_info($self, /)\n--\n\n"
     "Where the storage lives, for DLPack export: a dict with 'pointer',\n"
     "'device_type' and 'device_id'. The base raises BufferError, so a\n"
     "carrier class is not exportable unless it overrides this."},
    /* framework-owned */
    {"scatter", (PyCFunction)(void (*)(void))carrier_scatter, METH_VARARGS | METH_KEYWORDS,
     "scatter($self, to_scatter, scatter_onto, mapping, mapping_offset=0)\n--\n\n"
     "Not supported by any carrier: always raises NotImplementedError."},
    {"is_mutable", carrier_is_mutable, METH_NOARGS,
     "is_mutable($self, /)\n--\n\n"
     "Whether writes are allowed now: the storage accepts writes and no\n"
     "composite carrier or pending move holds this carrier."},
    {"is_owned", carrier_is_owned, METH_NOARGS,
     "is_owned($self, /)\n--\n\nWhether a composite carrier (such as Evictable) has taken it over."},
    {"is_released", carrier_is_released, METH_NOARGS, "is_released($self, /)\n--\n\nWhether release() has been called; its slots can no longer be used."},
    {"supports_storage_dtype", carrier_supports_storage_dtype, METH_O,
     "supports_storage_dtype($self, dtype, /)\n--\n\n"
     "Whether this carrier class can store `dtype` (allocates nothing).\n"
     "Raises TypeError when dtype is not a DType."},
    {"_increment_version", carrier_increment_version, METH_NOARGS,
     "_increment_version($self, /)\n--\n\n"
     "Advance the version by one, for writes that bypass carrier[i] = v.\n"
     "Raises RuntimeError when a composite carrier holds this one."},
    {"release", carrier_release, METH_NOARGS,
     "release($self, /)\n--\n\n"
     "Free the storage. Calling it again does nothing; afterwards size() is 0\n"
     "and reading or writing a slot raises RuntimeError. Raises RuntimeError\n"
     "when a composite carrier holds this one."},
    {"_claim_ownership", carrier_claim_ownership, METH_NOARGS,
     "_claim_ownership($self, /)\n--\n\n"
     "Take the carrier over for a composite carrier and return the token\n"
     "that proves it. Raises RuntimeError when released or already held."},
    {"_relinquish_ownership", carrier_relinquish_ownership, METH_O,
     "_relinquish_ownership($self, token, /)\n--\n\n"
     "Give the carrier back; `token` is the one _claim_ownership returned."},
    {"_begin_owner_access", carrier_begin_owner_access, METH_O,
     "_begin_owner_access($self, token, /)\n--\n\n"
     "Let the holder of `token` write on this thread until _end_owner_access.\n"
     "Nests. Raises RuntimeError for a wrong token."},
    {"_end_owner_access", carrier_end_owner_access, METH_O,
     "_end_owner_access($self, token, /)\n--\n\n"
     "End one _begin_owner_access on this thread. Raises RuntimeError for a\n"
     "wrong token or thread."},
    {"_has_owner_access", carrier_has_owner_access, METH_NOARGS,
     "_has_owner_access($self, /)\n--\n\nWhether this thread is inside _begin_owner_access."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef carrier_getset[] = {
    {"version", carrier_get_version, NULL,
     "Write counter: starts at 0 and grows by one per slot write.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMappingMethods carrier_as_mapping = {
    .mp_subscript = sw_py_carrier_get_checked,
    .mp_ass_subscript = carrier_ass_subscript,
};

PyTypeObject SwCarrier_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "strideweave.Carrier",
    .tp_basicsize = sizeof(SwCarrierObject),
    .tp_dealloc = carrier_dealloc,
    .tp_as_mapping = &carrier_as_mapping,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Carrier(slots=None, *, dtype=None, mutable=True)\n--\n\n"
              "A flat run of typed slots; the open base for carriers written in\n"
              "Python. Either implement the hooks (size, dtype, get_value, and\n"
              "optionally set_value, new_like, allocate_like, _is_mutable, _release)\n"
              "and construct with no arguments, or attach a CarrierDefinition to your\n"
              "class with register_carrier_definition and construct it as\n"
              "MyCarrier(slots, dtype=DType.Float32, mutable=True): its storage then\n"
              "comes from the definition's StorageProvider.\n\n"
              "slots, dtype and mutable are for definition-backed classes only;\n"
              "other classes raise TypeError when they are given.",
    .tp_weaklistoffset = offsetof(SwCarrierObject, weakreflist),
    .tp_methods = carrier_methods,
    .tp_getset = carrier_getset,
    .tp_init = carrier_init,
    .tp_new = carrier_new,
};

/* Open marker base of the dependent (composite) carriers. */
PyTypeObject SwDependentCarrier_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "strideweave.DependentCarrier",
    .tp_basicsize = sizeof(SwCarrierObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "DependentCarrier()\n--\n\n"
              "Base class of carriers built from other carriers they take over\n"
              "(Evictable). It adds no methods.",
    .tp_base = &SwCarrier_Type,
};

/* Test aids for the C-12 predicate and growth the movement code uses. */
static PyObject *aid_is_allocatable_empty(PyObject *mod, PyObject *carrier)
{
    (void)mod;
    if (!SwCarrier_Check(carrier)) {
        PyErr_SetString(PyExc_TypeError, "expected a Carrier");
        return NULL;
    }
    int t = sw_py_carrier_is_allocatable_empty(carrier);
    return t < 0 ? NULL : PyBool_FromLong(t);
}

static PyObject *aid_allocate(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    (void)mod;
    long long n;
    if (nargs != 2 || !SwCarrier_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "_carrier_allocate(carrier, nslots)");
        return NULL;
    }
    n = PyLong_AsLongLong(args[1]);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (sw_py_carrier_allocate(args[0], n) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef module_functions[] = {
    {"_carrier_is_allocatable_empty", aid_is_allocatable_empty, METH_O,
     "_carrier_is_allocatable_empty(carrier, /)\n--\n\nTest aid: whether the carrier is empty and can grow."},
    {"_carrier_allocate", (PyCFunction)(void (*)(void))aid_allocate, METH_FASTCALL,
     "_carrier_allocate(carrier, nslots, /)\n--\n\nTest aid: grow the carrier through its _allocate hook."},
    {"reject_carrier_subclass", reject_carrier_subclass, METH_O,
     "reject_carrier_subclass(name, /)\n--\n\n"
     "Raise the TypeError a subclass of the closed carrier class `name`\n"
     "gets: CLOSED_CARRIER_MESSAGE.format(name=name)."},
    {NULL, NULL, 0, NULL},
};

static int intern(PyObject **slot, const char *s)
{
    *slot = PyUnicode_InternFromString(s);
    return *slot ? 0 : -1;
}

int sw_py_carrier_init(PyObject *module)
{
    if (intern(&str_size, "size") < 0 || intern(&str_dtype, "dtype") < 0 ||
        intern(&str_get_value, "get_value") < 0 ||
        intern(&str_set_value, "set_value") < 0 ||
        intern(&str_is_mutable_hook, "_is_mutable") < 0 ||
        intern(&str_supports_hook, "_supports_storage_dtype") < 0 ||
        intern(&str_release_hook, "_release") < 0 || intern(&str_format, "format") < 0 ||
        intern(&str_allocate_hook, "_allocate") < 0)
        return -1;
    closed_message = PyUnicode_FromString(
        "{name} is a closed carrier implementation and cannot be subclassed; "
        "subclass strideweave.Carrier instead");
    if (!closed_message)
        return -1;
    if (PyType_Ready(&SwCarrier_Type) < 0 || PyType_Ready(&SwDependentCarrier_Type) < 0)
        return -1;
    if (PyModule_AddObjectRef(module, "Carrier", (PyObject *)&SwCarrier_Type) < 0 ||
        PyModule_AddObjectRef(module, "DependentCarrier",
                              (PyObject *)&SwDependentCarrier_Type) < 0 ||
        PyModule_AddObjectRef(module, "CLOSED_CARRIER_MESSAGE", closed_message) < 0 ||
        PyModule_AddFunctions(module, module_functions) < 0)
        return -1;
    return 0;
}

/* The binding's part of a release: a built-in drops its views of the
 * storage, a definition-backed carrier releases its storage, any other
 * subclass runs its release hook. Also for a carrier whose core state a
 * composite's core release already released (an Evictable's tiers). */
int sw_py_carrier_drop_storage(PyObject *carrier)
{
    const sw_py_carrier_ops *ops = sw_py_carrier_builtin_ops(carrier);
    if (ops) {
        ops->drop(carrier);
        return 0;
    }
    if (SW_DEFINED(carrier))
        return CARRIER(carrier)->storage_dtype ? sw_py_defined_release(carrier) : 0;
    PyObject *r = PyObject_CallMethodNoArgs(carrier, str_release_hook);
    Py_XDECREF(r);
    return r ? 0 : -1;
}
