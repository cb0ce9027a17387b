#include "test_hooks.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

xf_status cli_test_slow_op(record *r) {
    const char *spec = getenv("XFPROF_TEST_SLOW_OP");
    if (!spec || !*spec) return XF_OK;
    for (int i = 0; i < r->n_env; i++)
        if (strcmp(r->env[i].key, "test_slow_op") == 0) return XF_OK;
    char name[32];
    const char *colon = strrchr(spec, ':');
    double f = 0;
    char extra;
    if (!colon || (size_t)(colon - spec) >= sizeof name || sscanf(colon + 1, "%lf%c", &f, &extra) != 1 || !(f > 0) || !isfinite(f))
        return xf_errorf(XF_EINVAL, "XFPROF_TEST_SLOW_OP must be [phase/]op:factor, e.g. gate_up:1.3 or decode/*:1.1 (got '%.40s')",
                         spec);
    memcpy(name, spec, (size_t)(colon - spec));
    name[colon - spec] = '\0';
    int phase = -1; /* every phase */
    char *op_name = name, *slash = strchr(name, '/');
    if (slash) {
        *slash = '\0';
        op_name = slash + 1;
        for (int ph = 0; ph < XF_PHASE_COUNT; ph++)
            if (strcmp(name, phase_name((xf_phase)ph)) == 0) phase = ph;
        if (phase < 0) return xf_errorf(XF_EINVAL, "XFPROF_TEST_SLOW_OP: unknown phase '%s' (prefill or decode)", name);
    }
    int every = strcmp(op_name, "*") == 0;
    op_kind kind = 0;
    if (!every) {
        xf_status s = op_kind_parse(op_name, &kind);
        if (s) return xf_error_prefix(s, "XFPROF_TEST_SLOW_OP: ");
    }
    for (int i = 0; i < r->n_points; i++) {
        record_point *p = &r->points[i];
        double added[XF_PHASE_COUNT] = {0, 0};
        for (int64_t k = 0; k < p->n_ops; k++) {
            record_op *op = &p->ops[k];
            if ((!every && op->cost.kind != kind) || (phase >= 0 && (int)op->cost.phase != phase)) continue;
            added[op->cost.phase] += op->time_s * (f - 1);
            op->time_s *= f;
            if (!op->measured) op->predicted_time_s *= f;
            for (int j = 0; j < op->n_samples; j++) op->samples_s[j] *= f;
        }
        record_summary *sm = &p->summary;
        sm->prefill_time_s += added[XF_PREFILL];
        sm->decode_time_s += added[XF_DECODE];
        sm->ttft_s += added[XF_PREFILL];
        sm->tpot_s += added[XF_DECODE];
        double req = sm->ttft_s + (double)p->wl.gen * sm->tpot_s;
        sm->tokens_per_s = req > 0 ? (double)(p->wl.batch * p->wl.gen) / req : 0;
    }
    record_set_env(r, "test_slow_op", spec);
    return XF_OK;
}
