# shellcheck shell=bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# benchlib.sh - set-up, tear-down and arithmetic shared by the benchmark scripts (sourced,
# not run).
#
# Provides log(), zram_busy(), swap_active(), start_fuse(), uring_set(), uring_enabled(),
# teardown() and bench_init() (the EXIT and signal traps plus the temporary directory);
# memcg_init(), memcg_make() and memcg_oom_kills() for a memory cgroup, v1 or v2; median(),
# ratio() and spread() for the summaries; fs_blockdev() and disk_counters() for what a disk
# did.  The rule: every resource a script creates is recorded in one of the state variables below as soon as it exists, and teardown() undoes
# exactly what they record, in reverse order of creation, and clears them.  Nothing the
# scripts did not create is ever touched.
#
# Set by the sourcing script (after sourcing, before calling anything here):
#   BENCH      name used in log lines and in the temporary names (/tmp/BENCH.XXXXXX)
#   PIN        command prefix for the FUSE server, e.g. "taskset -c 0" (default: none)
# State (empty = nothing to undo):
#   SAMPLER    pid of a background sampler: killed
#   SWAPDEV    device swap was enabled on: swapoff
#   LOOPDEV    loop device: losetup -d
#   MNT        FUSE mount point (made by start_fuse): unmounted, then removed
#   DPID       pid of the FUSE server: waited for (its exit status is left in DAEMON_RC)
#   BACKFILE   the FUSE server's backing file (writeback): removed once the server is gone
#   BACKPRIV   the private directory made for it (zswapfs wants a directory of root's that
#              others cannot write): removed after it
#   ZRAM_USED  zram0 was configured: reset
#   CG         memory cgroup directory: removed
#   TMP        temporary directory: removed by the EXIT trap only
#   LAYER_*    the slower disk of layer_up(): by the EXIT trap only (layer_down)

ZRAM=/sys/block/zram0
PIN=''
SAMPLER='' SWAPDEV='' LOOPDEV='' MNT='' DPID='' BACKFILE='' BACKPRIV='' ZRAM_USED='' CG='' TMP=''
DAEMON_RC=''
LAYER_IMG='' LAYER_FUSE='' LAYER_PID='' LAYER_LOOP='' LAYER_MNT=''

log() { echo "$BENCH: $*" >&2; }

# zram0 set up (or swapped on) by someone else
zram_busy() {
	[ "$(cat $ZRAM/disksize)" != 0 ] || grep -q '^/dev/zram0 ' /proc/swaps
}

# any swap device or file active (the first line of /proc/swaps is its header)
swap_active() { [ "$(tail -n +2 /proc/swaps | wc -l)" != 0 ]; }

# start FUSE server $1 on a fresh mount point with -o size=$2[,$3]; sets MNT and DPID.
# Its stderr goes to $TMP/daemon.err, which the caller reports on failure.
start_fuse() {
	MNT=$(mktemp -d "/tmp/$BENCH-mnt.XXXXXX")
	$PIN "$1" "$MNT" -f -o "size=$2${3:+,$3}" 2> "$TMP/daemon.err" &
	DPID=$!
	for _ in $(seq 100); do
		[ -e "$MNT/swap" ] && mountpoint -q "$MNT" && return 0
		kill -0 "$DPID" 2>/dev/null || break
		sleep 0.1
	done
	return 1
}

# FUSE over io_uring is a fuse module parameter: read at each mount's
# FUSE_INIT.  uring_set Y|N sets it for the next mount; teardown puts back
# what it was.
URING_PARAM=/sys/module/fuse/parameters/enable_uring
uring_set() {
	[ -w "$URING_PARAM" ] || { [ "$1" = N ] && return 0; log "no $URING_PARAM"; return 1; }
	[ -n "${URING_ORIG:-}" ] || URING_ORIG=$(cat "$URING_PARAM")
	echo "$1" > "$URING_PARAM"
}

