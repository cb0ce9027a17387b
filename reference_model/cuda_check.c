/* See cuda_check.h. */
#include "reference_model/cuda_check.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

int cuda_check_debug_env(const char *v) {
    if (!v) return 0;
    return !strcmp(v, "1") || !strcasecmp(v, "on") || !strcasecmp(v, "yes") || !strcasecmp(v, "true");
}

char *cuda_check_op_label(char *buf, size_t len, xf_phase phase, int layer, op_kind kind, int64_t step) {
    if (!buf || len == 0) return buf;
    char l[16];
    if (layer < 0) snprintf(l, sizeof l, "G");
    else snprintf(l, sizeof l, "L%d", layer);
    if (phase == XF_DECODE)
        snprintf(buf, len, "op %s/%s/%s (step %" PRId64 ")", phase_name(phase), l, op_kind_name(kind), step);
    else
        snprintf(buf, len, "op %s/%s/%s", phase_name(phase), l, op_kind_name(kind));
    return buf;
}

int cuda_check_cupti_major(uint32_t v) {
    if (v >= 10000) return (int)(v / 10000);
    if (v >= 19) return 12;
    if (v >= 13) return 11;
    if (v >= 1) return 10;
    return 0;
}

xf_status cuda_check_lib_version(const char *lib, const char *path, int found_major, int want_major) {
    if (found_major == want_major) return XF_OK;
    return xf_errorf(XF_EUNSUPPORTED,
                     "%s loaded from %s is CUDA %d's, this xfprof needs CUDA %d's: put the directory of CUDA %d's %s "
                     "first on LD_LIBRARY_PATH (the toolkit's lib64, or the nvidia/cu%d/lib folder of python's "
                     "nvidia wheels; bench/gpu_check.sh finds them)",
                     lib ? lib : "?", path && path[0] ? path : "(unknown file)", found_major, want_major, want_major,
                     lib ? lib : "library", want_major);
}

xf_status cuda_check_logits(const float *gpu, const float *cpu, int64_t vocab, double tol, cuda_check_step *out) {
    memset(out, 0, sizeof *out);
    if (!gpu || !cpu || vocab < 2) return xf_errorf(XF_EINVAL, "logit check: need two logit rows of at least 2 entries");
    if (!(tol > 0)) return xf_errorf(XF_EINVAL, "logit check: tolerance must be > 0");
    double scale = 1.0;
    int64_t ct = 0, gt = 0;
    for (int64_t i = 0; i < vocab; i++) {
        if (!isfinite(cpu[i])) return xf_errorf(XF_EINVAL, "logit check: CPU logit %" PRId64 " is %g", i, (double)cpu[i]);
        if (!isfinite(gpu[i])) return xf_errorf(XF_EINVAL, "logit check: GPU logit %" PRId64 " is %g", i, (double)gpu[i]);
        if (fabs(cpu[i]) > scale) scale = fabs(cpu[i]);
        if (cpu[i] > cpu[ct]) ct = i;
        if (gpu[i] > gpu[gt]) gt = i;
    }
    double err = 0, second = -INFINITY;
    for (int64_t i = 0; i < vocab; i++) {
        double e = fabs((double)gpu[i] - (double)cpu[i]);
        if (e > err) err = e;
        if (i != ct && cpu[i] > second) second = cpu[i];
    }
    out->scale = scale;
    out->max_err = err / scale;
    out->cpu_top = ct;
    out->gpu_top = gt;
    out->cpu_gap = ((double)cpu[ct] - second) / scale;
    out->decisive = out->cpu_gap > 2.0 * tol;
    out->ok = out->max_err <= tol && (!out->decisive || ct == gt);
    return XF_OK;
}

void cuda_check_summary_init(cuda_check_summary *s) {
    memset(s, 0, sizeof *s);
    s->first_failure = -1;
}

void cuda_check_summary_add(cuda_check_summary *s, const cuda_check_step *st) {
    if (st->decisive) s->decisive++;
    else if (st->cpu_top != st->gpu_top) s->close_calls++;
    if (st->max_err > s->max_err) s->max_err = st->max_err;
    if (!st->ok) {
        if (s->first_failure < 0) {
            s->first_failure = s->steps;
            s->first_failure_err = st->max_err;
            s->first_failure_cpu_top = st->cpu_top;
            s->first_failure_gpu_top = st->gpu_top;
        }
        s->failures++;
    }
    s->steps++;
}

char *cuda_check_summary_line(const cuda_check_summary *s, double tol, char *buf, size_t len) {
    if (!buf || len == 0) return buf;
    int n = snprintf(buf, len,
                     "teacher-forced: %" PRId64 " steps, %" PRId64 " decisive, %" PRId64 " close call%s, max error %.3g "
                     "(tol %.3g): ",
                     s->steps, s->decisive, s->close_calls, s->close_calls == 1 ? "" : "s", s->max_err, tol);
    if (n < 0 || (size_t)n >= len) return buf;
    if (s->steps == 0) snprintf(buf + n, len - (size_t)n, "nothing compared");
    else if (s->failures == 0) snprintf(buf + n, len - (size_t)n, "ok");
    else
        snprintf(buf + n, len - (size_t)n,
                 "FAILED (%" PRId64 " step%s), first at step %" PRId64 ": error %.3g, argmax gpu %" PRId64 " cpu %" PRId64,
                 s->failures, s->failures == 1 ? "" : "s", s->first_failure, s->first_failure_err, s->first_failure_gpu_top,
                 s->first_failure_cpu_top);
    return buf;
}

int cuda_check_replay(const int32_t *tr, const int32_t *tf, int64_t n_seqs, int64_t n_tok, const float *lr, const float *lf,
                      int64_t vocab, double tol, char *msg, size_t len) {
    if (!tr || !tf || !lr || !lf || n_seqs < 1 || n_tok < 1 || vocab < 2 || !msg || len == 0) {
        xf_errorf(XF_EINVAL, "replay check: bad arguments");
        return -1;
    }
    for (int64_t s = 0; s < n_seqs; s++)
        for (int64_t k = 0; k < n_tok; k++)
            if (tr[s * n_tok + k] != tf[s * n_tok + k]) {
                snprintf(msg, len,
                         "graph replay DIFFERS from op by op: sequence %" PRId64 " token %" PRId64 " is %d, op by op %d: the "
                         "graph timing is not of the same work",
                         s, k, (int)tr[s * n_tok + k], (int)tf[s * n_tok + k]);
                return 0;
            }
    double worst = 0;
    for (int64_t s = 0; s < n_seqs; s++) {
        cuda_check_step st;
        if (cuda_check_logits(lr + s * vocab, lf + s * vocab, vocab, tol, &st) != XF_OK) {
            snprintf(msg, len, "graph replay check: %s", xf_error_msg());
            return -1;
        }
        if (st.max_err > worst) worst = st.max_err;
    }
    if (worst > tol) {
        snprintf(msg, len, "graph replay DIFFERS from op by op: last logits max error %.3g (tol %.3g), tokens equal", worst, tol);
        return 0;
    }
    snprintf(msg, len, "graph replay equal to op by op: %" PRId64 " x %" PRId64 " tokens, last logits max error %.3g", n_seqs, n_tok,
             worst);
    return 1;
}
