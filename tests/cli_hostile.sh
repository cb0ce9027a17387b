#!/usr/bin/env bash
# Hostile and unlucky inputs (issue 19, items 2, 3 and 7): what xfprof writes it reads; nothing
# from a file drives the terminal; records that break the schema are refused with the reason.
# $1 = the xfprof binary.
set -u
XF=${1:?usage: cli_hostile.sh path/to/xfprof}
. "$(dirname "$0")/lib.sh" # $tmp/$TMP (removed at exit) and the helpers
has() { grep -q -- "$2" "$1" && ok "$3" || bad "$3: '$2' not in $(head -c 300 "$1")"; }
# No raw control byte (but tab and newline), no C1 control, no invalid UTF-8 in the file.
clean_bytes() {
    python3 - "$1" <<'EOF'
import sys
b = open(sys.argv[1], 'rb').read()
bad = [c for c in b if (c < 0x20 and c not in (9, 10)) or c == 0x7f]
try:
    t = b.decode('utf-8')
except UnicodeDecodeError as e:
    sys.exit("invalid UTF-8: %s" % e)
c1 = [ch for ch in t if 0x80 <= ord(ch) <= 0x9f]
sys.exit(1 if bad or c1 else 0)
EOF
}

# ---- item 2: device ceilings are checked on input; what predict writes, show reads ----
cat >"$TMP/tiny.json" <<'EOF'
{"format":"xfprof-devices","version":1,"devices":[{"name":"tiny","kind":"gpu","memory_bytes":8e9,
 "bandwidth_Bps":1,"peak_flops":{"fp32":1e-300}}]}
EOF
expect_rc 2 "predict with a 1 B/s device is refused" "$XF" predict --device-file "$TMP/tiny.json" --device tiny -o "$TMP/t.json"
has "$TMP/err" "bandwidth_Bps' = 1 B/s is below" "the message names the field, the value and the unit"
[ ! -e "$TMP/t.json" ] && ok "no record written" || bad "a record was written"
sed 's/"bandwidth_Bps":1,/"bandwidth_Bps":1e9,/' "$TMP/tiny.json" >"$TMP/tiny2.json"
expect_rc 2 "a peak of 1e-300 FLOP/s is refused" "$XF" predict --device-file "$TMP/tiny2.json" --device tiny
has "$TMP/err" "FLOP/s" "the message has the unit FLOP/s"
sed 's/"bandwidth_Bps":1,/"bandwidth_Bps":1e6,/; s/1e-300/1e6/' "$TMP/tiny.json" >"$TMP/slow.json"
expect_rc 0 "the slowest accepted device predicts" "$XF" predict --device-file "$TMP/slow.json" --device tiny --model llama-2-7b -o "$TMP/slow-rec.json"
grep -q null "$TMP/slow-rec.json" && bad "the record holds null" || ok "no null in the record"
expect_rc 0 "show reads what predict wrote" "$XF" show "$TMP/slow-rec.json"
expect_rc 0 "compare reads it" "$XF" compare "$TMP/slow-rec.json" "$TMP/slow-rec.json"

# ---- item 3: strings from files are escaped on the terminal and in Markdown ----
"$XF" predict --model stories15m -o "$TMP/p.json" >/dev/null 2>&1 || bad "predict for the hostile record"
python3 - "$TMP/p.json" "$TMP/evil.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
r["model"]["name"] = "m\x1b]0;pwned\x07\x1b[2J\u009b31m"
r["device"]["description"] = "d\x1b[5m"
json.dump(r, open(sys.argv[2], "w"))
EOF
printf '\xff\xfe' >"$TMP/raw"
python3 - "$TMP/p.json" "$TMP/evil-utf8.json" <<'EOF'
import sys
t = open(sys.argv[1], 'rb').read().replace(b'"name":"stories15m"', b'"name":"st\xff\xc0\xafx"', 1)
open(sys.argv[2], 'wb').write(t)
EOF
for fmt in table md csv; do
    "$XF" show "$TMP/evil.json" --format $fmt >"$TMP/o.$fmt" 2>&1
    clean_bytes "$TMP/o.$fmt" && ok "show --format $fmt: no control byte reaches the terminal" || bad "show --format $fmt passes control bytes"
    has "$TMP/o.$fmt" 'pwned\\x07' "show --format $fmt writes BEL as \\x07"
    has "$TMP/o.$fmt" 'm\\x1b' "show --format $fmt writes ESC as \\x1b"
