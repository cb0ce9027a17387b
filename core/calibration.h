/* A calibration table: the efficiency this machine achieves, per op family, weight dtype, memory
 * tier and shape, against a roofline's ceilings (runner/calibrate.c measures it, `xfprof machine
 * --calibrate` saves it in the machine file, analyzers/predict_calibrated.c interpolates it).
 *
 * An entry's efficiency is t_ref / t_measured, with t_ref = max(F / P, Q / B) against the ceilings
 * the table carries (P the peak of the op's compute type, B the DRAM read bandwidth, or the
 * in-cache read bandwidth when the model's weights fit in the last-level cache: the memory tier).
 * The table is saved as the "calibration" object of the machine file:
 *   {"format":"xfprof-calibration","version":5,"threads":2,"grid":"full","created":"...",
 *    "source":"...","dram_bandwidth_Bps":..,"cache_bandwidth_Bps":..,"cache_bytes":..,
 *    "omp_spin":"GOMP_SPINCOUNT=3000","omp_spin_by":"xfprof","fork_short_s":..,"fork_long_s":..,"fork_term":0,
 *    "peak_flops":{"fp32":..,"tensor16":..,"fp8":..,"int8":..},
 *    "entries":[{"family":"gemv","wdtype":"fp32","tier":"dram","x":..,"y":..,"z":..,"efficiency":..,"n":..}]}
 * Shape keys per family (analyzers/predict_calibrated.h): x a size (bytes or FLOPs; a GEMM's K),
 * y a second key (M for matrix ops, the intensity for attention; for element-wise ops the threads
 * they ran on), z a third (a GEMM's N; a gemv's working set: the model's weight bytes over the last-level cache; 1 for
 * every other family). gemv entries are always the dram tier (their reference is the DRAM read, so
 * an in-cache step shows as an efficiency above 1 at z below 1). Version 1 (no z, GEMMs keyed by
 * bytes) and version 2 (gemv tiered by a cache/DRAM cut, z = 1) are refused. Version 3 (no OpenMP
 * spin, no fork cost, rope's z = 1) still loads: its omp_spin is "" (unknown, said by run and
 * predict) and its fork costs 0. Version 5 keys the element-wise families by the threads the op ran
 * on as well (y: 1, or the run's threads above CPU_PAR_MIN); a version-3 or -4 table still loads:
 * its element-wise entries have y = 1 whatever their path, so an element-wise op on more than one
 * thread is predicted from them as before and counted as clamped (calibrate again to split them). */
#ifndef XF_CALIBRATION_H
#define XF_CALIBRATION_H

#include <stddef.h>

#include "core/device.h"
#include "core/dtype.h"
#include "core/status.h"

#define CALIB_FORMAT "xfprof-calibration"
#define CALIB_VERSION 5
#define CALIB_VERSION_MIN 3 /* the oldest version read */
#define CALIB_MAX_ENTRIES 65536

typedef enum calib_family {
    CALIB_GEMV = 0,     /* matrix op of a decode step (and the prefill's lm_head): x weight bytes, y M, z weights / LLC */
    CALIB_GEMM,         /* matrix op of a prefill step: x K (input features), y M (tokens), z N (output features) */
    CALIB_ATTN_DECODE,  /* decode attention: x KV bytes read (context x batch x kv heads x head_dim), y F/Q */
    CALIB_ATTN_PREFILL, /* prefill attention: x FLOPs (sequence length squared), y F/Q */
    CALIB_NORM,         /* attn_norm, ffn_norm, final_norm: x bytes */
    CALIB_ROPE,         /* x bytes */
    CALIB_SWIGLU,       /* x bytes */
    CALIB_RESIDUAL,     /* attn_residual, ffn_residual: x bytes */
    CALIB_KV_APPEND,    /* x bytes */
    CALIB_EMBEDDING,    /* x bytes */
    CALIB_SAMPLING,     /* x bytes */
    CALIB_FAMILY_COUNT
} calib_family;

typedef enum calib_tier { CALIB_TIER_DRAM = 0, CALIB_TIER_CACHE, CALIB_TIER_COUNT } calib_tier;

const char *calib_family_name(calib_family f); /* "gemv", "gemm", "attn_decode", ... */
xf_status calib_family_parse(const char *s, calib_family *out);
const char *calib_tier_name(calib_tier t);     /* "dram", "cache" */

