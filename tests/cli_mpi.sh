#!/usr/bin/env bash
# The MPI side from the outside: machine --comm under mpirun (2 ranks) adds the measured link to
# the machine file; without mpirun, or with one rank, a clear message and exit 2. Skipped (77)
# when xfprof was built without MPI or mpirun is absent.
set -u
XF=${1:?usage: cli_mpi.sh path/to/xfprof}
. "$(dirname "$0")/lib.sh" # $tmp/$TMP (removed at exit) and the helpers
"$XF" machine --comm >"$tmp/out" 2>"$tmp/err"
rc=$?
if grep -q "built without MPI" "$tmp/err"; then echo "skipped: xfprof built without MPI"; exit 77; fi
command -v mpirun >/dev/null || { echo "skipped: no mpirun (apt-get install openmpi-bin)"; exit 77; }
[ "$rc" -eq 2 ] || fail "machine --comm without mpirun exited $rc, expected 2"
grep -q "run it as mpirun -np 2 xfprof machine --comm" "$tmp/err" || fail "no hint to use mpirun: $(cat "$tmp/err")"
# Under ASan: Open MPI's libraries keep memory past MPI_Finalize; LeakSanitizer is told to skip
# leaks whose stack passes through them (xfprof's own are still reported).
src=${XF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
export LSAN_OPTIONS="suppressions=$src/tests/data/lsan-openmpi.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export OMPI_MCA_mca_base_component_disable_dlclose=1 # its plugins stay loaded: their stacks name them
case "${ASAN_OPTIONS:-}" in *fast_unwind_on_malloc*) ;; *) export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0" ;; esac
# Open MPI as root needs --allow-run-as-root, on 2 cores --oversubscribe (CI runs as root on 2 cores).
MPI=(mpirun --allow-run-as-root --oversubscribe)
# What the python checks below share: a run's steps (tokens and logits) against another's, and
# the all-reduce bus bytes per (phase, layer).
cat >"$tmp/tpcheck.py" <<'P'
import json
def same_steps(f1, f2, n, tol):
    a = [json.loads(l) for l in open(f1)][1:]
    b = [json.loads(l) for l in open(f2)][1:]
    assert len(a) == len(b) == n, (len(a), len(b))
    for x, y in zip(a, b):
        assert x["tokens"] == y["tokens"], (x["step"], x["tokens"], y["tokens"])
        d = max(abs(p - q) for r1, r2 in zip(x["logits"], y["logits"]) for p, q in zip(r1, r2))
        assert d < tol, d
def per_layer(ops):
    s = {}
    for o in ops:
        if o["op"] == "all_reduce" and o["layer"] >= 0:
            s[(o["phase"], o["layer"])] = s.get((o["phase"], o["layer"]), 0) + o["comm_bytes"]
    return s
P
export PYTHONPATH="$tmp${PYTHONPATH:+:$PYTHONPATH}"
export XFPROF_MACHINE_FILE="$tmp/machine.json"
timeout 60 "${MPI[@]}" -np 1 "$XF" machine --comm >"$tmp/out" 2>"$tmp/err"
[ $? -ne 0 ] || fail "machine --comm with 1 rank succeeded"
grep -q "needs 2 or more" "$tmp/err" || fail "1 rank: no message: $(head -c 300 "$tmp/err")"
timeout 60 "${MPI[@]}" -np 2 "$XF" machine --comm --quick >"$tmp/out" 2>"$tmp/err"
[ $? -ne 0 ] || fail "machine --comm before the machine file exists succeeded"
grep -q "measure the CPU first" "$tmp/err" || fail "no machine file: no message: $(head -c 300 "$tmp/err")"
"$XF" machine --quick >/dev/null 2>&1 || fail "machine --quick"
timeout 120 "${MPI[@]}" -np 2 "$XF" machine --comm --quick >"$tmp/out" 2>"$tmp/err" ||
  fail "mpirun -np 2 machine --comm exited $?: $(head -c 400 "$tmp/err")"
