#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# swapbench.sh - time a real swap workload through kernel zram, zswapfs and the no-op FUSE
# baseline, interleaved (A B C A B C ...), each device set up fresh for every run.
#
#   swapbench.sh -c CORPUS [-r ROUNDS] [-d DEVICES] [-w WS_MIB] [-l LIMIT_MIB] [-s SWAPSIZE]
#                [-p PASSES] [-a ALGORITHM] [-m BUDGET_MIB] [-b DIR] [-T SECONDS] [-S] [-V] [-P]
#                [-Z ZSWAPFS] [-N NOOP_FUSE]
#
# DEVICES (comma separated, default zram,zswapfs,noop):
#   zram           kernel zram, comp_algorithm ALGORITHM, swapon
#   zswapfs, noop  FUSE file behind `losetup --direct-io=on`, mkswap, swapon --discard
#   X-buf          the same FUSE file behind a buffered loop (no --direct-io)
#   X-4k           --direct-io=on plus --sector-size 4096
#   noop-mt        noop_fuse with libfuse's multi-threaded loop (loopmode=mt)
#   zswapfs-t2     zswapfs with two request threads (-o threads=2)
#   X-ur           FUSE over io_uring: the fuse module's enable_uring set to Y for the
#                  mount (put back afterwards); the plain devices run with it N
#   zswapfs-bpN    zswapfs busy-polling N microseconds (-o busy_poll_us=N; bp0: none)
#   zswapfs-norc   zswapfs without the idle recompression worker (recompress.enabled=false)
#   zswapfs-nodict zswapfs without dictionary training (dict_train=off; plain zswapfs
#                  trains one from its pages once 2048 are stored)
#   zswapfs-rc     the worker busy during the run: recompress.enabled=true,
#                  recompress.idle_age=1, recompress.rate=0 (pages untouched for 1 s are
#                  recompressed with zstd, no rate limit); plain zswapfs: daemon defaults
#   zram-m         zram with mem_limit = BUDGET_MIB (-m, default 64): the same memory budget as
#   zswapfs-wb     zswapfs with mem_limit = BUDGET_MIB and a backing file in DIR (-b, default
#                  /var/tmp), writeback at the default watermarks.  Each run is killed after
#                  -T SECONDS (default 900) and then counts as failed: a device that runs out
#                  of memory fails the workload or makes it thrash.
#   zswapfs-wbp    zswapfs-wb with writeback.promote=true (reads bring pages back to RAM)
#   zswapfs-wbt2   zswapfs-wb with two request threads (a disk read blocks only one)
#   disk           a plain swap file of SWAPSIZE in DIR: what swapping to the SSD costs
# Every run reports swapped_out_mib (pswpout) and disk_mib_written (sectors written to the
# disk holding DIR, whoever wrote them: keep the machine quiet).
# Pages are visited in a fixed random order; -S: in address order (which lets the loop
# devices' swap readahead help them, while zram, a synchronous device, gets none).
# Needs root, a v1 memory cgroup at /sys/fs/cgroup/memory, and no other swap active.
set -u

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=benchlib.sh
. "$here/benchlib.sh"
BENCH=swapbench
CORPUS=
ROUNDS=5
DEVICES=zram,zswapfs,noop
WS_MIB=512
LIMIT_MIB=192
SWAPSIZE=1G
PASSES=1
ALG=lz4
BUDGET_MIB=64
BACKDIR=/var/tmp
TIMEOUT_S=900
WFLAGS=-R
PIN=
ZSWAPFS=$here/../../src/zswapfs
NOOP=$here/noop_fuse
WORKLOAD=$here/workload
CGROOT=/sys/fs/cgroup/memory

usage() {
	sed -n '4,24p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

while getopts c:r:d:w:l:s:p:a:m:b:T:SVPZ:N:h opt; do
	case $opt in
	c) CORPUS=$OPTARG ;;
	r) ROUNDS=$OPTARG ;;
	d) DEVICES=$OPTARG ;;
	w) WS_MIB=$OPTARG ;;
	l) LIMIT_MIB=$OPTARG ;;
	s) SWAPSIZE=$OPTARG ;;
	p) PASSES=$OPTARG ;;
	a) ALG=$OPTARG ;;
	m) BUDGET_MIB=$OPTARG ;;
	b) BACKDIR=$OPTARG ;;
	T) TIMEOUT_S=$OPTARG ;;
	S) WFLAGS=${WFLAGS/-R/} ;;
	V) WFLAGS="$WFLAGS -V" ;;
	P) PIN="taskset -c 0" ;;
	Z) ZSWAPFS=$OPTARG ;;
	N) NOOP=$OPTARG ;;
	*) usage ;;
	esac
