#!/usr/bin/env bash
# xfprof machine --calibrate and the calibrated predictor from the command line (issue 17):
# a quick calibration is written, read back and used by run and predict --device cpu (the
# predicted column moves off the roofline bound, the record says "calibrated"); a machine file
# without one still works and says "roofline bound"; a corrupt or truncated table is exit 2 naming
# it; an old version-1 table (GEMMs keyed by bytes) or version-2 table (decode projections cut into
# cache and DRAM tiers) is exit 2 saying to calibrate again. $1 = the xfprof binary.
set -u
XF=${1:?usage: cli_calibrate.sh path/to/xfprof}
. "$(dirname "$0")/lib.sh" # $tmp/$TMP (removed at exit), ok/bad/expect_rc
M="$TMP/machine.json"

# 1. A quick calibration (fp32, the quick grid) is written into the machine file.
expect_rc 0 "machine --quick --calibrate" "$XF" machine --quick --calibrate --wdtype fp32 --threads 2 -o "$M"
grep -q "efficiency = roofline time / measured time" "$TMP/out" && ok "calibration table printed" || bad "no calibration table: $(tail -c 400 "$TMP/out")"
python3 - "$M" <<'PY' && ok "machine file holds an xfprof-calibration v5 (OpenMP spin, fork costs) with gemv and norm entries, GEMMs keyed by M, N, K, gemv by the working set, element-wise ops by their threads" || bad "machine file's calibration"
import json, sys
m = json.load(open(sys.argv[1]))
c = m["calibration"]
assert c["format"] == "xfprof-calibration" and c["version"] == 5 and c["grid"] == "quick"
# the OpenMP spin it was measured under and the fork costs (version 4)
assert c["omp_spin"].startswith(("GOMP_SPINCOUNT=", "OMP_WAIT_POLICY=")) or c["omp_spin"] == "libgomp default", c["omp_spin"]
assert c["omp_spin_by"] in ("xfprof", "user", "nobody"), c["omp_spin_by"]
assert 0 < c["fork_short_s"] < 1e-2 and 0 < c["fork_long_s"] < 1e-2, (c["fork_short_s"], c["fork_long_s"])
assert c["fork_term"] is False  # the term is recorded but off (docs/verdicts.md, run 12)
fam = {e["family"] for e in c["entries"]}
assert {"gemv", "gemm", "norm", "attn_decode", "attn_prefill"} <= fam, fam
assert all(e["efficiency"] > 0 and e["wdtype"] == "fp32" for e in c["entries"])
assert all(e["z"] == 1 for e in c["entries"] if e["family"] not in ("gemm", "gemv"))
# element-wise ops' y: the threads they ran on (decode's one, prefill's two: CPU_PAR_MIN)
assert {e["y"] for e in c["entries"] if e["family"] == "norm"} == {1, 2}, {e["y"] for e in c["entries"] if e["family"] == "norm"}
# gemv: always the dram tier, z = the model's weights over the last-level cache (the quick grid: in cache, below 1)
gemv = [e for e in c["entries"] if e["family"] == "gemv"]
assert gemv and all(e["tier"] == "dram" and e["z"] > 0 for e in gemv), sorted({(e["tier"], e["z"]) for e in gemv})
# the in-cache models (z < 1): calib-512 fits from a 32 MiB LLC on; a shape no layer of which fits runs from DRAM (z > 1)
assert c["cache_bytes"] < 32 * 2**20 or any(e["z"] < 1 for e in gemv), sorted({e["z"] for e in gemv})
gemm = [e for e in c["entries"] if e["family"] == "gemm"]
nk = {(round(e["z"]), round(e["x"])) for e in gemm}
assert all(abs(e["z"] - round(e["z"])) < 1e-6 * e["z"] and abs(e["x"] - round(e["x"])) < 1e-6 * e["x"] for e in gemm), nk
assert {round(e["y"]) for e in gemm} == {32, 45, 128}, {e["y"] for e in gemm}  # prompts 32, 48 (a quarter octave: 45.25), 128
# the quick grid's GEMMs (d_model 512 and 1280): qkv, o_proj, gate_up, down of each, as (N, K)
assert nk == {(1536, 512), (512, 512), (2816, 512), (512, 1408), (1920, 1280), (1280, 1280), (6912, 1280), (1280, 3456)}, sorted(nk)
# cross-validation stays honest: no grid GEMM is one of stories110m's or tinyllama-1.1b's
judged = {(2304, 768), (768, 768), (4096, 768), (768, 2048), (2560, 2048), (2048, 2048), (11264, 2048), (2048, 5632)}
assert not nk & judged, nk & judged
assert m["devices"][0]["kind"] == "cpu"
PY

