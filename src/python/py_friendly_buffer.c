/* friendly.tensor(values) for arrays: objects exporting the buffer protocol
 * with a numeric format (NumPy arrays, array.array, memoryview, bytes),
 * DLPack (PyTorch, JAX, ...: __dlpack__ is called and the managed tensor read
 * here) or __array__ (whose result is read as a buffer): F-2 extended (our
 * decision).
 *
 * Element (i, j, ...) of the array is coordinate (i, j, ...) of the tensor.
 * The tensor's layout packs the axes in the array's memory order (row_major
 * for a C-order array, column_major for Fortran order), so the copy reads
 * memory sequentially: one linear pass for a dense array, a memcpy for
 * float32 -> Float32. Without dtype= the array's kind decides: floats
 * become Float32, bools Bool, integers Int32 (OverflowError naming dtype=
 * when a value does not fit, never a silent Float32). With dtype= each
 * element converts by the rules a Python int, float or bool would (C-9):
 * floats do not become Int32, only bools become Bool, Int32 overflow is
 * OverflowError. The values are copied into
 * fresh CPU storage in one C pass with the GIL released; the exporter's
 * memory is never adopted. Formats that are not numbers fall back to F-2
 * (which refuses what is not a list or tuple); complex numbers are refused
 * with TypeError. */
#include "sw_python.h"
#include "sw_float.h"
#include "strideweave/dlpack.h"

#include <float.h>
#include <math.h>
#include <string.h>

typedef enum { K_SINT, K_UINT, K_FLOAT, K_BOOL, K_COMPLEX, K_OTHER } elem_kind;

typedef struct {
    elem_kind kind;
    int swap;    /* byte order differs from the host's */
    Py_ssize_t size;
} elem_format;

