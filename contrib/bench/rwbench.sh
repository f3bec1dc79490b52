#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# rwbench.sh - writers vs readers: how long do reads wait while a writer keeps the
# compressor busy?  One fio writer and one fio reader, side by side on one device pre-filled
# with real pages, on kernel zram and on zswapfs, interleaved round by round.
#
#   rwbench.sh -c CORPUS [-r ROUNDS] [-t RUNTIME] [-a ALGORITHMS] [-d DEVICES] [-s SIZE]
#              [-B BUFFERS] [-O ZSWAPFS_OPTS] [-V NAME=OPTS]... [-W NAME=BINARY]...
#              [-Z ZSWAPFS] [-f]
#
# DEVICES (comma separated, default zram,zswapfs), each run with every ALGORITHM (default
# lz4,zstd):
#   zram        /dev/zram0, comp_algorithm ALG, disksize SIZE (an algorithm zram lacks is
#               left out, and zswapfs with it is set against zram's first algorithm)
#   zswapfs     zswapfs MNT -f -o size=SIZE,algorithm=ALG,fuse_uring=false (/dev/fuse),
#               losetup --find --show --direct-io=on MNT/swap
#   zswapfs-ur  the same over FUSE io_uring (fuse_uring=true); runs only where the fuse
#               module's enable_uring is already Y: this script never changes it
#   zswapfs-NAME  zswapfs over /dev/fuse with the extra options OPTS of -V NAME=OPTS
#               (e.g. -V t2=threads=2 -d zram,zswapfs,zswapfs-t2: an A/B in one run);
#               -W NAME=BINARY runs zswapfs-NAME with another build of the daemon (an
#               A/B of two builds in one run; -V NAME= may then be left out)
# Each device is filled with the first SIZE (default: all, whole MiB) of CORPUS
# (dd bs=1M oflag=direct), then for RUNTIME seconds (default 20):
#   fio --direct=1 --ioengine=psync --bs=4k --time_based --runtime=RUNTIME
#       --name=writer --rw=randwrite --offset=SIZE/2 --size=SIZE/2   (the upper half)
#       --name=reader --rw=randread  --offset=0      --size=SIZE/2   (the lower half)
# so the reader only ever reads corpus pages.  BUFFERS: what the writer writes: random
# (fio's default: incompressible) or N (--buffer_compress_percentage=N, refill_buffers).
# Needs root, fio, /usr/bin/python3, an unused zram0, and no swap active (-f: anyway).
# zram0 is reset (echo 1 > reset) after every run and on every way out.
set -u

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=benchlib.sh
. "$here/benchlib.sh"
BENCH=rwbench
CORPUS=
ROUNDS=3
RUNTIME=20
ALGS=lz4,zstd
DEVICES=zram,zswapfs
SIZE_MIB=
BUFFERS=random
XOPTS=
declare -A VOPTS VBIN
FORCE=0
ZSWAPFS=$here/../../src/zswapfs
[ -x "$ZSWAPFS" ] || ZSWAPFS=$here/../../build/src/zswapfs

usage() {
	# the header comment, from its synopsis to its last line
	awk 'NR >= 4 && !/^#/ { exit } NR >= 4' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

while getopts c:r:t:a:d:s:B:O:V:W:Z:fh opt; do
	case $opt in
	c) CORPUS=$OPTARG ;;
	r) ROUNDS=$OPTARG ;;
	t) RUNTIME=$OPTARG ;;
	a) ALGS=$OPTARG ;;
	d) DEVICES=$OPTARG ;;
	s) SIZE_MIB=$(( $(numfmt --from=iec "$OPTARG") >> 20 )) || exit 2 ;;
	B) BUFFERS=$OPTARG ;;
	O) XOPTS=$OPTARG ;;
	V) case $OPTARG in
	   [a-z0-9]*=?*) VOPTS[${OPTARG%%=*}]=${OPTARG#*=} ;;
	   *) echo "rwbench: -V NAME=OPTS, not '$OPTARG'" >&2; exit 2 ;;
	   esac ;;
	W) case $OPTARG in
	   [a-z0-9]*=?*) VBIN[${OPTARG%%=*}]=${OPTARG#*=}
		[ -n "${VOPTS[${OPTARG%%=*}]+x}" ] || VOPTS[${OPTARG%%=*}]= ;;
	   *) echo "rwbench: -W NAME=BINARY, not '$OPTARG'" >&2; exit 2 ;;
	   esac ;;
	Z) ZSWAPFS=$OPTARG ;;
	f) FORCE=1 ;;
	*) usage ;;
	esac
