/* The minimal differentiable operations (contract F-0..F-3): add,
 * elementwise_mul and reduce_sum, each an Operation subtype dispatched by the
 * built-in carriers (Carrier.dispatch_op, which this file supplies).
 *
 * Values are read by logical ordinal (first leaf fastest) straight from host
 * memory for live CPU/Generic carriers, through the carrier's checked slot
 * read otherwise, and computed in C: Int32 exactly in 64 bits, Float32 in
 * double and rounded once to binary32 (a sum or product of two binary32
 * values is exact in double, so the rounding is correct). Results and
 * gradients get fresh storage from the operand's carrier.new_like(...). */
#include "sw_carrier.h"
#include "sw_extension.h"
#include "sw_messages.h"
#include "sw_host_slots.h"

#include "strideweave/copy.h"
#include "strideweave/tensor_ops.h"

#include <string.h>

_Static_assert(sizeof(double) == sizeof(int64_t), "reduce_sum reuses its sums buffer");

static PyObject *str_new_like, *str_dtype_kw, *str_dispatch_op, *str_forward_m,
    *str_kept, *str_result_layout;

/* ---- reading and writing values ------------------------------------------ */

static int is_dtype(PyObject *tensor, sw_dtype id)
{
    return ((SwTensorObject *)tensor)->dtype == sw_py_dtype(id);
}

static const sw_layout *core_of(PyObject *tensor)
{
    return SW_SUB_LAYOUT(&((SwTensorObject *)tensor)->subs[0]);
}

static int exact_host(PyObject *carrier)
{
    return Py_TYPE(carrier) == &SwCPU_Type || Py_TYPE(carrier) == &SwGeneric_Type;
}

/* Whether the core reads the tensor's values itself (tensor_ops.h): an
 * exact built-in carrier whose slots it holds, of the tensor's dtype. A
 * refusal of the core's is then re-raised by the checked slot reads, in
 * the binding's words. */
static int core_reads(PyObject *tensor)
{
    SwTensorObject *t = (SwTensorObject *)tensor;
    PyObject *c = t->subs[0].carrier;
    return (exact_host(c) || Py_TYPE(c) == &SwFileBacked_Type) &&
           t->dtype == sw_py_dtype(sw_tensor_dtype(t->subs[0].core));
}

static const sw_tensor *plane_of(PyObject *tensor)
{
    return ((SwTensorObject *)tensor)->subs[0].core;
}

/* n Float32 or Int32 values (4 bytes each, at the front of `out`) widened
 * in place to the doubles `out` holds: from the last one down, so each
 * is read before a double overwrites it. */
static void widen(double *out, sw_dtype dt, int64_t n)
{
    const float *f = (const float *)out;
    const int32_t *i = (const int32_t *)out;
    for (int64_t k = n - 1; k >= 0; k--)
        out[k] = dt == SW_DT_FLOAT32 ? (double)f[k] : (double)i[k];
}

/* The tensor's values in logical order as doubles (Float32 and Int32 are
 * exact in double). out has size() entries. 0 / -1. */
static int read_values(PyObject *tensor, double *out)
{
    SwTensorObject *t = (SwTensorObject *)tensor;
    const sw_layout *L = SW_SUB_LAYOUT(&t->subs[0]);
    PyObject *carrier = t->subs[0].carrier;
    sw_error err;
    if (core_reads(tensor) && sw_tensor_read_values(t->subs[0].core, out, &err) == SW_OK) {
        widen(out, sw_tensor_dtype(t->subs[0].core), L->size);
        return 0;
    }
    /* float(value) of each slot's checked read, hooks and all */
    return sw_py_carrier_read_layout(carrier, SW_SUB_OFFSET(&t->subs[0]), L, SW_DT_FLOAT64,
                                     out);
}

/* Values of a tensor as a freshly allocated array (PyMem), or NULL. */
static double *values_of(PyObject *tensor)
{
    int64_t n = core_of(tensor)->size;
    double *v = PyMem_Malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (!v) {
        PyErr_NoMemory();
        return NULL;
    }
    if (read_values(tensor, v) < 0) {
        PyMem_Free(v);
        return NULL;
    }
    return v;
}

/* carrier.new_like(slots, dtype=dtype) for n slot values. Int32 slots are
 * exact integers; Float32 slots are rounded to binary32 here. */
static PyObject *new_storage(PyObject *carrier, sw_dtype dtype, const double *slots,
                             int64_t n)
{
    if (Py_TYPE(carrier) == &SwCPU_Type || Py_TYPE(carrier) == &SwGeneric_Type) {
        /* What their new_like builds, written directly. */
        PyObject *c = sw_py_host_new(Py_TYPE(carrier), dtype, n, 1, 0);
        if (!c)
            return NULL;
        void *data = ((SwHostCarrierObject *)c)->data;
        for (int64_t i = 0; i < n; i++) {
            if (dtype == SW_DT_INT32)
                ((int32_t *)data)[i] = (int32_t)slots[i];
            else
                ((float *)data)[i] = (float)slots[i];
        }
        return c;
    }
    PyObject *list = PyList_New((Py_ssize_t)n);
    if (!list)
        return NULL;
    for (int64_t i = 0; i < n; i++) {
        PyObject *v = dtype == SW_DT_INT32 ? PyLong_FromLongLong((long long)slots[i])
                                           : PyFloat_FromDouble((double)(float)slots[i]);
        if (!v) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, v);
    }
    PyObject *args[3] = {carrier, list, sw_py_dtype(dtype)};
    PyObject *kw = PyTuple_Pack(1, str_dtype_kw);
    PyObject *result = kw ? PyObject_VectorcallMethod(str_new_like, args,
                                                      2 | PY_VECTORCALL_ARGUMENTS_OFFSET, kw)
                          : NULL;
    Py_XDECREF(kw);
    Py_DECREF(list);
    return result;
}

/* Tensor(carrier.new_like(...), 0, layout) holding `vals` (logical order)
 * placed through `layout`, an injective Layout object; unaddressed slots 0. */
