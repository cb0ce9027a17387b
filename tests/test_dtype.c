/* core/dtype: names, parsing, bits and byte counts with group scales. */
#include <criterion/criterion.h>
#include <string.h>

#include "core/dtype.h"

#define EXACT(actual, expected)                                                                                 \
    cr_assert((double)(actual) == (double)(expected), "%s = %.17g, expected %.17g", #actual, (double)(actual), \
              (double)(expected))

Test(dtype, parse_names_and_aliases) {
    const struct {
        const char *s;
        xf_dtype t;
    } ok[] = {{"fp32", XF_FP32},     {"f32", XF_FP32},  {"float32", XF_FP32}, {"FP32", XF_FP32},
              {"fp16", XF_FP16},     {"float16", XF_FP16}, {"half", XF_FP16}, {"bf16", XF_BF16},
              {"BFloat16", XF_BF16}, {"fp8", XF_FP8},   {"int8", XF_INT8},    {"Int4", XF_INT4}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        xf_dtype t = XF_DTYPE_COUNT;
        cr_assert_eq(dtype_parse(ok[i].s, &t), XF_OK, "%s", ok[i].s);
        cr_assert_eq(t, ok[i].t, "%s", ok[i].s);
    }
    /* Every canonical name parses back to itself. */
    for (int t = 0; t < XF_DTYPE_COUNT; t++) {
        xf_dtype back;
        cr_assert_eq(dtype_parse(dtype_name((xf_dtype)t), &back), XF_OK);
        cr_assert_eq(back, (xf_dtype)t);
    }
    cr_assert_str_eq(dtype_name(XF_BF16), "bf16");
    cr_assert_str_eq(dtype_name(XF_INT4), "int4");
    cr_assert_str_eq(dtype_name(XF_DTYPE_COUNT), "?");
    cr_assert_str_eq(dtype_name((xf_dtype)-1), "?");
}

Test(dtype, parse_rejects_with_a_message) {
    xf_dtype t = XF_FP16;
    cr_assert_eq(dtype_parse("fp64", &t), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "fp64") != NULL, "%s", xf_error_msg());
    cr_assert(strstr(xf_error_msg(), "bf16") != NULL, "message lists the accepted names: %s", xf_error_msg());
    cr_assert_eq(t, XF_FP16, "output untouched on error");
    cr_assert_eq(dtype_parse("", &t), XF_EINVAL);
    cr_assert_eq(dtype_parse("bf16 ", &t), XF_EINVAL);
    cr_assert_eq(dtype_parse(NULL, &t), XF_EINVAL);
}

Test(dtype, bits_and_quantized) {
    const int bits[XF_DTYPE_COUNT] = {32, 16, 16, 8, 8, 4};
    for (int t = 0; t < XF_DTYPE_COUNT; t++) cr_assert_eq(dtype_bits((xf_dtype)t), bits[t]);
    cr_assert_eq(dtype_bits(XF_DTYPE_COUNT), 0);
    cr_assert(dtype_is_quantized(XF_INT8) && dtype_is_quantized(XF_INT4));
    cr_assert(!dtype_is_quantized(XF_FP8) && !dtype_is_quantized(XF_BF16) && !dtype_is_quantized(XF_FP32));
}

Test(dtype, bytes_with_scales) {
    /* Plain types: n * bits / 8, row and group ignored. 10 elements: fp32 40, fp16 20, fp8 10. */
    EXACT(dtype_bytes(XF_FP32, 10, 5, 2), 40);
    EXACT(dtype_bytes(XF_FP16, 10, 0, 0), 20);
    EXACT(dtype_bytes(XF_BF16, 10, 0, 0), 20);
    EXACT(dtype_bytes(XF_FP8, 10, 0, 0), 10);
    /* int4 4096 x 4096, group 128: 4096*4096/2 = 8,388,608 + 4096 rows * 32 scales * 2 B
     * = 262,144 -> 8,650,752. Group 0 is the default 128. */
    EXACT(dtype_bytes(XF_INT4, 4096.0 * 4096.0, 4096, 128), 8650752);
    EXACT(dtype_bytes(XF_INT4, 4096.0 * 4096.0, 4096, 0), 8650752);
    /* int8 two rows of 128, group 128: 256 + 2 * 1 * 2 = 260. */
    EXACT(dtype_bytes(XF_INT8, 256, 128, 128), 260);
    /* A row not a multiple of the group: 3 rows of 100, group 64 -> ceil(100/64) = 2 scales per
     * row: 300 + 3 * 2 * 2 = 312. */
    EXACT(dtype_bytes(XF_INT8, 300, 100, 64), 312);
    /* int4, row of 11008 (LLaMA down proj input), group 128: 86 scales per row;
     * 4096 rows: 11008*4096/2 + 4096*86*2 = 22,544,384 + 704,512 = 23,248,896. */
    EXACT(dtype_bytes(XF_INT4, 11008.0 * 4096.0, 11008, 128), 23248896);
    /* No row length: scales not counted. */
    EXACT(dtype_bytes(XF_INT4, 100, 0, 128), 50);
    EXACT(dtype_bytes(XF_INT8, 0, 128, 128), 0);
}
