#define _GNU_SOURCE
#include "hugemem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "units.h"

static int g_enabled = -1; /* -1: not read from the environment yet */

int hugemem_enabled(void) {
    if (g_enabled < 0) {
        const char *e = getenv("XFPROF_HUGE_PAGES");
        g_enabled = !(e && strcmp(e, "0") == 0);
    }
    return g_enabled;
}

void hugemem_set_enabled(int on) { g_enabled = on != 0; }

void *hugemem_alloc(int64_t bytes) {
    if (bytes <= 0) bytes = 64;
    size_t n = ((size_t)bytes + 63u) & ~(size_t)63u;
    if (n < HUGEMEM_PAGE || !hugemem_enabled()) return aligned_alloc(64, n);
    /* aligned start, size not rounded up: a tail under 2 MiB stays in small pages, so no buffer
     * holds more physical memory than it asks for (the leading slack is never touched) */
    void *p = NULL; /* posix_memalign: C11's aligned_alloc wants the size a multiple of the alignment */
    if (posix_memalign(&p, HUGEMEM_PAGE, n) != 0) p = NULL;
#ifdef MADV_HUGEPAGE
    if (p) (void)madvise(p, (n + 4095u) & ~(size_t)4095u, MADV_HUGEPAGE); /* advice: refused is no error */
#endif
    return p;
}

const char *hugemem_thp_mode(void) {
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) return "unavailable";
    char buf[128] = "";
    int ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    if (!ok) return "unavailable";
    /* "always [madvise] never": the bracketed word is in force */
    if (strstr(buf, "[always]")) return "always";
    if (strstr(buf, "[madvise]")) return "madvise";
    if (strstr(buf, "[never]")) return "never";
    return "unavailable";
}

/* Bytes of r[0..n) inside [a, b). */
static int64_t cover(const hugemem_range *r, int n, uintptr_t a, uintptr_t b) {
    int64_t s = 0;
    for (int i = 0; i < n; i++) {
        if (!r[i].p || r[i].bytes <= 0) continue;
        uintptr_t lo = (uintptr_t)r[i].p, hi = lo + (uintptr_t)r[i].bytes;
        if (lo < a) lo = a;
        if (hi > b) hi = b;
        if (hi > lo) s += (int64_t)(hi - lo);
    }
    return s;
}

int64_t hugemem_granted_in(const char *smaps, const hugemem_range *r, int n) {
    if (!smaps) return -1;
    int64_t total = 0, cov = 0;
    for (const char *l = smaps; *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        unsigned long long a, b, kb;
        char dash;
        /* a mapping's header "a-b perms ...": hex, '-', hex; its fields follow until the next one */
        if (len > 0 && l[0] != ' ' && sscanf(l, "%llx%c%llx", &a, &dash, &b) == 3 && dash == '-' && b > a)
            cov = cover(r, n, (uintptr_t)a, (uintptr_t)b);
        else if (cov > 0 && sscanf(l, "AnonHugePages: %llu kB", &kb) == 1) {
            int64_t h = kb > (unsigned long long)(INT64_MAX / 1024) ? cov : (int64_t)kb * 1024; /* a bogus size: no overflow */
            h = h < cov ? h : cov;
            total = total > INT64_MAX - h ? INT64_MAX : total + h;
            cov = 0;
        }
        l += len;
        if (*l == '\n') l++;
    }
    return total;
}

int64_t hugemem_granted(const hugemem_range *r, int n) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + len, 1, cap - 1 - len, f)) > 0;) {
        len += got;
        if (len + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (!buf) return -1;
    buf[len] = 0;
    int64_t g = hugemem_granted_in(buf, r, n);
    free(buf);
    return g;
}

void hugemem_describe(char *buf, size_t len, int64_t granted, int64_t eligible) {
    const char *mode = hugemem_thp_mode();
    char a[32], b[32];
    if (!hugemem_enabled())
        snprintf(buf, len, "not asked for (huge pages turned off: XFPROF_HUGE_PAGES=0; THP %s)", mode);
    else if (granted < 0)
        snprintf(buf, len, "unknown (/proc/self/smaps unreadable; THP %s)", mode);
    else if (granted == 0)
        snprintf(buf, len, "not granted: 0 of %s in huge pages (THP %s)", units_bytes((double)eligible, b, sizeof b), mode);
    else
        snprintf(buf, len, "%s of %s in huge pages (THP %s)", units_bytes((double)granted, a, sizeof a),
                 units_bytes((double)eligible, b, sizeof b), mode);
}