static int host_little(void)
{
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

/* struct-module format of one element: [@=<>!] then one code ('Z' + code
 * for complex). */
static elem_format parse_format(const char *fmt, Py_ssize_t itemsize)
{
    elem_format f = {K_OTHER, 0, itemsize};
    if (!fmt)
        fmt = "B";
    if (*fmt == '<' || *fmt == '>' || *fmt == '!') {
        f.swap = (*fmt == '<') != host_little();
        fmt++;
    } else if (*fmt == '@' || *fmt == '=') {
        fmt++;
    }
    if (fmt[0] == 'Z' && fmt[1] && !fmt[2]) {
        f.kind = K_COMPLEX;
        return f;
    }
    if (!fmt[0] || fmt[1])
        return f;
    if (strchr("bhilqn", fmt[0]))
        f.kind = K_SINT;
    else if (strchr("BHILQN", fmt[0]))
        f.kind = K_UINT;
    else if (strchr("efd", fmt[0]))
        f.kind = K_FLOAT;
    else if (fmt[0] == '?')
        f.kind = K_BOOL;
    /* sizes we can read */
    if ((f.kind == K_SINT || f.kind == K_UINT) && itemsize != 1 && itemsize != 2 &&
        itemsize != 4 && itemsize != 8)
        f.kind = K_OTHER;
    if (f.kind == K_FLOAT && itemsize != 2 && itemsize != 4 && itemsize != 8)
        f.kind = K_OTHER;
    if (f.kind == K_BOOL && itemsize != 1)
        f.kind = K_OTHER;
    return f;
}

static void load_bytes(const char *p, Py_ssize_t n, int swap, unsigned char *out)
{
    for (Py_ssize_t k = 0; k < n; k++)
        out[k] = (unsigned char)p[swap ? n - 1 - k : k];
}

static double half_to_double(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return (h & 0x8000) ? -v : v;
}

/* One element as the Python value tolist() would give: a float (*d), an
 * int (*i / *u), or a bool (*i). */
typedef struct {
    double d;
    int64_t i;
    uint64_t u;
    int is_unsigned;
} scalar;

static void read_scalar(const char *p, const elem_format *f, scalar *s)
{
    unsigned char b[8];
    load_bytes(p, f->size, f->swap, b);
    s->is_unsigned = 0;
    if (f->kind == K_FLOAT) {
        if (f->size == 2) {
            uint16_t h;
            memcpy(&h, b, 2);
            s->d = half_to_double(h);
        } else if (f->size == 4) {
            float x;
            memcpy(&x, b, 4);
            s->d = x;
        } else {
            memcpy(&s->d, b, 8);
        }
    } else if (f->kind == K_SINT) {
        int8_t a; int16_t c; int32_t e; int64_t g;
        switch (f->size) {
        case 1: memcpy(&a, b, 1); s->i = a; break;
        case 2: memcpy(&c, b, 2); s->i = c; break;
        case 4: memcpy(&e, b, 4); s->i = e; break;
        default: memcpy(&g, b, 8); s->i = g; break;
        }
    } else {
        uint8_t a; uint16_t c; uint32_t e; uint64_t g;
        switch (f->size) {
        case 1: memcpy(&a, b, 1); s->u = a; break;
        case 2: memcpy(&c, b, 2); s->u = c; break;
        case 4: memcpy(&e, b, 4); s->u = e; break;
        default: memcpy(&g, b, 8); s->u = g; break;
        }
        s->is_unsigned = 1;
        if (f->kind == K_BOOL)
            s->u = s->u != 0;
    }
}

/* Conversion outcome, raised once the GIL is back. */
typedef enum { CONV_OK, CONV_OVERFLOW } conv_status;

static conv_status convert(const scalar *s, const elem_format *f, sw_dtype dt, void *slot)
{
    if (dt == SW_DT_FLOAT32) {
        /* int64/uint64 -> float is one correctly rounded conversion */
        float v = f->kind == K_FLOAT ? sw_py_round_to_float(s->d)
                  : s->is_unsigned  ? (float)s->u
                                    : (float)s->i;
        memcpy(slot, &v, 4);
        return CONV_OK;
    }
    if (dt == SW_DT_INT32) {
        int64_t v = s->is_unsigned ? (s->u > INT32_MAX ? (int64_t)INT32_MAX + 1 : (int64_t)s->u)
                                   : s->i;
        if (v < INT32_MIN || v > INT32_MAX)
            return CONV_OVERFLOW;
        int32_t w = (int32_t)v;
        memcpy(slot, &w, 4);
        return CONV_OK;
    }
    *(unsigned char *)slot = (unsigned char)(s->u != 0);
    return CONV_OK;
}

/* The element kinds a dtype cannot take at all, as TypeError (the message
 * the nested-list form's elements would get). */
static int check_kind(const elem_format *f, sw_dtype dt)
{
    const char *pyname = f->kind == K_FLOAT ? "float" : f->kind == K_BOOL ? "bool" : "int";
    if (dt == SW_DT_INT32 && (f->kind == K_FLOAT || f->kind == K_BOOL)) {
        PyErr_Format(PyExc_TypeError, "Int32 value must be an integer, not %s", pyname);
        return -1;
    }
    if (dt == SW_DT_BOOL && f->kind != K_BOOL) {
        PyErr_Format(PyExc_TypeError, "Bool value must be True or False, not %s", pyname);
        return -1;
    }
    return 0;
}

typedef struct {
    const Py_buffer *view;
    elem_format fmt;
    sw_dtype dt;
    char *out;
    size_t slot_bytes;
    int64_t bad; /* ordinal of the first value that did not fit, or -1 */
    scalar bad_value;
} fill_job;

/* Row converters: n elements `stride` bytes apart into n consecutive
 * slots. They return the index of the first element that does not fit
 * (Int32 overflow), else -1. Typed loops for the native-order formats;
 * the general reader (byte swaps, half floats) otherwise. */
typedef int64_t (*row_fn)(const char *p, Py_ssize_t stride, int64_t n, void *out);

#define ROW_TO_F32(name, T, EXPR)                                               \
    static int64_t name(const char *p, Py_ssize_t stride, int64_t n, void *out) \
    {                                                                           \
        float *o = out;                                                         \
        if (stride == (Py_ssize_t)sizeof(T)) { /* contiguous: vectorizable */  \
            for (int64_t k = 0; k < n; k++) {                                   \
                T v;                                                            \
                memcpy(&v, p + k * (Py_ssize_t)sizeof(T), sizeof v);            \
                o[k] = EXPR;                                                    \
            }                                                                   \
            return -1;                                                          \
        }                                                                       \
        for (int64_t k = 0; k < n; k++, p += stride) {                          \
            T v;                                                                \
            memcpy(&v, p, sizeof v);                                            \
            o[k] = EXPR;                                                        \
        }                                                                       \
        return -1;                                                              \
    }
#define ROW_TO_I32(name, T, TOO_BIG)                                            \
    static int64_t name(const char *p, Py_ssize_t stride, int64_t n, void *out) \
    {                                                                           \
        int32_t *o = out;                                                       \
        if (stride == (Py_ssize_t)sizeof(T)) { /* contiguous: vectorizable */  \
            for (int64_t k = 0; k < n; k++) {                                   \
                T v;                                                            \
                memcpy(&v, p + k * (Py_ssize_t)sizeof(T), sizeof v);            \
                if (TOO_BIG)                                                    \
                    return k;                                                   \
                o[k] = (int32_t)v;                                              \
            }                                                                   \
            return -1;                                                          \
        }                                                                       \
        for (int64_t k = 0; k < n; k++, p += stride) {                          \
            T v;                                                                \
            memcpy(&v, p, sizeof v);                                            \
            if (TOO_BIG)                                                        \
                return k;                                                       \
            o[k] = (int32_t)v;                                                  \
        }                                                                       \
        return -1;                                                              \
    }

ROW_TO_F32(f64_f32, double, sw_py_round_to_float(v))
ROW_TO_F32(f32_f32, float, v)
ROW_TO_F32(i8_f32, int8_t, (float)v)
ROW_TO_F32(i16_f32, int16_t, (float)v)
ROW_TO_F32(i32_f32, int32_t, (float)v)
ROW_TO_F32(i64_f32, int64_t, (float)v)
ROW_TO_F32(u8_f32, uint8_t, (float)v)
ROW_TO_F32(u16_f32, uint16_t, (float)v)
ROW_TO_F32(u32_f32, uint32_t, (float)v)
ROW_TO_F32(u64_f32, uint64_t, (float)v)
ROW_TO_F32(b_f32, uint8_t, v ? 1.0f : 0.0f)
ROW_TO_I32(i8_i32, int8_t, 0)
ROW_TO_I32(i16_i32, int16_t, 0)
ROW_TO_I32(i32_i32, int32_t, 0)
ROW_TO_I32(i64_i32, int64_t, v < INT32_MIN || v > INT32_MAX)
ROW_TO_I32(u8_i32, uint8_t, 0)
ROW_TO_I32(u16_i32, uint16_t, 0)
ROW_TO_I32(u32_i32, uint32_t, v > INT32_MAX)
ROW_TO_I32(u64_i32, uint64_t, v > INT32_MAX)

static int64_t b_b(const char *p, Py_ssize_t stride, int64_t n, void *out)
{
    uint8_t *o = out;
    for (int64_t k = 0; k < n; k++, p += stride)
        o[k] = *(const uint8_t *)p != 0;
    return -1;
}

static row_fn typed_row(const elem_format *f, sw_dtype dt)
{
    static const row_fn to_f32[2][4] = {{i8_f32, i16_f32, i32_f32, i64_f32},
                                        {u8_f32, u16_f32, u32_f32, u64_f32}};
    static const row_fn to_i32[2][4] = {{i8_i32, i16_i32, i32_i32, i64_i32},
                                        {u8_i32, u16_i32, u32_i32, u64_i32}};
    int w = f->size == 1 ? 0 : f->size == 2 ? 1 : f->size == 4 ? 2 : 3;
    if (f->swap)
        return NULL;
    if (f->kind == K_BOOL)
        return dt == SW_DT_BOOL ? b_b : dt == SW_DT_FLOAT32 ? b_f32 : NULL;
    if (f->kind == K_FLOAT && dt == SW_DT_FLOAT32)
        return f->size == 8 ? f64_f32 : f->size == 4 ? f32_f32 : NULL;
    if (f->kind == K_SINT || f->kind == K_UINT) {
        int u = f->kind == K_UINT;
        return dt == SW_DT_FLOAT32 ? to_f32[u][w] : dt == SW_DT_INT32 ? to_i32[u][w] : NULL;
    }
    return NULL;
}

/* The general row: any format this file reads, one element at a time. */
static int64_t general_row(fill_job *job, const char *p, Py_ssize_t stride, int64_t n,
                           char *out)
{
    for (int64_t k = 0; k < n; k++, p += stride) {
        scalar s;
        read_scalar(p, &job->fmt, &s);
        if (convert(&s, &job->fmt, job->dt, out + (size_t)k * job->slot_bytes) != CONV_OK) {
            job->bad_value = s;
            return k;
        }
    }
    return -1;
}

/* The walk order: the exporter's axes by increasing |stride| (ties keep
 * axis order), so the copy reads memory as sequentially as the array
 * allows, the way ndarray.copy(order="K") does. */
static void walk_order(const Py_buffer *v, int *order)
{
    for (int d = 0; d < v->ndim; d++) {
        Py_ssize_t s = v->strides[d] < 0 ? -v->strides[d] : v->strides[d];
        int k = d;
        while (k > 0) {
            Py_ssize_t t = v->strides[order[k - 1]];
            if ((t < 0 ? -t : t) <= s)
                break;
            order[k] = order[k - 1];
            k--;
        }
        order[k] = d;
    }
}

/* Every element once, no gaps, positive strides, in walk order: the source
 * is one run of consecutive elements (C order, Fortran order, any
 * permutation). */
static int is_dense(const Py_buffer *v, const int *order)
{
    Py_ssize_t expect = v->itemsize;
    for (int k = 0; k < v->ndim; k++) {
        int d = order[k];
        if (v->shape[d] == 1)
            continue;
        if (v->strides[d] != expect)
            return 0;
        expect *= v->shape[d];
    }
    return 1;
}

/* Elements in walk order into consecutive slots: rows along order[0], an
 * odometer over the other axes. No Python calls. */
static void fill(fill_job *job, const int *order, int64_t *digit)
{
    const Py_buffer *v = job->view;
    const char *p = v->buf;
    int d0 = order[0];
    int64_t rows = 1, n0 = v->shape[d0];
    Py_ssize_t s0 = v->strides[d0];
    for (int k = 1; k < v->ndim; k++)
        rows *= v->shape[order[k]];
    row_fn typed = typed_row(&job->fmt, job->dt);
    char *out = job->out;
    size_t row_bytes = (size_t)n0 * job->slot_bytes;
    for (int64_t r = 0; r < rows; r++, out += row_bytes) {
        int64_t bad = typed ? typed(p, s0, n0, out) : general_row(job, p, s0, n0, out);
        if (bad >= 0) {
            if (typed)
                read_scalar(p + bad * s0, &job->fmt, &job->bad_value);
            job->bad = r * n0 + bad;
            return;
        }
        for (int k = 1; k < v->ndim; k++) {
            int d = order[k];
            if (++digit[k] < v->shape[d]) {
                p += v->strides[d];
                break;
            }
            p -= v->strides[d] * (v->shape[d] - 1);
            digit[k] = 0;
        }
    }
}

/* The tensor's layout: packed in walk order (the exporter's own order for a
 * dense array: row_major for C order, column_major for Fortran order), so
 * coordinate (i, j, ...) is a[i, j, ...] and the copy fills the slots
 * sequentially. */
static PyObject *copy_layout(const Py_buffer *v, const int *order)
{
    int64_t extents[PyBUF_MAX_NDIM], estr[PyBUF_MAX_NDIM];
    uint8_t profile[PyBUF_MAX_NDIM];
    int64_t run = 1;
    for (int k = 0; k < v->ndim; k++) {
        int d = order[k];
        extents[d] = v->shape[d];
        profile[d] = SW_NODE_LEAF;
        estr[d] = run;
        run *= v->shape[d];
    }
    sw_error err;
    sw_layout *L = sw_layout_new(v->ndim, profile, extents, estr, &err);
    if (!L) {
        sw_py_raise(&err);
        return NULL;
    }
    return sw_py_layout_wrap(L);
}

/* Dense: n elements in memory order into n consecutive slots. */
static void fill_dense(fill_job *job, int64_t n)
{
    const Py_buffer *v = job->view;
    if (!job->fmt.swap && job->fmt.size == (Py_ssize_t)job->slot_bytes &&
        ((job->fmt.kind == K_FLOAT && job->dt == SW_DT_FLOAT32) ||
         (job->fmt.kind == K_SINT && job->dt == SW_DT_INT32))) {
        memcpy(job->out, v->buf, (size_t)n * job->slot_bytes); /* same bits */
        return;
    }
    row_fn typed = typed_row(&job->fmt, job->dt);
    int64_t bad = typed ? typed(v->buf, v->itemsize, n, job->out)
                        : general_row(job, v->buf, v->itemsize, n, job->out);
    if (bad >= 0) {
        if (typed)
            read_scalar((const char *)v->buf + bad * v->itemsize, &job->fmt, &job->bad_value);
        job->bad = bad;
    }
}
static int check_shape(const Py_buffer *v)
{
    if (v->ndim == 0) {
        PyErr_SetString(PyExc_ValueError,
                        "values must be a non-empty list or tuple; a 0-dimensional array "
                        "holds a single value: wrap it in a list, e.g. tensor([a.item()])");
        return -1;
    }
    for (int d = 0; d < v->ndim; d++) {
        if (v->shape[d] == 0) {
            PyErr_SetString(PyExc_ValueError, "values must not contain empty levels");
            return -1;
        }
    }
    return 0;
}

/* "int64", "float32", ...: the element type as NumPy names it. */
static const char *format_name(const elem_format *f)
{
    static const char *const ints[2][4] = {{"int8", "int16", "int32", "int64"},
                                           {"uint8", "uint16", "uint32", "uint64"}};
    int w = f->size == 1 ? 0 : f->size == 2 ? 1 : f->size == 4 ? 2 : 3;
    if (f->kind == K_BOOL)
        return "bool";
    if (f->kind == K_FLOAT)
        return f->size == 2 ? "float16" : f->size == 4 ? "float32" : "float64";
    return ints[f->kind == K_UINT][w];
}

static PyObject *raise_overflow(const fill_job *job, int dtype_given)
{
    char value[32];
    if (job->bad_value.is_unsigned)
        snprintf(value, sizeof value, "%llu", (unsigned long long)job->bad_value.u);
    else
        snprintf(value, sizeof value, "%lld", (long long)job->bad_value.i);
    if (dtype_given)
        PyErr_Format(PyExc_OverflowError, "Int32 value %s is out of range [-2**31, 2**31-1]",
                     value);
    else
        PyErr_Format(PyExc_OverflowError,
                     "Int32 value %s is out of range [-2**31, 2**31-1]: an %s array becomes "
                     "an Int32 tensor when its values fit; pass dtype=DType.Float32 to store "
                     "them rounded to Float32",
                     value, format_name(&job->fmt));
    return NULL;
}

/* Without dtype=, the array's own kind decides: floats become Float32,
 * bools Bool, integers Int32 (refused when a value does not fit). */
static sw_dtype natural_dtype(const elem_format *f)
{
    return f->kind == K_FLOAT ? SW_DT_FLOAT32 : f->kind == K_BOOL ? SW_DT_BOOL : SW_DT_INT32;
}

static PyObject *from_view(const Py_buffer *view, const elem_format *fmt, sw_dtype dt,
                           int dtype_given)
{
    if (!dtype_given)
        dt = natural_dtype(fmt);
    if (check_shape(view) < 0 || check_kind(fmt, dt) < 0)
        return NULL;
    int order[PyBUF_MAX_NDIM];
    walk_order(view, order);
    int dense = is_dense(view, order);
    PyObject *layout = copy_layout(view, order);
    if (!layout)
        return NULL;
    PyObject *result = NULL;
    const sw_layout *L = SwLayout_CORE(layout);
    PyObject *cpu = sw_py_cpu_new(dt, L->cosize, 1, 0);
    if (!cpu)
        goto done;
    fill_job job = {view, *fmt, dt, ((SwHostCarrierObject *)cpu)->data,
                    sw_dtype_slot_bytes(dt), -1, {0, 0, 0, 0}};
    int64_t digit[PyBUF_MAX_NDIM] = {0};
    if (L->size * (int64_t)job.slot_bytes > 16384) {
        Py_BEGIN_ALLOW_THREADS
        if (dense)
            fill_dense(&job, L->size);
        else
            fill(&job, order, digit);
        Py_END_ALLOW_THREADS
    } else if (dense) {
        fill_dense(&job, L->size);
    } else {
        fill(&job, order, digit);
    }
    if (job.bad >= 0)
        raise_overflow(&job, dtype_given);
    else
        result = sw_py_tensor_new1(cpu, 0, layout);
done:
    Py_XDECREF(cpu);
    Py_DECREF(layout);
    return result;
}

/* A numeric view: the copy; complex: TypeError; anything else: NULL with
 * no exception (not numbers: F-2 applies). */
static PyObject *from_numeric_view(const Py_buffer *view, sw_dtype dt, int dtype_given)
{
    elem_format fmt = parse_format(view->format, view->itemsize);
    if (fmt.kind == K_COMPLEX)
        return PyErr_Format(PyExc_TypeError,
                            "complex values cannot be stored in a %s tensor; pass the real "
                            "part (a.real) or the magnitude (abs(a))",
                            sw_dtype_info_of(dtype_given ? dt : SW_DT_FLOAT32)->name);
    if (fmt.kind == K_OTHER)
        return NULL;
    return from_view(view, &fmt, dt, dtype_given);
}

static PyObject *from_buffer(PyObject *values, sw_dtype dt, int dtype_given)
{
    Py_buffer view;
    if (PyObject_GetBuffer(values, &view, PyBUF_RECORDS_RO) < 0)
        return NULL;
    PyObject *result = from_numeric_view(&view, dt, dtype_given);
    PyBuffer_Release(&view);
    return result;
}

/* ---- DLPack (PyTorch, JAX, NumPy, CuPy, ...) ------------------------------ */

/* struct-module format of a DLPack element type, or NULL when this file
 * cannot read it. */
static const char *dl_format(DLDataType t)
{
    if (t.lanes != 1)
        return NULL;
    switch (t.code) {
    case kDLInt:
        return t.bits == 8 ? "b" : t.bits == 16 ? "h" : t.bits == 32 ? "i" : t.bits == 64 ? "q"
                                                                                           : NULL;
    case kDLUInt:
        return t.bits == 8 ? "B" : t.bits == 16 ? "H" : t.bits == 32 ? "I" : t.bits == 64 ? "Q"
                                                                                           : NULL;
    case kDLFloat:
        return t.bits == 16 ? "e" : t.bits == 32 ? "f" : t.bits == 64 ? "d" : NULL;
    case kDLBool:
        return t.bits == 8 ? "?" : NULL;
    case kDLComplex:
        return t.bits == 64 ? "Zf" : t.bits == 128 ? "Zd" : NULL;
    default:
        return NULL;
    }
}

static const char *dl_type_name(DLDataType t)
{
    switch (t.code) {
    case kDLBfloat: return "bfloat16";
    case kDLOpaqueHandle: return "opaque";
    case kDLComplex: return "complex";
    case kDLBool: return "bool";
    case kDLFloat: return "float";
    default: return "integer";
    }
}

/* The copy of one DLTensor, viewed as a Py_buffer. */
static PyObject *from_dltensor(const DLTensor *dl, sw_dtype dt, int dtype_given)
{
    if (dl->device.device_type != kDLCPU && dl->device.device_type != kDLCUDAHost &&
        dl->device.device_type != kDLROCMHost)
        return PyErr_Format(PyExc_ValueError,
                            "the array lives on a device (DLPack device type %d), not in "
                            "host memory; copy it to the CPU first, e.g. a.cpu()",
                            (int)dl->device.device_type);
    const char *format = dl_format(dl->dtype);
    if (!format)
        return PyErr_Format(PyExc_TypeError,
                            "%s values (%d bits, %d lanes) cannot be stored in a tensor; "
                            "convert the array to float32, int32 or bool first, e.g. "
                            "a.float()",
                            dl_type_name(dl->dtype), (int)dl->dtype.bits,
                            (int)dl->dtype.lanes);
    if (dl->ndim < 0 || dl->ndim > PyBUF_MAX_NDIM)
        return PyErr_Format(PyExc_ValueError, "arrays of %d dimensions are not supported "
                            "(at most %d)", (int)dl->ndim, PyBUF_MAX_NDIM);
    Py_ssize_t shape[PyBUF_MAX_NDIM], strides[PyBUF_MAX_NDIM];
    Py_ssize_t itemsize = (Py_ssize_t)(dl->dtype.bits / 8);
    Py_ssize_t run = itemsize;
    for (int d = dl->ndim - 1; d >= 0; d--) {
        if (dl->shape[d] < 0)
            return PyErr_Format(PyExc_ValueError,
                                "the array's DLPack shape has a negative extent (%lld)",
                                (long long)dl->shape[d]);
        shape[d] = (Py_ssize_t)dl->shape[d];
        strides[d] = dl->strides ? (Py_ssize_t)dl->strides[d] * itemsize : run;
        run *= shape[d];
    }
    Py_buffer view;
    memset(&view, 0, sizeof view);
    view.buf = (char *)dl->data + dl->byte_offset;
    view.itemsize = itemsize;
    view.ndim = dl->ndim;
    view.format = (char *)format;
    view.shape = shape;
    view.strides = strides;
    view.readonly = 1;
    return from_numeric_view(&view, dt, dtype_given);
}

/* values.__dlpack__(): the versioned capsule when the producer offers it,
 * else the legacy one. The capsule is renamed "used_..." once we own the
 * managed tensor; its deleter runs after the copy. */
static PyObject *from_dlpack(PyObject *values, sw_dtype dt, int dtype_given)
{
    PyObject *capsule = NULL;
    PyObject *meth = PyObject_GetAttrString(values, "__dlpack__");
    if (!meth)
        return NULL;
    PyObject *kw = Py_BuildValue("{s:(ii)}", "max_version", DLPACK_MAJOR_VERSION,
                                 DLPACK_MINOR_VERSION);
    PyObject *noargs = PyTuple_New(0);
    if (kw && noargs) {
        capsule = PyObject_Call(meth, noargs, kw);
        if (!capsule && PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear(); /* a producer older than DLPack 1.0 */
            capsule = PyObject_CallNoArgs(meth);
        }
    }
    Py_XDECREF(kw);
    Py_XDECREF(noargs);
    Py_DECREF(meth);
    if (!capsule)
        return NULL;
    PyObject *result = NULL;
    if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
        DLManagedTensorVersioned *m = PyCapsule_GetPointer(capsule, "dltensor_versioned");
        if (m->version.major != DLPACK_MAJOR_VERSION) {
            PyErr_Format(PyExc_BufferError, "DLPack version %u.%u is not supported (1.x is)",
                         m->version.major, m->version.minor);
        } else if (PyCapsule_SetName(capsule, "used_dltensor_versioned") == 0) {
            result = from_dltensor(&m->dl_tensor, dt, dtype_given);
            if (m->deleter)
                m->deleter(m);
        }
    } else if (PyCapsule_IsValid(capsule, "dltensor")) {
        DLManagedTensor *m = PyCapsule_GetPointer(capsule, "dltensor");
        if (PyCapsule_SetName(capsule, "used_dltensor") == 0) {
            result = from_dltensor(&m->dl_tensor, dt, dtype_given);
            if (m->deleter)
                m->deleter(m);
        }
    } else {
        PyErr_Format(PyExc_TypeError,
                     "%.100s.__dlpack__() returned %.100s, not an unused DLPack capsule",
                     Py_TYPE(values)->tp_name, Py_TYPE(capsule)->tp_name);
    }
    Py_DECREF(capsule);
    return result;
}

