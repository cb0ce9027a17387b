#!/usr/bin/env bash
# The project's own regression gate: a small sweep compared against the baseline records committed
# in bench/baseline/, in a way that cannot flake on a noisy shared machine:
#   - predicted sweeps (the cost model: times, FLOPs, bytes, op counts) are deterministic and are
#     compared strictly: any change counts (--exact-threshold 0); an increase fails the gate;
#   - measured sweeps (when this build has `xfprof run`, and XF_GATE_MEASURED is not 0) are compared
#     run against run on this machine (two sweeps of the same build must not differ beyond a wide
#     threshold, through the U test), and against the committed measured baseline for what is
#     deterministic in them (FLOPs, bytes, op set) -- never for times measured on another machine.
#
# usage: bench/ci_gate.sh [--update] XFPROF [WORKDIR]
#   --update   rewrite bench/baseline/ from this build (after an intended cost-model change)
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

# The measured sweeps, when this build can measure.
if [ "${XF_GATE_MEASURED:-1}" != 0 ] && "$XF" run --help >/dev/null 2>&1; then
  margs=(sweep --model stories15m --batch 1 --prompt 32 --gen 8 --threads 1 -r 7)
  # The ceilings once, quickly, into the work folder (not the user's ~/.cache).
  export XFPROF_MACHINE_FILE="$work/machine.json"
  "$XF" machine --quick --threads 1 >/dev/null 2>"$work/machine.err" || { echo "ci_gate: xfprof machine failed: $(cat "$work/machine.err")"; exit 4; }
  for k in a b; do
    if ! "$XF" "${margs[@]}" -o "$work/measured-$k.json" 2>"$work/measured-$k.err"; then
      echo "ci_gate: the measured sweep failed: $(tail -n 3 "$work/measured-$k.err")"
      exit 4
    fi
  done
  if [ $update -eq 1 ]; then
    cp "$work/measured-a.json" "$base/measured-stories15m.json"
    echo "ci_gate: baseline bench/baseline/measured-stories15m.json updated"
  else
    # Same build twice on this machine: step times through the U test, a wide threshold (3x:
    # other jobs on a shared 2-core machine, ctest -j2 included, move these times a lot).
    "$XF" compare "$work/measured-a.json" "$work/measured-b.json" --metric ttft,tpot --threshold 200% \
      >"$work/compare-measured.txt" 2>&1
    rc=$?
    echo "ci_gate: measured run against run: $(tail -n 1 "$work/compare-measured.txt") (exit $rc)"
    [ $rc -ne 0 ] && cat "$work/compare-measured.txt" && [ $status -eq 0 ] && status=$rc
    # Against the committed measured baseline: only what does not depend on the machine.
    if [ -f "$base/measured-stories15m.json" ]; then
      "$XF" compare "$base/measured-stories15m.json" "$work/measured-a.json" --metric bytes,flops --exact-threshold 0 \
        >"$work/compare-measured-base.txt" 2>&1
      rc=$?
      echo "ci_gate: measured FLOPs/bytes against the baseline: $(tail -n 1 "$work/compare-measured-base.txt") (exit $rc)"
      [ $rc -ne 0 ] && cat "$work/compare-measured-base.txt" && [ $status -eq 0 ] && status=$rc
    fi
  fi
else
  echo "ci_gate: measured part skipped ($( [ "${XF_GATE_MEASURED:-1}" = 0 ] && echo XF_GATE_MEASURED=0 || echo "no 'xfprof run' in this build"))"
fi
[ $update -eq 1 ] && exit 0
if [ $status -eq 0 ]; then echo "ci_gate: pass"; else echo "ci_gate: FAIL (exit $status)"; fi
exit $status
