#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck source-path=SCRIPTDIR
#
# Restart safety (issue 11): the worker, the process that serves, is killed
# with SIGKILL at random moments and the keeper replaces it without losing a
# page or a request.
#  - During the memory-limited cgroup swap workload that checks every byte
#    (memhog, six passes): a kill every 0.5-2 s until it ends; it must end with exit 0
#    (0 bad bytes), and every kill was a restart (worker_restarts).
#  - zswapctl restart twice during a second workload: the new workers come
#    from the binary on disk (worker_upgrades), the workload passes; then
#    SIGTERM with swap on (its handle opened by a worker long dead) waits
#    until swapoff, and the keeper exits 0.
#  - zswapctl restart MOUNT keeper twice during fio --verify, the binary on
#    disk replaced: the keeper runs the new one, the worker serves all along;
#    another layout is refused.
#  - fio --verify on a loop device over the swap file (queue depth 16), with
#    kills: no verify error.
#  - A recompression pass and a compaction, killed while they run: every page
#    reads back as written.
#  - Pages compressed with a trained dictionary (train, dict_train=off),
#    killed twice: every page reads back, the generation's pages recounted.
#  - With a backing file (sealed, and not), a small mem_limit and a file
#    that runs short: the swap workload with a kill every 0.5-2 s during
#    writeback and the file's compaction; then a written-back page survives
#    a kill and `zswapctl restart`; only the unmount empties the file.
#  - Not restart-safe (worker_restart=false): a kill ends the connection, as
#    a daemon's death did, nothing hangs, and the file is emptied.
# Swap: run under the shared lock on a shared machine (COMMON.md).
set -eu
. "$(dirname "$0")/lib.sh"

ZSWAPCTL=${ZSWAPCTL:-$top_builddir/src/zswapctl}
LIMIT_MIB=96
HOG_MIB=320
HOG_TIMEOUT=300

require_root
require_fuse
require_memory_cgroup
require_memhog
command -v fio >/dev/null || fail "fio not found"
make_tmpdir

# worker: the pid of the keeper's worker (empty between two)
worker() { pgrep -P "$ZS_PID" -x zswapfs || true; }

# wait_worker: until a worker serves the mount (stats answer), 20 s at most
wait_worker() { zs_stat "$ZS_MNT" worker_generation >/dev/null; }

# kill_worker: SIGKILL the worker if there is one; 0 if one was killed
kill_worker() {
	local w
	w=$(worker)
	[ -n "$w" ] && kill -KILL "$w" 2>/dev/null
}

# start_killer MIN_MS MAX_MS [note]: in the background, kill the worker every
# MIN..MAX ms at random; the number of kills goes to $ZS_TMP/kills.  With
# `note`, each kill is preceded by a line of what that worker had done, in
# $ZS_TMP/noted: worker_generation bd_count bd_reads backing_compaction_moves.
start_killer() {
	local min=$1 max=$2 note=${3-}
	echo 0 >"$ZS_TMP/kills"
	: >"$ZS_TMP/noted"
	(
		n=0
		while :; do
			sleep "$(awk -v r="$RANDOM" -v a="$min" -v b="$max" \
				'BEGIN { printf "%.3f", (a + (b - a) * r / 32767) / 1000 }')"
			w=$(worker)
			[ -n "$w" ] || continue
			[ -z "$note" ] || awk '$1 == "bd_count" || $1 == "bd_reads" ||
				$1 == "backing_compaction_moves" || $1 == "worker_generation" {
					v[$1] = $2 }
				END { print v["worker_generation"], v["bd_count"], v["bd_reads"],
					v["backing_compaction_moves"] }' "$ZS_MNT/stats" \
				>>"$ZS_TMP/noted" 2>/dev/null || true
			if kill -KILL "$w" 2>/dev/null; then
				n=$((n + 1))
				echo "$n" >"$ZS_TMP/kills"
			fi
		done
	) </dev/null &
	killer=$!
	# SIGKILL: a subshell must not run the test's clean-up (lib.sh)
	push_undo kill -KILL "$killer"
}

stop_killer() {
	kill -KILL "$killer" 2>/dev/null || true
	wait "$killer" 2>/dev/null || true
	drop_undo kill -KILL "$killer"
}

# ---- the swap workload, killed every 0.5-2 s ------------------------------

