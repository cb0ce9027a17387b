#!/usr/bin/env bash
# The GPU check (issue 5): one command for a machine with an NVIDIA GPU and the CUDA toolkit.
#
#   bench/gpu_check.sh OUTDIR [BUILD_DIR]
#
# Runs the `gpu` tests, measures the GPU's ceilings, runs llama-2-7b-shaped bf16 prefill (512 tokens)
# and decode at batch 1, 16 and 64 with CUPTI kernel activity (--cupti activity), once more at batch 1
# without CUPTI (--cupti off: the tracing overhead), with --cuda-graph (the decode step timed with and
# without a graph in the same run: record env cuda_graph_p0), and with the Range Profiler's counters
# (--cupti counters); writes the records, an HTML report when `xfprof report` exists, and
# summary.txt with the target ratios into OUTDIR. The runs judge ops against the ceilings measured
# in step 3 (XFPROF_GPU_MACHINE_FILE); the target ratios are against the GPU's spec sheet.
#
# Build: BUILD_DIR (or $XF_BUILD) holding a prebuilt xfprof (a build carried from a CPU machine of
# the same architecture; shared libraries it needs but the machine lacks go in BUILD_DIR/libs), else
# it configures and builds build-gpu from source (-DXFPROF_CUDA=ON). cuBLAS and CUPTI are loaded at
# run time from LD_LIBRARY_PATH, which this script points at the toolkit.
# cuBLAS and CUPTI are dlopen'ed (ldd does not list them): they come from the toolkit, else from the
# pip wheels of the machine's python3 (nvidia-cublas, nvidia-cuda-cupti); the log says which.
# Budget: steps 2-4 share XF_GPU_CHECK_BUDGET_S (default 400 s, counted from the end of the build);
# each step has its own timeout, capped by what is left; a step that fails, times out or is skipped
# is reported with its reason and the script goes on. Report and summary add at most ~50 s, so a
# carried build finishes in under 8 minutes; building from source adds the build time.
#
#   bench/gpu_check.sh --pack BUILD_DIR CARRY_DIR
#
# prepares, on the CPU machine, a small folder to carry to the GPU machine: xfprof, the gpu test
# binaries, data/, and libs/ with the shared libraries ldd lists (glibc's own excepted), stripped.
# Not packed: cuBLAS and CUPTI (loaded with dlopen, so not in ldd; cuBLAS alone is hundreds of MiB)
# and libcuda (the driver's): the GPU machine must have them.
set -u
if [ "${1:-}" = "--pack" ]; then
  SRC=${2:?usage: bench/gpu_check.sh --pack BUILD_DIR CARRY_DIR}
  DST=${3:?usage: bench/gpu_check.sh --pack BUILD_DIR CARRY_DIR}
  mkdir -p "$DST/libs"
  bins=("$SRC/xfprof")
  for t in "$SRC"/test_gpu_* "$SRC"/test_cuda_device; do [ -x "$t" ] && bins+=("$t"); done
  cp "${bins[@]}" "$DST/"
  cp -r "$SRC/data" "$DST/"
  for b in "${bins[@]}"; do ldd "$b"; done | awk '/=>/ {print $3}' | sort -u |
    grep -vE '/(libc|libm|libpthread|libdl|librt|libresolv)\.so|ld-linux|linux-vdso' |
    while read -r lib; do [ -f "$lib" ] && cp -L "$lib" "$DST/libs/"; done
  strip --strip-unneeded "$DST"/xfprof "$DST"/test_* "$DST"/libs/* 2>/dev/null
  du -sh "$DST"
  exit 0
fi
OUT=${1:?usage: bench/gpu_check.sh OUTDIR [BUILD_DIR]}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${2:-${XF_BUILD:-}}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
LOG="$OUT/gpu_check.log"
: >"$LOG"
T0=$(date +%s)
say() { echo "[$(($(date +%s) - T0))s] $*" | tee -a "$LOG"; }

CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
# python3 runs with the caller's library path: the carried libs/ (Debian 12's libstdc++, libz,
# libcrypto, libffi...) are for xfprof and must not replace the machine's own under python3.
ORIG_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
py() { LD_LIBRARY_PATH="$ORIG_LD_LIBRARY_PATH" python3 "$@"; }
for d in "$CUDA_HOME/lib64" "$CUDA_HOME/extras/CUPTI/lib64" "${BUILD:+$BUILD/libs}"; do
  [ -n "$d" ] && [ -d "$d" ] && LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
export LD_LIBRARY_PATH
# The libraries xfprof dlopens: from LD_LIBRARY_PATH or ldconfig, else from python3's nvidia wheels.
find_lib() { # prints the file where the dynamic loader would find $1, empty if nowhere
  local d ds
  IFS=: read -ra ds <<<"${LD_LIBRARY_PATH:-}"
  for d in "${ds[@]}"; do [ -n "$d" ] && [ -e "$d/$1" ] && { echo "$d/$1"; return; }; done
  ldconfig -p 2>/dev/null | awk -v l="$1" '$1 == l {print $NF; exit}'
}
for lib in libcublas.so.13 libcupti.so.13; do
  if [ -z "$(find_lib $lib)" ] && command -v python3 >/dev/null; then
    for p in $(py -c 'import nvidia; print(" ".join(nvidia.__path__))' 2>/dev/null); do
      f=$(find "$p" -maxdepth 3 -name "$lib" 2>/dev/null | head -n 1)
      if [ -n "$f" ]; then
        LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$(dirname "$f")"
        break
      fi
    done
  fi
  say "$lib: $(find_lib $lib || true)$([ -z "$(find_lib $lib)" ] && echo "NOT FOUND: the runs that need it will fail")"
done
export LD_LIBRARY_PATH

# ---- 1. the build
if [ -z "$BUILD" ] || [ ! -x "$BUILD/xfprof" ]; then
  BUILD="$ROOT/build-gpu"
  say "building from source in $BUILD"
  tests=ON
  pkg-config --exists criterion 2>/dev/null || tests=OFF
  if ! timeout 300 cmake -S "$ROOT" -B "$BUILD" -DXFPROF_CUDA=ON -DXFPROF_TESTS=$tests -DCMAKE_BUILD_TYPE=Release >>"$LOG" 2>&1 ||
     ! timeout 300 cmake --build "$BUILD" -j"$(nproc)" >>"$LOG" 2>&1; then
    say "BUILD FAILED (see $LOG)"; exit 4
  fi
fi
XF="$BUILD/xfprof"
say "xfprof: $XF"
TB=$(date +%s) # the step budget starts here
BUDGET=${XF_GPU_CHECK_BUDGET_S:-400}
left() { echo $((BUDGET - ($(date +%s) - TB))); }
cap() { # cap TIMEOUT: TIMEOUT, or what is left of the budget when that is less
  local l; l=$(left)
  [ "$l" -lt 10 ] && l=10 # never 0 or less: `timeout 0` means no timeout
  [ "$1" -gt "$l" ] && echo "$l" || echo "$1"
}
"$XF" --version >"$OUT/version.txt" 2>&1
ldd "$XF" >"$OUT/ldd.txt" 2>&1
if command -v nvidia-smi >/dev/null; then
  nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1
  nvidia-smi --query-gpu=name --format=csv,noheader >"$OUT/gpu_name.txt" 2>/dev/null
fi
export XFPROF_DATA_DIR=${XFPROF_DATA_DIR:-$BUILD/data}

# ---- 2. gpu tests (each binary directly: a carried build need not have ctest's paths)
: >"$OUT/gpu_tests.txt"
TESTS_END=$(($(date +%s) + 150)) # the tests together get at most 150 s of the budget: the runs come first
for t in "$BUILD"/test_gpu_*; do
  [ -x "$t" ] || continue
  to=$(cap 90); tl=$((TESTS_END - $(date +%s))); [ "$tl" -lt "$to" ] && to=$tl
  if [ "$to" -le 10 ]; then say "test $(basename "$t"): SKIPPED (time budget spent)"; continue; fi
  say "test $(basename "$t") (timeout ${to}s)"
  timeout -k 5 "$to" "$t" --jobs 1 --verbose >>"$OUT/gpu_tests.txt" 2>&1
  echo "== $(basename "$t") exit $?" >>"$OUT/gpu_tests.txt"
done
grep -E "^\[(PASS|FAIL|SKIP|ERR )|exit [0-9]" "$OUT/gpu_tests.txt" | tee -a "$LOG"

# ---- 3. ceilings
say "ceilings: xfprof machine --device cuda"
[ "$(left)" -le 10 ] && say "ceilings: budget spent; running anyway with a 10 s limit (the runs need them)"
timeout -k 5 "$(cap 90)" "$XF" machine --device cuda -o "$OUT/machine.json" >"$OUT/machine.txt" 2>&1
rc=$?
echo "exit $rc" >>"$OUT/machine.txt"
[ $rc -eq 0 ] || say "  ceilings exited $rc: $(tail -n 2 "$OUT/machine.txt" | head -n 1)"
export XFPROF_GPU_MACHINE_FILE="$OUT/machine.json" # `run --device cuda` uses it when it is this GPU's

# ---- 4. llama-2-7b-shaped runs (random bf16 weights: no download)
COMMON=(--model llama-2-7b --wdtype bf16 --kvdtype bf16 --prompt 512 --gen 16 --reps 3 --device cuda)
run() { # name timeout args...
  local name=$1 to=$2; shift 2
  if [ "$(left)" -le 20 ]; then say "run $name: SKIPPED (time budget of ${BUDGET}s spent)"; return; fi
  to=$(cap "$to")
  say "run $name (timeout ${to}s): $*"
  timeout -k 5 "$to" "$XF" run "${COMMON[@]}" "$@" -o "$OUT/$name.json" >"$OUT/$name.txt" 2>&1
  local rc=$?
  echo "exit $rc" >>"$OUT/$name.txt"
  [ $rc -eq 124 ] && say "  $name timed out after ${to}s (see $name.txt)"
  [ $rc -ne 0 ] && [ $rc -ne 124 ] && say "  $name exited $rc: $(grep -v '^exit ' "$OUT/$name.txt" | tail -n 1)"
  # a degraded run (CUPTI or counters not available) still exits 0: say why
  grep -h "CUPTI counters not collected\|note: CUPTI off" "$OUT/$name.txt" 2>/dev/null | head -n 2 | while read -r l; do say "  $name: $l"; done
}
run activity 200 --batch 1,16,64 --cupti activity
run plain 90 --batch 1 --cupti off
run graph 90 --batch 1 --cupti off --cuda-graph
run counters 120 --batch 1 --gen 2 --reps 1 --cupti counters

# ---- 5. HTML report where `xfprof report` exists
if "$XF" report --help >/dev/null 2>&1; then
  recs=()
  for f in activity plain graph counters; do [ -s "$OUT/$f.json" ] && recs+=("$OUT/$f.json"); done
  [ ${#recs[@]} -gt 0 ] && timeout 45 "$XF" report "${recs[@]}" -o "$OUT/report.html" >>"$LOG" 2>&1
fi

# ---- 6. summary with the target ratios, computed from the records
command -v python3 >/dev/null || say "no python3: summary.txt not written (the records are in $OUT)"
py - "$OUT" "$XFPROF_DATA_DIR" >"$OUT/summary.txt" 2>&1 <<'PY'
import json, os, sys
out, data = sys.argv[1], sys.argv[2]
def load(name):
    p = os.path.join(out, name + ".json")
    try:
        return json.load(open(p))
    except Exception as e:
        print(f"{name}: no record ({e})")
        return None
try:
    m = json.load(open(os.path.join(out, "machine.json")))
    print("measured ceilings:", json.dumps(m)[:400])
except Exception:
    pass
# the spec sheet of this GPU (targets are against the datasheet, whatever the record was judged by)
spec = {}
try:
    gname = open(os.path.join(out, "gpu_name.txt")).read().strip().splitlines()[0]
    sid = ("h200" if "H200" in gname else "h100-pcie" if "H100" in gname and "PCIe" in gname else
           "h100-sxm" if "H100" in gname else "a100-80gb" if "A100" in gname and "80GB" in gname else
           "a100-40gb" if "A100" in gname else None)
    for d in json.load(open(os.path.join(data, "devices.json")))["devices"]:
        if d.get("name") == sid:
            spec = d
    print(f"GPU: {gname} -> spec sheet {sid}")
except Exception as e:
    print(f"no spec sheet match ({e}); ratios use the records' device")
def points(r):
    return r.get("points", []) if r else []
def step(pt, phase):
    return [o for o in pt.get("ops", []) if o.get("phase") == phase]
def decode_bw(pt):
    ops = step(pt, "decode")
    t = sum(o.get("time_s", 0) for o in ops)
    b = sum(o.get("bytes", 0) for o in ops)
    return (b / t if t > 0 else 0.0), t
def decode_kernel_bw(pt):
    # the decode step's summed GPU kernel time (CUPTI activity: counter gpu_kernel_time_s per op)
    ops = step(pt, "decode")
    ks = [(o.get("counters") or {}).get("gpu_kernel_time_s") for o in ops]
    t = sum(k for k in ks if isinstance(k, (int, float)))
    b = sum(o.get("bytes", 0) for o in ops)
    return (b / t if t > 0 else 0.0), t
import re
def graph_step(r, i=0):
    # env cuda_graph_p<i>: "... without graph X s, with graph Y s ..." -> (X, Y)
    v = ((r or {}).get("env") or {}).get(f"cuda_graph_p{i}", "")
    m = re.search(r"without graph ([0-9.eE+-]+) s, with graph ([0-9.eE+-]+) s", v)
    return (float(m.group(1)), float(m.group(2))) if m else None
def report(r, label):
    if not r:
        return
    dev = r.get("device", {})
    bw = dev.get("bandwidth_Bps", 0) or 0
    p16 = (dev.get("peak_flops", {}) or {}).get("tensor16", 0) or 0
    print(f"== {label}: device {dev.get('name')} spec bandwidth {bw/1e12:.2f} TB/s, tensor16 {p16/1e12:.0f} TFLOP/s")
    for pt in points(r):
        wl = pt.get("workload", {})
        s = pt.get("summary", {})
        dbw, dt = decode_bw(pt)
        gem = [o for o in step(pt, "prefill") if o.get("op") in ("qkv", "o_proj", "gate_up", "down")]
        gt = sum(o.get("time_s", 0) for o in gem)
        gf = sum(o.get("flops", 0) for o in gem)
        kbw, kt = decode_kernel_bw(pt)
        print(f"  batch {wl.get('batch')}: TTFT {s.get('ttft_s', 0)*1e3:.2f} ms, TPOT {s.get('tpot_s', 0)*1e3:.3f} ms, "
              f"decode step {dt*1e3:.3f} ms at {dbw/1e12:.3f} TB/s compulsory"
              + (f" = {dbw/bw:.2f} of spec HBM" if bw else "")
              + (f"; kernels only {kt*1e3:.3f} ms at {kbw/1e12:.3f} TB/s" if kt > 0 else "")
              + (f"; prefill GEMMs {gf/gt/1e12:.0f} TFLOP/s = {gf/gt/p16:.2f} of tensor peak" if gt > 0 and p16 else ""))
    g = graph_step(r)
    if g:
        print(f"  --cuda-graph: decode step {g[0]*1e3:.3f} ms without, {g[1]*1e3:.3f} ms with the graph (no per-op sync)")
act, plain, graph = load("activity"), load("plain"), load("graph")
report(act, "with CUPTI activity")
report(plain, "without CUPTI")
report(graph, "--cuda-graph")
report(load("counters"), "Range Profiler counters")
def b1(r):
    for pt in points(r):
        if pt.get("workload", {}).get("batch") == 1:
            return pt
    return None
print("== targets (ratios from this run)")
pa, pp, pg = b1(act), b1(plain), b1(graph)
dev = spec or ((plain or act or {}).get("device", {}) if (plain or act) else {})
bw = dev.get("bandwidth_Bps", 0) or 0
p16 = (dev.get("peak_flops", {}) or {}).get("tensor16", 0) or 0
if pp and bw:
    print(f"decode b1 / spec HBM            = {decode_bw(pp)[0]/bw:.3f}  (target >= 0.60)")
g = graph_step(graph)
if pg and bw and g and g[1] > 0:
    b = sum(o.get("bytes", 0) for o in step(pg, "decode"))
    print(f"decode b1 without graph / spec  = {b/g[0]/bw:.3f}  (no per-op sync, no probes)")
    print(f"decode b1 --cuda-graph / spec   = {b/g[1]/bw:.3f}  (target >= 0.75)")
if pa and pp:
    ta, tp = decode_bw(pa)[1], decode_bw(pp)[1]
    if tp > 0:
        print(f"activity tracing decode change  = {ta/tp - 1:+.3f}  (target |x| <= 0.03)")
if pp and p16:
    gem = [o for o in step(pp, "prefill") if o.get("op") in ("qkv", "o_proj", "gate_up", "down")]
    gt = sum(o.get("time_s", 0) for o in gem); gf = sum(o.get("flops", 0) for o in gem)
    if gt > 0:
        print(f"prefill GEMMs / tensor16 peak   = {gf/gt/p16:.3f}  (target >= 0.70)")
PY
cat "$OUT/summary.txt" | tee -a "$LOG"
say "done in $(($(date +%s) - T0)) s; results in $OUT"
