#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, ASan + UBSan) and runs each for SECONDS (default 30)
# over its seed corpus in tests/fuzz/corpus/<name>. Fails on any crash, leak or sanitizer report;
# the input that did it is left in build-fuzz/findings/ (add it to the corpus once fixed).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DXFPROF_FUZZ=ON -DXFPROF_TESTS=OFF -DXFPROF_CUDA=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target $(cd tests/fuzz && ls fuzz_*.c | sed 's/\.c$//')
mkdir -p build-fuzz/findings
# The harnesses run side by side, one a CPU (XFPROF_FUZZ_JOBS overrides): each libFuzzer process is
# single-threaded, so on CI's 2 cores 16 harnesses x 30 s take 4 minutes instead of 8. Each writes
# its own log; the reports are printed afterwards in the harnesses' order.
jobs_max=${XFPROF_FUZZ_JOBS:-$(nproc)}
. scripts/jobs.sh
run_one() {
  local name=$1 corpus=$2 work=$3
  if ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "build-fuzz/$name" -max_total_time="$secs" -rss_limit_mb=2048 -max_len=65536 -timeout=10 \
    -artifact_prefix=build-fuzz/findings/"$name"- -print_final_stats=1 "$work" "$corpus" 2>build-fuzz/"$name".log; then
    echo ok >build-fuzz/"$name".result
  else
    echo fail >build-fuzz/"$name".result
  fi
}
for src in tests/fuzz/fuzz_*.c; do
  name=$(basename "$src" .c)
  corpus=tests/fuzz/corpus/${name#fuzz_}
  work=build-fuzz/work/${name#fuzz_}
  mkdir -p "$work"
  rm -f build-fuzz/"$name".result
  # New inputs go to the work folder; the committed seed corpus is only read.
  jobs_slot "$jobs_max"
  run_one "$name" "$corpus" "$work" &
done
wait
status=0
for src in tests/fuzz/fuzz_*.c; do
  name=$(basename "$src" .c)
  echo "== $name: ${secs}s over tests/fuzz/corpus/${name#fuzz_}"
  if [ "$(cat build-fuzz/"$name".result 2>/dev/null)" != ok ]; then
    echo "FAIL: $name found a problem:"; tail -40 build-fuzz/"$name".log; status=1
  else
    grep -E "stat::number_of_executed_units|cov:" build-fuzz/"$name".log | tail -2
  fi
done
exit $status
