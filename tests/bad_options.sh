#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck source-path=SCRIPTDIR
#
# Every invalid setting must stop the daemon quickly, with a message that
# names the setting, and leave nothing mounted.
set -eu
. "$(dirname "$0")/lib.sh"

require_fuse
make_tmpdir

# check_bad WORD ARG...: the daemon started with ARG... must fail and its
# stderr must contain WORD.
check_bad() {
	local word=$1 rc=0 i
	shift
	zs_start "$@"
	for ((i = 0; i < 50; i++)); do
		kill -0 "$ZS_PID" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$ZS_PID" 2>/dev/null; then
		cat "$ZS_LOG" >&2
		fail "$*: daemon still running after 5 s"
	fi
	wait "$ZS_PID" || rc=$?
	if awk -v m="$ZS_MNT" '$2 == m { f = 1 } END { exit !f }' /proc/mounts; then
		fail "$*: daemon exited but left $ZS_MNT mounted"
	fi
	drop_undo _zs_teardown "$ZS_MNT" "$ZS_PID"
	rmdir "$ZS_MNT"
	[ "$rc" -ne 0 ] || fail "$*: daemon exited with status 0"
	grep -qiF -- "$word" "$ZS_LOG" || {
		cat "$ZS_LOG" >&2
		fail "$*: message does not name '$word'"
	}
	log "ok: $* -> status $rc: $(head -n 1 "$ZS_LOG")"
}

check_bad size -o size=0
check_bad size -o size=abc
check_bad size -o size=-5
check_bad size -o size=
check_bad algorithm -o algorithm=bogus
check_bad level -o algorithm=zstd,level=99
check_bad mem_limit -o mem_limit=xyz
check_bad foo -o foo=1
check_bad "$ZS_TMP/missing.conf" -c "$ZS_TMP/missing.conf"
exit 0
