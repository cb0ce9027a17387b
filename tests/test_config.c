/* Model configs: presets against published parameter counts, KV sizes, and the Hugging Face
 * config.json reader against good and bad files. */
#include <criterion/criterion.h>
#include <math.h>

#include "core/json_util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reference_model/config.h"

static void expect_hf_error(const char *text, xf_status want, const char *field);

static model_config preset(const char *name) {
    model_config c;
    xf_status s = config_preset(name, &c);
    cr_assert_eq(s, XF_OK, "preset %s: %s", name, xf_error_msg());
    cr_assert_eq(config_validate(&c), XF_OK, "preset %s invalid: %s", name, xf_error_msg());
    return c;
}

/* ---- parameter counts: the formula written out per model ----
 * per layer = d*q + 2*d*kv + q*d (+ q + 2*kv biases) + 3*d*d_ff + 2*d, with q = heads*head_dim,
 * kv = kv_heads*head_dim; total = layers*per_layer + vocab*d (embedding) + d (final norm)
 * + vocab*d (lm_head, unless tied). */

Test(config_params, llama_2_7b) {
    /* layer: 4*4096^2 = 67,108,864 + 3*4096*11008 = 135,266,304 + 8,192 = 202,383,360
     * 32 layers = 6,476,267,520; + 2*32000*4096 = 262,144,000; + 4096 = 6,738,415,616 (published) */
    model_config c = preset("llama-2-7b");
    cr_assert_eq(config_param_count(&c), INT64_C(6738415616));
}

Test(config_params, llama_2_13b) {
    /* layer: 4*5120^2 = 104,857,600 + 3*5120*13824 = 212,336,640 + 10,240 = 317,204,480
     * 40 layers = 12,688,179,200; + 2*32000*5120 = 327,680,000; + 5120 = 13,015,864,320 (published) */
    model_config c = preset("llama-2-13b");
    cr_assert_eq(config_param_count(&c), INT64_C(13015864320));
}

Test(config_params, llama_2_70b) {
    /* q = 64*128 = 8192, kv = 8*128 = 1024
     * layer: 8192*8192*2 (q, o) = 134,217,728 + 2*8192*1024 = 16,777,216 + 3*8192*28672 = 704,643,072
     *        + 16,384 = 855,654,400; 80 layers = 68,452,352,000; + 2*32000*8192 = 524,288,000; + 8192
     *        = 68,976,648,192 (published) */
    model_config c = preset("llama-2-70b");
    cr_assert_eq(config_param_count(&c), INT64_C(68976648192));
}

Test(config_params, llama_3_8b) {
    /* q = 4096, kv = 8*128 = 1024
     * layer: 2*4096^2 = 33,554,432 + 2*4096*1024 = 8,388,608 + 3*4096*14336 = 176,160,768 + 8192
     *        = 218,112,000; 32 layers = 6,979,584,000; + 2*128256*4096 = 1,050,673,152; + 4096
     *        = 8,030,261,248 (published) */
    model_config c = preset("llama-3-8b");
    cr_assert_eq(config_param_count(&c), INT64_C(8030261248));
}

Test(config_params, llama_3_70b) {
    /* layer as llama-2-70b: 855,654,400; 80 layers = 68,452,352,000; + 2*128256*8192
     * = 2,101,346,304; + 8192 = 70,553,706,496 (the safetensors total of Meta-Llama-3-70B) */
    model_config c = preset("llama-3-70b");
    cr_assert_eq(config_param_count(&c), INT64_C(70553706496));
}

Test(config_params, mistral_7b) {
    /* layer as llama-3-8b: 218,112,000; 32 layers = 6,979,584,000; + 2*32000*4096 = 262,144,000;
     * + 4096 = 7,241,732,096 (published) */
    model_config c = preset("mistral-7b");
    cr_assert_eq(config_param_count(&c), INT64_C(7241732096));
}

/* The newer presets: the counts transformers gives for the published configs, built on the meta
 * device (scripts/make-hf-fixtures.py --counts: sum of numel over model.parameters(), tied
 * weights once). */
Test(config_params, llama_3_1_8b) {
    model_config c = preset("llama-3.1-8b");
    cr_assert_eq(c.rope.kind, ROPE_LLAMA3);
    cr_assert_eq(config_param_count(&c), INT64_C(8030261248));
}

Test(config_params, llama_3_2_1b) {
    /* q = 2048, kv = 512; layer 2*2048^2 + 2*2048*512 + 3*2048*8192 + 4096 = 60,821,504; 16 layers
     * = 973,144,064; + 128256*2048 (tied) = 262,668,288; + 2048 = 1,235,814,400 */
    model_config c = preset("llama-3.2-1b");
    cr_assert_eq(config_param_count(&c), INT64_C(1235814400));
}

Test(config_params, qwen3_8b) {
    /* layer 2*4096^2 + 2*4096*1024 + 3*4096*12288 + 2*4096 + 2*128 (q_norm, k_norm) = 192,946,432;
     * 36 layers = 6,946,071,552; + 2*151936*4096 = 1,244,659,712; + 4096 = 8,190,735,360 */
    model_config c = preset("qwen3-8b");
    cr_assert_eq(c.qk_norm, 1);
    cr_assert_eq(config_param_count(&c), INT64_C(8190735360));
}

/* Mixture of experts: totals as transformers counts them (meta device), active by hand: the total
 * less the unselected routed experts (3 * d * d_ff_expert each) of every MoE layer. */
Test(config_params, mixtral_8x7b) {
    model_config c = preset("mixtral-8x7b");
    cr_assert_eq(config_param_count(&c), INT64_C(46702792704));
    /* 32 layers x 6 unselected experts x 3 * 4096 * 14336 = 33,822,867,456 */
    cr_assert_eq(config_active_param_count(&c), INT64_C(46702792704) - INT64_C(33822867456));
}

Test(config_params, qwen3_30b_a3b) {
    model_config c = preset("qwen3-30b-a3b");
    cr_assert_eq(config_param_count(&c), INT64_C(30532122624));
    /* 48 layers x 120 unselected experts x 3 * 2048 * 768 = 27,179,089,920: 3.35B active */
    cr_assert_eq(config_active_param_count(&c), INT64_C(30532122624) - INT64_C(27179089920));
}

