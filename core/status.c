#include "status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char g_msg[1024];
static _Thread_local xf_status g_status; /* the status the message goes with */

const char *xf_status_str(xf_status s) {
    switch (s) {
    case XF_OK: return "ok";
    case XF_EINVAL: return "invalid input";
    case XF_ENOMEM: return "out of memory";
    case XF_EIO: return "I/O error";
    case XF_EPARSE: return "parse error";
    case XF_EFORMAT: return "unknown format or version";
    case XF_EOVERFLOW: return "size too large";
    case XF_EUNSUPPORTED: return "unsupported here";
    }
    return "unknown status";
}

xf_status xf_errorf(xf_status s, const char *fmt, ...) {
    /* Formatted aside first: callers may pass xf_error_msg() itself as an argument ("%s: %s"),
     * and vsnprintf must not read the buffer it writes (valgrind: overlapping copy). */
    char buf[sizeof g_msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    memcpy(g_msg, buf, strlen(buf) + 1);
    g_status = s;
    return s;
}

xf_status xf_error_prefix(xf_status s, const char *fmt, ...) {
    char head[512], old[sizeof g_msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    memcpy(old, g_msg, sizeof old);
    size_t hl = strlen(head);
    memcpy(g_msg, head, hl + 1);
    size_t room = sizeof g_msg - hl - 1;
    size_t ol = strnlen(old, room);
    memcpy(g_msg + hl, old, ol);
    g_msg[hl + ol] = '\0';
    g_status = s;
    return s;
}

const char *xf_error_msg(void) { return g_msg; }

xf_status xf_error_status(void) { return g_msg[0] ? g_status : XF_OK; }

void xf_error_clear(void) {
    g_msg[0] = '\0';
    g_status = XF_OK;
}
