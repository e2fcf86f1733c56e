/* Reverse-mode autograd: Tensor.backward and Tensor.retain_grad (contract
 * A-7..A-18), plus the value helpers the view nodes share.
 *
 * A traversal discovers the graph iteratively from the root's node,
 * counts one consumer edge per (node, distinct saved Tensor), then runs
 * nodes whose output Tensor has no consumers left. Pending sums are plain
 * float arrays in logical order; a node's cotangent is materialized as a
 * detached Tensor in its output's gradient layout (A-10) only when it runs.
 * Nothing touches .grad until the whole traversal succeeded (A-13). */
#include "sw_carrier.h"
#include "sw_messages.h"
#include "sw_host_slots.h"

#include <string.h>

static PyObject *str_backward, *str_validate, *str_new_like;

/* ---- value helpers ---------------------------------------------------------- */

static int is_float32(PyObject *tensor)
{
    return ((SwTensorObject *)tensor)->dtype == sw_py_dtype(SW_DT_FLOAT32);
}

static const sw_layout *core0(PyObject *tensor)
{
    return SW_SUB_LAYOUT(&((SwTensorObject *)tensor)->subs[0]);
}

static int injective(const sw_layout *L)
{
    sw_error err;
    int inj = sw_layout_is_injective((sw_layout *)L, &err);
    if (inj < 0)
        sw_py_raise(&err);
    return inj;
}

static int carrier_released(PyObject *tensor)
{
    return sw_py_state_released(((SwTensorObject *)tensor)->subs[0].carrier);
}

PyObject *sw_py_grad_layout(PyObject *tensor)
{
    PyObject *layout = ((SwTensorObject *)tensor)->subs[0].layout;
    const sw_layout *L = SwLayout_CORE(layout);
    int inj = injective(L);
    if (inj < 0)
        return NULL;
    if (inj)
        return Py_NewRef(layout);
    sw_error err;
    sw_layout *c = sw_layout_canonical(L->nprofile, L->profile, L->extents, &err);
    if (!c)
        return sw_py_raise(&err), NULL;
    return sw_py_layout_wrap(c);
}

int sw_py_read_float_values(PyObject *tensor, float *out)
{
    SwTensorObject *t = (SwTensorObject *)tensor;
    const sw_layout *L = core0(tensor);
    PyObject *carrier = t->subs[0].carrier;
    int64_t off = SW_SUB_OFFSET(&t->subs[0]);
    if (L->size == 0)
        return 0;
    sw_error err;
    if (sw_py_host_f32_readable(carrier, off, L->cosize))
        return sw_carrier_read_layout(SW_STATE_C(carrier)->core, off, L, out, &err) == SW_OK
                   ? 0
                   : sw_py_raise(&err);
    /* float(value) of each slot's checked read, hooks and all, rounded */
    double *d = PyMem_Malloc(sizeof(double) * (size_t)L->size);
    if (!d)
        return PyErr_NoMemory(), -1;
    int rc = sw_py_carrier_read_layout(carrier, off, L, SW_DT_FLOAT64, d);
    for (int64_t k = 0; rc == 0 && k < L->size; k++)
        out[k] = (float)d[k];
    PyMem_Free(d);
    return rc;
}

/* data[slot of k] = vals[k] for G's ordinals (data holds G->cosize). */
static int place_values(const sw_layout *G, float *data, const float *vals)
{
    sw_error err;
    return sw_layout_scatter(data, 0, G, vals, sizeof(float), &err) == SW_OK
               ? 0
               : sw_py_raise(&err);
}

PyObject *sw_py_grad_buffer(PyObject *target, const float *vals)
{
    PyObject *layout = sw_py_grad_layout(target);
    if (!layout)
        return NULL;
    PyObject *r = sw_py_grad_buffer_on(((SwTensorObject *)target)->subs[0].carrier, layout,
                                       vals);
    Py_DECREF(layout);
    return r;
}

