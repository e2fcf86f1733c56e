/* The Tensor type (contract-core T-1..T-14, V-3, V-4, V-10), assembled:
 * its method and attribute tables, element access (t[c], t[c] = v, item,
 * tolist; slices become views through py_view.c), the autograd attributes,
 * and the slots that come from the feature files (repr and str from
 * py_repr.c, __dlpack__ from py_dlpack.c, __array__ from py_array.c,
 * backward from py_autograd.c). The object, its construction and the
 * accessors the features use live below in py_tensor_object.c.
 *
 * May depend on: every file it assembles; only module init depends on it
 * (and py_friendly.c on item/tolist). */
#include "sw_python.h"
#include "sw_messages.h"

#include <string.h>

/* ---- properties and queries (T-3, T-9, T-10, T-12) ---------------------- */

static PyObject *tensor_get_carrier(SwTensorObject *self, void *unused)
{
    (void)unused;
    return Py_NewRef(self->subs[0].carrier);
}

static PyObject *tensor_get_offset(SwTensorObject *self, void *unused)
{
    (void)unused;
    return PyLong_FromLongLong(SW_SUB_OFFSET(&self->subs[0]));
}

static PyObject *tensor_get_layout(SwTensorObject *self, void *unused)
{
    (void)unused;
    return Py_NewRef(self->subs[0].layout);
}

static PyObject *tensor_get_version(SwTensorObject *self, void *unused)
{
    (void)unused;
    return PyLong_FromLongLong(sw_py_state_version(self->subs[0].carrier));
}

static PyObject *tensor_get_subtensors(SwTensorObject *self, void *unused)
{
    (void)unused;
    PyObject *out = PyTuple_New(self->nsub);
    if (!out)
        return NULL;
    for (Py_ssize_t i = 0; i < self->nsub; i++) {
        SwSubtensor *s = &self->subs[i];
        PyObject *e = Py_BuildValue("(OOLO)", s->storage_dtype, s->carrier,
                                    (long long)SW_SUB_OFFSET(s), s->layout);
        if (!e) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, i, e);
    }
    return out;
}

static PyObject *tensor_get_adjacent(SwTensorObject *self, void *unused)
{
    (void)unused;
    return Py_NewRef(self->adjacent);
}

static PyObject *tensor_dtype(SwTensorObject *self, PyObject *unused)
{
    (void)unused;
    return Py_NewRef(self->dtype);
}

static PyObject *tensor_size(SwTensorObject *self, PyObject *unused)
{
    (void)unused;
    return PyLong_FromLongLong(SW_SUB_LAYOUT(&self->subs[0])->size);
}

static PyObject *tensor_carrier_type(SwTensorObject *self, PyObject *unused)
{
    (void)unused;
    return Py_NewRef((PyObject *)Py_TYPE(self->subs[0].carrier));
}

static PyObject *tensor_version_token(SwTensorObject *self, PyObject *unused)
{
    (void)unused;
    PyObject *out = PyList_New(0);
    if (!out)
        return NULL;
    for (Py_ssize_t i = 0; i < self->nsub; i++) {
        PyObject *c = self->subs[i].carrier;
        int seen = 0;
        for (Py_ssize_t j = 0; j < i; j++)
            seen |= self->subs[j].carrier == c;
        if (seen)
            continue;
        PyObject *e = Py_BuildValue("(NL)", PyLong_FromVoidPtr(c),
                                    (long long)sw_py_state_version(c));
        if (!e || PyList_Append(out, e) < 0) {
            Py_XDECREF(e);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(e);
    }
    PyObject *tuple = PyList_AsTuple(out);
    Py_DECREF(out);
    return tuple;
}

static PyObject *tensor_is_mutable(SwTensorObject *self, PyObject *unused)
{
    (void)unused;
    if (self->nsub != 1)
        Py_RETURN_FALSE;
    int r = sw_py_carrier_is_mutable(self->subs[0].carrier);
    if (r < 0)
        return NULL;
    return PyBool_FromLong(r);
}

static PyObject *tensor_is_differentiable(SwTensorObject *self, PyObject *unused)
{
    (void)unused;
    return PyBool_FromLong(self->dtype == sw_py_dtype(SW_DT_FLOAT32));
}

/* ---- element access (V-3, V-4) ------------------------------------------ */

/* Key shape: 0 no slice anywhere; 1 a slice as the key or a top-level entry
 * of a tuple key; 2 a slice only deeper (or inside a list). */
static int key_slice_kind(PyObject *key, int top);

static int seq_has_slice(PyObject *seq)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++)
        if (key_slice_kind(items[i], 0))
            return 1;
    return 0;
}

