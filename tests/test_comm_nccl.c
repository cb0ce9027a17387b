/* NCCL's host logic (runner/comm_nccl.h) against a fake libnccl built by the tests
 * (tests/fake/fake_nccl.c: it records every call and returns scripted results) and, where it is
 * installed, the real libnccl.so.2 (loading and version only): no GPU is needed. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "probes/comm_ceiling.h"
#include "reference_model/cost_parallel.h"
#include "runner/comm_nccl.h"

#if defined(__has_include)
#if __has_include(<nccl.h>)
#include <nccl.h>
/* the ABI comm_nccl.h declares, against the toolkit's header */
_Static_assert(NCCL_OK == ncclSuccess && NCCL_IN_PROGRESS == ncclInProgress, "ncclResult_t");
_Static_assert(NCCL_FLOAT32 == ncclFloat32 && NCCL_SUM == ncclSum, "ncclDataType_t / ncclRedOp_t");
_Static_assert(sizeof(nccl_unique_id) == sizeof(ncclUniqueId) && NCCL_ID_BYTES == NCCL_UNIQUE_ID_BYTES, "ncclUniqueId");
#endif
#endif

static char g_log[256];

/* A fresh call log and no scripted behaviour. */
static void setup(void) {
    snprintf(g_log, sizeof g_log, "/tmp/xf_fake_nccl_%d.log", (int)getpid());
    unlink(g_log);
    setenv("FAKE_NCCL_LOG", g_log, 1);
    const char *vars[] = {"FAKE_NCCL_VERSION", "FAKE_NCCL_INIT_SLEEP", "FAKE_NCCL_INIT_RESULT", "FAKE_NCCL_AR_RESULT",
                          "FAKE_NCCL_ASYNC", "XFPROF_NCCL_LIB", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID",
                          "PMIX_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}

static void teardown(void) { unlink(g_log); }

static const char *log_text(void) {
    static char buf[8192];
    buf[0] = '\0';
    FILE *f = fopen(g_log, "r");
    if (!f) return buf;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static int count_of(const char *text, const char *what) {
    int n = 0;
    for (const char *p = text; (p = strstr(p, what)); p += strlen(what)) n++;
    return n;
}

TestSuite(comm_nccl, .init = setup, .fini = teardown);

Test(comm_nccl, version_codes) {
    int M, m, p;
    cr_assert(comm_nccl_version_split(22809, &M, &m, &p));
    cr_assert(M == 2 && m == 28 && p == 9);
    cr_assert(comm_nccl_version_split(2408, &M, &m, &p)); /* the pre-2.9 form: 2.4.8 */
    cr_assert(M == 2 && m == 4 && p == 8);
    cr_assert_not(comm_nccl_version_split(2304, &M, &m, &p)); /* 2.3.4: no ncclCommAbort */
    cr_assert(M == 2 && m == 3 && p == 4);
    cr_assert_not(comm_nccl_version_split(30001, &M, &m, &p)); /* another major version */
    cr_assert_eq(M, 3);
}

Test(comm_nccl, load_refusals_name_what_is_wrong) {
    nccl_lib lib;
    cr_assert_eq(comm_nccl_load("/nonexistent/libnccl.so.2", &lib), XF_EUNSUPPORTED);
    cr_assert(strstr(xf_error_msg(), "NCCL not found: /nonexistent/libnccl.so.2 could not be loaded") != NULL, "%s", xf_error_msg());
    cr_assert(strstr(xf_error_msg(), "XFPROF_NCCL_LIB") != NULL, "%s", xf_error_msg());
    cr_assert_null(lib.handle);
    cr_assert_eq(comm_nccl_load(XF_FAKE_NCCL_NOSYM, &lib), XF_EUNSUPPORTED);
    cr_assert(strstr(xf_error_msg(), "symbol ncclAllReduce missing from") != NULL, "%s", xf_error_msg());
    cr_assert_null(lib.handle);
    setenv("FAKE_NCCL_VERSION", "2304", 1);
    cr_assert_eq(comm_nccl_load(XF_FAKE_NCCL, &lib), XF_EUNSUPPORTED);
    cr_assert(strstr(xf_error_msg(), "NCCL 2.3.4 (version code 2304)") != NULL, "%s", xf_error_msg());
    cr_assert(strstr(xf_error_msg(), "2.4 or later") != NULL, "%s", xf_error_msg());
    setenv("FAKE_NCCL_VERSION", "22809", 1);
    setenv("XFPROF_NCCL_LIB", XF_FAKE_NCCL, 1); /* the file the environment names */
    cr_assert_eq(comm_nccl_load(NULL, &lib), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(lib.version, 22809);
    cr_assert(strstr(lib.path, "fake_nccl") != NULL, "%s", lib.path);
    comm_nccl_unload(&lib);
    cr_assert_null(lib.handle);
    comm_nccl_unload(&lib); /* twice: a no-op */
}

/* The real library where the toolkit has it: symbols and version as xfprof needs them. */
Test(comm_nccl, real_libnccl_loads_where_installed) {
    nccl_lib lib;
    xf_status s = comm_nccl_load("libnccl.so.2", &lib);
    if (s == XF_EUNSUPPORTED && strstr(xf_error_msg(), "NCCL not found")) cr_skip_test("no libnccl.so.2 here: %s", xf_error_msg());
    cr_assert_eq(s, XF_OK, "%s", xf_error_msg());
    cr_assert_geq(lib.version, NCCL_MIN_VERSION);
    comm_nccl_unload(&lib);
}

Test(comm_nccl, local_rank_to_device) {
    int lr = -1, dev = -1;
    cr_assert_eq(comm_nccl_local_rank(&lr), XF_OK);
    cr_assert_eq(lr, 0); /* no launcher */
    setenv("SLURM_LOCALID", "2", 1);
    cr_assert_eq(comm_nccl_local_rank(&lr), XF_OK);
    cr_assert_eq(lr, 2);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1); /* Open MPI's first */
    cr_assert_eq(comm_nccl_local_rank(&lr), XF_OK);
    cr_assert_eq(lr, 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1x", 1);
    cr_assert_eq(comm_nccl_local_rank(&lr), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "OMPI_COMM_WORLD_LOCAL_RANK='1x' is not a local rank") != NULL, "%s", xf_error_msg());
    cr_assert_eq(comm_nccl_device_of(1, 2, &dev), XF_OK);
    cr_assert_eq(dev, 1);
    cr_assert_eq(comm_nccl_device_of(2, 2, &dev), XF_EINVAL);
    cr_assert(strstr(xf_error_msg(), "local rank 2 on a node of 2 GPUs") != NULL, "%s", xf_error_msg());
    cr_assert_eq(dev, -1);
    cr_assert_eq(comm_nccl_device_of(0, 0, &dev), XF_EUNSUPPORTED);
}

static int q_done(void *ctx, void *stream) {
    (void)stream;
    if (ctx) ++*(int *)ctx;
    return 1;
}
static int q_never(void *ctx, void *stream) {
    (void)ctx;
    (void)stream;
    return 0;
}
static int q_fail(void *ctx, void *stream) {
    (void)ctx;
    (void)stream;
    xf_errorf(XF_EIO, "the stream failed: an illegal memory access");
    return -1;
}

static void open_world(nccl_lib *lib, comm *c, double timeout_s) {
    cr_assert_eq(comm_nccl_load(XF_FAKE_NCCL, lib), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(comm_init(c, timeout_s), XF_OK, "%s", xf_error_msg()); /* no launcher: a world of one */
}

Test(comm_nccl, init_exchange_and_allreduce_on_the_stream) {
    nccl_lib lib;
    comm c;
    open_world(&lib, &c, 5);
    int polls = 0;
    comm_nccl_stream st = {(void *)0x1234, &polls, q_done};
    comm_nccl nc;
    cr_assert_eq(comm_nccl_init(&nc, &lib, &c, &st), XF_OK, "%s", xf_error_msg());
    float buf[5] = {1, 2, 3, 4, 5};
    cr_assert_eq(comm_nccl_allreduce_f32(&nc, buf, 5, "the test's all-reduce"), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(buf[4], 5.0f); /* one rank: the sum is itself */
    cr_assert_geq(polls, 1, "the stream was never polled");
    cr_assert_eq(comm_nccl_allreduce_f32(&nc, buf, 0, "nothing"), XF_OK); /* no call for an empty buffer */
    comm_nccl_free(&nc);
    comm_nccl_free(&nc); /* twice: a no-op */
    const char *t = log_text();
    cr_assert(strstr(t, "getUniqueId\ninit nranks=1 rank=0 id=fake-nccl-i") != NULL, "%s", t); /* rank 0 makes the id */
    cr_assert(strstr(t, "allreduce count=5 dtype=7 op=0 inplace=1 stream=0x1234\n") != NULL, "%s", t);
    cr_assert_eq(count_of(t, "allreduce"), 1, "%s", t);
    cr_assert_eq(count_of(t, "destroy"), 1, "%s", t);
    cr_assert_eq(count_of(t, "abort"), 0, "%s", t);
    comm_free(&c);
    comm_nccl_unload(&lib);
}

Test(comm_nccl, hung_allreduce_aborts_at_the_deadline) {
    nccl_lib lib;
    comm c;
    open_world(&lib, &c, 1);
    comm_nccl_stream st = {NULL, NULL, q_never};
    comm_nccl nc;
    cr_assert_eq(comm_nccl_init(&nc, &lib, &c, &st), XF_OK, "%s", xf_error_msg());
    float buf[2] = {1, 2};
    cr_assert_eq(comm_nccl_allreduce_f32(&nc, buf, 2, "the all-reduce after layer 3's o_proj"), XF_EIO);
    cr_assert(strstr(xf_error_msg(), "rank 0: the all-reduce after layer 3's o_proj did not complete in 1 s: another rank died or "
                                     "hangs (NCCL communicator aborted)") != NULL, "%s", xf_error_msg());
    cr_assert_eq(comm_nccl_allreduce_f32(&nc, buf, 2, "the next one"), XF_EIO); /* aborted: refused, not enqueued */
    cr_assert(strstr(xf_error_msg(), "was aborted") != NULL, "%s", xf_error_msg());
    comm_nccl_free(&nc);
    const char *t = log_text();
    cr_assert_eq(count_of(t, "abort"), 1, "%s", t);
    cr_assert_eq(count_of(t, "destroy"), 0, "an aborted communicator destroyed again: %s", t);
    cr_assert_eq(count_of(t, "allreduce"), 1, "%s", t);
    comm_free(&c);
    comm_nccl_unload(&lib);
}

Test(comm_nccl, errors_abort_and_say_what_nccl_said) {
    nccl_lib lib;
    comm c;
    open_world(&lib, &c, 5);
    comm_nccl nc;
    float buf[2] = {1, 2};
    comm_nccl_stream st = {NULL, NULL, q_done};
    setenv("FAKE_NCCL_ASYNC", "6", 1); /* ncclRemoteError while the all-reduce runs */
    cr_assert_eq(comm_nccl_init(&nc, &lib, &c, &st), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(comm_nccl_allreduce_f32(&nc, buf, 2, "the all-reduce"), XF_EIO);
    cr_assert(strstr(xf_error_msg(), "the all-reduce failed in NCCL (another rank died?): fake: remote process exited") != NULL, "%s",
              xf_error_msg());
    unsetenv("FAKE_NCCL_ASYNC");
    setenv("FAKE_NCCL_AR_RESULT", "2", 1); /* the enqueue fails */
    cr_assert_eq(comm_nccl_init(&nc, &lib, &c, &st), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(comm_nccl_allreduce_f32(&nc, buf, 2, "the all-reduce"), XF_EIO);
    cr_assert(strstr(xf_error_msg(), "ncclAllReduce failed: fake: unhandled system error") != NULL, "%s", xf_error_msg());
    unsetenv("FAKE_NCCL_AR_RESULT");
    comm_nccl_stream bad = {NULL, NULL, q_fail}; /* the stream itself fails */
    cr_assert_eq(comm_nccl_init(&nc, &lib, &c, &bad), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(comm_nccl_allreduce_f32(&nc, buf, 2, "the all-reduce"), XF_EIO);
    cr_assert(strstr(xf_error_msg(), "rank 0: the all-reduce: the stream failed: an illegal memory access") != NULL, "%s", xf_error_msg());
    setenv("FAKE_NCCL_INIT_RESULT", "2", 1);
    cr_assert_eq(comm_nccl_init(&nc, &lib, &c, &st), XF_EIO);
    cr_assert(strstr(xf_error_msg(), "ncclCommInitRank over 1 ranks failed: fake: unhandled system error") != NULL, "%s", xf_error_msg());
    cr_assert_eq(count_of(log_text(), "abort"), 3, "%s", log_text());
    comm_free(&c);
    comm_nccl_unload(&lib);
}

/* A rank that never joins: ncclCommInitRank blocks; the caller gets the deadline's message. */
Test(comm_nccl, init_that_never_completes_times_out) {
    nccl_lib lib;
    comm c;
    open_world(&lib, &c, 1);
    setenv("FAKE_NCCL_INIT_SLEEP", "4", 1);
    comm_nccl_stream st = {NULL, NULL, q_done};
    comm_nccl nc;
    cr_assert_eq(comm_nccl_init(&nc, &lib, &c, &st), XF_EIO);
    cr_assert(strstr(xf_error_msg(), "rank 0: ncclCommInitRank did not complete in 1 s") != NULL, "%s", xf_error_msg());
    cr_assert_null(nc.comm);
    comm_free(&c); /* the library stays loaded: the helper thread is still inside it */
}

/* machine --comm --device cuda's arithmetic on recorded times: each all-reduce of B bytes over
 * n = 2 ranks "takes" 1 ms (a scripted clock); bus bandwidth = B / 1 ms x 2(n-1)/n, the bus bytes
 * the cost model gives its all-reduce ops (parallel_allreduce_bytes) over the time. */
static double g_clock;
static double scripted_now(void *ctx) {
    (void)ctx;
    g_clock += 1e-3; /* each read 1 ms after the last: an all-reduce between two reads takes 1 ms */
    return g_clock;
}

Test(comm_nccl, ceiling_bus_bytes_match_the_cost_model) {
    nccl_lib lib;
    comm c;
    open_world(&lib, &c, 5);
    comm_nccl_stream st = {NULL, NULL, q_done};
    comm_nccl nc;
    cr_assert_eq(comm_nccl_init(&nc, &lib, &c, &st), XF_OK, "%s", xf_error_msg());
    float dev[1024];
    for (int i = 0; i < 1024; i++) dev[i] = 1.0f;
    comm_nccl_ceiling cc = {&nc, &c, dev, 1024};
    comm_ceiling_ops ops = comm_nccl_ceiling_ops(&cc);
    cr_assert_eq(ops.ranks, 1);
    ops.ranks = 2; /* as if two ranks: the fake is one */
    ops.now = scripted_now;
    comm_ceiling_result r;
    cr_assert_eq(comm_ceiling_measure(&ops, 256, 4096, 3, &r), XF_OK, "%s", xf_error_msg());
    cr_assert_eq(r.n_sizes, 5); /* 256 B .. 4 KiB */
    for (int i = 0; i < r.n_sizes; i++) {
        cr_assert_float_eq(r.time_s[i], 1e-3, 1e-12);
        cr_assert_float_eq(r.busbw[i], parallel_allreduce_bytes(r.bytes[i], 2) / 1e-3, 1e-6);
        cr_assert_float_eq(r.busbw[i], r.algbw[i] * 2.0 * (2 - 1) / 2, 1e-6);
    }
    cr_assert_eq(comm_ceiling_measure(&ops, 256, 8192, 1, &r), XF_EINVAL); /* more than the device buffer holds */
    cr_assert(strstr(xf_error_msg(), "the device buffer holds 1024") != NULL, "%s", xf_error_msg());
    device_link l;
    comm_ceiling_measure(&ops, 256, 4096, 3, &r);
    comm_ceiling_link(&r, "nccl", &l);
    cr_assert_str_eq(l.name, "nccl");
    cr_assert_float_eq(l.bandwidth_Bps, 4096.0 / 1e-3, 1e-6);
    /* the 4 KiB size: 1 warm-up + 3 repetitions in the first and last measurement, 1 + 1 in the refused one */
    cr_assert_eq(count_of(log_text(), "allreduce count=1024 "), 4 + 2 + 4, "%s", log_text());
    comm_nccl_free(&nc);
    comm_free(&c);
    comm_nccl_unload(&lib);
}
