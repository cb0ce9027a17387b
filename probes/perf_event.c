#include "perf_event.h"

#include <dirent.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "probes/range_table.h"
#include "probes/timer.h"

#define PERF_MAX_IMC 16 /* IMC boxes summed per counter */

struct perf_probe {
    int fd[PERF_COUNTER_COUNT][PERF_MAX_IMC]; /* -1 when not open */
    int n_fd[PERF_COUNTER_COUNT];
    int supported[PERF_COUNTER_COUNT];
    char reason[PERF_COUNTER_COUNT][160];
    double scale[PERF_COUNTER_COUNT]; /* counts -> the record's unit (bytes for IMC) */
    int n_open;
    /* range stack: counter values at begin */
    double stack_v[TIMER_MAX_DEPTH][PERF_COUNTER_COUNT];
    int depth;
    range_table rt;    /* one value per counter */
};

const char *perf_counter_name(perf_counter_id c) {
    static const char *names[PERF_COUNTER_COUNT] = {"cycles", "instructions", "llc_misses", "imc_read_bytes",
                                                    "imc_write_bytes"};
    return ((int)c >= 0 && c < PERF_COUNTER_COUNT) ? names[c] : "?";
}

static int open_event(uint32_t type, uint64_t config, int system_wide, int cpu, int *err) {
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = type;
    a.config = config;
    a.disabled = 0;
    if (!system_wide) {
        a.inherit = 1; /* threads created later (the OpenMP pool) count too */
        a.exclude_kernel = 1;
        a.exclude_hv = 1;
    }
    int fd = (int)syscall(SYS_perf_event_open, &a, system_wide ? -1 : 0, system_wide ? cpu : -1, -1, 0);
    *err = fd < 0 ? errno : 0;
    return fd;
}

static void set_reason(perf_probe *p, perf_counter_id c, int err) {
    const char *why;
    char buf[64];
    if (err == ENOENT || err == EOPNOTSUPP || err == ENODEV)
        why = "the CPU or hypervisor does not expose this counter";
    else if (err == EACCES || err == EPERM) {
        FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "r");
        int lvl = 99;
        if (f) {
            if (fscanf(f, "%d", &lvl) != 1) lvl = 99;
            fclose(f);
        }
        snprintf(buf, sizeof buf, "not permitted (perf_event_paranoid = %d)", lvl);
        why = buf;
    } else
        why = strerror(err);
    snprintf(p->reason[c], sizeof p->reason[c], "%s: %s", perf_counter_name(c), why);
}

/* Reads a small sysfs file into buf; 0 on success. */
static int read_small(const char *path, char *buf, size_t len) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[n] = '\0';
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' ')) buf[--n] = '\0';
    return 0;
}

/* Builds a config from an event description "event=0x04,umask=0x03" and the PMU's format files
 * ("config:0-7"). 0 on success. */
static int imc_config(const char *pmu_dir, const char *desc, uint64_t *config) {
    *config = 0;
    char copy[256];
    snprintf(copy, sizeof copy, "%s", desc);
    char *save = NULL;
    for (char *term = strtok_r(copy, ",", &save); term; term = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(term, '=');
        unsigned long long val = 1;
        if (eq) {
            *eq = '\0';
            val = strtoull(eq + 1, NULL, 0);
        }
        char path[1024], fmt[64];
        if (snprintf(path, sizeof path, "%s/format/%s", pmu_dir, term) >= (int)sizeof path) return -1;
        if (read_small(path, fmt, sizeof fmt) != 0) return -1;
        int lo, hi;
        if (sscanf(fmt, "config:%d-%d", &lo, &hi) != 2) {
            if (sscanf(fmt, "config:%d", &lo) != 1) return -1;
            hi = lo;
        }
        if (lo < 0 || hi > 63 || hi < lo) return -1;
        int width = hi - lo + 1;
        uint64_t mask = width >= 64 ? ~0ULL : ((1ULL << width) - 1);
        *config |= ((uint64_t)val & mask) << lo;
    }
    return 0;
}

