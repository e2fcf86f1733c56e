/* MoveOperation, the shipped move operations, and the legacy registry.
 *
 * A move operation performs the transfer of one move through its _copy
 * hook; everything around it (validation, allocation, pending marks,
 * publication, source release) belongs to the framework (py_move.c). The
 * shipped operations implement _copy in C: between built-in carriers that
 * keep their slots in host memory or a file it is one GIL-free transfer
 * (src/core/transfer.c); otherwise a per-slot loop through carrier hooks.
 *
 * The legacy registry maps an exact (source class, destination class) pair
 * to an operation class. Its entries are binding routes in the core's
 * route registry (strideweave/route.h), keyed by the exact pair of the
 * classes' core classes (sw_py_carrier_core_class), so a subclass never matches its
 * parent's entry. Route resolution (X-14, sw_py_route_resolve) is here: the
 * legacy registry for two undefined classes, else the definitions' answer
 * (py_extension.c). */
#include "sw_extension.h"
#include "sw_move.h"

#include "sw_move_core.h"
#include "strideweave/route.h"

#include <string.h>


extern PyTypeObject SwMetal_Type;

static PyObject *base_copy;         /* MoveOperation._copy, the unimplemented hook */
static PyObject *str_source_class, *str_destination_class, *str_copy;

static const char *class_name(PyObject *cls)
{
    return PyType_Check(cls) ? _PyType_Name((PyTypeObject *)cls) : Py_TYPE(cls)->tp_name;
}

/* ---- the transfer between built-in carriers ------------------------------ */

/* A carrier of a class written in Python (a subclass of a built-in too):
 * its slot hooks may differ from the core's slots, so no copy of the
 * core's may stand in for them; copy_by_slots moves its values. */
static int python_class(PyObject *carrier)
{
    return (Py_TYPE(carrier)->tp_flags & Py_TPFLAGS_HEAPTYPE) != 0;
}

/* Which block operation `op_type` is, for the block device's route check. */
static int block_direction(PyTypeObject *op_type)
{
    return op_type == &SwCpuToBlockDevice_Type ? 1 : op_type == &SwBlockDeviceToCpu_Type ? -1 : 0;
}

/* Logical values slot by slot through the carriers' hooks, by the core
 * (read k, write k, in logical order): the route for carriers written in
 * Python. */
static int copy_by_slots(PyObject *src, int64_t offset, sw_layout *layout, PyObject *dst)
{
    return sw_py_carrier_copy_layout(src, offset, dst, 0, layout, SW_DT_ANY, NULL, NULL);
}

/* _copy(tensor, destination, output, element_count) of the shipped
 * operations: argument checks, then the C transfer or the slot loop. */
static int copy_hook(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                     PyObject *kwnames, int bulk, const char *opname)
{
    static const char *const names[] = {"tensor", "destination", "output", "element_count"};
    PyObject *a[4];
    if (sw_py_parse_required("_copy", names, 4, args, nargs, kwnames, a) < 0)
        return -1;
    if (!SwTensor_Check(a[0]) || ((SwTensorObject *)a[0])->nsub != 1) {
        PyErr_Format(PyExc_TypeError, "%s._copy: tensor must be a Tensor on one carrier (one plane)", opname);
        return -1;
    }
    if (!SwCarrier_Check(a[1])) {
        PyErr_Format(PyExc_TypeError, "%s._copy: destination must be a Carrier, not %.100s",
                     opname, Py_TYPE(a[1])->tp_name);
        return -1;
    }
    SwSubtensor *s = &((SwTensorObject *)a[0])->subs[0];
    if (sw_py_block_device_check_route(Py_TYPE(self), block_direction(Py_TYPE(self)),
                                       s->carrier, a[1]) < 0)
        return -1;
    sw_layout *layout = SwLayout_CORE(s->layout);
    long long count;
    int overflow;
    if (!sw_py_is_integer(a[3]) || sw_py_index_ll(a[3], &count, &overflow) < 0 ||
        overflow || count != layout->cosize) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError,
                         "%s._copy: element_count must be the layout's cosize (%lld)",
                         opname, (long long)layout->cosize);
        return -1;
    }
    /* The core copies between carriers whose slots it holds; a class
     * written in Python, or one whose storage the core cannot reach
     * (SW_ENOTSUP: no host memory or file on a side), gets the slot loop
     * through its Python hooks, which only this binding can run. */
    sw_error err;
    sw_py_here here = SW_PY_HERE_UNREACHABLE;
    if (!python_class(s->carrier) && !python_class(a[1]))
        here = sw_py_transfer_here(s->carrier, SW_SUB_OFFSET(s), layout, a[1], bulk, 0, &err);
    if (here == SW_PY_HERE_DONE)
        return 0;
    if (here == SW_PY_HERE_FAILED)
        return sw_py_raise(&err);
    if (bulk) {
        PyErr_Format(PyExc_TypeError,
                     "%s copies between CPU and FileBacked carriers only, not from %s to %s",
                     opname, Py_TYPE(s->carrier)->tp_name, Py_TYPE(a[1])->tp_name);
        return -1;
    }
    return copy_by_slots(s->carrier, SW_SUB_OFFSET(s), layout, a[1]);
}

