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

# The settings block of --help: "    name    help (default: ...)".  (Its
# output is taken whole first: a daemon that crashes after printing it fails.)
help=$("$ZSWAPFS" --help) || fail "zswapfs --help failed"
mapfile -t keys < <(awk '/^Settings/ { on = 1; next }
	on && /^    [a-z]/ { print $1 } on && /^$/ { exit }' <<<"$help")
[ "${#keys[@]}" -ge 4 ] || fail "could not read the settings from --help"
# unescaped man source: the dots and dashes of keys are escaped there
# (taken whole: a grep -q that stops reading early would kill sed, and the
# pipeline would fail)
plain() { sed 's/\\\([.-]\)/\1/g; s/\\f[BIRP]//g' "$1"; }
man8=$(plain "$top_srcdir/man/zswapfs.8")
conf=$top_srcdir/man/zswapfs.conf.5
man5=
[ ! -f "$conf" ] || man5=$(plain "$conf")
for key in "${keys[@]}"; do
	# zswapfs(8) names every key whole, as a mount option
	grep -qF -- "$key" <<<"$man8" || fail "setting '$key' is not described in zswapfs.8"
	# zswapfs.conf(5) lists group keys in the group's section, as in the file
	[ -f "$conf" ] || continue
	case $key in
	*.*)
		awk -v g="${key%%.*}" -v k="${key#*.}" '
			/^\.SS/ { in_group = index($0, "The " g " group") > 0; next }
			in_group && $1 == ".BR" && $2 == k { found = 1 }
			END { exit !found }' <<<"$man5" ||
			fail "setting '$key' is not described in the ${key%%.*} group of zswapfs.conf.5"
		;;
	*)
		grep -qE "^\.BR $key " <<<"$man5" ||
			fail "setting '$key' is not described in zswapfs.conf.5"
		;;
	esac
done
log "${#pages[@]} man pages render clean; ${#keys[@]} settings documented"
exit 0
