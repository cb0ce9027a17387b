/* xfprof import: another engine's trace -> an ordinary record (kind "import") that show, report
 * and compare read like any other. The importer (importers/) fills times, FLOPs and bytes; here
 * the device is chosen, every op is set against its ceilings (analyzers/roofline) and the record
 * is written. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "analyzers/roofline.h"
#include "args.h"
#include "cli.h"
#include "core/device.h"
#include "importers/importer.h"
#include "output.h"
#include "probes/ceilings.h"
#include "probes/timer.h"

static const char *CMD = "import";

static void help(void) {
    printf("Usage: xfprof import TRACE.json|KERNELS.csv|REPORT.sqlite [options]\n\n"
           "Reads a torch.profiler Chrome trace (prof.export_chrome_trace, profiled with record_shapes=True;\n"
           "with_stack=True gives the module names, hence layers and op kinds), or an Nsight Compute CSV\n"
           "(ncu --csv --page raw with the metrics docs/import.md names; a .csv file), or an Nsight Systems SQLite\n"
           "export (nsys export --type sqlite: kernels, NVTX ranges as ops, time only), and writes an ordinary record\n"
           "(kind \"import\"): every op's measured time, the FLOPs and compulsory bytes its input shapes give,\n"
           "its utilization of the device's ceilings and its class by the speed-of-light rule; ops without a\n"
           "formula are kept with their time and class \"unknown\". show, report and compare read the record\n"
           "like any other. The trace is parsed streaming (yajl): memory grows with the events kept, not the file.\n\n"
           "  --device D        the device the trace ran on (xfprof devices), for its ceilings\n"
           "  --device-file F   a devices file of your own (format of data/devices.json, or xfprof machine's)\n"
           "                    (neither: the machine file of 'xfprof machine', i.e. this machine's CPU)\n"
           "  --max-size SIZE   refuse torch traces and CSV files larger than this (default 1GiB; e.g. 4GiB)\n"
           "  --kernel-map F    Nsight CSV/SQLite: kernel (or NVTX range) name patterns -> ops of your own, tried before\n"
           "                    data/kernel_ops.json (same format)\n"
           "%s"
           "  --report FILE     also write the HTML report\n"
           "  --trace FILE      also write a Chrome trace of the record's ops\n\n"
           "Example: xfprof import trace.json --device h100-sxm -o rec.json --report rec.html\n",
           cli_output_help);
}

static void env_num(record *r, const char *key, double v) {
    char buf[64];
    snprintf(buf, sizeof buf, "%.9g", v);
    record_set_env(r, key, buf);
}

/* An SQLite file (Nsight Systems export): its 16-byte header. */
static int is_sqlite(const char *path) {
    char h[16] = {0};
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t n = fread(h, 1, sizeof h, f);
    fclose(f);
    return n == sizeof h && memcmp(h, "SQLite format 3", 16) == 0;
}

/* The device: --device / --device-file, else the machine file. */
static int pick_device(const char *name, const char *file, device_spec *dev, int *measured) {
    xf_status s;
    *measured = 0;
    if (name || file) {
        if ((s = device_lookup(name, file, dev))) return cli_fail(CMD, s);
        *measured = dev->measured;
        return CLI_EXIT_OK;
    }
    char path[4096];
    if (ceilings_machine_path(path, sizeof path) == XF_OK && access(path, R_OK) == 0) {
        if ((s = ceilings_load(path, dev))) return cli_fail(CMD, s);
        *measured = 1;
        return CLI_EXIT_OK;
    }
    return cli_usage_error(CMD, "give the device the trace ran on (--device NAME, see 'xfprof devices', or --device-file F), "
                                "or run 'xfprof machine' once to judge CPU traces against this machine");
}

