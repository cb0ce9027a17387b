/* The parallel cost model (reference_model/cost_parallel.h) and its prediction
 * (analyzers/predict_parallel.h): splits, collectives, memory per device, the pipeline, refusals,
 * checked against published figures (docs/parallel.md gives the sources). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/predict.h"
#include "analyzers/predict_parallel.h"
#include "analyzers/roofline.h"
#include "reference_model/cost_parallel.h"
#include "reports/record_json.h"

#define EXACT(actual, expected)                                                                                 \
    cr_assert((double)(actual) == (double)(expected), "%s = %.17g, expected %.17g", #actual, (double)(actual), \
              (double)(expected))
#define NEAR(actual, expected, rel)                                                                                    \
    cr_assert(fabs((double)(actual) - (double)(expected)) <= (rel) * fabs((double)(expected)), "%s = %.17g, expected %.17g", \
              #actual, (double)(actual), (double)(expected))

static model_config preset(const char *name) {
    model_config c;
    cr_assert_eq(config_preset(name, &c), XF_OK, "%s", xf_error_msg());
    return c;
}

static device_spec device(const char *name) {
    device_spec d;
    cr_assert_eq(device_lookup(name, NULL, &d), XF_OK, "%s", xf_error_msg());
    return d;
}

static workload wl(int64_t batch, int64_t prompt, int64_t gen) {
    workload w;
    workload_default(&w);
    w.batch = batch;
    w.prompt = prompt;
    w.gen = gen;
    w.wdtype = w.adtype = w.kvdtype = XF_BF16;
    return w;
}

static parallel_split split(const model_config *c, int tp, int pp, const device_spec *d) {
    parallel_plan p = {tp, pp, 1, 0, 0};
    parallel_split sp;
    cr_assert_eq(parallel_split_of(c, &p, d, &sp), XF_OK, "%s", xf_error_msg());
    return sp;
}

/* ops of one step: n ops, caller frees */
static cost_op *step(const model_config *c, const workload *w, const parallel_split *sp, step_shape sh, int64_t *n) {
    *n = parallel_step_op_count(c, sp);
    cost_op *ops = calloc((size_t)*n, sizeof *ops);
    cost_step_sums s = cost_sums_of_shape(sh);
    cr_assert_eq(parallel_step(c, w, sp, &s, ops, *n), XF_OK, "%s", xf_error_msg());
    return ops;
}

/* One device and one stage is the base cost model, op for op, and its memory. */
Test(cost_parallel, one_device_is_the_base_model) {
    const char *models[] = {"llama-2-7b", "mixtral-8x7b", "qwen3-30b-a3b", "mistral-7b", "llama-3.2-1b"};
    device_spec d = device("h100-sxm");
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
        model_config c = preset(models[m]);
        workload w = wl(4, 256, 64);
        parallel_split sp = split(&c, 1, 1, &d);
        int64_t n;
        cost_op *ops = step(&c, &w, &sp, workload_decode_step(&w, 300), &n);
        int64_t nb = cost_step_op_count(&c);
        cr_assert_eq(n, nb, "%s", models[m]);
        cost_op *base = calloc((size_t)nb, sizeof *base);
        cr_assert_eq(cost_step(&c, &w, workload_decode_step(&w, 300), base, nb), XF_OK);
        cr_assert_eq(memcmp(ops, base, (size_t)n * sizeof *ops), 0, "%s", models[m]);
        cost_memory a, b;
        parallel_memory_max(&c, &w, &sp, &a);
        cost_memory_of(&c, &w, &b);
        NEAR(a.weights_bytes, b.weights_bytes, 1e-12);
        NEAR(a.kv_bytes, b.kv_bytes, 1e-12);
        NEAR(a.activations_bytes, b.activations_bytes, 1e-12);
        cr_assert_eq(parallel_max_batch(&c, &w, &sp, 80e9), cost_max_batch(&c, &w, 80e9), "%s", models[m]);
        free(ops);
        free(base);
    }
}

/* nccl-tests' bus bandwidth convention (PERFORMANCE.md): all-reduce busbw = algbw * 2(n-1)/n,
 * all-gather busbw = algbw * (n-1)/n. */
