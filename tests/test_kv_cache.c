/* KV cache manager: policy parsing, bytes per slot, hand-computed breakdowns per policy, fork and
 * copy-on-write, and randomized alloc/grow/free/fork sequences checked after every operation
 * against the manager's invariants and a shadow copy of what every sequence wrote. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "reference_model/kv_cache.h"

/* A toy model whose slot is 4 bytes: 2 (K, V) * 1 layer * 1 head * head_dim 1 * 2 bytes (fp16). */
static kv_cache *make_w(const char *policy, int64_t n_slots, int64_t max_len, int64_t window) {
    kv_cache_config c = {0};
    c.window = window;
    c.n_layers = 1;
    c.n_kv_heads = 1;
    c.head_dim = 1;
    c.dtype = XF_FP16;
    c.budget_bytes = n_slots * 4;
    c.max_len = max_len;
    cr_assert_eq(kv_policy_parse(policy, &c.policy), XF_OK, "%s", xf_error_msg());
    kv_cache *kv = NULL;
    cr_assert_eq(kv_cache_init(&kv, &c), XF_OK, "%s", xf_error_msg());
    return kv;
}

static kv_cache *make(const char *policy, int64_t n_slots, int64_t max_len) { return make_w(policy, n_slots, max_len, 0); }

static void expect(const kv_cache *kv, int64_t waiting, int64_t tok, int64_t res, int64_t intl, int64_t ext, int64_t fre) {
    kv_cache_stats s;
    kv_cache_stats_get(kv, waiting, &s);
    cr_expect_eq(s.token_slots, tok, "token %lld != %lld", (long long)s.token_slots, (long long)tok);
    cr_expect_eq(s.reserved_slots, res, "reserved %lld != %lld", (long long)s.reserved_slots, (long long)res);
    cr_expect_eq(s.internal_slots, intl, "internal %lld != %lld", (long long)s.internal_slots, (long long)intl);
    cr_expect_eq(s.external_slots, ext, "external %lld != %lld", (long long)s.external_slots, (long long)ext);
    cr_expect_eq(s.free_slots, fre, "free %lld != %lld", (long long)s.free_slots, (long long)fre);
    cr_expect_eq(s.token_slots + s.reserved_slots + s.internal_slots + s.external_slots + s.free_slots, s.n_slots);
    cr_expect_eq(kv_cache_check(kv), XF_OK, "%s", xf_error_msg());
}

Test(kv_cache, policy_parse) {
    kv_policy p;
    cr_assert_eq(kv_policy_parse("reserve", &p), XF_OK);
    cr_expect_eq(p.kind, KV_POLICY_RESERVE);
    cr_assert_eq(kv_policy_parse("paged", &p), XF_OK);
    cr_expect_eq(p.kind, KV_POLICY_PAGED);
    cr_expect_eq(p.block, 16);
    cr_assert_eq(kv_policy_parse("paged:64", &p), XF_OK);
    cr_expect_eq(p.block, 64);
    char buf[32];
    cr_expect_str_eq(kv_policy_name(&p, buf, sizeof buf), "paged:64");
    cr_expect_eq(kv_policy_parse("paged:0", &p), XF_EINVAL);
    cr_expect_eq(kv_policy_parse("paged:x", &p), XF_EINVAL);
    cr_expect_eq(kv_policy_parse("paged:16x", &p), XF_EINVAL);
    cr_expect_eq(kv_policy_parse("paged:65537", &p), XF_EINVAL);
    cr_expect_eq(kv_policy_parse("buddy", &p), XF_EINVAL);
    cr_expect(strstr(xf_error_msg(), "buddy") != NULL);
    cr_expect_eq(kv_policy_parse(NULL, &p), XF_EINVAL);
}

Test(kv_cache, bytes_per_slot) {
    /* LLaMA-2-7B fp16: 2 * 32 layers * 32 heads * 128 * 2 B = 524,288 */
    cr_expect_eq(kv_bytes_per_slot(32, 32, 128, XF_FP16, 0), 524288);
    /* LLaMA-2-13B / OPT-13B fp16: 2 * 40 * 40 * 128 * 2 = 819,200 */
    cr_expect_eq(kv_bytes_per_slot(40, 40, 128, XF_FP16, 0), 819200);
    /* LLaMA-3-8B (GQA, 8 KV heads) fp16: 2 * 32 * 8 * 128 * 2 = 131,072 */
    cr_expect_eq(kv_bytes_per_slot(32, 8, 128, XF_FP16, 0), 131072);
    /* int8 with group 128 on LLaMA-2-7B: a layer's K row = 4096 B + 32 heads * 1 scale * 2 B
     * = 4160; 2 * 32 * 4160 = 266,240 */
    cr_expect_eq(kv_bytes_per_slot(32, 32, 128, XF_INT8, 128), 266240);
    cr_expect_eq(kv_bytes_per_slot(0, 32, 128, XF_FP16, 0), 0);
}

