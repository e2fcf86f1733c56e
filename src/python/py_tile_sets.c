/* TileSet, TileSelection and ResidencyPlan (contract-carriers TE-4, TE-5):
 * immutable, hashable value records of tile coordinates. Parsing takes
 * private tuples of the caller's iterables first (their __iter__ may run
 * user code), checks every entry's type, then every value. */
#include "sw_tiled.h"

#include <string.h>
#include <structmember.h>

#define TSET(o) ((SwTileSetObject *)(o))
#define TSEL(o) ((SwTileSelectionObject *)(o))
#define PLAN(o) ((SwResidencyPlanObject *)(o))

/* ---- parsing --------------------------------------------------------------- */

/* tuple(obj), TypeError naming `what` for a non-iterable. */
static PyObject *private_tuple(PyObject *obj, const char *what)
{
    if (!PyTuple_Check(obj) && !PyList_Check(obj)) {
        PyObject *it = PyObject_GetIter(obj);
        if (!it) {
            PyErr_Format(PyExc_TypeError, "%s must be an iterable, not %.100s", what,
                         Py_TYPE(obj)->tp_name);
            return NULL;
        }
        Py_DECREF(it);
    }
    return PySequence_Tuple(obj);
}

static int check_exact_ints(PyObject *row, const char *what)
{
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(row); j++) {
        PyObject *v = PyTuple_GET_ITEM(row, j);
        if (!PyLong_CheckExact(v)) {
            PyErr_Format(PyExc_TypeError, "%s must be exactly int, not %.100s", what,
                         Py_TYPE(v)->tp_name);
            return -1;
        }
    }
    return 0;
}

/* Non-negative coordinates read into out[]. */
static int read_coords(PyObject *row, int64_t *out)
{
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(row); j++) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(row, j), &overflow);
        if (v == -1 && PyErr_Occurred())
            return -1;
        if (overflow > 0) {
            PyErr_SetString(PyExc_ValueError, "a tile coordinate is too large");
            return -1;
        }
        if (overflow < 0 || v < 0) {
            PyErr_SetString(PyExc_ValueError, "tile coordinates must be non-negative");
            return -1;
        }
        out[j] = v;
    }
    return 0;
}

/* ---- TileSet ------------------------------------------------------------------ */

PyObject *sw_tile_set_new(int32_t rank, int64_t n, const int64_t *coords)
{
    SwTileSetObject *s = PyObject_New(SwTileSetObject, &SwTileSet_Type);
    if (!s)
        return NULL;
    s->rank = n ? rank : (rank > 0 ? rank : -1);
    s->n = n;
    s->hash = -1;
    size_t bytes = (size_t)(n * (rank > 0 ? rank : 0)) * sizeof(int64_t);
    s->coords = PyMem_Malloc(bytes ? bytes : 1);
    if (!s->coords) {
        Py_DECREF(s);
        return PyErr_NoMemory();
    }
    if (bytes)
        memcpy(s->coords, coords, bytes);
    return (PyObject *)s;
}

static PyObject *tile_set_tp_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    (void)type;
    static char *kwlist[] = {"coordinates", NULL};
    PyObject *arg = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O:TileSet", kwlist, &arg))
        return NULL;
    if (!arg)
        return sw_tile_set_new(-1, 0, NULL);
    PyObject *outer = private_tuple(arg, "coordinates");
    if (!outer)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(outer);
    PyObject *rows = PyTuple_New(n);
    PyObject *result = NULL;
    int64_t *buf = NULL;
    if (!rows)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *row = private_tuple(PyTuple_GET_ITEM(outer, i), "each tile coordinate");
        if (!row || check_exact_ints(row, "tile coordinate entries") < 0) {
            Py_XDECREF(row);
            goto done;
        }
        PyTuple_SET_ITEM(rows, i, row);
    }
    Py_ssize_t rank = n ? PyTuple_GET_SIZE(PyTuple_GET_ITEM(rows, 0)) : -1;
    for (Py_ssize_t i = 0; i < n; i++)
        if (PyTuple_GET_SIZE(PyTuple_GET_ITEM(rows, i)) != rank) {
            PyErr_SetString(PyExc_ValueError, "every tile coordinate must have the same rank");
            goto done;
        }
    if (n && rank == 0) {
        PyErr_SetString(PyExc_ValueError, "a tile coordinate needs at least one axis");
        goto done;
    }
    buf = PyMem_Malloc((size_t)(n * (rank > 0 ? rank : 0) + 1) * sizeof(int64_t));
    if (!buf) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (read_coords(PyTuple_GET_ITEM(rows, i), buf + i * rank) < 0)
            goto done;
    sw_error err;
    int dup = sw_tiles_sort_coords((int32_t)rank, n, buf, &err);
    if (dup < 0)
        sw_py_raise(&err);
    else if (dup)
        PyErr_SetString(PyExc_ValueError, "a TileSet cannot hold the same tile twice");
    else
        result = sw_tile_set_new((int32_t)rank, n, buf);
