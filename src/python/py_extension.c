/* The carrier-extension API (contract-carriers X-1 .. X-15): the immutable
 * value types, register_carrier_definition, sealing, and the definitions'
 * part of X-14 route resolution (the whole of it, with the legacy registry,
 * is py_move_operation.c's sw_py_route_resolve, above this file).
 *
 * Every value type is a record of object fields with read-only attributes
 * (X-1), one shared set of slots (traverse, clear, dealloc, repr), and its
 * own constructor that runs the checks in the contract's order.
 *
 * Definitions live in one table keyed by the class's identity, with the
 * set of observed classes (X-13): py_definitions.c, below Carrier, which
 * reads it when an instance is made; this file checks and fills it. */
#include "sw_carrier.h"
#include "sw_extension.h"
#include "sw_move.h"

#include <stdlib.h>
#include <string.h>
#include <structmember.h>

#include "strideweave/block_device.h"
#include "strideweave/route.h"

#define NFIELDS(o) \
    ((size_t)(Py_TYPE(o)->tp_basicsize - offsetof(SwRecordObject, f)) / sizeof(PyObject *))
#define RECORD_SIZE(n) (offsetof(SwRecordObject, f) + (n) * sizeof(PyObject *))
#define FIELD(name, i, doc) \
    {name, T_OBJECT, offsetof(SwRecordObject, f) + (i) * sizeof(PyObject *), READONLY, doc}

/* ---- the record slots ------------------------------------------------------ */

static int record_traverse(PyObject *self, visitproc visit, void *arg)
{
    for (size_t i = 0; i < NFIELDS(self); i++)
        Py_VISIT(SW_RECORD_FIELD(self, i));
    return 0;
}

static int record_clear(PyObject *self)
{
    for (size_t i = 0; i < NFIELDS(self); i++)
        Py_CLEAR(SW_RECORD_FIELD(self, i));
    return 0;
}

static void record_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    record_clear(self);
    Py_TYPE(self)->tp_free(self);
}

/* TypeName(field=value, ...), fields in constructor order. */
static PyObject *record_repr(PyObject *self)
{
    PyObject *parts = PyList_New(0);
    if (!parts)
        return NULL;
    for (PyMemberDef *m = Py_TYPE(self)->tp_members; m && m->name; m++) {
        PyObject *v = *(PyObject **)((char *)self + m->offset);
        PyObject *s = PyUnicode_FromFormat("%s=%R", m->name, v ? v : Py_None);
        if (!s || PyList_Append(parts, s) < 0) {
            Py_XDECREF(s);
            Py_DECREF(parts);
            return NULL;
        }
        Py_DECREF(s);
    }
    PyObject *sep = PyUnicode_FromString(", ");
    PyObject *body = sep ? PyUnicode_Join(sep, parts) : NULL;
    PyObject *r = body ? PyUnicode_FromFormat("%s(%U)", _PyType_Name(Py_TYPE(self)), body)
                       : NULL;
    Py_XDECREF(body);
    Py_XDECREF(sep);
    Py_DECREF(parts);
    return r;
}

/* A record of `type` holding new references to vals[0 .. nfields). */
static PyObject *record_make(PyTypeObject *type, PyObject *const *vals)
{
    PyObject *self = type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    for (size_t i = 0; i < NFIELDS(self); i++)
        SW_RECORD_FIELD(self, i) = Py_NewRef(vals[i]);
    return self;
}

#define RECORD_TYPE(ctype, pyname, nfields, members, newfn, doc)                    \
    PyTypeObject ctype = {                                                          \
        PyVarObject_HEAD_INIT(NULL, 0)                                              \
        .tp_name = "strideweave.carriers.extension." pyname,                        \
        .tp_basicsize = (Py_ssize_t)RECORD_SIZE(nfields),                           \
        .tp_dealloc = record_dealloc,                                               \
        .tp_repr = record_repr,                                                     \
        .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,                        \
        .tp_doc = doc,                                                              \
        .tp_traverse = record_traverse,                                             \
        .tp_clear = record_clear,                                                   \
        .tp_members = members,                                                      \
        .tp_new = newfn,                                                            \
    }

/* ---- argument checks ---------------------------------------------------------- */

static int require_callable(PyObject *obj, const char *field)
{
    if (PyCallable_Check(obj))
        return 0;
    PyErr_Format(PyExc_TypeError, "%s must be callable, not %.100s", field,
                 Py_TYPE(obj)->tp_name);
    return -1;
}

static int require_nonempty_str(PyObject *obj, const char *field)
{
    if (!PyUnicode_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be a str, not %.100s", field,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (PyUnicode_GET_LENGTH(obj) == 0) {
        PyErr_Format(PyExc_ValueError, "%s must not be empty", field);
        return -1;
    }
    return 0;
}

