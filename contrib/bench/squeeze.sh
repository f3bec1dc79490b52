#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# squeeze.sh - squeeze the whole machine with swap only on zswapfs: a program takes memory
# until MemAvailable is down to LEAVE MiB, then BEYOND MiB more (which only swap can hold), then
# checks every byte.  Reports whether anything hung, how long the daemon's reserve lasted
# once swapping began, and how often it ran dry.
#
#   squeeze.sh -L LEAVE_MIB [-B BEYOND_MIB] [-r RUNS] [-s SWAPSIZE] [-o OPTS] [-T SECONDS]
#              [-W SECONDS] [-Z ZSWAPFS] [-S SQUEEZE]
#
#   -L  MemAvailable to leave, MiB (required: no default can be safe on a shared machine)
#   -B  MiB to take once MemAvailable is down to LEAVE (default 1024)
#   -r  runs (default 1); each sets zswapfs up from nothing and tears it down
#   -s  swap file size (default 4G); -o more zswapfs options (size=... comes first)
#   -T  a run that takes longer than this many seconds hung (default 900)
#   -W  no progress from the program for this many seconds and no answer from the
#       daemon's stats within 5 s: hung (default 60)
# A hung run has its FUSE connection aborted through fusectl (the program then dies, its
# swapped pages lost), so that the machine comes back; it counts as a hang.
#
# WARNING: this takes the memory of the whole machine, whatever else runs on it: with a
# small LEAVE the OOM killer may end other programs.  On a shared machine develop with a
# large margin (-L 4096 -B 0), and run near-zero margins only when the machine is yours.
set -u

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=benchlib.sh
. "$here/benchlib.sh"
BENCH=squeeze
LEAVE='' BEYOND=1024 RUNS=1 SWAPSIZE=4G OPTS='' TIMEOUT_S=900 STALL_S=60
ZSWAPFS=$here/../../src/zswapfs
SQUEEZE=$here/squeeze

usage() {
	sed -n '4,23p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

while getopts L:B:r:s:o:T:W:Z:S:h opt; do
	case $opt in
	L) LEAVE=$OPTARG ;;
	B) BEYOND=$OPTARG ;;
	r) RUNS=$OPTARG ;;
	s) SWAPSIZE=$OPTARG ;;
	o) OPTS=$OPTARG ;;
	T) TIMEOUT_S=$OPTARG ;;
	W) STALL_S=$OPTARG ;;
	Z) ZSWAPFS=$OPTARG ;;
	S) SQUEEZE=$OPTARG ;;
	*) usage ;;
	esac
done
[ -n "$LEAVE" ] || usage
[ "$(id -u)" = 0 ] || { echo "squeeze: needs root" >&2; exit 2; }
[ -x "$ZSWAPFS" ] || { echo "squeeze: $ZSWAPFS not built" >&2; exit 2; }
[ -x "$SQUEEZE" ] || { echo "squeeze: $SQUEEZE missing: run make in $here" >&2; exit 2; }
bench_init
if [ "$(tail -n +2 /proc/swaps | wc -l)" != 0 ]; then
	log "other swap is active (see /proc/swaps): the squeeze must swap to zswapfs only"
	exit 2
fi

meminfo() { awk -v k="$1:" '$1 == k { print $2 }' /proc/meminfo; }
# a stats read that cannot hang the script: "key value ..." of the keys asked for
stats() {
	timeout -k 1 5 cat "$MNT/stats" 2>/dev/null |
		awk -v want=" $* " 'index(want, " " $1 " ") { printf "%s=%s ", $1, $2 }'
}

# abort the FUSE connection of MNT through fusectl (from mountinfo: never touches the mount)
fuse_abort() {
	local dev ctl=/sys/fs/fuse/connections
	dev=$(awk -v m="$MNT" '$5 == m { d = $3 } END { print d }' /proc/self/mountinfo)
	[ -n "$dev" ] || return 0
	mountpoint -q "$ctl" || mount -t fusectl fusectl "$ctl" 2>/dev/null
	echo 1 > "$ctl/${dev#*:}/abort" && log "aborted the FUSE connection of $MNT ($dev)"
}

sampler() {
	local t0 now s
	t0=$(date +%s%N)
	while :; do
		now=$(date +%s%N)
		s=$(stats reserve_bytes reserve_dry failed_writes mem_used_total)
		echo "t=$(( (now - t0) / 1000000 )) avail_kib=$(meminfo MemAvailable)" \
			"swapfree_kib=$(meminfo SwapFree) ${s:-stats=timeout}" \
			"stats_ms=$(( ($(date +%s%N) - now) / 1000000 ))"
		sleep 0.5
	done
}

