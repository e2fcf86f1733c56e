/* Operation: the autograd node base (contract O-1..O-10).
 *
 * An operation holds the Tensors its backward needs (saved inputs), the
 * version token of each taken when it was saved, and a ctx dict for any
 * other state. forward() runs the subclass's _forward and decides once,
 * before the call, whether this run records a node; a run that does not
 * record, or that fails, leaves nothing saved and attaches nothing.
 * MoveOperation (py_move_operation.c) extends this struct. */
#include "sw_python.h"
#include "sw_profiling.h"

static PyObject *str_forward, *str_version_token, *str_options;

/* ---- saved state ------------------------------------------------------------ */

static int is_differentiable(PyObject *tensor)
{
    return ((SwTensorObject *)tensor)->dtype == sw_py_dtype(SW_DT_FLOAT32);
}

void sw_py_operation_clear_saved(PyObject *op)
{
    SwOperationObject *o = (SwOperationObject *)op;
    Py_CLEAR(o->saved);
    Py_CLEAR(o->versions);
}

/* O-5/O-7: the Tensors among items[0..n) in order, and their tokens now. A
 * token is read through Tensor._version_token, which runs no user code. */
int sw_py_operation_store(PyObject *op, PyObject *const *items, Py_ssize_t n)
{
    Py_ssize_t count = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        count += SwTensor_Check(items[i]);
    PyObject *saved = PyTuple_New(count);
    PyObject *versions = PyTuple_New(count);
    if (!saved || !versions)
        goto error;
    for (Py_ssize_t i = 0, k = 0; i < n; i++) {
        if (!SwTensor_Check(items[i]))
            continue;
        PyObject *token = PyObject_CallMethodNoArgs(items[i], str_version_token);
        if (!token)
            goto error;
        PyTuple_SET_ITEM(saved, k, Py_NewRef(items[i]));
        PyTuple_SET_ITEM(versions, k, token);
        k++;
    }
    SwOperationObject *o = (SwOperationObject *)op;
    Py_XSETREF(o->saved, saved);
    Py_XSETREF(o->versions, versions);
    o->released = 0;
    return 0;
error:
    Py_XDECREF(saved);
    Py_XDECREF(versions);
    return -1;
}

int sw_py_operation_attach(PyObject *op, PyObject *result)
{
    SwTensorObject *t = (SwTensorObject *)result;
    Py_SETREF(t->autograd_ctx, Py_NewRef(op));
    sw_py_tensor_track(result);
    return 0;
}

/* ---- allocation and GC ------------------------------------------------------ */

/* State exists from allocation, so a subclass __init__ need not call ours. */
static PyObject *operation_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    (void)args;
    (void)kwds;
    SwOperationObject *o = (SwOperationObject *)type->tp_alloc(type, 0);
    if (!o)
        return NULL;
    o->ctx = PyDict_New();
    if (!o->ctx) {
        Py_DECREF(o);
        return NULL;
    }
    return (PyObject *)o;
}

static int operation_init(PyObject *self, PyObject *args, PyObject *kwds)
{
    if (PyTuple_GET_SIZE(args) || (kwds && PyDict_GET_SIZE(kwds))) {
        PyErr_Format(PyExc_TypeError, "%s() takes no arguments", _PyType_Name(Py_TYPE(self)));
        return -1;
    }
    return 0;
}

int sw_py_operation_traverse(PyObject *self, visitproc visit, void *arg)
{
    SwOperationObject *o = (SwOperationObject *)self;
    Py_VISIT(o->ctx);
    Py_VISIT(o->saved);
    Py_VISIT(o->versions);
    Py_VISIT(o->operation_name);
    Py_VISIT(o->dispatch_carrier_class);
    return 0;
}

int sw_py_operation_clear(PyObject *self)
{
    SwOperationObject *o = (SwOperationObject *)self;
    Py_CLEAR(o->ctx);
    Py_CLEAR(o->saved);
    Py_CLEAR(o->versions);
    Py_CLEAR(o->operation_name);
    Py_CLEAR(o->dispatch_carrier_class);
    return 0;
}

