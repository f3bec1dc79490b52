#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck source-path=SCRIPTDIR
#
# Writeback when the backing file fails, for real.
#
# a) Full: the backing file sits on a tiny ext4 filesystem, smaller than
#    writeback.max_size.  Writes go on while either the arena or the
#    filesystem has room, fail with ENOSPC once both are full, and every
#    page whose write succeeded reads back byte for byte.
# b) Failing I/O: the backing file sits on ext4 on a loop device over an
#    image file; cutting the image to 1 MiB and telling the loop device
#    (losetup --set-capacity) makes every I/O past that fail with EIO, as a
#    dying disk's would.  (This is what a device-mapper `error` table would
#    do; this kernel has no device-mapper and no fault injection.  A loop
#    device over a second zswapfs mount, whose daemon is killed, did it
#    once; a backing file there is refused now: FUSE under the backing file
#    could deadlock the daemon.)
#    Pages written back before the failure then read as EIO, each of them
#    and nothing else; pages written after it stay in RAM and read back
#    intact; the daemon goes on serving and still unmounts cleanly.
set -eu
. "$(dirname "$0")/lib.sh"

MIB=$((1 << 20))

require_root
require_fuse
require_memhog
command -v mkfs.ext4 >/dev/null || fail "mkfs.ext4 is not installed (package e2fsprogs)"
make_tmpdir

# page_states FILE REF OFFSET NPAGES: read NPAGES pages of FILE from OFFSET,
# one O_DIRECT read each, compare each with REF at the same offset, and print
# how many were: ok (as REF), eio (the read failed with EIO), zero (all
# zeros, REF is not), bad (anything else), then the first few pages that
# were not ok, as OFFSET-relative indices with their state.
page_states() {
	zs_run 120 "$PYTHON" - "$@" <<'EOF'
import errno, mmap, os, sys
path, ref, off, npages = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
count = {"ok": 0, "eio": 0, "zero": 0, "bad": 0}
odd = []
fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
buf = mmap.mmap(-1, 4096)	# page-aligned, as O_DIRECT wants
with open(ref, "rb") as r:
    for i in range(npages):
        pos = off + i * 4096
        r.seek(pos)
        want = r.read(4096).ljust(4096, b"\0")
        try:
            n = os.preadv(fd, [buf], pos)
            got = buf[:n]
            state = "ok" if got == want else "zero" if got == bytes(4096) else "bad"
        except OSError as e:
            state = "eio" if e.errno == errno.EIO else "bad"
        count[state] += 1
        if state != "ok" and len(odd) < 4:
            odd.append("%d:%s" % (i, state))
os.close(fd)
print(count["ok"], count["eio"], count["zero"], count["bad"], ",".join(odd) or "-")
EOF
}

# writeback_now MOUNT: `writeback all`, and wait until it has run.
writeback_now() {
	zs_ctl "$1" writeback all || fail "'writeback all' was refused"
	zs_stat_wait "$1" writeback_pending 0
}

# fs_umount DIR: unmount a filesystem of ours whose device may be failing.
fs_umount() {
	zs_run 30 umount "$1" 2>/dev/null || umount -l "$1"
	rmdir -- "$1"
}

# make_ext4 DEV: an ext4 filesystem on DEV, mounted on a fresh directory.
# Sets FS_DIR.
make_ext4() {
	zs_run 60 mkfs.ext4 -q "$1" || fail "mkfs.ext4 on $1 failed"
	FS_DIR=$(mktemp -d "$ZS_TMP/fs.XXXXXX")
	zs_run 30 mount -t ext4 "$1" "$FS_DIR" || fail "mounting ext4 on $1 failed"
	push_undo fs_umount "$FS_DIR"
}

# ---- a) the backing filesystem fills up -------------------------------------------

log "a) backing file on an 8 MiB ext4 filesystem, mem_limit 16M"
truncate -s 8M "$ZS_TMP/small.img"
loop=$(losetup --find --show "$ZS_TMP/small.img") || fail "losetup failed"
push_undo losetup -d "$loop"
make_ext4 "$loop"
fs=$FS_DIR
fs_avail=$(df -B1 --output=avail "$fs" | awk 'NR == 2 { print $1 }')
data=$ZS_TMP/data
"$MEMHOG" --size 64 --seed 41 --dump "$data"
cp "$data" "$ZS_TMP/expect"

