/* bench_cpu: the CPU performance targets of issues 4 and 20, measured in one run on this machine.
 *
 *   1. fp32 decode of tinyllama-1.1b with T threads: attained bandwidth (weight bytes read per
 *      decode step / time per step) over the read bandwidth measured now, before and right after
 *      the decode, the better of the two (target >= 0.85).
 *   2. bf16 and int8 weights: decode tokens/s over fp32's (targets >= 1.8x and >= 3x; issue 20: every
 *      dtype's weight GB/s >= 0.90 of the read ceiling, int8 >= 3.6x).
 *      Then where each variant's step goes (no target): the timer probe over 12 more steps, per
 *      projection kind its time, weight GB/s and fixed cost per call against the largest one's
 *      rate, and attention and the other ops; then the bf16 and int8 batch-1 kernels against the
 *      read ceiling's own loop on the same bytes from DRAM, and their rate from L2.
 *   3. A 512-token prefill of each dtype: fp32 GEMMs' FLOP/s over the measured FP32 peak (target
 *      >= 0.60); issue 20: bf16 (own AMX tiles where granted, else oneDNN) over the AMX BF16 peak
 *      measured now (>= 0.50) and over fp32's (>= 4x), int8 (AMX tiles) over bf16's (>= 1.5x); with
 *      own tiles and oneDNN both here, oneDNN's bf16 prefills run interleaved too (own / oneDNN printed). Token agreement of bf16 and
 *      int8 with fp32 over 32 greedy tokens (printed, no target).
 *   4. Timer probe on vs off, same model, adjacent decode steps (target <= 3% overhead).
 *   5. Decode at batch 2, 4, 8 and 16 of each weight variant, interleaved: weight bytes per step /
 *      time over the read ceiling (target at batch 16 >= 0.80), then the batch-16 int8 / bf16 tile
 *      kernels alone over the model's matrices (information); at batch 16 also where each
 *      variant's step goes (the timer probe: projections, every other op kind, outside the ops;
 *      information). --batched runs this part alone
 *      (--prefill part 3 alone, --decode part 1 with its per-op accounting alone).
 * Every part runs four weight variants side by side: fp32, bf16 (exact inputs), int8 and bf16 with
 * rounded inputs (`run --bf16-inputs rounded`: vdpbf16ps in decode, one oneDNN pass in prefill),
 * each rounded-input figure printed beside the target for bf16.
 *   6. Decode attention (xk_attention_batch) at batch 1 and 8, 512 and 4096 tokens of context,
 *      fp32 / fp16 / bf16 KV, of stories110m and tinyllama-1.1b (or --model): KV GB/s over the DRAM
 *      read ceiling measured on a working set of the same bytes (copies of a layer's KV cycled past
 *      4x the LLC, as a decode step's weights evict it), interleaved (target >= 0.70, and classed
 *      memory-bound), paged against contiguous, each beside xk_attention_replay (the kernel's reads
 *      in its order and split, no arithmetic); prefill attention (xk_attention_causal, 512 and
 *      2048 tokens) over the FP32 peak (target >= 0.50). --attention runs this part alone.
 * The weight variants are loaded together and their decode steps interleaved (fp32, bf16, int8,
 * bf16 rounded, fp32, ...), so a neighbour's memory traffic on a shared machine slows all three alike;
 * part 1 interleaves blocks of consecutive steps of one model (as `xfprof run` steps), each block's
 * first step timed apart (it pays for the other models' steps just before it). Times per
 * decode step are best-of-N steps, as the ceilings are best-of-N repetitions (the medians are
 * printed too); the prefill GEMMs take each op's best of 3 prefills; the probe overhead compares
 * the best of 32 steps with it and 32 without, taken in adjacent pairs.
 *
 * Usage: bench_cpu [--threads N] [--steps N] [--model NAME] [--quick] [--attention] [--batched] [--prefill] [--decode]
 * Exit status 0 when every target passes, 1 when one fails, 2 on an error. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>

#include "analyzers/roofline.h"
#include "core/hugemem.h"
#include "probes/ceilings.h"
#include "probes/omp_spin.h"
#include "probes/timer.h"
#include "reference_model/config.h"
#include "reference_model/cost_model.h"
#include "reference_model/cpu_attention.h"
#include "reference_model/cpu_amx.h"
#include "reference_model/cpu_dnnl.h"
#include "reference_model/cpu_kernels.h"
#include "reference_model/model.h"
#include "reference_model/weights.h"
#include "bench_util.h"

static int fails = 0;

/* The weight variants measured side by side: fp32, bf16 (exact inputs), int8, and bf16 with its
 * inputs rounded once to bf16 (backend.h BACKEND_BF16_ROUNDED: one vdpbf16ps per product in
 * decode, one oneDNN pass on AMX in prefill). */
#define NV 4
static const char *const vnames[NV] = {"fp32", "bf16", "int8", "bf16 rounded"};
enum { DEC_RUN = 3 }; /* part 1: timed decode steps of one model in a row, after the block's first */
static backend_bf16_inputs v_inputs(int k) { return k == 3 ? BACKEND_BF16_ROUNDED : BACKEND_BF16_EXACT3; }

char *openblas_get_config(void); /* OpenBLAS, linked by the CPU backend */

static void verdict(const char *what, double value, double target, int higher_is_better, const char *unit) {
    int pass = higher_is_better ? value >= target : value <= target;
    if (!pass) fails++;
    printf("  %-52s %8.3f%s  target %s %.2f%s  %s\n", what, value, unit, higher_is_better ? ">=" : "<=", target, unit,
           pass ? "PASS" : "FAIL");
}

static int die(const char *what) { return bench_die("bench_cpu", what, 2); }

static double median(double *x, int n) { return bench_median(x, n); }

/* Weight bytes one decode step reads (the cost model's compulsory weight traffic). */
static double decode_weight_bytes_b(const model_config *cfg, xf_dtype wd, int64_t context, int64_t batch) {
    int64_t n;
    cost_op *ops = bench_decode_ops(cfg, batch, context, wd, &n);
    double b = 0;
    for (int64_t i = 0; ops && i < n; i++) b += ops[i].weight_bytes;
    free(ops);
    return b;
}
static double decode_weight_bytes(const model_config *cfg, xf_dtype wd, int64_t context) {
    return decode_weight_bytes_b(cfg, wd, context, 1);
}

typedef struct bench_model {
    model *m;
    int32_t prompt[512];
    int64_t len;
} bench_model;

static xf_status open_model_b(bench_model *bm, const model_config *cfg, xf_dtype wd, backend_bf16_inputs bi, int threads,
                              int64_t max_prompt, int64_t max_len, int64_t batch) {
    model_options o;
    model_options_default(&o);
    o.seed = 7;
    o.wdtype = wd;
    o.bf16_inputs = bi;
    o.kvdtype = XF_FP32;
    o.threads = threads;
    o.max_seqs = batch;
    o.max_prompt = max_prompt;
    o.max_seq_len = max_len;
    uint64_t x = 12345;
    for (int i = 0; i < 512; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        bm->prompt[i] = (int32_t)((x >> 33) % (uint64_t)cfg->vocab);
    }
    return model_init(&bm->m, cfg, &o);
}
static xf_status open_model(bench_model *bm, const model_config *cfg, xf_dtype wd, backend_bf16_inputs bi, int threads,
                            int64_t max_prompt, int64_t max_len) {
    return open_model_b(bm, cfg, wd, bi, threads, max_prompt, max_len, 1);
}

/* Where a batched decode step of m goes (issue 20, batched item 1): the timer probe over 3
 * repetitions of 4 steps; of the repetition with the least wall time, the ops' times summed per op
 * kind over the layers against that wall time (per step): the projections, attention, every other
 * kind, and what runs outside the ops (the step's own loop, the probe's ranges). Printed for batch
 * `batch`. 0, or 2. */
static int batched_accounting(model *m, const model_config *cfg, const char *name, int64_t batch) {
    timer_probe *tp;
    if (timer_probe_init(cfg->n_layers, 4, 0, &tp) != XF_OK) return die("timer");
    probe_set ps = {1, {timer_probe_as_probe(tp)}};
    double wall = 0;
    int br = 0; /* the repetition of least wall time: its samples are the ops' times of those steps */
    for (int rep = 0; rep < 3; rep++) {
        timer_probe_rep_begin(tp);
        const double t0 = timer_now_s();
        for (int i = 0; i < 4; i++)
            if (model_decode_step(m, NULL, &ps) != XF_OK) return die("probed batched decode");
        const double t = (timer_now_s() - t0) / 4;
        if (rep == 0 || t < wall) wall = t, br = rep;
        if (timer_probe_rep_end(tp) != XF_OK) return die("timer");
    }
    double kt[OP_KIND_COUNT] = {0}, sum = 0, proj = 0;
    for (int l = -1; l < (int)cfg->n_layers; l++)
        for (int k = 0; k < OP_KIND_COUNT; k++) {
            const double *smp;
            const int ns = timer_probe_samples(tp, XF_DECODE, l, (op_kind)k, &smp);
            const double b = ns == 3 ? smp[br] : 0; /* an op of every step has one sample a repetition */
            kt[k] += b, sum += b, proj += op_kind_is_gemm((op_kind)k) ? b : 0;
        }
    timer_probe_free(tp);
    printf("%s decode at batch %lld, where the step goes (timer probe, the best of 3 x 4 steps): step %.2f ms (wall, probed), its ops %.2f ms: "
           "projections %.2f ms, the rest %.2f ms (",
           name, (long long)batch, wall * 1e3, sum * 1e3, proj * 1e3, (sum - proj) * 1e3);
    int first = 1;
    for (int k = 0; k < OP_KIND_COUNT; k++)
        if (kt[k] > 0 && !op_kind_is_gemm((op_kind)k)) printf("%s%s %.2f", first ? "" : ", ", op_kind_name((op_kind)k), kt[k] * 1e3), first = 0;
    printf("); outside the ops %.2f ms\n", (wall - sum) * 1e3);
    return 0;
}

/* Batched decode: `batch` sequences of 8 prompt tokens, the weight variants' steps interleaved
 * as at batch 1; t_best[k]: the best step time of dtype dts[k]; t_fma[k] (bf16 variants, own AMX
 * tiles granted, 4+ sequences): the same models' steps with the tiles held off (the FP32 FMA
 * kernel), interleaved with the others; 0 otherwise. Returns 0, or 2 after an error. */
static int batched_decode(const model_config *cfg, int threads, int steps, int64_t batch, const xf_dtype *dts,
                          double *t_best, double *t_fma) {
    bench_model bms[NV];
    int64_t lens[64];
    int32_t prompts[64 * 8];
    for (int64_t s = 0; s < batch; s++) lens[s] = 8;
    for (int k = 0; k < NV; k++) {
        if (open_model_b(&bms[k], cfg, dts[k], v_inputs(k), threads, 8, 8 + 2 * steps + 16, batch) != XF_OK) return die(vnames[k]);
        for (int64_t i = 0; i < batch * 8; i++) prompts[i] = bms[k].prompt[i % 512];
        if (model_prefill(bms[k].m, (int)batch, prompts, lens, NULL) != XF_OK) return die("batched prefill");
        if (model_decode_step(bms[k].m, NULL, NULL) != XF_OK) return die("batched decode warm-up");
        t_best[k] = t_fma[k] = 0;
    }
    for (int i = 0; i < steps; i++)
        for (int k = 0; k < NV; k++) {
            double t0 = timer_now_s();
            if (model_decode_step(bms[k].m, NULL, NULL) != XF_OK) return die("batched decode");
            double t = timer_now_s() - t0;
            t_best[k] = i == 0 || t < t_best[k] ? t : t_best[k];
            if (dts[k] != XF_BF16 || batch < 4 || !amx_bf16_granted()) continue;
            amx_avoid_bf16(1);
            t0 = timer_now_s();
            const xf_status sf = model_decode_step(bms[k].m, NULL, NULL);
            t = timer_now_s() - t0;
            amx_avoid_bf16(0);
            if (sf != XF_OK) return die("batched decode, FMA");
            t_fma[k] = i == 0 || t < t_fma[k] ? t : t_fma[k];
        }
    for (int k = 0; k < NV && batch == 16; k++) /* 12 more steps each: the models hold 8 + 2 steps + 16 tokens */
        if (batched_accounting(bms[k].m, cfg, vnames[k], batch)) return 2;
    for (int k = 0; k < NV; k++) model_free(bms[k].m);
    return 0;
}

