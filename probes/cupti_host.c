/* CUPTI host-side logic in plain C (see cupti_host.h). */
#include "probes/cupti_host.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const cupti_metric_names[CUPTI_M_COUNT] = {
    "gpu__time_duration.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "lts__t_bytes.sum",
    "sm__ops_path_tensor_src_bf16_dst_fp32.sum",
    "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
};

/* record_counter.name holds 47 characters: the three SASS metrics go in under short names
 * (docs/cuda.md lists the mapping). */
static const char *const record_counter_names[CUPTI_M_COUNT] = {
    "gpu__time_duration.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "lts__t_bytes.sum",
    "sm__ops_path_tensor_src_bf16_dst_fp32.sum",
    "sass_thread_inst_fadd.sum",
    "sass_thread_inst_fmul.sum",
    "sass_thread_inst_ffma.sum",
};

char *cupti_range_name(const probe_range *r, char *buf, size_t len) {
    if (!buf || len == 0) return buf;
    char layer[16];
    if (r->layer < 0) snprintf(layer, sizeof layer, "G");
    else snprintf(layer, sizeof layer, "L%d", r->layer);
    snprintf(buf, len, "%s/%s/%s/s%" PRId64, phase_name(r->phase), layer, op_kind_name(r->kind), r->step);
    return buf;
}

xf_status cupti_range_parse(const char *name, probe_range *out) {
    if (!name) return xf_errorf(XF_EPARSE, "CUPTI range name: NULL");
    char buf[CUPTI_RANGE_NAME_MAX];
    size_t n = strlen(name);
    if (n == 0 || n >= sizeof buf) return xf_errorf(XF_EPARSE, "CUPTI range name '%.80s': empty or too long", name);
    memcpy(buf, name, n + 1);
    char *parts[5];
    int np = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
        if (np == 4) return xf_errorf(XF_EPARSE, "CUPTI range name '%s': more than 4 parts", name);
        parts[np++] = t;
    }
    if (np != 4) return xf_errorf(XF_EPARSE, "CUPTI range name '%s': expected phase/layer/op/step", name);
    probe_range r;
    if (strcmp(parts[0], "prefill") == 0) r.phase = XF_PREFILL;
    else if (strcmp(parts[0], "decode") == 0) r.phase = XF_DECODE;
    else return xf_errorf(XF_EPARSE, "CUPTI range name '%s': phase '%s' is not prefill or decode", name, parts[0]);
    if (strcmp(parts[1], "G") == 0) {
        r.layer = -1;
    } else {
        char *end;
        if (parts[1][0] != 'L' || parts[1][1] < '0' || parts[1][1] > '9')
            return xf_errorf(XF_EPARSE, "CUPTI range name '%s': layer '%s' is not G or L<n>", name, parts[1]);
        long v = strtol(parts[1] + 1, &end, 10);
        if (*end || v < 0 || v > 65534)
            return xf_errorf(XF_EPARSE, "CUPTI range name '%s': layer '%s' is not G or L<n>", name, parts[1]);
        r.layer = (int)v;
    }
    xf_status st = op_kind_parse(parts[2], &r.kind);
    if (st != XF_OK) return xf_error_prefix(XF_EPARSE, "CUPTI range name '%s': ", name);
    if (parts[3][0] != 's' || parts[3][1] < '0' || parts[3][1] > '9')
        return xf_errorf(XF_EPARSE, "CUPTI range name '%s': step '%s' is not s<n>", name, parts[3]);
    char *end;
    long long step = strtoll(parts[3] + 1, &end, 10);
    if (*end || step < 0 || step >= (1LL << 38))
        return xf_errorf(XF_EPARSE, "CUPTI range name '%s': step '%s' is not s<n>", name, parts[3]);
    r.step = step;
    *out = r;
    return XF_OK;
}

/* Layout: bit 63 tag | step (38 bits, 24..61) | phase (2 bits, 22..23) | layer + 1 (16 bits, 6..21)
 * | kind (6 bits, 0..5). */
uint64_t cupti_extid_encode(const probe_range *r) {
    uint64_t step = (uint64_t)r->step & ((1ULL << 38) - 1);
    uint64_t layer = (uint64_t)(r->layer + 1) & 0xFFFF;
    return (1ULL << 63) | (step << 24) | ((uint64_t)r->phase << 22) | (layer << 6) | ((uint64_t)r->kind & 63);
}

