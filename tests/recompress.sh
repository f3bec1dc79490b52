#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Idle recompression on a real mount with real process memory: fill the file
# with pages of running programs (python3, cc1plus), mark them idle,
# recompress to zstd through the control file, and check that every byte
# reads back and that mem_used_total falls by at least what zstd gains over
# lz4 on those pages (measured on a second, zstd mount), less arena overhead.
# A second request while a pass is pending or running is refused (EBUSY):
# the first pass is paced (rate=) to last seconds on any machine, and is
# seen unfinished right after the second request.  Then a recompress pass
# runs while fio writes and verifies another part of the file, fio running
# again and again until the pass has ended (the test checks that the pass
# began after fio's writes and ended while fio still ran); bad commands are
# refused and change nothing; and `recompress type=huge` and
# `type=huge_idle` take only raw pages, and of those only the idle ones.
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

# ctl_twice MOUNT TEXT1 TEXT2 KEY...: write TEXT1, then TEXT2, to
# MOUNT/control, each in one write(2) of its own, microseconds apart, and
# read MOUNT/stats right after them; print the two answers ("ok" or the
# errno's name) and then the value of each KEY as that read found it, one
# a line.  What the daemon did between the writes shows in that read.
ctl_twice() {
	local mnt=$1
	shift
	zs_run 20 "$PYTHON" -c '
import errno, os, sys
ctl, stats, texts, keys = sys.argv[1], sys.argv[2], sys.argv[3:5], sys.argv[5:]
fd = os.open(ctl, os.O_WRONLY)
for text in texts:
    try:
        os.write(fd, text.encode() + b"\n")
        print("ok")
    except OSError as e:
        print(errno.errorcode.get(e.errno, e.errno))
with open(stats) as f:
    values = dict(line.split(None, 1) for line in f if " " in line)
for key in keys:
    print(values.get(key, "missing").strip())
' "$mnt/control" "$mnt/stats" "$@"
}

# stats_but_rss MOUNT: the stats file without the figures that move by
# themselves (the daemon's RSS; over io_uring, the stats reads are ring
# requests; what the reserve thread reads of the machine and decays each
# tick, reserve.h, and the reserve it sizes from that: after fio's writes
# its target falls with the decaying peak rate, and trims follow).
stats_but_rss() {
	zs_run 20 grep -vE '^(rss_bytes|uring_reqs|reserve_(peak_rate|refill_wait_us|pressure|mem_available|target_bytes|bytes|trimmed_bytes|refills|refill_bytes)) ' "$1/stats"
}

corpus=$ZS_TMP/corpus
"$MKCORPUS" -s 48M -p python,cc1plus -o "$corpus" >"$ZS_TMP/mkcorpus.out" 2>&1 ||
	{ cat "$ZS_TMP/mkcorpus.out" >&2; fail "mkcorpus failed"; }
bytes=$(stat -c %s "$corpus")
[ "$bytes" -ge $((32 << 20)) ] || fail "corpus too small: $bytes bytes"
log "corpus: $bytes bytes of real process memory"

# What zstd alone makes of these pages, for the expected gain.  No
# dictionary on either mount: training runs by itself once 2048 pages are
# stored (dict.sh tests it), so a pass could come at any moment and move
# the ratios and the stats this test compares.
zs_mount size=128M,algorithm=zstd,recompress.enabled=false,dict_train=off
zs_run 60 dd if="$corpus" of="$ZS_MNT/swap" bs=1M oflag=direct status=none ||
	fail "writing the corpus failed"
zstd_bytes=$(zs_stat "$ZS_MNT" compr_data_size)
zs_umount

zs_mount size=128M,algorithm=lz4,recompress.enabled=false,compact.threshold=0,dict_train=off
mnt=$ZS_MNT
zs_run 60 dd if="$corpus" of="$mnt/swap" bs=1M oflag=direct status=none ||
	fail "writing the corpus failed"
lz4_bytes=$(zs_stat "$mnt" compr_data_size)
used_before=$(zs_stat "$mnt" mem_used_total)
passes=$(zs_stat "$mnt" recompress_passes)

