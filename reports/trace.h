/* Chrome Trace Event JSON of a record's op timeline (opens in Perfetto and chrome://tracing):
 * {"traceEvents":[...], "displayTimeUnit":"ns"}. One process per (point, phase), one thread per
 * layer (thread 0: the ops outside the layers); each op is an "X" event whose duration is its
 * time in the record (predicted, or the measured median), laid out one after another in op
 * order, decode after prefill; metadata events name the processes and threads. */
#ifndef XF_TRACE_H
#define XF_TRACE_H

#include "core/record.h"

/* The trace as JSON text; caller frees *out with free(). */
xf_status report_trace_text(const record *r, char **out);

/* Writes the trace to `path` atomically (stdout for NULL or "-"). */
xf_status report_trace_write(const record *r, const char *path);

#endif
