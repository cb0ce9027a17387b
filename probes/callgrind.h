/* The callgrind probe: exact per-op instruction counts (and, with the cache simulation, simulated
 * cache misses) from valgrind's callgrind, for a regression gate that no machine load can move.
 *
 * How: the process runs under `valgrind --tool=callgrind --collect-atstart=no --combine-dumps=yes
 * --callgrind-out-file=FILE` (xfprof run --callgrind starts that itself, cli/run_callgrind.c).
 * Every op range turns collection on at its begin (CALLGRIND_TOGGLE_COLLECT) and off at its end,
 * then dumps the range's costs (CALLGRIND_DUMP_STATS_AT, which also zeroes them) under a label
 * naming the range: "xfprof <phase> <layer> <kind> <step>". At the end of every repetition the
 * probe reads the parts the dumps appended to FILE and adds each part's totals to its range, with
 * the timer's conventions (probes/range_table.h: prefill sums, decode the mean per step, the
 * record the median over repetitions).
 *
 * Counters written into each measured op (record_op.counters): "instructions" (callgrind's Ir),
 * and with the cache simulation "sim_l1_misses" (I1mr + D1mr + D1mw) and "sim_ll_misses" (ILmr +
 * DLmr + DLmw) of callgrind's simulated caches (sized from this host's caches, so comparable only
 * between runs on the same kind of host).
 *
 * The probe must be the innermost of the set (after the timer): the timer's own clock reads then
 * fall outside the counted range. Its fill slot is NULL: the runner calls callgrind_probe_fill
 * after the set's fill, for the ops the timer marked measured.
 *
 * Built for real only where valgrind/callgrind.h was found (XFPROF_HAVE_VALGRIND); elsewhere
 * callgrind_probe_init says XF_EUNSUPPORTED. The dump parser is always built (tests, fuzzing). */
#ifndef XF_CALLGRIND_H
#define XF_CALLGRIND_H

#include <stddef.h>
#include <stdint.h>

#include "core/probe.h"
#include "core/record.h"

/* The values kept per range. */
typedef enum callgrind_value {
    CALLGRIND_IR = 0,       /* instructions executed */
    CALLGRIND_L1_MISSES,    /* I1mr + D1mr + D1mw (cache simulation only) */
    CALLGRIND_LL_MISSES,    /* ILmr + DLmr + DLmw (cache simulation only) */
    CALLGRIND_VALUE_COUNT
} callgrind_value;

/* One part of a combined callgrind dump, as the parser hands it over. */
typedef struct callgrind_part {
    int has_range;          /* 1: the trigger was one of our labels, range below is set */
    probe_range range;
    int has_cache;          /* 1: the part's events include the cache simulation's */
    double v[CALLGRIND_VALUE_COUNT];
} callgrind_part;

typedef xf_status (*callgrind_part_fn)(void *ctx, const callgrind_part *part);

/* Parses the complete parts of a combined dump in buf[0..len) (text; buf need not be
 * NUL-terminated): for each part with a "totals:" line, calls fn. A trailing part not complete yet
 * (no totals line, or its last line without a newline) is left: *used is the number of bytes
 * consumed, so a reader appends and parses again from there. Labels of other triggers (program
 * termination, another tool's dumps) give has_range 0. XF_EPARSE naming the line for a malformed
 * events/totals line, a label out of range, more than 64 events; fn's error is returned as is. */
xf_status callgrind_parse(const char *buf, size_t len, callgrind_part_fn fn, void *ctx, size_t *used);

/* The label of a range (the dump's trigger): "xfprof <phase> <layer> <kind> <step>". */
void callgrind_label(const probe_range *r, char *buf, size_t len);

/* 1 when this build has the probe (valgrind/callgrind.h found at build time). */
int callgrind_probe_built(void);
/* 1 when this process runs under valgrind. */
int callgrind_running(void);

/* Test hook (tests/cli_callgrind.sh only): inside every range of (phase, kind), `iters` more
 * iterations of a loop run while collection is on: on x86-64 exactly 2 instructions each. */
typedef struct callgrind_test_extra {
    int on;
    xf_phase phase;
    op_kind kind;
    int64_t iters;
} callgrind_test_extra;

/* Parses XFPROF_TEST_EXTRA_INSTR's value "phase/op:iters" (decode/down:5000). XF_EINVAL naming
 * what is wrong. */
xf_status callgrind_test_extra_parse(const char *s, callgrind_test_extra *out);

typedef struct callgrind_probe callgrind_probe;

/* Opens the probe for a model of n_layers keeping up to max_reps samples per op, reading the dumps
 * from out_path (the --callgrind-out-file valgrind was given; read from its current end). `cache`:
 * 1 when valgrind runs the cache simulation. XF_EUNSUPPORTED when the build has no valgrind
 * headers or the process does not run under valgrind; XF_EIO when out_path cannot be read.
 * *out is freed by callgrind_probe_free, or by the probe's free through callgrind_probe_as_probe. */
xf_status callgrind_probe_init(int64_t n_layers, int max_reps, const char *out_path, int cache,
                               const callgrind_test_extra *extra, callgrind_probe **out);
void callgrind_probe_free(callgrind_probe *p); /* NULL is fine */
probe callgrind_probe_as_probe(callgrind_probe *p);

/* Writes the probe's counters into op (replacing counters of the same names): the median over
 * repetitions of the range's totals. An op the probe never saw is left as it is. */
void callgrind_probe_fill(const callgrind_probe *p, record_op *op);

#endif
