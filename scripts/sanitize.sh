#!/usr/bin/env bash
# The natsync test suite under sanitizers, on a fresh Debian machine:
#
#   1. AddressSanitizer + UndefinedBehaviorSanitizer (and LeakSanitizer) in
#      build-asan: the whole meson suite (unit, integration, failover and
#      faults; three volume cases left to the plain suite, below) and every
#      natsync program its tests start.
#   2. ThreadSanitizer in build-tsan: the ring and worker tests (lane and
#      synth: the rings; active and standby: the writer and subscriber
#      threads; table: the table shared by the subscriber and the fast
#      path), but the standby's million-session cold loads.
# AddressSanitizer runs four tests at a time where they may run side by
# side (tests/meson.build), ThreadSanitizer two.
#
# scripts/test.sh runs both after the plain suite and the fuzz targets;
# about 16 minutes on 2 cores with both trees built (docs/testing.md).
#
#   scripts/sanitize.sh [--asan-only | --tsan-only] [MESON-TEST-ARGS...]
#   scripts/sanitize.sh --build-only [--asan-only | --tsan-only]
#
# --build-only configures and builds both trees (or the one named) and
# runs nothing (scripts/test.sh builds the AddressSanitizer tree at the
# lowest CPU priority while the plain suite runs, the ThreadSanitizer
# tree while the fuzz targets and the AddressSanitizer suite run).
#
# MESON-TEST-ARGS replace the AddressSanitizer phase's selection (default
# --suite unit --suite integration --suite failover --suite faults, but
# faults-keys and three volume cases the plain suite runs, below), e.g. `e2e` or
# `--suite unit`; the ThreadSanitizer phase always runs its five tests.
#
# Any sanitizer report is fatal: the process that hits it stops at once
# (halt_on_error=1) and its test fails. Every report is also written to
# BUILD/sanitizer-reports/report.PID, so that reports from processes whose
# exit status nobody checks (a program a test starts in the background, a
# leak found as a Criterion test process exits) still fail the run; they
# are printed at the end. Exit status 0 only if all tests passed and no
# report was written.
#
# Both builds use clang, -O2 -g (debugoptimized: stacks with lines and
# inlined frames) and the same EAL arguments as scripts/test.sh's build
# (--no-huge --no-shconf; the secondary and failover tests use hugepages,
# reserved here as test.sh does).
#
# What the sanitizers need, and why:
# - DPDK's libraries are not instrumented. Their memory (rte_malloc, rings,
#   memzones) is DPDK's own mmap'd heap, so AddressSanitizer checks natsync
#   only where it uses malloc'd or stack memory; it runs EAL unchanged,
#   with --no-huge and as a secondary process on hugepages alike.
#   LeakSanitizer runs at every process exit; with DPDK 22.11 nothing
#   needs suppressing. Should a DPDK library ever leak at exit, list it
#   (leak:librte_NAME.so, never a natsync function) in
#   tests/sanitize/lsan.supp, which is used when it exists.
# - ThreadSanitizer: the TSan build defines RTE_USE_C11_MEM_MODEL, so the
#   rte_ring code inlined into natsync synchronises with C11 atomics that
#   ThreadSanitizer understands (the x86 default uses plain loads and
#   compiler barriers, correct on x86 but invisible to it).
#   tests/sanitize/tsan.supp suppresses DPDK's own approximate ring counts,
#   nothing in natsync. Criterion cannot start under ThreadSanitizer
#   (its BoxFort arena finds no free address: Criterion issue #274), so the
#   TSan tests run with tests/sanitize/nst_tsan_boxfort.c preloaded, which
#   steers that arena into the address window ThreadSanitizer leaves free.
set -euo pipefail
# shellcheck source=../deploy/lib.sh
. "$(dirname "$0")/../deploy/lib.sh"
cd "$NS_TOP"

asan=1 tsan=1 build_only=0
while [ $# -gt 0 ]; do
	case $1 in
	--build-only) build_only=1 ;;
	--asan-only) tsan=0 ;;
	--tsan-only) asan=0 ;;
	-h | --help)
		ns_usage
		exit 0
		;;
	*) break ;;
	esac
	shift
