#!/usr/bin/env bash
# run-fuzz.sh - one test of the meson suite 'fuzz': make the target's seed
# corpus with fuzz_seeds, run the libFuzzer target over it for a bounded
# time, and fail on any crash, sanitizer report, leak, timeout or broken
# property.
#
#   run-fuzz.sh NAME TARGET SEEDS-PROGRAM WORKDIR SOURCE-ROOT SECONDS
#
# NATSYNC_FUZZ_SECONDS overrides SECONDS (meson's timeout for the test is
# 3 x fuzz_seconds + 120 s: for a longer run raise -Dfuzz_seconds, or give
# meson test --timeout-multiplier). Extra libFuzzer options can be given in
# NATSYNC_FUZZ_ARGS (e.g. "-seed=1 -runs=100000").
#
# Under WORKDIR: seeds/NAME (rebuilt every run), corpus/NAME (what the
# fuzzer found interesting; kept between runs so coverage accumulates, never
# committed), artifacts/NAME-crash-* (the input of a failure: reproduce with
# `TARGET FILE`), NAME.log (the whole libFuzzer output).
set -euo pipefail

if [ $# -ne 6 ]; then
	echo "usage: $0 NAME TARGET SEEDS-PROGRAM WORKDIR SOURCE-ROOT SECONDS" >&2
	exit 2
fi
name=$1 target=$(realpath "$2") seeds_prog=$3 work=$4 src=$5
secs=${NATSYNC_FUZZ_SECONDS:-$6}
seeds=$work/seeds/$name
corpus=$work/corpus/$name
artifacts=$work/artifacts
log=$work/$name.log

say() { echo "run-fuzz: $*" >&2; }

rm -rf "$seeds"
mkdir -p "$seeds" "$corpus" "$artifacts"
configs=()
if [ "$name" = config ]; then
	shopt -s nullglob
	configs=("$src"/deploy/*.ini)
	shopt -u nullglob
fi
"$seeds_prog" "$name" "$seeds" "${configs[@]}" >&2

# Any sanitizer report is fatal and shows its stack; the caller's own
# options come last and win.
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=0:print_stacktrace=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

# shellcheck disable=SC2206 # NATSYNC_FUZZ_ARGS is a list of options
extra=(${NATSYNC_FUZZ_ARGS:-})
args=(-max_total_time="$secs" -timeout=10 -rss_limit_mb=2048
	-print_final_stats=1 -artifact_prefix="$artifacts/$name-"
	"${extra[@]}" "$corpus" "$seeds")
say "$target ${args[*]}"
rc=0
"$target" "${args[@]}" >"$log" 2>&1 || rc=$?

# The summary: the last status line and libFuzzer's final statistics.
grep -E '^#[0-9]+' "$log" | tail -n 1 >&2 || true
grep -E '^stat::' "$log" >&2 || true
if [ "$rc" -ne 0 ] ||
	grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|property broken' "$log"; then
	say "FAILED (exit status $rc); the end of $log:"
	tail -n 80 "$log" >&2
	find "$artifacts" -name "$name-*" -newer "$seeds" |
		sed "s|^|run-fuzz: reproduce with $target |" >&2 || true
	exit 1
fi
say "$name: no crash, no sanitizer report in ${secs}s"
