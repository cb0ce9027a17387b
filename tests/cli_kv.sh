#!/usr/bin/env bash
# xfprof kv from the outside: --size figures, a simulation per policy with its record, traces,
# determinism, and bad input giving a clear message and exit status 2 (never a hang).
# $1 = the xfprof binary.
set -u
XF=${1:?usage: cli_kv.sh path/to/xfprof}
SRC="${XF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
D="$SRC/tests/data/kv"
. "$(dirname "$0")/lib.sh" # $tmp/$TMP (removed at exit) and the helpers
ok() { echo "ok: $*"; }

# expect STATUS STDERR-PART args...: runs xfprof kv (60 s at most), checks the exit status and
# that stderr holds the text.
expect() {
  local want=$1 part=$2; shift 2
  timeout 60 "$XF" kv "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ "$rc" -ne "$want" ]; then fail "xfprof kv $* exited $rc, expected $want; stderr: $(head -c 400 "$tmp/err")"; return; fi
  if [ -n "$part" ] && ! grep -q -- "$part" "$tmp/err"; then fail "xfprof kv $*: stderr lacks '$part': $(head -c 400 "$tmp/err")"; return; fi
  ok "kv $* -> $rc"
}
has() { # file, text
  if grep -q -- "$2" "$1"; then ok "output has '$2'"; else fail "output lacks '$2': $(head -c 600 "$1")"; fi
}

expect 0 "" --help
has "$tmp/out" "--policy"

# --size: LLaMA-2-13B fp16 is 2 * 40 * 40 * 128 * 2 = 819200 B/token; 2048 tokens = 1677721600 B,
# batch 8 = 13421772800 B.
expect 0 "" --size --model llama-2-13b --context 2048 --batch 1,8
has "$tmp/out" "819200 bytes per token"
has "$tmp/out" "1677721600"
has "$tmp/out" "13421772800"
# LLaMA-3-8B (GQA, 8 KV heads) int8: 2 * 32 * 8 * (128 + 2) = 66560 B/token
expect 0 "" --size --model llama-3-8b --kvdtype int8 --format json
has "$tmp/out" '"bytes_per_token":	66560'

# With a budget: 20 GiB / (819200 B * 100 tokens) = 262.1 -> 262 sequences of 100 tokens fit.
expect 0 "" --size --model llama-2-13b --kv-budget 20GiB --context 100 --format json
has "$tmp/out" '"max_seqs":	262'
expect 0 "" --size --model llama-2-13b --device a100-40gb --context 2048
has "$tmp/out" "max seqs"
# Sizes in binary units (core/units.h): 13421772800 B / 2^30 = 12.5 GiB; the A100-40GB's default
# budget 16494319616 B / 2^30 = 15.36 -> "15.4 GiB".
expect 0 "" --size --model llama-2-13b --context 2048 --batch 8
has "$tmp/out" "13421772800   12.5 GiB"
expect 0 "" --size --model llama-2-13b --device a100-40gb --context 2048
has "$tmp/out" "KV budget 16494319616 bytes (15.4 GiB)"
if grep -q " GB\b" "$tmp/out"; then fail "a decimal GB in --size output"; else ok "no decimal GB in --size"; fi

# An absurd config (4096 layers x 16384 KV heads x 64 head_dim: 2^34 B per fp16 token) at 2^30
# tokens x batch 2^24: 2^34 * 2^30 * 2^24 = 2^88 B = 256 YiB. Printed with units, not as a
# 27-digit integer; the share of a 1 GiB budget is 100 * 2^88 / 2^30 = 2.88e19 %.
cat >"$tmp/max.json" <<'EOF2'
{"model_type":"llama","hidden_size":1048576,"intermediate_size":16777216,"num_hidden_layers":4096,
 "num_attention_heads":16384,"num_key_value_heads":16384,"vocab_size":16777216,
 "max_position_embeddings":134217728}
EOF2
expect 0 "" --size --model "$tmp/max.json" --context 1073741824 --batch 1,16777216 --kv-budget 1GiB
has "$tmp/out" "17179869184 bytes per token"
has "$tmp/out" "1073741824        1             16.0 EiB   16.0 EiB   1.72e+12" # 2^34 * 2^30 = 2^64 B: past 2^63; 100 * 2^34 %
has "$tmp/out" "256 YiB    256 YiB   2.88e+19"
if grep -Eq "[0-9]{20}" "$tmp/out"; then fail "a 20-digit byte count: $(grep -E '[0-9]{20}' "$tmp/out")"; else ok "no 20-digit numbers"; fi
expect 0 "" --size --model "$tmp/max.json" --context 1073741824 --batch 16777216 --format json
has "$tmp/out" '"bytes":	3.09485009821345e+26' # 2^88