PyObject *sw_py_grad_buffer_on(PyObject *tc, PyObject *layout, const float *vals)
{
    PyObject *list = NULL, *carrier = NULL, *result = NULL;
    const sw_layout *G = SwLayout_CORE(layout);
    if ((Py_IS_TYPE(tc, &SwCPU_Type) || Py_IS_TYPE(tc, &SwGeneric_Type)) &&
        ((SwHostCarrierObject *)tc)->dtype == SW_DT_FLOAT32) {
        /* new_like of an exact host carrier, without a list of Python
         * floats: same class, version 0, mutable, zeros in the holes. */
        int flat = sw_layout_is_flat(G) && G->cosize == G->size;
        carrier = sw_py_host_new(Py_TYPE(tc), SW_DT_FLOAT32, G->cosize, 1, !flat);
        if (!carrier)
            goto done;
        if (G->size > 0 && place_values(G, ((SwHostCarrierObject *)carrier)->data, vals) < 0)
            goto done;
        result = sw_py_tensor_new1(carrier, 0, layout);
        goto done;
    }
    list = PyList_New((Py_ssize_t)G->cosize);
    if (!list)
        goto done;
    for (int64_t s = 0; s < G->cosize; s++) {
        PyObject *zero = PyFloat_FromDouble(0.0);
        if (!zero)
            goto done;
        PyList_SET_ITEM(list, (Py_ssize_t)s, zero);
    }
    int64_t *slots = sw_py_layout_slots(G, 0);
    if (!slots)
        goto done;
    for (int64_t k = 0; k < G->size; k++) {
        PyObject *v = PyFloat_FromDouble((double)vals[k]);
        if (!v) {
            PyMem_Free(slots);
            goto done;
        }
        PyList_SetItem(list, (Py_ssize_t)slots[k], v);
    }
    PyMem_Free(slots);
    carrier = PyObject_CallMethodOneArg(tc, str_new_like, list);
    if (!carrier)
        goto done;
    result = sw_py_tensor_new1(carrier, 0, layout);
done:
    Py_XDECREF(list);
    Py_XDECREF(carrier);
    return result;
}

/* Broadcast aliasing: injective once every stride-0 leaf of extent > 1
 * shrinks to extent 1. 1/0/-1. */
static int broadcast_aliasing(const sw_layout *L)
{
    sw_error err;
    int64_t *ext = PyMem_Malloc(sizeof(int64_t) * ((size_t)L->nleaves + 1));
    if (!ext)
        return PyErr_NoMemory(), -1;
    for (int32_t i = 0; i < L->nleaves; i++)
        ext[i] = L->strides[i] == 0 ? 1 : L->extents[i];
    sw_layout *s = sw_layout_new(L->nprofile, L->profile, ext, L->strides, &err);
    PyMem_Free(ext);
    if (!s)
        return sw_py_raise(&err);
    int inj = sw_layout_is_injective(s, &err);
    sw_layout_free(s);
    if (inj < 0)
        return sw_py_raise(&err);
    return inj;
}

/* A-9: cotangent `c` against target `T`. 0 / -1. */
static int validate_cotangent(PyObject *T, PyObject *c, const char *what)
{
    if (!SwTensor_Check(c)) {
        PyErr_Format(PyExc_TypeError, "%s must be a Tensor, not %.100s", what,
                     Py_TYPE(c)->tp_name);
        return -1;
    }
    if (((SwTensorObject *)c)->nsub != 1) {
        PyErr_Format(PyExc_NotImplementedError,
                     "%s must be a Float32 tensor on one carrier, not a tensor with %zd planes",
                     what, ((SwTensorObject *)c)->nsub);
        return -1;
    }
    if (carrier_released(c)) {
        PyErr_Format(PyExc_RuntimeError, "%s lives on a released carrier", what);
        return -1;
    }
    const sw_layout *TL = core0(T), *CL = core0(c);
    int inj = injective(TL);
    if (inj < 0)
        return -1;
    if (inj) {
        if (!sw_layout_equal(TL, CL)) {
            PyErr_Format(PyExc_ValueError,
                         "%s layout %R must equal the layout %R of the Tensor it is for", what,
                         ((SwTensorObject *)c)->subs[0].layout,
                         ((SwTensorObject *)T)->subs[0].layout);
            return -1;
        }
        return 0;
    }
    int ba = broadcast_aliasing(TL);
    if (ba < 0)
        return -1;
    if (!ba) {
        PyErr_Format(PyExc_ValueError,
                     "%s cannot be used: the Tensor it is for has layout %R, which maps "
                     "several elements to one slot in a way broadcasting does not",
                     what, ((SwTensorObject *)T)->subs[0].layout);
        return -1;
    }
    int cinj = injective(CL);
    if (cinj < 0)
        return -1;
    if (!sw_layout_same_shape(TL, CL) || !cinj) {
        PyErr_Format(PyExc_ValueError,
                     "%s must have the shape of the Tensor it is for, in an injective "
                     "layout, not %R",
                     what, ((SwTensorObject *)c)->subs[0].layout);
        return -1;
    }
    return 0;
}

