/* Shape, Stride and Layout (contract-core section 1): thin wrappers around
 * an immutable sw_layout. A Shape keeps its extents (strides 0), a Stride its
 * strides (extents 1), so all three share parsing, slicing, equality and
 * printing; the Python side only parses keys and maps errors. */
#include "sw_python.h"
#include "sw_messages.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

enum kind { KIND_SHAPE, KIND_STRIDE, KIND_LAYOUT };

static enum kind kind_of(PyObject *obj)
{
    if (Py_IS_TYPE(obj, &SwShape_Type))
        return KIND_SHAPE;
    if (Py_IS_TYPE(obj, &SwStride_Type))
        return KIND_STRIDE;
    return KIND_LAYOUT;
}

static const char *kind_name(enum kind k)
{
    return k == KIND_SHAPE ? "Shape" : k == KIND_STRIDE ? "Stride" : "Layout";
}

static PyTypeObject *kind_type(enum kind k)
{
    return k == KIND_SHAPE ? &SwShape_Type
           : k == KIND_STRIDE ? &SwStride_Type : &SwLayout_Type;
}

/* ---- wrapping ----------------------------------------------------------- */

static PyObject *layout_call_vector(PyObject *self, PyObject *const *args,
                                    size_t nargsf, PyObject *kwnames);

static PyObject *wrap(PyTypeObject *type, sw_layout *layout)
{
    if (!layout)
        return NULL;
    SwLayoutObject *self = PyObject_New(SwLayoutObject, type);
    if (!self) {
        sw_layout_free(layout);
        return NULL;
    }
    self->layout = layout;
    self->hash = -1;
    self->vectorcall = type == &SwLayout_Type ? layout_call_vector : NULL;
    return (PyObject *)self;
}

PyObject *sw_py_layout_wrap(sw_layout *layout)
{
    return wrap(&SwLayout_Type, layout);
}

/* Wrap a core result or raise its error. */
static PyObject *wrap_result(enum kind k, sw_layout *layout, const sw_error *err)
{
    if (!layout) {
        sw_py_raise(err);
        return NULL;
    }
    return wrap(kind_type(k), layout);
}

static void layout_dealloc(PyObject *self)
{
    sw_layout_free(SwLayout_CORE(self));
    PyObject_Free(self);
}

/* The Shape (strides 0) or Stride (extents 1) half of a layout. */
static sw_layout *half_of(const sw_layout *src, enum kind k, sw_error *err)
{
    sw_layout *l = sw_layout_copy(src, err);
    if (!l)
        return NULL;
    for (int32_t i = 0; i < l->nleaves; i++) {
        if (k == KIND_SHAPE)
            l->strides[i] = 0;
        else
            l->extents[i] = 1;
    }
    if (k == KIND_STRIDE)
        l->size = 1;
    l->cosize = 1;
    l->injective = -1;
    return l;
}

/* ---- parsing Shape(*items) / Stride(*items) ----------------------------- */

#define BUILDER_INLINE 64

typedef struct {
    uint8_t *profile;
    int64_t *vals;
    Py_ssize_t np, nl, capp, capl;
    uint8_t pbuf[BUILDER_INLINE];
    int64_t vbuf[BUILDER_INLINE];
    int level;               /* nesting of the mode being parsed */
} builder;

static void builder_init(builder *b)
{
    b->profile = b->pbuf;
    b->vals = b->vbuf;
    b->np = b->nl = 0;
    b->level = 0;
    b->capp = b->capl = BUILDER_INLINE;
}

static void builder_fini(builder *b)
{
    if (b->profile != b->pbuf)
        PyMem_Free(b->profile);
    if (b->vals != b->vbuf)
        PyMem_Free(b->vals);
}

static int grow(void **buf, void *inline_buf, Py_ssize_t *cap, size_t item)
{
    Py_ssize_t ncap = *cap * 2;
    void *nb = PyMem_Malloc((size_t)ncap * item);
    if (!nb) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(nb, *buf, (size_t)*cap * item);
    if (*buf != inline_buf)
        PyMem_Free(*buf);
    *buf = nb;
    *cap = ncap;
    return 0;
}

static int builder_mark(builder *b, uint8_t m)
{
    if (b->np == b->capp &&
        grow((void **)&b->profile, b->pbuf, &b->capp, 1) < 0)
        return -1;
    b->profile[b->np++] = m;
    return 0;
}

static int builder_leaf(builder *b, int64_t v)
{
    if (builder_mark(b, SW_NODE_LEAF) < 0)
        return -1;
    if (b->nl == b->capl &&
        grow((void **)&b->vals, b->vbuf, &b->capl, sizeof(int64_t)) < 0)
        return -1;
    b->vals[b->nl++] = v;
    return 0;
}

/* An integer element (G-2) as an extent (>= 1) or stride (>= 0). */
static int parse_value(PyObject *item, enum kind k, int64_t *out)
{
    int overflow;
    long long v;
    /* Exact ints skip the operator.index round trip (hot path). */
    if (PyLong_CheckExact(item))
        v = PyLong_AsLongLongAndOverflow(item, &overflow);
    else if (sw_py_index_ll(item, &v, &overflow) < 0)
        return -1;
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow > 0) {
        PyErr_Format(PyExc_OverflowError, "%s value %R exceeds signed 64 bits",
                     kind_name(k), item);
        return -1;
    }
    if (overflow < 0 || v < (k == KIND_SHAPE ? 1 : 0)) {
        PyErr_Format(PyExc_ValueError,
                     k == KIND_SHAPE ? "Shape extents must be integers >= 1, got %R"
                                     : "Stride values must be integers >= 0, got %R",
                     item);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_seq(builder *b, PyObject *seq, enum kind k);

static int parse_elem(builder *b, PyObject *item, enum kind k)
{
    if (sw_py_is_integer(item)) {
        int64_t v;
        if (parse_value(item, k, &v) < 0)
            return -1;
        return builder_leaf(b, v);
    }
    if (PyList_Check(item) || PyTuple_Check(item)) {
        if (Py_SIZE(item) == 0) {
            PyErr_Format(PyExc_ValueError,
                         "%s nested modes must not be empty lists/tuples",
                         kind_name(k));
            return -1;
        }
        /* The one nesting limit, checked before recursing any deeper. */
        if (b->level + 2 > SW_LAYOUT_MAX_DEPTH) {
            PyErr_Format(PyExc_ValueError,
                         "%s is nested too deeply: layouts have at most %d levels",
                         kind_name(k), SW_LAYOUT_MAX_DEPTH);
            return -1;
        }
        if (Py_EnterRecursiveCall(" while parsing a nested mode"))
            return -1;
        b->level++;
        int rc = builder_mark(b, SW_NODE_PUSH);
        if (rc == 0)
            rc = parse_seq(b, item, k);
        if (rc == 0)
            rc = builder_mark(b, SW_NODE_POP);
        b->level--;
        Py_LeaveRecursiveCall();
        return rc;
    }
    PyErr_Format(PyExc_ValueError,
                 "%s elements must be integers or lists/tuples, not %.100s",
                 kind_name(k), Py_TYPE(item)->tp_name);
    return -1;
}

static int parse_seq(builder *b, PyObject *seq, enum kind k)
{
    if (PyTuple_Check(seq)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(seq); i++)
            if (parse_elem(b, PyTuple_GET_ITEM(seq, i), k) < 0)
                return -1;
        return 0;
    }
    /* A list may change under an __index__ call: parse a private tuple of
     * its items as they were when parsing reached it. */
    PyObject *items = PyList_AsTuple(seq);
    if (!items)
        return -1;
    int rc = parse_seq(b, items, k);
    Py_DECREF(items);
    return rc;
}

