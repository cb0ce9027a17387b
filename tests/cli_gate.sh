#!/usr/bin/env bash
# The CI gate (bench/ci_gate.sh) works: an unchanged build passes against the committed baseline,
# twice; the same sweep with one op slowed by 30% (test-only hook XFPROF_TEST_SLOW_OP) fails with
# a regression that names that op and no other op; compare's exit codes for bad records.
set -u
XF=${1:?usage: cli_gate.sh path/to/xfprof}
root=$(cd "$(dirname "$0")/.." && pwd)
. "$(dirname "$0")/lib.sh" # $tmp/$TMP (removed at exit) and the helpers
gate() { bash "$root/bench/ci_gate.sh" "$XF" "$@"; }

# 1. Two runs of an unchanged build: no regression, exit 0.
for k in 1 2; do
  gate "$tmp/ok$k" >"$tmp/ok$k.log" 2>&1
  rc=$?
  [ $rc -eq 0 ] || fail "unchanged build, run $k: gate exit $rc: $(tail -n 20 "$tmp/ok$k.log")"
  grep -q "ci_gate: pass" "$tmp/ok$k.log" || fail "unchanged build, run $k: no pass line"
done

# 2. gate_up 30% slower: exit 1, a regression naming gate_up, no other op regressed.
# (the measured part, already run twice above, is left out here: it compares run against run)
XF_GATE_MEASURED=0 XFPROF_TEST_SLOW_OP=gate_up:1.3 gate "$tmp/slow" >"$tmp/slow.log" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "slowed gate_up: gate exit $rc, expected 1"
grep -q "verdict: REGRESSION in gate_up" "$tmp/slow.log" || fail "slowed gate_up: the verdict does not name gate_up"
grep -E ' REGRESSION$' "$tmp/slow.log" | grep -v -E ' gate_up +time |\(point\)' >"$tmp/others" &&
  fail "ops other than gate_up reported as regressions: $(head -3 "$tmp/others")"
grep -q -E 'decode L0 +gate_up +time .*\+30\.0% .*REGRESSION' "$tmp/slow.log" || fail "slowed gate_up: no +30.0% row for layer 0"
# the same hook slowing by a factor of 1 changes nothing
XF_GATE_MEASURED=0 XFPROF_TEST_SLOW_OP=gate_up:1 gate "$tmp/same" >"$tmp/same.log" 2>&1 || fail "factor 1 made the gate fail"

# 2b. the deterministic part against a base build: NEW runs 20000 x 2 more instructions in every
# decode `down` range (test-only hook XFPROF_TEST_EXTRA_INSTR): exit 1 naming down's counts
# (skipped without valgrind or the callgrind probe: the gate says so)
printf '#!/bin/sh\nXFPROF_TEST_EXTRA_INSTR=decode/down:20000 exec "%s" "$@"\n' "$XF" >"$tmp/more-instr"
chmod +x "$tmp/more-instr"
XF_GATE_BASE="$XF" XF_GATE_AB=0 bash "$root/bench/ci_gate.sh" "$tmp/more-instr" "$tmp/instr" >"$tmp/instr.log" 2>&1
rc=$?
if grep -q "instruction counts skipped" "$tmp/instr.log"; then
  echo "note: instruction counts skipped (no valgrind or no callgrind probe)"
else
  [ $rc -eq 1 ] || fail "2 x 20000 more instructions in decode down: gate exit $rc, expected 1: $(tail -n 5 "$tmp/instr.log")"
  grep -q "instruction counts against the base build (callgrind, exact): verdict: REGRESSION in down" "$tmp/instr.log" ||
    fail "more instructions: the verdict does not name down: $(grep instruction "$tmp/instr.log")"
fi

# 3. compare's exit codes: regression 1 (above), bad records 2 with the file named.
rec="$root/bench/baseline/predict-stories15m.json"
head -c 5000 "$rec" >"$tmp/trunc.json"
"$XF" compare "$rec" "$tmp/trunc.json" >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "trunc.json" "$tmp/err" && grep -q "truncated" "$tmp/err" || fail "truncated record: $(cat "$tmp/err")"
echo '{"format":"something-else","version":1}' >"$tmp/other.json"
"$XF" compare "$tmp/other.json" "$rec" >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "BASE record refused" "$tmp/err" || fail "other format: $(cat "$tmp/err")"
"$XF" compare "$rec" "$tmp/missing.json" >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "missing file: expected exit 2"
# a measured op without samples_s: named and refused (a run-like record made from the baseline)
sed -E 's/("share":[^,]*),"measured":false/\1,"measured":true,"samples_s":[1e-6,1e-6,1e-6,1e-6,1e-6],"spread_s":0,"util_compute":0,"util_memory":0/g' \
  "$rec" >"$tmp/meas.json"
grep -q '"kind":"sweep".*"samples_s"' "$tmp/meas.json" || fail "could not make a measured record from the baseline"
"$XF" compare "$tmp/meas.json" "$tmp/meas.json" >/dev/null 2>"$tmp/err" || fail "a measured record against itself: $(cat "$tmp/err")"
# drop the samples of the first op only: the reader names the op's path
sed '0,/"samples_s":\[1e-6,1e-6,1e-6,1e-6,1e-6\],/s///' "$tmp/meas.json" >"$tmp/nosamp.json"
"$XF" compare "$tmp/meas.json" "$tmp/nosamp.json" >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "samples_s" "$tmp/err" && grep -q "ops\[0\]" "$tmp/err" || fail "missing samples: $(cat "$tmp/err")"
# another model is refused unless --force
"$XF" compare "$rec" "$root/bench/baseline/predict-llama-3-8b.json" >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "different models" "$tmp/err" || fail "different models: $(cat "$tmp/err")"
# json and md formats
"$XF" compare "$rec" "$rec" --format json >"$tmp/c.json" || fail "compare --format json failed"
grep -q -E '"verdict":[[:space:]]*"pass"' "$tmp/c.json" || fail "json verdict missing"
"$XF" compare "$rec" "$rec" --format md | grep -q '^### xfprof compare: no regression' || fail "md heading missing"

if [ $fails -eq 0 ]; then echo "cli_gate: all checks passed"; else echo "cli_gate: $fails failures"; exit 1; fi