Test(cost_parallel, bus_bytes_of_the_ring) {
    EXACT(parallel_allreduce_bytes(1000, 2), 1000);
    EXACT(parallel_allreduce_bytes(1000, 8), 1750);
    EXACT(parallel_allreduce_bytes(1000, 1), 0);
    EXACT(parallel_allgather_bytes(1000, 4), 750);
    EXACT(parallel_allgather_bytes(1000, 1), 0);
}

/* Megatron-LM (Shoeybi et al. 2019, section 3; Korthikanti et al. 2022, section 4.2.2): a
 * transformer layer under tensor parallelism does two all-reduces of the b x s x h activations
 * in the forward pass. llama-2-7b, tp 8, a prefill of b = 2, s = 512, h = 4096 in bf16: each
 * all-reduce's buffer 2 * 512 * 4096 * 2 B = 8 MiB, 2 * 7/8 of it sent by each device. */
Test(cost_parallel, megatron_two_allreduces_per_layer) {
    model_config c = preset("llama-2-7b");
    device_spec d = device("h100-sxm");
    workload w = wl(2, 512, 1);
    parallel_split sp = split(&c, 8, 1, &d);
    int64_t n;
    cost_op *ops = step(&c, &w, &sp, workload_prefill_step(&w), &n);
    const double buffer = 2.0 * 512 * 4096 * 2;
    int per_layer[32] = {0};
    double layer_bytes = 0;
    for (int64_t i = 0; i < n; i++) {
        if (ops[i].kind != OP_ALL_REDUCE || ops[i].layer < 0) continue;
        per_layer[ops[i].layer]++;
        EXACT(ops[i].comm_bytes, 2.0 * 7 / 8 * buffer);
        EXACT(ops[i].comm_hops, 14);
        EXACT(ops[i].bytes, 0);
        EXACT(ops[i].flops, 0);
        if (ops[i].layer == 0) layer_bytes += ops[i].comm_bytes;
    }
    for (int l = 0; l < 32; l++) cr_assert_eq(per_layer[l], 2, "layer %d", l);
    EXACT(layer_bytes, 4.0 * 7 / 8 * buffer);
    free(ops);
}

/* Column- and row-parallel splits divide the matrix work exactly: tp devices' GEMM FLOPs and
 * weight bytes add up to one device's. */
Test(cost_parallel, splits_conserve_the_work) {
    model_config c = preset("llama-2-7b");
    device_spec d = device("h100-sxm");
    workload w = wl(4, 128, 16);
    step_shape sh = workload_prefill_step(&w);
    parallel_split one = split(&c, 1, 1, &d), four = split(&c, 4, 1, &d);
    int64_t n1, n4;
    cost_op *a = step(&c, &w, &one, sh, &n1), *b = step(&c, &w, &four, sh, &n4);
    double f1 = 0, f4 = 0, w1 = 0, w4 = 0;
    for (int64_t i = 0; i < n1; i++)
        if (op_kind_is_gemm(a[i].kind) || a[i].kind == OP_ATTENTION) f1 += a[i].flops, w1 += a[i].weight_bytes;
    for (int64_t i = 0; i < n4; i++)
        if (op_kind_is_gemm(b[i].kind) || b[i].kind == OP_ATTENTION) f4 += b[i].flops, w4 += b[i].weight_bytes;
    NEAR(4 * f4, f1, 1e-12);
    NEAR(4 * w4, w1, 1e-12);
    cr_assert_eq(n4, n1 + 2 + 2 * 32); /* an all-reduce after the embedding, an all-gather after sampling, two per layer */
    free(a);
    free(b);
}

/* llama-2-70b in bf16 (69.0 B parameters, 138 GB): about 69 GB per GPU at tp 2, 34.5 at tp 4 and
 * 17.2 at tp 8 (docs/parallel.md: the figure every serving guide quotes, 140 GB over the GPUs);
 * norms are replicated, so a device holds slightly more than 1/tp. Its 8 KV heads: one per GPU at
 * tp 8, 40 KiB of KV per token per GPU (327,680 / 8); at tp 16 still one, each held twice. */
