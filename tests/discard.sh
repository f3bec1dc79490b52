#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck source-path=SCRIPTDIR
#
# Discard is how swap tells zswapfs that a slot is free: a punched hole must
# read as zeros, leave everything around it intact, lower the counters, and
# give the memory back to the system (the daemon's RSS falls).
set -eu
. "$(dirname "$0")/lib.sh"

require_fuse
require_root
require_memhog
make_tmpdir

MIB=$((1 << 20))
REF=$ZS_TMP/ref

stat_is() {
	local v
	v=$(zs_stat "$ZS_MNT" "$1")
	[ "$v" -eq "$2" ] || fail "$3: $1 is $v, expected $2"
}

# check_range DEV OFFSET LENGTH LABEL: DEV (file or loop device) holds what
# the reference holds over that range.
check_range() {
	zs_run 60 cmp <(dd if="$1" iflag=direct,skip_bytes,count_bytes skip="$2" count="$3" bs=1M \
		status=none) \
		<(dd if="$REF" iflag=skip_bytes,count_bytes skip="$2" count="$3" bs=1M status=none) ||
		fail "$4: data differs from the reference"
}

# zero_ref OFFSET LENGTH
zero_ref() {
	fallocate --punch-hole --keep-size --offset "$1" --length "$2" "$REF"
}

# the worker's (the keeper's child that serves: zswapfs(8), RESTART), where
# the pages are mapped
rss_kib() {
	awk '$1 == "VmRSS:" { print $2 }' "/proc/$(pgrep -P "$ZS_PID" -x zswapfs)/status"
}

gen_data "$ZS_TMP/text" 4096 text 11
truncate -s 1G "$REF"
zs_mount size=1G
swap=$ZS_MNT/swap

# ---- fallocate(PUNCH_HOLE) on the file ------------------------------------------
zs_run 60 dd if="$ZS_TMP/text" of="$swap" bs=1M oflag=direct conv=notrunc status=none ||
	fail "writing 16 MiB failed"
dd if="$ZS_TMP/text" of="$REF" bs=1M conv=notrunc status=none
stat_is pages_stored 4096 "16 MiB written"

zs_run 30 fallocate --punch-hole --keep-size --offset $((4 * MIB)) --length $((4 * MIB)) "$swap" ||
	fail "fallocate --punch-hole on the swap file failed"
zero_ref $((4 * MIB)) $((4 * MIB))
stat_is pages_stored 3072 "4 MiB punched"
stat_is notify_free 1024 "4 MiB punched"
[ "$(zs_run 10 stat -c %s "$swap")" -eq $((1024 * MIB)) ] || fail "punching a hole changed st_size"
zs_run 30 cmp -n $((4 * MIB)) <(dd if="$swap" iflag=direct bs=1M skip=4 count=4 status=none) /dev/zero ||
	fail "the punched range does not read as zeros"
check_range "$swap" 0 $((16 * MIB)) "after punching 4 MiB"

# Holes that do not cover whole pages: the bytes in the range read as zeros
# and the rest of those pages survives; or the call fails and changes nothing.
punch_partial() {
	local off=$1 len=$2 whole=$3 before after
	before=$(zs_stat "$ZS_MNT" pages_stored)
	if zs_run 30 fallocate --punch-hole --keep-size --offset "$off" --length "$len" "$swap" \
		2>/dev/null
	then
		zero_ref "$off" "$len"
		after=$(zs_stat "$ZS_MNT" pages_stored)
		[ $((before - after)) -eq "$whole" ] ||
			fail "hole $off+$len: pages_stored went from $before to $after"
		log "partial hole $off+$len: zeroed"
	else
		log "partial hole $off+$len: refused"
	fi
	check_range "$swap" 0 $((16 * MIB)) "after the partial hole $off+$len"
}
punch_partial $((8 * MIB + 512)) 1024 0
punch_partial $((9 * MIB - 1024)) 6144 1

