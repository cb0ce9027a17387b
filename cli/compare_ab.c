#include "compare_ab.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/fileio.h"
#include "reports/record_json.h"
#include "signals.h"
#include "probes/timer.h"

static const char *SIDE[2] = {"BASE", "NEW"};

void ab_rounds_free(ab_rounds *r) {
    if (!r) return;
    for (int k = 0; k < r->n; k++) {
        record_free(&r->base[k]);
        record_free(&r->new_[k]);
    }
    free(r->base);
    free(r->new_);
    free(r->order);
    memset(r, 0, sizeof *r);
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Runs argv (argv[0] a path) with stdout to out_path (NULL: /dev/null) and stderr to err_path.
 * Returns the wait status, or -1 with errno when it could not start. */
static int spawn_wait(char *const argv[], const char *out_path, const char *err_path) {
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int in = open("/dev/null", O_RDONLY);
        int out = open(out_path ? out_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (in < 0 || out < 0 || err < 0) _exit(127);
        dup2(in, 0);
        dup2(out, 1);
        dup2(err, 2);
        execv(argv[0], argv);
        fprintf(stderr, "cannot execute %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    return st;
}

/* The last `lines` lines of a small text file, newlines turned to " | ", into buf. */
static const char *tail_of(const char *path, int lines, char *buf, size_t len) {
    buf[0] = '\0';
    char *text = NULL;
    size_t n = 0;
    if (file_read_all(path, 1 << 20, &text, &n) != XF_OK || !text) {
        xf_error_clear();
        return buf;
    }
    while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == ' ')) text[--n] = '\0';
    size_t start = n;
    int seen = 0;
    while (start > 0) {
        if (text[start - 1] == '\n' && ++seen == lines) break;
        start--;
    }
    size_t o = 0;
    for (size_t i = start; i < n && o + 4 < len; i++) {
        if (text[i] == '\n') {
            memcpy(buf + o, " | ", 3);
            o += 3;
        } else if ((unsigned char)text[i] >= 0x20 && (unsigned char)text[i] < 0x7f) {
            buf[o++] = text[i];
        }
    }
    buf[o] = '\0';
    free(text);
    return buf;
}

static const char *status_words(int st, char *buf, size_t len) {
    if (st < 0) snprintf(buf, len, "could not start: %s", strerror(errno));
    else if (WIFEXITED(st)) snprintf(buf, len, "exit status %d", WEXITSTATUS(st));
    else if (WIFSIGNALED(st)) snprintf(buf, len, "killed by signal %d", WTERMSIG(st));
    else snprintf(buf, len, "wait status %d", st);
    return buf;
}

/* BIN --version must print "xfprof " first: anything else is not an xfprof build. */
static xf_status check_build(const char *side, const char *bin, const char *dir) {
    struct stat sb;
    if (stat(bin, &sb) != 0) return xf_errorf(XF_EINVAL, "%s build '%s': %s", side, bin, strerror(errno));
    if (!S_ISREG(sb.st_mode) || access(bin, X_OK) != 0)
        return xf_errorf(XF_EINVAL, "%s build '%s' is not an executable file: give the path of an xfprof binary", side, bin);
    char out[4096], err[4096];
    snprintf(out, sizeof out, "%s/version-%s.out", dir, side);
    snprintf(err, sizeof err, "%s/version-%s.err", dir, side);
    char *argv[] = {(char *)bin, "--version", NULL};
    int st = spawn_wait(argv, out, err);
    char *text = NULL;
    size_t n = 0;
    int ok = st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 && file_read_all(out, 4096, &text, &n) == XF_OK && text &&
             n >= 7 && strncmp(text, "xfprof ", 7) == 0;
    xf_error_clear();
    free(text);
    unlink(out);
    unlink(err);
    if (!ok)
        return xf_errorf(XF_EINVAL, "%s build '%s' is not an xfprof binary ('%s --version' did not print 'xfprof <version>')",
                         side, bin, bin);
    return XF_OK;
}

static int has_output_flag(char **cmd, int n) {
    for (int i = 1; i < n; i++)
        if (strcmp(cmd[i], "-o") == 0 || strcmp(cmd[i], "--output") == 0 || strncmp(cmd[i], "--output=", 9) == 0 ||
            (strncmp(cmd[i], "-o", 2) == 0 && cmd[i][2] != '\0'))
            return 1;
    return 0;
}

/* One run of one side: BIN CMD... -o DIR/SIDE-K.json, its record loaded into *r. */
static xf_status run_side(const ab_plan *p, int side, int round, const char *dir, record *r) {
    char rec[4096], err[4096];
    snprintf(rec, sizeof rec, "%s/%s-%02d.json", dir, side ? "new" : "base", round + 1);
    snprintf(err, sizeof err, "%s/%s-%02d.err", dir, side ? "new" : "base", round + 1);
    record_init(r, "run");
    char **argv = calloc((size_t)p->n_cmd + 4, sizeof *argv);
    if (!argv) return xf_errorf(XF_ENOMEM, "out of memory starting a run");
    int n = 0;
    argv[n++] = (char *)p->bin[side];
    for (int i = 0; i < p->n_cmd; i++) argv[n++] = p->cmd[i];
    argv[n++] = "-o";
    argv[n++] = rec;
    argv[n] = NULL;
    int st = spawn_wait(argv, NULL, err);
    free(argv);
    if (cli_signal_pending()) {
        if (!p->keep) {
            unlink(rec);
            unlink(err);
        }
        return xf_errorf(XF_EIO, "stopped by %s in round %d", cli_signal_name(cli_signal_pending()), round + 1);
    }
    if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        char why[64], tail[600];
        xf_status s = xf_errorf(XF_EINVAL, "the %s build's '%s' failed in round %d (%s): %s", SIDE[side], p->cmd[0], round + 1,
                                status_words(st, why, sizeof why), tail_of(err, 3, tail, sizeof tail));
        if (!p->keep) unlink(err), unlink(rec);
        return s;
    }
    record_free(r);
    xf_status s = record_load(rec, r);
    if (s) s = xf_error_prefix(XF_EINVAL, "the %s build's record of round %d: ", SIDE[side], round + 1);
    if (!p->keep) {
        unlink(rec);
        unlink(err);
    }
    return s;
}

