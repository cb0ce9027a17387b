#!/usr/bin/env bash
# DeepSeek-V3 through the CLI (issue 12): the preset's counts in `models`, a deepseek_v3
# config.json read, latent attention costed in both forms by `predict` and named in the record,
# incompatible fields refused with the arithmetic, `run` running the MLA and DeepSeek-MoE fixtures, and
# `kv` sizing pools by the latent row and holding windowed layers at their window. $1 = xfprof.
set -u
XF="$1"
. "$(dirname "$0")/lib.sh" # $tmp/$TMP (removed at exit) and the helpers

out=$("$XF" models); check "models" 0 $?
has "models: deepseek-v3 671B total, 37.6B active, 70,272 B of latent KV per token in bf16" \
    "$("$XF" models --kvdtype bf16 | grep '^deepseek-v3 ')" "671B    37.6B     no        70272"
"$XF" models --model deepseek-v3 --format json >"$tmp/m.json"; check "models json" 0 $?
has "models json: the exact count" "$(cat "$tmp/m.json")" '"params":	671026404352'

# a small deepseek_v3 config: MLA with a q rank, one dense layer then MoE with a shared expert
cat >"$tmp/config.json" <<'JSON'
{"model_type":"deepseek_v3","hidden_size":64,"intermediate_size":128,"moe_intermediate_size":32,
 "num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":4,"vocab_size":512,
 "max_position_embeddings":256,"q_lora_rank":16,"kv_lora_rank":32,"qk_nope_head_dim":16,
 "qk_rope_head_dim":8,"v_head_dim":16,"n_routed_experts":8,"num_experts_per_tok":2,"n_group":2,
 "topk_group":1,"n_shared_experts":1,"first_k_dense_replace":1,"routed_scaling_factor":2.5,
 "norm_topk_prob":true,"rope_interleave":true,"rope_parameters":{"rope_type":"yarn","rope_theta":10000.0,
 "factor":4.0,"original_max_position_embeddings":64,"mscale":1.0,"mscale_all_dim":1.0}}
JSON
"$XF" predict --model "$tmp/config.json" --device h100-sxm --batch 1 --prompt 32 --gen 8 -o "$tmp/naive.json" >/dev/null 2>"$tmp/e"
check "predict a deepseek_v3 config" 0 $?
has "predict names the form" "$(cat "$tmp/e")" "costed in the naive form"
has "the record says naive" "$(cat "$tmp/naive.json")" '"form":"naive"'
has "the record keeps the routing" "$(cat "$tmp/naive.json")" '"scoring":"sigmoid"'
"$XF" predict --model "$tmp/config.json" --device h100-sxm --batch 1 --prompt 32 --gen 8 --mla absorbed -o "$tmp/abs.json" >/dev/null 2>&1
check "predict --mla absorbed" 0 $?
has "the record says absorbed" "$(cat "$tmp/abs.json")" '"form":"absorbed"'
"$XF" show "$tmp/abs.json" --format json >"$tmp/back.json"; check "show reads it back" 0 $?
has "the form survives the round trip" "$(cat "$tmp/back.json")" '"form":"absorbed"'
"$XF" predict --model "$tmp/config.json" --mla fused >/dev/null 2>"$tmp/e"; check "--mla fused: exit 2" 2 $?
has "--mla names the forms" "$(cat "$tmp/e")" "naive or absorbed"
"$XF" predict --model llama-2-7b --mla absorbed >/dev/null 2>"$tmp/e"; check "--mla on llama: exit 2" 2 $?

# incompatible fields: exit 2 with the arithmetic
bad() { # description, sed expression, expected text
    sed "$2" "$tmp/config.json" >"$tmp/bad.json"
    "$XF" predict --model "$tmp/bad.json" --device h100-sxm >/dev/null 2>"$tmp/e"
    check "$1: exit 2" 2 $?
    has "$1: says why" "$(cat "$tmp/e")" "$3"
}
bad "experts not divisible into groups" 's/"n_group":2/"n_group":3/' "8 = 3 * 2 + 2"
bad "topk_group over n_group" 's/"topk_group":1/"topk_group":3/' "'topk_group' (3) exceeds n_group (2)"
bad "top-k over the kept groups" 's/"num_experts_per_tok":2/"num_experts_per_tok":5/' "1 * 4 = 4"
bad "fewer KV heads" 's/"num_key_value_heads":4/"num_key_value_heads":2/' "must equal num_attention_heads"
bad "attention bias" 's/"norm_topk_prob":true/"attention_bias":true/' "attention_bias"

# the reference model runs latent attention (the naive form) and DeepSeek's routing from a
# transformers folder
SRC="${XF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
"$XF" run --model "$SRC/tests/data/hf/deepseek-mla" --weights "$SRC/tests/data/hf/deepseek-mla" --threads 1 --batch 2 --prompt 8 \
    --gen 4 -o "$tmp/run.json" >/dev/null 2>"$tmp/e"
check "run the dense MLA fixture" 0 $?
has "its record says the naive form" "$(cat "$tmp/run.json")" '"form":"naive"'
"$XF" run --model "$SRC/tests/data/hf/deepseek-moe" --weights "$SRC/tests/data/hf/deepseek-moe" --threads 1 --batch 1 --prompt 8 \
    --gen 4 -o "$tmp/moe.json" >/dev/null 2>"$tmp/e"