zs_mount size=1G
[ "$(zs_stat "$ZS_MNT" restart_safe)" = 1 ] ||
	fail "restart_safe is not 1 on this kernel (FUSE_NOTIFY_RESEND needs Linux 6.9)"
# The state memfd (counters every request touches) must be resident and
# locked in the keeper and in the worker: a memfd page is unevictable only
# while a locked mapping maps it, and one swapped out to our own swap file
# made a request wait on itself (self_reclaim.sh part 3 hung).
state_locked() {
	awk '/^[0-9a-f]+-[0-9a-f]+ / { m = ($0 ~ /memfd:zswapfs-state/) }
		m && $1 == "Size:" { size += $2 }
		m && $1 == "Rss:" { rss += $2 }
		m && $1 == "VmFlags:" { n++; if ($0 ~ / lo( |$)/) lo++ }
		END { print size " KiB, " rss " KiB resident, " lo + 0 " of " n + 0 " mappings locked"
		      exit !(size && rss == size && lo == n) }' "/proc/$1/smaps"
}
# (ASan makes mlock a no-op: a sanitizer build locks nothing.)
if ! zs_sanitized; then
	for p in "$ZS_PID" "$(worker)"; do
		state_locked "$p" >"$ZS_TMP/locked" ||
			fail "the state memfd of process $p is not resident and locked: $(cat "$ZS_TMP/locked")"
	done
fi
zs_swapon "$ZS_MNT"
make_cgroup "${LIMIT_MIB}M"
zs_memhog_start "$HOG_TIMEOUT" --size "$HOG_MIB" --passes 6
start_killer 500 2000
zs_memhog_wait
stop_killer
zs_memhog_passed "$HOG_TIMEOUT"
kills=$(cat "$ZS_TMP/kills")
wait_worker
restarts=$(zs_stat "$ZS_MNT" worker_restarts)
log "swap workload: $kills kills, exit 0; $(zs_stats_line "$ZS_MNT" worker_restarts \
	worker_recovery_max_us pages_stored failed_reads failed_writes)"
[ "$kills" -ge 5 ] || fail "only $kills kills during the workload: the test proves little"
[ "$restarts" = "$kills" ] || fail "$kills kills but worker_restarts $restarts"
[ "$(zs_cg_oom_kills)" = 0 ] || fail "the OOM killer ended a process of the workload"
# A read that fails is a page lost.  A write may fail with ENOSPC while a
# new worker's reserve is still empty (a write never waits for it: issue
# 14): the kernel keeps that page and writes it again, and memhog checked
# every byte above.
v=$(zs_stat "$ZS_MNT" failed_reads)
[ "$v" -eq 0 ] || fail "failed_reads is $v after the workload"

# ---- zswapctl restart under load --------------------------------------------

zs_memhog_start "$HOG_TIMEOUT" --size 200 --passes 1
for i in 1 2; do
	sleep 1
	zs_run 60 "$ZSWAPCTL" restart "$ZS_MNT" >&2 || fail "zswapctl restart $i failed"
done
zs_memhog_wait
zs_memhog_passed "$HOG_TIMEOUT"
[ "$(zs_stat "$ZS_MNT" worker_upgrades)" = 2 ] ||
	fail "worker_upgrades is $(zs_stat "$ZS_MNT" worker_upgrades) after two restarts"
[ "$(zs_stat "$ZS_MNT" worker_restarts)" = "$restarts" ] ||
	fail "a worker died during zswapctl restart"
log "zswapctl restart twice under load: the workload passed"
# The keeper's stop rules hold across restarts: the loop device's handle on
# swap was opened by a worker long dead (the count of open handles lives in
# the keeper's memory); SIGTERM waits until swap is off, then exit 0.
kill -TERM "$ZS_PID"
sleep 1
zs_alive
_zs_is_mounted "$ZS_MNT" || fail "SIGTERM after restarts: the mount went away while swap was on"
grep -q "still open" "$ZS_LOG" || fail "SIGTERM after restarts: no deferred stop in the log"
zs_swapoff
zs_wait_exit 10 || fail "SIGTERM after restarts: the deferred stop did not happen after swapoff"
[ "$ZS_RC" = 0 ] || fail "SIGTERM after restarts: exit status $ZS_RC"
zs_ended
log "SIGTERM after restarts with swap on: deferred until swapoff, then exit 0"

