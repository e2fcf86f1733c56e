/* The binding-tier hooks of the core TiledEvictable behind every Python
 * TiledEvictable (py_tiled_core.c): the context the hooks serve. */
#ifndef STRIDEWEAVE_SW_TILED_CORE_H
#define STRIDEWEAVE_SW_TILED_CORE_H

#include "sw_python.h"
#include "strideweave/tiled_evictable.h"

#define CARRIER_CORE(o) (((SwCarrierObject *)(o))->core)

typedef struct sw_py_tiled_core {
    uintptr_t id;                  /* what the core passes back as `user` */
    PyObject *primary, *secondary; /* the Python tiers given at construction */
    PyObject *dtype;
    PyObject *policy;              /* None or an object with plan() */
    int64_t tile_size;
    PyObject *stores;              /* core carrier address -> Python store */
    PyObject *errors;              /* work or thread -> what a hook raised */
    sw_tiled_evictable *te;        /* set once constructed (borrowed) */
    int plan_failed;               /* the policy's plan() raised (GIL-protected) */
} sw_py_tiled_core;

/* GIL held. NULL with an exception. */
sw_py_tiled_core *sw_py_tiled_core_new(PyObject *primary, PyObject *secondary, PyObject *dtype,
                                       PyObject *policy, int64_t tile_size);
/* Forget the context: hooks the core still calls for it (storage it drops
 * at its last reference) find nothing and leave the stores to the core. */
void sw_py_tiled_core_free(sw_py_tiled_core *c);
/* The core's hooks and policy for `c`. */
void sw_py_tiled_core_hooks(sw_py_tiled_core *c, sw_te_tier_hooks *out);
void sw_py_tiled_core_policy(sw_py_tiled_core *c, sw_te_policy *out);
/* What a hook raised for work `w` (NULL: this thread's blocking call), new
 * reference or NULL; forgotten afterwards. GIL held. */
PyObject *sw_py_tiled_core_take_error(sw_py_tiled_core *c, sw_te_work *w);
/* Raise what a hook raised for `w` (NULL: this thread), else `err`. -1. */
int sw_py_tiled_core_raise(sw_py_tiled_core *c, sw_te_work *w, const sw_error *err);
/* While a projection writes into `dest` (a carrier the core reaches through
 * the write hook): make it known to the hooks. 0 / -1. */
int sw_py_tiled_core_add_store(sw_py_tiled_core *c, PyObject *dest);
void sw_py_tiled_core_forget_store(sw_py_tiled_core *c, PyObject *dest);
/* In a forked child (GIL held): drop the marks of the tile copies the
 * parent's waiter threads were finishing. */
void sw_py_tiled_core_after_fork(void);
/* Fill `err` as the core ends work a forked child inherited (SW_ESTATE,
 * err->detail SW_TE_ENDED_BY_FORK), for a handle the binding ends itself
 * there. SW_ESTATE. */
sw_status sw_py_tiled_core_forked_error(sw_error *err);

#endif
