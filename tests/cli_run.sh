#!/usr/bin/env bash
# xfprof run and xfprof machine from the command line. $1 = the xfprof binary.
set -u
XF=${1:?usage: cli_run.sh path/to/xfprof}
. "$(dirname "$0")/lib.sh" # $tmp/$TMP (removed at exit) and the helpers

# A machine file written by hand, so the tests do not spend seconds measuring ceilings.
export XFPROF_MACHINE_FILE="$TMP/machine.json"
cat >"$XFPROF_MACHINE_FILE" <<'EOF'
{"format":"xfprof-devices","version":1,"devices":[{"name":"cpu","description":"test CPU","kind":"cpu",
 "memory_bytes":8e9,"bandwidth_Bps":1e10,"cache_bytes":1048576,"cache_bandwidth_Bps":5e10,
 "peak_flops":{"fp32":1e11},"measured":true,"source":"measured by xfprof machine on test 2026-01-01, 2 threads"}]}
EOF


# 1. The default run works, prints the measured table and writes a valid record.
expect_rc 0 "default run" "$XF" run -o "$TMP/rec.json"
grep -q "time(med)" "$TMP/out" && ok "table has measured times" || bad "no measured column in: $(head -c 300 "$TMP/out")"
grep -q "TTFT" "$TMP/out" && ok "summary has TTFT" || bad "no TTFT"
grep -q "bandwidth ceiling: DRAM read" "$TMP/out" && ok "stories15m (58 MiB) vs a 1 MiB LLC is judged against DRAM" ||
    bad "ceiling note missing: $(grep -i ceiling "$TMP/out")"
[ -s "$TMP/rec.json" ] && ok "record written" || bad "no record file"
grep -q '"format":[[:space:]]*"xfprof-record"' "$TMP/rec.json" && ok "record format" || bad "record format missing"
grep -q '"kind":[[:space:]]*"run"' "$TMP/rec.json" && ok "record kind run" || bad "record kind"
grep -q '"samples_s"' "$TMP/rec.json" && ok "raw samples kept" || bad "no samples_s in the record"
grep -q '"unsupported"\|"supported"' "$TMP/rec.json" && ok "counters recorded" || bad "no counters in the record"
expect_rc 0 "the record reads back (xfprof show)" "$XF" show "$TMP/rec.json"