static PyObject *tensor_from_values(PyObject *carrier, sw_dtype dtype, PyObject *layout,
                                    const double *vals)
{
    const sw_layout *L = SwLayout_CORE(layout);
    int64_t n = L->cosize;
    PyObject *storage = NULL, *result = NULL;
    double *slots = NULL;
    void *typed = NULL;
    sw_error err;
    if (exact_host(carrier)) {
        /* What their new_like builds, written directly. */
        typed = PyMem_Malloc(4 * (size_t)(L->size ? L->size : 1));
        if (!typed) {
            PyErr_NoMemory();
            goto done;
        }
        for (int64_t k = 0; k < L->size; k++) {
            if (dtype == SW_DT_INT32)
                ((int32_t *)typed)[k] = (int32_t)vals[k];
            else
                ((float *)typed)[k] = (float)vals[k];
        }
        storage = sw_py_host_new(Py_TYPE(carrier), dtype, n, 1, 1);
        if (storage && sw_layout_scatter(((SwHostCarrierObject *)storage)->data, 0, L, typed,
                                         4, &err) != SW_OK) {
            sw_py_raise(&err);
            Py_CLEAR(storage);
        }
    } else {
        slots = PyMem_Calloc((size_t)(n ? n : 1), sizeof(double));
        if (!slots) {
            PyErr_NoMemory();
            goto done;
        }
        if (sw_layout_scatter(slots, 0, L, vals, sizeof(double), &err) != SW_OK)
            sw_py_raise(&err);
        else
            storage = new_storage(carrier, dtype, slots, n);
    }
    if (storage)
        result = sw_py_tensor_new1(storage, 0, layout);
done:
    PyMem_Free(typed);
    PyMem_Free(slots);
    Py_XDECREF(storage);
    return result;
}

/* ---- Float32 fast paths on exact CPU/Generic carriers ------------------------- */

/* The Float32 values of a Float32 tensor on an exact host carrier, in
 * logical order: its memory when the layout is flat, else a copy (*owned).
 * 1 done, 0 not eligible (use the general path), -1 error. */
static int f32_values(PyObject *tensor, const float **vals, float **owned)
{
    SwTensorObject *t = (SwTensorObject *)tensor;
    const sw_layout *L = SW_SUB_LAYOUT(&t->subs[0]);
    int64_t off = SW_SUB_OFFSET(&t->subs[0]);
    *owned = NULL;
    if (!is_dtype(tensor, SW_DT_FLOAT32))
        return 0;
    const float *data = sw_py_host_f32_readable(t->subs[0].carrier, off, L->size ? L->cosize : 0);
    if (!data)
        return 0;
    if (sw_layout_is_flat(L)) {
        *vals = data + off;
        return 1;
    }
    float *buf = PyMem_Malloc(sizeof(float) * (size_t)(L->size + 1));
    sw_error err;
    if (!buf) {
        PyErr_NoMemory();
        return -1;
    }
    if (sw_tensor_read_values(t->subs[0].core, buf, &err) != SW_OK) {
        PyMem_Free(buf);
        return sw_py_raise(&err);
    }
    *vals = *owned = buf;
    return 1;
}

/* A Float32 result in fresh storage of `type` (CPU or Generic) laid out by
 * `layout` (injective): open, write size() values in logical order at
 * s.out, close. Unaddressed slots hold 0. */
typedef struct {
    PyObject *layout, *storage;
    float *out, *scratch;
} f32_sink;

