/* Gemma 3: the config reader's gemma3_text fields (and gemma3's text_config), the gemma-3-1b and
 * gemma-3-4b presets' parameter counts, and the refusals of what xfprof does not implement. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "reference_model/config.h"
#include "reference_model/cuda_meta.h"

/* google/gemma-3-1b-pt's config.json (transformers 4 spelling: rope_theta, rope_local_base_freq,
 * rope_scaling, sliding_window_pattern). */
static const char k_1b[] =
    "{\"architectures\": [\"Gemma3ForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0, "
    "\"attn_logit_softcapping\": null, \"bos_token_id\": 2, \"cache_implementation\": \"hybrid\", \"eos_token_id\": 1, "
    "\"final_logit_softcapping\": null, \"head_dim\": 256, \"hidden_activation\": \"gelu_pytorch_tanh\", \"hidden_size\": 1152, "
    "\"initializer_range\": 0.02, \"intermediate_size\": 6912, \"max_position_embeddings\": 32768, \"model_type\": \"gemma3_text\", "
    "\"num_attention_heads\": 4, \"num_hidden_layers\": 26, \"num_key_value_heads\": 1, \"pad_token_id\": 0, "
    "\"query_pre_attn_scalar\": 256, \"rms_norm_eps\": 1e-06, \"rope_local_base_freq\": 10000, \"rope_scaling\": null, "
    "\"rope_theta\": 1000000, \"sliding_window\": 512, \"sliding_window_pattern\": 6, \"torch_dtype\": \"bfloat16\", "
    "\"use_cache\": true, \"vocab_size\": 262144}";

/* google/gemma-3-4b-pt's language model, inside a multimodal gemma3 config (vision_config cut short). */
static const char k_4b[] =
    "{\"model_type\": \"gemma3\", \"architectures\": [\"Gemma3ForConditionalGeneration\"], \"mm_tokens_per_image\": 256, "
    "\"text_config\": {\"model_type\": \"gemma3_text\", \"hidden_size\": 2560, \"intermediate_size\": 10240, "
    "\"num_hidden_layers\": 34, \"num_attention_heads\": 8, \"num_key_value_heads\": 4, \"head_dim\": 256, "
    "\"vocab_size\": 262208, \"max_position_embeddings\": 131072, \"query_pre_attn_scalar\": 256, \"rope_theta\": 1000000.0, "
    "\"rope_local_base_freq\": 10000.0, \"rope_scaling\": {\"factor\": 8.0, \"rope_type\": \"linear\"}, "
    "\"sliding_window\": 1024, \"sliding_window_pattern\": 6}, "
    "\"vision_config\": {\"model_type\": \"siglip_vision_model\", \"hidden_size\": 1152}}";

static const char *edit(const char *base, const char *from, const char *to) {
    static char buf[4096];
    const char *at = strstr(base, from);
    cr_assert_not_null(at, "'%s' not in the config", from);
    snprintf(buf, sizeof buf, "%.*s%s%s", (int)(at - base), base, to, at + strlen(from));
    return buf;
}

static void expect_error(const char *text, const char *needle) {
    model_config c;
    memset(&c, 0x5a, sizeof c);
    model_config before = c;
    xf_status s = config_parse_hf(text, "cfg.json", &c);
    cr_assert_eq(s, XF_EINVAL, "status %d (%s)", s, xf_error_msg());
    cr_assert(strstr(xf_error_msg(), needle), "message should name '%s': %s", needle, xf_error_msg());
    cr_assert(strstr(xf_error_msg(), "cfg.json"), "message should name the file: %s", xf_error_msg());
    cr_assert_eq(memcmp(&c, &before, sizeof c), 0, "output must be untouched on error");
}

/* The reader and the preset agree field by field (the name aside). */
static void expect_same(const model_config *a, const model_config *b) {
    model_config x = *a, y = *b;
    memset(x.name, 0, sizeof x.name);
    memset(y.name, 0, sizeof y.name);
    cr_assert_eq(memcmp(&x, &y, sizeof x), 0, "the reader's config differs from the preset's");
}

