#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck source-path=SCRIPTDIR
#
# Nobody but root reads swapped memory (issue 9, part 1).  The three ways a
# new user opened it up, each now refused or harmless:
#   1. a comma in SOURCE (`zswapfs 'z,allow_other' MNT`) became a FUSE option:
#      now SOURCE only names the mount, and user nobody reads nothing;
#   2. -o allow_other let every user read `swap`: now refused unless
#      stats_group names a group, and then only `stats` is theirs to read;
#   3. nobody could write `control`: now refused, always.
# Then, on a mount with allow_other and stats_group: the files' owners and
# modes, what nobody can and cannot do, a member of the group, and the
# daemon's own uid check behind the kernel's (a non-root user holding
# CAP_DAC_OVERRIDE gets past the kernel's mode check, not past the daemon).
set -eu
. "$(dirname "$0")/lib.sh"

require_fuse
require_root
command -v setpriv >/dev/null || fail "setpriv not found (util-linux)"
make_tmpdir

NOBODY=65534
GROUP=4242	# a number: no group needs to exist to own a file
SECRET=SECRET-KEY-123

# as USER-SPEC CMD...: run CMD as uid/gid nobody, with the given groups.
as_nobody() { setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups -- "$@"; }
as_member() { setpriv --reuid=$NOBODY --regid=$NOBODY --groups=$GROUP -- "$@"; }
# nobody, but holding CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH: the kernel's
# mode check lets it through, the daemon's uid check must not
as_capable() {
	setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups \
		--inh-caps=+dac_override,+dac_read_search \
		--ambient-caps=+dac_override,+dac_read_search -- "$@"
}

mount_opts() { awk -v m="$1" '$2 == m { print $4 }' /proc/mounts; }
mount_source() { awk -v m="$1" '$2 == m { print $1 }' /proc/mounts; }

# write_secret MNT: root writes $SECRET at the start of MNT/swap.
write_secret() {
	{ printf '%s' "$SECRET"; head -c $((4096 - ${#SECRET})) /dev/zero; } >"$ZS_TMP/page"
	dd if="$ZS_TMP/page" of="$1/swap" bs=4096 conv=notrunc oflag=direct status=none ||
		fail "root cannot write $1/swap"
	[ "$(head -c ${#SECRET} "$1/swap")" = "$SECRET" ] || fail "root cannot read $1/swap back"
}

# refused DESC CMD...: CMD must fail, and print nothing of the secret.
refused() {
	local desc=$1 out
	shift
	if out=$("$@" 2>&1); then
		fail "$desc succeeded: $out"
	fi
	case $out in *"$SECRET"*) fail "$desc printed the secret" ;; esac
	log "ok: refused: $desc (${out##*: })"
}

# ---- 1. SOURCE is a name, never options -----------------------------------

ZS_SOURCE='z,allow_other' zs_mount size=64M
opts=$(mount_opts "$ZS_MNT")
case ,$opts, in *,allow_other,*) fail "SOURCE 'z,allow_other' gave allow_other: $opts" ;; esac
case ,$opts, in *,default_permissions,*) ;; *) fail "no default_permissions: $opts" ;; esac
[ "$(mount_source "$ZS_MNT")" = 'z,allow_other' ] ||
	fail "the mount is not named z,allow_other: $(mount_source "$ZS_MNT")"
write_secret "$ZS_MNT"
refused "nobody reads swap (SOURCE z,allow_other)" as_nobody head -c ${#SECRET} "$ZS_MNT/swap"
refused "nobody writes control (SOURCE z,allow_other)" \
	as_nobody sh -c 'echo compact >"$1"' sh "$ZS_MNT/control"
refused "nobody reads stats without allow_other" as_nobody cat "$ZS_MNT/stats"
zs_umount
log "ok: SOURCE z,allow_other names the mount ($opts)"

# ---- 2. allow_other alone, and allow_root, are refused --------------------

zs_start_refused "allow_other without stats_group" -o size=64M,allow_other
[ "$ZS_RC" -ne 0 ] || fail "allow_other without stats_group: exit status 0"
grep -q "stats_group" "$ZS_LOG" || { cat "$ZS_LOG" >&2; fail "the refusal does not say to set stats_group"; }
log "ok: $(head -n 1 "$ZS_LOG")"
zs_start_refused "allow_root" -o size=64M,allow_root
[ "$ZS_RC" -ne 0 ] || fail "allow_root: exit status 0"
grep -q "allow_root" "$ZS_LOG" || { cat "$ZS_LOG" >&2; fail "the refusal does not name allow_root"; }
zs_start_refused "an unknown stats_group" -o size=64M,allow_other,stats_group=no-such-group-zs
[ "$ZS_RC" -ne 0 ] || fail "unknown stats_group: exit status 0"
grep -q "stats_group" "$ZS_LOG" || { cat "$ZS_LOG" >&2; fail "the refusal does not name stats_group"; }
log "ok: allow_root, and a stats_group that names no group, refused"

# ---- 3. allow_other with stats_group: only stats, only for the group ------

zs_mount size=64M,allow_other,stats_group=$GROUP
opts=$(mount_opts "$ZS_MNT")
for o in allow_other default_permissions; do
	case ,$opts, in *,$o,*) ;; *) fail "no $o: $opts" ;; esac
