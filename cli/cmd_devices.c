/* xfprof devices: the device spec sheets (built-in or the user's file) with their ridge points. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "cli/args.h"
#include "core/device.h"
#include "core/json_util.h"

static const char *CMD = "devices";

static void usage(FILE *f) {
    fprintf(f,
            "Usage: xfprof devices [--device-file FILE] [--format table|json]\n\n"
            "Lists the device spec sheets: memory, peak bandwidth, dense peak FLOP/s per compute type\n"
            "(FP32 CUDA cores, FP16/BF16 tensor, FP8, INT8), the ridge points P/B in FLOP per byte, and\n"
            "where each figure comes from. The built-in sheets live in devices.json in xfprof's data\n"
            "folder ($XFPROF_DATA_DIR, else <binary dir>/data, else <binary dir>/../share/xfprof).\n\n"
            "Options:\n"
            "  -d, --device-file FILE  list the devices of your own file ({\"format\": \"xfprof-devices\", ...})\n"
            "  -f, --format FMT        table (default) or json (a valid devices file, plus ridge points)\n"
            "  -h, --help              this help\n\n"
            "A compute type a device lacks (shown as '-') runs on the next slower one: fp8 and int8 fall\n"
            "back to tensor16, tensor16 to fp32.\n");
}

static void tflops(double v, char *buf, size_t len) {
    if (v > 0) snprintf(buf, len, "%.1f", v / 1e12);
    else snprintf(buf, len, "-");
}

int cmd_devices(int argc, char **argv) {
    static const struct option opts[] = {{"device-file", required_argument, NULL, 'd'},
                                         {"format", required_argument, NULL, 'f'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *file = NULL, *format = "table";
    optind = 0;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":d:f:h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': file = optarg; break;
        case 'f': format = optarg; break;
        case 'h': usage(stdout); return CLI_EXIT_OK;
        case ':': return cli_usage_error(CMD, "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error(CMD, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
    int json = 0;
    if (args_table_or_json("--format", format, &json) != XF_OK) return cli_usage_error(CMD, "%s", xf_error_msg());

    device_list l = {0, NULL};
    xf_status s = file ? device_list_load(file, &l) : device_list_builtin(&l);
    if (s != XF_OK) return cli_fail(CMD, s);

    int rc = CLI_EXIT_OK;
    if (json) {
        cJSON *root = cJSON_CreateObject();
        int ok = root && cJSON_AddStringToObject(root, "format", "xfprof-devices") && json_add_number(root, "version", 1);
        cJSON *arr = ok ? cJSON_AddArrayToObject(root, "devices") : NULL;
        ok = arr != NULL;
        for (int i = 0; ok && i < l.n; i++) {
            char *t = device_spec_to_json(&l.items[i]);
            cJSON *o = t ? cJSON_Parse(t) : NULL;
            free(t);
            cJSON *r = o ? cJSON_AddObjectToObject(o, "ridge_flop_per_byte") : NULL;
            ok = r != NULL;
            for (int k = 0; ok && k < XF_COMPUTE_COUNT; k++) ok = json_add_number(r, compute_name((xf_compute)k), device_ridge(&l.items[i], (xf_compute)k));
            if (ok) ok = cJSON_AddItemToArray(arr, o);
            if (!ok) cJSON_Delete(o);
        }
        char *text = ok ? cJSON_Print(root) : NULL;
        if (text) {
            fputs(text, stdout);
            fputc('\n', stdout);
            free(text);
        } else {
            rc = cli_fail(CMD, xf_errorf(XF_ENOMEM, "out of memory building the JSON output"));
        }
        cJSON_Delete(root);
    } else {
        int w = 12; /* the name column fits the longest name (a devices file may have long ones) */
        for (int i = 0; i < l.n; i++) w = (int)strlen(l.items[i].name) > w ? (int)strlen(l.items[i].name) : w;
        printf("%-*s %-4s %9s %9s %8s %8s %8s %8s %8s %8s %9s\n", w, "device", "kind", "memory", "bandwidth", "fp32", "tensor16",
               "fp8", "int8", "L2", "ridge16", "ridge32");
        printf("%-*s %-4s %9s %9s %8s %8s %8s %8s %8s %8s %9s\n", w, "", "", "GiB", "GB/s", "TFLOP/s", "TFLOP/s", "TFLOP/s", "TOP/s",
               "MiB", "FLOP/B", "FLOP/B");
        for (int i = 0; i < l.n; i++) {
            const device_spec *d = &l.items[i];
            char p[XF_COMPUTE_COUNT][32], cache[32];
            for (int k = 0; k < XF_COMPUTE_COUNT; k++) tflops(d->peak_flops[k], p[k], sizeof p[k]);
            if (d->cache_bytes > 0) snprintf(cache, sizeof cache, "%.0f", d->cache_bytes / (1024.0 * 1024.0));
            else snprintf(cache, sizeof cache, "-");
            printf("%-*s %-4s %9.1f %9.0f %8s %8s %8s %8s %8s %8.1f %9.1f\n", w, d->name, d->kind, d->memory_bytes / (1024.0 * 1024.0 * 1024.0),
                   d->bandwidth_Bps / 1e9, p[XF_COMPUTE_FP32], p[XF_COMPUTE_TENSOR16], p[XF_COMPUTE_FP8], p[XF_COMPUTE_INT8], cache,
                   device_ridge(d, XF_COMPUTE_TENSOR16), device_ridge(d, XF_COMPUTE_FP32));
        }
        printf("\nPeaks are dense (no 2:4 sparsity). ridge = peak / bandwidth: ops with fewer FLOP per byte are memory-bound.\n"
               "'-' = not available on the device (runs on the next slower type).\nSources:\n");
        for (int i = 0; i < l.n; i++) printf("  %-*s %s%s\n", w, l.items[i].name, l.items[i].measured ? "[measured] " : "", l.items[i].source);
    }
    device_list_free(&l);
    return rc;
}
