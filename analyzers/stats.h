/* Statistics for comparing measurements: medians and the two-sided Mann-Whitney U test on raw
 * samples (as Google Benchmark's compare.py uses). Pure functions, no allocation visible to the
 * caller beyond what the signatures say. */
#ifndef XF_STATS_H
#define XF_STATS_H

#include <stddef.h>

#include "core/status.h"

/* Median of x[0..n) (mean of the two middle values for even n); x is not modified. NaN when n is
 * 0 or on OOM. */
double stats_median(const double *x, size_t n);

/* Which distribution gave the p-value. */
typedef enum stats_u_method {
    STATS_U_EXACT = 0, /* the exact null distribution of U: n1, n2 <= STATS_U_EXACT_MAX and no ties */
    STATS_U_NORMAL,    /* normal approximation, tie-corrected variance, continuity correction 0.5 */
    STATS_U_DEGENERATE /* every sample equal (no variance): p = 1 */
} stats_u_method;

#define STATS_U_EXACT_MAX 10

typedef struct stats_u_result {
    double u1;      /* U of sample a: R1 - n1 (n1 + 1) / 2, R1 the sum of a's mid-ranks */
    double u2;      /* U of sample b: n1 n2 - u1 */
    double z;       /* normal approximation's z (with continuity correction), 0 for exact */
    double p;       /* two-sided p-value in [0, 1] */
    int ties;       /* 1 when some values occur more than once across both samples */
    stats_u_method method;
} stats_u_result;

/* Two-sided Mann-Whitney U test of a[0..na) against b[0..nb). Both need at least one sample and
 * finite values (XF_EINVAL otherwise). Ranks are mid-ranks for ties. Exact p (2 * P(U <= min U),
 * capped at 1) when na, nb <= STATS_U_EXACT_MAX and there are no ties; otherwise the normal
 * approximation: mu = n1 n2 / 2, sigma^2 = n1 n2 / 12 * ((n + 1) - sum(t^3 - t) / (n (n - 1))),
 * z = (|U - mu| - 0.5) / sigma, p = erfc(z / sqrt 2), capped at 1. */
xf_status stats_mann_whitney(const double *a, size_t na, const double *b, size_t nb, stats_u_result *out);

const char *stats_u_method_name(stats_u_method m); /* "exact", "normal", "degenerate" */

#endif