Test(config_hf, mixtral_and_qwen3_moe) {
    const char *mx = "{\"model_type\":\"mixtral\",\"hidden_size\":4096,\"intermediate_size\":14336,\"num_hidden_layers\":32,"
                     "\"num_attention_heads\":32,\"num_key_value_heads\":8,\"vocab_size\":32000,\"max_position_embeddings\":32768,"
                     "\"rope_theta\":1000000.0,\"rms_norm_eps\":1e-05,\"num_local_experts\":8,\"num_experts_per_tok\":2,"
                     "\"router_jitter_noise\":0.0,\"sliding_window\":null,\"tie_word_embeddings\":false}";
    model_config c, p = preset("mixtral-8x7b");
    cr_assert_eq(config_parse_hf(mx, NULL, &c), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(c.n_experts, 8);
    cr_assert_eq(c.experts_per_tok, 2);
    cr_assert_eq(c.d_ff_expert, 14336);
    cr_assert_eq(model_moe_layers(&c), 32);
    cr_assert_eq(config_param_count(&c), config_param_count(&p));
    const char *qm = "{\"model_type\":\"qwen3_moe\",\"hidden_size\":256,\"intermediate_size\":512,\"moe_intermediate_size\":64,"
                     "\"num_hidden_layers\":6,\"num_attention_heads\":4,\"num_key_value_heads\":2,\"head_dim\":64,"
                     "\"vocab_size\":1000,\"max_position_embeddings\":128,\"num_experts\":16,\"num_experts_per_tok\":4,"
                     "\"norm_topk_prob\":true,\"decoder_sparse_step\":2,\"mlp_only_layers\":[5]}";
    cr_assert_eq(config_parse_hf(qm, NULL, &c), XF_OK, "%s", xf_error_msg());
    /* sparse when (l + 1) % 2 == 0 and l not in mlp_only_layers: layers 1 and 3 */
    cr_assert_eq(model_moe_layers(&c), 2);
    cr_assert(model_layer_is_moe(&c, 1) && model_layer_is_moe(&c, 3) && !model_layer_is_moe(&c, 5) && !model_layer_is_moe(&c, 0));
    cr_assert_eq(c.qk_norm, 1);
    cr_assert_eq(c.norm_topk_prob, 1);
    /* embed + lm_head 2*1000*256, final norm 256; attention per layer 256*256*2 + 256*128*2 + 2*64 + 2*256;
     * 4 dense FFNs 3*256*512, 2 MoE: router 16*256 + 16 experts of 3*256*64 */
    int64_t attn = 2 * 256 * 256 + 2 * 256 * 128 + 128 + 512;
    int64_t want = 2 * 1000 * 256 + 256 + 6 * attn + 4 * 3 * 256 * 512 + 2 * (16 * 256 + 16 * 3 * 256 * 64);
    cr_assert_eq(config_param_count(&c), want);
    cr_assert_eq(config_active_param_count(&c), want - 2 * 12 * 3 * 256 * 64);
    /* bad MoE fields are named */
    char t[2048];
    snprintf(t, sizeof t, "%s", qm);
    memcpy(strstr(t, "\"num_experts_per_tok\":4"), "\"num_experts_per_tok\":0", strlen("\"num_experts_per_tok\":0"));
    expect_hf_error(t, XF_EINVAL, "num_experts_per_tok");
    snprintf(t, sizeof t, "%s", qm);
    memcpy(strstr(t, "\"mlp_only_layers\":[5]"), "\"mlp_only_layers\":[9]", strlen("\"mlp_only_layers\":[9]"));
    expect_hf_error(t, XF_EINVAL, "mlp_only_layers");
}

Test(config_params, tinyllama) {
    /* q = 2048, kv = 4*64 = 256
     * layer: 2*2048^2 = 8,388,608 + 2*2048*256 = 1,048,576 + 3*2048*5632 = 34,603,008 + 4096
     *        = 44,044,288; 22 layers = 968,974,336; + 2*32000*2048 = 131,072,000; + 2048
     *        = 1,100,048,384 (published) */
    model_config c = preset("tinyllama-1.1b");
    cr_assert_eq(config_param_count(&c), INT64_C(1100048384));
}

Test(config_params, qwen2_5_7b) {
    /* q = 28*128 = 3584, kv = 4*128 = 512
     * layer: 2*3584^2 = 25,690,112 + 2*3584*512 = 3,670,016 + biases 3584 + 2*512 = 4,608
     *        + 3*3584*18944 = 203,685,888 + 7168 = 233,057,792; 28 layers = 6,525,618,176;
     *        + 2*152064*3584 = 1,089,986,560; + 3584 = 7,615,616,512 (published) */
    model_config c = preset("qwen2.5-7b");
    cr_assert(c.qkv_bias);
    cr_assert_eq(config_param_count(&c), INT64_C(7615616512));
}

Test(config_params, stories15m) {
    /* tied classifier (llama2.c shares it with the embedding)
     * layer: 4*288^2 = 331,776 + 3*288*768 = 663,552 + 576 = 995,904; 6 layers = 5,975,424;
     * + 32000*288 = 9,216,000; + 288 = 15,191,712 (~15.2M, the "15M" of the name) */
    model_config c = preset("stories15m");
    cr_assert(c.tied_embeddings);
    cr_assert_eq(c.d_model, 288);
    cr_assert_eq(c.max_ctx, 256);
    cr_assert_eq(config_param_count(&c), INT64_C(15191712));
}

Test(config_params, stories110m) {
    /* layer: 4*768^2 = 2,359,296 + 3*768*2048 = 4,718,592 + 1536 = 7,079,424; 12 layers
     * = 84,953,088; + 32000*768 = 24,576,000 (tied); + 768 = 109,529,856 (~110M) */
    model_config c = preset("stories110m");
    cr_assert_eq(config_param_count(&c), INT64_C(109529856));
}

Test(config_params, untying_adds_vocab_times_d) {
    model_config c = preset("stories15m");
    int64_t tied = config_param_count(&c);
    c.tied_embeddings = 0;
    cr_assert_eq(config_param_count(&c) - tied, INT64_C(32000) * 288);
}

Test(config_params, invalid_config_gives_minus_one) {
    model_config c = preset("llama-2-7b");
    c.d_model = 0;
    cr_assert_eq(config_param_count(&c), -1);
    cr_assert_eq(config_param_count(NULL), -1);
}

/* ---- KV per token ---- */

Test(config_kv, mha_llama_2_7b) {
    /* 2 * 32 layers * 32 kv heads * 128 = 262,144 elements; fp16: 524,288 B */
    model_config c = preset("llama-2-7b");
    cr_assert_eq(config_kv_elems_per_token(&c), 262144);
    cr_assert_eq(config_kv_elems_per_token(&c) * 2, 524288);
}

Test(config_kv, gqa_llama_3_8b) {
    /* 2 * 32 * 8 * 128 = 65,536 elements; fp16: 131,072 B (4x less than MHA at the same width) */
    model_config c = preset("llama-3-8b");
    cr_assert_eq(config_kv_elems_per_token(&c) * 2, 131072);
}

Test(config_kv, gqa_llama_2_70b_and_qwen) {
    /* llama-2-70b: 2*80*8*128 = 163,840; qwen2.5-7b: 2*28*4*128 = 28,672 */
    model_config a = preset("llama-2-70b"), b = preset("qwen2.5-7b");
    cr_assert_eq(config_kv_elems_per_token(&a), 163840);
    cr_assert_eq(config_kv_elems_per_token(&b), 28672);
}

/* ---- presets ---- */

Test(config_preset, names_and_lookup) {
    const char *want[] = {"stories15m", "stories110m", "tinyllama-1.1b", "llama-2-7b", "llama-2-13b",
                          "llama-2-70b", "llama-3-8b", "llama-3-70b", "mistral-7b", "qwen2.5-7b",
                          "llama-3.1-8b", "llama-3.2-1b", "mixtral-8x7b", "qwen3-30b-a3b", "qwen3-8b",
                          "deepseek-v3", "gemma-3-1b", "gemma-3-4b"};
    cr_assert_eq(config_preset_count(), 18);
    for (int i = 0; i < 18; i++) {
        cr_assert_str_eq(config_preset_name(i), want[i]);
        model_config c = preset(want[i]);
        cr_assert_str_eq(c.name, want[i]);
    }
    cr_assert_null(config_preset_name(-1));
    cr_assert_null(config_preset_name(18));
}

Test(config_preset, case_insensitive) {
    model_config c;
    cr_assert_eq(config_preset("LLaMA-2-7B", &c), XF_OK);
    cr_assert_eq(c.n_layers, 32);
}

Test(config_preset, unknown_names_the_presets) {
    model_config c;
    cr_assert_eq(config_preset("gpt-5", &c), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "gpt-5") && strstr(xf_error_msg(), "llama-2-7b"), "%s", xf_error_msg());
}

