/* The CUDA backend, C-callable: the same table of functions as the CPU backend (backend.h), on an
 * NVIDIA GPU. cuBLAS (cublasGemmEx, BF16/FP16 inputs, CUBLAS_COMPUTE_32F) for the projections and
 * lm_head; own kernels for the rest (their index math in cuda_index.h). Built only with
 * XFPROF_HAVE_CUDA; otherwise the functions here answer XF_EUNSUPPORTED saying the build has no
 * CUDA (cuda_stub.c), so callers need no #ifdef.
 *
 * The binary links cudart statically and loads libcuda (the driver), libcublas and libcupti with
 * dlopen when a device is first used: a machine with no driver or no GPU gets XF_EUNSUPPORTED
 * ("no CUDA device present: ..."), and cli/ maps that to exit status 3. */
#ifndef XF_CUDA_BACKEND_H
#define XF_CUDA_BACKEND_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "core/dtype.h"
#include "core/status.h"
#include "reference_model/backend.h"

/* What cuda_device_open found. */
typedef struct cuda_device_info {
    int ordinal;
    char name[256];
    int cc_major, cc_minor;
    int sm_count;
    int64_t total_mem_bytes;
    int driver_version;  /* cudaDriverGetVersion: 13000 = 13.0 */
    int runtime_version; /* cudaRuntimeGetVersion */
} cuda_device_info;

/* 1 when this build has the CUDA backend. */
int cuda_backend_built(void);

/* Parses a device argument: "cuda" (ordinal 0) or "cuda:N". XF_EINVAL otherwise. Pure C. */
xf_status cuda_device_parse(const char *spec, int *ordinal);

/* Opens device `ordinal`: checks that a driver and the device are there and makes it current.
 * XF_EUNSUPPORTED with "no CUDA device present: <reason>" when there is no driver, no device, or
 * the ordinal is past the last device, or (stub) "this xfprof was built without CUDA". *info may
 * be NULL. */
xf_status cuda_device_open(int ordinal, cuda_device_info *info);

#ifdef XFPROF_HAVE_CUDA
/* The backend's table (model.c's backend_find("cuda") returns it; XFPROF_HAVE_CUDA_BACKEND is
 * defined with it). Weights go to the device as bf16 (fp32 and int8 host weights are converted;
 * XFPROF_CUDA_WEIGHTS=fp16 selects fp16; int8 experts are refused, cuda_meta_unsupported); activations
 * are fp32 between ops and bf16/fp16 as GEMM inputs (an MoE router's GEMM in fp32); KV is stored at
 * the run's KV dtype (fp16, bf16, or fp32). Mixture of experts, latent attention (naive form),
 * sliding windows, q/k norm and o_proj / MLP biases run as on the CPU (cuda_moe.cu, cuda_mla.cu); not yet run on a GPU. */
extern const backend_ops cuda_backend_ops;
#endif

/* CUDA Graphs: when on, the backend captures the ops of the first decode step it sees with a
 * given batch shape into a graph and, from then on, a decode step's ops only record their
 * arguments and `sync` replays the whole graph (the per-op times then collapse into the step).
 * Set before the first step; off by default (`--cuda-graph`). */
void cuda_backend_set_graph(void *ctx, int on);

/* Timings of the last step on the device, for the report: milliseconds from cudaEvents around the
 * step (graph replay or op-by-op launches). */
double cuda_backend_last_step_ms(void *ctx);

/* For the GPU tests: copies device buffer `which` of the backend as floats into out (n elements,
 * from the start of the buffer): "x", "xn", "qkv", "att", "tmp", "gu", "h", "last", "logits",
 * "kpool", "vpool" (pool mode: (n_layers, kv_slots, kv_dim)); with experts "moe_logits" (T, E),
 * "moe_selw" (T, k), "moe_y" (T k, d_model) of the last routed layer; with latent attention
 * "mla_q" (T, n_heads (nope + rope)), "mla_krope" (max_seq_len, rope), "mla_kvdec" (max_seq_len,
 * n_heads (nope + v)) of the last sequence attended. Synchronises. XF_EINVAL for an unknown name or
 * n beyond the buffer. */
xf_status cuda_backend_debug_read(void *ctx, const char *which, float *out, int64_t n);

#ifdef __cplusplus
}
#endif

#endif
