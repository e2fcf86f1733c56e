/* Readable profiler reports: Profiler.table() and
 * Profiler.export_chrome_trace(path).
 *
 * Both read the frozen records (MoveEvent, ProfilerEvent) a profiler kept.
 * A move is one "complete" record: it carries the submission time and the
 * time to completion, its thread is the committing one; the matching
 * "submit" record names the thread that submitted it. Kinds: moves by
 * (source class, destination class, route id), operations by (name,
 * carrier class). The table is formatted here in C; the trace is built as
 * Python lists and dicts and written with the json module. */
#include "sw_profiling.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* ---- reading records ------------------------------------------------------------ */

static int get_ll(PyObject *ev, const char *name, long long *out)
{
    PyObject *v = PyObject_GetAttrString(ev, name);
    if (!v)
        return -1;
    *out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

static int get_bool(PyObject *ev, const char *name)
{
    PyObject *v = PyObject_GetAttrString(ev, name);
    if (!v)
        return -1;
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

static int is_phase(PyObject *ev, const char *phase)
{
    PyObject *v = PyObject_GetAttrString(ev, "phase");
    if (!v)
        return -1;
    int r = PyUnicode_Check(v) && PyUnicode_CompareWithASCIIString(v, phase) == 0;
    Py_DECREF(v);
    return r;
}

/* type.__qualname__ of the record's field `name`. New reference. */
static PyObject *class_name(PyObject *ev, const char *name)
{
    PyObject *cls = PyObject_GetAttrString(ev, name);
    if (!cls)
        return NULL;
    PyObject *q = PyType_Check(cls) ? PyType_GetQualName((PyTypeObject *)cls)
                                    : PyObject_Str(cls);
    Py_DECREF(cls);
    return q;
}

/* The kind of a complete move record: the key (source class, destination
 * class, route id) and its display name. */
static int move_kind(PyObject *ev, PyObject **key, PyObject **name)
{
    PyObject *src = PyObject_GetAttrString(ev, "source_type");
    PyObject *dst = src ? PyObject_GetAttrString(ev, "destination_type") : NULL;
    PyObject *route = dst ? PyObject_GetAttrString(ev, "route_id") : NULL;
    PyObject *rrepr = route ? PyObject_Repr(route) : NULL;
    PyObject *sn = rrepr ? class_name(ev, "source_type") : NULL;
    PyObject *dn = sn ? class_name(ev, "destination_type") : NULL;
    *key = dn ? PyTuple_Pack(3, src, dst, rrepr) : NULL;
    *name = NULL;
    if (*key)
        *name = route == Py_None ? PyUnicode_FromFormat("move %U -> %U", sn, dn)
                                 : PyUnicode_FromFormat("move %U -> %U via %U", sn, dn, rrepr);
    Py_XDECREF(src);
    Py_XDECREF(dst);
    Py_XDECREF(route);
    Py_XDECREF(rrepr);
    Py_XDECREF(sn);
    Py_XDECREF(dn);
    if (*name)
        return 0;
    Py_CLEAR(*key);
    return -1;
}

/* The kind of an operation record: (name, carrier class), "name (Carrier)". */
static int op_kind(PyObject *ev, PyObject **key, PyObject **name)
{
    PyObject *op = PyObject_GetAttrString(ev, "name");
    PyObject *carrier = op ? PyObject_GetAttrString(ev, "carrier_type") : NULL;
    PyObject *cn = carrier ? class_name(ev, "carrier_type") : NULL;
    *key = cn ? PyTuple_Pack(2, op, carrier) : NULL;
    *name = *key ? PyUnicode_FromFormat("%S (%U)", op, cn) : NULL;
    Py_XDECREF(op);
    Py_XDECREF(carrier);
    Py_XDECREF(cn);
    if (*name)
        return 0;
    Py_CLEAR(*key);
    return -1;
}

/* ---- rows: one per kind ------------------------------------------------------------ */

typedef struct row {
    PyObject *name;      /* display name, strong */
    int is_move;
    long long count;
    long long total_ns;
    long long bytes;     /* moves that succeeded */
    Py_ssize_t first;    /* order of first appearance */
} row;

typedef struct rows {
    row *v;
    Py_ssize_t n, cap;
    PyObject *index;     /* key -> position in v */
} rows;

static void rows_free(rows *r)
{
    for (Py_ssize_t i = 0; i < r->n; i++)
        Py_DECREF(r->v[i].name);
    PyMem_Free(r->v);
    Py_XDECREF(r->index);
}

/* The row of `key`, made with `name` when new (both borrowed). */
static row *rows_get(rows *r, PyObject *key, PyObject *name, int is_move)
{
    PyObject *at = PyDict_GetItemWithError(r->index, key);
    if (at)
        return &r->v[PyLong_AsSsize_t(at)];
    if (PyErr_Occurred())
        return NULL;
    if (r->n == r->cap) {
        Py_ssize_t cap = r->cap ? r->cap * 2 : 8;
        row *v = PyMem_Realloc(r->v, (size_t)cap * sizeof *v);
        if (!v) {
            PyErr_NoMemory();
            return NULL;
        }
        r->v = v;
        r->cap = cap;
    }
    PyObject *pos = PyLong_FromSsize_t(r->n);
    int rc = pos ? PyDict_SetItem(r->index, key, pos) : -1;
    Py_XDECREF(pos);
    if (rc < 0)
        return NULL;
    row *w = &r->v[r->n];
    memset(w, 0, sizeof *w);
    w->name = Py_NewRef(name);
    w->is_move = is_move;
    w->first = r->n++;
    return w;
}

static int add_move(rows *r, PyObject *ev)
{
    int complete = is_phase(ev, "complete");
    if (complete <= 0)
        return complete;
    PyObject *key, *name;
    if (move_kind(ev, &key, &name) < 0)
        return -1;
    row *w = rows_get(r, key, name, 1);
    Py_DECREF(key);
    Py_DECREF(name);
    long long dur, bytes = 0;
    int ok = w ? get_bool(ev, "succeeded") : -1;
    if (ok < 0 || get_ll(ev, "duration_ns", &dur) < 0 || (ok && get_ll(ev, "bytes", &bytes) < 0))
        return -1;
    w->count++;
    w->total_ns += dur;
    w->bytes += ok ? bytes : 0;
    return 0;
}

static int add_op(rows *r, PyObject *ev)
{
    if (ev == Py_None) /* a slot whose execution never ended */
        return 0;
    PyObject *key, *name;
    if (op_kind(ev, &key, &name) < 0)
        return -1;
    row *w = rows_get(r, key, name, 0);
    Py_DECREF(key);
    Py_DECREF(name);
    long long dur;
    if (!w || get_ll(ev, "duration_ns", &dur) < 0)
        return -1;
    w->count++;
    w->total_ns += dur;
    return 0;
}

static int by_total_time(const void *a, const void *b)
{
    const row *x = a, *y = b;
    if (x->total_ns != y->total_ns)
        return x->total_ns > y->total_ns ? -1 : 1;
    return x->first < y->first ? -1 : x->first > y->first;
}

static int collect(PyObject *profiler, rows *r)
{
    PyObject *events, *moves;
    memset(r, 0, sizeof *r);
    if (sw_py_profiler_records(profiler, &events, &moves) < 0 || !(r->index = PyDict_New()))
        return -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(moves); i++)
        if (add_move(r, PyList_GET_ITEM(moves, i)) < 0)
            return -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(events); i++)
        if (add_op(r, PyList_GET_ITEM(events, i)) < 0)
            return -1;
    if (r->n > 1)
        qsort(r->v, (size_t)r->n, sizeof *r->v, by_total_time);
    return 0;
}

