#!/usr/bin/env bash
#SBATCH --job-name=xfprof-sweep
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=1
#SBATCH --output=xfprof-sweep-%A_%a.out
# One task of a Slurm job array runs one shard of an xfprof sweep (docs/cluster.md):
#
#   sbatch --array=1-8 scripts/slurm-sweep.sh OUTDIR --predict --model llama-2-7b --batch 1..64 --prompt 128..4096*2
#   xfprof merge OUTDIR/shard-*-of-8.jsonl -o sweep.json --jsonl sweep.jsonl
#
# OUTDIR (shared by the nodes) gets shard-I-of-N.jsonl from each task; the arguments after it are
# those of `xfprof sweep`. Task I of an array of N tasks (any contiguous range: --array=0-7 works as
# well as 1-8) runs `xfprof sweep ARGS --shard I/N`, I counted from 1, with --resume: a task that is
# requeued (preempted, node failure) continues from the points its JSONL already holds.
# XFPROF names the binary (default: xfprof on PATH); sbatch passes the environment to the tasks.
set -euo pipefail
out=${1:?usage: sbatch --array=1-N slurm-sweep.sh OUTDIR SWEEP-ARGS...}
shift
xf=${XFPROF:-xfprof}
: "${SLURM_ARRAY_TASK_ID:?not a job array task: submit with sbatch --array=1-N}"
min=${SLURM_ARRAY_TASK_MIN:?} max=${SLURM_ARRAY_TASK_MAX:?} count=${SLURM_ARRAY_TASK_COUNT:?}
step=${SLURM_ARRAY_TASK_STEP:-1}
if [ "$step" != 1 ] || [ $((max - min + 1)) -ne "$count" ]; then
  echo "slurm-sweep.sh: the array must be one contiguous range (--array=1-N, no step or gaps): got $min-$max step $step, $count tasks" >&2
  exit 2
fi
i=$((SLURM_ARRAY_TASK_ID - min + 1))
mkdir -p "$out"
exec "$xf" sweep "$@" --shard "$i/$count" --jsonl "$out/shard-$i-of-$count.jsonl" --resume
