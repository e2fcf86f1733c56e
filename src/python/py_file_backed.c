/* FileBacked: a closed carrier whose slots are a raw file in the hidden
 * session directory (C-22, C-23). Starts empty and allocatable (C-12). */
#include "sw_carrier.h"

#include <string.h>
#include <unistd.h>

#include "strideweave/carrier.h"
#include "strideweave/filestore.h"

#define FB(o) ((SwFileBackedObject *)(o))
#define SLOT_BYTES 4

static const sw_dtype fb_accepted[] = {SW_DT_FLOAT32, SW_DT_INT32};
#define FB_NACCEPTED 2

static PyObject *path_class; /* pathlib.Path */

static sw_dtype fb_dtype(PyObject *self)
{
    return FB(self)->dtype;
}

/* The core's size, never a copy: the core's move engine grows an empty
 * FileBacked and gives the growth back when the move fails. */
static int64_t fb_size(PyObject *self)
{
    return FB(self)->base.core ? sw_carrier_size(FB(self)->base.core) : 0;
}

static int fb_supports(sw_dtype dtype)
{
    return dtype == SW_DT_FLOAT32 || dtype == SW_DT_INT32;
}

/* The object's view of the storage, once the core released it (closing
 * the file and deleting it when this process created it). The handle
 * stays for the path and the state until the object goes; its last
 * reference releases a file never released (carrier.h). */
static void fb_drop(PyObject *self)
{
    FB(self)->fd = -1;
}

static const sw_py_carrier_ops sw_py_file_backed_ops = {
    .name = "FileBacked", .dtype = fb_dtype, .size = fb_size, .supports = fb_supports,
    .drop = fb_drop, .grows = 1, .core_class = &sw_file_backed_class,
};

/* A FileBacked over a newly created file (`name` NULL → generated), the
 * same core carrier a C program gets from sw_file_backed_new. */
static PyObject *fb_create(const char *name, sw_dtype dtype, int mutable_)
{
    PyObject *self = sw_py_carrier_alloc(&SwFileBacked_Type, mutable_);
    if (!self)
        return NULL;
    SwFileBackedObject *f = FB(self);
    f->dtype = dtype;
    f->fd = -1;
    f->path = NULL;
    f->base.core = NULL;
    sw_error err;
    if (sw_file_backed_new(name, dtype, mutable_ ? 0 : SW_CARRIER_IMMUTABLE, &f->base.core,
                           &err) != SW_OK) {
        sw_py_raise(&err);
        Py_DECREF(self);
        return NULL;
    }
    f->fd = sw_file_backed_fd(f->base.core);
    /* The file system encoding, as os.fsdecode: a TMPDIR that is not UTF-8
     * still gives a usable path. */
    PyObject *spath = PyUnicode_DecodeFSDefault(sw_file_backed_path(f->base.core));
    f->path = spath ? PyObject_CallOneArg(path_class, spath) : NULL;
    Py_XDECREF(spath);
    if (!f->path) {
        Py_DECREF(self); /* deletes the file */
        return NULL;
    }
    return self;
}

/* Grow to `nslots` (zero fill). */
static int fb_grow(PyObject *self, int64_t nslots)
{
    sw_error err;
    if (sw_carrier_allocate(FB(self)->base.core, nslots, &err) != SW_OK)
        return sw_py_raise(&err); /* the core's words, OverflowError included */
    return 0;
}