static PyObject *elementwise_copy(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames)
{
    if (copy_hook(self, args, nargs, kwnames, 0, "ElementwiseMoveOperation") < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *bulk_copy(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames)
{
    if (copy_hook(self, args, nargs, kwnames, 1, _PyType_Name(Py_TYPE(self))) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* The Metal pairs' transfers need the Metal device, which no Metal carrier
 * on this host can have (construction always fails). */
static PyObject *metal_copy(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames)
{
    (void)args;
    (void)nargs;
    (void)kwnames;
    PyErr_Format(PyExc_NotImplementedError,
                 "%s needs Apple's Metal (MPS) device, which this host does not have",
                 _PyType_Name(Py_TYPE(self)));
    return NULL;
}

static PyObject *base_copy_impl(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames)
{
    (void)args;
    (void)nargs;
    (void)kwnames;
    PyErr_Format(PyExc_NotImplementedError,
                 "%s does not implement _copy(tensor, destination, output, element_count); "
                 "subclasses of MoveOperation must", _PyType_Name(Py_TYPE(self)));
    return NULL;
}

/* ---- MoveOperation -------------------------------------------------------- */


static int move_op_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(MOVEOP(self)->reverse);
    Py_VISIT(MOVEOP(self)->output);
    return sw_py_operation_traverse(self, visit, arg);
}

static int move_op_clear(PyObject *self)
{
    Py_CLEAR(MOVEOP(self)->reverse);
    Py_CLEAR(MOVEOP(self)->output);
    return sw_py_operation_clear(self);
}

static void move_op_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    Py_CLEAR(MOVEOP(self)->reverse);
    Py_CLEAR(MOVEOP(self)->output);
    SwOperation_Type.tp_dealloc(self);
}

/* ---- autograd across a move ---------------------------------------------------- */

/* The reverse of (source, destination) by X-14, or for a definition-free
 * pair the legacy registry's answer with its row-9 checks. */
static int resolve_reverse(PyObject *source, PyObject *destination, PyObject **reverse)
{
    sw_py_route route;
    /* B-10: the block pairs are outside the registry; each is the other's
     * way back. */
    if (Py_TYPE(source) == &SwCPU_Type && Py_TYPE(destination) == &SwBlockDeviceCarrier_Type) {
        *reverse = Py_NewRef((PyObject *)&SwBlockDeviceToCpu_Type);
        return 0;
    }
    if (Py_TYPE(source) == &SwBlockDeviceCarrier_Type && Py_TYPE(destination) == &SwCPU_Type) {
        *reverse = Py_NewRef((PyObject *)&SwCpuToBlockDevice_Type);
        return 0;
    }
    if (sw_py_route_resolve(Py_TYPE(destination), Py_TYPE(source), &route) < 0)
        return -1;
    if (route.route) {
        *reverse = Py_NewRef(route.route);
        return 0;
    }
    /* Owned before row 9's attribute lookups run user code that may
     * unregister (and collect) the class the registry lent us. */
    PyObject *op_type = Py_NewRef(route.op_type);
    if (sw_py_move_check_operation((PyTypeObject *)op_type, destination, source) < 0) {
        Py_DECREF(op_type);
        return -1;
    }
    *reverse = op_type;
    return 0;
}

int sw_py_move_capture_reverse(PyObject *source, PyObject *destination, PyObject **reverse)
{
    if (resolve_reverse(source, destination, reverse) == 0)
        return 0;
    return sw_py_reraise_prefixed(
        PyExc_NotImplementedError,
        "a differentiable move from %s to %s needs a move back from %s to %s for its "
        "gradient (add one, or move inside no_grad())",
        _PyType_Name(Py_TYPE(source)), _PyType_Name(Py_TYPE(destination)),
        _PyType_Name(Py_TYPE(destination)), _PyType_Name(Py_TYPE(source)));
}

void sw_py_move_node_prepare(PyObject *op, PyObject *reverse)
{
    Py_XSETREF(MOVEOP(op)->reverse, Py_NewRef(reverse));
}

void sw_py_move_node_attach(PyObject *op, PyObject *output)
{
    Py_XSETREF(MOVEOP(op)->output, Py_NewRef(((SwTensorObject *)output)->subs[0].carrier));
    sw_py_operation_attach(op, output);
}

static int operation_init(PyObject *self, PyObject *args, PyObject *kwds)
{
    (void)self;
    if (PyTuple_GET_SIZE(args) || (kwds && PyDict_GET_SIZE(kwds))) {
        PyErr_Format(PyExc_TypeError, "%s() takes no arguments", _PyType_Name(Py_TYPE(self)));
        return -1;
    }
    return 0;
}

#define COPY_DOC(what)                                                                \
    "_copy($self, tensor, destination, output, element_count)\n--\n\n" what                 \
    "\n\nCalled by the framework after every check has passed; element_count\n"     \
    "is the number of storage slots to transfer (the layout's cosize)."

static PyMethodDef operation_methods[] = {
    {"_copy", (PyCFunction)(void (*)(void))base_copy_impl,
     METH_FASTCALL | METH_KEYWORDS,
     COPY_DOC("Transfer the values of `tensor` into `destination`, where `output`\n"
              "is the result Tensor already bound to it. Subclasses implement this;\n"
              "the base class raises NotImplementedError.")},
    {NULL, NULL, 0, NULL},
};

PyTypeObject SwMoveOperation_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "strideweave.MoveOperation",
    .tp_basicsize = sizeof(SwMoveOperationObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "MoveOperation()\n--\n\n"
              "Base class of the operations that move a Tensor from one carrier to\n"
              "another. Subclass it, implement _copy, and register the subclass for\n"
              "an exact pair of carrier classes with register_move_operation.\n"
              "Set the class attributes source_class / destination_class to refuse\n"
              "other carriers.",
    .tp_dealloc = move_op_dealloc,
    .tp_traverse = move_op_traverse,
    .tp_clear = move_op_clear,
    .tp_methods = operation_methods,
    .tp_init = operation_init,
    .tp_base = &SwOperation_Type, /* tp_new inherited: Operation state from allocation */
};

#define SHIPPED_OPERATION(var, name, copyfn, doc)                                     \
    static PyMethodDef var##_methods[] = {                                           \
        {"_copy", (PyCFunction)(void (*)(void))copyfn, METH_FASTCALL | METH_KEYWORDS, \
         COPY_DOC("Transfer the values (see the class).")},                          \
        {NULL, NULL, 0, NULL},                                                       \
    };                                                                               \
    PyTypeObject var = {                                                             \
        PyVarObject_HEAD_INIT(NULL, 0)                                               \
        .tp_name = "strideweave." name,                                              \
        .tp_basicsize = sizeof(SwMoveOperationObject),                               \
        .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,   \
        .tp_doc = name "()\n--\n\n" doc,                                             \
        .tp_methods = var##_methods,                                                 \
        .tp_dealloc = move_op_dealloc,                                               \
        .tp_traverse = move_op_traverse,                                             \
        .tp_clear = move_op_clear,                                                   \
        .tp_base = &SwMoveOperation_Type,                                            \
    }

SHIPPED_OPERATION(SwElementwise_Type, "ElementwiseMoveOperation", elementwise_copy,
                  "Copies the logical values of any Tensor into any carrier of the same\n"
                  "dtype, one coordinate at a time (a strided C loop between built-in\n"
                  "carriers). Slots the layout does not address are left unspecified.\n"
                  "Used for every carrier pair without a registered operation.");
SHIPPED_OPERATION(SwCpuToFileBacked_Type, "CpuToFileBackedMoveOperation", bulk_copy,
                  "Moves a CPU Tensor into a FileBacked carrier by writing its whole\n"
                  "physical span (holes included) to the file in large writes.");
SHIPPED_OPERATION(SwFileBackedToCpu_Type, "FileBackedToCpuMoveOperation", bulk_copy,
                  "Moves a FileBacked Tensor into a CPU carrier by reading its whole\n"
                  "physical span (holes included) from the file in large reads.");
SHIPPED_OPERATION(SwCpuToMetal_Type, "CpuToMetalMoveOperation", metal_copy,
                  "Moves a CPU Tensor to a Metal carrier (needs Apple's MPS device).");
SHIPPED_OPERATION(SwMetalToCpu_Type, "MetalToCpuMoveOperation", metal_copy,
                  "Moves a Metal Tensor to a CPU carrier (needs Apple's MPS device).");
/* A definition route moves through its provider's prepare/submit, never
 * through _copy; this class only names the route's operation (profiling)
 * and carries its autograd node. */
static PyObject *route_copy(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames)
{
    (void)args;
    (void)nargs;
    (void)kwnames;
    PyErr_Format(PyExc_NotImplementedError,
                 "%s moves values only inside move() and move_async(), through the "
                 "TransferRoute's provider", _PyType_Name(Py_TYPE(self)));
    return NULL;
}

SHIPPED_OPERATION(SwTransferRouteMove_Type, "TransferRouteMoveOperation", route_copy,
                  "The operation of every move that runs through a TransferRoute of a\n"
                  "CarrierDefinition: profiling reports it as the move's operation_type, and\n"
                  "it is the move's node in the autograd graph. It cannot be used on its\n"
                  "own.");
SHIPPED_OPERATION(SwCpuToBlockDevice_Type, "CpuToBlockDeviceMoveOperation", bulk_copy,
                  "Moves a CPU Tensor into a BlockDeviceCarrier by writing its whole\n"
                  "physical span (cosize slots from its offset, holes included) to the\n"
                  "device in one transfer, durable on the device before the move\n"
                  "completes. move() chooses it for CPU to BlockDeviceCarrier moves.");
SHIPPED_OPERATION(SwBlockDeviceToCpu_Type, "BlockDeviceToCpuMoveOperation", bulk_copy,
                  "Moves a BlockDeviceCarrier Tensor into a CPU carrier by reading its\n"
                  "whole physical span from the device in one transfer. move() chooses it\n"
                  "for BlockDeviceCarrier to CPU moves.");
SHIPPED_OPERATION(SwMetalToMetal_Type, "MetalToMetalMoveOperation", metal_copy,
                  "Moves a Metal Tensor to another Metal carrier (needs Apple's MPS "
                  "device).");

sw_py_route_kind sw_py_move_route_kind(PyTypeObject *op_type)
{
    if (op_type == &SwElementwise_Type)
        return SW_ROUTE_ELEMENTWISE;
    if (op_type == &SwCpuToFileBacked_Type || op_type == &SwFileBackedToCpu_Type ||
        op_type == &SwCpuToBlockDevice_Type || op_type == &SwBlockDeviceToCpu_Type)
        return SW_ROUTE_BULK;
    return SW_ROUTE_PYTHON;
}

/* ---- row 9: pinned classes, and an operation that cannot copy ------------ */

static int check_pin(PyTypeObject *op_type, PyObject *attr, PyObject *carrier,
                     const char *role)
{
    PyObject *pin = PyObject_GetAttr((PyObject *)op_type, attr);
    if (!pin)
        return -1;
    int rc = 0;
    if (pin != Py_None && pin != (PyObject *)Py_TYPE(carrier)) {
        PyErr_Format(PyExc_TypeError,
                     "%s requires a %s %s carrier, not %s",
                     _PyType_Name(op_type), class_name(pin), role,
                     _PyType_Name(Py_TYPE(carrier)));
        rc = -1;
    }
    Py_DECREF(pin);
    return rc;
}

/* A shipped operation class is a static type: Python cannot set its
 * attributes, so its pins and _copy never change after module setup. Its
 * row-9 answers are remembered (GIL held) instead of looked up per move:
 * the classes, and whether _copy is implemented. */
#define PINNED_CACHE 16
static struct {
    PyTypeObject *op;
    PyObject *source, *destination; /* the pins: None or a class (strong) */
} pinned[PINNED_CACHE];

static int pins_fixed(PyTypeObject *op_type)
{
    return !(op_type->tp_flags & Py_TPFLAGS_HEAPTYPE) && Py_IS_TYPE(op_type, &PyType_Type);
}

/* The index of the cached pins of a shipped class with an implemented
 * _copy, or -1. */
static int pinned_of(PyTypeObject *op_type)
{
    for (int i = 0; i < PINNED_CACHE && pinned[i].op; i++)
        if (pinned[i].op == op_type)
            return i;
    return -1;
}

static void pinned_add(PyTypeObject *op_type)
{
    for (int i = 0; i < PINNED_CACHE; i++) {
        if (pinned[i].op)
            continue;
        PyObject *src = PyObject_GetAttr((PyObject *)op_type, str_source_class);
        PyObject *dst = src ? PyObject_GetAttr((PyObject *)op_type, str_destination_class)
                            : NULL;
        if (!dst) {
            Py_XDECREF(src);
            PyErr_Clear();
            return;
        }
        pinned[i].source = src;
        pinned[i].destination = dst;
        pinned[i].op = op_type;
        return;
    }
}

int sw_py_move_check_operation(PyTypeObject *op_type, PyObject *source, PyObject *destination)
{
    if (sw_py_block_device_check_route(op_type, block_direction(op_type), source,
                                       destination) < 0)
        return -1;
    int i = pinned_of(op_type);
    if (i >= 0 && (pinned[i].source == Py_None ||
                   pinned[i].source == (PyObject *)Py_TYPE(source)) &&
        (pinned[i].destination == Py_None ||
         pinned[i].destination == (PyObject *)Py_TYPE(destination)))
        return 0; /* both pins hold and _copy is implemented */
    if (check_pin(op_type, str_source_class, source, "source") < 0 ||
        check_pin(op_type, str_destination_class, destination, "destination") < 0)
        return -1;
    PyObject *hook = PyObject_GetAttr((PyObject *)op_type, str_copy);
    if (!hook)
        return -1;
    int missing = hook == base_copy;
    Py_DECREF(hook);
    if (missing) {
        PyErr_Format(PyExc_NotImplementedError,
                     "%s does not implement _copy(tensor, destination, output, "
                     "element_count), so it cannot move anything",
                     _PyType_Name(op_type));
        return -1;
    }
    if (i < 0 && pins_fixed(op_type))
        pinned_add(op_type);
    return 0;
}

/* ---- the legacy registry --------------------------------------------------- */

static int is_carrier_class(PyObject *obj)
{
    return PyType_Check(obj) &&
           PyType_IsSubtype((PyTypeObject *)obj, &SwCarrier_Type);
}

/* Carrier classes with a CarrierDefinition route through TransferRoute,
 * never through this registry. */
static int has_definition(PyObject *cls)
{
    return sw_py_definition_of((PyTypeObject *)cls) != NULL;
}

static int check_pair(PyObject *src, PyObject *dst)
{
    if (!is_carrier_class(src)) {
        PyErr_Format(PyExc_TypeError, "source_class must be a Carrier subclass, not %R", src);
        return -1;
    }
    if (!is_carrier_class(dst)) {
        PyErr_Format(PyExc_TypeError,
                     "destination_class must be a Carrier subclass, not %R", dst);
        return -1;
    }
    /* X-13: naming a class here freezes its definition status. */
    if (sw_py_observe_class((PyTypeObject *)src) < 0 ||
        sw_py_observe_class((PyTypeObject *)dst) < 0)
        return -1;
    if (has_definition(src) || has_definition(dst)) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s and %s: a carrier with a CarrierDefinition declares its moves "
                     "as TransferRoute entries, not in the move registry",
                     class_name(src), class_name(dst));
        return -1;
    }
    return 0;
}

