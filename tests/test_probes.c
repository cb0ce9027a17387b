/* Probes: the timer (overhead measured and subtracted, per-repetition samples, decode steps
 * averaged) and the perf_event probe (supported and unsupported paths). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "probes/perf_event.h"
#include "probes/range_table.h"
#include "probes/timer.h"

/* A fake clock: every read advances it by `tick` ns; tests add `work` ns to simulate an op. */
typedef struct fake_clock {
    int64_t now, tick;
} fake_clock;

static int64_t fake_read(void *arg) {
    fake_clock *c = arg;
    int64_t v = c->now;
    c->now += c->tick;
    return v;
}

static void range(timer_probe *t, fake_clock *c, xf_phase ph, int layer, op_kind k, int64_t step, int64_t work_ns) {
    probe p = timer_probe_as_probe(t);
    probe_range r = {ph, layer, k, step};
    p.range_begin(p.ctx, &r);
    c->now += work_ns;
    p.range_end(p.ctx, &r);
}

Test(timer, fake_clock_overhead_exactly_subtracted) {
    fake_clock c = {1000, 100};
    timer_probe *t;
    cr_assert_eq(timer_probe_init_clock(2, 4, 1000, fake_read, &c, &t), XF_OK);
    /* An empty range reads the clock twice, 100 ns apart: overhead = 100 ns. */
    cr_assert_float_eq(timer_probe_overhead_s(t), 100e-9, 1e-15);
    timer_probe_rep_begin(t);
    range(t, &c, XF_PREFILL, 0, OP_QKV, 0, 1000000); /* 1 ms of "work": raw 1,000,100 ns */
    cr_assert_eq(timer_probe_rep_end(t), XF_OK);
    const double *s;
    cr_assert_eq(timer_probe_samples(t, XF_PREFILL, 0, OP_QKV, &s), 1);
    cr_assert_float_eq(s[0], 1e-3, 1e-15); /* 1,000,100 - 100 = 1,000,000 ns */
    cr_assert_eq(timer_probe_samples(t, XF_PREFILL, 1, OP_QKV, &s), 0); /* never seen */
    cr_assert_eq(timer_probe_dropped(t), 0);
    timer_probe_free(t);
}

Test(timer, prefill_sums_decode_averages_per_step) {
    fake_clock c = {0, 10};
    timer_probe *t;
    cr_assert_eq(timer_probe_init_clock(2, 4, 100, fake_read, &c, &t), XF_OK);
    cr_assert_float_eq(timer_probe_overhead_s(t), 10e-9, 1e-15);
    timer_probe_rep_begin(t);
    /* Prefill run as two chunks: 1 ms + 2 ms -> one sample of 3 ms. */
    range(t, &c, XF_PREFILL, 1, OP_ATTENTION, 0, 1000000);
    range(t, &c, XF_PREFILL, 1, OP_ATTENTION, 0, 2000000);
    /* Decode steps 1..4 of 1, 2, 3, 4 ms -> mean per step (1+2+3+4)/4 = 2.5 ms. */
    for (int k = 1; k <= 4; k++) range(t, &c, XF_DECODE, 1, OP_ATTENTION, k, 1000000LL * k);
    /* Ops outside the layers (layer -1): sampling 5 us in each of the 4 steps -> 5 us. */
    for (int k = 1; k <= 4; k++) range(t, &c, XF_DECODE, -1, OP_SAMPLING, k, 5000);
    cr_assert_eq(timer_probe_rep_end(t), XF_OK);
    const double *s;
    cr_assert_eq(timer_probe_samples(t, XF_PREFILL, 1, OP_ATTENTION, &s), 1);
    cr_assert_float_eq(s[0], 3e-3, 1e-15);
    cr_assert_eq(timer_probe_samples(t, XF_DECODE, 1, OP_ATTENTION, &s), 1);
    cr_assert_float_eq(s[0], 2.5e-3, 1e-15);
    cr_assert_eq(timer_probe_samples(t, XF_DECODE, -1, OP_SAMPLING, &s), 1);
    cr_assert_float_eq(s[0], 5e-6, 1e-15);
    /* A second repetition appends a second sample; clear drops them all. */
    timer_probe_rep_begin(t);
    range(t, &c, XF_PREFILL, 1, OP_ATTENTION, 0, 7000000);
    cr_assert_eq(timer_probe_rep_end(t), XF_OK);
    cr_assert_eq(timer_probe_samples(t, XF_PREFILL, 1, OP_ATTENTION, &s), 2);
    cr_assert_float_eq(s[1], 7e-3, 1e-15);
    cr_assert_eq(timer_probe_samples(t, XF_DECODE, 1, OP_ATTENTION, &s), 1); /* not seen in rep 2 */
    timer_probe_clear(t);
    cr_assert_eq(timer_probe_samples(t, XF_PREFILL, 1, OP_ATTENTION, &s), 0);
    timer_probe_free(t);
}

