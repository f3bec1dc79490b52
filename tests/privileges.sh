#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck source-path=SCRIPTDIR
#
# Least privilege and locked memory (issue 9, parts 4 and 5).
#  - After start-up every thread of the daemon (the keeper and its worker)
#    has no capability left but CAP_IPC_LOCK, and that one only when
#    RLIMIT_MEMLOCK could not be raised to unlimited (then the arena needs it
#    to lock pages again); the same in the bounding set; NoNewPrivs is set;
#    the stats file says what was kept.  The keeper passes CAP_IPC_LOCK on to
#    the workers it execs as an ambient capability, and nothing else; the
#    worker keeps none inheritable or ambient.
#  - The unmount helper keeps CAP_SYS_ADMIN and nothing else, holds no
#    descriptor of the daemon's but its pipe, and a SIGTERM still unmounts.
#  - request_nice: set before the drop, every request thread has it (here
#    -5, which needs the CAP_SYS_NICE that is dropped afterwards), the
#    policy thread stays at 19.
#  - request_slice_us: every request thread has that time slice (no
#    privilege needed), the policy thread keeps the kernel's.
#  - Memory that cannot be locked stops the start (lock_memory=required, the
#    default), with a message that says what is at stake and what to set, in
#    the foreground and in the background (the parent's exit status); with
#    lock_memory=try the daemon starts and says memory_locked 0.
set -eu
. "$(dirname "$0")/lib.sh"

require_fuse
require_root
command -v setpriv >/dev/null || fail "setpriv not found (util-linux)"
command -v prlimit >/dev/null || fail "prlimit not found (util-linux)"
make_tmpdir

CAP_IPC_LOCK=14
CAP_SYS_ADMIN=21

# capfield PID TID FIELD: the hex value of FIELD (CapEff, ...) of a thread.
capfield() { awk -v f="$3:" '$1 == f { print $2 }' "/proc/$1/task/$2/status"; }
hex() { printf '%016x' "$1"; }

# ---- the daemon's threads after start-up ----------------------------------

zs_mount size=64M
pid=$ZS_PID
kept=$(zs_stat "$ZS_MNT" capabilities)
locked=$(zs_stat "$ZS_MNT" memory_locked)
[ "$(zs_stat "$ZS_MNT" no_new_privs)" = 1 ] || fail "stats: no_new_privs is not 1"
memlock=$(awk '/^Max locked memory/ { print $4 }' "/proc/$pid/limits")
# CAP_IPC_LOCK is kept exactly when memory is locked and its limit is not
# unlimited; nothing else is ever kept
if [ "$locked" = 1 ] && [ "$memlock" != unlimited ]; then
	want=$((1 << CAP_IPC_LOCK))
else
	want=0
fi
[ "$kept" = "$want" ] ||
	fail "stats: capabilities $kept, expected $want (memory_locked $locked, memlock limit $memlock)"
worker=$(pgrep -P "$pid" -x zswapfs) || fail "no worker (zswapfs child) of keeper $pid"
threads=0
for p in "$pid" "$worker"; do
	# what the keeper passes to the workers it execs
	inh=0
	[ "$p" != "$pid" ] || inh=$want
	for task in /proc/"$p"/task/*; do
		tid=${task##*/}
		[ "$p" = "$pid" ] || threads=$((threads + 1))
		for f in CapEff CapPrm CapBnd; do
			v=$(capfield "$p" "$tid" $f)
			[ "$v" = "$(hex "$want")" ] || fail "thread $tid: $f $v, expected $(hex "$want")"
		done
		for f in CapInh CapAmb; do
			v=$(capfield "$p" "$tid" $f)
			[ "$v" = "$(hex "$inh")" ] || fail "thread $tid: $f $v, expected $(hex "$inh")"
		done
		[ "$(awk '$1 == "NoNewPrivs:" { print $2 }' "$task/status")" = 1 ] ||
			fail "thread $tid: NoNewPrivs is not 1"
	done
done
[ "$threads" -ge 2 ] || fail "only $threads thread(s): expected the request, policy and log threads"
log "ok: $threads threads, each with capabilities $(hex "$want") (memory_locked $locked," \
	"memlock limit $memlock), NoNewPrivs 1"

zs_umount

# ---- request_nice ----------------------------------------------------------

