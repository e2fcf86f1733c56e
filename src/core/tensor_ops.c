/* Element-wise operations over tensors (tensor_ops.h). Each one reads its
 * operands' values in logical order (sw_tensor_read_values), computes in
 * plain arrays, and writes the destination's span of slots in one write,
 * so the per-element work never takes a lock or calls a carrier. */
#include "strideweave/tensor_ops.h"

#include <pthread.h>
#include <string.h>

#include "strideweave/alloc.h"
#include "strideweave/tensor_walk.h"
#include "carrier_internal.h"

static void *alloc_slots(int64_t n, size_t bytes, sw_error *err)
{
    void *p = sw_malloc((size_t)(n > 0 ? n : 1) * bytes);
    if (!p)
        sw_error_set(err, SW_ENOMEM, "tensor op: out of memory for %lld values", (long long)n);
    return p;
}

static int numeric(sw_dtype d)
{
    return d == SW_DT_FLOAT32 || d == SW_DT_INT32;
}

sw_dtype sw_binary_result_dtype(sw_dtype a, sw_dtype b)
{
    return a == SW_DT_INT32 && b == SW_DT_INT32 ? SW_DT_INT32 : SW_DT_FLOAT32;
}

static sw_status check_binary(const sw_tensor *a, const sw_tensor *b, sw_error *err)
{
    if (!a || !b)
        return sw_error_set(err, SW_ETYPE, "tensor op: the operands must not be NULL");
    if (!sw_layout_same_shape(sw_tensor_layout(a), sw_tensor_layout(b)))
        return sw_error_set(err, SW_EINVAL, "tensor op: the operands have different shapes");
    if (!numeric(sw_tensor_dtype(a)) || !numeric(sw_tensor_dtype(b)))
        return sw_error_set(err, SW_ETYPE, "tensor op: Float32 and Int32 operands only, not %s "
                            "and %s", sw_dtype_info_of(sw_tensor_dtype(a))->name,
                            sw_dtype_info_of(sw_tensor_dtype(b))->name);
    return SW_OK;
}

/* ---- operands ------------------------------------------------------------
 * An operand's values in logical order: the carrier's host memory in place
 * when the class is CPU or Generic and the layout flat (its mutex held while
 * the op reads it, so the values are one instant's, as
 * sw_tensor_read_values gives them), else a copy that call made. Copies are
 * made before any mutex is taken; the in-place operands' mutexes are then
 * taken together (in address order), so no op waits for a mutex while
 * holding another. */

typedef struct operand {
    const sw_tensor *t;
    const void *vals; /* logical order, t's dtype */
    void *copy;       /* owned, or NULL */
    sw_carrier *held; /* the carrier whose memory `vals` is (mutex taken) */
} operand;

/* Slot 0 of t's carrier's host memory when t can be read in place. */
static const char *in_place(const sw_tensor *t)
{
    sw_carrier *c = sw_tensor_carrier(t);
    const sw_carrier_class *k = sw_carrier_class_of(c);
    if ((k != &sw_cpu_class && k != &sw_generic_class) || !sw_layout_is_flat(sw_tensor_layout(t)))
        return NULL;
    return k == &sw_cpu_class ? sw_cpu_pointer(c) : sw_generic_pointer(c);
}

/* With the mutex held: what sw_tensor_read_values checks before reading. */
static sw_status check_in_place_locked(const operand *o, sw_error *err)
{
    sw_carrier *c = o->held;
    sw_status st = sw_carrier_check_readable_locked(c, err);
    if (st != SW_OK)
        return st;
    const sw_layout *L = sw_tensor_layout(o->t);
    int64_t end, off = sw_tensor_offset(o->t), size = c->ops->size(c->impl);
    if (__builtin_add_overflow(off, L->cosize, &end) || end > size)
        return sw_error_set(err, SW_ERANGE,
                            "the tensor reaches slots %lld..%lld of a %s carrier of size %lld",
                            (long long)off, (long long)(off + L->cosize - 1),
                            sw_carrier_name(c), (long long)size);
    return SW_OK;
}

static void operands_end(operand *o, int n)
{
    sw_carrier *a = NULL, *b = NULL;
    for (int i = 0; i < n; i++) {
        sw_free(o[i].copy);
        o[i].copy = NULL;
        if (o[i].held && !a)
            a = o[i].held;
        else if (o[i].held && o[i].held != a)
            b = o[i].held;
        o[i].held = NULL;
    }
    if (a && b)
        sw_carrier_unlock_pair(a, b);
    else if (a)
        pthread_mutex_unlock(&a->lock);
}

/* The values of n (1 or 2) tensors; operands_end releases them, also after
 * a failure. */