/* A class a carrier can be an instance of: a Carrier subclass other than
 * Carrier itself, the DependentCarrier marker, or an abstract class. */
static int is_concrete_carrier_class(PyObject *obj)
{
    if (!PyType_Check(obj))
        return 0;
    PyTypeObject *t = (PyTypeObject *)obj;
    return PyType_IsSubtype(t, &SwCarrier_Type) && t != &SwCarrier_Type &&
           t != &SwDependentCarrier_Type && !(t->tp_flags & Py_TPFLAGS_IS_ABSTRACT);
}

static int require_carrier_class(PyObject *obj, const char *field)
{
    if (is_concrete_carrier_class(obj))
        return 0;
    PyErr_Format(PyExc_TypeError,
                 "%s must be a concrete Carrier subclass (not Carrier itself), not %R",
                 field, obj);
    return -1;
}

/* ---- Unsupported(reason) (X-2) ------------------------------------------------ */

static PyObject *unsupported_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"reason", NULL};
    PyObject *reason;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O:Unsupported", kwlist, &reason) ||
        require_nonempty_str(reason, "reason") < 0)
        return NULL;
    return record_make(type, &reason);
}

static PyMemberDef unsupported_members[] = {
    FIELD("reason", 0, "Why the route cannot move this request."),
    {NULL, 0, 0, 0, NULL},
};

RECORD_TYPE(SwUnsupported_Type, "Unsupported", 1, unsupported_members, unsupported_new,
            "Unsupported(reason)\n--\n\n"
            "What a transfer provider's prepare() returns when its route cannot move\n"
            "this request (for example a layout with gaps). The move then falls back to\n"
            "copying element by element when both carriers allow it, and otherwise\n"
            "fails with NotImplementedError quoting `reason` (a non-empty str).");

/* ---- StorageProvider (X-3) ------------------------------------------------------ */

static const char *const storage_fields[] = {"supports_dtype", "physical_size", "allocate",
                                             "release", "read", "write"};

static PyObject *storage_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"supports_dtype", "physical_size", "allocate", "release",
                             "read", "write", "elementwise_fallback", NULL};
    PyObject *v[SW_STORAGE_NFIELDS];
    v[SW_STORAGE_ELEMENTWISE_FALLBACK] = Py_False;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOO|O:StorageProvider", kwlist, &v[0],
                                     &v[1], &v[2], &v[3], &v[4], &v[5], &v[6]))
        return NULL;
    for (int i = 0; i < SW_STORAGE_ELEMENTWISE_FALLBACK; i++)
        if (require_callable(v[i], storage_fields[i]) < 0)
            return NULL;
    if (!PyBool_Check(v[SW_STORAGE_ELEMENTWISE_FALLBACK])) {
        PyErr_Format(PyExc_TypeError, "elementwise_fallback must be a bool, not %.100s",
                     Py_TYPE(v[SW_STORAGE_ELEMENTWISE_FALLBACK])->tp_name);
        return NULL;
    }
    return record_make(type, v);
}

static PyMemberDef storage_members[] = {
    FIELD("supports_dtype", SW_STORAGE_SUPPORTS_DTYPE,
          "supports_dtype(carrier, dtype) -> bool: can this class store dtype?"),
    FIELD("physical_size", SW_STORAGE_PHYSICAL_SIZE,
          "physical_size(carrier) -> int: the carrier's slot count."),
    FIELD("allocate", SW_STORAGE_ALLOCATE,
          "allocate(carrier, slots) -> None: give the carrier `slots` slots."),
    FIELD("release", SW_STORAGE_RELEASE, "release(carrier) -> None: drop the storage."),
    FIELD("read", SW_STORAGE_READ, "read(carrier, index) -> value of one slot."),
    FIELD("write", SW_STORAGE_WRITE, "write(carrier, index, value) -> None."),
    FIELD("elementwise_fallback", SW_STORAGE_ELEMENTWISE_FALLBACK,
          "Whether moves between two defined classes without a route may copy\n"
          "element by element (both classes must allow it)."),
    {NULL, 0, 0, 0, NULL},
};

RECORD_TYPE(SwStorageProvider_Type, "StorageProvider", SW_STORAGE_NFIELDS, storage_members,
            storage_new,
            "StorageProvider(supports_dtype, physical_size, allocate, release, read, write,\n"
            "                elementwise_fallback=False)\n--\n\n"
            "The storage mechanics of a carrier class defined in Python. strideweave\n"
            "calls each callback with the carrier instance after its own checks\n"
            "(released, mutable, index range), and checks every result:\n"
            "supports_dtype returns a bool, physical_size a non-negative int,\n"
            "allocate/release/write return None. Raises TypeError when a callback is\n"
            "not callable or elementwise_fallback is not a bool.\n\n"
            "In a child made by os.fork(), release may run inside the fork itself,\n"
            "on the forking thread, for copies that work in flight at the fork had\n"
            "made: a lock the callbacks take must not stay held by another thread\n"
            "across fork() (take it in an os.register_at_fork before hook).");

