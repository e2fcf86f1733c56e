/* BlockDevice and BlockDeviceCarrier (contract-carriers B-1..B-11).
 *
 * BlockDevice is a resource object over one open Linux block-special node
 * (src/core/blockdev.c); BlockDeviceCarrier is a closed, Float32-only
 * carrier whose slots are one aligned extent of a device. Every carrier
 * object holds a strong reference to its device and is counted on it, so
 * close() can refuse while any carrier object is alive (B-8); a with block
 * that ends while some are alive marks the device closing instead, and the
 * last carrier object to go closes it. Moves into a device are durable when
 * they complete (the core transfer fdatasyncs); slot writes are buffered
 * until flush(), close() or a tile copy's commit (B-11).
 *
 * B-9: one mutex per device (in the core struct) serializes allocation,
 * release, factories and slot I/O, and the start and end of move transfers:
 * transfers run without it, each on its own byte range (so transfers on
 * disjoint extents overlap); slot I/O and release wait for a transfer on
 * their range to end. Arguments are parsed and
 * values normalized (which may run Python) before the lock is taken; the
 * device's state is checked again under it. The lock is taken with the GIL
 * released when it is contended, since a pool thread may hold it for a
 * long transfer. */
#include "sw_carrier.h"
#include "sw_move.h"

#include "strideweave/blockdev.h"

#define SLOT_BYTES 4
#define BDEV(o) ((SwBlockDeviceObject *)(o))
#define BDC(o) ((SwBlockDeviceCarrierObject *)(o))
/* Slot I/O and zero-writes this big release the GIL. */
#define GIL_FREE_BYTES ((int64_t)64 << 10)

typedef struct SwBlockDeviceObject {
    PyObject_HEAD
    sw_blockdev *dev;     /* owned; never NULL once constructed */
    PyObject *path;       /* str, exactly os.fspath(path) */
    Py_ssize_t carriers;  /* carrier objects (live or released) alive */
    int closed;
    int closing;          /* __exit__ with carriers alive: closes with the last */
    PyObject *weakreflist;
} SwBlockDeviceObject;

typedef struct SwBlockDeviceCarrierObject {
    SwCarrierObject base;
    PyObject *device;     /* the BlockDevice, kept after release */
    int64_t offset_bytes; /* extent start; 0 when none */
    int64_t extent_bytes; /* 0 for size 0 and after release */
    int64_t nslots;
} SwBlockDeviceCarrierObject;

static PyTypeObject SwBlockDevice_Type;
static const sw_dtype bd_accepted[] = {SW_DT_FLOAT32};

static void dev_lock(sw_blockdev *d)
{
    if (pthread_mutex_trylock(&d->lock) == 0)
        return;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&d->lock);
    Py_END_ALLOW_THREADS
}

static void dev_unlock(sw_blockdev *d)
{
    pthread_mutex_unlock(&d->lock);
}

/* Under the lock: wait (the GIL released) for a transfer in flight to end.
 * The lock is released meanwhile, so the caller reads its carrier's state
 * again afterwards. */
static void dev_wait(sw_blockdev *d)
{
    Py_BEGIN_ALLOW_THREADS
    sw_blockdev_wait_locked(d);
    Py_END_ALLOW_THREADS
}

/* B-3 / B-6 / B-8: RuntimeError for a closed or faulted device. */
static int refuse_state(PyObject *device, const char *action, int allocating)
{
    SwBlockDeviceObject *b = BDEV(device);
    if (b->closed) {
        PyErr_Format(PyExc_RuntimeError, "cannot %s: the block device %U is closed",
                     action, b->path);
        return -1;
    }
    if (b->closing && allocating) {
        PyErr_Format(PyExc_RuntimeError,
                     "cannot %s: the block device %U is closing (its with block ended); "
                     "it closes when its last BlockDeviceCarrier object goes", action,
                     b->path);
        return -1;
    }
    if (sw_blockdev_is_faulted(b->dev)) {
        PyErr_Format(PyExc_RuntimeError,
                     "cannot %s: the block device %U is faulted by an earlier I/O error, "
                     "so its data can no longer be trusted", action, b->path);
        return -1;
    }
    return 0;
}

