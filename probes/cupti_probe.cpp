/* The CUPTI probe (cupti_probe.h), C++ because cupti_profiler_host.h is C++-only. libcupti is
 * loaded with dlopen; every entry point is resolved by name into a typed pointer. The host-side
 * logic (names, ids, attribution, metric tables) is plain C in cupti_host.c. */
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>
#include <dlfcn.h>
#include <math.h>
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

extern "C" {
#include "probes/cupti_host.h"
#include "probes/cupti_probe.h"
}
#include "reference_model/cuda_backend.h"

namespace {

/* A zeroed CUPTI parameter struct with its size set. */
template <class T> T mk(size_t size) {
    T t;
    memset(&t, 0, sizeof t);
    t.structSize = size;
    return t;
}

#define XF_CUPTI_FUNCS(X)                                                                                   \
    X(cuptiGetResultString) X(cuptiActivityEnable) X(cuptiActivityDisable) X(cuptiActivityRegisterCallbacks) \
    X(cuptiActivityFlushAll) X(cuptiActivityGetNextRecord) X(cuptiActivityGetNumDroppedRecords)               \
    X(cuptiActivityPushExternalCorrelationId) X(cuptiActivityPopExternalCorrelationId)                        \
    X(cuptiProfilerInitialize) X(cuptiProfilerDeInitialize) X(cuptiDeviceGetChipName)                         \
    X(cuptiProfilerGetCounterAvailability) X(cuptiProfilerHostInitialize) X(cuptiProfilerHostDeinitialize)    \
    X(cuptiProfilerHostConfigAddMetrics) X(cuptiProfilerHostGetConfigImageSize)                               \
    X(cuptiProfilerHostGetConfigImage) X(cuptiProfilerHostGetNumOfPasses) X(cuptiProfilerHostGetRangeName)    \
    X(cuptiProfilerHostEvaluateToGpuValues) X(cuptiRangeProfilerEnable) X(cuptiRangeProfilerDisable)          \
    X(cuptiRangeProfilerGetCounterDataSize) X(cuptiRangeProfilerCounterDataImageInitialize)                   \
    X(cuptiRangeProfilerSetConfig) X(cuptiRangeProfilerStart) X(cuptiRangeProfilerStop)                       \
    X(cuptiRangeProfilerPushRange) X(cuptiRangeProfilerPopRange) X(cuptiRangeProfilerDecodeData)              \
    X(cuptiRangeProfilerGetCounterDataInfo)

struct cupti_api {
    void *lib;
#define X(f) decltype(&::f) f;
    XF_CUPTI_FUNCS(X)
#undef X
};

cupti_api g_api;
xf_status g_api_status = XF_OK;
char g_api_msg[512];
pthread_once_t g_api_once = PTHREAD_ONCE_INIT;

void load_cupti_once() {
    const char *names[] = {"libcupti.so.13", "libcupti.so", NULL};
    const char *err = "dlopen failed";
    for (int i = 0; names[i] && !g_api.lib; i++) {
        g_api.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!g_api.lib) err = dlerror();
    }
    if (!g_api.lib) {
        g_api_status = XF_EUNSUPPORTED;
        snprintf(g_api_msg, sizeof g_api_msg,
                 "CUPTI not found (%s): set LD_LIBRARY_PATH to the CUDA toolkit's lib64 (or extras/CUPTI/lib64)", err);
        return;
    }
#define X(f)                                                                                                 \
    g_api.f = (decltype(g_api.f))dlsym(g_api.lib, #f);                                                       \
    if (!g_api.f) {                                                                                          \
        g_api_status = XF_EUNSUPPORTED;                                                                      \
        snprintf(g_api_msg, sizeof g_api_msg, "CUPTI: %s missing from the library found (CUDA 13 needed)", #f); \
        return;                                                                                              \
    }
    XF_CUPTI_FUNCS(X)
#undef X
}

/* cupti_result_status (cupti_host.c) classifies by number: the numbers must be cupti_result.h's. */
static_assert(CUPTI_SUCCESS == 0 && CUPTI_ERROR_API_NOT_IMPLEMENTED == 11 && CUPTI_ERROR_NOT_COMPATIBLE == 14 &&
                  CUPTI_ERROR_NOT_INITIALIZED == 15 && CUPTI_ERROR_HARDWARE_BUSY == 26 && CUPTI_ERROR_NOT_SUPPORTED == 27 &&
                  CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED == 33 && CUPTI_ERROR_INSUFFICIENT_PRIVILEGES == 35 &&
                  CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED == 36 && CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED == 38 &&
                  CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED == 39 &&
                  CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES == 40 &&
                  CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED == 41 && CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED == 42 &&
                  CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED == 43 && CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED == 44 &&
                  CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED == 45 && CUPTI_ERROR_INVALID_CHIP_NAME == 46,
              "cupti_result.h renumbered CUptiResult: update cupti_result_status in probes/cupti_host.c");

xf_status cupti_fail(CUptiResult r, const char *what) {
    const char *s = "?";
    if (g_api.cuptiGetResultString) g_api.cuptiGetResultString(r, &s);
    int priv = 0;
    xf_status st = cupti_result_status((int)r, &priv);
    if (priv) return xf_errorf(XF_EUNSUPPORTED, "CUPTI %s: %s (%s)", what, cupti_privileges_hint(), s);
    if (st == XF_EUNSUPPORTED) return xf_errorf(XF_EUNSUPPORTED, "CUPTI %s: not available here: %s (%d)", what, s, (int)r);
    return xf_errorf(XF_EIO, "CUPTI %s: %s (%d)", what, s, (int)r);
}

#define CU_TRY(call, what)                                  \
    do {                                                    \
        CUptiResult r_ = (call);                            \
        if (r_ != CUPTI_SUCCESS) return cupti_fail(r_, what); \
    } while (0)

/* ---- activity buffers (CUPTI calls these from its own thread) ---- */

/* The kinds the activity mode enables. RUNTIME and DRIVER are not read (buffer_completed skips
 * them) but are needed: cupti_activity.h, cuptiActivityPushExternalCorrelationId: "When a CUPTI
 * activity API record is created while within an external API region and
 * CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION is enabled, the activity API record will be preceded by
 * a CUpti_ActivityExternalCorrelation record" -- no API records, no external correlation records,
 * and every kernel would be unattributed. Both API kinds, because a kernel's correlationId is "the
 * correlation ID in the driver or runtime API activity record that launched the kernel"
 * (CUpti_ActivityKernel10): ours launch through the runtime, cuBLAS's may not. */
const CUpti_ActivityKind k_activity_kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                                               CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER};

pthread_mutex_t g_act_mu = PTHREAD_MUTEX_INITIALIZER;
std::vector<cupti_kernel_rec> g_kernels;
std::vector<cupti_extcorr_rec> g_extcorr;
uint64_t g_dropped = 0;
size_t g_buf_bytes = 8u << 20;

void CUPTIAPI buffer_requested(uint8_t **buf, size_t *size, size_t *max_records) {
    *buf = (uint8_t *)aligned_alloc(8, g_buf_bytes);
    *size = *buf ? g_buf_bytes : 0;
    *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid) {
    (void)size;
    CUpti_Activity *rec = NULL;
    pthread_mutex_lock(&g_act_mu);
    while (g_api.cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
            cupti_kernel_rec r;
            memset(&r, 0, sizeof r);
            r.start_ns = k->start;
            r.end_ns = k->end;
            r.correlation_id = k->correlationId;
            snprintf(r.name, sizeof r.name, "%s", k->name ? k->name : "?");
            g_kernels.push_back(r);
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
            const CUpti_ActivityExternalCorrelation *e = (const CUpti_ActivityExternalCorrelation *)rec;
            if (e->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0)
                g_extcorr.push_back(cupti_extcorr_rec{e->correlationId, e->externalId});
        }
    }
    size_t dropped = 0;
    if (g_api.cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS) g_dropped += dropped;
    pthread_mutex_unlock(&g_act_mu);
    free(buf);
}

