/* CPU: a closed carrier over contiguous host memory it always allocates
 * and owns (C-20, C-21). Also the host-memory body it shares with Generic. */
#include "sw_carrier.h"

#include <string.h>

#include "strideweave/carrier.h"

#define HOST(o) ((SwHostCarrierObject *)(o))

const sw_dtype sw_host_accepted[] = {SW_DT_FLOAT32, SW_DT_INT32, SW_DT_BOOL};

/* ---- host body (shared with Generic) ------------------------------------ */

static sw_dtype host_dtype(PyObject *self)
{
    return HOST(self)->dtype;
}

static int64_t host_size(PyObject *self)
{
    return HOST(self)->nslots;
}

static PyObject *host_load(PyObject *self, int64_t index)
{
    SwHostCarrierObject *h = HOST(self);
    size_t width = sw_dtype_slot_bytes(h->dtype);
    return sw_py_load_slot(h->dtype, (char *)h->data + (size_t)index * width);
}

static int host_store(PyObject *self, int64_t index, const void *slot)
{
    SwHostCarrierObject *h = HOST(self);
    size_t width = sw_dtype_slot_bytes(h->dtype);
    memcpy((char *)h->data + (size_t)index * width, slot, width);
    return 0;
}

static int host_supports(sw_dtype dtype)
{
    return dtype == SW_DT_FLOAT32 || dtype == SW_DT_INT32 || dtype == SW_DT_BOOL;
}

/* Every path that frees host storage (release, a move's source release,
 * an Evictable's evict, deallocation) ends here. Storage a DLPack export
 * still pins is quarantined by sw_free, not reused (see alloc.h). */
static void host_drop(PyObject *self)
{
    SwHostCarrierObject *h = HOST(self);
    /* The core carrier holds the state (version, released, claims, pending
     * marks) and keeps it after release, until the object goes. */
    if (h->base.core)
        (void)sw_carrier_release_moved(h->base.core, NULL);
    h->data = NULL;
    h->owns_data = 0;
    h->nslots = 0;
}

const sw_carrier_ops sw_cpu_ops = {
    "CPU", host_dtype, host_size, host_load, host_store, host_supports, host_drop, NULL, NULL,
};
const sw_carrier_ops sw_generic_ops = {
    "Generic", host_dtype, host_size, host_load, host_store, host_supports, host_drop, NULL,
    NULL,
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
    if (Py_IS_TYPE((PyObject *)h, &SwCPU_Type)) {
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
    data = Py_IS_TYPE((PyObject *)h, &SwCPU_Type) ? sw_cpu_pointer(core)
                                                  : sw_generic_pointer(core);
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
    PyObject *self = sw_carrier_alloc(type, mutable_);
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

PyObject *sw_host_new(PyTypeObject *type, sw_dtype dtype, int64_t nslots,
                          int mutable_, int zero)
{
    return host_new(type, dtype, nslots, mutable_, zero, NULL);
}

/* Fresh host carrier of `type` holding `values` (a private tuple). */
PyObject *sw_host_from_values(PyTypeObject *type, sw_dtype dtype, PyObject *values,
                              int mutable_, int none_is_zero)
{
    if (type == &SwGeneric_Type) {
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
        if (sw_carrier_fill_slots(dtype, values, none_is_zero, buf) == 0)
            self = host_new(type, dtype, n, mutable_, 1, buf);
        PyMem_Free(buf);
        return self;
    }
    PyObject *self = sw_host_new(type, dtype, PyTuple_GET_SIZE(values), mutable_, 1);
    if (!self)
        return NULL;
    if (sw_carrier_fill_slots(dtype, values, none_is_zero, HOST(self)->data) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return self;
}

void sw_host_dealloc(PyObject *self)
{
    host_drop(self);
    SwCarrier_Type.tp_dealloc(self);
}

PyObject *sw_carrier_iter(PyObject *values, const char *what)
{
    PyObject *it = PyObject_GetIter(values);
    if (!it && PyErr_ExceptionMatches(PyExc_TypeError)) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be iterable, not %.100s", what,
                     Py_TYPE(values)->tp_name);
    }
    return it;
}

/* C-10 for Generic and CPU. */
PyObject *sw_host_new_like(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"values", "mutable", "dtype", NULL};
    PyObject *values, *mutable_obj = NULL, *dtype_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$OO:new_like", kwlist, &values,
                                     &mutable_obj, &dtype_obj))
        return NULL;
    const char *name = sw_carrier_builtin_ops(self)->name;
    PyObject *it = sw_carrier_iter(values, "values");
    if (!it)
        return NULL;
    sw_dtype dtype;
    int mutable_ = sw_carrier_truth(mutable_obj, 1);
    PyObject *list = NULL, *result = NULL;
    if (mutable_ < 0 ||
        sw_carrier_parse_dtype(dtype_obj == Py_None ? NULL : dtype_obj,
                               HOST(self)->dtype, name, sw_host_accepted,
                               SW_HOST_NACCEPTED, &dtype) < 0 ||
        !(list = PySequence_Tuple(it)))
        goto done;
    result = sw_host_from_values(Py_TYPE(self), dtype, list, mutable_, 1);
done:
    Py_XDECREF(list);
    Py_DECREF(it);
    return result;
}

