#!/usr/bin/env bash
# Newer architectures through the CLI (issue 12): the transformers fixtures run, what is not
# implemented is refused with exit 2 naming the field, a folder's tensors that the config does
# not use are warned about and a missing one is named. $1 = the xfprof binary.
set -u
XF="$1"
SRC="${XF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
HF="$SRC/tests/data/hf"
. "$(dirname "$0")/lib.sh" # $tmp/$TMP (removed at exit) and the helpers

# the fixtures run from their own folders
for f in llama-rope-llama3 llama-attn-bias qwen3 mistral-window; do
    "$XF" run --model "$HF/$f" --weights "$HF/$f" --threads 1 --batch 1 --prompt 8 --gen 4 -o "$tmp/$f.json" >"$tmp/o" 2>"$tmp/e"
    check "run $f from its folder" 0 $?
done
has "the record keeps the rope scaling" "$(cat "$tmp/llama-rope-llama3.json")" '"type":"llama3"'
has "the record keeps qk_norm" "$(cat "$tmp/qwen3.json")" '"qk_norm":true'
"$XF" show "$tmp/llama-rope-llama3.json" --format json >"$tmp/back.json"; check "show reads the record back" 0 $?
has "the rope scaling survives the round trip" "$(cat "$tmp/back.json")" '"type":"llama3"'

# predict and models read them too
out=$("$XF" predict --model "$HF/llama-attn-bias" --device h100-sxm --batch 1 --prompt 16 --gen 4); check "predict with biases" 0 $?
out=$("$XF" models); check "models" 0 $?
has "models lists llama-3.1-8b at 8.03B" "$(echo "$out" | grep '^llama-3.1-8b ')" "8.03B"
has "models lists qwen3-8b at 8.19B" "$(echo "$out" | grep '^qwen3-8b ')" "8.19B"

# refusals: exit 2, the field named
refuse() { # description, field expected in the message, json text
    printf '%s' "$3" >"$tmp/config.json"
    "$XF" predict --model "$tmp/config.json" --device h100-sxm >/dev/null 2>"$tmp/e"
    check "$1: exit 2" 2 $?
    has "$1: names $2" "$(cat "$tmp/e")" "$2"
}
base='"hidden_size":64,"intermediate_size":128,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":512,"max_position_embeddings":64'
refuse "mixtral without experts" num_local_experts "{\"model_type\":\"mixtral\",$base}"
refuse "qwen2_moe without its shared expert's size" shared_expert_intermediate_size "{\"model_type\":\"qwen2_moe\",$base,\"num_experts\":8,\"num_experts_per_tok\":2,\"moe_intermediate_size\":32}"
# MoE: predict models it, the reference model refuses it naming what it lacks
out=$("$XF" predict --model mixtral-8x7b --device h100-sxm --batch 1,8 --prompt 128 --gen 16 --wdtype bf16 2>"$tmp/e"); check "predict mixtral" 0 $?
has "predict says the expert reads are expected under uniform routing" "$(cat "$tmp/e")" "uniform routing"
# MoE runs: per-expert (mixtral) and fused (qwen3-moe) tensors, and random weights at a config's shapes
for f in mixtral qwen3-moe qwen2-moe; do
    "$XF" run --model "$HF/$f" --weights "$HF/$f" --threads 1 --batch 2 --prompt 8 --gen 4 --reps 1 --warmup 0 -o "$tmp/$f.json" >"$tmp/o" 2>"$tmp/e"
    check "run $f from its folder" 0 $?
done
# the record keeps the router's choices; the table and the report show total against active weights and the load
out=$("$XF" show "$tmp/qwen2-moe.json"); check "show an MoE run" 0 $?
has "show: total and active parameters" "$out" "parameters 209 k total, 135 k active per token"
has "show: the router's load per phase" "$out" "router (decode, 3 steps)"
has "the record keeps the router's counts" "$(cat "$tmp/qwen2-moe.json")" '"experts":{"n_experts":8'
"$XF" report "$tmp/qwen2-moe.json" -o "$tmp/moe.html" 2>"$tmp/e"; check "report an MoE run" 0 $?
has "report: the expert-load section" "$(cat "$tmp/moe.html")" 'id="r0-experts"'
has "report: active parameters in the summary" "$(cat "$tmp/moe.html")" "active parameters per token"
if command -v gnuplot >/dev/null; then
    has "report: the expert-load heat map is drawn" "$(sed -n '/id="r0-experts"/,/<\/section>/p' "$tmp/moe.html")" "<image"