static int key_slice_kind(PyObject *key, int top)
{
    if (PySlice_Check(key))
        return 1;
    if (!PyTuple_Check(key) && !PyList_Check(key))
        return 0;
    int found = 0;
    if (Py_EnterRecursiveCall(" while reading a tensor key"))
        return 0; /* the error surfaces in the key validation below */
    if (top && PyTuple_Check(key)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(key) && found != 2; i++) {
            PyObject *e = PyTuple_GET_ITEM(key, i);
            if (PySlice_Check(e))
                found = 1;
            else if ((PyTuple_Check(e) || PyList_Check(e)) && seq_has_slice(e))
                found = 2;
        }
    } else if (seq_has_slice(key)) {
        found = 2;
    }
    Py_LeaveRecursiveCall();
    return found;
}

/* V-3 step 2: an integer, or (nested) lists/tuples of integers. */
static int key_check_types(PyObject *key)
{
    if (sw_py_is_integer(key))
        return 0;
    if (PyTuple_Check(key) || PyList_Check(key)) {
        if (Py_EnterRecursiveCall(" while reading a tensor key"))
            return -1;
        int rc = 0;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(key);
        /* Only type checks run here: no Python code can resize the list. */
        for (Py_ssize_t i = 0; i < n && rc == 0; i++)
            rc = key_check_types(PySequence_Fast_GET_ITEM(key, i));
        Py_LeaveRecursiveCall();
        return rc;
    }
    PyErr_Format(PyExc_TypeError,
                 "a tensor index must be an integer or a (nested) list/tuple of integers, "
                 "e.g. t[5] or t[1, [2, 0]] (slices make views: t[0, :]), not %.100s",
                 _PyType_Name(Py_TYPE(key)));
    return -1;
}

/* V-3 step 3: an integer component against the size of the mode it
 * addresses. Its __index__ runs first; the message then names the mode as
 * the user's key reached it. */
static int key_component(PyObject *obj, int64_t size, const sw_py_mode_path *path, int64_t *out)
{
    int sign;
    if (sw_py_integer_value(obj, out, &sign) < 0)
        return -1;
    if (sign == 0 && *out >= 0 && *out < size)
        return 0;
    char where[1024];
    sw_py_msg_mode_name(path, "tensor", (long long)size, where, sizeof where);
    if (sign < 0 || (sign == 0 && *out < 0))
        PyErr_Format(PyExc_ValueError,
                     "index %S is out of range for %s: indices run from 0 to %lld and do not "
                     "wrap around", obj, where, (long long)size - 1);
    else
        PyErr_Format(PyExc_ValueError, "index %S is out of range for %s", obj, where);
    return -1;
}

/* Integer `key` over leaves [leaf, leaf + n) added to the logical index:
 * those leaves are consecutive in first-leaf-fastest order, so the key is
 * their ordinal times the product of the extents before them. */
static int index_integer(const sw_layout *L, int32_t leaf, int32_t n, PyObject *key,
                         const sw_py_mode_path *path, int64_t *acc)
{
    int64_t k, size = 1, pitch = 1;
    for (int32_t j = 0; j < n; j++)
        size *= L->extents[leaf + j]; /* bounded by the layout's size */
    if (key_component(key, size, path, &k) < 0)
        return -1;
    for (int32_t j = 0; j < leaf; j++)
        pitch *= L->extents[j];
    *acc += k * pitch;
    return 0;
}

/* L-9/L-10 for one level whose children span profile [pos, end) and whose
 * first leaf is `leaf`; `path` names that level for messages. */
