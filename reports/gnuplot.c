#include "gnuplot.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/fileio.h"
#include "escape.h"
#include "sbuf.h"

#define GNUPLOT_MAX_SVG (64u << 20) /* a chart larger than this is not a chart we drew */

static int is_executable(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* Looks `name` up on PATH into buf. */
static int search_path(const char *name, char *buf, size_t len) {
    const char *path = getenv("PATH");
    if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
    const char *p = path;
    while (*p) {
        const char *end = strchr(p, ':');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n > 0) {
            int w = snprintf(buf, len, "%.*s/%s", (int)n, p, name);
            if (w > 0 && (size_t)w < len && is_executable(buf)) return 1;
        }
        p += n;
        if (*p == ':') p++;
    }
    return 0;
}

xf_status gnuplot_find(char *buf, size_t len) {
    const char *want = getenv("XFPROF_GNUPLOT");
    if (want && *want) {
        if (strchr(want, '/')) {
            if (is_executable(want) && strlen(want) < len) {
                snprintf(buf, len, "%s", want);
                return XF_OK;
            }
        } else if (search_path(want, buf, len)) {
            return XF_OK;
        }
        return xf_errorf(XF_EUNSUPPORTED, "gnuplot not found at XFPROF_GNUPLOT=%.200s", want);
    }
    if (search_path("gnuplot", buf, len)) return XF_OK;
    return xf_errorf(XF_EUNSUPPORTED,
                     "gnuplot not found on PATH: charts need it (Debian: apt-get install gnuplot-nox)");
}

xf_status gnuplot_session_init(gnuplot_session *g, double timeout_s) {
    memset(g, 0, sizeof *g);
    g->timeout_s = timeout_s > 0 ? timeout_s : 30.0;
    xf_status st = gnuplot_find(g->exe, sizeof g->exe);
    if (st != XF_OK) return st;
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp || strlen(tmp) > 3000) tmp = "/tmp";
    snprintf(g->dir, sizeof g->dir, "%s/xfprof-gnuplot-XXXXXX", tmp);
    if (!mkdtemp(g->dir)) {
        int e = errno;
        g->dir[0] = '\0';
        return xf_errorf(XF_EIO, "cannot make a temporary folder for gnuplot in %.200s: %s", tmp, strerror(e));
    }
    if (cleanup_add(g->dir, 1) != XF_OK) xf_error_clear(); /* removed on a signal too */
    return XF_OK;
}

void gnuplot_session_free(gnuplot_session *g) {
    if (!g) return;
    char path[4200];
    for (int i = 0; i < g->n_files; i++) {
        if (g->dir[0]) {
            snprintf(path, sizeof path, "%s/%s", g->dir, g->files[i]);
            unlink(path);
            cleanup_forget(path);
        }
        free(g->files[i]);
    }
    free(g->files);
    if (g->dir[0]) {
        rmdir(g->dir);
        cleanup_forget(g->dir);
    }
    memset(g, 0, sizeof *g);
}

static int valid_name(const char *name) {
    if (!name || !*name || strlen(name) > 64 || name[0] == '.') return 0;
    for (const char *p = name; *p; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == '-'))
            return 0;
    }
    return 1;
}

/* Remembers a file of the session (for removal) and builds its full path. */
static xf_status session_file(gnuplot_session *g, const char *name, char *path, size_t len) {
    if (!g->dir[0]) return xf_errorf(XF_EINVAL, "gnuplot session not initialised");
    if (!valid_name(name)) return xf_errorf(XF_EINVAL, "bad gnuplot file name '%.64s'", name ? name : "");
    int w = snprintf(path, len, "%s/%s", g->dir, name);
    if (w < 0 || (size_t)w >= len) return xf_errorf(XF_EINVAL, "temporary path too long");
    for (int i = 0; i < g->n_files; i++)
        if (strcmp(g->files[i], name) == 0) return XF_OK;
    char **nf = realloc(g->files, (size_t)(g->n_files + 1) * sizeof *nf);
    if (!nf) return xf_errorf(XF_ENOMEM, "out of memory");
    g->files = nf;
    g->files[g->n_files] = strdup(name);
    if (!g->files[g->n_files]) return xf_errorf(XF_ENOMEM, "out of memory");
    g->n_files++;
    if (cleanup_add(path, 0) != XF_OK) xf_error_clear(); /* removed on a signal too */
    return XF_OK;
}

/* Writes a private file (0600), no rename needed: the folder is ours alone. */
static xf_status write_private(const char *path, const char *text, size_t len) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return xf_errorf(XF_EIO, "cannot write %.300s: %s", path, strerror(errno));
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            close(fd);
            return xf_errorf(XF_EIO, "cannot write %.300s: %s", path, strerror(e));
        }
        off += (size_t)w;
    }
    if (close(fd) != 0) return xf_errorf(XF_EIO, "cannot write %.300s: %s", path, strerror(errno));
    return XF_OK;
}

