/* What `xfprof merge` reads (cli/cmd_merge.c): the lines of shard JSONLs (sweep_line.h), each
 * naming its grid and its index in it, checked and put in grid order. The files are scanned once
 * line by line (a line is parsed and dropped: memory holds each point's key and where its line
 * is, not its record) and their lines read back one at a time in grid order. */
#ifndef XF_SWEEP_MERGE_H
#define XF_SWEEP_MERGE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/status.h"
#include "sweep_grid.h"

typedef struct merge_point {
    int file;           /* index into the inputs; -1 while the point is missing */
    int64_t line;       /* 1-based line number in that file */
    int64_t off, len;   /* the line's bytes (newline included) in that file */
    char *key;          /* owned */
    uint64_t setup;     /* hash of the point record's model and device */
} merge_point;

typedef struct sweep_merge {
    int n_files;
    const char *const *paths; /* (n_files) borrowed */
    FILE **files;             /* (n_files) open for the read back; owned */
    const char *ref;          /* the file of the first line, which sets the grid (borrowed) */
    int64_t n_points;         /* of the grid (from the first line) */
    uint64_t hash;
    char *axes;               /* the grid's axes, JSON object text; owned */
    char tool_version[32];
    merge_point *pts;         /* (n_points) in grid order; owned */
    int64_t n_twice;          /* lines given again with the same bytes (kept once) */
    char *buf;                /* the line read back; owned */
    size_t cap;
} sweep_merge;

/* Reads every line of paths[0..n) and checks them: one format and version, one xfprof version,
 * one grid (else XF_EINVAL naming what differs: the axes and their values in each file), each
 * index once (the same point twice with other bytes: the shards overlap, XF_EINVAL naming both
 * lines), every point present (else XF_EINVAL naming the missing points and their shards), the
 * keys hashing to the grid's hash, one model config and device per (model, device) group. */
xf_status sweep_merge_scan(sweep_merge *m, const char *const *paths, int n);

/* The line of grid point k (newline included), valid until the next call. */
xf_status sweep_merge_line(sweep_merge *m, int64_t k, const char **text, size_t *len);

/* The grid as sweep's record writer wants it: ps (n_points) with model, device and key set (free()),
 * and the model and device names in the grid's order (args_str_list_free). */
xf_status sweep_merge_params(const sweep_merge *m, sweep_param **ps, char ***models, int *n_models, char ***devices,
                             int *n_devices);

void sweep_merge_free(sweep_merge *m); /* NULL is fine */

#endif
