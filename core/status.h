/* One status enum for the whole project, and a per-thread message that says what went wrong.
 * Library code returns an xf_status and, on error, sets the message with xf_errorf(); only cli/
 * turns statuses into exit codes. */
#ifndef XF_STATUS_H
#define XF_STATUS_H

typedef enum xf_status {
    XF_OK = 0,
    XF_EINVAL = -1,      /* a value given by the user or a file is wrong */
    XF_ENOMEM = -2,      /* an allocation failed */
    XF_EIO = -3,         /* a file could not be read or written */
    XF_EPARSE = -4,      /* malformed input text (JSON, CSV, numbers) */
    XF_EFORMAT = -5,     /* a file of another format or a newer version */
    XF_EOVERFLOW = -6,   /* a size would overflow 64 bits or exceed what the machine has */
    XF_EUNSUPPORTED = -7 /* no GPU, no counter, no driver: not an error of the input */
} xf_status;

/* Static string naming the status ("invalid input", ...). */
const char *xf_status_str(xf_status s);

/* Sets this thread's message (printf-style) and returns `s`, so callers write
 * `return xf_errorf(XF_EINVAL, "field %s ...", name);`. */
xf_status xf_errorf(xf_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prepends context to the current message: "config.json: " + message. Returns `s`. */
xf_status xf_error_prefix(xf_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* This thread's last message, "" when none. Owned by the library (thread-local buffer). */
const char *xf_error_msg(void);

/* The status passed with this thread's last message (XF_OK when none): lets cli/ tell an
 * out-of-memory failure apart from bad input when only the message was passed on. */
xf_status xf_error_status(void);

void xf_error_clear(void);

#endif
