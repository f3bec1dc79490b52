#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# ratio.sh - memory ratio of kernel zram and zswapfs on the same data.
#
#   ratio.sh -c CORPUS [-a ALGORITHMS] [-Z ZSWAPFS] [-n] [-R] [-C] [-B] [-D] [-t THRESHOLD]
#
# Writes CORPUS (see mkcorpus) once into /dev/zram0 and once into a fresh zswapfs mount
# (dd bs=1M oflag=direct), reads back orig_data_size, compr_data_size and mem_used_total
# and prints orig/mem_used_total (what the memory saving really is) and orig/compr (the
# codec alone).  Then reads the data back and compares it with CORPUS.
# ALGORITHMS: comma separated, default lz4 (e.g. lz4,lzo,zstd; zram gets those its kernel
# knows).  -n: zswapfs only.  zswapfs runs with recompress.enabled=false.
# With lz4 in ALGORITHMS, the lz4 mount then gets `idle all` and `recompress type=idle`
# (zstd), then `compact`, and the row "zswapfs lz4+zstd" (verified too).  -R: no such row;
# -C: no compact before it.  -t: recompress.threshold of the mounts (default 128, the
# daemon's default).  -B: after each zswapfs row, where mem_used_total goes beyond
# the codec (class rounding, span tails, free places, from MNT/stats), and, next to the
# lz4+zstd row, zstd page by page on the same corpus (./pageratio, make it first).
# -D: for lz4 and zstd, a second mount writes the corpus, trains a dictionary on it
# (the `train` command: the daemon samples 2048 of its pages, trains on half), writes
# the corpus again, compacts, and reports the row "ALG+dict" (and with lz4, "lz4+zstd+dict" after
# recompression with the same dictionary).  Without -D the mounts have dict_train=off.
# Needs root; zram0 must be unused (disksize 0).
set -u

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=benchlib.sh
. "$here/benchlib.sh"
BENCH=ratio
CORPUS=
ALGS=lz4
ZSWAPFS=$here/../../src/zswapfs
DO_ZRAM=1
DO_RECOMP=1
DO_COMPACT=1
DO_BREAKDOWN=
DO_DICT=
RECOMP_LABEL=lz4+zstd
THRESHOLD=128
# how long a recompress pass or a compaction may take before the run fails
WAIT_S=300

usage() {
	sed -n '4,26p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

while getopts c:a:Z:t:nRCBDh opt; do
	case $opt in
	c) CORPUS=$OPTARG ;;
	a) ALGS=$OPTARG ;;
	Z) ZSWAPFS=$OPTARG ;;
	n) DO_ZRAM= ;;
	R) DO_RECOMP= ;;
	C) DO_COMPACT= ;;
	B) DO_BREAKDOWN=1 ;;
	D) DO_DICT=1 ;;
	t) THRESHOLD=$OPTARG ;;
	*) usage ;;
	esac
done
if [ -z "$CORPUS" ] || [ ! -r "$CORPUS" ]; then usage; fi
[ "$(id -u)" = 0 ] || { echo "ratio: needs root" >&2; exit 2; }
if [ -n "$DO_BREAKDOWN" ] && [ ! -x "$here/pageratio" ]; then
	echo "ratio: -B needs $here/pageratio (make pageratio)" >&2
	exit 2
fi

bench_init

bytes=$(stat -c %s "$CORPUS")
# device size: the corpus rounded up to MiB, plus 16 MiB
devsize=$(( (bytes + (1 << 20) - 1) / (1 << 20) * (1 << 20) + (16 << 20) ))
failed=0
json=''

report() {	# device alg orig compr mem_used same huge [extra JSON members]
	local r1 r2
	r1=$(awk -v a="$3" -v b="$5" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "nan" }')
	r2=$(awk -v a="$3" -v b="$4" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "nan" }')
	printf '%-8s %-9s %14s %15s %14s %9s %9s %10s %10s\n' "$1" "$2" "$3" "$4" "$5" "$r1" "$r2" \
		"$6" "$7"
	json="$json${json:+,}{\"device\":\"$1\",\"alg\":\"$2\",\"orig_data_size\":$3,"
	json="$json\"compr_data_size\":$4,\"mem_used_total\":$5,\"ratio_mem\":$r1,"
	json="$json\"ratio_compr\":$r2,\"same_pages\":$6,\"huge_pages\":$7${8:+,$8}}"
}

