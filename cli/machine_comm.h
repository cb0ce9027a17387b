/* `xfprof machine --comm [--device cuda]`: the link between MPI ranks (or, with --device cuda,
 * between their GPUs over NCCL), measured like nccl-tests' bus bandwidth, added to the machine file
 * as its "link" (what `run --tp` classifies the all-reduces against). */
#ifndef XF_MACHINE_COMM_H
#define XF_MACHINE_COMM_H

/* Runs the measurement on every rank (mpirun -np N, N >= 2); rank 0 prints it and, with save,
 * writes it into the devices file at `out` (NULL: the machine file, or with cuda the GPU's), which
 * must exist (measured by `xfprof machine`, or `machine --device cuda`, first). cuda: NCCL
 * all-reduces of device memory, local rank i on GPU i (runner/comm_nccl.h), the link named
 * "nccl"; else MPI's of host memory, "mpi". Returns the exit status. */
int machine_comm(const char *cmd, const char *out, int save, int quick, int cuda);

#endif
