/* Tensor.__dlpack__ and Tensor.__dlpack_device__ (seed: DLPack export).
 *
 * Written like NumPy's exporter: vectorcall argument parsing against
 * interned keyword names, the exact CPU carrier exported by the core
 * (sw_carrier_to_dlpack: its checks, storage pointer, device, read-only
 * flag and storage pin; no dict), other carriers' dlpack_info() packed by
 * the core too, one core allocation for the managed tensor, shape and
 * strides (src/core/dlpack.c), and a capsule whose manager_ctx holds a
 * strong reference to the Tensor. The check order is contract:
 *   (1) one subtensor, (2) max_version, (3) dl_device shape,
 *   (4) the carrier's dlpack_info, (5) dl_device == carrier device,
 *   (6) copy, (7) non-null data pointer, (8) dtype.
 * There is deliberately no import path (no from_dlpack). */
#include "sw_python.h"
#include "sw_messages.h"

#include <string.h>

#include "strideweave/dlpack.h"
#include "strideweave/tensor.h"

static const char LEGACY_NAME[] = "dltensor";
static const char LEGACY_USED[] = "used_dltensor";
static const char VERSIONED_NAME[] = "dltensor_versioned";
static const char VERSIONED_USED[] = "used_dltensor_versioned";

static PyObject *str_stream;
static PyObject *str_max_version;
static PyObject *str_dl_device;
static PyObject *str_copy;
static PyObject *str_dlpack_info;
static PyObject *str_pointer;
static PyObject *str_device_type;
static PyObject *str_device_id;
static PyObject *cpu_device; /* (1, 0) */

/* ---- lifetime ----------------------------------------------------------- */


/* Dropping the Tensor may run arbitrary code (finalizers); keep a pending
 * exception out of its way and restore it afterwards. GIL held. */
static void drop_keeping_error(PyObject *obj)
{
    if (PyErr_Occurred()) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        Py_XDECREF(obj);
        PyErr_Restore(type, value, tb);
    } else {
        Py_XDECREF(obj);
    }
}

/* The core deleter's release callback: drop the export's storage pin and
 * the capsule's reference to the Tensor. Consumers call the deleter from
 * any thread, with or without the GIL, possibly while the interpreter is
 * finalizing or after it is gone; then both are leaked rather than touching
 * a dead interpreter. ctx NULL: the capsule destructor already took the
 * reference and holds the GIL (below). The pin (a CPU carrier's storage,
 * else NULL) is dropped under the GIL, like every pin and free of that
 * storage (alloc.h): a block released meanwhile, quarantined (C-15a), is
 * freed by its last export's deleter here. */
static void release_tensor(void *ctx, void *pin)
{
    if (!ctx) { /* the capsule destructor: GIL held, it drops the Tensor */
        sw_alloc_unpin(pin);
        return;
    }
    if (sw_py_interpreter_gone())
        return;
    sw_py_gil gil = sw_py_gil_ensure();
    sw_alloc_unpin(pin);
    drop_keeping_error((PyObject *)ctx);
    sw_py_gil_release(gil);
}

/* Capsule destructors: a consumer that renamed the capsule to used_* owns
 * the managed tensor and calls its deleter; otherwise nobody took it and the
 * deleter runs here, exactly once. A destructor runs with the GIL held, so
 * it takes the Tensor reference out of manager_ctx and drops it itself: the
 * deleter then only frees the block, with no GIL round trip. Any pending
 * exception survives. */
static void run_deleter_holding_gil(void **manager_ctx, void (*run)(void *),
                                    void *managed)
{
    PyObject *owner = *manager_ctx;
    *manager_ctx = NULL;
    run(managed);
    drop_keeping_error(owner);
}

/* Renamed to neither our name nor used_*: whoever renamed it owns the
 * managed tensor. Say so without disturbing a pending exception, and without
 * handing the capsule (mid-deallocation) to the hook, which would revive it. */
static void report_foreign_name(const char *name)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_Format(PyExc_RuntimeError,
                 "a strideweave DLPack capsule was destroyed under the "
                 "foreign name %.100s; its managed tensor is left to whoever "
                 "renamed it", name ? name : "NULL");
    PyErr_WriteUnraisable(NULL);
    PyErr_Restore(type, value, tb);
}

