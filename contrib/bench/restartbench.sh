#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# restartbench.sh - what restart safety costs (issue 11).
#
#   restartbench.sh recovery [-s MIB,MIB...] [-k KILLS] [-b ram,backing] [-Z ZSWAPFS]
#   restartbench.sh swap [-r ROUNDS] [-w WS_MIB] [-l LIMIT_MIB] [-p PASSES]
#                        [-B BASELINE_ZSWAPFS] [-Z ZSWAPFS] [-M MEMHOG]
#
# recovery: for each size, a mount with that many MiB of realistic pages stored
#   (memhog --dump), a reader (fio, 4 KiB random reads at queue depth 1, O_DIRECT)
#   running all along, and KILLS times (default 5) a SIGKILL of the worker, one a
#   second; each time the keeper's figure worker_recovery_last_us: from the worker's
#   death (the keeper's waitpid) to the first reply of the next worker, which with a
#   reader waiting is the first request served.  Prints the median and the range.
#   -b: the pages in RAM (ram, the default), and/or written back (backing: a backing
#   file in a private directory under BACKDIR, default /var/tmp, mem_limit a quarter of
#   the size and `writeback all` before the reader starts, so that it reads from the
#   file); several, interleaved per kill: ram,backing.
# swap: the swap workload (memhog in a memory cgroup: WS_MIB, default 320, in a LIMIT_MIB
#   cgroup, default 96, PASSES passes, default 3, every byte checked) behind
#   losetup --direct-io=on + swapon, timed, in interleaved rounds (default 5) of:
#     zswapfs         no kills
#     zswapfs-kill1s  SIGKILL of the worker every second while it runs
#     baseline        -B: another zswapfs binary (say, one without the keeper), no kills
#   and the medians; each kill run logs its number of kills (worker_restarts) and
#   memhog's bad pages.  A round whose workload fails (exit status not 0, or a
#   process of the cgroup OOM-killed) is reported and counts as failed.
# Needs root, a memory cgroup, no other swap active, fio.
set -u

here=$(cd "$(dirname "$0")" && pwd)
BENCH=restartbench
. "$here/benchlib.sh"

ZSWAPFS=$here/../../src/zswapfs
MEMHOG=$here/../../tests/memhog
BASELINE=
SIZES=64,1024
KILLS=5
MODES=ram
BACKDIR=${BACKDIR:-/var/tmp}
ROUNDS=5
WS=320
LIMIT=96
PASSES=3
PIN=
MNT= DPID= SWAPDEV= LOOPDEV= CG= SAMPLER= BACKFILE= BACKPRIV= ZRAM_USED= TMP=
ZRAM=/sys/block/zram0

mode=${1:-}
[ -n "$mode" ] && shift
while getopts s:k:b:Z:r:w:l:p:B:M: o; do
	case $o in
	s) SIZES=$OPTARG ;;
	b) MODES=$OPTARG ;;
	k) KILLS=$OPTARG ;;
	Z) ZSWAPFS=$OPTARG ;;
	r) ROUNDS=$OPTARG ;;
	w) WS=$OPTARG ;;
	l) LIMIT=$OPTARG ;;
	p) PASSES=$OPTARG ;;
	B) BASELINE=$OPTARG ;;
	M) MEMHOG=$OPTARG ;;
	*) exit 2 ;;
	esac
done

worker() { pgrep -P "$DPID" -x zswapfs; }
# the median of the numbers in $1, leaving out failed runs
med() { echo "$1" | tr ' ' '\n' | grep -v failed | median; }
stat_of() { awk -v k="$2" '$1 == k { print $2 }' "$1/stats"; }

# recovery_one MIB MODE KILLS: one mount; prints the recovery times, us
recovery_one() {
	local mib=$1 mode=$2 kills=$3 size opts i r rs w
	size=$((mib * 2 > 256 ? mib * 2 : 256))
	opts="recompress.enabled=false"
	if [ "$mode" = backing ]; then
		BACKPRIV=$(mktemp -d "$BACKDIR/restartbench.XXXXXX") || exit 1
		BACKFILE=$BACKPRIV/backing
		opts="$opts,mem_limit=$(((mib / 4 > 16 ? mib / 4 : 16)))M"
		opts="$opts,writeback.backing_file=$BACKFILE,writeback.max_size=$((size * 2))M"
	fi
	start_fuse "$ZSWAPFS" "${size}M" "$opts" || { cat "$TMP/daemon.err" >&2; exit 1; }
	dd if="$TMP/pages" of="$MNT/swap" bs=1M oflag=direct conv=notrunc status=none
	if [ "$mode" = backing ]; then
		echo "writeback all" >"$MNT/control"
		while [ "$(stat_of "$MNT" writeback_pending)" != 0 ]; do sleep 0.2; done
	fi
	fio --name=reader --filename="$MNT/swap" --direct=1 --rw=randread --bs=4k \
		--size="${mib}M" --time_based --runtime=600 --ioengine=psync \
		--output=/dev/null >/dev/null 2>&1 &
	SAMPLER=$!
	rs=
	for ((i = 0; i < kills; i++)); do
		sleep 1
		w=$(worker) && kill -KILL "$w"
		sleep 1
		r=$(stat_of "$MNT" worker_recovery_last_us)
		rs="$rs $r"
	done
	log "stored ${mib} MiB, $mode ($(stat_of "$MNT" pages_stored) pages," \
		"$(stat_of "$MNT" bd_count) on the backing file," \
		"mem_used_total $(($(stat_of "$MNT" mem_used_total) >> 20)) MiB," \
		"failed_reads $(stat_of "$MNT" failed_reads)): kills $kills"
	teardown >&2 || exit 1
	echo "$rs"
}

