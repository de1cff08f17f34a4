#!/usr/bin/env bash
# A kernel NAT gateway's failover to its peer, conntrackd beside natsync:
# how many of N NAT'd flows the standby gateway's conntrack table holds
# after failover, and how long after failover (conntrackd) or after the
# last flow (natsync) it held them.
#
#   netns k4fo-c 10.74.0.2 -- 10.74.0.1 k4fo-a 198.51.100.1 -- k4fo-s
#   k4fo-a 10.74.9.1 --veth k4foa9/k4fob9-- 10.74.9.2 k4fo-b
#
# k4fo-a (the active gateway) forwards and masquerades (nftables) what
# leaves towards k4fo-s; k4fo-b (the standby gateway) has the same nftables
# table. natsync-kflows makes the flows, one UDP datagram per source port
# (raw socket, sendmmsg, --threads threads, --rate flows/s, 0 = flat out).
#
# conntrackd (FTFW over UDP on the k4foa9/k4fob9 veth, external cache on
# the standby): the flows are made, the standby's external cache is waited
# for (until it holds them all or stops growing), then `conntrackd -c`
# (the failover) is timed until the standby's conntrack count grew by the
# active's source NAT entries. natsync: a Redis on loopback, a
# natsync-agent active with [source] type = kernel on k4fo-a and a
# natsync-agent standby with [standby] commit = conntrack into k4fo-b;
# timed from the last flow sent until the standby's conntrack count
# reached the active's (the entries are written as they come: there is no
# failover step). Ends with
#   RESULT kfailover method=conntrackd|natsync family=4|6 flows=N entries=E
#     present=P listed=L ms=T [sync_ms=W commit_cmd_ms=C external_cache=X]
# entries: the active's entries with IPS_SRC_NAT (`natsync-kflows
# count`); present: the standby's entries with IPS_SRC_NAT after failover
# (the ones the kernel translates as on the active); listed: the same
# counted by `conntrack -L --src-nat`, as a cross-check; ms: as above;
# sync_ms (conntrackd): from the last flow until the external cache held
# them (polled every 100 ms); commit_cmd_ms: how long `conntrackd -c`
# took; external_cache: the entries it held.
# Root only; run it alone on the machine (under the test lock).
#
#   scripts/bench-kernel-failover.sh [--flows N] [--threads T] [--rate R]
#                                    [--port P] [--family 4|6]
# Defaults: --flows 20000 --threads 2 --rate 0 --port 7931 --family 4.
# --family 6: the same with IPv6 flows (client fd74::2 behind an ip6
# masquerade to 2001:db8:74::1, server 2001:db8:74::2; conntrackd's link
# stays IPv4), the natsync standby with an IPv6 table.
set -euo pipefail
# shellcheck source=../deploy/lib.sh
. "$(dirname "$0")/../deploy/lib.sh"
cd "$NS_TOP"

flows=20000 threads=2 rate=0 port=7931 family=4
ns_options bench-kernel-failover.sh --flows=flows --threads=threads --rate=rate --port=port --family=family -- "$@"
case $family in
4) dst=198.51.100.2 cfam=ipv4 v6_table=0 ;;
6) dst=2001:db8:74::2 cfam=ipv6 v6_table=$((flows * 4 + 65536)) ;;
*) echo "bench-kernel-failover: --family is 4 or 6" >&2; exit 2 ;;
esac

