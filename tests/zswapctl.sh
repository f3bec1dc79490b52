#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck source-path=SCRIPTDIR
#
# zswapctl, the admin tool: status, stats (--json), swapon/swapoff, control
# commands, top, and its refusals (not a mount, already swapped on, not root).
# Its figures are checked against the mount's stats file, and its exit
# status counts wherever its output is read (pipefail, or captured first).
set -eu
. "$(dirname "$0")/lib.sh"

ZSWAPCTL=${ZSWAPCTL:-$top_builddir/src/zswapctl}

require_root
require_fuse
[ -x "$ZSWAPCTL" ] || fail "zswapctl not built: $ZSWAPCTL"

# ctl ARG...: zswapctl ARG..., under a deadline (it reads the mount).
ctl() { zs_run 60 "$ZSWAPCTL" "$@"; }

# ctl_run OUT ERR ARG...: run zswapctl, stdout to OUT, stderr to ERR; sets RC.
ctl_run() {
	local out=$1 err=$2
	shift 2
	RC=0
	ctl "$@" >"$out" 2>"$err" || RC=$?
}

# expect_fail RC WORDS ARG...: zswapctl ARG... must exit RC with WORDS on stderr.
expect_fail() {
	local rc=$1 words=$2
	shift 2
	ctl_run "$ZS_TMP/out" "$ZS_TMP/err" "$@"
	[ "$RC" -eq "$rc" ] || { cat "$ZS_TMP/err" >&2; fail "zswapctl $*: exit $RC, not $rc"; }
	grep -qF -- "$words" "$ZS_TMP/err" ||
		{ cat "$ZS_TMP/err" >&2; fail "zswapctl $*: no '$words' on stderr"; }
}

# The loop devices over MOUNT/swap (the test must not touch anyone else's).
loops_on() { losetup -n -O NAME -j "$1/swap" 2>/dev/null || true; }
in_swaps() { awk -v d="$1" '$1 == d { f = 1 } END { exit !f }' /proc/swaps; }

# Whatever zswapctl left on our file, on every exit path: swap off, detach.
_zc_release() {
	local dev
	for dev in $(loops_on "$1"); do
		if in_swaps "$dev"; then zs_run 120 swapoff "$dev" || log "swapoff $dev failed"; fi
		losetup -d "$dev" || log "losetup -d $dev failed"
	done
}

make_tmpdir
# no background work: two reads of the stats must agree on every figure
# but the daemon's own RSS
zs_mount "size=64M,compact.threshold=0,recompress.enabled=false"
push_undo _zc_release "$ZS_MNT"
mnt=$ZS_MNT

# ---- help, version, usage -----------------------------------------------------
out=$(ctl --help) || fail "--help failed"
grep -q 'swapon MOUNT' <<<"$out" || fail "--help does not list swapon"
out=$(ctl --version) || fail "--version failed"
grep -q '^zswapctl ' <<<"$out" || fail "--version: $out"
expect_fail 2 "unknown command" frobnicate "$mnt"
expect_fail 2 "idle" idle "$mnt"
# the control commands' word counts are the daemon's (control_cmds.h)
expect_fail 2 "writeback: wrong number of arguments" writeback "$mnt" idle max_pages=1 more
expect_fail 2 "recompress: wrong number of arguments" recompress "$mnt" type=idle \
	threshold=100 max_pages=1 rate=1 more
expect_fail 2 "bad priority" swapon "$mnt" --priority 99999

# ---- status and stats ----------------------------------------------------------
gen_data "$ZS_TMP/data" 256 text 5
zs_run 30 dd if="$ZS_TMP/data" of="$mnt/swap" bs=64k conv=notrunc,fsync status=none ||
	fail "writing to $mnt/swap"
orig=$(zs_stat "$mnt" orig_data_size)
[ "$orig" -gt 0 ] || fail "orig_data_size is 0 after writing"

ctl >"$ZS_TMP/status" || fail "zswapctl (no command) failed"
head -n 1 "$ZS_TMP/status" |
	grep -q '^MOUNTPOINT *DISKSIZE ALGORITHM *DATA *COMPR *TOTAL *RATIO BACKING SWAP$' ||
	fail "status header: $(head -n 1 "$ZS_TMP/status")"
awk -v m="$mnt" '$1 == m { f = 1 } END { exit !f }' "$ZS_TMP/status" ||
	{ cat "$ZS_TMP/status" >&2; fail "status does not list $mnt"; }

