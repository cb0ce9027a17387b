/* DeepSeek-V3: the config reader's multi-head latent attention and DeepSeek routing fields, the
 * deepseek-v3 preset's parameter counts, and the refusals of fields that do not add up. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "reference_model/config.h"

/* The published deepseek-ai/DeepSeek-V3 config as transformers 5.24 writes it
 * (DeepseekV3Config(...).to_json_string(use_diff=False), the fields that matter here). */
static const char k_v3[] =
    "{\"attention_bias\": false, \"first_k_dense_replace\": 3, \"head_dim\": 64, \"hidden_act\": \"silu\", "
    "\"hidden_size\": 7168, \"intermediate_size\": 18432, \"kv_lora_rank\": 512, \"max_position_embeddings\": 163840, "
    "\"model_type\": \"deepseek_v3\", \"moe_intermediate_size\": 2048, \"n_group\": 8, \"n_routed_experts\": 256, "
    "\"n_shared_experts\": 1, \"norm_topk_prob\": true, \"num_attention_heads\": 128, \"num_experts_per_tok\": 8, "
    "\"num_hidden_layers\": 61, \"num_key_value_heads\": 128, \"num_nextn_predict_layers\": 1, \"pretraining_tp\": 1, "
    "\"q_lora_rank\": 1536, \"qk_head_dim\": 192, \"qk_nope_head_dim\": 128, \"qk_rope_head_dim\": 64, "
    "\"rms_norm_eps\": 1e-06, \"rope_interleave\": true, \"rope_parameters\": {\"beta_fast\": 32, \"beta_slow\": 1, "
    "\"factor\": 40.0, \"mscale\": 1.0, \"mscale_all_dim\": 1.0, \"original_max_position_embeddings\": 4096, "
    "\"rope_theta\": 10000.0, \"rope_type\": \"yarn\"}, \"routed_scaling_factor\": 2.5, \"tie_word_embeddings\": false, "
    "\"topk_group\": 4, \"use_cache\": true, \"v_head_dim\": 128, \"vocab_size\": 129280}";

/* k_v3 with the text `from` replaced by `to` (each must occur once). */
static const char *edit(const char *from, const char *to) {
    static char buf[4096];
    const char *at = strstr(k_v3, from);
    cr_assert_not_null(at, "'%s' not in the config", from);
    snprintf(buf, sizeof buf, "%.*s%s%s", (int)(at - k_v3), k_v3, to, at + strlen(from));
    return buf;
}

static void expect_error(const char *text, const char *needle) {
    model_config c;
    xf_status s = config_parse_hf(text, "ds.json", &c);
    cr_assert_eq(s, XF_EINVAL, "accepted a config that should fail with '%s'", needle);
    cr_assert(strstr(xf_error_msg(), needle), "message '%s' does not say '%s'", xf_error_msg(), needle);
}

/* 671,026,404,352 parameters: what transformers 5.24 counts for the published config, built on
 * the meta device (with torch.device('meta'): AutoModelForCausalLM.from_config(cfg); sum of
 * p.numel() over model.parameters(); e_score_correction_bias is a buffer, not counted). Active by
 * hand: less 58 MoE layers x 248 unselected routed experts x 3 * 7168 * 2048 = 633,474,121,728. */
