/* Evictable (contract-carriers E-1 .. E-10): the Python face of the core's
 * Evictable (strideweave/evictable.h), which is the object's core handle and
 * decides residency, claims, evict/promote, fresh-or-reuse, the pending
 * guard, failures and undo. The binding parses arguments, keeps the Python
 * objects of the current tiers, raises the contract's exceptions and plugs
 * into the core's binding-tier hooks: every tier move is a binding move
 * (built-in pairs on the core's move engine, Python-level tiers as supplied
 * transfers) with graph construction and profiling off; a Python tier's
 * size; the target's allocate_like; releasing a tier the core gives up.
 * The GIL: transitions call the core with it held and the core runs the
 * hooks on that thread with no core lock held; a Python exception a hook
 * raises is kept and raised again when the core returns. */
#include "sw_carrier.h"
#include "sw_extension.h"
#include "sw_move.h"
#include "sw_profiling.h"
#include "sw_tiers.h"
#include "strideweave/alloc.h"
#include "strideweave/evictable.h"
#include "strideweave/testing.h" /* the fault-injection test hooks */

#include <string.h>

#define EV(o) ((SwEvictableObject *)(o))
#define CARRIER(o) ((SwCarrierObject *)(o))
#define CORE(o) (CARRIER(o)->core)

typedef struct SwEvictableObject {
    SwCarrierObject base;    /* base.core: the core's Evictable */
    PyObject *primary;       /* the Python objects of the core's tiers */
    PyObject *secondary;
    PyObject *dtype;         /* captured at construction */
    PyObject *fresh;         /* during a transition: the factory's carrier */
    PyObject *exc;           /* during a transition: what a hook raised */
    int tiers_dropped;       /* ev_drop freed the tiers' binding storage */
} SwEvictableObject;

PyTypeObject SwEvictable_Type;

/* ---- following the core's tiers -------------------------------------------- */

/* The role's tier as the core has it: the core installs the tier the
 * factory hook made (held as `fresh`) when a transition succeeds, and in
 * a forked child when fork() finished a transition another thread was
 * running (strideweave/evictable.h, "Fork"). */
static void follow_tier(SwEvictableObject *e, PyObject **role, int primary)
{
    sw_carrier *t = primary ? sw_evictable_primary(CORE(e)) : sw_evictable_secondary(CORE(e));
    if (t && *role && CARRIER(*role)->core != t && e->fresh && CARRIER(e->fresh)->core == t) {
        Py_SETREF(*role, e->fresh);
        e->fresh = NULL;
    }
    sw_carrier_unref(t);
}

/* Only the factory's carrier can become a tier behind the binding's back:
 * with none held the tier objects are the core's tiers. */
static void follow_core(SwEvictableObject *e)
{
    if (!e->fresh)
        return;
    follow_tier(e, &e->primary, 1);
    follow_tier(e, &e->secondary, 0);
}

/* ---- carrier ops --------------------------------------------------------- */

static sw_dtype ev_dtype(PyObject *self)
{
    return SwDType_ID(EV(self)->dtype);
}

static int64_t ev_size(PyObject *self)
{
    return sw_py_state_released(self) ? 0 : sw_carrier_size(CORE(self));
}

static const char *ev_unavailable(PyObject *self)
{
    return sw_evictable_is_evicted(CORE(self))
               ? "this Evictable is evicted: call promote() before reading or writing its slots"
               : NULL;
}

/* The core's claim token on the current primary (for owner access). */
static int64_t primary_token(PyObject *self)
{
    sw_carrier *tier = NULL;
    uint64_t token = 0;
    sw_error err;
    if (sw_evictable_tier(CORE(self), 1, &tier, &token, &err) != SW_OK)
        return 0;
    sw_carrier_unref(tier);
    return (int64_t)token;
}

static PyObject *ev_load(PyObject *self, int64_t index)
{
    SwEvictableObject *e = EV(self);
    follow_core(e);
    int64_t token = primary_token(self);
    if (sw_py_carrier_begin_owner(e->primary, token) < 0)
        return NULL;
    PyObject *v = sw_py_carrier_getitem(e->primary, index);
    sw_py_carrier_end_owner(e->primary, token);
    return v;
}

