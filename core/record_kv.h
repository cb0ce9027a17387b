/* The record's KV section: the serving simulator's results per allocation policy (filled by
 * `xfprof kv`, reference_model/serving_sim.c). Every figure of `xfprof kv`'s table is here or is
 * recomputed from what is here (docs/kv.md says how). JSON form: reports/record_kv_json.c. */
#ifndef XF_RECORD_KV_H
#define XF_RECORD_KV_H

#include <stdint.h>

/* Where the pool's bytes are (the vLLM paper's breakdown); the five add up to the pool. */
typedef enum kv_category {
    KV_CAT_TOKEN = 0, /* token states: written K and V */
    KV_CAT_RESERVED,  /* held for tokens the request will still produce */
    KV_CAT_INTERNAL,  /* held, never to be used */
    KV_CAT_EXTERNAL,  /* free, but in extents too small for the waiting request */
    KV_CAT_FREE,      /* the other free bytes */
    KV_CAT_COUNT
} kv_category;

/* JSON keys: "token_states", "reserved", "internal", "external", "free". */
const char *kv_category_name(kv_category c);

/* One point of a time series: averages over the interval [t_s, t_s + dt_s). */
typedef struct record_kv_sample {
    double t_s;
    double dt_s;
    double share[KV_CAT_COUNT]; /* fractions of the pool, time-averaged over the interval */
    double batch;               /* sequences computed per step (prefills + decodes), time-averaged */
    double live;                /* live sequences in the pool, time-averaged */
} record_kv_sample;

#define RECORD_KV_PCT_COUNT 3 /* p50, p90, p99 */
extern const double record_kv_pcts[RECORD_KV_PCT_COUNT]; /* 0.50, 0.90, 0.99 */

/* One layer group's own pool (models mixing sliding-window and full-attention layers hold their
 * KV in one pool per group, docs/kv.md). */
#define RECORD_KV_MAX_GROUPS 2
typedef struct record_kv_group {
    int64_t n_layers;            /* layers whose KV the pool holds */
    int64_t window;              /* their sliding window, 0 for full attention */
    int64_t n_slots;             /* the pool in tokens */
    double pool_bytes;
    double share[KV_CAT_COUNT];  /* time-averaged fractions of this pool */
} record_kv_group;

typedef struct record_kv_policy {
    char policy[32];             /* "reserve", "pow2", "oracle", "paged:16" */
    int64_t n_slots;             /* the pool in tokens (whole blocks for paged) */
    int64_t block_tokens;        /* B for paged, 0 for contiguous */
    double pool_bytes;           /* n_slots * bytes_per_token */
    double share[KV_CAT_COUNT];  /* time-averaged fractions of the pool over the whole run */
    double bytes[KV_CAT_COUNT];  /* the same in bytes: share * pool_bytes */
    int64_t max_live;            /* most sequences in the pool at once */
    double mean_live;            /* time-averaged live sequences */
    int64_t max_batch;           /* most sequences in one step */
    double mean_batch;           /* time-averaged sequences per step (over busy time) */
    int64_t n_completed;
    int64_t preemptions;         /* sequences evicted (recompute) to let older ones grow */
    int64_t alloc_failures;      /* times the pool refused: the queue head's admission (once per step)
                                    or a running sequence's growth */
    int64_t n_steps;
    double duration_s;           /* first arrival to last completion */
    double busy_s;               /* time with at least one step running */
    double output_tokens;        /* tokens generated */
    double prompt_tokens;        /* prompt tokens prefilled (recomputed ones included) */
    double tokens_per_s;         /* output_tokens / duration_s */
    double requests_per_s;       /* n_completed / duration_s */
    double ttft_s[RECORD_KV_PCT_COUNT]; /* time to first token: p50, p90, p99 (nearest rank) */
    double tpot_s[RECORD_KV_PCT_COUNT]; /* time per output token after the first, same */
    double ttft_mean_s;
    double tpot_mean_s;
    int64_t n_requests_kept;     /* per-request latencies kept (0 when over RECORD_KV_MAX_PER_REQUEST) */
    double *req_ttft_s;          /* (n_requests_kept) in request order; owned */
    double *req_tpot_s;          /* (n_requests_kept) in request order, -1 for one-token outputs; owned */
    int64_t n_series;
    record_kv_sample *series;    /* (n_series) in time order, covering [0, duration_s]; owned */
    /* Added for windowed and latent-attention models (optional in JSON: written when a pool has
     * a window or there are two). With two groups n_slots is the first group's, pool_bytes the
     * sum, and share / bytes / series the byte-weighted whole. */
    int n_groups;                                 /* 0 (not recorded), 1 or 2 */
    record_kv_group groups[RECORD_KV_MAX_GROUPS]; /* (n_groups) full-attention layers first */
} record_kv_policy;

#define RECORD_KV_MAX_PER_REQUEST 10000 /* per-request latencies are kept up to this many requests */

typedef struct record_kv {
    double budget_bytes;         /* the KV budget given to every policy */
    int64_t bytes_per_token;     /* 2 * n_layers * n_kv_heads * head_dim * bytes(kvdtype) */
    char kvdtype[8];
    int64_t max_len;             /* longest request (prompt + output), and the reserve length */
    char arrivals[16];           /* "poisson", "burst" (all at 0) or "trace" */
    double rate;                 /* requests per second for poisson, else 0 */
    int64_t n_requests;
    char prompt_dist[64];        /* "lognormal:4.7:0.9", ... ("" for traces) */
    char output_dist[64];
    char trace_file[256];        /* "" for synthetic arrivals */
    uint64_t seed;
    char preempt[16];            /* "recompute" or "wait" */
    char step_model[64];         /* how step times were obtained ("cost-model roofline, ...") */
    double mean_prompt;          /* mean prompt tokens over the requests (0: not recorded) */
    double mean_output;          /* mean output tokens over the requests (0: not recorded) */
    int n_policies;
    record_kv_policy *policies;  /* (n_policies); owned */
} record_kv;

/* Frees what one policy entry owns (not the entry). NULL is fine. */
void record_kv_policy_clear(record_kv_policy *p);

/* Frees everything the section owns and the section itself. NULL is fine. */
void record_kv_free(record_kv *kv);

#endif