static sw_layout *builder_finish(builder *b, enum kind k)
{
    if (b->np > INT32_MAX) {
        PyErr_Format(PyExc_OverflowError, "%s has too many modes", kind_name(k));
        return NULL;
    }
    int64_t fill_inline[BUILDER_INLINE];
    int64_t *fill = fill_inline;
    if (b->nl > BUILDER_INLINE) {
        fill = PyMem_Malloc((size_t)b->nl * sizeof(int64_t));
        if (!fill) {
            PyErr_NoMemory();
            return NULL;
        }
    }
    for (Py_ssize_t i = 0; i < b->nl; i++)
        fill[i] = k == KIND_SHAPE ? 0 : 1;
    sw_error err;
    sw_layout *l = k == KIND_SHAPE
        ? sw_layout_new((int32_t)b->np, b->profile, b->vals, fill, &err)
        : sw_layout_new((int32_t)b->np, b->profile, fill, b->vals, &err);
    if (fill != fill_inline)
        PyMem_Free(fill);
    if (!l)
        sw_py_raise(&err);
    return l;
}

/* L-1 / L-2 forms over the positional items. */
static PyObject *shape_stride_new(enum kind k, PyObject *const *args,
                                  Py_ssize_t nargs)
{
    PyTypeObject *type = kind_type(k);
    if (nargs == 1 && Py_IS_TYPE(args[0], type))
        return Py_NewRef(args[0]);  /* immutable: an equal value is itself */
    builder b;
    builder_init(&b);
    int rc = 0;
    if (nargs == 1 && (PyList_Check(args[0]) || PyTuple_Check(args[0]))) {
        rc = parse_seq(&b, args[0], k);
    } else {
        for (Py_ssize_t i = 0; i < nargs && rc == 0; i++)
            rc = parse_elem(&b, args[i], k);
    }
    sw_layout *l = rc == 0 ? builder_finish(&b, k) : NULL;
    builder_fini(&b);
    return l ? wrap(type, l) : NULL;
}

static int no_kwargs(const char *name, Py_ssize_t nkw)
{
    if (nkw) {
        PyErr_Format(PyExc_TypeError, "%s() takes no keyword arguments", name);
        return -1;
    }
    return 0;
}

static PyObject *shape_vectorcall(PyObject *type, PyObject *const *args,
                                  size_t nargsf, PyObject *kwnames)
{
    (void)type;
    if (no_kwargs("Shape", kwnames ? PyTuple_GET_SIZE(kwnames) : 0) < 0)
        return NULL;
    return shape_stride_new(KIND_SHAPE, args, PyVectorcall_NARGS(nargsf));
}

static PyObject *stride_vectorcall(PyObject *type, PyObject *const *args,
                                   size_t nargsf, PyObject *kwnames)
{
    (void)type;
    if (no_kwargs("Stride", kwnames ? PyTuple_GET_SIZE(kwnames) : 0) < 0)
        return NULL;
    return shape_stride_new(KIND_STRIDE, args, PyVectorcall_NARGS(nargsf));
}

static PyObject *shape_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    (void)type;
    if (no_kwargs("Shape", kwds ? PyDict_GET_SIZE(kwds) : 0) < 0)
        return NULL;
    return shape_stride_new(KIND_SHAPE, &PyTuple_GET_ITEM(args, 0),
                            PyTuple_GET_SIZE(args));
}

static PyObject *stride_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    (void)type;
    if (no_kwargs("Stride", kwds ? PyDict_GET_SIZE(kwds) : 0) < 0)
        return NULL;
    return shape_stride_new(KIND_STRIDE, &PyTuple_GET_ITEM(args, 0),
                            PyTuple_GET_SIZE(args));
}

/* ---- profile walking ---------------------------------------------------- */

static Py_ssize_t count_children(const uint8_t *profile, int32_t p, int32_t end)
{
    Py_ssize_t n = 0;
    while (p < end) {
        p = sw_layout_mode_end(profile, p, NULL);
        n++;
    }
    return n;
}

/* ---- shared queries ----------------------------------------------------- */

static Py_ssize_t layout_length(PyObject *self)
{
    return SwLayout_CORE(self)->rank;
}

static PyObject *layout_item(PyObject *self, Py_ssize_t i)
{
    sw_layout *l = SwLayout_CORE(self);
    enum kind k = kind_of(self);
    if (i < 0 || i >= l->rank) {
        PyErr_Format(PyExc_IndexError, "%s index %zd is out of range: it has %d top-level mode%s",
                     kind_name(k), i, (int)l->rank, sw_py_msg_s(l->rank));
        return NULL;
    }
    sw_error err;
    return wrap_result(k, sw_layout_mode(l, (int32_t)i, &err), &err);
}