static PyObject *fb_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"filename", "mutable", "dtype", NULL};
    PyObject *filename = Py_None, *mutable_obj = NULL, *dtype_obj = NULL;
    if (sw_py_carrier_check_exact(type, &SwFileBacked_Type) < 0)
        return NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O$OO:FileBacked", kwlist, &filename,
                                     &mutable_obj, &dtype_obj))
        return NULL;
    sw_dtype dtype;
    if (sw_py_carrier_parse_dtype(dtype_obj, SW_DT_FLOAT32, "FileBacked", fb_accepted,
                                  FB_NACCEPTED, &dtype) < 0)
        return NULL;
    const char *name = NULL;
    if (filename != Py_None) {
        if (!PyUnicode_Check(filename)) {
            PyErr_Format(PyExc_TypeError, "filename must be a str or None, not %.100s",
                         Py_TYPE(filename)->tp_name);
            return NULL;
        }
        Py_ssize_t len;
        name = PyUnicode_AsUTF8AndSize(filename, &len);
        if (!name)
            return NULL;
        sw_error err;
        if (sw_filestore_check_name(name, (size_t)len, &err) != SW_OK) {
            sw_py_raise(&err);
            return NULL;
        }
    }
    int mutable_ = sw_py_carrier_truth(mutable_obj, 1);
    if (mutable_ < 0)
        return NULL;
    return fb_create(name, dtype, mutable_);
}

static void fb_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    Py_CLEAR(FB(self)->path);
    SwCarrier_Type.tp_dealloc(self);
}

static int fb_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(FB(self)->path);
    return 0;
}

static int fb_clear(PyObject *self)
{
    Py_CLEAR(FB(self)->path);
    return 0;
}

/* An _allocate refusal the core decided (sw_carrier_check_allocate /
 * sw_carrier_allocate: err->detail) in the Python API's words; `size`:
 * the size the shrink check saw. -1. */
static int say_allocate_refusal(const sw_error *err, int64_t slots, int64_t size)
{
    switch (err->detail) {
    case SW_CARRIER_REFUSED_RELEASED:
        PyErr_SetString(PyExc_RuntimeError, "cannot allocate a released FileBacked carrier");
        return -1;
    case SW_CARRIER_REFUSED_PENDING: /* even under transfer access */
        PyErr_SetString(PyExc_RuntimeError,
                        "cannot grow a FileBacked carrier that is pending in a move; "
                        "wait() for the move first");
        return -1;
    case SW_CARRIER_REFUSED_OWNED:
        PyErr_SetString(PyExc_RuntimeError,
                        "cannot grow a FileBacked carrier owned by a composite carrier "
                        "without owner access");
        return -1;
    case SW_CARRIER_REFUSED_SHRINK:
        PyErr_Format(PyExc_ValueError,
                     "_allocate cannot shrink a FileBacked carrier from %lld to %lld slots",
                     (long long)size, (long long)slots);
        return -1;
    default:
        return sw_py_raise(err); /* the core's words, OverflowError included */
    }
}

/* C-12: grow an allocatable-empty carrier (or any live one) to `size`
 * (_allocate; a move's growth is the core's). Growing remaps the file and
 * changes the size a move checked, so the core refuses it like a write
 * (released, pending, owned) and refuses shrinking; its check gives the
 * size it saw, which a refusal's words and a growth to the same size
 * need. The growth checks again (another thread may grow it between). */
static int fb_allocate_to(PyObject *self, int64_t size)
{
    sw_carrier *core = FB(self)->base.core;
    sw_error err;
    int64_t seen;
    if (sw_carrier_check_allocate(core, size, &seen, &err) != SW_OK)
        return say_allocate_refusal(&err, size, seen);
    if (size == seen)
        return 0;
    if (sw_carrier_allocate(core, size, &err) != SW_OK)
        return say_allocate_refusal(&err, size, sw_carrier_size(core));
    return 0;
}

static PyObject *fb_allocate(PyObject *self, PyObject *size_obj)
{
    int64_t size;
    if (sw_py_carrier_parse_size(size_obj, "size", &size) < 0 ||
        fb_allocate_to(self, size) < 0)
        return NULL;
    Py_RETURN_NONE;
}