static int sink_open(f32_sink *s, PyTypeObject *type, PyObject *layout)
{
    const sw_layout *L = SwLayout_CORE(layout);
    int flat = sw_layout_is_flat(L) && (L->size == 0 || L->cosize == L->size);
    s->layout = layout;
    s->scratch = NULL;
    s->storage = sw_py_host_new(type, SW_DT_FLOAT32, L->cosize, 1, !flat);
    if (!s->storage)
        return -1;
    if (flat) {
        s->out = ((SwHostCarrierObject *)s->storage)->data;
        return 0;
    }
    s->out = s->scratch = PyMem_Malloc(sizeof(float) * (size_t)(L->size + 1));
    if (!s->scratch) {
        Py_CLEAR(s->storage);
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* The result Tensor (NULL on error; ok = 0 discards). */
static PyObject *sink_close(f32_sink *s, int ok)
{
    PyObject *result = NULL;
    if (ok && s->scratch) {
        sw_error err;
        if (sw_layout_scatter(((SwHostCarrierObject *)s->storage)->data, 0,
                              SwLayout_CORE(s->layout), s->scratch, sizeof(float),
                              &err) != SW_OK)
            ok = sw_py_raise(&err) == 0;
    }
    if (ok)
        result = sw_py_tensor_new1(s->storage, 0, s->layout);
    PyMem_Free(s->scratch);
    Py_CLEAR(s->storage);
    return result;
}

/* Canonical injective layout of L's shape, as a Layout object. */
static PyObject *canonical_of(const sw_layout *L)
{
    sw_error err;
    sw_layout *c = sw_layout_canonical(L->nprofile, L->profile, L->extents, &err);
    if (!c) {
        sw_py_raise(&err);
        return NULL;
    }
    return sw_py_layout_wrap(c);
}

/* A gradient for `target` holding `vals` (logical order): its layout when
 * injective, else the canonical layout of its shape; Float32 storage from
 * target.carrier.new_like (which works on a released carrier). */
static PyObject *make_gradient(PyObject *target, const double *vals)
{
    SwTensorObject *t = (SwTensorObject *)target;
    sw_layout *L = SwLayout_CORE(t->subs[0].layout);
    sw_error err;
    int inj = sw_layout_is_injective(L, &err);
    if (inj < 0) {
        sw_py_raise(&err);
        return NULL;
    }
    PyObject *layout = inj ? Py_NewRef(t->subs[0].layout) : canonical_of(L);
    if (!layout)
        return NULL;
    PyObject *g = tensor_from_values(t->subs[0].carrier, SW_DT_FLOAT32, layout, vals);
    Py_DECREF(layout);
    return g;
}

/* ---- shared checks ---------------------------------------------------------- */

static int require_tensor(PyObject *obj, const char *what)
{
    if (SwTensor_Check(obj))
        return 0;
    PyErr_Format(PyExc_TypeError, "%s must be a Tensor, not %.100s", what,
                 Py_TYPE(obj)->tp_name);
    return -1;
}

static PyObject *carrier_of(PyObject *tensor)
{
    return ((SwTensorObject *)tensor)->subs[0].carrier;
}

static int require_one_subtensor(PyObject *tensor, const char *fn, const char *what)
{
    if (((SwTensorObject *)tensor)->nsub == 1)
        return 0;
    char why[160];
    snprintf(why, sizeof why, "passed to %s as %s", fn, what);
    return sw_py_msg_raise_planes(((SwTensorObject *)tensor)->dtype,
                                  ((SwTensorObject *)tensor)->nsub, why, SW_MSG_ONE_PLANE);
}

/* The operand's carrier class must be the one that dispatched this
 * operation, or a built-in one when it was constructed directly. */
static int require_carrier_class(PyObject *self, PyObject *tensor, const char *fn)
{
    PyObject *cls = (PyObject *)Py_TYPE(carrier_of(tensor));
    PyObject *dispatch = ((SwOperationObject *)self)->dispatch_carrier_class;
    if (dispatch) {
        if (cls == dispatch)
            return 0;
        PyErr_Format(PyExc_TypeError,
                     "%s was dispatched for %s carriers and cannot run on a %s carrier", fn,
                     _PyType_Name((PyTypeObject *)dispatch), _PyType_Name((PyTypeObject *)cls));
        return -1;
    }
    if (cls == (PyObject *)&SwCPU_Type || cls == (PyObject *)&SwGeneric_Type ||
        cls == (PyObject *)&SwFileBacked_Type)
        return 0;
    PyErr_Format(PyExc_NotImplementedError, "%s is not implemented for %s carriers", fn,
                 _PyType_Name((PyTypeObject *)cls));
    return -1;
}

static int require_live(PyObject *tensor, const char *fn, const char *what)
{
    if (!sw_py_state_released(carrier_of(tensor)))
        return 0;
    PyErr_Format(PyExc_RuntimeError, "%s: the carrier of %s is released", fn, what);
    return -1;
}

static int require_numeric(PyObject *tensor, const char *fn, const char *what)
{
    if (is_dtype(tensor, SW_DT_FLOAT32) || is_dtype(tensor, SW_DT_INT32))
        return 0;
    PyErr_Format(PyExc_TypeError, "%s supports Float32 and Int32 tensors; %s is %R", fn,
                 what, ((SwTensorObject *)tensor)->dtype);
    return -1;
}

static int check_int32(double v, const char *fn)
{
    if (v >= -2147483648.0 && v <= 2147483647.0)
        return 0;
    /* as the core words it (tensor_ops.h); PyErr_Format has no %f */
    PyErr_Format(PyExc_OverflowError, "%s: Int32 result %lld is out of range", fn,
                 (long long)v);
    return -1;
}

/* The cotangent of a backward call: a live one-subtensor Tensor. */
static int check_cotangent(PyObject *g, const char *fn)
{
    if (!SwTensor_Check(g)) {
        PyErr_Format(PyExc_TypeError, "%s.backward: gradient must be a Tensor, not %.100s",
                     fn, Py_TYPE(g)->tp_name);
        return -1;
    }
    if (require_one_subtensor(g, fn, "the gradient") < 0)
        return -1;
    if (sw_py_state_released(carrier_of(g))) {
        PyErr_Format(PyExc_RuntimeError, "%s.backward: the gradient's carrier is released",
                     fn);
        return -1;
    }
    return 0;
}

/* The saved inputs, requiring exactly n of them (new reference). */
static PyObject *saved_inputs(PyObject *self, Py_ssize_t n, const char *fn)
{
    PyObject *saved = ((SwOperationObject *)self)->saved;
    if (!saved || PyTuple_GET_SIZE(saved) != n) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s.backward: the operation holds no saved inputs (it was not "
                     "recorded, or its graph was released)", fn);
        return NULL;
    }
    return Py_NewRef(saved);
}

/* ---- add and elementwise_mul -------------------------------------------------- */

/* lhs op rhs computed by the core (tensor_ops.h: Int32 exactly, anything
 * else in binary32, one rounding per element, as in double) into fresh
 * storage of an exact host carrier class, compactly laid out. 1 with
 * *result, 0 not eligible or refused by the core (the general path raises
 * it in the binding's words), -1 error. */
static int binary_forward_core(PyObject *lhs, PyObject *rhs, int mul, const char *fn,
                               PyObject **result)
{
    if (!exact_host(carrier_of(lhs)) || !core_reads(lhs) || !core_reads(rhs))
        return 0;
    const sw_layout *A = core_of(lhs);
    sw_dtype dt = sw_binary_result_dtype(sw_tensor_dtype(plane_of(lhs)),
                                         sw_tensor_dtype(plane_of(rhs)));
    PyObject *storage = sw_py_host_new(Py_TYPE(carrier_of(lhs)), dt, A->size, 1, 0);
    if (!storage)
        return -1;
    sw_error err;
    sw_status st = sw_tensor_binary_values(mul ? SW_BINARY_MUL : SW_BINARY_ADD, plane_of(lhs),
                                           plane_of(rhs), ((SwHostCarrierObject *)storage)->data,
                                           &err);
    int rc = 0;
    if (st == SW_EOVERFLOW) {
        PyErr_Format(PyExc_OverflowError, "%s: %s", fn, err.msg);
        rc = -1;
    } else if (st == SW_OK) {
        PyObject *layout = canonical_of(A);
        *result = layout ? sw_py_tensor_new1(storage, 0, layout) : NULL;
        Py_XDECREF(layout);
        rc = *result ? 1 : -1;
    }
    Py_DECREF(storage);
    return rc;
}

/* The Float32 gradient for `target` (its layout when injective, else the
 * canonical one) as g * other (mul) or g, on an exact host carrier class.
 * 1 with *grad, 0 not eligible, -1 error. */
static int binary_grad_f32(PyObject *target, const float *g, PyObject *other, int mul,
                           PyObject **grad)
{
    const float *o = NULL;
    float *oo = NULL;
    int rc;
    if (!exact_host(carrier_of(target)))
        return 0;
    if (mul && (rc = f32_values(other, &o, &oo)) <= 0)
        return rc;
    PyObject *layout = sw_py_grad_layout(target);
    f32_sink sink;
    rc = -1;
    if (layout && sink_open(&sink, Py_TYPE(carrier_of(target)), layout) == 0) {
        int64_t n = SwLayout_CORE(layout)->size;
        float *out = sink.out;
        if (mul)
            for (int64_t k = 0; k < n; k++)
                out[k] = g[k] * o[k];
        else
            memcpy(out, g, sizeof(float) * (size_t)n);
        *grad = sink_close(&sink, 1);
        rc = *grad ? 1 : -1;
    }
    Py_XDECREF(layout);
    PyMem_Free(oo);
    return rc;
}

static PyObject *binary_forward(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                int mul)
{
    const char *fn = mul ? "elementwise_mul" : "add";
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "%s takes exactly 2 inputs (lhs, rhs), %zd given", fn,
                     nargs);
        return NULL;
    }
    PyObject *lhs = args[0], *rhs = args[1];
    if (require_tensor(lhs, "lhs") < 0 || require_tensor(rhs, "rhs") < 0 ||
        require_one_subtensor(lhs, fn, "lhs") < 0 || require_one_subtensor(rhs, fn, "rhs") < 0)
        return NULL;
    if (Py_TYPE(carrier_of(lhs)) != Py_TYPE(carrier_of(rhs))) {
        PyErr_Format(PyExc_TypeError,
                     "%s needs lhs and rhs on the same carrier class, not %s and %s", fn,
                     Py_TYPE(carrier_of(lhs))->tp_name, Py_TYPE(carrier_of(rhs))->tp_name);
        return NULL;
    }
    if (require_carrier_class(self, lhs, fn) < 0 || require_live(lhs, fn, "lhs") < 0 ||
        require_live(rhs, fn, "rhs") < 0)
        return NULL;
    const sw_layout *A = core_of(lhs), *B = core_of(rhs);
    if (!sw_layout_same_shape(A, B)) {
        PyErr_Format(PyExc_ValueError,
                     "%s needs lhs and rhs of the same shape, not %R and %R (use "
                     "broadcast_to first)",
                     fn, ((SwTensorObject *)lhs)->subs[0].layout,
                     ((SwTensorObject *)rhs)->subs[0].layout);
        return NULL;
    }
    if (require_numeric(lhs, fn, "lhs") < 0 || require_numeric(rhs, fn, "rhs") < 0)
        return NULL;
    PyObject *fast = NULL;
    int f = binary_forward_core(lhs, rhs, mul, fn, &fast);
    if (f != 0)
        return f > 0 ? fast : NULL;
    int int_result = is_dtype(lhs, SW_DT_INT32) && is_dtype(rhs, SW_DT_INT32);
    int lhs_int = is_dtype(lhs, SW_DT_INT32), rhs_int = is_dtype(rhs, SW_DT_INT32);
    double *a = values_of(lhs), *b = a ? values_of(rhs) : NULL;
    PyObject *layout = NULL, *result = NULL;
    if (!b)
        goto done;
    for (int64_t k = 0; k < A->size; k++) {
        if (int_result) {
            int64_t x = (int64_t)a[k], y = (int64_t)b[k];
            a[k] = (double)(mul ? x * y : x + y);
            if (check_int32(a[k], fn) < 0)
                goto done;
        } else {
            /* Int32 operands become binary32 first. */
            double x = lhs_int ? (double)(float)a[k] : a[k];
            double y = rhs_int ? (double)(float)b[k] : b[k];
            a[k] = (double)(float)(mul ? x * y : x + y);
        }
    }
    layout = canonical_of(A);
    if (layout)
        result = tensor_from_values(carrier_of(lhs), int_result ? SW_DT_INT32 : SW_DT_FLOAT32,
                                    layout, a);
