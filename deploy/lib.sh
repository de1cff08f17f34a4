# shellcheck shell=bash
# Shared by deploy/*.sh and scripts/*.sh: installing what natsync needs,
# building it, reading a script's options, starting the Redis store a
# script works with and writing a benchmark agent's configuration.
# Sourced, not run; it changes no directory and starts nothing by itself.

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

ns_say() { echo "==> $*" >&2; }

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
ns_setup_clang() {
	local dir=$1
	shift
	if [ ! -f "$dir/build.ninja" ]; then
		ns_say "CC=clang meson setup $dir $*"
		CC=clang meson setup "$dir" "$@"
	else
		ns_say "meson configure $dir $*"
		meson configure "$dir" "$@"
	fi
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
