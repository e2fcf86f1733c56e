#include "strideweave/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void fill(sw_error *err, sw_status code, int errnum, const char *fmt,
                 va_list ap)
{
    err->code = code;
    err->sys_errno = errnum;
    err->detail = 0;
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
}

sw_status sw_error_set(sw_error *err, sw_status code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        fill(err, code, 0, fmt, ap);
        va_end(ap);
    }
    return code;
}

sw_status sw_error_set_errno(sw_error *err, sw_status code, int errnum,
                             const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        fill(err, code, errnum, fmt, ap);
        va_end(ap);
    }
    return code;
}

void sw_error_clear(sw_error *err)
{
    if (err) {
        err->code = SW_OK;
        err->sys_errno = 0;
        err->detail = 0;
        err->msg[0] = '\0';
    }
}
