/* BlockDevice and BlockDeviceCarrier (contract-carriers B-1..B-11): the
 * Python objects over the core's block device (block_device.h).
 *
 * A BlockDevice object holds one reference to an sw_block_device; a
 * BlockDeviceCarrier object holds the full core carrier handle that
 * sw_block_device_allocate made (SwCarrierObject.core) and a strong
 * reference to its BlockDevice object (for `device`). Everything else is
 * the core's: allocation, slot I/O, release, flush, close and the closing
 * state, fault state, geometry, the count of carriers that refuses close
 * (B-8: one core handle per carrier object). Core calls that may block
 * (device I/O, fdatasync, waiting for a transfer on the device) are made
 * with the GIL released: the core never calls back into Python.
 *
 * B-9: arguments are parsed and values normalized (which may run Python)
 * before the core is called; the core checks the device's state again
 * under its lock. */
#include "sw_carrier.h"
#include "sw_move.h"

#include "strideweave/block_device.h"

#define SLOT_BYTES 4
#define BDEV(o) ((SwBlockDeviceObject *)(o))
#define BDC(o) ((SwBlockDeviceCarrierObject *)(o))
#define CORE(o) (((SwCarrierObject *)(o))->core)

typedef struct SwBlockDeviceObject {
    PyObject_HEAD
    sw_block_device *dev; /* one reference; never NULL once constructed */
    PyObject *path;       /* str, exactly os.fspath(path) */
    PyObject *weakreflist;
} SwBlockDeviceObject;

typedef struct SwBlockDeviceCarrierObject {
    SwCarrierObject base; /* base.core: the core carrier */
    PyObject *device;     /* the BlockDevice, kept after release */
} SwBlockDeviceCarrierObject;

static PyTypeObject SwBlockDevice_Type;
static const sw_dtype bd_accepted[] = {SW_DT_FLOAT32};

/* ---- BlockDeviceCarrier: carrier ops ------------------------------------ */

static sw_dtype bdc_dtype(PyObject *self)
{
    (void)self;
    return SW_DT_FLOAT32;
}

static int64_t bdc_size(PyObject *self)
{
    return sw_carrier_size(CORE(self));
}

static const char *bdc_unavailable(PyObject *self)
{
    return sw_block_device_carrier_unavailable(CORE(self));
}

static int bdc_supports(sw_dtype dtype)
{
    return dtype == SW_DT_FLOAT32;
}

/* The core retired the extent (B-7); the object keeps no view of it. */
static void bdc_drop(PyObject *self)
{
    (void)self;
}

static const sw_py_carrier_ops sw_py_block_device_carrier_ops = {
    .name = "BlockDeviceCarrier", .dtype = bdc_dtype, .size = bdc_size, .supports = bdc_supports,
    .drop = bdc_drop, .unavailable = bdc_unavailable, .core_io = 1,
    .core_class = &sw_block_device_carrier_class,
};

/* ---- creating carriers ------------------------------------------------------ */

/* A new carrier object of `nslots` on `device` (zeros unless `empty`, or
 * `init`): B-3 after the argument checks, all of them the core's. */
static PyObject *bdc_create(PyObject *device, int64_t nslots, int mutable_, int empty,
                            const float *init)
{
    sw_block_device *d = BDEV(device)->dev;
    int flags = (mutable_ ? 0 : SW_CARRIER_IMMUTABLE) | (empty ? SW_CARRIER_EMPTY : 0);
    sw_carrier *core = NULL;
    sw_error err;
    sw_status st;
    Py_BEGIN_ALLOW_THREADS
    st = init ? sw_block_device_allocate_values(d, init, nslots, flags, &core, &err)
              : sw_block_device_allocate(d, nslots, SW_DT_FLOAT32, flags, &core, &err);
    Py_END_ALLOW_THREADS
    if (st != SW_OK) {
        sw_py_raise(&err);
        return NULL;
    }
    PyObject *self = sw_py_carrier_alloc(&SwBlockDeviceCarrier_Type, mutable_);
    if (!self) {
        sw_carrier_unref(core);
        return NULL;
    }
    CORE(self) = core;
    BDC(self)->device = Py_NewRef(device);
    return self;
}

