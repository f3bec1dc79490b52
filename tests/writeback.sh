#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck source-path=SCRIPTDIR
#
# Writeback to a backing file, two ways.
#
# 1. The control command on a plain file (no swap): `writeback huge`,
#    `idle` and `all` each move the pages they should (`all`: every page
#    in the arena), the file reads back byte for byte, a discard or an
#    overwrite frees backing space, and bad commands get EINVAL, as does
#    `writeback` on a mount without a backing file.
# 1b. The idle timer writes back pages untouched for writeback.idle_age.
# 1c. `idle SECONDS` marks only pages untouched for that long, and
#    `writeback huge_idle` takes only the raw ones among them.
# 1d. With the high watermark at 100 %, writes that find mem_limit reached
#    make room (writeback_spills) and lose nothing.
# 2. The real chain: a 32 MiB mem_limit, swap on the mount, and a process in
#    a memory cgroup whose compressed working set is several times mem_limit,
#    so that most of it can only live on the backing file.  It verifies and
#    rewrites its pages over several passes, so that pages whose old copies
#    sit in the backing file are swapped out anew, and the backing file is
#    compacted meanwhile; memhog checks every byte.  The daemon's memory is
#    sampled throughout and must stay within mem_limit plus its fixed
#    metadata.  Parts 1 run anywhere; part 2 needs a memory cgroup (v1 or
#    v2) and the test skips after part 1 without one.
set -eu
. "$(dirname "$0")/lib.sh"

MIB=$((1 << 20))
MEM_LIMIT_MIB=32
SIZE_MIB=1024
BACKING_MIB=160
CG_LIMIT_MIB=64
# memhog's page mix compresses about 1.7:1 with lz4 (with same-filled pages
# costing nothing): the 192 MiB beyond the cgroup's limit are ~110 MiB
# compressed, more than three times mem_limit.  The second pass verifies in
# random order and rewrites a quarter of the pages (each random pass costs
# about as much as the first: faults one page at a time).
HOG_MIB=256
HOG_PASSES=2
HOG_TIMEOUT=300

require_root
require_fuse
require_memhog
make_tmpdir

# writeback_now MOUNT KIND [ARG]: `writeback KIND [ARG]`, and wait until it
# has run.
writeback_now() {
	local mnt=$1
	shift
	zs_ctl "$mnt" writeback "$@" || fail "'writeback $*' was refused"
	zs_stat_wait "$mnt" writeback_pending 0
}

# control_einval MOUNT CMD: writing CMD to MOUNT/control must fail with EINVAL.
control_einval() {
	local out
	if out=$(zs_ctl "$1" "$2" 2>&1); then
		fail "control accepted '$2'"
	fi
	case $out in
	*"Invalid argument"*) ;;
	*) fail "'$2' was refused, but not with EINVAL: $out" ;;
	esac
}

# ---- 1. the control command on a plain file ---------------------------------------------

