#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# Install what building and testing zswapfs needs (Debian 12 package names).
set -e
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends \
	build-essential autoconf automake libtool pkg-config \
	libfuse3-dev fuse3 liblz4-dev libzstd-dev liblzo2-dev libconfig-dev liburing-dev libcap-ng-dev check \
	libssl-dev \
	fio util-linux mount procps kmod python3 groff-base man-db e2fsprogs strace systemd \
	clang libclang-rt-14-dev