/* ---- table() ------------------------------------------------------------------------- */

typedef struct text {
    char *p;
    size_t len, cap;
    int failed;
} text;

static void text_add(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void text_add(text *t, const char *fmt, ...)
{
    while (!t->failed) {
        size_t room = t->cap - t->len;
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->p ? t->p + t->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->failed = 1;
        } else if ((size_t)n < room) {
            t->len += (size_t)n;
            return;
        } else {
            size_t cap = t->cap ? t->cap : 512;
            while (cap < t->len + (size_t)n + 1)
                cap *= 2;
            char *q = PyMem_Realloc(t->p, cap);
            if (!q)
                t->failed = 1;
            else {
                t->p = q;
                t->cap = cap;
            }
        }
    }
}

enum { COLS = 6, CELL = 40 };
static const char *const headers[COLS] = {"Name", "Count", "Total (us)", "Mean (us)", "Bytes",
                                          "GB/s"};

/* The five numeric cells of a row. */
static void cells_of(const row *w, char cell[COLS][CELL])
{
    double total_us = (double)w->total_ns / 1e3;
    snprintf(cell[1], CELL, "%lld", w->count);
    snprintf(cell[2], CELL, "%.3f", total_us);
    snprintf(cell[3], CELL, "%.3f", w->count ? total_us / (double)w->count : 0.0);
    if (w->is_move) {
        snprintf(cell[4], CELL, "%lld", w->bytes);
        if (w->total_ns > 0) /* bytes per nanosecond are GB/s */
            snprintf(cell[5], CELL, "%.3f", (double)w->bytes / (double)w->total_ns);
        else
            snprintf(cell[5], CELL, "-");
    } else {
        snprintf(cell[4], CELL, "-");
        snprintf(cell[5], CELL, "-");
    }
}

