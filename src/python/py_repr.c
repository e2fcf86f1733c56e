/* What print() and the prompt show: Tensor.__str__ and Tensor.__repr__ with
 * values, NumPy-style, and the carriers' repr.
 *
 * str(t) is the values then one metadata line; repr(t) (T-14, revised) is
 * Tensor(values, dtype=..., carrier=..., offset=..., layout=...). repr reads
 * values only when the carrier can serve them now without waiting or
 * changing anything; otherwise it names why not (released, pending move,
 * evicted, non-resident tiles). The layout of the text follows
 * numpy.array2string with NumPy's defaults
 * (precision 8, threshold 1000, edgeitems 3, linewidth 75, separator ' '),
 * over the leaf-mode shape, so str(t) reads like str(numpy.asarray(t)).
 * Past the threshold only the edge elements are read, which is what keeps
 * printing a huge tensor instant. Any read failure (released carrier,
 * pending destination, evicted tier, a hook raising) prints a marker
 * carrying the read's message instead of raising. NumPy itself is never
 * imported. */
#include "sw_carrier.h"
#include "sw_tiled.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THRESHOLD 1000
#define EDGEITEMS 3
#define LINEWIDTH 75
#define PRECISION 8

/* ---- a growable text buffer ------------------------------------------------ */

typedef struct {
    char *p;
    size_t len, cap;
    int failed;
} text;

static void put_n(text *t, const char *s, size_t n)
{
    if (t->failed)
        return;
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 256;
        while (t->len + n + 1 > cap)
            cap *= 2;
        char *p = PyMem_Realloc(t->p, cap);
        if (!p) {
            t->failed = 1;
            return;
        }
        t->p = p;
        t->cap = cap;
    }
    memcpy(t->p + t->len, s, n);
    t->len += n;
    t->p[t->len] = '\0';
}

static void put(text *t, const char *s)
{
    put_n(t, s, strlen(s));
}

static void put_spaces(text *t, size_t n)
{
    while (n--)
        put_n(t, " ", 1);
}

/* ---- element formatting (NumPy's FloatingFormat/IntegerFormat/BoolFormat) */

typedef struct {
    sw_dtype dt;
    int64_t n;
    double *f;      /* Float32 values (as doubles) */
    long long *i;   /* Int32 / Bool values */
    /* floats */
    int exp_mode;
    int pad_left, pad_right, exp_size, precision;
    /* ints and bools */
    int width;
} elements;

/* Shortest decimal digits that read back as the same float32 (what
 * NumPy's dragon4 in unique mode prints): digits without a point in
 * `digits`, value = 0.d1d2... * 10^(*exp10 + 1). */
static void shortest(float v, char *digits, int *exp10)
{
    char buf[40];
    for (int p = 1; p <= 9; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, (double)v);
        if (strtof(buf, NULL) == v)
            break;
    }
    const char *s = buf[0] == '-' ? buf + 1 : buf;
    int n = 0;
    for (; *s && *s != 'e'; s++)
        if (*s >= '0' && *s <= '9')
            digits[n++] = *s;
    while (n > 1 && digits[n - 1] == '0')
        n--;
    digits[n] = '\0';
    *exp10 = *s == 'e' ? atoi(s + 1) : 0;
}

/* Positional form split at the point: integer part (with sign) and
 * fraction, at most PRECISION fraction digits, trailing zeros dropped. */
static void positional(double x, char *ip, char *fp)
{
    char digits[16], buf[64];
    int e;
    float v = (float)x;
    shortest(v, digits, &e);
    int nd = (int)strlen(digits);
    if (v == 0.0f) {
        strcpy(digits, "0");
        nd = 1;
        e = 0;
    }
    if (nd - 1 - e > PRECISION) {
        /* more digits than the precision allows: round there */
        snprintf(buf, sizeof buf, "%.*f", PRECISION, x);
        char *dot = strchr(buf, '.');
        *dot = '\0';
        strcpy(ip, buf);
        size_t fl = strlen(dot + 1);
        while (fl > 0 && dot[fl] == '0')
            dot[fl--] = '\0';
        strcpy(fp, dot + 1);
        return;
    }
    char *o = ip;
    if (signbit(x))
        *o++ = '-';
    if (e < 0) {
        *o++ = '0';
        *o = '\0';
        int z = -e - 1;
        memset(fp, '0', (size_t)z);
        strcpy(fp + z, digits);
        return;
    }
    for (int k = 0; k <= e; k++)
        *o++ = k < nd ? digits[k] : '0';
    *o = '\0';
    strcpy(fp, nd > e + 1 ? digits + e + 1 : "");
}