done
for f in "swap 600 0 0" "control 200 0 0" "stats 440 0 $GROUP"; do
	# shellcheck disable=SC2086 # three words
	set -- $f
	got=$(stat -c '%a %u %g' "$ZS_MNT/$1")
	[ "$got" = "$2 $3 $4" ] || fail "$1: mode, owner, group are $got; expected $2 $3 $4"
done
write_secret "$ZS_MNT"

refused "nobody reads swap" as_nobody head -c ${#SECRET} "$ZS_MNT/swap"
refused "nobody writes swap" as_nobody dd if=/dev/zero of="$ZS_MNT/swap" bs=4096 count=1 \
	conv=notrunc status=none
refused "nobody writes control" as_nobody sh -c 'echo compact >"$1"' sh "$ZS_MNT/control"
refused "nobody reads stats (not in the group)" as_nobody cat "$ZS_MNT/stats"
refused "nobody truncates swap" as_nobody "$PYTHON" -c 'import os, sys; os.truncate(sys.argv[1], 0)' \
	"$ZS_MNT/swap"
refused "nobody touches swap" as_nobody touch "$ZS_MNT/swap"

out=$(as_member cat "$ZS_MNT/stats") || fail "a member of group $GROUP cannot read stats"
grep -q '^orig_data_size [0-9]' <<<"$out" || fail "stats read by the group member: $out"
refused "a member of the group reads swap" as_member head -c ${#SECRET} "$ZS_MNT/swap"
refused "a member of the group writes control" \
	as_member sh -c 'echo compact >"$1"' sh "$ZS_MNT/control"
log "ok: group $GROUP reads stats, and nothing else"

# The daemon's own check, behind the kernel's: CAP_DAC_OVERRIDE passes the
# mode check of default_permissions, not the daemon's uid check.
denied0=$(zs_stat "$ZS_MNT" access_denied)
refused "nobody+CAP_DAC_OVERRIDE reads swap" as_capable head -c ${#SECRET} "$ZS_MNT/swap"
refused "nobody+CAP_DAC_OVERRIDE writes control" \
	as_capable sh -c 'echo compact >"$1"' sh "$ZS_MNT/control"
refused "nobody+CAP_DAC_OVERRIDE truncates swap" \
	as_capable "$PYTHON" -c 'import os, sys; os.truncate(sys.argv[1], 0)' "$ZS_MNT/swap"
denied=$(zs_stat "$ZS_MNT" access_denied)
[ $((denied - denied0)) -eq 3 ] ||
	fail "access_denied went from $denied0 to $denied: the daemon did not refuse all three"
log "ok: the daemon refused what the kernel let through (access_denied $denied0 -> $denied)"

# Root's own figures stay readable while others hold every snapshot they may.
# (setpriv itself in the background, not the function: its pid is the holder's)
# It holds them until the test kills it, however long the checks take.
stats=$(readlink -f "$ZS_MNT")/stats
setpriv --reuid=$NOBODY --regid=$NOBODY --groups=$GROUP -- \
	sh -c 'exec 3<"$1" 4<"$1" 5<"$1"; exec sleep 600' sh "$ZS_MNT/stats" &
holder=$!
push_undo kill "$holder"
# The holder has its three snapshots once sh has become sleep (a failed
# open ends sh), and its fds 3-5 name the file: read from /proc, never
# through the mount.
holds_three() {
	local fd
	kill -0 "$holder" 2>/dev/null ||
		fail "the holder (pid $holder) could not open $ZS_MNT/stats three times"
	[ "$(cat "/proc/$holder/comm" 2>/dev/null)" = sleep ] || return 1
	for fd in 3 4 5; do
		[ "$(readlink "/proc/$holder/fd/$fd")" = "$stats" ] ||
			fail "the holder's fd $fd is $(readlink "/proc/$holder/fd/$fd"), not $stats"
	done
}
zs_wait_until 30 "three snapshots of $stats held by the group (pid $holder)" holds_three
refused "a fourth snapshot for the group" as_member cat "$ZS_MNT/stats"
zs_stat "$ZS_MNT" orig_data_size >/dev/null
# the refusal above is the limit's only if the three were held throughout
holds_three || fail "the holder (pid $holder) let go of its snapshots during the checks"
zs_stop_sampler "$holder"

# Root: everything as before.
[ "$(head -c ${#SECRET} "$ZS_MNT/swap")" = "$SECRET" ] || fail "the secret changed"
echo compact >"$ZS_MNT/control" || fail "root cannot write control"
zs_umount

# A group by name: stats then belongs to it.
gid=$(getent group nogroup | cut -d: -f3) || gid=
if [ -n "$gid" ]; then
	zs_mount size=64M,allow_other,stats_group=nogroup
	[ "$(stat -c %g "$ZS_MNT/stats")" = "$gid" ] ||
		fail "stats_group=nogroup: stats has group $(stat -c %g "$ZS_MNT/stats"), not $gid"
	zs_umount
	log "ok: stats_group=nogroup gives stats to gid $gid"
fi
exit 0