done:
    PyMem_Free(a);
    PyMem_Free(b);
    Py_XDECREF(layout);
    return result;
}

static PyObject *binary_backward(PyObject *self, PyObject *g, int mul)
{
    const char *fn = mul ? "elementwise_mul" : "add";
    if (check_cotangent(g, fn) < 0)
        return NULL;
    PyObject *saved = saved_inputs(self, 2, fn);
    if (!saved)
        return NULL;
    PyObject *in[2] = {PyTuple_GET_ITEM(saved, 0), PyTuple_GET_ITEM(saved, 1)};
    PyObject *out = NULL, *grads[2] = {NULL, NULL};
    double *gv = NULL, *other = NULL, *vals = NULL;
    if (!sw_layout_same_shape(core_of(g), core_of(in[0]))) {
        PyErr_Format(PyExc_ValueError,
                     "%s.backward: gradient layout %R does not have the result's shape", fn,
                     ((SwTensorObject *)g)->subs[0].layout);
        goto done;
    }
    int64_t n = core_of(g)->size;
    {
        /* Float32 fast path: each operand either takes it or the general
         * path below (which then computes that operand's gradient). */
        const float *gf;
        float *gown = NULL;
        int f = f32_values(g, &gf, &gown);
        if (f < 0)
            goto done;
        for (int i = 0; f > 0 && i < 2; i++) {
            if (!is_dtype(in[i], SW_DT_FLOAT32)) {
                grads[i] = Py_NewRef(Py_None);
                continue;
            }
            if (binary_grad_f32(in[i], gf, in[1 - i], mul, &grads[i]) < 0) {
                PyMem_Free(gown);
                goto done;
            }
        }
        PyMem_Free(gown);
        if (grads[0] && grads[1]) {
            out = PyTuple_Pack(2, grads[0], grads[1]);
            goto done;
        }
    }
    if (!(gv = values_of(g)))
        goto done;
    for (int i = 0; i < 2; i++) {
        if (grads[i])
            continue;
        if (!is_dtype(in[i], SW_DT_FLOAT32)) {
            grads[i] = Py_NewRef(Py_None);
            continue;
        }
        const double *src = gv;
        if (mul) {
            PyMem_Free(other);
            PyMem_Free(vals);
            other = NULL;
            if (!(other = values_of(in[1 - i])))
                goto done;
            vals = PyMem_Malloc(sizeof(double) * (size_t)(n ? n : 1));
            if (!vals) {
                PyErr_NoMemory();
                goto done;
            }
            for (int64_t k = 0; k < n; k++)
                vals[k] = (double)(float)(gv[k] * (double)(float)other[k]);
            src = vals;
        }
        if (!(grads[i] = make_gradient(in[i], src)))
            goto done;
    }
    out = PyTuple_Pack(2, grads[0], grads[1]);
done:
    Py_XDECREF(grads[0]);
    Py_XDECREF(grads[1]);
    PyMem_Free(gv);
    PyMem_Free(other);
    PyMem_Free(vals);
    Py_DECREF(saved);
    return out;
}

static PyObject *add_forward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return binary_forward(self, args, nargs, 0);
}

static PyObject *mul_forward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return binary_forward(self, args, nargs, 1);
}

static PyObject *add_backward(PyObject *self, PyObject *g)
{
    return binary_backward(self, g, 0);
}

static PyObject *mul_backward(PyObject *self, PyObject *g)
{
    return binary_backward(self, g, 1);
}

/* ---- reduce_sum ------------------------------------------------------------------ */

/* Parse "L -> R" against a tensor of `rank` top-level modes into the kept
 * mode indices (new tuple of ints, () for "1"). ValueError on bad grammar. */