static PyObject *layout_subscript(PyObject *self, PyObject *key)
{
    sw_layout *l = SwLayout_CORE(self);
    enum kind k = kind_of(self);
    sw_error err;
    if (PySlice_Check(key)) {
        /* G-2: bool is never an integer; Python's slice normalization
         * would take True as 1. */
        PySliceObject *sl = (PySliceObject *)key;
        PyObject *parts[3] = {sl->start, sl->stop, sl->step};
        static const char *part_names[3] = {"start", "stop", "step"};
        for (int j = 0; j < 3; j++)
            if (parts[j] != Py_None && !sw_py_is_integer(parts[j])) {
                PyErr_Format(PyExc_TypeError,
                             "%s slice %s must be an integer or None, not %.100s",
                             kind_name(k), part_names[j],
                             Py_TYPE(parts[j])->tp_name);
                return NULL;
            }
        Py_ssize_t start, stop, step;
        if (PySlice_Unpack(key, &start, &stop, &step) < 0)
            return NULL;
        Py_ssize_t n = PySlice_AdjustIndices(l->rank, &start, &stop, step);
        if (step == 1)
            return wrap_result(k, sw_layout_slice(l, (int32_t)start,
                                                  (int32_t)stop, &err), &err);
        int32_t *modes = PyMem_Malloc((size_t)n * sizeof(int32_t) + 1);
        if (!modes)
            return PyErr_NoMemory();
        for (Py_ssize_t j = 0; j < n; j++)
            modes[j] = (int32_t)(start + j * step);
        sw_layout *out = sw_layout_select(l, modes, (int32_t)n, &err);
        PyMem_Free(modes);
        return wrap_result(k, out, &err);
    }
    if (sw_py_is_integer(key)) {
        Py_ssize_t i = PyNumber_AsSsize_t(key, PyExc_IndexError);
        if (i == -1 && PyErr_Occurred())
            return NULL;
        /* Top-level modes index like a Python sequence (negatives count
         * from the end); a miss names the index the user wrote. */
        Py_ssize_t j = i < 0 ? i + l->rank : i;
        if (j < 0 || j >= l->rank) {
            PyErr_Format(PyExc_IndexError, "%s index %zd is out of range: it has %d top-level "
                         "mode%s", kind_name(k), i, (int)l->rank, sw_py_msg_s(l->rank));
            return NULL;
        }
        return layout_item(self, j);
    }
    PyErr_Format(PyExc_TypeError,
                 "%s indices must be integers or slices, not %.100s",
                 kind_name(k), Py_TYPE(key)->tp_name);
    return NULL;
}

static PyObject *layout_richcompare(PyObject *a, PyObject *b, int op)
{
    if ((op != Py_EQ && op != Py_NE) || !Py_IS_TYPE(a, Py_TYPE(b)))
        Py_RETURN_NOTIMPLEMENTED;
    int eq = sw_layout_equal(SwLayout_CORE(a), SwLayout_CORE(b));
    return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static Py_hash_t layout_hash(PyObject *self)
{
    SwLayoutObject *o = (SwLayoutObject *)self;
    if (o->hash != -1)
        return o->hash;
    const sw_layout *l = o->layout;
    /* FNV-1a style mixing over the class, profile and numbers. */
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)kind_of(self);
    for (int32_t p = 0; p < l->nprofile; p++)
        h = (h ^ l->profile[p]) * 1099511628211ULL;
    for (int32_t i = 0; i < l->nleaves; i++) {
        h = (h ^ (uint64_t)l->extents[i]) * 1099511628211ULL;
        h = (h ^ (uint64_t)l->strides[i]) * 1099511628211ULL;
        h ^= h >> 29;
    }
    Py_hash_t r = (Py_hash_t)h;
    if (r == -1)
        r = -2;
    o->hash = r;
    return r;
}

static int layout_setattro(PyObject *self, PyObject *name, PyObject *value)
{
    PyErr_Format(PyExc_AttributeError, "%s objects are immutable: cannot %s %R",
                 Py_TYPE(self)->tp_name, value ? "set" : "delete", name);
    return -1;
}

/* Nested tuple of the values in profile span [*p, end). */
static PyObject *tuple_span(const sw_layout *l, const int64_t *vals, int32_t *p,
                            int32_t end, int32_t *leaf)
{
    Py_ssize_t n = count_children(l->profile, *p, end);
    PyObject *t = PyTuple_New(n);
    if (!t)
        return NULL;
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *item;
        if (l->profile[*p] == SW_NODE_LEAF) {
            item = PyLong_FromLongLong(vals[(*leaf)++]);
            (*p)++;
        } else {
            int32_t cend = sw_layout_mode_end(l->profile, *p, NULL);
            (*p)++;
            item = tuple_span(l, vals, p, cend - 1, leaf);
            (*p)++;  /* the Pop */
        }
        if (!item) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, j, item);
    }
    return t;
}

PyObject *sw_py_layout_nested(const sw_layout *l, const int64_t *vals)
{
    int32_t p = 0, leaf = 0;
    return tuple_span(l, vals, &p, l->nprofile, &leaf);
}

static PyObject *get_top_level(PyObject *self, void *closure)
{
    (void)closure;
    const sw_layout *l = SwLayout_CORE(self);
    return sw_py_layout_nested(l, kind_of(self) == KIND_SHAPE ? l->extents : l->strides);
}

static PyObject *get_depth(PyObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromLong(SwLayout_CORE(self)->depth);
}

static PyObject *get_size(PyObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromLongLong(SwLayout_CORE(self)->size);
}

/* "[2, [3, 4]]" into buf (sized by the caller); returns the end. */
static char *format_values(const sw_layout *l, const int64_t *vals, char *out)
{
    int32_t leaf = 0;
    int sep = 0;
    *out++ = '[';
    for (int32_t p = 0; p < l->nprofile; p++) {
        uint8_t m = l->profile[p];
        if (m == SW_NODE_POP) {
            *out++ = ']';
            sep = 1;
            continue;
        }
        if (sep) {
            *out++ = ',';
            *out++ = ' ';
        }
        if (m == SW_NODE_LEAF) {
            out += sprintf(out, "%lld", (long long)vals[leaf++]);
            sep = 1;
        } else {
            *out++ = '[';
            sep = 0;
        }
    }
    *out++ = ']';
    *out = '\0';
    return out;
}

static PyObject *layout_repr(PyObject *self)
{
    const sw_layout *l = SwLayout_CORE(self);
    enum kind k = kind_of(self);
    size_t cap = (size_t)l->nprofile * 2 * 24 + 64;
    char *buf = PyMem_Malloc(cap), *end;
    if (!buf)
        return PyErr_NoMemory();
    if (k == KIND_LAYOUT) {
        end = buf + sprintf(buf, "Layout(Shape(");
        end = format_values(l, l->extents, end);
        end += sprintf(end, "), Stride(");
        end = format_values(l, l->strides, end);
        end += sprintf(end, "))");
    } else {
        end = buf + sprintf(buf, "%s(", kind_name(k));
        end = format_values(l, k == KIND_SHAPE ? l->extents : l->strides, end);
        end += sprintf(end, ")");
    }
    PyObject *r = PyUnicode_FromStringAndSize(buf, end - buf);
    PyMem_Free(buf);
    return r;
}