/* ---- BlockDeviceCarrier: carrier ops ------------------------------------ */

static sw_dtype bdc_dtype(PyObject *self)
{
    (void)self;
    return SW_DT_FLOAT32;
}

static int64_t bdc_size(PyObject *self)
{
    return BDC(self)->nslots;
}

static const char *bdc_unavailable(PyObject *self)
{
    if (sw_blockdev_is_faulted(BDEV(BDC(self)->device)->dev))
        return "the block device of this BlockDeviceCarrier is faulted by an earlier I/O "
               "error, so its data can no longer be trusted";
    return NULL;
}

/* One slot under the device lock; the state is checked again there. B-9:
 * waiting for a contended lock releases the GIL, so another thread may
 * release this carrier meanwhile (bdc_drop zeroes the extent under the
 * same lock): the extent and the index are read only once the lock is
 * held, and a carrier released meanwhile fails instead of touching a
 * range that may already belong to another carrier. */
static int slot_io(PyObject *self, int64_t index, void *slot, int writing)
{
    SwBlockDeviceCarrierObject *c = BDC(self);
    sw_blockdev *d = BDEV(c->device)->dev;
    sw_error err;
    sw_status st;
    int refused = 1; /* a preflight refusal: no transfer started (B-5) */
    dev_lock(d);
    int64_t offset = c->offset_bytes + index * SLOT_BYTES;
    while (!sw_blockdev_is_faulted(d) && index < c->nslots &&
           sw_blockdev_busy_locked(d, offset, SLOT_BYTES)) {
        dev_wait(d);
        offset = c->offset_bytes + index * SLOT_BYTES;
    }
    if (sw_blockdev_is_faulted(d)) {
        st = sw_error_set(&err, SW_ESTATE, "%s", bdc_unavailable(self));
    } else if (index >= c->nslots) {
        st = sw_error_set(&err, SW_ESTATE,
                          "this BlockDeviceCarrier was released by another thread: its "
                          "storage is gone");
    } else {
        refused = 0;
        st = writing ? sw_blockdev_write_locked(d, slot, SLOT_BYTES, offset, &err)
                     : sw_blockdev_read_locked(d, slot, SLOT_BYTES, offset, &err);
    }
    dev_unlock(d);
    if (st == SW_OK)
        return 0;
    sw_py_raise(&err);
    return refused ? -2 : -1;
}

static PyObject *bdc_load(PyObject *self, int64_t index)
{
    float v;
    if (slot_io(self, index, &v, 0) != 0)
        return NULL;
    return sw_py_load_slot(SW_DT_FLOAT32, &v);
}

/* B-5: the version counts the write from its start, so a write that fails
 * part way still counts (the framework adds the +1 of a successful one). */
static int bdc_store(PyObject *self, int64_t index, const void *slot)
{
    float v;
    memcpy(&v, slot, SLOT_BYTES);
    int rc = slot_io(self, index, &v, 1);
    if (rc == 0)
        return 0;
    if (rc == -1 && !sw_py_carrier_in_transfer(self))
        sw_py_state_bump_version(self);
    return -1;
}

static int bdc_supports(sw_dtype dtype)
{
    return dtype == SW_DT_FLOAT32;
}

/* B-7: retire the extent once (waiting for device work in flight). */
static void bdc_drop(PyObject *self)
{
    SwBlockDeviceCarrierObject *c = BDC(self);
    if (!c->device)
        return;
    /* B-9: the extent is read and zeroed under the lock. Waiting for it
     * releases the GIL, so a second release or a slot access of this
     * carrier may run meanwhile; they must see either the whole extent or
     * none, never free or touch a range twice. */
    sw_blockdev *d = BDEV(c->device)->dev;
    dev_lock(d);
    /* B-7: a transfer still on the extent ends first. */
    while (c->extent_bytes > 0 && sw_blockdev_busy_locked(d, c->offset_bytes, c->extent_bytes))
        dev_wait(d);
    if (c->extent_bytes > 0)
        sw_blockdev_free_locked(d, c->offset_bytes);
    c->offset_bytes = 0;
    c->extent_bytes = 0;
    c->nslots = 0;
    dev_unlock(d);
}

