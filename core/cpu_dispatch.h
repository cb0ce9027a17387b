/* Where the CPU backend splits its work, shared by the backend that does it
 * (reference_model/cpu_backend.c) and the calibrated predictor that counts its parallel regions
 * (analyzers/predict_calibrated.c, predcal_regions): one place, so the two cannot drift apart. */
#ifndef XF_CPU_DISPATCH_H
#define XF_CPU_DISPATCH_H

#define CPU_GEMM_MIN_TOKENS 32     /* rows from which projections go to the BLAS GEMM: below it the own
                                      kernel (4 x 4 register blocks, weights read once in their dtype)
                                      was faster on this CPU for every dtype (bf16 at 16 rows: 2.7x
                                      BLAS + dequantization; int8 1.4x; fp32 1.5x); the tile estimate
                                      in model.c follows it */
#define CPU_AMX_PATH_TOKENS 32     /* the AMX tiles take another path above this many tokens a step:
                                      bf16 (cpu_amx.c, `panel = n > 32`) streams the weights in place
                                      up to it and copies K-blocked panels beyond; int8 (cpu_backend.c,
                                      `n <= 32`) uses 64-row work items up to it and larger beyond.
                                      The calibrated predictor interpolates a GEMM's efficiency over
                                      token counts on one side of it only (docs/verdicts.md, run 14) */
#define CPU_PAR_MIN 16384          /* element-wise ops on fewer elements run on one thread: a fork and
                                      barrier cost more than the work */

#endif