static int index_level(const sw_layout *L, int32_t pos, int32_t end, int32_t leaf,
                       PyObject *key, sw_py_mode_path *path, int64_t *acc)
{
    if (!PyTuple_Check(key) && !PyList_Check(key)) {
        int32_t n = 0;
        for (int32_t p = pos; p < end; p++)
            n += L->profile[p] == SW_NODE_LEAF;
        return index_integer(L, leaf, n, key, path, acc);
    }
    Py_ssize_t nchild = 0;
    for (int32_t p = pos, nl; p < end; p = sw_layout_mode_end(L->profile, p, &nl))
        nchild++;
    if (PySequence_Fast_GET_SIZE(key) != nchild) {
        char label[1024];
        sw_py_msg_mode_label(path, "tensor", label, sizeof label);
        Py_ssize_t got = PySequence_Fast_GET_SIZE(key);
        PyErr_Format(PyExc_ValueError,
                     "index %R has %zd component%s but %s has %zd %smode%s; give one "
                     "index per %smode, or one integer for the whole %s",
                     key, got, sw_py_msg_s(got), label, nchild, path->depth ? "sub-" : "",
                     sw_py_msg_s(nchild), path->depth ? "sub-" : "",
                     path->depth ? "mode" : "tensor");
        return -1;
    }
    /* A component's __index__ may run Python code: walk an immutable copy. */
    PyObject *items = PySequence_Tuple(key);
    if (!items)
        return -1;
    int rc = 0;
    if (Py_EnterRecursiveCall(" while indexing a tensor")) {
        Py_DECREF(items);
        return -1;
    }
    Py_ssize_t c = 0;
    path->depth++;
    for (int32_t p = pos, nl; p < end && rc == 0; c++) {
        PyObject *comp = PyTuple_GET_ITEM(items, c);
        int32_t q = sw_layout_mode_end(L->profile, p, &nl);
        path->at[path->depth - 1] = (int32_t)c;
        if (L->profile[p] == SW_NODE_LEAF) {
            if (PyTuple_Check(comp) || PyList_Check(comp)) {
                char label[1024];
                sw_py_msg_mode_label(path, "tensor", label, sizeof label);
                PyErr_Format(PyExc_ValueError,
                             "%s has no sub-modes, so its index must be an integer, not %R",
                             label, comp);
                rc = -1;
            } else {
                rc = index_integer(L, leaf, 1, comp, path, acc);
            }
        } else {
            rc = index_level(L, p + 1, q - 1, leaf, comp, path, acc);
        }
        leaf += nl;
        p = q;
    }
    path->depth--;
    Py_LeaveRecursiveCall();
    Py_DECREF(items);
    return rc;
}

/* V-3/V-4 checks 2 and 3: the logical index of `key` in layout L (the core
 * finds its slot). */
static int tensor_key_index(const sw_layout *L, PyObject *key, int64_t *out)
{
    if (key_check_types(key) < 0)
        return -1;
    *out = 0;
    sw_py_mode_path path = {.depth = 0};
    return index_level(L, 0, L->nprofile, 0, key, &path, out);
}

static int require_one_subtensor(SwTensorObject *t, const char *operation)
{
    if (t->nsub == 1)
        return 0;
    return sw_py_msg_raise_planes(t->dtype, t->nsub, operation, SW_MSG_ONE_PLANE);
}

static PyObject *tensor_subscript(SwTensorObject *self, PyObject *key)
{
    if (key_slice_kind(key, 1))
        return sw_py_tensor_slice((PyObject *)self, key);
    if (PyErr_Occurred())
        return NULL;
    if (require_one_subtensor(self, "read element by element") < 0)
        return NULL;
    int64_t k;
    if (tensor_key_index(SW_SUB_LAYOUT(&self->subs[0]), key, &k) < 0)
        return NULL;
    return sw_py_tensor_element((PyObject *)self, k);
}

/* The slot is the core's to find; the write is the carrier's, with its
 * checks and messages (C-5). */
