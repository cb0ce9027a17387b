/* The finished points of a sweep, held so that memory does not grow with the points: each point's
 * JSON goes to a spool file (a temporary, removed on every exit path and on signals) as it
 * finishes, and memory keeps its workload, summary and memory figures -- what the summary and the
 * advice need -- with the ops only for the first ADVICE_MAX_POINTS of each record (the ones the
 * advice analyses). The record is then written piece by piece from the spool
 * (record_save_stream), byte for byte what record_save of the whole record writes.
 *
 * Full mode (a table, csv or md rendering, --report or --trace, which need every op) keeps every
 * point whole in memory, as before. */
#ifndef XF_CLI_SWEEP_STORE_H
#define XF_CLI_SWEEP_STORE_H

#include <stdint.h>

#include "core/record.h"
#include "sweep_grid.h"

typedef struct sweep_store {
    int64_t n;           /* points of the grid */
    int n_devices, n_groups;
    int full;            /* 1: every point whole in memory, no spool */
    record *heads;       /* (n_groups) the first finished point's record of each group, its points removed; owned */
    unsigned char *have; /* (n_groups) 1 when heads[g] is set */
    char (*latest)[32];  /* (n_groups) the latest "created" of the group's points: the record's (a merge of the
                            same points gives the same bytes) */
    int64_t *rank;       /* (n) the point's index within its group, in grid order */
    record_point *pts;   /* (n) finished points (ownership moves out in sweep_store_assemble); owned */
    int64_t *off, *len;  /* (n) the point's JSON in the spool; off -1 when not there */
    int spool;           /* the spool's fd; -1 in full mode */
    char spool_path[4096];
    const char *out_path;
    int64_t spool_end;
    char *buf;           /* a point read back from the spool; owned */
    size_t buf_cap;
} sweep_store;

/* ps (n) from sweep_grid_expand; tmpdir holds the spool; out_path (the record's file, borrowed)
 * names what cannot be written when the spool fails. */
xf_status sweep_store_init(sweep_store *st, const sweep_param *ps, int64_t n, int n_devices, int full, const char *tmpdir,
                           const char *out_path);

/* Takes point i's record (one point): r is emptied and freed. */
xf_status sweep_store_put(sweep_store *st, const sweep_param *ps, int64_t i, record *r);

/* The record of group (model, device): the points of done[] in grid order move into *out, created
 * the latest of theirs;
 * *idx (out->n_points) gives their grid indices (for sweep_store_save); free with free(). */
xf_status sweep_store_assemble(sweep_store *st, const sweep_param *ps, const unsigned char *done, int model, int dev,
                               record *out, int64_t **idx);

/* Writes rec (from sweep_store_assemble, advice added) to path: from the spool in stream mode,
 * record_save in full mode. */
xf_status sweep_store_save(sweep_store *st, const record *rec, const int64_t *idx, const char *path);

void sweep_store_free(sweep_store *st);

#endif
