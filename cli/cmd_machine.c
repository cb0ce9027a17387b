/* xfprof machine: measures this CPU's ceilings (bandwidth out of and inside the last-level cache,
 * FP32 and BF16 peaks) and saves them as the per-machine devices file that run and predict use;
 * with --device cuda[:N], the GPU's (copy and read kernels, FP32 FMA kernel, cuBLAS BF16 GEMM). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyzers/stats.h"
#include "args.h"
#include "cli.h"
#include "core/fileio.h"
#include "cuda_cli.h"
#include "machine_comm.h"
#include "probes/ceilings.h"
#include "probes/gpu_ceilings.h"
#include "runner/calibrate.h"
#include "reference_model/cuda_backend.h"
#include "reference_model/cpu_dnnl.h"

static void usage(FILE *f) {
    fprintf(f,
            "Usage: xfprof machine [--device cpu|cuda|cuda:N] [--threads N] [-o FILE] [--format table|json] [--quick]\n"
            "                      [--no-save] [--calibrate [--wdtype LIST]]\n\n"
            "Measures this machine's ceilings with N threads (default: all online CPUs):\n"
            "  read, copy and triad bandwidth over a working set of 4x the last-level cache (2x with\n"
            "  --quick) and inside it (a quarter of it), FP32 FMA peak, BF16 peak where the CPU has\n"
            "  AVX512_BF16, INT8 peak where it has AVX512_VNNI (vpdpbusd: the int8 projections' unit\n"
            "  without AMX), AMX BF16 and INT8 tile peaks where the CPU has AMX and the OS grants the\n"
            "  tile state (arch_prctl ARCH_REQ_XCOMP_PERM; else the table says why); best of 5\n"
            "  repetitions (3 with --quick). The table also names OpenBLAS's kernels, and says when\n"
            "  OPENBLAS_CORETYPE from the environment holds an AVX-512 CPU to AVX2 ones.\n"
            "The DRAM arrays, like the weights of 'xfprof run', are 2 MiB-aligned with madvise(MADV_HUGEPAGE)\n"
            "(transparent huge pages; XFPROF_HUGE_PAGES=0 turns it off for both); the table says how much of\n"
            "them the kernel granted.\n"
            "Saves them to FILE (-o), else $XFPROF_MACHINE_FILE, else ~/.cache/xfprof/machine.json, in\n"
            "the devices-file format; 'xfprof run' and 'xfprof predict --device cpu' read it.\n"
            "  --format json   print the saved devices file instead of the table\n"
            "  --no-save       measure and print only\n"
            "  --calibrate     then measure the efficiency this machine's reference kernels achieve per op family\n"
            "                  (gemv, gemm, decode and prefill attention, norm, rope, swiglu, residual, kv_append,\n"
            "                  embedding, sampling), weight dtype, memory tier (in the last-level cache or DRAM) and\n"
            "                  shape (efficiency = roofline time / measured time), by running through the CPU\n"
            "                  backend synthetic models whose shapes are no preset's: d_model 512, 1280 and 2560\n"
            "                  (1, 4 and 16 query heads per KV head) within 3/4 of the last-level cache at prompts\n"
            "                  32, 48 and 128; the decode projections' in-cache -> DRAM transition on 512 at the\n"
            "                  cache's size (and at 0.45 of it for bf16 and int8, whose 512 in cache is\n"
            "                  below 0.3), and 1280 and 2560 at 1.5x it (decode projections and prefill\n"
            "                  GEMMs from DRAM, prompts 32, 48 and 128), 1 warm-up + 3 repetitions (1 for the\n"
            "                  transition models), concurrent pulses off, every layer's random weights a copy of\n"
            "                  layer 0's in its own memory (a faster set-up; the kernels' time does not depend on\n"
            "                  the values) (with --quick: 512 and 1280 in cache,\n"
            "                  1 + 1); first, the cost of an OpenMP parallel region's fork under the spin in\n"
            "                  force (recorded; as a term of its own in the prediction it measured no better,\n"
            "                  so it is off). Prints each stage's seconds.\n"
            "                  Saved in the machine file as its \"calibration\" object (format xfprof-calibration,\n"
            "                  version 5, with the OpenMP spin it ran under: run and predict say when theirs\n"
            "                  differs); 'xfprof run' and 'xfprof predict --device cpu' then predict each op as\n"
            "                  its roofline time over the efficiency interpolated for its shape (GEMMs by M, N and\n"
            "                  K; decode projections by bytes, M and the model's weights over the cache; clamped\n"
            "                  outside the table, said in the output), the roofline bound beside it; a version-1 or -2 table is refused (calibrate\n"
            "                  again), a version-3 one loads without a spin or fork term. About 1.5 minutes on 2 busy\n"
            "                  cores for the three dtypes (--quick --wdtype fp32: seconds).\n"
            "  --wdtype LIST   weight dtypes to calibrate: fp32, bf16, int8 (default all three)\n"
            "  --comm          under mpirun -np N (N >= 2): the all-reduce's bus bandwidth between the ranks\n"
            "                  (nccl-tests' busbw = algbw x 2(n-1)/n, 4 KiB to 64 MiB), added as the machine\n"
            "                  file's link, which 'run --tp' judges its all-reduces against; with --device cuda\n"
            "                  over NCCL (libnccl.so.2 loaded at run time, local rank i on GPU i) into the GPU's\n"
            "                  machine file (compiled and its host logic tested; not yet run on a GPU)\n"
            "  --device cuda[:N]  measure GPU N instead (default 0): a device-to-device copy kernel and a read\n"
            "                  kernel (L2 flushed before each timing) for bandwidth, an FP32 FMA kernel, a cuBLAS\n"
            "                  BF16 GEMM of 8192^3 for the tensor peak; median of 10. Saved (same devices-file\n"
            "                  format) to FILE (-o), else $XFPROF_GPU_MACHINE_FILE, else the machine file's name\n"
            "                  with -cuda (~/.cache/xfprof/machine-cuda.json), which 'xfprof run --device cuda'\n"
            "                  reads. Without a CUDA device: exit status 3.\n");
}

static void print_table(const ceilings_result *r, const device_spec *d, const char *path) {
    printf("CPU: %s, %d threads, SIMD %s, last-level cache %.1f MiB\n", d->description, r->threads, ceilings_isa(),
           r->llc_bytes / 1048576.0);
    printf("%-28s %14s %14s\n", "ceiling", "value", "working set");
    for (int k = 0; k < CEIL_KERNEL_COUNT; k++)
        if (r->dram_ws_bytes > 0)
            printf("DRAM %-23s %9.2f GB/s %10.1f MiB\n", ceilings_kernel_name((ceilings_kernel)k), r->dram[k].Bps / 1e9,
                   r->dram_ws_bytes / 1048576.0);
    for (int k = 0; k < CEIL_KERNEL_COUNT; k++)
        printf("in-cache %-19s %9.2f GB/s %10.1f MiB\n", ceilings_kernel_name((ceilings_kernel)k), r->cache[k].Bps / 1e9,
               r->cache_ws_bytes / 1048576.0);
    char hp[160];
    ceilings_huge_describe(r, hp, sizeof hp);
    printf("%-28s %s\n", "DRAM read arrays' pages", hp); /* the weights get the same (core/hugemem.h) */
    printf("%-28s %8.1f GFLOP/s (%s FMA)\n", "FP32 peak", r->fp32_flops / 1e9, r->fp32_isa);
    if (r->bf16_flops > 0)
        printf("%-28s %8.1f GFLOP/s (vdpbf16ps)\n", "BF16 peak", r->bf16_flops / 1e9);
    else
        printf("%-28s %15s (no AVX512_BF16)\n", "BF16 peak", "n/a");
    if (r->vnni_int8_ops > 0)
        printf("%-28s %8.1f GOP/s (vpdpbusd: the int8 projections without AMX)\n", "VNNI INT8 peak", r->vnni_int8_ops / 1e9);
    else
        printf("%-28s %15s (no AVX512_VNNI)\n", "VNNI INT8 peak", "n/a");
    if (r->amx_bf16_flops > 0)
        printf("%-28s %8.1f GFLOP/s (tdpbf16ps); AMX INT8 %.1f GOP/s (tdpbssd)\n", "AMX BF16 peak", r->amx_bf16_flops / 1e9,
               r->amx_int8_ops / 1e9);
    else
        printf("%-28s %15s (%s)\n", "AMX peaks", "n/a", r->amx_note);
    printf("%-28s %s\n", "bf16 prefill GEMMs", cpu_dnnl_describe()); /* oneDNN found at build or not */
    char blas[224];
    ceilings_blas_describe(blas, sizeof blas);
    printf("%-28s %s\n", "fp32 prefill GEMMs", blas);
    if (d->bandwidth_Bps > 0)
        printf("ridge (FP32 / DRAM read): %.1f FLOP/byte; ridge (FP32 / in-cache read): %.1f FLOP/byte\n",
               d->peak_flops[XF_COMPUTE_FP32] / d->bandwidth_Bps,
               d->cache_bandwidth_Bps > 0 ? d->peak_flops[XF_COMPUTE_FP32] / d->cache_bandwidth_Bps : 0.0);
    printf("measured in %.1f s; %s%s\n", r->seconds, path ? "saved to " : "not saved", path ? path : "");
}

