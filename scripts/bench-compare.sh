#!/usr/bin/env bash
# Compare natsync's replication rate with Redis's own ceiling and with the
# classic way, back to back on one plain Redis server on loopback, the
# store emptied (FLUSHALL) before each:
#   1. redis-benchmark -t set -P 64 -c 4: pipelined SETs of 48-byte values,
#      natsync's value size (a v1 IPv4 record),
#   2. natsync-bench --mode naive: one synchronous SET of a JSON value and
#      one PUBLISH per event, on one connection,
#   3. natsync-bench --layout keys --mode natsync with a standby attached
#      (48-byte values, one SET per session),
#   4. the same in the log layout (the default, [store] layout = log: one SET of the
#      whole batch per batch, schema/FORMAT.md).
# --runs N times (default 3): the machine is shared and one run of a
# second is at its mercy, so the four take turns and every run's figures
# are printed, each run's ratios on a line of their own:
#   RUN 1 RATIO natsync/redis-benchmark=X natsync-log/redis-benchmark=Y ...
#       ... cut=K/L
# then the last run's RESULT and RATE lines, and last the median of the
# runs' ratios (each ratio's own median, so not one run's):
#   RATIO natsync/redis-benchmark=X natsync-log/redis-benchmark=Y natsync/naive=Z runs=N
# cut=K/L: the subscriptions the standby lost during the keys and the log
# run (the store closing one that fell too far behind; the standby then
# resyncs the master instead of applying the stream as it came, a run
# that does not count as keeping up). The store is deploy/redis-cluster.sh's,
# whose pub/sub limit (256 MiB) a run's backlog fits.
#
#   PORT=7600 scripts/bench-compare.sh [--runs 3] [--naive-events 50000]
#                                     [--events 2000000] [--flows 200000]
# BUILD=dir uses (and builds) that meson build directory.
set -euo pipefail
# shellcheck source=../deploy/lib.sh
. "$(dirname "$0")/../deploy/lib.sh"
cd "$NS_TOP"

port=${PORT:-7600}
build=${BUILD:-build-bench-compare}
naive_events=50000 events=2000000 flows=200000 runs=3
# The wire size of a v1 IPv4 record (schema/FORMAT.md): natsync's value.
value_size=48
ns_options bench-compare.sh --runs=runs --naive-events=naive_events \
	--events=events --flows=flows -- "$@"
[[ $runs =~ ^[1-9][0-9]*$ ]] || {
	echo "bench-compare.sh: --runs needs a count of 1 or more, not '$runs'" >&2
	exit 2
}

ns_build_program bench-compare.sh "$build" bench/natsync-bench
bench=$program

trap ns_store_stop EXIT
# Absolute: redis-server resolves its log and pid files from its own dir.
ns_store_start "one plain Redis on 127.0.0.1:$port" \
	--plain --port "$port" --dir "$NS_TOP/deploy/run/bench-$port"

flushall() {
	ns_say "FLUSHALL"
	redis-cli -p "$port" FLUSHALL >/dev/null
}
field() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

# One run: the four measurements, their lines in rb_rate, naive_line,
# natsync_line and log_line.
measure() {
	local rb_out

	flushall
	ns_say "redis-benchmark -p $port -t set -P 64 -c 4 -n 1000000 -r 1000000 -d $value_size -q"
	rb_out=$(redis-benchmark -p "$port" -t set -P 64 -c 4 -n 1000000 -r 1000000 \
		-d "$value_size" -q 2>&1 | tr '\r' '\n')
	# -q prints "SET: 123456.78 requests per second, p50=... msec".
	rb_rate=$(printf '%s\n' "$rb_out" | sed -n 's/^SET: \([0-9.]*\) requests per second.*/\1/p' | tail -1)
	[ -n "$rb_rate" ] || {
		echo "bench-compare.sh: cannot read redis-benchmark's SET rate from:" >&2
		printf '%s\n' "$rb_out" >&2
		exit 1
	}

	flushall
	ns_say "natsync-bench --mode naive --events $naive_events --flows $flows"
	naive_line=$("$bench" --store "127.0.0.1:$port" --mode naive \
		--events "$naive_events" --flows "$flows" | grep '^RESULT ')

	flushall
	ns_say "natsync-bench --layout keys --mode natsync --events $events --flows $flows --standby"
	natsync_line=$("$bench" --store "127.0.0.1:$port" --layout keys --mode natsync \
		--events "$events" --flows "$flows" --standby | grep '^RESULT ')

	flushall
	ns_say "natsync-bench --layout log --mode natsync --events $events --flows $flows --standby"
	log_line=$("$bench" --store "127.0.0.1:$port" --layout log --mode natsync \
		--events "$events" --flows "$flows" --standby | grep '^RESULT ')
}

ratios() {
	awk -v n="$1" -v l="$2" -v r="$3" -v v="$4" 'BEGIN {
		printf "natsync/redis-benchmark=%.2f natsync-log/redis-benchmark=%.2f natsync/naive=%.2f\n",
			(r > 0 ? n / r : 0), (r > 0 ? l / r : 0), (v > 0 ? n / v : 0)
	}'
}

all=()
for run in $(seq 1 "$runs"); do
	measure
	naive_rate=$(field "$naive_line" rate)
	natsync_rate=$(field "$natsync_line" rate)
	log_rate=$(field "$log_line" rate)
	line=$(ratios "$natsync_rate" "$log_rate" "$rb_rate" "$naive_rate")
	echo "RUN $run RATIO $line redis-benchmark=$rb_rate natsync=$natsync_rate natsync-log=$log_rate naive=$naive_rate" \
		"cut=$(field "$natsync_line" standby_resubscribes)/$(field "$log_line" standby_resubscribes)"
	all+=("$line")
done

natsync_value=$(field "$natsync_line" value_bytes)
[ "$natsync_value" = "$value_size" ] ||
	echo "bench-compare.sh: natsync's values are $natsync_value bytes, redis-benchmark's $value_size" >&2

echo "$naive_line"
echo "$natsync_line"
echo "$log_line"
echo "RATE redis-benchmark=$rb_rate value_bytes=$value_size (SET, -P 64 -c 4)"
echo "RATE naive=$naive_rate value_bytes=$(field "$naive_line" value_bytes) (JSON SET + PUBLISH, one connection)"
echo "RATE natsync=$natsync_rate value_bytes=$natsync_value (standby attached, standby_match=$(field "$natsync_line" standby_match), standby_resubscribes=$(field "$natsync_line" standby_resubscribes))"
echo "RATE natsync-log=$log_rate value_bytes=$(field "$log_line" value_bytes) (log layout, standby attached, standby_match=$(field "$log_line" standby_match), standby_resubscribes=$(field "$log_line" standby_resubscribes))"
# The median of one ratio over the runs (its name holds a slash: no sed).
of_all() {
	printf '%.2f' "$(printf '%s\n' "${all[@]}" | tr ' ' '\n' |
		awk -F= -v k="$1" '$1 == k { print $2 }' | ns_median)"
}
echo "RATIO natsync/redis-benchmark=$(of_all natsync/redis-benchmark)" \
	"natsync-log/redis-benchmark=$(of_all natsync-log/redis-benchmark)" \
	"natsync/naive=$(of_all natsync/naive) runs=$runs"