int cupti_extid_decode(uint64_t id, probe_range *out) {
    if (!(id >> 63)) return 0;
    uint64_t kind = id & 63, layer = (id >> 6) & 0xFFFF, phase = (id >> 22) & 3, step = (id >> 24) & ((1ULL << 38) - 1);
    if (kind >= OP_KIND_COUNT || phase >= XF_PHASE_COUNT || (id >> 62 & 1)) return 0;
    out->kind = (op_kind)kind;
    out->layer = (int)layer - 1;
    out->phase = (xf_phase)phase;
    out->step = (int64_t)step;
    return 1;
}

static int range_eq(const probe_range *a, const probe_range *b) {
    return a->phase == b->phase && a->layer == b->layer && a->kind == b->kind && a->step == b->step;
}

static int cmp_extcorr(const void *a, const void *b) {
    uint32_t x = ((const cupti_extcorr_rec *)a)->correlation_id, y = ((const cupti_extcorr_rec *)b)->correlation_id;
    return (x > y) - (x < y);
}

static int cmp_range_start(const void *a, const void *b) {
    uint64_t x = ((const cupti_range_time *)a)->first_start_ns, y = ((const cupti_range_time *)b)->first_start_ns;
    return (x > y) - (x < y);
}

xf_status cupti_attribute(const cupti_kernel_rec *k, int64_t n_k, const cupti_extcorr_rec *e, int64_t n_e,
                          cupti_attribution *out) {
    memset(out, 0, sizeof *out);
    if (n_k < 0 || n_e < 0) return xf_errorf(XF_EINVAL, "cupti_attribute: negative record count");
    cupti_extcorr_rec *sorted = NULL;
    if (n_e > 0) {
        sorted = malloc((size_t)n_e * sizeof *sorted);
        if (!sorted) return xf_errorf(XF_ENOMEM, "CUPTI attribution: out of memory for %" PRId64 " records", n_e);
        memcpy(sorted, e, (size_t)n_e * sizeof *sorted);
        qsort(sorted, (size_t)n_e, sizeof *sorted, cmp_extcorr);
    }
    int cap = 0;
    for (int64_t i = 0; i < n_k; i++) {
        const cupti_kernel_rec *kr = &k[i];
        if (kr->start_ns == 0 || kr->end_ns < kr->start_ns) {
            out->bad_records++;
            continue;
        }
        cupti_extcorr_rec key = {.correlation_id = kr->correlation_id};
        const cupti_extcorr_rec *hit =
            sorted ? bsearch(&key, sorted, (size_t)n_e, sizeof *sorted, cmp_extcorr) : NULL;
        probe_range r;
        if (!hit || !cupti_extid_decode(hit->external_id, &r)) {
            out->unattributed++;
            continue;
        }
        cupti_range_time *t = NULL;
        for (int j = out->n - 1; j >= 0; j--) /* recent ranges first: records come roughly in order */
            if (range_eq(&out->items[j].range, &r)) { t = &out->items[j]; break; }
        if (!t) {
            if (out->n == cap) {
                int nc = cap ? cap * 2 : 64;
                cupti_range_time *ni = realloc(out->items, (size_t)nc * sizeof *ni);
                if (!ni) {
                    free(sorted);
                    cupti_attribution_free(out);
                    return xf_errorf(XF_ENOMEM, "CUPTI attribution: out of memory for %d ranges", nc);
                }
                out->items = ni;
                cap = nc;
            }
            t = &out->items[out->n++];
            memset(t, 0, sizeof *t);
            t->range = r;
            t->first_start_ns = UINT64_MAX;
        }
        t->n_kernels++;
        t->kernel_s += (double)(kr->end_ns - kr->start_ns) * 1e-9;
        if (kr->start_ns < t->first_start_ns) t->first_start_ns = kr->start_ns;
        if (kr->end_ns > t->last_end_ns) t->last_end_ns = kr->end_ns;
    }
    for (int j = 0; j < out->n; j++)
        out->items[j].span_s = (double)(out->items[j].last_end_ns - out->items[j].first_start_ns) * 1e-9;
    if (out->n > 1) qsort(out->items, (size_t)out->n, sizeof *out->items, cmp_range_start);
    free(sorted);
    return XF_OK;
}

void cupti_attribution_free(cupti_attribution *a) {
    if (!a) return;
    free(a->items);
    memset(a, 0, sizeof *a);
}

const cupti_range_time *cupti_attribution_find(const cupti_attribution *a, const probe_range *r) {
    for (int j = 0; j < a->n; j++)
        if (range_eq(&a->items[j].range, r)) return &a->items[j];
    return NULL;
}