Test(cost_parallel, llama_2_70b_memory_per_gpu) {
    model_config c = preset("llama-2-70b");
    device_spec d = device("h100-sxm");
    workload w = wl(1, 1024, 1024);
    const double total = cost_weight_bytes(&c, &w);
    NEAR(total, 2.0 * config_param_count(&c), 1e-12);
    const int tps[] = {2, 4, 8};
    for (int i = 0; i < 3; i++) {
        parallel_split sp = split(&c, tps[i], 1, &d);
        cost_memory m;
        parallel_memory_max(&c, &w, &sp, &m);
        cr_assert(m.weights_bytes >= total / tps[i], "tp %d: %.6g", tps[i], m.weights_bytes);
        NEAR(m.weights_bytes, total / tps[i], 1e-3);
        NEAR(m.kv_bytes, 327680.0 * 2048 / tps[i], 1e-12);
    }
    NEAR(total / 2, 69e9, 0.01);
    NEAR(total / 8, 17.25e9, 0.01);
    parallel_split s16 = split(&c, 16, 1, &d);
    EXACT(s16.kv_copies, 2);
    EXACT(s16.shard.n_kv_heads, 1);
    cost_memory m16;
    parallel_memory_max(&c, &w, &s16, &m16);
    EXACT(m16.kv_bytes_per_token, 327680.0 / 8);
    /* the largest batch per device grows as the weights shrink: 80 GiB devices */
    parallel_split s2 = split(&c, 2, 1, &d), s8 = split(&c, 8, 1, &d);
    int64_t b2 = parallel_max_batch(&c, &w, &s2, d.memory_bytes), b8 = parallel_max_batch(&c, &w, &s8, d.memory_bytes);
    cr_assert(b2 > 0 && b8 > 4 * b2, "tp 2: %lld, tp 8: %lld", (long long)b2, (long long)b8);
    cr_assert_eq(cost_max_batch(&c, &w, d.memory_bytes), 0); /* one 80 GiB GPU does not hold it */
}

/* Pipeline stages: consecutive layers, a send/recv of the N x d activations between stages, the
 * GPipe bubble (pp - 1) / (m + pp - 1). */
Test(cost_parallel, pipeline_stages_and_bubble) {
    model_config c = preset("llama-2-70b");
    device_spec d = device("h100-sxm");
    parallel_split sp = split(&c, 1, 3, &d); /* 80 layers: 27, 27, 26 */
    EXACT(sp.stage_first[1], 27);
    EXACT(sp.stage_first[2], 54);
    EXACT(sp.stage_first[3], 80);
    cr_assert_eq(parallel_stage_of(&sp, 26, 0), 0);
    cr_assert_eq(parallel_stage_of(&sp, 27, 0), 1);
    cr_assert_eq(parallel_stage_of(&sp, -1, 1), 2);
    workload w = wl(8, 100, 10);
    int64_t n;
    cost_op *ops = step(&c, &w, &sp, workload_decode_step(&w, 150), &n);
    int sends = 0;
    for (int64_t i = 0; i < n; i++)
        if (ops[i].kind == OP_SEND_RECV) {
            sends++;
            EXACT(ops[i].comm_bytes, 8.0 * 8192 * 2);
            cr_assert(ops[i].layer == 26 || ops[i].layer == 53);
            cr_assert_eq(ops[i].comm_node, 0);
        }
    cr_assert_eq(sends, 2);
    free(ops);
    EXACT(parallel_bubble(4, 4), 3.0 / 7);
    EXACT(parallel_bubble(1, 8), 0);
    EXACT(parallel_bubble(2, 1), 0.5);
    const double t[4] = {1, 1, 1, 1}, u[2] = {1, 3};
    EXACT(parallel_pipeline_time(t, 4, 4), 7); /* (m + pp - 1) t */
    EXACT(parallel_pipeline_time(u, 2, 3), 4 + 2 * 3);
    /* stages beyond a node of 8: tp 4 x pp 4 = 16 devices, the boundary between stage 1 and 2
     * (devices 7 and 8) crosses to the next node */
    parallel_split x = split(&c, 4, 4, &d);
    ops = step(&c, &w, &x, workload_decode_step(&w, 150), &n);
    int cross = 0;
    for (int64_t i = 0; i < n; i++)
        if (ops[i].kind == OP_SEND_RECV) cross += ops[i].comm_node;
    cr_assert_eq(cross, 1);
    free(ops);
}

