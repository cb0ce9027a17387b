/* AMX GEMMs through oneDNN: see cpu_dnnl.h. */
#include "reference_model/cpu_dnnl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef XFPROF_HAVE_DNNL
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

struct cpu_dnnl {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    int threads;
};

static char last_impl[128]; /* cpu_dnnl_last_impl */
static int n_amx, n_other;  /* GEMMs run on AMX tiles and on other kernels (cpu_dnnl_amx_state) */

int cpu_dnnl_built(void) { return 1; }

/* oneDNN 2.x has bf16 matmuls from AVX-512 on only: on an AVX2 CPU (seen: AMD EPYC, Zen 3, oneDNN
 * 2.6.3) creating one says "unimplemented" (status 3). Asked once, on a 16 x 16 x 16 matmul. */
int cpu_dnnl_bf16_here(void) {
    static int here = -1;
    if (here >= 0) return here;
    here = 0;
    dnnl_engine_t e;
    if (dnnl_engine_create(&e, dnnl_cpu, 0) != dnnl_success) return here;
    dnnl_memory_desc_t a, b, c;
    const dnnl_dims_t d = {16, 16}, rows = {16, 1}, cols = {1, 16};
    dnnl_matmul_desc_t md;
    dnnl_primitive_desc_t pd;
    if (dnnl_memory_desc_init_by_strides(&a, 2, d, dnnl_bf16, rows) == dnnl_success &&
        dnnl_memory_desc_init_by_strides(&b, 2, d, dnnl_bf16, cols) == dnnl_success &&
        dnnl_memory_desc_init_by_strides(&c, 2, d, dnnl_f32, rows) == dnnl_success &&
        dnnl_matmul_desc_init(&md, &a, &b, NULL, &c) == dnnl_success &&
        dnnl_primitive_desc_create(&pd, &md, NULL, e, NULL) == dnnl_success) {
        here = 1;
        dnnl_primitive_desc_destroy(pd);
    }
    dnnl_engine_destroy(e);
    return here;
}

const char *cpu_dnnl_describe(void) {
    static char buf[224];
    const dnnl_version_t *v = dnnl_version();
    const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    snprintf(buf, sizeof buf, "oneDNN %d.%d.%d (cpu isa mask 0x%x%s%s)", v->major, v->minor, v->patch, (unsigned)isa,
             (isa & dnnl_cpu_isa_avx512_core_amx) == dnnl_cpu_isa_avx512_core_amx ? ": AMX" : ": no AMX",
             cpu_dnnl_bf16_here() ? "" : "; no bf16 matmul on this CPU, which it needs AVX-512 for: bf16 prefill GEMMs on the fp32 path");
    return buf;
}

static xf_status dnnl_err(dnnl_status_t s, const char *what) {
    return xf_errorf(s == dnnl_out_of_memory ? XF_ENOMEM : XF_EUNSUPPORTED, "oneDNN: %s failed (status %d)", what, (int)s);
}

xf_status cpu_dnnl_init(cpu_dnnl **out, int threads) {
    *out = NULL;
    if (!cpu_dnnl_bf16_here()) return xf_errorf(XF_EUNSUPPORTED, "%s", cpu_dnnl_describe());
    cpu_dnnl *d = calloc(1, sizeof *d);
    if (!d) return xf_errorf(XF_ENOMEM, "out of memory");
    dnnl_status_t s = dnnl_engine_create(&d->engine, dnnl_cpu, 0);
    if (s != dnnl_success) {
        free(d);
        return dnnl_err(s, "creating the CPU engine");
    }
    if ((s = dnnl_stream_create(&d->stream, d->engine, dnnl_stream_default_flags)) != dnnl_success) {
        dnnl_engine_destroy(d->engine);
        free(d);
        return dnnl_err(s, "creating a stream");
    }
    d->threads = threads > 0 ? threads : 1;
    *out = d;
    return XF_OK;
}

void cpu_dnnl_free(cpu_dnnl *d) {
    if (!d) return;
    dnnl_stream_destroy(d->stream);
    dnnl_engine_destroy(d->engine);
    free(d);
}

const char *cpu_dnnl_last_impl(void) { return last_impl; }
int cpu_dnnl_last_on_amx(void) { return strstr(last_impl, "amx") != NULL; }
int cpu_dnnl_amx_state(void) { return n_amx > 0 && n_other > 0 ? -1 : n_amx > 0; }