static sw_status operands_begin(operand *o, const sw_tensor *const *t, int n, sw_error *err)
{
    const char *mem[2];
    sw_status st = SW_OK;
    for (int i = 0; i < n; i++) {
        o[i] = (operand){t[i], NULL, NULL, NULL};
        mem[i] = in_place(t[i]);
        if (mem[i] || st != SW_OK)
            continue;
        o[i].copy = alloc_slots(sw_tensor_size(t[i]), sw_dtype_slot_bytes(sw_tensor_dtype(t[i])),
                                err);
        st = o[i].copy ? sw_tensor_read_values(t[i], o[i].copy, err) : SW_ENOMEM;
        o[i].vals = o[i].copy;
    }
    if (st != SW_OK)
        return st;
    sw_carrier *a = NULL, *b = NULL;
    for (int i = 0; i < n; i++) {
        if (!mem[i])
            continue;
        o[i].held = sw_tensor_carrier(t[i]);
        o[i].vals = mem[i] + (size_t)sw_tensor_offset(t[i]) * sw_dtype_slot_bytes(
                                                                  sw_tensor_dtype(t[i]));
        if (!a)
            a = o[i].held;
        else if (o[i].held != a)
            b = o[i].held;
    }
    if (a && b)
        sw_carrier_lock_pair(a, b);
    else if (a)
        pthread_mutex_lock(&a->lock);
    /* the memory noted before locking is still the carrier's (host storage
     * never moves) unless it was released meanwhile: checked here */
    for (int i = 0; i < n && st == SW_OK; i++)
        if (o[i].held)
            st = check_in_place_locked(&o[i], err);
    return st;
}

/* Element k of an operand as binary32 (an Int32 one rounded). */
static inline float f32_at(const operand *o, int is_int, int64_t k)
{
    return is_int ? (float)((const int32_t *)o->vals)[k] : ((const float *)o->vals)[k];
}

static sw_status overflow(int64_t v, sw_error *err)
{
    return sw_error_set(err, SW_EOVERFLOW, "Int32 result %lld is out of range", (long long)v);
}

static sw_status binary_i32(sw_binary_op op, const operand *o, int64_t n, int32_t *out,
                            sw_error *err)
{
    const int32_t *x = o[0].vals, *y = o[1].vals;
    for (int64_t k = 0; k < n; k++) {
        int64_t r = op == SW_BINARY_MUL ? (int64_t)x[k] * y[k] : (int64_t)x[k] + y[k];
        if (r < INT32_MIN || r > INT32_MAX)
            return overflow(r, err);
        out[k] = (int32_t)r;
    }
    return SW_OK;
}

static void binary_f32(sw_binary_op op, const operand *o, int64_t n, float *out)
{
    int xi = sw_tensor_dtype(o[0].t) == SW_DT_INT32, yi = sw_tensor_dtype(o[1].t) == SW_DT_INT32;
    if (!xi && !yi) { /* the common case, one tight loop */
        const float *x = o[0].vals, *y = o[1].vals;
        if (op == SW_BINARY_MUL)
            for (int64_t k = 0; k < n; k++)
                out[k] = x[k] * y[k];
        else
            for (int64_t k = 0; k < n; k++)
                out[k] = x[k] + y[k];
        return;
    }
    for (int64_t k = 0; k < n; k++) {
        float x = f32_at(&o[0], xi, k), y = f32_at(&o[1], yi, k);
        out[k] = op == SW_BINARY_MUL ? x * y : x + y;
    }
}

sw_status sw_tensor_binary_values(sw_binary_op op, const sw_tensor *a, const sw_tensor *b,
                                  void *out, sw_error *err)
{
    sw_status st = check_binary(a, b, err);
    if (st != SW_OK)
        return st;
    if (!out && sw_tensor_size(a) > 0)
        return sw_error_set(err, SW_ETYPE, "tensor op: out must not be NULL");
    if (op != SW_BINARY_ADD && op != SW_BINARY_MUL)
        return sw_error_set(err, SW_EINVAL, "tensor op: unknown operation %d", (int)op);
    operand o[2];
    const sw_tensor *t[2] = {a, b};
    st = operands_begin(o, t, 2, err);
    if (st == SW_OK && sw_binary_result_dtype(sw_tensor_dtype(a), sw_tensor_dtype(b)) ==
                           SW_DT_INT32)
        st = binary_i32(op, o, sw_tensor_size(a), out, err);
    else if (st == SW_OK)
        binary_f32(op, o, sw_tensor_size(a), out);
    operands_end(o, 2);
    return st;
}

/* ---- fresh results ------------------------------------------------------ */

