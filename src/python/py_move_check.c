/* A move's validation (sw_move_check.h): the core's rows, this binding's
 * words. The state machine of a move lives in the core (conventions.md:
 * the binding never re-checks what the core checks): every row about the
 * carriers' states, dtypes and sizes is sw_move_check's, one lock round on
 * the pair each time. What stays here is what only Python knows: whether
 * the arguments are a Tensor and a Carrier (rows 1 and 4), and the answers
 * of a carrier written in Python (a STATE_ONLY carrier in the core), whose
 * hooks run first, each followed by the core's check with its answer, so
 * no user code runs between a check and what it decides. */
#include "sw_move_check.h"
#include "sw_extension.h"
#include "sw_messages.h"
#include "strideweave/move.h"

#define CARRIER(o) ((SwCarrierObject *)(o))
#define TENSOR(o) ((SwTensorObject *)(o))

/* ---- the one table: a refused row, in the words of the Python API --------- */

enum { NAMES_NONE, NAMES_SOURCE, NAMES_DESTINATION };

#define NOT_MUTABLE                                                                        \
    "the destination %s carrier is not mutable (immutable, or owned by a composite carrier)"

static const struct {
    PyObject **type; /* NULL: a row with words of its own (raise_row) */
    int names;       /* whose class name the message takes */
    int state;       /* a carrier's state: after user code, "changed while checked" */
    const char *format;
} row_words[] = {
    [SW_MOVE_SOURCE_RELEASED] = {&PyExc_RuntimeError, NAMES_SOURCE, 1,
                                 "cannot move a Tensor whose %s carrier is released"},
    [SW_MOVE_SOURCE_OWNED] = {&PyExc_RuntimeError, NAMES_SOURCE, 1,
                              "cannot move a Tensor whose %s carrier is owned by a composite "
                              "carrier"},
    [SW_MOVE_SOURCE_PENDING] = {&PyExc_RuntimeError, NAMES_SOURCE, 1,
                                "cannot move a Tensor whose %s carrier is pending in another "
                                "move; wait() for that move first"},
    [SW_MOVE_SAME_CARRIER] = {&PyExc_ValueError, NAMES_NONE, 0,
                              "destination is the Tensor's own source carrier; move into a "
                              "different carrier"},
    [SW_MOVE_DESTINATION_RELEASED] = {&PyExc_RuntimeError, NAMES_DESTINATION, 1,
                                      "the destination %s carrier is released"},
    [SW_MOVE_DESTINATION_PENDING] = {&PyExc_RuntimeError, NAMES_DESTINATION, 1,
                                     "the destination %s carrier is pending in another move; "
                                     "wait() for that move first"},
    [SW_MOVE_DESTINATION_OWNED] = {&PyExc_RuntimeError, NAMES_DESTINATION, 1, NOT_MUTABLE},
    [SW_MOVE_DESTINATION_IMMUTABLE] = {&PyExc_RuntimeError, NAMES_DESTINATION, 0, NOT_MUTABLE},
};