/* C-10: values are normalized in memory first so a failure creates no file. */
static PyObject *fb_new_like(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"values", "mutable", "dtype", NULL};
    PyObject *values, *mutable_obj = NULL, *dtype_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$OO:new_like", kwlist, &values,
                                     &mutable_obj, &dtype_obj))
        return NULL;
    PyObject *it = sw_py_carrier_iter(values, "values");
    if (!it)
        return NULL;
    PyObject *list = NULL, *result = NULL;
    void *buf = NULL;
    sw_dtype dtype;
    int mutable_ = sw_py_carrier_truth(mutable_obj, 1);
    if (mutable_ < 0 ||
        sw_py_carrier_parse_dtype(dtype_obj == Py_None ? NULL : dtype_obj, FB(self)->dtype,
                                  "FileBacked", fb_accepted, FB_NACCEPTED, &dtype) < 0 ||
        !(list = PySequence_Tuple(it)))
        goto done;
    int64_t n = PyTuple_GET_SIZE(list);
    buf = sw_calloc((size_t)n + 1, SLOT_BYTES);
    if (!buf) {
        PyErr_NoMemory();
        goto done;
    }
    if (sw_py_carrier_fill_slots(dtype, list, 1, buf) < 0)
        goto done;
    result = fb_create(NULL, dtype, mutable_);
    if (!result || fb_grow(result, n) < 0)
        goto fail;
    sw_error err;
    sw_status st;
    /* The file is new and private to this call, so the bulk write touches
     * no Python state and runs without the GIL. */
    Py_BEGIN_ALLOW_THREADS
    st = sw_filestore_pwrite(FB(result)->fd, buf, (size_t)n * SLOT_BYTES, 0, &err);
    Py_END_ALLOW_THREADS
    if (st != SW_OK) {
        sw_py_raise(&err);
        goto fail;
    }
    goto done;
fail:
    Py_CLEAR(result); /* deletes the file */
done:
    sw_free(buf);
    Py_XDECREF(list);
    Py_DECREF(it);
    return result;
}

/* C-11: always zero-filled (growth reads back as zeros). */
static PyObject *fb_allocate_like(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"size", "mutable", "dtype", "empty", NULL};
    PyObject *size_obj, *mutable_obj = NULL, *dtype_obj = NULL, *empty_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$OOO:allocate_like", kwlist,
                                     &size_obj, &mutable_obj, &dtype_obj, &empty_obj))
        return NULL;
    int64_t size;
    sw_dtype dtype;
    if (sw_py_carrier_parse_size(size_obj, "size", &size) < 0 ||
        sw_py_carrier_parse_dtype(dtype_obj == Py_None ? NULL : dtype_obj, FB(self)->dtype,
                                  "FileBacked", fb_accepted, FB_NACCEPTED, &dtype) < 0)
        return NULL;
    int mutable_, empty;
    if (sw_py_carrier_parse_flags(mutable_obj, empty_obj, &mutable_, &empty) < 0)
        return NULL;
    int64_t bytes;
    if (__builtin_mul_overflow(size, (int64_t)SLOT_BYTES, &bytes)) {
        PyErr_Format(PyExc_OverflowError, "%lld slots exceed the file size limit",
                     (long long)size);
        return NULL;
    }
    PyObject *result = fb_create(NULL, dtype, mutable_);
    if (result && fb_grow(result, size) < 0)
        Py_CLEAR(result);
    return result;
}

static PyObject *fb_get_path(PyObject *self, void *closure)
{
    (void)closure;
    if (!FB(self)->path) {
        PyErr_SetString(PyExc_AttributeError, "FileBacked carrier has no path");
        return NULL;
    }
    return Py_NewRef(FB(self)->path);
}

SW_CARRIER_CLOSED_INIT_SUBCLASS(fb_init_subclass, "FileBacked")