/* B-10: BlockDeviceCarrier moves are fixed: the registry holds its two CPU
 * pairs from the start and users cannot register or unregister any pair
 * naming it. */
static int refuse_block_device(PyObject *src, PyObject *dst)
{
    if (src != (PyObject *)&SwBlockDeviceCarrier_Type &&
        dst != (PyObject *)&SwBlockDeviceCarrier_Type)
        return 0;
    PyErr_Format(PyExc_ValueError,
                 "%s to %s: moves of a BlockDeviceCarrier cannot be registered or "
                 "unregistered; move() already uses CpuToBlockDeviceMoveOperation and "
                 "BlockDeviceToCpuMoveOperation for its CPU pairs",
                 class_name(src), class_name(dst));
    return -1;
}

static int check_registration(PyObject *src, PyObject *dst, PyObject *op)
{
    if (check_pair(src, dst) < 0 || refuse_block_device(src, dst) < 0)
        return -1;
    if (!PyType_Check(op) ||
        !PyType_IsSubtype((PyTypeObject *)op, &SwMoveOperation_Type)) {
        PyErr_Format(PyExc_TypeError,
                     "operation_class must be a MoveOperation subclass, not %R", op);
        return -1;
    }
    return 0;
}

/* The operation class registered for exactly (src, dst), borrowed (the
 * entry's payload, (source, destination, operation), keeps all three
 * alive as a dictionary key and value did), or NULL: 1 / 0, or -1. */
