#include "run_callgrind.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "compare_ab.h"
#include "core/cleanup.h"
#include "probes/callgrind.h"
#include "runner/runner.h"

static const char *CMD = "run";
#define ENV_OUT "XFPROF_CALLGRIND_OUT"

static void close_pair(int p[2]) {
    for (int i = 0; i < 2; i++)
        if (p[i] >= 0) close(p[i]);
}

/* Copies the child's stdout (fd o) and stderr (fd e) to ours until both end. */
static void copy_out(int o, int e) {
    struct pollfd fds[2] = {{o, POLLIN, 0}, {e, POLLIN, 0}};
    FILE *to[2] = {stdout, stderr};
    char buf[4096];
    int open_n = 2;
    while (open_n > 0) {
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            ssize_t got = read(fds[i].fd, buf, sizeof buf);
            if (got < 0 && errno == EINTR) continue;
            if (got <= 0) {
                fds[i].fd = -1;
                open_n--;
                continue;
            }
            fwrite(buf, 1, (size_t)got, to[i]);
            fflush(to[i]);
        }
    }
}

int run_callgrind_start(int argc, char **argv, int cache, const char **dump_path) {
    *dump_path = NULL;
    if (!callgrind_probe_built())
        return cli_fail(CMD, xf_errorf(XF_EUNSUPPORTED, "--callgrind: this build has no callgrind probe (valgrind/callgrind.h "
                                                        "was not found when it was built, or it is a sanitizer build, which "
                                                        "valgrind cannot run): apt-get install valgrind, then rebuild without "
                                                        "XFPROF_SANITIZE"));
    if (callgrind_running()) {
        const char *p = getenv(ENV_OUT);
        if (!p || !*p)
            return cli_usage_error(CMD, "--callgrind under a valgrind started by hand: run 'xfprof run --callgrind ...' "
                                        "without valgrind; it starts callgrind itself with the options the probe needs");
        *dump_path = p;
        return -1;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return cli_fail(CMD, xf_errorf(XF_EIO, "--callgrind: cannot find this binary (/proc/self/exe): %s", strerror(errno)));
    self[n] = '\0';
    const char *tmp = getenv("TMPDIR");
    char dir[PATH_MAX], out[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/xfprof-callgrind.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) return cli_fail(CMD, xf_errorf(XF_EIO, "--callgrind: cannot make a folder for the dump (%s): %s", dir, strerror(errno)));
    snprintf(out, sizeof out, "%s/cg.out", dir);
    cleanup_add(dir, 1);
    cleanup_add(out, 0);
    /* No machine file: the ceilings measured natively here, not under valgrind (minutes there). */
    char machine[PATH_MAX + 16] = "";
    char **av = NULL;
    int rc;
    xf_status ms = ab_ensure_machine_file(self, dir, machine, sizeof machine);
    if (ms) {
        rc = cli_fail(CMD, ms);
        goto done;
    }
    char optfile[PATH_MAX + 64];
    snprintf(optfile, sizeof optfile, "--callgrind-out-file=%s", out);
    const char *vg = getenv("XFPROF_VALGRIND"); /* tests: another valgrind; default: the one on PATH */
    if (!vg || !*vg) vg = "valgrind";
    const char *fixed[] = {vg, "--tool=callgrind", "-q", optfile, "--combine-dumps=yes", "--collect-atstart=no",
                           "--dump-line=no", "--dump-instr=no", cache ? "--cache-sim=yes" : "--cache-sim=no", self};
    size_t nf = sizeof fixed / sizeof fixed[0];
    av = calloc(nf + (size_t)argc + 1, sizeof *av);
    if (!av) {
        rc = cli_fail(CMD, xf_errorf(XF_ENOMEM, "out of memory"));
        goto done;
    }
    for (size_t i = 0; i < nf; i++) av[i] = (char *)fixed[i];
    for (int i = 0; i < argc; i++) av[nf + (size_t)i] = argv[i];
    fprintf(stderr, "xfprof run: under callgrind%s: exact per-op instruction counts, times not comparable (docs/ci.md)\n",
            cache ? " with its cache simulation" : "");
    fflush(NULL);
    /* The child's stdout and stderr are always pipes to this process, which copies them out: what
     * they are (a file, /dev/null, a terminal) moves the child's addresses, and with them the
     * instructions of the ops whose loops depend on alignment or on malloc's state (measured:
     * stderr to /dev/null instead of a file moved 149 of 154 ops by up to 171 instructions). */
    int pout[2] = {-1, -1}, perr[2] = {-1, -1};
    if (pipe(pout) != 0 || pipe(perr) != 0) {
        rc = cli_fail(CMD, xf_errorf(XF_EIO, "--callgrind: pipe: %s", strerror(errno)));
        close_pair(pout);
        goto done;
    }
    pid_t pid = fork();
    if (pid < 0) {
        close_pair(pout);
        close_pair(perr);
        rc = cli_fail(CMD, xf_errorf(XF_EIO, "--callgrind: fork: %s", strerror(errno)));
        goto done;
    }
    if (pid == 0) {
        int in = open("/dev/null", O_RDONLY);
        if (in < 0 || dup2(in, 0) < 0 || dup2(pout[1], 1) < 0 || dup2(perr[1], 2) < 0) _exit(CLI_EXIT_FAILURE);
        close(in);
        close_pair(pout);
        close_pair(perr);
        setenv(ENV_OUT, out, 1);
        /* No helper threads: OpenBLAS starts a pool at load time whose spinning, interleaved by
         * valgrind's scheduler, lands in whatever op range is collecting (counts then vary). */
        setenv("OPENBLAS_NUM_THREADS", "1", 1);
        setenv("OMP_NUM_THREADS", "1", 1);
        execvp(vg, av);
        fprintf(stderr, "xfprof run: --callgrind: cannot start %s: %s (apt-get install valgrind, or set XFPROF_VALGRIND)\n", vg,
                strerror(errno));
        _exit(CLI_EXIT_FAILURE);
    }
    cleanup_set_child(pid, SIGHUP); /* a signal here: the child removes its temporaries and stops */
    close(pout[1]);
    close(perr[1]);
    copy_out(pout[0], perr[0]);
    close(pout[0]);
    close(perr[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    cleanup_set_child(0, 0);
    rc = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : CLI_EXIT_FAILURE;
done:
    free(av);
    if (machine[0]) unlink(machine);
    unlink(out);
    rmdir(dir);
    cleanup_forget(out);
    cleanup_forget(dir);
    return rc;
}

int run_callgrind_check(struct run_plan *pl, int threads_given, int argc, char **argv) {
    if (pl->cuda) return cli_usage_error(CMD, "--callgrind counts the CPU model's instructions: drop --device cuda");
    if (!pl->probes) return cli_usage_error(CMD, "--callgrind counts per op range: drop --no-probes");
    if (threads_given && pl->threads != 1)
        return cli_usage_error(CMD, "--callgrind needs --threads 1 (got %d): OpenMP threads waiting for each other spin a "
                                    "number of instructions that depends on the scheduling, and the counts would not be exact",
                               pl->threads);
    pl->threads = 1;
    const char *dump = NULL;
    int rc = run_callgrind_start(argc, argv, pl->callgrind == 2, &dump);
    if (rc >= 0) return rc;
    pl->callgrind_out = dump;
    pl->perf = 0; /* the counts come from callgrind; perf_event under valgrind would count valgrind */
    const char *x = getenv("XFPROF_TEST_EXTRA_INSTR"); /* test only: tests/cli_callgrind.sh */
    if (x && *x && callgrind_test_extra_parse(x, &pl->callgrind_extra) != XF_OK) return cli_usage_error(CMD, "%s", xf_error_msg());
    return -1;
}
