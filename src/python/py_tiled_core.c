/* The binding-tier hooks of a core TiledEvictable (strideweave/
 * tiled_evictable.h, sw_te_tier_hooks) for the Python TiledEvictable: the
 * core keeps the tile records, residency, pins and commits; the binding
 * makes and reaches the stores of tiers the core cannot address (classes
 * written in Python, definition-backed, TensorStore) and runs the tile
 * copies whose routes only it knows.
 *
 *   store    the prototype's Python allocate_like (a user's MoveOperation
 *            for the pair may copy the tile: TE-7), except that an exact
 *            BlockDeviceCarrier prototype is handed back to the core, which
 *            makes and copies its tiles (B-10 closes its pairs to users)
 *            and flushes them before commit (B-11); the store is kept in
 *            `stores` (core carrier -> Python object) until the core
 *            discards it;
 *   copy     a private tile between Python tiers or definition-backed
 *            tiers through the pair's movement
 *            (py_tile_transfer.c, py_tile_route.c); a provider's
 *            ProviderCompletion reports through the waiter threads; every
 *            other pair is handed back to the core (host and file pairs
 *            run there, bound stores through read/write);
 *   read     slot loops over the store's Python object (the core reads
 *   write    and writes the stores of its own classes itself); writes into
 *            a tier given at construction take the TiledEvictable's claim
 *            token (sw_tiled_evictable_tier_token) as owner access;
 *   size     the tier's Python size;
 *   discard  releases the Python store and forgets it.
 *
 * Hooks run with no core lock and, for asynchronous work and for calls the
 * binding makes with the GIL released, without the GIL: each takes it. A
 * Python exception a hook raises is kept for the caller (keyed by the work
 * the hook serves, sw_te_work_current, else by the calling thread) and the
 * core gets a status naming the hook.
 *
 * The core names the context by a number (`user`), looked up with the GIL
 * held: a hook that runs after the Python object went (storage the core
 * drops at its last reference) finds nothing and leaves it to the core. */
#include "sw_tiled.h"
#include "sw_extension.h"
#include "sw_move.h"
#include "sw_tiled_core.h"

#include "strideweave/tiled_evictable.h"
#include "strideweave/testing.h" /* the fault-injection test hooks */

#include <string.h>

/* ---- the context -------------------------------------------------------- */

static PyObject *registry; /* id -> context address (GIL-protected) */
static uintptr_t last_id;

static sw_py_tiled_core *lookup(void *user)
{
    if (!registry)
        return NULL;
    PyObject *key = PyLong_FromVoidPtr(user);
    PyObject *v = key ? PyDict_GetItemWithError(registry, key) : NULL;
    Py_XDECREF(key);
    if (!v) {
        PyErr_Clear();
        return NULL;
    }
    return PyLong_AsVoidPtr(v);
}

/* Whether the core reaches `obj`'s slots itself (exact CPU or FileBacked). */
static int sw_py_tiled_core_addressable(PyObject *obj)
{
    return Py_TYPE(obj) == &SwCPU_Type || Py_TYPE(obj) == &SwFileBacked_Type;
}

sw_py_tiled_core *sw_py_tiled_core_new(PyObject *primary, PyObject *secondary, PyObject *dtype,
                                       PyObject *policy, int64_t tile_size)
{
    if (!registry && !(registry = PyDict_New()))
        return NULL;
    sw_py_tiled_core *c = PyMem_RawCalloc(1, sizeof *c);
    if (!c) {
        PyErr_NoMemory();
        return NULL;
    }
    c->id = ++last_id;
    c->stores = PyDict_New();
    c->errors = PyDict_New();
    PyObject *key = PyLong_FromVoidPtr((void *)c->id);
    PyObject *addr = PyLong_FromVoidPtr(c);
    if (!c->stores || !c->errors || !key || !addr || PyDict_SetItem(registry, key, addr) < 0) {
        Py_XDECREF(key);
        Py_XDECREF(addr);
        Py_XDECREF(c->stores);
        Py_XDECREF(c->errors);
        PyMem_RawFree(c);
        return NULL;
    }
    Py_DECREF(key);
    Py_DECREF(addr);
    c->primary = Py_NewRef(primary);
    c->secondary = Py_NewRef(secondary);
    c->dtype = Py_NewRef(dtype);
    c->policy = Py_NewRef(policy);
    c->tile_size = tile_size;
    return c;
}

