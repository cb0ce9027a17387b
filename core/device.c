/* Device ceilings as data: the reader of devices files, the lookup by name and the peak rules. */
#include "device.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "json_util.h"

#define DEVICES_FORMAT "xfprof-devices"
#define DEVICES_VERSION 1
#define DEVICES_MAX_FILE ((size_t)16 << 20)
#define DEVICES_MAX_COUNT 4096

/* Absurd-value limits: far above any device that exists, low enough to catch unit mistakes
 * (a bandwidth in bits, a peak in FLOP per cycle times a typo). */
#define LIM_MEMORY 1e16      /* 10 PB */
#define LIM_BANDWIDTH 1e16   /* 10 PB/s */
#define LIM_FLOPS 1e19       /* 10 EFLOP/s */
/* And the floors: below any device xfprof could profile (a microcontroller has more), high enough
 * that every predicted time and rate stays a finite number (a peak of 1e-300 FLOP/s made TTFT
 * infinite, and the record then held null where its readers need a number). */
#define MIN_MEMORY 1048576.0 /* 1 MiB */
#define MIN_BANDWIDTH 1e6    /* 1 MB/s */
#define MIN_FLOPS 1e6        /* 1 MFLOP/s */

static const char *const k_compute_names[XF_COMPUTE_COUNT] = {"fp32", "tensor16", "fp8", "int8"};

const char *compute_name(xf_compute c) {
    if ((int)c < 0 || c >= XF_COMPUTE_COUNT) return "unknown";
    return k_compute_names[c];
}

double device_peak(const device_spec *d, xf_compute c) {
    if (!d || (int)c < 0 || c >= XF_COMPUTE_COUNT) return 0.0;
    /* Fallback chain: fp8 and int8 run as 16-bit tensor ops where the device lacks them, and
     * tensor16 runs on the FP32 units where there are no tensor cores. */
    if (d->peak_flops[c] > 0) return d->peak_flops[c];
    if ((c == XF_COMPUTE_FP8 || c == XF_COMPUTE_INT8) && d->peak_flops[XF_COMPUTE_TENSOR16] > 0)
        return d->peak_flops[XF_COMPUTE_TENSOR16];
    return d->peak_flops[XF_COMPUTE_FP32];
}

double device_ridge(const device_spec *d, xf_compute c) {
    if (!d || !(d->bandwidth_Bps > 0)) return 0.0;
    return device_peak(d, c) / d->bandwidth_Bps;
}

void device_list_free(device_list *l) {
    if (!l) return;
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

/* A required or optional finite number in [lo, lim] (`unit` in the messages); `allow_zero` for
 * optional figures where 0 means unknown / not available. */
static xf_status get_figure(const cJSON *obj, const char *key, const char *ctx, int required, int allow_zero, double lo,
                            double lim, const char *unit, double *out) {
    int present = 0;
    double v = 0;
    xf_status s = json_opt_number(obj, key, ctx, &v, &present);
    if (s != XF_OK) return s;
    if (!present) {
        if (required) return xf_errorf(XF_EINVAL, "%s: missing field '%s'", ctx, key);
        *out = 0;
        return XF_OK;
    }
    if (v == 0 && allow_zero) {
        *out = 0;
        return XF_OK;
    }
    if (v < lo)
        return xf_errorf(XF_EINVAL, "%s: field '%s' = %g %s is below the smallest xfprof accepts (%g %s%s); check the units", ctx,
                         key, v, unit, lo, unit, allow_zero ? ", or 0 for unknown" : "");
    if (v > lim)
        return xf_errorf(XF_EINVAL, "%s: field '%s' = %g %s is absurdly large (limit %g %s); check the units", ctx, key, v, unit,
                         lim, unit);
    *out = v;
    return XF_OK;
}

#define LIM_LATENCY 1.0 /* a second per hop: a unit mistake */

/* An optional link object {"name", "bandwidth_Bps", "latency_s", "source"}. */
static xf_status parse_link(const cJSON *o, const char *key, const char *ctx, device_link *l) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!j || cJSON_IsNull(j)) return XF_OK;
    char lctx[256];
    snprintf(lctx, sizeof lctx, "%.200s.%s", ctx, key);
    if (!cJSON_IsObject(j))
        return xf_errorf(XF_EINVAL, "%s must be an object like {\"name\": \"nvlink4\", \"bandwidth_Bps\": 450e9, \"latency_s\": 3e-6}", lctx);
    xf_status s;
    int present = 0;
    if ((s = json_get_string(j, "name", lctx, l->name, sizeof l->name)) != XF_OK) return s;
    if (!l->name[0]) return xf_errorf(XF_EINVAL, "%s: field 'name' is empty", lctx);
    if ((s = get_figure(j, "bandwidth_Bps", lctx, 1, 0, MIN_BANDWIDTH, LIM_BANDWIDTH, "B/s", &l->bandwidth_Bps)) != XF_OK) return s;
    if ((s = get_figure(j, "latency_s", lctx, 0, 1, 1e-9, LIM_LATENCY, "s", &l->latency_s)) != XF_OK) return s;
    if ((s = json_opt_string(j, "source", lctx, l->source, sizeof l->source, &present)) != XF_OK) return s;
    if (!present) snprintf(l->source, sizeof l->source, "unspecified");
    return XF_OK;
}

