#!/usr/bin/env bash
# --version on kiln, kiln-agent and kilnctl (and `kilnctl version`): one line
# "NAME VERSION", the same VERSION for all three, exit 0, nothing on stderr.
set -euo pipefail
: "${KILN_ROOT:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${KILN_BIN:=$KILN_ROOT/build/san/bin}"

fail() { echo "FAIL: $*" >&2; exit 1; }

version_of() { # name args...
	local name=$1 out err; shift
	out=$("$KILN_BIN/$name" "$@" 2>/tmp/kiln-version-err.$$) || fail "$name $* exited non-zero"
	err=$(cat /tmp/kiln-version-err.$$); rm -f /tmp/kiln-version-err.$$
	[ -z "$err" ] || fail "$name $*: stderr: $err"
	[[ "$out" =~ ^$name\ ([^ ]+)$ ]] || fail "$name $*: \"$out\" is not \"$name VERSION\""
	echo "${BASH_REMATCH[1]}"
}

v=$(version_of kiln --version)
[ "$(version_of kiln-agent --version)" = "$v" ] || fail "kiln-agent's version is not kiln's $v"
[ "$(version_of kilnctl --version)" = "$v" ] || fail "kilnctl's version is not kiln's $v"
[ "$(version_of kilnctl version)" = "$v" ] || fail "kilnctl version is not kiln's $v"
# Built from a git checkout (as CI and this suite are), the version is git describe's.
if git -C "$KILN_ROOT" rev-parse --git-dir >/dev/null 2>&1; then
	[ "$v" != unknown ] || fail "built from a git checkout but the version is \"unknown\""
	[[ "$v" == "$(git -C "$KILN_ROOT" describe --tags --always)"* ]] ||
		fail "version $v does not start with git describe's $(git -C "$KILN_ROOT" describe --tags --always)"
fi
echo "ok: version $v"