done:
    PyMem_Free(buf);
    Py_XDECREF(rows);
    Py_DECREF(outer);
    return result;
}

static void tile_set_dealloc(PyObject *self)
{
    PyMem_Free(TSET(self)->coords);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *row_tuple(const int64_t *row, int32_t rank)
{
    PyObject *t = PyTuple_New(rank);
    for (int32_t k = 0; t && k < rank; k++) {
        PyObject *v = PyLong_FromLongLong(row[k]);
        if (!v) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, k, v);
    }
    return t;
}

static PyObject *tile_set_coordinates(PyObject *self, void *closure)
{
    (void)closure;
    SwTileSetObject *s = TSET(self);
    PyObject *t = PyTuple_New(s->n);
    for (int64_t i = 0; t && i < s->n; i++) {
        PyObject *r = row_tuple(s->coords + i * s->rank, s->rank);
        if (!r) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, i, r);
    }
    return t;
}

static PyObject *tile_set_rank(PyObject *self, void *closure)
{
    (void)closure;
    return TSET(self)->rank < 0 ? Py_NewRef(Py_None) : PyLong_FromLong(TSET(self)->rank);
}

static Py_ssize_t tile_set_len(PyObject *self)
{
    return (Py_ssize_t)TSET(self)->n;
}

static PyObject *tile_set_iter(PyObject *self)
{
    PyObject *t = tile_set_coordinates(self, NULL);
    PyObject *it = t ? PyObject_GetIter(t) : NULL;
    Py_XDECREF(t);
    return it;
}

static int tile_set_contains(PyObject *self, PyObject *item)
{
    SwTileSetObject *s = TSET(self);
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != s->rank)
        return 0;
    int64_t row[SW_TILES_MAX_RANK];
    for (int32_t k = 0; k < s->rank; k++) {
        PyObject *v = PyTuple_GET_ITEM(item, k);
        if (!PyLong_CheckExact(v))
            return 0;
        int overflow;
        row[k] = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow)
            return 0;
    }
    for (int64_t i = 0; i < s->n; i++)
        if (memcmp(s->coords + i * s->rank, row, (size_t)s->rank * sizeof(int64_t)) == 0)
            return 1;
    return 0;
}

static int tile_set_equal(SwTileSetObject *a, SwTileSetObject *b)
{
    if (a->n != b->n)
        return 0;
    if (a->n == 0)
        return 1; /* the empty set is one value whatever rank it was given */
    return a->rank == b->rank &&
           memcmp(a->coords, b->coords, (size_t)(a->n * a->rank) * sizeof(int64_t)) == 0;
}

