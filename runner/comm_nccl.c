/* NCCL loaded at run time (comm_nccl.h). */
#define _GNU_SOURCE /* dladdr */
#include "runner/comm_nccl.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "probes/timer.h"

static void nap(double elapsed) { /* spin for the first 50 ms, then poll gently (another rank may share this core) */
    if (elapsed <= 0.05) return;
    struct timespec t = {0, 100000};
    nanosleep(&t, NULL);
}

int comm_nccl_version_split(int code, int *major, int *minor, int *patch) {
    int M, m, p;
    if (code >= 10000) { /* 2.9 and later: NCCL_VERSION(X, Y, Z) = X*10000 + Y*100 + Z */
        M = code / 10000;
        m = code / 100 % 100;
        p = code % 100;
    } else { /* before 2.9: X*1000 + Y*100 + Z */
        M = code / 1000;
        m = code / 100 % 10;
        p = code % 100;
    }
    if (major) *major = M;
    if (minor) *minor = m;
    if (patch) *patch = p;
    return M == 2 && M * 10000 + m * 100 + p >= NCCL_MIN_VERSION;
}

xf_status comm_nccl_load(const char *path, nccl_lib *out) {
    memset(out, 0, sizeof *out);
    if (!path) path = getenv("XFPROF_NCCL_LIB");
    if (!path || !*path) path = "libnccl.so.2";
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        return xf_errorf(XF_EUNSUPPORTED,
                         "NCCL not found: %.300s could not be loaded (%.300s): install NCCL 2 (NVIDIA's libnccl2 package, or "
                         "python's nvidia-nccl wheel) and put its lib folder on LD_LIBRARY_PATH, or give the file in "
                         "XFPROF_NCCL_LIB",
                         path, e ? e : "dlopen failed");
    }
    struct {
        const char *name;
        void **slot;
    } syms[] = {
        {"ncclGetVersion", (void **)&out->get_version},
        {"ncclGetUniqueId", (void **)&out->get_unique_id},
        {"ncclCommInitRank", (void **)&out->comm_init_rank},
        {"ncclAllReduce", (void **)&out->all_reduce},
        {"ncclCommGetAsyncError", (void **)&out->comm_get_async_error},
        {"ncclCommAbort", (void **)&out->comm_abort},
        {"ncclCommDestroy", (void **)&out->comm_destroy},
        {"ncclGetErrorString", (void **)&out->get_error_string},
    };
    Dl_info di;
    memset(&di, 0, sizeof di);
    void *any = dlsym(h, "ncclGetVersion");
    snprintf(out->path, sizeof out->path, "%s", any && dladdr(any, &di) && di.dli_fname ? di.dli_fname : path);
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].slot = dlsym(h, syms[i].name);
        if (!*syms[i].slot) {
            xf_status s = xf_errorf(XF_EUNSUPPORTED, "NCCL: symbol %s missing from %.400s (NCCL 2.4 or later needed)", syms[i].name,
                                    out->path);
            dlclose(h);
            memset(out, 0, sizeof *out);
            return s;
        }
    }
    int v = 0, M = 0, m = 0, p = 0;
    if (out->get_version(&v) != NCCL_OK || !comm_nccl_version_split(v, &M, &m, &p)) {
        xf_status s = xf_errorf(XF_EUNSUPPORTED, "NCCL %d.%d.%d (version code %d) in %.400s: xfprof needs NCCL 2.4 or later of major "
                                "version 2 (ncclCommGetAsyncError and ncclCommAbort, which the deadlines use)", M, m, p, v, out->path);
        dlclose(h);
        memset(out, 0, sizeof *out);
        return s;
    }
    out->version = v;
    out->handle = h;
    return XF_OK;
}

void comm_nccl_unload(nccl_lib *lib) {
    if (!lib || !lib->handle) return;
    dlclose(lib->handle);
    memset(lib, 0, sizeof *lib);
}

