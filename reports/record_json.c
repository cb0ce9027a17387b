/* The record as JSON. Writer: every field of core/record.h. Reader: untrusted input; every
 * field type- and range-checked, messages name the JSON path of what was wrong. */
#include "record_json.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "core/fileio.h"
#include "core/limits.h"
#include "core/sysmem.h"
#include "core/units.h"
#include "core/json_util.h"
#include "core/record_kv.h"
#include "record_kv_json.h"

#define MAX_RECORD_BYTES ((size_t)1 << 30)
#define MAX_POINTS 1000000
#define MAX_OPS (1LL << 22)
#define MAX_SAMPLES 1000000

/* ---------- writing ---------- */

/* Each add returns 0 on OOM; `ok &=` chains keep the writer flat. */
static int add_str(cJSON *o, const char *k, const char *v) { return cJSON_AddStringToObject(o, k, v ? v : "") != NULL; }

/* Adds `item` (may be NULL: 0) under key k. cJSON copies the key, which can fail for lack of memory
 * and then leaves the item unowned: it is deleted here, so a failed add never leaks. */
static int add_item(cJSON *o, const char *k, cJSON *item) {
    if (!item) return 0;
    if (cJSON_AddItemToObject(o, k, item)) return 1;
    cJSON_Delete(item);
    return 0;
}
static int add_bool(cJSON *o, const char *k, int v) { return cJSON_AddBoolToObject(o, k, v ? 1 : 0) != NULL; }

/* deepseek_v3's fields, written only for such models (optional on reading): "mla" (the latent
 * ranks, the head parts, interleaved RoPE, which form the cost model prices), "moe_routing"
 * (sigmoid scores, groups, scaling, shared experts) and rope_scaling.mscale_all_dim. 1 on success. */
static int write_mla(cJSON *o, const model_config *m) {
    cJSON *rs = cJSON_GetObjectItemCaseSensitive(o, "rope_scaling");
    if (m->rope.mscale_all_dim != 0 && !(rs && json_add_number(rs, "mscale_all_dim", m->rope.mscale_all_dim))) return 0;
    if (model_is_mla(m)) {
        cJSON *a = cJSON_AddObjectToObject(o, "mla");
        if (!(a && json_add_number(a, "q_lora_rank", (double)m->q_lora_rank) && json_add_number(a, "kv_lora_rank", (double)m->kv_lora_rank) &&
              json_add_number(a, "qk_nope_head_dim", (double)m->qk_nope_head_dim) &&
              json_add_number(a, "qk_rope_head_dim", (double)m->qk_rope_head_dim) && json_add_number(a, "v_head_dim", (double)m->v_head_dim) &&
              add_bool(a, "rope_interleave", m->rope_interleave) && add_str(a, "form", m->mla_absorbed ? "absorbed" : "naive")))
            return 0;
    }
    if (m->moe_score == MOE_SCORE_SIGMOID_GROUPED) { /* the shared experts are d_ff_shared */
        cJSON *g = cJSON_AddObjectToObject(o, "moe_routing");
        if (!(g && add_str(g, "scoring", "sigmoid") && json_add_number(g, "n_group", (double)m->n_group) &&
              json_add_number(g, "topk_group", (double)m->topk_group) &&
              json_add_number(g, "routed_scaling_factor", m->routed_scaling_factor)))
            return 0;
    }
    return 1;
}

/* Reads what write_mla wrote; absent objects leave the fields zero (older records). */
static xf_status read_mla(const cJSON *j, const char *ctx, model_config *m) {
    xf_status s;
    int present = 0;
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(j, "rope_scaling");
    if (cJSON_IsObject(rs) && (s = json_opt_number(rs, "mscale_all_dim", ctx, &m->rope.mscale_all_dim, &present))) return s;
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "mla");
    if (a && !cJSON_IsNull(a)) {
        char actx[160], form[16];
        snprintf(actx, sizeof actx, "%s.mla", ctx);
        if (!cJSON_IsObject(a)) return xf_errorf(XF_EINVAL, "%s: must be an object", actx);
        if ((s = json_get_int(a, "q_lora_rank", actx, 0, 1 << 22, &m->q_lora_rank)) ||
            (s = json_get_int(a, "kv_lora_rank", actx, 1, 1 << 22, &m->kv_lora_rank)) ||
            (s = json_get_int(a, "qk_nope_head_dim", actx, 1, 1 << 16, &m->qk_nope_head_dim)) ||
            (s = json_get_int(a, "qk_rope_head_dim", actx, 1, 1 << 16, &m->qk_rope_head_dim)) ||
            (s = json_get_int(a, "v_head_dim", actx, 1, 1 << 16, &m->v_head_dim)) ||
            (s = json_get_bool(a, "rope_interleave", actx, &m->rope_interleave)) ||
            (s = json_get_string(a, "form", actx, form, sizeof form)))
            return s;
        if (strcmp(form, "naive") != 0 && strcmp(form, "absorbed") != 0)
            return xf_errorf(XF_EINVAL, "%s: field 'form' is '%s': naive or absorbed", actx, form);
        m->mla_absorbed = strcmp(form, "absorbed") == 0;
    }
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(j, "moe_routing");
    if (g && !cJSON_IsNull(g)) {
        char gctx[160], scoring[16];
        snprintf(gctx, sizeof gctx, "%s.moe_routing", ctx);
        if (!cJSON_IsObject(g)) return xf_errorf(XF_EINVAL, "%s: must be an object", gctx);
        if ((s = json_get_string(g, "scoring", gctx, scoring, sizeof scoring)) ||
            (s = json_get_int(g, "n_group", gctx, 1, 65536, &m->n_group)) ||
            (s = json_get_int(g, "topk_group", gctx, 1, 65536, &m->topk_group)) ||
            (s = json_get_number(g, "routed_scaling_factor", gctx, &m->routed_scaling_factor)))
            return s;
        if (strcmp(scoring, "sigmoid") != 0) return xf_errorf(XF_EINVAL, "%s: field 'scoring' is '%s': sigmoid", gctx, scoring);
        m->moe_score = MOE_SCORE_SIGMOID_GROUPED;
    }
    return XF_OK;
}