Test(kv_cache, init_rejects_bad_configs) {
    kv_cache_config c = {.n_layers = 1, .n_kv_heads = 1, .head_dim = 1, .dtype = XF_FP16, .budget_bytes = 3, .max_len = 8};
    kv_policy_parse("reserve", &c.policy);
    kv_cache *kv = (kv_cache *)1;
    /* 3 bytes < one 4-byte slot */
    cr_expect_eq(kv_cache_init(&kv, &c), XF_EINVAL);
    cr_expect_null(kv);
    cr_expect(strstr(xf_error_msg(), "larger budget") != NULL, "%s", xf_error_msg());
    /* paged:16 needs 64 bytes for one block; 60 is too little */
    kv_policy_parse("paged:16", &c.policy);
    c.budget_bytes = 60;
    cr_expect_eq(kv_cache_init(&kv, &c), XF_EINVAL);
    c.budget_bytes = 64;
    cr_expect_eq(kv_cache_init(&kv, &c), XF_OK);
    cr_expect_eq(kv_cache_n_slots(kv), 16);
    kv_cache_free(kv);
    c.n_layers = 0;
    cr_expect_eq(kv_cache_init(&kv, &c), XF_EINVAL);
    c.n_layers = 1;
    c.budget_bytes = -5;
    cr_expect_eq(kv_cache_init(&kv, &c), XF_EINVAL);
    kv_cache_free(NULL);
}

Test(kv_cache, reserve_breakdown) {
    /* 100 slots, reserve 30 per request */
    kv_cache *kv = make("reserve", 100, 30);
    int a, b, c;
    cr_assert_eq(kv_cache_add_seq(kv, 10, 20, 0, &a), XF_OK);
    /* A: region 30, written 10, will write 10 more, 10 never used */
    expect(kv, 0, 10, 10, 10, 0, 70);
    cr_assert_eq(kv_cache_add_seq(kv, 5, 25, 0, &b), XF_OK);
    /* + B: written 5, reserved 20, internal 5 */
    expect(kv, 0, 15, 30, 15, 0, 40);
    cr_assert_eq(kv_cache_append(kv, a, 3), XF_OK);
    expect(kv, 0, 18, 27, 15, 0, 40);
    cr_expect_eq(kv_cache_slot(kv, a, 0), 0);
    cr_expect_eq(kv_cache_slot(kv, b, 0), 30);
    cr_expect_eq(kv_cache_slot(kv, b, 29), 59);
    cr_expect_eq(kv_cache_slot(kv, b, 30), -1);
    cr_assert_eq(kv_cache_add_seq(kv, 30, 30, 0, &c), XF_OK); /* C at [60, 90) */
    /* pool: A [0,30) B [30,60) C [60,90) free [90,100) */
    cr_assert_eq(kv_cache_free_seq(kv, a), XF_OK);
    /* free extents [0,30) and [90,100): 40 free, largest 30. A request of 35 would fit in 40
     * free slots but in no extent: all 40 are external fragmentation. */
    expect(kv, 35, 35, 20, 5, 40, 0);
    /* a request of 45 exceeds the free total: plain shortage, not fragmentation */
    expect(kv, 45, 35, 20, 5, 0, 40);
    /* a request of 20 fits: nothing is external */
    expect(kv, 20, 35, 20, 5, 0, 40);
    kv_cache_stats s;
    kv_cache_stats_get(kv, 0, &s);
    cr_expect_eq(s.largest_free_slots, 30);
    cr_expect_eq(s.live_seqs, 2);
    /* final 31 > reserve length 30: invalid, not "full" */
    int d;
    cr_expect_eq(kv_cache_add_seq(kv, 5, 31, 0, &d), XF_EINVAL);
    kv_cache_free(kv);
}

