#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# wbbench.sh - writeback against the obvious alternative: a plain swap file on the same disk
# (issue 13's comparison).  The same swap workload runs on each device in turn, interleaved
# (A B A B ...), and every run reports its time and what the disk under DIR wrote and read.
#
#   wbbench.sh -c CORPUS [-r ROUNDS] [-d DEVICES] [-w WS_MIB] [-l LIMIT_MIB] [-s SWAPSIZE]
#              [-p PASSES] [-a ALGORITHM] [-m BUDGET_MIB] [-b DIR] [-i IDLE_S] [-T SECONDS]
#              [-O ZSWAPFS_OPTS] [-Z ZSWAPFS] [-B ZSWAPFS_B] [-Q OPTS_B] [-L US] [-D] [-V] [-f]
#
# DEVICES (comma separated, default disk,zswapfs-wb):
#   disk           a plain swap file of SWAPSIZE in a private directory in DIR (-b, default
#                  /var/tmp): fallocate (-D: dd from /dev/zero), mkswap, swapon
#   zswapfs-wb     zswapfs -o size=SWAPSIZE,algorithm=ALGORITHM,mem_limit=BUDGET_MIB(M),
#                  writeback.backing_file=DIR/wbbench.XXXXXX/backing,fuse_uring=false
#                  (requests over /dev/fuse whatever the fuse module allows), then
#                  losetup --direct-io=on, mkswap, swapon --discard
#   zswapfs-wb-ur  the same over FUSE io_uring (fuse_uring=true); runs only where the fuse
#                  module's enable_uring is already Y: this script never changes it
#   zswapfs-wb-b   as zswapfs-wb, with the binary ZSWAPFS_B (-B) and OPTS_B (-Q) added to
#                  the options: an A/B of two builds or settings in the same rounds
# -L US puts the swap file and the backing file alike on a slower disk: ext4 on a loop
# device (direct I/O) over slowdisk's file (contrib/bench/slowdisk.c, built by make here),
# which answers every read and write US microseconds after it arrived and keeps the data in
# an image in DIR (benchlib.sh: layer_up); the disk figures are then that loop device's,
# and each round first prints what fio measures there: a 4 KiB read at queue depth 1.
# zswapfs then runs with slowdisk_shim.so preloaded (see there: its backing-file check
# would refuse a device over a FUSE file).
# Workload (contrib/bench/workload, in a fresh memory cgroup, v1 or v2, limited to
# LIMIT_MIB): WS_MIB of corpus pages, PASSES passes in a fixed random order, every page's
# hash checked on each touch.  Defaults: 512 MiB, 192 MiB, 1 pass, 3 rounds, lz4, 64 MiB.
# Needs root, a memory cgroup, a block device under DIR, and no other swap active
# (-f: run anyway; the other swap then takes part and the figures mean little).
set -u

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=benchlib.sh
. "$here/benchlib.sh"
BENCH=wbbench
CORPUS=
ROUNDS=3
DEVICES=disk,zswapfs-wb
WS_MIB=512
LIMIT_MIB=192
SWAPSIZE=1G
PASSES=1
ALG=lz4
BUDGET_MIB=64
BACKDIR=/var/tmp
IDLE_S=5
TIMEOUT_S=900
XOPTS=
SWAPFILL=fallocate
VFLAG=
FORCE=0
ZSWAPFS=$here/../../src/zswapfs
ZSWAPFS_B=
OPTS_B=
LAYER_US=
[ -x "$ZSWAPFS" ] || ZSWAPFS=$here/../../build/src/zswapfs
WORKLOAD=$here/workload

