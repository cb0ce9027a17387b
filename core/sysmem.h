/* How much memory this machine has for xfprof now: the checks that refuse a run, or a record too
 * large to read, before anything is allocated. */
#ifndef XF_SYSMEM_H
#define XF_SYSMEM_H

#include <stdint.h>

/* Bytes available for new allocations without swapping: MemAvailable of /proc/meminfo (what the
 * kernel estimates, page cache it can drop included), the cgroup limit less its usage when that
 * is lower; 0 when unknown. $XFPROF_TEST_MEM_AVAILABLE (bytes, tests only) overrides it. */
int64_t sysmem_available_bytes(void);

/* Physical memory (bytes); 0 when unknown. */
int64_t sysmem_total_bytes(void);

#endif
