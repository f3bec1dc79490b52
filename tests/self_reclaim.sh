#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck source-path=SCRIPTDIR
#
# The daemon never waits on its own swap (issue 14).  The daemon and a
# program that swaps start in one memory cgroup with a limit of 320 MiB; the
# program (memhog) touches 512 MiB of real-looking pages through swap on the
# mount (-o size=1G, loop --direct-io=on, mkswap, swapon).  Before the fix
# both stood in D state for good within seconds: the daemon, faulting a page
# in for its arena, entered the cgroup's reclaim, which swapped the program
# out to the daemon and waited for I/O only the daemon could serve.
#
# 1. Defaults (memcg=move): the daemon leaves the limited cgroup for one of
#    its own without a limit, the program completes with every byte right,
#    and the daemon's cgroup is gone after it exits.
# 2. The same with a backing file, writeback on and mem_limit=64M.
# 3. memcg=ignore: the daemon stays under the limit with the program, and
#    its arena's memory must come from the same 320 MiB (mem_limit=64M keeps
#    it from taking all of it).  Its reserve runs dry or the arena fills,
#    writes fail (ENOSPC: the kernel keeps the page) and reclaim in the
#    cgroup crawls, but the daemon never waits: stats are answered all
#    along, its request thread takes no page fault.  Once the limit is
#    raised the program completes, every byte right; or the cgroup's OOM
#    killer has refused it meanwhile (never the daemon: its pages would be
#    lost, as without the mem_limit on this VM, where oom_score_adj -1000
#    is not allowed).
# 4. memcg=refuse: a clear error, nothing mounted.
# 5. The daemon's own cgroup, without swap: the unmount helper, which keeps
#    CAP_DAC_OVERRIDE for it (the daemon has no privilege left at exit, and
#    the top of the hierarchy is mode 0555), is back in the cgroup the
#    daemon came from, and removes the daemon's cgroup when the daemon
#    exits, or is killed.
# A watchdog aborts the FUSE connection through fusectl, and raises the
# cgroup's limit (a cgroup whose swap writes fail can crawl in reclaim for
# good: only room ends that), when a part runs too long: a hang fails the
# test instead of hanging CI.  Memory cgroups v1 or v2 (lib.sh).
#
# Run alone, e.g. ZSWAPFS=/path/to/old/zswapfs, it shows an old daemon hang
# in part 1.
set -eu
. "$(dirname "$0")/lib.sh"

LIMIT=320M
HOG_MIB=512
HOG_TIMEOUT=150
# memhog alone takes ~11 s in part 1 and ~20 s in part 2 on the 2-CPU VM.
WATCHDOG_S=100
# Part 3: how long the program runs under the limit before it is raised.
SQUEEZE_S=12

require_root
require_fuse
require_memory_cgroup
require_memhog
make_tmpdir

# zs_start_in_cgroup ARG...: start the daemon (-f) inside $ZS_CG from its
# first instruction (the shell joins the cgroup, then execs it), with ARG...
# after the mount point.  Sets ZS_MNT, ZS_PID, ZS_LOG and ZS_JOB (the job
# whose exit status is the daemon's).
zs_start_in_cgroup() {
	local i
	ZS_MNT=$(mktemp -d "${TMPDIR:-/tmp}/zswapfs-mnt.XXXXXX")
	ZS_LOG=$ZS_TMP/daemon.$RANDOM.log
	rm -f "$ZS_TMP/daemon.pid"
	# shellcheck disable=SC2016 # $$ and $1 belong to the inner shell
	run_in_cgroup "$ZS_CG" sh -c 'echo $$ >"$1" && shift && exec setsid "$@"' sh \
		"$ZS_TMP/daemon.pid" "$ZSWAPFS" "$ZS_MNT" -f "$@" >"$ZS_LOG" 2>&1 </dev/null &
	ZS_JOB=$!
	for ((i = 0; i < 50; i++)); do
		[ -s "$ZS_TMP/daemon.pid" ] && break
		sleep 0.1
	done
	ZS_PID=$(cat "$ZS_TMP/daemon.pid") || fail "the daemon did not start"
	# The cgroup a move makes, should the daemon and its helper die
	# without removing it.
	push_undo own_cgroup_gone "$(dirname "$ZS_CG")/zswapfs-$ZS_PID"
	push_undo _zs_teardown "$ZS_MNT" "$ZS_PID"
	zs_watch_mount "$ZS_MNT"
}