verify() {	# file-or-device
	if ! dd if="$1" bs=1M iflag=direct count=$(( (bytes + (1 << 20) - 1) >> 20 )) \
		status=none | cmp -n "$bytes" -s - "$CORPUS"; then
		log "DATA MISMATCH reading back $1"
		failed=1
	fi
}

run_zram() {
	local alg=$1 st
	if ! grep -qw "$alg" $ZRAM/comp_algorithm; then
		log "zram: this kernel has no $alg (has: $(cat $ZRAM/comp_algorithm)); skipped"
		return 0
	fi
	if zram_busy; then
		log "zram0 is in use by someone else; skipped"
		failed=1
		return 1
	fi
	ZRAM_USED=1
	if ! { echo "$alg" > $ZRAM/comp_algorithm && echo "$devsize" > $ZRAM/disksize &&
		dd if="$CORPUS" of=/dev/zram0 bs=1M oflag=direct status=none; }; then
		log "zram: setup or write failed"
		failed=1; teardown; return 1
	fi
	# mm_stat: orig_data_size compr_data_size mem_used_total mem_limit mem_used_max
	#          same_pages pages_compacted huge_pages ...
	read -r -a st < $ZRAM/mm_stat
	report zram "$alg" "${st[0]}" "${st[1]}" "${st[2]}" "${st[5]}" "${st[7]}"
	verify /dev/zram0
	teardown
}

stat_of() { awk -v k="$1" '$1 == k { print $2 }' "$MNT/stats"; }

# -B: mem_used_total = compr_data_size + class rounding + span tails + free places
# (arena_class_bytes - compr_data_size, arena_tail_bytes, frag_bytes), in bytes and as
# a share of mem_used_total; appended to the JSON row as "breakdown"
BREAKDOWN_JSON=
BREAKDOWN_LINE=
breakdown() {	# label
	local compr mem held tail frag
	BREAKDOWN_JSON=
	BREAKDOWN_LINE=
	[ -n "$DO_BREAKDOWN" ] || return 0
	compr=$(stat_of compr_data_size); mem=$(stat_of mem_used_total)
	held=$(stat_of arena_class_bytes); tail=$(stat_of arena_tail_bytes)
	frag=$(stat_of frag_bytes)
	if [ -z "$held" ] || [ -z "$tail" ]; then
		log "zswapfs: no arena_class_bytes/arena_tail_bytes in its stats; no breakdown"
		return 0
	fi
	BREAKDOWN_LINE=$(awk -v l="$1" -v c="$compr" -v m="$mem" -v h="$held" -v t="$tail" -v f="$frag" 'BEGIN {
		r = h - c; o = m - c - r - t - f
		printf "breakdown %-17s mem_used_total %d = compr %d + round %d (%.2f%%)" \
			" + tail %d (%.2f%%) + free %d (%.2f%%)%s\n", l, m, c, r, 100 * r / m,
			t, 100 * t / m, f, 100 * f / m, o ? sprintf(" + ??? %d", o) : ""
	}')
	BREAKDOWN_JSON="\"breakdown\":{\"round\":$(( held - compr )),\"tail\":$tail,\"free\":$frag}"
}

# -B, next to the lz4+zstd row: zstd page by page and what idle recompression with the
# daemon's threshold would keep, from ./pageratio on the same corpus
reference() {
	local out
	[ -n "$DO_BREAKDOWN" ] || return 0
	out=$("$here/pageratio" -c "$CORPUS" -T "$THRESHOLD" -j) || {
		log "pageratio failed"; failed=1; return 1; }
	awk -v mem="$(stat_of mem_used_total)" -v orig="$(stat_of orig_data_size)" '
		/^(zstd|lz4\+zstd)/ { print "reference pageratio " $0 }
		$1 == "zstd" { z = $2 }
		END { if (z && mem) printf "reference lz4+zstd orig/mem %.4f is %.1f%% of zstd " \
			"page by page (orig/compr %.4f)\n", orig / mem, 100 * orig / mem / z, z }
	' <<< "$out"
}