static void print_gpu_table(const gpu_attrs *a, const gpu_theory *t, const gpu_measured *m, const device_spec *sheet,
                            const device_spec *d, const char *path) {
    printf("GPU: %s, compute capability %d.%d, %d SMs, %.1f GiB, L2 %.1f MiB\n", a->name, a->cc_major, a->cc_minor, a->sm_count,
           a->total_mem_bytes / 1073741824.0, a->l2_bytes / 1048576.0);
    printf("%-30s %14s %14s %14s\n", "ceiling", "measured", "attributes", "spec sheet");
    printf("%-30s %9.1f GB/s %14s %14s\n", "HBM copy (read + write)", m->copy_Bps / 1e9, "", "");
    printf("%-30s %9.1f GB/s %9.1f GB/s ", "HBM read (L2 flushed)", m->read_Bps / 1e9, t->bandwidth_Bps / 1e9);
    if (sheet) printf("%9.1f GB/s\n", sheet->bandwidth_Bps / 1e9);
    else printf("%14s\n", "n/a");
    printf("%-30s %6.1f TFLOP/s %6.1f TFLOP/s ", "BF16 tensor (cuBLAS GEMM)", m->tensor16_flops / 1e12, t->tensor16_flops / 1e12);
    if (sheet) printf("%6.1f TFLOP/s\n", sheet->peak_flops[XF_COMPUTE_TENSOR16] / 1e12);
    else printf("%14s\n", "n/a");
    printf("%-30s %6.1f TFLOP/s %6.1f TFLOP/s ", "FP32 (FMA kernel)", m->fp32_flops / 1e12, t->fp32_flops / 1e12);
    if (sheet) printf("%6.1f TFLOP/s\n", sheet->peak_flops[XF_COMPUTE_FP32] / 1e12);
    else printf("%14s\n", "n/a");
    printf("working set %.1f MiB, GEMM %lld^3, median of %d\n", m->bytes / 1048576.0, (long long)m->gemm_n, m->reps);
    if (d->bandwidth_Bps > 0)
        printf("ridge (BF16 tensor / bandwidth): %.1f FLOP/byte\n", d->peak_flops[XF_COMPUTE_TENSOR16] / d->bandwidth_Bps);
    printf("%s%s\n", path ? "saved to " : "not saved", path ? path : "");
}

