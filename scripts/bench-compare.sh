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
# Prints each rate and ends with
#   RATIO natsync/redis-benchmark=X natsync-log/redis-benchmark=Y natsync/naive=Z
#
#   PORT=7600 scripts/bench-compare.sh [--naive-events 50000]
#                                     [--events 2000000] [--flows 200000]
# BUILD=dir uses (and builds) that meson build directory.
set -euo pipefail
# shellcheck source=../deploy/lib.sh
. "$(dirname "$0")/../deploy/lib.sh"
cd "$NS_TOP"

port=${PORT:-7600}
build=${BUILD:-build-bench-compare}
naive_events=50000 events=2000000 flows=200000
# The wire size of a v1 IPv4 record (schema/FORMAT.md): natsync's value.
value_size=48
ns_options bench-compare.sh --naive-events=naive_events --events=events \
	--flows=flows -- "$@"

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

naive_rate=$(field "$naive_line" rate)
natsync_rate=$(field "$natsync_line" rate)
log_rate=$(field "$log_line" rate)
natsync_value=$(field "$natsync_line" value_bytes)
[ "$natsync_value" = "$value_size" ] ||
	echo "bench-compare.sh: natsync's values are $natsync_value bytes, redis-benchmark's $value_size" >&2

echo "$naive_line"
echo "$natsync_line"
echo "$log_line"
echo "RATE redis-benchmark=$rb_rate value_bytes=$value_size (SET, -P 64 -c 4)"
echo "RATE naive=$naive_rate value_bytes=$(field "$naive_line" value_bytes) (JSON SET + PUBLISH, one connection)"
echo "RATE natsync=$natsync_rate value_bytes=$natsync_value (standby attached, standby_match=$(field "$natsync_line" standby_match))"
echo "RATE natsync-log=$log_rate value_bytes=$(field "$log_line" value_bytes) (log layout, standby attached, standby_match=$(field "$log_line" standby_match))"
awk -v n="$natsync_rate" -v l="$log_rate" -v r="$rb_rate" -v v="$naive_rate" 'BEGIN {
	printf "RATIO natsync/redis-benchmark=%.2f natsync-log/redis-benchmark=%.2f natsync/naive=%.2f\n",
		(r > 0 ? n / r : 0), (r > 0 ? l / r : 0), (v > 0 ? n / v : 0)
}'
