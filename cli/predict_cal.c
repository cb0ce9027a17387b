#include "predict_cal.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "analyzers/predict_calibrated.h"
#include "analyzers/roofline.h"
#include "core/record.h"
#include "core/device.h"
#include "probes/ceilings.h"
#include "probes/omp_spin.h"
#include "runner/runner.h"

xf_status predict_cal_device(const char *name, const char *device_file, device_spec *dev, calib_table *cal, char *how,
                             size_t how_len, char *note, size_t note_len) {
    calib_table_init(cal);
    char path[4096];
    const char *file = device_file;
    xf_status s;
    if (!device_file && name && !strcasecmp(name, "cpu")) {
        if ((s = ceilings_machine_path(path, sizeof path))) return s;
        if (access(path, R_OK) != 0)
            return xf_errorf(XF_EIO, "--device cpu: no machine file at %s; run 'xfprof machine' (and 'xfprof machine --calibrate' "
                             "for calibrated predictions) first", path);
        if ((s = ceilings_load(path, dev))) return s;
        file = path;
    } else if ((s = device_lookup(name, device_file, dev))) {
        return s;
    }
    int present = 0;
    if (file && (s = calib_table_load_machine(file, cal, &present))) return s;
    if (present && cal->n > 0) {
        snprintf(how, how_len, "calibrated");
        snprintf(note, note_len, "calibration of %.32s (%.16s grid, %d threads) in %.120s", cal->created, cal->grid, cal->threads, file);
        return XF_OK;
    }
    calib_table_free(cal);
    if (!strcmp(dev->kind, "gpu") && !dev->measured) {
        if ((s = predcal_gpu_defaults(dev, cal))) return s;
        snprintf(how, how_len, "default efficiencies");
        snprintf(note, note_len, "%s spec sheet, not measured: memory-bound ops at %.0f%% of its bandwidth, GEMMs at %.0f%% of its "
                 "peak (docs/verdicts.md: sources) until a GPU run measures them", dev->name, 100 * PREDCAL_GPU_MEMORY_EFF,
                 100 * PREDCAL_GPU_GEMM_EFF);
        return XF_OK;
    }
    snprintf(how, how_len, "roofline bound");
    snprintf(note, note_len, "%s has no calibration ('xfprof machine --calibrate' measures this CPU's): predicted = max(F/P, Q/B)",
             file ? file : dev->name);
    return XF_OK;
}

void predict_cal_apply(record *rec, const calib_table *cal, const char *how, const char *note) {
    snprintf(rec->prediction, sizeof rec->prediction, "%s", how);
    snprintf(rec->prediction_note, sizeof rec->prediction_note, "%s", note);
    if (cal->n == 0) return;
    /* A CPU's table was measured with the projections on the units the backend picked (AMX tiles for
     * bf16 and int8 at 4+ tokens): each op is judged against that unit's peak here too, as run does,
     * not the cost model's fp32 (the same reference time on both sides of the efficiency) */
    for (int i = 0; strcmp(cal->grid, "default") && !strcmp(rec->device.kind, "cpu") && i < rec->n_points; i++)
        for (int64_t k = 0; k < rec->points[i].n_ops; k++) {
            record_op *op = &rec->points[i].ops[k];
            const xf_compute u = runner_cpu_op_compute(&rec->model, &rec->points[i].wl, &op->cost, &rec->device, 0);
            if (u == op->cost.compute) continue;
            op->cost.compute = u;
            op->predicted_time_s = roofline_predict_time(&op->cost, &rec->device);
        }
    predcal_stats tot;
    memset(&tot, 0, sizeof tot);
    for (int i = 0; i < rec->n_points; i++) {
        predcal_stats st;
        predcal_apply_point(cal, &rec->points[i], &rec->model, 1, &st);
        tot.ops += st.ops;
        tot.calibrated += st.calibrated;
        tot.clamped += st.clamped;
        tot.other_tier += st.other_tier;
    }
    if (strcmp(how, "calibrated")) return;
    /* the OpenMP spin a run would use now against the one the table was measured under */
    char spin[64], by[16], msg[320];
    omp_spin_in_force(spin, sizeof spin, by, sizeof by, 1);
    int sc = calib_spin_check(cal, spin, by, msg, sizeof msg);
    if (sc) fprintf(stderr, "xfprof predict: %s: %s\n", sc > 0 ? "warning" : "note", msg);
    record_set_env(rec, "calibration_omp_spin", msg);
    size_t l = strlen(rec->prediction_note);
    snprintf(rec->prediction_note + l, sizeof rec->prediction_note - l,
             "; %lld of %lld ops calibrated, %lld clamped to the table's range, %lld from the other memory tier", (long long)tot.calibrated,
             (long long)tot.ops, (long long)tot.clamped, (long long)tot.other_tier);
}
