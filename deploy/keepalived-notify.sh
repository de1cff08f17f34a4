#!/usr/bin/env bash
# keepalived notify hook for natsync-gateway: VRRP decides which gateway is
# active, this script tells the gateway.
#
#   vrrp_instance NAT { ... notify "/usr/libexec/natsync/keepalived-notify.sh -S /run/natsync/gateway.sock" }
#
# keepalived appends: TYPE NAME STATE PRIORITY (e.g. INSTANCE NAT MASTER 100).
#   MASTER        -> promote: forward with the replicated sessions, new epoch
#   BACKUP, FAULT -> demote: stop forwarding, resync the table from the store
#   STOP          -> demote
# Options (before keepalived's arguments):
#   -S SOCKET   the gateway's control socket (default /run/natsync/gateway.sock)
#   -g PATH     the natsync-gateway binary (default: natsync-gateway on PATH)
# Exit status: the gateway's answer (0 ok), 2 when it cannot be reached.
set -euo pipefail

sock=/run/natsync/gateway.sock
gw=natsync-gateway
while getopts "S:g:h" opt; do
	case $opt in
	S) sock=$OPTARG ;;
	g) gw=$OPTARG ;;
	h) sed -n '2,15p' "$0"; exit 0 ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
if [ $# -lt 3 ]; then
	echo "usage: $0 [-S SOCKET] [-g BINARY] TYPE NAME STATE [PRIORITY]" >&2
	exit 2
fi
state=$3

case $state in
MASTER) cmd=promote ;;
BACKUP | FAULT | STOP) cmd=demote ;;
*)
	echo "keepalived-notify: unknown state '$state'" >&2
	exit 2
	;;
esac
echo "keepalived-notify: $2 is $state: $cmd via $sock" >&2
logger -t natsync "keepalived $2 $state: $cmd" 2>/dev/null || true
exec "$gw" --ctl "$cmd" -S "$sock"
