#!/usr/bin/env bash
# A sweep's memory does not grow with its points (issue 19, item 1): the points stream through a
# spool to the record, which is byte for byte the record written from memory. $1 = xfprof.
set -u
XF=${1:?usage: cli_sweep_stream.sh path/to/xfprof}
. "$(dirname "$0")/lib.sh" # $tmp/$TMP (removed at exit) and the helpers
export TMPDIR="$TMP/scratch"
mkdir -p "$TMPDIR"
. "$(dirname "$0")/peak_rss.sh" # ASAN_OPTIONS for RSS, peak_kib

small=$(peak_kib "$XF" sweep --predict --batch 1..300+1 -o "$TMP/s300.json") || bad "300-point sweep failed"
large=$(peak_kib "$XF" sweep --predict --batch 1..1200+1 -o "$TMP/s1200.json") || bad "1200-point sweep failed"
echo "peak RSS: 300 points ${small} KiB, 1200 points ${large} KiB"
# Holding every point grew by about 620 KiB a point (900 more points: +540 MiB); streaming holds
# about 1 KiB a point beyond the first 256 of each record.
[ "$large" -lt $((small * 3 / 2)) ] && ok "4x the points, less than 1.5x the memory (${small} -> ${large} KiB)" ||
    bad "memory grows with the points: ${small} -> ${large} KiB"
python3 - "$TMP/s1200.json" <<'EOF' && ok "the streamed record reads as JSON with its 1200 points and advice" || bad "streamed record content"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["format"] == "xfprof-record" and r["kind"] == "sweep"
assert len(r["points"]) == 1200, len(r["points"])
assert all(len(p["ops"]) > 0 for p in r["points"])
assert "advice" in r
EOF
"$XF" show "$TMP/s1200.json" --format md >/dev/null 2>"$TMP/err" && ok "show reads it" || bad "show: $(cat "$TMP/err")"
# the same sweep written from memory (a csv rendering keeps every op) gives the same bytes
"$XF" sweep --predict --batch 1..300+1 --format csv -o "$TMP/full.json" >/dev/null 2>&1 || bad "full-mode sweep failed"
sed 's/"created":"[^"]*"//' "$TMP/s300.json" >"$TMP/a"
sed 's/"created":"[^"]*"//' "$TMP/full.json" >"$TMP/b"
cmp -s "$TMP/a" "$TMP/b" && ok "streamed and in-memory records are the same bytes" || bad "streamed record differs from the in-memory one"
[ -z "$(ls -A "$TMPDIR")" ] && ok "no spool left in TMPDIR" || bad "left in TMPDIR: $(ls -A "$TMPDIR")"
# a signal while the record is written from the spool removes the spool and the temporary
XFPROF_TEST_WRITE_PAUSE_MS=30000 "$XF" sweep --predict --batch 1..300+1 -o "$TMP/sig.json" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 400); do ls "$TMP"/sig.json.tmp* >/dev/null 2>&1 && break; sleep 0.05; done
kill -TERM "$pid"
sleep 0.1
kill -TERM "$pid" 2>/dev/null
wait "$pid"
[ -z "$(ls -A "$TMPDIR")" ] && ok "SIGTERM: spool removed" || bad "SIGTERM left in TMPDIR: $(ls -A "$TMPDIR")"
ls "$TMP"/sig.json* >/dev/null 2>&1 && bad "SIGTERM left $(ls "$TMP"/sig.json*)" || ok "SIGTERM: no record, no temporary"
exit $fail