static PyObject *parse_description(PyObject *description, int32_t rank)
{
    PyObject *tokens = PyUnicode_Split(description, NULL, -1);
    PyObject *kept = NULL, *arrow = NULL, *lhs = NULL;
    if (!tokens)
        return NULL;
    arrow = PyUnicode_FromString("->");
    if (!arrow)
        goto done;
    Py_ssize_t n = PyList_GET_SIZE(tokens), at = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        int eq = PyUnicode_Compare(PyList_GET_ITEM(tokens, i), arrow);
        if (eq == 0) {
            if (at >= 0)
                goto bad;
            at = i;
        }
    }
    if (at < 0 || at == n - 1)
        goto bad;
    lhs = PyList_GetSlice(tokens, 0, at);
    if (!lhs)
        goto done;
    for (Py_ssize_t i = 0; i < at; i++) {
        PyObject *tok = PyList_GET_ITEM(lhs, i);
        if (!PyUnicode_IsIdentifier(tok))
            goto bad;
        for (Py_ssize_t j = 0; j < i; j++)
            if (PyUnicode_Compare(tok, PyList_GET_ITEM(lhs, j)) == 0)
                goto bad;
    }
    if (at != rank) {
        PyErr_Format(PyExc_ValueError,
                     "reduce_sum: description %R names %zd input mode%s, but the tensor has %d "
                     "top-level mode%s",
                     description, at, sw_py_msg_s(at), (int)rank, sw_py_msg_s(rank));
        goto done;
    }
    Py_ssize_t nr = n - at - 1;
    if (nr == 1 && PyUnicode_CompareWithASCIIString(PyList_GET_ITEM(tokens, at + 1), "1") == 0) {
        kept = PyTuple_New(0);
        goto done;
    }
    kept = PyTuple_New(nr);
    if (!kept)
        goto done;
    for (Py_ssize_t j = 0; j < nr; j++) {
        PyObject *tok = PyList_GET_ITEM(tokens, at + 1 + j);
        Py_ssize_t found = -1;
        for (Py_ssize_t i = 0; i < at; i++)
            if (PyUnicode_Compare(tok, PyList_GET_ITEM(lhs, i)) == 0)
                found = i;
        for (Py_ssize_t i = 0; i < j; i++)
            if (PyUnicode_Compare(tok, PyList_GET_ITEM(tokens, at + 1 + i)) == 0)
                found = -1;
        if (found < 0) {
            Py_CLEAR(kept);
            goto bad;
        }
        PyObject *v = PyLong_FromSsize_t(found);
        if (!v) {
            Py_CLEAR(kept);
            goto done;
        }
        PyTuple_SET_ITEM(kept, j, v);
    }
    goto done;
bad:
    PyErr_Format(PyExc_ValueError,
                 "reduce_sum: description %R must read \"L -> R\": distinct identifiers for "
                 "the input modes, one '->', then '1' or distinct identifiers from L, e.g. "
                 "\"a b -> a\" or \"a b -> 1\"",
                 description);
done:
    Py_XDECREF(lhs);
    Py_XDECREF(arrow);
    Py_DECREF(tokens);
    return kept;
}

/* The result layout of reducing L to the kept modes (canonical). */
static PyObject *reduced_layout(const sw_layout *L, PyObject *kept)
{
    Py_ssize_t nk = PyTuple_GET_SIZE(kept);
    sw_error err;
    sw_layout *sel = NULL;
    if (nk == 0) {
        const uint8_t prof[1] = {SW_NODE_LEAF};
        const int64_t one[1] = {1};
        sel = sw_layout_new(1, prof, one, one, &err);
    } else if (nk == 1) {
        sel = sw_layout_mode(L, (int32_t)PyLong_AsLong(PyTuple_GET_ITEM(kept, 0)), &err);
    } else {
        int32_t *modes = PyMem_Malloc(sizeof(int32_t) * (size_t)nk);
        if (!modes)
            return PyErr_NoMemory();
        for (Py_ssize_t j = 0; j < nk; j++)
            modes[j] = (int32_t)PyLong_AsLong(PyTuple_GET_ITEM(kept, j));
        sel = sw_layout_select(L, modes, (int32_t)nk, &err);
        PyMem_Free(modes);
    }
    if (!sel) {
        sw_py_raise(&err);
        return NULL;
    }
    PyObject *r = canonical_of(sel);
    sw_layout_free(sel);
    return r;
}

/* out[k] = result ordinal that input ordinal k contributes to (the core's). */
static int result_ordinals(const sw_layout *L, PyObject *kept, int64_t *out)
{
    Py_ssize_t nk = PyTuple_GET_SIZE(kept);
    int32_t *modes = PyMem_Malloc(sizeof(int32_t) * (size_t)(nk + 1));
    sw_error err;
    if (!modes)
        return PyErr_NoMemory(), -1;
    for (Py_ssize_t j = 0; j < nk; j++)
        modes[j] = (int32_t)PyLong_AsLong(PyTuple_GET_ITEM(kept, j));
    sw_status st = sw_layout_reduce_ordinals(L, modes, (int32_t)nk, out, &err);
    PyMem_Free(modes);
    return st == SW_OK ? 0 : sw_py_raise(&err);
}

/* The sums computed by the core (tensor_ops.h, in logical order) into
 * `sums` (the result's size, as doubles) for a tensor it reads. 1 done, 0
 * not eligible or refused by the core (the general path raises it in the
 * binding's words), -1 error (an Int32 sum out of range). */
static int core_reduce(PyObject *tensor, PyObject *kept, sw_dtype acc, int64_t nout,
                       double *sums)
{
    if (!core_reads(tensor))
        return 0;
    Py_ssize_t nk = PyTuple_GET_SIZE(kept);
    int32_t modes[SW_COPY_MAX_DIMS + 1];
    if (nk > SW_COPY_MAX_DIMS)
        return 0;
    for (Py_ssize_t j = 0; j < nk; j++)
        modes[j] = (int32_t)PyLong_AsLong(PyTuple_GET_ITEM(kept, j));
    sw_error err;
    sw_status st = sw_tensor_reduce_sum_values(plane_of(tensor), modes, (int32_t)nk, acc, sums,
                                               &err);
    if (st == SW_EOVERFLOW) {
        PyErr_Format(PyExc_OverflowError, "reduce_sum: %s", err.msg);
        return -1;
    }
    if (st != SW_OK)
        return 0;
    widen(sums, sw_tensor_dtype(plane_of(tensor)), nout);
    return 1;
}

/* reduce_sum's argument kinds, checked by the function and again by a
 * directly dispatched operation: 0 / -1. */
static int check_reduce_arguments(PyObject *tensor, PyObject *description, PyObject *acc)
{
    if (require_tensor(tensor, "tensor") < 0)
        return -1;
    if (!PyUnicode_Check(description)) {
        PyErr_Format(PyExc_TypeError, "reduce_sum: description must be a str, not %.100s",
                     Py_TYPE(description)->tp_name);
        return -1;
    }
    if (acc != Py_None && !PyObject_TypeCheck(acc, &SwSimpleDType_Type)) {
        PyErr_Format(PyExc_TypeError,
                     "reduce_sum: accumulator_dtype must be None or a simple DType, not %R",
                     acc);
        return -1;
    }
    return 0;
}

