/* Definition-backed carriers (contract-carriers X-4 .. X-6): a Carrier
 * subclass whose exact class has a CarrierDefinition keeps its slots
 * through the definition's StorageProvider callbacks.
 *
 * The framework paths of py_carrier.c (checks, versions, release, the
 * pending guard) stay as for every carrier; only the storage calls land
 * here, each with its result checked so a misbehaving provider cannot
 * corrupt the framework's view (a wrong size, a write that "returns"
 * something). Provider exceptions propagate unchanged. */
#include "sw_carrier.h"
#include "sw_messages.h"
#include "sw_extension.h"

#define CARRIER(o) ((SwCarrierObject *)(o))

static PyObject *callback(PyObject *self, int which)
{
    PyObject *storage = SW_RECORD_FIELD(CARRIER(self)->definition, SW_DEFINITION_STORAGE);
    return SW_RECORD_FIELD(storage, which);
}

static int expect_none(PyObject *r, PyObject *self, const char *what)
{
    if (!r)
        return -1;
    int ok = r == Py_None;
    if (!ok)
        PyErr_Format(PyExc_TypeError, "%s's StorageProvider.%s must return None, not %.100s",
                     sw_py_cname(self), what, Py_TYPE(r)->tp_name);
    Py_DECREF(r);
    return ok ? 0 : -1;
}

int sw_py_defined_ready(PyObject *self)
{
    if (CARRIER(self)->storage_dtype)
        return 0;
    PyErr_Format(PyExc_RuntimeError,
                 "this %s was never constructed: its __init__ must call "
                 "super().__init__(slots, dtype=...)", sw_py_cname(self));
    return -1;
}

/* supports_dtype(c, dtype), exactly a bool. Answered even after release. */
int sw_py_defined_supports(PyObject *self, PyObject *dtype)
{
    PyObject *r = PyObject_CallFunctionObjArgs(callback(self, SW_STORAGE_SUPPORTS_DTYPE), self,
                                               dtype, NULL);
    if (!r)
        return -1;
    int answer = r == Py_True;
    if (!PyBool_Check(r)) {
        PyErr_Format(PyExc_TypeError,
                     "%s's StorageProvider.supports_dtype must return a bool, not %.100s",
                     sw_py_cname(self), Py_TYPE(r)->tp_name);
        answer = -1;
    }
    Py_DECREF(r);
    return answer;
}

/* physical_size(c): a non-negative int. */
static int provider_size(PyObject *self, int64_t *out)
{
    PyObject *r =
        PyObject_CallOneArg(callback(self, SW_STORAGE_PHYSICAL_SIZE), self);
    if (!r)
        return -1;
    int rc = -1;
    if (!PyLong_Check(r) || PyBool_Check(r)) {
        PyErr_Format(PyExc_TypeError,
                     "%s's StorageProvider.physical_size must return an int, not %.100s",
                     sw_py_cname(self), Py_TYPE(r)->tp_name);
    } else {
        long long v = PyLong_AsLongLong(r);
        if (v == -1 && PyErr_Occurred()) {
            if (PyErr_ExceptionMatches(PyExc_OverflowError))
                PyErr_Format(PyExc_ValueError, "%s's physical size does not fit in 64 bits",
                             sw_py_cname(self));
        } else if (v < 0) {
            PyErr_Format(PyExc_ValueError,
                         "%s's StorageProvider.physical_size returned %lld; sizes are >= 0",
                         sw_py_cname(self), v);
        } else {
            *out = v;
            rc = 0;
        }
    }
    Py_DECREF(r);
    return rc;
}

int sw_py_defined_size(PyObject *self, int64_t *out)
{
    if (sw_py_state_released(self)) {
        *out = 0;
        return 0;
    }
    if (sw_py_defined_ready(self) < 0)
        return -1;
    return provider_size(self, out);
}

/* allocate(c, slots), then the size must be exactly `slots`. */
int sw_py_defined_allocate(PyObject *self, int64_t nslots)
{
    PyObject *n = PyLong_FromLongLong(nslots);
    if (!n)
        return -1;
    PyObject *r = PyObject_CallFunctionObjArgs(callback(self, SW_STORAGE_ALLOCATE), self, n,
                                               NULL);
    Py_DECREF(n);
    int64_t size;
    if (expect_none(r, self, "allocate") < 0 || provider_size(self, &size) < 0)
        return -1;
    if (size != nslots) {
        PyErr_Format(PyExc_ValueError,
                     "%s's StorageProvider.allocate left %lld slot%s, not the requested "
                     "physical size %lld", sw_py_cname(self), (long long)size, sw_py_msg_s(size),
                     (long long)nslots);
        return -1;
    }
    return 0;
}