usage() {
	# the header comment, from its synopsis to its last line
	awk 'NR >= 4 && !/^#/ { exit } NR >= 4' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

while getopts c:r:d:w:l:s:p:a:m:b:i:T:O:Z:B:Q:L:DVfh opt; do
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
	i) IDLE_S=$OPTARG ;;
	T) TIMEOUT_S=$OPTARG ;;
	O) XOPTS=$OPTARG ;;
	Z) ZSWAPFS=$OPTARG ;;
	B) ZSWAPFS_B=$OPTARG ;;
	Q) OPTS_B=$OPTARG ;;
	L) LAYER_US=$OPTARG ;;
	D) SWAPFILL="dd" ;;
	V) VFLAG=-V ;;
	f) FORCE=1 ;;
	*) usage ;;
	esac
done
if [ -z "$CORPUS" ] || [ ! -r "$CORPUS" ]; then usage; fi
for n in "$ROUNDS" "$WS_MIB" "$LIMIT_MIB" "$PASSES" "$BUDGET_MIB" "$IDLE_S" "$TIMEOUT_S" \
	${LAYER_US:+"$LAYER_US"}; do
	case $n in '' | *[!0-9]*) echo "wbbench: '$n' is not a whole number" >&2; exit 2 ;; esac
done
[ "$(id -u)" = 0 ] || { echo "wbbench: needs root" >&2; exit 2; }
memcg_init || { echo "wbbench: $CG_WHY" >&2; exit 2; }
[ -x "$WORKLOAD" ] || { echo "wbbench: $WORKLOAD missing: run make in $here" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "wbbench: needs /usr/bin/time (package time)" >&2; exit 2; }
[ -d "$BACKDIR" ] || { echo "wbbench: $BACKDIR is not a directory" >&2; exit 2; }
DISK=$(fs_blockdev "$BACKDIR")
if [ -z "$DISK" ]; then
	echo "wbbench: no block device under $BACKDIR (tmpfs?): nothing to compare" >&2
	exit 2
fi
SWAPBYTES=$(numfmt --from=iec "$SWAPSIZE") || exit 2
IFS=, read -r -a devs <<< "$DEVICES"
for d in "${devs[@]}"; do
	case $d in
	disk | zswapfs-wb | zswapfs-wb-ur | zswapfs-wb-b) ;;
	*) echo "wbbench: unknown device '$d'" >&2; exit 2 ;;
	esac
	case $d in
	zswapfs-wb-b) [ -x "$ZSWAPFS_B" ] ||
		{ echo "wbbench: zswapfs-wb-b needs a binary (-B)" >&2; exit 2; } ;;
	zswapfs*) [ -x "$ZSWAPFS" ] ||
		{ echo "wbbench: $ZSWAPFS not built (-Z)" >&2; exit 2; } ;;
	esac
done

# teardown() and the traps undo on every path what this script creates (benchlib.sh)
bench_init

if [ -n "$LAYER_US" ]; then
	# the swap file, the backing file (up to the swap file's size), fio's file and room for
	# ext4
	layer_up "$BACKDIR" $((2 * SWAPBYTES + (512 << 20))) "$LAYER_US" ||
		{ log "could not set up the slower disk (-L)"; exit 2; }
	BACKDIR=$LAYER_MNT
	DISK=$(fs_blockdev "$BACKDIR")
	[ -n "$DISK" ] || { log "no block device under $BACKDIR"; exit 2; }
	# zswapfs refuses a backing file whose device stack reaches a FUSE filesystem (a
	# server that needs memory could deadlock it); slowdisk locks its memory and runs
	# outside the cgroup: the shim lets the daemon's check see its file as ext4
	SHIM=$here/slowdisk_shim.so
	[ -r "$SHIM" ] || { log "$SHIM missing: run make in $here"; exit 2; }
	PIN="env LD_PRELOAD=$SHIM SLOWDISK_DEV=$(stat -c '%Hd:%Ld' "$LAYER_FUSE/disk")"
fi

if swap_active; then
	if [ "$FORCE" = 1 ]; then
		log "warning: other swap is active (-f): it takes part in every run"
	else
		log "other swap is active (see /proc/swaps): it would take part in the test;" \
			"refusing (-f to run anyway)"
		exit 2
	fi
fi