/* ---- counters ---- */

struct metric_set {
    std::vector<const char *> names;
    CUpti_Profiler_Host_Object *host = nullptr;
    std::vector<uint8_t> config, counter_data;
    int configured = 0, done = 0;
};

} // namespace

struct cupti_probe {
    int ordinal;
    cupti_mode mode;
    int max_ranges;
    CUcontext ctx;
    std::string chip;
    std::vector<uint8_t> avail;
    CUpti_RangeProfiler_Object *rp;
    metric_set sets[CUPTI_METRIC_SETS];
    int cur_set; /* -1 when no pass is open */
    int in_pass;
    int depth;
    /* results, keyed by range name */
    std::vector<std::string> rnames;
    std::vector<cupti_metric_values> rvals;
};

namespace {

xf_status current_ctx(CUcontext *out) {
    void *fn = NULL;
    cudaDriverEntryPointQueryResult q;
    cudaError_t e = cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, 12000, cudaEnableDefault, &q);
    if (e != cudaSuccess || !fn || q != cudaDriverEntryPointSuccess)
        return xf_errorf(XF_EUNSUPPORTED, "no CUDA device present: cannot reach the driver's cuCtxGetCurrent");
    CUresult r = ((CUresult(*)(CUcontext *))fn)(out);
    if (r != CUDA_SUCCESS || !*out) return xf_errorf(XF_EIO, "CUPTI: no current CUDA context");
    return XF_OK;
}