static void operation_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    if (((SwOperationObject *)self)->weakreflist)
        PyObject_ClearWeakRefs(self);
    sw_py_operation_clear(self);
    Py_TYPE(self)->tp_free(self);
}

/* ---- hooks ------------------------------------------------------------------- */

static PyObject *operation_base_forward(PyObject *self, PyObject *const *args,
                                        Py_ssize_t nargs)
{
    (void)args;
    (void)nargs;
    PyErr_Format(PyExc_NotImplementedError,
                 "%s does not implement _forward(*inputs); subclasses of Operation must",
                 _PyType_Name(Py_TYPE(self)));
    return NULL;
}

static PyObject *operation_base_backward(PyObject *self, PyObject *gradient)
{
    (void)gradient;
    PyErr_Format(PyExc_NotImplementedError,
                 "%s does not implement backward(gradient); subclasses of Operation "
                 "that take part in autograd must",
                 _PyType_Name(Py_TYPE(self)));
    return NULL;
}

/* ---- forward ------------------------------------------------------------------ */

/* Keywords: only options, and only None. 0 / -1. */
static int check_keywords(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (!kwnames)
        return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        int eq = PyUnicode_Compare(name, str_options);
        if (eq == -1 && PyErr_Occurred())
            return -1;
        if (eq != 0) {
            PyErr_Format(PyExc_TypeError,
                         "forward() got an unexpected keyword argument '%U'", name);
            return -1;
        }
        if (args[nargs + i] != Py_None) {
            PyErr_Format(PyExc_TypeError,
                         "forward(): options must be None (typed options are not "
                         "supported yet), not %.100s",
                         Py_TYPE(args[nargs + i])->tp_name);
            return -1;
        }
    }
    return 0;
}

/* self._forward(*args), which must return a Tensor. New reference. */
static PyObject *call_forward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *fn = PyObject_GetAttr(self, str_forward);
    if (!fn)
        return NULL;
    PyObject *result = PyObject_Vectorcall(fn, args, (size_t)nargs, NULL);
    Py_DECREF(fn);
    if (result && !SwTensor_Check(result)) {
        PyErr_Format(PyExc_TypeError, "%s._forward must return a Tensor, not %.100s",
                     _PyType_Name(Py_TYPE(self)), Py_TYPE(result)->tp_name);
        Py_CLEAR(result);
    }
    return result;
}

/* Operation types that keep every plane (broadcast_to, from py_view.c),
 * registered at module init so this base names none of its subtypes. */
#define MAX_PLANE_KEEPERS 4
static PyTypeObject *plane_keepers[MAX_PLANE_KEEPERS];
static int nkeepers;

int sw_py_operation_keeps_planes(PyTypeObject *type)
{
    if (nkeepers == MAX_PLANE_KEEPERS) {
        PyErr_SetString(PyExc_SystemError, "too many plane-keeping operation types");
        return -1;
    }
    plane_keepers[nkeepers++] = type;
    return 0;
}

static int keeps_planes(PyObject *op)
{
    for (int i = 0; i < nkeepers; i++)
        if (Py_TYPE(op) == plane_keepers[i])
            return 1;
    return 0;
}

