/* What a signal must not leave behind, and the stop request it makes. Temporary files and
 * folders (atomic writes' *.tmpXXXXXX, gnuplot's session folder, sweep scratch files) are
 * registered while they exist; cleanup_remove_all() removes them and stops a registered child
 * process, using only async-signal-safe calls, so a signal handler can call it before the process
 * dies. The stop request is how library code (a measuring loop) learns that the user pressed
 * Ctrl-C: cli/ sets it from its handler, the loop polls it between repetitions. */
#ifndef XF_CLEANUP_H
#define XF_CLEANUP_H

#include <sys/types.h>

#include "status.h"

/* At most this many temporaries at once (a report's gnuplot session holds three per chart). */
#define CLEANUP_MAX_PATHS 256
#define CLEANUP_MAX_PATH_LEN 4224

/* Registers `path` (a file, or a folder when is_dir: removed after the files) for removal on a
 * signal. XF_EINVAL when the path is too long or the table is full: the caller then goes on
 * without the guarantee (the temporary is still removed on every ordinary exit path). */
xf_status cleanup_add(const char *path, int is_dir);

/* Forgets `path` (renamed into place or removed by its owner). Unknown paths are ignored. */
void cleanup_forget(const char *path);

/* A child process to stop on cleanup with `sig` (gnuplot while it draws: SIGKILL; a sweep's
 * `xfprof run`: SIGHUP, which makes it remove its own temporaries and stop); pid 0 clears it. */
void cleanup_set_child(pid_t pid, int sig);

/* Kills the registered child and removes every registered file, then every registered folder.
 * Async-signal-safe (kill, unlink, rmdir only); the table is left as it was. */
void cleanup_remove_all(void);

/* Number of registered paths (tests). */
int cleanup_count(void);

/* The stop request: the first signal number noted, 0 when none. stop_note() is async-signal-safe. */
void stop_note(int sig);
int stop_requested(void);
void stop_clear(void);

#endif
