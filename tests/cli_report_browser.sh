#!/usr/bin/env bash
# The HTML report in a real browser (headless Chromium): it loads with no console errors, its
# charts are non-empty SVGs in the DOM, and a screenshot is kept as a test artifact in the build
# folder (test-artifacts/report.png). Skipped (exit 77) when chromium is not installed.
set -u
XF=${1:?usage: cli_report_browser.sh path/to/xfprof}
CHROMIUM=${CHROMIUM:-}
if [ -z "$CHROMIUM" ]; then
  for c in chromium chromium-browser google-chrome; do
    if command -v "$c" >/dev/null 2>&1; then CHROMIUM=$c; break; fi
  done
fi
if [ -z "$CHROMIUM" ]; then echo "SKIP: chromium not installed"; exit 77; fi
. "$(dirname "$0")/lib.sh" # $tmp/$TMP (removed at exit) and the helpers
artifacts="$(cd "$(dirname "$XF")" && pwd)/test-artifacts"
mkdir -p "$artifacts"

chrome() { # chrome LOG ARGS...: headless, its own profile, a time limit
  local log=$1; shift
  timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$tmp/profile" \
    --enable-logging=stderr --v=0 "$@" 2>"$log"
}

# The control: a page with a script error must be caught, or this test could never fail.
printf '<!DOCTYPE html><html><body><script>notDefinedAnywhere();</script></body></html>\n' >"$tmp/bad.html"
chrome "$tmp/bad.log" --dump-dom "file://$tmp/bad.html" >/dev/null
grep -q "Uncaught" "$tmp/bad.log" || fail "the console check does not see a known script error: $(tail -c 400 "$tmp/bad.log")"

# A real report: a predict sweep of llama-2-7b on an H100.
"$XF" predict --model llama-2-7b --device h100-sxm --batch 1,8,64 --prompt 512,2048 --gen 128 --format json \
  -o "$tmp/rec.json" 2>"$tmp/err" || fail "predict exited $?: $(head -c 300 "$tmp/err")"
"$XF" report "$tmp/rec.json" -o "$tmp/report.html" 2>"$tmp/err" || fail "report exited $?: $(head -c 300 "$tmp/err")"
with_charts=1
command -v gnuplot >/dev/null 2>&1 || with_charts=0

chrome "$tmp/dom.log" --dump-dom "file://$tmp/report.html" >"$tmp/dom.html"
for bad in "Uncaught" "SyntaxError" "ReferenceError" "TypeError"; do
  grep -q "$bad" "$tmp/dom.log" && fail "console error '$bad': $(grep -m1 "$bad" "$tmp/dom.log")"
done
grep -q 'class="sec-roofline"' "$tmp/dom.html" || fail "the DOM has no roofline section"
grep -q 'class="sec-optable"' "$tmp/dom.html" || fail "the DOM has no op table"
if [ "$with_charts" -eq 1 ]; then
  # every <svg> in the DOM holds drawn paths; at least the roofline, 2 per-layer and 3 sweep charts
  python3 - "$tmp/dom.html" <<'PY' || fail "charts missing or empty in the DOM"
import re, sys
dom = open(sys.argv[1], encoding="utf-8").read()
svgs = re.findall(r"<svg\b.*?</svg>", dom, re.S)
assert len(svgs) >= 6, f"{len(svgs)} svg elements"
for s in svgs:
    assert s.count("<path") >= 5, "an svg with almost nothing drawn"
    assert re.search(r'viewBox="0 0 \d+ \d+"', s), "an svg without size"
print(f"{len(svgs)} charts in the DOM")
PY
fi

# The sort works: click the op table's "time" header (ascending), read the rows back in order.
sed 's|</body>|<script>var t=document.getElementById("r0-ops");var h=Array.prototype.find.call(t.tHead.rows[0].cells,function(c){return c.textContent==="time";});h.click();document.body.setAttribute("data-sorted",Array.prototype.map.call(t.tBodies[0].rows,function(r){return r.cells[h.cellIndex].dataset.v;}).join(","));</script></body>|' \
  "$tmp/report.html" >"$tmp/sorted.html"
chrome "$tmp/sorted.log" --dump-dom "file://$tmp/sorted.html" >"$tmp/sorted.dom"
grep -q "Uncaught" "$tmp/sorted.log" && fail "sorting raised: $(grep -m1 Uncaught "$tmp/sorted.log")"
python3 - "$tmp/sorted.dom" <<'PY' || fail "clicking the time header does not sort the op table"
import re, sys
m = re.search(r'data-sorted="([^"]*)"', open(sys.argv[1], encoding="utf-8").read())
v = [float(x) for x in m.group(1).split(",")]
assert len(v) > 100 and v == sorted(v) and v[0] < v[-1], v[:5]
PY

chrome "$tmp/shot.log" --screenshot="$artifacts/report.png" --window-size=1400,3000 --hide-scrollbars "file://$tmp/report.html" >/dev/null
[ -s "$artifacts/report.png" ] || fail "no screenshot"
size=$(stat -c %s "$artifacts/report.png" 2>/dev/null || echo 0)
[ "$size" -gt 20000 ] || fail "screenshot of $size bytes: a blank page?"
cp "$tmp/report.html" "$artifacts/report.html"

if [ "$fails" -ne 0 ]; then echo "$fails failure(s)"; exit 1; fi
echo "cli_report_browser: all passed (screenshot: $artifacts/report.png)"
