/* Construction helpers every carrier class shares (the built-ins and the
 * definition-backed carriers): argument parsing (sizes, dtypes, flags,
 * iterables), filling slots from a tuple of values, and the no-op __init__
 * of the built-ins.
 *
 * May depend on: the dtype helpers (py_dtype.c) only; every carrier file
 * depends on it. */
#include "sw_carrier.h"

#include <string.h>

int sw_py_carrier_parse_size(PyObject *obj, const char *what, int64_t *out)
{
    if (!sw_py_is_integer(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be an integer, not %.100s", what,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    long long v;
    int overflow;
    if (sw_py_index_ll(obj, &v, &overflow) < 0)
        return -1;
    if (overflow < 0 || (overflow == 0 && v < 0)) {
        PyErr_Format(PyExc_ValueError, "%s must be >= 0", what);
        return -1;
    }
    if (overflow > 0) {
        PyErr_Format(PyExc_OverflowError, "%s does not fit in 64 bits", what);
        return -1;
    }
    *out = (int64_t)v;
    return 0;
}

int sw_py_carrier_parse_dtype(PyObject *obj, sw_dtype dflt, const char *carrier,
                              const sw_dtype *accepted, int naccepted, sw_dtype *out)
{
    if (!obj) {
        *out = dflt;
        return 0;
    }
    if (sw_py_check_storage_dtype(obj, carrier, accepted, naccepted) < 0)
        return -1;
    *out = SwDType_ID(obj);
    return 0;
}

int sw_py_carrier_truth(PyObject *obj, int dflt)
{
    return obj ? PyObject_IsTrue(obj) : dflt;
}

/* One truth test at a time: a failing __bool__ must not run the next one
 * with its exception pending. */
int sw_py_carrier_parse_flags(PyObject *mutable_obj, PyObject *empty_obj, int *mutable_, int *empty)
{
    if ((*mutable_ = sw_py_carrier_truth(mutable_obj, 1)) < 0)
        return -1;
    if ((*empty = sw_py_carrier_truth(empty_obj, 0)) < 0)
        return -1;
    return 0;
}

/* `seq` is a tuple the caller made privately: a conversion hook that runs
 * below cannot shrink it or drop its items. */
int sw_py_carrier_fill_slots(sw_dtype dtype, PyObject *seq, int none_is_zero, void *buf)
{
    size_t width = sw_dtype_slot_bytes(dtype);
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(seq, i);
        char *slot = (char *)buf + (size_t)i * width;
        if (item == Py_None && none_is_zero) {
            memset(slot, 0, width);
            continue;
        }
        if (sw_py_store_slot(dtype, item, slot) < 0)
            return -1;
    }
    return 0;
}

PyObject *sw_py_carrier_iter(PyObject *values, const char *what)
{
    PyObject *it = PyObject_GetIter(values);
    if (!it && PyErr_ExceptionMatches(PyExc_TypeError)) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be iterable, not %.100s", what,
                     Py_TYPE(values)->tp_name);
    }
    return it;
}

/* Construction happens in tp_new; __init__ must not reach Carrier.__init__'s
 * definition-free check. */
int sw_py_carrier_builtin_init(PyObject *self, PyObject *args, PyObject *kwds)
{
    (void)self;
    (void)args;
    (void)kwds;
    return 0;
}
