/* SW_API marks the public C API. libstrideweave is built with
 * -fvisibility=hidden, so only what these headers declare with SW_API (the
 * functions and the built-in carrier class tables) is exported from the
 * shared library; everything else in the core (helpers shared between core
 * files) stays internal. tools/check-exports (a meson test) fails when the
 * exported set and the SW_API declarations disagree. Macros only: nothing
 * here to own, no call to make from any thread. */
#ifndef STRIDEWEAVE_EXPORT_H
#define STRIDEWEAVE_EXPORT_H

#if defined(_WIN32) || defined(__CYGWIN__)
#define SW_API
#elif defined(__GNUC__) || defined(__clang__)
#define SW_API __attribute__((visibility("default")))
#else
#define SW_API
#endif

#endif
