#!/usr/bin/env bash
# kilnctl pprof against Node.js: a V8 CPU profile (node's built-in inspector)
# encoded as pprof by the pprof-format package folds to the stacks computed
# from V8's own call tree; Kiln's merge output decoded by pprof-format (an
# independent decoder) folds to what kilnctl prints.
set -euo pipefail
source "$(dirname "$0")/../peers/pprof_env.sh"
setup_node_peer
JS=$ROOT/tests/peers/node/nodeprof.js

node "$JS" cpu "$WORK/a.pb.gz" "$WORK/a.want" 1
node "$JS" cpu "$WORK/b.pb.gz" "$WORK/b.want" 2
grep -q '^0x' "$WORK/a.want" || die "no unsymbolized (pseudo) frames in the Node profile"

for x in a b; do
	"$KILNCTL" pprof folded "$WORK/$x.pb.gz" >"$WORK/$x.got"
	same_folded "node $x" "$WORK/$x.want" "$WORK/$x.got"
done

"$KILNCTL" pprof merge -o "$WORK/m.pb.gz" "$WORK/a.pb.gz" "$WORK/b.pb.gz"
for t in samples cpu; do
	node "$JS" fold "$WORK/m.pb.gz" "$t" >"$WORK/m.want"
	"$KILNCTL" pprof folded --sample-type="$t" "$WORK/a.pb.gz" "$WORK/b.pb.gz" >"$WORK/m.got"
	same_folded "merge decoded by pprof-format ($t)" "$WORK/m.want" "$WORK/m.got"
done
echo "pprof_node_peer: ok"