/* `mutable` / `empty`: exactly a bool (B-3, B-7). */
static int parse_flag(PyObject *obj, const char *name, int dflt)
{
    if (!obj)
        return dflt;
    if (!PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be True or False, not %.100s", name,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    return obj == Py_True;
}

static int parse_float32(PyObject *dtype_obj)
{
    sw_dtype dtype;
    return sw_py_carrier_parse_dtype(dtype_obj, SW_DT_FLOAT32, "BlockDeviceCarrier",
                                     bd_accepted, 1, &dtype);
}

/* allocate(size, *, mutable, dtype, empty) after its own argument parsing:
 * the checks of B-3 in order. */
static PyObject *allocate_checked(PyObject *device, PyObject *size_obj,
                                  PyObject *mutable_obj, PyObject *dtype_obj,
                                  PyObject *empty_obj)
{
    int64_t size, bytes;
    if (sw_py_carrier_parse_size(size_obj, "size", &size) < 0)
        return NULL;
    if (__builtin_mul_overflow(size, (int64_t)SLOT_BYTES, &bytes)) {
        PyErr_Format(PyExc_OverflowError, "%lld slots do not fit in a block device's "
                     "byte range", (long long)size);
        return NULL;
    }
    int mutable_ = parse_flag(mutable_obj, "mutable", 1);
    int empty = mutable_ < 0 ? -1 : parse_flag(empty_obj, "empty", 0);
    if (empty < 0 || parse_float32(dtype_obj) < 0)
        return NULL;
    return bdc_create(device, size, mutable_, empty, NULL);
}

/* ---- BlockDeviceCarrier: the Python surface --------------------------------- */

static PyObject *bdc_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    (void)args;
    (void)kwds;
    if (sw_py_carrier_check_exact(type, &SwBlockDeviceCarrier_Type) < 0)
        return NULL;
    PyErr_SetString(PyExc_TypeError,
                    "BlockDeviceCarrier cannot be constructed directly; use "
                    "BlockDevice(path).allocate(size)");
    return NULL;
}

/* The core carrier goes with the GIL released: dropping the last carrier
 * of a closing device flushes and closes it, and retiring the extent of
 * an unreleased carrier waits for a transfer on its pages (B-7, B-8). */
static void bdc_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    sw_carrier *core = CORE(self);
    CORE(self) = NULL;
    if (core) {
        Py_BEGIN_ALLOW_THREADS
        sw_carrier_unref(core);
        Py_END_ALLOW_THREADS
    }
    Py_CLEAR(BDC(self)->device);
    SwCarrier_Type.tp_dealloc(self);
}

/* The device holds no references back, so it is never part of a cycle
 * through a carrier; it is visited but kept until deallocation (`device`
 * answers after release too). */
static int bdc_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(BDC(self)->device);
    return 0;
}

static PyObject *bdc_new_like(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"values", "mutable", "dtype", NULL};
    PyObject *values, *mutable_obj = NULL, *dtype_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$OO:new_like", kwlist, &values,
                                     &mutable_obj, &dtype_obj))
        return NULL;
    PyObject *it = sw_py_carrier_iter(values, "values");
    if (!it)
        return NULL;
    PyObject *tuple = NULL, *result = NULL;
    float *buf = NULL;
    int mutable_ = parse_flag(mutable_obj, "mutable", 1);
    if (mutable_ < 0 || parse_float32(dtype_obj == Py_None ? NULL : dtype_obj) < 0 ||
        !(tuple = PySequence_Tuple(it)))
        goto done;
    Py_ssize_t n = PyTuple_GET_SIZE(tuple);
    buf = sw_calloc((size_t)n + 1, SLOT_BYTES);
    if (!buf) {
        PyErr_NoMemory();
        goto done;
    }
    /* Every value is normalized before the device is touched (B-9). */
    if (sw_py_carrier_fill_slots(SW_DT_FLOAT32, tuple, 1, buf) == 0)
        result = bdc_create(BDC(self)->device, n, mutable_, 0, buf);
done:
    sw_free(buf);
    Py_XDECREF(tuple);
    Py_DECREF(it);
    return result;
}

static PyObject *bdc_allocate_like(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"size", "mutable", "dtype", "empty", NULL};
    PyObject *size_obj, *mutable_obj = NULL, *dtype_obj = NULL, *empty_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$OOO:allocate_like", kwlist,
                                     &size_obj, &mutable_obj, &dtype_obj, &empty_obj))
        return NULL;
    return allocate_checked(BDC(self)->device, size_obj, mutable_obj,
                            dtype_obj == Py_None ? NULL : dtype_obj, empty_obj);
}