const sw_carrier_ops sw_block_device_carrier_ops = {
    "BlockDeviceCarrier", bdc_dtype, bdc_size, bdc_load, bdc_store, bdc_supports,
    bdc_drop, bdc_unavailable, NULL,
};

/* ---- creating carriers ------------------------------------------------------ */

/* Reserve the extent and fill it (zeros, `init`, or nothing), under the
 * lock. The GIL is released for big fills: nothing Python is touched. */
static sw_status fill_extent(sw_blockdev *d, int64_t bytes, int zero, const void *init,
                             int64_t *start, int64_t *length, sw_error *err)
{
    sw_status st = sw_blockdev_alloc_locked(d, bytes, zero && !init, start, length, err);
    if (st == SW_OK && init && bytes > 0) {
        st = sw_blockdev_write_locked(d, init, (size_t)bytes, *start, err);
        if (st != SW_OK)
            sw_blockdev_free_locked(d, *start);
    }
    return st;
}

/* A new carrier of `nslots` on `device`: B-3 after the argument checks. */
static PyObject *bdc_create(PyObject *device, int64_t nslots, int mutable_, int zero,
                            const float *init)
{
    int64_t bytes, rounded;
    if (__builtin_mul_overflow(nslots, (int64_t)SLOT_BYTES, &bytes) ||
        !sw_extent_round_up(bytes, BDEV(device)->dev->alignment, &rounded)) {
        PyErr_Format(PyExc_OverflowError, "%lld slots do not fit in a block device's "
                     "byte range", (long long)nslots);
        return NULL;
    }
    if (refuse_state(device, "allocate on it", 1) < 0)
        return NULL;
    PyObject *self = sw_carrier_alloc(&SwBlockDeviceCarrier_Type, mutable_);
    if (!self)
        return NULL;
    SwBlockDeviceCarrierObject *c = BDC(self);
    c->device = Py_NewRef(device);
    BDEV(device)->carriers++;
    c->offset_bytes = c->extent_bytes = c->nslots = 0;
    sw_blockdev *d = BDEV(device)->dev;
    sw_error err;
    sw_status st;
    int64_t start = 0, length = 0;
    dev_lock(d);
    if (BDEV(device)->closed || BDEV(device)->closing || sw_blockdev_is_faulted(d)) {
        dev_unlock(d);
        refuse_state(device, "allocate on it", 1);
        Py_DECREF(self);
        return NULL;
    }
    if (bytes >= GIL_FREE_BYTES && (zero || init)) {
        Py_BEGIN_ALLOW_THREADS
        st = fill_extent(d, bytes, zero, init, &start, &length, &err);
        Py_END_ALLOW_THREADS
    } else {
        st = fill_extent(d, bytes, zero, init, &start, &length, &err);
    }
    dev_unlock(d);
    if (st != SW_OK) {
        sw_py_raise(&err);
        Py_DECREF(self);
        return NULL;
    }
    c->offset_bytes = start;
    c->extent_bytes = length;
    c->nslots = nslots;
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
    return sw_carrier_parse_dtype(dtype_obj, SW_DT_FLOAT32, "BlockDeviceCarrier",
                                  bd_accepted, 1, &dtype);
}

/* allocate(size, *, mutable, dtype, empty) after its own argument parsing:
 * the checks of B-3 in order. */
static PyObject *allocate_checked(PyObject *device, PyObject *size_obj,
                                  PyObject *mutable_obj, PyObject *dtype_obj,
                                  PyObject *empty_obj)
{
    int64_t size, bytes;
    if (sw_carrier_parse_size(size_obj, "size", &size) < 0)
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
    return bdc_create(device, size, mutable_, !empty, NULL);
}

/* ---- BlockDeviceCarrier: the Python surface --------------------------------- */

static PyObject *bdc_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    (void)args;
    (void)kwds;
    if (sw_carrier_check_exact(type, &SwBlockDeviceCarrier_Type) < 0)
        return NULL;
    PyErr_SetString(PyExc_TypeError,
                    "BlockDeviceCarrier cannot be constructed directly; use "
                    "BlockDevice(path).allocate(size)");
    return NULL;
}