# ---- restart keeper: the keeper executes the binary on disk -----------------
# A mount from a copy of the binary, which is then replaced (a new file, as a
# package upgrade makes): `zswapctl restart MOUNT keeper` twice during fio
# --verify on the file; the keeper keeps its pid and runs the new file, the
# worker serves all along, a worker killed afterwards is replaced by the new
# keeper; a binary of another layout is refused and changes nothing; the
# unmount rules are unchanged (zs_umount: exit 0).

keeper_ino() { stat -L -c %i "/proc/$ZS_PID/exe"; }
mkdir "$ZS_TMP/bin"
cp "$ZSWAPFS" "$ZS_TMP/bin/zswapfs"
saved_zswapfs=$ZSWAPFS
ZSWAPFS=$ZS_TMP/bin/zswapfs
zs_mount size=256M
ZSWAPFS=$saved_zswapfs
w0=$(worker)
gen0=$(zs_stat "$ZS_MNT" worker_generation)
(cd "$ZS_TMP" && exec fio --name=kverify --filename="$ZS_MNT/swap" --direct=1 --ioengine=libaio \
	--iodepth=8 --rw=randwrite --bs=4k --size=128M --loops=4 --verify=crc32c --verify_fatal=1 \
	--do_verify=1 --buffer_compress_percentage=60 --refill_buffers \
	--output="$ZS_TMP/kfio.out") &
fio_pid=$!
push_undo kill "$fio_pid"
for i in 1 2; do
	sleep 1
	# a new file at the path (the running one stays as it was: no ETXTBSY)
	cp "$ZSWAPFS" "$ZS_TMP/bin/zswapfs.new"
	mv -f "$ZS_TMP/bin/zswapfs.new" "$ZS_TMP/bin/zswapfs"
	zs_run 30 "$ZSWAPCTL" restart "$ZS_MNT" keeper >&2 || fail "zswapctl restart keeper $i failed"
	[ "$(keeper_ino)" = "$(stat -c %i "$ZS_TMP/bin/zswapfs")" ] ||
		fail "restart keeper $i: the keeper does not run the new binary"
	kill -0 "$ZS_PID" 2>/dev/null || fail "restart keeper $i: the keeper's pid is gone"
done
kill -0 "$fio_pid" 2>/dev/null || fail "fio ended before the keeper restarts did: no overlap"
[ "$(zs_stat "$ZS_MNT" keeper_upgrades)" = 2 ] ||
	fail "keeper_upgrades is $(zs_stat "$ZS_MNT" keeper_upgrades) after two"
[ "$(worker)" = "$w0" ] && [ "$(zs_stat "$ZS_MNT" worker_generation)" = "$gen0" ] ||
	fail "the worker did not serve all along the keeper's restarts"
# The new keeper supervises: a killed worker is replaced.
kill_worker || fail "no worker to kill"
wait_worker
[ "$(zs_stat "$ZS_MNT" worker_restarts)" = 1 ] ||
	fail "after restart keeper, a killed worker was not replaced"
# Another layout: refused, nothing changes.
printf '#!/bin/sh\n[ "$1" = --layout ] && echo "999 1" && exit 0\nexit 1\n' >"$ZS_TMP/bin/zswapfs.new"
chmod 755 "$ZS_TMP/bin/zswapfs.new"
ino=$(keeper_ino)
mv -f "$ZS_TMP/bin/zswapfs.new" "$ZS_TMP/bin/zswapfs"
if zs_run 30 "$ZSWAPCTL" restart "$ZS_MNT" keeper >"$ZS_TMP/kout" 2>&1; then
	fail "restart keeper with a binary of another layout succeeded: $(cat "$ZS_TMP/kout")"
fi
[ "$(keeper_ino)" = "$ino" ] && kill -0 "$ZS_PID" 2>/dev/null ||
	fail "a refused restart keeper changed the keeper"
grep -q "does not know this mount's state" "$ZS_LOG" ||
	fail "the log does not say why restart keeper was refused"
wait "$fio_pid" || { cat "$ZS_TMP/kfio.out" >&2; fail "fio --verify failed across restart keeper"; }
drop_undo kill "$fio_pid"
[ "$(zs_stat "$ZS_MNT" failed_reads)" = 0 ] || fail "failed_reads after restart keeper"
log "restart keeper: twice under fio --verify, new binary running, worker served all" \
	"along; another layout refused; $(zs_stats_line "$ZS_MNT" keeper_upgrades worker_restarts)"
