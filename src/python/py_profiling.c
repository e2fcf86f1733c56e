/* Profiler: a single-use context that records, for its entering thread,
 * move submissions and their terminal outcomes (MoveEvent records), and
 * executions of dispatched operations (ProfilerEvent), nested through a
 * per-thread stack of open spans.
 *
 * State lives in C; the record types are frozen dataclasses declared in
 * strideweave._types (architecture.md allows exactly that). Every mutation
 * happens with the GIL held. The active profiler of a thread is a C11
 * thread-local strong reference; a profiler abandoned by an exit from
 * another thread is dropped lazily by its owner thread. Profiling never
 * fails or delays a move: a record that cannot be made is skipped. */
#include "sw_profiling.h"

#include "strideweave/clock.h"
#include "strideweave/move.h"

#include <string.h>

typedef enum { P_NEW, P_ACTIVE, P_EXITED, P_ABANDONED } profiler_state;

typedef struct SwProfilerObject {
    PyObject_HEAD
    PyObject *selection;   /* tuple of carrier classes, or NULL for all */
    int record_shapes;
    int entered;           /* the one entry attempt was made */
    profiler_state state;
    unsigned long owner;   /* entering thread */
    PyObject *events;      /* list of ProfilerEvent */
    PyObject *move_events; /* list of MoveEvent */
} SwProfilerObject;

#define PROF(o) ((SwProfilerObject *)(o))

static _Thread_local PyObject *active; /* strong reference, or NULL */
static int64_t last_move_id, last_request_id; /* guarded by the GIL */
static PyObject *move_event_class, *aggregate_class;

static int in_computation(PyObject *profiler);

/* ---- construction -------------------------------------------------------- */

static int parse_selection(PyObject *carriers, PyObject **out)
{
    *out = NULL;
    if (carriers == Py_None)
        return 0;
    PyObject *it = PyObject_GetIter(carriers);
    if (!it) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError,
                         "carriers must be None or an iterable of Carrier classes, not %.100s",
                         Py_TYPE(carriers)->tp_name);
        }
        return -1;
    }
    PyObject *list = PySequence_List(it);
    Py_DECREF(it);
    if (!list)
        return -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        PyObject *c = PyList_GET_ITEM(list, i);
        if (!PyType_Check(c) || !PyType_IsSubtype((PyTypeObject *)c, &SwCarrier_Type)) {
            PyErr_Format(PyExc_TypeError,
                         "carriers must hold Carrier classes, not %R", c);
            Py_DECREF(list);
            return -1;
        }
    }
    *out = PyList_AsTuple(list);
    Py_DECREF(list);
    return *out ? 0 : -1;
}

static PyObject *profiler_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"carriers", "record_shapes", NULL};
    PyObject *carriers = Py_None, *record = Py_False, *selection;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|$OO:Profiler", kwlist, &carriers,
                                     &record))
        return NULL;
    if (parse_selection(carriers, &selection) < 0)
        return NULL;
    if (!PyBool_Check(record)) {
        Py_XDECREF(selection);
        PyErr_Format(PyExc_TypeError, "record_shapes must be True or False, not %.100s",
                     Py_TYPE(record)->tp_name);
        return NULL;
    }
    SwProfilerObject *self = PyObject_GC_New(SwProfilerObject, type);
    if (!self) {
        Py_XDECREF(selection);
        return NULL;
    }
    self->selection = selection;
    self->record_shapes = record == Py_True;
    self->entered = 0;
    self->state = P_NEW;
    self->owner = 0;
    self->events = PyList_New(0);
    self->move_events = PyList_New(0);
    PyObject_GC_Track(self);
    if (!self->events || !self->move_events) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int profiler_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(PROF(self)->selection);
    Py_VISIT(PROF(self)->events);
    Py_VISIT(PROF(self)->move_events);
    return 0;
}

static int profiler_clear(PyObject *self)
{
    Py_CLEAR(PROF(self)->selection);
    Py_CLEAR(PROF(self)->events);
    Py_CLEAR(PROF(self)->move_events);
    return 0;
}

static void profiler_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    profiler_clear(self);
    PyObject_GC_Del(self);
}