/* ---- TransferProvider, PreparedTransfer (X-7, X-9) ---------------------------- */

static PyObject *one_callable_new(PyTypeObject *type, PyObject *args, PyObject *kwds,
                                  char *field, const char *fmt)
{
    char *kwlist[] = {field, NULL};
    PyObject *fn;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, fmt, kwlist, &fn) ||
        require_callable(fn, field) < 0)
        return NULL;
    return record_make(type, &fn);
}

static PyObject *transfer_provider_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    return one_callable_new(type, args, kwds, "prepare", "O:TransferProvider");
}

static PyObject *prepared_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    return one_callable_new(type, args, kwds, "submit", "O:PreparedTransfer");
}

static PyMemberDef transfer_provider_members[] = {
    FIELD("prepare", 0,
          "prepare(request) -> PreparedTransfer | Unsupported; must not change any\n"
          "carrier or start work."),
    {NULL, 0, 0, 0, NULL},
};

static PyMemberDef prepared_members[] = {
    FIELD("submit", 0,
          "submit() -> None | ProviderCompletion: start the transfer; None means\n"
          "the destination already holds the values."),
    {NULL, 0, 0, 0, NULL},
};

RECORD_TYPE(SwTransferProvider_Type, "TransferProvider", 1, transfer_provider_members,
            transfer_provider_new,
            "TransferProvider(prepare)\n--\n\n"
            "The mechanics of one TransferRoute. prepare(request) receives a\n"
            "TransferRequest and returns a PreparedTransfer, or Unsupported when this\n"
            "route cannot move the request. Raises TypeError when prepare is not\n"
            "callable.");

RECORD_TYPE(SwPreparedTransfer_Type, "PreparedTransfer", 1, prepared_members, prepared_new,
            "PreparedTransfer(submit)\n--\n\n"
            "A transfer that is ready to start. move_async calls submit() once, on the\n"
            "calling thread, with access to both carriers (carrier[i] reads and\n"
            "destination[i] = v writes work there and change no version); it returns\n"
            "None when the destination is filled, or a ProviderCompletion that\n"
            "finishes later. That access belongs to the calling thread: work that\n"
            "finishes on another thread writes the destination's own storage\n"
            "directly. Raises TypeError when submit is not callable.");

/* ---- TransferRoute (X-7) ---------------------------------------------------------- */

static PyObject *route_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"source_class", "destination_class", "route_id", "provider",
                             NULL};
    PyObject *v[SW_ROUTE_NFIELDS];
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOO:TransferRoute", kwlist, &v[0], &v[1],
                                     &v[2], &v[3]) ||
        require_carrier_class(v[0], "source_class") < 0 ||
        require_carrier_class(v[1], "destination_class") < 0 ||
        require_nonempty_str(v[2], "route_id") < 0)
        return NULL;
    if (Py_TYPE(v[3]) != &SwTransferProvider_Type) {
        PyErr_Format(PyExc_TypeError, "provider must be a TransferProvider, not %.100s",
                     Py_TYPE(v[3])->tp_name);
        return NULL;
    }
    return record_make(type, v);
}

static PyMemberDef route_members[] = {
    FIELD("source_class", SW_ROUTE_SOURCE_CLASS, "The exact source carrier class."),
    FIELD("destination_class", SW_ROUTE_DESTINATION_CLASS,
          "The exact destination carrier class."),
    FIELD("route_id", SW_ROUTE_ID, "A stable name for the route (profiling shows it)."),
    FIELD("provider", SW_ROUTE_PROVIDER, "The TransferProvider that moves the values."),
    {NULL, 0, 0, 0, NULL},
};

RECORD_TYPE(SwTransferRoute_Type, "TransferRoute", SW_ROUTE_NFIELDS, route_members, route_new,
            "TransferRoute(source_class, destination_class, route_id, provider)\n--\n\n"
            "One direction of movement between two exact carrier classes, declared in\n"
            "the source class's CarrierDefinition. It matches those two classes only:\n"
            "subclasses of either never use it. Raises TypeError when a class is not a\n"
            "concrete Carrier subclass, route_id is not a str or provider not a\n"
            "TransferProvider; ValueError when route_id is empty.");

/* ---- TransferRequest (X-8) --------------------------------------------------------- */

enum { RQ_TENSOR, RQ_DESTINATION, RQ_SOURCE_CLASS, RQ_DESTINATION_CLASS, RQ_DTYPE, RQ_LAYOUT,
       RQ_SPAN, RQ_NFIELDS };

/* The facts a request states about its tensor and destination must be the
 * true ones. */
