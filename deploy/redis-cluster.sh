#!/usr/bin/env bash
# Start or stop a local Redis store on loopback for natsync: a cluster of N
# masters (optionally with replicas), or one plain server with --plain.
#
#   deploy/redis-cluster.sh start [--masters 3] [--replicas 0] [--port 7000]
#                                 [--dir deploy/run/redis-7000] [--plain]
#                                 [--acl FILE] [--maxmemory 0]
#                                 [--node-timeout 2000] [--addr-per-node]
#   deploy/redis-cluster.sh stop  [--port 7000] [--dir ...]
#   deploy/redis-cluster.sh status [--port 7000] [--dir ...]
#
# Node i listens on 127.0.0.1:(port+i); with --addr-per-node on
# 127.0.0.(2+i):(port+i) instead, and it talks to the other nodes from that
# address too, so that a packet filter can cut one node off from the rest
# (the faults tests do). Every file of the store lives in
# --dir; stop kills what start started (pid files) and removes nothing else.
# With replicas, start returns once every replica is in sync with its master
# (so that a master killed right away has a replica to be promoted), and
# --node-timeout (ms) is how long a master may be silent before its replica
# takes over.
# Each master lets a subscriber's backlog reach 256 MiB (64 MiB for a
# minute) before it closes the subscription, where Redis's default is
# 32 MiB (8 MiB): a standby that falls behind in a burst catches up from
# the stream instead of being cut off and resyncing its master
# (docs/failure-modes.md). NS_PUBSUB_LIMIT="HARD SOFT SECONDS" sets
# another.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
cmd=${1:-}
if [ -n "$cmd" ]; then shift; fi
masters=3
replicas=0
port=7000
dir=""
plain=0
acl=""
maxmemory=0
node_timeout=2000
pubsub_limit=${NS_PUBSUB_LIMIT:-256mb 64mb 60}
addr_per_node=0
ns_options redis-cluster.sh --masters=masters --replicas=replicas \
	--port=port --dir=dir --plain=plain=1 --acl=acl --maxmemory=maxmemory \
	--node-timeout=node_timeout --addr-per-node=addr_per_node=1 -- "$@"
[ -n "$dir" ] || dir="$here/run/redis-$port"

if [ "$plain" = 1 ]; then
	masters=1
	replicas=0
fi
nodes=$((masters * (1 + replicas)))

node_ports() {
	local i
	for ((i = 0; i < nodes; i++)); do echo $((port + i)); done
}

# The address node port $1 listens on.
node_host() {
	if [ "$addr_per_node" = 1 ]; then
		echo "127.0.0.$((2 + $1 - port))"
	else
		echo 127.0.0.1
	fi
}

start_node() {
	local p=$1 ndir="$dir/$1" host
	host=$(node_host "$p")
	mkdir -p "$ndir"
	# A store starts empty: a cluster node refuses to join with an old
	# nodes.conf, and natsync's tests expect no leftover sessions.
	rm -f "$ndir/nodes.conf" "$ndir/dump.rdb" "$ndir/appendonly.aof"
	local args=(--port "$p" --bind "$host" --dir "$ndir" --daemonize yes
		--pidfile "$ndir/redis.pid" --logfile "$ndir/redis.log"
		--save "" --appendonly no --protected-mode no
		--maxmemory "$maxmemory"
		--client-output-buffer-limit "pubsub $pubsub_limit")
	if [ "$addr_per_node" = 1 ]; then
		args+=(--bind-source-addr "$host")
	fi
	if [ "$plain" = 0 ]; then
		args+=(--cluster-enabled yes --cluster-config-file "$ndir/nodes.conf"
			--cluster-node-timeout "$node_timeout" --cluster-require-full-coverage no
			--cluster-allow-pubsubshard-when-down yes
			--cluster-allow-reads-when-down yes)
		# A replica's first sync starts at once rather than after the
		# default 5 s wait for more replicas.
		args+=(--repl-diskless-sync-delay 0)
	fi
	if [ -n "$acl" ]; then
		args+=(--aclfile "$(cd "$(dirname "$acl")" && pwd)/$(basename "$acl")")
	fi
	redis-server "${args[@]}"
}

cli() {
	local p=$1 host
	shift
	host=$(node_host "$p")
	if [ -n "${NATSYNC_REDIS_ADMIN_PASS:-}" ]; then
		REDISCLI_AUTH="$NATSYNC_REDIS_ADMIN_PASS" redis-cli --user "${NATSYNC_REDIS_ADMIN_USER:-default}" -h "$host" -p "$p" "$@"
	else
		redis-cli -h "$host" -p "$p" "$@"
	fi
}

