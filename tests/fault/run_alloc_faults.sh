#!/usr/bin/env bash
# Allocation faults (issue 8): for each command of a small run, make allocation N fail, for every N
# from 1 to the number of allocations the command makes (or every s-th N when that number exceeds
# XF_FAULT_MAX, default 300; XF_FAULT_MAX=0 tries every N; XF_FAULT_ONLY=regex picks checks by
# name), and check that the command
#   - succeeds, or exits 4 with "out of memory" on stderr;
#   - is not killed by a signal, hangs not, and has no ASan / UBSan / LeakSanitizer report;
#   - leaves each output file (-o, --report, --trace) either absent or complete and valid, and no
#     temporary file beside it.
# $1: an xfprof binary built with -DXFPROF_FAULT_ALLOC=ON -DXFPROF_SANITIZE=ON (tests/fault/fault_alloc.c).
# Allocations made inside libc, OpenBLAS and libgomp are not counted (out of reach of --wrap).
set -uo pipefail
xf=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
max=${XF_FAULT_MAX:-300}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export XFPROF_DATA_DIR=${XFPROF_DATA_DIR:-$(dirname "$xf")/data}
export XFPROF_REEXEC=1 OMP_WAIT_POLICY=passive OMP_NUM_THREADS=2 # no restart: one process, one count
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1:exitcode=66
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=67
export LSAN_OPTIONS=exitcode=68
tiny=$here/tiny_config.json

# Fixed inputs, made once with no fault: a predict record and the machine file (so `run` does not
# measure the ceilings, which takes seconds).
"$xf" predict --model stories15m --format json -o "$work/ref.json" 2>/dev/null || { echo "setup: predict failed"; exit 1; }
"$xf" kv --model stories15m --requests 20 --format json -o "$work/kvref.json" >/dev/null 2>&1 || { echo "setup: kv failed"; exit 1; }
cat > "$work/machine.json" <<'EOF'
{"format":"xfprof-devices","version":1,"devices":[{"name":"cpu","kind":"cpu","description":"fault test",
 "memory_bytes":17179869184,"bandwidth_Bps":1e10,"cache_bytes":33554432,"cache_bandwidth_Bps":4e10,
 "peak_flops":{"fp32":1e11}}]}
EOF
if ! XFPROF_MACHINE_FILE=$work/machine.json "$xf" run --model "$tiny" --batch 1 --prompt 2 --gen 1 --reps 1 --warmup 0 >/dev/null 2>"$work/setup.err"; then
  # the hand-written machine file is not accepted: measure one quickly
  "$xf" machine --quick -o "$work/machine.json" >/dev/null 2>&1 || { echo "setup: machine failed"; cat "$work/setup.err"; exit 1; }
fi
export XFPROF_MACHINE_FILE=$work/machine.json

# valid FILE KIND: the file is absent, or complete (KIND json: parses; html: ends with </html>).
valid() {
  local f=$1 kind=$2
  [ -e "$f" ] || return 0
  case $kind in
    json) python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$f" 2>/dev/null ;;
    html) tail -c 64 "$f" | grep -q '</html>' ;;
    jsonl) python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' "$f" 2>/dev/null ;;
  esac
}

failures=0
total_points=0
# The injected failures run side by side, one a CPU (XF_FAULT_JOBS overrides): each in its own
# output folder, its verdict in $work/pt/N, read back in N's order.
jobs_max=${XF_FAULT_JOBS:-$(nproc)}
. "$here/../../scripts/jobs.sh"

# point N OUTPUTS CMD...: the command with allocation N failing, in a fresh folder; writes "ok",
# "oom", or "bad WHY" and its stderr to $work/pt/N.
point() {
  local n=$1 outs=$2; shift 2
  local out=$work/out.$n rc why="" o
  rm -rf "$out"; mkdir -p "$out"
  (cd "$out" && eval "${PREP:-:}")
  XF_FAIL_ALLOC_AT=$n timeout 120 "$xf" "${@//@OUT@/$out}" >/dev/null 2>"$out.err"
  rc=$?
  if [ $rc -ge 124 ]; then why="killed or hung (exit $rc)"
  elif [ $rc -ge 66 ] && [ $rc -le 68 ] || grep -qE "Sanitizer|runtime error:" "$out.err"; then why="sanitizer report (exit $rc)"
  elif [ $rc -ne 0 ] && { [ $rc -ne 4 ] || ! grep -qi "out of memory" "$out.err"; }; then why="exit $rc without an out-of-memory message"
  fi
  if [ -z "$why" ]; then
    for o in $outs; do
      valid "$out/${o%%:*}" "${o##*:}" || why="half-written ${o%%:*}"
      [ $rc -eq 0 ] && [ ! -e "$out/${o%%:*}" ] && why="exit 0 but no ${o%%:*}"
    done
    if ls "$out" | grep -q '\.tmp'; then why="temporary file left: $(ls "$out" | grep '\.tmp' | head -1)"; fi
  fi
  if [ -n "$why" ]; then { echo "bad $why"; cat "$out.err"; } >"$work/pt/$n"
  elif [ $rc -eq 0 ]; then echo ok >"$work/pt/$n"
  else echo oom >"$work/pt/$n"; fi
  rm -rf "$out" "$out.err"
}

