#!/usr/bin/env bash
# `make install` gives one directory that serves everything: PREFIX/bin holds
# kiln, kiln-agent and kilnctl, PREFIX/ui the built web UI, and the installed
# kiln, started from another directory without --ui-path, serves the UI (its
# index and assets, rendered by headless Chromium) next to the API.
source "$(dirname "$0")/ui_lib.bash"
ui_setup
DEST=$T/dest
PREFIX=/opt/kiln-test

env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$KILN_ROOT" install DESTDIR="$DEST" PREFIX="$PREFIX" >"$T/install.log" 2>&1 ||
	{ cat "$T/install.log" >&2; die "make install failed"; }
for b in kiln kiln-agent kilnctl; do
	[ -x "$DEST$PREFIX/bin/$b" ] || die "make install left no executable $PREFIX/bin/$b"
done
[ -f "$DEST$PREFIX/ui/index.html" ] || die "make install left no $PREFIX/ui/index.html"
"$DEST$PREFIX/bin/kilnctl" --help >/dev/null 2>&1 || die "installed kilnctl --help failed"

# The installed kiln, from / so that nothing relative to the checkout helps.
KILN_BIN=$DEST$PREFIX/bin
KILN=$KILN_BIN/kiln
cd /
ui_start_kiln

index=$(curl -sfS "$URL/") || die "GET / failed on the installed kiln"
grep -q '<title>Kiln' <<<"$index" || die "GET / is not the UI's index.html: $(head -c 300 <<<"$index")"
assets=$(grep -o '\./assets/[^"]*' <<<"$index")
[ -n "$assets" ] || die "index.html references no assets"
for a in $assets; do
	want=$(wc -c <"$DEST$PREFIX/ui/${a#./}")
	got=$(curl -sfS "$URL/${a#./}" | wc -c) || die "GET $a failed"
	[ "$got" -eq "$want" ] || die "GET $a returned $got bytes, the installed file has $want"
done
curl -sf "$URL/healthy" >/dev/null || die "/healthy failed on the installed kiln"

# The browser runs the app: the query bar is rendered by the JavaScript.
dom=$(timeout 60 /usr/bin/chromium --headless --no-sandbox --disable-gpu \
	--virtual-time-budget=5000 --dump-dom "$URL/" 2>"$T/chromium.log") ||
	{ tail -n 20 "$T/chromium.log" >&2; die "chromium could not load the installed UI"; }
grep -q 'data-testid="type-select-a"' <<<"$dom" ||
	die "the installed UI did not render its query bar: $(head -c 500 <<<"$dom")"
echo "ui_install: make install serves the UI and API from $PREFIX"