xf_status comm_nccl_local_rank(int *local_rank) {
    static const char *vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "PMIX_LOCAL_RANK"};
    *local_rank = 0;
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (!v) continue;
        char *end = NULL;
        errno = 0;
        long r = strtol(v, &end, 10);
        if (errno || end == v || *end || r < 0 || r > 4095)
            return xf_errorf(XF_EINVAL, "%s='%.32s' is not a local rank (0..4095): the launcher's environment is not understood",
                             vars[i], v);
        *local_rank = (int)r;
        return XF_OK;
    }
    return XF_OK;
}

xf_status comm_nccl_device_of(int local_rank, int n_devices, int *device) {
    *device = -1;
    if (n_devices < 1) return xf_errorf(XF_EUNSUPPORTED, "no CUDA device on this node: NCCL's collectives need one GPU per rank");
    if (local_rank < 0 || local_rank >= n_devices)
        return xf_errorf(XF_EINVAL,
                         "local rank %d on a node of %d GPU%s: each rank drives its own GPU (local rank i -> device i); start "
                         "at most %d rank%s per node (mpirun -np N --map-by ppr:%d:node)",
                         local_rank, n_devices, n_devices == 1 ? "" : "s", n_devices, n_devices == 1 ? "" : "s", n_devices);
    *device = local_rank;
    return XF_OK;
}

static const char *nccl_err(const nccl_lib *lib, int r) {
    const char *s = lib && lib->get_error_string ? lib->get_error_string(r) : NULL;
    return s ? s : "unknown NCCL error";
}

/* ncclCommInitRank on a helper thread, so that the caller keeps its deadline (a rank that never
 * joins makes it block). The job is heap-owned: after a timeout the thread may still finish and
 * writes only here; the caller then ends the process (comm_abort), so it is never freed. */
typedef struct init_job {
    const nccl_lib *lib;
    nccl_unique_id id;
    int nranks, rank;
    void *comm;
    int result;
    int done; /* under mu */
    pthread_mutex_t mu;
} init_job;