# check NAME OUTPUTS -- ARGS...; OUTPUTS: space-separated file:kind (paths under the run's folder, @OUT@).
# PREP (optional): a command run in a fresh folder before each run (e.g. an earlier JSONL to resume).
check() {
  local name=$1 outs=$2; shift 3
  [[ -n ${XF_FAULT_ONLY:-} && ! $name =~ $XF_FAULT_ONLY ]] && return # XF_FAULT_ONLY=regex: those checks only
  local out=$work/out
  rm -rf "$out"; mkdir -p "$out"
  (cd "$out" && eval "${PREP:-:}")
  XF_ALLOC_COUNT_FILE=$work/count timeout 120 "$xf" "${@//@OUT@/$out}" >/dev/null 2>"$work/err"
  local rc=$? count
  count=$(cat "$work/count" 2>/dev/null || echo 0)
  if [ $rc -ne 0 ] || [ "$count" -eq 0 ]; then
    echo "FAIL $name: does not run without faults (rc $rc, $count allocations)"; sed 's/^/    /' "$work/err" | head -20
    failures=$((failures + 1)); return
  fi
  local stride=1 cap=${CAP:-$max}
  if [ "$cap" -gt 0 ] && [ "$count" -gt "$cap" ]; then stride=$(((count + cap - 1) / cap)); fi
  local points=0 oom=0 ok=0 bad=0 n v
  rm -rf "$work/pt"; mkdir -p "$work/pt"
  for ((n = 1; n <= count; n += stride)); do
    jobs_slot "$jobs_max"
    point "$n" "$outs" "$@" &
  done
  wait
  for ((n = 1; n <= count; n += stride)); do
    points=$((points + 1))
    v=$(head -1 "$work/pt/$n" 2>/dev/null || echo "bad no verdict")
    case $v in
      ok) ok=$((ok + 1)) ;;
      oom) oom=$((oom + 1)) ;;
      *)
        bad=$((bad + 1))
        if [ $bad -le 5 ]; then
          echo "FAIL $name: allocation $n of $count: ${v#bad }"; tail -n +2 "$work/pt/$n" 2>/dev/null | sed 's/^/    /' | head -25
        fi ;;
    esac
  done
  total_points=$((total_points + points))
  printf '%-14s %6d allocations, %5d failed in turn (every %d): %5d out-of-memory exits, %5d succeeded, %d bad\n' \
    "$name" "$count" "$points" "$stride" "$oom" "$ok" "$bad"
  [ $bad -eq 0 ] || failures=$((failures + 1))
}

check predict "" -- predict --model stories15m
check predict-json "p.json:json" -- predict --model stories15m --format json -o @OUT@/p.json
check kv "" -- kv --model stories15m --requests 20
check kv-json "k.json:json" -- kv --model stories15m --requests 20 --format json -o @OUT@/k.json
check kv-trace "" -- kv --model stories15m --max-len 4096 --trace-file "$here/../data/kv/trace.jsonl" --policy reserve,paged:16
check show "" -- show "$work/ref.json"
check show-kv "" -- show "$work/kvref.json"
check report "r.html:html" -- report "$work/ref.json" -o @OUT@/r.html
check compare "" -- compare "$work/ref.json" "$work/ref.json"
check run "o.json:json t.json:json r.html:html" -- run --model "$tiny" --batch 1 --prompt 4 --gen 2 --reps 1 --warmup 0 \
  -o @OUT@/o.json --trace @OUT@/t.json --report @OUT@/r.html
# sweep --resume reads the finished points back (sweep JSONL lines) and appends the rest.
"$xf" sweep --predict --model stories15m --batch 1,2 --prompt 16 --gen 4 --jsonl "$work/s2.jsonl" >/dev/null 2>&1 &&
  head -1 "$work/s2.jsonl" >"$work/part.jsonl" || { echo "setup: sweep failed"; exit 1; }
PREP='cp "$work/part.jsonl" s.jsonl' check sweep-resume "s.jsonl:jsonl o.json:json" -- sweep --predict --model stories15m \
  --batch 1,2 --prompt 16 --gen 4 --jsonl @OUT@/s.jsonl --resume -o @OUT@/o.json
# merge reads two shards' lines and writes the record and the merged lines (both atomic).
for i in 1 2; do "$xf" sweep --predict --model stories15m --batch 1,2 --prompt 16 --gen 4 --shard $i/2 --jsonl "$work/sh$i.jsonl" \
  >/dev/null 2>&1 || { echo "setup: sweep --shard failed"; exit 1; }; done
check merge "m.json:json m.jsonl:jsonl" -- merge "$work/sh2.jsonl" "$work/sh1.jsonl" -o @OUT@/m.json --jsonl @OUT@/m.jsonl
check run-system "" -- run --model "$tiny" --batch 2 --prompt 4 --gen 2 --reps 1 --warmup 0 --kv-alloc system --no-probes
check run-noprobes "" -- run --model "$tiny" --batch 1 --prompt 4 --gen 2 --reps 1 --warmup 0 --no-probes
check run-tokens "tk.jsonl:jsonl o.json:json" -- run --model "$tiny" --batch 2 --prompt 4 --gen 3 --reps 1 --warmup 0 \
  --save-tokens @OUT@/tk.jsonl --save-logits -o @OUT@/o.json
# stories15m takes a second a run under ASan: fewer points (the tiny config above covers every N)
CAP=${XF_FAULT_MAX_SLOW:-40} check run-small "" -- run --model stories15m --batch 1 --prompt 4 --gen 2 --reps 1 --warmup 0

echo "alloc faults: $total_points injected failures; $failures command(s) with problems"
[ $failures -eq 0 ]
