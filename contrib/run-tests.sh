#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Install what is needed, build, and run the whole test suite: unit tests
# and the integration tests against real mounts (as root), once in a normal
# build and once with AddressSanitizer and UBSan; then a short pass of the
# libFuzzer harnesses (clang, FUZZ_SECONDS each, 20 by default); `make
# distcheck` then checks that the tarball builds, tests and installs.
# .ci/run runs exactly this.  Builds go to build/, build-san/ and
# build-fuzz/ beside the sources.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

"$top/contrib/deps.sh"
autoreconf -fi

# make check prints which tests failed; their logs say why.
run_check() {
	make check || { for f in tests/*.log; do echo "=== $f"; cat "$f"; done; exit 1; }
}

echo "=== normal build"
rm -rf build build-san build-fuzz
mkdir build
(cd build && ../configure && make -j"$(nproc)" && run_check)

echo "=== sanitizer build (ASan + UBSan)"
mkdir build-san
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
(cd build-san && ../configure --enable-sanitizers && make -j"$(nproc)" && run_check)
unset ASAN_OPTIONS UBSAN_OPTIONS

echo "=== fuzzing (libFuzzer, ${FUZZ_SECONDS:-20} s a harness)"
# A bounded pass from the seed corpus and the kept cases: it finds what a
# change breaks near known inputs; long runs are `make fuzz FUZZ_SECONDS=600`.
mkdir build-fuzz
(cd build-fuzz && ../configure CC=clang --enable-fuzzing &&
	make -j"$(nproc)" fuzz FUZZ_SECONDS="${FUZZ_SECONDS:-20}")

echo "=== distcheck"
# The integration tests ran twice above, and so did every unit test; in the
# tarball, building every test program (make check builds them all) and
# running the quick unit tests say whether it builds and works.  The three
# slow ones (check_restart, check_writeback, check_recompress: 40 s of the
# 70) would only repeat, from the same sources, what the builds above ran.
(cd build && make distcheck TESTS="$(make -s print-unit-tests | tr ' ' '\n' |
	grep -v -e check_restart -e check_writeback -e check_recompress | tr '\n' ' ')")
echo "run-tests: all passed"