static int registered_op(PyObject *src, PyObject *dst, PyObject **op)
{
    int rc = sw_py_route_payload((PyTypeObject *)src, (PyTypeObject *)dst, op);
    if (rc > 0 && !PyTuple_Check(*op))
        *op = NULL, rc = 0; /* a definition's TransferRoute: not ours */
    else if (rc > 0)
        *op = PyTuple_GET_ITEM(*op, 2);
    return rc;
}

static int registry_insert(PyObject *src, PyObject *dst, PyObject *op)
{
    PyObject *payload = PyTuple_Pack(3, src, dst, op);
    if (!payload)
        return -1;
    int rc = sw_py_route_add((PyTypeObject *)src, (PyTypeObject *)dst, payload);
    Py_DECREF(payload); /* the registry holds its own */
    return rc;
}

/* ValueError when the exact pair already has an operation: 0 free, -1. */
static int check_free(PyObject *src, PyObject *dst)
{
    PyObject *existing;
    int rc = registered_op(src, dst, &existing);
    if (rc <= 0)
        return rc;
    PyErr_Format(PyExc_ValueError,
                 "a move operation is already registered from %s to %s (%s); "
                 "unregister it first",
                 class_name(src), class_name(dst), class_name(existing));
    return -1;
}

/* Validation and duplicate rejection; `add` 0 only checks. */
static int registry_check_or_add(PyObject *src, PyObject *dst, PyObject *op, int add)
{
    if (check_registration(src, dst, op) < 0 || check_free(src, dst) < 0)
        return -1;
    return add ? registry_insert(src, dst, op) : 0;
}