/* ---- lifecycle -------------------------------------------------------------- */

/* Profilers entered and not yet exited or abandoned, all threads (GIL
 * held). The core's profiling hook is set while there is one, so moves
 * made with none pay nothing for it. */
static long n_active;

static void profilers_active(int delta)
{
    n_active += delta;
    /* One subscriber of the core's among others (a C host's may watch
     * too); it cannot fail but for memory, and then records go without
     * the core's stamps (submitted and completed fall back to the clock). */
    if (n_active == delta) /* 0 -> 1 */
        sw_move_add_profile_hook(sw_py_profile_core_event, NULL, NULL);
    else if (n_active == 0)
        sw_move_remove_profile_hook(sw_py_profile_core_event, NULL, NULL);
}

/* This thread's active profiler, dropping one abandoned from elsewhere.
 * Borrowed; NULL when none. */
static PyObject *current(void)
{
    if (active && PROF(active)->state != P_ACTIVE)
        Py_CLEAR(active);
    return active;
}

static PyObject *profiler_enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    SwProfilerObject *p = PROF(self);
    if (p->entered) {
        PyErr_SetString(PyExc_RuntimeError,
                        "a profiler is single-use: create a new one for each block");
        return NULL;
    }
    p->entered = 1;
    if (current()) {
        PyErr_SetString(PyExc_RuntimeError,
                        "another profiler is already active on this thread");
        return NULL;
    }
    p->state = P_ACTIVE;
    profilers_active(1);
    p->owner = PyThread_get_thread_ident();
    active = Py_NewRef(self);
    return Py_NewRef(self);
}

static PyObject *profiler_exit(PyObject *self, PyObject *args)
{
    (void)args;
    SwProfilerObject *p = PROF(self);
    if (p->state != P_ACTIVE) {
        PyErr_SetString(PyExc_RuntimeError, "this profiler is not active");
        return NULL;
    }
    if (p->owner != PyThread_get_thread_ident()) {
        /* Its records are discarded; its owner thread forgets it lazily. */
        p->state = P_ABANDONED;
        profilers_active(-1);
        PyList_SetSlice(p->events, 0, PY_SSIZE_T_MAX, NULL);
        PyList_SetSlice(p->move_events, 0, PY_SSIZE_T_MAX, NULL);
        PyErr_SetString(PyExc_RuntimeError,
                        "a profiler must be exited on the thread that entered it; "
                        "this one is now abandoned and keeps no records");
        return NULL;
    }
    if (in_computation(self)) {
        PyErr_SetString(PyExc_RuntimeError,
                        "cannot exit a profiler while an operation it records is running "
                        "on this thread");
        return NULL;
    }
    p->state = P_EXITED;
    profilers_active(-1);
    if (active == self)
        Py_CLEAR(active);
    Py_RETURN_FALSE;
}

static int require_results(SwProfilerObject *p)
{
    if (p->state == P_EXITED)
        return 0;
    PyErr_SetString(PyExc_RuntimeError,
                    "profiling results are available only after context exit");
    return -1;
}

int sw_py_profiler_records(PyObject *profiler, PyObject **events, PyObject **move_events)
{
    if (require_results(PROF(profiler)) < 0)
        return -1;
    *events = PROF(profiler)->events;
    *move_events = PROF(profiler)->move_events;
    return 0;
}

static PyObject *profiler_events(PyObject *self, PyObject *unused)
{
    (void)unused;
    return require_results(PROF(self)) < 0 ? NULL : PyList_AsTuple(PROF(self)->events);
}

static PyObject *profiler_move_events(PyObject *self, PyObject *unused)
{
    (void)unused;
    return require_results(PROF(self)) < 0 ? NULL
                                           : PyList_AsTuple(PROF(self)->move_events);
}

/* ---- aggregates ------------------------------------------------------------ */

static PyObject *attr(PyObject *obj, const char *name)
{
    return PyObject_GetAttrString(obj, name);
}

