#include "serving_sim.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "core/fileio.h"
#include "core/units.h"
#include "core/json_util.h"

/* ---- random numbers ---- */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void sim_rng_seed(sim_rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t sim_rng_next(sim_rng *r) {
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

double sim_rng_uniform(sim_rng *r) { return (double)(sim_rng_next(r) >> 11) * 0x1.0p-53; }

double sim_rng_normal(sim_rng *r) {
    double u1 = 1.0 - sim_rng_uniform(r); /* (0, 1]: log is finite */
    double u2 = sim_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* ---- distributions ---- */

static xf_status parse_num(const char *flag, const char *spec, const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !isfinite(v) || (*end && *end != ':'))
        return xf_errorf(XF_EINVAL, "%s '%.64s': '%.32s' is not a number", flag, spec, s);
    *out = v;
    return XF_OK;
}

xf_status sim_dist_parse(const char *flag, const char *s, sim_dist *out) {
    static const char *forms = "fixed:N, uniform:LO:HI, normal:MEAN:STD or lognormal:MU:SIGMA";
    if (!s || !*s) return xf_errorf(XF_EINVAL, "%s needs a distribution: %s", flag, forms);
    sim_dist d = {SIM_DIST_FIXED, 0, 0};
    int nargs;
    const char *rest;
    if (strncasecmp(s, "fixed:", 6) == 0) d.kind = SIM_DIST_FIXED, nargs = 1, rest = s + 6;
    else if (strncasecmp(s, "uniform:", 8) == 0) d.kind = SIM_DIST_UNIFORM, nargs = 2, rest = s + 8;
    else if (strncasecmp(s, "normal:", 7) == 0) d.kind = SIM_DIST_NORMAL, nargs = 2, rest = s + 7;
    else if (strncasecmp(s, "lognormal:", 10) == 0) d.kind = SIM_DIST_LOGNORMAL, nargs = 2, rest = s + 10;
    else return xf_errorf(XF_EINVAL, "%s '%.64s': unknown distribution; use %s", flag, s, forms);
    double v[2] = {0, 0};
    for (int i = 0; i < nargs; i++) {
        xf_status st = parse_num(flag, s, rest, &v[i]);
        if (st != XF_OK) return st;
        const char *colon = strchr(rest, ':');
        if (i + 1 < nargs) {
            if (!colon) return xf_errorf(XF_EINVAL, "%s '%.64s': needs %d numbers; use %s", flag, s, nargs, forms);
            rest = colon + 1;
        } else if (colon) {
            return xf_errorf(XF_EINVAL, "%s '%.64s': too many numbers; use %s", flag, s, forms);
        }
    }
    d.a = v[0];
    d.b = v[1];
    switch (d.kind) {
    case SIM_DIST_FIXED:
        if (d.a < 1 || d.a > 1e7 || d.a != floor(d.a)) return xf_errorf(XF_EINVAL, "%s '%.64s': N must be a whole number from 1 to 10^7", flag, s);
        break;
    case SIM_DIST_UNIFORM:
        if (d.a < 1 || d.b > 1e7 || d.a > d.b || d.a != floor(d.a) || d.b != floor(d.b))
            return xf_errorf(XF_EINVAL, "%s '%.64s': need whole numbers 1 <= LO <= HI <= 10^7", flag, s);
        break;
    case SIM_DIST_NORMAL:
        if (d.a <= 0 || d.a > 1e7 || d.b < 0 || d.b > 1e7) return xf_errorf(XF_EINVAL, "%s '%.64s': need 0 < MEAN <= 10^7 and 0 <= STD <= 10^7", flag, s);
        break;
    case SIM_DIST_LOGNORMAL:
        if (d.a < -10 || d.a > 16 || d.b < 0 || d.b > 5)
            return xf_errorf(XF_EINVAL, "%s '%.64s': need -10 <= MU <= 16 and 0 <= SIGMA <= 5 (MU, SIGMA of the log length; median = e^MU)", flag, s);
        break;
    }
    *out = d;
    return XF_OK;
}

void sim_dist_format(const sim_dist *d, char *buf, size_t len) {
    switch (d->kind) {
    case SIM_DIST_FIXED: snprintf(buf, len, "fixed:%.0f", d->a); break;
    case SIM_DIST_UNIFORM: snprintf(buf, len, "uniform:%.0f:%.0f", d->a, d->b); break;
    case SIM_DIST_NORMAL: snprintf(buf, len, "normal:%g:%g", d->a, d->b); break;
    case SIM_DIST_LOGNORMAL: snprintf(buf, len, "lognormal:%g:%g", d->a, d->b); break;
    default: snprintf(buf, len, "?"); break;
    }
}

int64_t sim_dist_sample(const sim_dist *d, sim_rng *r) {
    double v;
    switch (d->kind) {
    case SIM_DIST_FIXED: v = d->a; break;
    case SIM_DIST_UNIFORM: v = d->a + (double)(sim_rng_next(r) % (uint64_t)(d->b - d->a + 1)); break;
    case SIM_DIST_NORMAL: v = d->a + d->b * sim_rng_normal(r); break;
    case SIM_DIST_LOGNORMAL: v = exp(d->a + d->b * sim_rng_normal(r)); break;
    default: v = 1; break;
    }
    v = floor(v + 0.5);
    if (!(v >= 1)) v = 1;
    if (v > 1e9) v = 1e9;
    return (int64_t)v;
}

/* ---- traces ---- */

void sim_trace_free(sim_trace *t) {
    if (!t) return;
    free(t->req);
    t->req = NULL;
    t->n = 0;
}

static int cmp_arrival(const void *a, const void *b) {
    const sim_request *x = a, *y = b;
    if (x->arrival_s != y->arrival_s) return x->arrival_s < y->arrival_s ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id); /* stable: by line / index */
}

xf_status sim_trace_generate(int64_t n, double rate, const sim_dist *prompt, const sim_dist *output, uint64_t seed,
                             int64_t max_len, sim_trace *out) {
    out->n = 0;
    out->req = NULL;
    if (n < 1 || n > 100000000) return xf_errorf(XF_EINVAL, "the number of requests must be 1 to 10^8 (got %lld)", (long long)n);
    if (!(rate > 0)) return xf_errorf(XF_EINVAL, "the arrival rate must be positive (got %g requests/s); use inf for all requests at time 0", rate);
    if (max_len < 2) return xf_errorf(XF_EINVAL, "the maximum request length must be at least 2 (got %lld)", (long long)max_len);
    sim_request *req = malloc((size_t)n * sizeof *req);
    if (!req) return xf_errorf(XF_ENOMEM, "out of memory for %lld requests", (long long)n);
    /* Three streams so that changing one distribution leaves the others' draws unchanged. */
    sim_rng ra, rp, ro;
    sim_rng_seed(&ra, seed);
    sim_rng_seed(&rp, seed ^ 0x5052304D50545321ull);
    sim_rng_seed(&ro, seed ^ 0x4F55545055545321ull);
    double t = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isfinite(rate)) t += -log(1.0 - sim_rng_uniform(&ra)) / rate;
        int64_t p = sim_dist_sample(prompt, &rp), o = sim_dist_sample(output, &ro);
        if (p > max_len - 1) p = max_len - 1;
        if (p + o > max_len) o = max_len - p;
        req[i] = (sim_request){i + 1, t, p, o};
    }
    out->n = n;
    out->req = req;
    return XF_OK;
}