/* ---- traversal state ---------------------------------------------------------- */

typedef struct {
    PyObject *tensor;   /* borrowed: the tensor dict keeps it */
    Py_ssize_t edges;
    Py_ssize_t node;    /* index of its discovered node, -1 for none */
    float *sum;         /* pending total in logical order, NULL = none yet */
    PyObject *held;     /* owned host carrier whose memory `sum` is, or NULL */
} tinfo;

typedef struct {
    PyObject *node;     /* borrowed: the node dict keeps it */
    PyObject *inputs;   /* owned snapshot of the saved inputs */
} ninfo;

typedef struct {
    PyObject *tdict, *ndict; /* object -> index */
    tinfo *t;
    Py_ssize_t nt, capt;
    ninfo *n;
    Py_ssize_t nn, capn;
} graph;

static void graph_free(graph *g)
{
    for (Py_ssize_t i = 0; i < g->nt; i++) {
        if (g->t[i].held)
            Py_DECREF(g->t[i].held);
        else
            PyMem_Free(g->t[i].sum);
    }
    for (Py_ssize_t i = 0; i < g->nn; i++)
        Py_XDECREF(g->n[i].inputs);
    PyMem_Free(g->t);
    PyMem_Free(g->n);
    Py_XDECREF(g->tdict);
    Py_XDECREF(g->ndict);
}

static int grow(void **arr, Py_ssize_t *cap, Py_ssize_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    Py_ssize_t nc = *cap ? *cap * 2 : 16;
    void *p = PyMem_Realloc(*arr, (size_t)nc * elem);
    if (!p)
        return PyErr_NoMemory(), -1;
    *arr = p;
    *cap = nc;
    return 0;
}

/* Index of `obj` in `dict`, adding it when new (*added = 1). -1 on error. */
static Py_ssize_t intern_obj(PyObject *dict, PyObject *obj, Py_ssize_t next, int *added)
{
    PyObject *v = PyDict_GetItemWithError(dict, obj);
    *added = 0;
    if (v)
        return PyLong_AsSsize_t(v);
    if (PyErr_Occurred())
        return -1;
    PyObject *idx = PyLong_FromSsize_t(next);
    if (!idx)
        return -1;
    int rc = PyDict_SetItem(dict, obj, idx);
    Py_DECREF(idx);
    if (rc < 0)
        return -1;
    *added = 1;
    return next;
}

static Py_ssize_t add_node(graph *g, PyObject *node, int *added)
{
    Py_ssize_t i = intern_obj(g->ndict, node, g->nn, added);
    if (i < 0 || !*added)
        return i;
    if (grow((void **)&g->n, &g->capn, g->nn + 1, sizeof(ninfo)) < 0)
        return -1;
    PyObject *saved = ((SwOperationObject *)node)->saved;
    g->n[i].node = node;
    g->n[i].inputs = saved ? Py_NewRef(saved) : PyTuple_New(0);
    g->nn++;
    if (!g->n[i].inputs)
        return -1;
    return i;
}

static Py_ssize_t add_tensor(graph *g, PyObject *tensor, int *added)
{
    Py_ssize_t i = intern_obj(g->tdict, tensor, g->nt, added);
    if (i < 0 || !*added)
        return i;
    if (grow((void **)&g->t, &g->capt, g->nt + 1, sizeof(tinfo)) < 0)
        return -1;
    g->t[i].tensor = tensor;
    g->t[i].edges = 0;
    g->t[i].node = -1;
    g->t[i].sum = NULL;
    g->t[i].held = NULL;
    g->nt++;
    return i;
}

/* Whether position i of `inputs` is the first occurrence of its object. */
static int first_occurrence(PyObject *inputs, Py_ssize_t i)
{
    PyObject *x = PyTuple_GET_ITEM(inputs, i);
    for (Py_ssize_t k = 0; k < i; k++)
        if (PyTuple_GET_ITEM(inputs, k) == x)
            return 0;
    return 1;
}

static int counts(PyObject *x)
{
    return SwTensor_Check(x) && is_float32(x);
}

