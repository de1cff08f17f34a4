#!/usr/bin/env bash
# What defer costs a kernel gateway's first packets, and what it buys at a
# failover: tests/test_kdefer.c's network (a gateway namespace that
# masquerades, natsync-agent with [source] type = kernel, one Redis), its
# tests run --runs times:
# - first_packet_latency_with_defer_off_and_on, with --flows new UDP flows
#   one after the other, each first datagram timed from the client's send
#   to the server: defer off, then on (defer_max_us 2 000, the default);
#     RESULT kdefer family=4 flows=N off_p50_us=.. off_p99_us=..
#       on_p50_us=.. on_p99_us=.. timeouts=.. hold_p50_us=.. hold_p99_us=..
#   and the same over IPv6 (ipv6_first_packet_latency_with_defer_off_and_on,
#   family=6) with --family 6 or all;
#   hold_*: the agent's own histogram of the holds (10 us buckets);
# - with_defer_no_new_flow_is_lost_when_the_gateway_dies: new UDP flows at
#   2 000 a second through gateway A, IPv4 and IPv6 in turn (1 000 of
#   each), A dies among them (its agent stopped, then its forwarding, then
#   the agent killed), and the flows whose first datagram reached the
#   server but whose entry gateway B's standby did not commit into its
#   conntrack are lost at failover, defer off, then on (defer_max_us
#   50 000); one line a family, the one(s) --family asks for:
#     RESULT kdefer_failover family=4 rate=1000 defer_max_us=..
#       off_arrived=.. off_lost_at_failover=.. on_arrived=..
#       on_lost_at_failover=..
# Root only; uses the test's namespaces (k5df-*) and Redis port 7980: not
# while the test suite runs.
#
#   scripts/bench-kernel-defer.sh [--runs N] [--flows N] [--family 4|6|all]
# Defaults: --runs 3, --flows 1000 (at most 20 000), --family 4. The
# failover round runs both families whichever --family is given.
set -euo pipefail
# shellcheck source=../deploy/lib.sh
. "$(dirname "$0")/../deploy/lib.sh"
cd "$NS_TOP"

runs=3 flows=1000 family=4
ns_options bench-kernel-defer.sh --runs=runs --flows=flows --family=family \
	-- "$@"
# want: the families whose lines are printed
case $family in
4) filter='kdefer/+(first_packet_latency*|with_defer*)' want=4 ;;
6) filter='kdefer/+(ipv6_first_packet_latency*|with_defer*)' want=6 ;;
all)
	filter='kdefer/+(first_packet_latency*|ipv6_first_packet_latency*|with_defer*)'
	want='[46]'
	;;
*) echo "bench-kernel-defer.sh: --family 4, 6 or all" >&2; exit 2 ;;
esac
dir=${BUILD:-build-test}
ns_install_deps
ns_build "$dir" -Dtests=enabled >&2
for i in $(seq "$runs"); do
	ns_say "bench-kernel-defer: run $i of $runs"
	out=$(env NATSYNC_SOURCE_ROOT="$NS_TOP" \
		NATSYNC_BUILD_ROOT="$NS_TOP/$dir" NATSYNC_KDEFER_FLOWS="$flows" \
		"$NS_TOP/$dir/tests/test_kdefer" --jobs 1 \
		--filter "$filter" 2>&1) || {
		printf '%s\n' "$out" >&2
		echo "bench-kernel-defer: run $i failed" >&2
		exit 1
	}
	printf '%s\n' "$out" | grep "^kdefer failover: defer o[nf]*: IPv$want:" \
		>&2 || true
	printf '%s\n' "$out" | grep -E "^RESULT .* family=$want( |\$)"
done
