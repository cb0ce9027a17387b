#!/usr/bin/env bash
# Tensor parallel over MPI on this machine, measured side by side in one run:
#   1. the link: `mpirun -np 2 xfprof machine --comm` (an all-reduce's bus bandwidth, as nccl-tests);
#   2. the same request with one process and with --tp 2 (two ranks, one thread each);
#   3. printed: each decode all-reduce's measured bus bandwidth (its bus bytes / its time) against
#      the link's ceiling, the share of decode op time in the all-reduces, TPOT of both and their ratio.
# A busy or oversubscribed machine shows up in every figure: say so when quoting them.
# usage: bench/bench_tp.sh path/to/xfprof [MODEL] [PROMPT] [GEN] [RUN OPTIONS...]   (default stories110m 64 32)
#   RUN OPTIONS go to both runs, e.g. --weights tests/data/hf/qwen2-moe --wdtype int8 --group 8 (MODEL is then
#   the folder too); the default is fp32 random weights.
set -u
XF=${1:?usage: bench/bench_tp.sh path/to/xfprof [model] [prompt] [gen]}
model=${2:-stories110m}
prompt=${3:-64}
gen=${4:-32}
shift $(($# < 4 ? $# : 4))
extra=("$@")
command -v mpirun >/dev/null || { echo "bench_tp: no mpirun (apt-get install openmpi-bin libopenmpi-dev)"; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export XFPROF_MACHINE_FILE="$tmp/machine.json"
MPI=(mpirun --allow-run-as-root --oversubscribe)
"$XF" machine --quick --threads 1 >/dev/null 2>"$tmp/err" || { cat "$tmp/err"; exit 4; }
"${MPI[@]}" -np 2 "$XF" machine --comm >"$tmp/comm.txt" 2>"$tmp/err" || { cat "$tmp/err"; exit 4; }
common=(--model "$model" --prompt "$prompt" --gen "$gen" --threads 1 --reps 3 --wdtype fp32 "${extra[@]}")
"$XF" run "${common[@]}" -o "$tmp/tp1.json" >/dev/null 2>"$tmp/err" || { cat "$tmp/err"; exit 4; }
"${MPI[@]}" -np 2 "$XF" run "${common[@]}" --tp 2 -o "$tmp/tp2.json" >/dev/null 2>"$tmp/err" || { cat "$tmp/err"; exit 4; }
echo "link (mpirun -np 2 xfprof machine --comm):"
sed -n '1,40p' "$tmp/comm.txt"
python3 - "$tmp" "$model" "$prompt" "$gen" "${extra[*]:-}" <<'P'
import json, sys, statistics
t, model, prompt, gen, extra = sys.argv[1:]
r1, r2, m = (json.load(open(t + f)) for f in ("/tp1.json", "/tp2.json", "/machine.json"))
link = m["devices"][0]["link"]["bandwidth_Bps"]
p1, p2 = r1["points"][0], r2["points"][0]
dec = [o for o in p2["ops"] if o["phase"] == "decode"]
ar = [o for o in dec if o["op"] == "all_reduce"]
busbw = [o["comm_bytes"] / o["time_s"] for o in ar if o["time_s"] > 0]
comm_t = sum(o["time_s"] for o in ar)
all_t = sum(o["time_s"] for o in dec)
w = p2["workload"]
print(f"\n{model}, prompt {prompt}, gen {gen}, {w['wdtype']} weights{', ' + extra if extra else ''}, 1 thread per rank")
print(f"decode all-reduce (the two of a layer as one op): {ar[0]['comm_bytes']:.0f} bus bytes per layer per step")
print(f"  measured bus bandwidth: median {statistics.median(busbw)/1e9:.3g} GB/s, best {max(busbw)/1e9:.3g} GB/s; "
      f"link ceiling {link/1e9:.3g} GB/s: median / ceiling = {statistics.median(busbw)/link:.3g}")
print(f"  classes: " + ", ".join(f"{b} {sum(1 for o in ar if o['bound'] == b)}" for b in sorted({o['bound'] for o in ar})))
print(f"share of decode op time in the all-reduces: {100 * comm_t / all_t:.1f}% ({comm_t*1e3:.2f} ms of {all_t*1e3:.2f} ms per step)")
print(f"TPOT: 1 process {p1['summary']['tpot_s']*1e3:.2f} ms, --tp 2 {p2['summary']['tpot_s']*1e3:.2f} ms: "
      f"ratio tp2/tp1 = {p2['summary']['tpot_s']/p1['summary']['tpot_s']:.3f}")
print(f"tokens equal: {p1['tokens'] == p2['tokens']}")
P
