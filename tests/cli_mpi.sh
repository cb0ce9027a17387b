#!/usr/bin/env bash
# The MPI side from the outside: machine --comm under mpirun (2 ranks) adds the measured link to
# the machine file; without mpirun, or with one rank, a clear message and exit 2. Skipped (77)
# when xfprof was built without MPI or mpirun is absent.
set -u
XF=${1:?usage: cli_mpi.sh path/to/xfprof}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
"$XF" machine --comm >"$tmp/out" 2>"$tmp/err"
rc=$?
if grep -q "built without MPI" "$tmp/err"; then echo "skipped: xfprof built without MPI"; exit 77; fi
command -v mpirun >/dev/null || { echo "skipped: no mpirun (apt-get install openmpi-bin)"; exit 77; }
[ "$rc" -eq 2 ] || fail "machine --comm without mpirun exited $rc, expected 2"
grep -q "run it as mpirun -np 2 xfprof machine --comm" "$tmp/err" || fail "no hint to use mpirun: $(cat "$tmp/err")"
# Open MPI as root needs --allow-run-as-root, on 2 cores --oversubscribe (CI runs as root on 2 cores).
MPI=(mpirun --allow-run-as-root --oversubscribe)
export XFPROF_MACHINE_FILE="$tmp/machine.json"
timeout 60 "${MPI[@]}" -np 1 "$XF" machine --comm >"$tmp/out" 2>"$tmp/err"
[ $? -ne 0 ] || fail "machine --comm with 1 rank succeeded"
grep -q "needs 2 or more" "$tmp/err" || fail "1 rank: no message: $(head -c 300 "$tmp/err")"
timeout 60 "${MPI[@]}" -np 2 "$XF" machine --comm --quick >"$tmp/out" 2>"$tmp/err"
[ $? -ne 0 ] || fail "machine --comm before the machine file exists succeeded"
grep -q "measure the CPU first" "$tmp/err" || fail "no machine file: no message: $(head -c 300 "$tmp/err")"
"$XF" machine --quick >/dev/null 2>&1 || fail "machine --quick"
timeout 120 "${MPI[@]}" -np 2 "$XF" machine --comm --quick >"$tmp/out" 2>"$tmp/err" ||
  fail "mpirun -np 2 machine --comm exited $?: $(head -c 400 "$tmp/err")"
grep -q "link ceiling (largest bus bandwidth)" "$tmp/out" || fail "no link ceiling printed: $(cat "$tmp/out")"
[ "$(grep -c "link ceiling" "$tmp/out")" -eq 1 ] || fail "more than rank 0 printed the result"
python3 - "$tmp/machine.json" <<'P' || fail "the machine file has no measured link"
import json, sys
d = json.load(open(sys.argv[1]))["devices"][0]
l = d["link"]
assert l["name"] == "mpi" and l["bandwidth_Bps"] > 1e6 and l["latency_s"] > 0 and d["gpus_per_node"] == 2, l
assert "measured_detail" in d  # the CPU's measurement kept
P
# the file still loads as a device, link included: predict --tp 2 on it
"$XF" predict --device-file "$tmp/machine.json" --model stories15m --tp 2 --prompt 16 --gen 4 >"$tmp/out" 2>"$tmp/err" ||
  fail "predict --tp 2 on the measured machine exited $?: $(head -c 300 "$tmp/err")"
grep -q "link mpi" "$tmp/out" || fail "predict did not use the measured link"
[ "$fails" -eq 0 ] && echo "cli_mpi: all passed"
exit $((fails > 0))
