/* A machine file (the `xfprof machine` format) of a test's own, so that a suite's runner reads
 * ceilings the test chose, not the user's ~/.cache/xfprof/machine.json or a fresh measurement. */
#ifndef XF_TEST_MACHINE_FILE_H
#define XF_TEST_MACHINE_FILE_H

#include <criterion/criterion.h>
#include <stdio.h>

/* Writes one CPU of DRAM read bw (B/s), a last-level cache of cache_bytes read at cache_bw (B/s)
 * and an FP32 peak (FLOP/s) to path; `source` says which test wrote it. */
static inline void test_machine_file_write(const char *path, double bw, double cache_bytes, double cache_bw, double fp32,
                                           const char *source) {
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "cannot write the test's machine file %s", path);
    fprintf(f,
            "{\"format\":\"xfprof-devices\",\"version\":1,\"devices\":[{\"name\":\"test-cpu\",\"kind\":\"cpu\",\"memory_bytes\":8e9,"
            "\"bandwidth_Bps\":%.17g,\"cache_bytes\":%.17g,\"cache_bandwidth_Bps\":%.17g,\"peak_flops\":{\"fp32\":%.17g},"
            "\"source\":\"%s\"}]}\n",
            bw, cache_bytes, cache_bw, fp32, source);
    cr_assert_eq(fclose(f), 0, "cannot write the test's machine file %s", path);
}

#endif
