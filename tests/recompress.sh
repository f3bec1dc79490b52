#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Idle recompression on a real mount with real process memory: fill the file
# with pages of running programs (python3, cc1plus), mark them idle,
# recompress to zstd through the control file, and check that every byte
# reads back and that mem_used_total falls by at least what zstd gains over
# lz4 on those pages (measured on a second, zstd mount), less arena overhead.
# Then a recompress pass runs while fio writes and verifies another part of
# the file (the test checks that the pass began after fio's writes and ended
# before fio did); bad commands are refused and change nothing.
set -eu
. "$(dirname "$0")/lib.sh"
require_fuse
require_root
MKCORPUS=${MKCORPUS:-$top_builddir/contrib/bench/mkcorpus}
[ -x "$MKCORPUS" ] || fail "mkcorpus not built: $MKCORPUS"
command -v fio >/dev/null || fail "fio is not installed"
make_tmpdir

MIB=$((1 << 20))

# read_back MOUNT BYTES: the first BYTES of MOUNT/swap, to stdout.
read_back() {
	zs_run 60 dd if="$1/swap" bs=1M count="$2" iflag=direct,count_bytes status=none
}

# stats_but_rss MOUNT: the stats file without the figures that move by
# themselves (the daemon's RSS; over io_uring, the stats reads are ring
# requests).
stats_but_rss() {
	zs_run 20 grep -vE '^(rss_bytes|uring_reqs) ' "$1/stats"
}

corpus=$ZS_TMP/corpus
"$MKCORPUS" -s 48M -p python,cc1plus -o "$corpus" >"$ZS_TMP/mkcorpus.out" 2>&1 ||
	{ cat "$ZS_TMP/mkcorpus.out" >&2; fail "mkcorpus failed"; }
bytes=$(stat -c %s "$corpus")
[ "$bytes" -ge $((32 << 20)) ] || fail "corpus too small: $bytes bytes"
log "corpus: $bytes bytes of real process memory"

# What zstd alone makes of these pages, for the expected gain.
zs_mount size=128M,algorithm=zstd,recompress.enabled=false
zs_run 60 dd if="$corpus" of="$ZS_MNT/swap" bs=1M oflag=direct status=none ||
	fail "writing the corpus failed"
zstd_bytes=$(zs_stat "$ZS_MNT" compr_data_size)
zs_umount

zs_mount size=128M,algorithm=lz4,recompress.enabled=false,compact.threshold=0
mnt=$ZS_MNT
zs_run 60 dd if="$corpus" of="$mnt/swap" bs=1M oflag=direct status=none ||
	fail "writing the corpus failed"
lz4_bytes=$(zs_stat "$mnt" compr_data_size)
used_before=$(zs_stat "$mnt" mem_used_total)
passes=$(zs_stat "$mnt" recompress_passes)

zs_ctl "$mnt" idle all || fail "'idle all' was refused"
zs_ctl "$mnt" recompress type=idle threshold=16 || fail "'recompress type=idle' was refused"
zs_stat_wait "$mnt" recompress_passes $((passes + 1)) 300
zs_stat_wait "$mnt" recompress_pending 0 300
compactions=$(zs_stat "$mnt" compactions)
zs_ctl "$mnt" compact || fail "'compact' was refused"
zs_stat_wait "$mnt" compactions $((compactions + 1)) 300

used_after=$(zs_stat "$mnt" mem_used_total)
compr_after=$(zs_stat "$mnt" compr_data_size)
[ "$(zs_stat "$mnt" recompressed)" -gt 0 ] || fail "no page was recompressed"
[ "$(zs_stat "$mnt" pages_zstd)" -gt 0 ] || fail "pages_zstd is 0 after recompression"
sum=$(( $(zs_stat "$mnt" bytes_lz4) + $(zs_stat "$mnt" bytes_zstd) + $(zs_stat "$mnt" bytes_lzo) ))
[ "$sum" = "$compr_after" ] || fail "bytes per codec ($sum) != compr_data_size ($compr_after)"
zs_run 60 cmp -n "$bytes" <(read_back "$mnt" "$bytes") "$corpus" ||
	fail "data differs after recompression"

