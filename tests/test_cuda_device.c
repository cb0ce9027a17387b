/* The no-GPU path of the CUDA entry points: on a machine with no NVIDIA driver (this CI class),
 * opening a device is XF_EUNSUPPORTED with a message saying no CUDA device is present, in a CUDA
 * build (cudart_static finds no libcuda) and in a build without CUDA (the stub) alike. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <string.h>
#include <unistd.h>

#include "reference_model/cuda_backend.h"

static int have_driver(void) {
    return access("/dev/nvidiactl", F_OK) == 0 || access("/proc/driver/nvidia/version", F_OK) == 0;
}

Test(cuda_device, no_gpu_is_unsupported) {
    cuda_device_info info;
    xf_status s = cuda_device_open(0, &info);
    if (have_driver()) {
        cr_assert(s == XF_OK || s == XF_EUNSUPPORTED, "status %d: %s", s, xf_error_msg());
        return;
    }
    cr_assert_eq(s, XF_EUNSUPPORTED, "status %d: %s", s, xf_error_msg());
    cr_assert_neq(strstr(xf_error_msg(), "no CUDA device"), NULL, "%s", xf_error_msg());
#ifdef XFPROF_HAVE_CUDA
    /* no libcuda at all: cudaDriverGetVersion reports 0, and the message says there is no driver
     * (cudart_static's own text, "driver version is insufficient", would send the user looking
     * for a newer driver) */
    void *libcuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!libcuda)
        cr_assert_neq(strstr(xf_error_msg(), "no NVIDIA driver found"), NULL, "%s", xf_error_msg());
    else
        dlclose(libcuda);
#endif
    /* a second open answers the same (no state left behind by the first failure) */
    cr_assert_eq(cuda_device_open(3, NULL), XF_EUNSUPPORTED);
}

Test(cuda_device, backend_table_matches_build) {
#ifdef XFPROF_HAVE_CUDA
    cr_assert_eq(cuda_backend_built(), 1);
    const backend_ops *ops = backend_find("cuda");
    cr_assert_not_null(ops);
    cr_assert_str_eq(ops->name, "cuda");
    if (!have_driver()) {
        /* init on a machine without a device: unsupported, nothing allocated */
        model_config cfg;
        cr_assert_eq(config_preset("stories15m", &cfg), XF_OK, "%s", xf_error_msg());
        backend_init_args a;
        memset(&a, 0, sizeof a);
        a.cfg = &cfg;
        a.kvdtype = XF_FP16;
        a.max_seqs = 1;
        a.max_seq_len = 16;
        a.max_step_tokens = 16;
        a.kv_slots = 16;
        void *ctx = NULL;
        cr_assert_eq(ops->init(&ctx, &a), XF_EUNSUPPORTED, "%s", xf_error_msg());
        cr_assert_null(ctx);
        ops->free_ctx(NULL);
    }
#else
    cr_assert_eq(cuda_backend_built(), 0);
    cr_assert_null(backend_find("cuda"));
    cr_assert_eq(cuda_device_open(0, NULL), XF_EUNSUPPORTED);
    cr_assert_neq(strstr(xf_error_msg(), "built without CUDA"), NULL, "%s", xf_error_msg());
#endif
}

Test(cuda_device, parse_device_names) {
    int o = -1;
    cr_assert_eq(cuda_device_parse("cuda", &o), XF_OK);
    cr_assert_eq(o, 0);
    cr_assert_eq(cuda_device_parse("cuda:3", &o), XF_OK);
    cr_assert_eq(o, 3);
    cr_assert_eq(cuda_device_parse("cuda:", &o), XF_EINVAL);
    cr_assert_eq(cuda_device_parse("cuda:-1", &o), XF_EINVAL);
    cr_assert_eq(cuda_device_parse("cuda:1x", &o), XF_EINVAL);
    cr_assert_eq(cuda_device_parse("gpu", &o), XF_EINVAL);
}