# nice TASKDIR: a thread's nice value (field 19 of stat; comm has no blanks)
nice_of() { awk '{ print $19 }' "$1/stat"; }
zs_mount size=64M,threads=2,request_nice=-5
# the worker's threads serve (the keeper has it from before the drop, and
# every worker inherits it)
worker=$(pgrep -P "$ZS_PID" -x zswapfs) || fail "no worker (zswapfs child) of keeper $ZS_PID"
at=0
for task in /proc/"$worker"/task/*; do
	case $(cat "$task/comm") in
	zswapfs-policy) [ "$(nice_of "$task")" = 19 ] ||
		fail "the policy thread runs at nice $(nice_of "$task")" ;;
	*) [ "$(nice_of "$task")" = -5 ] && at=$((at + 1)) ;;
	esac
done
[ "$(nice_of "/proc/$worker/task/$worker")" = -5 ] ||
	fail "request thread 0 runs at nice $(nice_of "/proc/$worker/task/$worker"), not -5"
[ "$at" -ge 2 ] || fail "only $at thread(s) at nice -5: two request threads were asked for"
dd if=/dev/urandom of="$ZS_MNT/swap" bs=1M count=4 oflag=direct status=none ||
	fail "writing at request_nice=-5 failed"
# a worker started after a death has it too
kill -KILL "$worker"
zs_stat "$ZS_MNT" worker_generation >/dev/null
worker2=$(pgrep -P "$ZS_PID" -x zswapfs) || fail "no worker after a kill"
[ "$worker2" != "$worker" ] || fail "the killed worker still serves"
[ "$(nice_of "/proc/$worker2/task/$worker2")" = -5 ] ||
	fail "the restarted worker runs at nice $(nice_of "/proc/$worker2/task/$worker2"), not -5"
log "ok: request_nice=-5: $at threads at -5, the policy thread at 19"
zs_umount

# ---- request_slice_us ------------------------------------------------------

# slice TASKDIR: a thread's time slice in ns (se.slice: Linux 6.6+, EEVDF)
slice_of() { awk '$1 == "se.slice" { print $3 }' "$1/sched"; }
if [ -n "$(slice_of "/proc/$$")" ]; then
	zs_mount size=64M,threads=2,request_slice_us=200
	# the worker's threads serve (keeper.h)
	worker=$(pgrep -P "$ZS_PID" -x zswapfs) || fail "no worker (zswapfs child) of keeper $ZS_PID"
	at=0
	for task in /proc/"$worker"/task/*; do
		case $(cat "$task/comm") in
		zswapfs-policy) [ "$(slice_of "$task")" != 200000 ] ||
			fail "the policy thread has the request threads' slice" ;;
		*) [ "$(slice_of "$task")" = 200000 ] && at=$((at + 1)) ;;
		esac
	done
	[ "$(slice_of "/proc/$worker/task/$worker")" = 200000 ] ||
		fail "request thread 0 has a slice of $(slice_of "/proc/$worker/task/$worker") ns"
	[ "$at" -ge 2 ] || fail "only $at thread(s) with a 200 us slice: two request threads"
	dd if=/dev/urandom of="$ZS_MNT/swap" bs=1M count=4 oflag=direct status=none ||
		fail "writing at request_slice_us=200 failed"
	# a worker started after a death has it too
	kill -KILL "$worker"
	zs_stat "$ZS_MNT" worker_generation >/dev/null
	worker2=$(pgrep -P "$ZS_PID" -x zswapfs) || fail "no worker after a kill"
	[ "$worker2" != "$worker" ] || fail "the killed worker still serves"
	[ "$(slice_of "/proc/$worker2/task/$worker2")" = 200000 ] ||
		fail "the restarted worker's request thread 0 has a slice of $(slice_of "/proc/$worker2/task/$worker2") ns"
	log "ok: request_slice_us=200: $at threads with a 200 us slice, not the policy thread"
	zs_umount
else
	log "skipped request_slice_us: no se.slice in /proc/self/sched (kernel before EEVDF)"
fi
zs_mount size=64M
pid=$ZS_PID

# the unmount helper: the daemon's child, CAP_SYS_ADMIN alone, no /dev/fuse
helper=$(pgrep -P "$pid" -x zswapfs-umount) || fail "no zswapfs-umount child of $pid"
for f in CapEff CapPrm CapBnd; do
	v=$(capfield "$helper" "$helper" $f)
	[ "$v" = "$(hex $((1 << CAP_SYS_ADMIN)))" ] || fail "unmount helper: $f $v"
done
[ "$(awk '$1 == "NoNewPrivs:" { print $2 }' "/proc/$helper/status")" = 1 ] ||
	fail "unmount helper: NoNewPrivs is not 1"
fds=$(ls "/proc/$helper/fd")
[ "$(wc -w <<<"$fds")" -le 4 ] || fail "unmount helper holds descriptors: $(ls -l "/proc/$helper/fd")"
! ls -l "/proc/$helper/fd" | grep -q /dev/fuse || fail "unmount helper holds /dev/fuse"
# and the stop it is there for: SIGTERM unmounts and ends both
kill -TERM "$pid"
zs_wait_exit 10 || fail "SIGTERM did not end the daemon in 10 s"
[ "$ZS_RC" = 0 ] || fail "daemon exited $ZS_RC on SIGTERM"
zs_ended
for ((i = 0; i < 50; i++)); do kill -0 "$helper" 2>/dev/null || break; sleep 0.1; done
! kill -0 "$helper" 2>/dev/null || fail "the unmount helper outlived the daemon"
log "ok: unmount helper $helper: CAP_SYS_ADMIN only, $(wc -w <<<"$fds") descriptors; SIGTERM unmounted"

# ---- memory that cannot be locked -------------------------------------------

# no CAP_IPC_LOCK (nor CAP_SYS_RESOURCE to raise the limit) and a limit of 0
unlockable() {
	prlimit --memlock=0:0 setpriv --bounding-set=-ipc_lock,-sys_resource \
		--inh-caps=-ipc_lock,-sys_resource -- "$@"
}

if zs_sanitized; then
	# AddressSanitizer cannot lock memory at all: the build's default is
	# lock_memory=try, and asking for required is refused.
	zs_start_refused "sanitizer build, lock_memory=required" -o size=64M,lock_memory=required
	[ "$ZS_RC" -ne 0 ] || fail "lock_memory=required in a sanitizer build: exit status 0"
	grep -q "AddressSanitizer" "$ZS_LOG" || { cat "$ZS_LOG" >&2; fail "no reason given"; }
	log "ok: sanitizer build: lock_memory=required refused ($(grep -m1 lock_memory "$ZS_LOG"))"
else
	ZSWAPFS_REAL=$ZSWAPFS
	ZSWAPFS=$ZS_TMP/unlockable
	printf '#!/bin/sh\nexec prlimit --memlock=0:0 setpriv --bounding-set=-ipc_lock,-sys_resource --inh-caps=-ipc_lock,-sys_resource -- "%s" "$@"\n' \
		"$ZSWAPFS_REAL" >"$ZSWAPFS"
	chmod +x "$ZSWAPFS"
	zs_start_refused "memory cannot be locked" -o size=64M
	[ "$ZS_RC" -ne 0 ] || fail "unlockable memory: exit status 0"
	grep -q "cannot lock the daemon's memory" "$ZS_LOG" &&
		grep -q "deadlock" "$ZS_LOG" && grep -q "lock_memory=try" "$ZS_LOG" ||
		{ cat "$ZS_LOG" >&2; fail "the refusal does not say what is at stake and what to set"; }
	log "ok: refused: $(grep -m1 "cannot lock" "$ZS_LOG" | cut -c1-100)..."
	ZSWAPFS=$ZSWAPFS_REAL

	# in the background: the parent's exit status carries the refusal
	mnt=$(mktemp -d "${TMPDIR:-/tmp}/zswapfs-mnt.XXXXXX")
	push_undo rmdir -- "$mnt"
	rc=0
	unlockable "$ZSWAPFS" zswapfs "$mnt" -o size=64M 2>"$ZS_TMP/bg.log" || rc=$?
	[ "$rc" -ne 0 ] || { umount "$mnt"; fail "background start with unlockable memory: exit 0"; }
	! _zs_is_mounted "$mnt" || fail "a refused background start left $mnt mounted"
	grep -q "cannot lock the daemon's memory" "$ZS_TMP/bg.log" ||
		fail "background refusal: $(cat "$ZS_TMP/bg.log")"
	log "ok: in the background too: exit status $rc, nothing mounted"

	ZSWAPFS=$ZS_TMP/unlockable
	zs_mount size=64M,lock_memory=try
	ZSWAPFS=$ZSWAPFS_REAL
	[ "$(zs_stat "$ZS_MNT" memory_locked)" = 0 ] || fail "lock_memory=try: memory_locked is not 0"
	[ "$(zs_stat "$ZS_MNT" capabilities)" = 0 ] ||
		fail "lock_memory=try without locked memory kept capabilities"
	grep -q "lock_memory=try" "$ZS_LOG" || fail "lock_memory=try: no warning in the log"
	dd if=/dev/urandom of="$ZS_TMP/d" bs=64K count=4 status=none
	dd if="$ZS_TMP/d" of="$ZS_MNT/swap" bs=64K oflag=direct conv=notrunc status=none
	cmp -s "$ZS_TMP/d" <(head -c 256K "$ZS_MNT/swap") || fail "lock_memory=try: data differs"
	zs_umount
	log "ok: lock_memory=try starts without locked memory, warns, says memory_locked 0"
fi
exit 0
