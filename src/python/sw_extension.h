/* Private interface of the carrier-extension API (contract-carriers X-1 ..
 * X-15) between py_extension.c (the value types, the definition registry,
 * sealing, route resolution), py_defined_carrier.c (carriers whose storage a
 * StorageProvider supplies), py_provider_wait.c (the waiter threads of
 * provider completions) and the carrier and movement files. */
#ifndef STRIDEWEAVE_SW_EXTENSION_H
#define STRIDEWEAVE_SW_EXTENSION_H

#include "sw_python.h"

/* The value types are immutable records: a fixed array of object fields
 * (the type's tp_basicsize says how many), read-only attributes. */
typedef struct SwRecordObject {
    PyObject_HEAD
    PyObject *f[1];
} SwRecordObject;

#define SW_RECORD_FIELD(o, i) (((SwRecordObject *)(o))->f[i])

enum { SW_STORAGE_SUPPORTS_DTYPE, SW_STORAGE_PHYSICAL_SIZE, SW_STORAGE_ALLOCATE,
       SW_STORAGE_RELEASE, SW_STORAGE_READ, SW_STORAGE_WRITE,
       SW_STORAGE_ELEMENTWISE_FALLBACK, SW_STORAGE_NFIELDS };
enum { SW_ROUTE_SOURCE_CLASS, SW_ROUTE_DESTINATION_CLASS, SW_ROUTE_ID, SW_ROUTE_PROVIDER,
       SW_ROUTE_NFIELDS };
enum { SW_DEFINITION_STORAGE, SW_DEFINITION_KERNELS, SW_DEFINITION_TRANSFERS,
       SW_DEFINITION_COMPOSITE, SW_DEFINITION_FACETS, SW_DEFINITION_NFIELDS };

extern PyTypeObject SwUnsupported_Type;
extern PyTypeObject SwStorageProvider_Type;
extern PyTypeObject SwTransferProvider_Type;
extern PyTypeObject SwTransferRoute_Type;
extern PyTypeObject SwTransferRequest_Type;
extern PyTypeObject SwPreparedTransfer_Type;
extern PyTypeObject SwCarrierDefinition_Type;
/* The framework's MoveOperation class that governs a definition route
 * (MoveEvent.operation_type, the move's autograd node). */
extern PyTypeObject SwTransferRouteMove_Type;

/* ---- definitions and sealing (py_extension.c) ---------------------------- */

/* ---- the definition table (py_definitions.c, below Carrier) ---------------- */

/* Shipped carriers are the static Carrier types. */
static inline int sw_py_class_is_shipped(PyTypeObject *cls)
{
    return !(cls->tp_flags & Py_TPFLAGS_HEAPTYPE);
}
/* The CarrierDefinition registered for exactly `cls` (no base-class
 * lookup), borrowed, or NULL (no exception) for a definition-free class. */
PyObject *sw_py_definition_of(PyTypeObject *cls);
/* Give exactly `cls` `definition` (the table keeps both alive; the caller
 * checked it may): 0, or -1 with an exception. Remove takes it back after
 * a later step failed, leaving that step's exception pending. */
int sw_py_definition_insert(PyTypeObject *cls, PyObject *definition);
void sw_py_definition_remove(PyTypeObject *cls);
/* Whether exactly `cls` was observed: 1/0, -1 with an exception. */
int sw_py_class_observed(PyTypeObject *cls);

/* ---- the extension API (py_extension.c) ------------------------------------ */

/* Make the shipped C carrier type `cls` definition-backed with no routes
 * and no fallback (TiledEvictable): moves from or into it fail
 * NotImplementedError, legacy registry calls naming it RuntimeError, and
 * registering a definition for it TypeError. Call from its init. */
int sw_py_register_shipped_definition(PyTypeObject *cls);
/* freeze the definition status of exactly `cls` (py_definitions.c).
 * 0 / -1. */
int sw_py_observe_class(PyTypeObject *cls);

/* Binding routes in the core's registry keyed by the core classes of the
 * pair's carriers (sw_py_carrier_core_class, sw_carrier.h: a route never
 * observes its classes; a Python class's routes are forgotten when it is
 * collected),
 * holding a Python object as payload (GIL held). Add: 0, or -1 with an
 * exception (RuntimeError when the pair has a route already). Payload: the
 * one registered for exactly (src, dst), borrowed: 1, 0 none, -1. Remove:
 * 1 with the payload's reference handed to the caller, 0 none, -1. */
