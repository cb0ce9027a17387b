/* The CUDA entry points of a build without CUDA (cuda_backend.h): every open answers
 * XF_EUNSUPPORTED saying so. With XFPROF_HAVE_CUDA the real ones are in the .cu files. */
#include "reference_model/cuda_backend.h"

#include <stdlib.h>
#include <string.h>

#ifndef XFPROF_HAVE_CUDA
int cuda_backend_built(void) {
    return 0;
}

xf_status cuda_device_parse(const char *spec, int *ordinal) {
    if (!spec) return xf_errorf(XF_EINVAL, "device: NULL");
    if (strcmp(spec, "cuda") == 0) {
        *ordinal = 0;
        return XF_OK;
    }
    if (strncmp(spec, "cuda:", 5) == 0 && spec[5] >= '0' && spec[5] <= '9') {
        char *end;
        long v = strtol(spec + 5, &end, 10);
        if (!*end && v >= 0 && v < 1024) {
            *ordinal = (int)v;
            return XF_OK;
        }
    }
    return xf_errorf(XF_EINVAL, "device '%s': expected cuda or cuda:N (N a GPU index)", spec);
}

xf_status cuda_device_open(int ordinal, cuda_device_info *info) {
    (void)ordinal;
    (void)info;
    return xf_errorf(XF_EUNSUPPORTED, "no CUDA device: this xfprof was built without CUDA (configure with "
                                      "-DXFPROF_CUDA=ON where the CUDA toolkit is installed)");
}

void cuda_backend_set_graph(void *ctx, int on) {
    (void)ctx;
    (void)on;
}

double cuda_backend_last_step_ms(void *ctx) {
    (void)ctx;
    return 0.0;
}

xf_status cuda_backend_debug_read(void *ctx, const char *which, float *out, int64_t n) {
    (void)ctx;
    (void)which;
    (void)out;
    (void)n;
    return cuda_device_open(0, NULL);
}
#endif