done
if [ -z "$CORPUS" ] || [ ! -r "$CORPUS" ]; then usage; fi
[ "$(id -u)" = 0 ] || { echo "swapbench: needs root" >&2; exit 2; }
[ -w "$CGROOT/cgroup.procs" ] || { echo "swapbench: no v1 memory cgroup at $CGROOT" >&2; exit 2; }
WFLAGS=${WFLAGS# }
ORDER=seq
case " $WFLAGS " in *" -R "*) ORDER=random ;; esac
[ -x "$WORKLOAD" ] || { echo "swapbench: $WORKLOAD missing: run make in $here" >&2; exit 2; }

# teardown() and the traps undo on every path what this script creates (benchlib.sh)
bench_init

if swap_active; then
	log "other swap is active (see /proc/swaps): it would take part in the test; refusing"
	exit 2
fi

meminfo() { awk -v k="$1:" '$1 == k { print $2 }' /proc/meminfo; }
pswpout() { awk '$1 == "pswpout" { print $2 }' /proc/vmstat; }
# sectors written to the whole disk that holds BACKDIR
DISK=$(lsblk -no pkname "$(df --output=source "$BACKDIR" | tail -1)" 2>/dev/null)
[ -n "$DISK" ] || DISK=$(basename "$(df --output=source "$BACKDIR" | tail -1)")
disk_sectors() { awk '{ print $7 }' "/sys/block/$DISK/stat" 2>/dev/null || echo 0; }

# start FUSE server $1 (extra -o options $2) for a device of SWAPSIZE
start_fuse_dev() {
	start_fuse "$1" "$SWAPSIZE" "$2" && return 0
	log "$1 did not come up on $MNT: $(cat "$TMP/daemon.err")"
	return 1
}

# set up device $1 and swap on it; sets SWAPDEV
setup_dev() {
	local dev=$1 base=${1%%-*} var='' lo=(--direct-io=on)
	case $dev in *-*) var=${dev#*-} ;; esac
	case $var in
	"") ;;
	buf) lo=() ;;
	4k) lo=(--direct-io=on --sector-size 4096) ;;
	mt | t2 | bp[0-9]* | ur) ;;
	norc | rc) [ "$base" = zswapfs ] || { log "$dev: only zswapfs recompresses"; return 1; } ;;
	nodict) [ "$base" = zswapfs ] || { log "$dev: only zswapfs trains dictionaries"; return 1; } ;;
	m) [ "$base" = zram ] || { log "$dev: -m is zram's; zswapfs-wb is its match"; return 1; } ;;
	wb | wbp | wbt2) [ "$base" = zswapfs ] || { log "$dev: only zswapfs writes back"; return 1; } ;;
	*) log "unknown device variant $dev"; return 1 ;;
	esac
	case $base in
	zram)
		if zram_busy; then
			log "zram0 is in use by someone else; refusing"
			return 1
		fi
		ZRAM_USED=1
		echo "$ALG" > $ZRAM/comp_algorithm || return 1
		echo "$SWAPSIZE" > $ZRAM/disksize || return 1
		if [ "$var" = m ]; then
			echo "${BUDGET_MIB}M" > $ZRAM/mem_limit || return 1
		fi
		mkswap /dev/zram0 > /dev/null || return 1
		swapon /dev/zram0 || return 1
		SWAPDEV=/dev/zram0
		return 0
		;;
	zswapfs)
		[ -x "$ZSWAPFS" ] || { log "$ZSWAPFS not built"; return 1; }
		local opts="algorithm=$ALG"
		[ "$var" = t2 ] && opts="$opts,threads=2"
		case $var in bp[0-9]*) opts="$opts,busy_poll_us=${var#bp}" ;; esac
		[ "$var" = norc ] && opts="$opts,recompress.enabled=false"
		[ "$var" = nodict ] && opts="$opts,dict_train=off"
		[ "$var" = rc ] && opts="$opts,recompress.enabled=true,recompress.idle_age=1"
		[ "$var" = rc ] && opts="$opts,recompress.rate=0"
		if [ "${var#wb}" != "$var" ]; then
			BACKPRIV=$(mktemp -d "$BACKDIR/swapbench.XXXXXX") || return 1
			BACKFILE=$BACKPRIV/backing
			opts="$opts,mem_limit=${BUDGET_MIB}M,writeback.backing_file=$BACKFILE"
		fi
		[ "$var" = wbp ] && opts="$opts,writeback.promote=true"
		[ "$var" = wbt2 ] && opts="$opts,threads=2"

		if [ "$var" = ur ]; then uring_set Y || return 1; else uring_set N; fi
		start_fuse_dev "$ZSWAPFS" "$opts" || return 1
		;;
	disk)
		BACKFILE=$BACKDIR/swapbench.$$.swapfile
		# dd, not fallocate: swapon refuses files with holes on some filesystems
		dd if=/dev/zero of="$BACKFILE" bs=1M count=$(( $(numfmt --from=iec "$SWAPSIZE") >> 20 )) \
			status=none || return 1
		chmod 600 "$BACKFILE"
		mkswap "$BACKFILE" > /dev/null || return 1
		swapon "$BACKFILE" || return 1
		SWAPDEV=$BACKFILE
		return 0
		;;
	noop)
		[ -x "$NOOP" ] || { log "$NOOP not built: run make in $here"; return 1; }
		local nopts=
		[ "$var" = mt ] && nopts=loopmode=mt
		case $var in bp[0-9]*) nopts="busy_poll_us=${var#bp}" ;; esac
		if [ "$var" = ur ]; then uring_set Y || return 1; else uring_set N; fi
		start_fuse_dev "$NOOP" "$nopts" || return 1
		;;
	*)
		log "unknown device $dev"; return 1 ;;
	esac
	LOOPDEV=$(losetup --find --show "${lo[@]}" "$MNT/swap") || { LOOPDEV=; return 1; }
	mkswap "$LOOPDEV" > /dev/null || return 1
	swapon --discard "$LOOPDEV" || return 1
	SWAPDEV=$LOOPDEV
}

