/* The sweep's files (sweep_file.c): the JSONL checkpoint, the final records, the test hook. */
#ifndef XF_SWEEP_FILE_H
#define XF_SWEEP_FILE_H

#include <stddef.h>
#include <sys/types.h>

#include "core/record.h"
#include "output.h"
#include "sweep_grid.h"
#include "sweep_shard.h"

/* Test only, honoured by sweep and run where they build their record.
 * XFPROF_TEST_SLOW_OP=[phase/]op:factor (gate_up:1.3; a star for op, as in decode/ + star + :1.1,
 * means every op): multiplies the time of every op of kind `op`, in `phase` only when given
 * (prefill or decode), by
 * `factor` -- its time, its raw samples and, for a predicted op, its predicted time -- and adds
 * the difference to the step times and tokens/s it belongs to. Applied once per record (the env
 * key test_slow_op marks it: a sweep reading a run's record leaves it alone). Unset or empty:
 * nothing. A malformed value: XF_EINVAL naming it. */
xf_status sweep_test_slow_op(record *r);

/* Appends one line (len bytes) to the JSONL at fd and fsyncs; on failure the file is cut back to
 * *good bytes. *good advances by len on success. */
xf_status sweep_append_line(int fd, const char *path, const char *line, size_t len, off_t *good);

/* --resume: reads every complete line of the JSONL at fd (XF_EINVAL naming a bad one), drops an
 * incomplete last line, puts the points whose key is in ps[0..n) into the store (done[i] = 1). */
struct sweep_store;
xf_status sweep_resume_load(int fd, const char *path, const sweep_param *ps, int64_t n, struct sweep_store *store,
                            unsigned char *done, int64_t *n_resumed, off_t *good);

/* FILE with -MODEL-DEVICE before its extension, into buf; returns buf. */
const char *sweep_group_path(const char *path, const char *model, const char *dev, char *buf, size_t len);

/* How the records of a sweep (or a merge) are written: `out` as the command's -o / --format /
 * --report / --trace give it (out.path the base path); full: every op in memory, rendered by
 * cli_output_write; else streamed from the store (JSON). */
struct sweep_store;
typedef struct sweep_writer {
    const char *cmd;           /* for messages */
    cli_output out;
    int full;
    struct sweep_store *store; /* borrowed */
} sweep_writer;

/* One record per (model, device) group, as `sweep -o` writes them: the group's points of done[]
 * assembled from the store in grid order, the advice added, env "shard" set when shard->count > 1,
 * written to out.path or, when the grid has several groups, to sweep_group_path of it. A group
 * holding no point of a shard is skipped with a note (no empty record). Returns an exit code
 * (messages printed). */
int sweep_write_records(sweep_writer *w, const sweep_param *ps, const unsigned char *done, char *const *models, int n_models,
                        char *const *devices, int n_devices, const sweep_shard *shard);

/* The progress line on a terminal: "point i of n | elapsed | ETA" (ETA from the `finished` of `todo`
 * points measured in `elapsed_s`). */
void sweep_progress(int64_t i, int64_t n, double elapsed_s, int64_t finished, int64_t todo);

#endif
