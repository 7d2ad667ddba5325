/* error.c — status codes and messages.  Library code reports failures by
 * filling a DlrtError; printing, and deciding whether to exit, is the
 * caller's business. */
#include <stdarg.h>
#include <stdio.h>

#include "dlrt.h"

DlrtStatus dlrt_fail(DlrtError *err, DlrtStatus status, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        err->status = status;
    }
    return status;
}

const char *dlrt_status_name(DlrtStatus status) {
    switch (status) {
    case DLRT_OK: return "success";
    case DLRT_E_IO: return "I/O error";
    case DLRT_E_FORMAT: return "bad format";
    case DLRT_E_SHAPE: return "shape mismatch";
    case DLRT_E_RANGE: return "value out of range";
    case DLRT_E_NOMEM: return "out of memory";
    case DLRT_E_ARG: return "bad argument";
    case DLRT_E_DEVICE: return "device error";
    }
    return "unknown error";
}
