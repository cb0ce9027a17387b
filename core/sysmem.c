#include "sysmem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One number from a file holding it alone ("max" or unreadable: -1). */
static int64_t read_number_file(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char buf[64] = "";
    int ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    if (!ok || buf[0] < '0' || buf[0] > '9') return -1;
    return (int64_t)strtoll(buf, NULL, 10);
}

int64_t sysmem_available_bytes(void) {
    const char *t = getenv("XFPROF_TEST_MEM_AVAILABLE");
    if (t && *t) return (int64_t)strtoll(t, NULL, 10);
    int64_t avail = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        long long kb;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1) {
                avail = (int64_t)kb * 1024;
                break;
            }
        fclose(f);
    }
    /* cgroup v2: a container's limit is what it can have, whatever the host holds */
    int64_t lim = read_number_file("/sys/fs/cgroup/memory.max"), cur = read_number_file("/sys/fs/cgroup/memory.current");
    if (lim > 0 && cur >= 0) {
        int64_t room = lim > cur ? lim - cur : 0;
        if (avail == 0 || room < avail) avail = room;
    }
    return avail;
}

int64_t sysmem_total_bytes(void) {
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    return pages > 0 && psz > 0 ? (int64_t)pages * (int64_t)psz : 0;
}
