/* Freed objects of one collected type, kept for the next one of it (as
 * CPython keeps freed tuples). Taking one makes no allocation, and so
 * nothing that counts toward the cyclic collector's next run: a round of
 * moves in flight then makes its handles and result Tensors without setting
 * off a collection. The GIL guards a list: every such object is made and
 * freed with it held. A kept object is untracked and cleared; the taker
 * sets its fields and tracks it. */
#ifndef SW_SPARE_OBJECTS_H
#define SW_SPARE_OBJECTS_H

#include <Python.h>
#include <stdint.h>

typedef struct sw_py_spares {
    PyObject **slots;
    int cap;
    int count;
} sw_py_spares;

/* A file-scope list `name` of at most n objects. */
#define SW_PY_SPARES(name, n)                                                 \
    static PyObject *name##_slots[n];                                         \
    static sw_py_spares name = {name##_slots, n, 0}

/* Start loading, for writing, the cache lines of the object the next take
 * returns (its collector header and `bytes`). A kept object was freed a
 * round ago and is cold: a round of moves in flight then paid a miss on
 * each of its lines, one move after another; loaded here, they arrive
 * while the caller copies this move's bytes. */
static inline void sw_py_spare_prefetch_next(const sw_py_spares *s, size_t bytes)
{
    if (s->count == 0)
        return;
    const size_t gc_head = 2 * sizeof(void *); /* the collector's header, before the object */
    uintptr_t start = (uintptr_t)s->slots[s->count - 1] - gc_head;
    for (uintptr_t line = start & ~(uintptr_t)63; line < start + gc_head + bytes; line += 64)
        __builtin_prefetch((const void *)line, 1);
}

/* A kept object as a new reference of `type` (its other fields as they
 * were left), or NULL when none is kept. */
static inline PyObject *sw_py_spare_take(sw_py_spares *s, PyTypeObject *type)
{
    if (s->count == 0)
        return NULL;
    PyObject *o = s->slots[--s->count];
    (void)PyObject_Init(o, type);
    sw_py_spare_prefetch_next(s, (size_t)type->tp_basicsize);
    return o;
}

/* 1 when `o`'s memory is kept; 0 when the list is full (free it). */
static inline int sw_py_spare_keep(sw_py_spares *s, PyObject *o)
{
    if (s->count == s->cap)
        return 0;
    s->slots[s->count++] = o;
    return 1;
}

#endif
