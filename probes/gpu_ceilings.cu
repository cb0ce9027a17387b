/* GPU ceilings, device side (gpu_ceilings.h): attributes from cudaDeviceGetAttribute, and the
 * microbenchmarks: copy kernel (bytes read + written), read kernel (L2 flushed before each timing
 * by writing a buffer of 4 x L2), FP32 FMA chain, large cuBLAS BF16 GEMM (FP32 accumulate).
 * Each timed with cudaEvents over `reps` repetitions after a warm-up; the median is kept. */
#include <cuda_bf16.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "probes/gpu_ceilings.h"
}
#include "reference_model/cuda_backend.h"
#include "reference_model/cuda_common.cuh"

namespace {

__global__ void k_copy(float4 *__restrict__ dst, const float4 *__restrict__ src, int64_t n4) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) dst[i] = src[i];
}

/* Reads everything; writes one value per thread only when the sum is impossible (keeps the loads). */
__global__ void k_read(const float4 *__restrict__ src, int64_t n4, float *sink) {
    float acc = 0.f;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
        float4 v = src[i];
        acc += v.x + v.y + v.z + v.w;
    }
    if (acc == -1.2345f) sink[threadIdx.x] = acc;
}

__global__ void k_fill(float *p, int64_t n, float v) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) p[i] = v;
}

/* 8 independent FMA chains per thread, `iters` iterations: 2 * 8 * iters FLOPs per thread. */
__global__ void k_fma(float *out, int iters, float a, float b) {
    float x[8];
    for (int j = 0; j < 8; j++) x[j] = threadIdx.x * 1e-3f + j;
    for (int i = 0; i < iters; i++)
        for (int j = 0; j < 8; j++) x[j] = fmaf(x[j], a, b);
    float s = 0;
    for (int j = 0; j < 8; j++) s += x[j];
    if (s == -1.2345f) out[threadIdx.x] = s;
}

int cmp_f(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

} // namespace

extern "C" xf_status gpu_attrs_query(int ordinal, gpu_attrs *out) {
    cuda_device_info info;
    xf_status s = cuda_device_open(ordinal, &info);
    if (s) return s;
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", info.name);
    out->cc_major = info.cc_major;
    out->cc_minor = info.cc_minor;
    out->total_mem_bytes = info.total_mem_bytes;
    XF_CUDA_TRY(cudaDeviceGetAttribute(&out->sm_count, cudaDevAttrMultiProcessorCount, ordinal), "SM count");
    XF_CUDA_TRY(cudaDeviceGetAttribute(&out->clock_khz, cudaDevAttrClockRate, ordinal), "clock rate");
    XF_CUDA_TRY(cudaDeviceGetAttribute(&out->mem_clock_khz, cudaDevAttrMemoryClockRate, ordinal), "memory clock rate");
    XF_CUDA_TRY(cudaDeviceGetAttribute(&out->bus_width_bits, cudaDevAttrGlobalMemoryBusWidth, ordinal), "bus width");
    XF_CUDA_TRY(cudaDeviceGetAttribute(&out->l2_bytes, cudaDevAttrL2CacheSize, ordinal), "L2 size");
    return XF_OK;
}

