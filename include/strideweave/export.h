/* SW_API marks the functions of the public C API. libstrideweave is built
 * with -fvisibility=hidden, so only the functions declared with SW_API in
 * these headers are exported from the shared library; everything else in
 * the core (helpers shared between core files, the built-in carrier class
 * tables) stays internal. tools/check-exports (a meson test) fails when the
 * exported set and the SW_API declarations disagree. */
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
