/* One line of a sweep's JSONL:
 *   {"format":"xfprof-sweep-line","version":1,"key":"...","index":K,"shard":"i/n",
 *    "grid":{"points":N,"hash":"16 hex digits","axes":{...}},"record":{...}}
 * Each line stands alone (a one-point record, the key of its point, and where the point lies in
 * its grid), so an interrupted sweep keeps every finished point, --resume can read them back and
 * `xfprof merge` can join the lines of several shards (in any order, even concatenated) into the
 * record of the whole grid. "index", "shard" and "grid" are optional on read: lines written before
 * them still resume (merge refuses them, saying why). */
#ifndef XF_SWEEP_LINE_H
#define XF_SWEEP_LINE_H

#include <stddef.h>
#include <stdint.h>

#include "core/record.h"
#include "sweep_shard.h"

#define SWEEP_LINE_FORMAT "xfprof-sweep-line"
#define SWEEP_LINE_VERSION 1

/* Where a point lies: grid index (0-based), the shard that ran it, the grid (all borrowed). */
typedef struct sweep_line_place {
    int64_t index;
    const sweep_shard *shard;
    const sweep_meta *grid;
} sweep_line_place;

/* The line for point `key` with its one-point record, newline included; *len its length. place
 * NULL: no index, shard or grid (the older form). Freed by the caller with free(); NULL on OOM. */
char *sweep_line_make(const char *key, const sweep_line_place *place, const record *r, size_t *len);

/* Parses one line (untrusted: `len` bytes, no NUL needed) into its key and record. *r is
 * record_init'ed here; free it with record_free, also after an error. */
xf_status sweep_line_parse(const char *text, size_t len, const char *ctx, char *key, size_t keylen, record *r);

/* What merge needs of a line, without building its record. */
typedef struct sweep_line_meta {
    char key[SWEEP_KEY_LEN];
    int has_place;        /* 0: a line without index, shard and grid (written before sharding) */
    int64_t index;        /* 0 .. n_points - 1 */
    sweep_shard shard;
    int64_t n_points;
    uint64_t hash;
    char *axes;           /* the grid's axes, JSON object text (printed again: comparable); owned */
    char tool_version[32];/* record.tool_version */
    char created[32];     /* record.created */
    uint64_t setup_hash;  /* FNV-1a 64 of record.model and record.device as printed */
} sweep_line_meta;

/* Parses one line's meta (untrusted text); the index is checked against the grid's point count
 * and the shard (index mod n == i - 1). *m is zeroed here; free with sweep_line_meta_free, also
 * after an error. */
xf_status sweep_line_parse_meta(const char *text, size_t len, const char *ctx, sweep_line_meta *m);
void sweep_line_meta_free(sweep_line_meta *m);

#endif
