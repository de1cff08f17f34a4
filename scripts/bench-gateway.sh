#!/usr/bin/env bash
# What session recording costs the reference NAT44 gateway, per core:
# natsync-gwbench runs the gateway's lcore loop (rx burst, nsdp_nat,
# tx burst, housekeeping) over net_ring ports, fed by a generator in the
# same thread, with recording off and with recording on (a lane drained by
# a consumer thread stands in for the agent). Needs no store, no NIC and no
# hugepages. By default both gateways run side by side, taking turns on the
# lcore every 100 ms, so that a busy or shared machine slows both alike;
# --rounds N measures N rounds of each, one after the other, instead.
# Prints one line per gateway (or round), the medians, and ends with
#   RESULT gwbench flows=F new_pct=P pps_off=X pps_on=Y cost_pct=Z recorded=R record_drops=D
#
#   scripts/bench-gateway.sh [--flows N] [--new-pct P] [--seconds S]
#                           [--slice-ms MS | --rounds N] [--csv FILE]
#                           [--bench FILE] [-- GWBENCH-OPTIONS...]
# Defaults: --flows 100000 --new-pct 10 --seconds 10 --slice-ms 100.
# --bench FILE runs that natsync-gwbench instead of building this tree's
# (e.g. one built from another commit, to compare two builds in turns).
# Everything after -- goes to natsync-gwbench as is (see natsync-gwbench
# --help, e.g. --tcp-pct 50 --reply-pct 50 --timeout 2 --verify).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
. deploy/lib.sh

# The defaults the usage above states; options override them.
flows=100000 new_pct=10 seconds=10 slice_ms=100
rounds="" csv="" bench=""
extra=()

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
	case "$1" in
	--flows) flows=$2; shift 2 ;;
	--new-pct) new_pct=$2; shift 2 ;;
	--seconds) seconds=$2; shift 2 ;;
	--slice-ms) slice_ms=$2; rounds=""; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--csv) csv=$2; shift 2 ;;
	--bench) bench=$2; shift 2 ;;
	--) shift; extra=("$@"); break ;;
	-h|--help) usage; exit 0 ;;
	*) echo "bench-gateway.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
	esac
done

if [ -z "$bench" ]; then
	ns_install_deps
	ns_build build-bench-gateway -Dtests=disabled >&2
	bench="$top/build-bench-gateway/bench/natsync-gwbench"
fi
[ -x "$bench" ] || { echo "bench-gateway.sh: $bench was not built" >&2; exit 1; }

out=$(mktemp "${TMPDIR:-/tmp}/bench-gateway.XXXXXX")
pid=""
cleanup() {
	set +e
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		ns_say "stopping natsync-gwbench (pid $pid)"
		kill -TERM "$pid"
		wait "$pid"
	fi
	rm -f "$out"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

args=(--flows "$flows" --new-pct "$new_pct" --seconds "$seconds")
if [ -n "$rounds" ]; then
	args+=(--rounds "$rounds")
else
	args+=(--slice-ms "$slice_ms")
fi
[ -n "$csv" ] && args+=(--csv "$csv")
args+=("${extra[@]}")
# The gateway loop wants an EAL worker lcore of its own; on one CPU both
# lcores share it (the figures then mean little).
if [ "$(nproc)" -lt 2 ] && [[ " ${extra[*]} " != *" -- "* ]]; then
	args+=(-- "--lcores=0@0,1@0")
fi

ns_say "natsync-gwbench ${args[*]}"
"$bench" "${args[@]}" >"$out" &
pid=$!
status=0
wait "$pid" || status=$?
pid=""
grep -v '^RESULT ' "$out" || true
result=$(grep '^RESULT ' "$out" || true)
if [ "$status" -ne 0 ] || [ -z "$result" ]; then
	echo "bench-gateway.sh: natsync-gwbench failed (exit status $status)" >&2
	exit 1
fi
echo "$result"