# 2. run reads it back and uses it: the record says "calibrated", ops carry calibrated times that
#    are not the bound, the table shows both.
export XFPROF_MACHINE_FILE="$M"
expect_rc 0 "run with the calibration" "$XF" run --prompt 16 --gen 4 --reps 1 --warmup 0 --threads 2 --no-concurrent -o "$TMP/r.json"
grep -q "roofline" "$TMP/out" && grep -q "^predicted = calibrated" "$TMP/out" && ok "table: predicted = calibrated, roofline column" ||
    bad "table does not say calibrated: $(grep -i predicted "$TMP/out" | head -3)"
python3 - "$TMP/r.json" <<'PY' && ok "record: prediction calibrated, calibrated_time_s off the bound" || bad "record's calibrated prediction"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["prediction"] == "calibrated", r.get("prediction")
ops = r["points"][0]["ops"]
cal = [o for o in ops if "calibrated_time_s" in o]
assert len(cal) >= len(ops) - 2, (len(cal), len(ops))   # kv_alloc ops have no family
moved = [o for o in cal if abs(o["calibrated_time_s"] / o["predicted_time_s"] - 1) > 0.01]
assert len(moved) > len(cal) // 2, len(moved)
s = r["points"][0]["summary"]
assert s["predicted_ttft_s"] > 0 and s["predicted_tpot_s"] > 0
PY
expect_rc 0 "show re-renders the calibrated record" "$XF" show "$TMP/r.json"
grep -q "^predicted = calibrated" "$TMP/out" && ok "show says calibrated" || bad "show: $(grep -i predicted "$TMP/out" | head -2)"

# 3. predict --device cpu uses the same table: times differ from the bound beside them.
expect_rc 0 "predict --device cpu" "$XF" predict --device cpu --wdtype fp32 --prompt 16 --gen 4 --format json
python3 - "$TMP/out" <<'PY' && ok "predict: calibrated times, bound kept" || bad "predict --device cpu's prediction"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["prediction"] == "calibrated"
ops = [o for o in r["points"][0]["ops"] if "calibrated_time_s" in o]
assert ops and all(o["time_s"] == o["calibrated_time_s"] for o in ops)
assert any(abs(o["time_s"] / o["predicted_time_s"] - 1) > 0.01 for o in ops)
PY

# 4. Without a calibration: still works, says "roofline bound", predicted = the bound.
python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); del m["calibration"]; json.dump(m, open(sys.argv[2], "w"))' "$M" "$TMP/plain.json"
XFPROF_MACHINE_FILE="$TMP/plain.json" expect_rc 0 "run without a calibration" "$XF" run --prompt 16 --gen 4 --reps 1 --warmup 0 --threads 2 --no-concurrent -o "$TMP/p.json"
grep -q "^predicted = roofline bound" "$TMP/out" && ok "table says roofline bound" || bad "no 'roofline bound': $(grep -i predicted "$TMP/out" | head -2)"
python3 - "$TMP/p.json" <<'PY' && ok "record: roofline bound, no calibrated times" || bad "record without calibration"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["prediction"] == "roofline bound"
assert not any("calibrated_time_s" in o for o in r["points"][0]["ops"])
PY
XFPROF_MACHINE_FILE="$TMP/plain.json" expect_rc 0 "predict --device cpu without a calibration" "$XF" predict --device cpu --prompt 16 --gen 4
grep -q "roofline bound" "$TMP/out" && ok "predict says roofline bound" || bad "predict: $(grep -i predicted "$TMP/out" | head -2)"

