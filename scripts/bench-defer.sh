#!/usr/bin/env bash
# What defer buys at a failover, and what it costs a first packet: the
# failover test's network (tests/test_failover.c), its test
# with_defer_no_new_session_is_lost_when_the_active_dies run with
# NATSYNC_DEFER_ROUNDS=N: new UDP flows open through the active gateway at
# 2 000 a second (a socket each), the active is SIGKILLed among them and
# the standby promoted at once (the notify script), and every flow whose
# first datagram reached the server is sent to through the new active; a
# flow it has no session for is lost at failover. N failovers with defer
# off, then N with defer on (defer_max_us as given), side by side. Each
# round prints a line; the end, one line per way:
#   RESULT defer defer=off|on defer_max_us=.. rounds=N flows_seen=..
#     flows_seen_last_20ms=.. lost_at_failover=.. lost_max=.. held=..
#     unacknowledged=.. lost_waited=..
# held: first packets the active held; unacknowledged: those it let go
# after defer_max_us without the acknowledgement. Each round's held p50
# and p99 (the active's histogram, 8 us buckets) is the first-packet
# latency defer adds. Root only; uses the failover test's namespaces and
# ports (7800-7802): not while the test suite runs.
#
#   scripts/bench-defer.sh [--rounds N] [--defer-max-us US]
# Defaults: --rounds 10 (at most 64), --defer-max-us 2000 (the
# gateway's default).
set -euo pipefail
# shellcheck source=../deploy/lib.sh
. "$(dirname "$0")/../deploy/lib.sh"
cd "$NS_TOP"

rounds=10 defer_max_us=2000
ns_options bench-defer.sh --rounds=rounds --defer-max-us=defer_max_us -- "$@"
dir=${BUILD:-build-test}
ns_install_deps
ns_build "$dir" -Dtests=enabled >&2
for mode in off on; do
	ns_say "bench-defer: $rounds failovers, defer $mode"
	ns_test_rounds "$dir" test_failover 'failover/with_defer_*' 'defer=' \
		NATSYNC_DEFER_ROUNDS="$rounds" NATSYNC_DEFER=$mode \
		NATSYNC_DEFER_MAX_US="$defer_max_us"
done