/* Group key (name, carrier_type, shapes or None) of one event. */
static PyObject *group_key(PyObject *event, int by_shape)
{
    PyObject *name = attr(event, "name"), *carrier = attr(event, "carrier_type");
    PyObject *shapes = by_shape ? attr(event, "input_shapes") : Py_NewRef(Py_None);
    PyObject *key = name && carrier && shapes ? PyTuple_Pack(3, name, carrier, shapes) : NULL;
    Py_XDECREF(name);
    Py_XDECREF(carrier);
    Py_XDECREF(shapes);
    return key;
}

/* Accumulate one event into acc = [count, total, self_total, min, max]. */
static int accumulate(PyObject *acc, PyObject *event)
{
    static const char *const fields[] = {"duration_ns", "self_time_ns"};
    long long v[2];
    for (int i = 0; i < 2; i++) {
        PyObject *o = attr(event, fields[i]);
        v[i] = o ? PyLong_AsLongLong(o) : -1;
        Py_XDECREF(o);
        if (v[i] == -1 && PyErr_Occurred())
            return -1;
    }
    long long *a = (long long *)PyBytes_AS_STRING(acc);
    if (a[0] == 0 || v[0] < a[3])
        a[3] = v[0];
    if (a[0] == 0 || v[0] > a[4])
        a[4] = v[0];
    a[0]++;
    a[1] += v[0];
    a[2] += v[1];
    return 0;
}

static PyObject *aggregate_row(PyObject *key, PyObject *acc)
{
    long long *a = (long long *)PyBytes_AS_STRING(acc);
    return PyObject_CallFunction(aggregate_class, "OOOLLLdLL", PyTuple_GET_ITEM(key, 0),
                                 PyTuple_GET_ITEM(key, 1), PyTuple_GET_ITEM(key, 2), a[0],
                                 a[1], a[2], (double)a[1] / (double)a[0], a[3], a[4]);
}

/* Sort key: name, carrier __module__ and __qualname__, repr(shapes). */
static PyObject *sort_key(PyObject *row)
{
    PyObject *name = attr(row, "name"), *carrier = attr(row, "carrier_type");
    PyObject *shapes = attr(row, "input_shapes");
    PyObject *mod = carrier ? attr(carrier, "__module__") : NULL;
    PyObject *qual = carrier ? attr(carrier, "__qualname__") : NULL;
    PyObject *rep = shapes ? PyObject_Repr(shapes) : NULL;
    PyObject *key = name && mod && qual && rep ? PyTuple_Pack(4, name, mod, qual, rep) : NULL;
    Py_XDECREF(name);
    Py_XDECREF(carrier);
    Py_XDECREF(shapes);
    Py_XDECREF(mod);
    Py_XDECREF(qual);
    Py_XDECREF(rep);
    return key;
}

/* The rows sorted by sort_key; the insertion index breaks ties so rows
 * themselves are never compared. */
static PyObject *sorted_rows(PyObject *groups)
{
    PyObject *decorated = PyList_New(0), *key, *acc;
    Py_ssize_t i = 0, n = 0;
    while (decorated && PyDict_Next(groups, &i, &key, &acc)) {
        PyObject *row = aggregate_row(key, acc);
        PyObject *sk = row ? sort_key(row) : NULL;
        PyObject *order = sk ? PyLong_FromSsize_t(n++) : NULL;
        PyObject *t = order ? PyTuple_Pack(3, sk, order, row) : NULL;
        if (!t || PyList_Append(decorated, t) < 0)
            Py_CLEAR(decorated);
        Py_XDECREF(t);
        Py_XDECREF(order);
        Py_XDECREF(sk);
        Py_XDECREF(row);
    }
    if (!decorated || PyList_Sort(decorated) < 0) {
        Py_XDECREF(decorated);
        return NULL;
    }
    PyObject *result = PyTuple_New(PyList_GET_SIZE(decorated));
    for (Py_ssize_t k = 0; result && k < PyList_GET_SIZE(decorated); k++)
        PyTuple_SET_ITEM(result, k,
                         Py_NewRef(PyTuple_GET_ITEM(PyList_GET_ITEM(decorated, k), 2)));
    Py_DECREF(decorated);
    return result;
}

