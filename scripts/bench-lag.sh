#!/usr/bin/env bash
# Replication lag (a record made on the active until the standby applied
# it) at steady rates, beside what the machine itself takes from a running
# thread. On one plain Redis on loopback, --runs times:
#   1. natsync-hiccup --seconds 5: one thread per CPU reads the clock; the
#      steps over 50 us are time the machine did not run it (the host, an
#      interrupt), the floor under any latency measured here,
#   2. for each rate R of --rates: natsync-bench --layout log --events
#      R x --seconds --flows F --standby --rate R, the store emptied first;
#      with --priority P, --set standby.priority=P too (the default,
#      realtime: the standby's subscriber thread under SCHED_FIFO; high:
#      at nice -10; both need root); with --store-rt, the store itself
#      under SCHED_FIFO 1 for the runs (`chrt`: what an operator may do
#      for a store that shares its cores with busy threads).
# Prints each run and, per rate, the spread over the runs:
#   HICCUP run=1 cpu=0 lost_pct=1.07 over_1ms=12 over_2ms=4 max_ms=4.45
#   RUN run=1 rate=400000 achieved=399530 lag_p50_us=.. lag_p99_us=..
#       lag_p999_us=.. send_p99_us=.. deliver_p99_us=..
#   RESULT lag rate=400000 runs=3 p99_us=min/median/max=../../..
#          p50_us_median=.. under_2ms=N
#
#   PORT=7610 scripts/bench-lag.sh [--runs 3] [--rates 100000,200000,400000]
#                                  [--flows 200000] [--seconds 10]
#                                  [--priority normal|high|realtime]
#                                  [--store-rt]
# BUILD=dir uses (and builds) that meson build directory. Nothing else
# should run on the machine meanwhile: its other work shows as lag.
set -euo pipefail
# shellcheck source=../deploy/lib.sh
. "$(dirname "$0")/../deploy/lib.sh"
cd "$NS_TOP"

port=${PORT:-7610}
build=${BUILD:-build-bench-compare}
runs=3 rates=100000,200000,400000 flows=200000 seconds=10 priority=""
store_rt=""
ns_options bench-lag.sh --runs=runs --rates=rates --flows=flows \
	--seconds=seconds --priority=priority --store-rt=store_rt=1 -- "$@"
extra=()
[ -z "$priority" ] || extra=(--set "standby.priority=$priority")

ns_build_program bench-lag.sh "$build" bench/natsync-bench
bench=$program
hiccup="$NS_TOP/$build/bench/natsync-hiccup"
[ -x "$hiccup" ] || {
	echo "bench-lag.sh: $hiccup was not built" >&2
	exit 1
}

trap ns_store_stop EXIT
ns_store_start "one plain Redis on 127.0.0.1:$port" \
	--plain --port "$port" --dir "$NS_TOP/deploy/run/bench-$port"

if [ -n "$store_rt" ]; then
	store_pid=$(redis-cli -p "$port" INFO server | tr -d '\r' |
		sed -n 's/^process_id://p')
	chrt -f -p 1 "$store_pid"
	ns_say "the store (pid $store_pid) under SCHED_FIFO 1"
fi

field() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

declare -A p99s p50s
IFS=, read -r -a rate_list <<<"$rates"
for ((i = 1; i <= runs; i++)); do
	ns_say "run $i/$runs: natsync-hiccup --seconds 5"
	"$hiccup" --seconds 5 | while read -r line; do
		echo "HICCUP run=$i cpu=$(field "$line" cpu)" \
			"lost_pct=$(field "$line" lost_pct)" \
			"over_1ms=$(field "$line" over_1ms)" \
			"over_2ms=$(field "$line" over_2ms)" \
			"max_ms=$(field "$line" max_ms)"
	done
	for r in "${rate_list[@]}"; do
		redis-cli -p "$port" FLUSHALL >/dev/null
		ns_say "run $i/$runs: natsync-bench --layout log --rate $r"
		line=$("$bench" --store "127.0.0.1:$port" --layout log \
			--events $((r * seconds)) --flows "$flows" --standby \
			--rate "$r" "${extra[@]}" | grep '^RESULT ')
		echo "RUN run=$i rate=$r achieved=$(field "$line" rate)" \
			"lag_p50_us=$(field "$line" lag_p50_us)" \
			"lag_p99_us=$(field "$line" lag_p99_us)" \
			"lag_p999_us=$(field "$line" lag_p999_us)" \
			"send_p99_us=$(field "$line" send_p99_us)" \
			"deliver_p99_us=$(field "$line" deliver_p99_us)" \
			"standby_match=$(field "$line" standby_match)" \
			"subscriber_rtprio=$(field "$line" subscriber_rtprio)" \
			"subscriber_nice=$(field "$line" subscriber_nice)" \
			"subscriber_lowered=$(field "$line" subscriber_lowered)"
		p99s[$r]="${p99s[$r]:-} $(field "$line" lag_p99_us)"
		p50s[$r]="${p50s[$r]:-} $(field "$line" lag_p50_us)"
	done
done

for r in "${rate_list[@]}"; do
	# shellcheck disable=SC2086
	sorted=$(printf '%s\n' ${p99s[$r]} | sort -n)
	# shellcheck disable=SC2086
	echo "RESULT lag rate=$r runs=$runs" \
		"p99_us=$(printf '%s\n' "$sorted" | head -1)/$(printf '%s\n' "$sorted" | ns_median)/$(printf '%s\n' "$sorted" | tail -1)" \
		"p50_us_median=$(printf '%s\n' ${p50s[$r]} | ns_median)" \
		"under_2ms=$(printf '%s\n' "$sorted" | awk '$1 <= 2000' | wc -l)"
done
