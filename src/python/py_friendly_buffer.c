/* friendly.tensor(values) for objects exporting the buffer protocol with a
 * numeric format (NumPy arrays, array.array, memoryview, bytes): F-2
 * extended (our decision).
 *
 * The result is what the nested-list form values.tolist() would give:
 * element (i, j, ...) lands at (i, j, ...) of column_major(*shape), and
 * each element converts to the requested dtype by the same rules a Python
 * int, float or bool would (C-9): floats do not become Int32, only bools
 * become Bool, Int32 overflow is OverflowError. The values are copied into
 * fresh CPU storage in one C pass with the GIL released; the exporter's
 * memory is never adopted. Formats that are not numbers fall back to F-2
 * (which refuses what is not a list or tuple); complex numbers are refused
 * with TypeError. */
#include "sw_python.h"
#include "sw_float.h"

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
        float v = f->kind == K_FLOAT ? sw_round_to_float(s->d)
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

ROW_TO_F32(f64_f32, double, sw_round_to_float(v))
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

/* Element (i0, i1, ...) to ordinal i0 + e0*i1 + ...: rows along the first
 * index (consecutive ordinals), an odometer over the others. No Python
 * calls. */
static void fill(fill_job *job, int64_t *digit)
{
    const Py_buffer *v = job->view;
    const char *p = v->buf;
    int64_t rows = 1, n0 = v->shape[0];
    for (int d = 1; d < v->ndim; d++)
        rows *= v->shape[d];
    row_fn typed = typed_row(&job->fmt, job->dt);
    char *out = job->out;
    size_t row_bytes = (size_t)n0 * job->slot_bytes;
    for (int64_t r = 0; r < rows; r++, out += row_bytes) {
        int64_t bad = typed ? typed(p, v->strides[0], n0, out)
                            : general_row(job, p, v->strides[0], n0, out);
        if (bad >= 0) {
            if (typed)
                read_scalar(p + bad * v->strides[0], &job->fmt, &job->bad_value);
            job->bad = r * n0 + bad;
            return;
        }
        for (int d = 1; d < v->ndim; d++) {
            if (++digit[d] < v->shape[d]) {
                p += v->strides[d];
                break;
            }
            p -= v->strides[d] * (v->shape[d] - 1);
            digit[d] = 0;
        }
    }
}

static PyObject *canonical_layout(const Py_buffer *v)
{
    int64_t extents[PyBUF_MAX_NDIM];
    uint8_t profile[PyBUF_MAX_NDIM];
    for (int d = 0; d < v->ndim; d++) {
        extents[d] = v->shape[d];
        profile[d] = SW_NODE_LEAF;
    }
    sw_error err;
    sw_layout *L = sw_layout_canonical(v->ndim, profile, extents, &err);
    if (!L) {
        sw_py_raise(&err);
        return NULL;
    }
    return sw_py_layout_wrap(L);
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

static PyObject *raise_overflow(const fill_job *job)
{
    if (job->bad_value.is_unsigned)
        PyErr_Format(PyExc_OverflowError, "Int32 value %llu is out of range [-2**31, 2**31-1]",
                     (unsigned long long)job->bad_value.u);
    else
        PyErr_Format(PyExc_OverflowError, "Int32 value %lld is out of range [-2**31, 2**31-1]",
                     (long long)job->bad_value.i);
    return NULL;
}

static PyObject *from_view(const Py_buffer *view, const elem_format *fmt, sw_dtype dt)
{
    if (check_shape(view) < 0 || check_kind(fmt, dt) < 0)
        return NULL;
    PyObject *layout = canonical_layout(view);
    if (!layout)
        return NULL;
    PyObject *result = NULL;
    PyObject *cpu = sw_py_cpu_new(dt, SwLayout_CORE(layout)->cosize, 1, 0);
    if (!cpu)
        goto done;
    fill_job job = {view, *fmt, dt, ((SwHostCarrierObject *)cpu)->data,
                    sw_dtype_slot_bytes(dt), -1, {0, 0, 0, 0}};
    int64_t digit[PyBUF_MAX_NDIM] = {0};
    if (SwLayout_CORE(layout)->size * (int64_t)job.slot_bytes > 16384) {
        Py_BEGIN_ALLOW_THREADS
        fill(&job, digit);
        Py_END_ALLOW_THREADS
    } else {
        fill(&job, digit);
    }
    if (job.bad >= 0)
        raise_overflow(&job);
    else
        result = sw_py_tensor_new1(cpu, 0, layout);
done:
    Py_XDECREF(cpu);
    Py_DECREF(layout);
    return result;
}

PyObject *sw_py_friendly_from_buffer(PyObject *values, sw_dtype dt)
{
    if (PyList_Check(values) || PyTuple_Check(values) || !PyObject_CheckBuffer(values))
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(values, &view, PyBUF_RECORDS_RO) < 0)
        return NULL;
    elem_format fmt = parse_format(view.format, view.itemsize);
    PyObject *result = NULL;
    if (fmt.kind == K_COMPLEX)
        PyErr_Format(PyExc_TypeError,
                     "complex values cannot be stored in a %s tensor; pass the real "
                     "part (a.real) or the magnitude (abs(a))",
                     sw_dtype_info_of(dt)->name);
    else if (fmt.kind != K_OTHER)
        result = from_view(&view, &fmt, dt);
    PyBuffer_Release(&view);
    return result;
}