Test(kv_cache, reserve_full_leaves_state) {
    kv_cache *kv = make("reserve", 100, 40);
    int a, b, c;
    cr_assert_eq(kv_cache_add_seq(kv, 1, 10, 0, &a), XF_OK);
    cr_assert_eq(kv_cache_add_seq(kv, 1, 10, 0, &b), XF_OK);
    /* 20 free slots; a third region of 40 does not fit */
    cr_expect_eq(kv_cache_can_add(kv, 1, 10, 0), 0);
    cr_expect_eq(kv_cache_add_seq(kv, 1, 10, 0, &c), KV_CACHE_FULL);
    expect(kv, 0, 2, 18, 60, 0, 20);
    kv_cache_stats s;
    kv_cache_stats_get(kv, 0, &s);
    cr_expect_eq(s.alloc_failures, 1);
    /* a region larger than the whole pool can never fit */
    cr_expect_eq(kv_cache_add_seq(kv, 1, 10, 200, &c), KV_CACHE_FULL);
    cr_expect(strstr(xf_error_msg(), "never") != NULL, "%s", xf_error_msg());
    kv_cache_free(kv);
}

Test(kv_cache, pow2_and_oracle) {
    kv_cache *kv = make("pow2", 128, 0);
    int a, b;
    /* final 20 -> 32 slots; final 33 -> 64 */
    cr_expect_eq(kv_cache_admit_slots(kv, 10, 20, 0), 32);
    cr_expect_eq(kv_cache_admit_slots(kv, 10, 33, 0), 64);
    cr_expect_eq(kv_cache_admit_slots(kv, 10, 32, 0), 32);
    cr_assert_eq(kv_cache_add_seq(kv, 10, 20, 0, &a), XF_OK);
    cr_assert_eq(kv_cache_add_seq(kv, 10, 33, 0, &b), XF_OK);
    /* tok 20; reserved 10 + 23 = 33; internal 12 + 31 = 43; free 128 - 96 = 32 */
    expect(kv, 0, 20, 33, 43, 0, 32);
    kv_cache_free(kv);

    kv = make("oracle", 64, 0);
    cr_assert_eq(kv_cache_add_seq(kv, 10, 20, 0, &a), XF_OK);
    cr_assert_eq(kv_cache_add_seq(kv, 4, 30, 0, &b), XF_OK);
    /* oracle never over-reserves: tok 14, reserved 10 + 26, internal 0, free 14 */
    expect(kv, 0, 14, 36, 0, 0, 14);
    /* growing past final (a backend that did not know it) extends in place if free */
    cr_assert_eq(kv_cache_append(kv, b, 26), XF_OK);
    cr_assert_eq(kv_cache_append(kv, b, 2), XF_OK); /* [50,52) was free */
    cr_expect_eq(kv_cache_seq_capacity(kv, b), 32);
    cr_expect_eq(kv_cache_seq_final(kv, b), 32);
    /* a cannot grow past its region: b sits right after it */
    cr_assert_eq(kv_cache_append(kv, a, 10), XF_OK);
    cr_expect_eq(kv_cache_can_append(kv, a, 1), 0);
    cr_expect_eq(kv_cache_append(kv, a, 1), KV_CACHE_FULL);
    expect(kv, 0, 52, 0, 0, 0, 12);
    kv_cache_free(kv);
}