static void rule(text *t, const size_t *width)
{
    for (int c = 0; c < COLS; c++) {
        for (size_t k = 0; k < width[c]; k++)
            text_add(t, "-");
        text_add(t, c + 1 < COLS ? "  " : "\n");
    }
}

/* One line: the name left-aligned (padded by code points), numbers right. */
static void line(text *t, const size_t *width, const char *name, size_t name_len,
                 char cell[COLS][CELL])
{
    text_add(t, "%s%*s", name, (int)(width[0] - name_len), "");
    for (int c = 1; c < COLS; c++)
        text_add(t, "  %*s", (int)width[c], cell[c]);
    text_add(t, "\n");
}

/* Profiler.table(). */
static PyObject *sw_py_profiler_table(PyObject *profiler, PyObject *unused)
{
    (void)unused;
    rows r;
    if (collect(profiler, &r) < 0) {
        rows_free(&r);
        return NULL;
    }
    size_t width[COLS];
    for (int c = 0; c < COLS; c++)
        width[c] = strlen(headers[c]);
    for (Py_ssize_t i = 0; i < r.n; i++) {
        char cell[COLS][CELL];
        cells_of(&r.v[i], cell);
        size_t len = (size_t)PyUnicode_GET_LENGTH(r.v[i].name);
        if (len > width[0])
            width[0] = len;
        for (int c = 1; c < COLS; c++)
            if (strlen(cell[c]) > width[c])
                width[c] = strlen(cell[c]);
    }
    text t = {0};
    char head[COLS][CELL];
    for (int c = 0; c < COLS; c++)
        snprintf(head[c], CELL, "%s", headers[c]);
    rule(&t, width);
    line(&t, width, headers[0], strlen(headers[0]), head);
    rule(&t, width);
    PyObject *out = NULL;
    for (Py_ssize_t i = 0; i < r.n; i++) {
        char cell[COLS][CELL];
        cells_of(&r.v[i], cell);
        const char *name = PyUnicode_AsUTF8(r.v[i].name);
        if (!name)
            goto done;
        line(&t, width, name, (size_t)PyUnicode_GET_LENGTH(r.v[i].name), cell);
    }
    rule(&t, width);
    if (t.failed)
        PyErr_NoMemory();
    else
        out = PyUnicode_DecodeUTF8(t.p, (Py_ssize_t)t.len, "strict");
done:
    PyMem_Free(t.p);
    rows_free(&r);
    return out;
}

/* ---- export_chrome_trace(path) --------------------------------------------------------- */

/* dict(k0=v0, k1=v1, ...) from a NULL-terminated list of (const char *,
 * PyObject * stolen) pairs; NULL if any value is NULL (all are released). */
static PyObject *make_dict(const char *k, PyObject *v, ...)
{
    PyObject *d = PyDict_New();
    va_list ap;
    va_start(ap, v);
    while (k) {
        if (!v || !d || PyDict_SetItemString(d, k, v) < 0)
            Py_CLEAR(d);
        Py_XDECREF(v);
        k = va_arg(ap, const char *);
        if (k)
            v = va_arg(ap, PyObject *);
    }
    va_end(ap);
    return d;
}

