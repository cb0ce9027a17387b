#include "ceilings.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <immintrin.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <cpuid.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/hugemem.h"
#include "core/json_util.h"
#include "probes/callgrind.h"
#include "probes/omp_spin.h"
#include "probes/timer.h"

#define MAX_THREADS 1024
#define MIN_REP_S 0.02 /* each timed repetition runs at least this long */

const char *ceilings_kernel_name(ceilings_kernel k) {
    static const char *n[CEIL_KERNEL_COUNT] = {"read", "copy", "triad"};
    return ((int)k >= 0 && k < CEIL_KERNEL_COUNT) ? n[k] : "?";
}

int ceilings_kernel_arrays(ceilings_kernel k) { return k == CEIL_READ ? 1 : k == CEIL_COPY ? 2 : 3; }

double ceilings_kernel_bytes(ceilings_kernel k, int64_t n) { return 4.0 * (double)ceilings_kernel_arrays(k) * (double)n; }

/* ---- kernels, three flavours ---- */

/* Read runs as READ_STREAMS interleaved streams per thread: one sequential stream per core
 * leaves DRAM bandwidth unused on server cores (too few misses in flight), while a GEMV reading
 * several weight rows at once does not; 8 streams measured 28 GB/s where 1 gave 15-19 GB/s on
 * a 2-vCPU Xeon VM. */
#define READ_STREAMS 8

__attribute__((target("avx512f"))) static double read_avx512(const float *a, int64_t n) {
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    const int64_t per = (n / READ_STREAMS) & ~(int64_t)31;
    for (int64_t i = 0; i < per; i += 32) {
        for (int s = 0; s < READ_STREAMS; s += 2) {
            const float *p = a + s * per + i, *q = p + per;
            s0 = _mm512_add_ps(s0, _mm512_loadu_ps(p));
            s1 = _mm512_add_ps(s1, _mm512_loadu_ps(p + 16));
            s2 = _mm512_add_ps(s2, _mm512_loadu_ps(q));
            s3 = _mm512_add_ps(s3, _mm512_loadu_ps(q + 16));
        }
    }
    double s = (double)_mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
    for (int64_t i = per * READ_STREAMS; i < n; i++) s += a[i];
    return s;
}

__attribute__((target("avx512f"))) static void copy_avx512(float *a, const float *b, int64_t n) {
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        _mm512_storeu_ps(a + i, _mm512_loadu_ps(b + i));
        _mm512_storeu_ps(a + i + 16, _mm512_loadu_ps(b + i + 16));
    }
    for (; i < n; i++) a[i] = b[i];
}

__attribute__((target("avx512f"))) static void triad_avx512(float *a, const float *b, const float *c, float s, int64_t n) {
    __m512 vs = _mm512_set1_ps(s);
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        _mm512_storeu_ps(a + i, _mm512_fmadd_ps(vs, _mm512_loadu_ps(c + i), _mm512_loadu_ps(b + i)));
        _mm512_storeu_ps(a + i + 16, _mm512_fmadd_ps(vs, _mm512_loadu_ps(c + i + 16), _mm512_loadu_ps(b + i + 16)));
    }
    for (; i < n; i++) a[i] = b[i] + s * c[i];
}

__attribute__((target("avx2,fma"))) static double read_avx2(const float *a, int64_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    const int64_t per = (n / READ_STREAMS) & ~(int64_t)15;
    for (int64_t i = 0; i < per; i += 16) {
        for (int s = 0; s < READ_STREAMS; s += 2) {
            const float *p = a + s * per + i, *q = p + per;
            s0 = _mm256_add_ps(s0, _mm256_loadu_ps(p));
            s1 = _mm256_add_ps(s1, _mm256_loadu_ps(p + 8));
            s2 = _mm256_add_ps(s2, _mm256_loadu_ps(q));
            s3 = _mm256_add_ps(s3, _mm256_loadu_ps(q + 8));
        }
    }
    float t[8];
    _mm256_storeu_ps(t, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    double s = 0;
    for (int j = 0; j < 8; j++) s += t[j];
    for (int64_t i = per * READ_STREAMS; i < n; i++) s += a[i];
    return s;
}

__attribute__((target("avx2,fma"))) static void copy_avx2(float *a, const float *b, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm256_storeu_ps(a + i, _mm256_loadu_ps(b + i));
        _mm256_storeu_ps(a + i + 8, _mm256_loadu_ps(b + i + 8));
    }
    for (; i < n; i++) a[i] = b[i];
}

__attribute__((target("avx2,fma"))) static void triad_avx2(float *a, const float *b, const float *c, float s, int64_t n) {
    __m256 vs = _mm256_set1_ps(s);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(a + i, _mm256_fmadd_ps(vs, _mm256_loadu_ps(c + i), _mm256_loadu_ps(b + i)));
    for (; i < n; i++) a[i] = b[i] + s * c[i];
}

static double read_portable(const float *a, int64_t n) {
    float s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) s[j] += a[i + j];
    double t = 0;
    for (int j = 0; j < 8; j++) t += s[j];
    for (; i < n; i++) t += a[i];
    return t;
}

static void copy_portable(float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) a[i] = b[i];
}

static void triad_portable(float *a, const float *b, const float *c, float s, int64_t n) {
    for (int64_t i = 0; i < n; i++) a[i] = b[i] + s * c[i];
}

static int isa_level(void) {
    static int level = -1;
    if (level < 0) {
        __builtin_cpu_init();
        level = __builtin_cpu_supports("avx512f") ? 2 : (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) ? 1 : 0;
    }
    return level;
}

const char *ceilings_isa(void) {
    static const char *n[3] = {"portable", "avx2", "avx512"};
    return n[isa_level()];
}

double ceilings_kernel_run(ceilings_kernel k, float *a, const float *b, const float *c, int64_t n) {
    int lvl = isa_level();
    switch (k) {
    case CEIL_READ: return lvl == 2 ? read_avx512(a, n) : lvl == 1 ? read_avx2(a, n) : read_portable(a, n);
    case CEIL_COPY:
        if (lvl == 2) copy_avx512(a, b, n);
        else if (lvl == 1) copy_avx2(a, b, n);
        else copy_portable(a, b, n);
        return 0;
    case CEIL_TRIAD:
        if (lvl == 2) triad_avx512(a, b, c, 3.0f, n);
        else if (lvl == 1) triad_avx2(a, b, c, 3.0f, n);
        else triad_portable(a, b, c, 3.0f, n);
        return 0;
    default: return 0;
    }
}

/* ---- FMA-bound kernels: independent accumulator chains, enough to cover FMA latency x ports ---- */

#define FMA16(OP, acc, a, b)                                                                                           \
    acc##0 = OP(acc##0, a, b); acc##1 = OP(acc##1, a, b); acc##2 = OP(acc##2, a, b); acc##3 = OP(acc##3, a, b);         \
    acc##4 = OP(acc##4, a, b); acc##5 = OP(acc##5, a, b); acc##6 = OP(acc##6, a, b); acc##7 = OP(acc##7, a, b);         \
    acc##8 = OP(acc##8, a, b); acc##9 = OP(acc##9, a, b); acc##10 = OP(acc##10, a, b); acc##11 = OP(acc##11, a, b);     \
    acc##12 = OP(acc##12, a, b); acc##13 = OP(acc##13, a, b); acc##14 = OP(acc##14, a, b); acc##15 = OP(acc##15, a, b);