static int ev_store(PyObject *self, int64_t index, const void *slot)
{
    SwEvictableObject *e = EV(self);
    follow_core(e);
    int64_t token = primary_token(self);
    PyObject *v = sw_py_load_slot(ev_dtype(self), slot);
    if (!v || sw_py_carrier_begin_owner(e->primary, token) < 0) {
        Py_XDECREF(v);
        return -1;
    }
    int rc = sw_py_carrier_setitem(e->primary, index, v);
    sw_py_carrier_end_owner(e->primary, token);
    Py_DECREF(v);
    return rc;
}

static int ev_supports(sw_dtype dtype)
{
    (void)dtype;
    return 0; /* unused: supports_self answers */
}

/* The tiers' intersection, asked of the tier objects in any state. */
static int ev_supports_self(PyObject *self, sw_dtype dtype)
{
    follow_core(EV(self));
    return sw_py_tiers_support_dtype(EV(self)->primary, EV(self)->secondary, dtype);
}

/* E-8: the core's release released both tiers' state (and the storage of
 * core carriers) and relinquished them; the binding storage of the tiers
 * that release released (the core's answer) goes here, once. A tier that
 * refuses is reported, not fatal: the hierarchy is released either way. */
static void ev_drop(PyObject *self)
{
    SwEvictableObject *e = EV(self);
    follow_core(e);
    if (e->tiers_dropped)
        return;
    e->tiers_dropped = 1;
    int live = sw_evictable_live_tiers(CORE(e));
    if ((live & SW_EVICTABLE_PRIMARY_LIVE) && e->primary &&
        sw_py_carrier_drop_storage(e->primary) < 0)
        PyErr_WriteUnraisable(self);
    if ((live & SW_EVICTABLE_SECONDARY_LIVE) && e->secondary &&
        sw_py_carrier_drop_storage(e->secondary) < 0)
        PyErr_WriteUnraisable(self);
}

static const sw_py_carrier_ops sw_py_evictable_ops = {
    .name = "Evictable",
    .dtype = ev_dtype,
    .size = ev_size,
    .load = ev_load,
    .store = ev_store,
    .supports = ev_supports,
    .drop = ev_drop,
    .unavailable = ev_unavailable,
    .supports_self = ev_supports_self,
    .core_class = &sw_evictable_class,
};

/* ---- construction (E-1, E-10) ---------------------------------------------- */

static int is_block_device_carrier(PyObject *tier)
{
    return Py_TYPE(tier) == &SwBlockDeviceCarrier_Type;
}

/* E-10: the exact pair must be able to move a -> b now. */
static int check_edge(PyObject *a, PyObject *b)
{
    sw_py_route route;
    if (sw_py_route_resolve(Py_TYPE(a), Py_TYPE(b), &route) < 0)
        return sw_py_reraise_prefixed(PyExc_NotImplementedError,
                                      "an Evictable needs moves both ways between its tiers");
    int metal = Py_TYPE(a) == &SwMetal_Type || Py_TYPE(b) == &SwMetal_Type;
    if (metal && route.op_type == (PyObject *)&SwElementwise_Type) {
        PyErr_Format(PyExc_NotImplementedError,
                     "an Evictable with a Metal tier needs a registered move from %s to %s",
                     sw_py_cname(a), sw_py_cname(b));
        return -1;
    }
    return 0;
}

/* Checks (1) to (5) for one tier. */
static int check_tier(PyObject *tier, const char *role)
{
    if (!SwCarrier_Check(tier)) {
        PyErr_Format(PyExc_TypeError, "%s must be a Carrier, not %.100s", role,
                     Py_TYPE(tier)->tp_name);
        return -1;
    }
    return 0;
}

static int check_tiers(PyObject *p, PyObject *s)
{
    if (check_tier(p, "primary") < 0 || check_tier(s, "secondary") < 0)
        return -1;
    if (is_block_device_carrier(p) || is_block_device_carrier(s)) {
        PyErr_SetString(PyExc_TypeError, "a BlockDeviceCarrier cannot be an Evictable tier");
        return -1;
    }
    return sw_py_check_tier_pair(p, s);
}

static int check_dtypes_and_size(PyObject *p, PyObject *s, PyObject **dtype, int64_t *n)
{
    PyObject *d;
    if (sw_py_tiers_dtype(p, s, &d) < 0)
        return -1;
    int rc = -1;
    int m = sw_py_carrier_is_mutable(s);
    if (m == 0)
        PyErr_Format(PyExc_RuntimeError, "the secondary %s carrier is not mutable", sw_py_cname(s));
    if (m > 0 && sw_py_carrier_size(p, n) == 0) {
        if (*n == 0)
            PyErr_SetString(PyExc_ValueError, "the primary carrier is empty (size 0)");
        else
            rc = 0;
    }
    if (rc == 0)
        *dtype = d;
    else
        Py_DECREF(d);
    return rc;
}

