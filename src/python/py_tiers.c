/* The two tiers of a composite carrier (sw_tiers.h). */
#include "sw_tiers.h"
#include "strideweave/dtype.h"

int sw_py_tiers_dtype(PyObject *primary, PyObject *secondary, PyObject **dtype)
{
    PyObject *pd = sw_py_carrier_dtype(primary);
    PyObject *sd = pd ? sw_py_carrier_dtype(secondary) : NULL;
    int rc = -1;
    if (sd && pd != sd)
        PyErr_Format(PyExc_TypeError, "the tiers hold different dtypes (%s and %s)",
                     sw_dtype_info_of(SwDType_ID(pd))->name,
                     sw_dtype_info_of(SwDType_ID(sd))->name);
    else if (sd) {
        *dtype = Py_NewRef(pd);
        rc = 0;
    }
    Py_XDECREF(pd);
    Py_XDECREF(sd);
    return rc;
}

int sw_py_tiers_support_dtype(PyObject *primary, PyObject *secondary, sw_dtype dtype)
{
    PyObject *d = sw_py_dtype(dtype);
    int a = sw_py_carrier_supports_dtype(primary, d);
    return a <= 0 ? a : sw_py_carrier_supports_dtype(secondary, d);
}

PyObject *sw_py_tier_factory(PyObject *tier, const char *name, PyObject *first,
                             PyObject *mutable_, PyObject *dtype, PyObject *empty)
{
    PyObject *fn = PyObject_GetAttrString(tier, name);
    PyObject *args = fn ? PyTuple_Pack(1, first) : NULL;
    PyObject *kwargs = args ? Py_BuildValue("{s:O,s:O}", "mutable", mutable_, "dtype", dtype)
                            : NULL;
    if (kwargs && empty && PyDict_SetItemString(kwargs, "empty", empty) < 0)
        Py_CLEAR(kwargs);
    PyObject *r = kwargs ? PyObject_Call(fn, args, kwargs) : NULL;
    Py_XDECREF(kwargs);
    Py_XDECREF(args);
    Py_XDECREF(fn);
    return r;
}