/* Scientific form: sign and first digit in ip, the other digits in fp,
 * the exponent in *exp10. */
static void scientific(double x, char *ip, char *fp, int *exp10)
{
    char digits[16];
    float v = (float)x;
    shortest(v, digits, exp10);
    if (v == 0.0f) {
        strcpy(digits, "0");
        *exp10 = 0;
    }
    snprintf(ip, 4, "%s%c", signbit(x) ? "-" : "", digits[0]);
    strcpy(fp, digits + 1);
}

static int exp_digits(int e)
{
    int d = 1;
    for (e = abs(e); e >= 10; e /= 10)
        d++;
    return d < 2 ? 2 : d;
}

static void float_format_params(elements *el)
{
    double maxv = 0.0, minv = INFINITY;
    int any_finite = 0, neg_inf = 0, nonfinite = 0;
    for (int64_t k = 0; k < el->n; k++) {
        double x = el->f[k];
        if (!isfinite(x)) {
            nonfinite = 1;
            neg_inf |= isinf(x) && x < 0;
            continue;
        }
        any_finite = 1;
        double a = fabs(x);
        if (a != 0.0) {
            maxv = a > maxv ? a : maxv;
            minv = a < minv ? a : minv;
        }
    }
    el->exp_mode = maxv >= 1e8 || (minv != INFINITY && (minv < 1e-4 || maxv / minv > 1e3));
    el->pad_left = el->pad_right = el->precision = 0;
    el->exp_size = -1;
    char ip[64], fp[64];
    for (int64_t k = 0; any_finite && k < el->n; k++) {
        if (!isfinite(el->f[k]))
            continue;
        int e;
        if (el->exp_mode) {
            scientific(el->f[k], ip, fp, &e);
            int es = exp_digits(e);
            el->exp_size = es > el->exp_size ? es : el->exp_size;
            el->precision = (int)strlen(fp) > el->precision ? (int)strlen(fp) : el->precision;
        } else {
            positional(el->f[k], ip, fp);
            el->pad_right = (int)strlen(fp) > el->pad_right ? (int)strlen(fp) : el->pad_right;
        }
        el->pad_left = (int)strlen(ip) > el->pad_left ? (int)strlen(ip) : el->pad_left;
    }
    if (nonfinite && !el->exp_mode) {
        int offset = el->pad_right + 1;
        int need = 3 + neg_inf - offset;
        el->pad_left = need > el->pad_left ? need : el->pad_left;
    }
}

static void int_format_params(elements *el)
{
    char buf[32];
    el->width = 0;
    for (int64_t k = 0; k < el->n; k++) {
        int w = el->dt == SW_DT_BOOL ? 5
                                     : snprintf(buf, sizeof buf, "%lld", el->i[k]);
        el->width = w > el->width ? w : el->width;
    }
}

/* The k-th element's text, padded to the common width. */
static void format_element(const elements *el, int64_t k, char *out, size_t cap)
{
    if (el->dt == SW_DT_BOOL) {
        snprintf(out, cap, "%*s", el->width, el->i[k] ? "True" : "False");
        return;
    }
    if (el->dt != SW_DT_FLOAT32) {
        snprintf(out, cap, "%*lld", el->width, el->i[k]);
        return;
    }
    double x = el->f[k];
    char ip[64], fp[64];
    if (!isfinite(x)) {
        const char *s = isnan(x) ? "nan" : x < 0 ? "-inf" : "inf";
        int total = el->exp_mode ? el->pad_left + el->precision + 1 + 2 + el->exp_size
                                 : el->pad_left + el->pad_right + 1;
        snprintf(out, cap, "%*s", total, s);
        return;
    }
    if (el->exp_mode) {
        /* NumPy pads every mantissa to the common precision with further
         * digits of the exact value (min_digits), which is what %.*e
         * prints. */
        char buf[64];
        snprintf(buf, sizeof buf, "%.*e", el->precision, x);
        char *e = strchr(buf, 'e');
        int ex = atoi(e + 1);
        *e = '\0';
        snprintf(out, cap, "%*s%se%c%0*d", el->pad_left + 1 + el->precision - (el->precision == 0),
                 buf, el->precision == 0 ? "." : "", ex < 0 ? '-' : '+', el->exp_size, abs(ex));
        return;
    }
    positional(x, ip, fp);
    snprintf(out, cap, "%*s.%-*s", el->pad_left, ip, el->pad_right, fp);
}

