/* DType descriptors (contract-core D-1..D-8) and the storage-dtype helpers
 * every shipped carrier uses (contract-carriers C-7, C-8, C-9).
 *
 * The four classes are static types without Py_TPFLAGS_BASETYPE and without
 * tp_new: nobody can create or register a descriptor (D-8), and rebinding
 * `DType.<Name>` fails TypeError because the type is immutable (D-1). Each
 * built-in descriptor is one object created at module init and kept alive
 * for the life of the process. */
#include "sw_python.h"
#include "sw_float.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <string.h>

static PyObject *singletons[SW_DT_COUNT];

PyObject *sw_py_dtype(sw_dtype id)
{
    return (unsigned)id < SW_DT_COUNT ? singletons[id] : NULL;
}

static const sw_dtype_info *info_of(PyObject *self)
{
    return sw_dtype_info_of(SwDType_ID(self));
}

static PyTypeObject *kind_type(sw_dtype_kind kind)
{
    switch (kind) {
    case SW_DK_CATEGORY: return &SwDTypeCategory_Type;
    case SW_DK_SIMPLE: return &SwSimpleDType_Type;
    default: return &SwCompoundDType_Type;
    }
}

static const char *kind_name(sw_dtype_kind kind)
{
    switch (kind) {
    case SW_DK_CATEGORY: return "DTypeCategory";
    case SW_DK_SIMPLE: return "SimpleDType";
    default: return "CompoundDType";
    }
}

/* ---- descriptor methods -------------------------------------------------- */

static PyObject *dtype_repr(PyObject *self)
{
    const sw_dtype_info *info = info_of(self);
    return PyUnicode_FromFormat("%s('%s')", kind_name(info->kind), info->name);
}

static PyObject *dtype_get_name(PyObject *self, void *closure)
{
    (void)closure;
    return PyUnicode_FromString(info_of(self)->name);
}

static PyObject *dtype_get_supertype(PyObject *self, void *closure)
{
    (void)closure;
    int sup = info_of(self)->supertype;
    PyObject *res = sup < 0 ? Py_None : singletons[sup];
    return Py_NewRef(res);
}

static PyObject *dtype_supertypes(PyObject *self, PyObject *unused)
{
    (void)unused;
    int n = 0;
    for (int cur = info_of(self)->supertype; cur >= 0;
         cur = sw_dtype_info_of((sw_dtype)cur)->supertype)
        n++;
    PyObject *res = PyTuple_New(n);
    if (!res)
        return NULL;
    int i = 0;
    for (int cur = info_of(self)->supertype; cur >= 0;
         cur = sw_dtype_info_of((sw_dtype)cur)->supertype)
        PyTuple_SET_ITEM(res, i++, Py_NewRef(singletons[cur]));
    return res;
}

static PyObject *dtype_is_subtype_of(PyObject *self, PyObject *other)
{
    if (!SwDType_Check(other)) {
        PyErr_Format(PyExc_TypeError,
                     "is_subtype_of() argument must be a DType, not %.200s",
                     Py_TYPE(other)->tp_name);
        return NULL;
    }
    return PyBool_FromLong(sw_dtype_is_subtype(SwDType_ID(self), SwDType_ID(other)));
}

static PyObject *dtype_is_kind(PyObject *self, sw_dtype_kind kind)
{
    return PyBool_FromLong(info_of(self)->kind == kind);
}

static PyObject *dtype_is_category(PyObject *self, PyObject *unused)
{
    (void)unused;
    return dtype_is_kind(self, SW_DK_CATEGORY);
}

static PyObject *dtype_is_simple(PyObject *self, PyObject *unused)
{
    (void)unused;
    return dtype_is_kind(self, SW_DK_SIMPLE);
}

static PyObject *dtype_is_compound(PyObject *self, PyObject *unused)
{
    (void)unused;
    return dtype_is_kind(self, SW_DK_COMPOUND);
}

static PyObject *dtype_is_opaque_storage(PyObject *self, PyObject *unused)
{
    (void)unused;
    sw_dtype id = SwDType_ID(self);
    return PyBool_FromLong(id == SW_DT_ANY || id == SW_DT_FLOATING);
}