/* Parses a whole number field of a CSV line. */
static int csv_int(const char *s, int64_t *out) {
    while (*s == ' ' || *s == '\t') s++;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno) return 0;
    while (*end == ' ' || *end == '\t' || *end == '\r') end++;
    if (*end) return 0;
    if (!(v >= -9e15 && v <= 9e15) || v != floor(v)) return 0;
    *out = (int64_t)v;
    return 1;
}

static int csv_num(const char *s, double *out) {
    while (*s == ' ' || *s == '\t') s++;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno) return 0;
    while (*end == ' ' || *end == '\t' || *end == '\r') end++;
    if (*end || !isfinite(v)) return 0;
    *out = v;
    return 1;
}

static xf_status check_req(const char *src, int64_t line, double arr, int64_t p, int64_t o, int64_t max_len) {
    if (!(arr >= 0) || arr > 1e9) return xf_errorf(XF_EINVAL, "%s:%lld: arrival %g must be from 0 to 10^9 seconds", src, (long long)line, arr);
    if (p < 1) return xf_errorf(XF_EINVAL, "%s:%lld: prompt %lld must be at least 1 token", src, (long long)line, (long long)p);
    if (o < 1) return xf_errorf(XF_EINVAL, "%s:%lld: output %lld must be at least 1 token", src, (long long)line, (long long)o);
    if (p > max_len || o > max_len || p + o > max_len)
        return xf_errorf(XF_EINVAL, "%s:%lld: prompt %lld + output %lld exceeds the maximum request length %lld (--max-len)", src,
                         (long long)line, (long long)p, (long long)o, (long long)max_len);
    return XF_OK;
}

static xf_status parse_jsonl_line(const char *src, int64_t line, char *text, int64_t max_len, sim_request *r) {
    cJSON *j = NULL;
    if (json_parse_len(text, strlen(text), src, &j) == XF_ENOMEM) return XF_ENOMEM; /* not the line's fault */
    if (!j) return xf_errorf(XF_EPARSE, "%s:%lld: not a JSON object", src, (long long)line);
    xf_status st = XF_OK;
    const char *keys[3] = {"arrival", "prompt", "output"};
    double v[3];
    if (!cJSON_IsObject(j)) st = xf_errorf(XF_EPARSE, "%s:%lld: not a JSON object", src, (long long)line);
    for (int k = 0; k < 3 && st == XF_OK; k++) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, keys[k]);
        if (!f) st = xf_errorf(XF_EINVAL, "%s:%lld: missing field '%s'", src, (long long)line, keys[k]);
        else if (!cJSON_IsNumber(f) || !isfinite(f->valuedouble))
            st = xf_errorf(XF_EINVAL, "%s:%lld: field '%s' must be a number", src, (long long)line, keys[k]);
        else v[k] = f->valuedouble;
    }
    cJSON_Delete(j);
    if (st != XF_OK) return st;
    for (int k = 1; k < 3; k++)
        if (v[k] != floor(v[k]) || fabs(v[k]) > 9e15)
            return xf_errorf(XF_EINVAL, "%s:%lld: field '%s' must be a whole number of tokens", src, (long long)line, keys[k]);
    st = check_req(src, line, v[0], (int64_t)v[1], (int64_t)v[2], max_len);
    if (st != XF_OK) return st;
    *r = (sim_request){line, v[0], (int64_t)v[1], (int64_t)v[2]};
    return XF_OK;
}

