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

/* ---------- Student's t, Holm, bootstrap ---------- */

/* The continued fraction of the incomplete beta function (modified Lentz), for x below
 * (a + 1) / (a + b + 2) where it converges fast. */
static double beta_cf(double a, double b, double x) {
    const double tiny = 1e-300, eps = 1e-15;
    double qab = a + b, qap = a + 1, qam = a - 1;
    double c = 1, d = 1 - qab * x / qap;
    if (fabs(d) < tiny) d = tiny;
    d = 1 / d;
    double h = d;
    for (int m = 1; m <= 500; m++) {
        double m2 = 2.0 * m;
        double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1 + aa * d;
        if (fabs(d) < tiny) d = tiny;
        c = 1 + aa / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1 / d;
        h *= d * c;
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1 + aa * d;
        if (fabs(d) < tiny) d = tiny;
        c = 1 + aa / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1) < eps) break;
    }
    return h;
}

/* Regularized incomplete beta I_x(a, b), a, b > 0, x in [0, 1]. */
static double ibeta(double a, double b, double x) {
    if (x <= 0) return 0;
    if (x >= 1) return 1;
    double lbt = lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x);
    double bt = exp(lbt);
    if (x < (a + 1) / (a + b + 2)) return bt * beta_cf(a, b, x) / a;
    return 1 - bt * beta_cf(b, a, 1 - x) / b;
}

double stats_t_two_sided_p(double t, double df) {
    if (isnan(t) || !(df > 0)) return NAN;
    if (isinf(t)) return 0;
    double p = ibeta(df / 2, 0.5, df / (df + t * t));
    return p < 0 ? 0 : p > 1 ? 1 : p;
}

double stats_t_quantile(double q, double df) {
    if (!(q > 0 && q < 1) || !(df > 0)) return NAN;
    if (q == 0.5) return 0;
    if (q < 0.5) return -stats_t_quantile(1 - q, df);
    double target = 2 * (1 - q), lo = 0, hi = 1;
    while (stats_t_two_sided_p(hi, df) > target && hi < 1e12) hi *= 2;
    for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; i++) {
        double mid = 0.5 * (lo + hi);
        if (stats_t_two_sided_p(mid, df) > target) lo = mid;
        else hi = mid;
    }
    return 0.5 * (lo + hi);
}

typedef struct idx_p {
    double p;
    size_t i;
} idx_p;

static int cmp_idx_p(const void *x, const void *y) {
    const idx_p *a = x, *b = y;
    if (a->p != b->p) return (a->p > b->p) - (a->p < b->p);
    return (a->i > b->i) - (a->i < b->i);
}

xf_status stats_holm(const double *p, size_t n, double *adj) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++) m += !isnan(p[i]);
    for (size_t i = 0; i < n; i++) adj[i] = NAN;
    if (m == 0) return XF_OK;
    idx_p *s = malloc(m * sizeof *s);
    if (!s) return xf_errorf(XF_ENOMEM, "out of memory in the Holm adjustment");
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!isnan(p[i])) s[k++] = (idx_p){p[i], i};
    qsort(s, m, sizeof *s, cmp_idx_p);
    double run = 0;
    for (size_t j = 0; j < m; j++) {
        double v = (double)(m - j) * s[j].p;
        if (v > 1) v = 1;
        if (v > run) run = v; /* step-down: adjusted p never decreases along the sorted order */
        adj[s[j].i] = run;
    }
    free(s);
    return XF_OK;
}

