#!/usr/bin/env python3
"""Tiny random Hugging Face models per architecture, with what transformers generates from them.

    python3 scripts/make-hf-fixtures.py [--out tests/data/hf] [--counts]

Needs torch, transformers and safetensors (CI does not: the results are committed). For each
fixture it writes <out>/<name>/ with
  config.json, model.safetensors  what save_pretrained writes (weights stored as bf16; every value
                                  was rounded to bf16 first and the model runs in fp32, so the
                                  file holds exactly the fp32 weights transformers ran)
  expected.json                   {"format": "xfprof-hf-fixture", "version": 1, prompt ids, the 16
                                  greedy ids of model.generate, and the fp32 logits of the first
                                  and of the last generated position}
The weights are scaled (matrices x8, norm weights 1 + N(0, 0.3^2), biases N(0, 0.3^2)) so that a
missing feature changes the tokens: for every fixture the script also runs an ablated copy (the
feature removed) and refuses to write the fixture unless the ablation changes some of the 16
tokens. It prints how many.

--counts prints the parameter counts transformers gives for the published configs of the presets
(models built on the meta device; sum of numel over model.parameters(), tied weights once), the
figures tests/test_config.c checks.
"""
import argparse
import copy
import json
import os
import sys

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

GEN = 16
PROMPT = [17, 301, 5, 88, 412, 260, 33, 129, 7, 450, 61, 222, 98, 3, 511, 140, 76, 389, 12, 205]  # 20: prefill takes the blocked (GEMM) path

BASE = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, vocab_size=512, max_position_embeddings=64,
            rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False, hidden_act="silu")


def llama3_rope():
    return {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 16}


# name -> (model_type, config overrides, ablation: (description, function(config dict) -> config dict,
#          function(model) -> None))
def no_rope_scaling(c):
    c = dict(c)
    c.pop("rope_scaling", None)
    c["rope_parameters"] = {"rope_type": "default", "rope_theta": c.get("rope_theta", 10000.0)}
    return c


def no_window(c):
    c = dict(c)
    c["sliding_window"] = None
    c.pop("use_sliding_window", None)
    return c


def zero_o_bias(m):
    for layer in m.model.layers:
        layer.self_attn.o_proj.bias.data.zero_()


def zero_mlp_bias(m):
    for layer in m.model.layers:
        for p in (layer.mlp.gate_proj, layer.mlp.up_proj, layer.mlp.down_proj):
            p.bias.data.zero_()


def drop_qk_norm(m):
    for layer in m.model.layers:
        layer.self_attn.q_norm.forward = lambda x: x
        layer.self_attn.k_norm.forward = lambda x: x


def no_topk_norm(c):
    c = dict(c)
    c["norm_topk_prob"] = not c.get("norm_topk_prob", False)
    return c


def top1(c):
    c = dict(c)
    c["num_experts_per_tok"] = 1
    return c


def zero_shared_gate(m):
    for layer in m.model.layers:
        g = getattr(layer.mlp, "shared_expert_gate", None)
        if g is not None:
            g.weight.data.fill_(-1e4)  # sigmoid -> 0: the shared expert dropped


MOE = dict(intermediate_size=96, decoder_sparse_step=1)


def no_group_limit(c):
    c = dict(c)
    c["topk_group"] = c["n_group"]
    return c


def no_interleave(c):
    c = dict(c)
    c["rope_interleave"] = False
    return c


# deepseek_v3 with every layer dense (first_k_dense_replace = num_hidden_layers: a legal config
# whose routing fields are unused): multi-head latent attention alone
MLA = dict(q_lora_rank=16, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16, num_key_value_heads=4,
           head_dim=8, first_k_dense_replace=2, n_routed_experts=4, n_shared_experts=1, moe_intermediate_size=32,
           num_experts_per_tok=2, n_group=1, topk_group=1, rope_interleave=True, attention_bias=False)