static int check_request(PyObject *const *v)
{
    if (!SwTensor_Check(v[RQ_TENSOR]) || ((SwTensorObject *)v[RQ_TENSOR])->nsub != 1) {
        PyErr_Format(PyExc_TypeError, "tensor must be a Tensor on one carrier, not %.100s",
                     Py_TYPE(v[RQ_TENSOR])->tp_name);
        return -1;
    }
    if (!SwCarrier_Check(v[RQ_DESTINATION])) {
        PyErr_Format(PyExc_TypeError, "destination must be a Carrier, not %.100s",
                     Py_TYPE(v[RQ_DESTINATION])->tp_name);
        return -1;
    }
    SwTensorObject *t = (SwTensorObject *)v[RQ_TENSOR];
    const char *wrong = NULL;
    if (v[RQ_SOURCE_CLASS] != (PyObject *)Py_TYPE(t->subs[0].carrier))
        wrong = "source_class must be the exact class of tensor.carrier";
    else if (v[RQ_DESTINATION_CLASS] != (PyObject *)Py_TYPE(v[RQ_DESTINATION]))
        wrong = "destination_class must be the exact class of destination";
    else if (v[RQ_DTYPE] != t->dtype)
        wrong = "dtype must be the tensor's dtype";
    else if (v[RQ_LAYOUT] != t->subs[0].layout)
        wrong = "layout must be the tensor's Layout object";
    else if (!PyLong_Check(v[RQ_SPAN]) || PyBool_Check(v[RQ_SPAN]))
        wrong = "physical_span must be an int";
    if (wrong) {
        PyErr_SetString(PyExc_TypeError, wrong);
        return -1;
    }
    long long span = PyLong_AsLongLong(v[RQ_SPAN]);
    if (span == -1 && PyErr_Occurred())
        PyErr_Clear();
    if (span != SW_SUB_LAYOUT(&t->subs[0])->cosize) {
        PyErr_Format(PyExc_ValueError, "physical_span must be the layout's cosize (%lld)",
                     (long long)SW_SUB_LAYOUT(&t->subs[0])->cosize);
        return -1;
    }
    return 0;
}

static PyObject *request_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"tensor", "destination", "source_class", "destination_class",
                             "dtype", "layout", "physical_span", NULL};
    PyObject *v[RQ_NFIELDS];
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOOO:TransferRequest", kwlist, &v[0],
                                     &v[1], &v[2], &v[3], &v[4], &v[5], &v[6]) ||
        check_request(v) < 0)
        return NULL;
    return record_make(type, v);
}

PyObject *sw_py_transfer_request_new(PyObject *tensor, PyObject *destination)
{
    SwSubtensor *s = &((SwTensorObject *)tensor)->subs[0];
    PyObject *span = PyLong_FromLongLong(SW_SUB_LAYOUT(s)->cosize);
    if (!span)
        return NULL;
    PyObject *v[RQ_NFIELDS] = {tensor, destination, (PyObject *)Py_TYPE(s->carrier),
                               (PyObject *)Py_TYPE(destination),
                               ((SwTensorObject *)tensor)->dtype, s->layout, span};
    PyObject *r = record_make(&SwTransferRequest_Type, v);
    Py_DECREF(span);
    return r;
}

static PyMemberDef request_members[] = {
    FIELD("tensor", RQ_TENSOR, "The Tensor being moved."),
    FIELD("destination", RQ_DESTINATION, "The carrier that receives the values."),
    FIELD("source_class", RQ_SOURCE_CLASS, "type(tensor.carrier)."),
    FIELD("destination_class", RQ_DESTINATION_CLASS, "type(destination)."),
    FIELD("dtype", RQ_DTYPE, "The tensor's dtype."),
    FIELD("layout", RQ_LAYOUT, "The tensor's Layout."),
    FIELD("physical_span", RQ_SPAN,
          "Slots to move: layout.cosize, from the tensor's offset in the source\n"
          "to slot 0 of the destination."),
    {NULL, 0, 0, 0, NULL},
};

RECORD_TYPE(SwTransferRequest_Type, "TransferRequest", RQ_NFIELDS, request_members,
            request_new,
            "TransferRequest(tensor, destination, source_class, destination_class, dtype,\n"
            "                layout, physical_span)\n--\n\n"
            "What a transfer provider's prepare() is asked to move; move_async builds\n"
            "it. Built by hand, every field must tell the truth about tensor and\n"
            "destination: TypeError for a wrong class, dtype or layout, ValueError\n"
            "when physical_span is not layout.cosize.");

/* ---- CarrierDefinition (X-11) -------------------------------------------------------- */