typedef struct calib_entry {
    calib_family family;
    xf_dtype wdtype;    /* the run's weight dtype (fp32, bf16, int8) */
    calib_tier tier;
    double x, y;        /* shape keys, > 0 */
    double z;           /* third shape key, > 0: a GEMM's N; a gemv's model weights over the LLC; 1 otherwise */
    double efficiency;  /* t_ref / t_measured, > 0 (above 1 when the op beats the ceiling used) */
    int n;              /* measured ops merged into it (median) */
} calib_entry;

typedef struct calib_table {
    int n, cap;
    calib_entry *entries;         /* (n) owned; free with calib_table_free */
    int threads;                  /* threads it was measured with */
    char grid[16];                /* "full" or "quick" */
    char created[32];             /* ISO 8601 UTC */
    char source[256];             /* host, what was run, the unit the bf16 GEMMs run on */
    double dram_Bps, cache_Bps;   /* the reference ceilings: DRAM read and in-cache read */
    double cache_bytes;           /* last-level cache: weights up to it are the cache tier */
    double peak_flops[XF_COMPUTE_COUNT];
    /* The OpenMP waiting it was measured under (version 4; "" in a version-3 table: unknown):
     * the spin libgomp used ("GOMP_SPINCOUNT=3000"; "OMP_WAIT_POLICY=..." or "libgomp default"
     * when GOMP_SPINCOUNT was unset: probes/ceilings.h's omp_spin_in_force) and who set it: "xfprof" (chosen at start from the idle CPUs) or "user". */
    char omp_spin[48];
    char omp_spin_by[16];
    /* The fork/join of one empty OpenMP parallel region of `threads` threads under that spin
     * (version 4; 0: not measured), seconds: after a short serial gap (as between the ops of a
     * step) and after a long one (the other threads gone to sleep). */
    double fork_short_s, fork_long_s;
    /* 1: the fork term is on: each op's efficiency is of its time less fork_short_s per parallel
     * region it opens (predcal_regions) and the prediction adds them back; 0 (the default, and a
     * version-3 table): the forks stay inside the efficiencies (the term measured no better:
     * docs/verdicts.md, run 12). */
    int fork_term;
} calib_table;

void calib_table_init(calib_table *t);
void calib_table_free(calib_table *t); /* NULL is fine; leaves t empty (init'ed) */

/* Appends e (validated: positive finite keys and efficiency). XF_ENOMEM, XF_EINVAL. */
xf_status calib_table_add(calib_table *t, const calib_entry *e);

/* Merges entries of the same family, dtype, tier and keys (x, y, z) (relative difference under 1e-6) into
 * one with their median efficiency, n summed; sorts by (family, dtype, tier, y, z, x). */
void calib_table_merge(calib_table *t);

/* The table as a JSON object text (the "calibration" object above). Caller frees. NULL on OOM. */
char *calib_table_to_json(const calib_table *t);

/* Parses a "calibration" object (a cJSON). ctx names the file in messages. Every field is checked
 * (format, version, numbers positive and finite, names known, at most CALIB_MAX_ENTRIES entries):
 * XF_EINVAL naming the field otherwise. *out is init'ed by this call; free with calib_table_free. */
struct cJSON;
xf_status calib_table_from_json(const struct cJSON *o, const char *ctx, calib_table *out);

/* From a machine file's text: its "calibration" object. *present = 0 (and *out empty) when the
 * file has none; a malformed one is XF_EINVAL naming the file and the field. */
xf_status calib_table_parse_machine(const char *text, size_t len, const char *path, calib_table *out, int *present);

/* Reads the machine file at path and parses its calibration as above. XF_EIO when unreadable. */
xf_status calib_table_load_machine(const char *path, calib_table *out, int *present);

/* Whether a run under the OpenMP spin `spin` (omp_spin_in_force's descriptor: "GOMP_SPINCOUNT=200",
 * "OMP_WAIT_POLICY=passive", "libgomp default"; set by `by`: "xfprof", "user") is predicted by a
 * table measured under another: 1 when t's spin differs, 0 when it is the same, -1 when t does
 * not say (a version-3 table). msg gets one line (under 224 characters: a record env value) saying
 * which, and for 1 and -1 what to do. */
int calib_spin_check(const calib_table *t, const char *spin, const char *by, char *msg, size_t len);

/* Writes t into the machine file at path as its "calibration" object (replacing one already
 * there), atomically; the file must exist and be a devices file. */
xf_status calib_table_save_machine(const calib_table *t, const char *path);

#endif
