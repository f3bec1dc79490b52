#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# squeeze.sh - squeeze the whole machine with swap only on zswapfs (or kernel zram): a program
# takes memory until MemAvailable is down to LEAVE MiB, then BEYOND MiB more (which only swap can
# hold), then checks every byte.  Reports whether anything hung, how long the daemon's reserve
# lasted once swapping began, and how often it ran dry.
#
#   squeeze.sh -L LEAVE_MIB [-B BEYOND_MIB] [-r RUNS] [-s SWAPSIZE] [-o OPTS] [-T SECONDS]
#              [-W SECONDS] [-Z ZSWAPFS[,ZSWAPFS...]] [-D DEVICES] [-O DIR] [-S SQUEEZE]
#
#   -L  MemAvailable to leave, MiB (required: no default can be safe on a shared machine)
#   -B  MiB to take once MemAvailable is down to LEAVE (default 1024)
#   -r  runs (default 1); each sets the swap up from nothing and tears it down
#   -s  swap size (default 4G); -o more zswapfs options (size=... comes first)
#   -T  a run that takes longer than this many seconds hung (default 900)
#   -W  no progress from the program for this many seconds and no answer from the
#       daemon's stats within 5 s: hung (default 60)
#   -Z  the daemon; several, comma separated, take turns within each run (A/B interleaved)
#   -D  devices, comma separated, in turn within each run: zswapfs (each -Z), zswapfs-nowbt
#       (the same with the loop device's writeback throttling off: wbt_lat_usec 0), zram
#       (kernel zram0, lz4; refused if zram0 is in use; reset afterwards) (default zswapfs)
#   -O  keep each run's samples (samples.N.DEV) and the daemon's thread states (threads.N.DEV)
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
LEAVE='' BEYOND=1024 RUNS=1 SWAPSIZE=4G OPTS='' TIMEOUT_S=900 STALL_S=60 DEVICES=zswapfs
OUTDIR='' ZSWAPFS=$here/../../src/zswapfs
SQUEEZE=$here/squeeze

usage() {
	sed -n '4,28p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

while getopts L:B:r:s:o:T:W:Z:D:O:S:h opt; do
	case $opt in
	L) LEAVE=$OPTARG ;;
	B) BEYOND=$OPTARG ;;
	r) RUNS=$OPTARG ;;
	s) SWAPSIZE=$OPTARG ;;
	o) OPTS=$OPTARG ;;
	T) TIMEOUT_S=$OPTARG ;;
	W) STALL_S=$OPTARG ;;
	Z) ZSWAPFS=$OPTARG ;;
	D) DEVICES=$OPTARG ;;
	O) OUTDIR=$OPTARG ;;
	S) SQUEEZE=$OPTARG ;;
	*) usage ;;
	esac
done
[ -n "$LEAVE" ] || usage
[ "$(id -u)" = 0 ] || { echo "squeeze: needs root" >&2; exit 2; }
IFS=, read -r -a DAEMONS <<< "$ZSWAPFS"
IFS=, read -r -a DEVLIST <<< "$DEVICES"
TURNS=()
for d in "${DEVLIST[@]}"; do
	case $d in
	zswapfs|zswapfs-nowbt)
		for z in "${DAEMONS[@]}"; do
			[ -x "$z" ] || { echo "squeeze: $z not built" >&2; exit 2; }
			TURNS+=("$d:$z")
		done ;;
	zram) TURNS+=(zram) ;;
	*) echo "squeeze: unknown device $d" >&2; exit 2 ;;
	esac
done
[ -z "$OUTDIR" ] || mkdir -p "$OUTDIR" || exit 2
[ -x "$SQUEEZE" ] || { echo "squeeze: $SQUEEZE missing: run make in $here" >&2; exit 2; }
bench_init
PROG='' TSAMP=''
# the program and the thread sampler first: teardown cannot swapoff while the program holds
# pages in swap, and must not stop the daemon under it
# shellcheck disable=SC2154 # p is the trap's own loop variable
trap 'log interrupted; for p in $PROG $TSAMP; do kill -KILL "$p" 2>/dev/null; done; wait; exit 130' \
	INT TERM HUP
