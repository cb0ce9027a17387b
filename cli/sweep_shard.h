/* Sharding a sweep over a scheduler (Slurm job arrays, CI matrices): `sweep --shard i/n` runs the
 * grid points whose index k (0-based, in the grid's own order) has k mod n == i - 1, so the n shards
 * of one grid never overlap and never miss a point, whatever its axes. Every JSONL line says which
 * grid it belongs to (its point count, a hash of every point key in order, the axes) and its index
 * in it, so that `xfprof merge` can check and order the shards' lines (cli/cmd_merge.c). */
#ifndef XF_SWEEP_SHARD_H
#define XF_SWEEP_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "sweep_grid.h"

typedef struct sweep_shard {
    int64_t index; /* 1..count */
    int64_t count; /* 1..XF_SHARDS_MAX (core/limits.h); {1, 1}: the whole grid */
} sweep_shard;

/* "i/n" with 1 <= i <= n <= XF_SHARDS_MAX into *out; XF_EINVAL naming `flag` otherwise. */
xf_status sweep_shard_parse(const char *flag, const char *s, sweep_shard *out);

/* "i/n" into buf. */
void sweep_shard_name(const sweep_shard *sh, char *buf, size_t len);

/* 1 when grid point k (0-based) belongs to the shard. */
int sweep_shard_has(const sweep_shard *sh, int64_t k);

/* What identifies a grid: its point count, FNV-1a 64 of every key (each followed by '\n') in grid
 * order, and the axes -- for each key field, its distinct values in order of first appearance --
 * as a JSON object text {"batch":["1","2"],...} (what merge names when grids differ). */
typedef struct sweep_meta {
    int64_t n_points;
    uint64_t hash;
    char *axes; /* JSON object text; owned, freed by sweep_meta_free */
} sweep_meta;

/* The grid of ps[0..n) (all of it, before a shard is selected). Refuses (XF_EINVAL) a grid that
 * lists a point twice or a model or device name holding ';' (their keys would be ambiguous). */
xf_status sweep_meta_build(const sweep_param *ps, int64_t n, sweep_meta *m);
void sweep_meta_free(sweep_meta *m); /* NULL is fine */

/* FNV-1a 64 of keys[0..n) each followed by '\n' (the grid hash; merge recomputes it). */
uint64_t sweep_keys_hash(const char *const *keys, int64_t n);

/* The value of field `name` in a point key ("mode=predict;model=m;device=d;..."), copied into buf;
 * 0 when found, -1 when not (or too long for buf). */
int sweep_key_field(const char *key, const char *name, char *buf, size_t len);

/* Keeps the shard's points of ps[0..*n) in place, in grid order; (*gidx)[j] is the grid index of
 * the j-th kept point (freed by the caller with free()). *n becomes the count kept (may be 0). */
xf_status sweep_shard_select(const sweep_shard *sh, sweep_param *ps, int64_t *n, int64_t **gidx);

/* What `sweep` does with its expanded grid: the grid's meta into *meta (of all n points), then the
 * shard's points kept in place (sweep_shard_select) with their grid indices in *gidx (free()). */
xf_status sweep_shard_apply(const sweep_shard *sh, sweep_param *ps, int64_t *n, sweep_meta *meta, int64_t **gidx);

#endif
