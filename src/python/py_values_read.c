/* Reads of a one-subtensor Tensor's values: as raw host slots (4-byte
 * Float32/Int32, 1-byte Bool, native order), shared by Tensor.__array__
 * (py_array.c) and Tensor.__str__ (py_repr.c), and as Python values for
 * t[c], item() and tolist() (py_tensor.c).
 *
 * A carrier whose slots the core holds (CPU, Generic, FileBacked,
 * BlockDeviceCarrier, an Evictable over them) is read by the core in one
 * call, no Python per element. A carrier whose slots are the binding's is
 * read by the core as well, which calls back the checked slot read (its
 * get_value hook, py_carrier_slots.c) with no lock held; that read
 * re-checks the carrier's state before each slot, so hooks that release
 * or move it are seen. */
#include "sw_carrier.h"
#include "sw_layout_slots.h"

#include <string.h>

#include "strideweave/tensor.h"

/* The core's refusal in the binding's words where a read would raise them
 * (released, unavailable, pending destination: they name the Python class
 * and the way out); anything else as the core reported it. */
static int raise_refusal(PyObject *carrier, const sw_error *err)
{
    if (err->code == SW_ESTATE && sw_py_carrier_check_readable(carrier) < 0)
        return -1;
    return sw_py_raise(err);
}

/* Host memory reads this much at most with the GIL held. Any other read
 * may wait (file I/O; a block device's range a pool thread is moving,
 * whose lock must never be waited for with the GIL), so it lets go. */
#define SW_READ_NOGIL_BYTES (64 * 1024)

static int read_lets_go(sw_carrier *core, const sw_layout *L, sw_dtype dt)
{
    const sw_carrier_class *k = sw_carrier_class_of(core);
    return (k != &sw_cpu_class && k != &sw_generic_class) ||
           (size_t)L->size * sw_dtype_slot_bytes(dt) > SW_READ_NOGIL_BYTES;
}

/* The core's read: a whole plane through its core tensor, or the one
 * slot `off` (L a one-element layout) through its carrier. */
static sw_status core_read(sw_carrier *core, const sw_tensor *plane, const sw_layout *L,
                           int64_t off, char *out, sw_error *err)
{
    return plane ? sw_tensor_read_values(plane, out, err)
                 : sw_carrier_read_layout(core, off, L, out, err);
}

/* The core reads a carrier whose slots it holds, under its mutex, in one
 * go (sw_tensor_read_values). A carrier whose slots are the binding's
 * (STATE_ONLY: a Python class) is read by the core too, through its class's
 * batch callbacks (sw_py_carrier_read_layout); an Evictable over one (the
 * core refuses it with SW_ENOTSUP) and a tensor whose logical dtype is not
 * its carrier's take the checked slot reads there. `plane`: the plane's
 * core tensor (L and off are its layout and offset), or NULL for one
 * slot. */
static int gather_carrier(PyObject *carrier, const sw_tensor *plane, sw_dtype dt,
                          const sw_layout *L, int64_t off, char *out)
{
    if (L->size == 0)
        return 0;
    sw_carrier *core = SW_STATE_C(carrier)->core;
    if (!sw_carrier_is_state_only(core) && sw_carrier_dtype(core) == dt) {
        sw_error err;
        sw_status st;
        if (read_lets_go(core, L, dt)) {
            Py_BEGIN_ALLOW_THREADS
            st = core_read(core, plane, L, off, out, &err);
            Py_END_ALLOW_THREADS
        } else {
            st = core_read(core, plane, L, off, out, &err);
        }
        if (st == SW_OK)
            return 0;
        if (st != SW_ENOTSUP)
            return raise_refusal(carrier, &err);
    }
    return sw_py_carrier_read_layout(carrier, off, L, dt, out);
}

int sw_py_tensor_gather(PyObject *tensor, void *out)
{
    SwTensorObject *t = (SwTensorObject *)tensor;
    SwSubtensor *s = &t->subs[0];
    PyObject *carrier = s->carrier;
    Py_INCREF(carrier); /* a hook may drop the last other reference */
    int rc = gather_carrier(carrier, s->core, SwDType_ID(t->dtype), SW_SUB_LAYOUT(s),
                            SW_SUB_OFFSET(s), out);
    Py_DECREF(carrier);
    return rc;
}

