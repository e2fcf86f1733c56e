/* Bulk reads of a one-subtensor Tensor's values as raw host slots (4-byte
 * Float32/Int32, 1-byte Bool, native order), shared by Tensor.__array__
 * (py_array.c) and Tensor.__str__ (py_repr.c).
 *
 * The built-in carriers are read without a Python call per element: host
 * memory directly, FileBacked with one pread of the coalesced span, an
 * Evictable through its promoted primary tier. Any other carrier goes
 * through the checked slot read (its get_value hook), which re-checks the
 * carrier's state before each slot, so hooks that release or move it are
 * seen. */
#include "sw_carrier.h"
#include "sw_layout_walk.h"

#include <string.h>

#include "strideweave/filestore.h"

/* Lowest and highest slot an ordinal walk of L at `off` touches. */
static void span_of(const sw_layout *L, int64_t off, int64_t *lo, int64_t *hi)
{
    *lo = *hi = off;
    for (int32_t j = 0; j < L->nleaves; j++) {
        int64_t reach = L->strides[j] * (L->extents[j] - 1);
        if (reach < 0)
            *lo += reach;
        else
            *hi += reach;
    }
}

/* Leaf modes merged where one continues the previous (stride = previous
 * stride * previous extent) and extent-1 leaves dropped: the same ordinal
 * walk over fewer, longer runs. Returns the count in ext/str. */
static int32_t coalesce(const sw_layout *L, int64_t *ext, int64_t *str)
{
    int32_t n = 0;
    for (int32_t j = 0; j < L->nleaves; j++) {
        if (L->extents[j] == 1)
            continue;
        if (n > 0 && L->strides[j] == str[n - 1] * ext[n - 1]) {
            ext[n - 1] *= L->extents[j];
            continue;
        }
        ext[n] = L->extents[j];
        str[n] = L->strides[j];
        n++;
    }
    if (n == 0) {
        ext[0] = 1;
        str[0] = 0;
        n = 1;
    }
    return n;
}

/* One run: n slots `stride` apart from base[first] into out. */
static void gather_run(const char *base, int64_t first, int64_t stride, int64_t n, size_t bytes,
                       char *out)
{
    if (stride == 1) {
        memcpy(out, base + (size_t)first * bytes, (size_t)n * bytes);
    } else if (bytes == 4) {
        const uint32_t *b = (const uint32_t *)base + first;
        uint32_t *o = (uint32_t *)out;
        for (int64_t k = 0; k < n; k++)
            o[k] = b[k * stride];
    } else {
        for (int64_t k = 0; k < n; k++)
            memcpy(out + (size_t)k * bytes, base + (size_t)(first + k * stride) * bytes, bytes);
    }
}

/* out[k] = base[slot(k) - lo], slots of `bytes` each, in ordinal order:
 * runs along the first coalesced mode, an odometer over the others. */
static int gather_from(const sw_layout *L, int64_t off, const char *base, int64_t lo,
                       size_t bytes, char *out)
{
    size_t cells = (size_t)L->nleaves + 1;
    int64_t *ext = PyMem_Malloc(3 * cells * sizeof(int64_t));
    if (!ext) {
        PyErr_NoMemory();
        return -1;
    }
    int64_t *str = ext + cells, *digit = str + cells;
    int32_t n = coalesce(L, ext, str);
    memset(digit, 0, cells * sizeof(int64_t));
    int64_t rows = L->size / ext[0], idx = off - lo;
    for (int64_t r = 0; r < rows; r++) {
        gather_run(base, idx, str[0], ext[0], bytes, out + (size_t)(r * ext[0]) * bytes);
        for (int32_t j = 1; j < n; j++) {
            if (++digit[j] < ext[j]) {
                idx += str[j];
                break;
            }
            idx -= str[j] * (ext[j] - 1);
            digit[j] = 0;
        }
    }
    PyMem_Free(ext);
    return 0;
}

/* The slot range is inside the carrier: a layout is validated against the
 * carrier when the Tensor is built, but a hook-defined size may change. */
static int check_span(PyObject *carrier, int64_t lo, int64_t hi)
{
    int64_t size;
    if (sw_py_carrier_size(carrier, &size) < 0)
        return -1;
    if (lo < 0 || hi >= size) {
        PyErr_Format(PyExc_IndexError,
                     "the tensor reaches slots %lld..%lld of a %s carrier of size %lld",
                     (long long)lo, (long long)hi, Py_TYPE(carrier)->tp_name,
                     (long long)size);
        return -1;
    }
    return 0;
}