static PyObject *dtype_storage_schema(PyObject *self, PyObject *unused)
{
    (void)unused;
    const sw_dtype_info *info = info_of(self);
    if (info->nplanes == 0) {
        PyErr_Format(PyExc_ValueError, "%s has no storage schema", info->name);
        return NULL;
    }
    PyObject *res = PyTuple_New(info->nplanes);
    if (!res)
        return NULL;
    for (int i = 0; i < info->nplanes; i++)
        PyTuple_SET_ITEM(res, i, Py_NewRef(singletons[info->planes[i]]));
    return res;
}

static PyObject *dtype_self(PyObject *self, PyObject *unused)
{
    (void)unused;
    return Py_NewRef(self);
}

/* Pickled by name: unpickling evaluates getattr(DType, name), which is the
 * singleton (D-1). */
static PyObject *dtype_reduce(PyObject *self, PyObject *unused)
{
    (void)unused;
    PyObject *builtins = PyEval_GetBuiltins(); /* borrowed */
    PyObject *getattr_fn = builtins ? PyDict_GetItemString(builtins, "getattr") : NULL;
    if (!getattr_fn) {
        PyErr_SetString(PyExc_RuntimeError, "builtins.getattr is unavailable");
        return NULL;
    }
    return Py_BuildValue("O(Os)", getattr_fn, (PyObject *)&SwDType_Type,
                         info_of(self)->name);
}

static PyObject *lookup_name(PyObject *name)
{
    Py_ssize_t len;
    const char *s = PyUnicode_AsUTF8AndSize(name, &len);
    if (!s)
        return NULL;
    /* Compare lengths too: "Float32\0junk" is not Float32 (D-8 exact name). */
    for (int i = 0; i < SW_DT_COUNT; i++) {
        const char *n = sw_dtype_info_of((sw_dtype)i)->name;
        if (strlen(n) == (size_t)len && memcmp(n, s, (size_t)len) == 0)
            return singletons[i];
    }
    return NULL;
}

static PyObject *dtype_from_name(PyObject *cls, PyObject *name)
{
    if (!PyUnicode_Check(name)) {
        PyErr_Format(PyExc_TypeError, "from_name() argument must be str, not %.200s",
                     Py_TYPE(name)->tp_name);
        return NULL;
    }
    PyObject *found = lookup_name(name);
    if (!found && PyErr_Occurred()) {
        /* A str that cannot be encoded (lone surrogate) names nothing. */
        if (!PyErr_ExceptionMatches(PyExc_UnicodeError))
            return NULL;
        PyErr_Clear();
    }
    if (!found) {
        PyErr_Format(PyExc_LookupError, "no dtype named %R", name);
        return NULL;
    }
    if (!PyObject_TypeCheck(found, (PyTypeObject *)cls)) {
        PyErr_Format(PyExc_LookupError, "dtype %R is a %s, not a %s", name,
                     Py_TYPE(found)->tp_name, ((PyTypeObject *)cls)->tp_name);
        return NULL;
    }
    return Py_NewRef(found);
}

static PyObject *dtype_registered(PyObject *cls, PyObject *unused)
{
    (void)unused;
    PyObject *res = PyList_New(0);
    if (!res)
        return NULL;
    for (int i = 0; i < SW_DT_COUNT; i++) {
        if (PyObject_TypeCheck(singletons[i], (PyTypeObject *)cls) &&
            PyList_Append(res, singletons[i]) < 0) {
            Py_DECREF(res);
            return NULL;
        }
    }
    PyObject *tuple = PyList_AsTuple(res);
    Py_DECREF(res);
    return tuple;
}

