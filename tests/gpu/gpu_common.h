/* Shared by the GPU tests (CTest label `gpu`): skip, with the reason, when there is no device. */
#ifndef XF_TEST_GPU_COMMON_H
#define XF_TEST_GPU_COMMON_H

#include <criterion/criterion.h>
#include <math.h>

#include "reference_model/cuda_backend.h"

/* Skips the calling test with "no CUDA device: <reason>" unless device 0 opens. */
#define GPU_REQUIRE_DEVICE()                                                   \
    do {                                                                       \
        xf_status s_ = cuda_device_open(0, NULL);                              \
        if (s_ == XF_EUNSUPPORTED) cr_skip_test("no CUDA device: %s", xf_error_msg()); \
        cr_assert_eq(s_, XF_OK, "cuda_device_open: %s", xf_error_msg());       \
    } while (0)

/* max |a - b| over n, relative to max(1, max |b|). */
static inline double gpu_rel_err(const float *a, const double *b, int64_t n) {
    double mx = 1.0, err = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (fabs(b[i]) > mx) mx = fabs(b[i]);
        double e = fabs((double)a[i] - b[i]);
        if (!(e <= err)) err = e; /* NaN propagates as a failure */
    }
    return err / mx;
}

#endif
