#include "dtype.h"

#include <math.h>
#include <string.h>
#include <strings.h>

static const struct {
    const char *name;
    xf_dtype t;
} k_names[] = {
    {"fp32", XF_FP32}, {"f32", XF_FP32},  {"float32", XF_FP32}, {"fp16", XF_FP16},
    {"f16", XF_FP16},  {"float16", XF_FP16}, {"half", XF_FP16},  {"bf16", XF_BF16},
    {"bfloat16", XF_BF16}, {"fp8", XF_FP8}, {"f8", XF_FP8},     {"int8", XF_INT8},
    {"i8", XF_INT8},   {"int4", XF_INT4},  {"i4", XF_INT4},
};

xf_status dtype_parse(const char *s, xf_dtype *out) {
    if (!s) return xf_errorf(XF_EINVAL, "missing dtype: use fp32, fp16, bf16, fp8, int8 or int4");
    for (size_t i = 0; i < sizeof k_names / sizeof k_names[0]; i++) {
        if (strcasecmp(s, k_names[i].name) == 0) {
            *out = k_names[i].t;
            return XF_OK;
        }
    }
    return xf_errorf(XF_EINVAL, "unknown dtype '%.64s': use fp32, fp16, bf16, fp8, int8 or int4", s);
}

const char *dtype_name(xf_dtype t) {
    static const char *names[XF_DTYPE_COUNT] = {"fp32", "fp16", "bf16", "fp8", "int8", "int4"};
    return (t >= 0 && t < XF_DTYPE_COUNT) ? names[t] : "?";
}

int dtype_bits(xf_dtype t) {
    static const int bits[XF_DTYPE_COUNT] = {32, 16, 16, 8, 8, 4};
    return (t >= 0 && t < XF_DTYPE_COUNT) ? bits[t] : 0;
}

int dtype_is_quantized(xf_dtype t) { return t == XF_INT8 || t == XF_INT4; }

double dtype_bytes(xf_dtype t, double n, int64_t row_len, int group) {
    double bytes = n * dtype_bits(t) / 8.0;
    if (dtype_is_quantized(t) && row_len > 0) {
        if (group <= 0) group = XF_DEFAULT_QUANT_GROUP;
        double rows = n / (double)row_len;
        double groups_per_row = ceil((double)row_len / group);
        bytes += rows * groups_per_row * XF_QUANT_SCALE_BYTES;
    }
    return bytes;
}

xf_dtype dtype_default_adtype(xf_dtype w) { return w == XF_FP32 ? XF_FP32 : w == XF_FP16 ? XF_FP16 : XF_BF16; }
