#!/usr/bin/env bash
# Make 2 MiB hugepages usable by DPDK, as a gateway (DPDK primary process)
# with natsync-agent attached as a secondary process needs them: hugetlbfs
# mounted (an existing 2 MiB hugetlbfs mount is reused, else one is made at
# --dir) and at least N pages reserved. Idempotent: it changes only what is
# missing, and needs root only for that. It never lowers a reservation and
# never unmounts.
#
#   deploy/hugepages.sh [-n PAGES] [--dir /dev/hugepages] [--print-dir]
#
#   -n, --pages N   2 MiB pages to have reserved, at least (default 256)
#   --dir DIR       where to mount hugetlbfs when no mount exists
#                   (default /dev/hugepages)
#   --print-dir     print the hugetlbfs mount point on stdout (for
#                   EAL's --huge-dir); messages always go to stderr
#
# Exit status: 0 ready, 1 cannot (not root, the kernel refuses), 2 bad usage.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

pages=256
dir=/dev/hugepages
print_dir=0
sysfs=/sys/kernel/mm/hugepages/hugepages-2048kB

usage() { ns_usage; }

die() {
	echo "hugepages.sh: $*" >&2
	exit 1
}

while [ $# -gt 0 ]; do
	case "$1" in
	-n | --pages) pages=${2:-}; shift 2 || { usage >&2; exit 2; } ;;
	--dir) dir=${2:-}; shift 2 || { usage >&2; exit 2; } ;;
	--print-dir) print_dir=1; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "hugepages.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
	esac
done
case "$pages" in
'' | *[!0-9]*) echo "hugepages.sh: -n: '$pages' is not a number of pages" >&2; exit 2 ;;
esac
[ -n "$dir" ] || { echo "hugepages.sh: --dir: empty path" >&2; exit 2; }

is_root() { [ "$(id -u)" = 0 ]; }

[ -d "$sysfs" ] ||
	die "this kernel offers no 2 MiB hugepages ($sysfs is missing)"

# The mount point of a hugetlbfs whose pages are 2 MiB: the one at $dir
# first, else any. A mount without pagesize= uses the default size.
default_kb=$(awk '/^Hugepagesize:/ { print $2 }' /proc/meminfo)
find_mount() {
	awk -v want="$dir" -v def="$default_kb" '
		$3 == "hugetlbfs" {
			size = def
			if (match($4, /pagesize=[0-9]+[KMG]?/)) {
				v = substr($4, RSTART + 9, RLENGTH - 9)
				size = v + 0
				if (v ~ /M$/) size *= 1024
				if (v ~ /G$/) size *= 1024 * 1024
			}
			if (size != 2048) next
			if ($2 == want) { print $2; found = 1; exit }
			if (first == "") first = $2
		}
		END { if (!found && first != "") print first }' /proc/mounts
}

mnt=$(find_mount)
if [ -n "$mnt" ]; then
	ns_say "hugetlbfs (2 MiB pages) is mounted at $mnt"
else
	is_root || die "no 2 MiB hugetlbfs is mounted and mounting one at $dir needs root (run: sudo $0 -n $pages)"
	ns_say "mounting hugetlbfs (2 MiB pages) at $dir"
	mkdir -p "$dir"
	mount -t hugetlbfs -o pagesize=2M nodev "$dir" ||
		die "mount -t hugetlbfs nodev $dir failed"
	mnt=$dir
fi

have=$(cat "$sysfs/nr_hugepages")
if [ "$have" -ge "$pages" ]; then
	ns_say "$have 2 MiB pages reserved (at least $pages wanted)"
else
	is_root || die "$have 2 MiB pages reserved, $pages wanted; reserving more needs root (run: sudo $0 -n $pages)"
	ns_say "reserving $pages 2 MiB pages (had $have)"
	{ echo "$pages" >"$sysfs/nr_hugepages"; } 2>/dev/null ||
		die "the kernel refused to set $sysfs/nr_hugepages (read-only in this container?)"
	got=$(cat "$sysfs/nr_hugepages")
	if [ "$got" -lt "$pages" ]; then
		# Give back what this partial attempt took; keep what was there.
		{ echo "$have" >"$sysfs/nr_hugepages"; } 2>/dev/null || true
		die "the kernel reserved only $got of $pages 2 MiB pages (not enough contiguous free memory; free some, or reserve at boot with hugepagesz=2M hugepages=$pages on the kernel command line)"
	fi
fi
ns_say "hugepages ready: $(cat "$sysfs/nr_hugepages") reserved, $(cat "$sysfs/free_hugepages") free, mounted at $mnt"
if [ "$print_dir" = 1 ]; then
	echo "$mnt"
fi
