#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck source-path=SCRIPTDIR
#
# The sandbox of the systemd units of contrib/systemd (issue 9, part 5).
# systemd is not PID 1 where these tests run, so the units are never
# started here; what can be checked without it is:
#  - systemd-analyze security --offline: the exposure of each unit is no
#    worse than it was when the sandbox was written (MAX_EXPOSURE below);
#  - no option that makes a mount namespace: the FUSE mount (and the loop
#    device's hold on the swap file) would stay inside it;
#  - the daemon, started as mount.fuse3 starts it, in the background, with
#    the unit's capability bounding set and NoNewPrivileges (setpriv), under
#    strace: it starts, serves, stops on SIGTERM (its helper unmounts), and
#    every system call it makes is allowed by the unit's SystemCallFilter,
#    and none is socket() (RestrictAddressFamilies=none);
#  - the same for the swap service's zswapctl swapon and swapoff (swap: run
#    under the shared lock on a shared machine, see COMMON.md).
set -eu
. "$(dirname "$0")/lib.sh"

UNITS=$top_srcdir/contrib/systemd
ZSWAPCTL=${ZSWAPCTL:-$top_builddir/src/zswapctl}
# systemd 252's figures when the sandbox was written (lower is better)
declare -A MAX_EXPOSURE=([run-zswapfs.mount]=3.1 [zswapfs-swap.service]=2.7)
make_tmpdir

# unit_values FILE KEY: every value of KEY, one word a line, in file order
unit_values() {
	awk -v key="$2" '/^[ \t]*[#;]/ { next }
		{ k = $0; sub(/[ \t]*=.*/, "", k); if (k != key) next
		  v = $0; sub(/^[^=]*=[ \t]*/, "", v); print v }' "$1"
}

# ---- exposure, and no mount namespace ---------------------------------------

for unit in "${!MAX_EXPOSURE[@]}"; do
	file=$UNITS/$unit
	[ -f "$file" ] || fail "missing $file"
	for key in ProtectSystem ProtectHome PrivateTmp PrivateDevices ReadWritePaths \
		ReadOnlyPaths InaccessiblePaths TemporaryFileSystem BindPaths BindReadOnlyPaths \
		ProtectKernelTunables ProtectKernelModules ProtectKernelLogs ProtectControlGroups \
		ProtectProc ProcSubset MountFlags RootDirectory RootImage; do
		[ -z "$(unit_values "$file" $key)" ] ||
			fail "$unit sets $key=, which makes a mount namespace: the mount would stay in it"
	done
	if [ "$(unit_values "$file" PrivateNetwork)" = yes ]; then
		[ "$(unit_values "$file" PrivateMounts)" = no ] ||
			fail "$unit: PrivateNetwork=yes without PrivateMounts=no implies a mount namespace"
	fi
	if ! command -v systemd-analyze >/dev/null; then
		log "no systemd-analyze: exposure of $unit not measured"
		continue
	fi
	out=$(SYSTEMD_LOG_COLOR=0 systemd-analyze security --offline=true "$file" 2>&1) ||
		true	# it exits non-zero above its own threshold
	score=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' <<<"$out")
	[ -n "$score" ] || fail "systemd-analyze security --offline=true $file: $out"
	awk -v s="$score" -v m="${MAX_EXPOSURE[$unit]}" 'BEGIN { exit !(s <= m) }' || {
		printf '%s\n' "$out" >&2
		fail "$unit: exposure $score, worse than ${MAX_EXPOSURE[$unit]}"
	}
	log "ok: $unit: exposure $score (at most ${MAX_EXPOSURE[$unit]}), no mount namespace"
done

# ---- the daemon and zswapctl inside the units' limits ----------------------

if [ ! -c /dev/fuse ] || [ "$(id -u)" -ne 0 ] || ! command -v strace >/dev/null ||
	! command -v systemd-analyze >/dev/null || ! command -v setpriv >/dev/null; then
	log "not run: the daemon under the units' limits (needs root, /dev/fuse, strace," \
		"systemd-analyze, setpriv)"
	exit 0
fi
if zs_sanitized; then
	log "not run: the daemon under the units' limits: the sanitizer runtime makes" \
		"system calls of its own (this is checked in the normal build)"
	exit 0
fi

# expand @GROUP|NAME...: the system calls of the groups and names, one a line
declare -A _expanded
expand() {
	local g x
	for g in "$@"; do
		case $g in @*) ;; *) echo "$g"; continue ;; esac
		if [ -z "${_expanded[$g]-}" ]; then
			_expanded[$g]=$(systemd-analyze syscall-filter "$g" |
				awk 'NR > 1 && NF && $1 !~ /^#/ { print $1 }' |
				while read -r x; do
					case $x in @*) expand "$x" ;; *) echo "$x" ;; esac
				done)
		fi
		printf '%s\n' "${_expanded[$g]}"
	done
}

