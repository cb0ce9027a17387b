#include "kv_cache.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A free extent of the contiguous pool: slots [start, start + len). */
typedef struct kv_extent {
    int64_t start;
    int64_t len;
} kv_extent;

typedef struct kv_seq {
    int live;
    int next_free;   /* free-id list link when not live */
    int64_t len;     /* written positions */
    int64_t final;   /* what the request will reach (>= len) */
    int64_t cap;     /* slots held: region length, or n_entries * B */
    int32_t *table;  /* (table_cap) first slot of each logical block; contiguous: [0] = base */
    int64_t n_entries;
    int64_t table_cap;
    int32_t last;    /* paged: block id of the last entry (table[n_entries - 1] / B), -1 none */
    int64_t dead;    /* windowed paged: leading entries released (table entries -1); base = dead * B */
} kv_seq;

struct kv_cache {
    kv_cache_config cfg;
    int paged;
    int64_t B;        /* tokens per block (paged) */
    int64_t bps;      /* bytes per slot */
    int64_t n_slots;
    int64_t held;     /* slots held by live sequences (physical: a shared block once) */
    int64_t tok;      /* written slots (physical) */
    int64_t failures;
    int64_t res_sum;  /* sum over live sequences of seq_res(): reserved slots, counting shared blocks per owner */
    int64_t cap_sum;  /* sum over live sequences of cap: held slots, counting shared blocks per owner */
    int64_t n_shared; /* blocks with more than one reference */

    kv_seq *seqs;     /* (seq_cap) */
    int seq_cap;
    int free_id;      /* head of the free-id list, -1 none */
    int64_t live;

    /* paged */
    int64_t n_blocks;
    int32_t *ref;        /* (n_blocks) references from block tables */
    int32_t *used;       /* (n_blocks) written slots of the block */
    int32_t *free_stack; /* (n_blocks) free block ids; top at n_free - 1 */
    int64_t n_free;
    int64_t *scratch;    /* (n_blocks) zeroed; kv_cache_stats_get's per-block maximum; allocated by the
                            first fork (only shared blocks need it) */

    /* contiguous */
    kv_extent *ext;      /* (ext_cap) free extents sorted by start, coalesced */
    int64_t n_ext;
    int64_t ext_cap;

    kv_copy *copies;     /* (copy_cap) pending copies */
    int64_t n_copies;
    int64_t copy_cap;
};

/* ---- policy names ---- */

xf_status kv_policy_parse(const char *s, kv_policy *out) {
    if (!s) return xf_errorf(XF_EINVAL, "no KV policy given; use reserve, pow2, oracle, paged or paged:B");
    kv_policy p = {0, 0};
    if (strcasecmp(s, "reserve") == 0) p.kind = KV_POLICY_RESERVE;
    else if (strcasecmp(s, "pow2") == 0) p.kind = KV_POLICY_POW2;
    else if (strcasecmp(s, "oracle") == 0) p.kind = KV_POLICY_ORACLE;
    else if (strcasecmp(s, "paged") == 0) {
        p.kind = KV_POLICY_PAGED;
        p.block = KV_DEFAULT_BLOCK;
    } else if (strncasecmp(s, "paged:", 6) == 0) {
        const char *num = s + 6;
        char *end;
        long long b = strtoll(num, &end, 10);
        if (end == num || *end || b < 1 || b > KV_MAX_BLOCK)
            return xf_errorf(XF_EINVAL, "KV policy '%.64s': the block size after 'paged:' must be a whole number from 1 to %d",
                             s, KV_MAX_BLOCK);
        p.kind = KV_POLICY_PAGED;
        p.block = b;
    } else {
        return xf_errorf(XF_EINVAL, "unknown KV policy '%.64s'; use reserve, pow2, oracle, paged or paged:B (B tokens per block)", s);
    }
    *out = p;
    return XF_OK;
}

const char *kv_policy_name(const kv_policy *p, char *buf, size_t len) {
    if (!buf || len == 0) return buf;
    switch (p->kind) {
    case KV_POLICY_RESERVE: snprintf(buf, len, "reserve"); break;
    case KV_POLICY_POW2: snprintf(buf, len, "pow2"); break;
    case KV_POLICY_ORACLE: snprintf(buf, len, "oracle"); break;
    case KV_POLICY_PAGED: snprintf(buf, len, "paged:%lld", (long long)p->block); break;
    default: snprintf(buf, len, "?"); break;
    }
    return buf;
}

int64_t kv_bytes_per_slot(int64_t n_layers, int64_t n_kv_heads, int64_t head_dim, xf_dtype dtype, int quant_group) {
    if (n_layers <= 0 || n_kv_heads <= 0 || head_dim <= 0 || (int)dtype < 0 || dtype >= XF_DTYPE_COUNT) return 0;
    double kv_dim = (double)n_kv_heads * (double)head_dim;
    double row = dtype_bytes(dtype, kv_dim, head_dim, quant_group); /* one layer's K (or V) row */
    double b = 2.0 * (double)n_layers * ceil(row);
    if (!(b > 0) || b > 4e18) return 0;
    return (int64_t)b;
}

int64_t kv_bytes_per_latent_slot(int64_t n_layers, int64_t latent_dim, xf_dtype dtype, int quant_group) {
    if (n_layers <= 0 || latent_dim <= 0 || (int)dtype < 0 || dtype >= XF_DTYPE_COUNT) return 0;
    double b = (double)n_layers * ceil(dtype_bytes(dtype, (double)latent_dim, latent_dim, quant_group));
    if (!(b > 0) || b > 4e18) return 0;
    return (int64_t)b;
}

/* ---- small helpers ---- */

