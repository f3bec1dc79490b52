#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Install what is needed, build, and run the whole test suite: unit tests
# and the integration tests against real mounts (as root), once in a normal
# build and once with AddressSanitizer and UBSan; `make distcheck` then
# checks that the tarball builds, tests and installs.  .ci/run runs exactly
# this.  Builds go to build/ and build-san/ beside the sources.
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
rm -rf build build-san
mkdir build
(cd build && ../configure && make -j"$(nproc)" && run_check)

echo "=== sanitizer build (ASan + UBSan)"
mkdir build-san
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
(cd build-san && ../configure --enable-sanitizers && make -j"$(nproc)" && run_check)
unset ASAN_OPTIONS UBSAN_OPTIONS

echo "=== distcheck"
# The integration tests ran twice above; in the tarball the unit tests say
# whether it builds and works.
(cd build && make distcheck TESTS="tests/check_codec tests/check_dict tests/check_arena tests/check_store tests/check_config tests/check_recompress tests/check_backing tests/check_writeback tests/check_uring")
echo "run-tests: all passed"