/* transfers as a tuple of routes, no two for one class pair. */
static PyObject *materialize_routes(PyObject *transfers)
{
    PyObject *seq = PySequence_Tuple(transfers);
    if (!seq) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError,
                         "transfers must be an iterable of TransferRoute, not %.100s",
                         Py_TYPE(transfers)->tp_name);
        }
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = PyTuple_GET_ITEM(seq, i);
        if (Py_TYPE(r) != &SwTransferRoute_Type) {
            PyErr_Format(PyExc_TypeError, "transfers must hold TransferRoute entries, not %.100s",
                         Py_TYPE(r)->tp_name);
            goto fail;
        }
        for (Py_ssize_t j = 0; j < i; j++) {
            PyObject *q = PyTuple_GET_ITEM(seq, j);
            if (SW_RECORD_FIELD(q, SW_ROUTE_SOURCE_CLASS) ==
                    SW_RECORD_FIELD(r, SW_ROUTE_SOURCE_CLASS) &&
                SW_RECORD_FIELD(q, SW_ROUTE_DESTINATION_CLASS) ==
                    SW_RECORD_FIELD(r, SW_ROUTE_DESTINATION_CLASS)) {
                PyErr_Format(PyExc_ValueError,
                             "duplicate exact transfer routes from %s to %s (%R and %R)",
                             _PyType_Name((PyTypeObject *)SW_RECORD_FIELD(r, SW_ROUTE_SOURCE_CLASS)),
                             _PyType_Name((PyTypeObject *)SW_RECORD_FIELD(r, SW_ROUTE_DESTINATION_CLASS)),
                             SW_RECORD_FIELD(q, SW_ROUTE_ID), SW_RECORD_FIELD(r, SW_ROUTE_ID));
                goto fail;
            }
        }
    }
    return seq;
fail:
    Py_DECREF(seq);
    return NULL;
}

static int refuse_unsupported_part(PyObject *value, const char *field)
{
    if (value == Py_None)
        return 0;
    PyErr_Format(PyExc_NotImplementedError,
                 "CarrierDefinition: %s are not supported yet; leave %s at its default",
                 field, field);
    return -1;
}

static PyObject *definition_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"storage", "kernels", "transfers", "composite", "facets", NULL};
    PyObject *storage, *kernels = Py_None, *transfers = NULL, *composite = Py_None,
                       *facets = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|OOOO:CarrierDefinition", kwlist, &storage,
                                     &kernels, &transfers, &composite, &facets))
        return NULL;
    if (Py_TYPE(storage) != &SwStorageProvider_Type) {
        PyErr_Format(PyExc_TypeError, "storage must be a StorageProvider, not %.100s",
                     Py_TYPE(storage)->tp_name);
        return NULL;
    }
    PyObject *routes = transfers ? materialize_routes(transfers) : PyTuple_New(0);
    PyObject *facet_tuple = NULL, *result = NULL;
    if (!routes)
        return NULL;
    if (refuse_unsupported_part(kernels, "kernels") < 0 ||
        refuse_unsupported_part(composite, "composite") < 0)
        goto done;
    facet_tuple = facets ? PySequence_Tuple(facets) : PyTuple_New(0);
    if (!facet_tuple)
        goto done;
    if (PyTuple_GET_SIZE(facet_tuple) != 0) {
        PyErr_SetString(PyExc_NotImplementedError,
                        "CarrierDefinition: facets are not supported yet; leave facets empty");
        goto done;
    }
    PyObject *v[SW_DEFINITION_NFIELDS] = {storage, kernels, routes, composite, facet_tuple};
    result = record_make(type, v);
done:
    Py_XDECREF(facet_tuple);
    Py_DECREF(routes);
    return result;
}

static PyMemberDef definition_members[] = {
    FIELD("storage", SW_DEFINITION_STORAGE, "The StorageProvider."),
    FIELD("kernels", SW_DEFINITION_KERNELS, "Always None (kernels are not supported yet)."),
    FIELD("transfers", SW_DEFINITION_TRANSFERS, "The outgoing TransferRoute entries (a tuple)."),
    FIELD("composite", SW_DEFINITION_COMPOSITE, "Always None."),
    FIELD("facets", SW_DEFINITION_FACETS, "Always ()."),
    {NULL, 0, 0, 0, NULL},
};

RECORD_TYPE(SwCarrierDefinition_Type, "CarrierDefinition", SW_DEFINITION_NFIELDS,
            definition_members, definition_new,
            "CarrierDefinition(storage, kernels=None, transfers=(), composite=None,\n"
            "                  facets=())\n--\n\n"
            "Everything strideweave needs to run a carrier class written in Python: its\n"
            "StorageProvider and its outgoing TransferRoute entries. Attach it with\n"
            "register_carrier_definition(cls, definition) before the first instance.\n"
            "Raises TypeError for a storage that is not a StorageProvider or a transfer\n"
            "that is not a TransferRoute, ValueError for two routes between the same\n"
            "classes, NotImplementedError for kernels, composite or facets.\n\n"
            "    definition = CarrierDefinition(storage=provider, transfers=[route])");

