#!/usr/bin/env bash
# Signals (issue 19, items 5 and 6). $1 = the xfprof binary.
#  - run: the first SIGINT finishes the current repetition, writes what is complete, marks the
#    record partial; a second one stops at once, leaving no file and no temporary behind.
#  - show -o / report -o: a signal while a temporary exists (the atomic write's *.tmpXXXXXX,
#    gnuplot's folder) removes it; the earlier file stays as it was.
set -u
XF=${1:?usage: cli_signals.sh path/to/xfprof}
. "$(dirname "$0")/lib.sh" # $tmp/$TMP (removed at exit) and the helpers

export XFPROF_MACHINE_FILE="$TMP/machine.json"
cat >"$XFPROF_MACHINE_FILE" <<'EOF'
{"format":"xfprof-devices","version":1,"devices":[{"name":"cpu","description":"test CPU","kind":"cpu",
 "memory_bytes":8e9,"bandwidth_Bps":1e10,"cache_bytes":1048576,"cache_bandwidth_Bps":5e10,
 "peak_flops":{"fp32":1e11},"measured":true,"source":"measured by xfprof machine on test 2026-01-01, 1 threads"}]}
EOF
export TMPDIR="$TMP/scratch"
mkdir -p "$TMPDIR"

wait_for() { # seconds command...: polls every 0.05 s
    local n=$(($1 * 20))
    shift
    for _ in $(seq 1 "$n"); do
        "$@" && return 0
        sleep 0.05
    done
    return 1
}
has_line() { [ "$(grep -c "$2" "$1" 2>/dev/null)" -ge "$3" ]; }
no_temps() { ! ls -A "$1" 2>/dev/null | grep -q .; }
tmp_exists() { ls "$1"/*.tmp* >/dev/null 2>&1; }

# 1. run --reps 10000: one SIGINT stops after the current repetition; the point is written with the
#    repetitions it has, the record says partial, exit 130, and show reads it and says so.
"$XF" run --prompt 8 --gen 2 --reps 10000 --warmup 1 --threads 1 -o "$TMP/long.json" >/dev/null 2>"$TMP/long.err" &
pid=$!
# the run says when its point starts (after its signal handlers are in); a busy CI machine can take
# longer than any fixed sleep to get there
wait_for 60 has_line "$TMP/long.err" 'batch 1 prompt 8' 1 || bad "run --reps 10000: its point never started: $(tail -c 300 "$TMP/long.err")"
sleep 1
t0=$(date +%s.%N)
kill -INT "$pid"
wait "$pid"
rc=$?
t1=$(date +%s.%N)
[ "$rc" -eq 130 ] && ok "run --reps 10000, SIGINT: exit 130" || bad "run --reps 10000, SIGINT: exit $rc; $(tail -c 300 "$TMP/long.err")"
awk -v a="$t0" -v b="$t1" 'BEGIN { exit !(b - a < 20) }' && ok "stopped within seconds of the signal" || bad "took $(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}') s to stop"
python3 - "$TMP/long.json" <<'EOF' && ok "record: 1 point, 1 <= run.reps < 10000, partial with a reason" || bad "partial record content"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["partial"] is True, r.get("partial")
assert "SIGINT" in r["partial_reason"] and "10000" in r["partial_reason"], r["partial_reason"]
assert len(r["points"]) == 1
p = r["points"][0]
assert 1 <= p["run"]["reps"] < 10000, p["run"]["reps"]
assert all(len(o["samples_s"]) == p["run"]["reps"] for o in p["ops"] if o["measured"])
EOF
"$XF" show "$TMP/long.json" >"$TMP/show.out" 2>&1 && grep -qi "partial" "$TMP/show.out" && ok "show reads it and says partial" ||
    bad "show of the partial record: $(head -c 300 "$TMP/show.out")"
grep -q "interrupted by SIGINT" "$TMP/long.err" && ok "run said it was interrupted" || bad "no interrupted message"

# 2. Two SIGINTs: the second stops at once; no record, no temporary.  The pause hook holds the
#    record's temporary open for 30 s, so only the second signal can end the run quickly.
rm -f "$TMP/two.json"
XFPROF_TEST_WRITE_PAUSE_MS=30000 "$XF" run --prompt 8 --gen 2 --reps 10000 --threads 1 -o "$TMP/two.json" >/dev/null 2>"$TMP/two.err" &
pid=$!
wait_for 60 has_line "$TMP/two.err" 'batch 1 prompt 8' 1 || bad "two SIGINTs: the point never started: $(tail -c 300 "$TMP/two.err")"
sleep 1
kill -INT "$pid"
if wait_for 30 tmp_exists "$TMP"; then ok "first SIGINT: the record's write began"; else bad "no temporary seen after the first SIGINT"; fi
kill -INT "$pid"
t0=$(date +%s)
wait "$pid"
rc=$?
t1=$(date +%s)
[ "$rc" -eq 130 ] && ok "second SIGINT: exit 130" || bad "second SIGINT: exit $rc"
[ $((t1 - t0)) -lt 10 ] && ok "second SIGINT stopped at once ($((t1 - t0)) s)" || bad "second SIGINT took $((t1 - t0)) s"
[ ! -e "$TMP/two.json" ] && ok "second SIGINT: no record written" || bad "second SIGINT: a record was written"
tmp_exists "$TMP" && bad "second SIGINT left $(ls "$TMP"/*.tmp*)" || ok "second SIGINT: no temporary left"

# 3. show -o while the temporary exists: SIGINT and SIGTERM remove it; the earlier file is kept.
"$XF" predict --model stories15m -o "$TMP/pred.json" >/dev/null 2>&1 || bad "predict for the show test"
for sig in INT TERM HUP; do
    echo "earlier" >"$TMP/shown.json"
    XFPROF_TEST_WRITE_PAUSE_MS=30000 "$XF" show "$TMP/pred.json" --format json -o "$TMP/shown.json" >/dev/null 2>&1 &
    pid=$!
    wait_for 20 tmp_exists "$TMP" || bad "show -o: no temporary appeared"
    kill -"$sig" "$pid"
    wait "$pid"
    rc=$?
    want=$((128 + $(kill -l "$sig")))
    [ "$rc" -eq "$want" ] && ok "show -o, SIG$sig: exit $want" || bad "show -o, SIG$sig: exit $rc"
    tmp_exists "$TMP" && bad "show -o, SIG$sig left $(ls "$TMP"/*.tmp*)" || ok "show -o, SIG$sig: temporary removed"
    [ "$(cat "$TMP/shown.json")" = earlier ] && ok "show -o, SIG$sig: the earlier file is intact" || bad "show -o, SIG$sig: earlier file changed"
done

# 4. report -o while gnuplot draws: the gnuplot folder and the child go with the signal.
cat >"$TMP/slow-gnuplot" <<EOF
#!/bin/sh
echo \$\$ >"$TMP/gnuplot.pid"
exec sleep 60
EOF
chmod +x "$TMP/slow-gnuplot"
rm -f "$TMP/gnuplot.pid"
XFPROF_GNUPLOT="$TMP/slow-gnuplot" "$XF" report "$TMP/pred.json" -o "$TMP/rep.html" >/dev/null 2>&1 &
pid=$!
wait_for 20 test -s "$TMP/gnuplot.pid" || bad "report: the fake gnuplot did not start"
ls -d "$TMPDIR"/xfprof-gnuplot-* >/dev/null 2>&1 && ok "report: gnuplot folder exists while it draws" || bad "report: no gnuplot folder seen"
kill -INT "$pid"
wait "$pid"
rc=$?
[ "$rc" -eq 130 ] && ok "report, SIGINT: exit 130" || bad "report, SIGINT: exit $rc"
no_temps "$TMPDIR" && ok "report, SIGINT: gnuplot folder removed" || bad "report, SIGINT left $(ls -A "$TMPDIR")"
gp=$(cat "$TMP/gnuplot.pid" 2>/dev/null || echo 0)
alive() { local st; st=$(ps -o stat= -p "$1" 2>/dev/null); [ -n "$st" ] && [ "${st#Z}" = "$st" ]; } # a zombie is gone
if [ "$gp" != 0 ] && wait_for 2 sh -c "! ps -o stat= -p $gp | grep -qv Z"; then ok "report, SIGINT: gnuplot stopped"
else bad "report, SIGINT: gnuplot ($gp) still runs"; alive "$gp" && kill -9 "$gp"; fi
[ ! -e "$TMP/rep.html" ] && ok "report, SIGINT: no half report" || bad "report, SIGINT: a report was written"

exit $fail