static cJSON *model_to_json(const record *r) {
    const model_config *m = &r->model;
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    int ok = add_str(o, "name", m->name) & add_str(o, "arch", m->arch) & json_add_number(o, "n_layers", (double)m->n_layers) &
             json_add_number(o, "d_model", (double)m->d_model) & json_add_number(o, "n_heads", (double)m->n_heads) &
             json_add_number(o, "n_kv_heads", (double)m->n_kv_heads) & json_add_number(o, "head_dim", (double)m->head_dim) &
             json_add_number(o, "d_ff", (double)m->d_ff) & json_add_number(o, "vocab", (double)m->vocab) &
             json_add_number(o, "max_ctx", (double)m->max_ctx) & json_add_number(o, "rope_theta", m->rope_theta) &
             json_add_number(o, "norm_eps", m->norm_eps) & add_bool(o, "tied_embeddings", m->tied_embeddings) &
             add_bool(o, "qkv_bias", m->qkv_bias) & json_add_number(o, "params", (double)r->model_params) &
             json_add_number(o, "kv_bytes_per_token", r->kv_bytes_per_token);
    /* newer architectures (optional on reading: older records lack them) */
    ok = ok && add_bool(o, "o_bias", m->o_bias) && add_bool(o, "mlp_bias", m->mlp_bias) && add_bool(o, "qk_norm", m->qk_norm);
    ok = ok && json_add_number(o, "active_params", (double)r->model_active_params) &&
         json_add_number(o, "d_ff_shared", (double)m->d_ff_shared) && add_bool(o, "shared_expert_gate", m->shared_expert_gate);
    cJSON *rs = ok ? cJSON_AddObjectToObject(o, "rope_scaling") : NULL;
    ok = rs && add_str(rs, "type", rope_kind_name(m->rope.kind)) && json_add_number(rs, "factor", m->rope.factor) &&
         json_add_number(rs, "low_freq_factor", m->rope.low_freq_factor) &&
         json_add_number(rs, "high_freq_factor", m->rope.high_freq_factor) &&
         json_add_number(rs, "original_max_position_embeddings", (double)m->rope.original_ctx) &&
         json_add_number(rs, "beta_fast", m->rope.beta_fast) && json_add_number(rs, "beta_slow", m->rope.beta_slow) &&
         json_add_number(rs, "attention_factor", m->rope.attention_factor) && add_bool(rs, "truncate", m->rope.truncate);
    ok = ok && json_add_number(o, "sliding_window", (double)m->sliding_window);
    cJSON *wl = ok ? cJSON_AddArrayToObject(o, "window_layers") : NULL; /* indices of the windowed layers */
    ok = wl != NULL;
    for (int64_t l = 0; ok && l < m->n_layers; l++)
        if (model_layer_window(m, l)) ok = cJSON_AddItemToArray(wl, cJSON_CreateNumber((double)l));
    ok = ok && json_add_number(o, "n_experts", (double)m->n_experts) && json_add_number(o, "experts_per_tok", (double)m->experts_per_tok) &&
         json_add_number(o, "d_ff_expert", (double)m->d_ff_expert) && add_bool(o, "norm_topk_prob", m->norm_topk_prob);
    cJSON *dl = ok ? cJSON_AddArrayToObject(o, "dense_layers") : NULL; /* MoE models: layers with the dense FFN */
    ok = dl != NULL;
    for (int64_t l = 0; ok && m->n_experts > 0 && l < m->n_layers; l++)
        if (!model_layer_is_moe(m, l)) ok = cJSON_AddItemToArray(dl, cJSON_CreateNumber((double)l));
    ok = ok && write_mla(o, m);
    if (ok && (m->embed_scale != 0 || m->sandwich_norms || m->ffn_gelu || m->attn_scalar != 0 || m->rope_local_theta != 0)) {
        cJSON *g = cJSON_AddObjectToObject(o, "gemma3"); /* optional: written for gemma3 models only */
        ok = g && json_add_number(g, "embed_scale", m->embed_scale) && add_bool(g, "sandwich_norms", m->sandwich_norms) &&
             add_bool(g, "gelu_tanh_ffn", m->ffn_gelu) && json_add_number(g, "query_pre_attn_scalar", m->attn_scalar) &&
             json_add_number(g, "rope_local_base_freq", m->rope_local_theta);
    }
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static cJSON *device_to_json(const device_spec *d) {
    cJSON *o = cJSON_CreateObject();
    cJSON *peaks = cJSON_CreateObject();
    cJSON *ridge = cJSON_CreateObject();
    if (!o || !peaks || !ridge) goto fail;
    int ok = add_str(o, "name", d->name) & add_str(o, "description", d->description) & add_str(o, "kind", d->kind) &
             add_str(o, "source", d->source) & add_bool(o, "measured", d->measured) &
             json_add_number(o, "memory_bytes", d->memory_bytes) & json_add_number(o, "bandwidth_Bps", d->bandwidth_Bps) &
             json_add_number(o, "cache_bytes", d->cache_bytes) &
             json_add_number(o, "cache_bandwidth_Bps", d->cache_bandwidth_Bps);
    ok &= device_link_to_json(o, "link", &d->link) & device_link_to_json(o, "node_link", &d->node_link); /* optional */
    if (ok && d->gpus_per_node > 0) ok &= json_add_number(o, "gpus_per_node", d->gpus_per_node);
    for (int c = 0; c < XF_COMPUTE_COUNT; c++) {
        ok &= json_add_number(peaks, compute_name((xf_compute)c), d->peak_flops[c]);
        ok &= json_add_number(ridge, compute_name((xf_compute)c), device_ridge(d, (xf_compute)c));
    }
    if (!ok) goto fail;
    /* add_item deletes an item it could not add */
    if (!add_item(o, "peak_flops", peaks)) {
        cJSON_Delete(ridge);
        cJSON_Delete(o);
        return NULL;
    }
    if (!add_item(o, "ridge", ridge)) { /* derived: written for readers, ignored on load */
        cJSON_Delete(o);
        return NULL;
    }
    return o;
fail:
    cJSON_Delete(o);
    cJSON_Delete(peaks);
    cJSON_Delete(ridge);
    return NULL;
}

/* An array of exact numbers (cJSON's own double arrays lose the last bits); NULL when out of memory. */
/* An array of exact numbers (cJSON's own double arrays lose the last bits); NULL when out of memory. */
static cJSON *exact_array(const double *v, int n) {
    cJSON *s = cJSON_CreateArray();
    for (int i = 0; s && i < n; i++) {
        cJSON *x = json_exact_number(v[i]);
        if (!x || !cJSON_AddItemToArray(s, x)) {
            cJSON_Delete(x);
            cJSON_Delete(s);
            s = NULL;
        }
    }
    return s;
}

static cJSON *op_to_json(const record_op *op) {
    const cost_op *c = &op->cost;
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    int ok = add_str(o, "phase", phase_name(c->phase)) & json_add_number(o, "layer", c->layer) &
             add_str(o, "op", op_kind_name(c->kind)) & add_str(o, "compute", compute_name(c->compute)) &
             json_add_number(o, "flops", c->flops) & json_add_number(o, "bytes", c->bytes) &
             json_add_number(o, "weight_bytes", c->weight_bytes) & json_add_number(o, "act_in_bytes", c->act_in_bytes) &
             json_add_number(o, "act_out_bytes", c->act_out_bytes) & json_add_number(o, "kv_read_bytes", c->kv_read_bytes) &
             json_add_number(o, "kv_write_bytes", c->kv_write_bytes) & json_add_number(o, "intensity", op->intensity) &
             add_str(o, "bound", bound_name(op->bound)) & json_add_number(o, "time_s", op->time_s) &
             json_add_number(o, "predicted_time_s", op->predicted_time_s) & json_add_number(o, "share", op->share) &
             add_bool(o, "measured", op->measured) &
             add_str(o, "bytes_source", op->bytes_from_counters ? "counters" : "model");
    if (ok && op->bytes_from_counters) ok &= json_add_number(o, "measured_bytes", op->measured_bytes);
    if (ok && op->source[0]) ok &= add_str(o, "source", op->source);
    if (ok && op_kind_is_comm(c->kind)) /* collectives: the bytes over the link (optional on read) */
        ok &= json_add_number(o, "comm_bytes", c->comm_bytes) & json_add_number(o, "comm_hops", c->comm_hops) &
              add_str(o, "comm_link", c->comm_node ? "node_link" : "link") & json_add_number(o, "util_link", op->util_link);
    if (ok && op->measured) {
        ok &= add_item(o, "samples_s", exact_array(op->samples_s, op->n_samples));
        ok &= json_add_number(o, "spread_s", op->spread_s) & json_add_number(o, "util_compute", op->util_compute) &
              json_add_number(o, "util_memory", op->util_memory);
        ok &= json_add_number(o, "util_compute_machine", op->util_compute_machine) &
              json_add_number(o, "util_memory_machine", op->util_memory_machine);
        if (op->confidence_boot > 0)
            ok &= json_add_number(o, "confidence", op->confidence) & json_add_number(o, "confidence_boot", op->confidence_boot);
    }
    if (ok && op->calibrated_time_s > 0) /* issue 17: the calibrated prediction (optional on read) */
        ok &= json_add_number(o, "calibrated_time_s", op->calibrated_time_s) & add_bool(o, "calib_clamped", op->calib_clamped);
    if (ok && op->n_counters > 0) {
        cJSON *cs = cJSON_AddObjectToObject(o, "counters");
        ok &= cs != NULL;
        for (int i = 0; ok && i < op->n_counters; i++) {
            const record_counter *k = &op->counters[i];
            ok &= k->supported ? json_add_number(cs, k->name, k->value) : add_str(cs, k->name, "unsupported");
        }
    }
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* The split over devices: tp, pp, micro_batches in the workload; the section "parallel". */
static int parallel_to_json(cJSON *o, cJSON *w, const record_point *p) {
    const record_parallel *q = &p->par;
    int ok = json_add_number(w, "tp", q->tp) & json_add_number(w, "pp", q->pp) &
             json_add_number(w, "micro_batches", q->micro_batches);
    cJSON *j = ok ? cJSON_AddObjectToObject(o, "parallel") : NULL;
    if (!j) return 0;
    return ok & json_add_number(j, "devices", q->devices) & json_add_number(j, "kv_copies", q->kv_copies) &
           json_add_number(j, "experts_per_device", q->experts_per_device) & json_add_number(j, "bubble", q->bubble) &
           json_add_number(j, "prefill_step_s", q->prefill_step_s) & json_add_number(j, "decode_step_s", q->decode_step_s) &
           json_add_number(j, "comm_share", q->comm_share) & json_add_number(j, "comm_bytes", q->comm_bytes);
}

/* "experts": {"n_experts": E, "prefill": {"steps": s, "tokens": [[per expert] per layer],
 * "distinct": [per layer]}, "decode": {...}}. */
static int experts_to_json(cJSON *o, const record_point *p) {
    cJSON *ej = cJSON_AddObjectToObject(o, "experts");
    int ok = ej != NULL && json_add_number(ej, "n_experts", (double)p->n_experts);
    const int64_t L = p->n_expert_layers, E = p->n_experts;
    for (int ph = 0; ok && ph < XF_PHASE_COUNT; ph++) {
        cJSON *pj = cJSON_AddObjectToObject(ej, ph == XF_PREFILL ? "prefill" : "decode");
        ok &= pj != NULL && json_add_number(pj, "steps", (double)p->expert_steps[ph]);
        cJSON *tj = ok ? cJSON_AddArrayToObject(pj, "tokens") : NULL, *dj = ok ? cJSON_AddArrayToObject(pj, "distinct") : NULL;
        ok &= tj && dj;
        for (int64_t l = 0; ok && l < L; l++) {
            cJSON *row = cJSON_CreateArray();
            ok &= row != NULL && cJSON_AddItemToArray(tj, row);
            for (int64_t e = 0; ok && e < E; e++) {
                cJSON *v = cJSON_CreateNumber((double)p->expert_tokens[((int64_t)ph * L + l) * E + e]);
                ok &= v != NULL && cJSON_AddItemToArray(row, v);
            }
            cJSON *dv = ok ? cJSON_CreateNumber((double)p->expert_distinct[(int64_t)ph * L + l]) : NULL;
            ok &= dv != NULL && cJSON_AddItemToArray(dj, dv);
        }
    }
    return ok;
}

/* "concurrent": the pulses around the repetitions and what they made of the machine (issue 17). */
static int concurrent_to_json(cJSON *o, const record_concurrent *cc) {
    cJSON *c = cJSON_AddObjectToObject(o, "concurrent");
    if (!c) return 0;
    return add_item(c, "pulse_bandwidth_Bps", exact_array(cc->pulse_bandwidth_Bps, cc->n_pulses)) &&
           add_item(c, "pulse_fp32_flops", exact_array(cc->pulse_fp32_flops, cc->n_pulses)) &&
           (json_add_number(c, "pulse_every", cc->pulse_every) & json_add_number(c, "pulse_s", cc->pulse_s) &
            json_add_number(c, "run_s", cc->run_s) & json_add_number(c, "machine_bandwidth_Bps", cc->machine_bandwidth_Bps) &
            json_add_number(c, "machine_fp32_flops", cc->machine_fp32_flops) &
            json_add_number(c, "bandwidth_Bps", cc->bandwidth_Bps) & json_add_number(c, "fp32_flops", cc->fp32_flops) &
            json_add_number(c, "threshold", cc->threshold) & add_bool(c, "contended", cc->contended) &
            (!cc->cpu_wait_measured || json_add_number(c, "cpu_wait_share", cc->cpu_wait_share)));
}

static cJSON *point_to_json(const record_point *p) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    int ok = 1;
    cJSON *w = cJSON_AddObjectToObject(o, "workload");
    ok &= w != NULL;
    if (ok)
        ok &= json_add_number(w, "batch", (double)p->wl.batch) & json_add_number(w, "prompt", (double)p->wl.prompt) &
              json_add_number(w, "gen", (double)p->wl.gen) & add_str(w, "wdtype", dtype_name(p->wl.wdtype)) &
              add_str(w, "adtype", dtype_name(p->wl.adtype)) & add_str(w, "kvdtype", dtype_name(p->wl.kvdtype)) &
              json_add_number(w, "quant_group", p->wl.quant_group);
    if (ok && p->par.tp > 0) ok &= parallel_to_json(o, w, p); /* optional on read */
    if (ok && p->run.backend[0]) {
        const record_run_info *ri = &p->run;
        cJSON *r = cJSON_AddObjectToObject(o, "run");
        ok &= r != NULL;
        if (ok)
            ok &= add_str(r, "backend", ri->backend) & json_add_number(r, "threads", ri->threads) &
                  json_add_number(r, "reps", ri->reps) & json_add_number(r, "warmup", ri->warmup) &
                  add_str(r, "kv_policy", ri->kv_policy) & add_str(r, "kv_alloc", ri->kv_alloc) &
                  json_add_number(r, "seed", (double)ri->seed) & json_add_number(r, "timer_overhead_s", ri->timer_overhead_s);
    }
    cJSON *ops = ok ? cJSON_AddArrayToObject(o, "ops") : NULL;
    ok &= ops != NULL;
    for (int64_t i = 0; ok && i < p->n_ops; i++) {
        cJSON *op = op_to_json(&p->ops[i]);
        ok &= op != NULL && cJSON_AddItemToArray(ops, op);
    }
    const record_summary *s = &p->summary;
    cJSON *sj = ok ? cJSON_AddObjectToObject(o, "summary") : NULL;
    ok &= sj != NULL;
    if (ok) {
        ok &= json_add_number(sj, "ttft_s", s->ttft_s) & json_add_number(sj, "tpot_s", s->tpot_s) &
              json_add_number(sj, "tokens_per_s", s->tokens_per_s) &
              json_add_number(sj, "prefill_tokens_per_s", s->prefill_tokens_per_s) &
              json_add_number(sj, "decode_tokens_per_s", s->decode_tokens_per_s) &
              json_add_number(sj, "decode_context", (double)s->decode_context) &
              json_add_number(sj, "prefill_time_s", s->prefill_time_s) & json_add_number(sj, "decode_time_s", s->decode_time_s) &
              json_add_number(sj, "max_batch", (double)s->max_batch);
        cJSON *sb = cJSON_AddObjectToObject(sj, "share_bound");
        ok &= sb != NULL;
        for (int b = 0; ok && b < XF_BOUND_COUNT; b++) ok &= json_add_number(sb, bound_name((xf_bound)b), s->share_bound[b]);
        if (ok && s->verdict_boot > 0)
            ok &= json_add_number(sj, "verdict_confidence", s->verdict_confidence) &
                  json_add_number(sj, "verdict_boot", s->verdict_boot);
        if (ok && (s->predicted_ttft_s > 0 || s->predicted_tpot_s > 0)) /* issue 17 (optional on read) */
            ok &= json_add_number(sj, "predicted_ttft_s", s->predicted_ttft_s) & json_add_number(sj, "predicted_tpot_s", s->predicted_tpot_s);
    }
    if (ok && p->concurrent.n_pulses > 0) ok &= concurrent_to_json(o, &p->concurrent);
    const record_memory *m = &p->memory;
    cJSON *mj = ok ? cJSON_AddObjectToObject(o, "memory") : NULL;
    ok &= mj != NULL;
    if (ok)
        ok &= json_add_number(mj, "weights_bytes", m->weights_bytes) & json_add_number(mj, "kv_bytes", m->kv_bytes) &
              json_add_number(mj, "kv_bytes_per_token", m->kv_bytes_per_token) &
              json_add_number(mj, "activations_bytes", m->activations_bytes) &
              json_add_number(mj, "total_bytes", m->total_bytes) & json_add_number(mj, "capacity_bytes", m->capacity_bytes) &
              json_add_number(mj, "active_weights_bytes", m->active_weights_bytes);
    if (ok && p->n_cpu > 0) { /* optional: records before it have none */
        cJSON *cj = cJSON_AddObjectToObject(o, "cpu_step_s");
        ok &= cj != NULL && add_item(cj, "prefill", exact_array(p->cpu_prefill_s, p->n_cpu)) &&
              add_item(cj, "decode", exact_array(p->cpu_decode_s, p->n_cpu));
    }
    if (ok && p->tokens && p->n_seqs > 0) {
        cJSON *toks = cJSON_AddArrayToObject(o, "tokens");
        ok &= toks != NULL;
        for (int64_t i = 0; ok && i < p->n_seqs; i++) {
            cJSON *row = cJSON_CreateIntArray((const int *)(p->tokens + i * p->n_tokens_per_seq), (int)p->n_tokens_per_seq);
            ok &= row != NULL && cJSON_AddItemToArray(toks, row);
        }
    }
    if (ok && p->n_experts > 0 && p->expert_tokens && p->expert_distinct) ok &= experts_to_json(o, p);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* The advice list (analyzers/advice.h): [{kind, point, score, title, evidence, action,
 * gain: {metric, before, after}}], best first. */
static int advice_to_json(cJSON *root, const record *r) {
    cJSON *arr = cJSON_AddArrayToObject(root, "advice");
    int ok = arr != NULL;
    for (int i = 0; ok && i < r->n_advice && i < RECORD_MAX_ADVICE; i++) {
        const record_advice *a = &r->advice[i];
        cJSON *o = cJSON_CreateObject();
        ok = o != NULL && cJSON_AddItemToArray(arr, o);
        cJSON *g = ok ? cJSON_AddObjectToObject(o, "gain") : NULL;
        ok &= g != NULL;
        if (ok)
            ok &= add_str(o, "kind", a->kind) & json_add_number(o, "point", a->point) & json_add_number(o, "score", a->score) &
                  add_str(o, "title", a->title) & add_str(o, "evidence", a->evidence) & add_str(o, "action", a->action) &
                  add_str(g, "metric", a->gain_metric) & json_add_number(g, "before", a->before) &
                  json_add_number(g, "after", a->after);
    }
    return ok;
}

/* 1 when j holds a JSON null; `where` gets its path (record.points[0].summary.ttft_s). The kv
 * section's optional objects ("requests": null) are absent, not null, when this writer makes them. */
static int find_null(const cJSON *j, const char *path, char *where, size_t len) {
    if (cJSON_IsNull(j)) {
        snprintf(where, len, "%s", path);
        return 1;
    }
    if (!cJSON_IsObject(j) && !cJSON_IsArray(j)) return 0;
    int i = 0;
    for (const cJSON *c = j->child; c; c = c->next, i++) {
        char sub[512];
        if (cJSON_IsArray(j)) snprintf(sub, sizeof sub, "%.480s[%d]", path, i);
        else snprintf(sub, sizeof sub, "%.400s.%.100s", path, c->string ? c->string : "?");
        if (find_null(c, sub, where, len)) return 1;
    }
    return 0;
}

xf_status record_json_text(const record *r, char **out) {
    *out = NULL;
    if (r->ops_left_out > 0)
        return xf_errorf(XF_EINVAL,
                         "this record was read in a stream (it is larger than 64 MiB) and holds the ops of only some of its "
                         "points (%lld left out): it is rendered but not written again; copy the file instead",
                         (long long)r->ops_left_out);
    cJSON *root = cJSON_CreateObject();
    if (!root) return xf_errorf(XF_ENOMEM, "out of memory writing the record");
    int ok = add_str(root, "format", RECORD_FORMAT) & json_add_number(root, "version", RECORD_VERSION) &
             add_str(root, "kind", r->kind) & add_str(root, "created", r->created) &
             add_str(root, "tool_version", r->tool_version) & add_bool(root, "ceilings_measured", r->ceilings_measured) &
             add_bool(root, "partial", r->partial);
    if (ok && r->partial) ok &= add_str(root, "partial_reason", r->partial_reason);
    if (ok && r->prediction[0]) ok &= add_str(root, "prediction", r->prediction); /* issue 17 (optional on read) */
    if (ok && r->prediction_note[0]) ok &= add_str(root, "prediction_note", r->prediction_note);
    cJSON *env = ok ? cJSON_AddObjectToObject(root, "env") : NULL;
    ok &= env != NULL;
    for (int i = 0; ok && i < r->n_env; i++) ok &= add_str(env, r->env[i].key, r->env[i].value);
    cJSON *m = ok ? model_to_json(r) : NULL;
    ok &= add_item(root, "model", m);
    cJSON *d = ok ? device_to_json(&r->device) : NULL;
    ok &= add_item(root, "device", d);
    cJSON *pts = ok ? cJSON_AddArrayToObject(root, "points") : NULL;
    ok &= pts != NULL;
    for (int i = 0; ok && i < r->n_points; i++) {
        cJSON *p = point_to_json(&r->points[i]);
        ok &= p != NULL && cJSON_AddItemToArray(pts, p);
    }
    if (ok && r->kv) {
        cJSON *kv = record_kv_to_json(r->kv);
        ok &= add_item(root, "kv", kv);
    }
    if (ok && r->n_advice > 0) ok &= advice_to_json(root, r);
    if (!ok) {
        cJSON_Delete(root);
        return xf_errorf(XF_ENOMEM, "out of memory writing the record");
    }
    /* Whatever xfprof writes, xfprof reads: the schema has numbers where json_add_number wrote
     * null for an infinite or NaN figure, and every reader refuses those. */
    char where[512];
    if (find_null(root, "record", where, sizeof where)) {
        cJSON_Delete(root);
        return xf_errorf(XF_EINVAL,
                         "%s is not a finite number (infinite or NaN, computed from the inputs: ceilings or sizes near 0 or "
                         "beyond range?); nothing was written",
                         where);
    }
    *out = cJSON_PrintUnformatted(root); /* compact: sweeps hold many ops */
    cJSON_Delete(root);
    return *out ? XF_OK : xf_errorf(XF_ENOMEM, "out of memory writing the record");
}

char *record_to_json(const record *r) {
    char *text = NULL;
    if (record_json_text(r, &text) != XF_OK) return NULL;
    return text;
}

/* ---------- reading ---------- */

static xf_status read_model(const cJSON *j, record *r) {
    const char *ctx = "record.model";
    if (!cJSON_IsObject(j)) return xf_errorf(XF_EINVAL, "record: missing object 'model'");
    model_config *m = &r->model;
    int64_t v;
    xf_status s;
    int tied = 0, bias = 0;
    double params;
    if ((s = json_get_string(j, "name", ctx, m->name, sizeof m->name)) ||
        (s = json_get_string(j, "arch", ctx, m->arch, sizeof m->arch)) ||
        (s = json_get_int(j, "n_layers", ctx, 1, 1 << 16, &m->n_layers)) ||
        (s = json_get_int(j, "d_model", ctx, 1, 1 << 22, &m->d_model)) ||
        (s = json_get_int(j, "n_heads", ctx, 1, 1 << 16, &m->n_heads)) ||
        (s = json_get_int(j, "n_kv_heads", ctx, 1, 1 << 16, &m->n_kv_heads)) ||
        (s = json_get_int(j, "head_dim", ctx, 1, 1 << 16, &m->head_dim)) ||
        (s = json_get_int(j, "d_ff", ctx, 1, 1 << 24, &m->d_ff)) ||
        (s = json_get_int(j, "vocab", ctx, 1, 1 << 24, &m->vocab)) ||
        (s = json_get_int(j, "max_ctx", ctx, 1, 1LL << 32, &m->max_ctx)) ||
        (s = json_get_number(j, "rope_theta", ctx, &m->rope_theta)) ||
        (s = json_get_number(j, "norm_eps", ctx, &m->norm_eps)) ||
        (s = json_get_bool(j, "tied_embeddings", ctx, &tied)) || (s = json_get_bool(j, "qkv_bias", ctx, &bias)) ||
        (s = json_get_number(j, "params", ctx, &params)) ||
        (s = json_get_number(j, "kv_bytes_per_token", ctx, &r->kv_bytes_per_token)))
        return s;
    (void)v;
    m->tied_embeddings = tied;
    m->qkv_bias = bias;
    int present = 0;
    if ((s = json_opt_bool(j, "o_bias", ctx, &m->o_bias, &present)) || (s = json_opt_bool(j, "mlp_bias", ctx, &m->mlp_bias, &present)) ||
        (s = json_opt_bool(j, "qk_norm", ctx, &m->qk_norm, &present)))
        return s;
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(j, "rope_scaling");
    if (rs && !cJSON_IsNull(rs)) {
        char rctx[160], type[16];
        snprintf(rctx, sizeof rctx, "%s.rope_scaling", ctx);
        if (!cJSON_IsObject(rs)) return xf_errorf(XF_EINVAL, "%s: must be an object", rctx);
        if ((s = json_get_string(rs, "type", rctx, type, sizeof type))) return s;
        int kind = rope_kind_parse(type);
        if (kind < 0) return xf_errorf(XF_EINVAL, "%s: unknown type '%s'", rctx, type);
        m->rope.kind = (rope_kind)kind;
        int64_t orig = 0;
        if ((s = json_get_number(rs, "factor", rctx, &m->rope.factor)) ||
            (s = json_get_number(rs, "low_freq_factor", rctx, &m->rope.low_freq_factor)) ||
            (s = json_get_number(rs, "high_freq_factor", rctx, &m->rope.high_freq_factor)) ||
            (s = json_get_int(rs, "original_max_position_embeddings", rctx, 0, 1LL << 32, &orig)) ||
            (s = json_get_number(rs, "beta_fast", rctx, &m->rope.beta_fast)) ||
            (s = json_get_number(rs, "beta_slow", rctx, &m->rope.beta_slow)) ||
            (s = json_get_number(rs, "attention_factor", rctx, &m->rope.attention_factor)) ||
            (s = json_get_bool(rs, "truncate", rctx, &m->rope.truncate)))
            return s;
        m->rope.original_ctx = orig;
    }
    m->sliding_window = 0;
    memset(m->window_layers, 0, sizeof m->window_layers);
    if ((s = json_opt_int(j, "sliding_window", ctx, 0, 1LL << 32, &m->sliding_window, &present))) return s;
    if ((s = json_opt_index_bits(j, "window_layers", ctx, m->n_layers, m->window_layers, MODEL_MAX_LAYERS / 64))) return s;
    m->n_experts = m->experts_per_tok = m->d_ff_expert = 0;
    m->norm_topk_prob = 0;
    memset(m->dense_layers, 0, sizeof m->dense_layers);
    if ((s = json_opt_int(j, "n_experts", ctx, 0, 65536, &m->n_experts, &present)) ||
        (s = json_opt_int(j, "experts_per_tok", ctx, 0, 65536, &m->experts_per_tok, &present)) ||
        (s = json_opt_int(j, "d_ff_expert", ctx, 0, 1 << 24, &m->d_ff_expert, &present)) ||
        (s = json_opt_bool(j, "norm_topk_prob", ctx, &m->norm_topk_prob, &present)))
        return s;
    if ((s = json_opt_index_bits(j, "dense_layers", ctx, m->n_layers, m->dense_layers, MODEL_MAX_LAYERS / 64))) return s;
    m->d_ff_shared = 0;
    m->shared_expert_gate = 0;
    m->moe_score = MOE_SCORE_SOFTMAX;
    double active = 0;
    if ((s = json_opt_int(j, "d_ff_shared", ctx, 0, 1 << 24, &m->d_ff_shared, &present)) ||
        (s = json_opt_bool(j, "shared_expert_gate", ctx, &m->shared_expert_gate, &present)) ||
        (cJSON_GetObjectItemCaseSensitive(j, "active_params") && (s = json_get_number(j, "active_params", ctx, &active))))
        return s;
    if (!(active >= 0 && active < 0x1p63)) return xf_errorf(XF_EINVAL, "%s: field 'active_params' out of range", ctx);
    r->model_active_params = (int64_t)active;
    if ((m->d_ff_shared > 0 || m->shared_expert_gate) && m->n_experts <= 0)
        return xf_errorf(XF_EINVAL, "%s: a shared expert (d_ff_shared, shared_expert_gate) without routed experts", ctx);
    if ((s = read_mla(j, ctx, m))) return s;
    m->embed_scale = m->attn_scalar = m->rope_local_theta = 0;
    m->sandwich_norms = m->ffn_gelu = 0;
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(j, "gemma3"); /* optional (records before it lack it) */
    if (g && !cJSON_IsNull(g)) {
        char gctx[160];
        snprintf(gctx, sizeof gctx, "%s.gemma3", ctx);
        if (!cJSON_IsObject(g)) return xf_errorf(XF_EINVAL, "%s: must be an object", gctx);
        if ((s = json_get_number(g, "embed_scale", gctx, &m->embed_scale)) || (s = json_get_bool(g, "sandwich_norms", gctx, &m->sandwich_norms)) ||
            (s = json_get_bool(g, "gelu_tanh_ffn", gctx, &m->ffn_gelu)) ||
            (s = json_get_number(g, "query_pre_attn_scalar", gctx, &m->attn_scalar)) ||
            (s = json_get_number(g, "rope_local_base_freq", gctx, &m->rope_local_theta)))
            return s;
        if (!(m->embed_scale >= 0 && m->attn_scalar >= 0 && m->rope_local_theta >= 0))
            return xf_errorf(XF_EINVAL, "%s: embed_scale, query_pre_attn_scalar and rope_local_base_freq must be >= 0", gctx);
    }
    if (m->n_experts > 0 && (m->experts_per_tok < 1 || m->experts_per_tok > m->n_experts || m->d_ff_expert < 1))
        return xf_errorf(XF_EINVAL, "%s: n_experts %lld needs 1 <= experts_per_tok (%lld) <= n_experts and d_ff_expert >= 1", ctx,
                         (long long)m->n_experts, (long long)m->experts_per_tok);
    if ((m->sliding_window > 0) != (model_windowed_layers(m) > 0))
        return xf_errorf(XF_EINVAL, "%s: sliding_window (%lld) and window_layers disagree", ctx, (long long)m->sliding_window);
    /* The largest config xfprof accepts has about 2.3e17 parameters (predict writes such records):
     * the bound is what an int64 holds. */
    if (!(params >= 0 && params < 0x1p63)) return xf_errorf(XF_EINVAL, "%s: field 'params' out of range", ctx);
    r->model_params = (int64_t)params;
    if (m->n_heads % m->n_kv_heads != 0)
        return xf_errorf(XF_EINVAL, "%s: n_heads (%lld) is not a multiple of n_kv_heads (%lld)", ctx, (long long)m->n_heads,
                         (long long)m->n_kv_heads);
    return XF_OK;
}

static xf_status read_nonneg(const cJSON *j, const char *key, const char *ctx, double *out) {
    xf_status s = json_get_number(j, key, ctx, out);
    if (s == XF_OK && *out < 0) return xf_errorf(XF_EINVAL, "%s: field '%s' must not be negative", ctx, key);
    return s;
}

/* A byte count: 0 to what an int64 holds (docs/record.md), as every writer keeps them. */
static xf_status read_bytes(const cJSON *j, const char *key, const char *ctx, double *out) {
    xf_status s = read_nonneg(j, key, ctx, out);
    if (s == XF_OK && !(*out < 0x1p63))
        return xf_errorf(XF_EINVAL, "%s: field '%s' = %g bytes is beyond a 64-bit byte count (2^63 = 9.22e18)", ctx, key, *out);
    return s;
}

static xf_status read_device(const cJSON *j, device_spec *d) {
    const char *ctx = "record.device";
    if (!cJSON_IsObject(j)) return xf_errorf(XF_EINVAL, "record: missing object 'device'");
    xf_status s;
    if ((s = json_get_string(j, "name", ctx, d->name, sizeof d->name)) ||
        (s = json_get_string(j, "description", ctx, d->description, sizeof d->description)) ||
        (s = json_get_string(j, "kind", ctx, d->kind, sizeof d->kind)) ||
        (s = json_get_string(j, "source", ctx, d->source, sizeof d->source)) ||
        (s = json_get_bool(j, "measured", ctx, &d->measured)) ||
        (s = read_bytes(j, "memory_bytes", ctx, &d->memory_bytes)) ||
        (s = read_nonneg(j, "bandwidth_Bps", ctx, &d->bandwidth_Bps)) ||
        (s = read_bytes(j, "cache_bytes", ctx, &d->cache_bytes)) ||
        (s = read_nonneg(j, "cache_bandwidth_Bps", ctx, &d->cache_bandwidth_Bps)))
        return s;
    const cJSON *peaks = cJSON_GetObjectItemCaseSensitive(j, "peak_flops");
    if (!cJSON_IsObject(peaks)) return xf_errorf(XF_EINVAL, "%s: missing object 'peak_flops'", ctx);
    for (int c = 0; c < XF_COMPUTE_COUNT; c++)
        if ((s = read_nonneg(peaks, compute_name((xf_compute)c), "record.device.peak_flops", &d->peak_flops[c]))) return s;
    if (d->bandwidth_Bps <= 0 || d->peak_flops[XF_COMPUTE_FP32] <= 0)
        return xf_errorf(XF_EINVAL, "%s: bandwidth_Bps and peak_flops.fp32 must be positive", ctx);
    /* the links between devices: optional (records before tensor / pipeline parallel have none) */
    int64_t gpn = 0;
    int present = 0;
    if ((s = device_link_from_json(j, "link", ctx, &d->link)) || (s = device_link_from_json(j, "node_link", ctx, &d->node_link)) ||
        (s = json_opt_int(j, "gpus_per_node", ctx, 1, 1 << 16, &gpn, &present)))
        return s;
    d->gpus_per_node = (int)gpn;
    return XF_OK;
}

static xf_status read_enum_str(const cJSON *j, const char *key, const char *ctx, char *buf, size_t len) {
    return json_get_string(j, key, ctx, buf, len);
}

/* A collective's link fields: comm_bytes, comm_hops, comm_link ("link" or "node_link"), util_link. */
static xf_status read_comm(const cJSON *j, const char *ctx, record_op *op) {
    xf_status s;
    int64_t hops = 0;
    int present = 0;
    char link[16] = "link";
    if ((s = read_bytes(j, "comm_bytes", ctx, &op->cost.comm_bytes)) ||
        (s = json_opt_int(j, "comm_hops", ctx, 0, 1 << 20, &hops, &present)) ||
        (s = json_opt_string(j, "comm_link", ctx, link, sizeof link, &present)))
        return s;
    if (strcmp(link, "link") != 0 && strcmp(link, "node_link") != 0)
        return xf_errorf(XF_EINVAL, "%s: comm_link must be \"link\" or \"node_link\", not '%s'", ctx, link);
    op->cost.comm_hops = (int)hops;
    op->cost.comm_node = strcmp(link, "node_link") == 0;
    if (cJSON_GetObjectItemCaseSensitive(j, "util_link") && (s = read_nonneg(j, "util_link", ctx, &op->util_link))) return s;
    return XF_OK;
}

/* Optional (issue 17; older records have none): the machine file's utilizations and the class
 * confidence. Absent: the machine's are the op's (no concurrent ceilings then), no confidence. */
static xf_status read_op_concurrent(const cJSON *j, const char *ctx, record_op *op) {
    xf_status s;
    op->util_compute_machine = op->util_compute;
    op->util_memory_machine = op->util_memory;
    if (cJSON_GetObjectItemCaseSensitive(j, "util_compute_machine") &&
        ((s = read_nonneg(j, "util_compute_machine", ctx, &op->util_compute_machine)) ||
         (s = read_nonneg(j, "util_memory_machine", ctx, &op->util_memory_machine))))
        return s;
    if (!cJSON_GetObjectItemCaseSensitive(j, "confidence")) return XF_OK;
    int64_t boot;
    if ((s = read_nonneg(j, "confidence", ctx, &op->confidence)) ||
        (s = json_get_int(j, "confidence_boot", ctx, 1, 100000, &boot)))
        return s;
    if (op->confidence > 1) return xf_errorf(XF_EINVAL, "%s: 'confidence' %g is a share: 0 to 1", ctx, op->confidence);
    op->confidence_boot = (int)boot;
    return XF_OK;
}

/* Optional (issue 17; older records have none): the calibrated prediction. */
static xf_status read_op_calibrated(const cJSON *j, const char *ctx, record_op *op) {
    if (!cJSON_GetObjectItemCaseSensitive(j, "calibrated_time_s")) return XF_OK;
    xf_status s = read_nonneg(j, "calibrated_time_s", ctx, &op->calibrated_time_s);
    int present = 0;
    if (!s) s = json_opt_bool(j, "calib_clamped", ctx, &op->calib_clamped, &present);
    return s;
}

static xf_status read_op(const cJSON *j, const char *ctx, int64_t n_layers, record_op *op) {
    if (!cJSON_IsObject(j)) return xf_errorf(XF_EINVAL, "%s: must be an object", ctx);
    char phase[16], kind[24], compute[16], bound[16], src[16];
    xf_status s;
    int64_t layer;
    cost_op *c = &op->cost;
    if ((s = read_enum_str(j, "phase", ctx, phase, sizeof phase)) || (s = read_enum_str(j, "op", ctx, kind, sizeof kind)) ||
        (s = read_enum_str(j, "compute", ctx, compute, sizeof compute)) ||
        (s = read_enum_str(j, "bound", ctx, bound, sizeof bound)) ||
        (s = read_enum_str(j, "bytes_source", ctx, src, sizeof src)) ||
        (s = json_get_int(j, "layer", ctx, -1, n_layers - 1, &layer)))
        return s;
    if (strcmp(phase, "prefill") == 0) c->phase = XF_PREFILL;
    else if (strcmp(phase, "decode") == 0) c->phase = XF_DECODE;
    else return xf_errorf(XF_EINVAL, "%s: unknown phase '%s' (prefill or decode)", ctx, phase);
    c->layer = (int)layer;
    if ((s = op_kind_parse(kind, &c->kind))) return xf_error_prefix(s, "%s: ", ctx);
    int found = 0;
    for (int k = 0; k < XF_COMPUTE_COUNT; k++)
        if (strcmp(compute, compute_name((xf_compute)k)) == 0) {
            c->compute = (xf_compute)k;
            found = 1;
        }
    if (!found) return xf_errorf(XF_EINVAL, "%s: unknown compute type '%s'", ctx, compute);
    if ((s = bound_parse(bound, &op->bound))) return xf_error_prefix(s, "%s: ", ctx);
    if (strcmp(src, "model") == 0) op->bytes_from_counters = 0;
    else if (strcmp(src, "counters") == 0) op->bytes_from_counters = 1;
    else return xf_errorf(XF_EINVAL, "%s: bytes_source must be 'model' or 'counters'", ctx);
    if ((s = read_nonneg(j, "flops", ctx, &c->flops)) || (s = read_bytes(j, "bytes", ctx, &c->bytes)) ||
        (s = read_bytes(j, "weight_bytes", ctx, &c->weight_bytes)) ||
        (s = read_bytes(j, "act_in_bytes", ctx, &c->act_in_bytes)) ||
        (s = read_bytes(j, "act_out_bytes", ctx, &c->act_out_bytes)) ||
        (s = read_bytes(j, "kv_read_bytes", ctx, &c->kv_read_bytes)) ||
        (s = read_bytes(j, "kv_write_bytes", ctx, &c->kv_write_bytes)) ||
        (s = read_nonneg(j, "intensity", ctx, &op->intensity)) || (s = read_nonneg(j, "time_s", ctx, &op->time_s)) ||
        (s = read_nonneg(j, "predicted_time_s", ctx, &op->predicted_time_s)) ||
        (s = read_nonneg(j, "share", ctx, &op->share)) || (s = json_get_bool(j, "measured", ctx, &op->measured)))
        return s;
    if (op->bytes_from_counters && (s = read_bytes(j, "measured_bytes", ctx, &op->measured_bytes))) return s;
    if (op_kind_is_comm(c->kind) && (s = read_comm(j, ctx, op))) return s;
    if (cJSON_GetObjectItemCaseSensitive(j, "source") &&
        (s = json_get_string(j, "source", ctx, op->source, sizeof op->source)))
        return s;
    if (op->measured) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "samples_s");
        if (!cJSON_IsArray(arr)) return xf_errorf(XF_EINVAL, "%s: a measured op needs the array 'samples_s'", ctx);
        int n = cJSON_GetArraySize(arr);
        if (n < 1 || n > MAX_SAMPLES) return xf_errorf(XF_EINVAL, "%s: 'samples_s' must hold 1 to %d samples", ctx, MAX_SAMPLES);
        op->samples_s = malloc((size_t)n * sizeof *op->samples_s);
        if (!op->samples_s) return xf_errorf(XF_ENOMEM, "%s: out of memory", ctx);
        op->n_samples = n;
        int i = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, arr) {
            if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble) || e->valuedouble < 0)
                return xf_errorf(XF_EINVAL, "%s: samples_s[%d] must be a non-negative number", ctx, i);
            op->samples_s[i++] = e->valuedouble;
        }
        if ((s = read_nonneg(j, "spread_s", ctx, &op->spread_s)) ||
            (s = read_nonneg(j, "util_compute", ctx, &op->util_compute)) ||
            (s = read_nonneg(j, "util_memory", ctx, &op->util_memory)))
            return s;
        if ((s = read_op_concurrent(j, ctx, op))) return s;
    }
    if ((s = read_op_calibrated(j, ctx, op))) return s;
    const cJSON *cs = cJSON_GetObjectItemCaseSensitive(j, "counters");
    if (cs) {
        if (!cJSON_IsObject(cs)) return xf_errorf(XF_EINVAL, "%s: 'counters' must be an object", ctx);
        const cJSON *e;
        cJSON_ArrayForEach(e, cs) {
            if (op->n_counters == RECORD_MAX_COUNTERS)
                return xf_errorf(XF_EINVAL, "%s: more than %d counters", ctx, RECORD_MAX_COUNTERS);
            record_counter *k = &op->counters[op->n_counters];
            if (!e->string || strlen(e->string) >= sizeof k->name) return xf_errorf(XF_EINVAL, "%s: counter name too long", ctx);
            strcpy(k->name, e->string);
            if (cJSON_IsNumber(e) && isfinite(e->valuedouble)) {
                k->supported = 1;
                k->value = e->valuedouble;
            } else if (cJSON_IsString(e) && strcmp(e->valuestring, "unsupported") == 0) {
                k->supported = 0;
            } else {
                return xf_errorf(XF_EINVAL, "%s: counter '%s' must be a number or \"unsupported\"", ctx, k->name);
            }
            op->n_counters++;
        }
    }
    return XF_OK;
}

