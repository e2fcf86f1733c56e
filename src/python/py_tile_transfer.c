/* One tile copy through the tier classes' exact-pair movement (contract-
 * carriers TE-7; spec: "TiledEvictable's internal transfers between
 * configured definition-free dependency carriers SHALL use their legacy
 * exact-pair movement path").
 *
 * The source is a tile-sized private carrier (a tile that moved at least
 * once, or a materialized implicit tile), so the tile is the one span
 * (tile_size):(1) of it and a move's transfer applies unchanged: the
 * operation the legacy movement resolves for (type(source), type(fresh)) —
 * the registered MoveOperation of that exact pair, else the elementwise
 * fallback — runs its `_copy(tensor, destination, output, element_count)`
 * on this thread. Unlike move(), nothing here releases the source: the
 * residency request releases old copies only when the whole set commits
 * (TE-7), and releases the fresh copies instead when anything fails. No
 * autograd node is recorded.
 *
 * While `_copy` runs both carriers are pending (architecture.md, "Pending
 * guard") and this thread holds transfer access to them, exactly as in a
 * move's submission: user code in the hook cannot release or mutate the
 * source, and only the hook's own writes reach the destination, advancing
 * no version.
 *
 * Definition-backed tiers (TE-7 "or routes if definition-backed") resolve
 * the pair as a public move does: a TransferRoute runs through its
 * provider (py_tile_route.c), else the elementwise fallback when both
 * providers allow it, else NotImplementedError. */
#include "sw_tiled.h"
#include "sw_extension.h"
#include "sw_move.h"
#include "sw_move_core.h"

static PyObject *str_copy, *str_copy_async;

/* run_copy's `shared` bits. */
#define SHARE_SOURCE 1
#define SHARE_DESTINATION 2

static int is_block(PyObject *c)
{
    return Py_TYPE(c) == &SwBlockDeviceCarrier_Type;
}

int sw_py_tiled_transfer_applies(PyObject *src, PyObject *dst)
{
    /* Definition-backed tiers move through their TransferRoutes (or the
     * fallback their providers allow), resolved as a move would (TE-7,
     * A BlockDeviceCarrier is the core's: its tiles are made and
     * copied there (CPU pairs through the block transfer's durability,
     * B-11), and paired with anything else it has no movement at all
     * (B-10), so it keeps the slot copy and such tiers stay usable (our
     * decision). */
    if (SW_DEFINED(src) || SW_DEFINED(dst))
        return 1;
    return !(is_block(src) || is_block(dst));
}

/* X-14 for the exact pair. A TransferRoute comes back in route->route. */
static int resolve_route(PyObject *src, PyObject *dst, sw_py_route *route)
{
    return sw_py_route_resolve(Py_TYPE(src), Py_TYPE(dst), route) < 0 ? -1 : 0;
}

/* Row 9 of the movement checks (pinned classes, a missing _copy) on the
 * legacy operation class (strong reference). */
static PyObject *checked_operation(PyObject *op_type, PyObject *src, PyObject *dst)
{
    Py_INCREF(op_type);
    if (sw_py_move_check_operation((PyTypeObject *)op_type, src, dst) < 0)
        Py_CLEAR(op_type);
    return op_type;
}

/* Run op._copy(tensor, dst, output, n) with both carriers pending and this
 * thread holding transfer access; `shared` leaves the source (a full tier
 * every in-place tile reads) unmarked. An operation with `_copy_async`
 * (py_move.c) starts the copy instead: an incomplete ProviderCompletion
 * comes back in *completion with the marks kept until
 * sw_py_tiled_route_unmark, so many tiles copy at once. 0 / -1. */