/* The model's projections (qkv, o, gate_up, down per layer: rows x cols as the backend holds
 * them) as 4 x n_layers matrices of random values from the LCG state *sd, every layer its own copy
 * (from DRAM where they pass the LLC, as the steps' weights do): int8 group 128, packed, into *m8
 * and, when mb is not NULL, bf16 of the same draws into *mb; the bytes they hold into bytes[0]
 * (int8) and bytes[1] (bf16). 1 on error (said). Freed with proj_mats_free. */
static int proj_mats(const model_config *cfg, uint32_t *sd, wmat **m8, wmat **mb, double bytes[2]) {
    const int64_t d = cfg->d_model, qd = cfg->n_heads * cfg->head_dim, kvd = cfg->n_kv_heads * cfg->head_dim;
    const int64_t rows[4] = {qd + 2 * kvd, d, 2 * cfg->d_ff, d}, cols[4] = {d, qd, d, cfg->d_ff};
    const int64_t nm = 4 * cfg->n_layers;
    wmat *M8 = calloc((size_t)nm, sizeof *M8), *MB = mb ? calloc((size_t)nm, sizeof *MB) : NULL;
    *m8 = M8;
    if (mb) *mb = MB;
    if (!M8 || (mb && !MB)) return die("out of memory");
    bytes[0] = bytes[1] = 0;
    for (int64_t i = 0; i < nm; i++) {
        wmat *W = &M8[i];
        W->dtype = XF_INT8, W->rows = rows[i % 4], W->cols = cols[i % 4], W->group = 128, W->owned = 1;
        W->n_groups = (W->cols + 127) / 128;
        W->data = malloc((size_t)(W->rows * W->cols));
        W->scales = malloc((size_t)(W->rows * W->n_groups) * sizeof(float));
        if (!W->data || !W->scales) return die("out of memory");
        wmat *B = MB ? &MB[i] : NULL;
        if (B) {
            B->dtype = XF_BF16, B->rows = W->rows, B->cols = W->cols, B->owned = 1;
            if (!(B->data = malloc((size_t)(B->rows * B->cols) * 2))) return die("out of memory");
        }
        int8_t *v = W->data;
        uint16_t *b = B ? B->data : NULL;
        for (int64_t j = 0; j < W->rows * W->cols; j++) {
            *sd = *sd * 1664525u + 1013904223u;
            v[j] = (int8_t)(*sd >> 24);
            if (b) b[j] = weights_f32_to_bf16((float)(int8_t)(*sd >> 16) * 1e-3f);
        }
        for (int64_t j = 0; j < W->rows * W->n_groups; j++) W->scales[j] = 1e-3f;
        if (weights_pack_int8(W) != XF_OK) return die("pack");
        bytes[0] += (double)(W->rows * W->cols), bytes[1] += B ? 2.0 * (double)(B->rows * B->cols) : 0;
    }
    return 0;
}

static void proj_mats_free(wmat *m8, wmat *mb, int64_t nm) {
    for (int64_t i = 0; m8 && i < nm; i++) free(m8[i].data), free(m8[i].scales);
    for (int64_t i = 0; mb && i < nm; i++) free(mb[i].data);
    free(m8), free(mb);
}

/* fp32 copies of the bf16 matrices mb[0..nm) (the same values, widened), for the fp32 kernels alone;
 * their bytes into *bytes. 1 on error (said). Freed with proj_mats_free (as an int8-less set). */
static int proj_mats_f32(const wmat *mb, int64_t nm, wmat **mf, double *bytes) {
    wmat *MF = calloc((size_t)nm, sizeof *MF);
    *mf = MF, *bytes = 0;
    if (!MF) return die("out of memory");
    for (int64_t i = 0; i < nm; i++) {
        MF[i] = mb[i], MF[i].dtype = XF_FP32;
        float *v = malloc((size_t)(mb[i].rows * mb[i].cols) * 4);
        if (!(MF[i].data = v)) return die("out of memory");
        const uint16_t *b = mb[i].data;
        for (int64_t j = 0; j < mb[i].rows * mb[i].cols; j++) v[j] = weights_bf16_to_f32(b[j]);
        *bytes += 4.0 * (double)(mb[i].rows * mb[i].cols);
    }
    return 0;
}

/* The batch-16 projection kernels alone (information, no target): the model's layer matrices
 * (random values; int8 group 128, packed; bf16; fp32 of the bf16 values), 16 tokens, each matrix
 * the way the backend's cpu_linear runs it at that batch on this machine: with AMX granted the int8
 * tiles' and the bf16 tiles' 64-row work items (the input quantized / packed first), else the int8
 * VNNI kernel (the input quantized in the same region) and the bf16 FMA kernel (on the fp32 input,
 * or on it rounded to bf16 first, here in the same region) in the own matmul's 16-row work items
 * (CPU_MM_CHUNK); fp32 on the FMA kernel in 16-row items everywhere. Every layer its own copy (from
 * DRAM where they pass the LLC, as the steps' weights do), the variants interleaved, best of reps,
 * beside the read ceiling rd: what the step's batch-16 ratio loses outside the kernels. 1 on error. */
static int batch16_kernels(const model_config *cfg, int threads, int reps, double rd) {
    const int amx = xk_a8_amx() && amx_bf16_granted() && xk_isa_best() == XK_ISA_AVX512;
    const int64_t n = 16, d = cfg->d_model, qd = cfg->n_heads * cfg->head_dim, kvd = cfg->n_kv_heads * cfg->head_dim;
    const int64_t nm = 4 * cfg->n_layers, wide = cfg->d_ff > qd ? (cfg->d_ff > d ? cfg->d_ff : d) : (qd > d ? qd : d);
    const int64_t item = amx ? 64 : 16; /* rows per work item: cpu_backend.c's CPU_AMX_ROWS, CPU_MM_CHUNK */
    float *x = malloc((size_t)(n * wide) * 4), *xr = malloc((size_t)(n * wide) * 4);
    float *y = malloc((size_t)(n * 2 * cfg->d_ff + n * (qd + 2 * kvd)) * 4);
    int8_t *q = malloc((size_t)(n * (wide + 128)));
    float *qs = malloc((size_t)(n * wide) * 4);
    int32_t *qcr = malloc((size_t)(n * wide) * 4);
    uint16_t *xb = aligned_alloc(64, (size_t)amx_bf16_input_elems(n, wide, 3) * 2);
    const int64_t cn = amx_bf16_scratch_floats(64, n);
    float *c = aligned_alloc(64, (size_t)(threads * cn) * 4);
    if (!x || !xr || !y || !q || !qs || !qcr || !xb || !c) return die("out of memory");
    double bytes[3];
    uint32_t sd = 29;
    wmat *M8, *MB, *MF;
    if (proj_mats(cfg, &sd, &M8, &MB, bytes)) return 1;
    if (proj_mats_f32(MB, nm, &MF, &bytes[2])) return 1;
    for (int64_t i = 0; i < n * wide; i++) sd = sd * 1664525u + 1013904223u, x[i] = (float)(sd >> 8) / 16777216.0f - 0.5f;
    const xk_isa isa = xk_isa_best();
    double best[4] = {1e30, 1e30, 1e30, 1e30};
    for (int r = 0; r < reps; r++)
        for (int v = 0; v < 4; v++) { /* int8, bf16 exact (3 parts on the tiles), bf16 rounded, fp32 */
            const double t0 = bench_now_s();
            for (int64_t i = 0; i < nm; i++) {
                const wmat *W = v == 0 ? &M8[i] : v == 3 ? &MF[i] : &MB[i];
                const int64_t rw = W->rows, cl = W->cols, chunks = (rw + item - 1) / item, parts = v == 1 ? 3 : 1;
                const int64_t qc = v == 0 ? xk_act8_cols(W) : 0, ng = W->n_groups;
                const int tiles = amx && (v == 1 || v == 2);
                if (v == 2 && !amx) memcpy(xr, x, (size_t)(n * cl) * 4); /* the backend rounds its input buffer in place */
#pragma omp parallel num_threads(threads)
                {
                    if (v == 0) {
#pragma omp for schedule(static)
                        for (int64_t t = 0; t < n; t++) xk_act8_quantize(W, x + t * cl, 1, q + t * qc, qs + t * ng, qcr + t * ng);
                    } else if (tiles) {
#pragma omp single
                        amx_bf16_pack_input(x, n, cl, (int)parts, 0, 1, xb);
                    } else if (v == 2) {
#pragma omp for schedule(static)
                        for (int64_t t = 0; t < n; t++) xk_bf16_round(xr + t * cl, 1, cl, NULL);
                    }
#pragma omp for schedule(static)
                    for (int64_t ch = 0; ch < chunks; ch++) {
                        const int64_t r0 = ch * item, r1 = r0 + item < rw ? r0 + item : rw;
                        if (v == 0) xk_matmul_a8(isa, W, q, qs, qcr, n, y, rw, r0, r1);
                        else if (tiles) amx_matmul_bf16(W, xb, (int)parts, n, y, rw, r0, r1, c + (int64_t)omp_get_thread_num() * cn);
                        else xk_matmul(isa, W, v == 2 ? xr : x, n, y, rw, r0, r1);
                    }
                }
            }
            const double t = bench_now_s() - t0;
            best[v] = t < best[v] ? t : best[v];
        }
    printf("batch-16 kernels alone (%d layers x 4 matrices, %.0f MiB of bf16, best of %d, interleaved; information): int8 %s %.2f GB/s "
           "(%.3f of the read ceiling), bf16 %s %.2f (%.3f), rounded %.2f (%.3f), fp32 fma %.2f (%.3f)\n",
           (int)cfg->n_layers, bytes[1] / 1048576, reps, amx ? "tiles" : "vnni", bytes[0] / best[0] / 1e9, bytes[0] / best[0] / rd,
           amx ? "tiles exact3" : "fma exact", bytes[1] / best[1] / 1e9, bytes[1] / best[1] / rd, bytes[1] / best[2] / 1e9,
           bytes[1] / best[2] / rd, bytes[2] / best[3] / 1e9, bytes[2] / best[3] / rd);
    proj_mats_free(MF, NULL, nm); /* their scales are NULL, as the bf16 ones */
    proj_mats_free(M8, MB, nm);
    free(x), free(xr), free(y), free(q), free(qs), free(qcr), free(xb), free(c);
    return 0;
}

/* Batched decode at batch 2, 4, 8 and 16 of the weight variants (each batch's NV models
 * interleaved), weight GB/s per step against the read ceiling rd, measured again after the
 * batches (the better one is used, as at batch 1). r16: batch 16's ratios. Returns 0, or 2. */
