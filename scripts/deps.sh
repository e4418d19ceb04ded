#!/usr/bin/env bash
# Installs every Debian package Kiln needs, idempotently: a machine that has
# them all gets one dpkg query and no output. The list lives in
# scripts/packages.txt so that the Makefile and this script agree.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mapfile -t want < <(grep -v '^\s*#' "$here/packages.txt" | awk 'NF{print $1}')
# One dpkg-query for the whole list (names it does not know print nothing).
declare -A ok=()
while read -r name status; do
	[ "$status" = "install ok installed" ] && ok[${name%%:*}]=1
done < <(dpkg-query -W -f='${Package} ${Status}\n' "${want[@]}" 2>/dev/null || true)
missing=()
for p in "${want[@]}"; do
	[ -n "${ok[$p]:-}" ] || missing+=("$p")
done
# Debian's nodejs ships without npm (the separate "npm" package), while
# NodeSource's nodejs bundles npm and conflicts with Debian's: ask for the
# package only when the command is absent.
if ! command -v npm >/dev/null; then
	missing+=(npm)
fi
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps: installing ${#missing[@]} package(s): ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
	echo "deps: need root to run apt-get (try: sudo make deps)" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "deps: done"
