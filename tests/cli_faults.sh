#!/usr/bin/env bash
# Disk faults (issue 8): every file xfprof writes (record, HTML report, Chrome trace, kv record,
# compare output, sweep record and sweep JSONL line) is written
#   1. to a full device (/dev/full, written in place, never renamed over),
#   2. to an unwritable path (a missing folder, a path under a regular file, a folder),
#   3. over an earlier file on a "full disk": RLIMIT_FSIZE (ulimit -f) with SIGXFSZ ignored makes
#      every write past 1 KiB fail with EFBIG, as a full file system fails with ENOSPC,
# and must give exit 4 with a message naming the file, leave the earlier file byte for byte, and
# leave no temporary file behind. $1: the xfprof binary.
set -uo pipefail
XF=$1
. "$(dirname "$0")/lib.sh" # $tmp/$TMP (removed at exit) and the helpers
export XFPROF_DATA_DIR=${XFPROF_DATA_DIR:-$(dirname "$XF")/data}
src=${XF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
tiny=$src/tests/fault/tiny_config.json
export XFPROF_REEXEC=1 OMP_WAIT_POLICY=passive
# `run` reads the ceilings from a machine file instead of measuring them (seconds).
cat >"$tmp/machine.json" <<'EOF'
{"format":"xfprof-devices","version":1,"devices":[{"name":"cpu","kind":"cpu","description":"disk fault test",
 "memory_bytes":17179869184,"bandwidth_Bps":1e10,"cache_bytes":33554432,"cache_bandwidth_Bps":4e10,
 "peak_flops":{"fp32":1e11}}]}
EOF
export XFPROF_MACHINE_FILE=$tmp/machine.json

# Inputs made once.
"$XF" predict --model stories15m --format json -o "$tmp/rec.json" 2>/dev/null || { echo "setup: predict failed"; exit 1; }
[ -c /dev/full ] || { echo "SKIP: no /dev/full"; exit 77; }

# run_case NAME ARGS...: ARGS contain @F@ where the output path goes. Runs the three faults.
run_case() {
  local name=$1; shift
  local args rc
  # 0. with a good path it works, and that file becomes the "earlier file" of fault 3
  rm -f "$tmp/good"
  "$XF" "${@//@F@/$tmp/good}" >/dev/null 2>"$tmp/err"
  rc=$?
  if [ $rc -ne 0 ] || [ ! -s "$tmp/good" ]; then fail "$name: does not write a good path (exit $rc): $(head -3 "$tmp/err")"; return; fi
  # 1. /dev/full
  "$XF" "${@//@F@//dev/full}" >/dev/null 2>"$tmp/err"
  rc=$?
  [ $rc -eq 4 ] || fail "$name -> /dev/full: exit $rc, expected 4"
  grep -q "/dev/full" "$tmp/err" || fail "$name -> /dev/full: message does not name the file: $(head -2 "$tmp/err")"
  grep -qi "no space" "$tmp/err" || fail "$name -> /dev/full: message does not say why: $(head -2 "$tmp/err")"
  [ -c /dev/full ] || { fail "$name: /dev/full is no longer a device"; exit 1; }
  # 2. unwritable paths
  local bad
  : >"$tmp/afile"
  mkdir -p "$tmp/afolder"
  for bad in "$tmp/nodir/out" "$tmp/afile/out" "$tmp/afolder"; do
    "$XF" "${@//@F@/$bad}" >/dev/null 2>"$tmp/err"
    rc=$?
    [ $rc -eq 4 ] || fail "$name -> $bad: exit $rc, expected 4: $(head -2 "$tmp/err")"
    grep -q "$bad" "$tmp/err" || fail "$name -> $bad: message does not name the file: $(head -2 "$tmp/err")"
  done
  [ -d "$tmp/afolder" ] && [ -z "$(ls -A "$tmp/afolder")" ] || fail "$name: the folder given as output changed"
  # 3. full disk over an earlier file
  cp "$tmp/good" "$tmp/earlier"
  cp "$tmp/good" "$tmp/keep"
  (trap '' XFSZ; ulimit -f 1; exec "$XF" "${@//@F@/$tmp/earlier}") >/dev/null 2>"$tmp/err"
  rc=$?
  [ $rc -eq 4 ] || fail "$name on a full disk: exit $rc, expected 4: $(head -2 "$tmp/err")"
  grep -q "$tmp/earlier" "$tmp/err" || fail "$name on a full disk: message does not name the file: $(head -2 "$tmp/err")"
  cmp -s "$tmp/earlier" "$tmp/keep" || fail "$name on a full disk: the earlier file changed"
  if ls "$tmp" | grep -q '\.tmp'; then fail "$name: temporary file left: $(ls "$tmp" | grep '\.tmp')"; rm -f "$tmp"/*.tmp*; fi
  echo "ok: $name"
}

run_case "predict -o" predict --model stories15m --format json -o @F@
run_case "predict --report" predict --model stories15m --report @F@
run_case "predict --trace" predict --model stories15m --trace @F@
run_case "run -o" run --model "$tiny" --batch 1 --prompt 4 --gen 2 --reps 1 --warmup 0 -o @F@
run_case "run --report" run --model "$tiny" --batch 1 --prompt 4 --gen 2 --reps 1 --warmup 0 --report @F@
run_case "run --trace" run --model "$tiny" --batch 1 --prompt 4 --gen 2 --reps 1 --warmup 0 --trace @F@
run_case "kv -o" kv --model stories15m --requests 20 --format json -o @F@
run_case "report -o" report "$tmp/rec.json" -o @F@ --no-charts
run_case "compare -o" compare "$tmp/rec.json" "$tmp/rec.json" --format json -o @F@
run_case "sweep -o" sweep --predict --model stories15m --batch 1,2 --prompt 16 --gen 4 -o @F@

# Sweep JSONL: lines are appended as points finish. A failed append keeps every earlier line.
sw=(sweep --predict --model stories15m --batch 1,2,4 --prompt 16 --gen 4)
"$XF" "${sw[@]}" --jsonl "$tmp/s.jsonl" >/dev/null 2>"$tmp/err" || fail "sweep --jsonl: exit $?: $(head -2 "$tmp/err")"
n_all=$(wc -l <"$tmp/s.jsonl")
[ "$n_all" -eq 3 ] || fail "sweep --jsonl wrote $n_all lines, expected 3"
head -1 "$tmp/s.jsonl" >"$tmp/part.jsonl"
cp "$tmp/part.jsonl" "$tmp/part.keep"
"$XF" "${sw[@]}" --jsonl /dev/full >/dev/null 2>"$tmp/err"
rc=$?
[ $rc -eq 4 ] || fail "sweep --jsonl /dev/full: exit $rc, expected 4: $(head -2 "$tmp/err")"
grep -q "/dev/full" "$tmp/err" || fail "sweep --jsonl /dev/full: message does not name the file: $(head -2 "$tmp/err")"
"$XF" "${sw[@]}" --jsonl "$tmp/nodir/s.jsonl" >/dev/null 2>"$tmp/err"
rc=$?
[ $rc -eq 4 ] || fail "sweep --jsonl in a missing folder: exit $rc, expected 4: $(head -2 "$tmp/err")"
# The first line is over 1 KiB: with the file-size limit below it every append fails.
(trap '' XFSZ; ulimit -f 1; exec "$XF" "${sw[@]}" --jsonl "$tmp/part.jsonl" --resume) >/dev/null 2>"$tmp/err"
rc=$?
[ $rc -eq 4 ] || fail "sweep --resume on a full disk: exit $rc, expected 4: $(head -2 "$tmp/err")"
grep -q "part.jsonl" "$tmp/err" || fail "sweep --resume on a full disk: message does not name the file: $(head -2 "$tmp/err")"
cmp -s "$tmp/part.jsonl" "$tmp/part.keep" || fail "sweep --resume on a full disk: the earlier lines changed"
# ... and once there is room, --resume completes it: the same 3 points, none doubled.
"$XF" "${sw[@]}" --jsonl "$tmp/part.jsonl" --resume >/dev/null 2>"$tmp/err" || fail "sweep --resume after the full disk: exit $?: $(head -2 "$tmp/err")"
[ "$(wc -l <"$tmp/part.jsonl")" -eq 3 ] || fail "sweep --resume after the full disk: $(wc -l <"$tmp/part.jsonl") lines, expected 3"
echo "ok: sweep --jsonl"

# Sizes: the largest config the HF reader accepts (hidden 2^20, d_ff 2^24, 4096 layers, 16384 heads
# and KV heads of head_dim 64, vocab 2^24, context 2^27): weights 2.3e17 parameters (9.4e17 B at
# fp32), KV 2 * 4096 * 16384 * 64 * 2 = 2^34 B per fp16 token. Refused before anything is
# allocated, with the sizes, wherever they would not fit a 64-bit count or the memory.
cat >"$tmp/max.json" <<'EOF2'
{"model_type":"llama","hidden_size":1048576,"intermediate_size":16777216,"num_hidden_layers":4096,
 "num_attention_heads":16384,"num_key_value_heads":16384,"vocab_size":16777216,
 "max_position_embeddings":134217728}
EOF2
# expect_size CODE PATTERN ARGS...: exit CODE, stderr matches every |-separated word of PATTERN.
expect_size() {
  local code=$1 pat=$2; shift 2
  "$XF" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$? w what="$*"
  [ $rc -eq "$code" ] || { fail "$what: exit $rc, expected $code: $(head -2 "$tmp/err")"; return; }
  local IFS='|'
  for w in $pat; do grep -qi -- "$w" "$tmp/err" || fail "$what: message lacks '$w': $(head -2 "$tmp/err")"; done
}
# predict only computes: batch 2^20 x 2^24 tokens of 2^34 B is 2^78 B of KV, over 64 bits.
expect_size 2 "64-bit|weights|KV 3.0|activations" predict --model "$tmp/max.json" --batch 1048576 --prompt 16777216
expect_size 2 "64-bit" sweep --predict --model "$tmp/max.json" --batch 1,1048576 --prompt 16777216 --gen 1
# ... at batch 1 it fits 64 bits: predicted, and the record reads back (params 2.3e17).
expect_size 0 "" predict --model "$tmp/max.json" --format json -o "$tmp/maxrec.json"
expect_size 0 "" show "$tmp/maxrec.json"
# run: weights alone are far beyond this machine: refused by model_mem_of, sizes named.
expect_size 2 "weights|KV|activations|nothing was allocated" run --model "$tmp/max.json" --reps 1 --warmup 0
expect_size 2 "overflow" run --model "$tmp/max.json" --batch 4096 --prompt 1048576 --gen 1 --reps 1 --warmup 0
# TinyLlama's KV at batch 4096 x 2001 tokens: 4096 * 2001 * 2*22*4*64*4 B = 369 GB, over any test machine.
expect_size 2 "KV|nothing was allocated" run --model tinyllama-1.1b --batch 4096 --prompt 2000 --gen 1 --reps 1 --warmup 0
# kv: the default budget of a device leaves nothing; a budget too small for one token.
expect_size 2 "weights (4.684e+17 bytes|a100-40gb (4.295e+10 bytes)" kv --model "$tmp/max.json" --requests 3
expect_size 2 "weights (4.684e+17 bytes|activations of one 4096-token prefill" kv --size --model "$tmp/max.json" --device h100-sxm --max-len 4096
expect_size 2 "17179869184" kv --model "$tmp/max.json" --kv-budget 1GiB --requests 3
expect_size 2 "too large" kv --model "$tmp/max.json" --kv-budget 9000000TB --requests 3
echo "ok: sizes"

if [ "$fails" -ne 0 ]; then echo "$fails check(s) failed"; exit 1; fi
echo "cli_faults: all checks passed"
