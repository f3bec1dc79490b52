#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The documentation follows the code: every setting in the daemon's table
# (as --help prints it) is described in zswapfs(8) and zswapfs.conf(5),
# every stats key (src/stats_keys.h, and what a mount prints) and control
# command (src/control_cmds.h) in zswapfs(8) and nothing else there, and
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
# ---- stats keys --------------------------------------------------------------
# The table src/stats_keys.h, expanded as the daemon prints it: a key made
# for each codec or request kind once per member (codec.h's CODEC_LIST,
# STATS_REQ_LIST), a key for each size class as the pattern class_SIZE_...
# the man page documents, one for each request path as lat_PATH_... (the
# histogram buckets lat_PATH_us_BUCKET).  In print order, each class key once.
members() { # LIST-MACRO FILE: the lower-case member names of an X-macro list
	awk -v m="$1" '$0 ~ "#define " m "\\(X\\)" { on = 1; next }
		on && match($0, /X\([A-Z0-9_]+, *[a-z0-9_]+\)/) {
			s = substr($0, RSTART + 2, RLENGTH - 3); sub(/.*, */, "", s); print s }
		on && !/\\$/ { exit }' "$2"
}
mapfile -t codecs < <(members CODEC_LIST "$top_srcdir/src/codec.h")
mapfile -t reqs < <(members STATS_REQ_LIST "$top_srcdir/src/stats_keys.h")
mapfile -t paths < <(members STATS_PATH_LIST "$top_srcdir/src/stats_keys.h")
[ "${#paths[@]}" -ge 6 ] || fail "could not read STATS_PATH_LIST"
[ "${#codecs[@]}" -ge 3 ] && [ "${#reqs[@]}" -ge 3 ] ||
	fail "could not read CODEC_LIST or STATS_REQ_LIST"
table=$(awk -v codecs="${codecs[*]}" -v reqs="${reqs[*]}" '
	function flush(   i, j, n, m, part) {
		if (!ng)
			return
		n = split(gfam == "CODEC" ? codecs : reqs, part, " ")
		for (i = 1; i <= n; i++)
			for (j = 1; j <= ng; j++) {
				m = group[j]; sub(/\*/, part[i], m); print m
			}
		ng = 0
	}
	match($0, /X\([A-Z0-9_]+, "[^"]+", [A-Z_]+, [A-Z]+,/) {
		split(substr($0, RSTART, RLENGTH), f, /, */)
		key = f[2]; gsub(/"/, "", key); fam = f[4]
		if (fam != "CODEC" && fam != "REQ" || fam != gfam)
			flush()
		gfam = fam
		if (fam == "CODEC" || fam == "REQ") {
			group[++ng] = key
		} else if (fam == "PATH") {
			sub(/\*/, "PATH", key); sub(/\*/, "BUCKET", key); print key
		} else {
			sub(/\*/, "SIZE", key); print key
		}
	}
	END { flush() }' "$top_srcdir/src/stats_keys.h")
[ "$(wc -l <<<"$table")" -ge 50 ] || fail "could not read the table of src/stats_keys.h"

# The keys zswapfs(8) documents: the tags (.TP/.TQ) of its STATS section.
documented=$(awk '/^\.SH STATS/ { on = 1; next } /^\.SH/ { on = 0 }
	on && /^\.T[PQ]/ { tag = 1; next }
	on && tag {
		tag = 0; line = $0
		sub(/^\.BR? /, "", line); gsub(/"/, "", line); gsub(/,/, " ", line)
		n = split(line, w, " ")
		for (i = 1; i <= n; i++) print w[i]
	}' <<<"$man8")
while read -r key; do
	grep -qxF -- "$key" <<<"$documented" ||
		fail "stats key '$key' (src/stats_keys.h) is not in zswapfs.8's STATS section"
done <<<"$table"
while read -r key; do
	grep -qxF -- "$key" <<<"$table" ||
		fail "zswapfs.8's STATS section documents '$key', which the daemon never prints"
done <<<"$documented"

# And a live mount prints exactly the table, in its order.
if [ -c /dev/fuse ]; then
	make_tmpdir
	zs_mount size=16M
	head -c 65536 "$ZSWAPFS" | zs_run 20 dd of="$ZS_MNT/swap" bs=64k conv=notrunc status=none
	printed=$(zs_run 20 cat "$ZS_MNT/stats") || fail "cannot read $ZS_MNT/stats"
	zs_umount
	# the paths of STATS_PATH_LIST, all of them, each bucket from 0 us to 2^20
	for p in "${paths[@]}"; do
		for b in 0 $(seq 1 20); do
			[ "$b" = 0 ] || b=$((1 << b))
			grep -q "^lat_${p}_us_$b [0-9]" <<<"$printed" ||
				fail "no histogram bucket lat_${p}_us_$b in the stats"
		done
	done
	printed=$(awk -v paths="${paths[*]}" '
		BEGIN { n = split(paths, p, " ") }
		{ k = $1; sub(/^class_[0-9]+_/, "class_SIZE_", k)
		  for (i = 1; i <= n; i++)
			if (index(k, "lat_" p[i] "_") == 1) {
				k = "lat_PATH_" substr(k, length(p[i]) + 6); break
			}
		  sub(/^lat_PATH_us_[0-9]+$/, "lat_PATH_us_BUCKET", k) }
		!seen[k]++ { print k }' <<<"$printed")
	grep -q '^class_SIZE_objs$' <<<"$printed" || fail "no size class in use after a write"
	[ "$printed" = "$table" ] || fail "the stats file's keys differ from src/stats_keys.h:
$(diff <(echo "$table") <(echo "$printed"))"
else
	log "no /dev/fuse: the keys a live mount prints are not compared"
fi

# ---- control commands --------------------------------------------------------
# Each command of src/control_cmds.h is a tag of zswapfs(8)'s CONTROL
# section, and each tag there is a command of the table.
mapfile -t cmds < <(awk '/#define CONTROL_CMDS\(X\)/ { on = 1; next }
	on && match($0, /X\([A-Z0-9_]+, *[a-z0-9_]+,/) {
		s = substr($0, RSTART + 2, RLENGTH - 3); sub(/.*, */, "", s); print s }
	on && !/\\$/ { exit }' "$top_srcdir/src/control_cmds.h")
[ "${#cmds[@]}" -ge 4 ] || fail "could not read the table of src/control_cmds.h"
tags=$(awk '/^\.SH CONTROL/ { on = 1; next } /^\.SH/ { on = 0 }
	on && /^\.T[PQ]/ { tag = 1; next }
	on && tag { tag = 0; sub(/^\.BR? /, ""); gsub(/"/, ""); print $1 }' <<<"$man8")
for cmd in "${cmds[@]}"; do
	grep -qxF -- "$cmd" <<<"$tags" ||
		fail "control command '$cmd' (src/control_cmds.h) is not in zswapfs.8's CONTROL section"
done
while read -r tag; do
	printf '%s\n' "${cmds[@]}" | grep -qxF -- "$tag" ||
		fail "zswapfs.8's CONTROL section documents '$tag', which is no control command"
done <<<"$tags"

log "${#pages[@]} man pages render clean; ${#keys[@]} settings, $(wc -l <<<"$table") stats keys, ${#cmds[@]} control commands documented"
exit 0