static PyObject *bdc_get_device(PyObject *self, void *closure)
{
    (void)closure;
    return Py_NewRef(BDC(self)->device);
}

static PyObject *bdc_get_offset(PyObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromLongLong(sw_block_device_carrier_offset_bytes(CORE(self)));
}

static PyObject *bdc_get_extent(PyObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromLongLong(sw_block_device_carrier_extent_bytes(CORE(self)));
}

SW_CARRIER_CLOSED_INIT_SUBCLASS(bdc_init_subclass, "BlockDeviceCarrier")

static PyMethodDef bdc_methods[] = {
    {"size", sw_py_carrier_meth_size, METH_NOARGS,
     "size($self, /)\n--\n\nNumber of Float32 slots; 0 after release."},
    {"dtype", sw_py_carrier_meth_dtype, METH_NOARGS, "dtype($self, /)\n--\n\nStorage DType (Float32)."},
    {"get_value", sw_py_carrier_meth_get_value, METH_O,
     "get_value($self, index, /)\n--\n\n"
     "Read slot `index` from the device. Raises IndexError for an index out of\n"
     "range, RuntimeError for a released carrier or a faulted device, OSError\n"
     "when the device read fails."},
    {"set_value", (PyCFunction)(void (*)(void))sw_py_carrier_meth_set_value, METH_FASTCALL,
     "set_value($self, index, value, /)\n--\n\n"
     "Write `value` (a real number) into slot `index` on the device. Raises\n"
     "IndexError for an index out of range, TypeError for a value that is not a\n"
     "real number, RuntimeError for a released or immutable carrier or a\n"
     "faulted device, OSError when the device write fails."},
    {"_is_mutable", sw_py_carrier_meth_intrinsic_mutable, METH_NOARGS,
     "_is_mutable($self, /)\n--\n\nWhether the carrier was allocated mutable."},
    {"_supports_storage_dtype", sw_py_carrier_meth_supports_own, METH_O,
     "_supports_storage_dtype($self, dtype, /)\n--\n\n"
     "Whether `dtype` can be stored: True only for Float32."},
    {"new_like", (PyCFunction)(void (*)(void))bdc_new_like, METH_VARARGS | METH_KEYWORDS,
     "new_like($self, values, *, mutable=True, dtype=None)\n--\n\n"
     "A new BlockDeviceCarrier on the same device holding values (None entries\n"
     "are 0.0). Works on a released carrier. Raises RuntimeError when the device\n"
     "is closed or faulted and MemoryError when no free range fits."},
    {"allocate_like", (PyCFunction)(void (*)(void))bdc_allocate_like,
     METH_VARARGS | METH_KEYWORDS,
     "allocate_like($self, size, *, mutable=True, dtype=None, empty=False)\n--\n\n"
     "A new BlockDeviceCarrier of size slots on the same device, zero-written\n"
     "unless empty is True. Works on a released carrier."},
    {"__init_subclass__", (PyCFunction)(void (*)(void))bdc_init_subclass,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "__init_subclass__($type, /, *args, **kwargs)\n--\n\n"
     "BlockDeviceCarrier cannot be subclassed: defining a subclass raises TypeError."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef bdc_getset[] = {
    {"device", bdc_get_device, NULL, "The BlockDevice holding the slots (kept after release).",
     NULL},
    {"device_offset_bytes", bdc_get_offset, NULL,
     "Byte offset of slot 0 on the device; 0 for size 0 and after release.", NULL},
    {"extent_bytes", bdc_get_extent, NULL,
     "Bytes reserved on the device (a multiple of its allocation alignment); 0 for\n"
     "size 0 and after release.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject SwBlockDeviceCarrier_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "strideweave.BlockDeviceCarrier",
    .tp_basicsize = sizeof(SwBlockDeviceCarrierObject),
    .tp_dealloc = bdc_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Float32 slots in one aligned extent of a block device; slot i is at byte\n"
              "device_offset_bytes + 4*i in native order. Made by BlockDevice.allocate,\n"
              "never constructed directly (calling BlockDeviceCarrier raises TypeError).\n"
              "Moves only to and from CPU carriers (move() uses\n"
              "CpuToBlockDeviceMoveOperation and BlockDeviceToCpuMoveOperation); a\n"
              "move into it is durable on the device when it completes, slot writes\n"
              "are buffered until BlockDevice.flush() or close().",
    .tp_traverse = bdc_traverse,
    .tp_methods = bdc_methods,
    .tp_getset = bdc_getset,
    .tp_base = &SwCarrier_Type,
    .tp_init = sw_py_carrier_builtin_init,
    .tp_new = bdc_new,
};

/* ---- BlockDevice ---------------------------------------------------------- */

/* B-2: os.fspath(path) must give a str; bytes and anything else fail
 * TypeError, __fspath__ errors propagate. New reference. */
static PyObject *fspath_str(PyObject *path)
{
    PyObject *p = PyOS_FSPath(path);
    if (!p)
        return NULL;
    if (!PyUnicode_Check(p)) {
        PyErr_Format(PyExc_TypeError, "path must be a str or an os.PathLike giving a str, "
                     "not %.100s", Py_TYPE(p)->tp_name);
        Py_DECREF(p);
        return NULL;
    }
    return p;
}

static PyObject *bdev_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"path", NULL};
    PyObject *path_obj;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O:BlockDevice", kwlist, &path_obj))
        return NULL;
    PyObject *path = fspath_str(path_obj); /* may run __fspath__: first */
    if (!path)
        return NULL;
#ifndef __linux__
    Py_DECREF(path);
    PyErr_SetString(PyExc_NotImplementedError, "BlockDevice is supported on Linux only");
    return NULL;
#endif
    PyObject *encoded = PyUnicode_EncodeFSDefault(path);
    PyObject *self = NULL;
    if (!encoded)
        goto done;
    const char *cpath = PyBytes_AS_STRING(encoded);
    if ((Py_ssize_t)strlen(cpath) != PyBytes_GET_SIZE(encoded)) {
        PyErr_SetString(PyExc_ValueError, "path must not contain a NUL character");
        goto done;
    }
    sw_block_device *dev = NULL;
    sw_error err;
    sw_status st;
    Py_BEGIN_ALLOW_THREADS
    st = sw_block_device_open(cpath, &dev, &err);
    Py_END_ALLOW_THREADS
    if (st != SW_OK) {
        sw_py_raise(&err);
        goto done;
    }
    self = type->tp_alloc(type, 0);
    if (!self) {
        sw_block_device_unref(dev);
        goto done;
    }
    BDEV(self)->dev = dev;
    BDEV(self)->path = Py_NewRef(path);
done:
    Py_XDECREF(encoded);
    Py_DECREF(path);
    return self;
}

/* Dropped without close(): the core flushes when the last reference goes
 * (B-11), with nobody to tell; the carriers hold references of their own. */
static void bdev_dealloc(PyObject *self)
{
    if (BDEV(self)->weakreflist)
        PyObject_ClearWeakRefs(self);
    sw_block_device *d = BDEV(self)->dev;
    BDEV(self)->dev = NULL;
    if (d) {
        Py_BEGIN_ALLOW_THREADS
        sw_block_device_unref(d);
        Py_END_ALLOW_THREADS
    }
    Py_CLEAR(BDEV(self)->path);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *bdev_allocate(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"size", "mutable", "dtype", "empty", NULL};
    PyObject *size_obj, *mutable_obj = NULL, *dtype_obj = NULL, *empty_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$OOO:allocate", kwlist, &size_obj,
                                     &mutable_obj, &dtype_obj, &empty_obj))
        return NULL;
    return allocate_checked(self, size_obj, mutable_obj, dtype_obj, empty_obj);
}