void sw_py_tiled_core_free(sw_py_tiled_core *c)
{
    if (!c)
        return;
    PyObject *key = PyLong_FromVoidPtr((void *)c->id);
    if (!key || PyDict_DelItem(registry, key) < 0)
        PyErr_Clear();
    Py_XDECREF(key);
    Py_XDECREF(c->stores);
    Py_XDECREF(c->errors);
    Py_XDECREF(c->primary);
    Py_XDECREF(c->secondary);
    Py_XDECREF(c->dtype);
    Py_XDECREF(c->policy);
    PyMem_RawFree(c);
}

/* Remove `key` from `d`, giving its value (new reference) or NULL. */
static PyObject *dict_pop(PyObject *d, PyObject *key)
{
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (!v)
        return NULL;
    Py_INCREF(v);
    if (PyDict_DelItem(d, key) < 0)
        PyErr_Clear();
    return v;
}

static PyObject *carrier_key(sw_carrier *c)
{
    return PyLong_FromVoidPtr(c);
}

/* The Python object of a core carrier the hooks may see: a tier given at
 * construction or a store a hook made (borrowed), else NULL. */
static PyObject *object_of(sw_py_tiled_core *c, sw_carrier *core)
{
    if (core == CARRIER_CORE(c->primary))
        return c->primary;
    if (core == CARRIER_CORE(c->secondary))
        return c->secondary;
    PyObject *key = carrier_key(core);
    PyObject *obj = key ? PyDict_GetItemWithError(c->stores, key) : NULL;
    Py_XDECREF(key);
    if (!obj)
        PyErr_Clear();
    return obj;
}

/* Who reports a hook's failure: the asynchronous work it serves, else the
 * thread making a blocking call. */
static PyObject *error_key(void)
{
    sw_te_work *w = sw_te_work_current();
    if (w) {
        sw_te_work_note_kept(w); /* the core tells when w ends (hook_work_end) */
        return PyLong_FromVoidPtr(w);
    }
    return PyLong_FromUnsignedLong(PyThread_get_thread_ident());
}

static void keep_error(sw_py_tiled_core *c, PyObject *key, PyObject *exc)
{
    if (!key || !exc || PyDict_Contains(c->errors, key) != 0 ||
        PyDict_SetItem(c->errors, key, exc) < 0)
        PyErr_Clear();
}

/* The status a failed hook returns; the exception is kept (GIL held). */
static sw_status hook_failed(sw_py_tiled_core *c, const char *what, sw_error *err)
{
    PyObject *exc = sw_py_take_exception();
    PyObject *key = error_key();
    keep_error(c, key, exc);
    Py_XDECREF(key);
    Py_XDECREF(exc);
    return sw_error_set(err, SW_EINVAL, "TiledEvictable: the tier's %s raised", what);
}

PyObject *sw_py_tiled_core_take_error(sw_py_tiled_core *c, sw_te_work *w)
{
    PyObject *key = w ? PyLong_FromVoidPtr(w)
                      : PyLong_FromUnsignedLong(PyThread_get_thread_ident());
    PyObject *exc = NULL;
    if (key)
        exc = dict_pop(c->errors, key);
    PyErr_Clear();
    Py_XDECREF(key);
    return exc;
}

int sw_py_tiled_core_raise(sw_py_tiled_core *c, sw_te_work *w, const sw_error *err)
{
    PyObject *exc = sw_py_tiled_core_take_error(c, w);
    if (exc) {
        sw_py_restore_exception(exc);
        return -1;
    }
    return sw_py_raise(err);
}

int sw_py_tiled_core_add_store(sw_py_tiled_core *c, PyObject *dest)
{
    PyObject *key = carrier_key(CARRIER_CORE(dest));
    int rc = key ? PyDict_SetItem(c->stores, key, dest) : -1;
    Py_XDECREF(key);
    return rc;
}

void sw_py_tiled_core_forget_store(sw_py_tiled_core *c, PyObject *dest)
{
    PyObject *pending = sw_py_take_exception(); /* the caller's, kept */
    PyObject *key = carrier_key(CARRIER_CORE(dest));
    PyObject *v = key ? dict_pop(c->stores, key) : NULL;
    Py_XDECREF(v);
    Py_XDECREF(key);
    PyErr_Clear();
    if (pending)
        sw_py_restore_exception(pending);
}

static sw_status unknown_carrier(sw_error *err)
{
    return sw_error_set(err, SW_ETYPE, "TiledEvictable: a tile store without a Python object");
}

/* ---- store, size, discard ------------------------------------------------ */