static int refuse_sequence(PyObject *obj, const char *what)
{
    if (PyList_Check(obj) || PyTuple_Check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "move takes one %s, not a %.50s: batched moves of a sequence are "
                     "not supported, move them one by one", what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    return 0;
}

/* Row 4: the destination is not a Carrier (the core saw NULL). */
static int raise_not_a_carrier(PyObject *dst)
{
    if (refuse_sequence(dst, "destination carrier") == 0)
        PyErr_Format(PyExc_TypeError, "destination must be a Carrier, not %.100s",
                     Py_TYPE(dst)->tp_name);
    return -1;
}

/* Row 8: the destination's dtype as the check saw it. */
static int raise_dtype_mismatch(const sw_py_move_check *mc)
{
    sw_dtype held = (mc->flags & SW_MOVE_CHECK_DST_DTYPE)
                        ? mc->dst_dtype
                        : sw_carrier_dtype(CARRIER(mc->destination)->core);
    PyErr_Format(PyExc_TypeError,
                 "dtype mismatch: the destination %s carrier holds %s but the Tensor is %s",
                 sw_py_cname(mc->destination), sw_dtype_info_of(held)->name,
                 sw_dtype_info_of(mc->dtype)->name);
    return -1;
}

/* Row 10, with the size the check saw. */
static int raise_too_small(const sw_py_move_check *mc)
{
    int64_t size = mc->dst_slots;
    if (!(mc->flags & SW_MOVE_CHECK_DST_SIZE) && sw_py_carrier_size(mc->destination, &size) < 0)
        return -1;
    PyErr_Format(PyExc_ValueError,
                 "the destination %s carrier has %lld slot%s but the Tensor's layout spans "
                 "%lld (its cosize), and it cannot grow; pass a carrier with at least %lld "
                 "slots", sw_py_cname(mc->destination), (long long)size, sw_py_msg_s(size),
                 (long long)mc->cosize, (long long)mc->cosize);
    return -1;
}

/* The exception for `row`. `late`: user code ran since the first check,
 * so a carrier's changed state is reported as that. */
static int raise_row(const sw_py_move_check *mc, sw_move_refusal row, const sw_error *err,
                     int late)
{
    if (row == SW_MOVE_NO_DESTINATION)
        return raise_not_a_carrier(mc->destination);
    if (row == SW_MOVE_DTYPE_MISMATCH)
        return raise_dtype_mismatch(mc);
    if (row == SW_MOVE_TOO_SMALL)
        return raise_too_small(mc);
    if ((size_t)row >= sizeof row_words / sizeof row_words[0] || !row_words[row].type)
        return sw_py_raise(err); /* no row of the Python API: the core's words */
    int source = row_words[row].names == NAMES_SOURCE;
    PyObject *named = source ? mc->source : mc->destination;
    if (late && row_words[row].state) {
        PyErr_Format(PyExc_RuntimeError,
                     "the %s %s carrier was released, claimed or moved while the move was "
                     "being checked", source ? "source" : "destination", sw_py_cname(named));
        return -1;
    }
    if (row_words[row].names == NAMES_NONE)
        PyErr_SetString(*row_words[row].type, row_words[row].format);
    else
        PyErr_Format(*row_words[row].type, row_words[row].format, sw_py_cname(named));
    return -1;
}

/* ---- whether Python code may have run since the checks ------------------------ */

/* Garbage collections seen by a gc.callbacks hook (installed at the first
 * move): a collection runs finalizers, Python code that may release, claim
 * or move a carrier between a move's check and its recheck, while nothing
 * else on a move of built-in carriers through a shipped route runs Python. */
static uint64_t collections;
static PyObject *gc_callbacks; /* the interpreter's list: gc.callbacks */
static PyObject *gc_hook;      /* our entry in it */

static PyObject *count_collection(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    collections++;
    Py_RETURN_NONE;
}

static PyMethodDef count_collection_def = {"_count_collection", count_collection,
                                           METH_VARARGS, NULL};

/* Put the hook in gc.callbacks once; a failure leaves it out (and every
 * move rechecks). */
static void watch_collections(void)
{
    static int tried;
    if (tried)
        return;
    tried = 1;
    PyObject *gc = PyImport_ImportModule("gc");
    PyObject *list = gc ? PyObject_GetAttrString(gc, "callbacks") : NULL;
    PyObject *hook = list && PyList_Check(list) ? PyCFunction_New(&count_collection_def, NULL)
                                                : NULL;
    if (hook && PyList_Append(list, hook) == 0) {
        gc_callbacks = Py_NewRef(list);
        gc_hook = Py_NewRef(hook);
    }
    Py_XDECREF(hook);
    Py_XDECREF(list);
    Py_XDECREF(gc);
    PyErr_Clear();
}

/* Whether collections are still counted: a program may take the hook out
 * of gc.callbacks (a short list: a few identity compares). */
static int collections_watched(void)
{
    if (!gc_callbacks)
        return 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(gc_callbacks); i++)
        if (PyList_GET_ITEM(gc_callbacks, i) == gc_hook)
            return 1;
    return 0;
}

/* A class of the user's may run Python in a route's lookup (its
 * metaclass hashes and compares it); a shipped one (a static type) never. */
static int shipped_class(PyObject *obj)
{
    return !(Py_TYPE(obj)->tp_flags & Py_TPFLAGS_HEAPTYPE);
}

/* ---- the checks ------------------------------------------------------------- */

/* The core's rows with the answers so far: 0, 1 for a row 10 refusal the
 * caller keeps for later (`keep_size`), or -1 with the row's exception. */
static int core_check(sw_py_move_check *mc, int late, int keep_size)
{
    sw_move_check_args a = {
        .cosize = mc->cosize,
        .flags = mc->flags,
        .dtype = mc->dtype,
        .dst_dtype = mc->dst_dtype,
        .dst_immutable = mc->dst_immutable,
        .dst_slots = mc->dst_slots,
        .dst_grows = mc->dst_grows,
    };
    sw_move_refusal row;
    sw_error err;
    if (sw_move_check(mc->src_core, mc->dst_core, &a, &row, &mc->grows, &err) == SW_OK)
        return 0;
    if (row == SW_MOVE_TOO_SMALL && keep_size)
        return 1;
    return raise_row(mc, row, &err, late);
}