grep -q "link ceiling (largest bus bandwidth)" "$tmp/out" || fail "no link ceiling printed: $(cat "$tmp/out")"
[ "$(grep -c "link ceiling" "$tmp/out")" -eq 1 ] || fail "more than rank 0 printed the result"
python3 - "$tmp/machine.json" <<'P' || fail "the machine file has no measured link"
import json, sys
d = json.load(open(sys.argv[1]))["devices"][0]
l = d["link"]
assert l["name"] == "mpi" and l["bandwidth_Bps"] > 1e6 and l["latency_s"] > 0 and d["gpus_per_node"] == 2, l
assert "measured_detail" in d  # the CPU's measurement kept
P
# the file still loads as a device, link included: predict --tp 2 on it
"$XF" predict --device-file "$tmp/machine.json" --model stories15m --tp 2 --prompt 16 --gen 4 >"$tmp/out" 2>"$tmp/err" ||
  fail "predict --tp 2 on the measured machine exited $?: $(head -c 300 "$tmp/err")"
grep -q "link mpi" "$tmp/out" || fail "predict did not use the measured link"

# machine --comm --device cuda: NCCL between the ranks' GPUs. Here (no GPU; NCCL maybe absent) every
# rank says why it cannot and the job ends with exit status 3, the machine file untouched.
cp "$tmp/machine.json" "$tmp/machine.before"
XFPROF_NCCL_LIB=/nonexistent/libnccl.so.2 timeout 60 "${MPI[@]}" -np 2 "$XF" machine --comm --device cuda --quick \
  -o "$tmp/machine.json" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 3 ] || fail "machine --comm --device cuda without NCCL exited $rc, expected 3"
grep -q "rank 0 of 2: NCCL not found: /nonexistent/libnccl.so.2 could not be loaded" "$tmp/err" || fail "no NCCL: $(head -c 300 "$tmp/err")"
if ! nvidia-smi -L 2>/dev/null | grep -q "GPU 1:"; then
  timeout 60 "${MPI[@]}" -np 2 "$XF" machine --comm --device cuda --quick -o "$tmp/machine.json" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  [ "$rc" -eq 3 ] || fail "machine --comm --device cuda with fewer than 2 GPUs exited $rc, expected 3"
  grep -Eq "rank [01] of 2: (NCCL not found|no CUDA device)" "$tmp/err" || fail "no GPU: $(head -c 300 "$tmp/err")"
fi
cmp -s "$tmp/machine.json" "$tmp/machine.before" || fail "a failed NCCL measurement changed the machine file"

# run --tp: refusals before anything starts, then under mpirun.
"$XF" run --tp 2 --prompt 8 --gen 4 >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] || fail "run --tp 2 without mpirun: exit status not 2"
grep -q "start it as mpirun -np 2 xfprof run --tp 2" "$tmp/err" || fail "run --tp without mpirun: $(cat "$tmp/err")"
"$XF" run --model stories15m --tp 4 >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] || fail "run --tp 4 of 6 heads: exit status not 2"
grep -q "6 attention heads do not split evenly over 4 devices" "$tmp/err" || fail "--tp 4: $(cat "$tmp/err")"
timeout 60 "${MPI[@]}" -np 3 "$XF" run --tp 2 --prompt 8 --gen 4 -o "$tmp/bad.json" >"$tmp/out" 2>"$tmp/err"
[ $? -ne 0 ] || fail "3 ranks for --tp 2 succeeded"
grep -q "ranks mismatch: mpirun started 3 ranks, --tp 2" "$tmp/err" || fail "ranks mismatch: $(head -c 300 "$tmp/err")"
[ ! -e "$tmp/bad.json" ] || fail "a refused run left a record"

# Tokens and logits of --tp 2 equal the one-process run's (fp32; partial sums in another order:
# logits within 1e-4); the record's all-reduce bytes are the cost model's.
common=(--model stories15m --prompt 12 --gen 8 --batch 2 --threads 1 --reps 2 --wdtype fp32 --save-logits)
"$XF" run "${common[@]}" --save-tokens "$tmp/t1.jsonl" -o "$tmp/r1.json" >/dev/null 2>"$tmp/err" || fail "run: $(head -c 300 "$tmp/err")"
timeout 300 "${MPI[@]}" -np 2 "$XF" run "${common[@]}" --tp 2 --save-tokens "$tmp/t2.jsonl" -o "$tmp/r2.json" >"$tmp/out" 2>"$tmp/err" ||
  fail "mpirun -np 2 run --tp 2 exited $?: $(head -c 400 "$tmp/err")"
