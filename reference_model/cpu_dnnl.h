/* The CPU backend's prefill GEMMs with bf16 weights on AMX through oneDNN (Debian: libdnnl-dev),
 * optional at build time (XFPROF_HAVE_DNNL; without it every call says so and the backend keeps
 * the fp32 OpenBLAS path). oneDNN asks the kernel for the AMX tile state itself
 * (arch_prctl(ARCH_REQ_XCOMP_PERM)) and, where it is not granted or the CPU has no AMX, runs its
 * AVX-512 kernels: cpu_dnnl_impl names the implementation that ran, so the record can say which
 * unit computed the op. Without AVX-512 (oneDNN 2.x has no AVX2 bf16 matmul) the backend keeps the
 * fp32 path, as without oneDNN.
 *
 * The fp32 input goes in as its exact 3-part bf16 split (cpu_kernels.h, xk_bf16x3_split): three
 * bf16 x bf16 GEMMs with fp32 accumulation, summed into y, give the fp32 product of the bf16
 * weights with the fp32 input up to summation order, as the other projection paths do; AMX does
 * three times the op's FLOPs. */
#ifndef XF_CPU_DNNL_H
#define XF_CPU_DNNL_H

#include <stdint.h>

#include "core/status.h"
#include "reference_model/weights.h"

typedef struct cpu_dnnl cpu_dnnl;

/* 1 when this build has oneDNN. */
int cpu_dnnl_built(void);
/* "oneDNN 2.6.3 (cpu isa: ...)" or why not ("built without oneDNN: ...", "no bf16 matmul on this
 * CPU ..."); static storage. */
const char *cpu_dnnl_describe(void);
/* 1 when this build's oneDNN has a bf16 matmul for this CPU (asked once): AVX-512 or AMX. */
int cpu_dnnl_bf16_here(void);

/* An engine and stream running on `threads` OpenMP threads. XF_EUNSUPPORTED without oneDNN or
 * without a bf16 matmul on this CPU (the message says so); on success *out is the caller's: free with cpu_dnnl_free. */
xf_status cpu_dnnl_init(cpu_dnnl **out, int threads);
void cpu_dnnl_free(cpu_dnnl *d); /* NULL is a no-op */

/* y (n, ldy), columns [0, W->rows) = x . W^T for bf16 W (rows, cols) row-major, from p (3, n, cols),
 * xk_bf16x3_split_planar of x (n, cols): three GEMMs, the second and third summed into y. Call it
 * outside OpenMP parallel regions. */
xf_status cpu_dnnl_gemm_bf16x3(cpu_dnnl *d, const wmat *W, const uint16_t *p, int64_t n, float *y, int64_t ldy);

/* The same product for the rounded inputs (backend.h BACKEND_BF16_ROUNDED): xb (n, cols) the bf16
 * bits of x rounded (xk_bf16_round), one GEMM. Call it outside OpenMP parallel regions. */
xf_status cpu_dnnl_gemm_bf16(cpu_dnnl *d, const wmat *W, const uint16_t *xb, int64_t n, float *y, int64_t ldy);

/* The oneDNN implementation of the last GEMM this process ran ("brg:avx512_core_amx_bf16", ...),
 * "" before the first (static storage; written by the GEMM's calling thread). */
const char *cpu_dnnl_last_impl(void);
/* 1 when that implementation runs on AMX tiles. */
int cpu_dnnl_last_on_amx(void);
/* Over every GEMM this process ran through oneDNN: 1 when all ran on AMX tiles, 0 when none did
 * (or none ran), -1 when some did and some did not (small shapes may take another kernel). */
int cpu_dnnl_amx_state(void);

#endif