/* Immutable values pickle and copy by their constructor arguments. */
static PyObject *layout_reduce(PyObject *self, PyObject *unused)
{
    (void)unused;
    if (kind_of(self) != KIND_LAYOUT) {
        PyObject *top = get_top_level(self, NULL);
        return top ? Py_BuildValue("(O(N))", (PyObject *)Py_TYPE(self), top) : NULL;
    }
    PyObject *shape = PyObject_GetAttrString(self, "shape");
    PyObject *stride = shape ? PyObject_GetAttrString(self, "stride") : NULL;
    if (!stride) {
        Py_XDECREF(shape);
        return NULL;
    }
    return Py_BuildValue("(O(NN))", (PyObject *)&SwLayout_Type, shape, stride);
}

static PyMethodDef shape_stride_methods[] = {
    {"__reduce__", layout_reduce, METH_NOARGS,
     "__reduce__($self, /)\n--\n\nPickle support: rebuilt from its nested tuples."},
    {NULL, NULL, 0, NULL},
};

/* ---- Shape / Stride types ------------------------------------------------ */

static PyGetSetDef shape_getset[] = {
    {"top_level", get_top_level, NULL,
     "The shape as nested tuples of extents: Shape(2, [3, 4]).top_level == (2, (3, 4)).",
     NULL},
    {"depth", get_depth, NULL,
     "Nesting depth: 1 when flat or empty, plus 1 per level of nesting.", NULL},
    {"size", get_size, NULL,
     "Number of coordinates: the product of the extents (1 for the empty shape).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyGetSetDef stride_getset[] = {
    {"top_level", get_top_level, NULL,
     "The stride as nested tuples: Stride(1, [2, 6]).top_level == (1, (2, 6)).", NULL},
    {"depth", get_depth, NULL,
     "Nesting depth: 1 when flat or empty, plus 1 per level of nesting.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods layout_as_sequence = {
    .sq_length = layout_length,
    .sq_item = layout_item,
};

static PyMappingMethods layout_as_mapping = {
    .mp_length = layout_length,
    .mp_subscript = layout_subscript,
};

PyTypeObject SwShape_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "strideweave.Shape",
    .tp_doc = "Shape(*items)\n--\n\n"
              "An immutable hierarchical shape: extents, possibly nested.\n\n"
              "Each item is one top-level mode: an int is a leaf with that extent, a\n"
              "list or tuple is a nested mode. A single list or tuple gives the\n"
              "top-level modes; a single Shape gives an equal Shape; no items give\n"
              "the empty shape (rank 0, size 1). Raises ValueError for an extent\n"
              "below 1, an empty nested list, or an item that is neither an int nor\n"
              "a list/tuple (a Shape inside other items included).\n\n"
              "    Shape(2, [3, 4]) == Shape([2, [3, 4]])",
    .tp_basicsize = sizeof(SwLayoutObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = shape_new,
    .tp_vectorcall = shape_vectorcall,
    .tp_dealloc = layout_dealloc,
    .tp_repr = layout_repr,
    .tp_hash = layout_hash,
    .tp_richcompare = layout_richcompare,
    .tp_setattro = layout_setattro,
    .tp_as_sequence = &layout_as_sequence,
    .tp_as_mapping = &layout_as_mapping,
    .tp_getset = shape_getset,
    .tp_methods = shape_stride_methods,
};

PyTypeObject SwStride_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "strideweave.Stride",
    .tp_doc = "Stride(*items)\n--\n\n"
              "An immutable hierarchical stride: slot steps, nested like a Shape.\n\n"
              "Takes the same forms as Shape, with leaves that are ints >= 0.\n"
              "Raises ValueError for a negative stride, an empty nested list or an\n"
              "item that is neither an int nor a list/tuple.\n\n"
              "    Stride(1, [2, 6])",
    .tp_basicsize = sizeof(SwLayoutObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = stride_new,
    .tp_vectorcall = stride_vectorcall,
    .tp_dealloc = layout_dealloc,
    .tp_repr = layout_repr,
    .tp_hash = layout_hash,
    .tp_richcompare = layout_richcompare,
    .tp_setattro = layout_setattro,
    .tp_as_sequence = &layout_as_sequence,
    .tp_as_mapping = &layout_as_mapping,
    .tp_getset = stride_getset,
    .tp_methods = shape_stride_methods,
};

/* ---- Layout construction ------------------------------------------------- */

static PyObject *layout_from(PyObject *shape, PyObject *stride)
{
    if (!SwShape_Check(shape)) {
        PyErr_Format(PyExc_ValueError,
                     "Layout expects a Shape as its shape, e.g. Layout(Shape(4, 6), Stride(1, 4)), "
                     "not %.100s",
                     _PyType_Name(Py_TYPE(shape)));
        return NULL;
    }
    if (!SwStride_Check(stride)) {
        PyErr_Format(PyExc_ValueError,
                     "Layout expects a Stride as its stride, e.g. Layout(Shape(4, 6), Stride(1, 4)), "
                     "not %.100s",
                     _PyType_Name(Py_TYPE(stride)));
        return NULL;
    }
    const sw_layout *sh = SwLayout_CORE(shape), *st = SwLayout_CORE(stride);
    if (sh->nprofile != st->nprofile ||
        memcmp(sh->profile, st->profile, (size_t)sh->nprofile) != 0) {
        PyErr_Format(PyExc_ValueError,
                     "Layout shape and stride are not congruent (same mode "
                     "counts at every level, leaves in the same positions): "
                     "%R vs %R", shape, stride);
        return NULL;
    }
    sw_error err;
    return wrap_result(KIND_LAYOUT,
                       sw_layout_new(sh->nprofile, sh->profile, sh->extents,
                                     st->strides, &err), &err);
}

static PyObject *layout_vectorcall(PyObject *type, PyObject *const *args,
                                   size_t nargsf, PyObject *kwnames)
{
    (void)type;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *shape = nargs > 0 ? args[0] : NULL;
    PyObject *stride = nargs > 1 ? args[1] : NULL;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs > 2) {
        PyErr_Format(PyExc_TypeError,
                     "Layout() takes 2 positional arguments (shape, stride) but %zd were "
                     "given", nargs);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        PyObject **slot = NULL;
        if (PyUnicode_CompareWithASCIIString(name, "shape") == 0)
            slot = &shape;
        else if (PyUnicode_CompareWithASCIIString(name, "stride") == 0)
            slot = &stride;
        if (!slot) {
            PyErr_Format(PyExc_TypeError,
                         "Layout() got an unexpected keyword argument %R", name);
            return NULL;
        }
        if (*slot) {
            PyErr_Format(PyExc_TypeError,
                         "Layout() got multiple values for argument %R", name);
            return NULL;
        }
        *slot = args[nargs + i];
    }
    if (!shape || !stride) {
        PyErr_Format(PyExc_TypeError, "Layout() missing required argument '%s'",
                     shape ? "stride" : "shape");
        return NULL;
    }
    return layout_from(shape, stride);
}

static PyObject *layout_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"shape", "stride", NULL};
    PyObject *shape, *stride;
    (void)type;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO:Layout", kwlist, &shape,
                                     &stride))
        return NULL;
    return layout_from(shape, stride);
}

