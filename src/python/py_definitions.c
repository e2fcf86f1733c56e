/* The definition table (contract-carriers ): which
 * CarrierDefinition each carrier class has, and which classes are
 * observed.
 *
 * Definitions are keyed by the class's identity; nothing here looks at
 * base classes. A class is *observed* when an instance is made
 * (Carrier.__new__, py_carrier.c), when a storage question is answered for
 * it, or when a legacy registry call, dispatch_move, move or move_async
 * names it; from then on its definition status is frozen. The observed set
 * holds weak references, so a class that dies does not keep its entry (and
 * a new class that reuses its address starts unobserved).
 *
 * The table sits below Carrier, which reads it when an instance is made;
 * the extension API (py_extension.c) checks and fills it. */
#include "sw_carrier.h"
#include "sw_extension.h"

static PyObject *definitions; /* {id(cls): (cls, definition)} */
static PyObject *observed;    /* {id(cls): weakref(cls)} */

static PyObject *class_key(PyTypeObject *cls)
{
    return PyLong_FromVoidPtr(cls);
}

/* Shipped C types get a definition only through
 * sw_py_register_shipped_definition: they are answered from this short
 * list, so moves between built-ins never build a dictionary key. */
#define MAX_SHIPPED_DEFINED 4
static PyTypeObject *shipped_defined[MAX_SHIPPED_DEFINED];
static PyObject *shipped_definitions[MAX_SHIPPED_DEFINED];

PyObject *sw_py_definition_of(PyTypeObject *cls)
{
    if (sw_py_class_is_shipped(cls)) {
        for (int i = 0; i < MAX_SHIPPED_DEFINED && shipped_defined[i]; i++)
            if (shipped_defined[i] == cls)
                return shipped_definitions[i];
        return NULL;
    }
    if (PyDict_GET_SIZE(definitions) == 0)
        return NULL;
    PyObject *key = class_key(cls);
    if (!key) {
        PyErr_Clear();
        return NULL;
    }
    PyObject *entry = PyDict_GetItem(definitions, key);
    Py_DECREF(key);
    return entry ? PyTuple_GET_ITEM(entry, 1) : NULL;
}

int sw_py_definition_insert(PyTypeObject *cls, PyObject *definition)
{
    PyObject *key = class_key(cls);
    PyObject *entry = key ? PyTuple_Pack(2, (PyObject *)cls, definition) : NULL;
    int rc = entry ? PyDict_SetItem(definitions, key, entry) : -1;
    if (rc == 0 && sw_py_class_is_shipped(cls))
        for (int i = 0; i < MAX_SHIPPED_DEFINED; i++)
            if (!shipped_defined[i]) {
                shipped_defined[i] = cls;
                shipped_definitions[i] = definition; /* the table entry keeps it alive */
                break;
            }
    Py_XDECREF(entry);
    Py_XDECREF(key);
    return rc;
}

void sw_py_definition_remove(PyTypeObject *cls)
{
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyObject *key = class_key(cls);
    if (!key || PyDict_DelItem(definitions, key) < 0)
        PyErr_Clear();
    Py_XDECREF(key);
    PyErr_Restore(t, v, tb);
}

int sw_py_class_observed(PyTypeObject *cls)
{
    PyObject *key = class_key(cls);
    if (!key)
        return -1;
    int r = PyDict_Contains(observed, key);
    Py_DECREF(key);
    return r;
}

int sw_py_observe_class(PyTypeObject *cls)
{
    if (sw_py_class_is_shipped(cls)) /* their status never changes */
        return 0;
    PyObject *key = class_key(cls);
    if (!key)
        return -1;
    int rc = PyDict_Contains(observed, key);
    if (rc == 0) {
        PyObject *ref = sw_py_weakref_forgetting(cls, observed, key);
        rc = ref ? PyDict_SetItem(observed, key, ref) : -1;
        Py_XDECREF(ref);
    }
    Py_DECREF(key);
    return rc < 0 ? -1 : 0;
}

int sw_py_definitions_init(PyObject *module)
{
    (void)module;
    definitions = PyDict_New();
    observed = PyDict_New();
    return definitions && observed ? 0 : -1;
}