zs_umount

# ---- fio --verify on a loop device, killed --------------------------------

zs_mount size=256M,recompress.rate=0,recompress.enabled=false,compact.threshold=0
loop=$(zs_run 30 losetup --find --show --direct-io=on "$ZS_MNT/swap") || fail "losetup failed"
push_undo losetup -d "$loop"
start_killer 200 800
zs_run 120 fio --name=verify --filename="$loop" --direct=1 --ioengine=libaio --iodepth=16 \
	--rw=randwrite --bs=4k --size=192M --loops=3 --verify=crc32c --verify_fatal=1 --do_verify=1 \
	--buffer_compress_percentage=60 --refill_buffers --output="$ZS_TMP/fio.out" ||
	{ cat "$ZS_TMP/fio.out" >&2; stop_killer; fail "fio --verify failed with kills"; }
stop_killer
[ "$(cat "$ZS_TMP/kills")" -ge 3 ] || fail "only $(cat "$ZS_TMP/kills") kills during fio"
log "fio --verify (randwrite, QD16, 192 MiB, 3 loops): passed with $(cat "$ZS_TMP/kills") kills"
zs_run 30 losetup -d "$loop" || fail "losetup -d failed"
drop_undo losetup -d "$loop"

# ---- a recompression pass and a compaction, killed ---------------------------

gen_data "$ZS_TMP/data" 32768 text 7
during=0
for i in 1 2 3; do
	wait_worker
	# written again: every page is a candidate again
	zs_run 60 dd if="$ZS_TMP/data" of="$ZS_MNT/swap" bs=1M oflag=direct conv=notrunc \
		status=none || fail "writing the data failed"
	zs_ctl "$ZS_MNT" recompress || fail "recompress refused"
	sleep "0.0$((RANDOM % 10))"
	[ "$(zs_stat "$ZS_MNT" recompress_pending)" = 0 ] || during=$((during + 1))
	kill_worker || fail "no worker to kill"
	zs_run 60 cmp -n $((32768 * 4096)) "$ZS_TMP/data" "$ZS_MNT/swap" ||
		fail "data differs after a kill during recompression ($i)"
done
[ "$during" -ge 1 ] || fail "no kill landed during a recompression pass"
log "recompression: $during of 3 kills during a pass; data intact"

# Fragment the arena (every other page becomes same-filled), then compact.
"$PYTHON" - "$ZS_TMP/data" "$ZS_TMP/holes" <<'EOF'
import sys
src, dst = open(sys.argv[1], "rb"), open(sys.argv[2], "wb")
i = 0
while True:
    page = src.read(4096)
    if not page:
        break
    dst.write(page if i % 2 else b"\0" * 4096)
    i += 1
EOF
for i in 1 2 3; do
	wait_worker
	zs_run 60 dd if="$ZS_TMP/holes" of="$ZS_MNT/swap" bs=1M oflag=direct conv=notrunc \
		status=none || fail "writing failed"
	zs_ctl "$ZS_MNT" compact || fail "compact refused"
	sleep "0.0$((RANDOM % 5))"
	kill_worker || fail "no worker to kill"
	zs_run 60 cmp -n $((32768 * 4096)) "$ZS_TMP/holes" "$ZS_MNT/swap" ||
		fail "data differs after a kill during compaction ($i)"
	# and back, for the next round
	zs_run 60 dd if="$ZS_TMP/data" of="$ZS_MNT/swap" bs=1M oflag=direct conv=notrunc \
		status=none || fail "writing failed"
done
wait_worker
log "compaction: 3 kills; data intact; $(zs_stats_line "$ZS_MNT" pages_compacted \
	worker_restarts worker_recovery_max_us)"
zs_umount

# ---- pages compressed with a trained dictionary, killed ---------------------

# A new worker must read them: it rebuilds every generation from the bytes
# the keeper holds (dictgen.h) and recounts their pages from the slots.
zs_mount size=256M,dict_train=off,recompress.enabled=false
zs_run 60 dd if="$ZS_TMP/data" of="$ZS_MNT/swap" bs=1M oflag=direct conv=notrunc \
	status=none || fail "writing the data failed"
zs_ctl "$ZS_MNT" train || fail "train refused"
for i in $(seq 100); do
	[ "$(zs_stat "$ZS_MNT" dict_train_pending)" = 0 ] && break
	sleep 0.1
