#!/usr/bin/env bash
# Installs what xfprof needs to build and test on Debian/Ubuntu (run as root, or with sudo).
# Installs only what is missing, so a second run is quick. The CUDA toolkit is not installed
# here: the CUDA parts build when nvcc is found (e.g. /usr/local/cuda).
set -euo pipefail
# Build: compiler, CMake, cJSON, OpenBLAS (prefill GEMMs), oneDNN (optional: bf16 prefill on AMX), yajl (streaming import of traces), SQLite (Nsight Systems exports). Tests: Criterion; gnuplot (report
# charts); chromium and fonts (the report opened in a real browser); python3 (shell tests read
# JSON); clang with its runtime (libFuzzer harnesses); valgrind (the memcheck pass).
pkgs=(build-essential cmake pkg-config libcjson-dev libopenblas-dev libdnnl-dev libyajl-dev libsqlite3-dev libcriterion-dev gnuplot-nox
      chromium fonts-liberation fonts-dejavu-core python3 clang libclang-rt-dev valgrind)
# tests/cli_slurm.sh: a real single-node Slurm (slurmctld, slurmd) with munge, started by the test
pkgs+=(slurm-wlm munge)
# Open MPI: the collectives of a model split over ranks (mpirun -np 2 xfprof machine --comm / run --tp).
pkgs+=(openmpi-bin libopenmpi-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi
sudo_cmd=""
if [ "$(id -u)" -ne 0 ]; then sudo_cmd="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo_cmd apt-get update -qq
$sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