# one run; prints its line, returns 0 ok, 1 failed, 3 hung
run_one() {
	local n=$1 pid rc=0 hung='' t0 elapsed last mtime swaptotal line
	start_fuse "$ZSWAPFS" "$SWAPSIZE" "$OPTS" ||
		{ log "zswapfs did not start: $(cat "$TMP/daemon.err")"; return 1; }
	LOOPDEV=$(losetup --find --show --direct-io=on "$MNT/swap") || { LOOPDEV=; return 1; }
	mkswap "$LOOPDEV" >/dev/null || return 1
	swapon --discard --priority 32767 "$LOOPDEV" || return 1
	SWAPDEV=$LOOPDEV
	swaptotal=$(meminfo SwapTotal)
	sampler > "$TMP/samples.$n" &
	SAMPLER=$!
	rm -f "$TMP/progress"
	t0=$(date +%s)
	"$SQUEEZE" -L "$LEAVE" -B "$BEYOND" -p "$TMP/progress" > "$TMP/out.$n" 2>&1 &
	pid=$!
	while kill -0 "$pid" 2>/dev/null; do
		sleep 1
		elapsed=$(( $(date +%s) - t0 ))
		mtime=$(stat -c %Y "$TMP/progress" 2>/dev/null || echo "$t0")
		if [ "$elapsed" -ge "$TIMEOUT_S" ]; then
			hung="no end after ${TIMEOUT_S} s"
		elif [ $(( $(date +%s) - mtime )) -ge "$STALL_S" ] &&
			! timeout -k 1 5 cat "$MNT/stats" >/dev/null 2>&1; then
			hung="no progress for ${STALL_S} s and stats unanswered"
		fi
		if [ -n "$hung" ]; then
			log "run $n hung: $hung"
			fuse_abort
			kill -KILL "$pid" 2>/dev/null
			break
		fi
	done
	wait "$pid" || rc=$?
	elapsed=$(( $(date +%s) - t0 ))
	last=$(stats reserve_dry failed_writes reserve_refills reserve_refill_max_us \
		reserve_peak_rate mem_used_max)
	kill "$SAMPLER"; wait "$SAMPLER" 2>/dev/null; SAMPLER=
	# swapping began at the first sample with swap in use; the reserve lasted until the
	# first sample that saw reserve_dry above 0
	line=$(awk -v total="$swaptotal" '
		function v(k,   i) { for (i = 1; i <= NF; i++) if (index($i, k "=") == 1)
			return substr($i, length(k) + 2); return "" }
		{ t = v("t") / 1000; free = v("swapfree_kib"); dry = v("reserve_dry")
		  res = v("reserve_bytes"); ms = v("stats_ms") + 0
		  if (ms > max_ms) max_ms = ms
		  if (v("stats") == "timeout") timeouts++
		  used = total - free; if (used > max_used) max_used = used
		  if (start == "" && used > 0) start = t
		  if (start != "" && res != "" && (min_res == "" || res + 0 < min_res))
			min_res = res + 0
		  if (start != "" && first_dry == "" && dry + 0 > 0) first_dry = t }
		END { printf "swap_peak_mib=%d reserve_lasted_s=%s reserve_min_mib=%s " \
			"stats_max_ms=%d stats_timeouts=%d", max_used / 1024,
			start == "" ? "no_swap" : first_dry == "" ? "never_dry" : first_dry - start,
			min_res == "" ? "-" : int(min_res / 1048576), max_ms,
			timeouts }' "$TMP/samples.$n")
	printf 'run %d %s exit=%d elapsed_s=%d %s %s %s\n' "$n" \
		"$( [ -n "$hung" ] && echo HUNG || { [ "$rc" = 0 ] && echo OK; } || echo FAILED)" \
		"$rc" "$elapsed" "$line" "$last" "$(tail -n 1 "$TMP/out.$n")"
	[ "$rc" = 137 ] && [ -z "$hung" ] && log "run $n: the program was killed (the OOM killer?)"
	teardown || log "teardown after run $n reported a problem"
	if [ -n "$hung" ]; then return 3; fi
	[ "$rc" = 0 ]
}

echo "# squeeze: leave=${LEAVE}MiB beyond=${BEYOND}MiB runs=$RUNS swap=$SWAPSIZE" \
	"opts=${OPTS:-none} MemTotal=$(( $(meminfo MemTotal) / 1024 ))MiB" \
	"MemAvailable=$(( $(meminfo MemAvailable) / 1024 ))MiB kernel=$(uname -r)"
hangs=0 fails=0
for r in $(seq "$RUNS"); do
	run_one "$r"
	case $? in
	0) ;;
	3) hangs=$((hangs + 1)) ;;
	*) fails=$((fails + 1)) ;;
	esac
done
echo "# $hangs hung, $fails failed otherwise, of $RUNS runs"
echo "{\"bench\":\"squeeze\",\"runs\":$RUNS,\"leave_mib\":$LEAVE,\"beyond_mib\":$BEYOND," \
	"\"hangs\":$hangs,\"failures\":$fails}" | sed 's/, "/,"/g'
[ "$hangs" = 0 ] && [ "$fails" = 0 ]