static xf_status parse_device(const cJSON *o, const char *ctx, device_spec *d) {
    xf_status s;
    int present = 0;
    memset(d, 0, sizeof *d);
    if (!cJSON_IsObject(o)) return xf_errorf(XF_EINVAL, "%s: a device must be a JSON object", ctx);
    if ((s = json_get_string(o, "name", ctx, d->name, sizeof d->name)) != XF_OK) return s;
    if (!d->name[0]) return xf_errorf(XF_EINVAL, "%s: field 'name' is empty", ctx);
    for (const char *p = d->name; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == ',' || *p == '"' || (unsigned char)*p >= 127)
            return xf_errorf(XF_EINVAL, "%s: field 'name' ('%s') must be a short id without spaces, commas or quotes", ctx, d->name);
    if ((s = json_opt_string(o, "description", ctx, d->description, sizeof d->description, &present)) != XF_OK) return s;
    if (!present) memcpy(d->description, d->name, strlen(d->name) + 1);
    if ((s = json_get_string(o, "kind", ctx, d->kind, sizeof d->kind)) != XF_OK) return s;
    if (strcmp(d->kind, "gpu") != 0 && strcmp(d->kind, "cpu") != 0)
        return xf_errorf(XF_EINVAL, "%s: field 'kind' is '%s'; it must be \"gpu\" or \"cpu\"", ctx, d->kind);
    if ((s = json_opt_string(o, "source", ctx, d->source, sizeof d->source, &present)) != XF_OK) return s;
    if (!present) snprintf(d->source, sizeof d->source, "unspecified");
    d->measured = 0;
    if ((s = json_opt_bool(o, "measured", ctx, &d->measured, &present)) != XF_OK) return s;

    if ((s = get_figure(o, "memory_bytes", ctx, 1, 0, MIN_MEMORY, LIM_MEMORY, "bytes", &d->memory_bytes)) != XF_OK) return s;
    if ((s = get_figure(o, "bandwidth_Bps", ctx, 1, 0, MIN_BANDWIDTH, LIM_BANDWIDTH, "B/s", &d->bandwidth_Bps)) != XF_OK) return s;
    if ((s = get_figure(o, "cache_bytes", ctx, 0, 1, 1024, LIM_MEMORY, "bytes", &d->cache_bytes)) != XF_OK) return s;
    if ((s = get_figure(o, "cache_bandwidth_Bps", ctx, 0, 1, MIN_BANDWIDTH, LIM_BANDWIDTH, "B/s", &d->cache_bandwidth_Bps)) != XF_OK) return s;

    const cJSON *pk = cJSON_GetObjectItemCaseSensitive(o, "peak_flops");
    if (!pk || cJSON_IsNull(pk)) return xf_errorf(XF_EINVAL, "%s: missing field 'peak_flops'", ctx);
    if (!cJSON_IsObject(pk))
        return xf_errorf(XF_EINVAL, "%s: field 'peak_flops' must be an object like {\"fp32\": 19.5e12, \"tensor16\": 312e12}", ctx);
    char pctx[256];
    snprintf(pctx, sizeof pctx, "%s.peak_flops", ctx);
    for (int c = 0; c < XF_COMPUTE_COUNT; c++) {
        /* fp32 is the floor of every fallback: it must exist; the others may be 0 or absent. */
        int req = c == XF_COMPUTE_FP32;
        if ((s = get_figure(pk, k_compute_names[c], pctx, req, !req, MIN_FLOPS, LIM_FLOPS, "FLOP/s", &d->peak_flops[c])) != XF_OK) return s;
    }
    if ((s = parse_link(o, "link", ctx, &d->link)) != XF_OK || (s = parse_link(o, "node_link", ctx, &d->node_link)) != XF_OK)
        return s;
    int64_t gpn = 0;
    if ((s = json_opt_int(o, "gpus_per_node", ctx, 1, 1 << 16, &gpn, &present)) != XF_OK) return s;
    d->gpus_per_node = (int)gpn;
    for (const cJSON *it = pk->child; it; it = it->next) {
        int known = 0;
        for (int c = 0; c < XF_COMPUTE_COUNT; c++)
            if (it->string && strcmp(it->string, k_compute_names[c]) == 0) known = 1;
        if (!known)
            return xf_errorf(XF_EINVAL, "%s: unknown compute type '%s' (known: fp32, tensor16, fp8, int8)", pctx,
                             it->string ? it->string : "?");
    }
    return XF_OK;
}

