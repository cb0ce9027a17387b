#!/usr/bin/env bash
# xfprof import on the real torch.profiler traces of tests/data/torch/ (made on the CPU by
# scripts/make-torch-traces.py: transformers Llama, random weights, generate, record_shapes and
# with_stack): the record's matrix FLOPs equal 2mkn summed over the trace's own mm/addmm/bmm
# events, its op times add up to the outermost cpu_op time (busy + idle = window); show, report
# and compare read it; compare of the trace against the same trace 1.5x slower exits 1; bad
# input exits 2 with the reason and writes nothing.
set -u
XF=${1:?usage: cli_import.sh path/to/xfprof}
root=$(cd "$(dirname "$0")/.." && pwd)
. "$(dirname "$0")/lib.sh" # $tmp/$TMP (removed at exit) and the helpers
data="$root/tests/data/torch"

for name in llama-tiny-fp32 llama-tiny-bf16 llama-small-bf16; do
  gzip -dc "$data/$name.json.gz" >"$tmp/$name.json" || { fail "$name: cannot unpack"; continue; }
  "$XF" import "$tmp/$name.json" --device h100-sxm -o "$tmp/$name.rec.json" --format csv >"$tmp/$name.csv" 2>"$tmp/$name.err"
  rc=$?
  [ $rc -eq 0 ] || { fail "$name: import exit $rc: $(cat "$tmp/$name.err")"; continue; }
  # Independent sums over the trace's own events (python, not xfprof's code).
  python3 - "$tmp/$name.json" "$tmp/$name.rec.json" "$data/$name.json.meta" >"$tmp/$name.check" 2>&1 <<'EOF' || fail "$name: $(cat "$tmp/$name.check")"
import json, sys
trace = json.load(open(sys.argv[1]))
rec = json.load(open(sys.argv[2]))
meta = json.load(open(sys.argv[3]))
ops = [e for e in trace["traceEvents"] if e.get("cat") == "cpu_op" and e.get("ph") == "X"]
# matrix FLOPs: 2*m*k*n of every mm / addmm / bmm (the leaves linear and matmul end in)
mat = 0.0
for e in ops:
    d = e["args"]["Input Dims"]
    if e["name"] == "aten::mm": (m, k), (_, n) = d[0], d[1]; mat += 2 * m * k * n
    elif e["name"] == "aten::addmm": (m, k), (_, n) = d[1], d[2]; mat += 2 * m * k * n + m * n
    elif e["name"] == "aten::bmm": (b, m, k), (_, _, n) = d[0], d[1]; mat += 2 * b * m * k * n
assert mat > 0, "no matrix ops in the trace"
p = rec["points"][0]
steps = {"prefill": rec["env"]["import_steps"].split()[0], "decode": rec["env"]["import_steps"].split()[2]}
gemm = {"qkv", "o_proj", "gate_up", "down", "lm_head"}
got = sum(o["flops"] * int(steps[o["phase"]]) for o in p["ops"] if o["op"] in gemm)
assert abs(got - mat) <= 1e-9 * mat, f"GEMM FLOPs {got} != trace mm/addmm/bmm sum {mat}"
assert abs(float(rec["env"]["import_matrix_flops"]) - mat) <= 1e-9 * mat, "import_matrix_flops"
# time: outermost ops (not inside another op of the same thread) summed
ops.sort(key=lambda e: (e["tid"], e["ts"], -e["dur"]))
busy, end, tid = 0.0, -1e30, None
for e in ops:
    if e["tid"] != tid: tid, end = e["tid"], -1e30
    if e["ts"] >= end - 0.01:
        busy += e["dur"]; end = e["ts"] + e["dur"]
busy *= 1e-6
tot = sum(sum(o["samples_s"]) for o in p["ops"])
assert abs(tot - busy) <= 1e-9 + 1e-6 * busy, f"op samples sum {tot} != outermost cpu_op time {busy}"
env = {k: float(v) for k, v in rec["env"].items() if k in ("import_busy_s", "import_idle_s", "import_window_s")}
assert abs(env["import_busy_s"] - busy) <= 1e-6 * busy, (env, busy)
assert abs(env["import_busy_s"] + env["import_idle_s"] - env["import_window_s"]) <= 1e-9, env
# the model and workload the trace shows
m = rec["model"]
assert (m["n_layers"], m["d_model"], m["n_heads"], m["n_kv_heads"], m["d_ff"], m["vocab"]) == \
    (meta["layers"], meta["hidden"], meta["heads"], meta["kv_heads"], meta["ffn"], meta["vocab"]), m
w = p["workload"]
assert (w["batch"], w["prompt"], w["gen"]) == (1, meta["prompt"], meta["gen"]), w  # gen: tokens generated
assert w["adtype"] == meta["dtype"], w
# every layer has its GEMMs, attention and norms in both phases
for ph in ("prefill", "decode"):
    for l in range(meta["layers"]):
        kinds = {o["op"] for o in p["ops"] if o["phase"] == ph and o["layer"] == l}
        need = {"attn_norm", "qkv", "attention", "o_proj", "ffn_norm", "gate_up", "swiglu", "down"}
        assert need <= kinds, f"{ph} layer {l} lacks {need - kinds}"
