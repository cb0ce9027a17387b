#!/usr/bin/env bash
# report / show read big sweep records in a stream (issue 19, item 1): a record above 64 MiB is
# read point by point, every point's summary kept and the ops of the first 256 and of --point only,
# so memory does not grow with the file. XFPROF_TEST_STREAM_BYTES (test-only) lowers the 64 MiB so
# that records of a few tens of MB take the streamed path here. $1 = xfprof.
set -u
XF=${1:?usage: cli_record_stream.sh path/to/xfprof}
. "$(dirname "$0")/lib.sh" # $tmp/$TMP (removed at exit) and the helpers
. "$(dirname "$0")/peak_rss.sh" # ASAN_OPTIONS for RSS, peak_kib

"$XF" sweep --predict --batch 1..600+1 -o "$TMP/s600.json" >/dev/null 2>&1 || bad "600-point sweep failed"
"$XF" sweep --predict --batch 1..1200+1 -o "$TMP/s1200.json" >/dev/null 2>&1 || bad "1200-point sweep failed"
kib600=$(( $(stat -c %s "$TMP/s600.json") / 1024 ))
kib1200=$(( $(stat -c %s "$TMP/s1200.json") / 1024 ))
# Side by side in this run: read whole (the stream threshold above the file) and streamed.
whole=$(XFPROF_TEST_STREAM_BYTES=100000000000 peak_kib "$XF" report --format md -o "$TMP/w.md" "$TMP/s600.json") ||
    bad "whole report of 600 points failed"
export XFPROF_TEST_STREAM_BYTES=1000000
a=$(peak_kib "$XF" report --format md -o "$TMP/a.md" "$TMP/s600.json") || bad "report of 600 points failed"
b=$(peak_kib "$XF" report --format md -o "$TMP/b.md" "$TMP/s1200.json") || bad "report of 1200 points failed"
h=$(peak_kib "$XF" report --no-charts -o "$TMP/b.html" "$TMP/s1200.json") || bad "report html of 1200 points failed"
"$XF" show --format md "$TMP/s1200.json" >"$TMP/c.md" 2>"$TMP/err" || bad "show of 1200 points: $(cat "$TMP/err")"
echo "records: ${kib600} KiB (600 points), ${kib1200} KiB (1200 points); peak RSS of report --format md:" \
    "600 points read whole ${whole} KiB, streamed ${a} KiB; 1200 points streamed ${b} KiB (html ${h} KiB)"
# Read whole, a record takes about 9-10 times its size (the text, cJSON's tree, the structs).
[ "${a:-0}" -gt 0 ] && [ "$a" -lt $((whole / 3)) ] && ok "streamed: less than a third of reading whole (${a} < ${whole} KiB)" ||
    bad "streamed report took ${a:-?} KiB, read whole ${whole:-?} KiB"
[ "${b:-0}" -gt 0 ] && [ "$b" -lt $((a * 5 / 4)) ] && ok "twice the points, less than 1.25x the memory (${a} -> ${b} KiB)" ||
    bad "memory grows with the points: ${a:-?} -> ${b:-?} KiB"
[ "${h:-0}" -gt 0 ] && [ "$h" -lt $((whole / 3)) ] &&
    ok "report html of 1200 points: less than a third of reading 600 whole (${h} < ${whole} KiB)" ||
    bad "report html of a ${kib1200} KiB record took ${h:-?} KiB (600 points read whole: ${whole:-?} KiB)"
# a streamed record without all its ops is never written again (it would lose them)
out=$("$XF" show --format json "$TMP/s1200.json" 2>&1 >/dev/null); rc=$?
[ "$rc" = 2 ] && printf '%s' "$out" | grep -q "not written again" && ok "show --format json of it: exit 2, not written with ops missing" ||
    bad "show --format json of a streamed record: exit $rc: $out"
# compare goes op by op: it refuses a record that kept the ops of only some points, saying why
out=$("$XF" compare "$TMP/s1200.json" "$TMP/s1200.json" 2>&1 >/dev/null); rc=$?
[ "$rc" = 2 ] && printf '%s' "$out" | grep -q "ops of only 256 of its 1200 points" && ok "compare of it: exit 2, says why" ||
    bad "compare of a streamed record: exit $rc: $out"