extern "C" xf_status gpu_ceilings_measure(int ordinal, int64_t bytes, int64_t gemm_n, int reps, gpu_measured *out) {
    gpu_attrs a;
    xf_status s = gpu_attrs_query(ordinal, &a);
    if (s) return s;
    const cuda_blas_api *blas;
    if ((s = cuda_blas_load(&blas))) return s;
    if (reps <= 0) reps = 10;
    if (reps > 1000) return xf_errorf(XF_EINVAL, "GPU ceilings: at most 1000 repetitions");
    if (gemm_n <= 0) gemm_n = 8192;
    if (bytes <= 0) {
        bytes = (int64_t)a.l2_bytes * 8;
        if (bytes < ((int64_t)1 << 30)) bytes = (int64_t)1 << 30;
    }
    bytes &= ~(int64_t)15;
    const int64_t flush_bytes = (int64_t)a.l2_bytes * 4 + (1 << 20);
    const int64_t gemm_bytes = 2 * (gemm_n * gemm_n * 2) + gemm_n * gemm_n * 4;
    if (2 * bytes + flush_bytes + gemm_bytes > a.total_mem_bytes * 8 / 10)
        return xf_errorf(XF_EINVAL, "GPU ceilings: %lld MiB working set and a %lld^3 GEMM do not fit %lld MiB of device memory",
                         (long long)(bytes >> 20), (long long)gemm_n, (long long)(a.total_mem_bytes >> 20));
    memset(out, 0, sizeof *out);
    out->bytes = bytes;
    out->gemm_n = gemm_n;
    out->reps = reps;

    char *src = NULL, *dst = NULL, *flush = NULL, *A = NULL, *B = NULL, *C = NULL;
    float *sink = NULL, *times = NULL;
    cudaStream_t st = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    cublasHandle_t h = NULL;
    const float one = 1.f, zero = 0.f;
    const int threads = 256, blocks = a.sm_count * 8;
    const int64_t n4 = bytes / 16;
#define CK(x, what)                     \
    do {                                \
        cudaError_t e_ = (x);           \
        if (e_ != cudaSuccess) {        \
            s = cuda_status(e_, what);  \
            goto done;                  \
        }                               \
    } while (0)
#define TIME(what, result, ...)                                                             \
    do {                                                                                  \
        __VA_ARGS__;                                                                      \
        CK(cudaStreamSynchronize(st), what);                                              \
        for (int r = 0; r < reps; r++) {                                                  \
            CK(cudaEventRecord(e0, st), what);                                            \
            __VA_ARGS__;                                                                  \
            CK(cudaEventRecord(e1, st), what);                                            \
            CK(cudaEventSynchronize(e1), what);                                           \
            CK(cudaEventElapsedTime(&times[r], e0, e1), what);                            \
        }                                                                                 \
        qsort(times, (size_t)reps, sizeof *times, cmp_f);                                 \
        result = times[reps / 2] * 1e-3;                                                  \
    } while (0)
    {
        times = (float *)malloc((size_t)reps * sizeof *times);
        if (!times) return xf_errorf(XF_ENOMEM, "GPU ceilings: out of memory");
        CK(cudaStreamCreate(&st), "stream");
        CK(cudaEventCreate(&e0), "event");
        CK(cudaEventCreate(&e1), "event");
        CK(cudaMalloc((void **)&src, (size_t)bytes), "copy buffers");
        CK(cudaMalloc((void **)&dst, (size_t)bytes), "copy buffers");
        CK(cudaMalloc((void **)&flush, (size_t)flush_bytes), "L2 flush buffer");
        CK(cudaMalloc((void **)&sink, 1024 * sizeof(float)), "sink");
        k_fill<<<blocks, threads, 0, st>>>((float *)src, bytes / 4, 1.0f);
        CK(cudaGetLastError(), "fill");
        double t;
        /* copy: reads and writes `bytes` each */
        TIME("copy kernel", t, k_copy<<<blocks, threads, 0, st>>>((float4 *)dst, (const float4 *)src, n4));
        out->copy_Bps = 2.0 * (double)bytes / t;
        /* read with the L2 flushed: the flush is outside the timed region (own loop) */
        {
            double tr;
            for (int r = 0; r < reps; r++) {
                CK(cudaMemsetAsync(flush, r & 0xff, (size_t)flush_bytes, st), "L2 flush");
                CK(cudaEventRecord(e0, st), "read kernel");
                k_read<<<blocks, threads, 0, st>>>((const float4 *)src, n4, sink);
                CK(cudaEventRecord(e1, st), "read kernel");
                CK(cudaEventSynchronize(e1), "read kernel");
                CK(cudaEventElapsedTime(&times[r], e0, e1), "read kernel");
            }
            qsort(times, (size_t)reps, sizeof *times, cmp_f);
            tr = times[reps / 2] * 1e-3;
            out->read_Bps = (double)bytes / tr;
        }
        /* FP32: blocks x 256 threads x 8 chains x iters FMAs */
        {
            const int iters = 4096;
            const int fb = a.sm_count * 16;
            TIME("fma kernel", t, k_fma<<<fb, threads, 0, st>>>(sink, iters, 0.999f, 1e-4f));
            out->fp32_flops = 2.0 * 8.0 * iters * (double)fb * threads / t;
        }
        /* BF16 GEMM n^3 */
        {
            const int n = (int)gemm_n;
            CK(cudaMalloc((void **)&A, (size_t)gemm_n * gemm_n * 2), "GEMM buffers");
            CK(cudaMalloc((void **)&B, (size_t)gemm_n * gemm_n * 2), "GEMM buffers");
            CK(cudaMalloc((void **)&C, (size_t)gemm_n * gemm_n * 4), "GEMM buffers");
            CK(cudaMemsetAsync(A, 0x3c, (size_t)gemm_n * gemm_n * 2, st), "GEMM init"); /* bf16 0x3c3c ~ 0.0115 */
            CK(cudaMemsetAsync(B, 0x3c, (size_t)gemm_n * gemm_n * 2, st), "GEMM init");
            cublasStatus_t bs = blas->create(&h);
            if (bs != CUBLAS_STATUS_SUCCESS) {
                s = xf_errorf(XF_EIO, "cuBLAS create: %s", blas->status_string(bs));
                goto done;
            }
            if ((bs = blas->set_stream(h, st)) != CUBLAS_STATUS_SUCCESS) {
                s = xf_errorf(XF_EIO, "cuBLAS set stream: %s", blas->status_string(bs));
                goto done;
            }
            cublasStatus_t gst = CUBLAS_STATUS_SUCCESS;
            TIME("GEMM", t, gst = blas->gemm_ex(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, A, CUDA_R_16BF, n, B, CUDA_R_16BF, n,
                                                &zero, C, CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
            if (gst != CUBLAS_STATUS_SUCCESS) {
                s = xf_errorf(XF_EIO, "cuBLAS GEMM: %s", blas->status_string(gst));
                goto done;
            }
            out->tensor16_flops = 2.0 * (double)gemm_n * (double)gemm_n * (double)gemm_n / t;
        }
        s = XF_OK;
    }
done:
#undef CK
#undef TIME
    if (h) blas->destroy(h);
    if (st) cudaStreamSynchronize(st);
    void *ps[] = {src, dst, flush, sink, A, B, C};
    for (void *p : ps)
        if (p) cudaFree(p);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    if (st) cudaStreamDestroy(st);
    free(times);
    return s;
}

struct gpu_ceilings_job {
    int is_gemm;
    int64_t bytes, m, n, k;
    void *a, *b, *c; /* copy: a -> b; GEMM: A (m, k), B (k, n) bf16, C (m, n) fp32 */
    const cuda_blas_api *blas;
    cublasHandle_t h;
};

extern "C" void gpu_ceilings_job_free(gpu_ceilings_job *j) {
    if (!j) return;
    cudaDeviceSynchronize();
    if (j->h) j->blas->destroy(j->h);
    void *ps[] = {j->a, j->b, j->c};
    for (void *p : ps)
        if (p) cudaFree(p);
    free(j);
}

static xf_status job_new(gpu_ceilings_job **out, int ordinal) {
    *out = NULL;
    xf_status s = cuda_device_open(ordinal, NULL);
    if (s) return s;
    *out = (gpu_ceilings_job *)calloc(1, sizeof **out);
    return *out ? XF_OK : xf_errorf(XF_ENOMEM, "GPU job: out of memory");
}

extern "C" xf_status gpu_ceilings_job_copy_init(gpu_ceilings_job **out, int ordinal, int64_t bytes) {
    *out = NULL;
    if (bytes < 16 || bytes % 16) {
        return xf_errorf(XF_EINVAL, "copy kernel: bytes must be a positive multiple of 16");
    }
    gpu_ceilings_job *j;
    xf_status s = job_new(&j, ordinal);
    if (s) return s;
    j->bytes = bytes;
    cudaError_t e = cudaMalloc(&j->a, (size_t)bytes);
    if (e == cudaSuccess) e = cudaMalloc(&j->b, (size_t)bytes);
    /* initialised here, outside any measured range (a memset writes `bytes` of DRAM) */
    if (e == cudaSuccess) e = cudaMemset(j->a, 0, (size_t)bytes);
    if (e == cudaSuccess) e = cudaMemset(j->b, 0, (size_t)bytes);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        gpu_ceilings_job_free(j);
        return cuda_status(e, "copy buffers");
    }
    *out = j;
    return XF_OK;
}

extern "C" xf_status gpu_ceilings_job_gemm_init(gpu_ceilings_job **out, int ordinal, int64_t m, int64_t n, int64_t k) {
    *out = NULL;
    if (m < 1 || n < 1 || k < 1 || m > 65536 || n > 65536 || k > 65536) return xf_errorf(XF_EINVAL, "GEMM shape out of range");
    const cuda_blas_api *blas;
    xf_status s = cuda_blas_load(&blas);
    if (s) return s;
    gpu_ceilings_job *j;
    if ((s = job_new(&j, ordinal))) return s;
    j->is_gemm = 1;
    j->m = m;
    j->n = n;
    j->k = k;
    j->blas = blas;
    cudaError_t e = cudaMalloc(&j->a, (size_t)(m * k) * 2);
    if (e == cudaSuccess) e = cudaMalloc(&j->b, (size_t)(k * n) * 2);
    if (e == cudaSuccess) e = cudaMalloc(&j->c, (size_t)(m * n) * 4);
    if (e == cudaSuccess) e = cudaMemset(j->a, 0x3c, (size_t)(m * k) * 2); /* bf16 0x3c3c ~ 0.0115 */
    if (e == cudaSuccess) e = cudaMemset(j->b, 0x3c, (size_t)(k * n) * 2);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        gpu_ceilings_job_free(j);
        return cuda_status(e, "GEMM buffers");
    }
    cublasStatus_t bs = blas->create(&j->h);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        j->h = NULL;
        gpu_ceilings_job_free(j);
        return xf_errorf(XF_EIO, "cuBLAS create: %s", blas->status_string(bs));
    }
    *out = j;
    return XF_OK;
}