# one command to MNT/control (one write: printf is a builtin)
control() {
	printf '%s\n' "$1" > "$MNT/control" && return 0
	log "zswapfs: control command '$1' failed"
	return 1
}

# wait until stats key $1 satisfies awk test $2 (on v), for at most WAIT_S seconds
wait_stat() {
	local t0=$SECONDS v
	while :; do
		v=$(stat_of "$1")
		[ -n "$v" ] && awk -v v="$v" "BEGIN { exit !($2) }" && return 0
		if [ $(( SECONDS - t0 )) -ge $WAIT_S ]; then
			log "zswapfs: $1=${v:-missing} still not $2 after ${WAIT_S}s"
			return 1
		fi
		sleep 0.2
	done
}

# lz4 mount already filled: every page idle, recompress them with the daemon's
# recompress.algorithm (zstd by default), compact, report and verify the result
run_recompress() {
	local t0 t1 secs pre c0 extra
	if [ -z "$(stat_of recompress_pending)" ]; then
		log "zswapfs: $ZSWAPFS has no recompression (no recompress_pending); lz4+zstd skipped"
		failed=1
		return 1
	fi
	t0=$(date +%s.%N)
	if ! { control "idle all" && control "recompress type=idle" &&
		wait_stat recompress_pending 'v == 0'; }; then
		failed=1
		return 1
	fi
	t1=$(date +%s.%N)
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
	pre=$(stat_of mem_used_total)
	if [ -n "$DO_COMPACT" ]; then
		c0=$(stat_of compactions)
		if ! { control compact && wait_stat compactions "v > $c0"; }; then
			failed=1
			return 1
		fi
	fi
	cp "$MNT/stats" "$TMP/stats.$RECOMP_LABEL"
	log "recompress pass: ${secs}s recompressed=$(stat_of recompressed)" \
		"skipped=$(stat_of recompress_skipped)" \
		"incompressible=$(stat_of recompress_incompressible)" \
		"pages_lz4=$(stat_of pages_lz4) pages_zstd=$(stat_of pages_zstd)" \
		"mem_used_total before/after compact=$pre/$(stat_of mem_used_total)" \
		"$([ -n "$DO_COMPACT" ] || echo '(-C: not compacted)')"
	extra="\"recompress_s\":$secs,\"mem_used_before_compact\":$pre"
	extra="$extra,\"compacted\":$([ -n "$DO_COMPACT" ] && echo true || echo false)"
	local k
	for k in recompressed recompress_skipped recompress_incompressible pages_lz4 pages_zstd \
		bytes_lz4 bytes_zstd; do
		extra="$extra,\"$k\":$(stat_of $k)"
	done
	breakdown "zswapfs $RECOMP_LABEL"
	extra="$extra${BREAKDOWN_JSON:+,$BREAKDOWN_JSON}"
	report zswapfs "$RECOMP_LABEL" "$(stat_of orig_data_size)" "$(stat_of compr_data_size)" \
		"$(stat_of mem_used_total)" "$(stat_of same_pages)" "$(stat_of huge_pages)" "$extra"
	[ -z "$BREAKDOWN_LINE" ] || echo "$BREAKDOWN_LINE"
	reference
	verify "$MNT/swap"
}