int sw_py_route_add(PyTypeObject *src, PyTypeObject *dst, PyObject *payload);
int sw_py_route_payload(PyTypeObject *src, PyTypeObject *dst, PyObject **payload);
int sw_py_route_remove(PyTypeObject *src, PyTypeObject *dst, PyObject **payload);

/* X-14's answer the definitions give for exactly (src, dst), from the
 * core's route registry: the TransferRoute registered for it (borrowed: the
 * registry keeps it) or NULL, and whether the pair may fall back element
 * by element (both classes allowed it, allow_fallback). 0, or -1 with an
 * exception. The whole resolution, the move registry's answer for two
 * undefined classes included, is sw_py_route_resolve (sw_move.h). */
int sw_py_route_defined(PyTypeObject *src, PyTypeObject *dst, PyObject **route,
                        int *may_fall_back);
/* A fresh TransferRequest for moving `tensor` into `destination`. */
PyObject *sw_py_transfer_request_new(PyObject *tensor, PyObject *destination);

int sw_py_extension_init(PyObject *module);

/* ---- definition-backed carriers (py_defined_carrier.c) ------------------- */

/* Framework state a definition-backed carrier keeps in SwCarrierObject:
 * `definition` (set by Carrier.__new__ when the exact class has one),
 * `storage_dtype` (set by a finished construction). */
#define SW_DEFINED(o) (((SwCarrierObject *)(o))->definition != NULL)

/* Carrier.__init__(slots, *, dtype, mutable=True) of a defined class. */
int sw_py_defined_init(PyObject *self, PyObject *args, PyObject *kwds);
/* -1 with RuntimeError when construction never finished. */
int sw_py_defined_ready(PyObject *self);
int sw_py_defined_size(PyObject *self, int64_t *out);            /* 0 after release */
PyObject *sw_py_defined_load(PyObject *self, int64_t index);     /* live, in range */
/* Normalize `value` to the storage dtype (new reference to the Python
 * value the provider is given). */
PyObject *sw_py_defined_normalize(PyObject *self, PyObject *value);
int sw_py_defined_store(PyObject *self, int64_t index, PyObject *normalized);
int sw_py_defined_release(PyObject *self);
int sw_py_defined_allocate(PyObject *self, int64_t nslots);
int sw_py_defined_supports(PyObject *self, PyObject *dtype);     /* 1/0/-1 */
PyObject *sw_py_defined_new_like(PyObject *self, PyObject *args, PyObject *kwds);
PyObject *sw_py_defined_allocate_like(PyObject *self, PyObject *args, PyObject *kwds);

/* ---- provider completions (py_provider_wait.c) --------------------------- */

/* One incomplete ProviderCompletion to wait for. A waiter thread calls its
 * wait(), stores the outcome in `error` (NULL on success, else an
 * exception instance), then calls `finish` holding the GIL. */
typedef struct sw_py_provider_wait sw_py_provider_wait;
struct sw_py_provider_wait {
    PyObject *completion;
    PyObject *error;
    void (*finish)(sw_py_provider_wait *w);
    sw_py_provider_wait *next;
    /* Set: the waiter thread calls run(w) with the GIL held instead of
     * waiting for `completion` (a move's Python _copy off the caller's
     * thread); run hands the request on itself and never touches `w` once
     * it has. */
    void (*run)(sw_py_provider_wait *w);
};
/* TypeError unless `obj` has the ProviderCompletion shape: a `done` that
 * is exactly a bool, a callable wait(), no __await__. 0 / -1. */
int sw_py_check_provider_completion(PyObject *obj);
/* Queue `w` for the waiter threads (GIL held), starting one when none is
 * idle. 0, or -1 with an exception when no thread can run it. */
int sw_py_provider_wait_submit(sw_py_provider_wait *w);
/* At exit, once nothing waits: stop the waiter threads and, with `join`,
 * wait for them (without it, threads stuck in a provider's wait() stay
 * behind). Call without the GIL. */
void sw_py_provider_wait_shutdown(int join);
void sw_py_provider_wait_after_fork(void);
int sw_py_provider_wait_init(void);

#endif