zs_ctl "$mnt" idle all || fail "'idle all' was refused"
# Two requests microseconds apart: the second finds the first pending or
# running and is refused.  The first pass is paced to RATE pages a second
# over the stored pages, so that it lasts 3 s or more however fast the
# machine; and the stats read right after the second request must show it
# unfinished (no pass counted yet, one pending), else the test proved
# nothing about the refusal.
stored=$(zs_stat "$mnt" pages_lz4)
rate=$((stored / 3 > 0 ? stored / 3 : 1))
mapfile -t answers < <(ctl_twice "$mnt" "recompress type=idle threshold=16 rate=$rate" \
	"recompress threshold=16" recompress_passes recompress_pending)
log "$stored pages at $rate a second: answers ${answers[0]-} ${answers[1]-}; then" \
	"recompress_passes ${answers[2]-} recompress_pending ${answers[3]-}"
[ "${answers[0]-}" = ok ] || fail "the first recompress request got ${answers[0]-nothing}"
[ "${answers[2]-}" = "$passes" ] && [ "${answers[3]-}" = 1 ] ||
	fail "the first pass ($stored pages at $rate a second) was not seen unfinished right" \
		"after the second request (recompress_passes ${answers[2]-}, was $passes;" \
		"recompress_pending ${answers[3]-}): the two did not overlap"
[ "${answers[1]-}" = EBUSY ] ||
	fail "a second request during a pass got ${answers[1]-nothing}, not EBUSY"
zs_stat_wait "$mnt" recompress_passes $((passes + 1)) 300
zs_stat_wait "$mnt" recompress_pending 0 300
[ "$(zs_stat "$mnt" recompress_passes)" -eq $((passes + 1)) ] ||
	fail "the refused request ran a pass too"
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
# fio is held to 16 MiB/s (about 4 s for its writes and its verification)
# and runs again and again, each run whole, until the test has seen the
# pass end, however long the pass takes.  The pass is asked for once fio's
# writes are coming in: it must then have recompressed fio's fresh pages
# and ended while fio still ran.
passes=$(zs_stat "$mnt" recompress_passes)
recompressed=$(zs_stat "$mnt" recompressed)
wreqs=$(zs_stat "$mnt" write_reqs)
fio_args=(--name=during --filename="$mnt/swap" --offset=64M --size=32M --rw=randwrite --bs=4k
	--direct=1 --ioengine=psync --verify=crc32c --verify_fatal=1
	--buffer_compress_percentage=60 --refill_buffers --randrepeat=0)
fio_stop=$ZS_TMP/fio.stop
# fio_runs: fio's run, again until $fio_stop exists; fails with the run
# that failed.
fio_runs() {
	local n=0
	while [ ! -e "$fio_stop" ]; do
		n=$((n + 1))
		(cd "$ZS_TMP" && zs_run 120 fio "${fio_args[@]}" --rate=16m --output="$ZS_TMP/fio.out") ||
			{ cat "$ZS_TMP/fio.out" >&2; log "fio run $n failed"; return 1; }
	done
	log "fio: $n runs"
}
# end_fio_runs: let the last run finish, and give its status.
end_fio_runs() { touch "$fio_stop"; wait "$fio_pid"; }
fio_runs &
fio_pid=$!
push_undo end_fio_runs
# fio_alive: the runs go on (a failed one ends them).
fio_alive() { kill -0 "$fio_pid" 2>/dev/null || fail "fio failed during recompression"; }
fio_writing() {
	fio_alive
	[ "$(zs_stat "$mnt" write_reqs)" -ge $((wreqs + 1000)) ]
}
zs_wait_until 60 "1000 of fio's writes on $mnt" fio_writing
zs_ctl "$mnt" recompress threshold=16 || fail "'recompress threshold=16' was refused"
pass_ended() {
	fio_alive
	[ "$(zs_stat "$mnt" recompress_passes)" -gt "$passes" ] &&
		[ "$(zs_stat "$mnt" recompress_pending)" = 0 ]
}
zs_wait_until 300 "the end of the recompression pass asked for during fio's writes" pass_ended
fio_alive
[ "$(zs_stat "$mnt" recompress_passes)" -gt "$passes" ] || fail "the pass did not run"
[ "$(zs_stat "$mnt" recompressed)" -gt "$recompressed" ] ||
	fail "the pass during fio's writes recompressed nothing"