/* ---- the core's binding-tier hooks ---------------------------------------- */

/* The Python object of one of this Evictable's tier handles. */
static PyObject *tier_object(SwEvictableObject *e, sw_carrier *tier)
{
    PyObject *objs[3] = {e->primary, e->secondary, e->fresh};
    for (int i = 0; i < 3; i++)
        if (objs[i] && CARRIER(objs[i])->core == tier)
            return objs[i];
    return NULL;
}

/* Keep the Python exception a hook raised (the first one) for the caller
 * of the transition; the core gets a status naming the hook. */
static sw_status hook_failed(SwEvictableObject *e, const char *what, sw_error *err)
{
    PyObject *exc = sw_py_take_exception();
    if (!e->exc)
        e->exc = exc;
    else
        Py_XDECREF(exc);
    return sw_error_set(err, SW_EINVAL, "Evictable: the tier's %s raised", what);
}

static sw_status unknown_tier(sw_error *err)
{
    return sw_error_set(err, SW_ETYPE, "Evictable: a tier without a Python object");
}

static sw_status hook_size(sw_carrier *tier, void *user, int64_t *out, sw_error *err)
{
    PyObject *obj = tier_object(user, tier);
    if (!obj)
        return unknown_tier(err);
    return sw_py_carrier_size(obj, out) < 0 ? hook_failed(user, "size", err) : SW_OK;
}

/* A fresh target: the target's allocate_like (empty: the move fills every
 * slot, so zeroing first is wasted). */
static sw_status hook_factory(sw_carrier *prototype, int64_t size, sw_dtype dtype, void *user,
                              sw_carrier **out, sw_error *err)
{
    (void)dtype;
    SwEvictableObject *e = user;
    PyObject *target = tier_object(e, prototype);
    if (!target)
        return unknown_tier(err);
    PyObject *n = PyLong_FromLongLong(size);
    PyObject *d =
        n ? sw_py_tier_factory(target, "allocate_like", n, Py_True, e->dtype, Py_True) : NULL;
    Py_XDECREF(n);
    if (d && !SwCarrier_Check(d)) {
        PyErr_Format(PyExc_TypeError, "%s.allocate_like returned %.100s, not a Carrier",
                     sw_py_cname(target), Py_TYPE(d)->tp_name);
        Py_CLEAR(d);
    }
    if (!d)
        return hook_failed(e, "allocate_like", err);
    Py_XSETREF(e->fresh, d);
    *out = sw_carrier_ref(CARRIER(d)->core);
    return SW_OK;
}

/* The tier move: (n):(1) from `from` into `to` as a binding move, blocking,
 * no graph, no profiling record; the core holds the claimed tiers' owner
 * access on this thread. */
static sw_status hook_move(sw_carrier *from, sw_carrier *to, int64_t n, void *user,
                           sw_error *err)
{
    PyObject *src = tier_object(user, from), *dst = tier_object(user, to);
    if (!src || !dst)
        return unknown_tier(err);
    PyObject *layout = sw_py_flat_layout(n);
    PyObject *t = layout ? sw_py_tensor_new1(src, 0, layout) : NULL;
    Py_XDECREF(layout);
    PyObject *moved = NULL;
    if (t) {
        int was = sw_py_grad_enabled();
        sw_py_set_grad_enabled(0);
        sw_py_profile_internal_moves(1);
        /* Waited for at once: a small tier move copies on this thread,
         * with no pool round trip, and keeps its destination cached. */
        moved = sw_py_move_now(t, dst, NULL);
        sw_py_profile_internal_moves(-1);
        sw_py_set_grad_enabled(was);
        if (moved && sw_fault_armed("evictable_moved_pause")) {
            /* tests: stop (the GIL let go) once the move has committed and
             * before the core installs its result, so a fork lands there */
            Py_BEGIN_ALLOW_THREADS
            sw_fault_pause("evictable_moved_pause");
            Py_END_ALLOW_THREADS
        }
        Py_DECREF(t);
    }
    if (moved && ((SwTensorObject *)moved)->subs[0].carrier != dst) {
        PyErr_SetString(PyExc_RuntimeError, "the tier move did not land on its destination");
        Py_CLEAR(moved);
    }
    if (!moved)
        return hook_failed(user, "move", err);
    Py_DECREF(moved);
    return SW_OK;
}