Test(config_preset, published_hf_fields) {
    model_config m = preset("mistral-7b"), q = preset("qwen2.5-7b"), l = preset("llama-3-8b");
    cr_assert_eq(m.max_ctx, 32768);
    cr_assert_float_eq(m.rope_theta, 10000.0, 1e-9);
    cr_assert_str_eq(m.arch, "mistral");
    cr_assert_eq(q.vocab, 152064);
    cr_assert_float_eq(q.rope_theta, 1e6, 1e-3);
    cr_assert_float_eq(q.norm_eps, 1e-6, 1e-12);
    cr_assert_eq(q.tied_embeddings, 0);
    cr_assert_float_eq(l.rope_theta, 500000.0, 1e-6);
    cr_assert_eq(l.vocab, 128256);
}

/* ---- validation ---- */

static void expect_invalid(model_config c, const char *field) {
    xf_status s = config_validate(&c);
    cr_assert_eq(s, XF_EINVAL, "expected %s to be refused", field);
    cr_assert(strstr(xf_error_msg(), field), "message should name %s: %s", field, xf_error_msg());
}

Test(config_validate, each_field) {
    model_config base = preset("llama-3-8b"), c;
    c = base; c.n_layers = 0; expect_invalid(c, "n_layers");
    c = base; c.n_layers = 5000; expect_invalid(c, "n_layers");
    c = base; c.d_model = -1; expect_invalid(c, "d_model");
    c = base; c.d_model = (INT64_C(1) << 20) + 1; expect_invalid(c, "d_model");
    c = base; c.n_heads = 0; expect_invalid(c, "n_heads");
    c = base; c.n_kv_heads = 0; expect_invalid(c, "n_kv_heads");
    c = base; c.n_kv_heads = 5; expect_invalid(c, "n_kv_heads"); /* 32 % 5 != 0 */
    c = base; c.n_kv_heads = 64; expect_invalid(c, "n_kv_heads");
    c = base; c.head_dim = 0; expect_invalid(c, "head_dim");
    c = base; c.head_dim = 127; expect_invalid(c, "head_dim"); /* odd: RoPE needs pairs */
    c = base; c.d_ff = 0; expect_invalid(c, "d_ff");
    c = base; c.vocab = -5; expect_invalid(c, "vocab");
    c = base; c.max_ctx = 0; expect_invalid(c, "max_ctx");
    c = base; c.rope_theta = 0; expect_invalid(c, "rope_theta");
    c = base; c.norm_eps = 0; expect_invalid(c, "norm_eps");
    c = base; c.norm_eps = 1.0; expect_invalid(c, "norm_eps");
}

/* ---- Hugging Face config.json ---- */

static const char *LLAMA2_7B_JSON =
    "{\"architectures\":[\"LlamaForCausalLM\"],\"bos_token_id\":1,\"eos_token_id\":2,\"hidden_act\":\"silu\","
    "\"hidden_size\":4096,\"initializer_range\":0.02,\"intermediate_size\":11008,\"max_position_embeddings\":4096,"
    "\"model_type\":\"llama\",\"num_attention_heads\":32,\"num_hidden_layers\":32,\"num_key_value_heads\":32,"
    "\"pretraining_tp\":1,\"rms_norm_eps\":1e-05,\"rope_scaling\":null,\"tie_word_embeddings\":false,"
    "\"torch_dtype\":\"float16\",\"transformers_version\":\"4.31.0.dev0\",\"use_cache\":true,\"vocab_size\":32000}";

static const char *MISTRAL_JSON =
    "{\"architectures\":[\"MistralForCausalLM\"],\"bos_token_id\":1,\"eos_token_id\":2,\"hidden_act\":\"silu\","
    "\"hidden_size\":4096,\"initializer_range\":0.02,\"intermediate_size\":14336,\"max_position_embeddings\":32768,"
    "\"model_type\":\"mistral\",\"num_attention_heads\":32,\"num_hidden_layers\":32,\"num_key_value_heads\":8,"
    "\"rms_norm_eps\":1e-05,\"rope_theta\":10000.0,\"sliding_window\":4096,\"tie_word_embeddings\":false,"
    "\"torch_dtype\":\"bfloat16\",\"use_cache\":true,\"vocab_size\":32000}";

static const char *QWEN2_JSON =
    "{\"architectures\":[\"Qwen2ForCausalLM\"],\"attention_dropout\":0.0,\"bos_token_id\":151643,"
    "\"eos_token_id\":151643,\"hidden_act\":\"silu\",\"hidden_size\":3584,\"initializer_range\":0.02,"
    "\"intermediate_size\":18944,\"max_position_embeddings\":131072,\"max_window_layers\":28,\"model_type\":\"qwen2\","
    "\"num_attention_heads\":28,\"num_hidden_layers\":28,\"num_key_value_heads\":4,\"rms_norm_eps\":1e-06,"
    "\"rope_theta\":1000000.0,\"sliding_window\":131072,\"tie_word_embeddings\":false,\"torch_dtype\":\"bfloat16\","
    "\"use_cache\":true,\"use_sliding_window\":false,\"vocab_size\":152064}";

Test(config_hf, llama_matches_preset) {
    model_config c, p = preset("llama-2-7b");
    xf_status s = config_parse_hf(LLAMA2_7B_JSON, NULL, &c);
    cr_assert_eq(s, XF_OK, "%s", xf_error_msg());
    cr_assert_str_eq(c.arch, "llama");
    cr_assert_eq(c.d_model, 4096);
    cr_assert_eq(c.head_dim, 128); /* 4096 / 32, no head_dim field */
    cr_assert_eq(c.n_kv_heads, 32);
    cr_assert_float_eq(c.rope_theta, 10000.0, 1e-9); /* absent: default 10000 */
    cr_assert_float_eq(c.norm_eps, 1e-5, 1e-12);
    cr_assert_eq(c.qkv_bias, 0);
    cr_assert_eq(config_param_count(&c), config_param_count(&p));
    cr_assert_eq(config_param_count(&c), INT64_C(6738415616));
}

