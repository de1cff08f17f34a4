#!/usr/bin/env bash
# What a Prometheus scrape costs the replication: natsync-agent active
# (synthetic source, flat out) on one plain Redis server on loopback,
# alternately with [metrics] listen scraped every 100 ms (curl /metrics)
# and without metrics, the store emptied (FLUSHALL) before each run.
# Prints each run's rate and ends with
#   RESULT bench-scrape rounds=N none=R0 scraped=R1 ratio=R1/R0 scrapes=S
# (the medians of the rates; scrapes: answered scrapes over every scraped
# run; the scraper runs on the same host).
#
#   PORT=7600 HTTP=9600 scripts/bench-scrape.sh [--rounds 3]
#                 [--events 2000000] [--flows 200000] [--interval-ms 100]
# BUILD=dir uses (and builds) that meson build directory.
set -euo pipefail
# shellcheck source=../deploy/lib.sh
. "$(dirname "$0")/../deploy/lib.sh"
cd "$NS_TOP"

port=${PORT:-7600}
http=${HTTP:-9600}
build=${BUILD:-build-bench-scrape}
rounds=3 events=2000000 flows=200000 interval_ms=100
ns_options bench-scrape.sh --rounds=rounds --events=events --flows=flows \
	--interval-ms=interval_ms -- "$@"

ns_build_program bench-scrape.sh "$build" tools/natsync-agent
agent=$program
run=$NS_TOP/deploy/run/bench-scrape-$port
mkdir -p "$run"

trap ns_store_stop EXIT
ns_store_start "one plain Redis on 127.0.0.1:$port" \
	--plain --port "$port" --dir "$NS_TOP/deploy/run/bench-$port"

ns_agent_ini active "$port" "0-1 --file-prefix bench-scrape" '[source]' \
	'type = synth' "flows = $flows" "events = $events" 'rate = 0' \
	'seed = 7' >"$run/active.ini"

field() { sed -n "s/.* $2=\([0-9.]*\).*/\1/p" "$1" | tail -1; }
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

# One run: $1 = none or scraped. Appends its rate to $run/$1.rates.
one_run() {
	local mode=$1 pid scrapes=0 sleep_s
	redis-cli -p "$port" FLUSHALL >/dev/null
	if [ "$mode" = none ]; then
		"$agent" -c "$run/active.ini" >"$run/$mode.out" 2>"$run/$mode.log"
	else
		"$agent" -c "$run/active.ini" --set "metrics.listen=127.0.0.1:$http" \
			>"$run/$mode.out" 2>"$run/$mode.log" &
		pid=$!
		sleep_s=$(awk -v m="$interval_ms" 'BEGIN { printf "%.3f", m / 1000 }')
		while kill -0 "$pid" 2>/dev/null; do
			if curl -s -m 1 -o /dev/null "http://127.0.0.1:$http/metrics"; then
				scrapes=$((scrapes + 1))
			fi
			sleep "$sleep_s"
		done
		wait "$pid"
		echo "$scrapes" >>"$run/scrapes"
	fi
	grep -q 'drained=yes' "$run/$mode.out" || {
		echo "bench-scrape.sh: the $mode run did not drain; see $run/$mode.log" >&2
		exit 1
	}
	field "$run/$mode.out" rate >>"$run/$mode.rates"
	echo "RUN $mode rate=$(field "$run/$mode.out" rate) seconds=$(field "$run/$mode.out" seconds)${pid:+ scrapes=$scrapes}"
}

rm -f "$run/none.rates" "$run/scraped.rates" "$run/scrapes"
for r in $(seq "$rounds"); do
	ns_say "round $r of $rounds"
	if [ $((r % 2)) = 1 ]; then
		one_run none
		one_run scraped
	else
		one_run scraped
		one_run none
	fi
done
none=$(median <"$run/none.rates")
scraped=$(median <"$run/scraped.rates")
scrapes=$(awk '{ s += $1 } END { print s }' "$run/scrapes")
awk -v n="$none" -v s="$scraped" -v r="$rounds" -v c="$scrapes" 'BEGIN {
	printf "RESULT bench-scrape rounds=%d none=%.0f scraped=%.0f ratio=%.3f scrapes=%d\n",
		r, n, s, (n > 0 ? s / n : 0), c
}'
