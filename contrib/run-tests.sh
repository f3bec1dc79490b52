#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Install what is needed, build, and run the whole test suite: unit tests
# and the integration tests against real mounts (as root), once in a normal
# build and once with AddressSanitizer and UBSan.  `make distcheck` then
# checks that the tarball builds and installs.  .ci/run runs exactly this.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

"$top/contrib/deps.sh"
autoreconf -fi

echo "=== normal build"
./configure
make -j"$(nproc)"
make check || { cat tests/*.log; exit 1; }

echo "=== sanitizer build (ASan + UBSan)"
rm -rf build-san
mkdir build-san
(cd build-san && ../configure --enable-sanitizers && make -j"$(nproc)" &&
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 make check) ||
	{ cat build-san/tests/*.log; exit 1; }

echo "=== distcheck"
# The integration tests ran twice above; in the tarball the unit tests say
# enough about whether it builds and works.
make distcheck TESTS="tests/check_codec tests/check_arena tests/check_store"