xf_status cupti_check_dropped(uint64_t dropped, size_t buffer_bytes) {
    if (dropped == 0) return XF_OK;
    return xf_errorf(XF_EIO,
                     "CUPTI dropped %" PRIu64 " activity records (buffers of %zu KiB): per-op kernel times "
                     "undercount; set XFPROF_CUPTI_BUFFER_MB larger (e.g. 64) or run fewer steps",
                     dropped, buffer_bytes / 1024);
}

void cupti_metric_values_clear(cupti_metric_values *m) {
    for (int i = 0; i < CUPTI_M_COUNT; i++) m->v[i] = NAN;
}

xf_status cupti_metric_values_set(cupti_metric_values *m, const char *name, double value) {
    for (int i = 0; i < CUPTI_M_COUNT; i++) {
        if (strcmp(name, cupti_metric_names[i]) != 0) continue;
        if (!isfinite(value) || value < 0)
            return xf_errorf(XF_EINVAL, "CUPTI metric %s: value %g is not a finite count >= 0", name, value);
        m->v[i] = value;
        return XF_OK;
    }
    return xf_errorf(XF_EINVAL, "CUPTI metric '%.80s' is not one xfprof asked for", name);
}

xf_status cupti_tensor_calibrate(double metric_value, int64_t m, int64_t n, int64_t k, double *flops_per_unit) {
    if (!(metric_value > 0) || !isfinite(metric_value))
        return xf_errorf(XF_EINVAL, "tensor calibration: the metric counted %g on the GEMM (expected > 0): "
                                    "the GEMM did not run on tensor cores", metric_value);
    if (m <= 0 || n <= 0 || k <= 0) return xf_errorf(XF_EINVAL, "tensor calibration: GEMM shape must be positive");
    double flops = 2.0 * (double)m * (double)n * (double)k;
    double ratio = flops / metric_value;
    double p2 = exp2(round(log2(ratio)));
    if (fabs(ratio / p2 - 1.0) > 0.02)
        return xf_errorf(XF_EINVAL, "tensor calibration: 2*M*N*K / metric = %.4g is not within 2%% of a power of "
                                    "two: the metric counts something else on this chip", ratio);
    *flops_per_unit = p2;
    return XF_OK;
}

void cupti_op_counts_of(const cupti_metric_values *m, double flops_per_unit, cupti_op_counts *out) {
    memset(out, 0, sizeof *out);
    for (int i = 0; i < CUPTI_M_COUNT; i++)
        if (isnan(m->v[i])) out->n_missing++;
    out->gpu_time_s = isnan(m->v[CUPTI_M_TIME]) ? NAN : m->v[CUPTI_M_TIME] * 1e-9;
    if (!isnan(m->v[CUPTI_M_DRAM_READ]) && !isnan(m->v[CUPTI_M_DRAM_WRITE])) {
        out->have_bytes = 1;
        out->dram_bytes = m->v[CUPTI_M_DRAM_READ] + m->v[CUPTI_M_DRAM_WRITE];
    }
    int fp32_ok = !isnan(m->v[CUPTI_M_FADD]) && !isnan(m->v[CUPTI_M_FMUL]) && !isnan(m->v[CUPTI_M_FFMA]);
    if (fp32_ok) out->fp32_flops = m->v[CUPTI_M_FADD] + m->v[CUPTI_M_FMUL] + 2.0 * m->v[CUPTI_M_FFMA];
    int tensor_ok = !isnan(m->v[CUPTI_M_TENSOR]) && flops_per_unit > 0;
    if (tensor_ok) out->tensor_flops = m->v[CUPTI_M_TENSOR] * flops_per_unit;
    out->have_flops = fp32_ok && tensor_ok;
    out->flops = out->tensor_flops + out->fp32_flops;
}

void cupti_fill_record_op(const cupti_metric_values *m, double flops_per_unit, record_op *op) {
    int n = op->n_counters; /* appended after what the op already holds (the kernel time) */
    for (int i = 0; i < CUPTI_M_COUNT && n < RECORD_MAX_COUNTERS; i++, n++) {
        record_counter *c = &op->counters[n];
        memset(c, 0, sizeof *c);
        snprintf(c->name, sizeof c->name, "%s", record_counter_names[i]);
        c->supported = !isnan(m->v[i]);
        c->value = c->supported ? m->v[i] : 0.0;
    }
    op->n_counters = n;
    cupti_op_counts oc;
    cupti_op_counts_of(m, flops_per_unit, &oc);
    if (oc.have_bytes) {
        op->bytes_from_counters = 1;
        op->measured_bytes = oc.dram_bytes;
    }
}