static xf_status read_dtype(const cJSON *j, const char *key, const char *ctx, xf_dtype *out) {
    char buf[16];
    xf_status s = json_get_string(j, key, ctx, buf, sizeof buf);
    if (s) return s;
    if ((s = dtype_parse(buf, out))) return xf_error_prefix(s, "%s.%s: ", ctx, key);
    return XF_OK;
}

static xf_status read_parallel(const cJSON *j, const cJSON *w, const char *ctx, record_point *p) {
    int64_t tp = 0, pp = 0, mb = 0, dev = 0, kvc = 0, epd = 0;
    int present = 0;
    xf_status s;
    if ((s = json_opt_int(w, "tp", ctx, 1, XF_PARALLEL_MAX, &tp, &present)) ||
        (s = json_opt_int(w, "pp", ctx, 1, XF_PARALLEL_MAX, &pp, &present)) ||
        (s = json_opt_int(w, "micro_batches", ctx, 1, 1LL << 20, &mb, &present)))
        return s;
    if (mb > p->wl.batch || (mb > 1 && p->wl.batch % mb))
        return xf_errorf(XF_EINVAL, "%s: micro_batches %lld does not divide the batch of %lld", ctx, (long long)mb,
                         (long long)p->wl.batch);
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(j, "parallel");
    if (!q) {
        if (tp || pp || mb) return xf_errorf(XF_EINVAL, "%s: tp, pp or micro_batches but no section 'parallel'", ctx);
        return XF_OK; /* one device (records before tensor / pipeline parallel too) */
    }
    if (!tp || !pp || !mb) return xf_errorf(XF_EINVAL, "%s: a section 'parallel' needs tp, pp and micro_batches in the workload", ctx);
    const char *pc = "record.points[].parallel";
    record_parallel *r = &p->par;
    if ((s = json_get_int(q, "devices", pc, 1, (int64_t)XF_PARALLEL_MAX * XF_PARALLEL_MAX, &dev)) ||
        (s = json_get_int(q, "kv_copies", pc, 1, XF_PARALLEL_MAX, &kvc)) ||
        (s = json_get_int(q, "experts_per_device", pc, 0, 1 << 20, &epd)) || (s = read_nonneg(q, "bubble", pc, &r->bubble)) ||
        (s = read_nonneg(q, "prefill_step_s", pc, &r->prefill_step_s)) ||
        (s = read_nonneg(q, "decode_step_s", pc, &r->decode_step_s)) || (s = read_nonneg(q, "comm_share", pc, &r->comm_share)) ||
        (s = read_nonneg(q, "comm_bytes", pc, &r->comm_bytes)))
        return s;
    if (dev != tp * pp) return xf_errorf(XF_EINVAL, "%s: devices %lld is not tp * pp = %lld", pc, (long long)dev, (long long)(tp * pp));
    r->tp = (int)tp;
    r->pp = (int)pp;
    r->micro_batches = (int)mb;
    r->devices = (int)dev;
    r->kv_copies = (int)kvc;
    r->experts_per_device = (int)epd;
    return XF_OK;
}

