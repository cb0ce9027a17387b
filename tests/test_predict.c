/* predict_point / predict_record: the cost model against a device, as a record. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/predict.h"
#include "analyzers/roofline.h"

#define EXACT(actual, expected)                                                                                 \
    cr_assert((double)(actual) == (double)(expected), "%s = %.17g, expected %.17g", #actual, (double)(actual), \
              (double)(expected))

static model_config preset(const char *name) {
    model_config c;
    cr_assert_eq(config_preset(name, &c), XF_OK, "%s", xf_error_msg());
    return c;
}

static device_spec device(const char *name) {
    device_spec d;
    cr_assert_eq(device_lookup(name, NULL, &d), XF_OK, "device %s: %s", name, xf_error_msg());
    return d;
}

Test(predict, point_llama2_7b_h100) {
    model_config c = preset("llama-2-7b");
    device_spec d = device("h100-sxm");
    workload w = {1, 512, 128, XF_BF16, XF_BF16, XF_FP16, 0};
    record_point p;
    memset(&p, 0, sizeof p);
    cr_assert_eq(predict_point(&c, &w, &d, &p), XF_OK, "%s", xf_error_msg());
    /* Two steps of 4 + 12 * 32 = 388 ops. */
    cr_assert_eq(p.n_ops, 776);
    cr_assert_eq(p.ops[0].cost.phase, XF_PREFILL);
    cr_assert_eq(p.ops[0].cost.kind, OP_EMBEDDING);
    cr_assert_eq(p.ops[387].cost.kind, OP_SAMPLING);
    cr_assert_eq(p.ops[388].cost.phase, XF_DECODE);
    cr_assert_eq(p.ops[388].cost.kind, OP_EMBEDDING);
    /* Mean decode context 512 + 128 / 2 = 576 (decode steps 1..127 at 513..639): decode attention reads 576 tokens of KV,
     * 576 * 2 * 4096 * 2 B = 9,437,184 per layer. */
    cr_assert_eq(p.summary.decode_context, 576);
    EXACT(p.ops[388 + 1 + 4].cost.kv_read_bytes, 9437184.0);
    double pre = 0, dec = 0;
    for (int i = 0; i < 388; i++) pre += p.ops[i].time_s;
    for (int i = 388; i < 776; i++) dec += p.ops[i].time_s;
    cr_assert_float_eq(p.summary.ttft_s, pre, 1e-15);
    cr_assert_float_eq(p.summary.tpot_s, dec, 1e-15);
    /* Batch-1 decode is weight streaming: TPOT is at least the weights over the bandwidth,
     * 13,476,831,232 B / 3.35e12 B/s = 4.02 ms, and the rest (KV, activations, FP32 ops) adds
     * less than 10%. */
    double floor_s = 13476831232.0 / 3.35e12;
    cr_assert(p.summary.tpot_s >= floor_s && p.summary.tpot_s < 1.1 * floor_s, "tpot %g floor %g", p.summary.tpot_s,
              floor_s);
    /* tokens/s = 1 * 128 / (ttft + 127 tpot): the prefill gives the first of the 128 tokens. */
    cr_assert_float_eq(p.summary.tokens_per_s, 128.0 / (p.summary.ttft_s + 127 * p.summary.tpot_s), 1e-9);
    /* Memory: weights 2 B per parameter; KV 1 * 640 tokens * 524,288 B = 335,544,320. */
    EXACT(p.memory.weights_bytes, 13476831232.0);
    EXACT(p.memory.kv_bytes, 335544320.0);
    EXACT(p.memory.kv_bytes_per_token, 524288.0);
    EXACT(p.memory.capacity_bytes, d.memory_bytes);
    EXACT(p.memory.total_bytes, p.memory.weights_bytes + p.memory.kv_bytes + p.memory.activations_bytes);
    cr_assert_eq(p.summary.max_batch, cost_max_batch(&c, &w, d.memory_bytes));
    /* (80 GiB - 13.5 GB) / (640 * 524,288 B of KV + activations) is roughly 180: well above 1. */
    cr_assert(p.summary.max_batch > 100 && p.summary.max_batch < 200, "max batch %lld",
              (long long)p.summary.max_batch);
    double shares = 0;
    for (int b = 0; b < XF_BOUND_COUNT; b++) shares += p.summary.share_bound[b];
    cr_assert_float_eq(shares, 1.0, 1e-12);
    free(p.ops);
}

