#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck source-path=SCRIPTDIR
#
# The configuration file (zswapfs.conf(5)) with the real daemon: a good file,
# with groups, read as SOURCE (fstab style) or with -c, shows its values in
# the stats file; mount options override it; and every kind of mistake stops
# the start with a non-zero status, a message naming FILE:LINE and the key,
# and nothing mounted.
set -eu
. "$(dirname "$0")/lib.sh"

require_fuse
make_tmpdir

# start_mounted ARG...: zs_start ARG... and wait (10 s) for the mount.
start_mounted() {
	zs_start "$@"
	zs_wait_mounted "${ZS_SOURCE-} $*"
}

# expect_stat KEY VALUE: in the stats of the current mount.
expect_stat() {
	local v
	v=$(zs_stat "$ZS_MNT" "$1")
	[ "$v" = "$2" ] || fail "${ZS_SOURCE-} $ZS_ARGS: stats $1 is $v, expected $2"
}

good=$ZS_TMP/good.conf
cat >"$good" <<'EOF'
# a file with every kind of value and both groups
size = "48M";
algorithm = "zstd";
level = 5;
mem_limit = 33554432;		// a plain number of bytes
threads = 2;
busy_poll_us = 0;
recompress = {
	enabled = false;
	algorithm = "lzo";
	level = 0;
	idle_age = 60;
	threshold = "256";
	rate = 10;
};
compact = {
	threshold = 30;
};
EOF

# 1. SOURCE is the file, as fstab passes it
ZS_SOURCE=$good ZS_ARGS=
start_mounted
expect_stat algorithm zstd
expect_stat disksize $((48 << 20))
expect_stat mem_limit $((32 << 20))
awk -v m="$ZS_MNT" -v s="$good" '$2 == m && $1 == s { f = 1 } END { exit !f }' /proc/mounts ||
	fail "the mount's source is not $good: $(grep -F "$ZS_MNT" /proc/mounts)"
zs_umount
log "ok: SOURCE=$good is read (zstd, 48M, mem_limit 32M)"

# 2. -c FILE, with a SOURCE that is only a name
ZS_SOURCE=zswapfs ZS_ARGS="-c $good"
start_mounted -c "$good"
expect_stat algorithm zstd
expect_stat disksize $((48 << 20))
zs_umount
log "ok: -c $good is read"

# 3. mount options override the file, the rest of the file stays
ZS_SOURCE=$good ZS_ARGS="-o algorithm=lz4,mem_limit=16M"
start_mounted -o algorithm=lz4,mem_limit=16M
expect_stat algorithm lz4
expect_stat mem_limit $((16 << 20))
expect_stat disksize $((48 << 20))
zs_umount
log "ok: -o algorithm=lz4,mem_limit=16M overrides the file"

# 4. percentages of RAM, suffixes, booleans as strings, 64-bit numbers
pct=$ZS_TMP/pct.conf
cat >"$pct" <<'EOF'
size = 67108864L
mem_limit : "10%"
recompress = { enabled = "off"; threshold = "1K"; }
EOF
ZS_SOURCE=$pct ZS_ARGS=
start_mounted
# as the daemon computes it: 1% of RAM (sysinfo's totalram, MemTotal), times
# 10, rounded down to a page
ram_pct=$(awk '$1 == "MemTotal:" { printf "%d\n", $2 * 1024 / 100 }' /proc/meminfo)
expect_stat mem_limit $((ram_pct * 10 / 4096 * 4096))
expect_stat disksize $((64 << 20))
expect_stat algorithm lz4
zs_umount
log "ok: 10% of RAM, 64-bit number, ':' and no ';'"
unset ZS_SOURCE

# ---- mistakes ----------------------------------------------------------------

errors=0
bad_nr=0

# check_bad WHAT LINE KEY CONTENT: a file holding CONTENT must stop the
# start; the message names FILE:LINE (LINE empty: FILE only) and KEY (empty:
# not checked).
check_bad() {
	local what=$1 line=$2 key=$3 conf rc msg
	bad_nr=$((bad_nr + 1))
	conf=$ZS_TMP/bad$bad_nr.conf
	printf '%s\n' "$4" >"$conf"
	ZS_SOURCE=$conf zs_start_refused "$what"
	rc=$ZS_RC
	msg=$(grep -v -e 'warning:' "$ZS_LOG" | head -n 1) || true
	if [ "$rc" -eq 0 ]; then
		log "FAIL: $what: daemon exited with status 0"
		errors=$((errors + 1))
	elif ! grep -qF -- "$conf${line:+:$line}" "$ZS_LOG"; then
		log "FAIL: $what: message does not name $conf${line:+:$line}: $msg"
		errors=$((errors + 1))
	elif [ -n "$key" ] && ! grep -qF -- "$key" "$ZS_LOG"; then
		log "FAIL: $what: message does not name $key: $msg"
		errors=$((errors + 1))
	else
		log "ok: $what -> status $rc: $msg"
	fi
}