print("ok")
EOF
  "$XF" show "$tmp/$name.rec.json" >"$tmp/$name.show" 2>&1 || fail "$name: show failed"
  grep -q "attention" "$tmp/$name.show" || fail "$name: show has no attention row"
done

# The HTML report of an import: roofline, op table, measured classes.
rec="$tmp/llama-tiny-fp32.rec.json"
"$XF" report "$rec" -o "$tmp/r.html" >/dev/null 2>"$tmp/err" || fail "report: $(cat "$tmp/err")"
grep -q "<svg" "$tmp/r.html" || fail "report: no chart"
grep -q "gate_up" "$tmp/r.html" || fail "report: no op table"
grep -q "latency" "$tmp/r.html" || fail "report: no measured class"
"$XF" import "$tmp/llama-tiny-fp32.json" --device h100-sxm --trace "$tmp/t.json" --format md >"$tmp/md" 2>/dev/null ||
  fail "import --trace --format md"
python3 -c "import json,sys; assert json.load(open(sys.argv[1]))['traceEvents']" "$tmp/t.json" || fail "import --trace: no Chrome trace"
grep -q "| prefill | qkv" "$tmp/md" || fail "import --format md: no op rows"
# ops without a formula (aten::arange: its child only allocates) are listed, class unknown, time kept
grep -q "other: aten::arange" "$tmp/r.html" || fail "report: the unknown op aten::arange is not listed"
python3 - "$rec" <<'EOF2' || fail "unknown ops: not kept with their time and class"
import json, sys
ops = json.load(open(sys.argv[1]))["points"][0]["ops"]
u = [o for o in ops if o["source"] == "aten::arange"]
assert u and all(o["bound"] == "unknown" and o["time_s"] > 0 and o["share"] > 0 for o in u), u
EOF2

# Without module names (python_function events removed): layers from the repeating pattern of each
# step; every layer's GEMM and attention FLOPs equal those the module names gave.
python3 - "$tmp/llama-tiny-fp32.json" "$tmp/nomod.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
d["traceEvents"] = [e for e in d["traceEvents"] if e.get("cat") != "python_function"]
json.dump(d, open(sys.argv[2], "w"))
EOF
"$XF" import "$tmp/nomod.json" --device h100-sxm -o "$tmp/nomod.rec.json" >/dev/null 2>"$tmp/err" || fail "no modules: $(cat "$tmp/err")"
python3 - "$rec" "$tmp/nomod.rec.json" <<'EOF' || fail "layers from the repeating pattern differ from the module names"
import json, sys
def agg(path):
    r = {}
    for o in json.load(open(path))["points"][0]["ops"]:
        if o["op"] in ("qkv", "o_proj", "gate_up", "down", "attention", "embedding"):
            k = (o["phase"], o["layer"], o["op"]); r[k] = r.get(k, 0) + o["flops"]
    return r
a, b = agg(sys.argv[1]), agg(sys.argv[2])
assert a == b, sorted(set(a.items()) ^ set(b.items()))
assert json.load(open(sys.argv[2]))["env"]["import_layers"].startswith("the repeating pattern"), "env"
EOF

# compare: the same trace against itself passes; against a 1.5x slower copy exits 1.
"$XF" compare "$rec" "$rec" >"$tmp/same.log" 2>&1 || fail "compare of a record with itself: exit $?"
python3 - "$tmp/llama-tiny-fp32.json" "$tmp/slow.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
for e in d["traceEvents"]:
    for k in ("ts", "dur"):
        if k in e: e[k] = e[k] * 1.5
json.dump(d, open(sys.argv[2], "w"))
EOF
"$XF" import "$tmp/slow.json" --device h100-sxm -o "$tmp/slow.rec.json" >/dev/null 2>&1 || fail "import of the slow copy"
"$XF" compare "$rec" "$tmp/slow.rec.json" >"$tmp/slow.log" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "compare against the slower trace: exit $rc, expected 1"
grep -q "REGRESSION" "$tmp/slow.log" || fail "compare against the slower trace: no regression named"

# Bad input: exit 2, the reason, no output file.
bad() { # name, expected text, file
  rm -f "$tmp/out.json"
  "$XF" import $3 --device h100-sxm -o "$tmp/out.json" >/dev/null 2>"$tmp/err"
  rc=$?
  [ $rc -eq 2 ] || fail "$1: exit $rc, expected 2 ($(cat "$tmp/err"))"
  grep -q -- "$2" "$tmp/err" || fail "$1: message lacks '$2': $(cat "$tmp/err")"
  [ ! -e "$tmp/out.json" ] || fail "$1: wrote $tmp/out.json"
}
head -c 100000 "$tmp/llama-tiny-fp32.json" >"$tmp/trunc.json"
bad "truncated JSON" "truncated" "$tmp/trunc.json"
python3 - "$tmp/llama-tiny-fp32.json" "$tmp/noshapes.json" "$tmp/neg.json" "$tmp/overlap.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
d2 = dict(d, record_shapes=0, traceEvents=[dict(e, args={k: v for k, v in e.get("args", {}).items()
                                                        if not k.startswith("Input")}) for e in ev])
