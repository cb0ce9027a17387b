#!/usr/bin/env bash
# Valgrind pass (issue 8): a chosen set of the Criterion suites, `xfprof run` (the default command,
# on stories15m, with fewer tokens and repetitions) and `xfprof predict`, under memcheck with
# --leak-check=full --errors-for-leak-kinds=definite, in a build without sanitizers.
#
# Criterion runs each test in a child process and reports a child that valgrind flagged (exit
# status from --error-exitcode) as passing, so the exit status cannot be trusted: every process
# (--trace-children=yes) writes its own log, and the pass fails when any log has a non-zero
# "ERROR SUMMARY" (definite leaks count as errors). gnuplot, which the HTML suite spawns, is not
# traced.
#
# $1: the build folder (with xfprof, test_* and data/). XF_VALGRIND_SUITES overrides the suites.
set -uo pipefail
build=$(realpath "$1")
command -v valgrind >/dev/null || { echo "SKIP: valgrind is not installed"; exit 77; }
src=$(cd "$(dirname "$0")/../.." && pwd)
suites=${XF_VALGRIND_SUITES:-"dtype config device record safetensors kv_cache serving_sim compare trace sweep predict roofline stats advice cpu_kernels import"}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
export XFPROF_DATA_DIR=$build/data
# No restart of xfprof under valgrind (it would exec /proc/self/exe outside valgrind's view), and
# the ceilings from a machine file instead of measuring them (minutes under valgrind).
export XFPROF_REEXEC=1 OMP_WAIT_POLICY=passive
cat >"$logs/machine.json" <<'EOF'
{"format":"xfprof-devices","version":1,"devices":[{"name":"cpu","kind":"cpu","description":"valgrind pass",
 "memory_bytes":17179869184,"bandwidth_Bps":1e10,"cache_bytes":33554432,"cache_bandwidth_Bps":4e10,
 "peak_flops":{"fp32":1e11}}]}
EOF
export XFPROF_MACHINE_FILE=$logs/machine.json
vg=(valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite
    --trace-children=yes --trace-children-skip='*gnuplot*,*/sh,*/bash' --num-callers=30)
# The processes run side by side, one a CPU (XF_VALGRIND_JOBS overrides): valgrind runs a process's
# threads one at a time, so on CI's 2 cores the pass takes about half as long. Each check writes its
# report to its own file; they are printed afterwards in the order below.
jobs_max=${XF_VALGRIND_JOBS:-$(nproc)}
. "$src/scripts/jobs.sh"
names=()

# vg_run NAME CMD...: runs CMD under valgrind with a log per process; writes its report to
# $logs/NAME.report and, when it failed, $logs/NAME.fail.
vg_run() {
  local name=$1; shift
  mkdir -p "$logs/$name"
  local t0=$SECONDS
  "${vg[@]}" --log-file="$logs/$name/vg.%p" "$@" >"$logs/$name.out" 2>&1
  local rc=$? bad
  bad=$(grep -l "ERROR SUMMARY: [1-9]" "$logs/$name"/vg.* 2>/dev/null)
  if [ $rc -ne 0 ] || [ -n "$bad" ]; then
    {
      echo "FAIL $name (exit $rc, $((SECONDS - t0)) s)"
      tail -5 "$logs/$name.out" | sed 's/^/    /'
      for f in $bad; do sed -n '/ERROR SUMMARY/q;p' "$f" | grep -v "^==[0-9]*== *$" | head -60 | sed 's/^/    /'; done
    } >"$logs/$name.report"
    touch "$logs/$name.fail"
  else
    echo "ok   $name ($(ls "$logs/$name" | wc -l) processes, $((SECONDS - t0)) s)" >"$logs/$name.report"
  fi
}

status=0
for s in $suites; do
  [ -x "$build/test_$s" ] || { echo "FAIL test_$s: not built in $build"; status=1; continue; }
  names+=("test_$s")
  jobs_slot "$jobs_max"
  vg_run "test_$s" "$build/test_$s" --jobs 1 &
done
names+=(xfprof-predict xfprof-predict-json xfprof-run xfprof-show xfprof-kv)
jobs_slot "$jobs_max"
vg_run "xfprof-predict" "$build/xfprof" predict &
jobs_slot "$jobs_max"
vg_run "xfprof-predict-json" "$build/xfprof" predict --model stories15m --format json -o "$logs/p.json" &
jobs_slot "$jobs_max"
{ # show reads the record run writes
  vg_run "xfprof-run" "$build/xfprof" run --model stories15m --threads 2 --prompt 16 --gen 8 --reps 2 --warmup 1 \
    -o "$logs/r.json" --trace "$logs/r.trace"
  vg_run "xfprof-show" "$build/xfprof" show "$logs/r.json"
} &
jobs_slot "$jobs_max"
vg_run "xfprof-kv" "$build/xfprof" kv --model stories15m --requests 50 &
wait
for n in "${names[@]}"; do
  cat "$logs/$n.report" 2>/dev/null || { echo "FAIL $n: no report"; status=1; }
  [ -e "$logs/$n.fail" ] && status=1
done
[ $status -eq 0 ] && echo "valgrind: no errors, no definite leaks"
exit $status
