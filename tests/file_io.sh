#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck source-path=SCRIPTDIR
#
# The swap file as a file: reads of never-written data, 512-byte aligned and
# unaligned writes against a reference copy, large requests, the end of the
# file, the stats and control files, same-filled and incompressible pages,
# mem_limit, and every algorithm.  The request figures of the stats (counts,
# bytes, errors, latency) and the arena's (frag_bytes, arena_mapped_bytes)
# are checked against the requests the test made; control writes that are
# too long, hold several lines or a NUL byte are refused and change nothing.
set -eu
. "$(dirname "$0")/lib.sh"

require_fuse
require_memhog
make_tmpdir

MIB=$((1 << 20))
SIZE=$((64 * MIB))
REF=$ZS_TMP/ref
SRC=$ZS_TMP/src

# A small I/O tool for what dd cannot say precisely: single pwrite/pread
# calls at any offset, with the result written down exactly.
cat >"$ZS_TMP/io.py" <<'EOF'
import errno, os, random, sys

def pwrite_both(swap, ref, src, off, srcoff, n):
    with open(src, "rb") as f:
        f.seek(srcoff)
        data = f.read(n)
    fd = os.open(swap, os.O_WRONLY)
    try:
        done = os.pwrite(fd, data, off)
    finally:
        os.close(fd)
    if done != n:
        sys.exit("short write: %d of %d bytes at %d" % (done, n, off))
    with open(ref, "r+b") as f:
        f.seek(off)
        f.write(data)