static PyObject *profiler_key_averages(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"group_by_input_shape", NULL};
    PyObject *by = Py_False;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|$O:key_averages", kwlist, &by))
        return NULL;
    if (!PyBool_Check(by)) {
        PyErr_Format(PyExc_TypeError,
                     "group_by_input_shape must be True or False, not %.100s",
                     Py_TYPE(by)->tp_name);
        return NULL;
    }
    if (require_results(PROF(self)) < 0)
        return NULL;
    PyObject *groups = PyDict_New();
    if (!groups)
        return NULL;
    PyObject *events = PROF(self)->events;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(events); i++) {
        PyObject *e = PyList_GET_ITEM(events, i);
        PyObject *key = group_key(e, by == Py_True);
        PyObject *acc = key ? PyDict_GetItemWithError(groups, key) : NULL;
        if (key && !acc && !PyErr_Occurred()) {
            acc = PyBytes_FromStringAndSize(NULL, 5 * sizeof(long long));
            if (acc) {
                memset(PyBytes_AS_STRING(acc), 0, 5 * sizeof(long long));
                if (PyDict_SetItem(groups, key, acc) < 0)
                    Py_CLEAR(acc);
                else
                    Py_DECREF(acc); /* the dict holds it */
            }
        }
        int rc = acc ? accumulate(acc, e) : -1;
        Py_XDECREF(key);
        if (rc < 0) {
            Py_DECREF(groups);
            return NULL;
        }
    }
    PyObject *rows = sorted_rows(groups);
    Py_DECREF(groups);
    return rows;
}

/* ---- move records ------------------------------------------------------------ */

struct sw_py_move_trace {
    int refs;                  /* initiator and committer */
    PyObject *profiler;
    int64_t move_id, request_id;
    PyObject *source_type, *destination_type, *operation_type;
    PyObject *route_id;        /* the TransferRoute's id, or None */
    uint64_t start_ns;         /* the core's submission time (SUBMIT) */
    int core_submitted;        /* the core's SUBMIT stamped start_ns and bytes */
    int submitted;
    int completed;             /* outcome known, complete record pending */
    uint64_t end_ns;
    unsigned long commit_thread;
    /* Stamped by the core's profiling hook on the committing thread before
     * the binding's commit reads them; 0 when the core did not report. */
    uint64_t core_end_ns;
    unsigned long core_thread;
    int succeeded;
    int64_t bytes;             /* what the move copies */
};

static int selects(PyObject *profiler, PyObject *a, PyObject *b)
{
    PyObject *sel = PROF(profiler)->selection;
    if (!sel)
        return 1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(sel); i++) {
        PyObject *c = PyTuple_GET_ITEM(sel, i);
        if (c == a || c == b)
            return 1;
    }
    return 0;
}

static _Thread_local int internal_moves; /* > 0: tier transitions running here */

void sw_py_profile_internal_moves(int delta)
{
    internal_moves += delta;
}

int sw_py_profile_records_move(PyObject *source, PyObject *destination)
{
    PyObject *p = internal_moves > 0 ? NULL : current();
    return p && selects(p, (PyObject *)Py_TYPE(source), (PyObject *)Py_TYPE(destination));
}

sw_py_move_trace *sw_py_profile_move_begin(PyObject *source, PyObject *destination,
                                           PyObject *op_type, PyObject *route_id, int64_t bytes)
{
    if (!sw_py_profile_records_move(source, destination))
        return NULL;
    PyObject *p = current();
    PyObject *st = (PyObject *)Py_TYPE(source), *dt = (PyObject *)Py_TYPE(destination);
    sw_py_move_trace *t = PyMem_Calloc(1, sizeof *t);
    if (!t)
        return NULL; /* profiling never fails a move */
    t->refs = 2;
    t->profiler = Py_NewRef(p);
    t->move_id = ++last_move_id;
    t->request_id = ++last_request_id;
    t->source_type = Py_NewRef(st);
    t->destination_type = Py_NewRef(dt);
    t->operation_type = Py_NewRef(op_type);
    t->route_id = Py_NewRef(route_id ? route_id : Py_None);
    t->bytes = bytes; /* the core's SUBMIT says it again, for the moves it takes */
    return t;
}