/* C-11 for Generic and CPU (Generic always zeroes). */
PyObject *sw_host_allocate_like(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"size", "mutable", "dtype", "empty", NULL};
    PyObject *size_obj, *mutable_obj = NULL, *dtype_obj = NULL, *empty_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$OOO:allocate_like", kwlist,
                                     &size_obj, &mutable_obj, &dtype_obj, &empty_obj))
        return NULL;
    const char *name = sw_carrier_builtin_ops(self)->name;
    int64_t size;
    sw_dtype dtype;
    if (sw_carrier_parse_size(size_obj, "size", &size) < 0 ||
        sw_carrier_parse_dtype(dtype_obj == Py_None ? NULL : dtype_obj,
                               HOST(self)->dtype, name, sw_host_accepted,
                               SW_HOST_NACCEPTED, &dtype) < 0)
        return NULL;
    /* One truth test at a time: a failing __bool__ must not run the next
     * one with its exception pending. */
    int mutable_ = sw_carrier_truth(mutable_obj, 1);
    if (mutable_ < 0)
        return NULL;
    int empty = sw_carrier_truth(empty_obj, 0);
    if (empty < 0)
        return NULL;
    int zero = Py_TYPE(self) == &SwGeneric_Type ? 1 : !empty;
    return sw_host_new(Py_TYPE(self), dtype, size, mutable_, zero);
}

/* ---- CPU ---------------------------------------------------------------- */

PyObject *sw_py_cpu_new(sw_dtype dtype, int64_t nslots, int mutable_, int zero)
{
    if (!host_supports(dtype)) {
        PyErr_Format(PyExc_ValueError, "CPU does not support storage dtype %s",
                     sw_dtype_info_of(dtype)->name);
        return NULL;
    }
    if (nslots < 0) {
        PyErr_SetString(PyExc_ValueError, "size must be >= 0");
        return NULL;
    }
    return sw_host_new(&SwCPU_Type, dtype, nslots, mutable_, zero);
}

static PyObject *cpu_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"size", "mutable", "dtype", "empty", NULL};
    PyObject *size_obj, *mutable_obj = NULL, *dtype_obj = NULL, *empty_obj = NULL;
    if (sw_carrier_check_exact(type, &SwCPU_Type) < 0)
        return NULL;
    /* There is no `pointer=` argument (C-20): a CPU carrier never adopts
     * memory it did not allocate, so passing one is an unexpected-argument
     * TypeError from the parser. */
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$OOO:CPU", kwlist, &size_obj,
                                     &mutable_obj, &dtype_obj, &empty_obj))
        return NULL;
    int64_t size;
    sw_dtype dtype;
    if (sw_carrier_parse_size(size_obj, "size", &size) < 0 ||
        sw_carrier_parse_dtype(dtype_obj, SW_DT_FLOAT32, "CPU", sw_host_accepted,
                               SW_HOST_NACCEPTED, &dtype) < 0)
        return NULL;
    /* One truth test at a time: a failing __bool__ must not run the next
     * one with its exception pending. */
    int mutable_ = sw_carrier_truth(mutable_obj, 1);
    if (mutable_ < 0)
        return NULL;
    int empty = sw_carrier_truth(empty_obj, 0);
    if (empty < 0)
        return NULL;
    return sw_host_new(&SwCPU_Type, dtype, size, mutable_, !empty);
}

/* Construction happens in tp_new; __init__ must not reach Carrier.__init__'s
 * definition-free check. */
int sw_carrier_builtin_init(PyObject *self, PyObject *args, PyObject *kwds)
{
    (void)self;
    (void)args;
    (void)kwds;
    return 0;
}

static PyObject *cpu_pointer(PyObject *self, PyObject *unused)
{
    (void)unused;
    return PyLong_FromSize_t((size_t)(uintptr_t)HOST(self)->data);
}

static PyObject *cpu_dlpack_info(PyObject *self, PyObject *unused)
{
    (void)unused;
    PyObject *ptr = cpu_pointer(self, NULL);
    if (!ptr)
        return NULL;
    PyObject *d = Py_BuildValue("{s:N,s:i,s:i}", "pointer", ptr, "device_type", 1,
                                "device_id", 0);
    return d;
}

SW_CARRIER_CLOSED_INIT_SUBCLASS(cpu_init_subclass, "CPU")

static PyMethodDef cpu_methods[] = {
    SW_HOST_METHODS,
    {"pointer", cpu_pointer, METH_NOARGS,
     "pointer($self, /)\n--\n\n"
     "The memory address of slot 0 as an int; 0 after release(). Writes\n"
     "through it bypass the version counter."},
    {"dlpack_info", cpu_dlpack_info, METH_NOARGS,
     "dlpack_info($self, /)\n--\n\n"
     "Where the storage lives, for DLPack export:\n"
     "{'pointer': self.pointer(), 'device_type': 1, 'device_id': 0}."},
    {"__init_subclass__", (PyCFunction)(void (*)(void))cpu_init_subclass,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "__init_subclass__($type, /, *args, **kwargs)\n--\n\n"
     "CPU cannot be subclassed: defining a subclass raises TypeError."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject SwCPU_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "strideweave.CPU",
    .tp_basicsize = sizeof(SwHostCarrierObject),
    .tp_dealloc = sw_host_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "CPU(size, *, mutable=True, dtype=DType.Float32, empty=False)\n--\n\n"
              "Contiguous host memory of size slots of dtype (Float32, Int32 or "
              "Bool), allocated and owned by the carrier; zeroed unless empty is "
              "true. A bad size raises TypeError (not an integer) or ValueError "
              "(negative); a bad dtype raises TypeError (not a DType) or "
              "ValueError (unsupported). Tensors on a CPU carrier can be exported "
              "with DLPack.\n\n"
              "    CPU(4, dtype=DType.Int32)",
    .tp_methods = cpu_methods,
    .tp_base = &SwCarrier_Type,
    .tp_init = sw_carrier_builtin_init,
    .tp_new = cpu_new,
};

int sw_py_cpu_init(PyObject *module)
{
    if (PyType_Ready(&SwCPU_Type) < 0)
        return -1;
    return PyModule_AddObjectRef(module, "CPU", (PyObject *)&SwCPU_Type);
}