xf_status set_configure(cupti_probe *p, metric_set *m) {
    auto hi = mk<CUpti_Profiler_Host_Initialize_Params>(CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE);
    hi.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    hi.pChipName = p->chip.c_str();
    hi.pCounterAvailabilityImage = p->avail.data();
    CU_TRY(g_api.cuptiProfilerHostInitialize(&hi), "profiler host initialize");
    m->host = hi.pHostObject;
    auto am = mk<CUpti_Profiler_Host_ConfigAddMetrics_Params>(CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE);
    am.pHostObject = m->host;
    am.ppMetricNames = m->names.data();
    am.numMetrics = m->names.size();
    CU_TRY(g_api.cuptiProfilerHostConfigAddMetrics(&am), "add metrics");
    auto cs = mk<CUpti_Profiler_Host_GetConfigImageSize_Params>(CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE);
    cs.pHostObject = m->host;
    CU_TRY(g_api.cuptiProfilerHostGetConfigImageSize(&cs), "config image size");
    m->config.assign(cs.configImageSize, 0);
    auto ci = mk<CUpti_Profiler_Host_GetConfigImage_Params>(CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE);
    ci.pHostObject = m->host;
    ci.configImageSize = m->config.size();
    ci.pConfigImage = m->config.data();
    CU_TRY(g_api.cuptiProfilerHostGetConfigImage(&ci), "config image");
    auto ds = mk<CUpti_RangeProfiler_GetCounterDataSize_Params>(CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE);
    ds.pRangeProfilerObject = p->rp;
    ds.pMetricNames = m->names.data();
    ds.numMetrics = m->names.size();
    ds.maxNumOfRanges = (size_t)p->max_ranges;
    ds.maxNumRangeTreeNodes = (uint32_t)p->max_ranges;
    CU_TRY(g_api.cuptiRangeProfilerGetCounterDataSize(&ds), "counter data size");
    m->counter_data.assign(ds.counterDataSize, 0);
    auto di = mk<CUpti_RangeProfiler_CounterDataImage_Initialize_Params>(CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE);
    di.pRangeProfilerObject = p->rp;
    di.counterDataSize = m->counter_data.size();
    di.pCounterData = m->counter_data.data();
    CU_TRY(g_api.cuptiRangeProfilerCounterDataImageInitialize(&di), "counter data init");
    auto sc = mk<CUpti_RangeProfiler_SetConfig_Params>(CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE);
    sc.pRangeProfilerObject = p->rp;
    sc.configSize = m->config.size();
    sc.pConfig = m->config.data();
    sc.counterDataImageSize = m->counter_data.size();
    sc.pCounterDataImage = m->counter_data.data();
    sc.range = CUPTI_UserRange;
    sc.replayMode = CUPTI_UserReplay;
    sc.maxRangesPerPass = (size_t)p->max_ranges;
    sc.numNestingLevels = 1;
    sc.minNestingLevel = 1;
    sc.passIndex = 0;
    sc.targetNestingLevel = 1;
    CU_TRY(g_api.cuptiRangeProfilerSetConfig(&sc), "set config");
    m->configured = 1;
    return XF_OK;
}

