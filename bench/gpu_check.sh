#!/usr/bin/env bash
# The GPU check: one command for a machine with an NVIDIA GPU, sized for the device tool (at most
# 8 files back from $OUT, 16 MiB each, 64 MiB together, 2 folders deep; 15 minutes of device time
# for a whole session, machine start and reruns included).
#
#   bench/gpu_check.sh OUTDIR [BUILD_DIR]          the check (default budget 300 s, all included)
#   bench/gpu_check.sh --dry-run OUTDIR [BUILD_DIR] everything but the GPU steps, on any machine
#   bench/gpu_check.sh --pack BUILD_DIR CARRY_DIR  on the CPU machine: the carry for the GPU one
#
# OUTDIR receives three files: summary.txt (short: every step's status, the target ratios, xfprof's
# CUPTI figures beside ncu's, PyTorch beside xfprof), gpu_check.log, and results.tar.gz (folder
# gpu_check/: every record, every step's output, ncu.csv and torch_trace_tiny.json, the importer
# fixtures). Both are rewritten after every step, so a run killed at any point (the tool's
# timeout_s) still returns what the finished steps found.
#
# Steps, most valuable first (each capped by its own limit and by what is left of the budget;
# one that fails, times out or is skipped is named in summary.txt with its reason, and the
# script goes on):
#   env       nvidia-smi, the libraries xfprof dlopens (python's nvidia wheels first, then the
#             toolkit, then ldconfig), gVisor (kernel 4.4.0), and a 15 s Range Profiler probe
#             on a tiny model: when counters are unavailable the counters and ncu steps are
#             skipped and the runs keep CUPTI activity timing
#   tests     the gpu test binaries (test_gpu_ops, test_gpu_model teacher-forced, test_gpu_cupti)
#   hf        test_gpu_hf: the tiny Hugging Face fixtures (tests/data/hf: mixtral, qwen3-moe,
#             deepseek-moe, deepseek-mla(-yarn), mistral-window, qwen3-window, and the dense ones
#             with q/k norm, biases and scaled RoPE) on the GPU, their greedy tokens against
#             transformers' ids, teacher-forced logits and the experts' routing against the CPU
#             backend (MoE, MLA and windowed attention on the GPU)
#   ceilings  xfprof machine --device cuda (the runs judge ops against it)
#   decode_b1 llama-2-7b bf16, batch 1, prompt 512, gen 16, --cupti off --cuda-graph: the decode
#             HBM ratio op by op, without sync and with a graph, and the graph replay check
#   activity  the same at batch 1, 16, 64 under CUPTI activity (per-kernel times)
#   counters  --cupti counters on llama-2-7b's shapes with 2 layers (bench/gpu/llama-2-7b-2layers)
#   ncu       ncu --csv on the same run: RMSNorm, the decode GEMMs and attention, for the
#             cross-check against the counters (+-10% expected)
#   peer      bench/gpu/peer.py: PyTorch's tokens on a tiny model beside xfprof's, its
#             llama-2-7b b1 decode-step time, the torch.profiler trace fixture
#
# Build: BUILD_DIR holding xfprof, or the xfprof-gpu.tar.gz that --pack made (unpacked into
# /tmp), else $XF_BUILD, else a build from source in build-gpu (needs cJSON, OpenBLAS, Criterion).
# XF_GPU_CHECK_BUDGET_S (default 300): the whole run, under one `timeout`; 10 s of it are kept
# for the last packing.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)

# ---- the device tool's limits, and the time plan (name:seconds), in the order the steps run
LIM_FILES=8
LIM_FILE_B=$((16 << 20))
LIM_TOTAL_B=$((64 << 20))
LIM_DEPTH=2
LIM_TREE_B=$((64 << 20))
PLAN="env:20 tests:45 hf:30 ceilings:25 decode_b1:40 activity:45 counters:25 ncu:25 peer:30"
RESERVE=10 # seconds kept for the last packing