/* ---- Layout queries ------------------------------------------------------ */

static PyObject *layout_get_shape(PyObject *self, void *closure)
{
    (void)closure;
    sw_error err;
    return wrap_result(KIND_SHAPE, half_of(SwLayout_CORE(self), KIND_SHAPE, &err),
                       &err);
}

static PyObject *layout_get_stride(PyObject *self, void *closure)
{
    (void)closure;
    sw_error err;
    return wrap_result(KIND_STRIDE,
                       half_of(SwLayout_CORE(self), KIND_STRIDE, &err), &err);
}

static PyObject *layout_get_cosize(PyObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromLongLong(SwLayout_CORE(self)->cosize);
}

static PyObject *layout_get_is_leaf(PyObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(sw_layout_is_leaf(SwLayout_CORE(self)));
}

static PyObject *node_members[4]; /* [SW_NODE_LEAF..SW_NODE_POP], cached */

static int load_nodes(void)
{
    if (node_members[1])
        return 0;
    PyObject *node = sw_py_types_attr("Node");
    if (!node)
        return -1;
    static const char *names[4] = {NULL, "Leaf", "Push", "Pop"};
    PyObject *m[4] = {NULL, NULL, NULL, NULL};
    for (int i = 1; i < 4; i++) {
        m[i] = PyObject_GetAttrString(node, names[i]);
        if (!m[i]) {
            Py_XDECREF(m[1]);
            Py_XDECREF(m[2]);
            Py_DECREF(node);
            return -1;
        }
    }
    Py_DECREF(node);
    for (int i = 1; i < 4; i++)
        node_members[i] = m[i];
    return 0;
}

static PyObject *layout_get_profile(PyObject *self, void *closure)
{
    (void)closure;
    const sw_layout *l = SwLayout_CORE(self);
    if (load_nodes() < 0)
        return NULL;
    PyObject *list = PyList_New(l->nprofile);
    if (!list)
        return NULL;
    for (int32_t p = 0; p < l->nprofile; p++)
        PyList_SET_ITEM(list, p, Py_NewRef(node_members[l->profile[p]]));
    return list;
}

static PyObject *layout_get_is_injective(PyObject *self, void *closure)
{
    (void)closure;
    sw_error err;
    sw_layout *l = SwLayout_CORE(self);
    int r = __atomic_load_n(&l->injective, __ATOMIC_RELAXED);
    if (r < 0) {
        /* Only enumeration is left; it touches no Python object. Racing
         * threads would both store the same answer. */
        if (l->size > (1 << 16)) {
            Py_BEGIN_ALLOW_THREADS
            r = sw_layout_is_injective(l, &err);
            Py_END_ALLOW_THREADS
        } else {
            r = sw_layout_is_injective(l, &err);
        }
    }
    if (r < 0) {
        sw_py_raise(&err);
        return NULL;
    }
    return PyBool_FromLong(r);
}

static PyObject *layout_infix(PyObject *self, PyObject *unused)
{
    (void)unused;
    const sw_layout *l = SwLayout_CORE(self);
    PyObject *list = PyList_New(l->nleaves);
    if (!list)
        return NULL;
    for (int32_t i = 0; i < l->nleaves; i++) {
        PyObject *pair = Py_BuildValue("(LL)", (long long)l->extents[i],
                                       (long long)l->strides[i]);
        if (!pair) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, pair);
    }
    return list;
}

/* ---- indexing (L-9, L-10) ------------------------------------------------ */

/* An integer key component checked against [0, bound), the size of the
 * mode at `path`: its __index__ runs first, then the bound is checked. */
static int key_int(PyObject *obj, int64_t bound, const sw_py_mode_path *path, int64_t *out)
{
    int overflow;
    long long v;
    if (sw_py_index_ll(obj, &v, &overflow) < 0)
        return -1;
    if (overflow || v < 0 || v >= bound) {
        char where[1024];
        sw_py_msg_mode_name(path, "layout", (long long)bound, where, sizeof where);
        if (overflow < 0 || (overflow == 0 && v < 0))
            PyErr_Format(PyExc_ValueError,
                         "index %R is out of range for %s: indices run from 0 to %lld and "
                         "do not wrap around", obj, where, (long long)bound - 1);
        else
            PyErr_Format(PyExc_ValueError, "index %R is out of range for %s", obj, where);
        return -1;
    }
    *out = v;
    return 0;
}

static int index_span(const sw_layout *l, int32_t p, int32_t end, int32_t leaf,
                      PyObject *key, sw_py_mode_path *path, int64_t *acc);

/* One child of a nested key: component `comp` for the mode starting at
 * profile position *p (advanced past it), child number `j` of `path`. */
static int index_child(const sw_layout *l, int32_t *p, int32_t *leaf, PyObject *comp,
                       sw_py_mode_path *path, int64_t *acc)
{
    int rc;
    if (l->profile[*p] == SW_NODE_LEAF) {
        int64_t c;
        if (sw_py_is_integer(comp)) {
            rc = key_int(comp, l->extents[*leaf], path, &c);
            if (rc == 0)
                *acc += c * l->strides[*leaf];
        } else if (PyList_Check(comp) || PyTuple_Check(comp)) {
            char label[1024];
            sw_py_msg_mode_label(path, "layout", label, sizeof label);
            PyErr_Format(PyExc_ValueError,
                         "%s has no sub-modes, so its index must be an integer, not %R",
                         label, comp);
            rc = -1;
        } else {
            PyErr_Format(PyExc_TypeError,
                         "an index must be an integer or a list/tuple of indices, e.g. "
                         "layout(5) or layout((1, 2)), not %.100s", Py_TYPE(comp)->tp_name);
            rc = -1;
        }
        (*p)++;
        (*leaf)++;
        return rc;
    }
    int32_t nl;
    int32_t cend = sw_layout_mode_end(l->profile, *p, &nl);
    if (Py_EnterRecursiveCall(" while indexing a layout")) {
        rc = -1;
    } else {
        rc = index_span(l, *p + 1, cend - 1, *leaf, comp, path, acc);
        Py_LeaveRecursiveCall();
    }
    *p = cend;
    *leaf += nl;
    return rc;
}