/* ---- the nested brackets (numpy's _formatArray) -------------------------- */

typedef struct {
    const elements *el;
    int32_t ndim;
    const int64_t *extents;
    int64_t next;    /* next element to print, in displayed row-major order */
    text *out;
    int summarize;
    char word[128];
} printer;

static void extend_line(text *s, text *line, const char *word, size_t width,
                        size_t prefix_len)
{
    int wrap = line->len + strlen(word) > width && line->len > prefix_len;
    if (wrap) {
        size_t n = line->len;
        while (n > 0 && line->p[n - 1] == ' ')
            n--;
        put_n(s, line->p, n);
        put(s, "\n");
        line->len = 0;
        put_spaces(line, prefix_len);
    }
    put(line, word);
}

static int recurse(printer *pr, text *s, int32_t axis, size_t hang, size_t width);

static int one_row(printer *pr, text *s, int32_t axis, size_t hang, size_t width,
                   int64_t len, int show_summary)
{
    size_t elem_width = width - 1; /* max(len(separator.rstrip()), len(']')) */
    text line = {NULL, 0, 0, 0};
    put_spaces(&line, hang);
    int64_t nshown = show_summary ? 2 * EDGEITEMS : len;
    for (int64_t i = 0; i < nshown; i++) {
        if (show_summary && i == EDGEITEMS) {
            extend_line(s, &line, "...", elem_width, hang);
            put(&line, " ");
        }
        format_element(pr->el, pr->next++, pr->word, sizeof pr->word);
        extend_line(s, &line, pr->word, elem_width, hang);
        if (i != nshown - 1)
            put(&line, " ");
    }
    if (line.p)
        put_n(s, line.p, line.len);
    int failed = line.failed;
    PyMem_Free(line.p);
    (void)axis;
    return failed ? -1 : 0;
}

static int recurse(printer *pr, text *s, int32_t axis, size_t hang, size_t width)
{
    int32_t left = pr->ndim - axis;
    int64_t len = pr->extents[axis];
    int show_summary = pr->summarize && 2 * EDGEITEMS < len;
    text body = {NULL, 0, 0, 0};
    int rc = 0;
    if (Py_EnterRecursiveCall(" while printing a tensor"))
        return -1;
    if (left == 1) {
        rc = one_row(pr, &body, axis, hang, width, len, show_summary);
    } else {
        int64_t nshown = show_summary ? 2 * EDGEITEMS : len;
        for (int64_t i = 0; i < nshown && rc == 0; i++) {
            if (show_summary && i == EDGEITEMS) {
                put_spaces(&body, hang);
                put(&body, "...");
                for (int32_t k = 0; k < left - 1; k++)
                    put(&body, "\n");
            }
            put_spaces(&body, hang);
            rc = recurse(pr, &body, axis + 1, hang + 1, width - 1);
            if (i != nshown - 1)
                for (int32_t k = 0; k < left - 1; k++)
                    put(&body, "\n");
        }
    }
    Py_LeaveRecursiveCall();
    if (rc == 0 && !body.failed) {
        put(s, "[");
        if (body.p && body.len > hang)
            put_n(s, body.p + hang, body.len - hang);
        put(s, "]");
    }
    rc = rc < 0 || body.failed ? -1 : 0;
    PyMem_Free(body.p);
    return rc;
}

/* ---- reading the displayed elements ---------------------------------------- */

/* Displayed positions along one axis: all, or the edges when summarized. */
static int64_t shown_count(int64_t extent, int summarize)
{
    return summarize && extent > 2 * EDGEITEMS ? 2 * EDGEITEMS : extent;
}

static int64_t shown_index(int64_t extent, int summarize, int64_t i)
{
    if (!(summarize && extent > 2 * EDGEITEMS) || i < EDGEITEMS)
        return i;
    return extent - 2 * EDGEITEMS + i;
}