static PyMethodDef dtype_methods[] = {
    {"is_category", dtype_is_category, METH_NOARGS,
     "is_category($self, /)\n--\n\nWhether this is a category (Any, Floating or Integer)."},
    {"is_simple", dtype_is_simple, METH_NOARGS,
     "is_simple($self, /)\n--\n\nWhether this is a concrete dtype with a bit width, such as Float32."},
    {"is_compound", dtype_is_compound, METH_NOARGS,
     "is_compound($self, /)\n--\n\nWhether this dtype is built from several planes (ScaledInt32)."},
    {"supertypes", dtype_supertypes, METH_NOARGS,
     "supertypes($self, /)\n--\n\n"
     "The categories that contain this dtype, nearest first:\n"
     "DType.Float32.supertypes() == (DType.Floating, DType.Any)."},
    {"is_subtype_of", dtype_is_subtype_of, METH_O,
     "is_subtype_of($self, other, /)\n--\n\n"
     "Whether this dtype is `other` or lies inside it:\n"
     "self is other or other in self.supertypes(). Raises TypeError when\n"
     "other is not a DType."},
    {"is_opaque_storage", dtype_is_opaque_storage, METH_NOARGS,
     "is_opaque_storage($self, /)\n--\n\n"
     "Whether a carrier of this dtype may hold values of any of its members:\n"
     "true only for the categories Any and Floating."},
    {"_storage_schema", dtype_storage_schema, METH_NOARGS,
     "_storage_schema($self, /)\n--\n\n"
     "The dtypes the carriers of a Tensor of this dtype store, one per plane.\n"
     "Raises ValueError for Integer, which no carrier can store."},
    {"__copy__", dtype_self, METH_NOARGS,
     "__copy__($self, /)\n--\n\nThe descriptor itself: there is one of each."},
    {"__deepcopy__", dtype_self, METH_O,
     "__deepcopy__($self, memo, /)\n--\n\nThe descriptor itself: there is one of each."},
    {"__reduce__", dtype_reduce, METH_NOARGS,
     "__reduce__($self, /)\n--\n\nPickle support: a descriptor is pickled by name."},
    {"from_name", dtype_from_name, METH_O | METH_CLASS,
     "from_name($type, name, /)\n--\n\n"
     "The descriptor called `name` (exact spelling), DType.from_name(\"Int32\")\n"
     "is DType.Int32. On a subclass only its kind is found. Raises TypeError\n"
     "when name is not a str and LookupError for an unknown name or one of\n"
     "another kind."},
    {"registered", dtype_registered, METH_NOARGS | METH_CLASS,
     "registered($type, /)\n--\n\nEvery built-in descriptor of this class's kind, in "
     "the order of the dtype table (categories first)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef dtype_getset[] = {
    {"name", dtype_get_name, NULL, "The dtype's name, such as 'Float32'.", NULL},
    {"value", dtype_get_name, NULL, "The dtype's name again, as enum members have it.", NULL},
    {"supertype", dtype_get_supertype, NULL,
     "The enclosing category, or None for Any.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyObject *simple_get_bits(PyObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromLong(info_of(self)->bits);
}

static PyGetSetDef simple_getset[] = {
    {"bits", simple_get_bits, NULL, "Bits one value takes: 32 for Float32, 8 for Bool.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyObject *compound_get_simple_types(PyObject *self, void *closure)
{
    return dtype_storage_schema(self, closure);
}

static PyObject *compound_get_num_carriers(PyObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromLong(info_of(self)->nplanes);
}

static PyGetSetDef compound_getset[] = {
    {"simple_types", compound_get_simple_types, NULL,
     "The dtypes of its planes, in order: (Int32, Float32) for ScaledInt32.", NULL},
    {"num_carriers", compound_get_num_carriers, NULL,
     "Number of planes, hence of carriers a Tensor of it uses.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

#define SW_DTYPE_FLAGS (Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION)

PyTypeObject SwDType_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "strideweave.DType",
    .tp_basicsize = sizeof(SwDTypeObject),
    .tp_flags = SW_DTYPE_FLAGS,
    .tp_doc = "The kind of value a Tensor or carrier holds.\n\n"
              "Every dtype is one shared object, DType.<Name> (DType.Float32,\n"
              "DType.Int32, DType.Bool, ...); compare them with `is` or ==.\n"
              "Dtypes cannot be created: calling DType raises TypeError.",
    .tp_repr = dtype_repr,
    .tp_methods = dtype_methods,
    .tp_getset = dtype_getset,
};

PyTypeObject SwDTypeCategory_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "strideweave.DTypeCategory",
    .tp_basicsize = sizeof(SwDTypeObject),
    .tp_flags = SW_DTYPE_FLAGS,
    .tp_doc = "A category of dtypes: DType.Any, DType.Floating or DType.Integer.",
    .tp_base = &SwDType_Type,
};

PyTypeObject SwSimpleDType_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "strideweave.SimpleDType",
    .tp_basicsize = sizeof(SwDTypeObject),
    .tp_flags = SW_DTYPE_FLAGS,
    .tp_doc = "A concrete dtype with a fixed bit width, such as DType.Float32.",
    .tp_getset = simple_getset,
    .tp_base = &SwDType_Type,
};

PyTypeObject SwCompoundDType_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "strideweave.CompoundDType",
    .tp_basicsize = sizeof(SwDTypeObject),
    .tp_flags = SW_DTYPE_FLAGS,
    .tp_doc = "A dtype whose values are built from several planes, one carrier\n"
              "each, such as DType.ScaledInt32 (Int32 values and a Float32 scale).",
    .tp_getset = compound_getset,
    .tp_base = &SwDType_Type,
};

/* ---- C-7 storage dtype check ----------------------------------------------- */

static int is_accepted(sw_dtype id, const sw_dtype *accepted, int naccepted)
{
    for (int i = 0; i < naccepted; i++)
        if (accepted[i] == id)
            return 1;
    return 0;
}

/* "Float32, Int32 and Bool" */
static PyObject *accepted_names(const sw_dtype *accepted, int naccepted)
{
    PyObject *parts = PyList_New(0);
    if (!parts)
        return NULL;
    for (int i = 0; i < naccepted; i++) {
        const sw_dtype_info *info = sw_dtype_info_of(accepted[i]);
        PyObject *s = PyUnicode_FromString(info ? info->name : "?");
        if (!s || PyList_Append(parts, s) < 0) {
            Py_XDECREF(s);
            Py_DECREF(parts);
            return NULL;
        }
        Py_DECREF(s);
    }
    PyObject *res;
    if (naccepted == 0) {
        res = PyUnicode_FromString("none");
    } else if (naccepted == 1) {
        res = Py_NewRef(PyList_GET_ITEM(parts, 0));
    } else {
        PyObject *last = Py_NewRef(PyList_GET_ITEM(parts, naccepted - 1));
        PyObject *head = NULL, *sep = PyUnicode_FromString(", ");
        res = NULL;
        if (sep && PyList_SetSlice(parts, naccepted - 1, naccepted, NULL) == 0)
            head = PyUnicode_Join(sep, parts);
        if (head)
            res = PyUnicode_FromFormat("%U and %U", head, last);
        Py_XDECREF(head);
        Py_XDECREF(sep);
        Py_DECREF(last);
    }
    Py_DECREF(parts);
    return res;
}

int sw_py_check_storage_dtype(PyObject *dtype, const char *carrier_name,
                              const sw_dtype *accepted, int naccepted)
{
    if (!SwDType_Check(dtype)) {
        PyErr_Format(PyExc_TypeError, "dtype must be a DType, not %.200s",
                     Py_TYPE(dtype)->tp_name);
        return -1;
    }
    sw_dtype id = SwDType_ID(dtype);
    if (is_accepted(id, accepted, naccepted))
        return 0;
    const sw_dtype_info *info = sw_dtype_info_of(id);
    const char *carrier = carrier_name ? carrier_name : "this carrier";
    PyObject *names = accepted_names(accepted, naccepted);
    if (!names)
        return -1;
    switch (info->kind) {
    case SW_DK_COMPOUND:
        PyErr_Format(PyExc_ValueError,
                     "%s does not support storage dtype %s: it is a compound "
                     "dtype whose tensors span several carriers, one per plane, and a "
                     "carrier holds one plane's slots; accepted dtypes: %U",
                     carrier, info->name, names);
        break;
    case SW_DK_CATEGORY:
        PyErr_Format(PyExc_ValueError,
                     "%s does not support storage dtype %s: it is a category, "
                     "not a concrete dtype; accepted concrete dtypes: %U",
                     carrier, info->name, names);
        break;
    default:
        PyErr_Format(PyExc_ValueError,
                     "%s does not support storage dtype %s; accepted dtypes: %U",
                     carrier, info->name, names);
        break;
    }
    Py_DECREF(names);
    return -1;
}

/* ---- C-9 slot normalization ---------------------------------------------- */

static int double_lsb_odd(double d)
{
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    return (int)(bits & 1);
}

/* A Python int as the double rounded to odd, so the following rounding to
 * binary32 is correct (53 >= 24 + 2 bits) instead of double-rounded.
 * OverflowError for an int beyond the double range. */
static int long_to_double_round_odd(PyObject *v, double *out)
{
    double d = PyLong_AsDouble(v);
    if (d == -1.0 && PyErr_Occurred())
        return -1;
    if (fabs(d) <= 9007199254740992.0) { /* 2**53: every such int is exact */
        *out = d;
        return 0;
    }
    PyObject *dl = PyLong_FromDouble(d);
    if (!dl)
        return -1;
    int cmp_gt = PyObject_RichCompareBool(v, dl, Py_GT);
    int cmp_lt = cmp_gt == 0 ? PyObject_RichCompareBool(v, dl, Py_LT) : 0;
    Py_DECREF(dl);
    if (cmp_gt < 0 || cmp_lt < 0)
        return -1;
    if ((cmp_gt || cmp_lt) && !double_lsb_odd(d)) {
        /* Inexact with an even nearest value: the other neighbour on v's
         * side is odd, and it is the round-to-odd result. */
        d = nextafter(d, cmp_gt ? INFINITY : -INFINITY);
    }
    *out = d;
    return 0;
}

static PyObject *numbers_real(void)
{
    static PyObject *cached;
    if (!cached) {
        PyObject *mod = PyImport_ImportModule("numbers");
        if (!mod)
            return NULL;
        cached = PyObject_GetAttrString(mod, "Real");
        Py_DECREF(mod);
    }
    return cached;
}

static int to_float32(PyObject *value, float *out)
{
    double d;
    if (PyFloat_Check(value)) {
        d = PyFloat_AS_DOUBLE(value);
    } else if (PyLong_Check(value)) {
        if (long_to_double_round_odd(value, &d) < 0)
            return -1;
    } else {
        PyObject *real = numbers_real();
        if (!real)
            return -1;
        int ok = PyObject_IsInstance(value, real);
        if (ok < 0)
            return -1;
        if (!ok) {
            PyErr_Format(PyExc_TypeError,
                         "Float32 value must be a real number, not %.200s",
                         Py_TYPE(value)->tp_name);
            return -1;
        }
        if (PyIndex_Check(value)) {
            /* numbers.Integral (numpy ints): exact value, rounded once. */
            PyObject *n = PyNumber_Index(value);
            if (!n)
                return -1;
            int rc = long_to_double_round_odd(n, &d);
            Py_DECREF(n);
            if (rc < 0)
                return -1;
        } else {
            /* Other reals (Fraction, numpy longdouble) may carry more bits
             * than a double: round to odd as for ints, comparing the value
             * with its double exactly, so binary32 rounding happens once. */
            PyObject *f = PyNumber_Float(value);
            if (!f)
                return -1;
            d = PyFloat_AS_DOUBLE(f);
            int lt = 0, le = 1;
            if (isfinite(d) && !double_lsb_odd(d)) {
                /* __lt__ and __le__ are the comparisons numbers.Real
                 * requires; a real that cannot compare with a float
                 * (TypeError) keeps the plain double. */
                lt = PyObject_RichCompareBool(value, f, Py_LT);
                le = lt == 0 ? PyObject_RichCompareBool(value, f, Py_LE) : 1;
                if ((lt < 0 || le < 0) && PyErr_ExceptionMatches(PyExc_TypeError)) {
                    PyErr_Clear();
                    lt = 0;
                    le = 1;
                }
            }
            Py_DECREF(f);
            if (lt < 0 || le < 0)
                return -1;
            if (lt)
                d = nextafter(d, -INFINITY);
            else if (!le)
                d = nextafter(d, INFINITY);
        }
    }
    *out = sw_py_round_to_float(d);
    return 0;
}

static int to_int32(PyObject *value, int32_t *out)
{
    if (PyBool_Check(value) || !PyIndex_Check(value)) {
        PyErr_Format(PyExc_TypeError, "Int32 value must be an integer, not %.200s",
                     Py_TYPE(value)->tp_name);
        return -1;
    }
    PyObject *idx = PyNumber_Index(value);
    if (!idx)
        return -1;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(idx, &overflow);
    if (v == -1 && PyErr_Occurred()) {
        Py_DECREF(idx);
        return -1;
    }
    if (overflow || v < INT32_MIN || v > INT32_MAX) {
        PyErr_Format(PyExc_OverflowError,
                     "Int32 value %R is out of range [-2**31, 2**31-1]", idx);
        Py_DECREF(idx);
        return -1;
    }
    Py_DECREF(idx);
    *out = (int32_t)v;
    return 0;
}

static int no_slot(sw_dtype dtype)
{
    const sw_dtype_info *info = sw_dtype_info_of(dtype);
    PyErr_Format(PyExc_ValueError, "dtype %s has no host storage slot",
                 info ? info->name : "?");
    return -1;
}

int sw_py_store_slot(sw_dtype dtype, PyObject *value, void *slot)
{
    switch (dtype) {
    case SW_DT_FLOAT32: {
        float f;
        if (to_float32(value, &f) < 0)
            return -1;
        memcpy(slot, &f, sizeof f);
        return 0;
    }
    case SW_DT_INT32: {
        int32_t i;
        if (to_int32(value, &i) < 0)
            return -1;
        memcpy(slot, &i, sizeof i);
        return 0;
    }
    case SW_DT_BOOL:
        if (value != Py_True && value != Py_False) {
            PyErr_Format(PyExc_TypeError, "Bool value must be True or False, not %.200s",
                         Py_TYPE(value)->tp_name);
            return -1;
        }
        *(unsigned char *)slot = value == Py_True;
        return 0;
    default:
        return no_slot(dtype);
    }
}

PyObject *sw_py_load_slot(sw_dtype dtype, const void *slot)
{
    switch (dtype) {
    case SW_DT_FLOAT32: {
        float f;
        memcpy(&f, slot, sizeof f);
        return PyFloat_FromDouble((double)f);
    }
    case SW_DT_INT32: {
        int32_t i;
        memcpy(&i, slot, sizeof i);
        return PyLong_FromLong((long)i);
    }
    case SW_DT_BOOL:
        return PyBool_FromLong(*(const unsigned char *)slot != 0);
    default:
        no_slot(dtype);
        return NULL;
    }
}

/* ---- C-8 module functions -------------------------------------------------- */

/* `carrier` only names the carrier: a str is used as is, a class by its
 * name, anything else by its class's name. New reference. */
static PyObject *carrier_label(PyObject *carrier)
{
    if (PyUnicode_Check(carrier))
        return Py_NewRef(carrier);
    PyTypeObject *tp = PyType_Check(carrier) ? (PyTypeObject *)carrier : Py_TYPE(carrier);
    return PyObject_GetAttrString((PyObject *)tp, "__name__");
}

static PyObject *validate_storage_dtype(PyObject *mod, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"dtype", "carrier", "accepted", NULL};
    PyObject *dtype, *carrier = NULL, *accepted = NULL;
    PyObject *seq = NULL, *label = NULL, *res = NULL;
    sw_dtype *ids = NULL;
    (void)mod;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$OO:validate_storage_dtype",
                                     kwlist, &dtype, &carrier, &accepted))
        return NULL;
    if (!carrier || !accepted) {
        PyErr_Format(PyExc_TypeError,
                     "validate_storage_dtype() missing required keyword-only "
                     "argument: '%s'", carrier ? "accepted" : "carrier");
        return NULL;
    }
    seq = PySequence_Fast(accepted, "accepted must be a tuple of DTypes");
    if (!seq)
        goto error;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    ids = PyMem_New(sw_dtype, n ? (size_t)n : 1);
    if (!ids) {
        PyErr_NoMemory();
        goto error;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        if (!SwDType_Check(item)) {
            PyErr_Format(PyExc_TypeError,
                         "accepted must be a tuple of DTypes, found %.200s",
                         Py_TYPE(item)->tp_name);
            goto error;
        }
        ids[i] = SwDType_ID(item);
    }
    label = carrier_label(carrier);
    if (!label)
        goto error;
    const char *clabel = PyUnicode_Check(label) ? PyUnicode_AsUTF8(label) : NULL;
    if (!clabel) {
        if (PyErr_Occurred())
            goto error;
        clabel = "this carrier";
    }
    if (n > INT_MAX) {
        PyErr_SetString(PyExc_OverflowError, "accepted has too many entries");
        goto error;
    }
    if (sw_py_check_storage_dtype(dtype, clabel, ids, (int)n) < 0)
        goto error;
    res = Py_NewRef(dtype);
