#!/usr/bin/env bash
# Installs the Node.js test peer (pprof-format, pinned by package-lock.json
# next to this file) into build/node-peer with `npm ci`, once per lock file:
# a second run with the same lock file does nothing and prints nothing.
# Run by `make test` (mk/pprof.mk) and by the tests that need the peer.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
dir=$root/build/node-peer
# The stamp is a copy of the lock file written after a complete install.
installed() { cmp -s "$here/package-lock.json" "$dir/.installed-lock.json"; }
installed && exit 0
command -v npm >/dev/null || {
	echo "node-peer: npm not installed (run: make deps)" >&2
	exit 1
}
mkdir -p "$root/build"
# Serialized: parallel test runs must not race on one node_modules.
exec 9>"$root/build/.node-peer.lock"
flock 9
installed && exit 0
rm -rf "$dir" && mkdir -p "$dir"
cp "$here/package.json" "$here/package-lock.json" "$dir/"
(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null) || {
	echo "node-peer: npm ci of tests/peers/node failed" >&2
	exit 1
}
cp "$here/package-lock.json" "$dir/.installed-lock.json"
