/* Synchronous carrier marks a forked child must clear (sw_fork_guard.h). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "sw_fork_guard.h"
#include "sw_python.h"

static sw_fork_guard *guards; /* GIL-protected */

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