xf_status gnuplot_write_data(gnuplot_session *g, const char *name, const char *text, size_t len, char *lit,
                             size_t lit_len) {
    char path[4200];
    xf_status st = session_file(g, name, path, sizeof path);
    if (st != XF_OK) return st;
    st = write_private(path, text, len);
    if (st != XF_OK) return st;
    sbuf b;
    sbuf_init(&b);
    esc_gnuplot(&b, name); /* relative: gnuplot runs in the session folder */
    st = sbuf_status(&b);
    if (st == XF_OK && b.len >= lit_len) st = xf_errorf(XF_EINVAL, "data file name too long");
    if (st == XF_OK) memcpy(lit, b.data, b.len + 1);
    sbuf_free(&b);
    return st;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Runs gnuplot on `script` (a name in the session folder) with the folder as its working
 * directory, so scripts name their files by simple relative names whatever $TMPDIR holds; its
 * output and errors go to `log`. fork + exec, not a shell; waits at most timeout_s. */
static xf_status wait_gnuplot(const gnuplot_session *g, pid_t pid, const char *log);

static xf_status run_gnuplot(const gnuplot_session *g, const char *script, const char *log) {
    char *argv[] = {(char *)g->exe, (char *)script, NULL};
    pid_t pid = fork();
    if (pid < 0) return xf_errorf(XF_EIO, "cannot start gnuplot: fork: %s", strerror(errno));
    if (pid == 0) {
        /* the child: only async-signal-safe calls until exec */
        int in = open("/dev/null", O_RDONLY);
        if (chdir(g->dir) != 0 || in < 0) _exit(126);
        int out = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (out < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0) _exit(126);
        execv(g->exe, argv);
        _exit(127);
    }
    cleanup_set_child(pid, SIGKILL); /* a signal now kills gnuplot before the folder is removed */
    xf_status st = wait_gnuplot(g, pid, log);
    cleanup_set_child(0, 0);
    return st;
}

static xf_status wait_gnuplot(const gnuplot_session *g, pid_t pid, const char *log) {
    double t0 = now_s();
    int status = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) return xf_errorf(XF_EIO, "waiting for gnuplot: %s", strerror(errno));
        if (now_s() - t0 > g->timeout_s) {
            kill(pid, SIGKILL);
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
            }
            return xf_errorf(XF_EIO, "gnuplot ran past its %.0f s timeout and was stopped", g->timeout_s);
        }
        struct timespec nap = {0, 2000000}; /* 2 ms */
        nanosleep(&nap, NULL);
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return XF_OK;
    char *text = NULL;
    size_t len = 0;
    const char *why = "";
    if (file_read_all(log, 1 << 16, &text, &len) == XF_OK) {
        /* the last line that says something: gnuplot's error */
        while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == ' ')) text[--len] = '\0';
        why = text;
        if (len > 400) why = text + len - 400;
    }
    xf_status st = xf_errorf(XF_EIO, "gnuplot failed (%s %d): %s", WIFEXITED(status) ? "exit status" : "signal",
                             WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), why);
    free(text);
    return st;
}

/* Copies the <svg> element, dropping gnuplot's XML prolog and its <title>, and prefixing the
 * ids it defines (and their references) so charts do not share ids in one page. */
static char *svg_clean(const char *raw, int chart) {
    const char *start = strstr(raw, "<svg");
    if (!start) return NULL;
    static const char *ids[] = {"gpPt", "gpDot", "gnuplot_canvas", "textbox", "greybox", "gpClip", "gpPat"};
    char prefix[32];
    snprintf(prefix, sizeof prefix, "xc%d_", chart);
    sbuf b;
    sbuf_init(&b);
    const char *p = start;
    while (*p) {
        if (strncmp(p, "<title>Gnuplot</title>", 22) == 0) {
            p += 22;
            continue;
        }
        int hit = 0;
        /* only inside an id='..' / href='#..' / url(#..) reference: the char before is ' " or # */
        if (p > start && (p[-1] == '\'' || p[-1] == '"' || p[-1] == '#')) {
            for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
                if (strncmp(p, ids[i], strlen(ids[i])) == 0) {
                    hit = 1;
                    break;
                }
            }
        }
        if (hit) sbuf_puts(&b, prefix);
        sbuf_putn(&b, p, 1);
        p++;
    }
    return sbuf_take(&b);
}

xf_status gnuplot_render_svg(gnuplot_session *g, const char *name, int width, int height, const char *body,
                             char **svg) {
    *svg = NULL;
    if (width < 50 || width > 10000 || height < 50 || height > 10000)
        return xf_errorf(XF_EINVAL, "chart size %dx%d out of range", width, height);
    char gp_name[96], svg_name[96], log_name[96], script[4200], out[4200], log[4200];
    snprintf(gp_name, sizeof gp_name, "%.64s.gp", name);
    snprintf(svg_name, sizeof svg_name, "%.64s.svg", name);
    snprintf(log_name, sizeof log_name, "%.64s.log", name);
    xf_status st = session_file(g, gp_name, script, sizeof script);
    if (st == XF_OK) st = session_file(g, svg_name, out, sizeof out);
    if (st == XF_OK) st = session_file(g, log_name, log, sizeof log);
    if (st != XF_OK) return st;
    sbuf s;
    sbuf_init(&s);
    sbuf_printf(&s, "set terminal svg size %d,%d noenhanced font 'sans,11' background '#ffffff'\nset output ", width,
                height);
    esc_gnuplot(&s, svg_name); /* relative: gnuplot runs in the session folder */
    sbuf_puts(&s, "\nset encoding utf8\n");
    sbuf_puts(&s, body);
    sbuf_puts(&s, "\nunset output\n");
    st = sbuf_status(&s);
    if (st == XF_OK) st = write_private(script, s.data, s.len);
    sbuf_free(&s);
    if (st != XF_OK) return st;
    unlink(out);
    st = run_gnuplot(g, gp_name, log);
    if (st != XF_OK) return xf_error_prefix(st, "chart %.64s: ", name);
    char *raw = NULL;
    size_t len = 0;
    st = file_read_all(out, GNUPLOT_MAX_SVG, &raw, &len);
    if (st != XF_OK) return xf_error_prefix(st, "chart %.64s: ", name);
    *svg = svg_clean(raw, g->n_charts++);
    free(raw);
    if (!*svg) return xf_errorf(XF_EIO, "chart %.64s: gnuplot wrote no <svg> element", name);
    return XF_OK;
}
