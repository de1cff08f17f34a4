#!/usr/bin/env bash
# natsync's main job on a fresh Debian machine: installs what is missing,
# builds, starts a local Redis Cluster, a standby and an active agent fed by
# the synthetic DPDK session source, shows progress, verifies that the
# standby's table equals the source's, stops everything it started, and
# ends with one machine-readable line:
#   RESULT mode=natsync sessions=N seconds=S rate=R drops=D standby_match=yes|no
# and, with --v6-pct above 0, each family's figures as natsync-bench gives
# them: rate_v4=R rate_v6=R live_v6=N store_bytes_per_session_v4=X
# store_bytes_per_session_v6=X (the store's growth from empty, measured by
# natsync-verify --memory-base once the agents are gone).
#
#   deploy/demo.sh [--events 2000000] [--flows 200000] [--masters 3]
#                  [--replicas 0] [--port 7000] [--workers 1] [--lanes 1]
#                  [--batch 256] [--rate 0] [--plain] [--layout log|keys]
#                  [--v6-pct 0]
# --v6-pct P: P % of the flows are IPv6 (half NAT66, half NAT64), the
# standby with an IPv6 table as large as its IPv4 one.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
cd "$NS_TOP"

events=2000000
flows=200000
masters=3
replicas=0
port=7000
workers=1
lanes=1
batch=256
rate=0
plain=0
# [store] layout of both agents (schema/FORMAT.md): log, the default.
layout=log
v6_pct=0
ns_options demo.sh --events=events --flows=flows --masters=masters \
	--replicas=replicas --port=port --workers=workers --lanes=lanes \
	--batch=batch --rate=rate --plain=plain=1 --layout=layout \
	--v6-pct=v6_pct -- "$@"

ns_install_deps
ns_build build-demo

run="$NS_TOP/deploy/run/demo-$port"
rm -rf "$run"
mkdir -p "$run"
store_args=(--port "$port" --dir "$run/redis")
if [ "$plain" = 1 ]; then
	store_args+=(--plain)
	nodes=1
else
	store_args+=(--masters "$masters" --replicas "$replicas")
	nodes=$((masters * (1 + replicas)))
fi
seeds=""
for ((i = 0; i < nodes; i++)); do
	seeds="${seeds:+$seeds,}127.0.0.1:$((port + i))"
done

standby_pid=""
cleanup() {
	set +e
	if [ -n "$standby_pid" ] && kill -0 "$standby_pid" 2>/dev/null; then
		ns_say "stopping the standby"
		kill "$standby_pid"
		wait "$standby_pid" 2>/dev/null
	fi
	ns_store_stop
}
trap cleanup EXIT

ns_store_start "the store" "${store_args[@]}"
verify=(build-demo/tools/natsync-verify -S "$seeds" -L "$layout")
# The empty store's memory: the base of each family's bytes per session.
if [ "$v6_pct" -gt 0 ]; then
	empty_memory=$("${verify[@]}" --used-memory | sed -n 's/^used_memory=\([0-9]*\) .*/\1/p')
fi

cat >"$run/standby.ini" <<INI
[agent]
role = standby
gateway_id = 2
eal_args = --no-huge --no-shconf -m 1024 --no-pci --no-telemetry -l 0
[store]
seeds = $seeds
layout = $layout
[standby]
table_capacity = $((flows * 2 > 1024 ? flows * 2 : 1024))
table_capacity_v6 = $((v6_pct > 0 ? (flows * 2 > 1024 ? flows * 2 : 1024) : 0))
dump = $run/standby.tbl
INI
cat >"$run/active.ini" <<INI
[agent]
role = active
gateway_id = 1
eal_args = --no-huge --no-shconf -m 256 --no-pci --no-telemetry -l 0-$lanes
[store]
seeds = $seeds
layout = $layout
[active]
workers = $workers
batch_size = $batch
[rings]
lanes = $lanes
[source]
type = synth
flows = $flows
events = $events
rate = $rate
seed = 42
v6_pct = $v6_pct
dump = $run/source.tbl
INI

ns_say "starting the standby (log: $run/standby.log)"
build-demo/tools/natsync-agent -c "$run/standby.ini" >"$run/standby.out" 2>"$run/standby.log" &
standby_pid=$!
for ((i = 0; i < 300; i++)); do
	grep -q "standby: synced" "$run/standby.log" && break
	kill -0 "$standby_pid" 2>/dev/null || { cat "$run/standby.log" >&2; exit 1; }
	sleep 0.1
done
grep -q "standby: synced" "$run/standby.log" || {
	echo "demo.sh: the standby did not sync within 30 s" >&2
	cat "$run/standby.log" >&2
	exit 1
}

ns_say "running the active agent: $events events over $flows flows"
build-demo/tools/natsync-agent -c "$run/active.ini" 2> >(tee "$run/active.log" >&2) | tee "$run/active.out"
report=$(grep '^REPORT role=active' "$run/active.out" || true)
[ -n "$report" ] || { echo "demo.sh: the active agent printed no report" >&2; exit 1; }
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$report"; }

ns_say "verifying: source table vs store vs standby table"
match=no
if "${verify[@]}" -s "$run/source.tbl" -b "$run/standby.tbl" \
	-p "$standby_pid" -t 20 | tee "$run/verify.out"; then
	match=yes
fi

kill "$standby_pid"
wait "$standby_pid" 2>/dev/null || true
standby_pid=""
standby_report=$(grep '^REPORT role=standby' "$run/standby.out" || true)

# Each family's figures, with no natsync client left connected to the store.
families=""
if [ "$v6_pct" -gt 0 ]; then
	ns_say "measuring the store's bytes per session of each family"
	# The store closes the connections of the agents just gone first
	# (natsync-bench waits as long).
	sleep 0.2
	"${verify[@]}" --memory-base "$empty_memory" >"$run/memory.out" || true
	memory=$(grep '^memory:' "$run/memory.out" || true)
	mfield() {
		local v
		v=$(sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$memory")
		echo "${v:-n/a}"
	}
	families=" rate_v4=$(field rate_v4) rate_v6=$(field rate_v6) live_v6=$(mfield live_v6)"
	families+=" store_bytes_per_session_v4=$(mfield store_bytes_per_session_v4)"
	families+=" store_bytes_per_session_v6=$(mfield store_bytes_per_session_v6)"
fi

echo
echo "natsync demo report"
echo "  store:    $([ "$plain" = 1 ] && echo "1 plain server" || echo "$masters master(s), $replicas replica(s) each") on 127.0.0.1:$port"
echo "  active:   $report"
echo "  standby:  $standby_report"
echo "  verify:   $(tail -n 1 "$run/verify.out")"
[ -z "$families" ] || echo "  memory:   ${memory#memory: }"
echo "RESULT mode=natsync sessions=$(field acked) seconds=$(field seconds) rate=$(field rate) drops=$(field drops) standby_match=$match$families"
[ "$match" = yes ]
