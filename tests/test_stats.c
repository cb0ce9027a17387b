/* Mann-Whitney U test and medians against hand-computed values. Every p-value below was also
 * checked with scipy.stats.mannwhitneyu (scipy 1.x, method='exact' or 'asymptotic' as noted,
 * use_continuity=True, alternative='two-sided') on 2026-11-30; the numbers are written in. */
#include <criterion/criterion.h>
#include <math.h>

#include "analyzers/stats.h"

#define N(x) (sizeof(x) / sizeof((x)[0]))

Test(stats, median_odd_even_and_input_untouched) {
    double odd[] = {3, 1, 2};
    double even[] = {4, 1, 3, 2};
    cr_assert_float_eq(stats_median(odd, 3), 2.0, 1e-15);
    cr_assert_float_eq(stats_median(even, 4), 2.5, 1e-15); /* (2 + 3) / 2 */
    cr_assert_float_eq(odd[0], 3.0, 0);                     /* the caller's array is not sorted */
    cr_assert(isnan(stats_median(odd, 0)));
}

Test(stats, separated_three_each_exact) {
    /* a = 1,2,3 take ranks 1,2,3: R1 = 6, U1 = 6 - 3*4/2 = 0, U2 = 9.
     * C(6,3) = 20 equally likely arrangements, one has U = 0: p = 2 * 1/20 = 0.1 (scipy 0.1). */
    double a[] = {1, 2, 3}, b[] = {4, 5, 6};
    stats_u_result r;
    cr_assert_eq(stats_mann_whitney(a, 3, b, 3, &r), XF_OK);
    cr_assert_eq(r.method, STATS_U_EXACT);
    cr_assert_float_eq(r.u1, 0.0, 1e-12);
    cr_assert_float_eq(r.u2, 9.0, 1e-12);
    cr_assert_float_eq(r.p, 0.1, 1e-12);
    /* swapping the sides swaps U1 and U2, same p */
    cr_assert_eq(stats_mann_whitney(b, 3, a, 3, &r), XF_OK);
    cr_assert_float_eq(r.u1, 9.0, 1e-12);
    cr_assert_float_eq(r.p, 0.1, 1e-12);
}

Test(stats, separated_five_each_exact) {
    /* U1 = 15 - 15 = 0; C(10,5) = 252; p = 2/252 = 0.0079365... (scipy 0.007936507936507936) */
    double a[] = {1, 2, 3, 4, 5}, b[] = {6, 7, 8, 9, 10};
    stats_u_result r;
    cr_assert_eq(stats_mann_whitney(a, 5, b, 5, &r), XF_OK);
    cr_assert_eq(r.method, STATS_U_EXACT);
    cr_assert_float_eq(r.p, 2.0 / 252.0, 1e-12);
    cr_assert(r.p < 0.05);
}

Test(stats, tiny_samples) {
    /* one sample each: U1 = 0 of 2 arrangements, p = 2 * 1/2 = 1 (scipy 1.0): never significant */
    double a[] = {1}, b[] = {2};
    stats_u_result r;
    cr_assert_eq(stats_mann_whitney(a, 1, b, 1, &r), XF_OK);
    cr_assert_float_eq(r.p, 1.0, 1e-12);
    /* interleaved 3 vs 3: a = 1,3,5 ranks 1,3,5: R1 = 9, U1 = 3, U2 = 6. U's counts for (3,3),
     * u = 0..9: 1,1,2,3,3,3,3,2,1,1 (20). P(U <= 3) = 7/20, p = 0.7 (scipy 0.7) */
    double c[] = {1, 3, 5}, d[] = {2, 4, 6};
    cr_assert_eq(stats_mann_whitney(c, 3, d, 3, &r), XF_OK);
    cr_assert_float_eq(r.u1, 3.0, 1e-12);
    cr_assert_float_eq(r.p, 0.7, 1e-12);
    /* 7 vs 8 with one b below all a: a = 10..16 ranks 2..8, R1 = 35, U1 = 35 - 28 = 7;
     * C(15,7) = 6435 arrangements; scipy (exact) p = 0.013986013986013986 = 90/6435 */
    double e[] = {10, 12, 11, 13, 14, 15, 16}, f[] = {20, 21, 19, 22, 9, 23, 24, 25};
    cr_assert_eq(stats_mann_whitney(e, N(e), f, N(f), &r), XF_OK);
    cr_assert_eq(r.method, STATS_U_EXACT);
    cr_assert_float_eq(r.u1, 7.0, 1e-12);
    cr_assert_float_eq(r.p, 90.0 / 6435.0, 1e-12);
}

