# shellcheck shell=bash
# Shared by deploy/*.sh and scripts/*.sh: installing what natsync needs,
# building it, reading a script's options, starting the Redis store a
# script works with, a benchmark's configuration, scratch and namespaces,
# and reading what keepalived passes its hooks. Sourced, not run; it
# changes no directory and starts nothing by itself.

# The top of the source tree, wherever the script is started from.
NS_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

NATSYNC_PACKAGES=(meson ninja-build pkg-config gcc clang libc6-dev
	libclang-rt-dev llvm
	dpdk-dev libdpdk-dev libhiredis-dev libcriterion-dev libinih-dev
	libssl-dev libbpf-dev bpftool libmnl-dev libnetfilter-conntrack-dev
	redis-server redis-tools gnuplot-nox
	libmicrohttpd-dev scdoc prometheus dpkg-dev man-db
	iproute2 ethtool nftables conntrack conntrackd procps time)
# systemd: the unit directory (systemd.pc) and systemd-analyze, with which
# the install test verifies the units.
NATSYNC_PACKAGES+=(systemd)
# lintian: the install test checks the Debian package build-deb.sh makes.
NATSYNC_PACKAGES+=(lintian)
# keepalived: the failover test elects the active gateway with it.
NATSYNC_PACKAGES+=(keepalived)

ns_say() { echo "==> $*" >&2; }

# The median of the numbers on stdin, one a line (the mean of the middle
# two for an even count; 0 for none). The benchmarks' summaries use it.
ns_median() {
	sort -g | awk '{ v[NR] = $1 } END {
		if (NR == 0) { print 0; exit }
		print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
	}'
}

# ns_alive PID: whether process PID runs. One that exited but is not yet
# reaped (a zombie) does not: a program started in the background of a
# shell that has gone is reaped by init, which may take seconds.
ns_alive() {
	local stat
	kill -0 "$1" 2>/dev/null || return 1
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	[ "${stat%% *}" != Z ]
}