done
"$XF" report "$TMP/evil.json" --format md -o - >"$TMP/o.rmd" 2>&1
clean_bytes "$TMP/o.rmd" && ok "report --format md: escaped" || bad "report --format md passes control bytes"
"$XF" show "$TMP/evil-utf8.json" >"$TMP/o.u8" 2>&1
clean_bytes "$TMP/o.u8" && ok "show: invalid UTF-8 escaped" || bad "show passes invalid UTF-8"
has "$TMP/o.u8" 'st\\xff\\xc0\\xafx' "invalid bytes as \\xNN"
# error messages that quote a file's value
sed 's/"phase":"prefill"/"phase":"\\u001b[2J\\u0007"/' "$TMP/p.json" >"$TMP/evil-phase.json"
expect_rc 2 "a record with a bad phase is refused" "$XF" show "$TMP/evil-phase.json"
clean_bytes "$TMP/err" && ok "the error message is escaped" || bad "the error message passes control bytes"
has "$TMP/err" 'unknown phase' "the error says what was wrong"
printf '{"format":"xfprof-record\xff\x1b[2J"}' >"$TMP/evil-fmt.json"
expect_rc 2 "a record with a hostile format string is refused" "$XF" show "$TMP/evil-fmt.json"
clean_bytes "$TMP/err" && ok "that message is escaped too" || bad "the format message passes raw bytes"

# ---- item 7: the smaller ones ----
edit() { # in out python-expression-on-r
    python3 - "$1" "$2" "$3" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
exec(sys.argv[3])
json.dump(r, open(sys.argv[2], "w"))
EOF
}
edit "$TMP/p.json" "$TMP/k.json" 'r["kind"] = "bogus"'
expect_rc 2 "kind bogus is refused" "$XF" show "$TMP/k.json"
has "$TMP/err" "unknown kind 'bogus'" "the message names the kind"
edit "$TMP/p.json" "$TMP/b.json" 'r["points"][0]["ops"][0]["weight_bytes"] = 1e19'
expect_rc 2 "a byte count past 2^63 is refused" "$XF" show "$TMP/b.json"
has "$TMP/err" "beyond a 64-bit byte count" "the message gives the range"
edit "$TMP/p.json" "$TMP/e.json" 'r["points"] = []'
expect_rc 2 "points [] is refused" "$XF" show "$TMP/e.json"
has "$TMP/err" "'points' is empty" "the message says the record holds no result"
"$XF" kv --model stories15m --requests 5 -o "$TMP/kv.json" >/dev/null 2>&1
expect_rc 0 "a kv record (no points, a kv section) still reads" "$XF" show "$TMP/kv.json"
python3 -c "print('[' * 100000)" >"$TMP/deep.json"
expect_rc 2 "100k-deep nesting is refused" "$XF" show "$TMP/deep.json"
has "$TMP/err" "nested more than 1000 deep" "the message says nested too deeply"
XFPROF_TEST_MEM_AVAILABLE=100000 expect_rc 4 "a record too large for the memory available is refused" "$XF" show "$TMP/p.json"
has "$TMP/err" "times that" "the message gives the memory it needs and what is available"
mkdir -p "$TMP/m"
export XFPROF_MACHINE_FILE="$TMP/m/machine.json"
expect_rc 4 "machine -o into a missing folder is refused" "$XF" machine --quick -o "$TMP/missing/dir/m.json"
[ ! -e "$TMP/missing" ] && ok "no folder created" || bad "machine created $TMP/missing"
has "$TMP/err" "does not exist" "the message says the folder does not exist"
# run checks the memory available now, not the total
cat >"$XFPROF_MACHINE_FILE" <<'EOF'
{"format":"xfprof-devices","version":1,"devices":[{"name":"cpu","description":"test CPU","kind":"cpu",
 "memory_bytes":8e9,"bandwidth_Bps":1e10,"peak_flops":{"fp32":1e11},"measured":true,"source":"test, 1 threads"}]}
EOF
XFPROF_TEST_MEM_AVAILABLE=10000000 expect_rc 2 "run refuses a model larger than the memory available" "$XF" run --reps 1 --warmup 0 --prompt 4 --gen 1 --threads 1
has "$TMP/err" "available now" "the message says available, with the total"

# ---- item 4: kv --requests within what the machine can do, progress on a terminal ----
start=$(date +%s)
expect_rc 2 "kv --requests 100000000 is refused" "$XF" kv --model stories15m --requests 100000000
[ $(($(date +%s) - start)) -lt 10 ] && ok "refused at once" || bad "took $(($(date +%s) - start)) s to refuse"
has "$TMP/err" "at most 10000000 here" "the message gives the limit"
has "$TMP/err" "bytes while it is simulated" "the message says what each request holds"
XFPROF_TEST_MEM_AVAILABLE=100000000 expect_rc 2 "kv --requests 1000000 with 95 MiB available is refused" "$XF" kv --model stories15m --requests 1000000
has "$TMP/err" "at most 520833 here" "the limit follows the memory available" # 50,000,000 / 96 B per request
if command -v script >/dev/null; then
    script -qc "'$XF' kv --model stories15m --requests 100000 --policy paged:16" /dev/null >"$TMP/tty.out" 2>&1
    tr '\r' '\n' <"$TMP/tty.out" | grep -q "requests done | elapsed .* | ETA" && ok "kv: a progress line with ETA on a terminal" ||
        bad "kv: no progress line on a terminal: $(head -c 200 "$TMP/tty.out")"
fi
"$XF" kv --model stories15m --requests 60000 --policy paged:16 >/dev/null 2>"$TMP/notty.err"
grep -q "ETA" "$TMP/notty.err" && bad "kv: progress line written to a file" || ok "kv: no progress line when stderr is not a terminal"

exit $fail