static void trace_drop(sw_py_move_trace *t)
{
    if (--t->refs > 0)
        return;
    Py_DECREF(t->profiler);
    Py_DECREF(t->source_type);
    Py_DECREF(t->destination_type);
    Py_DECREF(t->operation_type);
    Py_DECREF(t->route_id);
    PyMem_Free(t);
}

static void emit(sw_py_move_trace *t, const char *phase, uint64_t end_ns, unsigned long thread,
                 PyObject *succeeded)
{
    SwProfilerObject *p = PROF(t->profiler);
    if (p->state != P_ACTIVE)
        return; /* exited or abandoned: a late record is dropped */
    PyObject *saved_type, *saved_value, *saved_tb;
    PyErr_Fetch(&saved_type, &saved_value, &saved_tb);
    PyObject *ev = PyObject_CallFunction(
        move_event_class, "nsLLOOOOKKkOL", PyList_GET_SIZE(p->move_events), phase,
        (long long)t->move_id, (long long)t->request_id, t->source_type,
        t->destination_type, t->operation_type, t->route_id,
        (unsigned long long)t->start_ns, (unsigned long long)(end_ns - t->start_ns), thread,
        succeeded, (long long)t->bytes);
    if (!ev || PyList_Append(p->move_events, ev) < 0)
        PyErr_Clear();
    Py_XDECREF(ev);
    PyErr_Restore(saved_type, saved_value, saved_tb);
}

static void emit_complete(sw_py_move_trace *t)
{
    emit(t, "complete", t->end_ns, t->commit_thread, t->succeeded ? Py_True : Py_False);
}

void sw_py_profile_move_submitted(sw_py_move_trace *t)
{
    if (!t)
        return;
    uint64_t now = sw_clock_ns();
    if (!t->core_submitted) /* the core refused the move: it submitted nothing */
        t->start_ns = now;
    emit(t, "submit", now, PyThread_get_thread_ident(), Py_None);
    t->submitted = 1;
    if (t->completed) /* a synchronous route finished inside submission */
        emit_complete(t);
    trace_drop(t);
}

void sw_py_profile_move_completed(sw_py_move_trace *t, int succeeded)
{
    if (!t)
        return;
    if (t->core_end_ns) { /* the core's hook stamped it, on this thread */
        t->end_ns = t->core_end_ns;
        t->commit_thread = t->core_thread;
    } else { /* a move the core did not report (refused, or no hook then) */
        t->end_ns = sw_clock_ns();
        t->commit_thread = PyThread_get_thread_ident();
    }
    t->succeeded = succeeded;
    t->completed = 1;
    if (t->submitted)
        emit_complete(t);
    trace_drop(t);
}

void sw_py_profile_move_discard(sw_py_move_trace *t)
{
    if (!t)
        return;
    t->refs = 1; /* neither submitted nor completed will come */
    trace_drop(t);
}

/* The core's profiling hook, subscribed while any profiler is active. A
 * move carrying a record (its profile tag, given to this subscriber only:
 * sw_py_core_move's moves name it as the tag's owner) reports SUBMIT on
 * the initiating thread inside the core's submission, before
 * sw_py_profile_move_submitted there, with the move's start and bytes; and
 * COMPLETE on the thread that commits it, just before the binding's
 * commit, which then builds the record's Python objects (GIL held). Here
 * only plain C fields of that one record are written, so nothing needs the
 * GIL (the submit record ends when the binding's submission returns,
 * which only the binding sees). */
void sw_py_profile_core_event(const sw_move_event *ev, void *user)
{
    (void)user;
    sw_py_move_trace *t = ev->tag;
    if (!t)
        return;
    if (ev->kind == SW_MOVE_EVENT_SUBMIT) {
        t->start_ns = ev->submit_ns;
        t->bytes = ev->bytes;
        t->core_submitted = 1;
        return;
    }
    t->core_thread = PyThread_get_thread_ident(); /* no interpreter state needed */
    t->core_end_ns = ev->complete_ns;
}

/* ---- operation events -------------------------------------------------------- */

