/* The cost model of a model split over devices (cost_parallel.h): the shard's ops from the base
 * cost model, the collectives between them, memory per device, the pipeline. */
#include "cost_parallel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAIR_BYTES 8.0 /* greedy sampling over vocabulary slices: an fp32 value and an int32 index per sequence */

/* Position of each op of a layer in the base cost model's order (cost_step: 12 per layer). */
enum { L_ATTN_NORM = 0, L_QKV, L_ROPE, L_KV_APPEND, L_ATTENTION, L_O_PROJ, L_ATTN_RES, L_FFN_NORM, L_GATE_UP, L_SWIGLU,
       L_DOWN, L_FFN_RES, L_OPS };

static void divisors(int64_t n, char *buf, size_t len) {
    size_t used = 0;
    buf[0] = '\0';
    for (int64_t k = 1; k <= n && used + 24 < len; k++)
        if (n % k == 0) {
            int w = snprintf(buf + used, len - used, "%s%lld", used ? ", " : "", (long long)k);
            if (w < 0) break;
            used += (size_t)w;
        }
}

xf_status parallel_split_of(const model_config *cfg, const parallel_plan *plan, const device_spec *d, parallel_split *out) {
    if (!cfg || !plan || !d || !out) return xf_errorf(XF_EINVAL, "parallel: missing model, plan, device or output");
    memset(out, 0, sizeof *out);
    xf_status s = config_validate(cfg);
    if (s) return s;
    const int tp = plan->tp, pp = plan->pp;
    char list[256];
    if (tp < 1 || tp > 4096 || pp < 1 || pp > 4096)
        return xf_errorf(XF_EINVAL, "--tp %d --pp %d: give degrees of 1 or more", tp, pp);
    if (cfg->n_heads % tp) {
        divisors(cfg->n_heads, list, sizeof list);
        return xf_errorf(XF_EINVAL,
                         "--tp %d: %s's %lld attention heads do not split evenly over %d devices (tensor parallelism gives "
                         "each device whole heads, as Megatron-LM does); give a --tp that divides %lld: %s",
                         tp, cfg->name, (long long)cfg->n_heads, tp, (long long)cfg->n_heads, list);
    }
    int64_t kv = cfg->n_kv_heads, kv_dev = kv, copies = 1;
    if (kv % tp == 0) {
        kv_dev = kv / tp;
    } else if (tp % kv == 0) {
        kv_dev = 1;
        copies = tp / kv; /* fewer KV heads than devices: each held by tp / kv of them */
    } else {
        return xf_errorf(XF_EINVAL,
                         "--tp %d: %s's %lld KV heads neither split evenly over %d devices nor replicate evenly (%d is not a "
                         "multiple of %lld); give a --tp that divides %lld or is a multiple of %lld",
                         tp, cfg->name, (long long)kv, tp, tp, (long long)kv, (long long)kv, (long long)kv);
    }
    const int has_dense = cfg->n_experts <= 0 || model_moe_layers(cfg) < cfg->n_layers;
    if (has_dense && cfg->d_ff % tp) {
        divisors(cfg->d_ff, list, sizeof list);
        return xf_errorf(XF_EINVAL, "--tp %d: %s's FFN width d_ff = %lld does not split evenly over %d devices; give a --tp that divides it: %.160s",
                         tp, cfg->name, (long long)cfg->d_ff, tp, list);
    }
    if (cfg->n_experts > 0 && plan->replicate_vocab && (cfg->d_ff_expert % tp || cfg->d_ff_shared % tp)) {
        const int64_t f = cfg->d_ff_expert % tp ? cfg->d_ff_expert : cfg->d_ff_shared;
        divisors(f, list, sizeof list);
        return xf_errorf(XF_EINVAL,
                         "--tp %d: %s's %s width %lld does not split evenly over %d devices (each device holds every expert's "
                         "share of the columns); give a --tp that divides %lld: %.160s",
                         tp, cfg->name, cfg->d_ff_expert % tp ? "expert FFN" : "shared expert", (long long)f, tp, (long long)f, list);
    }
    if (cfg->n_experts > 0 && !plan->replicate_vocab && cfg->n_experts % tp) {
        divisors(cfg->n_experts, list, sizeof list);
        return xf_errorf(XF_EINVAL,
                         "--tp %d: %s's %lld experts do not split evenly over %d devices (expert parallelism gives each device "
                         "whole experts); give a --tp that divides %lld: %.160s",
                         tp, cfg->name, (long long)cfg->n_experts, tp, (long long)cfg->n_experts, list);
    }
    if (pp > cfg->n_layers || pp > PARALLEL_MAX_STAGES)
        return xf_errorf(XF_EINVAL, "--pp %d: %s has %lld layers; a stage holds at least one layer and xfprof models at most %d stages",
                         pp, cfg->name, (long long)cfg->n_layers, PARALLEL_MAX_STAGES);
    const int64_t devices = (int64_t)tp * pp;
    if (plan->gpus > 0 && devices > plan->gpus)
        return xf_errorf(XF_EINVAL, "--tp %d x --pp %d = %lld devices, more than the %d of --gpus", tp, pp, (long long)devices,
                         plan->gpus);
    if (plan->micro_batches < 0 || (plan->micro_batches > 1 && pp == 1))
        return xf_errorf(XF_EINVAL, "--micro-batches %d with --pp 1: micro-batches fill a pipeline of stages; give --pp 2 or more",
                         plan->micro_batches);
    if (devices > 1 && !(d->link.bandwidth_Bps > 0))
        return xf_errorf(XF_EINVAL,
                         "device %s has no link between devices in its devices file: a split over %lld devices needs one; add "
                         "\"link\": {\"name\", \"bandwidth_Bps\" (per device, per direction), \"latency_s\"} (data/devices.json "
                         "gives NVLink / PCIe for the built-in GPUs)",
                         d->name, (long long)devices);
    const int gpn = d->gpus_per_node;
    if (devices > 1 && gpn > 0 && devices > gpn && !(d->node_link.bandwidth_Bps > 0))
        return xf_errorf(XF_EINVAL,
                         "%lld devices span nodes of %d %s, but its devices file gives no \"node_link\" (InfiniBand / RoCE per "
                         "device); add one or give --tp x --pp <= %d",
                         (long long)devices, gpn, d->name, gpn);

    out->shard = *cfg;
    out->shard.n_heads = cfg->n_heads / tp;
    out->shard.n_kv_heads = kv_dev;
    out->shard.d_ff = has_dense ? cfg->d_ff / tp : (cfg->d_ff + tp - 1) / tp;
    out->shard.vocab = plan->replicate_vocab ? cfg->vocab : (cfg->vocab + tp - 1) / tp; /* vocabulary-parallel; the last slice padded */
    out->replicate_vocab = plan->replicate_vocab;
    if ((s = config_validate(&out->shard))) return xf_error_prefix(s, "parallel: the shard of --tp %d: ", tp);
    out->tp = tp;
    out->pp = pp;
    out->kv_copies = (int)copies;
    out->experts_tp = plan->replicate_vocab; /* the reference model's split: experts by columns */
    if (plan->replicate_vocab) {
        out->shard.d_ff_expert = cfg->d_ff_expert / tp;
        out->shard.d_ff_shared = cfg->d_ff_shared / tp;
    }
    out->experts_per_device = cfg->n_experts > 0 && !plan->replicate_vocab ? cfg->n_experts / tp : 0;
    out->tp_node = gpn > 0 && tp > gpn;
    out->gpus_per_node = gpn;
    const int64_t base = cfg->n_layers / pp, extra = cfg->n_layers % pp;
    out->stage_first[0] = 0;
    for (int st = 0; st < pp; st++) out->stage_first[st + 1] = out->stage_first[st] + base + (st < extra ? 1 : 0);
    return XF_OK;
}

