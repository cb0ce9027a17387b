#!/usr/bin/env bash
# compare --ab and --calibrate end to end, on a tiny run (stories15m, prompt 8, gen 8, 3 reps, 5
# rounds): identical builds pass; a build whose decode step is 20x slower (test-only hook
# XFPROF_TEST_SLOW_OP, set by a wrapper script for the NEW side only) fails with exit 1 naming
# tpot and the paired method; --calibrate prints the noise; bad input exits 2 naming what is wrong:
# a build that is not xfprof (another program, a missing path, a folder, a file that is not
# executable), a side whose run fails (NEW in round 1, BASE in round 2), records of different
# workloads, -o in the command, a missing command.
set -u
XF=${1:?usage: cli_ab.sh path/to/xfprof}
XF=$(cd "$(dirname "$XF")" && pwd)/$(basename "$XF")
. "$(dirname "$0")/lib.sh" # $tmp/$TMP (removed at exit) and the helpers
export XFPROF_MACHINE_FILE="$tmp/machine.json"
mkdir "$tmp/t" && export TMPDIR="$tmp/t" # compare --ab's work folders go here: none may be left
"$XF" machine --quick --threads 1 >/dev/null 2>&1 || { echo "FAIL: xfprof machine"; exit 1; }
RUN=(run --model stories15m --prompt 8 --gen 8 --reps 3 --warmup 1 --threads 1)
wrap() { # wrap NAME 'env assignments or extra args': a script standing in for a build
  printf '#!/bin/sh\n%s\n' "$2" >"$tmp/$1"
  chmod +x "$tmp/$1"
}

# 1. identical builds: exit 0, every verdict names its method, the order and noise lines are there
"$XF" compare --ab "$XF" "$XF" --rounds 5 --seed 5 -- "${RUN[@]}" >"$tmp/aa.txt" 2>"$tmp/aa.err"
rc=$?
if [ $rc -eq 0 ]; then
  grep -q '^interleaved A/B: 5 rounds in .* order [AB][AB][AB][AB][AB] ' "$tmp/aa.txt" || fail "A/A: no rounds line: $(head -2 "$tmp/aa.txt")"
  grep -q '^  - paired: interleaved A/B rounds' "$tmp/aa.txt" || fail "A/A: the paired method is not named"
  grep -q 'point 1 tpot: run-to-run spread' "$tmp/aa.txt" || fail "A/A: no noise line for tpot"
  grep -q '^verdict: no regression' "$tmp/aa.txt" || fail "A/A: no verdict line"
else
  # a busy machine can fail an A/A gate of 5 rounds; the exit code must still be the gate's
  [ $rc -eq 1 ] || fail "A/A: exit $rc: $(cat "$tmp/aa.err")"
  echo "note: the 5-round A/A gate failed on this (busy) machine; not counted"
fi
# the same order again from the same seed
"$XF" compare --ab "$XF" "$XF" --rounds 5 --seed 5 --format json -- "${RUN[@]}" >"$tmp/aa.json" 2>/dev/null
grep -q "\"order\":[[:space:]]*\"$(sed -n 's/.* order \([AB]*\) .*/\1/p' "$tmp/aa.txt")\"" "$tmp/aa.json" || fail "--seed 5 twice gave two orders"
grep -q '"method":[[:space:]]*"paired"' "$tmp/aa.json" || fail "json: no paired method"
grep -q '"mode":[[:space:]]*"ab"' "$tmp/aa.json" || fail "json: no mode"

# 2. NEW's decode step 20x slower (a busy shared machine moves a short run by 5x and more, so the
# slowdown is large): exit 1, tpot named as the regression, method paired
wrap slow "XFPROF_TEST_SLOW_OP='decode/*:20' exec \"$XF\" \"\$@\""
"$XF" compare --ab "$XF" "$tmp/slow" --rounds 5 -- "${RUN[@]}" >"$tmp/slow.txt" 2>"$tmp/slow.err"
rc=$?
[ $rc -eq 1 ] || fail "20x slower decode: exit $rc, expected 1: $(cat "$tmp/slow.err")"
grep -q '^verdict: REGRESSION in.* cpu_tpot' "$tmp/slow.txt" || fail "20x slower decode: the verdict does not name cpu_tpot: $(tail -2 "$tmp/slow.txt")"
grep -E '^1 +\(point\) +cpu_tpot .* \+[0-9.]+% +\[\+[0-9.]+%,\+[0-9.]+%\] .* paired +REGRESSION$' "$tmp/slow.txt" >/dev/null ||
  fail "20x slower decode: no paired cpu_tpot regression row with its CI: $(grep tpot "$tmp/slow.txt" | head -2)"