/* A fresh range profiler object for the next metric set. cupti_range_profiler.h has no UnsetConfig
 * and does not say SetConfig may be called again on an object whose config was decoded; the
 * documented session is Enable (create the object) -> SetConfig -> Start/Stop passes -> DecodeData
 * -> Disable ("destroy the range profiler object"), so each set gets its own session. */
xf_status rp_renew(cupti_probe *p) {
    if (p->rp) {
        auto dp = mk<CUpti_RangeProfiler_Disable_Params>(CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE);
        dp.pRangeProfilerObject = p->rp;
        p->rp = NULL;
        CU_TRY(g_api.cuptiRangeProfilerDisable(&dp), "range profiler disable");
    }
    auto en = mk<CUpti_RangeProfiler_Enable_Params>(CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE);
    en.ctx = p->ctx;
    CU_TRY(g_api.cuptiRangeProfilerEnable(&en), "range profiler enable");
    p->rp = en.pRangeProfilerObject;
    return XF_OK;
}

/* Decodes a finished set and merges its values into the result table. */
xf_status set_collect(cupti_probe *p, metric_set *m) {
    auto dd = mk<CUpti_RangeProfiler_DecodeData_Params>(CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE);
    dd.pRangeProfilerObject = p->rp;
    CU_TRY(g_api.cuptiRangeProfilerDecodeData(&dd), "decode");
    if (dd.numOfRangeDropped)
        return xf_errorf(XF_EIO, "CUPTI range profiler dropped %zu ranges: more op ranges than %d per pass; profile fewer steps",
                         dd.numOfRangeDropped, p->max_ranges);
    auto info = mk<CUpti_RangeProfiler_GetCounterDataInfo_Params>(CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE);
    info.pCounterDataImage = m->counter_data.data();
    info.counterDataImageSize = m->counter_data.size();
    CU_TRY(g_api.cuptiRangeProfilerGetCounterDataInfo(&info), "counter data info");
    std::vector<double> vals(m->names.size());
    for (size_t i = 0; i < info.numTotalRanges; i++) {
        auto rn = mk<CUpti_Profiler_Host_GetRangeName_Params>(CUpti_Profiler_Host_GetRangeName_Params_STRUCT_SIZE);
        rn.pCounterDataImage = m->counter_data.data();
        rn.counterDataImageSize = m->counter_data.size();
        rn.rangeIndex = i;
        rn.delimiter = "/";
        CU_TRY(g_api.cuptiProfilerHostGetRangeName(&rn), "range name");
        std::string name = rn.pRangeName ? rn.pRangeName : "";
        free((void *)rn.pRangeName); /* CUPTI allocates it; the caller frees */
        auto ev = mk<CUpti_Profiler_Host_EvaluateToGpuValues_Params>(CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE);
        ev.pHostObject = m->host;
        ev.pCounterDataImage = m->counter_data.data();
        ev.counterDataImageSize = m->counter_data.size();
        ev.rangeIndex = i;
        ev.ppMetricNames = m->names.data();
        ev.numMetrics = m->names.size();
        ev.pMetricValues = vals.data();
        CU_TRY(g_api.cuptiProfilerHostEvaluateToGpuValues(&ev), "evaluate");
        size_t j = 0;
        while (j < p->rnames.size() && p->rnames[j] != name) j++;
        if (j == p->rnames.size()) {
            p->rnames.push_back(name);
            cupti_metric_values mv;
            cupti_metric_values_clear(&mv);
            p->rvals.push_back(mv);
        }
        for (size_t k = 0; k < m->names.size(); k++)
            if (cupti_metric_values_set(&p->rvals[j], m->names[k], vals[k]) != XF_OK) xf_error_clear(); /* NaN/neg: missing */
    }
    return XF_OK;
}

void range_begin(void *ctx, const probe_range *r) {
    cupti_probe *p = (cupti_probe *)ctx;
    char name[CUPTI_RANGE_NAME_MAX];
    cupti_range_name(r, name, sizeof name);
    nvtxRangePushA(name);
    if (p->mode == CUPTI_MODE_ACTIVITY) {
        g_api.cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, cupti_extid_encode(r));
    } else if (p->in_pass) {
        auto pr = mk<CUpti_RangeProfiler_PushRange_Params>(CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE);
        pr.pRangeProfilerObject = p->rp;
        pr.pRangeName = name;
        g_api.cuptiRangeProfilerPushRange(&pr);
    }
}