static void open_imc(perf_probe *p) {
    const char *base = "/sys/bus/event_source/devices";
    DIR *d = opendir(base);
    int last_err = ENOENT;
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (strncmp(e->d_name, "uncore_imc", 10) != 0) continue;
            char dir[512], path[1024], buf[256];
            if (snprintf(dir, sizeof dir, "%s/%s", base, e->d_name) >= (int)sizeof dir) continue;
            if (snprintf(path, sizeof path, "%s/type", dir) >= (int)sizeof path) continue;
            if (read_small(path, buf, sizeof buf) != 0) continue;
            uint32_t type = (uint32_t)strtoul(buf, NULL, 10);
            static const struct {
                perf_counter_id id;
                const char *ev;
            } evs[2] = {{PERF_IMC_READ_BYTES, "cas_count_read"}, {PERF_IMC_WRITE_BYTES, "cas_count_write"}};
            for (int i = 0; i < 2; i++) {
                perf_counter_id c = evs[i].id;
                if (p->n_fd[c] >= PERF_MAX_IMC) continue;
                if (snprintf(path, sizeof path, "%s/events/%s", dir, evs[i].ev) >= (int)sizeof path) continue;
                uint64_t config;
                if (read_small(path, buf, sizeof buf) != 0 || imc_config(dir, buf, &config) != 0) continue;
                int err;
                int fd = open_event(type, config, 1, 0, &err);
                if (fd < 0) {
                    last_err = err;
                    continue;
                }
                p->fd[c][p->n_fd[c]++] = fd;
            }
        }
        closedir(d);
    }
    for (int c = PERF_IMC_READ_BYTES; c <= PERF_IMC_WRITE_BYTES; c++) {
        if (p->n_fd[c] > 0) {
            p->supported[c] = 1;
            p->scale[c] = 64.0; /* one CAS moves one 64-byte line */
        } else if (last_err == ENOENT)
            snprintf(p->reason[c], sizeof p->reason[c], "%s: no uncore_imc PMU is exposed by this kernel",
                     perf_counter_name((perf_counter_id)c));
        else
            set_reason(p, (perf_counter_id)c, last_err);
    }
}

xf_status perf_probe_init(int64_t n_layers, int max_reps, int flags, perf_probe **out) {
    *out = NULL;
    if (n_layers < 0 || n_layers > 100000) return xf_errorf(XF_EINVAL, "perf probe: n_layers %lld out of range (0 to 100000)", (long long)n_layers);
    if (max_reps < 1 || max_reps > 100000) return xf_errorf(XF_EINVAL, "perf probe: max_reps %d out of range (1 to 100000)", max_reps);
    perf_probe *p = calloc(1, sizeof *p);
    if (!p) return xf_errorf(XF_ENOMEM, "perf probe: out of memory");
    for (int c = 0; c < PERF_COUNTER_COUNT; c++) {
        p->scale[c] = 1.0;
        for (int i = 0; i < PERF_MAX_IMC; i++) p->fd[c][i] = -1;
    }
    xf_status st = range_table_init(&p->rt, n_layers, PERF_COUNTER_COUNT, max_reps);
    if (st) {
        perf_probe_free(p);
        return xf_error_prefix(st, "perf: ");
    }
    if (flags & PERF_PROBE_FORCE_UNSUPPORTED) {
        for (int c = 0; c < PERF_COUNTER_COUNT; c++)
            snprintf(p->reason[c], sizeof p->reason[c], "%s: disabled by the caller", perf_counter_name((perf_counter_id)c));
    } else {
        static const uint64_t hw[3] = {PERF_COUNT_HW_CPU_CYCLES, PERF_COUNT_HW_INSTRUCTIONS, PERF_COUNT_HW_CACHE_MISSES};
        for (int c = 0; c < 3; c++) {
            int err;
            int fd = open_event(PERF_TYPE_HARDWARE, hw[c], 0, -1, &err);
            if (fd >= 0) {
                p->fd[c][0] = fd;
                p->n_fd[c] = 1;
                p->supported[c] = 1;
            } else
                set_reason(p, (perf_counter_id)c, err);
        }
        open_imc(p);
    }
    for (int c = 0; c < PERF_COUNTER_COUNT; c++) p->n_open += p->supported[c];
    *out = p;
    return XF_OK;
}

void perf_probe_free(perf_probe *p) {
    if (!p) return;
    for (int c = 0; c < PERF_COUNTER_COUNT; c++)
        for (int i = 0; i < p->n_fd[c]; i++)
            if (p->fd[c][i] >= 0) close(p->fd[c][i]);
    range_table_free(&p->rt);
    free(p);
}

static inline double read_counter(const perf_probe *p, int c) {
    double total = 0;
    for (int i = 0; i < p->n_fd[c]; i++) {
        uint64_t v = 0;
        if (read(p->fd[c][i], &v, sizeof v) == (ssize_t)sizeof v) total += (double)v;
    }
    return total * p->scale[c];
}

