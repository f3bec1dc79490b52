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
	local word=$1
	shift
	zs_start_refused "$*" "$@"
	[ "$ZS_RC" -ne 0 ] || fail "$*: daemon exited with status 0"
	grep -qiF -- "$word" "$ZS_LOG" || {
		cat "$ZS_LOG" >&2
		fail "$*: message does not name '$word'"
	}
	log "ok: $* -> status $ZS_RC: $(head -n 1 "$ZS_LOG")"
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
