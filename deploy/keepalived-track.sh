#!/usr/bin/env bash
# keepalived track_script for natsync: exits 0 when the program is ready
# (what its /readyz or the gateway's control socket "health" says), 1 when
# it is not or does not answer.
#
#   natsync-gateway:  keepalived-track.sh -S /run/natsync/gateway.sock
#                     (natsync-gateway --ctl health)
#   natsync-agent:    keepalived-track.sh -u 127.0.0.1:9464
#                     (GET http://ADDR:PORT/readyz, [metrics] listen;
#                     curl when installed, else bash's /dev/tcp)
#
# Options:
#   -S SOCKET   the gateway's control socket
#   -g PATH     the natsync-gateway binary (default: natsync-gateway on PATH)
#   -u ADDR:PORT  the agent's [metrics] listen (IPv6 as [ADDR]:PORT)
#   -t SECS     give up after SECS seconds (default 2)
#   -T          use bash's /dev/tcp even when curl is installed
#   -v          print the answer
#   -h          this text
# Exit status: 0 ready, 1 not ready or no answer, 2 bad usage.
set -euo pipefail

# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

sock=
gw=natsync-gateway
url=
timeout=2
verbose=0
no_curl=0
ns_short_options S=sock g=gw u=url t=timeout T=no_curl=1 v=verbose=1 -- "$@"
if { [ -z "$sock" ] && [ -z "$url" ]; } || { [ -n "$sock" ] && [ -n "$url" ]; }; then
	echo "usage: $0 -S SOCKET [-g BINARY] | -u ADDR:PORT [-T]  [-t SECS] [-v]" >&2
	exit 2
fi
case $timeout in
'' | *[!0-9]*) echo "keepalived-track: -t wants whole seconds" >&2; exit 2 ;;
esac

say() {
	if [ "$verbose" = 1 ]; then printf '%s\n' "$1"; fi
}

if [ -n "$sock" ]; then
	if answer=$(timeout "$timeout" "$gw" --ctl health -S "$sock" 2>&1); then
		say "$answer"
		exit 0
	fi
	say "${answer:-no answer from $sock}"
	exit 1
fi

# ADDR:PORT or [ADDR]:PORT
case $url in
\[*\]:*) host=${url%]:*}; host=${host#[}; port=${url##*]:} ;;
*:*) host=${url%:*}; port=${url##*:} ;;
*) echo "keepalived-track: -u wants ADDR:PORT" >&2; exit 2 ;;
esac

if [ "$no_curl" = 0 ] && command -v curl >/dev/null 2>&1; then
	hostpart=$host
	case $host in *:*) hostpart="[$host]" ;; esac
	code=$(curl -s -m "$timeout" -o /dev/null -w '%{http_code}' \
		"http://$hostpart:$port/readyz" || true)
	say "readyz: ${code:-no answer}"
	[ "$code" = 200 ]
	exit $?
fi

# No curl: one HTTP/1.0 request over bash's /dev/tcp (the script's
# arguments are expanded by the inner bash).
# shellcheck disable=SC2016
status=$(timeout "$timeout" bash -c '
	exec 3<>"/dev/tcp/$1/$2" || exit 1
	printf "GET /readyz HTTP/1.0\r\nHost: %s\r\n\r\n" "$1" >&3
	IFS= read -r line <&3 || exit 1
	printf "%s" "$line"
' track "$host" "$port" 2>/dev/null || true)
say "readyz: ${status:-no answer}"
case $status in
"HTTP/1."?" 200"*) exit 0 ;;
*) exit 1 ;;
esac