int parallel_stage_of(const parallel_split *sp, int layer, int head) {
    if (layer < 0) return head ? sp->pp - 1 : 0;
    for (int st = 0; st < sp->pp; st++)
        if (layer < sp->stage_first[st + 1]) return st;
    return sp->pp - 1;
}

/* 1: layer l runs expert parallel (dispatch / combine); an MoE layer split by columns (experts_tp)
 * is costed as the shard's dense-like layer with its one all-reduce after down. */
static int moe_split(const model_config *cfg, const parallel_split *sp, int64_t l) {
    return sp->tp > 1 && !sp->experts_tp && model_layer_is_moe(cfg, l);
}

int64_t parallel_step_op_count(const model_config *cfg, const parallel_split *sp) {
    if (!cfg || !sp || sp->tp < 1 || sp->pp < 1) return 0;
    const int comm = sp->tp > 1;
    int64_t n = 4 + 2 * (comm && !sp->replicate_vocab) + (sp->pp - 1);
    for (int64_t l = 0; l < cfg->n_layers; l++) n += L_OPS + (moe_split(cfg, sp, l) ? 4 : 2 * comm);
    return n;
}

double parallel_allreduce_bytes(double buffer_bytes, int n) { return n > 1 ? 2.0 * (n - 1) / n * buffer_bytes : 0.0; }
double parallel_allgather_bytes(double result_bytes, int n) { return n > 1 ? (double)(n - 1) / n * result_bytes : 0.0; }