vmstat_of() { awk -v k="$1" '$1 == k { print $2 }' /proc/vmstat; }
FSTYPE=$(findmnt -no FSTYPE -T "$BACKDIR" || stat -f -c %T "$BACKDIR")
# the kernel's own zswap would take pages before any swap device sees them
KZSWAP=$(cat /sys/module/zswap/parameters/enabled 2>/dev/null || echo absent)

# zswapfs -o options for device $1 with backing file $2
zswapfs_opts() {
	local o="algorithm=$ALG,mem_limit=${BUDGET_MIB}M,writeback.backing_file=$2"
	if [ "$1" = zswapfs-wb-ur ]; then o="$o,fuse_uring=true"; else o="$o,fuse_uring=false"; fi
	[ "$1" = zswapfs-wb-b ] && o="$o${OPTS_B:+,$OPTS_B}"
	echo "$o${XOPTS:+,$XOPTS}"
}

# set up device $1 and swap on it; sets SWAPDEV
setup_dev() {
	case $1 in
	disk)
		# a private directory, as for the backing file: nothing else on the
		# machine can open the swap file while it holds pages
		BACKPRIV=$(mktemp -d "$BACKDIR/wbbench.XXXXXX") || return 1
		BACKFILE=$BACKPRIV/swapfile
		if [ "$SWAPFILL" = fallocate ]; then
			fallocate -l "$SWAPBYTES" "$BACKFILE" ||
				{ log "fallocate failed: try -D (dd)"; return 1; }
		else
			dd if=/dev/zero of="$BACKFILE" bs=1M count=$((SWAPBYTES >> 20)) \
				status=none || return 1
		fi
		chmod 600 "$BACKFILE"
		mkswap "$BACKFILE" > /dev/null || return 1
		# recorded first: a signal that lands right after swapon still swaps it off
		SWAPDEV=$BACKFILE
		swapon "$BACKFILE" || { SWAPDEV=; log "swapon $BACKFILE failed (try -D: dd)"; return 1; }
		return 0
		;;
	zswapfs-wb | zswapfs-wb-ur | zswapfs-wb-b)
		# zswapfs refuses a backing directory others could write
		BACKPRIV=$(mktemp -d "$BACKDIR/wbbench.XXXXXX") || return 1
		BACKFILE=$BACKPRIV/backing
		local bin=$ZSWAPFS
		[ "$1" = zswapfs-wb-b ] && bin=$ZSWAPFS_B
		if ! start_fuse "$bin" "$SWAPSIZE" "$(zswapfs_opts "$1" "$BACKFILE")"; then
			log "zswapfs did not come up on $MNT: $(cat "$TMP/daemon.err")"
			return 1
		fi
		;;
	esac
	LOOPDEV=$(losetup --find --show --direct-io=on "$MNT/swap") || { LOOPDEV=; return 1; }
	mkswap "$LOOPDEV" > /dev/null || return 1
	SWAPDEV=$LOOPDEV
	swapon --discard "$LOOPDEV" || { SWAPDEV=; return 1; }
}