/* Read the displayed elements in row-major order of the leaf-mode shape
 * (last mode fastest: the order NumPy prints). */
static int read_shown(PyObject *tensor, const sw_layout *L, int64_t offset, int summarize,
                      elements *el)
{
    int32_t nd = L->nleaves;
    int64_t n = 1;
    for (int32_t j = 0; j < nd; j++)
        n *= shown_count(L->extents[j], summarize);
    el->n = n;
    el->f = el->dt == SW_DT_FLOAT32 ? PyMem_Calloc((size_t)n, sizeof(double)) : NULL;
    el->i = el->dt != SW_DT_FLOAT32 ? PyMem_Calloc((size_t)n, sizeof(long long)) : NULL;
    int64_t *pos = PyMem_Calloc((size_t)nd + 1, sizeof(int64_t));
    if ((!el->f && !el->i) || !pos) {
        PyMem_Free(pos);
        PyErr_NoMemory();
        return -1;
    }
    for (int64_t k = 0; k < n; k++) {
        int64_t slot = offset;
        for (int32_t j = 0; j < nd; j++)
            slot += shown_index(L->extents[j], summarize, pos[j]) * L->strides[j];
        unsigned char raw[8] = {0};
        if (sw_py_tensor_read_slot(tensor, slot, raw) < 0) {
            PyMem_Free(pos);
            return -1;
        }
        if (el->dt == SW_DT_FLOAT32) {
            float f;
            memcpy(&f, raw, 4);
            el->f[k] = f;
        } else if (el->dt == SW_DT_INT32) {
            int32_t v;
            memcpy(&v, raw, 4);
            el->i[k] = v;
        } else {
            el->i[k] = raw[0] != 0;
        }
        for (int32_t j = nd - 1; j >= 0; j--) {
            if (++pos[j] < shown_count(L->extents[j], summarize))
                break;
            pos[j] = 0;
        }
    }
    PyMem_Free(pos);
    return 0;
}

/* The values block, or -1 with the read's exception set. */
static int format_values(PyObject *tensor, text *out)
{
    SwTensorObject *t = (SwTensorObject *)tensor;
    const sw_layout *L = SW_SUB_LAYOUT(&t->subs[0]);
    elements el;
    memset(&el, 0, sizeof el);
    el.dt = SwDType_ID(t->dtype);
    if (el.dt != SW_DT_FLOAT32 && el.dt != SW_DT_INT32 && el.dt != SW_DT_BOOL) {
        PyErr_Format(PyExc_NotImplementedError, "%s values cannot be printed",
                     sw_dtype_info_of(el.dt)->name);
        return -1;
    }
    int summarize = L->size > THRESHOLD;
    int rc = read_shown(tensor, L, SW_SUB_OFFSET(&t->subs[0]), summarize, &el);
    if (rc == 0) {
        if (el.dt == SW_DT_FLOAT32)
            float_format_params(&el);
        else
            int_format_params(&el);
        if (L->nleaves == 0) {
            char word[128];
            format_element(&el, 0, word, sizeof word);
            put(out, word);
        } else {
            printer pr = {&el, L->nleaves, L->extents, 0, out, summarize, {0}};
            rc = recurse(&pr, out, 0, 1, LINEWIDTH);
        }
        if (out->failed) {
            PyErr_NoMemory();
            rc = -1;
        }
    }
    PyMem_Free(el.f);
    PyMem_Free(el.i);
    return rc;
}

/* A marker in place of the values, carrying why they could not be read.
 * Only Exception subclasses become markers; KeyboardInterrupt and the like
 * propagate. 0, or -1 when the pending error must propagate. */
static int marker_from_error(text *out)
{
    if (!PyErr_ExceptionMatches(PyExc_Exception))
        return -1;
    PyObject *exc = sw_py_take_exception();
    PyObject *msg = exc ? PyObject_Str(exc) : NULL;
    Py_XDECREF(exc);
    const char *m = msg ? PyUnicode_AsUTF8(msg) : NULL;
    if (!m)
        PyErr_Clear();
    put(out, "<values unavailable: ");
    put(out, m ? m : "they could not be read");
    put(out, ">");
    Py_XDECREF(msg);
    return 0;
}