Test(kv_cache, paged_breakdown_fork_cow) {
    /* 40 slots = 10 blocks of 4 */
    kv_cache *kv = make("paged:4", 40, 0);
    int a, b, c;
    cr_assert_eq(kv_cache_add_seq(kv, 5, 12, 0, &a), XF_OK);
    /* A: 2 blocks for the prompt (8 slots): tok 5, reserved 3 */
    expect(kv, 0, 5, 3, 0, 0, 32);
    cr_assert_eq(kv_cache_add_seq(kv, 3, 3, 0, &b), XF_OK);
    /* B: 1 block, written 3, final 3: the 4th slot is internal */
    expect(kv, 0, 8, 3, 1, 0, 28);
    cr_assert_eq(kv_cache_append(kv, a, 4), XF_OK);
    /* A: len 9, 3 blocks, reserved min(12, 12) - 9 = 3 */
    expect(kv, 0, 12, 3, 1, 0, 24);
    const int32_t *tab;
    int64_t n, per;
    cr_assert_eq(kv_cache_block_table(kv, a, &tab, &n, &per), XF_OK);
    cr_expect_eq(n, 3);
    cr_expect_eq(per, 4);
    /* blocks come 0, 1 (A), 2 (B), 3 (A) from a fresh pool */
    cr_expect_eq(tab[0], 0);
    cr_expect_eq(tab[1], 4);
    cr_expect_eq(tab[2], 12);
    cr_expect_eq(kv_cache_slot(kv, a, 8), 12);
    cr_expect_eq(kv_cache_slot(kv, a, 5), 5);

    cr_assert_eq(kv_cache_fork(kv, a, &c), XF_OK);
    int64_t nc;
    kv_cache_copies(kv, &nc);
    cr_expect_eq(nc, 0, "fork copies nothing");
    /* C shares A's 3 blocks: physical held 4 blocks = 16 slots, tok 9 + 3 = 12, the shared last
     * block's 3 unwritten slots are reserved once; internal = 16 - 12 - 3 = 1 (B's) */
    expect(kv, 0, 12, 3, 1, 0, 24);
    kv_cache_stats s;
    kv_cache_stats_get(kv, 0, &s);
    cr_expect_eq(s.shared_slots_saved, 12); /* logical 12 + 4 + 12 = 28, physical 16 */
    cr_expect_eq(kv_cache_slot(kv, c, 8), 12);

    /* C writes into the shared, partly filled last block: copy-on-write */
    cr_assert_eq(kv_cache_append(kv, c, 1), XF_OK);
    const kv_copy *cp = kv_cache_copies(kv, &nc);
    cr_assert_eq(nc, 1);
    cr_expect_eq(cp[0].src_slot, 12);
    cr_expect_eq(cp[0].dst_slot, 16); /* block 4 */
    cr_expect_eq(cp[0].n_slots, 1);
    kv_cache_clear_copies(kv);
    cr_expect_eq(kv_cache_slot(kv, c, 8), 16);
    cr_expect_eq(kv_cache_slot(kv, c, 0), 0); /* full blocks stay shared */
    /* held 5 blocks = 20; tok: A 4+4+1, B 3, C's own block 2 -> 14; reserved A 3, C 2 -> 5;
     * internal 20 - 14 - 5 = 1; saved 28 - 20 = 8 */
    expect(kv, 0, 14, 5, 1, 0, 20);
    kv_cache_stats_get(kv, 0, &s);
    cr_expect_eq(s.shared_slots_saved, 8);
    /* A's last block is its own again: no copy */
    cr_assert_eq(kv_cache_append(kv, a, 1), XF_OK);
    kv_cache_copies(kv, &nc);
    cr_expect_eq(nc, 0);
    cr_assert_eq(kv_cache_free_seq(kv, a), XF_OK);
    /* blocks 0, 1 (4 + 4 written) still held by C; A's block 3 freed; tok 8 + B 3 + C's block 2
     * = 13; reserved C 12 - 10 = 2; held 4 blocks = 16, internal 16 - 13 - 2 = 1 */
    expect(kv, 0, 13, 2, 1, 0, 24);
    cr_assert_eq(kv_cache_free_seq(kv, c), XF_OK);
    cr_assert_eq(kv_cache_free_seq(kv, b), XF_OK);
    expect(kv, 0, 0, 0, 0, 0, 40);
    cr_expect_eq(kv_cache_free_seq(kv, b), XF_EINVAL);
    kv_cache_free(kv);
}

Test(kv_cache, paged_full_is_atomic) {
    kv_cache *kv = make("paged:4", 16, 0); /* 4 blocks */
    int a, b;
    cr_assert_eq(kv_cache_add_seq(kv, 8, 100, 0, &a), XF_OK);
    cr_assert_eq(kv_cache_add_seq(kv, 6, 100, 0, &b), XF_OK);
    /* b: 6 + 7 = 13 tokens needs 4 blocks, has 2, pool has 0 free */
    cr_expect_eq(kv_cache_append(kv, b, 7), KV_CACHE_FULL);
    cr_expect_eq(kv_cache_seq_len(kv, b), 6);
    cr_expect_eq(kv_cache_append(kv, b, 2), XF_OK); /* fills its last block */
    cr_expect_eq(kv_cache_can_append(kv, b, 1), 0);
    cr_expect_eq(kv_cache_check(kv), XF_OK, "%s", xf_error_msg());
    kv_cache_free(kv);
}

Test(kv_cache, contiguous_fork_copies) {
    kv_cache *kv = make("oracle", 50, 0);
    int a, c;
    cr_assert_eq(kv_cache_add_seq(kv, 7, 10, 0, &a), XF_OK);
    cr_assert_eq(kv_cache_fork(kv, a, &c), XF_OK);
    int64_t n;
    const kv_copy *cp = kv_cache_copies(kv, &n);
    cr_assert_eq(n, 1);
    cr_expect_eq(cp[0].src_slot, 0);
    cr_expect_eq(cp[0].dst_slot, 10);
    cr_expect_eq(cp[0].n_slots, 7);
    expect(kv, 0, 14, 6, 0, 0, 30);
    kv_cache_free(kv);
}

/* ---- randomized ---- */

static uint64_t rng_state;
static uint64_t rnd(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static int64_t rnd_in(int64_t lo, int64_t hi) { return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1)); }