# the wall-clock tpot is shown and tested, as explanation (it does not decide by default)
grep -q 'decided by: the CPU step times' "$tmp/slow.txt" || fail "--ab: the deciding metrics are not named"
grep -E '^1 +\(point\) +tpot .* paired' "$tmp/slow.txt" >/dev/null || fail "--ab: no wall-clock tpot row: $(grep tpot "$tmp/slow.txt" | head -3)"
# a prefill-only slowdown: ttft regressed (whether 5 rounds also call tpot is up to the noise)
wrap slowpre "XFPROF_TEST_SLOW_OP='prefill/*:20' exec \"$XF\" \"\$@\""
"$XF" compare --ab "$XF" "$tmp/slowpre" --rounds 5 -- "${RUN[@]}" >"$tmp/slowpre.txt" 2>&1
grep -q '^verdict: REGRESSION in.* cpu_ttft' "$tmp/slowpre.txt" || fail "20x slower prefill: cpu_ttft not named: $(tail -2 "$tmp/slowpre.txt")"

# 3. --calibrate: one build against itself, the noise and the smallest detectable slowdown
"$XF" compare --calibrate "$XF" --rounds 5 -- "${RUN[@]}" >"$tmp/cal.txt" 2>&1
rc=$?
[ $rc -le 1 ] || fail "--calibrate: exit $rc: $(tail -3 "$tmp/cal.txt")"
grep -q '^calibration (A/A, one build against itself): 5 rounds' "$tmp/cal.txt" || fail "--calibrate: no calibration line"
grep -q 'cpu_tpot: run-to-run spread .* smallest slowdown caught in 80% of gates with 5 rounds at threshold 3.0%: [0-9.]*%' "$tmp/cal.txt" ||
  fail "--calibrate: no smallest detectable slowdown"

# 4. bad input: exit 2 and a message naming what is wrong
expect2() { # expect2 WHAT PATTERN cmd...
  local what=$1 pat=$2
  shift 2
  "$@" >/dev/null 2>"$tmp/err"
  local rc=$?
  [ $rc -eq 2 ] || fail "$what: exit $rc, expected 2 ($(cat "$tmp/err"))"
  grep -q -- "$pat" "$tmp/err" || fail "$what: the message does not say '$pat': $(cat "$tmp/err")"
}
expect2 "not xfprof" "NEW build '/bin/true' is not an xfprof binary" "$XF" compare --ab "$XF" /bin/true --rounds 5 -- "${RUN[@]}"
expect2 "missing build" "BASE build '$tmp/none'" "$XF" compare --ab "$tmp/none" "$XF" --rounds 5 -- "${RUN[@]}"
wrap failing "case \"\$1\" in --version) exec \"$XF\" --version;; esac; echo 'simulated failure of this build' >&2; exit 3"
expect2 "failing side" "the NEW build's 'run' failed in round 1 (exit status 3): simulated failure" \
  "$XF" compare --ab "$XF" "$tmp/failing" --rounds 5 -- "${RUN[@]}"
# BASE fails in round 2 only (its second run): the round, the side and its message are named
wrap failing2 "case \"\$1\" in --version|machine) exec \"$XF\" \"\$@\";; esac
n=\$(cat \"$tmp/count\" 2>/dev/null || echo 0); echo \$((n + 1)) >\"$tmp/count\"
if [ \$n -ge 1 ]; then echo 'second run refused' >&2; exit 5; fi
exec \"$XF\" \"\$@\""
expect2 "failing side, round 2" "the BASE build's 'run' failed in round 2 (exit status 5): second run refused" \
  "$XF" compare --ab "$tmp/failing2" "$XF" --rounds 5 -- "${RUN[@]}"
mkdir "$tmp/adir"
expect2 "a folder as a build" "BASE build '$tmp/adir'" "$XF" compare --ab "$tmp/adir" "$XF" --rounds 5 -- "${RUN[@]}"
printf 'not a program\n' >"$tmp/plain"
expect2 "a file that is not executable" "NEW build '$tmp/plain'" "$XF" compare --ab "$XF" "$tmp/plain" --rounds 5 -- "${RUN[@]}"
wrap otherwl "exec \"$XF\" \"\$@\" --prompt 9"
expect2 "different workloads" "round 1: BASE point 1 (batch 1, prompt 8," "$XF" compare --ab "$XF" "$tmp/otherwl" --rounds 5 -- "${RUN[@]}"
expect2 "bad option for run" "build's 'run' failed in round 1 (exit status 2): xfprof run: unknown option" "$XF" compare --ab "$XF" "$XF" --rounds 5 -- run --no-such-flag
expect2 "-o in the command" "must not set -o" "$XF" compare --ab "$XF" "$XF" -- "${RUN[@]}" -o x.json
expect2 "no command" "needs the command" "$XF" compare --ab "$XF" "$XF"
expect2 "not run or sweep" "'run ...' or 'sweep ...'" "$XF" compare --ab "$XF" "$XF" --rounds 5 -- predict
expect2 "four rounds" "--rounds" "$XF" compare --ab "$XF" "$XF" --rounds 4 -- "${RUN[@]}"
expect2 "--rounds without --ab" "go with --ab" "$XF" compare a.json b.json --rounds 5
expect2 "both modes" "two modes" "$XF" compare --ab --calibrate "$XF" "$XF" -- "${RUN[@]}"
[ -z "$(ls -A "$tmp/t")" ] || fail "work folders left behind: $(ls -A "$tmp/t")"

[ $fails -eq 0 ] && echo "cli_ab: all checks passed"
exit $((fails > 0))
