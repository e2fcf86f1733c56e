/* Signatures whose defaults are objects, such as dtype=DType.Float32.
 *
 * inspect reads a C callable's text signature (the "name(...)\n--\n\n" head of
 * its docstring) only when every default is a literal: DType.Float32 is not,
 * so CPU, zeros and friends would have no signature at all. At import this
 * pass finds every public class and function of the module whose text
 * signature inspect rejects, evaluates that same text as a Python `def` with
 * the module's names in scope, and attaches the resulting inspect.Signature:
 * as __signature__ in a class's dict, and for a function through a thin
 * callable that forwards every call to the original (builtin functions hold
 * no attributes). The text stays the single source of each signature. */
#include "sw_python.h"

typedef struct {
    PyObject_HEAD
    PyObject *func;      /* the builtin function every call goes to */
    PyObject *signature; /* its inspect.Signature */
    vectorcallfunc vectorcall;
} SwSignedObject;

static PyObject *signed_call(PyObject *self, PyObject *const *args, size_t nargsf,
                             PyObject *kwnames)
{
    return PyObject_Vectorcall(((SwSignedObject *)self)->func, args, nargsf, kwnames);
}

static int signed_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(((SwSignedObject *)self)->func);
    Py_VISIT(((SwSignedObject *)self)->signature);
    return 0;
}

static int signed_clear(PyObject *self)
{
    Py_CLEAR(((SwSignedObject *)self)->func);
    Py_CLEAR(((SwSignedObject *)self)->signature);
    return 0;
}

static void signed_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    signed_clear(self);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *signed_repr(PyObject *self)
{
    return PyObject_Repr(((SwSignedObject *)self)->func);
}

/* Like a builtin function, it does not bind when stored on a class. */
static PyObject *signed_descr_get(PyObject *self, PyObject *obj, PyObject *type)
{
    (void)obj; (void)type;
    return Py_NewRef(self);
}

static PyObject *forward_attr(PyObject *self, void *name)
{
    return PyObject_GetAttrString(((SwSignedObject *)self)->func, (const char *)name);
}

static PyObject *get_signature(PyObject *self, void *unused)
{
    (void)unused;
    return Py_NewRef(((SwSignedObject *)self)->signature);
}

static PyObject *signed_reduce(PyObject *self, PyObject *unused)
{
    (void)unused;
    return PyObject_GetAttrString(((SwSignedObject *)self)->func, "__qualname__");
}

