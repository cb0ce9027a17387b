#!/usr/bin/env bash
# The no-GPU path of the GPU commands (issue 5): on a machine without an NVIDIA driver (CI), the
# binary starts, CPU commands work, and asking for a CUDA device is "unsupported" (exit 3) with a
# message naming CUDA, whether or not this build has the CUDA backend. Where a driver exists the
# device checks are skipped (exit 77 from the whole script when nothing else is left to check).
set -u
XF=${1:?usage: cli_cuda_nogpu.sh path/to/xfprof}
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

"$XF" --version >/dev/null 2>&1 || fail "--version exit $?"
out=$("$XF" predict --model llama-2-7b --device h100-sxm --batch 1 2>&1) || fail "predict exit $?: $out"

# the binary does not need the CUDA libraries to start: nothing of CUDA is a hard dependency
if ldd "$XF" 2>/dev/null | grep -E 'lib(cuda|cudart|cublas|cublasLt|cupti)\.so' >/dev/null; then
  fail "xfprof links a CUDA shared library: $(ldd "$XF" | grep -E 'cuda|cublas|cupti' | tr '\n' ' ')"
fi

if [ -e /dev/nvidiactl ] || [ -e /proc/driver/nvidia/version ]; then
  echo "an NVIDIA driver is present: the no-device checks do not apply here"
  [ $fails -eq 0 ] && exit 77
  exit 1
fi

out=$("$XF" run --device cuda --model stories15m 2>&1)
rc=$?
[ $rc -eq 3 ] || fail "run --device cuda: exit $rc, expected 3 (unsupported): $out"
echo "$out" | grep -qi "cuda" || fail "run --device cuda: message does not mention CUDA: $out"

if [ $fails -ne 0 ]; then
  echo "$fails check(s) failed"
  exit 1
fi
echo "ok"
