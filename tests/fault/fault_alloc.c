/* Allocation fault injection for the XFPROF_FAULT_ALLOC test build (never in normal builds).
 *
 * The xfprof binary of that build is linked with -Wl,--wrap=malloc,... so every allocation made by
 * xfprof's own code (cli/ and the library) comes here. cJSON (a shared library) allocates through
 * its hooks, which core/json_util.c points at a function of its own that calls malloc: so they come
 * here too, and JSON parsing and printing failures are covered. Allocations made inside libc, OpenBLAS
 * or libgomp themselves are not seen: --wrap only redirects calls in the objects being linked.
 *
 * Environment:
 *   XF_FAIL_ALLOC_AT=N     the Nth allocation (1-based, counted over the whole process) returns
 *                          NULL, as malloc does when memory runs out; every other one succeeds.
 *   XF_ALLOC_COUNT_FILE=P  at exit, the number of allocations made is written to file P (so the
 *                          test script knows how many N to try).
 * Zero-size requests are counted like any other. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);
int __real_posix_memalign(void **p, size_t align, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);

void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_aligned_alloc(size_t align, size_t n);
int __wrap_posix_memalign(void **p, size_t align, size_t n);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);

static atomic_ullong g_calls;          /* allocations seen so far */
static unsigned long long g_fail_at;   /* 0: never fail */
static const char *g_count_file;

/* True when this call is the one to fail. OpenMP threads may allocate concurrently: atomic. */
static int should_fail(void) {
    unsigned long long k = atomic_fetch_add(&g_calls, 1) + 1;
    return g_fail_at != 0 && k == g_fail_at;
}

void *__wrap_malloc(size_t n) { return should_fail() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t size) { return should_fail() ? NULL : __real_calloc(n, size); }
void *__wrap_realloc(void *p, size_t n) { return should_fail() ? NULL : __real_realloc(p, n); }
void *__wrap_aligned_alloc(size_t align, size_t n) { return should_fail() ? NULL : __real_aligned_alloc(align, n); }
int __wrap_posix_memalign(void **p, size_t align, size_t n) { return should_fail() ? 12 /* ENOMEM */ : __real_posix_memalign(p, align, n); }
char *__wrap_strdup(const char *s) { return should_fail() ? NULL : __real_strdup(s); }
char *__wrap_strndup(const char *s, size_t n) { return should_fail() ? NULL : __real_strndup(s, n); }

static void fault_alloc_report(void) {
    if (!g_count_file) return;
    FILE *f = fopen(g_count_file, "w");
    if (!f) return;
    fprintf(f, "%llu\n", (unsigned long long)atomic_load(&g_calls));
    fclose(f);
}

__attribute__((constructor)) static void fault_alloc_init(void) {
    const char *at = getenv("XF_FAIL_ALLOC_AT");
    if (at && *at) g_fail_at = strtoull(at, NULL, 10);
    g_count_file = getenv("XF_ALLOC_COUNT_FILE");
    if (g_count_file && !*g_count_file) g_count_file = NULL;
    atexit(fault_alloc_report);
}
