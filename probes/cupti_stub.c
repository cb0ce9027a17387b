/* The CUPTI probe of a build without CUDA (cupti_probe.h): init answers XF_EUNSUPPORTED. */
#include "probes/cupti_probe.h"

#include <string.h>

#ifndef XFPROF_HAVE_CUDA
static xf_status no_cuda(void) {
    return xf_errorf(XF_EUNSUPPORTED, "no CUDA device: this xfprof was built without CUDA, so there are no CUPTI counters "
                                      "(configure with -DXFPROF_CUDA=ON where the CUDA toolkit is installed)");
}

xf_status cupti_probe_init(cupti_probe **out, int ordinal, cupti_mode mode, int max_ranges) {
    (void)ordinal;
    (void)mode;
    (void)max_ranges;
    *out = NULL;
    return no_cuda();
}

void cupti_probe_free(cupti_probe *p) {
    (void)p;
}

static void nop_range(void *ctx, const probe_range *r) {
    (void)ctx;
    (void)r;
}

static void nop_free(void *ctx) {
    (void)ctx;
}

probe cupti_probe_as_probe(cupti_probe *p) {
    probe pr = {.name = "cupti", .ctx = p, .range_begin = nop_range, .range_end = nop_range, .free = nop_free};
    return pr;
}

probe cupti_nvtx_probe(void) {
    probe pr = {.name = "nvtx", .ctx = NULL, .range_begin = nop_range, .range_end = nop_range, .free = nop_free};
    return pr;
}

xf_status cupti_probe_flush(cupti_probe *p, cupti_attribution *out) {
    (void)p;
    memset(out, 0, sizeof *out);
    return no_cuda();
}

xf_status cupti_probe_pass_begin(cupti_probe *p, int metric_set) {
    (void)p;
    (void)metric_set;
    return no_cuda();
}

xf_status cupti_probe_pass_end(cupti_probe *p, int *all_passes_done) {
    (void)p;
    *all_passes_done = 0;
    return no_cuda();
}

xf_status cupti_probe_results(cupti_probe *p, int *n, probe_range **ranges, cupti_metric_values **values) {
    (void)p;
    *n = 0;
    *ranges = NULL;
    *values = NULL;
    return no_cuda();
}

void cupti_probe_push_named(cupti_probe *p, const char *name) {
    (void)p;
    (void)name;
}

void cupti_probe_pop_named(cupti_probe *p) {
    (void)p;
}

xf_status cupti_probe_named_values(cupti_probe *p, const char *name, cupti_metric_values *out) {
    (void)p;
    (void)name;
    (void)out;
    return no_cuda();
}
#endif
