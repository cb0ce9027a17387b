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