int sw_py_tensor_read_slot(PyObject *tensor, int64_t slot, void *out)
{
    SwTensorObject *t = (SwTensorObject *)tensor;
    static const int64_t one_extent = 1, zero_stride = 0;
    /* A one-element walk at `slot`: the same readers, one slot. */
    sw_layout one;
    memset(&one, 0, sizeof one);
    one.nleaves = 1;
    one.extents = (int64_t *)&one_extent;
    one.strides = (int64_t *)&zero_stride;
    one.size = 1;
    one.cosize = 1;
    PyObject *carrier = t->subs[0].carrier;
    Py_INCREF(carrier);
    int rc = gather_carrier(carrier, NULL, SwDType_ID(t->dtype), &one, slot, out);
    Py_DECREF(carrier);
    return rc;
}

/* ---- elements as Python values (t[c], item, tolist) ----------------------- */

/* Whether the core reads this plane's elements itself: a carrier whose
 * slots it holds, of the plane's own dtype, and whose refusals are the
 * checked read's (CPU, Generic, FileBacked; an Evictable or a block device
 * has refusals of its own words, answered by its carrier's read). */
static int core_elements(const SwTensorObject *t)
{
    sw_carrier *core = SW_STATE_C(t->subs[0].carrier)->core;
    const sw_carrier_class *k = sw_carrier_class_of(core);
    return (k == &sw_cpu_class || k == &sw_generic_class || k == &sw_file_backed_class) &&
           sw_carrier_dtype(core) == SwDType_ID(t->dtype);
}

PyObject *sw_py_tensor_element(PyObject *tensor, int64_t index)
{
    SwTensorObject *t = (SwTensorObject *)tensor;
    const sw_tensor *plane = t->subs[0].core;
    PyObject *carrier = t->subs[0].carrier;
    sw_error err;
    int64_t at;
    if (core_elements(t)) {
        unsigned char slot[8];
        if (sw_tensor_get(plane, index, slot, &err) != SW_OK)
            return raise_refusal(carrier, &err), NULL;
        return sw_py_load_slot(SwDType_ID(t->dtype), slot);
    }
    /* The carrier's own read of the slot the core finds (its hooks run). */
    if (sw_tensor_slot(plane, index, &at, &err) != SW_OK)
        return sw_py_raise(&err), NULL;
    return sw_py_carrier_getitem(carrier, at);
}

/* Every value in ordinal order: from `raw`, the core's read of them all,
 * or (raw NULL) by the carrier's checked read of each slot. */
static PyObject *values_list(PyObject *carrier, sw_dtype dt, const sw_layout *L, int64_t off,
                             const char *raw)
{
    size_t bytes = sw_dtype_slot_bytes(dt);
    int64_t *slots = raw ? NULL : sw_py_layout_slots(L, off); /* the core's walk */
    PyObject *out = raw || slots ? PyList_New((Py_ssize_t)L->size) : NULL;
    for (int64_t k = 0; out && k < L->size; k++) {
        PyObject *v = raw ? sw_py_load_slot(dt, raw + (size_t)k * bytes)
                          : sw_py_carrier_getitem(carrier, slots[k]);
        if (!v) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, (Py_ssize_t)k, v);
    }
    PyMem_Free(slots);
    return out;
}

PyObject *sw_py_tensor_values(PyObject *tensor)
{
    SwTensorObject *t = (SwTensorObject *)tensor;
    SwSubtensor *s = &t->subs[0];
    const sw_layout *L = SW_SUB_LAYOUT(s);
    sw_dtype dt = SwDType_ID(t->dtype);
    PyObject *carrier = s->carrier, *out = NULL;
    char *raw = NULL;
    int failed = 0;
    Py_INCREF(carrier); /* a hook may drop the last other reference */
    if (L->size > 0 && core_elements(t)) {
        /* One read of every value by the core, under the carrier's lock. */
        raw = PyMem_Malloc((size_t)L->size * sw_dtype_slot_bytes(dt));
        failed = raw ? gather_carrier(carrier, s->core, dt, L, SW_SUB_OFFSET(s), raw) < 0
                     : (PyErr_NoMemory(), 1);
    }
    if (!failed)
        out = values_list(carrier, dt, L, SW_SUB_OFFSET(s), raw);
    PyMem_Free(raw);
    Py_DECREF(carrier);
    return out;
}
