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

/* The entries of row into out[]: a value no int64 holds becomes INT64_MAX
 * (too large) or -1 (negative), so the core refuses it in its place. */
static void read_coords(PyObject *row, int64_t *out)
{
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(row); j++) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(row, j), &overflow);
        out[j] = overflow > 0 ? INT64_MAX : overflow < 0 ? -1 : v;
    }
}

/* ---- TileSet ------------------------------------------------------------------ */

/* A TileSet over the core set (the reference is the object's). */
static PyObject *tile_set_wrap(sw_tile_set *set)
{
    SwTileSetObject *s = PyObject_New(SwTileSetObject, &SwTileSet_Type);
    if (!s) {
        sw_tile_set_unref(set);
        return NULL;
    }
    s->set = set;
    s->rank = sw_tile_set_rank(set);
    s->n = sw_tile_set_size(set);
    s->coords = sw_tile_set_coords(set);
    return (PyObject *)s;
}

PyObject *sw_py_tile_set_new(int32_t rank, int64_t n, const int64_t *coords)
{
    sw_tile_set *set;
    sw_error err;
    if (sw_tile_set_new(rank, n, coords, NULL, &set, &err) != SW_OK)
        return sw_py_raise(&err), NULL;
    return tile_set_wrap(set);
}

static PyObject *tile_set_tp_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    (void)type;
    static char *kwlist[] = {"coordinates", NULL};
    PyObject *arg = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O:TileSet", kwlist, &arg))
        return NULL;
    if (!arg)
        return sw_py_tile_set_new(-1, 0, NULL);
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
    if (rank > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "a tile coordinate has too many axes");
        goto done;
    }
    buf = PyMem_Malloc((size_t)(n * (rank > 0 ? rank : 0) + 1) * sizeof(int64_t));
    if (!buf) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        read_coords(PyTuple_GET_ITEM(rows, i), buf + i * rank);
    result = sw_py_tile_set_new((int32_t)rank, n, buf);
done:
    PyMem_Free(buf);
    Py_XDECREF(rows);
    Py_DECREF(outer);
    return result;
}

static void tile_set_dealloc(PyObject *self)
{
    sw_tile_set_unref(TSET(self)->set);
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
        PyObject *r = row_tuple(sw_tile_set_at(s->set, i), s->rank);
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

/* `item` in the set: a tuple of the set's rank of exact ints (anything
 * else is simply not in it). */
static int tile_set_contains(PyObject *self, PyObject *item)
{
    SwTileSetObject *s = TSET(self);
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != s->rank)
        return 0;
    int64_t small[SW_TILES_MAX_RANK];
    int64_t *row = s->rank <= SW_TILES_MAX_RANK ? small
                                                : PyMem_Malloc((size_t)s->rank * sizeof *row);
    if (!row)
        return PyErr_NoMemory(), -1;
    int ok = 1;
    for (int32_t k = 0; ok && k < s->rank; k++) {
        PyObject *v = PyTuple_GET_ITEM(item, k);
        int overflow = 0;
        ok = PyLong_CheckExact(v) && ((row[k] = PyLong_AsLongLongAndOverflow(v, &overflow)),
                                      !overflow);
    }
    int in = ok && sw_tile_set_contains(s->set, s->rank, row);
    if (row != small)
        PyMem_Free(row);
    return in;
}

static PyObject *tile_set_richcompare(PyObject *self, PyObject *other, int op)
{
    if (!PyObject_TypeCheck(other, &SwTileSet_Type) || (op != Py_EQ && op != Py_NE))
        Py_RETURN_NOTIMPLEMENTED;
    int eq = sw_tile_set_equal(TSET(self)->set, TSET(other)->set);
    return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static Py_hash_t tile_set_hash(PyObject *self)
{
    Py_hash_t h = (Py_hash_t)sw_tile_set_hash(TSET(self)->set);
    return h == -1 ? -2 : h;
}

static PyObject *tile_set_repr(PyObject *self)
{
    PyObject *c = tile_set_coordinates(self, NULL);
    PyObject *r = c ? PyUnicode_FromFormat("TileSet(%R)", c) : NULL;
    Py_XDECREF(c);
    return r;
}

int sw_py_tile_set_bind(PyObject *tile_set, const sw_tile_geometry *g)
{
    sw_error err;
    return sw_tile_set_check_grid(TSET(tile_set)->set, g, &err) == SW_OK ? 0 : sw_py_raise(&err);
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
    Py_ssize_t rank = PyTuple_GET_SIZE(outer), total = 0;
    PyObject *axes = PyTuple_New(rank);
    SwTileSelectionObject *sel = NULL;
    int64_t *values = NULL, *counts = NULL;
    const int64_t **coords = NULL;
    if (!axes)
        goto fail;
    for (Py_ssize_t k = 0; k < rank; k++) {
        PyObject *a = private_tuple(PyTuple_GET_ITEM(outer, k), "each axis of per_axis");
        if (!a || check_exact_ints(a, "tile coordinates") < 0) {
            Py_XDECREF(a);
            goto fail;
        }
        PyTuple_SET_ITEM(axes, k, a);
        total += PyTuple_GET_SIZE(a);
    }
    values = PyMem_Malloc((size_t)(total + 1) * sizeof *values);
    counts = PyMem_Malloc((size_t)(rank + 1) * sizeof *counts);
    coords = PyMem_Malloc((size_t)(rank + 1) * sizeof *coords);
    if (!values || !counts || !coords) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t k = 0, at = 0; k < rank; k++) {
        PyObject *a = PyTuple_GET_ITEM(axes, k);
        counts[k] = PyTuple_GET_SIZE(a);
        coords[k] = values + at;
        read_coords(a, values + at);
        at += counts[k];
    }
    sw_tile_sel *core;
    sw_error err;
    if (sw_tile_sel_new(rank > INT32_MAX ? INT32_MAX : (int32_t)rank, counts, coords, &core,
                        &err) != SW_OK) {
        sw_py_raise(&err);
        goto fail;
    }
    sel = (SwTileSelectionObject *)type->tp_alloc(type, 0);
    if (!sel) {
        sw_tile_sel_unref(core);
        goto fail;
    }
    sel->sel = core;
    sel->per_axis = axes;
    axes = NULL;
fail:
    PyMem_Free(values);
    PyMem_Free(counts);
    PyMem_Free(coords);
    Py_XDECREF(axes);
    Py_DECREF(outer);
    return (PyObject *)sel;
}