done
if [ -z "$CORPUS" ] || [ ! -r "$CORPUS" ]; then usage; fi
CORPUS_MIB=$(( $(stat -c %s "$CORPUS") >> 20 ))
[ -n "$SIZE_MIB" ] || SIZE_MIB=$CORPUS_MIB
for n in "$ROUNDS" "$RUNTIME" "$SIZE_MIB"; do
	case $n in '' | *[!0-9]*) echo "rwbench: '$n' is not a whole number" >&2; exit 2 ;; esac
done
if [ "$SIZE_MIB" -lt 2 ] || [ "$SIZE_MIB" -gt "$CORPUS_MIB" ]; then
	echo "rwbench: SIZE must be 2 MiB to the corpus's ${CORPUS_MIB} MiB" >&2
	exit 2
fi
case $BUFFERS in
random) FIO_BUF=() ;;
[0-9] | [0-9][0-9] | 100) FIO_BUF=(--buffer_compress_percentage="$BUFFERS" --refill_buffers
	--buffer_compress_chunk=4096) ;;
*) echo "rwbench: -B random or a percentage, not '$BUFFERS'" >&2; exit 2 ;;
esac
IFS=, read -r -a devs <<< "$DEVICES"
IFS=, read -r -a algs <<< "$ALGS"
for d in "${devs[@]}"; do
	case $d in
	zram) ;;
	zswapfs | zswapfs-ur) [ -x "$ZSWAPFS" ] ||
		{ echo "rwbench: $ZSWAPFS not built (-Z)" >&2; exit 2; } ;;
	zswapfs-*) [ -n "${VOPTS[${d#zswapfs-}]+x}" ] ||
		{ echo "rwbench: no -V ${d#zswapfs-}=OPTS for device '$d'" >&2; exit 2; }
		[ -x "${VBIN[${d#zswapfs-}]:-$ZSWAPFS}" ] ||
			{ echo "rwbench: ${VBIN[${d#zswapfs-}]:-$ZSWAPFS} not built" >&2; exit 2; } ;;
	*) echo "rwbench: unknown device '$d'" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" = 0 ] || { echo "rwbench: needs root" >&2; exit 2; }
command -v fio > /dev/null || { echo "rwbench: needs fio" >&2; exit 2; }
[ -x /usr/bin/python3 ] || { echo "rwbench: needs /usr/bin/python3 (fio's JSON)" >&2; exit 2; }

# teardown() and the traps undo on every path what this script creates (benchlib.sh)
bench_init

if swap_active; then
	if [ "$FORCE" = 1 ]; then
		log "warning: other swap is active (-f)"
	else
		log "other swap is active (see /proc/swaps); refusing (-f to run anyway)"
		exit 2
	fi
fi

# the algorithms zram0 offers ("[lzo-rle] lzo lz4": the bracketed one is current)
zram_algs=''
[ -r $ZRAM/comp_algorithm ] && zram_algs=$(tr -d '[]' < $ZRAM/comp_algorithm | xargs)
zram_has() { case " $zram_algs " in *" $1 "*) return 0 ;; esac; return 1; }

