#!/usr/bin/env bash
# kilnctl push and `kilnctl query --output=flame`, as a user at a terminal
# would use them: Go runtime/pprof CPU profiles pushed with labels, queried
# back as an icicle graph whose boxes are as wide as `go tool pprof` says
# their functions' shares are; a query matching nothing exits 1 and says
# so; a file that is not a profile is refused before anything is sent.
source "$(dirname "$0")/server_lib.bash"
server_setup
server_start

P=$T/prof
"$KILNCTL" push --address="$ADDR" --labels=job=push,node=n1 "$P/cpu-0.pb.gz" "$P/cpu-1.pb.gz" \
	2>"$T/push.err" || { cat "$T/push.err"; die "kilnctl push"; }
grep -q 'wrote 2 profiles as process_cpu' "$T/push.err" || { cat "$T/push.err"; die "push message"; }

Q='process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta{job="push"}'
"$KILNCTL" query --address="$ADDR" "$Q" --since=24h --output=flame --width=100 --color=never \
	>"$T/flame.txt" || die "kilnctl query --output=flame"
head -3 "$T/flame.txt"
grep -q '^|total 100%' "$T/flame.txt" || { cat "$T/flame.txt"; die "no root row"; }
if grep -q $'\x1b' "$T/flame.txt"; then die "--color=never wrote escapes"; fi
# --color=auto to a file: no colour either; --color=always: colour.
"$KILNCTL" query --address="$ADDR" "$Q" --since=24h --output=flame -o "$T/auto.txt" ||
	die "flame -o"
if grep -q $'\x1b' "$T/auto.txt"; then die "--color=auto coloured a file"; fi
"$KILNCTL" query --address="$ADDR" "$Q" --since=24h --output=flame --color=always >"$T/col.txt" ||
	die "flame --color=always"
grep -q $'\x1b\\[38;5;16;48;5;' "$T/col.txt" || die "--color=always wrote no colour"

# Each function's boxes together are as wide as go tool pprof's cum share
# of it, within a column per box for rounding. Recursive functions (boxes
# of one name above one another) are counted once by pprof and are left
# out.
go tool pprof -top -cum -nodecount=200 "$P/cpu-0.pb.gz" "$P/cpu-1.pb.gz" >"$T/gotop.txt" 2>/dev/null ||
	die "go tool pprof -top"
$PY - "$T/flame.txt" "$T/gotop.txt" <<'PYEOF' || die "flame graph widths differ from go tool pprof"
import re, sys
width = 100
cum = {}
for line in open(sys.argv[2]):
    f = line.split()
    if len(f) >= 6 and re.match(r"[\d.]+%$", f[4]):
        cum[" ".join(f[5:])] = float(f[4][:-1])
# Boxes by function; a cut name ("runtime.asyn..") counts for the one
# function it is a prefix of, and boxes too narrow to name anything widen
# the tolerance instead.
boxes, unnamed = {}, 0
for row in open(sys.argv[1]).read().split("\n")[1:]:
    assert len(row) <= width, ("row wider than --width", len(row))
    for m in re.finditer(r"\|[^|]*", row):
        text = re.sub(r" \d+(\.\d+)?%$", "", m.group(0)[1:].rstrip())
        if text.endswith(".."):
            owners = [n for n in cum if n.startswith(text[:-2])]
            text = owners[0] if len(owners) == 1 else None
        if text == "total":
            continue
        if text in cum:
            boxes.setdefault(text, []).append((m.start(), m.end()))
        else:
            unnamed += m.end() - m.start()
checked = 0
for name, pct in cum.items():
    if name not in boxes or pct < 5:
        continue
    spans = boxes[name]
    if any(a < d and c < b for i, (a, b) in enumerate(spans) for (c, d) in spans[i + 1:]):
        print(f"{name}: recursive, not compared")
        continue
    got = sum(b - a for a, b in spans)
    want = pct * width / 100
    slack = len(spans) + 1 + unnamed
    print(f"{name}: {got} columns, go tool pprof {pct}% = {want:.1f} (tolerance {slack})")
    assert abs(got - want) <= slack, (name, got, want)
    checked += 1
assert checked >= 3, ("too few functions compared", checked, sorted(boxes), list(cum))
assert any(n.startswith("main.spin") for n in boxes), sorted(boxes)
PYEOF

# Narrow and shallow: every row fits, depth is cut.
"$KILNCTL" query --address="$ADDR" "$Q" --since=24h --output=flame --width=30 --max-depth=2 \
	--min-share=5 --color=never >"$T/small.txt" || die "small flame"
[ "$(wc -l <"$T/small.txt")" -le 4 ] || { cat "$T/small.txt"; die "--max-depth=2 not applied"; }
awk 'NR > 1 && length($0) > 30 { exit 1 }' "$T/small.txt" || die "--width=30 not applied"

# Nothing matches: exit 1 with a message that says what to try.
rc=0
"$KILNCTL" query --address="$ADDR" "${Q%\}*},node=\"nope\"}" --since=24h --output=flame \
	>/dev/null 2>"$T/none.err" || rc=$?
[ "$rc" = 1 ] || die "a query matching nothing exited $rc, not 1"
grep -q 'no samples match' "$T/none.err" || die "no 'no samples match' message"

# Bad input is refused before anything is sent.
rc=0
"$KILNCTL" push --address="$ADDR" /etc/hostname 2>"$T/bad.err" || rc=$?
[ "$rc" = 1 ] && grep -q 'is not a pprof profile' "$T/bad.err" || { cat "$T/bad.err"; die "non-pprof file"; }
rc=0
"$KILNCTL" push --address="$ADDR" --labels=novalue "$P/cpu-0.pb.gz" 2>/dev/null || rc=$?
[ "$rc" = 2 ] || die "a label without = exited $rc, not 2"
rc=0
"$KILNCTL" query --address="$ADDR" "$Q" --output=flame --width=0 2>/dev/null || rc=$?
[ "$rc" = 2 ] || die "--width=0 exited $rc, not 2"
# The server's own refusal is shown: a label name it does not accept.
rc=0
"$KILNCTL" push --address="$ADDR" --label='bad-name=x' "$P/cpu-0.pb.gz" 2>"$T/refused.err" || rc=$?
[ "$rc" = 1 ] && grep -q 'refused' "$T/refused.err" || { cat "$T/refused.err"; die "server refusal"; }
server_stop
echo "PASS: kilnctl push and --output=flame"
