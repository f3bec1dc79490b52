#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The documentation follows the code: every setting in the daemon's table
# (as --help prints it) is described in zswapfs(8) and zswapfs.conf(5), and
# every man page renders without a warning.
set -eu
. "$(dirname "$0")/lib.sh"
[ -x "$ZSWAPFS" ] || fail "daemon not built: $ZSWAPFS"
command -v groff >/dev/null || fail "groff is not installed (groff-base)"

pages=("$top_srcdir"/man/*.[0-9])
[ "${#pages[@]}" -ge 1 ] || fail "no man pages"
for page in "${pages[@]}"; do
	out=$(groff -man -ww -z "$page" 2>&1) || fail "groff failed on $page: $out"
	[ -z "$out" ] || fail "groff warns on $page: $out"
done

# The settings block of --help: "    name    help (default: ...)".
mapfile -t keys < <("$ZSWAPFS" --help | awk '/^Settings/ { on = 1; next }
	on && /^    [a-z]/ { print $1 } on && /^$/ { exit }')
[ "${#keys[@]}" -ge 4 ] || fail "could not read the settings from --help"
for key in "${keys[@]}"; do
	for page in "$top_srcdir/man/zswapfs.8" "$top_srcdir/man/zswapfs.conf.5"; do
		[ -f "$page" ] || continue
		# man source escapes the dots and dashes of a key: compare unescaped
		sed 's/\\\([.-]\)/\1/g; s/\\f[BIRP]//g' "$page" | grep -qF -- "$key" ||
			fail "setting '$key' is not described in $(basename "$page")"
	done
done
log "${#pages[@]} man pages render clean; ${#keys[@]} settings documented"
exit 0