grep -q "split: tp 2 x pp 1 = 2 devices, link mpi" "$tmp/out" || fail "run --tp 2 printed no split"
"$XF" predict --device-file "$tmp/machine.json" --model stories15m --tp 2 --prompt 12 --gen 8 --batch 2 --wdtype fp32 \
  --adtype fp32 -o "$tmp/p2.json" >/dev/null 2>"$tmp/err" || fail "predict --tp 2: $(head -c 300 "$tmp/err")"
python3 - "$tmp" <<'P' || fail "run --tp 2 differs from the one-process run or from the cost model"
import json, sys
from tpcheck import same_steps, per_layer
t = sys.argv[1]
same_steps(t + "/t1.jsonl", t + "/t2.jsonl", 8, 1e-4)
r1, r2, p2 = (json.load(open(t + f)) for f in ("/r1.json", "/r2.json", "/p2.json"))
assert r1["points"][0]["tokens"] == r2["points"][0]["tokens"]
ops = r2["points"][0]["ops"]
ar = [o for o in ops if o["op"] == "all_reduce"]
assert len(ar) == 2 * 6, len(ar)  # prefill and decode, one op per layer (its two all-reduces)
reps = r2["points"][0]["run"]["reps"]
for o in ar:
    assert o["measured"] and len(o["samples_s"]) == 2 * reps, o  # every rank's samples
    assert o["bound"] in ("communication", "latency")
assert per_layer(ops) == per_layer(p2["points"][0]["ops"]), (per_layer(ops), per_layer(p2["points"][0]["ops"]))
assert r2["points"][0]["parallel"]["devices"] == 2 and r2["env"]["mpi_ranks"] == "2"
P

# --weights: each rank reads only its blocks of a Hugging Face folder; tokens equal the one-process
# run's for fp32 and bf16, and int8 with a group inside a rank's columns (each rank quantizes its
# block); o_proj / down biases added once (llama-attn-bias: q/k/v/o biases; llama-mlp-bias:
# gate/up/down biases; qwen3-bias: q/k norms too). 12 tokens of 2 sequences each.
hf=$src/tests/data/hf
# tp_pair WHAT ARGS...: the one-process run and mpirun -np 2 ... --tp 2 of ARGS, their tokens in
# $tmp/w1.jsonl and $tmp/w2.jsonl, their records in $tmp/w1.json and $tmp/w2.json
tp_pair() {
  local what=$1
  shift
  "$XF" run "$@" --save-tokens "$tmp/w1.jsonl" -o "$tmp/w1.json" >/dev/null 2>"$tmp/err" || fail "$what: run: $(head -c 300 "$tmp/err")"
  timeout 300 "${MPI[@]}" -np 2 "$XF" run "$@" --tp 2 --save-tokens "$tmp/w2.jsonl" -o "$tmp/w2.json" >/dev/null 2>"$tmp/err" ||
    fail "$what: mpirun -np 2 run --tp 2 exited $?: $(head -c 400 "$tmp/err")"
}
# MoE (mixtral, qwen2-moe with its shared expert and gate, qwen3-moe): experts split by columns, the
# router whole on every rank; tokens equal, logits within 1e-4, int8 within 5e-2: an int8 input on a
# rounding tie of its group's grid moves one step with the partial sums' order, and the cache keeps
# it (seen: qwen2-moe int8 --group 8 on a 2-vCPU AMD EPYC, AVX2 kernels: sequence 1 from step 3 on,
# 2.9e-2 at most on logits up to 5; on the Xeon's AVX-512 kernels none flipped, under 1e-3).
for case in "llama-attn-bias fp32" "llama-mlp-bias fp32" "qwen3-bias bf16" "llama-mlp-bias int8 --group 32" "mixtral fp32" \
  "qwen2-moe bf16" "qwen3-moe fp32" "qwen2-moe int8 --group 8"; do
  set -- $case
  fx=$1
  shift
  a=(--weights "$hf/$fx" --prompt 8 --gen 12 --batch 2 --threads 1 --reps 1 --warmup 0 --wdtype "$@" --save-logits)
  tp_pair "$case" "${a[@]}"
  python3 - "$tmp" "$*" <<'P' || fail "$case: --tp 2 differs from the one-process run"