# The default budget needs the activations of one max-len prefill; a context past the cost
# model's 2^24 tokens cannot be counted: refused (it used to leave them out), unless --max-len or
# --kv-budget settles it. TinyLlama's shapes with a 2^25-token context:
cat >"$tmp/long.json" <<'EOF2'
{"model_type":"llama","hidden_size":2048,"intermediate_size":5632,"num_hidden_layers":22,"num_attention_heads":32,
 "num_key_value_heads":4,"vocab_size":32000,"max_position_embeddings":33554432}
EOF2
expect 2 "33554432-token prefill cannot be counted for the default KV budget" --model "$tmp/long.json" --device h200 --requests 3
expect 2 "cannot be counted" --size --model "$tmp/long.json" --device h200 --context 1000
expect 0 "" --model "$tmp/long.json" --device h200 --requests 3 --max-len 100000
has "$tmp/out" "pool budget 1"
expect 0 "" --size --model "$tmp/long.json" --kv-budget 1GiB --context 1000
# weights that fill the device are refused with both sizes in bytes and binary units
expect 2 "416 PiB vs 40.0 GiB" --model "$tmp/max.json" --requests 3

# A simulation: every policy on the same requests, the record with its kv section.
TINY=(--model tinyllama-1.1b --device a100-40gb --kv-budget 64MiB --requests 300 --rate 20)
expect 0 "" "${TINY[@]}" --policy reserve,pow2,oracle,paged:16 -o "$tmp/rec.json"
for p in reserve pow2 oracle paged:16; do has "$tmp/out" "$p "; done
has "$tmp/out" "token%"
has "$tmp/out" "TTFT p99"
has "$tmp/out" "pool budget 64.0 MiB" # 64 * 2^20 B
[ -s "$tmp/rec.json" ] && ok "record written" || fail "no record at -o"
if command -v python3 >/dev/null; then
  python3 - "$tmp/rec.json" <<'PY' && ok "record: figures recompute" || fail "record figures do not recompute"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["format"] == "xfprof-record" and r["kind"] == "kv", r["kind"]
