# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck shell=bash
#
# Helpers shared by the zswapfs integration tests.  Source it from a bash
# script right after `set -eu`:
#
#	. "$(dirname "$0")/lib.sh"
#
# Exit codes follow automake: 0 pass, 1 fail, 77 skip.  Every piece of system
# state a test creates (mount, daemon, loop device, swap, cgroup, zram, temp
# dir) is registered with push_undo at the moment it is created, and undone in
# reverse order by the EXIT trap whatever path the script takes.
#
# Every pipeline's status counts (pipefail): a program under test that
# crashes, or that AddressSanitizer stops, after printing the right output
# fails the pipeline.  So never pipe into `grep -q` or `head` from a program
# whose status matters (they stop reading early and it dies of SIGPIPE):
# capture its output first.
#
# Nothing that talks to a mount may hang the suite: run it under zs_run (or
# zs_ctl, zs_stat), which on a deadline aborts the test's FUSE connections
# and fails with "hang".

set -o pipefail

ZS_TEST=$(basename "$0" .sh)
_zs_here=$(cd "$(dirname "$0")" && pwd)
: "${top_builddir:=$_zs_here/..}"
: "${top_srcdir:=$_zs_here/..}"
# absolute: make passes "." and the tests run commands from other directories
top_builddir=$(cd "$top_builddir" && pwd)
top_srcdir=$(cd "$top_srcdir" && pwd)
ZSWAPFS=${ZSWAPFS:-$top_builddir/src/zswapfs}
MEMHOG=${MEMHOG:-$top_builddir/tests/memhog}
# The system interpreter, when there is one: version-manager shims in PATH
# can take a second to start.
if [ -z "${PYTHON-}" ]; then
	if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi
fi

log() { printf '%s: %s\n' "$ZS_TEST" "$*" >&2; }
fail() { log "FAIL: $*"; exit 1; }
skip() { log "SKIP: $*"; exit 77; }

# ---- clean-up registry ------------------------------------------------------

_zs_undo=()

# push_undo CMD [ARG...]: run CMD ARG... at exit (last pushed runs first).
push_undo() { _zs_undo+=("$(printf '%q ' "$@")"); }