/* Expert parallel: mixtral's 8 experts over 2 devices, the MoE block on half the rows each:
 * dispatch and combine all-to-alls of k copies of N/2 rows, an all-gather of the rows; the two
 * devices' expert FLOPs add up to one device's. */
Test(cost_parallel, expert_parallel) {
    model_config c = preset("mixtral-8x7b");
    device_spec d = device("h100-sxm");
    workload w = wl(4, 64, 1);
    parallel_split s1 = split(&c, 1, 1, &d), s2 = split(&c, 2, 1, &d);
    EXACT(s2.experts_per_device, 4);
    int64_t n1, n2;
    cost_op *a = step(&c, &w, &s1, workload_prefill_step(&w), &n1), *b = step(&c, &w, &s2, workload_prefill_step(&w), &n2);
    double fa = 0, fb = 0;
    int a2a = 0, ag = 0, ar = 0;
    const double rows = 4.0 * 64, rowb = 4096 * 2.0;
    for (int64_t i = 0; i < n1; i++)
        if (a[i].kind == OP_GATE_UP || a[i].kind == OP_DOWN) fa += a[i].flops;
    for (int64_t i = 0; i < n2; i++) {
        if (b[i].kind == OP_GATE_UP || b[i].kind == OP_DOWN) fb += b[i].flops;
        if (b[i].layer != 0) continue;
        if (b[i].kind == OP_ALL_TO_ALL) {
            a2a++;
            EXACT(b[i].comm_bytes, 0.5 * 2 * (rows / 2) * rowb); /* (n-1)/n of k = 2 copies of N / 2 rows */
        }
        if (b[i].kind == OP_ALL_GATHER) {
            ag++;
            EXACT(b[i].comm_bytes, 0.5 * rows * rowb);
        }
        if (b[i].kind == OP_ALL_REDUCE) ar++;
    }
    NEAR(2 * fb, fa, 1e-12);
    cr_assert_eq(a2a, 2);
    cr_assert_eq(ag, 1);
    cr_assert_eq(ar, 1);
    cost_memory m1, m2;
    parallel_memory_max(&c, &w, &s1, &m1);
    parallel_memory_max(&c, &w, &s2, &m2);
    cr_assert(m2.weights_bytes < 0.52 * m1.weights_bytes && m2.weights_bytes > 0.5 * m1.weights_bytes);
    free(a);
    free(b);
}

/* The reference model's split (replicate_vocab: what run --tp runs): MoE layers split by columns,
 * every expert's d_ff_expert / tp on every device, one all-reduce after down and none of the
 * all-to-all / all-gather; the same work over the devices, half the expert weights each. */
Test(cost_parallel, experts_split_by_columns) {
    model_config c = preset("mixtral-8x7b");
    device_spec d = device("h100-sxm");
    workload w = wl(4, 64, 1);
    parallel_plan p = {2, 1, 1, 0, 1};
    parallel_split s1 = split(&c, 1, 1, &d), s2;
    cr_assert_eq(parallel_split_of(&c, &p, &d, &s2), XF_OK, "%s", xf_error_msg());
    cr_assert(s2.experts_tp);
    EXACT(s2.experts_per_device, 0);
    EXACT(s2.shard.d_ff_expert, c.d_ff_expert / 2);
    EXACT(s2.shard.n_experts, c.n_experts);
    int64_t n1, n2;
    cost_op *a = step(&c, &w, &s1, workload_prefill_step(&w), &n1), *b = step(&c, &w, &s2, workload_prefill_step(&w), &n2);
    double fa = 0, fb = 0;
    int ar = 0, other = 0;
    const double rows = 4.0 * 64, rowb = 4096 * 2.0;
    for (int64_t i = 0; i < n1; i++)
        if (a[i].kind == OP_GATE_UP || a[i].kind == OP_DOWN) fa += a[i].flops;
    for (int64_t i = 0; i < n2; i++) {
        if (b[i].kind == OP_GATE_UP || b[i].kind == OP_DOWN) fb += b[i].flops;
        if (b[i].layer != 0) continue;
        if (b[i].kind == OP_ALL_REDUCE) {
            ar++;
            EXACT(b[i].comm_bytes, 2.0 * (2 - 1) / 2 * rows * rowb); /* ring: 2(n-1)/n of N x d_model */
        }
        other += b[i].kind == OP_ALL_TO_ALL || b[i].kind == OP_ALL_GATHER;
    }
    /* the same work split, but the router runs whole on every device: counted on each (~1e-4 of it) */
    cr_assert(2 * fb > fa && 2 * fb - fa < 2e-4 * fa, "%g vs %g", 2 * fb, fa);
    cr_assert_eq(ar, 2);
    cr_assert_eq(other, 0);
    EXACT(n2, n1 + 2 * c.n_layers);
    cost_memory m1, m2;
    parallel_memory_max(&c, &w, &s1, &m1);
    parallel_memory_max(&c, &w, &s2, &m2);
    cr_assert(m2.weights_bytes < 0.52 * m1.weights_bytes && m2.weights_bytes > 0.5 * m1.weights_bytes);
    c.d_ff_expert = 14335; /* odd: no even split of the columns */
    cr_assert_eq(parallel_split_of(&c, &p, &d, &s2), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "expert FFN width 14335 does not split evenly over 2 devices") != NULL, "%s", xf_error_msg());
    free(a);
    free(b);
}