static int seq_ok(const kv_cache *kv, int id) {
    return kv && id >= 0 && id < kv->seq_cap && kv->seqs[id].live;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Slots a sequence holds that it will still write: min(final, end) - min(len, end), at least 0,
 * with end = base + cap the first position past what it holds (paged: its blocks; contiguous:
 * its region; a windowed ring's len may pass it). */
static int64_t seq_res(const kv_seq *s, int64_t B) {
    const int64_t end = s->dead * B + s->cap;
    int64_t r = (s->final < end ? s->final : end) - (s->len < end ? s->len : end);
    return r > 0 ? r : 0;
}

/* Written slots a sequence holds: len less the released blocks (paged), at most its region
 * (a contiguous ring). */
static int64_t seq_tok(const kv_seq *s, int64_t B) {
    const int64_t t = s->len - s->dead * B;
    return t < s->cap ? t : s->cap;
}

/* The sequence's contribution to res_sum and cap_sum: sign -1 before a change, +1 after. */
static void seq_account(kv_cache *kv, const kv_seq *s, int sign) {
    kv->res_sum += sign * seq_res(s, kv->B);
    kv->cap_sum += sign * s->cap;
}

static void ref_inc(kv_cache *kv, int32_t b) {
    if (++kv->ref[b] == 2) kv->n_shared++;
}

/* Drops one reference; returns the new count. */
static int32_t ref_dec(kv_cache *kv, int32_t b) {
    if (--kv->ref[b] == 1) kv->n_shared--;
    return kv->ref[b];
}

/* The first position past what a sequence can write without new slots: paged, its blocks'
 * end; contiguous, its region's (a windowed ring is handled by the callers: it never needs more
 * once it holds the window). */
static int64_t seq_end(const kv_cache *kv, const kv_seq *s) { return s->dead * kv->B + s->cap; }

/* 1 when a contiguous region is a full ring: it holds the window, new positions overwrite the
 * oldest. */
static int seq_ring(const kv_cache *kv, const kv_seq *s) {
    return !kv->paged && kv->cfg.window > 0 && s->cap >= kv->cfg.window;
}

/* Windowed paged pools: releases the leading blocks no later query sees. The next query sits at
 * position len and sees keys len - window + 1 .. len, so block e is dead once (e + 1) B <=
 * len - window + 1; the last block (the newest position) is always kept. The caller brackets
 * this with seq_account. */
static void window_release_now(kv_cache *kv, kv_seq *s) {
    if (!kv->paged || kv->cfg.window <= 0) return;
    const int64_t B = kv->B, first_seen = s->len - kv->cfg.window + 1;
    while (s->dead < s->n_entries - 1 && (s->dead + 1) * B <= first_seen) {
        int32_t b = s->table[s->dead] / (int32_t)B;
        if (ref_dec(kv, b) == 0) {
            kv->tok -= kv->used[b];
            kv->used[b] = 0;
            kv->held -= B;
            kv->free_stack[kv->n_free++] = b;
        }
        s->table[s->dead++] = -1;
        s->cap -= B;
    }
}

/* Admission and append: the simulator releases at once; an engine's deferred pool waits for
 * kv_cache_release_window. */
static void window_release(kv_cache *kv, kv_seq *s) {
    if (!kv->cfg.window_deferred) window_release_now(kv, s);
}

static int64_t next_pow2(int64_t x) {
    int64_t p = 1;
    while (p < x && p <= INT64_MAX / 2) p *= 2;
    return p < x ? -1 : p;
}

static xf_status push_copy(kv_cache *kv, int64_t src, int64_t dst, int64_t n) {
    if (n <= 0) return XF_OK;
    if (kv->n_copies == kv->copy_cap) {
        int64_t nc = kv->copy_cap ? kv->copy_cap * 2 : 16;
        kv_copy *c = realloc(kv->copies, (size_t)nc * sizeof *c);
        if (!c) return xf_errorf(XF_ENOMEM, "out of memory recording a KV copy");
        kv->copies = c;
        kv->copy_cap = nc;
    }
    kv->copies[kv->n_copies++] = (kv_copy){src, dst, n};
    return XF_OK;
}

/* Makes room for `need` entries in a sequence's table (doubling: O(1) amortized). */
static xf_status table_reserve(kv_seq *s, int64_t need) {
    if (need <= s->table_cap) return XF_OK;
    int64_t nc = s->table_cap ? s->table_cap : 4;
    while (nc < need) nc *= 2;
    int32_t *t = realloc(s->table, (size_t)nc * sizeof *t);
    if (!t) return xf_errorf(XF_ENOMEM, "out of memory growing a KV block table to %lld entries", (long long)nc);
    s->table = t;
    s->table_cap = nc;
    return XF_OK;
}

/* A free sequence id, growing the array when needed; -1 on OOM. */
static int take_id(kv_cache *kv) {
    if (kv->free_id < 0) {
        if (kv->seq_cap >= INT_MAX / 2) return -1;
        int nc = kv->seq_cap ? kv->seq_cap * 2 : 16;
        kv_seq *s = realloc(kv->seqs, (size_t)nc * sizeof *s);
        if (!s) return -1;
        memset(s + kv->seq_cap, 0, (size_t)(nc - kv->seq_cap) * sizeof *s);
        for (int i = nc - 1; i >= kv->seq_cap; i--) {
            s[i].next_free = kv->free_id;
            kv->free_id = i;
        }
        kv->seqs = s;
        kv->seq_cap = nc;
    }
    int id = kv->free_id;
    kv->free_id = kv->seqs[id].next_free;
    kv_seq *q = &kv->seqs[id];
    q->live = 1;
    q->len = q->final = q->cap = q->dead = 0;
    q->n_entries = 0;
    q->last = -1;
    kv->live++;
    return id;
}

static void release_id(kv_cache *kv, int id) {
    kv_seq *q = &kv->seqs[id];
    q->live = 0;
    q->len = q->final = q->cap = q->dead = 0;
    q->n_entries = 0; /* the table's memory is kept for the next user of the id */
    q->last = -1;
    q->next_free = kv->free_id;
    kv->free_id = id;
    kv->live--;
}

/* ---- contiguous extents ---- */

/* Index of the first extent with start >= pos. */
static int64_t ext_lower(const kv_cache *kv, int64_t pos) {
    int64_t lo = 0, hi = kv->n_ext;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (kv->ext[mid].start < pos) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* First fit: index of the first extent holding n slots, -1 none. */
static int64_t ext_first_fit(const kv_cache *kv, int64_t n) {
    for (int64_t i = 0; i < kv->n_ext; i++)
        if (kv->ext[i].len >= n) return i;
    return -1;
}

static void ext_remove(kv_cache *kv, int64_t i) {
    memmove(kv->ext + i, kv->ext + i + 1, (size_t)(kv->n_ext - i - 1) * sizeof *kv->ext);
    kv->n_ext--;
}

/* Takes n slots from the front of extent i. */
static int64_t ext_take_front(kv_cache *kv, int64_t i, int64_t n) {
    int64_t base = kv->ext[i].start;
    kv->ext[i].start += n;
    kv->ext[i].len -= n;
    if (kv->ext[i].len == 0) ext_remove(kv, i);
    return base;
}

/* Room for the free extents after one more region: there are at most live + 1 extents (they are
 * separated by regions), so keeping ext_cap >= live + 2 lets ext_release never fail. */
static xf_status ext_reserve(kv_cache *kv) {
    int64_t need = kv->live + 3;
    if (kv->paged || kv->ext_cap >= need) return XF_OK;
    int64_t nc = kv->ext_cap * 2 > need ? kv->ext_cap * 2 : need;
    kv_extent *e = realloc(kv->ext, (size_t)nc * sizeof *e);
    if (!e) return xf_errorf(XF_ENOMEM, "out of memory for the KV extent list");
    kv->ext = e;
    kv->ext_cap = nc;
    return XF_OK;
}

/* Returns [start, start + len) to the free extents, coalescing with its neighbours (room is
 * there: ext_reserve). */
static void ext_release(kv_cache *kv, int64_t start, int64_t len) {
    if (len <= 0) return;
    int64_t i = ext_lower(kv, start);
    int merge_prev = i > 0 && kv->ext[i - 1].start + kv->ext[i - 1].len == start;
    int merge_next = i < kv->n_ext && start + len == kv->ext[i].start;
    if (merge_prev && merge_next) {
        kv->ext[i - 1].len += len + kv->ext[i].len;
        ext_remove(kv, i);
    } else if (merge_prev) {
        kv->ext[i - 1].len += len;
    } else if (merge_next) {
        kv->ext[i].start = start;
        kv->ext[i].len += len;
    } else {
        memmove(kv->ext + i + 1, kv->ext + i, (size_t)(kv->n_ext - i) * sizeof *kv->ext);
        kv->ext[i] = (kv_extent){start, len};
        kv->n_ext++;
    }
}

/* ---- init / free ---- */

xf_status kv_cache_init(kv_cache **out, const kv_cache_config *cfg) {
    if (!out || !cfg) return xf_errorf(XF_EINVAL, "kv_cache_init: NULL argument");
    *out = NULL;
    if (cfg->n_layers <= 0 || cfg->n_layers > 100000) return xf_errorf(XF_EINVAL, "KV cache: n_layers %lld must be 1..100000", (long long)cfg->n_layers);
    if (cfg->latent_dim < 0 || cfg->latent_dim > 1000000)
        return xf_errorf(XF_EINVAL, "KV cache: latent_dim %lld must be 0..1000000", (long long)cfg->latent_dim);
    if (cfg->window < 0 || cfg->window > INT32_MAX)
        return xf_errorf(XF_EINVAL, "KV cache: window %lld must be 0..%d", (long long)cfg->window, INT32_MAX);
    if (cfg->latent_dim == 0 && (cfg->n_kv_heads <= 0 || cfg->n_kv_heads > 100000)) return xf_errorf(XF_EINVAL, "KV cache: n_kv_heads %lld must be 1..100000", (long long)cfg->n_kv_heads);
    if (cfg->latent_dim == 0 && (cfg->head_dim <= 0 || cfg->head_dim > 100000)) return xf_errorf(XF_EINVAL, "KV cache: head_dim %lld must be 1..100000", (long long)cfg->head_dim);
    if ((int)cfg->dtype < 0 || cfg->dtype >= XF_DTYPE_COUNT) return xf_errorf(XF_EINVAL, "KV cache: unknown dtype %d", (int)cfg->dtype);
    if (cfg->quant_group < 0) return xf_errorf(XF_EINVAL, "KV cache: quant_group %d must be >= 0", cfg->quant_group);
    const kv_policy *p = &cfg->policy;
    if ((int)p->kind < 0 || p->kind >= KV_POLICY_COUNT) return xf_errorf(XF_EINVAL, "KV cache: unknown policy %d", (int)p->kind);
    if (p->kind == KV_POLICY_PAGED && (p->block < 1 || p->block > KV_MAX_BLOCK))
        return xf_errorf(XF_EINVAL, "KV cache: block size %lld must be 1..%d", (long long)p->block, KV_MAX_BLOCK);
    if (cfg->max_len < 0) return xf_errorf(XF_EINVAL, "KV cache: max_len %lld must be >= 0", (long long)cfg->max_len);
    int64_t bps = cfg->latent_dim > 0 ? kv_bytes_per_latent_slot(cfg->n_layers, cfg->latent_dim, cfg->dtype, cfg->quant_group)
                                      : kv_bytes_per_slot(cfg->n_layers, cfg->n_kv_heads, cfg->head_dim, cfg->dtype, cfg->quant_group);
    if (bps <= 0) return xf_errorf(XF_EINVAL, "KV cache: bytes per token overflow");
    if (cfg->budget_bytes <= 0) return xf_errorf(XF_EINVAL, "KV cache: budget %lld bytes must be positive", (long long)cfg->budget_bytes);
    int paged = p->kind == KV_POLICY_PAGED;
    int64_t unit = paged ? p->block : 1;
    int64_t n_slots = cfg->budget_bytes / bps;
    n_slots -= n_slots % unit;
    if (n_slots < unit)
        return xf_errorf(XF_EINVAL, "KV cache: a budget of %lld bytes holds no %s (one token takes %lld bytes); give a larger budget",
                         (long long)cfg->budget_bytes, paged ? "block" : "token", (long long)bps);
    if (n_slots > INT32_MAX) {
        n_slots = INT32_MAX - INT32_MAX % unit; /* block tables are int32: the rest of the budget stays outside */
    }

    kv_cache *kv = calloc(1, sizeof *kv);
    if (!kv) return xf_errorf(XF_ENOMEM, "out of memory creating the KV cache");
    kv->cfg = *cfg;
    kv->paged = paged;
    kv->B = paged ? p->block : 0;
    kv->bps = bps;
    kv->n_slots = n_slots;
    kv->free_id = -1;
    if (paged) {
        kv->n_blocks = n_slots / kv->B;
        size_t nb = (size_t)kv->n_blocks;
        kv->ref = calloc(nb, sizeof *kv->ref);
        kv->used = calloc(nb, sizeof *kv->used);
        kv->free_stack = malloc(nb * sizeof *kv->free_stack);
        if (!kv->ref || !kv->used || !kv->free_stack) {
            kv_cache_free(kv); /* the count comes from nb: kv is gone */
            return xf_errorf(XF_ENOMEM, "out of memory for %lld KV blocks", (long long)nb);
        }
        /* Pops give blocks 0, 1, 2, ... on a fresh pool. */
        for (int64_t i = 0; i < kv->n_blocks; i++) kv->free_stack[i] = (int32_t)(kv->n_blocks - 1 - i);
        kv->n_free = kv->n_blocks;
    } else {
        kv->ext_cap = 16; /* grows with the live sequences (ext_reserve) */
        kv->ext = malloc((size_t)kv->ext_cap * sizeof *kv->ext);
        if (!kv->ext) {
            kv_cache_free(kv);
            return xf_errorf(XF_ENOMEM, "out of memory for the KV extent list");
        }
        kv->ext[0] = (kv_extent){0, n_slots};
        kv->n_ext = 1;
    }
    *out = kv;
    return XF_OK;
}

void kv_cache_free(kv_cache *kv) {
    if (!kv) return;
    for (int i = 0; i < kv->seq_cap; i++) free(kv->seqs[i].table);
    free(kv->seqs);
    free(kv->ref);
    free(kv->used);
    free(kv->free_stack);
    free(kv->scratch);
    free(kv->ext);
    free(kv->copies);
    free(kv);
}

int64_t kv_cache_n_slots(const kv_cache *kv) { return kv ? kv->n_slots : 0; }
int64_t kv_cache_bytes_per_slot(const kv_cache *kv) { return kv ? kv->bps : 0; }
int64_t kv_cache_block_tokens(const kv_cache *kv) { return kv ? kv->B : 0; }
const kv_policy *kv_cache_policy(const kv_cache *kv) { return kv ? &kv->cfg.policy : NULL; }

/* ---- admission ---- */

/* A contiguous region's slots: at most the window (a ring), when the pool has one. */
static int64_t win_cap(const kv_cache *kv, int64_t slots) {
    return kv->cfg.window > 0 && slots > kv->cfg.window ? kv->cfg.window : slots;
}

int64_t kv_cache_admit_slots(const kv_cache *kv, int64_t prompt_len, int64_t final_len, int64_t max_len) {
    if (!kv || prompt_len < 0 || final_len < 1 || final_len < prompt_len) return -1;
    switch (kv->cfg.policy.kind) {
    case KV_POLICY_RESERVE: {
        int64_t m = max_len > 0 ? max_len : kv->cfg.max_len;
        if (m <= 0 || final_len > m) return -1;
        return win_cap(kv, m);
    }
    case KV_POLICY_POW2: {
        int64_t p = next_pow2(final_len);
        return p < 0 ? -1 : win_cap(kv, p);
    }
    case KV_POLICY_ORACLE: return win_cap(kv, final_len);
    case KV_POLICY_PAGED:
        if (prompt_len > INT64_MAX - kv->B) return -1;
        return ceil_div(prompt_len, kv->B) * kv->B;
    default: return -1;
    }
}

static int fits_now(const kv_cache *kv, int64_t slots) {
    if (slots <= 0) return 1;
    if (kv->paged) return slots / kv->B <= kv->n_free;
    return ext_first_fit(kv, slots) >= 0;
}

int kv_cache_can_add(const kv_cache *kv, int64_t prompt_len, int64_t final_len, int64_t max_len) {
    int64_t need = kv_cache_admit_slots(kv, prompt_len, final_len, max_len);
    return need >= 0 && fits_now(kv, need);
}

static int64_t largest_free(const kv_cache *kv) {
    if (kv->paged) return kv->n_free * kv->B;
    int64_t m = 0;
    for (int64_t i = 0; i < kv->n_ext; i++)
        if (kv->ext[i].len > m) m = kv->ext[i].len;
    return m;
}

static xf_status full(kv_cache *kv, const char *what, int64_t slots) {
    kv->failures++;
    return xf_errorf(KV_CACHE_FULL, "KV pool full: %s needs %lld more slots (%lld of %lld free, largest %s %lld)", what,
                     (long long)slots, (long long)(kv->n_slots - kv->held), (long long)kv->n_slots,
                     kv->paged ? "admissible" : "free extent", (long long)largest_free(kv));
}

xf_status kv_cache_add_seq(kv_cache *kv, int64_t prompt_len, int64_t final_len, int64_t max_len, int *seq_id) {
    if (!kv || !seq_id) return xf_errorf(XF_EINVAL, "kv_cache_add_seq: NULL argument");
    int64_t need = kv_cache_admit_slots(kv, prompt_len, final_len, max_len);
    if (need < 0) {
        int64_t m = max_len > 0 ? max_len : kv->cfg.max_len;
        if (kv->cfg.policy.kind == KV_POLICY_RESERVE && final_len > m && prompt_len >= 0 && final_len >= prompt_len)
            return xf_errorf(XF_EINVAL, "request of final length %lld exceeds the reserve length %lld", (long long)final_len, (long long)m);
        return xf_errorf(XF_EINVAL, "invalid request lengths: prompt %lld, final %lld (need 0 <= prompt <= final, final >= 1)",
                         (long long)prompt_len, (long long)final_len);
    }
    if (need > kv->n_slots) {
        kv->failures++;
        return xf_errorf(KV_CACHE_FULL, "request needs %lld KV slots but the whole pool has %lld: it can never be admitted",
                         (long long)need, (long long)kv->n_slots);
    }
    if (!fits_now(kv, need)) return full(kv, "admission", need);
    if (ext_reserve(kv) != XF_OK) return XF_ENOMEM;
    int id = take_id(kv);
    if (id < 0) return xf_errorf(XF_ENOMEM, "out of memory for a new KV sequence");
    kv_seq *s = &kv->seqs[id];
    if (kv->paged) {
        int64_t nb = need / kv->B;
        if (table_reserve(s, nb > 0 ? nb : 1) != XF_OK) {
            release_id(kv, id);
            return XF_ENOMEM;
        }
        for (int64_t i = 0; i < nb; i++) {
            int32_t b = kv->free_stack[--kv->n_free];
            kv->ref[b] = 1;
            int64_t filled = prompt_len - i * kv->B;
            kv->used[b] = (int32_t)(filled >= kv->B ? kv->B : filled);
            s->table[i] = (int32_t)(b * kv->B);
        }
        s->n_entries = nb;
        s->last = nb > 0 ? s->table[nb - 1] / (int32_t)kv->B : -1;
    } else {
        if (table_reserve(s, 1) != XF_OK) {
            release_id(kv, id);
            return XF_ENOMEM;
        }
        int64_t i = ext_first_fit(kv, need);
        s->table[0] = (int32_t)ext_take_front(kv, i, need);
        s->n_entries = 1;
    }
    s->cap = need;
    s->len = prompt_len;
    s->final = final_len;
    kv->held += need;
    kv->tok += seq_tok(s, kv->B); /* a ring keeps the prompt's last `window` positions */
    window_release(kv, s);
    seq_account(kv, s, +1);
    *seq_id = id;
    return XF_OK;
}

/* ---- growth ---- */

/* Extra slots an append of n tokens takes; for paged also whether the last block is copied. */
static int64_t append_need(const kv_cache *kv, const kv_seq *s, int64_t n, int *cow) {
    *cow = 0;
    int64_t new_len = s->len + n;
    if (kv->paged) {
        int64_t nb = ceil_div(new_len, kv->B) - s->n_entries;
        if (nb < 0) nb = 0;
        if (s->len % kv->B != 0 && s->n_entries > 0) {
            int32_t last = s->table[s->n_entries - 1] / (int32_t)kv->B;
            if (kv->ref[last] > 1) *cow = 1;
        }
        return (nb + *cow) * kv->B;
    }
    if (seq_ring(kv, s)) return 0;
    int64_t target = win_cap(kv, new_len);
    return target > s->cap ? target - s->cap : 0;
}

/* Contiguous in-place extension: index of the free extent right after the region, holding
 * `more` slots; -1 none. */
static int64_t ext_after(const kv_cache *kv, const kv_seq *s, int64_t more) {
    int64_t end = s->table[0] + s->cap;
    int64_t i = ext_lower(kv, end);
    if (i < kv->n_ext && kv->ext[i].start == end && kv->ext[i].len >= more) return i;
    return -1;
}

int kv_cache_can_append(const kv_cache *kv, int seq_id, int64_t n_tokens) {
    if (!seq_ok(kv, seq_id) || n_tokens < 0) return 0;
    const kv_seq *s = &kv->seqs[seq_id];
    if (n_tokens == 1) { /* the decode step's case, without divisions */
        if (s->len < seq_end(kv, s)) return !kv->paged || kv->ref[s->last] == 1 || kv->n_free > 0;
        if (kv->paged) return kv->n_free > 0;
        if (seq_ring(kv, s)) return 1;
    }
    if (n_tokens > INT32_MAX || (kv->cfg.window == 0 && s->len + n_tokens > kv->n_slots)) return 0;
    int cow;
    int64_t need = append_need(kv, s, n_tokens, &cow);
    if (need == 0) return 1;
    if (kv->paged) return need / kv->B <= kv->n_free;
    if (s->cap == 0) return ext_first_fit(kv, need) >= 0;
    return ext_after(kv, s, need) >= 0;
}

static xf_status paged_append(kv_cache *kv, kv_seq *s, int64_t n, int cow) {
    int64_t B = kv->B;
    int64_t new_len = s->len + n;
    int64_t nb_new = ceil_div(new_len, B);
    xf_status st = table_reserve(s, nb_new > 0 ? nb_new : 1);
    if (st != XF_OK) return st;
    if (cow) {
        /* The last block is shared and partly filled: copy it before writing. */
        st = push_copy(kv, 0, 0, 1); /* room first, so nothing below can fail half-way */
        if (st != XF_OK) return st;
        kv->n_copies--;
        int64_t e = s->n_entries - 1;
        int32_t old = s->table[e] / (int32_t)B;
        int32_t nw = kv->free_stack[--kv->n_free];
        int64_t filled = s->len % B;
        ref_dec(kv, old);
        kv->ref[nw] = 1;
        kv->used[nw] = (int32_t)filled;
        kv->tok += filled;
        kv->held += B;
        s->table[e] = (int32_t)(nw * B);
        push_copy(kv, (int64_t)old * B, (int64_t)nw * B, filled);
    }
    /* Fill the last block, then new blocks. */
    int64_t pos = s->len;
    while (pos < new_len) {
        int64_t e = pos / B;
        if (e >= s->n_entries) {
            int32_t b = kv->free_stack[--kv->n_free];
            kv->ref[b] = 1;
            kv->used[b] = 0;
            s->table[e] = (int32_t)(b * B);
            s->n_entries = e + 1;
            kv->held += B;
        }
        int32_t b = s->table[e] / (int32_t)B;
        int64_t room = (e + 1) * B - pos;
        int64_t take = new_len - pos < room ? new_len - pos : room;
        kv->used[b] += (int32_t)take;
        kv->tok += take;
        pos += take;
    }
    s->cap = (s->n_entries - s->dead) * B;
    s->len = new_len;
    s->last = s->n_entries > 0 ? s->table[s->n_entries - 1] / (int32_t)B : -1;
    window_release(kv, s);
    return XF_OK;
}

xf_status kv_cache_append(kv_cache *kv, int seq_id, int64_t n_tokens) {
    if (!seq_ok(kv, seq_id)) return xf_errorf(XF_EINVAL, "kv_cache_append: unknown sequence %d", seq_id);
    if (n_tokens < 0 || n_tokens > INT32_MAX) return xf_errorf(XF_EINVAL, "kv_cache_append: %lld tokens out of range", (long long)n_tokens);
    kv_seq *s = &kv->seqs[seq_id];
    if (n_tokens == 1 && s->len < seq_end(kv, s) && (!kv->paged || kv->ref[s->last] == 1)) {
        /* the decode step's case: a free slot in the region or the (unshared) last block */
        seq_account(kv, s, -1);
        if (kv->paged) kv->used[s->last]++;
        s->len++;
        kv->tok++;
        if (s->final < s->len) s->final = s->len;
        window_release(kv, s);
        seq_account(kv, s, +1);
        return XF_OK;
    }
    if (kv->cfg.window == 0 && s->len + n_tokens > kv->n_slots) {
        kv->failures++;
        return xf_errorf(KV_CACHE_FULL, "sequence of %lld tokens cannot grow by %lld: the whole pool has %lld slots",
                         (long long)s->len, (long long)n_tokens, (long long)kv->n_slots);
    }
    if (!kv_cache_can_append(kv, seq_id, n_tokens)) {
        int cow;
        return full(kv, "append", append_need(kv, s, n_tokens, &cow));
    }
    if (n_tokens == 0) return XF_OK;
    int cow;
    int64_t need = append_need(kv, s, n_tokens, &cow);
    seq_account(kv, s, -1);
    const int64_t tok_before = seq_tok(s, kv->B);
    if (kv->paged) {
        xf_status st = paged_append(kv, s, n_tokens, cow);
        if (st != XF_OK) {
            seq_account(kv, s, +1);
            return st;
        }
    } else if (need > 0) {
        if (s->cap == 0) { /* cannot happen: contiguous regions are never empty (final >= 1) */
            int64_t i = ext_first_fit(kv, need);
            s->table[0] = (int32_t)ext_take_front(kv, i, need);
            s->n_entries = 1;
        } else {
            ext_take_front(kv, ext_after(kv, s, need), need);
        }
        s->cap += need;
        kv->held += need;
        s->len += n_tokens;
        kv->tok += seq_tok(s, kv->B) - tok_before;
    } else {
        s->len += n_tokens;
        kv->tok += seq_tok(s, kv->B) - tok_before;
    }
    if (s->final < s->len) s->final = s->len;
    seq_account(kv, s, +1);
    return XF_OK;
}

xf_status kv_cache_release_window(kv_cache *kv, int seq_id) {
    if (!seq_ok(kv, seq_id)) return xf_errorf(XF_EINVAL, "kv_cache_release_window: unknown sequence %d", seq_id);
    kv_seq *s = &kv->seqs[seq_id];
    seq_account(kv, s, -1);
    window_release_now(kv, s);
    seq_account(kv, s, +1);
    return XF_OK;
}

xf_status kv_cache_free_seq(kv_cache *kv, int seq_id) {
    if (!seq_ok(kv, seq_id)) return xf_errorf(XF_EINVAL, "kv_cache_free_seq: unknown sequence %d", seq_id);
    kv_seq *s = &kv->seqs[seq_id];
    seq_account(kv, s, -1);
    if (kv->paged) {
        for (int64_t e = s->dead; e < s->n_entries; e++) {
            int32_t b = s->table[e] / (int32_t)kv->B;
            if (ref_dec(kv, b) == 0) {
                kv->tok -= kv->used[b];
                kv->used[b] = 0;
                kv->held -= kv->B;
                kv->free_stack[kv->n_free++] = b;
            }
        }
    } else {
        ext_release(kv, s->table[0], s->cap);
        kv->held -= s->cap;
        kv->tok -= seq_tok(s, kv->B);
    }
    release_id(kv, seq_id);
    return XF_OK;
}

xf_status kv_cache_fork(kv_cache *kv, int parent, int *child) {
    if (!seq_ok(kv, parent) || !child) return xf_errorf(XF_EINVAL, "kv_cache_fork: unknown sequence %d", parent);
    int64_t need = kv->paged ? 0 : kv->seqs[parent].cap;
    if (kv->paged && !kv->scratch) {
        kv->scratch = calloc((size_t)kv->n_blocks, sizeof *kv->scratch);
        if (!kv->scratch) return xf_errorf(XF_ENOMEM, "out of memory for the KV sharing table");
    }
    if (!kv->paged && !fits_now(kv, need)) return full(kv, "fork", need);
    if (ext_reserve(kv) != XF_OK) return XF_ENOMEM;
    if (!kv->paged && push_copy(kv, 0, 0, 1) != XF_OK) return XF_ENOMEM; /* room for the copy */
    if (!kv->paged) kv->n_copies--;
    int id = take_id(kv);
    if (id < 0) return xf_errorf(XF_ENOMEM, "out of memory for a new KV sequence");
    kv_seq *p = &kv->seqs[parent]; /* after take_id: the array may have moved */
    kv_seq *c = &kv->seqs[id];
    if (table_reserve(c, p->n_entries > 0 ? p->n_entries : 1) != XF_OK) {
        release_id(kv, id);
        return XF_ENOMEM;
    }
    if (kv->paged) {
        for (int64_t e = 0; e < p->n_entries; e++) {
            c->table[e] = p->table[e];
            if (e >= p->dead) ref_inc(kv, p->table[e] / (int32_t)kv->B);
        }
        c->n_entries = p->n_entries;
        c->last = p->last;
        c->dead = p->dead;
    } else {
        int64_t i = ext_first_fit(kv, need);
        c->table[0] = (int32_t)ext_take_front(kv, i, need);
        c->n_entries = 1;
        kv->held += need;
        kv->tok += seq_tok(p, kv->B);
        push_copy(kv, p->table[0], c->table[0], seq_tok(p, kv->B)); /* a ring: the whole region */
    }
    c->cap = p->cap;
    c->len = p->len;
    c->final = p->final;
    seq_account(kv, c, +1);
    *child = id;
    return XF_OK;
}

const kv_copy *kv_cache_copies(const kv_cache *kv, int64_t *n) {
    if (n) *n = kv ? kv->n_copies : 0;
    return kv ? kv->copies : NULL;
}

void kv_cache_clear_copies(kv_cache *kv) {
    if (kv) kv->n_copies = 0;
}

int64_t kv_cache_seq_len(const kv_cache *kv, int id) { return seq_ok(kv, id) ? kv->seqs[id].len : -1; }
int64_t kv_cache_seq_final(const kv_cache *kv, int id) { return seq_ok(kv, id) ? kv->seqs[id].final : -1; }
int64_t kv_cache_seq_capacity(const kv_cache *kv, int id) { return seq_ok(kv, id) ? kv->seqs[id].cap : -1; }

int64_t kv_cache_slot(const kv_cache *kv, int seq_id, int64_t pos) {
    if (!seq_ok(kv, seq_id)) return -1;
    const kv_seq *s = &kv->seqs[seq_id];
    if (kv->paged) {
        if (pos < s->dead * kv->B || pos >= seq_end(kv, s)) return -1; /* released, or past the blocks */
        return (int64_t)s->table[pos / kv->B] + pos % kv->B;
    }
    if (kv->cfg.window > 0) { /* a ring: the last `cap` positions written, and those still to come */
        if (pos < 0 || pos < s->len - s->cap || pos >= (s->len > s->cap ? s->len : s->cap)) return -1;
        return (int64_t)s->table[0] + pos % s->cap;
    }
    if (pos < 0 || pos >= s->cap) return -1;
    return (int64_t)s->table[0] + pos;
}

xf_status kv_cache_block_table(const kv_cache *kv, int seq_id, const int32_t **table, int64_t *n_entries,
                               int64_t *tokens_per_entry) {
    if (!seq_ok(kv, seq_id)) return xf_errorf(XF_EINVAL, "kv_cache_block_table: unknown sequence %d", seq_id);
    const kv_seq *s = &kv->seqs[seq_id];
    if (table) *table = s->table;
    if (n_entries) *n_entries = s->n_entries;
    if (tokens_per_entry) *tokens_per_entry = kv->paged ? kv->B : s->cap;
    return XF_OK;
}

/* ---- metrics ---- */

void kv_cache_stats_get(const kv_cache *kv, int64_t waiting_slots, kv_cache_stats *out) {
    memset(out, 0, sizeof *out);
    if (!kv) return;
    out->n_slots = kv->n_slots;
    out->bytes_per_slot = kv->bps;
    out->live_seqs = kv->live;
    out->alloc_failures = kv->failures;
    int64_t res = kv->res_sum;
    if (kv->paged) {
        /* A shared, partly filled last block counts its unwritten slots once, as reserved up to
         * the farthest final length among its owners (owners of a shared block have the same
         * length: any write copies it away first). Without shared blocks res_sum is exact. */
        int64_t B = kv->B;
        if (kv->n_shared > 0) {
            res = 0;
            for (int i = 0; i < kv->seq_cap; i++) {
                const kv_seq *s = &kv->seqs[i];
                if (!s->live) continue;
                int64_t r = seq_res(s, B);
                if (r <= 0) continue;
                int32_t b = s->table[s->n_entries - 1] / (int32_t)B;
                if (kv->ref[b] == 1) res += r;
                else if (kv->scratch[b] < r + 1) kv->scratch[b] = r + 1;
            }
            for (int i = 0; i < kv->seq_cap; i++) {
                const kv_seq *s = &kv->seqs[i];
                if (!s->live || s->n_entries == 0) continue;
                int32_t b = s->table[s->n_entries - 1] / (int32_t)B;
                if (kv->scratch[b] > 0) {
                    res += kv->scratch[b] - 1;
                    kv->scratch[b] = 0;
                }
            }
        }
        out->largest_free_slots = kv->n_free * B;
        out->free_slots = kv->n_free * B;
    } else {
        int64_t largest = 0;
        int64_t free_total = 0;
        for (int64_t i = 0; i < kv->n_ext; i++) {
            free_total += kv->ext[i].len;
            if (kv->ext[i].len > largest) largest = kv->ext[i].len;
        }
        out->largest_free_slots = largest;
        if (waiting_slots > 0 && largest < waiting_slots && free_total >= waiting_slots) {
            out->external_slots = free_total; /* every extent is too small: fragmentation stops it */
            out->free_slots = 0;
        } else {
            out->free_slots = free_total;
        }
    }
    out->token_slots = kv->tok;
    out->reserved_slots = res;
    out->internal_slots = kv->held - kv->tok - res;
    out->shared_slots_saved = kv->cap_sum - kv->held;
}

/* ---- invariants ---- */

static int cmp_extent(const void *a, const void *b) {
    int64_t x = ((const kv_extent *)a)->start, y = ((const kv_extent *)b)->start;
    return (x > y) - (x < y);
}

xf_status kv_cache_check(const kv_cache *kv) {
    if (!kv) return xf_errorf(XF_EINVAL, "kv_cache_check: NULL");
    int64_t live = 0, tok = 0, held = 0;
    for (int i = 0; i < kv->seq_cap; i++) {
        const kv_seq *s = &kv->seqs[i];
        if (!s->live) continue;
        live++;
        if (s->len < 0 || (s->len > seq_end(kv, s) && !seq_ring(kv, s)) || s->final < s->len)
            return xf_errorf(XF_EINVAL, "seq %d: len %lld, cap %lld, final %lld inconsistent", i, (long long)s->len,
                             (long long)s->cap, (long long)s->final);
    }
    int64_t res_sum = 0, cap_sum = 0;
    for (int i = 0; i < kv->seq_cap; i++)
        if (kv->seqs[i].live) {
            res_sum += seq_res(&kv->seqs[i], kv->B);
            cap_sum += kv->seqs[i].cap;
        }
    if (res_sum != kv->res_sum || cap_sum != kv->cap_sum)
        return xf_errorf(XF_EINVAL, "reserved sum %lld / held sum %lld, recount %lld / %lld", (long long)kv->res_sum,
                         (long long)kv->cap_sum, (long long)res_sum, (long long)cap_sum);
    if (live != kv->live) return xf_errorf(XF_EINVAL, "live count %lld, recount %lld", (long long)kv->live, (long long)live);
    /* the free-id list holds exactly the ids that are not live */
    int64_t nfree_ids = 0;
    for (int id = kv->free_id; id >= 0; id = kv->seqs[id].next_free) {
        if (id >= kv->seq_cap || kv->seqs[id].live) return xf_errorf(XF_EINVAL, "free-id list holds live or bad id %d", id);
        if (++nfree_ids > kv->seq_cap) return xf_errorf(XF_EINVAL, "free-id list has a cycle");
    }
    if (nfree_ids + live != kv->seq_cap) return xf_errorf(XF_EINVAL, "free ids %lld + live %lld != %d", (long long)nfree_ids, (long long)live, kv->seq_cap);

    if (kv->paged) {
        int64_t B = kv->B, nb = kv->n_blocks;
        int32_t *cnt = calloc((size_t)nb, sizeof *cnt);
        if (!cnt) return xf_errorf(XF_ENOMEM, "kv_cache_check: out of memory");
        xf_status st = XF_OK;
        for (int i = 0; i < kv->seq_cap && st == XF_OK; i++) {
            const kv_seq *s = &kv->seqs[i];
            if (!s->live) continue;
            if (s->last != (s->n_entries > 0 ? s->table[s->n_entries - 1] / (int32_t)B : -1))
                st = xf_errorf(XF_EINVAL, "seq %d: cached last block %d disagrees with its table", i, s->last);
            else if (s->cap != (s->n_entries - s->dead) * B) st = xf_errorf(XF_EINVAL, "seq %d: cap %lld != %lld live blocks * %lld", i, (long long)s->cap, (long long)(s->n_entries - s->dead), (long long)B);
            else if (s->n_entries != ceil_div(s->len, B)) st = xf_errorf(XF_EINVAL, "seq %d: %lld blocks for %lld tokens (waste over B-1)", i, (long long)s->n_entries, (long long)s->len);
            else if (kv->cfg.window > 0) {
                /* every block no later query sees is released, the last one never */
                int64_t want_dead = (s->len - kv->cfg.window + 1) / B;
                if (s->len - kv->cfg.window + 1 < 0) want_dead = 0;
                if (want_dead > s->n_entries - 1) want_dead = s->n_entries - 1 > 0 ? s->n_entries - 1 : 0;
                if (kv->cfg.window_deferred ? s->dead > want_dead : s->dead != want_dead) /* deferred: at most */
                    st = xf_errorf(XF_EINVAL, "seq %d: %lld blocks released, the window of %lld over %lld tokens releases %lld", i,
                                   (long long)s->dead, (long long)kv->cfg.window, (long long)s->len, (long long)want_dead);
                for (int64_t e = 0; e < s->dead && st == XF_OK; e++)
                    if (s->table[e] != -1) st = xf_errorf(XF_EINVAL, "seq %d: released entry %lld is %d, not -1", i, (long long)e, s->table[e]);
            } else if (s->dead != 0) st = xf_errorf(XF_EINVAL, "seq %d: %lld blocks released without a window", i, (long long)s->dead);
            for (int64_t e = s->dead; e < s->n_entries && st == XF_OK; e++) {
                int32_t first = s->table[e];
                if (first < 0 || first % B != 0 || first / B >= nb) {
                    st = xf_errorf(XF_EINVAL, "seq %d: table entry %lld = %d is not a block start", i, (long long)e, first);
                    break;
                }
                int32_t b = (int32_t)(first / B);
                cnt[b]++;
                int64_t want = e < s->n_entries - 1 ? B : s->len - e * B;
                if (kv->used[b] != want)
                    st = xf_errorf(XF_EINVAL, "seq %d: block %d holds %d written slots, the table says %lld", i, b, kv->used[b], (long long)want);
            }
        }
        int64_t allocated = 0, shared = 0;
        for (int64_t b = 0; b < nb && st == XF_OK; b++) {
            if (kv->ref[b] > 1) shared++;
            if (cnt[b] != kv->ref[b]) st = xf_errorf(XF_EINVAL, "block %lld: refcount %d but %d table references", (long long)b, kv->ref[b], cnt[b]);
            if (kv->ref[b] > 0) {
                allocated++;
                tok += kv->used[b];
            } else if (kv->used[b] != 0) st = xf_errorf(XF_EINVAL, "free block %lld has %d written slots", (long long)b, kv->used[b]);
            if (kv->scratch && kv->scratch[b] != 0) st = xf_errorf(XF_EINVAL, "block %lld: scratch not cleared", (long long)b);
        }
        /* the free stack holds exactly the unreferenced blocks, once each */
        memset(cnt, 0, (size_t)nb * sizeof *cnt);
        if (st == XF_OK && kv->n_free + allocated != nb)
            st = xf_errorf(XF_EINVAL, "free list %lld + allocated %lld != %lld blocks", (long long)kv->n_free, (long long)allocated, (long long)nb);
        for (int64_t i = 0; i < kv->n_free && st == XF_OK; i++) {
            int32_t b = kv->free_stack[i];
            if (b < 0 || b >= nb) st = xf_errorf(XF_EINVAL, "free list entry %d out of range", b);
            else if (kv->ref[b] != 0) st = xf_errorf(XF_EINVAL, "block %d is on the free list and in a block table", b);
            else if (cnt[b]++) st = xf_errorf(XF_EINVAL, "block %d is twice on the free list", b);
        }
        free(cnt);
        if (st == XF_OK && shared != kv->n_shared)
            st = xf_errorf(XF_EINVAL, "%lld shared blocks, recount %lld", (long long)kv->n_shared, (long long)shared);
        if (st != XF_OK) return st;
        held = allocated * B;
    } else {
        int64_t n = kv->n_ext + live;
        kv_extent *all = malloc((size_t)(n > 0 ? n : 1) * sizeof *all);
        if (!all) return xf_errorf(XF_ENOMEM, "kv_cache_check: out of memory");
        int64_t k = 0;
        for (int64_t i = 0; i < kv->n_ext; i++) {
            if (kv->ext[i].len <= 0) {
                free(all);
                return xf_errorf(XF_EINVAL, "free extent %lld is empty", (long long)i);
            }
            if (i > 0 && kv->ext[i - 1].start + kv->ext[i - 1].len >= kv->ext[i].start) {
                free(all);
                return xf_errorf(XF_EINVAL, "free extents %lld and %lld overlap, touch or are unsorted", (long long)i - 1, (long long)i);
            }
            all[k++] = kv->ext[i];
        }
        for (int i = 0; i < kv->seq_cap; i++) {
            const kv_seq *s = &kv->seqs[i];
            if (!s->live) continue;
            if (s->n_entries != 1 || s->cap <= 0) {
                free(all);
                return xf_errorf(XF_EINVAL, "seq %d: contiguous region must be one non-empty entry", i);
            }
            if (kv->cfg.window > 0 && s->cap > kv->cfg.window) {
                free(all);
                return xf_errorf(XF_EINVAL, "seq %d: region of %lld slots exceeds the window %lld", i, (long long)s->cap,
                                 (long long)kv->cfg.window);
            }
            all[k++] = (kv_extent){s->table[0], s->cap};
            tok += seq_tok(s, kv->B);
            held += s->cap;
        }
        qsort(all, (size_t)k, sizeof *all, cmp_extent);
        int64_t at = 0;
        for (int64_t i = 0; i < k; i++) {
            if (all[i].start != at) {
                int64_t next = all[i].start;
                free(all);
                return xf_errorf(XF_EINVAL, "slot %lld: regions and free extents do not tile the pool (next starts at %lld)", (long long)at, (long long)next);
            }
            at += all[i].len;
        }
        free(all);
        if (at != kv->n_slots) return xf_errorf(XF_EINVAL, "regions and free extents cover %lld of %lld slots", (long long)at, (long long)kv->n_slots);
    }
    if (tok != kv->tok) return xf_errorf(XF_EINVAL, "written slots %lld, recount %lld", (long long)kv->tok, (long long)tok);
    if (held != kv->held) return xf_errorf(XF_EINVAL, "held slots %lld, recount %lld", (long long)kv->held, (long long)held);
    return XF_OK;
}
