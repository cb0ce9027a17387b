/* core/units: the one display rule. Sizes binary (B, KiB, ... YiB), rates and counts decimal
 * (k, M, G, ...), times s/ms/us/ns; three significant figures; the scale chosen after rounding;
 * "n/a" for NaN and infinities. Every expected string is worked out by hand in its comment. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "core/units.h"

#define BYTES(v, want)                                                                   \
    do {                                                                                 \
        char b_[64];                                                                     \
        cr_assert_str_eq(units_bytes((v), b_, sizeof b_), (want), "units_bytes(%s)", #v); \
    } while (0)
#define SI(v, u, want)                                                                      \
    do {                                                                                    \
        char b_[64];                                                                        \
        cr_assert_str_eq(units_si((v), (u), b_, sizeof b_), (want), "units_si(%s, %s)", #v, #u); \
    } while (0)
#define TIME(v, want)                                                                   \
    do {                                                                                \
        char b_[64];                                                                    \
        cr_assert_str_eq(units_time((v), b_, sizeof b_), (want), "units_time(%s)", #v); \
    } while (0)

Test(units, bytes_small_values_are_whole_bytes) {
    BYTES(0.0, "0 B");
    BYTES(-0.0, "0 B");
    BYTES(1.0, "1 B");
    BYTES(1023.0, "1023 B");
    BYTES(1023.4, "1023 B"); /* rounds to 1023: still bytes */
}

Test(units, bytes_scale_is_chosen_after_rounding) {
    BYTES(1023.5, "1.00 KiB"); /* 1023.5 / 1024 = 0.99951 -> would print "1024 B": one unit up */
    BYTES(1024.0, "1.00 KiB");
    BYTES(1536.0, "1.50 KiB");     /* 1536 / 1024 = 1.5 */
    BYTES(10240.0, "10.0 KiB");    /* 10 KiB: three figures */
    BYTES(104857600.0, "100 MiB"); /* 100 * 2^20 */
    BYTES(1072693248.0, "1023 MiB"); /* 1023 * 2^20: below the rounding edge of 1023.5 MiB */
    BYTES(1073217536.0, "1.00 GiB"); /* 1023.5 * 2^20 -> 0.99951 GiB */
}

Test(units, bytes_model_and_device_sizes) {
    BYTES(1610612736.0, "1.50 GiB");  /* 1.5 * 2^30 */
    BYTES(14495514624.0, "13.5 GiB"); /* 13.5 * 2^30: the fp16 weights of a 7B model are about this */
    BYTES(13.5e9, "12.6 GiB");        /* 13.5e9 / 2^30 = 12.573 */
    BYTES(42949672960.0, "40.0 GiB"); /* an A100-40GB: 40 * 2^30 */
    BYTES(141e9, "131 GiB");          /* 141e9 / 2^30 = 131.32 */
    BYTES(1099511627776.0, "1.00 TiB");
    BYTES(524288.0, "512 KiB"); /* LLaMA-2-7B fp16 KV per token: 2*32*32*128*2 */
    BYTES(819200.0, "800 KiB"); /* OPT-13B / LLaMA-2-13B fp16: 2*40*40*128*2 = 800 * 1024 */
}

Test(units, bytes_huge_values) {
    BYTES(1152921504606846976.0, "1.00 EiB");          /* 2^60 */
    BYTES(1208925819614629174706176.0, "1.00 YiB");    /* 2^80 */
    BYTES(309485009821345068724781056.0, "256 YiB");   /* 2^88 = 256 * 2^80 */
    BYTES(1237940039285380274899124224.0, "1024 YiB"); /* 2^90: past the last unit, still %.0f */
    BYTES(1e40, "8.27e+15 YiB");                       /* 1e40 / 2^80 = 8.2718e15: %.3g beyond 1e6 */
    BYTES(DBL_MAX, "1.49e+284 YiB");                   /* 1.7977e308 / 1.2089e24 = 1.4870e284 */
}

Test(units, bytes_negative_keep_their_sign) {
    BYTES(-1023.0, "-1023 B");
    BYTES(-1536.0, "-1.50 KiB");
    BYTES(-1610612736.0, "-1.50 GiB");
}

Test(units, bytes_not_finite) {
    BYTES(NAN, "n/a");
    BYTES(INFINITY, "n/a");
    BYTES(-INFINITY, "n/a");
}

Test(units, si_rates_and_counts_are_decimal) {
    SI(0.0, "B/s", "0 B/s");
    SI(6.74e9, "", "6.74 G");          /* parameters of LLaMA-2-7B */
    SI(2.039e12, "B/s", "2.04 TB/s");  /* an A100-80GB's HBM */
    SI(312e12, "FLOP/s", "312 TFLOP/s");
    SI(4.8e12, "B/s", "4.80 TB/s");    /* an H200's HBM */
    SI(999.4, "FLOP", "999 FLOP");
    SI(999.5, "FLOP", "1.00 kFLOP");   /* 999.5 would print "1000": one prefix up */
    SI(9.994, "x", "9.99 x");
    SI(9.996, "x", "10.0 x");
    SI(12345.0, "tokens/s", "12.3 ktokens/s");
    SI(-2500.0, "FLOP", "-2.50 kFLOP");
    SI(1e33, "FLOP/s", "1e+09 YFLOP/s"); /* 1e33 / 1e24 = 1e9: past the last prefix, %.3g */
}

Test(units, si_below_one_and_edge_inputs) {
    SI(0.5, "tokens/s", "0.5 tokens/s"); /* %.3g: no milli prefix for counts */
    SI(0.001234, "req/s", "0.00123 req/s");
    SI(-0.25, "", "-0.25 ");
    SI(42.0, NULL, "42.0 "); /* NULL unit: none */
    SI(NAN, "B/s", "n/a");
    SI(-INFINITY, "B/s", "n/a");
}

Test(units, time_units) {
    TIME(0.0, "0 s");
    TIME(12.5e-9, "12.5 ns");
    TIME(3.4e-6, "3.40 us");
    TIME(1.25e-3, "1.25 ms");
    TIME(0.0123456, "12.3 ms");
    TIME(0.0987648, "98.8 ms");
    TIME(0.9994, "999 ms");
    TIME(0.9996, "1.00 s"); /* 999.6 ms would print "1000 ms": one unit up */
    TIME(2.5, "2.50 s");
    TIME(4000.0, "4000 s");
    TIME(1e7, "1e+07 s");
    TIME(5e-13, "0.0005 ns"); /* below 1 ns: %.3g */
    TIME(-2e-3, "-2.00 ms");
    TIME(NAN, "n/a");
    TIME(INFINITY, "n/a");
}

Test(units, small_buffers_truncate_and_terminate) {
    char b[8];
    memset(b, 'x', sizeof b);
    units_bytes(1610612736.0, b, sizeof b); /* "1.50 GiB" is 8 characters: 7 fit */
    cr_assert_str_eq(b, "1.50 Gi");
    char one = 'x';
    cr_assert_eq(units_si(1.0, "B", &one, 0), &one); /* len 0: nothing written */
    cr_assert_eq(one, 'x');
    cr_assert_null(units_time(1.0, NULL, 16));
}