if [ "$(tail -n +2 /proc/swaps | wc -l)" != 0 ]; then
	log "other swap is active (see /proc/swaps): the squeeze must swap to zswapfs only"
	exit 2
fi

meminfo() { awk -v k="$1:" '$1 == k { print $2 }' /proc/meminfo; }
# a stats read that cannot hang the script: "key value ..." of the keys asked for
stats() {
	[ -n "$MNT" ] || return 0
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

# The samplers fork nothing but `true` (fork_ms: how long a fork and exec of a tiny program
# took, i.e. what any shell command pays under this pressure): bash builtins read /proc and
# the stats file, so that stats_ms is the daemon's answer (and the kernel's FUSE round
# trips), not the shell's own page faults in fork and exec.  They never time out: a stats
# read that hangs shows as a gap in the samples (the watchdog, which does time out, decides
# whether the run hung).  A sleep is a read with a timeout on a FIFO nobody writes.
nap() { read -r -t "$1" -u "$NAPFD" _ 2>/dev/null; true; }
now_ms() { local t=${EPOCHREALTIME/./}; echo $(( t / 1000 )); }

sampler() {
	local t0 a b c k v line keys=" reserve_bytes reserve_dry failed_writes mem_used_total \
reserve_target_bytes reserve_pressure reserve_refill_wait_us "
	local avail free text
	t0=$(now_ms)
	while :; do
		a=$(now_ms)
		line=''
		if [ -n "$MNT" ]; then
			# the whole file in a few reads: each is a FUSE round trip,
			# queued behind the swap writes
			text=''
			read -r -d '' -N 1048576 text < "$MNT/stats"
			while read -r k v; do
				[[ $keys == *" $k "* ]] && line+="$k=$v "
			done <<< "$text"
		elif [ -r "$ZRAM/mm_stat" ]; then
			read -r _ _ v _ < "$ZRAM/mm_stat"
			line="mem_used_total=$v "
		fi
		b=$(now_ms)
		while read -r k v _; do
			case $k in
			MemAvailable:) avail=$v ;;
			SwapFree:) free=$v ;;
			esac
		done < /proc/meminfo
		/bin/true
		c=$(now_ms)
		echo "t=$(( a - t0 )) avail_kib=$avail swapfree_kib=$free ${line:-stats=none }" \
			"stats_ms=$(( b - a )) fork_ms=$(( c - b ))"
		nap 0.5
	done
}

# Every second: each daemon thread's name, state and wchan; the kernel stack of any in D
# state; and the state of the sampler (whose stats read may be what waits).
thread_sampler() {
	local t0 t task comm st wchan stack spid=$1
	t0=$(now_ms)
	while :; do
		t=$(( $(now_ms) - t0 ))
		for task in /proc/"$DPID"/task/*; do
			read -r comm < "$task/comm" 2>/dev/null || continue
			read -r _ _ st _ < "$task/stat" 2>/dev/null
			read -r wchan < "$task/wchan" 2>/dev/null
			echo "t=$t tid=${task##*/} comm=$comm state=$st wchan=${wchan:-0}"
			if [ "$st" = D ]; then
				read -r -d '' stack < "$task/stack" 2>/dev/null
				echo "${stack//$'\n'/ | }"
			fi
		done
		if [ -n "$spid" ]; then
			read -r _ _ st _ < /proc/"$spid"/stat 2>/dev/null
			read -r wchan < /proc/"$spid"/wchan 2>/dev/null
			echo "t=$t sampler state=$st wchan=${wchan:-0}"
		fi
		nap 1
	done
}

