/* The collectives between GPUs: NCCL, loaded at run time with dlopen (libnccl.so.2, or the file
 * $XFPROF_NCCL_LIB names), never linked, so the one binary starts where NCCL is absent and says so
 * when asked for it. The ranks are MPI's (runner/comm.h): rank 0 makes NCCL's unique id and MPI
 * broadcasts it; each rank drives the GPU of its local rank on the node.
 *
 * Declared here from NCCL's stable C ABI (nccl.h 2.x: ncclResult_t, ncclDataType_t and ncclRedOp_t
 * are int enums, ncclComm_t and cudaStream_t pointers, ncclUniqueId 128 bytes); test_comm_nccl
 * checks the values against nccl.h where the CUDA toolkit has it.
 *
 * Deadlines as on the MPI path: ncclCommInitRank runs on a helper thread that the caller waits for
 * until the timeout; every all-reduce is enqueued on the stream and then polled (the stream, and
 * ncclCommGetAsyncError) until done, an error, or the deadline, when the communicator is aborted
 * (ncclCommAbort) and XF_EIO names the collective and the timeout; the caller then ends every rank
 * (comm_abort) without writing a record.
 *
 * Status: compiled, and its host logic (loading, symbols, version, id exchange, rank -> device,
 * deadlines, bus bytes) tested against a fake libnccl (tests/fake/fake_nccl.c); it has not run on
 * a GPU (docs/parallel.md). */
#ifndef XF_COMM_NCCL_H
#define XF_COMM_NCCL_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "probes/comm_ceiling.h"
#include "runner/comm.h"

#define NCCL_ID_BYTES 128
#define NCCL_OK 0           /* ncclSuccess */
#define NCCL_IN_PROGRESS 7  /* ncclInProgress */
#define NCCL_FLOAT32 7      /* ncclFloat32 */
#define NCCL_SUM 0          /* ncclSum */
#define NCCL_MIN_VERSION 20400 /* 2.4: ncclCommGetAsyncError and ncclCommAbort, which the deadlines need */

typedef struct nccl_unique_id { char internal[NCCL_ID_BYTES]; } nccl_unique_id;

/* The loaded library: its entry points (NULL until comm_nccl_load). */
typedef struct nccl_lib {
    void *handle;      /* dlopen's; comm_nccl_unload closes it */
    char path[512];    /* the file it came from */
    int version;       /* NCCL_VERSION_CODE as ncclGetVersion gives it (2.9+: major*10000 + minor*100 + patch) */
    int (*get_version)(int *version);
    int (*get_unique_id)(nccl_unique_id *id);
    int (*comm_init_rank)(void **comm, int nranks, nccl_unique_id id, int rank);
    int (*all_reduce)(const void *send, void *recv, size_t count, int dtype, int op, void *comm, void *stream);
    int (*comm_get_async_error)(void *comm, int *async_error);
    int (*comm_abort)(void *comm);
    int (*comm_destroy)(void *comm);
    const char *(*get_error_string)(int result);
} nccl_lib;

/* Loads NCCL from path (NULL: $XFPROF_NCCL_LIB, else libnccl.so.2), resolves every entry point and
 * checks the version (major 2, at least NCCL_MIN_VERSION). XF_EUNSUPPORTED with what to install,
 * the missing symbol or the version found; *out then holds nothing to unload. */
xf_status comm_nccl_load(const char *path, nccl_lib *out);
void comm_nccl_unload(nccl_lib *lib); /* NULL or unloaded: a no-op */

/* NCCL's version code as (major, minor, patch): codes below 10000 are the pre-2.9 form
 * major*1000 + minor*100 + patch. 1 when it is one xfprof runs (major 2, >= NCCL_MIN_VERSION). */
int comm_nccl_version_split(int code, int *major, int *minor, int *patch);

/* This process's rank on its node, from the launcher's environment (Open MPI's
 * OMPI_COMM_WORLD_LOCAL_RANK, MPICH / Hydra's MPI_LOCALRANKID, Slurm's SLURM_LOCALID, PMIx's
 * PMIX_LOCAL_RANK); with no launcher 0. XF_EINVAL for a value that is not a small integer. */
xf_status comm_nccl_local_rank(int *local_rank);

/* The GPU of a local rank: local rank i drives device i. XF_EINVAL when the node has fewer devices
 * than ranks (naming both and what to give mpirun). */
xf_status comm_nccl_device_of(int local_rank, int n_devices, int *device);

/* How the host learns that the stream's work is done (the CUDA runtime's cudaStreamQuery on a GPU,
 * reference_model/cuda_comm.h; the tests' own elsewhere): 1 done, 0 not yet, < 0 an error (the
 * message set). */
typedef struct comm_nccl_stream {
    void *stream; /* cudaStream_t */
    void *ctx;
    int (*query)(void *ctx, void *stream);
} comm_nccl_stream;

typedef struct comm_nccl {
    const nccl_lib *lib;
    void *comm;          /* ncclComm_t; NULL once aborted or destroyed */
    comm_nccl_stream st;
    int rank, size;      /* the MPI world's */
    double timeout_s;    /* the MPI comm's: every NCCL call's deadline */
} comm_nccl;

/* The NCCL communicator over the MPI world c: rank 0's unique id broadcast to every rank (MPI),
 * then ncclCommInitRank with a deadline. The stream is the caller's (on the rank's device, made
 * current by the caller). XF_EIO on a timeout or NCCL error (message from ncclGetErrorString). */
xf_status comm_nccl_init(comm_nccl *nc, const nccl_lib *lib, const comm *c, const comm_nccl_stream *st);

/* In-place sum over the ranks of n floats of device memory (ncclAllReduce on the stream, then
 * polled to completion with the deadline; ncclCommAbort on a timeout or an asynchronous error).
 * `what` names the collective in messages. */
xf_status comm_nccl_allreduce_f32(comm_nccl *nc, float *dev_buf, int64_t n, const char *what);

/* The all-reduce ceiling over NCCL (machine --comm --device cuda): comm_ceiling_measure's
 * transport with the all-reduces on dev_buf (dev_n floats of device memory; the host buffer the
 * measurement passes only gives the count), the slowest rank over MPI, the host's monotonic clock
 * read after each all-reduce completed (as nccl-tests times them). */
typedef struct comm_nccl_ceiling {
    comm_nccl *nc;
    const comm *mpi;
    float *dev_buf; /* (dev_n) device memory, the caller's */
    int64_t dev_n;
} comm_nccl_ceiling;
comm_ceiling_ops comm_nccl_ceiling_ops(comm_nccl_ceiling *ctx);

/* ncclCommDestroy (nothing when aborted); NULL fine. */
void comm_nccl_free(comm_nccl *nc);

#endif
