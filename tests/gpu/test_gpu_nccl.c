/* NCCL on two GPUs of this machine (runner/comm_nccl.h, reference_model/cuda_comm.h): one process,
 * a thread per GPU as a rank, the real libnccl.so.2: the all-reduce of rank-dependent values gives
 * their sum on both GPUs, through the same polling (stream + async error, deadline) as run --tp.
 * Skipped, saying why, without two CUDA devices or without NCCL. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_common.h"
#include "reference_model/cuda_comm.h"
#include "runner/comm_nccl.h"

#define N_FLOATS (1 << 20)

typedef struct rank_job {
    const nccl_lib *lib;
    nccl_unique_id id;
    int rank;
    xf_status s;
    char msg[512];
    float got[4]; /* elements 0, 1, N/2, N-1 after the all-reduce */
} rank_job;

static void *rank_main(void *arg) {
    rank_job *j = arg;
    void *stream = NULL, *dev = NULL, *comm = NULL;
    float *host = malloc(sizeof(float) * N_FLOATS);
    xf_status s = host ? cuda_comm_stream_new(j->rank, &stream) : XF_ENOMEM;
    for (int64_t i = 0; host && i < N_FLOATS; i++) host[i] = (float)(j->rank + 1) * (float)(i % 1000);
    if (!s) s = cuda_comm_alloc(sizeof(float) * N_FLOATS, host, &dev);
    if (!s && j->lib->comm_init_rank(&comm, 2, j->id, j->rank) != NCCL_OK) s = xf_errorf(XF_EIO, "ncclCommInitRank failed");
    if (!s) {
        comm_nccl nc = {j->lib, comm, {stream, NULL, cuda_comm_stream_query}, j->rank, 2, 30};
        s = comm_nccl_allreduce_f32(&nc, dev, N_FLOATS, "the test's all-reduce");
        if (!s) s = cuda_comm_download(host, dev, sizeof(float) * N_FLOATS);
        if (!s) {
            j->got[0] = host[0];
            j->got[1] = host[1];
            j->got[2] = host[N_FLOATS / 2];
            j->got[3] = host[N_FLOATS - 1];
        }
        comm_nccl_free(&nc);
    }
    if (s) snprintf(j->msg, sizeof j->msg, "%s", xf_error_msg());
    j->s = s;
    cuda_comm_free(dev);
    cuda_comm_stream_free(stream);
    free(host);
    return NULL;
}

Test(gpu_nccl, allreduce_over_two_gpus) {
    int n = 0;
    if (cuda_comm_device_count(&n) != XF_OK) cr_skip_test("no CUDA device: %s", xf_error_msg());
    if (n < 2) cr_skip_test("no CUDA device pair for NCCL: %d GPU here, the all-reduce needs 2", n);
    nccl_lib lib;
    if (comm_nccl_load(NULL, &lib) != XF_OK) cr_skip_test("no CUDA device pair for NCCL: %s", xf_error_msg());
    rank_job j[2];
    memset(j, 0, sizeof j);
    cr_assert_eq(lib.get_unique_id(&j[0].id), NCCL_OK);
    pthread_t th[2];
    for (int r = 0; r < 2; r++) {
        j[r].lib = &lib;
        j[r].id = j[0].id;
        j[r].rank = r;
        cr_assert_eq(pthread_create(&th[r], NULL, rank_main, &j[r]), 0);
    }
    for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
    const int64_t at[4] = {0, 1, N_FLOATS / 2, N_FLOATS - 1};
    for (int r = 0; r < 2; r++) {
        cr_assert_eq(j[r].s, XF_OK, "rank %d: %s", r, j[r].msg);
        for (int k = 0; k < 4; k++) /* (1 + 2) x (i mod 1000): exact in fp32 */
            cr_assert_eq(j[r].got[k], 3.0f * (float)(at[k] % 1000), "rank %d element %lld: %g", r, (long long)at[k], j[r].got[k]);
    }
    comm_nccl_unload(&lib);
}
