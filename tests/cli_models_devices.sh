#!/usr/bin/env bash
# xfprof models / xfprof devices: output, --help, bad input and exit codes. $1 = the xfprof binary.
set -u
XF="$1"
SRC="${XF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
. "$(dirname "$0")/lib.sh" # $tmp/$TMP (removed at exit) and the helpers

out=$("$XF" models); check "models" 0 $?
has "models lists llama-2-7b with 6.74B params" "$(echo "$out" | grep '^llama-2-7b ')" "6.74B"
has "models: llama-2-7b KV fp16 = 524288 B/token" "$(echo "$out" | grep '^llama-2-7b ')" "524288"
has "models: llama-3-8b KV fp16 = 131072 B/token" "$(echo "$out" | grep '^llama-3-8b ')" "131072"
out=$("$XF" models --format json); check "models json" 0 $?
has "models json params" "$out" "6738415616"
out=$("$XF" models --model "$SRC/tests/data/tinyllama-1.1b-chat"); check "models --model folder" 0 $?
has "models --model folder name" "$out" "tinyllama-1.1b-chat"
"$XF" models --help >"$tmp/h" 2>&1; check "models --help" 0 $?
"$XF" models --format xml 2>"$tmp/e"; check "models bad format" 2 $?
"$XF" models --model gpt-9 2>"$tmp/e"; check "models unknown model" 2 $?
has "unknown model names presets" "$(cat "$tmp/e")" "stories15m"
printf '{"model_type":"gpt2","hidden_size":768}' >"$tmp/config.json"
"$XF" models --model "$tmp/config.json" 2>"$tmp/e"; check "models unknown model_type" 2 $?
has "message names model_type" "$(cat "$tmp/e")" "model_type"
printf '{"model_type":"llama","hidden_size":' >"$tmp/config.json"
"$XF" models --model "$tmp" 2>"$tmp/e"; check "models truncated config" 2 $?

out=$("$XF" devices); check "devices" 0 $?
has "devices h100-sxm ridge 295.3" "$(echo "$out" | grep '^h100-sxm ')" "295.3"
has "devices a100-40gb ridge 200.6" "$(echo "$out" | grep '^a100-40gb ')" "200.6"
"$XF" devices --format json >"$tmp/d.json"; check "devices json" 0 $?
"$XF" devices --device-file "$tmp/d.json" >/dev/null; check "devices json output reads back as a devices file" 0 $?
"$XF" devices --device-file "$SRC/tests/data/devices_custom.json" >"$tmp/o"; check "devices --device-file" 0 $?
has "custom device listed" "$(cat "$tmp/o")" "my-gpu"
"$XF" devices --help >/dev/null; check "devices --help" 0 $?
# A name longer than 12 characters keeps every column aligned: each column ends at the same place in
# the header and in every row.
sed 's/"my-gpu"/"my-very-long-accelerator-name"/' "$SRC/tests/data/devices_custom.json" >"$tmp/long.json"
"$XF" devices --device-file "$tmp/long.json" >"$tmp/o"; check "devices with a long name" 0 $?
# where each right-aligned column (the third on) ends
ends() { awk '{ s = $0; e = ""; p = 0; k = 0; while (match(s, /[^ ]+/)) { p += RSTART + RLENGTH - 1; if (++k > 2) e = e " " p; s = substr(s, RSTART + RLENGTH) } print e }'; }
hdr=$(head -1 "$tmp/o" | ends)
bad=$(awk '/^(my-|a100|h100)/' "$tmp/o" | ends | grep -cvx -- "$hdr")
if [ "$bad" -eq 0 ] && grep -q '^my-very-long-accelerator-name ' "$tmp/o"; then echo "ok: devices columns aligned with a long name"
else echo "FAIL: devices columns misaligned with a long name:"; cat "$tmp/o"; fail=1; fi
printf '{"format":"xfprof-devices","version":9,"devices":[]}' >"$tmp/v9.json"
"$XF" devices --device-file "$tmp/v9.json" 2>"$tmp/e"; check "devices newer version" 2 $?
has "newer version message" "$(cat "$tmp/e")" "newer"
"$XF" devices --device-file "$tmp/none.json" 2>"$tmp/e"; check "devices missing file" 2 $?
XFPROF_DATA_DIR=/nonexistent "$XF" devices >/dev/null 2>&1; check "devices with a wrong XFPROF_DATA_DIR still finds the installed data" 0 $?
exit $fail