void range_end(void *ctx, const probe_range *r) {
    (void)r;
    cupti_probe *p = (cupti_probe *)ctx;
    if (p->mode == CUPTI_MODE_ACTIVITY) {
        uint64_t last = 0;
        g_api.cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
    } else if (p->in_pass) {
        auto pp = mk<CUpti_RangeProfiler_PopRange_Params>(CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE);
        pp.pRangeProfilerObject = p->rp;
        g_api.cuptiRangeProfilerPopRange(&pp);
    }
    nvtxRangePop();
}

void probe_free_noop(void *ctx) {
    (void)ctx;
}

} // namespace

extern "C" xf_status cupti_probe_init(cupti_probe **out, int ordinal, cupti_mode mode, int max_ranges) {
    *out = NULL;
    xf_status s = cuda_device_open(ordinal, NULL);
    if (s) return s;
    pthread_once(&g_api_once, load_cupti_once);
    if (g_api_status) return xf_errorf(g_api_status, "%s", g_api_msg);
    if (max_ranges <= 0) max_ranges = 4096;
    cudaFree(0); /* creates the primary context */
    cupti_probe *p = new (std::nothrow) cupti_probe();
    if (!p) return xf_errorf(XF_ENOMEM, "CUPTI probe: out of memory");
    p->ordinal = ordinal;
    p->mode = mode;
    p->max_ranges = max_ranges;
    p->cur_set = -1;
    if ((s = current_ctx(&p->ctx))) {
        delete p;
        return s;
    }
    if (mode == CUPTI_MODE_ACTIVITY) {
        const char *mb = getenv("XFPROF_CUPTI_BUFFER_MB");
        if (mb && atoi(mb) > 0 && atoi(mb) <= 1024) g_buf_bytes = (size_t)atoi(mb) << 20;
        CUptiResult r = g_api.cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
        for (CUpti_ActivityKind k : k_activity_kinds)
            if (r == CUPTI_SUCCESS) r = g_api.cuptiActivityEnable(k);
        if (r != CUPTI_SUCCESS) {
            for (CUpti_ActivityKind k : k_activity_kinds) g_api.cuptiActivityDisable(k);
            delete p;
            return cupti_fail(r, "activity enable");
        }
        *out = p;
        return XF_OK;
    }
    /* counters */
    auto pi = mk<CUpti_Profiler_Initialize_Params>(CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
    CUptiResult r = g_api.cuptiProfilerInitialize(&pi);
    const int pi_ok = r == CUPTI_SUCCESS;
    auto cn = mk<CUpti_Device_GetChipName_Params>(CUpti_Device_GetChipName_Params_STRUCT_SIZE);
    cn.deviceIndex = (size_t)ordinal;
    if (r == CUPTI_SUCCESS) r = g_api.cuptiDeviceGetChipName(&cn);
    auto ca = mk<CUpti_Profiler_GetCounterAvailability_Params>(CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE);
    ca.ctx = p->ctx;
    if (r == CUPTI_SUCCESS) r = g_api.cuptiProfilerGetCounterAvailability(&ca);
    if (r == CUPTI_SUCCESS) {
        p->chip = cn.pChipName ? cn.pChipName : "";
        p->avail.assign(ca.counterAvailabilityImageSize, 0);
        ca.pCounterAvailabilityImage = p->avail.data();
        r = g_api.cuptiProfilerGetCounterAvailability(&ca);
    }
    auto en = mk<CUpti_RangeProfiler_Enable_Params>(CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE);
    en.ctx = p->ctx;
    if (r == CUPTI_SUCCESS) r = g_api.cuptiRangeProfilerEnable(&en);
    if (r != CUPTI_SUCCESS) {
        s = cupti_fail(r, "range profiler");
        if (pi_ok) { /* each successful cuptiProfilerInitialize is paired with a DeInitialize */
            auto pd = mk<CUpti_Profiler_DeInitialize_Params>(CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE);
            g_api.cuptiProfilerDeInitialize(&pd);
        }
        delete p;
        return s;
    }
    p->rp = en.pRangeProfilerObject;
    for (int i = 0; i < CUPTI_PASS0_METRICS; i++) p->sets[0].names.push_back(cupti_metric_names[i]);
    for (int i = CUPTI_PASS0_METRICS; i < CUPTI_M_COUNT; i++) p->sets[1].names.push_back(cupti_metric_names[i]);
    *out = p;
    return XF_OK;
}

extern "C" void cupti_probe_free(cupti_probe *p) {
    if (!p) return;
    if (p->mode == CUPTI_MODE_ACTIVITY) {
        cudaDeviceSynchronize(); /* FlushAll issues no synchronization itself (cupti_activity.h) */
        g_api.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        for (CUpti_ActivityKind k : k_activity_kinds) g_api.cuptiActivityDisable(k);
        pthread_mutex_lock(&g_act_mu);
        g_kernels.clear();
        g_extcorr.clear();
        g_dropped = 0;
        pthread_mutex_unlock(&g_act_mu);
    } else {
        for (auto &m : p->sets)
            if (m.host) {
                auto hd = mk<CUpti_Profiler_Host_Deinitialize_Params>(CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE);
                hd.pHostObject = m.host;
                g_api.cuptiProfilerHostDeinitialize(&hd);
            }
        if (p->rp) {
            auto dp = mk<CUpti_RangeProfiler_Disable_Params>(CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE);
            dp.pRangeProfilerObject = p->rp;
            g_api.cuptiRangeProfilerDisable(&dp);
        }
        auto pd = mk<CUpti_Profiler_DeInitialize_Params>(CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE);
        g_api.cuptiProfilerDeInitialize(&pd);
    }
    delete p;
}

extern "C" probe cupti_probe_as_probe(cupti_probe *p) {
    probe pr = {}; // the optional slots (core/probe.h) stay NULL
    pr.name = "cupti";
    pr.ctx = p;
    pr.range_begin = range_begin;
    pr.range_end = range_end;
    pr.free = probe_free_noop;
    return pr;
}

extern "C" xf_status cupti_probe_flush(cupti_probe *p, cupti_attribution *out) {
    memset(out, 0, sizeof *out);
    if (!p || p->mode != CUPTI_MODE_ACTIVITY) return xf_errorf(XF_EINVAL, "CUPTI probe: flush needs activity mode");
    cudaDeviceSynchronize();
    /* The synchronize first: FlushAll "doesn't issue any CUDA synchronization calls implicitly"
     * (cupti_activity.h). Forced: every buffer is delivered, also one still holding an incomplete
     * record (none expected after the synchronize; cupti_attribute counts any as bad_records). */
    CU_TRY(g_api.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "activity flush");
    pthread_mutex_lock(&g_act_mu);
    std::vector<cupti_kernel_rec> k;
    std::vector<cupti_extcorr_rec> e;
    k.swap(g_kernels);
    e.swap(g_extcorr);
    uint64_t dropped = g_dropped;
    g_dropped = 0;
    pthread_mutex_unlock(&g_act_mu);
    xf_status s = cupti_attribute(k.data(), (int64_t)k.size(), e.data(), (int64_t)e.size(), out);
    if (s) return s;
    return cupti_check_dropped(dropped, g_buf_bytes);
}

extern "C" xf_status cupti_probe_pass_begin(cupti_probe *p, int set) {
    if (!p || p->mode != CUPTI_MODE_COUNTERS) return xf_errorf(XF_EINVAL, "CUPTI probe: passes need counters mode");
    if (set < 0 || set >= CUPTI_METRIC_SETS) return xf_errorf(XF_EINVAL, "CUPTI probe: metric set %d out of range", set);
    if (p->in_pass) return xf_errorf(XF_EINVAL, "CUPTI probe: a pass is already open");
    metric_set *m = &p->sets[set];
    if (m->done) return xf_errorf(XF_EINVAL, "CUPTI probe: metric set %d already collected", set);
    if (p->cur_set != set) {
        if (p->cur_set >= 0 && !p->sets[p->cur_set].done)
            return xf_errorf(XF_EINVAL, "CUPTI probe: metric set %d has passes left", p->cur_set);
        xf_status s = p->cur_set >= 0 ? rp_renew(p) : XF_OK;
        if (!s) s = set_configure(p, m);
        if (s) return s;
        p->cur_set = set;
    }
    auto st = mk<CUpti_RangeProfiler_Start_Params>(CUpti_RangeProfiler_Start_Params_STRUCT_SIZE);
    st.pRangeProfilerObject = p->rp;
    CU_TRY(g_api.cuptiRangeProfilerStart(&st), "start");
    p->in_pass = 1;
    return XF_OK;
}

extern "C" xf_status cupti_probe_pass_end(cupti_probe *p, int *all_done) {
    *all_done = 0;
    if (!p || !p->in_pass) return xf_errorf(XF_EINVAL, "CUPTI probe: no pass open");
    cudaDeviceSynchronize();
    auto sp = mk<CUpti_RangeProfiler_Stop_Params>(CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE);
    sp.pRangeProfilerObject = p->rp;
    p->in_pass = 0;
    CU_TRY(g_api.cuptiRangeProfilerStop(&sp), "stop");
    if (!sp.isAllPassSubmitted) return XF_OK;
    metric_set *m = &p->sets[p->cur_set];
    xf_status s = set_collect(p, m);
    if (s) return s;
    m->done = 1;
    *all_done = 1;
    return XF_OK;
}

extern "C" xf_status cupti_probe_results(cupti_probe *p, int *n, probe_range **ranges, cupti_metric_values **values) {
    *n = 0;
    *ranges = NULL;
    *values = NULL;
    if (!p) return xf_errorf(XF_EINVAL, "CUPTI probe: NULL");
    size_t cnt = p->rnames.size();
    if (cnt == 0) return XF_OK;
    probe_range *r = (probe_range *)malloc(cnt * sizeof *r);
    cupti_metric_values *v = (cupti_metric_values *)malloc(cnt * sizeof *v);
    if (!r || !v) {
        free(r);
        free(v);
        return xf_errorf(XF_ENOMEM, "CUPTI probe: out of memory");
    }
    int k = 0;
    for (size_t i = 0; i < cnt; i++) {
        if (cupti_range_parse(p->rnames[i].c_str(), &r[k]) != XF_OK) {
            xf_error_clear(); /* a range not named by xfprof (e.g. the calibration GEMM): skipped */
            continue;
        }
        v[k++] = p->rvals[i];
    }
    *n = k;
    *ranges = r;
    *values = v;
    return XF_OK;
}

extern "C" void cupti_probe_push_named(cupti_probe *p, const char *name) {
    if (!p || p->mode != CUPTI_MODE_COUNTERS || !p->in_pass) return;
    auto pr = mk<CUpti_RangeProfiler_PushRange_Params>(CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE);
    pr.pRangeProfilerObject = p->rp;
    pr.pRangeName = name;
    g_api.cuptiRangeProfilerPushRange(&pr);
}

extern "C" void cupti_probe_pop_named(cupti_probe *p) {
    if (!p || p->mode != CUPTI_MODE_COUNTERS || !p->in_pass) return;
    auto pp = mk<CUpti_RangeProfiler_PopRange_Params>(CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE);
    pp.pRangeProfilerObject = p->rp;
    g_api.cuptiRangeProfilerPopRange(&pp);
}

extern "C" xf_status cupti_probe_named_values(cupti_probe *p, const char *name, cupti_metric_values *out) {
    if (!p || !name) return xf_errorf(XF_EINVAL, "CUPTI probe: NULL");
    for (size_t i = 0; i < p->rnames.size(); i++)
        if (p->rnames[i] == name) {
            *out = p->rvals[i];
            return XF_OK;
        }
    return xf_errorf(XF_EINVAL, "CUPTI probe: no range named '%.80s' was profiled", name);
}

namespace {
void nvtx_begin(void *ctx, const probe_range *r) {
    (void)ctx;
    char name[CUPTI_RANGE_NAME_MAX];
    nvtxRangePushA(cupti_range_name(r, name, sizeof name));
}

void nvtx_end(void *ctx, const probe_range *r) {
    (void)ctx;
    (void)r;
    nvtxRangePop();
}
} // namespace

extern "C" probe cupti_nvtx_probe(void) {
    probe pr = {}; // the optional slots (core/probe.h) stay NULL
    pr.name = "nvtx";
    pr.ctx = NULL;
    pr.range_begin = nvtx_begin;
    pr.range_end = nvtx_end;
    pr.free = probe_free_noop;
    return pr;
}