static PyMethodDef fb_methods[] = {
    {"size", sw_py_carrier_meth_size, METH_NOARGS,
     "size($self, /)\n--\n\nNumber of slots: the file length divided by 4; 0 after release()."},
    {"dtype", sw_py_carrier_meth_dtype, METH_NOARGS, "dtype($self, /)\n--\n\nThe DType its slots store."},
    {"get_value", sw_py_carrier_meth_get_value, METH_O,
     "get_value($self, index, /)\n--\n\nRead slot `index` from the file. Raises IndexError when out of range."},
    {"set_value", (PyCFunction)(void (*)(void))sw_py_carrier_meth_set_value, METH_FASTCALL,
     "set_value($self, index, value, /)\n--\n\n"
     "Write `value` into slot `index` of the file. Raises IndexError when out\n"
     "of range, RuntimeError when the carrier is not mutable."},
    {"_is_mutable", sw_py_carrier_meth_intrinsic_mutable, METH_NOARGS,
     "_is_mutable($self, /)\n--\n\nWhether the storage itself accepts writes."},
    {"_supports_storage_dtype", sw_py_carrier_meth_supports_own, METH_O,
     "_supports_storage_dtype($self, dtype, /)\n--\n\nWhether FileBacked can store `dtype`: Float32 or Int32."},
    {"_allocate", fb_allocate, METH_O,
     "_allocate($self, size, /)\n--\n\nGrow the file to `size` slots; the new slots read 0."},
    {"new_like", (PyCFunction)(void (*)(void))fb_new_like, METH_VARARGS | METH_KEYWORDS,
     "new_like($self, values, *, mutable=True, dtype=None)\n--\n\n"
     "A new FileBacked carrier (a new file) holding values; None entries are 0."},
    {"allocate_like", (PyCFunction)(void (*)(void))fb_allocate_like,
     METH_VARARGS | METH_KEYWORDS,
     "allocate_like($self, size, *, mutable=True, dtype=None, empty=False)\n--\n\n"
     "A new FileBacked carrier (a new file) of size zero-filled slots."},
    {"__init_subclass__", (PyCFunction)(void (*)(void))fb_init_subclass,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "__init_subclass__($type, /, *args, **kwargs)\n--\n\n"
     "FileBacked cannot be subclassed: defining a subclass raises TypeError."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef fb_getset[] = {
    {"path", fb_get_path, NULL, "The file's pathlib.Path (still readable after release()).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject SwFileBacked_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "strideweave.FileBacked",
    .tp_basicsize = sizeof(SwFileBackedObject),
    .tp_dealloc = fb_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "FileBacked(filename=None, *, mutable=True, dtype=DType.Float32)\n--\n\n"
              "Slots stored in a raw file, 4 bytes each, in this process's own\n"
              "temporary directory; it starts with 0 slots and grows when a move\n"
              "fills it. filename names the file (a plain name, no '/'); None picks\n"
              "a fresh name. dtype is Float32 or Int32. Raises TypeError when\n"
              "filename is not a str, ValueError for an unusable name, and\n"
              "FileExistsError when that file exists already.\n\n"
              "    move(friendly.arange(4), FileBacked())",
    .tp_traverse = fb_traverse,
    .tp_clear = fb_clear,
    .tp_methods = fb_methods,
    .tp_getset = fb_getset,
    .tp_base = &SwCarrier_Type,
    .tp_init = sw_py_carrier_builtin_init,
    .tp_new = fb_new,
};

int sw_py_file_backed_init(PyObject *module)
{
    PyObject *pathlib = PyImport_ImportModule("pathlib");
    if (!pathlib)
        return -1;
    path_class = PyObject_GetAttrString(pathlib, "Path");
    Py_DECREF(pathlib);
    if (!path_class)
        return -1;
    if (sw_py_carrier_register_builtin(&SwFileBacked_Type, &sw_py_file_backed_ops, 1) < 0 ||
        PyType_Ready(&SwFileBacked_Type) < 0)
        return -1;
    return PyModule_AddObjectRef(module, "FileBacked", (PyObject *)&SwFileBacked_Type);
}
