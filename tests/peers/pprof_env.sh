# pprof_env.sh — sourced by tests/integration/pprof_*.sh and bench/bench-pprof.sh.
#
# Sets ROOT, KILNCTL and WORK (a temporary directory removed on exit), and
# offers build_go_peer (the Go profile generator, built offline from the
# standard library) and setup_node_peer (pprof-format from the npm registry,
# pinned by tests/peers/node/package-lock.json, see tests/peers/node/install.sh).
ROOT=${KILN_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
KILNCTL=${KILN_BIN:-$ROOT/build/san/bin}/kilnctl
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kiln-pprof.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

die() {
	echo "FAIL: $*" >&2
	exit 1
}

# Builds build/go/pprofgen; prints its path.
build_go_peer() {
	command -v go >/dev/null || die "go not installed (run: make deps)"
	mkdir -p "$ROOT/build/go"
	(cd "$ROOT/tests/peers/go" &&
		GOFLAGS=-mod=mod GOPROXY=off GOCACHE="$ROOT/build/go/cache" \
			GOPATH="$ROOT/build/go/path" go build -o "$ROOT/build/go/pprofgen" ./pprofgen) ||
		die "cannot build the Go peer"
	echo "$ROOT/build/go/pprofgen"
}

# Installs pprof-format into build/node-peer (a no-op once `make test` has
# done it for this lock file); sets NODE_PATH.
setup_node_peer() {
	command -v node >/dev/null || die "node not installed (run: make deps)"
	"$ROOT/tests/peers/node/install.sh" || die "cannot install the Node peer"
	export NODE_PATH=$ROOT/build/node-peer/node_modules
}

# go tool pprof with a private cache/home so that tests do not share state.
gopprof() {
	HOME="$WORK" GOCACHE="$ROOT/build/go/cache" go tool pprof "$@" 2>/dev/null
}

# Compares two folded outputs ignoring order; prints a diff on mismatch.
same_folded() { # name expected actual
	if ! diff <(LC_ALL=C sort "$2") <(LC_ALL=C sort "$3") >"$WORK/diff"; then
		echo "folded mismatch: $1" >&2
		head -20 "$WORK/diff" >&2
		return 1
	fi
	[ -s "$2" ] || die "$1: empty folded output"
}
