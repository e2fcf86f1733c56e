/* Synchronous carrier marks a forked child must clear (sw_fork_guard.h). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "sw_fork_guard.h"
#include "sw_python.h"

static sw_fork_guard *guards; /* GIL-protected */

#define MAX_INHERITED_ENDS 4
static void (*inherited_ends[MAX_INHERITED_ENDS])(void);

int sw_fork_register_inherited_end(void (*end)(void))
{
    for (int i = 0; i < MAX_INHERITED_ENDS; i++) {
        if (!inherited_ends[i]) {
            inherited_ends[i] = end;
            return 0;
        }
    }
    PyErr_SetString(PyExc_SystemError, "too many kinds of inherited work to end after fork");
    return -1;
}

void sw_fork_end_inherited_work(void)
{
    for (int i = 0; i < MAX_INHERITED_ENDS && inherited_ends[i]; i++)
        inherited_ends[i]();
}

void sw_fork_guard_enter(sw_fork_guard *g, void (*end)(sw_fork_guard *g))
{
    g->end = end;
    g->thread = PyThread_get_thread_ident();
    g->prev = NULL;
    g->next = guards;
    if (guards)
        guards->prev = g;
    guards = g;
}

void sw_fork_guard_leave(sw_fork_guard *g)
{
    if (g->prev)
        g->prev->next = g->next;
    else if (guards == g)
        guards = g->next;
    if (g->next)
        g->next->prev = g->prev;
    g->prev = g->next = NULL;
}

/* An `end` may run code that enters or leaves guards: start over after
 * each one. */
void sw_fork_guards_end_inherited(void)
{
    unsigned long me = PyThread_get_thread_ident();
    for (;;) {
        sw_fork_guard *g = guards;
        while (g && g->thread == me)
            g = g->next;
        if (!g)
            return;
        sw_fork_guard_leave(g);
        g->end(g);
    }
}

void sw_fork_guard_drop_access(PyObject *carrier, unsigned long thread)
{
    if (!carrier)
        return;
    sw_py_carrier_drop_inherited_access(carrier, thread);
}
