/* Numeric storage types and what they cost in bytes. Quantized types (int8, int4) carry one
 * fp16 scale per group of `group` elements along the reduction dimension; their byte counts
 * include those scales. */
#ifndef XF_DTYPE_H
#define XF_DTYPE_H

#include <stdint.h>

#include "status.h"

typedef enum xf_dtype {
    XF_FP32 = 0,
    XF_FP16,
    XF_BF16,
    XF_FP8,
    XF_INT8,
    XF_INT4,
    XF_DTYPE_COUNT
} xf_dtype;

#define XF_DEFAULT_QUANT_GROUP 128 /* elements per scale for int8/int4 */
#define XF_QUANT_SCALE_BYTES 2     /* one fp16 scale per group */

/* Parses "fp32", "fp16", "bf16", "fp8", "int8", "int4" (also "f32", "float32", "float16",
 * "bfloat16"). XF_EINVAL with a message listing the accepted names otherwise. */
xf_status dtype_parse(const char *s, xf_dtype *out);

/* Canonical name ("bf16"); "?" for an out-of-range value. */
const char *dtype_name(xf_dtype t);

/* Bits per element, scales not counted. */
int dtype_bits(xf_dtype t);

/* 1 for int8/int4 (stored with group scales), else 0. */
int dtype_is_quantized(xf_dtype t);

/* Bytes to store n elements as rows of `row_len` elements, scales counted: a quantized row of
 * row_len elements has ceil(row_len / group) scales. For unquantized types row_len and group are
 * ignored. Returned as double: the cost model works in doubles (exact below 2^53). */
double dtype_bytes(xf_dtype t, double n, int64_t row_len, int group);

/* The activation (and GEMM compute) dtype a command uses when only the weights' is given: fp32 for
 * fp32 weights, fp16 for fp16, else bf16 (bf16, fp8, int8, int4 weights compute in bf16). */
xf_dtype dtype_default_adtype(xf_dtype wdtype);

#endif