Test(predict, gen_zero_is_prefill_only) {
    model_config c = preset("stories15m");
    device_spec d = device("l4");
    workload w = {2, 64, 0, XF_FP32, XF_FP32, XF_FP32, 0};
    record_point p;
    cr_assert_eq(predict_point(&c, &w, &d, &p), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(p.n_ops, 4 + 12 * 6);
    cr_assert_eq(p.summary.decode_context, 0);
    EXACT(p.summary.tpot_s, 0.0);
    EXACT(p.summary.tokens_per_s, 0.0);
    cr_assert_gt(p.summary.ttft_s, 0.0);
    free(p.ops);
}

Test(predict, record_sweep_and_errors) {
    model_config c = preset("llama-3-8b");
    device_spec d = device("a100-80gb");
    workload ws[3] = {{1, 512, 128, XF_BF16, XF_BF16, XF_BF16, 0},
                      {8, 512, 128, XF_BF16, XF_BF16, XF_BF16, 0},
                      {64, 512, 128, XF_INT4, XF_BF16, XF_INT8, 0}};
    record r;
    cr_assert_eq(predict_record(&c, &d, ws, 3, &r), XF_OK, "%s", xf_error_msg());
    cr_assert_str_eq(r.kind, "predict");
    cr_assert_eq(r.version, RECORD_VERSION);
    cr_assert_eq(r.n_points, 3);
    cr_assert_eq(r.model_params, config_param_count(&c));
    /* LLaMA-3-8B: 2 * 32 * 8 * 128 * 2 = 131,072 B per token at bf16 (first point). */
    EXACT(r.kv_bytes_per_token, 131072.0);
    cr_assert_str_eq(r.device.name, "a100-80gb");
    cr_assert(strlen(r.created) >= 20, "created '%s'", r.created);
    for (int i = 0; i < 3; i++) cr_assert_eq(r.points[i].wl.batch, ws[i].batch);
    /* Batching amortises the weights: decode throughput grows with the batch. */
    cr_assert_gt(r.points[1].summary.decode_tokens_per_s, 4 * r.points[0].summary.decode_tokens_per_s);
    /* int4 weights: roughly a quarter of the bf16 bytes (plus 2 B per 128 weights). */
    cr_assert_lt(r.points[2].memory.weights_bytes, 0.3 * r.points[0].memory.weights_bytes);
    record_free(&r);

    /* A bad workload in the middle: an error naming the point, freed cleanly. */
    ws[1].batch = 0;
    cr_assert_eq(predict_record(&c, &d, ws, 3, &r), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "point 2") != NULL, "%s", xf_error_msg());
    cr_assert(strstr(xf_error_msg(), "batch") != NULL, "%s", xf_error_msg());
    record_free(&r);
    cr_assert_eq(predict_record(&c, &d, ws, 0, &r), XF_EINVAL);
    record_free(&r);
    record_point p;
    cr_assert_eq(predict_point(&c, &ws[1], &d, &p), XF_EINVAL);
    cr_assert_eq(p.n_ops, 0);
    cr_assert_null(p.ops);
}

Test(predict, step_time_matches_the_op_sum) {
    /* predict_step_time costs one layer and multiplies by n_layers: it must equal the sum of the
     * 4 + 12 * 32 ops' predicted times of predict_point for both phases. */
    model_config c = preset("llama-2-7b");
    device_spec d = device("h200");
    workload w = {8, 256, 64, XF_BF16, XF_BF16, XF_BF16, 0};
    record_point p;
    cr_assert_eq(predict_point(&c, &w, &d, &p), XF_OK, "%s", xf_error_msg());
    cost_step_sums pre = cost_sums_of_shape(workload_prefill_step(&w));
    cost_step_sums dec = cost_sums_of_shape(workload_decode_step(&w, p.summary.decode_context));
    double tp = 0, td = 0;
    cr_assert_eq(predict_step_time(&c, &w, &pre, &d, &tp), XF_OK);
    cr_assert_eq(predict_step_time(&c, &w, &dec, &d, &td), XF_OK);
    cr_assert_float_eq(tp, p.summary.ttft_s, 1e-12 * p.summary.ttft_s);
    cr_assert_float_eq(td, p.summary.tpot_s, 1e-12 * p.summary.tpot_s);
    free(p.ops);
    /* Errors: a bad config, an empty step. */
    model_config bad = c;
    bad.vocab = 0;
    cr_assert_eq(predict_step_time(&bad, &w, &pre, &d, &tp), XF_EINVAL);
    cost_step_sums empty = {XF_DECODE, 0, 0, 0, 0};
    cr_assert_eq(predict_step_time(&c, &w, &empty, &d, &tp), XF_EINVAL);
}