xf_status device_list_parse(const char *json_text, const char *source, device_list *out) {
    const char *file = source ? source : "devices";
    out->n = 0;
    out->items = NULL;
    if (!json_text) return xf_errorf(XF_EINVAL, "%s: no text", file);
    cJSON *root = NULL;
    xf_status s = json_parse(json_text, file, &root);
    if (s != XF_OK) return s;
    char fmt[64];
    int64_t version = 0;
    const cJSON *arr = NULL;
    device_spec *items = NULL;
    int n = 0;
    if (!cJSON_IsObject(root)) {
        s = xf_errorf(XF_EFORMAT, "%s: not a devices file (expected a JSON object with \"format\": \"%s\")", file, DEVICES_FORMAT);
        goto done;
    }
    {
        int present = 0;
        s = json_opt_string(root, "format", file, fmt, sizeof fmt, &present);
        if (s == XF_OK && !present) s = xf_errorf(XF_EFORMAT, "%s: missing field 'format'; a devices file has \"format\": \"%s\"", file, DEVICES_FORMAT);
        if (s != XF_OK) {
            if (s == XF_EINVAL) s = xf_error_prefix(XF_EFORMAT, "not a devices file: ");
            goto done;
        }
    }
    if (strcmp(fmt, DEVICES_FORMAT) != 0) {
        s = xf_errorf(XF_EFORMAT, "%s: field 'format' is '%s', not '%s': this is not an xfprof devices file", file, fmt, DEVICES_FORMAT);
        goto done;
    }
    if ((s = json_get_int(root, "version", file, INT64_MIN / 2, INT64_MAX / 2, &version)) != XF_OK) goto done;
    if (version > DEVICES_VERSION) {
        s = xf_errorf(XF_EFORMAT, "%s: devices file version %lld is newer than this xfprof reads (%d); upgrade xfprof", file,
                      (long long)version, DEVICES_VERSION);
        goto done;
    }
    if (version < 1) {
        s = xf_errorf(XF_EFORMAT, "%s: field 'version' = %lld is not a valid devices file version (1..%d)", file, (long long)version,
                      DEVICES_VERSION);
        goto done;
    }
    arr = cJSON_GetObjectItemCaseSensitive(root, "devices");
    if (!arr || cJSON_IsNull(arr)) {
        s = xf_errorf(XF_EINVAL, "%s: missing field 'devices'", file);
        goto done;
    }
    if (!cJSON_IsArray(arr)) {
        s = xf_errorf(XF_EINVAL, "%s: field 'devices' must be an array", file);
        goto done;
    }
    int count = cJSON_GetArraySize(arr);
    if (count <= 0) {
        s = xf_errorf(XF_EINVAL, "%s: field 'devices' is empty; give at least one device", file);
        goto done;
    }
    if (count > DEVICES_MAX_COUNT) {
        s = xf_errorf(XF_EINVAL, "%s: field 'devices' holds %d devices (at most %d)", file, count, DEVICES_MAX_COUNT);
        goto done;
    }
    items = calloc((size_t)count, sizeof *items);
    if (!items) {
        s = xf_errorf(XF_ENOMEM, "%s: out of memory for %d devices", file, count);
        goto done;
    }
    for (const cJSON *it = arr->child; it; it = it->next, n++) {
        char ctx[192];
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(it, "name");
        if (cJSON_IsString(nm) && nm->valuestring)
            snprintf(ctx, sizeof ctx, "%s: devices[%d] (%.64s)", file, n, nm->valuestring);
        else
            snprintf(ctx, sizeof ctx, "%s: devices[%d]", file, n);
        if ((s = parse_device(it, ctx, &items[n])) != XF_OK) goto done;
        for (int j = 0; j < n; j++) {
            if (strcasecmp(items[j].name, items[n].name) == 0) {
                s = xf_errorf(XF_EINVAL, "%s: device name '%s' appears twice (devices[%d] and devices[%d])", file, items[n].name, j, n);
                goto done;
            }
        }
    }
    out->items = items;
    out->n = n;
    items = NULL;
    s = XF_OK;
done:
    free(items);
    cJSON_Delete(root);
    return s;
}