# shellcheck disable=SC2317 # run by the clean-up
own_cgroup_gone() { [ ! -d "$1" ] || rmdir "$1"; }

cg_raise() { zs_cg_set_limit 4G; }

# The memory cgroup process $1 (default: the daemon) is in, as /proc shows it.
proc_cgroup() {
	awk -F: '$2 ~ /(^|,)memory(,|$)/ { v1 = $3 } $1 == "0" { v2 = $3 }
		END { print (v1 != "" ? v1 : v2) }' "/proc/${1:-$ZS_PID}/cgroup"
}
daemon_cgroup() { proc_cgroup "$ZS_PID"; }

# nap SECONDS: sleep a tenth of a second at a time, as lib.sh's watchdog
# does, so that a SIGKILL to the background job that naps leaves no sleep
# running for long (an orphan would hold the test's output open).
nap() {
	local i
	for ((i = 0; i < $1 * 10; i++)); do
		sleep 0.1 >/dev/null 2>&1 || true
	done
}

# stop_job PID: end a background job of this script with SIGKILL, as lib.sh
# ends its watchdogs: a job signalled (TERM) before it has reset the test's
# traps would run the test's clean-up in the middle of the test.
stop_job() {
	kill -KILL "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}

# watchdog_start SECONDS WHAT: in the background, after SECONDS, note that
# WHAT hung, give the cgroup room and abort the test's FUSE connections, as
# lib.sh's watchdog does (whose hang it reports the same way: exit 3);
# nothing it runs can hang on the daemon.  watchdog_stop fails the test if
# it fired.
watchdog_start() {
	(
		nap "$1"
		log "watchdog: $2 still running after $1 s"
		for t in /proc/"$ZS_PID"/task/* /proc/"$(worker_pid)"/task/*; do
			log "  daemon thread $(cat "$t/comm" 2>/dev/null):" \
				"$(awk '{ print $3 }' "$t/stat" 2>/dev/null)" \
				"$(cat "$t/wchan" 2>/dev/null)"
			cat "$t/stack" 2>/dev/null | head -n 12 >&2
		done
		cg_raise
		for m in "${_zs_mounts[@]}"; do zs_fuse_abort "$m"; done
		exit 3
	) </dev/null &
	WATCHDOG=$!
	WATCHDOG_WHAT=$2
	push_undo _zs_watchdog_end "$WATCHDOG"
}

watchdog_stop() {
	drop_undo _zs_watchdog_end "$WATCHDOG"
	_zs_watchdog_end "$WATCHDOG"
	[ "$_zs_fired" = 0 ] || fail "hang: $WATCHDOG_WHAT (the watchdog aborted it)"
}

# The worker: the keeper's child that serves (zswapfs(8), RESTART).
worker_pid() { pgrep -P "$ZS_PID" -x zswapfs; }

# Minor faults of the daemon's request thread (the worker's main thread:
# threads=1), field 10 of its stat; /proc reads that never wait on the daemon.
request_faults() {
	local w
	w=$(worker_pid)
	awk '{ print $10 }' "/proc/$w/task/$w/stat"
}

# no_faults_since N: the request thread took no page fault since it had N.
# Every fault may reclaim, and reclaim may wait on our own swap: it serves
# from memory made resident ahead (the reserve, the prepared heap).
no_faults_since() {
	local n=$(($(request_faults) - $1))
	log "page faults of the request thread while serving: $n"
	[ "$n" -eq 0 ] || fail "the request thread took $n page faults while serving"
}

# A stats read that cannot hang the test (a probe: a slow answer is
# recorded, not a failure by itself).
stats_now() {
	timeout -k 2 5 cat "$ZS_MNT/stats"
}

# Every half second: stats must be answered, whatever the cgroup does.
probe() {
	local t0 t1
	while :; do
		t0=$(date +%s%N)
		if ! stats_now >"$ZS_TMP/probe.stats"; then
			echo "stats unanswered for 5 s at $(date +%T)" >>"$ZS_TMP/stalls"
		fi
		t1=$(date +%s%N)
		echo $(((t1 - t0) / 1000000)) >>"$ZS_TMP/probe.ms"
		sleep 0.5
	done
}

# swapoff, detach, unmount; the daemon must exit 0 (as zs_umount, but the
# daemon is no child of this shell: its status comes through ZS_JOB).
finish() {
	zs_swapoff
	unmount_and_wait
}

# unmount_and_wait: unmount; the daemon must exit 0 (its helper has removed
# its memory cgroup by then: the daemon waits for the helper).
unmount_and_wait() {
	local rc=0 i
	zs_alive
	zs_run 30 fusermount3 -u "$ZS_MNT" || fail "fusermount3 -u $ZS_MNT failed"
	for ((i = 0; i < 100; i++)); do
		kill -0 "$ZS_PID" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$ZS_PID" 2>/dev/null && fail "daemon $ZS_PID still running 10 s after unmount"
	wait "$ZS_JOB" || rc=$?
	drop_undo _zs_teardown "$ZS_MNT" "$ZS_PID"
	rmdir -- "$ZS_MNT"
	[ "$rc" -eq 0 ] ||
		{ cat "$ZS_LOG" >&2; fail "daemon exited with status $rc after unmount"; }
}

# ---- 1. defaults: the daemon moves out of the limited cgroup ------------------------

part1() {
	log "part 1: daemon and memhog started in one $LIMIT cgroup, default settings"
	make_cgroup "$LIMIT"
	cg_root=$(dirname "$ZS_CG")
	zs_start_in_cgroup -o size=1G
	zs_wait_mounted "part 1"
	zs_swapon "$ZS_MNT"
	watchdog_start "$WATCHDOG_S" "part 1"
	faults0=$(request_faults)
	zs_memhog "$HOG_TIMEOUT" --size "$HOG_MIB" --passes 2
	watchdog_stop
	zs_memhog_passed "$HOG_TIMEOUT"
	no_faults_since "$faults0"
	own="/zswapfs-$ZS_PID"
	[ "$(daemon_cgroup)" = "$own" ] ||
		fail "the daemon is in memory cgroup $(daemon_cgroup), not in one of its own ($own)"
	[ -d "$cg_root$own" ] || fail "$cg_root$own is missing"
	[ "$(zs_stat "$ZS_MNT" memcg)" = moved ] || fail "stats memcg: $(zs_stat "$ZS_MNT" memcg)"
	[ "$(zs_stat "$ZS_MNT" memcg_limit_bytes)" -eq $((320 << 20)) ] ||
		fail "memcg_limit_bytes $(zs_stat "$ZS_MNT" memcg_limit_bytes), not 320 MiB"
	grep -q "moved to $cg_root$own" "$ZS_LOG" ||
		{ cat "$ZS_LOG" >&2; fail "no word of the move in the log"; }
	zs_stats_line "$ZS_MNT" orig_data_size mem_used_max failed_writes reserve_dry \
		reserve_target_bytes reserve_peak_rate reserve_refill_max_us >&2
	echo >&2
	[ "$(zs_stat "$ZS_MNT" failed_reads)" -eq 0 ] || fail "failed_reads after part 1"
	finish
	[ ! -d "$cg_root$own" ] || fail "the daemon left its cgroup $cg_root$own behind"
}

# ---- 2. the same with writeback ----------------------------------------------------------

part2() {
	log "part 2: the same with a backing file, mem_limit=64M"
	zs_start_in_cgroup -o "size=1G,mem_limit=64M,writeback.backing_file=$ZS_TMP/backing"
	zs_wait_mounted "part 2"
	[ "$(zs_stat "$ZS_MNT" memcg)" = moved ] ||
		fail "part 2: stats memcg: $(zs_stat "$ZS_MNT" memcg)"
	zs_swapon "$ZS_MNT"
	watchdog_start "$WATCHDOG_S" "part 2"
	faults0=$(request_faults)
	zs_memhog "$HOG_TIMEOUT" --size "$HOG_MIB" --passes 1
	watchdog_stop
	zs_memhog_passed "$HOG_TIMEOUT"
	no_faults_since "$faults0"
	zs_stats_line "$ZS_MNT" mem_used_max bd_writes bd_reads failed_writes writeback_spills \
		reserve_dry >&2
	echo >&2
	[ "$(zs_stat "$ZS_MNT" bd_writes)" -gt 0 ] || fail "part 2: nothing was written back"
	[ "$(zs_stat "$ZS_MNT" failed_reads)" -eq 0 ] || fail "failed_reads after part 2"
	finish
}

# ---- 3. memcg=ignore: under the limit, the daemon still never waits ------------------

part3() {
	log "part 3: memcg=ignore, the daemon stays in the $LIMIT cgroup"
	make_cgroup "$LIMIT"
	cg_root=$(dirname "$ZS_CG")
	zs_start_in_cgroup -o size=1G,memcg=ignore,mem_limit=64M
	zs_wait_mounted "part 3"
	[ "$(daemon_cgroup)" = "/${ZS_CG#"$cg_root"/}" ] ||
		fail "memcg=ignore: the daemon moved to $(daemon_cgroup)"
	[ "$(zs_stat "$ZS_MNT" memcg)" = ignored ] || fail "stats memcg: $(zs_stat "$ZS_MNT" memcg)"
	zs_swapon "$ZS_MNT"
	probe &
	prober=$!
	push_undo kill "$prober"
	( nap "$SQUEEZE_S"; log "raising the cgroup's limit"; cg_raise ) </dev/null &
	raiser=$!
	push_undo stop_job "$raiser"
	watchdog_start "$WATCHDOG_S" "part 3"
	faults0=$(request_faults)
	zs_memhog "$HOG_TIMEOUT" --size "$HOG_MIB" --passes 1
	watchdog_stop
	zs_stop_sampler "$prober"
	wait "$raiser" 2>/dev/null || true
	drop_undo stop_job "$raiser"
	zs_alive
	if [ "$ZS_HOG_RC" -eq 137 ] && [ "$(zs_cg_oom_kills)" -gt 0 ]; then
		log "memhog refused: killed by the cgroup's OOM killer"
	else
		zs_memhog_passed "$HOG_TIMEOUT"
	fi
	no_faults_since "$faults0"
	log "stats probes: $(wc -l <"$ZS_TMP/probe.ms")," \
		"slowest $(sort -n "$ZS_TMP/probe.ms" | tail -n 1) ms"
	[ ! -s "$ZS_TMP/stalls" ] || fail "the daemon stopped answering: $(cat "$ZS_TMP/stalls")"
	zs_stats_line "$ZS_MNT" mem_used_max failed_writes reserve_dry reserve_refills \
		reserve_refill_max_us reserve_wakeups >&2
	echo >&2
	[ "$(zs_stat "$ZS_MNT" failed_reads)" -eq 0 ] || fail "failed_reads after part 3"
	finish
}

# A sanitizer build locks no memory (ASan's shadow is terabytes) and faults
# its shadow in as the arena is used: its pages charged to the limited
# cgroup before it moves out get swapped, to itself.  Only part 4 applies.
if zs_sanitized; then
	log "parts 1-3 skipped: a sanitizer build cannot lock its memory"
else
	part1
	part2
	part3
fi

# ---- 4. memcg=refuse ------------------------------------------------------------------------

log "part 4: memcg=refuse in a limited cgroup"
make_cgroup 64M
zs_start_in_cgroup -o size=256M,memcg=refuse
rc=0
for ((i = 0; i < 50; i++)); do
	kill -0 "$ZS_PID" 2>/dev/null || break
	sleep 0.1
done
kill -0 "$ZS_PID" 2>/dev/null && fail "memcg=refuse: the daemon is still running after 5 s"
wait "$ZS_JOB" || rc=$?
[ "$rc" -ne 0 ] || fail "memcg=refuse under a 64 MiB limit: exit status 0"
if ! grep -q "limits this process to 64 MiB" "$ZS_LOG" || ! grep -q "memcg=" "$ZS_LOG"; then
	cat "$ZS_LOG" >&2
	fail "memcg=refuse: the message does not say what and why"
fi
awk -v m="$ZS_MNT" '$2 == m { f = 1 } END { exit !f }' /proc/mounts &&
	fail "memcg=refuse: $ZS_MNT is mounted"
drop_undo _zs_teardown "$ZS_MNT" "$ZS_PID"
rmdir "$ZS_MNT"
log "refused: $(head -n 1 "$ZS_LOG")"
exit 0