/* What a calibration holds: entries and efficiency range per family, dtype and tier. */
static void print_calibration(const calib_table *t, const char *path) {
    printf("\ncalibration (%s grid, %d threads): efficiency = roofline time / measured time%s\n%s\n", t->grid, t->threads,
           t->fork_term ? " less its OpenMP forks" : "", t->source);
    printf("OpenMP: %s (by %s); a parallel region's fork and join %.2f us after a short gap, %.2f us after a long one\n",
           t->omp_spin, t->omp_spin_by, 1e6 * t->fork_short_s, 1e6 * t->fork_long_s);
    printf("%-13s %-6s %-6s %8s %10s %10s %10s\n", "family", "wdtype", "tier", "entries", "eff min", "eff median", "eff max");
    for (int i = 0; i < t->n;) {
        int j = i;
        while (j < t->n && t->entries[j].family == t->entries[i].family && t->entries[j].wdtype == t->entries[i].wdtype &&
               t->entries[j].tier == t->entries[i].tier)
            j++;
        double lo = t->entries[i].efficiency, hi = lo, eff[512];
        int m = 0;
        for (int k = i; k < j; k++) {
            double e = t->entries[k].efficiency;
            lo = e < lo ? e : lo;
            hi = e > hi ? e : hi;
            if (m < 512) eff[m++] = e;
        }
        printf("%-13s %-6s %-6s %8d %10.3f %10.3f %10.3f\n", calib_family_name(t->entries[i].family),
               dtype_name(t->entries[i].wdtype), calib_tier_name(t->entries[i].tier), j - i, lo,
               stats_median(eff, (size_t)m), hi);
        i = j;
    }
    printf("saved in %s (\"calibration\", %s v%d)\n", path, CALIB_FORMAT, CALIB_VERSION);
}