/* The hooks' context with the GIL taken; NULL (GIL still taken) once the
 * Python object went. */
#define ENTER(c, user)                                                                           \
    sw_py_gil gil_ = sw_py_gil_ensure();                                                       \
    sw_py_tiled_core *c = lookup(user)
#define LEAVE() sw_py_gil_release(gil_)

static sw_status hook_store(sw_carrier *prototype, int secondary, int64_t size, sw_dtype dtype,
                            int zero, void *user, sw_carrier **out, sw_error *err)
{
    (void)dtype;
    (void)prototype;
    ENTER(c, user);
    if (!c) {
        LEAVE();
        return SW_ENOTSUP;
    }
    PyObject *proto = secondary ? c->secondary : c->primary;
    if (Py_TYPE(proto) == &SwBlockDeviceCarrier_Type) {
        /* The core makes block-device tiles and copies them itself (closed
         * class, fixed movement: B-10), flushing before commit (B-11). */
        LEAVE();
        return SW_ENOTSUP;
    }
    sw_status st = SW_OK;
    PyObject *fn = PyObject_GetAttrString(proto, "allocate_like");
    PyObject *args = fn ? Py_BuildValue("(L)", (long long)size) : NULL;
    PyObject *kw = args ? Py_BuildValue("{s:O,s:O,s:O}", "mutable", Py_True, "dtype", c->dtype,
                                        "empty", zero ? Py_False : Py_True)
                        : NULL;
    PyObject *store = kw ? PyObject_Call(fn, args, kw) : NULL;
    Py_XDECREF(kw);
    Py_XDECREF(args);
    Py_XDECREF(fn);
    int64_t n = 0;
    if (store && (!SwCarrier_Check(store) || sw_py_carrier_size(store, &n) < 0 || n < size)) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_RuntimeError,
                         "%s.allocate_like did not return a carrier of %lld slots", sw_py_cname(proto),
                         (long long)size);
        Py_CLEAR(store);
    }
    PyObject *key = store ? carrier_key(CARRIER_CORE(store)) : NULL;
    if (!key || PyDict_SetItem(c->stores, key, store) < 0) {
        if (store && !sw_py_state_released(store) && sw_py_carrier_release(store) < 0)
            PyErr_WriteUnraisable(store);
        st = hook_failed(c, "allocate_like", err);
    } else {
        *out = sw_carrier_ref(CARRIER_CORE(store));
    }
    Py_XDECREF(key);
    Py_XDECREF(store);
    LEAVE();
    return st;
}

static sw_status hook_size(sw_carrier *tier, void *user, int64_t *out, sw_error *err)
{
    ENTER(c, user);
    PyObject *obj = c ? object_of(c, tier) : NULL;
    sw_status st = !obj                               ? unknown_carrier(err)
                   : sw_py_carrier_size(obj, out) < 0 ? hook_failed(c, "size", err)
                                                      : SW_OK;
    LEAVE();
    return st;
}

static void hook_discard(sw_carrier *store, void *user)
{
    ENTER(c, user);
    PyObject *key = c ? carrier_key(store) : NULL;
    PyObject *obj = key ? dict_pop(c->stores, key) : NULL;
    if (PyErr_Occurred())
        PyErr_WriteUnraisable(NULL);
    if (obj && !sw_py_state_released(obj) && sw_py_carrier_release(obj) < 0)
        PyErr_WriteUnraisable(obj);
    Py_XDECREF(obj);
    Py_XDECREF(key);
    LEAVE();
}

/* ---- read and write --------------------------------------------------------- */

const unsigned char *sw_py_tiled_host_base(PyObject *carrier)
{
    PyTypeObject *t = Py_TYPE(carrier);
    if ((t != &SwCPU_Type && t != &SwGeneric_Type) || sw_py_state_released(carrier))
        return NULL;
    return ((SwHostCarrierObject *)carrier)->data;
}

/* `count` slots from slot `src_at` of `src` into slot `dst_at` of `dst`
 * through the pair's span movement, waited for (`private_dst`: see
 * sw_py_tiled_transfer_span_into): 0 done, 1 no such movement, -1. */
static int span_waited(PyObject *src, int64_t src_at, PyObject *dst, int64_t dst_at,
                       int64_t count, int private_dst)
{
    PyObject *completion = NULL;
    int rc = sw_py_tiled_transfer_span_into(src, src_at, dst, dst_at, count, private_dst,
                                            &completion);
    if (rc == 0 && completion) {
        rc = sw_py_tiled_route_wait(completion);
        sw_py_tiled_route_unmark(src, dst);
        Py_DECREF(completion);
    }
    return rc;
}