/* Tensor index -> its node: attach the autograd_ctx node, discovering it. */
static int link_node(graph *g, Py_ssize_t ti, Py_ssize_t *stack, Py_ssize_t *sp)
{
    PyObject *ctx = ((SwTensorObject *)g->t[ti].tensor)->autograd_ctx;
    if (!SwOperation_Check(ctx))
        return 0;
    int added;
    Py_ssize_t ni = add_node(g, ctx, &added);
    if (ni < 0)
        return -1;
    g->t[ti].node = ni;
    if (added)
        stack[(*sp)++] = ni;
    return 0;
}

/* A-11: iterative discovery from the root tensor (index 0). */
static int discover(graph *g)
{
    Py_ssize_t *stack = NULL, cap = 0, sp = 0;
    int rc = -1;
    if (grow((void **)&stack, &cap, 1, sizeof(Py_ssize_t)) < 0)
        return -1;
    if (link_node(g, 0, stack, &sp) < 0)
        goto done;
    while (sp > 0) {
        Py_ssize_t ni = stack[--sp];
        PyObject *inputs = g->n[ni].inputs;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(inputs); i++) {
            PyObject *u = PyTuple_GET_ITEM(inputs, i);
            if (!counts(u) || !first_occurrence(inputs, i))
                continue;
            int added;
            Py_ssize_t ti = add_tensor(g, u, &added);
            if (ti < 0)
                goto done;
            g->t[ti].edges++;
            if (!added)
                continue;
            if (grow((void **)&stack, &cap, sp + 1, sizeof(Py_ssize_t)) < 0)
                goto done;
            if (link_node(g, ti, stack, &sp) < 0)
                goto done;
        }
    }
    rc = 0;
done:
    PyMem_Free(stack);
    return rc;
}

/* The carrier of cotangent c when nothing but the engine can reach it (c
 * only in `items`, the tuple a node's backward returned and nothing else
 * holds; the carrier only in c): an exact fresh Float32 CPU/Generic carrier
 * holding c's values in logical order. Its memory can then be the pending
 * sum, and later the gradient's storage, without copies. Else NULL. */
static PyObject *exclusive_carrier(PyObject *c, PyObject *items)
{
    if (!items || Py_REFCNT(items) != 2 || Py_REFCNT(c) != 1 ||
        !Py_IS_TYPE(c, &SwTensor_Type))
        return NULL;
    SwTensorObject *t = (SwTensorObject *)c;
    if (t->nsub != 1 || t->weakreflist || SW_SUB_OFFSET(&t->subs[0]) != 0)
        return NULL;
    PyObject *carrier = t->subs[0].carrier;
    if (!Py_IS_TYPE(carrier, &SwCPU_Type) && !Py_IS_TYPE(carrier, &SwGeneric_Type))
        return NULL;
    SwHostCarrierObject *h = (SwHostCarrierObject *)carrier;
    const sw_layout *L = core0(c);
    if (Py_REFCNT(carrier) != 1 || h->base.weakreflist || sw_py_state_version(carrier) != 0 ||
        sw_py_state_released(carrier) || sw_py_state_pending(carrier) ||
        sw_py_state_owned(carrier) || h->base.intrinsic_mutable != 1 ||
        sw_py_carrier_in_transfer(carrier) ||
        h->dtype != SW_DT_FLOAT32 || !h->data || !h->owns_data || L->size == 0 ||
        L->size != L->cosize || L->size != h->nslots || !sw_layout_is_flat(L))
        return NULL;
    return carrier;
}

/* Add cotangent c's values (already validated for tensor ti) into its sum.
 * items: the tuple holding c when it came from a node's backward, else NULL. */
static int accumulate(graph *g, Py_ssize_t ti, PyObject *c, PyObject *items)
{
    tinfo *T = &g->t[ti];
    int64_t n = core0(T->tensor)->size;
    if (!T->sum) {
        PyObject *carrier = exclusive_carrier(c, items);
        if (carrier) {
            T->held = Py_NewRef(carrier);
            T->sum = ((SwHostCarrierObject *)carrier)->data;
            return 0;
        }
    } else {
        SwTensorObject *ct = (SwTensorObject *)c;
        const sw_layout *CL = core0(c);
        const float *data =
            sw_py_host_f32_readable(ct->subs[0].carrier, SW_SUB_OFFSET(&ct->subs[0]), CL->cosize);
        if (n > 0 && data && sw_layout_is_flat(CL)) {
            /* float += float straight from host memory */
            data += SW_SUB_OFFSET(&ct->subs[0]);
            for (int64_t k = 0; k < n; k++)
                T->sum[k] += data[k];
            return 0;
        }
    }
    float *vals = PyMem_Malloc(sizeof(float) * ((size_t)n + 1));
    if (!vals)
        return PyErr_NoMemory(), -1;
    if (sw_py_read_float_values(c, vals) < 0) {
        PyMem_Free(vals);
        return -1;
    }
    if (!T->sum) {
        T->sum = vals;
        return 0;
    }
    for (int64_t k = 0; k < n; k++)
        T->sum[k] += vals[k];
    PyMem_Free(vals);
    return 0;
}

