# Sourced by the stages that run independent checks side by side (scripts/fuzz.sh,
# tests/valgrind/run_valgrind.sh, tests/fault/run_alloc_faults.sh).
# jobs_slot MAX: waits until fewer than MAX of the calling shell's background jobs are running.
jobs_slot() { while [ "$(jobs -rp | wc -l)" -ge "$1" ]; do wait -n || true; done; }
