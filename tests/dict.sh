#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Compression dictionaries on a live mount (no swap: file I/O on MOUNT/swap).
#   1. dict_train=off: memhog's pages, the `train` command, more pages with
#      the new dictionary, writeback of some, every byte read back; the
#      ratio of pages with the dictionary beats that of pages without (the
#      figure is logged); `zswapctl dict MOUNT save PATH` writes it 0600.
#   2. A remount with dict=PATH starts with it (generation 1): new pages use
#      it and read back.
#   3. A missing, empty or non-dictionary file is refused, naming it.
#   4. dict_train=auto trains on its own once enough pages are stored.
#   5. Training under fio --verify loses nothing: fio writes and verifies
#      (verify_backlog: reads run beside the writes), its job run again and
#      again until the test has seen what it waits for, while `train` is
#      asked every half second, and memhog pages are written once the first
#      dictionary is current; fio's verify passes, so does a verify-only
#      run afterwards, the memhog pages read back, and at least one pass
#      made a dictionary current while fio ran.
# After a training pass no thread of the daemon is left in the idle class
# (field 41 of stat, policy 5), nor below the request threads but the
# policy thread: the dictionary thread samples under slot locks, and
# without CAP_SYS_NICE a thread cannot come back up (dicttrain.c).
set -eu
. "$(dirname "$0")/lib.sh"

ZSWAPCTL=${ZSWAPCTL:-$top_builddir/src/zswapctl}
[ -x "$ZSWAPCTL" ] || fail "zswapctl not built: $ZSWAPCTL"

require_root
require_fuse
require_memhog
command -v fio >/dev/null || fail "fio is not installed"
make_tmpdir

MIB=$((1 << 20))
OPTS="size=128M,recompress.enabled=false,compact.threshold=0"

# ratio PAGES BYTES: PAGES * 4096 / BYTES with three decimals.
ratio() { awk -v p="$1" -v b="$2" 'BEGIN { printf "%.3f", b ? p * 4096 / b : 0 }'; }

# put FILE OFFSET_MIB: write FILE into the swap file at OFFSET_MIB.
put() {
	zs_run 60 dd if="$1" of="$ZS_MNT/swap" bs=1M seek="$2" oflag=direct conv=notrunc \
		status=none || fail "writing $1 at $2 MiB failed"
}

# same_as FILE OFFSET_MIB: the swap file holds FILE at OFFSET_MIB.
same_as() {
	local n=$(($(stat -c %s "$1") / MIB))
	zs_run 60 cmp "$1" <(dd if="$ZS_MNT/swap" bs=1M skip="$2" count="$n" iflag=direct \
		status=none) || fail "$1 does not read back at $2 MiB"
}

a=$ZS_TMP/a
b=$ZS_TMP/b
"$MEMHOG" --size 32 --seed 121 --dump "$a"
"$MEMHOG" --size 32 --seed 122 --dump "$b"

log "part 1: train on command, writeback, save"
zs_mount "$OPTS,dict_train=off,writeback.backing_file=$ZS_TMP/backing,writeback.enabled=false"
put "$a" 0
[ "$(zs_stat "$ZS_MNT" dict_generation)" = 0 ] || fail "a dictionary before any training"
nd_pages=$(zs_stat "$ZS_MNT" nodict_pages)
nd_bytes=$(zs_stat "$ZS_MNT" nodict_data_size)
[ "$nd_pages" -ge 2048 ] || fail "only $nd_pages compressed pages from 32 MiB of memhog pages"
zs_ctl "$ZS_MNT" train || fail "train was refused"
zs_stat_wait "$ZS_MNT" dict_train_pending 0 30
[ "$(zs_stat "$ZS_MNT" dict_trainings)" = 1 ] ||
	fail "training made no dictionary current: $(zs_stats_line "$ZS_MNT" dict_train_attempts \
		dict_ratio_before dict_ratio_after)"