/* A tier the core gives up (a failed transition's fresh carrier, a replaced
 * target) is released through the binding; the transition's own error (or
 * success) wins over a refusal, which is reported. */
static void hook_discard(sw_carrier *tier, void *user)
{
    PyObject *obj = tier_object(user, tier);
    if (obj && !sw_py_state_released(obj) && sw_py_carrier_release(obj) < 0)
        PyErr_WriteUnraisable(user);
}

/* ---- construction, continued ------------------------------------------------- */

static PyObject *ev_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"primary", "secondary", NULL};
    PyObject *p, *s, *dtype = NULL;
    int64_t n = 0;
    if (sw_py_carrier_check_exact(type, &SwEvictable_Type) < 0 ||
        !PyArg_ParseTupleAndKeywords(args, kwds, "OO:Evictable", kwlist, &p, &s) ||
        check_tiers(p, s) < 0 || check_dtypes_and_size(p, s, &dtype, &n) < 0)
        return NULL;
    int mutable_ = sw_py_carrier_is_mutable(p);
    /* The checks above ran tier hooks (user code): the core checks the
     * tiers' states again (released, owned, pending) before it claims. */
    if (mutable_ < 0 || check_edge(p, s) < 0 || check_edge(s, p) < 0) {
        Py_DECREF(dtype);
        return NULL;
    }
    PyObject *self = sw_py_carrier_alloc(type, mutable_);
    if (!self) {
        Py_DECREF(dtype);
        return NULL;
    }
    SwEvictableObject *e = EV(self);
    e->primary = Py_NewRef(p);
    e->secondary = Py_NewRef(s);
    e->dtype = dtype;
    sw_evictable_options o = {
        .factory = hook_factory,
        .user = e,
        .move = hook_move,
        .size = hook_size,
        .discard = hook_discard,
        .dtype = SwDType_ID(dtype),
    };
    sw_error err;
    if (sw_evictable_new(CORE(p), CORE(s), &o, &CORE(self), &err) != SW_OK) {
        CORE(self) = NULL;
        if (e->exc)
            sw_py_restore_exception(Py_NewRef(e->exc));
        else
            sw_py_raise(&err);
        Py_CLEAR(self);
    }
    return self;
}

/* ---- transitions (E-4, E-5, E-6) ------------------------------------------------ */

/* The core decides; the binding installs the Python object of a tier the
 * core replaced (the one its factory hook made) and raises what failed.
 * The core refuses first (owned without owner access, released, pending:
 * E-4's order), then does nothing when the values are there. A transition
 * another thread was running when the process forked ends in the child
 * inside fork() itself (strideweave/evictable.h, "Fork"): the core clears
 * its pending mark and that thread's access to the tiers; the move inside
 * it is ended with the inherited moves. */
static int transition(PyObject *self, int evict)
{
    SwEvictableObject *e = EV(self);
    follow_core(e);
    sw_error err;
    sw_status st = evict ? sw_evictable_evict(CORE(self), &err)
                         : sw_evictable_promote(CORE(self), &err);
    if (st == SW_OK)
        follow_core(e);
    Py_CLEAR(e->fresh);
    PyObject *exc = e->exc;
    e->exc = NULL;
    if (st == SW_OK) {
        Py_XDECREF(exc);
        return 0;
    }
    if (exc) {
        sw_py_restore_exception(exc);
        return -1;
    }
    return sw_py_raise(&err);
}

static PyObject *ev_evict(PyObject *self, PyObject *unused)
{
    (void)unused;
    return transition(self, 1) < 0 ? NULL : Py_NewRef(Py_None);
}

static PyObject *ev_promote(PyObject *self, PyObject *unused)
{
    (void)unused;
    return transition(self, 0) < 0 ? NULL : Py_NewRef(Py_None);
}

/* ---- introspection, factories ------------------------------------------------- */

static PyObject *ev_is_evicted(PyObject *self, PyObject *unused)
{
    (void)unused;
    return PyBool_FromLong(sw_evictable_is_evicted(CORE(self)));
}

static PyObject *ev_get_primary(PyObject *self, void *closure)
{
    (void)closure;
    follow_core(EV(self));
    return Py_NewRef(EV(self)->primary);
}

