#!/usr/bin/env bash
# gemma3 through the CLI (issue 12): the presets' counts in `models`, the tiny transformers fixture
# run from its folder giving transformers' 16 greedy tokens, `predict` of the preset keeping the
# gemma3 fields in the record (and `show` reading them back), and the refusals (softcapping, --tp)
# exiting 2 naming what is not implemented. $1 = xfprof.
set -u
XF="$1"
. "$(dirname "$0")/lib.sh" # $tmp (removed at exit), check/has
SRC="${XF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
FIX="$SRC/tests/data/hf/gemma3"

"$XF" models --model gemma-3-1b --format json >"$tmp/m.json"; check "models gemma-3-1b" 0 $?
has "models json: transformers' count" "$(cat "$tmp/m.json")" '"params":	999885952'
"$XF" models --model gemma-3-4b --format json >"$tmp/m4.json"; check "models gemma-3-4b" 0 $?
has "models json: the 4b language model's count" "$(cat "$tmp/m4.json")" '"params":	3880263168'

# the fixture from its folder: prefill of transformers' 20 prompt ids, 16 greedy tokens
ids=$(python3 -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['prompt'])))" "$FIX/expected.json" 2>/dev/null ||
      echo 17,301,5,88,412,260,33,129,7,450,61,222,98,3,511,140,76,389,12,205)
"$XF" run --model "$FIX" --weights "$FIX" --threads 1 --reps 1 --warmup 0 --batch 1 --gen 16 --prompt-ids "$ids" \
    --save-tokens "$tmp/toks.jsonl" -o "$tmp/run.json" >/dev/null 2>"$tmp/e"
check "run the gemma3 fixture" 0 $?
has "its record keeps the gemma3 fields" "$(cat "$tmp/run.json")" '"query_pre_attn_scalar":24'
if command -v python3 >/dev/null; then
    python3 - "$tmp/toks.jsonl" "$FIX/expected.json" <<'PY' && echo "ok: 16/16 greedy tokens equal transformers'" || { echo "FAIL: tokens differ"; fail=1; }
import json, sys
steps = [json.loads(l) for l in open(sys.argv[1])][1:]
want = json.load(open(sys.argv[2]))["greedy"]
got = [s["tokens"][0] for s in steps]
assert got == want, (got, want)
PY
fi

"$XF" predict --model gemma-3-1b --device h100-sxm --batch 1 --prompt 1024 --gen 16 -o "$tmp/p.json" >/dev/null 2>&1
check "predict gemma-3-1b" 0 $?
has "the record keeps the local RoPE base" "$(cat "$tmp/p.json")" '"rope_local_base_freq":10000'
"$XF" show "$tmp/p.json" --format json >"$tmp/back.json"; check "show reads it back" 0 $?
has "the gemma3 fields survive the round trip" "$(cat "$tmp/back.json")" '"sandwich_norms":true'

# refusals: exit 2 naming the field / what is missing
sed 's/"final_logit_softcapping": null/"final_logit_softcapping": 30.0/' "$FIX/config.json" >"$tmp/soft.json"
"$XF" predict --model "$tmp/soft.json" --device h100-sxm >/dev/null 2>"$tmp/e"; check "final_logit_softcapping: exit 2" 2 $?
has "it names the field" "$(cat "$tmp/e")" "final_logit_softcapping"
sed 's/"attn_logit_softcapping": null/"attn_logit_softcapping": 50.0/' "$FIX/config.json" >"$tmp/soft2.json"
"$XF" predict --model "$tmp/soft2.json" --device h100-sxm >/dev/null 2>"$tmp/e"; check "attn_logit_softcapping: exit 2" 2 $?
has "it names the field" "$(cat "$tmp/e")" "attn_logit_softcapping"
"$XF" run --model "$FIX" --weights "$FIX" --tp 2 --prompt 8 --gen 2 >/dev/null 2>"$tmp/e"; check "run --tp 2 gemma3: exit 2" 2 $?
has "it names gemma3" "$(cat "$tmp/e")" "gemma3"
exit $fail