# whether the fuse module already lets mounts use io_uring (read only: scripts that must
# not change the global switch run their io_uring variants only when this is true)
uring_enabled() { [ "$(cat "$URING_PARAM" 2>/dev/null)" = Y ]; }

# Memory cgroups, v1 or v2.  memcg_init finds where to make one: the v1 memory
# controller's mount (limit file memory.limit_in_bytes), else the cgroup2 mount when the
# memory controller is enabled in its cgroup.subtree_control (memory.max).  It only
# reads: turning the controller on is left to the machine's owner.  Sets CGROOT, CGVER
# and CGLIMIT; returns 1 with the reason in CG_WHY.
memcg_init() {
	local v1 v2
	v1=$(awk '$3 == "cgroup" && $4 ~ /(^|,)memory(,|$)/ { print $2; exit }' /proc/mounts)
	if [ -n "$v1" ] && [ -w "$v1/cgroup.procs" ]; then
		CGROOT=$v1 CGVER=1 CGLIMIT=memory.limit_in_bytes
		return 0
	fi
	v2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
	if [ -n "$v2" ] && grep -qw memory "$v2/cgroup.subtree_control" 2>/dev/null; then
		CGROOT=$v2 CGVER=2 CGLIMIT=memory.max
		return 0
	fi
	CG_WHY="no writable v1 memory controller and no cgroup2 mount${v2:+ ($v2)} with memory"
	CG_WHY="$CG_WHY in cgroup.subtree_control"
	return 1
}

# make memory cgroup CGROOT/$1 with a limit of $2 MiB; sets CG (teardown removes it)
memcg_make() {
	CG=$CGROOT/$1
	mkdir "$CG" || { CG=; return 1; }
	echo "${2}M" > "$CG/$CGLIMIT"
}

# how many processes the OOM killer ended in CG (0 if the kernel does not say)
memcg_oom_kills() {
	local f=memory.oom_control
	[ "$CGVER" = 2 ] && f=memory.events
	awk '$1 == "oom_kill" { n = $2 } END { print n + 0 }' "$CG/$f" 2>/dev/null || echo 0
}

# undo what the state variables record; returns 1 if any step failed
teardown() {
	local rc=0
	if [ -n "$SAMPLER" ]; then
		kill "$SAMPLER" 2>/dev/null; wait "$SAMPLER" 2>/dev/null; SAMPLER=
	fi
	if [ -n "$SWAPDEV" ]; then
		swapoff "$SWAPDEV" || { log "swapoff $SWAPDEV failed"; rc=1; }
		SWAPDEV=
	fi
	if [ -n "$LOOPDEV" ]; then
		losetup -d "$LOOPDEV" || { log "losetup -d $LOOPDEV failed"; rc=1; }
		LOOPDEV=
	fi
	if [ -n "$MNT" ]; then
		for _ in 1 2 3 4 5 6 7 8 9 10; do
			mountpoint -q "$MNT" || break
			fusermount3 -u "$MNT" 2>/dev/null || umount "$MNT" 2>/dev/null || sleep 0.5
		done
		mountpoint -q "$MNT" && { log "could not unmount $MNT"; rc=1; }
	fi
	if [ -n "$DPID" ]; then
		for _ in $(seq 50); do
			kill -0 "$DPID" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$DPID" 2>/dev/null; then
			log "daemon $DPID still running after unmount: killing it"
			kill -9 "$DPID"; rc=1
		fi
		wait "$DPID"; DAEMON_RC=$?
		[ "$DAEMON_RC" = 0 ] || { log "daemon exited with status $DAEMON_RC"; rc=1; }
		DPID=
	fi
	if [ -n "$BACKFILE" ]; then
		rm -f -- "$BACKFILE"; BACKFILE=
	fi
	if [ -n "$BACKPRIV" ]; then
		rmdir -- "$BACKPRIV"; BACKPRIV=
	fi
	if [ -n "$MNT" ]; then
		rmdir "$MNT" 2>/dev/null; MNT=
	fi
	if [ -n "$ZRAM_USED" ]; then
		echo 1 > $ZRAM/reset || rc=1
		ZRAM_USED=
	fi
	if [ -n "${URING_ORIG:-}" ]; then
		echo "$URING_ORIG" > "$URING_PARAM" || rc=1
		URING_ORIG=
	fi
	if [ -n "$CG" ]; then
		for _ in 1 2 3 4 5 6 7 8 9 10; do
			rmdir "$CG" 2>/dev/null && break
			sleep 0.2
		done
		[ -d "$CG" ] && { log "could not remove $CG"; rc=1; }
		CG=
	fi
	return $rc
}