static void call_legacy_deleter(void *m)
{
    ((DLManagedTensor *)m)->deleter(m);
}

static void call_versioned_deleter(void *m)
{
    ((DLManagedTensorVersioned *)m)->deleter(m);
}
static void legacy_capsule_destructor(PyObject *capsule)
{
    const char *name = PyCapsule_GetName(capsule);
    if (name != LEGACY_NAME && name && strcmp(name, LEGACY_USED) == 0)
        return; /* consumed: the consumer calls the deleter */
    DLManagedTensor *m = name == LEGACY_NAME || (name && strcmp(name, LEGACY_NAME) == 0)
        ? PyCapsule_GetPointer(capsule, name) : NULL;
    if (!m) {
        report_foreign_name(name);
        return;
    }
    if (m->deleter)
        run_deleter_holding_gil(&m->manager_ctx, call_legacy_deleter, m);
}

static void versioned_capsule_destructor(PyObject *capsule)
{
    const char *name = PyCapsule_GetName(capsule);
    if (name != VERSIONED_NAME && name && strcmp(name, VERSIONED_USED) == 0)
        return; /* consumed: the consumer calls the deleter */
    DLManagedTensorVersioned *m = name == VERSIONED_NAME || (name && strcmp(name, VERSIONED_NAME) == 0)
        ? PyCapsule_GetPointer(capsule, name) : NULL;
    if (!m) {
        report_foreign_name(name);
        return;
    }
    if (m->deleter)
        run_deleter_holding_gil(&m->manager_ctx, call_versioned_deleter, m);
}

/* ---- argument parsing --------------------------------------------------- */

/* Keyword names from Python calls are usually the interned object itself;
 * other callers (NumPy builds its kwnames with Py_BuildValue) get a compare. */
static inline int kw_is(PyObject *kw, PyObject *name)
{
    if (kw == name)
        return 1;
    Py_ssize_t n = PyUnicode_GET_LENGTH(kw);
    return n == PyUnicode_GET_LENGTH(name) &&
           PyUnicode_KIND(kw) == PyUnicode_KIND(name) &&
           memcmp(PyUnicode_DATA(kw), PyUnicode_DATA(name),
                  (size_t)n * PyUnicode_KIND(kw)) == 0;
}

typedef struct dlpack_args {
    PyObject *max_version; /* borrowed, Py_None when absent */
    PyObject *dl_device;
    PyObject *copy;
} dlpack_args;

static int parse_args(PyObject *const *args, Py_ssize_t nargs,
                      PyObject *kwnames, dlpack_args *out)
{
    out->max_version = out->dl_device = out->copy = Py_None;
    if (nargs > 1) {
        PyErr_Format(PyExc_TypeError,
                     "__dlpack__() takes at most 1 positional argument "
                     "(stream); max_version, dl_device and copy are "
                     "keyword-only (%zd positional given)", nargs);
        return -1;
    }
    if (!kwnames)
        return 0;
    int have_stream = nargs == 1;
    Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *kw = PyTuple_GET_ITEM(kwnames, i);
        PyObject *value = args[nargs + i];
        if (kw_is(kw, str_max_version)) {
            out->max_version = value;
        } else if (kw_is(kw, str_dl_device)) {
            out->dl_device = value;
        } else if (kw_is(kw, str_copy)) {
            out->copy = value;
        } else if (kw_is(kw, str_stream)) {
            if (have_stream) {
                PyErr_SetString(PyExc_TypeError,
                                "__dlpack__() got multiple values for "
                                "argument 'stream'");
                return -1;
            }
            have_stream = 1; /* accepted in any form and ignored */
        } else {
            PyErr_Format(PyExc_TypeError,
                         "__dlpack__() got an unexpected keyword argument %R",
                         kw);
            return -1;
        }
    }
    return 0;
}

