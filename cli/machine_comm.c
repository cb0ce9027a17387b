/* xfprof machine --comm (machine_comm.h). */
#include "machine_comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "core/fileio.h"
#include "core/json_util.h"
#include "probes/ceilings.h"
#include "probes/comm_ceiling.h"
#include "reference_model/cuda_comm.h"
#include "runner/comm.h"
#include "runner/comm_nccl.h"

static xf_status ar(void *ctx, float *buf, int64_t n) { return comm_allreduce_f32(ctx, buf, n, "the ceiling's all-reduce"); }
static xf_status mx(void *ctx, double *v) { return comm_max_f64(ctx, v); }
static double now(void *ctx) {
    (void)ctx;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Sets devices[0].link (and gpus_per_node: the ranks) of the devices file at path. */
static xf_status save_link(const char *path, const device_link *l, int ranks, int gpu) {
    device_spec d;
    xf_status s = ceilings_load(path, &d); /* a valid machine file, or the message why not */
    if (s) return xf_error_prefix(s, gpu ? "measure the GPU first (xfprof machine --device cuda), then add the link: "
                                         : "measure the CPU first (xfprof machine), then add the link: ");
    char *text = NULL;
    size_t len = 0;
    if ((s = file_read_all(path, (size_t)16 << 20, &text, &len))) return s;
    cJSON *root = NULL;
    s = json_parse(text, path, &root);
    free(text);
    if (s) return s;
    cJSON *dev = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "devices"), 0);
    int ok = dev != NULL;
    if (ok) {
        cJSON_DeleteItemFromObjectCaseSensitive(dev, "link");
        cJSON_DeleteItemFromObjectCaseSensitive(dev, "gpus_per_node");
        ok = device_link_to_json(dev, "link", l) && json_add_number(dev, "gpus_per_node", ranks);
    }
    char *out = ok ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!out) return xf_errorf(XF_ENOMEM, "out of memory writing %s", path);
    s = file_write_atomic(path, out, strlen(out));
    free(out);
    return s;
}

/* The measurement on every rank, over ops; rank 0 prints it and saves the link named `name` into
 * path (with save). A failed collective ends every rank. */
static int measure_and_save(const char *cmd, const comm *c, const comm_ceiling_ops *ops, const char *name, const char *path,
                            int save, int quick, int gpu) {
    int rc = CLI_EXIT_OK;
    if (c->rank == 0)
        fprintf(stderr, "xfprof machine: %s all-reduce over %d ranks, 4 KiB to %s (bus bandwidth as nccl-tests)...\n",
                gpu ? "NCCL" : "MPI", c->size, quick ? "16 MiB" : "64 MiB");
    comm_ceiling_result r;
    xf_status s = comm_ceiling_measure(ops, 4096, quick ? 16 << 20 : 64 << 20, quick ? 5 : 10, &r);
    if (s) {
        rc = cli_fail(cmd, s);
        comm_abort(c, rc);
        return rc;
    }
    if (c->rank == 0) {
        printf("%12s %10s %12s %12s\n", "bytes", "time", "algbw", "busbw");
        for (int i = 0; i < r.n_sizes; i++)
            printf("%12.0f %8.1f us %7.2f GB/s %7.2f GB/s\n", r.bytes[i], r.time_s[i] * 1e6, r.algbw[i] / 1e9, r.busbw[i] / 1e9);
        printf("link ceiling (largest bus bandwidth): %.2f GB/s; latency per ring step: %.1f us\n", r.bandwidth_Bps / 1e9,
               r.latency_s * 1e6);
        device_link l;
        comm_ceiling_link(&r, name, &l);
        if (save && (s = save_link(path, &l, c->size, gpu))) {
            rc = cli_fail(cmd, s);
        } else {
            printf("%s%s\n", save ? "added as the link of " : "not saved", save ? path : "");
        }
    }
    if (comm_barrier(c, "the end of the measurement") != XF_OK && rc == CLI_EXIT_OK) rc = cli_fail(cmd, XF_EIO);
    return rc;
}

