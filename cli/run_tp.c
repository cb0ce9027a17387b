/* mpirun -np N xfprof run --tp N (run_tp.h). */
#include "run_tp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyzers/predict_parallel.h"
#include "analyzers/roofline.h"
#include "cli.h"
#include "probes/ceilings.h"
#include "reference_model/cpu_parallel.h"
#include "reference_model/model.h"
#include "reference_model/cuda_backend.h"
#include "reference_model/cuda_comm.h"
#include "runner/comm.h"
#include "runner/comm_nccl.h"

static xf_status tp_allreduce(void *ctx, float *buf, int64_t n, const char *what) { return comm_allreduce_f32(ctx, buf, n, what); }

/* --device cuda: this rank's GPU (local rank i drives device i), a stream on it and NCCL over the
 * MPI world. The backend synchronizes its stream before each all-reduce (cuda_backend.cu's
 * OP_ALL_REDUCE), so NCCL runs on its own stream and is polled to completion against the deadline. */
typedef struct tp_gpu {
    nccl_lib lib;
    comm_nccl nc;
    void *stream;
    int device;
} tp_gpu;

static xf_status tp_gpu_open(tp_gpu *g, const comm *c) {
    memset(g, 0, sizeof *g);
    g->device = -1;
    int local = 0, n_dev = 0;
    xf_status s = comm_nccl_load(NULL, &g->lib);
    if (!s) s = comm_nccl_local_rank(&local);
    if (!s) s = cuda_comm_device_count(&n_dev);
    if (!s) s = comm_nccl_device_of(local, n_dev, &g->device);
    if (!s) s = cuda_device_open(g->device, NULL);
    if (!s) s = cuda_comm_stream_new(g->device, &g->stream);
    if (!s) {
        comm_nccl_stream st = {g->stream, NULL, cuda_comm_stream_query};
        s = comm_nccl_init(&g->nc, &g->lib, c, &st);
    }
    return s ? xf_error_prefix(s, "rank %d of %d: ", c->rank, c->size) : XF_OK;
}

static void tp_gpu_close(tp_gpu *g) {
    comm_nccl_free(&g->nc);
    cuda_comm_stream_free(g->stream);
    g->stream = NULL;
    comm_nccl_unload(&g->lib);
}