done
[ "$(zs_stat "$ZS_MNT" dict_generation)" = 1 ] ||
	fail "no dictionary after train ($(zs_stats_line "$ZS_MNT" dict_train_attempts dict_trainings))"
# written again: compressed with the dictionary now
zs_run 60 dd if="$ZS_TMP/data" of="$ZS_MNT/swap" bs=1M oflag=direct conv=notrunc \
	status=none || fail "writing the data failed"
dict_pages=$(zs_stat "$ZS_MNT" dict_pages)
[ "$dict_pages" -ge 16384 ] || fail "only $dict_pages pages compressed with the dictionary"
for i in 1 2; do
	kill_worker || fail "no worker to kill"
	wait_worker
	zs_run 60 cmp -n $((32768 * 4096)) "$ZS_TMP/data" "$ZS_MNT/swap" ||
		fail "data differs after a kill with dictionary pages ($i)"
	[ "$(zs_stat "$ZS_MNT" dict_pages)" = "$dict_pages" ] ||
		fail "dict_pages $dict_pages before the kill, $(zs_stat "$ZS_MNT" dict_pages) after"
	[ "$(zs_stat "$ZS_MNT" dict_pages_current)" -ge "$dict_pages" ] ||
		fail "the dictionary's pages were not recounted: $(zs_stats_line "$ZS_MNT" \
			dict_generation dict_pages_current)"
done
[ "$(zs_stat "$ZS_MNT" failed_reads)" = 0 ] || fail "failed_reads after the kills"
log "dictionary: $dict_pages pages with generation 1, 2 kills; data intact; \
$(zs_stats_line "$ZS_MNT" dict_generation dict_pages_current worker_restarts)"
zs_umount

# ---- a backing file: writeback and its compaction, killed -------------------

# With a backing file the mount is restart-safe too (backing.h, Restart):
# the keeper holds the file and, in locked memory, the key, the cipher and
# the segments' sequences; a new worker rebuilds the rest from the slots.
# mem_limit is small, so the hog's pages really live on the file, and the
# file is a little larger than what the hog puts there, so that it runs
# short of free segments while the hog rewrites, and is compacted (every
# segment with a tenth of it dead).  A worker is killed every 0.5-2 s while
# all that runs; before each kill the killer notes what the worker had done
# (backing_compaction_moves is the worker's own count).  Sealing on (the
# default) and off.
BK_MEM_LIMIT_MIB=32
BK_MIB=192
BK_HOG_MIB=256