error:
    PyMem_Free(ids);
    Py_XDECREF(label);
    Py_XDECREF(seq);
    return res;
}

static PyObject *accepts_storage_dtype(PyObject *mod, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"dtype", "accepted", NULL};
    PyObject *dtype, *accepted;
    (void)mod;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:accepts_storage_dtype",
                                     kwlist, &dtype, &accepted))
        return NULL;
    PyObject *seq = PySequence_Fast(accepted, "accepted must be a tuple of DTypes");
    if (!seq)
        return NULL;
    int found = 0;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq) && !found; i++)
        found = PySequence_Fast_GET_ITEM(seq, i) == dtype;
    Py_DECREF(seq);
    return PyBool_FromLong(found);
}

static PyObject *storage_zero(PyObject *mod, PyObject *dtype)
{
    (void)mod;
    if (SwDType_Check(dtype)) {
        switch (SwDType_ID(dtype)) {
        case SW_DT_FLOAT32: return PyFloat_FromDouble(0.0);
        case SW_DT_INT32: return PyLong_FromLong(0);
        case SW_DT_BOOL: Py_RETURN_FALSE;
        default: break;
        }
    }
    Py_RETURN_NONE;
}

/* Test aid: store `value` into one host slot of `dtype` and read it back,
 * so C-9 can be tested before any carrier exists. */
