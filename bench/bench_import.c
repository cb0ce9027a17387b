/* bench_import: the torch.profiler importer on a big trace. Makes a trace of about SIZE MB
 * (default 500) in /tmp by repeating a real trace's events (tests/data/torch/, each repeat
 * shifted in time and in External id, so steps follow one another), then, side by side in this
 * run: yajl parsing the file with no callbacks (the floor), and xfprof's import of it, each in
 * a child process whose peak RSS the kernel reports. Prints MB/s of both, their ratio, and the
 * import's peak memory against the targets (>= 50 MB/s, <= 1 GiB). The file is deleted after.
 *
 * usage: bench_import [SIZE_MB] [TRACE.json or .json.gz]   (XF_SOURCE_DIR for the default trace) */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <yajl/yajl_parse.h>

#include "importers/importer.h"
#include "bench_util.h"

static double now(void) { return bench_now_s(); }

static char *read_all(const char *path, size_t *len) {
    char cmd[4200];
    int gz = strlen(path) > 3 && strcmp(path + strlen(path) - 3, ".gz") == 0;
    snprintf(cmd, sizeof cmd, gz ? "gzip -dc '%s'" : "cat '%s'", path);
    FILE *f = popen(cmd, "r");
    if (!f) return NULL;
    size_t cap = 1 << 20, n = 0;
    char *b = malloc(cap);
    size_t r;
    while (b && (r = fread(b + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (cap - n < 2) b = realloc(b, cap *= 2);
    }
    if (pclose(f) != 0 || !b) {
        free(b);
        return NULL;
    }
    b[n] = 0;
    *len = n;
    return b;
}

/* Writes ~target bytes: the header fields of the trace, then its events repeated. */
static int make_trace(const char *src, const char *out, double target, int *reps) {
    size_t len;
    char *text = read_all(src, &len);
    if (!text) return fprintf(stderr, "bench_import: cannot read %s\n", src), -1;
    cJSON *root = cJSON_Parse(text);
    free(text);
    cJSON *evs = root ? cJSON_GetObjectItem(root, "traceEvents") : NULL;
    if (!cJSON_IsArray(evs)) return fprintf(stderr, "bench_import: %s is not a torch trace\n", src), -1;
    double lo = 1e300, hi = -1e300, max_ext = 0;
    cJSON *e;
    cJSON_ArrayForEach(e, evs) {
        cJSON *ts = cJSON_GetObjectItem(e, "ts"), *dur = cJSON_GetObjectItem(e, "dur");
        cJSON *args = cJSON_GetObjectItem(e, "args"), *ext = args ? cJSON_GetObjectItem(args, "External id") : NULL;
        if (cJSON_IsNumber(ts) && ts->valuedouble < lo) lo = ts->valuedouble;
        if (cJSON_IsNumber(ts) && cJSON_IsNumber(dur) && ts->valuedouble + dur->valuedouble > hi)
            hi = ts->valuedouble + dur->valuedouble;
        if (cJSON_IsNumber(ext) && ext->valuedouble > max_ext) max_ext = ext->valuedouble;
    }
    double span = hi - lo + 1.0;
    FILE *f = fopen(out, "w");
    if (!f) return -1;
    fprintf(f, "{\"schemaVersion\":1,\"record_shapes\":1,\"with_stack\":1,\"traceEvents\":[");
    double written = 0;
    int k = 0, first = 1;
    while (written < target) {
        cJSON_ArrayForEach(e, evs) {
            cJSON *ph = cJSON_GetObjectItem(e, "ph");
            if (!cJSON_IsString(ph) || strcmp(ph->valuestring, "X") != 0) continue;
            cJSON *c = cJSON_Duplicate(e, 1);
            cJSON *ts = cJSON_GetObjectItem(c, "ts");
            if (cJSON_IsNumber(ts)) cJSON_SetNumberValue(ts, ts->valuedouble + k * span);
            cJSON *args = cJSON_GetObjectItem(c, "args");
            cJSON *ext = args ? cJSON_GetObjectItem(args, "External id") : NULL;
            if (cJSON_IsNumber(ext)) cJSON_SetNumberValue(ext, ext->valuedouble + k * (max_ext + 1));
            char *s = cJSON_PrintUnformatted(c);
            if (!first) fputc(',', f);
            first = 0;
            written += (double)fputs(s, f) >= 0 ? strlen(s) + 1 : 0;
            free(s);
            cJSON_Delete(c);
        }
        k++;
    }
    fprintf(f, "]}\n");
    cJSON_Delete(root);
    *reps = k;
    return fclose(f);
}

static int bare_parse(const char *path) {
    static const yajl_callbacks none = {0};
    yajl_handle h = yajl_alloc(&none, NULL, NULL);
    FILE *f = fopen(path, "rb");
    static unsigned char buf[1 << 16];
    size_t n;
    int ok = f && h;
    while (ok && (n = fread(buf, 1, sizeof buf, f)) > 0) ok = yajl_parse(h, buf, n) == yajl_status_ok;
    ok = ok && yajl_complete_parse(h) == yajl_status_ok;
    if (f) fclose(f);
    if (h) yajl_free(h);
    return ok ? 0 : 1;
}

static int do_import(const char *path) {
    record r;
    import_stats st;
    import_options o = {0};
    xf_status s = import_torch_trace_file(path, &o, &r, &st);
    if (s) fprintf(stderr, "bench_import: import failed: %s\n", xf_error_msg());
    else
        fprintf(stderr, "  imported: %lld events, %lld cpu ops, %lld prefill + %lld decode steps, %lld record ops\n",
                (long long)st.n_events, (long long)st.n_ops, (long long)st.n_steps[0], (long long)st.n_steps[1],
                (long long)r.points[0].n_ops);
    record_free(&r);
    return s ? 1 : 0;
}

/* Runs fn(path) in a child; *secs its wall time, *rss its peak resident set (bytes). */
static int in_child(int (*fn)(const char *), const char *path, double *secs, double *rss) {
    double t0 = now();
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) _exit(fn(path));
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) != pid) return -1;
    *secs = now() - t0;
    *rss = (double)ru.ru_maxrss * 1024.0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int main(int argc, char **argv) {
    double mb = argc > 1 ? atof(argv[1]) : 500;
    char def[4096];
    const char *srcdir = getenv("XF_SOURCE_DIR");
    snprintf(def, sizeof def, "%s/tests/data/torch/llama-small-bf16.json.gz", srcdir ? srcdir : ".");
    const char *src = argc > 2 ? argv[2] : def;
    char path[] = "/tmp/xf_bench_importXXXXXX";
    int fd = mkstemp(path);
    if (fd < 0 || mb <= 0) return 2;
    close(fd);
    int reps = 0;
    printf("bench_import: making a %.0f MB trace from %s in %s\n", mb, src, path);
    if (make_trace(src, path, mb * 1e6, &reps)) {
        unlink(path);
        return 1;
    }
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    double bytes = (double)ftell(f);
    fclose(f);
    printf("  %.1f MB: the trace's events repeated %d times\n", bytes / 1e6, reps);
    double tb, rb, ti, ri;
    int e1 = in_child(bare_parse, path, &tb, &rb);
    int e2 = in_child(do_import, path, &ti, &ri);
    unlink(path);
    if (e1 || e2) return fprintf(stderr, "bench_import: a child failed (%d, %d)\n", e1, e2), 1;
    double mbs_b = bytes / 1e6 / tb, mbs_i = bytes / 1e6 / ti;
    printf("  yajl alone (no callbacks): %.2f s, %.1f MB/s, peak RSS %.1f MiB\n", tb, mbs_b, rb / (1 << 20));
    printf("  xfprof import:             %.2f s, %.1f MB/s, peak RSS %.1f MiB\n", ti, mbs_i, ri / (1 << 20));
    printf("  import / yajl alone: %.2fx the time\n", ti / tb);
    printf("  targets: >= 50 MB/s: %s (%.1f); peak <= 1 GiB: %s (%.1f MiB)\n", mbs_i >= 50 ? "met" : "NOT met", mbs_i,
           ri <= (double)(1 << 30) ? "met" : "NOT met", ri / (1 << 20));
    return 0;
}