static PyObject *reduce_forward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    const char *fn = "reduce_sum";
    if (nargs != 2 && nargs != 3) {
        PyErr_Format(PyExc_TypeError,
                     "reduce_sum takes 2 or 3 inputs (tensor, description, "
                     "accumulator_dtype), %zd given", nargs);
        return NULL;
    }
    PyObject *tensor = args[0], *description = args[1];
    PyObject *acc = nargs == 3 ? args[2] : Py_None;
    if (check_reduce_arguments(tensor, description, acc) < 0)
        return NULL;
    if (require_one_subtensor(tensor, fn, "tensor") < 0 ||
        require_carrier_class(self, tensor, fn) < 0 || require_live(tensor, fn, "tensor") < 0 ||
        require_numeric(tensor, fn, "tensor") < 0)
        return NULL;
    const sw_layout *L = core_of(tensor);
    PyObject *kept = parse_description(description, L->rank);
    if (!kept)
        return NULL;
    int is_int = is_dtype(tensor, SW_DT_INT32);
    int wide = acc == sw_py_dtype(SW_DT_FLOAT64);
    PyObject *layout = NULL, *result = NULL;
    double *v = NULL, *sums = NULL;
    int64_t *ord = NULL;
    if (is_int && acc != Py_None) {
        PyErr_Format(PyExc_TypeError,
                     "reduce_sum: an Int32 tensor is summed exactly; accumulator_dtype must "
                     "be None, not %R", acc);
        goto done;
    }
    if (acc != Py_None && !wide && acc != sw_py_dtype(SW_DT_FLOAT32)) {
        PyErr_Format(PyExc_NotImplementedError,
                     "reduce_sum: accumulator_dtype %R is not supported (Float32 or Float64)",
                     acc);
        goto done;
    }
    layout = reduced_layout(L, kept);
    if (!layout)
        goto done;
    int64_t nout = SwLayout_CORE(layout)->size;
    sums = PyMem_Calloc((size_t)nout, sizeof(double));
    if (!sums) {
        PyErr_NoMemory();
        goto done;
    }
    int fr = core_reduce(tensor, kept, is_int ? SW_DT_INT32 : wide ? SW_DT_FLOAT64 : SW_DT_FLOAT32,
                         nout, sums);
    if (fr < 0)
        goto done;
    if (fr > 0)
        goto made;
    PyMem_Free(sums);
    sums = NULL;
    v = values_of(tensor);
    sums = v ? PyMem_Calloc((size_t)nout, sizeof(double)) : NULL;
    ord = sums ? PyMem_Malloc(sizeof(int64_t) * (size_t)(L->size ? L->size : 1)) : NULL;
    if (!ord) {
        if (v && !PyErr_Occurred())
            PyErr_NoMemory();
        goto done;
    }
    if (result_ordinals(L, kept, ord) < 0)
        goto done;
    if (is_int) {
        /* Exact: 64-bit partial sums, the range checked once at the end. */
        int64_t *isums = (int64_t *)sums; /* same size as double */
        for (int64_t k = 0; k < L->size; k++) {
            if (__builtin_add_overflow(isums[ord[k]], (int64_t)v[k], &isums[ord[k]])) {
                PyErr_SetString(PyExc_OverflowError, "reduce_sum: Int32 sum is out of range");
                goto done;
            }
        }
        for (int64_t r = 0; r < nout; r++) {
            if (check_int32((double)isums[r], fn) < 0)
                goto done;
            sums[r] = (double)isums[r];
        }
    } else if (wide) {
        for (int64_t k = 0; k < L->size; k++)
            sums[ord[k]] += v[k];
    } else {
        for (int64_t k = 0; k < L->size; k++)
            sums[ord[k]] = (double)((float)sums[ord[k]] + (float)v[k]);
    }
made:
    if (PyDict_SetItem(((SwOperationObject *)self)->ctx, str_kept, kept) < 0 ||
        PyDict_SetItem(((SwOperationObject *)self)->ctx, str_result_layout, layout) < 0)
        goto done;
    result = tensor_from_values(carrier_of(tensor), is_int ? SW_DT_INT32 : SW_DT_FLOAT32,
                                layout, sums);
done:
    PyMem_Free(v);
    PyMem_Free(sums);
    PyMem_Free(ord);
    Py_XDECREF(layout);
    Py_DECREF(kept);
    return result;
}

static PyObject *reduce_backward(PyObject *self, PyObject *g)
{
    const char *fn = "reduce_sum";
    if (check_cotangent(g, fn) < 0)
        return NULL;
    PyObject *saved = saved_inputs(self, 1, fn);
    if (!saved)
        return NULL;
    PyObject *ctx = ((SwOperationObject *)self)->ctx;
    PyObject *kept = PyDict_GetItemWithError(ctx, str_kept);
    PyObject *layout = kept ? PyDict_GetItemWithError(ctx, str_result_layout) : NULL;
    PyObject *x = PyTuple_GET_ITEM(saved, 0), *out = NULL, *grad = NULL;
    double *gv = NULL, *vals = NULL;
    int64_t *ord = NULL;
    if (!layout || !PyTuple_Check(kept) || !SwLayout_Check(layout)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError,
                            "reduce_sum.backward: the operation's state is missing");
        goto done;
    }
    Py_INCREF(kept);
    Py_INCREF(layout);
    if (!sw_layout_equal(core_of(g), SwLayout_CORE(layout))) {
        PyErr_Format(PyExc_ValueError,
                     "reduce_sum.backward: gradient layout %R must equal the result layout %R",
                     ((SwTensorObject *)g)->subs[0].layout, layout);
        goto release;
    }
    if (!is_dtype(x, SW_DT_FLOAT32)) {
        out = PyTuple_Pack(1, Py_None);
        goto release;
    }
    const sw_layout *L = core_of(x);
    if (PyTuple_GET_SIZE(kept) == 0 && exact_host(carrier_of(x))) {
        /* Every coordinate receives the one gradient value. */
        const float *gf;
        float *gown = NULL;
        int fr = f32_values(g, &gf, &gown);
        if (fr < 0)
            goto release;
        if (fr > 0) {
            float g0 = gf[0];
            PyMem_Free(gown);
            PyObject *glayout = sw_py_grad_layout(x);
            f32_sink sink;
            if (glayout && sink_open(&sink, Py_TYPE(carrier_of(x)), glayout) == 0) {
                for (int64_t k = 0; k < L->size; k++)
                    sink.out[k] = g0;
                grad = sink_close(&sink, 1);
            }
            Py_XDECREF(glayout);
            if (grad)
                out = PyTuple_Pack(1, grad);
            goto release;
        }
    }
    gv = values_of(g);
    vals = gv ? PyMem_Malloc(sizeof(double) * (size_t)(L->size ? L->size : 1)) : NULL;
    ord = vals ? PyMem_Malloc(sizeof(int64_t) * (size_t)(L->size ? L->size : 1)) : NULL;
    if (!ord) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto release;
    }
    if (result_ordinals(L, kept, ord) < 0)
        goto release;
    for (int64_t k = 0; k < L->size; k++)
        vals[k] = gv[ord[k]];
    grad = make_gradient(x, vals);
    if (grad)
        out = PyTuple_Pack(1, grad);
