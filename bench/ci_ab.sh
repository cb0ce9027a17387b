#!/usr/bin/env bash
# The interleaved A/B gate's benchmark (not a test: it takes minutes and its figures depend on
# how busy the machine is). It runs many whole gates, `xfprof compare --ab` at its defaults,
# side by side in one run:
#   1. A/A: two copies of the same build; every failing gate (exit 1) is a false alarm;
#   2. power: NEW slowed through the test-only hook XFPROF_TEST_SLOW_OP=decode/*:F (every decode
#      op's time and samples times F, so the decode step is F times slower), for each F in
#      FACTORS; the share of gates that fail (exit 1) is the power at that slowdown;
# and prints, per set, the gates run, the failures, the rate, the wall time per gate (median, max),
# the change of the deciding decode metric (cpu_tpot at compare's defaults, else tpot) and the
# smallest detectable slowdown that the gates printed for it (median), and which metrics failed.
#
# usage: bench/ci_ab.sh XFPROF [AA_GATES] [POWER_GATES] [FACTORS] [WORKDIR]
#   defaults: 40 A/A gates, 20 gates per factor, FACTORS "1.05 1.07 1.10"
# The gate's command: XF_AB_CMD (default below), rounds XF_AB_ROUNDS (default: compare's).
# Exit 0 when every gate ran (whatever the rates), 4 when one could not run (exit 2 or 4).
set -u
XF=${1:?usage: bench/ci_ab.sh path/to/xfprof [aa_gates] [power_gates] [factors] [workdir]}
AA=${2:-40}
PW=${3:-20}
FACTORS=${4:-1.05 1.07 1.10}
work=${5:-$(mktemp -d)}
mkdir -p "$work"
XF=$(cd "$(dirname "$XF")" && pwd)/$(basename "$XF")
CMD=${XF_AB_CMD:-run --model stories15m --prompt 16 --gen 8 --reps 3 --threads 1}
rounds=()
[ -n "${XF_AB_ROUNDS:-}" ] && rounds=(--rounds "$XF_AB_ROUNDS")

# Two copies of the build (identical bytes, two files), a machine file made once.
cp "$XF" "$work/xfprof-a" && cp "$XF" "$work/xfprof-b" || exit 4
export XFPROF_MACHINE_FILE="$work/machine.json"
"$XF" machine --quick --threads 1 >/dev/null 2>"$work/machine.err" || { echo "ci_ab: xfprof machine failed: $(cat "$work/machine.err")"; exit 4; }

# gate SET_NAME NEW_BUILD INDEX: one whole gate; appends "rc wall_s tpot_change detectable" to SET.txt
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
  python3 - "$work/$set-$i.json" "$rc" "$t0" "$t1" >>"$work/$set.txt" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
pts = [it for it in d["items"] if "op" not in it]
tp = [it for it in pts if it["metric"] == "cpu_tpot"] or [it for it in pts if it["metric"] == "tpot"]
ch = tp[0]["change"] if tp else float("nan")
det = tp[0].get("detectable") if tp else None
failed = ",".join(it["metric"] for it in pts if it["verdict"] == "regression" and it.get("gate")) or "-"
print(sys.argv[2], round(float(sys.argv[4]) - float(sys.argv[3]), 2), ch, det if det is not None else float("nan"), failed)
EOF
}

summary() {
  local set=$1 label=$2
  python3 - "$work/$set.txt" "$label" <<'EOF'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
n = len(rows); fails = sum(1 for r in rows if r[0] == "1")
walls = [float(r[1]) for r in rows]; ch = [float(r[2]) for r in rows]; det = [float(r[3]) for r in rows]
from collections import Counter
why = Counter(m for r in rows if r[0] == "1" for m in r[4].split(","))
print(f"{sys.argv[2]:<34} {n:5d} gates {fails:4d} failed  rate {fails / n:6.1%}   wall/gate median {st.median(walls):5.1f} s "
      f"max {max(walls):5.1f} s   decode change median {100 * st.median(ch):+6.1f}%   detectable median {100 * st.median(det):5.1f}%"
      + (f"   failed on: {dict(why)}" if why else ""))
EOF
}

echo "ci_ab: $(date -u +%FT%TZ) on $(hostname), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); gate: compare --ab ${rounds[*]} -- $CMD"
: >"$work/aa.txt"
# The sets interleave (one A/A gate, then one gate of each factor, ...), so a busy spell of the
# machine falls on all of them alike.
for f in $FACTORS; do
  printf '#!/bin/sh\nXFPROF_TEST_SLOW_OP=decode/*:%s exec "%s" "$@"\n' "$f" "$work/xfprof-b" >"$work/xfprof-slow-$f"
  chmod +x "$work/xfprof-slow-$f"
  : >"$work/slow-$f.txt"
done
max=$AA
[ "$PW" -gt "$max" ] && max=$PW
for ((i = 1; i <= max; i++)); do
  if [ "$i" -le "$AA" ]; then gate aa "$work/xfprof-b" "$i" || exit 4; fi
  if [ "$i" -le "$PW" ]; then
    for f in $FACTORS; do gate "slow-$f" "$work/xfprof-slow-$f" "$i" || exit 4; done
  fi
done
echo "ci_ab: done $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
summary aa "A/A (identical builds): false alarms"
for f in $FACTORS; do summary "slow-$f" "decode step x$f: caught"; done
echo "ci_ab: records and logs in $work"