static int has_slot_form(sw_dtype d)
{
    return d == SW_DT_FLOAT32 || d == SW_DT_INT32 || d == SW_DT_BOOL;
}

/* `value` in the Python form of a `dtype` slot (C-9): what the provider
 * stores or returns. Other dtypes pass through untouched; None is the
 * dtype's zero when `none_is_zero`. */
static PyObject *normalize_as(PyObject *dtype, PyObject *value, int none_is_zero)
{
    sw_dtype d = SwDType_ID(dtype);
    unsigned char slot[8] = {0};
    if (!has_slot_form(d))
        return Py_NewRef(value);
    if (!(none_is_zero && value == Py_None) && sw_py_store_slot(d, value, slot) < 0)
        return NULL;
    return sw_py_load_slot(d, slot);
}

static PyObject *normalize(PyObject *self, PyObject *value, const char *what)
{
    PyObject *v = normalize_as(CARRIER(self)->storage_dtype, value, 0);
    if (!v && what)
        sw_py_reraise_prefixed(PyExc_TypeError, "%s's StorageProvider.%s returned %.100s",
                               sw_py_cname(self), what, Py_TYPE(value)->tp_name);
    return v;
}

PyObject *sw_py_defined_normalize(PyObject *self, PyObject *value)
{
    return normalize(self, value, NULL);
}

PyObject *sw_py_defined_load(PyObject *self, int64_t index)
{
    PyObject *i = PyLong_FromLongLong(index);
    if (!i)
        return NULL;
    PyObject *r = PyObject_CallFunctionObjArgs(callback(self, SW_STORAGE_READ), self, i, NULL);
    Py_DECREF(i);
    if (!r)
        return NULL;
    PyObject *v = normalize(self, r, "read");
    Py_DECREF(r);
    return v;
}

int sw_py_defined_store(PyObject *self, int64_t index, PyObject *normalized)
{
    PyObject *i = PyLong_FromLongLong(index);
    if (!i)
        return -1;
    PyObject *r = PyObject_CallFunctionObjArgs(callback(self, SW_STORAGE_WRITE), self, i,
                                               normalized, NULL);
    Py_DECREF(i);
    return expect_none(r, self, "write");
}

int sw_py_defined_release(PyObject *self)
{
    return expect_none(PyObject_CallOneArg(callback(self, SW_STORAGE_RELEASE), self), self,
                       "release");
}

/* ---- construction (X-5) ----------------------------------------------------- */

static int parse_slots(PyObject *obj, int64_t *out)
{
    if (!PyLong_Check(obj) || PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "slots must be an int, not %.100s", Py_TYPE(obj)->tp_name);
        return -1;
    }
    long long v = PyLong_AsLongLong(obj);
    if (v == -1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
            return -1;
        PyErr_Clear();
        v = _PyLong_Sign(obj) < 0 ? -1 : LLONG_MAX;
        if (v > 0) {
            PyErr_SetString(PyExc_OverflowError, "slots does not fit in 64 bits");
            return -1;
        }
    }
    if (v < 0) {
        PyErr_SetString(PyExc_ValueError, "slots must be >= 0");
        return -1;
    }
    *out = v;
    return 0;
}

static int check_dtype(PyObject *self, PyObject *dtype)
{
    if (!SwDType_Check(dtype)) {
        PyErr_Format(PyExc_TypeError, "dtype must be a DType, not %.100s",
                     Py_TYPE(dtype)->tp_name);
        return -1;
    }
    int ok = sw_py_defined_supports(self, dtype);
    if (ok == 0)
        PyErr_Format(PyExc_TypeError, "%s does not support storage dtype %s", sw_py_cname(self),
                     sw_dtype_info_of(SwDType_ID(dtype))->name);
    return ok > 0 ? 0 : -1;
}

int sw_py_defined_init(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"slots", "dtype", "mutable", NULL};
    PyObject *slots_obj, *dtype = NULL, *mutable_obj = Py_True;
    SwCarrierObject *c = CARRIER(self);
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$OO", kwlist, &slots_obj, &dtype,
                                     &mutable_obj) ||
        (!dtype && !PyErr_Format(PyExc_TypeError, "missing required argument 'dtype'")))
        /* Name the class, which is what the user called. */
        return sw_py_reraise_prefixed(PyExc_TypeError, "%s(slots, *, dtype, mutable=True)",
                                      sw_py_cname(self));
    if (c->storage_dtype) {
        PyErr_Format(PyExc_RuntimeError, "this %s is already constructed", sw_py_cname(self));
        return -1;
    }
    int64_t slots;
    int mutable_ = PyObject_IsTrue(mutable_obj);
    if (mutable_ < 0 || parse_slots(slots_obj, &slots) < 0 || check_dtype(self, dtype) < 0)
        return -1;
    /* allocate() may ask the carrier its dtype: it is known from here. */
    c->storage_dtype = Py_NewRef(dtype);
    c->intrinsic_mutable = mutable_;
    if (sw_py_defined_allocate(self, slots) < 0) {
        Py_CLEAR(c->storage_dtype);
        return -1;
    }
    return 0;
}

