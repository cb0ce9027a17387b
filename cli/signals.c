#include "signals.h"

#include <string.h>
#include <unistd.h>

#include "core/cleanup.h"

static const int g_sigs[] = {SIGINT, SIGTERM, SIGHUP};

/* Async-signal-safe throughout: cleanup_remove_all, sigaction, raise, write. */
static void die_now(int sig) {
    cleanup_remove_all();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    raise(sig);
    _exit(128 + sig); /* not reached: the default action ends the process */
}

static void on_signal_graceful(int sig) {
    if (stop_requested() || sig == SIGHUP) die_now(sig);
    stop_note(sig);
    static const char msg[] = "\nxfprof: stopping after the current repetition and writing what is complete (signal again "
                              "to stop at once)\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
}

static void install(void (*fn)(int), int restart) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fn;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof g_sigs / sizeof g_sigs[0]; i++) sigaddset(&sa.sa_mask, g_sigs[i]);
    sa.sa_flags = restart ? SA_RESTART : 0;
    for (size_t i = 0; i < sizeof g_sigs / sizeof g_sigs[0]; i++) {
        struct sigaction old;
        /* nohup: SIGHUP stays ignored. SIGINT is taken even where a shell ignores it for a
         * background job: the user (or a test) who sends it means it. */
        if (g_sigs[i] == SIGHUP && sigaction(SIGHUP, NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        sigaction(g_sigs[i], &sa, NULL);
    }
}

void cli_signals_install_default(void) { install(die_now, 1); }

void cli_signals_install(void) { install(on_signal_graceful, 1); }

int cli_signal_pending(void) { return stop_requested(); }

const char *cli_signal_name(int sig) {
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "a signal";
}
