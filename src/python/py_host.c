/* The host-memory body CPU and Generic share: their slot storage in a core
 * carrier (carrier.h), the sw_py_carrier_ops of both classes, construction,
 * new_like / allocate_like and deallocation. Which of the two an object is
 * comes from the ops the class registered with the carrier base, so this
 * file names neither class.
 *
 * May depend on: the carrier base (py_carrier.c) and the construction
 * helpers (py_carrier_args.c); py_cpu.c and py_generic.c depend on it. */
#include "sw_carrier.h"

#include "strideweave/carrier.h"

#define HOST(o) ((SwHostCarrierObject *)(o))

const sw_dtype sw_py_host_accepted[] = {SW_DT_FLOAT32, SW_DT_INT32, SW_DT_BOOL};

/* ---- host body (shared with Generic) ------------------------------------ */

static sw_dtype host_dtype(PyObject *self)
{
    return HOST(self)->dtype;
}

static int64_t host_size(PyObject *self)
{
    return HOST(self)->nslots;
}

static int host_supports(sw_dtype dtype)
{
    return dtype == SW_DT_FLOAT32 || dtype == SW_DT_INT32 || dtype == SW_DT_BOOL;
}

/* The object's views of the storage, once the core released it (a
 * release, a move's source release, an Evictable's evict). The core
 * carrier keeps the state (version, released, claims, pending marks)
 * until the object goes; its last reference frees storage never released
 * (carrier.h). Storage a DLPack export still pins is quarantined by
 * sw_free, not reused (see alloc.h). */
static void host_drop(PyObject *self)
{
    SwHostCarrierObject *h = HOST(self);
    h->data = NULL;
    h->owns_data = 0;
    h->nslots = 0;
}

const sw_py_carrier_ops sw_py_cpu_ops = {
    .name = "CPU", .dtype = host_dtype, .size = host_size, .supports = host_supports,
    .drop = host_drop, .core_class = &sw_cpu_class,
};
const sw_py_carrier_ops sw_py_generic_ops = {
    .name = "Generic", .dtype = host_dtype, .size = host_size, .supports = host_supports,
    .drop = host_drop, .core_class = &sw_generic_class,
};

/* Bytes of `nslots` slots of `dtype` (at least one, so the address is
 * positive), or -1 with OverflowError. */
static int host_bytes(sw_dtype dtype, int64_t nslots, size_t *bytes)
{
    if (nslots < 0 || (uint64_t)nslots > SIZE_MAX ||
        __builtin_mul_overflow((size_t)nslots, sw_dtype_slot_bytes(dtype), bytes)) {
        PyErr_Format(PyExc_OverflowError, "%lld slots do not fit in memory",
                     (long long)nslots);
        return -1;
    }
    if (*bytes == 0)
        *bytes = 1;
    return 0;
}

/* Give `h` owned storage for `nslots` slots of `dtype` in a core carrier
 * (carrier.h), the same one a C program gets from sw_cpu_new /
 * sw_generic_new. CPU: zeroed when `zero`. Generic: a copy of `values`
 * (nslots slots, already normalized), zeroes when `values` is NULL. */
static int host_allocate(SwHostCarrierObject *h, sw_dtype dtype, int64_t nslots, int zero,
                         const void *values)
{
    size_t bytes;
    if (host_bytes(dtype, nslots, &bytes) < 0)
        return -1;
    sw_error err;
    sw_carrier *core = NULL;
    void *data;
    sw_status st;
    int immutable = h->base.intrinsic_mutable ? 0 : SW_CARRIER_IMMUTABLE;
    int cpu = sw_py_carrier_builtin_ops((PyObject *)h) == &sw_py_cpu_ops;
    if (cpu) {
        st = sw_cpu_new(nslots, dtype, (zero ? 0 : SW_CARRIER_EMPTY) | immutable, &core, &err);
    } else {
        void *zeros = NULL;
        if (!values && !(values = zeros = PyMem_Calloc(1, bytes))) {
            PyErr_NoMemory();
            return -1;
        }
        st = sw_generic_new(values, nslots, dtype, immutable, &core, &err);
        PyMem_Free(zeros);
    }
    if (st != SW_OK) {
        if (err.code == SW_ENOMEM)
            PyErr_NoMemory();
        else
            PyErr_SetString(PyExc_ValueError, err.msg);
        return -1;
    }
    data = cpu ? sw_cpu_pointer(core) : sw_generic_pointer(core);
    h->base.core = core;
    h->dtype = dtype;
    h->nslots = nslots;
    h->data = data;
    h->owns_data = 1;
    return 0;
}