static void comm_set(cost_op *op, xf_phase ph, int layer, op_kind kind, double bus_bytes, int hops, int node) {
    memset(op, 0, sizeof *op);
    op->phase = ph;
    op->layer = layer;
    op->kind = kind;
    op->compute = XF_COMPUTE_FP32;
    op->comm_bytes = bus_bytes;
    op->comm_hops = hops;
    op->comm_node = node;
}

/* An op of the MoE block run on N / tp of the rows (expert parallel): the full model's op over
 * tp, but the weights each device reads: the norm's whole, the router whole plus its share of the
 * distinct experts (every device holds tp-th of them and, under uniform routing, reads tp-th of
 * the distinct ones the step selects). */
static cost_op moe_share(cost_op full, int tp, double router_bytes) {
    const double f = 1.0 / tp;
    full.flops *= f;
    full.act_in_bytes *= f;
    full.act_out_bytes *= f;
    if (full.kind == OP_GATE_UP)
        full.weight_bytes = router_bytes + (full.weight_bytes - router_bytes) * f;
    else if (full.kind != OP_FFN_NORM)
        full.weight_bytes *= f;
    full.bytes = full.weight_bytes + full.act_in_bytes + full.act_out_bytes + full.kv_read_bytes + full.kv_write_bytes;
    return full;
}