static xf_status parse_csv_line(const char *src, int64_t line, char *text, int64_t max_len, sim_request *r) {
    char *f[3];
    int nf = 0;
    char *p = text;
    f[nf++] = p;
    for (; *p; p++) {
        if (*p == ',') {
            *p = 0;
            if (nf == 3) return xf_errorf(XF_EPARSE, "%s:%lld: more than 3 fields; expected arrival_s,prompt,output", src, (long long)line);
            f[nf++] = p + 1;
        }
    }
    if (nf != 3) return xf_errorf(XF_EPARSE, "%s:%lld: %d field(s); expected arrival_s,prompt,output", src, (long long)line, nf);
    double arr;
    int64_t pr, o;
    if (!csv_num(f[0], &arr)) return xf_errorf(XF_EPARSE, "%s:%lld: arrival '%.32s' is not a number", src, (long long)line, f[0]);
    if (!csv_int(f[1], &pr)) return xf_errorf(XF_EPARSE, "%s:%lld: prompt '%.32s' is not a whole number", src, (long long)line, f[1]);
    if (!csv_int(f[2], &o)) return xf_errorf(XF_EPARSE, "%s:%lld: output '%.32s' is not a whole number", src, (long long)line, f[2]);
    xf_status st = check_req(src, line, arr, pr, o, max_len);
    if (st != XF_OK) return st;
    *r = (sim_request){line, arr, pr, o};
    return XF_OK;
}

xf_status sim_trace_parse(const char *text, const char *source, int64_t max_len, sim_trace *out) {
    out->n = 0;
    out->req = NULL;
    const char *src = source ? source : "trace";
    if (!text) return xf_errorf(XF_EINVAL, "%s: no text", src);
    if (max_len < 2) return xf_errorf(XF_EINVAL, "the maximum request length must be at least 2");
    int64_t cap = 0, n = 0, line = 0;
    sim_request *req = NULL;
    int saw_data = 0;
    xf_status st = XF_OK;
    const char *p = text;
    char *buf = NULL;
    size_t buf_cap = 0;
    while (*p && st == XF_OK) {
        line++;
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        if (len + 1 > buf_cap) {
            size_t nc = len + 1 > 256 ? len + 1 : 256;
            char *nb = realloc(buf, nc);
            if (!nb) {
                st = xf_errorf(XF_ENOMEM, "out of memory reading %s", src);
                break;
            }
            buf = nb;
            buf_cap = nc;
        }
        memcpy(buf, p, len);
        buf[len] = 0;
        p = eol ? eol + 1 : p + len;
        char *s = buf;
        while (isspace((unsigned char)*s)) s++;
        size_t sl = strlen(s);
        while (sl > 0 && isspace((unsigned char)s[sl - 1])) s[--sl] = 0;
        if (!*s || *s == '#') continue;
        if (!saw_data && *s != '{' && !isdigit((unsigned char)*s) && *s != '.' && *s != '-' && *s != '+') {
            /* a CSV header: its columns must be the expected ones */
            saw_data = 1;
            char low[128];
            snprintf(low, sizeof low, "%s", s);
            for (char *c = low; *c; c++) *c = (char)tolower((unsigned char)*c);
            if (!strstr(low, "arrival") || !strstr(low, "prompt") || !strstr(low, "output"))
                st = xf_errorf(XF_EPARSE, "%s:%lld: not a request line nor a header naming arrival, prompt, output", src, (long long)line);
            continue;
        }
        saw_data = 1;
        if (n == cap) {
            int64_t nc = cap ? cap * 2 : 1024;
            sim_request *nr = realloc(req, (size_t)nc * sizeof *nr);
            if (!nr) {
                st = xf_errorf(XF_ENOMEM, "out of memory reading %s", src);
                break;
            }
            req = nr;
            cap = nc;
        }
        st = *s == '{' ? parse_jsonl_line(src, line, s, max_len, &req[n]) : parse_csv_line(src, line, s, max_len, &req[n]);
        if (st == XF_OK) n++;
    }
    free(buf);
    if (st == XF_OK && n == 0) st = xf_errorf(XF_EINVAL, "%s: no requests in the trace", src);
    if (st != XF_OK) {
        free(req);
        return st;
    }
    qsort(req, (size_t)n, sizeof *req, cmp_arrival);
    out->n = n;
    out->req = req;
    return XF_OK;
}

xf_status sim_trace_load(const char *path, int64_t max_len, sim_trace *out) {
    char *text = NULL;
    size_t len;
    xf_status st = file_read_all(path, (size_t)1 << 30, &text, &len);
    if (st != XF_OK) return st;
    if (strlen(text) != len) {
        free(text);
        return xf_errorf(XF_EPARSE, "%s: holds a NUL byte; a trace is text (CSV or JSONL)", path);
    }
    st = sim_trace_parse(text, path, max_len, out);
    free(text);
    return st;
}

/* ---- preemption names ---- */

