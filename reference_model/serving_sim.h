/* The serving simulator: a discrete-event simulation of a continuous-batching server over one
 * KV pool (kv_cache.h). Requests arrive, are admitted first-come-first-served while the pool
 * allows, grow one token per decode step and finish; when a running sequence cannot grow, the
 * newest running one is preempted (freed, recomputed later) or the sequence waits. Each step's
 * time comes from a step-time function: by default the cost model against a device's ceilings
 * (sim_cost in analyzers/kv.h). Results go into a record_kv_policy (core/record_kv.h).
 *
 * Token accounting: the prefill step writes the prompt's K/V and emits the first output token;
 * every decode step writes the K/V of the previous token and emits one more. A request with
 * output length n runs 1 prefill + (n - 1) decode steps and ends with prompt + n - 1 written
 * slots: its final_len for the manager. TTFT = end of its prefill step - arrival; TPOT = (end
 * of its last step - end of its prefill step) / (n - 1). */
#ifndef XF_SERVING_SIM_H
#define XF_SERVING_SIM_H

#include <stdint.h>

#include "core/record_kv.h"
#include "core/status.h"
#include "reference_model/config.h"
#include "kv_cache.h"
#include "core/workload.h"

/* ---- deterministic random numbers (xoshiro256**, seeded by splitmix64): the same trace on
 * every machine for a seed ---- */
typedef struct sim_rng {
    uint64_t s[4];
} sim_rng;

void sim_rng_seed(sim_rng *r, uint64_t seed);
uint64_t sim_rng_next(sim_rng *r);
double sim_rng_uniform(sim_rng *r); /* [0, 1) with 53 bits */
double sim_rng_normal(sim_rng *r);  /* standard normal (Box-Muller) */

/* ---- length distributions ---- */
typedef enum sim_dist_kind { SIM_DIST_FIXED = 0, SIM_DIST_UNIFORM, SIM_DIST_NORMAL, SIM_DIST_LOGNORMAL } sim_dist_kind;

typedef struct sim_dist {
    sim_dist_kind kind;
    double a; /* fixed: N; uniform: LO; normal: MEAN; lognormal: MU (of log length) */
    double b; /* uniform: HI; normal: STD; lognormal: SIGMA (of log length) */
} sim_dist;

/* "fixed:N", "uniform:LO:HI" (whole numbers, inclusive), "normal:MEAN:STD",
 * "lognormal:MU:SIGMA" (the length is exp(MU + SIGMA * z), so its median is exp(MU)).
 * Lengths are rounded to whole tokens and at least 1. XF_EINVAL naming `flag` otherwise. */
xf_status sim_dist_parse(const char *flag, const char *s, sim_dist *out);
void sim_dist_format(const sim_dist *d, char *buf, size_t len);
int64_t sim_dist_sample(const sim_dist *d, sim_rng *r);

/* ---- requests ---- */
typedef struct sim_request {
    int64_t id;     /* the trace file's line number, or 1-based index for synthetic requests */
    double arrival_s;
    int64_t prompt; /* tokens, >= 1 */
    int64_t output; /* tokens generated, >= 1 */
} sim_request;

typedef struct sim_trace {
    int64_t n;
    sim_request *req; /* (n) sorted by arrival; owned, sim_trace_free */
} sim_trace;

void sim_trace_free(sim_trace *t); /* frees req; NULL fine */

/* n synthetic requests: Poisson arrivals at `rate` per second (rate = INFINITY: all at time 0),
 * prompt and output lengths drawn from the distributions with `seed`. A request longer than
 * max_len keeps its prompt (cut to max_len - 1) and has its output cut so that
 * prompt + output <= max_len. XF_EINVAL for n < 1, rate <= 0 or NaN, max_len < 2. */
xf_status sim_trace_generate(int64_t n, double rate, const sim_dist *prompt, const sim_dist *output, uint64_t seed,
                             int64_t max_len, sim_trace *out);

/* Parses a trace: CSV lines "arrival_s,prompt,output" (an optional header line naming the
 * columns) or JSONL lines {"arrival":s,"prompt":n,"output":n}; blank lines and lines starting
 * with '#' are skipped. Every bad line is an XF_EPARSE / XF_EINVAL naming `source` and the line
 * number. Requests are sorted by arrival (stable). prompt + output must be <= max_len. */
