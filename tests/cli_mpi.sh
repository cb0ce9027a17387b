#!/usr/bin/env bash
# The MPI side from the outside: machine --comm under mpirun (2 ranks) adds the measured link to
# the machine file; without mpirun, or with one rank, a clear message and exit 2. Skipped (77)
# when xfprof was built without MPI or mpirun is absent.
set -u
XF=${1:?usage: cli_mpi.sh path/to/xfprof}
. "$(dirname "$0")/lib.sh" # $tmp/$TMP (removed at exit) and the helpers
"$XF" machine --comm >"$tmp/out" 2>"$tmp/err"
rc=$?
if grep -q "built without MPI" "$tmp/err"; then echo "skipped: xfprof built without MPI"; exit 77; fi
command -v mpirun >/dev/null || { echo "skipped: no mpirun (apt-get install openmpi-bin)"; exit 77; }
[ "$rc" -eq 2 ] || fail "machine --comm without mpirun exited $rc, expected 2"
grep -q "run it as mpirun -np 2 xfprof machine --comm" "$tmp/err" || fail "no hint to use mpirun: $(cat "$tmp/err")"
# Under ASan: Open MPI's libraries keep memory past MPI_Finalize; LeakSanitizer is told to skip
# leaks whose stack passes through them (xfprof's own are still reported).
src=${XF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
export LSAN_OPTIONS="suppressions=$src/tests/data/lsan-openmpi.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export OMPI_MCA_mca_base_component_disable_dlclose=1 # its plugins stay loaded: their stacks name them
case "${ASAN_OPTIONS:-}" in *fast_unwind_on_malloc*) ;; *) export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0" ;; esac
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

# run --tp: refusals before anything starts, then under mpirun.
"$XF" run --tp 2 --prompt 8 --gen 4 >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] || fail "run --tp 2 without mpirun: exit status not 2"
grep -q "start it as mpirun -np 2 xfprof run --tp 2" "$tmp/err" || fail "run --tp without mpirun: $(cat "$tmp/err")"
"$XF" run --model stories15m --tp 4 >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] || fail "run --tp 4 of 6 heads: exit status not 2"
grep -q "6 attention heads do not split evenly over 4 devices" "$tmp/err" || fail "--tp 4: $(cat "$tmp/err")"
timeout 60 "${MPI[@]}" -np 3 "$XF" run --tp 2 --prompt 8 --gen 4 -o "$tmp/bad.json" >"$tmp/out" 2>"$tmp/err"
[ $? -ne 0 ] || fail "3 ranks for --tp 2 succeeded"
grep -q "ranks mismatch: mpirun started 3 ranks, --tp 2" "$tmp/err" || fail "ranks mismatch: $(head -c 300 "$tmp/err")"
[ ! -e "$tmp/bad.json" ] || fail "a refused run left a record"

# Tokens and logits of --tp 2 equal the one-process run's (fp32; partial sums in another order:
# logits within 1e-4); the record's all-reduce bytes are the cost model's.
common=(--model stories15m --prompt 12 --gen 8 --batch 2 --threads 1 --reps 2 --wdtype fp32 --save-logits)
"$XF" run "${common[@]}" --save-tokens "$tmp/t1.jsonl" -o "$tmp/r1.json" >/dev/null 2>"$tmp/err" || fail "run: $(head -c 300 "$tmp/err")"
timeout 300 "${MPI[@]}" -np 2 "$XF" run "${common[@]}" --tp 2 --save-tokens "$tmp/t2.jsonl" -o "$tmp/r2.json" >"$tmp/out" 2>"$tmp/err" ||
  fail "mpirun -np 2 run --tp 2 exited $?: $(head -c 400 "$tmp/err")"
grep -q "split: tp 2 x pp 1 = 2 devices, link mpi" "$tmp/out" || fail "run --tp 2 printed no split"
"$XF" predict --device-file "$tmp/machine.json" --model stories15m --tp 2 --prompt 12 --gen 8 --batch 2 --wdtype fp32 \
  --adtype fp32 -o "$tmp/p2.json" >/dev/null 2>"$tmp/err" || fail "predict --tp 2: $(head -c 300 "$tmp/err")"
