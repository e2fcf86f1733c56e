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

/* Host memory reads this much at most with the GIL held. Any other read
 * of many slots lets go (file I/O takes long; a block device waits for a
 * move on its range: sw_py_core_io_waits). */
#define SW_READ_NOGIL_BYTES (64 * 1024)

static int lets_go(sw_carrier *core, const sw_layout *L, sw_dtype dt)
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

/* Whether the core holds the slots of `carrier` as slots of `dt`: not a
 * STATE_ONLY class (a Python carrier), and `dt` its own dtype. */
static int core_slots(PyObject *carrier, sw_dtype dt)
{
    sw_carrier *core = SW_STATE_C(carrier)->core;
    return !sw_carrier_is_state_only(core) && sw_carrier_dtype(core) == dt;
}

/* The core reads a carrier whose slots it holds, under its mutex, in one
 * go (sw_tensor_read_values). 1 read; 0 when the slots are the binding's
 * after all (an Evictable over a Python tier: SW_ENOTSUP) or not of `dt`;
 * -1 raised. `plane`: the plane's core tensor (L and off are its layout and
 * offset), or NULL for one slot. */
static int core_gather(PyObject *carrier, const sw_tensor *plane, sw_dtype dt,
                       const sw_layout *L, int64_t off, char *out)
{
    if (!core_slots(carrier, dt))
        return 0;
    sw_carrier *core = SW_STATE_C(carrier)->core;
    sw_error err;
    sw_status st;
    SW_CORE_CALL(lets_go(core, L, dt), st = core_read(core, plane, L, off, out, &err));
    if (st == SW_OK)
        return 1;
    return st == SW_ENOTSUP ? 0 : sw_py_carrier_raise_core(carrier, &err, 0, 0);
}

/* Every slot: by the core where it holds them; any other carrier (a
 * Python class, whose batch callbacks the core calls; an Evictable over
 * one; a tensor whose logical dtype is not its carrier's) through
 * sw_py_carrier_read_layout. */
static int gather_carrier(PyObject *carrier, const sw_tensor *plane, sw_dtype dt,
                          const sw_layout *L, int64_t off, char *out)
{
    if (L->size == 0)
        return 0;
    int rc = core_gather(carrier, plane, dt, L, off, out);
    if (rc != 0)
        return rc < 0 ? -1 : 0;
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
    /* A one-element walk at `slot`: the same readers, one slot. */
    sw_layout one;
    int64_t extent, stride;
    sw_py_run_layout(&one, &extent, &stride, 1);
    PyObject *carrier = t->subs[0].carrier;
    Py_INCREF(carrier);
    int rc = gather_carrier(carrier, NULL, SwDType_ID(t->dtype), &one, slot, out);
    Py_DECREF(carrier);
    return rc;
}

/* ---- elements as Python values (t[c], item, tolist) ----------------------- */

/* Element `index` by the core (sw_tensor_get) where it holds the slots,
 * else by the carrier's own checked read of the slot the core finds. */
PyObject *sw_py_tensor_element(PyObject *tensor, int64_t index)
{
    SwTensorObject *t = (SwTensorObject *)tensor;
    const sw_tensor *plane = t->subs[0].core;
    PyObject *carrier = t->subs[0].carrier;
    sw_dtype dt = SwDType_ID(t->dtype);
    sw_error err;
    sw_status st;
    int64_t at;
    if (core_slots(carrier, dt)) {
        unsigned char slot[8];
        sw_carrier *core = SW_STATE_C(carrier)->core;
        SW_CORE_CALL(sw_py_core_io_waits(core), st = sw_tensor_get(plane, index, slot, &err));
        if (st == SW_OK)
            return sw_py_load_slot(dt, slot);
        if (st != SW_ENOTSUP)
            return sw_py_carrier_raise_core(carrier, &err, 0, 0), NULL;
    }
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
    if (L->size > 0 && core_slots(carrier, dt)) {
        /* One read of every value by the core, under the carrier's lock. */
        raw = PyMem_Malloc((size_t)L->size * sw_dtype_slot_bytes(dt));
        int rc = raw ? core_gather(carrier, s->core, dt, L, SW_SUB_OFFSET(s), raw)
                     : (PyErr_NoMemory(), -1);
        failed = rc < 0;
        if (rc == 0) { /* the checked reads of each slot after all */
            PyMem_Free(raw);
            raw = NULL;
        }
    }
    if (!failed)
        out = values_list(carrier, dt, L, SW_SUB_OFFSET(s), raw);
    PyMem_Free(raw);
    Py_DECREF(carrier);
    return out;
}