#define MAXSEQ 512
#define MAXLEN 400
typedef struct shadow {
    int live;
    int64_t len;
    uint32_t val[MAXLEN]; /* what the sequence wrote at each position */
} shadow;

/* Performs the pending copies on the fake memory, then clears them. */
static void do_copies(kv_cache *kv, uint32_t *mem) {
    int64_t n;
    const kv_copy *c = kv_cache_copies(kv, &n);
    for (int64_t i = 0; i < n; i++) memmove(mem + c[i].dst_slot, mem + c[i].src_slot, (size_t)c[i].n_slots * sizeof *mem);
    kv_cache_clear_copies(kv);
}

/* The random runs' window (0: none): a sequence of length len must still read its positions
 * len - window + 1 .. len - 1 (what its next query sees); older ones may be gone. */
static int64_t g_window;
static int64_t first_needed(int64_t len) { return g_window > 0 && len - g_window + 1 > 0 ? len - g_window + 1 : 0; }

static void write_new(kv_cache *kv, uint32_t *mem, shadow *sh, int id, int64_t from, int64_t to) {
    for (int64_t p = from; p < to; p++) {
        uint32_t v = (uint32_t)rnd();
        sh[id].val[p] = v;
        if (p < first_needed(to)) continue; /* outside the window already: never read */
        int64_t slot = kv_cache_slot(kv, id, p);
        cr_assert(slot >= 0 && slot < kv_cache_n_slots(kv));
        mem[slot] = v;
    }
}

static void check_all(kv_cache *kv, const uint32_t *mem, const shadow *sh, int64_t *owners, int64_t block) {
    cr_assert_eq(kv_cache_check(kv), XF_OK, "%s", xf_error_msg());
    kv_cache_stats s;
    kv_cache_stats_get(kv, (int64_t)rnd_in(0, 64), &s);
    cr_assert_eq(s.token_slots + s.reserved_slots + s.internal_slots + s.external_slots + s.free_slots, s.n_slots);
    cr_assert(s.token_slots >= 0 && s.reserved_slots >= 0 && s.internal_slots >= 0 && s.external_slots >= 0 && s.free_slots >= 0);
    int64_t n = kv_cache_n_slots(kv);
    memset(owners, 0, (size_t)n * sizeof *owners);
    int64_t live = 0;
    for (int id = 0; id < MAXSEQ; id++) {
        if (!sh[id].live) continue;
        live++;
        cr_assert_eq(kv_cache_seq_len(kv, id), sh[id].len);
        int64_t cap = kv_cache_seq_capacity(kv, id);
        if (block > 0) cr_assert(cap - sh[id].len <= block - 1, "paged waste %lld > B-1", (long long)(cap - sh[id].len));
        if (g_window > 0) cr_assert(cap <= (g_window / (block > 0 ? block : 1) + 2) * (block > 0 ? block : 1),
                                    "seq %d holds %lld slots for a window of %lld", id, (long long)cap, (long long)g_window);
        for (int64_t p = first_needed(sh[id].len); p < sh[id].len; p++) {
            int64_t slot = kv_cache_slot(kv, id, p);
            cr_assert(slot >= 0 && slot < n);
            cr_assert_eq(mem[slot], sh[id].val[p], "seq %d pos %lld reads another sequence's KV", id, (long long)p);
            owners[slot]++;
        }
    }
    cr_assert_eq(s.live_seqs, live);
    /* a slot read by several sequences must be shared through fork: only paged shares */
    int64_t shared = 0;
    for (int64_t i = 0; i < n; i++)
        if (owners[i] > 1) shared += owners[i] - 1;
    if (block == 0) cr_assert_eq(shared, 0, "contiguous sequences share slots");
    else cr_assert(shared <= s.shared_slots_saved);
}