Test(stats, ties_normal_approximation) {
    /* a = 1,2,2,3  b = 2,3,4,5. Sorted: 1a 2a 2a 2b 3a 3b 4b 5b.
     * ranks: 1 -> 1; the three 2s share positions 2,3,4 -> 3; the two 3s 5,6 -> 5.5; 4 -> 7; 5 -> 8.
     * R1 = 1 + 3 + 3 + 5.5 = 12.5; U1 = 12.5 - 4*5/2 = 2.5; U2 = 16 - 2.5 = 13.5; mu = 8.
     * ties: (3^3 - 3) + (2^3 - 2) = 30; n = 8: var = 16/12 * (9 - 30/56) = 11.285714...
     * z = (|2.5 - 8| - 0.5) / sqrt(11.285714) = 5 / 3.3594217 = 1.4883514
     * p = erfc(z / sqrt 2) = 0.1366582477 (scipy asymptotic 0.1366582477381475) */
    double a[] = {1, 2, 2, 3}, b[] = {2, 3, 4, 5};
    stats_u_result r;
    cr_assert_eq(stats_mann_whitney(a, 4, b, 4, &r), XF_OK);
    cr_assert_eq(r.ties, 1);
    cr_assert_eq(r.method, STATS_U_NORMAL); /* ties: never the exact table */
    cr_assert_float_eq(r.u1, 2.5, 1e-12);
    cr_assert_float_eq(r.u2, 13.5, 1e-12);
    cr_assert_float_eq(r.z, 1.4883513944689681, 1e-9);
    cr_assert_float_eq(r.p, 0.1366582477381475, 1e-9);
}

Test(stats, all_equal_is_p_one) {
    /* every value 2: all six share mid-rank 3.5, R1 = 10.5, U1 = 10.5 - 6 = 4.5 = mu;
     * ties (6^3 - 6) = 210 = n(n-1)(n+1) -> variance 9/12 * (7 - 210/30) = 0: p = 1 (scipy 1.0) */
    double a[] = {2, 2, 2}, b[] = {2, 2, 2};
    stats_u_result r;
    cr_assert_eq(stats_mann_whitney(a, 3, b, 3, &r), XF_OK);
    cr_assert_float_eq(r.u1, 4.5, 1e-12);
    cr_assert_eq(r.method, STATS_U_DEGENERATE);
    cr_assert_float_eq(r.p, 1.0, 0);
}

Test(stats, larger_samples_normal) {
    /* 12 vs 12, completely separated: U1 = 0, mu = 72, var = 144/12 * 25 = 300,
     * z = (72 - 0.5) / sqrt(300) = 4.1280544, p = erfc(z / sqrt 2) = 3.6584553539e-05 (scipy same) */
    double a[12], b[12];
    for (int i = 0; i < 12; i++) a[i] = 1 + i, b[i] = 13 + i;
    stats_u_result r;
    cr_assert_eq(stats_mann_whitney(a, 12, b, 12, &r), XF_OK);
    cr_assert_eq(r.method, STATS_U_NORMAL);
    cr_assert_float_eq(r.u1, 0.0, 1e-12);
    cr_assert_float_eq(r.z, 4.128054424705824, 1e-9);
    cr_assert_float_eq(r.p, 3.6584553538971e-05, 1e-12);
    /* interleaved: a = 1.0, 1.1, ..., 2.1; b = 1.05, 1.15, ..., 2.05, 3.0. a's ranks are
     * 1,3,...,21 (sum 121) and 23: R1 = 144, U1 = 144 - 78 = 66;
     * z = (|66 - 72| - 0.5) / sqrt(300) = 0.3175426, p = 0.7508318841 (scipy 0.7508318840891169) */
    for (int i = 0; i < 12; i++) a[i] = 1.0 + 0.1 * i, b[i] = 1.05 + 0.1 * i;
    b[11] = 3.0;
    cr_assert_eq(stats_mann_whitney(a, 12, b, 12, &r), XF_OK);
    cr_assert_float_eq(r.u1, 66.0, 1e-9);
    cr_assert_float_eq(r.p, 0.7508318840891169, 1e-9);
}