static PyObject *slot_roundtrip(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    unsigned char slot[8] = {0};
    (void)mod;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "_slot_roundtrip() takes exactly 2 arguments");
        return NULL;
    }
    if (!SwDType_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "dtype must be a DType");
        return NULL;
    }
    if (sw_py_store_slot(SwDType_ID(args[0]), args[1], slot) < 0)
        return NULL;
    return sw_py_load_slot(SwDType_ID(args[0]), slot);
}

static PyMethodDef dtype_functions[] = {
    {"_slot_roundtrip", (PyCFunction)(void (*)(void))slot_roundtrip, METH_FASTCALL,
     "_slot_roundtrip(dtype, value, /)\n--\n\n"
     "Test aid: store `value` in one host slot of `dtype` and read it back."},
    {"validate_storage_dtype", (PyCFunction)(void (*)(void))validate_storage_dtype,
     METH_VARARGS | METH_KEYWORDS,
     "validate_storage_dtype(dtype, *, carrier, accepted)\n--\n\n"
     "Return `dtype` if it is one of the tuple `accepted`; otherwise raise\n"
     "as the carrier constructors do: TypeError for something that is not a\n"
     "DType, ValueError for a dtype the carrier cannot store. `carrier` is the\n"
     "carrier name the messages use."},
    {"accepts_storage_dtype", (PyCFunction)(void (*)(void))accepts_storage_dtype,
     METH_VARARGS | METH_KEYWORDS,
     "accepts_storage_dtype(dtype, accepted)\n--\n\n"
     "Whether `dtype` is one of the tuple `accepted` (compared by identity)."},
    {"storage_zero", storage_zero, METH_O,
     "storage_zero(dtype, /)\n--\n\n"
     "The zero value of a storage dtype: 0.0, 0 or False for Float32, Int32\n"
     "or Bool; None for any other dtype."},
    {NULL, NULL, 0, NULL},
};