# drop_undo CMD [ARG...]: forget the latest identical entry (the test undid it).
drop_undo() {
	local want idx=("${!_zs_undo[@]}") n
	want=$(printf '%q ' "$@")
	for ((n = ${#idx[@]} - 1; n >= 0; n--)); do
		if [ "${_zs_undo[idx[n]]}" = "$want" ]; then
			unset '_zs_undo[idx[n]]'
			return 0
		fi
	done
	return 1
}

_zs_cleanup() {
	local rc=$? idx=("${!_zs_undo[@]}") n
	set +e
	trap - EXIT INT TERM
	# the array has holes where drop_undo removed entries: walk its indices
	for ((n = ${#idx[@]} - 1; n >= 0; n--)); do
		eval "${_zs_undo[idx[n]]}" || log "clean-up step failed: ${_zs_undo[idx[n]]}"
	done
	_zs_undo=()
	exit "$rc"
}
trap _zs_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- requirements -----------------------------------------------------------

require_fuse() {
	[ -c /dev/fuse ] || skip "/dev/fuse is not available"
	[ -x "$ZSWAPFS" ] || fail "daemon not built: $ZSWAPFS"
}

require_root() {
	[ "$(id -u)" -eq 0 ] || skip "needs root (swap, loop devices, cgroups)"
}

# require_memory_cgroup: skip unless a memory cgroup can be made, with the
# v1 memory controller or with cgroup v2 (see zs_memcg_find).
require_memory_cgroup() {
	zs_memcg_find || skip "no usable memory cgroup: $ZS_CG_WHY"
	log "memory cgroups: v$ZS_CG_VERSION, made under $ZS_CG_PARENT"
}

require_memhog() {
	[ -x "$MEMHOG" ] || fail "memhog not built: $MEMHOG (make check builds it)"
}

# ---- temporary files ------------------------------------------------------------

# make_tmpdir: sets ZS_TMP to a fresh directory removed at exit.
make_tmpdir() {
	local base=${TMPDIR:-/tmp}
	# Tests keep backing files here, and the daemon refuses a backing file
	# on tmpfs or ramfs (their pages may go to swap: ours).  Where /tmp is
	# one of those, as on many distributions, work on the disk.
	case $(stat -f -c %T "$base") in
	tmpfs | ramfs) base=/var/tmp ;;
	esac
	ZS_TMP=$(mktemp -d "$base/zswapfs-$ZS_TEST.XXXXXX")
	push_undo rm -rf -- "$ZS_TMP"
}

# ---- the daemon ---------------------------------------------------------------

_zs_is_mounted() { awk -v m="$1" '$2 == m { f = 1 } END { exit !f }' /proc/mounts; }

# _zs_teardown MOUNTPOINT PID: unmount, wait for the daemon, remove the dir.
_zs_teardown() {
	local mnt=$1 pid=$2 i loops
	# Never pull the daemon from under a live swap device (processes would
	# lose their pages): if swapoff failed, leave it all and say so.
	loops=$(losetup -n -O NAME -j "$mnt/swap" 2>/dev/null) || loops=
	for i in $loops; do
		if awk -v d="$i" '$1 == d { f = 1 } END { exit !f }' /proc/swaps; then
			log "$i on $mnt/swap is still swap: leaving daemon $pid and the mount alone"
			return 1
		fi
	done
	if _zs_is_mounted "$mnt"; then
		fusermount3 -u "$mnt" 2>/dev/null || umount "$mnt" 2>/dev/null ||
			umount -l "$mnt" || log "cannot unmount $mnt"
	fi
	for ((i = 0; i < 50; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		log "daemon $pid still running after unmount: SIGTERM"
		kill -TERM "$pid"
		sleep 1
		kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
	fi
	wait "$pid" 2>/dev/null
	rmdir -- "$mnt" 2>/dev/null
	return 0
}

# ---- FUSE over io_uring ---------------------------------------------------------

# The kernel lets a daemon use io_uring only while the fuse module's
# enable_uring parameter is Y (read at each mount's FUSE_INIT).  With
# ZS_FUSE_URING=1 in the environment, zs_start sets it to Y (and the clean-up
# puts back what it was), so a test written for /dev/fuse runs over the rings;
# zs_check_transport then checks that they were used.
_zs_uring_param=/sys/module/fuse/parameters/enable_uring

zs_uring_enable() {
	[ -e "$_zs_uring_param" ] ||
		skip "this kernel has no FUSE over io_uring ($_zs_uring_param is missing)"
	if [ -z "${_zs_uring_saved-}" ]; then
		_zs_uring_saved=$(cat "$_zs_uring_param")
		push_undo _zs_uring_restore
	fi
	echo Y >"$_zs_uring_param"
}
_zs_uring_restore() { echo "$_zs_uring_saved" >"$_zs_uring_param"; }

# zs_check_transport MOUNT: with ZS_FUSE_URING=1, fail unless MOUNT's daemon
# has served requests through io_uring.
zs_check_transport() {
	[ "${ZS_FUSE_URING:-0}" = 1 ] || return 0
	[ "$(zs_stat "$1" fuse_transport)" = io_uring ] ||
		fail "ZS_FUSE_URING=1 but the daemon on $1 serves through $(zs_stat "$1" fuse_transport)"
	log "served through io_uring: $(zs_stat "$1" uring_reqs) ring requests"
}

# zs_start [ARG...]: start the daemon (-f) in the background of this script on
# a fresh mount point, with ARG... after the mount point; $ZS_SOURCE, when set,
# goes before it as fstab would pass it.  Sets ZS_MNT, ZS_PID, ZS_LOG.  Does
# not wait for the mount: see zs_mount.
zs_start() {
	local src=()
	[ -z "${ZS_SOURCE-}" ] || src=("$ZS_SOURCE")
	[ -n "${ZS_TMP-}" ] || make_tmpdir
	ZS_MNT=$(mktemp -d "${TMPDIR:-/tmp}/zswapfs-mnt.XXXXXX")
	ZS_LOG=$ZS_TMP/daemon.$RANDOM.log
	[ "${ZS_FUSE_URING:-0}" != 1 ] || zs_uring_enable
	# FUSE over io_uring is not restart-safe: only without worker restart
	[ "${ZS_FUSE_URING:-0}" != 1 ] || set -- "$@" -o worker_restart=false
	# setsid: a ^C on the terminal must not kill the daemon while a swap device
	# still sits on it; the clean-up then takes things down in order.
	setsid "$ZSWAPFS" "${src[@]}" "$ZS_MNT" -f "$@" >"$ZS_LOG" 2>&1 </dev/null &
	ZS_PID=$!
	push_undo _zs_teardown "$ZS_MNT" "$ZS_PID"
	zs_watch_mount "$ZS_MNT"
}

# zs_wait_mounted DESC: wait (at most 10 s) until the daemon of the last
# zs_start has mounted; fail, with its log, if it exits or never does.
zs_wait_mounted() {
	local i
	for ((i = 0; i < 100; i++)); do
		if awk -v m="$ZS_MNT" '$2 == m && $3 == "fuse.zswapfs" { f = 1 } END { exit !f }' \
			/proc/mounts; then
			zs_run 10 test -f "$ZS_MNT/swap" || fail "mounted, but $ZS_MNT/swap is missing"
			return 0
		fi
		if ! kill -0 "$ZS_PID" 2>/dev/null; then
			cat "$ZS_LOG" >&2
			fail "daemon exited before mounting ($1)"
		fi
		sleep 0.1
	done
	cat "$ZS_LOG" >&2
	fail "no fuse.zswapfs mount on $ZS_MNT after 10 s ($1)"
}

# zs_mount [OPTS]: mount with "-o OPTS" (none when empty) and wait until the
# mount is live.  Sets ZS_MNT, ZS_PID, ZS_LOG.
zs_mount() {
	if [ -n "${1-}" ]; then zs_start -o "$1"; else zs_start; fi
	zs_wait_mounted "options: ${1-none}"
}

# zs_start_refused DESC [ARG...]: start the daemon with ARG... and expect it
# to refuse: it must exit within 5 s and leave nothing mounted.  Sets ZS_RC
# to its exit status (the caller judges it) and keeps ZS_LOG.
# shellcheck disable=SC2034 # ZS_RC is read by the calling test
zs_start_refused() {
	local desc=$1 i
	shift
	zs_start "$@"
	for ((i = 0; i < 50; i++)); do
		kill -0 "$ZS_PID" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$ZS_PID" 2>/dev/null; then
		cat "$ZS_LOG" >&2
		fail "$desc: daemon still running after 5 s"
	fi
	ZS_RC=0
	wait "$ZS_PID" || ZS_RC=$?
	_zs_is_mounted "$ZS_MNT" && fail "$desc: daemon exited but left $ZS_MNT mounted"
	drop_undo _zs_teardown "$ZS_MNT" "$ZS_PID"
	rmdir -- "$ZS_MNT"
}

# zs_umount: unmount the last zs_mount and check that the daemon exits 0.
zs_umount() {
	local mnt=$ZS_MNT pid=$ZS_PID rc i
	# A reader of the mount that the test is done with (the dd of a
	# cmp <(dd ...)) may still be closing its file: busy for a moment.
	for ((i = 0; i < 20; i++)); do
		fusermount3 -u "$mnt" 2>"$ZS_TMP/umount.err" && break
		grep -q "busy" "$ZS_TMP/umount.err" || break
		sleep 0.1
	done
	[ "$i" -lt 20 ] && ! [ -s "$ZS_TMP/umount.err" ] ||
		{ cat "$ZS_TMP/umount.err" >&2; fail "fusermount3 -u $mnt failed"; }
	for ((i = 0; i < 100; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$pid" 2>/dev/null && fail "daemon $pid still running 10 s after unmount"
	rc=0
	wait "$pid" || rc=$?
	drop_undo _zs_teardown "$mnt" "$pid" || true
	rmdir -- "$mnt"
	[ "$rc" -eq 0 ] || { cat "$ZS_LOG" >&2; fail "daemon exited with status $rc after unmount"; }
}

# zs_wait_exit SECONDS: wait for the daemon of the last zs_mount to end by
# itself (a signal, umount); ZS_RC gets its exit status.  Returns 1 if it is
# still running.
zs_wait_exit() {
	local i
	for ((i = 0; i < $1 * 10; i++)); do
		kill -0 "$ZS_PID" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$ZS_PID" 2>/dev/null && return 1
	ZS_RC=0
	wait "$ZS_PID" || ZS_RC=$?
}

# zs_ended: after zs_wait_exit, check that nothing is left mounted and
# forget the clean-up of that daemon.
zs_ended() {
	drop_undo _zs_teardown "$ZS_MNT" "$ZS_PID" || true
	_zs_is_mounted "$ZS_MNT" && fail "$ZS_MNT still mounted after the daemon ended"
	rmdir -- "$ZS_MNT"
}

# zs_alive: fail if the daemon of the last zs_mount is gone.
zs_alive() {
	kill -0 "$ZS_PID" 2>/dev/null || { cat "$ZS_LOG" >&2; fail "the daemon (pid $ZS_PID) died"; }
}

# zs_daemon_pids REGEX: pids of daemon processes whose command line matches
# REGEX (as pgrep -f); the daemon's unmount helper (named zswapfs-umount,
# with the daemon's command line) is not one of them.
zs_daemon_pids() {
	local p
	for p in $(pgrep -f "$1"); do
		[ "$(cat "/proc/$p/comm" 2>/dev/null)" = zswapfs ] && echo "$p"
	done
	return 0
}

# zs_fuse_abort MOUNT: abort the FUSE connection of MOUNT through fusectl, so
# that every process waiting on it gets an error instead of hanging: a test's
# last resort against a hung daemon.  Reads /proc/self/mountinfo, never the
# mount itself (a stat of a hung mount would hang too).
zs_fuse_abort() {
	local dev ctl=/sys/fs/fuse/connections
	dev=$(awk -v m="$1" '$5 == m { d = $3 } END { print d }' /proc/self/mountinfo)
	[ -n "$dev" ] || return 0
	if ! awk -v c="$ctl" '$2 == c { f = 1 } END { exit !f }' /proc/mounts; then
		mount -t fusectl fusectl "$ctl" 2>/dev/null || true
	fi
	if echo 1 >"$ctl/${dev#*:}/abort" 2>/dev/null; then
		log "aborted the FUSE connection of $1 (device $dev)"
	else
		log "could not abort the FUSE connection of $1 (device $dev)"
	fi
}

# zs_stat MOUNT KEY: print the value of KEY in MOUNT/stats; fail if absent.
zs_stat() {
	local v
	local rc=0
	# awk reads the mount: a hung daemon must not hang the test
	v=$(timeout 20 awk -v k="$2" '$1 == k { print $2; f = 1 } END { exit !f }' "$1/stats") ||
		rc=$?
	[ "$rc" -ne 124 ] || _zs_hang "reading $1/stats took more than 20 s"
	[ "$rc" -eq 0 ] || fail "stats key '$2' missing in $1/stats"
	printf '%s\n' "$v"
}

# zs_stats_line MOUNT KEY...: "KEY VALUE" of each KEY, on one line, for logs.
zs_stats_line() {
	local mnt=$1 keys
	shift
	keys=$(IFS='|'; echo "$*")
	zs_run 20 grep -E "^($keys) " "$mnt/stats" | tr '\n' ' '
}

# zs_sanitized: true when the daemon is an AddressSanitizer build, whose
# shadow memory and quarantine make its RSS say nothing of the daemon's own.
zs_sanitized() {
	local libs
	libs=$(ldd "$ZSWAPFS" 2>/dev/null) || return 1
	grep -q libasan <<<"$libs"
}

# zs_stat_wait MOUNT KEY VALUE [SECONDS]: wait (default 20 s) until KEY in
# MOUNT/stats reads VALUE, for work the daemon does in the background.
zs_stat_wait() {
	local i tenths=$(( ${4:-20} * 10 ))
	for ((i = 0; i < tenths; i++)); do
		[ "$(zs_stat "$1" "$2")" = "$3" ] && return 0
		sleep 0.1
	done
	fail "$2 in $1/stats is $(zs_stat "$1" "$2"), expected $3 within ${4:-20} s"
}

# zs_wait_until SECONDS WHAT COMMAND...: run COMMAND every 50 ms until it
# succeeds.  For an effect of another thread or process: a test never
# sleeps a fixed time and hopes it happened; it polls for the effect and
# fails after the deadline with "WHAT: not seen within SECONDS s".
zs_wait_until() {
	local secs=$1 what=$2 end
	shift 2
	end=$((SECONDS + secs))
	until "$@"; do
		[ "$SECONDS" -lt "$end" ] || fail "$what: not seen within $secs s"
		sleep 0.05
	done
}

# zs_stat_above MOUNT KEY N: true when KEY in MOUNT/stats is above N; for
# zs_wait_until, which runs its command as given each time (a "$(zs_stat
# ...)" in its arguments would be read once, before the first try).
zs_stat_above() { [ "$(zs_stat "$1" "$2")" -gt "$3" ]; }

# zs_log_wait REGEX [SECONDS]: until the daemon's log ($ZS_LOG) has a line
# matching REGEX (grep -E), 30 s at most.
zs_log_wait() {
	zs_wait_until "${2:-30}" "a line '$1' in the daemon's log" grep -qE -- "$1" "$ZS_LOG"
}

# ---- hangs ----------------------------------------------------------------------

# The test's mounts (zs_start, zs_watch_mount): what a hang aborts.
_zs_mounts=()

# zs_watch_mount MOUNT: a FUSE mount the test made without zs_start (fstab,
# background mode), to be aborted too when a command hangs.
zs_watch_mount() { _zs_mounts+=("$1"); }

# _zs_hang DESC: something did not end in time.  Abort every FUSE connection
# of the test, so that whatever still waits on the daemon gets an error and
# the clean-up can run, and fail.
_zs_hang() {
	local m
	for m in "${_zs_mounts[@]}"; do zs_fuse_abort "$m"; done
	fail "hang: $*"
}

# _zs_watchdog SECONDS [PID...]: run in the background; after SECONDS, abort
# the test's FUSE connections, kill PID... and exit 3.  It is ended before
# that with _zs_watchdog_end, by SIGKILL: a subshell that gets a catchable
# signal before it has reset the test's traps would run the test's own
# clean-up (unmount, rm -rf) in the middle of the test.  It sleeps a tenth of
# a second at a time, so that it leaves no sleep running for long.
_zs_watchdog() {
	local tenths=$(($1 * 10)) i m p
	shift
	for ((i = 0; i < tenths; i++)); do
		sleep 0.1 >/dev/null 2>&1 || true
	done
	for m in "${_zs_mounts[@]}"; do zs_fuse_abort "$m"; done
	for p; do kill -KILL "$p" 2>/dev/null || true; done
	exit 3
}

# _zs_watchdog_end PID: end a watchdog; _zs_fired is 1 if it had fired.
_zs_watchdog_end() {
	local rc=0
	kill -KILL "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || rc=$?
	_zs_fired=$((rc == 3))
}

# zs_run SECONDS CMD [ARG...]: run CMD (a program, not a shell function)
# and return its exit status; if it has not ended after SECONDS, the test's
# FUSE connections are aborted and the test fails with "hang".  Aborting is
# what ends a process that waits in the kernel for a loop device's I/O (no
# signal does); timeout(1), a little later, kills anything else.  Every
# fio, dd and other command that reads or writes a mount runs under it;
# SECONDS is many times what the command takes on a loaded machine.
zs_run() {
	local secs=$1 rc=0 wd
	shift
	_zs_watchdog "$secs" </dev/null >/dev/null &
	wd=$!
	timeout -k 5 $((secs + 10)) "$@" || rc=$?
	_zs_watchdog_end "$wd"
	# (a watchdog that fired has aborted the connections already)
	[ "$_zs_fired" = 0 ] || fail "hang: '$*' did not end within $secs s"
	[ "$rc" -ne 124 ] || _zs_hang "'$*' did not end within $secs s"
	return "$rc"
}

# zs_ctl_raw MOUNT TEXT...: write each TEXT to MOUNT/control, each in one
# write(2) of its own and in a row (microseconds apart); print for each "ok"
# or the errno's name (EINVAL, EBUSY...), one a line.  TEXT takes Python's
# escapes: \n, \0, \xNN.
zs_ctl_raw() {
	local mnt=$1
	shift
	zs_run 20 "$PYTHON" -c '
import errno, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
for text in sys.argv[2:]:
    data = text.encode("latin-1").decode("unicode_escape").encode("latin-1")
    try:
        n = os.write(fd, data)
        print("ok" if n == len(data) else "short")
    except OSError as e:
        print(errno.errorcode.get(e.errno, e.errno))
' "$mnt/control" "$@"
}

# zs_ctl MOUNT WORD...: write the command "WORD..." and a newline to
# MOUNT/control in one write(2).  Its status; on a refusal the shell's
# message names the errno ("Invalid argument", "Device or resource busy").
zs_ctl() {
	local mnt=$1
	shift
	zs_run 20 "$BASH" -c 'printf "%s\n" "$1" >"$2"' zs_ctl "$*" "$mnt/control"
}

# ---- swap on the mount ------------------------------------------------------

# zs_swapon MOUNT: loop device over MOUNT/swap, mkswap, swapon --discard.
# Sets ZS_LOOP.
zs_swapon() {
	ZS_LOOP=$(zs_run 30 losetup --find --show --direct-io=on "$1/swap") ||
		fail "losetup on $1/swap failed"
	push_undo losetup -d "$ZS_LOOP"
	zs_run 60 mkswap "$ZS_LOOP" >/dev/null || fail "mkswap $ZS_LOOP failed"
	# the highest priority, so that our device is the one used even when the
	# machine has other swap
	zs_run 60 swapon --discard --priority 32767 "$ZS_LOOP" ||
		fail "swapon --discard $ZS_LOOP failed"
	# timeout: a swapoff that cannot read its pages back must not hang CI
	push_undo timeout 120 swapoff "$ZS_LOOP"
}

# zs_swapoff: swapoff and detach the device of the last zs_swapon (every
# page comes back through the daemon: a hang fails).
zs_swapoff() {
	zs_run 120 swapoff "$ZS_LOOP" || fail "swapoff $ZS_LOOP failed"
	drop_undo timeout 120 swapoff "$ZS_LOOP"
	losetup -d "$ZS_LOOP" || fail "losetup -d $ZS_LOOP failed"
	drop_undo losetup -d "$ZS_LOOP"
}

# zram_swapon SIZE: kernel zram0 as swap, for comparing against the real thing
# (self-check of the tests).  Only ever uses an unused zram0.  Sets ZS_LOOP.
zram_swapon() {
	local z=/sys/block/zram0
	[ -d $z ] || modprobe zram 2>/dev/null || skip "no zram"
	[ "$(cat $z/disksize)" = 0 ] || skip "zram0 is in use"
	push_undo _zs_zram_reset
	echo lz4 >$z/comp_algorithm
	echo "$1" >$z/disksize
	mkswap /dev/zram0 >/dev/null
	swapon --discard --priority 32767 /dev/zram0
	push_undo timeout 120 swapoff /dev/zram0
	ZS_LOOP=/dev/zram0
}
_zs_zram_reset() { echo 1 >/sys/block/zram0/reset; }

# ---- memory cgroups (v1 or v2) ----------------------------------------------------

# Where the hierarchies are looked up: tests/memcg_find.sh points these at a
# fake tree to test the choice below on machines that lack one or the other.
ZS_PROC_MOUNTS=${ZS_PROC_MOUNTS:-/proc/self/mounts}
ZS_PROC_CGROUP=${ZS_PROC_CGROUP:-/proc/self/cgroup}

# _zs_has_word FILE WORD: WORD is one of the words of FILE (a cgroup list).
_zs_has_word() {
	awk -v w="$2" '{ for (i = 1; i <= NF; i++) if ($i == w) f = 1 } END { exit !f }' \
		"$1" 2>/dev/null
}

# zs_memcg_find: find where the test can make a memory cgroup.  Sets
# ZS_CG_VERSION (1 or 2) and ZS_CG_PARENT, the directory to make it in; or
# returns 1 with ZS_CG_WHY saying why there is none.
#   v1: a cgroup (v1) mount of the memory controller.
#   v2: the cgroup2 mount's root, when memory is in its cgroup.controllers
#       and enabled in its cgroup.subtree_control, which we do if need be
#       (the root cgroup may have processes and controlled children at
#       once); else, when the root refuses (a cgroup namespace's root that
#       holds processes), the nearest ancestor of our own cgroup where
#       memory is enabled for children and that we may write: a subtree
#       delegated to us (systemd's Delegate=, a container set up for
#       nesting).
zs_memcg_find() {
	local dev mnt type opts rest v2='' own d
	ZS_CG_VERSION='' ZS_CG_PARENT='' ZS_CG_WHY=''
	while read -r dev mnt type opts rest; do
		case $type in
		cgroup)
			case ,$opts, in *,memory,*) ;; *) continue ;; esac
			if [ -f "$mnt/memory.limit_in_bytes" ] && [ -w "$mnt" ]; then
				ZS_CG_VERSION=1 ZS_CG_PARENT=$mnt
				return 0
			fi
			ZS_CG_WHY="the cgroup v1 memory controller at $mnt is not writable; "
			;;
		cgroup2) [ -n "$v2" ] || v2=$mnt ;;
		esac
	done <"$ZS_PROC_MOUNTS"
	if [ -z "$v2" ]; then
		ZS_CG_WHY+="no cgroup v1 memory controller and no cgroup2 mount in $ZS_PROC_MOUNTS"
		return 1
	fi
	if ! _zs_has_word "$v2/cgroup.controllers" memory; then
		ZS_CG_WHY+="cgroup2 at $v2 has no memory controller (cgroup.controllers:"
		ZS_CG_WHY+=" $(cat "$v2/cgroup.controllers" 2>/dev/null)) and there is no v1 one"
		return 1
	fi
	if _zs_has_word "$v2/cgroup.subtree_control" memory; then
		ZS_CG_VERSION=2 ZS_CG_PARENT=$v2
		return 0
	fi
	if [ -w "$v2" ] && (echo +memory >"$v2/cgroup.subtree_control") 2>/dev/null; then
		log "enabled the memory controller in $v2/cgroup.subtree_control"
		push_undo _zs_cg2_disable "$v2"
		ZS_CG_VERSION=2 ZS_CG_PARENT=$v2
		return 0
	fi
	# "0::/path" is our cgroup in the v2 hierarchy
	own=$(awk -F: '$1 == "0" && $2 == "" { print $3; exit }' "$ZS_PROC_CGROUP" 2>/dev/null) ||
		own=
	d=$v2${own%/}
	while [ -n "$own" ] && [ "$d" != "$v2" ] && [ "${d#"$v2"/}" != "$d" ]; do
		if _zs_has_word "$d/cgroup.subtree_control" memory && [ -w "$d" ]; then
			ZS_CG_VERSION=2 ZS_CG_PARENT=$d
			return 0
		fi
		d=${d%/*}
	done
	ZS_CG_WHY+="cgroup2 at $v2 has the memory controller, but it cannot be enabled for"
	ZS_CG_WHY+=" children of the root, and no ancestor of our cgroup (${own:-unknown})"
	ZS_CG_WHY+=" enables it for its children"
	return 1
}

# _zs_cg2_disable DIR: undo our "+memory" in DIR, unless cgroups other than
# the test's (which are gone by now) may be using it.
_zs_cg2_disable() {
	if [ -n "$(find "$1" -mindepth 1 -maxdepth 1 -type d -print -quit)" ]; then
		log "memory stays enabled in $1/cgroup.subtree_control: other cgroups are under it"
		return 0
	fi
	echo -memory >"$1/cgroup.subtree_control"
}

_zs_cg_remove() {
	local cg=$1 p i
	# (cgroup files have st_size 0: read them, never test them with -s)
	for ((i = 0; i < 100; i++)); do
		[ -n "$(cat "$cg/cgroup.procs")" ] || break
		while read -r p; do kill -KILL "$p" 2>/dev/null; done <"$cg/cgroup.procs"
		sleep 0.1
	done
	for ((i = 0; i < 50; i++)); do
		rmdir "$cg" 2>/dev/null && return 0
		sleep 0.1
	done
	rmdir "$cg"
}

# make_cgroup LIMIT: a new memory cgroup (v1 or v2, see zs_memcg_find) whose
# processes are held to LIMIT bytes (or K/M/G) of memory and swap the rest,
# without limit.  Sets ZS_CG to its directory.
make_cgroup() {
	[ -n "${ZS_CG_VERSION-}" ] || zs_memcg_find ||
		fail "no memory cgroup ($ZS_CG_WHY): the test must require_memory_cgroup"
	ZS_CG=$ZS_CG_PARENT/zswapfs-test.$$.$RANDOM
	mkdir "$ZS_CG" || fail "cannot make the cgroup $ZS_CG"
	push_undo _zs_cg_remove "$ZS_CG"
	if [ "$ZS_CG_VERSION" = 1 ]; then
		echo "$1" >"$ZS_CG/memory.limit_in_bytes"
		if [ -f "$ZS_CG/memory.swappiness" ]; then
			echo 100 >"$ZS_CG/memory.swappiness"
		fi
		return 0
	fi
	# memory.max reclaims (swaps) at the limit, and OOM-kills only when
	# nothing can be reclaimed; memory.high stays "max": it would throttle
	# the processes instead of swapping their pages out.
	echo "$1" >"$ZS_CG/memory.max"
	# absent when the kernel does not account swap (then it is unlimited)
	if [ -f "$ZS_CG/memory.swap.max" ]; then
		echo max >"$ZS_CG/memory.swap.max"
	fi
	# the pages must reach the swap device under test, not the kernel's zswap
	if [ -f "$ZS_CG/memory.zswap.max" ]; then
		echo 0 >"$ZS_CG/memory.zswap.max"
	fi
}

# zs_cg_set_limit LIMIT: change the memory limit of $ZS_CG.
zs_cg_set_limit() {
	if [ "$ZS_CG_VERSION" = 1 ]; then
		echo "$1" >"$ZS_CG/memory.limit_in_bytes"
	else
		echo "$1" >"$ZS_CG/memory.max"
	fi
}

# zs_cg_oom_kills: processes of $ZS_CG that the OOM killer ended.
zs_cg_oom_kills() {
	local f=$ZS_CG/memory.events
	[ "$ZS_CG_VERSION" = 2 ] || f=$ZS_CG/memory.oom_control
	awk '$1 == "oom_kill" { n = $2 } END { print n + 0 }' "$f"
}

# zs_cg_report: the cgroup's own memory figures, on one line, for logs.
zs_cg_report() {
	local peak
	if [ "$ZS_CG_VERSION" = 1 ]; then
		echo "memory.failcnt $(cat "$ZS_CG/memory.failcnt")" \
			"memory.max_usage_in_bytes $(cat "$ZS_CG/memory.max_usage_in_bytes")"
	else
		peak=$(cat "$ZS_CG/memory.peak" 2>/dev/null) || peak=-
		echo "memory.events: $(tr '\n' ' ' <"$ZS_CG/memory.events")memory.peak $peak"
	fi
}

# run_in_cgroup CGDIR CMD [ARG...]: run CMD inside the cgroup (exec, so the
# exit status is CMD's).
run_in_cgroup() {
	local cg=$1
	shift
	# shellcheck disable=SC2016 # $$ and $1 belong to the inner shell
	sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$cg" "$@"
}

# zs_memhog TIMEOUT MEMHOG_ARG...: run memhog in $ZS_CG (with a seed and
# --verbose), in the background and waited for, so that a signal to the test
# runs the clean-up at once (removing the cgroup kills the hog); its output
# goes to stderr.  Sets ZS_HOG_RC (137: killed); zs_memhog_passed judges it.
# After TIMEOUT seconds it is a hang: the FUSE connections are aborted (a
# process waiting for a page to come back from swap cannot be killed
# before), memhog is killed, and the test fails.
zs_memhog() {
	zs_memhog_start "$@"
	zs_memhog_wait
}

# zs_memhog_start TIMEOUT MEMHOG_ARG...: the first half of zs_memhog, for a
# test that acts while memhog runs; ZS_HOG_PID is its pid.
zs_memhog_start() {
	_zs_hog_limit=$1
	shift
	run_in_cgroup "$ZS_CG" "$MEMHOG" "$@" --seed "$$" --verbose >"$ZS_TMP/memhog.out" 2>&1 &
	ZS_HOG_PID=$!
	_zs_watchdog "$_zs_hog_limit" "$ZS_HOG_PID" </dev/null >/dev/null &
	_zs_hog_wd=$!
	push_undo _zs_watchdog_end "$_zs_hog_wd"
}

# zs_memhog_wait: the second half: wait for it, judge a hang, set ZS_HOG_RC.
zs_memhog_wait() {
	ZS_HOG_RC=0
	wait "$ZS_HOG_PID" || ZS_HOG_RC=$?
	drop_undo _zs_watchdog_end "$_zs_hog_wd"
	_zs_watchdog_end "$_zs_hog_wd"
	cat "$ZS_TMP/memhog.out" >&2
	[ "$_zs_fired" = 0 ] || fail "hang: memhog did not finish within $_zs_hog_limit s (swap I/O hung?)"
}

# zs_memhog_passed TIMEOUT: fail unless the last zs_memhog ended well.
zs_memhog_passed() {
	[ "$ZS_HOG_RC" -ne 124 ] || fail "memhog did not finish within $1 s (swap I/O hung?)"
	[ "$ZS_HOG_RC" -eq 0 ] ||
		fail "memhog exited with status $ZS_HOG_RC (1 = data corrupted through swap)"
}

# zs_stop_sampler PID: end a background sampler registered with
# `push_undo kill PID`.
zs_stop_sampler() {
	kill "$1" 2>/dev/null || true	# it may have ended by itself (stats gone)
	wait "$1" 2>/dev/null || true
	drop_undo kill "$1"
}

# ---- data ---------------------------------------------------------------------

# gen_data FILE NPAGES KIND SEED: write NPAGES pages of a given kind:
#   text   - compressible, unique per page, never zero and never same-filled
#   random - incompressible
#   same   - each page filled with one 64-bit word (per-page, non-zero)
#   hex    - random hex digits: lz4 (no entropy coder) stores them raw,
#            zstd packs them to about half a page
gen_data() {
	"$PYTHON" - "$@" <<'EOF'
import random, struct, sys
path, npages, kind, seed = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
rng = random.Random(seed)
with open(path, "wb") as f:
    for i in range(npages):
        if kind == "random":
            page = rng.randbytes(4096)
        elif kind == "same":
            page = struct.pack("<Q", rng.getrandbits(64) | 1) * 512
        elif kind == "hex":
            page = rng.randbytes(2048).hex().encode()
        else:
            words = b" ".join(rng.choice([b"swap", b"page", b"zswapfs", b"memory", b"%d" % i])
                              for _ in range(16))
            page = (b"seed %d page %d: " % (seed, i) + words + b"\n") * 100
            page = page[:4096]
        f.write(page)
EOF
}