# per-device peak of the compressed store and the server's RSS, read after the run
dev_stats() {
	local dev=$1
	case $dev in
	zram*) awk '{ printf "store_peak_kib=%d", $5 / 1024 }' $ZRAM/mm_stat
		awk '{ printf " failed_writes=%d", $2 }' $ZRAM/io_stat ;;
	zswapfs*) awk '$1 == "mem_used_max" { printf "store_peak_kib=%d", $2 / 1024 }
		# what the idle recompression worker did during the run (absent: older daemon)
		$1 == "recompressed" || $1 == "recompress_passes" { r = r " " $1 "=" $2 }
		# writeback: pages out and in, bytes to the file per byte swapped out
		$1 == "bd_writes" || $1 == "bd_reads" || $1 == "failed_writes" ||
		$1 == "writeback_spills" || $1 == "uring_reqs" { r = r " " $1 "=" $2 }
		$1 == "write_bytes" { swapped = $2 }
		$1 == "backing_bytes_written" { backing = $2 }
		END { if (backing) printf " backing_mib_written=%.1f backing_per_swapped=%.3f",
			backing / 1048576, swapped ? backing / swapped : 0
		printf "%s", r }' "$MNT/stats" 2>/dev/null ;;
	esac
	[ -n "$DPID" ] && awk '$1 == "VmHWM:" { printf " server_hwm_kib=%d", $2 }' \
		/proc/$DPID/status 2>/dev/null
}

# one run on device $1, in this shell (the EXIT trap must see what it set up);
# writes "SECONDS details..." to $TMP/res
run_one() {
	local dev=$1 t0 t1 c0 cpeak out rc
	setup_dev "$dev" || return 1
	CG=$CGROOT/swapbench.$$.$RANDOM
	mkdir "$CG" || return 1
	echo "${LIMIT_MIB}M" > "$CG/memory.limit_in_bytes" || return 1
	other_swap_now=$(tail -n +2 /proc/swaps | awk -v d="$SWAPDEV" '$1 != d' | wc -l)
	[ "$other_swap_now" = 0 ] || log "warning: other swap appeared during the run on $dev"
	sync
	local so0 ds0
	so0=$(pswpout)
	ds0=$(disk_sectors)
	c0=$(meminfo Cached)
	( while :; do meminfo Cached; sleep 0.2; done ) > "$TMP/cached" &
	SAMPLER=$!
	t0=$(date +%s.%N)
	# shellcheck disable=SC2086
	out=$(timeout "$TIMEOUT_S" $PIN "$WORKLOAD" -g "$CG" -w "$WS_MIB" -p "$PASSES" $WFLAGS \
		"$CORPUS")
	rc=$?
	[ $rc = 124 ] && out="killed after ${TIMEOUT_S}s (thrashing)"
	# the cgroup's OOM killer: the device could not take the pages
	extra_oom=$(awk '$1 == "oom_kill" { print " oom_kills=" $2 }' "$CG/memory.oom_control" \
		2>/dev/null)
	t1=$(date +%s.%N)
	kill "$SAMPLER"; wait "$SAMPLER" 2>/dev/null; SAMPLER=
	cpeak=$(sort -n "$TMP/cached" | tail -1)
	sync
	local extra
	extra=$(awk -v a="$so0" -v b="$(pswpout)" -v c="$ds0" -v d="$(disk_sectors)" 'BEGIN {
		printf "swapped_out_mib=%.1f disk_mib_written=%.1f", (b - a) / 256, (d - c) / 2048 }')
	extra="$extra $(dev_stats "$dev") cached_growth_kib=$(( $(meminfo Cached) - c0 ))"
	extra="$extra cached_peak_growth_kib=$(( ${cpeak:-$c0} - c0 ))"
	# other work on the machine makes the figures meaningless: keep the evidence
	extra="$extra loadavg1=$(cut -d' ' -f1 /proc/loadavg)$extra_oom"
	teardown || log "teardown after $dev reported a problem"
	if [ $rc != 0 ]; then
		log "workload FAILED on $dev (exit $rc): $out $extra"
		return 1
	fi
	# total_s: the workload's own timing (fill + passes); wall includes start-up
	local total wall
	total=$(echo "$out" | sed -n 's/.*total_s=\([0-9.]*\).*/\1/p')
	wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
	echo "$total wall_s=$wall $out $extra" > "$TMP/res"
}

