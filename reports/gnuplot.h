/* The gnuplot driver: charts are drawn by gnuplot's SVG terminal, run as a child process
 * (fork + exec, never a shell) on a script file and data files in a private temporary folder
 * (mkdtemp) that is its working directory, with a timeout; the SVG is read back for inlining into
 * the HTML report. */
#ifndef XF_GNUPLOT_H
#define XF_GNUPLOT_H

#include <stddef.h>

#include "core/status.h"

/* Finds the gnuplot executable: $XFPROF_GNUPLOT when set (a path, or a name looked up on PATH;
 * a path that is not executable means "no gnuplot", which is how tests turn it off), else
 * "gnuplot" on PATH. XF_EUNSUPPORTED with a message saying how to install it when none. */
xf_status gnuplot_find(char *buf, size_t len);

typedef struct gnuplot_session {
    char exe[4096];   /* the gnuplot found */
    char dir[4096];   /* private temporary folder; "" before init or after free */
    double timeout_s; /* per chart */
    int n_files;
    char **files;     /* (n_files) names created in dir, removed by gnuplot_session_free; owned */
    int n_charts;     /* charts rendered, for unique SVG ids */
} gnuplot_session;

/* Finds gnuplot and makes the temporary folder ($TMPDIR or /tmp). XF_EUNSUPPORTED when gnuplot
 * is absent (the folder is not made then). Free with gnuplot_session_free in every case. */
xf_status gnuplot_session_init(gnuplot_session *g, double timeout_s);

/* Removes the session's files and folder. NULL or a failed init is fine. */
void gnuplot_session_free(gnuplot_session *g);

/* Writes a data file `name` ([A-Za-z0-9_.-], no slash) in the session folder and puts the name,
 * as a gnuplot string literal ('...'), into `lit` (lit_len bytes) for scripts: gnuplot runs in
 * the session folder, so scripts never carry the temporary path. */
xf_status gnuplot_write_data(gnuplot_session *g, const char *name, const char *text, size_t len, char *lit, size_t lit_len);

/* Renders one chart: writes `name`.gp holding the SVG terminal settings (width x height pixels,
 * no enhanced text, white background), the output file, then `body`; runs gnuplot on it; reads
 * the SVG back. *svg (caller frees with free()) is the <svg ...>...</svg> element alone (no XML
 * prolog), its ids made unique per chart so several charts can live in one HTML page.
 * XF_EIO with gnuplot's own error text when it fails or runs past the timeout. */
xf_status gnuplot_render_svg(gnuplot_session *g, const char *name, int width, int height, const char *body, char **svg);

#endif