static PyObject *ev_get_secondary(PyObject *self, void *closure)
{
    (void)closure;
    follow_core(EV(self));
    return Py_NewRef(EV(self)->secondary);
}

/* Evictable(p, s) over two fresh tiers; both are released when it cannot
 * be built. */
static PyObject *wrap_fresh(PyObject *p, PyObject *s)
{
    PyObject *made = p && s ? PyObject_CallFunctionObjArgs((PyObject *)&SwEvictable_Type, p, s,
                                                           NULL)
                            : NULL;
    if (!made) {
        PyObject *exc = sw_py_take_exception();
        if (p && sw_py_carrier_release(p) < 0)
            PyErr_Clear();
        if (s && sw_py_carrier_release(s) < 0)
            PyErr_Clear();
        sw_py_restore_exception(exc);
    }
    Py_XDECREF(p);
    Py_XDECREF(s);
    return made;
}


/* E-9: a promoted Evictable over primary.<factory>(...) and an empty
 * secondary of the same class. */
static PyObject *ev_factory(PyObject *self, const char *name, PyObject *first,
                            PyObject *mutable_, PyObject *dtype)
{
    follow_core(EV(self));
    PyObject *zero = PyLong_FromLong(0);
    SwEvictableObject *e = EV(self);
    PyObject *p = zero ? sw_py_tier_factory(e->primary, name, first, mutable_, dtype, NULL) : NULL;
    PyObject *s =
        p ? sw_py_tier_factory(e->secondary, "allocate_like", zero, Py_True, dtype, NULL) : NULL;
    Py_XDECREF(zero);
    if (!s && p) {
        PyObject *exc = sw_py_take_exception();
        if (sw_py_carrier_release(p) < 0)
            PyErr_Clear();
        sw_py_restore_exception(exc);
        Py_CLEAR(p);
    }
    return p ? wrap_fresh(p, s) : NULL;
}

static PyObject *ev_new_like(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"values", "mutable", "dtype", NULL};
    PyObject *values, *mutable_ = Py_True, *dtype = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$OO:new_like", kwlist, &values, &mutable_,
                                     &dtype))
        return NULL;
    return ev_factory(self, "new_like", values, mutable_, dtype);
}

static PyObject *ev_allocate_like(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"size", "mutable", "dtype", "empty", NULL};
    PyObject *size, *mutable_ = Py_True, *dtype = Py_None, *empty = Py_False;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$OOO:allocate_like", kwlist, &size,
                                     &mutable_, &dtype, &empty))
        return NULL;
    return ev_factory(self, "allocate_like", size, mutable_, dtype);
}

static PyObject *ev_dlpack_info(PyObject *self, PyObject *unused)
{
    (void)unused;
    PyErr_Format(PyExc_BufferError,
                 "DLPack is not supported by Evictable carriers (%s): move the values to a "
                 "CPU carrier to export them", sw_evictable_is_evicted(CORE(self)) ? "evicted" : "promoted");
    return NULL;
}

/* ---- lifetime ------------------------------------------------------------------- */

static int ev_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(EV(self)->primary);
    Py_VISIT(EV(self)->secondary);
    return 0;
}

/* E-8: collecting an unreleased hierarchy only relinquishes the tiers: the
 * core does that when its last reference goes (dealloc). */
static int ev_clear(PyObject *self)
{
    SwEvictableObject *e = EV(self);
    Py_CLEAR(e->primary);
    Py_CLEAR(e->secondary);
    Py_CLEAR(e->fresh);
    return 0;
}

static void ev_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    ev_clear(self);
    Py_CLEAR(EV(self)->dtype);
    Py_CLEAR(EV(self)->exc);
    if (CARRIER(self)->weakreflist)
        PyObject_ClearWeakRefs(self);
    sw_carrier_unref(CORE(self)); /* the core's Evictable: relinquishes the tiers */
    CORE(self) = NULL;
    Py_TYPE(self)->tp_free(self);
}

SW_CARRIER_CLOSED_INIT_SUBCLASS(ev_init_subclass, "Evictable")