# gemma3_text: 3 layers, local-global-local (window 8 < prompt + gen), head_dim 32 (q width 128 !=
# hidden 64), query_pre_attn_scalar 24, the global layers' RoPE linear x8 at base 1e6, the local
# layers' plain RoPE at 1e4. hidden_act is not a gemma3 field (hidden_activation is).
GEMMA3 = dict(head_dim=32, layer_types=["sliding_attention", "full_attention", "sliding_attention"], num_hidden_layers=3,
              sliding_window=8, query_pre_attn_scalar=24, hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True,
              rope_parameters={"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
                               "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})


def gemma_cfg(**kw):
    def f(c):
        c = copy.deepcopy(c)
        for k, v in kw.items():
            if k == "full_rope":
                c["rope_parameters"]["full_attention"] = v
            elif k == "local_theta":
                c["rope_parameters"]["sliding_attention"]["rope_theta"] = v
            else:
                c[k] = v
        return c
    return f


def gemma_no_embed_scale(m):
    m.model.embed_tokens.embed_scale.fill_(1.0)


def gemma_no_post_norms(m):
    for layer in m.model.layers:
        layer.post_attention_layernorm.forward = lambda x: x
        layer.post_feedforward_layernorm.forward = lambda x: x


# more ablations than the first one, each of which must change the tokens too
EXTRA_ABLATIONS = {
    "gemma3": [("no embedding scale", None, gemma_no_embed_scale),
               ("no post-attention/post-feedforward norms", None, gemma_no_post_norms),
               ("the local layers at the global RoPE base", gemma_cfg(local_theta=1000000.0), None),
               ("the global layers without linear RoPE scaling", gemma_cfg(full_rope={"rope_type": "default", "rope_theta": 1000000.0}), None),
               ("query_pre_attn_scalar = head_dim", gemma_cfg(query_pre_attn_scalar=32), None),
               ("SiLU instead of gelu_pytorch_tanh", gemma_cfg(hidden_activation="silu"), None),
               ("q/k norm dropped", None, drop_qk_norm)],
}

FIXTURES = {
    "llama-rope-llama3": ("llama", {"rope_scaling": llama3_rope()}, ("plain RoPE", no_rope_scaling, None)),
    "llama-rope-linear": ("llama", {"rope_scaling": {"rope_type": "linear", "factor": 4.0}},
                          ("plain RoPE", no_rope_scaling, None)),
    "llama-rope-yarn": ("llama", {"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16,
                                                   "mscale": 1.0, "mscale_all_dim": 0.5}},
                        ("plain RoPE", no_rope_scaling, None)),
    "llama-attn-bias": ("llama", {"attention_bias": True}, ("o_proj.bias dropped", None, zero_o_bias)),
    "llama-mlp-bias": ("llama", {"mlp_bias": True, "tie_word_embeddings": True}, ("MLP biases dropped", None, zero_mlp_bias)),
    "qwen3": ("qwen3", {"attention_bias": False, "use_sliding_window": False, "sliding_window": None},
              ("q/k norm dropped", None, drop_qk_norm)),
    "mistral-window": ("mistral", {"sliding_window": 8}, ("full attention", no_window, None)),
    "qwen3-window": ("qwen3", {"use_sliding_window": True, "sliding_window": 8, "max_window_layers": 1},
                     ("full attention", no_window, None)),
    "qwen3-bias": ("qwen3", {"attention_bias": True, "rope_scaling": llama3_rope()},
                   ("o_proj.bias dropped", None, zero_o_bias)),
    # Mixture of experts. mixtral: 8 experts of intermediate_size, top-2 renormalized; saved by
    # save_pretrained (per-expert block_sparse_moe.experts.E.w1/w2/w3 on disk).
    "mixtral": ("mixtral", {"num_local_experts": 8, "num_experts_per_tok": 2, "sliding_window": None},
                ("top-1 routing", top1, None)),
    # qwen3_moe: 8 experts of 32, top-2 renormalized, layer 1 dense (mlp_only_layers); written in the
    # fused layout transformers 5 holds in memory (mlp.experts.gate_up_proj [E, 2I, H], down_proj [E, H, I]).
    "qwen3-moe": ("qwen3_moe", dict(MOE, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32, norm_topk_prob=True,
                                    mlp_only_layers=[1], num_hidden_layers=3, use_sliding_window=False, sliding_window=None),
                  ("top-k weights not renormalized", no_topk_norm, None)),
    # qwen2_moe: a shared expert (sigmoid shared_expert_gate) beside 8 routed experts, top-2 not
    # renormalized (qwen2_moe's default), qkv bias.
    "qwen2-moe": ("qwen2_moe", dict(MOE, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                                    shared_expert_intermediate_size=48, norm_topk_prob=False, use_sliding_window=False,
                                    sliding_window=None),
                  ("shared expert dropped", None, zero_shared_gate)),
    # deepseek_v3 with its experts: layer 0 dense, layers 1-2 MoE of 8 routed experts of 32 in 4
    # groups (top-2 within the best 2 groups, sigmoid scores with the correction bias, x2.5) and a
    # shared expert
    "deepseek-moe": ("deepseek_v3", dict(MLA, num_hidden_layers=3, first_k_dense_replace=1, n_routed_experts=8, n_group=4,
                                         topk_group=2, num_experts_per_tok=2, n_shared_experts=1, routed_scaling_factor=2.5,
                                         norm_topk_prob=True),
                     ("no group limit", no_group_limit, None)),
    "deepseek-moe-yarn": ("deepseek_v3", dict(MLA, num_hidden_layers=3, first_k_dense_replace=1, n_routed_experts=8, n_group=4,
                                              topk_group=2, num_experts_per_tok=2, n_shared_experts=1, routed_scaling_factor=2.5,
                                              norm_topk_prob=True,
                                              rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                                                               "original_max_position_embeddings": 16, "mscale": 1.0,
                                                               "mscale_all_dim": 1.0}),
                          ("plain RoPE and softmax scale", no_rope_scaling, None)),
    "gemma3": ("gemma3_text", GEMMA3, ("every layer global (no window)",
                                       gemma_cfg(layer_types=["full_attention"] * 3), None)),
    "deepseek-mla": ("deepseek_v3", MLA, ("half-split RoPE instead of interleaved", no_interleave, None)),
    "deepseek-mla-yarn": ("deepseek_v3", dict(MLA, q_lora_rank=None,
                                              rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                                                               "original_max_position_embeddings": 16, "mscale": 1.0,
                                                               "mscale_all_dim": 1.0}),
                          ("plain RoPE and softmax scale", no_rope_scaling, None)),
}

