#include "record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "record_kv.h"

const char *bound_name(xf_bound b) {
    static const char *names[XF_BOUND_COUNT] = {"memory", "compute", "latency", "balanced", "unknown"};
    return (b >= 0 && b < XF_BOUND_COUNT) ? names[b] : "?";
}

xf_status bound_parse(const char *s, xf_bound *out) {
    for (int b = 0; b < XF_BOUND_COUNT; b++) {
        if (s && strcmp(s, bound_name((xf_bound)b)) == 0) {
            *out = (xf_bound)b;
            return XF_OK;
        }
    }
    return xf_errorf(XF_EINVAL, "unknown bound '%.32s': expected memory, compute, latency, balanced or unknown", s ? s : "");
}

int record_kind_known(const char *kind) {
    static const char *kinds[] = {"predict", "run", "kv", "sweep", "import"};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (kind && strcmp(kind, kinds[i]) == 0) return 1;
    return 0;
}

void record_init(record *r, const char *kind) {
    memset(r, 0, sizeof *r);
    r->version = RECORD_VERSION;
    snprintf(r->kind, sizeof r->kind, "%s", kind ? kind : "");
    snprintf(r->tool_version, sizeof r->tool_version, "%s", XFPROF_VERSION);
}

record_point *record_add_point(record *r) {
    record_point *np = realloc(r->points, (size_t)(r->n_points + 1) * sizeof *np);
    if (!np) return NULL;
    r->points = np;
    record_point *p = &np[r->n_points++];
    memset(p, 0, sizeof *p);
    return p;
}

static void point_free(record_point *p) {
    for (int64_t i = 0; i < p->n_ops; i++) free(p->ops[i].samples_s);
    free(p->ops);
    free(p->tokens);
    free(p->expert_tokens);
    free(p->expert_distinct);
}

void record_pop_point(record *r) {
    if (!r || r->n_points == 0) return;
    point_free(&r->points[--r->n_points]);
    memset(&r->points[r->n_points], 0, sizeof r->points[0]);
}

void record_free(record *r) {
    if (!r) return;
    for (int i = 0; i < r->n_points; i++) point_free(&r->points[i]);
    free(r->points);
    record_kv_free(r->kv);
    r->points = NULL;
    r->n_points = 0;
    r->kv = NULL;
}

void record_stamp_time(record *r) {
    time_t now = time(NULL);
    struct tm tmv;
    gmtime_r(&now, &tmv);
    strftime(r->created, sizeof r->created, "%Y-%m-%dT%H:%M:%SZ", &tmv);
}

void record_set_env(record *r, const char *key, const char *value) {
    int i = 0;
    while (i < r->n_env && strcmp(r->env[i].key, key) != 0) i++;
    if (i == RECORD_MAX_ENV) return;
    snprintf(r->env[i].key, sizeof r->env[i].key, "%s", key);
    snprintf(r->env[i].value, sizeof r->env[i].value, "%s", value ? value : "");
    if (i == r->n_env) r->n_env++;
}