/* The 16 chains summed in a tree (the result only keeps the chains alive). */
#define SUM16(ADD, acc)                                                                                                \
    ADD(ADD(ADD(ADD(acc##0, acc##1), ADD(acc##2, acc##3)), ADD(ADD(acc##4, acc##5), ADD(acc##6, acc##7))),             \
        ADD(ADD(ADD(acc##8, acc##9), ADD(acc##10, acc##11)), ADD(ADD(acc##12, acc##13), ADD(acc##14, acc##15))))

/* 16 chains x 16 lanes x 2 FLOP = 512 FLOP per iteration. */
__attribute__((target("avx512f"))) static float fma_avx512(int64_t iters) {
    __m512 x0 = _mm512_set1_ps(0.01f), x1 = _mm512_set1_ps(0.02f), x2 = _mm512_set1_ps(0.03f), x3 = _mm512_set1_ps(0.04f);
    __m512 x4 = _mm512_set1_ps(0.05f), x5 = _mm512_set1_ps(0.06f), x6 = _mm512_set1_ps(0.07f), x7 = _mm512_set1_ps(0.08f);
    __m512 x8 = _mm512_set1_ps(0.09f), x9 = _mm512_set1_ps(0.10f), x10 = _mm512_set1_ps(0.11f), x11 = _mm512_set1_ps(0.12f);
    __m512 x12 = _mm512_set1_ps(0.13f), x13 = _mm512_set1_ps(0.14f), x14 = _mm512_set1_ps(0.15f), x15 = _mm512_set1_ps(0.16f);
    const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-6f);
    for (int64_t i = 0; i < iters; i++) {
        FMA16(_mm512_fmadd_ps, x, m, c)
    }
    return _mm512_reduce_add_ps(SUM16(_mm512_add_ps, x));
}

/* 12 chains x 8 lanes x 2 FLOP = 192 FLOP per iteration (16 ymm registers). */
__attribute__((target("avx2,fma"))) static float fma_avx2(int64_t iters) {
    __m256 x0 = _mm256_set1_ps(0.01f), x1 = _mm256_set1_ps(0.02f), x2 = _mm256_set1_ps(0.03f), x3 = _mm256_set1_ps(0.04f);
    __m256 x4 = _mm256_set1_ps(0.05f), x5 = _mm256_set1_ps(0.06f), x6 = _mm256_set1_ps(0.07f), x7 = _mm256_set1_ps(0.08f);
    __m256 x8 = _mm256_set1_ps(0.09f), x9 = _mm256_set1_ps(0.10f), x10 = _mm256_set1_ps(0.11f), x11 = _mm256_set1_ps(0.12f);
    const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-6f);
    for (int64_t i = 0; i < iters; i++) {
        x0 = _mm256_fmadd_ps(x0, m, c); x1 = _mm256_fmadd_ps(x1, m, c); x2 = _mm256_fmadd_ps(x2, m, c);
        x3 = _mm256_fmadd_ps(x3, m, c); x4 = _mm256_fmadd_ps(x4, m, c); x5 = _mm256_fmadd_ps(x5, m, c);
        x6 = _mm256_fmadd_ps(x6, m, c); x7 = _mm256_fmadd_ps(x7, m, c); x8 = _mm256_fmadd_ps(x8, m, c);
        x9 = _mm256_fmadd_ps(x9, m, c); x10 = _mm256_fmadd_ps(x10, m, c); x11 = _mm256_fmadd_ps(x11, m, c);
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(x0, x1), _mm256_add_ps(x2, x3)),
                             _mm256_add_ps(_mm256_add_ps(x4, x5), _mm256_add_ps(x6, x7)));
    s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(x8, x9), _mm256_add_ps(x10, x11)));
    float t[8];
    _mm256_storeu_ps(t, s);
    return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}

/* 8 scalar chains x 2 FLOP = 16 FLOP per iteration (the compiler may vectorize it). */
static float fma_portable(int64_t iters) {
    float x[8] = {0.01f, 0.02f, 0.03f, 0.04f, 0.05f, 0.06f, 0.07f, 0.08f};
    for (int64_t i = 0; i < iters; i++)
        for (int j = 0; j < 8; j++) x[j] = x[j] * 0.999999f + 1e-6f;
    return x[0] + x[1] + x[2] + x[3] + x[4] + x[5] + x[6] + x[7];
}

/* vdpbf16ps: 16 lanes x 2 products x 2 FLOP = 64 FLOP per instruction; 16 chains = 1024 per iteration. */
__attribute__((target("avx512f,avx512bf16"))) static float bf16_avx512(int64_t iters) {
    __m512 x0 = _mm512_set1_ps(0.01f), x1 = x0, x2 = x0, x3 = x0, x4 = x0, x5 = x0, x6 = x0, x7 = x0;
    __m512 x8 = x0, x9 = x0, x10 = x0, x11 = x0, x12 = x0, x13 = x0, x14 = x0, x15 = x0;
    const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
    const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
    for (int64_t i = 0; i < iters; i++) {
        FMA16(_mm512_dpbf16_ps, x, a, b)
    }
    return _mm512_reduce_add_ps(SUM16(_mm512_add_ps, x));
}

/* vpdpbusd: 16 lanes x 4 u8 x s8 products x 2 ops = 128 ops per instruction; 16 chains = 2048 per
 * iteration. The int8 projections' kernel (cpu_kernels.c, xk_matmul_a8) runs on it without AMX. */
__attribute__((target("avx512f,avx512vnni"))) static int vnni_avx512(int64_t iters) {
    __m512i x0 = _mm512_set1_epi32(1), x1 = x0, x2 = x0, x3 = x0, x4 = x0, x5 = x0, x6 = x0, x7 = x0;
    __m512i x8 = x0, x9 = x0, x10 = x0, x11 = x0, x12 = x0, x13 = x0, x14 = x0, x15 = x0;
    const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
    for (int64_t i = 0; i < iters; i++) {
        FMA16(_mm512_dpbusd_epi32, x, a, b)
    }
    /* one lane of the vector sum (lanes wrap, as vpdpbusd's do): gcc's _mm512_reduce_add_epi32 adds
     * them as C ints, whose overflow the sanitizer build stops at */
    return _mm_cvtsi128_si32(_mm512_castsi512_si128(SUM16(_mm512_add_epi32, x)));
}

/* ---- AMX tiles (amx_bf16, amx_int8): 4 accumulator tiles of 16 x 16 fp32 / int32 ----
 * Each iteration issues 4 tile products C_ij += A_i . B_j: tdpbf16ps does 16 x 16 x 32 products
 * (16384 FLOP), tdpbssd 16 x 16 x 64 (32768 ops). The operands are zero tiles (the rate does not
 * depend on the values). The tile state needs the kernel's permission (arch_prctl
 * ARCH_REQ_XCOMP_PERM, Linux >= 5.16), asked once per process by ceilings_amx_peak. */
typedef struct amx_cfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_cfg;

#define AMX_TGT __attribute__((target("amx-tile,amx-bf16,amx-int8")))
static AMX_TGT void amx_setup(void) {
    static const char zeros[1024] __attribute__((aligned(64)));
    amx_cfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 8; i++) c.colsb[i] = 64, c.rows[i] = 16;
    /* gcc's _tile_loadconfig does not tell the compiler it reads *c: without this the stores to
     * colsb and rows are dropped as dead and the instructions after ldtilecfg fault */
    __asm__ __volatile__("" : : "m"(c) : "memory");
    _tile_loadconfig(&c);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, zeros, 64);
    _tile_loadd(5, zeros, 64);
    _tile_loadd(6, zeros, 64);
    _tile_loadd(7, zeros, 64);
}
/* iters x 4 tile products: tdpbssd (int8) or tdpbf16ps (bf16). */
static AMX_TGT float amx_run(int64_t iters, int int8) {
    amx_setup();
    if (int8) {
        for (int64_t i = 0; i < iters; i++) {
            _tile_dpbssd(0, 4, 6);
            _tile_dpbssd(1, 4, 7);
            _tile_dpbssd(2, 5, 6);
            _tile_dpbssd(3, 5, 7);
        }
    } else {
        for (int64_t i = 0; i < iters; i++) {
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
    }
    float out[256] __attribute__((aligned(64))); /* one accumulator tile: keeps the products live */
    _tile_stored(0, out, 64);
    _tile_release();
    return out[0];
}

/* ---- a team of threads with a barrier around each timed repetition ---- */

typedef enum job_kind { JOB_BW, JOB_FP32, JOB_BF16, JOB_VNNI_INT8, JOB_AMX_BF16, JOB_AMX_INT8 } job_kind;

typedef struct team {
    int threads;
    int reps;
    job_kind job;
    ceilings_kernel kernel;
    int64_t n;          /* floats per array, all threads */
    int sweeps;         /* per repetition */
    int64_t iters;      /* compute kernels: iterations per thread per repetition */
    float *arr[3];
    int touched;        /* 1: the arrays were first-touched already (the pulser's): skip it */
    pthread_barrier_t bar;
    pthread_mutex_t gate_mu;
    pthread_cond_t gate_cv;
    int gate; /* 0 wait, 1 go, -1 abort: workers start only once every thread exists */
    double best_s;
} team;

typedef struct worker {
    team *t;
    int id;
    pthread_t th;
    volatile double sink;
} worker;

static void slice(const team *t, int id, int64_t *lo, int64_t *hi) {
    int64_t per = (t->n / t->threads) & ~(int64_t)15; /* 64-byte aligned slices */
    *lo = per * id;
    *hi = id == t->threads - 1 ? t->n : *lo + per;
}

static void *worker_main(void *arg) {
    worker *w = arg;
    team *t = w->t;
    double sink = 0;
    if (w->id != 0) {
        pthread_mutex_lock(&t->gate_mu);
        while (t->gate == 0) pthread_cond_wait(&t->gate_cv, &t->gate_mu);
        int go = t->gate;
        pthread_mutex_unlock(&t->gate_mu);
        if (go < 0) return NULL;
    }
    if (t->job == JOB_BW && !t->touched) { /* first touch by the thread that will sweep the slice */
        int64_t lo, hi;
        slice(t, w->id, &lo, &hi);
        for (int a = 0; a < ceilings_kernel_arrays(t->kernel); a++)
            for (int64_t i = lo; i < hi; i++) t->arr[a][i] = 1.0f;
    }
    for (int r = 0; r < t->reps; r++) {
        pthread_barrier_wait(&t->bar);
        double t0 = w->id == 0 ? timer_now_s() : 0;
        if (t->job == JOB_BW) {
            int64_t lo, hi;
            slice(t, w->id, &lo, &hi);
            float *a = t->arr[0] + lo;
            const float *b = t->arr[1] ? t->arr[1] + lo : NULL, *c = t->arr[2] ? t->arr[2] + lo : NULL;
            for (int s = 0; s < t->sweeps; s++) sink += ceilings_kernel_run(t->kernel, a, b, c, hi - lo);
        } else if (t->job == JOB_FP32) {
            int lvl = isa_level();
            sink += lvl == 2 ? fma_avx512(t->iters) : lvl == 1 ? fma_avx2(t->iters) : fma_portable(t->iters);
        } else if (t->job == JOB_BF16) {
            sink += bf16_avx512(t->iters);
        } else if (t->job == JOB_VNNI_INT8) {
            sink += (float)vnni_avx512(t->iters);
        } else {
            sink += amx_run(t->iters, t->job == JOB_AMX_INT8);
        }
        pthread_barrier_wait(&t->bar);
        if (w->id == 0) {
            double dt = timer_now_s() - t0;
            if (r == 0 || dt < t->best_s) t->best_s = dt;
        }
    }
    w->sink = sink; /* keeps the kernels' results live */
    return NULL;
}

static xf_status team_run(team *t) {
    if (t->threads < 1 || t->threads > MAX_THREADS)
        return xf_errorf(XF_EINVAL, "ceilings: threads %d out of range (1 to %d)", t->threads, MAX_THREADS);
    worker *ws = calloc((size_t)t->threads, sizeof *ws);
    if (!ws) return xf_errorf(XF_ENOMEM, "ceilings: out of memory");
    if (pthread_barrier_init(&t->bar, NULL, (unsigned)t->threads) != 0) {
        free(ws);
        return xf_errorf(XF_ENOMEM, "ceilings: cannot create a barrier for %d threads", t->threads);
    }
    pthread_mutex_init(&t->gate_mu, NULL);
    pthread_cond_init(&t->gate_cv, NULL);
    t->gate = 0;
    int started = 1;
    xf_status st = XF_OK;
    for (int i = 1; i < t->threads; i++) {
        ws[i].t = t;
        ws[i].id = i;
        if (pthread_create(&ws[i].th, NULL, worker_main, &ws[i]) != 0) {
            st = xf_errorf(XF_ENOMEM, "ceilings: could not start thread %d of %d", i + 1, t->threads);
            break;
        }
        started++;
    }
    pthread_mutex_lock(&t->gate_mu);
    t->gate = st == XF_OK ? 1 : -1;
    pthread_cond_broadcast(&t->gate_cv);
    pthread_mutex_unlock(&t->gate_mu);
    if (st == XF_OK) {
        ws[0].t = t;
        ws[0].id = 0;
        worker_main(&ws[0]);
    }
    for (int i = 1; i < started; i++) pthread_join(ws[i].th, NULL);
    pthread_cond_destroy(&t->gate_cv);
    pthread_mutex_destroy(&t->gate_mu);
    pthread_barrier_destroy(&t->bar);
    free(ws);
    return st;
}

xf_status ceilings_bandwidth(ceilings_kernel k, double ws_bytes, int threads, int reps, ceilings_bw *out) {
    memset(out, 0, sizeof *out);
    if ((int)k < 0 || k >= CEIL_KERNEL_COUNT) return xf_errorf(XF_EINVAL, "ceilings: unknown kernel %d", (int)k);
    if (!(ws_bytes >= 4096 && ws_bytes <= 1e12))
        return xf_errorf(XF_EINVAL, "ceilings: working set %.0f bytes out of range (4 KiB to 1e12 bytes)", ws_bytes);
    if (reps < 1 || reps > 1000) return xf_errorf(XF_EINVAL, "ceilings: reps %d out of range (1 to 1000)", reps);
    int na = ceilings_kernel_arrays(k);
    int64_t n = (int64_t)(ws_bytes / (4.0 * na)) & ~(int64_t)63;
    if (n < 64 * (int64_t)threads) n = 64 * (int64_t)threads;
    team t;
    memset(&t, 0, sizeof t);
    t.threads = threads;
    t.job = JOB_BW;
    t.kernel = k;
    t.n = n;
    size_t bytes = (size_t)n * sizeof(float);
    for (int a = 0; a < na; a++) {
        t.arr[a] = hugemem_alloc((int64_t)bytes); /* huge pages as the weights get them (core/hugemem.h) */
        if (!t.arr[a]) {
            for (int j = 0; j < a; j++) free(t.arr[j]);
            return xf_errorf(XF_ENOMEM, "ceilings: cannot allocate %d arrays of %zu bytes for the %s kernel; try --quick", na,
                             bytes, ceilings_kernel_name(k));
        }
    }
    /* Sweeps per repetition so one repetition moves at least ~MIN_REP_S at 50 GB/s. */
    double per_sweep = ceilings_kernel_bytes(k, n);
    double want = MIN_REP_S * 50e9;
    int sweeps = per_sweep >= want ? 1 : (int)(want / per_sweep) + 1;
    if (sweeps > 100000) sweeps = 100000;
    t.sweeps = sweeps;
    t.reps = reps + 1; /* the first repetition warms TLBs and caches; it still counts toward best-of */
    xf_status st = team_run(&t);
    hugemem_range hr[3];
    for (int a = 0; a < na; a++) hr[a] = (hugemem_range){t.arr[a], bytes >= HUGEMEM_PAGE ? (int64_t)bytes : 0};
    out->huge_bytes = st == XF_OK ? hugemem_granted(hr, na) : 0; /* while the sweeps' pages are resident */
    out->huge_eligible = bytes >= HUGEMEM_PAGE ? (int64_t)bytes * na : 0;
    for (int a = 0; a < na; a++) free(t.arr[a]);
    if (st != XF_OK) return st;
    out->n_elems = n;
    out->sweeps = sweeps;
    out->bytes_per_rep = per_sweep * sweeps;
    out->best_s = t.best_s;
    out->Bps = t.best_s > 0 ? out->bytes_per_rep / t.best_s : 0;
    return XF_OK;
}

static xf_status compute_peak(job_kind job, double flops_per_iter, int threads, int reps, double *flops) {
    team t;
    memset(&t, 0, sizeof t);
    t.threads = threads;
    t.job = job;
    t.reps = 1;
    /* Calibrate: grow iterations until one repetition takes >= MIN_REP_S. */
    t.iters = 1 << 14;
    for (int guard = 0; guard < 30; guard++) {
        xf_status st = team_run(&t);
        if (st != XF_OK) return st;
        if (t.best_s >= MIN_REP_S * 0.5) break;
        t.iters *= 2;
    }
    t.iters = (int64_t)((double)t.iters * (2 * MIN_REP_S / (t.best_s > 1e-9 ? t.best_s : 1e-9))) + 1;
    t.reps = reps;
    xf_status st = team_run(&t);
    if (st != XF_OK) return st;
    *flops = t.best_s > 0 ? flops_per_iter * (double)t.iters * threads / t.best_s : 0;
    return XF_OK;
}

xf_status ceilings_fp32_peak(int threads, int reps, double *flops, char *isa, size_t isa_len) {
    int lvl = isa_level();
    double per = lvl == 2 ? 512.0 : lvl == 1 ? 192.0 : 16.0;
    if (isa && isa_len) snprintf(isa, isa_len, "%s", ceilings_isa());
    return compute_peak(JOB_FP32, per, threads, reps, flops);
}

xf_status ceilings_bf16_peak(int threads, int reps, double *flops) {
    *flops = 0;
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512bf16"))
        return xf_errorf(XF_EUNSUPPORTED, "this CPU has no AVX512_BF16: no BF16 peak measured");
    return compute_peak(JOB_BF16, 1024.0, threads, reps, flops);
}

xf_status ceilings_vnni_peak(int threads, int reps, double *ops) {
    *ops = 0;
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512vnni"))
        return xf_errorf(XF_EUNSUPPORTED, "this CPU has no AVX512_VNNI: no VNNI INT8 peak measured");
    return compute_peak(JOB_VNNI_INT8, 2048.0, threads, reps, ops);
}

/* CPUID.(7,0):EDX bits 22 (AMX-BF16), 24 (AMX-TILE), 25 (AMX-INT8). */
static int cpu_has_amx(void) {
    unsigned a, b, c, d;
    if (__get_cpuid_max(0, NULL) < 7) return 0;
    __cpuid_count(7, 0, a, b, c, d);
    (void)a, (void)b, (void)c;
    return ((d >> 22) & 1u) && ((d >> 24) & 1u) && ((d >> 25) & 1u);
}

#define XF_ARCH_REQ_XCOMP_PERM 0x1023 /* asm/prctl.h, Linux >= 5.16 */
#define XF_XFEATURE_XTILEDATA 18

xf_status ceilings_amx_peak(int threads, int reps, double *bf16_flops, double *int8_ops) {
    *bf16_flops = *int8_ops = 0;
    if (!cpu_has_amx()) return xf_errorf(XF_EUNSUPPORTED, "this CPU has no AMX (amx_tile, amx_bf16, amx_int8)");
    static int granted = -1, perm_errno = 0; /* the permission is the whole process's, asked once */
    if (granted < 0) {
        granted = syscall(SYS_arch_prctl, XF_ARCH_REQ_XCOMP_PERM, XF_XFEATURE_XTILEDATA) == 0;
        perm_errno = granted ? 0 : errno;
    }
    if (!granted)
        return xf_errorf(XF_EUNSUPPORTED, "the CPU has AMX but the OS does not grant it: arch_prctl(ARCH_REQ_XCOMP_PERM, "
                         "XTILEDATA) failed (%s; Linux >= 5.16 and a hypervisor that exposes the tile state are needed)",
                         strerror(perm_errno));
    xf_status st = compute_peak(JOB_AMX_BF16, 4.0 * 16 * 16 * 32 * 2, threads, reps, bf16_flops);
    if (st == XF_OK) st = compute_peak(JOB_AMX_INT8, 4.0 * 16 * 16 * 64 * 2, threads, reps, int8_ops);
    return st;
}

static double parse_size(const char *s) {
    char *end;
    double v = strtod(s, &end);
    if (*end == 'K') v *= 1024;
    else if (*end == 'M') v *= 1024 * 1024;
    else if (*end == 'G') v *= 1024.0 * 1024 * 1024;
    return v;
}

double ceilings_llc_bytes(void) {
    double best = 0;
    int best_level = 0;
    for (int i = 0; i < 16; i++) {
        char path[128], buf[64];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        int level = 0;
        if (fscanf(f, "%d", &level) != 1) level = 0;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        f = fopen(path, "r");
        if (!f) continue;
        int ok = fgets(buf, sizeof buf, f) != NULL;
        fclose(f);
        if (!ok || strncmp(buf, "Instruction", 11) == 0) continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        f = fopen(path, "r");
        if (!f) continue;
        ok = fgets(buf, sizeof buf, f) != NULL;
        fclose(f);
        if (!ok) continue;
        double sz = parse_size(buf);
        if (level > best_level || (level == best_level && sz > best)) {
            best_level = level;
            best = sz;
        }
    }
    return best;
}

static double phys_bytes(void) {
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    return pages > 0 && psz > 0 ? (double)pages * (double)psz : 0;
}

xf_status ceilings_measure(const ceilings_opts *o, ceilings_result *out) {
    memset(out, 0, sizeof *out);
    if (o->threads < 1 || o->threads > MAX_THREADS)
        return xf_errorf(XF_EINVAL, "threads %d out of range (1 to %d)", o->threads, MAX_THREADS);
    if (o->reps < 0 || o->reps > 1000) return xf_errorf(XF_EINVAL, "reps %d out of range (1 to 1000)", o->reps);
    double t0 = timer_now_s();
    int reps = o->reps ? o->reps : o->quick ? 3 : 5;
    out->threads = o->threads;
    out->reps = reps;
    out->llc_bytes = ceilings_llc_bytes();
    double llc = out->llc_bytes > 0 ? out->llc_bytes : 32.0 * 1024 * 1024;
    double dram = o->dram_ws_bytes > 0 ? o->dram_ws_bytes : (o->quick ? 2.0 : 4.0) * llc;
    if (o->dram_ws_bytes <= 0 && dram < 256.0 * 1024 * 1024) dram = 256.0 * 1024 * 1024;
    double ram = phys_bytes();
    if (o->dram_ws_bytes <= 0 && ram > 0 && dram > ram / 4) dram = ram / 4;
    double cache = o->cache_ws_bytes > 0 ? o->cache_ws_bytes : llc / 4;
    out->dram_ws_bytes = o->skip_dram ? 0 : dram;
    out->cache_ws_bytes = cache;
    xf_status st;
    for (int k = 0; k < CEIL_KERNEL_COUNT; k++) {
        if (!o->skip_dram && (st = ceilings_bandwidth((ceilings_kernel)k, dram, o->threads, reps, &out->dram[k])) != XF_OK)
            return xf_error_prefix(st, "DRAM %s: ", ceilings_kernel_name((ceilings_kernel)k));
        if ((st = ceilings_bandwidth((ceilings_kernel)k, cache, o->threads, reps, &out->cache[k])) != XF_OK)
            return xf_error_prefix(st, "in-cache %s: ", ceilings_kernel_name((ceilings_kernel)k));
    }
    if (!o->skip_compute) {
        if ((st = ceilings_fp32_peak(o->threads, reps, &out->fp32_flops, out->fp32_isa, sizeof out->fp32_isa)) != XF_OK)
            return xf_error_prefix(st, "FP32 peak: ");
        st = ceilings_bf16_peak(o->threads, reps, &out->bf16_flops);
        if (st == XF_OK)
            snprintf(out->bf16_isa, sizeof out->bf16_isa, "avx512_bf16");
        else if (st == XF_EUNSUPPORTED) {
            snprintf(out->bf16_isa, sizeof out->bf16_isa, "none");
            xf_error_clear();
        } else
            return xf_error_prefix(st, "BF16 peak: ");
        st = ceilings_vnni_peak(o->threads, reps, &out->vnni_int8_ops);
        if (st == XF_EUNSUPPORTED) xf_error_clear();
        else if (st != XF_OK) return xf_error_prefix(st, "VNNI INT8 peak: ");
        st = ceilings_amx_peak(o->threads, reps, &out->amx_bf16_flops, &out->amx_int8_ops);
        if (st == XF_OK)
            snprintf(out->amx_note, sizeof out->amx_note, "amx tdpbf16ps / tdpbssd");
        else if (st == XF_EUNSUPPORTED) {
            snprintf(out->amx_note, sizeof out->amx_note, "%s", xf_error_msg());
            xf_error_clear();
        } else
            return xf_error_prefix(st, "AMX peaks: ");
    }
    out->seconds = timer_now_s() - t0;
    return XF_OK;
}

void ceilings_huge_describe(const ceilings_result *r, char *buf, size_t len) {
    if (r->dram_ws_bytes <= 0) {
        snprintf(buf, len, "no DRAM working set measured");
        return;
    }
    hugemem_describe(buf, len, r->dram[CEIL_READ].huge_bytes, r->dram[CEIL_READ].huge_eligible);
}

char *openblas_get_corename(void); /* OpenBLAS, linked by the CPU backend: the kernel set it picked at run time */
char *openblas_get_config(void);   /* and its build string */

const char *ceilings_blas_coretype_fix(void) {
    if (getenv("OPENBLAS_CORETYPE")) return NULL;
    const char *core = openblas_get_corename();
    if (!core) return NULL;
    static const char *weak[] = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom", "Katmai", "Coppermine",
                                 "Northwood", "Banias", "Sandybridge", "Unknown"};
    int is_weak = 0;
    for (size_t i = 0; i < sizeof weak / sizeof weak[0]; i++) is_weak |= strcasecmp(core, weak[i]) == 0;
    if (!is_weak) return NULL;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && strcasecmp(core, "Haswell") != 0) return "Haswell";
    return NULL;
}