/* Adds to *acc the index of key over the children in profile span
 * [p, end) whose leaves start at `leaf`; `path` names that span. */
static int index_span(const sw_layout *l, int32_t p, int32_t end, int32_t leaf,
                      PyObject *key, sw_py_mode_path *path, int64_t *acc)
{
    if (sw_py_is_integer(key)) {
        int64_t size = 1, k;
        int32_t nl = 0;
        for (int32_t q = p; q < end; q++)
            nl += l->profile[q] == SW_NODE_LEAF;
        for (int32_t i = 0; i < nl; i++)
            size *= l->extents[leaf + i];
        if (key_int(key, size, path, &k) < 0)
            return -1;
        for (int32_t i = 0; i < nl; i++) {
            int64_t e = l->extents[leaf + i];
            *acc += (k % e) * l->strides[leaf + i];
            k /= e;
        }
        return 0;
    }
    if (!PyList_Check(key) && !PyTuple_Check(key)) {
        PyErr_Format(PyExc_TypeError,
                     "an index must be an integer or a list/tuple of indices, e.g. "
                     "layout(5) or layout((1, 2)), not %.100s", Py_TYPE(key)->tp_name);
        return -1;
    }
    Py_ssize_t n = count_children(l->profile, p, end);
    if (Py_SIZE(key) != n) {
        char label[1024];
        sw_py_msg_mode_label(path, "layout", label, sizeof label);
        PyErr_Format(PyExc_ValueError,
                     "index %R has %zd component%s but %s has %zd %smode%s; give one index "
                     "per %smode, or one integer for the whole %s",
                     key, Py_SIZE(key), sw_py_msg_s(Py_SIZE(key)), label, n,
                     path->depth ? "sub-" : "", sw_py_msg_s(n), path->depth ? "sub-" : "",
                     path->depth ? "mode" : "layout");
        return -1;
    }
    int rc = 0;
    path->depth++;
    for (Py_ssize_t j = 0; j < n && rc == 0; j++) {
        if (Py_SIZE(key) != n) {
            PyErr_SetString(PyExc_ValueError,
                            "the index list changed size while it was being read");
            rc = -1;
            break;
        }
        PyObject *comp = PyList_Check(key) ? PyList_GET_ITEM(key, j)
                                           : PyTuple_GET_ITEM(key, j);
        path->at[path->depth - 1] = (int32_t)j;
        Py_INCREF(comp);
        rc = index_child(l, &p, &leaf, comp, path, acc);
        Py_DECREF(comp);
    }
    path->depth--;
    return rc;
}

static int layout_index_of(PyObject *layout, PyObject *key, int64_t *out)
{
    const sw_layout *l = SwLayout_CORE(layout);
    *out = 0;
    if (PyLong_CheckExact(key)) {  /* the common case: one ordinal */
        int overflow;
        long long k = PyLong_AsLongLongAndOverflow(key, &overflow);
        if (!overflow && k >= 0 && k < l->size) {
            sw_error err;
            if (sw_layout_index(l, k, out, &err) != SW_OK)
                return sw_py_raise(&err);
            return 0;
        }
    }
    sw_py_mode_path path = {.depth = 0};
    return index_span(l, 0, l->nprofile, 0, key, &path, out);
}

static PyObject *index_result(PyObject *layout, PyObject *key)
{
    int64_t idx;
    if (layout_index_of(layout, key, &idx) < 0)
        return NULL;
    return PyLong_FromLongLong(idx);
}

static PyObject *layout_index(PyObject *self, PyObject *key)
{
    return index_result(self, key);
}

static PyObject *layout_get_index(PyObject *unused, PyObject *const *args,
                                  Py_ssize_t nargs)
{
    (void)unused;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError,
                     "get_index() takes 2 positional arguments (layout, key) "
                     "but %zd %s given", nargs, nargs == 1 ? "was" : "were");
        return NULL;
    }
    if (!SwLayout_Check(args[0])) {
        PyErr_Format(PyExc_ValueError,
                     "get_index layout must be a Layout, not %.100s",
                     Py_TYPE(args[0])->tp_name);
        return NULL;
    }
    return index_result(args[0], args[1]);
}

static PyObject *layout_call_vector(PyObject *self, PyObject *const *args,
                                    size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (kwnames && PyTuple_GET_SIZE(kwnames)) {
        PyErr_SetString(PyExc_TypeError, "Layout call takes no keyword arguments");
        return NULL;
    }
    if (nargs != 1) {
        PyErr_Format(PyExc_TypeError,
                     "a Layout call takes exactly one key, e.g. layout(5) or layout((1, 2)), "
                     "not %zd argument%s", nargs, sw_py_msg_s(nargs));
        return NULL;
    }
    return index_result(self, args[0]);
}

/* ---- Layout algebra ------------------------------------------------------ */

static PyObject *layout_broadcast_to(PyObject *self, PyObject *target)
{
    if (!SwShape_Check(target)) {
        PyErr_Format(PyExc_TypeError,
                     "broadcast_to expects a Shape, e.g. Shape(4, 6), not %.100s",
                     _PyType_Name(Py_TYPE(target)));
        return NULL;
    }
    const sw_layout *t = SwLayout_CORE(target);
    sw_error err;
    return wrap_result(KIND_LAYOUT,
                       sw_layout_broadcast(SwLayout_CORE(self), t->nprofile,
                                           t->profile, t->extents, &err), &err);
}

static int check_operand(const char *op, PyObject *b)
{
    if (!SwLayout_Check(b)) {
        PyErr_Format(PyExc_TypeError, "%s operand must be a Layout, not %.100s",
                     op, Py_TYPE(b)->tp_name);
        return -1;
    }
    return 0;
}

static PyObject *layout_concat(PyObject *self, PyObject *b)
{
    if (check_operand("concat", b) < 0)
        return NULL;
    sw_error err;
    return wrap_result(KIND_LAYOUT,
                       sw_layout_concat(SwLayout_CORE(self), SwLayout_CORE(b), &err),
                       &err);
}