# shellcheck disable=SC2317  # called from the trap
bench_cleanup() {
	teardown
	layer_down
	[ -n "$TMP" ] && rm -rf -- "$TMP"
}

# layer_up DIR BYTES US: a slower disk under DIR's, the same for every device of a run: an
# image of BYTES in DIR, served as the file `disk` by slowdisk (contrib/bench/slowdisk.c:
# every read and write answered US microseconds after it arrived, the image's own O_DIRECT
# I/O inside that time, several requests at once), a loop device with direct I/O on that
# file, and a fresh ext4 on it, mounted on a directory of its own: LAYER_MNT.  US = 0 leaves
# the layer's own cost: the loop hop, the FUSE round trip and the image's I/O.  Needs
# $SLOWDISK (default: slowdisk next to this file).  Returns 1, logged, if any step fails.
layer_up() {
	local sd=${SLOWDISK:-$(dirname "${BASH_SOURCE[0]}")/slowdisk}
	[ -x "$sd" ] || { log "$sd missing: run make in $(dirname "$sd")"; return 1; }
	LAYER_IMG=$(mktemp "$1/$BENCH-layer.XXXXXX") || { LAYER_IMG=; return 1; }
	fallocate -l "$2" "$LAYER_IMG" || { log "fallocate $2 $LAYER_IMG failed"; return 1; }
	LAYER_FUSE=$(mktemp -d "/tmp/$BENCH-slowdisk.XXXXXX") || { LAYER_FUSE=; return 1; }
	"$sd" "$LAYER_FUSE" -f -o "image=$LAYER_IMG,lat_us=$3" 2> "$TMP/slowdisk.err" &
	LAYER_PID=$!
	for _ in $(seq 50); do
		[ -e "$LAYER_FUSE/disk" ] && mountpoint -q "$LAYER_FUSE" && break
		kill -0 "$LAYER_PID" 2>/dev/null || break
		sleep 0.1
	done
	[ -e "$LAYER_FUSE/disk" ] ||
		{ log "slowdisk did not come up: $(cat "$TMP/slowdisk.err")"; return 1; }
	LAYER_LOOP=$(losetup --find --show --direct-io=on "$LAYER_FUSE/disk") ||
		{ LAYER_LOOP=; return 1; }
	mkfs.ext4 -q -F "$LAYER_LOOP" || { log "mkfs.ext4 $LAYER_LOOP failed"; return 1; }
	LAYER_MNT=$(mktemp -d "/tmp/$BENCH-layer.XXXXXX") || { LAYER_MNT=; return 1; }
	if ! mount "$LAYER_LOOP" "$LAYER_MNT"; then
		rmdir "$LAYER_MNT"; LAYER_MNT=
		return 1
	fi
}

# fio at queue depth 1 on a file of the slower disk: what a 4 KiB O_DIRECT read costs
# there (key=value: iops, mean, p50, p99 in us); empty without fio
layer_latency() {
	command -v fio > /dev/null || return 0
	local f=$LAYER_MNT/fio.lat
	fio --name=lat --filename="$f" --size=256M --direct=1 --rw=randread --bs=4k \
		--iodepth=1 --ioengine=psync --runtime="${1:-5}" --time_based \
		--output-format=json 2> /dev/null | python3 -c '
import json, sys
j = json.load(sys.stdin)["jobs"][0]["read"]; c = j["clat_ns"]; p = c["percentile"]
print("read_iops=%d read_mean_us=%.1f read_p50_us=%.1f read_p99_us=%.1f" % (j["iops"],
      c["mean"] / 1e3, p["50.000000"] / 1e3, p["99.000000"] / 1e3))' 2> /dev/null
	rm -f -- "$f"
}

