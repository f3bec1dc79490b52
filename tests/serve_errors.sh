#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck source-path=SCRIPTDIR
#
# No exit while swap is on (issue 9, part 4): reads and polls of /dev/fuse
# that fail (EIO, ENOMEM, EINVAL; ENOMEM and EINTR for poll), injected by an
# LD_PRELOAD shim (tests/failshim.so) while swap is on through a loop
# device, are logged with a rate limit and counted (request_loop_errors),
# and the daemon goes on serving: a process three times bigger than its
# memory cgroup swaps through it and memhog checks every byte.  Then the
# failures stop and the daemon still ends cleanly at umount.
#
# Swap: run under the shared lock on a shared machine (COMMON.md).
set -eu
. "$(dirname "$0")/lib.sh"

LIMIT_MIB=96
HOG_MIB=256
HOG_TIMEOUT=300
SHIM=${FAILSHIM:-$top_builddir/tests/failshim.so}
# Fail one read in READ_EVERY and one poll in POLL_EVERY: often enough that
# thousands fail during the run, seldom enough that requests get through.
READ_EVERY=40
POLL_EVERY=25

require_fuse
require_root
require_memory_cgroup
require_memhog
[ -f "$SHIM" ] || fail "shim not built: $SHIM (make check builds it)"
make_tmpdir

CTL=$ZS_TMP/failshim.ctl
truncate -s 4096 "$CTL"
# set_failures READ POLL: rewrite the control file in place (the shim maps it)
set_failures() {
	printf '%-15s' "$1 $2" | dd of="$CTL" bs=16 count=1 conv=notrunc status=none
}
# injected N: how many reads (0) or polls (1) the shim failed
injected() { od -An -t u8 -j $((64 + 8 * $1)) -N 8 "$CTL" | tr -d ' '; }

set_failures 0 0
preload=$SHIM
if zs_sanitized; then
	# The shim comes before the sanitizer's runtime in the library list;
	# the shim finds the real functions (ASan's interceptors) with
	# dlsym(RTLD_NEXT).
	export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
fi
LD_PRELOAD=$preload ZS_FAILSHIM=$CTL zs_mount size=1G
zs_swapon "$ZS_MNT"
log "swap on $ZS_LOOP; failing every ${READ_EVERY}th read and ${POLL_EVERY}th poll of /dev/fuse"

set_failures $READ_EVERY $POLL_EVERY
make_cgroup "${LIMIT_MIB}M"
zs_memhog "$HOG_TIMEOUT" --size "$HOG_MIB" --passes 2
reads=$(injected 0)
polls=$(injected 1)
set_failures 0 0
zs_alive
zs_memhog_passed "$HOG_TIMEOUT"

errors=$(zs_stat "$ZS_MNT" request_loop_errors)
log "injected: $reads failed reads, $polls failed polls; request_loop_errors $errors;" \
	"$(zs_stats_line "$ZS_MNT" read_reqs write_reqs failed_reads failed_writes log_dropped)"
[ "$reads" -gt 0 ] || fail "the shim failed no read of /dev/fuse (not preloaded?)"
[ "$polls" -gt 0 ] || fail "the shim failed no poll of /dev/fuse"
# every failed read is counted; polls that failed with EINTR are not errors
[ "$errors" -ge "$reads" ] || fail "request_loop_errors $errors < $reads failed reads"
for key in failed_reads failed_writes; do
	v=$(zs_stat "$ZS_MNT" "$key")
	[ "$v" -eq 0 ] || fail "$key is $v"
done
# logged, but not once per failure
n=$(grep -c "request loop: " "$ZS_LOG" || true)
[ "$n" -ge 1 ] || fail "no failure was logged"
[ "$n" -lt $(((reads + polls) / 2)) ] || fail "$n log lines for $reads + $polls failures: not rate-limited"
! grep -q "fuse: reading device" "$ZS_LOG" || fail "libfuse printed the read errors itself"
log "ok: $n log lines; the daemon served on"

timeout 120 swapoff "$ZS_LOOP" || fail "swapoff $ZS_LOOP failed"
drop_undo timeout 120 swapoff "$ZS_LOOP"
losetup -d "$ZS_LOOP"
drop_undo losetup -d "$ZS_LOOP"
zs_umount
exit 0
