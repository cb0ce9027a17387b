#!/usr/bin/env bash
# sweep --shard i/n and xfprof merge, without a scheduler: for every shard count 1..5 (and 10, more
# shards than points) the shards are disjoint, cover the grid, and merge into the unsharded sweep's
# record; merge is idempotent and atomic; what cannot be merged is refused with exit 2 naming why.
set -u
XF=${1:?usage: cli_merge.sh path/to/xfprof}
XF=$(cd "$(dirname "$XF")" && pwd)/$(basename "$XF")
src=${XF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
. "$(dirname "$0")/lib.sh" # $tmp/$TMP (removed at exit) and the helpers
keys() { cat "$@" | grep -o '"key":"[^"]*"' | sort; }
nocreated() { sed 's/"created":"[^"]*"//' "$1"; }
# refused FILE_PREFIX PATTERN ARGS...: merge must exit 2, say PATTERN and write nothing
refused() {
  local what=$1 pat=$2
  shift 2
  "$XF" merge "$@" -o "$tmp/no.json" --jsonl "$tmp/no.jsonl" >/dev/null 2>"$tmp/err"
  local rc=$?
  [ $rc -eq 2 ] || fail "$what: exit $rc, expected 2: $(cat "$tmp/err")"
  grep -q -- "$pat" "$tmp/err" || fail "$what: the message does not say '$pat': $(cat "$tmp/err")"
  [ ! -e "$tmp/no.json" ] && [ ! -e "$tmp/no.jsonl" ] || fail "$what: an output was written"
  ls "$tmp" | grep -q 'tmp' && fail "$what: a temporary was left: $(ls "$tmp")"
  rm -f "$tmp/no.json" "$tmp/no.jsonl"
}
cd "$tmp" || exit 1
args=(sweep --predict --model stories15m --batch 1,2,4,8 --prompt 32 --gen 0,8) # 8 points
"$XF" "${args[@]}" --jsonl full.jsonl -o full.json 2>err || fail "unsharded sweep: exit $?: $(cat err)"
# The merge of a sweep's own JSONL is that sweep's record, byte for byte.
"$XF" merge full.jsonl -o f.json 2>err || fail "merge full.jsonl: exit $?: $(cat err)"
cmp -s full.json f.json || fail "merge of the unsharded JSONL differs from the sweep's own record"

# 1. Every shard count: disjoint shards that cover the grid, merged (inputs in reverse) = unsharded.
for n in 1 2 3 4 5 10; do
  files=()
  for i in $(seq "$n"); do
    "$XF" "${args[@]}" --shard "$i/$n" --jsonl "s$n-$i.jsonl" -o "s$n-$i.json" 2>err || fail "shard $i/$n: exit $?: $(cat err)"
    files=("s$n-$i.jsonl" "${files[@]}")
    if [ -s "s$n-$i.jsonl" ] && [ "$n" -gt 1 ]; then
      grep -q "\"shard\":\"$i/$n\"" "s$n-$i.json" || fail "shard $i/$n: its record does not say which shard it is"
    fi
  done
  [ -z "$(keys "${files[@]}" | uniq -d)" ] || fail "$n shards: a point is in two shards"
  [ "$(keys "${files[@]}")" = "$(keys full.jsonl)" ] || fail "$n shards: the shards' points are not the grid's"
  "$XF" merge "${files[@]}" -o "m$n.json" --jsonl "m$n.jsonl" 2>err || fail "merge of $n shards: exit $?: $(cat err)"
  [ "$(nocreated "m$n.json")" = "$(nocreated full.json)" ] || fail "$n shards merged differ from the unsharded sweep"
done
[ "$(grep -c . s10-10.jsonl)" -eq 0 ] || fail "shard 10/10 of 8 points is not empty"

# 2. Idempotent: a merged JSONL merged again (alone, or with a shard it holds) gives the same bytes;
#    shards of different counts mix; a file may hold several shards concatenated.
"$XF" merge m3.jsonl -o again.json --jsonl again.jsonl 2>err || fail "merge of a merged JSONL: exit $?: $(cat err)"
cmp -s again.json m3.json && cmp -s again.jsonl m3.jsonl || fail "merging a merged JSONL changed its bytes"
"$XF" merge m3.jsonl s3-2.jsonl -o again2.json 2>err || fail "merged + one of its shards: exit $?: $(cat err)"
cmp -s again2.json m3.json || fail "merged + one of its shards changed the bytes"
grep -q "given twice with the same bytes" err || fail "the repeated lines were not noted: $(cat err)"
"$XF" merge s2-1.jsonl s4-2.jsonl s4-4.jsonl -o mixed.json 2>err || fail "1/2 + 2/4 + 4/4: exit $?: $(cat err)"
[ "$(nocreated mixed.json)" = "$(nocreated full.json)" ] || fail "1/2 + 2/4 + 4/4 merged differ from the unsharded sweep"
cat s3-*.jsonl >cat.jsonl
"$XF" merge cat.jsonl -o cat.json 2>err && cmp -s cat.json m3.json || fail "concatenated shards do not merge as the shards: $(cat err)"

# Several models and devices: one record per (model, device), as the unsharded sweep writes them.
margs2=(sweep --predict --model stories15m,stories110m --device h100-sxm,a100-80gb --batch 1,2 --prompt 16 --gen 4)
"$XF" "${margs2[@]}" -o mm.json >/dev/null 2>&1 || fail "multi-model sweep failed"
for i in 1 2 3; do "$XF" "${margs2[@]}" --shard "$i/3" --jsonl "mm$i.jsonl" >/dev/null 2>&1 || fail "multi-model shard $i/3 failed"; done
"$XF" merge mm3.jsonl mm1.jsonl mm2.jsonl -o mmm.json 2>err || fail "merge of multi-model shards: $(cat err)"
for m in stories15m stories110m; do
  for d in h100-sxm a100-80gb; do
    [ -f "mmm-$m-$d.json" ] && [ "$(nocreated "mmm-$m-$d.json")" = "$(nocreated "mm-$m-$d.json")" ] ||
      fail "merged multi-model shards: $m on $d differs from the unsharded sweep's record"
  done
done

# 3. Refusals, exit 2, nothing written.
refused "a missing shard" "missing: point 3, 6" s3-1.jsonl s3-2.jsonl
grep -q "shard 3/3" err || fail "the missing shard is not named: $(cat err)"
"$XF" sweep --predict --model stories15m --batch 1,2 --prompt 32 --gen 0,8 --shard 2/3 --jsonl other.jsonl >/dev/null 2>&1
refused "another grid" 'batch: \["1","2","4","8"\]' s3-1.jsonl other.jsonl s3-3.jsonl
XFPROF_TEST_SLOW_OP=gate_up:1.3 "$XF" "${args[@]}" --shard 2/3 --jsonl slow.jsonl >/dev/null 2>&1
refused "overlapping shards" "overlap" s3-1.jsonl s3-2.jsonl s3-3.jsonl slow.jsonl
sed 's/"tool_version":"[^"]*"/"tool_version":"0.0.0-other"/' s3-2.jsonl >ver.jsonl
refused "another xfprof version" "made by xfprof 0.0.0-other" s3-1.jsonl ver.jsonl s3-3.jsonl
head -c -20 s3-3.jsonl >cut.jsonl
refused "an incomplete line" "incomplete" s3-1.jsonl s3-2.jsonl cut.jsonl
sed 's/,"index":.*,"record":/,"record":/' s3-3.jsonl >old.jsonl
refused "a line without grid index" "no grid index" s3-1.jsonl s3-2.jsonl old.jsonl
sed 's/"key":"\([^"]*\)batch=8;/"key":"\1batch=9;/' s3-2.jsonl >edited.jsonl
cmp -s edited.jsonl s3-2.jsonl && fail "the key edit did not apply"
refused "an edited key" "do not make up the grid" s3-1.jsonl edited.jsonl s3-3.jsonl
echo 'not json' >junk.jsonl
refused "a file that is not a sweep JSONL" "junk.jsonl line 1" s3-1.jsonl junk.jsonl
: >empty.jsonl
refused "no points at all" "no points" empty.jsonl
refused "an input that does not exist" "cannot open" s3-1.jsonl nope.jsonl
# another model config under the same name: the shards' machines had different config.json files
mkdir -p cfg
cp "$src/tests/data/hf/qwen3/config.json" cfg/config.json
cargs=(sweep --predict --model cfg/config.json --batch 1,2 --prompt 16 --gen 4)
"$XF" "${cargs[@]}" --shard 1/2 --jsonl c1.jsonl >/dev/null 2>err || fail "config.json shard 1/2: $(cat err)"
sed -i 's/"rms_norm_eps": *[0-9.e-]*/"rms_norm_eps": 0.001/' cfg/config.json
"$XF" "${cargs[@]}" --shard 2/2 --jsonl c2.jsonl >/dev/null 2>err || fail "config.json shard 2/2: $(cat err)"
refused "another model config" "another model config" c1.jsonl c2.jsonl
# an earlier output is left intact by a refused merge
cp m3.json keep.json
"$XF" merge s3-1.jsonl -o m3.json 2>/dev/null
cmp -s m3.json keep.json || fail "a refused merge changed the earlier output"

# 4. Bad command lines: exit 2.
for bad in "0/3" "4/3" "3" "1/0" "1/10001" "a/b" "1/3/4" ""; do
  "$XF" "${args[@]}" --shard "$bad" >/dev/null 2>err
  [ $? -eq 2 ] && grep -q -- "--shard" err || fail "--shard '$bad' was not refused naming the flag: $(cat err)"
done
"$XF" merge >/dev/null 2>&1; [ $? -eq 2 ] || fail "merge without inputs was not refused"
"$XF" merge s3-1.jsonl >/dev/null 2>&1; [ $? -eq 2 ] || fail "merge without -o or --jsonl was not refused"
"$XF" sweep --predict --batch 1,1 --jsonl dup.jsonl >/dev/null 2>err
[ $? -eq 2 ] && grep -q "twice" err || fail "a grid listing a point twice was not refused: $(cat err)"

# 5. A measured sweep in shards: merged in grid order, every point measured once.
if "$XF" run --help >/dev/null 2>&1; then
  export XFPROF_MACHINE_FILE="$tmp/machine.json"
  "$XF" machine --quick --threads 1 >/dev/null 2>&1 || fail "xfprof machine --quick failed"
  margs=(sweep --model stories15m --batch 1,2 --prompt 8 --gen 2 --threads 1 -r 1 --warmup 0)
  for i in 1 2; do "$XF" "${margs[@]}" --shard "$i/2" --jsonl "ms$i.jsonl" >/dev/null 2>err || fail "measured shard $i/2: $(cat err)"; done
  "$XF" merge ms2.jsonl ms1.jsonl -o ms.json 2>err || fail "merge of measured shards: exit $?: $(cat err)"
  [ "$(grep -o '"batch":[0-9]*' ms.json | head -2 | tr '\n' ' ')" = '"batch":1 "batch":2 ' ] ||
    fail "measured shards are not merged in grid order: $(grep -o '"batch":[0-9]*' ms.json | head -2)"
  grep -q '"backend":"cpu"' ms.json || fail "the merged measured record lacks its run info"
  unset XFPROF_MACHINE_FILE
fi

if [ $fails -eq 0 ]; then echo "cli_merge: all checks passed"; else echo "cli_merge: $fails failures"; exit 1; fi
