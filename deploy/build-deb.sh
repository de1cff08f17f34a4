#!/usr/bin/env bash
# Build the Debian package natsync_VERSION_ARCH.deb from `meson install
# --destdir` with dpkg-deb: the programs, the example configuration in
# /etc/natsync (conffiles), the scripts in /usr/libexec/natsync, the
# systemd units, man pages and documentation (docs/operations.md), with
# what Debian asks of a package beside them (deploy/debian/): the
# machine-readable copyright, the changelog (whose version must be the
# project's) and the lintian overrides. The programs are stripped as
# dh_strip strips them; DEBIAN/md5sums lists every file but the conffiles.
#
#   deploy/build-deb.sh [--build DIR] [--out DIR]
#
#   --build DIR  package this build directory, configured with prefix /usr
#                and sysconfdir /etc (refused otherwise); it is brought up
#                to date with ninja first. Default: build-deb at the top of
#                the tree, configured (once) with --prefix=/usr
#                --sysconfdir=/etc -Dtests=disabled.
#   --out DIR    where the .deb goes (default: the current directory)
#
# Depends: the shared libraries of every installed ELF file as
# dpkg-shlibdeps finds them (DPDK, hiredis, inih, OpenSSL, libbpf, libmnl,
# libnetfilter-conntrack, ...), and mount for hugepages.sh. Recommends:
# keepalived (the notify scripts). Suggests: redis-server and redis-tools
# (the store runs elsewhere; redis-cli loads redis-users.acl.example).
# No unit is enabled or started: each needs its configuration first.
# Maintainer: $NATSYNC_MAINTAINER, else the changelog's latest entry's.
# Prints the package's path on stdout. Exit status: 0 built, 1 failure,
# 2 bad usage.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# The package's files are world-readable whatever the caller's umask.
umask 022
debian=$NS_TOP/deploy/debian

build="" out=.
ns_options build-deb.sh --build=build --out=out -- "$@"

# The value of meson option $2 in build directory $1.
meson_option() {
	meson introspect --buildoptions "$1" | python3 -c '
import json, sys
print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == sys.argv[1]))' "$2"
}

if [ -n "$build" ]; then
	[ -f "$build/build.ninja" ] || {
		echo "build-deb.sh: $build is not a meson build directory" >&2
		exit 2
	}
	prefix=$(meson_option "$build" prefix)
	sysconfdir=$(meson_option "$build" sysconfdir)
	if [ "$prefix" != /usr ] || { [ "$sysconfdir" != /etc ] && [ "$sysconfdir" != etc ]; }; then
		echo "build-deb.sh: $build is configured with prefix $prefix and sysconfdir $sysconfdir;" \
			"a package needs prefix /usr and sysconfdir /etc" \
			"(meson configure $build --prefix=/usr --sysconfdir=/etc)" >&2
		exit 2
	fi
	ns_say "ninja -C $build"
	ninja -C "$build" >&2
else
	build=$NS_TOP/build-deb
	ns_build "$build" --prefix=/usr --sysconfdir=/etc -Dtests=disabled >&2
fi
build=$(cd "$build" && pwd)
version=$(meson introspect --projectinfo "$build" | python3 -c \
	'import json, sys; print(json.load(sys.stdin)["version"])')
arch=$(dpkg --print-architecture)
# The changelog's latest entry names the version the package is.
logged=$(dpkg-parsechangelog -l "$debian/changelog" -S Version)
[ "$logged" = "$version" ] || {
	echo "build-deb.sh: deploy/debian/changelog's latest entry is $logged," \
		"the project is $version: add an entry for $version" >&2
	exit 1
}
maintainer=${NATSYNC_MAINTAINER:-$(dpkg-parsechangelog -l "$debian/changelog" -S Maintainer)}

mkdir -p "$out"
out=$(cd "$out" && pwd)

work=$(mktemp -d /tmp/natsync-deb.XXXXXX)
trap 'rm -rf "$work"' EXIT
root=$work/root
ns_say "meson install -C $build --destdir $root"
meson install -C "$build" --no-rebuild --destdir "$root" >&2
# Debian ships man pages and the changelog compressed (man reads either).
find "$root/usr/share/man" -type f -exec gzip -9n {} +

doc=$root/usr/share/doc/natsync
install -d "$doc" "$root/usr/share/lintian/overrides"
install -m 0644 "$debian/copyright" "$doc/copyright"
gzip -9n <"$debian/changelog" >"$doc/changelog.gz"
install -m 0644 "$debian/natsync.lintian-overrides" \
	"$root/usr/share/lintian/overrides/natsync"

# dpkg-shlibdeps reads debian/control of a source tree: a minimal one.
mkdir -p "$work/src/debian"
printf 'Source: natsync\n\nPackage: natsync\nArchitecture: any\n' \
	>"$work/src/debian/control"
elves=()
while IFS= read -r -d '' f; do
	head -c 4 "$f" | grep -q 'ELF' && elves+=("$f")
done < <(find "$root" -type f -perm -u+x -print0)
[ ${#elves[@]} -gt 0 ] || {
	echo "build-deb.sh: no program was installed" >&2
	exit 1
}
# Symbols, the compiler's .comment and the bare .note out, as dh_strip
# does for programs.
strip --remove-section=.comment --remove-section=.note "${elves[@]}"
ns_say "dpkg-shlibdeps over ${#elves[@]} programs"
shlibs=$(cd "$work/src" && dpkg-shlibdeps -O "${elves[@]}" 2>"$work/shlibdeps.err") || {
	cat "$work/shlibdeps.err" >&2
	exit 1
}
shlibs=${shlibs#shlibs:Depends=}

mkdir -p "$root/DEBIAN"
find "$root/etc" -type f | sed "s|^$root||" | sort >"$root/DEBIAN/conffiles"
# dpkg --verify's sums; dpkg keeps the conffiles' own.
(cd "$root" && find . -path ./DEBIAN -prune -o -path ./etc -prune -o \
	-type f -printf '%P\0' | sort -z | xargs -0 md5sum) >"$root/DEBIAN/md5sums"
cat >"$root/DEBIAN/control" <<CONTROL
Package: natsync
Version: $version
Architecture: $arch
Maintainer: $maintainer
Section: net
Priority: optional
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Depends: $shlibs, mount
Recommends: keepalived
Suggests: redis-server, redis-tools
Description: NAT session replication through a Redis Cluster
 natsync replicates a NAT gateway's session table (a DPDK gateway or a
 Linux kernel gateway's conntrack) through a Redis Cluster to a standby,
 so that the standby takes over every flow. natsync-agent (active and
 standby), natsync-gateway (a reference DPDK NAT44 gateway), natsync-verify
 and the benchmarks; systemd units natsync-agent@.service and
 natsync-gateway.service; keepalived notify scripts.
CONTROL
# systemd learns about the units (none is enabled: each needs its
# configuration in /etc/natsync first).
for script in postinst postrm; do
	cat >"$root/DEBIAN/$script" <<'SCRIPT'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
	systemctl --system daemon-reload >/dev/null || true
fi
SCRIPT
	chmod 0755 "$root/DEBIAN/$script"
done

deb=$out/natsync_${version}_${arch}.deb
ns_say "dpkg-deb --build $deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >&2
echo "$deb"