if [ "${1:-}" = "--pack" ]; then
  SRC=${2:?usage: bench/gpu_check.sh --pack BUILD_DIR CARRY_DIR}
  DST=${3:?usage: bench/gpu_check.sh --pack BUILD_DIR CARRY_DIR}
  [ -x "$SRC/xfprof" ] || { echo "gpu_check --pack: no xfprof in $SRC: build it first" >&2; exit 2; }
  STAGE=$(mktemp -d "${TMPDIR:-/tmp}/xf-pack.XXXXXX")
  trap 'rm -rf "$STAGE"' EXIT
  P="$STAGE/xfprof-gpu"
  mkdir -p "$P/libs" "$DST"
  bins=("$SRC/xfprof")
  for t in "$SRC"/test_gpu_* "$SRC"/test_cuda_device; do [ -x "$t" ] && bins+=("$t"); done
  cp "${bins[@]}" "$P/"
  cp -r "$SRC/data" "$P/"
  # shared libraries ldd lists, glibc's own excepted; cuBLAS and CUPTI are dlopen'ed (not in ldd)
  # and come from the GPU machine (python's nvidia wheels or the toolkit)
  for b in "${bins[@]}"; do ldd "$b"; done | awk '/=>/ {print $3}' | sort -u |
    grep -vE '/(libc|libm|libpthread|libdl|librt|libresolv)\.so|ld-linux|linux-vdso' |
    while read -r lib; do [ -f "$lib" ] && cp -L "$lib" "$P/libs/"; done
  strip --strip-unneeded "$P"/xfprof "$P"/test_* "$P"/libs/* 2>/dev/null
  rm -f "$DST/xfprof-gpu.tar.gz.part"
  tar czf "$DST/xfprof-gpu.tar.gz.part" -C "$STAGE" xfprof-gpu && mv -f "$DST/xfprof-gpu.tar.gz.part" "$DST/xfprof-gpu.tar.gz" ||
    { echo "gpu_check --pack: writing $DST/xfprof-gpu.tar.gz failed" >&2; rm -f "$DST/xfprof-gpu.tar.gz.part"; exit 4; }
  unpacked=$(du -sb "$P" | cut -f1)
  packed=$(stat -c %s "$DST/xfprof-gpu.tar.gz")
  tree=$(cd "$ROOT" && git ls-files -z 2>/dev/null | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
  echo "gpu_check --pack: $DST/xfprof-gpu.tar.gz: $((packed >> 20)) MiB ($((unpacked >> 20)) MiB unpacked); with the tracked tree ($((tree >> 20)) MiB) the carry is $(((packed + tree) >> 20)) MiB of the tool's $((LIM_TREE_B >> 20)) MiB"
  if [ $((packed + tree)) -gt "$LIM_TREE_B" ]; then
    echo "gpu_check --pack: over the device tool's $((LIM_TREE_B >> 20)) MiB: carry less" >&2
    exit 1
  fi
  exit 0
fi

DRY=0
if [ "${1:-}" = "--dry-run" ]; then DRY=1; shift; fi
OUT=${1:?usage: bench/gpu_check.sh [--dry-run] OUTDIR [BUILD_DIR] | --pack BUILD_DIR CARRY_DIR}
BUILD=${2:-${XF_BUILD:-}}
BUDGET=${XF_GPU_CHECK_BUDGET_S:-300}
case "$BUDGET" in '' | *[!0-9]*) echo "gpu_check: XF_GPU_CHECK_BUDGET_S must be a number of seconds" >&2; exit 2 ;; esac

# ---- one overall timeout: the steps run in a child under `timeout`; whatever happens to it, the
# parent packs what is there and checks $OUT against the tool's limits.
if [ -z "${XF_GPU_CHECK_CHILD:-}" ]; then
  mkdir -p "$OUT" || exit 4
  OUT=$(cd "$OUT" && pwd)
  W=$(mktemp -d "${TMPDIR:-/tmp}/xf-gpu-check.XXXXXX")/gpu_check
  mkdir -p "$W"
  T0=$(date +%s)
  XF_GPU_CHECK_CHILD=1 XF_GPU_CHECK_W="$W" XF_GPU_CHECK_T0="$T0" \
    timeout -k 5 $((BUDGET - RESERVE)) bash "$0" $([ $DRY = 1 ] && echo --dry-run) "$OUT" ${BUILD:+"$BUILD"}
  rc=$?
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && echo "[$(($(date +%s) - T0))s] the steps were stopped at the budget of $((BUDGET - RESERVE)) s; packing what they left" >>"$W/gpu_check.log"
  XF_GPU_CHECK_CHILD=final XF_GPU_CHECK_W="$W" XF_GPU_CHECK_T0="$T0" bash "$0" $([ $DRY = 1 ] && echo --dry-run) "$OUT" ${BUILD:+"$BUILD"}
  frc=$?
  rm -rf "$(dirname "$W")"
  [ $DRY = 1 ] && exit $frc
  exit $((frc ? frc : (rc == 124 || rc == 137 ? 0 : rc)))
fi

W=$XF_GPU_CHECK_W
T0=$XF_GPU_CHECK_T0
LOG="$W/gpu_check.log"
say() { echo "[$(($(date +%s) - T0))s] $*" | tee -a "$LOG"; }
note_step() { printf '%-10s %-8s %4ss  %s\n' "$1" "$2" "$3" "$4" >>"$W/steps.txt"; } # name status seconds note
left() { echo $((BUDGET - RESERVE - ($(date +%s) - T0))); }
plan_s() { local e; for e in $PLAN; do [ "${e%%:*}" = "$1" ] && { echo "${e#*:}"; return; }; done; echo 0; }
cap() { # the step's limit, or what is left of the budget when that is less
  local want l; want=$(plan_s "$1"); l=$(left)
  [ "$want" -gt "$l" ] && echo "$l" || echo "$want"
}

ORIG_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
py() { LD_LIBRARY_PATH="$ORIG_LD_LIBRARY_PATH" python3 "$@"; } # python with the machine's own libraries
# the machine's own programs (nvidia-smi, ncu: C++, newer than the carried Debian 12 libstdc++) run
# with its own library path; only xfprof and the test binaries get the carried libs/
sys_run() { LD_LIBRARY_PATH="$ORIG_LD_LIBRARY_PATH" "$@"; }

# ---- packing: results.tar.gz (everything), summary.txt, gpu_check.log; then the limits
pack() {
  command -v python3 >/dev/null &&
    py "$ROOT/bench/gpu/summary.py" "$W" "${XFPROF_DATA_DIR:-$ROOT/data}" >"$W/summary.txt" 2>&1
  [ -s "$W/summary.txt" ] || { echo "(no python3: the summary is the steps list)"; cat "$W/steps.txt" 2>/dev/null; } >"$W/summary.txt"
  rm -f "$OUT"/results.tar.gz.part
  if tar czf "$OUT/results.tar.gz.part" -C "$(dirname "$W")" gpu_check 2>>"$LOG"; then
    mv -f "$OUT/results.tar.gz.part" "$OUT/results.tar.gz"
  else
    rm -f "$OUT/results.tar.gz.part"
  fi
  # the tarball over its limit: drop the largest members until it fits, saying which
  while [ -f "$OUT/results.tar.gz" ] && [ "$(stat -c %s "$OUT/results.tar.gz")" -gt "$LIM_FILE_B" ]; do
    big=$(find "$W" -type f ! -name 'summary.txt' ! -name 'gpu_check.log' ! -name 'steps.txt' -printf '%s %p\n' | sort -rn | head -n 1 | cut -d' ' -f2-)
    [ -n "$big" ] || break
    echo "results.tar.gz over $((LIM_FILE_B >> 20)) MiB: left out $(basename "$big") ($(($(stat -c %s "$big") >> 10)) KiB)" | tee -a "$LOG" >>"$W/summary.txt"
    rm -f "$big"
    tar czf "$OUT/results.tar.gz.part" -C "$(dirname "$W")" gpu_check && mv -f "$OUT/results.tar.gz.part" "$OUT/results.tar.gz"
  done
  cp -f "$W/summary.txt" "$OUT/summary.txt.part" && mv -f "$OUT/summary.txt.part" "$OUT/summary.txt"
  cp -f "$LOG" "$OUT/gpu_check.log.part" && mv -f "$OUT/gpu_check.log.part" "$OUT/gpu_check.log"
}

check_out() { # $OUT against the tool's limits; prints what is wrong, returns 1 then
  local bad=0 n total f s depth
  n=$(find "$OUT" -mindepth 1 -type f | wc -l)
  total=$(find "$OUT" -mindepth 1 -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
  [ "$n" -le "$LIM_FILES" ] || { echo "OUT holds $n files: the tool returns at most $LIM_FILES"; bad=1; }
  [ "$total" -le "$LIM_TOTAL_B" ] || { echo "OUT holds $total bytes: the tool returns at most $LIM_TOTAL_B"; bad=1; }
  while IFS= read -r f; do
    s=$(stat -c %s "$f")
    [ "$s" -le "$LIM_FILE_B" ] || { echo "${f#$OUT/}: $s bytes, over the tool's $LIM_FILE_B per file"; bad=1; }
    depth=$(($(echo "${f#$OUT/}" | tr -cd / | wc -c)))
    [ "$depth" -le "$LIM_DEPTH" ] || { echo "${f#$OUT/}: $depth folders down, the tool returns $LIM_DEPTH"; bad=1; }
    echo "${f#$OUT/}" | grep -qE '^[A-Za-z0-9._/-]+$' || { echo "${f#$OUT/}: a name the tool does not return"; bad=1; }
  done < <(find "$OUT" -mindepth 1 -type f)
  [ $bad -eq 0 ] && echo "OUT: $n files, $((total >> 10)) KiB: within the device tool's limits ($LIM_FILES files, $((LIM_FILE_B >> 20)) MiB each, $((LIM_TOTAL_B >> 20)) MiB together, $LIM_DEPTH folders down)"
  return $bad
}

if [ "$XF_GPU_CHECK_CHILD" = final ]; then
  say "packing (${RESERVE} s kept for it)"
  pack
  msg=$(check_out)
  crc=$?
  say "$msg"
  if [ $DRY = 1 ]; then
    if [ -s "$W/dry_errors.txt" ]; then
      say "dry run: commands that would fail on the GPU machine: $(tr '\n' ' ' <"$W/dry_errors.txt")"
      crc=1
    fi
    tree=$(cd "$ROOT" && git ls-files -z 2>/dev/null | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
    carry=0
    [ -n "$BUILD" ] && [ -f "$BUILD/xfprof-gpu.tar.gz" ] && carry=$(stat -c %s "$BUILD/xfprof-gpu.tar.gz")
    if [ $((tree + carry)) -le "$LIM_TREE_B" ]; then
      say "carried working tree: $((tree >> 10)) KiB tracked + $((carry >> 10)) KiB carry = $(((tree + carry) >> 20)) MiB of $((LIM_TREE_B >> 20)) MiB"
    else
      say "carried working tree: $(((tree + carry) >> 20)) MiB, over the tool's $((LIM_TREE_B >> 20)) MiB"
      crc=1
    fi
    say "time plan (s, in order; budget ${BUDGET} s, ${RESERVE} s kept for packing): $PLAN"
    tot=0; for e in $PLAN; do tot=$((tot + ${e#*:})); done
    say "steps' limits add up to ${tot} s; each step is also capped by what is left"
    [ $((tot + RESERVE)) -le "$BUDGET" ] || say "(the steps' limits exceed the budget: the last ones get what is left)"
    pack # the log with these lines
  fi
  say "done in $(($(date +%s) - T0)) s; $OUT: $(cd "$OUT" && ls | tr '\n' ' ')"
  cp -f "$LOG" "$OUT/gpu_check.log"
  exit $crc
fi

# ======== the steps (child, under the overall timeout)
: >"$LOG"
: >"$W/steps.txt"
say "gpu_check $([ $DRY = 1 ] && echo '(dry run) ')into $OUT; budget ${BUDGET} s; plan: $PLAN"

# ---- the build
if [ -n "$BUILD" ] && [ ! -x "$BUILD/xfprof" ] && [ -f "$BUILD/xfprof-gpu.tar.gz" ]; then
  U=$(dirname "$W")/carry
  mkdir -p "$U" && tar xzf "$BUILD/xfprof-gpu.tar.gz" -C "$U" && BUILD="$U/xfprof-gpu"
  say "unpacked the carry into $BUILD"
fi
if [ -z "$BUILD" ] || [ ! -x "$BUILD/xfprof" ]; then
  if [ $DRY = 1 ]; then
    say "no build given (BUILD_DIR): the dry run checks the packing and limits only"
    BUILD=""
  else
    BUILD="$ROOT/build-gpu"
    say "building from source in $BUILD (no BUILD_DIR with xfprof)"
    tests=ON
    pkg-config --exists criterion 2>/dev/null || tests=OFF
    if ! timeout "$(left)" cmake -S "$ROOT" -B "$BUILD" -DXFPROF_CUDA=ON -DXFPROF_TESTS=$tests -DCMAKE_BUILD_TYPE=Release >>"$LOG" 2>&1 ||
       ! timeout "$(left)" cmake --build "$BUILD" -j"$(nproc)" >>"$LOG" 2>&1; then
      say "BUILD FAILED (see gpu_check.log)"; note_step build FAILED 0 "see gpu_check.log"; exit 4
    fi
  fi
fi
XF=${BUILD:+$BUILD/xfprof}
[ -n "$BUILD" ] && [ -d "$BUILD/libs" ] && LD_LIBRARY_PATH="$BUILD/libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export XFPROF_DATA_DIR=${XFPROF_DATA_DIR:-${BUILD:+$BUILD/data}}
[ -n "$XFPROF_DATA_DIR" ] || XFPROF_DATA_DIR="$ROOT/data"

# ---- env: libraries, device, gVisor, counters
ts=$(date +%s)
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
WHEELS=""
command -v python3 >/dev/null && WHEELS=$(py -c 'import nvidia, sys; print(" ".join(nvidia.__path__))' 2>/dev/null)
find_lib() { # $1: soname -> "path source", python's nvidia wheels first, then the toolkit, then ldconfig
  local p f d
  for p in $WHEELS; do
    f=$(find "$p" -maxdepth 3 -name "$1" 2>/dev/null | head -n 1)
    [ -n "$f" ] && { echo "$f wheel"; return; }
  done
  for d in "$CUDA_HOME/lib64" "$CUDA_HOME/extras/CUPTI/lib64" "$CUDA_HOME/targets/x86_64-linux/lib"; do
    [ -e "$d/$1" ] && { echo "$d/$1 toolkit"; return; }
  done
  f=$(ldconfig -p 2>/dev/null | awk -v l="$1" '$1 == l {print $NF; exit}')
  [ -n "$f" ] && echo "$f ldconfig"
}
libnote=""
for lib in libcublas.so.13 libcublasLt.so.13 libcupti.so.13; do
  hit=$(find_lib $lib)
  if [ -n "$hit" ]; then
    d=$(dirname "${hit% *}")
    case ":${LD_LIBRARY_PATH:-}:" in *":$d:"*) ;; *) LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;; esac
    say "$lib: ${hit% *} (${hit##* })"
  else
    say "$lib: NOT FOUND (looked in python3's nvidia wheels ${WHEELS:-(no nvidia package)}, $CUDA_HOME, ldconfig): the runs that need it report it"
    libnote="$libnote $lib missing;"
  fi
done
export LD_LIBRARY_PATH
{
  echo "uname: $(uname -a)"
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  [ -n "$XF" ] && "$XF" --version 2>&1
  [ -n "$XF" ] && ldd "$XF" 2>&1
  command -v nvidia-smi >/dev/null && sys_run nvidia-smi 2>&1
  command -v ncu >/dev/null && sys_run ncu --version 2>&1 | tail -n 1
  py -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -n 1
} >"$W/env.txt" 2>&1
command -v nvidia-smi >/dev/null && sys_run nvidia-smi --query-gpu=name --format=csv,noheader >"$W/gpu_name.txt" 2>/dev/null
GVISOR=0
if [ "$(uname -r)" = "4.4.0" ] || dmesg 2>/dev/null | grep -qi gvisor; then GVISOR=1; fi
COUNTERS=1
cnote="gVisor: $([ $GVISOR = 1 ] && echo yes || echo no)"
if [ $DRY = 1 ]; then
  cnote="$cnote; counters probe not run (dry run)"
elif [ -n "$XF" ]; then
  timeout -k 2 15 "$XF" run --device cuda --model stories15m --prompt 8 --gen 2 --reps 1 --warmup 0 --cupti counters \
    -o "$W/probe_counters.json" >"$W/probe_counters.txt" 2>&1
  prc=$?
  if [ $prc -ne 0 ]; then
    COUNTERS=0; cnote="$cnote; counters probe exited $prc: $(grep -v '^$' "$W/probe_counters.txt" | tail -n 1 | cut -c1-160)"
  elif grep -q "CUPTI counters not collected" "$W/probe_counters.txt"; then
    COUNTERS=0; cnote="$cnote; counters unavailable: $(grep -m1 "CUPTI counters not collected" "$W/probe_counters.txt" | cut -c1-200)"
  else
    cnote="$cnote; counters: available"
  fi
  [ $COUNTERS = 0 ] && cnote="$cnote: counters and ncu steps skipped, the runs keep CUPTI activity timing"
fi
say "env: $cnote"
note_step env done $(($(date +%s) - ts)) "$cnote;${libnote:- libraries found}"
pack

run_step() { # name cmd... : runs under the step's cap, notes status; the output goes to W/name.txt
  local name=$1 to rc t1; shift
  to=$(cap "$name")
  if [ $DRY = 1 ]; then
    local c="$*" v=""; c=${c//$W\//}; [ -n "$BUILD" ] && c=${c//$BUILD\//}; c=${c//$ROOT\//}
    # without a GPU an xfprof command must stop at "no CUDA device" (exit 3), after its flags were
    # parsed: a usage error (exit 2) would cost a rerun on the GPU machine
    if [ -n "$XF" ] && [ "$1" = "$XF" ] && [ ! -e /dev/nvidiactl ]; then
      timeout -k 2 20 "$@" >"$W/$name.dry.txt" 2>&1
      local rc=$?
      if [ $rc -eq 3 ]; then v="flags parse (exit 3: no device here); "
      else v="EXIT $rc, not 3: $(head -n 1 "$W/$name.dry.txt" | cut -c1-160); "; echo "$name: $v" >>"$W/dry_errors.txt"; fi
    fi
    note_step "$name" dry-run 0 "not run (dry run): $v${c:0:160}"; return 0
  fi
  if [ "$to" -le 5 ]; then say "$name: SKIPPED (budget spent)"; note_step "$name" skipped 0 "budget spent"; return 0; fi
  say "$name (limit ${to}s): $*"
  t1=$(date +%s)
  timeout -k 3 "$to" "$@" >"$W/$name.txt" 2>&1
  rc=$?
  local dt=$(($(date +%s) - t1)) why
  why=$(grep -h "CUPTI counters not collected\|note: CUPTI off\|WARNING" "$W/$name.txt" 2>/dev/null | head -n 2 | tr '\n' ' ' | cut -c1-200)
  case $rc in
    0) note_step "$name" ok "$dt" "${why:-}" ;;
    124 | 137) note_step "$name" TIMEOUT "$dt" "stopped at its ${to} s limit (see $name.txt)"; say "  $name timed out after ${to}s" ;;
    *) note_step "$name" FAILED "$dt" "exit $rc: $(grep -v '^$' "$W/$name.txt" | tail -n 1 | cut -c1-200)"; say "  $name exited $rc" ;;
  esac
  [ -n "$why" ] && say "  $name: $why"
  pack
  return 0
}

# ---- tests: each binary directly (a carried build has no ctest paths); the limit is shared
gpu_tests() {
  local t end=$(($(date +%s) + $1)) rc=0 r
  for t in "$BUILD"/test_gpu_ops "$BUILD"/test_gpu_model "$BUILD"/test_gpu_cupti "$BUILD"/test_cuda_device; do
    [ -x "$t" ] || { echo "== $(basename "$t"): not built"; continue; }
    local l=$((end - $(date +%s)))
    [ "$l" -gt 3 ] || { echo "== $(basename "$t"): SKIPPED (the tests' time is spent)"; rc=1; continue; }
    timeout -k 2 "$l" "$t" --jobs 1 --verbose 2>&1
    r=$?
    echo "== $(basename "$t") exit $r"
    [ $r -eq 0 ] || rc=1
  done
  return $rc
}
if [ $DRY = 1 ] || [ -z "$BUILD" ]; then
  note_step tests dry-run 0 "not run (dry run): test_gpu_ops test_gpu_model test_gpu_cupti test_cuda_device"
else
  export -f gpu_tests
  export BUILD
  run_step tests bash -c "gpu_tests $(cap tests)"
  grep -E "^\[(PASS|FAIL|SKIP|ERR )|^== " "$W/tests.txt" >>"$LOG"
  tcount() { grep -c "^\[$1" "$W/tests.txt" 2>/dev/null; }
  sed -i "\$s/\$/ pass $(tcount PASS), fail $(tcount FAIL), skipped $(tcount SKIP), crashed $(tcount 'ERR ')/" "$W/steps.txt"
  say "tests: $(tail -n 1 "$W/steps.txt")"
  pack
fi

if [ $DRY = 1 ] || [ -z "$BUILD" ]; then
  note_step hf dry-run 0 "not run (dry run): test_gpu_hf (the HF fixtures: MoE, MLA, windows on the GPU)"
elif [ -x "$BUILD/test_gpu_hf" ]; then
  run_step hf env XF_SOURCE_DIR="$ROOT" "$BUILD/test_gpu_hf" --jobs 1 --verbose
  grep -E "^\[(PASS|FAIL|SKIP|ERR )|greedy tokens equal|teacher-forced|tokens per expert" "$W/hf.txt" >>"$LOG"
  hcount() { grep -c "^\[$1" "$W/hf.txt" 2>/dev/null; }
  sed -i "\$s/\$/ pass $(hcount PASS), fail $(hcount FAIL), skipped $(hcount SKIP), crashed $(hcount 'ERR ')/" "$W/steps.txt"
  pack
else
  note_step hf skipped 0 "test_gpu_hf not built (Criterion missing?)"
fi

run_step ceilings "$XF" machine --device cuda -o "$W/machine.json"
[ -s "$W/machine.json" ] && export XFPROF_GPU_MACHINE_FILE="$W/machine.json"

COMMON=(--model llama-2-7b --wdtype bf16 --kvdtype bf16 --prompt 512 --gen 16 --device cuda)
run_step decode_b1 "$XF" run "${COMMON[@]}" --batch 1 --reps 3 --cupti off --cuda-graph -o "$W/decode_b1.json"
run_step activity "$XF" run "${COMMON[@]}" --batch 1,16,64 --reps 2 --cupti activity -o "$W/activity.json"

SMALL=(--model "$ROOT/bench/gpu/llama-2-7b-2layers/config.json" --wdtype bf16 --kvdtype bf16 --prompt 512 --gen 2
       --batch 1 --reps 1 --warmup 0 --device cuda)
if [ $COUNTERS = 1 ]; then
  run_step counters "$XF" run "${SMALL[@]}" --cupti counters -o "$W/counters.json"
  if command -v ncu >/dev/null || [ $DRY = 1 ]; then
    # ncu runs with the machine's libraries; xfprof, its child, through a wrapper that has ours
    XFW="$(dirname "$W")/xfprof-wrapped"
    printf '#!/bin/sh\nLD_LIBRARY_PATH="%s" exec "%s" "$@"\n' "$LD_LIBRARY_PATH" "${XF:-xfprof}" >"$XFW"
    chmod +x "$XFW"
    run_step ncu env LD_LIBRARY_PATH="$ORIG_LD_LIBRARY_PATH" ncu --csv --clock-control none --target-processes all --launch-count 200 \
      --kernel-name "regex:rmsnorm|attention|gemm|gemv|nvjet|xmma|cutlass" \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size \
      --log-file "$W/ncu.csv" "$XFW" run "${SMALL[@]}" --cupti off -o "$W/ncu_run.json"
  else
    note_step ncu skipped 0 "ncu not on PATH"
  fi
else
  note_step counters skipped 0 "counters unavailable (see env)"
  note_step ncu skipped 0 "counters unavailable (see env): ncu reads the same counters"
fi

if command -v python3 >/dev/null; then
  run_step peer env LD_LIBRARY_PATH="$ORIG_LD_LIBRARY_PATH" PYTHONUNBUFFERED=1 XF_LD_LIBRARY_PATH="$LD_LIBRARY_PATH" \
    python3 "$ROOT/bench/gpu/peer.py" "$W" "${XF:-xfprof}"
else
  note_step peer skipped 0 "no python3"
fi
[ $DRY = 1 ] && command -v python3 >/dev/null && py "$ROOT/bench/gpu/peer.py" "$W" "${XF:-xfprof}" --dry-run >>"$LOG" 2>&1
say "steps done in $(($(date +%s) - T0)) s"
exit 0