/* A store written in Python (neither built in nor definition-backed): the
 * kind whose movement may drive an engine's own I/O. */
static int python_store(PyObject *obj)
{
    return (Py_TYPE(obj)->tp_flags & Py_TPFLAGS_HEAPTYPE) && !SW_DEFINED(obj);
}

static void drop_scratch(PyObject *tmp)
{
    if (!sw_py_state_released(tmp) && sw_py_carrier_release(tmp) < 0)
        PyErr_Clear();
    Py_DECREF(tmp);
}

/* `count` slots from `at` of a store written in Python whose pair with CPU
 * drives an engine's own I/O (TensorStore: whole chunks) through that
 * movement into a scratch CPU carrier: 1 done, 0 not such a store, -1. */
static int read_through_engine(PyObject *obj, int64_t at, int64_t count, sw_dtype dtype,
                               void *out)
{
    if (!python_store(obj))
        return 0;
    PyObject *tmp = sw_py_cpu_new(dtype, count, 1, 0);
    if (!tmp)
        return -1;
    int rc = sw_py_tiled_engine_pair(obj, tmp) ? span_waited(obj, at, tmp, 0, count, 1) : 1;
    if (rc == 0)
        memcpy(out, sw_py_tiled_host_base(tmp), (size_t)count * sw_dtype_slot_bytes(dtype));
    drop_scratch(tmp);
    return rc == 0 ? 1 : rc == 1 ? 0 : -1;
}

/* `count` slots into slot `at` of a store written in Python (not a tier
 * given at construction) whose pair from CPU drives an engine's own I/O,
 * through that movement out of a scratch CPU carrier: 1 done, 0 not such a
 * store, -1. */
static int write_through_engine(PyObject *obj, int64_t at, int64_t count, sw_dtype dtype,
                                const void *in)
{
    if (!python_store(obj))
        return 0;
    PyObject *tmp = sw_py_cpu_new(dtype, count, 1, 0);
    if (!tmp)
        return -1;
    memcpy((void *)sw_py_tiled_host_base(tmp), in, (size_t)count * sw_dtype_slot_bytes(dtype));
    int rc = sw_py_tiled_transfer_applies(tmp, obj) ? span_waited(tmp, 0, obj, at, count, 0) : 1;
    drop_scratch(tmp);
    return rc == 0 ? 1 : rc == 1 ? 0 : -1;
}

/* `count` slots from slot `at` of the store `obj` into `out`: a store whose
 * pair with CPU drives an engine's own I/O through a scratch carrier, else
 * slot by slot. 0, or -1 with the exception set. */
static int read_into(PyObject *obj, int64_t at, int64_t count, sw_dtype dtype, void *out)
{
    int done = count > 1 ? read_through_engine(obj, at, count, dtype, out) : 0;
    return done < 0 || (done == 0 && sw_py_carrier_run_as(obj, at, count, dtype, out, NULL) < 0)
               ? -1
               : 0;
}

static sw_status hook_read(sw_carrier *store, int64_t at, int64_t count, void *out, void *user,
                           sw_error *err)
{
    if (!count)
        return SW_OK;
    ENTER(c, user);
    PyObject *obj = c ? object_of(c, store) : NULL;
    sw_status st = !obj ? unknown_carrier(err)
                   : read_into(obj, at, count, SwDType_ID(c->dtype), out) < 0
                       ? hook_failed(c, "read", err)
                       : SW_OK;
    LEAVE();
    return st;
}

/* One projection's reads of tiles kept in the binding's stores, straight
 * into their runs of the destination (a CPU carrier the projection made,
 * known to the hooks while it runs). Every entry is sorted out first, by
 * kind: stores written in Python whose pair with the destination drives
 * an engine's own I/O (TensorStore: whole chunks) have all their reads
 * started at once; the other stores in the batch are then read slot by
 * slot; then every engine read is waited for. The first failure, in that
 * order, is the whole batch's. SW_ENOTSUP (nothing read) when the
 * destination or a store is not known, or no store has such a movement:
 * the core then reads tile by tile. */
