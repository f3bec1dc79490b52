#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck source-path=SCRIPTDIR
#
# The backing file can be trusted with swapped memory, on real mounts.
#
# 1. Refused, and left exactly as it was (checksum, mode, size): a copy of
#    /etc/os-release named as the backing file, an existing file that others
#    may read, one with a second hard link, a file in a directory that
#    others may write (/var/tmp), and a file on a filesystem whose pages may
#    be swapped or that is served from user space: a fresh tmpfs, a fresh
#    ramfs, a second zswapfs mount (FUSE), ext4 on a loop device over a
#    zswapfs swap file, and ext4 on a loop device over an image on that
#    ext4 (the chain is followed).  The same ext4-on-loop over an image on
#    the disk is accepted.
# 2. Sealed by default: after `idle all` + `writeback all` of pages full of
#    PASSWORD=hunter2, the backing file holds no occurrence of it, is 0600
#    root's, and user nobody cannot open it; with writeback.encrypt=false
#    the string IS in the file (so this test can fail).  Without AES-NI
#    (masked for OpenSSL with OPENSSL_ia32cap) ChaCha20-Poly1305 is chosen.
# 3. Forged on disk while the daemon runs (O_DIRECT writes): a flipped data
#    byte, a flipped tag byte, an object copied over another, and an old
#    copy of the file put back after the pages were discarded, written with
#    new data and written back again: each page concerned reads EIO through
#    MNT/swap and is counted in stats, every other page reads right, no page
#    reads zeros, old or wrong data.  (A segment replayed at the same places
#    from an earlier opening: check_backing's test_replay.)
# 4. At exit the file keeps its header (and only that), and the next start
#    takes it again.
set -eu
. "$(dirname "$0")/lib.sh"

MIB=$((1 << 20))
SECRET=PASSWORD=hunter2

require_root
require_fuse
command -v mkfs.ext4 >/dev/null || skip "mkfs.ext4 is not installed"
command -v setpriv >/dev/null || skip "setpriv is not installed"
make_tmpdir

# fingerprint FILE: what must not change when a start is refused.
fingerprint() { echo "$(stat -c '%i %a %u %s %Y' "$1") $(sha256sum <"$1")"; }

# refused WORD PATH [OPTS]: a start with PATH as the backing file must fail
# with a message that contains WORD, leave nothing mounted, and leave PATH
# as it was (or not there, if it was not).
refused() {
	local word=$1 file=$2 opts=${3-} before=
	[ ! -e "$file" ] || before=$(fingerprint "$file")
	zs_start_refused "backing file $file" -o "size=16M,writeback.backing_file=$file$opts"
	[ "$ZS_RC" -ne 0 ] || fail "$file: the daemon started (status 0)"
	grep -qF -- "$word" "$ZS_LOG" || {
		cat "$ZS_LOG" >&2
		fail "$file: the message does not say '$word'"
	}
	if [ -n "$before" ]; then
		[ "$(fingerprint "$file")" = "$before" ] || fail "$file was changed by a refused start"
	else
		[ ! -e "$file" ] || fail "a refused start left $file behind"
	fi
	log "refused: $file: $(grep -F -- "$word" "$ZS_LOG" | head -n 1)"
}

# fs_mount TYPE DIR [DEV]: mount TYPE on a new directory DIR, unmounted at exit.
fs_mount() {
	mkdir -m 700 "$2"
	push_undo rmdir -- "$2"
	if [ "$1" = ext4 ]; then
		mount -t ext4 "$3" "$2" || fail "mounting ext4 on $3 failed"
	else
		mount -t "$1" -o mode=0700 "$1" "$2" || fail "mounting $1 on $2 failed"
	fi
	push_undo umount "$2"
}

# loop_ext4 FILE DIR: ext4 on a new loop device over FILE, mounted on DIR.
# Sets LOOP.
loop_ext4() {
	LOOP=$(losetup --find --show "$1") || fail "losetup on $1 failed"
	push_undo losetup -d "$LOOP"
	mkfs.ext4 -q "$LOOP" || fail "mkfs.ext4 on $LOOP failed"
	fs_mount ext4 "$2" "$LOOP"
}

# ---- 1. refused, untouched ------------------------------------------------------

