#!/usr/bin/env bash
# keepalived notify hook for a pair of Linux kernel NAT gateways (nftables
# masquerade/SNAT over conntrack): VRRP moves the addresses, this script
# swaps the natsync-agent this host runs.
#
#   vrrp_instance NAT { ... notify "/usr/libexec/natsync/keepalived-kernel-notify.sh" }
#
# keepalived appends: TYPE NAME STATE PRIORITY (e.g. INSTANCE NAT MASTER 100).
#   MASTER               -> hand the standby agent over (SIGUSR2: it takes a
#                           new epoch above its last, fences the old active,
#                           reads every master again into this host's
#                           conntrack and exits), start the active agent
#                           ([source] type = kernel) on that epoch; when the
#                           store gave none, the active takes one above the
#                           standby's last (epoch_floor), or a provisional
#                           one when the store does not answer
#   BACKUP, FAULT, STOP  -> stop the active agent, start the standby agent
#                           ([standby] commit = conntrack)
# Options (before keepalived's arguments):
#   -a INI      the active's configuration (default /etc/natsync/kernel-active.ini)
#   -s INI      the standby's configuration (default /etc/natsync/kernel-standby.ini)
#   -d DIR      pid files and output: DIR/kernel-{active,standby}.{pid,out,log}
#               (default /run/natsync)
#   -g PATH     the natsync-agent binary (default: natsync-agent on PATH)
#   -i ID       this host's [agent] gateway_id (both roles): the hosts of a
#               pair share its higher bytes and differ in the low one, so
#               that they never make the same provisional epoch
#   -x ARGS     more arguments for the agent it starts (e.g. --set agent.epoch=7)
# Exit status: 0 when the agent of the new state runs, 1 when it exited at
# once (its reason is in DIR/kernel-ROLE.log), 2 on bad arguments.
set -euo pipefail

# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

active_ini=/etc/natsync/kernel-active.ini
standby_ini=/etc/natsync/kernel-standby.ini
dir=/run/natsync
agent=natsync-agent
extra="" id=""
ns_short_options a=active_ini s=standby_ini d=dir g=agent i=id x=extra -- "$@"
ns_vrrp_state keepalived-kernel-notify \
	"[-a INI] [-s INI] [-d DIR] [-g BINARY] [-i ID] [-x ARGS]" "${NS_ARGS[@]}"
if [ -n "$id" ]; then
	case "$id" in
	*[!0-9]*) echo "keepalived-kernel-notify: -i $id: not a number" >&2; exit 2 ;;
	esac
	extra="$extra --set agent.gateway_id=$id"
fi

# Stop the agent of role, if it runs, with signal (default TERM): SIGTERM
# lets an active drain its lane and write its REPORT, SIGUSR2 hands a
# standby over; after 15 s it is killed.
stop_role() {
	local pidf="$dir/kernel-$1.pid" pid
	[ -f "$pidf" ] || return 0
	pid=$(cat "$pidf")
	if [ -n "$pid" ] && ns_alive "$pid"; then
		kill -"${2:-TERM}" "$pid"
		for _ in $(seq 750); do
			ns_alive "$pid" || break
			sleep 0.02
		done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$pidf"
}

# Start the agent of role with ini in the background (its own session, so
# that keepalived's signals to this script do not reach it); fails when it
# exits within its first second (a configuration, BPF or namespace error
# exits with status 2 at start).
start_role() {
	local pidf="$dir/kernel-$1.pid" pid
	if [ -f "$pidf" ] && ns_alive "$(cat "$pidf")"; then
		echo "keepalived-kernel-notify: the $1 agent runs already" >&2
		return 0
	fi
	# shellcheck disable=SC2086 # extra holds several arguments
	setsid "$agent" -c "$2" $extra </dev/null \
		>>"$dir/kernel-$1.out" 2>>"$dir/kernel-$1.log" &
	pid=$!
	echo "$pid" >"$pidf"
	for _ in $(seq 10); do
		if ! ns_alive "$pid"; then
			echo "keepalived-kernel-notify: the $1 agent exited; see $dir/kernel-$1.log" >&2
			rm -f "$pidf"
			return 1
		fi
		sleep 0.1
	done
}

mkdir -p "$dir"
if [ "$ns_vrrp_master" = 1 ]; then
	stop=standby start=active ini=$active_ini
else
	stop=active start=standby ini=$standby_ini
fi
echo "keepalived-kernel-notify: $ns_vrrp_name is $ns_vrrp_state: stop the $stop agent, start the $start agent" >&2
logger -t natsync "keepalived $ns_vrrp_name $ns_vrrp_state: $start agent" 2>/dev/null || true
# Only the REPORT the standby writes now counts (the file keeps earlier
# ones).
out="$dir/kernel-standby.out"
seen=0
if [ "$start" = active ] && [ -f "$out" ]; then
	seen=$(wc -l <"$out")
fi
if [ "$start" = active ]; then
	# The standby takes the epoch and fences while it still runs, so
	# that what the old active wrote and never announced before the
	# fence is read into conntrack before the active starts.
	stop_role standby USR2
else
	stop_role "$stop"
fi
# The new active runs on the standby's handover epoch; without one, it
# takes its epoch above the highest one this node's standby applied (its
# last REPORT's epoch_max): a store that lost its counter cannot give it a
# lower one, and when the store does not answer, its provisional epoch is
# in the generation after it.
if [ "$start" = active ] && [ -f "$out" ]; then
	report=$(sed -n "$((seen + 1)),\$ s/^REPORT role=standby .*/&/p" "$out" |
		tail -n 1)
	handover=$(echo "$report" | sed -n 's/.* handover_epoch=\([0-9]*\).*/\1/p')
	floor=$(sed -n 's/^REPORT role=standby .* epoch_max=\([0-9]*\).*/\1/p' \
		"$out" | tail -n 1)
	if [ -n "$handover" ] && [ "$handover" != 0 ]; then
		extra="$extra --set agent.epoch=$handover"
	elif [ -n "$floor" ]; then
		extra="$extra --set agent.epoch_floor=$floor"
	fi
fi
start_role "$start" "$ini"