xf_status perf_probe_read_now(const perf_probe *p, perf_counter_id c, double *value) {
    if (!p || (int)c < 0 || c >= PERF_COUNTER_COUNT || !p->supported[c])
        return xf_errorf(XF_EUNSUPPORTED, "%s", p && (int)c >= 0 && c < PERF_COUNTER_COUNT ? p->reason[c] : "perf counter unsupported");
    *value = read_counter(p, c);
    return XF_OK;
}

static void perf_begin(void *ctx, const probe_range *r) {
    (void)r;
    perf_probe *p = ctx;
    if (p->depth < TIMER_MAX_DEPTH)
        for (int c = 0; c < PERF_COUNTER_COUNT; c++)
            if (p->supported[c]) p->stack_v[p->depth][c] = read_counter(p, c);
    p->depth++;
}

static void perf_end(void *ctx, const probe_range *r) {
    perf_probe *p = ctx;
    double now[PERF_COUNTER_COUNT] = {0};
    for (int c = 0; c < PERF_COUNTER_COUNT; c++)
        if (p->supported[c]) now[c] = read_counter(p, c);
    if (p->depth <= 0) return;
    p->depth--;
    if (p->depth >= TIMER_MAX_DEPTH) return;
    double d[PERF_COUNTER_COUNT] = {0};
    for (int c = 0; c < PERF_COUNTER_COUNT; c++)
        if (p->supported[c]) d[c] = now[c] - p->stack_v[p->depth][c];
    range_table_add(&p->rt, range_table_key(&p->rt, r->phase, r->layer, r->kind), r->step, d);
}

static void perf_free_ctx(void *ctx) { perf_probe_free(ctx); }

static xf_status perf_point_begin(void *ctx, const struct record_point *pt) {
    (void)pt;
    perf_probe_clear(ctx);
    return XF_OK;
}

static void perf_rep_begin(void *ctx) { perf_probe_rep_begin(ctx); }

static xf_status perf_rep_end(void *ctx, int rep) { return rep < 0 ? XF_OK : perf_probe_rep_end(ctx); }

static xf_status perf_fill(void *ctx, int64_t i, int64_t n_decode_steps, record_op *op) {
    (void)i;
    (void)n_decode_steps;
    perf_probe_fill(ctx, op->cost.phase, op->cost.layer, op->cost.kind, op);
    return XF_OK;
}

probe perf_probe_as_probe(perf_probe *p) {
    probe pr = {"perf", p, perf_begin, perf_end, perf_free_ctx, perf_point_begin, perf_rep_begin, perf_rep_end, NULL, perf_fill};
    return pr;
}

int perf_probe_supported(const perf_probe *p, perf_counter_id c) {
    return p && (int)c >= 0 && c < PERF_COUNTER_COUNT && p->supported[c];
}

const char *perf_probe_reason(const perf_probe *p, perf_counter_id c) {
    if (!p || (int)c < 0 || c >= PERF_COUNTER_COUNT) return "no perf probe";
    return p->reason[c];
}

int perf_probe_n_supported(const perf_probe *p) { return p ? p->n_open : 0; }

void perf_probe_rep_begin(perf_probe *p) {
    range_table_rep_begin(&p->rt);
    p->depth = 0;
}

xf_status perf_probe_rep_end(perf_probe *p) {
    xf_status s = range_table_rep_end(&p->rt, 0);
    return s ? xf_error_prefix(s, "perf: ") : XF_OK;
}

void perf_probe_clear(perf_probe *p) { range_table_clear(&p->rt); }

void perf_probe_fill(const perf_probe *p, xf_phase phase, int layer, op_kind kind, record_op *op) {
    op->n_counters = 0;
    int64_t k = p ? range_table_key(&p->rt, phase, layer, kind) : -1;
    for (int c = 0; c < PERF_COUNTER_COUNT && c < RECORD_MAX_COUNTERS; c++) {
        record_counter *rc = &op->counters[op->n_counters++];
        memset(rc, 0, sizeof *rc);
        snprintf(rc->name, sizeof rc->name, "%s", perf_counter_name((perf_counter_id)c));
        const double *smp;
        int n = p && p->supported[c] ? range_table_samples(&p->rt, k, c, &smp) : 0;
        if (n > 0) {
            double med, iqr;
            timer_stats(smp, n, &med, &iqr);
            rc->supported = 1;
            rc->value = med;
        }
    }
    if (p && k >= 0 && p->rt.n_samples[k] > 0 && p->supported[PERF_IMC_READ_BYTES] && p->supported[PERF_IMC_WRITE_BYTES]) {
        op->measured_bytes = op->counters[PERF_IMC_READ_BYTES].value + op->counters[PERF_IMC_WRITE_BYTES].value;
        op->bytes_from_counters = 1;
    }
}
