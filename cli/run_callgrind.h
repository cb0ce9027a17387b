/* xfprof run --callgrind / --callgrind-cache: the same run under valgrind's callgrind, for exact
 * per-op instruction counts (probes/callgrind.h). Without valgrind around it, `xfprof run
 * --callgrind ...` starts `valgrind --tool=callgrind` with the options the probe needs on this
 * same binary and these same arguments, a private dump file in a temporary folder (passed to the
 * child as XFPROF_CALLGRIND_OUT), waits for it and returns its exit status; the child, seeing
 * itself under valgrind, runs the command with the probe. */
#ifndef XF_RUN_CALLGRIND_H
#define XF_RUN_CALLGRIND_H

/* argv: the command's (argv[0] "run"). cache: 1 for --callgrind-cache. Returns -1 when this
 * process is the child under callgrind and should run: *dump_path is then the dump file (the
 * environment's string). Else the exit status to return: the child's, or 2 when valgrind runs
 * this process but not through xfprof run --callgrind, 3 when the build has no callgrind probe,
 * 4 when valgrind cannot be started. */
int run_callgrind_start(int argc, char **argv, int cache, const char **dump_path);

struct run_plan;
/* cmd_run's --callgrind: refuses what the counts cannot be exact for (--device cuda, --no-probes,
 * --threads above 1: threads waiting for each other spin a load-dependent number of instructions),
 * defaults the threads to 1, starts the child (run_callgrind_start) and returns its exit status;
 * in the child, sets the plan's dump file, turns perf_event off and reads the test hook
 * XFPROF_TEST_EXTRA_INSTR, and returns -1: go on with the run. */
int run_callgrind_check(struct run_plan *pl, int threads_given, int argc, char **argv);

#endif