/* The two elements of a tuple or list argument, as new references. */
static int two_elements(PyObject *seq, const char *argname, PyObject **a,
                        PyObject **b)
{
    Py_ssize_t n;
    if (PyTuple_Check(seq)) {
        n = PyTuple_GET_SIZE(seq);
        if (n == 2) {
            *a = PyTuple_GET_ITEM(seq, 0);
            *b = PyTuple_GET_ITEM(seq, 1);
        }
    } else if (PyList_Check(seq)) {
        n = PyList_GET_SIZE(seq);
        if (n == 2) {
            *a = PyList_GET_ITEM(seq, 0);
            *b = PyList_GET_ITEM(seq, 1);
        }
    } else {
        PyErr_Format(PyExc_TypeError,
                     "%s must be None, a tuple or a list, not %.200s", argname,
                     Py_TYPE(seq)->tp_name);
        return -1;
    }
    if (n != 2) {
        PyErr_Format(PyExc_ValueError,
                     "%s must have exactly two elements, not %zd", argname, n);
        return -1;
    }
    Py_INCREF(*a);
    Py_INCREF(*b);
    return 0;
}

/* Sign (-1, 0, 1) of an integer element of any size; -2 with TypeError
 * for a non-integer (bool included, G-2). */
static int int_sign(PyObject *obj, const char *argname)
{
    if (PyLong_CheckExact(obj)) {
#if PY_VERSION_HEX >= 0x030E0000
        int sign;
        return PyLong_GetSign(obj, &sign) < 0 ? -2 : sign;
#else
        return _PyLong_Sign(obj);
#endif
    }
    if (!sw_py_is_integer(obj)) {
        PyErr_Format(PyExc_TypeError, "%s elements must be integers, not %.200s",
                     argname, Py_TYPE(obj)->tp_name);
        return -2;
    }
    PyObject *index = PyNumber_Index(obj);
    if (!index)
        return -2;
    int sign = int_sign(index, argname);
    Py_DECREF(index);
    return sign;
}

/* (2) max_version: *versioned = 0 for None or major 0, 1 for major >= 1. */
static int parse_max_version(PyObject *mv, int *versioned)
{
    *versioned = 0;
    if (mv == Py_None)
        return 0;
    PyObject *major, *minor;
    if (two_elements(mv, "max_version", &major, &minor) < 0)
        return -1;
    int smaj = int_sign(major, "max_version");
    int smin = smaj == -2 ? -2 : int_sign(minor, "max_version");
    Py_DECREF(major);
    Py_DECREF(minor);
    if (smaj == -2 || smin == -2)
        return -1;
    if (smaj < 0 || smin < 0) {
        PyErr_SetString(PyExc_ValueError,
                        "max_version components must be non-negative integers");
        return -1;
    }
    *versioned = smaj > 0;
    return 0;
}

/* (3) dl_device: NULLs for None, else two integer objects (new refs). */
static int parse_dl_device(PyObject *dev, PyObject **type, PyObject **id)
{
    *type = *id = NULL;
    if (dev == Py_None)
        return 0;
    PyObject *a, *b;
    if (two_elements(dev, "dl_device", &a, &b) < 0)
        return -1;
    PyObject *ia = NULL, *ib = NULL;
    if (!sw_py_is_integer(a) || !sw_py_is_integer(b)) {
        PyErr_Format(PyExc_TypeError,
                     "dl_device elements must be integers, not (%.100s, %.100s)",
                     Py_TYPE(a)->tp_name, Py_TYPE(b)->tp_name);
        goto done;
    }
    ia = PyNumber_Index(a);
    ib = ia ? PyNumber_Index(b) : NULL;
    if (!ib)
        Py_CLEAR(ia);
done:
    Py_DECREF(a);
    Py_DECREF(b);
    if (!ia)
        return -1;
    *type = ia;
    *id = ib;
    return 0;
}

/* ---- the carrier's DLPack information (4) ------------------------------- */

typedef struct carrier_info {
    int cpu;              /* exact CPU: the fields below are unused */
    PyObject *pointer;    /* hook path: new references */
    PyObject *device_type;
    PyObject *device_id;
} carrier_info;

static void info_clear(carrier_info *info)
{
    Py_CLEAR(info->pointer);
    Py_CLEAR(info->device_type);
    Py_CLEAR(info->device_id);
}

static PyObject *required_key(PyObject *dict, PyObject *key)
{
    PyObject *v = PyDict_GetItemWithError(dict, key);
    if (!v) {
        if (!PyErr_Occurred())
            PyErr_SetObject(PyExc_KeyError, key);
        return NULL;
    }
    Py_INCREF(v);
    return v;
}

