#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck source-path=SCRIPTDIR
#
# Every invalid setting must stop the daemon quickly, with a message of its
# own ("zswapfs: ...") that names the setting, and leave nothing mounted.  A
# word that is no setting goes to libfuse with the FUSE options, and libfuse
# refuses it: that message is checked apart, so that a setting the daemon
# stopped knowing cannot pass on libfuse's "unknown option" naming it.
set -eu
. "$(dirname "$0")/lib.sh"

require_fuse
make_tmpdir

# check_bad WORD ARG...: the daemon started with ARG... must fail, with a
# message of its own that contains WORD.
check_bad() {
	local word=$1
	shift
	zs_start_refused "$*" "$@"
	[ "$ZS_RC" -ne 0 ] || fail "$*: daemon exited with status 0"
	if grep -q "unknown option" "$ZS_LOG" ||
		! grep '^zswapfs: ' "$ZS_LOG" | grep -qiF -- "$word"; then
		cat "$ZS_LOG" >&2
		fail "$*: no message of the daemon's names '$word'"
	fi
	log "ok: $* -> status $ZS_RC: $(head -n 1 "$ZS_LOG")"
}

check_bad size -o size=0
check_bad size -o size=abc
check_bad size -o size=-5
check_bad size -o size=
check_bad algorithm -o algorithm=bogus
check_bad level -o algorithm=zstd,level=99
check_bad mem_limit -o mem_limit=xyz
# below the kernel's smallest slice, and above its largest
check_bad request_slice_us -o request_slice_us=50
check_bad request_slice_us -o request_slice_us=100001
# not a setting: libfuse's refusal, naming it
zs_start_refused "-o foo=1" -o foo=1
[ "$ZS_RC" -ne 0 ] || fail "-o foo=1: daemon exited with status 0"
grep -q "unknown option.*foo=1" "$ZS_LOG" ||
	{ cat "$ZS_LOG" >&2; fail "-o foo=1: libfuse did not refuse the option"; }
log "ok: -o foo=1 -> status $ZS_RC: $(head -n 1 "$ZS_LOG")"
check_bad "$ZS_TMP/missing.conf" -c "$ZS_TMP/missing.conf"

# Backing files that must not be used: each refused with a message that says
# why, and left as it was.
check_bad "absolute path" -o writeback.backing_file=relative/backing
check_bad low_watermark -o writeback.low_watermark=90,writeback.high_watermark=80
check_bad writeback.max_size -o writeback.max_size=4K,writeback.backing_file="$ZS_TMP/b0"
echo keep >"$ZS_TMP/target"
ln -s "$ZS_TMP/target" "$ZS_TMP/link"
check_bad symlink -o writeback.backing_file="$ZS_TMP/link"
mkdir "$ZS_TMP/dir"
check_bad "not a regular file" -o writeback.backing_file="$ZS_TMP/dir"
echo keep >"$ZS_TMP/open"
chmod 0666 "$ZS_TMP/open"
check_bad "writable by others" -o writeback.backing_file="$ZS_TMP/open"
check_bad "$ZS_TMP/nodir/backing" -o writeback.backing_file="$ZS_TMP/nodir/backing"
[ "$(cat "$ZS_TMP/target")" = keep ] && [ "$(cat "$ZS_TMP/open")" = keep ] ||
	fail "a refused backing file was changed"
[ -L "$ZS_TMP/link" ] || fail "the symlink was replaced"
[ ! -e "$ZS_TMP/b0" ] || fail "a refused start left a backing file behind"
exit 0