static xf_status tp_allreduce_nccl(void *ctx, float *buf, int64_t n, const char *what) {
    return comm_nccl_allreduce_f32(ctx, buf, n, what); /* buf: the backend's device memory */
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Every rank's samples of every op to rank 0: samples_s holds rank 0's, then rank 1's, ...; time_s
 * the slowest rank's median (a collective waits for it); the class again on rank 0. Every rank
 * calls it with records of the same shape (checked). */
static xf_status gather_samples(const comm *c, record *rec) {
    double shape[2] = {(double)rec->n_points, 0}, *all = malloc(sizeof(double) * 2 * (size_t)c->size);
    if (!all) return xf_errorf(XF_ENOMEM, "out of memory");
    for (int i = 0; i < rec->n_points; i++) shape[1] += (double)rec->points[i].n_ops;
    xf_status s = comm_gather_f64(c, shape, 2, all);
    for (int r = 1; !s && c->rank == 0 && r < c->size; r++)
        if (all[2 * r] != shape[0] || all[2 * r + 1] != shape[1])
            s = xf_errorf(XF_EINVAL, "rank %d measured %.0f points and %.0f ops, rank 0 %.0f and %.0f: the ranks ran different plans", r,
                          all[2 * r], all[2 * r + 1], shape[0], shape[1]);
    free(all);
    if (s) return s;
    for (int i = 0; i < rec->n_points; i++) {
        record_point *p = &rec->points[i];
        for (int64_t k = 0; k < p->n_ops; k++) {
            record_op *op = &p->ops[k];
            double n = op->measured ? (double)op->n_samples : 0, *ns = malloc(sizeof(double) * (size_t)c->size);
            if (!ns) return xf_errorf(XF_ENOMEM, "out of memory");
            if ((s = comm_gather_f64(c, &n, 1, ns))) {
                free(ns);
                return s;
            }
            int same = 1;
            for (int r = 0; c->rank == 0 && r < c->size; r++) same &= ns[r] == n;
            free(ns);
            if (!same) return xf_errorf(XF_EINVAL, "op %lld of point %d: the ranks took different numbers of samples", (long long)k, i);
            if (n == 0) continue;
            double *got = c->rank == 0 ? malloc(sizeof(double) * (size_t)c->size * (size_t)op->n_samples) : NULL;
            if (c->rank == 0 && !got) return xf_errorf(XF_ENOMEM, "out of memory");
            if ((s = comm_gather_f64(c, op->samples_s, op->n_samples, got))) {
                free(got);
                return s;
            }
            if (c->rank != 0) continue;
            double slowest = 0, *tmp = malloc(sizeof(double) * (size_t)op->n_samples);
            if (!tmp) {
                free(got);
                return xf_errorf(XF_ENOMEM, "out of memory");
            }
            for (int r = 0; r < c->size; r++) {
                memcpy(tmp, got + (size_t)r * (size_t)op->n_samples, sizeof(double) * (size_t)op->n_samples);
                qsort(tmp, (size_t)op->n_samples, sizeof *tmp, cmp_double);
                double med = tmp[op->n_samples / 2];
                if (med > slowest) slowest = med;
            }
            free(tmp);
            free(op->samples_s);
            op->samples_s = got;
            op->n_samples *= c->size;
            op->time_s = slowest;
            roofline_measure_op(op, &rec->device, NULL);
        }
        if (c->rank == 0) { /* shares and classes again from the gathered times; TTFT, TPOT and rates stay rank 0's wall times */
            const record_summary keep = p->summary;
            roofline_summarize_point(p);
            const record_summary got = p->summary;
            p->summary = keep;
            memcpy(p->summary.share_bound, got.share_bound, sizeof got.share_bound);
            p->summary.prefill_time_s = got.prefill_time_s;
            p->summary.decode_time_s = got.decode_time_s;
            predict_parallel_comm_share(p);
        }
    }
    return XF_OK;
}

int run_tp(const char *cmd, run_plan *pl, int tp, double timeout_s, cli_output *out, int *writer) {
    *writer = 1;
    if (pl->cuda && pl->cuda_graph)
        return cli_usage_error(cmd, "--tp with --cuda-graph: a graph cannot capture NCCL's all-reduces between its ops here; drop "
                                    "--cuda-graph");
    {   /* the model's split first (heads, KV heads, d_ff), before anything starts: against any device with a link */
        device_spec any;
        memset(&any, 0, sizeof any);
        any.link.bandwidth_Bps = 1;
        parallel_plan plan = {tp, 1, 1, 0, 1}; /* the reference model's layout: vocabulary whole, experts split by columns */
        parallel_split sp;
        xf_status s = parallel_split_of(&pl->cfg, &plan, &any, &sp);
        if (!s) s = cpu_parallel_check(&pl->cfg, &sp, pl->wdtype, pl->quant_group);
        if (!s && config_is_gemma3(&pl->cfg)) /* its post norms and local RoPE are not in the shards */
            s = xf_errorf(XF_EINVAL, "--tp: %s: gemma3's split (its post norms, local RoPE) is not implemented in the split "
                          "reference model; run it without --tp, or price the split with predict --tp", pl->cfg.name);
        if (!s && pl->weights_dir) s = model_check_weights_dir(pl->weights_dir, &pl->cfg);
        if (s) return cli_fail(cmd, s);
    }
    if (!comm_built_with_mpi())
        return cli_usage_error(cmd, "--tp %d: this xfprof was built without MPI; install Open MPI (apt-get install openmpi-bin "
                                    "libopenmpi-dev) and build again", tp);
    if (!comm_launched())
        return cli_usage_error(cmd, "--tp %d runs one process per shard: start it as mpirun -np %d xfprof run --tp %d ... (as "
                                    "root add --allow-run-as-root; more ranks than cores: --oversubscribe)", tp, tp, tp);
    comm c;
    xf_status s = comm_init(&c, timeout_s);
    if (s) return cli_fail(cmd, s);
    *writer = c.rank == 0;
    int rc = CLI_EXIT_OK;
    model_weights *full = NULL, *shard = NULL;
    tp_gpu gpu;
    int gpu_open = 0;
    record rec;
    record_init(&rec, "run");
    if (c.size != tp) {
        if (c.rank == 0)
            rc = cli_usage_error(cmd, "ranks mismatch: mpirun started %d ranks, --tp %d needs one per shard: mpirun -np %d", c.size,
                                 tp, tp);
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    /* the link the all-reduces are judged against: measured by machine --comm (the GPU's machine
     * file and NCCL with --device cuda) */
    char path[4096];
    device_spec mdev;
    const char *dev_flag = pl->cuda ? " --device cuda" : "";
    if ((s = pl->cuda ? ceilings_gpu_machine_path(path, sizeof path) : ceilings_machine_path(path, sizeof path)) ||
        (s = ceilings_load(path, &mdev))) {
        if (c.rank == 0)
            rc = cli_fail(cmd, xf_error_prefix(s, "--tp needs this machine's ceilings and link: run xfprof machine%s, then mpirun -np "
                                                  "%d xfprof machine --comm%s: ", dev_flag, tp, dev_flag));
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    if (!(mdev.link.bandwidth_Bps > 0)) {
        if (c.rank == 0)
            cli_usage_error(cmd, "--tp: %s has no measured link between ranks: run mpirun -np %d xfprof machine --comm%s first", path,
                            tp, dev_flag);
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    if (pl->cuda) {
        if ((s = tp_gpu_open(&gpu, &c))) { /* every rank says why (one node may lack a GPU), then all end */
            cli_fail(cmd, s);
            comm_abort(&c, cli_exit_code(s));
            rc = cli_exit_code(s);
            goto done;
        }
        gpu_open = 1;
        pl->ordinal = gpu.device;
    }
    parallel_plan plan = {tp, 1, 1, 0, 1}; /* the reference model's layout: vocabulary whole, experts split by columns */
    parallel_split sp;
    /* each rank its shard: from the folder only its blocks; random weights made whole in fp32 from
     * the seed (each value depends on its place only), sliced, then converted (int8: quantized) */
    if ((s = parallel_split_of(&pl->cfg, &plan, &mdev, &sp)) ||
        (pl->weights_dir ? (s = cpu_parallel_load(pl->weights_dir, &pl->cfg, &sp, c.rank, pl->wdtype, pl->quant_group, &shard))
                         : ((s = weights_init_random(&full, &pl->cfg, pl->seed, XF_FP32, 0)) ||
                            (s = cpu_parallel_shard(full, &sp, c.rank, pl->wdtype, pl->quant_group, &shard))))) {
        if (c.rank == 0) cli_fail(cmd, s);
        rc = s == XF_ENOMEM ? CLI_EXIT_FAILURE : CLI_EXIT_USAGE;
        goto done;
    }
    weights_free(full);
    full = NULL;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (c.rank == 0 && ncpu > 0 && (long)pl->threads * c.size > ncpu)
        fprintf(stderr, "xfprof %s: note: %d ranks x %d threads on %ld CPUs: the ranks share cores and wait for each other in "
                "the all-reduces; --threads %ld gives each rank its own\n", cmd, c.size, pl->threads, ncpu,
                ncpu / c.size > 0 ? ncpu / c.size : 1);
    pl->tp = tp;
    pl->shard_cfg = &sp.shard;
    pl->shard_weights = shard;
    pl->allreduce = pl->cuda ? tp_allreduce_nccl : tp_allreduce;
    pl->allreduce_ctx = pl->cuda ? (void *)&gpu.nc : (void *)&c;
    if (c.rank != 0) pl->quiet = 1;
    run_notes notes;
    if ((s = runner_run(pl, &rec, &notes)) || (s = gather_samples(&c, &rec))) {
        fprintf(stderr, "xfprof %s: rank %d of %d: %s; ending every rank, no record written\n", cmd, c.rank, c.size, xf_error_msg());
        comm_abort(&c, CLI_EXIT_FAILURE);
        rc = CLI_EXIT_FAILURE;
        goto done;
    }
    if (c.rank == 0) {
        char v[32];
        snprintf(v, sizeof v, "%d", tp);
        record_set_env(&rec, "mpi_ranks", v);
        record_set_env(&rec, "tensor_parallel", v);
        record_set_env(&rec, "collectives", pl->cuda ? "nccl" : "mpi");
        rc = cli_output_write(cmd, &rec, out);
        if (rc == CLI_EXIT_OK && out->format == RENDER_TABLE && !(out->path && !strcmp(out->path, "-")))
            runner_print_notes(stdout, &rec, &notes);
    }
    if (comm_barrier(&c, "the end of the run") != XF_OK && rc == CLI_EXIT_OK) rc = CLI_EXIT_FAILURE;
done:
    if (gpu_open) tp_gpu_close(&gpu);
    record_free(&rec);
    weights_free(full);
    weights_free(shard);
    comm_free(&c);
    return rc;
}
