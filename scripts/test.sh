#!/usr/bin/env bash
# The whole natsync test suite on a fresh Debian machine: installs what is
# missing, builds with -Werror, runs every meson test (unit tests, and
# integration tests that start their own redis-server processes on
# loopback, the failover test, which builds network namespaces and needs
# root, and the faults suite), then the fuzz targets for a bounded time
# (scripts/fuzz.sh), then the whole suite again under AddressSanitizer and
# UndefinedBehaviorSanitizer and the ring and worker tests under
# ThreadSanitizer (scripts/sanitize.sh). About 30 minutes on 2 cores
# (docs/testing.md).
# Extra arguments go to `meson test` (e.g. --suite unit) and skip the
# fuzzing and the sanitizer runs.
set -euo pipefail
# shellcheck source=../deploy/lib.sh
. "$(dirname "$0")/../deploy/lib.sh"
cd "$NS_TOP"

ns_install_deps
# The secondary-process tests (secondary, failover) share memory between
# DPDK processes through hugepages.
"$NS_TOP/deploy/hugepages.sh" -n 256 ||
	ns_say "no hugepages: the secondary and failover tests will fail"
ns_build build-test -Dwerror=true -Dtests=enabled --prefix=/usr --sysconfdir=/etc
fuzz_seconds=${NATSYNC_FUZZ_SECONDS:-10}
# The fuzz and AddressSanitizer trees build at the lowest CPU priority
# while the plain suite runs (its integration tests mostly wait on servers
# and timers), the ThreadSanitizer tree while the fuzz targets and the
# AddressSanitizer suite run, which do not need it (built last beside the
# plain suite, the fuzz targets waited 23 s for it); skipped when meson
# test got a selection. Each build in a session of its own, so that a
# failed suite stops the whole build.
prebuild=""
tsanbuild=""
# shellcheck disable=SC2016 # expanded by the inner bash
trap '[ -z "$prebuild" ] || kill -- "-$prebuild" 2>/dev/null || true
	[ -z "$tsanbuild" ] || kill -- "-$tsanbuild" 2>/dev/null || true' EXIT
if [ $# -eq 0 ]; then
	prebuild_log=$NS_TOP/build-test/prebuild.log
	ns_say "building the fuzz and AddressSanitizer trees in the background ($prebuild_log)"
	# shellcheck disable=SC2016 # expanded by the inner bash
	setsid nice -n 19 bash -c '"$1/scripts/fuzz.sh" --build-only \
		--seconds "$2" && "$1/scripts/sanitize.sh" --build-only --asan-only' \
		prebuild "$NS_TOP" "$fuzz_seconds" >"$prebuild_log" 2>&1 &
	prebuild=$!
fi
# Four at a time on 2 cores: the integration tests mostly wait on their
# servers and timers; tests that share the hugepages or the kernel's
# conntrack take turns within their group (tests/meson.build).
ns_say "meson test -C build-test $*"
meson test -C build-test --print-errorlogs --num-processes 4 "$@"
# The fuzz targets, for a bounded time each (NATSYNC_FUZZ_SECONDS, default
# 10), and the sanitizer runs; a failed background build shows again here.
if [ $# -eq 0 ]; then
	wait "$prebuild" || ns_say "background build failed (see $prebuild_log)"
	prebuild=
	tsan_log=$NS_TOP/build-test/tsanbuild.log
	ns_say "building the ThreadSanitizer tree in the background ($tsan_log)"
	setsid nice -n 19 "$NS_TOP/scripts/sanitize.sh" --build-only \
		--tsan-only >"$tsan_log" 2>&1 &
	tsanbuild=$!
	"$NS_TOP/scripts/fuzz.sh" --seconds "$fuzz_seconds"
	# Both sanitizer runs, as scripts/sanitize.sh without options runs them:
	# a failed AddressSanitizer run fails the script after the other.
	rc=0
	"$NS_TOP/scripts/sanitize.sh" --asan-only || rc=$?
	wait "$tsanbuild" || ns_say "background build failed (see $tsan_log)"
	tsanbuild=
	"$NS_TOP/scripts/sanitize.sh" --tsan-only || rc=$?
	exit "$rc"
fi