static PyObject *tile_set_richcompare(PyObject *self, PyObject *other, int op)
{
    if (!PyObject_TypeCheck(other, &SwTileSet_Type) || (op != Py_EQ && op != Py_NE))
        Py_RETURN_NOTIMPLEMENTED;
    int eq = tile_set_equal(TSET(self), TSET(other));
    return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static Py_hash_t tile_set_hash(PyObject *self)
{
    SwTileSetObject *s = TSET(self);
    if (s->hash != -1)
        return s->hash;
    Py_uhash_t h = 0x345678UL + (Py_uhash_t)s->n;
    int64_t count = s->n ? s->n * s->rank : 0;
    for (int64_t i = 0; i < count; i++)
        h = (h ^ (Py_uhash_t)s->coords[i]) * 1000003UL;
    s->hash = h == (Py_uhash_t)-1 ? -2 : (Py_hash_t)h;
    return s->hash;
}

static PyObject *tile_set_repr(PyObject *self)
{
    PyObject *c = tile_set_coordinates(self, NULL);
    PyObject *r = c ? PyUnicode_FromFormat("TileSet(%R)", c) : NULL;
    Py_XDECREF(c);
    return r;
}

int sw_tile_set_bind(PyObject *tile_set, const sw_tile_geometry *g)
{
    SwTileSetObject *s = TSET(tile_set);
    if (s->n == 0)
        return 0;
    if (s->rank != g->rank) {
        PyErr_Format(PyExc_ValueError, "the tiles have %d axes but the tile grid has %d",
                     (int)s->rank, (int)g->rank);
        return -1;
    }
    for (int64_t i = 0; i < s->n; i++)
        for (int32_t k = 0; k < g->rank; k++)
            if (s->coords[i * s->rank + k] >= g->grid[k]) {
                PyErr_Format(PyExc_ValueError,
                             "tile coordinate %lld is outside axis %d of the tile grid "
                             "(size %lld)", (long long)s->coords[i * s->rank + k], (int)k,
                             (long long)g->grid[k]);
                return -1;
            }
    return 0;
}

static PySequenceMethods tile_set_as_sequence = {
    .sq_length = tile_set_len,
    .sq_contains = tile_set_contains,
};

static PyGetSetDef tile_set_getset[] = {
    {"coordinates", tile_set_coordinates, NULL,
     "The tile coordinates as tuples, sorted by their last entry first.", NULL},
    {"rank", tile_set_rank, NULL, "Axes per coordinate; None for the empty TileSet().", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject SwTileSet_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "strideweave.TileSet",
    .tp_basicsize = sizeof(SwTileSetObject),
    .tp_dealloc = tile_set_dealloc,
    .tp_repr = tile_set_repr,
    .tp_as_sequence = &tile_set_as_sequence,
    .tp_hash = tile_set_hash,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "TileSet(coordinates=())\n--\n\n"
              "An immutable set of tile coordinates (tuples of non-negative ints, all\n"
              "of one length), kept sorted by last entry first. Equal sets compare\n"
              "and hash equal. Raises TypeError for non-iterables or entries that are\n"
              "not exactly int, ValueError for mixed lengths, negative entries or a\n"
              "tile listed twice.\n\n"
              "    TileSet([(0, 1), (1, 0)]).coordinates == ((1, 0), (0, 1))",
    .tp_richcompare = tile_set_richcompare,
    .tp_iter = tile_set_iter,
    .tp_getset = tile_set_getset,
    .tp_new = tile_set_tp_new,
};

/* ---- TileSelection ----------------------------------------------------------- */

static PyObject *tile_selection_tp_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"per_axis", NULL};
    PyObject *arg;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O:TileSelection", kwlist, &arg))
        return NULL;
    PyObject *outer = private_tuple(arg, "per_axis");
    if (!outer)
        return NULL;
    Py_ssize_t rank = PyTuple_GET_SIZE(outer);
    PyObject *axes = PyTuple_New(rank);
    SwTileSelectionObject *sel = NULL;
    if (!axes)
        goto fail;
    for (Py_ssize_t k = 0; k < rank; k++) {
        PyObject *a = private_tuple(PyTuple_GET_ITEM(outer, k), "each axis of per_axis");
        if (!a || check_exact_ints(a, "tile coordinates") < 0) {
            Py_XDECREF(a);
            goto fail;
        }
        PyTuple_SET_ITEM(axes, k, a);
    }
    if (rank == 0 || rank > SW_TILES_MAX_RANK) {
        PyErr_Format(PyExc_ValueError, "a TileSelection needs 1 to %d axes, not %zd",
                     SW_TILES_MAX_RANK, rank);
        goto fail;
    }
    sel = (SwTileSelectionObject *)type->tp_alloc(type, 0);
    if (!sel)
        goto fail;
    sel->rank = (int32_t)rank;
    sel->hash = -1;
    sel->counts = PyMem_Calloc((size_t)rank, sizeof(int64_t));
    sel->axes = PyMem_Calloc((size_t)rank, sizeof(int64_t *));
    if (!sel->counts || !sel->axes) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t k = 0; k < rank; k++) {
        PyObject *a = PyTuple_GET_ITEM(axes, k);
        Py_ssize_t m = PyTuple_GET_SIZE(a);
        if (m == 0) {
            PyErr_Format(PyExc_ValueError, "axis %zd of the selection is empty", k);
            goto fail;
        }
        sel->counts[k] = m;
        sel->axes[k] = PyMem_Malloc((size_t)m * sizeof(int64_t));
        if (!sel->axes[k]) {
            PyErr_NoMemory();
            goto fail;
        }
        if (read_coords(a, sel->axes[k]) < 0)
            goto fail;
        for (Py_ssize_t i = 0; i < m; i++)
            for (Py_ssize_t j = 0; j < i; j++)
                if (sel->axes[k][i] == sel->axes[k][j]) {
                    PyErr_Format(PyExc_ValueError,
                                 "axis %zd of the selection lists tile %lld twice", k,
                                 (long long)sel->axes[k][i]);
                    goto fail;
                }
    }
    sel->per_axis = axes;
    Py_DECREF(outer);
    return (PyObject *)sel;
