/* A fake libnccl.so.2 for test_comm_nccl: the NCCL entry points xfprof loads, recording each call
 * (one line to the file $FAKE_NCCL_LOG) and returning what the environment scripts:
 *   FAKE_NCCL_VERSION      ncclGetVersion's code (default 22809, NCCL 2.28.9)
 *   FAKE_NCCL_INIT_SLEEP   seconds ncclCommInitRank blocks (a rank that never joins)
 *   FAKE_NCCL_INIT_RESULT  ncclCommInitRank's result (default 0, ncclSuccess)
 *   FAKE_NCCL_AR_RESULT    ncclAllReduce's result
 *   FAKE_NCCL_ASYNC        what ncclCommGetAsyncError reports (6: a remote error)
 * Buffers are host memory here: the all-reduce multiplies each element by nranks (every rank
 * holding the same values). Built with FAKE_NCCL_NO_ALLREDUCE it lacks ncclAllReduce. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct { char internal[128]; } fake_id;
typedef struct { int nranks, rank; } fake_comm;

static int env_int(const char *name, int dflt) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#include <stdarg.h>
static void logf_(const char *fmt, ...) {
    const char *path = getenv("FAKE_NCCL_LOG");
    if (!path) return;
    FILE *f = fopen(path, "a");
    if (!f) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
}

int ncclGetVersion(int *v) {
    *v = env_int("FAKE_NCCL_VERSION", 22809);
    return 0;
}

int ncclGetUniqueId(fake_id *id) {
    memset(id, 0, sizeof *id);
    snprintf(id->internal, sizeof id->internal, "fake-nccl-id-%d", (int)getpid() % 7);
    logf_("getUniqueId");
    return 0;
}

int ncclCommInitRank(void **comm, int nranks, fake_id id, int rank) {
    logf_("init nranks=%d rank=%d id=%.12s", nranks, rank, id.internal);
    int s = env_int("FAKE_NCCL_INIT_SLEEP", 0);
    if (s > 0) sleep((unsigned)s);
    int r = env_int("FAKE_NCCL_INIT_RESULT", 0);
    if (r) return r;
    fake_comm *c = malloc(sizeof *c);
    if (!c) return 1;
    c->nranks = nranks;
    c->rank = rank;
    *comm = c;
    return 0;
}

#ifndef FAKE_NCCL_NO_ALLREDUCE
int ncclAllReduce(const void *send, void *recv, size_t count, int dtype, int op, void *comm, void *stream) {
    fake_comm *c = comm;
    logf_("allreduce count=%zu dtype=%d op=%d inplace=%d stream=%p", count, dtype, op, send == recv, stream);
    int r = env_int("FAKE_NCCL_AR_RESULT", 0);
    if (r) return r;
    if (dtype != 7) return 4; /* ncclInvalidArgument: only float32 is faked */
    const float *s = send;
    float *d = recv;
    for (size_t i = 0; i < count; i++) d[i] = s[i] * (float)c->nranks;
    return 0;
}
#endif

int ncclCommGetAsyncError(void *comm, int *e) {
    (void)comm;
    *e = env_int("FAKE_NCCL_ASYNC", 0);
    return 0;
}

int ncclCommAbort(void *comm) {
    logf_("abort");
    free(comm);
    return 0;
}

int ncclCommDestroy(void *comm) {
    logf_("destroy");
    free(comm);
    return 0;
}

const char *ncclGetErrorString(int r) {
    switch (r) {
    case 0: return "fake: no error";
    case 2: return "fake: unhandled system error";
    case 6: return "fake: remote process exited or there was a network error";
    default: return "fake: some error";
    }
}
