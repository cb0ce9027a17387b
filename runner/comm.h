/* The collectives between the ranks of a model split over processes: MPI on the CPU (Open MPI,
 * launched by mpirun), the one engine xfprof uses for it (no home-made transport). Built with MPI
 * when CMake finds it (XFPROF_HAVE_MPI); without it, or without mpirun, a world of one rank and
 * the functions say why they cannot do more.
 *
 * Every blocking collective polls a non-blocking one against a deadline: a rank that died or hangs
 * makes the others fail with XF_EIO and a message naming the collective and the timeout, never
 * wait forever (the caller then aborts the job without writing a record). */
#ifndef XF_COMM_H
#define XF_COMM_H

#include <stdint.h>

#include "core/status.h"

typedef struct comm {
    int rank;          /* 0..size-1 */
    int size;          /* ranks in the world (1 without mpirun) */
    int mpi;           /* 1: MPI initialised by comm_init (comm_free finalizes it) */
    double timeout_s;  /* deadline of every collective */
} comm;

/* 1 when xfprof was built with MPI. */
int comm_built_with_mpi(void);

/* 1 when this process was started by mpirun / srun (Open MPI's, PMI's or PMIx's environment). */
int comm_launched(void);

/* Initialises MPI when launched by mpirun (else a world of one). XF_EUNSUPPORTED when launched by
 * mpirun but built without MPI. */
xf_status comm_init(comm *c, double timeout_s);
void comm_free(comm *c); /* finalizes MPI; NULL fine */

/* In-place sum over the ranks of n floats (MPI_Allreduce, MPI_SUM). `what` names the collective in
 * the timeout message ("the all-reduce after layer 3's o_proj"). */
xf_status comm_allreduce_f32(const comm *c, float *buf, int64_t n, const char *what);

/* The largest of v over the ranks (nccl-tests takes the slowest rank's time). */
xf_status comm_max_f64(const comm *c, double *v);

/* Rank 0 gets every rank's n doubles, rank-major, into out (size * n; other ranks' out unused). */
xf_status comm_gather_f64(const comm *c, const double *in, int64_t n, double *out);

/* Rank 0's n bytes of buf to every rank (MPI_Ibcast, with the timeout); a world of one: nothing. */
xf_status comm_bcast_bytes(const comm *c, void *buf, int64_t n, const char *what);

/* All ranks wait for each other (with the timeout). */
xf_status comm_barrier(const comm *c, const char *what);

/* Ends every rank of the job (MPI_Abort) after a collective failed; returns only without MPI. */
void comm_abort(const comm *c, int code);

#endif