# key=value pairs from the zswapfs stats file $1: the per-request figures it has today
zswapfs_figures() {
	awk '
	function us(ns) { return sprintf("%.1f", ns / 1000) }
	{ v[$1] = $2 }
	END {
		printf "store_peak_mib=%.1f bd_writes=%d bd_reads=%d writeback_spills=%d",
			v["mem_used_max"] / 1048576, v["bd_writes"], v["bd_reads"],
			v["writeback_spills"]
		printf " failed_writes=%d writeback_failed=%d backing_read_errors=%d",
			v["failed_writes"], v["writeback_failed"], v["backing_read_errors"]
		printf " read_reqs=%d read_avg_us=%s read_max_us=%s",
			v["read_reqs"], us(v["read_latency_avg_ns"]), us(v["read_latency_max_ns"])
		printf " write_reqs=%d write_avg_us=%s write_max_us=%s",
			v["write_reqs"], us(v["write_latency_avg_ns"]),
			us(v["write_latency_max_ns"])
		printf " discard_reqs=%d discard_avg_us=%s discard_max_us=%s",
			v["discard_reqs"], us(v["discard_latency_avg_ns"]),
			us(v["discard_latency_max_ns"])
		printf " transport=%s uring_reqs=%d", v["fuse_transport"], v["uring_reqs"]
		# by path (lat_PATH_*): requests, mean, and the bucket (log2 us) that
		# holds the median and the 99th percentile, as its upper bound in us
		np = split("read_arena read_backing read_same write_room write_wait discard " \
			   "backing_pread", path, " ")
		for (i = 1; i <= np; i++) {
			p = "lat_" path[i] "_"
			n = v[p "reqs"] + 0
			printf " %s_n=%d %s_avg_us=%s", path[i], n, path[i],
				n ? us(v[p "ns_total"] / n) : "nan"
			for (q = 50; q <= 99; q += 49) {
				seen = 0; at = "nan"
				for (k = 0; k <= 20 && n; k++) {
					seen += v[p "us_" (k ? 2 ^ k : 0)]
					if (seen * 100 >= q * n) { at = 2 ^ (k + 1); break }
				}
				printf " %s_p%d_us=%s", path[i], q, at
			}
		}
		printf " room_wait_ms=%.1f backing_mib_read=%.1f compaction_moves=%d",
			v["writeback_room_wait_ns"] / 1e6, v["backing_bytes_read"] / 1048576,
			v["backing_compaction_moves"]
	}' "$1"
}

# disk MiB written while nothing of ours runs (ext4's journal, other processes), per second
idle_rate() {
	local a b
	sync
	a=$(disk_counters "$DISK")
	sleep "$IDLE_S"
	b=$(disk_counters "$DISK")
	awk -v a="${a#* }" -v b="${b#* }" -v s="$IDLE_S" 'BEGIN {
		split(a, x, " "); split(b, y, " ")
		printf "%.3f", (s > 0 ? (y[1] - x[1]) / 2048 / s : 0) }'
}

