#!/usr/bin/env bash
# Time a fresh standby's cold load of the log layout, --runs times:
# natsync-bench --layout log --mode coldload --sessions N --flush (the
# store filled through the writers, never compacted, then a new standby
# timed from its creation until synced), on one plain Redis on loopback or,
# with --masters M, a cluster of M masters. With --base BIN, BIN (the
# natsync-bench of another build, e.g. an older commit's) runs too, the two
# taking turns run by run so that the shared machine's noise hits both.
# Prints each run and, per build, the sorted times and how many were at
# or under --limit seconds:
#   RUN build=new run=1 seconds=0.431 loaded=1000000 load_values=3907 ...
#   RESULT coldload build=new runs=10 min=0.401 median=0.433 max=0.498
#          under_limit=10 limit=0.5 times=0.401,...
#
#   PORT=7830 scripts/bench-coldload.sh [--runs 10] [--sessions 1000000]
#                                       [--masters 0] [--limit 0.5]
#                                       [--base BIN]
# BUILD=dir uses (and builds) that meson build directory.
set -euo pipefail
# shellcheck source=../deploy/lib.sh
. "$(dirname "$0")/../deploy/lib.sh"
cd "$NS_TOP"

port=${PORT:-7830}
build=${BUILD:-build-bench-coldload}
runs=10 sessions=1000000 masters=0 limit=0.5 base=""
ns_options bench-coldload.sh --runs=runs --sessions=sessions \
	--masters=masters --limit=limit --base=base -- "$@"

ns_build_program bench-coldload.sh "$build" bench/natsync-bench
new=$program
[ -z "$base" ] || [ -x "$base" ] || {
	echo "bench-coldload.sh: --base $base is not a program" >&2
	exit 2
}

trap ns_store_stop EXIT
if [ "$masters" = 0 ]; then
	ns_store_start "one plain Redis on 127.0.0.1:$port" \
		--plain --port "$port" --dir "$NS_TOP/deploy/run/bench-$port"
else
	ns_store_start "a cluster of $masters masters on 127.0.0.1:$port" \
		--masters "$masters" --port "$port" \
		--dir "$NS_TOP/deploy/run/bench-$port"
fi

field() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

declare -A times
builds=(new)
[ -z "$base" ] || builds=(base new)
for ((i = 1; i <= runs; i++)); do
	for b in "${builds[@]}"; do
		bin=$new
		[ "$b" = new ] || bin=$base
		ns_say "run $i/$runs ($b): natsync-bench --layout log --mode coldload --sessions $sessions --flush"
		line=$("$bin" --store "127.0.0.1:$port" --layout log \
			--mode coldload --sessions "$sessions" --flush |
			grep '^RESULT ')
		s=$(field "$line" seconds)
		# An older natsync-bench prints no load_values nor load_bytes.
		values=$(field "$line" load_values)
		bytes=$(field "$line" load_bytes)
		echo "RUN build=$b run=$i seconds=$s loaded=$(field "$line" loaded)" \
			"load_values=${values:-n/a} load_bytes=${bytes:-n/a}" \
			"create_seconds=$(field "$line" create_seconds)" \
			"fill_seconds=$(field "$line" fill_seconds)"
		times[$b]="${times[$b]:-} $s"
	done
done

for b in "${builds[@]}"; do
	# shellcheck disable=SC2086
	printf '%s\n' ${times[$b]} | sort -n | awk -v b="$b" -v limit="$limit" '
		{ t[NR] = $1; if ($1 <= limit) under++ }
		END {
			med = NR % 2 ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2
			list = t[1]
			for (i = 2; i <= NR; i++) list = list "," t[i]
			printf "RESULT coldload build=%s runs=%d min=%s median=%.3f max=%s under_limit=%d limit=%s times=%s\n",
				b, NR, t[1], med, t[NR], under, limit, list
		}'
done