/* One GEMM: dst (M, N) [+]= src (M, K) . wei (K, N), all by strides; `sum` adds into dst. */
static xf_status gemm_once(cpu_dnnl *d, const void *src, int64_t src_ld, const void *wei, int64_t wei_ld, float *dst,
                           int64_t dst_ld, int64_t M, int64_t N, int64_t K, int sum) {
    dnnl_memory_desc_t a, b, c;
    const dnnl_dims_t da = {M, K}, db = {K, N}, dc = {M, N};
    const dnnl_dims_t sa = {src_ld, 1}, sb = {1, wei_ld}, sc = {dst_ld, 1};
    dnnl_status_t s = dnnl_memory_desc_init_by_strides(&a, 2, da, dnnl_bf16, sa);
    if (s == dnnl_success) s = dnnl_memory_desc_init_by_strides(&b, 2, db, dnnl_bf16, sb);
    if (s == dnnl_success) s = dnnl_memory_desc_init_by_strides(&c, 2, dc, dnnl_f32, sc);
    if (s != dnnl_success) return dnnl_err(s, "describing a GEMM's memory");
    dnnl_matmul_desc_t md;
    if ((s = dnnl_matmul_desc_init(&md, &a, &b, NULL, &c)) != dnnl_success) return dnnl_err(s, "describing a matmul");
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    if (sum) {
        if ((s = dnnl_primitive_attr_create(&attr)) != dnnl_success) return dnnl_err(s, "creating attributes");
        if ((s = dnnl_post_ops_create(&po)) == dnnl_success && (s = dnnl_post_ops_append_sum(po, 1.0f)) == dnnl_success)
            s = dnnl_primitive_attr_set_post_ops(attr, po);
        dnnl_post_ops_destroy(po);
        if (s != dnnl_success) {
            dnnl_primitive_attr_destroy(attr);
            return dnnl_err(s, "setting the sum post-op");
        }
    }
    dnnl_primitive_desc_t pd; /* oneDNN's primitive cache makes the repeated shapes cheap */
    s = dnnl_primitive_desc_create(&pd, &md, attr, d->engine, NULL);
    dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success) return dnnl_err(s, "creating a bf16 matmul");
    const char *impl = "";
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl)
        snprintf(last_impl, sizeof last_impl, "%s", impl);
    if (strstr(last_impl, "amx")) n_amx++;
    else n_other++;
    dnnl_primitive_t prim;
    if ((s = dnnl_primitive_create(&prim, pd)) != dnnl_success) {
        dnnl_primitive_desc_destroy(pd);
        return dnnl_err(s, "creating a bf16 matmul primitive");
    }
    dnnl_primitive_desc_destroy(pd);
    dnnl_memory_t ma = NULL, mb = NULL, mc = NULL;
    s = dnnl_memory_create(&ma, &a, d->engine, (void *)src);
    if (s == dnnl_success) s = dnnl_memory_create(&mb, &b, d->engine, (void *)wei);
    if (s == dnnl_success) s = dnnl_memory_create(&mc, &c, d->engine, dst);
    if (s == dnnl_success) {
        const dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
        const int saved = omp_get_max_threads();
        omp_set_num_threads(d->threads); /* oneDNN's OpenMP runtime takes the caller's thread count */
        s = dnnl_primitive_execute(prim, d->stream, 3, args);
        if (s == dnnl_success) s = dnnl_stream_wait(d->stream);
        omp_set_num_threads(saved);
    }
    dnnl_memory_destroy(ma);
    dnnl_memory_destroy(mb);
    dnnl_memory_destroy(mc);
    dnnl_primitive_destroy(prim);
    return s == dnnl_success ? XF_OK : dnnl_err(s, "running a bf16 matmul");
}

xf_status cpu_dnnl_gemm_bf16x3(cpu_dnnl *d, const wmat *W, const uint16_t *p, int64_t n, float *y, int64_t ldy) {
    if (!d || !W || W->dtype != XF_BF16) return xf_errorf(XF_EINVAL, "cpu_dnnl_gemm_bf16x3: bf16 weights only");
    if (n <= 0) return XF_OK;
    const int64_t cols = W->cols;
    xf_status st = XF_OK;
    for (int part = 0; part < 3 && !st; part++) /* hi, mid, lo: the first writes y, the others add */
        st = gemm_once(d, p + part * n * cols, cols, W->data, cols, y, ldy, n, W->rows, cols, part > 0);
    return st;
}

xf_status cpu_dnnl_gemm_bf16(cpu_dnnl *d, const wmat *W, const uint16_t *xb, int64_t n, float *y, int64_t ldy) {
    if (!d || !W || W->dtype != XF_BF16) return xf_errorf(XF_EINVAL, "cpu_dnnl_gemm_bf16: bf16 weights only");
    if (n <= 0) return XF_OK;
    return gemm_once(d, xb, W->cols, W->data, W->cols, y, ldy, n, W->rows, W->cols, 0);
}

#else /* built without oneDNN */

int cpu_dnnl_built(void) { return 0; }
int cpu_dnnl_bf16_here(void) { return 0; }
const char *cpu_dnnl_describe(void) {
    return "built without oneDNN (libdnnl-dev not found at configure time): bf16 prefill GEMMs on the fp32 path";
}
xf_status cpu_dnnl_init(cpu_dnnl **out, int threads) {
    (void)threads;
    *out = NULL;
    return xf_errorf(XF_EUNSUPPORTED, "%s", cpu_dnnl_describe());
}
void cpu_dnnl_free(cpu_dnnl *d) { (void)d; }
xf_status cpu_dnnl_gemm_bf16x3(cpu_dnnl *d, const wmat *W, const uint16_t *p, int64_t n, float *y, int64_t ldy) {
    (void)d, (void)W, (void)p, (void)n, (void)y, (void)ldy;
    return xf_errorf(XF_EUNSUPPORTED, "%s", cpu_dnnl_describe());
}
xf_status cpu_dnnl_gemm_bf16(cpu_dnnl *d, const wmat *W, const uint16_t *xb, int64_t n, float *y, int64_t ldy) {
    (void)d, (void)W, (void)xb, (void)n, (void)y, (void)ldy;
    return xf_errorf(XF_EUNSUPPORTED, "%s", cpu_dnnl_describe());
}
const char *cpu_dnnl_last_impl(void) { return ""; }
int cpu_dnnl_last_on_amx(void) { return 0; }
int cpu_dnnl_amx_state(void) { return 0; }
#endif
