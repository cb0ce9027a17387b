#include "fileio.h"

#include "cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

xf_status file_read_all(const char *path, size_t max_bytes, char **out, size_t *len) {
    *out = NULL;
    if (len) *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return xf_errorf(XF_EIO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        return xf_errorf(XF_EIO, "%s is a folder, not a file", path);
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf) {
        fclose(f);
        return xf_errorf(XF_ENOMEM, "out of memory reading %s", path);
    }
    for (;;) {
        if (n == cap) {
            if (cap >= max_bytes) {
                free(buf);
                fclose(f);
                return xf_errorf(XF_EIO, "%s is larger than %zu bytes: not a file xfprof reads", path, max_bytes);
            }
            size_t ncap = cap * 2 > max_bytes ? max_bytes : cap * 2;
            char *nb = realloc(buf, ncap + 1);
            if (!nb) {
                free(buf);
                fclose(f);
                return xf_errorf(XF_ENOMEM, "out of memory reading %s", path);
            }
            buf = nb;
            cap = ncap;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    if (ferror(f)) {
        int e = errno;
        free(buf);
        fclose(f);
        return xf_errorf(XF_EIO, "cannot read %s: %s", path, strerror(e));
    }
    fclose(f);
    buf[n] = '\0';
    *out = buf;
    if (len) *len = n;
    return XF_OK;
}

static xf_status write_fd_all(int fd, const char *p, size_t len, const char *what) {
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR) continue;
            return xf_errorf(XF_EIO, "cannot write %s: %s", what, strerror(errno));
        }
        p += w;
        len -= (size_t)w;
    }
    return XF_OK;
}

/* write_fd_all, with the test-only pause XFPROF_TEST_WRITE_PAUSE_MS=N: half the bytes, a sleep of
 * N ms, the rest, so a test can signal xfprof while a temporary file exists (tests/cli_signals.sh). */
static xf_status write_pausing(int fd, const char *p, size_t len, const char *what) {
    const char *env = getenv("XFPROF_TEST_WRITE_PAUSE_MS");
    long ms = env ? strtol(env, NULL, 10) : 0;
    if (ms <= 0 || ms > 600000) return write_fd_all(fd, p, len, what);
    xf_status s = write_fd_all(fd, p, len / 2, what);
    if (s) return s;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
    return write_fd_all(fd, p + len / 2, len - len / 2, what);
}

xf_status file_stream_open(file_stream *fs, const char *path) {
    memset(fs, 0, sizeof *fs);
    fs->fd = -1;
    fs->path = path;
    if (!path || strcmp(path, "-") == 0) {
        fs->fd = STDOUT_FILENO;
        fs->path = "standard output";
        return XF_OK;
    }
    /* A device or pipe (/dev/full, /dev/stdout, a FIFO) is written in place: renaming a temporary
     * file over it would replace the device node itself. */
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        if (S_ISDIR(st.st_mode)) return fs->status = xf_errorf(XF_EIO, "cannot write %s: it is a folder", path);
        fs->fd = open(path, O_WRONLY | O_TRUNC);
        if (fs->fd < 0) return fs->status = xf_errorf(XF_EIO, "cannot write %s: %s", path, strerror(errno));
        return XF_OK;
    }
    size_t plen = strlen(path);
    fs->tmp = malloc(plen + 16);
    if (!fs->tmp) return fs->status = xf_errorf(XF_ENOMEM, "out of memory writing %s", path);
    snprintf(fs->tmp, plen + 16, "%s.tmpXXXXXX", path);
    fs->fd = mkstemp(fs->tmp);
    if (fs->fd < 0) {
        fs->status = xf_errorf(XF_EIO, "cannot write %s: %s", path, strerror(errno));
        free(fs->tmp);
        fs->tmp = NULL;
        return fs->status;
    }
    /* A signal while the temporary exists removes it (cli/signals.c); not registered (the table is
     * full): the ordinary paths below still remove it. */
    if (cleanup_add(fs->tmp, 0) != XF_OK) xf_error_clear();
    return XF_OK;
}

xf_status file_stream_write(file_stream *fs, const void *data, size_t len) {
    if (fs->status == XF_OK && fs->fd >= 0) fs->status = write_pausing(fs->fd, data, len, fs->path);
    return fs->status;
}

xf_status file_stream_close(file_stream *fs) {
    xf_status s = fs->status;
    if (fs->fd >= 0 && fs->fd != STDOUT_FILENO) {
        if (fs->tmp && s == XF_OK && fsync(fs->fd) != 0 && errno != EINVAL && errno != EROFS)
            s = xf_errorf(XF_EIO, "cannot write %s: %s", fs->path, strerror(errno));
        /* mkstemp makes 0600; files people keep get the usual 0644 less the umask. */
        if (fs->tmp && s == XF_OK) {
            mode_t um = umask(0);
            umask(um);
            fchmod(fs->fd, 0666 & ~um);
        }
        if (close(fs->fd) != 0 && s == XF_OK) s = xf_errorf(XF_EIO, "cannot write %s: %s", fs->path, strerror(errno));
    }
    if (fs->tmp) {
        if (s == XF_OK && rename(fs->tmp, fs->path) != 0) s = xf_errorf(XF_EIO, "cannot write %s: %s", fs->path, strerror(errno));
        if (s != XF_OK) unlink(fs->tmp);
        cleanup_forget(fs->tmp);
        free(fs->tmp);
    }
    fs->fd = -1;
    fs->tmp = NULL;
    return s;
}

xf_status file_write_atomic(const char *path, const void *data, size_t len) {
    file_stream fs;
    if (file_stream_open(&fs, path) == XF_OK) file_stream_write(&fs, data, len);
    return file_stream_close(&fs);
}

xf_status file_check_parent(const char *path) {
    if (!path || !strcmp(path, "-")) return XF_OK;
    char dir[4096];
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) return xf_errorf(XF_EINVAL, "path too long: %.64s...", path);
    char *slash = strrchr(dir, '/');
    if (!slash) return XF_OK; /* the current folder */
    if (slash == dir) slash[1] = '\0';
    else *slash = '\0';
    struct stat st;
    if (stat(dir, &st) != 0) return xf_errorf(XF_EIO, "cannot write %s: folder %s does not exist (%s)", path, dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return xf_errorf(XF_EIO, "cannot write %s: %s is not a folder", path, dir);
    return XF_OK;
}