/* A count in a record: a whole number in [0, 2^53). */
static xf_status read_count(const cJSON *v, const char *ctx, int64_t *out) {
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble >= 0x1p53 || v->valuedouble != floor(v->valuedouble))
        return xf_errorf(XF_EINVAL, "%s: must be a whole number in [0, 2^53)", ctx);
    *out = (int64_t)v->valuedouble;
    return XF_OK;
}

/* The optional "experts" object of a point (experts_to_json). */
static xf_status read_experts(const cJSON *ej, const char *ctx, const record *r, record_point *p) {
    char sub[160];
    snprintf(sub, sizeof sub, "%s.experts", ctx);
    if (!cJSON_IsObject(ej)) return xf_errorf(XF_EINVAL, "%s: must be an object", sub);
    int64_t E = 0;
    xf_status s = read_count(cJSON_GetObjectItemCaseSensitive(ej, "n_experts"), sub, &E);
    if (s) return s;
    const int64_t L = r->model.n_layers;
    if (E < 1 || E != r->model.n_experts || L < 1 || L > MODEL_MAX_LAYERS)
        return xf_errorf(XF_EINVAL, "%s: n_experts %lld does not match the model's %lld routed experts", sub, (long long)E,
                         (long long)r->model.n_experts);
    p->expert_tokens = calloc((size_t)(XF_PHASE_COUNT * L * E), sizeof *p->expert_tokens);
    p->expert_distinct = calloc((size_t)(XF_PHASE_COUNT * L), sizeof *p->expert_distinct);
    if (!p->expert_tokens || !p->expert_distinct) return xf_errorf(XF_ENOMEM, "%s: out of memory", sub);
    p->n_experts = E;
    p->n_expert_layers = L;
    for (int ph = 0; ph < XF_PHASE_COUNT; ph++) {
        char pc[200];
        snprintf(pc, sizeof pc, "%s.%s", sub, ph == XF_PREFILL ? "prefill" : "decode");
        const cJSON *pj = cJSON_GetObjectItemCaseSensitive(ej, ph == XF_PREFILL ? "prefill" : "decode");
        if (!cJSON_IsObject(pj)) return xf_errorf(XF_EINVAL, "%s: missing object", pc);
        if ((s = read_count(cJSON_GetObjectItemCaseSensitive(pj, "steps"), pc, &p->expert_steps[ph]))) return s;
        const cJSON *tj = cJSON_GetObjectItemCaseSensitive(pj, "tokens"), *dj = cJSON_GetObjectItemCaseSensitive(pj, "distinct");
        if (!cJSON_IsArray(tj) || cJSON_GetArraySize(tj) != (int)L || !cJSON_IsArray(dj) || cJSON_GetArraySize(dj) != (int)L)
            return xf_errorf(XF_EINVAL, "%s: 'tokens' and 'distinct' must be arrays of n_layers (%lld) entries", pc, (long long)L);
        int64_t l = 0;
        const cJSON *row, *dv = dj->child;
        cJSON_ArrayForEach(row, tj) {
            if (!cJSON_IsArray(row) || cJSON_GetArraySize(row) != (int)E)
                return xf_errorf(XF_EINVAL, "%s: tokens[%lld] must be an array of n_experts (%lld) counts", pc, (long long)l, (long long)E);
            int64_t e = 0;
            const cJSON *v;
            cJSON_ArrayForEach(v, row) {
                if ((s = read_count(v, pc, &p->expert_tokens[((int64_t)ph * L + l) * E + e]))) return s;
                e++;
            }
            int64_t *dd = &p->expert_distinct[(int64_t)ph * L + l];
            if ((s = read_count(dv, pc, dd))) return s;
            if (*dd > p->expert_steps[ph] * E)
                return xf_errorf(XF_EINVAL, "%s: distinct[%lld] = %lld exceeds steps x n_experts", pc, (long long)l, (long long)*dd);
            dv = dv->next;
            l++;
        }
    }
    return XF_OK;
}

