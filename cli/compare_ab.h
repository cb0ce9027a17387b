/* The interleaved A/B driver of `xfprof compare --ab BASE_XFPROF NEW_XFPROF -- run|sweep ARGS`:
 * runs the two builds as child processes, alternately on the same machine, round after round
 * (each round one run of each build, the order drawn at random per round), and reads back every
 * run's record. compare_rounds() (analyzers/compare.h) then tests the paired ratios. */
#ifndef XF_CLI_COMPARE_AB_H
#define XF_CLI_COMPARE_AB_H

#include <stdint.h>

#include "core/record.h"

typedef struct ab_plan {
    const char *bin[2];  /* [0] BASE build, [1] NEW build (paths of xfprof executables) */
    char **cmd;          /* (n_cmd) the command given after --: "run" or "sweep" and its options */
    int n_cmd;
    int rounds;          /* rounds (pairs of runs), >= 1 (compare_rounds needs COMPARE_MIN_ROUNDS) */
    uint64_t seed;       /* draws the order within each round */
    const char *keep;    /* a folder to keep every run's record and stderr in, or NULL */
    /* Called on round 1's two records before the other rounds run (NULL: not called), so records
     * that cannot be compared (different workloads) stop the driver at once; an error stops it. */
    xf_status (*check_first)(const record *base, const record *new_, void *ctx);
    void *check_ctx;
} ab_plan;

typedef struct ab_rounds {
    int n;              /* rounds completed */
    record *base;       /* (n) BASE's record of round k; owned, free with ab_rounds_free */
    record *new_;       /* (n) NEW's record of round k */
    char *order;        /* (n + 1) "AB" / "BA" per round as 'A' (BASE first) or 'B' (NEW first), NUL-ended */
    double wall_s;      /* the whole driver, wall clock */
} ab_rounds;

/* Checks that both builds are xfprof (`BIN --version` prints "xfprof "), that the command is
 * `run` or `sweep` without -o (the driver sets it), then runs the rounds. A build that is not
 * xfprof, a run that fails on one side (its stderr's last lines quoted) or a record that cannot
 * be read: XF_EINVAL naming the build, the round and the side. Without a machine file
 * ($XFPROF_MACHINE_FILE or ~/.cache/xfprof/machine.json) BASE measures the ceilings once quickly
 * into the work folder and both sides use them. A SIGINT or SIGTERM stops between runs: XF_EIO
 * with cli_signal_pending() set. On success *out owns its records. */
xf_status ab_run(const ab_plan *p, ab_rounds *out);

void ab_rounds_free(ab_rounds *r); /* NULL is fine */

/* XFPROF_MACHINE_FILE set, or ~/.cache/xfprof/machine.json readable: nothing to do, made "".
 * Else `bin machine --quick` measures the ceilings once into dir/machine.json (made, len bytes),
 * XFPROF_MACHINE_FILE points there for the children, and the caller unlinks it. XF_EINVAL
 * quoting the measurement's stderr when it fails. */
xf_status ab_ensure_machine_file(const char *bin, const char *dir, char *made, size_t len);

#endif