# set up swap on device $1 (zswapfs:BINARY or zram); sets the state teardown undoes
swap_up() {
	case $1 in
	zswapfs*:*)
		start_fuse "${1#*:}" "$SWAPSIZE" "$OPTS" ||
			{ log "zswapfs did not start: $(cat "$TMP/daemon.err")"; return 1; }
		LOOPDEV=$(losetup --find --show --direct-io=on "$MNT/swap") ||
			{ LOOPDEV=; return 1; }
		if [ "${1%%:*}" = zswapfs-nowbt ]; then
			echo 0 > "/sys/block/${LOOPDEV#/dev/}/queue/wbt_lat_usec" || return 1
		fi
		mkswap "$LOOPDEV" >/dev/null || return 1
		swapon --discard --priority 32767 "$LOOPDEV" || return 1
		SWAPDEV=$LOOPDEV ;;
	zram)
		if zram_busy; then
			log "zram0 is in use by someone else; refusing"
			return 1
		fi
		ZRAM_USED=1
		echo lz4 > "$ZRAM/comp_algorithm" || return 1
		echo "$SWAPSIZE" > "$ZRAM/disksize" || return 1
		mkswap /dev/zram0 > /dev/null || return 1
		swapon --discard --priority 32767 /dev/zram0 || return 1
		SWAPDEV=/dev/zram0 ;;
	esac
}