/* ---- factories (X-6) ----------------------------------------------------------- */

/* type(self)(slots, dtype=dtype, mutable=mutable), checked to be a
 * constructed carrier of exactly that class. */
static PyObject *construct_like(PyObject *self, int64_t slots, PyObject *dtype, int mutable_)
{
    PyObject *args = Py_BuildValue("(L)", (long long)slots);
    PyObject *kwargs = args ? Py_BuildValue("{s:O,s:O}", "dtype", dtype, "mutable",
                                            mutable_ ? Py_True : Py_False)
                            : NULL;
    PyObject *made = kwargs ? PyObject_Call((PyObject *)Py_TYPE(self), args, kwargs) : NULL;
    Py_XDECREF(kwargs);
    Py_XDECREF(args);
    if (made && (Py_TYPE(made) != Py_TYPE(self) || !CARRIER(made)->storage_dtype)) {
        PyErr_Format(PyExc_TypeError, "%s(...) did not construct a %s carrier", sw_py_cname(self),
                     sw_py_cname(self));
        Py_CLEAR(made);
    }
    return made;
}

/* dtype argument of a factory: None keeps the receiver's. Borrowed. */
static PyObject *factory_dtype(PyObject *self, PyObject *dtype)
{
    if (!dtype || dtype == Py_None)
        return CARRIER(self)->storage_dtype;
    if (!SwDType_Check(dtype)) {
        PyErr_Format(PyExc_TypeError, "dtype must be a DType, not %.100s",
                     Py_TYPE(dtype)->tp_name);
        return NULL;
    }
    return dtype;
}

PyObject *sw_py_defined_new_like(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"values", "mutable", "dtype", NULL};
    PyObject *values, *mutable_obj = NULL, *dtype_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$OO:new_like", kwlist, &values,
                                     &mutable_obj, &dtype_obj) ||
        sw_py_defined_ready(self) < 0)
        return NULL;
    PyObject *it = sw_py_carrier_iter(values, "values");
    if (!it)
        return NULL;
    int mutable_ = sw_py_carrier_truth(mutable_obj, 1);
    PyObject *dtype = mutable_ < 0 ? NULL : factory_dtype(self, dtype_obj);
    PyObject *raw = dtype ? PySequence_Tuple(it) : NULL;
    Py_DECREF(it);
    if (!raw)
        return NULL;
    /* Every value is normalized before anything is made, from a private
     * tuple that conversion hooks cannot change. */
    Py_ssize_t n = PyTuple_GET_SIZE(raw);
    PyObject *vals = PyTuple_New(n);
    for (Py_ssize_t i = 0; vals && i < n; i++) {
        PyObject *v = normalize_as(dtype, PyTuple_GET_ITEM(raw, i), 1);
        if (!v)
            Py_CLEAR(vals);
        else
            PyTuple_SET_ITEM(vals, i, v);
    }
    Py_DECREF(raw);
    PyObject *made = vals ? construct_like(self, n, dtype, mutable_) : NULL;
    /* The provider's writes, without the framework's mutability check or
     * version: a factory's result starts at version 0. */
    for (Py_ssize_t i = 0; made && i < n; i++)
        if (sw_py_defined_store(made, i, PyTuple_GET_ITEM(vals, i)) < 0)
            Py_CLEAR(made);
    Py_XDECREF(vals);
    return made;
}

PyObject *sw_py_defined_allocate_like(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"size", "mutable", "dtype", "empty", NULL};
    PyObject *size_obj, *mutable_obj = NULL, *dtype_obj = NULL, *empty = Py_False;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$OOO:allocate_like", kwlist, &size_obj,
                                     &mutable_obj, &dtype_obj, &empty) ||
        sw_py_defined_ready(self) < 0)
        return NULL;
    int64_t size;
    if (sw_py_carrier_parse_size(size_obj, "size", &size) < 0)
        return NULL;
    int mutable_ = sw_py_carrier_truth(mutable_obj, 1);
    PyObject *dtype = mutable_ < 0 ? NULL : factory_dtype(self, dtype_obj);
    if (!dtype)
        return NULL;
    if (!PyBool_Check(empty)) {
        PyErr_Format(PyExc_TypeError, "empty must be a bool, not %.100s",
                     Py_TYPE(empty)->tp_name);
        return NULL;
    }
    return construct_like(self, size, dtype, mutable_);
}
