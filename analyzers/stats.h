/* Statistics for comparing measurements: medians and the two-sided Mann-Whitney U test on raw
 * samples (as Google Benchmark's compare.py uses). Pure functions, no allocation visible to the
 * caller beyond what the signatures say. */
#ifndef XF_STATS_H
#define XF_STATS_H

#include <stddef.h>
#include <stdint.h>

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

/* ---------- paired rounds, confidence intervals, multiple comparisons ---------- */

/* Student's t distribution with df > 0 degrees of freedom: the two-sided tail P(|T| >= |t|),
 * through the regularized incomplete beta function, I_{df/(df+t^2)}(df/2, 1/2). NaN for bad input. */
double stats_t_two_sided_p(double t, double df);

/* The q-quantile of Student's t with df degrees of freedom (0 < q < 1), by bisection on
 * stats_t_two_sided_p to 1e-12 relative. NaN for bad input. */
double stats_t_quantile(double q, double df);

/* Holm's step-down adjustment (Holm 1979) of n p-values, controlling the family-wise error rate:
 * sort ascending, adj_(i) = max over j <= i of min(1, (m - j + 1) p_(j)) with m the number of
 * finite p-values; NaN entries are not part of the family and stay NaN. adj may not alias p.
 * XF_ENOMEM on OOM. */
xf_status stats_holm(const double *p, size_t n, double *adj);

/* Wilcoxon signed-rank test of x[0..n) against a median of 0, two-sided. Zeros are dropped
 * (Wilcoxon's convention; m values remain); ranks of |x| are mid-ranks for ties. Exact p
 * (2 P(W <= min(W+, W-)) over the 2^m equally likely sign patterns, capped at 1; with ties,
 * conditional on the tie pattern) when m <= STATS_W_EXACT_MAX; otherwise the normal
 * approximation with the tie-corrected
 * variance m (m + 1) (2m + 1) / 24 - sum(t^3 - t) / 48 and a continuity correction 0.5. No value
 * left (m = 0): p = 1. Distribution-free: valid whenever, under no change, a round's log ratio is
 * as likely negative as positive -- which the random order within each round makes so. Its
 * smallest p is 2 / 2^m: 20 rounds reach 1.9e-6, enough for Holm over 150 ops. Finite values
 * only (XF_EINVAL otherwise). */
#define STATS_W_EXACT_MAX 60
typedef struct stats_w_result {
    size_t m;         /* nonzero values */
    double w_plus;    /* sum of the ranks of the positive values */
    double p;         /* two-sided */
    stats_u_method method; /* STATS_U_EXACT, STATS_U_NORMAL or STATS_U_DEGENERATE (m = 0) */
} stats_w_result;
xf_status stats_wilcoxon_signed_rank(const double *x, size_t n, stats_w_result *out);

/* The paired test over rounds: x[0..n) are per-round log ratios log(NEW / BASE). */
typedef struct stats_paired_result {
    size_t n;
    double hl;           /* Hodges-Lehmann estimate: the median of the n (n + 1) / 2 pairwise means
                            (x_i + x_j) / 2, i <= j; robust to a round hit by a burst of load */
    double mean;         /* mean log ratio: exp(mean) is the geometric-mean ratio */
    double sd;           /* sample standard deviation of the log ratios (n - 1); 0 when n < 2 */
    double t;            /* mean / (sd / sqrt n); +-inf when sd is 0 and mean is not */
    double p_t;          /* two-sided p of the one-sample t test of mean = 0, df n - 1; 1 when n < 2 */
    double p;            /* two-sided p of the Wilcoxon signed-rank test (the one compare uses) */
    double ci_lo, ci_hi; /* expanded percentile-bootstrap CI of the Hodges-Lehmann estimate, level conf */
} stats_paired_result;

#define STATS_PAIRED_MAX 1000 /* rounds at most (the pairwise means grow as n^2) */

/* Wilcoxon signed-rank and one-sample t tests of x against 0 and a bootstrap confidence interval (level conf,
 * e.g. 0.95) of the Hodges-Lehmann estimate: n_boot resamples of the n rounds with replacement
 * drawn from `seed` (the same data and seed give the same interval), the interval Hesterberg's
 * expanded percentile one (quantiles at Phi(-sqrt(n / (n - 1)) t_{(1+conf)/2, n-1}) and its
 * complement, so few rounds get the width Student's t gives them; with very few rounds it is
 * still no wider than the spread of the resampled estimates). Needs
 * 1 <= n <= STATS_PAIRED_MAX finite values, 0 < conf < 1, n_boot >= 100 (XF_EINVAL otherwise). */
xf_status stats_paired(const double *x, size_t n, double conf, int n_boot, uint64_t seed, stats_paired_result *out);

/* Percentile-bootstrap CI (level conf) of median(b) / median(a), a and b resampled
 * independently (two unpaired sets of repetitions), n_boot resamples from `seed`. Needs finite
 * samples, na, nb >= 1 and median(a) resamples > 0 (XF_EINVAL otherwise). */
xf_status stats_bootstrap_median_ratio(const double *a, size_t na, const double *b, size_t nb, double conf, int n_boot,
                                       uint64_t seed, double *lo, double *hi);

/* The smallest true slowdown (as a fraction: 0.05 = 5%) that the paired gate catches with the
 * given power: a regression is called when the CI's lower end exceeds log(1 + threshold); with
 * the per-round log ratios spread sd over n rounds, that needs a true mean log ratio of
 * log(1 + threshold) + (t_{1-alpha/2} + t_{power}) sd / sqrt n (df n - 1, the t approximation of
 * the bootstrap interval). NaN when n < 2. */
double stats_detectable_slowdown(double sd, size_t n, double threshold, double alpha, double power);

/* One bootstrap resample of n items: idx[0..n) drawn uniformly from 0..n-1 with replacement by
 * the generator the bootstraps above use (splitmix64), advancing *state; n = 0 draws nothing. */
void stats_boot_indexes(uint64_t *state, size_t n, size_t *idx);

#endif
