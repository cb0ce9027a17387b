#!/usr/bin/env bash
# The interleaved A/B gate's benchmark (not a test: it takes minutes and its figures depend on
# how busy the machine is). It runs many whole gates, `xfprof compare --ab` at its defaults,
# side by side in one run:
#   1. A/A: two copies of the same build; every failing gate (exit 1) is a false alarm;
#   2. power: NEW slowed through the test-only hook XFPROF_TEST_SLOW_OP=decode/*:F (every decode
#      op's time and samples times F, and the decode step's CPU time times F), for each F in
#      FACTORS; the share of gates that fail (exit 1) is the power at that slowdown;
# and prints, per set, the gates run, the failures, the rate, the wall time per gate (median, max),
# the change of the deciding decode metric (cpu_tpot at compare's defaults, else tpot), its
# per-round spread (sd of the per-round log ratios, median over the set's gates), the smallest
# detectable slowdown that the gates printed for it (median), and which metrics failed; then the
# targets (A/A <= 1 in 20 fails, a 10% slowdown caught in >= 95%), the smallest slowdown caught
# in >= 80% of its gates, and the load average over the run.
#
# usage: bench/ci_ab.sh XFPROF [AA_GATES] [POWER_GATES] [FACTORS] [WORKDIR]
#   defaults: 40 A/A gates; FACTORS "1.10 1.05:10 1.15:10 1.25:10": a factor alone runs
#   POWER_GATES gates (default 20), F:N runs N. 90 gates: about 11 minutes estimated on our 2-core
#   VM when it is quiet (7 s a gate), far longer under load (35-75 s a gate at load 9-13); the
#   first gate and every tenth print an estimate of the time left.
# The gate's command: XF_AB_CMD (default below), rounds XF_AB_ROUNDS (default: compare's).
# XF_AB_MAX_S=N: start no gate after N seconds (the rates are then of the gates that ran, and the
# summary says the run was cut).
# Exit 0 when every gate ran (whatever the rates), 4 when one could not run (exit 2 or 4).
set -u
XF=${1:?usage: bench/ci_ab.sh path/to/xfprof [aa_gates] [power_gates] [factors] [workdir]}
AA=${2:-40}
PW=${3:-20}
FACTORS=${4:-1.10 1.05:10 1.15:10 1.25:10}
work=${5:-$(mktemp -d)}
mkdir -p "$work"
XF=$(cd "$(dirname "$XF")" && pwd)/$(basename "$XF")
CMD=${XF_AB_CMD:-run --model stories15m --prompt 16 --gen 8 --reps 3 --threads 1 --no-concurrent}
rounds=()
[ -n "${XF_AB_ROUNDS:-}" ] && rounds=(--rounds "$XF_AB_ROUNDS")
load1() { cut -d' ' -f1 /proc/loadavg; }

# Two copies of the build (identical bytes, two files), a machine file made once.
cp "$XF" "$work/xfprof-a" && cp "$XF" "$work/xfprof-b" || exit 4
export XFPROF_MACHINE_FILE="$work/machine.json"
"$XF" machine --quick --threads 1 >/dev/null 2>"$work/machine.err" || { echo "ci_ab: xfprof machine failed: $(cat "$work/machine.err")"; exit 4; }

# gate SET_NAME NEW_BUILD INDEX: one whole gate; appends "rc wall_s change detectable failed sd_log load" to SET.txt
gate() {
  local set=$1 new=$2 i=$3 t0 t1 rc
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  "$work/xfprof-a" compare --ab "$work/xfprof-a" "$new" "${rounds[@]}" --format json -o "$work/$set-$i.json" -- $CMD \
    2>"$work/$set-$i.err"
  rc=$?
  t1=$(date +%s.%N)
  if [ $rc -ne 0 ] && [ $rc -ne 1 ]; then
    echo "ci_ab: gate $set #$i could not run (exit $rc): $(tail -n 2 "$work/$set-$i.err")"
    return 4
  fi
  python3 - "$work/$set-$i.json" "$rc" "$t0" "$t1" "$(load1)" >>"$work/$set.txt" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
pts = [it for it in d["items"] if "op" not in it]
tp = [it for it in pts if it["metric"] == "cpu_tpot"] or [it for it in pts if it["metric"] == "tpot"]
nan = float("nan")
ch = tp[0]["change"] if tp else nan
det = tp[0].get("detectable") if tp else None
sd = tp[0].get("sd_log") if tp else None
failed = ",".join(it["metric"] for it in pts if it["verdict"] == "regression" and it.get("gate")) or "-"
print(sys.argv[2], round(float(sys.argv[4]) - float(sys.argv[3]), 2), ch, det if det is not None else nan, failed,
      sd if sd is not None else nan, sys.argv[5])
EOF
}