static void random_run_w(const char *policy, uint64_t seed, int n_ops, int64_t window) {
    rng_state = seed;
    g_window = window;
    int64_t n_slots = 1024;
    kv_cache *kv = make_w(policy, n_slots, 256, window);
    int64_t block = kv_cache_block_tokens(kv);
    shadow *sh = calloc(MAXSEQ, sizeof *sh);
    uint32_t *mem = calloc((size_t)n_slots, sizeof *mem);
    int64_t *owners = calloc((size_t)n_slots, sizeof *owners);
    cr_assert(sh && mem && owners);
    int ok_ops = 0;
    for (int op = 0; op < n_ops; op++) {
        int r = (int)rnd_in(0, 99);
        int id = (int)rnd_in(0, MAXSEQ - 1);
        /* pick a live sequence near id if any */
        int pick = -1;
        for (int k = 0; k < MAXSEQ; k++)
            if (sh[(id + k) % MAXSEQ].live) {
                pick = (id + k) % MAXSEQ;
                break;
            }
        if (r < 30 || pick < 0) {
            int64_t prompt = rnd_in(0, 100), final = prompt + rnd_in(1, 150);
            int nid;
            xf_status st = kv_cache_add_seq(kv, prompt, final, 0, &nid);
            cr_assert(st == XF_OK || st == KV_CACHE_FULL, "%s", xf_error_msg());
            if (st == XF_OK) {
                cr_assert(nid >= 0 && nid < MAXSEQ && !sh[nid].live);
                sh[nid].live = 1;
                sh[nid].len = prompt;
                write_new(kv, mem, sh, nid, 0, prompt);
                ok_ops++;
            }
        } else if (r < 70) {
            int64_t n = rnd_in(1, 12);
            if (sh[pick].len + n > MAXLEN) n = MAXLEN - sh[pick].len;
            int can = kv_cache_can_append(kv, pick, n);
            xf_status st = kv_cache_append(kv, pick, n);
            cr_assert_eq(st == XF_OK, can, "can_append disagrees with append");
            cr_assert(st == XF_OK || st == KV_CACHE_FULL, "%s", xf_error_msg());
            if (st == XF_OK) {
                do_copies(kv, mem);
                write_new(kv, mem, sh, pick, sh[pick].len, sh[pick].len + n);
                sh[pick].len += n;
                ok_ops++;
            } else {
                cr_assert_eq(kv_cache_seq_len(kv, pick), sh[pick].len);
            }
        } else if (r < 88) {
            cr_assert_eq(kv_cache_free_seq(kv, pick), XF_OK);
            sh[pick].live = 0;
            ok_ops++;
        } else {
            int child;
            xf_status st = kv_cache_fork(kv, pick, &child);
            cr_assert(st == XF_OK || st == KV_CACHE_FULL, "%s", xf_error_msg());
            if (st == XF_OK) {
                cr_assert(!sh[child].live);
                do_copies(kv, mem);
                sh[child] = sh[pick];
                ok_ops++;
            }
        }
        check_all(kv, mem, sh, owners, block);
    }
    cr_expect(ok_ops > n_ops / 2, "too few operations succeeded (%d of %d)", ok_ops, n_ops);
    for (int id = 0; id < MAXSEQ; id++)
        if (sh[id].live) cr_assert_eq(kv_cache_free_seq(kv, id), XF_OK);
    kv_cache_stats s;
    kv_cache_stats_get(kv, 0, &s);
    /* paged:7 rounds 1024 down to 146 blocks = 1022 slots */
    cr_expect_eq(s.n_slots, block > 0 ? 1024 / block * block : 1024);
    cr_expect_eq(s.free_slots, s.n_slots);
    cr_expect_eq(s.largest_free_slots, s.n_slots, "the pool is one free extent again");
    cr_expect_eq(s.live_seqs, 0);
    cr_expect_eq(kv_cache_check(kv), XF_OK, "%s", xf_error_msg());
    free(sh);
    free(mem);
    free(owners);
    kv_cache_free(kv);
    g_window = 0;
}

static void random_run(const char *policy, uint64_t seed, int n_ops) { random_run_w(policy, seed, n_ops, 0); }

Test(kv_cache, random_paged16) {
    for (uint64_t seed = 1; seed <= 4; seed++) random_run("paged:16", seed, 3000);
}
Test(kv_cache, random_paged1) { random_run("paged:1", 11, 2000); }
Test(kv_cache, random_paged7) { random_run("paged:7", 12, 2000); }
Test(kv_cache, random_reserve) {
    for (uint64_t seed = 21; seed <= 23; seed++) random_run("reserve", seed, 3000);
}
Test(kv_cache, random_pow2) {
    for (uint64_t seed = 31; seed <= 33; seed++) random_run("pow2", seed, 3000);
}
Test(kv_cache, random_oracle) {
    for (uint64_t seed = 41; seed <= 43; seed++) random_run("oracle", seed, 3000);
}

/* ---- sliding windows: blocks out of the window released (paged), regions of the window (rings) ---- */

