#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# fuzz/run.sh SECONDS NAME...: run each harness fuzz/fuzz_NAME (built by
# `make fuzz` in a build configured with CC=clang --enable-fuzzing) for
# SECONDS, from the seed corpus and the kept cases of the source tree.
# Run from the build directory.  New inputs go to fuzz/work/NAME/ (kept
# between runs, so that later runs go on from there); a crash, a leak, a
# timeout or a broken invariant is saved under fuzz/crashes/NAME/ and makes
# the run fail, after all harnesses ran.  Minimize a crash with
#	fuzz/fuzz_NAME -minimize_crash=1 -runs=10000 fuzz/crashes/NAME/crash-...
# and keep it as tests/fuzz-cases/NAME/<what it is> (see fuzz/README).
set -u
secs=$1
shift
srcdir=$(cd "$(dirname "$0")/.." && pwd)
failed=""
names="$*"
# A known leak in libconfig, not ours: see the file.
LSAN_OPTIONS="suppressions=$srcdir/fuzz/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export LSAN_OPTIONS

for name in "$@"; do
	bin=fuzz/fuzz_$name
	work=fuzz/work/$name
	crashes=fuzz/crashes/$name
	log=fuzz/$name.log
	mkdir -p "$work" "$crashes"
	# Inputs large enough for what each harness reads: a command line, a
	# config file, a compressed page, part of a segment, an op sequence.
	# Value profiles help find checksums and lengths the data must match.
	# The store's inputs cost their set-up (a backing file) more than their
	# length: let them grow sooner than libFuzzer's default.
	case $name in
	control) opts="-max_len=300" ;;
	config) opts="-max_len=4096 -use_value_profile=1" ;;
	codec) opts="-max_len=8192 -use_value_profile=1" ;;
	backing) opts="-max_len=16384 -use_value_profile=1" ;;
	store) opts="-max_len=4096 -len_control=20" ;;
	*) opts="-max_len=8192" ;;
	esac
	# Corpus directories after the first are only read.
	dict=""
	[ -f "$srcdir/fuzz/$name.dict" ] && dict="-dict=$srcdir/fuzz/$name.dict"
	set -- "$work" "$srcdir/fuzz/corpus/$name"
	[ -d "$srcdir/tests/fuzz-cases/$name" ] && set -- "$@" "$srcdir/tests/fuzz-cases/$name"
	echo "fuzz $name: ${secs}s"
	# shellcheck disable=SC2086
	if ! "$bin" -max_total_time="$secs" -timeout=30 $opts $dict \
		-print_final_stats=1 -artifact_prefix="$crashes/" "$@" >"$log" 2>&1; then
		failed="$failed $name"
		echo "fuzz $name: FAILED; the end of $log:"
		tail -n 40 "$log"
		# The inputs, so that a CI log is enough to replay them.
		for f in "$crashes"/*; do
			[ -f "$f" ] || continue
			echo "--- $f"
			od -A d -t x1 "$f" | head -n 64
		done
	fi
	# The last status line: coverage, features, corpus; then speed.
	grep -E '^#[0-9]+.*(DONE|pulse|NEW|REDUCE)' "$log" | tail -n 1
	grep -E 'stat::(number_of_executed_units|average_exec_per_sec)' "$log"
done

if [ -n "$failed" ]; then
	echo "fuzz: crashes in:$failed"
	exit 1
fi
echo "fuzz: no crash in $names"