/* Fresh carrier of exactly `type` (Generic or CPU) with owned storage;
 * Generic: a copy of `values` when not NULL. */
static PyObject *host_new(PyTypeObject *type, sw_dtype dtype, int64_t nslots, int mutable_,
                          int zero, const void *values)
{
    PyObject *self = sw_py_carrier_alloc(type, mutable_);
    if (!self)
        return NULL;
    HOST(self)->data = NULL;
    HOST(self)->nslots = 0;
    HOST(self)->owns_data = 0;
    HOST(self)->base.core = NULL;
    HOST(self)->dtype = dtype;
    if (host_allocate(HOST(self), dtype, nslots, zero, values) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return self;
}

PyObject *sw_py_host_new(PyTypeObject *type, sw_dtype dtype, int64_t nslots,
                          int mutable_, int zero)
{
    return host_new(type, dtype, nslots, mutable_, zero, NULL);
}

/* Fresh host carrier of `type` holding `values` (a private tuple). */
PyObject *sw_py_host_from_values(PyTypeObject *type, sw_dtype dtype, PyObject *values,
                                 int mutable_, int none_is_zero)
{
    if (sw_py_carrier_type_ops(type) == &sw_py_generic_ops) {
        /* A Generic core carrier copies its slots at creation: normalize
         * them into a scratch buffer first. */
        int64_t n = PyTuple_GET_SIZE(values);
        size_t bytes;
        if (host_bytes(dtype, n, &bytes) < 0)
            return NULL;
        void *buf = PyMem_Calloc(1, bytes);
        if (!buf)
            return PyErr_NoMemory();
        PyObject *self = NULL;
        if (sw_py_carrier_fill_slots(dtype, values, none_is_zero, buf) == 0)
            self = host_new(type, dtype, n, mutable_, 1, buf);
        PyMem_Free(buf);
        return self;
    }
    PyObject *self = sw_py_host_new(type, dtype, PyTuple_GET_SIZE(values), mutable_, 1);
    if (!self)
        return NULL;
    if (sw_py_carrier_fill_slots(dtype, values, none_is_zero, HOST(self)->data) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return self;
}

/* C-10 for Generic and CPU. */
PyObject *sw_py_host_new_like(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"values", "mutable", "dtype", NULL};
    PyObject *values, *mutable_obj = NULL, *dtype_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$OO:new_like", kwlist, &values,
                                     &mutable_obj, &dtype_obj))
        return NULL;
    const char *name = sw_py_carrier_builtin_ops(self)->name;
    PyObject *it = sw_py_carrier_iter(values, "values");
    if (!it)
        return NULL;
    sw_dtype dtype;
    int mutable_ = sw_py_carrier_truth(mutable_obj, 1);
    PyObject *list = NULL, *result = NULL;
    if (mutable_ < 0 ||
        sw_py_carrier_parse_dtype(dtype_obj == Py_None ? NULL : dtype_obj,
                                  HOST(self)->dtype, name, sw_py_host_accepted,
                                  SW_HOST_NACCEPTED, &dtype) < 0 ||
        !(list = PySequence_Tuple(it)))
        goto done;
    result = sw_py_host_from_values(Py_TYPE(self), dtype, list, mutable_, 1);
done:
    Py_XDECREF(list);
    Py_DECREF(it);
    return result;
}

/* C-11 for Generic and CPU (Generic always zeroes). */
PyObject *sw_py_host_allocate_like(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"size", "mutable", "dtype", "empty", NULL};
    PyObject *size_obj, *mutable_obj = NULL, *dtype_obj = NULL, *empty_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$OOO:allocate_like", kwlist,
                                     &size_obj, &mutable_obj, &dtype_obj, &empty_obj))
        return NULL;
    const char *name = sw_py_carrier_builtin_ops(self)->name;
    int64_t size;
    sw_dtype dtype;
    if (sw_py_carrier_parse_size(size_obj, "size", &size) < 0 ||
        sw_py_carrier_parse_dtype(dtype_obj == Py_None ? NULL : dtype_obj,
                                  HOST(self)->dtype, name, sw_py_host_accepted,
                                  SW_HOST_NACCEPTED, &dtype) < 0)
        return NULL;
    int mutable_, empty;
    if (sw_py_carrier_parse_flags(mutable_obj, empty_obj, &mutable_, &empty) < 0)
        return NULL;
    int zero = sw_py_carrier_builtin_ops(self) == &sw_py_generic_ops ? 1 : !empty;
    return sw_py_host_new(Py_TYPE(self), dtype, size, mutable_, zero);
}