int ceilings_blas_coretype_weak(char *buf, size_t len) {
    if (len) buf[0] = 0;
    const char *env = getenv("OPENBLAS_CORETYPE");
    if (!env || !*env) return 0;
    static const char *wide[] = {"SkylakeX", "Cooperlake", "SapphireRapids"}; /* OpenBLAS's AVX-512 cores */
    for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++)
        if (strcasecmp(env, wide[i]) == 0) return 0;
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f")) return 0;
    snprintf(buf, len, "OPENBLAS_CORETYPE=%.32s from the environment: no AVX-512 kernels on this AVX-512 CPU", env);
    return 1;
}

void ceilings_blas_describe(char *buf, size_t len) {
    char weak[128];
    const int w = ceilings_blas_coretype_weak(weak, sizeof weak);
    snprintf(buf, len, "%.100s (core %.32s)%s%s", openblas_get_config(), openblas_get_corename(), w ? "; " : "", weak);
}

/* Measuring programs restart themselves once (from main(), before anything else) with two run-time settings that the libraries
 * read only when they load:
 * - OPENBLAS_CORETYPE, when OpenBLAS fell back to generic kernels on this CPU
 *   (ceilings_blas_coretype_fix): 4-6x slower prefill GEMMs otherwise;
 * - GOMP_SPINCOUNT when neither it nor OMP_WAIT_POLICY is set: idle OpenMP threads spin a while at
 *   a barrier, then sleep. libgomp's default spin (300000) on a shared or busy machine stalls a
 *   2-thread decode a whole time slice per op (measured 10x slower at load 8); sleeping at once
 *   (OMP_WAIT_POLICY=passive) makes every op pay a futex wake-up, which on this VM cost
 *   stories15m's decode 20% (TPOT 1.68 ms passive vs 1.44 ms with 200 spins, idle machine),
 *   while under load 200 spins measured like passive (2.88 vs 2.71 ms). On idle CPUs 200 spins
 *   (~10 us) still let the second thread sleep in the serial gaps between a tinyllama step's ops:
 *   3000 made int8 decode 9% faster (TPOT 46.1-46.7 -> 42.4-42.5 ms), fp32 4% (149 -> 143), bf16
 *   4% (79.6 -> 76.6); beside one busy-looping process it made them slower (int8 82.3 -> 86.7-87.9
 *   ms, stories15m 2.56 -> 4.54 ms). So the CPUs are looked at first (omp_spin_choose in
 *   probes/omp_spin.c): 3000 when they are free, 200 when they stay busy.
 * A value the user set is never changed. Returns when no restart is needed or exec failed. */