static int registry_add(PyObject *src, PyObject *dst, PyObject *op)
{
    return registry_check_or_add(src, dst, op, 1);
}

static PyObject *registry_pop(PyObject *src, PyObject *dst)
{
    PyObject *payload;
    int rc = sw_py_route_remove((PyTypeObject *)src, (PyTypeObject *)dst, &payload);
    if (rc == 0)
        PyErr_Format(PyExc_KeyError, "no move operation is registered from %s to %s",
                     class_name(src), class_name(dst));
    if (rc <= 0)
        return NULL;
    PyObject *op = Py_NewRef(PyTuple_GET_ITEM(payload, 2));
    Py_DECREF(payload);
    return op;
}

/* The registry's answers per exact class pair, remembered until the
 * core's route registry next changes (sw_route_registry_version: every
 * registration, removal, and the forgetting of a collected class's routes
 * moves it). A cached class is compared by address only: a pair in the
 * registry keeps its classes alive there, and a class at a reused address
 * is in the registry only after a change. */
static PyObject *dispatch_lookup(PyObject *src, PyObject *dst);

#define DISPATCH_CACHE 8
static struct {
    PyObject *src, *dst, *op; /* borrowed */
    uint64_t version;
} dispatched[DISPATCH_CACHE];
static unsigned dispatch_next;