/* 1 when `o` has attribute `name`, 0 when not, -1 on another error. */
static int has_attr(PyObject *o, const char *name)
{
    PyObject *a = PyObject_GetAttrString(o, name);
    if (a) {
        Py_DECREF(a);
        return 1;
    }
    if (!PyErr_ExceptionMatches(PyExc_AttributeError))
        return -1;
    PyErr_Clear();
    return 0;
}

PyObject *sw_py_friendly_from_buffer(PyObject *values, sw_dtype dt, int dtype_given)
{
    if (PyList_Check(values) || PyTuple_Check(values) || PyType_Check(values))
        return NULL; /* a class (np.ndarray itself) is not an array */
    if (PyObject_CheckBuffer(values))
        return from_buffer(values, dt, dtype_given);
    int has = has_attr(values, "__dlpack__");
    if (has < 0)
        return NULL;
    if (has) {
        PyObject *result = from_dlpack(values, dt, dtype_given);
        /* A producer that cannot export this array over DLPack (a strideweave
         * Tensor on a FileBacked carrier, ...) may still offer __array__. */
        if (result || !PyErr_ExceptionMatches(PyExc_BufferError))
            return result;
        PyObject *exc = sw_py_take_exception();
        has = has_attr(values, "__array__");
        if (has <= 0) {
            if (has == 0)
                sw_py_restore_exception(exc);
            else
                Py_XDECREF(exc);
            return NULL;
        }
        Py_XDECREF(exc);
    } else {
        has = has_attr(values, "__array__");
        if (has <= 0)
            return NULL;
    }
    PyObject *arr = PyObject_CallMethod(values, "__array__", NULL);
    if (!arr)
        return NULL;
    PyObject *result = NULL;
    if (PyObject_CheckBuffer(arr))
        result = from_buffer(arr, dt, dtype_given);
    else
        PyErr_Format(PyExc_TypeError,
                     "%.100s.__array__() returned %.100s, which exports no buffer",
                     Py_TYPE(values)->tp_name, Py_TYPE(arr)->tp_name);
    Py_DECREF(arr);
    return result;
}