void ceilings_env_reexec(int argc, char **argv) {
    if (getenv("XFPROF_REEXEC")) return; /* already restarted: the record's env names the kernels */
    /* Under valgrind, /proc/self/exe is valgrind's tool, which refuses to start without its launcher
     * ("valgrind: You cannot run '.../xfprof' directly"): go on as loaded (xfprof run --callgrind
     * starts its child with the parent's settings already in the environment). */
    if (callgrind_running()) return;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return;
    const char *fix = ceilings_blas_coretype_fix();
    int set_omp = getenv("OMP_WAIT_POLICY") == NULL && getenv("GOMP_SPINCOUNT") == NULL;
    if (!fix && !set_omp) return;
    char **nargv = calloc((size_t)argc + 1, sizeof *nargv);
    if (!nargv) return;
    for (int i = 0; i < argc; i++) nargv[i] = argv[i];
    if (fix) setenv("OPENBLAS_CORETYPE", fix, 1);
    if (set_omp) {
        char why[256];
        setenv("GOMP_SPINCOUNT", omp_spin_choose(why, sizeof why), 1);
        setenv(OMP_SPIN_WHY_ENV, why, 1);
    }
    setenv("XFPROF_REEXEC", "1", 1);
    fflush(NULL);
    execv("/proc/self/exe", nargv);
    /* exec failed: go on as loaded, and say what would help */
    if (fix) fprintf(stderr, "xfprof: note: OpenBLAS picked generic kernels; set OPENBLAS_CORETYPE=%s for fast prefill GEMMs\n", fix);
    if (fix) unsetenv("OPENBLAS_CORETYPE");
    if (set_omp) unsetenv("GOMP_SPINCOUNT");
    if (set_omp) unsetenv(OMP_SPIN_WHY_ENV);
    unsetenv("XFPROF_REEXEC");
    free(nargv);
}