/* ---- init ------------------------------------------------------------------ */

int sw_py_dtype_init(PyObject *module)
{
    PyTypeObject *types[] = {&SwDType_Type, &SwDTypeCategory_Type,
                             &SwSimpleDType_Type, &SwCompoundDType_Type};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (PyType_Ready(types[i]) < 0)
            return -1;

    if (!singletons[0]) {
        for (int i = 0; i < SW_DT_COUNT; i++) {
            const sw_dtype_info *info = sw_dtype_info_of((sw_dtype)i);
            SwDTypeObject *obj = PyObject_New(SwDTypeObject, kind_type(info->kind));
            if (!obj)
                return -1;
            obj->id = (sw_dtype)i;
            singletons[i] = (PyObject *)obj; /* owned for the process lifetime */
        }
        /* DType.<Name>: a static type's dict can be filled before it is
         * exposed; afterwards the type is immutable to Python code. */
        PyObject *dict = SwDType_Type.tp_dict;
        for (int i = 0; i < SW_DT_COUNT; i++)
            if (PyDict_SetItemString(dict, sw_dtype_info_of((sw_dtype)i)->name,
                                     singletons[i]) < 0)
                return -1;
        PyType_Modified(&SwDType_Type);
    }

    const char *names[] = {"DType", "DTypeCategory", "SimpleDType", "CompoundDType"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (PyModule_AddObjectRef(module, names[i], (PyObject *)types[i]) < 0)
            return -1;
    return PyModule_AddFunctions(module, dtype_functions);
}