static sw_status hook_read_many(sw_carrier *const *store, const int64_t *at, const int64_t *count,
                                sw_carrier *dest, const int64_t *dest_at, int64_t n, void *user,
                                sw_error *err)
{
    ENTER(c, user);
    PyObject *dobj = c ? object_of(c, dest) : NULL;
    sw_status st = dobj && Py_TYPE(dobj) == &SwCPU_Type ? SW_OK : SW_ENOTSUP;
    PyObject **waits = st == SW_OK ? PyMem_Calloc((size_t)n, sizeof *waits) : NULL;
    PyObject **objs = waits ? PyMem_Calloc((size_t)n, sizeof *objs) : NULL;
    char *engine = objs ? PyMem_Calloc((size_t)n, 1) : NULL;
    if (st == SW_OK && !engine)
        st = sw_error_set(err, SW_ENOMEM, "TiledEvictable: out of memory projecting");
    int engines = 0;
    for (int64_t i = 0; st == SW_OK && i < n; i++) {
        objs[i] = object_of(c, store[i]);
        if (!objs[i])
            st = SW_ENOTSUP;
        else if (python_store(objs[i]) && sw_py_tiled_engine_pair(objs[i], dobj))
            engines += engine[i] = 1;
    }
    if (st == SW_OK && !engines)
        st = SW_ENOTSUP;
    sw_dtype dtype = c ? SwDType_ID(c->dtype) : SW_DT_FLOAT32;
    size_t eb = sw_dtype_slot_bytes(dtype);
    unsigned char *base = st == SW_OK ? sw_cpu_pointer(dest) : NULL;
    PyObject *first = NULL;
    for (int64_t i = 0; st == SW_OK && !first && i < n; i++) {
        if (!engine[i])
            continue;
        int rc = sw_py_tiled_transfer_span_into(objs[i], at[i], dobj, dest_at[i], count[i], 1,
                                                &waits[i]);
        if (rc == 1) /* no engine movement after all: this one read here */
            rc = read_into(objs[i], at[i], count[i], dtype, base + (size_t)dest_at[i] * eb);
        if (rc < 0)
            first = sw_py_take_exception();
    }
    for (int64_t i = 0; st == SW_OK && !first && i < n; i++)
        if (!engine[i] && read_into(objs[i], at[i], count[i], dtype,
                                    base + (size_t)dest_at[i] * eb) < 0)
            first = sw_py_take_exception();
    for (int64_t i = 0; st == SW_OK && i < n; i++) {
        if (!waits[i])
            continue;
        if (sw_py_tiled_route_wait(waits[i]) < 0 && !first)
            first = sw_py_take_exception();
        else if (PyErr_Occurred())
            PyErr_Clear();
        sw_py_tiled_route_unmark(objs[i], dobj);
        Py_DECREF(waits[i]);
    }
    PyMem_Free(waits);
    PyMem_Free(objs);
    PyMem_Free(engine);
    if (first) {
        sw_py_restore_exception(first);
        st = hook_failed(c, "read", err);
    }
    LEAVE();
    return st;
}

/* Owner access to a tier given at construction (the TiledEvictable claimed
 * it); none for the stores the store hook made. */
static int64_t tier_token(sw_py_tiled_core *c, PyObject *obj)
{
    uint64_t token = 0;
    sw_error e;
    if (c->te && (obj == c->primary || obj == c->secondary) &&
        sw_tiled_evictable_tier_token(c->te, obj == c->secondary, &token, &e) != SW_OK)
        token = 0;
    return (int64_t)token;
}

static sw_status hook_write(sw_carrier *store, int64_t at, int64_t count, const void *in,
                            void *user, sw_error *err)
{
    ENTER(c, user);
    PyObject *obj = c ? object_of(c, store) : NULL;
    sw_status st = obj ? SW_OK : unknown_carrier(err);
    sw_dtype dtype = c ? SwDType_ID(c->dtype) : SW_DT_FLOAT32;
    int64_t token = obj ? tier_token(c, obj) : 0;
    if (st == SW_OK && token && sw_py_carrier_begin_owner(obj, token) < 0) {
        st = hook_failed(c, "write", err);
        token = 0;
    }
    if (st == SW_OK && !token && count > 1 && obj != c->primary && obj != c->secondary) {
        int done = write_through_engine(obj, at, count, dtype, in);
        if (done < 0)
            st = hook_failed(c, "write", err);
        else if (done)
            count = 0;
    }
    if (st == SW_OK && sw_py_carrier_run_as(obj, at, count, dtype, NULL, in) < 0)
        st = hook_failed(c, "write", err);
    if (token)
        sw_py_carrier_end_owner(obj, token);
    LEAVE();
    return st;
}

