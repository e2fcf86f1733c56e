/* The fault-injection switchboard of libstrideweave: for tests. A test
 * names a core operation ("alloc", "open", "pread", "pwrite", "truncate",
 * "move_transfer", "tile_copy", ... : the names the core's fault points
 * pass to sw_fault_hit) and makes it fail, or stops a thread at a named
 * pause point, to check what the library does then without sleeping.
 * strideweave.h does not include this header; a program that is not a
 * test has no use for it.
 *
 * Builds: the switchboard works in a build configured with fault
 * injection (`meson setup ... -Dfault_injection=true`, which the test
 * builds use). Every call below exists in every build, so a test links
 * against either; in a build without fault injection (the default and
 * release builds) sw_fault_enabled answers 0, sw_fault_arm and
 * sw_fault_wait_paused return SW_ENOTSUP, nothing is ever hit or armed
 * and no operation ever fails or pauses through it. A test checks
 * sw_fault_enabled() first and skips what needs faults without it.
 *
 * Ownership: the switchboard is one table for the whole process; names
 * are copied when armed, the caller keeps its strings.
 *
 * Threads: every call is thread-safe. The table is shared by all
 * threads, so tests that arm faults run one at a time in a process (or
 * arm names no other running test uses). */
#ifndef STRIDEWEAVE_TESTING_H
#define STRIDEWEAVE_TESTING_H

#include "strideweave/export.h"
#include "strideweave/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 in a build with fault injection, 0 without. */
SW_API int sw_fault_enabled(void);
/* Make the operation `name` succeed `skip` more times, then fail `count`
 * times (count < 0: for ever; 0: never). Arming a name again
 * replaces its counts. SW_EINVAL for a NULL name, one of 32 bytes or
 * more, or skip < 0; SW_ENOMEM when 8 other names are armed already;
 * SW_ENOTSUP without fault injection. */
SW_API sw_status sw_fault_arm(const char *name, long skip, long count);
/* Disarm every name (pause points included). */
SW_API void sw_fault_clear(void);
/* A fault point: 1 when this call of `name` must fail, counting one use
 * of its skip or count. The core calls it; a test may too (to check what
 * is left armed), as may a binding or carrier for points of its own. */
SW_API int sw_fault_hit(const char *name);
/* 1 when `name` is armed and may still hit. A look only: it consumes
 * nothing. */
SW_API int sw_fault_armed(const char *name);

/* Pause points. sw_fault_pause(name) is a fault point that, when `name`
 * hits, stops the calling thread there (with whatever locks it holds)
 * until sw_fault_resume(). sw_fault_wait_paused() blocks until a thread
 * is stopped at one (SW_OK), or returns SW_ENOTSUP at once without fault
 * injection, where nothing ever pauses. sw_fault_resume() lets every
 * stopped thread go on; disarm the name first (sw_fault_clear) or the
 * next pass stops again. */
SW_API void sw_fault_pause(const char *name);
SW_API sw_status sw_fault_wait_paused(void);
SW_API void sw_fault_resume(void);

#ifdef __cplusplus
}
#endif

#endif
