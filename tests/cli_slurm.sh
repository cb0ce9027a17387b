#!/usr/bin/env bash
# A real single-node Slurm on localhost (Debian's slurm-wlm and munge), configured and started
# here, stopped and removed on every exit path: a 3-task job array of scripts/slurm-sweep.sh runs a
# predicted sweep in shards, `xfprof merge` joins them, and the result must equal the unsharded
# sweep. Skipped (exit 77) when not root or when slurm/munge are not installed
# (scripts/install-deps.sh installs them); a failure to start or a job that does not finish in time
# fails with the daemons' logs.
set -u
XF=${1:?usage: cli_slurm.sh path/to/xfprof}
XF=$(cd "$(dirname "$XF")" && pwd)/$(basename "$XF")
src=${XF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
skip() { echo "SKIP: cli_slurm: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "needs root (the test runs its own slurmctld, slurmd and munged)"
for p in munged slurmctld slurmd sbatch squeue sinfo scancel; do
  command -v "$p" >/dev/null || skip "$p not found: apt-get install -y slurm-wlm munge (scripts/install-deps.sh)"
done

tmp=$(mktemp -d /tmp/xfprof-slurm.XXXXXX)
chmod 755 "$tmp"
conf=$tmp/slurm.conf
export SLURM_CONF=$conf
pids=()
log_tail() { for f in "$tmp"/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -15 "$f"; }; done; }
# the session id of a process: field 6 of /proc/PID/stat, the 4th after "(comm) "
session_of() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  stat=${stat##*) }
  set -- $stat
  echo "${4:-}"
}
cleanup() {
  # the jobs first (while the controller runs), then the daemons we started, by their PIDs
  [ -f "$conf" ] && scancel --quiet --full --user=root 2>/dev/null
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for _ in $(seq 50); do
    alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive -eq 0 ] && break
    sleep 0.1
  done
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  # a job step still running under this test's Slurm: its environment names our slurm.conf, and it
  # runs in a session of its own (this script's own processes share its session and are left alone)
  # (read from /proc: a bare Debian has no ps)
  local me st pid
  me=$(session_of $$)
  for st in /proc/[0-9]*/stat; do
    pid=${st#/proc/}
    pid=${pid%/stat}
    [ "$(session_of "$pid")" = "$me" ] && continue
    { tr '\0' '\n' <"/proc/$pid/environ"; } 2>/dev/null | grep -qx "SLURM_CONF=$conf" && kill -KILL "$pid" 2>/dev/null
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
die() { echo "FAIL: $*"; log_tail; exit 1; }

# Every daemon runs under `timeout`: should this script be killed with SIGKILL (no trap runs), they
# still stop by themselves within $life seconds (CTest's TIMEOUT is 150 s; XF_SLURM_LIFE_S sets it, to test this).
life=${XF_SLURM_LIFE_S:-140}
# munge: a fresh key and a private socket
mkdir -p "$tmp/munge" "$tmp/state" "$tmp/spool" "$tmp/out"
chmod 700 "$tmp/munge"
dd if=/dev/urandom of="$tmp/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$tmp/munge/munge.key"
sock=$tmp/munge/munge.sock
timeout -k 5 "$life" munged --foreground --force --key-file="$tmp/munge/munge.key" --socket="$sock" --pid-file="$tmp/munge/munged.pid" \
  --log-file="$tmp/munged.log" --seed-file="$tmp/munge/munged.seed" 2>>"$tmp/munged.log" &
pids+=($!)
for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || die "munged did not start"

# slurm.conf: this node as `slurmd -C` sees it, ports of our own
line=$(slurmd -C 2>/dev/null | head -1)
node=$(echo "$line" | sed -n 's/^NodeName=\([^ ]*\) .*/\1/p')
hw=${line#NodeName=* }
[ -n "$node" ] && [ -n "$hw" ] || die "slurmd -C did not print this node's NodeName and hardware: '$line'"
port=$((20000 + RANDOM % 20000))
cat >"$conf" <<CONF
ClusterName=xfprofci
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$sock
CredType=cred/munge
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
SlurmdTimeout=60
NodeName=$node NodeAddr=127.0.0.1 $hw State=UNKNOWN
PartitionName=ci Nodes=$node Default=YES MaxTime=10 State=UP
CONF
timeout -k 5 "$life" slurmctld -D -c -f "$conf" >>"$tmp/slurmctld.log" 2>&1 &
pids+=($!)
timeout -k 5 "$life" slurmd -D -N "$node" -f "$conf" >>"$tmp/slurmd.log" 2>&1 &
pids+=($!)
state=
for _ in $(seq 150); do
  state=$(sinfo -h -n "$node" -o %T 2>/dev/null | head -1)
  [ "$state" = idle ] && break
  sleep 0.2
done
[ "$state" = idle ] || die "the Slurm node did not come up in 30 s (state '$state')"

# the unsharded sweep here, the same sweep as a 3-task array there
sargs=(--predict --model stories15m --batch 1,2,4 --prompt 32,64 --gen 0,8) # 12 points
"$XF" sweep "${sargs[@]}" --jsonl "$tmp/full.jsonl" -o "$tmp/full.json" >/dev/null 2>"$tmp/err" || die "unsharded sweep: $(cat "$tmp/err")"
cd "$tmp" || die "cd $tmp"
wait_s=${XF_SLURM_WAIT_S:-90} # the test of this test sets it short to check that a timeout cleans up
if ! XFPROF=$XF timeout "$wait_s" sbatch --wait --quiet --array=1-3 --output="$tmp/out/task-%a.out" "$src/scripts/slurm-sweep.sh" \
  "$tmp/shards" "${sargs[@]}" >"$tmp/sbatch.out" 2>&1; then
  squeue -h >>"$tmp/sbatch.out" 2>&1
  cat "$tmp"/out/*.out 2>/dev/null
  cat "$tmp/sbatch.out"
  die "the job array did not finish in $wait_s s, or a task failed"
fi
n=$(ls "$tmp"/shards/shard-*-of-3.jsonl 2>/dev/null | wc -l)
[ "$n" -eq 3 ] || fail "the array wrote $n shard files, expected 3: $(ls "$tmp/shards" 2>&1)"
"$XF" merge "$tmp"/shards/shard-*-of-3.jsonl -o "$tmp/merged.json" --jsonl "$tmp/merged.jsonl" 2>"$tmp/err" ||
  fail "merge of the array's shards: $(cat "$tmp/err")"
nocreated() { sed 's/"created":"[^"]*"//' "$1"; }
[ "$(nocreated "$tmp/merged.json")" = "$(nocreated "$tmp/full.json")" ] ||
  fail "the merged shards of the Slurm array differ from the unsharded sweep"
[ "$(grep -c . "$tmp/merged.jsonl")" -eq 12 ] || fail "the merged JSONL does not hold the 12 points"

if [ $fails -eq 0 ]; then echo "cli_slurm: all checks passed (3-task Slurm array merged = unsharded sweep)"; else echo "cli_slurm: $fails failures"; exit 1; fi
