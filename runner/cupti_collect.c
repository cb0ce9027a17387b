/* Range Profiler user replay over a whole request (cupti_collect.h). */
#include "runner/cupti_collect.h"

#include <stdlib.h>
#include <string.h>

#include "probes/gpu_ceilings.h"
#include "reference_model/model.h"

#define MAX_PASSES 64

static xf_status one_pass(const cupti_collect_args *a, cupti_probe *p, int set) {
    probe_set ps = {1, {cupti_probe_as_probe(p)}};
    xf_status s = model_prefill(a->m, a->n_seqs, a->prompts, a->lens, &ps);
    for (int k = 0; !s && k < a->n_decode; k++) s = model_decode_step(a->m, NULL, &ps);
    if (!s && set == 0) {
        cupti_probe_push_named(p, "calibration");
        s = gpu_ceilings_run_gemm(a->ordinal, 4096, 4096, 4096);
        cupti_probe_pop_named(p);
    }
    return s;
}

xf_status cupti_collect_counters(const cupti_collect_args *a, cupti_collect_result *out) {
    memset(out, 0, sizeof *out);
    if (!a || !a->m || a->n_seqs < 1 || !a->prompts || !a->lens || a->n_decode < 0)
        return xf_errorf(XF_EINVAL, "cupti_collect_counters: bad arguments");
    /* ranges per pass: (4 + 12 layers + kv_alloc) per step, plus the calibration */
    const model_config *cfg = model_get_config(a->m);
    int64_t per_step = 5 + 12 * cfg->n_layers;
    int64_t ranges = per_step * (1 + a->n_decode) + 1;
    if (ranges > 100000) return xf_errorf(XF_EINVAL, "CUPTI counters: %lld op ranges per pass is too many; use fewer decode steps",
                                          (long long)ranges);
    cupti_probe *p = NULL;
    xf_status s = cupti_probe_init(&p, a->ordinal, CUPTI_MODE_COUNTERS, (int)ranges);
    if (s) return s;
    for (int set = 0; !s && set < CUPTI_METRIC_SETS; set++) {
        int done = 0;
        for (int pass = 0; !s && !done; pass++) {
            if (pass == MAX_PASSES) {
                s = xf_errorf(XF_EIO, "CUPTI counters: metric set %d not done after %d passes", set, MAX_PASSES);
                break;
            }
            s = cupti_probe_pass_begin(p, set);
            if (!s) {
                xf_status w = one_pass(a, p, set);
                int d = 0;
                s = cupti_probe_pass_end(p, &d);
                if (!s) s = w;
                done = d;
            }
            out->passes[set] = pass + 1;
        }
    }
    if (!s) s = cupti_probe_results(p, &out->n, &out->ranges, &out->values);
    if (!s) {
        cupti_metric_values cal;
        if (cupti_probe_named_values(p, "calibration", &cal) == XF_OK &&
            cupti_tensor_calibrate(cal.v[CUPTI_M_TENSOR], 4096, 4096, 4096, &out->flops_per_unit) != XF_OK)
            out->flops_per_unit = 0;
        xf_error_clear();
    }
    cupti_probe_free(p);
    if (s) cupti_collect_result_free(out);
    return s;
}

void cupti_collect_result_free(cupti_collect_result *r) {
    if (!r) return;
    free(r->ranges);
    free(r->values);
    memset(r, 0, sizeof *r);
}

int cupti_collect_apply(const cupti_collect_result *r, int64_t decode_step, record_point *pt) {
    int applied = 0;
    for (int64_t i = 0; i < pt->n_ops; i++) {
        record_op *op = &pt->ops[i];
        int64_t step = op->cost.phase == XF_PREFILL ? 0 : decode_step;
        for (int j = 0; j < r->n; j++) {
            const probe_range *q = &r->ranges[j];
            if (q->phase == op->cost.phase && q->layer == op->cost.layer && q->kind == op->cost.kind && q->step == step) {
                cupti_fill_record_op(&r->values[j], r->flops_per_unit, op);
                applied++;
                break;
            }
        }
    }
    return applied;
}