/* The gradient buffer for tensor ti holding its pending sum (A-10): the
 * held carrier itself when the buffer would be a plain copy of it into a
 * fresh carrier of the same kind (the sum is then given away), else
 * sw_py_grad_buffer(tensor, vals). */
static PyObject *buffer_of(tinfo *T, const float *vals)
{
    PyObject *target = T->tensor;
    PyObject *tc = ((SwTensorObject *)target)->subs[0].carrier;
    if (T->held && vals == T->sum && Py_IS_TYPE(tc, Py_TYPE(T->held)) &&
        ((SwHostCarrierObject *)tc)->dtype == SW_DT_FLOAT32) {
        PyObject *layout = sw_py_grad_layout(target);
        if (!layout)
            return NULL;
        const sw_layout *G = SwLayout_CORE(layout);
        PyObject *result = NULL;
        if (G->size == G->cosize && G->size == ((SwHostCarrierObject *)T->held)->nslots &&
            sw_layout_is_flat(G)) {
            result = sw_py_tensor_new1(T->held, 0, layout);
            if (result) {
                Py_CLEAR(T->held);
                T->sum = NULL;
            }
            Py_DECREF(layout);
            return result;
        }
        Py_DECREF(layout);
    }
    return sw_py_grad_buffer(target, vals);
}

/* A-12 step 1 for node ni with cotangent c (non-NULL). */
static int run_node(graph *g, Py_ssize_t ni, PyObject *c)
{
    PyObject *node = g->n[ni].node, *inputs = g->n[ni].inputs;
    PyObject *r = NULL, *items = NULL;
    int rc = -1;
    if (((SwOperationObject *)node)->released) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s was already used by a backward pass that released its saved "
                     "state; pass retain_graph=True to backward to traverse the graph "
                     "again",
                     _PyType_Name(Py_TYPE(node)));
        return -1;
    }
    PyObject *ok = PyObject_CallMethodNoArgs(node, str_validate);
    if (!ok)
        return -1;
    Py_DECREF(ok);
    int was = sw_py_grad_enabled();
    sw_py_set_grad_enabled(0);
    r = PyObject_CallMethodOneArg(node, str_backward, c);
    sw_py_set_grad_enabled(was);
    if (!r)
        return -1;
    if (!PyTuple_Check(r) && !PyList_Check(r)) {
        PyErr_Format(PyExc_TypeError, "%s.backward must return a tuple or list, not %.100s",
                     _PyType_Name(Py_TYPE(node)), Py_TYPE(r)->tp_name);
        goto done;
    }
    items = PySequence_Tuple(r);
    if (!items)
        goto done;
    if (PyTuple_GET_SIZE(items) != PyTuple_GET_SIZE(inputs)) {
        PyErr_Format(PyExc_ValueError,
                     "%s.backward returned %zd gradient%s for %zd saved input%s; return "
                     "one gradient (or None) per input",
                     _PyType_Name(Py_TYPE(node)), PyTuple_GET_SIZE(items),
                     sw_py_msg_s(PyTuple_GET_SIZE(items)), PyTuple_GET_SIZE(inputs),
                     sw_py_msg_s(PyTuple_GET_SIZE(inputs)));
        goto done;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(items); i++) {
        PyObject *e = PyTuple_GET_ITEM(items, i), *u = PyTuple_GET_ITEM(inputs, i);
        if (e == Py_None || !counts(u))
            continue;
        if (validate_cotangent(u, e, "gradient returned by backward") < 0)
            goto done;
        PyObject *v = PyDict_GetItemWithError(g->tdict, u);
        if (!v)
            goto done;
        if (accumulate(g, PyLong_AsSsize_t(v), e, items == r ? items : NULL) < 0)
            goto done;
    }
    rc = 0;
done:
    Py_XDECREF(r);
    Py_XDECREF(items);
    return rc;
}

