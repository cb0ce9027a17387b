/* Shared by the .cu/.cpp files of the CUDA build: error mapping and the cuBLAS loader. cuBLAS is
 * loaded with dlopen (the toolkit ships no static libcublas here, and a hard link would stop the
 * binary from starting on a machine without it); see docs/cuda.md. */
#ifndef XF_CUDA_COMMON_CUH
#define XF_CUDA_COMMON_CUH

#include <cublas_api.h>
#include <cuda_runtime.h>

extern "C" {
#include "core/status.h"
}

/* The cuBLAS entry points xfprof uses, resolved from libcublas.so.13 (or .so, whose version is checked). */
struct cuda_blas_api {
    void *lib;
    decltype(&cublasCreate_v2) create;
    decltype(&cublasDestroy_v2) destroy;
    decltype(&cublasSetStream_v2) set_stream;
    decltype(&cublasSetMathMode) set_math_mode;
    decltype(&cublasSetWorkspace_v2) set_workspace;
    /* the C entry point (C++ also sees an overload taking cudaDataType as compute type) */
    cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *,
                              const void *, cudaDataType, int, const void *, cudaDataType, int, const void *, void *,
                              cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
    decltype(&cublasGetStatusString) status_string;
    decltype(&cublasGetProperty) get_property; /* the loaded library's major version is checked against 13 */
};

/* Loads cuBLAS once (thread-safe). XF_EUNSUPPORTED naming the library and dlerror() when it is not
 * found ("set LD_LIBRARY_PATH to the CUDA toolkit's lib64"). *api is valid for the process. */
xf_status cuda_blas_load(const cuda_blas_api **api);

/* XF_EUNSUPPORTED for "no driver / no device" errors, XF_ENOMEM for allocation failures, XF_EIO
 * otherwise; the message names `what` and the CUDA error. */
xf_status cuda_status(cudaError_t e, const char *what);

#define XF_CUDA_TRY(call, what)                      \
    do {                                             \
        cudaError_t e_ = (call);                     \
        if (e_ != cudaSuccess) return cuda_status(e_, what); \
    } while (0)

#endif