static int batched_points(const model_config *cfg, int threads, int steps, const xf_dtype *dts, double ws,
                          double peak, ceilings_bw *rd, double *r16) {
    static const int64_t bs[] = {2, 4, 8, 16};
    double t[4][NV], tf[4][NV];
    for (int b = 0; b < 4; b++)
        if (batched_decode(cfg, threads, steps, bs[b], dts, t[b], tf[b])) return 2;
    ceilings_bw rd2;
    if (ceilings_bandwidth(CEIL_READ, ws, threads, 2, &rd2) != XF_OK) return die("read bandwidth");
    if (rd2.Bps > rd->Bps) *rd = rd2;
    for (int b = 0; b < 4; b++)
        for (int k = 0; k < NV; k++) {
            const double wb = decode_weight_bytes_b(cfg, dts[k], 8 + 1 + steps / 2, bs[b]);
            printf("%s decode at batch %2lld: best %.1f ms/step, %.2f GB/s of weights, %.3f of the read ceiling (%.2f GB/s)",
                   vnames[k], (long long)bs[b], t[b][k] * 1e3, wb / t[b][k] / 1e9, wb / t[b][k] / rd->Bps, rd->Bps / 1e9);
            if (tf[b][k] > 0) /* bf16 on own AMX tiles, the FMA kernel's steps beside them */
                printf("; own AMX tiles (FP32 FMA kernel beside: %.1f ms/step, %.3f of the read ceiling; tiles %.2fx)", tf[b][k] * 1e3,
                       wb / tf[b][k] / rd->Bps, tf[b][k] / t[b][k]);
            else if (dts[k] != XF_INT8) { /* fp32 / bf16 weights run on the FP32 FMA units: 2 FLOP per weight and token */
                const double in = 2.0 * (double)bs[b] / (dts[k] == XF_FP32 ? 4.0 : 2.0), ridge = peak / rd->Bps;
                printf("; on FP32 FMA %.1f FLOP/B against a ridge of %.1f: %s", in, ridge, in < ridge ? "memory-bound" : "compute-bound");
            }
            printf("\n");
            if (bs[b] == 16) r16[k] = wb / t[b][k] / rd->Bps;
        }
    return batch16_kernels(cfg, threads, steps > 3 ? steps : 3, rd->Bps) ? 2 : 0;
}
static int batched_section(const model_config *cfg, int threads, int steps, const xf_dtype *dts, double ws, double peak,
                           ceilings_bw *rd) {
    double r16[NV];
    if (batched_points(cfg, threads, steps, dts, ws, peak, rd, r16)) return 2;
    for (int k = 0; k < NV; k++) {
        char what[80];
        snprintf(what, sizeof what, "%s decode at batch 16: weights GB/s / read ceiling", vnames[k]);
        verdict(what, r16[k], 0.80, 1, "");
    }
    return 0;
}

/* ---- decode attention against the read ceiling, paged against contiguous ----
 * The backend's decode attention (xk_attention_batch) over `batch` sequences of `ctx` cached
 * tokens of the model's KV shape, layer after layer as a decode step runs it, KV in one pool per
 * layer: contiguous (sequence s at slots s*ctx ..) and paged (16-token blocks in a shuffled order,
 * as the KV manager's paged policy leaves them). In a decode step the weights stream through the
 * caches between two reads of a layer's KV, so the KV comes from DRAM: the bench cycles over as
 * many copies of a layer's KV as make the working set of the DRAM read ceiling (>= 4x the LLC),
 * and the read ceiling is measured on a working set of the same bytes, interleaved with the
 * attention steps (best of reps each). */
typedef struct att_result {
    double kv_bytes, layer_bytes, read_Bps, t_contig, t_paged;
    double r_contig, r_paged; /* xk_attention_replay of the same bytes (the kernel's order, split and prefetch) */
    double r_paged_nopf;      /* the same replay of the paged layout without the software prefetches */
    int64_t copies;
    xf_bound cls;
} att_result;

static double att_step(const model_config *cfg, int threads, int64_t layers, int64_t batch, int64_t ctx, xf_dtype dt,
                       char **K, char **V, const int64_t *slots, float *q, float *out, xk_attn_query *qs,
                       const xk_attn_work *w) {
    const int64_t hd = cfg->head_dim, nrep = cfg->n_heads / cfg->n_kv_heads;
    const float scale = (float)(1.0 / sqrt((double)hd));
    double t0 = timer_now_s();
    for (int64_t l = 0; l < layers; l++) {
        for (int64_t s = 0; s < batch; s++)
            qs[s] = (xk_attn_query){q + s * cfg->n_heads * hd, out + s * cfg->n_heads * hd, K[l], V[l], slots + s * ctx, ctx};
        xk_attention_batch(xk_isa_best(), threads, qs, batch, cfg->n_kv_heads, nrep, hd, dt, cfg->n_kv_heads * hd, scale, w);
    }
    return timer_now_s() - t0;
}

/* The same layers' bytes read in the kernel's order and split, no arithmetic (xk_attention_replay). */
static double att_replay(const model_config *cfg, int threads, int64_t layers, int64_t batch, int64_t ctx, xf_dtype dt,
                         char **K, char **V, const int64_t *slots, xk_attn_query *qs, int64_t *items, int pf, uint64_t *sink) {
    const int64_t hd = cfg->head_dim, nrep = cfg->n_heads / cfg->n_kv_heads;
    double t0 = timer_now_s();
    for (int64_t l = 0; l < layers; l++) {
        for (int64_t s = 0; s < batch; s++) qs[s] = (xk_attn_query){NULL, NULL, K[l], V[l], slots + s * ctx, ctx};
        *sink += xk_attention_replay(xk_isa_best(), threads, qs, batch, cfg->n_kv_heads, nrep, hd, dt, cfg->n_kv_heads * hd, pf, items);
    }
    return timer_now_s() - t0;
}

static xf_status bench_attention(const model_config *cfg, int threads, int reps, double peak, double ws, int64_t batch,
                                 int64_t ctx, xf_dtype dt, att_result *r) {
    const int64_t hd = cfg->head_dim, kv_dim = cfg->n_kv_heads * hd, esz = dt == XF_FP32 ? 4 : 2, nrep = cfg->n_heads / cfg->n_kv_heads;
    const int64_t n_slots = batch * ctx, layer_bytes = 2 * n_slots * kv_dim * esz;
    int64_t layers = (int64_t)ceil(ws / (double)layer_bytes); /* copies of one layer's KV */
    layers = layers < 1 ? 1 : layers;
    xf_status st = XF_OK;
    char **K = calloc((size_t)layers, sizeof *K), **V = calloc((size_t)layers, sizeof *V);
    int64_t *contig = malloc((size_t)n_slots * sizeof(int64_t)), *paged = malloc((size_t)n_slots * sizeof(int64_t));
    int64_t *perm = malloc((size_t)(n_slots / 16 + 1) * sizeof(int64_t));
    float *q = malloc((size_t)(batch * cfg->n_heads * hd) * sizeof(float)), *out = malloc((size_t)(batch * cfg->n_heads * hd) * sizeof(float));
    float *row = malloc((size_t)kv_dim * sizeof(float));
    xk_attn_query *qs = malloc((size_t)batch * sizeof *qs);
    xk_attn_work w = {malloc((size_t)(batch + 1) * sizeof(int64_t)),
                      aligned_alloc(64, (size_t)(XK_ATT_SPLIT_ITEMS * XK_ATT_MAX_PARTS * nrep * hd) * sizeof(float)),
                      aligned_alloc(64, (size_t)(XK_ATT_SPLIT_ITEMS * XK_ATT_MAX_PARTS * 2 * nrep) * sizeof(float) + 64),
                      aligned_alloc(64, (size_t)(threads * xk_attn_thread_floats(cfg->n_heads, hd)) * sizeof(float)),
                      xk_attn_thread_floats(cfg->n_heads, hd)};
    if (!K || !V || !contig || !paged || !perm || !q || !out || !row || !qs || !w.items || !w.part_o || !w.part_ml || !w.scratch)
        st = xf_errorf(XF_ENOMEM, "out of memory");
    uint64_t x = 99;
#define LCG() (x = x * 6364136223846793005ULL + 1442695040888963407ULL, x >> 33)
    for (int64_t l = 0; !st && l < layers; l++) {
        K[l] = hugemem_alloc(n_slots * kv_dim * esz); /* as the backend's KV pool and the read ceiling */
        V[l] = hugemem_alloc(n_slots * kv_dim * esz);
        if (!K[l] || !V[l]) {
            st = xf_errorf(XF_ENOMEM, "out of memory for %lld MiB of KV", (long long)(layer_bytes * layers >> 20));
            break;
        }
        if (l > 0) { /* the copies: the same values, other memory */
            memcpy(K[l], K[0], (size_t)(n_slots * kv_dim * esz));
            memcpy(V[l], V[0], (size_t)(n_slots * kv_dim * esz));
            continue;
        }
        for (int64_t j = 0; j < n_slots; j++) {
            for (int64_t e = 0; e < kv_dim; e++) row[e] = (float)(LCG() % 2001) / 1000.0f - 1.0f;
            xk_store(K[l] + j * kv_dim * esz, dt, row, kv_dim);
            xk_store(V[l] + j * kv_dim * esz, dt, row, kv_dim);
        }
    }
    if (!st) {
        for (int64_t j = 0; j < n_slots; j++) contig[j] = j;
        const int64_t nb = n_slots / 16; /* ctx is a multiple of 16 */
        for (int64_t b = 0; b < nb; b++) perm[b] = b;
        for (int64_t b = nb - 1; b > 0; b--) {
            int64_t k = (int64_t)(LCG() % (uint64_t)(b + 1)), t = perm[b];
            perm[b] = perm[k];
            perm[k] = t;
        }
        for (int64_t j = 0; j < n_slots; j++) paged[j] = perm[j / 16] * 16 + j % 16;
        for (int64_t i = 0; i < batch * cfg->n_heads * hd; i++) q[i] = (float)(LCG() % 2001) / 1000.0f - 1.0f;
    }
#undef LCG
    r->kv_bytes = (double)(layer_bytes * layers);
    r->layer_bytes = (double)layer_bytes;
    r->copies = layers;
    r->read_Bps = r->t_contig = r->t_paged = r->r_contig = r->r_paged = r->r_paged_nopf = 0;
    r->cls = XF_BOUND_LATENCY;
    uint64_t sink = 0;
    for (int i = 0; !st && i < reps; i++) {
        ceilings_bw bw;
        st = ceilings_bandwidth(CEIL_READ, r->kv_bytes, threads, 1, &bw);
        if (st) break;
        r->read_Bps = bw.Bps > r->read_Bps ? bw.Bps : r->read_Bps;
        /* The pass right after the ceiling (which faults in and frees as many bytes of huge pages)
         * ran 1.2-2.0x slower than the same pass repeated (10 of 10, busy machine, 2026-12-02): that,
         * not the layout, made "contiguous" (always timed first) read slower than "paged". So one
         * untimed pass first, and the two layouts' order alternates. */
        att_step(cfg, threads, layers, batch, ctx, dt, K, V, paged, q, out, qs, &w);
        const int cf = i % 2 == 0; /* contiguous first */
        const double t1 = att_step(cfg, threads, layers, batch, ctx, dt, K, V, cf ? contig : paged, q, out, qs, &w);
        const double t2 = att_step(cfg, threads, layers, batch, ctx, dt, K, V, cf ? paged : contig, q, out, qs, &w);
        const double tc = cf ? t1 : t2, tp = cf ? t2 : t1;
        const double rc = att_replay(cfg, threads, layers, batch, ctx, dt, K, V, contig, qs, w.items, 1, &sink);
        const double rp = att_replay(cfg, threads, layers, batch, ctx, dt, K, V, paged, qs, w.items, 1, &sink);
        const double rn = att_replay(cfg, threads, layers, batch, ctx, dt, K, V, paged, qs, w.items, 0, &sink);
        r->t_contig = i == 0 || tc < r->t_contig ? tc : r->t_contig;
        r->t_paged = i == 0 || tp < r->t_paged ? tp : r->t_paged;
        r->r_contig = i == 0 || rc < r->r_contig ? rc : r->r_contig;
        r->r_paged = i == 0 || rp < r->r_paged ? rp : r->r_paged;
        r->r_paged_nopf = i == 0 || rn < r->r_paged_nopf ? rn : r->r_paged_nopf;
    }
    if (sink == 1) printf(" "); /* keeps the replays' sums live */
    if (!st) {
        /* QK and PV: 4 FLOP per query head per KV element pair of K and V head_dim */
        const double flops = 4.0 * (double)(cfg->n_heads * hd) * (double)(ctx * batch * layers);
        roofline_thresholds th;
        roofline_thresholds_default(&th);
        r->cls = roofline_class_measured(flops / r->t_paged / peak, r->kv_bytes / r->t_paged / r->read_Bps, &th);
    }
    for (int64_t l = 0; l < layers && K && V; l++) {
        free(K[l]);
        free(V[l]);
    }
    free(K);
    free(V);
    free(contig);
    free(paged);
    free(perm);
    free(q);
    free(out);
    free(row);
    free(qs);
    free(w.items);
    free(w.part_o);
    free(w.part_ml);
    free(w.scratch);
    return st;
}