/* What cannot be split is refused, saying why and what to give. */
Test(cost_parallel, refusals) {
    device_spec d = device("h100-sxm");
    model_config c = preset("llama-2-7b");
    parallel_split sp;
    parallel_plan p = {3, 1, 1, 0, 0};
    cr_assert_eq(parallel_split_of(&c, &p, &d, &sp), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "32 attention heads") && strstr(xf_error_msg(), "whole heads") &&
                  strstr(xf_error_msg(), "1, 2, 4, 8, 16, 32"),
              "%s", xf_error_msg());
    p = (parallel_plan){4, 2, 1, 4, 0};
    cr_assert_eq(parallel_split_of(&c, &p, &d, &sp), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "more than the 4 of --gpus"), "%s", xf_error_msg());
    p = (parallel_plan){2, 1, 4, 0, 0};
    cr_assert_eq(parallel_split_of(&c, &p, &d, &sp), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "--micro-batches"), "%s", xf_error_msg());
    p = (parallel_plan){1, 33, 1, 0, 0};
    cr_assert_eq(parallel_split_of(&c, &p, &d, &sp), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "32 layers"), "%s", xf_error_msg());
    model_config mx = preset("mixtral-8x7b");
    p = (parallel_plan){16, 1, 1, 0, 0};
    cr_assert_eq(parallel_split_of(&mx, &p, &d, &sp), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "8 experts"), "%s", xf_error_msg());
    model_config tl = preset("tinyllama-1.1b"); /* 4 KV heads: tp 8 replicates, tp 6 neither */
    p = (parallel_plan){8, 1, 1, 0, 0};
    cr_assert_eq(parallel_split_of(&tl, &p, &d, &sp), XF_OK);
    EXACT(sp.kv_copies, 2);
    tl.n_heads = 24; /* 24 heads, 4 KV heads: tp 6 divides the heads but not the KV heads */
    tl.d_ff = 5640;
    p = (parallel_plan){6, 1, 1, 0, 0};
    cr_assert_eq(parallel_split_of(&tl, &p, &d, &sp), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "4 KV heads"), "%s", xf_error_msg());
    device_spec nolink = d;
    memset(&nolink.link, 0, sizeof nolink.link);
    p = (parallel_plan){2, 1, 1, 0, 0};
    cr_assert_eq(parallel_split_of(&c, &p, &nolink, &sp), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "no link"), "%s", xf_error_msg());
    device_spec nonode = d;
    memset(&nonode.node_link, 0, sizeof nonode.node_link);
    p = (parallel_plan){8, 2, 1, 0, 0};
    cr_assert_eq(parallel_split_of(&c, &p, &nonode, &sp), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "node_link"), "%s", xf_error_msg());
}

/* A collective's time is its bytes over the link's bandwidth plus its steps' latency, and the
 * larger term names its class; measured, its link utilization does. */