static PyObject *operation_forward(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                   PyObject *kwnames)
{
    if (check_keywords(args, nargs, kwnames) < 0)
        return NULL;
    int any_differentiable = 0;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        if (!SwTensor_Check(args[i]))
            continue;
        if (((SwTensorObject *)args[i])->nsub != 1 && !keeps_planes(self)) {
            PyErr_Format(PyExc_NotImplementedError,
                         "%s.forward: input %zd has %zd planes (a compound dtype such as "
                         "ScaledInt32), which this operation does not support; pass tensors "
                         "on one carrier",
                         _PyType_Name(Py_TYPE(self)), i, ((SwTensorObject *)args[i])->nsub);
            return NULL;
        }
        any_differentiable |= is_differentiable(args[i]);
    }
    /* The decision is taken once, here: grad-mode changes inside _forward
     * affect only what _forward calls. */
    int record = sw_py_grad_enabled() && any_differentiable;
    sw_py_operation_clear_saved(self);
    if (record && sw_py_operation_store(self, args, nargs) < 0)
        goto error;

    /* The computation boundary a profiler times (dispatched operations
     * only): _forward and the result check. */
    sw_py_op_span *span = sw_py_profile_op_begin(self, args, nargs);
    PyObject *result = call_forward(self, args, nargs);
    sw_py_profile_op_end(span, result != NULL);
    if (!result)
        goto error;
    if (record && is_differentiable(result)) {
        for (Py_ssize_t i = 0; i < nargs; i++) {
            if (args[i] == result) {
                PyErr_Format(PyExc_ValueError,
                             "%s._forward returned its input %zd: a result may not be "
                             "its own input",
                             _PyType_Name(Py_TYPE(self)), i);
                Py_DECREF(result);
                goto error;
            }
        }
        sw_py_operation_attach(self, result);
    } else {
        sw_py_operation_clear_saved(self);
    }
    return result;
error:
    sw_py_operation_clear_saved(self);
    return NULL;
}

/* ---- saved inputs --------------------------------------------------------------- */

