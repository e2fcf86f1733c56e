/* Batch reads and writes of the slots of a carrier the binding keeps the
 * slots of (a Python Carrier subclass, a definition-backed carrier): the
 * callbacks the core calls for them (carrier.h,
 * SW_CARRIER_CLASS_SLOTS_UNLOCKED: no lock held), and the one read and
 * the one write of a (carrier, offset, layout) as values of a dtype that
 * the binding's value reads and writes go through.
 *
 * Each slot is read by the checked slot read (sw_py_carrier_getitem) and
 * written by the checked slot write (sw_py_carrier_setitem): the
 * carrier's state is looked at again and its hooks run before every slot,
 * in logical order, one call per element, as a read or write from Python
 * would. That is also what makes the core's "checked, unlocked, then
 * called" order safe (carrier.h: a release between the core's check and
 * the call is seen by the first slot's own check). Each slot write steps
 * the version as C-5 says, so the classes are WRITES_STEP_VERSION: the
 * core adds no step of its own, and a batch leaves the version where the
 * same writes from Python would.
 *
 * GIL: the core calls back on the thread that called it; the binding's
 * callers hold the GIL, so PyGILState_Ensure only notes it, and a hook's
 * exception is kept for that caller to re-raise as it is (sw_py_raise).
 * A C caller on a thread without the GIL gets it taken for the call and
 * the exception translated into the error record.
 *
 * May depend on: the carrier base (py_carrier.c) and its class table
 * (py_carrier_class.c), dtype and errors. */
#include "sw_carrier.h"
#include "sw_layout_slots.h"

#include <string.h>

/* Bytes per value of `as`: its slot width, a binary64 for Float64 (the
 * minimal operations' and autograd's reads), a pointer for a handle. */
static size_t bytes_of(sw_dtype as)
{
    if (as == SW_AS_HANDLE)
        return sizeof(PyObject *);
    return as == SW_DT_FLOAT64 ? sizeof(double) : sw_dtype_slot_bytes(as);
}

/* One value into `at` by the dtype's rule: Float64 as float(value) (what
 * the operations computed from), a handle as the object itself (a new
 * reference: carrier.h, SW_AS_HANDLE), any other by C-9 (sw_py_store_slot). */
static int store_as(sw_dtype as, PyObject *value, char *at)
{
    if (as == SW_AS_HANDLE) {
        PyObject *ref = Py_NewRef(value);
        memcpy(at, &ref, sizeof ref);
        return 0;
    }
    if (as != SW_DT_FLOAT64)
        return sw_py_store_slot(as, value, at);
    double d = PyFloat_AsDouble(value);
    if (d == -1.0 && PyErr_Occurred())
        return -1;
    memcpy(at, &d, sizeof d);
    return 0;
}

/* The checked read of each slot, converted. 0 / -1. */
static int read_checked(PyObject *carrier, const int64_t *slots, int64_t n, sw_dtype as,
                        char *out)
{
    size_t bytes = bytes_of(as);
    int rc = 0;
    for (int64_t k = 0; k < n && rc == 0; k++) {
        PyObject *v = sw_py_carrier_getitem(carrier, slots[k]);
        rc = v ? store_as(as, v, out + (size_t)k * bytes) : -1;
        Py_XDECREF(v);
    }
    return rc;
}

/* One value of `as` at `at` as Python sees it: Float64 a float, any other
 * by its slot (sw_py_load_slot). New reference or NULL. */
static PyObject *load_as(sw_dtype as, const char *at)
{
    if (as == SW_AS_HANDLE)
        return Py_NewRef(*(PyObject *const *)at);
    if (as != SW_DT_FLOAT64)
        return sw_py_load_slot(as, at);
    double d;
    memcpy(&d, at, sizeof d);
    return PyFloat_FromDouble(d);
}

/* The checked write of each slot, in order; stops at the first failure
 * (the slots before it stay written, their versions stepped). 0 / -1. */
static int write_checked(PyObject *carrier, const int64_t *slots, int64_t n, sw_dtype as,
                         const char *in)
{
    size_t bytes = bytes_of(as);
    int rc = 0;
    for (int64_t k = 0; k < n && rc == 0; k++) {
        PyObject *v = load_as(as, in + (size_t)k * bytes);
        rc = v ? sw_py_carrier_setitem(carrier, slots[k], v) : -1;
        Py_XDECREF(v);
    }
    return rc;
}

/* ---- the callbacks the core calls (no lock held) ------------------------- */

/* Both directions (in NULL: a read into out), with the GIL. */
static sw_status slots_cb(void *impl, const int64_t *slots, int64_t n, sw_dtype as, void *out,
                          const void *in, sw_error *err)
{
    int kept = PyGILState_Check(); /* the caller holds the GIL: it re-raises */
    sw_py_gil gil = sw_py_gil_ensure();
    PyObject *carrier = Py_XNewRef(((sw_py_slot_box *)impl)->obj);
    sw_status st = SW_OK;
    if (!carrier)
        st = sw_error_set(err, SW_ESTATE, "the carrier's Python object is gone");
    else if ((in ? write_checked(carrier, slots, n, as, in)
                 : read_checked(carrier, slots, n, as, out)) < 0)
        st = sw_py_error_to_core(err, kept);
    Py_XDECREF(carrier);
    sw_py_gil_release(gil);
    return st;
}