release:
    Py_DECREF(kept);
    Py_DECREF(layout);
done:
    Py_XDECREF(grad);
    PyMem_Free(gv);
    PyMem_Free(vals);
    PyMem_Free(ord);
    Py_DECREF(saved);
    return out;
}

/* ---- types ---------------------------------------------------------------------------- */

#define OP_METHODS(fwd, bwd, doc_fwd, doc_bwd)                                          \
    {                                                                                   \
        {"_forward", (PyCFunction)(void (*)(void))fwd, METH_FASTCALL, doc_fwd},         \
        {"backward", bwd, METH_O, doc_bwd}, {NULL, NULL, 0, NULL},                      \
    }

static PyMethodDef add_methods[] = OP_METHODS(
    add_forward, add_backward,
    "_forward($self, lhs, rhs, /)\n--\n\nThe sum of lhs and rhs, coordinate by coordinate.",
    "backward($self, gradient, /)\n--\n\n"
    "Both operands receive the gradient, laid out like each operand.");

static PyMethodDef mul_methods[] = OP_METHODS(
    mul_forward, mul_backward,
    "_forward($self, lhs, rhs, /)\n--\n\n"
    "The product of lhs and rhs, coordinate by coordinate.",
    "backward($self, gradient, /)\n--\n\n"
    "lhs receives gradient * rhs and rhs receives gradient * lhs, read from the\n"
    "saved inputs now.");

static PyMethodDef reduce_methods[] = OP_METHODS(
    reduce_forward, reduce_backward,
    "_forward($self, tensor, description, accumulator_dtype=None, /)\n--\n\n"
    "Sum tensor over the modes description drops.",
    "backward($self, gradient, /)\n--\n\n"
    "Each input coordinate receives the gradient at its kept coordinates.");

#define OP_TYPE(var, pyname, methods, doc)                                              \
    static PyTypeObject var = {                                                         \
        PyVarObject_HEAD_INIT(NULL, 0)                                                  \
        .tp_name = pyname,                                                              \
        .tp_basicsize = sizeof(SwOperationObject),                                      \
        .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,                            \
        .tp_doc = doc,                                                                  \
        .tp_traverse = sw_py_operation_traverse,                                        \
        .tp_clear = sw_py_operation_clear,                                              \
        .tp_methods = methods,                                                          \
        .tp_base = &SwOperation_Type,                                                   \
    }

OP_TYPE(SwAddOperation_Type, "strideweave.operation.AddOperation", add_methods,
        "AddOperation()\n--\n\nThe operation behind add(lhs, rhs) on the built-in carriers.");
OP_TYPE(SwMulOperation_Type, "strideweave.operation.ElementwiseMulOperation", mul_methods,
        "ElementwiseMulOperation()\n--\n\nThe operation behind elementwise_mul(lhs, rhs) on the built-in carriers.");
OP_TYPE(SwReduceSumOperation_Type, "strideweave.operation.ReduceSumOperation",
        reduce_methods, "ReduceSumOperation()\n--\n\nThe operation behind reduce_sum(tensor, description) on the "
                        "built-in carriers.");

/* The operation type behind add / elementwise_mul / reduce_sum for the
 * built-in carriers, by dispatch name (a str); NULL, with no exception set,
 * for any other name. Borrowed. */
static PyTypeObject *sw_py_minimal_op_type(PyObject *name)
{
    if (PyUnicode_CompareWithASCIIString(name, "add") == 0)
        return &SwAddOperation_Type;
    if (PyUnicode_CompareWithASCIIString(name, "elementwise_mul") == 0)
        return &SwMulOperation_Type;
    if (PyUnicode_CompareWithASCIIString(name, "reduce_sum") == 0)
        return &SwReduceSumOperation_Type;
    return NULL;
}

/* Carrier.dispatch_op (F-0 / O-9), added to the carrier base at init:
 * the operation implementing `name` for this carrier's exact
 * class, with its dispatch metadata set. broadcast_to is the framework's view
 * for every class; the arithmetic operations exist for the built-ins. */
static PyObject *carrier_dispatch_op(PyObject *self, PyObject *name)
{
    if (!PyUnicode_Check(name)) {
        PyErr_Format(PyExc_TypeError, "dispatch_op: name must be a str, not %.100s",
                     Py_TYPE(name)->tp_name);
        return NULL;
    }
    PyObject *op = NULL;
    if (PyUnicode_CompareWithASCIIString(name, "broadcast_to") == 0) {
        op = sw_py_view_broadcast_operation();
    } else {
        PyTypeObject *type = sw_py_minimal_op_type(name);
        /* Arithmetic needs a kernel; definition-backed classes have none. */
        if (!type || !sw_py_carrier_builtin_ops(self) || sw_py_definition_of(Py_TYPE(self))) {
            PyErr_Format(PyExc_NotImplementedError,
                         "%s carriers do not implement the operation %R",
                         _PyType_Name(Py_TYPE(self)), name);
            return NULL;
        }
        op = PyObject_CallNoArgs((PyObject *)type);
    }
    if (!op)
        return NULL;
    if (!SwOperation_Check(op)) {
        PyErr_Format(PyExc_TypeError, "dispatch_op(%R) made a %.100s, not an Operation",
                     name, Py_TYPE(op)->tp_name);
        Py_DECREF(op);
        return NULL;
    }
    SwOperationObject *o = (SwOperationObject *)op;
    Py_XSETREF(o->operation_name, Py_NewRef(name));
    Py_XSETREF(o->dispatch_carrier_class, Py_NewRef((PyObject *)Py_TYPE(self)));
    return op;
}

/* ---- public functions ------------------------------------------------------------------ */