static xf_status read_pulses(const cJSON *c, const char *key, const char *ctx, double *v, int *n) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(c, key);
    if (!cJSON_IsArray(a)) return xf_errorf(XF_EINVAL, "%s: missing array '%s'", ctx, key);
    int m = cJSON_GetArraySize(a);
    if (m < 2 || m > RECORD_MAX_PULSES) return xf_errorf(XF_EINVAL, "%s: '%s' must hold 2 to %d pulses", ctx, key, RECORD_MAX_PULSES);
    if (*n && m != *n) return xf_errorf(XF_EINVAL, "%s: '%s' has %d pulses, the bandwidth pulses %d", ctx, key, m, *n);
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, a) {
        if (!cJSON_IsNumber(e) || !(e->valuedouble > 0) || !isfinite(e->valuedouble))
            return xf_errorf(XF_EINVAL, "%s: %s[%d] must be a positive number", ctx, key, i);
        v[i++] = e->valuedouble;
    }
    *n = m;
    return XF_OK;
}

/* Optional "concurrent" of a point (issue 17). */
static xf_status read_concurrent(const cJSON *c, const char *ctx, record_concurrent *cc) {
    if (!cJSON_IsObject(c)) return xf_errorf(XF_EINVAL, "%s: must be an object", ctx);
    xf_status s;
    int n = 0;
    int64_t every;
    if ((s = read_pulses(c, "pulse_bandwidth_Bps", ctx, cc->pulse_bandwidth_Bps, &n)) ||
        (s = read_pulses(c, "pulse_fp32_flops", ctx, cc->pulse_fp32_flops, &n)) ||
        (s = json_get_int(c, "pulse_every", ctx, 1, 1000000, &every)) || (s = read_nonneg(c, "pulse_s", ctx, &cc->pulse_s)) ||
        (s = read_nonneg(c, "run_s", ctx, &cc->run_s)) ||
        (s = read_nonneg(c, "machine_bandwidth_Bps", ctx, &cc->machine_bandwidth_Bps)) ||
        (s = read_nonneg(c, "machine_fp32_flops", ctx, &cc->machine_fp32_flops)) ||
        (s = read_nonneg(c, "bandwidth_Bps", ctx, &cc->bandwidth_Bps)) || (s = read_nonneg(c, "fp32_flops", ctx, &cc->fp32_flops)) ||
        (s = read_nonneg(c, "threshold", ctx, &cc->threshold)) || (s = json_get_bool(c, "contended", ctx, &cc->contended)))
        return s;
    if (cc->threshold >= 1) return xf_errorf(XF_EINVAL, "%s: 'threshold' %g is a share below 1", ctx, cc->threshold);
    if (cJSON_GetObjectItemCaseSensitive(c, "cpu_wait_share")) { /* optional: records before it, kernels without schedstat */
        if ((s = read_nonneg(c, "cpu_wait_share", ctx, &cc->cpu_wait_share))) return s;
        if (cc->cpu_wait_share > 1)
            return xf_errorf(XF_EINVAL, "%s: 'cpu_wait_share' %g is a share of the wall time, at most 1", ctx, cc->cpu_wait_share);
        cc->cpu_wait_measured = 1;
    }
    cc->n_pulses = n;
    cc->pulse_every = (int)every;
    return XF_OK;
}