/* B-8: refused while a carrier object of the device is alive; B-11: the
 * buffered writes are flushed first (a failing flush faults the device,
 * raises OSError and leaves it open; closing it again then succeeds). */
static PyObject *bdev_close(PyObject *self, PyObject *unused)
{
    (void)unused;
    sw_block_device *d = BDEV(self)->dev;
    sw_error err;
    sw_status st;
    Py_BEGIN_ALLOW_THREADS
    st = sw_block_device_close(d, &err);
    Py_END_ALLOW_THREADS
    if (st != SW_OK) {
        sw_py_raise(&err);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *bdev_enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    return Py_NewRef(self);
}

/* B-8: never fails because carrier objects are alive (the device then
 * closes with the last of them) and never replaces the exception leaving
 * the block; a failing flush is reported only when nothing else is. */
static PyObject *bdev_exit(PyObject *self, PyObject *args)
{
    int propagating = PyTuple_Check(args) && PyTuple_GET_SIZE(args) > 0 &&
                      PyTuple_GET_ITEM(args, 0) != Py_None;
    sw_block_device *d = BDEV(self)->dev;
    sw_error err;
    sw_status st;
    Py_BEGIN_ALLOW_THREADS
    st = sw_block_device_close_when_unused(d, propagating, &err);
    Py_END_ALLOW_THREADS
    if (st != SW_OK && !propagating) {
        sw_py_raise(&err);
        return NULL;
    }
    Py_RETURN_FALSE;
}

/* B-11: make buffered slot writes durable. */
static PyObject *bdev_flush(PyObject *self, PyObject *unused)
{
    (void)unused;
    sw_block_device *d = BDEV(self)->dev;
    sw_error err;
    sw_status st;
    Py_BEGIN_ALLOW_THREADS
    st = sw_block_device_flush(d, &err);
    Py_END_ALLOW_THREADS
    if (st != SW_OK) {
        sw_py_raise(&err);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *bdev_is_closed(PyObject *self, PyObject *unused)
{
    (void)unused;
    return PyBool_FromLong(sw_block_device_is_closed(BDEV(self)->dev));
}

static PyObject *bdev_is_faulted(PyObject *self, PyObject *unused)
{
    (void)unused;
    return PyBool_FromLong(sw_block_device_is_faulted(BDEV(self)->dev));
}

static PyObject *bdev_get_path(PyObject *self, void *closure)
{
    (void)closure;
    return Py_NewRef(BDEV(self)->path);
}

static PyObject *bdev_get_int(PyObject *self, void *closure)
{
    sw_block_device *d = BDEV(self)->dev;
    switch ((int)(intptr_t)closure) {
    case 0: return PyLong_FromLongLong(sw_block_device_capacity_bytes(d));
    case 1: return PyLong_FromLongLong(sw_block_device_logical_block_size(d));
    case 2: return PyLong_FromLongLong(sw_block_device_physical_block_size(d));
    default: return PyLong_FromLongLong(sw_block_device_allocation_alignment(d));
    }
}

static PyObject *bdev_repr(PyObject *self)
{
    return PyUnicode_FromFormat("BlockDevice(%R)%s", BDEV(self)->path,
                                sw_block_device_is_closed(BDEV(self)->dev) ? " (closed)" : "");
}

static PyMethodDef bdev_methods[] = {
    {"allocate", (PyCFunction)(void (*)(void))bdev_allocate, METH_VARARGS | METH_KEYWORDS,
     "allocate($self, size, *, mutable=True, dtype=..., empty=False)\n--\n\n"
     "Reserve a BlockDeviceCarrier of size Float32 slots (dtype defaults to\n"
     "DType.Float32, the only one supported) at the lowest free\n"
     "offset (start and length multiples of allocation_alignment) and write\n"
     "zeros over it unless empty is True. Raises TypeError / ValueError /\n"
     "OverflowError for a bad size, TypeError when mutable or empty is not a\n"
     "bool, ValueError for a dtype other than Float32, RuntimeError when the\n"
     "device is closed or faulted, and MemoryError when no free range fits."},
    {"close", bdev_close, METH_NOARGS,
     "close($self, /)\n--\n\n"
     "Flush and close the device (again: nothing happens). Raises RuntimeError\n"
     "while any BlockDeviceCarrier object from it is alive, released or not,\n"
     "and OSError when the flush fails (the device is then faulted and stays\n"
     "open; calling close() again closes it)."},
    {"is_closed", bdev_is_closed, METH_NOARGS, "is_closed($self, /)\n--\n\nWhether close() succeeded."},
    {"is_faulted", bdev_is_faulted, METH_NOARGS,
     "is_faulted($self, /)\n--\n\n"
     "Whether an I/O error made the device untrustworthy: its carriers then\n"
     "refuse reads, writes, moves and new allocations."},
    {"flush", bdev_flush, METH_NOARGS,
     "flush($self, /)\n--\n\n"
     "Make every slot write so far durable on the device (slot writes are\n"
     "buffered; moves into the device are durable when they complete). Raises\n"
     "OSError, and marks the device faulted, when the data could not be written\n"
     "back; RuntimeError when the device is already faulted. Does nothing on a\n"
     "closed device."},
    {"__enter__", bdev_enter, METH_NOARGS, "__enter__($self, /)\n--\n\nReturns the device."},
    {"__exit__", bdev_exit, METH_VARARGS,
     "__exit__($self, /, *exc_info)\n--\n\n"
     "Close the device, or, while BlockDeviceCarrier objects from it are alive,\n"
     "mark it closing: allocate then raises RuntimeError and the device closes\n"
     "when the last of them goes. Never raises because of them and never\n"
     "replaces an exception leaving the with block; a failing flush raises\n"
     "OSError only when no exception is leaving it."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef bdev_getset[] = {
    {"path", bdev_get_path, NULL, "The path given, as os.fspath returned it.", NULL},
    {"capacity_bytes", bdev_get_int, NULL, "Size of the device in bytes.", (void *)0},
    {"logical_block_size", bdev_get_int, NULL, "Logical block size in bytes.", (void *)1},
    {"physical_block_size", bdev_get_int, NULL, "Physical block size in bytes.", (void *)2},
    {"allocation_alignment", bdev_get_int, NULL,
     "max(logical_block_size, physical_block_size): extents start and end on it.",
     (void *)3},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject SwBlockDevice_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "strideweave.BlockDevice",
    .tp_basicsize = sizeof(SwBlockDeviceObject),
    .tp_dealloc = bdev_dealloc,
    .tp_repr = bdev_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "BlockDevice(path)\n--\n\n"
              "Open a block-special node (Linux) read-write to store carriers on it.\n"
              "path is a str or an os.PathLike giving a str. Raises TypeError for any\n"
              "other path, OSError when the node cannot be opened read-write,\n"
              "ValueError when it is not a block device (a regular file, a directory,\n"
              "a character device such as /dev/null, a FIFO) or its sizes are\n"
              "inconsistent; the type is checked before the node is opened.\n"
              "Moves into its carriers are durable when they complete; slot writes are\n"
              "buffered until flush() or close(). Use it as a context manager to close\n"
              "it at the end of a block (or, while carriers from it are alive, when\n"
              "the last of them goes).",
    .tp_weaklistoffset = offsetof(SwBlockDeviceObject, weakreflist),
    .tp_methods = bdev_methods,
    .tp_getset = bdev_getset,
    .tp_new = bdev_new,
};

/* ---- movement glue (sw_move.h) -------------------------------------------- */

/* B-10: with a BlockDeviceCarrier on either side, only the two block
 * operations on their exact pairs may run; then a faulted device refuses
 * (B-6). */
int sw_py_block_device_check_route(PyTypeObject *op_type, int direction, PyObject *src,
                                   PyObject *dst)
{
    int src_bd = Py_TYPE(src) == &SwBlockDeviceCarrier_Type;
    int dst_bd = Py_TYPE(dst) == &SwBlockDeviceCarrier_Type;
    if (!src_bd && !dst_bd)
        return 0;
    int ok = (direction == 1 && Py_TYPE(src) == &SwCPU_Type && dst_bd) ||
             (direction == -1 && src_bd && Py_TYPE(dst) == &SwCPU_Type);
    if (!ok) {
        PyErr_Format(PyExc_NotImplementedError,
                     "%s cannot move from %s to %s: BlockDeviceCarrier moves only to and "
                     "from a CPU carrier, with move() (which uses "
                     "CpuToBlockDeviceMoveOperation and BlockDeviceToCpuMoveOperation)",
                     _PyType_Name(op_type), _PyType_Name(Py_TYPE(src)),
                     _PyType_Name(Py_TYPE(dst)));
        return -1;
    }
    /* B-6, the core's refusal in its words: here, before the route's
     * other checks run Python code (pins, the destination's size hook). */
    sw_error err;
    return sw_block_device_carrier_check_movable(CORE(src_bd ? src : dst), &err) == SW_OK
               ? 0
               : sw_py_raise(&err);
}

int sw_py_block_device_init(PyObject *module)
{
    if (sw_py_carrier_register_builtin(&SwBlockDeviceCarrier_Type, &sw_py_block_device_carrier_ops, 1) < 0)
        return -1;
    if (PyType_Ready(&SwBlockDevice_Type) < 0 || PyType_Ready(&SwBlockDeviceCarrier_Type) < 0)
        return -1;
    if (PyModule_AddObjectRef(module, "BlockDevice", (PyObject *)&SwBlockDevice_Type) < 0)
        return -1;
    return PyModule_AddObjectRef(module, "BlockDeviceCarrier",
                                 (PyObject *)&SwBlockDeviceCarrier_Type);
}
