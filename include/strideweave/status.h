/* Status codes and the optional error record every core function can fill.
 *
 * Ownership: an sw_error is plain caller-owned storage (usually on the
 * stack); the core only writes into it and keeps no pointer to it.
 * Threads: the functions keep no state and are thread-safe as long as each
 * thread fills its own sw_error. */
#ifndef STRIDEWEAVE_STATUS_H
#define STRIDEWEAVE_STATUS_H

#include "strideweave/export.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sw_status {
    SW_OK = 0,
    SW_EINVAL,    /* bad argument value (maps to ValueError) */
    SW_ETYPE,     /* bad argument kind (maps to TypeError) */
    SW_ENOMEM,    /* allocation failed (MemoryError) */
    SW_EIO,       /* read/write/truncate failed (OSError, errno kept) */
    SW_EOVERFLOW, /* arithmetic would exceed int64 / size_t (OverflowError) */
    SW_ERANGE,    /* index out of range (IndexError) */
    SW_ESTATE,    /* object in the wrong state, e.g. released (RuntimeError) */
    SW_EEXIST,    /* file already exists (FileExistsError) */
    SW_ENOTSUP    /* not supported (NotImplementedError) */
} sw_status;

typedef struct sw_error {
    sw_status code;
    int sys_errno; /* errno for SW_EIO and friends, else 0 */
    int detail;    /* which of its rules the function refused by, where its
                      header names codes for them (move.h: sw_move_refusal);
                      else 0. Every sw_error_set* resets it to 0. */
    char msg[256];
} sw_error;

/* Fill `err` (which may be NULL) and return `code`, so callers can write
 * `return sw_error_set(err, SW_EINVAL, "...")`. */
SW_API sw_status sw_error_set(sw_error *err, sw_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
SW_API sw_status sw_error_set_errno(sw_error *err, sw_status code, int errnum,
                                    const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
SW_API void sw_error_clear(sw_error *err);

#ifdef __cplusplus
}
#endif

#endif