static xf_status read_point(const cJSON *j, const char *ctx, const record *r, record_point *p) {
    if (!cJSON_IsObject(j)) return xf_errorf(XF_EINVAL, "%s: must be an object", ctx);
    char sub[96];
    xf_status s;
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(j, "workload");
    snprintf(sub, sizeof sub, "%s.workload", ctx);
    if (!cJSON_IsObject(w)) return xf_errorf(XF_EINVAL, "%s: missing object 'workload'", ctx);
    int64_t group;
    if ((s = json_get_int(w, "batch", sub, 1, 1LL << 20, &p->wl.batch)) ||
        (s = json_get_int(w, "prompt", sub, 1, 1LL << 24, &p->wl.prompt)) ||
        (s = json_get_int(w, "gen", sub, 0, 1LL << 24, &p->wl.gen)) || (s = read_dtype(w, "wdtype", sub, &p->wl.wdtype)) ||
        (s = read_dtype(w, "adtype", sub, &p->wl.adtype)) || (s = read_dtype(w, "kvdtype", sub, &p->wl.kvdtype)) ||
        (s = json_get_int(w, "quant_group", sub, 0, 1 << 20, &group)))
        return s;
    p->wl.quant_group = (int)group;
    if ((s = read_parallel(j, w, sub, p))) return s;
    const cJSON *run = cJSON_GetObjectItemCaseSensitive(j, "run");
    if (run) {
        record_run_info *ri = &p->run;
        int64_t threads, reps, warmup;
        double seed;
        snprintf(sub, sizeof sub, "%s.run", ctx);
        if (!cJSON_IsObject(run)) return xf_errorf(XF_EINVAL, "%s: 'run' must be an object", ctx);
        if ((s = json_get_string(run, "backend", sub, ri->backend, sizeof ri->backend)) ||
            (s = json_get_int(run, "threads", sub, 0, 4096, &threads)) ||
            (s = json_get_int(run, "reps", sub, 0, 1000000, &reps)) ||
            (s = json_get_int(run, "warmup", sub, 0, 1000000, &warmup)) ||
            (s = json_get_string(run, "kv_policy", sub, ri->kv_policy, sizeof ri->kv_policy)) ||
            (s = json_get_string(run, "kv_alloc", sub, ri->kv_alloc, sizeof ri->kv_alloc)) ||
            (s = read_nonneg(run, "seed", sub, &seed)) ||
            (s = read_nonneg(run, "timer_overhead_s", sub, &ri->timer_overhead_s)))
            return s;
        ri->threads = (int)threads;
        ri->reps = (int)reps;
        ri->warmup = (int)warmup;
        ri->seed = (uint64_t)seed;
    }
    const cJSON *ops = cJSON_GetObjectItemCaseSensitive(j, "ops");
    if (!cJSON_IsArray(ops)) return xf_errorf(XF_EINVAL, "%s: missing array 'ops'", ctx);
    int n = cJSON_GetArraySize(ops);
    if (n > MAX_OPS) return xf_errorf(XF_EINVAL, "%s: too many ops (%d)", ctx, n);
    if (n > 0) {
        p->ops = calloc((size_t)n, sizeof *p->ops);
        if (!p->ops) return xf_errorf(XF_ENOMEM, "%s: out of memory", ctx);
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, ops) {
        snprintf(sub, sizeof sub, "%s.ops[%lld]", ctx, (long long)p->n_ops);
        s = read_op(e, sub, r->model.n_layers, &p->ops[p->n_ops]);
        p->n_ops++; /* counted even on error so record_free frees its samples */
        if (s) return s;
    }
    const cJSON *sj = cJSON_GetObjectItemCaseSensitive(j, "summary");
    snprintf(sub, sizeof sub, "%s.summary", ctx);
    if (!cJSON_IsObject(sj)) return xf_errorf(XF_EINVAL, "%s: missing object 'summary'", ctx);
    record_summary *sm = &p->summary;
    double dctx, maxb;
    if ((s = read_nonneg(sj, "ttft_s", sub, &sm->ttft_s)) || (s = read_nonneg(sj, "tpot_s", sub, &sm->tpot_s)) ||
        (s = read_nonneg(sj, "tokens_per_s", sub, &sm->tokens_per_s)) ||
        (s = read_nonneg(sj, "prefill_tokens_per_s", sub, &sm->prefill_tokens_per_s)) ||
        (s = read_nonneg(sj, "decode_tokens_per_s", sub, &sm->decode_tokens_per_s)) ||
        (s = read_nonneg(sj, "decode_context", sub, &dctx)) ||
        (s = read_nonneg(sj, "prefill_time_s", sub, &sm->prefill_time_s)) ||
        (s = read_nonneg(sj, "decode_time_s", sub, &sm->decode_time_s)) || (s = read_nonneg(sj, "max_batch", sub, &maxb)))
        return s;
    if (dctx > 9e15 || maxb > 9e15) return xf_errorf(XF_EINVAL, "%s: decode_context or max_batch out of range", sub);
    sm->decode_context = (int64_t)dctx;
    sm->max_batch = (int64_t)maxb;
    const cJSON *sb = cJSON_GetObjectItemCaseSensitive(sj, "share_bound");
    if (!cJSON_IsObject(sb)) return xf_errorf(XF_EINVAL, "%s: missing object 'share_bound'", sub);
    for (int b = 0; b < XF_BOUND_COUNT; b++) {
        if (b == XF_BOUND_UNKNOWN && !cJSON_GetObjectItemCaseSensitive(sb, "unknown")) continue; /* imports only */
        if (b == XF_BOUND_COMM && !cJSON_GetObjectItemCaseSensitive(sb, "communication")) continue; /* records before collectives */
        if ((s = read_nonneg(sb, bound_name((xf_bound)b), sub, &sm->share_bound[b]))) return s;
    }
    if (cJSON_GetObjectItemCaseSensitive(sj, "verdict_confidence")) {
        int64_t boot;
        if ((s = read_nonneg(sj, "verdict_confidence", sub, &sm->verdict_confidence)) ||
            (s = json_get_int(sj, "verdict_boot", sub, 1, 100000, &boot)))
            return s;
        if (sm->verdict_confidence > 1) return xf_errorf(XF_EINVAL, "%s: 'verdict_confidence' is a share: 0 to 1", sub);
        sm->verdict_boot = (int)boot;
    }
    if (cJSON_GetObjectItemCaseSensitive(sj, "predicted_ttft_s") &&
        ((s = read_nonneg(sj, "predicted_ttft_s", sub, &sm->predicted_ttft_s)) ||
         (s = read_nonneg(sj, "predicted_tpot_s", sub, &sm->predicted_tpot_s))))
        return s;
    const cJSON *cj = cJSON_GetObjectItemCaseSensitive(j, "concurrent");
    snprintf(sub, sizeof sub, "%s.concurrent", ctx);
    if (cj && (s = read_concurrent(cj, sub, &p->concurrent))) return s;
    const cJSON *mj = cJSON_GetObjectItemCaseSensitive(j, "memory");
    snprintf(sub, sizeof sub, "%s.memory", ctx);
    if (!cJSON_IsObject(mj)) return xf_errorf(XF_EINVAL, "%s: missing object 'memory'", ctx);
    record_memory *m = &p->memory;
    if ((s = read_bytes(mj, "weights_bytes", sub, &m->weights_bytes)) || (s = read_bytes(mj, "kv_bytes", sub, &m->kv_bytes)) ||
        (s = read_bytes(mj, "kv_bytes_per_token", sub, &m->kv_bytes_per_token)) ||
        (s = read_bytes(mj, "activations_bytes", sub, &m->activations_bytes)) ||
        (s = read_bytes(mj, "total_bytes", sub, &m->total_bytes)) ||
        (s = read_bytes(mj, "capacity_bytes", sub, &m->capacity_bytes)))
        return s;
    m->active_weights_bytes = 0; /* optional: older records lack it */
    if (cJSON_GetObjectItemCaseSensitive(mj, "active_weights_bytes") && (s = read_bytes(mj, "active_weights_bytes", sub, &m->active_weights_bytes)))
        return s;
    const cJSON *exj = cJSON_GetObjectItemCaseSensitive(j, "experts");
    if (exj && (s = read_experts(exj, ctx, r, p))) return s;
    const cJSON *toks = cJSON_GetObjectItemCaseSensitive(j, "tokens");
    if (toks) {
        if (!cJSON_IsArray(toks)) return xf_errorf(XF_EINVAL, "%s: 'tokens' must be an array of arrays", ctx);
        int rows = cJSON_GetArraySize(toks);
        int cols = rows > 0 ? cJSON_GetArraySize(cJSON_GetArrayItem(toks, 0)) : 0;
        if (rows > (1 << 20) || cols > (1 << 24) || (int64_t)rows * cols > (1LL << 28))
            return xf_errorf(XF_EINVAL, "%s: 'tokens' is too large", ctx);
        if (rows > 0 && cols > 0) {
            p->tokens = malloc((size_t)rows * (size_t)cols * sizeof *p->tokens);
            if (!p->tokens) return xf_errorf(XF_ENOMEM, "%s: out of memory", ctx);
        }
        int i = 0;
        const cJSON *row;
        cJSON_ArrayForEach(row, toks) {
            if (!cJSON_IsArray(row) || cJSON_GetArraySize(row) != cols)
                return xf_errorf(XF_EINVAL, "%s: tokens[%d] must be an array of %d token ids", ctx, i, cols);
            int k = 0;
            const cJSON *t;
            cJSON_ArrayForEach(t, row) {
                if (!cJSON_IsNumber(t) || t->valuedouble < 0 || t->valuedouble >= (double)r->model.vocab ||
                    t->valuedouble != floor(t->valuedouble))
                    return xf_errorf(XF_EINVAL, "%s: tokens[%d][%d] is not a token id below vocab %lld", ctx, i, k,
                                     (long long)r->model.vocab);
                p->tokens[(int64_t)i * cols + k++] = (int32_t)t->valuedouble;
            }
            i++;
        }
        p->n_seqs = rows;
        p->n_tokens_per_seq = cols;
    }
    const cJSON *cpj = cJSON_GetObjectItemCaseSensitive(j, "cpu_step_s");
    if (cpj) { /* optional (records before it have none): both arrays, one value per repetition */
        if (!cJSON_IsObject(cpj)) return xf_errorf(XF_EINVAL, "%s: 'cpu_step_s' must be an object {prefill: [...], decode: [...]}", ctx);
        int n[2];
        static const char *keys[2] = {"prefill", "decode"};
        double *dst[2] = {p->cpu_prefill_s, p->cpu_decode_s};
        for (int k = 0; k < 2; k++) {
            const cJSON *arr = cJSON_GetObjectItemCaseSensitive(cpj, keys[k]);
            n[k] = cJSON_IsArray(arr) ? cJSON_GetArraySize(arr) : -1;
            if (n[k] < 1 || n[k] > RECORD_MAX_CPU_REPS)
                return xf_errorf(XF_EINVAL, "%s: cpu_step_s.%s must be an array of 1 to %d seconds", ctx, keys[k], RECORD_MAX_CPU_REPS);
            int i = 0;
            const cJSON *e;
            cJSON_ArrayForEach(e, arr) {
                if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble) || e->valuedouble < 0)
                    return xf_errorf(XF_EINVAL, "%s: cpu_step_s.%s[%d] must be a non-negative number", ctx, keys[k], i);
                dst[k][i++] = e->valuedouble;
            }
        }
        if (n[0] != n[1]) return xf_errorf(XF_EINVAL, "%s: cpu_step_s.prefill has %d values but decode %d", ctx, n[0], n[1]);
        p->n_cpu = n[0];
    }
    return XF_OK;
}

