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

# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

sock=/run/natsync/gateway.sock
gw=natsync-gateway
ns_short_options S=sock g=gw -- "$@"
ns_vrrp_state keepalived-notify "[-S SOCKET] [-g BINARY]" "${NS_ARGS[@]}"
if [ "$ns_vrrp_master" = 1 ]; then
	cmd=promote
else
	cmd=demote
fi
echo "keepalived-notify: $ns_vrrp_name is $ns_vrrp_state: $cmd via $sock" >&2
logger -t natsync "keepalived $ns_vrrp_name $ns_vrrp_state: $cmd" 2>/dev/null || true
exec "$gw" --ctl "$cmd" -S "$sock"