typedef struct {
    Py_ssize_t node;
    PyObject *cot; /* owned or NULL */
} ready_item;

/* A-12: run ready nodes until none is left; scheduled tensor indices go to
 * sched (nsched entries). */
static int propagate(graph *g, PyObject *root_cot, Py_ssize_t *sched, Py_ssize_t *nsched)
{
    ready_item *ready = NULL;
    Py_ssize_t cap = 0, sp = 0;
    int rc = -1;
    if (g->t[0].node < 0)
        return 0;
    if (grow((void **)&ready, &cap, 1, sizeof(ready_item)) < 0)
        return -1;
    ready[sp++] = (ready_item){g->t[0].node, Py_NewRef(root_cot)};
    while (sp > 0) {
        ready_item it = ready[--sp];
        if (it.cot) {
            int r = run_node(g, it.node, it.cot);
            Py_DECREF(it.cot);
            if (r < 0)
                goto done;
        }
        PyObject *inputs = g->n[it.node].inputs;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(inputs); i++) {
            PyObject *u = PyTuple_GET_ITEM(inputs, i);
            if (!counts(u) || !first_occurrence(inputs, i))
                continue;
            PyObject *v = PyDict_GetItemWithError(g->tdict, u);
            if (!v)
                goto done;
            Py_ssize_t ti = PyLong_AsSsize_t(v);
            if (--g->t[ti].edges > 0)
                continue;
            SwTensorObject *ut = (SwTensorObject *)u;
            if (g->t[ti].sum && (g->t[ti].node < 0 || ut->retains_grad))
                sched[(*nsched)++] = ti;
            if (g->t[ti].node < 0)
                continue;
            PyObject *cot = NULL;
            if (g->t[ti].sum) {
                /* a retained sum is committed later: hand over a copy */
                if (ut->retains_grad)
                    cot = sw_py_grad_buffer(u, g->t[ti].sum);
                else
                    cot = buffer_of(&g->t[ti], g->t[ti].sum);
                if (!cot)
                    goto done;
            }
            if (grow((void **)&ready, &cap, sp + 1, sizeof(ready_item)) < 0) {
                Py_XDECREF(cot);
                goto done;
            }
            ready[sp++] = (ready_item){g->t[ti].node, cot};
        }
    }
    rc = 0;
done:
    while (sp > 0)
        Py_XDECREF(ready[--sp].cot);
    PyMem_Free(ready);
    return rc;
}

/* ---- commit ---------------------------------------------------------------------- */

/* A-14: the total as a contribution in logical order (n floats): total
 * itself when T's layout is injective, else a fresh buffer (*owned). */
static const float *contribution(PyObject *T, const float *total, float **owned)
{
    const sw_layout *L = core0(T);
    *owned = NULL;
    int inj = injective(L);
    if (inj < 0)
        return NULL;
    if (inj)
        return total;
    float *out = PyMem_Malloc(sizeof(float) * ((size_t)L->size + 1));
    sw_error err;
    if (!out)
        return PyErr_NoMemory(), NULL;
    if (sw_layout_fold_f32(L, total, out, &err) != SW_OK) {
        PyMem_Free(out);
        sw_py_raise(&err);
        return NULL;
    }
    *owned = out;
    return out;
}

static int check_existing_grad(PyObject *T)
{
    PyObject *g = ((SwTensorObject *)T)->grad;
    if (g == Py_None)
        return 0;
    if (((SwTensorObject *)g)->nsub != 1) {
        PyErr_Format(PyExc_NotImplementedError,
                     "the existing .grad has %zd planes and cannot accumulate a gradient; set "
                     ".grad to None or to a Float32 tensor on one carrier first",
                     ((SwTensorObject *)g)->nsub);
        return -1;
    }
    if (!sw_layout_same_shape(core0(g), core0(T))) {
        PyErr_Format(PyExc_ValueError,
                     "existing .grad has layout %R, whose shape differs from the Tensor's %R",
                     ((SwTensorObject *)g)->subs[0].layout,
                     ((SwTensorObject *)T)->subs[0].layout);
        return -1;
    }
    if (carrier_released(g)) {
        PyErr_SetString(PyExc_RuntimeError,
                        "existing .grad lives on a released carrier and cannot accumulate");
        return -1;
    }
    int m = sw_py_carrier_is_mutable(((SwTensorObject *)g)->subs[0].carrier);
    if (m < 0)
        return -1;
    if (!m) {
        PyErr_SetString(PyExc_RuntimeError,
                        "existing .grad is not mutable and cannot accumulate");
        return -1;
    }
    return 0;
}

