#!/usr/bin/env bash
# The hostile-input fuzz targets (tests/fuzz: batch decoder and iterator,
# record decoder and JSON form, store key parser and slots, configuration
# file, --set and password file) on a fresh Debian machine: installs what
# is missing, configures build-fuzz with clang, libFuzzer,
# AddressSanitizer and UndefinedBehaviorSanitizer, and runs the meson test
# suite 'fuzz': each target for SECONDS over a seed corpus made with the
# real encoders. Any crash, sanitizer report, leak or broken property
# fails the run and leaves the input in build-fuzz/tests/fuzz/artifacts/.
#
#   scripts/fuzz.sh [--seconds N] [--build-only] [MESON-TEST-ARGS...]
#
#   --seconds N   per target (default 30; 4 targets, one a core at a time)
#   --build-only  configure and build the targets, run nothing
#
# Reproduce a failure: build-fuzz/tests/fuzz/fuzz_NAME ARTIFACT-FILE.
# The corpora the fuzzers grow stay in build-fuzz/tests/fuzz/corpus/ (not
# in git) and make later runs start further.
set -euo pipefail
# shellcheck source=../deploy/lib.sh
. "$(dirname "$0")/../deploy/lib.sh"
cd "$NS_TOP"

seconds=30
build_only=0
while [ $# -gt 0 ]; do
	case $1 in
	--build-only)
		build_only=1
		shift
		;;
	--seconds)
		[ $# -ge 2 ] || {
			echo "--seconds needs a value" >&2
			exit 2
		}
		seconds=$2
		shift 2
		;;
	-h | --help)
		ns_usage
		exit 0
		;;
	*) break ;;
	esac
done
case $seconds in
'' | *[!0-9]* | 0)
	echo "--seconds wants a positive number, not '$seconds'" >&2
	exit 2
	;;
esac

ns_install_deps
# The Criterion tests are not needed here; b_lundef=false because clang's
# sanitizer runtimes resolve some symbols only when executables link;
# debugoptimized: -O2 -g, so that a crash report names lines.
# shellcheck disable=SC2054 # address,undefined is one meson value
opts=(-Dwerror=true -Dtests=disabled -Dbuildtype=debugoptimized
	-Dfuzz=enabled -Db_sanitize=address,undefined -Db_lundef=false
	-Dfuzz_seconds="$seconds")
ns_setup_clang build-fuzz "${opts[@]}"
# Only the fuzz targets and their seed generator: the programs are not
# needed to fuzz.
targets=(tests/fuzz/fuzz_seeds)
for t in record batch key config; do
	targets+=("tests/fuzz/fuzz_$t")
done
ns_say "ninja -C build-fuzz ${targets[*]}"
ninja -C build-fuzz "${targets[@]}"
[ "$build_only" = 0 ] || exit 0

start=$(date +%s)
rc=0
ns_say "meson test -C build-fuzz --suite fuzz $* (${seconds}s per target)"
NATSYNC_FUZZ_SECONDS=$seconds meson test -C build-fuzz --no-rebuild \
	--suite fuzz --print-errorlogs "$@" || rc=$?

ns_say "fuzz results ($(($(date +%s) - start))s in all):"
for log in build-fuzz/tests/fuzz/*.log; do
	[ -f "$log" ] || continue
	name=$(basename "$log" .log)
	last=$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
	cov=$(echo "$last" | grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [^ ]+' || true)
	printf '  %-7s runs=%s exec/s=%s %s\n' "$name" "${runs:-?}" \
		"${rate:-?}" "${cov:-}" >&2
done
exit "$rc"