log "part 1: refusals"
back=$ZS_TMP/back
mkdir -m 755 "$back"

cp /etc/os-release "$back/os-release"
chmod 600 "$back/os-release"
refused "not a zswapfs backing file" "$back/os-release"
: >"$back/readable"
chmod 644 "$back/readable"
refused "readable by others" "$back/readable"
: >"$back/linked"
chmod 600 "$back/linked"
ln "$back/linked" "$back/link2"
refused "2 hard links" "$back/linked"
rm "$back/link2" "$back/readable"
refused "writable by others" "/var/tmp/zswapfs-backing-trust.$$"

fs_mount tmpfs "$ZS_TMP/tmpfs"
refused "on tmpfs" "$ZS_TMP/tmpfs/backing"
fs_mount ramfs "$ZS_TMP/ramfs"
refused "on ramfs" "$ZS_TMP/ramfs/backing"

# A second zswapfs: FUSE itself, then ext4 on a loop device over its swap
# file, then ext4 on a loop over an image inside that ext4.
zs_mount size=64M
low=$ZS_MNT
refused "on a FUSE filesystem" "$low/backing"
loop_ext4 "$low/swap" "$ZS_TMP/ext_fuse"
loop1=$LOOP
refused "on loop device ${loop1#/dev/}, whose file $low/swap is on a FUSE filesystem" \
	"$ZS_TMP/ext_fuse/backing"
truncate -s 16M "$ZS_TMP/ext_fuse/inner.img"
loop_ext4 "$ZS_TMP/ext_fuse/inner.img" "$ZS_TMP/ext_inner"
refused "whose file $ZS_TMP/ext_fuse/inner.img is on loop device ${loop1#/dev/}" \
	"$ZS_TMP/ext_inner/backing"
# The same set-up over an image on the disk is fine.
truncate -s 16M "$ZS_TMP/disk.img"
loop_ext4 "$ZS_TMP/disk.img" "$ZS_TMP/ext_disk"
zs_mount "size=16M,writeback.backing_file=$ZS_TMP/ext_disk/backing"
zs_umount
[ "$(stat -c %s "$ZS_TMP/ext_disk/backing")" -eq 4096 ] ||
	fail "the backing file on ext4 over a disk image was not left at its header"

# ---- 2. sealed by default ---------------------------------------------------------

# secret_pages FILE NPAGES SEED: pages that each hold the secret many times
# with the page number, then 2 KiB of random bytes: about 2.1 KiB each once
# compressed, so that a few hundred fill a segment.
secret_pages() {
	"$PYTHON" - "$@" <<'EOF'
import random, sys
path, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
with open(path, "wb") as f:
    for i in range(n):
        f.write((b"PASSWORD=hunter2 page %06d; " % i * 100)[:2048] + rng.randbytes(2048))
EOF
}

# occurrences FILE: how many times the secret is in FILE.
# (grep finds nothing: status 1, which pipefail would make the pipeline's)
occurrences() { { grep -a -o -F "$SECRET" "$1" || true; } | wc -l; }

# write_back MOUNT NPAGES: every page of the mount to the backing file.
write_back() {
	echo "idle all" >"$1/control" || fail "'idle all' was refused"
	echo "writeback all" >"$1/control" || fail "'writeback all' was refused"
	zs_stat_wait "$1" writeback_pending 0
	[ "$(zs_stat "$1" bd_count)" -eq "$2" ] ||
		fail "bd_count is $(zs_stat "$1" bd_count) after writeback all, not $2"
}

log "part 2: the secret"
NPAGES=1024
secret_pages "$ZS_TMP/secret" $NPAGES 1
[ "$(occurrences "$ZS_TMP/secret")" -ge $((NPAGES * 50)) ] || fail "secret_pages is broken"

zs_mount "size=64M,writeback.backing_file=$back/backing"
mnt=$ZS_MNT
cipher=$(zs_stat "$mnt" backing_cipher)
case $cipher in
aes-256-gcm | chacha20-poly1305) ;;
*) fail "backing_cipher is '$cipher' by default" ;;
esac
dd if="$ZS_TMP/secret" of="$mnt/swap" bs=1M oflag=direct conv=notrunc status=none
write_back "$mnt" $NPAGES
n=$(occurrences "$back/backing")
log "$cipher: $(stat -c %s "$back/backing") bytes of backing file, the secret $n times in it"
[ "$n" -eq 0 ] || fail "the secret is $n times in the sealed backing file"
[ "$(stat -c '%a %U' "$back/backing")" = "600 root" ] ||
	fail "the backing file is $(stat -c '%a %U' "$back/backing"), not 600 root"
