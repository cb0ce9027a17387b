/* The events a torch.profiler trace was reduced to (torch_trace.c) and the step that turns them
 * into a record (torch_build.c). Internal to importers/. */
#ifndef XF_TORCH_EVENTS_H
#define XF_TORCH_EVENTS_H

#include <stdint.h>

#include "importer.h"

enum { EV_OP = 0, EV_MODULE, EV_KERNEL, EV_RUNTIME };

/* One kept event. Times in microseconds, as the trace has them. */
typedef struct tt_ev {
    double ts, end;       /* relative to the first event kept (absolute ts lose the last digits in a double) */
    double dur;           /* as the trace gives it: durations are summed from this, never end - ts */
    int64_t tid;
    int64_t ext;          /* "External id", -1 none */
    int64_t corr;         /* "correlation", -1 none */
    double flops, bytes;  /* this event's own formula (ops) */
    double list_elems;    /* TensorList elements moved (bytes once the activation dtype is known) */
    int64_t q_len, kv_len;/* attention shapes; 0 otherwise */
    int64_t dim_a, dim_b, dim_c, dim_d; /* shapes the model is inferred from (see note_model) */
    uint32_t name;        /* offset into the name pool */
    uint8_t type;         /* EV_* */
    uint8_t cls;          /* torch_op_class */
    uint8_t dtype;        /* xf_dtype of the first tensor input (ops) */
    uint8_t cat_last;     /* aten::cat along the last dim */
    int32_t parent;       /* ops: enclosing op, -1 none */
    int32_t module;       /* ops: innermost enclosing module event, -1 none */
    int32_t nchild;       /* ops: children */
} tt_ev;

typedef struct tt_trace {
    const char *source;
    tt_ev *ev;             /* (n_ev) in file order; build sorts index arrays, never the events */
    int64_t n_ev;
    const char *names;     /* name pool: ev[i].name is an offset into it */
    int record_shapes;     /* the trace's own flag: -1 absent, 0, 1 */
    int with_modules;      /* likewise */
    int64_t n_read;        /* events of any kind read */
    int64_t n_ops;         /* cpu_op events */
    int64_t n_ops_no_shapes; /* cpu_op events without "Input Dims" */
} tt_trace;

/* Nests, groups and sums the events into *out (already record_init'ed, kind "import"). */
xf_status torch_build_record(const tt_trace *t, record *out, import_stats *st);

#endif