/* `xfprof machine --calibrate`: the grid against the ceilings just saved at path. */
static int machine_calibrate(const char *cmd, const char *path, const device_spec *d, int threads, int quick, const xf_dtype *wd,
                             int n_wd) {
    /* the runner reads its ceilings from the machine file: this one */
    if (setenv("XFPROF_MACHINE_FILE", path, 1) != 0) return cli_fail(cmd, xf_errorf(XF_EIO, "setenv failed"));
    /* XFPROF_CALIB_FORK_TERM_FILE (bench/bench_predict.sh's A/B): a copy of the machine file with
     * the same measurements' table under the fork term */
    const char *nf_path = getenv("XFPROF_CALIB_FORK_TERM_FILE");
    calib_table t, nf;
    calibrate_opts co = {threads, quick, wd, n_wd, 0, nf_path && *nf_path ? &nf : NULL};
    xf_status s = calibrate_measure(&co, d, &t);
    if (s == XF_OK) s = calib_table_save_machine(&t, path);
    if (s == XF_OK && co.fork_alt) {
        char *text = NULL;
        size_t len = 0;
        if ((s = file_read_all(path, (size_t)64 << 20, &text, &len)) == XF_OK) s = file_write_atomic(nf_path, text, len);
        free(text);
        if (s == XF_OK) s = calib_table_save_machine(&nf, nf_path);
    }
    if (s == XF_OK) print_calibration(&t, path);
    calib_table_free(&t);
    if (co.fork_alt) calib_table_free(&nf);
    return s == XF_OK ? CLI_EXIT_OK : cli_fail(cmd, s);
}

/* `xfprof machine --device cuda[:N]`. */
static int machine_cuda(const char *cmd, int ordinal, const char *out, int save, const char *format) {
    char path[4096];
    xf_status s;
    if (save) {
        if (out) {
            if ((size_t)snprintf(path, sizeof path, "%s", out) >= sizeof path) return cli_usage_error(cmd, "-o: path too long");
            /* -o FILE: its folder must exist, as for every command (only the default location's
             * folders are created); checked before the measurement, not after it */
            if ((s = file_check_parent(path)) != XF_OK) return cli_fail(cmd, s);
        } else if ((s = ceilings_gpu_machine_path(path, sizeof path)) != XF_OK) {
            return cli_fail(cmd, s);
        }
    }
    cuda_device_info info;
    if ((s = cuda_device_open(ordinal, &info)) != XF_OK)
        return s == XF_EUNSUPPORTED ? cli_cuda_unsupported(cmd) : cli_fail(cmd, s);
    fprintf(stderr, "xfprof machine: measuring cuda:%d (%s): copy, read, FMA and GEMM kernels (seconds)...\n", ordinal, info.name);
    device_spec d, sheet;
    gpu_attrs a;
    gpu_theory t;
    gpu_measured m;
    if ((s = gpu_machine_measure(ordinal, &d, &a, &t, &m)) != XF_OK)
        return s == XF_EUNSUPPORTED ? cli_cuda_unsupported(cmd) : cli_fail(cmd, s);
    int have_sheet = gpu_spec_for(&a, &sheet) == XF_OK;
    xf_error_clear();
    if (save && (s = ceilings_save(&d, NULL, path)) != XF_OK) return cli_fail(cmd, s);
    if (!strcmp(format, "json")) {
        if ((s = ceilings_save(&d, NULL, "-")) != XF_OK) return cli_fail(cmd, s);
    } else {
        print_gpu_table(&a, &t, &m, have_sheet ? &sheet : NULL, &d, save ? path : NULL);
    }
    return CLI_EXIT_OK;
}

