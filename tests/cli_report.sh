#!/usr/bin/env bash
# xfprof report from the outside: predict -> record -> HTML report and trace; Markdown; records of
# another format or version refused with exit status 2; gnuplot absent -> still written.
set -u
XF=${1:?usage: cli_report.sh path/to/xfprof}
. "$(dirname "$0")/lib.sh" # $tmp/$TMP (removed at exit) and the helpers

"$XF" report --help >"$tmp/out" 2>&1 || fail "report --help exited $?"
grep -q "Usage: xfprof report" "$tmp/out" || fail "report --help printed no usage"

# A predict record, then its report and trace.
"$XF" predict --model llama-2-7b --device h100-sxm --batch 1,8 --prompt 512 --gen 128 --format json -o "$tmp/rec.json" 2>"$tmp/err" ||
  fail "predict -o rec.json exited $?: $(head -c 300 "$tmp/err")"
expect 0 "wrote" -- report "$tmp/rec.json" -o "$tmp/r.html" --trace "$tmp/t.json"
[ -s "$tmp/r.html" ] || fail "no report written"
grep -q '</html>' "$tmp/r.html" || fail "report is not a whole page"
for sec in summary pipeline roofline layers optable sweep; do
  grep -q "class=\"sec-$sec\"" "$tmp/r.html" || fail "report lacks section $sec"
done
grep -q 'class="sec-kv"' "$tmp/r.html" && fail "report has a KV section but the record has no KV data"
if command -v gnuplot >/dev/null; then
  n=$(grep -c '<svg' "$tmp/r.html")
  [ "$n" -ge 6 ] || fail "expected at least 6 charts (roofline, 2 per-layer, 3 sweep), found $n"
fi
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["displayTimeUnit"]=="ns"; assert all("ph" in e and "pid" in e and "tid" in e and "name" in e for e in d["traceEvents"]); assert sum(e["ph"]=="X" for e in d["traceEvents"])>0' "$tmp/t.json" ||
  fail "trace is not Trace Event JSON"

# The TTFT of the page is the record's: the record's first point's ttft_s in ms, 3 figures.
ttft=$(python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["points"][0]["summary"]["ttft_s"]*1e3; print(("%.2f" if t<10 else "%.1f" if t<100 else "%.0f") % t)' "$tmp/rec.json")
grep -q "id=\"r0-ttft\">$ttft ms<" "$tmp/r.html" || fail "page TTFT is not the record's $ttft ms"

# --point picks the detailed point; out of range is a usage error.
expect 0 "" -- report "$tmp/rec.json" --point 2 -o "$tmp/r2.html" --no-charts
expect 2 "points" -- report "$tmp/rec.json" --point 3 -o "$tmp/r3.html"

# Without gnuplot the report is still written, with the note.
XFPROF_GNUPLOT=/nonexistent "$XF" report "$tmp/rec.json" -o "$tmp/nog.html" 2>"$tmp/err" || fail "report without gnuplot exited $?"
grep -q 'id="gnuplot-note"' "$tmp/nog.html" || fail "no gnuplot note in a report made without gnuplot"
grep -q '<svg' "$tmp/nog.html" && fail "charts in a report made without gnuplot"
grep -q 'gnuplot' "$tmp/err" || fail "no message about gnuplot on stderr"

# Markdown, when the text renderer is there.
expect 0 "" -- report "$tmp/rec.json" --format md
grep -q "TTFT" "$tmp/out" || fail "report --format md printed no TTFT"

# Records of another format or a newer version are refused with exit 2; garbage too.
python3 - "$tmp/rec.json" "$tmp" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
o = dict(d); o["format"] = "something-else"; json.dump(o, open(sys.argv[2] + "/other.json", "w"))
v = dict(d); v["version"] = 999; json.dump(v, open(sys.argv[2] + "/newer.json", "w"))
PY
expect 2 "format" -- report "$tmp/other.json" -o "$tmp/x.html"
expect 2 "version" -- report "$tmp/newer.json" -o "$tmp/x.html"
printf '{"format":"xfprof-record","version":1,' >"$tmp/trunc.json"
expect 2 "" -- report "$tmp/trunc.json" -o "$tmp/x.html"
[ -e "$tmp/x.html" ] && fail "a refused record left a report"
expect 4 "" -- report "$tmp/missing.json" -o "$tmp/x.html"
expect 2 "record" -- report -o "$tmp/x.html"
expect 2 "format" -- report "$tmp/rec.json" --format pdf

# An existing report is replaced whole, and a failed write leaves it intact.
cp "$tmp/r.html" "$tmp/keep.html"
chmod 500 "$tmp" 2>/dev/null
if [ "$(id -u)" -ne 0 ]; then
  expect 4 "" -- report "$tmp/rec.json" -o "$tmp/keep.html" --no-charts
  cmp -s "$tmp/r.html" "$tmp/keep.html" || fail "failed write changed the old report"
fi
chmod 700 "$tmp"
expect 4 "" -- report "$tmp/rec.json" -o /dev/full/r.html --no-charts

if [ "$fails" -ne 0 ]; then echo "$fails failure(s)"; exit 1; fi
echo "cli_report: all passed"