Test(config_mla, preset_counts_match_transformers) {
    model_config c;
    cr_assert_eq(config_preset("deepseek-v3", &c), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(config_validate(&c), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(config_param_count(&c), INT64_C(671026404352));
    cr_assert_eq(config_active_param_count(&c), INT64_C(671026404352) - INT64_C(633474121728));
    cr_assert_eq(config_active_param_count(&c), INT64_C(37552282624));
    cr_assert_eq(model_moe_layers(&c), 58);
}

Test(config_mla, published_config_reads_as_the_preset) {
    model_config c, p;
    cr_assert_eq(config_parse_hf(k_v3, "ds.json", &c), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(config_preset("deepseek-v3", &p), XF_OK);
    cr_assert_str_eq(c.arch, "deepseek_v3");
    cr_assert(model_is_mla(&c));
    cr_assert_eq(c.q_lora_rank, 1536);
    cr_assert_eq(c.kv_lora_rank, 512);
    cr_assert_eq(c.qk_nope_head_dim, 128);
    cr_assert_eq(c.qk_rope_head_dim, 64);
    cr_assert_eq(c.head_dim, 64);
    cr_assert_eq(c.v_head_dim, 128);
    cr_assert_eq(c.rope_interleave, 1);
    cr_assert_eq(c.rope.kind, ROPE_YARN);
    cr_assert_float_eq(c.rope.factor, 40.0, 0);
    cr_assert_float_eq(c.rope.mscale_all_dim, 1.0, 0);
    cr_assert_float_eq(c.rope.attention_factor, 1.0, 1e-15); /* get_mscale(40, 1) / get_mscale(40, 1) */
    cr_assert_eq(c.moe_score, MOE_SCORE_SIGMOID_GROUPED);
    cr_assert_eq(c.n_experts, 256);
    cr_assert_eq(c.experts_per_tok, 8);
    cr_assert_eq(c.d_ff_expert, 2048);
    cr_assert_eq(c.d_ff_shared, 2048); /* one shared expert of moe_intermediate_size */
    cr_assert_eq(c.n_group, 8);
    cr_assert_eq(c.topk_group, 4);
    cr_assert_float_eq(c.routed_scaling_factor, 2.5, 0);
    cr_assert_eq(c.norm_topk_prob, 1);
    for (int l = 0; l < 61; l++) cr_assert_eq(model_layer_is_moe(&c, l), l >= 3, "layer %d", l);
    cr_assert_eq(config_param_count(&c), config_param_count(&p));
    cr_assert_eq(config_active_param_count(&c), config_active_param_count(&p));
    /* the preset is the published config, field by field, but for the name */
    snprintf(c.name, sizeof c.name, "%s", p.name);
    cr_assert_eq(memcmp(&c, &p, sizeof c), 0, "the preset and the published config differ");
}

Test(config_mla, latent_cache_and_softmax_scale) {
    model_config c;
    cr_assert_eq(config_preset("deepseek-v3", &c), XF_OK);
    /* one latent row (kv_lora_rank + qk_rope_head_dim) per layer, not 2 * 128 heads * 192 */
    cr_assert_eq(config_kv_elems_per_token(&c), 61 * (512 + 64));
    /* yarn_apply_mscale: 192^-0.5 * (0.1 * 1 * ln 40 + 1)^2 */
    const double m = 0.1 * log(40.0) + 1.0;
    cr_assert_float_eq(config_softmax_scale(&c), m * m / sqrt(192.0), 1e-15);
    /* default RoPE (mscale_all_dim is then unused, as in transformers): just 192^-0.5 */
    model_config d;
    cr_assert_eq(config_parse_hf(edit("\"rope_type\": \"yarn\"", "\"rope_type\": \"default\""), NULL, &d), XF_OK, "%s",
                 xf_error_msg());
    cr_assert_float_eq(config_softmax_scale(&d), 1.0 / sqrt(192.0), 1e-15);
    /* yarn without mscale_all_dim: no softmax correction */
    cr_assert_eq(config_parse_hf(edit("\"mscale_all_dim\": 1.0, ", ""), NULL, &d), XF_OK, "%s", xf_error_msg());
    cr_assert_float_eq(config_softmax_scale(&d), 1.0 / sqrt(192.0), 1e-15);
    cr_assert_float_eq(d.rope.attention_factor, 0.1 * log(40.0) + 1.0, 1e-12); /* get_mscale(factor) alone */
    /* a dense model keeps 1 / sqrt(head_dim) */
    model_config l;
    cr_assert_eq(config_preset("llama-2-7b", &l), XF_OK);
    cr_assert_float_eq(config_softmax_scale(&l), 1.0 / sqrt(128.0), 1e-15);
}

Test(config_mla, q_without_rank_and_all_dense) {
    model_config c;
    /* q_lora_rank null: q_proj (h * 192, d) instead of q_a, its norm and q_b */
    cr_assert_eq(config_parse_hf(edit("\"q_lora_rank\": 1536", "\"q_lora_rank\": null"), NULL, &c), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(c.q_lora_rank, 0);
    model_config p;
    cr_assert_eq(config_preset("deepseek-v3", &p), XF_OK);
    const int64_t with_rank = INT64_C(7168) * 1536 + 1536 + INT64_C(1536) * 128 * 192, without = INT64_C(7168) * 128 * 192;
    cr_assert_eq(config_param_count(&c), config_param_count(&p) + 61 * (without - with_rank));
    /* every layer dense (first_k_dense_replace = num_hidden_layers) is legal: no experts at all */
    cr_assert_eq(config_parse_hf(edit("\"first_k_dense_replace\": 3", "\"first_k_dense_replace\": 61"), NULL, &c), XF_OK, "%s",
                 xf_error_msg());
    cr_assert_eq(c.n_experts, 0);
    cr_assert_eq(c.moe_score, MOE_SCORE_SOFTMAX);
    cr_assert_eq(model_moe_layers(&c), 0);
    cr_assert_eq(config_param_count(&c), config_active_param_count(&c));
    cr_assert_eq(config_parse_hf(edit("\"rope_interleave\": true", "\"rope_interleave\": false"), NULL, &c), XF_OK);
    cr_assert_eq(c.rope_interleave, 0);
}

/* Fields that do not add up: exit 2 (XF_EINVAL) with the arithmetic. */
Test(config_mla, incompatible_fields_show_the_arithmetic) {
    expect_error(edit("\"n_group\": 8", "\"n_group\": 6"), "256 = 6 * 42 + 4");
    expect_error(edit("\"topk_group\": 4", "\"topk_group\": 9"), "'topk_group' (9) exceeds n_group (8)");
    expect_error(edit("\"n_group\": 8", "\"n_group\": 256"), "256 / 256 = 1 expert(s) per group");
    expect_error(edit("\"num_experts_per_tok\": 8", "\"num_experts_per_tok\": 200"), "4 * 32 = 128");
    expect_error(edit("\"num_experts_per_tok\": 8", "\"num_experts_per_tok\": 300"), "exceeds n_routed_experts (256)");
    expect_error(edit("\"qk_head_dim\": 192", "\"qk_head_dim\": 128"), "128 + 64 = 192");
    expect_error(edit("\"head_dim\": 64", "\"head_dim\": 192"), "'head_dim' (192) must equal 'qk_rope_head_dim' (64)");
    expect_error(edit("\"num_key_value_heads\": 128", "\"num_key_value_heads\": 16"), "'num_key_value_heads' (16) must equal");
    expect_error(edit("\"qk_rope_head_dim\": 64", "\"qk_rope_head_dim\": 63"), "qk_rope_head_dim");
    expect_error(edit("\"routed_scaling_factor\": 2.5", "\"routed_scaling_factor\": -1"), "routed_scaling_factor");
    expect_error(edit("\"kv_lora_rank\": 512, ", ""), "kv_lora_rank");
    expect_error(edit("\"v_head_dim\": 128", "\"v_head_dim\": null"), "v_head_dim");
    expect_error(edit("\"n_routed_experts\": 256, ", ""), "n_routed_experts");
}

/* What xfprof does not implement is refused naming the field. */
Test(config_mla, unimplemented_fields_are_refused) {
    expect_error(edit("\"attention_bias\": false", "\"attention_bias\": true"), "attention_bias");
    expect_error(edit("\"use_cache\": true", "\"scoring_func\": \"softmax\""), "scoring_func");
    expect_error(edit("\"use_cache\": true", "\"topk_method\": \"greedy\""), "topk_method");
    expect_error(edit("\"use_cache\": true", "\"moe_layer_freq\": 2"), "moe_layer_freq");
    expect_error(edit("\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\""), "hidden_act");
    /* the original (remote-code) spellings transformers implements are accepted */
    model_config c;
    cr_assert_eq(config_parse_hf(edit("\"use_cache\": true", "\"scoring_func\": \"sigmoid\", \"topk_method\": \"noaux_tc\", "
                                      "\"moe_layer_freq\": 1"), NULL, &c), XF_OK, "%s", xf_error_msg());
    /* MLA fields on another family are still refused */
    model_config l;
    cr_assert_eq(config_preset("llama-2-7b", &l), XF_OK);
    l.kv_lora_rank = 0;
    l.v_head_dim = 128;
    cr_assert_eq(config_validate(&l), XF_EINVAL);
    l.v_head_dim = 0;
    l.rope_interleave = 1;
    cr_assert_eq(config_validate(&l), XF_EINVAL);
}

/* Backends that do not run latent attention find it first among the extensions. */
Test(config_mla, first_extension_names_kv_lora_rank) {
    model_config c;
    cr_assert_eq(config_preset("deepseek-v3", &c), XF_OK);
    cr_assert(strstr(config_first_extension(&c), "kv_lora_rank"));
}