backing_case() {
	local encrypt=$1 cipher kills restarts v moves bd_first bd_last bd_max size
	rm -f "$ZS_TMP/backing"
	zs_mount "size=1G,mem_limit=${BK_MEM_LIMIT_MIB}M,writeback.backing_file=$ZS_TMP/backing,\
writeback.max_size=${BK_MIB}M,writeback.compact_threshold=90,writeback.encrypt=$encrypt"
	[ "$(zs_stat "$ZS_MNT" restart_safe)" = 1 ] || fail "restart_safe is not 1 with a backing file"
	cipher=$(zs_stat "$ZS_MNT" backing_cipher)
	if [ "$encrypt" = true ]; then
		[ "$cipher" != none ] || fail "backing_cipher is none with writeback.encrypt=true"
	else
		[ "$cipher" = none ] || fail "backing_cipher is $cipher with writeback.encrypt=false"
	fi
	zs_swapon "$ZS_MNT"
	zs_memhog_start "$HOG_TIMEOUT" --size "$BK_HOG_MIB" --passes 3
	start_killer 500 2000 note
	zs_memhog_wait
	stop_killer
	zs_memhog_passed "$HOG_TIMEOUT"
	kills=$(cat "$ZS_TMP/kills")
	wait_worker
	restarts=$(zs_stat "$ZS_MNT" worker_restarts)
	log "backing file ($cipher): $kills kills, exit 0; $(zs_stats_line "$ZS_MNT" \
		worker_restarts worker_recovery_max_us bd_count bd_reads bd_writes failed_reads \
		failed_writes backing_read_errors backing_auth_failures backing_holes_punched)"
	[ "$kills" -ge 5 ] || fail "only $kills kills during the workload: the test proves little"
	[ "$restarts" = "$kills" ] || fail "$kills kills but worker_restarts $restarts"
	[ "$(zs_cg_oom_kills)" = 0 ] || fail "the OOM killer ended a process of the workload"
	for v in failed_reads backing_read_errors backing_auth_failures; do
		[ "$(zs_stat "$ZS_MNT" "$v")" = 0 ] || fail "$v is $(zs_stat "$ZS_MNT" "$v")"
	done
	# Pages were on the file when workers died, and later workers read
	# pages back from it; the file was compacted along the way.
	read -r bd_first bd_max < <(awk 'NR == 1 { f = $3 } $2 > m { m = $2 }
		END { print f + 0, m + 0 }' "$ZS_TMP/noted")
	bd_last=$(zs_stat "$ZS_MNT" bd_reads)
	moves=$(awk '{ s += $4 } END { print s + 0 }' "$ZS_TMP/noted")
	moves=$((moves + $(zs_stat "$ZS_MNT" backing_compaction_moves)))
	log "backing file ($cipher): at a kill up to $bd_max pages on it; bd_reads $bd_first at" \
		"the first kill, $bd_last at the end; $moves compaction moves in all"
	[ "$bd_max" -gt 0 ] || fail "no page was on the backing file when a worker died"
	[ "$bd_last" -gt "$bd_first" ] || fail "no page was read from the backing file after a restart"
	[ "$moves" -gt 0 ] || fail "the backing file was never compacted"
	zs_swapoff

	# A kill, and a restart, leave the file as it is: a page written back
	# before reads back after both (a truncation would make it EIO).
	zs_run 60 dd if="$ZS_TMP/data" of="$ZS_MNT/swap" bs=1M count=16 oflag=direct \
		conv=notrunc status=none || fail "writing the data failed"
	zs_ctl "$ZS_MNT" writeback all || fail "writeback all refused"
	zs_stat_wait "$ZS_MNT" writeback_pending 0
	v=$(zs_stat "$ZS_MNT" bd_count)
	[ "$v" -ge 2048 ] || fail "writeback all left only $v pages on the backing file"
	kill_worker || fail "no worker to kill"
	wait_worker
	zs_run 60 "$ZSWAPCTL" restart "$ZS_MNT" >&2 || fail "zswapctl restart failed"
	wait_worker
	zs_run 60 cmp -n $((16 << 20)) "$ZS_TMP/data" "$ZS_MNT/swap" ||
		fail "written-back data differs after a kill and a restart"
	[ "$(zs_stat "$ZS_MNT" bd_count)" = "$v" ] ||
		fail "bd_count $v before, $(zs_stat "$ZS_MNT" bd_count) after a kill and a restart"
	zs_umount
	# Only the keeper's end empties the file, down to its header.
	size=$(stat -c %s "$ZS_TMP/backing")
	[ "$size" = 4096 ] || fail "the backing file is $size bytes after the unmount, not 4096"
}

backing_case true
backing_case false

# ---- not restart-safe: the connection ends, nothing hangs --------------------

zs_mount size=64M,worker_restart=false,writeback.backing_file="$ZS_TMP/backing"
[ "$(zs_stat "$ZS_MNT" restart_safe)" = 0 ] || fail "restart_safe is 1 with worker_restart=false"
zs_run 30 dd if="$ZS_TMP/data" of="$ZS_MNT/swap" bs=1M count=8 oflag=direct conv=notrunc \
	status=none || fail "writing failed"
zs_ctl "$ZS_MNT" writeback all || fail "writeback all refused"
zs_stat_wait "$ZS_MNT" writeback_pending 0
kill_worker || fail "no worker to kill"
zs_wait_exit 10 || fail "the keeper did not end after its worker died (not restart-safe)"
[ "$ZS_RC" -ne 0 ] || fail "the keeper exited 0 after its worker died"
! zs_run 10 dd if="$ZS_MNT/swap" of=/dev/null bs=4k count=1 iflag=direct status=none 2>/dev/null ||
	fail "the dead connection still answered"
zs_run 10 umount "$ZS_MNT" || zs_run 10 umount -l "$ZS_MNT" || true
zs_ended
size=$(stat -c %s "$ZS_TMP/backing")
[ "$size" = 4096 ] || fail "the backing file is $size bytes after the keeper ended, not 4096"
log "worker_restart=false: a kill ends the connection (keeper exit $ZS_RC), no hang; the file emptied"