xf_status device_list_load(const char *path, device_list *out) {
    out->n = 0;
    out->items = NULL;
    if (!path || !*path) return xf_errorf(XF_EINVAL, "no devices file path given");
    struct stat st;
    if (stat(path, &st) != 0 && errno == ENOENT) return xf_errorf(XF_EINVAL, "%s: no such devices file", path);
    char *text = NULL;
    size_t len = 0;
    xf_status s = file_read_all(path, DEVICES_MAX_FILE, &text, &len);
    if (s != XF_OK) return s;
    if (strlen(text) != len) {
        free(text);
        return xf_errorf(XF_EPARSE, "%s: the file holds a NUL byte; it is not a JSON text", path);
    }
    s = device_list_parse(text, path, out);
    free(text);
    return s;
}

int device_link_to_json(cJSON *o, const char *key, const device_link *l) {
    if (!l || !(l->bandwidth_Bps > 0)) return 1; /* none: nothing written */
    cJSON *j = cJSON_AddObjectToObject(o, key);
    return j && cJSON_AddStringToObject(j, "name", l->name) && json_add_number(j, "bandwidth_Bps", l->bandwidth_Bps) &&
           json_add_number(j, "latency_s", l->latency_s) && cJSON_AddStringToObject(j, "source", l->source);
}

xf_status device_link_from_json(const cJSON *o, const char *key, const char *ctx, device_link *l) {
    memset(l, 0, sizeof *l);
    return parse_link(o, key, ctx, l);
}

char *device_spec_to_json(const device_spec *d) {
    if (!d) return NULL;
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    int ok = cJSON_AddStringToObject(o, "name", d->name) && cJSON_AddStringToObject(o, "description", d->description) &&
             cJSON_AddStringToObject(o, "kind", d->kind) && json_add_number(o, "memory_bytes", d->memory_bytes) &&
             json_add_number(o, "bandwidth_Bps", d->bandwidth_Bps);
    if (ok && d->cache_bytes > 0) ok = json_add_number(o, "cache_bytes", d->cache_bytes);
    if (ok && d->cache_bandwidth_Bps > 0) ok = json_add_number(o, "cache_bandwidth_Bps", d->cache_bandwidth_Bps);
    cJSON *pk = ok ? cJSON_AddObjectToObject(o, "peak_flops") : NULL;
    ok = pk != NULL;
    for (int c = 0; ok && c < XF_COMPUTE_COUNT; c++) ok = json_add_number(pk, k_compute_names[c], d->peak_flops[c]);
    if (ok) ok = cJSON_AddBoolToObject(o, "measured", d->measured ? 1 : 0) != NULL;
    if (ok) ok = cJSON_AddStringToObject(o, "source", d->source) != NULL;
    if (ok) ok = device_link_to_json(o, "link", &d->link) && device_link_to_json(o, "node_link", &d->node_link);
    if (ok && d->gpus_per_node > 0) ok = json_add_number(o, "gpus_per_node", d->gpus_per_node);
    char *text = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return text;
}

