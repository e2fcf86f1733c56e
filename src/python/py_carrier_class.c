/* The core carrier class of each Carrier class whose carriers the core
 * holds as STATE_ONLY (carrier.h): every Python subclass of Carrier, and
 * the shipped ones that keep their values in the binding. One class per
 * Python class, made when first needed (its first instance, or its first
 * route), so that a carrier's core class is its route key (route.h): the
 * core finds the route of two carriers from the carriers themselves.
 *
 * Lifetime: the table below holds one reference to each class while its
 * Python class lives; every core carrier holds its own, and so does every
 * route naming it. When the Python class is collected, its weakref's
 * callback drops the entry: the class's routes are forgotten (their
 * payloads decref'd, with the GIL the callback holds) and the table's
 * reference goes; core carriers of the class still alive (a move in
 * flight) keep it until they go.
 *
 * The class is STATE_ONLY: the core never calls into Python with a
 * carrier mutex held (the deadlock rule of carrier.h); the binding answers
 * slots, size and dtype through its own hooks. It is SLOTS_UNLOCKED too
 * once the batch slot callbacks are registered (py_carrier_slots.c, at
 * module init): the core then reaches the slots through them, with no
 * lock held, for its value reads and writes (sw_carrier_read_layout_as,
 * _write_layout_as; the writes step the version themselves). Their
 * `impl` is a slot box naming the carrier's Python object (below).
 *
 * May depend on: the core only. */
#include "sw_carrier.h"

#include "strideweave/route.h"

static PyObject *classes; /* {id(cls): (capsule of its core class, weakref(cls))} */

#define CLASS_CAPSULE "strideweave.carrier_class"

/* A class's entry in `table` goes when the class dies: its weakref's
 * callback (self: the pair (table, key)) deletes it, so a class at a
 * reused address starts afresh. */
static PyObject *forget_entry(PyObject *table_and_key, PyObject *weakref)
{
    (void)weakref;
    if (PyDict_DelItem(PyTuple_GET_ITEM(table_and_key, 0), PyTuple_GET_ITEM(table_and_key, 1)) <
        0)
        PyErr_Clear();
    Py_RETURN_NONE;
}

static PyMethodDef forget_def = {"_forget_class_entry", forget_entry, METH_O, NULL};

PyObject *sw_py_weakref_forgetting(PyTypeObject *cls, PyObject *table, PyObject *key)
{
    PyObject *self = PyTuple_Pack(2, table, key);
    PyObject *cb = self ? PyCFunction_New(&forget_def, self) : NULL;
    PyObject *ref = cb ? PyWeakref_NewRef((PyObject *)cls, cb) : NULL;
    Py_XDECREF(cb);
    Py_XDECREF(self);
    return ref;
}

/* The Python class is gone: its routes go, then the table's reference. */
static void class_free(PyObject *capsule)
{
    const sw_carrier_class *cls = PyCapsule_GetPointer(capsule, CLASS_CAPSULE);
    sw_route_forget_class(cls);
    sw_carrier_class_unref(cls);
}

/* The batch slot callbacks every class gets (NULL until registered). */
static sw_carrier_class slot_hooks;

void sw_py_carrier_class_set_slot_hooks(const sw_carrier_class *hooks)
{
    slot_hooks = *hooks; /* read_slots, write_slots, drop_handles */
}

/* ---- slot boxes ----------------------------------------------------------
 * The core carrier of a Python carrier can outlive the object (a move in
 * flight holds it), so its `impl` is not the object but a box naming it,
 * emptied when the object goes (GIL held for both). The core frees the box
 * with the carrier (the class's destroy, no GIL needed). */

sw_py_slot_box *sw_py_slot_box_new(PyObject *obj)
{
    sw_py_slot_box *box = PyMem_RawMalloc(sizeof *box);
    if (box)
        box->obj = obj;
    return box;
}

void sw_py_slot_box_forget(sw_py_slot_box *box)
{
    if (box)
        box->obj = NULL;
}

static void slot_box_free(void *impl)
{
    PyMem_RawFree(impl);
}

static PyObject *class_capsule(PyTypeObject *type)
{
    sw_carrier_class tmpl = {.name = _PyType_Name(type), .flags = SW_CARRIER_CLASS_STATE_ONLY,
                             .destroy = slot_box_free};
    if (slot_hooks.read_slots) {
        tmpl.flags |= SW_CARRIER_CLASS_SLOTS_UNLOCKED;
        tmpl.read_slots = slot_hooks.read_slots;
        tmpl.write_slots = slot_hooks.write_slots;
        tmpl.drop_handles = slot_hooks.drop_handles;
        /* each slot write steps the version itself (py_carrier_slots.c) */
        if (tmpl.write_slots)
            tmpl.flags |= SW_CARRIER_CLASS_WRITES_STEP_VERSION;
    }
    const sw_carrier_class *cls;
    sw_error err;
    if (sw_carrier_class_new(&tmpl, &cls, &err) != SW_OK)
        return PyErr_NoMemory();
    PyObject *capsule = PyCapsule_New((void *)cls, CLASS_CAPSULE, class_free);
    if (!capsule)
        sw_carrier_class_unref(cls);
    return capsule;
}

/* The entry of `type`: its class, and the weakref that drops it. */
static PyObject *class_entry(PyTypeObject *type, PyObject *key)
{
    PyObject *capsule = class_capsule(type);
    PyObject *ref = capsule ? sw_py_weakref_forgetting(type, classes, key) : NULL;
    PyObject *entry = ref ? PyTuple_Pack(2, capsule, ref) : NULL;
    Py_XDECREF(ref);
    Py_XDECREF(capsule);
    return entry;
}

const sw_carrier_class *sw_py_state_only_class(PyTypeObject *type)
{
    if (!classes && !(classes = PyDict_New()))
        return NULL;
    PyObject *key = PyLong_FromVoidPtr(type);
    if (!key)
        return NULL;
    PyObject *entry = PyDict_GetItemWithError(classes, key);
    if (!entry && !PyErr_Occurred()) {
        PyObject *fresh = class_entry(type, key);
        if (fresh && PyDict_SetItem(classes, key, fresh) == 0)
            entry = fresh;
        Py_XDECREF(fresh); /* the table keeps it */
    }
    Py_DECREF(key);
    return entry ? PyCapsule_GetPointer(PyTuple_GET_ITEM(entry, 0), CLASS_CAPSULE) : NULL;
}