# undo layer_up, in reverse order
layer_down() {
	if [ -n "$LAYER_MNT" ]; then
		umount "$LAYER_MNT" && rmdir "$LAYER_MNT" || log "umount $LAYER_MNT failed"
		LAYER_MNT=
	fi
	if [ -n "$LAYER_LOOP" ]; then
		losetup -d "$LAYER_LOOP" || log "losetup -d $LAYER_LOOP failed"
		LAYER_LOOP=
	fi
	if [ -n "$LAYER_FUSE" ]; then
		for _ in 1 2 3 4 5 6 7 8 9 10; do
			mountpoint -q "$LAYER_FUSE" || break
			fusermount3 -u "$LAYER_FUSE" 2>/dev/null || umount "$LAYER_FUSE" 2>/dev/null ||
				sleep 0.5
		done
		mountpoint -q "$LAYER_FUSE" && log "could not unmount $LAYER_FUSE"
	fi
	if [ -n "$LAYER_PID" ]; then
		for _ in $(seq 50); do
			kill -0 "$LAYER_PID" 2>/dev/null || break
			sleep 0.1
		done
		kill -0 "$LAYER_PID" 2>/dev/null && { log "slowdisk still running: killing it"; kill -9 "$LAYER_PID"; }
		wait "$LAYER_PID" 2>/dev/null
		LAYER_PID=
	fi
	if [ -n "$LAYER_FUSE" ]; then
		rmdir "$LAYER_FUSE" 2>/dev/null; LAYER_FUSE=
	fi
	if [ -n "$LAYER_IMG" ]; then
		rm -f -- "$LAYER_IMG"
		LAYER_IMG=
	fi
}

# the median of the numbers on stdin (blank or newline separated); nan if none
median() {
	tr ' ' '\n' | grep . | sort -g | awk '{ a[NR] = $1 } END {
		if (NR == 0) print "nan"; else if (NR % 2) print a[(NR + 1) / 2];
		else printf "%.3f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

# $1 / $2 to three places; nan unless $1 is a number and $2 a positive one (0 / x is 0:
# a device that wrote nothing to the disk)
ratio() {
	awk -v a="$1" -v b="$2" 'BEGIN { if (a ~ /^[0-9.]+$/ && b + 0 > 0) printf "%.3f", a / b;
		else printf "nan" }'
}

# "median (min..max)" of the numbers on stdin; nan if none
spread() {
	local l
	l=$(tr ' ' '\n' | grep .)
	[ -n "$l" ] || { echo nan; return; }
	echo "$(echo "$l" | median) ($(echo "$l" | sort -g | sed -n '1p;$p' | paste -sd' ' |
		sed 's/ /../'))"
}

# the /proc/diskstats name of the block device under directory $1: the filesystem's own
# device (a whole disk, a partition or a device-mapper target); empty if it has none
# (tmpfs, btrfs's anonymous devices)
fs_blockdev() {
	local mm
	mm=$(stat -c '%Hd %Ld' "$1") || return 1
	awk -v mm="$mm" '$1 " " $2 == mm { print $3 }' /proc/diskstats
}

# what block device $1 has done since boot, from /proc/diskstats:
# "sectors_read sectors_written writes_completed sectors_discarded" (512-byte sectors,
# whatever the device's own sector size; discards are counted since Linux 4.18)
disk_counters() {
	awk -v d="$1" '$3 == d { print $6, $10, $8, ($17 == "" ? 0 : $17) }' /proc/diskstats
}

# install the traps (so every exit path tears down), then make TMP
bench_init() {
	trap bench_cleanup EXIT
	trap 'log interrupted; exit 130' INT TERM HUP
	TMP=$(mktemp -d "/tmp/$BENCH.XXXXXX")
}