/* first.carrier.dispatch_op(name).forward(*inputs[0..n)). */
static PyObject *dispatch(PyObject *first, const char *name, PyObject *const *inputs,
                          Py_ssize_t n)
{
    PyObject *pyname = PyUnicode_FromString(name);
    if (!pyname)
        return NULL;
    PyObject *margs[2] = {carrier_of(first), pyname};
    PyObject *op = PyObject_VectorcallMethod(str_dispatch_op, margs,
                                             2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    Py_DECREF(pyname);
    if (!op)
        return NULL;
    PyObject *fargs[4] = {op, NULL, NULL, NULL};
    for (Py_ssize_t i = 0; i < n; i++)
        fargs[1 + i] = inputs[i];
    PyObject *r = PyObject_VectorcallMethod(str_forward_m, fargs,
                                            (size_t)(n + 1) | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                            NULL);
    Py_DECREF(op);
    return r;
}

static PyObject *binary_public(const char *fn, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames)
{
    static const char *const names[] = {"lhs", "rhs"};
    PyObject *a[2];
    if (sw_py_parse_required(fn, names, 2, args, nargs, kwnames, a) < 0 ||
        require_tensor(a[0], "lhs") < 0 || require_tensor(a[1], "rhs") < 0)
        return NULL;
    if (Py_TYPE(carrier_of(a[0])) != Py_TYPE(carrier_of(a[1]))) {
        PyErr_Format(PyExc_TypeError,
                     "%s needs lhs and rhs on the same carrier class, not %s and %s", fn,
                     Py_TYPE(carrier_of(a[0]))->tp_name, Py_TYPE(carrier_of(a[1]))->tp_name);
        return NULL;
    }
    return dispatch(a[0], fn, a, 2);
}

static PyObject *public_add(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames)
{
    (void)mod;
    return binary_public("add", args, nargs, kwnames);
}

static PyObject *public_mul(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames)
{
    (void)mod;
    return binary_public("elementwise_mul", args, nargs, kwnames);
}

static PyObject *public_reduce_sum(PyObject *mod, PyObject *args, PyObject *kwds)
{
    (void)mod;
    static char *kwlist[] = {"tensor", "description", "accumulator_dtype", NULL};
    PyObject *tensor, *description, *acc = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|$O:reduce_sum", kwlist, &tensor,
                                     &description, &acc))
        return NULL;
    if (check_reduce_arguments(tensor, description, acc) < 0)
        return NULL;
    PyObject *inputs[3] = {tensor, description, acc};
    return dispatch(tensor, "reduce_sum", inputs, acc == Py_None ? 2 : 3);
}

/* Test aid: give any Operation dispatch metadata, so tests can build
 * dispatched operations whose _forward runs Python (nesting, exits). */
static PyObject *aid_set_dispatch_metadata(PyObject *mod, PyObject *const *args,
                                           Py_ssize_t nargs)
{
    (void)mod;
    if (nargs != 3 || !SwOperation_Check(args[0]) || !PyUnicode_Check(args[1]) ||
        !PyType_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError,
                        "_set_dispatch_metadata(operation, name, carrier_class)");
        return NULL;
    }
    SwOperationObject *o = (SwOperationObject *)args[0];
    Py_XSETREF(o->operation_name, Py_NewRef(args[1]));
    Py_XSETREF(o->dispatch_carrier_class, Py_NewRef(args[2]));
    Py_RETURN_NONE;
}

static PyMethodDef minimal_functions[] = {
    {"_set_dispatch_metadata", (PyCFunction)(void (*)(void))aid_set_dispatch_metadata,
     METH_FASTCALL,
     "_set_dispatch_metadata(operation, name, carrier_class, /)\n--\n\n"
     "Test aid: make operation report name and carrier_class as if dispatched."},
    {"add", (PyCFunction)(void (*)(void))public_add, METH_FASTCALL | METH_KEYWORDS,
     "add(lhs, rhs)\n--\n\n"
     "The coordinate-wise sum of two tensors of the same shape on the same carrier\n"
     "class, in fresh storage of lhs's carrier class with a compact layout.\n"
     "Int32 + Int32 is Int32 (OverflowError when out of range); otherwise the\n"
     "result is Float32. Raises TypeError for non-Tensors, different carrier\n"
     "classes or other dtypes, RuntimeError for a released carrier, and\n"
     "ValueError for different shapes (use broadcast_to first)."},
    {"elementwise_mul", (PyCFunction)(void (*)(void))public_mul,
     METH_FASTCALL | METH_KEYWORDS,
     "elementwise_mul(lhs, rhs)\n--\n\n"
     "The coordinate-wise product of two tensors, with the same rules as add."},
    {"reduce_sum", (PyCFunction)(void (*)(void))public_reduce_sum,
     METH_VARARGS | METH_KEYWORDS,
     "reduce_sum(tensor, description, *, accumulator_dtype=None)\n--\n\n"
     "Sum a Float32 or Int32 tensor over some of its top-level modes.\n"
     "description reads \"L -> R\": one name per top-level mode, '->', then either\n"
     "'1' (sum everything into one value) or the names of the modes to keep, in\n"
     "the order the result should have them. For example \"a b -> a\" sums over b.\n"
     "accumulator_dtype=DType.Float64 sums a Float32 tensor in double precision\n"
     "and rounds once. Raises TypeError, ValueError for a bad description,\n"
     "RuntimeError for a released carrier, OverflowError for an Int32 sum out\n"
     "of range and NotImplementedError for an unsupported accumulator."},
    {NULL, NULL, 0, NULL},
};

/* Carrier.dispatch_op is this file's: it is added to Carrier (py_carrier.c,
 * below this file) at module init. */
static PyMethodDef carrier_methods[] = {
    {"dispatch_op", carrier_dispatch_op, METH_O,
     "dispatch_op($self, name, /)\n--\n\n"
     "A fresh operation that runs `name` for this carrier's class: \"add\",\n"
     "\"elementwise_mul\" and \"reduce_sum\" on Generic, CPU and FileBacked, and\n"
     "\"broadcast_to\" on every carrier class. Raises NotImplementedError for\n"
     "anything else and TypeError when name is not a str."},
    {NULL, NULL, 0, NULL},
};

int sw_py_minimal_ops_init(PyObject *module)
{
    str_new_like = PyUnicode_InternFromString("new_like");
    str_dtype_kw = PyUnicode_InternFromString("dtype");
    str_dispatch_op = PyUnicode_InternFromString("dispatch_op");
    str_forward_m = PyUnicode_InternFromString("forward");
    str_kept = PyUnicode_InternFromString("kept_modes");
    str_result_layout = PyUnicode_InternFromString("result_layout");
    if (!str_new_like || !str_dtype_kw || !str_dispatch_op || !str_forward_m || !str_kept ||
        !str_result_layout)
        return -1;
    PyTypeObject *types[] = {&SwAddOperation_Type, &SwMulOperation_Type,
                             &SwReduceSumOperation_Type};
    for (size_t i = 0; i < 3; i++)
        if (PyType_Ready(types[i]) < 0)
            return -1;
    if (sw_py_type_add_methods(&SwCarrier_Type, carrier_methods) < 0)
        return -1;
    return PyModule_AddFunctions(module, minimal_functions);
}