void ceilings_cpu_model(char *buf, size_t len) {
    snprintf(buf, len, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *c = strchr(line, ':');
            if (c) {
                c++;
                while (*c == ' ' || *c == '\t') c++;
                size_t n = strlen(c);
                while (n && (c[n - 1] == '\n' || c[n - 1] == ' ')) c[--n] = '\0';
                snprintf(buf, len, "%s", c);
            }
            break;
        }
    }
    fclose(f);
}

void ceilings_to_device(const ceilings_result *r, device_spec *d) {
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "cpu");
    ceilings_cpu_model(d->description, sizeof d->description);
    snprintf(d->kind, sizeof d->kind, "cpu");
    char host[64] = "unknown-host", date[32] = "";
    gethostname(host, sizeof host - 1);
    time_t now = time(NULL);
    struct tm tmv;
    gmtime_r(&now, &tmv);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    snprintf(d->source, sizeof d->source, "measured by xfprof machine on %s %s, %d threads", host, date, r->threads);
    d->measured = 1;
    d->memory_bytes = phys_bytes();
    d->bandwidth_Bps = r->dram[CEIL_READ].Bps;
    d->cache_bytes = r->llc_bytes;
    d->cache_bandwidth_Bps = r->cache[CEIL_READ].Bps;
    d->peak_flops[XF_COMPUTE_FP32] = r->fp32_flops;
    /* a CPU's tensor16: the AMX BF16 tiles where measured (what oneDNN's bf16 GEMMs run on), else AVX512-BF16 */
    d->peak_flops[XF_COMPUTE_TENSOR16] = r->amx_bf16_flops > 0 ? r->amx_bf16_flops : r->bf16_flops;
    /* int8: the AMX INT8 tiles (the int8 kernels' 4+ token path), else AVX512-VNNI (all of them); 0 without */
    d->peak_flops[XF_COMPUTE_INT8] = r->amx_int8_ops > 0 ? r->amx_int8_ops : r->vnni_int8_ops;
}