# the runs of one round, in order: DEVICE:ALG; and which zram run each is set against
runs=() ZREF=''
for a in "${algs[@]}"; do
	for d in "${devs[@]}"; do
		if [ "$d" = zram ]; then
			zram_has "$a" || continue
			[ -n "$ZREF" ] || ZREF=zram:$a
		fi
		runs+=("$d:$a")
	done
done
declare -A zref
notes=''
for a in "${algs[@]}"; do
	if zram_has "$a"; then
		zref[$a]=zram:$a
	else
		zref[$a]=$ZREF
		case " ${devs[*]} " in *" zram "*)
			notes="$notes# zram0 on this kernel has no $a (it offers: $zram_algs):"
			notes="$notes zswapfs $a is set against ${ZREF:-nothing}
" ;;
		esac
	fi
done
HALF=$((SIZE_MIB / 2))

# set up device $1 (zram, zswapfs, zswapfs-ur) with algorithm $2; sets BLK, the block
# device to fill and run fio on
setup_dev() {
	local dev=$1 alg=$2 opts
	case $dev in
	zram)
		if zram_busy; then
			log "zram0 is in use by someone else; refusing"
			return 1
		fi
		ZRAM_USED=1
		echo "$alg" > $ZRAM/comp_algorithm || return 1
		echo "${SIZE_MIB}M" > $ZRAM/disksize || return 1
		BLK=/dev/zram0
		;;
	zswapfs*)
		local bin=$ZSWAPFS
		opts="algorithm=$alg,fuse_uring=false"
		[ "$dev" = zswapfs-ur ] && opts="algorithm=$alg,fuse_uring=true"
		if [ "$dev" != zswapfs ] && [ "$dev" != zswapfs-ur ]; then
			opts="$opts${VOPTS[${dev#zswapfs-}]:+,${VOPTS[${dev#zswapfs-}]}}"
			bin=${VBIN[${dev#zswapfs-}]:-$ZSWAPFS}
		fi
		if ! start_fuse "$bin" "${SIZE_MIB}M" "$opts${XOPTS:+,$XOPTS}"; then
			log "zswapfs did not come up on $MNT: $(cat "$TMP/daemon.err")"
			return 1
		fi
		LOOPDEV=$(losetup --find --show --direct-io=on "$MNT/swap") ||
			{ LOOPDEV=; return 1; }
		BLK=$LOOPDEV
		;;
	esac
}

# one run of device $1 with algorithm $2, in this shell (the traps must see what it set
# up); writes "OUTCOME key=value..." to $TMP/res
run_one() {
	local dev=$1 alg=$2 daemon=''
	: > "$TMP/res"
	BLK=
	setup_dev "$dev" "$alg" || return 1
	dd if="$CORPUS" of="$BLK" bs=1M count="$SIZE_MIB" oflag=direct status=none || return 1
	fio --output-format=json --percentile_list=50:99:99.9:99.99 \
		--filename="$BLK" --direct=1 --ioengine=psync --bs=4k \
		--time_based --runtime="$RUNTIME" \
		--name=writer --rw=randwrite --offset="${HALF}M" --size="${HALF}M" \
		"${FIO_BUF[@]}" \
		--name=reader --rw=randread --offset=0 --size="${HALF}M" \
		> "$TMP/fio.json" 2> "$TMP/fio.err" ||
		{ log "fio failed on $dev/$alg: $(tail -n 3 "$TMP/fio.err")"; return 1; }
	case $dev in zswapfs*)
		daemon=$(awk '
		function us(ns) { return sprintf("%.1f", ns / 1000) }
		{ v[$1] = $2 }
		END {
			printf " daemon_read_avg_us=%s daemon_read_max_us=%s",
				us(v["read_latency_avg_ns"]), us(v["read_latency_max_ns"])
			printf " daemon_write_avg_us=%s daemon_write_max_us=%s",
				us(v["write_latency_avg_ns"]), us(v["write_latency_max_ns"])
			printf " failed_reads=%d failed_writes=%d transport=%s",
				v["failed_reads"], v["failed_writes"], v["fuse_transport"]
		}' "$MNT/stats") ;;
	esac
	teardown || { log "teardown after $dev/$alg reported a problem"; return 1; }
	case $dev:$daemon in
	zswapfs-ur:*transport=io_uring* | zram:*) ;;
	zswapfs-ur:*) log "$dev/$alg ran over the wrong transport:$daemon"; return 1 ;;
	zswapfs*:*transport=dev_fuse*) ;;
	*) log "$dev/$alg ran over the wrong transport:$daemon"; return 1 ;;
	esac
	/usr/bin/python3 - "$TMP/fio.json" <<'PY' > "$TMP/res" || return 1