zs_mount "size=64M,mem_limit=16M,writeback.backing_file=$fs/backing,writeback.max_size=32M"
mnt=$ZS_MNT
mem_limit=$(zs_stat "$mnt" mem_limit)
# 1 MiB at a time, until one write fails: what memhog's pages compress to
# is about 0.6 of their size, so 64 MiB is far more than 16 MiB of arena and
# 6 MiB of filesystem can hold.
full_at=-
for ((k = 0; k < 64; k++)); do
	if ! zs_run 30 dd if="$data" of="$mnt/swap" bs=1M skip=$k seek=$k count=1 oflag=direct \
		conv=notrunc status=none 2>"$ZS_TMP/dd.err"; then
		break
	fi
	if [ "$full_at" = - ] && [ "$(zs_stat "$mnt" writeback_status)" = full ]; then
		full_at=$k
	fi
done
[ "$k" -lt 64 ] || fail "64 MiB fitted into 16 MiB of arena and an 8 MiB filesystem"
zs_alive
log "chunk $k failed: $(cat "$ZS_TMP/dd.err")"
log "writeback_status became full after chunk $full_at;" \
	"$(zs_stats_line "$mnt" mem_used_total bd_count backing_bytes_used backing_write_errors \
		writeback_failed failed_writes writeback_status)"
grep -q "No space left on device" "$ZS_TMP/dd.err" || fail "the write failed, but not with ENOSPC"
# Both full: the filesystem has no room for another segment, the arena none
# for another page (give or take a span it could not fill).
avail=$(df -B1 --output=avail "$fs" | awk 'NR == 2 { print $1 }')
back=$(stat -c %s "$fs/backing")
used=$(zs_stat "$mnt" mem_used_total)
log "filesystem: $fs_avail bytes free at start, $avail now; backing file $back bytes"
[ "$avail" -lt "$MIB" ] || fail "ENOSPC while the filesystem still has $avail bytes free"
[ "$back" -ge $((fs_avail - MIB)) ] || fail "ENOSPC with a backing file of $back bytes only"
[ "$used" -ge $((mem_limit - MIB)) ] || fail "ENOSPC with mem_used_total $used of $mem_limit"
[ "$(zs_stat "$mnt" writeback_status)" = full ] || fail "writeback_status is not full"
werr=$(zs_stat "$mnt" backing_write_errors)
kept=$(zs_stat "$mnt" writeback_failed)
[ $((werr + kept)) -gt 0 ] || fail "neither backing_write_errors nor writeback_failed counted"
[ "$(zs_stat "$mnt" failed_writes)" -gt 0 ] || fail "failed_writes did not count the ENOSPC"

# Everything that was written reads back; the failed chunk holds, page by
# page, either what was there before (zeros) or what was written.
read -r ok eio zero bad odd < <(page_states "$mnt/swap" "$data" 0 $((k * 256)))
[ "$ok" -eq $((k * 256)) ] ||
	fail "of $((k * 256)) pages written: ok $ok, eio $eio, zero $zero, bad $bad ($odd)"
read -r ok eio zero bad odd < <(page_states "$mnt/swap" "$data" $((k * MIB)) 256)
[ $((ok + zero)) -eq 256 ] ||
	fail "the failed chunk holds torn pages: ok $ok, eio $eio, zero $zero, bad $bad ($odd)"
log "all $((k * 256)) pages written read back; the failed chunk: $ok new, $zero old pages"
[ "$(zs_stat "$mnt" backing_read_errors)" -eq 0 ] || fail "backing_read_errors counted"
[ "$(zs_stat "$mnt" bd_reads)" -gt 0 ] || fail "nothing was read from the backing file"

# Freeing room (a discard of the first 16 MiB) makes writes work again.
zs_run 30 fallocate --punch-hole --keep-size --offset 0 --length $((16 * MIB)) "$mnt/swap" ||
	fail "discard failed"
fallocate --punch-hole --keep-size --offset 0 --length $((16 * MIB)) "$ZS_TMP/expect"
zs_run 30 dd if="$data" of="$mnt/swap" bs=1M skip=$k seek=$k count=1 oflag=direct conv=notrunc \
	status=none || fail "writing chunk $k again failed after 16 MiB were discarded"
read -r ok eio zero bad odd < <(page_states "$mnt/swap" "$ZS_TMP/expect" 0 $(((k + 1) * 256)))
[ "$ok" -eq $(((k + 1) * 256)) ] ||
	fail "after the discard and rewrite: ok $ok, eio $eio, zero $zero, bad $bad ($odd)"
zs_umount
fs_umount "$fs"
drop_undo fs_umount "$fs"
losetup -d "$loop"
drop_undo losetup -d "$loop"

# ---- b) the backing device fails ------------------------------------------------------

log "b) backing file on ext4 on a device that starts failing"
truncate -s 64M "$ZS_TMP/dev.img"
loop=$(zs_run 30 losetup --find --show --direct-io=on "$ZS_TMP/dev.img") || fail "losetup failed"
push_undo losetup -d "$loop"
make_ext4 "$loop"
fs=$FS_DIR