xf_status ceilings_machine_path(char *buf, size_t len) {
    const char *env = getenv("XFPROF_MACHINE_FILE");
    if (env && *env) {
        if ((size_t)snprintf(buf, len, "%s", env) >= len) return xf_errorf(XF_EINVAL, "XFPROF_MACHINE_FILE is too long");
        return XF_OK;
    }
    const char *home = getenv("HOME");
    if (!home || !*home)
        return xf_errorf(XF_EINVAL, "neither XFPROF_MACHINE_FILE nor HOME is set: say where the machine file goes with -o FILE");
    if ((size_t)snprintf(buf, len, "%s/.cache/xfprof/machine.json", home) >= len) return xf_errorf(XF_EINVAL, "HOME is too long");
    return XF_OK;
}

/* mkdir -p of path's folder. */
static xf_status make_parent(const char *path) {
    char dir[4096];
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) return xf_errorf(XF_EINVAL, "path too long: %.64s...", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return XF_OK;
    *slash = '\0';
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) return xf_errorf(XF_EIO, "cannot create folder %s: %s", dir, strerror(errno));
        *p = '/';
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) return xf_errorf(XF_EIO, "cannot create folder %s: %s", dir, strerror(errno));
    return XF_OK;
}

static int add_bw(cJSON *o, const char *key, const ceilings_bw *b) {
    cJSON *x = cJSON_AddObjectToObject(o, key);
    return x && json_add_number(x, "bytes_per_s", b->Bps) && json_add_number(x, "bytes_per_rep", b->bytes_per_rep) &&
           json_add_number(x, "best_s", b->best_s);
}

