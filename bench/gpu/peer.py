"""PyTorch beside xfprof on the same GPU, for bench/gpu_check.sh (step 'peer').

  python3 bench/gpu/peer.py WORKDIR XFPROF [--dry-run]

1. A tiny llama (stories15m's shapes: d 288, 6 layers, 6 heads, d_ff 768, vocab 32000) with random
   bf16 weights from torch's seed 0, written as a Hugging Face folder (config.json +
   model.safetensors). xfprof runs it on cuda and on the cpu (--weights), transformers runs it on
   the GPU (eager attention), all greedy from the same prompt ids: peer_tiny_*.json and the tokens
   in peer.json.
2. The importer fixture: torch.profiler (CPU + CUDA activities) around the tiny model's prefill and
   two decode steps, exported as a Chrome trace: torch_trace_tiny.json.
3. llama-2-7b's shapes, random bf16 weights, batch 1: the median decode-step time at context 512
   (prefill 512 with the KV cache, then 24 steps, the first 4 dropped), torch.cuda.synchronize
   around each step: peer.json 'llama2_7b_b1'. xfprof's figure for the same shape comes from the
   check's decode_b1 record; summary.py sets them side by side.
CUDA graphs in PyTorch (torch.compile mode reduce-overhead) are not run: compiling takes minutes.
--dry-run writes the tiny model's folder only when torch is importable, and says what it would run.
Writes peer.json even when a part fails (with the error), so the summary can say what happened;
exits 1 then, naming the parts that failed on its last line.
"""
import json
import os
import subprocess
import sys
import time
import traceback

TINY = dict(hidden_size=288, intermediate_size=768, num_hidden_layers=6, num_attention_heads=6,
            num_key_value_heads=6, vocab_size=32000, max_position_embeddings=256, rms_norm_eps=1e-5,
            rope_theta=10000.0, tie_word_embeddings=False)
L7B = dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
           num_key_value_heads=32, vocab_size=32000, max_position_embeddings=4096, rms_norm_eps=1e-5,
           rope_theta=10000.0, tie_word_embeddings=False)
PROMPT = [1, 450, 4996, 17354, 1701, 432, 17204, 975, 278, 17366, 11203, 29889]
GEN = 16


def write_tiny(torch, folder):
    from safetensors.torch import save_file
    os.makedirs(folder, exist_ok=True)
    cfg = dict(TINY, architectures=["LlamaForCausalLM"], model_type="llama", hidden_act="silu",
               attention_bias=False, rope_scaling=None, torch_dtype="bfloat16")
    json.dump(cfg, open(os.path.join(folder, "config.json"), "w"), indent=1)
    g = torch.Generator().manual_seed(0)
    d, f, v, n = TINY["hidden_size"], TINY["intermediate_size"], TINY["vocab_size"], TINY["num_hidden_layers"]
    def rnd(*shape, scale=0.05):
        return (torch.randn(*shape, generator=g) * scale).to(torch.bfloat16)
    t = {"model.embed_tokens.weight": rnd(v, d, scale=0.5), "lm_head.weight": rnd(v, d),
         "model.norm.weight": (1 + rnd(d, scale=0.1).float()).to(torch.bfloat16)}
    for i in range(n):
        p = f"model.layers.{i}."
        for name, shape in (("self_attn.q_proj", (d, d)), ("self_attn.k_proj", (d, d)), ("self_attn.v_proj", (d, d)),
                            ("self_attn.o_proj", (d, d)), ("mlp.gate_proj", (f, d)), ("mlp.up_proj", (f, d)),
                            ("mlp.down_proj", (d, f))):
            t[p + name + ".weight"] = rnd(*shape)
        t[p + "input_layernorm.weight"] = (1 + rnd(d, scale=0.1).float()).to(torch.bfloat16)
        t[p + "post_attention_layernorm.weight"] = (1 + rnd(d, scale=0.1).float()).to(torch.bfloat16)
    save_file({k: x.contiguous() for k, x in t.items()}, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})


def xf_tokens(xf, folder, device, out):
    ids = ",".join(str(i) for i in PROMPT)
    cmd = [xf, "run", "--model", os.path.join(folder, "config.json"), "--weights", folder, "--device", device,
           "--prompt-ids", ids, "--gen", str(GEN), "--batch", "1", "--reps", "1",
           "-o", out]
    if device == "cuda":
        cmd += ["--cupti", "off"]
    else:
        cmd += ["--wdtype", "bf16"]
    env = dict(os.environ)
    if os.environ.get("XF_LD_LIBRARY_PATH"):  # xfprof's carried libraries, not python's
        env["LD_LIBRARY_PATH"] = os.environ["XF_LD_LIBRARY_PATH"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()[-300:]}")
    return json.load(open(out))["points"][0]["tokens"][0]