static PyMethodDef ev_methods[] = {
    {"size", sw_py_carrier_meth_size, METH_NOARGS,
     "size($self, /)\n--\n\nNumber of slots (the primary's size when built); 0 after release."},
    {"dtype", sw_py_carrier_meth_dtype, METH_NOARGS, "dtype($self, /)\n--\n\nThe DType its slots store (both tiers store it)."},
    {"get_value", sw_py_carrier_meth_get_value, METH_O,
     "get_value($self, index, /)\n--\n\nRead slot `index`. Raises RuntimeError while evicted."},
    {"set_value", (PyCFunction)(void (*)(void))sw_py_carrier_meth_set_value, METH_FASTCALL,
     "set_value($self, index, value, /)\n--\n\nWrite `value` into slot `index`. Raises RuntimeError while evicted."},
    {"_is_mutable", sw_py_carrier_meth_intrinsic_mutable, METH_NOARGS,
     "_is_mutable($self, /)\n--\n\nWhether the primary was mutable when the Evictable was built."},
    {"is_evicted", ev_is_evicted, METH_NOARGS,
     "is_evicted($self, /)\n--\n\nTrue while the values live in the secondary tier."},
    {"evict", ev_evict, METH_NOARGS,
     "evict($self, /)\n--\n\n"
     "Move the values to the secondary tier (reusing it when it is big enough,\n"
     "else a new carrier from its allocate_like) and release the primary's\n"
     "storage. Slots cannot be read or written until promote(). Nothing changes\n"
     "if the move fails; doing it twice does nothing. Raises RuntimeError for a\n"
     "released Evictable or one owned by another composite."},
    {"promote", ev_promote, METH_NOARGS,
     "promote($self, /)\n--\n\n"
     "Move the values back to the primary tier (a new carrier from the primary's\n"
     "allocate_like when it was released) and release the secondary's storage."},
    {"new_like", (PyCFunction)(void (*)(void))ev_new_like, METH_VARARGS | METH_KEYWORDS,
     "new_like($self, values, *, mutable=True, dtype=None)\n--\n\n"
     "A promoted Evictable over primary.new_like(values, ...) and an empty\n"
     "carrier of the secondary's class."},
    {"allocate_like", (PyCFunction)(void (*)(void))ev_allocate_like,
     METH_VARARGS | METH_KEYWORDS,
     "allocate_like($self, size, *, mutable=True, dtype=None, empty=False)\n--\n\n"
     "A promoted Evictable over primary.allocate_like(size, ...) and an empty\n"
     "carrier of the secondary's class."},
    {"dlpack_info", ev_dlpack_info, METH_NOARGS,
     "dlpack_info($self, /)\n--\n\nAlways raises BufferError: Evictable values are not exported."},
    {"__init_subclass__", (PyCFunction)(void (*)(void))ev_init_subclass,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "__init_subclass__($type, /, *args, **kwargs)\n--\n\n"
     "Evictable cannot be subclassed: defining a subclass raises TypeError."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef ev_getset[] = {
    {"primary", ev_get_primary, NULL, "The primary (fast) tier carrier.", NULL},
    {"secondary", ev_get_secondary, NULL, "The secondary (large) tier carrier.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject SwEvictable_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "strideweave.Evictable",
    .tp_basicsize = sizeof(SwEvictableObject),
    .tp_dealloc = ev_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Evictable(primary, secondary)\n--\n\n"
              "Values that live in one of two carriers: a fast primary and a large\n"
              "secondary. It takes ownership of both (your references to them can\n"
              "still read but no longer write, release or move them). evict() moves\n"
              "the values to the secondary, promote() brings them back; slots are\n"
              "readable and writable only while promoted. Raises TypeError for\n"
              "non-carriers, a BlockDeviceCarrier tier or different dtypes,\n"
              "ValueError for the same carrier twice or an empty primary,\n"
              "RuntimeError for a released, owned or (secondary) immutable tier,\n"
              "NotImplementedError when the tiers cannot move into each other.\n\n"
              "    e = Evictable(CPU(1024), FileBacked())\n"
              "    e.evict(); e.promote()",
    .tp_traverse = ev_traverse,
    .tp_clear = ev_clear,
    .tp_methods = ev_methods,
    .tp_getset = ev_getset,
    .tp_base = &SwDependentCarrier_Type,
    .tp_init = sw_py_carrier_builtin_init,
    .tp_new = ev_new,
};

int sw_py_evictable_init(PyObject *module)
{
    if (sw_py_carrier_register_builtin(&SwEvictable_Type, &sw_py_evictable_ops, 1) < 0 ||
        PyType_Ready(&SwEvictable_Type) < 0)
        return -1;
    return PyModule_AddObjectRef(module, "Evictable", (PyObject *)&SwEvictable_Type);
}