recovery() {
	local mib mode i rs
	declare -A all
	command -v fio >/dev/null || { log "fio not found"; exit 1; }
	for mib in ${SIZES//,/ }; do
		"$MEMHOG" --size "$mib" --seed 1 --dump "$TMP/pages" || exit 1
		# Interleaved: one kill per mount and mode, KILLS rounds.
		for ((i = 0; i < KILLS; i++)); do
			for mode in ${MODES//,/ }; do
				rs=$(recovery_one "$mib" "$mode" 1)
				all[$mode]="${all[$mode]:-}$rs"
			done
		done
		rm -f "$TMP/pages"
		for mode in ${MODES//,/ }; do
			log "stored ${mib} MiB, $mode: death -> first request served, us:" \
				"$(echo "${all[$mode]}" | spread)  [${all[$mode]} ]"
			all[$mode]=
		done
	done
}

# one swap run of binary $1 (kills: $2 = 1); prints seconds, or "failed"
swap_run() {
	local t0 t1 rc killer=
	start_fuse "$1" 1G || { cat "$TMP/daemon.err" >&2; echo failed; return; }
	LOOPDEV=$(losetup --find --show --direct-io=on "$MNT/swap") || { echo failed; return; }
	mkswap "$LOOPDEV" >/dev/null && swapon --discard --priority 32767 "$LOOPDEV" &&
		SWAPDEV=$LOOPDEV
	memcg_make "$BENCH.$$" "$LIMIT" || { echo failed; return; }
	if [ "$2" = 1 ]; then
		( while sleep 1; do w=$(worker) && kill -KILL "$w"; done ) &
		killer=$!
	fi
	t0=$(date +%s.%N)
	sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' sh "$CG" \
		"$MEMHOG" --size "$WS" --passes "$PASSES" --seed $$ >"$TMP/hog.out" 2>&1
	rc=$?
	t1=$(date +%s.%N)
	[ -n "$killer" ] && { kill -KILL "$killer"; wait "$killer" 2>/dev/null; }
	if [ "$2" = 1 ]; then
		# every kill is a restart: the count, from the worker that serves now
		log "kills (worker_restarts): $(awk '$1 == "worker_restarts" { print $2 }' \
			"$MNT/stats"), memhog: $(grep -o 'bad_pages=[0-9]*' "$TMP/hog.out")"
	fi
	if [ "$rc" != 0 ] || [ "$(memcg_oom_kills)" != 0 ]; then
		log "workload failed (memhog $rc): $(tail -n 2 "$TMP/hog.out")"
		echo failed
	else
		awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f\n", b - a }'
	fi
	teardown >&2 || exit 1
}

swap() {
	local r d t devs="zswapfs zswapfs-kill1s"
	declare -A times
	memcg_init || { log "$CG_WHY"; exit 1; }
	swap_active && { log "another swap device is active: turn it off first"; exit 1; }
	[ -n "$BASELINE" ] && devs="$devs baseline"
	for ((r = 1; r <= ROUNDS; r++)); do
		for d in $devs; do
			case $d in
			zswapfs) t=$(swap_run "$ZSWAPFS" 0) ;;
			zswapfs-kill1s) t=$(swap_run "$ZSWAPFS" 1) ;;
			baseline) t=$(swap_run "$BASELINE" 0) ;;
			esac
			log "round $r $d: $t s"
			times[$d]="${times[$d]:-} $t"
		done
	done
	for d in $devs; do
		log "$d: median $(med "${times[$d]}") s" \
			"(${times[$d]} )"
	done
	if [ -n "$BASELINE" ]; then
		log "zswapfs/baseline: $(ratio "$(med "${times[zswapfs]}")" "$(med "${times[baseline]}")")"
	fi
	log "zswapfs-kill1s/zswapfs: $(ratio "$(med "${times[zswapfs-kill1s]}")" \
		"$(med "${times[zswapfs]}")")"
}

bench_init
case $mode in
recovery) recovery ;;
swap) swap ;;
*) echo "usage: restartbench.sh recovery|swap [options] (see the head of the script)" >&2
   exit 2 ;;
esac