static int run_copy(PyObject *op, PyObject *tensor, PyObject *src, PyObject *dst,
                    PyObject *output, PyObject *count, int shared, PyObject **completion)
{
    /* SHARE_DESTINATION: the caller holds `dst` privately and copies many
     * tiles into it at once, so it is neither checked nor marked here. */
    unsigned flags = (shared & SHARE_SOURCE ? SW_CARRIER_PAIR_SHARED_SOURCE : 0) |
                     (shared & SHARE_DESTINATION ? SW_CARRIER_PAIR_SHARED_DESTINATION : 0);
    PyObject *hook;
    if (_PyObject_LookupAttr((PyObject *)Py_TYPE(op), str_copy_async, &hook) < 0)
        return -1;
    /* The core checks and marks both (with transfer access) in one step. */
    sw_carrier_pair pair;
    sw_error err;
    if (sw_carrier_pair_begin(SW_STATE_C(src)->core, SW_STATE_C(dst)->core, flags, &pair,
                              &err) != SW_OK) {
        PyErr_Format(PyExc_RuntimeError, "a tile's %s storage %s",
                     pair.refused == SW_CARRIER_PENDING_DESTINATION ? sw_py_cname(dst) : sw_py_cname(src),
                     err.detail == SW_CARRIER_REFUSED_RELEASED ? "was released before its copy"
                                                               : "is pending in another move");
        Py_XDECREF(hook);
        return -1;
    }
    PyObject *res = PyObject_CallMethodObjArgs(op, hook ? str_copy_async : str_copy, tensor,
                                               dst, output, count, NULL);
    sw_carrier_pair_end_transfer(&pair);
    if (hook && res && res != Py_None && sw_py_check_provider_completion(res) == 0) {
        sw_carrier_pair_keep_marks(&pair); /* sw_py_tiled_route_unmark clears them */
        Py_DECREF(hook);
        *completion = res;
        return 0;
    }
    sw_carrier_pair_end(&pair);
    if (!res || PyErr_Occurred()) {
        Py_XDECREF(hook);
        Py_XDECREF(res);
        return -1;
    }
    int is_none = res == Py_None;
    Py_DECREF(res);
    if (is_none) {
        Py_XDECREF(hook);
        return 0;
    }
    PyErr_Format(PyExc_TypeError, "%s.%s must return None", sw_py_cname(op),
                 hook ? "_copy_async" : "_copy");
    Py_XDECREF(hook);
    return -1;
}

/* The shipped operations' _copy is the C transfer move() itself runs
 * without calling _copy (py_move.c, submit): do the same for exact
 * built-in tiers, sparing the per-tile Tensors and method call. 1 when
 * done, 0 when the core cannot copy the pair (call _copy), -1 on error.
 * The core checks the pair, marks both carriers pending for the copy and
 * unmarks them (SW_MOVE_HERE_MARK). */
static int run_builtin(PyObject *op_type, PyObject *src, int64_t offset, PyObject *dst,
                       PyObject *layout)
{
    sw_py_route_kind kind = sw_py_move_route_kind((PyTypeObject *)op_type);
    if (kind == SW_ROUTE_PYTHON || (Py_TYPE(src)->tp_flags & Py_TPFLAGS_HEAPTYPE) ||
        (Py_TYPE(dst)->tp_flags & Py_TPFLAGS_HEAPTYPE))
        return 0; /* Python slot hooks: only _copy reaches them */
    sw_error err;
    switch (sw_py_transfer_here(src, offset, SwLayout_CORE(layout), dst, kind == SW_ROUTE_BULK,
                                1, &err)) {
    case SW_PY_HERE_DONE: return 1;
    case SW_PY_HERE_UNREACHABLE: return 0;
    case SW_PY_HERE_PENDING:
        PyErr_SetString(PyExc_RuntimeError, "a tile's storage is pending in another move");
        return -1;
    default: return sw_py_raise(&err);
    }
}

/* The legacy movement of the pair: the shipped C transfer, else the
 * operation's _copy (or _copy_async) with (n):(1) Tensors, the source's at
 * `offset`. */
