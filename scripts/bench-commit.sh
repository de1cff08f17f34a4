#!/usr/bin/env bash
# What the standby's conntrack commit costs a standby that keeps up with an
# active: a plain Redis on loopback, a natsync-agent standby committing into
# a network namespace of its own, and a natsync-agent active with the
# synthetic source, run once with [standby] commit = none and once with
# commit = conntrack. Prints both standbys' REPORT lines (table lag, commit
# counters) and the namespace's conntrack count beside the standby's
# sessions, and ends with
#   RESULT bench-commit mode=none|conntrack rate=R sessions=S conntrack=C lag_avg_us=A lag_max_us=M
# per mode. Root only (namespaces); run it alone on the machine.
#
#   scripts/bench-commit.sh [--events N] [--flows N] [--rate R] [--port P]
# Defaults: --events 1000000 --flows 200000 --rate 0 (flat out) --port 7975.
set -euo pipefail
# shellcheck source=../deploy/lib.sh
. "$(dirname "$0")/../deploy/lib.sh"
cd "$NS_TOP"

events=1000000 flows=200000 rate=0 port=7975
ns_options bench-commit.sh --events=events --flows=flows --rate=rate --port=port -- "$@"

ns=natsync-bc-$$
ns_bench_setup bench-commit "$ns"

one_run() {
	local mode=$1 sessions conntrack
	echo "bench-commit: commit = $mode, $events events over $flows flows at rate $rate" >&2
	rm -rf "$run/store"
	ns_store_start "one plain Redis on 127.0.0.1:$port" --plain \
		--port "$port" --dir "$run/store"
	ns_netns_del "$ns"
	ip netns add "$ns"
	ns_agent_ini standby "$port" 0 '[standby]' \
		"table_capacity = $((flows * 2))" "commit = $mode" \
		"commit_netns = $ns" >"$run/standby.ini"
	ns_agent_ini active "$port" 0-1 '[source]' 'type = synth' \
		"flows = $flows" "events = $events" "rate = $rate" 'seed = 7' \
		'refresh_pct = 50' >"$run/active.ini"
	"$build/tools/natsync-agent" -c "$run/standby.ini" >"$run/standby.out" \
		2>"$run/standby.log" &
	pids=($!)
	for _ in $(seq 100); do
		grep -q 'standby: synced' "$run/standby.log" && break
		sleep 0.1
	done
	"$build/tools/natsync-agent" -c "$run/active.ini" >"$run/active.out" \
		2>"$run/active.log"
	sleep 2 # the standby applies and commits what is still on its way
	kill -TERM "${pids[0]}"
	wait "${pids[0]}" || true
	pids=()
	grep REPORT "$run/active.out" "$run/standby.out" | sed 's/^[^:]*://'
	sessions=$(sed -n 's/.* sessions=\([0-9]*\).*/\1/p' "$run/standby.out")
	conntrack=$(ip netns exec "$ns" conntrack -C)
	echo "RESULT bench-commit mode=$mode" \
		"rate=$(sed -n 's/.* rate=\([0-9]*\).*/\1/p' "$run/active.out")" \
		"sessions=$sessions conntrack=$conntrack" \
		"lag_avg_us=$(sed -n 's/.* lag_avg_us=\([0-9]*\).*/\1/p' "$run/standby.out")" \
		"lag_max_us=$(sed -n 's/.* lag_max_us=\([0-9]*\).*/\1/p' "$run/standby.out")"
	ns_store_stop
	ip netns del "$ns"
}

one_run none
one_run conntrack