# fixtures written with safetensors' save_file from the in-memory state dict (transformers 5's fused
# expert tensors) instead of save_pretrained (which converts back to per-expert tensors)
FUSED = {"qwen3-moe"}


def bf16_exact(t):
    return t.to(torch.bfloat16).to(torch.float32)


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if p.dim() >= 2:
                v = torch.randn(p.shape, generator=g) * 0.02 * 8
            elif name.endswith("bias"):
                v = torch.randn(p.shape, generator=g) * 0.3
            else:  # norm weights
                v = 1.0 + torch.randn(p.shape, generator=g) * 0.3
            p.copy_(bf16_exact(v))
        # deepseek_v3's router correction bias is a buffer (zeros at init): non-trivial too
        for name, b in sorted(model.named_buffers()):
            if name.endswith("e_score_correction_bias"):
                b.copy_(bf16_exact(torch.randn(b.shape, generator=g) * 0.3))


def build(model_type, cfg):
    c = AutoConfig.for_model(model_type, **cfg)
    c._attn_implementation = "eager"
    return AutoModelForCausalLM.from_config(c, attn_implementation="eager").to(torch.float32).eval()


def generate(model):
    ids = torch.tensor([PROMPT])
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=GEN, do_sample=False,
                             output_logits=True, return_dict_in_generate=True, pad_token_id=0, eos_token_id=None)
    toks = out.sequences[0, len(PROMPT):].tolist()
    return toks, out.logits[0][0].tolist(), out.logits[-1][0].tolist()


def ablated_differ(name, model_type, cfg, model, toks, what, ablate_cfg, ablate_model):
    """Tokens of the same weights without the feature that differ from toks (exits when none do)."""
    abl = build(model_type, ablate_cfg(cfg) if ablate_cfg else cfg)
    abl.load_state_dict(model.state_dict())
    if ablate_model:
        with torch.no_grad():
            ablate_model(abl)
    atoks, _, _ = generate(abl)
    differ = sum(a != b for a, b in zip(toks, atoks))
    print(f"{name}: with {what}: {differ}/16 tokens differ")
    if differ == 0:
        sys.exit(f"{name}: removing the feature ({what}) does not change the tokens: the fixture would not test it")
    return differ