/* Row 1: what only Python knows about the tensor argument. */
static int check_tensor_arg(PyObject *tensor)
{
    if (SwTensor_Check(tensor) && TENSOR(tensor)->nsub != 1)
        return sw_py_msg_raise_planes(TENSOR(tensor)->dtype, TENSOR(tensor)->nsub, "moved",
                                      SW_MSG_ONE_PLANE);
    if (SwTensor_Check(tensor))
        return 0;
    if (refuse_sequence(tensor, "Tensor") == 0)
        PyErr_Format(PyExc_TypeError, "tensor must be a Tensor, not %.100s",
                     Py_TYPE(tensor)->tp_name);
    return -1;
}

/* Rows 7 and 8 of a destination written in Python: its hooks answer, the
 * core checks after each one. */
static int ask_destination(sw_py_move_check *mc)
{
    int m = sw_py_carrier_intrinsic_mutable(mc->destination);
    if (m < 0)
        return -1;
    mc->flags |= SW_MOVE_CHECK_DST_MUTABILITY;
    mc->dst_immutable = !m;
    if (core_check(mc, 1, 1) < 0)
        return -1;
    PyObject *dtype = sw_py_carrier_dtype(mc->destination);
    if (!dtype)
        return -1;
    mc->flags |= SW_MOVE_CHECK_DST_DTYPE;
    mc->dst_dtype = SwDType_ID(dtype);
    Py_DECREF(dtype);
    return core_check(mc, 1, 1) < 0 ? -1 : 0;
}

int sw_py_move_check_begin(sw_py_move_check *mc, PyObject *tensor, PyObject *destination)
{
    if (check_tensor_arg(tensor) < 0)
        return -1;
    SwSubtensor *s = &TENSOR(tensor)->subs[0];
    watch_collections();
    *mc = (sw_py_move_check){
        .tensor = tensor,
        .source = s->carrier,
        .destination = destination,
        .src_core = CARRIER(s->carrier)->core,
        .dst_core = SwCarrier_Check(destination) ? CARRIER(destination)->core : NULL,
        .cosize = SW_SUB_LAYOUT(s)->cosize,
        /* The binding supplies the transfer of every move of a carrier
         * written in Python, and row 9 is its route choice. */
        .flags = SW_MOVE_CHECK_SUPPLIED | SW_MOVE_CHECK_OWN_ROUTE | SW_MOVE_CHECK_DTYPE,
        .dtype = SwDType_ID(TENSOR(tensor)->dtype),
        .collections = collections,
    };
    int rc = core_check(mc, 0, 1);
    if (rc < 0)
        return -1;
    mc->too_small = rc;
    /* Rows 1-8 passed: the destination is a Carrier. */
    mc->dst_in_python = sw_carrier_is_state_only(mc->dst_core);
    return mc->dst_in_python ? ask_destination(mc) : 0;
}

int sw_py_move_check_size(sw_py_move_check *mc)
{
    if (!mc->dst_in_python) {
        if (mc->too_small)
            return raise_too_small(mc);
        return mc->grows;
    }
    int64_t size;
    if (sw_py_carrier_size(mc->destination, &size) < 0)
        return -1;
    int grows = 0;
    if (size < mc->cosize && (grows = sw_py_carrier_is_allocatable_empty(mc->destination)) < 0)
        return -1;
    mc->flags |= SW_MOVE_CHECK_DST_SIZE;
    mc->dst_slots = size;
    mc->dst_grows = grows;
    return core_check(mc, 1, 0) < 0 ? -1 : mc->grows;
}

int sw_py_move_recheck(sw_py_move_check *mc)
{
    unsigned flags = mc->flags;
    int grows = mc->grows;
    mc->flags &= ~(unsigned)SW_MOVE_CHECK_DST_SIZE;
    int rc = core_check(mc, 1, 0);
    mc->flags = flags;
    mc->grows = grows;
    return rc;
}

int sw_py_move_recheck_if_python_ran(sw_py_move_check *mc, int user_code)
{
    if (!user_code && shipped_class(mc->source) && shipped_class(mc->destination) &&
        mc->collections == collections && collections_watched())
        return 0; /* no Python ran: the carriers are as the checks saw them */
    return sw_py_move_recheck(mc);
}

int sw_py_move_growth_runs_python(const sw_py_move_check *mc)
{
    return mc->dst_in_python;
}