/* ---- prefill attention against the FP32 peak ----
 * One sequence's n_tok-token prompt through xk_attention_causal, the backend's prefill kernel
 * (score tiles and P.V on AVX-512 register tiles, or OpenBLAS sgemm without AVX-512; online softmax): each thread takes KV heads (one
 * gather of the head's K and V into fp32 tiles, then every query block of it, last to first),
 * fp32 KV in 16-token blocks in a shuffled order. FLOPs: 4 head_dim per (query head, visible key)
 * pair under the causal mask, the cost model's pairs without its softmax term. Best of at least
 * reps repetitions and of min_s seconds of them (*n_reps: how many ran): a 512-token prompt of
 * stories110m takes about 3 ms on two threads: its best of 5 repetitions read 0.44 of the FP32
 * peak here and 0.15 in a driver of this loop, whose best of 200 read 0.54 (2026-12-04); the
 * early ones carry the team's wake-up and the tiles' first touch. The caller divides by the
 * larger of the FP32 peaks measured just before and just after. */
void openblas_set_num_threads(int num_threads); /* OpenBLAS: one thread per call under OpenMP, as the backend sets */

static xf_status bench_prefill_attention(const model_config *cfg, int threads, int reps, double min_s, int64_t n_tok,
                                         double *flops_s, int *n_reps) {
    openblas_set_num_threads(1);
    const int64_t hd = cfg->head_dim, nkv = cfg->n_kv_heads, kv_dim = nkv * hd, nrep = cfg->n_heads / nkv;
    const int64_t qw = cfg->n_heads * hd, qpb = xk_attn_block_queries(nrep), nqb = (n_tok + qpb - 1) / qpb;
    const int64_t tile_n = xk_attn_prefill_floats(n_tok, nrep, hd), tr = (n_tok * hd + 15) & ~(int64_t)15;
    float *K = malloc((size_t)(n_tok * kv_dim) * sizeof(float)), *V = malloc((size_t)(n_tok * kv_dim) * sizeof(float));
    float *q = malloc((size_t)(n_tok * qw) * sizeof(float)), *out = malloc((size_t)(n_tok * qw) * sizeof(float));
    float *tiles = tile_n > 0 ? aligned_alloc(64, (size_t)(threads * tile_n) * sizeof(float)) : NULL;
    int64_t *slots = malloc((size_t)n_tok * sizeof(int64_t));
    xf_status st = XF_OK;
    if (!K || !V || !q || !out || !tiles || !slots) st = xf_errorf(XF_ENOMEM, "out of memory");
    uint64_t x = 7;
#define LCG() (x = x * 6364136223846793005ULL + 1442695040888963407ULL, x >> 33)
    for (int64_t i = 0; !st && i < n_tok * kv_dim; i++) {
        K[i] = (float)(LCG() % 2001) / 1000.0f - 1.0f;
        V[i] = (float)(LCG() % 2001) / 1000.0f - 1.0f;
    }
    for (int64_t i = 0; !st && i < n_tok * qw; i++) q[i] = (float)(LCG() % 2001) / 1000.0f - 1.0f;
    for (int64_t b = 0; !st && b < n_tok / 16; b++) { /* blocks of 16 in a shuffled order (n_tok: a multiple of 16) */
        const int64_t pb = (b * 7 + 3) % (n_tok / 16);
        for (int64_t j = 0; j < 16; j++) slots[b * 16 + j] = pb * 16 + j;
    }
#undef LCG
    const float scale = (float)(1.0 / sqrt((double)hd));
    double best = 0, spent = 0;
    int rep = 0;
    for (; !st && (rep < reps || spent < min_s); rep++) {
        const double t0 = timer_now_s();
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
        for (int64_t g = 0; g < nkv; g++) {
            float *kt = tiles + (int64_t)omp_get_thread_num() * tile_n, *vt = kt + tr, *bscr = vt + tr;
            xk_attn_gather(kt, vt, K, V, XF_FP32, kv_dim, g * hd, slots, 0, n_tok, hd);
            for (int64_t qb = nqb - 1; qb >= 0; qb--) {
                const int64_t q0 = qb * qpb, nq = n_tok - q0 < qpb ? n_tok - q0 : qpb;
                xk_attention_causal(xk_isa_best(), out + q0 * qw + g * nrep * hd, qw, q + q0 * qw + g * nrep * hd, qw, nq,
                                    nrep, hd, q0, kt, vt, scale, bscr);
            }
        }
        const double t = timer_now_s() - t0;
        best = rep == 0 || t < best ? t : best;
        spent += t;
    }
    *n_reps = rep;
    /* sum over queries i of (i + 1) visible keys, times the query heads, 4 hd FLOP each */
    *flops_s = st ? 0 : 4.0 * (double)hd * (double)cfg->n_heads * ((double)n_tok * (double)(n_tok + 1) / 2) / best;
    free(K);
    free(V);
    free(q);
    free(out);
    free(tiles);
    free(slots);
    return st;
}

/* Runs the attention points of one model; returns 0, or 2 after an error. */
static int attention_model(const model_config *cfg, int threads, int quick, double peak, double ws) {
    static const int64_t batches[2] = {1, 8}, ctxs[2] = {512, 4096};
    static const xf_dtype dts[3] = {XF_FP32, XF_FP16, XF_BF16};
    printf("decode attention (%s, %lld KV heads x head_dim %lld, %lld query heads per KV head), %s kernel:\n", cfg->name,
           (long long)cfg->n_kv_heads, (long long)cfg->head_dim, (long long)(cfg->n_heads / cfg->n_kv_heads),
           xk_isa_name(xk_isa_best()));
    for (int d = 0; d < 3; d++)
        for (int bi = 0; bi < 2; bi++)
            for (int ci = 0; ci < 2; ci++) {
                const int64_t batch = batches[bi], ctx = ctxs[ci];
                const xf_dtype dt = dts[d];
                att_result r;
                if (bench_attention(cfg, threads, quick ? 2 : 5, peak, ws, batch, ctx, dt, &r) != XF_OK) {
                    fprintf(stderr, "bench_cpu: attention: %s\n", xf_error_msg());
                    return 2;
                }
                printf("  batch %lld ctx %4lld %s KV: %.2f MiB a layer x %lld copies = %.0f MiB a step (DRAM tier); DRAM read "
                       "ceiling over the same bytes %.2f GB/s; contiguous %.2f GB/s, paged %.2f GB/s (paged costs %+.1f%%), "
                       "class %s\n",
                       (long long)batch, (long long)ctx, dtype_name(dt), r.layer_bytes / 1048576, (long long)r.copies,
                       r.kv_bytes / 1048576, r.read_Bps / 1e9, r.kv_bytes / r.t_contig / 1e9, r.kv_bytes / r.t_paged / 1e9,
                       100 * (r.t_paged / r.t_contig - 1), bound_name(r.cls));
                printf("    replay of the kernel's reads (its order, split and prefetch, no arithmetic): contiguous %.2f GB/s, "
                       "paged %.2f GB/s (without its prefetches %.2f GB/s); kernel / replay: contiguous %.3f, paged %.3f\n",
                       r.kv_bytes / r.r_contig / 1e9, r.kv_bytes / r.r_paged / 1e9, r.kv_bytes / r.r_paged_nopf / 1e9,
                       r.r_contig / r.t_contig, r.r_paged / r.t_paged);
                char what[192];
                snprintf(what, sizeof what, "attention %s b%lld ctx %lld %s paged / DRAM read", cfg->name, (long long)batch,
                         (long long)ctx, dtype_name(dt));
                verdict(what, r.kv_bytes / r.t_paged / r.read_Bps, 0.70, 1, "");
                snprintf(what, sizeof what, "attention %s b%lld ctx %lld %s classed memory", cfg->name, (long long)batch,
                         (long long)ctx, dtype_name(dt));
                verdict(what, r.cls == XF_BOUND_MEMORY, 1, 1, "");
            }
    static const int64_t ptoks[2] = {512, 2048};
    for (int i = 0; i < 2; i++) {
        /* the FP32 peak measured just before and just after the point, the larger taken: on a
         * shared machine the run's first peak can be far off the minute of the point */
        double f, p0 = 0, p1 = 0;
        int n_reps = 0;
        char isa[32];
        if (ceilings_fp32_peak(threads, 2, &p0, isa, sizeof isa) != XF_OK ||
            bench_prefill_attention(cfg, threads, quick ? 2 : 5, quick ? 0.05 : 0.25, ptoks[i], &f, &n_reps) != XF_OK ||
            ceilings_fp32_peak(threads, 2, &p1, isa, sizeof isa) != XF_OK) {
            fprintf(stderr, "bench_cpu: prefill attention: %s\n", xf_error_msg());
            return 2;
        }
        const double pk = p0 > p1 ? p0 : p1;
        printf("  prefill attention %s, %lld-token prompt, fp32 KV: %.1f GFLOP/s, best of %d repetitions (FP32 peak beside "
               "it %.1f / %.1f, the run's first %.1f)\n",
               cfg->name, (long long)ptoks[i], f / 1e9, n_reps, p0 / 1e9, p1 / 1e9, peak / 1e9);
        char what[192];
        snprintf(what, sizeof what, "prefill attention %s %lld tokens / FP32 peak", cfg->name, (long long)ptoks[i]);
        verdict(what, f / pk, 0.50, 1, "");
    }
    return 0;
}

/* The attention points of --model when given, else of stories110m (12 heads, one per KV head) and
 * tinyllama-1.1b (8 query heads per KV head); returns 0, or 2 after an error. */
static int attention_section(const model_config *cfg, int model_given, int threads, int quick, double peak, double ws) {
    if (model_given) return attention_model(cfg, threads, quick, peak, ws);
    static const char *const names[2] = {"stories110m", "tinyllama-1.1b"};
    for (int i = 0; i < 2; i++) {
        model_config c;
        if (config_resolve(names[i], &c) != XF_OK) return die("model");
        int rc = attention_model(&c, threads, quick, peak, ws);
        if (rc) return rc;
    }
    return 0;
}

/* Where one batch-1 decode step of bm goes (issue 20, item 1): the timer probe over 3 repetitions
 * of 4 steps, each op's best repetition, summed per op kind over the layers: the projections' time
 * and weight GB/s (against the read ceiling rd), attention, and the rest. Each projection's time
 * over what it would take at the largest one's rate is its fixed cost (OpenMP fork and wake-up,
 * input quantization). Returns 0, or 2 after an error. */
