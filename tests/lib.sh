# The shell tests' common preamble (tests/cli_*.sh). Source it after `set -u` and the script's
# XF=... line:
#   . "$(dirname "$0")/lib.sh"
# It makes a private temporary folder, $tmp (also $TMP), removed when the script exits (a script
# that sets an EXIT trap of its own later replaces this one and removes it itself), and the
# helpers of the two styles the tests are written in:
#   fails, fail MESSAGE          prints "FAIL: MESSAGE" and counts it in $fails;
#   expect STATUS PART -- ARGS   runs "$XF" ARGS (stdout to $tmp/out, stderr to $tmp/err) and
#                                fails unless it exits STATUS and stderr holds PART (if not empty);
#   fail=0, ok MESSAGE, bad MESSAGE ("FAIL MESSAGE", sets fail=1);
#   check WHAT WANT GOT          an exit status; has WHAT HAYSTACK NEEDLE: a substring (fail=1 if not);
#   expect_rc STATUS WHAT CMD... runs CMD (stdout to $tmp/out, stderr to $tmp/err): ok, or bad unless
#                                it exits STATUS.
# A script with a helper of the same name but other behaviour defines its own after this line.
tmp=$(mktemp -d)
TMP=$tmp
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

expect() {
  local want=$1 part=$2; shift 3
  "$XF" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ "$rc" -eq "$want" ] || { fail "xfprof $* exited $rc, expected $want; stderr: $(head -c 300 "$tmp/err")"; return; }
  if [ -n "$part" ] && ! grep -q -- "$part" "$tmp/err"; then fail "xfprof $*: stderr lacks '$part': $(head -c 300 "$tmp/err")"; fi
}

fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }
check() { # description, expected exit code, actual exit code
    if [ "$2" != "$3" ]; then echo "FAIL: $1: exit $3, wanted $2"; fail=1; else echo "ok: $1"; fi
}
has() { # description, haystack, needle
    case "$2" in *"$3"*) echo "ok: $1";; *) echo "FAIL: $1: no '$3' in output"; fail=1;; esac
}
expect_rc() { # expected-rc description command...
    local want=$1 what=$2
    shift 2
    "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    if [ "$rc" -eq "$want" ]; then ok "$what (exit $rc)"; else bad "$what: exit $rc, wanted $want; stderr: $(head -c 600 "$tmp/err")"; fi
}