Test(cost_parallel, collectives_on_the_roofline) {
    device_spec d = device("h100-sxm");
    cost_op op = {0};
    op.kind = OP_ALL_REDUCE;
    op.comm_bytes = 450e6;
    op.comm_hops = 14;
    NEAR(roofline_predict_time(&op, &d), 1e-3, 1e-12); /* 450 MB at 450 GB/s; latency unknown (0) */
    record_op r;
    roofline_predict_op(&op, &d, &r);
    cr_assert_eq(r.bound, XF_BOUND_COMM);
    d.link.latency_s = 1e-3;
    roofline_predict_op(&op, &d, &r);
    NEAR(r.predicted_time_s, 15e-3, 1e-12);
    cr_assert_eq(r.bound, XF_BOUND_LATENCY);
    op.comm_node = 1; /* over InfiniBand: 50 GB/s */
    d.link.latency_s = 0;
    NEAR(roofline_predict_time(&op, &d), 9e-3, 1e-12);
    op.comm_node = 0;
    roofline_predict_op(&op, &d, &r);
    r.time_s = 2e-3; /* half the link's bandwidth: 50% < the 60% threshold */
    roofline_measure_op(&r, &d, NULL);
    NEAR(r.util_link, 0.5, 1e-12);
    cr_assert_eq(r.bound, XF_BOUND_LATENCY);
    r.time_s = 1.25e-3;
    roofline_measure_op(&r, &d, NULL);
    NEAR(r.util_link, 0.8, 1e-12);
    cr_assert_eq(r.bound, XF_BOUND_COMM);
    cr_assert_str_eq(bound_name(XF_BOUND_COMM), "communication");
}

/* The prediction as a record: the split, the collectives' share, memory per device; it survives
 * the JSON round trip. */
Test(cost_parallel, record_round_trip) {
    model_config c = preset("llama-2-70b");
    device_spec d = device("h100-sxm");
    workload w[2] = {wl(8, 512, 64), wl(8, 512, 64)};
    parallel_plan plans[2] = {{1, 1, 1, 0, 0}, {4, 2, 4, 0, 0}};
    record r;
    cr_assert_eq(predict_parallel_record(&c, &d, w, plans, 2, &r), XF_OK, "%s", xf_error_msg());
    const record_point *p = &r.points[1];
    cr_assert_eq(r.points[0].par.tp, 0);
    cr_assert_eq(p->par.tp, 4);
    cr_assert_eq(p->par.devices, 8);
    EXACT(p->par.bubble, 1.0 / 5);
    cr_assert(p->par.comm_share > 0 && p->par.comm_share < 1);
    cr_assert(p->summary.share_bound[XF_BOUND_COMM] > 0);
    cr_assert(p->par.decode_step_s > 0 && p->par.prefill_step_s > 0);
    cr_assert(p->memory.total_bytes < r.points[0].memory.total_bytes / 7);
    char *text = NULL;
    cr_assert_eq(record_json_text(&r, &text), XF_OK, "%s", xf_error_msg());
    cr_assert(strstr(text, "\"all_reduce\"") && strstr(text, "\"send_recv\"") && strstr(text, "\"communication\""));
    record back;
    cr_assert_eq(record_from_json(text, "test", &back), XF_OK, "%s", xf_error_msg());
    const record_point *q = &back.points[1];
    cr_assert_eq(q->par.tp, 4);
    cr_assert_eq(q->par.pp, 2);
    cr_assert_eq(q->par.micro_batches, 4);
    EXACT(q->par.comm_bytes, p->par.comm_bytes);
    EXACT(back.device.link.bandwidth_Bps, 450e9);
    cr_assert_eq(back.device.gpus_per_node, 8);
    for (int64_t i = 0; i < q->n_ops; i++) {
        EXACT(q->ops[i].cost.comm_bytes, p->ops[i].cost.comm_bytes);
        cr_assert_eq(q->ops[i].cost.comm_node, p->ops[i].cost.comm_node);
        cr_assert_eq(q->ops[i].bound, p->ops[i].bound);
    }
    free(text);
    record_free(&back);
    record_free(&r);
}