Test(stats, bad_input) {
    double a[] = {1, 2}, b[] = {NAN};
    stats_u_result r;
    cr_assert_eq(stats_mann_whitney(a, 2, b, 0, &r), XF_EINVAL);
    cr_assert_eq(stats_mann_whitney(a, 2, b, 1, &r), XF_EINVAL);
}

/* ---------- Student's t, Holm, the paired test and the bootstrap ---------- */

Test(stats, student_t_tails_and_quantiles) {
    /* df 1 is Cauchy: P(|T| >= 1) = 1 - 2 atan(1) / pi = 0.5 */
    cr_assert_float_eq(stats_t_two_sided_p(1, 1), 0.5, 1e-12);
    /* df 2 has a closed form: P(|T| >= t) = 1 - t / sqrt(2 + t^2); t = 2: 1 - 2 / sqrt 6 */
    cr_assert_float_eq(stats_t_two_sided_p(2, 2), 1 - 2 / sqrt(6.0), 1e-12);
    cr_assert_float_eq(stats_t_two_sided_p(-2, 2), 1 - 2 / sqrt(6.0), 1e-12);
    /* the textbook 97.5% point of df 9 (scipy.stats.t.ppf(0.975, 9) = 2.2621571627409915) */
    cr_assert_float_eq(stats_t_two_sided_p(2.2621571627409915, 9), 0.05, 1e-10);
    cr_assert_float_eq(stats_t_quantile(0.975, 9), 2.2621571627409915, 1e-9);
    /* df 2 inverse: a = 2q - 1, t = a sqrt(2 / (1 - a^2)); q = 0.9 -> 0.8 sqrt(2 / 0.36) */
    cr_assert_float_eq(stats_t_quantile(0.9, 2), 0.8 * sqrt(2 / 0.36), 1e-9);
    cr_assert_float_eq(stats_t_quantile(0.1, 2), -0.8 * sqrt(2 / 0.36), 1e-9);
    cr_assert_float_eq(stats_t_quantile(0.75, 1), 1.0, 1e-9);
    /* large df tends to the normal: 1.959963984540054 */
    cr_assert_float_eq(stats_t_quantile(0.975, 1e7), 1.959963984540054, 1e-5);
    cr_assert_float_eq(stats_t_two_sided_p(0, 5), 1.0, 1e-15);
    cr_assert(isnan(stats_t_two_sided_p(1, 0)));
    cr_assert(isnan(stats_t_quantile(1, 3)));
}

Test(stats, holm_by_hand) {
    /* sorted: 0.005 x4 = 0.02, 0.01 x3 = 0.03, 0.03 x2 = 0.06, 0.04 x1 = 0.04 -> max so far 0.06 */
    double p[] = {0.01, 0.04, 0.03, 0.005}, adj[4];
    cr_assert_eq(stats_holm(p, 4, adj), XF_OK);
    cr_assert_float_eq(adj[0], 0.03, 1e-15);
    cr_assert_float_eq(adj[1], 0.06, 1e-15);
    cr_assert_float_eq(adj[2], 0.06, 1e-15);
    cr_assert_float_eq(adj[3], 0.02, 1e-15);
    /* NaN (untested) is outside the family: m = 2 -> 0.2 x2 = 0.4, 0.6 x1 -> 0.6; capped at 1 */
    double q[] = {NAN, 0.6, 0.2}, qa[3];
    cr_assert_eq(stats_holm(q, 3, qa), XF_OK);
    cr_assert(isnan(qa[0]));
    cr_assert_float_eq(qa[1], 0.6, 1e-15);
    cr_assert_float_eq(qa[2], 0.4, 1e-15);
    double r[] = {0.9, 0.8}, ra[2];
    cr_assert_eq(stats_holm(r, 2, ra), XF_OK);
    cr_assert_float_eq(ra[0], 1.0, 0);
    cr_assert_float_eq(ra[1], 1.0, 0);
}