wait_ping() {
	local p=$1 i
	for ((i = 0; i < 100; i++)); do
		if cli "$p" ping 2>/dev/null | grep -q PONG; then
			return 0
		fi
		sleep 0.05
	done
	echo "redis-cluster.sh: node $p does not answer" >&2
	return 1
}

# Every node that is a replica has its link to its master up.
wait_replicas_synced() {
	local p i info synced
	echo "redis-cluster.sh: waiting for the replicas' first sync"
	for ((i = 0; i < 400; i++)); do
		synced=0
		for p in $(node_ports); do
			info=$(cli "$p" info replication 2>/dev/null) || true
			if grep -q '^role:slave' <<<"$info" &&
				grep -q '^master_link_status:up' <<<"$info"; then
				synced=$((synced + 1))
			fi
		done
		[ "$synced" -ge $((masters * replicas)) ] && return 0
		sleep 0.05
	done
	echo "redis-cluster.sh: only $synced of $((masters * replicas)) replica(s) in sync after 20 s" >&2
	exit 1
}

do_start() {
	command -v redis-server >/dev/null || {
		echo "redis-cluster.sh: redis-server not found (apt-get install redis-server)" >&2
		exit 1
	}
	mkdir -p "$dir"
	local p
	for p in $(node_ports); do
		if cli "$p" ping >/dev/null 2>&1; then
			echo "redis-cluster.sh: port $p is already in use" >&2
			exit 1
		fi
	done
	echo "redis-cluster.sh: starting $nodes node(s) on $(node_host "$port"):$port.. in $dir"
	for p in $(node_ports); do start_node "$p"; done
	for p in $(node_ports); do wait_ping "$p"; done
	if [ "$plain" = 1 ]; then
		echo "redis-cluster.sh: plain server ready on 127.0.0.1:$port"
		return 0
	fi
	local addrs=()
	for p in $(node_ports); do addrs+=("$(node_host "$p"):$p"); done
	if [ "$nodes" = 1 ]; then
		# redis-cli --cluster create wants three masters at least.
		cli "$port" cluster addslotsrange 0 16383 >"$dir/create.log" 2>&1
	elif [ -n "${NATSYNC_REDIS_ADMIN_PASS:-}" ]; then
		REDISCLI_AUTH="$NATSYNC_REDIS_ADMIN_PASS" redis-cli --user "${NATSYNC_REDIS_ADMIN_USER:-default}" \
			--cluster create "${addrs[@]}" --cluster-replicas "$replicas" --cluster-yes >"$dir/create.log" 2>&1
	else
		redis-cli --cluster create "${addrs[@]}" --cluster-replicas "$replicas" \
			--cluster-yes >"$dir/create.log" 2>&1
	fi || { cat "$dir/create.log" >&2; exit 1; }
	local i ok=0
	for ((i = 0; i < 200; i++)); do
		ok=1
		for p in $(node_ports); do
			if ! cli "$p" cluster info 2>/dev/null | grep -q 'cluster_state:ok'; then
				ok=0
				break
			fi
		done
		[ "$ok" = 1 ] && break
		sleep 0.05
	done
	if [ "$ok" != 1 ]; then
		echo "redis-cluster.sh: cluster did not reach state ok" >&2
		exit 1
	fi
	if [ "$replicas" -gt 0 ]; then
		wait_replicas_synced
	fi
	echo "redis-cluster.sh: cluster of $masters master(s), $replicas replica(s) each, ready on $(node_host "$port"):$port"
}

do_stop() {
	local p f pid n=0
	for f in "$dir"/*/redis.pid; do
		[ -f "$f" ] || continue
		pid=$(cat "$f")
		if kill -0 "$pid" 2>/dev/null; then
			kill "$pid" 2>/dev/null || true
			n=$((n + 1))
		fi
	done
	for f in "$dir"/*/redis.pid; do
		[ -f "$f" ] || continue
		pid=$(cat "$f")
		for ((p = 0; p < 100; p++)); do
			ns_alive "$pid" || break
			sleep 0.05
		done
		kill -9 "$pid" 2>/dev/null || true
		rm -f "$f"
	done
	echo "redis-cluster.sh: stopped $n node(s) in $dir"
}

do_status() {
	local f pid
	for f in "$dir"/*/redis.pid; do
		[ -f "$f" ] || continue
		pid=$(cat "$f")
		if kill -0 "$pid" 2>/dev/null; then
			echo "running: $(basename "$(dirname "$f")") pid $pid"
		fi
	done
}

case "$cmd" in
start) do_start ;;
stop) do_stop ;;
status) do_status ;;
-h|--help|help) ns_usage ;;
*) ns_usage >&2; exit 2 ;;
esac