check "run the DeepSeek MoE fixture" 0 $?
has "its record keeps the grouped routing" "$(cat "$tmp/moe.json")" '"scoring":"sigmoid"'
# the absorbed form in the reference: the record names it, and its attention ops carry exactly the
# FLOPs and bytes predict --mla absorbed gives them (not the naive form's)
"$XF" run --model "$SRC/tests/data/hf/deepseek-mla" --weights "$SRC/tests/data/hf/deepseek-mla" --threads 1 --batch 2 --prompt 8 \
    --gen 4 --mla absorbed -o "$tmp/abs_run.json" >/dev/null 2>"$tmp/e"
check "run --mla absorbed" 0 $?
has "its record says the absorbed form" "$(cat "$tmp/abs_run.json")" '"form":"absorbed"'
"$XF" show "$tmp/abs_run.json" --format csv >"$tmp/abs_run.csv" 2>/dev/null
same_ops() { # predicted csv, measured csv: "compared differing" over the latent attention's ops
    awk -F, 'NR==FNR { if (FNR>1) a[$10","$11","$12]=$14","$15; next }
             FNR>1 && ($12=="qkv"||$12=="attention"||$12=="o_proj") { n++; if (a[$10","$11","$12]!=$14","$15) bad++ }
             END { print n+0, bad+0 }' "$1" "$2"
}
for form in absorbed naive; do
    "$XF" predict --model "$SRC/tests/data/hf/deepseek-mla" --device h100-sxm --batch 2 --prompt 8 --gen 4 --wdtype fp32 \
        --kvdtype fp32 --mla $form --format csv >"$tmp/pred_$form.csv" 2>/dev/null
done
has "run --mla absorbed: its 12 attention ops are predict --mla absorbed's" "$(same_ops "$tmp/pred_absorbed.csv" "$tmp/abs_run.csv")" "12 0"
has "run --mla absorbed: not the naive form's" "$(same_ops "$tmp/pred_naive.csv" "$tmp/abs_run.csv")" "12 12"
"$XF" run --model llama-2-7b --mla absorbed >/dev/null 2>"$tmp/e"; check "run --mla on llama: exit 2" 2 $?
has "run --mla on llama says why" "$(cat "$tmp/e")" "no latent attention"
"$XF" run --model "$tmp/config.json" --mla fused >/dev/null 2>"$tmp/e"; check "run --mla fused: exit 2" 2 $?
has "run --mla names the forms" "$(cat "$tmp/e")" "naive or absorbed"

# kv: the latent row sizes the pool; windowed layers hold their window
out=$("$XF" kv --size --model deepseek-v3 --kvdtype bf16 --context 4096); check "kv --size deepseek-v3" 0 $?
has "kv --size: 70272 B per token" "$out" "70272 bytes per token (61 layers x the latent row"
out=$("$XF" kv --size --model mistral-7b --context 8192,32768); check "kv --size mistral" 0 $?
has "kv --size: windowed layers hold 4096 tokens" "$(echo "$out" | grep '^ *32768 ')" "536870912"
out=$("$XF" kv --model mistral-7b --device a100-40gb --requests 50 --prompt-dist fixed:3000 --output-dist fixed:3000 --kv-policy reserve,paged:16 2>&1)
check "kv mistral" 0 $?
has "kv mistral: the per-group table" "$out" "KV pool per layer group"
has "kv mistral: a reservation of the window" "$(echo "$out" | grep '^reserve .* 4096 ')" "reserve"
cat >"$tmp/mixed.json" <<'JSON'
{"model_type":"qwen2","hidden_size":1024,"intermediate_size":2816,"num_hidden_layers":24,"num_attention_heads":16,
 "num_key_value_heads":2,"vocab_size":151936,"max_position_embeddings":32768,"use_sliding_window":true,
 "sliding_window":1024,"max_window_layers":12}
JSON
"$XF" kv --model "$tmp/mixed.json" --device a100-40gb --kv-budget 4GiB --requests 50 --kv-policy paged:16 -o "$tmp/kv.json" >"$tmp/o" 2>&1
check "kv mixed windowed and full layers" 0 $?
has "kv mixed: the full group" "$(cat "$tmp/o")" "paged:16        12     full"
has "kv mixed: the windowed group" "$(cat "$tmp/o")" "paged:16        12     1024"
"$XF" show "$tmp/kv.json" >"$tmp/o2"; check "show the kv record" 0 $?
has "the groups survive the record" "$(cat "$tmp/o2")" "paged:16        12     1024"
out=$("$XF" kv --model deepseek-v3 --device h200 --kv-budget 20GiB --requests 50 --wdtype fp8 --kvdtype bf16 --kv-policy paged:16 2>&1)
check "kv deepseek-v3" 0 $?
has "kv deepseek-v3: the latent bytes per token" "$out" "KV bf16 70272 B/token"

# run: the reference's own paged KV keeps a windowed layer's blocks to its window (a pool of its
# own beside the full layer's: 5 blocks of 4 per windowed layer vs 9 for 36 positions), said in env.kv_pool
"$XF" run --model "$SRC/tests/data/hf/qwen3-window" --weights "$SRC/tests/data/hf/qwen3-window" --threads 1 --prompt 20 --gen 16 \
    --kv-policy paged:4 -o "$tmp/win.json" >/dev/null 2>"$tmp/e"
check "run qwen3-window paged:4" 0 $?
has "env.kv_pool: the windowed layer's pool" "$(cat "$tmp/win.json")" '"kv_pool":"14336 B: sliding-window layers 5120 B'
exit $fail
