/* The collectives over MPI (comm.h); without MPI a world of one rank. */
#include "runner/comm.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "probes/timer.h"

#ifdef XFPROF_HAVE_MPI
#include <mpi.h>
#endif

int comm_built_with_mpi(void) {
#ifdef XFPROF_HAVE_MPI
    return 1;
#else
    return 0;
#endif
}

int comm_launched(void) {
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i])) return 1;
    return 0;
}

#ifdef XFPROF_HAVE_MPI
/* Waits for a non-blocking request until the deadline. */
static xf_status wait_req(const comm *c, MPI_Request *rq, const char *what) {
    const double start = timer_now_s(), end = start + c->timeout_s;
    for (;;) {
        if (timer_now_s() - start > 0.05) { /* a long wait (another rank computes, maybe on this core): poll gently */
            struct timespec nap = {0, 100000};
            nanosleep(&nap, NULL);
        }
        int done = 0;
        if (MPI_Test(rq, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return xf_errorf(XF_EIO, "rank %d: %s failed in MPI (another rank died?)", c->rank, what);
        if (done) return XF_OK;
        if (timer_now_s() > end)
            return xf_errorf(XF_EIO, "rank %d: %s did not complete in %.0f s: another rank died or hangs", c->rank, what,
                             c->timeout_s);
    }
}
#endif

/* XF_EOVERFLOW when n elements (of `unit`) are more than one MPI call's int count. */
static xf_status one_call(int64_t n, const char *unit, const char *what) {
    return n > 0x7fffffff ? xf_errorf(XF_EOVERFLOW, "%s: %lld %s is more than one MPI call moves", what, (long long)n, unit) : XF_OK;
}

#ifdef XFPROF_HAVE_MPI
/* A non-blocking collective: its start's result rc, then the wait for rq until the deadline. */
static xf_status run_req(const comm *c, int rc, MPI_Request *rq, const char *what) {
    if (rc != MPI_SUCCESS) return xf_errorf(XF_EIO, "rank %d: %s could not start", c->rank, what);
    return wait_req(c, rq, what);
}
#endif

xf_status comm_init(comm *c, double timeout_s) {
    memset(c, 0, sizeof *c);
    c->size = 1;
    c->timeout_s = timeout_s > 0 ? timeout_s : 60;
    if (!comm_launched()) return XF_OK;
#ifdef XFPROF_HAVE_MPI
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited && MPI_Init(NULL, NULL) != MPI_SUCCESS) return xf_errorf(XF_EIO, "MPI_Init failed");
    c->mpi = !inited;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c->size);
    return XF_OK;
#else
    return xf_errorf(XF_EUNSUPPORTED, "started by mpirun, but this xfprof was built without MPI: install Open MPI "
                     "(apt-get install openmpi-bin libopenmpi-dev) and build again");
#endif
}

void comm_free(comm *c) {
    if (!c) return;
#ifdef XFPROF_HAVE_MPI
    if (c->mpi) MPI_Finalize();
#endif
    c->mpi = 0;
}

xf_status comm_allreduce_f32(const comm *c, float *buf, int64_t n, const char *what) {
    if (c->size <= 1 || n <= 0) return XF_OK;
    xf_status s = one_call(n, "floats", what);
    if (s) return s;
#ifdef XFPROF_HAVE_MPI
    MPI_Request rq;
    return run_req(c, MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &rq), &rq, what);
#else
    (void)buf;
    return xf_errorf(XF_EUNSUPPORTED, "%s: built without MPI", what);
#endif
}

xf_status comm_max_f64(const comm *c, double *v) {
    if (c->size <= 1) return XF_OK;
#ifdef XFPROF_HAVE_MPI
    MPI_Request rq;
    if (MPI_Iallreduce(MPI_IN_PLACE, v, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &rq) != MPI_SUCCESS)
        return xf_errorf(XF_EIO, "rank %d: the maximum over the ranks could not start", c->rank);
    return wait_req(c, &rq, "the maximum over the ranks");
#else
    (void)v;
    return xf_errorf(XF_EUNSUPPORTED, "built without MPI");
#endif
}

xf_status comm_gather_f64(const comm *c, const double *in, int64_t n, double *out) {
    if (c->size <= 1) {
        if (n > 0) memcpy(out, in, (size_t)n * sizeof *in);
        return XF_OK;
    }
    if (n < 0 || n > 0x7fffffff) return xf_errorf(XF_EOVERFLOW, "gather of %lld doubles", (long long)n);
#ifdef XFPROF_HAVE_MPI
    MPI_Request rq;
    if (MPI_Igather(in, (int)n, MPI_DOUBLE, out, (int)n, MPI_DOUBLE, 0, MPI_COMM_WORLD, &rq) != MPI_SUCCESS)
        return xf_errorf(XF_EIO, "rank %d: the gather of the samples could not start", c->rank);
    return wait_req(c, &rq, "the gather of the samples to rank 0");
#else
    return xf_errorf(XF_EUNSUPPORTED, "built without MPI");
#endif
}

xf_status comm_bcast_bytes(const comm *c, void *buf, int64_t n, const char *what) {
    if (c->size <= 1 || n <= 0) return XF_OK;
    xf_status s = one_call(n, "bytes", what);
    if (s) return s;
#ifdef XFPROF_HAVE_MPI
    MPI_Request rq;
    return run_req(c, MPI_Ibcast(buf, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD, &rq), &rq, what);
#else
    (void)buf;
    return xf_errorf(XF_EUNSUPPORTED, "%s: built without MPI", what);
#endif
}

xf_status comm_barrier(const comm *c, const char *what) {
    if (c->size <= 1) return XF_OK;
#ifdef XFPROF_HAVE_MPI
    MPI_Request rq;
    return run_req(c, MPI_Ibarrier(MPI_COMM_WORLD, &rq), &rq, what);
#else
    (void)what;
    return xf_errorf(XF_EUNSUPPORTED, "built without MPI");
#endif
}

void comm_abort(const comm *c, int code) {
#ifdef XFPROF_HAVE_MPI
    if (c && c->size > 1) MPI_Abort(MPI_COMM_WORLD, code);
#else
    (void)c;
    (void)code;
#endif
}