struct sw_py_op_span {
    sw_py_op_span *parent;    /* enclosing execution on this thread */
    PyObject *profiler;    /* strong */
    PyObject *name, *carrier_type, *impl_type, *shapes; /* strong; shapes may be NULL */
    int selected;          /* holds events[id] as a placeholder */
    Py_ssize_t id;
    uint64_t start_ns;
    uint64_t child_ns;     /* inclusive time of immediately nested executions */
};

static _Thread_local sw_py_op_span *op_top; /* innermost open span */
static PyObject *event_class;

/* A Tensor input's shape as nested tuples, as Shape.top_level gives it
 * (Shape([2, [3, 4]]) -> (2, (3, 4))); None for any other input. */
static PyObject *input_shape(PyObject *input)
{
    if (!SwTensor_Check(input))
        return Py_NewRef(Py_None);
    const sw_layout *L = SwLayout_CORE(((SwTensorObject *)input)->subs[0].layout);
    return sw_py_layout_nested(L, L->extents);
}

static PyObject *input_shapes(PyObject *const *inputs, Py_ssize_t n)
{
    PyObject *t = PyTuple_New(n);
    for (Py_ssize_t i = 0; t && i < n; i++) {
        PyObject *e = input_shape(inputs[i]);
        if (!e)
            Py_CLEAR(t);
        else
            PyTuple_SET_ITEM(t, i, e);
    }
    return t;
}

static void span_free(sw_py_op_span *s)
{
    Py_DECREF(s->profiler);
    Py_XDECREF(s->name);
    Py_XDECREF(s->carrier_type);
    Py_XDECREF(s->impl_type);
    Py_XDECREF(s->shapes);
    PyMem_Free(s);
}

sw_py_op_span *sw_py_profile_op_begin(PyObject *op, PyObject *const *inputs, Py_ssize_t n)
{
    PyObject *p = current();
    SwOperationObject *o = (SwOperationObject *)op;
    if (!p || !o->operation_name || !o->dispatch_carrier_class)
        return NULL;
    sw_py_op_span *s = PyMem_Calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->profiler = Py_NewRef(p);
    s->name = Py_NewRef(o->operation_name);
    s->carrier_type = Py_NewRef(o->dispatch_carrier_class);
    s->impl_type = Py_NewRef((PyObject *)Py_TYPE(op));
    s->selected = selects(p, s->carrier_type, s->carrier_type);
    if (s->selected) {
        PyObject *saved_type, *saved_value, *saved_tb;
        PyErr_Fetch(&saved_type, &saved_value, &saved_tb);
        /* The id is taken in start order; the event fills its slot at the end. */
        s->id = PyList_GET_SIZE(PROF(p)->events);
        if (PROF(p)->record_shapes && !(s->shapes = input_shapes(inputs, n)))
            s->selected = 0;
        if (s->selected && PyList_Append(PROF(p)->events, Py_None) < 0)
            s->selected = 0;
        if (!s->selected)
            PyErr_Clear();
        PyErr_Restore(saved_type, saved_value, saved_tb);
    }
    s->parent = op_top;
    op_top = s;
    s->start_ns = sw_clock_ns();
    return s;
}

void sw_py_profile_op_end(sw_py_op_span *s, int succeeded)
{
    if (!s)
        return;
    uint64_t end = sw_clock_ns();
    uint64_t dur = end >= s->start_ns ? end - s->start_ns : 0;
    op_top = s->parent;
    if (s->parent)
        s->parent->child_ns += dur;
    SwProfilerObject *p = PROF(s->profiler);
    if (s->selected && p->state == P_ACTIVE && s->id < PyList_GET_SIZE(p->events)) {
        PyObject *parent_id = Py_None;
        for (sw_py_op_span *a = s->parent; a; a = a->parent) {
            if (a->selected && a->profiler == s->profiler) {
                parent_id = PyLong_FromSsize_t(a->id);
                break;
            }
        }
        PyObject *saved_type, *saved_value, *saved_tb;
        PyErr_Fetch(&saved_type, &saved_value, &saved_tb);
        PyObject *ev = NULL;
        if (parent_id)
            ev = PyObject_CallFunction(
                event_class, "nOOOOOKKKkO", s->id, parent_id, s->name, s->carrier_type,
                s->impl_type, s->shapes ? s->shapes : Py_None, (unsigned long long)s->start_ns,
                (unsigned long long)dur,
                (unsigned long long)(dur > s->child_ns ? dur - s->child_ns : 0),
                PyThread_get_thread_ident(), succeeded ? Py_True : Py_False);
        if (parent_id != Py_None)
            Py_XDECREF(parent_id);
        if (!ev || PyList_SetItem(p->events, s->id, ev) < 0)
            PyErr_Clear();
        PyErr_Restore(saved_type, saved_value, saved_tb);
    }
    span_free(s);
}