/* splitmix64: a small, good generator for resampling indexes (Steele, Lea, Flood 2014). */
static uint64_t boot_next(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static size_t boot_index(uint64_t *st, size_t n) { return (size_t)(((unsigned __int128)boot_next(st) * n) >> 64); }

/* Linear interpolation between order statistics of the sorted v[0..n) at probability q. */
static double sorted_quantile(const double *v, size_t n, double q) {
    double pos = q * (double)(n - 1);
    size_t i = (size_t)pos;
    if (i + 1 >= n) return v[n - 1];
    double f = pos - (double)i;
    return v[i] + f * (v[i + 1] - v[i]);
}

static xf_status check_boot_args(double conf, int n_boot, const char *what) {
    if (!(conf > 0 && conf < 1)) return xf_errorf(XF_EINVAL, "%s: confidence level %g is not in (0, 1)", what, conf);
    if (n_boot < 100 || n_boot > 1000000) return xf_errorf(XF_EINVAL, "%s: %d resamples is not in 100..1000000", what, n_boot);
    return XF_OK;
}

static double median_inplace(double *c, size_t n) {
    qsort(c, n, sizeof *c, cmp_double);
    return (n % 2) ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
}

typedef struct abs_rank {
    double a;
    int positive;
} abs_rank;

static int cmp_abs_rank(const void *x, const void *y) {
    double a = ((const abs_rank *)x)->a, b = ((const abs_rank *)y)->a;
    return (a > b) - (a < b);
}

xf_status stats_wilcoxon_signed_rank(const double *x, size_t n, stats_w_result *out) {
    memset(out, 0, sizeof *out);
    if (n > (SIZE_MAX / 2) / sizeof(abs_rank)) return xf_errorf(XF_EOVERFLOW, "signed-rank test: too many values");
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return xf_errorf(XF_EINVAL, "signed-rank test: value %zu is not finite", i);
    abs_rank *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return xf_errorf(XF_ENOMEM, "out of memory in the signed-rank test");
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (x[i] != 0) v[m++] = (abs_rank){fabs(x[i]), x[i] > 0};
    out->m = m;
    if (m == 0) {
        free(v);
        out->method = STATS_U_DEGENERATE;
        out->p = 1;
        return XF_OK;
    }
    qsort(v, m, sizeof *v, cmp_abs_rank);
    double wp = 0, tie_term = 0;
    int ties = 0;
    for (size_t i = 0; i < m;) {
        size_t j = i;
        while (j + 1 < m && v[j + 1].a == v[i].a) j++;
        double mid = 0.5 * ((double)(i + 1) + (double)(j + 1));
        double tc = (double)(j - i + 1);
        if (tc > 1) {
            ties = 1;
            tie_term += tc * tc * tc - tc;
        }
        for (size_t k = i; k <= j; k++)
            if (v[k].positive) wp += mid;
        i = j + 1;
    }
    (void)ties;
    double mm = (double)m, total = mm * (mm + 1) / 2;
    out->w_plus = wp;
    double wmin = fmin(wp, total - wp);
    if (m <= STATS_W_EXACT_MAX) {
        /* the 2^m sign patterns counted by W+ over the (doubled, so integer) mid-ranks: exact, and
         * with ties exact conditionally on the tie pattern; doubles count 2^60 exactly enough */
        int *r2 = malloc(m * sizeof *r2);
        size_t top = (size_t)(2 * total + 0.5);
        double *cnt = calloc(top + 1, sizeof *cnt);
        if (!r2 || !cnt) {
            free(r2);
            free(cnt);
            return xf_errorf(XF_ENOMEM, "out of memory in the signed-rank test");
        }
        for (size_t i = 0; i < m;) { /* the mid-ranks again, doubled */
            size_t j = i;
            while (j + 1 < m && v[j + 1].a == v[i].a) j++;
            for (size_t k = i; k <= j; k++) r2[k] = (int)(i + 1 + j + 1);
            i = j + 1;
        }
        cnt[0] = 1;
        size_t reach = 0;
        for (size_t i = 0; i < m; i++) {
            size_t r = (size_t)r2[i];
            reach += r;
            for (size_t w = reach; w >= r; w--) cnt[w] += cnt[w - r];
        }
        double below = 0, lim = 2 * wmin + 1e-9;
        for (size_t w = 0; w <= top && (double)w <= lim; w++) below += cnt[w];
        free(r2);
        free(cnt);
        free(v);
        double p = 2 * below / ldexp(1.0, (int)m);
        out->p = p > 1 ? 1 : p;
        out->method = STATS_U_EXACT;
        return XF_OK;
    }
    free(v);
    double var = mm * (mm + 1) * (2 * mm + 1) / 24 - tie_term / 48;
    if (!(var > 0)) {
        out->method = STATS_U_DEGENERATE;
        out->p = 1;
        return XF_OK;
    }
    double z = (fabs(wp - total / 2) - 0.5) / sqrt(var);
    if (z < 0) z = 0;
    double p = erfc(z / sqrt(2.0));
    out->p = p > 1 ? 1 : p;
    out->method = STATS_U_NORMAL;
    return XF_OK;
}

/* Hodges-Lehmann: the median of the Walsh averages of x[0..n); w holds n (n + 1) / 2 doubles. */
static double hodges_lehmann(const double *x, size_t n, double *w) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = i; j < n; j++) w[k++] = 0.5 * (x[i] + x[j]);
    return median_inplace(w, k);
}