int cmd_import(int argc, char **argv) {
    enum { O_DEVICE = 1000, O_DEVFILE, O_MAXSIZE, O_FORMAT, O_PERLAYER, O_REPORT, O_TRACE, O_KMAP };
    static const struct option opts[] = {{"device", required_argument, 0, O_DEVICE},
                                         {"device-file", required_argument, 0, O_DEVFILE},
                                         {"max-size", required_argument, 0, O_MAXSIZE},
                                         {"kernel-map", required_argument, 0, O_KMAP},
                                         {"format", required_argument, 0, O_FORMAT},
                                         {"output", required_argument, 0, 'o'},
                                         {"per-layer", no_argument, 0, O_PERLAYER},
                                         {"report", required_argument, 0, O_REPORT},
                                         {"trace", required_argument, 0, O_TRACE},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    cli_output out = {RENDER_TABLE, NULL, 0, NULL, NULL};
    const char *device = NULL, *device_file = NULL, *kernel_map = NULL;
    import_options io = {0};
    int c;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":ho:", opts, NULL)) != -1) {
        switch (c) {
        case 'h': help(); return CLI_EXIT_OK;
        case O_DEVICE: device = optarg; break;
        case O_DEVFILE: device_file = optarg; break;
        case O_KMAP: kernel_map = optarg; break;
        case O_MAXSIZE: {
            double b;
            xf_status s = args_size("--max-size", optarg, &b);
            if (s) return cli_fail(CMD, s);
            if (b < 1 || b > 0x1p62) return cli_usage_error(CMD, "--max-size must be between 1 B and 4 EiB");
            io.max_bytes = (int64_t)b;
            break;
        }
        case O_FORMAT: case O_REPORT: case O_TRACE: {
            const char *nm = c == O_FORMAT ? "format" : c == O_REPORT ? "report" : "trace";
            if (cli_output_option(CMD, nm, optarg, &out) < 0) return CLI_EXIT_USAGE;
            break;
        }
        case 'o': out.path = optarg; break;
        case O_PERLAYER: out.per_layer = 1; break;
        case ':': return cli_usage_error(CMD, "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error(CMD, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind != argc - 1) return cli_usage_error(CMD, "give exactly one trace file (torch.profiler Chrome trace JSON)");
    const char *path = argv[optind];
    device_spec dev;
    int measured, rc;
    if ((rc = pick_device(device, device_file, &dev, &measured)) != CLI_EXIT_OK) return rc;
    record r;
    import_stats st;
    size_t pl = strlen(path);
    int ncu = pl > 4 && strcasecmp(path + pl - 4, ".csv") == 0;
    int nsys = is_sqlite(path);
    xf_status s;
    if (nsys) {
        import_kernel_map km = {0};
        s = import_kernel_map_load(kernel_map, &km);
        if (!s) s = import_nsys_sqlite_file(path, &km, &r, &st);
        import_kernel_map_free(&km);
    } else if (ncu) {
        import_kernel_map km = {0};
        s = import_kernel_map_load(kernel_map, &km);
        if (!s) s = import_ncu_csv_file(path, &io, &km, &r, &st);
        import_kernel_map_free(&km);
    } else if (kernel_map) {
        return cli_usage_error(CMD, "--kernel-map applies to Nsight Compute CSV and Nsight Systems SQLite files only");
    } else {
        s = import_torch_trace_file(path, &io, &r, &st);
    }
    if (s) {
        record_free(&r);
        return cli_fail(CMD, s);
    }
    r.device = dev;
    r.ceilings_measured = measured;
    roofline_thresholds th;
    roofline_thresholds_default(&th);
    record_point *p = &r.points[0];
    p->memory.capacity_bytes = dev.memory_bytes;
    for (int64_t i = 0; i < p->n_ops; i++) {
        record_op *op = &p->ops[i];
        timer_stats(op->samples_s, op->n_samples, &op->time_s, &op->spread_s);
        xf_bound keep = op->bound;
        roofline_measure_op(op, &dev, &th);
        if (keep == XF_BOUND_UNKNOWN) op->bound = XF_BOUND_UNKNOWN; /* no formula: no class */
    }
    roofline_summarize_point(p);
    record_stamp_time(&r);
    record_set_env(&r, "import_source", path);
    record_set_env(&r, "import_format", nsys  ? "nsight systems sqlite (nsys export --type sqlite)"
                                        : ncu ? "nsight compute csv (ncu --csv --page raw)"
                                              : "torch.profiler chrome trace");
    record_set_env(&r, "import_time_level", st.time_level);
    record_set_env(&r, "import_counting",
                   nsys ? "none: an Nsight Systems export has no FLOPs or bytes (every op's class is unknown)"
                   : ncu ? "per kernel launch: FLOPs from the SASS FP instruction counts (FMA 2) and tensor-pipe ops, bytes "
                         "from DRAM read + write counters"
                       : "FLOPs and bytes on the leaf ops of each outermost op (an op above an op without a formula when "
                         "it has one): counted once");
    record_set_env(&r, "import_layers", nsys ? "none: NVTX ranges are the ops (layer -1, phase decode)"
                   : ncu ? "none: Nsight Compute rows carry no layer (all layer -1, phase decode)"
                   : st.have_modules  ? "module names (with_stack=True)"
                   : st.pattern_layers ? "the repeating pattern of each step (no module names: profile with with_stack=True "
                                         "for op kinds)"
                                       : "none: no module names in the trace (profile with with_stack=True)");
    env_num(&r, "import_window_s", st.window_s);
    env_num(&r, "import_busy_s", st.busy_s);
    env_num(&r, "import_idle_s", st.idle_s);
    env_num(&r, "import_unattributed_s", st.unattributed_s);
    env_num(&r, "import_unknown_ops", (double)st.n_unknown);
    env_num(&r, "import_unknown_s", st.unknown_s);
    env_num(&r, "import_matrix_flops", st.matrix_flops);
    char buf[128];
    snprintf(buf, sizeof buf, "%lld prefill, %lld decode", (long long)st.n_steps[0], (long long)st.n_steps[1]);
    record_set_env(&r, "import_steps", buf);
    fprintf(stderr,
            "xfprof import: %s: %lld events, %lld cpu ops, %lld kernels; %lld prefill and %lld decode steps; "
            "window %.6g s, in ops %.6g s, idle %.6g s, unattributed %.6g s; %lld ops without a formula (%.6g s, class unknown)\n",
            path, (long long)st.n_events, (long long)st.n_ops, (long long)st.n_kernels, (long long)st.n_steps[0],
            (long long)st.n_steps[1], st.window_s, st.busy_s, st.idle_s, st.unattributed_s, (long long)st.n_unknown,
            st.unknown_s);
    rc = cli_output_write(CMD, &r, &out);
    record_free(&r);
    return rc;
}
