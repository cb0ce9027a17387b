#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "core/text.h"

int cli_exit_code(xf_status s) {
    switch (s) {
    case XF_OK: return CLI_EXIT_OK;
    case XF_EINVAL:
    case XF_EPARSE:
    case XF_EFORMAT:
    case XF_EOVERFLOW: return CLI_EXIT_USAGE;
    case XF_EUNSUPPORTED: return CLI_EXIT_UNSUPPORTED;
    case XF_EIO:
    case XF_ENOMEM: return CLI_EXIT_FAILURE;
    }
    return CLI_EXIT_FAILURE;
}

/* Messages quote values from files and arguments: printed with every unsafe byte as \xNN. */
int cli_fail(const char *cmd, xf_status s) {
    const char *msg = xf_error_msg();
    char safe[4096];
    text_sanitize(msg[0] ? msg : xf_status_str(s), safe, sizeof safe, 1);
    fprintf(stderr, "xfprof %s: %s\n", cmd, safe);
    return cli_exit_code(s);
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char safe[4096];
    text_sanitize(msg, safe, sizeof safe, 1);
    /* An argument parser that ran out of memory passes its message here like a bad value would:
     * that is not the user's mistake, and exits 4 like every other out-of-memory failure. */
    const char *last = xf_error_msg();
    if (xf_error_status() == XF_ENOMEM && last[0] && strstr(msg, last)) {
        fprintf(stderr, "xfprof %s: %s\n", cmd, safe);
        return CLI_EXIT_FAILURE;
    }
    fprintf(stderr, "xfprof %s: %s\n(run 'xfprof %s --help' for the options)\n", cmd, safe, cmd);
    return CLI_EXIT_USAGE;
}