int cupti_metric_in_list(const char *list_text, const char *metric) {
    if (!list_text || !metric) return 0;
    const char *dot = strrchr(metric, '.');
    if (!dot || dot == metric) return 0;
    size_t blen = (size_t)(dot - metric);
    const char *rollup = dot + 1;
    const char *p = list_text;
    while (*p) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        if (len > 2 && p[0] >= '0' && p[0] <= '9' && p[1] == ' ') {
            int type = p[0] - '0';
            const char *name = p + 2;
            size_t nlen = len - 2;
            while (nlen && (name[nlen - 1] == '\r' || name[nlen - 1] == ' ')) nlen--;
            /* the base name is the part after the last '.' (prefixes like "LTS.TriageCompute.") */
            const char *base = name;
            for (size_t i = 0; i < nlen; i++)
                if (name[i] == '.') base = name + i + 1;
            size_t bl = nlen - (size_t)(base - name);
            if (bl == blen && memcmp(base, metric, blen) == 0) {
                int rollup_ok = !strcmp(rollup, "sum") || !strcmp(rollup, "avg") || !strcmp(rollup, "min") ||
                                !strcmp(rollup, "max");
                if (type == 0 && rollup_ok) return 1;
                if (type == 1 && (!strcmp(rollup, "ratio") || !strcmp(rollup, "pct"))) return 1;
                if (type == 2 && (rollup_ok || !strncmp(rollup, "pct_of_peak_", 12))) return 1;
            }
        }
        if (!eol) break;
        p = eol + 1;
    }
    return 0;
}

const char *cupti_privileges_hint(void) {
    return "hardware counters need profiling permission (CUPTI_ERROR_INSUFFICIENT_PRIVILEGES): per-op times "
           "come from kernel activity only. To enable counters for all users, load the driver with "
           "NVreg_RestrictProfilingToAdminUsers=0 (e.g. 'options nvidia NVreg_RestrictProfilingToAdminUsers=0' "
           "in /etc/modprobe.d/nvidia-profiling.conf, then reboot), or run as root / with CAP_SYS_ADMIN";
}

xf_status cupti_result_status(int r, int *privileges) {
    if (privileges) *privileges = (r == 35 || r == 40); /* INSUFFICIENT_PRIVILEGES, VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES */
    switch (r) {
    case 0: /* SUCCESS */
        return XF_OK;
    case 11: /* API_NOT_IMPLEMENTED */
    case 14: /* NOT_COMPATIBLE: "the activity kind cannot be enabled" (cupti_activity.h), e.g. another tool attached */
    case 15: /* NOT_INITIALIZED */
    case 26: /* HARDWARE_BUSY: the counters are in use by another profiling session */
    case 27: /* NOT_SUPPORTED */
    case 33: /* VIRTUALIZED_DEVICE_NOT_SUPPORTED */
    case 35: /* INSUFFICIENT_PRIVILEGES */
    case 36: /* OLD_PROFILER_API_INITIALIZED */
    case 38: /* LEGACY_PROFILER_NOT_SUPPORTED */
    case 39: /* MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED */
    case 40: /* VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES */
    case 41: /* CONFIDENTIAL_COMPUTING_NOT_SUPPORTED */
    case 42: /* CMP_DEVICE_NOT_SUPPORTED */
    case 43: /* MIG_DEVICE_NOT_SUPPORTED */
    case 44: /* SLI_DEVICE_NOT_SUPPORTED */
    case 45: /* WSL_DEVICE_NOT_SUPPORTED */
    case 46: /* INVALID_CHIP_NAME: a chip this CUPTI does not know */
        return XF_EUNSUPPORTED;
    default:
        return XF_EIO;
    }
}

void cupti_set_plan_single(cupti_set_plan *p) {
    memset(p, 0, sizeof *p);
    p->n_sets = 1;
    p->first[0] = 0;
    p->count[0] = CUPTI_M_COUNT;
}

void cupti_set_plan_split(cupti_set_plan *p) {
    memset(p, 0, sizeof *p);
    p->n_sets = 2;
    p->first[0] = 0;
    p->count[0] = CUPTI_PASS0_METRICS;
    p->first[1] = CUPTI_PASS0_METRICS;
    p->count[1] = CUPTI_M_COUNT - CUPTI_PASS0_METRICS;
    p->fallback = 1;
}