/* SW_ENOTSUP unless fresh storage of `like`'s class can be made here. */
static sw_status check_fresh_class(sw_carrier *like, sw_error *err)
{
    const sw_carrier_class *k = sw_carrier_class_of(like);
    if (k == &sw_cpu_class || k == &sw_generic_class)
        return SW_OK;
    return sw_error_set(err, SW_ENOTSUP, "tensor op: a fresh result on a %s carrier is not "
                        "supported (CPU and Generic are)", sw_carrier_name(like));
}

/* A fresh carrier of `like`'s class (checked) holding n values of `dt`. */
static sw_status fresh_carrier(sw_carrier *like, sw_dtype dt, const void *values, int64_t n,
                               sw_carrier **out, sw_error *err)
{
    if (sw_carrier_class_of(like) == &sw_generic_class)
        return sw_generic_new(values, n, dt, 0, out, err);
    sw_status st = sw_cpu_new(n, dt, SW_CARRIER_EMPTY, out, err);
    if (st == SW_OK && n > 0)
        memcpy(sw_cpu_pointer(*out), values, (size_t)n * sw_dtype_slot_bytes(dt));
    return st;
}

/* A tensor over fresh storage of `like`'s class: `values` (logical order)
 * laid out canonically in the shape (nprofile, profile, extents). */
static sw_status fresh_tensor(sw_carrier *like, sw_dtype dt, int32_t nprofile,
                              const uint8_t *profile, const int64_t *extents, const void *values,
                              sw_tensor **out, sw_error *err)
{
    sw_layout *L = sw_layout_canonical(nprofile, profile, extents, err);
    if (!L)
        return err ? err->code : SW_ENOMEM;
    sw_carrier *c = NULL;
    sw_status st = fresh_carrier(like, dt, values, L->size, &c, err);
    if (st == SW_OK)
        st = sw_tensor_new(c, 0, L, out, err);
    sw_carrier_unref(c);
    sw_layout_free(L);
    return st;
}

static sw_status binary_fresh(sw_binary_op op, const sw_tensor *a, const sw_tensor *b,
                              sw_tensor **out, sw_error *err)
{
    if (!out)
        return sw_error_set(err, SW_ETYPE, "tensor op: out must not be NULL");
    sw_status st = check_binary(a, b, err);
    if (st != SW_OK)
        return st;
    sw_carrier *like = sw_tensor_carrier(a);
    if ((st = check_fresh_class(like, err)) != SW_OK)
        return st;
    sw_dtype dt = sw_binary_result_dtype(sw_tensor_dtype(a), sw_tensor_dtype(b));
    int64_t n = sw_tensor_size(a);
    void *vals = alloc_slots(n, sw_dtype_slot_bytes(dt), err);
    if (!vals)
        return SW_ENOMEM;
    st = sw_tensor_binary_values(op, a, b, vals, err);
    const sw_layout *L = sw_tensor_layout(a);
    if (st == SW_OK)
        st = fresh_tensor(like, dt, L->nprofile, L->profile, L->extents, vals, out, err);
    sw_free(vals);
    return st;
}

sw_status sw_tensor_add(const sw_tensor *a, const sw_tensor *b, sw_tensor **out, sw_error *err)
{
    return binary_fresh(SW_BINARY_ADD, a, b, out, err);
}

sw_status sw_tensor_mul(const sw_tensor *a, const sw_tensor *b, sw_tensor **out, sw_error *err)
{
    return binary_fresh(SW_BINARY_MUL, a, b, out, err);
}

/* ---- reduce_sum ---------------------------------------------------------- */

static sw_status check_reduce(const sw_tensor *t, const int32_t *kept, int32_t nkept,
                              sw_dtype acc, sw_error *err)
{
    if (!t || (nkept > 0 && !kept))
        return sw_error_set(err, SW_ETYPE, "reduce_sum: the tensor and kept must not be NULL");
    const sw_layout *L = sw_tensor_layout(t);
    if (nkept < 0 || nkept > L->rank)
        return sw_error_set(err, SW_EINVAL, "reduce_sum: %d kept modes of %d", (int)nkept,
                            (int)L->rank);
    for (int32_t j = 0; j < nkept; j++) {
        if (kept[j] < 0 || kept[j] >= L->rank)
            return sw_error_set(err, SW_EINVAL, "reduce_sum: mode %d is not in [0, %d)",
                                (int)kept[j], (int)L->rank);
        for (int32_t i = 0; i < j; i++)
            if (kept[i] == kept[j])
                return sw_error_set(err, SW_EINVAL, "reduce_sum: mode %d is kept twice",
                                    (int)kept[j]);
    }
    sw_dtype dt = sw_tensor_dtype(t);
    int ok = dt == SW_DT_INT32 ? acc == SW_DT_INT32
                               : dt == SW_DT_FLOAT32 && (acc == SW_DT_FLOAT32 ||
                                                          acc == SW_DT_FLOAT64);
    if (!ok)
        return sw_error_set(err, SW_ETYPE, "reduce_sum: a %s tensor cannot be summed in %s",
                            sw_dtype_info_of(dt)->name, sw_dtype_info_of(acc)->name);
    return SW_OK;
}