def greedy_steps(torch, m, ids, n):
    """Prefill `ids` with the KV cache, then n greedy decode steps; returns each step's host wall
    time (torch.cuda.synchronize before and after the step)."""
    times = []
    o = m(ids, use_cache=True)
    pkv, nxt = o.past_key_values, o.logits[:, -1:].argmax(-1)
    for _ in range(n):
        torch.cuda.synchronize()
        a = time.perf_counter()
        o = m(nxt, past_key_values=pkv, use_cache=True)
        pkv, nxt = o.past_key_values, o.logits[:, -1:].argmax(-1)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - a)
    return times


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def main():
    work, xf = sys.argv[1], sys.argv[2]
    dry = "--dry-run" in sys.argv
    res = {"format": "xfprof-gpu-peer", "version": 1, "prompt_ids": PROMPT, "gen": GEN}
    out = os.path.join(work, "peer.json")
    def save():
        json.dump(res, open(out, "w"), indent=1)
    try:
        import torch
        res["torch"] = torch.__version__
    except Exception as e:
        res["error"] = f"no torch: {e}"
        save()
        print(res["error"])
        return 0 if dry else 1
    folder = os.path.join(os.path.dirname(os.path.abspath(work)), "tiny-llama")  # beside WORKDIR: not packed (~40 MB)
    if dry:
        res["dry_run"] = "would write the tiny model, run xfprof (cuda, cpu) and transformers on it, profile it, time llama-2-7b b1"
        save()
        print(res["dry_run"])
        return 0
    t0 = time.time()
    errs = []
    def attempt(what, fn):  # one part; its failure is kept and the others still run
        try:
            return fn()
        except Exception as e:
            errs.append(f"{what}: {type(e).__name__}: {e}")
            traceback.print_exc()
            return None
    attempt("writing the tiny model", lambda: write_tiny(torch, folder))
    if not errs:
        tx_cuda = attempt("xfprof cuda", lambda: xf_tokens(xf, folder, "cuda", os.path.join(work, "peer_tiny_cuda.json")))
        tx_cpu = attempt("xfprof cpu", lambda: xf_tokens(xf, folder, "cpu", os.path.join(work, "peer_tiny_cpu.json")))
        def torch_part():
            from torch.profiler import ProfilerActivity, profile
            from transformers import LlamaForCausalLM
            m = LlamaForCausalLM.from_pretrained(folder, torch_dtype=torch.bfloat16, attn_implementation="eager").cuda().eval()
            ids = torch.tensor([PROMPT], device="cuda")
            with torch.no_grad():
                g = m.generate(ids, max_new_tokens=GEN, do_sample=False, min_new_tokens=GEN, pad_token_id=0)
            # the importer fixture: prefill + 2 decode steps under torch.profiler
            with torch.no_grad(), profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                greedy_steps(torch, m, ids, 2)
            prof.export_chrome_trace(os.path.join(work, "torch_trace_tiny.json"))
            res["fixture_torch_trace"] = "torch_trace_tiny.json"
            return g[0, len(PROMPT):].tolist()
        tt = attempt("transformers", torch_part)
        t = res["tiny"] = {"torch_tokens": tt, "xfprof_cuda_tokens": tx_cuda, "xfprof_cpu_tokens": tx_cpu}
        if tt and tx_cuda:
            n = min(len(tt), len(tx_cuda))
            t["first_diff_torch_vs_xfprof_cuda"] = first_diff(tt[:n], tx_cuda[:n])
        if tx_cuda and tx_cpu:
            t["first_diff_xfprof_cuda_vs_cpu"] = first_diff(tx_cuda, tx_cpu)
    if errs:
        res["tiny_error"] = "; ".join(errs)
    res["tiny_s"] = round(time.time() - t0, 1)
    save()
    t1 = time.time()
    try:
        from transformers import LlamaConfig, LlamaForCausalLM
        cfg = LlamaConfig(**L7B)
        cfg._attn_implementation = "sdpa"
        torch.manual_seed(0)
        torch.set_default_dtype(torch.bfloat16)
        with torch.device("cuda"):
            m = LlamaForCausalLM(cfg).eval()
        torch.set_default_dtype(torch.float32)
        ids = torch.randint(0, cfg.vocab_size, (1, 512), device="cuda")
        with torch.no_grad():
            times = greedy_steps(torch, m, ids, 24)
        st = sorted(times[4:])
        res["llama2_7b_b1"] = {"decode_step_s_median": st[len(st) // 2], "decode_step_s_min": st[0], "steps": len(st),
                               "context": 512, "attention": "sdpa", "dtype": "bf16", "weights": "random (torch seed 0)",
                               "timing": "host wall per step, torch.cuda.synchronize before and after, eager"}
        del m
    except Exception as e:
        res["llama2_7b_error"] = f"{type(e).__name__}: {e}"
        traceback.print_exc()
    res["llama2_7b_s"] = round(time.time() - t1, 1)
    save()
    print(json.dumps({k: v for k, v in res.items() if k != "prompt_ids"})[:600])
    errs = [f"{k}: {res[k]}"[:200] for k in ("tiny_error", "llama2_7b_error") if k in res]
    if errs:
        print("peer: " + "; ".join(errs))  # the last line: gpu_check's note for the step
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