xf_status sim_preempt_parse(const char *s, sim_preempt *out) {
    if (s && strcasecmp(s, "recompute") == 0) *out = SIM_PREEMPT_RECOMPUTE;
    else if (s && strcasecmp(s, "wait") == 0) *out = SIM_PREEMPT_WAIT;
    else return xf_errorf(XF_EINVAL, "unknown preemption mode '%.32s'; use recompute or wait", s ? s : "");
    return XF_OK;
}

const char *sim_preempt_name(sim_preempt p) { return p == SIM_PREEMPT_WAIT ? "wait" : "recompute"; }

/* ---- the simulation ---- */

typedef struct rq {
    int64_t generated; /* tokens emitted */
    int seq[RECORD_KV_MAX_GROUPS]; /* KV sequence in each pool, -1 when not in the pools */
    int step_kind;     /* 0 idle/stalled, 1 prefill this step, 2 decode this step */
    double first_t;    /* time of the first token */
} rq;

/* Decimating time series: each point is the exact time-average of its interval. */
typedef struct series {
    record_kv_sample *pts;
    int64_t n, cap;
    int64_t group;     /* steps per point */
    record_kv_sample cur;
    int64_t cur_steps;
} series;

static void sample_merge(record_kv_sample *a, const record_kv_sample *b) {
    double dt = a->dt_s + b->dt_s;
    double wa = dt > 0 ? a->dt_s / dt : 0.5, wb = dt > 0 ? b->dt_s / dt : 0.5;
    for (int c = 0; c < KV_CAT_COUNT; c++) a->share[c] = a->share[c] * wa + b->share[c] * wb;
    a->batch = a->batch * wa + b->batch * wb;
    a->live = a->live * wa + b->live * wb;
    a->dt_s = dt;
}

static void series_push(series *s, const record_kv_sample *x) {
    if (s->cur_steps == 0) s->cur = *x;
    else sample_merge(&s->cur, x);
    if (++s->cur_steps < s->group) return;
    if (s->n == s->cap) { /* halve: merge neighbours, double the group */
        int64_t k = 0;
        for (int64_t i = 0; i + 1 < s->n; i += 2) {
            record_kv_sample m = s->pts[i];
            sample_merge(&m, &s->pts[i + 1]);
            s->pts[k++] = m;
        }
        if (s->n % 2) s->pts[k++] = s->pts[s->n - 1];
        s->n = k;
        s->group *= 2;
    }
    s->pts[s->n++] = s->cur;
    s->cur_steps = 0;
}