static PyObject *attr_or_null(PyObject *ev, const char *name)
{
    return PyObject_GetAttrString(ev, name);
}

static PyObject *us(long long ns)
{
    return PyFloat_FromDouble((double)ns / 1e3);
}

/* One complete move record as a span on its submitting thread. */
static PyObject *move_span(PyObject *ev, PyObject *submit_threads, PyObject *pid)
{
    long long start, dur;
    PyObject *key, *name;
    if (get_ll(ev, "start_time_ns", &start) < 0 || get_ll(ev, "duration_ns", &dur) < 0 ||
        move_kind(ev, &key, &name) < 0)
        return NULL;
    Py_DECREF(key);
    PyObject *move_id = attr_or_null(ev, "move_id");
    PyObject *tid = move_id ? PyDict_GetItemWithError(submit_threads, move_id) : NULL;
    if (!tid && !PyErr_Occurred())
        tid = PyObject_GetAttrString(ev, "thread_id"); /* no submit record kept */
    else
        Py_XINCREF(tid);
    PyObject *route = attr_or_null(ev, "route_id");
    PyObject *route_s = route && route != Py_None ? PyObject_Str(route) : Py_XNewRef(route);
    Py_XDECREF(route);
    PyObject *args = make_dict(
        "move_id", move_id, "request_id", attr_or_null(ev, "request_id"),
        "bytes", attr_or_null(ev, "bytes"), "succeeded", attr_or_null(ev, "succeeded"),
        "source", class_name(ev, "source_type"),
        "destination", class_name(ev, "destination_type"),
        "operation", class_name(ev, "operation_type"), "route_id", route_s,
        "completion_thread", attr_or_null(ev, "thread_id"), NULL);
    return make_dict("name", name, "cat", PyUnicode_FromString("move"),
                     "ph", PyUnicode_FromString("X"), "ts", us(start), "dur", us(dur),
                     "pid", Py_NewRef(pid), "tid", tid, "args", args, NULL);
}

static PyObject *op_span(PyObject *ev, PyObject *pid)
{
    long long start, dur, self_ns;
    PyObject *key, *name;
    if (get_ll(ev, "start_time_ns", &start) < 0 || get_ll(ev, "duration_ns", &dur) < 0 ||
        get_ll(ev, "self_time_ns", &self_ns) < 0 || op_kind(ev, &key, &name) < 0)
        return NULL;
    Py_DECREF(key);
    PyObject *args = make_dict("id", attr_or_null(ev, "id"),
                               "parent_id", attr_or_null(ev, "parent_id"),
                               "self_time_us", us(self_ns),
                               "succeeded", attr_or_null(ev, "succeeded"), NULL);
    return make_dict("name", name, "cat", PyUnicode_FromString("operation"),
                     "ph", PyUnicode_FromString("X"), "ts", us(start), "dur", us(dur),
                     "pid", Py_NewRef(pid), "tid", attr_or_null(ev, "thread_id"),
                     "args", args, NULL);
}

static int append_new(PyObject *list, PyObject *item)
{
    int rc = item ? PyList_Append(list, item) : -1;
    Py_XDECREF(item);
    return rc;
}