if setpriv --reuid=65534 --regid=65534 --clear-groups head -c 1 "$back/backing" \
	>/dev/null 2>&1; then
	fail "user nobody could read the backing file"
fi
cmp "$ZS_TMP/secret" <(dd if="$mnt/swap" bs=1M count=4 iflag=direct status=none) ||
	fail "the sealed pages do not read back as written"

# ---- 3. forged while the daemon runs --------------------------------------------------

# objects FILE: "LOC SLOT LEN SEGMENT" of each object in the backing file,
# from the headers' plain fields (magic, slot, len), segment by segment.
objects() {
	"$PYTHON" - "$1" <<'EOF'
import struct, sys
SEG, HDR, MAGIC = 1 << 20, 32, 0x4b42575a
data = open(sys.argv[1], "rb").read()
for seg in range((len(data) + SEG - 1) // SEG):
    pos = 4096 if seg == 0 else 0
    while pos + HDR <= SEG:
        at = seg * SEG + pos
        if at + HDR > len(data):
            break
        magic, crc, slot, ln = struct.unpack_from("<IIIH", data, at)
        if magic != MAGIC or not 0 < ln <= 4096:
            break
        print(at, slot, ln, seg)
        pos += (HDR + ln + 15) & ~15
EOF
}

# forge FILE OFFSET SRC|xor:MASK LEN: change LEN bytes of FILE at OFFSET with
# O_DIRECT writes of whole blocks (so the daemon's O_DIRECT reads see them at
# once): xor:MASK flips bits, a number copies LEN bytes from that offset.
forge() {
	"$PYTHON" - "$@" <<'EOF'
import mmap, os, sys
path, off, how, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
fd = os.open(path, os.O_RDWR | os.O_DIRECT)
def blocks(start, length):
    first, last = start // 4096 * 4096, (start + length + 4095) // 4096 * 4096
    buf = mmap.mmap(-1, last - first)
    os.preadv(fd, [buf], first)
    return first, buf
if how.startswith("xor:"):
    new = bytes(b ^ int(how[4:], 0) for b in open(path, "rb").read()[off:off + n])
else:
    first, buf = blocks(int(how), n)
    new = buf[int(how) - first:int(how) - first + n]
first, buf = blocks(off, n)
buf[off - first:off - first + n] = new
os.pwritev(fd, [buf], first)
os.close(fd)
EOF
}

# page_states FILE REF: read every page of REF's size from FILE, one O_DIRECT
# read each; print how many were ok (as REF), eio, zero, bad (anything
# else), then the EIO page numbers (comma-separated, or -).
page_states() {
	"$PYTHON" - "$@" <<'EOF'
import errno, mmap, os, sys
path, ref = sys.argv[1], open(sys.argv[2], "rb").read()
count = {"ok": 0, "eio": 0, "zero": 0, "bad": 0}
eio = []
fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
buf = mmap.mmap(-1, 4096)
for i in range(len(ref) // 4096):
    want = ref[i * 4096:(i + 1) * 4096]
    try:
        n = os.preadv(fd, [buf], i * 4096)
        got = buf[:n]
        state = "ok" if got == want else "zero" if got == bytes(4096) else "bad"
    except OSError as e:
        state = "eio" if e.errno == errno.EIO else "bad"
    count[state] += 1
    if state == "eio":
        eio.append(str(i))
os.close(fd)
print(count["ok"], count["eio"], count["zero"], count["bad"], ",".join(eio) or "-")
EOF
}

log "part 3: forged objects"
objects "$back/backing" >"$ZS_TMP/objects"
[ "$(wc -l <"$ZS_TMP/objects")" -eq $NPAGES ] ||
	fail "found $(wc -l <"$ZS_TMP/objects") objects in the backing file, not $NPAGES"
# The last segment is the one still open: its objects are read from the
# daemon's buffer, not from the disk.  The victims are in the closed ones.
open_seg=$(awk 'END { print $4 }' "$ZS_TMP/objects")
[ "$open_seg" -ge 2 ] || fail "the pages filled only $((open_seg + 1)) segment(s)"
# A data byte, a tag byte, and an object copied over a longer one (a whole,
# sealed object of another page at its place).
read -r loc_a slot_a len_a _ < <(sed -n 100p "$ZS_TMP/objects")
read -r loc_b slot_b len_b _ < <(sed -n 250p "$ZS_TMP/objects")
read -r loc_c slot_c len_c _ < <(sed -n 300p "$ZS_TMP/objects")
read -r loc_d slot_d len_d _ < <(awk -v c="$len_c" -v o="$open_seg" \
	'NR > 400 && $3 >= c && $4 < o { print; exit }' "$ZS_TMP/objects")
[ -n "${loc_d-}" ] || fail "no object in a closed segment as long as object 300"
forge "$back/backing" $((loc_a + 32 + len_a / 2)) xor:0x20 1
forge "$back/backing" $((loc_b + 16 + 5)) xor:0x01 1
forge "$back/backing" "$loc_d" "$loc_c" $((32 + len_c))
read0=$(zs_stat "$mnt" backing_read_errors)
auth0=$(zs_stat "$mnt" backing_auth_failures)
failed0=$(zs_stat "$mnt" failed_reads)
read -r ok eio zero bad eio_pages < <(page_states "$mnt/swap" "$ZS_TMP/secret")
want=$(printf '%s\n' "$slot_a" "$slot_b" "$slot_d" | sort -n | paste -sd,)
log "forged pages $want: ok $ok, eio $eio ($eio_pages), zero $zero, bad $bad;" \
	"$(zs_stats_line "$mnt" backing_read_errors backing_auth_failures failed_reads)"
[ "$zero" -eq 0 ] && [ "$bad" -eq 0 ] || fail "forged objects read as data: zero $zero, bad $bad"
[ "$eio_pages" = "$want" ] || fail "pages $eio_pages read EIO, expected exactly $want"
[ "$ok" -eq $((NPAGES - 3)) ] || fail "only $ok pages read right"
[ $(($(zs_stat "$mnt" backing_read_errors) - read0)) -eq 3 ] ||
	fail "backing_read_errors rose from $read0 to $(zs_stat "$mnt" backing_read_errors), not by 3"
[ $(($(zs_stat "$mnt" failed_reads) - failed0)) -eq 3 ] || fail "failed_reads did not rise by 3"
# The copied object is another page's (its slot is in the header): refused
# before its tag is looked at.  The other two fail their tags.
[ $(($(zs_stat "$mnt" backing_auth_failures) - auth0)) -eq 2 ] ||
	fail "backing_auth_failures rose from $auth0 to $(zs_stat "$mnt" backing_auth_failures), not by 2"

# An old copy of the file put back, after the pages were discarded, written
# with new data and written back again: a page must read its new data or
# EIO, never the old.
cp "$back/backing" "$ZS_TMP/old"
fallocate --punch-hole --keep-size --offset 0 --length $((NPAGES * 4096)) "$mnt/swap" ||
	fail "discarding the swap file's pages failed"
zs_stat_wait "$mnt" backing_bytes_live 0
secret_pages "$ZS_TMP/secret2" $NPAGES 2
dd if="$ZS_TMP/secret2" of="$mnt/swap" bs=1M oflag=direct conv=notrunc status=none
write_back "$mnt" $NPAGES
# Segments 0 and 1 were punched by the discard; the pages went first to the
# rest of segment 2, still open, then to 0, then to 1: segment 0 is closed
# (on disk only) if segment 1 has objects.
objects "$back/backing" >"$ZS_TMP/objects2"
awk '$4 == 1' "$ZS_TMP/objects2" | grep -q . || fail "segment 1 was not used again"
seg0_pages=$(awk '$4 == 0 { print $2 }' "$ZS_TMP/objects2" | sort -n | paste -sd,)
[ -n "$seg0_pages" ] || fail "segment 0 was not used again"
# the old bytes over everything after the header, with O_DIRECT
"$PYTHON" - "$ZS_TMP/old" "$back/backing" <<'EOF' || fail "putting the old file back failed"
import mmap, os, sys
old = open(sys.argv[1], "rb").read()[4096:]
fd = os.open(sys.argv[2], os.O_WRONLY | os.O_DIRECT)
buf = mmap.mmap(-1, (len(old) + 4095) // 4096 * 4096)
buf[:len(old)] = old
os.pwritev(fd, [buf], 4096)
os.close(fd)
EOF
read0=$(zs_stat "$mnt" backing_read_errors)
read -r ok eio zero bad eio_pages < <(page_states "$mnt/swap" "$ZS_TMP/secret2")
log "old copy put back: ok $ok, eio $eio, zero $zero, bad $bad;" \
	"$(zs_stats_line "$mnt" backing_read_errors backing_auth_failures)"
[ "$zero" -eq 0 ] && [ "$bad" -eq 0 ] || fail "the old copy was read: zero $zero, bad $bad"
# Every page of segment 0 (pages in the segment still open are read from
# the daemon's buffer, and the new file reaches further than the old one).
comm -23 <(tr , '\n' <<<"$seg0_pages" | sort) <(tr , '\n' <<<"$eio_pages" | sort) |
	grep -q . && fail "pages of segment 0 read right over the old copy"
[ $(($(zs_stat "$mnt" backing_read_errors) - read0)) -eq "$eio" ] ||
	fail "backing_read_errors did not count the $eio pages"
zs_alive

# ---- 4. the header stays, the next start takes the file -----------------------------

zs_umount
[ "$(stat -c %s "$back/backing")" -eq 4096 ] || fail "the backing file was not truncated to 4096"
[ "$(head -c 16 "$back/backing")" = "zswapfs backing" ] || fail "the header is gone"
before=$(stat -c %i "$back/backing")

# ---- 2b. not sealed, on request; ChaCha20 without AES-NI ------------------------------

log "part 2b: writeback.encrypt=false"
zs_mount "size=64M,writeback.backing_file=$back/backing,writeback.encrypt=false"
mnt=$ZS_MNT
[ "$(stat -c %i "$back/backing")" = "$before" ] || fail "the backing file was replaced"
[ "$(zs_stat "$mnt" backing_cipher)" = none ] || fail "backing_cipher is not none"
dd if="$ZS_TMP/secret" of="$mnt/swap" bs=1M oflag=direct conv=notrunc status=none
write_back "$mnt" $NPAGES
n=$(occurrences "$back/backing")
log "not sealed: the secret $n times in the backing file"
[ "$n" -ge $NPAGES ] || fail "unsealed, the secret is only $n times in the backing file"
cmp "$ZS_TMP/secret" <(dd if="$mnt/swap" bs=1M count=4 iflag=direct status=none) ||
	fail "the unsealed pages do not read back as written"
# A CRC still catches a flipped byte (in segment 0, closed by now).
read -r loc_a slot_a len_a _ < <(objects "$back/backing" | sed -n 100p)
forge "$back/backing" $((loc_a + 32 + len_a / 2)) xor:0x20 1
read -r ok eio zero bad eio_pages < <(page_states "$mnt/swap" "$ZS_TMP/secret")
[ "$eio_pages" = "$slot_a" ] && [ "$zero" -eq 0 ] && [ "$bad" -eq 0 ] ||
	fail "unsealed, a flipped byte: ok $ok, eio $eio ($eio_pages), zero $zero, bad $bad"
[ "$(zs_stat "$mnt" backing_auth_failures)" -eq 0 ] || fail "auth failures without sealing"
zs_umount

if [ "$(uname -m)" = x86_64 ] && grep -qw aes /proc/cpuinfo; then
	# OpenSSL's own switch: bits 57 (AES-NI) and 33 (PCLMULQDQ) off.
	OPENSSL_ia32cap="~0x200000200000000" zs_mount "size=16M,writeback.backing_file=$back/backing"
	[ "$(zs_stat "$ZS_MNT" backing_cipher)" = chacha20-poly1305 ] ||
		fail "without AES-NI, backing_cipher is $(zs_stat "$ZS_MNT" backing_cipher)"
	zs_umount
	log "without AES-NI: chacha20-poly1305"
fi
log "backing trust: OK"
exit 0