# Install the Debian packages that are missing (apt-get update first).
ns_install_deps() {
	local missing=() p
	for p in "${NATSYNC_PACKAGES[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
			missing+=("$p")
	done
	if [ ${#missing[@]} -eq 0 ]; then
		ns_say "all build and test packages are installed"
		return 0
	fi
	local sudo=""
	if [ "$(id -u)" != 0 ]; then
		command -v sudo >/dev/null || {
			echo "need root (or sudo) to install: ${missing[*]}" >&2
			return 1
		}
		sudo=sudo
	fi
	ns_say "installing: ${missing[*]}"
	$sudo apt-get update
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "${missing[@]}"
}

# Configure (once) and build natsync in $1 with extra meson options after it.
ns_build() {
	local dir=$1
	shift
	if [ ! -f "$dir/build.ninja" ]; then
		ns_say "meson setup $dir $*"
		meson setup "$dir" "$NS_TOP" "$@"
	elif [ $# -gt 0 ]; then
		meson configure "$dir" "$@"
	fi
	ns_say "ninja -C $dir"
	ninja -C "$dir"
}

# Build (ns_build) in $2 with the meson options after $3, after installing
# what is missing, and set program to the built $3 (relative to the build
# directory); exits 1, naming script $1, if it was not built.
ns_build_program() {
	local script=$1 dir=$2 rel=$3
	shift 3
	ns_install_deps
	ns_build "$dir" "$@" >&2
	program="$NS_TOP/$dir/$rel"
	[ -x "$program" ] || {
		echo "$script: $program was not built" >&2
		exit 1
	}
}

# Configure (once) or reconfigure $1 for clang, with the meson options
# after it; builds nothing (the sanitizer and fuzz builds pick targets).
# A tree whose command-line options already hold every -DNAME=VALUE given
# is left as it is: a reconfigure makes its next ninja regenerate the
# build files (3-5 s, three times one after the other in scripts/test.sh).
ns_setup_clang() {
	local dir=$1 opt
	shift
	if [ ! -f "$dir/build.ninja" ]; then
		ns_say "CC=clang meson setup $dir $*"
		CC=clang meson setup "$dir" "$@"
		return
	fi
	for opt in "$@"; do
		opt=${opt#-D}
		grep -qxF -- "${opt%%=*} = ${opt#*=}" \
			"$dir/meson-private/cmd_line.txt" 2>/dev/null || {
			ns_say "meson configure $dir $*"
			meson configure "$dir" "$@"
			return
		}
	done
	ns_say "$dir is configured with $*"
}

# The script's header comment (after the #! line), as its usage.
ns_usage() {
	awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
}

# ns_options SCRIPT SPEC... -- "$@": read a script's options. A SPEC
# "--events=events" stores the option's value in $events; "--plain=plain=1"
# is a flag that sets plain=1. -h/--help prints the usage and exits 0; an
# unknown option, or one without its value, exits 2 with the usage.
ns_options() {
	local _ns_script=$1 _ns_spec _ns_var _ns_known
	local _ns_specs=()
	shift
	while [ "$1" != -- ]; do
		_ns_specs+=("$1")
		shift
	done
	shift
	while [ $# -gt 0 ]; do
		case "$1" in
		-h | --help) ns_usage; exit 0 ;;
		esac
		_ns_known=0
		for _ns_spec in "${_ns_specs[@]}"; do
			[ "$1" = "${_ns_spec%%=*}" ] || continue
			_ns_var=${_ns_spec#*=}
			if [[ $_ns_var == *=* ]]; then
				printf -v "${_ns_var%%=*}" '%s' "${_ns_var#*=}"
				shift
			elif [ $# -ge 2 ]; then
				printf -v "$_ns_var" '%s' "$2"
				shift 2
			else
				echo "$_ns_script: $1 needs a value" >&2
				ns_usage >&2
				exit 2
			fi
			_ns_known=1
			break
		done
		[ "$_ns_known" = 1 ] || {
			echo "$_ns_script: unknown option '$1'" >&2
			ns_usage >&2
			exit 2
		}
	done
}

# The store of a script: ns_store_start WHAT START-OPTIONS... starts it with
# deploy/redis-cluster.sh; ns_store_stop, which the script's EXIT trap
# calls so that it goes on failure too, stops it again.
NS_STORE_ARGS=()
ns_store_start() {
	local what=$1
	shift
	NS_STORE_ARGS=("$@")
	ns_say "starting $what"
	"$NS_TOP/deploy/redis-cluster.sh" start "$@" >&2
}

ns_store_stop() {
	[ ${#NS_STORE_ARGS[@]} -gt 0 ] || return 0
	ns_say "stopping the store"
	"$NS_TOP/deploy/redis-cluster.sh" stop "${NS_STORE_ARGS[@]}" >&2 || true
	NS_STORE_ARGS=()
}

# ns_agent_ini ROLE PORT LCORES [LINE...]: the configuration of a
# benchmark's natsync-agent on stdout: role ROLE (an active is gateway 1
# with 256 MB and one lane, a standby gateway 2 with 512 MB), the store one
# Redis at 127.0.0.1:PORT, no progress lines, DPDK without hugepages on
# lcores LCORES (with any more EAL arguments after them), then the LINEs
# (the role's own sections) as they are.
ns_agent_ini() {
	local role=$1 port=$2 lcores=$3 gateway=1 mb=256
	shift 3
	if [ "$role" != active ]; then
		gateway=2
		mb=512
	fi
	printf '%s\n' '[agent]' "role = $role" "gateway_id = $gateway" \
		'progress_ms = 0' \
		"eal_args = --no-huge --no-shconf -m $mb --no-pci --no-telemetry -l $lcores" \
		'[store]' "seeds = 127.0.0.1:$port"
	if [ "$role" = active ]; then
		printf '%s\n' '[rings]' 'lanes = 1'
	fi
	if [ $# -gt 0 ]; then
		printf '%s\n' "$@"
	fi
}

# ns_bench_setup NAME NETNS...: what a root benchmark that runs agents in
# network namespaces starts with: natsync built in $build ($BUILD, default
# build), a scratch directory in $run and an EXIT trap that kills the
# processes in $pids, calls bench_stop when the script defines one, stops
# the store (ns_store_stop) and removes the namespaces and $run. The
# namespaces are removed first too: a killed run may have left them.
ns_bench_setup() {
	local name=$1
	shift
	NS_BENCH_NETNS=("$@")
	# shellcheck disable=SC2034 # the benchmark's
	build=$NS_TOP/${BUILD:-build}
	run=$(mktemp -d "/tmp/natsync-$name.XXXXXX")
	pids=()
	trap ns_bench_cleanup EXIT
	ns_say "$name: building in $build"
	ns_install_deps
	ns_build "$build" >&2
	ns_netns_del "$@"
}

ns_bench_cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	if declare -F bench_stop >/dev/null; then
		bench_stop
	fi
	ns_store_stop
	ns_netns_del "${NS_BENCH_NETNS[@]}"
	rm -rf "$run"
}

# ns_test_rounds DIR TEST FILTER LINES NAME=VALUE...: a benchmark that is
# a test run many times over (the failover tests' rounds): run tests/TEST
# of build DIR (relative to the top) with --filter FILTER and the
# environment given, print its lines starting with LINES to stderr and its
# RESULT lines to stdout; on failure its whole output to stderr, exit 1.
ns_test_rounds() {
	local dir=$1 test=$2 filter=$3 lines=$4 out
	shift 4
	out=$(env NATSYNC_SOURCE_ROOT="$NS_TOP" \
		NATSYNC_BUILD_ROOT="$NS_TOP/$dir" "$@" \
		"$NS_TOP/$dir/tests/$test" --jobs 1 \
		--filter "$filter" 2>&1) || {
		printf '%s\n' "$out" >&2
		echo "the run of $filter with $* failed" >&2
		exit 1
	}
	printf '%s\n' "$out" | grep "^$lines" >&2 || true
	printf '%s\n' "$out" | grep '^RESULT '
}

# Delete the network namespaces named, those that exist.
ns_netns_del() {
	local n
	for n in "$@"; do
		ip netns del "$n" 2>/dev/null || true
	done
}

# ns_nat_rig CLIENT GATEWAY SERVER: the kernel gateway benchmarks' three
# network namespaces, CLIENT 10.74.0.2 --veth-- 10.74.0.1 GATEWAY
# 198.51.100.1 --veth-- 198.51.100.2 SERVER (each veth end named after its
# namespace, without the dash, and 0 or 1). GATEWAY forwards, masquerades
# (nftables table k4nat) what leaves by its second veth and keeps UDP
# entries 600 s (so that none expires during a run); SERVER drops the
# datagrams to UDP ports 9000-9099 (table k4drop).
ns_nat_rig() {
	local c=$1 g=$2 s=$3 n
	local ci=${1//-/} gi=${2//-/} si=${3//-/}
	for n in "$c" "$g" "$s"; do
		ip netns add "$n"
		ip -n "$n" link set lo up
	done
	ip link add "${ci}0" netns "$c" type veth peer name "${gi}0" netns "$g"
	ip link add "${gi}1" netns "$g" type veth peer name "${si}0" netns "$s"
	ip -n "$c" link set "${ci}0" up
	ip -n "$g" link set "${gi}0" up
	ip -n "$g" link set "${gi}1" up
	ip -n "$s" link set "${si}0" up
	ip -n "$c" addr add 10.74.0.2/24 dev "${ci}0"
	ip -n "$c" route add default via 10.74.0.1
	ip -n "$g" addr add 10.74.0.1/24 dev "${gi}0"
	ip -n "$g" addr add 198.51.100.1/24 dev "${gi}1"
	ip -n "$s" addr add 198.51.100.2/24 dev "${si}0"
	ns_nat_gateway "$g"
	ip netns exec "$s" nft -f - <<NFT
table ip k4drop {
	chain in { type filter hook input priority 0; udp dport 9000-9099 drop; }
}
NFT
}

# ns_nat_gateway NETNS: what makes NETNS a gateway of ns_nat_rig (forwarding,
# the masquerade of what leaves by its veth 1, UDP entries kept 600 s).
ns_nat_gateway() {
	local i=${1//-/}
	ip netns exec "$1" sysctl -qw net.ipv4.ip_forward=1
	ip netns exec "$1" sysctl -qw net.netfilter.nf_conntrack_udp_timeout=600
	ip netns exec "$1" nft -f - <<NFT
table ip k4nat {
	chain post { type nat hook postrouting priority 100; oifname "${i}1" masquerade; }
}
NFT
}

# ns_short_options SPEC... -- "$@": read a hook's one-letter options (the
# way keepalived passes them, before its own arguments). A SPEC "S=sock"
# stores -S's value in $sock; "T=no_curl=1" is a flag that sets no_curl=1.
# -h prints the usage and exits 0; an unknown option, or one without its
# value, exits 2. The arguments after the options are left in NS_ARGS.
ns_short_options() {
	local _ns_spec _ns_letters=h _ns_opt _ns_var
	local _ns_specs=()
	while [ "$1" != -- ]; do
		_ns_specs+=("$1")
		_ns_var=${1#?=}
		if [[ $_ns_var == *=* ]]; then
			_ns_letters+=${1%%=*}
		else
			_ns_letters+="${1%%=*}:"
		fi
		shift
	done
	shift
	OPTIND=1
	while getopts "$_ns_letters" _ns_opt; do
		case $_ns_opt in
		h) ns_usage; exit 0 ;;
		'?') exit 2 ;;
		esac
		for _ns_spec in "${_ns_specs[@]}"; do
			[ "$_ns_opt" = "${_ns_spec%%=*}" ] || continue
			_ns_var=${_ns_spec#?=}
			if [[ $_ns_var == *=* ]]; then
				printf -v "${_ns_var%%=*}" '%s' "${_ns_var#*=}"
			else
				printf -v "$_ns_var" '%s' "$OPTARG"
			fi
		done
	done
	# shellcheck disable=SC2034 # the caller's
	NS_ARGS=("${@:OPTIND}")
}

# ns_vrrp_state HOOK OPTIONS TYPE NAME STATE [PRIORITY]: what keepalived
# passes a notify hook. Sets ns_vrrp_name to NAME, ns_vrrp_state to STATE
# and ns_vrrp_master to 1 for MASTER, 0 for BACKUP, FAULT and STOP; exits
# 2 with the usage (OPTIONS: the hook's own) for fewer than three
# arguments, or naming HOOK for an unknown state.
ns_vrrp_state() {
	local hook=$1 options=$2
	shift 2
	if [ $# -lt 3 ]; then
		echo "usage: $0 $options TYPE NAME STATE [PRIORITY]" >&2
		exit 2
	fi
	# shellcheck disable=SC2034 # the hook's
	ns_vrrp_name=$2
	ns_vrrp_state=$3
	# shellcheck disable=SC2034
	case $ns_vrrp_state in
	MASTER) ns_vrrp_master=1 ;;
	BACKUP | FAULT | STOP) ns_vrrp_master=0 ;;
	*)
		echo "$hook: unknown state '$ns_vrrp_state'" >&2
		exit 2
		;;
	esac
}