static PyObject *layout_append(PyObject *self, PyObject *b)
{
    if (check_operand("append", b) < 0)
        return NULL;
    sw_error err;
    return wrap_result(KIND_LAYOUT,
                       sw_layout_append(SwLayout_CORE(self), SwLayout_CORE(b), &err),
                       &err);
}

static PyObject *layout_add(PyObject *a, PyObject *b)
{
    if (!SwLayout_Check(a) || !SwLayout_Check(b))
        Py_RETURN_NOTIMPLEMENTED;
    return layout_concat(a, b);
}

static PyObject *layout_permute(PyObject *self, PyObject *const *args,
                                Py_ssize_t nargs)
{
    const sw_layout *l = SwLayout_CORE(self);
    PyObject *const *items = args;
    PyObject *owned = NULL, *result = NULL;
    int32_t *order = NULL;
    Py_ssize_t n = nargs;
    if (nargs == 1 && !sw_py_is_integer(args[0])) {
        if (PyTuple_Check(args[0])) {
            items = &PyTuple_GET_ITEM(args[0], 0);
            n = PyTuple_GET_SIZE(args[0]);
        } else if (PyList_Check(args[0])) {
            /* A snapshot: __index__ of an entry could change the list. */
            owned = PyList_AsTuple(args[0]);
            if (!owned)
                return NULL;
            items = &PyTuple_GET_ITEM(owned, 0);
            n = PyTuple_GET_SIZE(owned);
        } else {
            PyErr_Format(PyExc_TypeError,
                         "permute order must be integers or one list/tuple of "
                         "integers, not %.100s", Py_TYPE(args[0])->tp_name);
            goto done;
        }
    }
    for (Py_ssize_t j = 0; j < n; j++)
        if (!sw_py_is_integer(items[j])) {
            PyErr_Format(PyExc_TypeError,
                         "permute order entries must be integers, not %.100s",
                         Py_TYPE(items[j])->tp_name);
            goto done;
        }
    if (n != l->rank) {
        PyErr_Format(PyExc_ValueError,
                     "permute order has %zd entr%s for a layout of rank %d; name every "
                     "top-level mode once", n, n == 1 ? "y" : "ies",
                     (int)l->rank);
        goto done;
    }
    order = PyMem_Malloc((size_t)n * sizeof(int32_t) + 1);
    if (!order) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        long long v;
        int overflow;
        if (sw_py_index_ll(items[j], &v, &overflow) < 0)
            goto done;
        if (overflow || v < 0 || v >= l->rank) {
            PyErr_Format(PyExc_ValueError,
                         "permute order entry %R is outside [0, %d)", items[j],
                         (int)l->rank);
            goto done;
        }
        order[j] = (int32_t)v;
    }
    sw_error err;
    result = wrap_result(KIND_LAYOUT, sw_layout_permute(l, order, (int32_t)n, &err),
                         &err);
done:
    PyMem_Free(order);
    Py_XDECREF(owned);
    return result;
}

/* Layout.canonical(shape) for a Shape object (L-15). */
static PyObject *sw_py_layout_canonical(PyObject *shape)
{
    if (!SwShape_Check(shape)) {
        PyErr_Format(PyExc_TypeError, "canonical expects a Shape, e.g. Shape(4, 6), not %.100s",
                     _PyType_Name(Py_TYPE(shape)));
        return NULL;
    }
    const sw_layout *s = SwLayout_CORE(shape);
    sw_error err;
    return wrap_result(KIND_LAYOUT,
                       sw_layout_canonical(s->nprofile, s->profile, s->extents, &err),
                       &err);
}

static PyObject *layout_canonical(PyObject *unused, PyObject *shape)
{
    (void)unused;
    return sw_py_layout_canonical(shape);
}