# ---- blkdiscard through a loop device -------------------------------------------------
loop=$(zs_run 30 losetup --find --show --direct-io=on "$swap") || fail "losetup failed"
push_undo losetup -d "$loop"
max=$(cat "/sys/block/${loop#/dev/}/queue/discard_max_bytes")
[ "$max" -gt 0 ] || fail "$loop does not offer discard (discard_max_bytes 0)"
zs_run 60 dd if="$ZS_TMP/text" of="$loop" bs=1M seek=32 oflag=direct status=none ||
	fail "writing through $loop failed"
dd if="$ZS_TMP/text" of="$REF" bs=1M seek=32 conv=notrunc status=none
before=$(zs_stat "$ZS_MNT" pages_stored)
zs_run 30 blkdiscard --offset $((36 * MIB)) --length $((4 * MIB)) "$loop" ||
	fail "blkdiscard failed"
zero_ref $((36 * MIB)) $((4 * MIB))
stat_is pages_stored $((before - 1024)) "blkdiscard of 4 MiB"
zs_run 30 cmp -n $((4 * MIB)) <(dd if="$loop" iflag=direct bs=1M skip=36 count=4 status=none) \
	/dev/zero ||
	fail "the discarded range does not read as zeros through the loop device"
check_range "$loop" $((32 * MIB)) $((16 * MIB)) "loop, after blkdiscard"
check_range "$swap" 0 $((64 * MIB)) "file, after blkdiscard"
zs_run 60 blkdiscard "$loop" || fail "blkdiscard of the whole device failed"
stat_is pages_stored 0 "blkdiscard of everything"
losetup -d "$loop"
drop_undo losetup -d "$loop"

# ---- memory goes back to the system -------------------------------------------------
zs_ctl "$ZS_MNT" compact || fail "'compact' was refused"
rss0=$(zs_stat "$ZS_MNT" rss_bytes)
"$MEMHOG" --size 512 --seed 12 --dump - |
	zs_run 120 dd of="$swap" bs=1M iflag=fullblock oflag=direct conv=notrunc status=none ||
	fail "writing 512 MiB failed"
used1=$(zs_stat "$ZS_MNT" mem_used_total)
rss1=$(zs_stat "$ZS_MNT" rss_bytes)
vm1=$(rss_kib)
log "512 MiB stored: mem_used_total $used1, rss_bytes $rss0 -> $rss1, VmRSS $vm1 KiB"
[ $((rss1 - rss0)) -ge $((used1 / 2)) ] ||
	fail "rss_bytes grew by $((rss1 - rss0)) only, for mem_used_total $used1"

zs_run 60 fallocate --punch-hole --keep-size --offset 0 --length $((480 * MIB)) "$swap" ||
	fail "punching 480 MiB failed"
zs_ctl "$ZS_MNT" compact || fail "'compact' was refused"
for ((i = 0; i < 50; i++)); do
	rss2=$(zs_stat "$ZS_MNT" rss_bytes)
	[ $((rss1 - rss2)) -lt $((used1 / 2)) ] || break
	sleep 0.1
done
used2=$(zs_stat "$ZS_MNT" mem_used_total)
vm2=$(rss_kib)
log "480 MiB discarded: mem_used_total $used2, rss_bytes $rss2, VmRSS $vm2 KiB"
[ "$used2" -lt $((used1 / 4)) ] || fail "mem_used_total only fell from $used1 to $used2"
[ $((rss1 - rss2)) -ge $((used1 / 2)) ] ||
	fail "rss_bytes only fell from $rss1 to $rss2 after discarding 15/16 of $used1 bytes"
[ $(((vm1 - vm2) * 1024)) -ge $((used1 / 2)) ] ||
	fail "VmRSS only fell from $vm1 to $vm2 KiB after discarding 15/16 of $used1 bytes"
# the last 32 MiB are still there
zs_run 60 cmp <(dd if="$swap" iflag=direct bs=1M skip=480 count=32 status=none) \
	<("$MEMHOG" --size 512 --seed 12 --dump - | tail -c $((32 * MIB))) ||
	fail "the 32 MiB left after the discard do not read back"

for key in failed_reads failed_writes; do
	v=$(zs_stat "$ZS_MNT" "$key")
	[ "$v" -eq 0 ] || fail "$key is $v"
done
zs_alive
zs_umount
exit 0
