#!/usr/bin/env bash
# The project's own regression gate: a small sweep compared against the baseline records committed
# in bench/baseline/, in a way that cannot flake on a noisy shared machine:
#   - predicted sweeps (the cost model: times, FLOPs, bytes, op counts) are deterministic and are
#     compared strictly: any change counts (--exact-threshold 0); an increase fails the gate;
#   - a measured sweep (when this build has `xfprof run`, and XF_GATE_MEASURED is not 0) is compared
#     against the committed measured baseline for what is deterministic in it (FLOPs, bytes, op
#     set) -- never for times measured on another machine;
#   - the deterministic measured gate (when the build has the callgrind probe and valgrind is
#     installed): `run --callgrind` per-op instruction counts, compared exactly (--metric
#     instructions, threshold 0): this build twice must give identical counts, and with
#     XF_GATE_BASE=BASE_XFPROF every op of this build against the base build's;
#   - with XF_GATE_BASE=BASE_XFPROF, the timed gate: `compare --ab BASE_XFPROF XFPROF` at compare's
#     defaults (interleaved rounds, paired, a 95% interval beyond the threshold; docs/ci.md).
#     Without a base build there is nothing to time against: the old run-against-run of one build
#     at a 200% threshold could never see a regression, and an A/A of this build at the A/B gate's
#     defaults would fail about 1 run in 20-40 by design (its false-alarm rate), so it is not run.
#
# usage: bench/ci_gate.sh [--update] XFPROF [WORKDIR]
#   --update   rewrite bench/baseline/ from this build (after an intended cost-model change)
#   XF_GATE_BASE=PATH  the base build (another checkout's build/xfprof): the A/B and count gates
#   XF_GATE_AB=0       with XF_GATE_BASE: leave the timed A/B gate out (tests/cli_gate.sh)
# exit: 0 pass, 1 regression, 2 bad input (a baseline missing or unreadable), 4 other failure.
# Test only: XFPROF_TEST_SLOW_OP=op:factor (honoured by `xfprof sweep`) slows one op, so
# tests/cli_gate.sh can show that the gate catches it.
set -u
update=0
if [ "${1:-}" = "--update" ]; then update=1; shift; fi
XF=${1:?usage: bench/ci_gate.sh [--update] path/to/xfprof [workdir]}
root=$(cd "$(dirname "$0")/.." && pwd)
base="$root/bench/baseline"
work=${2:-$(mktemp -d)}
mkdir -p "$work"
status=0

# The predicted sweeps: a small model over a grid, and one GQA point of a 8B model.
sweeps=(
  "stories15m|sweep --predict --model stories15m --device h100-sxm --batch 1,16 --prompt 128,512 --gen 32 --wdtype bf16,int8"
  "llama-3-8b|sweep --predict --model llama-3-8b --device h100-sxm --batch 16 --prompt 512 --gen 32 --kvdtype fp16"
)
for s in "${sweeps[@]}"; do
  name=${s%%|*}
  read -r -a args <<<"${s#*|}"
  out="$work/predict-$name.json"
  if ! "$XF" "${args[@]}" -o "$out" 2>"$work/sweep-$name.err"; then
    echo "ci_gate: the sweep for $name failed: $(cat "$work/sweep-$name.err")"
    exit 4
  fi
  if [ $update -eq 1 ]; then
    cp "$out" "$base/predict-$name.json"
    echo "ci_gate: baseline bench/baseline/predict-$name.json updated"
    continue
  fi
  "$XF" compare "$base/predict-$name.json" "$out" --metric time,bytes,flops,ttft,tpot,tokens_per_s --exact-threshold 0 \
    >"$work/compare-$name.txt" 2>&1
  rc=$?
  echo "ci_gate: predicted $name: $(tail -n 1 "$work/compare-$name.txt") (exit $rc)"
  if [ $rc -ne 0 ]; then
    cat "$work/compare-$name.txt"
    [ $rc -eq 1 ] && echo "ci_gate: if this change of the cost model is intended, run: bash bench/ci_gate.sh --update $XF"
    [ $status -eq 0 ] && status=$rc
  fi
done