[ "$(zs_stat "$ZS_MNT" dict_generation)" = 1 ] || fail "dict_generation is not 1 after training"
before=$(zs_stat "$ZS_MNT" dict_ratio_before)
after=$(zs_stat "$ZS_MNT" dict_ratio_after)
[ "$after" -gt "$before" ] || fail "held-out ratio $after (x1000) not above $before"
log "training: held-out sample pages $before -> $after (x1000), $(zs_stat "$ZS_MNT" dict_bytes) bytes, $(zs_stat "$ZS_MNT" dict_train_ms) ms"
for task in /proc/"$ZS_PID"/task/*; do
	read -r -a st < "$task/stat"
	# fields after "pid (comm)": comm has no blanks here; nice is 19, policy 41
	[ "${st[40]}" != 5 ] || fail "thread $(cat "$task/comm") is left in SCHED_IDLE after training"
	[ "$(cat "$task/comm")" = zswapfs-policy ] || [ "${st[18]}" = "$(awk '{ print $19 }' \
		"/proc/$ZS_PID/stat")" ] || fail "thread $(cat "$task/comm") runs at nice ${st[18]}"
done

put "$b" 32
d_pages=$(zs_stat "$ZS_MNT" dict_pages)
d_bytes=$(zs_stat "$ZS_MNT" dict_data_size)
[ "$d_pages" -ge 2048 ] || fail "only $d_pages pages written with the dictionary"
[ "$(zs_stat "$ZS_MNT" dict_pages_current)" -eq "$d_pages" ] ||
	fail "dict_pages_current $(zs_stat "$ZS_MNT" dict_pages_current) != dict_pages $d_pages"
r0=$(ratio "$nd_pages" "$nd_bytes")
r1=$(ratio "$d_pages" "$d_bytes")
gain=$(awk -v a="$r0" -v b="$r1" 'BEGIN { printf "%.2f", (b / a - 1) * 100 }')
log "lz4 on memhog pages: $r0 without a dictionary (seed 121), $r1 with it (seed 122): $gain %"
awk -v g="$gain" 'BEGIN { exit !(g > 0) }' || fail "the dictionary did not improve the ratio ($gain %)"

# Written back with their generation: the pages leave RAM, the generation
# stays theirs.
zs_ctl "$ZS_MNT" writeback all || fail "writeback refused"
zs_stat_wait "$ZS_MNT" writeback_pending 0
[ "$(zs_stat "$ZS_MNT" bd_count)" -gt 0 ] || fail "nothing was written back"
[ "$(zs_stat "$ZS_MNT" dict_pages)" -lt "$d_pages" ] ||
	fail "no page of the dictionary's was written back"
[ "$(zs_stat "$ZS_MNT" dict_pages_current)" -eq "$d_pages" ] ||
	fail "written back, pages lost their generation: $(zs_stats_line "$ZS_MNT" dict_pages_current)"
same_as "$a" 0
same_as "$b" 32
[ "$(zs_stat "$ZS_MNT" failed_reads)" = 0 ] || fail "failed_reads after reading back"
[ "$(zs_stat "$ZS_MNT" bd_reads)" -gt 0 ] || fail "no page was read from the backing file"

saved=$ZS_TMP/dict.saved
zs_run 30 "$ZSWAPCTL" dict "$ZS_MNT" save "$saved" || fail "zswapctl dict save failed"
[ -s "$saved" ] || fail "dict save wrote nothing"
[ "$(stat -c %a "$saved")" = 600 ] || fail "the saved dictionary has mode $(stat -c %a "$saved")"
[ "$(stat -c %s "$saved")" = "$(zs_stat "$ZS_MNT" dict_bytes)" ] ||
	fail "the saved dictionary is not dict_bytes long"
# A relative PATH is from zswapctl's directory.
(cd "$ZS_TMP" && zs_run 30 "$ZSWAPCTL" dict "$ZS_MNT" save rel.dict) ||
	fail "zswapctl dict save with a relative path failed"
cmp "$saved" "$ZS_TMP/rel.dict" || fail "the two saves differ"
zs_umount

log "part 2: a remount starts with the saved dictionary"
zs_mount "$OPTS,dict_train=off,dict=$saved"
[ "$(zs_stat "$ZS_MNT" dict_generation)" = 1 ] || fail "no dictionary after dict=$saved"
put "$b" 0
d2_pages=$(zs_stat "$ZS_MNT" dict_pages)
d2_bytes=$(zs_stat "$ZS_MNT" dict_data_size)
[ "$d2_pages" -ge 2048 ] || fail "only $d2_pages pages written with the loaded dictionary"
r2=$(ratio "$d2_pages" "$d2_bytes")
[ "$r2" = "$r1" ] || fail "the same pages with the saved dictionary: $r2, not $r1"
same_as "$b" 0
zs_umount

log "part 3: bad dictionary files are refused, by name"
refused() {
	local what=$1 file=$2
	zs_start_refused "$what" -o "$OPTS,dict=$file"
	[ "$ZS_RC" -ne 0 ] || fail "$what: the daemon exited 0"
	grep -qF -- "$file" "$ZS_LOG" || { cat "$ZS_LOG" >&2; fail "$what: the message does not name $file"; }
}
refused "a missing file" "$ZS_TMP/no-such-dict"
: >"$ZS_TMP/empty.dict"
refused "an empty file" "$ZS_TMP/empty.dict"
# a zstd frame: a compressed file, not a dictionary
printf '\x28\xb5\x2f\xfd\x04\x00\x01\x00\x00' >"$ZS_TMP/frame.dict"
refused "a zstd frame" "$ZS_TMP/frame.dict"
zs_start_refused "lzo with a dictionary" -o "$OPTS,algorithm=lzo,dict=$saved"
[ "$ZS_RC" -ne 0 ] || fail "lzo took a dictionary"

log "part 4: dict_train=auto trains on its own"
zs_mount "$OPTS"
put "$a" 0
zs_stat_wait "$ZS_MNT" dict_generation 1 30
put "$b" 32
[ "$(zs_stat "$ZS_MNT" dict_pages)" -gt 0 ] || fail "no page used the trained dictionary"
same_as "$a" 0
same_as "$b" 32
zs_umount

log "part 5: training under fio --verify loses nothing"
zs_mount "$OPTS,dict_train=auto"
put "$a" 0	# pages a dictionary helps: the samples are mostly these
# Half-compressible blocks, rewritten with each generation as it comes;
# verify_backlog reads blocks back while others are written.  A rate, so
# that the idle-priority trainer gets a CPU even on a busy machine.
cat >"$ZS_TMP/train.fio" <<'FIO'
[train]
ioengine=psync
direct=1
rw=randwrite
bs=4k
offset=64M
size=32M
loops=4
rate_iops=5000
buffer_compress_percentage=50
buffer_compress_chunk=512
refill_buffers
verify=crc32c
verify_backlog=512
do_verify=1
verify_fatal=1
verify_dump=0
exitall_on_error=1
verify_state_save=0
fallocate=none
invalidate=0
FIO
# How long a training pass has to end under fio, on the slowest machine.
TRAIN_WAIT_S=300
# fio's job is run whole, again and again until $fio_stop exists: fio runs
# for as long as training takes, and each run verifies all it wrote.
# Status 1: a run failed; 2: a run reported errors.
fio_stop=$ZS_TMP/fio.stop
fio_runs() {
	local n=0
	while [ ! -e "$fio_stop" ]; do
		n=$((n + 1))
		(cd "$ZS_TMP" && zs_run 300 fio --filename="$ZS_MNT/swap" \
			--output="$ZS_TMP/train.out" "$ZS_TMP/train.fio") ||
			{ log "fio run $n failed"; return 1; }
		if grep -E 'err= *[1-9]|verify: bad' "$ZS_TMP/train.out" >&2; then
			log "fio run $n reported errors"
			return 2
		fi
	done
	log "fio: $n runs"
}
# end_fio_runs: let the last run finish, and give the runs' status.
end_fio_runs() { touch "$fio_stop"; wait "$fio_pid"; }
fio_runs &
fio_pid=$!
push_undo end_fio_runs
asked=0 b_gen=''
deadline=$((SECONDS + TRAIN_WAIT_S))
while kill -0 "$fio_pid" 2>/dev/null; do
	# What the runs go on for: a dictionary made current, memhog pages
	# written under it, and more than one train command taken.  The last
	# run then ends as any other, train still asked meanwhile.
	if [ -n "$b_gen" ] && [ "$asked" -gt 1 ]; then
		touch "$fio_stop"
	elif [ "$SECONDS" -ge "$deadline" ]; then
		fail "within $TRAIN_WAIT_S s of fio's writes: $asked train command(s) taken," \
			"memhog pages written under ${b_gen:+generation }${b_gen:-no dictionary}" \
			"($(zs_stats_line "$ZS_MNT" dict_train_attempts dict_trainings dict_train_ms))"
	fi
	# EBUSY while a pass waits or runs: the next try comes soon enough
	zs_ctl "$ZS_MNT" train 2>/dev/null && asked=$((asked + 1))
	# pages a dictionary changes much, under a generation that the next
	# passes replace
	if [ -z "$b_gen" ] && [ "$(zs_stat "$ZS_MNT" dict_trainings)" -gt 0 ]; then
		b_gen=$(zs_stat "$ZS_MNT" dict_generation)
		put "$b" 32
	fi
	sleep 0.5
done
trained=$(zs_stat "$ZS_MNT" dict_trainings)	# before any pass after fio's end
drop_undo end_fio_runs
rc=0
end_fio_runs || rc=$?
[ "$rc" != 2 ] || fail "fio reported errors under training"
[ "$rc" = 0 ] || { cat "$ZS_TMP/train.out" >&2; fail "fio --verify failed under training"; }
log "under fio: $asked train commands taken, $trained dictionaries made current" \
	"($(zs_stats_line "$ZS_MNT" dict_train_attempts dict_generation dict_train_ms))"
[ "$trained" -gt 0 ] || fail "no training pass made a dictionary current while fio ran"
[ "$asked" -gt 1 ] || fail "only $asked train command(s) taken while fio ran"
[ -n "$b_gen" ] || fail "no dictionary became current while fio ran"
if ! (cd "$ZS_TMP" && zs_run 120 fio --filename="$ZS_MNT/swap" --output="$ZS_TMP/train.out" \
	--verify_only "$ZS_TMP/train.fio") ||
	grep -E 'err= *[1-9]|verify: bad' "$ZS_TMP/train.out" >&2; then
	cat "$ZS_TMP/train.out" >&2
	fail "fio's blocks do not read back after training"
fi
log "memhog pages written under generation $b_gen, now $(zs_stat "$ZS_MNT" dict_generation)"
same_as "$a" 0
same_as "$b" 32
for key in failed_reads failed_writes; do
	[ "$(zs_stat "$ZS_MNT" "$key")" = 0 ] || fail "$key: $(zs_stat "$ZS_MNT" "$key")"
done
zs_umount
log "ok"