/* ---- the definition table and sealing (X-12, X-13) ------------------------------ */

static int check_definition_target(PyObject *cls, PyObject *definition)
{
    if (!is_concrete_carrier_class(cls)) {
        PyErr_Format(PyExc_TypeError,
                     "carrier_class must be a concrete Carrier subclass (not Carrier "
                     "itself), not %R", cls);
        return -1;
    }
    if (Py_TYPE(definition) != &SwCarrierDefinition_Type) {
        PyErr_Format(PyExc_TypeError, "definition must be a CarrierDefinition, not %.100s",
                     Py_TYPE(definition)->tp_name);
        return -1;
    }
    PyTypeObject *t = (PyTypeObject *)cls;
    const char *name = _PyType_Name(t);
    if (sw_py_class_is_shipped(t) && !sw_py_definition_of(t)) {
        PyErr_Format(PyExc_TypeError,
                     "%s is a definition-free shipped carrier; define a Carrier subclass of "
                     "your own instead", name);
        return -1;
    }
    PyObject *routes = SW_RECORD_FIELD(definition, SW_DEFINITION_TRANSFERS);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(routes); i++) {
        PyObject *src = SW_RECORD_FIELD(PyTuple_GET_ITEM(routes, i), SW_ROUTE_SOURCE_CLASS);
        if (src != cls) {
            PyErr_Format(PyExc_TypeError,
                         "every route of %s's definition must have %s as its exact "
                         "source_class, not %s", name, name, _PyType_Name((PyTypeObject *)src));
            return -1;
        }
    }
    if (PyType_IsSubtype(t, &SwDependentCarrier_Type)) {
        PyErr_Format(PyExc_TypeError,
                     "%s is a DependentCarrier: composite carriers cannot be defined%s", name,
                     sw_py_definition_of(t) ? " (it already has a CarrierDefinition)" : "");
        return -1;
    }
    int seen = sw_py_class_observed(t);
    if (seen != 0) {
        if (seen > 0)
            PyErr_Format(PyExc_TypeError,
                         "%s was already observed (an instance was made, or a move or the "
                         "move registry named it), so its definition can no longer change; "
                         "register the definition before first use", name);
        return -1;
    }
    if (sw_py_definition_of(t)) {
        PyErr_Format(PyExc_TypeError, "%s already has a CarrierDefinition", name);
        return -1;
    }
    return 0;
}

/* A definition's TransferRoutes are binding routes in the core's registry
 * (sw_py_route_add), keyed by the exact pair of their classes. */
static PyTypeObject *route_class(PyObject *route, int field)
{
    return (PyTypeObject *)SW_RECORD_FIELD(route, field);
}

static void unregister_routes(PyObject *routes, Py_ssize_t count)
{
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *r = PyTuple_GET_ITEM(routes, i), *payload;
        int rc = sw_py_route_remove(route_class(r, SW_ROUTE_SOURCE_CLASS),
                                    route_class(r, SW_ROUTE_DESTINATION_CLASS), &payload);
        if (rc > 0)
            Py_DECREF(payload);
        else if (rc < 0)
            PyErr_Clear();
    }
}

/* Every route of `definition` into the core's registry: all, or none and
 * -1 with an exception. */
static int register_routes(PyObject *definition)
{
    PyObject *routes = SW_RECORD_FIELD(definition, SW_DEFINITION_TRANSFERS);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(routes); i++) {
        PyObject *r = PyTuple_GET_ITEM(routes, i);
        if (sw_py_route_add(route_class(r, SW_ROUTE_SOURCE_CLASS),
                            route_class(r, SW_ROUTE_DESTINATION_CLASS), r) < 0) {
            unregister_routes(routes, i);
            return -1;
        }
    }
    return 0;
}

static int permits_fallback(PyObject *definition);
static int route_error(const sw_error *err);

/* X-14's element-by-element fallback is the core's rule: a class whose
 * StorageProvider allows it is let fall back in the core's registry, and
 * a pair of such classes resolves with SW_ROUTE_MAY_FALL_BACK. 0, or -1
 * with an exception. */
static int allow_fallback(PyTypeObject *cls, PyObject *definition)
{
    if (!permits_fallback(definition))
        return 0;
    const sw_carrier_class *core = sw_py_carrier_core_class(cls);
    sw_error err;
    if (!core)
        return -1;
    return sw_route_allow_fallback(core, &err) == SW_OK ? 0 : route_error(&err);
}