# conntrackd, if it runs (the EXIT trap calls it too).
bench_stop() {
	for g in a b; do
		if [ -e "$run/ctd-$g.conf" ]; then
			ip netns exec k4fo-$g conntrackd -C "$run/ctd-$g.conf" -k \
				>/dev/null 2>&1 || true
		fi
	done
}
ns_bench_setup bench-kernel-failover k4fo-c k4fo-a k4fo-s k4fo-b
kflows=$build/bench/natsync-kflows
ns_nat_rig k4fo-c k4fo-a k4fo-s
# The standby gateway, on a veth of its own to the active (conntrackd's
# link), with the same nftables table.
ip netns add k4fo-b
ip -n k4fo-b link set lo up
ip link add k4foa9 netns k4fo-a type veth peer name k4fob9 netns k4fo-b
ip -n k4fo-a link set k4foa9 up
ip -n k4fo-b link set k4fob9 up
ip -n k4fo-a addr add 10.74.9.1/24 dev k4foa9
ip -n k4fo-b addr add 10.74.9.2/24 dev k4fob9
ns_nat_gateway k4fo-b
if [ "$family" = 6 ]; then
	ip -n k4fo-c addr add fd74::2/64 dev k4foc0 nodad
	ip -n k4fo-c route add default via fd74::1
	ip -n k4fo-a addr add fd74::1/64 dev k4foa0 nodad
	ip -n k4fo-a addr add 2001:db8:74::1/64 dev k4foa1 nodad
	ip -n k4fo-s addr add $dst/64 dev k4fos0 nodad
	for g in a b; do
		ip netns exec k4fo-$g sysctl -qw net.ipv6.conf.all.forwarding=1
		ip netns exec k4fo-$g nft add table ip6 k4nat6
		ip netns exec k4fo-$g nft add chain ip6 k4nat6 post \
			"{ type nat hook postrouting priority 100; }"
		ip netns exec k4fo-$g nft add rule ip6 k4nat6 post \
			oifname "k4fo${g}1" masquerade
	done
	ip netns exec k4fo-s nft add table ip6 k4drop6
	ip netns exec k4fo-s nft add chain ip6 k4drop6 in \
		"{ type filter hook input priority 0; }"
	ip netns exec k4fo-s nft add rule ip6 k4drop6 in udp dport 9000-9099 drop
fi

now_ns() { date +%s%N; }
count() { ip netns exec "$1" conntrack -C; }
# Entries with IPS_SRC_NAT (natsync-kflows count): the ones that translate.
snat() { ip netns exec "$1" "$kflows" count --family "$family" | field snat; }
listed() { ip netns exec "$1" conntrack -L -f $cfam --src-nat 2>/dev/null | wc -l; }
field() { sed -n "s/.* $1=\([0-9]*\).*/\1/p"; }
# A second after method $1 is ready, the flows: prints natsync-kflows'
# line and sets end_ns (when the last flow was sent) and entries (the
# active's source NAT entries).
run_flows() {
	local gen
	sleep 1
	echo "bench-kernel-failover: $1, $flows IPv$family flows, rate $rate" >&2
	gen=$(ip netns exec k4fo-c "$kflows" send --dst $dst \
		--flows "$flows" --threads "$threads" --rate "$rate")
	echo "$gen"
	end_ns=$(echo "$gen" | field end_ns)
	entries=$(snat k4fo-a)
}
# Waits (at most 60 s, polling every 10 ms) until netns $1 holds $2
# entries; prints when (ns), or 0.
wait_count() {
	local end=$(($(now_ns) + 60000000000)) t
	while :; do
		t=$(now_ns)
		if [ "$(count "$1")" -ge "$2" ]; then echo "$t"; return; fi
		if [ "$t" -gt "$end" ]; then echo 0; return; fi
		sleep 0.01
	done
}

# --- conntrackd --------------------------------------------------------
for g in a b; do
	if [ $g = a ]; then me=10.74.9.1 peer=10.74.9.2; else me=10.74.9.2 peer=10.74.9.1; fi
	cat >"$run/ctd-$g.conf" <<CONF
Sync {
	Mode FTFW {
		DisableExternalCache Off
	}
	UDP {
		IPv4_address $me
		IPv4_Destination_Address $peer
		Port 3780
		Interface k4fo${g}9
		SndSocketBuffer 8388608
		RcvSocketBuffer 8388608
		Checksum on
	}
}
General {
	HashSize 65536
	HashLimit $((flows * 4 + 65536))
	LogFile $run/ctd-$g.log
	Syslog off
	LockFile $run/ctd-$g.lock
	UNIX {
		Path $run/ctd-$g.ctl
	}
	NetlinkBufferSize 2097152
	NetlinkBufferSizeMaxGrowth 8388608
	Filter From Userspace {
		Protocol Accept {
			TCP
			UDP
		}
		Address Ignore {
			IPv4_address 127.0.0.1
			IPv4_address 10.74.9.1
			IPv4_address 10.74.9.2
		}
	}
}
CONF
	ip netns exec k4fo-$g conntrackd -C "$run/ctd-$g.conf" -d