def random_writes(swap, ref, src, count, limit, seed):
    rng = random.Random(seed)
    srcsize = os.path.getsize(src)
    s = os.open(swap, os.O_RDWR)
    r = os.open(ref, os.O_RDWR)
    sf = open(src, "rb")
    for i in range(count):
        n = 512 * rng.randint(1, 64)
        off = 512 * rng.randrange((limit - n) // 512)
        sf.seek(512 * rng.randrange((srcsize - n) // 512))
        data = sf.read(n)
        if os.pwrite(s, data, off) != n:
            sys.exit("short write at %d" % off)
        os.pwrite(r, data, off)
        # read back now and then: a write must be visible at once
        if i % 7 == 0:
            back = os.pread(s, n, off)
            if back != data:
                sys.exit("write of %d bytes at %d did not read back" % (n, off))
    os.close(s)
    os.close(r)

def compare(swap, ref, off, n):
    fd = os.open(swap, os.O_RDONLY)
    got = os.pread(fd, n, off)
    os.close(fd)
    with open(ref, "rb") as f:
        f.seek(off)
        want = f.read(n)
    if got != want:
        bad = next(i for i in range(min(len(got), len(want))) if got[i] != want[i]) \
            if len(got) == len(want) else -1
        sys.exit("pread(%d, %d): %d bytes, first difference at +%d" % (off, n, len(got), bad))

def past_end(swap, ref, size):
    fd = os.open(swap, os.O_RDWR)
    try:
        # write wholly past the end: must fail
        try:
            n = os.pwrite(fd, b"x" * 4096, size)
            sys.exit("write of 4096 bytes at the end (%d) returned %d" % (size, n))
        except OSError as e:
            print("write at end: %s" % e.strerror)
        try:
            n = os.pwrite(fd, b"y" * 4096, size + 1024 * 1024)
            sys.exit("write 1M past the end returned %d" % n)
        except OSError as e:
            print("write past end: %s" % e.strerror)
        # straddling write: fails, or stores only what fits
        try:
            n = os.pwrite(fd, b"z" * 4096, size - 512)
            if n > 512:
                sys.exit("straddling write returned %d (> 512)" % n)
            with open(ref, "r+b") as f:
                f.seek(size - 512)
                f.write(b"z" * n)
            print("straddling write: %d bytes" % n)
        except OSError as e:
            print("straddling write: %s" % e.strerror)
        # reads: nothing beyond the end, ever
        for off in (size, size + 4096, size + 1024 * 1024):
            try:
                got = os.pread(fd, 4096, off)
                if got:
                    sys.exit("read at %d returned %d bytes" % (off, len(got)))
            except OSError as e:
                print("read at %d: %s" % (off, e.strerror))
        try:
            got = os.pread(fd, 4096, size - 512)
            if len(got) > 512:
                sys.exit("straddling read returned %d bytes" % len(got))
            with open(ref, "rb") as f:
                f.seek(size - 512)
                if got != f.read(len(got)):
                    sys.exit("straddling read returned wrong data")
        except OSError as e:
            print("straddling read: %s" % e.strerror)
    finally:
        os.close(fd)
    if os.stat(swap).st_size != size:
        sys.exit("st_size changed to %d" % os.stat(swap).st_size)

cmd, args = sys.argv[1], sys.argv[2:]
if cmd == "pwrite":
    pwrite_both(args[0], args[1], args[2], *map(int, args[3:6]))
elif cmd == "random":
    random_writes(args[0], args[1], args[2], *map(int, args[3:6]))
elif cmd == "compare":
    compare(args[0], args[1], int(args[2]), int(args[3]))
elif cmd == "past_end":
    past_end(args[0], args[1], int(args[2]))
else:
    sys.exit("unknown command " + cmd)
EOF
io() { zs_run 120 "$PYTHON" "$ZS_TMP/io.py" "$@"; }

# check_all: the whole swap file, read with O_DIRECT in 1 MiB requests,
# equals the reference.
check_all() {
	zs_run 60 cmp "$REF" <(dd if="$ZS_MNT/swap" iflag=direct bs=1M status=none) ||
		fail "$1: swap file content differs from the reference"
}

# dd_both SRC_SECTOR DST_SECTOR COUNT: a dd with 512-byte O_DIRECT writes, to
# the swap file and to the reference.
dd_both() {
	zs_run 30 dd if="$SRC" of="$ZS_MNT/swap" bs=512 skip="$1" seek="$2" count="$3" \
		oflag=direct conv=notrunc status=none || fail "dd write at sector $2 x $3 failed"
	dd if="$SRC" of="$REF" bs=512 skip="$1" seek="$2" count="$3" conv=notrunc status=none
}

stat_int() {
	local v
	v=$(zs_stat "$ZS_MNT" "$1")
	[[ "$v" =~ ^[0-9]+$ ]] || fail "stats: $1 = '$v' is not a non-negative integer"
	printf '%s\n' "$v"
}

# Test data: 4 MiB of text, 4 MiB of random bytes, 8 MiB of memhog pages.
gen_data "$ZS_TMP/text" 1024 text 1
gen_data "$ZS_TMP/random" 1024 random 2
"$MEMHOG" --size 8 --seed 3 --dump "$ZS_TMP/mixed"
cat "$ZS_TMP/text" "$ZS_TMP/random" "$ZS_TMP/mixed" >"$SRC"
truncate -s "$SIZE" "$REF"

# ---- the file ----------------------------------------------------------------
zs_mount size=64M
swap=$ZS_MNT/swap
v=$(zs_run 10 stat -c %s:%F:%a "$swap") || fail "stat $swap failed"
[ "$v" = "$SIZE:regular file:600" ] ||
	fail "swap is '$v', not a regular file of $SIZE bytes with mode 600"
zs_run 10 test -f "$ZS_MNT/stats" || fail "no stats file"
zs_run 10 test -f "$ZS_MNT/control" || fail "no control file"
v=$(zs_stat "$ZS_MNT" algorithm)
[ "$v" = lz4 ] || fail "default algorithm is '$v', not lz4"

check_all "never written"
v=$(stat_int orig_data_size)
[ "$v" -eq 0 ] || fail "orig_data_size is $v after reading only"

# ---- partial pages with dd, 512-byte sectors ------------------------------------
dd_both 0 0 1          # first sector of a page
dd_both 3 1 1          # second sector of the same page
dd_both 8200 7 3       # 3584..5120: straddles a page boundary (random data)
dd_both 9000 15 2      # 7680..8704: straddles another one
dd_both 100 100 17     # 17 sectors from the middle of page 6 into page 8
dd_both 8400 1 1       # overwrite part of a page that is stored already
dd_both 500 $((SIZE / 512 - 1)) 1   # the last sector of the file
check_all "after sector writes"
# a read that starts and ends inside pages
zs_run 30 cmp <(dd if="$swap" iflag=direct bs=512 skip=9 count=5 status=none) \
	<(dd if="$REF" bs=512 skip=9 count=5 status=none) ||
	fail "512-byte direct read at sector 9 returned wrong data"

# ---- many random writes (any 512-aligned offset and length) ------------------
io random "$swap" "$REF" "$SRC" 400 $((48 * MIB)) 42 || fail "random writes"
check_all "after random writes"

# ---- large requests -------------------------------------------------------------
zs_run 30 dd if="$SRC" of="$swap" bs=1M skip=4 seek=16 count=8 oflag=direct conv=notrunc \
	status=none || fail "dd bs=1M write failed"
dd if="$SRC" of="$REF" bs=1M skip=4 seek=16 count=8 conv=notrunc status=none
io pwrite "$swap" "$REF" "$SRC" $((48 * MIB + 1536)) 512 $((MIB + 512)) ||
	fail "one 1 MiB + 512 write at a sector offset"
check_all "after large writes"

# ---- unaligned offsets and lengths (DESIGN.md: any offset and length) -------------
io pwrite "$swap" "$REF" "$SRC" 1000001 12345 777 || fail "unaligned write"
io pwrite "$swap" "$REF" "$SRC" $((4096 * 20 - 3)) 5000 10 || fail "unaligned write across pages"
io compare "$swap" "$REF" 999999 3000 || fail "unaligned read"
io compare "$swap" "$REF" 1 $((3 * 4096)) || fail "unaligned read across pages"
check_all "after unaligned writes"

# ---- the end of the file -----------------------------------------------------------
if zs_run 30 dd if="$SRC" of="$swap" bs=512 seek=$((SIZE / 512)) count=1 oflag=direct conv=notrunc \
	status=none 2>/dev/null; then
	fail "dd write of the sector after the end succeeded"
fi
io past_end "$swap" "$REF" "$SIZE" >&2 || fail "I/O past the end"
check_all "after I/O past the end"

# ---- stats -----------------------------------------------------------------
for key in orig_data_size compr_data_size mem_used_total mem_limit mem_used_max same_pages \
	pages_compacted huge_pages failed_reads failed_writes notify_free bd_count bd_reads \
	bd_writes pages_stored rss_bytes; do
	stat_int "$key" >/dev/null
done
# the keys whose values are words; every other value is a number
awk 'NF != 2 { exit 1 }
	$1 == "algorithm" || $1 == "writeback_status" || $1 == "writeback_budget_left" ||
	$1 == "fuse_transport" || $1 == "backing_cipher" || $1 == "memcg" { next }
	$2 !~ /^[0-9]+$/ { exit 1 }' "$ZS_MNT/stats" ||
	fail "stats has a line that is not 'key integer': $(cat "$ZS_MNT/stats")"
if zs_run 10 "$BASH" -c 'echo 1 >"$1"' - "$ZS_MNT/stats" 2>/dev/null; then
	fail "writing the stats file succeeded"
fi

# fresh pages (56 MiB on was never written): 64 same-filled, 64 random, 64 text
same0=$(stat_int same_pages)
huge0=$(stat_int huge_pages)
stored0=$(stat_int pages_stored)
compr0=$(stat_int compr_data_size)
gen_data "$ZS_TMP/same" 64 same 4
zs_run 30 dd if="$ZS_TMP/same" of="$swap" bs=256K seek=224 oflag=direct conv=notrunc status=none
dd if="$ZS_TMP/same" of="$REF" bs=256K seek=224 conv=notrunc status=none
same1=$(stat_int same_pages)
[ $((same1 - same0)) -eq 64 ] || fail "same_pages went from $same0 to $same1 after 64 same-filled pages"
zs_run 30 dd if="$ZS_TMP/random" of="$swap" bs=256K seek=228 count=1 oflag=direct conv=notrunc \
	status=none
dd if="$ZS_TMP/random" of="$REF" bs=256K seek=228 count=1 conv=notrunc status=none
huge1=$(stat_int huge_pages)
[ $((huge1 - huge0)) -eq 64 ] || fail "huge_pages went from $huge0 to $huge1 after 64 random pages"
compr1=$(stat_int compr_data_size)
zs_run 30 dd if="$ZS_TMP/text" of="$swap" bs=256K seek=232 count=1 oflag=direct conv=notrunc \
	status=none
dd if="$ZS_TMP/text" of="$REF" bs=256K seek=232 count=1 conv=notrunc status=none
compr2=$(stat_int compr_data_size)
orig2=$(stat_int orig_data_size)
stored2=$(stat_int pages_stored)
[ $((stored2 - stored0)) -eq 192 ] || fail "pages_stored went from $stored0 to $stored2 (192 new pages)"
# not a second check of the same pages: orig_data_size is pages_stored in
# bytes, by definition (zram's, same-filled pages included)
[ "$orig2" -eq $((stored2 * 4096)) ] || fail "orig_data_size $orig2 is not pages_stored $stored2 x 4096"
if [ $((compr2 - compr1)) -le 0 ] || [ $((compr2 - compr1)) -ge $((64 * 4096 / 2)) ]; then
	fail "64 text pages took $((compr2 - compr1)) compressed bytes"
fi
[ $((compr1 - compr0)) -ge $((64 * 4096)) ] ||
	fail "64 random pages took only $((compr1 - compr0)) compressed bytes"
v=$(stat_int mem_used_total)
[ "$v" -ge "$(stat_int compr_data_size)" ] || fail "mem_used_total $v < compr_data_size"
check_all "after the stats pages"

# ---- control --------------------------------------------------------------------
zs_ctl "$ZS_MNT" compact || fail "'compact' was refused"
if zs_ctl "$ZS_MNT" bogus 2>/dev/null; then fail "'bogus' was accepted"; fi
if zs_ctl "$ZS_MNT" compact now 2>/dev/null; then fail "'compact now' was accepted"; fi
for bad in "restart now" "restart keeper now" "restart Keeper"; do
	if zs_ctl "$ZS_MNT" "$bad" 2>/dev/null; then fail "'$bad' was accepted"; fi
done
[ "$(stat_int keeper_upgrades)" = 0 ] && [ "$(stat_int worker_generation)" = 1 ] ||
	fail "a refused restart command restarted something"
check_all "after compact"
for key in failed_reads failed_writes; do
	v=$(stat_int "$key")
	[ "$v" -eq 0 ] || fail "$key is $v"
done
zs_alive
zs_umount

# ---- the request and arena figures ------------------------------------------------
# A fresh mount with no background work: every figure comes from the
# requests below.  An O_DIRECT dd of 4 KiB blocks makes one FUSE request a
# block, one after the other: their latencies add up to less than the dd's
# wall time.
zs_mount size=16M,compact.threshold=0,recompress.enabled=false
swap=$ZS_MNT/swap
CHUNK=$((2 * MIB))	# the arena maps memory in chunks of 2 MiB (arena.c)

# expect_io KIND REQS BYTES ERRORS WALL_NS: the KIND_* figures.
expect_io() {
	local k=$1 reqs avg max
	reqs=$(stat_int "${k}_reqs")
	avg=$(stat_int "${k}_latency_avg_ns")
	max=$(stat_int "${k}_latency_max_ns")
	[ "$reqs" -eq "$2" ] || fail "${k}_reqs is $reqs, the test made $2 requests"
	[ "$(stat_int "${k}_bytes")" -eq "$3" ] ||
		fail "${k}_bytes is $(stat_int "${k}_bytes"), the test moved $3 bytes"
	[ "$(stat_int "${k}_errors")" -eq "$4" ] ||
		fail "${k}_errors is $(stat_int "${k}_errors"), expected $4"
	if [ "$reqs" -eq 0 ]; then
		[ "$avg" -eq 0 ] && [ "$max" -eq 0 ] || fail "$k latency $avg/$max without a request"
		return 0
	fi
	if [ "$avg" -le 0 ] || [ "$avg" -gt "$max" ] || [ $((avg * reqs)) -gt "$5" ]; then
		fail "${k}_latency_avg_ns $avg, max $max: not within the $5 ns the requests took"
	fi
}

# timed CMD...: zs_run CMD; WALL its wall time in ns, summed over calls.
WALL=0
timed() {
	local t0 rc=0
	t0=$(date +%s%N)
	zs_run 30 "$@" || rc=$?
	WALL=$((WALL + $(date +%s%N) - t0))
	return "$rc"
}

for k in read write discard; do expect_io "$k" 0 0 0 0; done
for key in mem_used_total frag_bytes; do
	[ "$(stat_int "$key")" -eq 0 ] || fail "fresh mount: $key is $(stat_int "$key")"
done
# The arena's mapped chunks hold the reserve (free pages, locked ahead of
# need) and the pages in use; stored_mapped prints the latter, from one read
# of the stats file.
stored_mapped() {
	zs_run 10 awk '$1 == "arena_mapped_bytes" { m = $2 } $1 == "reserve_bytes" { r = $2 }
		END { print m - r }' "$ZS_MNT/stats"
}
[ "$(stored_mapped)" -eq 0 ] ||
	fail "fresh mount: $(stored_mapped) bytes mapped beside the reserve"

gen_data "$ZS_TMP/t64" 64 text 8
timed dd if="$ZS_TMP/t64" of="$swap" bs=4k count=64 oflag=direct conv=notrunc status=none ||
	fail "writing 64 pages failed"
expect_io write 64 $((64 * 4096)) 0 "$WALL"
w_wall=$WALL WALL=0
timed dd if="$swap" of="$ZS_TMP/t64.back" bs=4k count=64 iflag=direct status=none ||
	fail "reading 64 pages failed"
cmp "$ZS_TMP/t64" "$ZS_TMP/t64.back" || fail "64 pages do not read back"
expect_io read 64 $((64 * 4096)) 0 "$WALL"
# a write at the end of the file: refused by the daemon, an error, no bytes
WALL=$w_wall
if timed dd if="$ZS_TMP/t64" of="$swap" bs=4k seek=4096 count=1 oflag=direct conv=notrunc \
	status=none 2>/dev/null; then
	fail "a write at the end of the file succeeded"
fi
expect_io write 65 $((64 * 4096)) 1 "$WALL"
WALL=0
timed fallocate --punch-hole --keep-size --offset 0 --length $((8 * 4096)) "$swap" ||
	fail "punching 8 pages failed"
expect_io discard 1 $((8 * 4096)) 0 "$WALL"
# The same requests by path: the 64 reads found their pages in the arena,
# 8 reads of the punched pages find them empty; the 65 writes found room
# (the one past the end too: refused before it needs any); no backing file.
zs_run 30 dd if="$swap" of=/dev/null bs=4k count=8 iflag=direct status=none ||
	fail "reading 8 punched pages failed"
expect_path() { # PATH REQS: lat_PATH_reqs, and its buckets add up to it
	local p=$1 figures
	figures=$(zs_run 10 awk -v p="lat_$1_" '
		index($1, p) == 1 && $1 ~ /_us_[0-9]+$/ { sum += $2 }
		$1 == p "reqs" { n = $2 } $1 == p "ns_total" { t = $2 } $1 == p "ns_max" { m = $2 }
		END { print n + 0, sum + 0, t + 0, m + 0 }' "$ZS_MNT/stats")
	read -r n sum t m <<<"$figures"
	[ "$n" -eq "$2" ] || fail "lat_${p}_reqs is $n, the test made $2 such requests"
	[ "$sum" -eq "$n" ] || fail "the buckets of lat_${p} hold $sum requests of $n"
	if [ "$n" -gt 0 ] && { [ "$m" -le 0 ] || [ "$m" -gt "$t" ]; }; then
		fail "lat_${p}: longest $m ns of $t ns in all"
	fi
	[ "$n" -gt 0 ] || [ "$t" -eq 0 ] || fail "lat_${p}: $t ns without a request"
}
expect_path read_arena 64
expect_path read_same 8
expect_path read_backing 0
expect_path write_room 65
expect_path write_wait 0
expect_path discard 1
expect_path backing_pread 0
[ "$(stat_int writeback_room_wait_ns)" -eq 0 ] || fail "writes waited for room, with room"

# The arena: 56 objects in their size classes; the places of those classes
# that hold none are frag_bytes; the pages in use sit in mapped chunks.
figures=$(zs_run 10 awk '
	$1 ~ /^class_[0-9]+_objs$/ { split($1, w, "_"); objs += $2; size[w[2]] = 1; o[w[2]] = $2 }
	$1 ~ /^class_[0-9]+_capacity$/ { split($1, w, "_"); c[w[2]] = $2 }
	$1 == "frag_bytes" { fb = $2 } $1 == "mem_used_total" { u = $2 }
	$1 == "arena_mapped_bytes" { m += $2 } $1 == "reserve_bytes" { m -= $2 }
	END { for (s in size) free += (c[s] - o[s]) * s
		if (free != fb) { print "frag_bytes", fb, "but", free, "free in the classes"; exit 1 }
		print objs + 0, fb + 0, u + 0, m + 0 }' "$ZS_MNT/stats") ||
	fail "the class figures do not add up: $figures"
read -r objs frag used mapped <<<"$figures"
[ "$objs" -eq 56 ] || fail "the classes hold $objs objects, 56 pages are stored"
[ "$used" -gt 0 ] && [ "$frag" -lt "$used" ] || fail "frag_bytes $frag, mem_used_total $used"
if [ $((mapped % 4096)) -ne 0 ] || [ "$mapped" -lt "$used" ] ||
	[ "$mapped" -gt $((used + CHUNK)) ]; then
	fail "arena_mapped_bytes $mapped for mem_used_total $used"
fi
# 6 MiB of incompressible pages take more chunks; discarding everything
# unmaps them all but one, kept for the next write
gen_data "$ZS_TMP/r6" 1536 random 9
zs_run 30 dd if="$ZS_TMP/r6" of="$swap" bs=1M seek=8 oflag=direct conv=notrunc status=none ||
	fail "writing 6 MiB failed"
used=$(stat_int mem_used_total)
mapped=$(stored_mapped)
[ "$used" -ge $((6 * MIB)) ] && [ "$mapped" -ge "$used" ] && [ $((mapped % 4096)) -eq 0 ] ||
	fail "6 MiB stored: mem_used_total $used, arena_mapped_bytes $mapped"
timed fallocate --punch-hole --keep-size --offset 0 --length $((16 * MIB)) "$swap" ||
	fail "punching everything failed"
for key in mem_used_total frag_bytes pages_stored; do
	[ "$(stat_int "$key")" -eq 0 ] || fail "everything discarded: $key is $(stat_int "$key")"
done
[ "$(stored_mapped)" -le "$CHUNK" ] ||
	fail "everything discarded: $(stored_mapped) bytes mapped beside the reserve"

# ---- control writes that are not one command ------------------------------------
# One write is one command of one line, at most 256 bytes with its newline:
# two lines, a NUL byte, or more bytes are refused whole (EINVAL), even when
# they start with a good command, and change nothing (no compaction, no
# recompression pass queued, not one figure).
pad() { printf '%*s' "$1" ''; }
# Left out: what moves by itself (the daemon's RSS, the reserve thread's
# rate and refills, and the chunks and descriptor pages those map) and
# requests over io_uring (the control writes are some).
stats_now() {
	zs_run 10 grep -Ev '^(rss_bytes|uring_reqs|reserve_[a-z_]+|arena_mapped_bytes|arena_desc_[a-z_]+) ' \
		"$ZS_MNT/stats"
}
stats_now >"$ZS_TMP/stats.before"
mapfile -t got < <(zs_ctl_raw "$ZS_MNT" 'compact\ncompact\n' 'compact\n\n' \
	'recompress\ncompact\n' 'compact\0\n' 'compact\0' '\0compact\n' 'compact\n\0' \
	"compact$(pad 249)\\n" "recompress$(pad 4000)\\n")
[ "${#got[@]}" -eq 9 ] || fail "zs_ctl_raw answered ${#got[@]} writes of 9"
for ((i = 0; i < 9; i++)); do
	[ "${got[i]}" = EINVAL ] || fail "control write $((i + 1)) of 9 got ${got[i]}, not EINVAL"
done
sleep 0.5	# a command the daemon took would have run by now
stats_now >"$ZS_TMP/stats.after"
diff "$ZS_TMP/stats.before" "$ZS_TMP/stats.after" >&2 ||
	fail "refused control writes changed the stats"
# the longest line taken: 256 bytes with the newline
c0=$(stat_int compactions)
[ "$(zs_ctl_raw "$ZS_MNT" "compact$(pad 248)\\n")" = ok ] ||
	fail "a 256-byte command line was refused"
zs_stat_wait "$ZS_MNT" compactions $((c0 + 1)) 10
zs_alive
zs_umount

# ---- mem_limit ------------------------------------------------------------------
zs_mount size=64M,mem_limit=4M
swap=$ZS_MNT/swap
v=$(stat_int mem_limit)
[ "$v" -eq $((4 * MIB)) ] || fail "mem_limit reads $v"
gen_data "$ZS_TMP/random16" 4096 random 5
if zs_run 60 dd if="$ZS_TMP/random16" of="$swap" bs=1M oflag=direct conv=notrunc \
	2>"$ZS_TMP/dd.err"; then
	fail "16 MiB of random data fit in mem_limit=4M"
fi
grep -q "No space left on device" "$ZS_TMP/dd.err" ||
	fail "writes beyond mem_limit did not fail with ENOSPC: $(cat "$ZS_TMP/dd.err")"
done_bytes=$(awk '/bytes/ && /copied/ { print $1 }' "$ZS_TMP/dd.err")
log "mem_limit=4M: $done_bytes bytes of random data stored before ENOSPC"
[ "${done_bytes:-0}" -gt 0 ] || fail "nothing could be written under mem_limit=4M"
zs_run 30 cmp -n "$done_bytes" \
	<(dd if="$swap" iflag=direct,count_bytes bs=1M count="$done_bytes" status=none) \
	"$ZS_TMP/random16" ||
	fail "data stored before ENOSPC does not read back"
v=$(stat_int failed_writes)
[ "$v" -gt 0 ] || fail "failed_writes is $v after ENOSPC"
v=$(stat_int mem_used_total)
[ "$v" -le $((4 * MIB)) ] || fail "mem_used_total $v exceeds mem_limit"
v=$(stat_int mem_used_max)
[ "$v" -le $((4 * MIB)) ] || fail "mem_used_max $v exceeds mem_limit"
# same-filled pages need no memory: they still go in
zs_run 30 dd if="$ZS_TMP/same" of="$swap" bs=256K seek=200 oflag=direct conv=notrunc status=none ||
	fail "same-filled pages refused when the memory limit is reached"
# freeing space makes writes work again
zs_run 30 fallocate --punch-hole --keep-size --offset 0 --length $((32 * MIB)) "$swap" ||
	fail "punching a hole failed"
zs_run 30 dd if="$ZS_TMP/random16" of="$swap" bs=1M count=2 oflag=direct conv=notrunc \
	status=none ||
	fail "writes still fail after discarding everything"
zs_run 30 cmp -n $((2 * MIB)) <(dd if="$swap" iflag=direct bs=1M count=2 status=none) \
	"$ZS_TMP/random16" ||
	fail "data written after the discard does not read back"
zs_alive
zs_umount

# ---- every algorithm, and the fstab form (SOURCE argument) --------------------------
for opts in algorithm=lz4 algorithm=zstd algorithm=zstd,level=9 algorithm=lzo; do
	ZS_SOURCE=zswapfs zs_mount "size=16M,$opts"
	alg=${opts#algorithm=}
	alg=${alg%%,*}
	v=$(zs_stat "$ZS_MNT" algorithm)
	[ "$v" = "$alg" ] || fail "$opts: stats say algorithm $v"
	zs_run 30 dd if="$ZS_TMP/mixed" of="$ZS_MNT/swap" bs=1M oflag=direct conv=notrunc status=none ||
		fail "$opts: write failed"
	zs_run 30 cmp <(dd if="$ZS_MNT/swap" iflag=direct bs=1M count=8 status=none) "$ZS_TMP/mixed" ||
		fail "$opts: data does not read back"
	orig=$(stat_int orig_data_size)
	compr=$(stat_int compr_data_size)
	log "$opts: memhog pages $orig -> $compr bytes"
	[ "$compr" -lt $((orig * 3 / 4)) ] || fail "$opts: $orig bytes compressed to $compr"
	zs_umount
done
exit 0