# check_syscalls UNITFILE STRACE_SUMMARY WHAT: every call in the summary
# (strace -c) passes the unit's SystemCallFilter=, and none makes a socket.
check_syscalls() {
	local file=$1 summary=$2 what=$3 allow=() deny=() line used bad=
	while read -r line; do
		case $line in
		~*) read -ra w <<<"${line#\~}"; deny+=("${w[@]}") ;;
		*) read -ra w <<<"$line"; allow+=("${w[@]}") ;;
		esac
	done < <(unit_values "$file" SystemCallFilter)
	expand "${allow[@]}" | sort -u >"$ZS_TMP/allow"
	if [ "${#deny[@]}" -gt 0 ]; then expand "${deny[@]}" | sort -u >"$ZS_TMP/deny"; else
		: >"$ZS_TMP/deny"; fi
	# the last column of the summary's rows, between its two rulers
	used=$(awk '/^-+ / { r++; next } r == 1 && NF >= 5 { print $NF }' "$summary" | sort -u)
	[ -n "$used" ] || fail "$what: no system call in $summary"
	for sc in $used; do
		grep -qxF "$sc" "$ZS_TMP/allow" && ! grep -qxF "$sc" "$ZS_TMP/deny" || bad="$bad $sc"
	done
	[ -z "$bad" ] || fail "$what: system calls $(basename "$file")'s filter refuses:$bad"
	! grep -qxE 'socket|socketpair' <<<"$used" ||
		fail "$what made a socket (the unit has RestrictAddressFamilies=none)"
	log "ok: $what: $(wc -w <<<"$used") distinct system calls, all allowed, no socket"
}

# bounding FILE: setpriv's --bounding-set argument for the unit's set
bounding() {
	local caps
	caps=$(unit_values "$1" CapabilityBoundingSet | tr ' ' '\n' | tr 'A-Z' 'a-z' |
		sed -n 's/^cap_\(.*\)/+\1/p' | paste -sd, -)
	echo "-all,$caps"
}

# -- the mount unit: the daemon as mount.fuse3 starts it
mu=$UNITS/run-zswapfs.mount
mnt=$(mktemp -d "${TMPDIR:-/tmp}/zswapfs-mnt.XXXXXX")
push_undo rmdir -- "$mnt"
: >"$ZS_TMP/daemon.err"
journal=$(stat -c '%d:%i' "$ZS_TMP/daemon.err")
# systemd's JOURNAL_STREAM names the journal on stderr: the daemon keeps it
JOURNAL_STREAM=$journal setpriv --no-new-privs --bounding-set="$(bounding "$mu")" \
	--inh-caps=-all -- strace -f -qq -c -o "$ZS_TMP/daemon.strace" \
	"$ZSWAPFS" zswapfs "$mnt" -o size=64M 2>>"$ZS_TMP/daemon.err" &
tracer=$!
push_undo _sandbox_stop "$mnt" "$tracer"
# shellcheck disable=SC2317 # run by the clean-up
_sandbox_stop() {
	! _zs_is_mounted "$1" || umount "$1" || umount -l "$1"
	kill "$2" 2>/dev/null
	wait "$2" 2>/dev/null
}
for ((i = 0; i < 100; i++)); do _zs_is_mounted "$mnt" && break; sleep 0.1; done
_zs_is_mounted "$mnt" || { cat "$ZS_TMP/daemon.err" >&2; fail "no mount under the unit's limits"; }
gen_data "$ZS_TMP/data" 64 text 3
dd if="$ZS_TMP/data" of="$mnt/swap" bs=64K oflag=direct conv=notrunc status=none
cmp -s "$ZS_TMP/data" <(head -c $((64 * 4096)) "$mnt/swap") || fail "data differs"
echo compact >"$mnt/control"
[ "$(awk '$1 == "no_new_privs" { print $2 }' "$mnt/stats")" = 1 ] || fail "no_new_privs is not 1"
pid=$(zs_daemon_pids "^$ZSWAPFS zswapfs $mnt" | head -n1)
[ -n "$pid" ] || fail "no daemon for $mnt"
kill -TERM "$pid"
for ((i = 0; i < 100; i++)); do _zs_is_mounted "$mnt" || break; sleep 0.1; done
! _zs_is_mounted "$mnt" || fail "SIGTERM under the unit's limits did not unmount"
wait "$tracer" || fail "the traced start failed: $(cat "$ZS_TMP/daemon.err")"
drop_undo _sandbox_stop "$mnt" "$tracer"
grep -q "privileges dropped" "$ZS_TMP/daemon.err" ||
	fail "the detached daemon logged nothing to the journal stand-in: $(cat "$ZS_TMP/daemon.err")"
check_syscalls "$mu" "$ZS_TMP/daemon.strace" "the daemon (start, I/O, stats, control, SIGTERM)"

# -- the swap service: zswapctl swapon and swapoff
su=$UNITS/zswapfs-swap.service
[ -x "$ZSWAPCTL" ] || fail "zswapctl not built: $ZSWAPCTL"
zs_mount size=64M
run_swap_cmd() {
	setpriv --no-new-privs --bounding-set="$(bounding "$su")" --inh-caps=-all -- \
		strace -f -qq -c -o "$ZS_TMP/$1.strace" "$ZSWAPCTL" "$@" >&2
}
run_swap_cmd swapon --priority 100 "$ZS_MNT" || fail "zswapctl swapon under the unit's limits"
loop=$(losetup -n -O NAME -j "$ZS_MNT/swap")
push_undo losetup -d "$loop"
push_undo timeout 120 swapoff "$loop"
awk -v d="$loop" '$1 == d { f = 1 } END { exit !f }' /proc/swaps || fail "$loop is not swap"
run_swap_cmd swapoff "$ZS_MNT" || fail "zswapctl swapoff under the unit's limits"
drop_undo timeout 120 swapoff "$loop"
drop_undo losetup -d "$loop"
check_syscalls "$su" "$ZS_TMP/swapon.strace" "zswapctl swapon (losetup, mkswap, swapon)"
check_syscalls "$su" "$ZS_TMP/swapoff.strace" "zswapctl swapoff"
zs_umount
exit 0
