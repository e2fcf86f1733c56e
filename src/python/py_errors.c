/* The one place core status codes become Python exceptions. */
#include "sw_python.h"

#include <stdarg.h>

int sw_py_raise(const sw_error *err)
{
    PyObject *type;
    /* A Python hook the core called back raised: its exception stands. */
    if (err->detail == SW_CARRIER_CALLBACK_RAISED && PyErr_Occurred())
        return -1;
    switch (err->code) {
    case SW_EINVAL: type = PyExc_ValueError; break;
    case SW_ETYPE: type = PyExc_TypeError; break;
    case SW_ENOMEM:
        if (err->msg[0] == '\0') {
            PyErr_NoMemory();
            return -1;
        }
        type = PyExc_MemoryError;
        break;
    case SW_EOVERFLOW: type = PyExc_OverflowError; break;
    case SW_ERANGE: type = PyExc_IndexError; break;
    case SW_ESTATE: type = PyExc_RuntimeError; break;
    case SW_EEXIST: type = PyExc_FileExistsError; break;
    case SW_ENOTSUP: type = PyExc_NotImplementedError; break;
    case SW_EIO: {
        PyObject *exc = PyObject_CallFunction(PyExc_OSError, "is",
                                              err->sys_errno, err->msg);
        if (exc) {
            PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
            Py_DECREF(exc);
        }
        return -1;
    }
    default: type = PyExc_SystemError; break;
    }
    PyErr_SetString(type, err->msg[0] ? err->msg : "strideweave core error");
    return -1;
}

int sw_py_is_integer(PyObject *obj)
{
    return !PyBool_Check(obj) && PyIndex_Check(obj);
}

int sw_py_index_ll(PyObject *obj, long long *v, int *overflow)
{
    PyObject *num = PyNumber_Index(obj);
    if (!num)
        return -1;
    *overflow = 0;
    *v = PyLong_AsLongLongAndOverflow(num, overflow);
    Py_DECREF(num);
    return *v == -1 && PyErr_Occurred() ? -1 : 0;
}

int sw_py_type_add_methods(PyTypeObject *type, PyMethodDef *defs)
{
    for (PyMethodDef *d = defs; d->ml_name; d++) {
        PyObject *descr = d->ml_flags & METH_CLASS ? PyDescr_NewClassMethod(type, d)
                                                   : PyDescr_NewMethod(type, d);
        int rc = descr ? PyDict_SetItemString(type->tp_dict, d->ml_name, descr) : -1;
        Py_XDECREF(descr);
        if (rc < 0)
            return -1;
    }
    PyType_Modified(type);
    return 0;
}

PyObject *sw_py_types_attr(const char *name)
{
    PyObject *mod = PyImport_ImportModule("strideweave._types");
    if (!mod)
        return NULL;
    PyObject *attr = PyObject_GetAttrString(mod, name);
    Py_DECREF(mod);
    return attr;
}

PyObject *sw_py_take_exception(void)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (value && tb)
        PyException_SetTraceback(value, tb);
    Py_XDECREF(type);
    Py_XDECREF(tb);
    return value;
}

int sw_py_reraise_prefixed(PyObject *type, const char *fmt, ...)
{
    PyObject *old = sw_py_take_exception();
    va_list va;
    va_start(va, fmt);
    PyObject *prefix = PyUnicode_FromFormatV(fmt, va);
    va_end(va);
    if (prefix)
        PyErr_Format(type, "%U: %S", prefix, old ? old : Py_None);
    Py_XDECREF(prefix);
    Py_XDECREF(old);
    return -1;
}

void sw_py_restore_exception(PyObject *exc)
{
    if (exc)
        PyErr_Restore(Py_NewRef((PyObject *)Py_TYPE(exc)), exc, PyException_GetTraceback(exc));
}

/* The core status of a Python exception's class (the reverse of
 * sw_py_raise's table; anything else is SW_EINVAL). */
static sw_status status_of(PyObject *exc)
{
    static const struct {
        PyObject **type;
        sw_status code;
    } table[] = {
        {&PyExc_MemoryError, SW_ENOMEM},    {&PyExc_OverflowError, SW_EOVERFLOW},
        {&PyExc_IndexError, SW_ERANGE},     {&PyExc_NotImplementedError, SW_ENOTSUP},
        {&PyExc_RuntimeError, SW_ESTATE},   {&PyExc_TypeError, SW_ETYPE},
        {&PyExc_FileExistsError, SW_EEXIST}, {&PyExc_OSError, SW_EIO},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (PyErr_GivenExceptionMatches(exc, *table[i].type))
            return table[i].code;
    return SW_EINVAL;
}

sw_status sw_py_error_to_core(sw_error *err, int keep)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    sw_status code = status_of(type);
    PyObject *text = value ? PyObject_Str(value) : NULL;
    const char *msg = text ? PyUnicode_AsUTF8(text) : NULL;
    if (!msg)
        PyErr_Clear();
    sw_error_set(err, code, "%s", msg ? msg : "a Python hook raised");
    Py_XDECREF(text);
    if (keep) {
        PyErr_Restore(type, value, tb);
        if (err)
            err->detail = SW_CARRIER_CALLBACK_RAISED;
    } else {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
    }
    return code;
}
