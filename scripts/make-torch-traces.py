#!/usr/bin/env python3
"""Makes the real torch.profiler fixtures of `xfprof import` (tests/data/torch/).

A tiny and a small Llama from transformers with random weights (LlamaConfig, nothing
downloaded) run `generate` on the CPU: one prefill and a few decode steps, in fp32 and bf16,
under torch.profiler with record_shapes=True, with_modules=True and with_stack=True; each trace
is written with prof.export_chrome_trace. CI does not need torch: the traces are committed.

usage: python3 scripts/make-torch-traces.py [OUTDIR]
Writes OUTDIR/llama-{tiny,small}-{fp32,bf16}.json.gz and a .json.meta beside each (the model's
shape, for the tests). The repository keeps tiny-fp32, tiny-bf16 and small-bf16.
"""
import gzip
import json
import os
import shutil
import sys

import torch
from torch.profiler import ProfilerActivity, profile
from transformers import LlamaConfig, LlamaForCausalLM

MODELS = {
    # name: (layers, hidden, heads, kv_heads, ffn, vocab, prompt, new tokens)
    "tiny": (2, 64, 4, 2, 172, 256, 8, 8),
    "small": (4, 128, 8, 4, 344, 512, 16, 6),
}


def make(name, dtype, outdir):
    layers, hidden, heads, kv_heads, ffn, vocab, prompt, gen = MODELS[name]
    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=hidden, intermediate_size=ffn, num_hidden_layers=layers,
                      num_attention_heads=heads, num_key_value_heads=kv_heads, vocab_size=vocab,
                      max_position_embeddings=256, attn_implementation="sdpa")
    model = LlamaForCausalLM(cfg).to(dtype).eval()
    ids = torch.randint(0, vocab, (1, prompt))
    with torch.no_grad():
        model.generate(ids, max_new_tokens=2, min_new_tokens=2, do_sample=False)  # warm-up
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_modules=True,
                     with_stack=True) as prof:
            model.generate(ids, max_new_tokens=gen, min_new_tokens=gen, do_sample=False)
    tag = {torch.float32: "fp32", torch.bfloat16: "bf16"}[dtype]
    path = os.path.join(outdir, f"llama-{name}-{tag}.json")
    prof.export_chrome_trace(path)
    with open(path, "rb") as raw, gzip.open(path + ".gz", "wb", compresslevel=9) as gz:
        shutil.copyfileobj(raw, gz)
    os.remove(path)
    # The trace's own description, for the tests: which model made it.
    meta = {"model": name, "dtype": tag, "layers": layers, "hidden": hidden, "heads": heads,
            "kv_heads": kv_heads, "ffn": ffn, "vocab": vocab, "prompt": prompt, "gen": gen,
            "torch": torch.__version__}
    with open(path + ".meta", "w") as f:
        json.dump(meta, f, indent=1)
    print(path + ".gz", os.path.getsize(path + ".gz"))


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..",
                                                                 "tests", "data", "torch")
    os.makedirs(outdir, exist_ok=True)
    torch.set_num_threads(1)
    for name in MODELS:
        for dtype in (torch.float32, torch.bfloat16):
            make(name, dtype, outdir)


if __name__ == "__main__":
    main()
