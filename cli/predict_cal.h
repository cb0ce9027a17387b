/* The predictor `xfprof predict` uses (issue 17): `--device cpu` is this machine's file (`xfprof
 * machine`), with its calibration when it has one; a machine or devices file of the user's own
 * (--device-file) with a "calibration" object uses it too; a spec-sheet GPU gets the default
 * efficiencies (analyzers/predict_calibrated.h, sources in docs/verdicts.md); otherwise the
 * prediction is the roofline bound, and the record says which. */
#ifndef XF_CLI_PREDICT_CAL_H
#define XF_CLI_PREDICT_CAL_H

#include "core/calibration.h"
#include "core/record.h"

/* The device named `name` (or the file's first) and its calibration: *cal is init'ed by this
 * call (n == 0: none); free it with calib_table_free. `how` gets "calibrated", "default
 * efficiencies" or "roofline bound", `note` where it comes from. XF_EINVAL for a corrupt
 * calibration (naming the file), XF_EIO for `cpu` without a machine file. */
xf_status predict_cal_device(const char *name, const char *device_file, device_spec *dev, calib_table *cal, char *how,
                             size_t how_len, char *note, size_t note_len);

/* Applies cal to every point of a predict record (op times become the calibrated ones, the bound
 * stays in predicted_time_s) and sets rec->prediction / prediction_note. */
void predict_cal_apply(record *rec, const calib_table *cal, const char *how, const char *note);

#endif