static PyGetSetDef layout_getset[] = {
    {"shape", layout_get_shape, NULL, "The layout's Shape.", NULL},
    {"stride", layout_get_stride, NULL, "The layout's Stride.", NULL},
    {"depth", get_depth, NULL,
     "Nesting depth: 1 when flat or empty, plus 1 per level of nesting.", NULL},
    {"size", get_size, NULL, "Number of coordinates: the product of the extents.", NULL},
    {"cosize", layout_get_cosize, NULL,
     "Slots the layout spans: one plus the largest index it reaches,\n"
     "1 + sum(stride * (extent - 1)) over the leaves.", NULL},
    {"is_leaf", layout_get_is_leaf, NULL,
     "True for rank 0 and for a layout of one leaf mode.", NULL},
    {"profile", layout_get_profile, NULL,
     "The nesting pattern as a new list of Node markers from a depth-first\n"
     "walk: Leaf per leaf, Push ... Pop around each nested mode.", NULL},
    {"is_injective", layout_get_is_injective, NULL,
     "True exactly when no two coordinates share a scalar index.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef layout_methods[] = {
    {"__reduce__", layout_reduce, METH_NOARGS,
     "__reduce__($self, /)\n--\n\nPickle support: rebuilt from its shape and stride."},
    {"infix", layout_infix, METH_NOARGS,
     "infix($self, /)\n--\n\n"
     "The leaf modes as a new list of (extent, stride) pairs, depth-first:\n"
     "Layout(Shape([2, [3, 4]]), Stride([1, [2, 6]])).infix() == [(2, 1), (3, 2), (4, 6)]."},
    {"index", layout_index, METH_O,
     "index($self, key, /)\n--\n\n"
     "The slot index of coordinate `key`: an int (expanded first mode fastest)\n"
     "or a nested list/tuple of ints matching the shape. Raises TypeError for\n"
     "another kind of key and ValueError for a coordinate out of range."},
    {"get_index", (PyCFunction)(void (*)(void))layout_get_index,
     METH_FASTCALL | METH_STATIC,
     "get_index(layout, key, /)\n--\n\nThe same as layout.index(key)."},
    {"broadcast_to", layout_broadcast_to, METH_O,
     "broadcast_to($self, target, /)\n--\n\n"
     "A layout of Shape `target` that repeats this one: leaves of extent 1 widen\n"
     "to the target's extent with stride 0. Raises TypeError when target is not\n"
     "a Shape and ValueError when the shapes are not compatible."},
    {"concat", layout_concat, METH_O,
     "concat($self, other, /)\n--\n\n"
     "A layout whose top-level modes are this layout's, then other's.\n"
     "Raises TypeError when other is not a Layout. layout + other is the same."},
    {"append", layout_append, METH_O,
     "append($self, other, /)\n--\n\n"
     "This layout with `other` added as one more top-level mode (nested when\n"
     "other has several modes). Raises TypeError when other is not a Layout."},
    {"permute", (PyCFunction)(void (*)(void))layout_permute, METH_FASTCALL,
     "permute($self, *order)\n--\n\n"
     "Reorder the top-level modes: mode j of the result is mode order[j].\n"
     "order is given as ints or as one list/tuple; it must name every mode\n"
     "once (ValueError otherwise). layout.permute(1, 0) swaps two modes."},
    {"canonical", layout_canonical, METH_O | METH_STATIC,
     "canonical(shape, /)\n--\n\n"
     "The compact column-major layout of `shape`: first mode stride 1, each\n"
     "later one the product of the extents before it. Raises TypeError when\n"
     "shape is not a Shape."},
    {NULL, NULL, 0, NULL},
};

static PyNumberMethods layout_as_number = {
    .nb_add = layout_add,
};

PyTypeObject SwLayout_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "strideweave.Layout",
    .tp_doc = "Layout(shape, stride)\n--\n\n"
              "Maps coordinates of `shape` to slot indices through `stride`.\n\n"
              "stride must have the same nesting as shape. Raises ValueError when\n"
              "shape is not a Shape, stride is not a Stride, or they do not match.\n"
              "Calling a layout, layout(key), is layout.index(key).\n\n"
              "    Layout(Shape([2, 3]), Stride([3, 1]))(1) == 3",
    .tp_basicsize = sizeof(SwLayoutObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = layout_new,
    .tp_vectorcall = layout_vectorcall,
    .tp_dealloc = layout_dealloc,
    .tp_repr = layout_repr,
    .tp_hash = layout_hash,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(SwLayoutObject, vectorcall),
    .tp_richcompare = layout_richcompare,
    .tp_setattro = layout_setattro,
    .tp_as_sequence = &layout_as_sequence,
    .tp_as_mapping = &layout_as_mapping,
    .tp_as_number = &layout_as_number,
    .tp_getset = layout_getset,
    .tp_methods = layout_methods,
};

/* ---- flat builders (L-15) ------------------------------------------------ */

static int flat_extents(PyObject *const *args, Py_ssize_t nargs, int64_t **out)
{
    if (nargs == 0) {
        PyErr_SetString(PyExc_ValueError, "at least one extent is required");
        return -1;
    }
    if (nargs > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "too many extents");
        return -1;
    }
    int64_t *ext = PyMem_Malloc((size_t)nargs * sizeof(int64_t));
    if (!ext) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        int overflow = 0;
        long long v = -1;
        if (sw_py_is_integer(args[i])) {
            if (sw_py_index_ll(args[i], &v, &overflow) < 0)
                goto error;
            if (overflow > 0) {
                PyErr_Format(PyExc_OverflowError,
                             "extent %R exceeds signed 64 bits", args[i]);
                goto error;
            }
        }
        if (overflow < 0 || v < 1) {
            PyErr_SetString(PyExc_ValueError, "extents must be positive integers");
            goto error;
        }
        ext[i] = v;
    }
    *out = ext;
    return 0;
error:
    PyMem_Free(ext);
    return -1;
}

static PyObject *flat_build(PyObject *const *args, Py_ssize_t nargs, int rowmajor)
{
    int64_t *ext;
    if (flat_extents(args, nargs, &ext) < 0)
        return NULL;
    PyObject *result = NULL;
    int32_t n = (int32_t)nargs;
    uint8_t *profile = PyMem_Malloc((size_t)n);
    int64_t *strides = PyMem_Malloc((size_t)n * sizeof(int64_t));
    if (!profile || !strides) {
        PyErr_NoMemory();
        goto done;
    }
    memset(profile, SW_NODE_LEAF, (size_t)n);
    sw_error err;
    sw_layout *l;
    if (!rowmajor) {
        l = sw_layout_canonical(n, profile, ext, &err);
    } else {
        int64_t s = 1;
        for (int32_t i = n - 1; i >= 0; i--) {
            strides[i] = s;
            if (i > 0 && __builtin_mul_overflow(s, ext[i], &s)) {
                PyErr_SetString(PyExc_OverflowError,
                                "layout size exceeds signed 64 bits");
                goto done;
            }
        }
        l = sw_layout_new(n, profile, ext, strides, &err);
    }
    result = wrap_result(KIND_LAYOUT, l, &err);
done:
    PyMem_Free(profile);
    PyMem_Free(strides);
    PyMem_Free(ext);
    return result;
}

static PyObject *column_major(PyObject *mod, PyObject *const *args,
                              Py_ssize_t nargs)
{
    (void)mod;
    return flat_build(args, nargs, 0);
}

static PyObject *row_major(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    (void)mod;
    return flat_build(args, nargs, 1);
}

static PyMethodDef module_functions[] = {
    {"column_major", (PyCFunction)(void (*)(void))column_major, METH_FASTCALL,
     "column_major(*extents)\n--\n\n"
     "The compact layout with the first mode fastest: column_major(2, 3) has\n"
     "strides (1, 2). Extents are ints >= 1 (ValueError otherwise)."},
    {"row_major", (PyCFunction)(void (*)(void))row_major, METH_FASTCALL,
     "row_major(*extents)\n--\n\n"
     "The compact layout with the last mode fastest: row_major(2, 3) has\n"
     "strides (3, 1). Extents are ints >= 1 (ValueError otherwise)."},
    {NULL, NULL, 0, NULL},
};

int sw_py_layout_init(PyObject *module)
{
    PyTypeObject *types[3] = {&SwShape_Type, &SwStride_Type, &SwLayout_Type};
    const char *names[3] = {"Shape", "Stride", "Layout"};
    for (int i = 0; i < 3; i++) {
        if (PyType_Ready(types[i]) < 0)
            return -1;
        Py_INCREF(types[i]);
        if (PyModule_AddObject(module, names[i], (PyObject *)types[i]) < 0) {
            Py_DECREF(types[i]);
            return -1;
        }
    }
    return PyModule_AddFunctions(module, module_functions);
}

PyObject *sw_py_flat_layout(int64_t n)
{
    static const uint8_t leaf[1] = {SW_NODE_LEAF};
    const int64_t one = 1;
    sw_error err;
    sw_layout *core = sw_layout_new(1, leaf, &n, &one, &err);
    if (!core) {
        sw_py_raise(&err);
        return NULL;
    }
    return sw_py_layout_wrap(core);
}