# one run on device $1, in this shell (the EXIT trap must see what it set up); writes
# "OUTCOME key=value..." to $TMP/res, OUTCOME being OK, OOM or FAIL
run_one() {
	local dev=$1 rc c0 c1 so0 si0 t0 t1 out own=0 outcome=OK figures=''
	: > "$TMP/res"
	setup_dev "$dev" || return 1
	memcg_make "wbbench.$$.$RANDOM" "$LIMIT_MIB" || return 1
	[ "$(tail -n +2 /proc/swaps | awk -v d="$SWAPDEV" '$1 != d' | wc -l)" = 0 ] ||
		log "warning: other swap active during the run on $dev"
	# the window: everything dirty before it is on the disk first, and everything the
	# run made dirty is on the disk before it closes
	sync
	c0=$(disk_counters "$DISK")
	so0=$(vmstat_of pswpout) si0=$(vmstat_of pswpin)
	t0=$(date +%s.%N)
	# shellcheck disable=SC2086  # VFLAG is one flag or nothing
	/usr/bin/time -o "$TMP/time" -f 'wall_s=%e maxrss_kib=%M' \
		timeout "$TIMEOUT_S" "$WORKLOAD" -g "$CG" -w "$WS_MIB" -p "$PASSES" -R $VFLAG \
		"$CORPUS" > "$TMP/out" 2> "$TMP/err"
	rc=$?
	sync
	t1=$(date +%s.%N)
	c1=$(disk_counters "$DISK")
	# the daemon's counters right after the window closes: its writeback thread may still
	# be writing, so own_mib_written can run a little past the window (other_mib_written
	# then goes slightly negative)
	case $dev in zswapfs*) cat "$MNT/stats" > "$TMP/stats" 2>/dev/null ;; esac
	out=$(grep -m1 '^result=' "$TMP/out")
	case $dev in zswapfs*)
		figures=" $(zswapfs_figures "$TMP/stats")"
		own=$(awk '$1 == "backing_bytes_written" { print $2 }' "$TMP/stats")
		;;
	disk)
		# every page swapped out went to the swap file
		own=$(( ($(vmstat_of pswpout) - so0) * 4096 )) ;;
	esac
	figures="$figures oom_kills=$(memcg_oom_kills)"
	# disk traffic in the window (MiB); own = the swap file's or the backing file's
	# writes, other = the rest (journal, metadata, other processes)
	local disk
	disk=$(awk -v a="$c0" -v b="$c1" -v own="${own:-0}" -v t0="$t0" -v t1="$t1" \
		-v so="$so0" -v so1="$(vmstat_of pswpout)" -v si="$si0" -v si1="$(vmstat_of pswpin)" \
		'BEGIN { split(a, x, " "); split(b, y, " "); w = (y[2] - x[2]) / 2048
		printf "window_s=%.1f disk_mib_written=%.1f own_mib_written=%.1f", t1 - t0, w,
			own / 1048576
		printf " other_mib_written=%.1f disk_writes=%d disk_mib_read=%.1f",
			w - own / 1048576, y[3] - x[3], (y[1] - x[1]) / 2048
		printf " disk_mib_discarded=%.1f swapped_out_mib=%.1f swapped_in_mib=%.1f",
			(y[4] - x[4]) / 2048, (so1 - so) / 256, (si1 - si) / 256 }')
	local tm
	tm=$(grep -m1 '^wall_s=' "$TMP/time")
	if ! teardown; then
		log "teardown after $dev reported a problem"
		[ "$rc" = 0 ] && rc=1
	fi
	if [ "$rc" != 0 ]; then
		outcome=FAIL
		[ "$rc" = 124 ] && out="killed after ${TIMEOUT_S}s (thrashing)"
		case $figures in *oom_kills=[1-9]*) outcome=OOM ;; esac
		out="exit=$rc ${out:-$(tail -n 1 "$TMP/err")}"
	fi
	case $dev in
	zswapfs-wb | zswapfs-wb-b) case $figures in *transport=dev_fuse*) ;; *)
		log "$dev did not run over /dev/fuse"; outcome=FAIL ;; esac ;;
	zswapfs-wb-ur) case $figures in *transport=io_uring*) ;; *)
		log "$dev did not run over io_uring (the kernel refused?)"; outcome=FAIL ;; esac ;;
	esac
	local total
	total=$(echo "$out" | sed -n 's/.*total_s=\([0-9.]*\).*/\1/p')
	echo "$outcome time_s=${total:-nan} $tm $disk$figures $out loadavg1=$(cut -d' ' -f1 \
		/proc/loadavg)" > "$TMP/res"
}

# value of key $2 in a result line $1
field() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }

echo "# wbbench: corpus=$CORPUS ws=${WS_MIB}MiB limit=${LIMIT_MIB}MiB swap=$SWAPSIZE" \
	"passes=$PASSES order=random${VFLAG:+ final_check} alg=$ALG budget=${BUDGET_MIB}MiB" \
	"dir=$BACKDIR fs=$FSTYPE disk=$DISK swapfile=$SWAPFILL rounds=$ROUNDS" \
	"devices=$DEVICES zswapfs_extra_opts=${XOPTS:-none} kernel=$(uname -r) cpus=$(nproc)" \
	"memcg=v$CGVER kernel_zswap=$KZSWAP layer_us=${LAYER_US:-none}" \
	"enable_uring=$(cat "$URING_PARAM" 2>/dev/null || echo absent)" \
	"loadavg=$(cut -d" " -f1-3 /proc/loadavg | tr " " /)"