/* Generated samples for the tests below: a fixed-seed normal generator. */
static uint64_t g_state = 12345;
static double gen_uniform(void) {
    uint64_t z = (g_state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return ((double)(z >> 11) + 0.5) * 0x1.0p-53;
}
static double gen_normal(void) { return sqrt(-2 * log(gen_uniform())) * cos(2 * M_PI * gen_uniform()); }

Test(stats, holm_controls_the_family_wise_error_on_generated_nulls) {
    /* 150 true nulls (uniform p), as 150 ops compared at alpha 0.05: without a correction almost
     * every family has a false alarm (1 - 0.95^150 = 0.9995); with Holm the family-wise rate is
     * at most alpha (here 1 - (1 - 0.05/150)^150 = 0.0488 in expectation). 2000 families. */
    double p[150], adj[150];
    int raw_fail = 0, holm_fail = 0;
    for (int f = 0; f < 2000; f++) {
        int any_raw = 0, any_holm = 0;
        for (int i = 0; i < 150; i++) {
            p[i] = gen_uniform();
            any_raw |= p[i] < 0.05;
        }
        cr_assert_eq(stats_holm(p, 150, adj), XF_OK);
        for (int i = 0; i < 150; i++) any_holm |= adj[i] < 0.05;
        raw_fail += any_raw;
        holm_fail += any_holm;
    }
    cr_assert_gt(raw_fail, 1980, "uncorrected: %d of 2000 families had a false alarm", raw_fail);
    cr_assert_lt(holm_fail, 130, "Holm: %d of 2000 families had a false alarm (expected about 98)", holm_fail);
    cr_assert_gt(holm_fail, 60, "Holm: %d of 2000 (expected about 98): the adjustment is too strict", holm_fail);
}

Test(stats, paired_by_hand) {
    /* log ratios 0.1, 0.2, 0.3: mean 0.2, sd 0.1, t = 0.2 / (0.1 / sqrt 3) = 3.4641016, df 2:
     * p = 1 - t / sqrt(2 + t^2) = 1 - 3.4641016 / sqrt 14 = 0.0741799 */
    double x[] = {0.1, 0.2, 0.3};
    stats_paired_result r;
    cr_assert_eq(stats_paired(x, 3, 0.95, 2000, 1, &r), XF_OK);
    cr_assert_float_eq(r.mean, 0.2, 1e-15);
    cr_assert_float_eq(r.hl, 0.2, 1e-15); /* Walsh averages .1 .15 .2 .2 .25 .3: median .2 */
    cr_assert_float_eq(r.sd, 0.1, 1e-15);
    cr_assert_float_eq(r.t, 2 * sqrt(3.0), 1e-12);
    cr_assert_float_eq(r.p_t, 1 - 2 * sqrt(3.0) / sqrt(14.0), 1e-10);
    cr_assert_float_eq(r.p, 2.0 / 8.0, 1e-15); /* Wilcoxon: all three positive, 1 of 8 sign patterns, x2 */
    /* the bootstrap means lie between the smallest and the largest value, around the mean */
    cr_assert(r.ci_lo >= 0.1 && r.ci_lo < 0.2 && r.ci_hi > 0.2 && r.ci_hi <= 0.3);
    stats_paired_result r2;
    cr_assert_eq(stats_paired(x, 3, 0.95, 2000, 1, &r2), XF_OK);
    cr_assert_float_eq(r2.ci_lo, r.ci_lo, 0); /* same data, same seed: same interval */
    /* identical rounds (deterministic counts): sd 0, the interval is the point */
    double d[] = {0.02, 0.02, 0.02, 0.02};
    cr_assert_eq(stats_paired(d, 4, 0.95, 500, 1, &r), XF_OK);
    cr_assert_float_eq(r.ci_lo, 0.02, 1e-15);
    cr_assert_float_eq(r.ci_hi, 0.02, 1e-15);
    cr_assert_float_eq(r.p_t, 0.0, 0);
    cr_assert_float_eq(r.p, 2.0 / 16.0, 1e-15); /* the signed-rank test's smallest p for 4 rounds (ties: exact) */
    double z[] = {0, 0};
    cr_assert_eq(stats_paired(z, 2, 0.95, 500, 1, &r), XF_OK);
    cr_assert_float_eq(r.p, 1.0, 0);
    /* one round of ten hit by a burst: the mean moves to 0.1, Hodges-Lehmann stays at 0 (45 of the
     * 55 Walsh averages are 0, nine are 0.5, one is 1) */
    double burst[10] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 1.0};
    cr_assert_eq(stats_paired(burst, 10, 0.95, 1000, 1, &r), XF_OK);
    cr_assert_float_eq(r.mean, 0.1, 1e-15);
    cr_assert_float_eq(r.hl, 0.0, 0);
    cr_assert_float_eq(r.ci_lo, 0.0, 0);
    double bad[] = {0.1, INFINITY};
    cr_assert_eq(stats_paired(bad, 2, 0.95, 500, 1, &r), XF_EINVAL);
    cr_assert_eq(stats_paired(x, 0, 0.95, 500, 1, &r), XF_EINVAL);
    cr_assert_eq(stats_paired(x, 3, 1.0, 500, 1, &r), XF_EINVAL);
    cr_assert_eq(stats_paired(x, 3, 0.95, 10, 1, &r), XF_EINVAL);
}