# 5. A corrupt or truncated table: exit 2 naming the file and the field, nothing written.
python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); m["calibration"]["entries"][0]["efficiency"]=-1; json.dump(m, open(sys.argv[2], "w"))' "$M" "$TMP/neg.json"
python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); del m["calibration"]["entries"][1]["x"]; json.dump(m, open(sys.argv[2], "w"))' "$M" "$TMP/nox.json"
python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); m["calibration"]["version"]=9; json.dump(m, open(sys.argv[2], "w"))' "$M" "$TMP/v9.json"
python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); m["calibration"]["version"]=1; [e.pop("z") for e in m["calibration"]["entries"]]; json.dump(m, open(sys.argv[2], "w"))' "$M" "$TMP/v1.json"
python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); m["calibration"]["version"]=2; json.dump(m, open(sys.argv[2], "w"))' "$M" "$TMP/v2.json"
head -c "$(( $(wc -c <"$M") - 200 ))" "$M" >"$TMP/trunc.json"
for f in neg nox v9 v2 v1; do
    rm -f "$TMP/bad.json"
    XFPROF_MACHINE_FILE="$TMP/$f.json" expect_rc 2 "run with a corrupt calibration ($f)" "$XF" run --prompt 8 --gen 2 --reps 1 --warmup 0 --no-concurrent -o "$TMP/bad.json"
    grep -q "$f.json: calibration" "$TMP/err" && ok "message names the file's calibration ($f)" || bad "message ($f): $(head -c 300 "$TMP/err")"
    [ ! -e "$TMP/bad.json" ] && ok "no record written ($f)" || bad "a record was written ($f)"
    XFPROF_MACHINE_FILE="$TMP/$f.json" expect_rc 2 "predict --device cpu with a corrupt calibration ($f)" "$XF" predict --device cpu
done
grep -q "version 1 is not one this build reads" "$TMP/err" && grep -q "M, N and K" "$TMP/err" && grep -q "machine --calibrate" "$TMP/err" &&
    ok "an old (v1) table: refused, saying to calibrate again" || bad "v1 message: $(head -c 300 "$TMP/err")"
XFPROF_MACHINE_FILE="$TMP/v2.json" expect_rc 2 "run with a version-2 table" "$XF" run --prompt 8 --gen 2 --reps 1 --warmup 0 --no-concurrent
grep -q "version 2 is not one this build reads" "$TMP/err" && grep -q "working set" "$TMP/err" && grep -q "machine --calibrate" "$TMP/err" &&
    ok "an old (v2) table: refused, saying to calibrate again" || bad "v2 message: $(head -c 300 "$TMP/err")"
grep -q "entries\[1\]" <(XFPROF_MACHINE_FILE="$TMP/nox.json" "$XF" predict --device cpu 2>&1) && ok "names the entry" || bad "entry not named"
XFPROF_MACHINE_FILE="$TMP/trunc.json" expect_rc 2 "predict --device cpu with a truncated machine file" "$XF" predict --device cpu
grep -q "trunc.json" "$TMP/err" && grep -qi "truncated" "$TMP/err" && ok "truncation named" || bad "truncation: $(head -c 300 "$TMP/err")"

