/* Reading whole files and writing them atomically: every file xfprof writes is replaced in one
 * rename, so an interrupted write never leaves half a file. */
#ifndef XF_FILEIO_H
#define XF_FILEIO_H

#include <stddef.h>

#include "status.h"

/* Reads the file at `path` (at most max_bytes) into a NUL-terminated buffer. *out is freed by
 * the caller with free(). XF_EIO naming the path and the reason on failure. */
xf_status file_read_all(const char *path, size_t max_bytes, char **out, size_t *len);

/* Writes `len` bytes to `path` through a temporary file in the same folder, fsync, rename.
 * path NULL or "-" writes to stdout. On failure any earlier file at `path` is left intact. */
xf_status file_write_atomic(const char *path, const void *data, size_t len);

/* A file written piece by piece and replaced atomically at the end, as file_write_atomic does in
 * one call: a temporary in the same folder (registered for removal on a signal), fsync, rename.
 * path NULL or "-": stdout, written as it comes. */
typedef struct file_stream {
    int fd;
    char *tmp;        /* the temporary's path; NULL for stdout or a device written in place; owned */
    const char *path; /* borrowed */
    xf_status status; /* the first failure; later writes do nothing */
} file_stream;

xf_status file_stream_open(file_stream *fs, const char *path);
xf_status file_stream_write(file_stream *fs, const void *data, size_t len);
/* Renames the temporary into place (on success) or removes it; returns the first failure. */
xf_status file_stream_close(file_stream *fs);

/* XF_EIO "cannot write PATH: folder DIR does not exist" (or is not a folder) when path's folder is
 * missing: for a command that would otherwise work minutes before failing to write. "-" is fine. */
xf_status file_check_parent(const char *path);

#endif