Test(config_gemma3, published_1b_reads_as_the_preset) {
    model_config c, p;
    cr_assert_eq(config_parse_hf(k_1b, "gemma-3-1b/config.json", &c), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(config_preset("gemma-3-1b", &p), XF_OK);
    cr_assert_eq(config_validate(&p), XF_OK, "%s", xf_error_msg());
    cr_assert_str_eq(c.arch, "gemma3_text");
    cr_assert_eq(c.tied_embeddings, 1);
    cr_assert_eq(c.qk_norm, 1);
    cr_assert_eq(c.sandwich_norms, 1);
    cr_assert_eq(c.ffn_gelu, 1);
    cr_assert_float_eq(c.embed_scale, (double)(float)sqrt(1152.0), 0);
    cr_assert_float_eq(c.attn_scalar, 256.0, 0);
    cr_assert_float_eq(config_softmax_scale(&c), 1.0 / 16.0, 1e-15);
    /* layers 5, 11, 17, 23 global, the other 22 windowed at 512 */
    cr_assert_eq(model_windowed_layers(&c), 22);
    for (int64_t l = 0; l < 26; l++) cr_assert_eq(model_layer_window(&c, l), (l + 1) % 6 ? 512 : 0, "layer %lld", (long long)l);
    cr_assert_float_eq(c.rope_local_theta, 1e4, 0);
    cr_assert_float_eq(c.rope_theta, 1e6, 0);
    cr_assert_eq(c.rope.kind, ROPE_DEFAULT);
    expect_same(&c, &p);
}

/* transformers 5.24's count on the meta device (scripts/make-hf-fixtures.py --counts): 26 layers x
 * (q 1152x1024, k and v 1152x256 each, o 1024x1152, 3 x 1152x6912, four norms of 1152, q/k norms
 * of 256) + the tied embedding 262144x1152 + the final norm. */
Test(config_gemma3, parameter_counts) {
    model_config c;
    cr_assert_eq(config_preset("gemma-3-1b", &c), XF_OK);
    cr_assert_eq(config_param_count(&c), INT64_C(999885952));
    cr_assert_eq(config_active_param_count(&c), INT64_C(999885952));
    const int64_t layer = 1152 * 1024 + 2 * 1152 * 256 + 1024 * 1152 + 3 * 1152 * 6912 + 4 * 1152 + 2 * 256;
    cr_assert_eq(config_param_count(&c), 26 * layer + INT64_C(262144) * 1152 + 1152);
    cr_assert_eq(config_preset("gemma-3-4b", &c), XF_OK);
    cr_assert_eq(config_validate(&c), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(config_param_count(&c), INT64_C(3880263168));
}

Test(config_gemma3, multimodal_text_config_reads_as_the_4b_preset) {
    model_config c, p;
    cr_assert_eq(config_parse_hf(k_4b, "gemma-3-4b/config.json", &c), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(config_preset("gemma-3-4b", &p), XF_OK);
    cr_assert_str_eq(c.arch, "gemma3");
    cr_assert_eq(c.rope.kind, ROPE_LINEAR);
    cr_assert_float_eq(c.rope.factor, 8.0, 0);
    expect_same(&c, &p);
}

/* The global layers take the scaled RoPE at rope_theta, the local ones plain RoPE at
 * rope_local_base_freq. */
Test(config_gemma3, rope_per_layer_type) {
    model_config c;
    cr_assert_eq(config_preset("gemma-3-4b", &c), XF_OK);
    double g[128], l[128], af = 0;
    cr_assert_eq(config_rope_freqs_layer(&c, 5, g, &af), XF_OK); /* global */
    cr_assert_float_eq(af, 1.0, 0);
    cr_assert_eq(config_rope_freqs_layer(&c, 0, l, &af), XF_OK); /* local */
    for (int i = 0; i < 128; i++) {
        cr_assert_float_eq(g[i], pow(1e6, -2.0 * i / 256.0) / 8.0, 1e-18);
        cr_assert_float_eq(l[i], pow(1e4, -2.0 * i / 256.0), 1e-18);
    }
}

/* transformers 5's spelling: rope_parameters keyed by layer type, layer_types. */
Test(config_gemma3, transformers5_rope_parameters) {
    const char *t = edit(k_1b, "\"rope_local_base_freq\": 10000, \"rope_scaling\": null, \"rope_theta\": 1000000, ",
                         "\"rope_parameters\": {\"full_attention\": {\"rope_type\": \"linear\", \"factor\": 4.0, \"rope_theta\": 500000.0}, "
                         "\"sliding_attention\": {\"rope_type\": \"default\", \"rope_theta\": 20000.0}}, ");
    model_config c;
    cr_assert_eq(config_parse_hf(t, "cfg.json", &c), XF_OK, "%s", xf_error_msg());
    cr_assert_float_eq(c.rope_theta, 5e5, 0);
    cr_assert_float_eq(c.rope_local_theta, 2e4, 0);
    cr_assert_eq(c.rope.kind, ROPE_LINEAR);
    /* the head_dim default is gemma3's 256, not hidden / heads */
    cr_assert_eq(config_parse_hf(edit(k_1b, "\"head_dim\": 256, ", ""), "cfg.json", &c), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(c.head_dim, 256);
    /* without the window fields: transformers' defaults (4096, every 6th layer global) */
    cr_assert_eq(config_parse_hf(edit(k_1b, "\"sliding_window\": 512, \"sliding_window_pattern\": 6, ", ""), "cfg.json", &c), XF_OK,
                 "%s", xf_error_msg());
    cr_assert_eq(model_layer_window(&c, 0), 4096);
    cr_assert_eq(model_layer_window(&c, 5), 0);
}

Test(config_gemma3, refusals_name_the_field) {
    expect_error(edit(k_1b, "\"final_logit_softcapping\": null", "\"final_logit_softcapping\": 30.0"), "final_logit_softcapping");
    expect_error(edit(k_1b, "\"attn_logit_softcapping\": null", "\"attn_logit_softcapping\": 50.0"), "attn_logit_softcapping");
    expect_error(edit(k_1b, "\"use_cache\": true", "\"use_bidirectional_attention\": true"), "use_bidirectional_attention");
    expect_error(edit(k_1b, "\"gelu_pytorch_tanh\"", "\"gelu\""), "hidden_activation");
    expect_error(edit(k_1b, "\"sliding_window\": 512", "\"sliding_window\": null"), "sliding_window");
    expect_error(edit(k_1b, "\"query_pre_attn_scalar\": 256", "\"query_pre_attn_scalar\": 0"), "query_pre_attn_scalar");
    expect_error(edit(k_1b, "\"rope_scaling\": null, \"rope_theta\": 1000000, ",
                      "\"rope_parameters\": {\"full_attention\": {\"rope_type\": \"default\"}, \"chunked\": {}}, "),
                 "chunked");
    expect_error(edit(k_1b, "\"rope_scaling\": null, \"rope_theta\": 1000000, ",
                      "\"rope_parameters\": {\"sliding_attention\": {\"rope_type\": \"linear\", \"factor\": 2.0}}, "),
                 "factor");
    expect_error(edit(k_1b, "\"rope_scaling\": null", "\"rope_scaling\": {\"rope_type\": \"su\"}"), "rope_type");
    expect_error(edit(k_4b, "\"model_type\": \"gemma3_text\", ", "\"model_type\": \"siglip\", "), "text_config");
    expect_error("{\"model_type\": \"gemma3\"}", "text_config");
}

/* The CUDA backend does not run gemma3 yet: it refuses it by name before it looks for a device,
 * whatever else the model uses (every dtype, either KV allocation). */
Test(config_gemma3, cuda_refuses_it_by_name) {
    const char *names[] = {"gemma-3-1b", "gemma-3-4b"};
    for (int i = 0; i < 2; i++) {
        model_config c;
        cr_assert_eq(config_preset(names[i], &c), XF_OK);
        const xf_dtype dts[] = {XF_FP32, XF_BF16, XF_INT8};
        for (int k = 0; k < 3; k++) {
            const char *u = cuda_meta_unsupported(&c, dts[k], KV_ALLOC_POOL);
            cr_assert(u && strstr(u, "gemma3"), "%s: %s", names[i], u ? u : "(accepted)");
            u = cuda_meta_unsupported(&c, dts[k], KV_ALLOC_SYSTEM);
            cr_assert(u && strstr(u, "gemma3"), "%s: %s", names[i], u ? u : "(accepted)");
        }
    }
}
