/* Private interface of the profiler (py_profiling.c) for the code paths it
 * records: movement and dispatched operations. */
#ifndef STRIDEWEAVE_SW_PROFILING_H
#define STRIDEWEAVE_SW_PROFILING_H

#include "sw_python.h"

extern PyTypeObject SwProfiler_Type;

/* The profiling record of one move: NULL when no profiler active on this
 * thread selects the exact source or destination class (or when the record
 * could not be made: profiling never fails a move). `route_id`: the
 * TransferRoute's id, or NULL for an operation route; `bytes` what it
 * copies, for a move the core refuses (the core's SUBMIT event gives the
 * start time and bytes of the ones it takes). Call before submission; then exactly once
 * each, in either order, both with the GIL held:
 * sw_py_profile_move_submitted on the initiating thread when submission
 * returns, and sw_py_profile_move_completed at the terminal commit. The
 * complete record always follows the submit record. A move the core runs
 * carries the record as its profile tag (sw_py_core_move.profile_tag): the
 * core's profiling hook, set while a profiler is active, stamps the
 * record's end time and committing thread just before the commit. */
typedef struct sw_py_move_trace sw_py_move_trace;
sw_py_move_trace *sw_py_profile_move_begin(PyObject *source, PyObject *destination,
                                           PyObject *op_type, PyObject *route_id, int64_t bytes);
/* Whether sw_py_profile_move_begin would make a record for a move between
 * these carriers now (on this thread). */
int sw_py_profile_records_move(PyObject *source, PyObject *destination);
/* The core's profiling subscriber (strideweave/move.h): the moves that
 * carry a record name it as their tag's owner (profile_tag_hook). */
struct sw_move_event;
void sw_py_profile_core_event(const struct sw_move_event *ev, void *user);
void sw_py_profile_move_submitted(sw_py_move_trace *trace);
/* Framework-internal moves (tier transitions) record nothing: +1 before
 * starting one on this thread, -1 after. */
void sw_py_profile_internal_moves(int delta);
void sw_py_profile_move_completed(sw_py_move_trace *trace, int succeeded);
/* Instead of both: the request was refused before the core took it (its
 * destination could not grow), so it records nothing. GIL held. */
void sw_py_profile_move_discard(sw_py_move_trace *trace);

/* The profiling span of one dispatched operation execution: NULL when no
 * profiler is active on this thread (or the span could not be made:
 * profiling never fails an operation). Call sw_py_profile_op_begin after
 * forward's preflight, with the positional inputs, and
 * sw_py_profile_op_end exactly once when _forward and the result check are
 * done (succeeded: a Tensor came back). Both with the GIL held, on the same
 * thread; spans nest like calls. */
typedef struct sw_py_op_span sw_py_op_span;
sw_py_op_span *sw_py_profile_op_begin(PyObject *op, PyObject *const *inputs, Py_ssize_t n);
void sw_py_profile_op_end(sw_py_op_span *span, int succeeded);

/* The records the readable reports (py_profiling_report.c: Profiler.table()
 * and Profiler.export_chrome_trace(path)) read: borrowed lists; -1 with
 * RuntimeError before the with block has ended. */
int sw_py_profiler_records(PyObject *profiler, PyObject **events, PyObject **move_events);
/* The reports (Profiler.table, Profiler.export_chrome_trace) are added to
 * the Profiler type by py_profiling_report.c at module init
 * (sw_py_profiling_report_init), so the profiler never names them. */

int sw_py_profiling_init(PyObject *module);

#endif
