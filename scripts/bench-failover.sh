#!/usr/bin/env bash
# A DPDK gateway pair's failover, timed as a client sees it: the failover
# test's network (tests/test_failover.c: client, server, gateways A and B,
# a 3-master Redis Cluster on loopback), its test
# keepalived_moves_the_flows_when_the_active_dies run with
# NATSYNC_FAILOVER_ROUNDS=N: the active is SIGKILLed N times, each time the
# gateway that took over, and the outage of a UDP flow (one datagram every
# 20 ms; the longest time between two replies: from the last through the
# dead gateway to the first through the new one) is measured each time.
# Twice, side by side: with keepalived electing the active (VRRP over a
# veth, deploy/keepalived.conf.example, its track and notify scripts), and
# without (the notify script called at once after the kill: the gateway's
# own part). Ends with one line per way:
#   RESULT failover how=direct|keepalived rounds=N outage_p50_ms=..
#     outage_p99_ms=.. outage_max_ms=.. promoted_p50_ms=.. promoted_p99_ms=..
# promoted: from the kill until `status` showed the other gateway active.
# Root only; uses the failover test's namespaces and ports (7800-7802):
# not while the test suite runs.
#
#   scripts/bench-failover.sh [--rounds N]     (default 20, at most 64)
set -euo pipefail
# shellcheck source=../deploy/lib.sh
. "$(dirname "$0")/../deploy/lib.sh"
cd "$NS_TOP"

rounds=20
ns_options bench-failover.sh --rounds=rounds -- "$@"
dir=${BUILD:-build-test}
ns_install_deps
ns_build "$dir" -Dtests=enabled >&2
for how in direct keepalived; do
	direct=0
	[ "$how" = keepalived ] || direct=1
	ns_say "bench-failover: $rounds failovers, $how"
	ns_test_rounds "$dir" 'failover/keepalived_*' 'failover ' \
		NATSYNC_FAILOVER_ROUNDS="$rounds" NATSYNC_FAILOVER_DIRECT=$direct
done
