#!/usr/bin/env bash
# A kernel gateway's promotion, the time it adds:
# a standby with [standby] commit = conntrack holding about N sessions
# (cold loaded from a 3-master store on loopback that a synthetic active
# filled with N events over 100 N flows, so that about 1 % end as deletes)
# is handed over with SIGUSR2, as keepalived-kernel-notify.sh MASTER does;
# prints its "handover: every master read again" line, its REPORT's
# counts and the time from the signal to its exit. Root (a namespace
# khov0 and its conntrack).
#
#   scripts/bench-kernel-handover.sh BUILD_DIR N [PORT]   (PORT: 7985..7987 default)
set -euo pipefail

build=$(realpath "$1") n=$2 port=${3:-7985}
src=$(realpath "$(dirname "$0")/..")
agent=$build/tools/natsync-agent
dir=$(mktemp -d /tmp/kernel-handover.XXXXXX)
seeds=127.0.0.1:$port,127.0.0.1:$((port + 1)),127.0.0.1:$((port + 2))
pid=

cleanup() {
	[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
	"$src/deploy/redis-cluster.sh" stop --port "$port" --dir "$dir/store" \
		>/dev/null 2>&1 || true
	ip netns del khov0 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT

ini() { # ROLE LCORES MB
	printf '[agent]\nrole = %s\ngateway_id = 1\nprogress_ms = 0\n' "$1"
	printf 'eal_args = --no-huge --no-shconf -m %s --no-pci ' "$3"
	printf -- '--no-telemetry -l %s\n[store]\nseeds = %s\n' "$2" "$seeds"
}

ip netns add khov0
ip netns exec khov0 sysctl -qw net.netfilter.nf_conntrack_max=$((n * 4)) 2>/dev/null || true
"$src/deploy/redis-cluster.sh" start --masters 3 --port "$port" \
	--dir "$dir/store" >/dev/null
{ ini active 0-1 256
  printf '[rings]\nlanes = 1\n[source]\ntype = synth\nflows = %s\n' $((n * 100))
  printf 'events = %s\nrefresh_pct = 0\ntimeout_ms = 3600000\n' "$n"; } \
	>"$dir/active.ini"
"$agent" -c "$dir/active.ini" >"$dir/active.out" 2>"$dir/active.log"
{ ini standby 0 512
  printf '[standby]\ntable_capacity = %s\ncommit = conntrack\n' $((n * 2))
  printf 'commit_netns = khov0\n'; } >"$dir/standby.ini"
"$agent" -c "$dir/standby.ini" >"$dir/standby.out" 2>"$dir/standby.log" &
pid=$!
for _ in $(seq 600); do
	grep -q 'standby: cold load took' "$dir/standby.log" && break
	sleep 0.1
done
sleep 1 # the commits of the cold load
echo "conntrack entries: $(ip netns exec khov0 conntrack -C)"
t0=$(date +%s%N)
kill -USR2 "$pid"
wait "$pid" || true
pid=
t1=$(date +%s%N)
grep -h 'cold load took\|handover' "$dir/standby.log"
grep '^REPORT' "$dir/standby.out" |
	grep -o ' sessions=[0-9]*\| resyncs=[0-9]*\|ct_[a-z]*=[0-9]*\|handover_epoch=[0-9]*' |
	tr '\n' ' '
echo
echo "SIGUSR2 to exit: $(((t1 - t0) / 1000000)) ms"