import json, sys
from tpcheck import same_steps
t, dt = sys.argv[1], sys.argv[2].split()[0]
same_steps(t + "/w1.jsonl", t + "/w2.jsonl", 12, 5e-2 if dt == "int8" else 1e-4)
r2 = json.load(open(t + "/w2.json"))
assert r2["points"][0]["workload"]["wdtype"] == dt and r2["points"][0]["workload"]["tp"] == 2, r2["points"][0]["workload"]
cfg = json.load(open(t + "/w1.json"))["model"]
ops = r2["points"][0]["ops"]
assert sum(1 for o in ops if o["op"] == "all_reduce") == 2 * cfg["n_layers"], cfg  # one op a layer, prefill and decode
assert not any(o["op"] in ("all_to_all", "all_gather") for o in ops)
P
done
# int8 whose scale groups would straddle the split: refused with the arithmetic, before mpirun starts
"$XF" run --weights "$hf/llama-attn-bias" --tp 2 --wdtype int8 >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] || fail "int8 --group 128 over --tp 2: exit status not 2"
grep -q "o_proj's 64 input columns split into 2 x 32, and 32 is not a multiple of 128" "$tmp/err" || fail "int8 straddle: $(cat "$tmp/err")"
# what stays refused, by name
"$XF" run --weights "$hf/qwen2-moe" --tp 2 --wdtype int8 --group 16 >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "the shared expert's down's 48 input columns split into 2 x 24, and 24 is not a multiple of 16" "$tmp/err" &&
  grep -q "(e.g. --group 8)" "$tmp/err" || fail "MoE int8 straddle: $(cat "$tmp/err")"
# DeepSeek-V3 (latent attention; deepseek-moe*: its MoE layers after dense ones): q_a / kv_a and their
# norms whole on every rank, q_b / kv_b by heads, o_proj row-parallel, the latent KV cache
# replicated (the record's KV bytes per token are the one-process run's); both forms; experts by
# columns. 16 tokens of 2 sequences; all-reduce bytes equal predict's.
for case in "deepseek-mla fp32" "deepseek-moe-yarn fp32 --mla absorbed" "deepseek-mla-yarn bf16 --mla absorbed" \
  "deepseek-moe int8 --group 16"; do
  set -- $case
  fx=$1
  shift
  a=(--weights "$hf/$fx" --prompt 8 --gen 16 --batch 2 --threads 1 --reps 1 --warmup 0 --wdtype "$@" --save-logits)
  tp_pair "$case" "${a[@]}"
  p=(--model "$hf/$fx" --prompt 8 --gen 16 --batch 2 --wdtype "$@" --adtype fp32)
  "$XF" predict --device-file "$tmp/machine.json" "${p[@]}" --tp 2 -o "$tmp/wp.json" >/dev/null 2>"$tmp/err" ||
    fail "$case: predict --tp 2: $(head -c 300 "$tmp/err")"
  python3 - "$tmp" "$*" <<'P' || fail "$case: --tp 2 differs from the one-process run or from the cost model"
import json, sys
from tpcheck import same_steps, per_layer
t, args = sys.argv[1], sys.argv[2].split()
form = "absorbed" if "absorbed" in args else "naive"
same_steps(t + "/w1.jsonl", t + "/w2.jsonl", 16, 1e-4)
r1, r2, p2 = (json.load(open(t + f)) for f in ("/w1.json", "/w2.json", "/wp.json"))
assert r2["model"]["mla"]["form"] == form and p2["model"]["mla"]["form"] == form, (r2["model"]["mla"], p2["model"]["mla"])
assert r2["points"][0]["memory"]["kv_bytes_per_token"] == r1["points"][0]["memory"]["kv_bytes_per_token"]  # replicated
ops, m = r2["points"][0]["ops"], r1["model"]
got, want = per_layer(ops), per_layer(p2["points"][0]["ops"])
assert len(got) == 2 * m["n_layers"], got
# two ring all-reduces of the step's rows x d_model fp32 a layer (2(N-1)/N of the buffer, N = 2):
# predict's bytes on the dense layers (predict --tp prices MoE layers expert parallel, the run
# splits experts by columns: there the same formula, the cost model's reference split)
dense = set(m["dense_layers"]) if m["n_experts"] > 0 else set(range(m["n_layers"]))
assert dense, m
for (ph, l), v in got.items():
    assert v == 2 * (16 if ph == "prefill" else 2) * m["d_model"] * 4, (ph, l, v)
    if l in dense:
        assert v == want[(ph, l)], (ph, l, v, want[(ph, l)])
