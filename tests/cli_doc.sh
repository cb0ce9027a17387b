#!/usr/bin/env bash
# docs/cli.md must be what the binary's help says (regenerate with scripts/gen-cli-doc.sh).
set -u
XF=${1:?usage: cli_doc.sh path/to/xfprof}
src=${XF_SOURCE_DIR:-$(dirname "$0")/..}
. "$(dirname "$0")/lib.sh" # $tmp/$TMP (removed at exit) and the helpers
bash "$src/scripts/gen-cli-doc.sh" "$XF" "$tmp/cli.md" || { echo "FAIL: could not generate"; exit 1; }
if ! diff -u "$src/docs/cli.md" "$tmp/cli.md" >"$tmp/diff"; then
  echo "FAIL: docs/cli.md is stale; run: bash scripts/gen-cli-doc.sh build/xfprof"
  head -40 "$tmp/diff"
  exit 1
fi
echo "cli_doc: docs/cli.md matches the binary's help"
