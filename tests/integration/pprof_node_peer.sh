#!/usr/bin/env bash
# kilnctl pprof against Node.js: a V8 CPU profile (node's built-in inspector)
# encoded as pprof by the pprof-format package folds to the stacks computed
# from V8's own call tree and to what pprof-format (an independent decoder)
# computes from the file; so do real Go runtime/pprof CPU and heap profiles;
# and Kiln's merge output decoded by pprof-format folds to what kilnctl prints.
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
	node "$JS" fold "$WORK/$x.pb.gz" >"$WORK/$x.want2"
	same_folded "node $x decoded by pprof-format" "$WORK/$x.want2" "$WORK/$x.got"
done

# Real Go profiles, every sample type, folded by pprof-format and by kilnctl.
gen=$(build_go_peer)
"$gen" cpu -o "$WORK/gocpu.pb.gz" -seconds 1
"$gen" heap -o "$WORK/goheap.pb.gz"
for ft in gocpu:samples gocpu:cpu goheap:alloc_objects goheap:alloc_space \
	goheap:inuse_objects goheap:inuse_space; do
	f=$WORK/${ft%%:*}.pb.gz t=${ft#*:}
	node "$JS" fold "$f" "$t" >"$WORK/go.want"
	"$KILNCTL" pprof folded --sample-type="$t" "$f" >"$WORK/go.got"
	same_folded "go ${ft} decoded by pprof-format" "$WORK/go.want" "$WORK/go.got"
done

"$KILNCTL" pprof merge -o "$WORK/m.pb.gz" "$WORK/a.pb.gz" "$WORK/b.pb.gz"
for t in samples cpu; do
	node "$JS" fold "$WORK/m.pb.gz" "$t" >"$WORK/m.want"
	"$KILNCTL" pprof folded --sample-type="$t" "$WORK/a.pb.gz" "$WORK/b.pb.gz" >"$WORK/m.got"
	same_folded "merge decoded by pprof-format ($t)" "$WORK/m.want" "$WORK/m.got"
done
echo "pprof_node_peer: ok"
