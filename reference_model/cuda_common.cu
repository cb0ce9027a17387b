/* Device open, CUDA error mapping, cuBLAS loader (cuda_common.cuh, cuda_backend.h). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "reference_model/cuda_check.h"
}
#include "reference_model/cuda_backend.h"
#include "reference_model/cuda_common.cuh"

xf_status cuda_status(cudaError_t e, const char *what) {
    switch (e) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
    case cudaErrorSystemNotReady:
        return xf_errorf(XF_EUNSUPPORTED, "no CUDA device present: %s: %s (%s)", what, cudaGetErrorString(e),
                         cudaGetErrorName(e));
    case cudaErrorMemoryAllocation:
        return xf_errorf(XF_ENOMEM, "%s: out of device memory (%s)", what, cudaGetErrorString(e));
    default:
        return xf_errorf(XF_EIO, "%s: CUDA error %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
    }
}

extern "C" int cuda_backend_built(void) { return 1; }

extern "C" xf_status cuda_device_open(int ordinal, cuda_device_info *info) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        /* cudart_static reports a missing libcuda as "insufficient driver"; any failure here means
         * there is no usable device. cudaDriverGetVersion: "If no driver is installed, then 0 is
         * returned as the driver version" (cuda_runtime_api.h): say so rather than "insufficient". */
        int dv = -1;
        cudaDriverGetVersion(&dv);
        xf_status s = dv == 0 ? xf_errorf(XF_EUNSUPPORTED, "no CUDA device present: no NVIDIA driver found (libcuda.so.1 "
                                                           "could not be loaded; %s)", cudaGetErrorName(e))
                              : xf_errorf(XF_EUNSUPPORTED, "no CUDA device present: %s (%s)", cudaGetErrorString(e),
                                          cudaGetErrorName(e));
        cudaGetLastError();
        return s;
    }
    if (n <= 0) return xf_errorf(XF_EUNSUPPORTED, "no CUDA device present: the driver reports 0 devices");
    if (ordinal < 0 || ordinal >= n)
        return xf_errorf(XF_EUNSUPPORTED, "no CUDA device present at index %d: this machine has %d (cuda:0..cuda:%d)",
                         ordinal, n, n - 1);
    XF_CUDA_TRY(cudaSetDevice(ordinal), "cudaSetDevice");
    if (info) {
        cudaDeviceProp p;
        XF_CUDA_TRY(cudaGetDeviceProperties(&p, ordinal), "cudaGetDeviceProperties");
        memset(info, 0, sizeof *info);
        info->ordinal = ordinal;
        snprintf(info->name, sizeof info->name, "%s", p.name);
        info->cc_major = p.major;
        info->cc_minor = p.minor;
        info->sm_count = p.multiProcessorCount;
        info->total_mem_bytes = (int64_t)p.totalGlobalMem;
        cudaDriverGetVersion(&info->driver_version);
        cudaRuntimeGetVersion(&info->runtime_version);
        if (p.major < 8)
            return xf_errorf(XF_EUNSUPPORTED, "CUDA device %d (%s) has compute capability %d.%d; this build has "
                                              "kernels for sm_80 and sm_90 (8.0 and newer)",
                             ordinal, p.name, p.major, p.minor);
    }
    return XF_OK;
}

static cuda_blas_api g_blas;
static xf_status g_blas_status = XF_OK;
static char g_blas_msg[512];
static pthread_once_t g_blas_once = PTHREAD_ONCE_INIT;

/* The file a loaded library came from (dladdr on one of its symbols), for messages. */
static void lib_path_of(void *sym, char *buf, size_t len) {
    Dl_info di;
    memset(&di, 0, sizeof di);
    snprintf(buf, len, "%s", sym && dladdr(sym, &di) && di.dli_fname ? di.dli_fname : "(unknown file)");
}

static void blas_load_once(void) {
    /* libcublas.so is a fallback for installs without the versioned name: it may be another major
     * version, so the version is checked below (cublasGetProperty needs no handle). */
    const char *names[] = {"libcublas.so.13", "libcublas.so", NULL};
    void *lib = NULL;
    const char *err = "";
    for (int i = 0; names[i] && !lib; i++) {
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!lib) err = dlerror();
    }
    if (!lib) {
        g_blas_status = XF_EUNSUPPORTED;
        snprintf(g_blas_msg, sizeof g_blas_msg,
                 "cuBLAS not found: libcublas.so.13 could not be loaded (%s): install CUDA 13's cuBLAS (the toolkit, or "
                 "python's nvidia-cublas wheel) and put its lib folder on LD_LIBRARY_PATH",
                 err ? err : "dlopen failed");
        return;
    }
    struct {
        const char *name;
        void **slot;
    } syms[] = {
        {"cublasCreate_v2", (void **)&g_blas.create},
        {"cublasDestroy_v2", (void **)&g_blas.destroy},
        {"cublasSetStream_v2", (void **)&g_blas.set_stream},
        {"cublasSetMathMode", (void **)&g_blas.set_math_mode},
        {"cublasSetWorkspace_v2", (void **)&g_blas.set_workspace},
        {"cublasGemmEx", (void **)&g_blas.gemm_ex},
        {"cublasGetStatusString", (void **)&g_blas.status_string},
        {"cublasGetProperty", (void **)&g_blas.get_property},
    };
    char path[512];
    for (auto &s : syms) {
        *s.slot = dlsym(lib, s.name);
        if (!*s.slot) {
            g_blas_status = XF_EUNSUPPORTED;
            lib_path_of(dlsym(lib, "cublasCreate_v2"), path, sizeof path);
            snprintf(g_blas_msg, sizeof g_blas_msg, "cuBLAS: symbol %s missing from %.400s (CUDA 13's cuBLAS needed)", s.name, path);
            dlclose(lib);
            return;
        }
    }
    lib_path_of((void *)g_blas.create, path, sizeof path);
    int major = -1;
    if (g_blas.get_property(MAJOR_VERSION, &major) != CUBLAS_STATUS_SUCCESS) major = -1;
    if (cuda_check_lib_version("cuBLAS", path, major, CUBLAS_VER_MAJOR) != XF_OK) {
        g_blas_status = XF_EUNSUPPORTED;
        snprintf(g_blas_msg, sizeof g_blas_msg, "%s", xf_error_msg());
        xf_error_clear();
        dlclose(lib);
        return;
    }
    g_blas.lib = lib;
}

xf_status cuda_blas_load(const cuda_blas_api **api) {
    pthread_once(&g_blas_once, blas_load_once);
    if (g_blas_status != XF_OK) return xf_errorf(g_blas_status, "%s", g_blas_msg);
    *api = &g_blas;
    return XF_OK;
}

extern "C" xf_status cuda_device_parse(const char *spec, int *ordinal) {
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
