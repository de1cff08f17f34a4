#!/usr/bin/env bash
# A gateway pair's failover, timed as a client sees it: the outage of a
# UDP flow (one datagram every 20 ms, echoed; the longest time between two
# replies: from the last through the failed gateway to the first through
# the other) over N failovers, p50 and p99. Twice, side by side: with
# keepalived electing the master (Debian's, VRRP over a veth, the
# configuration, track and notify scripts deploy/ ships), and without (the
# notify script called at once: the gateway's own part).
#
# --gateway dpdk (default): the DPDK failover test's network
# (tests/test_failover.c: client, server, gateways A and B, a 3-master
# Redis Cluster on loopback), its test
# keepalived_moves_the_flows_when_the_active_dies: the active is SIGKILLed
# N times, each time the gateway that took over, which restarts as a
# standby. promoted: from the kill until `status` showed the other gateway
# active.
#
# --gateway kernel: the kernel failover test's network
# (tests/test_kfailover.c: Linux NAT gateways 1 and 2, nftables snat,
# natsync-agent active with the kernel source and standby committing into
# conntrack, deploy/keepalived-kernel.conf.example), its test
# keepalived_moves_the_flows_over_and_back: the master's links fail N
# times, each time the gateway that took over, whose links then come back
# (it stays BACKUP and its standby loads). moved: from the links failing
# until the other gateway held the addresses; active: until its active
# agent replicated.
#
# --store down (dpdk only): every master stopped (SIGSTOP) before each
# kill, so that each promotion forwards on a provisional epoch (the store
# continues once the flows went on, before the next round); the notify
# script called at once only: the gateway's own part with no store.
#
# Ends with one line per way:
#   RESULT failover how=direct|keepalived store=up|down rounds=N outage_p50_ms=..
#     outage_p99_ms=.. outage_max_ms=.. promoted_p50_ms=.. promoted_p99_ms=..
#   RESULT kfailover how=direct|keepalived rounds=N outage_p50_ms=..
#     outage_p99_ms=.. outage_max_ms=.. moved_p50_ms=.. moved_p99_ms=..
#     active_p50_ms=.. active_p99_ms=..
# Root only; uses the tests' namespaces and ports (DPDK 7800-7802, kernel
# 7995-7997): not while the test suite runs.
#
#   scripts/bench-failover.sh [--rounds N] [--gateway dpdk|kernel]
#                             [--store up|down]
#   (default 20 rounds, at most 64; store up)
set -euo pipefail
# shellcheck source=../deploy/lib.sh
. "$(dirname "$0")/../deploy/lib.sh"
cd "$NS_TOP"

rounds=20 gateway=dpdk store=up
ns_options bench-failover.sh --rounds=rounds --gateway=gateway --store=store -- "$@"
hows="direct keepalived"
case $gateway/$store in
*/up) ;;
dpdk/down) hows=direct ;;
*) echo "bench-failover: --store is up or down (down with --gateway dpdk)" >&2; exit 2 ;;
esac
case $gateway in
dpdk) test=test_failover filter='failover/keepalived_moves_the_flows_when*'
	lines='failover ' group=hugepages ;;
kernel) test=test_kfailover filter='failover/keepalived_moves_the_flows_over*'
	lines='kfailover ' group=kernel ;;
*) echo "bench-failover: --gateway is dpdk or kernel" >&2; exit 2 ;;
esac
dir=${BUILD:-build-test}
ns_install_deps
ns_build "$dir" -Dtests=enabled >&2
for how in $hows; do
	direct=0
	[ "$how" = keepalived ] || direct=1
	ns_say "bench-failover: $rounds $gateway failovers, $how"
	ns_test_rounds "$dir" "$test" "$filter" "$lines" \
		NATSYNC_FAILOVER_ROUNDS="$rounds" NATSYNC_FAILOVER_DIRECT=$direct \
		NATSYNC_FAILOVER_STORE="$store" NATSYNC_TEST_GROUP=$group
done
