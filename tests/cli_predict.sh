#!/usr/bin/env bash
# xfprof predict from the outside: every preset and device, every format, HF configs, and bad
# input giving a clear message and exit status 2 (never a crash).
set -u
XF=${1:?usage: cli_predict.sh path/to/xfprof}
. "$(dirname "$0")/lib.sh" # $tmp/$TMP (removed at exit) and the helpers

presets="stories15m stories110m tinyllama-1.1b llama-2-7b llama-2-13b llama-2-70b llama-3-8b llama-3-70b mistral-7b qwen2.5-7b"
devices="a100-40gb a100-80gb h100-sxm h100-pcie h200 l4 rtx-4090"
for m in $presets; do
  for d in $devices; do
    "$XF" predict --model "$m" --device "$d" --batch 1,8 --prompt 256 --gen 32 >"$tmp/out" 2>"$tmp/err" ||
      fail "predict $m on $d exited $?: $(head -c 300 "$tmp/err")"
    grep -q "TTFT" "$tmp/out" || fail "predict $m on $d printed no TTFT"
  done
done

# The README's example, every format; json is a record that xfprof reads back.
args=(predict --model llama-2-7b --device h100-sxm --batch 1,8,64 --prompt 512 --gen 128 --wdtype bf16 --kvdtype fp16)
"$XF" "${args[@]}" >"$tmp/t.txt" || fail "README example failed"
[ "$(grep -c '^== point' "$tmp/t.txt")" -eq 3 ] || fail "README example: expected 3 points"
"$XF" "${args[@]}" --format json -o "$tmp/r.json" 2>/dev/null || fail "json output failed"
grep -q '"format":[[:space:]]*"xfprof-record"' "$tmp/r.json" || fail "json lacks the format tag"
"$XF" show "$tmp/r.json" >"$tmp/shown.txt" || fail "show could not read the record back"
cmp -s "$tmp/t.txt" "$tmp/shown.txt" || fail "show of the saved record differs from the direct table"
"$XF" "${args[@]}" --format csv >"$tmp/r.csv" || fail "csv output failed"
# 3 points x (4 + 12 * 32) ops x 2 phases, plus the header line
[ "$(wc -l <"$tmp/r.csv")" -eq $((3 * 2 * (4 + 12 * 32) + 1)) ] || fail "csv has $(wc -l <"$tmp/r.csv") lines"
"$XF" "${args[@]}" --format md >"$tmp/r.md" || fail "md output failed"
grep -q '^| batch |' "$tmp/r.md" || fail "md lacks its table"
"$XF" "${args[@]}" --per-layer >"$tmp/pl.txt" || fail "--per-layer failed"
grep -q "^decode   down           31 " "$tmp/pl.txt" || fail "--per-layer lacks layer 31's down projection"
# Ranges: 1..64 doubles -> 7 points.
[ "$("$XF" predict --batch 1..64 | grep -c '^== point')" -eq 7 ] || fail "--batch 1..64 should give 7 points"

# A Hugging Face config.json (file and folder forms).
mkdir -p "$tmp/hf"
cat >"$tmp/hf/config.json" <<'JSON'
{"model_type": "llama", "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 22,
 "num_attention_heads": 32, "num_key_value_heads": 4, "vocab_size": 32000, "max_position_embeddings": 2048,
 "rope_theta": 10000.0, "rms_norm_eps": 1e-05, "tie_word_embeddings": false}
JSON
"$XF" predict --model "$tmp/hf/config.json" --device l4 >"$tmp/out" 2>"$tmp/err" || fail "HF config file: $(cat "$tmp/err")"
"$XF" predict --model "$tmp/hf" --device l4 >"$tmp/out" 2>"$tmp/err" || fail "HF config folder: $(cat "$tmp/err")"

# Bad input: a clear message and exit 2.
expect 2 "nosuchmodel" -- predict --model nosuchmodel
expect 2 "nosuchdevice" -- predict --device nosuchdevice
expect 2 "--batch" -- predict --batch 0
expect 2 "--batch" -- predict --batch abc
expect 2 "--batch" -- predict --batch 1..
expect 2 "--batch" -- predict --batch 64..1
expect 2 "--prompt" -- predict --prompt -5
expect 2 "fp7" -- predict --wdtype fp7
expect 2 "unknown option" -- predict --bogus
expect 2 "needs a value" -- predict --model
expect 2 "format" -- predict --format xml
echo '{"model_type": "gpt2", "hidden_size": 8}' >"$tmp/gpt2.json"
expect 2 "model_type" -- predict --model "$tmp/gpt2.json"
printf '{"model_type": "llama", "hidden_size": 20' >"$tmp/cut.json"
expect 2 "truncated" -- predict --model "$tmp/cut.json"
sed 's/"hidden_size": 2048/"hidden_size": -2048/' "$tmp/hf/config.json" >"$tmp/neg.json"
expect 2 "hidden_size" -- predict --model "$tmp/neg.json"
echo '{"format": "xfprof-record", "version": 99}' >"$tmp/future.json"
expect 2 "newer" -- show "$tmp/future.json"
# Output that cannot be written: exit 4, earlier file intact.
expect 4 "/dev/full" -- predict -o /dev/full
cp "$tmp/r.json" "$tmp/keep.json"
expect 4 "" -- predict --format json -o "$tmp/nodir/x.json"
cmp -s "$tmp/r.json" "$tmp/keep.json" || fail "earlier record changed"
[ -c /dev/full ] || fail "/dev/full is no longer a device"

"$XF" --version >/dev/null || fail "--version"
"$XF" help >/dev/null || fail "help"
"$XF" predict --help | grep -q -- "--batch" || fail "predict --help"
expect 2 "unknown command" -- nosuchcommand

if [ "$fails" -ne 0 ]; then echo "$fails check(s) failed"; exit 1; fi
echo "cli_predict: all checks passed"