fi
"$XF" run --model "$HF/qwen3-moe" --threads 1 --batch 1 --prompt 8 --gen 2 --reps 1 --warmup 0 --wdtype int8 >/dev/null 2>"$tmp/e"
check "run qwen3-moe with random int8 weights" 0 $?
# a folder whose tensors do not match the config: exit 2 naming the tensor; extra layers warned about
mkdir "$tmp/moe"
cp "$HF/qwen3-moe/model.safetensors" "$tmp/moe/"
sed 's/"moe_intermediate_size": 32/"moe_intermediate_size": 48/' "$HF/qwen3-moe/config.json" >"$tmp/moe/config.json"
"$XF" run --model "$tmp/moe" --weights "$tmp/moe" --threads 1 --batch 1 --prompt 8 --gen 2 --reps 1 --warmup 0 >/dev/null 2>"$tmp/e"
check "mis-shaped fused experts: exit 2" 2 $?
has "mis-shaped fused experts named" "$(cat "$tmp/e")" "experts.gate_up_proj"
sed 's/"mlp_only_layers": \[/"mlp_only_layers": [0, /' "$HF/qwen3-moe/config.json" >"$tmp/moe/config.json"
"$XF" run --model "$tmp/moe" --weights "$tmp/moe" --threads 1 --batch 1 --prompt 8 --gen 2 --reps 1 --warmup 0 >/dev/null 2>"$tmp/e"
check "a dense layer whose folder has experts: exit 2" 2 $?
has "the missing dense tensor named" "$(cat "$tmp/e")" "model.layers.0.mlp.gate_proj.weight"
sed 's/"num_hidden_layers": 3/"num_hidden_layers": 2/' "$HF/qwen3-moe/config.json" >"$tmp/moe/config.json"
"$XF" run --model "$tmp/moe" --weights "$tmp/moe" --threads 1 --batch 1 --prompt 8 --gen 2 --reps 1 --warmup 0 >/dev/null 2>"$tmp/e"
check "experts of a layer the config lacks: still runs" 0 $?
has "unused experts warned" "$(cat "$tmp/e")" "model.layers.2.mlp.experts.gate_up_proj"
mkdir "$tmp/mx"
cp "$HF/mixtral/model.safetensors" "$tmp/mx/"
sed 's/"num_local_experts": 8/"num_local_experts": 4/' "$HF/mixtral/config.json" >"$tmp/mx/config.json"
"$XF" run --model "$tmp/mx" --weights "$tmp/mx" --threads 1 --batch 1 --prompt 8 --gen 2 --reps 1 --warmup 0 >/dev/null 2>"$tmp/e"
check "a router of another size: exit 2" 2 $?
has "the router named" "$(cat "$tmp/e")" "block_sparse_moe.gate.weight"
out=$("$XF" models); has "models: mixtral total 46.7B, active 12.9B" "$(echo "$out" | grep '^mixtral-8x7b ')" "46.7B    12.9B"
refuse "deepseek_v3" kv_lora_rank "{\"model_type\":\"deepseek_v3\",$base}"
refuse "longrope" longrope "{\"model_type\":\"llama\",$base,\"rope_scaling\":{\"rope_type\":\"longrope\",\"factor\":4}}"
refuse "unknown rope key" mrope_section "{\"model_type\":\"llama\",$base,\"rope_parameters\":{\"rope_type\":\"default\",\"mrope_section\":[1]}}"
refuse "qwen3 window without a size" sliding_window "{\"model_type\":\"qwen3\",$base,\"use_sliding_window\":true}"
refuse "llama with sliding layers" layer_types "{\"model_type\":\"llama\",$base,\"layer_types\":[\"full_attention\",\"sliding_attention\"]}"

# a folder whose config drops a feature its tensors have: warned, never silently skipped
mkdir "$tmp/nobias"
cp "$HF/llama-attn-bias/model.safetensors" "$tmp/nobias/"
sed 's/"attention_bias": true/"attention_bias": false/' "$HF/llama-attn-bias/config.json" >"$tmp/nobias/config.json"
"$XF" run --model "$tmp/nobias" --weights "$tmp/nobias" --threads 1 --batch 1 --prompt 8 --gen 2 >/dev/null 2>"$tmp/e"
check "unused tensors: still runs" 0 $?
has "unused tensors: warned" "$(cat "$tmp/e")" "warning"
has "unused tensors: o_proj.bias named" "$(cat "$tmp/e")" "o_proj.bias"
# and a config asking for a tensor the folder lacks: exit 2 naming it
sed 's/"mlp_bias": false/"mlp_bias": true/' "$HF/llama-attn-bias/config.json" >"$tmp/nobias/config.json"
"$XF" run --model "$tmp/nobias" --weights "$tmp/nobias" --threads 1 --batch 1 --prompt 8 --gen 2 >/dev/null 2>"$tmp/e"
check "missing tensor: exit 2" 2 $?
has "missing tensor named" "$(cat "$tmp/e")" "mlp.gate_proj.bias"

exit $fail