run_zswapfs() {
	local alg=$1
	if [ ! -x "$ZSWAPFS" ]; then
		log "$ZSWAPFS not built; skipped"
		failed=1
		return 1
	fi
	# no background pass: the figures are the codec's alone (and the pass asked for in
	# run_recompress is the only one)
	if ! start_fuse "$ZSWAPFS" "$devsize" "algorithm=$alg,recompress.enabled=false,recompress.threshold=$THRESHOLD,dict_train=off"; then
		log "zswapfs did not come up: $(cat "$TMP/daemon.err")"
		failed=1; teardown; return 1
	fi
	# conv=notrunc: O_TRUNC would ask the daemon to truncate its fixed-size file
	if ! dd if="$CORPUS" of="$MNT/swap" bs=1M oflag=direct conv=notrunc status=none; then
		log "zswapfs: writing the corpus failed"
		failed=1; teardown; return 1
	fi
	cp "$MNT/stats" "$TMP/stats.$alg"
	breakdown "zswapfs $alg"
	report zswapfs "$alg" "$(stat_of orig_data_size)" "$(stat_of compr_data_size)" \
		"$(stat_of mem_used_total)" "$(stat_of same_pages)" "$(stat_of huge_pages)" \
		"$BREAKDOWN_JSON"
	[ -z "$BREAKDOWN_LINE" ] || echo "$BREAKDOWN_LINE"
	verify "$MNT/swap"
	[ "$alg" = lz4 ] && [ -n "$DO_RECOMP" ] && run_recompress
	teardown
}

# -D: the corpus, a dictionary trained by the daemon from it, the corpus again
run_dict() {
	local alg=$1 t0 extra k
	if ! start_fuse "$ZSWAPFS" "$devsize" "algorithm=$alg,recompress.enabled=false,recompress.threshold=$THRESHOLD,dict_train=off"; then
		log "zswapfs did not come up: $(cat "$TMP/daemon.err")"
		failed=1; teardown; return 1
	fi
	if ! dd if="$CORPUS" of="$MNT/swap" bs=1M oflag=direct conv=notrunc status=none; then
		log "zswapfs: writing the corpus failed"
		failed=1; teardown; return 1
	fi
	t0=$(stat_of dict_trainings)
	if [ -z "$t0" ] || ! { control train && wait_stat dict_train_pending 'v == 0'; }; then
		log "zswapfs: no dictionary training"
		failed=1; teardown; return 1
	fi
	log "dict $alg: generation $(stat_of dict_generation), $(stat_of dict_bytes) bytes," \
		"$(stat_of dict_train_ms) ms; held-out samples $(stat_of dict_ratio_before)" \
		"-> $(stat_of dict_ratio_after) (x1000)"
	if ! dd if="$CORPUS" of="$MNT/swap" bs=1M oflag=direct conv=notrunc status=none; then
		log "zswapfs: writing the corpus again failed"
		failed=1; teardown; return 1
	fi
	# The rewrite freed every old object: compact, so that the row compares
	# packed arenas (as the lz4+zstd row does).
	t0=$(stat_of compactions)
	if ! { control compact && wait_stat compactions "v > $t0"; }; then
		failed=1; teardown; return 1
	fi
	cp "$MNT/stats" "$TMP/stats.$alg+dict"
	extra="\"dict_bytes\":$(stat_of dict_bytes)"
	for k in dict_pages dict_data_size nodict_pages nodict_data_size dict_ratio_before \
		dict_ratio_after dict_train_ms; do
		extra="$extra,\"$k\":$(stat_of $k)"
	done
	report zswapfs "$alg+dict" "$(stat_of orig_data_size)" "$(stat_of compr_data_size)" \
		"$(stat_of mem_used_total)" "$(stat_of same_pages)" "$(stat_of huge_pages)" "$extra"
	verify "$MNT/swap"
	if [ "$alg" = lz4 ] && [ -n "$DO_RECOMP" ]; then
		RECOMP_LABEL=lz4+zstd+dict
		run_recompress
		RECOMP_LABEL=lz4+zstd
	fi
	teardown
}

echo "# ratio: corpus=$CORPUS bytes=$bytes pages=$(( bytes / 4096 )) kernel=$(uname -r)"
printf '%-8s %-9s %14s %15s %14s %9s %9s %10s %10s\n' device alg orig_data_size \
	compr_data_size mem_used_total orig/mem orig/compr same_pages huge_pages
IFS=, read -r -a algs <<< "$ALGS"
for a in "${algs[@]}"; do
	[ -n "$DO_ZRAM" ] && run_zram "$a"
	run_zswapfs "$a"
	if [ -n "$DO_DICT" ] && [ "$a" != lzo ]; then run_dict "$a"; fi
done
echo "{\"bench\":\"ratio\",\"corpus_bytes\":$bytes,\"results\":[$json],\"failed\":$failed}"
exit $failed