xf_status parallel_step(const model_config *cfg, const workload *w, const parallel_split *sp, const cost_step_sums *sums,
                        cost_op *ops, int64_t count) {
    if (!cfg || !w || !sp || !sums || !ops) return xf_errorf(XF_EINVAL, "parallel: missing config, workload, split, step or output");
    const int64_t need = parallel_step_op_count(cfg, sp);
    if (need <= 0 || count < need)
        return xf_errorf(XF_EINVAL, "parallel: output holds %lld ops, the step has %lld", (long long)count, (long long)need);
    const int64_t n_base = cost_step_op_count(cfg);
    const int any_moe = sp->tp > 1 && cfg->n_experts > 0 && !sp->experts_tp;
    cost_op *sh = calloc((size_t)n_base, sizeof *sh), *full = any_moe ? calloc((size_t)n_base, sizeof *full) : NULL;
    if (!sh || (any_moe && !full)) {
        free(sh);
        free(full);
        return xf_errorf(XF_ENOMEM, "parallel: out of memory for %lld ops", (long long)n_base);
    }
    xf_status s = cost_step_of_sums(&sp->shard, w, sums, sh, n_base);
    if (!s && any_moe) s = cost_step_of_sums(cfg, w, sums, full, n_base);
    if (s) {
        free(sh);
        free(full);
        return s;
    }
    const int tp = sp->tp, comm = tp > 1, tpn = sp->tp_node;
    const double router = any_moe ? cost_moe_router_bytes(cfg, w) : 0.0, k = (double)cfg->experts_per_tok;
    const xf_phase ph = sums->phase;
    int64_t i = 0;
    ops[i++] = sh[0]; /* embedding of the vocabulary slice */
    if (comm && !sp->replicate_vocab)
        comm_set(&ops[i++], ph, -1, OP_ALL_REDUCE, parallel_allreduce_bytes(sh[0].act_out_bytes, tp), 2 * (tp - 1), tpn);
    for (int64_t l = 0; l < cfg->n_layers; l++) {
        const cost_op *lo = &sh[1 + L_OPS * l], *lf = any_moe ? &full[1 + L_OPS * l] : NULL;
        const int layer = (int)l, moe = moe_split(cfg, sp, l);
        for (int j = 0; j < L_OPS; j++) {
            ops[i++] = (moe && j >= L_FFN_NORM) ? moe_share(lf[j], tp, router) : lo[j];
            /* the buffers the collectives move are the adjacent ops' activations */
            if (j == L_O_PROJ && comm)
                comm_set(&ops[i++], ph, layer, OP_ALL_REDUCE, parallel_allreduce_bytes(lo[j].act_out_bytes, tp), 2 * (tp - 1), tpn);
            if (moe && (j == L_FFN_NORM || j == L_DOWN)) /* dispatch / combine: k copies of each of this device's N / tp rows */
                comm_set(&ops[i++], ph, layer, OP_ALL_TO_ALL, parallel_allgather_bytes(k * lf[L_FFN_NORM].act_out_bytes / tp, tp),
                         tp - 1, tpn);
            if (j == L_DOWN && comm && !moe)
                comm_set(&ops[i++], ph, layer, OP_ALL_REDUCE, parallel_allreduce_bytes(lo[j].act_out_bytes, tp), 2 * (tp - 1), tpn);
            if (j == L_FFN_RES && moe) /* every device's N / tp rows to every device */
                comm_set(&ops[i++], ph, layer, OP_ALL_GATHER, parallel_allgather_bytes(lo[j].act_out_bytes, tp), tp - 1, tpn);
        }
        const int st = parallel_stage_of(sp, layer, 0);
        if (st < sp->pp - 1 && l + 1 == sp->stage_first[st + 1]) {
            /* the residual stream to the next stage's device (devices numbered stage by stage): over
             * node_link when that one is the first of a node */
            const int64_t next_first_device = (int64_t)(st + 1) * tp;
            const int cross = sp->gpus_per_node > 0 && next_first_device % sp->gpus_per_node == 0;
            comm_set(&ops[i++], ph, layer, OP_SEND_RECV, lo[L_FFN_RES].act_out_bytes, 1, cross);
        }
    }
    const int64_t head = 1 + L_OPS * cfg->n_layers;
    for (int j = 0; j < 3; j++) ops[i++] = sh[head + j]; /* final_norm, lm_head and argmax of the slice */
    if (comm && !sp->replicate_vocab)
        comm_set(&ops[i++], ph, -1, OP_ALL_GATHER, parallel_allgather_bytes(PAIR_BYTES * sums->seqs * tp, tp), tp - 1, tpn);
    free(sh);
    free(full);
    return XF_OK;
}

/* What a stage's device holds whatever the batch: its weights and its KV bytes per sequence of
 * prompt + gen tokens. Weights: a dense layer's are the weights its ops read in any step (every
 * matrix, norm and bias once); an MoE layer's its attention's, its norm, the router and
 * experts_per_device whole experts; the embedding slice on stage 0, final norm and lm_head slice
 * on the last (the embedding counted once when tied on one stage). KV: each layer's bytes per
 * token (its kv_append of one token) times the tokens it keeps (a windowed layer at most the window). */
static xf_status stage_fixed(const model_config *cfg, const workload *w, const parallel_split *sp, int stage, double *weights,
                             double *kv_per_seq) {
    *weights = *kv_per_seq = 0.0;
    const int64_t n = cost_step_op_count(cfg);
    cost_op *o = calloc((size_t)n, sizeof *o);
    if (!o) return xf_errorf(XF_ENOMEM, "parallel: out of memory for %lld ops", (long long)n);
    cost_step_sums one = {XF_PREFILL, 1, 1, 1, 1, 0, 0, 0}; /* one sequence, one token */
    xf_status s = cost_step_of_sums(&sp->shard, w, &one, o, n);
    if (s) {
        free(o);
        return s;
    }
    const double len = (double)(w->prompt + w->gen);
    double wt = 0, kv = 0;
    for (int64_t l = sp->stage_first[stage]; l < sp->stage_first[stage + 1]; l++) {
        const cost_op *lo = &o[1 + L_OPS * l];
        const int moe = model_layer_is_moe(cfg, l);
        for (int j = 0; j < (moe ? L_GATE_UP : L_OPS); j++) wt += lo[j].weight_bytes;
        if (moe && sp->experts_tp) /* every expert, each its columns' share */
            wt += cost_moe_router_bytes(cfg, w) + (double)cfg->n_experts * cost_moe_expert_bytes(&sp->shard, w);
        else if (moe)
            wt += cost_moe_router_bytes(cfg, w) + (double)sp->experts_per_device * cost_moe_expert_bytes(cfg, w);
        const double win = (double)model_layer_window(cfg, l);
        kv += lo[L_KV_APPEND].kv_write_bytes * (win > 0 && win < len ? win : len);
    }
    const cost_op *head = &o[1 + L_OPS * cfg->n_layers];
    if (stage == 0) wt += cost_embedding_bytes(&sp->shard, w);
    if (stage == sp->pp - 1) wt += head[0].weight_bytes + (!cfg->tied_embeddings || sp->pp > 1 ? head[1].weight_bytes : 0.0);
    free(o);
    *weights = wt;
    *kv_per_seq = kv;
    return XF_OK;
}

