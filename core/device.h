/* A device's ceilings: memory capacity, bandwidth and peak FLOP/s per compute type. Specs are
 * data (data/devices.json), never constants in code; `xfprof machine` writes measured ones in the
 * same format. */
#ifndef XF_DEVICE_H
#define XF_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef enum xf_compute {
    XF_COMPUTE_FP32 = 0,  /* FP32 on CUDA cores / CPU SIMD: norms, softmax, element-wise, fp32 GEMMs */
    XF_COMPUTE_TENSOR16,  /* dense FP16/BF16 tensor cores, FP32 accumulate */
    XF_COMPUTE_FP8,       /* dense FP8 tensor cores */
    XF_COMPUTE_INT8,      /* dense INT8 tensor cores (OP/s) */
    XF_COMPUTE_COUNT
} xf_compute;

const char *compute_name(xf_compute c); /* "fp32", "tensor16", "fp8", "int8": the JSON keys */

/* A link between devices: the ceiling a collective's bus bandwidth is set against (nccl-tests'
 * convention: busbw = algbw * 2(N-1)/N for all-reduce, which a ring reaches at the per-device,
 * per-direction bandwidth of the link). */
typedef struct device_link {
    char name[32];        /* "nvlink4", "pcie5-x16", "ib-ndr-400", "mpi-shm"; "" = none known */
    double bandwidth_Bps; /* per device, per direction; 0 = unknown */
    double latency_s;     /* per sequential step (hop) of a collective; 0 = unknown */
    char source[192];     /* where the figures come from */
} device_link;

typedef struct device_spec {
    char name[64];          /* short id: "h100-sxm" */
    char description[128];  /* "NVIDIA H100 SXM5 80GB" */
    char kind[8];           /* "gpu" or "cpu" */
    char source[256];       /* where the figures come from: datasheet, or "measured by xfprof machine ..." */
    int measured;           /* 1 when the ceilings were measured on this machine */
    double memory_bytes;    /* capacity */
    double bandwidth_Bps;   /* peak DRAM/HBM bandwidth, bytes per second */
    double cache_bytes;     /* last-level cache size (0 = unknown) */
    double cache_bandwidth_Bps; /* attainable bandwidth inside the last-level cache (0 = unknown) */
    double peak_flops[XF_COMPUTE_COUNT]; /* per compute type; 0 = not available on this device */
    /* Optional ("link", "node_link", "gpus_per_node" in a devices file): */
    device_link link;       /* between the devices of one node (NVLink, PCIe; MPI shared memory on a CPU) */
    device_link node_link;  /* between nodes, per device (InfiniBand / RoCE NICs per GPU) */
    int gpus_per_node;      /* devices one node holds on `link`; 0 = unknown */
} device_spec;

/* The peak for compute type c; a type the device lacks (0) falls back to the next slower type
 * that it has, ending at FP32 (e.g. FP8 on an A100 runs as FP16). */
double device_peak(const device_spec *d, xf_compute c);

/* Ridge point P / B in FLOP per byte for compute type c. */
double device_ridge(const device_spec *d, xf_compute c);

/* A list of devices loaded from a file. */
typedef struct device_list {
    int n;
    device_spec *items; /* (n) */
} device_list;

/* Parses a devices file: {"format":"xfprof-devices","version":1,"devices":[...]}. `source`
 * (a path, may be NULL) prefixes messages. On success *out owns its items: free with
 * device_list_free. */
xf_status device_list_parse(const char *json_text, const char *source, device_list *out);
xf_status device_list_load(const char *path, device_list *out);
void device_list_free(device_list *l); /* NULL and empty lists are fine */

/* Loads the built-in devices.json from device_data_dir(). Free with device_list_free. */
xf_status device_list_builtin(device_list *out);

/* Index of the device called `name` (case-insensitive) in l, or -1. */
int device_list_find(const device_list *l, const char *name);

/* A link as the JSON object `key` of o (nothing when l has no bandwidth); 0 on OOM. And its reader
 * (absent or null: a zeroed link; XF_EINVAL naming ctx.key on a bad one). For the record's device. */
struct cJSON;
int device_link_to_json(struct cJSON *o, const char *key, const device_link *l);
xf_status device_link_from_json(const struct cJSON *o, const char *key, const char *ctx, device_link *l);

/* Serializes one device as a JSON object text; caller frees with free(). NULL on OOM. */
char *device_spec_to_json(const device_spec *d);

/* The folder holding xfprof's data files: $XFPROF_DATA_DIR, else <exe dir>/data, else
 * <exe dir>/../share/xfprof. Writes into buf; XF_EIO naming the places tried if none has
 * devices.json. */
xf_status device_data_dir(char *buf, size_t len);

/* Finds device `name` in the built-in devices.json, or loads `device_file` when not NULL
 * (then `name` may be NULL to take the file's only / first device). */
xf_status device_lookup(const char *name, const char *device_file, device_spec *out);

#endif