/* ---- copy ------------------------------------------------------------------- */

/* A tile copy a provider finishes later: the waiter thread reports it. */
typedef struct tile_copy {
    sw_py_provider_wait w; /* first: what the waiter threads see */
    void *user;
    sw_te_copy *job;
    PyObject *key;      /* who reports a failure */
    PyObject *src, *dst;
    int64_t n;
    int held;           /* counted in flight for the exit hook */
    uint64_t hold;      /* ... by this engine hold */
    struct tile_copy *prev, *next; /* handed to the waiter threads (GIL-protected) */
} tile_copy;

static tile_copy *waiting_head;

static void waiting_unlink(tile_copy *tc)
{
    if (tc->prev)
        tc->prev->next = tc->next;
    else if (waiting_head == tc)
        waiting_head = tc->next;
    if (tc->next)
        tc->next->prev = tc->prev;
    tc->prev = tc->next = NULL;
}

void sw_py_tiled_core_after_fork(void)
{
    /* The waiter threads that would finish these copies are not here, and
     * the core ended the work they served: drop their pending marks. */
    while (waiting_head) {
        tile_copy *tc = waiting_head;
        waiting_unlink(tc);
        sw_py_tiled_route_unmark(tc->src, tc->dst);
        Py_XDECREF(tc->w.completion);
        Py_XDECREF(tc->w.error);
        Py_XDECREF(tc->key);
        Py_DECREF(tc->src);
        Py_DECREF(tc->dst);
        PyMem_RawFree(tc);
    }
}

sw_status sw_py_tiled_core_forked_error(sw_error *err)
{
    sw_error_set(err, SW_ESTATE, "TiledEvictable: the process forked");
    err->detail = SW_TE_ENDED_BY_FORK;
    return SW_ESTATE;
}

static void copy_finished(sw_py_provider_wait *w)
{
    tile_copy *tc = (tile_copy *)w;
    sw_py_tiled_core *c = lookup(tc->user);
    waiting_unlink(tc);
    sw_py_tiled_route_unmark(tc->src, tc->dst);
    PyObject *exc = w->error ? Py_NewRef(w->error) : NULL;
    if (!exc && sw_py_tiled_check_fresh(tc->dst, tc->n) < 0)
        exc = sw_py_take_exception();
    sw_error err;
    sw_status st = SW_OK;
    if (exc) {
        if (c)
            keep_error(c, tc->key, exc);
        st = sw_error_set(&err, SW_EINVAL, "TiledEvictable: the tile copy failed");
    }
    sw_te_copy *job = tc->job;
    int held = tc->held;
    uint64_t hold = tc->hold;
    Py_XDECREF(exc);
    Py_XDECREF(w->completion);
    Py_XDECREF(w->error);
    Py_XDECREF(tc->key);
    Py_DECREF(tc->src);
    Py_DECREF(tc->dst);
    PyMem_RawFree(tc);
    sw_te_copy_done(job, st, st == SW_OK ? NULL : &err);
    if (held)
        sw_py_move_drop_inflight(hold);
}

/* Hand a provider's completion to the waiter threads (counted in flight,
 * so that exit waits for it), or wait for it here when none can take it. */
static void copy_later(sw_py_tiled_core *c, void *user, sw_te_copy *job, PyObject *src,
                       PyObject *dst, PyObject *completion)
{
    tile_copy *tc = PyMem_RawCalloc(1, sizeof *tc);
    if (!tc) {
        PyErr_NoMemory();
        PyObject *key = error_key(), *exc = sw_py_take_exception();
        keep_error(c, key, exc);
        Py_XDECREF(exc);
        Py_XDECREF(key);
        if (sw_py_tiled_route_wait(completion) < 0)
            PyErr_Clear();
        sw_py_tiled_route_unmark(src, dst);
        Py_DECREF(completion);
        sw_error err;
        sw_te_copy_done(job, sw_error_set(&err, SW_ENOMEM, "TiledEvictable: out of memory"),
                        &err);
        return;
    }
    tc->w.completion = completion;
    tc->w.finish = copy_finished;
    tc->user = user;
    tc->job = job;
    tc->key = error_key();
    tc->src = Py_NewRef(src);
    tc->dst = Py_NewRef(dst);
    tc->n = c->tile_size;
    if (sw_py_move_hold_inflight(&tc->hold) == 0) {
        tc->held = 1;
        tc->next = waiting_head;
        if (waiting_head)
            waiting_head->prev = tc;
        waiting_head = tc;
        if (sw_py_provider_wait_submit(&tc->w) == 0)
            return;
    }
    tc->w.error = sw_py_take_exception();
    if (sw_py_tiled_route_wait(completion) < 0)
        PyErr_Clear();
    copy_finished(&tc->w);
}