PyObject *sw_py_tensor_str(PyObject *self)
{
    SwTensorObject *t = (SwTensorObject *)self;
    text out = {NULL, 0, 0, 0};
    PyObject *result = NULL;
    Py_INCREF(self);
    if (t->nsub != 1) {
        put(&out, "<values not shown: the elements of a ");
        put(&out, sw_dtype_info_of(SwDType_ID(t->dtype))->name);
        put(&out, " tensor cannot be read one by one>");
    } else if (format_values(self, &out) < 0) {
        out.len = 0;
        if (out.p)
            out.p[0] = '\0';
        out.failed = 0;
        if (marker_from_error(&out) < 0)
            goto done;
    }
    if (out.failed) {
        PyErr_NoMemory();
        goto done;
    }
    PyObject *values = PyUnicode_FromStringAndSize(out.p ? out.p : "", (Py_ssize_t)out.len);
    if (!values)
        goto done;
    SwSubtensor *s = &t->subs[0];
    result = PyUnicode_FromFormat("%U\ndtype=%s, carrier=%s, layout=%R", values,
                                  sw_dtype_info_of(SwDType_ID(t->dtype))->name,
                                  _PyType_Name(Py_TYPE(s->carrier)), s->layout);
    Py_DECREF(values);
done:
    PyMem_Free(out.p);
    Py_DECREF(self);
    return result;
}

/* ---- repr (T-14) ----------------------------------------------------------- */

/* Why the carrier cannot serve values now without waiting or changing
 * anything, or NULL when it can (or when only reading can tell: a carrier
 * of the user's, whose hooks decide). Reads only C state. */
static const char *not_now(PyObject *carrier, char *buf, size_t cap)
{
    const sw_py_carrier_ops *ops = sw_py_carrier_builtin_ops(carrier);
    if (sw_py_state_released(carrier))
        return "released";
    if (sw_py_state_pending(carrier) & SW_PENDING_DESTINATION)
        return "pending move";
    if (!ops)
        return NULL;
    const char *why = ops->unavailable ? ops->unavailable(carrier) : NULL;
    if (why)
        return Py_IS_TYPE(carrier, &SwEvictable_Type) ? "evicted" : why;
    if (Py_IS_TYPE(carrier, &SwTiledEvictable_Type)) {
        int64_t n[4], moving = 0, ntiles = TILED(carrier)->geo.ntiles;
        if (sw_py_tiled_tile_counts(carrier, n, &moving) < 0)
            return "released";
        int64_t secondary = n[SW_TILE_SECONDARY], invalid = n[SW_TILE_INVALID];
        if (moving)
            snprintf(buf, cap, "pending residency change of %lld of %lld tiles",
                     (long long)moving, (long long)ntiles);
        else if (secondary)
            snprintf(buf, cap, "non-resident tiles: %lld of %lld in the secondary tier; "
                     "promote them to see values", (long long)secondary, (long long)ntiles);
        else if (invalid)
            snprintf(buf, cap, "invalid tiles: %lld of %lld hold no values",
                     (long long)invalid, (long long)ntiles);
        else
            return NULL;
        return buf;
    }
    return NULL;
}

/* The values block of repr: the values, or a marker with the reason. Never
 * leaves an Exception set (a hook's error becomes the marker); -1 only for
 * what must propagate (KeyboardInterrupt and the like) or no memory. */
static int repr_values(PyObject *self, text *out)
{
    SwTensorObject *t = (SwTensorObject *)self;
    char buf[160];
    if (t->nsub != 1) {
        put(out, "<values not shown: the elements of a ");
        put(out, sw_dtype_info_of(SwDType_ID(t->dtype))->name);
        put(out, " tensor cannot be read one by one>");
        return 0;
    }
    const char *why = not_now(t->subs[0].carrier, buf, sizeof buf);
    if (why) {
        put(out, "<values unavailable: ");
        put(out, why);
        put(out, ">");
        return 0;
    }
    text values = {NULL, 0, 0, 0};
    int rc = format_values(self, &values);
    if (rc < 0) {
        PyMem_Free(values.p);
        return marker_from_error(out);
    }
    /* continuation lines line up under the first, after "Tensor(" */
    for (size_t k = 0; k < values.len; k++) {
        put_n(out, values.p + k, 1);
        if (values.p[k] == '\n' && k + 1 < values.len && values.p[k + 1] != '\n')
            put(out, "       ");
    }
    PyMem_Free(values.p);
    return 0;
}

