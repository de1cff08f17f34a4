#!/usr/bin/env bash
# How many new NAT'd flows of a Linux kernel gateway reach natsync, at the
# highest new-flow rate the namespace rig makes: the kernel session source
# ([source] type = kernel, BPF) beside ctnetlink NEW events (what
# conntrackd and `conntrack -E` listen to), with the default socket buffer
# and with 8 MiB, all in the same run.
#
#   netns k4cap-c 10.74.0.2 --veth-- 10.74.0.1 netns k4cap-g 198.51.100.1
#   --veth-- 198.51.100.2 netns k4cap-s
#
# k4cap-g forwards and masquerades (nftables) what leaves towards
# k4cap-s; k4cap-s drops the datagrams. natsync-kflows makes one UDP flow
# per source port from k4cap-c (raw socket, sendmmsg, --threads threads),
# a natsync-agent active captures k4cap-g with BPF into a plain Redis on
# loopback, and two natsync-kflows event counters listen in k4cap-g. The
# denominator is the entries conntrack created (UDP timeout 600 s, so that
# none expires). Ends with
#   RESULT kcap method=ksrc|ctnetlink-default|ctnetlink-8m flows=F
#     rate=R entries=E received=N pct=P lost=L
# received: records from ring buffer events (`creates`) for the source,
# NEW events for ctnetlink; lost: ring buffer events dropped
# (`ringbuf_drops`) for the source, socket overruns (ENOBUFS, each one
# or more events) for ctnetlink. The source's line also carries
# redumps=R dumped=D (what its re-dump after a drop recovered) and
# store=K (the sessions the store holds at the end: what natsync
# replicated, events and re-dumps together).
# Root only; run it alone on the machine (under the test lock).
#
#   scripts/bench-kernel-capture.sh [--flows N] [--threads T] [--rate R]
#                                   [--ringbuf BYTES] [--port P]
# Defaults: --flows 200000 --threads 2 --rate 0 (flat out)
# --ringbuf 4194304 ([source] ringbuf_size) --port 7930.
set -euo pipefail
# shellcheck source=../deploy/lib.sh
. "$(dirname "$0")/../deploy/lib.sh"
cd "$NS_TOP"

flows=200000 threads=2 rate=0 ringbuf=4194304 port=7930
ns_options bench-kernel-capture.sh --flows=flows --threads=threads --rate=rate --ringbuf=ringbuf --port=port -- "$@"

ns_bench_setup bench-kernel-capture k4cap-c k4cap-g k4cap-s
kflows=$build/bench/natsync-kflows
ns_nat_rig k4cap-c k4cap-g k4cap-s

ns_store_start "one plain Redis on 127.0.0.1:$port" --plain --port "$port" \
	--dir "$run/store"
ns_agent_ini active "$port" 0 '[source]' 'type = kernel' 'netns = k4cap-g' \
	"ringbuf_size = $ringbuf" >"$run/active.ini"
"$build/tools/natsync-agent" -c "$run/active.ini" >"$run/active.out" \
	2>"$run/active.log" &
active=$!
pids+=("$active")
ip netns exec k4cap-g "$kflows" events --ready "$run/ev1.ready" \
	>"$run/ev1.out" &
ev1=$!
pids+=("$ev1")
ip netns exec k4cap-g "$kflows" events --rcvbuf 8388608 \
	--ready "$run/ev2.ready" >"$run/ev2.out" &
ev2=$!
pids+=("$ev2")
for _ in $(seq 100); do
	grep -q 'kernel source: tp_btf' "$run/active.log" &&
		[ -e "$run/ev1.ready" ] && [ -e "$run/ev2.ready" ] && break
	sleep 0.1
done
grep -q 'kernel source: tp_btf' "$run/active.log" || {
	cat "$run/active.log" >&2
	exit 1
}
sleep 1 # the start-up dump of the (empty) table

echo "bench-kernel-capture: $flows flows, $threads threads, rate $rate" >&2
gen=$(ip netns exec k4cap-c "$kflows" send --dst 198.51.100.2 \
	--flows "$flows" --threads "$threads" --rate "$rate")
echo "$gen"
sleep 3 # events and records still on their way
entries=$(ip netns exec k4cap-g conntrack -C)
store=$(redis-cli -p "$port" dbsize)
kill -TERM "$ev1" "$ev2" "$active"
wait "$ev1" "$ev2" || true
wait "$active" || true
pids=()
cat "$run/ev1.out" "$run/ev2.out"
grep REPORT "$run/active.out"

field() { sed -n "s/.* $1=\([0-9]*\).*/\1/p"; }
sent=$(echo "$gen" | field sent)
grate=$(echo "$gen" | field rate)
result() { # method received lost [more]
	echo "RESULT kcap method=$1 flows=$sent rate=$grate entries=$entries" \
		"received=$2 pct=$(awk -v r="$2" -v e="$entries" \
			'BEGIN { printf "%.2f", e ? 100 * r / e : 0 }') lost=$3${4:+ $4}"
}
result ksrc "$(field creates <"$run/active.out")" \
	"$(field ringbuf_drops <"$run/active.out")" \
	"redumps=$(field redumps <"$run/active.out") dumped=$(field dumped <"$run/active.out") store=$store"
result ctnetlink-default "$(field events <"$run/ev1.out")" \
	"$(field overruns <"$run/ev1.out")"
result ctnetlink-8m "$(field events <"$run/ev2.out")" \
	"$(field overruns <"$run/ev2.out")"