# The measured sweep, when this build can measure: FLOPs, bytes and the op set against the baseline.
if [ "${XF_GATE_MEASURED:-1}" != 0 ] && "$XF" run --help >/dev/null 2>&1; then
  margs=(sweep --model stories15m --batch 1 --prompt 32 --gen 8 --threads 1 -r 7)
  # The ceilings once, quickly, into the work folder (not the user's ~/.cache).
  export XFPROF_MACHINE_FILE="$work/machine.json"
  "$XF" machine --quick --threads 1 >/dev/null 2>"$work/machine.err" || { echo "ci_gate: xfprof machine failed: $(cat "$work/machine.err")"; exit 4; }
  if ! "$XF" "${margs[@]}" -o "$work/measured-a.json" 2>"$work/measured-a.err"; then
    echo "ci_gate: the measured sweep failed: $(tail -n 3 "$work/measured-a.err")"
    exit 4
  fi
  if [ $update -eq 1 ]; then
    cp "$work/measured-a.json" "$base/measured-stories15m.json"
    echo "ci_gate: baseline bench/baseline/measured-stories15m.json updated"
  elif [ -f "$base/measured-stories15m.json" ]; then
    "$XF" compare "$base/measured-stories15m.json" "$work/measured-a.json" --metric bytes,flops --exact-threshold 0 \
      >"$work/compare-measured-base.txt" 2>&1
    rc=$?
    echo "ci_gate: measured FLOPs/bytes against the baseline: $(tail -n 1 "$work/compare-measured-base.txt") (exit $rc)"
    [ $rc -ne 0 ] && cat "$work/compare-measured-base.txt" && [ $status -eq 0 ] && status=$rc
  fi
  # The deterministic gate: callgrind's per-op instruction counts, exactly.
  cg=(run --callgrind --model stories15m --prompt 4 --gen 3 --reps 1 --warmup 0)
  if [ $update -eq 0 ]; then
    "$XF" "${cg[@]}" -o "$work/cg-new.json" >/dev/null 2>"$work/cg-new.err"
    rc=$?
    if [ $rc -eq 3 ] || ! command -v valgrind >/dev/null; then
      echo "ci_gate: instruction counts skipped (no callgrind probe in this build, or no valgrind: apt-get install valgrind)"
    elif [ $rc -ne 0 ]; then
      echo "ci_gate: run --callgrind failed (exit $rc): $(tail -n 3 "$work/cg-new.err")"
      exit 4
    else
      cmp_to=("$XF" "self")
      [ -n "${XF_GATE_BASE:-}" ] && cmp_to=("$XF_GATE_BASE" "base")
      if ! "${cmp_to[0]}" "${cg[@]}" -o "$work/cg-ref.json" >/dev/null 2>"$work/cg-ref.err"; then
        echo "ci_gate: run --callgrind of the ${cmp_to[1]} build failed: $(tail -n 3 "$work/cg-ref.err")"
        exit 4
      fi
      "$XF" compare "$work/cg-ref.json" "$work/cg-new.json" --metric instructions --exact-threshold 0 \
        >"$work/compare-instructions.txt" 2>&1
      rc=$?
      echo "ci_gate: instruction counts against the ${cmp_to[1]} build (callgrind, exact): $(tail -n 1 "$work/compare-instructions.txt") (exit $rc)"
      [ $rc -ne 0 ] && cat "$work/compare-instructions.txt" && [ $status -eq 0 ] && status=$rc
    fi
  fi
  # The timed gate, against a base build only.
  if [ $update -eq 0 ] && [ -n "${XF_GATE_BASE:-}" ] && [ "${XF_GATE_AB:-1}" != 0 ]; then
    "$XF" compare --ab "$XF_GATE_BASE" "$XF" -- run --model stories15m --prompt 16 --gen 8 --reps 3 --threads 1 --no-concurrent \
      >"$work/compare-ab.txt" 2>&1
    rc=$?
    echo "ci_gate: timed A/B against the base build: $(tail -n 1 "$work/compare-ab.txt") (exit $rc)"
    [ $rc -ne 0 ] && cat "$work/compare-ab.txt" && [ $status -eq 0 ] && status=$rc
  fi
else
  echo "ci_gate: measured part skipped ($( [ "${XF_GATE_MEASURED:-1}" = 0 ] && echo XF_GATE_MEASURED=0 || echo "no 'xfprof run' in this build"))"
fi
[ $update -eq 1 ] && exit 0
if [ $status -eq 0 ]; then echo "ci_gate: pass"; else echo "ci_gate: FAIL (exit $status)"; fi
exit $status