xf_status ceilings_save(const device_spec *d, const ceilings_result *r, const char *path) {
    char *dev = device_spec_to_json(d);
    if (!dev) return xf_errorf(XF_ENOMEM, "out of memory writing the machine file");
    cJSON *devo = cJSON_Parse(dev);
    free(dev);
    cJSON *root = cJSON_CreateObject();
    int ok = devo && root && cJSON_AddStringToObject(root, "format", "xfprof-devices") &&
             cJSON_AddNumberToObject(root, "version", 1);
    cJSON *arr = ok ? cJSON_AddArrayToObject(root, "devices") : NULL;
    ok = ok && arr;
    if (ok && r) {
        cJSON *det = cJSON_AddObjectToObject(devo, "measured_detail");
        ok = det && cJSON_AddNumberToObject(det, "threads", r->threads) && cJSON_AddNumberToObject(det, "reps", r->reps) &&
             json_add_number(det, "llc_bytes", r->llc_bytes) && json_add_number(det, "dram_working_set_bytes", r->dram_ws_bytes) &&
             json_add_number(det, "cache_working_set_bytes", r->cache_ws_bytes);
        for (int k = 0; ok && k < CEIL_KERNEL_COUNT; k++) {
            char key[32];
            snprintf(key, sizeof key, "dram_%s", ceilings_kernel_name((ceilings_kernel)k));
            if (r->dram_ws_bytes > 0) ok = add_bw(det, key, &r->dram[k]);
            snprintf(key, sizeof key, "cache_%s", ceilings_kernel_name((ceilings_kernel)k));
            if (ok) ok = add_bw(det, key, &r->cache[k]);
        }
        ok = ok && json_add_number(det, "fp32_flops", r->fp32_flops) && cJSON_AddStringToObject(det, "fp32_isa", r->fp32_isa) &&
             json_add_number(det, "bf16_flops", r->bf16_flops) && cJSON_AddStringToObject(det, "bf16_isa", r->bf16_isa) &&
             json_add_number(det, "vnni_int8_ops", r->vnni_int8_ops) &&
             json_add_number(det, "amx_bf16_flops", r->amx_bf16_flops) && json_add_number(det, "amx_int8_ops", r->amx_int8_ops) &&
             cJSON_AddStringToObject(det, "amx", r->amx_note);
        char hp[160];
        ceilings_huge_describe(r, hp, sizeof hp);
        ok = ok && cJSON_AddStringToObject(det, "dram_read_huge_pages", hp);
    }
    if (ok) {
        cJSON_AddItemToArray(arr, devo);
        devo = NULL;
    }
    char *text = ok ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    cJSON_Delete(devo);
    if (!text) return xf_errorf(XF_ENOMEM, "out of memory writing the machine file");
    xf_status st = path && strcmp(path, "-") != 0 ? make_parent(path) : XF_OK;
    if (st == XF_OK) {
        size_t n = strlen(text);
        text[n] = '\n'; /* the NUL's byte becomes the final newline; n + 1 bytes are owned */
        st = file_write_atomic(path, text, n + 1);
    }
    free(text);
    return st;
}

xf_status ceilings_load(const char *path, device_spec *out) {
    if (access(path, R_OK) != 0) return xf_errorf(XF_EIO, "no machine file at %s (run 'xfprof machine' to make one)", path);
    device_list l = {0};
    xf_status st = device_list_load(path, &l);
    if (st != XF_OK) return st;
    if (l.n < 1) {
        device_list_free(&l);
        return xf_errorf(XF_EINVAL, "%s: the machine file lists no device", path);
    }
    *out = l.items[0];
    device_list_free(&l);
    return XF_OK;
}

xf_status ceilings_gpu_machine_path(char *buf, size_t len) {
    const char *env = getenv("XFPROF_GPU_MACHINE_FILE");
    if (env && env[0]) {
        if ((size_t)snprintf(buf, len, "%s", env) >= len) return xf_errorf(XF_EINVAL, "XFPROF_GPU_MACHINE_FILE is too long");
        return XF_OK;
    }
    char cpu[4096];
    xf_status s = ceilings_machine_path(cpu, sizeof cpu);
    if (s) return s;
    size_t n = strlen(cpu);
    if (n >= 5 && !strcmp(cpu + n - 5, ".json")) cpu[n - 5] = '\0';
    if ((size_t)snprintf(buf, len, "%s-cuda.json", cpu) >= len) return xf_errorf(XF_EINVAL, "the GPU machine file path is too long");
    return XF_OK;
}


/* ---- the pulser: short probes between the repetitions of a run (concurrent ceilings) ---- */

struct ceilings_pulser {
    int threads;
    int in_cache;       /* 1: sweeps a small array that stays in the LLC; 0: reads a larger one once, flushed first */
    float *arr;         /* (n) floats, first-touched by the pulse threads: in-cache at init, DRAM by ceilings_pulser_reserve */
    int64_t n;          /* floats in arr */
    double bw_guess, fp_guess, max_budget_s; /* pulses are sized at the machine file's (quiet) rates */
    double fma_per_iter;/* FLOPs per iteration per thread of the FMA kernel */
    volatile double sink;/* keeps the kernels' results live */
};

/* The pulses run on OpenMP threads, the pool the model's kernels use: warm, so a pulse costs its
 * own time and not a thread start (pthreads on a busy machine took ~1 ms a pulse). Each thread
 * reads (and first touched) its own 64-byte aligned slice. */
static void pulse_slice(int64_t n, int threads, int id, int64_t *lo, int64_t *hi) {
    int64_t per = (n / threads) & ~(int64_t)15;
    *lo = per * id;
    *hi = id == threads - 1 ? n : *lo + per;
}

static xf_status pulse_bw(ceilings_pulser *p, int64_t n, int sweeps, int touched, double *Bps) {
    double sink = 0;
    float *arr = p->arr;
    /* Timed from before the threads are woken to after the last one is done, as the model's ops
     * are: on a core shared with another process the wait for a time slice is part of both. */
    double t0 = timer_now_s();
#pragma omp parallel num_threads(p->threads) reduction(+ : sink)
    {
        int id = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t lo, hi;
        pulse_slice(n, nt, id, &lo, &hi);
        if (!touched)
            for (int64_t i = lo; i < hi; i++) arr[i] = 1.0f;
        for (int k = 0; touched && k < sweeps; k++) sink += ceilings_kernel_run(CEIL_READ, arr + lo, NULL, NULL, hi - lo);
    }
    double t1 = timer_now_s();
    p->sink += sink;
    *Bps = t1 > t0 ? ceilings_kernel_bytes(CEIL_READ, n) * sweeps / (t1 - t0) : 0;
    return XF_OK;
}

static xf_status pulse_fma(ceilings_pulser *p, int64_t iters, double *flops) {
    double sink = 0;
    int lvl = isa_level(), used = p->threads;
    double t0 = timer_now_s(); /* as pulse_bw: the wait for the threads is part of it */
#pragma omp parallel num_threads(p->threads) reduction(+ : sink)
    {
#pragma omp master
        used = omp_get_num_threads();
        sink += lvl == 2 ? fma_avx512(iters) : lvl == 1 ? fma_avx2(iters) : fma_portable(iters);
    }
    double t1 = timer_now_s();
    p->sink += sink;
    *flops = t1 > t0 ? p->fma_per_iter * (double)iters * used / (t1 - t0) : 0;
    return XF_OK;
}