/* The trace document: {"traceEvents": [...], "displayTimeUnit": "ms"}. */
static PyObject *trace_document(PyObject *profiler)
{
    PyObject *events, *moves;
    if (sw_py_profiler_records(profiler, &events, &moves) < 0)
        return NULL;
    PyObject *pid = PyLong_FromLong((long)getpid());
    PyObject *list = pid ? PyList_New(0) : NULL;
    PyObject *submit_threads = list ? PyDict_New() : NULL;
    if (!submit_threads)
        goto fail;
    if (append_new(list, make_dict("name", PyUnicode_FromString("process_name"),
                                   "ph", PyUnicode_FromString("M"), "pid", Py_NewRef(pid),
                                   "tid", PyLong_FromLong(0),
                                   "args", make_dict("name",
                                                     PyUnicode_FromString("strideweave"),
                                                     NULL),
                                   NULL)) < 0)
        goto fail;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(moves); i++) {
        PyObject *ev = PyList_GET_ITEM(moves, i);
        int submit = is_phase(ev, "submit");
        if (submit < 0)
            goto fail;
        if (!submit)
            continue;
        PyObject *id = attr_or_null(ev, "move_id"), *tid = attr_or_null(ev, "thread_id");
        int rc = id && tid ? PyDict_SetItem(submit_threads, id, tid) : -1;
        Py_XDECREF(id);
        Py_XDECREF(tid);
        if (rc < 0)
            goto fail;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(moves); i++) {
        PyObject *ev = PyList_GET_ITEM(moves, i);
        int complete = is_phase(ev, "complete");
        if (complete < 0 || (complete && append_new(list, move_span(ev, submit_threads, pid)) < 0))
            goto fail;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(events); i++) {
        PyObject *ev = PyList_GET_ITEM(events, i);
        if (ev != Py_None && append_new(list, op_span(ev, pid)) < 0)
            goto fail;
    }
    Py_DECREF(submit_threads);
    Py_DECREF(pid);
    return make_dict("traceEvents", list, "displayTimeUnit", PyUnicode_FromString("ms"), NULL);
fail:
    Py_XDECREF(submit_threads);
    Py_XDECREF(list);
    Py_XDECREF(pid);
    return NULL;
}

/* Profiler.export_chrome_trace(path). */
static PyObject *sw_py_profiler_export_chrome_trace(PyObject *profiler, PyObject *path)
{
    PyObject *fspath = NULL;
    if (!PyUnicode_FSConverter(path, &fspath))
        return NULL;
    PyObject *doc = trace_document(profiler);
    PyObject *json = doc ? PyImport_ImportModule("json") : NULL;
    PyObject *s = json ? PyObject_CallMethod(json, "dumps", "O", doc) : NULL;
    Py_XDECREF(json);
    Py_XDECREF(doc);
    Py_ssize_t n;
    const char *utf8 = s ? PyUnicode_AsUTF8AndSize(s, &n) : NULL;
    PyObject *result = NULL;
    if (utf8) {
        int ok;
        int saved = 0;
        Py_BEGIN_ALLOW_THREADS
        FILE *f = fopen(PyBytes_AS_STRING(fspath), "w");
        ok = f && fwrite(utf8, 1, (size_t)n, f) == (size_t)n;
        if (!ok)
            saved = errno;
        if (f && fclose(f) != 0 && ok) {
            ok = 0;
            saved = errno;
        }
        Py_END_ALLOW_THREADS
        if (ok) {
            result = Py_NewRef(Py_None);
        } else {
            errno = saved ? saved : EIO;
            PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path);
        }
    }
    Py_XDECREF(s);
    Py_DECREF(fspath);
    return result;
}

/* The reports are methods of Profiler: this file owns them and adds them to
 * the type (made ready by py_profiling.c, below this file) at module init. */
static PyMethodDef report_methods[] = {
    {"table", sw_py_profiler_table, METH_NOARGS,
     "table($self, /)\n--\n\n"
     "A printable summary with one row per kind of event: moves by source\n"
     "class, destination class and route, operations by name and carrier\n"
     "class. Columns: how many, total and mean time in microseconds (a move\n"
     "from submission to completion), bytes moved by the moves that succeeded,\n"
     "and their throughput in GB/s. Rows by total time, largest first.\n"
     "Available after the with block has ended.\n\n"
     "    print(p.table())"},
    {"export_chrome_trace", sw_py_profiler_export_chrome_trace, METH_O,
     "export_chrome_trace($self, path, /)\n--\n\n"
     "Write the records to `path` as Chrome trace JSON (open it in Perfetto or\n"
     "chrome://tracing): a traceEvents list with one complete span (\"ph\": \"X\")\n"
     "per finished move, from submission to completion on the thread that\n"
     "submitted it, and one per operation execution; ts and dur are in\n"
     "microseconds. Available after the with block has ended."},
    {NULL, NULL, 0, NULL},
};

int sw_py_profiling_report_init(PyObject *module)
{
    (void)module;
    return sw_py_type_add_methods(&SwProfiler_Type, report_methods);
}