/* Flush and close under the lock (B-8, B-11); the caller checked that no
 * carrier object is alive. A failing flush faults the device and keeps it
 * open (a second close then closes it) unless `even_on_error`. */
static int close_locked(PyObject *device, int even_on_error, sw_error *err)
{
    SwBlockDeviceObject *b = BDEV(device);
    sw_status st = SW_OK;
    if (!sw_blockdev_is_faulted(b->dev)) {
        Py_BEGIN_ALLOW_THREADS
        st = sw_blockdev_flush_locked(b->dev, err);
        Py_END_ALLOW_THREADS
    }
    if (st != SW_OK && !even_on_error)
        return -1;
    sw_blockdev_close(b->dev);
    b->closed = 1;
    b->closing = 0;
    return st == SW_OK ? 0 : -1;
}

/* The last carrier object of a closing device went: close it now. Nobody
 * is there to hear about a failing flush; it leaves the device faulted. */
static void finish_closing(PyObject *device)
{
    sw_blockdev *d = BDEV(device)->dev;
    sw_error err;
    dev_lock(d);
    if (!BDEV(device)->closed && BDEV(device)->carriers == 0)
        (void)close_locked(device, 1, &err);
    dev_unlock(d);
}

static void bdc_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    SwBlockDeviceCarrierObject *c = BDC(self);
    if (c->device) {
        bdc_drop(self);
        if (--BDEV(c->device)->carriers == 0 && BDEV(c->device)->closing)
            finish_closing(c->device);
        Py_CLEAR(c->device);
    }
    SwCarrier_Type.tp_dealloc(self);
}

/* The device holds no references back, so it is never part of a cycle
 * through a carrier; it is visited but kept until deallocation, which
 * needs it to retire the extent. */
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
    PyObject *it = sw_carrier_iter(values, "values");
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
    if (sw_carrier_fill_slots(SW_DT_FLOAT32, tuple, 1, buf) == 0)
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
    return PyLong_FromLongLong(BDC(self)->offset_bytes);
}

static PyObject *bdc_get_extent(PyObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromLongLong(BDC(self)->extent_bytes);
}

SW_CARRIER_CLOSED_INIT_SUBCLASS(bdc_init_subclass, "BlockDeviceCarrier")

