/* SIGINT / SIGTERM / SIGHUP for every command.
 *
 * Every command (cli_signals_install_default, from main): a signal removes the temporaries
 * registered in core/cleanup.h (atomic writes in progress, gnuplot folders, sweep scratch files),
 * then the process dies of that signal as it would have (exit status 128 + the signal).
 *
 * The long commands (run, sweep: cli_signals_install): the first SIGINT or SIGTERM only notes a
 * stop request (core/cleanup.h stop_requested) and says so on stderr: the repetition being
 * measured finishes, what is complete is written and marked partial, and the command exits
 * 128 + the signal. A second signal stops at once, as above: temporaries removed, no file
 * half-written (every file goes through file_write_atomic). */
#ifndef XF_CLI_SIGNALS_H
#define XF_CLI_SIGNALS_H

#include <signal.h>

/* Every command: remove the temporaries, then die of the signal. */
void cli_signals_install_default(void);

/* run, sweep: first signal a stop request, second as cli_signals_install_default. */
void cli_signals_install(void);

/* The signal received since install (SIGINT or SIGTERM), 0 when none. */
int cli_signal_pending(void);

/* "SIGINT" / "SIGTERM" / "SIGHUP". */
const char *cli_signal_name(int sig);

#endif