static sw_status read_slots_cb(void *impl, const int64_t *slots, int64_t n, sw_dtype as,
                               void *buf, sw_error *err)
{
    return slots_cb(impl, slots, n, as, buf, NULL, err);
}

static sw_status write_slots_cb(void *impl, const int64_t *slots, int64_t n, sw_dtype as,
                                const void *buf, sw_error *err)
{
    return slots_cb(impl, slots, n, as, NULL, buf, err);
}

/* Handles read_slots gave (SW_AS_HANDLE): their references go. */
static void drop_handles_cb(void *impl, void *const *handles, int64_t n)
{
    (void)impl;
    sw_py_gil gil = sw_py_gil_ensure();
    for (int64_t k = 0; k < n; k++)
        Py_DECREF((PyObject *)handles[k]);
    sw_py_gil_release(gil);
}

/* ---- the binding's read, write and copy ---------------------------------- */

/* Both directions (in NULL: a read into out): the core's (tensor.h), its
 * refusal in the binding's words; slot by slot, converted by C-9, only the
 * kinds it does not carry (an Int32 or Bool carrier read as Float64). */
static int layout_as(PyObject *carrier, int64_t offset, const sw_layout *L, sw_dtype as,
                     void *out, const void *in)
{
    if (L->size == 0)
        return 0;
    sw_carrier *core = SW_STATE_C(carrier)->core;
    sw_error err;
    sw_status st;
    if (sw_carrier_holds_as(core, as)) {
        Py_XDECREF(sw_py_carrier_kept_error(carrier)); /* a stale one is not this call's */
        SW_CORE_CALL(sw_py_core_io_waits(core),
                     st = in ? sw_carrier_write_layout_as(core, offset, L, as, in, &err)
                             : sw_carrier_read_layout_as(core, offset, L, as, out, &err));
        return st == SW_OK ? 0 : sw_py_carrier_raise_slot(carrier, &err, in != NULL, offset);
    }
    int64_t *slots = sw_py_layout_slots(L, offset);
    if (!slots)
        return -1;
    int rc = in ? write_checked(carrier, slots, L->size, as, in)
                : read_checked(carrier, slots, L->size, as, out);
    PyMem_Free(slots);
    return rc;
}

int sw_py_carrier_read_layout(PyObject *carrier, int64_t offset, const sw_layout *L,
                              sw_dtype as, void *out)
{
    return layout_as(carrier, offset, L, as, out, NULL);
}

/* A run of `count` slots from `at`: a flat layout of that extent. */
int sw_py_carrier_run_as(PyObject *carrier, int64_t at, int64_t count, sw_dtype as, void *out,
                         const void *in)
{
    sw_layout run;
    int64_t extent, stride;
    sw_py_run_layout(&run, &extent, &stride, count);
    return layout_as(carrier, at, &run, as, out, in);
}

int sw_py_carrier_copy_layout(PyObject *src, int64_t src_offset, PyObject *dst,
                              int64_t dst_offset, const sw_layout *L, sw_dtype as,
                              sw_slot_map_fn map, void *user)
{
    sw_copy_stop stop;
    sw_error err;
    sw_status st;
    sw_carrier *from = SW_STATE_C(src)->core, *to = SW_STATE_C(dst)->core;
    Py_XDECREF(sw_py_carrier_kept_error(src)); /* stale ones are not this call's */
    Py_XDECREF(sw_py_carrier_kept_error(dst));
    SW_CORE_CALL(sw_py_core_io_waits(from) || sw_py_core_io_waits(to),
                 st = sw_carrier_copy_layout(from, src_offset, to, dst_offset, L, as, map, user,
                                             &stop, &err));
    if (st == SW_OK)
        return 0;
    return stop.slot < 0 ? sw_py_raise(&err)
                         : sw_py_carrier_raise_slot(stop.in_write ? dst : src, &err,
                                                    stop.in_write, stop.slot);
}

/* Test aid: whether the core reaches the carrier's slots through the
 * batch callbacks (its core class is SLOTS_UNLOCKED). */
static PyObject *aid_core_slots_unlocked(PyObject *mod, PyObject *carrier)
{
    (void)mod;
    if (!PyObject_TypeCheck(carrier, &SwCarrier_Type)) {
        PyErr_SetString(PyExc_TypeError, "_core_slots_unlocked(carrier) takes a carrier");
        return NULL;
    }
    return PyBool_FromLong(sw_carrier_slots_unlocked(SW_STATE_C(carrier)->core));
}

static PyMethodDef slot_functions[] = {
    {"_core_slots_unlocked", aid_core_slots_unlocked, METH_O,
     "_core_slots_unlocked(carrier, /)\n--\n\n"
     "Test aid: whether the core reads this carrier's slots through its binding's\n"
     "batch callbacks."},
    {NULL, NULL, 0, NULL},
};

int sw_py_carrier_slots_init(PyObject *module)
{
    const sw_carrier_class hooks = {.read_slots = read_slots_cb,
                                    .write_slots = write_slots_cb,
                                    .drop_handles = drop_handles_cb};
    sw_py_carrier_class_set_slot_hooks(&hooks);
    return PyModule_AddFunctions(module, slot_functions);
}