static int gather_file(PyObject *carrier, const sw_layout *L, int64_t off, int64_t lo,
                       int64_t hi, size_t bytes, char *out)
{
    SwFileBackedObject *f = (SwFileBackedObject *)carrier;
    size_t span = (size_t)(hi - lo + 1) * bytes;
    char *buf = PyMem_Malloc(span ? span : 1);
    if (!buf) {
        PyErr_NoMemory();
        return -1;
    }
    sw_error err;
    int rc = -1;
    if (sw_filestore_pread(f->fd, buf, span, lo * (int64_t)bytes, &err) != SW_OK)
        sw_py_raise(&err);
    else
        rc = gather_from(L, off, buf, lo, bytes, out);
    PyMem_Free(buf);
    return rc;
}

/* Any other carrier: the checked read of each slot, converted back to a
 * host slot by the dtype's own rule. */
static int gather_checked(PyObject *carrier, sw_dtype dt, const sw_layout *L, int64_t off,
                          size_t bytes, char *out)
{
    sw_walk w;
    if (sw_walk_init(&w, L, off) < 0)
        return -1;
    int rc = 0;
    for (int64_t k = 0; k < L->size && rc == 0; k++, sw_walk_next(&w)) {
        PyObject *v = sw_py_carrier_getitem(carrier, w.idx);
        rc = v ? sw_py_store_slot(dt, v, out + (size_t)k * bytes) : -1;
        Py_XDECREF(v);
    }
    sw_walk_done(&w);
    return rc;
}

static int gather_carrier(PyObject *carrier, sw_dtype dt, const sw_layout *L, int64_t off,
                          char *out);

/* Evictable: its own state decides readability (released, evicted,
 * pending); the values are then the primary tier's, read with the owner
 * access the wrapper holds. */
static int gather_evictable(PyObject *carrier, sw_dtype dt, const sw_layout *L, int64_t off,
                            char *out)
{
    int64_t token;
    PyObject *primary = sw_py_evictable_primary(carrier, &token);
    if (!primary)
        return -1;
    int rc = -1;
    if (sw_py_carrier_begin_owner(primary, token) == 0) {
        rc = gather_carrier(primary, dt, L, off, out);
        sw_py_carrier_end_owner(primary, token);
    }
    Py_DECREF(primary);
    return rc;
}

static int gather_carrier(PyObject *carrier, sw_dtype dt, const sw_layout *L, int64_t off,
                          char *out)
{
    size_t bytes = sw_dtype_slot_bytes(dt);
    int64_t lo, hi;
    if (L->size == 0)
        return 0;
    if (sw_py_carrier_check_readable(carrier) < 0)
        return -1;
    span_of(L, off, &lo, &hi);
    if (Py_IS_TYPE(carrier, &SwCPU_Type) || Py_IS_TYPE(carrier, &SwGeneric_Type)) {
        SwHostCarrierObject *h = (SwHostCarrierObject *)carrier;
        if (check_span(carrier, lo, hi) < 0)
            return -1;
        if (h->dtype != dt || sw_dtype_slot_bytes(h->dtype) != bytes)
            return gather_checked(carrier, dt, L, off, bytes, out);
        return gather_from(L, off, (const char *)h->data + (size_t)lo * bytes, lo, bytes, out);
    }
    if (Py_IS_TYPE(carrier, &SwFileBacked_Type) && bytes == 4 &&
        ((SwFileBackedObject *)carrier)->dtype == dt) {
        if (check_span(carrier, lo, hi) < 0)
            return -1;
        return gather_file(carrier, L, off, lo, hi, bytes, out);
    }
    if (Py_IS_TYPE(carrier, &SwEvictable_Type))
        return gather_evictable(carrier, dt, L, off, out);
    return gather_checked(carrier, dt, L, off, bytes, out);
}

int sw_py_tensor_gather(PyObject *tensor, void *out)
{
    SwTensorObject *t = (SwTensorObject *)tensor;
    SwSubtensor *s = &t->subs[0];
    PyObject *carrier = s->carrier;
    Py_INCREF(carrier); /* a hook may drop the last other reference */
    int rc = gather_carrier(carrier, SwDType_ID(t->dtype), SwLayout_CORE(s->layout),
                            s->offset, out);
    Py_DECREF(carrier);
    return rc;
}

int sw_py_tensor_read_slot(PyObject *tensor, int64_t slot, void *out)
{
    SwTensorObject *t = (SwTensorObject *)tensor;
    static const int64_t one_extent = 1, zero_stride = 0;
    /* A one-element walk at `slot`: the same readers, one slot. */
    sw_layout one;
    memset(&one, 0, sizeof one);
    one.nleaves = 1;
    one.extents = (int64_t *)&one_extent;
    one.strides = (int64_t *)&zero_stride;
    one.size = 1;
    one.cosize = 1;
    PyObject *carrier = t->subs[0].carrier;
    Py_INCREF(carrier);
    int rc = gather_carrier(carrier, SwDType_ID(t->dtype), &one, slot, out);
    Py_DECREF(carrier);
    return rc;
}