# one row in bytes: MOUNTPOINT DISKSIZE ALGORITHM DATA COMPR TOTAL RATIO BACKING SWAP
row=$(ctl status --bytes --noheadings "$mnt") || fail "status --bytes failed"
read -r r_mnt r_size r_algo r_data r_compr r_total r_ratio r_backing r_swap <<<"$row"
[ "$r_mnt" = "$mnt" ] || fail "status row names $r_mnt, not $mnt"
[ "$r_size" = 67108864 ] || fail "DISKSIZE $r_size, not 67108864"
[ "$r_algo" = lz4 ] || fail "ALGORITHM $r_algo, not lz4"
[ "$r_data" = "$orig" ] || fail "DATA $r_data, stats say $orig"
if [ "$r_compr" -le 0 ] || [ "$r_total" -le 0 ]; then fail "COMPR $r_compr TOTAL $r_total"; fi
"$PYTHON" -c 'import sys; r = float(sys.argv[1]); exp = int(sys.argv[2]) / int(sys.argv[3])
sys.exit(abs(r - exp) > 0.006)' "$r_ratio" "$r_data" "$r_total" ||
	fail "RATIO $r_ratio is not $r_data/$r_total"
[ "$r_backing" = - ] || fail "BACKING $r_backing without writeback"
[ "$r_swap" = - ] || fail "SWAP $r_swap before swapon"
# human sizes: 64M for the disk size
out=$(ctl status -n "$mnt") || fail "status -n failed"
awk '{ exit !($2 == "64M") }' <<<"$out" || fail "DISKSIZE is not 64M: $out"

# stats and stats --json say what the stats file says (nothing but the
# reserve thread runs in the background on this mount: the other figures
# hold still between the reads)
ctl stats "$mnt" >"$ZS_TMP/stats.txt" || fail "stats failed"
ctl stats "$mnt" --json >"$ZS_TMP/stats.json" || fail "stats --json failed"
zs_run 10 cat "$mnt/stats" >"$ZS_TMP/stats.file" || fail "reading $mnt/stats failed"
"$PYTHON" - "$ZS_TMP/stats.json" "$ZS_TMP/stats.txt" "$ZS_TMP/stats.file" <<'EOF' || fail "stats --json"
import json, sys
d = json.loads(open(sys.argv[1]).read())
txt = [l.split(" ", 1) for l in open(sys.argv[2]).read().splitlines()]
fresh = [l.split(" ", 1) for l in open(sys.argv[3]).read().splitlines()]
assert isinstance(d, dict), "not an object"
assert [k for k, _ in txt] == [k for k, _ in fresh], "zswapctl stats: keys differ from the file"
assert list(d) == [k for k, _ in fresh], "--json: keys differ from the stats file"
assert d["algorithm"] == "lz4", d["algorithm"]
assert d["writeback_status"] == "none", d["writeback_status"]
assert d["writeback_budget_left"] == "unlimited", d["writeback_budget_left"]
assert d["fuse_transport"] in ("dev_fuse", "io_uring"), d["fuse_transport"]
assert d["backing_cipher"] == "none", d["backing_cipher"]
assert d["memcg"] in ("none", "moved", "ignored", "unknown"), d["memcg"]
words = ("algorithm", "writeback_status", "writeback_budget_left", "fuse_transport",
         "backing_cipher", "memcg")
for (k, v), (_, t) in zip(fresh, txt):
    # the daemon's own memory moves between two reads, and over io_uring
    # the reads of the stats file are ring requests themselves
    if k in ("rss_bytes", "uring_reqs"):
        assert isinstance(d[k], int) and (d[k] > 0 or k == "uring_reqs"), k
        continue
    # the reserve thread fills, trims and measures in the background
    if k.startswith("reserve_") or k in ("arena_mapped_bytes", "arena_desc_bytes"):
        assert isinstance(d[k], int) and t.isdigit(), k
        continue
    assert t == v, "zswapctl stats: %s is %r, the file says %r" % (k, t, v)
    if k in words:
        assert isinstance(d[k], str) and d[k] == v, k
        continue
    assert isinstance(d[k], int), "%s is not a number" % k
    assert d[k] == int(v), "--json: %s is %r, the file says %r" % (k, d[k], v)
assert d["orig_data_size"] > 0
EOF