static PyObject *operation_store_inputs(PyObject *self, PyObject *const *args,
                                        Py_ssize_t nargs)
{
    if (sw_py_operation_store(self, args, nargs) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *saved_or_empty(PyObject *tuple)
{
    return tuple ? Py_NewRef(tuple) : PyTuple_New(0);
}

static PyObject *operation_inputs(PyObject *self, PyObject *unused)
{
    (void)unused;
    return saved_or_empty(((SwOperationObject *)self)->saved);
}

static PyObject *operation_input_versions(PyObject *self, PyObject *unused)
{
    (void)unused;
    return saved_or_empty(((SwOperationObject *)self)->versions);
}

static PyObject *operation_validate(PyObject *self, PyObject *unused)
{
    (void)unused;
    SwOperationObject *o = (SwOperationObject *)self;
    if (!o->saved)
        Py_RETURN_NONE;
    /* Private references: nothing below runs user code, but the tuples
     * could be replaced if it ever did. */
    PyObject *saved = Py_NewRef(o->saved), *versions = Py_NewRef(o->versions);
    PyObject *ret = NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(saved); i++) {
        PyObject *now = PyObject_CallMethodNoArgs(PyTuple_GET_ITEM(saved, i),
                                                  str_version_token);
        if (!now)
            goto done;
        PyObject *then = PyTuple_GET_ITEM(versions, i);
        int same = PyObject_RichCompareBool(now, then, Py_EQ);
        if (same == 0)
            PyErr_Format(PyExc_RuntimeError,
                         "saved input %zd of %s was modified in-place after it was saved "
                         "(version token %R, now %R); backward would read changed values",
                         i, _PyType_Name(Py_TYPE(self)), then, now);
        Py_DECREF(now);
        if (same != 1)
            goto done;
    }
    ret = Py_NewRef(Py_None);
done:
    Py_DECREF(saved);
    Py_DECREF(versions);
    return ret;
}

/* ---- attributes ----------------------------------------------------------------- */

static PyObject *operation_get_ctx(PyObject *self, void *closure)
{
    (void)closure;
    return Py_NewRef(((SwOperationObject *)self)->ctx);
}

static PyObject *none_if_null(PyObject *o)
{
    return Py_NewRef(o ? o : Py_None);
}

static PyObject *operation_get_name(PyObject *self, void *closure)
{
    (void)closure;
    return none_if_null(((SwOperationObject *)self)->operation_name);
}

static PyObject *operation_get_dispatch_class(PyObject *self, void *closure)
{
    (void)closure;
    return none_if_null(((SwOperationObject *)self)->dispatch_carrier_class);
}

static PyGetSetDef operation_getset[] = {
    {"ctx", operation_get_ctx, NULL,
     "A dict that belongs to this operation, for state backward needs. Always\n"
     "the same dict; it cannot be replaced.", NULL},
    {"_operation_name", operation_get_name, NULL,
     "The name this operation was dispatched under, or None when it was\n"
     "constructed directly.", NULL},
    {"_dispatch_carrier_class", operation_get_dispatch_class, NULL,
     "The carrier class that dispatched this operation, or None when it was\n"
     "constructed directly.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef operation_methods[] = {
    {"forward", (PyCFunction)(void (*)(void))operation_forward,
     METH_FASTCALL | METH_KEYWORDS,
     "forward($self, /, *inputs, options=None)\n--\n\n"
     "Run the operation on `inputs` and return its result Tensor.\n\n"
     "When autograd recording is enabled on this thread and some input is a\n"
     "differentiable (Float32) Tensor, the input Tensors are saved with their\n"
     "versions and a differentiable result gets this operation as its\n"
     "autograd_ctx. options must be None. Raises TypeError for another\n"
     "keyword or when _forward returns something other than a Tensor,\n"
     "NotImplementedError for a Tensor with several subtensors, and\n"
     "ValueError when _forward returns one of its inputs. When it raises,\n"
     "nothing stays saved."},
    {"_forward", (PyCFunction)(void (*)(void))operation_base_forward, METH_FASTCALL,
     "_forward($self, /, *inputs)\n--\n\n"
     "Compute the result Tensor. Subclasses implement this; the base class\n"
     "raises NotImplementedError."},
    {"backward", operation_base_backward, METH_O,
     "backward($self, gradient, /)\n--\n\n"
     "Return one gradient per saved input, as a tuple or list. Subclasses\n"
     "implement this; the base class raises NotImplementedError."},
    {"store_inputs", (PyCFunction)(void (*)(void))operation_store_inputs, METH_FASTCALL,
     "store_inputs($self, /, *inputs)\n--\n\n"
     "Replace the saved inputs with the Tensors among `inputs` (in order;\n"
     "other values are skipped) and remember their versions now."},
    {"inputs", operation_inputs, METH_NOARGS,
     "inputs($self, /)\n--\n\nThe saved input Tensors as a tuple; () when none."},
    {"input_versions", operation_input_versions, METH_NOARGS,
     "input_versions($self, /)\n--\n\n"
     "One version token per saved input, taken when it was saved: a tuple of\n"
     "(id(carrier), carrier.version) pairs, one per distinct carrier."},
    {"validate_input_versions", operation_validate, METH_NOARGS,
     "validate_input_versions($self, /)\n--\n\n"
     "Raise RuntimeError when a saved input has been modified in place since\n"
     "it was saved (its version token changed); otherwise return None."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject SwOperation_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "strideweave.Operation",
    .tp_basicsize = sizeof(SwOperationObject),
    .tp_dealloc = operation_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Operation()\n--\n\n"
              "Base class of operations that take part in autograd. Subclass it and\n"
              "implement _forward(*inputs), returning a Tensor, and backward(gradient),\n"
              "returning one gradient per saved input; run it with forward(*inputs).\n"
              "A subclass __init__ does not need to call this one.",
    .tp_traverse = sw_py_operation_traverse,
    .tp_clear = sw_py_operation_clear,
    .tp_weaklistoffset = offsetof(SwOperationObject, weakreflist),
    .tp_methods = operation_methods,
    .tp_getset = operation_getset,
    .tp_init = operation_init,
    .tp_new = operation_new,
};

int sw_py_operation_init(PyObject *module)
{
    str_forward = PyUnicode_InternFromString("_forward");
    str_version_token = PyUnicode_InternFromString("_version_token");
    str_options = PyUnicode_InternFromString("options");
    if (!str_forward || !str_version_token || !str_options)
        return -1;
    if (PyType_Ready(&SwOperation_Type) < 0)
        return -1;
    return PyModule_AddObjectRef(module, "Operation", (PyObject *)&SwOperation_Type);
}