/* --device cuda: NCCL over the ranks' GPUs (local rank i on device i), on a device buffer. */
static int measure_nccl(const char *cmd, const comm *c, const char *path, int save, int quick) {
    nccl_lib lib;
    int local = 0, n_dev = 0, dev = -1, rc;
    void *stream = NULL;
    float *host = NULL, *buf = NULL;
    const int64_t max_n = (int64_t)(quick ? 16 << 20 : 64 << 20) / 4;
    xf_status s = comm_nccl_load(NULL, &lib);
    if (!s) s = comm_nccl_local_rank(&local);
    if (!s) s = cuda_comm_device_count(&n_dev);
    if (!s) s = comm_nccl_device_of(local, n_dev, &dev);
    if (!s) s = cuda_comm_stream_new(dev, &stream);
    if (!s && !(host = malloc((size_t)max_n * sizeof *host))) s = xf_errorf(XF_ENOMEM, "out of memory");
    for (int64_t i = 0; !s && i < max_n; i++) host[i] = 1.0f;
    if (!s) s = cuda_comm_alloc((size_t)max_n * sizeof *host, host, (void **)&buf);
    free(host);
    comm_nccl nc;
    memset(&nc, 0, sizeof nc);
    if (!s) {
        comm_nccl_stream st = {stream, NULL, cuda_comm_stream_query};
        s = comm_nccl_init(&nc, &lib, c, &st);
    }
    if (s) { /* every rank says why (they may differ: one node short of GPUs), then all end */
        rc = cli_fail(cmd, xf_error_prefix(s, "rank %d of %d: ", c->rank, c->size));
        comm_abort(c, rc);
    } else {
        comm_nccl_ceiling cc = {&nc, c, buf, max_n};
        comm_ceiling_ops ops = comm_nccl_ceiling_ops(&cc);
        rc = measure_and_save(cmd, c, &ops, "nccl", path, save, quick, 1);
    }
    comm_nccl_free(&nc);
    cuda_comm_free(buf);
    cuda_comm_stream_free(stream);
    comm_nccl_unload(&lib);
    return rc;
}

int machine_comm(const char *cmd, const char *out, int save, int quick, int cuda) {
    const char *how = cuda ? "mpirun -np 2 xfprof machine --comm --device cuda" : "mpirun -np 2 xfprof machine --comm";
    if (!comm_built_with_mpi())
        return cli_usage_error(cmd, "--comm: this xfprof was built without MPI; install Open MPI (apt-get install openmpi-bin "
                                    "libopenmpi-dev), build again and run it as %s", how);
    if (!comm_launched())
        return cli_usage_error(cmd, "--comm measures the link between MPI ranks: run it as %s (as root add --allow-run-as-root; "
                                    "on 2 cores --oversubscribe)", how);
    comm c;
    xf_status s = comm_init(&c, 60);
    if (s) return cli_fail(cmd, s);
    int rc = CLI_EXIT_OK;
    char path[4096] = "";
    if (c.size < 2) {
        rc = cli_usage_error(cmd, "--comm: mpirun started 1 rank; an all-reduce needs 2 or more (mpirun -np 2)");
        goto done;
    }
    if (save && c.rank == 0) {
        if (out) snprintf(path, sizeof path, "%s", out);
        else if ((s = cuda ? ceilings_gpu_machine_path(path, sizeof path) : ceilings_machine_path(path, sizeof path))) {
            rc = cli_fail(cmd, s);
            comm_abort(&c, rc);
            goto done;
        }
    }
    if (cuda) {
        rc = measure_nccl(cmd, &c, path, save, quick);
    } else {
        comm_ceiling_ops ops = {&c, c.size, ar, mx, now};
        rc = measure_and_save(cmd, &c, &ops, "mpi", path, save, quick, 0);
    }
done:
    comm_free(&c);
    return rc;
}