fail:
    Py_XDECREF(sel);
    Py_XDECREF(axes);
    Py_DECREF(outer);
    return NULL;
}

static void tile_selection_dealloc(PyObject *self)
{
    SwTileSelectionObject *s = TSEL(self);
    if (s->axes)
        for (int32_t k = 0; k < s->rank; k++)
            PyMem_Free(s->axes[k]);
    PyMem_Free(s->axes);
    PyMem_Free(s->counts);
    Py_XDECREF(s->per_axis);
    Py_TYPE(self)->tp_free(self);
}

void sw_tile_selection_view(PyObject *selection, sw_tile_selection *out)
{
    SwTileSelectionObject *s = TSEL(selection);
    out->rank = s->rank;
    out->counts = s->counts;
    out->coords = (const int64_t *const *)s->axes;
}

/* Cartesian product, first axis fastest, into rows. */
static int64_t product_rows(SwTileSelectionObject *s, int64_t **rows)
{
    int64_t n = 1;
    for (int32_t k = 0; k < s->rank; k++)
        if (__builtin_mul_overflow(n, s->counts[k], &n) || n > (1LL << 40)) {
            PyErr_SetString(PyExc_OverflowError, "the selection names too many tiles");
            return -1;
        }
    *rows = PyMem_Malloc((size_t)(n * s->rank) * sizeof(int64_t));
    if (!*rows) {
        PyErr_NoMemory();
        return -1;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t c = i;
        for (int32_t k = 0; k < s->rank; k++) {
            (*rows)[i * s->rank + k] = s->axes[k][c % s->counts[k]];
            c /= s->counts[k];
        }
    }
    return n;
}

static PyObject *tile_selection_coordinates(PyObject *self, void *closure)
{
    (void)closure;
    SwTileSelectionObject *s = TSEL(self);
    int64_t *rows;
    int64_t n = product_rows(s, &rows);
    if (n < 0)
        return NULL;
    PyObject *t = PyTuple_New(n);
    for (int64_t i = 0; t && i < n; i++) {
        PyObject *r = row_tuple(rows + i * s->rank, s->rank);
        if (!r) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, i, r);
    }
    PyMem_Free(rows);
    return t;
}

PyObject *sw_tile_selection_tile_set(PyObject *selection)
{
    SwTileSelectionObject *s = TSEL(selection);
    int64_t *rows;
    int64_t n = product_rows(s, &rows);
    if (n < 0)
        return NULL;
    sw_error err;
    PyObject *r = NULL;
    if (sw_tiles_sort_coords(s->rank, n, rows, &err) < 0)
        sw_py_raise(&err);
    else
        r = sw_tile_set_new(s->rank, n, rows);
    PyMem_Free(rows);
    return r;
}

