#!/usr/bin/env bash
# Run natsync-agent as a separate DPDK secondary process that drains the
# rings of a running gateway (natsync-gateway, or any DPDK primary process
# that creates the natsync lanes) and replicates them to the store.
#
#   deploy/agent-secondary.sh -c CONFIG [--prefix natsync] [--pages 256]
#                             [--agent PATH] [--eal 'EXTRA EAL ARGS']
#                             [-- NATSYNC-AGENT OPTIONS...]
#
#   -c, --config FILE  the agent's configuration: [store], [active],
#                      [agent] gateway_id (the gateway's) and [rings] lanes
#                      (the gateway's lane count; natsync-gateway has 1)
#   --prefix PREFIX    the gateway's EAL --file-prefix (default natsync)
#   --pages N          2 MiB hugepages deploy/hugepages.sh keeps reserved
#                      (default 256; the gateway allocates them, the agent
#                      maps the gateway's)
#   --agent PATH       the natsync-agent program (default: natsync-agent in
#                      PATH, else build-demo/ or build/ of this tree)
#   --eal 'ARGS'       more EAL arguments, e.g. '-l 1' or '--log-level=debug'
#
# It runs deploy/hugepages.sh, then replaces itself (exec, same pid, same
# signals) with
#   natsync-agent -c CONFIG --role active --set rings.attach=yes
#     --set "agent.eal_args=--proc-type=secondary --file-prefix=PREFIX
#            --no-pci --no-telemetry ARGS" [NATSYNC-AGENT OPTIONS...]
# [agent] eal_args of CONFIG is replaced: its default (--no-huge --no-shconf)
# gives a process private memory, which cannot see the gateway's rings. The
# gateway must run with hugepages, without --no-huge/--no-shconf/--in-memory,
# and with the same --file-prefix; [source] type must be none.
#
# The agent stops on SIGINT/SIGTERM (it first replicates what is in the
# rings, at most 2 s; what is left stays for the next agent). It exits with
# status 1 when no gateway of PREFIX runs, and, within about a second, when
# the gateway goes away (after replicating what is left, at most 5 s): a
# restarted gateway cannot start while an agent of the old one still runs,
# so restart the agent after the gateway. Killed outright, the records it
# had taken from a ring but not yet written are lost; the ring keeps the
# rest, and while no agent runs the gateway drops (and counts) what does
# not fit.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

config=""
prefix=natsync
pages=256
agent=""
eal_extra=""

usage() { ns_usage; }

while [ $# -gt 0 ]; do
	case "$1" in
	-c | --config) config=${2:-}; shift 2 || { usage >&2; exit 2; } ;;
	--prefix) prefix=${2:-}; shift 2 || { usage >&2; exit 2; } ;;
	--pages) pages=${2:-}; shift 2 || { usage >&2; exit 2; } ;;
	--agent) agent=${2:-}; shift 2 || { usage >&2; exit 2; } ;;
	--eal) eal_extra=${2:-}; shift 2 || { usage >&2; exit 2; } ;;
	-h | --help) usage; exit 0 ;;
	--) shift; break ;;
	*) echo "agent-secondary.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
	esac
done
[ -n "$config" ] || { echo "agent-secondary.sh: -c CONFIG is required" >&2; usage >&2; exit 2; }
[ -r "$config" ] || { echo "agent-secondary.sh: cannot read $config" >&2; exit 2; }
case "$prefix" in
'' | *[!A-Za-z0-9_.-]*) echo "agent-secondary.sh: --prefix: '$prefix' must be letters, digits, _ . -" >&2; exit 2 ;;
esac

if [ -z "$agent" ]; then
	for candidate in "$(command -v natsync-agent || true)" \
		"$top/build-demo/tools/natsync-agent" "$top/build/tools/natsync-agent"; do
		if [ -n "$candidate" ] && [ -x "$candidate" ]; then
			agent=$candidate
			break
		fi
	done
	[ -n "$agent" ] || { echo "agent-secondary.sh: natsync-agent not found; build it or give --agent PATH" >&2; exit 1; }
fi
[ -x "$agent" ] || { echo "agent-secondary.sh: $agent is not executable" >&2; exit 1; }

"$here/hugepages.sh" -n "$pages"

# EAL keeps a primary's runtime files in /var/run/dpdk/PREFIX (root) or
# $XDG_RUNTIME_DIR/dpdk/PREFIX; without them there is nothing to attach to.
if [ "$(id -u)" = 0 ]; then
	runtime=/var/run/dpdk/$prefix
else
	runtime=${XDG_RUNTIME_DIR:-/tmp}/dpdk/$prefix
fi
[ -e "$runtime/config" ] || {
	echo "agent-secondary.sh: no DPDK primary process with --file-prefix=$prefix ($runtime/config is missing); start the gateway first" >&2
	exit 1
}

eal_args="--proc-type=secondary --file-prefix=$prefix --no-pci --no-telemetry${eal_extra:+ $eal_extra}"
ns_say "$agent -c $config --role active --set rings.attach=yes --set 'agent.eal_args=$eal_args' $*"
exec "$agent" -c "$config" --role active --set rings.attach=yes \
	--set "agent.eal_args=$eal_args" "$@"
