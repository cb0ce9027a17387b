#!/usr/bin/env bash
# The deterministic gate: `xfprof run --callgrind` (per-op instruction counts under valgrind's
# callgrind, collection toggled per op range) and `compare --metric instructions` on its records.
#   1. the same build run twice gives identical counts for every op, and compare passes (exit 0);
#   2. a 2.0-2.2% increase in one op's instructions (the test-only hook XFPROF_TEST_EXTRA_INSTR
#      runs an exact number of extra instructions inside every decode `down` range) is caught:
#      exit 1, exactly that op's rows regress (one per layer), method exact, nothing else moves;
#   3. bad input: --threads 2, --device cuda, --no-probes, valgrind started by hand, a bad hook
#      (exit 2); instructions from callgrind against counts of another source (exit 2).
# Skipped (77) when valgrind is not installed or the build has no callgrind probe.
set -u
XF=${1:?usage: cli_callgrind.sh path/to/xfprof}
XF=$(cd "$(dirname "$XF")" && pwd)/$(basename "$XF")
command -v valgrind >/dev/null || { echo "SKIP: valgrind is not installed (apt-get install valgrind)"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 is needed to read the records"; exit 77; }
. "$(dirname "$0")/lib.sh" # $tmp/$TMP (removed at exit) and the helpers
export XFPROF_MACHINE_FILE="$tmp/machine.json"
mkdir "$tmp/t" && export TMPDIR="$tmp/t" # run --callgrind's dump folders go here: none may be left
cat >"$XFPROF_MACHINE_FILE" <<'EOF'
{"format":"xfprof-devices","version":1,"devices":[{"name":"cpu","kind":"cpu","description":"cli_callgrind",
 "memory_bytes":17179869184,"bandwidth_Bps":1e10,"cache_bytes":33554432,"cache_bandwidth_Bps":4e10,
 "peak_flops":{"fp32":1e11}}]}
EOF
RUN=(run --callgrind --model stories15m --prompt 4 --gen 3 --reps 1 --warmup 0)

"$XF" "${RUN[@]}" -o "$tmp/a1.json" >"$tmp/a1.txt" 2>"$tmp/a1.err"
rc=$?
if [ $rc -eq 3 ] && grep -q "no callgrind probe" "$tmp/a1.err"; then
  echo "SKIP: this build has no callgrind probe (no valgrind headers at build time, or a sanitizer build)"
  exit 77
fi
[ $rc -eq 0 ] || { echo "FAIL: run --callgrind: exit $rc: $(tail -5 "$tmp/a1.err")"; exit 1; }
grep -q "under callgrind" "$tmp/a1.err" || fail "run --callgrind does not say it runs under callgrind"
"$XF" "${RUN[@]}" -o "$tmp/a2.json" >/dev/null 2>"$tmp/a2.err" || fail "second run --callgrind: $(tail -3 "$tmp/a2.err")"

# counts: every measured op has one, positive, and the two runs agree exactly
python3 - "$tmp/a1.json" "$tmp/a2.json" >"$tmp/cmp.txt" <<'EOF' || fail "counts: $(cat "$tmp/cmp.txt")"
import json, sys
a, b = (json.load(open(f))["points"][0]["ops"] for f in sys.argv[1:3])
assert len(a) == len(b) > 100, f"{len(a)} / {len(b)} ops"
env = json.load(open(sys.argv[1]))["env"]
assert env.get("instructions_source", "").startswith("callgrind"), env.get("instructions_source")
for x, y in zip(a, b):
    name = f"{x['phase']} layer {x['layer']} {x['op']}"
    cx, cy = x["counters"]["instructions"], y["counters"]["instructions"]
    assert isinstance(cx, (int, float)) and cx > 0, f"{name}: no count ({cx})"
    assert cx == cy, f"{name}: {cx} then {cy} instructions"
print("ok")
EOF
"$XF" compare "$tmp/a1.json" "$tmp/a2.json" --metric instructions >"$tmp/aa.txt" 2>&1
rc=$?
[ $rc -eq 0 ] || fail "A/A on counts: exit $rc: $(tail -3 "$tmp/aa.txt")"
grep -q '0 regressions, 0 improvements' "$tmp/aa.txt" || fail "A/A on counts: $(grep items "$tmp/aa.txt")"
grep -q 'instructions: callgrind' "$tmp/aa.txt" || fail "A/A on counts: the counts' source is not named"

# 2%: the hook adds 2 * iters instructions per range; iters so that the smallest layer's mean
# decode `down` count grows by 2.0% (and no layer by more than 2.2%)
iters=$(python3 - "$tmp/a1.json" <<'EOF'
import json, math, sys
ops = json.load(open(sys.argv[1]))["points"][0]["ops"]
c = [o["counters"]["instructions"] for o in ops if o["phase"] == "decode" and o["op"] == "down"]
assert max(c) < 1.09 * min(c), c
print(math.ceil(0.02 * min(c) / 2))
EOF
)
XFPROF_TEST_EXTRA_INSTR="decode/down:$iters" "$XF" "${RUN[@]}" -o "$tmp/b.json" >/dev/null 2>"$tmp/b.err" ||
  fail "run with the hook: $(tail -3 "$tmp/b.err")"
for thr in 0 0.015; do
  "$XF" compare "$tmp/a1.json" "$tmp/b.json" --metric instructions --exact-threshold $thr --format json -o "$tmp/ab.json" 2>"$tmp/ab.err"
  rc=$?
  [ $rc -eq 1 ] || fail "2% more instructions in decode down (threshold $thr): exit $rc, expected 1: $(cat "$tmp/ab.err")"
  python3 - "$tmp/ab.json" <<'EOF' || fail "2% more instructions (threshold $thr): the verdicts are wrong"
import json, sys
r = json.load(open(sys.argv[1]))
items = r["items"]
reg = [i for i in items if i["verdict"] == "regression"]
bad = [i for i in reg if not (i["phase"] == "decode" and i["op"] == "down")]
assert not bad, f"other ops regressed: {bad[:3]}"
assert len(reg) == 6, f"{len(reg)} regressions, expected the 6 layers' decode down"
for i in reg:
    assert i["method"] == "exact", i["method"]
    assert 0.0199 < i["change"] < 0.022, i["change"]
moved = [i for i in items if i["verdict"] != "regression" and i["base"] != i["new"]]
assert not moved, f"other counts moved: {moved[:3]}"
EOF
done

# 3. bad input: exit 2, naming what is wrong
expect2() { # expect2 WHAT PATTERN cmd...
  local what=$1 pat=$2
  shift 2
  "$@" >/dev/null 2>"$tmp/err"
  local rc=$?
  [ $rc -eq 2 ] || fail "$what: exit $rc, expected 2 ($(cat "$tmp/err"))"
  grep -q -- "$pat" "$tmp/err" || fail "$what: the message does not say '$pat': $(cat "$tmp/err")"
}
expect2 "two threads" "needs --threads 1" "$XF" "${RUN[@]}" --threads 2
expect2 "cuda" "drop --device cuda" "$XF" "${RUN[@]}" --device cuda
expect2 "no probes" "drop --no-probes" "$XF" "${RUN[@]}" --no-probes
expect2 "valgrind by hand" "without valgrind" valgrind --tool=callgrind -q --callgrind-out-file="$tmp/hand.out" "$XF" "${RUN[@]}"
expect2 "bad hook" "XFPROF_TEST_EXTRA_INSTR" env XFPROF_TEST_EXTRA_INSTR=decode/nosuchop:5 "$XF" "${RUN[@]}"
# counts of another source (a perf_event record: the same record without the callgrind env)
python3 - "$tmp/a1.json" "$tmp/perf.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
del r["env"]["instructions_source"]
json.dump(r, open(sys.argv[2], "w"))
EOF
expect2 "callgrind against perf counts" "instructions counted by callgrind in BASE" \
  "$XF" compare "$tmp/a1.json" "$tmp/perf.json" --metric instructions
[ -z "$(ls -A "$tmp/t")" ] || fail "dump folders left behind: $(ls -A "$tmp/t")"

[ $fails -eq 0 ] && echo "cli_callgrind: all checks passed"
exit $((fails > 0))