Test(stats, wilcoxon_signed_rank_by_hand) {
    stats_w_result w;
    /* all five positive: W+ = 15, one pattern of 32 has W+ = 15: p = 2/32 (scipy.stats.wilcoxon 0.0625) */
    double a[] = {0.3, 0.1, 0.5, 0.2, 0.4};
    cr_assert_eq(stats_wilcoxon_signed_rank(a, 5, &w), XF_OK);
    cr_assert_eq(w.method, STATS_U_EXACT);
    cr_assert_float_eq(w.w_plus, 15.0, 0);
    cr_assert_float_eq(w.p, 2.0 / 32.0, 1e-15);
    /* the smallest magnitude negative: W- = 1; W <= 1 in 2 patterns ({} and {1}): p = 4/32 (scipy 0.125) */
    double b[] = {-0.1, 0.2, 0.3, 0.4, 0.5};
    cr_assert_eq(stats_wilcoxon_signed_rank(b, 5, &w), XF_OK);
    cr_assert_float_eq(w.w_plus, 14.0, 0);
    cr_assert_float_eq(w.p, 4.0 / 32.0, 1e-15);
    /* a zero is dropped: m = 3, all positive: p = 2/8 */
    double c[] = {0, 1, 2, 3};
    cr_assert_eq(stats_wilcoxon_signed_rank(c, 4, &w), XF_OK);
    cr_assert_eq(w.m, 3);
    cr_assert_float_eq(w.p, 0.25, 1e-15);
    /* tied magnitudes 1, 1 share rank 1.5: W+ = 1.5 + 1.5 + 3 = 6 of 10, W- = 4. The 16 sign
     * patterns over ranks 1.5, 1.5, 3, 4 give W+ = 0, 1.5, 1.5, 3, 3, 4, 4.5, 4.5, 5.5, 5.5, 6,
     * 7, 7, 8.5, 8.5, 10: W+ <= 4 in 6 of them, p = 2 * 6/16 = 0.75 (conditional exact) */
    double d[] = {1, 1, 2, -3};
    cr_assert_eq(stats_wilcoxon_signed_rank(d, 4, &w), XF_OK);
    cr_assert_eq(w.method, STATS_U_EXACT);
    cr_assert_float_eq(w.w_plus, 6.0, 1e-15);
    cr_assert_float_eq(w.p, 0.75, 1e-12);
    /* more than STATS_W_EXACT_MAX values: the normal approximation. 61 values 1..61, the 61st
     * negative: W+ = 1891 - 61 = 1830, mean 945.5, var = 61*62*123/24 = 19382.75,
     * z = (884.5 - 0.5)/139.2219 = 6.349574, p = erfc(z / sqrt 2) = 2.1591e-10 */
    double g[61];
    for (int i = 0; i < 61; i++) g[i] = i + 1;
    g[60] = -61;
    cr_assert_eq(stats_wilcoxon_signed_rank(g, 61, &w), XF_OK);
    cr_assert_eq(w.method, STATS_U_NORMAL);
    cr_assert_float_eq(w.w_plus, 1830.0, 1e-9);
    cr_assert_float_eq(w.p, erfc((884.0 / sqrt(19382.75)) / sqrt(2.0)), 1e-15, "%.10g %d", w.p, (int)w.method);
    /* 20 rounds all one way: 2/2^20, below 0.05/150, so Holm over 150 ops can name it */
    double e[20];
    for (int i = 0; i < 20; i++) e[i] = 0.01 * (i + 1);
    cr_assert_eq(stats_wilcoxon_signed_rank(e, 20, &w), XF_OK);
    cr_assert_float_eq(w.p, 2.0 / 1048576.0, 1e-18);
    cr_assert_lt(w.p, 0.05 / 150);
    double z[] = {0, 0};
    cr_assert_eq(stats_wilcoxon_signed_rank(z, 2, &w), XF_OK);
    cr_assert_eq(w.method, STATS_U_DEGENERATE);
    cr_assert_float_eq(w.p, 1.0, 0);
    double bad[] = {NAN};
    cr_assert_eq(stats_wilcoxon_signed_rank(bad, 1, &w), XF_EINVAL);
}