/* The legacy registry's answer for the exact pair: the registered class or
 * ElementwiseMoveOperation. Borrowed reference. */
static PyObject *sw_py_move_dispatch(PyObject *src, PyObject *dst)
{
    /* Read before the lookup: an answer is never filed under a version
     * newer than the entries it saw. */
    uint64_t version = sw_route_registry_version();
    for (int i = 0; i < DISPATCH_CACHE; i++)
        if (dispatched[i].version == version && dispatched[i].src == src &&
            dispatched[i].dst == dst)
            return dispatched[i].op;
    PyObject *op = dispatch_lookup(src, dst);
    if (op) {
        unsigned i = dispatch_next++ % DISPATCH_CACHE;
        dispatched[i].src = src;
        dispatched[i].dst = dst;
        dispatched[i].op = op;
        dispatched[i].version = version;
    }
    return op;
}

static PyObject *dispatch_lookup(PyObject *src, PyObject *dst)
{
    PyObject *op;
    int rc = registered_op(src, dst, &op);
    return rc < 0 ? NULL : rc ? op : (PyObject *)&SwElementwise_Type;
}

/* ---- route resolution (X-14) ------------------------------------------------------ */

/* Two undefined classes: the legacy registry above; else the definitions'
 * answer from the core's route registry (py_extension.c, below this file). */
int sw_py_route_resolve(PyTypeObject *src, PyTypeObject *dst, sw_py_route *out)
{
    if (sw_py_observe_class(src) < 0 || sw_py_observe_class(dst) < 0)
        return -1;
    PyObject *sdef = sw_py_definition_of(src), *ddef = sw_py_definition_of(dst);
    out->route = NULL;
    out->may_fall_back = 0;
    if (!sdef && !ddef) {
        out->op_type = sw_py_move_dispatch((PyObject *)src, (PyObject *)dst);
        return out->op_type ? 0 : -1;
    }
    /* A TransferRoute from src is src's definition's: none without one. */
    if (sw_py_route_defined(src, dst, &out->route, &out->may_fall_back) < 0)
        return -1;
    out->op_type =
        out->route ? (PyObject *)&SwTransferRouteMove_Type : (PyObject *)&SwElementwise_Type;
    if (out->route || out->may_fall_back)
        return 0;
    const char *why =
        !sdef ? "a carrier without a CarrierDefinition cannot move into a defined one"
        : ddef ? "the source's CarrierDefinition has no TransferRoute to it, and the two "
                 "StorageProviders do not both allow the element-by-element fallback"
               : "the source's CarrierDefinition has no TransferRoute to it";
    PyErr_Format(PyExc_NotImplementedError, "cannot move from %s to %s: %s", _PyType_Name(src),
                 _PyType_Name(dst), why);
    return -1;
}

void sw_py_route_of(PyObject *transfer_route, sw_py_route *out)
{
    PyTypeObject *src = (PyTypeObject *)SW_RECORD_FIELD(transfer_route, SW_ROUTE_SOURCE_CLASS);
    PyTypeObject *dst =
        (PyTypeObject *)SW_RECORD_FIELD(transfer_route, SW_ROUTE_DESTINATION_CLASS);
    PyObject *route;
    if (sw_py_route_defined(src, dst, &route, &out->may_fall_back) < 0)
        PyErr_Clear(); /* the route's classes have their keys: cannot fail */
    out->route = transfer_route;
    out->op_type = (PyObject *)&SwTransferRouteMove_Type;
}