/* old + vals[k] as a binary64: float(old) rounded to Float32, plus the
 * contribution (`user`: the contributions). */
static void add_contribution(void *user, int64_t k, void *value)
{
    double d;
    memcpy(&d, value, sizeof d);
    d = (double)((float)d + ((const float *)user)[k]);
    memcpy(value, &d, sizeof d);
}

/* grad += vals, slot by slot. On an exact CPU/Generic Float32 carrier the
 * memory is written directly and the version advances once (one public
 * mutation); otherwise by the core's slot copy of the carrier onto itself
 * (read k, add, write k: a layout repeating a slot accumulates into it). */
static int add_in_place(PyObject *grad, const float *vals)
{
    SwTensorObject *g = (SwTensorObject *)grad;
    const sw_layout *L = core0(grad);
    PyObject *carrier = g->subs[0].carrier;
    int64_t off = SW_SUB_OFFSET(&g->subs[0]);
    if (L->size == 0)
        return 0;
    float *data = sw_py_host_f32_writable(carrier, off, L->cosize);
    if (data) {
        sw_error err;
        if (sw_layout_add_f32(data, off, L, vals, &err) != SW_OK)
            return sw_py_raise(&err);
        if (!sw_py_carrier_in_transfer(carrier))
            sw_py_state_bump_version(carrier);
        return 0;
    }
    return sw_py_carrier_copy_layout(carrier, off, carrier, off, L, SW_DT_FLOAT64,
                                     add_contribution, (void *)vals);
}

static int commit(graph *g, const Py_ssize_t *sched, Py_ssize_t nsched)
{
    for (Py_ssize_t i = 0; i < nsched; i++)
        if (check_existing_grad(g->t[sched[i]].tensor) < 0)
            return -1;
    for (Py_ssize_t i = 0; i < nsched; i++) {
        PyObject *T = g->t[sched[i]].tensor;
        float *owned;
        const float *vals = contribution(T, g->t[sched[i]].sum, &owned);
        if (!vals)
            return -1;
        SwTensorObject *t = (SwTensorObject *)T;
        int rc = 0;
        if (t->grad == Py_None) {
            PyObject *fresh = buffer_of(&g->t[sched[i]], vals);
            if (fresh) {
                Py_SETREF(t->grad, fresh);
                sw_py_tensor_track(T);
            } else
                rc = -1;
        } else {
            PyObject *grad = Py_NewRef(t->grad);
            rc = add_in_place(grad, vals);
            Py_DECREF(grad);
        }
        PyMem_Free(owned);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* ---- Tensor.backward -------------------------------------------------------------- */

static int parse_backward(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                          PyObject **gradient, PyObject **retain)
{
    *gradient = Py_None;
    *retain = Py_False;
    if (nargs > 2) {
        PyErr_Format(PyExc_TypeError,
                     "backward() takes at most 2 arguments (%zd given)", nargs);
        return -1;
    }
    if (nargs > 0)
        *gradient = args[0];
    if (nargs > 1)
        *retain = args[1];
    Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nk; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        PyObject **slot;
        Py_ssize_t pos;
        if (PyUnicode_CompareWithASCIIString(name, "gradient") == 0) {
            slot = gradient;
            pos = 0;
        } else if (PyUnicode_CompareWithASCIIString(name, "retain_graph") == 0) {
            slot = retain;
            pos = 1;
        } else {
            PyErr_Format(PyExc_TypeError,
                         "backward() got an unexpected keyword argument '%U'", name);
            return -1;
        }
        if (nargs > pos) {
            PyErr_Format(PyExc_TypeError,
                         "backward() got multiple values for argument '%U'", name);
            return -1;
        }
        *slot = args[nargs + i];
    }
    return 0;
}

static void release_node(PyObject *node)
{
    SwOperationObject *o = (SwOperationObject *)node;
    sw_py_operation_clear_saved(node);
    if (o->ctx)
        PyDict_Clear(o->ctx);
    o->released = 1;
}

PyObject *sw_py_tensor_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames)
{
    PyObject *gradient, *retain, *cot = NULL, *ret = NULL;
    graph g = {0};
    Py_ssize_t *sched = NULL, nsched = 0;
    SwTensorObject *t = (SwTensorObject *)self;

    if (parse_backward(args, nargs, kwnames, &gradient, &retain) < 0)
        return NULL;
    if (t->nsub != 1) {
        sw_py_msg_raise_planes(t->dtype, t->nsub, "differentiated",
                               "Float32 tensors on one carrier");
        return NULL;
    }
    if (!is_float32(self)) {
        PyErr_Format(PyExc_RuntimeError,
                     "backward: this Tensor is non-differentiable (dtype %R); only Float32 "
                     "Tensors take part in autograd", t->dtype);
        return NULL;
    }
    if (!PyBool_Check(retain)) {
        PyErr_Format(PyExc_TypeError, "backward: retain_graph must be a bool, not %.100s",
                     Py_TYPE(retain)->tp_name);
        return NULL;
    }
    if (gradient == Py_None) {
        const sw_layout *L = core0(self);
        if (L->rank != 1 || L->nleaves != 1 || L->profile[0] != SW_NODE_LEAF ||
            L->extents[0] != 1) {
            PyErr_Format(PyExc_ValueError,
                         "backward: gradient may be omitted only for a one-element Tensor "
                         "with layout Layout(Shape(1), Stride(s)), not %R; pass gradient",
                         t->subs[0].layout);
            return NULL;
        }
        PyObject *one = Py_BuildValue("[d]", 1.0);
        if (!one)
            return NULL;
        PyObject *carrier = PyObject_CallMethodOneArg(t->subs[0].carrier, str_new_like, one);
        Py_DECREF(one);
        if (!carrier)
            return NULL;
        cot = sw_py_tensor_new1(carrier, 0, t->subs[0].layout);
        Py_DECREF(carrier);
        if (!cot)
            return NULL;
    } else {
        if (validate_cotangent(self, gradient, "backward: gradient") < 0)
            return NULL;
        cot = Py_NewRef(gradient);
    }

    int added;
    g.tdict = PyDict_New();
    g.ndict = PyDict_New();
    if (!g.tdict || !g.ndict || add_tensor(&g, self, &added) < 0)
        goto done;
    if (accumulate(&g, 0, cot, NULL) < 0 || discover(&g) < 0)
        goto done;
    sched = PyMem_Malloc(sizeof(Py_ssize_t) * ((size_t)g.nt + 1));
    if (!sched) {
        PyErr_NoMemory();
        goto done;
    }
    if (g.t[0].node < 0 || t->retains_grad)
        sched[nsched++] = 0;
    if (propagate(&g, cot, sched, &nsched) < 0)
        goto done;
    if (commit(&g, sched, nsched) < 0)
        goto done;
    if (retain == Py_False)
        for (Py_ssize_t i = 0; i < g.nn; i++)
            release_node(g.n[i].node);
    ret = Py_NewRef(Py_None);
done:
    Py_XDECREF(cot);
    PyMem_Free(sched);
    graph_free(&g);
    return ret;
}

