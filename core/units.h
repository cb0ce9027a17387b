/* Human units: the one formatter behind every number xfprof shows a person (terminal tables,
 * CSV/Markdown, the HTML report, `xfprof kv`, advice evidence, CLI messages).
 *
 * The rule:
 *   - sizes (bytes held: weights, KV, activations, memory, caches) in binary units, B, KiB, MiB,
 *     GiB, TiB, PiB, EiB, ZiB, YiB. Memory is built, allocated and sold in powers of two (an
 *     "80 GB" H100 has 80 GiB), so a decimal "GB" of weights would not compare with the device's;
 *   - rates and counts in decimal SI prefixes, k M G T P E: GB/s, GFLOP/s, tokens/s, parameters,
 *     FLOPs. Datasheets give bandwidth and FLOP/s in powers of ten;
 *   - times in s, ms, us, ns (ASCII "us", so that fixed-width tables stay aligned).
 * Three significant figures ("1.50 GiB", "13.5 GiB", "312 TFLOP/s"); the scale is chosen after
 * rounding, so 1023.7 B is "1.00 KiB", never "1024 B". NaN and infinities print "n/a".
 *
 * Core, not reports: analyzers (advice evidence) use it too and may not depend on reports. */
#ifndef XF_UNITS_H
#define XF_UNITS_H

#include <stddef.h>

/* Bytes in binary units: "0 B", "1023 B", "1.00 KiB", "1.50 GiB", "-2.00 MiB". Beyond 1024 YiB
 * the mantissa goes to %.3g ("1.02e+03 YiB"). Writes at most len bytes to buf; returns buf. */
const char *units_bytes(double bytes, char *buf, size_t len);

/* A rate or count with a decimal prefix and the given unit ("" for a bare count): "6.74 G",
 * "2.04 TB/s", "312 TFLOP/s", "0.5 tokens/s" (|v| < 1: %.3g, no milli prefix). Returns buf. */
const char *units_si(double v, const char *unit, char *buf, size_t len);

/* A duration: "0 s", "12.5 ns", "1.25 us", "3.40 ms", "2.50 s", "4000 s" (no minutes: records
 * compare in seconds). Below 1 ns: "0.5 ns" (%.3g). Negative values keep their sign. Returns buf. */
const char *units_time(double seconds, char *buf, size_t len);

#endif
