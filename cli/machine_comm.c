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
#include "runner/comm.h"

static xf_status ar(void *ctx, float *buf, int64_t n) { return comm_allreduce_f32(ctx, buf, n, "the ceiling's all-reduce"); }
static xf_status mx(void *ctx, double *v) { return comm_max_f64(ctx, v); }
static double now(void *ctx) {
    (void)ctx;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Sets devices[0].link (and gpus_per_node: the ranks) of the devices file at path. */
static xf_status save_link(const char *path, const device_link *l, int ranks) {
    device_spec d;
    xf_status s = ceilings_load(path, &d); /* a valid machine file, or the message why not */
    if (s) return xf_error_prefix(s, "measure the CPU first (xfprof machine), then add the link: ");
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

int machine_comm(const char *cmd, const char *out, int save, int quick) {
    if (!comm_built_with_mpi())
        return cli_usage_error(cmd, "--comm: this xfprof was built without MPI; install Open MPI (apt-get install openmpi-bin "
                                    "libopenmpi-dev), build again and run it as mpirun -np 2 xfprof machine --comm");
    if (!comm_launched())
        return cli_usage_error(cmd, "--comm measures the link between MPI ranks: run it as mpirun -np 2 xfprof machine --comm "
                                    "(as root add --allow-run-as-root; on 2 cores --oversubscribe)");
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
        else if ((s = ceilings_machine_path(path, sizeof path))) {
            rc = cli_fail(cmd, s);
            comm_abort(&c, rc);
            goto done;
        }
    }
    if (c.rank == 0)
        fprintf(stderr, "xfprof machine: all-reduce over %d ranks, 4 KiB to %s (bus bandwidth as nccl-tests)...\n", c.size,
                quick ? "16 MiB" : "64 MiB");
    comm_ceiling_ops ops = {&c, c.size, ar, mx, now};
    comm_ceiling_result r;
    if ((s = comm_ceiling_measure(&ops, 4096, quick ? 16 << 20 : 64 << 20, quick ? 5 : 10, &r))) {
        rc = cli_fail(cmd, s);
        comm_abort(&c, rc);
        goto done;
    }
    if (c.rank == 0) {
        printf("%12s %10s %12s %12s\n", "bytes", "time", "algbw", "busbw");
        for (int i = 0; i < r.n_sizes; i++)
            printf("%12.0f %8.1f us %7.2f GB/s %7.2f GB/s\n", r.bytes[i], r.time_s[i] * 1e6, r.algbw[i] / 1e9, r.busbw[i] / 1e9);
        printf("link ceiling (largest bus bandwidth): %.2f GB/s; latency per ring step: %.1f us\n", r.bandwidth_Bps / 1e9,
               r.latency_s * 1e6);
        device_link l;
        comm_ceiling_link(&r, "mpi", &l);
        if (save && (s = save_link(path, &l, c.size))) {
            rc = cli_fail(cmd, s);
        } else {
            printf("%s%s\n", save ? "added as the link of " : "not saved", save ? path : "");
        }
    }
    if (comm_barrier(&c, "the end of the measurement") != XF_OK && rc == CLI_EXIT_OK) rc = cli_fail(cmd, XF_EIO);
done:
    comm_free(&c);
    return rc;
}
