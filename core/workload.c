#include "core/workload.h"

#include "core/limits.h"

const char *phase_name(xf_phase p) { return p == XF_PREFILL ? "prefill" : p == XF_DECODE ? "decode" : "?"; }

step_shape workload_prefill_step(const workload *w) {
    step_shape s = {XF_PREFILL, w->batch, w->prompt, w->prompt};
    return s;
}

step_shape workload_decode_step(const workload *w, int64_t context) {
    step_shape s = {XF_DECODE, w->batch, 1, context};
    return s;
}

int64_t workload_decode_steps(const workload *w) { return w->gen > 1 ? w->gen - 1 : 0; }

int64_t workload_mean_decode_context(const workload *w) { return w->prompt + w->gen / 2; }

void workload_default(workload *w) {
    w->batch = 1;
    w->prompt = XF_DEFAULT_PROMPT; /* core/limits.h: the request default of predict and sweep */
    w->gen = XF_DEFAULT_GEN;
    w->wdtype = XF_BF16;
    w->adtype = XF_BF16;
    w->kvdtype = XF_BF16;
    w->quant_group = 0;
}

workload workload_decode(int64_t batch, int64_t prompt, xf_dtype wdtype) {
    workload w;
    workload_default(&w);
    w.batch = batch;
    w.prompt = prompt;
    w.gen = 2;
    w.wdtype = wdtype;
    w.adtype = XF_FP32;
    w.kvdtype = XF_FP32;
    return w;
}

/* Limits that keep every product in the cost model far from 2^53 and say "absurd" plainly. */
#define MAX_BATCH (1LL << 20)
#define MAX_TOKENS (1LL << 24)

xf_status workload_validate(const workload *w) {
    if (w->batch < 1 || w->batch > MAX_BATCH)
        return xf_errorf(XF_EINVAL, "batch %lld out of range: give 1 to %lld", (long long)w->batch, MAX_BATCH);
    if (w->prompt < 1 || w->prompt > MAX_TOKENS)
        return xf_errorf(XF_EINVAL, "prompt length %lld out of range: give 1 to %lld", (long long)w->prompt, MAX_TOKENS);
    if (w->gen < 0 || w->gen > MAX_TOKENS)
        return xf_errorf(XF_EINVAL, "gen %lld out of range: give 0 to %lld", (long long)w->gen, MAX_TOKENS);
    if (w->quant_group < 0 || w->quant_group > (1 << 20))
        return xf_errorf(XF_EINVAL, "quantization group %d out of range", w->quant_group);
    if (w->wdtype < 0 || w->wdtype >= XF_DTYPE_COUNT || w->adtype < 0 || w->adtype >= XF_DTYPE_COUNT ||
        w->kvdtype < 0 || w->kvdtype >= XF_DTYPE_COUNT)
        return xf_errorf(XF_EINVAL, "unknown dtype in workload");
    if (w->adtype == XF_INT4)
        return xf_errorf(XF_EINVAL, "activations cannot be int4: use fp32, fp16, bf16, fp8 or int8");
    return XF_OK;
}
