#!/usr/bin/env bash
# Sweep the writers' settings against a local Redis and plot the result:
# throughput (flat out) and record -> standby lag p99 (at half of that
# rate) against batch size (16..1024), pipeline depth (1..32) and writer
# count (1..4), each point measured --repeat times (the median is drawn),
# standby attached, the store emptied before each run. Writes
#   deploy/run/bench-plot/bench.png and deploy/run/bench-plot/bench.csv
# prints each point's POINT line and ends with one BEST line per swept
# parameter (the highest median rate).
#
#   PORT=7610 scripts/bench-plot.sh [--sweep batch|inflight|workers|all]
#                                  [--events 300000] [--flows 100000]
#                                  [--repeat 3] [--masters 1]
# --masters 1 is one plain server; more is a cluster of that many masters.
# BUILD=dir uses (and builds) that meson build directory.
set -euo pipefail
# shellcheck source=../deploy/lib.sh
. "$(dirname "$0")/../deploy/lib.sh"
cd "$NS_TOP"

port=${PORT:-7610}
build=${BUILD:-build-bench-plot}
sweep=all
events=300000
flows=100000
masters=1
repeat=3
ns_options bench-plot.sh --sweep=sweep --events=events --flows=flows \
	--masters=masters --repeat=repeat -- "$@"

ns_build_program bench-plot.sh "$build" bench/natsync-bench
bench=$program

out="$NS_TOP/deploy/run/bench-plot"
# Absolute: redis-server resolves its log and pid files from its own dir.
run="$out/redis-$port"
if [ "$masters" -gt 1 ]; then
	store_args=(--masters "$masters" --port "$port" --dir "$run")
	what="a cluster of $masters masters on 127.0.0.1:$port.."
else
	store_args=(--plain --port "$port" --dir "$run")
	what="one plain Redis on 127.0.0.1:$port"
fi
# One seed is enough: natsync asks it for the cluster's masters.
seeds="127.0.0.1:$port"
trap ns_store_stop EXIT

mkdir -p "$out"
rm -f "$out/bench.csv" "$out/bench.png" "$out/bench.out"
ns_store_start "$what" "${store_args[@]}"

ns_say "natsync-bench --store $seeds --sweep $sweep --repeat $repeat --events $events --flows $flows --flush --plot $out/bench.png --csv $out/bench.csv"
# Every run's RESULT line goes to bench.out; a failed run does not stop
# the sweep, but makes this script fail at the end.
rc=0
"$bench" --store "$seeds" --sweep "$sweep" --repeat "$repeat" \
	--events "$events" --flows "$flows" --flush --plot "$out/bench.png" \
	--csv "$out/bench.csv" >"$out/bench.out" || rc=$?
points=$(grep '^POINT ' "$out/bench.out" || true)

[ -s "$out/bench.png" ] || { echo "bench-plot.sh: no plot was written" >&2; exit 1; }
printf '%s\n' "$points"
echo "plot: $out/bench.png"
echo "rows: $out/bench.csv, RESULT lines: $out/bench.out"
# POINT sweep=P value=V measurements=N rate=R lag_p99_us=N
printf '%s\n' "$points" | awk '
	{ for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] } }
	!(f["sweep"] in best) || f["rate"] + 0 > best[f["sweep"]] {
		best[f["sweep"]] = f["rate"] + 0; val[f["sweep"]] = f["value"]
		lag[f["sweep"]] = f["lag_p99_us"]
	}
	END { for (s in best) printf "BEST sweep=%s value=%s rate=%s lag_p99_us=%s\n", s, val[s], best[s], lag[s] }' | sort
if [ "$rc" -ne 0 ]; then
	echo "bench-plot.sh: natsync-bench failed (status $rc); see $out/bench.out" >&2
	exit "$rc"
fi
