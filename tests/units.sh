#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck source-path=SCRIPTDIR
#
# The systemd units of contrib/systemd: what they must say for swap to come up
# at boot and go down before the daemon at shutdown (by reading the files),
# that systemd itself accepts them with no warning and no ordering cycle
# (systemd-analyze verify: systemd is a test dependency, contrib/deps.sh
# installs it), the same for the fstab variant, and that their two command
# lines do turn swap on and off over a real mount (root and /dev/fuse: the
# test skips without them, after the checks that need neither).
set -eu
. "$(dirname "$0")/lib.sh"

UNITS=$top_srcdir/contrib/systemd
MOUNT_UNIT=run-zswapfs.mount
SWAP_UNIT=zswapfs-swap.service
ZSWAPCTL=${ZSWAPCTL:-$top_builddir/src/zswapctl}
make_tmpdir

# ---- reading unit files -------------------------------------------------------

# unit_words FILE SECTION KEY: every value of KEY in [SECTION], one word a
# line (dependency keys hold lists and may be repeated).
unit_words() {
	awk -v sect="[$2]" -v key="$3" '
		/^[ \t]*[#;]/ || /^[ \t]*$/ { next }
		/^\[/ { cur = $0; next }
		cur == sect {
			k = $0; sub(/[ \t]*=.*/, "", k)
			if (k != key) next
			v = $0; sub(/^[^=]*=[ \t]*/, "", v)
			n = split(v, w, /[ \t]+/)
			for (i = 1; i <= n; i++) if (w[i] != "") print w[i]
		}' "$1"
}

# unit_line FILE SECTION KEY: the value of a single-valued KEY, as written.
unit_line() {
	awk -v sect="[$2]" -v key="$3" '
		/^[ \t]*[#;]/ { next }
		/^\[/ { cur = $0; next }
		cur == sect {
			k = $0; sub(/[ \t]*=.*/, "", k)
			if (k == key) { v = $0; sub(/^[^=]*=[ \t]*/, "", v); last = v; n++ }
		}
		END { if (n == 1) print last; exit n != 1 }' "$1"
}

# want FILE SECTION KEY WORD: WORD must be among the values of KEY.
want() {
	unit_words "$1" "$2" "$3" | grep -qxF -- "$4" ||
		fail "$(basename "$1"): [$2] $3= does not hold $4"
}

# want_not FILE SECTION KEY WORD
want_not() {
	! unit_words "$1" "$2" "$3" | grep -qxF -- "$4" ||
		fail "$(basename "$1"): [$2] $3= must not hold $4"
}

# want_is FILE SECTION KEY VALUE: KEY is set once, to VALUE.
want_is() {
	local v
	v=$(unit_line "$1" "$2" "$3") || fail "$(basename "$1"): [$2] $3= missing or set twice"
	[ "$v" = "$4" ] || fail "$(basename "$1"): [$2] $3=$v, expected $4"
}

# sections FILE: fail on a section systemd would ignore (a typo).
check_sections() {
	local s
	while read -r s; do
		case $s in
		'[Unit]' | '[Mount]' | '[Service]' | '[Install]') ;;
		*) fail "$(basename "$1"): unexpected section $s" ;;
		esac
	done < <(grep '^\[' "$1")
}

# ---- structure ------------------------------------------------------------------

mu=$UNITS/$MOUNT_UNIT
su=$UNITS/$SWAP_UNIT
[ -f "$mu" ] || fail "missing $mu"
[ -f "$su" ] || fail "missing $su"
[ -f "$UNITS/README" ] || fail "missing $UNITS/README"
check_sections "$mu"
check_sections "$su"

where=$(unit_line "$mu" Mount Where) || fail "$MOUNT_UNIT: Where= missing or set twice"
# systemd refuses a mount unit whose name is not its escaped mount point
case $where in
/*[!a-z0-9/_]* | *//* | */) fail "$MOUNT_UNIT: keep Where= simple (got $where)" ;;
esac
name=${where#/}
name=${name//\//-}.mount
[ "$name" = "$MOUNT_UNIT" ] || fail "$MOUNT_UNIT: Where=$where belongs to a unit named $name"
if command -v systemd-escape >/dev/null; then
	[ "$(systemd-escape -p --suffix=mount "$where")" = "$MOUNT_UNIT" ] ||
		fail "systemd-escape disagrees on the name of $where"
fi

want_is "$mu" Mount What /etc/zswapfs.conf
want_is "$mu" Mount Type fuse.zswapfs
# early boot: swap.target comes before sysinit.target
want_is "$mu" Unit DefaultDependencies no
want "$mu" Unit Conflicts umount.target
want "$mu" Unit Before umount.target
want_not "$mu" Unit After "$SWAP_UNIT"

want_is "$su" Unit DefaultDependencies no
want "$su" Unit Requires "$MOUNT_UNIT"
# the order that makes shutdown run ExecStop (swapoff) before the unmount
want "$su" Unit After "$MOUNT_UNIT"
want_not "$su" Unit Before "$MOUNT_UNIT"
want "$su" Unit Before swap.target
want "$su" Unit Before umount.target
want "$su" Unit Conflicts umount.target
want_not "$su" Unit After sysinit.target
want_not "$su" Unit After basic.target
want_is "$su" Service Type oneshot
want_is "$su" Service RemainAfterExit yes
want "$su" Install WantedBy swap.target
start=$(unit_line "$su" Service ExecStart) || fail "$SWAP_UNIT: one ExecStart= expected"
stop=$(unit_line "$su" Service ExecStop) || fail "$SWAP_UNIT: one ExecStop= expected"
# shellcheck disable=SC2206 # the command lines hold no quotes: split as systemd does
start_argv=($start)
# shellcheck disable=SC2206
stop_argv=($stop)
if [ "$(basename "${start_argv[0]}")" != zswapctl ] || [ "${start_argv[1]}" != swapon ] ||
	[ "${start_argv[-1]}" != "$where" ]; then
	fail "$SWAP_UNIT: ExecStart=$start is not zswapctl swapon $where"
fi
if [ "${#stop_argv[@]}" -ne 3 ] || [ "$(basename "${stop_argv[0]}")" != zswapctl ] ||
	[ "${stop_argv[1]}" != swapoff ] || [ "${stop_argv[2]}" != "$where" ]; then
	fail "$SWAP_UNIT: ExecStop=$stop is not zswapctl swapoff $where"
fi
log "ok: unit files hold the keys and ordering they need"

# ---- systemd-analyze verify ---------------------------------------------------

# verify_in_root ROOT UNIT...: systemd's own checks, with nothing to say.
# A fake root because verify looks the commands up in its fixed PATH under
# the root (not in $PATH), and zswapctl is not installed on a build machine;
# the system's units are copied in so that ordering cycles with swap.target,
# sysinit.target and umount.target are found.
verify_in_root() {
	local root=$1 out rc=0
	shift
	out=$(SYSTEMD_LOG_COLOR=0 systemd-analyze verify --man=no --root="$root" "$@" 2>&1) ||
		rc=$?
	if [ "$rc" -ne 0 ] || [ -n "$out" ]; then
		printf '%s\n' "$out" >&2
		fail "systemd-analyze verify $* (status $rc)"
	fi
}

make_root() {
	local root=$1 sysunits
	sysunits=$(readlink -f /lib/systemd/system)
	mkdir -p "$root$sysunits" "$root/etc/systemd/system" "$root/usr/local/bin"
	cp -a "$sysunits/." "$root$sysunits/"
	# verify only checks that the command is executable
	if [ -x "$ZSWAPCTL" ]; then
		cp "$ZSWAPCTL" "$root/usr/local/bin/zswapctl"
	else
		printf '#!/bin/sh\nexit 0\n' >"$root/usr/local/bin/zswapctl"
		chmod 755 "$root/usr/local/bin/zswapctl"
	fi
}

if command -v systemd-analyze >/dev/null && [ -d /lib/systemd/system ]; then
	root=$ZS_TMP/root
	make_root "$root"
	cp "$mu" "$su" "$root/etc/systemd/system/"
	verify_in_root "$root" "/etc/systemd/system/$MOUNT_UNIT" "/etc/systemd/system/$SWAP_UNIT"
	log "ok: systemd-analyze verify (units of contrib/systemd)"

	# The fstab variant: the generator's unit instead of ours, same service.
	gen=/lib/systemd/system-generators/systemd-fstab-generator
	if [ -x "$gen" ]; then
		froot=$ZS_TMP/froot
		make_root "$froot"
		mkdir -p "$ZS_TMP/gen"
		printf '/etc/zswapfs.conf %s fuse.zswapfs defaults 0 0\n' "$where" >"$ZS_TMP/fstab"
		SYSTEMD_FSTAB=$ZS_TMP/fstab SYSTEMD_PROC_CMDLINE='' \
			"$gen" "$ZS_TMP/gen" "$ZS_TMP/gen" "$ZS_TMP/gen" ||
			fail "systemd-fstab-generator failed on $ZS_TMP/fstab"
		[ -f "$ZS_TMP/gen/$MOUNT_UNIT" ] ||
			fail "the fstab line did not give $MOUNT_UNIT: $(ls "$ZS_TMP/gen")"
		want_is "$ZS_TMP/gen/$MOUNT_UNIT" Mount Type fuse.zswapfs
		cp "$ZS_TMP/gen/$MOUNT_UNIT" "$su" "$froot/etc/systemd/system/"
		verify_in_root "$froot" "/etc/systemd/system/$MOUNT_UNIT" \
			"/etc/systemd/system/$SWAP_UNIT"
		log "ok: systemd-analyze verify (fstab line + $SWAP_UNIT)"
	else
		fail "no $gen (package systemd): the fstab variant cannot be verified"
	fi
else
	fail "no systemd-analyze or /lib/systemd/system (package systemd; contrib/deps.sh installs it)"
fi

# ---- the service's command lines on a real mount ------------------------------

[ -x "$ZSWAPCTL" ] || fail "zswapctl not built: $ZSWAPCTL"
require_root
require_fuse

# _units_swapoff MOUNT: whatever the commands left, take it down (clean-up).
# shellcheck disable=SC2317 # run by the clean-up
_units_swapoff() {
	local d
	for d in $(losetup -n -O NAME -j "$1/swap" 2>/dev/null); do
		if awk -v d="$d" '$1 == d { f = 1 } END { exit !f }' /proc/swaps; then
			zs_run 120 swapoff "$d"
		fi
		losetup -d "$d"
	done
}

zs_mount size=64M
push_undo _units_swapoff "$ZS_MNT"
# the unit's command lines, with this mount for /run/zswapfs and this zswapctl
start_argv=("$ZSWAPCTL" "${start_argv[@]:1}")
start_argv[-1]=$ZS_MNT
stop_argv=("$ZSWAPCTL" swapoff "$ZS_MNT")
zs_run 60 "${start_argv[@]}" >&2 || fail "ExecStart failed: ${start_argv[*]}"
loop=$(losetup -n -O NAME -j "$ZS_MNT/swap") || true
[ -n "$loop" ] || fail "ExecStart left no loop device on $ZS_MNT/swap"
prio=$(awk -v d="$loop" '$1 == d { print $5 }' /proc/swaps)
[ -n "$prio" ] || fail "ExecStart: $loop is not swap"
want_prio=$(printf '%s\n' "${start_argv[@]}" | awk 'p { print; exit } /^--priority$|^-p$/ { p = 1 }')
[ -z "$want_prio" ] || [ "$prio" = "$want_prio" ] ||
	fail "ExecStart: $loop has priority $prio, the unit asks for $want_prio"
# busy while swap is on: the reason for the order at shutdown
if zs_run 30 umount "$ZS_MNT" 2>/dev/null; then
	fail "umount $ZS_MNT succeeded under a swap device"
fi
zs_alive
zs_run 120 "${stop_argv[@]}" || fail "ExecStop failed: ${stop_argv[*]}"
! awk -v d="$loop" '$1 == d { f = 1 } END { exit !f }' /proc/swaps ||
	fail "ExecStop left $loop as swap"
[ -z "$(losetup -n -O NAME -j "$ZS_MNT/swap")" ] || fail "ExecStop left the loop device attached"
zs_umount
log "ok: ExecStart turns swap on ($loop, priority $prio); ExecStop turns it off, then umount works"
exit 0
