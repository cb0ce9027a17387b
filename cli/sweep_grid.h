/* The parameter grid of `xfprof sweep`: every list flag parsed (comma lists and ranges, as
 * args_int_list takes them), then expanded into all combinations, each with a canonical key that
 * identifies the point in the sweep's JSONL (what --resume matches on). */
#ifndef XF_SWEEP_GRID_H
#define XF_SWEEP_GRID_H

#include <stdint.h>

#include "core/device.h"
#include "core/dtype.h"
#include "reference_model/config.h"
#include "core/workload.h"
#include "reference_model/kv_cache.h"

#define SWEEP_MAX_POINTS 100000
#define SWEEP_KEY_LEN 640
#define SWEEP_MAX_POLICIES 64

typedef struct sweep_grid {
    int predict;              /* 1: cost model; 0: measured through `xfprof run` */
    char **models;            /* (n_models) as given: preset names or config.json paths */
    int n_models;
    char **devices;           /* (n_devices) predict: device spec names; measured: cpu / cuda */
    int n_devices;
    char *device_file;        /* --device-file, or NULL */
    int64_t *batch, *prompt, *gen, *threads; /* (n_batch) ... */
    int n_batch, n_prompt, n_gen, n_threads;
    xf_dtype wd[XF_DTYPE_COUNT * 4], ad[XF_DTYPE_COUNT * 4], kv[XF_DTYPE_COUNT * 4];
    int n_wd, n_ad, n_kv;     /* n_ad / n_kv 0: derived from the weights (as predict does) */
    char **policies;          /* (n_policies) canonical kv policy names (the point keys) */
    int n_policies;
    kv_policy policy[SWEEP_MAX_POLICIES]; /* (n_policies) the same, typed: what the runner gets */
    int64_t group;            /* int8/int4 elements per scale, 0 = default */
    int reps;                 /* measured repetitions (default 5) */
    int warmup;               /* 1 warm-up repetition, 0 with --no-warmup */
    /* Split over devices (predict only; reference_model/cost_parallel.h): */
    int64_t *tp, *pp;         /* (n_tp), (n_pp) --tp, --pp lists; none given: 1 */
    int n_tp, n_pp;
    int micro_batches;        /* --micro-batches (0: 1) */
    int gpus;                 /* --gpus: devices available (0: tp * pp) */
} sweep_grid;

/* Defaults: predict 0, model stories15m, device h100-sxm (predict) or cpu (measured, set at
 * expansion), batch 1, prompt and gen from core/limits.h (128, 128), wdtype bf16 (predict) / fp32 (measured), threads 0
 * (all), policy paged:16, reps 5, warm-up 1. */
void sweep_grid_init(sweep_grid *g);
void sweep_grid_free(sweep_grid *g); /* NULL is fine */

/* Sets one list flag from its text: "--model", "--device", "--batch", "--prompt", "--gen",
 * "--threads", "--wdtype", "--adtype", "--kvdtype", "--kv-policy", "--tp", "--pp". XF_EINVAL naming the flag and
 * the bad item (and the accepted forms) otherwise; the grid keeps its earlier value then. */
xf_status sweep_grid_set(sweep_grid *g, const char *flag, const char *value);

typedef struct sweep_param {
    int model;          /* index into g->models */
    int device;         /* index into g->devices */
    workload wl;
    int threads;        /* 0 = all CPUs; measured only */
    int policy;         /* index into g->policies; measured only */
    char key[SWEEP_KEY_LEN]; /* canonical "mode=...;model=...;...": identifies the point */
    int tp, pp;         /* the split over devices (1, 1: one device; then left out of the key) */
} sweep_param;

/* Fills the defaults of the lists not given into *g, then lists all combinations, in the order
 * model, device, wdtype, adtype, kvdtype, policy, threads, prompt, gen, batch (batch fastest). In
 * predict mode threads and policies do not change a prediction: they are dropped (one dummy value,
 * left out of the key). Every model is resolved (config) and, in predict mode, every device looked
 * up, so a bad name fails before anything runs. *out (n) freed by the caller with free(). */
xf_status sweep_grid_expand(sweep_grid *g, sweep_param **out, int64_t *n);

/* The split of point p: its tp and pp, the grid's micro-batches and devices. */
struct parallel_plan;
void sweep_param_plan(const sweep_grid *g, const sweep_param *p, struct parallel_plan *out);

/* Canonical key of a point (what sweep_grid_expand writes into p->key). */
void sweep_param_key(const sweep_grid *g, const sweep_param *p, char *buf, size_t len);

#endif