Test(kv_cache, window_paged_releases_blocks) {
    /* paged:4, window 6: a query at position p sees p - 5 .. p */
    kv_cache *kv = make_w("paged:4", 12, 0, 6);
    int a;
    /* prompt 10: 3 blocks at admission (positions 0..11); the next query (position 10) sees 5..10,
     * so block 0 (0..3) is released: 2 blocks held, 6 written slots (4..9), 2 still to come */
    cr_assert_eq(kv_cache_add_seq(kv, 10, 40, 0, &a), XF_OK, "%s", xf_error_msg());
    cr_expect_eq(kv_cache_seq_capacity(kv, a), 8);
    cr_expect_eq(kv_cache_slot(kv, a, 3), -1);
    cr_expect_eq(kv_cache_slot(kv, a, 4), 4);
    expect(kv, 0, 6, 2, 0, 0, 4);
    const int32_t *t;
    int64_t ne, tpe;
    cr_assert_eq(kv_cache_block_table(kv, a, &t, &ne, &tpe), XF_OK);
    cr_expect_eq(ne, 3);
    cr_expect_eq(t[0], -1);
    /* grow to 13: the next query (13) sees 8..13: block 1 (4..7) goes too, a new block 3 comes */
    cr_assert_eq(kv_cache_append(kv, a, 3), XF_OK, "%s", xf_error_msg());
    cr_expect_eq(kv_cache_seq_capacity(kv, a), 8);
    expect(kv, 0, 5, 3, 0, 0, 4);
    /* a 3-block pool runs a sequence of any length: at most ceil(6 / 4) + 1 blocks are live */
    for (int i = 0; i < 400; i++) cr_assert_eq(kv_cache_append(kv, a, 1), XF_OK, "step %d: %s", i, xf_error_msg());
    cr_expect_eq(kv_cache_seq_len(kv, a), 413);
    cr_expect(kv_cache_seq_capacity(kv, a) <= 12);
    cr_expect_eq(kv_cache_check(kv), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(kv_cache_free_seq(kv, a), XF_OK);
    expect(kv, 0, 0, 0, 0, 0, 12);
    kv_cache_free(kv);
    /* without the window the same sequence fills the pool at 12 tokens */
    kv = make("paged:4", 12, 0);
    cr_assert_eq(kv_cache_add_seq(kv, 10, 40, 0, &a), XF_OK);
    cr_expect_eq(kv_cache_append(kv, a, 3), KV_CACHE_FULL);
    kv_cache_free(kv);
}

/* An engine's pool (window_deferred): admission and append keep every block, so the step's
 * queries (a prefill's whole prompt) still read them; kv_cache_release_window then releases what
 * no later query sees, by the same rule as above. */
Test(kv_cache, window_deferred_releases_after_the_step) {
    kv_cache_config c = {0};
    c.window = 8;
    c.window_deferred = 1;
    c.n_layers = 1;
    c.n_kv_heads = 1;
    c.head_dim = 1;
    c.dtype = XF_FP16;
    c.budget_bytes = 24 * 4;
    cr_assert_eq(kv_policy_parse("paged:4", &c.policy), XF_OK);
    kv_cache *kv = NULL;
    cr_assert_eq(kv_cache_init(&kv, &c), XF_OK, "%s", xf_error_msg());
    int a;
    /* prompt 20: 5 blocks, all kept through the prefill */
    cr_assert_eq(kv_cache_add_seq(kv, 20, 40, 0, &a), XF_OK, "%s", xf_error_msg());
    cr_expect_eq(kv_cache_seq_capacity(kv, a), 20);
    cr_expect_neq(kv_cache_slot(kv, a, 0), -1);
    cr_expect_eq(kv_cache_check(kv), XF_OK, "%s", xf_error_msg());
    /* after it: the next query (20) sees 13..20, so blocks 0..2 (0..11) go */
    cr_assert_eq(kv_cache_release_window(kv, a), XF_OK);
    cr_expect_eq(kv_cache_seq_capacity(kv, a), 8);
    cr_expect_eq(kv_cache_slot(kv, a, 11), -1);
    cr_expect_neq(kv_cache_slot(kv, a, 12), -1);
    cr_expect_eq(kv_cache_check(kv), XF_OK, "%s", xf_error_msg());
    /* decode: the append takes block 5 (position 20) and keeps block 3 (12..15), which the query
     * at 20 reads (13..20); the release after the step frees nothing (the next query, 21, sees 14..21) */
    for (int step = 0; step < 200; step++) {
        cr_assert_eq(kv_cache_append(kv, a, 1), XF_OK, "%s", xf_error_msg());
        const int64_t len = kv_cache_seq_len(kv, a), p = len - 1;
        for (int64_t k = p - 7; k <= p; k++) cr_assert_neq(kv_cache_slot(kv, a, k), -1, "step %d: key %lld of query %lld gone", step, (long long)k, (long long)p);
        cr_assert(kv_cache_seq_capacity(kv, a) <= (8 / 4 + 1) * 4, "step %d: %lld slots held", step, (long long)kv_cache_seq_capacity(kv, a));
        cr_assert_eq(kv_cache_check(kv), XF_OK, "%s", xf_error_msg());
        cr_assert_eq(kv_cache_release_window(kv, a), XF_OK);
    }
    cr_expect_eq(kv_cache_release_window(kv, 7), XF_EINVAL);
    kv_cache_free(kv);
}

Test(kv_cache, window_contiguous_reserves_the_window) {
    /* oracle and reserve hold at most the window: a ring of 8 slots */
    kv_cache *kv = make_w("oracle", 32, 0, 8);
    int a, b;
    cr_assert_eq(kv_cache_add_seq(kv, 5, 20, 0, &a), XF_OK, "%s", xf_error_msg());
    cr_expect_eq(kv_cache_seq_capacity(kv, a), 8);
    /* 5 written, min(20, 8) - 5 = 3 to come, nothing wasted */
    expect(kv, 0, 5, 3, 0, 0, 24);
    cr_assert_eq(kv_cache_append(kv, a, 10), XF_OK, "%s", xf_error_msg());
    cr_expect_eq(kv_cache_seq_len(kv, a), 15);
    expect(kv, 0, 8, 0, 0, 0, 24);
    /* position p at base + p % 8: 14 -> 6; 7..14 are there, 6 was overwritten by 14 */
    cr_expect_eq(kv_cache_slot(kv, a, 14), 6);
    cr_expect_eq(kv_cache_slot(kv, a, 7), 7);
    cr_expect_eq(kv_cache_slot(kv, a, 6), -1);
    kv_cache_free(kv);
    kv = make_w("reserve", 32, 100, 8);
    cr_assert_eq(kv_cache_add_seq(kv, 3, 50, 0, &a), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(kv_cache_add_seq(kv, 3, 4, 0, &b), XF_OK, "%s", xf_error_msg());
    /* reserve: 8 slots each instead of 100; b will write 4 of its 8: 4 internal */
    cr_expect_eq(kv_cache_seq_capacity(kv, a), 8);
    expect(kv, 0, 6, 5 + 1, 4, 0, 16);
    /* pow2 of the final length, capped at the window */
    kv_cache_free(kv);
    kv = make_w("pow2", 32, 0, 8);
    cr_assert_eq(kv_cache_add_seq(kv, 3, 5, 0, &a), XF_OK);
    cr_expect_eq(kv_cache_seq_capacity(kv, a), 8);
    cr_assert_eq(kv_cache_add_seq(kv, 1, 3, 0, &b), XF_OK);
    cr_expect_eq(kv_cache_seq_capacity(kv, b), 4);
    kv_cache_free(kv);
}

/* The randomized runs again, each read checked over the window its next query sees. */
Test(kv_cache, random_window_paged) {
    for (uint64_t seed = 51; seed <= 53; seed++) random_run_w("paged:16", seed, 3000, 24);
    random_run_w("paged:1", 54, 2000, 5);
    random_run_w("paged:7", 55, 2000, 30);
}
Test(kv_cache, random_window_contiguous) {
    random_run_w("reserve", 61, 3000, 40);
    random_run_w("pow2", 62, 3000, 24);
    random_run_w("oracle", 63, 3000, 17);
}

Test(kv_cache, latent_slots) {
    /* DeepSeek-V3 bf16: 61 layers x (512 + 64) x 2 B = 70,272 B, against 2 x 61 x 128 x 128 x 2 for K and V */
    cr_expect_eq(kv_bytes_per_latent_slot(61, 576, XF_BF16, 0), 70272);
    /* int8: one fp16 scale per 128 of the 576: 5 per row */
    cr_expect_eq(kv_bytes_per_latent_slot(61, 576, XF_INT8, 128), 61 * (576 + 10));
    cr_expect_eq(kv_bytes_per_latent_slot(0, 576, XF_BF16, 0), 0);
    kv_cache_config c = {0};
    c.n_layers = 61;
    c.latent_dim = 576;
    c.dtype = XF_BF16;
    c.budget_bytes = 70272 * 1000 + 5;
    cr_assert_eq(kv_policy_parse("oracle", &c.policy), XF_OK);
    kv_cache *kv = NULL;
    cr_assert_eq(kv_cache_init(&kv, &c), XF_OK, "%s", xf_error_msg());
    cr_expect_eq(kv_cache_n_slots(kv), 1000);
    cr_expect_eq(kv_cache_bytes_per_slot(kv), 70272);
    kv_cache_free(kv);
    c.latent_dim = -1;
    cr_expect_eq(kv_cache_init(&kv, &c), XF_EINVAL);
}