/* The result ordinal of input ordinal k: ord[k], or 0 (everything into
 * one value) without an ord array. */
#define ORD(k) (ord ? ord[k] : 0)

static sw_status sum_i32(const int32_t *v, const int64_t *ord, int64_t n, int64_t nout,
                         int32_t *out, sw_error *err)
{
    int64_t *sums = sw_calloc((size_t)nout, sizeof *sums);
    sw_status st = sums ? SW_OK : sw_error_set(err, SW_ENOMEM, "reduce_sum: out of memory");
    for (int64_t k = 0; st == SW_OK && k < n; k++)
        if (__builtin_add_overflow(sums[ORD(k)], (int64_t)v[k], &sums[ORD(k)]))
            st = sw_error_set(err, SW_EOVERFLOW, "Int32 sum is out of range");
    for (int64_t r = 0; st == SW_OK && r < nout; r++) {
        if (sums[r] < INT32_MIN || sums[r] > INT32_MAX)
            st = overflow(sums[r], err);
        else
            out[r] = (int32_t)sums[r];
    }
    sw_free(sums);
    return st;
}

static sw_status sum_f32(const float *v, const int64_t *ord, int64_t n, int64_t nout, int wide,
                         float *out, sw_error *err)
{
    if (!ord) { /* everything into one value: a register accumulator, same order */
        float acc32 = 0.0f;
        double acc64 = 0.0;
        if (wide)
            for (int64_t k = 0; k < n; k++)
                acc64 += (double)v[k];
        else
            for (int64_t k = 0; k < n; k++)
                acc32 += v[k];
        out[0] = wide ? (float)acc64 : acc32;
        return SW_OK;
    }
    if (!wide) {
        memset(out, 0, (size_t)nout * sizeof *out);
        for (int64_t k = 0; k < n; k++)
            out[ORD(k)] += v[k];
        return SW_OK;
    }
    double *sums = sw_calloc((size_t)nout, sizeof *sums);
    if (!sums)
        return sw_error_set(err, SW_ENOMEM, "reduce_sum: out of memory");
    for (int64_t k = 0; k < n; k++)
        sums[ORD(k)] += (double)v[k];
    for (int64_t r = 0; r < nout; r++)
        out[r] = (float)sums[r];
    sw_free(sums);
    return SW_OK;
}

/* Everything into one value, in logical order: no result ordinals. */
static sw_status sum_all(const sw_tensor *t, sw_dtype acc, void *out, sw_error *err)
{
    operand o;
    sw_status st = operands_begin(&o, &t, 1, err);
    if (st == SW_OK && acc == SW_DT_INT32)
        st = sum_i32(o.vals, NULL, sw_tensor_size(t), 1, out, err);
    else if (st == SW_OK)
        st = sum_f32(o.vals, NULL, sw_tensor_size(t), 1, acc == SW_DT_FLOAT64, out, err);
    operands_end(&o, 1);
    return st;
}

sw_status sw_tensor_reduce_sum_values(const sw_tensor *t, const int32_t *kept, int32_t nkept,
                                      sw_dtype acc, void *out, sw_error *err)
{
    sw_status st = check_reduce(t, kept, nkept, acc, err);
    if (st != SW_OK)
        return st;
    if (!out)
        return sw_error_set(err, SW_ETYPE, "reduce_sum: out must not be NULL");
    const sw_layout *L = sw_tensor_layout(t);
    int64_t n = L->size;
    if (nkept == 0)
        return sum_all(t, acc, out, err);
    int64_t *ord = alloc_slots(n, sizeof *ord, err);
    int64_t *size = ord ? alloc_slots(L->rank, sizeof *size, err) : NULL;
    void *v = size ? alloc_slots(n, 4, err) : NULL;
    if (!v) {
        sw_free(ord);
        sw_free(size);
        return SW_ENOMEM;
    }
    int64_t nout = 1;
    sw_layout_mode_sizes(L, size, L->rank);
    for (int32_t j = 0; j < nkept; j++)
        nout *= size[kept[j]];
    sw_free(size);
    st = sw_layout_reduce_ordinals(L, kept, nkept, ord, err);
    if (st == SW_OK)
        st = sw_tensor_read_values(t, v, err);
    if (st == SW_OK && acc == SW_DT_INT32)
        st = sum_i32(v, ord, n, nout, out, err);
    else if (st == SW_OK)
        st = sum_f32(v, ord, n, nout, acc == SW_DT_FLOAT64, out, err);
    sw_free(v);
    sw_free(ord);
    return st;
}