static PyObject *register_carrier_definition(PyObject *mod, PyObject *const *args,
                                             Py_ssize_t nargs, PyObject *kwnames)
{
    (void)mod;
    static const char *const names[] = {"carrier_class", "definition"};
    PyObject *a[2];
    if (sw_py_parse_required("register_carrier_definition", names, 2, args, nargs, kwnames,
                             a) < 0 ||
        check_definition_target(a[0], a[1]) < 0)
        return NULL;
    /* No Python code runs between the checks and the insertion: the GIL
     * makes the registration atomic. */
    PyTypeObject *cls = (PyTypeObject *)a[0];
    int rc = register_routes(a[1]), routed = rc == 0;
    if (rc == 0 && (rc = sw_py_definition_insert(cls, a[1])) == 0 &&
        (rc = allow_fallback(cls, a[1])) < 0)
        sw_py_definition_remove(cls);
    if (rc < 0 && routed)
        unregister_routes(SW_RECORD_FIELD(a[1], SW_DEFINITION_TRANSFERS),
                          PyTuple_GET_SIZE(SW_RECORD_FIELD(a[1], SW_DEFINITION_TRANSFERS)));
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* A shipped carrier that manages its own storage in C but is
 * definition-backed for dispatch (TiledEvictable): its definition has no
 * routes, no fallback, and storage callbacks that are never called (the
 * class is a C type, so its instances never take the provider path). */
static PyObject *own_storage(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    PyErr_SetString(PyExc_RuntimeError,
                    "this shipped carrier keeps its own storage; its StorageProvider is "
                    "never called");
    return NULL;
}

static PyMethodDef own_storage_def = {"own_storage", own_storage, METH_VARARGS, NULL};

int sw_py_register_shipped_definition(PyTypeObject *cls)
{
    PyObject *fn = PyCFunction_New(&own_storage_def, NULL);
    if (!fn)
        return -1;
    PyObject *cb[SW_STORAGE_NFIELDS] = {fn, fn, fn, fn, fn, fn, Py_False};
    PyObject *storage = record_make(&SwStorageProvider_Type, cb);
    PyObject *routes = storage ? PyTuple_New(0) : NULL;
    PyObject *def = NULL;
    if (routes) {
        PyObject *v[SW_DEFINITION_NFIELDS] = {storage, Py_None, routes, Py_None, routes};
        def = record_make(&SwCarrierDefinition_Type, v);
    }
    int rc = def ? sw_py_definition_insert(cls, def) : -1;
    Py_XDECREF(def);
    Py_XDECREF(routes);
    Py_XDECREF(storage);
    Py_DECREF(fn);
    return rc;
}

/* ---- routes in the core's registry (route.h) ------------------------------------ */

/* The core keys routes by the exact pair of carrier classes: a Carrier
 * class's key is the core class of its carriers (sw_py_carrier_core_class),
 * a built-in's own or the STATE_ONLY class made for it. Naming a class in
 * a route never observes it (X-13: a definition's routes may name a class
 * that gets its own definition later). */

/* Binding routes hold a Python object (a TransferRoute, or the move
 * registry's (source, destination, operation) triple) as their payload:
 * the entry keeps it, and so both classes, alive. Its references change
 * with the GIL held: every registry call here holds it. */
static void payload_incref(void *payload) { Py_INCREF((PyObject *)payload); }
static void payload_decref(void *payload) { Py_DECREF((PyObject *)payload); }
static const sw_route_payload_ops py_payload = {payload_incref, payload_decref};

static int route_keys(PyTypeObject *src, PyTypeObject *dst, const sw_carrier_class **s,
                      const sw_carrier_class **d)
{
    *s = sw_py_carrier_core_class(src);
    *d = *s ? sw_py_carrier_core_class(dst) : NULL;
    return *d ? 0 : -1;
}

static int route_error(const sw_error *err)
{
    PyErr_SetString(err->code == SW_ENOMEM ? PyExc_MemoryError : PyExc_RuntimeError, err->msg);
    return -1;
}

int sw_py_route_add(PyTypeObject *src, PyTypeObject *dst, PyObject *payload)
{
    const sw_carrier_class *s, *d;
    if (route_keys(src, dst, &s, &d) < 0)
        return -1;
    sw_route_entry e = {.kind = SW_ROUTE_KIND_BINDING, .payload = payload,
                        .payload_ops = &py_payload};
    sw_error err;
    return sw_route_register(s, d, &e, &err) == SW_OK ? 0 : route_error(&err);
}

int sw_py_route_payload(PyTypeObject *src, PyTypeObject *dst, PyObject **payload)
{
    const sw_carrier_class *s, *d;
    if (route_keys(src, dst, &s, &d) < 0)
        return -1;
    sw_route_entry e;
    *payload = NULL;
    if (sw_move_route_resolve(s, d, &e, NULL) != SW_OK)
        return 0; /* the core refuses the pair: nobody registered it */
    if (e.kind == SW_ROUTE_KIND_BINDING && e.payload_ops == &py_payload)
        *payload = e.payload;
    sw_route_entry_release(&e); /* the registry's own reference stays */
    return *payload != NULL;
}

int sw_py_route_remove(PyTypeObject *src, PyTypeObject *dst, PyObject **payload)
{
    const sw_carrier_class *s, *d;
    if (route_keys(src, dst, &s, &d) < 0)
        return -1;
    sw_route_entry removed;
    *payload = NULL;
    if (sw_route_unregister(s, d, &removed, NULL) != SW_OK)
        return 0;
    *payload = removed.payload; /* the registry's reference, handed over */
    return 1;
}

/* ---- route resolution (X-14) ------------------------------------------------------ */

static int permits_fallback(PyObject *definition)
{
    return SW_RECORD_FIELD(SW_RECORD_FIELD(definition, SW_DEFINITION_STORAGE),
                           SW_STORAGE_ELEMENTWISE_FALLBACK) == Py_True;
}

int sw_py_route_defined(PyTypeObject *src, PyTypeObject *dst, PyObject **route,
                        int *may_fall_back)
{
    const sw_carrier_class *s, *d;
    *route = NULL;
    *may_fall_back = 0;
    if (route_keys(src, dst, &s, &d) < 0)
        return -1;
    sw_route_entry e;
    if (sw_move_route_resolve(s, d, &e, NULL) != SW_OK)
        return 0; /* the core refuses the pair: no route, no fallback */
    *may_fall_back = (e.flags & SW_ROUTE_MAY_FALL_BACK) != 0;
    if (e.kind == SW_ROUTE_KIND_BINDING && e.payload_ops == &py_payload &&
        Py_TYPE(e.payload) == &SwTransferRoute_Type)
        *route = e.payload; /* not a move registry entry: a definition's */
    sw_route_entry_release(&e);
    return 0;
}

/* _core_route_of(source, destination): test aid. What the core resolves
 * from the two carriers themselves (sw_move_route_resolve_carriers: their
 * core classes are their classes' route keys): None when it refuses the
 * pair, else (the binding route's payload or None, may fall back). */
static PyObject *core_route_of(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    (void)mod;
    if (nargs != 2 || !PyObject_TypeCheck(args[0], &SwCarrier_Type) ||
        !PyObject_TypeCheck(args[1], &SwCarrier_Type)) {
        PyErr_SetString(PyExc_TypeError, "_core_route_of(source, destination) takes two carriers");
        return NULL;
    }
    sw_route_entry e;
    if (sw_move_route_resolve_carriers(((SwCarrierObject *)args[0])->core,
                                       ((SwCarrierObject *)args[1])->core, &e, NULL) != SW_OK)
        Py_RETURN_NONE;
    PyObject *answer = Py_BuildValue("(OO)", e.payload_ops == &py_payload ? e.payload : Py_None,
                                     e.flags & SW_ROUTE_MAY_FALL_BACK ? Py_True : Py_False);
    sw_route_entry_release(&e);
    return answer;
}

/* ---- module ------------------------------------------------------------------------- */

static PyMethodDef extension_functions[] = {
    {"register_carrier_definition", (PyCFunction)(void (*)(void))register_carrier_definition,
     METH_FASTCALL | METH_KEYWORDS,
     "register_carrier_definition(carrier_class, definition)\n--\n\n"
     "Make `carrier_class` (your own Carrier subclass) a defined carrier: its\n"
     "instances keep their slots through definition.storage, and moves out of it\n"
     "use definition.transfers. Call it once, before the class is first used (an\n"
     "instance, a move or a move-registry call naming it). Subclasses do not\n"
     "inherit the definition. Raises TypeError for anything else: not a Carrier\n"
     "subclass, not a CarrierDefinition, a shipped carrier, a route whose\n"
     "source_class is another class, a composite carrier, a class already used\n"
     "or already defined.\n\n"
     "    register_carrier_definition(Remote, CarrierDefinition(storage=provider))"},
    {"_core_route_of", (PyCFunction)(void (*)(void))core_route_of, METH_FASTCALL,
     "_core_route_of(source, destination, /)\n--\n\n"
     "Test aid: what the core resolves from the two carriers: None when it\n"
     "refuses them, else (the binding route's payload or None, may fall back)."},
    {NULL, NULL, 0, NULL},
};

int sw_py_extension_init(PyObject *module)
{
    PyTypeObject *types[] = {&SwUnsupported_Type,      &SwStorageProvider_Type,
                             &SwTransferProvider_Type, &SwTransferRoute_Type,
                             &SwTransferRequest_Type,  &SwPreparedTransfer_Type,
                             &SwCarrierDefinition_Type};
    if (sw_py_provider_wait_init() < 0)
        return -1;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        if (PyType_Ready(types[i]) < 0 ||
            PyModule_AddObjectRef(module, _PyType_Name(types[i]), (PyObject *)types[i]) < 0)
            return -1;
    }
    return PyModule_AddFunctions(module, extension_functions);
}