gain=$((lz4_bytes - zstd_bytes))
# Arena overhead: the classes' rounding and partly used spans, a few % of
# what is stored (zsmalloc's is 3-5%), plus a partly used span per class.
allowance=$((used_before / 20 + (1 << 20)))
fell=$((used_before - used_after))
log "lz4 $lz4_bytes B, zstd alone $zstd_bytes B (gain $gain B); mem_used_total" \
	"$used_before -> $used_after (fell $fell B, allowance $allowance B)"
[ "$gain" -gt 0 ] || fail "zstd gained nothing over lz4 on real memory?"
[ "$fell" -ge $((gain - allowance)) ] ||
	fail "mem_used_total fell by $fell B, less than zstd's gain $gain B minus $allowance B"

# Requests during a pass: fio rewrites and verifies the upper half while
# the whole file is recompressed; the corpus half must stay intact too.
# fio is held to 16 MiB/s (about 4 s for its writes and its verification),
# and the pass is asked for once fio's writes are coming in: the pass must
# then have recompressed fio's fresh pages and ended while fio still runs.
passes=$(zs_stat "$mnt" recompress_passes)
recompressed=$(zs_stat "$mnt" recompressed)
wreqs=$(zs_stat "$mnt" write_reqs)
fio_args=(--name=during --filename="$mnt/swap" --offset=64M --size=32M --rw=randwrite --bs=4k
	--direct=1 --ioengine=psync --verify=crc32c --verify_fatal=1
	--buffer_compress_percentage=60 --refill_buffers --randrepeat=0)
(cd "$ZS_TMP" && zs_run 120 fio "${fio_args[@]}" --rate=16m --output="$ZS_TMP/fio.out") &
fio_pid=$!
for ((i = 0; i < 200; i++)); do
	[ "$(zs_stat "$mnt" write_reqs)" -lt $((wreqs + 1000)) ] || break
	sleep 0.05
done
kill -0 "$fio_pid" 2>/dev/null || fail "fio ended before its writes were seen"
zs_ctl "$mnt" recompress threshold=16 || fail "'recompress threshold=16' was refused"
for ((i = 0; i < 1200; i++)); do
	[ "$(zs_stat "$mnt" recompress_passes)" -gt "$passes" ] &&
		[ "$(zs_stat "$mnt" recompress_pending)" = 0 ] && break
	sleep 0.05
done
kill -0 "$fio_pid" 2>/dev/null ||
	fail "fio ended before the recompression pass did: they did not overlap"
[ "$(zs_stat "$mnt" recompress_passes)" -gt "$passes" ] || fail "the pass did not run"
[ "$(zs_stat "$mnt" recompressed)" -gt "$recompressed" ] ||
	fail "the pass during fio's writes recompressed nothing"
wait "$fio_pid" || { cat "$ZS_TMP/fio.out" >&2; fail "fio verify failed during recompression"; }
(cd "$ZS_TMP" && zs_run 120 fio "${fio_args[@]}" --verify_only --output="$ZS_TMP/fio2.out") ||
	{ cat "$ZS_TMP/fio2.out" >&2; fail "verify after the pass"; }
zs_run 60 cmp -n "$bytes" <(read_back "$mnt" "$bytes") "$corpus" ||
	fail "corpus half differs after the pass during I/O"
[ "$(zs_stat "$mnt" failed_reads)" = 0 ] || fail "failed_reads"

# A bad control command changes nothing: not one figure of the stats, not
# one byte of the file.
stats_but_rss "$mnt" >"$ZS_TMP/stats.before"
for bad in "recompress type=cold" "recompress max_pages=0" "recompress threshold=5000" \
	"recompress bogus=1" "recompress type=idle type=huge" "idle" "idle soon" "compact now"; do
	if zs_ctl "$mnt" "$bad" 2>/dev/null; then
		fail "control accepted '$bad'"
	fi
done
stats_but_rss "$mnt" >"$ZS_TMP/stats.after"
diff "$ZS_TMP/stats.before" "$ZS_TMP/stats.after" >&2 ||
	fail "refused commands changed the stats"
zs_run 60 cmp -n "$bytes" <(read_back "$mnt" "$bytes") "$corpus" ||
	fail "corpus differs after refused commands"
zs_umount
log "recompression: OK"
exit 0
