/* `mpirun -np N xfprof run --tp N`: the reference model split over N MPI ranks (tensor parallel),
 * each rank its shard of the weights and KV, the all-reduces through MPI, timed as ops; rank 0
 * writes one record with every rank's samples. */
#ifndef XF_RUN_TP_H
#define XF_RUN_TP_H

#include "output.h"
#include "runner/runner.h"

/* Runs plan `pl` (its cfg the whole model) split over tp ranks; every rank calls it. Refuses, exit
 * 2 with the reason, without MPI in the build, without mpirun, with a number of ranks other than
 * tp, without a measured link in the machine file (mpirun -np N xfprof machine --comm). A
 * collective that does not complete in timeout_s (a rank died or hangs) ends every rank (exit 4)
 * and no record is written. *writer is 1 on the rank that writes (rank 0, or the only process of a
 * refusal without mpirun): what else the command writes (--save-tokens) comes from it alone; every
 * rank runs pl->on_step (the replay's collectives need them all). Returns the exit status. */
int run_tp(const char *cmd, run_plan *pl, int tp, double timeout_s, cli_output *out, int *writer);

#endif