import json, sys
jobs = {j["jobname"]: j for j in json.load(open(sys.argv[1]))["jobs"]}
r, w = jobs["reader"]["read"], jobs["writer"]["write"]
if r["io_bytes"] == 0 or w["io_bytes"] == 0 or jobs["reader"]["error"] or jobs["writer"]["error"]:
    sys.exit("a job did no I/O or failed")
def us(x):
    return "%.1f" % (x / 1000.0)
rp, wp = r["clat_ns"]["percentile"], w["clat_ns"]["percentile"]
print("OK read_iops=%d read_mean_us=%s read_p99_us=%s read_p99.99_us=%s read_max_us=%s "
      "write_iops=%d write_p99_us=%s write_p99.99_us=%s write_max_us=%s"
      % (r["iops"], us(r["clat_ns"]["mean"]), us(rp["99.000000"]), us(rp["99.990000"]),
         us(r["clat_ns"]["max"]), w["iops"], us(wp["99.000000"]), us(wp["99.990000"]),
         us(w["clat_ns"]["max"])))
PY
	sed -i "s|\$|$daemon loadavg1=$(cut -d' ' -f1 /proc/loadavg)|" "$TMP/res"
}

# value of key $2 in a result line $1
field() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }

echo "# rwbench: corpus=$CORPUS size=${SIZE_MIB}MiB runtime=${RUNTIME}s rounds=$ROUNDS" \
	"runs=$(IFS=,; echo "${runs[*]}") writer_buffers=$BUFFERS" \
	"zswapfs_extra_opts=${XOPTS:-none} kernel=$(uname -r) cpus=$(nproc)" \
	"enable_uring=$(cat "$URING_PARAM" 2>/dev/null || echo absent)" \
	"loadavg=$(cut -d" " -f1-3 /proc/loadavg | tr " " /)"
printf '%s' "$notes"
echo "# fill: dd if=CORPUS of=DEV bs=1M count=$SIZE_MIB oflag=direct"
echo "# fio --output-format=json --percentile_list=50:99:99.9:99.99 --filename=DEV" \
	"--direct=1 --ioengine=psync --bs=4k --time_based --runtime=$RUNTIME" \
	"--name=writer --rw=randwrite --offset=${HALF}M --size=${HALF}M${FIO_BUF[*]:+ ${FIO_BUF[*]}}" \
	"--name=reader --rw=randread --offset=0 --size=${HALF}M"
echo "# zswapfs: $ZSWAPFS MNT -f -o size=${SIZE_MIB}M,algorithm=ALG,fuse_uring=false" \
	"(-ur: true)${XOPTS:+,$XOPTS}; losetup --find --show --direct-io=on MNT/swap"
for v in "${!VOPTS[@]}"; do
	echo "# zswapfs-$v: ${VBIN[$v]:-$ZSWAPFS} -o ...${VOPTS[$v]:+,${VOPTS[$v]}}"
done
echo "# zram: comp_algorithm=ALG disksize=${SIZE_MIB}M"

