/* core/hugemem: alignment and advice of large buffers, the smaps reading that says whether huge
 * pages were granted, and the weights' count of them. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/hugemem.h"
#include "reference_model/config.h"
#include "reference_model/weights.h"

/* Two mappings as /proc/self/smaps writes them (fields trimmed), the first with 4 MiB of huge
 * pages, the second with none. */
static const char *SMAPS =
    "7f0000000000-7f0000800000 rw-p 00000000 00:00 0 \n"
    "Size:               8192 kB\n"
    "AnonHugePages:      4096 kB\n"
    "VmFlags: rd wr mr mw me ac hg \n"
    "7f0000800000-7f0000c00000 rw-p 00000000 00:00 0 \n"
    "Size:               4096 kB\n"
    "AnonHugePages:         0 kB\n"
    "7fff00000000-7fff00021000 rw-p 00000000 00:00 0                          [stack]\n"
    "AnonHugePages:         0 kB\n";

Test(hugemem, granted_from_recorded_smaps) {
    hugemem_range whole = {(void *)0x7f0000000000ull, 8 << 20};
    cr_expect_eq(hugemem_granted_in(SMAPS, &whole, 1), 4 << 20);
    /* a range covering 2 MiB of the first mapping: at most what it covers */
    hugemem_range part = {(void *)0x7f0000200000ull, 2 << 20};
    cr_expect_eq(hugemem_granted_in(SMAPS, &part, 1), 2 << 20);
    /* the second mapping holds none; a range outside both counts nothing */
    hugemem_range second = {(void *)0x7f0000800000ull, 4 << 20}, none = {(void *)0x100000ull, 1 << 20};
    cr_expect_eq(hugemem_granted_in(SMAPS, &second, 1), 0);
    cr_expect_eq(hugemem_granted_in(SMAPS, &none, 1), 0);
    /* two ranges in the first mapping (a merged mapping) share its 4 MiB */
    hugemem_range two[2] = {{(void *)0x7f0000000000ull, 3 << 20}, {(void *)0x7f0000400000ull, 3 << 20}};
    cr_expect_eq(hugemem_granted_in(SMAPS, two, 2), 4 << 20);
    cr_expect_eq(hugemem_granted_in(NULL, &whole, 1), -1);
    cr_expect_eq(hugemem_granted_in("", &whole, 1), 0);
    cr_expect_eq(hugemem_granted_in("garbage\nAnonHugePages: 99 kB\n", &whole, 1), 0);
}

Test(hugemem, alignment_and_free) {
    hugemem_set_enabled(1);
    char *big = hugemem_alloc((int64_t)HUGEMEM_PAGE + 4096), *small = hugemem_alloc(1000);
    cr_assert(big && small);
    cr_expect_eq((uintptr_t)big % HUGEMEM_PAGE, 0, "a buffer of 2 MiB and up starts on a huge page");
    cr_expect_eq((uintptr_t)small % 64, 0);
    memset(big, 1, HUGEMEM_PAGE + 4096);
    hugemem_range r = {big, (int64_t)HUGEMEM_PAGE + 4096};
    const int64_t g = hugemem_granted(&r, 1);
    cr_expect(g >= 0 && g <= (int64_t)HUGEMEM_PAGE, "granted %lld: within the one whole huge page", (long long)g);
    if (strcmp(hugemem_thp_mode(), "never") == 0 || strcmp(hugemem_thp_mode(), "unavailable") == 0) cr_expect_eq(g, 0);
    free(big);
    free(small);
    hugemem_set_enabled(0);
    char *off = hugemem_alloc(4 << 20);
    cr_assert(off);
    cr_expect_eq((uintptr_t)off % 64, 0);
    free(off);
    hugemem_set_enabled(1);
}

Test(hugemem, thp_mode_and_description) {
    const char *m = hugemem_thp_mode();
    cr_expect(!strcmp(m, "always") || !strcmp(m, "madvise") || !strcmp(m, "never") || !strcmp(m, "unavailable"), "%s", m);
    char buf[160];
    hugemem_set_enabled(1);
    hugemem_describe(buf, sizeof buf, 0, 8 << 20);
    cr_expect(strstr(buf, "not granted") != NULL, "%s", buf);
    hugemem_describe(buf, sizeof buf, 4 << 20, 8 << 20);
    cr_expect(strstr(buf, "4.00 MiB of 8.00 MiB in huge pages") != NULL, "%s", buf);
    hugemem_describe(buf, sizeof buf, -1, 8 << 20);
    cr_expect(strstr(buf, "unknown") != NULL, "%s", buf);
    hugemem_set_enabled(0);
    hugemem_describe(buf, sizeof buf, 0, 8 << 20);
    cr_expect(strstr(buf, "not asked for") != NULL, "%s", buf);
    hugemem_set_enabled(1);
}

/* The weights' count: the matrices of 2 MiB and up, each its values (and int8 scales) once; the
 * tied lm_head not again. */
Test(hugemem, weights_count) {
    model_config c;
    cr_assert_eq(config_preset("stories15m", &c), XF_OK);
    const xf_dtype dts[2] = {XF_FP32, XF_INT8};
    for (int k = 0; k < 2; k++) {
        model_weights *w;
        cr_assert_eq(weights_init_random(&w, &c, 3, dts[k], 32), XF_OK);
        int64_t got, asked, want = 0;
        const wmat *ms[2] = {&w->embed, &w->lm_head};
        for (int i = 0; i < 2; i++) {
            if (!ms[i]->owned || !ms[i]->data) continue;
            const int64_t vb = ms[i]->packed ? weights_packed_values_bytes(ms[i]->rows, ms[i]->cols, ms[i]->group)
                                             : ms[i]->rows * ms[i]->cols * (dts[k] == XF_FP32 ? 4 : 1);
            want += vb >= (int64_t)HUGEMEM_PAGE ? vb : 0;
        }
        /* stories15m's layer matrices are all under 2 MiB (288 x 768 fp32 at most 864 KiB) */
        cr_assert_eq(weights_huge_pages(w, &got, &asked), XF_OK);
        cr_expect_eq(asked, want, "%s: %lld eligible, want %lld", dtype_name(dts[k]), (long long)asked, (long long)want);
        cr_expect(got >= -1 && got <= asked);
        cr_expect_eq(weights_huge_pages(NULL, &got, &asked), XF_EINVAL);
        weights_free(w);
    }
}