static void *init_thread(void *arg) {
    init_job *j = arg;
    void *comm = NULL;
    int r = j->lib->comm_init_rank(&comm, j->nranks, j->id, j->rank);
    pthread_mutex_lock(&j->mu);
    j->comm = comm;
    j->result = r;
    j->done = 1;
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

xf_status comm_nccl_init(comm_nccl *nc, const nccl_lib *lib, const comm *c, const comm_nccl_stream *st) {
    memset(nc, 0, sizeof *nc);
    if (!lib || !lib->handle || !c || !st || !st->query) return xf_errorf(XF_EINVAL, "comm_nccl_init: no library, MPI world or stream");
    nc->lib = lib;
    nc->st = *st;
    nc->rank = c->rank;
    nc->size = c->size;
    nc->timeout_s = c->timeout_s > 0 ? c->timeout_s : 60;
    init_job *j = calloc(1, sizeof *j);
    if (!j) return xf_errorf(XF_ENOMEM, "out of memory");
    pthread_mutex_init(&j->mu, NULL);
    j->lib = lib;
    j->nranks = c->size;
    j->rank = c->rank;
    int r = c->rank == 0 ? lib->get_unique_id(&j->id) : NCCL_OK;
    xf_status s = XF_OK;
    if (r != NCCL_OK) s = xf_errorf(XF_EIO, "rank 0: ncclGetUniqueId failed: %s", nccl_err(lib, r));
    /* every rank takes part in the broadcast, rank 0's failure included (a zero id: each then fails init) */
    xf_status b = comm_bcast_bytes(c, &j->id, sizeof j->id, "the broadcast of NCCL's unique id");
    if (!s) s = b;
    pthread_t th;
    if (!s && pthread_create(&th, NULL, init_thread, j) != 0) s = xf_errorf(XF_EIO, "rank %d: no thread for ncclCommInitRank", c->rank);
    if (s) {
        pthread_mutex_destroy(&j->mu);
        free(j);
        return s;
    }
    pthread_detach(th);
    const double t0 = timer_now_s();
    for (;;) {
        pthread_mutex_lock(&j->mu);
        const int done = j->done;
        pthread_mutex_unlock(&j->mu);
        if (done) break;
        if (timer_now_s() - t0 > nc->timeout_s) /* j stays with the thread (see init_job) */
            return xf_errorf(XF_EIO, "rank %d: ncclCommInitRank did not complete in %.0f s: another rank died, hangs, or its GPU "
                             "cannot reach this one", c->rank, nc->timeout_s);
        nap(timer_now_s() - t0);
    }
    r = j->result;
    nc->comm = j->comm;
    pthread_mutex_destroy(&j->mu);
    free(j);
    if (r != NCCL_OK) {
        nc->comm = NULL;
        return xf_errorf(XF_EIO, "rank %d: ncclCommInitRank over %d ranks failed: %s", c->rank, c->size, nccl_err(lib, r));
    }
    return XF_OK;
}

/* Aborts the communicator (a collective will not complete): NCCL's own threads and kernels stop. */
static void nccl_abort(comm_nccl *nc) {
    if (nc->comm) nc->lib->comm_abort(nc->comm);
    nc->comm = NULL;
}

xf_status comm_nccl_allreduce_f32(comm_nccl *nc, float *dev_buf, int64_t n, const char *what) {
    if (!nc || !nc->lib) return xf_errorf(XF_EINVAL, "%s: no NCCL communicator", what);
    if (!nc->comm) return xf_errorf(XF_EIO, "rank %d: %s: the NCCL communicator was aborted", nc->rank, what);
    if (n <= 0) return XF_OK;
    int r = nc->lib->all_reduce(dev_buf, dev_buf, (size_t)n, NCCL_FLOAT32, NCCL_SUM, nc->comm, nc->st.stream);
    if (r != NCCL_OK && r != NCCL_IN_PROGRESS) {
        xf_status s = xf_errorf(XF_EIO, "rank %d: %s: ncclAllReduce failed: %s", nc->rank, what, nccl_err(nc->lib, r));
        nccl_abort(nc);
        return s;
    }
    const double t0 = timer_now_s();
    for (;;) {
        int async = NCCL_OK;
        r = nc->lib->comm_get_async_error(nc->comm, &async);
        if (r != NCCL_OK || (async != NCCL_OK && async != NCCL_IN_PROGRESS)) {
            xf_status s = xf_errorf(XF_EIO, "rank %d: %s failed in NCCL (another rank died?): %s", nc->rank, what,
                                    nccl_err(nc->lib, r != NCCL_OK ? r : async));
            nccl_abort(nc);
            return s;
        }
        const int q = nc->st.query(nc->st.ctx, nc->st.stream);
        if (q < 0) {
            xf_status s = xf_error_prefix(XF_EIO, "rank %d: %s: ", nc->rank, what);
            nccl_abort(nc);
            return s;
        }
        if (q > 0) return XF_OK;
        if (timer_now_s() - t0 > nc->timeout_s) {
            nccl_abort(nc);
            return xf_errorf(XF_EIO, "rank %d: %s did not complete in %.0f s: another rank died or hangs (NCCL communicator "
                             "aborted)", nc->rank, what, nc->timeout_s);
        }
        nap(timer_now_s() - t0);
    }
}

void comm_nccl_free(comm_nccl *nc) {
    if (!nc) return;
    if (nc->comm && nc->lib) nc->lib->comm_destroy(nc->comm);
    nc->comm = NULL;
}

static xf_status ceiling_ar(void *ctx, float *buf, int64_t n) {
    (void)buf; /* the device buffer holds the data */
    comm_nccl_ceiling *c = ctx;
    if (n > c->dev_n) return xf_errorf(XF_EINVAL, "NCCL ceiling: %lld floats, the device buffer holds %lld", (long long)n, (long long)c->dev_n);
    return comm_nccl_allreduce_f32(c->nc, c->dev_buf, n, "the ceiling's NCCL all-reduce");
}

static xf_status ceiling_max(void *ctx, double *v) { return comm_max_f64(((comm_nccl_ceiling *)ctx)->mpi, v); }

static double ceiling_now(void *ctx) {
    (void)ctx;
    return timer_now_s();
}

comm_ceiling_ops comm_nccl_ceiling_ops(comm_nccl_ceiling *ctx) {
    comm_ceiling_ops o = {ctx, ctx && ctx->nc ? ctx->nc->size : 0, ceiling_ar, ceiling_max, ceiling_now};
    return o;
}