echo "ci_ab: $(date -u +%FT%TZ) on $(hostname), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); gate: compare --ab ${rounds[*]} -- $CMD"
: >"$work/aa.txt"
# The sets interleave (one A/A gate, then one gate of each factor still short of its count, ...),
# so a busy spell of the machine falls on all of them alike.
names=() counts=() builds=()
[ "$AA" -gt 0 ] && names+=(aa) counts+=("$AA") builds+=("$work/xfprof-b")
for fc in $FACTORS; do
  f=${fc%%:*}
  n=$PW
  [ "$fc" != "$f" ] && n=${fc#*:}
  case "$f$n" in *[!0-9.]*) echo "ci_ab: factor '$fc' must be F or F:N (e.g. 1.10 or 1.05:10)"; exit 4 ;; esac
  printf '#!/bin/sh\nXFPROF_TEST_SLOW_OP=decode/*:%s exec "%s" "$@"\n' "$f" "$work/xfprof-b" >"$work/xfprof-slow-$f"
  chmod +x "$work/xfprof-slow-$f"
  : >"$work/slow-$f.txt"
  names+=("slow-$f") counts+=("$n") builds+=("$work/xfprof-slow-$f")
done
total=0 max=0
for n in "${counts[@]}"; do total=$((total + n)); [ "$n" -gt "$max" ] && max=$n; done
echo "ci_ab: $total gates: ${names[*]} (${counts[*]})"
start=$(date +%s) done_n=0 cut_note=""
for ((i = 1; i <= max; i++)); do
  for k in "${!names[@]}"; do
    [ "$i" -le "${counts[$k]}" ] || continue
    if [ "${XF_AB_MAX_S:-0}" -gt 0 ] && [ $(($(date +%s) - start)) -ge "$XF_AB_MAX_S" ]; then
      cut_note="cut at XF_AB_MAX_S=$XF_AB_MAX_S s after $done_n of $total gates"
      break 2
    fi
    gate "${names[$k]}" "${builds[$k]}" "$i" || exit 4
    done_n=$((done_n + 1))
    if [ "$done_n" -eq 1 ] || [ $((done_n % 10)) -eq 0 ]; then
      el=$(($(date +%s) - start))
      echo "ci_ab: $done_n of $total gates, ${el} s, about $((el * (total - done_n) / done_n)) s to go, load $(load1)"
    fi
  done
done
echo "ci_ab: done $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg), $(($(date +%s) - start)) s${cut_note:+; $cut_note}"
python3 - "$work" "${names[@]}" <<'EOF'
import sys, statistics as st, math
from collections import Counter
work, names = sys.argv[1], sys.argv[2:]
def med(v):
    v = [x for x in v if not math.isnan(x)]
    return st.median(v) if v else float("nan")
res, loads = {}, []
for name in names:
    rows = [l.split() for l in open(f"{work}/{name}.txt") if l.strip()]
    if not rows: continue
    n = len(rows); fails = sum(1 for r in rows if r[0] == "1")
    walls = [float(r[1]) for r in rows]
    loads += [float(r[6]) for r in rows]
    why = Counter(m for r in rows if r[0] == "1" for m in r[4].split(","))
    label = "A/A (identical builds): false alarms" if name == "aa" else f"decode step x{name[5:]}: caught"
    res[name] = (n, fails)
    print(f"{label:<38} {n:4d} gates {fails:4d} failed  rate {fails / n:6.1%}   wall/gate median {st.median(walls):5.1f} s "
          f"max {max(walls):5.1f} s   decode change median {100 * med([float(r[2]) for r in rows]):+6.1f}%   "
          f"per-round sd {100 * med([float(r[5]) for r in rows]):4.1f}%   detectable median {100 * med([float(r[3]) for r in rows]):5.1f}%"
          + (f"   failed on: {dict(why)}" if why else ""))
if loads: print(f"load average (1 min) at the gates' ends: {min(loads):.1f} to {max(loads):.1f}, median {st.median(loads):.1f}")
if "aa" in res:
    n, f = res["aa"]
    few = f" (only {n} gates: the target asks for >= 40)" if n < 40 else ""
    print(f"target A/A <= 1 in 20 fails: {f} of {n} ({f / n:.1%}): {'met' if f / n <= 0.05 else 'NOT met'}{few}")
ten = [k for k in res if k != "aa" and abs(float(k[5:]) - 1.10) < 1e-9]
if ten:
    n, f = res[ten[0]]
    few = f" (only {n} gates: the target asks for >= 20)" if n < 20 else ""
    print(f"target 10% slowdown caught in >= 95%: {f} of {n} ({f / n:.1%}): {'met' if f / n >= 0.95 else 'NOT met'}{few}")
caught = sorted(float(k[5:]) for k in res if k != "aa" and res[k][1] / res[k][0] >= 0.8)
print("smallest slowdown caught in >= 80% of its gates: " + (f"{100 * (caught[0] - 1):.0f}%" if caught else "none of those run"))
EOF
echo "ci_ab: records and logs in $work"