static int has_devices_file(const char *dir) {
    char p[PATH_MAX];
    int n = snprintf(p, sizeof p, "%s/devices.json", dir);
    if (n < 0 || (size_t)n >= sizeof p) return 0;
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

xf_status device_data_dir(char *buf, size_t len) {
    char tried[3][PATH_MAX];
    int nt = 0;
    const char *env = getenv("XFPROF_DATA_DIR");
    if (env && *env) {
        snprintf(tried[nt++], PATH_MAX, "%s (from $XFPROF_DATA_DIR)", env);
        if (has_devices_file(env)) {
            if (strlen(env) >= len) return xf_errorf(XF_EOVERFLOW, "$XFPROF_DATA_DIR is too long (%zu characters)", strlen(env));
            memcpy(buf, env, strlen(env) + 1);
            return XF_OK;
        }
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            char cand[PATH_MAX];
            const char *rel[2] = {"/data", "/../share/xfprof"};
            for (int i = 0; i < 2; i++) {
                int w = snprintf(cand, sizeof cand, "%s%s", exe, rel[i]);
                if (w < 0 || (size_t)w >= sizeof cand) continue;
                snprintf(tried[nt++], PATH_MAX, "%s", cand);
                if (has_devices_file(cand)) {
                    if ((size_t)w >= len) return xf_errorf(XF_EOVERFLOW, "data folder path is too long (%d characters)", w);
                    memcpy(buf, cand, (size_t)w + 1);
                    return XF_OK;
                }
            }
        }
    }
    char list[3 * PATH_MAX + 16] = "";
    size_t used = 0;
    for (int i = 0; i < nt; i++) {
        int w = snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", tried[i]);
        if (w < 0 || (size_t)w >= sizeof list - used) break;
        used += (size_t)w;
    }
    return xf_errorf(XF_EIO, "no devices.json found in xfprof's data folder (tried: %s); set XFPROF_DATA_DIR to the folder holding devices.json, or pass --device-file",
                     nt ? list : "nothing");
}

xf_status device_list_builtin(device_list *out) {
    out->n = 0;
    out->items = NULL;
    char dir[PATH_MAX], path[PATH_MAX + 16];
    xf_status s = device_data_dir(dir, sizeof dir);
    if (s != XF_OK) return s;
    snprintf(path, sizeof path, "%s/devices.json", dir);
    return device_list_load(path, out);
}

int device_list_find(const device_list *l, const char *name) {
    if (!l || !name) return -1;
    for (int i = 0; i < l->n; i++)
        if (strcasecmp(l->items[i].name, name) == 0) return i;
    return -1;
}

xf_status device_lookup(const char *name, const char *device_file, device_spec *out) {
    device_list l = {0, NULL};
    xf_status s;
    if (device_file) {
        s = device_list_load(device_file, &l);
    } else {
        if (!name || !*name) return xf_errorf(XF_EINVAL, "no device given: name one of the built-in devices (see `xfprof devices`) or pass --device-file");
        s = device_list_builtin(&l);
    }
    if (s != XF_OK) return s;
    int idx = (name && *name) ? device_list_find(&l, name) : 0;
    if (idx < 0) {
        char list[1024] = "";
        size_t used = 0;
        for (int i = 0; i < l.n; i++) {
            int w = snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", l.items[i].name);
            if (w < 0 || (size_t)w >= sizeof list - used) break;
            used += (size_t)w;
        }
        s = xf_errorf(XF_EINVAL, "unknown device '%s'%s%s; known devices: %s", name, device_file ? " in " : "", device_file ? device_file : "",
                      list);
    } else {
        *out = l.items[idx];
        s = XF_OK;
    }
    device_list_free(&l);
    return s;
}