python3 - "$tmp" <<'P' || fail "run --tp 2 differs from the one-process run or from the cost model"
import json, sys
t = sys.argv[1]
a = [json.loads(l) for l in open(t + "/t1.jsonl")][1:]
b = [json.loads(l) for l in open(t + "/t2.jsonl")][1:]
assert len(a) == len(b) == 8, (len(a), len(b))
for x, y in zip(a, b):
    assert x["tokens"] == y["tokens"], (x["step"], x["tokens"], y["tokens"])
    d = max(abs(p - q) for r1, r2 in zip(x["logits"], y["logits"]) for p, q in zip(r1, r2))
    assert d < 1e-4, d
r1, r2, p2 = (json.load(open(t + f)) for f in ("/r1.json", "/r2.json", "/p2.json"))
assert r1["points"][0]["tokens"] == r2["points"][0]["tokens"]
ops = r2["points"][0]["ops"]
ar = [o for o in ops if o["op"] == "all_reduce"]
assert len(ar) == 2 * 6, len(ar)  # prefill and decode, one op per layer (its two all-reduces)
reps = r2["points"][0]["run"]["reps"]
for o in ar:
    assert o["measured"] and len(o["samples_s"]) == 2 * reps, o  # every rank's samples
    assert o["bound"] in ("communication", "latency")
def per_layer(ops):
    s = {}
    for o in ops:
        if o["op"] == "all_reduce" and o["layer"] >= 0:
            s[(o["phase"], o["layer"])] = s.get((o["phase"], o["layer"]), 0) + o["comm_bytes"]
    return s
assert per_layer(ops) == per_layer(p2["points"][0]["ops"]), (per_layer(ops), per_layer(p2["points"][0]["ops"]))
assert r2["points"][0]["parallel"]["devices"] == 2 and r2["env"]["mpi_ranks"] == "2"
P

# A rank that hangs: the other gives up after --comm-timeout, every rank ends, no record.
timeout 120 "${MPI[@]}" -np 2 "$XF" run --model stories110m --tp 2 --prompt 64 --gen 400 --reps 50 --threads 1 \
  --comm-timeout 3 -o "$tmp/hang.json" >"$tmp/out" 2>"$tmp/err" &
mp=$!
victim=""
for _ in $(seq 1 100); do
  for pid in $(pgrep -P "$mp" 2>/dev/null) $(for c in $(pgrep -P "$mp" 2>/dev/null); do pgrep -P "$c"; done); do
    grep -qa "OMPI_COMM_WORLD_RANK=1" "/proc/$pid/environ" 2>/dev/null && victim=$pid
  done
  [ -n "$victim" ] && break
  sleep 0.1
done
if [ -z "$victim" ]; then
  fail "no rank 1 found under mpirun $mp"
  kill "$mp" 2>/dev/null
else
  sleep 2
  kill -STOP "$victim"
fi
wait "$mp"
rc=$?
[ -n "$victim" ] && kill -KILL "$victim" 2>/dev/null
[ "$rc" -ne 0 ] || fail "a hung rank: mpirun exited 0"
grep -q "did not complete in 3 s: another rank died or hangs" "$tmp/err" || fail "a hung rank: no timeout message: $(head -c 400 "$tmp/err")"
grep -q "no record written" "$tmp/err" || fail "a hung rank: no 'no record written'"
[ ! -e "$tmp/hang.json" ] || fail "a hung rank left a record"

# A rank that dies: mpirun ends the others, non-zero, no record.
timeout 120 "${MPI[@]}" -np 2 "$XF" run --model stories110m --tp 2 --prompt 64 --gen 400 --reps 50 --threads 1 \
  --comm-timeout 10 -o "$tmp/died.json" >"$tmp/out" 2>"$tmp/err" &
mp=$!
victim=""
for _ in $(seq 1 100); do
  for pid in $(pgrep -P "$mp" 2>/dev/null) $(for c in $(pgrep -P "$mp" 2>/dev/null); do pgrep -P "$c"; done); do
    grep -qa "OMPI_COMM_WORLD_RANK=1" "/proc/$pid/environ" 2>/dev/null && victim=$pid
  done
  [ -n "$victim" ] && break
  sleep 0.1
done
if [ -n "$victim" ]; then sleep 2; kill -KILL "$victim"; else fail "no rank 1 found under mpirun $mp"; kill "$mp" 2>/dev/null; fi
wait "$mp"
[ $? -ne 0 ] || fail "a killed rank: mpirun exited 0"
[ ! -e "$tmp/died.json" ] || fail "a killed rank left a record"

[ "$fails" -eq 0 ] && echo "cli_mpi: all passed"
exit $((fails > 0))
