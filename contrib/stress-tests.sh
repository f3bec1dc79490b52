#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# stress-tests.sh - show that the timing-sensitive tests do not depend on the
# machine's speed: run each of them RUNS times in each of four modes and print
# a table of passes/runs per test and mode.
#
#   contrib/stress-tests.sh [-n RUNS] [-m MODES] [-b BUILDDIR] [-s SANBUILDDIR]
#                           [-o OUTDIR] [-t] [TEST...]
#
# MODES (comma separated, default a,b,c,d):
#   a  quiet: make -C BUILDDIR check TESTS=tests/TEST
#   b  the same with every CPU busy (stress-ng --cpu $(nproc) alongside)
#   c  the same on one CPU (taskset -c 0 make ...)
#   d  the sanitizer build SANBUILDDIR (ASan + UBSan, the options of
#      contrib/run-tests.sh)
# TEST is a name under tests/ (restart.sh, check_reserve, or tests/restart.sh);
# by default the tests that wait for threads, timers or restarts.  RUNS: 3.
# BUILDDIR, SANBUILDDIR: build/ and build-san/ beside the sources, each
# configured and built here when it has no Makefile (--enable-sanitizers for
# the second); both are brought up to date before the runs.  OUTDIR
# (BUILDDIR/stress-tests) gets a line "test mode rc seconds" in OUTDIR/results
# for every run (rc 77: skipped), and the log of every failed run, as
# TEST.MODE.N.log.  Calls add to the same results, so a campaign longer than
# one sitting can go a slice at a time (-m b restart.sh) and the table covers
# them all; -t only prints it.  Remove OUTDIR to start over.  Exit status: 1
# if a run of this call failed (with -t: any run in the results), else 0.
#
# Each run holds /tmp/zswapfs-systest.lock (flock), where the other swap and
# mount tests of this machine wait; the load of mode b runs only while it is
# held.  Needs root for most tests, as make check does.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
lock=/tmp/zswapfs-systest.lock
me=stress-tests

usage() {
	sed -n '4,/^set -eu/{/^set -eu/d; s/^# \{0,1\}//; p}' "$0" >&2
	exit 2
}

runs=3 modes=a,b,c,d build=$top/build san=$top/build-san out='' table_only=''
while getopts n:m:b:s:o:th opt; do
	case $opt in
	n) runs=$OPTARG ;;
	m) modes=$OPTARG ;;
	b) build=$OPTARG ;;
	s) san=$OPTARG ;;
	o) out=$OPTARG ;;
	t) table_only=1 ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
case $runs in '' | *[!0-9]* | 0) echo "$me: -n wants a count of runs" >&2; exit 2 ;; esac
modes=${modes//,/ }
for m in $modes; do
	case $m in a | b | c | d) ;; *) echo "$me: no mode '$m' (a, b, c, d)" >&2; exit 2 ;; esac
done
[ -n "$modes" ] || usage
abspath() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
build=$(abspath "$build") san=$(abspath "$san")
out=$(abspath "${out:-$build/stress-tests}")
results=$out/results

if [ $# -eq 0 ]; then
	set -- restart.sh lifecycle.sh recompress.sh dict.sh access.sh check_reserve check_recompress
fi
tests=()
for t in "$@"; do
	t=${t#tests/}
	[ -f "$top/tests/$t" ] || [ -f "$top/tests/$t.c" ] ||
		{ echo "$me: no test tests/$t" >&2; exit 2; }
	tests+=("$t")
done

label() {
	case $1 in a) echo quiet ;; b) echo cpu-busy ;; c) echo one-cpu ;; d) echo sanitizer ;; esac
}

# The table of OUTDIR/results: test x mode -> passes/runs, with the slowest
# run's seconds; then the failed runs and where their logs are.
print_table() {
	[ -s "$results" ] || { echo "$me: no results in $results"; return 0; }
	awk -v out="$out" '
		function cell(k) {
			if (!(k in n))
				return "-"
			return pass[k] + 0 "/" n[k] (skip[k] ? " (" skip[k] " skip)" : "") " " max[k] "s"
		}
		NF >= 4 {
			k = $1 " " $2
			if (!($1 in seen)) { seen[$1] = 1; order[++nt] = $1 }
			if (!(k in n)) max[k] = 0
			n[k]++
			if ($3 == 0) pass[k]++
			else if ($3 == 77) skip[k]++
			else { nf++; failed[nf] = sprintf("%s/%s.%s.%d.log (rc %d, %d s)", out, $1, $2, n[k], $3, $4) }
			if ($4 > max[k]) max[k] = $4
			if ($1 != "" && length($1) > w) w = length($1)
		}
		END {
			split("a b c d", m, " ")
			split("quiet cpu-busy one-cpu sanitizer", lab, " ")
			printf "%-*s", w + 2, "test"
			for (j = 1; j <= 4; j++) printf "  %-18s", m[j] ":" lab[j]
			printf "\n"
			for (i = 1; i <= nt; i++) {
				printf "%-*s", w + 2, order[i]
				for (j = 1; j <= 4; j++) printf "  %-18s", cell(order[i] " " m[j])
				printf "\n"
			}
			printf "(passes/runs, slowest run in seconds; results: %s/results)\n", out
			if (nf) {
				printf "%d failed run(s), logs in %s:\n", nf, out
				for (i = 1; i <= nf; i++) printf "  %s\n", failed[i]
			}
			exit (nf > 0)
		}' "$results"
}