static const char *const triple_names[] = {"source_class", "destination_class",
                                           "operation_class"};

static PyObject *register_move_operation(PyObject *mod, PyObject *const *args,
                                         Py_ssize_t nargs, PyObject *kwnames)
{
    (void)mod;
    PyObject *a[3];
    if (sw_py_parse_required("register_move_operation", triple_names, 3, args, nargs,
                             kwnames, a) < 0 ||
        registry_add(a[0], a[1], a[2]) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *unregister_move_operation(PyObject *mod, PyObject *const *args,
                                           Py_ssize_t nargs, PyObject *kwnames)
{
    (void)mod;
    PyObject *a[2];
    if (sw_py_parse_required("unregister_move_operation", triple_names, 2, args, nargs,
                             kwnames, a) < 0 ||
        check_pair(a[0], a[1]) < 0 || refuse_block_device(a[0], a[1]) < 0)
        return NULL;
    return registry_pop(a[0], a[1]);
}

static PyObject *dispatch_move(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames)
{
    (void)mod;
    PyObject *a[2];
    if (sw_py_parse_required("dispatch_move", triple_names, 2, args, nargs, kwnames, a) < 0 ||
        check_pair(a[0], a[1]) < 0)
        return NULL;
    return Py_XNewRef(sw_py_move_dispatch(a[0], a[1]));
}

/* registered_move_operation(...): a context manager over one registration. */
typedef struct {
    PyObject_HEAD
    PyObject *src, *dst, *op;
    int entered;
} SwRegisteredObject;

static int registered_traverse(PyObject *self, visitproc visit, void *arg)
{
    SwRegisteredObject *r = (SwRegisteredObject *)self;
    Py_VISIT(r->src);
    Py_VISIT(r->dst);
    Py_VISIT(r->op);
    return 0;
}

static int registered_clear(PyObject *self)
{
    SwRegisteredObject *r = (SwRegisteredObject *)self;
    Py_CLEAR(r->src);
    Py_CLEAR(r->dst);
    Py_CLEAR(r->op);
    return 0;
}

static void registered_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    registered_clear(self);
    PyObject_GC_Del(self);
}

static PyObject *registered_enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    SwRegisteredObject *r = (SwRegisteredObject *)self;
    if (r->entered) {
        PyErr_SetString(PyExc_RuntimeError,
                        "this registered_move_operation block is already in use");
        return NULL;
    }
    if (registry_add(r->src, r->dst, r->op) < 0)
        return NULL;
    r->entered = 1;
    return Py_NewRef(r->op);
}

static PyObject *registered_exit(PyObject *self, PyObject *args)
{
    (void)args;
    SwRegisteredObject *r = (SwRegisteredObject *)self;
    if (r->entered) {
        r->entered = 0;
        PyObject *removed = registry_pop(r->src, r->dst);
        if (!removed)
            return NULL;
        Py_DECREF(removed);
    }
    Py_RETURN_FALSE;
}