/* Whether an operation this profiler records is running on this thread. */
static int in_computation(PyObject *profiler)
{
    for (sw_py_op_span *a = op_top; a; a = a->parent)
        if (a->profiler == profiler)
            return 1;
    return 0;
}

/* ---- type and module ----------------------------------------------------------- */

static PyMethodDef profiler_methods[] = {
    {"__enter__", profiler_enter, METH_NOARGS,
     "__enter__($self, /)\n--\n\n"
     "Start recording on this thread and return the profiler. A profiler can\n"
     "be entered once: a second time raises RuntimeError."},
    {"__exit__", profiler_exit, METH_VARARGS,
     "__exit__($self, /, *exc_info)\n--\n\n"
     "Stop recording and freeze the records; never suppresses exceptions."},
    {"events", profiler_events, METH_NOARGS,
     "events($self, /)\n--\n\nThe recorded operation events (ProfilerEvent), in start order.\n"
     "Available after the with block has ended."},
    {"move_events", profiler_move_events, METH_NOARGS,
     "move_events($self, /)\n--\n\nThe recorded move submissions and outcomes (MoveEvent),\n"
     "in recording order. Available after the with block has ended."},
    {"key_averages", (PyCFunction)(void (*)(void))profiler_key_averages,
     METH_VARARGS | METH_KEYWORDS,
     "key_averages($self, *, group_by_input_shape=False)\n--\n\n"
     "Operation events grouped by name and carrier class (and input shapes\n"
     "when asked), as ProfilerAggregate rows sorted by name."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject SwProfiler_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "strideweave.Profiler",
    .tp_basicsize = sizeof(SwProfilerObject),
    .tp_dealloc = profiler_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Profiler(*, carriers=None, record_shapes=False)\n--\n\n"
              "Records what strideweave does on this thread inside a with block:\n"
              "one submit and one complete MoveEvent per move, and operation events.\n"
              "carriers limits recording to those exact carrier classes (None: all);\n"
              "record_shapes keeps operation input shapes. Use each profiler once.\n\n"
              "    with sw.profile() as p:\n"
              "        sw.move(t, sw.FileBacked())\n"
              "    p.move_events()",
    .tp_traverse = profiler_traverse,
    .tp_clear = profiler_clear,
    .tp_methods = profiler_methods,
    .tp_new = profiler_new,
};

static PyObject *profile(PyObject *mod, PyObject *args, PyObject *kwds)
{
    (void)mod;
    return profiler_new(&SwProfiler_Type, args, kwds);
}

static PyMethodDef profiling_functions[] = {
    {"profile", (PyCFunction)(void (*)(void))profile, METH_VARARGS | METH_KEYWORDS,
     "profile(*, carriers=None, record_shapes=False)\n--\n\n"
     "A new Profiler, to use as `with profile() as p:`."},
    {NULL, NULL, 0, NULL},
};

int sw_py_profiling_init(PyObject *module)
{
    move_event_class = sw_py_types_attr("MoveEvent");
    event_class = sw_py_types_attr("ProfilerEvent");
    aggregate_class = sw_py_types_attr("ProfilerAggregate");
    if (!move_event_class || !aggregate_class || !event_class || PyType_Ready(&SwProfiler_Type) < 0 ||
        PyModule_AddObjectRef(module, "Profiler", (PyObject *)&SwProfiler_Type) < 0 ||
        PyModule_AddFunctions(module, profiling_functions) < 0)
        return -1;
    return 0;
}