xf_status cupti_set_plan_choose(xf_status single_status, int64_t passes, int64_t max_passes, cupti_set_plan *out) {
    cupti_set_plan_single(out);
    if (single_status == XF_EUNSUPPORTED) return XF_EUNSUPPORTED;
    if (single_status == XF_OK && passes < 1)
        return xf_errorf(XF_EIO, "CUPTI: the profiler host reports %" PRId64 " passes for the metric config", passes);
    if (single_status == XF_OK && passes <= max_passes) return XF_OK;
    cupti_set_plan_split(out);
    return XF_OK;
}

void cupti_range_table_init(cupti_range_table *t) {
    memset(t, 0, sizeof *t);
}

void cupti_range_table_free(cupti_range_table *t) {
    if (!t) return;
    free(t->names);
    free(t->values);
    memset(t, 0, sizeof *t);
}

static int64_t table_index(const cupti_range_table *t, const char *name) {
    for (int64_t i = 0; i < t->n; i++)
        if (!strcmp(t->names[i], name)) return i;
    return -1;
}

xf_status cupti_range_table_merge(cupti_range_table *t, const char *name, const char *const *metric_names, const double *values,
                                  int n_metrics) {
    if (!name || !name[0]) return xf_errorf(XF_EPARSE, "CUPTI counter data: a range has no name");
    if (strlen(name) >= CUPTI_RANGE_NAME_MAX)
        return xf_errorf(XF_EPARSE, "CUPTI counter data: range name '%.80s' is longer than %d characters", name,
                         CUPTI_RANGE_NAME_MAX - 1);
    for (int k = 0; k < n_metrics; k++) {
        int known = 0;
        for (int i = 0; i < CUPTI_M_COUNT && !known; i++) known = !strcmp(metric_names[k], cupti_metric_names[i]);
        if (!known) return xf_errorf(XF_EINVAL, "CUPTI metric '%.80s' is not one xfprof asked for", metric_names[k]);
    }
    int64_t j = table_index(t, name);
    if (j < 0) {
        if (t->n == t->cap) {
            int64_t nc = t->cap ? 2 * t->cap : 64;
            char(*nn)[CUPTI_RANGE_NAME_MAX] = realloc(t->names, (size_t)nc * sizeof *nn);
            if (!nn) return xf_errorf(XF_ENOMEM, "CUPTI results: out of memory for %" PRId64 " ranges", nc);
            t->names = nn;
            cupti_metric_values *nv = realloc(t->values, (size_t)nc * sizeof *nv);
            if (!nv) return xf_errorf(XF_ENOMEM, "CUPTI results: out of memory for %" PRId64 " ranges", nc);
            t->values = nv;
            t->cap = nc;
        }
        j = t->n++;
        snprintf(t->names[j], CUPTI_RANGE_NAME_MAX, "%s", name);
        cupti_metric_values_clear(&t->values[j]);
    }
    for (int k = 0; k < n_metrics; k++)
        if (isfinite(values[k]) && values[k] >= 0) cupti_metric_values_set(&t->values[j], metric_names[k], values[k]);
    return XF_OK;
}

const cupti_metric_values *cupti_range_table_find(const cupti_range_table *t, const char *name) {
    int64_t j = name ? table_index(t, name) : -1;
    return j < 0 ? NULL : &t->values[j];
}

xf_status cupti_range_table_parsed(const cupti_range_table *t, int *n, probe_range **ranges, cupti_metric_values **values) {
    *n = 0;
    *ranges = NULL;
    *values = NULL;
    if (t->n == 0) return XF_OK;
    probe_range *r = malloc((size_t)t->n * sizeof *r);
    cupti_metric_values *v = malloc((size_t)t->n * sizeof *v);
    if (!r || !v) {
        free(r);
        free(v);
        return xf_errorf(XF_ENOMEM, "CUPTI results: out of memory");
    }
    int k = 0;
    for (int64_t i = 0; i < t->n; i++) {
        if (cupti_range_parse(t->names[i], &r[k]) != XF_OK) {
            xf_error_clear(); /* a range not named by xfprof (e.g. the calibration GEMM): skipped */
            continue;
        }
        v[k++] = t->values[i];
    }
    *n = k;
    *ranges = r;
    *values = v;
    return XF_OK;
}