static PyMethodDef registered_methods[] = {
    {"__enter__", registered_enter, METH_NOARGS,
     "__enter__($self, /)\n--\n\nRegister the pair and return the operation class."},
    {"__exit__", registered_exit, METH_VARARGS,
     "__exit__($self, /, *exc_info)\n--\n\n"
     "Unregister the pair; never suppresses an exception."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject SwRegistered_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "strideweave.carriers.move._RegisteredMoveOperation",
    .tp_basicsize = sizeof(SwRegisteredObject),
    .tp_dealloc = registered_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A block during which a move operation is registered.",
    .tp_traverse = registered_traverse,
    .tp_clear = registered_clear,
    .tp_methods = registered_methods,
};

static PyObject *registered_move_operation(PyObject *mod, PyObject *const *args,
                                           Py_ssize_t nargs, PyObject *kwnames)
{
    (void)mod;
    PyObject *a[3];
    if (sw_py_parse_required("registered_move_operation", triple_names, 3, args, nargs,
                             kwnames, a) < 0 ||
        registry_check_or_add(a[0], a[1], a[2], 0) < 0)
        return NULL;
    SwRegisteredObject *r = PyObject_GC_New(SwRegisteredObject, &SwRegistered_Type);
    if (!r)
        return NULL;
    r->src = Py_NewRef(a[0]);
    r->dst = Py_NewRef(a[1]);
    r->op = Py_NewRef(a[2]);
    r->entered = 0;
    PyObject_GC_Track(r);
    return (PyObject *)r;
}

static PyMethodDef registry_functions[] = {
    {"register_move_operation", (PyCFunction)(void (*)(void))register_move_operation,
     METH_FASTCALL | METH_KEYWORDS,
     "register_move_operation(source_class, destination_class, operation_class)\n--\n\n"
     "Use operation_class for moves from exactly source_class to exactly\n"
     "destination_class (subclasses do not match). Raises TypeError for an\n"
     "argument of the wrong kind and ValueError when the pair already has an\n"
     "operation (the existing one is kept)."},
    {"unregister_move_operation", (PyCFunction)(void (*)(void))unregister_move_operation,
     METH_FASTCALL | METH_KEYWORDS,
     "unregister_move_operation(source_class, destination_class)\n--\n\n"
     "Remove and return the operation registered for the exact pair; KeyError\n"
     "when there is none."},
    {"dispatch_move", (PyCFunction)(void (*)(void))dispatch_move,
     METH_FASTCALL | METH_KEYWORDS,
     "dispatch_move(source_class, destination_class)\n--\n\n"
     "The operation class a move between these exact carrier classes uses:\n"
     "the registered one, else ElementwiseMoveOperation."},
    {"registered_move_operation", (PyCFunction)(void (*)(void))registered_move_operation,
     METH_FASTCALL | METH_KEYWORDS,
     "registered_move_operation(source_class, destination_class, operation_class)\n--\n\n"
     "A context manager: register the pair on entry (yielding operation_class)\n"
     "and unregister it on exit, whether the block returns or raises.\n\n"
     "    with registered_move_operation(CPU, MyCarrier, MyMove):\n"
     "        move(t, MyCarrier())"},
    {NULL, NULL, 0, NULL},
};

/* ---- module setup -------------------------------------------------------------- */

static int set_pins(PyTypeObject *op, PyObject *src, PyObject *dst)
{
    if (PyDict_SetItem(op->tp_dict, str_source_class, src) < 0 ||
        PyDict_SetItem(op->tp_dict, str_destination_class, dst) < 0)
        return -1;
    PyType_Modified(op);
    return 0;
}

static int add_shipped(PyObject *module, PyTypeObject *op, PyTypeObject *src,
                       PyTypeObject *dst, int registered)
{
    if (PyType_Ready(op) < 0)
        return -1;
    if (src && set_pins(op, (PyObject *)src, (PyObject *)dst) < 0)
        return -1;
    if (registered == 1 && registry_add((PyObject *)src, (PyObject *)dst, (PyObject *)op) < 0)
        return -1;
    /* 2: a pair users may not register or unregister (B-10's block pairs). */
    if (registered == 2 && registry_insert((PyObject *)src, (PyObject *)dst, (PyObject *)op) < 0)
        return -1;
    return PyModule_AddObjectRef(module, _PyType_Name(op), (PyObject *)op);
}

int sw_py_move_operation_init(PyObject *module)
{
    str_source_class = PyUnicode_InternFromString("source_class");
    str_destination_class = PyUnicode_InternFromString("destination_class");
    str_copy = PyUnicode_InternFromString("_copy");
    if (!str_source_class || !str_destination_class || !str_copy)
        return -1;
    if (PyType_Ready(&SwMoveOperation_Type) < 0 || PyType_Ready(&SwRegistered_Type) < 0 ||
        set_pins(&SwMoveOperation_Type, Py_None, Py_None) < 0)
        return -1;
    base_copy = PyDict_GetItemWithError(SwMoveOperation_Type.tp_dict, str_copy);
    if (!base_copy)
        return -1;
    Py_INCREF(base_copy);
    if (PyModule_AddObjectRef(module, "MoveOperation", (PyObject *)&SwMoveOperation_Type) < 0 ||
        add_shipped(module, &SwElementwise_Type, NULL, NULL, 0) < 0 ||
        add_shipped(module, &SwCpuToFileBacked_Type, &SwCPU_Type, &SwFileBacked_Type, 1) < 0 ||
        add_shipped(module, &SwFileBackedToCpu_Type, &SwFileBacked_Type, &SwCPU_Type, 1) < 0 ||
        add_shipped(module, &SwCpuToMetal_Type, &SwCPU_Type, &SwMetal_Type, 1) < 0 ||
        add_shipped(module, &SwMetalToCpu_Type, &SwMetal_Type, &SwCPU_Type, 1) < 0 ||
        add_shipped(module, &SwMetalToMetal_Type, &SwMetal_Type, &SwMetal_Type, 1) < 0 ||
        add_shipped(module, &SwCpuToBlockDevice_Type, &SwCPU_Type,
                    &SwBlockDeviceCarrier_Type, 2) < 0 ||
        add_shipped(module, &SwBlockDeviceToCpu_Type, &SwBlockDeviceCarrier_Type,
                    &SwCPU_Type, 2) < 0 ||
        add_shipped(module, &SwTransferRouteMove_Type, NULL, NULL, 0) < 0)
        return -1;
    return PyModule_AddFunctions(module, registry_functions);
}