# every point is in the tables; the detailed sections of --point have their ops
rows=$(grep -c '^| [0-9]' "$TMP/c.md")
[ "$rows" -ge 1200 ] && ok "show md lists all 1200 points" || bad "show md lists $rows points"
grep -q "The ops of 944 points are not shown: the record was read in a stream" "$TMP/c.md" &&
    [ "$(grep -c '<details>' "$TMP/c.md")" = 256 ] && ok "show md: the ops of the first 256 points, and says the rest are not shown" ||
    bad "show md does not say which ops it left out"
grep -q '<h4>Every point</h4>' "$TMP/b.html" && ok "the html has the sweep's table of every point" || bad "no sweep table in the html"
"$XF" report --no-charts --point 900 -o "$TMP/p.html" "$TMP/s1200.json" 2>/dev/null
grep -q 'id="r0-pipeline"' "$TMP/p.html" &&
    ok "--point 900 keeps the ops of point 900 (pipeline section drawn)" || bad "--point 900 lost its ops"

# A record of at most 256 points renders the same bytes streamed or read whole.
unset XFPROF_TEST_STREAM_BYTES
"$XF" sweep --predict --batch 1..64+1 --prompt 16,128 --gen 8,32 -o "$TMP/s256.json" >/dev/null 2>&1 || bad "256-point sweep failed"
same=1
for f in table csv md json; do
    "$XF" show --format "$f" "$TMP/s256.json" >"$TMP/w.$f" 2>&1
    XFPROF_TEST_STREAM_BYTES=0 "$XF" show --format "$f" "$TMP/s256.json" >"$TMP/s.$f" 2>&1
    cmp -s "$TMP/w.$f" "$TMP/s.$f" || { same=0; bad "show --format $f differs when streamed"; }
done
"$XF" report --no-charts -o "$TMP/w.html" "$TMP/s256.json" 2>/dev/null
XFPROF_TEST_STREAM_BYTES=0 "$XF" report --no-charts -o "$TMP/s.html" "$TMP/s256.json" 2>/dev/null
cmp -s "$TMP/w.html" "$TMP/s.html" || { same=0; bad "report html differs when streamed"; }
cmp -s "$TMP/s.json" "$TMP/s256.json" || { same=0; bad "streamed read does not write back the same record"; }
[ "$same" = 1 ] && ok "256 points: show (table, csv, md, json) and report html the same bytes streamed and whole"

# The streamed reader refuses what the whole reader refuses, exit 2, naming what was wrong.
export XFPROF_TEST_STREAM_BYTES=0
small="$TMP/s256.json"
refuse() { # name, file, what the message must say
    out=$("$XF" show "$2" 2>&1 >/dev/null); rc=$?
    [ "$rc" = 2 ] && printf '%s' "$out" | grep -q "$3" && ok "$1: exit 2, \"$3\"" || bad "$1: exit $rc: $out"
}
head -c 300000 "$small" >"$TMP/cut.json"
refuse "a truncated record" "$TMP/cut.json" "truncated"
python3 - "$small" "$TMP" <<'EOF'
import sys
t = open(sys.argv[1]).read()
d = sys.argv[2]
i = t.index('"points":[') + len('"points":[')
j = t.index('},{"workload"', i) + 1
open(d + "/nocomma.json", "w").write(t[:j] + " " + t[j + 1:])
open(d + "/scalar.json", "w").write(t[:i] + "1," + t[i:])
open(d + "/twice.json", "w").write(t[:i - len('"points":[')] + '"points":[],' + t[i - len('"points":['):])
open(d + "/badop.json", "w").write(t.replace('"phase":"decode"', '"phase":"sideways"', 1))
EOF
refuse "a missing comma between points" "$TMP/nocomma.json" "missing"
refuse "a point that is not an object" "$TMP/scalar.json" "must be an object"
refuse "'points' given twice" "$TMP/twice.json" "twice"
refuse "a bad op inside a point" "$TMP/badop.json" "unknown phase 'sideways'"
exit $fail