# shellcheck disable=SC2016 # libconfig text, not shell
{
check_bad "syntax error (missing ';' then a second name)" 3 "" \
'size = "64M";
algorithm = "lz4"
level 3;'
# libconfig notices it at the end of the file, not on line 2
check_bad "unterminated string" "" "" \
'size = "64M";
algorithm = "lz4;
level = 0;'
check_bad "unknown key" 3 foo \
'# comment
size = "64M";
foo = 1;'
check_bad "unknown key in a group" 4 recompress.bogus \
'size = "64M";
recompress = {
	enabled = true;
	bogus = 3;
};'
check_bad "unknown group" 2 nosuch.idle_age \
'size = "64M";
nosuch = { idle_age = 3; };'
check_bad "a group where a value belongs" 2 recompress \
'size = "64M";
recompress = 5;'
check_bad "duplicate key" 3 "" \
'size = "64M";
threads = 1;
threads = 2;'
check_bad "integer out of range" 2 threads \
'size = "64M";
threads = 100;'
check_bad "integer out of range in a group" 3 compact.threshold \
'size = "64M";
compact = {
	threshold = 101;
};'
check_bad "size out of range" 1 recompress.threshold \
'recompress = { threshold = "8"; };'
check_bad "size too small" 2 size \
'algorithm = "lz4";
size = 1024;'
check_bad "bad size suffix" 2 size \
'algorithm = "lz4";
size = "64Q";'
check_bad "size with a fraction" 1 mem_limit \
'mem_limit = "1.5G";'
check_bad "percentage where none is allowed" 1 recompress.threshold \
'recompress = { threshold = "5%"; };'
check_bad "percentage over 100" 1 mem_limit \
'mem_limit = "150%";'
check_bad "string where a number is needed" 2 threads \
'size = "64M";
threads = "two";'
check_bad "boolean where a number is needed" 2 threads \
'size = "64M";
threads = true;'
check_bad "number where an algorithm name is needed" 2 algorithm \
'size = "64M";
algorithm = 5;'
check_bad "floating point number" 2 size \
'threads = 1;
size = 1.5;'
check_bad "array" 2 threads \
'size = "64M";
threads = [1, 2];'
check_bad "bad algorithm" 2 algorithm \
'size = "64M";
algorithm = "gzip";'
check_bad "bad algorithm in a group" 3 recompress.algorithm \
'size = "64M";
recompress = {
	algorithm = "brotli";
};'
check_bad "bad boolean" 2 recompress.enabled \
'size = "64M";
recompress = { enabled = "maybe"; };'
check_bad "number where a boolean is needed" 2 recompress.enabled \
'size = "64M";
recompress = { enabled = 5; };'
check_bad "level beyond every algorithm" 3 level \
'size = "64M";
algorithm = "zstd";
level = 30;'
# Checked after the file and the options are all read (config_validate):
check_bad "level out of range for the algorithm (zstd)" 3 level \
'size = "64M";
algorithm = "zstd";
level = -5;'
check_bad "level out of range for the algorithm (lzo)" 3 recompress.level \
'size = "64M";
recompress = { algorithm = "lzo";
	level = 1; };'
check_bad "size not a multiple of 4096" 2 size \
'algorithm = "lz4";
size = 5000;'
}

# a missing file: FILE named, no line
missing=$ZS_TMP/no-such-dir/zswapfs.conf
ZS_SOURCE=$missing zs_start_refused "missing file"
[ "$ZS_RC" -ne 0 ] || fail "missing file: daemon exited with status 0"
grep -qF -- "$missing" "$ZS_LOG" || fail "missing file: message does not name $missing"
log "ok: missing file -> status $ZS_RC: $(head -n 1 "$ZS_LOG")"

# The annotated example shipped in etc/ is itself a valid file.
unset ZS_SOURCE
ZS_ARGS="-c etc/zswapfs.conf"
start_mounted -c "$top_srcdir/etc/zswapfs.conf" -o size=64M
expect_stat algorithm lz4
zs_umount
log "ok: etc/zswapfs.conf loads"

[ "$errors" -eq 0 ] || fail "$errors of $bad_nr bad files were not reported as they should be"
exit 0