/* One side is a carrier class written in Python; neither is definition-backed. */
static int python_pair(PyObject *src, PyObject *dst)
{
    int heap = (Py_TYPE(src)->tp_flags & Py_TPFLAGS_HEAPTYPE) ||
               (Py_TYPE(dst)->tp_flags & Py_TPFLAGS_HEAPTYPE);
    return heap && !SW_DEFINED(src) && !SW_DEFINED(dst);
}

/* Whether tile t's footprint in a full tier is the one span [*base, *base
 * + tile_size): every axis before the last with a tile extent above 1
 * spans the whole logical extent. */
static int tile_span(const sw_tile_geometry *g, int64_t t, int64_t *base)
{
    int32_t last = -1;
    for (int32_t k = 0; k < g->rank; k++)
        if (g->tile[k] > 1)
            last = k;
    for (int32_t k = 0; k < last; k++)
        if (g->tile[k] != g->logical[k])
            return 0;
    *base = sw_tiles_slot(g, t, 0);
    return 1;
}

/* Whether a MoveOperation class written in Python is registered for the
 * exact pair (it then replaces the built-in copy). Never raises. */
static int user_operation(PyObject *src, PyObject *dst)
{
    sw_py_route route;
    if (sw_py_route_resolve(Py_TYPE(src), Py_TYPE(dst), &route) < 0) {
        PyErr_Clear();
        return 0;
    }
    return !route.route && route.op_type &&
           (((PyTypeObject *)route.op_type)->tp_flags & Py_TPFLAGS_HEAPTYPE);
}

static int injected_copy_fault(void)
{
    if (!sw_fault_hit("tile_copy"))
        return 0;
    PyErr_SetString(PyExc_OSError, "injected fault: tile copy failed");
    return -1;
}

/* Start the binding's copy of `src` into `dst`: 1 when the pair is not the
 * binding's (the core copies), else 0 / -1 with *completion as
 * sw_py_tiled_transfer_tile gives it. */
static int start_copy(sw_py_tiled_core *c, PyObject *src, int from_full, PyObject *dst,
                      int64_t tile, PyObject **completion)
{
    *completion = NULL;
    if (sw_py_tiled_core_addressable(src) && sw_py_tiled_core_addressable(dst) &&
        (from_full || !user_operation(src, dst)))
        return 1; /* the core's memcpy, pwritev or pread */
    if (!from_full) {
        if (!sw_py_tiled_transfer_applies(src, dst))
            return 1;
        if (injected_copy_fault() < 0)
            return -1;
        return sw_py_tiled_transfer_tile(src, dst, c->tile_size, completion);
    }
    /* A tile held in place by a full tier, with a tier written in Python
     * (TensorStore: whole-chunk I/O) whose footprint is one span. */
    int64_t base;
    if (!c->te || !tile_span(sw_tiled_evictable_geometry(c->te), tile, &base) ||
        !python_pair(src, dst) || !sw_py_tiled_transfer_applies(src, dst))
        return 1;
    if (injected_copy_fault() < 0)
        return -1;
    return sw_py_tiled_transfer_span(src, base, dst, c->tile_size, completion);
}

/* The pairs only the binding copies: a private tile between tiers whose
 * pair has a movement (Python classes, definition routes),
 * or a tile held in place by a full Python tier whose footprint is one
 * span. Everything else goes back to the core (host and file pairs; bound
 * stores through read and write). */
static sw_status hook_copy(sw_te_copy *job, sw_carrier *from, int from_full, sw_carrier *to,
                           int64_t tile, void *user, sw_error *err)
{
    ENTER(c, user);
    PyObject *src = c ? object_of(c, from) : NULL, *dst = c ? object_of(c, to) : NULL;
    sw_status st = SW_ENOTSUP;
    if (src && dst) {
        PyObject *completion = NULL;
        Py_INCREF(src);
        Py_INCREF(dst);
        /* A child forked during the copy finds its marks and access ended
         * by the core (binding.h, sw_carrier_pair_begin). */
        int rc = start_copy(c, src, from_full, dst, tile, &completion);
        if (rc < 0) {
            st = hook_failed(c, "copy", err);
        } else if (rc == 0 && completion) {
            st = SW_OK;
            copy_later(c, user, job, src, dst, completion);
        } else if (rc == 0) {
            st = SW_OK;
            sw_te_copy_done(job, SW_OK, NULL);
        }
        Py_DECREF(src);
        Py_DECREF(dst);
    }
    LEAVE();
    return st;
}

