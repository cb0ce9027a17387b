/* The CUDA runtime for NCCL's collectives (cuda_comm.h). */
#include "reference_model/cuda_comm.h"

#ifdef XFPROF_HAVE_CUDA
#include <cuda_runtime_api.h>

xf_status cuda_comm_device_count(int *n) {
    *n = 0;
    cudaError_t e = cudaGetDeviceCount(n);
    if (e != cudaSuccess) {
        *n = 0;
        return xf_errorf(XF_EUNSUPPORTED, "no CUDA device: %s", cudaGetErrorString(e));
    }
    if (*n < 1) return xf_errorf(XF_EUNSUPPORTED, "no CUDA device: the runtime sees none");
    return XF_OK;
}

xf_status cuda_comm_stream_new(int device, void **stream) {
    *stream = NULL;
    cudaError_t e = cudaSetDevice(device);
    cudaStream_t s = NULL;
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e != cudaSuccess) return xf_errorf(XF_EIO, "cuda:%d: no stream for NCCL: %s", device, cudaGetErrorString(e));
    *stream = s;
    return XF_OK;
}

void cuda_comm_stream_free(void *stream) {
    if (stream) cudaStreamDestroy((cudaStream_t)stream);
}

int cuda_comm_stream_query(void *ctx, void *stream) {
    (void)ctx;
    cudaError_t e = cudaStreamQuery((cudaStream_t)stream);
    if (e == cudaSuccess) return 1;
    if (e == cudaErrorNotReady) return 0;
    xf_errorf(XF_EIO, "the stream failed: %s", cudaGetErrorString(e));
    return -1;
}

xf_status cuda_comm_alloc(size_t bytes, const void *src, void **dev) {
    *dev = NULL;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaSuccess && src) e = cudaMemcpy(p, src, bytes, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
        if (p) cudaFree(p);
        return xf_errorf(e == cudaErrorMemoryAllocation ? XF_ENOMEM : XF_EIO, "%zu bytes of GPU memory: %s", bytes,
                         cudaGetErrorString(e));
    }
    *dev = p;
    return XF_OK;
}

void cuda_comm_free(void *dev) {
    if (dev) cudaFree(dev);
}

xf_status cuda_comm_download(void *dst, const void *dev, size_t bytes) {
    cudaError_t e = cudaMemcpy(dst, dev, bytes, cudaMemcpyDeviceToHost);
    return e == cudaSuccess ? XF_OK : xf_errorf(XF_EIO, "%zu bytes from the GPU: %s", bytes, cudaGetErrorString(e));
}

#else /* built without the CUDA toolkit */

static xf_status none(void) {
    return xf_errorf(XF_EUNSUPPORTED, "no CUDA device: this xfprof was built without the CUDA toolkit (install it, e.g. at "
                     "/usr/local/cuda, and build again)");
}

xf_status cuda_comm_device_count(int *n) {
    *n = 0;
    return none();
}

xf_status cuda_comm_stream_new(int device, void **stream) {
    (void)device;
    *stream = NULL;
    return none();
}

void cuda_comm_stream_free(void *stream) { (void)stream; }

int cuda_comm_stream_query(void *ctx, void *stream) {
    (void)ctx;
    (void)stream;
    none();
    return -1;
}

xf_status cuda_comm_alloc(size_t bytes, const void *src, void **dev) {
    (void)bytes;
    (void)src;
    *dev = NULL;
    return none();
}

void cuda_comm_free(void *dev) { (void)dev; }

xf_status cuda_comm_download(void *dst, const void *dev, size_t bytes) {
    (void)dst;
    (void)dev;
    (void)bytes;
    return none();
}

#endif