static void memory_fill(const workload *w, const parallel_split *sp, double weights, double kv_per_seq, double batch,
                        cost_memory *out) {
    workload b = *w;
    b.batch = (int64_t)batch;
    cost_memory shard;
    cost_memory_of(&sp->shard, &b, &shard); /* the shard's working buffers of the prefill step */
    out->weights_bytes = weights;
    out->kv_bytes = batch * kv_per_seq;
    out->kv_bytes_per_token = (double)(w->prompt + w->gen) > 0 ? kv_per_seq / (double)(w->prompt + w->gen) : 0.0;
    out->activations_bytes = shard.activations_bytes;
    out->total_bytes = out->weights_bytes + out->kv_bytes + out->activations_bytes;
}

void parallel_memory_of(const model_config *cfg, const workload *w, const parallel_split *sp, int stage, cost_memory *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!cfg || !w || !sp || stage < 0 || stage >= sp->pp || workload_validate(w) != XF_OK) return;
    double wt, kv;
    if (stage_fixed(cfg, w, sp, stage, &wt, &kv) != XF_OK) return;
    memory_fill(w, sp, wt, kv, (double)w->batch, out);
}

void parallel_memory_max(const model_config *cfg, const workload *w, const parallel_split *sp, cost_memory *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    for (int st = 0; sp && st < sp->pp; st++) {
        cost_memory m;
        parallel_memory_of(cfg, w, sp, st, &m);
        if (m.total_bytes > out->total_bytes) *out = m;
    }
}

#define MAX_BATCH_LIMIT (1LL << 20) /* workload_validate's largest batch */

int64_t parallel_max_batch(const model_config *cfg, const workload *w, const parallel_split *sp, double capacity_bytes) {
    if (!cfg || !w || !sp || !(capacity_bytes > 0)) return 0;
    int64_t best = MAX_BATCH_LIMIT;
    for (int st = 0; st < sp->pp; st++) { /* every stage must fit: the smallest of the stages' largest batches */
        double wt, kv;
        workload one = *w;
        one.batch = 1;
        if (workload_validate(&one) != XF_OK || stage_fixed(cfg, &one, sp, st, &wt, &kv) != XF_OK) return 0;
        cost_memory m;
        memory_fill(&one, sp, wt, kv, 1.0, &m);
        if (m.total_bytes > capacity_bytes) return 0;
        int64_t lo = 1, hi = best; /* lo fits; memory grows with the batch */
        memory_fill(&one, sp, wt, kv, (double)hi, &m);
        if (m.total_bytes > capacity_bytes) {
            while (hi - lo > 1) {
                int64_t mid = lo + (hi - lo) / 2;
                memory_fill(&one, sp, wt, kv, (double)mid, &m);
                if (m.total_bytes <= capacity_bytes)
                    lo = mid;
                else
                    hi = mid;
            }
            best = lo;
        }
    }
    return best;
}

double parallel_bubble(int pp, int micro_batches) {
    const int m = micro_batches > 1 ? micro_batches : 1;
    return pp > 1 ? (double)(pp - 1) / (double)(m + pp - 1) : 0.0;
}

double parallel_pipeline_time(const double *stage_time_s, int n_stages, int micro_batches) {
    double sum = 0.0, slowest = 0.0;
    for (int st = 0; stage_time_s && st < n_stages; st++) {
        sum += stage_time_s[st];
        if (stage_time_s[st] > slowest) slowest = stage_time_s[st];
    }
    return sum + (double)((micro_batches > 1 ? micro_batches : 1) - 1) * slowest;
}