kv = r["kv"]
assert kv["bytes_per_token"] == 22528, kv["bytes_per_token"]   # 2 * 22 * 4 * 64 * 2
assert kv["budget_bytes"] == 64 * 2**20
cats = ["token_states", "reserved", "internal", "external", "free"]
pol = {p["policy"]: p for p in kv["policies"]}
assert list(pol) == ["reserve", "pow2", "oracle", "paged:16"]
for name, p in pol.items():
    assert abs(sum(p[c] for c in cats) - 1) < 1e-9, name
    assert p["n_slots"] == (64 * 2**20 // 22528) // max(p["block_tokens"], 1) * max(p["block_tokens"], 1), name
    s = p["series"]
    T = sum(s["dt_s"])
    assert abs(T - p["duration_s"]) < 1e-6 * T, name
    for c in cats:  # time averages from the series
        avg = sum(a * b for a, b in zip(s[c], s["dt_s"])) / T
        assert abs(avg - p[c]) < 1e-9, (name, c, avg, p[c])
        assert abs(p["bytes"][c] - p[c] * p["pool_bytes"]) < 1e-6 * p["pool_bytes"]
    assert abs(p["tokens_per_s"] - p["output_tokens"] / p["duration_s"]) < 1e-9 * p["tokens_per_s"]
    assert p["n_completed"] == 300
    t = sorted(p["requests"]["ttft_s"])
    import math
    assert t[math.ceil(0.99 * len(t)) - 1] == p["ttft_s"]["p99"], name
# paging keeps more of the pool in token states than reserving the model's context
assert pol["paged:16"]["token_states"] > pol["oracle"]["token_states"] > pol["reserve"]["token_states"]
assert pol["reserve"]["internal"] > 0.3
PY
else
  echo "skip: no python3 to recompute the record"
fi

# The same seed gives the same results; another seed other requests.
expect 0 "" "${TINY[@]}" --policy paged:16 --format json -o "$tmp/a.json"
expect 0 "" "${TINY[@]}" --policy paged:16 --format json -o "$tmp/b.json"
strip() { sed 's/"created":"[^"]*"//; s/"trace_file":"[^"]*"//' "$1"; }
if diff <(strip "$tmp/a.json") <(strip "$tmp/b.json") >/dev/null; then ok "deterministic"; else fail "two runs with one seed differ"; fi
expect 0 "" "${TINY[@]}" --policy paged:16 --format json --seed 7 -o "$tmp/c.json"
if diff <(strip "$tmp/a.json") <(strip "$tmp/c.json") >/dev/null; then fail "seed has no effect"; else ok "seed changes the requests"; fi
expect 0 "" "${TINY[@]}" --policy oracle --format json
has "$tmp/out" '"format":"xfprof-record"'
has "$tmp/out" '"token_states":'

# Traces, CSV and JSONL: the same requests, the same results.
expect 0 "" --model tinyllama-1.1b --kv-budget 64MiB --trace-file "$D/trace.csv" --policy paged:16 --format json -o "$tmp/t1.json"
expect 0 "" --model tinyllama-1.1b --kv-budget 64MiB --trace-file "$D/trace.jsonl" --policy paged:16 --format json -o "$tmp/t2.json"
if diff <(strip "$tmp/t1.json") <(strip "$tmp/t2.json") >/dev/null; then ok "csv = jsonl"; else fail "csv and jsonl traces differ"; fi
has "$tmp/t1.json" '"n_completed":10'

# --preempt: recompute makes progress where wait deadlocks (4 blocks, 4 requests that each need 4).
SMALL=(--model tinyllama-1.1b --kv-budget $((22528 * 64)) --requests 4 --prompt-dist fixed:16 --output-dist fixed:40 --policy paged:16)
expect 0 "" "${SMALL[@]}" --preempt recompute
expect 2 "deadlock" "${SMALL[@]}" --preempt wait

# Shares of the held memory beside the pool's, labelled; `xfprof show` reprints the same table.
expect 0 "" --model tinyllama-1.1b --kv-budget 64MiB --requests 50 --policy reserve,paged:16 -o "$tmp/held.json"
cp "$tmp/out" "$tmp/kv_table.txt"
has "$tmp/kv_table.txt" "time-averaged shares (% of the pool)"
has "$tmp/kv_table.txt" "(% of held"
# held token% = token / (1 - free) of the pool's row, for every policy
if awk '/% of the pool/ {s = 1; next} s == 1 && $1 ~ /^(reserve|paged)/ {tok[$1] = $4; fr[$1] = $8} /% of held/ {s = 2; next}
     s == 2 && $1 == "policy" {next} s == 2 && $1 ~ /^(reserve|paged)/ {n++; want = 100 * tok[$1] / (100 - fr[$1]);
       d = $4 - want; if (d < -0.11 || d > 0.11) bad = 1} /^Throughput/ {s = 3} END {exit !(n == 2 && !bad)}' "$tmp/kv_table.txt"; then
  ok "held shares = pool shares / (1 - free)"
else fail "held shares do not follow from the pool's: $(cat "$tmp/kv_table.txt")"; fi
if timeout 60 "$XF" show "$tmp/held.json" >"$tmp/show.txt" 2>"$tmp/err" && diff "$tmp/kv_table.txt" "$tmp/show.txt" >/dev/null; then
  ok "show reprints the kv table"
else fail "xfprof show of a kv record differs from what kv printed: $(diff "$tmp/kv_table.txt" "$tmp/show.txt" | head -20)"; fi

# Bad input.
expect 2 "positive" "${TINY[@]}" --rate 0
expect 2 "positive" "${TINY[@]}" --rate -3
expect 2 "not a number" "${TINY[@]}" --rate fast
expect 2 "unknown KV policy 'buddy'" "${TINY[@]}" --policy reserve,buddy
expect 2 "paged:" "${TINY[@]}" --policy paged:0
expect 2 "unknown distribution" "${TINY[@]}" --prompt-dist zipf:1.2
expect 2 "holds no token" --model tinyllama-1.1b --kv-budget 1KiB
# 1 MiB = 46 tokens = 2 blocks of 16: the longer requests can never run
expect 2 "never run" --model tinyllama-1.1b --kv-budget 1MiB --policy paged:16
expect 2 "bad_trace.csv:4:" --model tinyllama-1.1b --kv-budget 64MiB --trace-file "$D/bad_trace.csv"
expect 4 "No such file" --model tinyllama-1.1b --trace-file "$tmp/none.csv"
expect 2 "does not go with" --trace-file "$D/trace.csv" --rate 2
expect 2 "recompute or wait" "${TINY[@]}" --preempt drop
expect 2 "go with --size" --context 128
expect 2 "unknown option" --frobnicate
expect 2 "table or json" --format xml
expect 2 "" --model no-such-model

if [ "$fails" -ne 0 ]; then echo "$fails failure(s)"; exit 1; fi
echo "all kv CLI checks passed"