IFS=, read -r -a devs <<< "$DEVICES"
declare -A times fails round_t
for d in "${devs[@]}"; do times[$d]=""; fails[$d]=0; done

echo "# swapbench: corpus=$CORPUS ws=${WS_MIB}MiB limit=${LIMIT_MIB}MiB swap=$SWAPSIZE" \
	"passes=$PASSES alg=$ALG rounds=$ROUNDS devices=$DEVICES flags=${WFLAGS:-none}" \
	"pin=${PIN:-no} kernel=$(uname -r) cpus=$(nproc)" \
	"loadavg=$(cut -d" " -f1-3 /proc/loadavg | tr " " /)"
failed=0
for r in $(seq "$ROUNDS"); do
	for d in "${devs[@]}"; do
		if run_one "$d"; then
			res=$(cat "$TMP/res")
			t=${res%% *}
			times[$d]="${times[$d]} $t"
			round_t[$d:$r]=$t
			printf 'round %d %-12s %8.3f s  %s\n' "$r" "$d" "$t" "${res#* }"
		else
			teardown
			fails[$d]=$(( ${fails[$d]} + 1 ))
			failed=1
			printf 'round %d %-12s FAILED\n' "$r" "$d"
		fi
	done
done

echo "# medians (workload seconds, fill + passes)"
declare -A med
for d in "${devs[@]}"; do
	med[$d]=$(echo "${times[$d]}" | median)
	printf '%-12s median %8s s  runs:%s  failures: %d\n' "$d" "${med[$d]}" "${times[$d]}" \
		"${fails[$d]}"
done
# the ratio round by round (the two ran next to each other, so a drift of the
# machine's speed cancels out): "median (min..max)"
pair_ratios() {
	local a=$1 b=$2 r list=''
	for r in $(seq "$ROUNDS"); do
		[ -n "${round_t[$a:$r]+x}" ] && [ -n "${round_t[$b:$r]+x}" ] || continue
		list="$list $(ratio "${round_t[$a:$r]}" "${round_t[$b:$r]}")"
	done
	echo "$list" | spread
}
json_ratios=
for d in "${devs[@]}"; do
	# the floor with the same transport too (zswapfs-ur against noop-ur)
	v=''
	case $d in zswapfs-*) v=noop-${d#*-} ;; esac
	for base in noop $v zram ${d%%-*}; do
		[ -n "${med[$base]+x}" ] || continue
		case $base:$d in zram:zram | noop:zram | noop:noop* | "$d:$d") continue ;; esac
		rt=$(ratio "${med[$d]}" "${med[$base]}")
		echo "ratio $d/$base $rt  per round: $(pair_ratios "$d" "$base")"
		json_ratios="$json_ratios${json_ratios:+,}\"$d/$base\":$rt"
	done
done
# what the recompression worker costs the foreground
if [ -n "${med[zswapfs-rc]+x}" ] && [ -n "${med[zswapfs-norc]+x}" ]; then
	rt=$(ratio "${med[zswapfs-rc]}" "${med[zswapfs-norc]}")
	echo "ratio zswapfs-rc/zswapfs-norc $rt"
	json_ratios="$json_ratios${json_ratios:+,}\"zswapfs-rc/zswapfs-norc\":$rt"
fi

# machine-readable summary: the last line, one JSON object
json_med='' json_runs=''
for d in "${devs[@]}"; do
	json_med="$json_med${json_med:+,}\"$d\":${med[$d]}"
	json_runs="$json_runs${json_runs:+,}\"$d\":[$(echo "${times[$d]}" | sed 's/^ *//' | tr ' ' ',')]"
done
echo "{\"bench\":\"swapbench\",\"rounds\":$ROUNDS,\"ws_mib\":$WS_MIB,\"limit_mib\":$LIMIT_MIB," \
	"\"passes\":$PASSES,\"order\":\"$ORDER\",\"alg\":\"$ALG\"," \
	"\"median_s\":{$json_med},\"runs_s\":{$json_runs}," \
	"\"ratios\":{$json_ratios},\"failed\":$failed}" | sed 's/, "/,"/g'
exit $failed