/* X-14 up front for definition-backed tiers (TE-7): a pair with neither a
 * route nor the fallback both providers allow fails the request before
 * any storage is allocated or any provider is called. The core asks only
 * when a tile copies between tile-sized stores (those made like `from` and
 * `to`); tiles held in place and implicit tiles copy slot by slot. */
static sw_status hook_route(sw_carrier *from, sw_carrier *to, void *user, sw_error *err)
{
    ENTER(c, user);
    PyObject *src = c ? object_of(c, from) : NULL, *dst = c ? object_of(c, to) : NULL;
    sw_status st = SW_OK;
    sw_py_route route;
    if (src && dst && (SW_DEFINED(src) || SW_DEFINED(dst)) &&
        sw_py_route_resolve(Py_TYPE(src), Py_TYPE(dst), &route) < 0)
        st = hook_failed(c, "route", err);
    LEAVE();
    return st;
}

/* ---- the policy ------------------------------------------------------------- */

/* policy.plan(required, "projection"): a ResidencyPlan bound to the grid. */
static sw_status policy_plan(const int64_t *required, int64_t n, int32_t rank,
                             const char *purpose, sw_te_plan *plan, void *user, sw_error *err)
{
    ENTER(c, user);
    sw_status st = SW_OK;
    if (!c || c->policy == Py_None || !c->te) {
        LEAVE();
        return SW_OK;
    }
    PyObject *req = sw_py_tile_set_new(rank, n, required);
    PyObject *r = req ? PyObject_CallMethod(c->policy, "plan", "Os", req, purpose) : NULL;
    Py_XDECREF(req);
    if (r && !PyObject_TypeCheck(r, &SwResidencyPlan_Type)) {
        PyErr_Format(PyExc_TypeError, "the residency policy's plan() returned %.100s, not a "
                     "ResidencyPlan", Py_TYPE(r)->tp_name);
        Py_CLEAR(r);
    }
    if (!r || sw_py_residency_plan_apply(r, plan) < 0) {
        st = hook_failed(c, "plan", err);
        c->plan_failed = 1;
    }
    Py_XDECREF(r);
    LEAVE();
    return st;
}

/* ---- what was kept for work that ended ------------------------------------ */


/* What a hook kept for work `w`: handed to the calling thread's key
 * (`to_caller`: a _start call failed after its copies were issued, and
 * raises it), else dropped (w went without anyone collecting it, e.g. a
 * policy's evictions after a projection). */
static void hook_work_end(sw_te_work *w, int to_caller, void *user)
{
    if (sw_py_interpreter_gone())
        return; /* nothing of Python to free any more */
    ENTER(c, user);
    PyObject *pending = sw_py_take_exception(); /* a caller's, kept */
    PyObject *key = c ? PyLong_FromVoidPtr(w) : NULL;
    PyObject *exc = key ? dict_pop(c->errors, key) : NULL;
    if (exc && to_caller) {
        PyObject *mine = PyLong_FromUnsignedLong(PyThread_get_thread_ident());
        keep_error(c, mine, exc);
        Py_XDECREF(mine);
    }
    Py_XDECREF(exc);
    Py_XDECREF(key);
    PyErr_Clear();
    if (pending)
        sw_py_restore_exception(pending);
    LEAVE();
}

/* ---- the hooks -------------------------------------------------------------- */

void sw_py_tiled_core_hooks(sw_py_tiled_core *c, sw_te_tier_hooks *out)
{
    memset(out, 0, sizeof *out);
    out->store = hook_store;
    out->copy = hook_copy;
    out->read = hook_read;
    out->write = hook_write;
    out->size = hook_size;
    out->discard = hook_discard;
    out->read_many = hook_read_many;
    out->core_classes = 1; /* the core's own classes need no Python */
    out->work_end = hook_work_end;
    out->route = hook_route;
    out->user = (void *)c->id;
    out->dtype = SwDType_ID(c->dtype);
}

void sw_py_tiled_core_policy(sw_py_tiled_core *c, sw_te_policy *out)
{
    out->plan = c->policy == Py_None ? NULL : policy_plan;
    out->user = (void *)c->id;
}