json.dump(d2, open(sys.argv[2], "w"))
ops = [i for i, e in enumerate(ev) if e.get("cat") == "cpu_op"]
neg = json.loads(json.dumps(d)); neg["traceEvents"][ops[10]]["dur"] = -3.0
json.dump(neg, open(sys.argv[3], "w"))
ov = json.loads(json.dumps(d)); e = ov["traceEvents"][ops[20]]; ov["traceEvents"].append(dict(e, ts=e["ts"] + e["dur"] / 2))
json.dump(ov, open(sys.argv[4], "w"))
EOF
bad "no shapes" "record_shapes=True" "$tmp/noshapes.json"
bad "negative duration" "negative duration" "$tmp/neg.json"
bad "overlapping events" "overlap" "$tmp/overlap.json"
truncate -s 2G "$tmp/big.json"
bad "2 GiB file" "max-size" "$tmp/big.json"
rm -f "$tmp/big.json"
bad "not JSON" "not valid JSON" "$root/README.md"
"$XF" import >/dev/null 2>&1; [ $? -eq 2 ] || fail "no file: exit not 2"

# Nsight Compute CSV (fixtures written from NVIDIA's documented --page raw format, not from a GPU
# run): each kernel classified by the speed-of-light rule against the H100's ceilings.
ncu="$root/tests/data/ncu"
"$XF" import "$ncu/llama-decode-h100.csv" --device h100-sxm -o "$tmp/ncu.rec.json" --format csv >"$tmp/ncu.csv" 2>"$tmp/err" ||
  fail "ncu import: $(cat "$tmp/err")"
python3 - "$tmp/ncu.rec.json" <<'EOF2' || fail "ncu classes"
import json, sys
p = json.load(open(sys.argv[1]))["points"][0]
cls = {o["source"][:20]: (o["op"], o["bound"], o["bytes_source"]) for o in p["ops"]}
assert cls["sm90_xmma_gemm_bf16b"] == ("other", "compute", "counters"), cls   # u_c 81%
assert cls["void flash_fwd_split"] == ("attention", "memory", "counters"), cls  # u_m 90%
assert cls["void vllm::rms_norm_"] == ("attn_norm", "latency", "counters"), cls # both < 60%
assert cls["void vllm::act_and_m"] == ("swiglu", "memory", "counters"), cls     # 66% vs 0%: gap
EOF2
"$XF" report "$tmp/ncu.rec.json" -o "$tmp/ncu.html" >/dev/null 2>"$tmp/err" || fail "ncu report: $(cat "$tmp/err")"
bad "ncu bytes beyond int64" "beyond a 64-bit byte count" "$ncu/bytes-beyond-int64.csv"  # fuzz_ncu_csv's finding
bad "ncu missing columns" "missing columns: dram__bytes_write.sum" "$ncu/missing-columns.csv"
head -c 700 "$ncu/llama-decode-h100.csv" >"$tmp/cut.csv"
bad "ncu truncated CSV" "" "$tmp/cut.csv"
echo '{"format":"xfprof-kernel-map","version":1,"map":[{"pattern":"*","op":"nonsense"}]}' >"$tmp/map.json"
bad "bad kernel map" "unknown op 'nonsense'" "$ncu/llama-decode-h100.csv --kernel-map $tmp/map.json"

# Nsight Systems SQLite (a database built from tests/data/nsys/decode.sql, written from the
# documented schema): NVTX ranges become ops, every class unknown (an export has no FLOPs or bytes).
python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[2]); c.executescript(open(sys.argv[1]).read()); c.commit()" \
  "$root/tests/data/nsys/decode.sql" "$tmp/nsys.sqlite" || fail "cannot build the nsys fixture"
"$XF" import "$tmp/nsys.sqlite" --device h100-sxm -o "$tmp/nsys.rec.json" --report "$tmp/nsys.html" >/dev/null 2>"$tmp/err" ||
  fail "nsys import: $(cat "$tmp/err")"
python3 - "$tmp/nsys.rec.json" <<'EOF2' || fail "nsys ops"
import json, sys
ops = {o["source"]: o for o in json.load(open(sys.argv[1]))["points"][0]["ops"]}
# Records print doubles exactly: 14000 ns * 1e-9 is not the double 14e-6, so compare within 1 ulp-ish.
s = ops["layer0.attention"]["samples_s"]
assert ops["layer0.attention"]["op"] == "attention" and len(s) == 2 and all(abs(a - b) <= 1e-15 for a, b in zip(s, [14e-6, 12e-6])), ops
assert all(o["bound"] == "unknown" for o in ops.values()), ops
EOF2
grep -q "other: layer0.mlp" "$tmp/nsys.html" || fail "nsys report: the NVTX range is not listed"

[ $fails -eq 0 ] && echo "cli_import: all passed"
exit $((fails > 0))
