#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck source-path=SCRIPTDIR
#
# The real chain: zswapfs mount -> loop device -> swap, and a process in a
# memory cgroup (v1 or v2) three times bigger than its limit, so most of its
# memory goes through the daemon and comes back; memhog checks every byte.
# Then mem_limit without a backing file: the daemon's ENOSPC travels through
# the loop device to the kernel's swap-out, the kernel keeps those pages in
# RAM, and no page is lost or wrong, whether it went out or stayed.
#
# ZS_SWAP_BACKEND=zram runs the first workload against kernel zram instead
# (a check of the test itself: memhog, the cgroup set-up, the thresholds).
set -eu
. "$(dirname "$0")/lib.sh"

LIMIT_MIB=96
HOG_MIB=320
HOG_TIMEOUT=300
backend=${ZS_SWAP_BACKEND:-zswapfs}

require_root
require_memory_cgroup
require_memhog
[ "$backend" = zram ] || require_fuse
make_tmpdir

if [ "$backend" = zram ]; then
	zram_swapon 1G
	orig_size() { awk '{ print $1 }' /sys/block/zram0/mm_stat; }
else
	zs_mount size=1G
	zs_swapon "$ZS_MNT"
	orig_size() { zs_stat "$ZS_MNT" orig_data_size; }
fi
log "swap on $ZS_LOOP ($backend)"

# Sample the stored size while the hog runs: once it exits, its swap slots
# are freed (and discarded), so the figure afterwards says nothing.
sampler() {
	local v
	while :; do
		v=$(orig_size) || exit 0
		echo "$v" >>"$ZS_TMP/samples"
		sleep 0.5
	done
}
sampler &
sampler_pid=$!
push_undo kill "$sampler_pid"

make_cgroup "${LIMIT_MIB}M"
zs_memhog "$HOG_TIMEOUT" --size "$HOG_MIB" --passes 2
zs_stop_sampler "$sampler_pid"
zs_memhog_passed "$HOG_TIMEOUT"

max=$(sort -n "$ZS_TMP/samples" | tail -n 1)
log "largest orig_data_size seen while running: $max"
# At least 320 - 96 MiB must have been out on swap for most of the run.
[ "${max:-0}" -ge $((128 << 20)) ] ||
	fail "orig_data_size peaked at ${max:-0} bytes: the hog was hardly swapped out"
log "cgroup: $(zs_cg_report)"

if [ "$backend" = zram ]; then
	log "zram mm_stat: $(cat /sys/block/zram0/mm_stat)"
	exit 0
fi

zs_alive
zs_check_transport "$ZS_MNT"
log "$(zs_stats_line "$ZS_MNT" orig_data_size compr_data_size mem_used_total mem_used_max \
	same_pages huge_pages failed_reads failed_writes notify_free pages_stored rss_bytes)"
for key in failed_reads failed_writes; do
	v=$(zs_stat "$ZS_MNT" "$key")
	[ "$v" -eq 0 ] || fail "$key is $v after the swap workload"
done
v=$(zs_stat "$ZS_MNT" mem_used_max)
[ "$v" -gt 0 ] || fail "mem_used_max is 0 after the swap workload"

# The hog is gone, so swapon --discard has told the daemon its slots are free:
# what it still stores must come down to what the kernel still has on this
# device (other processes on a shared machine may use it too), give or take
# slots in clusters that are not wholly free (the kernel discards clusters).
swap_used() { awk -v d="$ZS_LOOP" '$1 == d { print $4 * 1024 }' /proc/swaps; }
for ((i = 0; i < 100; i++)); do
	v=$(zs_stat "$ZS_MNT" orig_data_size)
	used=$(swap_used)
	[ $((v - used)) -gt $((max / 10)) ] || break
	sleep 0.1
done
log "after the hog exited: orig_data_size $v, swap used on $ZS_LOOP $used"
[ $((v - used)) -le $((max / 10)) ] ||
	fail "orig_data_size $v bytes but only $used bytes of swap in use, 10 s after the hog exited (discard not reaching the daemon?)"

zs_swapoff
zs_alive
zs_umount

# ---- mem_limit without a backing file -------------------------------------------

# The hog's compressed pages need far more than mem_limit, and than the
# cgroup holds besides: swap-outs fail with ENOSPC.  The kernel keeps a page
# whose write failed and retries it; with nowhere for the rest to go it
# would retry forever (kernel zram with a mem_limit does the same: no OOM
# kill comes).  So once the failures are seen, the cgroup's limit is raised:
# the hog goes on and reads back every page, those that reached the daemon
# and those the kernel kept.
ENOSPC_LIMIT_MIB=16
ENOSPC_CG_MIB=48
ENOSPC_HOG_MIB=128
log "mem_limit=${ENOSPC_LIMIT_MIB}M, no backing file:" \
	"memhog ${ENOSPC_HOG_MIB} MiB in a ${ENOSPC_CG_MIB} MiB cgroup"
zs_mount "size=512M,mem_limit=${ENOSPC_LIMIT_MIB}M"
zs_swapon "$ZS_MNT"
make_cgroup "${ENOSPC_CG_MIB}M"
zs_memhog_start "$HOG_TIMEOUT" --size "$ENOSPC_HOG_MIB" --passes 2
for ((i = 0; i < 600; i++)); do
	[ "$(zs_stat "$ZS_MNT" failed_writes)" -lt 1000 ] || break
	kill -0 "$ZS_HOG_PID" 2>/dev/null || break
	sleep 0.1
done
log "after $((i / 10)) s: $(zs_stats_line "$ZS_MNT" mem_used_total failed_writes write_errors \
	write_reqs pages_stored)"
zs_cg_set_limit $((2 * ENOSPC_HOG_MIB))M
zs_memhog_wait
zs_alive
log "cgroup: $(zs_cg_report)"
log "$(zs_stats_line "$ZS_MNT" mem_used_total mem_used_max mem_limit failed_writes \
	failed_reads write_errors write_reqs read_reqs pages_stored)"
[ "$ZS_HOG_RC" -ne 137 ] || fail "memhog was killed ($(zs_cg_oom_kills) OOM kills in its cgroup)"
zs_memhog_passed "$HOG_TIMEOUT"
# The refusals happened, were counted, and went back to the kernel as
# failed writes; the limit held.
v=$(zs_stat "$ZS_MNT" failed_writes)
[ "$v" -ge 1000 ] || fail "failed_writes is $v: mem_limit was hardly reached"
[ "$(zs_stat "$ZS_MNT" write_errors)" -eq "$v" ] ||
	fail "write_errors $(zs_stat "$ZS_MNT" write_errors) != failed_writes $v"
[ "$(zs_stat "$ZS_MNT" failed_reads)" -eq 0 ] || fail "failed_reads after ENOSPC"
v=$(zs_stat "$ZS_MNT" mem_used_max)
[ "$v" -le $((ENOSPC_LIMIT_MIB << 20)) ] || fail "mem_used_max $v is above mem_limit"
zs_swapoff
zs_alive
zs_umount
exit 0
