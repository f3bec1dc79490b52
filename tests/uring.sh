#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck source-path=SCRIPTDIR
#
# FUSE over io_uring, with the fuse module's enable_uring set to Y for this
# test (and put back afterwards):
#  - fuse_uring=false keeps the daemon on /dev/fuse;
#  - by default the daemon registers one queue per CPU, one thread each, and
#    serves reads, writes, partial pages, discards and the stats and control
#    files through the rings; every byte reads back;
#  - SIGTERM and umount end it cleanly; a stop while a loop device holds the
#    file is deferred and loses nothing;
#  - then fio_verify.sh and swap_cgroup.sh, the full checks of data through
#    a loop device and through real swap, run again over the rings; when one
#    of them skips (swap_cgroup.sh without a memory cgroup), so does this
#    test, once everything else has passed.
set -eu
. "$(dirname "$0")/lib.sh"
require_fuse
require_root
make_tmpdir
export ZS_FUSE_URING=1
zs_uring_enable

# the daemon's queue threads (named zswapfs-ringN), in the worker: a child
# of the process that mounted (the keeper)
nr_ring_threads() {
	local p
	for p in "$ZS_PID" $(pgrep -P "$ZS_PID" -x zswapfs); do
		cat "/proc/$p/task/"*/comm 2>/dev/null
	done | grep -c '^zswapfs-ring' || true
}

gen_data "$ZS_TMP/text" 2048 text 11
gen_data "$ZS_TMP/random" 512 random 12
cat "$ZS_TMP/text" "$ZS_TMP/random" >"$ZS_TMP/data"	# 10 MiB

# -- fuse_uring=false: the setting is obeyed even where the kernel allows it
zs_mount size=64M,fuse_uring=false
zs_run 60 dd if="$ZS_TMP/data" of="$ZS_MNT/swap" bs=64k oflag=direct conv=notrunc status=none ||
	fail "fuse_uring=false: writing failed"
zs_run 60 cmp "$ZS_TMP/data" <(dd if="$ZS_MNT/swap" bs=64k count=160 iflag=direct status=none) ||
	fail "fuse_uring=false: data read back differs"
[ "$(zs_stat "$ZS_MNT" fuse_transport)" = dev_fuse ] || fail "fuse_uring=false but rings used"
[ "$(zs_stat "$ZS_MNT" uring_reqs)" = 0 ] || fail "fuse_uring=false but uring_reqs > 0"
zs_umount
log "fuse_uring=false: /dev/fuse only"

# -- the rings: every kind of request, every byte
zs_mount size=64M
zs_run 60 dd if="$ZS_TMP/data" of="$ZS_MNT/swap" bs=1M oflag=direct conv=notrunc status=none ||
	fail "writing over the rings failed"
# partial pages at odd 512-byte offsets, and many pages in one request
zs_run 60 dd if="$ZS_TMP/random" of="$ZS_MNT/swap" bs=512 seek=$((40 << 11 | 3)) count=9 \
	oflag=direct conv=notrunc status=none || fail "writing partial pages over the rings failed"
cp "$ZS_TMP/data" "$ZS_TMP/expect"
truncate -s 64M "$ZS_TMP/expect"
dd if="$ZS_TMP/random" of="$ZS_TMP/expect" bs=512 seek=$((40 << 11 | 3)) count=9 \
	conv=notrunc status=none
# a discard of 1 MiB inside the data reads back as zeros
zs_run 30 fallocate --punch-hole --keep-size --offset $((2 << 20)) --length $((1 << 20)) \
	"$ZS_MNT/swap" || fail "discard over the rings failed"
fallocate --punch-hole --keep-size --offset $((2 << 20)) --length $((1 << 20)) "$ZS_TMP/expect"
for bs in 4k 128k 1M; do
	zs_run 60 cmp "$ZS_TMP/expect" <(dd if="$ZS_MNT/swap" bs=$bs iflag=direct status=none) ||
		fail "data read back with bs=$bs over the rings differs"
done
zs_ctl "$ZS_MNT" compact || fail "control write over the rings refused"
if zs_ctl "$ZS_MNT" no-such-command 2>/dev/null; then
	fail "a bad control command was accepted over the rings"
fi
[ "$(zs_stat "$ZS_MNT" fuse_transport)" = io_uring ] ||
	fail "the daemon did not move to io_uring: $(zs_stats_line "$ZS_MNT" fuse_transport uring_reqs)"
reqs=$(zs_stat "$ZS_MNT" uring_reqs)
[ "$reqs" -ge 500 ] || fail "only $reqs requests came through the rings"
cpus=$(getconf _NPROCESSORS_CONF)
threads=$(nr_ring_threads)
[ "$threads" = "$cpus" ] || fail "$threads queue threads for $cpus CPUs"
for key in failed_reads failed_writes; do
	[ "$(zs_stat "$ZS_MNT" "$key")" = 0 ] || fail "$key is not 0"
done
zs_umount
log "rings: $reqs requests, $threads queue threads for $cpus CPUs, data intact, exit 0 on unmount"

# -- ends: SIGTERM, and a stop deferred while a loop device holds the file
zs_mount size=64M
zs_run 60 dd if="$ZS_TMP/data" of="$ZS_MNT/swap" bs=1M oflag=direct conv=notrunc status=none ||
	fail "writing over the rings failed"
kill -TERM "$ZS_PID"
zs_wait_exit 10 || fail "SIGTERM did not end the daemon in 10 s"
[ "$ZS_RC" = 0 ] || fail "daemon exited $ZS_RC on SIGTERM"
zs_ended

zs_mount size=64M
loop=$(zs_run 30 losetup --find --show --direct-io=on "$ZS_MNT/swap") || fail "losetup failed"
push_undo losetup -d "$loop"
zs_run 60 dd if="$ZS_TMP/data" of="$loop" bs=1M oflag=direct status=none ||
	fail "writing through $loop failed"
kill -TERM "$ZS_PID"
sleep 1
zs_alive
zs_run 60 cmp "$ZS_TMP/data" <(dd if="$loop" bs=1M count=10 iflag=direct status=none) ||
	fail "data changed while the stop was deferred"
zs_check_transport "$ZS_MNT"
losetup -d "$loop"
drop_undo losetup -d "$loop"
zs_wait_exit 10 || fail "the deferred stop did not complete once the loop was detached"
[ "$ZS_RC" = 0 ] || fail "daemon exited $ZS_RC after the deferred stop"
zs_ended
log "SIGTERM: exit 0; deferred stop with a loop device: data intact, exit 0"

# -- the full data checks, over the rings; a subtest that skips (77) is no
# failure, and makes this test a skip once the rest has passed
skipped=()
for sub in fio_verify.sh swap_cgroup.sh; do
	rc=0
	"$_zs_here/$sub" || rc=$?
	case $rc in
	0) ;;
	77) skipped+=("$sub") ;;
	*) fail "$sub over io_uring failed (exit status $rc)" ;;
	esac
done
[ "${#skipped[@]}" -eq 0 ] || skip "over io_uring, ${skipped[*]} skipped (see the reason above)"
exit 0