static int decode_accounting(bench_model *bm, const model_config *cfg, const char *name, xf_dtype wd, int64_t ctx, double rd) {
    timer_probe *tp;
    if (timer_probe_init(cfg->n_layers, 4, 0, &tp) != XF_OK) return die("timer");
    probe_set ps = {1, {timer_probe_as_probe(tp)}};
    for (int rep = 0; rep < 3; rep++) {
        timer_probe_rep_begin(tp);
        for (int i = 0; i < 4; i++)
            if (model_decode_step(bm->m, NULL, &ps) != XF_OK) return die("probed decode");
        if (timer_probe_rep_end(tp) != XF_OK) return die("timer");
    }
    int64_t n;
    cost_op *ops = bench_decode_ops(cfg, 1, ctx, wd, &n);
    if (!ops) return die("cost model");
    static const op_kind kinds[] = {OP_QKV, OP_O_PROJ, OP_GATE_UP, OP_DOWN, OP_LM_HEAD};
    double kt[5] = {0}, kb[5] = {0}, t_att = 0, t_rest = 0;
    int64_t kn[5] = {0};
    for (int64_t i = 0; i < n; i++) {
        const double *smp;
        const int ns = timer_probe_samples(tp, XF_DECODE, ops[i].layer, ops[i].kind, &smp);
        double b = 0;
        for (int q = 0; q < ns; q++) b = q == 0 || smp[q] < b ? smp[q] : b;
        int k = 0;
        while (k < 5 && kinds[k] != ops[i].kind) k++;
        if (k < 5) kt[k] += b, kb[k] += ops[i].weight_bytes, kn[k]++;
        else if (ops[i].kind == OP_ATTENTION) t_att += b;
        else t_rest += b;
    }
    free(ops);
    timer_probe_free(tp);
    int big = -1; /* the kind streaming the most bytes per op sets the rate */
    for (int k = 0; k < 5; k++)
        if (kn[k] > 0 && kt[k] > 0 && (big < 0 || kb[k] / (double)kn[k] > kb[big] / (double)kn[big])) big = k;
    if (big < 0) return 0; /* no projection was timed */
    const double rate = kb[big] / kt[big];
    double tp_sum = 0, bp_sum = 0;
    printf("%s decode step, per op (timer probe, best of 3 x 4 steps):", name);
    for (int k = 0; k < 5; k++) {
        if (kn[k] == 0 || kt[k] <= 0) continue;
        tp_sum += kt[k], bp_sum += kb[k];
        printf(" %s %.2f ms (%.1f GB/s, %+.0f us a call over %s's rate)%s", op_kind_name(kinds[k]), kt[k] * 1e3, kb[k] / kt[k] / 1e9,
               (kt[k] - kb[k] / rate) / (double)kn[k] * 1e6, op_kind_name(kinds[big]), k < 4 ? ";" : "");
    }
    printf("\n  projections %.2f ms for %.0f MiB: %.2f GB/s, %.3f of the read ceiling (at %s's rate: %.2f ms); attention %.2f ms; "
           "the other ops %.2f ms; the step's ops %.2f ms\n",
           tp_sum * 1e3, bp_sum / 1048576, bp_sum / tp_sum / 1e9, bp_sum / tp_sum / rd, op_kind_name(kinds[big]), bp_sum / rate * 1e3,
           t_att * 1e3, t_rest * 1e3, (tp_sum + t_att + t_rest) * 1e3);
    return 0;
}

/* The calling OpenMP thread's share of rw rows in 16-row chunks, as the backend deals them at 1-2 tokens. */
static void thread_share(int64_t rw, int64_t *r0, int64_t *r1) { xk_share_rows(rw, 16, omp_get_thread_num(), omp_get_num_threads(), r0, r1); }

/* Decode at batch 1 with unquantized weights as the backend runs it: each thread its share in one call. */
static void mm1_decode_call(const wmat *W, const float *x, float *y, int threads) {
#pragma omp parallel num_threads(threads)
    {
        int64_t r0, r1;
        thread_share(W->rows, &r0, &r1);
        if (r0 < r1) xk_matmul(xk_isa_best(), W, x, 1, y, W->rows, r0, r1);
    }
}

/* The int8 batch-1 projection as the backend runs it (cpu_linear): each thread's 16-row chunks in
 * one call, which reads them as xk_a8_streams() streams; q, qs, qcr: the quantized input. */
static void a8_decode_call(const wmat *W, const int8_t *q, const float *qs, const int32_t *qcr, float *y, int threads) {
#pragma omp parallel num_threads(threads)
    {
        int64_t r0, r1;
        thread_share(W->rows, &r0, &r1);
        if (r0 < r1) xk_matmul_a8(xk_isa_best(), W, q, qs, qcr, 1, y, W->rows, r0, r1);
    }
}

/* The int8 batch-1 kernel over the model's layer matrices (random int8 values, packed; from DRAM:
 * every layer's own copy), side by side, interleaved, best of reps: one call per 16-row chunk (one
 * stream per thread, as the backend called it before) against each thread's rows in one call
 * (XK_A8_STREAMS streams, what the backend does now). The same bits; printed beside the read
 * ceiling rd. 1 on error. */
static int a8_streams_section(const model_config *cfg, int threads, int reps, double rd) {
    const int64_t d = cfg->d_model, qd = cfg->n_heads * cfg->head_dim, kvd = cfg->n_kv_heads * cfg->head_dim;
    const int64_t nm = 4 * cfg->n_layers;
    float *x = malloc((size_t)cfg->d_ff * 4 + (size_t)d * 4 + (size_t)qd * 4), *y = malloc((size_t)(2 * cfg->d_ff + qd + 2 * kvd) * 4);
    int8_t *q = malloc((size_t)(cfg->d_ff + d + qd) + 4096);
    float *qs = malloc((size_t)(cfg->d_ff + d + qd) * 4);
    int32_t *qcr = malloc((size_t)(cfg->d_ff + d + qd) * 4);
    if (!x || !y || !q || !qs || !qcr) return die("out of memory");
    double nb[2];
    uint32_t sd = 17;
    wmat *M;
    if (proj_mats(cfg, &sd, &M, NULL, nb)) return 1;
    const double bytes = nb[0];
    for (int64_t i = 0; i < cfg->d_ff + d + qd; i++) sd = sd * 1664525u + 1013904223u, x[i] = (float)(sd >> 8) / 16777216.0f - 0.5f;
    double best[2] = {1e30, 1e30}, ratio[64];
    int wins = 0, nr = reps < 64 ? reps : 64;
    for (int r = 0; r < nr; r++) {
        double t[2];
        for (int vi = 0; vi < 2; vi++) {
            const int v = r % 2 ? 1 - vi : vi;
            const double t0 = bench_now_s();
            for (int64_t i = 0; i < nm; i++) {
                const wmat *W = &M[i];
                const int64_t rw = W->rows, chunks = (rw + 15) / 16;
                xk_act8_quantize(W, x, 1, q, qs, qcr);
                if (v == 0) {
#pragma omp parallel for num_threads(threads) schedule(static)
                    for (int64_t ch = 0; ch < chunks; ch++)
                        xk_matmul_a8(xk_isa_best(), W, q, qs, qcr, 1, y, rw, ch * 16, ch * 16 + 16 < rw ? ch * 16 + 16 : rw);
                } else {
                    a8_decode_call(W, q, qs, qcr, y, threads);
                }
            }
            t[v] = bench_now_s() - t0;
            best[v] = t[v] < best[v] ? t[v] : best[v];
        }
        ratio[r] = t[0] / t[1];
        wins += t[1] < t[0];
    }
    printf("int8 batch-1 kernel from DRAM (%s, %d layers x 4 matrices, %.0f MiB; best of %d, interleaved): one call per 16-row "
           "chunk %.2f GB/s (%.3f of the read ceiling), a thread's rows in one call (%d streams) %.2f GB/s (%.3f); "
           "speed ratio median %.3f, best %.3f, faster in %d of %d\n",
           xk_a8_name(xk_isa_best()), (int)cfg->n_layers, bytes / 1048576, nr, bytes / best[0] / 1e9, bytes / best[0] / rd,
           xk_a8_streams(), bytes / best[1] / 1e9, bytes / best[1] / rd, median(ratio, nr), best[0] / best[1], wins, nr);
    proj_mats_free(M, NULL, nm);
    free(x), free(y), free(q), free(qs), free(qcr);
    return 0;
}

/* The calling thread's contiguous share of `bytes` at p (64-byte multiples) through the read
 * ceiling's own loop (ceilings_kernel_run); inside a parallel region. */
static double read_share(const void *p, int64_t bytes) {
    const int64_t n = bytes / 4, nt = omp_get_num_threads(), id = omp_get_thread_num();
    const int64_t lo = n * id / nt / 16 * 16, hi = id == nt - 1 ? n : n * (id + 1) / nt / 16 * 16;
    return ceilings_kernel_run(CEIL_READ, (float *)p + lo, NULL, NULL, hi - lo);
}

/* Where the batch-1 kernels lose against the read ceiling (issue 20): the model's layer matrices
 * (proj_mats: bf16, and int8 packed with its scales; from DRAM, every layer its own copy), each in
 * its own parallel region as the backend runs it (bf16: mm1_decode_call, the kernel reading 8 runs
 * side by side, and beside it the same in blocks of 8 adjacent rows; int8: the input quantized,
 * then a8_decode_call), against the read ceiling's loop over each thread's half of
 * the same matrix's bytes, one region a matrix too, so the forks are in both and what the kernel
 * loses beyond the loop is its own; the five passes interleaved, the order rotated every round, best
 * of reps, with each round's kernel / loop ratio. Then each kernel from L2 (64 rows, one thread,
 * CPU time): its arithmetic, which the stream's time may not hide (at a busy hour bf16 lost about
 * what adding it to the stream's time predicts, on a quiet minute less; docs/performance.md). 1 on error. */
