/* One tile copy through a definition-backed pair's TransferRoute (contract-
 * carriers TE-7 "routes if definition-backed", TE-8; ).
 *
 * The tile is the span (tile_size):(1) of its private tile-sized storage,
 * so the request is the one a public move of that Tensor into the fresh
 * storage would build: the route's prepare(request) runs with graph
 * construction off, an Unsupported answer falls back to the elementwise
 * operation when both providers allow it (else NotImplementedError), and
 * submit() runs with both carriers pending and this thread holding transfer
 * access. Unlike move(), the source is never released here: the residency
 * request releases old copies only when the whole set commits.
 *
 * submit() returning None means the fresh storage holds the values now. An
 * incomplete ProviderCompletion is handed back to the residency request,
 * which lets the waiter threads wait for it (TE-8); both carriers stay
 * pending until then, so nothing reads the fresh storage early or touches
 * the source the provider still reads. */
#include "sw_tiled.h"
#include "sw_extension.h"
#include "sw_move.h"

#define CARRIER(o) ((SwCarrierObject *)(o))

static PyObject *str_wait, *str_done;

/* What a move's commit checks of its destination: still live, still big
 * enough for the span. */
int sw_py_tiled_check_fresh(PyObject *dst, int64_t n)
{
    int64_t size = 0;
    if (sw_py_state_released(dst)) {
        PyErr_Format(PyExc_RuntimeError,
                     "the fresh %s tile storage was released during the tile copy", sw_py_cname(dst));
        return -1;
    }
    if (sw_py_carrier_size(dst, &size) < 0)
        return -1;
    if (size < n) {
        PyErr_Format(PyExc_RuntimeError,
                     "the fresh %s tile storage shrank to %lld slots during the tile copy "
                     "(needs %lld)", sw_py_cname(dst), (long long)size, (long long)n);
        return -1;
    }
    return 0;
}

/* prepare(request) with graph construction off. 1 with a
 * PreparedTransfer in *prepared; 0 when Unsupported switched `route` to the
 * elementwise fallback; -1 otherwise. */
static int prepare(PyObject *tensor, PyObject *dst, sw_py_route *route, PyObject **prepared)
{
    int rc = sw_py_route_prepare(tensor, dst, route->route, route->may_fall_back,
                                 "copy a tile", prepared);
    if (rc == 0) {
        route->route = NULL;
        route->op_type = (PyObject *)&SwElementwise_Type;
    }
    return rc;
}

void sw_py_tiled_route_unmark(PyObject *src, PyObject *dst)
{
    sw_py_state_unmark_pending(dst, SW_PENDING_DESTINATION);
    sw_py_state_unmark_pending(src, SW_PENDING_SOURCE);
}

/* submit() once with transfer access. 0 when the copy is done
 * or *completion holds an incomplete-or-not ProviderCompletion (carriers
 * left pending), -1 on error (carriers unmarked). */
static int submit(PyObject *prepared, PyObject *src, PyObject *dst, int64_t n,
                  PyObject **completion)
{
    /* The core checks and marks both (with transfer access) in one step. */
    sw_carrier_pair pair;
    if (sw_carrier_pair_begin(SW_STATE_C(src)->core, SW_STATE_C(dst)->core, 0, &pair, NULL) !=
        SW_OK) {
        PyErr_Format(PyExc_RuntimeError,
                     "a tile's %s storage was released or became pending while its copy "
                     "was being prepared", sw_py_cname(src));
        return -1;
    }
    PyObject *res = PyObject_CallNoArgs(SW_RECORD_FIELD(prepared, 0));
    sw_carrier_pair_end_transfer(&pair);
    if (res && res != Py_None && sw_py_check_provider_completion(res) == 0) {
        sw_carrier_pair_keep_marks(&pair); /* sw_py_tiled_route_unmark clears them */
        *completion = res;
        return 0;
    }
    sw_carrier_pair_end(&pair);
    int ok = res == Py_None;
    Py_XDECREF(res);
    return ok ? sw_py_tiled_check_fresh(dst, n) : -1;
}

int sw_py_tiled_route_tile(PyObject *src, PyObject *dst, int64_t n, sw_py_route *route,
                           PyObject **completion)
{
    PyObject *layout = sw_py_flat_layout(n);
    PyObject *tensor = layout ? sw_py_tensor_new1(src, 0, layout) : NULL;
    PyObject *prepared = NULL;
    int rc = tensor ? prepare(tensor, dst, route, &prepared) : -1;
    if (rc > 0)
        rc = submit(prepared, src, dst, n, completion);
    Py_XDECREF(prepared);
    Py_XDECREF(tensor);
    Py_XDECREF(layout);
    return rc;
}

/* A synchronous caller's wait (a write promoting its tile, a projection):
 * the provider's wait() on this thread, then `done` must be True. */
int sw_py_tiled_route_wait(PyObject *completion)
{
    PyObject *r = PyObject_CallMethodNoArgs(completion, str_wait);
    if (!r)
        return -1;
    int bad = r != Py_None;
    Py_DECREF(r);
    if (bad) {
        PyErr_SetString(PyExc_TypeError, "ProviderCompletion.wait() must return None");
        return -1;
    }
    PyObject *done = PyObject_GetAttr(completion, str_done);
    if (!done)
        return -1;
    bad = done != Py_True;
    Py_DECREF(done);
    if (bad)
        PyErr_SetString(PyExc_TypeError,
                        "ProviderCompletion.done is not True after wait() returned");
    return bad ? -1 : 0;
}

int sw_py_tile_route_init(void)
{
    str_wait = PyUnicode_InternFromString("wait");
    str_done = PyUnicode_InternFromString("done");
    return str_wait && str_done ? 0 : -1;
}