PyObject *sw_py_tensor_repr(PyObject *self)
{
    SwTensorObject *t = (SwTensorObject *)self;
    text out = {NULL, 0, 0, 0};
    PyObject *result = NULL;
    Py_INCREF(self);
    put(&out, "Tensor(");
    if (repr_values(self, &out) < 0)
        goto done;
    if (out.failed) {
        PyErr_NoMemory();
        goto done;
    }
    PyObject *head = PyUnicode_FromStringAndSize(out.p, (Py_ssize_t)out.len);
    if (!head)
        goto done;
    SwSubtensor *s = &t->subs[0];
    if (t->nsub == 1)
        result = PyUnicode_FromFormat("%U, dtype=%s, carrier=%s, offset=%lld, layout=%R)", head,
                                      sw_dtype_info_of(SwDType_ID(t->dtype))->name,
                                      _PyType_Name(Py_TYPE(s->carrier)), (long long)SW_SUB_OFFSET(s),
                                      s->layout);
    else
        result = PyUnicode_FromFormat(
            "%U, dtype=%s, carrier=%s, offset=%lld, layout=%R, subtensors=%zd)", head,
            sw_dtype_info_of(SwDType_ID(t->dtype))->name, _PyType_Name(Py_TYPE(s->carrier)),
            (long long)SW_SUB_OFFSET(s), s->layout, t->nsub);
    Py_DECREF(head);
done:
    PyMem_Free(out.p);
    Py_DECREF(self);
    return result;
}

/* ---- carriers -------------------------------------------------------------- */

/* ", name" for each framework flag that applies. */
static void put_flags(text *out, PyObject *self, int builtin)
{
    SwCarrierObject *c = (SwCarrierObject *)self;
    if (builtin && !c->intrinsic_mutable)
        put(out, ", immutable");
    if (sw_py_state_owned(self))
        put(out, ", owned");
    if (sw_py_state_released(self))
        put(out, ", released");
    if (sw_py_state_pending(self))
        put(out, ", pending");
}

static void put_dims(text *out, const char *name, int32_t rank, const int64_t *dims)
{
    char buf[32];
    put(out, name);
    put(out, "=(");
    for (int32_t k = 0; k < rank; k++) {
        snprintf(buf, sizeof buf, k ? ", %lld" : "%lld", (long long)dims[k]);
        put(out, buf);
    }
    put(out, rank == 1 ? ",)" : ")");
}

/* TiledEvictable: grid and tile shapes, the tiers, where the tiles are. */
static void put_tiled(text *out, PyObject *self)
{
    SwTiledEvictableObject *te = TILED(self);
    char buf[160];
    put(out, ", ");
    put_dims(out, "grid", te->geo.rank, te->geo.grid);
    put(out, ", ");
    put_dims(out, "tile", te->geo.rank, te->geo.tile);
    if (te->primary && te->secondary) {
        put(out, ", tiers=");
        put(out, _PyType_Name(Py_TYPE(te->primary)));
        put(out, "/");
        put(out, _PyType_Name(Py_TYPE(te->secondary)));
    }
    int64_t n[4];
    if (sw_py_tiled_tile_counts(self, n, NULL) < 0)
        return;
    snprintf(buf, sizeof buf, ", tiles: %lld primary, %lld secondary, %lld implicit, %lld invalid",
             (long long)n[SW_TILE_PRIMARY], (long long)n[SW_TILE_SECONDARY],
             (long long)n[SW_TILE_IMPLICIT], (long long)n[SW_TILE_INVALID]);
    put(out, buf);
}