log "part 1: the writeback control command"
data=$ZS_TMP/data
"$MEMHOG" --size 32 --seed 31 --dump "$data"
zs_mount "size=256M,writeback.backing_file=$ZS_TMP/backing1"
mnt=$ZS_MNT
# The background thread's disk I/O is in the idle class: a swap-in's read
# goes first (it takes the best-effort class only while a write waits).
# (in the worker, the keeper's child, which runs the threads)
worker=$(pgrep -P "$ZS_PID" -x zswapfs) || fail "no worker (zswapfs child) of keeper $ZS_PID"
policy_tid=$(grep -lx zswapfs-policy /proc/"$worker"/task/*/comm | head -1 | cut -d/ -f5)
[ -n "$policy_tid" ] || fail "no zswapfs-policy thread in worker $worker"
v=$(ionice -p "$policy_tid") || fail "ionice -p $policy_tid failed"
[ "$v" = idle ] || fail "the policy thread's I/O class is '$v', not idle"
zs_run 60 dd if="$data" of="$mnt/swap" bs=1M oflag=direct conv=notrunc status=none ||
	fail "writing 32 MiB failed"
stored=$(zs_stat "$mnt" pages_stored)
same=$(zs_stat "$mnt" same_pages)
compr0=$(zs_stat "$mnt" compr_data_size)
[ "$stored" -eq $((32 * 256)) ] || fail "pages_stored is $stored after writing 32 MiB"
[ "$(zs_stat "$mnt" bd_count)" -eq 0 ] || fail "pages on the backing file before any writeback"

# The kinds of writeback, each picking its own pages: huge (stored raw),
# idle (none yet: no mark, and writeback.idle_age is an hour), idle after
# `idle all` but at most max_pages of them, and all.
huge=$(zs_stat "$mnt" huge_pages)
[ "$huge" -gt 0 ] || fail "memhog's pages include no incompressible ones?"
writeback_now "$mnt" huge
[ "$(zs_stat "$mnt" bd_count)" -eq "$huge" ] ||
	fail "writeback huge: bd_count $(zs_stat "$mnt" bd_count), huge_pages was $huge"
writeback_now "$mnt" idle
[ "$(zs_stat "$mnt" bd_count)" -eq "$huge" ] ||
	fail "writeback idle with no page idle moved pages: bd_count $(zs_stat "$mnt" bd_count)"
zs_ctl "$mnt" idle all || fail "'idle all' was refused"
writeback_now "$mnt" idle max_pages=100
[ "$(zs_stat "$mnt" bd_count)" -eq $((huge + 100)) ] ||
	fail "writeback idle max_pages=100: bd_count $(zs_stat "$mnt" bd_count), expected $((huge + 100))"
writeback_now "$mnt" all
[ "$(zs_stat "$mnt" bd_count)" -eq $((stored - same)) ] ||
	fail "writeback all: bd_count $(zs_stat "$mnt" bd_count)," \
		"expected pages_stored - same_pages = $((stored - same))"
compr1=$(zs_stat "$mnt" compr_data_size)
log "writeback all: $(zs_stats_line "$mnt" bd_count bd_writes compr_data_size mem_used_total \
	backing_bytes_live backing_segments writeback_status)"
[ "$(zs_stat "$mnt" bd_writes)" -ge $((stored - same)) ] || fail "bd_writes below bd_count"
[ "$(zs_stat "$mnt" writeback_status)" = ok ] || fail "writeback_status is not ok"
# Only same-filled pages stay, and they hold no arena memory.
[ "$compr1" -eq 0 ] || fail "compr_data_size fell from $compr0 to $compr1 only, not to 0"
live=$(zs_stat "$mnt" backing_bytes_live)
[ "$live" -ge "$compr0" ] || fail "backing_bytes_live $live < the $compr0 compressed bytes moved"

reads0=$(zs_stat "$mnt" bd_reads)
lat0=$(zs_stat "$mnt" lat_read_backing_reqs)
pread0=$(zs_stat "$mnt" lat_backing_pread_reqs)
zs_run 60 cmp "$data" <(dd if="$mnt/swap" bs=1M count=32 iflag=direct status=none) ||
	fail "the written-back pages do not read back as written"
reads1=$(zs_stat "$mnt" bd_reads)
[ $((reads1 - reads0)) -ge $((stored - same)) ] ||
	fail "bd_reads rose by $((reads1 - reads0)) only, for $((stored - same)) pages read back"
# Every 1 MiB read took its pages from the file (32 requests, the kernel
# may split them); each object came from the disk in a pread of its own,
# but those of the open segment, still in its buffer (fewer than 1 MiB's).
lat1=$(zs_stat "$mnt" lat_read_backing_reqs)
pread1=$(zs_stat "$mnt" lat_backing_pread_reqs)
[ $((lat1 - lat0)) -ge 32 ] || fail "lat_read_backing_reqs rose by $((lat1 - lat0)), not 32"
if [ $((pread1 - pread0)) -gt $((reads1 - reads0)) ] ||
	[ $((pread1 - pread0)) -lt $((reads1 - reads0 - 1024)) ]; then
	fail "lat_backing_pread_reqs rose by $((pread1 - pread0)), bd_reads by $((reads1 - reads0))"
fi
# Read back, a page stays on the backing file (the kernel has it cached).
[ "$(zs_stat "$mnt" bd_count)" -eq $((stored - same)) ] || fail "bd_count changed on reading"

# A discard frees the pages on the backing file; whole dead segments are
# given back to the filesystem.
bd0=$(zs_stat "$mnt" bd_count)
blocks0=$(stat -c %b "$ZS_TMP/backing1")
holes0=$(zs_stat "$mnt" backing_holes_punched)
zs_run 30 fallocate --punch-hole --keep-size --offset $((8 * MIB)) --length $((16 * MIB)) \
	"$mnt/swap" || fail "punching a hole in the swap file failed"
fallocate --punch-hole --keep-size --offset $((8 * MIB)) --length $((16 * MIB)) "$data"
gone=$((stored - $(zs_stat "$mnt" pages_stored)))
gone_same=$((same - $(zs_stat "$mnt" same_pages)))
[ "$gone" -eq $((16 * 256)) ] || fail "the discard of 16 MiB freed $gone pages"
bd1=$(zs_stat "$mnt" bd_count)
live1=$(zs_stat "$mnt" backing_bytes_live)
[ $((bd0 - bd1)) -eq $((gone - gone_same)) ] ||
	fail "bd_count fell from $bd0 to $bd1, expected by $((gone - gone_same))"
[ "$live1" -lt $((live / 2)) ] ||
	fail "backing_bytes_live only fell from $live to $live1 after discarding half the pages"
# Dead segments are punched by the writeback thread (within its 1 s tick),
# not by the request that freed their last object.
for ((i = 0; i < 50; i++)); do
	holes1=$(zs_stat "$mnt" backing_holes_punched)
	[ "$holes1" -le "$holes0" ] || break
	sleep 0.1
done
blocks1=$(stat -c %b "$ZS_TMP/backing1")
log "discard of 16 MiB: bd_count $bd0 -> $bd1, backing_bytes_live $live -> $live1," \
	"holes punched $holes0 -> $holes1, backing file blocks $blocks0 -> $blocks1"
[ "$holes1" -gt "$holes0" ] || fail "no segment hole punched after discarding 16 MiB in a row"
[ "$blocks1" -lt "$blocks0" ] ||
	fail "the backing file's blocks did not fall ($blocks0 -> $blocks1)"
zs_run 60 cmp "$data" <(dd if="$mnt/swap" bs=1M count=32 iflag=direct status=none) ||
	fail "data differs after the discard"

# Overwriting a written-back page frees its copy on the backing file.
"$MEMHOG" --size 1 --seed 32 --dump - |
	dd of="$data" bs=1M seek=2 iflag=fullblock conv=notrunc status=none
zs_run 30 dd if="$data" of="$mnt/swap" bs=1M skip=2 seek=2 count=1 oflag=direct conv=notrunc \
	status=none || fail "overwriting 1 MiB failed"
bd2=$(zs_stat "$mnt" bd_count)
[ "$bd2" -lt "$bd1" ] || fail "bd_count did not fall on overwriting ($bd1 -> $bd2)"
zs_run 60 cmp "$data" <(dd if="$mnt/swap" bs=1M count=32 iflag=direct status=none) ||
	fail "data differs after the overwrite"

control_einval "$mnt" "writeback bogus"
control_einval "$mnt" "writeback idle max_pages=0"
control_einval "$mnt" "writeback all max_pages=x"
control_einval "$mnt" "writeback"
[ "$(zs_stat "$mnt" bd_count)" -eq "$bd2" ] || fail "a refused command changed bd_count"
for key in failed_reads failed_writes backing_read_errors backing_write_errors writeback_failed; do
	[ "$(zs_stat "$mnt" "$key")" -eq 0 ] || fail "$key is $(zs_stat "$mnt" "$key")"
done
zs_umount
# Down to its 4 KiB header, which the next start knows the file by.
[ "$(stat -c %s "$ZS_TMP/backing1")" -eq 4096 ] ||
	fail "the backing file was not truncated to its header at exit"

# Without a backing file there is nothing to write back to.
zs_mount size=16M
control_einval "$ZS_MNT" "writeback all"
[ "$(zs_stat "$ZS_MNT" writeback_status)" = none ] || fail "writeback_status is not 'none'"
zs_umount

# The idle timer: pages untouched for writeback.idle_age go to the file on
# their own (the timer looks every 10 s), and still read back right.
log "part 1b: the idle timer"
zs_mount "size=64M,writeback.idle_age=2,writeback.backing_file=$ZS_TMP/backing3"
head -c $((8 * MIB)) "$data" >"$ZS_TMP/data8"
zs_run 30 dd if="$ZS_TMP/data8" of="$ZS_MNT/swap" bs=1M oflag=direct conv=notrunc status=none ||
	fail "writing 8 MiB failed"
want=$(( $(zs_stat "$ZS_MNT" pages_stored) - $(zs_stat "$ZS_MNT" same_pages) ))
zs_stat_wait "$ZS_MNT" bd_count "$want" 30
zs_run 30 dd if="$ZS_MNT/swap" of="$ZS_TMP/back8" bs=1M count=8 iflag=direct status=none ||
	fail "reading 8 MiB failed"
cmp "$ZS_TMP/data8" "$ZS_TMP/back8" || fail "pages written back by the idle timer read back wrong"
zs_umount

# `idle SECONDS` marks the pages untouched for that long: A, written 3 s
# before the mark, is idle; C, written just before it, is not; B, written
# after it, is not either.  (Access times count whole seconds: C could be
# idle only if more than a second passed between its write and the mark,
# which the test measures.)  Each group holds raw (huge) pages:
# `writeback huge_idle` takes A's raw pages, `writeback idle` then the rest
# of A, and B and C stay in RAM.
log "part 1c: idle SECONDS, writeback huge_idle"
zs_mount "size=64M,writeback.backing_file=$ZS_TMP/backing4"
mnt=$ZS_MNT
# group_write OFFSET_MIB SEED: 4 MiB of memhog's pages (a sixth are random)
group_write() {
	"$MEMHOG" --size 4 --seed "$2" --dump "$ZS_TMP/group$2"
	zs_run 30 dd if="$ZS_TMP/group$2" of="$mnt/swap" bs=1M seek="$1" oflag=direct \
		conv=notrunc status=none || fail "writing group $2 failed"
}
group_write 0 41
huge_a=$(zs_stat "$mnt" huge_pages)
keep_a=$(( $(zs_stat "$mnt" pages_stored) - $(zs_stat "$mnt" same_pages) ))
[ "$huge_a" -gt 0 ] || fail "group A holds no raw page"
sleep 3
"$MEMHOG" --size 4 --seed 43 --dump "$ZS_TMP/group43"
t0=$(date +%s%N)
zs_run 30 dd if="$ZS_TMP/group43" of="$mnt/swap" bs=1M seek=16 oflag=direct conv=notrunc \
	status=none || fail "writing group C failed"
zs_ctl "$mnt" idle 2 || fail "'idle 2' was refused"
t1=$(date +%s%N)
group_write 8 42
huge_all=$(zs_stat "$mnt" huge_pages)
[ "$huge_all" -gt "$huge_a" ] || fail "groups B and C hold no raw page"
writeback_now "$mnt" huge_idle
bd=$(zs_stat "$mnt" bd_count)
if [ $((t1 - t0)) -lt 900000000 ]; then
	[ "$bd" -eq "$huge_a" ] ||
		fail "writeback huge_idle after 'idle 2': bd_count $bd, A's raw pages $huge_a"
else
	log "C was written $(((t1 - t0) / 1000000)) ms before the mark: it may be idle too"
	[ "$bd" -ge "$huge_a" ] && [ "$bd" -lt "$huge_all" ] ||
		fail "writeback huge_idle: bd_count $bd, A's raw pages $huge_a, all $huge_all"
fi
writeback_now "$mnt" idle
bd=$(zs_stat "$mnt" bd_count)
if [ $((t1 - t0)) -lt 900000000 ]; then
	[ "$bd" -eq "$keep_a" ] || fail "writeback idle after 'idle 2': bd_count $bd, A's pages $keep_a"
fi
[ "$(zs_stat "$mnt" huge_pages)" -eq $((huge_all - huge_a)) ] ||
	fail "huge_pages $(zs_stat "$mnt" huge_pages): B's and C's raw pages did not stay"
cat "$ZS_TMP/group41" >"$ZS_TMP/groups"
truncate -s $((8 * MIB)) "$ZS_TMP/groups"
cat "$ZS_TMP/group42" >>"$ZS_TMP/groups"
truncate -s $((16 * MIB)) "$ZS_TMP/groups"
cat "$ZS_TMP/group43" >>"$ZS_TMP/groups"
zs_run 30 cmp "$ZS_TMP/groups" <(dd if="$mnt/swap" bs=1M count=20 iflag=direct status=none) ||
	fail "groups A, B and C do not read back"
zs_umount

# ---- 1d. a write that finds the arena full ----------------------------------------------
# With the high watermark at 100 %, nothing writes back ahead of need: the
# write that finds mem_limit reached asks the background thread for room
# (a spill), and every write still succeeds and reads back.
log "part 1d: writes that find the arena full"
zs_mount "size=64M,mem_limit=4M,writeback.high_watermark=100,writeback.low_watermark=99,writeback.backing_file=$ZS_TMP/backing5"
mnt=$ZS_MNT
zs_run 60 dd if="$data" of="$mnt/swap" bs=1M count=16 oflag=direct conv=notrunc status=none ||
	fail "writing 16 MiB into a 4 MiB arena failed"
[ "$(zs_stat "$mnt" writeback_spills)" -gt 0 ] || fail "writeback_spills is 0 with the arena full"
[ "$(zs_stat "$mnt" failed_writes)" -eq 0 ] || fail "failed_writes is $(zs_stat "$mnt" failed_writes)"
zs_run 30 cmp <(head -c $((16 * MIB)) "$data") \
	<(dd if="$mnt/swap" bs=1M count=16 iflag=direct status=none) ||
	fail "16 MiB written through a full arena do not read back"
log "$(zs_stats_line "$mnt" writeback_spills bd_writes mem_used_max reserve_dry)"
zs_umount

# ---- 2. swap with a working set far above mem_limit ----------------------------------

require_memory_cgroup

log "part 2: swap, mem_limit=${MEM_LIMIT_MIB}M," \
	"memhog ${HOG_MIB} MiB, $HOG_PASSES passes, in a ${CG_LIMIT_MIB} MiB cgroup"
# Idle recompression runs all the time too (pages untouched for a second,
# asked for every half second: the automatic pass comes only every ten
# seconds, and on a fast machine the hog is done in less): its long passes
# must give way to writeback, or writes would wait for room and fail; and
# pages recompressed to zstd are written back and read too.
# Under load, backing-file segments are compacted only when the file runs
# short of free segments (an eighth of it): a file of BACKING_MIB, a little
# more than the hog's objects there at the peak (~130 MiB live) and less
# than all it writes back (~160 MiB), runs short while the hog rewrites;
# then every segment with a tenth of its bytes dead is compacted (the
# default waits for half), so that it never fills.
zs_mount "size=${SIZE_MIB}M,mem_limit=${MEM_LIMIT_MIB}M,writeback.backing_file=$ZS_TMP/backing2,writeback.max_size=${BACKING_MIB}M,recompress.idle_age=1,writeback.compact_threshold=90"
mnt=$ZS_MNT
# VmRSS of the worker, which holds the memory (the keeper's is small)
pid=$(pgrep -P "$ZS_PID" -x zswapfs) || fail "no worker (zswapfs child) of keeper $ZS_PID"
rss_start=$(zs_stat "$mnt" rss_bytes)
reserve_start=$(zs_stat "$mnt" reserve_bytes)
log "at start: rss_bytes $rss_start, reserve_bytes $reserve_start"
zs_swapon "$mnt"

# Sample the daemon's memory while the hog runs: a peak between two reads
# at the end would go unseen.
sampler() {
	local s vm
	while :; do
		s=$(awk '$1 == "rss_bytes" || $1 == "mem_used_total" || $1 == "bd_count" ||
			$1 == "backing_bytes_live" { v[$1] = $2 }
			END { print v["rss_bytes"], v["mem_used_total"], v["bd_count"], v["backing_bytes_live"] }' \
			"$mnt/stats") || exit 0
		vm=$(awk '$1 == "VmRSS:" { print $2 * 1024 }' "/proc/$pid/status") || exit 0
		echo "$s $vm" >>"$ZS_TMP/samples"
		sleep 0.2
	done
}
sampler &
sampler_pid=$!
push_undo kill "$sampler_pid"
# EBUSY while the last one still runs: nothing to wait for (and no reason
# for set -e to end the loop).
recompressor() {
	while :; do
		printf 'recompress type=idle\n' 2>/dev/null >"$mnt/control" || true
		sleep 0.5
	done
}
recompressor &
recompressor_pid=$!
push_undo kill "$recompressor_pid"

make_cgroup "${CG_LIMIT_MIB}M"
t0=$SECONDS
zs_memhog "$HOG_TIMEOUT" --size "$HOG_MIB" --passes "$HOG_PASSES"
zs_stop_sampler "$sampler_pid"
zs_stop_sampler "$recompressor_pid"
log "memhog took $((SECONDS - t0)) s"
zs_alive
log "$(zs_stats_line "$mnt" mem_used_max bd_count bd_reads bd_writes failed_reads failed_writes \
	backing_bytes_used backing_bytes_written backing_holes_punched backing_compaction_moves \
	writeback_failed writeback_spills writeback_status rss_bytes recompressed recompress_passes)"

zs_memhog_passed "$HOG_TIMEOUT"

read -r rss_max used_max bd_max live_max vm_max < <(
	awk '{ for (i = 1; i <= 5; i++) if ($i > m[i]) m[i] = $i }
	END { print m[1] + 0, m[2] + 0, m[3] + 0, m[4] + 0, m[5] + 0 }' "$ZS_TMP/samples")
log "peaks over $(wc -l <"$ZS_TMP/samples") samples: rss_bytes $rss_max, VmRSS $vm_max," \
	"mem_used_total $used_max, bd_count $bd_max, backing_bytes_live $live_max"

# The hog must really have lived on the backing file: compressed, more than
# twice what the arena may hold was out there at once.
[ "$live_max" -ge $((2 * MEM_LIMIT_MIB * MIB)) ] ||
	fail "backing_bytes_live peaked at $live_max: the hog hardly reached the backing file"
# What the test is for happened: pages came back from the backing file and
# were rewritten (their old copies freed there, their new data swapped out
# again), the backing file was compacted meanwhile, idle recompression ran
# beside writeback, and writes that found the arena full made room.
rewrites=$(sed -n 's/^memhog: OK .* rewrites=\([0-9]*\) .*/\1/p' "$ZS_TMP/memhog.out")
[ "${rewrites:-0}" -gt 0 ] || fail "memhog rewrote no page"
# (Writes that find the arena full are what watermarks and the reserve keep
# from happening here; part 1d forces them.)
for key in bd_writes bd_reads backing_compaction_moves backing_holes_punched recompressed; do
	[ "$(zs_stat "$mnt" "$key")" -gt 0 ] || fail "$key is 0"
done
for key in failed_reads failed_writes backing_read_errors backing_write_errors writeback_failed; do
	[ "$(zs_stat "$mnt" "$key")" -eq 0 ] || fail "$key is $(zs_stat "$mnt" "$key")"
done
v=$(zs_stat "$mnt" mem_used_max)
[ "$v" -le $((MEM_LIMIT_MIB * MIB)) ] || fail "mem_used_max $v is above mem_limit"
[ "$used_max" -le $((MEM_LIMIT_MIB * MIB)) ] || fail "mem_used_total reached $used_max"

# The daemon's own memory: what it had at start besides the reserve (the
# slot table, 16 bytes a page of size, the backing file's segment buffers
# and table, thread buffers and stacks, codec contexts, the heap prefaulted
# per thread, the program and its libraries: all locked there by
# mlockall), and the arena up to mem_limit, the reserve inside it.
# Measured: 30 MiB at start of which 8 MiB reserve, peaks of 64-66 MiB
# (mem_limit 32 MiB).  The slack covers what grows while serving: arena
# metadata, span descriptors, the passes' buffers and codec contexts.
bound=$((rss_start - reserve_start + MEM_LIMIT_MIB * MIB + 16 * MIB))
if zs_sanitized; then
	log "AddressSanitizer build: its shadow memory is in the RSS; bound $bound not checked"
else
	[ "$rss_max" -le "$bound" ] || fail "rss_bytes reached $rss_max, above the bound $bound"
	[ "$vm_max" -le "$bound" ] || fail "VmRSS reached $vm_max, above the bound $bound"
fi

zs_swapoff
zs_alive
zs_umount
log "writeback: OK"
exit 0