failed=0
declare -A res
for r in $(seq "$ROUNDS"); do
	for x in "${runs[@]}"; do
		if [ "${x%%:*}" = zswapfs-ur ] && ! uring_enabled; then
			printf 'round %d %-16s SKIPPED (%s is not Y; never changed here)\n' \
				"$r" "$x" "$URING_PARAM"
			continue
		fi
		if run_one "${x%%:*}" "${x#*:}"; then
			res[$x:$r]=$(cat "$TMP/res")
			printf 'round %d %-16s %s\n' "$r" "$x" "${res[$x:$r]#OK }"
		else
			teardown
			failed=1
			printf 'round %d %-16s FAILED\n' "$r" "$x"
		fi
	done
done

KEYS='read_iops read_mean_us read_p99_us read_p99.99_us read_max_us write_iops write_p99_us
write_p99.99_us write_max_us daemon_read_avg_us daemon_read_max_us daemon_write_avg_us
daemon_write_max_us'
declare -A med
echo "# medians over the rounds"
for x in "${runs[@]}"; do
	line=''
	for k in $KEYS; do
		vals=''
		for r in $(seq "$ROUNDS"); do
			[ -n "${res[$x:$r]+x}" ] && vals="$vals $(field "${res[$x:$r]}" "$k")"
		done
		vals=$(echo "$vals" | tr ' ' '\n' | grep . | paste -sd' ')
		[ -n "$vals" ] || continue
		med[$x:$k]=$(echo "$vals" | median)
		line="$line $k=${med[$x:$k]}"
	done
	printf '%-16s%s\n' "$x" "${line:- no run completed}"
done

# each zswapfs run against zram's (same algorithm where zram has it): ratio of the
# medians and the median (min..max) of the round-by-round ratios; then the issue's target
json_ratios=''
for x in "${runs[@]}"; do
	case $x in zram:*) continue ;; esac
	ref=${zref[${x#*:}]}
	if [ -z "$ref" ] || [ -z "${med[$ref:read_max_us]+x}" ] ||
		[ -z "${med[$x:read_max_us]+x}" ]; then
		continue
	fi
	for k in read_iops read_p99_us read_p99.99_us read_max_us; do
		list=''
		for r in $(seq "$ROUNDS"); do
			if [ -z "${res[$x:$r]+x}" ] || [ -z "${res[$ref:$r]+x}" ]; then continue; fi
			list="$list $(ratio "$(field "${res[$x:$r]}" "$k")" \
				"$(field "${res[$ref:$r]}" "$k")")"
		done
		rt=$(ratio "${med[$x:$k]}" "${med[$ref:$k]}")
		echo "ratio $x/$ref $k $rt  per round: $(echo "$list" | spread)"
		json_ratios="$json_ratios${json_ratios:+,}\"$x/$ref:$k\":$rt"
	done
	awk -v x="$x" -v ref="$ref" -v m="${med[$x:read_max_us]}" -v zm="${med[$ref:read_max_us]}" \
		-v t="${med[$x:read_p99.99_us]}" -v zt="${med[$ref:read_p99.99_us]}" 'BEGIN {
		printf "target %s: read max %s us vs %s us (no worse: %s), p99.99 %s us vs %s us" \
			" (within 5x: %s)\n", x, m, zm, (m + 0 <= zm + 0 ? "yes" : "NO"), t, zt,
			(t + 0 <= 5 * zt ? "yes" : "NO") }'
done

json_med=''
for x in "${runs[@]}"; do
	body=''
	for k in $KEYS; do
		[ -n "${med[$x:$k]+x}" ] && body="$body${body:+,}\"$k\":${med[$x:$k]}"
	done
	json_med="$json_med${json_med:+,}\"$x\":{$body}"
done
echo "{\"bench\":\"rwbench\",\"rounds\":$ROUNDS,\"runtime_s\":$RUNTIME,\"size_mib\":$SIZE_MIB," \
	"\"writer_buffers\":\"$BUFFERS\",\"medians\":{$json_med},\"ratios\":{$json_ratios}," \
	"\"failed\":$failed}" | sed 's/, "/,"/g'
exit $failed