Test(config_hf, mistral) {
    model_config c, p = preset("mistral-7b");
    /* Mistral-7B-v0.1: a 4096-token window on every layer, as the preset has it */
    cr_assert_eq(config_parse_hf(MISTRAL_JSON, NULL, &c), XF_OK, "%s", xf_error_msg());
    cr_assert_str_eq(c.arch, "mistral");
    cr_assert_eq(c.n_kv_heads, 8);
    cr_assert_eq(c.max_ctx, 32768);
    cr_assert_eq(c.sliding_window, 4096);
    cr_assert_eq(model_windowed_layers(&c), 32);
    cr_assert_eq(memcmp(c.window_layers, p.window_layers, sizeof c.window_layers), 0);
    cr_assert_eq(config_param_count(&c), INT64_C(7241732096));
    /* with the window off (null, as v0.3 writes) no layer is windowed */
    char t[2048];
    snprintf(t, sizeof t, "%s", MISTRAL_JSON);
    char *w = strstr(t, "\"sliding_window\":4096");
    cr_assert(w);
    memcpy(w, "\"sliding_window\":null", strlen("\"sliding_window\":null"));
    memmove(w + strlen("\"sliding_window\":null"), w + strlen("\"sliding_window\":4096"), strlen(w + strlen("\"sliding_window\":4096")) + 1);
    cr_assert_eq(config_parse_hf(t, NULL, &c), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(c.sliding_window, 0);
    cr_assert_eq(model_windowed_layers(&c), 0);
}

Test(config_hf, qwen_window_layers) {
    /* qwen2: use_sliding_window false keeps every layer full even with sliding_window set */
    model_config c;
    cr_assert_eq(config_parse_hf(QWEN2_JSON, NULL, &c), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(c.sliding_window, 0);
    /* with it on: layers >= max_window_layers (28 of 28: none; so 20 here -> 8 layers) */
    char t[2048];
    snprintf(t, sizeof t, "%s", QWEN2_JSON);
    char *u = strstr(t, "\"use_sliding_window\":false");
    memcpy(u, "\"use_sliding_window\":true ", strlen("\"use_sliding_window\":true "));
    char *m = strstr(t, "\"max_window_layers\":28");
    memcpy(m, "\"max_window_layers\":20", strlen("\"max_window_layers\":20"));
    cr_assert_eq(config_parse_hf(t, NULL, &c), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(c.sliding_window, 131072);
    cr_assert_eq(model_windowed_layers(&c), 8);
    cr_assert_eq(model_layer_window(&c, 19), 0);
    cr_assert_eq(model_layer_window(&c, 20), 131072);
}

Test(config_hf, qwen2_has_qkv_bias) {
    model_config c;
    cr_assert_eq(config_parse_hf(QWEN2_JSON, "/models/Qwen2.5-7B/config.json", &c), XF_OK, "%s", xf_error_msg());
    cr_assert_str_eq(c.arch, "qwen2");
    cr_assert_str_eq(c.name, "Qwen2.5-7B"); /* the model folder's name */
    cr_assert_eq(c.qkv_bias, 1);
    cr_assert_eq(c.head_dim, 128); /* 3584 / 28 */
    cr_assert_float_eq(c.rope_theta, 1e6, 1e-3);
    cr_assert_eq(config_param_count(&c), INT64_C(7615616512));
}

/* Builds a config.json from key/value pairs, leaving out `skip` and replacing the value of
 * `over_key` by `over_val` (or adding it). Returns a static buffer. */
static const char *BASE_KV[][2] = {
    {"model_type", "\"llama\""},        {"hidden_size", "2048"},         {"intermediate_size", "5632"},
    {"num_hidden_layers", "22"},        {"num_attention_heads", "32"},   {"num_key_value_heads", "4"},
    {"vocab_size", "32000"},            {"max_position_embeddings", "2048"}, {"rope_theta", "10000.0"},
    {"rms_norm_eps", "1e-05"},          {"tie_word_embeddings", "false"},
};
#define N_BASE ((int)(sizeof BASE_KV / sizeof BASE_KV[0]))

static const char *build(const char *skip, const char *over_key, const char *over_val) {
    static char buf[4096];
    size_t used = 0;
    int first = 1, replaced = 0;
    used += (size_t)snprintf(buf + used, sizeof buf - used, "{");
    for (int i = 0; i < N_BASE; i++) {
        if (skip && strcmp(skip, BASE_KV[i][0]) == 0) continue;
        const char *v = BASE_KV[i][1];
        if (over_key && strcmp(over_key, BASE_KV[i][0]) == 0) {
            v = over_val;
            replaced = 1;
        }
        used += (size_t)snprintf(buf + used, sizeof buf - used, "%s\"%s\": %s", first ? "" : ", ", BASE_KV[i][0], v);
        first = 0;
    }
    if (over_key && !replaced) used += (size_t)snprintf(buf + used, sizeof buf - used, ", \"%s\": %s", over_key, over_val);
    snprintf(buf + used, sizeof buf - used, "}");
    return buf;
}

static void expect_hf_error(const char *text, xf_status want, const char *field) {
    model_config c;
    memset(&c, 0x5a, sizeof c);
    model_config before = c;
    xf_status s = config_parse_hf(text, "cfg.json", &c);
    cr_assert_eq(s, want, "text %s: status %d, wanted %d (%s)", text, s, want, xf_error_msg());
    cr_assert(strstr(xf_error_msg(), field), "message should name '%s': %s", field, xf_error_msg());
    cr_assert(strstr(xf_error_msg(), "cfg.json"), "message should name the file: %s", xf_error_msg());
    cr_assert_eq(memcmp(&c, &before, sizeof c), 0, "output must be untouched on error");
}

Test(config_hf, base_text_is_good) {
    model_config c;
    cr_assert_eq(config_parse_hf(build(NULL, NULL, NULL), NULL, &c), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(config_param_count(&c), INT64_C(1100048384)); /* it is TinyLlama */
}

Test(config_hf, each_required_field_missing) {
    const char *req[] = {"model_type", "hidden_size", "intermediate_size", "num_hidden_layers",
                         "num_attention_heads", "vocab_size", "max_position_embeddings"};
    for (size_t i = 0; i < sizeof req / sizeof req[0]; i++) {
        expect_hf_error(build(req[i], NULL, NULL), XF_EINVAL, req[i]);
        cr_assert(strstr(xf_error_msg(), "missing"), "%s", xf_error_msg());
    }
}

Test(config_hf, optional_fields_default) {
    model_config c;
    const char *t = "{\"model_type\":\"llama\",\"hidden_size\":256,\"intermediate_size\":512,\"num_hidden_layers\":2,"
                    "\"num_attention_heads\":4,\"vocab_size\":1000,\"max_position_embeddings\":128}";
    cr_assert_eq(config_parse_hf(t, NULL, &c), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(c.n_kv_heads, 4);  /* defaults to num_attention_heads */
    cr_assert_eq(c.head_dim, 64);   /* 256 / 4 */
    cr_assert_float_eq(c.rope_theta, 10000.0, 1e-9);
    cr_assert_float_eq(c.norm_eps, 1e-6, 1e-15);
    cr_assert_eq(c.tied_embeddings, 0);
    cr_assert_str_eq(c.name, "hf-config");
}

Test(config_hf, wrong_types) {
    expect_hf_error(build(NULL, "hidden_size", "\"4096\""), XF_EINVAL, "hidden_size");
    expect_hf_error(build(NULL, "num_hidden_layers", "22.5"), XF_EINVAL, "num_hidden_layers");
    expect_hf_error(build(NULL, "num_key_value_heads", "true"), XF_EINVAL, "num_key_value_heads");
    expect_hf_error(build(NULL, "tie_word_embeddings", "\"yes\""), XF_EINVAL, "tie_word_embeddings");
    expect_hf_error(build(NULL, "rope_theta", "\"big\""), XF_EINVAL, "rope_theta");
    expect_hf_error(build(NULL, "rms_norm_eps", "[1e-5]"), XF_EINVAL, "rms_norm_eps");
    expect_hf_error(build(NULL, "model_type", "5"), XF_EINVAL, "model_type");
    expect_hf_error(build(NULL, "vocab_size", "{}"), XF_EINVAL, "vocab_size");
    expect_hf_error(build(NULL, "head_dim", "\"64\""), XF_EINVAL, "head_dim");
    expect_hf_error(build(NULL, "attention_bias", "1"), XF_EINVAL, "attention_bias");
}

Test(config_hf, negative_values) {
    expect_hf_error(build(NULL, "hidden_size", "-2048"), XF_EINVAL, "hidden_size");
    expect_hf_error(build(NULL, "intermediate_size", "-1"), XF_EINVAL, "intermediate_size");
    expect_hf_error(build(NULL, "num_hidden_layers", "-22"), XF_EINVAL, "num_hidden_layers");
    expect_hf_error(build(NULL, "vocab_size", "-32000"), XF_EINVAL, "vocab_size");
    expect_hf_error(build(NULL, "num_key_value_heads", "-4"), XF_EINVAL, "num_key_value_heads");
    expect_hf_error(build(NULL, "rope_theta", "-10000"), XF_EINVAL, "rope_theta");
    expect_hf_error(build(NULL, "rms_norm_eps", "-1e-5"), XF_EINVAL, "rms_norm_eps");
    expect_hf_error(build(NULL, "head_dim", "-64"), XF_EINVAL, "head_dim");
}

Test(config_hf, zero_values) {
    expect_hf_error(build(NULL, "num_attention_heads", "0"), XF_EINVAL, "num_attention_heads");
    expect_hf_error(build(NULL, "intermediate_size", "0"), XF_EINVAL, "intermediate_size");
    expect_hf_error(build(NULL, "max_position_embeddings", "0"), XF_EINVAL, "max_position_embeddings");
    expect_hf_error(build(NULL, "num_key_value_heads", "0"), XF_EINVAL, "num_key_value_heads");
    expect_hf_error(build(NULL, "rope_theta", "0"), XF_EINVAL, "rope_theta");
    expect_hf_error(build(NULL, "rms_norm_eps", "0"), XF_EINVAL, "rms_norm_eps");
}

Test(config_hf, absurd_values) {
    expect_hf_error(build(NULL, "hidden_size", "1e9"), XF_EINVAL, "hidden_size");
    expect_hf_error(build(NULL, "num_hidden_layers", "100000"), XF_EINVAL, "num_hidden_layers");
    expect_hf_error(build(NULL, "vocab_size", "1e12"), XF_EINVAL, "vocab_size");
    expect_hf_error(build(NULL, "intermediate_size", "1e300"), XF_EINVAL, "intermediate_size");
    expect_hf_error(build(NULL, "rms_norm_eps", "2"), XF_EINVAL, "rms_norm_eps");
    expect_hf_error(build(NULL, "head_dim", "1000000"), XF_EINVAL, "head_dim");
}

Test(config_hf, unknown_model_type) {
    expect_hf_error(build(NULL, "model_type", "\"gpt2\""), XF_EINVAL, "model_type");
    cr_assert(strstr(xf_error_msg(), "gpt2"), "%s", xf_error_msg());
    expect_hf_error(build(NULL, "model_type", "\"falcon\""), XF_EINVAL, "model_type");
}

Test(config_hf, truncated_json) {
    const char *full = build(NULL, NULL, NULL);
    char cut[4096];
    /* cut after a complete value in the middle: the document ends before its closing brace */
    size_t n = (size_t)(strchr(full + strlen(full) / 2, ',') - full);
    memcpy(cut, full, n);
    cut[n] = '\0';
    model_config c;
    cr_assert_eq(config_parse_hf(cut, "cfg.json", &c), XF_EPARSE);
    cr_assert(strstr(xf_error_msg(), "truncated") && strstr(xf_error_msg(), "cfg.json"), "%s", xf_error_msg());
    cr_assert_eq(config_parse_hf("", "cfg.json", &c), XF_EPARSE);
    cr_assert_eq(config_parse_hf("{\"model_type\": \"llama\",}", "cfg.json", &c), XF_EPARSE);
    cr_assert_eq(config_parse_hf("[1, 2]", "cfg.json", &c), XF_EINVAL);
}

/* A syntax error is named with its position, not called "truncated" (both of these once were). */
Test(config_hf, syntax_error_has_its_position) {
    model_config c;
    cr_assert_eq(config_parse_hf("{\"model_type\":\"llama\",}", "cfg.json", &c), XF_EPARSE);
    cr_assert(strstr(xf_error_msg(), "line 1, column 23 (byte 22)") && strstr(xf_error_msg(), "trailing comma") &&
                  !strstr(xf_error_msg(), "truncated"),
              "%s", xf_error_msg());
    cr_assert_eq(config_parse_hf("this is not json {", "cfg.json", &c), XF_EPARSE);
    cr_assert(strstr(xf_error_msg(), "line 1, column 1 (byte 0)") && strstr(xf_error_msg(), "not a JSON value") &&
                  !strstr(xf_error_msg(), "truncated"),
              "%s", xf_error_msg());
    cr_assert_eq(config_parse_hf("{\"a\": 1,\n \"b\": [1, 2,]\n}", "cfg.json", &c), XF_EPARSE);
    cr_assert(strstr(xf_error_msg(), "line 2, column 13") && strstr(xf_error_msg(), "']'"), "%s", xf_error_msg());
    cr_assert_eq(config_parse_hf("{\"a\": 'x'}", "cfg.json", &c), XF_EPARSE);
    cr_assert(strstr(xf_error_msg(), "column 7") && strstr(xf_error_msg(), "double quotes"), "%s", xf_error_msg());
    cr_assert_eq(config_parse_hf("{\"a\": 1} x", "cfg.json", &c), XF_EPARSE);
    cr_assert(strstr(xf_error_msg(), "more text after"), "%s", xf_error_msg());
    /* the checker agrees with cJSON on valid text */
    size_t off;
    int line, col, trunc;
    char what[96];
    const char *good = "{\"a\": [1, -2.5e3, true, false, null, \"x\\u00e9\\n\"], \"b\": {}}";
    cr_assert_eq(json_syntax_error(good, strlen(good), &off, &line, &col, &trunc, what, sizeof what), 0, "%s", what);
    cr_assert_eq(json_syntax_error("{\"a\": \"b", 8, &off, &line, &col, &trunc, what, sizeof what), 1);
    cr_assert_eq(trunc, 1);
}

Test(config_hf, heads_not_divisible_by_kv_heads) {
    /* 32 query heads cannot be split into groups over 5 KV heads */
    expect_hf_error(build(NULL, "num_key_value_heads", "5"), XF_EINVAL, "num_key_value_heads");
    expect_hf_error(build(NULL, "num_key_value_heads", "64"), XF_EINVAL, "num_key_value_heads");
}

Test(config_hf, hidden_not_divisible_without_head_dim) {
    /* 2048 / 24 is not whole (24 heads do split over 4 KV heads) and no head_dim says otherwise */
    expect_hf_error(build(NULL, "num_attention_heads", "24"), XF_EINVAL, "hidden_size");
}

Test(config_hf, head_dim_is_authoritative) {
    /* head_dim 128 with 32 heads: q width 4096 != hidden 2048, allowed (as in Gemma-style configs) */
    model_config c;
    cr_assert_eq(config_parse_hf(build(NULL, "head_dim", "128"), NULL, &c), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(c.head_dim, 128);
    /* kv = 2*22*4*128 = 22,528 elements */
    cr_assert_eq(config_kv_elems_per_token(&c), 22528);
    expect_hf_error(build(NULL, "head_dim", "63"), XF_EINVAL, "head_dim");
}

Test(config_hf, rope_parameters_object) {
    /* transformers >= 4.56 writes {"rope_parameters": {"rope_theta": ..., "rope_type": "default"}} */
    model_config c;
    cr_assert_eq(config_parse_hf(build("rope_theta", "rope_parameters", "{\"rope_theta\": 500000.0, \"rope_type\": \"default\"}"), NULL, &c),
                 XF_OK, "%s", xf_error_msg());
    cr_assert_float_eq(c.rope_theta, 500000.0, 1e-6);
    expect_hf_error(build("rope_theta", "rope_parameters", "{\"rope_theta\": \"x\"}"), XF_EINVAL, "rope_theta");
    expect_hf_error(build("rope_theta", "rope_parameters", "{\"rope_theta\": -1}"), XF_EINVAL, "rope_theta");
    expect_hf_error(build("rope_theta", "rope_parameters", "7"), XF_EINVAL, "rope_parameters");
}

Test(config_hf, llama_attention_bias) {
    model_config c;
    cr_assert_eq(config_parse_hf(build(NULL, "attention_bias", "true"), NULL, &c), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(c.qkv_bias, 1);
    cr_assert_eq(c.o_bias, 1, "llama's attention_bias biases o_proj too");
    /* biases add q + 2*kv + d = 2048 + 2*256 + 2048 = 4608 per layer, 22 layers: 101,376 */
    cr_assert_eq(config_param_count(&c), INT64_C(1100048384) + 101376);
}

Test(config_hf, llama_mlp_bias) {
    model_config c;
    cr_assert_eq(config_parse_hf(build(NULL, "mlp_bias", "true"), NULL, &c), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(c.mlp_bias, 1);
    cr_assert_eq(c.qkv_bias + c.o_bias, 0);
    /* gate and up d_ff each, down d: 2*5632 + 2048 = 13,312 per layer, 22 layers: 292,864 */
    cr_assert_eq(config_param_count(&c), INT64_C(1100048384) + 292864);
}

Test(config_hf, unsupported_features) {
    expect_hf_error(build(NULL, "hidden_act", "\"gelu\""), XF_EINVAL, "hidden_act");
    expect_hf_error(build(NULL, "rope_scaling", "{\"rope_type\": \"longrope\", \"factor\": 4}"), XF_EINVAL, "longrope");
    expect_hf_error(build(NULL, "rope_scaling", "{\"rope_type\": \"linear\", \"factor\": 4, \"mrope_section\": [1]}"),
                    XF_EINVAL, "mrope_section");
    expect_hf_error(build(NULL, "rope_parameters", "{\"rope_type\": \"default\", \"partial_rotary_factor\": 0.5}"),
                    XF_EINVAL, "partial_rotary_factor");
    expect_hf_error(build(NULL, "layer_types", "[\"full_attention\", \"sliding_attention\"]"), XF_EINVAL, "layer_types");
    expect_hf_error(build(NULL, "layer_types", "[\"full_attention\", \"chunked_attention\"]"), XF_EINVAL, "layer_types");
    expect_hf_error(build(NULL, "final_logit_softcapping", "30.0"), XF_EINVAL, "final_logit_softcapping");
    expect_hf_error(build(NULL, "num_local_experts", "8"), XF_EINVAL, "num_local_experts");
    /* the MoE / MLA families are recognised and refused naming the field that asks for them */
    expect_hf_error(build(NULL, "model_type", "\"mixtral\""), XF_EINVAL, "num_local_experts"); /* missing */
    expect_hf_error(build(NULL, "model_type", "\"qwen3_moe\""), XF_EINVAL, "num_experts");
    expect_hf_error(build(NULL, "model_type", "\"qwen2_moe\""), XF_EINVAL, "num_experts");
    expect_hf_error(build(NULL, "model_type", "\"deepseek_v3\""), XF_EINVAL, "kv_lora_rank");
    expect_hf_error(build(NULL, "model_type", "\"gemma2\""), XF_EINVAL, "model_type");
}

/* ---- RoPE scaling: both spellings, every type, the frequencies transformers computes ---- */

Test(config_rope, spellings_agree) {
    const char *v4 = "{\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                     "\"original_max_position_embeddings\": 512}";
    const char *v5 = "{\"rope_type\": \"llama3\", \"rope_theta\": 10000.0, \"factor\": 8.0, \"low_freq_factor\": 1.0, "
                     "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 512}";
    const char *old = "{\"type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                      "\"original_max_position_embeddings\": 512}";
    model_config a, b, c;
    cr_assert_eq(config_parse_hf(build(NULL, "rope_scaling", v4), NULL, &a), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(config_parse_hf(build("rope_theta", "rope_parameters", v5), NULL, &b), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(config_parse_hf(build(NULL, "rope_scaling", old), NULL, &c), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(a.rope.kind, ROPE_LLAMA3);
    cr_assert_eq(memcmp(&a.rope, &b.rope, sizeof a.rope), 0);
    cr_assert_eq(memcmp(&a.rope, &c.rope, sizeof a.rope), 0);
    cr_assert_eq(a.rope.original_ctx, 512);
    cr_assert_float_eq(a.rope.factor, 8.0, 0);
    cr_assert_float_eq(b.rope_theta, 10000.0, 0);
    /* the two spellings together must agree */
    char both[4096];
    snprintf(both, sizeof both, "%s", build(NULL, "rope_scaling", v4));
    both[strlen(both) - 1] = '\0';
    strcat(both, ", \"rope_parameters\": {\"rope_type\": \"linear\", \"factor\": 2.0}}");
    expect_hf_error(both, XF_EINVAL, "disagree");
    /* required keys named */
    expect_hf_error(build(NULL, "rope_scaling", "{\"rope_type\": \"llama3\", \"factor\": 8.0}"), XF_EINVAL,
                    "original_max_position_embeddings");
    expect_hf_error(build(NULL, "rope_scaling", "{\"rope_type\": \"linear\"}"), XF_EINVAL, "factor");
    expect_hf_error(build(NULL, "rope_scaling", "{\"rope_type\": \"linear\", \"factor\": -2}"), XF_EINVAL, "factor");
    expect_hf_error(build(NULL, "rope_scaling", "7"), XF_EINVAL, "rope_scaling");
    model_config d;
    cr_assert_eq(config_parse_hf(build(NULL, "rope_scaling", "null"), NULL, &d), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(d.rope.kind, ROPE_DEFAULT);
}

static model_config rope_cfg(const char *scaling) {
    model_config c;
    cr_assert_eq(config_parse_hf(build(NULL, "rope_scaling", scaling), NULL, &c), XF_OK, "%s: %s", scaling, xf_error_msg());
    return c;
}

/* head_dim of the base text: 2048 / 32 = 64, theta 10000. */
Test(config_rope, frequencies) {
    double f[32], base[32], af;
    model_config c = rope_cfg("null");
    cr_assert_eq(config_rope_freqs(&c, base, &af), XF_OK);
    cr_assert_float_eq(af, 1.0, 0);
    for (int i = 0; i < 32; i++) cr_assert_float_eq(base[i], pow(10000.0, -2.0 * i / 64.0), 1e-15);

    c = rope_cfg("{\"rope_type\": \"linear\", \"factor\": 4.0}");
    cr_assert_eq(config_rope_freqs(&c, f, &af), XF_OK);
    for (int i = 0; i < 32; i++) cr_assert_float_eq(f[i], base[i] / 4.0, 1e-15);

    /* dynamic: within max_position_embeddings transformers 5 keeps the default frequencies */
    c = rope_cfg("{\"rope_type\": \"dynamic\", \"factor\": 4.0}");
    cr_assert_eq(config_rope_freqs(&c, f, &af), XF_OK);
    for (int i = 0; i < 32; i++) cr_assert_float_eq(f[i], base[i], 0);

    /* llama3 over 512 original positions, low 1, high 4: wavelength 2 pi / f; above 512 divided by
     * 8, below 128 kept, between a ramp (512 / wl - 1) / 3 */
    c = rope_cfg("{\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                 "\"original_max_position_embeddings\": 512}");
    cr_assert_eq(config_rope_freqs(&c, f, &af), XF_OK);
    int n_low = 0, n_high = 0, n_mid = 0;
    for (int i = 0; i < 32; i++) {
        double wl = 2 * 3.14159265358979323846 / base[i], want;
        if (wl < 128) want = base[i], n_high++;
        else if (wl > 512) want = base[i] / 8, n_low++;
        else {
            double sm = (512 / wl - 1) / 3;
            want = (1 - sm) * base[i] / 8 + sm * base[i];
            n_mid++;
        }
        cr_assert_float_eq(f[i], want, 1e-15, "i %d", i);
    }
    cr_assert(n_low > 0 && n_high > 0 && n_mid > 0, "the test must cover all three bands: %d %d %d", n_low, n_high, n_mid);

    /* yarn, factor 4 over 512 positions, beta 32 / 1: correction dims floor(64 ln(512 / (32 * 2 pi)) /
     * (2 ln 10000)) = floor(3.25..) = 3 ... ceil(64 ln(512 / (2 pi)) / (2 ln 10000)) = ceil(15.28..) = 16;
     * the attention factor 0.1 ln 4 + 1 */
    c = rope_cfg("{\"rope_type\": \"yarn\", \"factor\": 4.0, \"original_max_position_embeddings\": 512}");
    cr_assert_eq(config_rope_freqs(&c, f, &af), XF_OK);
    cr_assert_float_eq(af, 0.1 * log(4.0) + 1.0, 1e-12);
    for (int i = 0; i < 32; i++) {
        double ramp = (i - 3.0) / (16.0 - 3.0);
        ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
        cr_assert_float_eq(f[i], base[i] / 4.0 * ramp + base[i] * (1 - ramp), 1e-15, "i %d", i);
    }
    /* DeepSeek's mscale / mscale_all_dim: their ratio of get_mscale values; equal ones give 1 */
    c = rope_cfg("{\"rope_type\": \"yarn\", \"factor\": 40.0, \"mscale\": 1.0, \"mscale_all_dim\": 1.0, "
                 "\"original_max_position_embeddings\": 512, \"beta_fast\": 32, \"beta_slow\": 1}");
    cr_assert_eq(config_rope_freqs(&c, f, &af), XF_OK);
    cr_assert_float_eq(af, 1.0, 1e-15);
    c = rope_cfg("{\"rope_type\": \"yarn\", \"factor\": 40.0, \"mscale\": 0.707, \"mscale_all_dim\": 1.0, "
                 "\"original_max_position_embeddings\": 512}");
    cr_assert_eq(config_rope_freqs(&c, f, &af), XF_OK);
    cr_assert_float_eq(af, (0.1 * 0.707 * log(40.0) + 1) / (0.1 * log(40.0) + 1), 1e-12);
    c = rope_cfg("{\"rope_type\": \"yarn\", \"factor\": 4.0, \"attention_factor\": 0.5, "
                 "\"original_max_position_embeddings\": 512}");
    cr_assert_eq(config_rope_freqs(&c, f, &af), XF_OK);
    cr_assert_float_eq(af, 0.5, 0);
}

Test(config_hf, qwen3) {
    const char *t = "{\"model_type\":\"qwen3\",\"hidden_size\":4096,\"intermediate_size\":12288,\"num_hidden_layers\":36,"
                    "\"num_attention_heads\":32,\"num_key_value_heads\":8,\"head_dim\":128,\"vocab_size\":151936,"
                    "\"max_position_embeddings\":40960,\"rope_theta\":1000000,\"rms_norm_eps\":1e-06,\"attention_bias\":false,"
                    "\"tie_word_embeddings\":false,\"use_sliding_window\":false,\"sliding_window\":null,\"max_window_layers\":36,"
                    "\"hidden_act\":\"silu\"}";
    model_config c, p = preset("qwen3-8b");
    cr_assert_eq(config_parse_hf(t, NULL, &c), XF_OK, "%s", xf_error_msg());
    cr_assert_str_eq(c.arch, "qwen3");
    cr_assert_eq(c.qk_norm, 1);
    cr_assert_eq(c.qkv_bias + c.o_bias, 0);
    cr_assert_eq(config_param_count(&c), config_param_count(&p));
    char u[2048];
    snprintf(u, sizeof u, "%s", t);
    memcpy(strstr(u, "\"use_sliding_window\":false"), "\"use_sliding_window\":true ", strlen("\"use_sliding_window\":true "));
    expect_hf_error(u, XF_EINVAL, "sliding_window"); /* on, but no window given */
}

Test(config_hf, null_text) {
    model_config c;
    cr_assert_eq(config_parse_hf(NULL, "cfg.json", &c), XF_EINVAL);
}

/* ---- files and config_resolve ---- */

#define TINY_DIR XF_SOURCE_DIR "/tests/data/tinyllama-1.1b-chat"

Test(config_resolve, folder_file_and_preset) {
    model_config c;
    cr_assert_eq(config_resolve(TINY_DIR, &c), XF_OK, "%s", xf_error_msg());
    cr_assert_str_eq(c.name, "tinyllama-1.1b-chat");
    cr_assert_eq(config_param_count(&c), INT64_C(1100048384));
    cr_assert_eq(config_resolve(TINY_DIR "/config.json", &c), XF_OK, "%s", xf_error_msg());
    cr_assert_str_eq(c.name, "tinyllama-1.1b-chat");
    cr_assert_eq(config_resolve("Mistral-7B", &c), XF_OK);
    cr_assert_str_eq(c.name, "mistral-7b");
}

Test(config_resolve, missing_path) {
    model_config c;
    cr_assert_eq(config_resolve("/nonexistent/model/config.json", &c), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "stories15m"), "%s", xf_error_msg());
    cr_assert_eq(config_resolve(XF_SOURCE_DIR "/tests", &c), XF_EINVAL); /* folder without config.json */
    cr_assert(strstr(xf_error_msg(), "config.json"), "%s", xf_error_msg());
    cr_assert_eq(config_resolve("", &c), XF_EINVAL);
    cr_assert_eq(config_load_hf("/nonexistent.json", &c), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "/nonexistent.json"), "%s", xf_error_msg());
    cr_assert_neq(config_load_hf(XF_SOURCE_DIR "/tests", &c), XF_OK); /* a folder: an error, not a crash */
}

Test(config_resolve, file_name_when_not_config_json) {
    /* a file not called config.json is named by its own name */
    char path[] = "/tmp/xf_test_cfg_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(QWEN2_JSON, f);
    fclose(f);
    model_config c;
    xf_status s = config_load_hf(path, &c);
    unlink(path);
    cr_assert_eq(s, XF_OK, "%s", xf_error_msg());
    cr_assert_str_eq(c.name, strrchr(path, '/') + 1);
}

/* ---- robustness: every prefix and random byte flips never crash, and every answer is either a
 * valid config or an error with a message ---- */

Test(config_hf, every_prefix_and_mutations) {
    const char *full = QWEN2_JSON;
    size_t n = strlen(full);
    char *buf = malloc(n + 1);
    cr_assert_not_null(buf);
    for (size_t k = 0; k < n; k++) {
        memcpy(buf, full, k);
        buf[k] = '\0';
        model_config c;
        xf_error_clear();
        xf_status s = config_parse_hf(buf, "p.json", &c);
        cr_assert_neq(s, XF_OK, "prefix of %zu bytes accepted", k);
        cr_assert(xf_error_msg()[0] != '\0');
    }
    unsigned seed = 12345;
    const char alphabet[] = "{}[]\",:-0123456789e.tfnul \\x";
    for (int iter = 0; iter < 3000; iter++) {
        memcpy(buf, full, n + 1);
        for (int m = 0; m < 1 + iter % 4; m++) {
            seed = seed * 1103515245u + 12345u;
            size_t pos = (seed >> 8) % n;
            seed = seed * 1103515245u + 12345u;
            buf[pos] = alphabet[(seed >> 8) % (sizeof alphabet - 1)];
        }
        model_config c;
        xf_error_clear();
        xf_status s = config_parse_hf(buf, "m.json", &c);
        if (s == XF_OK) cr_assert_eq(config_validate(&c), XF_OK, "accepted an invalid config: %s", buf);
        else cr_assert(xf_error_msg()[0] != '\0', "error without a message for %s", buf);
    }
    free(buf);
}

/* qwen2_moe: the shared expert (3 * d * shared_expert_intermediate_size) and its gate (d) counted
 * in every MoE layer, in the active count too. Qwen1.5-MoE-A2.7B: 14,315,784,192 as transformers
 * counts it (scripts/make-hf-fixtures.py --counts); active = total - 24 layers x 56 unselected
 * experts x 3 * 2048 * 1408 = 2,689,173,504 (the "A2.7B"). The tiny fixtures: transformers' own
 * count of the loaded models. */
Test(config_params, qwen2_moe_shared_expert) {
    const char *q = "{\"model_type\":\"qwen2_moe\",\"hidden_size\":2048,\"intermediate_size\":5632,\"moe_intermediate_size\":1408,"
                    "\"shared_expert_intermediate_size\":5632,\"num_experts\":60,\"num_experts_per_tok\":4,\"num_hidden_layers\":24,"
                    "\"num_attention_heads\":16,\"num_key_value_heads\":16,\"vocab_size\":151936,\"max_position_embeddings\":8192,"
                    "\"rope_theta\":1000000.0,\"norm_topk_prob\":false,\"tie_word_embeddings\":false,\"decoder_sparse_step\":1,"
                    "\"sliding_window\":0,\"use_sliding_window\":false}";
    model_config c;
    cr_assert_eq(config_parse_hf(q, NULL, &c), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(c.d_ff_shared, 5632);
    cr_assert_eq(c.shared_expert_gate, 1);
    cr_assert_eq(c.qkv_bias, 1);
    cr_assert_eq(c.sliding_window, 0);
    cr_assert_eq(config_param_count(&c), INT64_C(14315784192));
    cr_assert_eq(config_active_param_count(&c), INT64_C(2689173504));
    const struct { const char *dir; int64_t n; } fx[] = {{"mixtral", 484672}, {"qwen3-moe", 220704}, {"qwen2-moe", 208576}};
    for (int i = 0; i < 3; i++) {
        char path[512];
        snprintf(path, sizeof path, XF_SOURCE_DIR "/tests/data/hf/%s", fx[i].dir);
        cr_assert_eq(config_resolve(path, &c), XF_OK, "%s", xf_error_msg());
        cr_assert_eq(config_param_count(&c), fx[i].n, "%s: %lld parameters, transformers counts %lld", fx[i].dir,
                     (long long)config_param_count(&c), (long long)fx[i].n);
    }
    /* the shared expert's size is required */
    char t[1024];
    snprintf(t, sizeof t, "%s", q);
    char *f = strstr(t, "\"shared_expert_intermediate_size\"");
    memcpy(f, "\"shared_expert_intermediate_sizX\"", strlen("\"shared_expert_intermediate_sizX\""));
    expect_hf_error(t, XF_EINVAL, "shared_expert_intermediate_size");
}
