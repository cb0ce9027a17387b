/* SIGINT / SIGTERM for the long commands (run, sweep): the handler only records the signal; the
 * command finishes the point it is on, keeps every completed one, and exits 128 + the signal. */
#ifndef XF_CLI_SIGNALS_H
#define XF_CLI_SIGNALS_H

#include <signal.h>

/* Installs the handlers (SA_RESTART). */
void cli_signals_install(void);

/* The signal received since install (SIGINT or SIGTERM), 0 when none. */
int cli_signal_pending(void);

/* "SIGINT" / "SIGTERM". */
const char *cli_signal_name(int sig);

#endif