static xf_status read_advice(const cJSON *arr, record *r) {
    if (!cJSON_IsArray(arr)) return xf_errorf(XF_EINVAL, "record: 'advice' must be an array");
    if (cJSON_GetArraySize(arr) > RECORD_MAX_ADVICE)
        return xf_errorf(XF_EINVAL, "record: more than %d advice entries", RECORD_MAX_ADVICE);
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) {
        char ctx[40];
        snprintf(ctx, sizeof ctx, "record.advice[%d]", r->n_advice);
        if (!cJSON_IsObject(e)) return xf_errorf(XF_EINVAL, "%s: must be an object", ctx);
        record_advice *a = &r->advice[r->n_advice];
        int64_t point;
        xf_status s;
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(e, "gain");
        if ((s = json_get_string(e, "kind", ctx, a->kind, sizeof a->kind)) ||
            (s = json_get_int(e, "point", ctx, 0, r->n_points > 0 ? r->n_points - 1 : 0, &point)) ||
            (s = read_nonneg(e, "score", ctx, &a->score)) || (s = json_get_string(e, "title", ctx, a->title, sizeof a->title)) ||
            (s = json_get_string(e, "evidence", ctx, a->evidence, sizeof a->evidence)) ||
            (s = json_get_string(e, "action", ctx, a->action, sizeof a->action)))
            return s;
        if (!cJSON_IsObject(g)) return xf_errorf(XF_EINVAL, "%s: missing object 'gain'", ctx);
        if ((s = json_get_string(g, "metric", ctx, a->gain_metric, sizeof a->gain_metric)) ||
            (s = read_nonneg(g, "before", ctx, &a->before)) || (s = read_nonneg(g, "after", ctx, &a->after)))
            return s;
        a->point = (int)point;
        r->n_advice++;
    }
    return XF_OK;
}

/* Everything before the points: format, version, kind, env, model, device. */
static xf_status read_head(const cJSON *root, record *r) {
    if (!cJSON_IsObject(root)) return xf_errorf(XF_EFORMAT, "not an xfprof record (the document is not a JSON object)");
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, RECORD_FORMAT) != 0)
        return xf_errorf(XF_EFORMAT, "not an xfprof record (\"format\" is %s%.40s%s, expected \"%s\")",
                         cJSON_IsString(fmt) ? "\"" : "", cJSON_IsString(fmt) ? fmt->valuestring : "missing",
                         cJSON_IsString(fmt) ? "\"" : "", RECORD_FORMAT);
    int64_t version;
    xf_status s = json_get_int(root, "version", "record", 1, 1 << 30, &version);
    if (s) return xf_errorf(XF_EFORMAT, "record: missing or invalid \"version\"");
    if (version > RECORD_VERSION)
        return xf_errorf(XF_EFORMAT,
                         "record version %lld is newer than this xfprof reads (version %d): upgrade xfprof to read it",
                         (long long)version, RECORD_VERSION);
    r->version = (int)version;
    if ((s = json_get_string(root, "kind", "record", r->kind, sizeof r->kind)) ||
        (s = json_get_string(root, "created", "record", r->created, sizeof r->created)) ||
        (s = json_get_string(root, "tool_version", "record", r->tool_version, sizeof r->tool_version)) ||
        (s = json_get_bool(root, "ceilings_measured", "record", &r->ceilings_measured)))
        return s;
    if (!record_kind_known(r->kind))
        return xf_errorf(XF_EINVAL, "record: unknown kind '%.16s' (%s)", r->kind, RECORD_KINDS);
    int present = 0;
    if ((s = json_opt_bool(root, "partial", "record", &r->partial, &present)) ||
        (s = json_opt_string(root, "partial_reason", "record", r->partial_reason, sizeof r->partial_reason, &present)))
        return s;
    if (present && !r->partial) return xf_errorf(XF_EINVAL, "record: 'partial_reason' given but 'partial' is not true");
    if ((s = json_opt_string(root, "prediction", "record", r->prediction, sizeof r->prediction, &present)) ||
        (s = json_opt_string(root, "prediction_note", "record", r->prediction_note, sizeof r->prediction_note, &present)))
        return s;
    const cJSON *env = cJSON_GetObjectItemCaseSensitive(root, "env");
    if (env) {
        if (!cJSON_IsObject(env)) return xf_errorf(XF_EINVAL, "record: 'env' must be an object");
        const cJSON *e;
        cJSON_ArrayForEach(e, env) {
            if (!cJSON_IsString(e)) return xf_errorf(XF_EINVAL, "record.env: '%.32s' must be a string", e->string);
            if (r->n_env == RECORD_MAX_ENV) return xf_errorf(XF_EINVAL, "record.env: more than %d entries", RECORD_MAX_ENV);
            if (strlen(e->string) >= sizeof r->env[0].key || strlen(e->valuestring) >= sizeof r->env[0].value)
                return xf_errorf(XF_EINVAL, "record.env: entry '%.32s' is too long", e->string);
            record_set_env(r, e->string, e->valuestring);
        }
    }
    if ((s = read_model(cJSON_GetObjectItemCaseSensitive(root, "model"), r))) return s;
    if ((s = read_device(cJSON_GetObjectItemCaseSensitive(root, "device"), &r->device))) return s;
    return XF_OK;
}

/* The sections after the points: they refer to points by index, so the points come first. */
static xf_status read_tail(const cJSON *root, record *r) {
    xf_status s;
    const cJSON *kv = cJSON_GetObjectItemCaseSensitive(root, "kv");
    if (kv && (s = record_kv_from_json(kv, "record.kv", &r->kv))) return s;
    const cJSON *adv = cJSON_GetObjectItemCaseSensitive(root, "advice");
    if (adv && (s = read_advice(adv, r))) return s;
    return XF_OK;
}

static xf_status read_record(const cJSON *root, record *r) {
    xf_status s = read_head(root, r);
    if (s) return s;
    const cJSON *pts = cJSON_GetObjectItemCaseSensitive(root, "points");
    if (!cJSON_IsArray(pts)) return xf_errorf(XF_EINVAL, "record: missing array 'points'");
    if (cJSON_GetArraySize(pts) > MAX_POINTS) return xf_errorf(XF_EINVAL, "record: more than %d points", MAX_POINTS);
    /* A kv record's results are its "kv" section; every other kind holds at least one point. */
    if (cJSON_GetArraySize(pts) == 0 && !cJSON_GetObjectItemCaseSensitive(root, "kv"))
        return xf_errorf(XF_EINVAL, "record: 'points' is empty and there is no 'kv' section: the record holds no result");
    const cJSON *e;
    cJSON_ArrayForEach(e, pts) {
        char ctx[48];
        snprintf(ctx, sizeof ctx, "record.points[%d]", r->n_points);
        record_point *p = record_add_point(r);
        if (!p) return xf_errorf(XF_ENOMEM, "record: out of memory");
        if ((s = read_point(e, ctx, r, p))) return s;
    }
    return read_tail(root, r);
}

xf_status record_from_json(const char *text, const char *source, record *r) {
    record_init(r, "");
    cJSON *root;
    const char *ctx = source ? source : "record";
    xf_status s = json_parse(text, ctx, &root);
    if (s) return s;
    s = read_record(root, r);
    cJSON_Delete(root);
    if (s && source) xf_error_prefix(s, "%s: ", source);
    return s;
}

xf_status record_from_cjson(const struct cJSON *root, const char *source, record *r) {
    record_init(r, "");
    xf_status s = read_record(root, r);
    if (s && source) xf_error_prefix(s, "%s: ", source);
    return s;
}

/* ---------- streamed reading (records too big to parse whole) ---------- */

/* Pass 1 over the file: the text outside the top-level "points" array (with "points":[] left in
 * it) goes to head, and the byte span of each element of the array to off/len. Only the bracket
 * structure is followed here; each piece is then parsed strictly by cJSON. */
typedef struct stream_split {
    char *head;        /* the document without the points' text; owned */
    size_t head_len, head_cap;
    int64_t *off, *len; /* (n) each point's bytes in the file; owned */
    int64_t n, cap;
} stream_split;

static xf_status split_head_put(stream_split *sp, char c) {
    if (sp->head_len + 2 > sp->head_cap) {
        if (sp->head_cap >= MAX_RECORD_BYTES)
            return xf_errorf(XF_EINVAL, "the record's text outside its points is larger than %zu bytes", MAX_RECORD_BYTES);
        size_t nc = sp->head_cap ? sp->head_cap * 2 : 65536;
        char *nb = realloc(sp->head, nc);
        if (!nb) return xf_errorf(XF_ENOMEM, "out of memory reading the record");
        sp->head = nb;
        sp->head_cap = nc;
    }
    sp->head[sp->head_len++] = c;
    sp->head[sp->head_len] = '\0';
    return XF_OK;
}

static xf_status split_add_point(stream_split *sp, int64_t off, int64_t len) {
    if (sp->n >= MAX_POINTS) return xf_errorf(XF_EINVAL, "record: more than %d points", MAX_POINTS);
    if (sp->n == sp->cap) {
        int64_t nc = sp->cap ? sp->cap * 2 : 1024;
        int64_t *a = realloc(sp->off, (size_t)nc * sizeof *a);
        if (!a) return xf_errorf(XF_ENOMEM, "out of memory reading the record");
        sp->off = a;
        int64_t *b = realloc(sp->len, (size_t)nc * sizeof *b);
        if (!b) return xf_errorf(XF_ENOMEM, "out of memory reading the record");
        sp->len = b;
        sp->cap = nc;
    }
    sp->off[sp->n] = off;
    sp->len[sp->n] = len;
    sp->n++;
    return XF_OK;
}

static void stream_split_free(stream_split *sp) {
    free(sp->head);
    free(sp->off);
    free(sp->len);
    memset(sp, 0, sizeof *sp);
}

