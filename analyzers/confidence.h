/* How sure a class is: a bootstrap over a measured point's repetitions. Each resample draws the
 * repetitions with replacement (the same draw for every op, so ops stay paired with the concurrent
 * ceiling measured around their repetition) and classes every measured op again from the medians
 * of the resampled repetitions, with the speed-of-light rule (roofline.h); the confidence of a
 * class is the share of resamples that give it. The same resamples give the confidence of the
 * roll-ups over layers and of the verdict (the class holding most of the request's time).
 * Pure functions over records; deterministic for a given seed. */
#ifndef XF_CONFIDENCE_H
#define XF_CONFIDENCE_H

#include <stdint.h>

#include "analyzers/roofline.h"
#include "core/record.h"

#define CONFIDENCE_BOOT 1000            /* resamples the runner and the reports draw */
#define CONFIDENCE_SEED 0x17c0ffee17ULL /* their seed: the same record gives the same confidences */

/* Sets every measured op's confidence (share of n_boot resamples giving op->bound) and
 * confidence_boot, and summary.verdict_confidence / verdict_boot (share of resamples whose
 * request time is mostly in the class holding most of it now, rollup_verdict's top class). A
 * repetition's utilizations are roofline_rep_utils' (against the concurrent ceilings when the
 * point has them; otherwise from the resampled median time against d). Ops with a sample count
 * other than the point's repetitions resample on their own. A point without measured ops is left
 * as it is. n_boot 1..100000 (XF_EINVAL otherwise); XF_ENOMEM. */
xf_status confidence_point(record_point *p, const device_spec *d, const roofline_thresholds *t, int n_boot, uint64_t seed);

/* The roll-ups' confidence, with the same resamples: conf[phase][kind] = share of resamples in
 * which the (phase, kind) summed over its layers (time-weighted utilizations, as rollup.h sums
 * them) gets the class rollup_class gives it now; -1 where the point has no measured instance. */
xf_status confidence_kinds(const record_point *p, const device_spec *d, const roofline_thresholds *t, int n_boot, uint64_t seed,
                           double conf[XF_PHASE_COUNT][OP_KIND_COUNT]);

#endif
