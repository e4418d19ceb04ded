#!/usr/bin/env bash
# Unit tests of the web UI's pure logic (icicle layout, visible-node culling,
# search share, diff colouring, URL state round trip, unit formatting,
# matcher autocomplete, table sorting) under Node with vitest, from the
# lockfile-pinned ui/node_modules that `make` installs.
set -uo pipefail
: "${KILN_ROOT:=$(cd "$(dirname "$0")/../.." && pwd)}"
cd "$KILN_ROOT/ui" || exit 1
if [ ! -x node_modules/.bin/vitest ]; then
	echo "FAIL: ui/node_modules missing: run make (it runs npm ci from ui/package-lock.json)" >&2
	exit 1
fi
NO_COLOR=1 FORCE_COLOR=0 timeout 300 node_modules/.bin/vitest run --reporter=verbose