def make(name, out_dir):
    model_type, over, (what, ablate_cfg, ablate_model) = FIXTURES[name]
    cfg = dict(BASE, **over)
    if model_type == "gemma3_text":
        cfg.pop("hidden_act")
        cfg.pop("rope_theta")
    torch.manual_seed(0)
    model = build(model_type, cfg)
    randomize(model, 1234)
    toks, first, last = generate(model)
    print(f"{name}: greedy {toks}")
    if len(set(toks)) < 4:
        sys.exit(f"{name}: the greedy tokens are degenerate ({toks}); change the seed or scales")
    # the ablation: the same weights without the feature
    differ = ablated_differ(name, model_type, cfg, model, toks, what, ablate_cfg, ablate_model)
    for w2, c2, m2 in EXTRA_ABLATIONS.get(name, []):
        ablated_differ(name, model_type, cfg, model, toks, w2, c2, m2)
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    if name in FUSED:
        from safetensors.torch import save_file
        model.config.save_pretrained(d)
        sd = {k: v.to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()}
        save_file(sd, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    else:
        model.to(torch.bfloat16).save_pretrained(d, safe_serialization=True)
    for extra in ("generation_config.json",):
        p = os.path.join(d, extra)
        if os.path.exists(p):
            os.remove(p)
    exp = {"format": "xfprof-hf-fixture", "version": 1, "model_type": model_type, "feature_ablated": what,
           "tokens_differing_when_ablated": differ, "transformers": transformers.__version__, "torch": torch.__version__,
           "prompt": PROMPT, "greedy": toks, "logits_first": first, "logits_last": last}
    with open(os.path.join(d, "expected.json"), "w") as f:
        json.dump(exp, f, separators=(",", ":"))
        f.write("\n")


PUBLISHED = {
    "llama-3.1-8b": ("llama", dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                                   num_key_value_heads=8, vocab_size=128256, max_position_embeddings=131072,
                                   rope_theta=500000.0, tie_word_embeddings=False,
                                   rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                 "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})),
    "llama-3.2-1b": ("llama", dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                                   num_key_value_heads=8, head_dim=64, vocab_size=128256, max_position_embeddings=131072,
                                   rope_theta=500000.0, tie_word_embeddings=True,
                                   rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                                 "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})),
    "qwen3-8b": ("qwen3", dict(hidden_size=4096, intermediate_size=12288, num_hidden_layers=36, num_attention_heads=32,
                               num_key_value_heads=8, head_dim=128, vocab_size=151936, max_position_embeddings=40960,
                               rope_theta=1000000.0, tie_word_embeddings=False)),
    "qwen1.5-moe-a2.7b": ("qwen2_moe", dict(hidden_size=2048, intermediate_size=5632, moe_intermediate_size=1408,
                                             shared_expert_intermediate_size=5632, num_experts=60, num_experts_per_tok=4,
                                             num_hidden_layers=24, num_attention_heads=16, num_key_value_heads=16,
                                             vocab_size=151936, max_position_embeddings=8192, rope_theta=1000000.0,
                                             norm_topk_prob=False, tie_word_embeddings=False, decoder_sparse_step=1)),
    # google/gemma-3-1b-pt; google/gemma-3-4b-pt's text_config (the language model alone)
    "gemma-3-1b": ("gemma3_text", dict(hidden_size=1152, intermediate_size=6912, num_hidden_layers=26, num_attention_heads=4,
                                       num_key_value_heads=1, head_dim=256, vocab_size=262144, max_position_embeddings=32768,
                                       query_pre_attn_scalar=256, rope_theta=1000000.0, rope_local_base_freq=10000.0,
                                       sliding_window=512, sliding_window_pattern=6, rope_scaling=None)),
    "gemma-3-4b": ("gemma3_text", dict(hidden_size=2560, intermediate_size=10240, num_hidden_layers=34, num_attention_heads=8,
                                       num_key_value_heads=4, head_dim=256, vocab_size=262208, max_position_embeddings=131072,
                                       query_pre_attn_scalar=256, rope_theta=1000000.0, rope_local_base_freq=10000.0,
                                       sliding_window=1024, sliding_window_pattern=6,
                                       rope_scaling={"rope_type": "linear", "factor": 8.0})),
}


def counts():
    for name, (mt, kw) in PUBLISHED.items():
        c = AutoConfig.for_model(mt, **kw)
        with torch.device("meta"):
            m = AutoModelForCausalLM.from_config(c)
        print(name, sum(p.numel() for p in m.parameters()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "data", "hf"))
    ap.add_argument("--counts", action="store_true", help="print the presets' parameter counts and exit")
    ap.add_argument("names", nargs="*", help="fixtures to make (default: all): " + ", ".join(FIXTURES))
    a = ap.parse_args()
    if a.counts:
        counts()
        return
    torch.set_num_threads(1)
    for n in a.names or FIXTURES:
        if n not in FIXTURES:
            sys.exit(f"unknown fixture {n}: choose from {', '.join(FIXTURES)}")
        make(n, a.out)


if __name__ == "__main__":
    main()