static int run_legacy(PyObject *op_type, PyObject *src, int64_t offset, PyObject *dst,
                      int64_t dst_offset, int64_t n, int shared, PyObject **completion)
{
    op_type = checked_operation(op_type, src, dst);
    PyObject *layout = op_type ? sw_py_flat_layout(n) : NULL;
    int done = layout ? dst_offset ? 0 : run_builtin(op_type, src, offset, dst, layout) : -1;
    if (done != 0) {
        Py_XDECREF(layout);
        Py_XDECREF(op_type);
        return done < 0 ? -1 : 0;
    }
    PyObject *op = PyObject_CallNoArgs(op_type);
    /* Building the Tensors may call Python size hooks: they run before the
     * pending marks, and run_copy re-reads the pending state after them. */
    PyObject *tensor = op ? sw_py_tensor_new1(src, offset, layout) : NULL;
    PyObject *output = tensor ? sw_py_tensor_new1(dst, dst_offset, layout) : NULL;
    PyObject *count = output ? PyLong_FromLongLong(n) : NULL;
    int rc = -1;
    if (count && !sw_py_state_released(src) &&
        run_copy(op, tensor, src, dst, output, count, shared, completion) == 0)
        rc = *completion ? 0 : sw_py_tiled_check_fresh(dst, dst_offset + n);
    else if (count && !PyErr_Occurred())
        PyErr_Format(PyExc_RuntimeError, "a tile's %s storage was released before its copy",
                     sw_py_cname(src));
    Py_XDECREF(count);
    Py_XDECREF(output);
    Py_XDECREF(tensor);
    Py_XDECREF(layout);
    Py_XDECREF(op);
    Py_DECREF(op_type);
    return rc;
}

int sw_py_tiled_transfer_tile(PyObject *src, PyObject *dst, int64_t n, PyObject **completion)
{
    *completion = NULL;
    Py_INCREF(src);
    Py_INCREF(dst);
    sw_py_route route;
    int rc = resolve_route(src, dst, &route);
    if (rc == 0 && route.route)
        rc = sw_py_tiled_route_tile(src, dst, n, &route, completion);
    if (rc == 0 && !route.route && !*completion)
        rc = run_legacy(route.op_type, src, 0, dst, 0, n, 0, completion);
    Py_DECREF(dst);
    Py_DECREF(src);
    return rc;
}

int sw_py_tiled_transfer_span(PyObject *src, int64_t offset, PyObject *dst, int64_t n,
                              PyObject **completion)
{
    return sw_py_tiled_transfer_span_into(src, offset, dst, 0, n, 0, completion);
}

int sw_py_tiled_transfer_span_into(PyObject *src, int64_t offset, PyObject *dst,
                                   int64_t dst_offset, int64_t n, int private_dst,
                                   PyObject **completion)
{
    int share_dst = private_dst ? SHARE_DESTINATION : 0;
    *completion = NULL;
    Py_INCREF(src);
    Py_INCREF(dst);
    sw_py_route route;
    int rc = resolve_route(src, dst, &route);
    /* Only an operation driving an engine's own I/O (`_copy_async`) takes
     * the span; the others keep the direct slot copy (TE-7). */
    PyObject *hook = NULL;
    if (rc == 0 && !route.route &&
        (rc = _PyObject_LookupAttr(route.op_type, str_copy_async, &hook)) >= 0)
        rc = hook ? run_legacy(route.op_type, src, offset, dst, dst_offset, n,
                              SHARE_SOURCE | share_dst,
                              completion)
                   : 1;
    else if (rc == 0)
        rc = 1;
    Py_XDECREF(hook);
    Py_DECREF(dst);
    Py_DECREF(src);
    return rc;
}

int sw_py_tiled_engine_pair(PyObject *src, PyObject *dst)
{
    if (!(Py_TYPE(src)->tp_flags & Py_TPFLAGS_HEAPTYPE) || SW_DEFINED(src) || SW_DEFINED(dst))
        return 0;
    sw_py_route route;
    PyObject *hook = NULL;
    if (resolve_route(src, dst, &route) < 0 || route.route ||
        _PyObject_LookupAttr(route.op_type, str_copy_async, &hook) < 0) {
        PyErr_Clear();
        return 0;
    }
    int engine = hook != NULL;
    Py_XDECREF(hook);
    return engine;
}

int sw_py_tile_transfer_init(PyObject *module)
{
    (void)module;
    str_copy = PyUnicode_InternFromString("_copy");
    str_copy_async = PyUnicode_InternFromString("_copy_async");
    return str_copy ? sw_py_tile_route_init() : -1;
}