/* Layer 0's op of kind k among n ops (the test fails without one). */
static const cost_op *layer0_op(const cost_op *ops, int64_t n, op_kind k) {
    for (int64_t i = 0; i < n; i++)
        if (ops[i].layer == 0 && ops[i].kind == k) return &ops[i];
    cr_assert_fail("no layer-0 op of kind %d", (int)k);
    return NULL;
}

/* DeepSeek-V3's latent attention under tensor parallelism as the reference model splits it
 * (experts by columns): q_a, kv_a and their norms whole on every device, q_b / kv_b / o_proj by
 * heads, the latent KV cache whole on every device (replicated, its bytes per token unchanged),
 * one all-reduce after o_proj and one after the FFN; in both forms. */
Test(cost_parallel, mla_split_by_heads) {
    model_config c = preset("deepseek-v3");
    device_spec d = device("h100-sxm");
    workload w = wl(2, 16, 1);
    w.wdtype = w.adtype = w.kvdtype = XF_FP32;
    const int tp = 8;
    const double h = (double)c.n_heads, qh = (double)(c.qk_nope_head_dim + c.qk_rope_head_dim), r = (double)c.kv_lora_rank,
                 dn = (double)c.qk_nope_head_dim, rows = 2.0 * 16;
    for (int absorbed = 0; absorbed < 2; absorbed++) {
        c.mla_absorbed = absorbed;
        parallel_plan p = {tp, 1, 1, 0, 1};
        parallel_split s1 = split(&c, 1, 1, &d), s8;
        cr_assert_eq(parallel_split_of(&c, &p, &d, &s8), XF_OK, "%s", xf_error_msg());
        EXACT(s8.shard.n_heads, c.n_heads / tp);
        EXACT(s8.shard.kv_lora_rank, c.kv_lora_rank);
        int64_t n1, n8;
        cost_op *a = step(&c, &w, &s1, workload_prefill_step(&w), &n1), *b = step(&c, &w, &s8, workload_prefill_step(&w), &n8);
        const cost_op *qa = layer0_op(a, n1, OP_QKV), *qb = layer0_op(b, n8, OP_QKV), *ka = layer0_op(a, n1, OP_KV_APPEND),
                      *kb = layer0_op(b, n8, OP_KV_APPEND), *ta = layer0_op(a, n1, OP_ATTENTION), *tb = layer0_op(b, n8, OP_ATTENTION),
                      *oa = layer0_op(a, n1, OP_O_PROJ), *ob = layer0_op(b, n8, OP_O_PROJ);
        int ar = 0;
        for (int64_t i = 0; i < n8; i++)
            if (b[i].layer == 0 && b[i].kind == OP_ALL_REDUCE) {
                ar++;
                EXACT(b[i].comm_bytes, 2.0 * (tp - 1) / tp * rows * (double)c.d_model * 4); /* ring, N x d_model fp32 */
            }
        cr_assert_eq(ar, 2);
        /* q_b (and, absorbed, W_UK) split by heads; q_a, kv_a and the norms whole on each device */
        const double split_q = (double)c.q_lora_rank * h * qh * 4 + (absorbed ? h * dn * r * 4 : 0);
        NEAR(qa->weight_bytes - qb->weight_bytes, split_q * (tp - 1) / tp, 1e-12);
        /* the latent row written and read whole on every device: the cache replicated */
        EXACT(kb->kv_write_bytes, ka->kv_write_bytes);
        EXACT(tb->kv_read_bytes, ta->kv_read_bytes);
        NEAR(tb->weight_bytes * tp, ta->weight_bytes, 1e-12); /* kv_b by heads (naive; absorbed reads none here) */
        NEAR(ob->flops * tp, oa->flops, 1e-12);
        NEAR(ob->weight_bytes * tp, oa->weight_bytes, 1e-12);
        cost_memory m1, m8;
        parallel_memory_max(&c, &w, &s1, &m1);
        parallel_memory_max(&c, &w, &s8, &m8);
        EXACT(m8.kv_bytes_per_token, m1.kv_bytes_per_token);
        EXACT(m8.kv_bytes_per_token, (double)c.n_layers * (r + (double)c.qk_rope_head_dim) * 4);
        free(a);
        free(b);
    }
}