Test(stats, wilcoxon_with_holm_on_generated_null_rounds) {
    /* 1000 families of 150 ops x 20 rounds of symmetric noise (heavy-tailed: a normal, and one
     * round in ten five times as wide, as a busy machine gives): Holm over the signed-rank
     * p-values keeps the family-wise false-alarm rate at most 5% (expected below it: the test
     * is discrete). A 10% slowdown of one op over the same noise is named in most families (the
     * wide rounds make some of its 20 log ratios negative; measured: 85%). */
    double x[20], p[150], adj[150];
    stats_w_result w;
    int false_fam = 0, found = 0, single = 0;
    for (int f = 0; f < 1000; f++) {
        for (int i = 0; i < 150; i++) {
            for (int k = 0; k < 20; k++) x[k] = 0.03 * gen_normal() * (gen_uniform() < 0.1 ? 5 : 1) + (i == 0 ? log(1.1) : 0);
            cr_assert_eq(stats_wilcoxon_signed_rank(x, 20, &w), XF_OK);
            p[i] = w.p;
        }
        cr_assert_eq(stats_holm(p, 150, adj), XF_OK);
        int any_null = 0;
        for (int i = 1; i < 150; i++) any_null |= adj[i] < 0.05;
        for (int i = 1; i < 150; i++) single += p[i] < 0.05;
        false_fam += any_null;
        found += adj[0] < 0.05;
    }
    cr_assert_lt(false_fam, 70, "%d of 1000 families had a false alarm", false_fam);
    cr_assert_gt(found, 780, "the 10%% op was named in %d of 1000", found);
    cr_assert_lt(single, 149 * 1000 * 0.052, "single tests at 0.05: %d of 149000", single);
    cr_log_info("signed-rank + Holm: %d of 1000 families with a false alarm; the slow op named in %d; single p < 0.05: %d of 149000",
                false_fam, found, single);
}