static void series_finish(series *s) {
    if (s->cur_steps > 0 && s->n < s->cap) s->pts[s->n++] = s->cur;
    else if (s->cur_steps > 0 && s->n > 0) sample_merge(&s->pts[s->n - 1], &s->cur);
    s->cur_steps = 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest rank: the smallest value with at least p of the values at or below it. */
static double percentile(const double *sorted, int64_t n, double p) {
    if (n <= 0) return 0;
    int64_t k = (int64_t)ceil(p * (double)n);
    if (k < 1) k = 1;
    if (k > n) k = n;
    return sorted[k - 1];
}

typedef struct sim_state {
    const sim_config *cfg;
    const sim_trace *tr;
    kv_cache *kv[RECORD_KV_MAX_GROUPS]; /* one pool per layer group (sim_config.kv_window) */
    int n_kv;
    rq *r;                 /* (n) */
    int64_t *wq;           /* (n + 1) ring buffer of waiting request indices */
    int64_t wq_head, wq_len, wq_cap;
    int64_t *run;          /* (n) running requests, oldest admission first */
    int64_t n_run;
    double *ttft, *tpot;   /* (n) */
    record_kv_policy *out;
    series ser;
    double acc_share[KV_CAT_COUNT]; /* sum of share * dt */
    double acc_group[RECORD_KV_MAX_GROUPS][KV_CAT_COUNT]; /* the same per pool */
    double acc_live, acc_batch, t_total;
} sim_state;

static void wq_push_back(sim_state *S, int64_t i) {
    S->wq[(S->wq_head + S->wq_len) % S->wq_cap] = i;
    S->wq_len++;
}
static void wq_push_front(sim_state *S, int64_t i) {
    S->wq_head = (S->wq_head + S->wq_cap - 1) % S->wq_cap;
    S->wq[S->wq_head] = i;
    S->wq_len++;
}
static int64_t wq_front(const sim_state *S) { return S->wq[S->wq_head]; }
static void wq_pop_front(sim_state *S) {
    S->wq_head = (S->wq_head + 1) % S->wq_cap;
    S->wq_len--;
}

/* KV positions written after `generated` tokens: the prompt plus all but the newest token. */
static int64_t prefill_len(const sim_request *q, int64_t generated) { return q->prompt + generated; }
static int64_t final_len(const sim_request *q) { return q->prompt + q->output - 1; }

/* A request lives in every pool at once: admitted, grown, freed together. */
static int pools_can_append(const sim_state *S, const rq *r) {
    for (int g = 0; g < S->n_kv; g++)
        if (!kv_cache_can_append(S->kv[g], r->seq[g], 1)) return 0;
    return 1;
}

static xf_status pools_append(sim_state *S, const rq *r) {
    for (int g = 0; g < S->n_kv; g++) {
        xf_status st = kv_cache_append(S->kv[g], r->seq[g], 1);
        if (st != XF_OK) return st; /* cannot happen after pools_can_append */
    }
    return XF_OK;
}

static void pools_free(sim_state *S, rq *r) {
    for (int g = 0; g < S->n_kv; g++) {
        kv_cache_free_seq(S->kv[g], r->seq[g]);
        r->seq[g] = -1;
    }
}

static int pools_can_add(const sim_state *S, int64_t plen, int64_t fin) {
    for (int g = 0; g < S->n_kv; g++)
        if (!kv_cache_can_add(S->kv[g], plen, fin, S->cfg->max_len)) return 0;
    return 1;
}

static xf_status pools_add(sim_state *S, int64_t plen, int64_t fin, rq *r) {
    for (int g = 0; g < S->n_kv; g++) {
        xf_status st = kv_cache_add_seq(S->kv[g], plen, fin, S->cfg->max_len, &r->seq[g]);
        if (st != XF_OK) { /* cannot happen after pools_can_add; undo the pools already taken */
            for (int h = 0; h < g; h++) kv_cache_free_seq(S->kv[h], r->seq[h]), r->seq[h] = -1;
            return st;
        }
    }
    return XF_OK;
}

/* waiting_slots: per pool, the slots the head of the queue needs (0 none). Shares of the whole
 * are byte-weighted over the pools; each pool's own go to acc_group. */
static void account(sim_state *S, double t, double dt, const int64_t *waiting_slots, int64_t batch) {
    kv_cache_stats st;
    record_kv_sample x;
    x.t_s = t;
    x.dt_s = dt;
    double bytes[KV_CAT_COUNT] = {0}, total = 0;
    int64_t live = 0;
    for (int g = 0; g < S->n_kv; g++) {
        kv_cache_stats_get(S->kv[g], waiting_slots[g], &st);
        const double slots[KV_CAT_COUNT] = {(double)st.token_slots, (double)st.reserved_slots, (double)st.internal_slots,
                                            (double)st.external_slots, (double)st.free_slots};
        const double n = (double)st.n_slots, bps = (double)st.bytes_per_slot;
        for (int c = 0; c < KV_CAT_COUNT; c++) {
            S->acc_group[g][c] += slots[c] / n * dt;
            bytes[c] += slots[c] * bps;
        }
        total += n * bps;
        live = st.live_seqs;
    }
    for (int c = 0; c < KV_CAT_COUNT; c++) x.share[c] = bytes[c] / total;
    st.live_seqs = live;
    x.batch = (double)batch;
    x.live = (double)st.live_seqs;
    for (int c = 0; c < KV_CAT_COUNT; c++) S->acc_share[c] += x.share[c] * dt;
    S->acc_live += x.live * dt;
    S->acc_batch += x.batch * dt;
    S->t_total += dt;
    if (st.live_seqs > S->out->max_live) S->out->max_live = st.live_seqs;
    series_push(&S->ser, &x);
}

static xf_status check_fits(const sim_state *S, int g) {
    const kv_cache *kv = S->kv[g];
    int64_t n_slots = kv_cache_n_slots(kv), B = kv_cache_block_tokens(kv);
    const int64_t W = g == 0 ? S->cfg->kv.window : S->cfg->kv_window.window;
    for (int64_t i = 0; i < S->tr->n; i++) {
        const sim_request *q = &S->tr->req[i];
        int64_t fin = final_len(q);
        int64_t need = kv_cache_admit_slots(kv, q->prompt, fin, S->cfg->max_len);
        if (need < 0)
            return xf_errorf(XF_EINVAL, "request %lld (prompt %lld, output %lld) is longer than the maximum length %lld", (long long)q->id,
                             (long long)q->prompt, (long long)q->output, (long long)S->cfg->max_len);
        int64_t peak = B > 0 ? (fin + B - 1) / B * B : need; /* paged grows to its final length */
        /* ... or, windowed, to at most the blocks that positions L - W .. L - 1 span while position
         * L - 1 is appended: floor((L - 1) / B) - floor((L - W) / B) + 1 <= ceil((W - 1) / B) + 1 */
        if (B > 0 && W > 0 && ((W - 1 + B - 1) / B + 1) * B < peak) peak = ((W - 1 + B - 1) / B + 1) * B;
        if (peak < need) peak = need;
        if (peak > n_slots) {
            double bps = (double)kv_cache_bytes_per_slot(kv);
            char need_s[32], pool_s[32];
            return xf_errorf(XF_EINVAL,
                             "request %lld (prompt %lld, output %lld) needs %lld KV slots (%s) but the pool holds %lld (%s): "
                             "it can never run; give a larger --kv-budget, a smaller --max-len or shorter requests",
                             (long long)q->id, (long long)q->prompt, (long long)q->output, (long long)peak,
                             units_bytes((double)peak * bps, need_s, sizeof need_s), (long long)n_slots,
                             units_bytes((double)n_slots * bps, pool_s, sizeof pool_s));
        }
    }
    return XF_OK;
}

static void finish_request(sim_state *S, int64_t i, double t) {
    const sim_request *q = &S->tr->req[i];
    rq *r = &S->r[i];
    pools_free(S, r);
    S->ttft[i] = r->first_t - q->arrival_s;
    S->tpot[i] = q->output > 1 ? (t - r->first_t) / (double)(q->output - 1) : -1.0;
    S->out->n_completed++;
}

static xf_status run_loop(sim_state *S) {
    const sim_config *cfg = S->cfg;
    const sim_trace *tr = S->tr;
    record_kv_policy *out = S->out;
    int64_t n = tr->n, next = 0;
    double t0 = tr->req[0].arrival_s, t = t0;
    int64_t steps = 0;
    while (out->n_completed < n) {
        if (cfg->progress && (++steps & 15) == 0) cfg->progress(cfg->progress_ctx, out->n_completed, n);
        while (next < n && tr->req[next].arrival_s <= t) wq_push_back(S, next++);
        /* 1. grow the running sequences, oldest first; preempt the newest when one cannot */
        int preempted = 0, stalled = 0;
        int64_t n_decode = 0, ctx_sum = 0;
        for (int64_t k = 0; k < S->n_run; k++) {
            int64_t i = S->run[k];
            rq *r = &S->r[i];
            r->step_kind = 0;
            int gone = 0;
            int can = pools_can_append(S, r);
            if (!can) out->alloc_failures++; /* a growth refused (then preempt or wait) */
            while (!can && cfg->preempt == SIM_PREEMPT_RECOMPUTE) {
                int64_t v = S->run[--S->n_run];
                rq *rv = &S->r[v];
                /* victims come from the end of the list: not yet grown this step */
                pools_free(S, rv);
                rv->step_kind = 0;
                wq_push_front(S, v);
                out->preemptions++;
                preempted = 1;
                if (v == i) {
                    gone = 1;
                    break;
                }
                can = pools_can_append(S, r);
            }
            if (gone) break;
            if (!can) {
                stalled = 1; /* wait: this one sits out the step */
                continue;
            }
            xf_status ast = pools_append(S, r);
            if (ast != XF_OK) return ast;
            r->step_kind = 2;
            n_decode++;
            ctx_sum += kv_cache_seq_len(S->kv[0], r->seq[0]);
        }
        /* 2. admit waiting requests first-come-first-served (not while anyone was preempted or
         * stalls: memory goes to running sequences first) */
        int64_t n_pref = 0, pref_tokens = 0;
        double pref_pairs = 0;
        while (!preempted && !stalled && S->wq_len > 0 && (cfg->max_batch <= 0 || n_decode + n_pref < cfg->max_batch)) {
            int64_t i = wq_front(S);
            const sim_request *q = &tr->req[i];
            rq *r = &S->r[i];
            int64_t plen = prefill_len(q, r->generated);
            if (!pools_can_add(S, plen, final_len(q))) {
                out->alloc_failures++; /* the head of the queue is refused: once per step */
                break;
            }
            xf_status st = pools_add(S, plen, final_len(q), r);
            if (st != XF_OK) return st;
            wq_pop_front(S);
            S->run[S->n_run++] = i;
            r->step_kind = 1;
            n_pref++;
            pref_tokens += plen;
            pref_pairs += (double)plen * (double)(plen + 1) / 2.0;
        }
        int64_t waiting_slots[RECORD_KV_MAX_GROUPS] = {0};
        for (int g = 0; g < S->n_kv && S->wq_len > 0; g++) {
            const sim_request *q = &tr->req[wq_front(S)];
            waiting_slots[g] = kv_cache_admit_slots(S->kv[g], prefill_len(q, S->r[wq_front(S)].generated), final_len(q), cfg->max_len);
            if (waiting_slots[g] < 0) waiting_slots[g] = 0;
        }
        if (n_pref == 0 && n_decode == 0) {
            if (S->n_run > 0)
                return xf_errorf(XF_EINVAL,
                                 "--preempt wait deadlocked at t = %.3f s: all %lld running sequences wait for KV memory that only "
                                 "they could free; use --preempt recompute or a larger --kv-budget",
                                 t - t0, (long long)S->n_run);
            if (S->wq_len > 0)
                return xf_errorf(XF_EINVAL, "request %lld cannot be admitted into an empty KV pool; give a larger --kv-budget",
                                 (long long)tr->req[wq_front(S)].id);
            if (next >= n) break; /* cannot happen: everything completed */
            /* idle until the next arrival: the pool is empty */
            double ta = tr->req[next].arrival_s;
            const int64_t none[RECORD_KV_MAX_GROUPS] = {0};
            account(S, t - t0, ta - t, none, 0);
            t = ta;
            continue;
        }
        sim_step s = {n_pref, pref_tokens, pref_pairs, n_decode, ctx_sum};
        double dt = cfg->step_time(cfg->step_ctx, &s);
        if (!(dt > 0) || !isfinite(dt)) return xf_errorf(XF_EINVAL, "the step-time model returned %g s for a step; it must be positive", dt);
        account(S, t - t0, dt, waiting_slots, n_pref + n_decode);
        out->busy_s += dt;
        out->n_steps++;
        if (n_pref + n_decode > out->max_batch) out->max_batch = n_pref + n_decode;
        out->prompt_tokens += (double)pref_tokens;
        out->output_tokens += (double)(n_pref + n_decode);
        t += dt;
        /* 3. emit one token per sequence of the step; finish the complete ones */
        int64_t k2 = 0;
        for (int64_t k = 0; k < S->n_run; k++) {
            int64_t i = S->run[k];
            rq *r = &S->r[i];
            if (r->step_kind) {
                if (r->generated == 0) r->first_t = t;
                r->generated++;
                if (r->generated >= tr->req[i].output) {
                    finish_request(S, i, t);
                    continue;
                }
            }
            S->run[k2++] = i;
        }
        S->n_run = k2;
    }
    out->duration_s = t - t0;
    return XF_OK;
}

int64_t sim_bytes_per_request(void) {
    /* sim_run's per-request arrays: S.r, S.wq, S.run, S.ttft, S.tpot; the trace's entry */
    return (int64_t)(sizeof(rq) + sizeof(int64_t) * 2 + sizeof(double) * 2 + sizeof(sim_request));
}

xf_status sim_run(const sim_config *cfg, const sim_trace *trace, record_kv_policy *out) {
    if (!cfg || !trace || !out) return xf_errorf(XF_EINVAL, "sim_run: NULL argument");
    memset(out, 0, sizeof *out);
    if (!cfg->step_time) return xf_errorf(XF_EINVAL, "sim_run: no step-time function");
    if (trace->n < 1 || !trace->req) return xf_errorf(XF_EINVAL, "sim_run: the trace has no requests");
    if (cfg->max_len < 2) return xf_errorf(XF_EINVAL, "the maximum request length must be at least 2 (got %lld)", (long long)cfg->max_len);
    if (cfg->max_batch < 0) return xf_errorf(XF_EINVAL, "the maximum batch must be >= 0 (got %lld)", (long long)cfg->max_batch);
    for (int64_t i = 1; i < trace->n; i++)
        if (trace->req[i].arrival_s < trace->req[i - 1].arrival_s) return xf_errorf(XF_EINVAL, "sim_run: the trace is not sorted by arrival");
    const kv_cache_config *pools[RECORD_KV_MAX_GROUPS] = {&cfg->kv, &cfg->kv_window};
    const int n_kv = cfg->kv_window.n_layers > 0 ? 2 : 1;
    if (n_kv == 2 && (cfg->kv_window.window <= 0 || cfg->kv_window.policy.kind != cfg->kv.policy.kind ||
                      cfg->kv_window.policy.block != cfg->kv.policy.block))
        return xf_errorf(XF_EINVAL, "sim_run: the windowed layers' pool needs a window and the same policy as the other");
    sim_state S;
    memset(&S, 0, sizeof S);
    S.cfg = cfg;
    S.tr = trace;
    S.out = out;
    S.n_kv = n_kv;
    xf_status st = XF_OK;
    out->n_groups = n_kv;
    for (int g = 0; g < n_kv && st == XF_OK; g++) {
        kv_cache_config kc = *pools[g];
        if (kc.max_len == 0) kc.max_len = cfg->max_len;
        if ((st = kv_cache_init(&S.kv[g], &kc)) != XF_OK) break;
        record_kv_group *grp = &out->groups[g];
        grp->n_layers = kc.n_layers;
        grp->window = kc.window;
        grp->n_slots = kv_cache_n_slots(S.kv[g]);
        grp->pool_bytes = (double)grp->n_slots * (double)kv_cache_bytes_per_slot(S.kv[g]);
        out->pool_bytes += grp->pool_bytes;
        st = check_fits(&S, g);
    }
    if (st != XF_OK) {
        for (int g = 0; g < n_kv; g++) kv_cache_free(S.kv[g]);
        memset(out, 0, sizeof *out);
        return st;
    }
    kv_policy_name(&cfg->kv.policy, out->policy, sizeof out->policy);
    out->n_slots = kv_cache_n_slots(S.kv[0]);
    out->block_tokens = kv_cache_block_tokens(S.kv[0]);
    int64_t n = trace->n;
    int max_series = cfg->max_series > 0 ? cfg->max_series : 256;
    if (max_series < 2) max_series = 2;
    S.r = calloc((size_t)n, sizeof *S.r);
    S.wq_cap = n + 1;
    S.wq = malloc((size_t)S.wq_cap * sizeof *S.wq);
    S.run = malloc((size_t)n * sizeof *S.run);
    S.ttft = malloc((size_t)n * sizeof *S.ttft);
    S.tpot = malloc((size_t)n * sizeof *S.tpot);
    S.ser.cap = max_series;
    S.ser.group = 1;
    S.ser.pts = malloc((size_t)max_series * sizeof *S.ser.pts);
    if (!S.r || !S.wq || !S.run || !S.ttft || !S.tpot || !S.ser.pts) {
        st = xf_errorf(XF_ENOMEM, "out of memory simulating %lld requests", (long long)n);
        goto done;
    }
    for (int64_t i = 0; i < n; i++)
        for (int g = 0; g < RECORD_KV_MAX_GROUPS; g++) S.r[i].seq[g] = -1;
    st = run_loop(&S);
    if (st != XF_OK) goto done;
    series_finish(&S.ser);

    double T = S.t_total > 0 ? S.t_total : 1;
    for (int c = 0; c < KV_CAT_COUNT; c++) {
        out->share[c] = S.t_total > 0 ? S.acc_share[c] / T : (c == KV_CAT_FREE ? 1 : 0);
        out->bytes[c] = out->share[c] * out->pool_bytes;
        for (int g = 0; g < n_kv; g++)
            out->groups[g].share[c] = S.t_total > 0 ? S.acc_group[g][c] / T : (c == KV_CAT_FREE ? 1 : 0);
    }
    out->mean_live = S.t_total > 0 ? S.acc_live / T : 0;
    out->mean_batch = out->busy_s > 0 ? S.acc_batch / out->busy_s : 0;
    out->tokens_per_s = out->duration_s > 0 ? out->output_tokens / out->duration_s : 0;
    out->requests_per_s = out->duration_s > 0 ? (double)out->n_completed / out->duration_s : 0;
    if (n <= RECORD_KV_MAX_PER_REQUEST) {
        out->req_ttft_s = malloc((size_t)n * sizeof *out->req_ttft_s);
        out->req_tpot_s = malloc((size_t)n * sizeof *out->req_tpot_s);
        if (!out->req_ttft_s || !out->req_tpot_s) {
            st = xf_errorf(XF_ENOMEM, "out of memory keeping per-request latencies");
            goto done;
        }
        /* in trace (id) order: the trace is sorted by arrival, ids follow it for synthetic traces */
        memcpy(out->req_ttft_s, S.ttft, (size_t)n * sizeof *S.ttft);
        memcpy(out->req_tpot_s, S.tpot, (size_t)n * sizeof *S.tpot);
        out->n_requests_kept = n;
    }
    /* latency percentiles */
    qsort(S.ttft, (size_t)n, sizeof *S.ttft, cmp_double);
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += S.ttft[i];
    out->ttft_mean_s = sum / (double)n;
    for (int k = 0; k < RECORD_KV_PCT_COUNT; k++) out->ttft_s[k] = percentile(S.ttft, n, record_kv_pcts[k]);
    int64_t m = 0;
    sum = 0;
    for (int64_t i = 0; i < n; i++)
        if (S.tpot[i] >= 0) {
            S.tpot[m++] = S.tpot[i];
            sum += S.tpot[i];
        }
    qsort(S.tpot, (size_t)m, sizeof *S.tpot, cmp_double);
    out->tpot_mean_s = m > 0 ? sum / (double)m : 0;
    for (int k = 0; k < RECORD_KV_PCT_COUNT; k++) out->tpot_s[k] = percentile(S.tpot, m, record_kv_pcts[k]);
    out->series = S.ser.pts;
    out->n_series = S.ser.n;
    S.ser.pts = NULL;
done:
    free(S.r);
    free(S.wq);
    free(S.run);
    free(S.ttft);
    free(S.tpot);
    free(S.ser.pts);
    for (int g = 0; g < n_kv; g++) kv_cache_free(S.kv[g]);
    if (st != XF_OK) record_kv_policy_clear(out);
    return st;
}

int64_t sim_bytes_per_token(const model_config *m, xf_dtype kvdtype) {
    if (!m || config_validate(m) != XF_OK) return 0;
    if (model_is_mla(m)) return kv_bytes_per_latent_slot(m->n_layers, m->kv_lora_rank + m->qk_rope_head_dim, kvdtype, 0);
    return kv_bytes_per_slot(m->n_layers, m->n_kv_heads, m->head_dim, kvdtype, 0);
}

xf_status sim_pools_of_model(const model_config *m, xf_dtype kvdtype, int64_t budget_bytes, kv_policy policy, int64_t max_len,
                             sim_config *sc) {
    if (!m || !sc) return xf_errorf(XF_EINVAL, "sim_pools_of_model: NULL argument");
    xf_status st = config_validate(m);
    if (st != XF_OK) return st;
    if (budget_bytes <= 0 || max_len < 1)
        return xf_errorf(XF_EINVAL, "KV pools: budget %lld bytes and max_len %lld must be positive", (long long)budget_bytes,
                         (long long)max_len);
    kv_cache_config base;
    memset(&base, 0, sizeof base);
    base.n_kv_heads = m->n_kv_heads;
    base.head_dim = m->head_dim;
    base.latent_dim = model_is_mla(m) ? m->kv_lora_rank + m->qk_rope_head_dim : 0;
    base.dtype = kvdtype;
    base.policy = policy;
    const int64_t n_win = model_windowed_layers(m), n_full = m->n_layers - n_win, W = m->sliding_window;
    sc->kv = sc->kv_window = base;
    sc->kv_window.n_layers = 0;
    sc->kv.budget_bytes = budget_bytes;
    if (n_win == 0) {
        sc->kv.n_layers = m->n_layers;
    } else if (n_full == 0) {
        sc->kv.n_layers = m->n_layers;
        sc->kv.window = W;
    } else {
        /* what a request of max_len holds in each group: the slots of a layer are the same size */
        const double full = (double)n_full * (double)max_len, win = (double)n_win * (double)(W < max_len ? W : max_len);
        const int64_t b_full = (int64_t)floor((double)budget_bytes * full / (full + win));
        sc->kv.n_layers = n_full;
        sc->kv.budget_bytes = b_full;
        sc->kv_window.n_layers = n_win;
        sc->kv_window.window = W;
        sc->kv_window.budget_bytes = budget_bytes - b_full;
    }
    return XF_OK;
}

double sim_kv_bytes_at(const model_config *m, xf_dtype kvdtype, int64_t context) {
    const int64_t bpt = sim_bytes_per_token(m, kvdtype);
    if (bpt <= 0 || context < 0) return 0;
    const double per_layer = (double)bpt / (double)m->n_layers, c = (double)context; /* a slot is n_layers equal rows */
    const double n_win = (double)model_windowed_layers(m), W = (double)m->sliding_window;
    return per_layer * (((double)m->n_layers - n_win) * c + n_win * (W > 0 && W < c ? W : c));
}