# The OpenMP spin (probes/omp_spin.h): with neither GOMP_SPINCOUNT nor OMP_WAIT_POLICY set, xfprof
# looks at the CPUs in 50 ms windows until one is free of other programs (then the long spin), at
# most 5 (then the short one); a value the user set is kept. A busy loop beside it on one CPU keeps
# every window busy, whatever the number of CPUs.
if command -v python3 >/dev/null; then
    spin_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["env"]["omp_wait_policy"])' "$1"; }
    (unset GOMP_SPINCOUNT OMP_WAIT_POLICY; "$XF" run --prompt 4 --gen 1 --reps 1 -o "$TMP/spin.json" >/dev/null 2>&1)
    w=$(spin_of "$TMP/spin.json")
    case "$w" in
    *"GOMP_SPINCOUNT=3000 (xfprof's choice: "*" CPUs free of other programs in 50 ms window "[1-5]" of up to 5)") ok "long spin: a free window named" ;;
    *"GOMP_SPINCOUNT=200 (xfprof's choice: at most "*" CPUs free of other programs in 5 windows of 50 ms)") ok "short spin: 5 busy windows named" ;;
    *) bad "spin choice: $w" ;;
    esac
    sh -c 'while :; do :; done' &
    loop=$!
    (unset GOMP_SPINCOUNT OMP_WAIT_POLICY; "$XF" run --prompt 4 --gen 1 --reps 1 -o "$TMP/spin_busy.json" >/dev/null 2>&1)
    kill "$loop"
    wait "$loop" 2>/dev/null
    w=$(spin_of "$TMP/spin_busy.json")
    case "$w" in
    *"GOMP_SPINCOUNT=200 (xfprof's choice: at most "*" in 5 windows of 50 ms)") ok "a busy loop beside it: the short spin" ;;
    *) bad "a busy loop beside it: $w" ;;
    esac
    GOMP_SPINCOUNT=500 expect_rc 0 "a spin the user set" "$XF" run --prompt 4 --gen 2 --reps 1 -o "$TMP/spin500.json"
    grep -q '"omp_wait_policy":"OMP_WAIT_POLICY=(unset), GOMP_SPINCOUNT=500"' "$TMP/spin500.json" && ok "the user's spin is kept" ||
        bad "user's spin: $(grep -o '"omp_wait_policy":"[^"]*"' "$TMP/spin500.json")"
fi

# The record's memory.weights_bytes is what the run holds, by kind in env.weights_held. stories15m
# int8 --group 32 by hand (d 288, 6 layers, d_ff 768, vocab 32000, tied): matrices
# 6 * (864*288 + 288*288 + 1536*288 + 288*768) = 5971968; embedding 32000 * 288 = 9216000;
# fp32 scales 6 * 4 * (864*9 + 288*9 + 1536*9 + 288*24) + 4 * 32000 * 9 = 1898496; norms
# 4 * (6 * 2 * 288 + 288) = 14976; sum 17101440.
expect_rc 0 "int8 run" "$XF" run --wdtype int8 --group 32 --prompt 4 --gen 2 --reps 1 -o "$TMP/i8.json"
if command -v python3 >/dev/null; then
    python3 - "$TMP/i8.json" <<'EOF' && ok "weights_bytes = the bytes held (fp32 scales)" || bad "weights_bytes or env.weights_held wrong"
import json, sys
r = json.load(open(sys.argv[1]))
m = r["points"][0]["memory"]
assert m["weights_bytes"] == 17101440, m
assert abs(m["total_bytes"] - (m["weights_bytes"] + m["kv_bytes"] + m["activations_bytes"])) < 1, m
env = r["env"]
held = env["weights_held"] if isinstance(env, dict) else [e["value"] for e in env if e.get("key") == "weights_held"][0]
for part in ("layer matrices 5971968 B", "embeddings 9216000 B", "int8 scales 1898496 B (fp32)", "norms and biases 14976 B"):
    assert part in held, (part, held)
EOF
fi
# bf16 weights' input mode (--bf16-inputs): said in the record; what cannot take it refused (exit 2).
expect_rc 0 "bf16 run, rounded inputs" "$XF" run --wdtype bf16 --bf16-inputs rounded --prompt 40 --gen 2 --reps 1 -o "$TMP/b16r.json"
grep -q '"bf16_inputs":[[:space:]]*"rounded' "$TMP/b16r.json" && ok "record env bf16_inputs says rounded" ||
    bad "no env.bf16_inputs rounded in the record"
expect_rc 0 "bf16 run, default inputs" "$XF" run --wdtype bf16 --prompt 4 --gen 2 --reps 1 -o "$TMP/b16e.json"
grep -q '"bf16_inputs":[[:space:]]*"exact3' "$TMP/b16e.json" && ok "record env bf16_inputs says exact3 by default" ||
    bad "no env.bf16_inputs exact3 in the record"
expect_rc 2 "--bf16-inputs rounded with fp32 weights is refused" "$XF" run --bf16-inputs rounded --prompt 4 --gen 2
grep -q "bf16-inputs" "$TMP/err" && ok "the refusal names --bf16-inputs" || bad "refusal: $(head -c 300 "$TMP/err")"
expect_rc 2 "--bf16-inputs with an unknown mode is refused" "$XF" run --wdtype bf16 --bf16-inputs half --prompt 4 --gen 2

if command -v python3 >/dev/null; then
    python3 - "$TMP/rec.json" <<'EOF' && ok "record content checks" || bad "record content checks"
import json, sys
r = json.load(open(sys.argv[1]))
p = r["points"][0]
ops = p["ops"]
meas = [o for o in ops if o.get("measured")]
assert meas, "no measured op"
for o in meas:
    s = sorted(o["samples_s"])
    assert len(s) == 5, len(s)                      # --reps default 5
    assert abs(o["time_s"] - s[2]) < 1e-12, (o["time_s"], s)   # time = median of 5
assert any(o["op"] == "kv_alloc" for o in ops)
assert all(v in ("unsupported",) or isinstance(v, (int, float)) for o in meas for v in o["counters"].values())
assert len(p["tokens"]) == 1                        # batch 1
# --gen counts the generated tokens (the prefill samples the first): 32 by default, not 33
assert p["workload"]["gen"] == 32 and len(p["tokens"][0]) == 32, (p["workload"]["gen"], len(p["tokens"][0]))
EOF
fi
# --gen 1: one token, from the prefill, so no decode step ran; --gen 0: none (prompt processing only).
for g in 1 0; do
    expect_rc 0 "run --gen $g" "$XF" run --reps 1 --warmup 0 --prompt 8 --gen $g --format json
    if command -v python3 >/dev/null; then
        python3 - "$TMP/out" $g <<'EOF' && ok "--gen $g: $g token(s), no decode step" || bad "--gen $g: tokens or decode steps wrong"
import json, sys
p = json.load(open(sys.argv[1]))["points"][0]
g = int(sys.argv[2])
assert len(p.get("tokens", [[]])[0]) == g, p.get("tokens")
assert not any(o.get("measured") for o in p["ops"] if o["phase"] == "decode")
assert p["summary"]["tpot_s"] == 0 and p["summary"]["ttft_s"] > 0
EOF
    fi
done

# --weights DIR alone: the folder's config.json is the model (no --model needed).
if command -v python3 >/dev/null; then
    mkdir -p "$TMP/tiny-weights"
    python3 - "$TMP/tiny-weights" <<'EOF'
import json, struct, sys, random
d = sys.argv[1]
L, D, H, KV, HD, FF, V = 1, 16, 2, 1, 8, 32, 64
json.dump({"model_type": "llama", "hidden_size": D, "num_hidden_layers": L, "num_attention_heads": H,
           "num_key_value_heads": KV, "head_dim": HD, "intermediate_size": FF, "vocab_size": V,
           "max_position_embeddings": 64, "rope_theta": 10000.0, "rms_norm_eps": 1e-5,
           "tie_word_embeddings": False, "hidden_act": "silu"}, open(d + "/config.json", "w"))
t = {"model.embed_tokens.weight": (V, D), "lm_head.weight": (V, D), "model.norm.weight": (D,)}
for l in range(L):
    p = "model.layers.%d." % l
    t.update({p + "self_attn.q_proj.weight": (H * HD, D), p + "self_attn.k_proj.weight": (KV * HD, D),
              p + "self_attn.v_proj.weight": (KV * HD, D), p + "self_attn.o_proj.weight": (D, H * HD),
              p + "mlp.gate_proj.weight": (FF, D), p + "mlp.up_proj.weight": (FF, D), p + "mlp.down_proj.weight": (D, FF),
              p + "input_layernorm.weight": (D,), p + "post_attention_layernorm.weight": (D,)})
random.seed(1)
hdr, data = {}, b""
for name, shape in t.items():
    n = 1
    for x in shape: n *= x
    vals = [1.0] * n if len(shape) == 1 else [random.uniform(-0.1, 0.1) for _ in range(n)]
    hdr[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [len(data), len(data) + 4 * n]}
    data += struct.pack("<%df" % n, *vals)
h = json.dumps(hdr).encode()
open(d + "/model.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + data)
EOF
    expect_rc 0 "run --weights DIR alone" "$XF" run --weights "$TMP/tiny-weights" --reps 1 --warmup 0 --prompt 4 --gen 2 --threads 1 --format json
    grep -q '"name":[[:space:]]*"tiny-weights"' "$TMP/out" && ok "--weights alone: the folder's config is the model" ||
        bad "--weights alone did not take the folder's config: $(head -c 300 "$TMP/out")"
fi

# --save-tokens / --save-logits: the ids of every step equal the record's, each logit row's argmax is
# the token sampled from it, the prompt is there once; nothing is written when the flags disagree.
expect_rc 0 "run --save-tokens --save-logits" "$XF" run --reps 1 --warmup 0 --batch 2 --prompt 4 --gen 3 --threads 1 \
    --save-tokens "$TMP/toks.jsonl" --save-logits -o "$TMP/toks.json"
if command -v python3 >/dev/null; then
    python3 - "$TMP/toks.jsonl" "$TMP/toks.json" <<'EOF' && ok "saved tokens and logits match the record" || bad "saved tokens or logits wrong"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
rec = json.load(open(sys.argv[2]))
h, steps = lines[0], lines[1:]
assert h["format"] == "xfprof-tokens" and h["version"] == 1 and h["logits"] is True
assert [s["step"] for s in steps] == [0, 1, 2]                  # --gen 3: three tokens, three steps
assert len(steps[0]["prompt"]) == 2 and len(steps[0]["prompt"][0]) == 4 and "prompt" not in steps[1]
toks = rec["points"][0]["tokens"]                                 # (seqs, gen)
for k, s in enumerate(steps):
    assert s["tokens"] == [toks[b][k] for b in range(2)], (k, s["tokens"])
    for b in range(2):
        row = s["logits"][b]
        assert len(row) == h["vocab"] and max(range(len(row)), key=row.__getitem__) == s["tokens"][b]
EOF
fi
expect_rc 2 "--save-logits needs --save-tokens" "$XF" run --save-logits

# 2. Ceilings: a model whose weights fit in the LLC is judged against the in-cache bandwidth.
sed -i 's/"cache_bytes":1048576/"cache_bytes":1e9/' "$XFPROF_MACHINE_FILE"
expect_rc 0 "run judged against the cache ceiling" "$XF" run --reps 1 --warmup 0 --prompt 8 --gen 2 --no-probes
grep -q "bandwidth ceiling: in-cache" "$TMP/out" && ok "cache ceiling said" || bad "cache ceiling not said: $(grep -i ceiling "$TMP/out")"

# 3. Bad flags exit 2.
expect_rc 2 "unknown flag" "$XF" run --bogus
expect_rc 2 "batch 0" "$XF" run --batch 0
expect_rc 2 "wdtype fp8 (not run on the CPU)" "$XF" run --wdtype fp8
expect_rc 2 "kv-alloc foo" "$XF" run --kv-alloc foo
expect_rc 2 "reps 0" "$XF" run --reps 0
expect_rc 2 "prompt id beyond the vocabulary" "$XF" run --prompt-ids 1,999999999
expect_rc 2 "both --prompt and --prompt-ids" "$XF" run --prompt 4 --prompt-ids 1,2
expect_rc 2 "unknown model" "$XF" run --model no-such-model
expect_rc 2 "machine --threads 0" "$XF" machine --threads 0
expect_rc 0 "machine --help" "$XF" machine --help
expect_rc 0 "run --help" "$XF" run --help

# 4. --device cuda without a CUDA backend or device: exit 3 and the plain message (where a driver
# is present this is not the no-device case: tests/cli_cuda_nogpu.sh covers both).
if [ ! -e /dev/nvidiactl ] && [ ! -e /proc/driver/nvidia/version ]; then
    expect_rc 3 "--device cuda" "$XF" run --device cuda
    grep -q "^xfprof run: no CUDA device present: ." "$TMP/err" && ok "plain message: $(head -c 160 "$TMP/err")" ||
        bad "not the plain 'no CUDA device present' message: $(cat "$TMP/err")"
    expect_rc 3 "--device cuda:1 --cuda-graph --cupti counters" "$XF" run --device cuda:1 --cuda-graph --cupti counters
fi
expect_rc 2 "--cupti on the CPU" "$XF" run --cupti activity
expect_rc 2 "--device cuda:x" "$XF" run --device cuda:x

# 5. Too large a model is refused before allocating, with the sizes.
start=$(date +%s)
expect_rc 2 "llama-2-70b fp32 refused" "$XF" run --model llama-2-70b
grep -q "GiB" "$TMP/err" && ok "refusal gives sizes: $(head -c 200 "$TMP/err")" || bad "refusal without sizes: $(cat "$TMP/err")"
[ $(($(date +%s) - start)) -le 5 ] && ok "refused at once" || bad "refusal took more than 5 s"

# 6. Given prompt ids run and land in the record's workload.
expect_rc 0 "prompt ids" "$XF" run --prompt-ids 1,15043,29892 --gen 2 --reps 1 --format json
grep -q '"prompt":[[:space:]]*3' "$TMP/out" && ok "prompt length from the ids" || bad "prompt length not 3"

# 7. xfprof machine measures and saves a devices file that run then reads.
expect_rc 0 "machine --quick -o FILE --format json" "$XF" machine --quick --threads 1 -o "$TMP/m2.json" --format json
grep -q '"format":[[:space:]]*"xfprof-devices"' "$TMP/m2.json" && ok "machine file format" || bad "machine file format"
grep -q '"measured":[[:space:]]*true' "$TMP/m2.json" && ok "machine file says measured" || bad "machine file not measured"
grep -q '"bandwidth_Bps"' "$TMP/out" && ok "json printed" || bad "json not printed"
XFPROF_MACHINE_FILE="$TMP/m2.json" expect_rc 0 "run with the measured file" "$XF" run --reps 1 --warmup 0 --prompt 4 --gen 1 --threads 1
grep -q "ceilings: measured by xfprof machine on" "$TMP/out" && ok "run names the measured ceilings" || bad "run does not name the ceilings"

# 8. SIGINT / SIGTERM: the repetition being measured finishes, what is complete is written (marked partial), exit 128 + signal.
for sig in INT TERM; do
  rm -f "$TMP/sig.json" "$TMP/sig.err"
  XFPROF_MACHINE_FILE="$TMP/m2.json" "$XF" run --batch 1,1,1,1,1,1 --prompt 8 --gen 4 --reps 2 --threads 1 -o "$TMP/sig.json" \
    >/dev/null 2>"$TMP/sig.err" &
  pid=$!
  # Wait until the second point has started, so the first one is complete.
  for _ in $(seq 1 600); do
    [ "$(grep -c 'batch 1 prompt 8' "$TMP/sig.err" 2>/dev/null)" -ge 2 ] && break
    sleep 0.1
  done
  kill -"$sig" "$pid"
  wait "$pid"
  rc=$?
  want=$([ "$sig" = INT ] && echo 130 || echo 143)
  [ "$rc" -eq "$want" ] && ok "SIG$sig: exit $want" || bad "SIG$sig: exit $rc, expected $want"
  grep -q "interrupted by SIG$sig" "$TMP/sig.err" && ok "SIG$sig: said so" || bad "SIG$sig: no message"
  n=$(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['points']))" "$TMP/sig.json" 2>/dev/null || echo 0)
  # the point running when the signal came is kept with the repetitions it finished, or left out
  # when it was still warming up: at least the first point is there, and the record says partial
  [ "$n" -ge 1 ] && [ "$n" -lt 6 ] && ok "SIG$sig: $n completed points written" || bad "SIG$sig: $n points in the record"
  grep -q '"partial":true' "$TMP/sig.json" && ok "SIG$sig: record marked partial" || bad "SIG$sig: record not marked partial"
done

# Concurrent ceilings and confidence (docs/verdicts.md): by default a pulse before each of the
# repetitions and one after, every measured op with its confidence; --no-concurrent: none.
expect_rc 0 "run with concurrent ceilings" "$XF" run --prompt 8 --gen 3 --reps 3 --threads 1 -o "$TMP/cc.json"
grep -Eq "point 0: (MACHINE CONTENDED|not contended): concurrent read ceiling" "$TMP/out" && ok "notes say whether the machine was contended" ||
    bad "no contention line in the notes: $(tail -5 "$TMP/out")"
grep -q "verdict: mostly .*-bound, confidence" "$TMP/out" && ok "the verdict names its confidence" || bad "no verdict confidence"
grep -q " conf$" "$TMP/out" && ok "the table has the conf column" || bad "no conf column"
expect_rc 0 "run --no-concurrent" "$XF" run --prompt 8 --gen 3 --reps 3 --threads 1 --no-concurrent -o "$TMP/nc.json"
grep -q "contended" "$TMP/out" && bad "--no-concurrent still reports contention" || ok "--no-concurrent: no contention line"
if command -v python3 >/dev/null; then
    python3 - "$TMP/cc.json" "$TMP/nc.json" <<'EOF' && ok "record: pulses, both utilizations, confidences; none with --no-concurrent" || bad "concurrent fields wrong"
import json, sys
rec = json.load(open(sys.argv[1]))
cc = rec['points'][0]
nc = json.load(open(sys.argv[2]))
c = cc['concurrent']
assert len(c['pulse_bandwidth_Bps']) == 4 == len(c['pulse_fp32_flops']), c
assert c['threshold'] == 0.15 and isinstance(c['contended'], bool) and c['pulse_s'] > 0 and c['run_s'] > 0
assert c['machine_bandwidth_Bps'] == rec['device']['bandwidth_Bps'], (c['machine_bandwidth_Bps'], rec['device'])
for o in cc['ops']:
    if o['measured']:
        assert 0 <= o['confidence'] <= 1 and o['confidence_boot'] == 1000, o
        assert 'util_memory_machine' in o
assert 0 <= cc['summary']['verdict_confidence'] <= 1
p = nc['points'][0]
assert 'concurrent' not in p
assert 'off (--no-concurrent)' in nc['env']['concurrent_ceilings'], nc['env']
for o in p['ops']:
    if o['measured']:
        assert o['util_memory_machine'] == o['util_memory'], o
EOF
fi

exit $fail
