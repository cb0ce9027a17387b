# Sourced by the CLI tests that measure memory (cli_sweep_stream.sh, cli_record_stream.sh).
# Under ASan, freed memory waits in a quarantine (256 MiB by default) and RSS grows with whatever
# was freed: keep it small so RSS measures what is held.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1:malloc_context_size=2"

# Peak RSS (KiB) of one command, from the kernel's accounting of the child; fails (its stderr's
# tail on ours) when the command fails.
peak_kib() {
    python3 - "$@" <<'PY'
import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
if r.returncode != 0:
    sys.stderr.write(r.stderr.decode(errors="replace")[-400:])
    sys.exit(1)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
PY
}