static PyGetSetDef signed_getset[] = {
    {"__signature__", get_signature, NULL, "The function's inspect.Signature.", NULL},
    {"__doc__", forward_attr, NULL, "The function's documentation.", "__doc__"},
    {"__name__", forward_attr, NULL, "The function's name.", "__name__"},
    {"__qualname__", forward_attr, NULL, "The function's qualified name.", "__qualname__"},
    {"__module__", forward_attr, NULL, "The module that defines the function.", "__module__"},
    {"__text_signature__", forward_attr, NULL, "The signature as written in C.",
     "__text_signature__"},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef signed_methods[] = {
    {"__reduce__", signed_reduce, METH_NOARGS,
     "__reduce__($self, /)\n--\n\nPickle support: pickled by name, like a builtin."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject SwSigned_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "strideweave.builtin_function",
    .tp_basicsize = sizeof(SwSignedObject),
    .tp_dealloc = signed_dealloc,
    .tp_vectorcall_offset = offsetof(SwSignedObject, vectorcall),
    .tp_repr = signed_repr,
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A strideweave function written in C whose defaults are objects.",
    .tp_traverse = signed_traverse,
    .tp_clear = signed_clear,
    .tp_methods = signed_methods,
    .tp_getset = signed_getset,
    .tp_descr_get = signed_descr_get,
};

/* inspect.Signature of `def _(<text>): pass` run in the module's namespace;
 * NULL with an exception when the text does not evaluate. */
static PyObject *signature_from_text(PyObject *module, PyObject *inspect, PyObject *text)
{
    PyObject *ns = NULL, *code = NULL, *res = NULL, *fn, *sig = NULL;
    PyObject *src = PyUnicode_FromFormat("def _%U: pass\n", text);
    if (!src)
        return NULL;
    ns = PyDict_Copy(PyModule_GetDict(module));
    if (!ns)
        goto done;
    const char *utf8 = PyUnicode_AsUTF8(src);
    code = utf8 ? Py_CompileString(utf8, "<signature>", Py_file_input) : NULL;
    if (!code)
        goto done;
    res = PyEval_EvalCode(code, ns, ns);
    if (!res)
        goto done;
    fn = PyDict_GetItemString(ns, "_");
    if (fn)
        sig = PyObject_CallMethod(inspect, "signature", "O", fn);
done:
    Py_XDECREF(res);
    Py_XDECREF(code);
    Py_XDECREF(ns);
    Py_DECREF(src);
    return sig;
}

/* 1 when inspect already reads obj's signature, 0 when it needs help, -1 on error. */
static int has_signature(PyObject *inspect, PyObject *obj)
{
    PyObject *sig = PyObject_CallMethod(inspect, "signature", "O", obj);
    if (sig) {
        Py_DECREF(sig);
        return 1;
    }
    if (PyErr_ExceptionMatches(PyExc_ValueError) || PyErr_ExceptionMatches(PyExc_TypeError)) {
        PyErr_Clear();
        return 0;
    }
    return -1;
}

static int attach(PyObject *module, PyObject *name, PyObject *obj, PyObject *sig)
{
    if (PyType_Check(obj)) {
        PyTypeObject *type = (PyTypeObject *)obj;
        if (PyDict_SetItemString(type->tp_dict, "__signature__", sig) < 0)
            return -1;
        PyType_Modified(type);
        return 0;
    }
    SwSignedObject *w = PyObject_GC_New(SwSignedObject, &SwSigned_Type);
    if (!w)
        return -1;
    w->func = Py_NewRef(obj);
    w->signature = Py_NewRef(sig);
    w->vectorcall = signed_call;
    PyObject_GC_Track((PyObject *)w);
    int rc = PyObject_SetAttr(module, name, (PyObject *)w);
    Py_DECREF(w);
    return rc;
}

/* Give obj a signature when its text signature has object defaults. */
static int fix_one(PyObject *module, PyObject *inspect, PyObject *name, PyObject *obj)
{
    if (!PyType_Check(obj) && !PyCFunction_Check(obj))
        return 0;
    PyObject *text = PyObject_GetAttrString(obj, "__text_signature__");
    if (!text)
        return -1;
    int rc = 0;
    if (PyUnicode_Check(text)) {
        int ok = has_signature(inspect, obj);
        if (ok < 0) {
            rc = -1;
        } else if (ok == 0) {
            PyObject *sig = signature_from_text(module, inspect, text);
            if (sig) {
                rc = attach(module, name, obj, sig);
                Py_DECREF(sig);
            } else if (!PyErr_ExceptionMatches(PyExc_MemoryError)) {
                /* Text no `def` can hold: leave the object as it is rather
                 * than fail the import; the docs test names it. */
                PyErr_Clear();
            } else {
                rc = -1;
            }
        }
    }
    Py_DECREF(text);
    return rc;
}

int sw_py_signature_init(PyObject *module)
{
    if (PyType_Ready(&SwSigned_Type) < 0)
        return -1;
    PyObject *inspect = PyImport_ImportModule("inspect");
    if (!inspect)
        return -1;
    /* Walk a private snapshot: attach() rebinds module attributes. */
    PyObject *items = PyDict_Items(PyModule_GetDict(module));
    int rc = items ? 0 : -1;
    for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(items); i++) {
        PyObject *pair = PyList_GET_ITEM(items, i);
        PyObject *name = PyTuple_GET_ITEM(pair, 0);
        if (PyUnicode_Check(name) && PyUnicode_READ_CHAR(name, 0) != '_')
            rc = fix_one(module, inspect, name, PyTuple_GET_ITEM(pair, 1));
    }
    Py_XDECREF(items);
    Py_DECREF(inspect);
    return rc;
}