int cmd_machine(int argc, char **argv) {
    const char *cmd = "machine";
    ceilings_opts o;
    memset(&o, 0, sizeof o);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    o.threads = ncpu > 0 ? (int)ncpu : 1;
    const char *out = NULL, *format = "table";
    int save = 1, cuda = 0, ordinal = 0, comm_mode = 0, calibrate = 0, n_wd = 3;
    xf_dtype wd[3] = {XF_FP32, XF_BF16, XF_INT8};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_val = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return CLI_EXIT_OK;
        } else if (!strcmp(a, "--threads")) {
            if (!has_val) return cli_usage_error(cmd, "--threads needs a value");
            int64_t v;
            xf_status s = args_flag_int("--threads", argv[++i], &v);
            if (s != XF_OK) return cli_fail(cmd, s);
            o.threads = (int)v;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (!has_val) return cli_usage_error(cmd, "%s needs a file name", a);
            out = argv[++i];
        } else if (!strcmp(a, "--format")) {
            if (!has_val) return cli_usage_error(cmd, "--format needs table or json");
            format = argv[++i];
            if (strcmp(format, "table") && strcmp(format, "json"))
                return cli_usage_error(cmd, "--format: '%s' is not table or json", format);
        } else if (!strcmp(a, "--device")) {
            if (!has_val) return cli_usage_error(cmd, "--device needs cpu, cuda or cuda:N");
            const char *dv = argv[++i];
            if (!strcmp(dv, "cpu")) {
                cuda = 0;
            } else if (cuda_device_parse(dv, &ordinal) == XF_OK) {
                cuda = 1;
            } else {
                return cli_usage_error(cmd, "--device: '%s' is not cpu, cuda or cuda:N (N a GPU index)", dv);
            }
        } else if (!strcmp(a, "--quick")) {
            o.quick = 1;
        } else if (!strcmp(a, "--calibrate")) {
            calibrate = 1;
        } else if (!strcmp(a, "--wdtype")) {
            if (!has_val) return cli_usage_error(cmd, "--wdtype needs a list of fp32, bf16, int8");
            char buf[64];
            if ((size_t)snprintf(buf, sizeof buf, "%s", argv[++i]) >= sizeof buf) return cli_usage_error(cmd, "--wdtype: list too long");
            n_wd = 0;
            for (char *save_p = NULL, *tok = strtok_r(buf, ",", &save_p); tok; tok = strtok_r(NULL, ",", &save_p)) {
                xf_dtype d;
                if (dtype_parse(tok, &d) != XF_OK || (d != XF_FP32 && d != XF_BF16 && d != XF_INT8))
                    return cli_usage_error(cmd, "--wdtype: '%s' is not fp32, bf16 or int8 (the CPU model's weight dtypes)", tok);
                for (int k = 0; k < n_wd; k++)
                    if (wd[k] == d) return cli_usage_error(cmd, "--wdtype: %s given twice", tok);
                if (n_wd == 3) return cli_usage_error(cmd, "--wdtype: at most fp32, bf16 and int8");
                wd[n_wd++] = d;
            }
            if (n_wd == 0) return cli_usage_error(cmd, "--wdtype needs a list of fp32, bf16, int8");
        } else if (!strcmp(a, "--comm")) {
            comm_mode = 1;
        } else if (!strcmp(a, "--no-save")) {
            save = 0;
        } else {
            return cli_usage_error(cmd, "unknown option '%s'", a);
        }
    }
    if (calibrate && (cuda || comm_mode))
        return cli_usage_error(cmd, "--calibrate measures the CPU's kernels: not with --device cuda or --comm (a GPU's efficiencies "
                               "are the spec sheet's defaults until a GPU calibration exists)");
    if (calibrate && !save) return cli_usage_error(cmd, "--calibrate saves into the machine file: not with --no-save");
    if (calibrate && !strcmp(format, "json")) return cli_usage_error(cmd, "--calibrate prints a table: not with --format json");
    if (comm_mode) return machine_comm(cmd, out, save, o.quick, cuda); /* --device cuda: NCCL between the ranks' GPUs */
    if (cuda) return machine_cuda(cmd, ordinal, out, save, format);
    char path[4096];
    xf_status s;
    if (save) {
        if (out) {
            if ((size_t)snprintf(path, sizeof path, "%s", out) >= sizeof path) return cli_usage_error(cmd, "-o: path too long");
            /* -o FILE: its folder must exist, as for every command (only the default location's
             * folders are created); checked before the measurement, not after it */
            if ((s = file_check_parent(path)) != XF_OK) return cli_fail(cmd, s);
        } else {
            if ((s = ceilings_machine_path(path, sizeof path)) != XF_OK) return cli_fail(cmd, s);
        }
    }
    fprintf(stderr, "xfprof machine: measuring with %d threads%s (a few seconds)...\n", o.threads, o.quick ? ", quick" : "");
    ceilings_result r;
    s = ceilings_measure(&o, &r);
    if (s != XF_OK) return cli_fail(cmd, s);
    device_spec d;
    ceilings_to_device(&r, &d);
    if (save && (s = ceilings_save(&d, &r, path)) != XF_OK) return cli_fail(cmd, s);
    if (!strcmp(format, "json")) {
        if ((s = ceilings_save(&d, &r, "-")) != XF_OK) return cli_fail(cmd, s);
    } else {
        print_table(&r, &d, save ? path : NULL);
    }
    if (calibrate) return machine_calibrate(cmd, path, &d, o.threads, o.quick, wd, n_wd);
    return CLI_EXIT_OK;
}