xf_status stats_paired(const double *x, size_t n, double conf, int n_boot, uint64_t seed, stats_paired_result *out) {
    memset(out, 0, sizeof *out);
    xf_status s = check_boot_args(conf, n_boot, "paired test");
    if (s) return s;
    if (n < 1) return xf_errorf(XF_EINVAL, "paired test: no rounds");
    if (n > STATS_PAIRED_MAX) return xf_errorf(XF_EINVAL, "paired test: %zu rounds, at most %d", n, STATS_PAIRED_MAX);
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) return xf_errorf(XF_EINVAL, "paired test: round %zu's log ratio is not finite", i + 1);
        sum += x[i];
    }
    out->n = n;
    out->mean = sum / (double)n;
    double ss = 0;
    for (size_t i = 0; i < n; i++) ss += (x[i] - out->mean) * (x[i] - out->mean);
    out->sd = n > 1 ? sqrt(ss / (double)(n - 1)) : 0;
    if (n < 2) {
        out->t = 0;
        out->p_t = 1;
    } else if (out->sd > 1e-12 * fabs(out->mean)) {
        out->t = out->mean / (out->sd / sqrt((double)n));
        out->p_t = stats_t_two_sided_p(out->t, (double)(n - 1));
    } else { /* every round the same (deterministic counts): rounding aside, no spread */
        out->sd = 0;
        out->t = out->mean == 0 ? 0 : copysign(INFINITY, out->mean);
        out->p_t = out->mean == 0 ? 1 : 0;
    }
    stats_w_result wr;
    if ((s = stats_wilcoxon_signed_rank(x, n, &wr))) return s;
    out->p = wr.p;
    size_t nw = n * (n + 1) / 2;
    double *work = malloc(((size_t)n_boot + n + nw) * sizeof *work);
    if (!work) return xf_errorf(XF_ENOMEM, "out of memory in the bootstrap");
    double *est = work, *rs = work + n_boot, *w = rs + n;
    out->hl = hodges_lehmann(x, n, w);
    uint64_t st = seed;
    for (int b = 0; b < n_boot; b++) {
        for (size_t i = 0; i < n; i++) rs[i] = x[boot_index(&st, n)];
        est[b] = hodges_lehmann(rs, n, w);
    }
    qsort(est, (size_t)n_boot, sizeof *est, cmp_double);
    /* Hesterberg's expanded percentile interval: the plain percentile interval is too narrow for
     * few rounds (it behaves like z sd / sqrt n where t_{n-1} sd / sqrt(n - 1) is due), so take
     * the quantiles at tail Phi(-sqrt(n / (n - 1)) t_{1-alpha/2, n-1}) instead of alpha / 2. */
    double tail = (1 - conf) / 2;
    if (n >= 2) {
        double t = stats_t_quantile(1 - tail, (double)(n - 1));
        tail = 0.5 * erfc(sqrt((double)n / (double)(n - 1)) * t / sqrt(2.0));
    }
    out->ci_lo = sorted_quantile(est, (size_t)n_boot, tail);
    out->ci_hi = sorted_quantile(est, (size_t)n_boot, 1 - tail);
    free(work);
    return XF_OK;
}

xf_status stats_bootstrap_median_ratio(const double *a, size_t na, const double *b, size_t nb, double conf, int n_boot,
                                       uint64_t seed, double *lo, double *hi) {
    *lo = *hi = NAN;
    xf_status s = check_boot_args(conf, n_boot, "bootstrap");
    if (s) return s;
    if (na < 1 || nb < 1) return xf_errorf(XF_EINVAL, "bootstrap needs at least one sample on each side (got %zu and %zu)", na, nb);
    if (na > (SIZE_MAX / 4) / sizeof(double) || nb > (SIZE_MAX / 4) / sizeof(double) - na)
        return xf_errorf(XF_EOVERFLOW, "bootstrap: too many samples");
    for (size_t i = 0; i < na; i++)
        if (!isfinite(a[i])) return xf_errorf(XF_EINVAL, "bootstrap: sample %zu of the first side is not finite", i);
    for (size_t i = 0; i < nb; i++)
        if (!isfinite(b[i])) return xf_errorf(XF_EINVAL, "bootstrap: sample %zu of the second side is not finite", i);
    double *work = malloc((na + nb + (size_t)n_boot) * sizeof *work);
    if (!work) return xf_errorf(XF_ENOMEM, "out of memory in the bootstrap");
    double *wa = work, *wb = work + na, *ratios = work + na + nb;
    uint64_t st = seed;
    for (int k = 0; k < n_boot; k++) {
        for (size_t i = 0; i < na; i++) wa[i] = a[boot_index(&st, na)];
        for (size_t i = 0; i < nb; i++) wb[i] = b[boot_index(&st, nb)];
        double ma = median_inplace(wa, na), mb = median_inplace(wb, nb);
        if (!(ma > 0)) {
            free(work);
            return xf_errorf(XF_EINVAL, "bootstrap: a resampled median of the first side is %g, not positive: no ratio", ma);
        }
        ratios[k] = mb / ma;
    }
    qsort(ratios, (size_t)n_boot, sizeof *ratios, cmp_double);
    *lo = sorted_quantile(ratios, (size_t)n_boot, (1 - conf) / 2);
    *hi = sorted_quantile(ratios, (size_t)n_boot, 1 - (1 - conf) / 2);
    free(work);
    return XF_OK;
}

double stats_detectable_slowdown(double sd, size_t n, double threshold, double alpha, double power) {
    if (n < 2 || !(sd >= 0) || !(alpha > 0 && alpha < 1) || !(power > 0 && power < 1) || !(threshold > -1)) return NAN;
    double df = (double)(n - 1);
    double need = log1p(threshold) + (stats_t_quantile(1 - alpha / 2, df) + stats_t_quantile(power, df)) * sd / sqrt((double)n);
    return expm1(need);
}

/* ---------- resampling indexes (issue 17: the class confidence's bootstrap) ---------- */

void stats_boot_indexes(uint64_t *state, size_t n, size_t *idx) {
    for (size_t i = 0; i < n; i++) idx[i] = boot_index(state, n);
}