/* C-16 for everything but the exact CPU: call the public dlpack_info()
 * hook (whose own exception propagates unchanged) and convert the result
 * with dict(). */
static int hook_dlpack_info(PyObject *carrier, carrier_info *info)
{
    PyObject *raw = PyObject_CallMethodNoArgs(carrier, str_dlpack_info);
    if (!raw)
        return -1;
    PyObject *dict = PyObject_CallOneArg((PyObject *)&PyDict_Type, raw);
    Py_DECREF(raw);
    if (!dict) {
        if (PyErr_ExceptionMatches(PyExc_TypeError) ||
            PyErr_ExceptionMatches(PyExc_ValueError)) {
            PyObject *type, *value, *tb;
            PyErr_Fetch(&type, &value, &tb);
            PyErr_NormalizeException(&type, &value, &tb);
            PyErr_Format(PyExc_TypeError,
                         "dlpack_info() must return a value convertible to a "
                         "dict (%S)", value ? value : Py_None);
            PyObject *t2, *v2, *tb2;
            PyErr_Fetch(&t2, &v2, &tb2);
            PyErr_NormalizeException(&t2, &v2, &tb2);
            if (value)
                PyException_SetCause(v2, value); /* steals value */
            Py_XDECREF(type);
            Py_XDECREF(tb);
            PyErr_Restore(t2, v2, tb2);
        }
        return -1;
    }
    info->pointer = required_key(dict, str_pointer);
    if (info->pointer)
        info->device_type = required_key(dict, str_device_type);
    if (info->device_type)
        info->device_id = required_key(dict, str_device_id);
    Py_DECREF(dict);
    if (!info->device_id) {
        info_clear(info);
        return -1;
    }
    return 0;
}

/* ---- checks shared by both methods -------------------------------------- */

/* (1) T-11: before touching any carrier. */
/* (4) Exact CPU answers without building a dict (CPU.dlpack_info()
 * reports device (1, 0); the core reads its pointer). */
static inline int carrier_dlpack_info(PyObject *carrier, carrier_info *info)
{
    if (Py_IS_TYPE(carrier, &SwCPU_Type)) {
        info->cpu = 1;
        return 0;
    }
    return hook_dlpack_info(carrier, info);
}

static inline int check_one_subtensor(SwTensorObject *t)
{
    if (t->nsub != 1) {
        char num[32];
        PyErr_Format(PyExc_NotImplementedError,
                     "DLPack export is not implemented for %s tensors (%s planes); only "
                     "Float32 and Int32 tensors on one carrier can be exported",
                     sw_dtype_info_of(SwDType_ID(t->dtype))->name,
                     sw_py_msg_count_word(t->nsub, num, sizeof num));
        return -1;
    }
    return 0;
}

/* (5) component-wise as Python integers: a huge request is a mismatch. */
static int device_matches(PyObject *want_type, PyObject *want_id,
                          const carrier_info *info)
{
    if (info->cpu) {
        int o1, o2;
        long long t = PyLong_AsLongLongAndOverflow(want_type, &o1);
        long long i = PyLong_AsLongLongAndOverflow(want_id, &o2);
        if (PyErr_Occurred())
            return -1;
        return !o1 && !o2 && t == kDLCPU && i == 0;
    }
    int eq = PyObject_RichCompareBool(want_type, info->device_type, Py_EQ);
    if (eq != 1)
        return eq;
    return PyObject_RichCompareBool(want_id, info->device_id, Py_EQ);
}

static int device_mismatch(PyObject *want_type, PyObject *want_id,
                           const carrier_info *info)
{
    if (info->cpu)
        PyErr_Format(PyExc_BufferError,
                     "dl_device (%S, %S) is not the exporting carrier's "
                     "DLPack device (1, 0); cross-device export is not "
                     "implemented", want_type, want_id);
    else
        PyErr_Format(PyExc_BufferError,
                     "dl_device (%S, %S) is not the exporting carrier's "
                     "DLPack device (%S, %S); cross-device export is not "
                     "implemented", want_type, want_id, info->device_type,
                     info->device_id);
    return -1;
}

/* G-2: the hook's values are integers (operator.index, bool excluded); the
 * seed leaves the failure for anything else unspecified, ours is TypeError. */