sw_status sw_tensor_reduce_sum(const sw_tensor *t, const int32_t *kept, int32_t nkept,
                               sw_dtype acc, sw_tensor **out, sw_error *err)
{
    if (!out)
        return sw_error_set(err, SW_ETYPE, "reduce_sum: out must not be NULL");
    sw_status st = check_reduce(t, kept, nkept, acc, err);
    if (st != SW_OK)
        return st;
    sw_carrier *like = sw_tensor_carrier(t);
    if ((st = check_fresh_class(like, err)) != SW_OK)
        return st;
    const sw_layout *L = sw_tensor_layout(t);
    sw_layout *sel = NULL;
    if (nkept == 0) {
        const uint8_t prof[1] = {SW_NODE_LEAF};
        const int64_t one[1] = {1};
        sel = sw_layout_new(1, prof, one, one, err);
    } else {
        sel = sw_layout_select(L, kept, nkept, err);
    }
    if (!sel)
        return err ? err->code : SW_ENOMEM;
    sw_dtype dt = sw_tensor_dtype(t);
    void *vals = alloc_slots(sel->size, 4, err);
    st = vals ? sw_tensor_reduce_sum_values(t, kept, nkept, acc, vals, err) : SW_ENOMEM;
    if (st == SW_OK)
        st = fresh_tensor(like, dt, sel->nprofile, sel->profile, sel->extents, vals, out, err);
    sw_free(vals);
    sw_layout_free(sel);
    return st;
}

/* ---- copy and fill ------------------------------------------------------- */

/* `vals` (t's values in logical order) written over t's span of slots in
 * one carrier write (tensor.h: sw_carrier_write_layout_as). */
static sw_status write_values(const sw_tensor *t, const void *vals, sw_error *err)
{
    return sw_carrier_write_layout_as(sw_tensor_carrier(t), sw_tensor_offset(t),
                                      sw_tensor_layout(t), sw_tensor_dtype(t), vals, err);
}

sw_status sw_tensor_copy(const sw_tensor *dst, const sw_tensor *src, sw_error *err)
{
    if (!dst || !src)
        return sw_error_set(err, SW_ETYPE, "sw_tensor_copy: the tensors must not be NULL");
    if (!sw_layout_same_shape(sw_tensor_layout(dst), sw_tensor_layout(src)))
        return sw_error_set(err, SW_EINVAL, "sw_tensor_copy: the tensors have different shapes");
    if (sw_tensor_dtype(dst) != sw_tensor_dtype(src))
        return sw_error_set(err, SW_ETYPE, "sw_tensor_copy: %s values cannot go to a %s tensor",
                            sw_dtype_info_of(sw_tensor_dtype(src))->name,
                            sw_dtype_info_of(sw_tensor_dtype(dst))->name);
    size_t bytes = sw_dtype_slot_bytes(sw_tensor_dtype(src));
    void *vals = alloc_slots(sw_tensor_size(src), bytes ? bytes : 1, err);
    if (!vals)
        return SW_ENOMEM;
    sw_status st = sw_tensor_size(src) ? sw_tensor_read_values(src, vals, err) : SW_OK;
    if (st == SW_OK)
        st = write_values(dst, vals, err);
    sw_free(vals);
    return st;
}

sw_status sw_tensor_fill(const sw_tensor *t, const void *value, sw_error *err)
{
    if (!t || !value)
        return sw_error_set(err, SW_ETYPE, "sw_tensor_fill: the tensor and the value must not be "
                            "NULL");
    size_t bytes = sw_dtype_slot_bytes(sw_tensor_dtype(t));
    if (bytes == 0)
        return sw_error_set(err, SW_ETYPE, "sw_tensor_fill: %s has no slot width",
                            sw_dtype_info_of(sw_tensor_dtype(t))->name);
    int64_t n = sw_tensor_size(t);
    char *vals = alloc_slots(n, bytes, err);
    if (!vals)
        return SW_ENOMEM;
    for (int64_t k = 0; k < n; k++)
        memcpy(vals + (size_t)k * bytes, value, bytes);
    sw_status st = write_values(t, vals, err);
    sw_free(vals);
    return st;
}