static int kernel_read_section(const model_config *cfg, int threads, int reps, double rd) {
    const int64_t d = cfg->d_model, qd = cfg->n_heads * cfg->head_dim, mx = 2 * cfg->d_ff + qd + 2 * cfg->n_kv_heads * cfg->head_dim;
    const int64_t nm = 4 * cfg->n_layers;
    float *x = malloc((size_t)mx * 4), *y = malloc((size_t)mx * 4), *qs = malloc((size_t)mx * 4);
    int8_t *q = malloc((size_t)mx + 4096);
    int32_t *qcr = malloc((size_t)mx * 4);
    if (!x || !y || !q || !qs || !qcr) return die("out of memory");
    double nb[2];
    uint32_t sd = 29;
    wmat *M8, *MB;
    if (proj_mats(cfg, &sd, &M8, &MB, nb)) return 1;
    for (int64_t i = 0; i < mx; i++) sd = sd * 1664525u + 1013904223u, x[i] = (float)(sd >> 8) / 16777216.0f - 0.5f;
    double b8 = 0; /* int8 bytes streamed: the packed values and their scales */
    for (int64_t i = 0; i < nm; i++)
        b8 += (double)(weights_packed_values_bytes(M8[i].rows, M8[i].cols, M8[i].group) +
                       weights_packed_scales_bytes(M8[i].rows, M8[i].cols, M8[i].group));
    /* bf16 loop, bf16 kernel, int8 loop, int8 kernel, bf16 kernel in blocks of 8 adjacent rows */
    const double bytes[5] = {nb[1], nb[1], b8, b8, nb[1]};
    double t[5][64], best[5] = {1e30, 1e30, 1e30, 1e30, 1e30};
    const int nr = reps < 64 ? reps : 64;
    volatile double sink = 0;
    for (int r = 0; r < nr; r++)
        for (int vi = 0; vi < 5; vi++) {
            const int v = (vi + r) % 5;
            const double t0 = bench_now_s();
            double s = 0;
            for (int64_t i = 0; i < nm; i++) {
                const wmat *W = v < 2 || v == 4 ? &MB[i] : &M8[i];
                if (v == 0 || v == 2) {
                    const int64_t vb = v == 0 ? W->rows * W->cols * 2 : weights_packed_values_bytes(W->rows, W->cols, W->group);
                    const int64_t sb = v == 0 ? 0 : weights_packed_scales_bytes(W->rows, W->cols, W->group);
#pragma omp parallel num_threads(threads) reduction(+ : s)
                    s += read_share(W->data, vb) + (sb > 0 ? read_share(W->scales, sb) : 0.0);
                } else if (v == 1 || v == 4) {
                    xk_mm1_avoid_runs(v == 4);
                    mm1_decode_call(W, x, y, threads);
                    xk_mm1_avoid_runs(0);
                } else {
                    xk_act8_quantize(W, x, 1, q, qs, qcr);
                    a8_decode_call(W, q, qs, qcr, y, threads);
                }
            }
            sink += s;
            t[v][r] = bench_now_s() - t0;
            best[v] = t[v][r] < best[v] ? t[v][r] : best[v];
        }
    /* from L2: the first 64 rows of the first matrix (int8: its first 4 packed blocks), one thread */
    double hot[2] = {1e30, 1e30};
    wmat hb = MB[0], h8 = M8[0];
    hb.rows = h8.rows = 64;
    const int hit = 400;
    for (int r = 0; r < 6; r++)
        for (int v = 0; v < 2; v++) {
            if (v == 1) xk_act8_quantize(&h8, x, 1, q, qs, qcr);
            const double c0 = bench_clock_s(CLOCK_THREAD_CPUTIME_ID);
            for (int it = 0; it < hit; it++) {
                if (v == 0) xk_matmul(xk_isa_best(), &hb, x, 1, y, 64, 0, 64);
                else xk_matmul_a8(xk_isa_best(), &h8, q, qs, qcr, 1, y, 64, 0, 64);
            }
            const double c = bench_clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
            hot[v] = c < hot[v] ? c : hot[v];
        }
    printf("batch-1 kernels against the read ceiling's loop on the same bytes (%s, %d layers x 4 matrices from DRAM, a region a matrix, "
           "best of %d, interleaved):",
           cfg->name, (int)cfg->n_layers, nr);
    for (int k = 0; k < 2; k++) {
        double rr[64];
        for (int r = 0; r < nr; r++) rr[r] = t[2 * k][r] / t[2 * k + 1][r];
        printf(" %s %.2f GB/s, loop %.2f GB/s (%.3f of the read ceiling): kernel / loop %.3f (rounds' median %.3f)%s", k ? "int8" : "bf16",
               bytes[2 * k + 1] / best[2 * k + 1] / 1e9, bytes[2 * k] / best[2 * k] / 1e9, bytes[2 * k] / best[2 * k] / rd,
               best[2 * k] / best[2 * k + 1], median(rr, nr), k ? "\n" : ";");
    }
    double rb[64];
    for (int r = 0; r < nr; r++) rb[r] = t[4][r] / t[1][r];
    printf("  bf16 one token, a thread's rows as 8 runs side by side (the kernel) / as blocks of 8 adjacent rows (%.2f GB/s, %.3f "
           "of the read ceiling): speed ratio %.3f (rounds' median %.3f); the same bits\n",
           bytes[4] / best[4] / 1e9, bytes[4] / best[4] / rd, best[4] / best[1], median(rb, nr));
    printf("  from L2 (64 x %lld, one thread, CPU time): bf16 %.1f GB/s, int8 %.1f GB/s a core\n", (long long)d,
           2.0 * 64 * (double)d * hit / hot[0] / 1e9,
           (double)(weights_packed_values_bytes(64, h8.cols, h8.group) + weights_packed_scales_bytes(64, h8.cols, h8.group)) * hit / hot[1] / 1e9);
    proj_mats_free(M8, MB, nm);
    free(x), free(y), free(q), free(qs), free(qcr);
    return 0;
}

/* Huge pages side by side (core/hugemem.h): for each thread count (threads, then 1) and dtype, two
 * models of the config cut to `layers` layers, one allocated with huge pages and one without, and
 * the read ceiling's arrays the same two ways; their decode steps and reads interleaved (the order
 * reversed every other round), best of `rounds`. Prints decode GB/s and the read ceiling with and
 * without, both ratios decode / ceiling, the median speed ratio of the decode, and what the kernel
 * granted. 1 on error. */
static int huge_pages_section(const model_config *cfg0, int threads, int rounds, int64_t layers, double ws) {
    model_config cfg = *cfg0;
    if (layers > 0 && layers < cfg.n_layers) cfg.n_layers = layers;
    static const xf_dtype hdt[3] = {XF_FP32, XF_BF16, XF_INT8};
    const int ths[2] = {threads, 1};
    const int saved = hugemem_enabled();
    printf("huge pages side by side (THP %s; %s cut to %lld layers, %.0f MiB read arrays; best of %d rounds, interleaved):\n",
           hugemem_thp_mode(), cfg.name, (long long)cfg.n_layers, ws / 1048576, rounds);
    for (int ti = 0; ti < (threads > 1 ? 2 : 1); ti++) {
        const int th = ths[ti];
        for (int di = 0; di < 3; di++) {
            bench_model bm[2]; /* [0] huge pages asked for, [1] not */
            for (int h = 0; h < 2; h++) {
                hugemem_set_enabled(h == 0);
                if (open_model(&bm[h], &cfg, hdt[di], BACKEND_BF16_EXACT3, th, 16, 64 + 4 * (int64_t)rounds) != XF_OK) return die("huge pages model");
                int64_t len = 8;
                if (model_prefill(bm[h].m, 1, bm[h].prompt, &len, NULL) != XF_OK) return die("prefill");
                for (int w = 0; w < 2; w++)
                    if (model_decode_step(bm[h].m, NULL, NULL) != XF_OK) return die("decode warm-up");
            }
            double dbest[2] = {1e30, 1e30}, rbest[2] = {0, 0}, ratio[64];
            int64_t rgot[2] = {0, 0}, rasked[2] = {0, 0}; /* [1] unused: nothing asked */
            const int nr = rounds < 64 ? rounds : 64;
            for (int r = 0; r < nr; r++) {
                double t[2] = {1e30, 1e30};
                for (int vi = 0; vi < 2; vi++) {
                    const int h = r % 2 ? 1 - vi : vi;
                    for (int s = 0; s < 2; s++) { /* two steps each, the best kept */
                        const double t0 = bench_now_s();
                        if (model_decode_step(bm[h].m, NULL, NULL) != XF_OK) return die("decode");
                        const double dt = bench_now_s() - t0;
                        t[h] = dt < t[h] ? dt : t[h];
                    }
                    dbest[h] = t[h] < dbest[h] ? t[h] : dbest[h];
                    hugemem_set_enabled(h == 0);
                    ceilings_bw b;
                    if (ceilings_bandwidth(CEIL_READ, ws, th, 1, &b) != XF_OK) return die("read bandwidth");
                    rbest[h] = b.Bps > rbest[h] ? b.Bps : rbest[h];
                    rgot[h] = b.huge_bytes, rasked[h] = b.huge_eligible;
                }
                ratio[r] = t[1] / t[0];
            }
            const int64_t ctx = 10 + nr; /* the mean context of the timed steps */
            const double wb = decode_weight_bytes(&cfg, hdt[di], ctx);
            for (int h = 0; h < 2; h++) { /* where the step goes, each way (lm_head against gate_up: issue 20) */
                printf("  %s pages: ", h == 0 ? "huge" : "small");
                char nm[48];
                snprintf(nm, sizeof nm, "%s, %d thread%s", dtype_name(hdt[di]), th, th > 1 ? "s" : "");
                if (decode_accounting(&bm[h], &cfg, nm, hdt[di], ctx + 6, rbest[h])) return 1;
            }
            char g[160], rg[160];
            int64_t got, asked;
            hugemem_set_enabled(1);
            if (weights_huge_pages(model_get_weights(bm[0].m), &got, &asked) != XF_OK) return die("huge pages");
            hugemem_describe(g, sizeof g, got, asked);
            hugemem_describe(rg, sizeof rg, rgot[0], rasked[0]);
            for (int h = 0; h < 2; h++) model_free(bm[h].m);
            printf("  %s, %d thread%s: decode %.2f GB/s with huge pages, %.2f without (speed ratio median %.3f, best-of %.3f); "
                   "read ceiling %.2f / %.2f GB/s (%.3f); decode / ceiling %.3f with, %.3f without\n"
                   "    granted with huge pages asked for: weights %s; read arrays %s\n",
                   dtype_name(hdt[di]), th, th > 1 ? "s" : "", wb / dbest[0] / 1e9, wb / dbest[1] / 1e9, median(ratio, nr),
                   dbest[1] / dbest[0], rbest[0] / 1e9, rbest[1] / 1e9, rbest[0] / rbest[1], wb / dbest[0] / rbest[0],
                   wb / dbest[1] / rbest[1], g, rg);
            fflush(stdout);
        }
    }
    hugemem_set_enabled(saved);
    return 0;
}

/* The prefill targets from the 512-token prefills' GEMM rates pf_rate (vnames order). */
/* Part 1's batch-1 targets from the best step times t_best[NV] of the weight dtypes dts[NV] at
 * context ctx, against the read ceiling rd. */
static void decode_verdicts(const model_config *cfg, int64_t ctx, const xf_dtype *dts, const double *t_best, double rd) {
    double a[NV];
    for (int k = 0; k < NV; k++) a[k] = decode_weight_bytes(cfg, dts[k], ctx) / t_best[k];
    verdict("fp32 decode bandwidth / measured read bandwidth", a[0] / rd, 0.85, 1, "");
    verdict("fp32 decode bandwidth / read ceiling (issue 20)", a[0] / rd, 0.90, 1, "");
    verdict("bf16 decode bandwidth / read ceiling (issue 20)", a[1] / rd, 0.90, 1, "");
    verdict("int8 decode bandwidth / read ceiling (issue 20)", a[2] / rd, 0.90, 1, "");
    verdict("bf16 rounded-input decode bandwidth / read ceiling", a[3] / rd, 0.90, 1, "");
    verdict("int8 decode tokens/s / fp32 (issue 20)", t_best[0] / t_best[2], 3.6, 1, "x");
}

static void prefill_verdicts(double peak, double gemm_flops, double gemm_s, double amx_bf16, const double *pf_rate, int own_amx) {
    verdict("fp32 prefill-512 GEMM FLOP/s / measured FP32 peak", gemm_s > 0 ? gemm_flops / gemm_s / peak : 0, 0.60, 1, "");
    verdict("bf16 prefill-512 GEMM FLOP/s / AMX BF16 peak (issue 20)", amx_bf16 > 0 ? pf_rate[1] / amx_bf16 : 0, 0.50, 1, "");
    if (amx_bf16 > 0 && (cpu_dnnl_bf16_here() || own_amx))
        printf("  (bf16 prefill: AMX does 3x the op's FLOPs on the 3-part input: %.3f of the AMX peak in AMX work)\n",
               3 * pf_rate[1] / amx_bf16);
    verdict("bf16 prefill-512 GEMM FLOP/s / fp32's (issue 20)", pf_rate[0] > 0 ? pf_rate[1] / pf_rate[0] : 0, 4.0, 1, "x");
    verdict("bf16 rounded-input prefill-512 GEMM FLOP/s / AMX BF16 peak", amx_bf16 > 0 ? pf_rate[3] / amx_bf16 : 0, 0.50, 1, "");
    verdict("bf16 rounded-input prefill-512 GEMM FLOP/s / fp32's", pf_rate[0] > 0 ? pf_rate[3] / pf_rate[0] : 0, 4.0, 1, "x");
    verdict("int8 prefill-512 GEMM FLOP/s / bf16's (issue 20)", pf_rate[1] > 0 ? pf_rate[2] / pf_rate[1] : 0, 1.5, 1, "x");
}