static PyMethodDef bdc_methods[] = {
    {"size", sw_carrier_meth_size, METH_NOARGS,
     "size($self, /)\n--\n\nNumber of Float32 slots; 0 after release."},
    {"dtype", sw_carrier_meth_dtype, METH_NOARGS, "dtype($self, /)\n--\n\nStorage DType (Float32)."},
    {"get_value", sw_carrier_meth_get_value, METH_O,
     "get_value($self, index, /)\n--\n\n"
     "Read slot `index` from the device. Raises IndexError for an index out of\n"
     "range, RuntimeError for a released carrier or a faulted device, OSError\n"
     "when the device read fails."},
    {"set_value", (PyCFunction)(void (*)(void))sw_carrier_meth_set_value, METH_FASTCALL,
     "set_value($self, index, value, /)\n--\n\n"
     "Write `value` (a real number) into slot `index` on the device. Raises\n"
     "IndexError for an index out of range, TypeError for a value that is not a\n"
     "real number, RuntimeError for a released or immutable carrier or a\n"
     "faulted device, OSError when the device write fails."},
    {"_is_mutable", sw_carrier_meth_intrinsic_mutable, METH_NOARGS,
     "_is_mutable($self, /)\n--\n\nWhether the carrier was allocated mutable."},
    {"_supports_storage_dtype", sw_carrier_meth_supports_own, METH_O,
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
    .tp_init = sw_carrier_builtin_init,
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
    sw_blockdev *dev = NULL;
    sw_error err;
    sw_status st;
    Py_BEGIN_ALLOW_THREADS
    st = sw_blockdev_open(cpath, &dev, &err);
    Py_END_ALLOW_THREADS
    if (st != SW_OK) {
        sw_py_raise(&err);
        goto done;
    }
    self = type->tp_alloc(type, 0);
    if (!self) {
        sw_blockdev_free(dev);
        goto done;
    }
    BDEV(self)->dev = dev;
    BDEV(self)->path = Py_NewRef(path);
    BDEV(self)->carriers = 0;
    BDEV(self)->closed = 0;
    BDEV(self)->closing = 0;
done:
    Py_XDECREF(encoded);
    Py_DECREF(path);
    return self;
}

static void bdev_dealloc(PyObject *self)
{
    if (BDEV(self)->weakreflist)
        PyObject_ClearWeakRefs(self);
    /* Dropped without close(): still flush (B-11), with nobody to tell. */
    sw_blockdev *d = BDEV(self)->dev;
    if (d && !BDEV(self)->closed && !sw_blockdev_is_faulted(d)) {
        sw_error err;
        Py_BEGIN_ALLOW_THREADS
        (void)sw_blockdev_flush_locked(d, &err);
        Py_END_ALLOW_THREADS
    }
    sw_blockdev_free(BDEV(self)->dev);
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
    SwBlockDeviceObject *b = BDEV(self);
    if (b->closed)
        Py_RETURN_NONE;
    if (b->carriers > 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "cannot close the block device %U: %zd BlockDeviceCarrier object(s) "
                     "from it are still alive (drop every reference to them first)",
                     b->path, b->carriers);
        return NULL;
    }
    dev_lock(b->dev);
    /* Waiting for the lock may have let another thread start a carrier. */
    int busy = b->carriers > 0;
    sw_error err;
    int rc = 0;
    if (!busy && !b->closed)
        rc = close_locked(self, 0, &err);
    dev_unlock(b->dev);
    if (rc < 0) {
        sw_py_raise(&err);
        return NULL;
    }
    if (busy) {
        PyErr_Format(PyExc_RuntimeError,
                     "cannot close the block device %U: a BlockDeviceCarrier was created "
                     "from it meanwhile (drop every reference to it first)", b->path);
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
    SwBlockDeviceObject *b = BDEV(self);
    int propagating = PyTuple_Check(args) && PyTuple_GET_SIZE(args) > 0 &&
                      PyTuple_GET_ITEM(args, 0) != Py_None;
    if (b->closed)
        Py_RETURN_FALSE;
    dev_lock(b->dev);
    sw_error err;
    int rc = 0;
    if (!b->closed) {
        if (b->carriers > 0)
            b->closing = 1;
        else
            rc = close_locked(self, propagating, &err);
    }
    dev_unlock(b->dev);
    if (rc < 0 && !propagating) {
        sw_py_raise(&err);
        return NULL;
    }
    Py_RETURN_FALSE;
}

/* B-11: make buffered slot writes durable. */
static PyObject *bdev_flush(PyObject *self, PyObject *unused)
{
    (void)unused;
    SwBlockDeviceObject *b = BDEV(self);
    if (b->closed)
        Py_RETURN_NONE;
    if (sw_blockdev_is_faulted(b->dev)) {
        PyErr_Format(PyExc_RuntimeError,
                     "cannot flush the block device %U: it is faulted by an earlier I/O "
                     "error, so its data can no longer be trusted", b->path);
        return NULL;
    }
    sw_error err;
    sw_status st = SW_OK;
    dev_lock(b->dev);
    Py_BEGIN_ALLOW_THREADS
    st = sw_blockdev_flush_locked(b->dev, &err);
    Py_END_ALLOW_THREADS
    dev_unlock(b->dev);
    if (st != SW_OK) {
        sw_py_raise(&err);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *bdev_is_closed(PyObject *self, PyObject *unused)
{
    (void)unused;
    return PyBool_FromLong(BDEV(self)->closed);
}

static PyObject *bdev_is_faulted(PyObject *self, PyObject *unused)
{
    (void)unused;
    return PyBool_FromLong(sw_blockdev_is_faulted(BDEV(self)->dev));
}

static PyObject *bdev_get_path(PyObject *self, void *closure)
{
    (void)closure;
    return Py_NewRef(BDEV(self)->path);
}

static PyObject *bdev_get_int(PyObject *self, void *closure)
{
    sw_blockdev *d = BDEV(self)->dev;
    switch ((int)(intptr_t)closure) {
    case 0: return PyLong_FromLongLong(d->capacity_bytes);
    case 1: return PyLong_FromLongLong(d->logical_block_size);
    case 2: return PyLong_FromLongLong(d->physical_block_size);
    default: return PyLong_FromLongLong(d->alignment);
    }
}

static PyObject *bdev_repr(PyObject *self)
{
    return PyUnicode_FromFormat("BlockDevice(%R)%s", BDEV(self)->path,
                                BDEV(self)->closed ? " (closed)" : "");
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

sw_blockdev *sw_py_block_device_core(PyObject *carrier)
{
    if (Py_TYPE(carrier) != &SwBlockDeviceCarrier_Type)
        return NULL;
    return BDEV(BDC(carrier)->device)->dev;
}

int sw_py_block_device_endpoint(PyObject *carrier, sw_endpoint *e)
{
    if (Py_TYPE(carrier) != &SwBlockDeviceCarrier_Type)
        return 0;
    e->kind = SW_ENDPOINT_FILE;
    e->fd = BDEV(BDC(carrier)->device)->dev->fd;
    e->host = NULL;
    e->offset = BDC(carrier)->offset_bytes / SLOT_BYTES; /* aligned, so exact */
    return 1;
}

/* B-10: with a BlockDeviceCarrier on either side, only the two block
 * operations on their exact pairs may run; then a faulted device refuses
 * (B-6). */
int sw_py_block_device_check_route(PyTypeObject *op_type, PyObject *src, PyObject *dst)
{
    int src_bd = Py_TYPE(src) == &SwBlockDeviceCarrier_Type;
    int dst_bd = Py_TYPE(dst) == &SwBlockDeviceCarrier_Type;
    if (!src_bd && !dst_bd)
        return 0;
    int ok = (op_type == &SwCpuToBlockDevice_Type && Py_TYPE(src) == &SwCPU_Type && dst_bd) ||
             (op_type == &SwBlockDeviceToCpu_Type && src_bd && Py_TYPE(dst) == &SwCPU_Type);
    if (!ok) {
        PyErr_Format(PyExc_NotImplementedError,
                     "%s cannot move from %s to %s: BlockDeviceCarrier moves only to and "
                     "from a CPU carrier, with move() (which uses "
                     "CpuToBlockDeviceMoveOperation and BlockDeviceToCpuMoveOperation)",
                     _PyType_Name(op_type), _PyType_Name(Py_TYPE(src)),
                     _PyType_Name(Py_TYPE(dst)));
        return -1;
    }
    PyObject *bd = src_bd ? src : dst;
    return refuse_state(BDC(bd)->device, "move a BlockDeviceCarrier", 0);
}

/* B-11 for writes that did not go through sw_blockdev_transfer (a tile's
 * slot copy, a zero-written fresh tile): make them durable. */
int sw_py_block_device_make_durable(PyObject *carrier)
{
    if (Py_TYPE(carrier) != &SwBlockDeviceCarrier_Type)
        return 0;
    PyObject *device = BDC(carrier)->device;
    sw_blockdev *d = BDEV(device)->dev;
    sw_error err;
    sw_status st;
    dev_lock(d);
    if (sw_blockdev_is_faulted(d) || BDEV(device)->closed) {
        st = sw_error_set(&err, SW_ESTATE, "the block device is faulted by an earlier I/O "
                          "error or closed; its data can no longer be made durable");
    } else {
        Py_BEGIN_ALLOW_THREADS
        st = sw_blockdev_flush_locked(d, &err);
        Py_END_ALLOW_THREADS
    }
    dev_unlock(d);
    return st == SW_OK ? 0 : sw_py_raise(&err);
}

int sw_py_block_device_init(PyObject *module)
{
    if (sw_carrier_register_builtin(&SwBlockDeviceCarrier_Type, &sw_block_device_carrier_ops, 0) < 0)
        return -1;
    if (PyType_Ready(&SwBlockDevice_Type) < 0 || PyType_Ready(&SwBlockDeviceCarrier_Type) < 0)
        return -1;
    if (PyModule_AddObjectRef(module, "BlockDevice", (PyObject *)&SwBlockDevice_Type) < 0)
        return -1;
    return PyModule_AddObjectRef(module, "BlockDeviceCarrier",
                                 (PyObject *)&SwBlockDeviceCarrier_Type);
}
