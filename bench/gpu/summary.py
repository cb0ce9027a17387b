"""The summary of bench/gpu_check.sh, computed from what the steps left in WORKDIR.

  python3 bench/gpu/summary.py WORKDIR DATA_DIR

Reads (each optional): steps.txt (one line per step: name, status, seconds, note), machine.json,
decode_b1.json (--cupti off --cuda-graph), activity.json (--cupti activity, batch 1, 16, 64),
counters.json (--cupti counters on llama-2-7b shapes with 2 layers), ncu.csv (ncu --csv on the same
shapes), peer.json (bench/gpu/peer.py), gpu_name.txt. Prints the summary: what ran, the target
ratios, xfprof's CUPTI figures beside ncu's, PyTorch beside xfprof. Never fails on a missing or
broken input: it says which is missing.
"""
import csv
import json
import os
import re
import sys

out, data = sys.argv[1], sys.argv[2]


def load(name):
    p = os.path.join(out, name)
    try:
        return json.load(open(p))
    except FileNotFoundError:
        return None
    except Exception as e:
        print(f"{name}: unreadable ({e})")
        return None


def points(r):
    return (r or {}).get("points", [])


def step(pt, phase):
    return [o for o in pt.get("ops", []) if o.get("phase") == phase]


def decode_bw(pt):
    ops = step(pt, "decode")
    t = sum(o.get("time_s", 0) for o in ops)
    b = sum(o.get("bytes", 0) for o in ops)
    return (b / t if t > 0 else 0.0), t, b


def counter(o, name):
    v = (o.get("counters") or {}).get(name)
    return v if isinstance(v, (int, float)) else None


def graph_step(r, i=0):
    v = ((r or {}).get("env") or {}).get(f"cuda_graph_p{i}", "")
    m = re.search(r"without graph ([0-9.eE+-]+) s, with graph ([0-9.eE+-]+) s", v)
    return (float(m.group(1)), float(m.group(2))) if m else None


def spec_for(gname):
    sid = ("h200" if "H200" in gname else "h100-pcie" if "H100" in gname and "PCIe" in gname else
           "h100-sxm" if "H100" in gname else "a100-80gb" if "A100" in gname and "80GB" in gname else
           "a100-40gb" if "A100" in gname else None)
    try:
        for d in json.load(open(os.path.join(data, "devices.json")))["devices"]:
            if d.get("name") == sid:
                return sid, d
    except Exception:
        pass
    return sid, {}


# ---- ncu --csv: one row per (kernel launch, metric); columns found by their header names
UNITS = {"nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0, "byte": 1.0, "Kbyte": 1e3,
         "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6, "GB": 1e9, "": 1.0}


def ncu_launches(path):
    """[{id, name, grid, time_s, dram_bytes}] in launch order, from an ncu --csv export."""
    rows = []
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]  # ncu prints ==PROF== lines too
    rd = csv.DictReader(lines)
    by = {}
    for r in rd:
        try:
            lid = int(r["ID"])
        except (KeyError, ValueError):
            continue
        k = by.setdefault(lid, {"id": lid, "name": r.get("Kernel Name", "?"), "grid": r.get("Grid Size", ""),
                                "time_s": None, "dram_read": None, "dram_write": None})
        name, unit = r.get("Metric Name", ""), r.get("Metric Unit", "")
        try:
            v = float(r.get("Metric Value", "").replace(",", "")) * UNITS.get(unit, float("nan"))
        except ValueError:
            continue
        if name == "gpu__time_duration.sum":
            k["time_s"] = v
        elif name == "dram__bytes_read.sum":
            k["dram_read"] = v
        elif name == "dram__bytes_write.sum":
            k["dram_write"] = v
        elif name == "launch__grid_size":
            k["grid"] = str(int(v))
    for lid in sorted(by):
        k = by[lid]
        k["dram_bytes"] = (k["dram_read"] + k["dram_write"]) if k["dram_read"] is not None and k["dram_write"] is not None else None
        rows.append(k)
    return rows


def kclass(name):
    n = name.lower()
    if "rmsnorm" in n:
        return "rmsnorm"
    if "attention" in n:
        return "attention"
    if any(s in n for s in ("gemm", "gemv", "nvjet", "xmma", "cutlass", "sm90_", "sm80_")):
        return "gemm"
    return None