static int require_integer(PyObject *obj, const char *key)
{
    if (sw_py_is_integer(obj))
        return 0;
    PyErr_Format(PyExc_TypeError,
                 "dlpack_info() %s must be an integer, not %.200s", key,
                 Py_TYPE(obj)->tp_name);
    return -1;
}

static int to_pointer(PyObject *obj, void **out)
{
    if (require_integer(obj, "pointer") < 0)
        return -1;
    PyObject *index = PyNumber_Index(obj);
    if (!index)
        return -1;
    *out = PyLong_AsVoidPtr(index);
    Py_DECREF(index);
    return !*out && PyErr_Occurred() ? -1 : 0;
}

static int to_int32(PyObject *obj, const char *key, int32_t *out)
{
    int overflow;
    if (require_integer(obj, key) < 0)
        return -1;
    long long v;
    if (sw_py_index_ll(obj, &v, &overflow) < 0)
        return -1;
    if (overflow || v < INT32_MIN || v > INT32_MAX) {
        PyErr_Format(PyExc_BufferError,
                     "DLPack device component %S does not fit a 32-bit "
                     "DLDevice field", obj);
        return -1;
    }
    *out = (int32_t)v;
    return 0;
}

/* ---- packing ------------------------------------------------------------ */

static const char NULL_DATA[] = "DLPack data pointer must be non-null for a tensor with "
                                "elements (is the carrier released?)";

static int pack(const sw_dlpack_request *req, int versioned, void **managed)
{
    sw_error err;
    sw_status st = versioned
        ? sw_dlpack_pack_versioned(req, (DLManagedTensorVersioned **)managed, &err)
        : sw_dlpack_pack(req, (DLManagedTensor **)managed, &err);
    return st == SW_OK ? 0 : sw_py_raise(&err);
}

/* The exact CPU: the core checks, packs and pins its storage block
 * (sw_tensor_to_dlpack_owned on the plane's core tensor: read-only from its public mutability, T-10); its
 * refusals are the contract's (7) released and (8) dtype BufferErrors. No
 * user code runs here. */
static int export_cpu(SwSubtensor *sub, int versioned, PyObject *self, void **managed)
{
    const sw_dlpack_owner owner = {.versioned = versioned, .read_only = -1,
                                   .manager_ctx = self, .release = release_tensor};
    sw_error err;
    sw_status st = sw_tensor_to_dlpack_owned(sub->core, &owner, managed, &err);
    if (st == SW_OK)
        return 0;
    if (st == SW_ESTATE || st == SW_ENOTSUP) {
        PyErr_SetString(PyExc_BufferError, st == SW_ESTATE ? NULL_DATA : err.msg);
        return -1;
    }
    return sw_py_raise(&err);
}

/* Any other carrier: what its dlpack_info() hook reported, packed by the
 * core. Every piece of user code this export can run has run by the end of
 * the first block (the _is_mutable hook, __index__ of the hook's numbers);
 * only then is the carrier's liveness checked again. */
static int export_hooked(SwTensorObject *t, SwSubtensor *sub, int versioned,
                         const carrier_info *info, PyObject *self, void **managed)
{
    sw_dlpack_request req;
    const sw_layout *layout = SW_SUB_LAYOUT(sub);
    req.flags = 0;
    if (versioned) {
        int mutable_ = sw_py_carrier_is_mutable(sub->carrier); /* T-10 */
        if (mutable_ < 0)
            return -1;
        if (!mutable_)
            req.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
    }
    if (to_pointer(info->pointer, &req.data) < 0 ||
        to_int32(info->device_type, "device_type", &req.device_type) < 0 ||
        to_int32(info->device_id, "device_id", &req.device_id) < 0)
        return -1;
    if (sw_py_state_released(sub->carrier))
        req.data = NULL;
    if (!req.data && layout->size > 0) { /* (7) */
        PyErr_SetString(PyExc_BufferError, NULL_DATA);
        return -1;
    }
    sw_dtype dt = SwDType_ID(t->dtype); /* (8) */
    if (dt != SW_DT_FLOAT32 && dt != SW_DT_INT32) {
        PyErr_Format(PyExc_BufferError, "DLPack export supports Float32 and Int32, not %s",
                     sw_dtype_info_of(dt)->name);
        return -1;
    }
    req.code = dt == SW_DT_FLOAT32 ? kDLFloat : kDLInt;
    req.bits = 32;
    req.lanes = 1;
    req.ndim = layout->nleaves;
    req.extents = layout->extents;
    req.strides = layout->strides;
    req.offset = SW_SUB_OFFSET(sub);
    req.manager_ctx = self;
    req.release = release_tensor;
    req.pin = NULL; /* a hook's storage is its own */
    return pack(&req, versioned, managed);
}