done
for _ in $(seq 50); do
	[ -S "$run/ctd-a.ctl" ] && [ -S "$run/ctd-b.ctl" ] && break
	sleep 0.1
done
if ! [ -S "$run/ctd-a.ctl" ] || ! [ -S "$run/ctd-b.ctl" ]; then
	echo "bench-kernel-failover: conntrackd did not start:" >&2
	cat "$run"/ctd-*.log >&2 || true
	exit 1
fi
run_flows conntrackd
ext=0 last=-1 stable=0
for _ in $(seq 600); do # the external cache, until it stops growing
	ext=$(ip netns exec k4fo-b conntrackd -C "$run/ctd-b.conf" -e | wc -l)
	t=$(now_ns)
	if [ "$ext" -ge "$entries" ]; then break; fi
	if [ "$ext" -eq "$last" ]; then
		stable=$((stable + 1))
		[ $stable -ge 20 ] && break
	else
		stable=0 synced=$t
	fi
	last=$ext
	sleep 0.1
done
[ "$ext" -ge "$entries" ] && synced=$t
echo "bench-kernel-failover: external cache $ext of $entries entries" >&2
base=$(count k4fo-b) # the sync link's own entries
t0=$(now_ns)
ip netns exec k4fo-b conntrackd -C "$run/ctd-b.conf" -c >"$run/commit.out" 2>&1 ||
	{ cat "$run/commit.out" >&2; }
t1=$(now_ns)
t2=$(wait_count k4fo-b $((base + entries)))
present=$(snat k4fo-b)
[ "$t2" -ne 0 ] || t2=$(now_ns)
echo "RESULT kfailover method=conntrackd family=$family flows=$flows entries=$entries" \
	"present=$present listed=$(listed k4fo-b)" \
	"ms=$(((t2 - t0) / 1000000)) sync_ms=$(((${synced:-$t} - end_ns) / 1000000))" \
	"commit_cmd_ms=$(((t1 - t0) / 1000000)) external_cache=$ext"
bench_stop
sleep 1

# --- natsync -----------------------------------------------------------
ip netns exec k4fo-a conntrack -F 2>/dev/null || true
ip netns exec k4fo-b conntrack -F 2>/dev/null || true
ns_store_start "one plain Redis on 127.0.0.1:$port" --plain --port "$port" \
	--dir "$run/store"
ns_agent_ini standby "$port" 0 '[standby]' \
	"table_capacity = $((flows * 4 + 65536))" \
	"table_capacity_v6 = $v6_table" 'commit = conntrack' \
	'commit_netns = k4fo-b' >"$run/standby.ini"
ns_agent_ini active "$port" 0 '[source]' 'type = kernel' 'netns = k4fo-a' \
	>"$run/active.ini"
"$build/tools/natsync-agent" -c "$run/standby.ini" >"$run/standby.out" \
	2>"$run/standby.log" &
standby=$!
pids+=("$standby")
"$build/tools/natsync-agent" -c "$run/active.ini" >"$run/active.out" \
	2>"$run/active.log" &
active=$!
pids+=("$active")
for _ in $(seq 100); do
	grep -q 'standby: synced' "$run/standby.log" &&
		grep -q 'kernel source: tp_btf' "$run/active.log" && break
	sleep 0.1
done
run_flows natsync
t2=$(wait_count k4fo-b "$entries")
present=$(snat k4fo-b)
[ "$t2" -ne 0 ] || t2=$(now_ns)
kill -TERM "$active" "$standby"
wait "$active" || true
wait "$standby" || true
pids=()
grep -h REPORT "$run/active.out" "$run/standby.out"
echo "RESULT kfailover method=natsync family=$family flows=$flows entries=$entries" \
	"present=$present listed=$(listed k4fo-b)" \
	"ms=$(((t2 - end_ns) / 1000000))"
