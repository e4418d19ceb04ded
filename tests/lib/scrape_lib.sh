# Shared helpers for the scrape_*.sh integration tests (sourced, not run).
# Builds the Go target (tests/peers/go/scrapetarget, std lib only) under
# build/ with a local GOCACHE, picks free ports, cleans up on exit.

root=${KILN_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
export GOCACHE="$root/build/go/cache" GOFLAGS=-mod=mod GO111MODULE=off GOTOOLCHAIN=local
work=$(mktemp -d /tmp/kiln-scrape-test.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

build_target() {
	command -v go >/dev/null || fail "go (golang-go) is not installed"
	mkdir -p "$root/build/go"
	(cd "$root/tests/peers/go/scrapetarget" && go build -o "$root/build/go/scrapetarget" .) ||
		fail "cannot build the Go scrape target"
	target_bin=$root/build/go/scrapetarget
}

# Prints N distinct free TCP ports on 127.0.0.1.
free_ports() {
	python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}

wait_port() { # port
	for _ in $(seq 100); do
		python3 -c "import socket,sys; socket.create_connection(('127.0.0.1',$1),0.2)" 2>/dev/null && return 0
		sleep 0.1
	done
	fail "nothing listens on port $1"
}

start_target() { # port mode
	"$target_bin" -listen "127.0.0.1:$1" -mode "$2" >"$work/target-$1.log" 2>&1 &
	pids+=($!)
}

# The rows of `go tool pprof -top` (header with file name and time cut off).
pprof_top() {
	go tool pprof -symbolize=none -top -nodecount=100000 -nodefraction=0 -edgefraction=0 "$@" 2>/dev/null |
		sed -n '/flat%/,$p'
}
