/* Large buffers on transparent huge pages: the weights and the read-ceiling probe's arrays are
 * allocated the same way, so that the ratio decode / read ceiling compares like pages. */
#ifndef XF_HUGEMEM_H
#define XF_HUGEMEM_H

#include <stddef.h>
#include <stdint.h>

#define HUGEMEM_PAGE ((size_t)2 << 20) /* the x86-64 transparent huge page */

/* `bytes` (rounded up to 64) aligned to 64; from HUGEMEM_PAGE up, aligned to HUGEMEM_PAGE with
 * madvise(MADV_HUGEPAGE) over it (before anything touches it), unless hugemem_set_enabled(0).
 * NULL on failure. The caller frees it with free(). */
void *hugemem_alloc(int64_t bytes);

/* Whether hugemem_alloc asks for huge pages (1, the default; $XFPROF_HUGE_PAGES=0 starts it at 0).
 * Process-wide: for side-by-side measurements and for runs that must not use them. */
void hugemem_set_enabled(int on);
int hugemem_enabled(void);

/* The kernel's THP policy: "always", "madvise", "never", or "unavailable" (no sysfs file). */
const char *hugemem_thp_mode(void);

typedef struct hugemem_range {
    const void *p; /* start */
    int64_t bytes; /* length */
} hugemem_range;

/* Bytes of the ranges r[0..n) that the kernel backs with huge pages now, from /proc/self/smaps:
 * each mapping's AnonHugePages, at most the part of the mapping the ranges cover (a mapping the
 * kernel merged from several buffers is split among them by overlap). -1 when smaps cannot be
 * read. hugemem_granted_in does the same on a given smaps text (tests). */
int64_t hugemem_granted(const hugemem_range *r, int n);
int64_t hugemem_granted_in(const char *smaps, const hugemem_range *r, int n);

/* "1180.5 of 1180.5 MiB in huge pages (THP madvise)", "not granted (THP never)", ... into buf. */
void hugemem_describe(char *buf, size_t len, int64_t granted, int64_t eligible);

#endif
