#!/usr/bin/env bash
# Processes moved into cgroups get labels from them: a plain cgroup gives
# cgroup=PATH; a systemd-style unit (x.slice/y.service) adds
# systemd_unit=y.service; a docker-style scope (docker-<64 hex>.scope) adds
# container_id. The cgroups are created for the test on the cgroup v2
# hierarchy (the unified one on a hybrid host).
source "$(dirname "$0")/../lib/agent_test.bash"
agent_setup
agent_build burn
cg=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)
[ -n "$cg" ] || fail "precondition: no cgroup2 hierarchy mounted"
id=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
plain="kiln-test-$$"
unit="kiln-test-$$.slice/kiln-burn-$$.service"
docker="kiln-test-$$.slice/docker-$id.scope"
for d in "$plain" "$unit" "$docker"; do mkdir -p "$cg/$d"; done
AGENT_CLEANUP+=("rmdir '$cg/$unit' '$cg/$docker' '$cg/kiln-test-$$.slice' '$cg/$plain' 2>/dev/null")

out="$AGENT_TMP/profiles"
agent_start "$out" --profiling-duration=5m --http-address=
pids=()
for d in "$plain" "$unit" "$docker"; do
	# Move the shell, then exec: the burner runs in the cgroup from its start.
	sh -c "echo \$\$ > '$cg/$d/cgroup.procs' && exec '$AGENT_TESTBIN/burn' 0.6" >/dev/null &
	pids+=($!)
done
wait "${pids[@]}"
agent_stop

check() { # pid key value
	local files
	files=$(agent_files "$out" "$1")
	[ -n "$files" ] || fail "no profile for pid $1"
	go tool pprof -raw $files 2>/dev/null | grep -q "$2:\[$3\]" ||
		fail "pid $1: no label $2=$3 in: $(go tool pprof -raw $files 2>/dev/null | grep -m1 'pid:')"
}
check "${pids[0]}" cgroup "/$plain"
check "${pids[1]}" cgroup "/$unit"
check "${pids[1]}" systemd_unit "kiln-burn-$$.service"
check "${pids[2]}" cgroup "/$docker"
check "${pids[2]}" container_id "$id"
echo PASS