# one run on device $2; prints its line, returns 0 ok, 1 failed, 3 hung
run_one() {
	local n=$1 dev=$2 pid rc=0 hung='' t0 elapsed last mtime swaptotal line tag tsamp=''
	tag=${dev%%:*}
	[ "$tag" != zram ] && [ "${#DAEMONS[@]}" -gt 1 ] && tag=$tag:$(basename "${dev#*:}")
	swap_up "$dev" || { teardown; return 1; }
	swaptotal=$(meminfo SwapTotal)
	sampler > "$TMP/samples.$n" &
	SAMPLER=$!
	if [ -n "$DPID" ]; then
		thread_sampler "$SAMPLER" > "$TMP/threads.$n" &
		tsamp=$! TSAMP=$!
	fi
	rm -f "$TMP/progress"
	t0=$(date +%s)
	"$SQUEEZE" -L "$LEAVE" -B "$BEYOND" -p "$TMP/progress" > "$TMP/out.$n" 2>&1 &
	pid=$! PROG=$!
	while kill -0 "$pid" 2>/dev/null; do
		sleep 1
		elapsed=$(( $(date +%s) - t0 ))
		mtime=$(stat -c %Y "$TMP/progress" 2>/dev/null || echo "$t0")
		if [ "$elapsed" -ge "$TIMEOUT_S" ]; then
			hung="no end after ${TIMEOUT_S} s"
		elif [ $(( $(date +%s) - mtime )) -ge "$STALL_S" ] && [ -n "$MNT" ] &&
			! timeout -k 1 5 cat "$MNT/stats" >/dev/null 2>&1; then
			hung="no progress for ${STALL_S} s and stats unanswered"
		fi
		if [ -n "$hung" ]; then
			log "run $n ($tag) hung: $hung"
			[ -n "$MNT" ] && fuse_abort
			kill -KILL "$pid" 2>/dev/null
			break
		fi
	done
	wait "$pid" || rc=$?
	PROG=''
	elapsed=$(( $(date +%s) - t0 ))
	last=$(stats reserve_dry failed_writes reserve_refills reserve_refill_max_us \
		reserve_peak_rate mem_used_max reserve_pressure_wakeups)
	[ -n "$tsamp" ] && { kill "$tsamp"; wait "$tsamp" 2>/dev/null; TSAMP=''; }
	kill "$SAMPLER"; wait "$SAMPLER" 2>/dev/null; SAMPLER=
	# swapping began at the first sample with more than 64 MiB in swap (a few pages go
	# early); the reserve lasted until the first sample that saw reserve_dry above 0
	line=$(awk -v total="$swaptotal" '
		function v(k,   i) { for (i = 1; i <= NF; i++) if (index($i, k "=") == 1)
			return substr($i, length(k) + 2); return "" }
		{ t = v("t") / 1000; free = v("swapfree_kib"); dry = v("reserve_dry")
		  res = v("reserve_bytes"); ms = v("stats_ms") + 0; fk = v("fork_ms") + 0
		  tg = v("reserve_target_bytes")
		  if (gap != "" && t - last_t > max_gap) max_gap = t - last_t
		  last_t = t; gap = 1
		  if (ms > max_ms) max_ms = ms
		  if (fk > max_fk) max_fk = fk
		  used = total - free; if (used > max_used) max_used = used
		  if (start == "" && used > 65536) { start = t; res_at_start = res; tg_at_start = tg }
		  if (start != "" && res != "" && (min_res == "" || res + 0 < min_res))
			min_res = res + 0
		  if (start != "" && first_dry == "" && dry + 0 > 0) first_dry = t }
		END { printf "swap_peak_mib=%d reserve_lasted_s=%s reserve_at_swap_mib=%s " \
			"target_at_swap_mib=%s reserve_min_mib=%s stats_max_ms=%d fork_max_ms=%d " \
			"sample_gap_max_s=%.1f", max_used / 1024,
			start == "" ? "no_swap" : first_dry == "" ? "never_dry" : first_dry - start,
			res_at_start == "" ? "-" : int(res_at_start / 1048576),
			tg_at_start == "" ? "-" : int(tg_at_start / 1048576),
			min_res == "" ? "-" : int(min_res / 1048576), max_ms, max_fk, max_gap }' \
		"$TMP/samples.$n")
	printf 'run %d %s %s exit=%d elapsed_s=%d %s %s %s\n' "$n" "$tag" \
		"$( [ -n "$hung" ] && echo HUNG || { [ "$rc" = 0 ] && echo OK; } || echo FAILED)" \
		"$rc" "$elapsed" "$line" "$last" "$(tail -n 1 "$TMP/out.$n")"
	[ "$rc" = 137 ] && [ -z "$hung" ] && log "run $n ($tag): the program was killed (the OOM killer?)"
	if [ -n "$OUTDIR" ]; then
		cp "$TMP/samples.$n" "$OUTDIR/samples.$n.${tag//[:\/]/_}"
		[ -n "$tsamp" ] && cp "$TMP/threads.$n" "$OUTDIR/threads.$n.${tag//[:\/]/_}"
	fi
	teardown || log "teardown after run $n reported a problem"
	if [ -n "$hung" ]; then return 3; fi
	[ "$rc" = 0 ]
}

mkfifo "$TMP/nap" && exec {NAPFD}<> "$TMP/nap" || exit 2
echo "# squeeze: leave=${LEAVE}MiB beyond=${BEYOND}MiB runs=$RUNS swap=$SWAPSIZE" \
	"devices=${TURNS[*]} opts=${OPTS:-none} MemTotal=$(( $(meminfo MemTotal) / 1024 ))MiB" \
	"MemAvailable=$(( $(meminfo MemAvailable) / 1024 ))MiB kernel=$(uname -r)"
hangs=0 fails=0 total=0
for r in $(seq "$RUNS"); do
	for dev in "${TURNS[@]}"; do
		total=$((total + 1))
		run_one "$r" "$dev"
		case $? in
		0) ;;
		3) hangs=$((hangs + 1)) ;;
		*) fails=$((fails + 1)) ;;
		esac
	done
done
echo "# $hangs hung, $fails failed otherwise, of $total runs"
echo "{\"bench\":\"squeeze\",\"runs\":$total,\"leave_mib\":$LEAVE,\"beyond_mib\":$BEYOND," \
	"\"hangs\":$hangs,\"failures\":$fails}" | sed 's/, "/,"/g'
[ "$hangs" = 0 ] && [ "$fails" = 0 ]