/* BlockDeviceCarrier: the device's path and the byte extent on it. */
static int put_block_device(text *out, PyObject *self)
{
    PyObject *dev = PyObject_GetAttrString(self, "device");
    PyObject *path = dev ? PyObject_GetAttrString(dev, "path") : NULL;
    PyObject *r = path ? PyObject_Repr(path) : NULL;
    PyObject *off = PyObject_GetAttrString(self, "device_offset_bytes");
    PyObject *ext = PyObject_GetAttrString(self, "extent_bytes");
    const char *u = r ? PyUnicode_AsUTF8(r) : NULL;
    long long o = off ? PyLong_AsLongLong(off) : -1, e = ext ? PyLong_AsLongLong(ext) : -1;
    int rc = -1;
    if (u && !PyErr_Occurred()) {
        char buf[96];
        put(out, ", device=");
        put(out, u);
        snprintf(buf, sizeof buf, ", extent=[%lld, %lld) bytes", o, o + e);
        put(out, buf);
        rc = 0;
    }
    Py_XDECREF(dev);
    Py_XDECREF(path);
    Py_XDECREF(r);
    Py_XDECREF(off);
    Py_XDECREF(ext);
    return rc;
}

/* Extra fields of the shipped carriers that have them. -1 on error. */
static int put_specific(text *out, PyObject *self)
{
    if (Py_IS_TYPE(self, &SwFileBacked_Type)) {
        PyObject *path = ((SwFileBackedObject *)self)->path;
        PyObject *s = path ? PyObject_Str(path) : NULL;
        PyObject *r = s ? PyObject_Repr(s) : NULL;
        Py_XDECREF(s);
        const char *u = r ? PyUnicode_AsUTF8(r) : NULL;
        if (path && !u) {
            Py_XDECREF(r);
            return -1;
        }
        if (u) {
            put(out, ", path=");
            put(out, u);
        }
        Py_XDECREF(r);
    } else if (Py_IS_TYPE(self, &SwEvictable_Type)) {
        PyObject *ev = PyObject_CallMethod(self, "is_evicted", NULL);
        if (!ev)
            return -1;
        int evicted = ev == Py_True;
        Py_DECREF(ev);
        PyObject *tier = PyObject_GetAttrString(self, evicted ? "secondary" : "primary");
        if (!tier)
            return -1;
        put(out, evicted ? ", evicted to " : ", resident in ");
        put(out, _PyType_Name(Py_TYPE(tier)));
        Py_DECREF(tier);
    } else if (Py_IS_TYPE(self, &SwTiledEvictable_Type)) {
        put_tiled(out, self);
    } else if (Py_IS_TYPE(self, &SwBlockDeviceCarrier_Type)) {
        return put_block_device(out, self);
    }
    return 0;
}

static PyObject *carrier_repr(PyObject *self)
{
    int builtin = sw_py_carrier_builtin_ops(self) != NULL;
    text out = {NULL, 0, 0, 0};
    PyObject *result = NULL;
    int64_t size;
    put(&out, _PyType_Name(Py_TYPE(self)));
    put(&out, "(");
    /* A class of the user's reports through its hooks; one that cannot
     * answer still gets a repr, without that field. */
    if (sw_py_carrier_size(self, &size) == 0) {
        char buf[40];
        snprintf(buf, sizeof buf, "size=%lld", (long long)size);
        put(&out, buf);
    } else if (builtin || !PyErr_ExceptionMatches(PyExc_Exception)) {
        goto done;
    } else {
        PyErr_Clear();
        put(&out, "size=?");
    }
    PyObject *dtype = sw_py_carrier_dtype(self);
    if (dtype && SwDType_Check(dtype)) {
        put(&out, ", dtype=");
        put(&out, sw_dtype_info_of(SwDType_ID(dtype))->name);
    } else if (!dtype) {
        if (builtin || !PyErr_ExceptionMatches(PyExc_Exception))
            goto done;
        PyErr_Clear();
    }
    Py_XDECREF(dtype);
    put_flags(&out, self, builtin);
    if (put_specific(&out, self) < 0)
        goto done;
    put(&out, ")");
    if (out.failed)
        PyErr_NoMemory();
    else
        result = PyUnicode_FromStringAndSize(out.p, (Py_ssize_t)out.len);
done:
    PyMem_Free(out.p);
    return result;
}

/* The carriers' repr is this file's: it is put into Carrier's slot before
 * Carrier and its built-in subclasses are made ready (module.c runs this
 * init first), so they all inherit it and py_carrier.c never calls up here. */
int sw_py_repr_init(PyObject *module)
{
    (void)module;
    SwCarrier_Type.tp_repr = carrier_repr;
    return 0;
}