Test(stats, paired_ci_on_generated_rounds_has_its_coverage_and_power) {
    /* 1000 gates of 10 rounds, log ratios N(mu, 0.03^2). Under A/A (mu = 0) the 95% interval
     * excludes 0 about 5% of the time (allow 2..9%); beyond a 5% threshold (lower end > log 1.05)
     * essentially never. With a true 10% slowdown (mu = log 1.1) the lower end clears log 1.05 in
     * about 97% of gates: the t approximation (stats_detectable_slowdown) puts 80% power at 8.2%
     * and the mean 10% is (log 1.1 - log 1.05) / (0.03 / sqrt 10) = 4.9 standard errors above the
     * threshold against the 2.26 + 0.88 needed for 80% and 2.26 + 1.83 for 95%. */
    double x[10];
    stats_paired_result r;
    int excl0 = 0, false_gate = 0, caught = 0;
    for (int g = 0; g < 1000; g++) {
        for (int i = 0; i < 10; i++) x[i] = 0.03 * gen_normal();
        cr_assert_eq(stats_paired(x, 10, 0.95, 1000, (uint64_t)g, &r), XF_OK);
        excl0 += r.ci_lo > 0 || r.ci_hi < 0;
        false_gate += r.ci_lo > log(1.05);
        for (int i = 0; i < 10; i++) x[i] = log(1.1) + 0.03 * gen_normal();
        cr_assert_eq(stats_paired(x, 10, 0.95, 1000, (uint64_t)g, &r), XF_OK);
        caught += r.ci_lo > log(1.05);
    }
    cr_assert(excl0 > 20 && excl0 < 90, "A/A: the 95%% interval excluded 0 in %d of 1000", excl0);
    cr_assert_lt(false_gate, 3, "A/A: %d of 1000 gates failed at a 5%% threshold", false_gate);
    cr_assert_gt(caught, 950, "10%% slowdown caught in %d of 1000", caught);
    cr_log_info("A/A: 0 excluded in %d of 1000, gates failed %d; 10%% caught in %d", excl0, false_gate, caught);
}

Test(stats, bootstrap_median_ratio) {
    double a[] = {10, 10, 10}, b[] = {11, 11, 11, 11};
    double lo, hi;
    cr_assert_eq(stats_bootstrap_median_ratio(a, 3, b, 4, 0.95, 1000, 7, &lo, &hi), XF_OK);
    cr_assert_float_eq(lo, 1.1, 1e-12);
    cr_assert_float_eq(hi, 1.1, 1e-12);
    /* b = 2a: every resampled ratio lies in [2 * 1/5, 2 * 5/1]; the interval holds the true 2 */
    double c[] = {1, 2, 3, 4, 5}, d[] = {2, 4, 6, 8, 10};
    cr_assert_eq(stats_bootstrap_median_ratio(c, 5, d, 5, 0.95, 2000, 7, &lo, &hi), XF_OK);
    cr_assert(lo >= 0.4 && lo < 2 && hi > 2 && hi <= 10, "[%g, %g]", lo, hi);
    double zero[] = {0, 0};
    cr_assert_eq(stats_bootstrap_median_ratio(zero, 2, d, 5, 0.95, 200, 7, &lo, &hi), XF_EINVAL);
}

Test(stats, detectable_slowdown) {
    /* no noise: exactly the threshold */
    cr_assert_float_eq(stats_detectable_slowdown(0, 10, 0.05, 0.05, 0.8), 0.05, 1e-12);
    /* sd 0.03 over 10 rounds: log 1.05 + (t_.975,9 + t_.8,9) 0.03 / sqrt 10
     * = 0.0487902 + (2.2621572 + 0.8834039) 0.0094868 = 0.0786316 -> 8.18% (table t_.8,9 = 0.883) */
    double want = expm1(log(1.05) + (stats_t_quantile(0.975, 9) + stats_t_quantile(0.8, 9)) * 0.03 / sqrt(10.0));
    cr_assert_float_eq(stats_detectable_slowdown(0.03, 10, 0.05, 0.05, 0.8), want, 1e-12);
    cr_assert_float_eq(want, 0.0818057, 2e-6);
    cr_assert(isnan(stats_detectable_slowdown(0.03, 1, 0.05, 0.05, 0.8)));
}
