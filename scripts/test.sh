#!/usr/bin/env bash
# The whole natsync test suite on a fresh Debian machine: installs what is
# missing, builds with -Werror, runs every meson test (unit tests, and
# integration tests that start their own redis-server processes on
# loopback, the failover test, which builds network namespaces and needs
# root, and the faults suite), then the fuzz targets for a bounded time
# (scripts/fuzz.sh), then the whole suite again under AddressSanitizer and
# UndefinedBehaviorSanitizer and the ring and worker tests under
# ThreadSanitizer (scripts/sanitize.sh). About 35 minutes on 2 cores.
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
ns_say "meson test -C build-test $*"
meson test -C build-test --print-errorlogs --num-processes 2 "$@"
# The fuzz targets, for a bounded time each (NATSYNC_FUZZ_SECONDS, default
# 10), in their own clang build, and the sanitizer runs, in two more;
# skipped when meson test got a selection.
if [ $# -eq 0 ]; then
	"$NS_TOP/scripts/fuzz.sh" --seconds "${NATSYNC_FUZZ_SECONDS:-10}"
	"$NS_TOP/scripts/sanitize.sh"
fi