if [ -n "$table_only" ]; then
	print_table
	exit
fi

case " $modes " in
*" b "*) command -v stress-ng >/dev/null ||
	{ echo "$me: mode b needs stress-ng (apt-get install stress-ng)" >&2; exit 2; } ;;
esac

# ---- builds ----------------------------------------------------------------
need_build='' need_san=''
for m in $modes; do
	case $m in d) need_san=1 ;; *) need_build=1 ;; esac
done
jobs=$(nproc)
prepare() { # DIR [CONFIGURE-ARGS...]: configure if needed, build the tests' programs
	local dir=$1
	shift
	if [ ! -f "$dir/Makefile" ]; then
		[ -x "$top/configure" ] || (cd "$top" && autoreconf -fi)
		echo "=== $me: configuring $dir $*"
		mkdir -p "$dir"
		(cd "$dir" && "$top/configure" "$@")
	fi
	echo "=== $me: building $dir"
	# check with no tests builds what the tests run, so no run times a compile
	if ! make -s -C "$dir" -j"$jobs" >/dev/null ||
		! make -s -C "$dir" -j"$jobs" check TESTS= >/dev/null; then
		echo "$me: building $dir failed" >&2
		exit 1
	fi
}
[ -z "$need_build" ] || prepare "$build"
if [ -n "$need_san" ]; then
	if [ -f "$san/config.status" ] &&
		! "$san/config.status" --config | grep -q -- --enable-sanitizers; then
		echo "$me: $san is not configured with --enable-sanitizers" >&2
		exit 2
	fi
	prepare "$san" --enable-sanitizers
fi
mkdir -p "$out"

# ---- runs ------------------------------------------------------------------
stress_pid=
stop_stress() {
	[ -n "$stress_pid" ] || return 0
	kill -TERM "$stress_pid" 2>/dev/null || true
	wait "$stress_pid" 2>/dev/null || true
	stress_pid=
}
mkout=$out/make.$$.out
trap 'stop_stress; rm -f "$mkout"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

failures=0
run_one() { # TEST MODE ROUND
	local t=$1 m=$2 dir=$build rc n start secs log res st
	[ "$m" != d ] || dir=$san
	log=$dir/tests/$t.log
	# (fd 9, the lock, is closed in every child: a daemon a test leaves
	# behind must not hold it for the machine)
	exec 9>>"$lock"
	if ! flock -n 9; then
		echo "=== $me: waiting for $lock"
		flock 9
	fi
	rm -f "$log" "$dir/tests/$t.trs"	# a run that makes none leaves no old one
	if [ "$m" = b ]; then
		stress-ng --cpu "$jobs" --quiet 9>&- >/dev/null 2>&1 &
		stress_pid=$!
		sleep 1
		kill -0 "$stress_pid" 2>/dev/null || { echo "$me: stress-ng did not start" >&2; exit 1; }
	fi
	echo "=== $me: $t, mode $m ($(label "$m")), run $3 of $runs"
	start=$(date +%s)
	rc=0
	case $m in
	a | b) make -s -C "$dir" check TESTS="tests/$t" 9>&- >"$mkout" 2>&1 || rc=$? ;;
	c) taskset -c 0 make -s -C "$dir" check TESTS="tests/$t" 9>&- >"$mkout" 2>&1 || rc=$? ;;
	d) ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
		make -s -C "$dir" check TESTS="tests/$t" 9>&- >"$mkout" 2>&1 || rc=$? ;;
	esac
	secs=$(($(date +%s) - start))
	stop_stress
	# make check passes a skipped test (its .trs says so) and fails a failed
	# one with status 2: rc is the test's own, from the last line of its log
	res=$(sed -n 's/^:test-result: //p' "$dir/tests/$t.trs" 2>/dev/null || true)
	[ "$rc" -ne 0 ] || [ "$res" != SKIP ] || rc=77
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] && [ -f "$log" ]; then
		st=$(tail -n 1 "$log" | sed -n 's/.*(exit status: \([0-9]*\))$/\1/p')
		[ -z "$st" ] || [ "$st" -eq 0 ] || rc=$st
	fi
	n=$(($(awk -v t="$t" -v m="$m" '$1 == t && $2 == m' "$results" 2>/dev/null | wc -l) + 1))
	echo "$t $m $rc $secs" >>"$results"
	case $rc in
	0) echo "=== $me: PASS $t ($m) in $secs s" ;;
	77)
		echo "=== $me: SKIP $t ($m):"
		tail -n 3 "$log" 2>/dev/null || true
		;;
	*)
		failures=$((failures + 1))
		if [ -f "$log" ]; then
			cp "$log" "$out/$t.$m.$n.log"
			echo "=== $me: FAIL $t ($m) after $secs s, rc $rc; the end of its log ($out/$t.$m.$n.log):"
			tail -n 30 "$log"
		else
			cp "$mkout" "$out/$t.$m.$n.log"
			echo "=== $me: FAIL $t ($m), rc $rc, no test log; make said:"
			tail -n 30 "$mkout"
		fi
		;;
	esac
	flock -u 9
	exec 9>&-
}

# Round by round, so a campaign cut short has every test and mode in it.
for ((r = 1; r <= runs; r++)); do
	for t in "${tests[@]}"; do
		for m in $modes; do
			run_one "$t" "$m" "$r"
		done
	done
done

echo
print_table || true
[ "$failures" -eq 0 ]
