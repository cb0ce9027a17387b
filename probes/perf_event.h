/* The perf_event probe: CPU hardware counters over every op range, where the kernel offers them.
 *
 * Counters: cycles, instructions, LLC misses (the kernel's generic cache-misses event, which
 * counts last-level misses on x86), and memory-controller bytes read and written when uncore IMC
 * PMUs are exposed (/sys/bus/event_source/devices/uncore_imc*; these count the whole socket,
 * every process, and need perf_event_paranoid <= 0 or CAP_PERFMON). Core counters are opened
 * for this process with inherit, so threads created after perf_probe_init (the OpenMP pool) are
 * counted too: create the probe before the first parallel region.
 *
 * Where a counter cannot be opened (virtual machines often have no PMU) it is kept as
 * unsupported with the reason, and the probe goes on with the others (or with none).
 * Samples follow the timer's scheme (probes/timer.h): per repetition, prefill ops sum their
 * ranges, decode ops give the mean per decode step; the record gets the median over
 * repetitions. begin/end never allocate. */
#ifndef XF_PERF_EVENT_H
#define XF_PERF_EVENT_H

#include <stdint.h>

#include "core/record.h"
#include "core/probe.h"

typedef enum perf_counter_id {
    PERF_CYCLES = 0,
    PERF_INSTRUCTIONS,
    PERF_LLC_MISSES,
    PERF_IMC_READ_BYTES,
    PERF_IMC_WRITE_BYTES,
    PERF_COUNTER_COUNT
} perf_counter_id;

/* Record names: "cycles", "instructions", "llc_misses", "imc_read_bytes", "imc_write_bytes". */
const char *perf_counter_name(perf_counter_id c);

typedef struct perf_probe perf_probe;

#define PERF_PROBE_FORCE_UNSUPPORTED 1 /* open nothing: every counter unsupported (tests) */

/* Opens the counters for a model of n_layers layers keeping up to max_reps samples per op.
 * Always succeeds unless out of memory or given bad sizes: unavailable counters are marked
 * unsupported. *out is freed with perf_probe_free, or by the probe's free when handed to a
 * probe_set through perf_probe_as_probe. */
xf_status perf_probe_init(int64_t n_layers, int max_reps, int flags, perf_probe **out);
void perf_probe_free(perf_probe *p); /* NULL is fine */

probe perf_probe_as_probe(perf_probe *p);

/* 1 when counter c was opened. */
int perf_probe_supported(const perf_probe *p, perf_counter_id c);
/* Why counter c is unsupported ("" when supported); owned by the probe. */
const char *perf_probe_reason(const perf_probe *p, perf_counter_id c);
/* Number of supported counters. */
int perf_probe_n_supported(const perf_probe *p);

void perf_probe_rep_begin(perf_probe *p);
xf_status perf_probe_rep_end(perf_probe *p);
void perf_probe_clear(perf_probe *p);

/* Fills op->counters (every counter, supported or not; the value is the median over
 * repetitions) and, when both IMC counters are supported, op->measured_bytes and
 * op->bytes_from_counters. A NULL probe writes every counter as unsupported. */
void perf_probe_fill(const perf_probe *p, xf_phase phase, int layer, op_kind kind, record_op *op);

/* Reads counter c right now (for tests and whole-program figures); XF_EUNSUPPORTED if not open. */
xf_status perf_probe_read_now(const perf_probe *p, perf_counter_id c, double *value);

#endif
