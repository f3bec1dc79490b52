#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck source-path=SCRIPTDIR
#
# The swap file as a file: reads of never-written data, 512-byte aligned and
# unaligned writes against a reference copy, large requests, the end of the
# file, the stats and control files, same-filled and incompressible pages,
# mem_limit, and every algorithm.
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
io() { "$PYTHON" "$ZS_TMP/io.py" "$@"; }

# check_all: the whole swap file, read with O_DIRECT in 1 MiB requests,
# equals the reference.
check_all() {
	dd if="$ZS_MNT/swap" iflag=direct bs=1M status=none | cmp - "$REF" ||
		fail "$1: swap file content differs from the reference"
}

# dd_both SRC_SECTOR DST_SECTOR COUNT: a dd with 512-byte O_DIRECT writes, to
# the swap file and to the reference.
dd_both() {
	dd if="$SRC" of="$ZS_MNT/swap" bs=512 skip="$1" seek="$2" count="$3" \
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
[ "$(stat -c %s "$swap")" -eq "$SIZE" ] || fail "st_size is $(stat -c %s "$swap"), not $SIZE"
[ "$(stat -c %F:%a "$swap")" = "regular file:600" ] ||
	fail "swap is '$(stat -c %F:%a "$swap")', not a regular file with mode 600"
[ -f "$ZS_MNT/stats" ] || fail "no stats file"
[ -f "$ZS_MNT/control" ] || fail "no control file"
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
dd if="$swap" iflag=direct bs=512 skip=9 count=5 status=none |
	cmp - <(dd if="$REF" bs=512 skip=9 count=5 status=none) ||
	fail "512-byte direct read at sector 9 returned wrong data"

# ---- many random writes (any 512-aligned offset and length) ------------------
io random "$swap" "$REF" "$SRC" 400 $((48 * MIB)) 42 || fail "random writes"
check_all "after random writes"

# ---- large requests -------------------------------------------------------------
dd if="$SRC" of="$swap" bs=1M skip=4 seek=16 count=8 oflag=direct conv=notrunc status=none ||
	fail "dd bs=1M write failed"
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
if dd if="$SRC" of="$swap" bs=512 seek=$((SIZE / 512)) count=1 oflag=direct conv=notrunc \
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
	$1 == "fuse_transport" || $1 == "memcg" { next }
	$2 !~ /^[0-9]+$/ { exit 1 }' "$ZS_MNT/stats" ||
	fail "stats has a line that is not 'key integer': $(cat "$ZS_MNT/stats")"
if { echo 1 >"$ZS_MNT/stats"; } 2>/dev/null; then fail "writing the stats file succeeded"; fi

# fresh pages (56 MiB on was never written): 64 same-filled, 64 random, 64 text
same0=$(stat_int same_pages)
huge0=$(stat_int huge_pages)
orig0=$(stat_int orig_data_size)
stored0=$(stat_int pages_stored)
compr0=$(stat_int compr_data_size)
gen_data "$ZS_TMP/same" 64 same 4
dd if="$ZS_TMP/same" of="$swap" bs=256K seek=224 oflag=direct conv=notrunc status=none
dd if="$ZS_TMP/same" of="$REF" bs=256K seek=224 conv=notrunc status=none
same1=$(stat_int same_pages)
[ $((same1 - same0)) -eq 64 ] || fail "same_pages went from $same0 to $same1 after 64 same-filled pages"
dd if="$ZS_TMP/random" of="$swap" bs=256K seek=228 count=1 oflag=direct conv=notrunc status=none
dd if="$ZS_TMP/random" of="$REF" bs=256K seek=228 count=1 conv=notrunc status=none
huge1=$(stat_int huge_pages)
[ $((huge1 - huge0)) -eq 64 ] || fail "huge_pages went from $huge0 to $huge1 after 64 random pages"
compr1=$(stat_int compr_data_size)
dd if="$ZS_TMP/text" of="$swap" bs=256K seek=232 count=1 oflag=direct conv=notrunc status=none
dd if="$ZS_TMP/text" of="$REF" bs=256K seek=232 count=1 conv=notrunc status=none
compr2=$(stat_int compr_data_size)
orig2=$(stat_int orig_data_size)
stored2=$(stat_int pages_stored)
[ $((stored2 - stored0)) -eq 192 ] || fail "pages_stored went from $stored0 to $stored2 (192 new pages)"
[ $((orig2 - orig0)) -eq $((192 * 4096)) ] ||
	fail "orig_data_size went from $orig0 to $orig2 (192 new pages)"
if [ $((compr2 - compr1)) -le 0 ] || [ $((compr2 - compr1)) -ge $((64 * 4096 / 2)) ]; then
	fail "64 text pages took $((compr2 - compr1)) compressed bytes"
fi
[ $((compr1 - compr0)) -ge $((64 * 4096)) ] ||
	fail "64 random pages took only $((compr1 - compr0)) compressed bytes"
v=$(stat_int mem_used_total)
[ "$v" -ge "$(stat_int compr_data_size)" ] || fail "mem_used_total $v < compr_data_size"
check_all "after the stats pages"

# ---- control --------------------------------------------------------------------
echo compact >"$ZS_MNT/control" || fail "'compact' was refused"
if echo bogus >"$ZS_MNT/control" 2>/dev/null; then fail "'bogus' was accepted"; fi
if echo "compact now" >"$ZS_MNT/control" 2>/dev/null; then fail "'compact now' was accepted"; fi
check_all "after compact"
for key in failed_reads failed_writes; do
	v=$(stat_int "$key")
	[ "$v" -eq 0 ] || fail "$key is $v"
done
zs_alive
zs_umount

# ---- mem_limit ------------------------------------------------------------------
zs_mount size=64M,mem_limit=4M
swap=$ZS_MNT/swap
v=$(stat_int mem_limit)
[ "$v" -eq $((4 * MIB)) ] || fail "mem_limit reads $v"
gen_data "$ZS_TMP/random16" 4096 random 5
if dd if="$ZS_TMP/random16" of="$swap" bs=1M oflag=direct conv=notrunc 2>"$ZS_TMP/dd.err"; then
	fail "16 MiB of random data fit in mem_limit=4M"
fi
grep -q "No space left on device" "$ZS_TMP/dd.err" ||
	fail "writes beyond mem_limit did not fail with ENOSPC: $(cat "$ZS_TMP/dd.err")"
done_bytes=$(awk '/bytes/ && /copied/ { print $1 }' "$ZS_TMP/dd.err")
log "mem_limit=4M: $done_bytes bytes of random data stored before ENOSPC"
[ "${done_bytes:-0}" -gt 0 ] || fail "nothing could be written under mem_limit=4M"
cmp -n "$done_bytes" <(dd if="$swap" iflag=direct bs=1M status=none) "$ZS_TMP/random16" ||
	fail "data stored before ENOSPC does not read back"
v=$(stat_int failed_writes)
[ "$v" -gt 0 ] || fail "failed_writes is $v after ENOSPC"
v=$(stat_int mem_used_total)
[ "$v" -le $((4 * MIB)) ] || fail "mem_used_total $v exceeds mem_limit"
v=$(stat_int mem_used_max)
[ "$v" -le $((4 * MIB)) ] || fail "mem_used_max $v exceeds mem_limit"
# same-filled pages need no memory: they still go in
dd if="$ZS_TMP/same" of="$swap" bs=256K seek=200 oflag=direct conv=notrunc status=none ||
	fail "same-filled pages refused when the memory limit is reached"
# freeing space makes writes work again
fallocate --punch-hole --keep-size --offset 0 --length $((32 * MIB)) "$swap" ||
	fail "punching a hole failed"
dd if="$ZS_TMP/random16" of="$swap" bs=1M count=2 oflag=direct conv=notrunc status=none ||
	fail "writes still fail after discarding everything"
cmp -n $((2 * MIB)) <(dd if="$swap" iflag=direct bs=1M count=2 status=none) "$ZS_TMP/random16" ||
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
	dd if="$ZS_TMP/mixed" of="$ZS_MNT/swap" bs=1M oflag=direct conv=notrunc status=none ||
		fail "$opts: write failed"
	cmp <(dd if="$ZS_MNT/swap" iflag=direct bs=1M count=8 status=none) "$ZS_TMP/mixed" ||
		fail "$opts: data does not read back"
	orig=$(stat_int orig_data_size)
	compr=$(stat_int compr_data_size)
	log "$opts: memhog pages $orig -> $compr bytes"
	[ "$compr" -lt $((orig * 3 / 4)) ] || fail "$opts: $orig bytes compressed to $compr"
	zs_umount
done
exit 0