drop_undo end_fio_runs
end_fio_runs || fail "fio verify failed during recompression"
(cd "$ZS_TMP" && zs_run 120 fio "${fio_args[@]}" --verify_only --output="$ZS_TMP/fio2.out") ||
	{ cat "$ZS_TMP/fio2.out" >&2; fail "verify after the pass"; }
zs_run 60 cmp -n "$bytes" <(read_back "$mnt" "$bytes") "$corpus" ||
	fail "corpus half differs after the pass during I/O"
[ "$(zs_stat "$mnt" failed_reads)" = 0 ] || fail "failed_reads"

# A bad control command changes nothing: not one figure of the stats, not
# one byte of the file.
stats_but_rss "$mnt" >"$ZS_TMP/stats.before"
for bad in "recompress type=cold" "recompress max_pages=0" "recompress threshold=5000" \
	"recompress bogus=1" "recompress type=idle type=huge" "recompress rate=0" \
	"recompress rate=1000001" "recompress rate=1 rate=2" "idle" "idle soon" "compact now"; do
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

# ---- type=huge and type=huge_idle ---------------------------------------------
# H1 and H2 are hex digits (lz4 stores them raw, zstd halves them), T text.
# H1 and T are marked idle, H2 is written a second later: huge_idle takes
# H1 only, huge then H2, and T (not raw) stays lz4 throughout.
log "recompress type=huge_idle and type=huge"
gen_data "$ZS_TMP/h1" 256 hex 61
gen_data "$ZS_TMP/t" 256 text 62
gen_data "$ZS_TMP/h2" 256 hex 63
cat "$ZS_TMP/h1" "$ZS_TMP/t" "$ZS_TMP/h2" >"$ZS_TMP/all"
zs_mount size=16M,algorithm=lz4,recompress.enabled=false,compact.threshold=0
mnt=$ZS_MNT
zs_run 30 dd if="$ZS_TMP/h1" of="$mnt/swap" bs=1M oflag=direct conv=notrunc status=none ||
	fail "writing H1 failed"
zs_run 30 dd if="$ZS_TMP/t" of="$mnt/swap" bs=1M seek=1 oflag=direct conv=notrunc status=none ||
	fail "writing T failed"
[ "$(zs_stat "$mnt" huge_pages)" -eq 256 ] ||
	fail "lz4 stored $(zs_stat "$mnt" huge_pages) of 256 hex pages raw"
zs_ctl "$mnt" idle all || fail "'idle all' was refused"
# `idle all` takes the current second too: H2 comes in the next one
sleep 1.1
zs_run 30 dd if="$ZS_TMP/h2" of="$mnt/swap" bs=1M seek=2 oflag=direct conv=notrunc status=none ||
	fail "writing H2 failed"

# recompress_now WORD...: a recompress request, and wait for its pass.
recompress_now() {
	local p
	p=$(zs_stat "$mnt" recompress_passes)
	zs_ctl "$mnt" recompress "$@" || fail "'recompress $*' was refused"
	zs_stat_wait "$mnt" recompress_passes $((p + 1)) 60
	zs_stat_wait "$mnt" recompress_pending 0 60
}
# expect_counts WHAT HUGE ZSTD: HUGE pages still raw (counted with lz4, the
# mount's codec, beside T's 256), ZSTD recompressed.
expect_counts() {
	local what=$1 huge=$2 zstd=$3
	if [ "$(zs_stat "$mnt" huge_pages)" -ne "$huge" ] ||
		[ "$(zs_stat "$mnt" recompressed)" -ne "$zstd" ] ||
		[ "$(zs_stat "$mnt" pages_zstd)" -ne "$zstd" ] ||
		[ "$(zs_stat "$mnt" pages_lz4)" -ne $((256 + huge)) ]; then
		fail "$what: $(zs_stats_line "$mnt" huge_pages recompressed pages_zstd pages_lz4)," \
			"expected $huge raw, $zstd zstd, $((256 + huge)) lz4"
	fi
}
recompress_now type=huge_idle threshold=16
expect_counts "type=huge_idle" 256 256
recompress_now type=huge threshold=16
expect_counts "type=huge" 0 512
zs_run 30 cmp "$ZS_TMP/all" <(read_back "$mnt" $((3 * MIB))) ||
	fail "data differs after type=huge_idle and type=huge"
zs_umount
log "recompression: OK"
exit 0
