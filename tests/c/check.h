/* A tiny test harness: CHECK records a failure and keeps going, so one run
 * reports every broken expectation; main returns non-zero if any failed. */
#ifndef SW_TEST_CHECK_H
#define SW_TEST_CHECK_H

#include <stdio.h>
#include <string.h>

static int sw_checks_run;
static int sw_checks_failed;

#define CHECK(cond)                                                          \
    do {                                                                     \
        sw_checks_run++;                                                     \
        if (!(cond)) {                                                       \
            sw_checks_failed++;                                              \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, \
                    #cond);                                                  \
        }                                                                    \
    } while (0)

#define CHECK_EQ_I64(a, b)                                                   \
    do {                                                                     \
        long long sw_a_ = (long long)(a), sw_b_ = (long long)(b);            \
        sw_checks_run++;                                                     \
        if (sw_a_ != sw_b_) {                                                \
            sw_checks_failed++;                                              \
            fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%lld != %lld)\n", \
                    __FILE__, __LINE__, #a, #b, sw_a_, sw_b_);               \
        }                                                                    \
    } while (0)

/* An error's message is exactly `want` (the words a binding raises). */
#define CHECK_MSG(err, want)                                                 \
    do {                                                                     \
        sw_checks_run++;                                                     \
        if (strcmp((err).msg, (want)) != 0) {                                \
            sw_checks_failed++;                                              \
            fprintf(stderr, "%s:%d: CHECK failed: message \"%s\", not \"%s\"\n", \
                    __FILE__, __LINE__, (err).msg, (want));                  \
        }                                                                    \
    } while (0)

static inline int check_report(const char *suite)
{
    printf("%s: %d passed, %d failed\n", suite, sw_checks_run - sw_checks_failed,
           sw_checks_failed);
    return sw_checks_failed ? 1 : 0;
}

#endif
