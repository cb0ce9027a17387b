#!/usr/bin/env bash
# bench/gpu_check.sh on a machine without a GPU: --pack, then --dry-run (libraries found or
# reported, packing, the device tool's limits, the time plan, exit 0); a full OUT is refused; a bad
# budget is a usage error; the summary's ncu cross-check on recorded inputs (tests/data/gpu).
set -u
XF=${1:?usage: cli_gpu_check.sh XFPROF}
SRC=${XF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=$(dirname "$XF")
TMP=$(mktemp -d "${TMPDIR:-/tmp}/xf-gpu-check-test.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
fails=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

# --pack: one tarball under the carry limit
if bash "$SRC/bench/gpu_check.sh" --pack "$BUILD" "$TMP/carry" >"$TMP/pack.txt" 2>&1; then
  [ -f "$TMP/carry/xfprof-gpu.tar.gz" ] && [ "$(find "$TMP/carry" -type f | wc -l)" -eq 1 ] &&
    ok "pack: $(tail -n 1 "$TMP/pack.txt")" || bad "pack left $(find "$TMP/carry" -type f | wc -l) files"
  tar tzf "$TMP/carry/xfprof-gpu.tar.gz" | grep -qx "xfprof-gpu/xfprof" && tar tzf "$TMP/carry/xfprof-gpu.tar.gz" | grep -q "^xfprof-gpu/data/devices.json" &&
    ok "pack holds xfprof and data/" || bad "pack layout: $(tar tzf "$TMP/carry/xfprof-gpu.tar.gz" | head -n 5 | tr '\n' ' ')"
else
  bad "pack failed: $(cat "$TMP/pack.txt")"
fi

# --dry-run with the carry
if bash "$SRC/bench/gpu_check.sh" --dry-run "$TMP/out" "$TMP/carry" >"$TMP/dry.txt" 2>&1; then
  ok "dry run exits 0"
else
  bad "dry run exited $?: $(tail -n 5 "$TMP/dry.txt")"
fi
files=$(cd "$TMP/out" 2>/dev/null && ls | tr '\n' ' ')
[ "$files" = "gpu_check.log results.tar.gz summary.txt " ] && ok "OUT: $files" || bad "OUT holds: $files"
grep -q "within the device tool's limits" "$TMP/dry.txt" && ok "limits checked" || bad "no limit check in: $(tail -n 3 "$TMP/dry.txt")"
grep -q "time plan (s, in order; budget 300 s" "$TMP/dry.txt" && ok "time plan printed" || bad "no time plan"
grep -q "carried working tree: .* of 64 MiB" "$TMP/dry.txt" && ok "carry size checked" || bad "no carry check"
for lib in libcublas.so.13 libcupti.so.13; do
  grep -qE "$lib: (/.* \((wheel|toolkit|ldconfig)\)|NOT FOUND .*)" "$TMP/dry.txt" && ok "$lib found or reported" || bad "$lib not reported"
done
# the tarball: one folder gpu_check/, nothing deeper than the tool returns once unpacked there
members=$(tar tzf "$TMP/out/results.tar.gz" 2>/dev/null)
echo "$members" | grep -qvx "gpu_check/.*" && bad "a member outside gpu_check/: $members"
for m in gpu_check/steps.txt gpu_check/summary.txt gpu_check/gpu_check.log gpu_check/env.txt; do
  echo "$members" | grep -qx "$m" && ok "tarball has $m" || bad "tarball lacks $m: $(echo $members)"
done
if [ ! -e /dev/nvidiactl ]; then
  for s in ceilings decode_b1 activity counters; do
    grep -qE "^$s +dry-run .*flags parse \(exit 3" "$TMP/out/summary.txt" && ok "$s: its xfprof flags parse" || bad "$s: $(grep "^$s" "$TMP/out/summary.txt")"
  done
fi
for s in env tests hf ceilings decode_b1 activity counters ncu peer; do
  grep -qE "^$s +(done|dry-run|skipped)" "$TMP/out/summary.txt" && ok "summary names step $s" || bad "summary lacks step $s"
done

# an OUT already holding files: over the tool's 8 -> refused
mkdir -p "$TMP/full"
for i in 1 2 3 4 5 6; do echo x >"$TMP/full/extra$i.txt"; done
if bash "$SRC/bench/gpu_check.sh" --dry-run "$TMP/full" >"$TMP/full.txt" 2>&1; then
  bad "9 files in OUT accepted"
else
  grep -q "OUT holds 9 files: the tool returns at most 8" "$TMP/full.txt" && ok "9 files refused" || bad "no file-count message: $(tail -n 3 "$TMP/full.txt")"
fi

# a bad budget: usage error
XF_GPU_CHECK_BUDGET_S=soon bash "$SRC/bench/gpu_check.sh" --dry-run "$TMP/o2" >"$TMP/b.txt" 2>&1
[ $? -eq 2 ] && grep -q "XF_GPU_CHECK_BUDGET_S must be a number" "$TMP/b.txt" && ok "bad budget: exit 2" || bad "bad budget: $(cat "$TMP/b.txt")"

# a run stopped by the overall timeout still returns what it has: a build whose xfprof hangs,
# a 16 s budget (6 s for the steps): the counters probe is killed, the parent packs
mkdir -p "$TMP/hang"
printf '#!/bin/sh\nsleep 60\n' >"$TMP/hang/xfprof"
chmod +x "$TMP/hang/xfprof"
t0=$(date +%s)
XF_GPU_CHECK_BUDGET_S=16 bash "$SRC/bench/gpu_check.sh" "$TMP/killed" "$TMP/hang" >"$TMP/killed.txt" 2>&1
krc=$?
dt=$(($(date +%s) - t0))
[ "$dt" -le 20 ] && ok "stopped run took ${dt} s of its 16 s budget" || bad "stopped run took ${dt} s (budget 16)"
[ $krc -eq 0 ] && ok "stopped run exits 0 (what finished is returned)" || bad "stopped run exited $krc"
[ -s "$TMP/killed/results.tar.gz" ] && [ -s "$TMP/killed/summary.txt" ] && ok "stopped run: results and summary packed" || bad "stopped run left: $(ls "$TMP/killed")"
grep -q "stopped at the budget" "$TMP/killed/gpu_check.log" && ok "stopped run: the log says so" || bad "stopped run: log: $(tail -n 3 "$TMP/killed/gpu_check.log")"

# the summary's ncu cross-check on recorded inputs
if command -v python3 >/dev/null; then
  mkdir -p "$TMP/w"
  cp "$SRC/tests/data/gpu/ncu_decode_b1.csv" "$TMP/w/ncu.csv"
  cp "$SRC/tests/data/gpu/counters_decode_b1.json" "$TMP/w/counters.json"
  python3 "$SRC/bench/gpu/summary.py" "$TMP/w" "$SRC/data" >"$TMP/sum.txt" 2>&1
  # ncu: decode layers 0, 1; medians (upper of two): qkv 30.6 us, 100.75 MB; xfprof 31.5 us, 100.1 MB
  grep -qE "^qkv +31\.5 us +30\.6 us +1\.029 +100\.1 MB +100\.8 MB +0\.994$" "$TMP/sum.txt" && ok "qkv beside ncu" || bad "qkv row: $(grep '^qkv' "$TMP/sum.txt")"
  grep -qE "^attention +12\.6 us +12\.24 us +1\.029 +8\.53 MB +8\.43 MB +1\.012$" "$TMP/sum.txt" && ok "attention beside ncu" || bad "attention row: $(grep '^attention' "$TMP/sum.txt")"
  grep -qE "^attn_norm +2\.1 us +2\.04 us +1\.029 +0\.0246 MB +0\.0246 MB +1\.000$" "$TMP/sum.txt" && ok "attn_norm beside ncu" || bad "attn_norm row: $(grep '^attn_norm' "$TMP/sum.txt")"
  grep -q "decode layers recognised: 2" "$TMP/sum.txt" && ok "2 decode layers recognised (prefill and lm_head left out)" || bad "$(grep 'ncu:' "$TMP/sum.txt")"
  # the targets from a real record (a CPU run stands in for decode_b1; the spec sheet of an H200)
  mkdir -p "$TMP/w3"
  echo "NVIDIA H200" >"$TMP/w3/gpu_name.txt"
  if "$XF" run --model stories15m --prompt 16 --gen 4 --reps 1 --threads 1 -o "$TMP/w3/cpu.json" >/dev/null 2>&1; then
    # times scaled down 2000 x, so that the ratio lands near GPU figures and its 3 decimals mean something
    python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
for o in r["points"][0]["ops"]:
    o["time_s"] /= 2000
json.dump(r, open(sys.argv[2], "w"))' "$TMP/w3/cpu.json" "$TMP/w3/decode_b1.json"
    python3 "$SRC/bench/gpu/summary.py" "$TMP/w3" "$SRC/data" >"$TMP/sum3.txt" 2>&1
    want=$(python3 - "$TMP/w3/decode_b1.json" "$SRC/data/devices.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
bw = [d for d in json.load(open(sys.argv[2]))["devices"] if d["name"] == "h200"][0]["bandwidth_Bps"]
ops = [o for o in r["points"][0]["ops"] if o["phase"] == "decode"]
print(f"{sum(o['bytes'] for o in ops) / sum(o['time_s'] for o in ops) / bw:.3f}")
PY
)
    grep -q "spec sheet h200" "$TMP/sum3.txt" && grep -q "decode b1 op by op (per-op sync) / spec HBM = $want " "$TMP/sum3.txt" &&
      ok "summary: decode b1 ratio $want from a real record" || bad "summary targets: want $want: $(grep -i 'spec' "$TMP/sum3.txt" | head -n 3)"
  else
    bad "the CPU run for the summary's record failed"
  fi
else
  echo "skip: no python3 for the summary"
fi

[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all passed"