# ---- refusals ------------------------------------------------------------------
mkdir "$ZS_TMP/plain"
expect_fail 1 "$ZS_TMP/plain: not a zswapfs mount" stats "$ZS_TMP/plain"
expect_fail 1 "$ZS_TMP/plain: not a zswapfs mount" swapon "$ZS_TMP/plain"
expect_fail 1 "not a zswapfs mount" compact /
expect_fail 1 "no loop device" swapoff "$mnt"
if command -v setpriv >/dev/null && setpriv --reuid=nobody --regid=nogroup --clear-groups \
	test -x "$ZSWAPCTL" 2>/dev/null; then
	RC=0
	zs_run 30 setpriv --reuid=nobody --regid=nogroup --clear-groups "$ZSWAPCTL" swapon "$mnt" \
		2>"$ZS_TMP/err" || RC=$?
	if [ "$RC" -ne 1 ] || ! grep -qF "swapon needs root" "$ZS_TMP/err"; then
		cat "$ZS_TMP/err" >&2
		fail "swapon as nobody: exit $RC"
	fi
	[ -z "$(loops_on "$mnt")" ] || fail "swapon as nobody attached a loop device"
else
	log "setpriv cannot run $ZSWAPCTL as nobody: non-root refusal not checked"
fi

# ---- control commands ----------------------------------------------------------
before=$(zs_stat "$mnt" compactions)
ctl compact "$mnt" || fail "compact failed"
for ((i = 0; i < 50; i++)); do
	[ "$(zs_stat "$mnt" compactions)" -gt "$before" ] && break
	sleep 0.1
done
[ "$(zs_stat "$mnt" compactions)" -gt "$before" ] || fail "compact did not run a compaction"
ctl idle "$mnt" all || fail "idle all failed"
expect_fail 1 "'recompress type=bogus': Invalid argument" recompress "$mnt" type=bogus
expect_fail 1 "'idle soon': Invalid argument" idle "$mnt" soon

# ---- top -----------------------------------------------------------------------
ctl top "$mnt" -n 2 -d 0.2 >"$ZS_TMP/top" || fail "top -n 2 failed"
[ "$(grep -c '^zswapfs ' "$ZS_TMP/top")" -eq 2 ] || { cat "$ZS_TMP/top" >&2; fail "top: not 2 refreshes"; }
grep -q '^pages/s *reads [0-9.]* *writes [0-9.]*' "$ZS_TMP/top" || fail "top: no rates"
grep -q $'\033' "$ZS_TMP/top" && fail "top wrote escapes to a file"

# ---- swapon / swapoff -------------------------------------------------------------
ctl swapon "$mnt" --priority 7 >"$ZS_TMP/dev" || fail "swapon failed"
dev=$(cat "$ZS_TMP/dev")
case $dev in /dev/loop[0-9]*) ;; *) fail "swapon printed '$dev'" ;; esac
[ "$(loops_on "$mnt")" = "$dev" ] || fail "losetup -j shows '$(loops_on "$mnt")', not $dev"
awk -v d="$dev" '$1 == d && $NF == 7 { f = 1 } END { exit !f }' /proc/swaps ||
	{ cat /proc/swaps >&2; fail "$dev not in /proc/swaps with priority 7"; }
[ "$(cat "/sys/block/${dev#/dev/}/loop/dio")" = 1 ] || fail "$dev is not in direct I/O mode"
wbt=/sys/block/${dev#/dev/}/queue/wbt_lat_usec
[ ! -e "$wbt" ] || [ "$(cat "$wbt")" = 0 ] || fail "$dev has writeback throttling on"

expect_fail 1 "already swapped on ($dev)" swapon "$mnt"
[ "$(loops_on "$mnt" | wc -l)" -eq 1 ] || fail "the refused swapon attached a device"

out=$(ctl status --noheadings "$mnt") || fail "status failed"
grep -qF "$dev [SWAP]" <<<"$out" || fail "status: no $dev [SWAP]: $out"

ctl swapoff "$mnt" || fail "swapoff failed"
in_swaps "$dev" && fail "$dev still in /proc/swaps after swapoff"
[ -z "$(loops_on "$mnt")" ] || fail "loop device still attached after swapoff"
expect_fail 1 "no loop device" swapoff "$mnt"
out=$(ctl status --noheadings "$mnt") || fail "status failed"
awk '{ exit !($NF == "-") }' <<<"$out" || fail "SWAP after swapoff: $out"

# again without a priority: the kernel chooses one
dev=$(ctl swapon "$mnt") || fail "second swapon failed"
in_swaps "$dev" || fail "$dev not in /proc/swaps"
ctl swapoff "$mnt" || fail "second swapoff failed"
[ -z "$(loops_on "$mnt")" ] || fail "loop device left after the second swapoff"

zs_umount
log "PASS"
