#!/usr/bin/env bash
# The whole test suite, as CI runs it: dependencies, a -Werror build (CUDA parts compiled and
# linked when nvcc is found) with every CTest suite, then the same suites under ASan + UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=$(nproc)

echo "== build (-Wall -Wextra -Werror) and tests"
cmake -S . -B build -DXFPROF_WERROR=ON
cmake --build build -j"$jobs"
(cd build && ctest --output-on-failure -j"$jobs" -LE valgrind)
# Skipped tests say why (GPU tests on a machine without one, the browser test without chromium).
(cd build && ctest -N -L gpu >/dev/null && ctest -L gpu -V 2>/dev/null | grep -E "\[SKIP\]|SKIP:" | sort -u | head -5) || true

echo "== AddressSanitizer + UndefinedBehaviorSanitizer build and tests"
cmake -S . -B build-asan -DXFPROF_WERROR=ON -DXFPROF_SANITIZE=ON -DXFPROF_CUDA=OFF -DCMAKE_BUILD_TYPE=Debug
cmake --build build-asan -j"$jobs"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --output-on-failure -j"$jobs")

# Issue 8 (harden): valgrind over chosen suites and xfprof run/predict in the plain build above
# (label valgrind, tests/valgrind/run_valgrind.sh); then allocation N made to fail for every N over
# small runs of each command, in an ASan build of its own (tests/fault/run_alloc_faults.sh).
echo "== valgrind: no errors, no definite leaks"
(cd build && ctest --output-on-failure -L valgrind)
echo "== allocation faults: out-of-memory at every allocation in turn"
cmake -S . -B build-fault -DXFPROF_WERROR=ON -DXFPROF_SANITIZE=ON -DXFPROF_FAULT_ALLOC=ON -DXFPROF_TESTS=OFF \
  -DXFPROF_CUDA=OFF -DCMAKE_BUILD_TYPE=Debug
cmake --build build-fault -j"$jobs" --target xfprof
(cd build-fault && ctest --output-on-failure -L fault)

echo "== fuzzers: every parser's libFuzzer harness for a bounded time (any crash, leak or sanitizer report fails)"
bash scripts/fuzz.sh "${XFPROF_FUZZ_SECONDS:-30}"

echo "== all tests passed"