# mem_limit above what A to C need, so that writeback happens when the test
# says so; E then fills the arena.
zs_mount "size=64M,mem_limit=16M,writeback.backing_file=$fs/backing"
mnt=$ZS_MNT
# Incompressible pages (a 4 KiB object each, 254 to a segment), so that a
# few MiB fill several segments: a page in the segment still open is read
# from the daemon's buffer, not from the device.
gen_data "$ZS_TMP/A" 1536 random 51	# 6 MiB at 0: written back, then lost
gen_data "$ZS_TMP/D" 512 random 52	# 2 MiB at 8 MiB: written back after A
gen_data "$ZS_TMP/B" 1024 text 53	# 4 MiB at 16 MiB: in RAM when the device fails
gen_data "$ZS_TMP/C" 1024 text 54	# 4 MiB at 24 MiB: written after the failure
gen_data "$ZS_TMP/E" 4096 random 55	# 16 MiB at 32 MiB: more than the arena holds
ref=$ZS_TMP/ref
truncate -s 48M "$ref"
dd if="$ZS_TMP/A" of="$ref" bs=1M seek=0 conv=notrunc status=none
dd if="$ZS_TMP/D" of="$ref" bs=1M seek=8 conv=notrunc status=none
dd if="$ZS_TMP/B" of="$ref" bs=1M seek=16 conv=notrunc status=none
dd if="$ZS_TMP/C" of="$ref" bs=1M seek=24 conv=notrunc status=none
dd if="$ZS_TMP/E" of="$ref" bs=1M seek=32 conv=notrunc status=none

zs_run 30 dd if="$ZS_TMP/A" of="$mnt/swap" bs=1M seek=0 oflag=direct conv=notrunc status=none ||
	fail "writing A failed"
zs_run 30 dd if="$ZS_TMP/D" of="$mnt/swap" bs=1M seek=8 oflag=direct conv=notrunc status=none ||
	fail "writing D failed"
writeback_now "$mnt"
[ "$(zs_stat "$mnt" bd_count)" -eq 2048 ] || fail "bd_count is $(zs_stat "$mnt" bd_count), not 2048"
[ "$(zs_stat "$mnt" writeback_status)" = ok ] || fail "writeback_status is not ok"
read -r ok eio zero bad odd < <(page_states "$mnt/swap" "$ref" 0 2048)
[ "$ok" -eq 2048 ] || fail "before the failure: ok $ok, eio $eio, zero $zero, bad $bad ($odd)"
zs_run 30 dd if="$ZS_TMP/B" of="$mnt/swap" bs=1M seek=16 oflag=direct conv=notrunc status=none ||
	fail "writing B failed"

# The device fails: everything past its first MiB (the backing file's
# blocks are far beyond) is gone, and every request there fails.
truncate -s 1M "$ZS_TMP/dev.img"
losetup --set-capacity "$loop" || fail "losetup --set-capacity $loop failed"
log "cut $loop to 1 MiB; from now on its I/O fails"
rerr0=$(zs_stat "$mnt" backing_read_errors)
fr0=$(zs_stat "$mnt" failed_reads)
read -r ok eio zero bad odd < <(page_states "$mnt/swap" "$ref" 0 1536)
[ "$eio" -eq 1536 ] ||
	fail "pages written back before the failure: eio $eio, ok $ok, zero $zero, bad $bad ($odd)"
rerr1=$(zs_stat "$mnt" backing_read_errors)
fr1=$(zs_stat "$mnt" failed_reads)
log "A: all 1536 pages EIO; backing_read_errors $rerr0 -> $rerr1, failed_reads $fr0 -> $fr1"
[ $((rerr1 - rerr0)) -ge 1536 ] || fail "backing_read_errors rose by $((rerr1 - rerr0)) only"
[ $((fr1 - fr0)) -ge 1536 ] || fail "failed_reads rose by $((fr1 - fr0)) only"
# D's last pages may still be in the open segment's buffer: EIO or right.
read -r ok eio zero bad odd < <(page_states "$mnt/swap" "$ref" $((8 * MIB)) 512)
[ $((ok + eio)) -eq 512 ] || fail "D: ok $ok, eio $eio, zero $zero, bad $bad ($odd)"
log "D: $eio pages EIO, $ok read from the open segment"
read -r ok eio zero bad odd < <(page_states "$mnt/swap" "$ref" $((16 * MIB)) 1024)
[ "$ok" -eq 1024 ] || fail "B (in RAM): ok $ok, eio $eio, zero $zero, bad $bad ($odd)"

# Writeback after the failure keeps the pages in RAM.
zs_run 30 dd if="$ZS_TMP/C" of="$mnt/swap" bs=1M seek=24 oflag=direct conv=notrunc status=none ||
	fail "writing after the failure failed"