done

supp=$NS_TOP/tests/sanitize
failed=()
symbolizer=$(command -v llvm-symbolizer || true)

# Print the reports written under $1 and count them; 0 when there are none.
# A file holding nothing but LeakSanitizer's "Unable to get registers from
# thread N." (it could not stop a thread that was exiting; it then counts
# that thread's whole stack as reachable and reports any leak after the
# line, in the same file) is printed and not counted: it finds nothing.
# Nor is an empty file: the sanitizer opens its log as it begins to write
# (LeakSanitizer as a process exits), and a process its test killed then
# (SIGKILL after a grace period) leaves the file with no line; seen once in
# a fresh-clone run whose 32 tests all passed.
show_reports() {
	local dir=$1 n=0 f
	for f in "$dir"/report.*; do
		[ -f "$f" ] || continue
		if [ ! -s "$f" ]; then
			ns_say "empty sanitizer log, not a report: $f (a process killed as its sanitizer began to write, most likely)"
			continue
		fi
		if [ -s "$f" ] && ! grep -qv '^==[0-9]*==Unable to get registers from thread [0-9]*\.$' "$f"; then
			ns_say "LeakSanitizer notice, not a report, $f: $(cat "$f")"
			continue
		fi
		n=$((n + 1))
		ns_say "sanitizer report $f:"
		sed -n '1,60p' "$f" >&2
	done
	[ "$n" -eq 0 ] || ns_say "$n sanitizer report(s) in $dir"
	[ "$n" -eq 0 ]
}

