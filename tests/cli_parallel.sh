#!/usr/bin/env bash
# predict / sweep --tp --pp from the outside: the split's table, record and CSV, the refusals
# (exit 2 with a message saying why), and a sweep over splits.
set -u
XF=${1:?usage: cli_parallel.sh path/to/xfprof}
. "$(dirname "$0")/lib.sh" # $tmp/$TMP (removed at exit) and the helpers

# Refused, saying why.
expect 2 "32 attention heads do not split evenly over 3 devices" -- predict --model llama-2-7b --tp 3
expect 2 "give a --tp that divides 32: 1, 2, 4, 8, 16, 32" -- predict --model llama-2-7b --tp 3
expect 2 "more than the 4 of --gpus" -- predict --model llama-2-70b --tp 4 --pp 2 --gpus 4
expect 2 "with --pp 1" -- predict --model llama-2-7b --micro-batches 2 --batch 2
expect 2 "does not split into 3 equal micro-batches" -- predict --model llama-2-7b --pp 2 --micro-batches 3 --batch 4
expect 2 "8 experts do not split evenly" -- predict --model mixtral-8x7b --tp 16
expect 2 "has 32 layers" -- predict --model llama-2-7b --pp 33
expect 2 "--tp" -- predict --model llama-2-7b --tp 0
expect 2 "--tp" -- predict --model llama-2-7b --tp x
expect 2 "not implemented" -- sweep --model stories15m --tp 2 --prompt 4 --gen 2
cat >"$tmp/nolink.json" <<'J'
{"format": "xfprof-devices", "version": 1, "devices": [{"name": "bare", "kind": "gpu", "memory_bytes": 85899345920,
 "bandwidth_Bps": 3.35e12, "peak_flops": {"fp32": 67e12, "tensor16": 989e12}}]}
J
expect 2 "no link between devices" -- predict --model llama-2-7b --device-file "$tmp/nolink.json" --tp 2
sed 's/"peak_flops"/"link": {"name": "x", "bandwidth_Bps": -1}, "peak_flops"/' "$tmp/nolink.json" >"$tmp/badlink.json"
expect 2 "link" -- predict --model llama-2-7b --device-file "$tmp/badlink.json"

# llama-2-70b over 8 H100s: the split, the collectives, memory per GPU.
"$XF" predict --model llama-2-70b --device h100-sxm --tp 8 --batch 16 -o "$tmp/tp8.json" >"$tmp/out" 2>"$tmp/err" ||
  fail "predict --tp 8 exited $?: $(head -c 300 "$tmp/err")"
grep -q "split: tp 8 x pp 1 = 8 devices, link nvlink4 450 GB/s" "$tmp/out" || fail "no split line: $(grep split "$tmp/out")"
grep -q "^decode   all_reduce " "$tmp/out" || fail "no all_reduce row"
grep -q "collectives: " "$tmp/out" || fail "no collectives line"
grep -q "memory: weights 16.1 GiB" "$tmp/out" || fail "llama-2-70b at tp 8 holds 16.1 GiB of weights per GPU: $(grep '^memory' "$tmp/out")"
"$XF" show "$tmp/tp8.json" >"$tmp/show" 2>"$tmp/err" || fail "show of a split record exited $?: $(head -c 300 "$tmp/err")"
grep -q "split: tp 8" "$tmp/show" || fail "show lost the split"
"$XF" report "$tmp/tp8.json" -o "$tmp/tp8.html" 2>"$tmp/err" || fail "report exited $?: $(head -c 300 "$tmp/err")"
grep -q "communication-bound" "$tmp/tp8.html" || fail "the HTML report has no communication-bound class"
"$XF" show "$tmp/tp8.json" --format csv >"$tmp/csv" || fail "csv"
head -1 "$tmp/csv" | grep -q ",tp,pp,comm_bytes," || fail "csv header lacks tp,pp,comm_bytes"
grep -q ",all_reduce,.*,8,1," "$tmp/csv" || fail "csv all_reduce rows lack tp 8"
# tied embeddings on more than one stage, KV heads replicated (said so)
expect 0 "replicated" -- predict --model tinyllama-1.1b --tp 8
expect 0 "" -- predict --model llama-3.2-1b --pp 4 --micro-batches 2 --batch 4
grep -q "bubble 60.0%" "$tmp/out" || fail "pp 4, 2 micro-batches: bubble 3/5: $(grep pipeline "$tmp/out")"
expect 0 "expert parallel" -- predict --model mixtral-8x7b --tp 4
grep -q "all_to_all" "$tmp/out" || fail "mixtral --tp 4 has no all_to_all"

# A sweep over splits: one point per (tp, pp), the one-device point as before.
"$XF" sweep --predict --model llama-2-70b --tp 1,2,8 --pp 1,2 --batch 1 --jsonl "$tmp/s.jsonl" -o "$tmp/s.json" >/dev/null 2>"$tmp/err" ||
  fail "sweep over splits exited $?: $(head -c 300 "$tmp/err")"
[ "$(wc -l <"$tmp/s.jsonl")" -eq 6 ] || fail "sweep: $(wc -l <"$tmp/s.jsonl") points, expected 6"
grep -c '"tp=8;pp=2' "$tmp/s.jsonl" >/dev/null || grep -q 'tp=8;pp=2' "$tmp/s.jsonl" || fail "sweep keys lack tp=8;pp=2"
[ "$(grep -c 'tp=' "$tmp/s.jsonl")" -eq 5 ] || fail "sweep: the one-device point's key must stay as before"

[ "$fails" -eq 0 ] && echo "cli_parallel: all passed"
exit $((fails > 0))