static void tile_selection_dealloc(PyObject *self)
{
    sw_tile_sel_unref(TSEL(self)->sel);
    Py_XDECREF(TSEL(self)->per_axis);
    Py_TYPE(self)->tp_free(self);
}

void sw_py_tile_selection_view(PyObject *selection, sw_tile_selection *out)
{
    sw_tile_sel_view(TSEL(selection)->sel, out);
}

static PyObject *tile_selection_coordinates(PyObject *self, void *closure)
{
    (void)closure;
    const sw_tile_sel *s = TSEL(self)->sel;
    int32_t rank = sw_tile_sel_rank(s);
    int64_t n = sw_tile_sel_size(s), row[SW_TILES_MAX_RANK];
    if (n < 0) {
        PyErr_SetString(PyExc_OverflowError, "the selection names too many tiles");
        return NULL;
    }
    PyObject *t = PyTuple_New(n);
    for (int64_t i = 0; t && i < n; i++) {
        sw_tile_sel_tile(s, i, row, NULL);
        PyObject *r = row_tuple(row, rank);
        if (!r) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, i, r);
    }
    return t;
}

PyObject *sw_py_tile_selection_tile_set(PyObject *selection)
{
    sw_tile_set *set;
    sw_error err;
    if (sw_tile_sel_tile_set(TSEL(selection)->sel, &set, &err) != SW_OK)
        return sw_py_raise(&err), NULL;
    return tile_set_wrap(set);
}

static PyObject *tile_selection_get_tile_set(PyObject *self, void *closure)
{
    (void)closure;
    return sw_py_tile_selection_tile_set(self);
}

static PyObject *tile_selection_per_axis(PyObject *self, void *closure)
{
    (void)closure;
    return Py_NewRef(TSEL(self)->per_axis);
}

static PyObject *tile_selection_rank(PyObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromLong(sw_tile_sel_rank(TSEL(self)->sel));
}

static PyObject *tile_selection_compact(PyObject *self, void *closure)
{
    (void)closure;
    const sw_tile_sel *s = TSEL(self)->sel;
    PyObject *t = PyTuple_New(sw_tile_sel_rank(s));
    for (int32_t k = 0; t && k < sw_tile_sel_rank(s); k++) {
        PyObject *v = PyLong_FromLongLong(sw_tile_sel_count(s, k));
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
    int eq = sw_tile_sel_equal(TSEL(self)->sel, TSEL(other)->sel);
    return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static Py_hash_t tile_selection_hash(PyObject *self)
{
    Py_hash_t h = (Py_hash_t)sw_tile_sel_hash(TSEL(self)->sel);
    return h == -1 ? -2 : h;
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
    sw_tile_set *sets[3];
    for (int i = 0; i < 3; i++)
        sets[i] = v[i] != Py_None ? TSET(v[i])->set : NULL;
    sw_residency_plan *core;
    sw_error err;
    if (sw_residency_plan_new(sets[0], sets[1], sets[2], &core, &err) != SW_OK)
        return sw_py_raise(&err), NULL;
    SwResidencyPlanObject *p = (SwResidencyPlanObject *)type->tp_alloc(type, 0);
    if (!p) {
        sw_residency_plan_unref(core);
        return NULL;
    }
    p->plan = core;
    PyObject **slots[3] = {&p->promote, &p->retain, &p->evict};
    for (int i = 0; i < 3; i++) {
        *slots[i] = v[i] != Py_None ? Py_NewRef(v[i])
                                    : tile_set_wrap(sw_tile_set_ref(
                                          sw_residency_plan_tiles(core, (sw_te_plan_set)i)));
        if (!*slots[i]) {
            Py_DECREF(p);
            return NULL;
        }
    }
    return (PyObject *)p;
}

static void plan_dealloc(PyObject *self)
{
    Py_XDECREF(PLAN(self)->promote);
    Py_XDECREF(PLAN(self)->retain);
    Py_XDECREF(PLAN(self)->evict);
    sw_residency_plan_unref(PLAN(self)->plan);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *plan_richcompare(PyObject *self, PyObject *other, int op)
{
    if (!PyObject_TypeCheck(other, &SwResidencyPlan_Type) || (op != Py_EQ && op != Py_NE))
        Py_RETURN_NOTIMPLEMENTED;
    int eq = sw_residency_plan_equal(PLAN(self)->plan, PLAN(other)->plan);
    return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

int sw_py_residency_plan_apply(PyObject *plan, sw_te_plan *out)
{
    sw_error err;
    return sw_te_plan_add_residency(out, PLAN(plan)->plan, &err) == SW_OK ? 0
                                                                          : sw_py_raise(&err);
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

int sw_py_tile_sets_init(PyObject *module)
{
    PyTypeObject *types[] = {&SwTileSet_Type, &SwTileSelection_Type, &SwResidencyPlan_Type};
    for (size_t i = 0; i < 3; i++)
        if (PyType_Ready(types[i]) < 0 ||
            PyModule_AddObjectRef(module, _PyType_Name(types[i]), (PyObject *)types[i]) < 0)
            return -1;
    return 0;
}
