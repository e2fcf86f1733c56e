/* The two tiers of a composite carrier (py_tiers.c): what Evictable
 * (py_evictable.c) and TiledEvictable (py_tiled_evictable.c) ask of their
 * primary and secondary tiers in the same way. GIL held; each may run the
 * tiers' hooks (user code). */
#ifndef STRIDEWEAVE_SW_TIERS_H
#define STRIDEWEAVE_SW_TIERS_H

#include "sw_python.h"

/* The dtype both tiers hold (a new reference in *dtype): 0, or -1 with
 * TypeError when they differ (or a dtype hook's exception). */
int sw_py_tiers_dtype(PyObject *primary, PyObject *secondary, PyObject **dtype);
/* Whether both tiers support `dtype`: 1, 0, or -1 with an exception. */
int sw_py_tiers_support_dtype(PyObject *primary, PyObject *secondary, sw_dtype dtype);
/* tier.<name>(first, mutable=mutable_, dtype=dtype[, empty=empty]): a
 * tier's factory (new_like, allocate_like) for a fresh carrier like it;
 * `empty` NULL passes none. A new reference, or NULL with an exception. */
PyObject *sw_py_tier_factory(PyObject *tier, const char *name, PyObject *first,
                             PyObject *mutable_, PyObject *dtype, PyObject *empty);

#endif
