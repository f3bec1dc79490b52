#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck source-path=SCRIPTDIR
#
# The fstab way, with a test fstab file (never /etc/fstab):
#
#	CONFIG  MOUNTPOINT  fuse.zswapfs  OPTIONS  0 0
#
# `mount --fstab FILE MOUNTPOINT` goes through mount.fuse3, which starts the
# daemon (detached: no -f) with CONFIG as SOURCE; the options of the line
# override the file; umount stops the daemon; umount fails (busy) while a
# loop device holds the swap file, and the data is still there afterwards.
#
# mount(8) clears PATH before it runs mount.fuse3, which starts `zswapfs` by
# name through /bin/sh, so the daemon is found only in the shell's built-in
# PATH (/usr/local/sbin first).  To run the daemon of this build, and never an
# installed one, the test runs in a private mount namespace where a directory
# holding only a link to the build's zswapfs is mounted over /usr/local/sbin.
# The FUSE mount lives in that namespace too; loop devices are global.
set -eu
. "$(dirname "$0")/lib.sh"

require_fuse
require_root
command -v mount.fuse3 >/dev/null || command -v mount.fuse >/dev/null ||
	[ -x /sbin/mount.fuse3 ] || fail "mount.fuse3 not found (package fuse3)"
[ -d /usr/local/sbin ] || fail "/usr/local/sbin is missing: nowhere to put zswapfs in mount.fuse3's PATH"

if [ -z "${ZS_FSTAB_NS-}" ]; then
	# before anything is created: the EXIT trap does not survive exec
	trap - EXIT
	exec unshare --mount --propagation private env ZS_FSTAB_NS=1 "$BASH" "$0" "$@"
fi

make_tmpdir
ZSWAPFS=$(readlink -f "$ZSWAPFS")
mkdir "$ZS_TMP/sbin"
ln -s "$ZSWAPFS" "$ZS_TMP/sbin/zswapfs"
mount --bind "$ZS_TMP/sbin" /usr/local/sbin
push_undo umount /usr/local/sbin

MNT=$(mktemp -d "${TMPDIR:-/tmp}/zswapfs-fstab-mnt.XXXXXX")
push_undo rmdir -- "$MNT"
conf=$ZS_TMP/zswapfs.conf
cat >"$conf" <<'EOF'
size = "64M";
algorithm = "zstd";
mem_limit = "16M";	# the fstab line says 32M
recompress = { enabled = false; };
EOF
FSTAB=$ZS_TMP/fstab
printf '# test fstab of %s\n%s %s fuse.zswapfs mem_limit=32M,compact.threshold=0 0 0\n' \
	"$ZS_TEST" "$conf" "$MNT" >"$FSTAB"

is_mounted() { awk -v m="$MNT" '$2 == m { f = 1 } END { exit !f }' /proc/mounts; }

# daemon_pid: the build's daemon serving $MNT (it is not our child).
daemon_pid() {
	local p args
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/exe" 2>/dev/null)" = "$ZSWAPFS" ] || continue
		args=$(tr '\0' '\n' <"$p/cmdline" 2>/dev/null) || continue
		if grep -qxF -- "$MNT" <<<"$args"; then
			echo "${p#/proc/}"
			return 0
		fi
	done
	return 1
}

# _fstab_teardown PID: whatever path the test took, unmount and stop PID.
# shellcheck disable=SC2317 # run by the clean-up
_fstab_teardown() {
	local pid=$1 i
	if is_mounted; then
		umount "$MNT" 2>/dev/null || umount -l "$MNT" || log "cannot unmount $MNT"
	fi
	for ((i = 0; i < 50; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	log "daemon $pid still running after unmount: SIGTERM"
	kill -TERM "$pid"
	sleep 1
	! kill -0 "$pid" 2>/dev/null || kill -KILL "$pid"
}

# ---- mount through the fstab line ---------------------------------------------

zs_watch_mount "$MNT"
out=$(zs_run 30 mount --fstab "$FSTAB" "$MNT" 2>&1) || fail "mount --fstab $FSTAB $MNT: $out"
pid=$(daemon_pid) || {
	is_mounted && umount -l "$MNT"
	fail "mounted, but no $ZSWAPFS process serves $MNT"
}
push_undo _fstab_teardown "$pid"
awk -v m="$MNT" -v s="$conf" '$2 == m && $1 == s && $3 == "fuse.zswapfs" { f = 1 }
	END { exit !f }' /proc/mounts ||
	fail "not a fuse.zswapfs mount of $conf: $(grep -F " $MNT " /proc/mounts)"
zs_run 10 test -f "$MNT/swap" || fail "$MNT/swap is missing"
log "ok: mount --fstab: $(grep -F " $MNT " /proc/mounts), daemon $pid"

for kv in algorithm=zstd disksize=$((64 << 20)) mem_limit=$((32 << 20)); do
	v=$(zs_stat "$MNT" "${kv%%=*}")
	[ "$v" = "${kv#*=}" ] || fail "stats ${kv%%=*} is $v, expected ${kv#*=}"
done
log "ok: the file (zstd, 64M) and the fstab options (mem_limit=32M over 16M) took effect"

# ---- busy while a loop device holds the swap file -----------------------------

loop=$(zs_run 30 losetup --find --show --direct-io=on "$MNT/swap") ||
	fail "losetup on $MNT/swap failed"
push_undo losetup -d "$loop"
gen_data "$ZS_TMP/data" 256 text 7
zs_run 30 dd if="$ZS_TMP/data" of="$loop" bs=64K oflag=direct status=none ||
	fail "write to $loop failed"
if zs_run 30 umount "$MNT" 2>"$ZS_TMP/umount.err"; then
	fail "umount $MNT succeeded while $loop holds $MNT/swap"
fi
is_mounted || fail "umount failed but $MNT is gone"
kill -0 "$pid" 2>/dev/null || fail "the daemon died on the refused umount"
zs_run 30 dd if="$loop" of="$ZS_TMP/back" bs=64K count=16 iflag=direct status=none ||
	fail "read from $loop failed"
cmp -s "$ZS_TMP/data" "$ZS_TMP/back" || fail "data read back through $loop differs"
zs_run 30 dd if="$MNT/swap" of="$ZS_TMP/back2" bs=64K count=16 status=none ||
	fail "read from $MNT/swap failed"
cmp -s "$ZS_TMP/data" "$ZS_TMP/back2" || fail "data read back through $MNT/swap differs"
log "ok: umount refused while $loop is attached ($(head -n 1 "$ZS_TMP/umount.err")); data intact"

# ---- detach, then umount stops the daemon ------------------------------------

losetup -d "$loop" || fail "losetup -d $loop failed"
drop_undo losetup -d "$loop"
out=$(zs_run 30 umount "$MNT" 2>&1) || fail "umount $MNT after detaching: $out"
! is_mounted || fail "$MNT still mounted after umount"
for ((i = 0; i < 100; i++)); do
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.1
done
! kill -0 "$pid" 2>/dev/null || fail "daemon $pid still running 10 s after umount"
drop_undo _fstab_teardown "$pid"
log "ok: umount stopped daemon $pid"
exit 0
