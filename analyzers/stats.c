#include "stats.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

double stats_median(const double *x, size_t n) {
    if (n == 0) return NAN;
    double *c = malloc(n * sizeof *c);
    if (!c) return NAN;
    memcpy(c, x, n * sizeof *c);
    qsort(c, n, sizeof *c, cmp_double);
    double m = (n % 2) ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
    free(c);
    return m;
}

const char *stats_u_method_name(stats_u_method m) {
    switch (m) {
    case STATS_U_EXACT: return "exact";
    case STATS_U_NORMAL: return "normal";
    case STATS_U_DEGENERATE: return "degenerate";
    }
    return "?";
}

typedef struct tagged {
    double v;
    int from_a;
} tagged;

static int cmp_tagged(const void *x, const void *y) {
    double a = ((const tagged *)x)->v, b = ((const tagged *)y)->v;
    return (a > b) - (a < b);
}

/* Number of arrangements with U == u for sizes (m, n): the count of subsets, by the recurrence
 * c(u; m, n) = c(u - n; m - 1, n) + c(u; m, n - 1) (does the largest value belong to the first
 * sample or not). Table sized for m, n <= STATS_U_EXACT_MAX. */
#define UMAX (STATS_U_EXACT_MAX * STATS_U_EXACT_MAX)
static double u_count(int m, int n, int u, double memo[STATS_U_EXACT_MAX + 1][STATS_U_EXACT_MAX + 1][UMAX + 1]) {
    if (u < 0 || u > m * n) return 0;
    if (m == 0 || n == 0) return u == 0 ? 1 : 0;
    double *slot = &memo[m][n][u];
    if (*slot >= 0) return *slot;
    double c = u_count(m - 1, n, u - n, memo) + u_count(m, n - 1, u, memo);
    *slot = c;
    return c;
}

static double exact_p(int m, int n, double umin) {
    static _Thread_local double memo[STATS_U_EXACT_MAX + 1][STATS_U_EXACT_MAX + 1][UMAX + 1];
    static _Thread_local int ready = 0;
    if (!ready) {
        for (int i = 0; i <= STATS_U_EXACT_MAX; i++)
            for (int j = 0; j <= STATS_U_EXACT_MAX; j++)
                for (int u = 0; u <= UMAX; u++) memo[i][j][u] = -1;
        ready = 1;
    }
    double total = 0, below = 0;
    for (int u = 0; u <= m * n; u++) {
        double c = u_count(m, n, u, memo);
        total += c;
        if (u <= umin) below += c;
    }
    double p = 2 * below / total;
    return p > 1 ? 1 : p;
}

xf_status stats_mann_whitney(const double *a, size_t na, const double *b, size_t nb, stats_u_result *out) {
    memset(out, 0, sizeof *out);
    if (na < 1 || nb < 1) return xf_errorf(XF_EINVAL, "Mann-Whitney U test needs at least one sample on each side (got %zu and %zu)", na, nb);
    if (na > (SIZE_MAX / 2) / sizeof(tagged) || nb > (SIZE_MAX / 2) / sizeof(tagged) - na)
        return xf_errorf(XF_EOVERFLOW, "Mann-Whitney U test: too many samples");
    size_t n = na + nb;
    for (size_t i = 0; i < na; i++)
        if (!isfinite(a[i])) return xf_errorf(XF_EINVAL, "Mann-Whitney U test: sample %zu of the first side is not finite", i);
    for (size_t i = 0; i < nb; i++)
        if (!isfinite(b[i])) return xf_errorf(XF_EINVAL, "Mann-Whitney U test: sample %zu of the second side is not finite", i);
    tagged *t = malloc(n * sizeof *t);
    if (!t) return xf_errorf(XF_ENOMEM, "out of memory in the Mann-Whitney U test");
    for (size_t i = 0; i < na; i++) t[i] = (tagged){a[i], 1};
    for (size_t i = 0; i < nb; i++) t[na + i] = (tagged){b[i], 0};
    qsort(t, n, sizeof *t, cmp_tagged);
    double r1 = 0, tie_term = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && t[j + 1].v == t[i].v) j++;
        double mid = 0.5 * ((double)(i + 1) + (double)(j + 1)); /* mid-rank of the run i..j (1-based) */
        double tc = (double)(j - i + 1);
        if (tc > 1) {
            tie_term += tc * tc * tc - tc;
            out->ties = 1;
        }
        for (size_t k = i; k <= j; k++)
            if (t[k].from_a) r1 += mid;
        i = j + 1;
    }
    free(t);
    double n1 = (double)na, n2 = (double)nb, nn = (double)n;
    out->u1 = r1 - n1 * (n1 + 1) / 2;
    out->u2 = n1 * n2 - out->u1;
    double mu = n1 * n2 / 2;
    if (na <= STATS_U_EXACT_MAX && nb <= STATS_U_EXACT_MAX && !out->ties) {
        out->method = STATS_U_EXACT;
        out->p = exact_p((int)na, (int)nb, fmin(out->u1, out->u2));
        return XF_OK;
    }
    double var = n1 * n2 / 12.0 * ((nn + 1) - (nn > 1 ? tie_term / (nn * (nn - 1)) : 0));
    if (!(var > 0)) {
        out->method = STATS_U_DEGENERATE;
        out->p = 1;
        return XF_OK;
    }
    out->method = STATS_U_NORMAL;
    out->z = (fabs(out->u1 - mu) - 0.5) / sqrt(var);
    double p = erfc(out->z / sqrt(2.0));
    out->p = p > 1 ? 1 : p;
    return XF_OK;
}
