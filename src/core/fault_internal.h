/* The fault-injection switchboard: a test aid, never installed and hidden
 * in the shared library (no SW_API). The core's fault points call it; the
 * C tests and the in-tree Python extension (its private _C test hooks,
 * which link the core statically) arm it. A build without fault injection
 * (-Dfault_injection=false, the release build) refuses to arm it and never
 * fails an operation through it.
 *
 * Threads: every call is thread-safe. */
#ifndef SW_FAULT_INTERNAL_H
#define SW_FAULT_INTERNAL_H

#include "strideweave/status.h"

/* Fault injection. With SW_FAULT_INJECTION compiled in, sw_fault_arm makes
 * the operation `name` ("alloc", "pread", "pwrite", "truncate", "open", ...)
 * succeed `skip` more times and then fail `count` times (count < 0: forever).
 * Without it, arm returns SW_ENOTSUP and hit always answers 0. */
int sw_fault_enabled(void);
sw_status sw_fault_arm(const char *name, long skip, long count);
void sw_fault_clear(void);
/* 1 when the current call of `name` must fail. Thread-safe. */
int sw_fault_hit(const char *name);
/* 1 when `name` is armed and may still hit (a look only: it consumes
 * nothing). Thread-safe; always 0 without fault injection. */
int sw_fault_armed(const char *name);
/* A pause point: when `name` is hit, the calling thread stops here until
 * sw_fault_resume(). sw_fault_wait_paused() blocks until a thread is
 * stopped at one. Without fault injection nothing is ever hit. */
void sw_fault_pause(const char *name);
void sw_fault_wait_paused(void);
void sw_fault_resume(void);

#endif