werr0=$(zs_stat "$mnt" backing_write_errors)
writeback_now "$mnt"
log "after writeback all: $(zs_stats_line "$mnt" bd_count writeback_status writeback_failed \
	backing_write_errors backing_read_errors failed_reads)"
[ "$(zs_stat "$mnt" writeback_status)" = error ] || fail "writeback_status is not error"
[ "$(zs_stat "$mnt" writeback_failed)" -gt 0 ] || fail "writeback_failed is 0"
[ "$(zs_stat "$mnt" backing_write_errors)" -gt "$werr0" ] ||
	fail "backing_write_errors did not rise"
[ "$(zs_stat "$mnt" bd_count)" -eq 2048 ] || fail "bd_count changed: $(zs_stat "$mnt" bd_count)"
read -r ok eio zero bad odd < <(page_states "$mnt/swap" "$ref" $((16 * MIB)) 2048)
[ "$ok" -eq 2048 ] ||
	fail "B and C after the failed writeback: ok $ok, eio $eio, zero $zero, bad $bad ($odd)"

# With the arena full and nowhere to write back to, a write fails at once
# with ENOSPC (the kernel keeps its page) instead of hanging; what was
# accepted reads back.
fw0=$(zs_stat "$mnt" failed_writes)
for ((k = 0; k < 16; k++)); do
	if ! zs_run 30 dd if="$ZS_TMP/E" of="$mnt/swap" bs=1M skip=$k seek=$((32 + k)) count=1 \
		oflag=direct conv=notrunc status=none 2>"$ZS_TMP/dd.err"; then
		break
	fi
done
[ "$k" -lt 16 ] || fail "16 MiB of incompressible pages fitted into a 16 MiB arena"
log "E: chunk $k failed: $(cat "$ZS_TMP/dd.err");" \
	"$(zs_stats_line "$mnt" mem_used_total failed_writes writeback_failed writeback_status)"
grep -q "No space left on device" "$ZS_TMP/dd.err" || fail "the write failed, but not with ENOSPC"
[ "$(zs_stat "$mnt" failed_writes)" -gt "$fw0" ] || fail "failed_writes did not count the ENOSPC"
[ "$(zs_stat "$mnt" writeback_status)" = error ] || fail "writeback_status is no longer error"
read -r ok eio zero bad odd < <(page_states "$mnt/swap" "$ref" $((16 * MIB)) $(((16 + k) * 256)))
[ "$ok" -eq $(((16 + k) * 256)) ] ||
	fail "B, C and E up to the failure: ok $ok, eio $eio, zero $zero, bad $bad ($odd)"
read -r ok eio zero bad odd < <(page_states "$mnt/swap" "$ref" $(((32 + k) * MIB)) 256)
[ $((ok + zero)) -eq 256 ] ||
	fail "the failed chunk holds torn pages: ok $ok, eio $eio, zero $zero, bad $bad ($odd)"
fallocate --punch-hole --keep-size --offset $(((32 + k) * MIB)) --length $(((16 - k) * MIB)) \
	"$ref"

# It keeps serving: a discard frees the lost pages (and the failing device
# does not get in the way), after which they read as zeros; one of E's
# makes room in the arena for the chunk that failed.
zs_run 30 fallocate --punch-hole --keep-size --offset 0 --length $((16 * MIB)) "$mnt/swap" ||
	fail "discard failed with the backing device failing"
fallocate --punch-hole --keep-size --offset 0 --length $((16 * MIB)) "$ref"
[ "$(zs_stat "$mnt" bd_count)" -eq 0 ] ||
	fail "bd_count is $(zs_stat "$mnt" bd_count) after the discard"
zs_run 30 fallocate --punch-hole --keep-size --offset $((32 * MIB)) --length $((2 * MIB)) "$mnt/swap" ||
	fail "discard failed with the arena full"
fallocate --punch-hole --keep-size --offset $((32 * MIB)) --length $((2 * MIB)) "$ref"
zs_run 30 dd if="$ZS_TMP/E" of="$mnt/swap" bs=1M skip=$k seek=$((32 + k)) count=1 oflag=direct \
	conv=notrunc status=none || fail "writing chunk $k of E again failed after the discard"
dd if="$ZS_TMP/E" of="$ref" bs=1M skip=$k seek=$((32 + k)) count=1 conv=notrunc status=none
read -r ok eio zero bad odd < <(page_states "$mnt/swap" "$ref" 0 $((48 * 256)))
[ "$ok" -eq $((48 * 256)) ] ||
	fail "after the discard: ok $ok, eio $eio, zero $zero, bad $bad ($odd)"
zs_alive
# And it unmounts, though its backing file can no longer be written.
zs_umount
log "writeback faults: OK"
exit 0