# 7. The OpenMP spin: run and predict --device cpu say (stderr, the record's env
#    calibration_omp_spin, run's notes) when theirs is not the calibration's, and what to do; the
#    same spin: no warning; a version-3 table (no spin recorded) loads and says it lacks it.
python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); c=m["calibration"]; c["omp_spin"]="GOMP_SPINCOUNT=3000"; c["omp_spin_by"]="xfprof"; json.dump(m, open(sys.argv[2], "w"))' "$M" "$TMP/s3000.json"
python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); c=m["calibration"]; c["version"]=3; [c.pop(k) for k in ("omp_spin","omp_spin_by","fork_short_s","fork_long_s","fork_term")]; json.dump(m, open(sys.argv[2], "w"))' "$M" "$TMP/v3.json"
spin_env() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["env"].get("calibration_omp_spin", "(none)"))' "$1"; }
for cmd in predict run; do
    if [ $cmd = predict ]; then args=(predict --device cpu --wdtype fp32 --prompt 16 --gen 4 --format json); rec="$TMP/out"
    else args=(run --prompt 8 --gen 2 --reps 1 --warmup 0 --threads 2 --no-concurrent -o "$TMP/s.json"); rec="$TMP/s.json"; fi
    XFPROF_MACHINE_FILE="$TMP/s3000.json" GOMP_SPINCOUNT=200 expect_rc 0 "$cmd under another spin" "$XF" "${args[@]}"
    grep -q "warning: calibrated under GOMP_SPINCOUNT=3000 (by xfprof), this run under GOMP_SPINCOUNT=200 (by user)" "$TMP/err" &&
        grep -q "set GOMP_SPINCOUNT=3000" "$TMP/err" && ok "$cmd: another spin is said, with what to do" || bad "$cmd: no spin warning: $(grep -i spin "$TMP/err" | head -2)"
    spin_env "$rec" | grep -q "^calibrated under GOMP_SPINCOUNT=3000" && ok "$cmd: the record says it (env calibration_omp_spin)" || bad "$cmd: record env: $(spin_env "$rec")"
    [ $cmd = run ] && { grep -q "^calibration's OpenMP spin: calibrated under" "$TMP/out" && ok "run: the notes say it" || bad "run notes: $(grep -i spin "$TMP/out" | head -2)"; }
    XFPROF_MACHINE_FILE="$TMP/s3000.json" GOMP_SPINCOUNT=3000 expect_rc 0 "$cmd under the calibration's spin" "$XF" "${args[@]}"
    ! grep -qi "spin" "$TMP/err" && ok "$cmd: the same spin: no warning" || bad "$cmd: warned under the same spin: $(grep -i spin "$TMP/err" | head -2)"
    spin_env "$rec" | grep -q "^same as the calibration's: GOMP_SPINCOUNT=3000" && ok "$cmd: the record says the same" || bad "$cmd: record env: $(spin_env "$rec")"
    XFPROF_MACHINE_FILE="$TMP/v3.json" GOMP_SPINCOUNT=3000 expect_rc 0 "$cmd with a version-3 table" "$XF" "${args[@]}"
    grep -q "note: the calibration (an older table) does not say its OpenMP spin" "$TMP/err" && ok "$cmd: a version-3 table loads and says it lacks the spin" ||
        bad "$cmd: v3: $(head -c 300 "$TMP/err")"
done

# 8. predict --device cpu divides by the peaks run does: bf16 and int8 projections of 4+ tokens run
#    on AMX tiles where granted, and run judges them against those units' peaks (tensor16, int8);
#    predict of the same workload gives every op the run's calibrated time (it used the cost model's
#    fp32 peak for them until 2026-12-02: bf16 prefill 5.8x the run's prediction on stories110m).
#    The quick fp32 table's entries relabelled bf16 and int8 stand in for a table of those dtypes.
python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); c=m["calibration"]; c["entries"]=[dict(e, wdtype=d) for d in ("bf16","int8") for e in c["entries"]]; json.dump(m, open(sys.argv[2], "w"))' "$M" "$TMP/b16.json"
for wd in bf16 int8; do
    XFPROF_MACHINE_FILE="$TMP/b16.json" expect_rc 0 "run $wd with a $wd table" "$XF" run --wdtype $wd --prompt 16 --gen 3 --reps 1 --warmup 0 --threads 2 --no-concurrent -o "$TMP/u-$wd.json"
    expect_rc 0 "predict $wd with the same table" "$XF" predict --wdtype $wd --adtype fp32 --kvdtype fp32 --prompt 16 --gen 3 --device cpu --device-file "$TMP/b16.json" --format json
    python3 - "$TMP/u-$wd.json" "$TMP/out" <<'PY' && ok "predict $wd: every op's calibrated time and compute unit are run's" || bad "predict $wd differs from run's prediction"
import json, sys
run, pred = (json.load(open(f))["points"][0] for f in sys.argv[1:])
rk = {(o["phase"], o["layer"], o["op"]): o for o in run["ops"]}
n = 0
for o in pred["ops"]:
    r = rk.get((o["phase"], o["layer"], o["op"]))
    if not r or "calibrated_time_s" not in r: continue
    n += 1
    assert o["compute"] == r["compute"], (o["op"], o["phase"], o["compute"], r["compute"])
    assert abs(o["calibrated_time_s"] / r["calibrated_time_s"] - 1) < 1e-9, (o["op"], o["phase"], o["calibrated_time_s"], r["calibrated_time_s"])
assert n > 20, n
assert abs(pred["summary"]["predicted_ttft_s"] / run["summary"]["predicted_ttft_s"] - 1) < 1e-9
PY
done

# 6. Refusals of the flag itself.
expect_rc 2 "--calibrate with --no-save" "$XF" machine --calibrate --no-save
expect_rc 2 "--calibrate with --device cuda" "$XF" machine --calibrate --device cuda
expect_rc 2 "--wdtype fp16" "$XF" machine --calibrate --wdtype fp16
exit $fail
