#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The daemon's life: SIGTERM, SIGINT, umount and fusermount3 -u end it
# cleanly (exit 0, nothing left mounted); while a loop device holds the swap
# file a stop signal is deferred, never drops stored pages, and completes
# once the file is closed; without -f it detaches once the mount is ready.
set -eu
. "$(dirname "$0")/lib.sh"
require_fuse
require_root

for sig in TERM INT; do
	zs_mount size=64M
	kill -"$sig" "$ZS_PID"
	zs_wait_exit 10 || fail "SIG$sig did not end the daemon in 10 s"
	[ "$ZS_RC" = 0 ] || fail "daemon exited $ZS_RC on SIG$sig"
	zs_ended
	log "SIG$sig: exit 0, unmounted"
done

zs_mount size=64M
zs_run 30 umount "$ZS_MNT" || fail "umount $ZS_MNT failed"
zs_wait_exit 10 || fail "umount did not end the daemon"
[ "$ZS_RC" = 0 ] || fail "daemon exited $ZS_RC after umount"
zs_ended
log "umount: exit 0"

# A stats file closed just before the unmount: its RELEASE never reaches
# the daemon (held stopped here), as the unmount aborts the connection with
# the request queued.  The daemon must still free that snapshot (a
# sanitizer build fails on the leak) and exit 0.
zs_mount size=16M
stats=$(readlink -f "$ZS_MNT")/stats
# shellcheck disable=SC2217 # sleep only holds the file open
sleep 60 <"$ZS_MNT/stats" &
holder=$!
push_undo kill "$holder"
# The daemon is stopped only once the holder's open has been answered: its
# stdin is then the stats file (read from /proc, never through the mount).
holds_stats() {
	kill -0 "$holder" 2>/dev/null || fail "the holder (pid $holder) could not open $ZS_MNT/stats"
	[ "$(readlink "/proc/$holder/fd/0" 2>/dev/null)" = "$stats" ]
}
zs_wait_until 30 "the holder (pid $holder) with $stats open" holds_stats
kill -STOP "$ZS_PID"
push_undo kill -CONT "$ZS_PID"
kill "$holder"
wait "$holder" 2>/dev/null || true
drop_undo kill "$holder"
# --no-canonicalize: no stat of the mount point, which the stopped daemon
# could not answer
zs_run 30 umount --no-canonicalize "$ZS_MNT" || fail "umount $ZS_MNT failed with the daemon stopped"
kill -CONT "$ZS_PID"
drop_undo kill -CONT "$ZS_PID"
zs_wait_exit 10 || fail "the daemon did not end after the unmount"
[ "$ZS_RC" = 0 ] || { cat "$ZS_LOG" >&2; fail "daemon exited $ZS_RC after an unmount that dropped a RELEASE"; }
zs_ended
log "stats file released only by the unmount: exit 0"

# A loop device on the swap file: a stop must wait, and lose nothing.
make_tmpdir
zs_mount size=64M
head -c 8M /dev/urandom > "$ZS_TMP/data"
loop=$(zs_run 30 losetup --find --show --direct-io=on "$ZS_MNT/swap") || fail "losetup failed"
push_undo losetup -d "$loop"
zs_run 60 dd if="$ZS_TMP/data" of="$loop" bs=1M oflag=direct status=none ||
	fail "writing through $loop failed"
kill -TERM "$ZS_PID"
# The message comes once the daemon has taken the signal and put the stop
# off; the reads below need it still serving.
zs_log_wait "still open" 30
zs_alive
_zs_is_mounted "$ZS_MNT" || fail "the mount went away while the loop device held the file"
zs_run 60 cmp <(dd if="$loop" bs=1M count=8 iflag=direct status=none) "$ZS_TMP/data" ||
	fail "data read back through the loop device differs after SIGTERM"
! zs_run 30 umount "$ZS_MNT" 2>/dev/null || fail "umount succeeded while a loop device held the file"
losetup -d "$loop"
drop_undo losetup -d "$loop"
zs_wait_exit 10 || fail "the deferred stop did not happen after losetup -d"
[ "$ZS_RC" = 0 ] || fail "daemon exited $ZS_RC after the deferred stop"
zs_ended
log "SIGTERM with a loop device attached: deferred, then exit 0"

# Without -f the daemon detaches once the mount is ready.
mnt=$(mktemp -d "${TMPDIR:-/tmp}/zswapfs-mnt.XXXXXX")
push_undo rmdir -- "$mnt"
"$ZSWAPFS" zswapfs "$mnt" -o size=64M 2>"$ZS_TMP/bg.log" ||
	fail "zswapfs without -f failed: $(cat "$ZS_TMP/bg.log")"
_zs_is_mounted "$mnt" || fail "zswapfs without -f returned before the mount was ready"
push_undo umount "$mnt"
zs_watch_mount "$mnt"
pids=$(zs_daemon_pids "^$ZSWAPFS zswapfs $mnt")
[ -n "$pids" ] || fail "no daemon process for $mnt"
[ "$(wc -w <<<"$pids")" -eq 1 ] || fail "more than one daemon process for $mnt: $pids"
pid=$pids
echo hello | zs_run 30 dd of="$mnt/swap" bs=512 conv=sync oflag=direct status=none ||
	fail "writing to $mnt/swap failed"
umount "$mnt"
drop_undo umount "$mnt"
for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && fail "detached daemon $pid still running after umount"
log "background mode: detached, ended on umount"
exit 0