# A test that a sanitizer stops has no teardown: stop the stores the tests
# of build directory $1 left running (each in tests/run/PORT).
stop_stores() {
	local d port
	for d in "$1"/tests/run/*/; do
		[ -d "$d" ] || continue
		port=$(basename "$d")
		case $port in
		'' | *[!0-9]*) continue ;;
		esac
		deploy/redis-cluster.sh stop --port "$port" --dir "${d%/}" \
			>/dev/null 2>&1 || true
	done
}
cleanup() {
	stop_stores build-asan
	stop_stores build-tsan
}
ns_install_deps

# Longest first: meson runs the tests named on its command line in that
# order, not by priority (standby, named last, ended the phase alone).
tsan_tests=(standby active table synth lane)
build_asan() {
	ns_setup_clang build-asan -Dwerror=true -Dtests=enabled \
		-Dbuildtype=debugoptimized -Db_sanitize=address,undefined \
		-Db_lundef=false
	ns_say "ninja -C build-asan"
	ninja -C build-asan
}
build_tsan() {
	local targets=() t
	ns_setup_clang build-tsan -Dwerror=true -Dtests=enabled \
		-Dbuildtype=debugoptimized -Db_sanitize=thread -Db_lundef=false \
		-Dc_args=-DRTE_USE_C11_MEM_MODEL
	for t in "${tsan_tests[@]}"; do
		targets+=("tests/test_$t")
	done
	ns_say "ninja -C build-tsan ${targets[*]}"
	ninja -C build-tsan "${targets[@]}"
	ns_say "cc -shared -o $preload tests/sanitize/nst_tsan_boxfort.c"
	cc -O2 -Wall -Wextra -Werror -shared -fPIC -o "$preload" \
		"$supp/nst_tsan_boxfort.c" -ldl
}
preload=$NS_TOP/build-tsan/nst_tsan_boxfort.so

if [ "$build_only" = 1 ]; then
	[ "$asan" = 0 ] || build_asan
	[ "$tsan" = 0 ] || build_tsan
	exit 0
fi

trap cleanup EXIT
"$NS_TOP/deploy/hugepages.sh" -n 256 ||
	ns_say "no hugepages: the secondary and failover tests will fail"

if [ "$asan" = 1 ]; then
	build_asan
	reports=$NS_TOP/build-asan/sanitizer-reports
	rm -rf "$reports"
	mkdir -p "$reports"
	common="print_stacktrace=1:log_path=$reports/report${symbolizer:+:external_symbolizer_path=$symbolizer}"
	export ASAN_OPTIONS="halt_on_error=1:abort_on_error=0:detect_leaks=1:detect_stack_use_after_return=1:$common"
	export UBSAN_OPTIONS="halt_on_error=1:$common"
	export LSAN_OPTIONS="print_suppressions=0"
	if [ -f "$supp/lsan.supp" ]; then
		LSAN_OPTIONS+=":suppressions=$supp/lsan.supp"
	fi
	# Left out of the default selection, run by the plain suite: the
	# standby's million-session cold loads (the code of its other loads,
	# at a thousand times the records), e2e's late standby (the load under
	# batches of standby's cold_load_converges_while_batches_keep_coming,
	# in the agent programs of e2e's other runs) and e2e's log bound
	# under churn (the compactor of log_promoted_active_compacts_what_its_
	# predecessor_left, logcompact's rounds and standby's
	# log_cold_load_during_compaction_gives_the_exact_table, 23 rounds of
	# it): about 140 s of the phase's test time (docs/testing.md).
	# The tests run in both store layouts (NST_LAYOUTS_TEST) run in the
	# keys layout alone here: both in the plain suite; the log layout's
	# code runs here in faults-log and e2e's log runs.
	# The faults suite in the log layout alone (faults-log): its keys
	# twin's cases run in the plain suite, and the keys layout's writer
	# and loader run here under every failover and kernel test; it saves
	# about 70 s of the phase on 2 cores.
	export NATSYNC_TEST_LAYOUT=keys
	if [ $# -eq 0 ]; then
		mapfile -t tests < <(meson test -C build-asan --list \
			--suite unit --suite integration --suite failover \
			--suite faults 2>/dev/null |
			sed -n 's|.* / ||p' | grep -vx 'faults-keys')
		if [ "${#tests[@]}" -lt 20 ]; then
			ns_say "meson test --list named ${#tests[@]} tests in build-asan"
			exit 1
		fi
		selection=("${tests[@]}"
			"--test-args=--filter=!(standby/cold_load_of_a_million*|e2e/late_standby_converges*|e2e/log_compaction_keeps_the_store_bounded*)")
	else
		selection=("$@")
	fi
	start=$(date +%s)
	ns_say "meson test -C build-asan ${selection[*]}"
	rc=0
	meson test -C build-asan --print-errorlogs --num-processes 4 \
		--timeout-multiplier 3 "${selection[@]}" || rc=$?
	ns_say "AddressSanitizer + UndefinedBehaviorSanitizer: exit $rc in $(($(date +%s) - start))s"
	stop_stores build-asan
	[ "$rc" -eq 0 ] || failed+=("asan tests")
	show_reports "$reports" || failed+=("asan reports")
	unset ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS NATSYNC_TEST_LAYOUT
fi

if [ "$tsan" = 1 ]; then
	build_tsan
	reports=$NS_TOP/build-tsan/sanitizer-reports
	rm -rf "$reports"
	mkdir -p "$reports"
	export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp:log_path=$reports/report${symbolizer:+:external_symbolizer_path=$symbolizer}"
	start=$(date +%s)
	ns_say "meson test -C build-tsan ${tsan_tests[*]}"
	rc=0
	# The million-session cold loads are left out: the same code as the
	# standby's other loads, at a thousand times the records.
	meson test -C build-tsan --no-rebuild --print-errorlogs \
		--num-processes 2 --timeout-multiplier 4 \
		--test-args='--filter=!(standby/cold_load_of_a_million*)' \
		--wrapper "env LD_PRELOAD=$preload" "${tsan_tests[@]}" || rc=$?
	ns_say "ThreadSanitizer: exit $rc in $(($(date +%s) - start))s"
	stop_stores build-tsan
	[ "$rc" -eq 0 ] || failed+=("tsan tests")
	show_reports "$reports" || failed+=("tsan reports")
	unset TSAN_OPTIONS
fi

if [ ${#failed[@]} -gt 0 ]; then
	ns_say "FAILED: ${failed[*]}"
	exit 1
fi
ns_say "no test failed, no sanitizer report"
