#include "units.h"

#include <math.h>
#include <stdio.h>

/* v (finite, nonzero) shown as "<mantissa> <unit>" with three significant figures. The scale goes
 * up while the mantissa would round to `base` or more ("1024 KiB" -> "1.00 MiB"): a >= base - 0.5
 * prints base with %.0f. small_g: a mantissa below 1 at the smallest unit uses %.3g (0.5 tokens/s),
 * else %.0f (bytes are whole). */
static const char *scaled(double v, double base, const char *const *units, int n_units, const char *suffix, int small_g,
                          char *buf, size_t len) {
    double a = fabs(v);
    int i = 0;
    while (i < n_units - 1 && a >= base - 0.5) {
        a /= base;
        v /= base;
        i++;
    }
    if (i == 0 && a < 1 && small_g) snprintf(buf, len, "%.3g %s%s", v, units[0], suffix);
    else if (i == 0 && !small_g) snprintf(buf, len, "%.0f %s%s", v, units[0], suffix);
    else if (a >= 1e6) snprintf(buf, len, "%.3g %s%s", v, units[i], suffix); /* beyond the last unit */
    else if (a >= 99.95) snprintf(buf, len, "%.0f %s%s", v, units[i], suffix);
    else if (a >= 9.995) snprintf(buf, len, "%.1f %s%s", v, units[i], suffix);
    else snprintf(buf, len, "%.2f %s%s", v, units[i], suffix);
    return buf;
}

const char *units_bytes(double bytes, char *buf, size_t len) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
    if (!buf || len == 0) return buf;
    if (!isfinite(bytes)) snprintf(buf, len, "n/a");
    else if (bytes == 0) snprintf(buf, len, "0 B");
    else scaled(bytes, 1024.0, units, (int)(sizeof units / sizeof units[0]), "", 0, buf, len);
    return buf;
}

const char *units_si(double v, const char *unit, char *buf, size_t len) {
    static const char *const pre[] = {"", "k", "M", "G", "T", "P", "E", "Z", "Y"};
    if (!buf || len == 0) return buf;
    if (!unit) unit = "";
    if (!isfinite(v)) snprintf(buf, len, "n/a");
    else if (v == 0) snprintf(buf, len, "0 %s", unit);
    else scaled(v, 1000.0, pre, (int)(sizeof pre / sizeof pre[0]), unit, 1, buf, len);
    return buf;
}

const char *units_time(double s, char *buf, size_t len) {
    if (!buf || len == 0) return buf;
    double a = fabs(s);
    const char *u;
    double m; /* the mantissa */
    if (!isfinite(s)) {
        snprintf(buf, len, "n/a");
        return buf;
    }
    if (s == 0) {
        snprintf(buf, len, "0 s");
        return buf;
    }
    /* the largest unit whose mantissa rounds to 1.00 or more at three figures */
    if (a >= 0.9995) u = "s", m = s;
    else if (a >= 0.9995e-3) u = "ms", m = s * 1e3;
    else if (a >= 0.9995e-6) u = "us", m = s * 1e6;
    else u = "ns", m = s * 1e9;
    double am = fabs(m);
    if (am >= 1e6 || am < 0.9995) snprintf(buf, len, "%.3g %s", m, u);
    else if (am >= 99.95) snprintf(buf, len, "%.0f %s", m, u);
    else if (am >= 9.995) snprintf(buf, len, "%.1f %s", m, u);
    else snprintf(buf, len, "%.2f %s", m, u);
    return buf;
}
