# Shared by deploy/*.sh: installing what natsync needs and building it.
# Sourced, not run.

NATSYNC_PACKAGES=(meson ninja-build pkg-config gcc clang libc6-dev
	libclang-rt-dev llvm
	dpdk-dev libdpdk-dev libhiredis-dev libcriterion-dev libinih-dev
	libssl-dev libbpf-dev redis-server redis-tools gnuplot-nox
	iproute2 ethtool nftables procps time)

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
		meson setup "$dir" "$@"
	elif [ $# -gt 0 ]; then
		meson configure "$dir" "$@"
	fi
	ns_say "ninja -C $dir"
	ninja -C "$dir"
}