Test(timer, max_reps_and_bad_ranges) {
    fake_clock c = {0, 1};
    timer_probe *t;
    cr_assert_eq(timer_probe_init_clock(1, 2, 10, fake_read, &c, &t), XF_OK);
    for (int i = 0; i < 2; i++) {
        timer_probe_rep_begin(t);
        range(t, &c, XF_PREFILL, 0, OP_DOWN, 0, 10);
        cr_assert_eq(timer_probe_rep_end(t), XF_OK);
    }
    timer_probe_rep_begin(t);
    cr_assert_eq(timer_probe_rep_end(t), XF_EOVERFLOW);
    /* Layer 5 of a 1-layer model and an end without a begin are dropped, not stored. */
    probe p = timer_probe_as_probe(t);
    probe_range bad = {XF_PREFILL, 5, OP_DOWN, 0};
    p.range_begin(p.ctx, &bad);
    p.range_end(p.ctx, &bad);
    p.range_end(p.ctx, &bad);
    cr_assert_eq(timer_probe_dropped(t), 2);
    cr_assert_eq(timer_probe_init(-1, 2, 10, &t), XF_EINVAL);
    cr_assert_eq(timer_probe_init(1, 0, 10, &t), XF_EINVAL);
    timer_probe_free(NULL);
    p.free(p.ctx); /* the probe's free releases the timer */
}

Test(timer, stats_median_and_iqr) {
    double a[5] = {5, 1, 4, 2, 3};
    double med, iqr;
    timer_stats(a, 5, &med, &iqr);
    cr_assert_float_eq(med, 3.0, 1e-12);
    cr_assert_float_eq(iqr, 2.0, 1e-12); /* sorted 1..5: Q1 = x[1] = 2, Q3 = x[3] = 4 */
    double b[4] = {4, 3, 2, 1};
    timer_stats(b, 4, &med, &iqr);
    cr_assert_float_eq(med, 2.5, 1e-12);
    cr_assert_float_eq(iqr, 1.5, 1e-12); /* Q1 at 0.75 -> 1.75, Q3 at 2.25 -> 3.25 */
    cr_assert_eq(a[0], 5); /* input untouched */
    timer_stats(a, 0, &med, &iqr);
    cr_assert_eq(med, 0);
    cr_assert_eq(iqr, 0);
}

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* The real clock: a busy-wait of known length is measured within tolerance, and an empty range
 * comes out near zero once the overhead is subtracted. */