xf_status ab_ensure_machine_file(const char *bin, const char *dir, char *made, size_t len) {
    made[0] = '\0';
    const char *env = getenv("XFPROF_MACHINE_FILE");
    if (env && *env) return XF_OK; /* the user's choice; a missing file makes each run measure quickly */
    const char *home = getenv("HOME");
    char path[4096];
    if (home && *home) {
        snprintf(path, sizeof path, "%s/.cache/xfprof/machine.json", home);
        if (access(path, R_OK) == 0) return XF_OK;
    }
    snprintf(made, len, "%s/machine.json", dir);
    if (setenv("XFPROF_MACHINE_FILE", made, 1) != 0) return xf_errorf(XF_ENOMEM, "cannot set XFPROF_MACHINE_FILE");
    char err[4096];
    snprintf(err, sizeof err, "%s/machine.err", dir);
    char *argv[] = {(char *)bin, "machine", "--quick", NULL};
    int st = spawn_wait(argv, NULL, err);
    if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        char why[64], tail[600];
        xf_status s = xf_errorf(XF_EINVAL, "%s machine --quick (no machine file yet) failed (%s): %s", bin,
                                status_words(st, why, sizeof why), tail_of(err, 3, tail, sizeof tail));
        unlink(err);
        return s;
    }
    unlink(err);
    return XF_OK;
}

xf_status ab_run(const ab_plan *p, ab_rounds *out) {
    memset(out, 0, sizeof *out);
    double t0 = timer_now_s();
    if (p->rounds < 1) return xf_errorf(XF_EINVAL, "--rounds must be at least 1 (got %d)", p->rounds);
    if (p->n_cmd < 1 || (strcmp(p->cmd[0], "run") != 0 && strcmp(p->cmd[0], "sweep") != 0))
        return xf_errorf(XF_EINVAL, "after -- comes the command both builds run: 'run ...' or 'sweep ...' (got '%s')",
                         p->n_cmd ? p->cmd[0] : "");
    if (has_output_flag(p->cmd, p->n_cmd))
        return xf_errorf(XF_EINVAL, "the command after -- must not set -o: compare --ab writes each run's record itself");
    char dir[2048];
    if (p->keep) {
        if (mkdir(p->keep, 0700) != 0 && errno != EEXIST) return xf_errorf(XF_EIO, "--keep %s: %s", p->keep, strerror(errno));
        snprintf(dir, sizeof dir, "%s", p->keep);
    } else {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/xfprof-ab-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir)) return xf_errorf(XF_EIO, "cannot make a work folder %s: %s", dir, strerror(errno));
    }
    xf_status s = check_build("BASE", p->bin[0], dir);
    if (s == XF_OK) s = check_build("NEW", p->bin[1], dir);
    char machine[4200] = "";
    if (s == XF_OK) s = ab_ensure_machine_file(p->bin[0], dir, machine, sizeof machine);
    if (s == XF_OK) {
        out->base = calloc((size_t)p->rounds, sizeof *out->base);
        out->new_ = calloc((size_t)p->rounds, sizeof *out->new_);
        out->order = calloc((size_t)p->rounds + 1, 1);
        if (!out->base || !out->new_ || !out->order) s = xf_errorf(XF_ENOMEM, "out of memory for %d rounds", p->rounds);
    }
    uint64_t st = p->seed;
    for (int k = 0; s == XF_OK && k < p->rounds; k++) {
        int first = (int)(splitmix64(&st) >> 63); /* 0: BASE first, 1: NEW first */
        out->order[k] = first ? 'B' : 'A';
        record *slot[2] = {&out->base[k], &out->new_[k]};
        xf_status s1 = run_side(p, first, k, dir, slot[first]);
        xf_status s2 = s1 == XF_OK ? run_side(p, !first, k, dir, slot[!first]) : XF_OK;
        if (s1 != XF_OK) record_init(slot[!first], "run");
        out->n = k + 1; /* both records of round k are initialised: freed with the rest */
        s = s1 ? s1 : s2;
        if (s == XF_OK && k == 0 && p->check_first) s = p->check_first(&out->base[0], &out->new_[0], p->check_ctx);
        if (s == XF_OK && isatty(2))
            fprintf(stderr, "\rxfprof compare: round %d of %d (%s first), %.0f s", k + 1, p->rounds, first ? "NEW" : "BASE",
                    timer_now_s() - t0);
    }
    if (isatty(2) && out->n) fprintf(stderr, "\n");
    if (machine[0]) unlink(machine);
    if (!p->keep) rmdir(dir);
    out->wall_s = timer_now_s() - t0;
    if (s) ab_rounds_free(out);
    return s;
}