for d in "${devs[@]}"; do
	case $d in
	zswapfs-wb | zswapfs-wb-ur | zswapfs-wb-b)
		bin=$ZSWAPFS
		[ "$d" = zswapfs-wb-b ] && bin=$ZSWAPFS_B
		echo "# $d: $bin MNT -f -o size=$SWAPSIZE,$(zswapfs_opts "$d" \
			"$BACKDIR/wbbench.XXXXXX/backing"); losetup --find --show --direct-io=on" \
			"MNT/swap; mkswap; swapon --discard" ;;
	disk) echo "# disk: $SWAPFILL $SWAPSIZE DIR/wbbench.XXXXXX/swapfile; mkswap; swapon" ;;
	esac
done
echo "# workload: $WORKLOAD -g CGROUP -w $WS_MIB -p $PASSES -R ${VFLAG:+$VFLAG }CORPUS" \
	"($CGLIMIT=${LIMIT_MIB}M, v$CGVER), under /usr/bin/time and timeout $TIMEOUT_S"
echo "# disk figures: /proc/diskstats of $DISK, sync before and after the workload;" \
	"idle = $DISK's writes per second over ${IDLE_S}s with nothing of ours running"

failed=0
declare -A res
for r in $(seq "$ROUNDS"); do
	idle=$(idle_rate)
	res[idle:$r]=$idle
	printf 'round %d %-14s %s MiB/s written to %s (background)\n' "$r" idle "$idle" "$DISK"
	if [ -n "$LAYER_US" ]; then
		lat=$(layer_latency 5)
		res[lat:$r]=$lat
		printf 'round %d %-14s %s (fio, 4 KiB, QD1, on %s)\n' "$r" slowdisk "${lat:-no fio}" \
			"$DISK"
	fi
	for d in "${devs[@]}"; do
		if [ "$d" = zswapfs-wb-ur ] && ! uring_enabled; then
			printf 'round %d %-14s SKIPPED (%s is not Y; never changed here)\n' \
				"$r" "$d" "$URING_PARAM"
			continue
		fi
		if ! run_one "$d"; then
			teardown
			echo "FAIL setup" > "$TMP/res"
		fi
		line=$(cat "$TMP/res")
		outcome=${line%% *}
		res[$d:$r]=$line
		if [ "$outcome" = OK ]; then
			printf 'round %d %-14s %8s s  %s\n' "$r" "$d" "$(field "$line" time_s)" \
				"${line#* }"
		else
			printf 'round %d %-14s %s  %s\n' "$r" "$d" "$outcome" "${line#* }"
			failed=1
		fi
	done
done

# medians of the runs that completed
KEYS='time_s wall_s disk_mib_written own_mib_written other_mib_written disk_mib_read
disk_mib_discarded swapped_out_mib swapped_in_mib store_peak_mib bd_writes bd_reads
writeback_spills read_avg_us read_max_us write_avg_us write_max_us read_arena_n
read_backing_n read_backing_avg_us backing_pread_avg_us backing_pread_p99_us write_wait_n
room_wait_ms backing_mib_read compaction_moves'
declare -A med
echo "# medians of completed runs (idle: $(for r in $(seq "$ROUNDS"); do
	echo "${res[idle:$r]}"; done | median) MiB/s in the background)"
if [ -n "$LAYER_US" ]; then
	for k in read_p50_us read_mean_us read_p99_us; do
		printf '%s=%s ' "slowdisk_$k" "$(for r in $(seq "$ROUNDS"); do
			field "${res[lat:$r]:-}" "$k"; done | median)"
	done
	echo "(medians over rounds, fio 4 KiB QD1 reads on $DISK)"
fi
for d in "${devs[@]}"; do
	ok=0 line=''
	for k in $KEYS; do
		vals=''
		for r in $(seq "$ROUNDS"); do
			[ "${res[$d:$r]%% *}" = OK ] || continue
			v=$(field "${res[$d:$r]}" "$k")
			[ -n "$v" ] && vals="$vals $v"
		done
		[ -n "$vals" ] || continue
		med[$d:$k]=$(echo "$vals" | median)
		line="$line $k=${med[$d:$k]}"
	done
	for r in $(seq "$ROUNDS"); do
		[ "${res[$d:$r]%% *}" = OK ] && ok=$((ok + 1))
	done
	printf '%-14s completed %d of %d%s\n' "$d" "$ok" "$ROUNDS" "$line"