/* Part 3: the 512-token prefills of the variants bms (vnames order), interleaved, and with own AMX
 * tiles and oneDNN both here oneDNN's bf16 prefills beside them; each GEMM op's best. Out: pf_rate
 * (NV + 2: the two oneDNN entries last), fp32's GEMM FLOPs and seconds, the AMX BF16 peak now,
 * fp32's prefill time, whether the own tiles ran, and tps[0] (fp32's timer probe: the caller's to
 * free). Returns 0, or 2 after an error. */
#define NP (NV + 2)
static int prefill_section(const model_config *cfg, bench_model *bms, int threads, int quick, double *pf_rate, double *gemm_flops_o,
                           double *gemm_s_o, double *amx_bf16_o, double *t_prefill_o, int *own_amx_o, timer_probe **tp_o) {
    /* Prefill 512 of the three dtypes, interleaved: GEMM ops timed by the timer probe, each op's
     * best over the prefills. fp32 runs OpenBLAS sgemm; int8 the AMX tile kernel where granted, the
     * AVX-512 VNNI kernel without AMX (xk_a8_prefill), else sgemm on dequantized tiles of its
     * int8-grid input; bf16 oneDNN where built (cpu_dnnl.h:
     * AMX, three passes of the 3-part input). */
    /* entries NV and NV + 1: bf16 and bf16 rounded again with the own AMX tiles held off
     * (amx_avoid_bf16), i.e. through oneDNN where built, interleaved with the rest */
    timer_probe *tps[NP];
    for (int k = 0; k < NP; k++)
        if (timer_probe_init(cfg->n_layers, 4, 0, &tps[k]) != XF_OK) return die("timer");
    const int prefill_reps = quick ? 1 : 3;
    double t_prefill = 0;
    for (int k = 0; k < NV; k++) {
        int64_t l64 = 64;
        model_reset(bms[k].m);
        if (model_prefill(bms[k].m, 1, bms[k].prompt, &l64, NULL) != XF_OK) return die("prefill warm-up");
    }
    const int own_amx = amx_bf16_granted();
    for (int rep = 0; rep < prefill_reps; rep++)
        for (int k = 0; k < (own_amx && cpu_dnnl_bf16_here() ? NP : NV); k++) {
            int64_t l512 = 512;
            const int mk = k == NV ? 1 : k == NV + 1 ? 3 : k; /* the model this entry runs */
            probe_set psk = {1, {timer_probe_as_probe(tps[k])}};
            model_reset(bms[mk].m);
            timer_probe_rep_begin(tps[k]);
            amx_avoid_bf16(k >= NV);
            double t0 = timer_now_s();
            const xf_status ps512 = model_prefill(bms[mk].m, 1, bms[mk].prompt, &l512, &psk);
            double t = timer_now_s() - t0;
            amx_avoid_bf16(0);
            if (ps512 != XF_OK) return die("prefill 512");
            if (k == 0) t_prefill = rep == 0 || t < t_prefill ? t : t_prefill;
            if (timer_probe_rep_end(tps[k]) != XF_OK) return die("timer");
        }
    workload w;
    workload_default(&w);
    w.batch = 1;
    w.prompt = 512;
    w.gen = 0;
    w.wdtype = XF_FP32;
    w.adtype = XF_FP32;
    w.kvdtype = XF_FP32;
    int64_t nops = cost_step_op_count(cfg);
    cost_op *ops = calloc((size_t)nops, sizeof *ops);
    if (!ops || cost_step(cfg, &w, workload_prefill_step(&w), ops, nops) != XF_OK) return die("cost model");
    double gemm_flops = 0, gemm_s = 0;
    for (int k = 0; k < NP; k++) pf_rate[k] = 0;
    for (int k = 0; k < (own_amx && cpu_dnnl_bf16_here() ? NP : NV); k++) {
        double f = 0, sec = 0;
        for (int64_t i = 0; i < nops; i++) {
            if (!op_kind_is_gemm(ops[i].kind) || ops[i].kind == OP_LM_HEAD) continue; /* lm_head: 1 token in prefill */
            const double *smp;
            int ns = timer_probe_samples(tps[k], XF_PREFILL, ops[i].layer, ops[i].kind, &smp);
            if (ns < 1) continue;
            double b = smp[0]; /* each op's best of the prefills, as the peak is a best-of */
            for (int q = 1; q < ns; q++) b = smp[q] < b ? smp[q] : b;
            f += ops[i].flops;
            sec += b;
        }
        pf_rate[k] = sec > 0 ? f / sec : 0;
        if (k == 0) gemm_flops = f, gemm_s = sec;
        printf("%s prefill 512 (best of %d): GEMMs %.1f GFLOP in %.3f s -> %.1f GFLOP/s%s\n", k >= NV ? vnames[k == NV ? 1 : 3] : vnames[k],
               prefill_reps, f / 1e9, sec, pf_rate[k] / 1e9,
               k >= NV ? (k == NV ? " (oneDNN, beside the own tiles)" : " (oneDNN one pass, beside the own tiles)")
               : (k == 1 || k == 3) && own_amx ? (k == 1 ? " (own AMX tiles, 3 parts into one C)" : " (own AMX tiles, one part)")
               : k == 1 ? (cpu_dnnl_bf16_here() ? " (oneDNN)" : " (fp32 OpenBLAS: no oneDNN bf16 matmul in this build or on this CPU)")
               : k == 3 ? (cpu_dnnl_bf16_here() ? " (oneDNN, one pass)" : " (fp32 OpenBLAS: no oneDNN bf16 matmul in this build or on this CPU)")
               : k == 2 && xk_a8_amx() ? " (int8 AMX tiles, tdpbsud)"
               : k == 2 && xk_a8_prefill(xk_isa_best()) ? " (int8 inputs, AVX-512 VNNI vpdpbusd)" : " (fp32 OpenBLAS sgemm)");
    }
    if (own_amx && cpu_dnnl_bf16_here())
        printf("bf16 prefill GEMMs, own AMX tiles / oneDNN side by side: exact3 %.2fx, rounded %.2fx (the backend runs the own tiles)\n",
               pf_rate[NV] > 0 ? pf_rate[1] / pf_rate[NV] : 0, pf_rate[NV + 1] > 0 ? pf_rate[3] / pf_rate[NV + 1] : 0);
    free(ops);
    for (int k = 1; k < NP; k++) timer_probe_free(tps[k]);
    printf("bf16 prefill GEMM implementation: %s (%s)\n", cpu_dnnl_bf16_here() ? cpu_dnnl_last_impl() : "fp32 OpenBLAS", cpu_dnnl_describe());
    double amx_bf16 = 0, amx_int8 = 0;
    if (ceilings_amx_peak(threads, quick ? 2 : 4, &amx_bf16, &amx_int8) != XF_OK)
        printf("AMX peaks: not measured (%s)\n", xf_error_msg());
    else
        printf("AMX peaks now: BF16 %.1f GFLOP/s, INT8 %.1f GOP/s\n", amx_bf16 / 1e9, amx_int8 / 1e9);
    printf("fp32 prefill 512: %.2f s total\n", t_prefill);
    *gemm_flops_o = gemm_flops, *gemm_s_o = gemm_s, *amx_bf16_o = amx_bf16, *t_prefill_o = t_prefill, *own_amx_o = own_amx;
    *tp_o = tps[0];
    return 0;
}

