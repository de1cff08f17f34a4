#!/usr/bin/env bash
# The log layout's store write (schema/FORMAT.md, Log layout) two ways, on
# one plain Redis on loopback, back to back:
#   pair:  SET <segment> <batch> PX <T>, then SPUBLISH <channel> <batch>,
#          pipelined (what the writers send),
#   fcall: one FCALL of a Redis function doing both (redis.call SET and
#          SPUBLISH), the batch sent once.
# Each run sends --batches batches of --records 48-byte records (plus the
# 48-byte header) through `redis-cli --pipe` (every command written at
# once, every reply waited for), FLUSHALL before each; no subscriber (the
# delivery to subscribers costs both ways the same). Prints one line per
# run and ends with
#   FUNCTION records=N pair=R fcall=R fcall/pair=X
# (R: batches/s, medians of --runs runs of each).
#
#   PORT=7797 scripts/bench-function.sh [--records 256] [--batches 20000]
#                                       [--runs 3]
set -euo pipefail
# shellcheck source=../deploy/lib.sh
. "$(dirname "$0")/../deploy/lib.sh"
cd "$NS_TOP"

port=${PORT:-7797}
records=256
batches=20000
runs=3
ns_options bench-function.sh --records=records --batches=batches \
	--runs=runs -- "$@"

work=$(mktemp -d)
cleanup() {
	rm -rf "$work"
	ns_store_stop
}
trap cleanup EXIT
ns_store_start "one plain Redis on 127.0.0.1:$port" \
	--plain --port "$port" --dir "$NS_TOP/deploy/run/bench-function-$port"

# The function: keys[1] the segment, args: the channel, the batch, PX.
redis-cli -p "$port" FUNCTION LOAD REPLACE "#!lua name=natsync_bench
redis.register_function('ns_segment', function(keys, args)
	redis.call('SET', keys[1], args[2], 'PX', args[3])
	return redis.call('SPUBLISH', args[1], args[2])
end)" >/dev/null

# RESP command streams: the same batch bytes under a new key each time.
python3 - "$work" "$records" "$batches" <<'PY'
import os, sys
work, records, batches = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
value = os.urandom(48 + 48 * records)
def cmd(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else a.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)
with open(os.path.join(work, "pair"), "wb") as p, \
     open(os.path.join(work, "fcall"), "wb") as f:
    for i in range(batches):
        key = "ns:l:{3560}:01020304:%x" % (i + 1)
        p.write(cmd("SET", key, value, "PX", "60000"))
        p.write(cmd("SPUBLISH", "ns:b:{3560}", value))
        f.write(cmd("FCALL", "ns_segment", "1", key, "ns:b:{3560}", value,
                    "60000"))
PY

run() {
	local t0 t1
	redis-cli -p "$port" FLUSHALL >/dev/null
	t0=$(date +%s.%N)
	redis-cli -p "$port" --pipe <"$work/$1" >"$work/$1.out"
	t1=$(date +%s.%N)
	grep -q 'errors: 0,' "$work/$1.out" || {
		cat "$work/$1.out" >&2
		exit 1
	}
	awk -v n="$batches" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f\n", n / (b - a) }'
}

pair=()
fcall=()
for ((i = 0; i < runs; i++)); do
	pair+=("$(run pair)")
	fcall+=("$(run fcall)")
	echo "RUN records=$records batches=$batches pair=${pair[-1]} fcall=${fcall[-1]}"
done
p=$(printf '%s\n' "${pair[@]}" | ns_median)
f=$(printf '%s\n' "${fcall[@]}" | ns_median)
awk -v r="$records" -v p="$p" -v f="$f" 'BEGIN {
	printf "FUNCTION records=%d pair=%d fcall=%d fcall/pair=%.2f\n", r, p, f, f / p
}'