xf_status sim_trace_parse(const char *text, const char *source, int64_t max_len, sim_trace *out);
xf_status sim_trace_load(const char *path, int64_t max_len, sim_trace *out);

/* ---- step time ---- */

/* One scheduler step: n_prefill prompts prefilled together (prefill_tokens in all, and
 * prefill_pairs causal (query, key) pairs: the sum of p (p + 1) / 2 over the prompts) and
 * n_decode sequences decoding one token each, attending over decode_context tokens in all. */
typedef struct sim_step {
    int64_t n_prefill;
    int64_t prefill_tokens;
    double prefill_pairs;
    int64_t n_decode;
    int64_t decode_context;
} sim_step;

/* Seconds for one step; must return a positive finite time for a non-empty step. */
typedef double (*sim_step_time_fn)(void *ctx, const sim_step *s);

/* The default step time, the cost model against a device's ceilings, is sim_cost in
 * analyzers/kv.h (the simulator itself takes any step-time function). */

/* ---- the simulation ---- */
typedef enum sim_preempt { SIM_PREEMPT_RECOMPUTE = 0, SIM_PREEMPT_WAIT } sim_preempt;

xf_status sim_preempt_parse(const char *s, sim_preempt *out);
const char *sim_preempt_name(sim_preempt p);

typedef struct sim_config {
    kv_cache_config kv;       /* the pool: model KV shape, dtype, budget, policy; kv.max_len is
                                 the reserve length (set to max_len when 0) */
    kv_cache_config kv_window;/* models mixing windowed and full-attention layers: the windowed
                                 layers' own pool (kv_window.n_layers > 0, kv_window.window > 0,
                                 same policy); kv then holds the full-attention layers. A request
                                 is admitted, grows and is preempted in both pools at once.
                                 n_layers 0: one pool (kv.window set when every layer is windowed) */
    int64_t max_len;          /* longest request allowed (prompt + output) */
    sim_preempt preempt;
    int64_t max_batch;        /* most sequences per step (0 = no limit) */
    int max_series;           /* time-series points kept (0 = 256); the series is decimated by
                                 merging neighbouring intervals, so each point is an exact
                                 time-average of its interval */
    sim_step_time_fn step_time;
    void *step_ctx;
    /* optional: called every 16 steps with the requests completed so far (a progress
     * line); NULL for none */
    void (*progress)(void *ctx, int64_t completed, int64_t n);
    void *progress_ctx;
} sim_config;

/* The pools of a model (sc->kv and sc->kv_window: layers, KV shape or latent row, window, dtype,
 * policy, budget). Full attention only: one pool. Every layer windowed: one pool with the window.
 * Mixed: two pools, the budget split in proportion to what a request of max_len holds in each,
 * n_full * max_len against n_windowed * min(window, max_len) (the layers' slots are the same size).
 * XF_EINVAL for an invalid config or budget. */
xf_status sim_pools_of_model(const model_config *m, xf_dtype kvdtype, int64_t budget_bytes, kv_policy policy, int64_t max_len,
                             sim_config *sc);

/* Bytes one token's KV takes over every layer of m in the pools of sim_pools_of_model: K and V
 * rows (or the latent row) per layer, rounded per slot as the pools do. 0 on invalid input. */
int64_t sim_bytes_per_token(const model_config *m, xf_dtype kvdtype);

/* Bytes of one sequence's KV at `context` tokens in those pools: every full-attention layer holds
 * the context, a windowed layer at most its window (what a paged pool keeps, less the partly
 * used blocks). 0 on invalid input. */
double sim_kv_bytes_at(const model_config *m, xf_dtype kvdtype, int64_t context);

/* Memory the simulation holds per request of the trace, in bytes (the trace entry, its state, the
 * queues and its two latencies), for the limit callers state before running. */
int64_t sim_bytes_per_request(void);

/* Runs the trace under cfg and fills *out (zeroed first; its arrays are owned by it: free with
 * record_kv_policy_clear). XF_EINVAL with a clear message when a request can never fit the pool
 * (it names the request and the sizes), when `wait` deadlocks (every running sequence waits
 * for memory that only they could free), or for invalid configs. */
xf_status sim_run(const sim_config *cfg, const sim_trace *trace, record_kv_policy *out);

#endif
