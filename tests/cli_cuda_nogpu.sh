#!/usr/bin/env bash
# The no-GPU path of the GPU commands (issue 5): on a machine without an NVIDIA driver (CI), the
# binary starts, CPU commands work, and asking for a CUDA device is "unsupported" (exit 3) with the
# plain message "no CUDA device present: <reason>", whether or not this build has the CUDA backend,
# for every flag combination of `run` and `machine`. Bad GPU flags are usage errors (exit 2)
# everywhere. Where a driver exists the device checks are skipped (exit 77 from the whole script
# when nothing else is left to check).
set -u
XF=${1:?usage: cli_cuda_nogpu.sh path/to/xfprof}
. "$(dirname "$0")/lib.sh" # $tmp/$TMP (removed at exit) and the helpers
# expect RC WHAT CMD... : runs CMD, checks its exit status; stderr lands in $TMP/err
expect() {
  local want=$1 what=$2
  shift 2
  "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  if [ "$rc" -eq "$want" ]; then echo "ok   $what (exit $rc)"; else fail "$what: exit $rc, expected $want: $(head -c 300 "$TMP/err")"; fi
}
# the message of an unsupported device: exactly one "no CUDA device present: " and a reason after it
plain() {
  local what=$1
  if grep -q "^xfprof [a-z]*: no CUDA device present: ." "$TMP/err" && [ "$(grep -o "no CUDA device" "$TMP/err" | wc -l)" -eq 1 ]; then
    echo "ok   $what: $(head -c 160 "$TMP/err")"
  else
    fail "$what: not the plain 'no CUDA device present: <reason>' message: $(cat "$TMP/err")"
  fi
}

"$XF" --version >/dev/null 2>&1 || fail "--version exit $?"
out=$("$XF" predict --model llama-2-7b --device h100-sxm --batch 1 2>&1) || fail "predict exit $?: $out"

# the binary does not need the CUDA libraries to start: nothing of CUDA is a hard dependency
if ldd "$XF" 2>/dev/null | grep -E 'lib(cuda|cudart|cublas|cublasLt|cupti)\.so' >/dev/null; then
  fail "xfprof links a CUDA shared library: $(ldd "$XF" | grep -E 'cuda|cublas|cupti' | tr '\n' ' ')"
fi

# Usage errors come before any device is looked for: exit 2 with or without a GPU.
expect 2 "run --cupti bogus" "$XF" run --device cuda --cupti bogus
expect 2 "run --device cuda:x" "$XF" run --device cuda:x
expect 2 "run --device cuda:-1" "$XF" run --device cuda:-1
expect 2 "run --device gpu" "$XF" run --device gpu
expect 2 "run --cupti activity on the CPU" "$XF" run --device cpu --cupti activity
expect 2 "run --cupti counters on the CPU" "$XF" run --cupti counters
expect 2 "run --cuda-graph on the CPU" "$XF" run --cuda-graph
expect 2 "machine --device cuda:x" "$XF" machine --device cuda:x
expect 2 "machine --device without a value" "$XF" machine --device
grep -q -- "--cupti" <("$XF" run --help) && grep -q -- "--cuda-graph" <("$XF" run --help) && echo "ok   run --help names --cupti and --cuda-graph" ||
  fail "run --help does not document --cupti / --cuda-graph"
grep -q -- "--device cuda" <("$XF" machine --help) && echo "ok   machine --help names --device cuda" || fail "machine --help lacks --device cuda"

if [ -e /dev/nvidiactl ] || [ -e /proc/driver/nvidia/version ]; then
  echo "an NVIDIA driver is present: the no-device checks do not apply here"
  [ $fails -eq 0 ] && exit 77
  exit 1
fi

# No device: every combination answers 3 with the plain message, at once, and writes nothing.
export XFPROF_MACHINE_FILE="$TMP/machine.json" XFPROF_GPU_MACHINE_FILE="$TMP/machine-cuda.json"
start=$(date +%s)
expect 3 "run --device cuda" "$XF" run --device cuda --model stories15m
plain "run --device cuda"
expect 3 "run --device cuda:1 --cuda-graph --cupti counters" "$XF" run --device cuda:1 --cuda-graph --cupti counters
plain "run --device cuda:1 --cuda-graph --cupti counters"
expect 3 "run --device cuda --cupti activity -o FILE" "$XF" run --device cuda --cupti activity -o "$TMP/rec.json"
plain "run --device cuda --cupti activity"
[ -e "$TMP/rec.json" ] && fail "a record was written without a device" || echo "ok   no record written"
expect 3 "run --device cuda --cupti off --no-probes" "$XF" run --device cuda --cupti off --no-probes
plain "run --device cuda --cupti off --no-probes"
expect 3 "run --device cuda:0 --kv-alloc system --cuda-graph" "$XF" run --device cuda:0 --kv-alloc system --cuda-graph
plain "run --device cuda:0 --kv-alloc system --cuda-graph"
expect 3 "machine --device cuda" "$XF" machine --device cuda
plain "machine --device cuda"
expect 3 "machine --device cuda:2 -o FILE --format json" "$XF" machine --device cuda:2 -o "$TMP/m.json" --format json
plain "machine --device cuda:2"
[ -e "$TMP/m.json" ] || [ -e "$TMP/machine-cuda.json" ] && fail "a machine file was written without a device" || echo "ok   no machine file written"
[ $(($(date +%s) - start)) -le 10 ] && echo "ok   the no-device answers came at once" || fail "the no-device answers took more than 10 s"

if [ $fails -ne 0 ]; then
  echo "$fails check(s) failed"
  exit 1
fi
echo "ok"