assert not any(o["op"] in ("all_to_all", "all_gather") for o in ops)
P
done
# MLA from random weights (each rank slices the seed's whole model): the same tokens, both forms
for form in naive absorbed; do
  a=(--model "$hf/deepseek-moe" --prompt 8 --gen 16 --batch 2 --threads 1 --reps 1 --warmup 0 --wdtype fp32 --mla "$form" --save-logits)
  tp_pair "random MLA $form" "${a[@]}"
  python3 -c 'import sys, tpcheck; tpcheck.same_steps(sys.argv[1] + "/w1.jsonl", sys.argv[1] + "/w2.jsonl", 16, 1e-4)' "$tmp" ||
    fail "random MLA $form: --tp 2 differs from the one-process run"
done
# MLA int8: o_proj's columns are v_head_dim a head (4 x 16 = 64 -> 2 x 32)
"$XF" run --weights "$hf/deepseek-mla" --tp 2 --wdtype int8 >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "o_proj's 64 input columns split into 2 x 32, and 32 is not a multiple of 128" "$tmp/err" ||
  fail "MLA int8 straddle: $(cat "$tmp/err")"
"$XF" run --tp 2 --pp 2 >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "pipeline stages are not implemented in the measured run" "$tmp/err" || fail "run --pp: $(cat "$tmp/err")"

# find_rank1 MPIRUN_PID: sets victim to the pid of rank 1 among mpirun's children and grandchildren
# (empty when none appeared within 10 s).
find_rank1() {
  victim=""
  for _ in $(seq 1 100); do
    for pid in $(pgrep -P "$1" 2>/dev/null) $(for c in $(pgrep -P "$1" 2>/dev/null); do pgrep -P "$c"; done); do
      grep -qa "OMPI_COMM_WORLD_RANK=1" "/proc/$pid/environ" 2>/dev/null && victim=$pid
    done
    [ -n "$victim" ] && return
    sleep 0.1
  done
}

# A rank that hangs: the other gives up after --comm-timeout, every rank ends, no record.
timeout 120 "${MPI[@]}" -np 2 "$XF" run --model stories110m --tp 2 --prompt 64 --gen 400 --reps 50 --threads 1 \
  --comm-timeout 3 -o "$tmp/hang.json" >"$tmp/out" 2>"$tmp/err" &
mp=$!
find_rank1 "$mp"
if [ -z "$victim" ]; then
  fail "no rank 1 found under mpirun $mp"
  kill "$mp" 2>/dev/null
else
  sleep 2
  kill -STOP "$victim"
fi
wait "$mp"
rc=$?
[ -n "$victim" ] && kill -KILL "$victim" 2>/dev/null
[ "$rc" -ne 0 ] || fail "a hung rank: mpirun exited 0"
grep -q "did not complete in 3 s: another rank died or hangs" "$tmp/err" || fail "a hung rank: no timeout message: $(head -c 400 "$tmp/err")"
grep -q "no record written" "$tmp/err" || fail "a hung rank: no 'no record written'"
[ ! -e "$tmp/hang.json" ] || fail "a hung rank left a record"

# A rank that dies: mpirun ends the others, non-zero, no record.
timeout 120 "${MPI[@]}" -np 2 "$XF" run --model stories110m --tp 2 --prompt 64 --gen 400 --reps 50 --threads 1 \
  --comm-timeout 10 -o "$tmp/died.json" >"$tmp/out" 2>"$tmp/err" &
mp=$!
find_rank1 "$mp"
if [ -n "$victim" ]; then sleep 2; kill -KILL "$victim"; else fail "no rank 1 found under mpirun $mp"; kill "$mp" 2>/dev/null; fi
wait "$mp"
[ $? -ne 0 ] || fail "a killed rank: mpirun exited 0"
[ ! -e "$tmp/died.json" ] || fail "a killed rank left a record"

[ "$fails" -eq 0 ] && echo "cli_mpi: all passed"
exit $((fails > 0))