static xf_status stream_split_file(FILE *f, stream_split *sp) {
    memset(sp, 0, sizeof *sp);
    enum { P_FIRST, P_IN, P_AFTER, P_NEXT } ps = P_FIRST; /* inside the points array */
    int64_t depth = 0, at = 0, start = -1;
    int in_str = 0, esc = 0, in_points = 0, seen_points = 0, key_is_points = 0;
    char key[8];
    size_t klen = 0;
    char buf[1 << 16];
    size_t got;
    xf_status s = XF_OK;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) {
        for (size_t i = 0; i < got; i++, at++) {
            char c = buf[i];
            int keep = !(in_points && depth >= 2); /* part of the head */
            if (in_str) {
                if (esc) {
                    esc = 0;
                } else if (c == '\\') {
                    esc = 1;
                    if (depth == 1) klen = sizeof key; /* a key with escapes is not taken for "points" */
                } else if (c == '"') {
                    in_str = 0;
                } else if (depth == 1 && klen < sizeof key) {
                    key[klen++] = c;
                }
            } else if (c == '"') {
                if (in_points && depth == 2)
                    return xf_errorf(XF_EINVAL, "record.points[%lld]: must be an object (byte %lld)", (long long)sp->n, (long long)at);
                in_str = 1;
                if (depth == 1) klen = 0;
            } else if (c == ':' && depth == 1) {
                key_is_points = klen == 6 && memcmp(key, "points", 6) == 0;
            } else if (c == ',' && depth == 1) {
                key_is_points = 0;
            } else if (c == '[' && depth == 1 && key_is_points && !in_points) {
                if (seen_points) return xf_errorf(XF_EINVAL, "record: 'points' appears twice (byte %lld)", (long long)at);
                in_points = seen_points = 1;
                ps = P_FIRST;
                depth++;
                keep = 1;
            } else if (c == '{' || c == '[') {
                if (depth >= 1000) /* the whole-text reader's bound (core/json_util.c), counted from the top */
                    return xf_errorf(XF_EPARSE, "JSON nested too deeply (more than 1000 levels of objects and arrays at byte %lld)",
                                     (long long)at);
                if (in_points && depth == 2) {
                    if (ps != P_FIRST && ps != P_NEXT)
                        return xf_errorf(XF_EPARSE, "record.points: a ',' is missing before byte %lld", (long long)at);
                    if (c != '{') return xf_errorf(XF_EINVAL, "record.points[%lld]: must be an object", (long long)sp->n);
                    start = at;
                    ps = P_IN;
                }
                depth++;
            } else if (c == '}' || c == ']') {
                depth--;
                if (depth < 0) return xf_errorf(XF_EPARSE, "not valid JSON: unmatched '%c' at byte %lld", c, (long long)at);
                if (in_points && depth == 1) {
                    if (c != ']' || ps == P_NEXT || ps == P_IN)
                        return xf_errorf(XF_EPARSE, "record.points: not valid JSON at byte %lld", (long long)at);
                    in_points = 0;
                    keep = 1;
                } else if (in_points && depth == 2) {
                    if ((s = split_add_point(sp, start, at + 1 - start))) return s;
                    ps = P_AFTER;
                }
            } else if (in_points && depth == 2 && c == ',') {
                if (ps != P_AFTER) return xf_errorf(XF_EPARSE, "record.points: unexpected ',' at byte %lld", (long long)at);
                ps = P_NEXT;
            } else if (in_points && depth == 2 && !(c == ' ' || c == '\t' || c == '\n' || c == '\r')) {
                return xf_errorf(XF_EINVAL, "record.points[%lld]: must be an object (byte %lld)", (long long)sp->n, (long long)at);
            }
            if (keep && (s = split_head_put(sp, c))) return s;
        }
    }
    if (ferror(f)) return xf_errorf(XF_EIO, "cannot read the record: read error");
    if (in_points || in_str || depth != 0)
        return xf_errorf(XF_EPARSE, "JSON is truncated (ends at byte %lld)", (long long)at);
    return XF_OK;
}

static xf_status stream_read_point(FILE *f, const stream_split *sp, int64_t j, char **buf, size_t *cap, const record *r,
                                   record_point *p) {
    char ctx[48];
    snprintf(ctx, sizeof ctx, "record.points[%lld]", (long long)j);
    size_t n = (size_t)sp->len[j];
    if (n > MAX_RECORD_BYTES) return xf_errorf(XF_EINVAL, "%s: one point of %zu bytes is larger than %zu", ctx, n, MAX_RECORD_BYTES);
    if (n + 1 > *cap) {
        char *nb = realloc(*buf, n + 1);
        if (!nb) return xf_errorf(XF_ENOMEM, "%s: out of memory", ctx);
        *buf = nb;
        *cap = n + 1;
    }
    if (fseeko(f, (off_t)sp->off[j], SEEK_SET) != 0 || fread(*buf, 1, n, f) != n)
        return xf_errorf(XF_EIO, "cannot read %s back (the file changed while it was read?)", ctx);
    (*buf)[n] = '\0';
    cJSON *root;
    xf_status s = json_parse(*buf, ctx, &root);
    if (s) return s;
    s = read_point(root, ctx, r, p);
    cJSON_Delete(root);
    return s;
}

static void point_drop_ops(record_point *p) {
    for (int64_t k = 0; k < p->n_ops; k++) free(p->ops[k].samples_s);
    free(p->ops);
    free(p->tokens);
    p->ops = NULL;
    p->tokens = NULL;
    p->n_ops = p->n_seqs = p->n_tokens_per_seq = 0;
}

static xf_status stream_read(FILE *f, int64_t also, record *r) {
    stream_split sp;
    xf_status s = stream_split_file(f, &sp);
    cJSON *root = NULL;
    char *buf = NULL;
    size_t cap = 0;
    if (s == XF_OK) s = json_parse(sp.head, "record", &root);
    if (s == XF_OK) s = read_head(root, r);
    const cJSON *pts = s == XF_OK ? cJSON_GetObjectItemCaseSensitive(root, "points") : NULL;
    if (s == XF_OK && !cJSON_IsArray(pts)) s = xf_errorf(XF_EINVAL, "record: missing array 'points'");
    if (s == XF_OK && cJSON_GetArraySize(pts) > 0) /* "points" spelt with escapes: it stayed in the head */
        s = xf_errorf(XF_EINVAL, "record: a streamed record's 'points' key must be written plainly");
    if (s == XF_OK && sp.n == 0 && !cJSON_GetObjectItemCaseSensitive(root, "kv"))
        s = xf_errorf(XF_EINVAL, "record: 'points' is empty and there is no 'kv' section: the record holds no result");
    for (int64_t j = 0; s == XF_OK && j < sp.n; j++) {
        record_point *p = record_add_point(r);
        if (!p) {
            s = xf_errorf(XF_ENOMEM, "record: out of memory");
            break;
        }
        s = stream_read_point(f, &sp, j, &buf, &cap, r, p);
        if (s == XF_OK && j >= RECORD_STREAM_KEEP_OPS && j != also && p->n_ops > 0) {
            point_drop_ops(p);
            r->ops_left_out++;
        }
    }
    if (s == XF_OK) s = read_tail(root, r);
    cJSON_Delete(root);
    free(buf);
    stream_split_free(&sp);
    return s;
}

/* Records above this size are read in a stream. XFPROF_TEST_STREAM_BYTES (test-only) lowers it. */
#define STREAM_RECORD_BYTES ((int64_t)64 << 20)

static int64_t stream_threshold(void) {
    const char *e = getenv("XFPROF_TEST_STREAM_BYTES");
    if (e && *e) {
        char *end;
        long long v = strtoll(e, &end, 10);
        if (*end == '\0' && v >= 0) return v;
    }
    return STREAM_RECORD_BYTES;
}

xf_status record_load_stream(const char *path, int64_t also, record *r) {
    record_init(r, "");
    FILE *f = fopen(path, "rb");
    if (!f) return xf_errorf(XF_EIO, "cannot open %s: %s", path, strerror(errno));
    xf_status s = stream_read(f, also, r);
    fclose(f);
    if (s) xf_error_prefix(s, "%s: ", path);
    return s;
}

/* Reading a record parses it whole: the text, cJSON's tree and the record struct took 9.3 times
 * the file's size at peak (`show` of a 23.7 MB sweep record: 221 MB RSS, 2026-12-01). */
#define READ_MEMORY_FACTOR 10

xf_status record_load(const char *path, record *r) { return record_load_keep(path, -1, r); }

xf_status record_load_keep(const char *path, int64_t also, record *r) {
    char *text;
    record_init(r, "");
    struct stat st;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && (int64_t)st.st_size > stream_threshold())
        return record_load_stream(path, also, r);
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
        char a[24], b[24], c[24];
        double need = (double)st.st_size * READ_MEMORY_FACTOR, avail = (double)sysmem_available_bytes();
        if ((size_t)st.st_size > MAX_RECORD_BYTES)
            return xf_errorf(XF_EINVAL, "%s is %s: larger than the largest record xfprof reads (%s); split the sweep", path,
                             units_bytes((double)st.st_size, a, sizeof a), units_bytes((double)MAX_RECORD_BYTES, b, sizeof b));
        if (avail > 0 && need > avail)
            return xf_errorf(XF_ENOMEM,
                             "%s is %s: reading it takes about %d times that (%s) and this machine has %s available now; "
                             "free memory or split the sweep",
                             path, units_bytes((double)st.st_size, a, sizeof a), READ_MEMORY_FACTOR, units_bytes(need, b, sizeof b),
                             units_bytes(avail, c, sizeof c));
    }
    xf_status s = file_read_all(path, MAX_RECORD_BYTES, &text, NULL);
    if (s) return s;
    s = record_from_json(text, path, r);
    free(text);
    return s;
}

xf_status record_save(const record *r, const char *path) {
    char *text = NULL;
    xf_status s = record_json_text(r, &text);
    if (s) return s;
    size_t len = strlen(text);
    text[len] = '\n'; /* replace the terminator: the file ends with a newline */
    s = file_write_atomic(path, text, len + 1);
    free(text);
    return s;
}

xf_status record_point_json_text(const record_point *p, char **out) {
    *out = NULL;
    cJSON *o = point_to_json(p);
    if (!o) return xf_errorf(XF_ENOMEM, "out of memory writing a point");
    char where[512];
    if (find_null(o, "point", where, sizeof where)) {
        cJSON_Delete(o);
        return xf_errorf(XF_EINVAL, "%s is not a finite number (infinite or NaN, computed from the inputs); nothing was written", where);
    }
    *out = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return *out ? XF_OK : xf_errorf(XF_ENOMEM, "out of memory writing a point");
}

xf_status record_save_stream(const record *r, int64_t n_points, record_point_text_fn point_text, void *ctx, const char *path) {
    record head = *r; /* shallow: the header alone, its points written from point_text */
    head.n_points = 0;
    head.points = NULL;
    char *text = NULL;
    xf_status s = record_json_text(&head, &text);
    if (s) return s;
    /* "points":[] is the top-level key: every string's quotes are escaped, so it cannot appear
     * inside a value. */
    char *at = strstr(text, "\"points\":[]");
    if (!at) {
        free(text);
        return xf_errorf(XF_EINVAL, "record writer: no points array in the header");
    }
    size_t pre = (size_t)(at - text) + strlen("\"points\":[");
    file_stream fs;
    if (file_stream_open(&fs, path) == XF_OK) {
        file_stream_write(&fs, text, pre);
        for (int64_t j = 0; j < n_points && fs.status == XF_OK; j++) {
            const char *pt;
            size_t len;
            if ((fs.status = point_text(ctx, j, &pt, &len)) != XF_OK) break;
            if (j) file_stream_write(&fs, ",", 1);
            file_stream_write(&fs, pt, len);
        }
        file_stream_write(&fs, text + pre, strlen(text + pre));
        file_stream_write(&fs, "\n", 1);
    }
    free(text);
    return file_stream_close(&fs);
}