done

# zswapfs against the plain swap file: ratio of the medians, and the ratio round by
# round (the two ran one after the other, so a drift of the machine cancels out)
json_ratios=''
declare -A sp
field_med() { echo "${med[$1:$2]:-nan}"; }
for d in zswapfs-wb zswapfs-wb-ur zswapfs-wb-b; do
	if [ -z "${med[$d:time_s]+x}" ] || [ -z "${med[disk:time_s]+x}" ]; then continue; fi
	for k in time_s disk_mib_written disk_mib_read; do
		list=''
		for r in $(seq "$ROUNDS"); do
			if [ "${res[$d:$r]%% *}" != OK ] || [ "${res[disk:$r]%% *}" != OK ]; then
				continue
			fi
			list="$list $(ratio "$(field "${res[$d:$r]}" "$k")" \
				"$(field "${res[disk:$r]}" "$k")")"
		done
		rt=$(ratio "${med[$d:$k]}" "${med[disk:$k]}")
		sp[$d:$k]=$(echo "$list" | spread)
		echo "ratio $d/disk $k $rt  per round: ${sp[$d:$k]}"
		json_ratios="$json_ratios${json_ratios:+,}\"$d/disk:$k\":$rt"
	done
done

# the issue's table: each zswapfs configuration against the plain swap file, as the
# median (min..max) of the round-by-round ratios (1.0 = the same as the swap file)
if [ -n "${med[disk:time_s]+x}" ]; then
	echo "# the comparison (ratios to the plain swap file, median (min..max) over rounds):"
	printf '| %-53s | %-20s | %-25s |\n' "" "wall time" "bytes written to the disk"
	printf '|%s|%s|%s|\n' "$(printf -- '-%.0s' $(seq 55))" "$(printf -- '-%.0s' $(seq 22))" \
		"$(printf -- '-%.0s' $(seq 27))"
	printf '| %-53s | %-20s | %-25s |\n' "plain swap file on the $FSTYPE of $BACKDIR ($DISK)" \
		"1.0 ($(field_med disk time_s) s)" "1.0 ($(field_med disk disk_mib_written) MiB)"
	for d in zswapfs-wb zswapfs-wb-ur zswapfs-wb-b; do
		[ -n "${sp[$d:time_s]+x}" ] || continue
		label="zswapfs, mem_limit=${BUDGET_MIB}M, backing file on the same $FSTYPE"
		[ "$d" = zswapfs-wb-ur ] && label="$label, io_uring"
		[ "$d" = zswapfs-wb-b ] && label="$label, B"
		printf '| %-53s | %-20s | %-25s |\n' "$label" "${sp[$d:time_s]}" \
			"${sp[$d:disk_mib_written]}"
	done
fi

# machine-readable summary: the last line, one JSON object
json_med=''
for d in "${devs[@]}"; do
	body=''
	for k in $KEYS; do
		[ -n "${med[$d:$k]+x}" ] && body="$body${body:+,}\"$k\":${med[$d:$k]}"
	done
	runs=''
	for r in $(seq "$ROUNDS"); do
		runs="$runs${runs:+,}\"${res[$d:$r]%% *}\""
	done
	json_med="$json_med${json_med:+,}\"$d\":{$body${body:+,}\"outcomes\":[${runs}]}"
done
echo "{\"bench\":\"wbbench\",\"rounds\":$ROUNDS,\"ws_mib\":$WS_MIB,\"limit_mib\":$LIMIT_MIB," \
	"\"passes\":$PASSES,\"alg\":\"$ALG\",\"budget_mib\":$BUDGET_MIB,\"disk\":\"$DISK\"," \
	"\"medians\":{$json_med},\"ratios\":{$json_ratios},\"failed\":$failed}" |
	sed 's/, "/,"/g; s/:nan\([,}]\)/:null\1/g'
exit $failed
