# shellcheck shell=bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# benchlib.sh - set-up and tear-down shared by ratio.sh and swapbench.sh (sourced, not run).
#
# Provides log(), zram_busy(), start_fuse(), teardown() and bench_init() (the EXIT and
# signal traps plus the temporary directory).  The rule: every resource a script creates is
# recorded in one of the state variables below as soon as it exists, and teardown() undoes
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

ZRAM=/sys/block/zram0
PIN=''
SAMPLER='' SWAPDEV='' LOOPDEV='' MNT='' DPID='' BACKFILE='' BACKPRIV='' ZRAM_USED='' CG='' TMP=''
DAEMON_RC=''

log() { echo "$BENCH: $*" >&2; }

# zram0 set up (or swapped on) by someone else
zram_busy() {
	[ "$(cat $ZRAM/disksize)" != 0 ] || grep -q '^/dev/zram0 ' /proc/swaps
}

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
	[ -n "$TMP" ] && rm -rf -- "$TMP"
}

# install the traps (so every exit path tears down), then make TMP
bench_init() {
	trap bench_cleanup EXIT
	trap 'log interrupted; exit 130' INT TERM HUP
	TMP=$(mktemp -d "/tmp/$BENCH.XXXXXX")
}