static PyObject *tile_selection_get_tile_set(PyObject *self, void *closure)
{
    (void)closure;
    return sw_tile_selection_tile_set(self);
}

static PyObject *tile_selection_per_axis(PyObject *self, void *closure)
{
    (void)closure;
    return Py_NewRef(TSEL(self)->per_axis);
}

static PyObject *tile_selection_rank(PyObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromLong(TSEL(self)->rank);
}

static PyObject *tile_selection_compact(PyObject *self, void *closure)
{
    (void)closure;
    SwTileSelectionObject *s = TSEL(self);
    PyObject *t = PyTuple_New(s->rank);
    for (int32_t k = 0; t && k < s->rank; k++) {
        PyObject *v = PyLong_FromLongLong(s->counts[k]);
        if (!v) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, k, v);
    }
    return t;
}

static PyObject *tile_selection_richcompare(PyObject *self, PyObject *other, int op)
{
    if (!PyObject_TypeCheck(other, &SwTileSelection_Type) || (op != Py_EQ && op != Py_NE))
        Py_RETURN_NOTIMPLEMENTED;
    return PyObject_RichCompare(TSEL(self)->per_axis, TSEL(other)->per_axis, op);
}

static Py_hash_t tile_selection_hash(PyObject *self)
{
    if (TSEL(self)->hash == -1)
        TSEL(self)->hash = PyObject_Hash(TSEL(self)->per_axis);
    return TSEL(self)->hash;
}

static PyObject *tile_selection_repr(PyObject *self)
{
    return PyUnicode_FromFormat("TileSelection(%R)", TSEL(self)->per_axis);
}

static PyGetSetDef tile_selection_getset[] = {
    {"per_axis", tile_selection_per_axis, NULL,
     "The tile coordinates chosen on each axis, in the order given.", NULL},
    {"rank", tile_selection_rank, NULL, "Number of axes.", NULL},
    {"compact_grid_shape", tile_selection_compact, NULL,
     "How many tiles are chosen on each axis.", NULL},
    {"coordinates", tile_selection_coordinates, NULL,
     "Every chosen tile (the product of the axes), first axis fastest.", NULL},
    {"tile_set", tile_selection_get_tile_set, NULL, "The chosen tiles as a TileSet.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject SwTileSelection_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "strideweave.TileSelection",
    .tp_basicsize = sizeof(SwTileSelectionObject),
    .tp_dealloc = tile_selection_dealloc,
    .tp_repr = tile_selection_repr,
    .tp_hash = tile_selection_hash,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "TileSelection(per_axis)\n--\n\n"
              "A product of tile coordinates: per_axis lists, for each grid axis, the\n"
              "tiles to take on that axis, in the order they appear in a projection.\n"
              "Immutable and hashable. Raises TypeError for non-iterables or entries\n"
              "that are not exactly int, ValueError for no axes, an empty axis, a\n"
              "tile listed twice on one axis, or a negative entry.\n\n"
              "    TileSelection(([7, 2], [4, 9])).coordinates\n"
              "    # ((7, 4), (2, 4), (7, 9), (2, 9))",
    .tp_richcompare = tile_selection_richcompare,
    .tp_getset = tile_selection_getset,
    .tp_new = tile_selection_tp_new,
};

/* ---- ResidencyPlan ----------------------------------------------------------- */

static int sets_overlap(SwTileSetObject *a, SwTileSetObject *b)
{
    if (!a->n || !b->n || a->rank != b->rank)
        return 0;
    for (int64_t i = 0; i < a->n; i++)
        for (int64_t j = 0; j < b->n; j++)
            if (memcmp(a->coords + i * a->rank, b->coords + j * b->rank,
                       (size_t)a->rank * sizeof(int64_t)) == 0)
                return 1;
    return 0;
}

static PyObject *plan_tp_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"promote", "retain", "evict", NULL};
    static const char *names[] = {"promote", "retain", "evict"};
    PyObject *v[3] = {Py_None, Py_None, Py_None};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|OOO:ResidencyPlan", kwlist, &v[0], &v[1],
                                     &v[2]))
        return NULL;
    for (int i = 0; i < 3; i++)
        if (v[i] != Py_None && !PyObject_TypeCheck(v[i], &SwTileSet_Type)) {
            PyErr_Format(PyExc_TypeError, "%s must be a TileSet or None, not %.100s", names[i],
                         Py_TYPE(v[i])->tp_name);
            return NULL;
        }
    SwResidencyPlanObject *p = (SwResidencyPlanObject *)type->tp_alloc(type, 0);
    if (!p)
        return NULL;
    PyObject **slots[3] = {&p->promote, &p->retain, &p->evict};
    for (int i = 0; i < 3; i++) {
        *slots[i] = v[i] != Py_None ? Py_NewRef(v[i]) : sw_tile_set_new(-1, 0, NULL);
        if (!*slots[i]) {
            Py_DECREF(p);
            return NULL;
        }
    }
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 3; j++)
            if (sets_overlap(TSET(*slots[i]), TSET(*slots[j]))) {
                PyErr_Format(PyExc_ValueError,
                             "a tile cannot be in both %s and %s of one ResidencyPlan",
                             names[i], names[j]);
                Py_DECREF(p);
                return NULL;
            }
    return (PyObject *)p;
}