/* ---- the methods -------------------------------------------------------- */

PyObject *sw_py_tensor_dlpack_device(PyObject *self, PyObject *unused)
{
    (void)unused;
    SwTensorObject *t = (SwTensorObject *)self;
    carrier_info info = {0, NULL, NULL, NULL};
    if (check_one_subtensor(t) < 0 ||
        carrier_dlpack_info(t->subs[0].carrier, &info) < 0)
        return NULL;
    if (info.cpu)
        return Py_NewRef(cpu_device);
    PyObject *device = PyTuple_Pack(2, info.device_type, info.device_id);
    info_clear(&info);
    return device;
}

PyObject *sw_py_tensor_dlpack(PyObject *self, PyObject *const *args,
                              Py_ssize_t nargs, PyObject *kwnames)
{
    SwTensorObject *t = (SwTensorObject *)self;
    dlpack_args a;
    PyObject *want_type = NULL, *want_id = NULL, *capsule = NULL;
    carrier_info info = {0, NULL, NULL, NULL};
    int versioned;

    if (parse_args(args, nargs, kwnames, &a) < 0 ||
        check_one_subtensor(t) < 0 ||                        /* (1) */
        parse_max_version(a.max_version, &versioned) < 0 ||  /* (2) */
        parse_dl_device(a.dl_device, &want_type, &want_id) < 0) /* (3) */
        return NULL;

    SwSubtensor *sub = &t->subs[0];
    if (carrier_dlpack_info(sub->carrier, &info) < 0)          /* (4) */
        goto error;
    if (want_type) {                                           /* (5) */
        int eq = device_matches(want_type, want_id, &info);
        if (eq < 0)
            goto error;
        if (!eq) {
            device_mismatch(want_type, want_id, &info);
            goto error;
        }
    }
    if (a.copy != Py_None && a.copy != Py_False) {             /* (6) */
        int truth = PyObject_IsTrue(a.copy);
        if (truth < 0)
            goto error;
        if (truth) {
            PyErr_SetString(PyExc_BufferError,
                            "copy=True is not supported: DLPack export only "
                            "aliases the carrier's storage (copy exports are "
                            "not implemented)");
            goto error;
        }
    }

    void *managed;
    if ((info.cpu ? export_cpu(sub, versioned, self, &managed)
                  : export_hooked(t, sub, versioned, &info, self, &managed)) < 0)
        goto error;
    Py_INCREF(self); /* owned by manager_ctx, dropped by the deleter */
    capsule = versioned
        ? PyCapsule_New(managed, VERSIONED_NAME, versioned_capsule_destructor)
        : PyCapsule_New(managed, LEGACY_NAME, legacy_capsule_destructor);
    if (!capsule) {
        if (versioned)
            ((DLManagedTensorVersioned *)managed)->deleter(managed);
        else
            ((DLManagedTensor *)managed)->deleter(managed);
    }
error:
    Py_XDECREF(want_type);
    Py_XDECREF(want_id);
    info_clear(&info);
    return capsule;
}

int sw_py_dlpack_init(PyObject *module)
{
    (void)module; /* export-only: nothing is added to the module */
    static const struct { PyObject **slot; const char *text; } names[] = {
        {&str_stream, "stream"},
        {&str_max_version, "max_version"},
        {&str_dl_device, "dl_device"},
        {&str_copy, "copy"},
        {&str_dlpack_info, "dlpack_info"},
        {&str_pointer, "pointer"},
        {&str_device_type, "device_type"},
        {&str_device_id, "device_id"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (!*names[i].slot) {
            *names[i].slot = PyUnicode_InternFromString(names[i].text);
            if (!*names[i].slot)
                return -1;
        }
    }
    if (!cpu_device) {
        cpu_device = Py_BuildValue("(ii)", (int)kDLCPU, 0);
        if (!cpu_device)
            return -1;
    }
    return 0;
}
