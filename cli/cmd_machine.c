/* xfprof machine: measures this CPU's ceilings (bandwidth out of and inside the last-level cache,
 * FP32 and BF16 peaks) and saves them as the per-machine devices file that run and predict use. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "probes/ceilings.h"

static void usage(FILE *f) {
    fprintf(f,
            "Usage: xfprof machine [--threads N] [-o FILE] [--format table|json] [--quick] [--no-save]\n\n"
            "Measures this machine's ceilings with N threads (default: all online CPUs):\n"
            "  read, copy and triad bandwidth over a working set of 4x the last-level cache (2x with\n"
            "  --quick) and inside it (a quarter of it), FP32 FMA peak, BF16 peak where the CPU has\n"
            "  AVX512_BF16; best of 5 repetitions (3 with --quick).\n"
            "Saves them to FILE (-o), else $XFPROF_MACHINE_FILE, else ~/.cache/xfprof/machine.json, in\n"
            "the devices-file format; 'xfprof run' and 'xfprof predict --device cpu' read it.\n"
            "  --format json   print the saved devices file instead of the table\n"
            "  --no-save       measure and print only\n");
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
    printf("%-28s %8.1f GFLOP/s (%s FMA)\n", "FP32 peak", r->fp32_flops / 1e9, r->fp32_isa);
    if (r->bf16_flops > 0)
        printf("%-28s %8.1f GFLOP/s (vdpbf16ps)\n", "BF16 peak", r->bf16_flops / 1e9);
    else
        printf("%-28s %15s (no AVX512_BF16)\n", "BF16 peak", "n/a");
    if (d->bandwidth_Bps > 0)
        printf("ridge (FP32 / DRAM read): %.1f FLOP/byte; ridge (FP32 / in-cache read): %.1f FLOP/byte\n",
               d->peak_flops[XF_COMPUTE_FP32] / d->bandwidth_Bps,
               d->cache_bandwidth_Bps > 0 ? d->peak_flops[XF_COMPUTE_FP32] / d->cache_bandwidth_Bps : 0.0);
    printf("measured in %.1f s; %s%s\n", r->seconds, path ? "saved to " : "not saved", path ? path : "");
}

int cmd_machine(int argc, char **argv) {
    const char *cmd = "machine";
    ceilings_opts o;
    memset(&o, 0, sizeof o);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    o.threads = ncpu > 0 ? (int)ncpu : 1;
    const char *out = NULL, *format = "table";
    int save = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_val = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return CLI_EXIT_OK;
        } else if (!strcmp(a, "--threads")) {
            if (!has_val) return cli_usage_error(cmd, "--threads needs a value");
            int64_t v;
            xf_status s = args_int("--threads", argv[++i], 1, 1024, &v);
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
        } else if (!strcmp(a, "--quick")) {
            o.quick = 1;
        } else if (!strcmp(a, "--no-save")) {
            save = 0;
        } else {
            return cli_usage_error(cmd, "unknown option '%s'", a);
        }
    }
    char path[4096];
    if (save) {
        if (out) {
            if ((size_t)snprintf(path, sizeof path, "%s", out) >= sizeof path) return cli_usage_error(cmd, "-o: path too long");
        } else {
            xf_status s = ceilings_machine_path(path, sizeof path);
            if (s != XF_OK) return cli_fail(cmd, s);
        }
    }
    fprintf(stderr, "xfprof machine: measuring with %d threads%s (a few seconds)...\n", o.threads, o.quick ? ", quick" : "");
    ceilings_result r;
    xf_status s = ceilings_measure(&o, &r);
    if (s != XF_OK) return cli_fail(cmd, s);
    device_spec d;
    ceilings_to_device(&r, &d);
    if (save && (s = ceilings_save(&d, &r, path)) != XF_OK) return cli_fail(cmd, s);
    if (!strcmp(format, "json")) {
        if ((s = ceilings_save(&d, &r, "-")) != XF_OK) return cli_fail(cmd, s);
    } else {
        print_table(&r, &d, save ? path : NULL);
    }
    return CLI_EXIT_OK;
}