static void plan_dealloc(PyObject *self)
{
    Py_XDECREF(PLAN(self)->promote);
    Py_XDECREF(PLAN(self)->retain);
    Py_XDECREF(PLAN(self)->evict);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *plan_richcompare(PyObject *self, PyObject *other, int op)
{
    if (!PyObject_TypeCheck(other, &SwResidencyPlan_Type) || (op != Py_EQ && op != Py_NE))
        Py_RETURN_NOTIMPLEMENTED;
    SwResidencyPlanObject *a = PLAN(self), *b = PLAN(other);
    int eq = tile_set_equal(TSET(a->promote), TSET(b->promote)) &&
             tile_set_equal(TSET(a->retain), TSET(b->retain)) &&
             tile_set_equal(TSET(a->evict), TSET(b->evict));
    return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static PyObject *plan_repr(PyObject *self)
{
    return PyUnicode_FromFormat("ResidencyPlan(promote=%R, retain=%R, evict=%R)",
                                PLAN(self)->promote, PLAN(self)->retain, PLAN(self)->evict);
}

static PyMemberDef plan_members[] = {
    {"promote", T_OBJECT, offsetof(SwResidencyPlanObject, promote), READONLY,
     "Tiles to bring into the primary tier and keep there during the work."},
    {"retain", T_OBJECT, offsetof(SwResidencyPlanObject, retain), READONLY,
     "Tiles to keep where they are during the work."},
    {"evict", T_OBJECT, offsetof(SwResidencyPlanObject, evict), READONLY,
     "Tiles to move to the secondary tier once the work is done."},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject SwResidencyPlan_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "strideweave.ResidencyPlan",
    .tp_basicsize = sizeof(SwResidencyPlanObject),
    .tp_dealloc = plan_dealloc,
    .tp_repr = plan_repr,
    .tp_hash = PyObject_HashNotImplemented,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "ResidencyPlan(promote=None, retain=None, evict=None)\n--\n\n"
              "What a residency policy wants done around a projection: three TileSets\n"
              "(None means empty). Raises TypeError for anything but a TileSet or\n"
              "None, ValueError when a tile is in two of them.",
    .tp_richcompare = plan_richcompare,
    .tp_members = plan_members,
    .tp_new = plan_tp_new,
};

int sw_tile_sets_init(PyObject *module)
{
    PyTypeObject *types[] = {&SwTileSet_Type, &SwTileSelection_Type, &SwResidencyPlan_Type};
    for (size_t i = 0; i < 3; i++)
        if (PyType_Ready(types[i]) < 0 ||
            PyModule_AddObjectRef(module, _PyType_Name(types[i]), (PyObject *)types[i]) < 0)
            return -1;
    return 0;
}