Test(timer, real_clock_busy_wait_within_tolerance) {
    timer_probe *t;
    cr_assert_eq(timer_probe_init(1, 600, 20000, &t), XF_OK);
    double ovh = timer_probe_overhead_s(t);
    cr_assert(ovh > 0 && ovh < 10e-6, "overhead %g s should be positive and below 10 us", ovh);
    probe p = timer_probe_as_probe(t);
    const double want = 2e-3;
    double outer[7];
    for (int rep = 0; rep < 7; rep++) {
        timer_probe_rep_begin(t);
        probe_range r = {XF_PREFILL, 0, OP_GATE_UP, 0};
        double o0 = mono_s();
        p.range_begin(p.ctx, &r);
        double t0 = mono_s();
        while (mono_s() - t0 < want) {
        }
        p.range_end(p.ctx, &r);
        outer[rep] = mono_s() - o0;
        cr_assert_eq(timer_probe_rep_end(t), XF_OK);
    }
    const double *s;
    cr_assert_eq(timer_probe_samples(t, XF_PREFILL, 0, OP_GATE_UP, &s), 7);
    /* Each sample is at least the wait (minus clock-read jitter) and at most the wall interval
     * that encloses the range, read independently around it: bounds that hold however busy the
     * machine is (a preempted wait grows both). */
    for (int rep = 0; rep < 7; rep++)
        cr_assert(s[rep] >= want - 2e-6 && s[rep] <= outer[rep] + 1e-7,
                  "rep %d: busy-wait of 2 ms measured as %g s inside a wall interval of %g s", rep, s[rep], outer[rep]);
    double med, iqr;
    /* Empty ranges: raw ~ overhead, so after subtraction the median is well below the overhead. */
    double empties[500];
    for (int i = 0; i < 500; i++) {
        timer_probe_clear(t);
        timer_probe_rep_begin(t);
        probe_range r = {XF_DECODE, 0, OP_ROPE, 1};
        p.range_begin(p.ctx, &r);
        p.range_end(p.ctx, &r);
        cr_assert_eq(timer_probe_rep_end(t), XF_OK);
        cr_assert_eq(timer_probe_samples(t, XF_DECODE, 0, OP_ROPE, &s), 1);
        empties[i] = s[0];
    }
    timer_stats(empties, 500, &med, &iqr);
    cr_assert(med <= 0.5 * ovh + 10e-9, "empty range after subtraction %g s vs overhead %g s", med, ovh);
    timer_probe_free(t);
}

Test(perf, forced_unsupported_path) {
    perf_probe *p;
    cr_assert_eq(perf_probe_init(2, 3, PERF_PROBE_FORCE_UNSUPPORTED, &p), XF_OK);
    cr_assert_eq(perf_probe_n_supported(p), 0);
    for (int c = 0; c < PERF_COUNTER_COUNT; c++) {
        cr_assert_not(perf_probe_supported(p, (perf_counter_id)c));
        cr_assert(strlen(perf_probe_reason(p, (perf_counter_id)c)) > 0);
    }
    /* Ranges run and repetitions end; nothing is counted. */
    probe pr = perf_probe_as_probe(p);
    perf_probe_rep_begin(p);
    probe_range r = {XF_DECODE, 1, OP_QKV, 1};
    pr.range_begin(pr.ctx, &r);
    pr.range_end(pr.ctx, &r);
    cr_assert_eq(perf_probe_rep_end(p), XF_OK);
    record_op op;
    memset(&op, 0, sizeof op);
    perf_probe_fill(p, XF_DECODE, 1, OP_QKV, &op);
    cr_assert_eq(op.n_counters, PERF_COUNTER_COUNT);
    cr_assert_str_eq(op.counters[0].name, "cycles");
    cr_assert_str_eq(op.counters[1].name, "instructions");
    cr_assert_str_eq(op.counters[2].name, "llc_misses");
    cr_assert_str_eq(op.counters[3].name, "imc_read_bytes");
    cr_assert_str_eq(op.counters[4].name, "imc_write_bytes");
    for (int c = 0; c < PERF_COUNTER_COUNT; c++) cr_assert_eq(op.counters[c].supported, 0);
    cr_assert_eq(op.bytes_from_counters, 0);
    double v;
    cr_assert_eq(perf_probe_read_now(p, PERF_CYCLES, &v), XF_EUNSUPPORTED);
    pr.free(pr.ctx);
    /* No probe at all: the same unsupported counters. */
    memset(&op, 0, sizeof op);
    perf_probe_fill(NULL, XF_PREFILL, 0, OP_QKV, &op);
    cr_assert_eq(op.n_counters, PERF_COUNTER_COUNT);
    cr_assert_eq(op.counters[0].supported, 0);
    perf_probe_free(NULL);
}

static volatile uint64_t sink;

