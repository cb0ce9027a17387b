/* The interconnect ceiling's logic (probes/comm_ceiling.h) on a transport whose times are known:
 * nccl-tests' bus bandwidth convention, the slowest rank, the latency per ring step. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "probes/comm_ceiling.h"

#define NEAR(actual, expected, rel)                                                                                    \
    cr_assert(fabs((double)(actual) - (double)(expected)) <= (rel) * fabs((double)(expected)), "%s = %.17g, expected %.17g", \
              #actual, (double)(actual), (double)(expected))

/* A link of latency alpha per call and bandwidth beta, on a virtual clock; the other rank is
 * `slow` times slower (what max() reports). */
typedef struct fake {
    double clock, alpha, beta, slow;
    int calls, fail_at;
} fake;

static xf_status fake_allreduce(void *ctx, float *buf, int64_t n) {
    fake *f = ctx;
    if (++f->calls == f->fail_at) return xf_errorf(XF_EIO, "rank 1 died");
    f->clock += f->alpha + 4.0 * (double)n / f->beta;
    buf[0] += 0; /* touched */
    return XF_OK;
}
static xf_status fake_max(void *ctx, double *v) {
    *v *= ((fake *)ctx)->slow;
    return XF_OK;
}
static double fake_now(void *ctx) { return ((fake *)ctx)->clock; }

/* nccl-tests' PERFORMANCE.md: busbw = algbw * 2(n-1)/n for all-reduce; e.g. 1 GB in 5 ms over 8
 * ranks: algbw 200 GB/s, busbw 350 GB/s. */
Test(comm_ceiling, nccl_tests_convention) {
    NEAR(comm_busbw_allreduce(1e9, 5e-3, 8), 350e9, 1e-12);
    NEAR(comm_busbw_allreduce(1e9, 5e-3, 2), 200e9, 1e-12);
    cr_assert_eq(comm_busbw_allreduce(1e9, 0, 2), 0);
    cr_assert_eq(comm_busbw_allreduce(1e9, 1, 1), 0);
}

Test(comm_ceiling, recovers_the_link) {
    fake f = {0, 10e-6, 5e9, 1.0, 0, 0};
    comm_ceiling_ops ops = {&f, 2, fake_allreduce, fake_max, fake_now};
    comm_ceiling_result r;
    cr_assert_eq(comm_ceiling_measure(&ops, 1024, 64 << 20, 3, &r), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(r.n_sizes, 17);
    NEAR(r.bytes[0], 1024, 0);
    NEAR(r.time_s[0], 10e-6 + 1024 / 5e9, 1e-9);
    /* 2 ranks: busbw = algbw; the largest size comes closest to beta */
    const double big = 64.0 * 1048576;
    NEAR(r.bandwidth_Bps, big / (10e-6 + big / 5e9), 1e-9);
    NEAR(r.latency_s, r.time_s[0] / 2, 1e-12);
    device_link l;
    comm_ceiling_link(&r, "mpi-shm", &l);
    cr_assert_str_eq(l.name, "mpi-shm");
    NEAR(l.bandwidth_Bps, r.bandwidth_Bps, 0);
    cr_assert(strstr(l.source, "2 ranks") != NULL, "%s", l.source);
    /* the slowest rank sets the time: twice as slow, half the bandwidth */
    fake g = {0, 10e-6, 5e9, 2.0, 0, 0};
    comm_ceiling_ops o2 = {&g, 4, fake_allreduce, fake_max, fake_now};
    comm_ceiling_result r2;
    cr_assert_eq(comm_ceiling_measure(&o2, 1024, 64 << 20, 3, &r2), XF_OK);
    NEAR(r2.bandwidth_Bps, big / (2 * (10e-6 + big / 5e9)) * 2 * 3 / 4, 1e-9);
    NEAR(r2.latency_s, r2.time_s[0] / 6, 1e-12);
}

Test(comm_ceiling, refusals_and_failures) {
    fake f = {0, 1e-6, 1e9, 1.0, 0, 5};
    comm_ceiling_ops ops = {&f, 2, fake_allreduce, fake_max, fake_now};
    comm_ceiling_result r;
    cr_assert_eq(comm_ceiling_measure(&ops, 1024, 1 << 20, 3, &r), XF_EIO);
    cr_assert(strstr(xf_error_msg(), "died") != NULL);
    ops.ranks = 1;
    cr_assert_eq(comm_ceiling_measure(&ops, 1024, 1 << 20, 3, &r), XF_EINVAL);
    ops.ranks = 2;
    cr_assert_eq(comm_ceiling_measure(&ops, 1 << 20, 1024, 3, &r), XF_EINVAL);
    cr_assert_eq(comm_ceiling_measure(NULL, 1024, 2048, 3, &r), XF_EINVAL);
}
