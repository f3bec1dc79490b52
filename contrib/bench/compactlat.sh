#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# compactlat.sh - does compaction hold up requests?  Fills a zswapfs mount with CORPUS,
# punches out three pages in four (a fragmented arena), then reads 4 KiB pages one at a
# time with fio for RUNTIME seconds; in every other run `compact` is written to the
# control file two seconds in, so compaction runs while the reads go on.  Prints fio's
# completion latency (mean, p99, p99.9, max), the daemon's own longest read, and what
# compaction gave back, run by run, alternating without/with.
#
#   compactlat.sh -c CORPUS [-r ROUNDS] [-t RUNTIME] [-Z ZSWAPFS]
set -u

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=benchlib.sh
. "$here/benchlib.sh"
BENCH=compactlat
CORPUS='' ROUNDS=2 RUNTIME=6 ZSWAPFS=$here/../../build/src/zswapfs

while getopts c:r:t:Z:h opt; do
	case $opt in
	c) CORPUS=$OPTARG ;;
	r) ROUNDS=$OPTARG ;;
	t) RUNTIME=$OPTARG ;;
	Z) ZSWAPFS=$OPTARG ;;
	*) sed -n '4,11p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
	esac
done
[ -r "$CORPUS" ] || { echo "compactlat: -c CORPUS needed" >&2; exit 2; }
[ -x "$ZSWAPFS" ] || { echo "compactlat: $ZSWAPFS not built" >&2; exit 2; }
command -v fio >/dev/null || { echo "compactlat: needs fio" >&2; exit 2; }
bench_init

stat_of() { awk -v k="$1" '$1 == k { print $2 }' "$MNT/stats"; }

# one run; $1 = 1 to compact during the reads
run_one() {
	local compact=$1 bytes pages used0 cpid
	bytes=$(stat -c %s "$CORPUS")
	pages=$((bytes / 4096))
	start_fuse "$ZSWAPFS" "$(( (bytes >> 20) + 16 ))M" \
		"compact.threshold=0,recompress.enabled=false" ||
		{ log "daemon did not start: $(cat "$TMP/daemon.err")"; return 1; }
	dd if="$CORPUS" of="$MNT/swap" bs=1M oflag=direct status=none || return 1
	/usr/bin/python3 - "$MNT/swap" "$pages" <<'PY' || return 1
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
fd = os.open(sys.argv[1], os.O_RDWR)
KEEP_SIZE, PUNCH_HOLE = 1, 2
for i in range(int(sys.argv[2])):
    if i % 4 and libc.fallocate(fd, KEEP_SIZE | PUNCH_HOLE, i * 4096, 4096):
        sys.exit("fallocate: %s" % os.strerror(ctypes.get_errno()))
PY
	used0=$(stat_of mem_used_total)
	( sleep 2; [ "$compact" = 1 ] && echo compact > "$MNT/control" ) &
	cpid=$!
	fio --name=reads --filename="$MNT/swap" --rw=randread --bs=4k --direct=1 --ioengine=psync \
		--size="$bytes" --runtime="$RUNTIME" --time_based --output-format=json \
		> "$TMP/fio.json" 2>/dev/null || { wait "$cpid"; return 1; }
	wait "$cpid"
	/usr/bin/python3 - "$TMP/fio.json" "$compact" "$used0" "$(stat_of mem_used_total)" \
		"$(stat_of pages_compacted)" "$(stat_of read_latency_max_ns)" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["jobs"][0]["read"]
c, p = r["clat_ns"], r["clat_ns"]["percentile"]
print("compact=%s iops=%d clat_mean_us=%.1f p99_us=%.0f p99.9_us=%.0f max_us=%.0f "
      "daemon_read_max_us=%d mem_used_total=%s->%s pages_compacted=%s"
      % (sys.argv[2], r["iops"], c["mean"] / 1e3, p["99.000000"] / 1e3, p["99.900000"] / 1e3,
         c["max"] / 1e3, int(sys.argv[6]) // 1000, sys.argv[3], sys.argv[4], sys.argv[5]))
PY
	teardown
}

for r in $(seq "$ROUNDS"); do
	for compact in 0 1; do
		printf 'round %d ' "$r"
		run_one "$compact" || { teardown; log "run failed"; exit 1; }
	done
done