/* CPUID.(7,0):EBX bit 23 (CLFLUSHOPT). */
static int cpu_has_clflushopt(void) {
    static int has = -1;
    if (has < 0) {
        unsigned a = 0, b = 0, c = 0, d = 0;
        has = 0;
        if (__get_cpuid_max(0, NULL) >= 7) {
            __cpuid_count(7, 0, a, b, c, d);
            has = (int)((b >> 23) & 1u);
        }
        (void)a, (void)c, (void)d;
    }
    return has;
}

static __attribute__((target("clflushopt"))) void flush_lines_opt(float *a, int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; i += 16) _mm_clflushopt(a + i);
    _mm_sfence();
}

static void flush_lines(float *a, int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; i += 16) _mm_clflush(a + i);
    _mm_mfence();
}

/* Evicts arr[0, n) from every cache level (each thread its slice), so the read that
 * follows comes from DRAM however large the last-level cache is. clflushopt where the CPU has it:
 * clflush is ordered line after line, and on a 2-vCPU Xeon (EMR) it took 103 ms per 48 MB against
 * clflushopt's 2.1 ms (the read after either ran at DRAM speed), so a DRAM pulse asked for 1 ms
 * took 19 ms, the pulses 4.6% of a quiet run, and the runner's pulse scale, shrinking the read to
 * make up for it, left a read too short to measure: "contended" on an idle machine. */
static void pulse_flush(ceilings_pulser *p, int64_t n) {
    float *arr = p->arr;
    const int opt = cpu_has_clflushopt() && !callgrind_running(); /* valgrind 3.19 reports it but cannot run it (SIGILL) */
#pragma omp parallel num_threads(p->threads)
    {
        int64_t lo, hi;
        pulse_slice(n, omp_get_num_threads(), omp_get_thread_num(), &lo, &hi);
        if (opt) flush_lines_opt(arr, lo, hi);
        else flush_lines(arr, lo, hi);
    }
}

/* Floats the read part of a pulse of budget_s covers: two thirds of it at the quiet rate. */
static int64_t pulse_floats(const ceilings_pulser *p, double budget_s) {
    int64_t n = (int64_t)(p->bw_guess * budget_s * 2.0 / 3.0 / 4.0) & ~(int64_t)63;
    return n < 1024 * (int64_t)p->threads ? 1024 * (int64_t)p->threads : n;
}

/* arr holds at least n floats, first-touched by the pulse threads (a larger array replaces it). */
static xf_status pulser_grow(ceilings_pulser *p, int64_t n) {
    if (n <= p->n) return XF_OK;
    float *a = hugemem_alloc(n * (int64_t)sizeof(float)); /* as the read ceiling's arrays */
    if (!a)
        return xf_errorf(XF_ENOMEM, "concurrent ceilings: out of memory for the bandwidth pulse (%.1f MiB); free memory or use --no-concurrent",
                         (double)n * 4 / 1048576.0);
    free(p->arr);
    p->arr = a;
    p->n = n;
    double bps;
    return pulse_bw(p, n, 1, 0, &bps); /* first touch, every thread its slice */
}

xf_status ceilings_pulser_init(int threads, int in_cache, double bw_guess_Bps, double fp32_guess_flops, double max_budget_s,
                               ceilings_pulser **out) {
    *out = NULL;
    if (threads < 1 || threads > MAX_THREADS)
        return xf_errorf(XF_EINVAL, "concurrent ceilings: threads %d out of range (1 to %d)", threads, MAX_THREADS);
    if (!(max_budget_s >= 1e-4 && max_budget_s <= 0.1))
        return xf_errorf(XF_EINVAL, "concurrent ceilings: pulse budget %g s out of range (1e-4 to 0.1 s)", max_budget_s);
    if (!(bw_guess_Bps > 0 && bw_guess_Bps < 1e14) || !(fp32_guess_flops > 0 && fp32_guess_flops < 1e17))
        return xf_errorf(XF_EINVAL, "concurrent ceilings: the machine's bandwidth and FP32 peak must be positive");
    ceilings_pulser *p = calloc(1, sizeof *p);
    if (!p) return xf_errorf(XF_ENOMEM, "concurrent ceilings: out of memory");
    p->threads = threads;
    p->in_cache = in_cache;
    p->bw_guess = bw_guess_Bps;
    p->fp_guess = fp32_guess_flops;
    p->max_budget_s = max_budget_s;
    int lvl = isa_level();
    p->fma_per_iter = lvl == 2 ? 512.0 : lvl == 1 ? 192.0 : 16.0;
    /* In-cache: 3 MiB per thread, above the private L2 caches, far inside the LLC the weights fit
     * in, swept as often as the budget allows. DRAM: the part a pulse reads, flushed from the caches
     * before each read (an LLC larger than the array would otherwise serve it), sized by
     * ceilings_pulser_reserve for the budgets the run asks for. */
    xf_status s = in_cache ? pulser_grow(p, (int64_t)threads * (3 << 18)) : XF_OK;
    if (s) {
        ceilings_pulser_free(p);
        return s;
    }
    *out = p;
    return XF_OK;
}

xf_status ceilings_pulser_reserve(ceilings_pulser *p, double budget_s) {
    if (!p) return xf_errorf(XF_EINVAL, "concurrent ceilings: no pulser");
    if (p->in_cache) return XF_OK;
    if (!(budget_s > 0) || budget_s > p->max_budget_s) budget_s = p->max_budget_s;
    return pulser_grow(p, pulse_floats(p, budget_s));
}

xf_status ceilings_pulser_run(ceilings_pulser *p, double budget_s, ceilings_pulse *out) {
    memset(out, 0, sizeof *out);
    if (!p) return xf_errorf(XF_EINVAL, "concurrent ceilings: no pulser");
    if (!(budget_s > 0)) budget_s = p->max_budget_s;
    if (budget_s > p->max_budget_s) budget_s = p->max_budget_s;
    xf_status s = ceilings_pulser_reserve(p, budget_s); /* a no-op where the runner reserved it */
    if (s) return s;
    double t0 = timer_now_s();
    int64_t want = pulse_floats(p, budget_s);
    if (p->in_cache) {
        int sweeps = (int)((double)want / (double)p->n + 0.5);
        if ((s = pulse_bw(p, p->n, sweeps < 1 ? 1 : sweeps, 1, &out->bandwidth_Bps))) return s;
    } else {
        int64_t n = want < p->n ? want : p->n;
        pulse_flush(p, n); /* from DRAM even where the LLC could hold it (not timed) */
        if ((s = pulse_bw(p, n, 1, 1, &out->bandwidth_Bps))) return s;
    }
    double it = p->fp_guess / p->threads * budget_s / 3.0 / p->fma_per_iter;
    if ((s = pulse_fma(p, it < 64 ? 64 : (int64_t)it, &out->fp32_flops))) return s;
    out->seconds = timer_now_s() - t0;
    return XF_OK;
}

void ceilings_pulser_free(ceilings_pulser *p) {
    if (!p) return;
    free(p->arr);
    free(p);
}
