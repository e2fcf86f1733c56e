/* Fault points inside the core (never installed).
 *
 * A build with fault injection asks the switchboard (strideweave/testing.h)
 * at every fault point. A build without it has nothing to ask, so there a
 * fault point is a constant instead of a call to the exported sw_fault_hit
 * through the shared library's PLT: a small move passes about five, and
 * asks whether a pause point is armed to decide where it runs (move.c). */
#ifndef SW_FAULT_INTERNAL_H
#define SW_FAULT_INTERNAL_H

#include "strideweave/testing.h"

#ifdef SW_FAULT_INJECTION
#define SW_FAULT_HIT(name) sw_fault_hit(name)
#define SW_FAULT_ARMED(name) sw_fault_armed(name)
#define SW_FAULT_PAUSE(name) sw_fault_pause(name)
#else
#define SW_FAULT_HIT(name) ((void)(name), 0)
#define SW_FAULT_ARMED(name) ((void)(name), 0)
#define SW_FAULT_PAUSE(name) ((void)(name))
#endif

#endif