static int tensor_ass_subscript(SwTensorObject *self, PyObject *key, PyObject *value)
{
    if (!value) {
        PyErr_SetString(PyExc_TypeError, "Tensor elements cannot be deleted");
        return -1;
    }
    if (require_one_subtensor(self, "written element by element") < 0)
        return -1;
    if (key_slice_kind(key, 1)) {
        PyErr_SetString(PyExc_TypeError,
                        "element write takes an integer or (nested) list/tuple key, not a slice");
        return -1;
    }
    if (PyErr_Occurred())
        return -1;
    sw_error err;
    int64_t k, slot;
    if (tensor_key_index(SW_SUB_LAYOUT(&self->subs[0]), key, &k) < 0)
        return -1;
    if (sw_tensor_slot(self->subs[0].core, k, &slot, &err) != SW_OK)
        return sw_py_raise(&err);
    return sw_py_carrier_setitem(self->subs[0].carrier, slot, value);
}

/* ---- item / tolist (V-10) ----------------------------------------------- */

PyObject *sw_py_tensor_item(PyObject *obj)
{
    if (!SwTensor_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "item requires a Tensor, not %.100s",
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    SwTensorObject *t = (SwTensorObject *)obj;
    if (require_one_subtensor(t, "read with item()") < 0)
        return NULL;
    if (SW_SUB_LAYOUT(&t->subs[0])->size != 1) {
        long long n = (long long)SW_SUB_LAYOUT(&t->subs[0])->size;
        PyErr_Format(PyExc_ValueError,
                     "item requires a tensor with exactly one element, and this one has %lld; "
                     "use tolist() for several", n);
        return NULL;
    }
    return sw_py_tensor_element(obj, 0);
}

PyObject *sw_py_tensor_tolist(PyObject *obj)
{
    if (!SwTensor_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "to_list requires a Tensor, not %.100s",
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    SwTensorObject *t = (SwTensorObject *)obj;
    if (require_one_subtensor(t, "converted with tolist() or to_list()") < 0)
        return NULL;
    return sw_py_tensor_values(obj);
}

static PyObject *tensor_item(PyObject *self, PyObject *unused)
{
    (void)unused;
    return sw_py_tensor_item(self);
}

static PyObject *tensor_tolist(PyObject *self, PyObject *unused)
{
    (void)unused;
    return sw_py_tensor_tolist(self);
}

/* ---- autograd attributes (A-2..A-4) --------------------------------------- */

static int require_differentiable(SwTensorObject *self, const char *what)
{
    if (self->dtype == sw_py_dtype(SW_DT_FLOAT32))
        return 0;
    PyErr_Format(PyExc_RuntimeError,
                 "%s: this Tensor is non-differentiable (dtype %R); only Float32 "
                 "Tensors take part in autograd", what, self->dtype);
    return -1;
}

static PyObject *tensor_get_autograd_ctx(SwTensorObject *self, void *closure)
{
    (void)closure;
    return Py_NewRef(self->autograd_ctx);
}

static int tensor_set_autograd_ctx(SwTensorObject *self, PyObject *value, void *closure)
{
    (void)closure;
    if (!value) {
        PyErr_SetString(PyExc_AttributeError,
                        "autograd_ctx cannot be deleted; assign None instead");
        return -1;
    }
    if (value != Py_None) {
        if (require_differentiable(self, "cannot set autograd_ctx") < 0)
            return -1;
        if (!SwOperation_Check(value)) {
            PyErr_Format(PyExc_TypeError,
                         "autograd_ctx must be an Operation or None, not %.100s",
                         Py_TYPE(value)->tp_name);
            return -1;
        }
    }
    Py_SETREF(self->autograd_ctx, Py_NewRef(value));
    if (value != Py_None)
        sw_py_tensor_track((PyObject *)self);
    return 0;
}

static PyObject *tensor_get_grad(SwTensorObject *self, void *closure)
{
    (void)closure;
    if (require_differentiable(self, "no grad") < 0)
        return NULL;
    return Py_NewRef(self->grad);
}

static int tensor_set_grad(SwTensorObject *self, PyObject *value, void *closure)
{
    (void)closure;
    if (!value) {
        PyErr_SetString(PyExc_AttributeError, "grad cannot be deleted; assign None instead");
        return -1;
    }
    if (value != Py_None) {
        if (require_differentiable(self, "cannot set grad") < 0)
            return -1;
        if (!SwTensor_Check(value)) {
            PyErr_Format(PyExc_TypeError, "grad must be a Tensor or None, not %.100s",
                         Py_TYPE(value)->tp_name);
            return -1;
        }
    }
    Py_SETREF(self->grad, Py_NewRef(value));
    if (value != Py_None)
        sw_py_tensor_track((PyObject *)self);
    return 0;
}

/* ---- type ---------------------------------------------------------------- */

static PyGetSetDef tensor_getset[] = {
    {"autograd_ctx", (getter)tensor_get_autograd_ctx, (setter)tensor_set_autograd_ctx,
     "The Operation that produced this Tensor, or None for a leaf. Only a\n"
     "differentiable (Float32) Tensor can hold an Operation.", NULL},
    {"grad", (getter)tensor_get_grad, (setter)tensor_set_grad,
     "The accumulated gradient (a Tensor) or None. RuntimeError on a\n"
     "non-differentiable Tensor.", NULL},
    {"carrier", (getter)tensor_get_carrier, NULL, "The carrier that holds the values (the first plane's).", NULL},
    {"offset", (getter)tensor_get_offset, NULL, "The slot where the layout starts in the carrier.", NULL},
    {"layout", (getter)tensor_get_layout, NULL, "The Layout that places the values in the carrier.",
     NULL},
    {"version", (getter)tensor_get_version, NULL, "The carrier's write counter: grows every time its values change.", NULL},
    {"_subtensors", (getter)tensor_get_subtensors, NULL,
     "One (storage_dtype, carrier, offset, layout) tuple per plane.", NULL},
    {"_adjacent_layouts", (getter)tensor_get_adjacent, NULL,
     "The layouts that map a coordinate of each plane to the next plane.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef tensor_methods[] = {
    {"_from_representation", (PyCFunction)(void (*)(void))sw_py_tensor_from_representation,
     METH_VARARGS | METH_KEYWORDS | METH_STATIC,
     "_from_representation(logical_dtype, subtensors, adjacent_layouts=())\n--\n\n"
     "A checked Tensor of `logical_dtype` built from (carrier, offset, layout)\n"
     "triples in plane order. Raises TypeError or ValueError when a piece does\n"
     "not fit the dtype's planes."},
    {"dtype", (PyCFunction)tensor_dtype, METH_NOARGS,
     "dtype($self, /)\n--\n\nThe DType of the Tensor's values."},
    {"size", (PyCFunction)tensor_size, METH_NOARGS,
     "size($self, /)\n--\n\nNumber of elements: the size of the layout's shape."},
    {"carrier_type", (PyCFunction)tensor_carrier_type, METH_NOARGS,
     "carrier_type($self, /)\n--\n\nThe class of the Tensor's carrier, type(t.carrier)."},
    {"_version_token", (PyCFunction)tensor_version_token, METH_NOARGS,
     "_version_token($self, /)\n--\n\nOne (id(carrier), version) pair per distinct carrier."},
    {"is_mutable", (PyCFunction)tensor_is_mutable, METH_NOARGS,
     "is_mutable($self, /)\n--\n\nWhether values can be written: one plane on a mutable carrier."},
    {"is_differentiable", (PyCFunction)tensor_is_differentiable, METH_NOARGS,
     "is_differentiable($self, /)\n--\n\nWhether gradients can flow through it: true for Float32 only."},
    {"item", tensor_item, METH_NOARGS,
     "item($self, /)\n--\n\nThe value of a one-element Tensor. Raises ValueError for more elements."},
    {"tolist", tensor_tolist, METH_NOARGS,
     "tolist($self, /)\n--\n\nAll values as a flat list, first mode fastest (column-major order)."},
    {"backward", (PyCFunction)(void (*)(void))sw_py_tensor_backward,
     METH_FASTCALL | METH_KEYWORDS,
     "backward($self, /, gradient=None, retain_graph=False)\n--\n\n"
     "Compute gradients of this Tensor with respect to the leaves of its\n"
     "graph and add them into their .grad (and the .grad of Tensors that\n"
     "retain theirs). gradient is the cotangent: a Tensor with this Tensor's\n"
     "layout (or, for a broadcast layout, its shape in an injective layout);\n"
     "it may be omitted only for a one-element Tensor, which then uses 1.0.\n"
     "Unless retain_graph is True, the traversed graph is released and\n"
     "cannot be traversed again. Raises RuntimeError for a non-differentiable\n"
     "Tensor, a released graph or a saved input modified in place, TypeError\n"
     "or ValueError for a bad gradient. When it raises, no .grad changes."},
    {"retain_grad", (PyCFunction)(void (*)(void))sw_py_tensor_retain_grad,
     METH_FASTCALL | METH_KEYWORDS,
     "retain_grad($self, /, retain=True)\n--\n\n"
     "Make later backward passes that reach this non-leaf Tensor accumulate\n"
     "its gradient into .grad (retain=False stops it). No effect on leaves.\n"
     "Raises RuntimeError for a non-differentiable Tensor and TypeError when\n"
     "retain is not a bool."},
    {"__dlpack__", (PyCFunction)(void (*)(void))sw_py_tensor_dlpack,
     METH_FASTCALL | METH_KEYWORDS,
     "__dlpack__($self, /, stream=None, *, max_version=None, dl_device=None, copy=None)\n"
     "--\n\n"
     "Export the values as a DLPack capsule that aliases the carrier's memory\n"
     "(no copy), for numpy.from_dlpack, torch.from_dlpack and the like.\n"
     "max_version=(1, 0) or higher gives a versioned capsule, otherwise a\n"
     "legacy one. Only Float32 and Int32 on a carrier that supports export\n"
     "(CPU) can be exported. Raises BufferError for copy=True, another device\n"
     "or an unsupported carrier or dtype; TypeError or ValueError for a\n"
     "malformed max_version or dl_device.\n\n"
     "    numpy.from_dlpack(friendly.arange(4))"},
    {"__array__", (PyCFunction)(void (*)(void))sw_py_tensor_array,
     METH_FASTCALL | METH_KEYWORDS,
     "__array__($self, /, dtype=None, copy=None)\n--\n\n"
     "The values as a NumPy array shaped like the layout's leaf modes:\n"
     "the carrier's own memory when NumPy can take it over DLPack (as\n"
     "numpy.from_dlpack does, read-only when the carrier cannot be written),\n"
     "otherwise a fresh copy. copy=True always copies; copy=False raises\n"
     "ValueError when a copy would be needed. dtype converts the result."},
    {"__dlpack_device__", sw_py_tensor_dlpack_device, METH_NOARGS,
     "__dlpack_device__($self, /)\n--\n\n"
     "The (device_type, device_id) pair of the carrier's memory, (1, 0) for\n"
     "CPU. Raises BufferError when the carrier does not support export."},
    {NULL, NULL, 0, NULL},
};

static PyMappingMethods tensor_as_mapping = {
    .mp_length = NULL, /* T-14: no len() */
    .mp_subscript = (binaryfunc)tensor_subscript,
    .mp_ass_subscript = (objobjargproc)tensor_ass_subscript,
};

int sw_py_tensor_init(PyObject *module)
{
    SwTensor_Type.tp_repr = sw_py_tensor_repr;
    SwTensor_Type.tp_str = sw_py_tensor_str;
    SwTensor_Type.tp_as_mapping = &tensor_as_mapping;
    SwTensor_Type.tp_methods = tensor_methods;
    SwTensor_Type.tp_getset = tensor_getset;
    if (PyType_Ready(&SwTensor_Type) < 0)
        return -1;
    Py_INCREF(&SwTensor_Type);
    if (PyModule_AddObject(module, "Tensor", (PyObject *)&SwTensor_Type) < 0) {
        Py_DECREF(&SwTensor_Type);
        return -1;
    }
    return 0;
}
