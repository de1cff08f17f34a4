#!/usr/bin/env bash
# Run a command in the sandbox a systemd unit file describes, without
# systemd (test support for tests/test_install.c; root):
#
#   tests/nst_unit_sandbox.sh [--no-caps] [--keep DIR]... UNIT-FILE --
#                             COMMAND [ARGS...]
#
# From the unit: ProtectSystem=strict (every mount read-only but /dev,
# /proc and /sys, in a mount namespace of its own), ProtectHome=yes and
# PrivateTmp=yes (empty tmpfs over /home, /root, /run/user, /tmp,
# /var/tmp), RuntimeDirectory= (/run/NAME), StateDirectory=
# (/var/lib/NAME) and ReadWritePaths= writable, NoNewPrivileges=yes,
# LimitMEMLOCK=, and CapabilityBoundingSet= (--no-caps: an empty one, for
# a control run). --keep DIR keeps DIR visible (read-only) where
# ProtectHome or PrivateTmp would hide it: the installed tree under test,
# in a build directory that may lie in /tmp or /root. Directories systemd
# would create are created here and left in place. Exits with COMMAND's status, 3 when the unit asks for
# something emulated differently, 99 when the sandbox is not read-only.
# shellcheck disable=SC2016 # the inner script expands in the namespace
set -euo pipefail
nocaps=0 keep=()
while [ $# -gt 0 ]; do
	case $1 in
	--no-caps) nocaps=1 ;;
	--keep) keep+=("$(cd "$2" && pwd)") && shift ;;
	*) break ;;
	esac
	shift
done
unit=${1:-}
[ "${2:-}" = -- ] || {
	echo "usage: $0 [--no-caps] [--keep DIR]... UNIT -- COMMAND..." >&2
	exit 2
}
shift 2

val() { sed -n "s/^$1=//p" "$unit" | tail -1; }
[ "$(val ProtectSystem)" = strict ] || { echo "$unit: ProtectSystem is not strict" >&2; exit 3; }
rw=()
for d in $(val RuntimeDirectory); do rw+=("/run/$d"); done
for d in $(val StateDirectory); do rw+=("/var/lib/$d"); done
for d in $(val ReadWritePaths); do
	case $d in
	-*) [ -e "${d#-}" ] && rw+=("${d#-}") ;;
	*) rw+=("$d") ;;
	esac
done
for d in "${rw[@]}"; do mkdir -p "$d"; done
hide=()
[ "$(val ProtectHome)" = yes ] && hide+=(/home /root /run/user)
[ "$(val PrivateTmp)" = yes ] && hide+=(/tmp /var/tmp)
caps=-all
if [ "$nocaps" = 0 ]; then
	for c in $(val CapabilityBoundingSet); do
		c=${c#CAP_}
		caps+=",+${c,,}"
	done
fi
nnp=()
[ "$(val NoNewPrivileges)" = yes ] && nnp=(--no-new-privs)
memlock=$(val LimitMEMLOCK)
[ "$memlock" = infinity ] && memlock=unlimited

exec unshare --mount --propagation private bash -c '
set -euo pipefail
rw=($1) hide=($2) caps=$3 memlock=$4 nnp=($5) keep=($6)
shift 6
for d in "${rw[@]}"; do mount --bind "$d" "$d"; done
while read -r _ m _; do
	case $m in
	/dev | /dev/* | /proc | /proc/* | /sys | /sys/*) continue ;;
	esac
	writable=0
	for d in "${rw[@]}"; do [ "$m" = "$d" ] && writable=1; done
	[ "$writable" = 1 ] || mount -o remount,bind,ro "$m" 2>/dev/null || true
done < <(sort -u -k2,2 /proc/self/mounts)
# What --keep names is set aside on a staging tmpfs, the hidden folders
# get their empty tmpfs, and the kept folders come back, read-only.
if [ ${#keep[@]} -gt 0 ]; then
	mount -t tmpfs -o mode=700 tmpfs /mnt
	for i in "${!keep[@]}"; do
		mkdir /mnt/k$i
		mount --bind "${keep[$i]}" /mnt/k$i
	done
fi
for d in "${hide[@]}"; do
	[ -d "$d" ] && mount -t tmpfs -o mode=1777 tmpfs "$d"
done
for i in "${!keep[@]}"; do
	[ -d "${keep[$i]}" ] && continue # not hidden
	mkdir -p "${keep[$i]}"
	mount --bind /mnt/k$i "${keep[$i]}"
	mount -o remount,bind,ro "${keep[$i]}"
done
if touch /usr/.nst-sandbox-probe 2>/dev/null; then
	rm -f /usr/.nst-sandbox-probe
	echo "nst_unit_sandbox: / is still writable" >&2
	exit 99
fi
# systemd (PID 1) can always raise it; a container without
# CAP_SYS_RESOURCE cannot, and runs with the limit it has.
[ -z "$memlock" ] || ulimit -l "$memlock" 2>/dev/null ||
	echo "nst_unit_sandbox: LimitMEMLOCK=$memlock not applied" \
		"(no CAP_SYS_RESOURCE here): memlock $(ulimit -l)" >&2
exec setpriv "${nnp[@]}" --bounding-set="$caps" --inh-caps=-all "$@"
' nst-unit-sandbox "${rw[*]}" "${hide[*]}" "$caps" "$memlock" "${nnp[*]}" \
	"${keep[*]}" "$@"