Test(perf, machine_counters_or_reason) {
    perf_probe *p;
    cr_assert_eq(perf_probe_init(1, 2, 0, &p), XF_OK);
    /* Whatever the machine offers, every counter is either open or carries a reason. */
    for (int c = 0; c < PERF_COUNTER_COUNT; c++)
        cr_assert(perf_probe_supported(p, (perf_counter_id)c) || strlen(perf_probe_reason(p, (perf_counter_id)c)) > 0);
    if (!perf_probe_supported(p, PERF_INSTRUCTIONS)) {
        char why[200];
        snprintf(why, sizeof why, "%s", perf_probe_reason(p, PERF_INSTRUCTIONS));
        perf_probe_free(p);
        cr_skip("no instructions counter on this machine (%s)", why);
    }
    /* 10 million loop iterations of at least 2 instructions each (add, compare-branch). */
    probe pr = perf_probe_as_probe(p);
    perf_probe_rep_begin(p);
    probe_range r = {XF_PREFILL, 0, OP_DOWN, 0};
    pr.range_begin(pr.ctx, &r);
    for (uint64_t i = 0; i < 10000000; i++) sink += i;
    pr.range_end(pr.ctx, &r);
    cr_assert_eq(perf_probe_rep_end(p), XF_OK);
    record_op op;
    memset(&op, 0, sizeof op);
    perf_probe_fill(p, XF_PREFILL, 0, OP_DOWN, &op);
    cr_assert_eq(op.counters[PERF_INSTRUCTIONS].supported, 1);
    cr_assert(op.counters[PERF_INSTRUCTIONS].value >= 2e7, "instructions %g", op.counters[PERF_INSTRUCTIONS].value);
    perf_probe_free(p);
}

/* The range table the timer, perf_event and the kernel times share: prefill keys sum their ranges,
 * decode keys give the mean per distinct step (or per the divisor given), negative sums clamp to 0,
 * a key outside the model is refused, and max_reps is a hard limit. */
Test(probes, range_table_shared_convention) {
    range_table t;
    cr_assert_eq(range_table_init(&t, 2, 2, 2), XF_OK);
    int64_t kp = range_table_key(&t, XF_PREFILL, 1, OP_QKV), kd = range_table_key(&t, XF_DECODE, -1, OP_LM_HEAD);
    cr_assert(kp >= 0 && kd >= 0 && kp != kd);
    cr_assert_eq(range_table_key(&t, XF_PREFILL, 2, OP_QKV), -1); /* layer 2 of a 2-layer model */
    double a[2] = {1.0, 10.0}, b[2] = {2.0, -30.0};
    range_table_rep_begin(&t);
    range_table_add(&t, kp, 0, a);
    range_table_add(&t, kp, 0, b); /* same step: summed */
    range_table_add(&t, kd, 1, a);
    range_table_add(&t, kd, 2, a);
    range_table_add(&t, kd, 3, b); /* three distinct steps */
    cr_assert_eq(range_table_rep_end(&t, 0), XF_OK);
    const double *s;
    cr_assert_eq(range_table_samples(&t, kp, 0, &s), 1);
    cr_assert_float_eq(s[0], 3.0, 1e-12);
    cr_assert_eq(range_table_samples(&t, kp, 1, &s), 1);
    cr_assert_eq(s[0], 0.0); /* 10 - 30 clamps to 0 */
    cr_assert_eq(range_table_samples(&t, kd, 0, &s), 1);
    cr_assert_float_eq(s[0], 4.0 / 3.0, 1e-12);
    range_table_rep_begin(&t);
    range_table_add(&t, kd, 1, a);
    cr_assert_eq(range_table_rep_end(&t, 4), XF_OK); /* a fixed divisor */
    cr_assert_eq(range_table_samples(&t, kd, 0, &s), 2);
    cr_assert_float_eq(s[1], 0.25, 1e-12);
    cr_assert_eq(range_table_samples(&t, kp, 0, &s), 1); /* not seen in the second repetition */
    cr_assert_eq(range_table_rep_end(&t, 0), XF_EOVERFLOW);
    range_table_clear(&t);
    cr_assert_eq(range_table_samples(&t, kd, 0, &s), 0);
    range_table_free(&t);
    range_table_free(&t);
    cr_assert_eq(range_table_init(&t, 2, 0, 2), XF_EINVAL);
}