PyObject *sw_py_tensor_retain_grad(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                   PyObject *kwnames)
{
    PyObject *retain = Py_True;
    SwTensorObject *t = (SwTensorObject *)self;
    Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs + nk > 1) {
        PyErr_SetString(PyExc_TypeError, "retain_grad() takes at most 1 argument");
        return NULL;
    }
    if (nargs == 1)
        retain = args[0];
    if (nk == 1) {
        if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "retain") != 0) {
            PyErr_Format(PyExc_TypeError,
                         "retain_grad() got an unexpected keyword argument '%U'",
                         PyTuple_GET_ITEM(kwnames, 0));
            return NULL;
        }
        retain = args[0];
    }
    if (!is_float32(self)) {
        PyErr_Format(PyExc_RuntimeError,
                     "retain_grad: this Tensor is non-differentiable (dtype %R); only "
                     "Float32 Tensors take part in autograd", t->dtype);
        return NULL;
    }
    if (!PyBool_Check(retain)) {
        PyErr_Format(PyExc_TypeError, "retain_grad: retain must be a bool, not %.100s",
                     Py_TYPE(retain)->tp_name);
        return NULL;
    }
    t->retains_grad = retain == Py_True;
    Py_RETURN_NONE;
}

int sw_py_autograd_init(PyObject *module)
{
    (void)module;
    str_backward = PyUnicode_InternFromString("backward");
    str_validate = PyUnicode_InternFromString("validate_input_versions");
    str_new_like = PyUnicode_InternFromString("new_like");
    if (!str_backward || !str_validate || !str_new_like)
        return -1;
    return 0;
}