extern "C" xf_status gpu_ceilings_job_run(gpu_ceilings_job *j) {
    if (!j) return xf_errorf(XF_EINVAL, "GPU job: NULL");
    if (!j->is_gemm) {
        k_copy<<<256, 256>>>((float4 *)j->b, (const float4 *)j->a, j->bytes / 16);
        cudaError_t e = cudaGetLastError();
        if (e == cudaSuccess) e = cudaDeviceSynchronize();
        return e == cudaSuccess ? XF_OK : cuda_status(e, "copy kernel");
    }
    const float one = 1.f, zero = 0.f;
    cublasStatus_t bs = j->blas->gemm_ex(j->h, CUBLAS_OP_N, CUBLAS_OP_N, (int)j->m, (int)j->n, (int)j->k, &one, j->a, CUDA_R_16BF,
                                         (int)j->m, j->b, CUDA_R_16BF, (int)j->k, &zero, j->c, CUDA_R_32F, (int)j->m,
                                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (bs != CUBLAS_STATUS_SUCCESS) return xf_errorf(XF_EIO, "cuBLAS GEMM: %s", j->blas->status_string(bs));
    cudaError_t e = cudaDeviceSynchronize();
    return e == cudaSuccess ? XF_OK : cuda_status(e, "GEMM");
}
