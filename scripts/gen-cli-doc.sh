#!/usr/bin/env bash
# Writes docs/cli.md from the binary's own help, so the reference and --help cannot disagree
# (tests/cli_doc.sh fails when docs/cli.md is stale). Usage: scripts/gen-cli-doc.sh build/xfprof [OUT]
set -euo pipefail
xf=${1:?usage: gen-cli-doc.sh path/to/xfprof [out.md]}
out=${2:-$(dirname "$0")/../docs/cli.md}
{
  echo "# xfprof command reference"
  echo
  echo "Generated from \`xfprof help\` and each \`xfprof <command> --help\` by scripts/gen-cli-doc.sh;"
  echo "tests/cli_doc.sh fails when this page and the binary disagree."
  echo
  echo '```'
  "$xf" help
  echo '```'
  for cmd in $("$xf" help | awk '/^Commands:/{on=1; next} on && /^  [a-z]/{print $1} on && /^$/{exit}'); do
    echo
    echo "## xfprof $cmd"
    echo
    echo '```'
    "$xf" "$cmd" --help
    echo '```'
  done
} >"$out.tmp"
mv "$out.tmp" "$out"
