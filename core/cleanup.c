#include "cleanup.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

/* One slot per temporary. `state` is written last on add and first on forget, so a handler that
 * interrupts either sees a complete path or skips the slot. */
typedef struct cleanup_slot {
    volatile sig_atomic_t state; /* 0 free, 1 file, 2 folder */
    char path[CLEANUP_MAX_PATH_LEN];
} cleanup_slot;

static cleanup_slot g_slots[CLEANUP_MAX_PATHS];
static volatile sig_atomic_t g_child, g_child_sig;
static volatile sig_atomic_t g_stop;

xf_status cleanup_add(const char *path, int is_dir) {
    size_t n = strlen(path);
    if (n >= CLEANUP_MAX_PATH_LEN) return xf_errorf(XF_EINVAL, "temporary path too long to register (%zu bytes)", n);
    for (int i = 0; i < CLEANUP_MAX_PATHS; i++) {
        if (g_slots[i].state) continue;
        memcpy(g_slots[i].path, path, n + 1);
        g_slots[i].state = is_dir ? 2 : 1;
        return XF_OK;
    }
    return xf_errorf(XF_EINVAL, "more than %d temporaries at once", CLEANUP_MAX_PATHS);
}

void cleanup_forget(const char *path) {
    for (int i = 0; i < CLEANUP_MAX_PATHS; i++)
        if (g_slots[i].state && strcmp(g_slots[i].path, path) == 0) {
            g_slots[i].state = 0;
            return;
        }
}

void cleanup_set_child(pid_t pid, int sig) {
    g_child = 0;
    g_child_sig = sig;
    g_child = (sig_atomic_t)pid;
}

void cleanup_remove_all(void) {
    pid_t child = (pid_t)g_child;
    if (child > 0) kill(child, g_child_sig > 0 ? (int)g_child_sig : SIGKILL);
    for (int i = 0; i < CLEANUP_MAX_PATHS; i++)
        if (g_slots[i].state == 1) unlink(g_slots[i].path);
    for (int i = CLEANUP_MAX_PATHS - 1; i >= 0; i--)
        if (g_slots[i].state == 2) rmdir(g_slots[i].path);
}

int cleanup_count(void) {
    int n = 0;
    for (int i = 0; i < CLEANUP_MAX_PATHS; i++) n += g_slots[i].state != 0;
    return n;
}

void stop_note(int sig) {
    if (!g_stop) g_stop = sig;
}

int stop_requested(void) { return (int)g_stop; }

void stop_clear(void) { g_stop = 0; }
