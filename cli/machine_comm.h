/* `xfprof machine --comm`: the link between MPI ranks, measured like nccl-tests' bus bandwidth,
 * added to the machine file as its "link" (what `run --tp` classifies the all-reduces against). */
#ifndef XF_MACHINE_COMM_H
#define XF_MACHINE_COMM_H

/* Runs the measurement on every rank (mpirun -np N, N >= 2); rank 0 prints it and, with save,
 * writes it into the devices file at `out` (NULL: the machine file), which must exist (measured by
 * `xfprof machine` first). Returns the exit status. */
int machine_comm(const char *cmd, const char *out, int save, int quick);

#endif