int main(int argc, char **argv) {
    ceilings_env_reexec(argc, argv); /* OpenBLAS kernels and OpenMP waiting, set before they load */
    int threads = 2, steps = 8, quick = 0, attention_only = 0, batched_only = 0, prefill_only = 0, model_given = 0, huge_only = 0, decode_only = 0;
    const char *model_name = "tinyllama-1.1b";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--model") && i + 1 < argc) model_name = argv[++i], model_given = 1;
        else if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--attention")) attention_only = 1;
        else if (!strcmp(argv[i], "--batched")) batched_only = 1;
        else if (!strcmp(argv[i], "--prefill")) prefill_only = 1;
        else if (!strcmp(argv[i], "--huge-pages")) huge_only = 1;
        else if (!strcmp(argv[i], "--decode")) decode_only = 1;
        else {
            fprintf(stderr, "usage: bench_cpu [--threads N] [--steps N] [--model NAME] [--quick] [--attention] [--batched] [--prefill] [--huge-pages] [--decode]\n");
            return 2;
        }
    }
    /* --steps at most 300: part 1's blocks take about 4/3 steps of models that hold 520 tokens */
    if (threads < 1 || threads > 1024 || steps < 2 || steps > 300) {
        fprintf(stderr, "bench_cpu: --threads 1..1024, --steps 2..300\n");
        return 2;
    }
    char cpu[128];
    ceilings_cpu_model(cpu, sizeof cpu);
    printf("bench_cpu: %s, %ld online CPUs, %d threads, model %s, %s%s%s\n", cpu, sysconf(_SC_NPROCESSORS_ONLN), threads,
           model_name, openblas_get_config(), getenv("OPENBLAS_CORETYPE") ? ", OPENBLAS_CORETYPE=" : "",
           getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "");
    char omp_wait[256];
    omp_spin_describe(omp_wait, sizeof omp_wait);
    printf("OpenMP waiting: %s\n", omp_wait);
    printf("kernel choices for this CPU: %s (int8 one-token decode %d stream%s a thread, weight prefetch into %s)\n", xk_tune_name(),
           xk_a8_streams(), xk_a8_streams() == 1 ? "" : "s", xk_prefetch_to_l1 ? "L1" : "L2");
    model_config cfg;
    if (config_resolve(model_name, &cfg) != XF_OK) return die("model");

    /* Ceilings, now, in this run. */
    double llc = ceilings_llc_bytes();
    double ws = 4 * llc > 256.0 * 1048576 ? 4 * llc : 256.0 * 1048576;
    ceilings_bw rd;
    if (ceilings_bandwidth(CEIL_READ, ws, threads, quick ? 2 : 4, &rd) != XF_OK) return die("read bandwidth");
    double peak;
    char isa[16];
    if (ceilings_fp32_peak(threads, quick ? 2 : 4, &peak, isa, sizeof isa) != XF_OK) return die("fp32 peak");
    printf("ceilings: read %.2f GB/s over %.0f MiB (LLC %.0f MiB); FP32 peak %.1f GFLOP/s (%s)\n", rd.Bps / 1e9, ws / 1048576,
           llc / 1048576, peak / 1e9, isa);

    if (huge_only) /* --huge-pages: the side-by-side comparison alone, 8 layers (two models of each dtype at once) */
        return huge_pages_section(&cfg, threads, quick ? 4 : steps, 8, ws) ? 2 : 0;
    if (attention_only) {
        printf("\nresults (%s, %d threads):\n", model_name, threads);
        int rc = attention_section(&cfg, model_given, threads, quick, peak, ws);
        return rc ? rc : fails ? 1 : 0;
    }
    /* Decode of the weight variants, interleaved step by step. */
    const xf_dtype dts[NV] = {XF_FP32, XF_BF16, XF_INT8, XF_BF16};
    if (batched_only) {
        printf("\nresults (%s, %d threads):\n", model_name, threads);
        int rc = batched_section(&cfg, threads, steps, dts, ws, peak, &rd);
        return rc ? rc : fails ? 1 : 0;
    }
    bench_model bms[NV];
    double *dt_s[NV];
    for (int k = 0; k < NV; k++) {
        double t0 = timer_now_s();
        /* fp32 also runs the 512-token prefill below */
        const int64_t fp32_len = 520 > 16 + 8 * (int64_t)steps ? 520 : 16 + 8 * (int64_t)steps; /* probe pairs */
        /* every dtype runs the 512-token prefill below; fp32 also the probe pairs */
        if (open_model(&bms[k], &cfg, dts[k], v_inputs(k), threads, 512, k == 0 ? fp32_len : 520) != XF_OK)
            return die(vnames[k]);
        printf("%s model ready in %.1f s\n", vnames[k], timer_now_s() - t0);
        dt_s[k] = calloc((size_t)steps, sizeof(double));
        if (!dt_s[k]) return die("out of memory");
        int64_t len = 8;
        model_reset(bms[k].m);
        if (model_prefill(bms[k].m, 1, bms[k].prompt, &len, NULL) != XF_OK) return die("prefill");
        for (int w = 0; w < 2; w++) /* warm-up steps */
            if (model_decode_step(bms[k].m, NULL, NULL) != XF_OK) return die("decode warm-up");
    }
    if (prefill_only) { /* --prefill: part 3 alone */
        double pr[NP], gf, gs, ab, tpf;
        int oa;
        timer_probe *t1;
        if (prefill_section(&cfg, bms, threads, quick, pr, &gf, &gs, &ab, &tpf, &oa, &t1)) return 2;
        timer_probe_free(t1);
        for (int k = 0; k < NV; k++) model_free(bms[k].m), free(dt_s[k]);
        printf("\nresults (%s, %d threads):\n", model_name, threads);
        prefill_verdicts(peak, gf, gs, ab, pr, oa);
        return fails ? 1 : 0;
    }
    /* Each model's steps in blocks of consecutive steps, as `xfprof run` steps one model; the
     * models take turns block by block, so a neighbour's load still moves all of them alike. A
     * block's first step follows the other models' steps (some 9 GiB of their weights read since
     * this model's last step) and is timed apart: on this VM it measured up to 2.5x the steps that
     * follow it for int8 (docs/performance.md, the ninth session), a cost of the interleaving that
     * `xfprof run` never pays. */
    const int n_blk = (steps + DEC_RUN - 1) / DEC_RUN;
    double *sw_s[NV], flt[NV][2] = {{0}}, csw[NV][2] = {{0}}; /* [k][0]: blocks' first steps, [k][1]: the others */
    for (int k = 0; k < NV; k++)
        if (!(sw_s[k] = calloc((size_t)n_blk, sizeof(double)))) return die("out of memory");
    for (int b = 0; b < n_blk; b++)
        for (int k = 0; k < NV; k++)
            for (int i = -1; i < DEC_RUN && b * DEC_RUN + i < steps; i++) {
                struct rusage u0, u1; /* page faults and context switches: what a step costs the kernel */
                getrusage(RUSAGE_SELF, &u0);
                double t0 = timer_now_s();
                if (model_decode_step(bms[k].m, NULL, NULL) != XF_OK) return die("decode");
                *(i < 0 ? &sw_s[k][b] : &dt_s[k][b * DEC_RUN + i]) = timer_now_s() - t0;
                getrusage(RUSAGE_SELF, &u1);
                flt[k][i >= 0] += (double)(u1.ru_minflt - u0.ru_minflt + u1.ru_majflt - u0.ru_majflt);
                csw[k][i >= 0] += (double)(u1.ru_nvcsw - u0.ru_nvcsw + u1.ru_nivcsw - u0.ru_nivcsw);
            }
    double t_best[NV], t_med[NV], t_sw[NV];
    for (int k = 0; k < NV; k++) {
        t_best[k] = dt_s[k][0];
        for (int i = 1; i < steps; i++) t_best[k] = dt_s[k][i] < t_best[k] ? dt_s[k][i] : t_best[k];
        t_med[k] = median(dt_s[k], steps);
        t_sw[k] = median(sw_s[k], n_blk);
        free(dt_s[k]), free(sw_s[k]);
    }
    /* The read ceiling again, right after: a shared machine's neighbours move it by +-20% within
     * minutes; the ceiling is the best this run saw, as every ceiling is a best-of. */
    ceilings_bw rd2;
    if (ceilings_bandwidth(CEIL_READ, ws, threads, quick ? 2 : 4, &rd2) != XF_OK) return die("read bandwidth");
    printf("read bandwidth again after the decode: %.2f GB/s (ceiling used: %.2f GB/s)\n", rd2.Bps / 1e9,
           (rd2.Bps > rd.Bps ? rd2.Bps : rd.Bps) / 1e9);
    if (rd2.Bps > rd.Bps) rd = rd2;
    /* context during the timed steps: 8 prompt + 2 warm-up + about half the steps and blocks' first steps */
    const int64_t ctx = 10 + (steps + n_blk) / 2;
    for (int k = 0; k < NV; k++) {
        double wb = decode_weight_bytes(&cfg, dts[k], ctx);
        printf("%s decode: best %.1f ms/token (median %.1f), %.1f MiB of weights per token -> %.2f GB/s (median %.2f)\n",
               vnames[k], t_best[k] * 1e3, t_med[k] * 1e3, wb / 1048576, wb / t_best[k] / 1e9,
               wb / t_med[k] / 1e9);
    }
    printf("medians: bf16 %.2fx, int8 %.2fx the fp32 tokens/s\n", t_med[0] / t_med[1], t_med[0] / t_med[2]);
    printf("first step of a block, right after the other models' steps (information; not in the figures above): median");
    for (int k = 0; k < NV; k++) printf(" %s %.1f ms (%.2fx)%s", vnames[k], t_sw[k] * 1e3, t_sw[k] / t_med[k], k < NV - 1 ? "," : "\n");
    printf("  page faults / context switches a step (first of a block; the others):");
    for (int k = 0; k < NV; k++)
        printf(" %s %.1f / %.0f; %.1f / %.0f%s", vnames[k], flt[k][0] / n_blk, csw[k][0] / n_blk, flt[k][1] / steps, csw[k][1] / steps,
               k < NV - 1 ? "," : "\n");
    for (int k = 0; k < NV; k++) /* context: the steps above and these 12 */
        if (decode_accounting(&bms[k], &cfg, vnames[k], dts[k], ctx + (steps + n_blk) / 2 + 6, rd.Bps)) return 2;
    if (kernel_read_section(&cfg, threads, quick ? 5 : 9, rd.Bps)) return 2;
    if (decode_only) { /* --decode: part 1 alone */
        for (int k = 0; k < NV; k++) model_free(bms[k].m);
        printf("\nresults (%s, %d threads):\n", model_name, threads);
        decode_verdicts(&cfg, ctx, dts, t_best, rd.Bps);
        return fails ? 1 : 0;
    }
    if (a8_streams_section(&cfg, threads, quick ? 5 : 11, rd.Bps)) return 2;

    const double t_fp32 = t_best[0], t_bf16 = t_best[1], t_int8 = t_best[2];

    /* Token agreement with fp32: the same prompt, greedy, each dtype's first `agree_n` tokens. */
    const int agree_n = 32;
    int32_t toks[NV][32];
    for (int k = 0; k < NV; k++) {
        int64_t l8 = 8;
        model_reset(bms[k].m);
        if (model_prefill(bms[k].m, 1, bms[k].prompt, &l8, NULL) != XF_OK) return die("prefill");
        for (int i = 1; i < agree_n; i++)
            if (model_decode_step(bms[k].m, NULL, NULL) != XF_OK) return die("decode");
        int64_t ng;
        const int32_t *g = model_tokens(bms[k].m, 0, &ng);
        for (int i = 0; i < agree_n; i++) toks[k][i] = i < ng ? g[i] : -1;
    }
    for (int k = 1; k < NV; k++) {
        int same = 0, prefix = 0;
        for (int i = 0; i < agree_n; i++) same += toks[k][i] == toks[0][i];
        while (prefix < agree_n && toks[k][prefix] == toks[0][prefix]) prefix++;
        printf("token agreement %s vs fp32 (greedy, 8-token prompt, random weights): %d of %d equal, first %d identical\n",
               vnames[k], same, agree_n, prefix);
    }

    double pf_rate[NP], gemm_flops, gemm_s, amx_bf16, t_prefill;
    int own_amx;
    timer_probe *tp;
    if (prefill_section(&cfg, bms, threads, quick, pf_rate, &gemm_flops, &gemm_s, &amx_bf16, &t_prefill, &own_amx, &tp)) return 2;
    probe_set ps = {1, {timer_probe_as_probe(tp)}};
    for (int k = 1; k < NV; k++) model_free(bms[k].m);
    bench_model fm = bms[0];

    /* Probe overhead: pairs of adjacent decode steps, one with the probe and one without, the order
     * swapped every pair (off-on, on-off, ...) so neither side is always second. A neighbour only
     * ever slows a step (by up to +-30% here), so the overhead is the best probed step over the
     * best unprobed one, as every other figure here is a best-of; the median of the pairs'
     * ratios is printed beside it. */
    const int pairs = quick ? 4 : 4 * steps;
    double *off = calloc((size_t)pairs, sizeof *off), *on = calloc((size_t)pairs, sizeof *on);
    double *ratio = calloc((size_t)pairs, sizeof *ratio);
    if (!off || !on || !ratio) return die("out of memory");
    int64_t len = 8;
    model_reset(fm.m);
    if (model_prefill(fm.m, 1, fm.prompt, &len, NULL) != XF_OK) return die("prefill");
    timer_probe_clear(tp);
    timer_probe_rep_begin(tp);
    for (int i = 0; i < 2 * pairs; i++) {
        const int probed = (i % 2) ^ ((i / 2) % 2);
        double t0 = timer_now_s();
        if (model_decode_step(fm.m, NULL, probed ? &ps : NULL) != XF_OK) return die("decode, probes on / off");
        (probed ? on : off)[i / 2] = timer_now_s() - t0;
    }
    for (int k = 0; k < pairs; k++) ratio[k] = on[k] / off[k];
    double t_off = median(off, pairs), t_on = median(on, pairs), pair_med = median(ratio, pairs);
    double b_off = off[0], b_on = on[0];
    for (int k = 1; k < pairs; k++) {
        b_off = off[k] < b_off ? off[k] : b_off;
        b_on = on[k] < b_on ? on[k] : b_on;
    }
    const double overhead = b_on / b_off - 1;
    free(off);
    free(on);
    free(ratio);
    printf("decode with the timer probe: best %.2f ms/token off, %.2f ms/token on (medians %.2f / %.2f over %d steps each; "
           "median of the pairs' on/off %.4f); %.1f ns per range, %lld ranges per step\n",
           b_off * 1e3, b_on * 1e3, t_off * 1e3, t_on * 1e3, pairs, pair_med, timer_probe_overhead_s(tp) * 1e9, (long long)(cost_step_op_count(&cfg) + 1));
    timer_probe_free(tp);
    model_free(fm.m);
    /* batched decode after the batch-1 models are freed: NV models at a time, not 2 NV */
    double r16[NV];
    if (batched_points(&cfg, threads, steps, dts, ws, peak, &rd, r16)) return 2;

    printf("\nresults (%s, %d threads):\n", model_name, threads);
    /* issue 4's targets, then issue 20's (0.90 of the read ceiling for every dtype at batch 1,
     * int8 tokens/s >= 3.6x fp32, the probe <= 2% of a step) */
    decode_verdicts(&cfg, ctx, dts, t_best, rd.Bps);
    for (int k = 0; k < NV; k++) {
        char what[80];
        snprintf(what, sizeof what, "%s decode at batch 16: weights GB/s / read ceiling", vnames[k]);
        verdict(what, r16[k], 0.80, 1, "");
    }
    verdict("bf16 decode tokens/s / fp32", t_fp32 / t_bf16, 1.8, 1, "x");
    verdict("int8 decode tokens/s / fp32", t_fp32 / t_int8, 3.0, 1, "x");
    prefill_verdicts(peak, gemm_flops, gemm_s, amx_bf16, pf_rate, own_amx);
    verdict("decode time with timer probe / without - 1", 100 * overhead, 3.0, 0, "%");
    verdict("decode time with timer probe / without - 1 (issue 20)", 100 * overhead, 2.0, 0, "%");
    if (attention_section(&cfg, model_given, threads, quick, peak, ws)) return 2;
    return fails ? 1 : 0;
}