def ncu_decode_ops(launches):
    """The decode-step ops of batch 1 from the kernel sequence: an RMSNorm of grid 1 (decode
    attn_norm; prefill's run one block per token) opens a layer; the GEMM kernels up to the next
    attention are qkv; the attention of grid n_heads; and so on. Returns {op: [(time_s, bytes)]}."""
    ops = {"attn_norm": [], "qkv": [], "attention": []}
    i = 0
    while i < len(launches):
        k = launches[i]
        if kclass(k["name"]) == "rmsnorm" and k["grid"] in ("1", "(1, 1, 1)"):
            j, gem = i + 1, []
            while j < len(launches) and kclass(launches[j]["name"]) == "gemm":
                gem.append(launches[j])
                j += 1
            if j < len(launches) and kclass(launches[j]["name"]) == "attention" and gem:
                ops["attn_norm"].append((k["time_s"], k["dram_bytes"]))
                ops["qkv"].append((sum(g["time_s"] or 0 for g in gem),
                                   sum(g["dram_bytes"] or 0 for g in gem) if all(g["dram_bytes"] is not None for g in gem) else None))
                a = launches[j]
                ops["attention"].append((a["time_s"], a["dram_bytes"]))
                i = j
        i += 1
    return ops


def med(xs):
    xs = sorted(x for x in xs if x is not None)
    return xs[len(xs) // 2] if xs else None


def fmt(v, scale, unit):
    return f"{v * scale:.4g} {unit}" if v is not None else "-"


def main():
    print("== steps (name, status, seconds, note)")
    try:
        print(open(os.path.join(out, "steps.txt")).read().rstrip())
    except FileNotFoundError:
        print("(no steps.txt)")
    try:
        gname = open(os.path.join(out, "gpu_name.txt")).read().strip().splitlines()[0]
    except Exception:
        gname = ""
    sid, spec = spec_for(gname)
    print(f"GPU: {gname or '(none)'} -> spec sheet {sid}")
    m = load("machine.json")
    if m:
        print("measured ceilings:", json.dumps(m)[:300])
    bw = spec.get("bandwidth_Bps", 0) or 0
    p16 = (spec.get("peak_flops", {}) or {}).get("tensor16", 0) or 0
    dec, act, cnt = load("decode_b1.json"), load("activity.json"), load("counters.json")
    print("== targets (ratios from this run, against the spec sheet)")
    pp = points(dec)[0] if points(dec) else None
    if pp and bw:
        r, t, b = decode_bw(pp)
        print(f"decode b1 op by op (per-op sync) / spec HBM = {r / bw:.3f}  (target >= 0.60; step {t * 1e3:.3f} ms)")
    g = graph_step(dec)
    if pp and bw and g and g[1] > 0:
        b = decode_bw(pp)[2]
        print(f"decode b1 without graph (no sync) / spec  = {b / g[0] / bw:.3f}  (step {g[0] * 1e3:.3f} ms)")
        print(f"decode b1 --cuda-graph / spec             = {b / g[1] / bw:.3f}  (target >= 0.75; step {g[1] * 1e3:.3f} ms)")
    chk = ((dec or {}).get("env") or {}).get("cuda_graph_check_p0")
    if chk:
        print(f"graph replay check: {chk}")
    if pp and p16:
        gem = [o for o in step(pp, "prefill") if o.get("op") in ("qkv", "o_proj", "gate_up", "down")]
        gt = sum(o.get("time_s", 0) for o in gem)
        gf = sum(o.get("flops", 0) for o in gem)
        if gt > 0:
            print(f"prefill GEMMs / tensor16 peak             = {gf / gt / p16:.3f}  (target >= 0.70)")
    pa = next((p for p in points(act) if p.get("workload", {}).get("batch") == 1), None)
    if pa and pp:
        ta, tp = decode_bw(pa)[1], decode_bw(pp)[1]
        if tp > 0:
            print(f"activity tracing decode change            = {ta / tp - 1:+.3f}  (target |x| <= 0.03)")
    for p in points(act):
        wl, s = p.get("workload", {}), p.get("summary", {})
        ks = [counter(o, "gpu_kernel_time_s") for o in step(p, "decode")]
        kt = sum(k for k in ks if k is not None)
        print(f"activity batch {wl.get('batch')}: TTFT {s.get('ttft_s', 0) * 1e3:.2f} ms, TPOT {s.get('tpot_s', 0) * 1e3:.3f} ms"
              + (f", decode kernels {kt * 1e3:.3f} ms" if kt > 0 else ""))
    if act:
        print(f"activity env.cupti: {(act.get('env') or {}).get('cupti', '-')}")
    # ---- CUPTI counters beside ncu, decode batch 1, same shapes (llama-2-7b, 2 layers)
    print("== xfprof CUPTI Range Profiler beside ncu (decode, batch 1; medians over layers; +-10% expected for qkv and "
          "attention; ncu flushes the caches before each kernel, so a small kernel's DRAM bytes (attn_norm) read higher there)")
    if cnt:
        print(f"counters env: {(cnt.get('env') or {}).get('cupti_counters', '-')}")
    launches = []
    try:
        launches = ncu_launches(os.path.join(out, "ncu.csv"))
    except FileNotFoundError:
        print("ncu.csv: none (step skipped or failed: see steps)")
    except Exception as e:
        print(f"ncu.csv: unreadable ({e})")
    nops = ncu_decode_ops(launches) if launches else {}
    cp = points(cnt)[0] if points(cnt) else None
    print(f"{'op':10} {'xfprof time':>14} {'ncu time':>12} {'ratio':>7} {'xfprof DRAM':>14} {'ncu DRAM':>12} {'ratio':>7}")
    for op in ("attn_norm", "qkv", "attention"):
        xt = xb = None
        if cp:
            ds = [o for o in step(cp, "decode") if o.get("op") == op]
            xt = med([counter(o, "gpu__time_duration.sum") for o in ds])
            xt = xt * 1e-9 if xt is not None else None
            rb = med([counter(o, "dram__bytes_read.sum") for o in ds])
            wb = med([counter(o, "dram__bytes_write.sum") for o in ds])
            xb = rb + wb if rb is not None and wb is not None else None
        nt = med([t for t, _ in nops.get(op, [])])
        nb = med([b for _, b in nops.get(op, [])])
        rt = f"{xt / nt:.3f}" if xt and nt else "-"
        rb_ = f"{xb / nb:.3f}" if xb and nb else "-"
        print(f"{op:10} {fmt(xt, 1e6, 'us'):>14} {fmt(nt, 1e6, 'us'):>12} {rt:>7} {fmt(xb, 1e-6, 'MB'):>14} {fmt(nb, 1e-6, 'MB'):>12} {rb_:>7}")
    if launches:
        print(f"ncu: {len(launches)} kernels profiled, decode layers recognised: {len(nops.get('qkv', []))}")
    # ---- PyTorch beside xfprof
    print("== PyTorch on the same GPU")
    peer = load("peer.json")
    if not peer:
        print("peer.json: none (step skipped or failed)")
    else:
        for k in ("error", "dry_run", "tiny_error", "llama2_7b_error"):
            if peer.get(k):
                print(f"peer {k}: {peer[k]}")
        t = peer.get("tiny")
        if t:
            for key, what in (("first_diff_torch_vs_xfprof_cuda", "transformers vs xfprof cuda"),
                              ("first_diff_xfprof_cuda_vs_cpu", "xfprof cuda vs cpu")):
                if key not in t:
                    print(f"tiny model greedy tokens, {what}: not compared (a side failed)")
                else:
                    d = t[key]
                    print(f"tiny model greedy tokens, {what}: " + ("equal" if d is None else f"first difference at token {d}")
                          + f" ({len(t.get('torch_tokens') or [])} tokens from transformers)")
        l = peer.get("llama2_7b_b1")
        if l:
            line = f"llama-2-7b bf16 batch 1 decode step at context 512: PyTorch eager {l['decode_step_s_median'] * 1e3:.3f} ms"
            if pp:
                line += f"; xfprof op by op {decode_bw(pp)[1] * 1e3:.3f} ms"
                if g:
                    line += f", no sync {g[0] * 1e3:.3f} ms, --cuda-graph {g[1] * 1e3:.3f} ms (xfprof's context: prompt 512 + gen/2)"
            print(line)
        if peer.get("fixture_torch_trace"):
            print(f"importer fixture: {peer['fixture_torch_trace']} (torch.profiler, CPU + CUDA), ncu.csv (ncu --csv)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
